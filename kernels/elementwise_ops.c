/* The elementwise built-in ops tk::add, tk::mul (same shape and dtype, no broadcasting) and
 * tk::sin, tk::cos, tk::silu, tk::gelu, on f32, f16 and bf16: each launches its dtype's kernel of
 * elementwise.cu through tk_wrap and falls back to elementwise_ref.c on the CPU. */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "ref.h"
#include "rt_internal.h"
#include "sym.h"

TK_KERNEL_DECL(tk_add_f32);
TK_KERNEL_DECL(tk_add_f16);
TK_KERNEL_DECL(tk_add_bf16);
TK_KERNEL_DECL(tk_mul_f32);
TK_KERNEL_DECL(tk_mul_f16);
TK_KERNEL_DECL(tk_mul_bf16);
TK_KERNEL_DECL(tk_sin_f32);
TK_KERNEL_DECL(tk_sin_f16);
TK_KERNEL_DECL(tk_sin_bf16);
TK_KERNEL_DECL(tk_cos_f32);
TK_KERNEL_DECL(tk_cos_f16);
TK_KERNEL_DECL(tk_cos_bf16);
TK_KERNEL_DECL(tk_silu_f32);
TK_KERNEL_DECL(tk_silu_f16);
TK_KERNEL_DECL(tk_silu_bf16);
TK_KERNEL_DECL(tk_gelu_f32);
TK_KERNEL_DECL(tk_gelu_f16);
TK_KERNEL_DECL(tk_gelu_bf16);
TK_KERNEL_DECL(tk_gelu_erf_f32);
TK_KERNEL_DECL(tk_gelu_erf_f16);
TK_KERNEL_DECL(tk_gelu_erf_bf16);

/* Each op's kernels, indexed by dtype (TK_F32, TK_F16, TK_BF16 are 0, 1, 2). */
static const tk_kernel *const add_kernels[3] = {tk_add_f32, tk_add_f16, tk_add_bf16};
static const tk_kernel *const mul_kernels[3] = {tk_mul_f32, tk_mul_f16, tk_mul_bf16};
static const tk_kernel *const sin_kernels[3] = {tk_sin_f32, tk_sin_f16, tk_sin_bf16};
static const tk_kernel *const cos_kernels[3] = {tk_cos_f32, tk_cos_f16, tk_cos_bf16};
static const tk_kernel *const silu_kernels[3] = {tk_silu_f32, tk_silu_f16, tk_silu_bf16};
static const tk_kernel *const gelu_kernels[3] = {tk_gelu_f32, tk_gelu_f16, tk_gelu_bf16};
static const tk_kernel *const gelu_erf_kernels[3] = {tk_gelu_erf_f32, tk_gelu_erf_f16, tk_gelu_erf_bf16};

/* The launch shape: blocks of 256 threads (kBlock in elementwise.cu), each over one chunk of
 * 4 vectors per thread (kVecPerThread there). The kernels stride over chunks when the grid is
 * smaller, so a grid capped at the CUDA limit is still correct. */
enum { EW_BLOCK = 256, EW_VEC_PER_THREAD = 4 };

/* What meta, body and CPU fallback all check: a floating dtype, and for binary ops a second
 * input of the same dtype and shape. `names` are the schema's input names. Shapes that differ in
 * rank or in a constant dim are refused here; a symbolic dim (tracing) becomes a requirement. */
static int ew_check(tk_ctx *ctx, const char *op, int arity, const char *const *names, tk_tensor *const *in)
{
    tk_dtype dtype = tk_tensor_dtype(in[0]);
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' does not support dtype '%s' (expected f32, f16 or bf16)",
                            op, tk_dtype_name(dtype));
    if (arity == 2) {
        if (tk_tensor_dtype(in[1]) != dtype)
            return tk_error_set(TK_EINVAL, "op '%s': input '%s' is %s but '%s' is %s", op, names[0],
                                tk_dtype_name(dtype), names[1], tk_dtype_name(tk_tensor_dtype(in[1])));
        int rank = tk_tensor_rank(in[0]), differ = rank != tk_tensor_rank(in[1]);
        for (int i = 0; i < rank && !differ; i++) {
            tk_sym da = tk_tensor_sym(in[0], i), db = tk_tensor_sym(in[1], i);
            differ = tk_sym_is_const(da) && tk_sym_is_const(db) && da.value != db.value;
        }
        if (differ) {
            char sa[160], sb[160];
            tk_tensor_format_shape(in[0], sa, sizeof sa);
            tk_tensor_format_shape(in[1], sb, sizeof sb);
            return tk_error_set(TK_EINVAL, "op '%s': input '%s' is %s but '%s' is %s (shapes must match)",
                                op, names[0], sa, names[1], sb);
        }
        for (int i = 0; i < rank; i++) {
            tk_sym da = tk_tensor_sym(in[0], i), db = tk_tensor_sym(in[1], i);
            if (tk_sym_is_const(da) && tk_sym_is_const(db))
                continue;
            char what[96];
            snprintf(what, sizeof what, "%s dim %d == %s dim %d", names[0], i, names[1], i);
            int err = tk_require_eq(ctx, da, db, what);
            if (err)
                return err;
        }
    }
    return 0;
}

