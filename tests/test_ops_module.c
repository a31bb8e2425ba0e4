/* A shared object with ops, for test_runtime's tk_ops_load tests: test_module::neg (CPU only),
 * and a second definition of test::scale2, which the executable's first definition outranks. */
#include <tk/op.h>

TK_KERNEL_DECL(neg_kernel);

static int neg_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    const float *x = tk_tensor_data(in[0]);
    float *y = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++)
        y[i] = -x[i];
    return 0;
}

TK_OP(module_neg_op, "test_module::neg", "(Tensor x) -> Tensor", .cpu = neg_cpu)
{
    int64_t n = tk_numel(in[0]);
    return tk_wrap(ctx, neg_kernel, TK_DIM3(tk_cdiv(n, 256)), TK_DIM3(256), in[0], out[0], n);
}

TK_OP(module_scale2_op, "test::scale2", "(Tensor x) -> Tensor", .cpu = neg_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, neg_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}
