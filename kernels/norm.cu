/* Row kernels of the built-in ops tk::softmax, tk::layer_norm and tk::rms_norm, for f32, f16 and
 * bf16 (tk_<op>_<dtype>); their CPU references are in norm_ref.c, with the same formulas.
 *
 * One block per row (blocks stride over rows when the grid is smaller), the row read as 16-byte
 * vectors (4 floats or 8 halves) spread over the block's threads, each thread keeping up to
 * kVecs of them in registers: a row of at most kVecs vectors a thread is read from memory once
 * and written once, also as vectors. A longer row is read again for each pass (from L2), and a
 * row whose length is not a whole number of vectors, or a tensor not 16-byte aligned, takes the
 * same steps element by element. Sums are in float, reduced through warp shuffles and one
 * shared-memory step; layer_norm takes the mean first and then the mean of squared deviations
 * (two passes over the registers: exact where E[x^2] - E[x]^2 cancels). norm_ops.c picks the
 * block size: a power of two from 32 to 1024 threads with about kVecs vectors each. */
#include <stdint.h>
#include <tk/kernel.h>

#include "lanes.cuh"

namespace {

constexpr int kVecs = 2;

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
    if (nwarps == 1)
        return v;
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

/* A row as this thread sees it. Vector mode: vectors tid + k * blockDim (k < kVecs kept in v).
 * Scalar mode: elements tid + k * blockDim (k < kVecs * n kept in v). */
template <typename T>
struct row {
    typedef lanes<T> L;
    static constexpr int n = L::n;
    const T *x;
    long long cols, nvec;
    bool vec, cached;
    float v[kVecs * n];

    __device__ __forceinline__ row(const T *x_, T *y, long long cols_) : x(x_), cols(cols_)
    {
        vec = cols % n == 0 && aligned16(x) && aligned16(y);
        nvec = vec ? cols / n : cols;
        cached = nvec <= (long long)(vec ? kVecs : kVecs * n) * blockDim.x;
        if (!cached)
            return;
        if (vec) {
            const uint4 *xv = reinterpret_cast<const uint4 *>(x);
            uint4 q[kVecs];
#pragma unroll
            for (int k = 0; k < kVecs; k++) { /* all loads in flight before the first use */
                long long i = threadIdx.x + (long long)k * blockDim.x;
                q[k] = i < nvec ? __ldg(xv + i) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int k = 0; k < kVecs; k++) {
                float t[n];
                L::unpack(q[k], t);
#pragma unroll
                for (int j = 0; j < n; j++)
                    v[k * n + j] = t[j];
            }
        } else {
#pragma unroll
            for (int k = 0; k < kVecs * n; k++) {
                long long i = threadIdx.x + (long long)k * blockDim.x;
                v[k] = i < cols ? L::load1(x + i) : 0.0f;
            }
        }
    }

    /* f(value) for each of this thread's elements */
    template <typename F>
    __device__ __forceinline__ void each(F f) const
    {
        if (cached) {
#pragma unroll
            for (int k = 0; k < (vec ? kVecs : kVecs * n); k++) {
                long long i = threadIdx.x + (long long)k * blockDim.x;
                if (i >= nvec)
                    break;
                if (vec) {
#pragma unroll
                    for (int j = 0; j < n; j++)
                        f(v[k * n + j]);
                } else {
                    f(v[k]);
                }
            }
        } else if (vec) {
            const uint4 *xv = reinterpret_cast<const uint4 *>(x);
            for (long long i = threadIdx.x; i < nvec; i += blockDim.x) {
                float t[n];
                L::unpack(__ldg(xv + i), t);
#pragma unroll
                for (int j = 0; j < n; j++)
                    f(t[j]);
            }
        } else {
            for (long long i = threadIdx.x; i < cols; i += blockDim.x)
                f(L::load1(x + i));
        }
    }

