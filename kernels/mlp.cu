/* The fully fused MLP of narrow width for the built-in tk::_mlp, what the executor runs
 *   y = residual + linear2(gelu_tanh(linear1(x)))     x, residual, y [M, D]; D 64 or 128
 * as (runtime/exec.c fuses tk::linear, tk::gelu, tk::linear and tk::add into it): linear1's weight
 * w1 [H, D] and bias b1 [H], linear2's w2 [D, H] and b2 [D], H a multiple of 128 (256 at least), f16
 * or bf16.
 *
 * The hidden layer never leaves the chip, and neither do the weights: the kernel is persistent, in
 * clusters of two blocks (one an SM), and each block of a cluster holds one half of the hidden
 * units' weights in shared memory for the whole launch (w1's rows and w2's columns of those units:
 * 128 KiB at D 128, H 512), loaded once. A cluster walks tiles of 64 rows of x; both its blocks
 * take every tile, each through its own half of the hidden units, 64 at a time (a chunk):
 *   s = x w1_c^T (wgmma, x and w1's chunk in shared memory), then the bias in float, rounded to
 *   16-bit pairs and through GELU in that type, straight into the register operand of
 *   acc += gelu(s + b1) w2_c^T.
 * The chunks are software-pipelined: the next chunk's first product is issued before this chunk's
 * GELU (an issue of wgmma waits until the tensor cores take it, so a warpgroup's GELU runs under the
 * last 130-200 cycles of its own products only: bench/serving/JOURNAL.md, 2026-11-27, thirteenth
 * session, with the kernel forms measured against this one), and the second product goes a k-step
 * (16 hidden units) at a time, each issued once its units' GELU is done, so that it runs under the
 * next units' GELU (ptxas still moves part of the GELU ahead: in the SASS 11, 17, 3 and 0 of a
 * chunk's 32 tanh come before its four k-steps; D 64, H 1408 6-7% faster, tokmlp's widths even:
 * bench/serving/JOURNAL.md, fourteenth session). Each block then owns half of the
 * tile's output columns: it sends the other half of its partial sums (bf16 pairs where T is bf16,
 * floats for f16) into its peer's shared memory (distributed shared memory, counted by the peer's
 * mbarrier) and keeps its own; once the peer's part has landed, it adds it, b2 and the residual to
 * its own and writes its columns of y (16 bytes a store, through a transpose within each quad of
 * lanes). The two warpgroups of a block take turns at the tensor cores, so that one ends its round
 * (the exchange and y) while the other's products run. The next tile's rows come in (cp.async)
 * while this one runs.
 *
 * Two forms, chosen per launch by the op: where the launch's last round has no more tiles than
 * there are clusters (every launch of 4,224 rows or fewer on 132 SMs), the spread form gives that
 * round's tiles one a cluster, on one warpgroup a block, which then has the tensor cores to itself:
 * 256 rows on four clusters took 11.3-12.2 us a call against 13.2-13.5 on two clusters of two
 * warpgroups, 9,216 rows 17.1-17.8 against 19.1-19.6 (H200, bench/serving/JOURNAL.md, run127).
 * With whole rounds the other form's code is faster (3% in ncu's cycles at 32,768 rows).
 *
 * Why: where cuBLASLt runs the two linears (GELU and the residual as epilogues) the hidden layer
 * goes to memory and back (8 MB each way at 8192 rows of H 512); an earlier form of this kernel
 * (blocks of 64 rows reading every weight from L2 for every tile, branch fused-mlp, 2026-11-26)
 * was bound by that weight traffic and was slower than the cuBLASLt pair.
 *
 * sm_90a only (clusters, wgmma): the op runs the two linears elsewhere (mlp_ops.c). */
#include <stdint.h>
#include <tk/kernel.h>

#include <type_traits>

#include "cluster.cuh"
#include "lanes.cuh"
#include "mlp_grid.h"
#include "tiles.cuh"
#include "wgmma.cuh"

