/* cuBLASLt through dlopen: the library found on the loader path or under the CUDA toolkit, its
 * functions in a table (runtime/cublaslt.h); per GPU one handle and tk::linear's plan cache; per
 * context a workspace and the matmul descriptors. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublaslt.h"
#include "log.h"
#include "lt_cache.h"

#ifdef TK_HAVE_CUDA_HEADERS
#include "cuda_driver.h"
#include "strbuf.h"

#ifndef TK_DEFAULT_CUDA_HOME
#define TK_DEFAULT_CUDA_HOME "/usr/local/cuda"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[1024];
static void *lib;
static tk_cublaslt api;

/* libcublasLt.so.N needs a driver of CUDA N or newer: try the one of the driver's major first. */
static void load(void)
{
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    int version = 0;
    if (tk_cu_load() == 0)
        cuDriverGetVersion(&version);
    if (version && version < 13000) {
        names[0] = "libcublasLt.so.12";
        names[1] = "libcublasLt.so.13";
    }
    const char *homes[] = {getenv("CUDA_HOME"), TK_DEFAULT_CUDA_HOME};
    tk_strbuf tried = TK_STRBUF_INIT;
    char path[4096], last[512] = "";
    const char *found = NULL;
    for (size_t h = 0; h <= 2 && !lib; h++) {
        for (size_t i = 0; i < 3 && !lib; i++) {
            if (h == 0) {
                snprintf(path, sizeof(path), "%s", names[i]);
            } else {
                if (!homes[h - 1] || !homes[h - 1][0])
                    break;
                snprintf(path, sizeof(path), "%s/lib64/%s", homes[h - 1], names[i]);
            }
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) {
                found = path;
            } else {
                const char *why = dlerror();
                snprintf(last, sizeof(last), "%s", why ? why : "?");
                tk_strbuf_addf(&tried, "%s%s", tried.len ? ", " : "", path);
            }
        }
    }
    if (!lib) {
        snprintf(load_msg, sizeof(load_msg), "no cuBLASLt: could not load %s (%s)", tried.buf ? tried.buf : "it",
                 last);
        load_rc = TK_EDEVICE;
        goto done;
    }
#define SYM(field)                                                                           \
    do {                                                                                     \
        void *sym = dlsym(lib, "cublasLt" #field);                                           \
        if (!sym) {                                                                          \
            snprintf(load_msg, sizeof(load_msg), "no cuBLASLt: %.400s has no cublasLt" #field, found); \
            load_rc = TK_EDEVICE;                                                            \
            goto done;                                                                       \
        }                                                                                    \
        memcpy(&api.field, &sym, sizeof(sym));                                               \
    } while (0)
    SYM(Create);
    SYM(Destroy);
    SYM(MatmulDescCreate);
    SYM(MatmulDescDestroy);
    SYM(MatmulDescSetAttribute);
    SYM(MatrixLayoutCreate);
    SYM(MatrixLayoutDestroy);
    SYM(MatrixLayoutSetAttribute);
    SYM(Matmul);
    SYM(MatmulPreferenceCreate);
    SYM(MatmulPreferenceSetAttribute);
    SYM(MatmulPreferenceDestroy);
    SYM(MatmulAlgoGetHeuristic);
    SYM(MatmulAlgoCheck);
    SYM(GetStatusString);
#undef SYM
done:
    tk_strbuf_release(&tried);
}

/* Plans kept per GPU: the MLP of examples/mlp over every batch in [1, 1024] needs 2 x 1024 plans
 * and 2 x 11 bucket algorithms; a plan is three layouts and an algorithm (about a kilobyte). */
#define PLAN_CAPACITY 4096

/* What one GPU keeps, in tk_cu_device's cublaslt (published once, read without the lock). */
typedef struct lt_device {
    cublasLtHandle_t handle;
    tk_lt_cache *plans;
    tk_lt_counters counters;
    size_t workspace; /* bytes each context gets */
} lt_device;

void tk_lt_plan_free_layouts(tk_lt_plan *p)
{
    if (p->d)
        api.MatrixLayoutDestroy(p->d);
    if (p->b)
        api.MatrixLayoutDestroy(p->b);
    if (p->a)
        api.MatrixLayoutDestroy(p->a);
    p->a = p->b = p->d = NULL;
}

void tk_lt_plan_free(void *plan, void *arg)
{
    (void)arg;
    if (plan) {
        tk_lt_plan_free_layouts(plan);
        free(plan);
    }
}

/* The workspace a context lends cuBLASLt: $TK_CUBLASLT_WORKSPACE bytes when set, else none.
 * None by default, measured on the H100 (2026-11-23, tests/test_kernels_gpu.c): with the 32 MiB
 * the cuBLAS documentation recommends for Hopper, the heuristic picked an algorithm whose bf16
 * result for a 33x72x40 product with unaligned operands was 7 ulps off the float reference (0.1055
 * for 0.1021), with or without split-K in the compute type; without a workspace every product of
 * the suite is within 1e-3, and examples/mlp matches PyTorch bit for bit (bench/e2e). */
static size_t workspace_bytes(int ordinal)
{
    (void)ordinal;
    const char *env = getenv("TK_CUBLASLT_WORKSPACE");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (!errno && !*end && *env != '-' && v <= (1ull << 34))
            return (size_t)v;
        tk_log(TK_LOG_WARN, "TK_CUBLASLT_WORKSPACE='%s' is not a byte count up to 2^34; using none", env);
    }
    return 0;
}

