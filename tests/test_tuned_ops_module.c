/* A package host object with a tuned kernel, for test_package: its TK_AUTOTUNE and TK_HEURISTIC
 * say one thing and the package's record another. test_module::tuned reports what it was given:
 * y[0] the BLOCK tk_tune chose, y[1] 1 when tk_tune_set accepted EVEN 2, else 0. */
#include <tk/op.h>

TK_KERNEL_DECL(tuned_kernel);
TK_AUTOTUNE(tuned_kernel, "n", "BLOCK", "256", "512");
TK_HEURISTIC(tuned_kernel, "EVEN", "0 1 2");

static int tuned_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int64_t n = tk_numel(in[0]);
    const int *cfg = tk_tune(ctx, tuned_kernel, n);
    if (!cfg)
        return TK_ENOTFOUND;
    int even2 = tk_tune_set(ctx, tuned_kernel, "EVEN", 2) == 0;
    float *y = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = i == 0 ? (float)cfg[0] : i == 1 ? (float)even2 : 0.0f;
    return 0;
}

TK_OP(tuned_op, "test_module::tuned", "(Tensor x) -> Tensor", .cpu = tuned_cpu)
{
    int64_t n = tk_numel(in[0]);
    const int *cfg = tk_tune(ctx, tuned_kernel, n);
    if (!cfg)
        return TK_ENOTFOUND;
    return tk_wrap(ctx, tuned_kernel, TK_DIM3(tk_cdiv(n, cfg[0])), TK_DIM3(cfg[0]), in[0], out[0], n);
}