namespace {

/* two warpgroups a block, each on its own tile of 64 rows; 64 hidden units a chunk */
[[maybe_unused]] constexpr int NW = 2, kThreads = 128 * NW, BR = 64, BC = 64;

extern __shared__ unsigned char tk_mlp_smem[]; /* TK_MLP_DYNAMIC(D, H) bytes */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* gelu's tanh form on two 16-bit values at once, in their own type (bf16x2 or f16x2: half the
 * instructions of float, and one hardware tanh for both; the special-function units, not the
 * tensor cores, would otherwise bound the kernel):
 *   u = x (k + k3 x^2), k = sqrt(2/pi), k3 = 0.044715 k;   gelu = 0.5 x (1 + tanh u) = hx tanh u + hx
 * Large |x| ends where it should: x^2 inf -> tanh +-1 -> x or 0. */
#define TK__GELU2(name, TY)                                                                                 \
    __device__ __forceinline__ uint32_t name(uint32_t x, uint32_t k, uint32_t k3, uint32_t half)            \
    {                                                                                                       \
        uint32_t x2, p, u, th, hx, y;                                                                       \
        asm("mul.rn." TY " %0, %1, %1;" : "=r"(x2) : "r"(x));                                               \
        asm("fma.rn." TY " %0, %1, %2, %3;" : "=r"(p) : "r"(x2), "r"(k3), "r"(k));                          \
        asm("mul.rn." TY " %0, %1, %2;" : "=r"(u) : "r"(x), "r"(p));                                        \
        asm("tanh.approx." TY " %0, %1;" : "=r"(th) : "r"(u));                                              \
        asm("mul.rn." TY " %0, %1, %2;" : "=r"(hx) : "r"(x), "r"(half));                                    \
        asm("fma.rn." TY " %0, %1, %2, %3;" : "=r"(y) : "r"(hx), "r"(th), "r"(hx));                         \
        return y;                                                                                           \
    }
TK__GELU2(gelu2_bf16, "bf16x2")
TK__GELU2(gelu2_f16, "f16x2")
#undef TK__GELU2
template <typename T> __device__ __forceinline__ uint32_t gelu2(uint32_t x, uint32_t k, uint32_t k3, uint32_t half);
template <>
__device__ __forceinline__ uint32_t gelu2<__nv_bfloat16>(uint32_t x, uint32_t k, uint32_t k3, uint32_t half)
{
    return gelu2_bf16(x, k, k3, half);
}
template <>
__device__ __forceinline__ uint32_t gelu2<__half>(uint32_t x, uint32_t k, uint32_t k3, uint32_t half)
{
    return gelu2_f16(x, k, k3, half);
}
template <int N> __device__ __forceinline__ void wg_wait_n()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* The 4 x 4 transpose of 32-bit words over a quad (lanes 4g .. 4g + 3, t = lane & 3): lane t ends
 * with word t of each lane's a, in lane order (two butterfly exchanges, xor 2 then xor 1) */
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4], int t)
{
    const bool hi = t & 2, odd = t & 1;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint32_t v = __shfl_xor_sync(0xffffffffu, hi ? a[k] : a[k + 2], 2);
        if (hi)
            a[k] = v;
        else
            a[k + 2] = v;
    }
#pragma unroll
    for (int k = 0; k < 4; k += 2) {
        const uint32_t v = __shfl_xor_sync(0xffffffffu, odd ? a[k] : a[k + 1], 1);
        if (odd)
            a[k] = v;
        else
            a[k + 1] = v;
    }
}
#endif

