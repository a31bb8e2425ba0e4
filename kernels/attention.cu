/* Scaled dot-product attention for the built-in op tk::sdpa: o = softmax(q k^T * scale [+ causal
 * mask]) v, per batch and head, with q, k, v, o addressed through strides (batch, head, seq; the
 * head dim contiguous), so that the op takes PyTorch's [B, H, S, D] and the [B, S, H*D] a linear
 * makes alike. Its CPU reference is in attention_ref.c.
 *
 * tk_sdpa_wmma_<dtype>_d<D> (f16, bf16; D 64 or 128): tensor cores through WMMA (16x16x16, float
 * accumulators). A block of 4 warps takes 64 query rows of one (batch, head), each warp 16 of
 * them, and walks the keys in tiles of 32 held in shared memory, twice: the first walk keeps each
 * row's running max and sum of exponentials (scalars, rescaled as the max grows), the second
 * computes p = exp(s - max) / sum exactly and accumulates p v in the warps' WMMA accumulators,
 * which then never need rescaling (the flash-attention form rescales them; WMMA hides their
 * layout). The price is q k^T computed twice: 3 products instead of 2. Causal blocks stop at the
 * diagonal. Shared memory: 48 KiB for D = 128 (the static limit), 28 KiB for D = 64.
 *
 * tk_sdpa_rows_<dtype> (f32, f16, bf16; any D up to 256, any alignment): one warp a query row,
 * the online softmax over the keys one at a time, the row's D values spread over the lanes. For
 * what the tensor-core kernel does not take. */
#include <mma.h>
#include <stdint.h>
#include <tk/kernel.h>

#include "lanes.cuh"

namespace {

using namespace nvcuda;

constexpr int kBM = 64, kBN = 32, kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

/* strides in elements: batch, head, seq */
struct strides {
    long long b, h, s;
};

template <typename T, int D>
__device__ __forceinline__ void sdpa_wmma(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                                          T *__restrict__ o, int H, int S, int Sk, strides sq, strides sk, strides sv,
                                          strides so, float scale, int causal)
{
    constexpr int LD = D + 8;   /* row pitch of the q, k, v tiles (halves): off the banks' period */
    constexpr int LDS = kBN + 4; /* the scores (floats) */
    constexpr int LDP = kBN + 8; /* the probabilities (halves) */
    __shared__ __align__(32) T sQ[kBM * LD];
    __shared__ __align__(32) T sK[kBN * LD];
    __shared__ __align__(32) T sV[kBN * LD];
    __shared__ __align__(32) float sS[kWarps][16 * LDS];
    __shared__ __align__(32) T sP[kWarps][16 * LDP];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int q0 = blockIdx.x * kBM;
    const T *qb = q + b * sq.b + h * sq.h, *kb = k + b * sk.b + h * sk.h, *vb = v + b * sv.b + h * sv.h;
    T *ob = o + b * so.b + h * so.h;
    constexpr int VPR = D / 8; /* 16-byte vectors a row */

    /* rows j0 .. j0 + rows - 1 of src (row pitch stride) into dst, zero past n: 16-byte vectors */
    auto load_tile = [&](T *dst, const T *src, long long stride, int j0, int rows, int n) {
        for (int i = threadIdx.x; i < rows * VPR; i += blockDim.x) {
            int r = i / VPR, c = (i % VPR) * 8;
            uint4 val = make_uint4(0, 0, 0, 0);
            if (j0 + r < n)
                val = __ldg(reinterpret_cast<const uint4 *>(src + (long long)(j0 + r) * stride + c));
            *reinterpret_cast<uint4 *>(&dst[r * LD + c]) = val;
        }
    };
    load_tile(sQ, qb, sq.s, q0, kBM, S); /* the block's queries */

    /* keys this block reads: all, or (causal: key j <= query i) up to its last query */
    int kend = Sk;
    if (causal && q0 + kBM < kend)
        kend = q0 + kBM;
    const float sl2 = scale * kLog2e;
    const int row = lane >> 1, half = lane & 1;   /* each lane pair: one of the warp's 16 rows */
    const int qi = q0 + warp * 16 + row;          /* this lane's query */
    float m = -INFINITY, l = 0.0f;

    /* the warp's 16 x kBN scores q k^T into sS[warp] */
    auto scores = [&]() {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kBN / 16];
#pragma unroll
        for (int n = 0; n < kBN / 16; n++)
            wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, &sQ[(warp * 16) * LD + kk * 16], LD);
#pragma unroll
            for (int n = 0; n < kBN / 16; n++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, &sK[(n * 16) * LD + kk * 16], LD);
                wmma::mma_sync(acc[n], fa, fb, acc[n]);
            }
        }
