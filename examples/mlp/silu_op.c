/* The op of the MLP example: custom_ops::silu launches silu_kernel on a bf16 tensor. */
#include <tk/op.h>

TK_KERNEL_DECL(silu_kernel);

enum { SILU_BLOCK = 256 };

TK_OP(silu_op, "custom_ops::silu", "(Tensor x) -> Tensor")
{
    if (tk_tensor_dtype(in[0]) != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "'custom_ops::silu' takes a bf16 input 'x'");
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0;
    return tk_wrap(ctx, silu_kernel, TK_DIM3(tk_cdiv(n, SILU_BLOCK)), TK_DIM3(SILU_BLOCK),
                   in[0], out[0], n);
}
