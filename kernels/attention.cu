/* Scaled dot-product attention for the built-in op tk::sdpa: o = softmax(q k^T * scale [+ causal
 * mask]) v, per batch and head, with q, k, v, o addressed through strides (batch, head, seq; the
 * head dim contiguous), so that the op takes PyTorch's [B, H, S, D] and the [B, S, H*D] a linear
 * makes alike. Its CPU reference is in attention_ref.c.
 *
 * tk_sdpa_flash_<dtype>_d<D>[_q128] (f16, bf16; D 64 or 128; sm_80 and later): the
 * FlashAttention-2 form on tensor cores with float accumulators. A block of 4 warps (a warpgroup)
 * takes 64 query rows of one (batch, head), or with _q128 two warpgroups take 128 rows and read
 * each tile of k and v once for both (long sequences, which are bound by what comes through L2:
 * tk_sdpa_warpgroups in attention_grid.h chooses), and walks the keys in tiles of 64. The tiles
 * are in shared memory, static where they fit in 48 KiB, else dynamic (D 128 with two warpgroups:
 * 65 KiB, which tk_wrap_shared asks for). Per tile: s = q k^T in registers;
 * the online softmax (each row's running max and sum; exponentials in base 2, the scale folded
 * into an fma; the max a row's exponentials are taken against moves only when the tile's scores
 * pass it by 2^8 in p, and a warp whose rows did not move skips rescaling its accumulators); p
 * rounded to 16 bits straight from the score accumulators into the operand layout (no trip
 * through shared memory); o += p v. k and v come in with cp.async into tiles whose 16-byte chunks
 * are swizzled (chunk ^ row % 8, blocks of 64 columns): at D 64 double-buffered (the next tile's
 * while this one is computed), at D 128 one tile each (four blocks of one warpgroup on an SM), the
 * next k coming in while this tile's p v runs and the next v while the next scores are computed.
 * Causal blocks stop at the diagonal and mask only the tiles that cross it; the longest blocks
 * start first, over every head or over groups of heads whose k and v fit in L2 together
 * (attention_grid.h). Two forms of the products, chosen when the cubin is compiled:
 *   - sm_90a (H100, H200): wgmma, each warpgroup its 64 rows, q and k (and v, transposed by the
 *     instruction) read by the tensor cores straight from the swizzled tiles, p from registers;
 *   - otherwise mma.sync m16n8k16, operands read with ldmatrix (.trans for v).
 * The fragment layouts are the same in both, so the softmax between them is shared.
 *
 * tk_sdpa_rows_<dtype> (f32, f16, bf16; any D up to 256, any alignment): one warp a query row,
 * the online softmax over the keys one at a time, the row's D values spread over the lanes. For
 * what the tensor-core kernel does not take. */
#include <stdint.h>
#include <tk/kernel.h>

#include "attention_grid.h"
#include "lanes.cuh"
#include "tiles.cuh"
#include "wgmma.cuh"

