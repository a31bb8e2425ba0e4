/* The copies behind the layout built-ins (layout_ops.c).
 *
 * tk_strided_copy_b2, _b4, _b8 (permute, transpose; any dtype of that element size): y, contiguous
 * of `rank` dims, gets y[i0, ..., ir] = x[sum_d i_d * stride[d]]. One element a thread, the grid
 * striding, the index decomposed dim by dim (a division per dim): it moved GPT-2's narrows at
 * 51 GB/s on an H200, so a permute that keeps the last dim contiguous takes tk_strided_rows_v16
 * (16-byte vectors, one decomposition a vector), and narrow and cat take tk_copy2d_* (rows of a
 * 2-D view). A transpose of the last dim reads across rows and stays on the element kernel; a
 * contiguous reshape does not come here (a plain device copy). The CPU reference of the strided
 * copy is tk_ref_strided_copy in layout_ref.c. */
#include <stdint.h>
#include <tk/kernel.h>

namespace {

template <typename E>
__device__ __forceinline__ void strided_copy(const E *__restrict__ x, E *__restrict__ y, long long n, int rank,
                                             const long long (&dims)[8], const long long (&st)[8])
{
    const long long nth = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += nth) {
        long long rest = t, src = 0;
        for (int d = rank - 1; d >= 0; d--) {
            long long i = rest % dims[d];
            rest /= dims[d];
            src += i * st[d];
        }
        y[t] = x[src];
    }
}

/* Rows whose last dim is contiguous in x (permutes that keep the last dim), in 16-byte
 * vectors: y's rows are nvec vectors each; row r of y starts in x at the sum over the outer
 * dims of index * stride (bytes, all multiples of 16). One vector a thread, the grid striding. */
__device__ __forceinline__ void strided_rows(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nrows,
                                             long long nvec, int outer, const long long (&dims)[7],
                                             const long long (&st)[7])
{
    const long long nth = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < nrows * nvec; t += nth) {
        long long r = t / nvec, c = t % nvec, rest = r, src = 0;
        for (int d = outer - 1; d >= 0; d--) {
            src += (rest % dims[d]) * st[d];
            rest /= dims[d];
        }
        y[t] = __ldg(x + src / 16 + c);
    }
}

/* nrows rows of width units from x (row pitch sp, first at so) to y (pitch dp, first at do_),
 * units of U; one unit a thread, the grid striding. */
template <typename U>
__device__ __forceinline__ void copy2d(const U *__restrict__ x, U *__restrict__ y, long long nrows, long long width,
                                       long long sp, long long so, long long dp, long long do_)
{
    const long long nth = (long long)gridDim.x * blockDim.x, n = nrows * width;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += nth) {
        long long r = t / width, c = t - r * width;
        y[do_ + r * dp + c] = __ldg(x + so + r * sp + c);
    }
}

/* Bytes b .. b + 15 of the 32 bytes lo:hi (b < 16), by funnel shifts of whole words. */
__device__ __forceinline__ uint4 bytes_at(uint4 lo, uint4 hi, int b)
{
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int q = b >> 2;
    const unsigned sh = (unsigned)(b & 3) * 8;
    uint32_t o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) { /* static indices: q picks among registers, no local memory */
        uint32_t a = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2] : w[i + 3];
        uint32_t c = q == 0 ? w[i + 1] : q == 1 ? w[i + 2] : q == 2 ? w[i + 3] : w[i + 4];
        o[i] = __funnelshift_r(a, c, sh);
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

/* copy2d into a dense y (pitch width, from its start) that is 16-byte aligned, from any x: each
 * thread writes one 16-byte vector of y. Where the vector's elements lie in one row of x and x is
 * aligned, they are cut from the two aligned vectors of x around them (bytes_at); else (a vector
 * across rows, x unaligned) gathered one by one. One division a vector. narrow's case when its
 * rows are not whole vectors (the 50257 columns of GPT-2's logits cut from 50304). */
