/* The row gather of the built-in op tk::embedding: y[i, :] = weight[ids[i], :] for f32, f16 and
 * bf16 weights and i32 or i64 ids (tk_embedding_<dtype>_<idtype>); the CPU reference is in
 * gather_ref.c. Each thread moves one 16-byte vector of a row when rows are whole vectors and the
 * tensors 16-byte aligned, else one element; the grid strides over (row, vector) pairs. An id
 * outside [0, rows) writes a row of zeros: a kernel cannot fail the call without a sync, so the
 * op documents it (the CPU fallback refuses such ids). */
#include <stdint.h>
#include <tk/kernel.h>

#include "lanes.cuh"

namespace {

template <typename T, typename I>
__device__ __forceinline__ void embedding(const T *__restrict__ w, const I *__restrict__ ids, T *__restrict__ y,
                                          long long n, long long rows, long long cols)
{
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x, nth = (long long)gridDim.x * blockDim.x;
    constexpr int V = lanes<T>::n;
    if (cols % V == 0 && aligned16(w) && aligned16(y)) {
        const long long vpr = cols / V;
        const uint4 *wv = reinterpret_cast<const uint4 *>(w);
        uint4 *yv = reinterpret_cast<uint4 *>(y);
        for (long long t = tid; t < n * vpr; t += nth) {
            long long i = t / vpr, c = t % vpr, id = (long long)__ldg(ids + i);
            yv[t] = id >= 0 && id < rows ? __ldg(wv + id * vpr + c) : make_uint4(0, 0, 0, 0);
        }
        return;
    }
    for (long long t = tid; t < n * cols; t += nth) {
        long long i = t / cols, c = t % cols, id = (long long)__ldg(ids + i);
        y[t] = id >= 0 && id < rows ? w[id * cols + c] : lanes<T>::from_float(0.0f);
    }
}

} // namespace

#define TK_EMBEDDING(sfx, T, isfx, I)                                                                   \
    TK_KERNEL void __launch_bounds__(256) tk_embedding_##sfx##_##isfx(                                  \
        const T *__restrict__ w, const I *__restrict__ ids, T *__restrict__ y, long long n, long long rows, \
        long long cols)                                                                                 \
    {                                                                                                   \
        embedding(w, ids, y, n, rows, cols);                                                            \
    }

TK_EMBEDDING(f32, float, i32, int32_t)
TK_EMBEDDING(f32, float, i64, long long)
TK_EMBEDDING(f16, __half, i32, int32_t)
TK_EMBEDDING(f16, __half, i64, long long)
TK_EMBEDDING(bf16, __nv_bfloat16, i32, int32_t)
TK_EMBEDDING(bf16, __nv_bfloat16, i64, long long)
