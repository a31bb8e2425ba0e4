/* Kernel launches: kernels found by name in the fatbins of the running op's registry (the
 * application's, or its package's; each fatbin loaded as a module on a device at first need),
 * tk_wrap's boxed arguments checked against the kernel's parameters and unboxed into their exact
 * C types, cuLaunchKernel on the context's stream. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TK_HAVE_CUDA_HEADERS
#include "cuda_driver.h"

/* More than any kernel takes in practice; tk_wrap itself stops at 24. */
#define TK_MAX_KERNEL_ARGS 256

/* A kernel found on a device: its function and, where the driver can say, its parameter sizes. */
typedef struct tk_cu_kernel {
    char *name; /* the key of the device's map: registry, name and configuration */
    tk_cu_module *mod; /* the module it was found in */
    CUfunction fn;
    int nparams; /* -1 when the driver cannot tell (before CUDA 12.4) */
    size_t *param_size;
    _Atomic size_t shared_optin; /* dynamic shared memory the function is opted in to past 48 KiB */
    struct tk_cu_kernel *next_retired;
} tk_cu_kernel;

static void kernel_free(tk_cu_kernel *k)
{
    if (!k)
        return;
    free(k->name);
    free(k->param_size);
    free(k);
}

static int mark_live(const tk_fatbin_node *node, void *arg)
{
    for (tk_cu_module *m = arg; m; m = m->next)
        if (m->node == node && m->serial == node->serial)
            m->live = 1;
    return 0;
}

/* After a fatbin left a registry (its object unloaded, its package closed): unload the modules
 * whose fatbin is in no registry any more, and forget the kernels found in them. Forgotten
 * entries are retired, not freed: another thread may be launching through one it looked up just
 * before. Kernels of modules still in use stay (another package's keep running undisturbed). */
static void forget_stale(tk_cu_device *d)
{
    unsigned gen = tk_fatbin_generation();
    if (d->fatbin_gen == gen)
        return;
    for (tk_cu_module *m = d->modules; m; m = m->next)
        m->live = 0;
    tk_fatbin_foreach_all(mark_live, d->modules);
    tk_map keep = TK_MAP_INIT;
    for (size_t i = 0; i < d->kernels.cap; i++) {
        tk_cu_kernel *k = d->kernels.keys[i] ? d->kernels.vals[i] : NULL;
        if (k && (!k->mod->live || tk_map_put(&keep, k->name, k))) {
            k->next_retired = d->retired;
            d->retired = k;
        }
    }
    tk_map_release(&d->kernels);
    d->kernels = keep;
    for (tk_cu_module **pm = &d->modules; *pm;) {
        tk_cu_module *m = *pm;
        if (m->live) {
            pm = &m->next;
            continue;
        }
        if (m->module)
            cuModuleUnload(m->module);
        *pm = m->next;
        free(m);
    }
    d->fatbin_gen = gen;
}

static void forget_stale_locked(tk_cu_device *d)
{
    pthread_mutex_lock(&d->lock);
    forget_stale(d);
    pthread_mutex_unlock(&d->lock);
}

void tk_cuda_unload_stale(void)
{
    tk_cu_foreach_ready(forget_stale_locked);
}

typedef struct search {
    tk_cu_device *dev;
    const char *name;
    int config;           /* the tuning configuration whose variant is wanted (0: the default) */
    CUfunction fn;
    tk_cu_module *mod;    /* where fn was found */
    int rc;               /* a failure that stops the search (out of memory, a driver error) */
    char load_error[512]; /* the first fatbin that could not be loaded on this device */
} search;

/* The configuration a fatbin holds variants of: N for a name ending in "@cN", else 0. */
static int node_config(const tk_fatbin_node *node)
{
    const char *at = node->name ? strrchr(node->name, '@') : NULL;
    return at && at[1] == 'c' ? atoi(at + 2) : 0;
}