namespace {

extern __shared__ unsigned char tk_sdpa_smem[]; /* TK_SDPA_DYNAMIC(D, WG) bytes, where not 0 */

constexpr int kThreads = 128; /* a warpgroup; the row kernel's block */
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLazy = 8.0f; /* log2 of how far p may exceed 1 before the running maximum moves */

/* strides in elements: batch, head, seq */
struct strides {
    long long b, h, s;
};

__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

template <typename T, int D, int BC, int WG>
__device__ __forceinline__ void sdpa_flash(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                                           T *__restrict__ o, int H, int S, int Sk, strides sq, strides sk, strides sv,
                                           strides so, float scale, int causal)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap(); /* cp.async and bf16 mma need sm_80; the op does not launch this kernel there */
#else
    constexpr int NTH = kThreads * WG, BR = 64 * WG; /* WG warpgroups, 64 queries each */
    constexpr int NT = BC / 8, DT = D / 8; /* score and output n-tiles (8 columns) */
    /* Two tiles of each of k and v (one read, the next coming in), or one of each: k's next tile
     * coming in while this tile's v is read and v's while the next scores are computed. */
    constexpr int NBUF = TK_SDPA_NBUF(D);
    constexpr int TILES = TK_SDPA_TILES(D, WG);
    static_assert(BC == 64 && sizeof(T) == 2 && (BR + 2 * NBUF * BC) * D * 2 == TILES, "tiles of another size");
    /* q, then k's and v's buffers: static shared memory up to 48 KiB, else the dynamic, from its
     * first 1024-byte boundary */
    T *sQ;
    if constexpr (TK_SDPA_DYNAMIC(D, WG) == 0) {
        __shared__ __align__(1024) unsigned char tiles[TILES];
        sQ = reinterpret_cast<T *>(tiles);
    } else {
        sQ = reinterpret_cast<T *>(tk_sdpa_smem + ((1024u - (smem(tk_sdpa_smem) & 1023u)) & 1023u));
    }
    /* the buffers of tile i's k and v (an offset computed, not a table: one would go to local memory) */
    auto sK = [sQ](int i) { return sQ + (BR + (i % NBUF) * BC) * D; };
    auto sV = [sQ](int i) { return sQ + (BR + (NBUF + i % NBUF) * BC) * D; };

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wg = warp >> 2; /* this warp's warpgroup: queries 64 wg .. 64 wg + 63 of the block */
    /* Blocks start in x order. Causal: grid (B H, query blocks), longest blocks first in groups of
     * heads (attention_grid.h). Otherwise (query blocks, B H): a head's blocks run together and
     * share its k and v in L2. */
    int bh, qi;
    if (causal) {
        const int group = tk_sdpa_causal_group(2ll * Sk * D * (long long)sizeof(T), (int)gridDim.x);
        tk_sdpa_causal_block(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, group, &bh, &qi);
    } else {
        bh = blockIdx.y;
        qi = blockIdx.x;
    }
    const int b = bh / H, h = bh % H, q0 = qi * BR;
    const T *qb = q + b * sq.b + h * sq.h, *kb = k + b * sk.b + h * sk.h, *vb = v + b * sv.b + h * sv.h;
    T *ob = o + b * so.b + h * so.h;

    int kend = Sk; /* keys this block reads: all, or (causal: key j <= query i) up to its last query */
    if (causal && q0 + BR < kend)
        kend = q0 + BR;
    const int ntiles = (kend + BC - 1) / BC;

    /* cp.async groups, committed even when empty so that "all but the newest" is always what is
     * about to be read. Two buffers: a group a tile (q with k and v of tile 0, then k and v of
     * tile 1). One: a group for k and one for v (q with k of tile 0, then v of tile 0). */
    load_tile<T, D, BR, NTH>(sQ, qb, sq.s, q0, S);
    if constexpr (NBUF == 2) {
        for (int jt = 0; jt < 2; jt++) {
            if (jt < ntiles) {
                load_tile<T, D, BC, NTH>(sK(jt), kb, sk.s, jt * BC, Sk);
                load_tile<T, D, BC, NTH>(sV(jt), vb, sv.s, jt * BC, Sk);
            }
            cp_commit();
        }
    } else {
        load_tile<T, D, BC, NTH>(sK(0), kb, sk.s, 0, Sk);
        cp_commit();
        load_tile<T, D, BC, NTH>(sV(0), vb, sv.s, 0, Sk);
        cp_commit();
    }

    /* each warp has 16 of the block's rows; a lane has rows g and g + 8 of them (half hr) */
    const int r0 = warp * 16;
    float acc[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < DT; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    const float sl2 = scale * kLog2e;

    for (int jt = 0; jt < ntiles; jt++) {
        const int j0 = jt * BC;
        const T *tK = sK(jt), *tV = sV(jt);
        cp_wait_newest_pending(); /* this tile is in (one buffer: its k) */
        if (kWgmma)
            wg_proxy_fence();
        __syncthreads();

        float s[NT][4];
        if constexpr (kWgmma) {
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                wgmma<T, BC>::ss(flat<4 * NT>(s), wg_desc(sQ + swz<D, BR>(64 * wg, 2 * kk), 16, 1024),
                                 wg_desc(tK + swz<D, BC>(0, 2 * kk), 16, 1024), kk > 0);
            wg_commit();
            wg_wait();
            wg_hold(flat<4 * NT>(s));
        } else {
#pragma unroll
            for (int n = 0; n < NT; n++)
                s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t qf[4]; /* read again each tile: registers are what limits this kernel */
                ldsm4(qf, smem(sQ + swz<D, BR>(r0 + (lane & 15), 2 * kk + (lane >> 4))));
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t bk[4];
                    const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                    ldsm4(bk, smem(tK + swz<D, BC>(key, 2 * kk + ((lane >> 3) & 1))));
                    mma16816<T>(s[2 * np], qf, bk[0], bk[1]);
                    mma16816<T>(s[2 * np + 1], qf, bk[2], bk[3]);
                }
            }
        }

