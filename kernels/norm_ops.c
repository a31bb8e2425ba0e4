/* The row-wise built-in ops over the last dim, on f32, f16 and bf16:
 *   tk::softmax     (Tensor x, int dim=-1) -> Tensor
 *   tk::layer_norm  (Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor
 *   tk::rms_norm    (Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor
 * Each launches its dtype's kernel of norm.cu through tk_wrap, one block per row, and falls back
 * to norm_ref.c on the CPU. */
#include <stdio.h>
#include <stdint.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "ref.h"

TK_KERNEL_DECL(tk_softmax_f32);
TK_KERNEL_DECL(tk_softmax_f16);
TK_KERNEL_DECL(tk_softmax_bf16);
TK_KERNEL_DECL(tk_layer_norm_f32);
TK_KERNEL_DECL(tk_layer_norm_f16);
TK_KERNEL_DECL(tk_layer_norm_bf16);
TK_KERNEL_DECL(tk_rms_norm_f32);
TK_KERNEL_DECL(tk_rms_norm_f16);
TK_KERNEL_DECL(tk_rms_norm_bf16);

/* by dtype: TK_F32, TK_F16, TK_BF16 are 0, 1, 2 */
static const tk_kernel *const softmax_kernels[3] = {tk_softmax_f32, tk_softmax_f16, tk_softmax_bf16};
static const tk_kernel *const layer_norm_kernels[3] = {tk_layer_norm_f32, tk_layer_norm_f16, tk_layer_norm_bf16};
static const tk_kernel *const rms_norm_kernels[3] = {tk_rms_norm_f32, tk_rms_norm_f16, tk_rms_norm_bf16};

/* x: a floating tensor of rank >= 1; each of the optional per-column tensors (weight, bias) is
 * [cols] of x's dtype. Symbolic dims (tracing) become requirements. */
static int row_check(tk_ctx *ctx, const char *op, tk_tensor *const *in, int nparams, const char *const *names)
{
    const tk_tensor *x = in[0];
    tk_dtype dt = tk_tensor_dtype(x);
    int rank = tk_tensor_rank(x);
    if (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' does not support dtype '%s' (expected f32, f16 or bf16)", op,
                            tk_dtype_name(dt));
    if (rank < 1)
        return tk_error_set(TK_EINVAL, "op '%s': input 'x' is a scalar; it normalizes over the last dim", op);
    for (int i = 1; i <= nparams; i++) {
        const tk_tensor *p = in[i];
        if (!p)
            continue;
        if (tk_tensor_dtype(p) != dt || tk_tensor_rank(p) != 1)
            return tk_error_set(TK_EINVAL, "op '%s': input '%s' (in[%d]) is %s of rank %d, expected %s [%s]", op,
                                names[i], i, tk_dtype_name(tk_tensor_dtype(p)), tk_tensor_rank(p), tk_dtype_name(dt),
                                "x's last dim");
        char what[96];
        snprintf(what, sizeof what, "%s dim 0 == x dim %d", names[i], rank - 1);
        int err = tk_require_eq(ctx, tk_tensor_sym(p, 0), tk_tensor_sym(x, rank - 1), what);
        if (err)
            return err;
    }
    return 0;
}

static int row_out_check(const char *op, const tk_tensor *x, const tk_tensor *y)
{
    if (tk_tensor_dtype(y) != tk_tensor_dtype(x) || tk_numel(y) != tk_numel(x))
        return tk_error_set(TK_EINVAL, "op '%s': output is %s with %lld elements, expected %s with %lld", op,
                            tk_dtype_name(tk_tensor_dtype(y)), (long long)tk_numel(y),
                            tk_dtype_name(tk_tensor_dtype(x)), (long long)tk_numel(x));
    return 0;
}

