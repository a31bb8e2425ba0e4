/* The exporter without a GPU: guards simplified against ranges (a table of cases), every
 * constraint error, derived dimensions, program.json and .tkprog round trips (byte-identical),
 * readers refusing other versions and damaged files, the eager vs traced equality of
 * examples/mlp (a small interpreter runs the traced nodes), and tkexport export / inspect. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"
#include "tk_test_proc.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <tk/half.h>
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

#include "exec.h"
#include "exporter.h"
#include "safetensors.h"
#include "sha256.h"
#include "sym.h"

extern char **environ;

static const tk_device CPU = {TK_DEVICE_CPU, 0};


/* ---- test ops ------------------------------------------------------------------------------ */

/* test::require states one requirement, chosen by the current case, then returns x. */
typedef enum { REQ_EQ, REQ_RANGE, REQ_DIV } req_kind;
typedef enum {
    L_BATCH, L_2BATCH, L_8BATCH, L_2BATCH_PLUS_1, L_STATIC, L_BATCH_PLUS_SEQ, L_BATCH_PLUS_1020, L_BATCH_DIV4
} lhs_kind;
typedef enum { R_CONST, R_BATCH, R_SEQ } rhs_kind;

typedef struct req_case {
    const char *name;
    req_kind kind;
    lhs_kind lhs;
    rhs_kind rhs; /* EQ: the other side (R_CONST: v) */
    int64_t v, lo, hi; /* EQ: v; RANGE: [lo, hi]; DIV: lo is the divisor */
    /* expected */
    int ok;
    const char *text;   /* ok: the one guard recorded (NULL: none); else a part of the error */
    int64_t bmin, bmax; /* ok: batch's recorded range */
    const char *note;   /* ok: a part of the one note (NULL: none) */
} req_case;

static const req_case *g_case;

static tk_sym lhs_of(tk_ctx *ctx, tk_tensor *const *in, lhs_kind k)
{
    tk_sym b = tk_tensor_sym(in[0], 0), s = tk_tensor_sym(in[1], 0);
    switch (k) {
    case L_BATCH: return b;
    case L_2BATCH: return tk_sym_mul(ctx, b, 2);
    case L_8BATCH: return tk_sym_mul(ctx, b, 8);
    case L_2BATCH_PLUS_1: return tk_sym_add(ctx, tk_sym_mul(ctx, b, 2), TK_SYM(1));
    case L_STATIC: return tk_tensor_sym(in[0], 1);
    case L_BATCH_PLUS_SEQ: return tk_sym_add(ctx, b, s);
    case L_BATCH_PLUS_1020: return tk_sym_add(ctx, b, TK_SYM(1020));
    case L_BATCH_DIV4: return tk_sym_floordiv(ctx, b, 4);
    }
    return TK_SYM(-1);
}

static int require_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    const req_case *c = g_case;
    tk_sym a = lhs_of(ctx, in, c->lhs);
    int err = 0;
    switch (c->kind) {
    case REQ_EQ: {
        tk_sym b = c->rhs == R_CONST ? TK_SYM(c->v) : tk_tensor_sym(in[c->rhs == R_BATCH ? 0 : 1], 0);
        err = tk_require_eq(ctx, a, b, c->name);
        break;
    }
    case REQ_RANGE: err = tk_require_range(ctx, a, c->lo, c->hi, c->name); break;
    case REQ_DIV: err = tk_require_divisible(ctx, a, c->lo, c->name); break;
    }
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int copy_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    memcpy(tk_tensor_data(out[0]), tk_tensor_data(in[0]), tk_tensor_nbytes(in[0]));
    return 0;
}

TK_OP(require_op, "test::require", "(Tensor x, Tensor y) -> Tensor", .meta = require_meta, .cpu = copy_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* test::dup_rows: x [rows, cols] -> [2*rows, cols], x stacked on itself (a derived dimension). */
static int dup_rows_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    if (tk_tensor_rank(in[0]) != 2)
        return tk_error_set(TK_EINVAL, "test::dup_rows takes a matrix");
    tk_sym shape[2] = {tk_sym_mul(ctx, tk_tensor_sym(in[0], 0), 2), tk_tensor_sym(in[0], 1)};
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), 2, shape);
}

static int dup_rows_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    size_t n = tk_tensor_nbytes(in[0]);
    memcpy(tk_tensor_data(out[0]), tk_tensor_data(in[0]), n);
    memcpy((char *)tk_tensor_data(out[0]) + n, tk_tensor_data(in[0]), n);
    return 0;
}

TK_OP(dup_rows_op, "test::dup_rows", "(Tensor x) -> Tensor", .meta = dup_rows_meta, .cpu = dup_rows_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* No meta function: eagerly shaped like its input, refused by export. */
TK_OP(nometa_op, "test::nometa", "(Tensor x) -> Tensor", .cpu = copy_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* test::split2: x -> (x, x), two outputs, for tk_call_outs. */
static int split2_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    int err = tk_spec_like(out[0], in[0]);
    return err ? err : tk_spec_like(out[1], in[0]);
}

static int split2_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    memcpy(tk_tensor_data(out[0]), tk_tensor_data(in[0]), tk_tensor_nbytes(in[0]));
    memcpy(tk_tensor_data(out[1]), tk_tensor_data(in[0]), tk_tensor_nbytes(in[0]));
    return 0;
}

TK_OP(split2_op, "test::split2", "(Tensor x) -> (Tensor first, Tensor second)", .meta = split2_meta,
      .cpu = split2_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* test::rows_by_dim and test::rows_by_value: meta functions that read the dynamic batch as a
 * number (tk_tensor_dim; a tk_sym's .value), the mistake export must refuse. */
static int rows_by_dim_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    int64_t shape[2] = {tk_tensor_dim(in[0], 0) * 2, tk_tensor_dim(in[0], 1)};
    return tk_spec_set(out[0], tk_tensor_dtype(in[0]), 2, shape);
}

static int rows_by_value_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    tk_sym shape[2] = {TK_SYM(tk_tensor_sym(in[0], 0).value + 64), tk_tensor_sym(in[0], 1)};
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), 2, shape);
}

TK_OP(rows_by_dim_op, "test::rows_by_dim", "(Tensor x) -> Tensor", .meta = rows_by_dim_meta, .cpu = copy_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

TK_OP(rows_by_value_op, "test::rows_by_value", "(Tensor x) -> Tensor", .meta = rows_by_value_meta, .cpu = copy_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* test::pick: scalar arguments of every kind. out[r][j] = sign * (x[r][pick[j]] * scale + shift),
 * plus x[r][0] when mode is "first"; its meta function reads pick's length. */
#define PICK_SCHEMA \
    "(Tensor x, float scale, int shift=3, bool neg=False, str mode=\"sum\", int[] pick=[0, 2]) -> Tensor"

static int pick_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int64_t n = 0;
    tk_arg_ints(ctx, 5, &n);
    tk_sym shape[2] = {tk_tensor_sym(in[0], 0), TK_SYM(n)};
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), 2, shape);
}

static int pick_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int64_t n = 0, cols = tk_tensor_dim(in[0], 1);
    const int64_t *pick = tk_arg_ints(ctx, 5, &n);
    double scale = tk_arg_float(ctx, 1), sign = tk_arg_bool(ctx, 3) ? -1 : 1;
    int64_t shift = tk_arg_int(ctx, 2);
    int first = !strcmp(tk_arg_str(ctx, 4), "first");
    if (in[1] || in[2] || in[3] || in[4] || in[5])
        return tk_error_set(TK_EINTERNAL, "a scalar's in[] slot is not NULL");
    const float *x = tk_tensor_data(in[0]);
    float *y = tk_tensor_data(out[0]);
    for (int64_t r = 0; r < tk_tensor_dim(in[0], 0); r++)
        for (int64_t j = 0; j < n; j++) {
            if (pick[j] < 0 || pick[j] >= cols)
                return tk_error_set(TK_EINVAL, "pick[%lld] = %lld is out of range", (long long)j, (long long)pick[j]);
            y[r * n + j] = (float)(sign * (x[r * cols + pick[j]] * scale + (double)shift) + (first ? x[r * cols] : 0));
        }
    return 0;
}

TK_OP(pick_op, "test::pick", PICK_SCHEMA, .meta = pick_meta, .cpu = pick_cpu)
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

/* ---- test programs ------------------------------------------------------------------------- */

static int g_dyn_line[2];

TK_PROGRAM(dyn_dim_prog, "dyn_dim", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    g_dyn_line[0] = __LINE__; out[0] = tk_call(ctx, "test::rows_by_dim", in[0]);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(dyn_value_prog, "dyn_value", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    g_dyn_line[1] = __LINE__; out[0] = tk_call(ctx, "test::rows_by_value", in[0]);
    return out[0] ? 0 : TK_EINVAL;
}

static int g_attr_bad_line;

/* scalars given, then left to their defaults (an int where the schema says float) */
TK_PROGRAM(attrs_prog, "attrs", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    tk_tensor *a = tk_call(ctx, "test::pick", in[0], 0.5, 2, true, "first", TK_INTS(3, 1, 0));
    out[0] = tk_call(ctx, "test::pick", a, 2);
    tk_tensor_free(a);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(attrs_bad_prog, "attrs_bad", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    g_attr_bad_line = __LINE__; out[0] = tk_call(ctx, "test::pick", in[0], 0.5, "two");
    return out[0] ? 0 : TK_EINVAL;
}

/* layout ops over a dynamic batch: split it in pairs, swap the last two dims, join the pairs again */
TK_PROGRAM(layout_prog, "layout", TK_INPUT("x", TK_F32, TK_DIM("batch", 2, 16), 6, 8))
{
    tk_tensor *a = tk_call(ctx, "tk::unflatten", in[0], 0, TK_INTS(-1, 2));
    tk_tensor *b = tk_transpose(ctx, a, 2, 3);
    out[0] = tk_call(ctx, "tk::flatten", b, 0, 1);
    tk_tensor_free(a);
    tk_tensor_free(b);
    return out[0] ? 0 : TK_EINVAL;
}

/* [batch, seq, 4] -> reshape [-1, 2, 2]: [batch*seq, 2, 2], the -1 inferred from the symbols */
TK_PROGRAM(reshape_prog, "reshape", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), TK_DIM("seq", 1, 8), 4))
{
    out[0] = tk_call(ctx, "tk::reshape", in[0], TK_INTS(-1, 2, 2));
    return out[0] ? 0 : TK_EINVAL;
}