        if constexpr (NBUF == 1) { /* every warp is done with k: the next tile's comes in */
            __syncthreads();
            if (jt + 1 < ntiles)
                load_tile<T, D, BC, NTH>(sK(0), kb, sk.s, j0 + BC, Sk);
            cp_commit();
        }

        /* -inf past the keys and (causal) above the diagonal; only tiles at those edges look */
        if (j0 + BC > Sk || (causal && j0 + BC - 1 > q0 + r0)) {
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int col = j0 + n * 8 + 2 * t + (e & 1), row = q0 + r0 + g + (e >> 1) * 8;
                    if (col >= Sk || (causal && col > row))
                        s[n][e] = -INFINITY;
                }
        }

        /* online softmax, each row spread over the lane's quad; maxima of the raw scores, the
         * scale folded into one fma with the exponent's base 2. The running maximum m moves only
         * when a row's new scores exceed it by more than 2^kLazy in p (p is then at most 2^8: no
         * range trouble in bf16 or f32, and the result is the same quotient): after the first
         * tiles the warp skips the rescaling of its accumulators altogether. */
        float mx[2];
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[hr] = -INFINITY;
#pragma unroll
            for (int n = 0; n < NT; n++)
                mx[hr] = fmaxf(mx[hr], fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
        }
        const bool grow = (mx[0] - m[0]) * sl2 > kLazy || (mx[1] - m[1]) * sl2 > kLazy;
        if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const float mn = fmaxf(m[hr], mx[hr]);
                const float alpha = mn == -INFINITY ? 1.0f : fast_exp2((m[hr] - mn) * sl2);
                m[hr] = mn;
                l[hr] *= alpha;
#pragma unroll
                for (int n = 0; n < DT; n++) {
                    acc[n][2 * hr] *= alpha;
                    acc[n][2 * hr + 1] *= alpha;
                }
            }
        }
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float mu = m[hr] == -INFINITY ? 0.0f : m[hr] * sl2;
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                float p0 = fast_exp2(fmaf(s[n][2 * hr], sl2, -mu)), p1 = fast_exp2(fmaf(s[n][2 * hr + 1], sl2, -mu));
                s[n][2 * hr] = p0;
                s[n][2 * hr + 1] = p1;
                sum += p0 + p1;
            }
            l[hr] += sum; /* the lane's part; the quad's sum at the end */
        }
        /* the accumulator layout of n-tiles 2kk, 2kk + 1 is the operand layout of k-chunk kk */
        uint32_t pf[BC / 16][4];
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            pf[kk][0] = lanes<T>::pack2(s[2 * kk][0], s[2 * kk][1]);
            pf[kk][1] = lanes<T>::pack2(s[2 * kk][2], s[2 * kk][3]);
            pf[kk][2] = lanes<T>::pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pf[kk][3] = lanes<T>::pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }

        if constexpr (NBUF == 1) { /* this tile's v is in (the next k may still be coming) */
            cp_wait_newest_pending();
            if (kWgmma)
                wg_proxy_fence();
            __syncthreads();
        }
        if constexpr (kWgmma) {
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++)
                wgmma<T, D>::rs(flat<4 * DT>(acc), pf[kk], wg_desc(tV + swz<D, BC>(kk * 16, 0), BC * 128, 1024));
            wg_commit();
            wg_wait();
            wg_hold(flat<4 * DT>(acc));
        } else {
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++)
#pragma unroll
                for (int dp = 0; dp < D / 16; dp++) {
                    uint32_t bv[4];
                    const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    ldsm4_t(bv, smem(tV + swz<D, BC>(key, 2 * dp + (lane >> 4))));
                    mma16816<T>(acc[2 * dp], pf[kk], bv[0], bv[1]);
                    mma16816<T>(acc[2 * dp + 1], pf[kk], bv[2], bv[3]);
                }
        }
        __syncthreads(); /* every warp is done with this tile's buffers: tile jt + 2 goes there */
        if constexpr (NBUF == 2) {
            if (jt + 2 < ntiles) {
                load_tile<T, D, BC, NTH>(sK(jt & 1), kb, sk.s, j0 + 2 * BC, Sk);
                load_tile<T, D, BC, NTH>(sV(jt & 1), vb, sv.s, j0 + 2 * BC, Sk);
            }
        } else if (jt + 1 < ntiles) { /* one buffer: the next tile's v */
            load_tile<T, D, BC, NTH>(sV(0), vb, sv.s, j0 + BC, Sk);
        }
        cp_commit();
    }

    /* o = acc / l, through the warp's own rows of the q tile, out in 16-byte rows (q may still be
     * coming in where there was no key: nothing pending may write there) */
    cp_wait_all();
    __syncthreads();
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float sum = l[hr];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
        for (int n = 0; n < DT; n++)
            *reinterpret_cast<uint32_t *>(sQ + swz<D, BR>(r0 + g + hr * 8, n) + 2 * t) =
                lanes<T>::pack2(acc[n][2 * hr] * inv, acc[n][2 * hr + 1] * inv);
    }
    __syncwarp();
