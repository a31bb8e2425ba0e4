/* The kernels of the sin/cos example (PyTorch's triton_op mysin/mycos recipe): y = sin(x) and
 * y = cos(x), f32. */
#include <tk/kernel.h>

TK_KERNEL void sin_kernel(const float *x, float *y, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = sinf(x[i]);
}

TK_KERNEL void cos_kernel(const float *x, float *y, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = cosf(x[i]);
}
