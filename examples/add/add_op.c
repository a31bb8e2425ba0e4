/* The op of the vector-add example: mylib::add launches add_kernel through tk_wrap, and runs on
 * the CPU through its fallback add_cpu. */
#include <tk/op.h>

TK_KERNEL_DECL(add_kernel);

enum { ADD_BLOCK = 256 };

static int check_inputs(tk_tensor *const *in)
{
    if (tk_tensor_dtype(in[0]) != TK_F32 || tk_tensor_dtype(in[1]) != TK_F32)
        return tk_error_set(TK_EUNSUPPORTED, "'mylib::add' takes f32 inputs 'x' and 'y'");
    if (tk_numel(in[1]) != tk_numel(in[0]))
        return tk_error_set(TK_EINVAL, "'mylib::add': 'x' has %lld elements, 'y' has %lld",
                            (long long)tk_numel(in[0]), (long long)tk_numel(in[1]));
    return 0;
}

/* The CPU fallback: the runtime calls it with CPU tensors (contiguous). */
static int add_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    int err = check_inputs(in);
    if (err)
        return err;
    const float *x = tk_tensor_data(in[0]), *y = tk_tensor_data(in[1]);
    float *o = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++)
        o[i] = x[i] + y[i];
    return 0;
}

TK_OP(add_op, "mylib::add", "(Tensor x, Tensor y) -> Tensor", .cpu = add_cpu)
{
    int err = check_inputs(in);
    if (err)
        return err;
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0; /* a grid of 0 blocks is not a valid launch */
    return tk_wrap(ctx, add_kernel, TK_DIM3(tk_cdiv(n, ADD_BLOCK)), TK_DIM3(ADD_BLOCK),
                   in[0], in[1], out[0], n);
}