    /* y[i] = g(i, x[i]) for each of this thread's elements; in vector mode gv(k, t) maps vector k
     * (t: its n values) in place and it is stored whole */
    template <typename G, typename GV>
    __device__ __forceinline__ void write(T *y, G g, GV gv) const
    {
        uint4 *yv = reinterpret_cast<uint4 *>(y);
        if (cached) { /* unrolled: v is indexed by constants only, so it stays in registers */
#pragma unroll
            for (int k = 0; k < (vec ? kVecs : kVecs * n); k++) {
                long long i = threadIdx.x + (long long)k * blockDim.x;
                if (i >= nvec)
                    break;
                if (vec) {
                    float t[n];
#pragma unroll
                    for (int j = 0; j < n; j++)
                        t[j] = v[k * n + j];
                    gv(i, t);
                    yv[i] = L::pack(t);
                } else {
                    L::store1(y + i, g(i, v[k]));
                }
            }
        } else if (vec) {
            const uint4 *xv = reinterpret_cast<const uint4 *>(x);
            for (long long i = threadIdx.x; i < nvec; i += blockDim.x) {
                float t[n];
                L::unpack(__ldg(xv + i), t);
                gv(i, t);
                yv[i] = L::pack(t);
            }
        } else {
            for (long long i = threadIdx.x; i < cols; i += blockDim.x)
                L::store1(y + i, g(i, L::load1(x + i)));
        }
    }
};

/* gv for write() from an element-wise g */
template <typename T, typename G>
__device__ __forceinline__ auto by_element(G g)
{
    return [=](long long k, float (&t)[lanes<T>::n]) {
#pragma unroll
        for (int j = 0; j < lanes<T>::n; j++)
            t[j] = g(k * lanes<T>::n + j, t[j]);
    };
}

/* vector k of p (16-byte aligned) as float lanes, or ones where p is null */
template <typename T>
__device__ __forceinline__ void load_vec(const T *p, long long k, float (&t)[lanes<T>::n], float dflt)
{
    if (p) {
        lanes<T>::unpack(__ldg(reinterpret_cast<const uint4 *>(p) + k), t);
    } else {
#pragma unroll
        for (int j = 0; j < lanes<T>::n; j++)
            t[j] = dflt;
    }
}

template <typename T>
__device__ void softmax(const T *__restrict__ x, T *__restrict__ y, long long rows, long long cols)
{
    __shared__ float red[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        T *yr = y + r * cols;
        const row<T> xr(x + r * cols, yr, cols);
        float m = -INFINITY, s = 0.0f;
        xr.each([&](float v) { m = fmaxf(m, v); });
        m = block_reduce<true>(m, red);
        if (m == -INFINITY)
            m = 0.0f; /* a row of -inf: exp(-inf - 0) = 0 everywhere, 0/0 below gives NaN as PyTorch does */
        xr.each([&](float v) { s += __expf(v - m); });
        s = block_reduce<false>(s, red);
        const float inv = 1.0f / s;
        auto g = [&](long long, float v) { return __expf(v - m) * inv; };
        xr.write(yr, g, by_element<T>(g));
    }
}

/* y = (x - mean) / sqrt(var + eps) * w + b over each row (w, b may be null) */
template <typename T>
__device__ void layer_norm(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                           T *__restrict__ y, long long rows, long long cols, float eps)
{
    __shared__ float red[32];
    const float inv_n = 1.0f / (float)cols;
    const bool wb_vec = (!w || aligned16(w)) && (!b || aligned16(b));
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        T *yr = y + r * cols;
        const row<T> xr(x + r * cols, yr, cols);
        float s = 0.0f, q = 0.0f;
        xr.each([&](float v) { s += v; });
        const float mean = block_reduce<false>(s, red) * inv_n;
        xr.each([&](float v) { q += (v - mean) * (v - mean); });
        const float rstd = rsqrtf(block_reduce<false>(q, red) * inv_n + eps);
        auto g = [&](long long i, float v) {
            float o = (v - mean) * rstd;
            if (w)
                o *= lanes<T>::load1(w + i);
            if (b)
                o += lanes<T>::load1(b + i);
            return o;
        };
        if (wb_vec) { /* weight and bias read as vectors too */
            xr.write(yr, g, [&](long long k, float (&t)[lanes<T>::n]) {
                float wv[lanes<T>::n], bv[lanes<T>::n];
                load_vec(w, k, wv, 1.0f);
                load_vec(b, k, bv, 0.0f);
#pragma unroll
                for (int j = 0; j < lanes<T>::n; j++)
                    t[j] = (t[j] - mean) * rstd * wv[j] + bv[j];
            });
        } else {
            xr.write(yr, g, by_element<T>(g));
        }
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
        T *yr = y + r * cols;
        const row<T> xr(x + r * cols, yr, cols);
        float q = 0.0f;
        xr.each([&](float v) { q += v * v; });
        const float rstd = rsqrtf(block_reduce<false>(q, red) * inv_n + eps);
        auto g = [&](long long i, float v) { return w ? v * rstd * lanes<T>::load1(w + i) : v * rstd; };
        if (!w || aligned16(w)) {
            xr.write(yr, g, [&](long long k, float (&t)[lanes<T>::n]) {
                float wv[lanes<T>::n];
                load_vec(w, k, wv, 1.0f);
#pragma unroll
                for (int j = 0; j < lanes<T>::n; j++)
                    t[j] = t[j] * rstd * wv[j];
            });
        } else {
            xr.write(yr, g, by_element<T>(g));
        }
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
