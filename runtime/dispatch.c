/* Dispatch: an op found by name, its inputs and outputs checked against its schema, outputs shaped
 * by its meta function; eagerly its CUDA body or its CPU fallback runs by the context's device, in
 * trace mode the tracer records it. tk_call for ops calling ops, tk_wrap's entry point, and what
 * meta functions call (spec setters, requirements). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "rt_internal.h"
#include "schema.h"
#include "sym.h"

/* Checks a shape (constant dims >= 0, rank <= 8) and stores it; shape[i] is -1 where the dim is
 * symbolic. */
static int spec_store(tk_tensor_spec *spec, tk_dtype dtype, int rank, const tk_sym *dims, const char *fn)
{
    if (!spec)
        return tk_error_set(TK_EINVAL, "%s: no spec", fn);
    if (!tk_dtype_size(dtype))
        return tk_error_set(TK_EINVAL, "%s: unknown dtype %d", fn, (int)dtype);
    if (rank < 0 || rank > TK_MAX_DIMS || (rank > 0 && !dims))
        return tk_error_set(TK_EINVAL, "%s: rank %d is outside [0, %d]", fn, rank, TK_MAX_DIMS);
    for (int i = 0; i < rank; i++) {
        if (!dims[i].expr && dims[i].value <= TK_SYM_DYNAMIC_VALUE / 2) {
            return tk_error_set(TK_EINVAL, "%s: dim %d is %lld, computed from a dynamic dim read as a number "
                                           "(tk_tensor_dim, tk_tensor_shape or a tk_sym's .value), which would fix it "
                                           "at export: compute it with tk_tensor_sym and tk_sym_add, tk_sym_mul, "
                                           "tk_sym_floordiv..., and set it with tk_spec_set_sym",
                                fn, i, (long long)dims[i].value);
        }
        if (!dims[i].expr && dims[i].value < 0) {
            /* a failed tk_sym_* call gives TK_SYM(-1): its message says why */
            char earlier[512];
            snprintf(earlier, sizeof(earlier), "%s", tk_error_last());
            return tk_error_set(TK_EINVAL, "%s: dim %d is %lld (dims must be >= 0)%s%s", fn, i,
                                (long long)dims[i].value, earlier[0] ? "; an earlier call failed: " : "", earlier);
        }
    }
    spec->dtype = dtype;
    spec->rank = rank;
    memset(spec->shape, 0, sizeof(spec->shape));
    memset(spec->dims, 0, sizeof(spec->dims));
    for (int i = 0; i < rank; i++) {
        spec->dims[i] = dims[i];
        spec->shape[i] = dims[i].expr ? -1 : dims[i].value;
    }
    spec->set = 1;
    return 0;
}

int tk_spec_set(tk_tensor_spec *spec, tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_sym dims[TK_MAX_DIMS];
    if (rank > 0 && rank <= TK_MAX_DIMS && shape)
        for (int i = 0; i < rank; i++)
            dims[i] = TK_SYM(shape[i]);
    return spec_store(spec, dtype, rank, rank > 0 && shape ? dims : NULL, "tk_spec_set");
}

int tk_spec_set_sym(tk_tensor_spec *spec, tk_dtype dtype, int rank, const tk_sym *shape)
{
    return spec_store(spec, dtype, rank, shape, "tk_spec_set_sym");
}

int tk_spec_like(tk_tensor_spec *spec, const tk_tensor *t)
{
    if (!t)
        return tk_error_set(TK_EINVAL, "tk_spec_like: no tensor");
    return spec_store(spec, t->dtype, t->rank, t->dims, "tk_spec_like");
}

/* --- requirements of meta functions -------------------------------------------------------------
 * Constants are checked here, in every mode; anything symbolic goes to the tracer, which turns it
 * into a guard (the runtime decides nothing about symbols itself). */

/* "op 'tk::linear': " (while tracing, dispatch adds the model's line to a meta failure). */
static const char *site_prefix(tk_ctx *ctx, char *buf, size_t n)
{
    buf[0] = '\0';
    if (ctx && ctx->site.op)
        snprintf(buf, n, "op '%s': ", ctx->site.op);
    return buf;
}

