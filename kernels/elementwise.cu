/* The elementwise kernels of the built-in ops tk::add, tk::mul, tk::sin, tk::cos, tk::silu and
 * tk::gelu, for f32, f16 and bf16 (tk_<op>_<dtype>); their CPU references are in elementwise_ref.c.
 *
 * Written for bandwidth: each thread moves 16-byte vectors (4 floats or 8 halves as one uint4)
 * through read-only loads, four per operand in flight before the first use, each block over one
 * contiguous chunk of the tensor (see kVecPerThread below for why not a grid-stride loop). The
 * elements past the last full vector (fewer than 8) are done one by one by the same kernel. Math is in float; 16-bit values are widened exactly
 * and narrowed with round-to-nearest-even.
 *
 * The vector path needs 16-byte aligned pointers (every runtime allocation is 256-aligned). A
 * tensor wrapped over other memory may not be: the kernel then takes a scalar grid-stride loop
 * instead (the test is uniform across the grid, so it costs one branch). */
#include <stdint.h>
#include <string.h>
#include <tk/kernel.h>

#include "lanes.cuh"

namespace {

/* The launch shape elementwise_ops.c uses: blocks of 256 threads. No minimum-blocks bound:
 * capping registers at 32 (8 resident blocks) made the four-vectors-in-flight loops of the
 * binary ops spill to local memory, and measured at 43% of copy bandwidth on an H100. */
constexpr int kBlock = 256;

/* --- the math, in float; the CPU references (elementwise_ref.c) use the same formulas ------- */

struct op_add { __device__ __forceinline__ float operator()(float a, float b) const { return a + b; } };
struct op_mul { __device__ __forceinline__ float operator()(float a, float b) const { return a * b; } };
struct op_sin { __device__ __forceinline__ float operator()(float x) const { return sinf(x); } };
struct op_cos { __device__ __forceinline__ float operator()(float x) const { return cosf(x); } };

/* For f16/bf16 outputs (8 and 11 significant bits) the SFU's sine and cosine after a two-constant
 * Cody-Waite reduction to [-pi, pi] are far inside the output's precision (their error there is
 * about 2^-21), and cost a few instructions where the software sinf/cosf cost many: measured on
 * an H100, sinf made tk::sin on bf16 compute-bound at 85% of copy bandwidth. f32 keeps sinf/cosf. */
__device__ __forceinline__ float reduce_2pi(float x)
{
    const float k = rintf(x * 0.15915494309189535f); /* x / 2pi */
    float r = fmaf(k, -6.28318548202514648f, x);     /* 2pi rounded to float... */
    return fmaf(k, 1.7484555314695172e-7f, r);        /* ...and what that rounding dropped */
}
struct op_sin16 { __device__ __forceinline__ float operator()(float x) const { return __sinf(reduce_2pi(x)); } };
struct op_cos16 { __device__ __forceinline__ float operator()(float x) const { return __cosf(reduce_2pi(x)); } };

/* x * sigmoid(x). expf is the accurate one (2 ulp); __fdividef(x, d) returns 0 once d passes
 * 2^126, which is the right limit here (x very negative, silu(x) -> 0). */
struct op_silu {
    __device__ __forceinline__ float operator()(float x) const { return __fdividef(x, 1.0f + expf(-x)); }
};

/* The tanh form 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
 * x * sigmoid(2u): 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) exactly, and this form does not cancel
 * where tanh(u) nears -1 (x below about -3), so it stays accurate in relative terms there. */
struct op_gelu {
    __device__ __forceinline__ float operator()(float x) const
    {
        const float k2 = 1.5957691216057308f; /* 2 sqrt(2/pi) */
        float u2 = k2 * fmaf(0.044715f * x, x * x, x);
        return __fdividef(x, 1.0f + expf(-u2));
    }
};

/* The exact form 0.5 x (1 + erf(x / sqrt 2)) (PyTorch's approximate='none'), as 0.5 x erfc(-x / sqrt 2):
 * the same value, without the cancellation of 1 + erf near -1 for x below about -3. */
struct op_gelu_erf {
    __device__ __forceinline__ float operator()(float x) const { return 0.5f * x * erfcf(-0.70710678118654752f * x); }
};


/* The vector path walks the tensor in chunks of kChunk vectors, one chunk per block: thread t of
 * a block loads vectors t, t + 256, t + 512, t + 768 of its chunk (all loads issued before the
 * first use), so a block reads and writes one contiguous 16 KiB span. Measured on an H100
 * (bench/kernels/variants*.cu, 2026-11-22): this layout moves bf16 at 99.8% of a device-to-device
 * copy, where a grid-stride loop over a grid of 8 blocks per SM stopped at 92 to 94% (a plain SM
 * copy kernel did too). If the grid is smaller than the number of chunks, blocks stride over
 * chunks, so any grid is correct; elementwise_ops.c launches one block per chunk. */
constexpr int kVecPerThread = 4;

template <typename T, typename F>
__device__ __forceinline__ void unary(const T *__restrict__ x, T *__restrict__ y, long long n, F f)
{
    typedef lanes<T> L;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nthreads = (long long)gridDim.x * blockDim.x;
    if (!aligned16(x) || !aligned16(y)) {
        for (long long i = tid; i < n; i += nthreads)
            L::store1(y + i, f(L::load1(x + i)));
        return;
    }
    const uint4 *__restrict__ xv = reinterpret_cast<const uint4 *>(x);
    uint4 *__restrict__ yv = reinterpret_cast<uint4 *>(y);
    const long long nvec = n / L::n;
    const long long chunk = (long long)blockDim.x * kVecPerThread;
    for (long long base = (long long)blockIdx.x * chunk + threadIdx.x; base < nvec; base += (long long)gridDim.x * chunk) {
        uint4 q[kVecPerThread];
#pragma unroll
        for (int u = 0; u < kVecPerThread; u++) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < nvec)
                q[u] = __ldg(xv + i);
        }
#pragma unroll
        for (int u = 0; u < kVecPerThread; u++) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < nvec) {
                float v[L::n];
                L::unpack(q[u], v);
#pragma unroll
                for (int k = 0; k < L::n; k++)
                    v[k] = f(v[k]);
                yv[i] = L::pack(v);
            }
        }
    }
    for (long long t = nvec * L::n + tid; t < n; t += nthreads) /* the tail: < 8 elements */
        L::store1(y + t, f(L::load1(x + t)));
}

