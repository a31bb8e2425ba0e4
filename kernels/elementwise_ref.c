/* CPU references of the elementwise kernels of elementwise.cu: the same formulas in float, over
 * f32, f16 and bf16 buffers (16-bit values through tk/half.h's round-to-nearest-even). */
#include <math.h>
#include <tk/half.h>

#include "ref.h"

float tk_ref_silu(float x) { return x / (1.0f + expf(-x)); }

/* 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): the tanh form without its cancellation for x below
 * about -3, where tanh(u) rounds towards -1. The kernel computes the same expression. */
float tk_ref_gelu(float x)
{
    const float k2 = 1.5957691216057308f; /* 2 sqrt(2/pi) */
    float u2 = k2 * fmaf(0.044715f * x, x * x, x);
    return x / (1.0f + expf(-u2));
}

/* 0.5 x (1 + erf(x / sqrt 2)) as 0.5 x erfc(-x / sqrt 2), as the kernel computes it. */
float tk_ref_gelu_erf(float x) { return 0.5f * x * erfcf(-0.70710678118654752f * x); }

static float ref_sin(float x) { return sinf(x); }
static float ref_cos(float x) { return cosf(x); }
static float ref_add(float a, float b) { return a + b; }
static float ref_mul(float a, float b) { return a * b; }

static int float_dtype(tk_dtype dtype) { return dtype == TK_F32 || dtype == TK_F16 || dtype == TK_BF16; }

int tk_ref_unary(tk_ew_op op, tk_dtype dtype, const void *x, void *y, int64_t n)
{
    float (*f)(float);
    switch (op) {
    case TK_EW_SIN: f = ref_sin; break;
    case TK_EW_COS: f = ref_cos; break;
    case TK_EW_SILU: f = tk_ref_silu; break;
    case TK_EW_GELU: f = tk_ref_gelu; break;
    case TK_EW_GELU_ERF: f = tk_ref_gelu_erf; break;
    default: return tk_error_set(TK_EUNSUPPORTED, "elementwise reference %d is not unary", (int)op);
    }
    if (!float_dtype(dtype))
        return tk_error_set(TK_EUNSUPPORTED, "elementwise reference: dtype %d is not f32, f16 or bf16", (int)dtype);
    for (int64_t i = 0; i < n; i++)
        tk_ref_store(dtype, y, i, f(tk_ref_load(dtype, x, i)));
    return 0;
}

int tk_ref_binary(tk_ew_op op, tk_dtype dtype, const void *a, const void *b, void *y, int64_t n)
{
    float (*f)(float, float);
    switch (op) {
    case TK_EW_ADD: f = ref_add; break;
    case TK_EW_MUL: f = ref_mul; break;
    default: return tk_error_set(TK_EUNSUPPORTED, "elementwise reference %d is not binary", (int)op);
    }
    if (!float_dtype(dtype))
        return tk_error_set(TK_EUNSUPPORTED, "elementwise reference: dtype %d is not f32, f16 or bf16", (int)dtype);
    for (int64_t i = 0; i < n; i++)
        tk_ref_store(dtype, y, i, f(tk_ref_load(dtype, a, i), tk_ref_load(dtype, b, i)));
    return 0;
}