static int search_node(const tk_fatbin_node *node, void *arg)
{
    search *s = arg;
    tk_cu_module *m;
    if (node_config(node) != s->config)
        return 0;
    for (m = s->dev->modules; m; m = m->next)
        if (m->node == node && m->serial == node->serial)
            break;
    if (!m) {
        m = calloc(1, sizeof(*m));
        if (!m) {
            s->rc = tk_error_set(TK_ENOMEM, "out of memory");
            return 1;
        }
        m->node = node;
        m->serial = node->serial;
        m->next = s->dev->modules;
        s->dev->modules = m;
        CUresult r = cuModuleLoadData(&m->module, node->image);
        if (r != CUDA_SUCCESS) {
            /* typically no cubin and no PTX this GPU can use; remembered so that a kernel that
             * is then not found says why, and not retried on every launch */
            m->module = NULL;
            if (!s->load_error[0]) {
                tk_cu_fail(r, "cuModuleLoadData(image)", __FILE__, __LINE__);
                snprintf(s->load_error, sizeof(s->load_error), "; fatbin '%s' could not be loaded: %s",
                         node->name ? node->name : "?", tk_error_last());
            }
        }
    }
    if (!m->module)
        return 0;
    /* not through TK_CU_CHECK: CUDA_ERROR_NOT_FOUND is an answer here, not a failure */
    CUresult r = cuModuleGetFunction(&s->fn, m->module, s->name);
    if (r == CUDA_ERROR_NOT_FOUND)
        return 0;
    s->mod = m;
    if (r != CUDA_SUCCESS)
        s->rc = tk_cu_fail(r, "cuModuleGetFunction(&fn, module, name)", __FILE__, __LINE__);
    return 1;
}

int tk_cu_param_layout(CUfunction fn, size_t *offsets, size_t *sizes, int max)
{
    if (!tk_cu.FuncGetParamInfo)
        return -1;
    size_t count = 0;
    int n = 0, limit = max, counted = 0;
    if (tk_cu.FuncGetParamCount && tk_cu.FuncGetParamCount(fn, &count) == CUDA_SUCCESS) {
        if (count >= (size_t)max)
            return -1;
        limit = (int)count, counted = 1;
    }
    for (; n < limit; n++) {
        size_t offset, size;
        CUresult r = cuFuncGetParamInfo(fn, (size_t)n, &offset, &size);
        if (r == CUDA_ERROR_INVALID_VALUE && !counted)
            break; /* probing: past the last parameter */
        if (r != CUDA_SUCCESS)
            return -1; /* counted: a parameter the driver does not describe, so no layout */
        if (offsets)
            offsets[n] = offset;
        sizes[n] = size;
    }
    return n == max ? -1 : n;
}

/* k's parameter sizes (tk_cu_param_layout); none known: launched unchecked */
static int param_info(tk_cu_kernel *k)
{
    size_t sizes[TK_MAX_KERNEL_ARGS];
    k->nparams = -1;
    int n = tk_cu_param_layout(k->fn, NULL, sizes, TK_MAX_KERNEL_ARGS);
    if (n < 0)
        return 0;
    k->param_size = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    if (!k->param_size)
        return tk_error_set(TK_ENOMEM, "out of memory");
    memcpy(k->param_size, sizes, sizeof(size_t) * (size_t)n);
    k->nparams = n;
    return 0;
}

/* The kernel `name` (of tuning configuration `config`, 0 for untuned kernels and defaults) among
 * the fatbins of registry r. */
