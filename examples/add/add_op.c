/* The op of the vector-add example: mylib::add launches add_kernel through tk_wrap. */
#include <tk/op.h>

TK_KERNEL_DECL(add_kernel);

enum { ADD_BLOCK = 256 };

TK_OP(add_op, "mylib::add", "(Tensor x, Tensor y) -> Tensor")
{
    int64_t n = tk_numel(in[0]);
    if (tk_tensor_dtype(in[0]) != TK_F32 || tk_tensor_dtype(in[1]) != TK_F32)
        return tk_error_set(TK_EUNSUPPORTED, "'mylib::add' takes f32 inputs 'x' and 'y'");
    if (tk_numel(in[1]) != n)
        return tk_error_set(TK_EINVAL, "'mylib::add': 'x' has %lld elements, 'y' has %lld",
                            (long long)n, (long long)tk_numel(in[1]));
    if (n == 0)
        return 0; /* a grid of 0 blocks is not a valid launch */
    return tk_wrap(ctx, add_kernel, TK_DIM3(tk_cdiv(n, ADD_BLOCK)), TK_DIM3(ADD_BLOCK),
                   in[0], in[1], out[0], n);
}
