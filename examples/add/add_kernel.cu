/* The kernel of the vector-add example (PyTorch's triton_op add recipe): out = x + y, f32. */
#include <tk/kernel.h>

/* Grid-stride loop: correct for any grid, so the op may also launch fewer blocks than n needs. */
TK_KERNEL void add_kernel(const float *x, const float *y, float *out, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = x[i] + y[i];
}