template <typename T, int D, bool Spread>
__device__ __forceinline__ void mlp_fused(const T *__restrict__ r, const T *__restrict__ x, const T *__restrict__ w1,
                                          const T *__restrict__ b1, const T *__restrict__ w2,
                                          const T *__restrict__ b2, T *__restrict__ y, int M, int H)
{
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap(); /* clusters and wgmma: the op launches this kernel on sm_90a only */
#else
    /* the launch after this one in a graph, where it is a programmatic dependent (the end-of-graph
     * signal: runtime/cuda.c), may start its blocks now: they wait for this grid's end themselves */
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    constexpr int NT = BC / 8, DT = D / 8, HT = DT / 2; /* n-tiles of a chunk, of y, of a block's half of y */
    const int NC = H / (2 * BC);                      /* this block's chunks */
    const uint32_t rank = cluster_rank();
    const int cluster = (int)(blockIdx.x >> 1), nclusters = (int)(gridDim.x >> 1), ntiles = (M + BR - 1) / BR;
    const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127; /* warpgroup, thread in it */
    const int warp = wt >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3, r0 = warp * 16;

    /* From the first 1024-byte boundary: the block's chunks of w1 ([64 hidden][D] each) and of w2
     * ([D][64 hidden] each); each warpgroup's two tiles of x and exchange buffer (a half tile of
     * partial sums); b1 of the block's hidden units; the warpgroups' barriers; b2. */
    T *const tW1 = reinterpret_cast<T *>(tk_mlp_smem + ((1024u - (smem(tk_mlp_smem) & 1023u)) & 1023u));
    T *const tW2 = tW1 + NC * BC * D;
    T *const sX = tW2 + NC * BC * D + wg * 2 * BR * D;
    float *const xch = reinterpret_cast<float *>(tW2 + NC * BC * D + NW * 2 * BR * D) + wg * HT * 4 * 128;
    T *const sB1 =
        reinterpret_cast<T *>(reinterpret_cast<float *>(tW2 + NC * BC * D + NW * 2 * BR * D) + NW * HT * 4 * 128);
    /* the warpgroup's barriers: `full` completes when the peer's part of a tile has landed in the
     * exchange buffer, `empty` when the peer has read what this block sent it */
    const uint32_t full = smem(sB1 + NC * BC) + 16u * (uint32_t)wg, empty = full + 8u;
    T *const sB2 = reinterpret_cast<T *>(reinterpret_cast<unsigned char *>(sB1 + NC * BC) + 16 * NW);

    /* A round takes NW tiles a cluster, one a warpgroup: tile (round * nclusters + cluster) * NW + wg.
     * Every warpgroup walks the same rounds (the cluster barriers count every thread); one whose tile
     * is past the rows computes on zeros and stores nothing.
     * Spread (the launch's last round has no more tiles than clusters): the first warpgroups' tiles
     * before the second ones', tile (round * NW + wg) * nclusters + cluster, and a warpgroup walks
     * only the rounds that have a tile for it, so that last round runs on one warpgroup a block, with
     * the tensor cores to itself (the two blocks of a cluster have the same tiles: the exchange pairs
     * warpgroups of the same rank). Not for every launch (the head of this file says why). */
    auto tile_of_wg = [&](int round, int w) {
        return Spread ? (round * NW + w) * nclusters + cluster : (round * nclusters + cluster) * NW + w;
    };
    auto tile_of = [&](int round) { return tile_of_wg(round, wg); };
    /* whether warpgroup w walks round `round` */
    auto has_tile_of = [&](int round, int w) {
        return (Spread ? tile_of_wg(round, w) : (round * nclusters + cluster) * NW) < ntiles;
    };
    auto has_tile = [&](int round) { return has_tile_of(round, wg); };

    /* groups: the block's weights and b1 with the warpgroup's first tile of x, then each next tile
     * of x (b1 by cp.async too: a load through registers would hold the first round up). The first
     * group is waited for whole before the first product: stages on mbarriers, waited for in the
     * order the chain reads them, were 0.3 to 1.4 us slower a launch (H100, bench/serving/JOURNAL.md,
     * sixteenth session). */
    const int h0 = (int)rank * NC * BC;
    for (int c = 0; c < NC; c++) {
        load_tile<T, D, BC, kThreads>(tW1 + c * BC * D, w1, D, h0 + c * BC, H);
        load_tile<T, BC, D, kThreads>(tW2 + c * BC * D, w2 + h0 + c * BC, H, 0, D);
    }
    for (int i = tid; i < NC * BC / 8; i += kThreads) /* 16 bytes a thread; zeros without b1 */
        cp_async16(smem(sB1 + 8 * i), b1 ? b1 + h0 + 8 * i : w1, b1 != nullptr);
    if (tid < D / 8) /* b2 too: read from global memory at the end of each round, its wait held the round up */
        cp_async16(smem(sB2 + 8 * tid), b2 ? b2 + 8 * tid : w1, b2 != nullptr);
    load_tile<T, D, BR, 128>(sX, x, D, tile_of(0) * BR, M, wt);
    cp_commit();
    if (wt == 0) {
        mbar_init(full, 1);
        mbar_init(empty, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_arrive_relaxed(); /* the peer has started, and its barriers are set, before it is written */
    if constexpr (Spread) { /* a warpgroup may have no round: the block waits for the weights here */
        cp_wait_all();
        wg_proxy_fence();
        __syncthreads();
    }

    float acc[DT][4] = {}, s0[NT][4], s1[NT][4];
    uint32_t hA[BC / 16][4], hB[BC / 16][4]; /* a chunk's GELU, the second product's operand */

    /* s = x w1_c^T for chunk c into s (committed as one group) */
    auto first = [&](float (&s)[NT][4], const T *xt, int c) {
        wg_hold(flat<4 * NT>(s));
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            wgmma<T, BC>::ss(flat<4 * NT>(s), wg_desc(xt + swz<D, BR>(0, 2 * kk), 16, 1024),
                             wg_desc(tW1 + c * BC * D + swz<D, BC>(0, 2 * kk), 16, 1024), kk > 0);
        wg_commit();
    };
    /* bias in float, then the pairs (a lane's columns 2t, 2t + 1 of each n-tile, rows g and g + 8)
     * rounded to 16 bits and through GELU in that type, straight into the operand layout of the
     * second product: n-tiles 2kk, 2kk + 1 are its k-step kk */
    const uint32_t gk = lanes<T>::pack2(0.7978845608028654f, 0.7978845608028654f);
    const uint32_t gk3 = lanes<T>::pack2(0.7978845608028654f * 0.044715f, 0.7978845608028654f * 0.044715f);
    const uint32_t ghalf = lanes<T>::pack2(0.5f, 0.5f);
    uint32_t bq[NT]; /* b1's pairs of the chunk, read before its first product is waited for */
    auto load_b1 = [&](int c) {
#pragma unroll
        for (int n = 0; n < NT; n++)
            bq[n] = *reinterpret_cast<const uint32_t *>(sB1 + c * BC + n * 8 + 2 * t);
    };
    /* acc += gelu(s + b1) w2_c^T, a k-step of the second product at a time: the GELU of n-tiles
     * 2kk, 2kk + 1 (a lane's columns 2t, 2t + 1 of each, rows g and g + 8: bias in float, the pairs
     * rounded to 16 bits and through GELU in that type, straight into the operand layout of k-step
     * kk), then that k-step's product, issued before the next k-step's GELU: a warpgroup's issue
     * of wgmma waits until the tensor cores take it, so each k-step's product runs under the next
     * one's GELU instead of all four after the whole GELU. w2's chunk is [D outputs][64 hidden],
     * the hidden units contiguous (K-major). */
    auto act_second = [&](float (&s)[NT][4], uint32_t (&hf)[BC / 16][4], int c) {
        wg_hold(flat<4 * NT>(s));
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
#pragma unroll
            for (int n = 2 * kk; n < 2 * kk + 2; n++) {
                float bb0, bb1;
                lanes<T>::unpack2(bq[n], bb0, bb1);
                hf[kk][2 * (n & 1)] = gelu2<T>(lanes<T>::pack2(s[n][0] + bb0, s[n][1] + bb1), gk, gk3, ghalf);
                hf[kk][2 * (n & 1) + 1] = gelu2<T>(lanes<T>::pack2(s[n][2] + bb0, s[n][3] + bb1), gk, gk3, ghalf);
            }
            asm volatile("" : "+r"(hf[kk][0]), "+r"(hf[kk][1]), "+r"(hf[kk][2]), "+r"(hf[kk][3])::"memory");
            wg_fence();
            wgmma<T, D>::rs_k(flat<4 * DT>(acc), hf[kk], wg_desc(tW2 + c * BC * D + swz<BC, D>(0, 2 * kk), 16, 1024),
                              c > 0 || kk > 0); /* a round's sums start at its first chunk: acc is not zeroed */
        }
        wg_commit();
    };

    /* The exchange, at the end of a round (while the other warpgroup's products run: the turns
     * below). send, once the round's products are done: the peer's columns of the partial sums into
     * the warpgroup's exchange buffer there, a lane's elements at its own index (the same thread of
     * the peer holds the same rows and columns), 16 bytes a store; this block's columns plus b2 stay
     * in `mine`. finish, once the peer's part has landed: y for this block's columns. Ranks as
     * constants: acc is indexed by them, and registers cannot be indexed at run time. Round k's parts
     * complete phase k % 2 of `full`; the peer's arrival on `empty` after reading round k lets round
     * k + 1's go (mbarriers: the cluster's barrier is waited at the start and the end only). */
    uint32_t res[2][HT];
    float mine[HT][4]; /* this block's columns of a round's sums and b2 */
    /* The peer's part goes as bf16 pairs where T is bf16 (two n-tiles a 16-byte store: half the
     * bytes between the SMs, 0.25-0.47 us off a launch at every size on the H100, 2026-11-27,
     * bench/serving/JOURNAL.md; rounded as PyTorch rounds linear2's output before the residual),
     * as floats for f16 (whose range a partial sum might leave where the whole does not). */
    constexpr bool kPairs = std::is_same<T, __nv_bfloat16>::value;
    constexpr uint32_t kXchBytes = (kPairs ? HT / 2 : HT) * 128 * 16;
    auto send = [&](auto rank_c, const uint32_t *bias2) {
        constexpr int other = decltype(rank_c)::value ^ 1;
        const uint32_t theirs = peer_addr(smem(xch), (uint32_t)other);
        const uint32_t their_full = peer_addr(full, (uint32_t)other);
        if constexpr (kPairs) {
#pragma unroll
            for (int n = 0; n < HT; n += 2) {
                const float *a0 = acc[other * HT + n], *a1 = acc[other * HT + n + 1];
                st_async4(theirs + (uint32_t)(((n / 2) * 128 + wt) * 16), their_full, lanes<T>::pack2(a0[0], a0[1]),
                          lanes<T>::pack2(a0[2], a0[3]), lanes<T>::pack2(a1[0], a1[1]), lanes<T>::pack2(a1[2], a1[3]));
            }
        } else {
#pragma unroll
            for (int n = 0; n < HT; n++) {
                const float *a = acc[other * HT + n];
                st_async4(theirs + (uint32_t)((n * 128 + wt) * 16), their_full, __float_as_uint(a[0]),
                          __float_as_uint(a[1]), __float_as_uint(a[2]), __float_as_uint(a[3]));
            }
        }
        if (wt == 0)
            mbar_expect(full, kXchBytes);
        /* this block's columns with b2 */
#pragma unroll
        for (int n = 0; n < HT; n++) {
            float bb0, bb1;
            lanes<T>::unpack2(bias2[n], bb0, bb1);
            const float *a = acc[(other ^ 1) * HT + n];
            mine[n][0] = a[0] + bb0, mine[n][1] = a[1] + bb1, mine[n][2] = a[2] + bb0, mine[n][3] = a[3] + bb1;
        }
    };
    /* y = this block's columns of the round's sums and b2 + the peer's part + the residual. A quad's
     * lanes hold the same rows, each two columns of every n-tile: four n-tiles' pairs go through a
     * quad transpose to and from 16 bytes of one n-tile a lane, so the residual comes in and y goes
     * out in 16-byte accesses (four a thread instead of sixteen of 4 bytes, whose registers the
     * load-store unit held: in ncu, more than half of the exchange's stalls) */
    auto finish = [&](int k) {
        const int m0 = tile_of(k) * BR;
#pragma unroll
        for (int q = 0; q < HT / 4; q++) {
            float4 p[4]; /* the peer's part of n-tiles 4q .. 4q + 3 at this lane's elements */
            if constexpr (kPairs) {
#pragma unroll
                for (int h2 = 0; h2 < 2; h2++) {
                    const uint4 u = *reinterpret_cast<const uint4 *>(xch + ((2 * q + h2) * 128 + wt) * 4);
                    lanes<T>::unpack2(u.x, p[2 * h2].x, p[2 * h2].y);
                    lanes<T>::unpack2(u.y, p[2 * h2].z, p[2 * h2].w);
                    lanes<T>::unpack2(u.z, p[2 * h2 + 1].x, p[2 * h2 + 1].y);
                    lanes<T>::unpack2(u.w, p[2 * h2 + 1].z, p[2 * h2 + 1].w);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    p[j] = *reinterpret_cast<const float4 *>(xch + ((4 * q + j) * 128 + wt) * 4);
            }
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                uint32_t w[4] = {res[hr][4 * q], res[hr][4 * q + 1], res[hr][4 * q + 2], res[hr][4 * q + 3]};
                quad_transpose(w, t); /* the residual's pair of n-tile 4q + j at this lane's columns */
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float *a = mine[4 * q + j];
                    float lo, hi;
                    lanes<T>::unpack2(w[j], lo, hi);
                    w[j] = lanes<T>::pack2(a[2 * hr] + (hr ? p[j].z : p[j].x) + lo,
                                           a[2 * hr + 1] + (hr ? p[j].w : p[j].y) + hi);
                }
                quad_transpose(w, t); /* y's 16 bytes of n-tile 4q + t */
                const int m = m0 + r0 + g + hr * 8;
                if (m < M)
                    *reinterpret_cast<uint4 *>(y + (long long)m * D + ((int)rank * HT + 4 * q + t) * 8) =
                        make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
    };

    /* the residual of this block's columns of the round's rows, 16 bytes of n-tile 4q + t a load (as
     * they are in memory: finish transposes them), loaded once the round's products are issued and
     * read by finish at the end of the round */
    auto load_res = [&](int k, const T *xt) {
        const int m0 = tile_of(k) * BR;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int m = m0 + r0 + g + hr * 8;
#pragma unroll
            for (int q = 0; q < HT / 4; q++) {
                /* a residual that is x itself from the round's rows, still in shared memory (0.1-0.4 us
                 * off launches of 8,192 rows and more on the H100; bench/serving/JOURNAL.md) */
                const int col = (int)rank * HT + 4 * q + t; /* this 16 bytes' chunk of the row */
                const uint4 v = r == x       ? *reinterpret_cast<const uint4 *>(xt + swz<D, BR>(r0 + g + hr * 8, col))
                                : r && m < M ? __ldg(reinterpret_cast<const uint4 *>(r + (long long)m * D + col * 8))
                                             : make_uint4(0u, 0u, 0u, 0u);
                res[hr][4 * q] = v.x, res[hr][4 * q + 1] = v.y, res[hr][4 * q + 2] = v.z, res[hr][4 * q + 3] = v.w;
            }
        }
    };

    /* Turns: the two warpgroups of a block issue their chains of products one after the other
     * (wg 0's round k, wg 1's round k, wg 0's round k + 1, ...). A warpgroup waits for its turn
     * before its first product and gives it on before its last chunk's GELU (the other's first
     * products then fill the tensor cores' gap there), and ends its round (the exchange and y) while
     * the other's products run. When both ran their chains at once, the ends of their rounds
     * coincided and left the tensor cores idle: 64 x 512 tokens took 22.9 us in the kernel against
     * 20.5 now (H100, 2026-11-27, bench/serving/JOURNAL.md). Barrier 3 + w is warpgroup w's turn (both
     * warpgroups' threads count: one waits, the other arrives). A warpgroup gives the turn only to a
     * round the other has (the spread form's warpgroup 1 may have one round fewer). */
    auto turn_wait = [&](int k) {
        if (wg == 1 || k > 0)
            asm volatile("bar.sync %0, %1;\n" ::"r"(3 + wg), "n"(kThreads) : "memory");
    };
    auto turn_pass = [&](int k) {
        if (wg == 0 ? has_tile_of(k, 1) : has_tile_of(k + 1, 0))
            asm volatile("bar.arrive %0, %1;\n" ::"r"(4 - wg), "n"(kThreads) : "memory");
    };

    int k = 0;
    for (; has_tile(k); k++) {
        const int buf = k & 1;
        const T *const xt = sX + buf * BR * D;
        if (!Spread || k > 0) {
            cp_wait_all(); /* this tile's rows (and, the first time, the weights) are in */
            wg_proxy_fence();
            /* the weights came through every thread of the block, the rows through the warpgroup's */
            if (k == 0)
                __syncthreads();
            else
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
        }
        turn_wait(k);
        /* The chunks, s0 and hA for even ones, s1 and hB for odd ones: chunk c + 1's first product
         * is issued before chunk c's GELU, and chunk c - 1's second product may still run during it
         * (wait 2: chunk c's first product is done, and chunk c - 2's second, the last reader of the
         * registers c's GELU writes). No product is issued under a condition inside the chain
         * (ptxas then serializes them all): chunk 0 and the last one or two are their own code, and
         * a block has two chunks at least (H >= 256: with one, a branch of its own ran ptxas out of
         * registers, C7512). */
        int c = 1;
        first(s0, xt, 0);
        first(s1, xt, 1);
        load_b1(0);
        wg_wait_n<1>();
        act_second(s0, hA, 0);
        for (; c + 2 < NC; c += 2) {
            first(s0, xt, c + 1);
            load_b1(c);
            wg_wait_n<2>();
            act_second(s1, hB, c);
            first(s1, xt, c + 2);
            load_b1(c + 1);
            wg_wait_n<2>();
            act_second(s0, hA, c + 1);
        }
        if (c + 1 < NC) {
            first(s0, xt, c + 1);
            load_b1(c);
            wg_wait_n<2>();
            act_second(s1, hB, c);
            turn_pass(k); /* before the last chunk's GELU: the other's first products fill that gap */
            load_b1(c + 1);
            wg_wait_n<1>();
            act_second(s0, hA, c + 1);
        } else {
            turn_pass(k);
            load_b1(c);
            wg_wait_n<1>();
            act_second(s1, hB, c);
        }
        /* the next tile's rows into the other buffer (its last readers, the products of the round
         * before, are done) */
        if (has_tile(k + 1))
            load_tile<T, D, BR, 128>(sX + (buf ^ 1) * BR * D, x, D, tile_of(k + 1) * BR, M, wt);
        cp_commit();
        /* the residual, and this block's columns of b2 (a lane's two of each of its n-tiles, 16-bit
         * pairs), loaded here and not before the products: their registers went to hB */
        load_res(k, xt);
        uint32_t bias2[HT];
#pragma unroll
        for (int n = 0; n < HT; n++)
            bias2[n] = *reinterpret_cast<const uint32_t *>(sB2 + ((int)rank * HT + n) * 8 + 2 * t);
        wg_wait_n<0>();
        wg_hold(flat<4 * DT>(acc));

        if (k == 0)
            cluster_wait(); /* the peer has started */
        else
            mbar_wait(empty, (uint32_t)(k - 1) & 1u); /* and has read round k - 1 */
        if (rank == 0)
            send(std::integral_constant<int, 0>{}, bias2);
        else
            send(std::integral_constant<int, 1>{}, bias2);
        mbar_wait(full, (uint32_t)k & 1u); /* the peer's part of this block's columns is in */
        finish(k);
        if (has_tile(k + 1)) { /* no arrival after the last round: the peer may have exited */
            asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
            if (wt == 0)
                mbar_arrive_remote(peer_addr(empty, rank ^ 1u));
        }
    }
    /* a warpgroup that had no round still waits once at the cluster barrier it arrived at */
    if (Spread && k == 0)
        cluster_wait();
    cluster_arrive_relaxed();
    cluster_wait(); /* both blocks are done with each other's memory */
#endif
}

} // namespace

