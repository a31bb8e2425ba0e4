/* Eager dispatch: an op found by name, its inputs and outputs checked against its schema, outputs
 * allocated from its meta function, then its CUDA body or its CPU fallback by the context's
 * device; tk_call for ops calling ops, tk_wrap's entry point, and the meta functions' setters. */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"
#include "schema.h"

int tk_spec_set(tk_tensor_spec *spec, tk_dtype dtype, int rank, const int64_t *shape)
{
    if (!spec)
        return tk_error_set(TK_EINVAL, "tk_spec_set: no spec");
    if (!tk_dtype_size(dtype))
        return tk_error_set(TK_EINVAL, "tk_spec_set: unknown dtype %d", (int)dtype);
    if (rank < 0 || rank > TK_MAX_DIMS || (rank > 0 && !shape))
        return tk_error_set(TK_EINVAL, "tk_spec_set: rank %d is outside [0, %d]", rank, TK_MAX_DIMS);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return tk_error_set(TK_EINVAL, "tk_spec_set: dim %d is %lld (dims must be >= 0)", i, (long long)shape[i]);
    spec->dtype = dtype;
    spec->rank = rank;
    memset(spec->shape, 0, sizeof(spec->shape));
    if (rank)
        memcpy(spec->shape, shape, sizeof(int64_t) * (size_t)rank);
    spec->set = 1;
    return 0;
}

int tk_spec_like(tk_tensor_spec *spec, const tk_tensor *t)
{
    if (!t)
        return tk_error_set(TK_EINVAL, "tk_spec_like: no tensor");
    return tk_spec_set(spec, t->dtype, t->rank, t->shape);
}

/* "[2, 3] f32", for messages. */
static const char *describe(char *buf, size_t n, tk_dtype dtype, int rank, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "] %s", tk_dtype_name(dtype));
    return buf;
}

static int same_device(tk_device a, tk_device b)
{
    return a.kind == b.kind && (a.kind == TK_DEVICE_CPU || a.index == b.index);
}

/* The op and its parsed schema. */
static int lookup(const tk_op_def **def, tk_schema *sc, const char *name)
{
    char why[256];
    if (!(*def = tk_op_find(name)))
        return tk_error_set(TK_ENOTFOUND, "op '%s' is not registered", name ? name : "");
    if (!(*def)->schema || tk_schema_parse((*def)->schema, sc, why, sizeof(why)) != 0)
        return tk_error_set(TK_EINVAL, "op '%s' (%s:%d) has a bad schema: %s", name, (*def)->file ? (*def)->file : "?",
                            (*def)->line, (*def)->schema ? why : "none");
    if (sc->nargs > TK_SCHEMA_MAX || sc->nrets > TK_SCHEMA_MAX)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' has more than %d arguments or returns", name, TK_SCHEMA_MAX);
    return 0;
}

/* The op's result code, with a message when the op gave none. */
static int op_failed(const tk_op_def *def, const char *what, int rc)
{
    if (rc > 0)
        return tk_error_set(TK_EINTERNAL, "%s of op '%s' returned %d (expected 0 or a negative tk_error_code)", what,
                            def->name, rc);
    if (!tk_error_last()[0])
        return tk_error_set(rc, "%s of op '%s' failed with code %d", what, def->name, rc);
    return rc;
}