/* The softmax's dim: the last one only (-1 or rank - 1). */
static int softmax_dim(tk_ctx *ctx, const tk_tensor *x)
{
    int64_t dim = tk_arg_int(ctx, 1);
    int rank = tk_tensor_rank(x);
    if (dim != -1 && dim != rank - 1)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::softmax': dim is %lld; it takes the last dim only (-1 or %d "
                            "for x of rank %d)", (long long)dim, rank - 1, rank);
    return 0;
}

/* x as rows of its last dim */
static void row_shape(const tk_tensor *x, int64_t *rows, int64_t *cols)
{
    *cols = tk_tensor_dim(x, tk_tensor_rank(x) - 1);
    *rows = *cols ? tk_numel(x) / *cols : 0;
}

/* The launch: one block per row, of a power of two from 32 to 1024 threads with about kVecs (2,
 * norm.cu) 16-byte vectors of the row each. */
static void row_launch(const tk_tensor *x, int64_t *rows, int64_t *cols, tk_dim3 *grid, tk_dim3 *block)
{
    int64_t per_thread = 2 * (16 / (int64_t)tk_dtype_size(tk_tensor_dtype(x)));
    unsigned t = 32;
    row_shape(x, rows, cols);
    while (t < 1024 && (int64_t)t * per_thread < *cols)
        t *= 2;
    *grid = TK_DIM3(*rows < INT32_MAX ? (unsigned)*rows : (unsigned)INT32_MAX);
    *block = TK_DIM3(t);
}

static const char *const softmax_names[2] = {"x", "dim"};
static const char *const layer_norm_names[4] = {"x", "weight", "bias", "eps"};
static const char *const rms_norm_names[3] = {"x", "weight", "eps"};

/* --- tk::softmax ------------------------------------------------------------------------------ */

static int softmax_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = row_check(ctx, "tk::softmax", in, 0, softmax_names);
    if (!err)
        err = softmax_dim(ctx, in[0]);
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int softmax_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = row_check(ctx, "tk::softmax", in, 0, softmax_names);
    if (!err)
        err = softmax_dim(ctx, in[0]);
    if (!err)
        err = row_out_check("tk::softmax", in[0], out[0]);
    if (err)
        return err;
    int64_t rows, cols;
    row_shape(in[0], &rows, &cols);
    return tk_ref_softmax(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), tk_tensor_data(out[0]), rows, cols);
}

/* reads and writes x once; per element a max, a subtraction, an exp, a sum and a product */
static int softmax_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    (void)out;
    double n = (double)tk_numel(in[0]);
    cost->bytes = 2 * n * (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    cost->flops = 5 * n;
    return 0;
}

TK_OP(tk_softmax_op, "tk::softmax", "(Tensor x, int dim=-1) -> Tensor", .meta = softmax_meta, .cpu = softmax_cpu,
      .cost = softmax_cost)
{
    int64_t rows, cols;
    tk_dim3 grid, block;
    tk_dtype dt = tk_tensor_dtype(in[0]);
    int err = row_check(ctx, "tk::softmax", in, 0, softmax_names);
    if (!err)
        err = softmax_dim(ctx, in[0]);
    if (!err)
        err = row_out_check("tk::softmax", in[0], out[0]);
    if (err)
        return err;
    row_launch(in[0], &rows, &cols, &grid, &block);
    if (rows == 0)
        return 0;
    return tk_wrap(ctx, softmax_kernels[dt], grid, block, in[0], out[0], (long long)rows, (long long)cols);
}

/* --- tk::layer_norm ---------------------------------------------------------------------------- */

static int layer_norm_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = row_check(ctx, "tk::layer_norm", in, 2, layer_norm_names);
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int layer_norm_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = row_check(ctx, "tk::layer_norm", in, 2, layer_norm_names);
    if (!err)
        err = row_out_check("tk::layer_norm", in[0], out[0]);
    if (err)
        return err;
    int64_t rows, cols;
    row_shape(in[0], &rows, &cols);
    return tk_ref_layer_norm(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), in[1] ? tk_tensor_data(in[1]) : NULL,
                             in[2] ? tk_tensor_data(in[2]) : NULL, tk_tensor_data(out[0]), rows, cols,
                             (float)tk_arg_float(ctx, 3));
}