#pragma unroll
        for (int n = 0; n < kBN / 16; n++)
            wmma::store_matrix_sync(&sS[warp][n * 16], acc[n], LDS, wmma::mem_row_major);
        __syncwarp();
    };
    /* this lane's 16 scores of its row, scaled to base 2, -inf where masked */
    auto lane_scores = [&](int j0, float (&s)[kBN / 2]) {
#pragma unroll
        for (int c = 0; c < kBN / 2; c++) {
            int j = j0 + half * (kBN / 2) + c;
            bool keep = j < Sk && (!causal || j <= qi);
            s[c] = keep ? sS[warp][row * LDS + half * (kBN / 2) + c] * sl2 : -INFINITY;
        }
    };

    /* walk 1: each row's max and sum of exp2 */
    for (int j0 = 0; j0 < kend; j0 += kBN) {
        __syncthreads();
        load_tile(sK, kb, sk.s, j0, kBN, Sk);
        __syncthreads();
        scores();
        float s[kBN / 2], tm = -INFINITY;
        lane_scores(j0, s);
#pragma unroll
        for (int c = 0; c < kBN / 2; c++)
            tm = fmaxf(tm, s[c]);
        tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
        float mn = fmaxf(m, tm);
        if (mn != -INFINITY) {
            float ts = 0.0f;
#pragma unroll
            for (int c = 0; c < kBN / 2; c++)
                ts += exp2f(s[c] - mn);
            ts += __shfl_xor_sync(0xffffffffu, ts, 1);
            l = l * exp2f(m - mn) + ts;
            m = mn;
        }
    }
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;

    /* walk 2: o = sum p v with p exact */
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc[D / 16];
#pragma unroll
    for (int n = 0; n < D / 16; n++)
        wmma::fill_fragment(oacc[n], 0.0f);
    for (int j0 = 0; j0 < kend; j0 += kBN) {
        __syncthreads();
        load_tile(sK, kb, sk.s, j0, kBN, Sk);
        load_tile(sV, vb, sv.s, j0, kBN, Sk);
        __syncthreads();
        scores();
        float s[kBN / 2];
        lane_scores(j0, s);
#pragma unroll
        for (int c = 0; c < kBN / 2; c++)
            sP[warp][row * LDP + half * (kBN / 2) + c] = lanes<T>::from_float(m == -INFINITY ? 0.0f : exp2f(s[c] - m) * inv_l);
        __syncwarp();
#pragma unroll
        for (int kk = 0; kk < kBN / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, &sP[warp][kk * 16], LDP);
#pragma unroll
            for (int n = 0; n < D / 16; n++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                wmma::load_matrix_sync(fb, &sV[(kk * 16) * LD + n * 16], LD);
                wmma::mma_sync(oacc[n], fa, fb, oacc[n]);
            }
        }
    }

    /* out: each 16 x 16 block through the warp's score tile, 8 halves a lane */
#pragma unroll
    for (int n = 0; n < D / 16; n++) {
        __syncwarp();
        wmma::store_matrix_sync(&sS[warp][0], oacc[n], LDS, wmma::mem_row_major);
        __syncwarp();
        int r = lane >> 1, c = (lane & 1) * 8, qo = q0 + warp * 16 + r;
        if (qo < S) {
            float t[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                t[e] = sS[warp][r * LDS + c + e];
            uint4 packed;
            uint32_t *pw = reinterpret_cast<uint32_t *>(&packed);
#pragma unroll
            for (int e = 0; e < 4; e++)
                pw[e] = lanes<T>::pack2(t[2 * e], t[2 * e + 1]);
            *reinterpret_cast<uint4 *>(ob + (long long)qo * so.s + n * 16 + c) = packed;
        }
    }
}

