/* wgmma (Hopper's warpgroup tensor-core instructions, sm_90a) for the attention and MLP kernels:
 * the m64nNk16 forms with float accumulators that attention.cu and mlp.cu use (N 32, 64, 128), f16 and
 * bf16, and the shared-memory descriptors and fences around them. The operand lists are mechanical: d[4i + j]
 * of a lane is the same element as in mma.sync m16n8 (n-tile i, part j) for the warp's 16 rows of
 * the 64. Only compiled where __CUDA_ARCH_FEAT_SM90_ALL is defined (-arch sm_90a). */
#ifndef TK_KERNELS_WGMMA_CUH
#define TK_KERNELS_WGMMA_CUH

#include <stdint.h>
#include <tk/kernel.h>

namespace {

/* A shared-memory operand of 128-byte rows swizzled in 1024-byte atoms (chunk ^ row % 8): start,
 * leading byte offset (K-major: unused; MN-major: from one 64-element block of N to the next),
 * stride byte offset (from one 8-row group to the next). */
__device__ __forceinline__ uint64_t wg_desc(const void *p, uint32_t lbo, uint32_t sbo)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFFu) >> 4) | (uint64_t)((lbo >> 4) & 0x3FFFu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFFu) << 32 | 1ull << 62;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/* shared memory written by threads (cp.async, st.shared) made visible to wgmma's reads */
__device__ __forceinline__ void wg_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* after wg_wait: the accumulators are read only from here on */
template <int N>
__device__ __forceinline__ void wg_hold(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

template <typename T, int N> struct wgmma;

/* The accumulators of m64nNk16, R = N / 2 a lane: their registers in the instruction's text
 * (TK__WG_REGS<R>) and as the asm's in-out operands (TK__WG_ACC<R>, numbered from 0). */
#define TK__WG_REGS16                                           \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
#define TK__WG_ACC16                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
    "+f"(d[15])
#define TK__WG_REGS32                                                    \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"            \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
#define TK__WG_ACC32                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
    "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
    "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
    "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TK__WG_REGS64                                                    \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"            \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"   \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"   \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
#define TK__WG_ACC64                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
    "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
    "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
    "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),      \
    "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),      \
    "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),      \
    "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
    "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/* One specialization a dtype (TY: its PTX name) for N columns. */
#define TK__WGMMA_N32(T, TY)                                                                              \
    template <> struct wgmma<T, 32> {                                                                     \
        /* d = a b, or d += a b where accumulate; a and b K-major in shared memory */                     \
        static __device__ __forceinline__ void ss(float (&d)[16], uint64_t a, uint64_t b, int accumulate) \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                     \
                         "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " TK__WG_REGS16        \
                         "%16, %17, p, 1, 1, 0, 0;\n}\n"                                                  \
                         : TK__WG_ACC16                                                                   \
                         : "l"(a), "l"(b), "r"(accumulate));                                              \
        }                                                                                                 \
    };

#define TK__WGMMA_N64(T, TY)                                                                              \
    template <> struct wgmma<T, 64> {                                                                     \
        /* d = a b, or d += a b where accumulate; a and b K-major in shared memory */                     \
        static __device__ __forceinline__ void ss(float (&d)[32], uint64_t a, uint64_t b, int accumulate) \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                     \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " TK__WG_REGS32        \
                         "%32, %33, p, 1, 1, 0, 0;\n}\n"                                                  \
                         : TK__WG_ACC32                                                                   \
                         : "l"(a), "l"(b), "r"(accumulate));                                              \
        }                                                                                                 \
        /* d += a b; a in registers (the warp's 16 rows, m16n8k16's operand layout), b MN-major           \
         * (transposed by the instruction) in shared memory */                                            \
        static __device__ __forceinline__ void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b)     \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " TK__WG_REGS32        \
                         "{%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"                                       \
                         : TK__WG_ACC32                                                                   \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                           \
        }                                                                                                 \
        /* the same with b K-major in shared memory (as ss takes it), d = a b unless accumulate */          \
        static __device__ __forceinline__ void rs_k(float (&d)[32], const uint32_t (&a)[4], uint64_t b,   \
                                                    int accumulate)                                       \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                     \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " TK__WG_REGS32       \
                         "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"                                       \
                         : TK__WG_ACC32                                                                   \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));          \
        }                                                                                                 \
    };

#define TK__WGMMA_N128(T, TY)                                                                             \
    template <> struct wgmma<T, 128> {                                                                    \
        /* d = a b, or d += a b where accumulate; a and b K-major in shared memory */                     \
        static __device__ __forceinline__ void ss(float (&d)[64], uint64_t a, uint64_t b, int accumulate) \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                     \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " TK__WG_REGS64       \
                         "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                  \
                         : TK__WG_ACC64                                                                   \
                         : "l"(a), "l"(b), "r"(accumulate));                                              \
        }                                                                                                 \
        /* d += a b; a in registers (the warp's 16 rows, m16n8k16's operand layout), b MN-major           \
         * (transposed by the instruction) in shared memory */                                            \
        static __device__ __forceinline__ void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b)     \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " TK__WG_REGS64       \
                         "{%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"                                       \
                         : TK__WG_ACC64                                                                   \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                           \
        }                                                                                                 \
        /* the same with b K-major in shared memory (as ss takes it), d = a b unless accumulate */          \
        static __device__ __forceinline__ void rs_k(float (&d)[64], const uint32_t (&a)[4], uint64_t b,   \
                                                    int accumulate)                                       \
        {                                                                                                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                     \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " TK__WG_REGS64       \
                         "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"                                       \
                         : TK__WG_ACC64                                                                   \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));          \
        }                                                                                                 \
    };

TK__WGMMA_N32(__nv_bfloat16, "bf16")
TK__WGMMA_N32(__half, "f16")
TK__WGMMA_N64(__nv_bfloat16, "bf16")
TK__WGMMA_N64(__half, "f16")
TK__WGMMA_N128(__nv_bfloat16, "bf16")
TK__WGMMA_N128(__half, "f16")

} // namespace

#endif
