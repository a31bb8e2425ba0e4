/* The op of the MLP example: custom_ops::silu launches silu_kernel on a bf16 tensor, with a meta
 * function (the output is like the input) and a CPU fallback that computes the same in float. */
#include <math.h>
#include <tk/half.h>
#include <tk/op.h>

TK_KERNEL_DECL(silu_kernel);

/* The configurations `tkexport compile --autotune` measures: threads per block and elements per
 * thread (see silu.cu), keyed by the element count n. The first, the default, is what the
 * kernel source assumes without tuning. */
TK_AUTOTUNE(silu_kernel, "n", "BLOCK ITEMS",
            "256 1", "128 1", "512 1", "1024 1", "128 2", "256 2", "512 2", "128 4", "256 4", "512 4",
            "128 8", "256 8");
/* EVEN: the launch covers n exactly (n a multiple of BLOCK * ITEMS), so the kernel needs no
 * bounds check; derived per call, before the tuner measures (Triton's heuristics). */
TK_HEURISTIC(silu_kernel, "EVEN", "0 1");

static int check_bf16(const tk_tensor *x)
{
    if (tk_tensor_dtype(x) != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "'custom_ops::silu' takes a bf16 input 'x'");
    return 0;
}

static int silu_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    int err = check_bf16(in[0]);
    return err ? err : tk_spec_like(out[0], in[0]);
}

/* The CPU fallback: bf16 widened to float, x * sigmoid(x), rounded back to nearest even. */
static int silu_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    int err = check_bf16(in[0]);
    if (err)
        return err;
    const uint16_t *x = tk_tensor_data(in[0]);
    uint16_t *y = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++) {
        float v = tk_bf16_to_f32(x[i]);
        y[i] = tk_f32_to_bf16(v / (1.0f + expf(-v)));
    }
    return 0;
}

/* For profiles: bf16 in and out (2 bytes each way per element); counted by bytes only, as the
 * op is bandwidth-bound. */
static int silu_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    (void)out;
    cost->bytes = 4.0 * (double)tk_numel(in[0]);
    cost->flops = 0;
    return 0;
}

TK_OP(silu_op, "custom_ops::silu", "(Tensor x) -> Tensor", .meta = silu_meta, .cpu = silu_cpu,
      .cost = silu_cost)
{
    int err = check_bf16(in[0]);
    if (err)
        return err;
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0;
    const int *cfg = tk_tune(ctx, silu_kernel, n); /* BLOCK, ITEMS */
    if (!cfg)
        return TK_ENOTFOUND;
    err = tk_tune_set(ctx, silu_kernel, "EVEN", n % ((int64_t)cfg[0] * cfg[1]) == 0);
    if (err)
        return err;
    return tk_wrap(ctx, silu_kernel, TK_DIM3(tk_cdiv(n, (int64_t)cfg[0] * cfg[1])), TK_DIM3(cfg[0]),
                   in[0], out[0], n);
}