#define TK_MLP_ARGS(T)                                                                                      \
    const T *__restrict__ r, const T *__restrict__ x, const T *__restrict__ w1, const T *__restrict__ b1,   \
        const T *__restrict__ w2, const T *__restrict__ b2, T *__restrict__ y, int M, int H

/* clusters of two blocks of two warpgroups, one block an SM (its shared memory: TK_MLP_DYNAMIC) */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TK_MLP_CLUSTER __cluster_dims__(2, 1, 1)
#else
#define TK_MLP_CLUSTER
#endif
#define TK_MLP_FUSED(name, T, D, Spread)                                                                    \
    TK_KERNEL void TK_MLP_CLUSTER __launch_bounds__(kThreads, 1) name(TK_MLP_ARGS(T))                       \
    {                                                                                                       \
        mlp_fused<T, D, Spread>(r, x, w1, b1, w2, b2, y, M, H);                                             \
    }
TK_MLP_FUSED(tk_mlp_fused_f16_d64, __half, 64, false)
TK_MLP_FUSED(tk_mlp_fused_f16_d128, __half, 128, false)
TK_MLP_FUSED(tk_mlp_fused_bf16_d64, __nv_bfloat16, 64, false)
TK_MLP_FUSED(tk_mlp_fused_bf16_d128, __nv_bfloat16, 128, false)
TK_MLP_FUSED(tk_mlp_spread_f16_d64, __half, 64, true)
TK_MLP_FUSED(tk_mlp_spread_f16_d128, __half, 128, true)
TK_MLP_FUSED(tk_mlp_spread_bf16_d64, __nv_bfloat16, 64, true)
TK_MLP_FUSED(tk_mlp_spread_bf16_d128, __nv_bfloat16, 128, true)