/* Set when the tracer refused a requirement: its message (a constraint error) already says
 * where, so dispatch adds nothing to it. One context is used by one thread at a time. */
static _Thread_local int tracer_refused;

static int require(tk_ctx *ctx, tk_require_kind kind, tk_sym a, tk_sym b, int64_t lo, int64_t hi, const char *what)
{
    char pre[512], desc[160];
    if (!what) {
        switch (kind) {
        case TK_REQUIRE_EQ: what = "a requirement of equal dims"; break;
        case TK_REQUIRE_RANGE: what = "a requirement of a dim range"; break;
        case TK_REQUIRE_DIVISIBLE: what = "a requirement of divisibility"; break;
        }
    }
    if (kind == TK_REQUIRE_DIVISIBLE && lo <= 0)
        return tk_error_set(TK_EINVAL, "%s%s: divisor %lld (it must be > 0)", site_prefix(ctx, pre, sizeof(pre)), what,
                            (long long)lo);
    if (kind == TK_REQUIRE_RANGE && lo > hi)
        return tk_error_set(TK_EINVAL, "%s%s: empty range [%lld, %lld]", site_prefix(ctx, pre, sizeof(pre)), what,
                            (long long)lo, (long long)hi);
    if (tk_sym_is_const(a) && tk_sym_is_const(b)) {
        int holds = 0;
        switch (kind) {
        case TK_REQUIRE_EQ:
            holds = a.value == b.value;
            snprintf(desc, sizeof(desc), "%lld vs %lld", (long long)a.value, (long long)b.value);
            break;
        case TK_REQUIRE_RANGE:
            holds = a.value >= lo && a.value <= hi;
            snprintf(desc, sizeof(desc), "%lld is outside [%lld, %lld]", (long long)a.value, (long long)lo,
                     (long long)hi);
            break;
        case TK_REQUIRE_DIVISIBLE:
            holds = a.value % lo == 0;
            snprintf(desc, sizeof(desc), "%lld is not a multiple of %lld", (long long)a.value, (long long)lo);
            break;
        }
        if (holds)
            return 0;
        return tk_error_set(TK_EINVAL, "%s%s does not hold (%s)", site_prefix(ctx, pre, sizeof(pre)), what, desc);
    }
    if (!ctx || ctx->mode != TK_MODE_TRACE || !ctx->tracer || !ctx->tracer->on_require)
        return tk_error_set(TK_EINVAL, "%s%s: a symbolic requirement outside trace mode",
                            site_prefix(ctx, pre, sizeof(pre)), what);
    tk_error_clear();
    int rc = ctx->tracer->on_require(ctx->tracer->self, ctx, kind, a, b, lo, hi, what);
    tracer_refused = rc != 0;
    if (rc > 0)
        return tk_error_set(TK_EINTERNAL, "the tracer's on_require returned %d", rc);
    if (rc && !tk_error_last()[0])
        return tk_error_set(rc, "%s%s: the tracer refused it (code %d)", site_prefix(ctx, pre, sizeof(pre)), what, rc);
    return rc;
}

int tk_op_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides)
{
    return tk_matmul_takes_strided(def, i, rank, shape, strides) || tk_sdpa_takes_strided(def, i, rank, shape, strides);
}

int tk_require_eq(tk_ctx *ctx, tk_sym a, tk_sym b, const char *what)
{
    return require(ctx, TK_REQUIRE_EQ, a, b, 0, 0, what);
}

int tk_require_range(tk_ctx *ctx, tk_sym a, int64_t min, int64_t max, const char *what)
{
    return require(ctx, TK_REQUIRE_RANGE, a, TK_SYM(0), min, max, what);
}