/* A caller may hand tk_op_run its own output: it must hold the result. */
static int ew_check_out(const char *op, const tk_tensor *x, const tk_tensor *y)
{
    if (tk_tensor_dtype(y) != tk_tensor_dtype(x) || tk_numel(y) != tk_numel(x))
        return tk_error_set(TK_EINVAL, "op '%s': output is %s with %lld elements, expected %s with %lld",
                            op, tk_dtype_name(tk_tensor_dtype(y)), (long long)tk_numel(y),
                            tk_dtype_name(tk_tensor_dtype(x)), (long long)tk_numel(x));
    return 0;
}

static int ew_meta(tk_ctx *ctx, const char *op, int arity, const char *const *names, tk_tensor *const *in,
                   tk_tensor_spec *const *out)
{
    int err = ew_check(ctx, op, arity, names, in);
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int ew_cpu(tk_ctx *ctx, const char *op, tk_ew_op which, int arity, const char *const *names,
                  tk_tensor *const *in, tk_tensor *const *out)
{
    int err = ew_check(ctx, op, arity, names, in);
    if (!err)
        err = ew_check_out(op, in[0], out[0]);
    if (err)
        return err;
    tk_dtype dtype = tk_tensor_dtype(in[0]);
    if (arity == 2)
        return tk_ref_binary(which, dtype, tk_tensor_data(in[0]), tk_tensor_data(in[1]),
                             tk_tensor_data(out[0]), tk_numel(in[0]));
    return tk_ref_unary(which, dtype, tk_tensor_data(in[0]), tk_tensor_data(out[0]), tk_numel(in[0]));
}

/* The grid: one block per contiguous chunk of the tensor. Measured on an H100 (bench/kernels):
 * that reaches the device-to-device copy's bandwidth, where a grid sized to the resident blocks
 * with a grid-stride loop stopped at 92 to 94% of it. */
static tk_dim3 ew_grid(tk_ctx *ctx, tk_dtype dtype, int64_t n)
{
    (void)ctx;
    int64_t nvec = n / (dtype == TK_F32 ? 4 : 8);
    int64_t blocks = tk_cdiv(nvec, (int64_t)EW_BLOCK * EW_VEC_PER_THREAD);
    if (blocks > INT32_MAX)
        blocks = INT32_MAX;
    if (blocks < 1)
        blocks = 1; /* fewer than one vector: the kernel's scalar tail does it all */
    return TK_DIM3(blocks);
}

static int launch_unary(tk_ctx *ctx, const char *op, const char *const *names,
                        const tk_kernel *const *kernels, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = ew_check(ctx, op, 1, names, in);
    if (!err)
        err = ew_check_out(op, in[0], out[0]);
    if (err)
        return err;
    tk_dtype dtype = tk_tensor_dtype(in[0]);
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0; /* a grid of 0 blocks is not a valid launch */
    return tk_wrap(ctx, kernels[dtype], ew_grid(ctx, dtype, n), TK_DIM3(EW_BLOCK), in[0], out[0], n);
}

static int launch_binary(tk_ctx *ctx, const char *op, const char *const *names,
                         const tk_kernel *const *kernels, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = ew_check(ctx, op, 2, names, in);
    if (!err)
        err = ew_check_out(op, in[0], out[0]);
    if (err)
        return err;
    tk_dtype dtype = tk_tensor_dtype(in[0]);
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0;
    return tk_wrap(ctx, kernels[dtype], ew_grid(ctx, dtype, n), TK_DIM3(EW_BLOCK), in[0], in[1], out[0], n);
}

static const char *const binary_names[2] = {"a", "b"};
static const char *const unary_names[1] = {"x"};

/* --- the ops: each one's meta function, CPU fallback and CUDA body, from the helpers above --- */

/* Elementwise ops move (arity + 1) tensors of n elements; add and mul do one flop per element
 * (the transcendental ones are counted by bytes only: they are bandwidth-bound). */
static int ew_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost, int arity, int flops_per)
{
    (void)out;
    double n = (double)tk_numel(in[0]);
    cost->bytes = (double)(arity + 1) * n * (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    cost->flops = flops_per * n;
    return 0;
}

#define EW_OP(op, KIND, schema, arity, names, launch)                                          \
    static int op##_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)          \
    {                                                                                            \
        return ew_meta(ctx, "tk::" #op, arity, names, in, out);                                  \
    }                                                                                            \
    static int op##_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)                \
    {                                                                                            \
        return ew_cpu(ctx, "tk::" #op, KIND, arity, names, in, out);                             \
    }                                                                                            \
    static int op##_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)          \
    {                                                                                            \
        return ew_cost(in, out, cost, arity, KIND == TK_EW_ADD || KIND == TK_EW_MUL);            \
    }                                                                                            \
    TK_OP(tk_##op##_op, "tk::" #op, schema, .meta = op##_meta, .cpu = op##_cpu, .cost = op##_cost) \
    {                                                                                            \
        return launch(ctx, "tk::" #op, names, op##_kernels, in, out);                            \
    }

#define EW_BINARY_SCHEMA "(Tensor a, Tensor b) -> Tensor"
#define EW_UNARY_SCHEMA "(Tensor x) -> Tensor"

EW_OP(add, TK_EW_ADD, EW_BINARY_SCHEMA, 2, binary_names, launch_binary)
EW_OP(mul, TK_EW_MUL, EW_BINARY_SCHEMA, 2, binary_names, launch_binary)
EW_OP(sin, TK_EW_SIN, EW_UNARY_SCHEMA, 1, unary_names, launch_unary)
EW_OP(cos, TK_EW_COS, EW_UNARY_SCHEMA, 1, unary_names, launch_unary)
EW_OP(silu, TK_EW_SILU, EW_UNARY_SCHEMA, 1, unary_names, launch_unary)

/* tk::gelu takes PyTorch's `approximate`: "tanh" (the default here, and the form packages made
 * before the argument existed computed) or "none", the exact erf form. */
static int gelu_form(tk_ctx *ctx, tk_ew_op *which)
{
    const char *a = tk_arg_str(ctx, 1);
    if (a && !strcmp(a, "tanh"))
        *which = TK_EW_GELU;
    else if (a && !strcmp(a, "none"))
        *which = TK_EW_GELU_ERF;
    else
        return tk_error_set(TK_EINVAL, "op 'tk::gelu': approximate is '%s', expected 'tanh' or 'none'", a ? a : "?");
    return 0;
}

static int gelu_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    tk_ew_op which = TK_EW_GELU;
    int err = gelu_form(ctx, &which);
    return err ? err : ew_meta(ctx, "tk::gelu", 1, unary_names, in, out);
}

static int gelu_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    tk_ew_op which = TK_EW_GELU;
    int err = gelu_form(ctx, &which);
    return err ? err : ew_cpu(ctx, "tk::gelu", which, 1, unary_names, in, out);
}

static int gelu_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    return ew_cost(in, out, cost, 1, 0);
}

TK_OP(tk_gelu_op, "tk::gelu", "(Tensor x, str approximate=\"tanh\") -> Tensor", .meta = gelu_meta, .cpu = gelu_cpu,
      .cost = gelu_cost)
{
    tk_ew_op which = TK_EW_GELU;
    int err = gelu_form(ctx, &which);
    return err ? err
               : launch_unary(ctx, "tk::gelu", unary_names, which == TK_EW_GELU ? gelu_kernels : gelu_erf_kernels,
                              in, out);
}

/* --- typed helpers (tk/ops.h) ------------------------------------------------------------ */

tk_tensor *(tk_add)(tk_ctx *ctx, tk_tensor *a, tk_tensor *b) { return tk_call(ctx, "tk::add", a, b); }
tk_tensor *(tk_mul)(tk_ctx *ctx, tk_tensor *a, tk_tensor *b) { return tk_call(ctx, "tk::mul", a, b); }
tk_tensor *(tk_sin)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::sin", x); }
tk_tensor *(tk_cos)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::cos", x); }
tk_tensor *(tk_silu)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::silu", x); }
tk_tensor *(tk_gelu)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::gelu", x); }
tk_tensor *(tk_gelu_exact)(tk_ctx *ctx, tk_tensor *x) { return tk_call(ctx, "tk::gelu", x, "none"); }
