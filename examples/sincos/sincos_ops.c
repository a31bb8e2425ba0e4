/* The ops of the sin/cos example: mylib::mysin (with a CPU fallback, as the recipe registers
 * one for "cpu") and mylib::mycos (CUDA only). */
#include <math.h>
#include <tk/op.h>

TK_KERNEL_DECL(sin_kernel);
TK_KERNEL_DECL(cos_kernel);

enum { SINCOS_BLOCK = 256 };

static int check_f32(const char *op, const tk_tensor *x)
{
    if (tk_tensor_dtype(x) != TK_F32)
        return tk_error_set(TK_EUNSUPPORTED, "'%s' takes an f32 input 'x'", op);
    return 0;
}

/* The CPU fallback of mylib::mysin: the runtime calls it with CPU tensors (contiguous). */
static int mysin_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    int err = check_f32("mylib::mysin", in[0]);
    if (err)
        return err;
    const float *x = tk_tensor_data(in[0]);
    float *y = tk_tensor_data(out[0]);
    int64_t n = tk_numel(in[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = sinf(x[i]);
    return 0;
}

TK_OP(mysin_op, "mylib::mysin", "(Tensor x) -> Tensor", .cpu = mysin_cpu)
{
    int err = check_f32("mylib::mysin", in[0]);
    if (err)
        return err;
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0;
    return tk_wrap(ctx, sin_kernel, TK_DIM3(tk_cdiv(n, SINCOS_BLOCK)), TK_DIM3(SINCOS_BLOCK),
                   in[0], out[0], n);
}

TK_OP(mycos_op, "mylib::mycos", "(Tensor x) -> Tensor")
{
    int err = check_f32("mylib::mycos", in[0]);
    if (err)
        return err;
    int64_t n = tk_numel(in[0]);
    if (n == 0)
        return 0;
    return tk_wrap(ctx, cos_kernel, TK_DIM3(tk_cdiv(n, SINCOS_BLOCK)), TK_DIM3(SINCOS_BLOCK),
                   in[0], out[0], n);
}