int tk_require_divisible(tk_ctx *ctx, tk_sym a, int64_t k, const char *what)
{
    return require(ctx, TK_REQUIRE_DIVISIBLE, a, TK_SYM(0), k, 0, what);
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

/* "input 'weight' (in[1])": the schema's name and the index op code reads it at. */
static const char *input_label(const tk_resolved_op *op, int i, char *buf, size_t n)
{
    char name[64];
    snprintf(buf, n, "input '%s' (in[%d])", tk_schema_arg_name(op->def->schema, &op->schema, i, name, sizeof name),
             i);
    return buf;
}

/* A NULL where the schema wants a tensor: usually an earlier call (tk_param, tk_call) failed and
 * its result was passed on; the first failure of the run is named (the context keeps it, so a
 * call that succeeded in between does not lose it), else the last error. */
static int null_input(tk_ctx *ctx, const tk_resolved_op *op, int i)
{
    char earlier[700], what[96];
    snprintf(earlier, sizeof(earlier), "%s", ctx->first_failure ? ctx->first_failure : tk_error_last());
    return tk_error_set(TK_EINVAL, "%s of op '%s' is NULL%s%s%s", input_label(op, i, what, sizeof what),
                        op->def->name, earlier[0] ? " (an earlier call failed: " : "", earlier, earlier[0] ? ")" : "");
}

static int same_sym_shape(const tk_tensor *t, const tk_tensor_spec *spec)
{
    if (t->dtype != spec->dtype || t->rank != spec->rank)
        return 0;
    for (int i = 0; i < t->rank; i++)
        if (!tk_sym_equal(t->dims[i], spec->dims[i]))
            return 0;
    return 1;
}

/* While tracing, a meta function's own refusal (constants that disagree, a wrong dtype) gets the
 * model's line: " (at examples/mlp/model.c:15)". */
static int at_model_line(int rc, const char *file, int line)
{
    if (!file)
        return rc;
    char msg[768];
    snprintf(msg, sizeof(msg), "%s", tk_error_last());
    char *rel = tk_path_relative_to_cwd(file);
    const char *f = rel ? rel : file;
    while (f[0] == '.' && f[1] == '/')
        f += 2;
    tk_error_set(rc, "%s (at %s:%d)", msg, f, line);
    free(rel);
    return rc;
}

/* Trace mode: traced outputs from the specs, handed to the tracer with the op; nothing runs. */
static int trace_op(tk_ctx *ctx, const tk_op_def *def, tk_tensor *const *in, int nin, tk_tensor **out, int nout,
                    const tk_tensor_spec *specs, unsigned char *allocated, const char *file, int line)
{
    int rc;
    for (int i = 0; i < nout; i++) {
        if (out[i] && !(out[i]->traced && same_sym_shape(out[i], &specs[i])))
            return tk_error_set(TK_EINVAL, "output out[%d] of op '%s' is not a traced tensor of the shape its meta "
                                           "function gives", i, def->name);
    }
    for (int i = 0; i < nout; i++) {
        if (out[i])
            continue;
        if ((rc = tk_tensor_new_traced(&out[i], ctx, specs[i].dtype, specs[i].rank, specs[i].dims)))
            return rc;
        allocated[i] = 1;
    }
    tk_error_clear();
    rc = ctx->tracer->on_op(ctx->tracer->self, ctx, def, in, nin, out, nout, file, line);
    if (rc > 0)
        return tk_error_set(TK_EINTERNAL, "the tracer's on_op returned %d for op '%s'", rc, def->name);
    if (rc && !tk_error_last()[0])
        return tk_error_set(rc, "tracing op '%s' failed with code %d", def->name, rc);
    return rc;
}

/* "argument 'eps' (in[2])" */
static const char *arg_label(const tk_resolved_op *op, int i, char *buf, size_t n)
{
    char name[64];
    snprintf(buf, n, "argument '%s' (in[%d])", tk_schema_arg_name(op->def->schema, &op->schema, i, name, sizeof name),
             i);
    return buf;
}

static const char *value_kind_name(tk_value_kind k)
{
    switch (k) {
    case TK_VALUE_TENSOR: return "a tensor";
    case TK_VALUE_INT: return "an int";
    case TK_VALUE_FLOAT: return "a float";
    case TK_VALUE_BOOL: return "a bool";
    case TK_VALUE_STR: return "a str";
    case TK_VALUE_INTS: return "an int[]";
    }
    return "an unknown kind of value";
}

/* Argument i's default from the schema into *v (storage for a str or int[] in ca). */
static int default_value(const tk_resolved_op *op, int i, tk_value *v, tk_call_args *ca)
{
    const tk_schema *sc = &op->schema;
    int kind = sc->kind[i], n = 0;
    int64_t iv = 0;
    double fv = 0;
    const char *sv = NULL;
    size_t slen = 0;
    char why[200], lbl[96];
    int64_t *ints = ca->ints + ca->nints;
    if (tk_schema_literal(kind, op->def->schema + sc->def_at[i], sc->def_len[i], &iv, &fv, &sv, &slen, ints,
                          (int)(sizeof ca->ints / sizeof *ca->ints - ca->nints), &n, why, sizeof why))
        return tk_error_set(TK_EINVAL, "op '%s': %s: %s", op->def->name, arg_label(op, i, lbl, sizeof lbl), why);
    switch (kind) {
    case TK_SCHEMA_INT: *v = tk__val_int(iv); break;
    case TK_SCHEMA_FLOAT: *v = tk__val_float(fv); break;
    case TK_SCHEMA_BOOL: *v = tk__val_bool((int)iv); break;
    case TK_SCHEMA_STR:
        if (ca->nstr + slen + 1 > sizeof ca->str)
            return tk_error_set(TK_EUNSUPPORTED, "op '%s': the string defaults of one call exceed %zu bytes",
                                op->def->name, sizeof ca->str);
        memcpy(ca->str + ca->nstr, sv, slen);
        ca->str[ca->nstr + slen] = '\0';
        *v = tk__val_str(ca->str + ca->nstr);
        ca->nstr += slen + 1;
        break;
    case TK_SCHEMA_INTS:
        *v = tk__val_ints(ints, n);
        ca->nints += n;
        break;
    default: *v = tk__val_null(NULL); break;
    }
    return 0;
}

/* The call's arguments against the schema: each one's type, the defaults of those left out,
 * ints widened to floats and 0/1 to bools; tensors (or NULL) into inputs[i], every argument into
 * ca->v[i]. */
static int check_args(tk_ctx *ctx, const tk_resolved_op *op, const tk_value *args, int nargs, tk_call_args *ca,
                      tk_tensor **inputs)
{
    const tk_schema *sc = &op->schema;
    const char *name = op->def->name;
    char lbl[96];
    int rc, n = sc->nargs < TK_SCHEMA_MAX ? sc->nargs : TK_SCHEMA_MAX;
    ca->nints = 0;
    ca->nstr = 0;
    for (int i = 0; i < n; i++) {
        int kind = sc->kind[i];
        tk_value v = i < nargs ? args[i] : tk__val_null(NULL);
        if (i >= nargs && sc->def_len[i] && kind != TK_SCHEMA_TENSOR && kind != TK_SCHEMA_TENSOR_OPT &&
            (rc = default_value(op, i, &v, ca)))
            return rc;
        if (kind == TK_SCHEMA_TENSOR || kind == TK_SCHEMA_TENSOR_OPT) {
            if (v.kind != TK_VALUE_TENSOR)
                return tk_error_set(TK_EINVAL, "%s of op '%s' is a %s, got %s", input_label(op, i, lbl, sizeof lbl),
                                    name, tk_schema_kind_name(kind), value_kind_name(v.kind));
            if (!v.u.tensor && kind == TK_SCHEMA_TENSOR && i < sc->nrequired)
                return null_input(ctx, op, i);
            inputs[i] = v.u.tensor;
            ca->v[i] = v;
            continue;
        }
        int ok = 1;
        switch (kind) {
        case TK_SCHEMA_INT: ok = v.kind == TK_VALUE_INT; break;
        case TK_SCHEMA_FLOAT:
            if (v.kind == TK_VALUE_INT)
                v = tk__val_float((double)v.u.i);
            ok = v.kind == TK_VALUE_FLOAT;
            break;
        case TK_SCHEMA_BOOL:
            if (v.kind == TK_VALUE_INT && (v.u.i == 0 || v.u.i == 1))
                v = tk__val_bool((int)v.u.i);
            ok = v.kind == TK_VALUE_BOOL;
            break;
        case TK_SCHEMA_STR: ok = v.kind == TK_VALUE_STR && v.u.s; break;
        case TK_SCHEMA_INTS: ok = v.kind == TK_VALUE_INTS && v.u.ints.n >= 0 && (v.u.ints.v || !v.u.ints.n); break;
        default:
            return tk_error_set(TK_EUNSUPPORTED, "%s of op '%s' has a type calls cannot pass (they pass Tensor, "
                                                 "Tensor?, int, float, bool, str and int[])",
                                arg_label(op, i, lbl, sizeof lbl), name);
        }
        if (!ok) {
            if (v.kind == TK_VALUE_INT && kind == TK_SCHEMA_BOOL)
                return tk_error_set(TK_EINVAL, "%s of op '%s' is a bool, got the int %lld (a bool is 0 or 1)",
                                    arg_label(op, i, lbl, sizeof lbl), name, (long long)v.u.i);
            return tk_error_set(TK_EINVAL, "%s of op '%s' is %s %s, got %s%s", arg_label(op, i, lbl, sizeof lbl), name,
                                kind == TK_SCHEMA_INT || kind == TK_SCHEMA_INTS ? "an" : "a",
                                tk_schema_kind_name(kind),
                                v.kind == TK_VALUE_STR && !v.u.s ? "a NULL string" : value_kind_name(v.kind),
                                v.kind == TK_VALUE_TENSOR && !v.u.tensor ? " (NULL)" : "");
        }
        inputs[i] = NULL;
        ca->v[i] = v;
    }
    return 0;
}

static int op_run_at(tk_ctx *ctx, const tk_resolved_op *op, const char *file, int line, const tk_value *args,
                     int nin, tk_call_args *ca, tk_tensor **out, int nout)
{
    const tk_op_def *def = op->def;
    const tk_schema *sc = &op->schema;
    const char *name = def->name;
    tk_tensor *inputs[TK_SCHEMA_MAX] = {0};
    tk_tensor_spec specs[TK_SCHEMA_MAX];
    tk_tensor_spec *sp[TK_SCHEMA_MAX];
    unsigned char allocated[TK_SCHEMA_MAX] = {0};
    char d1[32], d2[32], s1[256], s2[256];
    int rc;

    int tracing = ctx->mode == TK_MODE_TRACE;
    if (tracing && (!ctx->tracer || !ctx->tracer->on_op))
        return tk_error_set(TK_EINTERNAL, "op '%s' called on a context in trace mode without a tracer", name);
    if (nin < sc->nrequired || nin > sc->nargs || (nin && !args)) {
        if (sc->nrequired == sc->nargs)
            return tk_error_set(TK_EINVAL, "op '%s' takes %d argument%s, got %d", name, sc->nargs,
                                sc->nargs == 1 ? "" : "s", nin);
        return tk_error_set(TK_EINVAL, "op '%s' takes %d to %d arguments, got %d", name, sc->nrequired, sc->nargs,
                            nin);
    }
    if (nout != sc->nrets || (nout && !out))
        return tk_error_set(TK_EINVAL, "op '%s' returns %d output%s, got %d output slot%s", name, sc->nrets,
                            sc->nrets == 1 ? "" : "s", nout, nout == 1 ? "" : "s");
    if ((rc = check_args(ctx, op, args, nin, ca, inputs)))
        return rc;
    /* a node records every argument when the op has scalars (their defaults included) */
    int has_scalar = 0;
    for (int i = 0; i < sc->nargs && i < TK_SCHEMA_MAX; i++)
        has_scalar |= sc->kind[i] != TK_SCHEMA_TENSOR && sc->kind[i] != TK_SCHEMA_TENSOR_OPT;
    int nrec = has_scalar ? (sc->nargs < TK_SCHEMA_MAX ? sc->nargs : TK_SCHEMA_MAX) : nin;
    for (int i = 0; i < nin; i++) {
        tk_tensor *t = inputs[i];
        if (t && !tracing && !same_device(t->device, ctx->device))
            return tk_error_set(TK_EINVAL, "%s of op '%s' is on '%s', the context is on '%s'",
                                input_label(op, i, s1, sizeof s1), name, tk_device_name(t->device, d1, sizeof(d1)),
                                tk_device_name(ctx->device, d2, sizeof(d2)));
        if (t && t->traced && !tracing)
            return tk_error_set(TK_EINVAL, "%s of op '%s' is a traced tensor (it has no data) and the context runs "
                                           "eagerly", input_label(op, i, s1, sizeof s1), name);
        if (t && !tracing && !tk_tensor_is_contiguous(t) &&
            !tk_op_takes_strided(op->def, i, t->rank, t->shape, t->strides))
            return tk_error_set(TK_EINVAL, "%s of op '%s' is a strided view (a session's output): ops read "
                                "contiguous tensors, copy it into one with tk_tensor_copy", input_label(op, i, s1, sizeof s1),
                                name);
    }
    for (int i = 0; i < nout && !tracing; i++) {
        if (out[i] && !same_device(out[i]->device, ctx->device))
            return tk_error_set(TK_EINVAL, "output out[%d] of op '%s' is on '%s', the context is on '%s'", i, name,
                                tk_device_name(out[i]->device, d1, sizeof(d1)),
                                tk_device_name(ctx->device, d2, sizeof(d2)));
        if (out[i] && !tk_tensor_is_contiguous(out[i]))
            return tk_error_set(TK_EINVAL, "output out[%d] of op '%s' is a strided view: ops write contiguous tensors",
                                i, name);
    }
    /* tracing runs no implementation: an op with a CUDA body only is traced on any context */
    tk_op_fn fn = ctx->device.kind == TK_DEVICE_CUDA ? def->body : def->cpu;
    if (!fn && !tracing)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' has no %s implementation (device '%s')", name,
                            ctx->device.kind == TK_DEVICE_CUDA ? "CUDA" : "CPU",
                            tk_device_name(ctx->device, d1, sizeof(d1)));

    /* output shapes: the meta function, or every output like the first input */
    memset(specs, 0, sizeof(specs));
    for (int i = 0; i < nout; i++)
        sp[i] = &specs[i];
    if (def->meta) {
        tk_error_clear();
        tracer_refused = 0;
        if ((rc = def->meta(ctx, inputs, sp))) {
            rc = op_failed(def, "the meta function", rc);
            if (!strstr(tk_error_last(), "op '")) { /* a setter's refusal: name the op */
                char msg[900];
                snprintf(msg, sizeof msg, "%s", tk_error_last());
                tk_error_set(rc, "op '%s', meta function: %s", name, msg);
            }
            return tracing && !tracer_refused ? at_model_line(rc, file, line) : rc;
        }
    } else if (nout) {
        if (!inputs[0])
            return tk_error_set(TK_EINVAL, "op '%s' has no meta function and no first input to shape its outputs like",
                                name);
        for (int i = 0; i < nout; i++)
            if ((rc = tk_spec_like(&specs[i], inputs[0])))
                return rc;
    }
    for (int i = 0; i < nout; i++)
        if (!specs[i].set)
            return tk_error_set(TK_EINTERNAL, "the meta function of op '%s' did not set out[%d]", name, i);
    if (tracing) {
        rc = trace_op(ctx, def, inputs, nrec, out, nout, specs, allocated, file, line);
        goto done;
    }
    for (int i = 0; i < nout; i++) {
        for (int d = 0; d < specs[i].rank; d++)
            if (specs[i].dims[d].expr)
                return tk_error_set(TK_EINTERNAL, "the meta function of op '%s' gave out[%d] a symbolic shape in "
                                                  "eager mode", name, i);
        if (out[i] && (out[i]->dtype != specs[i].dtype || out[i]->rank != specs[i].rank ||
                       memcmp(out[i]->shape, specs[i].shape, sizeof(int64_t) * (size_t)specs[i].rank) != 0))
            return tk_error_set(TK_EINVAL, "output out[%d] of op '%s' is %s, the op's meta function says %s", i, name,
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

/* The call runs with ctx->site naming it (for the messages of requirements and the tracer's
 * nodes), ctx->scope set to the op's registry (where its kernels, tuning and the ops it calls
 * are found) and ctx->args holding its checked arguments (tk_arg_int...); the caller's come back
 * afterwards, as ops call ops. */
int tk_op_run_resolved(tk_ctx *ctx, const tk_resolved_op *op, const char *file, int line, const tk_value *args,
                       int nargs, tk_tensor **out, int nout)
{
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_op_run: no context");
    tk_call_args ca;
    ca.op = op;
    ca.n = op->schema.nargs < TK_SCHEMA_MAX ? op->schema.nargs : TK_SCHEMA_MAX;
    tk_site saved = ctx->site;
    tk_registry *scope = ctx->scope;
    const tk_call_args *saved_args = ctx->args;
    ctx->site = (tk_site){op->def->name, file, line};
    ctx->scope = op->owner;
    ctx->args = &ca;
    int rc = op_run_at(ctx, op, file, line, args, nargs, &ca, out, nout);
    ctx->site = saved;
    ctx->scope = scope;
    ctx->args = saved_args;
    return rc;
}

/* Tensors as values, for the calls that pass tensors only. */
static int tensor_values(tk_value *v, tk_tensor *const *in, int n)
{
    if (n < 0 || n > TK_SCHEMA_MAX)
        return tk_error_set(TK_EINVAL, "%d arguments (at most %d)", n, TK_SCHEMA_MAX);
    for (int i = 0; i < n; i++)
        v[i] = tk__val_tensor(in ? in[i] : NULL);
    return 0;
}

int tk_op_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int nout)
{
    tk_resolved_op op;
    tk_value v[TK_SCHEMA_MAX];
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_op_run: no context");
    int rc = tk_op_resolve(&op, ctx->scope, name);
    if (!rc)
        rc = tensor_values(v, in, nin);
    return rc ? rc : tk_op_run_resolved(ctx, &op, NULL, 0, in ? v : NULL, nin, out, nout);
}

/* A call of the model failed: its line added to the message (once: a meta function's refusal
 * while tracing has it already), and the message kept as the run's first failure. */
static int call_failed(tk_ctx *ctx, int rc, const char *file, int line)
{
    if (file && !strstr(tk_error_last(), " (at "))
        at_model_line(rc, file, line);
    tk_ctx_note_failure(ctx);
    return rc;
}

int tk_call_outs_at(tk_ctx *ctx, const char *name, const char *file, int line, int nargs, const tk_value *args,
                    int noutputs, tk_tensor **outputs)
{
    tk_resolved_op op;
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_call: no context");
    for (int i = 0; i < noutputs && outputs; i++)
        outputs[i] = NULL;
    int rc = tk_op_resolve(&op, ctx->scope, name);
    if (!rc && op.schema.nrets != noutputs)
        rc = tk_error_set(TK_EINVAL, "op '%s' returns %d output%s, the call has room for %d", name, op.schema.nrets,
                          op.schema.nrets == 1 ? "" : "s", noutputs);
    if (!rc)
        rc = tk_op_run_resolved(ctx, &op, file, line, args, nargs, outputs, noutputs);
    return rc ? call_failed(ctx, rc, file, line) : 0;
}

tk_tensor *tk_call_at(tk_ctx *ctx, const char *name, const char *file, int line, int nargs, const tk_value *args)
{
    tk_resolved_op op;
    tk_tensor *out[1] = {NULL};
    if (!ctx) {
        tk_error_set(TK_EINVAL, "tk_call: no context");
        return NULL;
    }
    int rc = tk_op_resolve(&op, ctx->scope, name);
    if (!rc && op.schema.nrets != 1)
        rc = tk_error_set(TK_EINVAL, "op '%s' returns %d outputs; tk_call takes ops with one (tk_call_outs takes any "
                                     "number)", name, op.schema.nrets);
    if (!rc)
        rc = tk_op_run_resolved(ctx, &op, file, line, args, nargs, out, 1);
    if (rc) {
        call_failed(ctx, rc, file, line);
        return NULL;
    }
    return out[0];
}

tk_tensor *tk_call_op_at(tk_ctx *ctx, const char *name, const char *file, int line, int ninputs,
                         tk_tensor *const *inputs)
{
    tk_value v[TK_SCHEMA_MAX];
    if (tensor_values(v, inputs, ninputs)) {
        if (ctx)
            call_failed(ctx, TK_EINVAL, file, line);
        return NULL;
    }
    return tk_call_at(ctx, name, file, line, ninputs, v);
}

/* --- scalar arguments (tk_arg_int...) --------------------------------------------------------- */

static const tk_value *arg_of(tk_ctx *ctx, int i, tk_value_kind kind, const char *fn)
{
    char lbl[96];
    if (!ctx || !ctx->args) {
        tk_error_set(TK_EINVAL, "%s(%d): no op is being run on this context", fn, i);
        return NULL;
    }
    const tk_call_args *ca = ctx->args;
    if (i < 0 || i >= ca->n) {
        tk_error_set(TK_EINVAL, "%s(%d): op '%s' has %d argument%s", fn, i, ca->op->def->name, ca->n,
                     ca->n == 1 ? "" : "s");
        return NULL;
    }
    if (ca->v[i].kind != kind) {
        tk_error_set(TK_EINVAL, "%s(%d): %s of op '%s' is a %s", fn, i, arg_label(ca->op, i, lbl, sizeof lbl),
                     ca->op->def->name, tk_schema_kind_name(ca->op->schema.kind[i]));
        return NULL;
    }
    return &ca->v[i];
}

int64_t tk_arg_int(tk_ctx *ctx, int i)
{
    const tk_value *v = arg_of(ctx, i, TK_VALUE_INT, "tk_arg_int");
    return v ? v->u.i : 0;
}

double tk_arg_float(tk_ctx *ctx, int i)
{
    const tk_value *v = arg_of(ctx, i, TK_VALUE_FLOAT, "tk_arg_float");
    return v ? v->u.f : 0.0;
}

int tk_arg_bool(tk_ctx *ctx, int i)
{
    const tk_value *v = arg_of(ctx, i, TK_VALUE_BOOL, "tk_arg_bool");
    return v ? (int)v->u.i : 0;
}

const char *tk_arg_str(tk_ctx *ctx, int i)
{
    const tk_value *v = arg_of(ctx, i, TK_VALUE_STR, "tk_arg_str");
    return v ? v->u.s : NULL;
}

const int64_t *tk_arg_ints(tk_ctx *ctx, int i, int64_t *n)
{
    const tk_value *v = arg_of(ctx, i, TK_VALUE_INTS, "tk_arg_ints");
    if (n)
        *n = v ? v->u.ints.n : 0;
    return v ? v->u.ints.v : NULL;
}

tk_tensor *tk_call_op(tk_ctx *ctx, const char *name, int ninputs, tk_tensor *const *inputs)
{
    return tk_call_op_at(ctx, name, NULL, 0, ninputs, inputs);
}

int tk_wrap_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, int nargs, const tk_arg *args)
{
    return tk_wrap_launch_shared(ctx, kernel, grid, block, 0, nargs, args);
}

int tk_wrap_launch_shared(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, size_t shared, int nargs,
                          const tk_arg *args)
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
    return tk_cuda_launch(ctx, kernel, grid, block, shared, nargs, args);
}
