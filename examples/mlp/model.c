/* The seed's model as a program: linear1 (128 -> 64), custom_ops::silu, linear2 (64 -> 128), bf16,
 * on x [batch, 128] with batch anywhere in [1, 1024]. The parameters carry PyTorch's state_dict
 * names, so a model saved from PyTorch as safetensors loads unchanged. The same function runs
 * eagerly (tk_program_run, on real tensors) and is traced by `tkexport export`. */
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

TK_PROGRAM(mlp, "mlp", TK_INPUT("x", TK_BF16, TK_DIM("batch", 1, 1024), 128))
{
    tk_tensor *w1 = tk_param(ctx, "linear1.weight"), *b1 = tk_param(ctx, "linear1.bias");
    tk_tensor *w2 = tk_param(ctx, "linear2.weight"), *b2 = tk_param(ctx, "linear2.bias");
    if (!w1 || !b1 || !w2 || !b2)
        return TK_ENOTFOUND;
    tk_tensor *h = tk_linear(ctx, in[0], w1, b1);
    if (!h)
        return TK_EINVAL;
    tk_tensor *a = tk_call(ctx, "custom_ops::silu", h);
    tk_tensor_free(h);
    if (!a)
        return TK_EINVAL;
    out[0] = tk_linear(ctx, a, w2, b2);
    tk_tensor_free(a);
    return out[0] ? 0 : TK_EINVAL;
}
