/* 16-byte vectors of f32, f16 and bf16 as float lanes, for the built-in kernels (elementwise.cu,
 * norm.cu): lanes<T>::n values a uint4, unpacked to float exactly and packed back with
 * round-to-nearest-even, and single elements likewise (load1 through the read-only path). */
#ifndef TK_KERNELS_LANES_CUH
#define TK_KERNELS_LANES_CUH

#include <stdint.h>
#include <string.h>
#include <tk/kernel.h>

namespace {

template <typename D, typename S>
__device__ __forceinline__ D bit_cast(const S &s)
{
    static_assert(sizeof(D) == sizeof(S), "bit_cast between types of different sizes");
    D d;
    memcpy(&d, &s, sizeof d);
    return d;
}

/* How 16 bytes of T become float lanes and back, and single elements likewise. */
template <typename T> struct lanes;

template <> struct lanes<float> {
    static constexpr int n = 4;
    static __device__ __forceinline__ void unpack(uint4 q, float (&v)[n])
    {
        v[0] = __uint_as_float(q.x); v[1] = __uint_as_float(q.y);
        v[2] = __uint_as_float(q.z); v[3] = __uint_as_float(q.w);
    }
    static __device__ __forceinline__ uint4 pack(const float (&v)[n])
    {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                          __float_as_uint(v[2]), __float_as_uint(v[3]));
    }
    static __device__ __forceinline__ float load1(const float *p) { return __ldg(p); }
    static __device__ __forceinline__ void store1(float *p, float v) { *p = v; }
    static __device__ __forceinline__ float from_float(float v) { return v; }
};

template <> struct lanes<__nv_bfloat16> {
    static constexpr int n = 8;
    /* A bf16 is the high half of the f32 with the same value: widening is a shift or a mask. */
    static __device__ __forceinline__ void unpack2(uint32_t w, float &lo, float &hi)
    {
        lo = __uint_as_float(w << 16);
        hi = __uint_as_float(w & 0xffff0000u);
    }
    static __device__ __forceinline__ uint32_t pack2(float lo, float hi)
    {
        return bit_cast<uint32_t>(__floats2bfloat162_rn(lo, hi)); /* one cvt.rn.bf16x2.f32 */
    }
    static __device__ __forceinline__ void unpack(uint4 q, float (&v)[n])
    {
        unpack2(q.x, v[0], v[1]); unpack2(q.y, v[2], v[3]);
        unpack2(q.z, v[4], v[5]); unpack2(q.w, v[6], v[7]);
    }
    static __device__ __forceinline__ uint4 pack(const float (&v)[n])
    {
        return make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
    }
    static __device__ __forceinline__ float load1(const __nv_bfloat16 *p) { return __bfloat162float(__ldg(p)); }
    static __device__ __forceinline__ void store1(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
    static __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

template <> struct lanes<__half> {
    static constexpr int n = 8;
    static __device__ __forceinline__ void unpack2(uint32_t w, float &lo, float &hi)
    {
        float2 f = __half22float2(bit_cast<__half2>(w));
        lo = f.x;
        hi = f.y;
    }
    static __device__ __forceinline__ uint32_t pack2(float lo, float hi)
    {
        return bit_cast<uint32_t>(__floats2half2_rn(lo, hi)); /* one cvt.rn.f16x2.f32 */
    }
    static __device__ __forceinline__ void unpack(uint4 q, float (&v)[n])
    {
        unpack2(q.x, v[0], v[1]); unpack2(q.y, v[2], v[3]);
        unpack2(q.z, v[4], v[5]); unpack2(q.w, v[6], v[7]);
    }
    static __device__ __forceinline__ uint4 pack(const float (&v)[n])
    {
        return make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
    }
    static __device__ __forceinline__ float load1(const __half *p) { return __half2float(__ldg(p)); }
    static __device__ __forceinline__ void store1(__half *p, float v) { *p = __float2half_rn(v); }
    static __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
};


__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

} // namespace

#endif
