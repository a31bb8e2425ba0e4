/* Kernels of test_runtime_gpu, embedded in it by tk_add_kernels: a fill, an axpy, and one that
 * echoes small scalar arguments so the test sees how tk_wrap boxed them. */
#include <tk/kernel.h>

TK_KERNEL void test_fill_f32(float *y, float v, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = v;
}

/* y = a * x + y */
TK_KERNEL void test_axpy_f32(float a, const float *x, float *y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

/* out[0..5] = the arguments, widened. */
TK_KERNEL void test_echo_scalars(long long *out, signed char a, short b, unsigned char c, int d,
                                 unsigned long long e, double f)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = a;
        out[1] = b;
        out[2] = c;
        out[3] = d;
        out[4] = (long long)e;
        out[5] = (long long)(f * 4.0);
    }
}
