/* A residual MLP over tokens, the serving benchmark's model with two dynamic dims: x is
 * bf16[batch, seq, 128] (batch in [1, 64], seq in [1, 512]) and
 *   y = x + linear2(gelu(linear1(x)))      linear1: 128 -> 512, linear2: 512 -> 128
 * tk::linear takes [..., K] (the leading dims are its M rows), so the 3-D input needs no flatten;
 * every op is a built-in (tk::linear, tk::gelu, tk::add). The parameters carry PyTorch's
 * state_dict names (bench/serving/torch_serving.py builds the same module). */
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

TK_PROGRAM(tokmlp, "tokmlp", TK_INPUT("x", TK_BF16, TK_DIM("batch", 1, 64), TK_DIM("seq", 1, 512), 128))
{
    tk_tensor *w1 = tk_param(ctx, "linear1.weight"), *b1 = tk_param(ctx, "linear1.bias");
    tk_tensor *w2 = tk_param(ctx, "linear2.weight"), *b2 = tk_param(ctx, "linear2.bias");
    if (!w1 || !b1 || !w2 || !b2)
        return TK_ENOTFOUND;
    tk_tensor *h = tk_linear(ctx, in[0], w1, b1);
    if (!h)
        return TK_EINVAL;
    tk_tensor *a = tk_gelu(ctx, h);
    tk_tensor_free(h);
    if (!a)
        return TK_EINVAL;
    tk_tensor *m = tk_linear(ctx, a, w2, b2);
    tk_tensor_free(a);
    if (!m)
        return TK_EINVAL;
    out[0] = tk_add(ctx, in[0], m);
    tk_tensor_free(m);
    return out[0] ? 0 : TK_EINVAL;
}
