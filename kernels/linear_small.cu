/* tk::linear's own kernel for few rows (kernels/linear.c picks it: linear_gpu):
 *   y = x w^T + b       x [M, K], w [N, K], b [N] (optional), y [M, N], f16 or bf16
 * K and N multiples of 64, contiguous rows, 16-byte aligned tensors.
 *
 * Why: a call of cublasLtMatmul spends 6 to 10 us on the host (bench/serving/JOURNAL.md, run96: 9.8
 * us median per eager call, a whole eager MLP of three nodes 35 us), where a launch of this kernel
 * spends what any launch does; sessions replay graphs, which do not pay it, but the first call of
 * a size never seen runs eagerly and does (the MLP's first calls: 43 to 46 us median on cuBLASLt, 24
 * to 25 with this kernel, run98). On the GPU it is within a microsecond of cuBLASLt's kernels for
 * the MLP's layers: faster at 1 to 16 rows, slower by up to 0.6 us at 100 (hot replays), the
 * bound MLP's random batch stream 14.1 / 15.2 us against 13.6 / 13.5 (run98). The fused forms
 * (tk::_linear_gelu, tk::_linear_add) stay on cuBLASLt: tokmlp's two at 256 rows took 8.7 us of GPU
 * time there against 11.0 in this kernel with the same epilogues (run97).
 *
 * A block computes a 64 x 64 tile of y with four warps (16 rows each, all 64 columns: mma.sync
 * m16n8k16 from ldmatrix fragments, f32 accumulators), walking K in steps of 64 with the next step's
 * tiles of x and w loaded (cp.async, swizzled) while this one's products run. sm_80 and later. */
#include <stdint.h>
#include <tk/kernel.h>

#include "lanes.cuh"
#include "tiles.cuh"

namespace {

constexpr int BM = 64, BN = 64, BK = 64, kThreads = 128;

template <typename T>
__device__ __forceinline__ void linear_small(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                                             T *__restrict__ y, int M, int N, int K)
{
    __shared__ __align__(128) T sX[2][BM * BK];
    __shared__ __align__(128) T sW[2][BN * BK];
    const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN, r0 = warp * 16;
    const int steps = K / BK;

    auto load = [&](int buf, int k0) {
        load_tile<T, BK, BM, kThreads>(sX[buf], x + k0, K, m0, M); /* rows past M: zeros */
        load_tile<T, BK, BN, kThreads>(sW[buf], w + k0, K, n0, N);
        cp_commit();
    };

    float acc[BN / 8][4] = {};
    load(0, 0);
    for (int s = 0; s < steps; s++) {
        const int buf = s & 1;
        if (s + 1 < steps) {
            load(buf ^ 1, (s + 1) * BK); /* its last readers, step s - 1's products, are done */
            cp_wait_newest_pending();
        } else {
            cp_wait_all();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t a[4];
            ldsm4(a, smem(sX[buf] + swz<BK, BM>(r0 + (lane & 15), 2 * kk + (lane >> 4))));
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                uint32_t bw[4];
                const int n = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                ldsm4(bw, smem(sW[buf] + swz<BK, BN>(n, 2 * kk + ((lane >> 3) & 1))));
                mma16816<T>(acc[2 * np], a, bw[0], bw[1]);
                mma16816<T>(acc[2 * np + 1], a, bw[2], bw[3]);
            }
        }
        __syncthreads(); /* this buffer is read: the load two steps on may overwrite it */
    }

    /* a lane's elements: rows g and g + 8 of its warp's 16, columns 2t and 2t + 1 of each n-tile */
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++) {
        const int n = n0 + nt * 8 + 2 * t;
        float b0 = 0.0f, b1 = 0.0f;
        if (b)
            lanes<T>::unpack2(*reinterpret_cast<const uint32_t *>(b + n), b0, b1);
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int m = m0 + r0 + g + 8 * hr;
            if (m >= M)
                continue;
            *reinterpret_cast<uint32_t *>(y + (long long)m * N + n) =
                lanes<T>::pack2(acc[nt][2 * hr] + b0, acc[nt][2 * hr + 1] + b1);
        }
    }
}

} // namespace

/* grid (N / 64, ceil(M / 64)), 128 threads */
#define TK_LINEAR_SMALL(name, T)                                                                            \
    TK_KERNEL void __launch_bounds__(kThreads) name(const T *__restrict__ x, const T *__restrict__ w,       \
                                                     const T *__restrict__ b, T *__restrict__ y, int M, int N, \
                                                     int K)                                                  \
    {                                                                                                       \
        linear_small<T>(x, w, b, y, M, N, K);                                                               \
    }
TK_LINEAR_SMALL(tk_linear_small_f16, __half)
TK_LINEAR_SMALL(tk_linear_small_bf16, __nv_bfloat16)
