/* The activation of the MLP example: y = x * sigmoid(x) on bf16, computed in f32. */
#include <tk/kernel.h>

TK_KERNEL void silu_kernel(const __nv_bfloat16 *x, __nv_bfloat16 *y, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = __bfloat162float(x[i]);
        y[i] = __float2bfloat16(v / (1.0f + __expf(-v)));
    }
}
