/* weight_load: how long a launch of tk::_mlp's shape spends loading its weights before the first
 * product, and whether TMA multicast over larger clusters would shorten it. Not tkexport code: an
 * experiment on the H100 itself (bench/serving/JOURNAL.md, 2026-11-27, fifteenth session). Each block
 * (one an SM: 161 KiB of dynamic shared memory, 256 threads) loads one half of a 256 KiB weight
 * buffer (its cluster rank's 128 KiB: tk::_mlp's block at D 128, H 512) and a 32 KiB tile of x, as
 * the kernel's prologue does, and records %globaltimer at its start and once everything landed:
 *   cp.async 16 B     the kernel's instruction (kernels/tiles.cuh's cp_async16), clusters of two
 *   bulk              cp.async.bulk, 16 KiB a copy from one thread, counted by an mbarrier
 *   bulk multicast    clusters of four, ranks 0 and 2 (1 and 3) holding the same half: each loads
 *                     half of it from L2 into both blocks' shared memory (ctaMask), halving the
 *                     L2 reads
 * Printed per form: the median over 20 launches of the span from the first block's start to the
 * last block's end, and of a block's own time. The copies, clusters and mbarriers are the kernels'
own helpers (kernels/tiles.cuh, kernels/cluster.cuh). Built by hand, run on an H100:
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -Ikernels -o weight_load \
 *       bench/kernels/experiments/weight_load.cu && ./weight_load
 */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

#include "cluster.cuh"
#include "tiles.cuh"

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e = (x);                                                                                           \
        if (e != cudaSuccess) {                                                                                        \
            printf("%s: %s\n", #x, cudaGetErrorString(e));                                                             \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)
extern __shared__ __align__(1024) unsigned char sm[];
__device__ __forceinline__ uint64_t gt()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void csync()
{
    cluster_arrive_relaxed();
    cluster_wait();
}
constexpr int WB = 128 * 1024, XB = 32 * 1024;
/* MODE 0: clusters of 2, cp.async; 1: clusters of 2, bulk; 2: clusters of 4,
 * bulk multicast; 3: clusters of 4, bulk; 4: clusters of 2, cp.async of half
 * the weights */
template <int MODE>
__global__ void __launch_bounds__(256) k(const char *w, const char *x, unsigned long long *out, int wbytes)
{
    uint64_t t0 = gt();
    const uint32_t r = cluster_rank();
    const int tid = threadIdx.x;
    __shared__ __align__(8) uint64_t bar;
    const uint32_t b = smem(&bar);
    const char *xs = x + (size_t)(blockIdx.x % 256) * XB;
    if (MODE == 0 || MODE == 4) {
        const int wb = MODE == 4 ? wbytes / 2 : wbytes;
        const char *ws = w + (size_t)(r & 1) * wbytes;
        for (int i = tid * 16; i < wb; i += 256 * 16)
            cp_async16(smem(sm + i), ws + i, true);
        for (int i = tid * 16; i < XB; i += 256 * 16)
            cp_async16(smem(sm + WB + i), xs + i, true);
        cp_commit();
        cp_wait_all();
        __syncthreads();
    } else {
        if (tid == 0) {
            mbar_init(b, 1);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        csync();
        if (tid == 0) {
            mbar_expect(b, (uint32_t)(wbytes + XB));
            constexpr int P = 16384;
            if (MODE == 2) {
                const int h = r & 1, part = r >> 1;
                const uint16_t mask = h ? 0xA : 0x5;
                const char *ws = w + (size_t)h * wbytes + (size_t)part * (wbytes / 2);
                for (int o = 0; o < wbytes / 2; o += P)
                    asm volatile(
                        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
                        "bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(smem(sm + part * (wbytes / 2) + o)),
                        "l"(ws + o), "r"(P), "r"(b), "h"(mask)
                        : "memory");
            } else {
                const char *ws = w + (size_t)(r & 1) * wbytes;
                for (int o = 0; o < wbytes; o += P)
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
                                 "bytes [%0], [%1], %2, [%3];" ::"r"(smem(sm + o)),
                                 "l"(ws + o), "r"(P), "r"(b)
                                 : "memory");
            }
            for (int o = 0; o < XB; o += P)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_"
                             "tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem(sm + WB + o)),
                             "l"(xs + o), "r"(P), "r"(b)
                             : "memory");
        }
        mbar_wait(b, 0);
        __syncthreads();
    }
    uint64_t t1 = gt();
    /* a byte of shared memory read back, so that nothing is optimized away */
    if (tid == 0) {
        out[blockIdx.x * 3] = t0;
        out[blockIdx.x * 3 + 1] = t1;
        out[blockIdx.x * 3 + 2] = sm[r * 7 + 5];
    }
    csync(); /* a multicast's destination must not exit before its copies land */
}
template <int MODE>
int run(int csize, int grid, const char *w, const char *x, unsigned long long *d, int reps, const char *name)
{
    auto f = k<MODE>;
    const int smb = WB + XB + 1024;
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smb));
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = csize;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = smb;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int maxc = 0;
    cfg.gridDim = dim3(csize * 64);
    CK(cudaOccupancyMaxActiveClusters(&maxc, f, &cfg));
    if (grid <= 0)
        grid = maxc * csize;
    cfg.gridDim = dim3(grid);
    std::vector<double> span, per;
    std::vector<unsigned long long> h(grid * 3);
    for (int i = 0; i < reps; i++) {
        CK(cudaLaunchKernelEx(&cfg, f, w, x, d, WB));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h.data(), d, grid * 3 * 8, cudaMemcpyDeviceToHost));
        unsigned long long a = ~0ull, z = 0;
        std::vector<double> p;
        for (int j = 0; j < grid; j++) {
            a = std::min(a, h[3 * j]);
            z = std::max(z, h[3 * j + 1]);
            p.push_back((h[3 * j + 1] - h[3 * j]) / 1e3);
        }
        std::sort(p.begin(), p.end());
        if (i >= 3) {
            span.push_back((z - a) / 1e3);
            per.push_back(p[p.size() / 2]);
        }
    }
    std::sort(span.begin(), span.end());
    std::sort(per.begin(), per.end());
    printf("%-34s cluster %d grid %3d (max clusters %d): span median %.3f us "
           "(min %.3f), a block's median %.3f us\n",
           name, csize, grid, maxc, span[span.size() / 2], span[0], per[per.size() / 2]);
    return 0;
}
int main()
{
    char *w, *x;
    unsigned long long *d;
    CK(cudaMalloc(&w, 2 * WB));
    CK(cudaMalloc(&x, 256 * XB));
    CK(cudaMalloc(&d, 1024 * 3 * 8));
    CK(cudaMemset(w, 1, 2 * WB));
    CK(cudaMemset(x, 2, 256 * XB));
    for (int round = 0; round < 2; round++) {
        run<0>(2, 132, w, x, d, 23, "cp.async 16 B");
        run<4>(2, 132, w, x, d, 23, "cp.async 16 B, half the weights");
        run<1>(2, 132, w, x, d, 23, "bulk");
        run<3>(4, 0, w, x, d, 23, "bulk, cluster of 4");
        run<2>(4, 0, w, x, d, 23, "bulk multicast, cluster of 4");
        run<0>(2, 2, w, x, d, 23, "cp.async 16 B, one cluster");
        run<1>(2, 2, w, x, d, 23, "bulk, one cluster");
        run<0>(2, 0, w, x, d, 23, "cp.async 16 B, max clusters");
    }
    return 0;
}
