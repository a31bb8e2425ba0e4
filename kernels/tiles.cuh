/* What the tensor-core kernels share (attention.cu, mlp.cu): cp.async copies into tiles of 16-bit
 * values whose 16-byte chunks are swizzled, ldmatrix and mma.sync m16n8k16 for sm_80 and later, and
 * which product form the cubin uses (wgmma on sm_90a, wgmma.cuh). Device code only. */
#ifndef TK_KERNELS_TILES_CUH
#define TK_KERNELS_TILES_CUH

#include <stdint.h>
#include <tk/kernel.h>

namespace {

__device__ __forceinline__ uint32_t smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared without a register trip; zeros where !valid (nothing is read then) */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_newest_pending() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* four 8x8 matrices of 16-bit values; lanes 8i..8i+7 name the rows of matrix i */
[[maybe_unused]] __device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
[[maybe_unused]] __device__ __forceinline__ void ldsm4_t(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* c += a b: a 16x16 (row), b 16x8 (col), c 16x8 float */
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
[[maybe_unused]] __device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                                         uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
[[maybe_unused]] __device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                                  uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Element offset of (row, 16-byte chunk) in a tile of ROWS rows of D 16-bit values: the tile is
 * D / 64 blocks of 64 columns one after the other, each ROWS rows of 128 bytes whose chunks are
 * swizzled (chunk ^ row % 8). What ldmatrix reads without bank conflicts and wgmma's 128-byte
 * swizzle mode describes. */
template <int D, int ROWS>
__device__ __forceinline__ int swz(int row, int chunk)
{
    return (chunk >> 3) * ROWS * 64 + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

/* rows j0 .. j0 + ROWS - 1 of src (row pitch stride) into a swizzled tile, zeros from row n on, by
 * NTH threads (tid: this one's index among them; the block's threads by default). A thread copies
 * chunk c of rows r, r + STEP, ...: one address computed, then constant steps in both memories
 * (STEP a multiple of 8 rows keeps the swizzle of its chunk). */
template <typename T, int D, int ROWS, int NTH>
__device__ __forceinline__ void load_tile(T *dst, const T *src, long long stride, int j0, int n,
                                          int tid = (int)threadIdx.x)
{
    constexpr int CPR = D / 8, STEP = NTH / CPR;
    static_assert(NTH % CPR == 0 && ROWS % STEP == 0 && STEP % 8 == 0, "a thread's chunks not 8 rows apart");
    const int r = (int)((unsigned)tid / CPR), c = (int)((unsigned)tid % CPR); /* unsigned: shifts, as threadIdx.x */
    const T *g = src + (long long)(j0 + r) * stride + c * 8;
    const long long gstep = (long long)STEP * stride;
    const uint32_t s0 = smem(dst + swz<D, ROWS>(r, c));
    const bool whole = j0 + ROWS <= n;
#pragma unroll
    for (int it = 0; it < ROWS / STEP; it++) {
        bool ok = whole || j0 + r + it * STEP < n;
        cp_async16(s0 + it * (STEP * 64 * (uint32_t)sizeof(T)), ok ? g + it * gstep : src, ok);
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kWgmma = true; /* sm_90a: the products by wgmma, a warpgroup's 64 rows at once */
#else
constexpr bool kWgmma = false;
#endif

/* a [N / 4][4] accumulator array as the flat [N] of wgmma's operand list (the same order) */
template <int N>
__device__ __forceinline__ float (&flat(float (&a)[N / 4][4]))[N]
{
    return *reinterpret_cast<float(*)[N]>(&a[0][0]);
}

} // namespace

#endif
