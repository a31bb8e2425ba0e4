/* The program bench/autotune tunes: custom_ops::silu of examples/mlp (its kernel declares
 * TK_AUTOTUNE over BLOCK and ITEMS) on one bf16 vector of 1 to 2^28 elements, so that tuning
 * samples every power of two in that range. */
#include <tk/op.h>
#include <tk/program.h>
#include <tk/runtime.h>

TK_PROGRAM(act, "act", TK_INPUT("x", TK_BF16, TK_DIM("n", 1, 268435456)))
{
    out[0] = tk_call(ctx, "custom_ops::silu", in[0]);
    return out[0] ? 0 : TK_EINVAL;
}
