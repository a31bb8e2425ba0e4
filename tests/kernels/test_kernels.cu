/* Kernels of test_runtime_gpu, embedded in it by tk_add_kernels: a fill, an axpy, one that
 * echoes small scalar arguments so the test sees how tk_wrap boxed them, one that reverses
 * an array through dynamic shared memory (tk_wrap_shared), and a fill that comes late. */
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

/* y = x reversed, through the block's dynamic shared memory (n floats; one block) */
TK_KERNEL void test_shared_reverse_f32(const float *x, float *y, int n)
{
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        buf[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        y[i] = buf[n - 1 - i];
}

/* y = v after wait_ns nanoseconds of the GPU's clock, each block on its own; on sm_90 and newer a
 * launch after it that is a programmatic dependent (the end-of-graph signal, runtime/cuda.c) may
 * start at once, as after tk::_mlp's kernel: it must still see y written only once this grid ended */
TK_KERNEL void test_late_fill_f32(float *y, float v, long long n, unsigned long long wait_ns)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < wait_ns);
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = v;
}