#pragma unroll
    for (int i = lane; i < 16 * DT; i += 32) {
        const int row = r0 + i / DT, c = i % DT, qo = q0 + row;
        if (qo < S)
            *reinterpret_cast<uint4 *>(ob + (long long)qo * so.s + c * 8) =
                *reinterpret_cast<const uint4 *>(sQ + swz<D, BR>(row, c));
    }
#endif
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

#define TK_SDPA_FLASH(name, T, D, WG, BLOCKS)                                                               \
    TK_KERNEL void __launch_bounds__(kThreads * WG, BLOCKS) name(TK_SDPA_ARGS(T))                           \
    {                                                                                                       \
        sdpa_flash<T, D, 64, WG>(q, k, v, o, H, S, Sk, TK_SDPA_STRIDES, scale, causal);                     \
    }
#define TK_SDPA_ROWS(sfx, T)                                                                                \
    TK_KERNEL void __launch_bounds__(kThreads) tk_sdpa_rows_##sfx(TK_SDPA_ARGS(T), int D)                   \
    {                                                                                                       \
        sdpa_rows<T>(q, k, v, o, H, S, Sk, D, TK_SDPA_STRIDES, scale, causal);                              \
    }

/* As many blocks an SM as their shared memory allows, registers held to that. One warpgroup
 * (64 queries a block): Hopper's 228 KiB take 5 blocks at D 64 and 4 at D 128; Ampere's 164 KiB 4,
 * and 2 at D 128, where 3 would spill. Two warpgroups (128 queries, k and v read once for both):
 * 2 blocks at D 128 (97 KiB each), and 2 at D 64, where registers allow no more. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TK_SDPA_BLOCKS(hopper, ampere) ampere
#else
#define TK_SDPA_BLOCKS(hopper, ampere) hopper
#endif
TK_SDPA_FLASH(tk_sdpa_flash_f16_d64, __half, 64, 1, TK_SDPA_BLOCKS(5, 4))
TK_SDPA_FLASH(tk_sdpa_flash_f16_d128, __half, 128, 1, TK_SDPA_BLOCKS(4, 2))
TK_SDPA_FLASH(tk_sdpa_flash_bf16_d64, __nv_bfloat16, 64, 1, TK_SDPA_BLOCKS(5, 4))
TK_SDPA_FLASH(tk_sdpa_flash_bf16_d128, __nv_bfloat16, 128, 1, TK_SDPA_BLOCKS(4, 2))
TK_SDPA_FLASH(tk_sdpa_flash_f16_d64_q128, __half, 64, 2, 2)
TK_SDPA_FLASH(tk_sdpa_flash_f16_d128_q128, __half, 128, 2, TK_SDPA_BLOCKS(2, 1))
TK_SDPA_FLASH(tk_sdpa_flash_bf16_d64_q128, __nv_bfloat16, 64, 2, 2)
TK_SDPA_FLASH(tk_sdpa_flash_bf16_d128_q128, __nv_bfloat16, 128, 2, TK_SDPA_BLOCKS(2, 1))
TK_SDPA_ROWS(f32, float)
TK_SDPA_ROWS(f16, __half)
TK_SDPA_ROWS(bf16, __nv_bfloat16)