/* The GPU's state, made by the first caller. */
static int device_state(tk_cu_device *d, lt_device **out)
{
    int rc = 0;
    lt_device *dev = __atomic_load_n(&d->cublaslt, __ATOMIC_ACQUIRE);
    if (dev) {
        *out = dev;
        return 0;
    }
    size_t workspace = workspace_bytes(d->ordinal); /* before the lock: it may log */
    pthread_mutex_lock(&d->lock);
    dev = d->cublaslt;
    if (!dev) {
        cublasStatus_t st;
        if (!(dev = calloc(1, sizeof *dev))) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
        } else if ((st = api.Create(&dev->handle)) != CUBLAS_STATUS_SUCCESS) {
            rc = tk_error_set(TK_EDEVICE, "cublasLtCreate(&handle) failed on 'cuda:%d': %s", d->ordinal,
                              api.GetStatusString(st));
        } else if (!(rc = tk_lt_cache_new(&dev->plans, PLAN_CAPACITY, tk_lt_plan_free, NULL))) {
            dev->workspace = workspace;
            __atomic_store_n(&d->cublaslt, (void *)dev, __ATOMIC_RELEASE);
        }
        if (rc && dev) {
            if (dev->handle)
                api.Destroy(dev->handle);
            free(dev);
            dev = NULL;
        }
    }
    pthread_mutex_unlock(&d->lock);
    *out = dev;
    return rc;
}

int tk_cublaslt_get(tk_ctx *ctx, tk_cublaslt_ref *out)
{
    char name[32];
    tk_cu_device *d;
    lt_device *dev;
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!ctx || ctx->device.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EUNSUPPORTED, "cuBLASLt needs a context on a CUDA device, got %s%s%s",
                            ctx ? "one on '" : "none", ctx ? tk_device_name(ctx->device, name, sizeof(name)) : "",
                            ctx ? "'" : "");
    if ((rc = tk_cu_enter(ctx, &d)))
        return rc;
    pthread_once(&load_once, load);
    if (load_rc)
        return tk_error_set(load_rc, "%s", load_msg);
    if ((rc = device_state(d, &dev)))
        return rc;
    tk_lt_ctx *local = ctx->cuda->lt;
    if (!local && !(local = ctx->cuda->lt = calloc(1, sizeof *local)))
        return tk_error_set(TK_ENOMEM, "out of memory");
    /* a context that captures for another's stream (the executor's capture thread) lends that
     * context's workspace: its graphs run on that stream, after and before that context's own
     * matmuls, never beside them; so both pick the same algorithms */
    tk_lt_ctx *owner = ctx->stream_owner && ctx->stream_owner->cuda ? ctx->stream_owner->cuda->lt : NULL;
    if (!local->workspace_done && owner && owner->workspace_done) {
        local->workspace_done = 1;
        local->workspace_borrowed = 1;
        local->workspace = owner->workspace;
        local->workspace_size = owner->workspace_size;
    }
    /* memory made under a capture would not belong to the graph: wait for an eager call */
    if (!local->workspace_done && !ctx->cuda->capturing && !ctx->stream_owner) {
        local->workspace_done = 1;
        if (dev->workspace && tk_cuda_alloc(ctx, &local->workspace, dev->workspace) == 0)
            local->workspace_size = dev->workspace;
        else
            tk_error_clear(); /* none: cuBLASLt picks among the algorithms that need none */
    }
    out->api = &api;
    out->handle = dev->handle;
    out->plans = dev->plans;
    out->counters = &dev->counters;
    out->local = local;
    return 0;
}

void tk_cublaslt_ctx_release(tk_ctx *ctx)
{
    tk_lt_ctx *local = ctx && ctx->cuda ? ctx->cuda->lt : NULL;
    if (!local)
        return;
    if (local->workspace && !local->workspace_borrowed) {
        /* the stream's queued matmuls may still use it */
        if (tk_cu.CtxSetCurrent(ctx->cuda->dev->pctx) == CUDA_SUCCESS &&
            tk_cu.StreamSynchronize(ctx->cuda->stream) == CUDA_SUCCESS)
            tk_cu.MemFree((CUdeviceptr)(uintptr_t)local->workspace);
    }
    for (int i = 0; i < TK_LT_NDESC; i++)
        if (local->desc[i])
            api.MatmulDescDestroy(local->desc[i]);
    free(local);
    ctx->cuda->lt = NULL;
}

int tk_linear_stats_get(tk_ctx *ctx, tk_linear_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!ctx || !ctx->cuda)
        return tk_error_set(TK_EUNSUPPORTED, "tk::linear's statistics need a context on a CUDA device");
    lt_device *dev = __atomic_load_n(&ctx->cuda->dev->cublaslt, __ATOMIC_ACQUIRE);
    if (!dev)
        return 0; /* no tk::linear on this GPU yet */
    tk_lt_cache_stats cs;
    tk_lt_cache_get_stats(dev->plans, &cs);
    out->plan_hits = atomic_load(&dev->counters.plan_hits);
    out->plan_misses = atomic_load(&dev->counters.plan_misses);
    out->heuristics = atomic_load(&dev->counters.heuristics);
    out->checks = atomic_load(&dev->counters.checks);
    out->reuses = atomic_load(&dev->counters.reuses);
    out->fused_fallbacks = atomic_load(&dev->counters.fused_fallbacks);
    out->adds = cs.adds;
    out->evictions = cs.evictions;
    out->entries = cs.entries;
    out->capacity = cs.capacity;
    return 0;
}

#else /* built without the CUDA headers */
int tk_linear_stats_get(tk_ctx *ctx, tk_linear_stats *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    return tk_error_set(TK_EDEVICE, "no cuBLASLt: libtkrt was built without the CUDA toolkit's headers");
}
#endif
