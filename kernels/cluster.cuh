/* Thread-block clusters and mbarriers (sm_90): a block's rank in its cluster, the cluster's
 * barrier, another block's shared memory (distributed shared memory), 16-byte stores into it that
 * count against an mbarrier there, and the mbarrier's init, expected bytes, wait and remote
 * arrival. What mlp.cu's two blocks a cluster use, and bench/kernels/experiments/weight_load.cu,
 * which times mlp.cu's prologue with them. Device code, declared where the kernels that use it are
 * compiled (-arch sm_90a) and in the host pass. */
#ifndef TK_KERNELS_CLUSTER_CUH
#define TK_KERNELS_CLUSTER_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
namespace {

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* the cluster's barrier in two halves: an arrival that orders nothing (relaxed), a wait that acquires */
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
/* the address of the same shared-memory location in block `rank` of the cluster */
__device__ __forceinline__ uint32_t peer_addr(uint32_t local, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(rank));
    return r;
}
/* 16 bytes into another block's shared memory that count, when they land, against that block's
 * mbarrier `bar` (st.async); an mbarrier's init, a block's arrival that expects so many bytes, a
 * wait for a phase, and an arrival on another block's mbarrier (that a buffer was read, in mlp.cu) */
__device__ __forceinline__ void st_async4(uint32_t addr, uint32_t bar, uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase)
{
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" ::"r"(bar),
                 "r"(phase)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar_in_cluster)
{
    asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar_in_cluster) : "memory");
}

} // namespace
#endif

#endif
