/* Row kernels of the built-in ops tk::softmax, tk::layer_norm and tk::rms_norm, for f32, f16 and
 * bf16 (tk_<op>_<dtype>); their CPU references are in norm_ref.c, with the same formulas.
 *
 * One block per row (blocks stride over rows when the grid is smaller), the row's elements spread
 * over the block's threads. A thread keeps its elements in registers when the row fits
 * (kCache per thread: rows up to kCache * blockDim elements are read from memory once), else it
 * reads them again for each pass (from L1/L2: a row is at most a few tens of KiB). Sums are in
 * float, reduced through warp shuffles and one shared-memory step; layer_norm takes the mean
 * first and then the mean of squared deviations (two passes over the cached values: exact where
 * E[x^2] - E[x]^2 cancels). norm_ops.c picks the block size: the row's length over 4, rounded up
 * to a power of two between 32 and 1024. */
#include <stdint.h>
#include <tk/kernel.h>

namespace {

constexpr int kCache = 8;

__device__ __forceinline__ float load(const float *p) { return __ldg(p); }
__device__ __forceinline__ float load(const __half *p) { return __half2float(__ldg(p)); }
__device__ __forceinline__ float load(const __nv_bfloat16 *p) { return __bfloat162float(__ldg(p)); }
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* The block's sum (or max) of v, returned to every thread. red holds 32 floats. */
template <bool Max>
__device__ __forceinline__ float block_reduce(float v, float *red)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = Max ? fmaxf(v, w) : v + w;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    __syncthreads(); /* red may still be read by the previous reduction */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : (Max ? -INFINITY : 0.0f);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = Max ? fmaxf(v, w) : v + w;
    }
    return v;
}

/* A row's elements as this thread sees them: element tid + k * blockDim for k < count. */
template <typename T>
struct row {
    const T *x;
    long long cols;
    float v[kCache];
    bool cached;
    __device__ __forceinline__ row(const T *x_, long long cols_) : x(x_), cols(cols_)
    {
        cached = cols <= (long long)kCache * blockDim.x;
        if (cached) {
#pragma unroll
            for (int k = 0; k < kCache; k++) {
                long long i = threadIdx.x + (long long)k * blockDim.x;
                v[k] = i < cols ? load(x + i) : 0.0f;
            }
        }
    }
    /* f(i, value) for each of this thread's elements */
    template <typename F>
    __device__ __forceinline__ void each(F f) const
    {
        if (cached) {
#pragma unroll
            for (int k = 0; k < kCache; k++) {
                long long i = threadIdx.x + (long long)k * blockDim.x;
                if (i < cols)
                    f(i, v[k]);
            }
        } else {
            for (long long i = threadIdx.x; i < cols; i += blockDim.x)
                f(i, load(x + i));
        }
    }
};

template <typename T>
__device__ void softmax(const T *__restrict__ x, T *__restrict__ y, long long rows, long long cols)
{
    __shared__ float red[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const row<T> xr(x + r * cols, cols);
        T *yr = y + r * cols;
        float m = -INFINITY, s = 0.0f;
        xr.each([&](long long, float v) { m = fmaxf(m, v); });
        m = block_reduce<true>(m, red);
        if (m == -INFINITY)
            m = 0.0f; /* a row of -inf: exp(-inf - 0) = 0 everywhere, 0/0 below gives NaN as PyTorch does */
        xr.each([&](long long, float v) { s += __expf(v - m); });
        s = block_reduce<false>(s, red);
        const float inv = 1.0f / s;
        xr.each([&](long long i, float v) { store(yr + i, __expf(v - m) * inv); });
    }
}

/* y = (x - mean) / sqrt(var + eps) * w + b over each row (w, b may be null) */
template <typename T>
__device__ void layer_norm(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                           T *__restrict__ y, long long rows, long long cols, float eps)
{
    __shared__ float red[32];
    const float inv_n = 1.0f / (float)cols;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const row<T> xr(x + r * cols, cols);
        T *yr = y + r * cols;
        float s = 0.0f, q = 0.0f;
        xr.each([&](long long, float v) { s += v; });
        const float mean = block_reduce<false>(s, red) * inv_n;
        xr.each([&](long long, float v) { q += (v - mean) * (v - mean); });
        const float rstd = rsqrtf(block_reduce<false>(q, red) * inv_n + eps);
        xr.each([&](long long i, float v) {
            float o = (v - mean) * rstd;
            if (w)
                o *= load(w + i);
            if (b)
                o += load(b + i);
            store(yr + i, o);
        });
    }
}

/* y = x / sqrt(mean(x^2) + eps) * w over each row (w may be null) */
template <typename T>
__device__ void rms_norm(const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ y, long long rows,
                         long long cols, float eps)
{
    __shared__ float red[32];
    const float inv_n = 1.0f / (float)cols;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const row<T> xr(x + r * cols, cols);
        T *yr = y + r * cols;
        float q = 0.0f;
        xr.each([&](long long, float v) { q += v * v; });
        const float rstd = rsqrtf(block_reduce<false>(q, red) * inv_n + eps);
        xr.each([&](long long i, float v) { store(yr + i, w ? v * rstd * load(w + i) : v * rstd); });
    }
}

} // namespace

#define TK_NORM_KERNELS(sfx, T)                                                                          \
    TK_KERNEL void __launch_bounds__(1024)                                                               \
    tk_softmax_##sfx(const T *__restrict__ x, T *__restrict__ y, long long rows, long long cols)         \
    {                                                                                                    \
        softmax(x, y, rows, cols);                                                                       \
    }                                                                                                    \
    TK_KERNEL void __launch_bounds__(1024)                                                               \
    tk_layer_norm_##sfx(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,       \
                        T *__restrict__ y, long long rows, long long cols, float eps)                    \
    {                                                                                                    \
        layer_norm(x, w, b, y, rows, cols, eps);                                                         \
    }                                                                                                    \
    TK_KERNEL void __launch_bounds__(1024)                                                               \
    tk_rms_norm_##sfx(const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ y, long long rows, \
                      long long cols, float eps)                                                         \
    {                                                                                                    \
        rms_norm(x, w, y, rows, cols, eps);                                                              \
    }

TK_NORM_KERNELS(f32, float)
TK_NORM_KERNELS(f16, __half)
TK_NORM_KERNELS(bf16, __nv_bfloat16)
