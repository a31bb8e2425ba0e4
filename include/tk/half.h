/* f16 and bf16 on the CPU: conversions between float and the 16-bit formats' bit patterns
 * (uint16_t), in portable C with round-to-nearest-even, for CPU fallbacks and tests. They do not
 * depend on the compiler's _Float16 or __bf16, so they give the same bits everywhere.
 *
 * Conversions to 16 bits round to nearest, ties to even, like the GPU's __float2half_rn and
 * __float2bfloat16_rn: values past the largest finite one become infinities, f16 keeps
 * subnormals, and a NaN stays a NaN (quiet, same sign). Widening to float is exact. */
#ifndef TK_HALF_H
#define TK_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t tk__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tk__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the upper half of a float: widening appends 16 zero bits. */
static inline float tk_bf16_to_f32(uint16_t h) { return tk__f32_from_bits((uint32_t)h << 16); }

static inline uint16_t tk_f32_to_bf16(float f)
{
    uint32_t u = tk__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: truncating could make it inf */
        return (uint16_t)((u >> 16) | 0x0040u);    /* set the quiet bit */
    u += 0x7fffu + ((u >> 16) & 1u);               /* round to nearest even at bit 16 */
    return (uint16_t)(u >> 16);                    /* a carry into the exponent is right, up to inf */
}

static inline float tk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in float */
        float v = (float)man * 5.9604644775390625e-08f;
        return tk__f32_from_bits(tk__f32_bits(v) | sign);
    }
    if (exp == 31) /* inf or NaN */
        return tk__f32_from_bits(sign | 0x7f800000u | (man << 13));
    return tk__f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13)); /* rebias 15 -> 127 */
}

static inline uint16_t tk_f32_to_f16(float f)
{
    uint32_t u = tk__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) /* NaN: keep the top mantissa bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    if (u >= 0x477ff000u) /* >= 65520, halfway between 65504 and 2^16: rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (u >= 0x38800000u) { /* >= 2^-14: a normal f16 */
        u += 0xfffu + ((u >> 13) & 1u); /* round to nearest even at bit 13 */
        return (uint16_t)(sign | ((u - 0x38000000u) >> 13)); /* rebias 127 -> 15 */
    }
    if (u < 0x33000000u) /* < 2^-25, half the smallest subnormal (a tie at 2^-25 goes to 0) */
        return sign;
    /* a subnormal: the value in units of 2^-24 is man * 2^(exp - 126), shift in [14, 24] */
    uint32_t exp = u >> 23;
    uint32_t man = (u & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;
    uint32_t r = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u)))
        r++; /* may reach 0x400, the smallest normal, which is the right encoding */
    return (uint16_t)(sign | r);
}

#ifdef __cplusplus
}
#endif
#endif