template <typename T, typename F>
__device__ __forceinline__ void binary(const T *__restrict__ a, const T *__restrict__ b,
                                       T *__restrict__ y, long long n, F f)
{
    typedef lanes<T> L;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nthreads = (long long)gridDim.x * blockDim.x;
    if (!aligned16(a) || !aligned16(b) || !aligned16(y)) {
        for (long long i = tid; i < n; i += nthreads)
            L::store1(y + i, f(L::load1(a + i), L::load1(b + i)));
        return;
    }
    const uint4 *__restrict__ av = reinterpret_cast<const uint4 *>(a);
    const uint4 *__restrict__ bv = reinterpret_cast<const uint4 *>(b);
    uint4 *__restrict__ yv = reinterpret_cast<uint4 *>(y);
    const long long nvec = n / L::n;
    const long long chunk = (long long)blockDim.x * kVecPerThread;
    for (long long base = (long long)blockIdx.x * chunk + threadIdx.x; base < nvec; base += (long long)gridDim.x * chunk) {
        uint4 qa[kVecPerThread], qb[kVecPerThread];
#pragma unroll
        for (int u = 0; u < kVecPerThread; u++) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < nvec) {
                qa[u] = __ldg(av + i);
                qb[u] = __ldg(bv + i);
            }
        }
#pragma unroll
        for (int u = 0; u < kVecPerThread; u++) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < nvec) {
                float va[L::n], vb[L::n];
                L::unpack(qa[u], va);
                L::unpack(qb[u], vb);
#pragma unroll
                for (int k = 0; k < L::n; k++)
                    va[k] = f(va[k], vb[k]);
                yv[i] = L::pack(va);
            }
        }
    }
    for (long long t = nvec * L::n + tid; t < n; t += nthreads)
        L::store1(y + t, f(L::load1(a + t), L::load1(b + t)));
}

} // namespace

/* The kernels, by name: tk_<op>_<dtype>, parameters (x, y, n) or (a, b, y, n). */
#define TK_EW_UNARY_F(op, sfx, T, F)                                                         \
    TK_KERNEL void __launch_bounds__(kBlock)                                   \
    tk_##op##_##sfx(const T *__restrict__ x, T *__restrict__ y, long long n)                 \
    {                                                                                        \
        unary(x, y, n, F());                                                                 \
    }
#define TK_EW_UNARY(op, sfx, T) TK_EW_UNARY_F(op, sfx, T, op_##op)
#define TK_EW_BINARY(op, sfx, T)                                                             \
    TK_KERNEL void __launch_bounds__(kBlock)                                                 \
    tk_##op##_##sfx(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y,     \
                    long long n)                                                             \
    {                                                                                        \
        binary(a, b, y, n, op_##op());                                                       \
    }

TK_EW_BINARY(add, f32, float)
TK_EW_BINARY(add, f16, __half)
TK_EW_BINARY(add, bf16, __nv_bfloat16)
TK_EW_BINARY(mul, f32, float)
TK_EW_BINARY(mul, f16, __half)
TK_EW_BINARY(mul, bf16, __nv_bfloat16)
TK_EW_UNARY(sin, f32, float)
TK_EW_UNARY_F(sin, f16, __half, op_sin16)
TK_EW_UNARY_F(sin, bf16, __nv_bfloat16, op_sin16)
TK_EW_UNARY(cos, f32, float)
TK_EW_UNARY_F(cos, f16, __half, op_cos16)
TK_EW_UNARY_F(cos, bf16, __nv_bfloat16, op_cos16)
TK_EW_UNARY(silu, f32, float)
TK_EW_UNARY(silu, f16, __half)
TK_EW_UNARY(silu, bf16, __nv_bfloat16)
TK_EW_UNARY(gelu, f32, float)
TK_EW_UNARY(gelu, f16, __half)
TK_EW_UNARY(gelu, bf16, __nv_bfloat16)
TK_EW_UNARY(gelu_erf, f32, float)
TK_EW_UNARY(gelu_erf, f16, __half)
TK_EW_UNARY(gelu_erf, bf16, __nv_bfloat16)