static int kernel_find(tk_cu_device *d, tk_registry *r, const char *name, int config, tk_cu_kernel **out)
{
    int rc = 0;
    tk_cu_kernel *k = NULL;
    char key[340];
    snprintf(key, sizeof key, "%p/%s@c%d", (void *)r, name, config);
    pthread_mutex_lock(&d->lock);
    forget_stale(d);
    *out = tk_map_get(&d->kernels, key);
    if (*out)
        goto done;
    search s = {.dev = d, .name = name, .config = config};
    int found = tk_fatbin_foreach(r, search_node, &s);
    if (found < 0) {
        rc = found;
        goto done;
    }
    if (!found) {
        if (config)
            rc = tk_error_set(TK_ENOTFOUND, "kernel '%s' configuration %d is not in any fatbin of %s%s", name, config,
                              r->origin ? r->origin : "the application", s.load_error);
        else if (r->origin)
            rc = tk_error_set(TK_ENOTFOUND, "kernel '%s' is not in any fatbin of %s%s", name, r->origin, s.load_error);
        else
            rc = tk_error_set(TK_ENOTFOUND, "kernel '%s' is not in any loaded fatbin (built with tk_add_kernels?)%s",
                              name, s.load_error);
        goto done;
    }
    if ((rc = s.rc))
        goto done;
    k = calloc(1, sizeof(*k));
    if (!k || !(k->name = strdup(key))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    k->fn = s.fn;
    k->mod = s.mod;
    if ((rc = param_info(k)) || (rc = tk_map_put(&d->kernels, k->name, k)))
        goto done;
    *out = k;
    k = NULL;
done:
    kernel_free(k);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* "a 4-byte integer", for messages about an argument of the given kind and size. */
static const char *describe(const tk_arg *a, char *buf, size_t n)
{
    switch (a->kind) {
    case TK_ARG_TENSOR:
        snprintf(buf, n, "a tensor (%s %u-byte device pointer)", a->size == 8 ? "an" : "a", a->size);
        break;
    case TK_ARG_INT:
        snprintf(buf, n, "%s %u-byte integer", a->size == 8 ? "an" : "a", a->size);
        break;
    case TK_ARG_UINT:
        snprintf(buf, n, "%s %u-byte unsigned integer", a->size == 8 ? "an" : "a", a->size);
        break;
    case TK_ARG_FLOAT:
        snprintf(buf, n, "%s", a->size == 4 ? "a float" : a->size == 8 ? "a double" : "a floating-point value");
        break;
    default:
        snprintf(buf, n, "a %u-byte pointer", a->size);
        break;
    }
    return buf;
}

/* Writes the argument in its exact C type into slot (8-byte aligned, 8 bytes). */
static int unbox(tk_ctx *ctx, const char *kname, int i, const tk_arg *a, uint64_t *slot)
{
    char what[64], dev[32], want[32];
    switch (a->kind) {
    case TK_ARG_TENSOR: {
        const tk_tensor *t = a->v.tensor;
        if (t && (t->device.kind != TK_DEVICE_CUDA || t->device.index != ctx->device.index))
            return tk_error_set(TK_EINVAL, "argument %d of kernel '%s' is a tensor on %s, expected %s", i + 1, kname,
                                tk_device_name(t->device, dev, sizeof(dev)),
                                tk_device_name(ctx->device, want, sizeof(want)));
        CUdeviceptr p = t ? (CUdeviceptr)(uintptr_t)t->data : 0;
        if (a->size != sizeof(p))
            break;
        memcpy(slot, &p, sizeof(p));
        return 0;
    }
    case TK_ARG_INT:
    case TK_ARG_UINT: {
        /* two's complement: the low bytes of the 64-bit value are the value in the smaller type */
        uint64_t bits = a->kind == TK_ARG_INT ? (uint64_t)a->v.i : a->v.u;
        if (a->size == 1) {
            uint8_t v = (uint8_t)bits;
            memcpy(slot, &v, 1);
        } else if (a->size == 2) {
            uint16_t v = (uint16_t)bits;
            memcpy(slot, &v, 2);
        } else if (a->size == 4) {
            uint32_t v = (uint32_t)bits;
            memcpy(slot, &v, 4);
        } else if (a->size == 8) {
            memcpy(slot, &bits, 8);
        } else {
            break;
        }
        return 0;
    }
    case TK_ARG_FLOAT:
        if (a->size == 4) {
            float v = (float)a->v.f;
            memcpy(slot, &v, 4);
        } else if (a->size == 8) {
            double v = a->v.f;
            memcpy(slot, &v, 8);
        } else {
            break;
        }
        return 0;
    case TK_ARG_PTR:
        if (a->size != sizeof(a->v.ptr))
            break;
        memcpy(slot, &a->v.ptr, sizeof(a->v.ptr));
        return 0;
    }
    return tk_error_set(TK_EINVAL, "argument %d of kernel '%s' is %s, which tk_wrap cannot pass", i + 1, kname,
                        describe(a, what, sizeof(what)));
}

/* Every block may have 48 KiB of shared memory; more needs the function's opt-in, up to what the
 * device allows a block (asked once per device). A race between two threads sets the same value. */
#define TK_SHARED_DEFAULT (48u * 1024u)

static int shared_opt_in(tk_cu_device *d, tk_cu_kernel *k, const char *kname, size_t shared)
{
    int rc = 0;
    if (shared <= TK_SHARED_DEFAULT || shared <= atomic_load_explicit(&k->shared_optin, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&d->lock);
    if (!d->shared_optin) {
        int v = 0;
        TK_CU_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d->dev));
        d->shared_optin = v > 0 ? v : (int)TK_SHARED_DEFAULT;
    }
    if (shared > (size_t)d->shared_optin) {
        rc = tk_error_set(TK_EINVAL, "kernel '%s' asks for %zu bytes of dynamic shared memory; cuda:%d gives a block "
                          "at most %d", kname, shared, d->ordinal, d->shared_optin);
        goto done;
    }
    TK_CU_CHECK(cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared));
    atomic_store_explicit(&k->shared_optin, shared, memory_order_release);
done:
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int tk_cuda_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, size_t shared, int nargs,
                   const tk_arg *args)
{
    tk_cu_device *d;
    tk_cu_kernel *k;
    char what[64];
    uint64_t slots[TK_MAX_KERNEL_ARGS];
    void *params[TK_MAX_KERNEL_ARGS];
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    if (nargs < 0 || nargs > TK_MAX_KERNEL_ARGS || (nargs && !args))
        return tk_error_set(TK_EINVAL, "kernel '%s' launched with %d arguments (at most %d)", kernel->name, nargs,
                            TK_MAX_KERNEL_ARGS);
    tk_registry *scope = ctx->scope ? ctx->scope : tk_registry_process();
    if ((rc = kernel_find(d, scope, kernel->name, tk_tune_config_for(ctx, kernel), &k)))
        return rc;
    if (k->nparams >= 0 && k->nparams != nargs)
        return tk_error_set(TK_EINVAL, "kernel '%s' takes %d parameter%s, tk_wrap passed %d", kernel->name,
                            k->nparams, k->nparams == 1 ? "" : "s", nargs);
    for (int i = 0; i < nargs; i++) {
        if (k->nparams >= 0 && k->param_size[i] != args[i].size)
            return tk_error_set(TK_EINVAL, "kernel '%s' parameter %d takes %zu bytes, tk_wrap passed %s", kernel->name,
                                i + 1, k->param_size[i], describe(&args[i], what, sizeof(what)));
        slots[i] = 0;
        if ((rc = unbox(ctx, kernel->name, i, &args[i], &slots[i])))
            return rc;
        params[i] = &slots[i];
    }
    if ((rc = shared_opt_in(d, k, kernel->name, shared)))
        return rc;
    TK_CU_CHECK(cuLaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, (unsigned)shared,
                               ctx->cuda->stream, nargs ? params : NULL, NULL));
done:
    return rc;
}

#else /* built without the CUDA headers (runtime/cuda.c says so at context creation) */
#include "rt_internal.h"

void tk_cuda_unload_stale(void)
{
}

int tk_cuda_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, size_t shared, int nargs,
                   const tk_arg *args)
{
    (void)ctx, (void)grid, (void)block, (void)shared, (void)nargs, (void)args;
    return tk_error_set(TK_EDEVICE, "no CUDA driver: kernel '%s' cannot launch, libtkrt was built without the CUDA "
                                    "toolkit's headers", kernel->name);
}
#endif