/* reads x twice in the worst case but counts the once that reaches memory; ~8 flops an element */
static int layer_norm_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    (void)out;
    double n = (double)tk_numel(in[0]), sz = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    double cols = (double)tk_tensor_dim(in[0], tk_tensor_rank(in[0]) - 1);
    cost->bytes = 2 * n * sz + ((in[1] != NULL) + (in[2] != NULL)) * cols * sz;
    cost->flops = 8 * n;
    return 0;
}

TK_OP(tk_layer_norm_op, "tk::layer_norm",
      "(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor", .meta = layer_norm_meta,
      .cpu = layer_norm_cpu, .cost = layer_norm_cost)
{
    int64_t rows, cols;
    tk_dim3 grid, block;
    tk_dtype dt = tk_tensor_dtype(in[0]);
    int err = row_check(ctx, "tk::layer_norm", in, 2, layer_norm_names);
    if (!err)
        err = row_out_check("tk::layer_norm", in[0], out[0]);
    if (err)
        return err;
    row_launch(in[0], &rows, &cols, &grid, &block);
    if (rows == 0)
        return 0;
    return tk_wrap(ctx, layer_norm_kernels[dt], grid, block, in[0], in[1], in[2], out[0], (long long)rows,
                   (long long)cols, (float)tk_arg_float(ctx, 3));
}

/* --- tk::rms_norm ------------------------------------------------------------------------------ */

static int rms_norm_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = row_check(ctx, "tk::rms_norm", in, 1, rms_norm_names);
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int rms_norm_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = row_check(ctx, "tk::rms_norm", in, 1, rms_norm_names);
    if (!err)
        err = row_out_check("tk::rms_norm", in[0], out[0]);
    if (err)
        return err;
    int64_t rows, cols;
    row_shape(in[0], &rows, &cols);
    return tk_ref_rms_norm(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), in[1] ? tk_tensor_data(in[1]) : NULL,
                           tk_tensor_data(out[0]), rows, cols, (float)tk_arg_float(ctx, 2));
}

static int rms_norm_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    (void)out;
    double n = (double)tk_numel(in[0]), sz = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    double cols = (double)tk_tensor_dim(in[0], tk_tensor_rank(in[0]) - 1);
    cost->bytes = 2 * n * sz + (in[1] != NULL) * cols * sz;
    cost->flops = 4 * n;
    return 0;
}

TK_OP(tk_rms_norm_op, "tk::rms_norm", "(Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor",
      .meta = rms_norm_meta, .cpu = rms_norm_cpu, .cost = rms_norm_cost)
{
    int64_t rows, cols;
    tk_dim3 grid, block;
    tk_dtype dt = tk_tensor_dtype(in[0]);
    int err = row_check(ctx, "tk::rms_norm", in, 1, rms_norm_names);
    if (!err)
        err = row_out_check("tk::rms_norm", in[0], out[0]);
    if (err)
        return err;
    row_launch(in[0], &rows, &cols, &grid, &block);
    if (rows == 0)
        return 0;
    return tk_wrap(ctx, rms_norm_kernels[dt], grid, block, in[0], in[1], out[0], (long long)rows, (long long)cols,
                   (float)tk_arg_float(ctx, 2));
}

/* --- typed helpers (tk/ops.h) ------------------------------------------------------------------ */

tk_tensor *(tk_softmax)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::softmax", x); }
tk_tensor *(tk_layer_norm)(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b, double eps)
{
    return tk_call(ctx, "tk::layer_norm", x, w, b, eps);
}
tk_tensor *(tk_rms_norm)(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, double eps)
{
    return tk_call(ctx, "tk::rms_norm", x, w, eps);
}