/* [batch, seq, 4] -> [batch*seq, 4] -> [batch*seq, 2, 2] */
TK_PROGRAM(layout_prod_prog, "layout_prod", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), TK_DIM("seq", 1, 8), 4))
{
    tk_tensor *f = tk_call(ctx, "tk::flatten", in[0], 0, 1);
    out[0] = tk_call(ctx, "tk::unflatten", f, 1, TK_INTS(2, 2));
    tk_tensor_free(f);
    return out[0] ? 0 : TK_EINVAL;
}

static int g_split_line;

/* tk_split along a static dim, then along the dynamic one (its sum pins batch) */
static int split_model(tk_ctx *ctx, tk_tensor *const *in, tk_tensor **out)
{
    tk_tensor *p[2], *q[2];
    const int64_t cols[] = {2, 4}, rows[] = {1, 2};
    g_split_line = __LINE__; int rc = tk_split(ctx, in[0], cols, 2, -1, p);
    if (rc)
        return rc;
    if ((rc = tk_split(ctx, p[1], rows, 2, 0, q))) {
        tk_tensor_free(p[0]);
        tk_tensor_free(p[1]);
        return rc;
    }
    out[0] = p[0], out[1] = q[0], out[2] = q[1];
    tk_tensor_free(p[1]);
    return 0;
}

TK_PROGRAM(split_prog, "split", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 6))
{
    return split_model(ctx, in, out);
}

TK_PROGRAM(split_static_prog, "split_static", TK_INPUT("x", TK_F32, 3, 6))
{
    return split_model(ctx, in, out);
}

static int g_outs_line, g_chain_line;

/* two outputs through the public call API: one node with the model's line */
TK_PROGRAM(outs_prog, "outs", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    tk_tensor *pair[2];
    g_outs_line = __LINE__; int rc = tk_call_outs(ctx, "test::split2", pair, 2, in[0]);
    if (rc)
        return rc;
    out[0] = pair[0], out[1] = pair[1];
    return 0;
}

/* a call fails, two calls succeed, then the failed result is passed on: the error names the
 * first failure and its line */
TK_PROGRAM(chain_prog, "chain", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    g_chain_line = __LINE__; tk_tensor *bad = tk_call(ctx, "test::no_such_op", in[0]);
    tk_tensor *ok = tk_call(ctx, "test::dup_rows", in[0]);
    tk_tensor *twice = ok ? tk_call(ctx, "test::dup_rows", ok) : NULL;
    out[0] = tk_call(ctx, "test::require", bad, twice);
    tk_tensor_free(ok);
    tk_tensor_free(twice);
    return out[0] ? 0 : TK_EINVAL;
}

static int g_require_line;

TK_PROGRAM(guards_prog, "guards", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 1024), 16),
           TK_INPUT("y", TK_F32, TK_DIM("seq", 1, 512), 16))
{
    g_require_line = __LINE__; out[0] = tk_call(ctx, "test::require", in[0], in[1]);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(derived_prog, "derived", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 64), 3))
{
    tk_tensor *y = tk_call(ctx, "test::dup_rows", in[0]);
    if (!y)
        return TK_EINVAL;
    out[0] = tk_call(ctx, "test::dup_rows", y);
    tk_tensor_free(y);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(shared_prog, "shared", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 1024), 16),
           TK_INPUT("y", TK_F32, TK_DIM("batch", 1, 1024), 16))
{
    out[0] = tk_call(ctx, "test::require", in[0], in[1]);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(shared_bad_prog, "shared_bad", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 1024), 16),
           TK_INPUT("y", TK_F32, TK_DIM("batch", 1, 512), 16))
{
    out[0] = tk_call(ctx, "test::require", in[0], in[1]);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(unknown_op_prog, "unknown_op", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    out[0] = tk_call(ctx, "test::no_such_op", in[0]);
    return out[0] ? 0 : TK_ENOTFOUND;
}

TK_PROGRAM(nometa_prog, "nometa", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    out[0] = tk_call(ctx, "test::nometa", in[0]);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(own_tensor_prog, "own_tensor", TK_INPUT("x", TK_F32, 2, 4))
{
    tk_tensor *t = NULL;
    const int64_t shape[] = {2, 4};
    int rc = tk_tensor_new(&t, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape);
    if (rc)
        return rc;
    out[0] = tk_call(ctx, "test::dup_rows", t);
    tk_tensor_free(t);
    (void)in;
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(no_output_prog, "no_output", TK_INPUT("x", TK_F32, 2))
{
    (void)ctx, (void)in, (void)out;
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static tk_program_model *trace_ok(const char *name, const char *weights)
{
    tk_program_model *m = NULL;
    const tk_program_def *def = tk_program_find(name);
    if (!def)
        fail_msg("program '%s' is not registered", name);
    tk_assert_ok(tk_export_trace(&m, def, weights));
    return m;
}

static int trace_rc(const char *name, const char *weights)
{
    tk_program_model *m = NULL;
    const tk_program_def *def = tk_program_find(name);
    if (!def)
        fail_msg("program '%s' is not registered", name);
    int rc = tk_export_trace(&m, def, weights);
    assert_true(rc != 0 ? m == NULL : m != NULL);
    tk_program_model_free(m);
    return rc;
}

/* xorshift32: the same numbers on every machine */
static uint32_t g_rand = 0x2545f491u;
static float uniform(float lo, float hi)
{
    g_rand ^= g_rand << 13;
    g_rand ^= g_rand >> 17;
    g_rand ^= g_rand << 5;
    return lo + (hi - lo) * (float)(g_rand >> 8) * (1.0f / 16777216.0f);
}

static tk_tensor *random_tensor(tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtype, rank, shape));
    for (int64_t i = 0; i < tk_numel(t); i++) {
        float v = uniform(-1.0f, 1.0f);
        if (dtype == TK_BF16)
            ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_bf16(v);
        else
            ((float *)tk_tensor_data(t))[i] = v;
    }
    return t;
}

static char *read_file(const char *path, size_t *len) { return tk_test_read_file(path, len); }
static char *read_whole(const char *path) { return tk_test_read_file(path, NULL); }
static char *temp_dir(void) { return tk_test_temp_dir(); }
static void rm_tree(char *dir) { tk_test_rm_tree(dir); }

/* ---- guards ------------------------------------------------------------------------------- */

static const req_case guard_cases[] = {
    /* always true: dropped */
    {"eq_same_dim", REQ_EQ, L_BATCH, R_BATCH, 0, 0, 0, 1, NULL, 1, 1024, NULL},
    {"eq_static_dims", REQ_EQ, L_STATIC, R_CONST, 16, 0, 0, 1, NULL, 1, 1024, NULL},
    {"range_holds", REQ_RANGE, L_BATCH, R_CONST, 0, 0, 4096, 1, NULL, 1, 1024, NULL},
    {"div_always", REQ_DIV, L_8BATCH, R_CONST, 0, 4, 0, 1, NULL, 1, 1024, NULL},
    /* narrowing */
    {"range_narrows", REQ_RANGE, L_BATCH, R_CONST, 0, 1, 512, 1, NULL, 1, 512,
     "dim 'batch' narrowed from [1, 1024] to [1, 512] by op 'test::require'"},
    {"range_narrows_derived", REQ_RANGE, L_2BATCH, R_CONST, 0, 0, 100, 1, NULL, 1, 50,
     "dim 'batch' narrowed from [1, 1024] to [1, 50]"},
    {"range_narrows_low", REQ_RANGE, L_BATCH, R_CONST, 0, 16, INT64_MAX, 1, NULL, 16, 1024, "to [16, 1024]"},
    /* recorded guards */
    {"div_guard", REQ_DIV, L_BATCH, R_CONST, 0, 8, 0, 1, "batch % 8 == 0", 1, 1024, NULL},
    {"eq_two_symbols", REQ_EQ, L_BATCH, R_SEQ, 0, 0, 0, 1, "batch == seq", 1, 1024, NULL},
    {"range_two_symbols", REQ_RANGE, L_BATCH_PLUS_SEQ, R_CONST, 0, 2, 100, 1, "2 <= batch + seq <= 100", 1, 1024,
     NULL},
    {"div_nonlinear", REQ_DIV, L_BATCH_DIV4, R_CONST, 0, 2, 0, 1, "== 0", 1, 1024, NULL},
    /* forcing a dynamic dimension to a constant */
    {"eq_forces", REQ_EQ, L_BATCH, R_CONST, 8, 0, 0, 0,
     "dim 'batch' (input 'x' dim 0, declared dynamic in [1, 1024]) is forced to 8 by op 'test::require'", 0, 0, NULL},
    {"eq_derived_forces", REQ_EQ, L_2BATCH, R_CONST, 16, 0, 0, 0, "is forced to 8 by op", 0, 0, NULL},
    {"range_forces", REQ_RANGE, L_BATCH, R_CONST, 0, 8, 8, 0, "is forced to 8", 0, 0, NULL},
    {"div_forces", REQ_DIV, L_BATCH_PLUS_1020, R_CONST, 0, 1024, 0, 0,
     "is forced to 4 by op 'test::require' at ", 0, 0, NULL},
    /* never true */
    {"eq_outside_range", REQ_EQ, L_BATCH, R_CONST, 2000, 0, 0, 0,
     "requires batch == 2000 (eq_outside_range), which never holds for 'batch' in [1, 1024]", 0, 0, NULL},
    {"eq_no_whole_value", REQ_EQ, L_2BATCH, R_CONST, 7, 0, 0, 0,
     "requires 2*batch == 7 (eq_no_whole_value), which never holds (no whole value of 'batch' solves it)", 0, 0, NULL},
    {"range_two_symbols_never", REQ_RANGE, L_BATCH_PLUS_SEQ, R_CONST, 0, 5000, 6000, 0,
     "requires batch + seq in [5000, 6000] (range_two_symbols_never), which never holds for 'batch' in [1, 1024] and "
     "'seq' in [1, 512] (batch + seq lies in [2, 1536])", 0, 0, NULL},
    {"div_never", REQ_DIV, L_2BATCH_PLUS_1, R_CONST, 0, 2, 0, 0,
     "requires (2*batch + 1) % 2 == 0 (div_never), which never holds", 0, 0, NULL},
    {"eq_static_never", REQ_EQ, L_STATIC, R_CONST, 32, 0, 0, 0, "eq_static_never does not hold (16 vs 32)", 0, 0, NULL},
    {"range_leaves_nothing", REQ_RANGE, L_BATCH, R_CONST, 0, 2000, 4000, 0,
     "must lie in [2000, 4000] for op 'test::require'", 0, 0, NULL},
    {"div_static_never", REQ_DIV, L_STATIC, R_CONST, 0, 5, 0, 0, "16 is not a multiple of 5", 0, 0, NULL},
    {"div_by_zero", REQ_DIV, L_BATCH, R_CONST, 0, 0, 0, 0, "divisor 0", 0, 0, NULL},
};

static void guards__table_of_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof guard_cases / sizeof guard_cases[0]; i++) {
        const req_case *c = &guard_cases[i];
        tk_program_model *m = NULL;
        g_case = c;
        int rc = tk_export_trace(&m, tk_program_find("guards"), NULL);
        if (!c->ok) {
            if (rc == 0)
                fail_msg("case %s: traced, expected an error containing '%s'", c->name, c->text);
            if (!strstr(tk_error_last(), c->text))
                fail_msg("case %s: error '%s' does not contain '%s'", c->name, tk_error_last(), c->text);
            if (!strstr(tk_error_last(), "cannot export 'guards': "))
                fail_msg("case %s: error '%s' does not name the program", c->name, tk_error_last());
            if (strchr(tk_error_last(), '\n'))
                fail_msg("case %s: error '%s' has more than one line", c->name, tk_error_last());
            assert_null(m);
            continue;
        }
        if (rc)
            fail_msg("case %s: %s", c->name, tk_error_last());
        if (c->text && (m->nguards != 1 || !strstr(m->guards[0], c->text)))
            fail_msg("case %s: %zu guards, the first '%s', expected one with '%s'", c->name, m->nguards,
                     m->nguards ? m->guards[0] : "", c->text);
        if (!c->text && m->nguards)
            fail_msg("case %s: guard '%s' recorded, expected none", c->name, m->guards[0]);
        const tk_pm_symbol *b = tk_pm_find_symbol(m, "batch");
        assert_non_null(b);
        if (b->min != c->bmin || b->max != c->bmax)
            fail_msg("case %s: batch in [%lld, %lld], expected [%lld, %lld]", c->name, (long long)b->min,
                     (long long)b->max, (long long)c->bmin, (long long)c->bmax);
        if (c->note && (m->nnotes != 1 || !strstr(m->notes[0], c->note)))
            fail_msg("case %s: notes %zu '%s', expected one with '%s'", c->name, m->nnotes,
                     m->nnotes ? m->notes[0] : "", c->note);
        if (!c->note && m->nnotes)
            fail_msg("case %s: note '%s', expected none", c->name, m->notes[0]);
        tk_program_model_free(m);
    }
}