template <typename E>
__device__ __forceinline__ void copy2d_dense(const E *__restrict__ x, E *__restrict__ y, long long n, long long width,
                                             long long sp, long long so)
{
    constexpr int VE = 16 / sizeof(E);
    const long long nth = (long long)gridDim.x * blockDim.x;
    const bool xa = ((uintptr_t)x & 15u) == 0;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t * VE < n; t += nth) {
        long long f = t * VE, r = f / width, c = f - r * width;
        if (xa && f + VE <= n && c + VE <= width) {
            long long si = so + r * sp + c, a = si & ~(long long)(VE - 1);
            const uint4 *pa = reinterpret_cast<const uint4 *>(x + a);
            uint4 lo = __ldg(pa), hi = si == a ? lo : __ldg(pa + 1);
            *reinterpret_cast<uint4 *>(y + f) = bytes_at(lo, hi, (int)(si - a) * (int)sizeof(E));
            continue;
        }
        E v[VE];
#pragma unroll
        for (int e = 0; e < VE; e++) {
            v[e] = f + e < n ? __ldg(x + so + r * sp + c) : E(0);
            if (++c == width) {
                c = 0;
                r++;
            }
        }
        if (f + VE <= n) {
            *reinterpret_cast<uint4 *>(y + f) = *reinterpret_cast<const uint4 *>(v);
        } else {
            for (int e = 0; f + e < n; e++)
                y[f + e] = v[e];
        }
    }
}

} // namespace

/* tk_copy2d_dense_<unit>: narrow into a dense output whose rows are not whole 16-byte vectors */
#define TK_COPY2D_DENSE(sfx, E)                                                                             \
    TK_KERNEL void __launch_bounds__(256) tk_copy2d_dense_##sfx(const E *__restrict__ x, E *__restrict__ y,  \
                                                                long long n, long long width, long long sp,  \
                                                                long long so)                                \
    {                                                                                                       \
        copy2d_dense(x, y, n, width, sp, so);                                                               \
    }
TK_COPY2D_DENSE(b2, unsigned short)
TK_COPY2D_DENSE(b4, unsigned int)
TK_COPY2D_DENSE(b8, unsigned long long)

/* tk_copy2d_<unit>: narrow (on any dim) and cat: the rows of a 2-D view copied into another's */
#define TK_COPY2D(sfx, U)                                                                                   \
    TK_KERNEL void __launch_bounds__(256) tk_copy2d_##sfx(const U *__restrict__ x, U *__restrict__ y,        \
                                                          long long nrows, long long width, long long sp,    \
                                                          long long so, long long dp, long long do_)         \
    {                                                                                                       \
        copy2d(x, y, nrows, width, sp, so, dp, do_);                                                        \
    }
TK_COPY2D(b2, unsigned short)
TK_COPY2D(b4, unsigned int)
TK_COPY2D(b8, unsigned long long)
TK_COPY2D(v16, uint4)

TK_KERNEL void __launch_bounds__(256)
tk_strided_rows_v16(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nrows, long long nvec, int outer,
                    long long d0, long long d1, long long d2, long long d3, long long d4, long long d5, long long d6,
                    long long s0, long long s1, long long s2, long long s3, long long s4, long long s5, long long s6)
{
    const long long dims[7] = {d0, d1, d2, d3, d4, d5, d6}, st[7] = {s0, s1, s2, s3, s4, s5, s6};
    strided_rows(x, y, nrows, nvec, outer, dims, st);
}

#define TK_STRIDED_COPY(sfx, E)                                                                              \
    TK_KERNEL void __launch_bounds__(256) tk_strided_copy_##sfx(                                             \
        const E *__restrict__ x, E *__restrict__ y, long long n, int rank, long long d0, long long d1,       \
        long long d2, long long d3, long long d4, long long d5, long long d6, long long d7, long long s0,     \
        long long s1, long long s2, long long s3, long long s4, long long s5, long long s6, long long s7)     \
    {                                                                                                        \
        const long long dims[8] = {d0, d1, d2, d3, d4, d5, d6, d7}, st[8] = {s0, s1, s2, s3, s4, s5, s6, s7}; \
        strided_copy(x, y, n, rank, dims, st);                                                              \
    }

TK_STRIDED_COPY(b2, uint16_t)
TK_STRIDED_COPY(b4, uint32_t)
TK_STRIDED_COPY(b8, unsigned long long)