int tk_op_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int nout)
{
    const tk_op_def *def;
    tk_schema sc;
    tk_tensor *inputs[TK_SCHEMA_MAX] = {0};
    tk_tensor_spec specs[TK_SCHEMA_MAX];
    tk_tensor_spec *sp[TK_SCHEMA_MAX];
    unsigned char allocated[TK_SCHEMA_MAX] = {0};
    char d1[32], d2[32], s1[256], s2[256];
    int rc;

    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_op_run: no context");
    if ((rc = lookup(&def, &sc, name)))
        return rc;
    if (nin < sc.nrequired || nin > sc.nargs || (nin && !in)) {
        if (sc.nrequired == sc.nargs)
            return tk_error_set(TK_EINVAL, "op '%s' takes %d input%s, got %d", name, sc.nargs,
                                sc.nargs == 1 ? "" : "s", nin);
        return tk_error_set(TK_EINVAL, "op '%s' takes %d to %d inputs, got %d", name, sc.nrequired, sc.nargs, nin);
    }
    if (nout != sc.nrets || (nout && !out))
        return tk_error_set(TK_EINVAL, "op '%s' returns %d output%s, got %d output slot%s", name, sc.nrets,
                            sc.nrets == 1 ? "" : "s", nout, nout == 1 ? "" : "s");
    /* inputs the caller left out (trailing ones with defaults) reach the op as NULL */
    for (int i = 0; i < nin; i++) {
        inputs[i] = in[i];
        if (in[i] && !same_device(in[i]->device, ctx->device))
            return tk_error_set(TK_EINVAL, "input %d of op '%s' is on '%s', the context is on '%s'", i + 1, name,
                                tk_device_name(in[i]->device, d1, sizeof(d1)),
                                tk_device_name(ctx->device, d2, sizeof(d2)));
    }
    for (int i = 0; i < nout; i++)
        if (out[i] && !same_device(out[i]->device, ctx->device))
            return tk_error_set(TK_EINVAL, "output %d of op '%s' is on '%s', the context is on '%s'", i + 1, name,
                                tk_device_name(out[i]->device, d1, sizeof(d1)),
                                tk_device_name(ctx->device, d2, sizeof(d2)));
    tk_op_fn fn = ctx->device.kind == TK_DEVICE_CUDA ? def->body : def->cpu;
    if (!fn)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' has no %s implementation (device '%s')", name,
                            ctx->device.kind == TK_DEVICE_CUDA ? "CUDA" : "CPU",
                            tk_device_name(ctx->device, d1, sizeof(d1)));

    /* output shapes: the meta function, or every output like the first input */
    memset(specs, 0, sizeof(specs));
    for (int i = 0; i < nout; i++)
        sp[i] = &specs[i];
    if (def->meta) {
        tk_error_clear();
        if ((rc = def->meta(ctx, inputs, sp)))
            return op_failed(def, "the meta function", rc);
    } else if (nout) {
        if (!inputs[0])
            return tk_error_set(TK_EINVAL, "op '%s' has no meta function and no first input to shape its outputs like",
                                name);
        for (int i = 0; i < nout; i++)
            tk_spec_like(&specs[i], inputs[0]);
    }
    for (int i = 0; i < nout; i++) {
        if (!specs[i].set)
            return tk_error_set(TK_EINTERNAL, "the meta function of op '%s' did not set output %d", name, i + 1);
        if (out[i] && (out[i]->dtype != specs[i].dtype || out[i]->rank != specs[i].rank ||
                       memcmp(out[i]->shape, specs[i].shape, sizeof(int64_t) * (size_t)specs[i].rank) != 0))
            return tk_error_set(TK_EINVAL, "output %d of op '%s' is %s, the op's meta function says %s", i + 1, name,
                                describe(s1, sizeof(s1), out[i]->dtype, out[i]->rank, out[i]->shape),
                                describe(s2, sizeof(s2), specs[i].dtype, specs[i].rank, specs[i].shape));
    }
    for (int i = 0; i < nout; i++) {
        if (out[i])
            continue;
        if ((rc = tk_tensor_new(&out[i], ctx, ctx->device, specs[i].dtype, specs[i].rank, specs[i].shape)))
            goto done;
        allocated[i] = 1;
    }

    tk_error_clear();
    if ((rc = fn(ctx, inputs, out)))
        rc = op_failed(def, ctx->device.kind == TK_DEVICE_CUDA ? "the body" : "the CPU fallback", rc);
done:
    if (rc) {
        for (int i = 0; i < nout; i++) {
            if (allocated[i]) {
                tk_tensor_free(out[i]);
                out[i] = NULL;
            }
        }
    }
    return rc;
}

tk_tensor *tk_call_op(tk_ctx *ctx, const char *name, int ninputs, tk_tensor *const *inputs)
{
    const tk_op_def *def;
    tk_schema sc;
    tk_tensor *out[1] = {NULL};
    if (lookup(&def, &sc, name))
        return NULL;
    if (sc.nrets != 1) {
        tk_error_set(TK_EINVAL, "op '%s' returns %d outputs; tk_call takes ops with one (use tk_op_run)", name,
                     sc.nrets);
        return NULL;
    }
    if (tk_op_run(ctx, name, inputs, ninputs, out, 1))
        return NULL;
    return out[0];
}

int tk_wrap_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, int nargs, const tk_arg *args)
{
    char dev[32];
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_wrap: no context");
    if (!kernel || !kernel->name)
        return tk_error_set(TK_EINVAL, "tk_wrap: no kernel");
    if (ctx->device.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EUNSUPPORTED,
                            "kernel '%s' launched on device '%s': kernels run on CUDA devices (an op runs on the "
                            "CPU through its .cpu fallback)",
                            kernel->name, tk_device_name(ctx->device, dev, sizeof(dev)));
    /* an empty grid has nothing to do; the driver would call it an invalid value */
    if (grid.x == 0 || grid.y == 0 || grid.z == 0)
        return 0;
    return tk_cuda_launch(ctx, kernel, grid, block, nargs, args);
}