/* The whole message of a dimension forced to a constant: dimension, declaration, value, op, the
 * model's source line, the requirement and both fixes. */
static void guards__forcing_message_names_dim_op_line_and_fix(void **state)
{
    (void)state;
    static const req_case c = {"x dim 0 == 8", REQ_EQ, L_BATCH, R_CONST, 8, 0, 0, 0, NULL, 0, 0, NULL};
    char expect[512];
    g_case = &c;
    assert_int_equal(trace_rc("guards", NULL), TK_EINVAL);
    snprintf(expect, sizeof expect, "test_exporter.c:%d (x dim 0 == 8); declare it static (8) or make the model "
             "accept any batch", g_require_line);
    assert_contains(tk_error_last(), "cannot export 'guards': dim 'batch' (input 'x' dim 0, declared dynamic in [1, "
                                     "1024]) is forced to 8 by op 'test::require' at ");
    assert_contains(tk_error_last(), expect);
}

static void guards__range_leaving_nothing_says_which_range_works(void **state)
{
    (void)state;
    static const req_case c = {"x dim 0 >= 2000", REQ_RANGE, L_BATCH, R_CONST, 0, 2000, 4000, 0, NULL, 0, 0, NULL};
    g_case = &c;
    assert_int_equal(trace_rc("guards", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "dim 'batch' (input 'x' dim 0, declared dynamic in [1, 1024]) must lie in [2000, "
                                     "4000] for op 'test::require' at ");
    assert_contains(tk_error_last(), "(x dim 0 >= 2000), which leaves nothing of its range [1, 1024]; declare its "
                                     "range within [2000, 4000]");
}

/* A guard repeated by two calls is recorded once; a narrowing stays for later requirements. */
static void guards__same_name_in_two_inputs_is_one_symbol(void **state)
{
    (void)state;
    static const req_case c = {"x dim 0 == y dim 0", REQ_EQ, L_BATCH, R_SEQ, 0, 0, 0, 1, NULL, 1, 1024, NULL};
    g_case = &c;
    tk_program_model *m = trace_ok("shared", NULL);
    assert_int_equal(m->nsymbols, 1);
    assert_string_equal(m->symbols[0].name, "batch");
    assert_int_equal(m->nguards, 0); /* batch == batch */
    assert_string_equal(m->inputs[0].dims[0].expr, "batch");
    assert_string_equal(m->inputs[1].dims[0].expr, "batch");
    tk_program_model_free(m);

    assert_int_equal(trace_rc("shared_bad", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "dim 'batch' is declared in [1, 1024] by input 'x' dim 0 and in [1, 512] by "
                                     "input 'y' dim 0");
}

/* ---- derived dimensions ------------------------------------------------------------------- */

static void derived__dims_are_expressions_over_symbols(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("derived", NULL);
    assert_int_equal(m->nnodes, 2);
    assert_string_equal(m->nodes[0].outputs[0].dims[0].expr, "2*batch");
    assert_null(m->nodes[0].outputs[0].dims[1].expr);
    assert_int_equal(m->nodes[0].outputs[0].dims[1].value, 3);
    assert_string_equal(m->nodes[1].outputs[0].dims[0].expr, "4*batch");
    assert_string_equal(m->outputs[0].dims[0].expr, "4*batch");
    assert_int_equal(m->nodes[1].inputs[0], m->nodes[0].outputs[0].id);
    /* through program.json and back */
    char *json = NULL, *again = NULL;
    tk_program_model *r = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    tk_assert_ok(tk_program_json_read(&r, json, strlen(json), "'derived'"));
    tk_assert_ok(tk_program_json_write(&again, r));
    assert_string_equal(json, again);
    assert_string_equal(r->outputs[0].dims[0].expr, "4*batch");
    free(json);
    free(again);
    tk_program_model_free(r);
    tk_program_model_free(m);
}

/* ---- other trace errors -------------------------------------------------------------------- */

static void trace__bad_models_get_one_line_errors(void **state)
{
    (void)state;
    assert_int_equal(trace_rc("unknown_op", NULL), TK_ENOTFOUND);
    assert_contains(tk_error_last(), "cannot export 'unknown_op': op 'test::no_such_op' is not registered");
    assert_int_equal(trace_rc("nometa", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "op 'test::nometa'");
    assert_contains(tk_error_last(), "has no meta function");
    assert_int_equal(trace_rc("own_tensor", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "a tensor the model made itself");
    assert_int_equal(trace_rc("no_output", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "the model set no output");
}

/* tk_call_outs: an op's two outputs, one node with both and the model's line; a count that is
 * not the op's is refused and leaves the outputs NULL */
static void trace__several_outputs_through_tk_call_outs(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("outs", NULL);
    assert_int_equal(m->nnodes, 1);
    assert_string_equal(m->nodes[0].op, "test::split2");
    assert_int_equal(m->nodes[0].nout, 2);
    assert_int_equal(m->nodes[0].line, g_outs_line);
    assert_non_null(strstr(m->nodes[0].file, "test_exporter.c"));
    assert_int_equal(m->noutputs, 2);
    assert_int_equal(m->outputs[0].id, m->nodes[0].outputs[0].id);
    assert_int_equal(m->outputs[1].id, m->nodes[0].outputs[1].id);
    tk_program_model_free(m);

    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CPU, 0}));
    const int64_t shape[] = {2, 4};
    tk_tensor *x, *outs[3] = {(tk_tensor *)1, (tk_tensor *)1, (tk_tensor *)1};
    tk_assert_ok(tk_tensor_new(&x, ctx, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape));
    for (int i = 0; i < 8; i++)
        ((float *)tk_tensor_data(x))[i] = (float)i;
    int line = __LINE__ + 1;
    assert_int_equal(tk_call_outs(ctx, "test::split2", outs, 3, x), TK_EINVAL);
    assert_contains(tk_error_last(), "op 'test::split2' returns 2 outputs, the call has room for 3");
    char at[64];
    snprintf(at, sizeof at, ":%d)", line);
    assert_contains(tk_error_last(), at);
    assert_null(outs[0]);
    assert_null(outs[1]);
    tk_assert_ok(tk_call_outs(ctx, "test::split2", outs, 2, x));
    assert_memory_equal(tk_tensor_data(outs[0]), tk_tensor_data(x), 8 * sizeof(float));
    assert_memory_equal(tk_tensor_data(outs[1]), tk_tensor_data(x), 8 * sizeof(float));
    tk_tensor_free(outs[0]);
    tk_tensor_free(outs[1]);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

/* What test::pick computes, written out again: y[j] = sign * (x[pick[j]] * scale + shift) (+ x[0]). */
static void pick_reference(const float *x, int cols, double scale, int shift, int neg, int first, const int *pick,
                           int n, float *y)
{
    (void)cols;
    for (int j = 0; j < n; j++)
        y[j] = (float)((neg ? -1.0 : 1.0) * (x[pick[j]] * scale + shift) + (first ? x[0] : 0.0));
}

/* Scalars reach the node's attrs with their defaults, program.json (version 2) holds them by
 * name in the schema's types, they read back equal, and a session running the program passes
 * them to the op again: its results match the op's formula computed here. */
static void trace__scalar_arguments_are_recorded_stored_and_passed_again(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("attrs", NULL), *r = NULL;
    assert_int_equal(m->nnodes, 2);
    const tk_pm_node *a = &m->nodes[0], *b = &m->nodes[1];
    assert_int_equal(a->nin, 6);
    assert_int_equal(a->inputs[1], -1);
    assert_int_equal(a->nattrs, 5);
    assert_string_equal(a->attrs[0].name, "scale");
    assert_int_equal(a->attrs[0].kind, TK_VALUE_FLOAT);
    assert_true(a->attrs[0].f == 0.5);
    assert_string_equal(a->attrs[4].name, "pick");
    assert_int_equal(a->attrs[4].nints, 3);
    assert_int_equal(a->attrs[4].ints[0], 3);
    assert_int_equal(b->attrs[1].kind, TK_VALUE_INT);
    assert_int_equal(b->attrs[1].i, 3); /* shift's default */
    assert_int_equal(b->outputs[0].dims[1].value, 2);

    char *json = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    assert_contains(json, "\"version\": 2,");
    assert_contains(json, "\"attrs\": {\"scale\": 0.5, \"shift\": 2, \"neg\": true, \"mode\": \"first\", "
                          "\"pick\": [3, 1, 0]}");
    assert_contains(json, "\"attrs\": {\"scale\": 2.0, \"shift\": 3, \"neg\": false, \"mode\": \"sum\", "
                          "\"pick\": [0, 2]}");
    tk_assert_ok(tk_program_json_read(&r, json, strlen(json), "'attrs'"));
    char *again = NULL;
    tk_assert_ok(tk_program_json_write(&again, r));
    assert_string_equal(again, json);
    free(again);
    free(json);

    /* inspect shows them in the call */
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    tk_assert_ok(tk_program_model_write_text(r, f));
    fclose(f);
    assert_contains(text, "= test::pick(x, scale=0.5, shift=2, neg=True, mode=\"first\", pick=[3, 1, 0])");
    free(text);

    tk_exec_program *p = NULL;
    tk_session *s = NULL;
    tk_assert_ok(tk_exec_program_new(&p, r, m->weights, m->weights_len, "'attrs'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, (tk_device){TK_DEVICE_CPU, 0}, NULL));
    for (int64_t batch = 1; batch <= 8; batch += 3) {
        const int64_t shape[2] = {batch, 4};
        tk_tensor *x = NULL, *y = NULL;
        tk_assert_ok(tk_tensor_new(&x, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape));
        float *xp = tk_tensor_data(x);
        for (int i = 0; i < batch * 4; i++)
            xp[i] = uniform(-2, 2);
        tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
        assert_int_equal(tk_tensor_dim(y, 0), batch);
        assert_int_equal(tk_tensor_dim(y, 1), 2);
        for (int64_t row = 0; row < batch; row++) {
            float mid[3], want[2];
            pick_reference(xp + row * 4, 4, 0.5, 2, 1, 1, (const int[]){3, 1, 0}, 3, mid);
            pick_reference(mid, 3, 2.0, 3, 0, 0, (const int[]){0, 2}, 2, want);
            for (int j = 0; j < 2; j++)
                if (fabsf(((float *)tk_tensor_data(y))[row * 2 + j] - want[j]) > 1e-5f)
                    fail_msg("batch %lld row %lld col %d: %g, expected %g", (long long)batch, (long long)row, j,
                             ((float *)tk_tensor_data(y))[row * 2 + j], want[j]);
        }
        tk_tensor_free(x);
        tk_tensor_free(y);
    }
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(r);
    tk_program_model_free(m);

    /* a scalar of the wrong type stops the export at the model's line */
    assert_int_equal(trace_rc("attrs_bad", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "argument 'shift' (in[2]) of op 'test::pick' is an int, got a str");
    char at[64];
    snprintf(at, sizeof at, ":%d", g_attr_bad_line);
    assert_contains(tk_error_last(), at);
}

static char *edited_json(const tk_program_model *m, const char *from, const char *to);

/* Layout ops keep the batch symbolic (a floor division, its guard, a product by a constant), and
 * a session runs them: out[i][k][j] == x[i][j][k]. Flattening two dynamic dims gives their product. */
/* tk_split: one tk::narrow node a part, each with the model's line; a split of a dynamic dim
 * pins it to the sizes' sum; eager refusals name what was wrong. */
static void trace__split_is_one_narrow_a_part(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("split_static", NULL);
    assert_int_equal(m->nnodes, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(m->nodes[i].op, "tk::narrow");
        assert_int_equal(m->nodes[i].line, g_split_line + 3 * (i >= 2));
    }
    tk_program_model_free(m);
    char msg[256];
    snprintf(msg, sizeof msg, "is forced to 3 by op 'tk::split' at tests/test_exporter.c:%d (x dim 0 == the sum of "
             "split's sizes (3))", g_split_line + 3);
    assert_int_equal(trace_rc("split", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), msg);
    tk_ctx *ctx = NULL;
    tk_tensor *x = NULL, *parts[3] = {NULL, NULL, NULL};
    const int64_t shape[2] = {3, 6}, ok[] = {1, 5}, bad_sum[] = {2, 3}, neg[] = {7, -1};
    tk_assert_ok(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CPU, 0}));
    tk_assert_ok(tk_tensor_new(&x, ctx, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape));
    float *xp = tk_tensor_data(x);
    for (int i = 0; i < 18; i++)
        xp[i] = (float)i;
    tk_assert_ok(tk_split(ctx, x, ok, 2, 1, parts));
    assert_int_equal(tk_tensor_dim(parts[1], 1), 5);
    for (int r = 0; r < 3; r++) {
        assert_true(((float *)tk_tensor_data(parts[0]))[r] == xp[r * 6]);
        for (int c = 0; c < 5; c++)
            assert_true(((float *)tk_tensor_data(parts[1]))[r * 5 + c] == xp[r * 6 + 1 + c]);
    }
    tk_tensor_free(parts[0]);
    tk_tensor_free(parts[1]);
    tk_assert_fails(tk_split(ctx, x, bad_sum, 2, 1, parts), TK_EINVAL, "x dim 1 == the sum of split's sizes (5)");
    assert_null(parts[0]);
    tk_assert_fails(tk_split(ctx, x, neg, 2, 0, parts), TK_EINVAL, "tk_split: sizes[1] is -1 (expected >= 0)");
    tk_assert_fails(tk_split(ctx, x, ok, 2, 2, parts), TK_EINVAL, "op 'tk::split': dim is 2, outside [-2, 1]");
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void trace__layout_ops_keep_dynamic_dims(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("layout", NULL);
    assert_int_equal(m->nnodes, 3);
    assert_string_equal(m->nodes[0].outputs[0].dims[0].expr, "batch // 2");
    assert_string_equal(m->nodes[2].outputs[0].dims[0].expr, "2*(batch // 2)");
    assert_int_equal(m->nguards, 1);
    assert_string_equal(m->guards[0], "batch % 2 == 0");
    tk_exec_program *p = NULL;
    tk_session *s = NULL;
    tk_assert_ok(tk_exec_program_new(&p, m, m->weights, m->weights_len, "'layout'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, (tk_device){TK_DEVICE_CPU, 0}, NULL));
    for (int64_t batch = 2; batch <= 16; batch += 6) {
        const int64_t shape[3] = {batch, 6, 8};
        tk_tensor *x = NULL, *y = NULL;
        tk_assert_ok(tk_tensor_new(&x, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 3, shape));
        float *xp = tk_tensor_data(x);
        for (int i = 0; i < batch * 48; i++)
            xp[i] = (float)i;
        tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
        assert_int_equal(tk_tensor_dim(y, 0), batch);
        assert_int_equal(tk_tensor_dim(y, 1), 8);
        const float *yp = tk_tensor_data(y);
        for (int64_t i = 0; i < batch; i++)
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < 6; j++)
                    assert_true(yp[(i * 8 + k) * 6 + j] == xp[(i * 6 + j) * 8 + k]);
        tk_tensor_free(x);
        tk_tensor_free(y);
    }
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(m);
    /* two dynamic dims flattened: their product, through program.json and a session */
    m = trace_ok("reshape", NULL);
    assert_int_equal(m->nnodes, 1);
    assert_string_equal(m->nodes[0].outputs[0].dims[0].expr, "batch*seq");
    assert_int_equal(m->nodes[0].outputs[0].dims[1].value, 2);
    assert_int_equal(m->nguards, 0);
    tk_program_model_free(m);
    m = trace_ok("layout_prod", NULL);
    assert_string_equal(m->nodes[0].outputs[0].dims[0].expr, "batch*seq");
    char *json = NULL;
    tk_program_model *r = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    tk_assert_ok(tk_program_json_read(&r, json, strlen(json), "'layout_prod'"));
    free(json);
    tk_assert_ok(tk_exec_program_new(&p, r, m->weights, m->weights_len, "'layout_prod'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, (tk_device){TK_DEVICE_CPU, 0}, NULL));
    for (int64_t batch = 1; batch <= 8; batch += 3)
        for (int64_t seq = 1; seq <= 8; seq += 5) {
            const int64_t shape[3] = {batch, seq, 4};
            tk_tensor *x = NULL, *y = NULL;
            tk_assert_ok(tk_tensor_new(&x, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 3, shape));
            for (int i = 0; i < batch * seq * 4; i++)
                ((float *)tk_tensor_data(x))[i] = (float)(i * 3);
            tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
            assert_int_equal(tk_tensor_rank(y), 3);
            assert_int_equal(tk_tensor_dim(y, 0), batch * seq);
            assert_memory_equal(tk_tensor_data(y), tk_tensor_data(x), tk_tensor_nbytes(x));
            tk_tensor_free(x);
            tk_tensor_free(y);
        }
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(r);
    tk_program_model_free(m);
}

/* Hand-edited attrs: each mismatch with the op's schema is refused, naming the node and key. */
static void tkprog__attrs_are_checked_against_the_schema(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("attrs", NULL), *r = NULL;
    static const struct {
        const char *from, *to, *want;
    } edits[] = {
        {"\"shift\": 2,", "\"shift\": 2.5,", "nodes[0].attrs.shift is not an int"},
        {"\"neg\": true", "\"neg\": 1", "nodes[0].attrs.neg is not true or false"},
        {"\"mode\": \"first\"", "\"mode\": 7", "nodes[0].attrs.mode is not a string"},
        {"\"pick\": [3, 1, 0]", "\"pick\": [3, \"1\"]", "nodes[0].attrs.pick[1] is not an int"},
        {"\"scale\": 0.5, ", "", "nodes[0]: attrs lack 'scale', argument 1 of op 'test::pick' (a float)"},
        {"\"scale\": 0.5,", "\"scale\": 0.5, \"eps\": 1.0,", "nodes[0].attrs has 'eps', which is no scalar"},
        {"\"version\": 2", "\"version\": 1", "nodes[0]: 'attrs' must be an empty object in version 1"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char *json = edited_json(m, edits[i].from, edits[i].to);
        assert_int_equal(tk_program_json_read(&r, json, strlen(json), "'x.tkprog'"), TK_EFORMAT);
        assert_contains(tk_error_last(), edits[i].want);
        assert_null(r);
        free(json);
    }
    tk_program_model_free(m);
}

/* A meta function that reads a dynamic dim as a number fails the export, naming the op, the
 * output dim, the model's line and the fix; eagerly the same ops run (every dim is a number). */
static void trace__a_meta_that_reads_a_dynamic_dim_as_a_number_is_refused(void **state)
{
    (void)state;
    static const char *const progs[2] = {"dyn_dim", "dyn_value"}, *const ops[2] = {"test::rows_by_dim",
                                                                                   "test::rows_by_value"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(trace_rc(progs[i], NULL), TK_EINVAL);
        char want[160];
        snprintf(want, sizeof want, "op '%s'", ops[i]);
        assert_contains(tk_error_last(), want);
        assert_contains(tk_error_last(), "dim 0 is ");
        assert_contains(tk_error_last(), "computed from a dynamic dim read as a number");
        assert_contains(tk_error_last(), "tk_tensor_sym");
        snprintf(want, sizeof want, "test_exporter.c:%d)", g_dyn_line[i]);
        assert_contains(tk_error_last(), want);
    }
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CPU, 0}));
    const int64_t shape[] = {3, 4};
    tk_tensor *x, *y;
    tk_assert_ok(tk_tensor_new(&x, ctx, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape));
    memset(tk_tensor_data(x), 0, tk_tensor_nbytes(x));
    assert_non_null(y = tk_call(ctx, "test::rows_by_dim", x));
    assert_int_equal(tk_tensor_dim(y, 0), 6);
    tk_tensor_free(y);
    assert_non_null(y = tk_call(ctx, "test::rows_by_value", x));
    assert_int_equal(tk_tensor_dim(y, 0), 67);
    tk_tensor_free(y);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

/* A failed call's NULL passed on after calls that succeeded: the message keeps the first failure
 * with its line, and names the argument that got the NULL the way op code indexes it. */
static void trace__a_null_passed_on_names_the_first_failure(void **state)
{
    (void)state;
    assert_int_equal(trace_rc("chain", NULL), TK_EINVAL);
    char want[256];
    snprintf(want, sizeof want, "test_exporter.c:%d))", g_chain_line);
    assert_contains(tk_error_last(), "input 'x' (in[0]) of op 'test::require' is NULL (an earlier call failed: ");
    assert_contains(tk_error_last(), want);
}

/* ---- a tiny interpreter of traced programs ------------------------------------------------ */

/* Runs a traced program on the CPU: its nodes in order through tk_op_run, parameters from the
 * model's own weights; every value's shape is checked against its symbolic shape evaluated at
 * the inputs' sizes. Returns the first output (the caller's). */
static tk_tensor *interpret(const tk_program_model *m, tk_tensor *const *inputs)
{
    tk_ctx *ctx = NULL;
    tk_safetensors *st = NULL;
    int maxid = 0;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    for (size_t i = 0; i < m->ninputs; i++)
        maxid = m->inputs[i].id > maxid ? m->inputs[i].id : maxid;
    for (size_t i = 0; i < m->nparams; i++)
        maxid = m->params[i].id > maxid ? m->params[i].id : maxid;
    for (size_t i = 0; i < m->nnodes; i++)
        for (int j = 0; j < m->nodes[i].nout; j++)
            maxid = m->nodes[i].outputs[j].id > maxid ? m->nodes[i].outputs[j].id : maxid;
    tk_tensor **vals = calloc((size_t)maxid + 1, sizeof(*vals));
    unsigned char *borrowed = calloc((size_t)maxid + 1, 1);
    /* symbols bound from the inputs */
    const char *names[64];
    tk_sym vars[64];
    int64_t values[64];
    int nsym = (int)m->nsymbols;
    for (int s = 0; s < nsym; s++) {
        names[s] = m->symbols[s].name;
        vars[s] = tk_sym_var(ctx, names[s], m->symbols[s].min, m->symbols[s].max);
        values[s] = -1;
        for (size_t i = 0; i < m->ninputs; i++)
            for (int d = 0; d < m->inputs[i].rank; d++)
                if (m->inputs[i].dims[d].expr && !strcmp(m->inputs[i].dims[d].expr, names[s]))
                    values[s] = tk_tensor_dim(inputs[i], d);
        assert_in_range(values[s], m->symbols[s].min, m->symbols[s].max);
    }
    for (size_t i = 0; i < m->ninputs; i++) {
        vals[m->inputs[i].id] = inputs[i];
        borrowed[m->inputs[i].id] = 1;
    }
    tk_assert_ok(tk_safetensors_parse(&st, m->weights, m->weights_len, "weights"));
    for (size_t i = 0; i < m->nparams; i++)
        tk_assert_ok(tk_safetensors_load(&vals[m->params[i].id], NULL, CPU, st,
                                         tk_safetensors_find(st, m->params[i].name)));
    for (size_t i = 0; i < m->nnodes; i++) {
        const tk_pm_node *n = &m->nodes[i];
        tk_tensor *ins[16] = {0}, *outs[16] = {0};
        for (int j = 0; j < n->nin; j++)
            ins[j] = n->inputs[j] >= 0 ? vals[n->inputs[j]] : NULL;
        tk_assert_ok(tk_op_run(ctx, n->op, ins, n->nin, outs, n->nout));
        for (int j = 0; j < n->nout; j++) {
            const tk_pm_value *v = &n->outputs[j];
            assert_int_equal(tk_tensor_dtype(outs[j]), v->dtype);
            assert_int_equal(tk_tensor_rank(outs[j]), v->rank);
            for (int d = 0; d < v->rank; d++) {
                int64_t want = v->dims[d].value;
                if (v->dims[d].expr) {
                    tk_sym s;
                    tk_assert_ok(tk_sym_parse(ctx, v->dims[d].expr, names, vars, nsym, &s));
                    tk_assert_ok(tk_sym_eval(s, names, values, nsym, &want));
                }
                assert_int_equal(tk_tensor_dim(outs[j], d), want);
            }
            vals[v->id] = outs[j];
        }
    }
    tk_tensor *result = vals[m->outputs[0].id];
    vals[m->outputs[0].id] = NULL;
    for (int i = 0; i <= maxid; i++)
        if (!borrowed[i])
            tk_tensor_free(vals[i]);
    free(vals);
    free(borrowed);
    tk_safetensors_free(st);
    tk_ctx_free(ctx);
    return result;
}

/* ---- weights ------------------------------------------------------------------------------- */

#ifdef TK_MLP_WEIGHTS
/* A safetensors file of the four mlp parameters, one of them with another shape or left out. */
static char *write_mlp_weights(const char *dir, const char *file, const char *skip, const char *reshape)
{
    static const struct {
        const char *name;
        int rank;
        int64_t shape[2];
    } params[] = {{"linear1.weight", 2, {64, 128}}, {"linear1.bias", 1, {64}}, {"linear2.weight", 2, {128, 64}},
                  {"linear2.bias", 1, {128}}};
    const char *names[4];
    tk_tensor *ts[4];
    size_t n = 0;
    for (size_t i = 0; i < 4; i++) {
        if (skip && !strcmp(skip, params[i].name))
            continue;
        int64_t shape[2] = {params[i].shape[0], params[i].shape[1]};
        if (reshape && !strcmp(reshape, params[i].name))
            shape[params[i].rank - 1] += 4;
        names[n] = params[i].name;
        ts[n++] = random_tensor(TK_BF16, params[i].rank, shape);
    }
    char *path = malloc(strlen(dir) + strlen(file) + 2);
    sprintf(path, "%s/%s", dir, file);
    tk_assert_ok(tk_safetensors_write(path, n, names, ts));
    for (size_t i = 0; i < n; i++)
        tk_tensor_free(ts[i]);
    return path;
}

static void weights__missing_misshaped_and_corrupt_are_refused(void **state)
{
    (void)state;
    char *dir = temp_dir();
    char *missing = write_mlp_weights(dir, "missing.safetensors", "linear2.bias", NULL);
    char *misshaped = write_mlp_weights(dir, "misshaped.safetensors", NULL, "linear1.weight");
    char corrupt[512];

    assert_int_equal(trace_rc("mlp", missing), TK_ENOTFOUND);
    assert_contains(tk_error_last(), "cannot export 'mlp': parameter 'linear2.bias' is not in '");

    assert_int_equal(trace_rc("mlp", misshaped), TK_EINVAL);
    assert_contains(tk_error_last(), "cannot export 'mlp': ");
    assert_contains(tk_error_last(), "weight is [64, 132] but x has 128 features");

    assert_int_equal(trace_rc("mlp", NULL), TK_EINVAL);
    assert_contains(tk_error_last(), "parameter 'linear1.weight' needs a weights file");

    /* the file cut short: the reader's validation names it */
    char *bytes = read_whole(misshaped);
    snprintf(corrupt, sizeof corrupt, "%s/corrupt.safetensors", dir);
    FILE *f = fopen(corrupt, "wb");
    assert_non_null(f);
    fwrite(bytes, 1, 100, f);
    fclose(f);
    assert_true(trace_rc("mlp", corrupt) != 0);
    assert_contains(tk_error_last(), "cannot export 'mlp': ");
    assert_contains(tk_error_last(), "corrupt.safetensors");
    assert_null(strchr(tk_error_last(), '\n'));
    free(bytes);
    free(missing);
    free(misshaped);
    rm_tree(dir);
}

/* ---- the mlp: round trips, program.json, eager vs traced ---------------------------------- */

/* The mlp traced with the generated weights and completed by the analyzer on examples/mlp. */
static tk_program_model *mlp_model(void)
{
    tk_program_model *m = trace_ok("mlp", TK_MLP_WEIGHTS);
    const char *paths[] = {"examples/mlp"};
    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    tk_assert_ok(tk_export_closure(m, &opts, paths, 1));
    return m;
}

static void tkprog__write_read_write_is_byte_identical(void **state)
{
    (void)state;
    tk_program_model *m = mlp_model(), *r = NULL, *r2 = NULL;
    void *a = NULL, *b = NULL, *c = NULL;
    size_t na, nb, nc;
    tk_assert_ok(tk_tkprog_write_mem(&a, &na, m));
    tk_assert_ok(tk_tkprog_read_mem(&r, a, na, "'mlp.tkprog'"));
    tk_assert_ok(tk_tkprog_write_mem(&b, &nb, r));
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    /* and through a file, twice */
    char *dir = temp_dir(), path[512];
    snprintf(path, sizeof path, "%s/mlp.tkprog", dir);
    tk_assert_ok(tk_tkprog_write(r, path));
    tk_assert_ok(tk_tkprog_read(&r2, path));
    tk_assert_ok(tk_tkprog_write_mem(&c, &nc, r2));
    assert_int_equal(na, nc);
    assert_memory_equal(a, c, na);
    /* the weights are the parameters' bytes, unchanged */
    tk_safetensors *orig = NULL, *kept = NULL;
    tk_assert_ok(tk_safetensors_open(&orig, TK_MLP_WEIGHTS));
    tk_assert_ok(tk_safetensors_parse(&kept, r2->weights, r2->weights_len, "kept"));
    assert_int_equal(tk_safetensors_count(kept), 4);
    for (size_t i = 0; i < tk_safetensors_count(kept); i++) {
        const tk_safetensors_entry *k = tk_safetensors_at(kept, i), *o = tk_safetensors_find(orig, k->name);
        assert_non_null(o);
        assert_string_equal(k->dtype, "BF16");
        assert_int_equal(k->end - k->begin, o->end - o->begin);
        assert_memory_equal(k->data, o->data, k->end - k->begin);
    }
    tk_safetensors_free(orig);
    tk_safetensors_free(kept);
    free(a);
    free(b);
    free(c);
    tk_program_model_free(m);
    tk_program_model_free(r);
    tk_program_model_free(r2);
    rm_tree(dir);
}

static const cJSON *get(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        fail_msg("no '%s' in program.json", k);
    return v;
}

static void program_json__has_every_field(void **state)
{
    (void)state;
    tk_program_model *m = mlp_model();
    char *json = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    /* keys in their fixed order */
    static const char *const keys[] = {"format", "version", "program", "symbols", "inputs", "outputs", "parameters",
                                       "nodes", "guards", "notes", "ops", "tuning", "sources"};
    const cJSON *it = doc->child;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++, it = it->next) {
        assert_non_null(it);
        assert_string_equal(it->string, keys[i]);
    }
    assert_null(it);
    assert_string_equal(get(doc, "format")->valuestring, "tkprog");
    assert_int_equal(get(doc, "version")->valueint, 1);
    assert_string_equal(get(doc, "program")->valuestring, "mlp");
    const cJSON *sym = cJSON_GetArrayItem(get(doc, "symbols"), 0);
    assert_string_equal(get(sym, "name")->valuestring, "batch");
    assert_int_equal(get(sym, "min")->valueint, 1);
    assert_int_equal(get(sym, "max")->valueint, 1024);
    const cJSON *x = cJSON_GetArrayItem(get(doc, "inputs"), 0);
    assert_string_equal(get(x, "name")->valuestring, "x");
    assert_string_equal(get(x, "dtype")->valuestring, "bf16");
    assert_string_equal(cJSON_GetArrayItem(get(x, "shape"), 0)->valuestring, "batch");
    assert_int_equal(cJSON_GetArrayItem(get(x, "shape"), 1)->valueint, 128);
    const cJSON *params = get(doc, "parameters");
    assert_int_equal(cJSON_GetArraySize(params), 4);
    assert_string_equal(get(cJSON_GetArrayItem(params, 0), "name")->valuestring, "linear1.weight");
    const cJSON *nodes = get(doc, "nodes");
    assert_int_equal(cJSON_GetArraySize(nodes), 3);
    static const char *const ops[] = {"tk::linear", "custom_ops::silu", "tk::linear"};
    for (int i = 0; i < 3; i++) {
        const cJSON *n = cJSON_GetArrayItem(nodes, i);
        assert_string_equal(get(n, "op")->valuestring, ops[i]);
        assert_true(cJSON_IsObject(get(n, "attrs")));
        assert_true(get(get(n, "source"), "line")->valueint > 0);
        const cJSON *o = cJSON_GetArrayItem(get(n, "outputs"), 0);
        assert_string_equal(get(o, "dtype")->valuestring, "bf16");
        assert_string_equal(cJSON_GetArrayItem(get(o, "shape"), 0)->valuestring, "batch");
    }
    /* every node carries the model's own source line, tk_linear's too */
    static const char *const calls[] = {"tk_linear(ctx, in[0]", "tk_call(ctx, \"custom_ops::silu\"",
                                        "tk_linear(ctx, a"};
    for (int i = 0; i < 3; i++) {
        const cJSON *src = get(cJSON_GetArrayItem(nodes, i), "source");
        assert_string_equal(get(src, "file")->valuestring, "examples/mlp/model.c");
        assert_int_equal(get(src, "line")->valueint, tk_line_of("examples/mlp/model.c", calls[i]));
    }
    const cJSON *out = cJSON_GetArrayItem(get(doc, "outputs"), 0);
    assert_int_equal(get(out, "id")->valueint,
                     get(cJSON_GetArrayItem(get(cJSON_GetArrayItem(nodes, 2), "outputs"), 0), "id")->valueint);
    const cJSON *optab = get(doc, "ops");
    assert_int_equal(cJSON_GetArraySize(optab), 2);
    const cJSON *silu = cJSON_GetArrayItem(optab, 0), *lin = cJSON_GetArrayItem(optab, 1);
    assert_string_equal(get(silu, "name")->valuestring, "custom_ops::silu");
    assert_string_equal(get(silu, "schema")->valuestring, "(Tensor x) -> Tensor");
    assert_string_equal(get(silu, "function")->valuestring, "silu_op");
    assert_string_equal(get(silu, "file")->valuestring, "examples/mlp/silu_op.c");
    assert_string_equal(cJSON_GetArrayItem(get(silu, "kernels"), 0)->valuestring, "silu_kernel");
    assert_true(cJSON_IsFalse(get(silu, "builtin")));
    assert_string_equal(get(lin, "name")->valuestring, "tk::linear");
    assert_true(cJSON_IsTrue(get(lin, "builtin")));
    assert_string_equal(get(lin, "file")->valuestring, "<builtin>");
    const cJSON *sources = get(doc, "sources");
    assert_int_equal(cJSON_GetArraySize(sources), 2);
    assert_string_equal(get(cJSON_GetArrayItem(sources, 0), "path")->valuestring, "examples/mlp/silu.cu");
    assert_string_equal(get(cJSON_GetArrayItem(sources, 1), "path")->valuestring, "examples/mlp/silu_op.c");
    char *text = read_whole("examples/mlp/silu_op.c");
    char hex[65];
    tk_sha256_hex(text, strlen(text), hex);
    assert_string_equal(get(cJSON_GetArrayItem(sources, 1), "sha256")->valuestring, hex);
    free(text);
    cJSON_Delete(doc);
    free(json);
    tk_program_model_free(m);
}

/* A zip holding these entries (name, bytes; lens NULL: texts) in this order. */
static void *make_zip(size_t *len, const char *const *names, const char *const *texts, const size_t *lens, size_t n)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_source_keep(src);
    zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
    assert_non_null(za);
    for (size_t i = 0; i < n; i++) {
        zip_source_t *s = zip_source_buffer(za, texts[i], lens ? lens[i] : strlen(texts[i]), 0);
        assert_true(zip_file_add(za, names[i], s, 0) >= 0);
    }
    assert_int_equal(zip_close(za), 0);
    zip_source_open(src);
    zip_source_seek(src, 0, SEEK_END);
    zip_int64_t size = zip_source_tell(src);
    zip_source_seek(src, 0, SEEK_SET);
    void *buf = malloc((size_t)size);
    assert_int_equal(zip_source_read(src, buf, (zip_uint64_t)size), size);
    zip_source_close(src);
    zip_source_free(src);
    *len = (size_t)size;
    return buf;
}

/* program.json of the mlp with `from` replaced by `to`. */
static char *edited_json(const tk_program_model *m, const char *from, const char *to)
{
    char *json = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    char *at = strstr(json, from);
    assert_non_null(at);
    char *out = malloc(strlen(json) + strlen(to) + 1);
    memcpy(out, json, (size_t)(at - json));
    strcpy(out + (at - json), to);
    strcat(out, at + strlen(from));
    free(json);
    return out;
}

/* program.json's tuning record is checked like every other table: its counts against each other
 * and against what a package can hold (a fatbin per variant, at most TK_TUNE_MAX_CONFIGS). */
static void tkprog__tuning_records_are_checked(void **state)
{
    (void)state;
    tk_program_model *m = mlp_model(), *r = NULL;
    assert_true(m->has_tuning); /* the mlp's silu_kernel, recorded at export */
    tk_strbuf many = TK_STRBUF_INIT;
    tk_strbuf_adds(&many, "\"tuning\": [{\"kernel\": \"k\", \"key\": \"n\", \"params\": [\"BLOCK\"], \"configs\": [");
    for (int c = 0; c < 33; c++)
        tk_strbuf_addf(&many, "%s[%d]", c ? ", " : "", 32 + c);
    tk_strbuf_adds(&many, "], \"heuristic\": {\"param\": \"EVEN\", \"values\": [0, 1]}, \"file\": \"op.c\", \"line\": 3},");
    char *variants = edited_json(m, "\"tuning\": [", many.buf);
    char *short_config = edited_json(m, "\"tuning\": [",
                                     "\"tuning\": [{\"kernel\": \"k\", \"key\": \"n\", \"params\": [\"BLOCK\", \"ITEMS\"], "
                                     "\"configs\": [[256, 1], [128]], \"heuristic\": null, \"file\": \"op.c\", \"line\": 3},");
    char *good = edited_json(m, "\"tuning\": [",
                             "\"tuning\": [{\"kernel\": \"k\", \"key\": \"n\", \"params\": [\"BLOCK\"], \"configs\": [[256], "
                             "[128]], \"heuristic\": {\"param\": \"EVEN\", \"values\": [0, 1]}, \"file\": \"op.c\", \"line\": 3},");
    tk_strbuf_release(&many);
    assert_int_equal(tk_program_json_read(&r, variants, strlen(variants), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "tuning[0]: 33 configurations with 2 heuristic values make 66 variants, more than 64");
    assert_int_equal(tk_program_json_read(&r, short_config, strlen(short_config), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "tuning[0]: configs[1] holds 1 values for 2 parameters");
    assert_null(r);
    tk_assert_ok(tk_program_json_read(&r, good, strlen(good), "'x.tkprog'"));
    assert_true(r->has_tuning);
    assert_int_equal(r->ntunes, 2);
    assert_string_equal(r->tunes[0].kernel, "k"); /* sorted by kernel */
    assert_int_equal(r->tunes[0].nconfigs, 2);
    assert_int_equal(r->tunes[0].values[1][0], 128);
    assert_int_equal(r->tunes[0].nh, 2);
    /* written back as read, one entry per line */
    char *again = NULL;
    tk_assert_ok(tk_program_json_write(&again, r));
    assert_contains(again, "\n    {\"kernel\": \"k\", \"key\": \"n\", \"params\": [\"BLOCK\"], \"configs\": [[256], [128]], "
                           "\"heuristic\": {\"param\": \"EVEN\", \"values\": [0, 1]}, \"file\": \"op.c\", \"line\": 3},\n");
    free(again);
    tk_program_model_free(r);
    free(variants);
    free(short_config);
    free(good);
    tk_program_model_free(m);
}

static void tkprog__readers_refuse_other_versions_and_damage(void **state)
{
    (void)state;
    tk_program_model *m = mlp_model(), *r = NULL;
    char *v2 = edited_json(m, "\"version\": 1", "\"version\": 3");
    char *fmt = edited_json(m, "\"format\": \"tkprog\"", "\"format\": \"tkpkg\"");
    char *badref = edited_json(m, "\"inputs\": [5]", "\"inputs\": [42]");
    char *badexpr = edited_json(m, "[\"batch\", 64]", "[\"batch +\", 64]");
    char *unknown_sym = edited_json(m, "[\"batch\", 64]", "[\"seq\", 64]");

    assert_int_equal(tk_program_json_read(&r, v2, strlen(v2), "'x.tkprog'"), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "'x.tkprog' is tkprog version 3; this tkexport reads versions 1 to 2");
    assert_int_equal(tk_program_json_read(&r, fmt, strlen(fmt), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "'x.tkprog' is not a tkprog file (program.json has format 'tkpkg'");
    assert_int_equal(tk_program_json_read(&r, badref, strlen(badref), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "nodes[1]: inputs[0] is value 42, which no input, parameter or earlier node");
    assert_int_equal(tk_program_json_read(&r, badexpr, strlen(badexpr), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "shape[0] 'batch +'");
    assert_int_equal(tk_program_json_read(&r, unknown_sym, strlen(unknown_sym), "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "'seq'");
    assert_int_equal(tk_program_json_read(&r, "[1, 2]", 6, "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "not a JSON object");
    assert_null(r);

    /* the same through the zip */
    size_t len;
    const char *names[] = {"program.json", "weights.safetensors"};
    const char *texts[] = {v2, ""};
    void *zip = make_zip(&len, names, texts, NULL, 2);
    assert_int_equal(tk_tkprog_read_mem(&r, zip, len, "'x.tkprog'"), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "'x.tkprog' is tkprog version 3; this tkexport reads versions 1 to 2");
    free(zip);
    const char *extra_names[] = {"program.json", "notes.txt"};
    const char *extra_texts[] = {"{}", "x"};
    zip = make_zip(&len, extra_names, extra_texts, NULL, 2);
    assert_int_equal(tk_tkprog_read_mem(&r, zip, len, "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "unexpected entry 'notes.txt'");
    free(zip);

    /* not a zip; a truncated one; a source whose bytes changed */
    assert_int_equal(tk_tkprog_read_mem(&r, "hello", 5, "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "'x.tkprog' is not a .tkprog (not a readable zip archive");
    void *good;
    size_t glen;
    tk_assert_ok(tk_tkprog_write_mem(&good, &glen, m));
    assert_int_not_equal(tk_tkprog_read_mem(&r, good, glen - 30, "'x.tkprog'"), 0);
    assert_contains(tk_error_last(), "'x.tkprog'");
    char *json = NULL;
    tk_assert_ok(tk_program_json_write(&json, m));
    const char *src_names[] = {"program.json", "sources/examples/mlp/silu.cu", "sources/examples/mlp/silu_op.c",
                               "weights.safetensors"};
    const char *src_texts[] = {json, "changed", "changed", (const char *)m->weights};
    const size_t src_lens[] = {strlen(json), 7, 7, m->weights_len};
    zip = make_zip(&len, src_names, src_texts, src_lens, 4);
    assert_int_equal(tk_tkprog_read_mem(&r, zip, len, "'x.tkprog'"), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "'x.tkprog': entry 'sources/examples/mlp/silu.cu' does not match its SHA-256 "
                                         "in program.json");
    free(zip);
    /* weights that are not safetensors */
    src_texts[1] = (const char *)m->sources[0].data;
    src_texts[2] = (const char *)m->sources[1].data;
    const size_t bad_lens[] = {strlen(json), m->sources[0].len, m->sources[1].len, 5};
    zip = make_zip(&len, src_names, src_texts, bad_lens, 4);
    assert_int_equal(tk_tkprog_read_mem(&r, zip, len, "'x.tkprog'"), TK_EFORMAT);
    assert_contains(tk_error_last(), "'x.tkprog': weights.safetensors");
    free(zip);
    /* and all four right (even in libzip's own layout): it reads */
    const size_t good_lens[] = {strlen(json), m->sources[0].len, m->sources[1].len, m->weights_len};
    src_texts[3] = (const char *)m->weights;
    zip = make_zip(&len, src_names, src_texts, good_lens, 4);
    tk_assert_ok(tk_tkprog_read_mem(&r, zip, len, "'x.tkprog'"));
    assert_int_equal(r->nnodes, 3);
    tk_program_model_free(r);
    r = NULL;
    free(zip);
    assert_null(r);

    free(good);
    free(json);
    free(v2);
    free(fmt);
    free(badref);
    free(badexpr);
    free(unknown_sym);
    tk_program_model_free(m);
}

static void mlp__eager_and_traced_agree_bitwise_on_the_cpu(void **state)
{
    (void)state;
    tk_program_model *traced = mlp_model(), *m = NULL;
    void *bytes;
    size_t len;
    /* the program as a consumer sees it: written and read back */
    tk_assert_ok(tk_tkprog_write_mem(&bytes, &len, traced));
    tk_assert_ok(tk_tkprog_read_mem(&m, bytes, len, "'mlp.tkprog'"));
    static const int64_t batches[] = {1, 37, 1024};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        const int64_t shape[] = {batches[b], 128};
        tk_tensor *x = random_tensor(TK_BF16, 2, shape), *eager[TK_PROGRAM_MAX_OUTPUTS] = {0};
        tk_ctx *ctx = NULL;
        int nout = 0;
        tk_assert_ok(tk_ctx_new(&ctx, CPU));
        tk_assert_ok(tk_ctx_set_weights(ctx, TK_MLP_WEIGHTS));
        tk_assert_ok(tk_program_run(ctx, "mlp", &x, 1, eager, &nout));
        assert_int_equal(nout, 1);
        tk_tensor *y = interpret(m, &x);
        assert_int_equal(tk_tensor_dim(y, 0), batches[b]);
        assert_int_equal(tk_tensor_dim(y, 1), 128);
        assert_int_equal(tk_tensor_nbytes(y), tk_tensor_nbytes(eager[0]));
        assert_memory_equal(tk_tensor_data(y), tk_tensor_data(eager[0]), tk_tensor_nbytes(y));
        tk_tensor_free(y);
        tk_tensor_free(eager[0]);
        tk_tensor_free(x);
        tk_ctx_free(ctx);
    }
    free(bytes);
    tk_program_model_free(m);
    tk_program_model_free(traced);
}
#endif

static void derived__eager_and_traced_agree(void **state)
{
    (void)state;
    tk_program_model *m = trace_ok("derived", NULL);
    const int64_t shape[] = {5, 3};
    tk_tensor *x = random_tensor(TK_F32, 2, shape), *eager[TK_PROGRAM_MAX_OUTPUTS] = {0};
    tk_ctx *ctx = NULL;
    int nout = 0;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_assert_ok(tk_program_run(ctx, "derived", &x, 1, eager, &nout));
    tk_tensor *y = interpret(m, &x);
    assert_int_equal(tk_tensor_dim(y, 0), 20);
    assert_memory_equal(tk_tensor_data(y), tk_tensor_data(eager[0]), tk_tensor_nbytes(y));
    tk_tensor_free(y);
    tk_tensor_free(eager[0]);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
    tk_program_model_free(m);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

#ifdef TK_TKEXPORT
/* Runs tkexport with args in the current folder; its stdout and stderr into *out and *err. */
static int run_tkexport(const char *const *args, char **out, char **err)
{
    const char *argv[32];
    int argc = 0;
    argv[argc++] = TK_TKEXPORT;
    for (; *args && argc < 31; args++)
        argv[argc++] = *args;
    argv[argc] = NULL;
    return tk_test_run(argv, NULL, out, err);
}

#define CLI(expect_rc, ...)                                                                            \
    do {                                                                                           \
        const char *tk__args[] = {__VA_ARGS__, NULL};                                              \
        free(out);                                                                                 \
        free(err);                                                                                 \
        int tk__rc = run_tkexport(tk__args, &out, &err);                                           \
        if (tk__rc != (expect_rc))                                                                 \
            fail_msg("tkexport exited %d, expected %d\nstdout:\n%s\nstderr:\n%s", tk__rc, (expect_rc), out, err); \
    } while (0)

#ifdef TK_MLP_WEIGHTS
static void cli__export_then_inspect_the_mlp(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL, *dir = temp_dir(), prog[512];
    snprintf(prog, sizeof prog, "%s/mlp.tkprog", dir);
    CLI(0, "export", "examples/mlp", "--program", "mlp", "--weights", TK_MLP_WEIGHTS, "-o", prog);
    CLI(0, "inspect", prog);
    assert_contains(out, "x: bf16[batch, 128]  batch in [1, 1024]");
    assert_contains(out, "= tk::linear(x, linear1.weight, linear1.bias)");
    assert_contains(out, "bf16[batch, 64] = custom_ops::silu(");
    assert_contains(out, "bf16[batch, 128] = tk::linear(");
    assert_contains(out, "custom_ops::silu  silu_op (examples/mlp/silu_op.c)  kernels: silu_kernel");
    assert_contains(out, "tk::linear  built into libtkrt");
    CLI(0, "inspect", "--format", "json", prog);
    assert_contains(out, "{\"name\": \"batch\", \"min\": 1, \"max\": 1024}");
    CLI(0, "inspect", "--format=dot", prog);
    assert_contains(out, "digraph \"mlp\" {");
    assert_contains(out, "n1 [shape=box, label=\"custom_ops::silu");
    /* the same export again gives the same bytes */
    size_t n1 = 0, n2 = 0;
    char *first = read_file(prog, &n1), again[600];
    snprintf(again, sizeof again, "%s/again.tkprog", dir);
    CLI(0, "export", "examples/mlp", "--program", "mlp", "--weights", TK_MLP_WEIGHTS, "-o", again);
    char *second = read_file(again, &n2);
    assert_non_null(first);
    assert_non_null(second);
    assert_int_equal(n1, n2);
    assert_memory_equal(first, second, n1);
    free(first);
    free(second);
    free(out);
    free(err);
    rm_tree(dir);
}
#endif

static void cli__constraint_errors_and_usage(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL, *dir = temp_dir(), prog[512];
    snprintf(prog, sizeof prog, "%s/force8.tkprog", dir);
    char expect[256];
    snprintf(expect, sizeof expect, "force8/force8.c:%d (x dim 0 == 8); declare it static (8) or make the model "
             "accept any batch\n", tk_line_of(TK_FORCE8_DIR "/force8.c", "tk_call(ctx, \"fixture::rows8\""));
    CLI(1, "export", TK_FORCE8_DIR, "--program", "force8", "-o", prog);
    assert_contains(err, "tkexport export: cannot export 'force8': dim 'batch' (input 'x' dim 0, declared dynamic in "
                         "[1, 1024]) is forced to 8 by op 'fixture::rows8' at ");
    assert_contains(err, expect);
    assert_int_equal(access(prog, F_OK), -1); /* nothing left behind */
    CLI(1, "export", TK_FORCE8_DIR, "--program", "nope", "-o", prog);
    assert_contains(err, "no program 'nope' in the given paths (found: ");
    assert_contains(err, "'force8'");
    CLI(2, "export", "/nonexistent/model", "--program", "mlp", "-o", prog);
    assert_contains(err, "'/nonexistent/model' does not exist");
    CLI(2, "export", TK_FORCE8_DIR, "-o", prog);
    assert_contains(err, "no --program NAME given");
    CLI(2, "export", TK_FORCE8_DIR, "--program", "force8");
    assert_contains(err, "no -o OUT.tkprog given");
    CLI(0, "export", "--help");
    assert_contains(out, "usage: tkexport export PATH... --program NAME");
    CLI(0, "inspect", "--help");
    assert_contains(out, "usage: tkexport inspect FILE.tkprog");
    CLI(2, "inspect", "--format", "xml", prog);
    assert_contains(err, "unknown format 'xml'");
    CLI(2, "inspect", prog); /* a missing input is a usage error, as in every subcommand */
    assert_contains(err, "tkexport inspect: '");
    assert_contains(err, "' does not exist");
    CLI(4, "inspect", TK_FORCE8_DIR "/force8.c");
    assert_contains(err, "is not a .tkprog (not a readable zip archive");
    free(out);
    free(err);
    rm_tree(dir);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(guards__table_of_cases),
        cmocka_unit_test(trace__several_outputs_through_tk_call_outs),
        cmocka_unit_test(trace__scalar_arguments_are_recorded_stored_and_passed_again),
        cmocka_unit_test(tkprog__attrs_are_checked_against_the_schema),
        cmocka_unit_test(trace__layout_ops_keep_dynamic_dims),
        cmocka_unit_test(trace__split_is_one_narrow_a_part),
        cmocka_unit_test(trace__a_null_passed_on_names_the_first_failure),
        cmocka_unit_test(trace__a_meta_that_reads_a_dynamic_dim_as_a_number_is_refused),
        cmocka_unit_test(guards__forcing_message_names_dim_op_line_and_fix),
        cmocka_unit_test(guards__range_leaving_nothing_says_which_range_works),
        cmocka_unit_test(guards__same_name_in_two_inputs_is_one_symbol),
        cmocka_unit_test(derived__dims_are_expressions_over_symbols),
        cmocka_unit_test(derived__eager_and_traced_agree),
        cmocka_unit_test(trace__bad_models_get_one_line_errors),
#ifdef TK_MLP_WEIGHTS
        cmocka_unit_test(weights__missing_misshaped_and_corrupt_are_refused),
        cmocka_unit_test(tkprog__write_read_write_is_byte_identical),
        cmocka_unit_test(program_json__has_every_field),
        cmocka_unit_test(tkprog__readers_refuse_other_versions_and_damage),
        cmocka_unit_test(tkprog__tuning_records_are_checked),
        cmocka_unit_test(mlp__eager_and_traced_agree_bitwise_on_the_cpu),
#endif
#ifdef TK_TKEXPORT
#ifdef TK_MLP_WEIGHTS
        cmocka_unit_test(cli__export_then_inspect_the_mlp),
#endif
        cmocka_unit_test(cli__constraint_errors_and_usage),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