/* One warp a query row: the online softmax over the keys, D values over the lanes (up to 8 a lane). */
template <typename T>
__device__ __forceinline__ void sdpa_rows(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                                          T *__restrict__ o, int H, int S, int Sk, int D, strides sq, strides sk,
                                          strides sv, strides so, float scale, int causal)
{
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    for (int i = blockIdx.x * wpb + (threadIdx.x >> 5); i < S; i += gridDim.x * wpb) {
        const int bh = blockIdx.y, b = bh / H, h = bh % H;
        const T *qr = q + b * sq.b + h * sq.h + (long long)i * sq.s;
        const T *kb = k + b * sk.b + h * sk.h, *vb = v + b * sv.b + h * sv.h;
        float qv[8], acc[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            int d = lane + 32 * e;
            qv[e] = d < D ? lanes<T>::load1(qr + d) * scale : 0.0f;
            acc[e] = 0.0f;
        }
        float m = -INFINITY, l = 0.0f;
        const int jend = causal ? (i + 1 < Sk ? i + 1 : Sk) : Sk;
        for (int j = 0; j < jend; j++) {
            const T *kr = kb + (long long)j * sk.s, *vr = vb + (long long)j * sv.s;
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                int d = lane + 32 * e;
                if (d < D)
                    dot += qv[e] * lanes<T>::load1(kr + d);
            }
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                dot += __shfl_xor_sync(0xffffffffu, dot, off);
            float mn = fmaxf(m, dot), alpha = expf(m - mn), p = expf(dot - mn);
            l = l * alpha + p;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                int d = lane + 32 * e;
                if (d < D)
                    acc[e] = acc[e] * alpha + p * lanes<T>::load1(vr + d);
            }
            m = mn;
        }
        T *orow = o + b * so.b + h * so.h + (long long)i * so.s;
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            int d = lane + 32 * e;
            if (d < D)
                lanes<T>::store1(orow + d, acc[e] * inv);
        }
    }
}

} // namespace

#define TK_SDPA_ARGS(T)                                                                                     \
    const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, T *__restrict__ o, int H,     \
        int S, int Sk, long long qb, long long qh, long long qs, long long kb, long long kh, long long ks,   \
        long long vb, long long vh, long long vs, long long ob, long long oh, long long os, float scale,     \
        int causal
#define TK_SDPA_STRIDES {qb, qh, qs}, {kb, kh, ks}, {vb, vh, vs}, {ob, oh, os}

#define TK_SDPA_WMMA(sfx, T, D)                                                                             \
    TK_KERNEL void __launch_bounds__(128) tk_sdpa_wmma_##sfx##_d##D(TK_SDPA_ARGS(T))                      \
    {                                                                                                       \
        sdpa_wmma<T, D>(q, k, v, o, H, S, Sk, TK_SDPA_STRIDES, scale, causal);                              \
    }
#define TK_SDPA_ROWS(sfx, T)                                                                                \
    TK_KERNEL void __launch_bounds__(128) tk_sdpa_rows_##sfx(TK_SDPA_ARGS(T), int D)                      \
    {                                                                                                       \
        sdpa_rows<T>(q, k, v, o, H, S, Sk, D, TK_SDPA_STRIDES, scale, causal);                              \
    }

TK_SDPA_WMMA(f16, __half, 64)
TK_SDPA_WMMA(f16, __half, 128)
TK_SDPA_WMMA(bf16, __nv_bfloat16, 64)
TK_SDPA_WMMA(bf16, __nv_bfloat16, 128)
TK_SDPA_ROWS(f32, float)
TK_SDPA_ROWS(f16, __half)
TK_SDPA_ROWS(bf16, __nv_bfloat16)
