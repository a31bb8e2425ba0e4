/* The built-in kernels' CPU side, without a GPU: tk/half.h's f16/bf16 conversions, the CPU
 * references of tk::add, tk::mul, tk::sin, tk::cos, tk::silu, tk::gelu and tk::linear against
 * hand-computed values (run as the ops' CPU fallbacks through the registry), and the ops' meta
 * functions: output shapes and their one-line errors. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include "attention_grid.h" /* kernels/: the causal attention kernel's block order */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tk/half.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

/* expr fails with code, and the message is exactly text. */
#define tk_assert_error(expr, code, text)                                                  \
    do {                                                                                   \
        int tk__rc = (expr);                                                               \
        if (tk__rc != (code))                                                              \
            fail_msg("%s returned %d (expected %d): %s", #expr, tk__rc, (code), tk_error_last()); \
        if (strcmp(tk_error_last(), (text)) != 0)                                          \
            fail_msg("%s: error is\n  '%s'\nexpected\n  '%s'", #expr, tk_error_last(), (text)); \
    } while (0)

static const tk_device CPU = {TK_DEVICE_CPU, 0};

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* --- tk/half.h ----------------------------------------------------------------------------- */

static void half__every_bf16_and_f16_survives_a_round_trip_through_float(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float b = tk_bf16_to_f32(h), f = tk_f16_to_f32(h);
        if (isnan(b))
            assert_true(isnan(tk_bf16_to_f32(tk_f32_to_bf16(b))));
        else if (tk_f32_to_bf16(b) != h)
            fail_msg("bf16 0x%04x -> %g -> 0x%04x", (unsigned)h, b, (unsigned)tk_f32_to_bf16(b));
        if (isnan(f))
            assert_true(isnan(tk_f16_to_f32(tk_f32_to_f16(f))));
        else if (tk_f32_to_f16(f) != h)
            fail_msg("f16 0x%04x -> %g -> 0x%04x", (unsigned)h, f, (unsigned)tk_f32_to_f16(f));
    }
}

static void half__widening_gives_the_exact_values(void **state)
{
    (void)state;
    assert_true(tk_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(tk_bf16_to_f32(0xc040) == -3.0f);
    assert_true(tk_bf16_to_f32(0x3f3b) == 0.73046875f);
    assert_true(tk_f16_to_f32(0x3c00) == 1.0f);
    assert_true(tk_f16_to_f32(0xc200) == -3.0f);
    assert_true(tk_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(tk_f16_to_f32(0x0400) == ldexpf(1.0f, -14));   /* smallest normal */
    assert_true(tk_f16_to_f32(0x0001) == ldexpf(1.0f, -24));   /* smallest subnormal */
    assert_true(tk_f16_to_f32(0x03ff) == 1023.0f * ldexpf(1.0f, -24));
    assert_true(tk_f16_to_f32(0x3555) == 0.333251953125f);
    assert_true(isinf(tk_f16_to_f32(0x7c00)) && tk_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(tk_f16_to_f32(0xfc00)) && tk_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(tk_f16_to_f32(0x7e00)));
    assert_int_equal(bits(tk_f16_to_f32(0x8000)), 0x80000000u); /* -0 */
}

static void half__bf16_rounds_to_nearest_even(void **state)
{
    (void)state;
    /* bf16 has 7 stored mantissa bits: near 1 its spacing is 2^-7 */
    assert_int_equal(tk_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tk_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);                   /* tie -> even (down) */
    assert_int_equal(tk_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);               /* tie -> even (up) */
    assert_int_equal(tk_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3f81);  /* above the tie */
    assert_int_equal(tk_f32_to_bf16(1.0f + ldexpf(1, -8) - ldexpf(1, -20)), 0x3f80);  /* below the tie */
    assert_int_equal(tk_f32_to_bf16(-1.0f - 3 * ldexpf(1, -8)), 0xbf82);
    assert_int_equal(tk_f32_to_bf16(0.7310585786f), 0x3f3b);
    assert_int_equal(tk_f32_to_bf16(FLT_MAX), 0x7f80);                                 /* rounds up to inf */
    assert_int_equal(tk_f32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(tk_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(tk_f32_to_bf16(from_bits(0x00000001u)), 0x0000);                 /* tiny -> 0 */
    /* a NaN whose payload sits in the low bits must not truncate to infinity */
    assert_true(isnan(tk_bf16_to_f32(tk_f32_to_bf16(from_bits(0x7f800001u)))));
    assert_true(isnan(tk_bf16_to_f32(tk_f32_to_bf16(from_bits(0xff800001u)))));
    assert_int_equal(tk_f32_to_bf16(from_bits(0xff800001u)) & 0x8000, 0x8000);
}

static void half__f16_rounds_to_nearest_even_with_subnormals_and_overflow(void **state)
{
    (void)state;
    /* f16 has 10 stored mantissa bits: near 1 its spacing is 2^-10 */
    assert_int_equal(tk_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);                   /* tie -> even (down) */
    assert_int_equal(tk_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);               /* tie -> even (up) */
    assert_int_equal(tk_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01);
    assert_int_equal(tk_f32_to_f16(0.1f), 0x2e66);
    assert_int_equal(tk_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(tk_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tk_f32_to_f16(65519.99f), 0x7bff);                               /* below the tie */
    assert_int_equal(tk_f32_to_f16(65520.0f), 0x7c00);                                /* tie -> inf */
    assert_int_equal(tk_f32_to_f16(1e9f), 0x7c00);
    assert_int_equal(tk_f32_to_f16(-1e9f), 0xfc00);
    assert_int_equal(tk_f32_to_f16(ldexpf(1, -14)), 0x0400);                           /* smallest normal */
    assert_int_equal(tk_f32_to_f16(ldexpf(1, -14) - ldexpf(1, -25)), 0x0400);         /* rounds up into it */
    assert_int_equal(tk_f32_to_f16(ldexpf(1, -24)), 0x0001);                           /* smallest subnormal */
    assert_int_equal(tk_f32_to_f16(ldexpf(1, -25)), 0x0000);                           /* tie -> even 0 */
    assert_int_equal(tk_f32_to_f16(1.5f * ldexpf(1, -25)), 0x0001);
    assert_int_equal(tk_f32_to_f16(3.0f * ldexpf(1, -25)), 0x0002);                    /* 1.5 ulp: tie -> 2 */
    assert_int_equal(tk_f32_to_f16(5.0f * ldexpf(1, -25)), 0x0002);                    /* 2.5 ulp: tie -> 2 */
    assert_int_equal(tk_f32_to_f16(-ldexpf(1, -30)), 0x8000);                          /* -0 */
    assert_int_equal(tk_f32_to_f16(INFINITY), 0x7c00);
    uint16_t nan = tk_f32_to_f16(from_bits(0x7f800001u));
    assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0);
}

/* --- the CPU references, through the ops' CPU fallbacks ------------------------------------ */

static int setup_cpu(void **state)
{
    tk_ctx *ctx;
    if (tk_ctx_new(&ctx, CPU) != 0)
        return -1;
    *state = ctx;
    return 0;
}

static int teardown_cpu(void **state)
{
    tk_ctx_free(*state);
    return 0;
}

/* A CPU tensor of dtype holding vals (rounded to nearest even for 16-bit dtypes). */
static tk_tensor *tensor_of(tk_dtype dtype, int rank, const int64_t *shape, const float *vals)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtype, rank, shape));
    for (int64_t i = 0; i < tk_numel(t); i++) {
        if (dtype == TK_F32)
            ((float *)tk_tensor_data(t))[i] = vals[i];
        else if (dtype == TK_F16)
            ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_f16(vals[i]);
        else
            ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_bf16(vals[i]);
    }
    return t;
}

static float value_at(const tk_tensor *t, int64_t i)
{
    switch (tk_tensor_dtype(t)) {
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)tk_tensor_data(t))[i]);
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)tk_tensor_data(t))[i]);
    default: return ((const float *)tk_tensor_data(t))[i];
    }
}

static void assert_near(float got, double want, double rtol, const char *what, int64_t i)
{
    if (!(fabs((double)got - want) <= rtol * fabs(want) + 1e-30))
        fail_msg("%s[%lld] is %.9g, expected %.9g (rtol %g)", what, (long long)i, got, want, rtol);
}

static void ref__unary_ops_match_hand_computed_values(void **state)
{
    tk_ctx *ctx = *state;
    const float x[] = {1.0f, -1.0f, 0.0f, 2.0f, -2.0f, 0.5f};
    const int64_t n = 6;
    /* silu(x) = x / (1 + e^-x); gelu(x) = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))) */
    const double silu[] = {0.7310585786300049, -0.2689414213699951, 0.0, 1.7615941559557650,
                           -0.2384058440442351, 0.3112296656009273};
    const double gelu[] = {0.8411919906082768, -0.1588080093917232, 0.0, 1.9545976940871754,
                           -0.0454023059128246, 0.3457140306300049};
    tk_tensor *t = tensor_of(TK_F32, 1, &n, x);
    tk_tensor *ys = tk_silu(ctx, t), *yg = tk_gelu(ctx, t), *yn = tk_sin(ctx, t), *yc = tk_cos(ctx, t);
    assert_non_null(ys);
    assert_non_null(yg);
    assert_non_null(yn);
    assert_non_null(yc);
    for (int64_t i = 0; i < n; i++) {
        assert_near(value_at(ys, i), silu[i], 1e-6, "silu", i);
        assert_near(value_at(yg, i), gelu[i], 1e-6, "gelu", i);
        assert_near(value_at(yn, i), sin((double)x[i]), 1e-6, "sin", i);
        assert_near(value_at(yc, i), cos((double)x[i]), 1e-6, "cos", i);
    }
    tk_tensor *free_list[] = {t, ys, yg, yn, yc};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

/* gelu's exact form, 0.5 x (1 + erf(x / sqrt 2)), evaluated in double by Python's math.erf */
static void ref__gelu_exact_matches_the_erf_form(void **state)
{
    tk_ctx *ctx = *state;
    const float x[] = {1.0f, -1.0f, 0.0f, 2.0f, -2.0f, 0.5f, -4.0f};
    const double want[] = {0.8413447460685429, -0.15865525393145707, 0.0, 1.9544997361036416,
                           -0.04550026389635842, 0.34573123063700656, -0.00012668496733247991};
    const int64_t n = 7;
    tk_tensor *t = tensor_of(TK_F32, 1, &n, x), *y = tk_gelu_exact(ctx, t), *bad = tk_call(ctx, "tk::gelu", t, "fast");
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++)
        assert_near(value_at(y, i), want[i], 2e-6, "gelu exact", i);
    assert_null(bad);
    assert_contains(tk_error_last(), "op 'tk::gelu': approximate is 'fast', expected 'tanh' or 'none'");
    tk_tensor_free(t);
    tk_tensor_free(y);
}

/* softmax, layer_norm and rms_norm on rows worked out by hand (in Python, double precision) */
static void ref__row_ops_match_hand_computed_rows(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t s23[] = {2, 3}, s24[] = {2, 4}, s4[] = {4};
    /* row 0: [1, 2, 3]; row 1 holds large values (no overflow: the max is subtracted) and -inf */
    const float sx[] = {1, 2, 3, 1000, 1000, -INFINITY};
    const double sw[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 0.5, 0.5, 0};
    tk_tensor *x = tensor_of(TK_F32, 2, s23, sx), *y = tk_softmax(ctx, x);
    assert_non_null(y);
    for (int64_t i = 0; i < 6; i++)
        assert_near(value_at(y, i), sw[i], 1e-6, "softmax", i);
    tk_tensor_free(y);
    assert_null(tk_call(ctx, "tk::softmax", x, 0));
    assert_contains(tk_error_last(), "op 'tk::softmax': dim is 0; it takes the last dim only (-1 or 1 for x of rank 2)");
    y = tk_call(ctx, "tk::softmax", x, 1);
    assert_non_null(y);
    tk_tensor_free(y);
    tk_tensor_free(x);

    /* layer_norm of [1, 2, 3, 4] (mean 2.5, var 1.25), weight [1, 1, 2, 2], bias [0, 0, 0, 1]; the
     * second row again without weight and bias, i.e. (x - 2.5) / sqrt(1.25 + 1e-5) */
    const float lx[] = {1, 2, 3, 4, 1, 2, 3, 4}, lw[] = {1, 1, 2, 2}, lb[] = {0, 0, 0, 1};
    const double lwant[] = {-1.3416354199689269, -0.447211806656309, 0.894423613312618, 3.6832708399378538};
    x = tensor_of(TK_F32, 2, s24, lx);
    tk_tensor *w = tensor_of(TK_F32, 1, s4, lw), *b = tensor_of(TK_F32, 1, s4, lb);
    y = tk_layer_norm(ctx, x, w, b, 1e-5);
    tk_tensor *plain = tk_call(ctx, "tk::layer_norm", x);
    assert_non_null(y);
    assert_non_null(plain);
    for (int64_t i = 0; i < 8; i++)
        assert_near(value_at(y, i), lwant[i % 4], 1e-6, "layer_norm", i);
    const double pwant[] = {-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269};
    for (int64_t i = 0; i < 8; i++)
        assert_near(value_at(plain, i), pwant[i % 4], 1e-6, "layer_norm without weight", i);
    tk_tensor_free(y);
    tk_tensor_free(plain);
    tk_tensor_free(x);

    /* rms_norm of [1, -2, 3, -4] (mean square 7.5), weight [0.5, 1, 2, 1], eps 1e-6 */
    const float rx[] = {1, -2, 3, -4}, rw[] = {0.5f, 1, 2, 1};
    const double rwant[] = {0.1825741736634442, -0.7302966946537768, 2.1908900839613303, -1.4605933893075536};
    tk_tensor *rx_t = tensor_of(TK_F32, 1, s4, rx), *rw_t = tensor_of(TK_F32, 1, s4, rw);
    y = tk_rms_norm(ctx, rx_t, rw_t, 1e-6);
    assert_non_null(y);
    for (int64_t i = 0; i < 4; i++)
        assert_near(value_at(y, i), rwant[i], 1e-6, "rms_norm", i);
    tk_tensor_free(y);

    /* a weight that is not [last dim] */
    const int64_t s3[] = {3};
    tk_tensor *w3 = tensor_of(TK_F32, 1, s3, lw);
    assert_null(tk_rms_norm(ctx, rx_t, w3, 1e-6));
    assert_contains(tk_error_last(), "weight dim 0 == x dim 0");
    assert_null(tk_call(ctx, "tk::layer_norm", rx_t, w, b, "small"));
    assert_contains(tk_error_last(), "argument 'eps' (in[3]) of op 'tk::layer_norm' is a float, got a str");
    tk_tensor *free_list[] = {w, b, rx_t, rw_t, w3};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

/* f16 and bf16 rows: the same results as f32 within the dtype's rounding */
static void ref__row_ops_in_16_bits_round_once(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t shape[] = {3, 37};
    float v[3 * 37];
    for (int i = 0; i < 3 * 37; i++)
        v[i] = (float)((i * 7919) % 101) / 25.0f - 2.0f;
    const tk_dtype dts[2] = {TK_F16, TK_BF16};
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 3 * 37; i++) /* the inputs as the dtype holds them */
            v[i] = dts[d] == TK_F16 ? tk_f16_to_f32(tk_f32_to_f16(v[i])) : tk_bf16_to_f32(tk_f32_to_bf16(v[i]));
        tk_tensor *x16 = tensor_of(dts[d], 2, shape, v), *x32 = tensor_of(TK_F32, 2, shape, v);
        tk_tensor *a16 = tk_softmax(ctx, x16), *a32 = tk_softmax(ctx, x32);
        tk_tensor *b16 = tk_layer_norm(ctx, x16, NULL, NULL, 1e-5), *b32 = tk_layer_norm(ctx, x32, NULL, NULL, 1e-5);
        tk_tensor *c16 = tk_rms_norm(ctx, x16, NULL, 1e-6), *c32 = tk_rms_norm(ctx, x32, NULL, 1e-6);
        const double tol = dts[d] == TK_F16 ? 1.0 / 1024 : 1.0 / 128; /* one rounding: half an ulp, relative */
        for (int64_t i = 0; i < 3 * 37; i++) {
            assert_near(value_at(a16, i), value_at(a32, i), tol, "softmax 16-bit", i);
            assert_near(value_at(b16, i), value_at(b32, i), tol, "layer_norm 16-bit", i);
            assert_near(value_at(c16, i), value_at(c32, i), tol, "rms_norm 16-bit", i);
        }
        tk_tensor *free_list[] = {x16, x32, a16, a32, b16, b32, c16, c32};
        for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
            tk_tensor_free(free_list[i]);
    }
}

/* attention worked out by hand (Python, double): q [2, 2], k and v [3, 2], scale 1/sqrt(2) */
static void ref__sdpa_matches_hand_computed_attention(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t sq[4] = {1, 1, 2, 2}, skv[4] = {1, 1, 3, 2};
    const float q[] = {1, 0, 0.5f, -1}, k[] = {1, 1, 0, 2, -1, 0.5f}, v[] = {1, 2, 3, -1, 0, 0.5f};
    const double full[] = {1.427961574439142, 0.937969903211153, 0.995247951594669, 0.9787403590525651};
    const double causal[] = {1.0, 2.0, 1.5143666304536139, 1.2284500543195789};
    tk_tensor *tq = tensor_of(TK_F32, 4, sq, q), *tk_ = tensor_of(TK_F32, 4, skv, k), *tv = tensor_of(TK_F32, 4, skv, v);
    tk_tensor *a = tk_sdpa(ctx, tq, tk_, tv, 0), *c = tk_sdpa(ctx, tq, tk_, tv, 1);
    assert_non_null(a);
    assert_non_null(c);
    for (int64_t i = 0; i < 4; i++) {
        assert_near(value_at(a, i), full[i], 1e-6, "sdpa", i);
        assert_near(value_at(c, i), causal[i], 1e-6, "sdpa causal", i);
    }
    /* an explicit scale: 1/sqrt(2) again */
    tk_tensor *e = tk_call(ctx, "tk::sdpa", tq, tk_, tv, false, 0.70710678118654752);
    assert_non_null(e);
    for (int64_t i = 0; i < 4; i++)
        assert_near(value_at(e, i), full[i], 1e-6, "sdpa scale", i);
    /* mismatched inputs */
    const int64_t s3[3] = {1, 3, 2};
    tk_tensor *r3 = tensor_of(TK_F32, 3, s3, k);
    assert_null(tk_sdpa(ctx, tq, r3, tv, 0));
    assert_contains(tk_error_last(), "op 'tk::sdpa': input 'k' (in[1]) is f32 of rank 3, expected f32 of rank 4");
    assert_null(tk_call(ctx, "tk::sdpa", tq, tk_, tv, false, 0.0, 3));
    assert_contains(tk_error_last(), "input 'q' (in[0]) is f32 of rank 4, expected f32 of rank 3 ([B, S, heads*D])");
    tk_tensor *free_list[] = {tq, tk_, tv, a, c, e, r3};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

/* heads side by side ([B, S, H*D], heads=H) gives what [B, H, S, D] gives for the same numbers,
 * and tk::sdpa_qkv on q, k, v packed in one [B, S, 3*H*D] what tk::sdpa gives on them apart */
static void ref__sdpa_layouts_agree(void **state)
{
    tk_ctx *ctx = *state;
    enum { B = 2, H = 3, S = 5, D = 4 };
    float bhsd[3][B * H * S * D], bshd[3][B * H * S * D], packed[B * S * 3 * H * D];
    for (int t = 0; t < 3; t++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < S; i++)
                    for (int d = 0; d < D; d++) {
                        float x = (float)(((t * 31 + b * 17 + h * 7 + i * 5 + d * 3) % 23) - 11) / 8.0f;
                        bhsd[t][((b * H + h) * S + i) * D + d] = x;
                        bshd[t][((b * S + i) * H + h) * D + d] = x;
                        packed[(b * S + i) * 3 * H * D + t * H * D + h * D + d] = x;
                    }
    const int64_t s4[4] = {B, H, S, D}, s3[3] = {B, S, H * D}, sp[3] = {B, S, 3 * H * D};
    tk_tensor *qkv = tensor_of(TK_F32, 3, sp, packed);
    for (int causal = 0; causal < 2; causal++) {
        tk_tensor *a[3], *b3[3];
        for (int t = 0; t < 3; t++) {
            a[t] = tensor_of(TK_F32, 4, s4, bhsd[t]);
            b3[t] = tensor_of(TK_F32, 3, s3, bshd[t]);
        }
        tk_tensor *y4 = tk_sdpa(ctx, a[0], a[1], a[2], causal);
        tk_tensor *y3 = tk_call(ctx, "tk::sdpa", b3[0], b3[1], b3[2], causal != 0, 0.0, (int)H);
        assert_non_null(y4);
        assert_non_null(y3);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < S; i++)
                    for (int d = 0; d < D; d++)
                        assert_near(value_at(y3, ((b * S + i) * H + h) * D + d), value_at(y4, ((b * H + h) * S + i) * D + d),
                                    1e-6, "sdpa heads layout", d);
        tk_tensor *yp = tk_sdpa_qkv(ctx, qkv, H, causal);
        assert_non_null(yp);
        assert_int_equal(tk_tensor_rank(yp), 3);
        assert_memory_equal(tk_tensor_shape(yp), s3, sizeof s3);
        for (int64_t i = 0; i < B * S * H * D; i++)
            assert_near(value_at(yp, i), value_at(y3, i), 0.0, "sdpa_qkv", i);
        for (int t = 0; t < 3; t++) {
            tk_tensor_free(a[t]);
            tk_tensor_free(b3[t]);
        }
        tk_tensor_free(y4);
        tk_tensor_free(y3);
        tk_tensor_free(yp);
    }
    assert_null(tk_sdpa_qkv(ctx, qkv, 0, 1));
    assert_contains(tk_error_last(), "op 'tk::sdpa_qkv': heads is 0, expected the number of heads (> 0)");
    assert_null(tk_sdpa_qkv(ctx, qkv, 5, 1)); /* 36 columns: not 3 * 5 * D */
    assert_contains(tk_error_last(), "qkv's last dim must be a static multiple of 3*heads = 15");
    tk_tensor_free(qkv);
}

/* tk::matmul by hand: two products of [2, 3] by [3, 2], batched and with one b for both; a K that
 * disagrees and a b of another rank are refused with the shapes */
static void ref__matmul_matches_hand_computed_products(void **state)
{
    tk_ctx *ctx = *state;
    const float av[12] = {1, 2, 3, 4, 5, 6, /* a[0] */ -1, 0, 2, 0.5f, 1, -2 /* a[1] */};
    const float bv[12] = {1, 0, 0, 1, 1, 1, /* b[0] */ 2, -1, 0, 3, 1, 0 /* b[1] */};
    /* a[0] b[0] = [[1+3, 2+3], [4+6, 5+6]]; a[1] b[1] = [[-2+2, 1], [1-2, -0.5+3]] */
    const float batched[8] = {4, 5, 10, 11, 0, 1, -1, 2.5f};
    /* a[1] b[0] = [[-1+2, 2], [0.5-2, 1-2]] */
    const float shared[8] = {4, 5, 10, 11, 1, 2, -1.5f, -1};
    const int64_t sa[3] = {2, 2, 3}, sb[3] = {2, 3, 2}, sb2[2] = {3, 2}, s4[4] = {1, 2, 2, 3};
    tk_tensor *a = tensor_of(TK_F32, 3, sa, av), *b = tensor_of(TK_F32, 3, sb, bv), *b2 = tensor_of(TK_F32, 2, sb2, bv);
    tk_tensor *a4 = tensor_of(TK_F32, 4, s4, av);
    tk_tensor *y = tk_matmul(ctx, a, b), *ys = tk_matmul(ctx, a, b2), *y4 = tk_matmul(ctx, a4, b2);
    assert_non_null(y);
    assert_non_null(ys);
    assert_non_null(y4);
    const int64_t want[3] = {2, 2, 2}, want4[4] = {1, 2, 2, 2};
    assert_memory_equal(tk_tensor_shape(y), want, sizeof want);
    assert_memory_equal(tk_tensor_shape(y4), want4, sizeof want4);
    for (int i = 0; i < 8; i++) {
        assert_near(value_at(y, i), batched[i], 1e-6, "matmul batched", i);
        assert_near(value_at(ys, i), shared[i], 1e-6, "matmul shared b", i);
        assert_near(value_at(y4, i), shared[i], 1e-6, "matmul rank 4", i);
    }
    const int64_t sbad[2] = {2, 2};
    tk_tensor *bad = tensor_of(TK_F32, 2, sbad, bv);
    assert_null(tk_matmul(ctx, a, bad));
    assert_contains(tk_error_last(), "op 'tk::matmul': a is [2, 2, 3] and b [2, 2]: a dim 2 (3) != b dim 0 (2) (K)");
    assert_null(tk_matmul(ctx, a4, b));
    assert_contains(tk_error_last(), "expected a [..., M, K] and b [K, N] or b [..., K, N] with a's leading dims");
    tk_tensor *fl[] = {a, b, b2, a4, y, ys, y4, bad};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        tk_tensor_free(fl[i]);
}

/* tk::_mlp on the CPU runs the two fused linears: through the hidden tensor the executor gives it
 * (which then holds gelu(x w1^T + b1)) or one of its own, the same output either way; a hidden
 * tensor of another shape is refused with one line */
static void ref__mlp_runs_the_pairs_through_the_hidden_tensor_it_is_given(void **state)
{
    tk_ctx *ctx = *state;
    enum { B = 2, S = 3, D = 4, H = 8 };
    float xv[B * S * D], w1v[H * D], b1v[H], w2v[D * H], b2v[D];
    for (int i = 0; i < B * S * D; i++)
        xv[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    for (int i = 0; i < H * D; i++)
        w1v[i] = (float)((i * 5) % 9) / 8.0f - 0.5f, w2v[i] = (float)((i * 3) % 7) / 6.0f - 0.5f;
    for (int i = 0; i < H; i++)
        b1v[i] = 0.125f * (float)(i % 3);
    for (int i = 0; i < D; i++)
        b2v[i] = -0.25f * (float)i;
    const int64_t sx[3] = {B, S, D}, sw1[2] = {H, D}, sw2[2] = {D, H}, sh[3] = {B, S, H}, sb1 = H, sb2 = D;
    tk_tensor *x = tensor_of(TK_F32, 3, sx, xv), *w1 = tensor_of(TK_F32, 2, sw1, w1v);
    tk_tensor *w2 = tensor_of(TK_F32, 2, sw2, w2v);
    tk_tensor *b1 = tensor_of(TK_F32, 1, &sb1, b1v), *b2 = tensor_of(TK_F32, 1, &sb2, b2v), *h, *bad;
    tk_assert_ok(tk_tensor_new(&h, NULL, CPU, TK_F32, 3, sh));
    tk_assert_ok(tk_tensor_new(&bad, NULL, CPU, TK_F32, 3, sx));
    memset(tk_tensor_data(h), 0, sizeof(float) * B * S * H);
    tk_tensor *own = tk_call(ctx, "tk::_mlp", x, x, w1, b1, w2, b2);
    tk_tensor *given = tk_call(ctx, "tk::_mlp", x, x, w1, b1, w2, b2, h);
    assert_non_null(own);
    assert_non_null(given);
    assert_memory_equal(tk_tensor_data(own), tk_tensor_data(given), sizeof(float) * B * S * D);
    /* row 0, unit 0: gelu(x[0] . w1[0] + b1[0]) in the hidden tensor; y row 0 col 0 by hand in double */
    double u0 = b1v[0], y0 = xv[0] + b2v[0];
    for (int k = 0; k < D; k++)
        u0 += (double)xv[k] * w1v[k];
    assert_near(value_at(h, 0), 0.5 * u0 * (1.0 + tanh(0.7978845608028654 * (u0 + 0.044715 * u0 * u0 * u0))), 1e-5,
                "hidden", 0);
    for (int j = 0; j < H; j++) {
        double u = b1v[j];
        for (int k = 0; k < D; k++)
            u += (double)xv[k] * w1v[j * D + k];
        y0 += w2v[j] * 0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
    }
    assert_near(value_at(given, 0), y0, 1e-5, "mlp", 0);
    assert_null(tk_call(ctx, "tk::_mlp", x, x, w1, b1, w2, b2, bad));
    assert_contains(tk_error_last(), "tk::_mlp: the hidden tensor is not x's shape and dtype with 8 units last");
    tk_tensor *fl[] = {x, w1, w2, b1, b2, h, bad, own, given};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        tk_tensor_free(fl[i]);
}

/* rows picked by i32 and i64 ids of rank 2; an id out of range is refused, naming it */
static void ref__embedding_gathers_rows(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t ws[2] = {4, 3}, is[2] = {2, 3};
    const float w[] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
    tk_tensor *tw = tensor_of(TK_BF16, 2, ws, w);
    for (int wide = 0; wide < 2; wide++) {
        tk_tensor *ids;
        tk_assert_ok(tk_tensor_new(&ids, NULL, CPU, wide ? TK_I64 : TK_I32, 2, is));
        const int pick[6] = {3, 0, 2, 2, 1, 3};
        for (int i = 0; i < 6; i++) {
            if (wide)
                ((int64_t *)tk_tensor_data(ids))[i] = pick[i];
            else
                ((int32_t *)tk_tensor_data(ids))[i] = pick[i];
        }
        tk_tensor *y = tk_embedding(ctx, tw, ids);
        assert_non_null(y);
        assert_int_equal(tk_tensor_rank(y), 3);
        assert_int_equal(tk_tensor_dim(y, 0), 2);
        assert_int_equal(tk_tensor_dim(y, 1), 3);
        assert_int_equal(tk_tensor_dim(y, 2), 3);
        for (int i = 0; i < 6; i++)
            for (int c = 0; c < 3; c++)
                assert_true(value_at(y, i * 3 + c) == (float)(pick[i] * 10 + c));
        tk_tensor_free(y);
        if (wide)
            ((int64_t *)tk_tensor_data(ids))[4] = 4;
        else
            ((int32_t *)tk_tensor_data(ids))[4] = -1;
        assert_null(tk_embedding(ctx, tw, ids));
        assert_contains(tk_error_last(), wide ? "op 'tk::embedding': indices[4] is 4, outside the weight's 4 rows"
                                              : "op 'tk::embedding': indices[4] is -1, outside the weight's 4 rows");
        tk_tensor_free(ids);
    }
    assert_null(tk_embedding(ctx, tw, tw));
    assert_contains(tk_error_last(), "input 'indices' (in[1]) is bf16, expected i32 or i64");
    tk_tensor_free(tw);
}

/* layout ops on x[i][j][k] = 100 i + 10 j + k, [2, 3, 4], each result read back by its own index */
static void ref__layout_ops_move_elements_where_pytorch_does(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t shape[3] = {2, 3, 4};
    float v[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                v[(i * 3 + j) * 4 + k] = (float)(100 * i + 10 * j + k);
    tk_tensor *x = tensor_of(TK_F32, 3, shape, v);
    /* transpose(0, 2): y[k][j][i] = x[i][j][k] */
    tk_tensor *t = tk_transpose(ctx, x, 0, -1);
    assert_non_null(t);
    assert_int_equal(tk_tensor_dim(t, 0), 4);
    assert_int_equal(tk_tensor_dim(t, 2), 2);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                assert_true(value_at(t, (k * 3 + j) * 2 + i) == (float)(100 * i + 10 * j + k));
    /* permute([1, 2, 0]): y[j][k][i] */
    tk_tensor *p = tk_call(ctx, "tk::permute", x, TK_INTS(1, 2, 0));
    assert_non_null(p);
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++)
                assert_true(value_at(p, (j * 4 + k) * 2 + i) == (float)(100 * i + 10 * j + k));
    /* narrow(1, 1, 2): rows j = 1, 2 */
    tk_tensor *n = tk_narrow(ctx, x, 1, 1, 2);
    assert_non_null(n);
    assert_int_equal(tk_tensor_dim(n, 1), 2);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++)
                assert_true(value_at(n, (i * 2 + j) * 4 + k) == (float)(100 * i + 10 * (j + 1) + k));
    /* flatten(0, 1) and unflatten(2, [2, -1]): the same elements in order, other shapes */
    tk_tensor *f = tk_call(ctx, "tk::flatten", x, 0, 1), *u = tk_call(ctx, "tk::unflatten", x, 2, TK_INTS(2, -1));
    assert_non_null(f);
    assert_non_null(u);
    assert_int_equal(tk_tensor_rank(f), 2);
    assert_int_equal(tk_tensor_dim(f, 0), 6);
    assert_int_equal(tk_tensor_rank(u), 4);
    assert_int_equal(tk_tensor_dim(u, 2), 2);
    assert_int_equal(tk_tensor_dim(u, 3), 2);
    assert_memory_equal(tk_tensor_data(f), v, sizeof v);
    assert_memory_equal(tk_tensor_data(u), v, sizeof v);
    /* cat along dim 1 with narrow's rows 1..2: x's rows 0..2, then 1..2 again */
    tk_tensor *c = tk_call(ctx, "tk::cat", x, n, 1);
    assert_non_null(c);
    assert_int_equal(tk_tensor_dim(c, 1), 5);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++)
                assert_true(value_at(c, (i * 5 + j) * 4 + k) == (float)(100 * i + 10 * (j < 3 ? j : j - 2) + k));
    tk_tensor_free(c);
    /* expand: x's narrow to j = 1 ([2, 1, 4]) to [3, 2, 5, 4] (a new leading dim, j broadcast) */
    tk_tensor *x1 = tk_narrow(ctx, x, 1, 1, 1), *e = tk_call(ctx, "tk::expand", x1, TK_INTS(3, -1, 5, -1));
    assert_non_null(e);
    const int64_t eshape[4] = {3, 2, 5, 4};
    assert_memory_equal(tk_tensor_shape(e), eshape, sizeof eshape);
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++)
                for (int k = 0; k < 4; k++)
                    assert_true(value_at(e, ((l * 2 + i) * 5 + j) * 4 + k) == (float)(100 * i + 10 + k));
    tk_tensor_free(e);
    assert_null(tk_call(ctx, "tk::expand", x, TK_INTS(2, 6, 4)));
    assert_contains(tk_error_last(), "op 'tk::expand': x dim 1 is 3, which cannot become 6 (only dims of size 1 expand");
    assert_null(tk_call(ctx, "tk::expand", x, TK_INTS(3, 4)));
    assert_contains(tk_error_last(), "op 'tk::expand': sizes has 2 entries, x has rank 3");
    tk_tensor_free(x1);
    assert_null(tk_call(ctx, "tk::cat", x, n, 0));
    assert_contains(tk_error_last(), "a dim 1 == b dim 1");
    /* refusals */
    assert_null(tk_call(ctx, "tk::permute", x, TK_INTS(1, 1, 0)));
    assert_contains(tk_error_last(), "op 'tk::permute': dims names dim 1 twice");
    assert_null(tk_narrow(ctx, x, 1, 2, 2));
    assert_contains(tk_error_last(), "x dim 1 >= narrow's start + length (4)");
    tk_tensor *n0 = tk_narrow(ctx, x, 0, 1, 1); /* a dim before the last: rows of 12 */
    assert_non_null(n0);
    assert_memory_equal(tk_tensor_data(n0), v + 12, 12 * sizeof(float));
    tk_tensor_free(n0);
    assert_null(tk_transpose(ctx, x, 0, 3));
    assert_contains(tk_error_last(), "op 'tk::transpose': dim1 is 3, outside [-3, 2] for x of rank 3");
    assert_null(tk_call(ctx, "tk::unflatten", x, 2, TK_INTS(3, -1)));
    assert_contains(tk_error_last(), "x dim 2 divisible by 3");
    /* reshape: [2, 3, 4] as [-1, 6] (4 rows of 6) and [24]: the elements in order */
    tk_tensor *r = tk_call(ctx, "tk::reshape", x, TK_INTS(-1, 6)), *r1 = tk_call(ctx, "tk::reshape", x, TK_INTS(24));
    assert_non_null(r);
    assert_non_null(r1);
    assert_int_equal(tk_tensor_rank(r), 2);
    assert_int_equal(tk_tensor_dim(r, 0), 4);
    assert_int_equal(tk_tensor_dim(r, 1), 6);
    assert_memory_equal(tk_tensor_data(r), v, sizeof v);
    assert_memory_equal(tk_tensor_data(r1), v, sizeof v);
    tk_tensor_free(r);
    tk_tensor_free(r1);
    assert_null(tk_call(ctx, "tk::reshape", x, TK_INTS(5, -1)));
    assert_contains(tk_error_last(), "x's element count divisible by 5 (reshape's shape) does not hold (24 is not a multiple of 5)");
    assert_null(tk_call(ctx, "tk::reshape", x, TK_INTS(5, 5)));
    assert_contains(tk_error_last(), "x's element count == 25 (the product of reshape's shape) does not hold");
    assert_null(tk_call(ctx, "tk::reshape", x, TK_INTS(-1, -1)));
    assert_contains(tk_error_last(), "op 'tk::reshape': shape[1] is -1 (sizes are >= 0, one may be -1)");
    tk_tensor *fl[] = {x, t, p, n, f, u};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        tk_tensor_free(fl[i]);
}

static void ref__binary_ops_add_and_multiply_elementwise(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t shape[] = {2, 3};
    const float a[] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
    const float b[] = {0.5f, 4.0f, -1.0f, 9.0f, 1e3f, -0.125f};
    const float sum[] = {2.0f, 2.0f, 2.25f, 9.0f, 1000.001f, -7.125f};
    const float prod[] = {0.75f, -8.0f, -3.25f, 0.0f, 1.0f, 0.875f};
    tk_tensor *ta = tensor_of(TK_F32, 2, shape, a), *tb = tensor_of(TK_F32, 2, shape, b);
    tk_tensor *s = tk_add(ctx, ta, tb), *p = tk_mul(ctx, ta, tb);
    assert_non_null(s);
    assert_non_null(p);
    assert_int_equal(tk_tensor_rank(s), 2);
    assert_int_equal(tk_tensor_dim(s, 0), 2);
    assert_int_equal(tk_tensor_dim(s, 1), 3);
    for (int64_t i = 0; i < 6; i++) {
        assert_near(value_at(s, i), sum[i], 1e-7, "add", i);
        assert_near(value_at(p, i), prod[i], 1e-6, "mul", i);
    }
    tk_tensor_free(ta);
    tk_tensor_free(tb);
    tk_tensor_free(s);
    tk_tensor_free(p);
}

/* 16-bit inputs are widened exactly, the math is float, the result rounded to nearest even. */
static void ref__f16_and_bf16_compute_in_float_and_round_once(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t n = 3;
    const float x[] = {1.0f, -2.0f, 0.5f};
    tk_tensor *xb = tensor_of(TK_BF16, 1, &n, x), *xh = tensor_of(TK_F16, 1, &n, x);
    tk_tensor *yb = tk_silu(ctx, xb), *yh = tk_silu(ctx, xh), *zb = tk_add(ctx, xb, xb);
    assert_non_null(yb);
    assert_non_null(yh);
    assert_non_null(zb);
    assert_int_equal(tk_tensor_dtype(yb), TK_BF16);
    assert_int_equal(tk_tensor_dtype(yh), TK_F16);
    const uint16_t *b = tk_tensor_data(yb), *h = tk_tensor_data(yh), *z = tk_tensor_data(zb);
    assert_int_equal(b[0], 0x3f3b); /* silu(1) = 0.7310586 -> bf16 0.73046875 */
    assert_int_equal(h[0], 0x39d9); /* -> f16 0.73095703 */
    assert_int_equal(b[1], tk_f32_to_bf16(-0.23840584f));
    assert_int_equal(h[1], tk_f32_to_f16(-0.23840584f));
    assert_int_equal(b[2], tk_f32_to_bf16(0.31122967f));
    assert_int_equal(z[0], 0x4000); /* 1 + 1 */
    assert_int_equal(z[1], 0xc080); /* -2 + -2 */
    tk_tensor *free_list[] = {xb, xh, yb, yh, zb};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

/* The reference evaluates the tanh form as x * sigmoid(2u); in double precision the two agree,
 * including below x = -3 where float's 1 + tanh(u) would cancel. */
static void ref__gelu_matches_the_tanh_form_evaluated_in_double(void **state)
{
    tk_ctx *ctx = *state;
    enum { N = 241 };
    const int64_t n = N;
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = -6.0f + 0.05f * (float)i;
    tk_tensor *t = tensor_of(TK_F32, 1, &n, x), *y = tk_gelu(ctx, t);
    assert_non_null(y);
    for (int i = 0; i < N; i++) {
        double xd = x[i], u = 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd);
        assert_near(value_at(y, i), 0.5 * xd * (1.0 + tanh(u)), 2e-6, "gelu", i);
    }
    tk_tensor_free(t);
    tk_tensor_free(y);
}

static void ref__linear_matches_a_hand_computed_2x3_example(void **state)
{
    tk_ctx *ctx = *state;
    /* x [2, 3], W [2, 3] (out 2, in 3), b [2]:
     * y[0] = (1*1 + 2*0 + 3*-1) + 1 = -1,  (1*.5 + 2*.5 + 3*.5) - 1 = 2
     * y[1] = (4*1 + 5*0 + 6*-1) + 1 = -1,  (4*.5 + 5*.5 + 6*.5) - 1 = 6.5 */
    const int64_t xs[] = {2, 3}, ws[] = {2, 3}, bs[] = {2};
    const float x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b[] = {1, -1};
    const float want[] = {-1, 2, -1, 6.5f};
    const tk_dtype dtypes[] = {TK_F32, TK_F16, TK_BF16};
    for (size_t d = 0; d < 3; d++) {
        tk_tensor *tx = tensor_of(dtypes[d], 2, xs, x), *tw = tensor_of(dtypes[d], 2, ws, w);
        tk_tensor *tb = tensor_of(dtypes[d], 1, bs, b);
        tk_tensor *y = tk_linear(ctx, tx, tw, tb);
        assert_non_null(y);
        assert_int_equal(tk_tensor_dtype(y), dtypes[d]);
        assert_int_equal(tk_tensor_rank(y), 2);
        assert_int_equal(tk_tensor_dim(y, 0), 2);
        assert_int_equal(tk_tensor_dim(y, 1), 2);
        for (int64_t i = 0; i < 4; i++)
            assert_true(value_at(y, i) == want[i]); /* every value is exact in 16 bits */
        tk_tensor_free(tx);
        tk_tensor_free(tw);
        tk_tensor_free(tb);
        tk_tensor_free(y);
    }
}

/* nn.Linear(bias=False): the bias left out (NULL, or not passed at all) adds nothing; the same
 * 2x3 example without b: y[0] = (1 - 3, .5 + 1 + 1.5) = (-2, 3), y[1] = (4 - 6, 2 + 2.5 + 3) = (-2, 7.5). */
static void ref__linear_without_bias(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t xs[] = {2, 3}, ws[] = {2, 3};
    const float x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
    const float want[] = {-2, 3, -2, 7.5f};
    const tk_dtype dtypes[] = {TK_F32, TK_F16, TK_BF16};
    for (size_t d = 0; d < 3; d++) {
        tk_tensor *tx = tensor_of(dtypes[d], 2, xs, x), *tw = tensor_of(dtypes[d], 2, ws, w);
        tk_tensor *ys[2] = {tk_linear(ctx, tx, tw, NULL), tk_call(ctx, "tk::linear", tx, tw)};
        for (int k = 0; k < 2; k++) {
            assert_non_null(ys[k]);
            assert_int_equal(tk_tensor_dim(ys[k], 1), 2);
            for (int64_t i = 0; i < 4; i++)
                assert_true(value_at(ys[k], i) == want[i]);
            tk_tensor_free(ys[k]);
        }
        tk_tensor_free(tx);
        tk_tensor_free(tw);
    }
}

/* The CPU tk::linear (vectorized tiles of 4 rows by 2, rows over threads) against the sums
 * taken in double from the values the tensors hold, on shapes with every kind of tail: rows not a
 * multiple of 4, outputs of 2, K of 8; large enough that the rows are split over threads. The
 * error allowed is the dtype's rounding of the result plus float accumulation, relative to
 * sum |x w| + |b|, so a misplaced element (an error of the size of the terms) always fails. */
static void cpu__linear_tiles_and_threads_match_double_sums(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {4, 8, 2}, {13, 37, 9}, {3, 1000, 5}, {37, 300, 131}, {64, 256, 64}};
    const tk_dtype dtypes[] = {TK_F32, TK_F16, TK_BF16};
    const double rtol[] = {1e-5, 1.0 / 1024, 1.0 / 128};
    unsigned seed = 12345;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        float *x = malloc((size_t)(M * K) * sizeof(float)), *w = malloc((size_t)(N * K) * sizeof(float));
        float *b = malloc((size_t)N * sizeof(float));
        assert_non_null(x);
        assert_non_null(w);
        assert_non_null(b);
        for (int64_t i = 0; i < M * K; i++)
            x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
        for (int64_t i = 0; i < N * K; i++)
            w[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
        for (int64_t i = 0; i < N; i++)
            b[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 4096.0f - 4.0f;
        for (size_t d = 0; d < 3; d++) {
            const int64_t xs[] = {M, K}, ws[] = {N, K}, bs[] = {N};
            tk_tensor *tx = tensor_of(dtypes[d], 2, xs, x), *tw = tensor_of(dtypes[d], 2, ws, w);
            tk_tensor *tb = tensor_of(dtypes[d], 1, bs, b);
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                tk_tensor *y = tk_linear(ctx, tx, tw, with_bias ? tb : NULL);
                assert_non_null(y);
                for (int64_t m = 0; m < M; m++)
                    for (int64_t n = 0; n < N; n++) {
                        double want = with_bias ? value_at(tb, n) : 0.0, scale = fabs(want);
                        for (int64_t k = 0; k < K; k++) {
                            double t = (double)value_at(tx, m * K + k) * value_at(tw, n * K + k);
                            want += t;
                            scale += fabs(t);
                        }
                        double got = value_at(y, m * N + n);
                        if (!(fabs(got - want) <= rtol[d] * scale + 1e-30))
                            fail_msg("[%lld,%lld,%lld] dtype %d bias %d: y[%lld][%lld] is %.9g, expected %.9g",
                                     (long long)M, (long long)K, (long long)N, (int)dtypes[d], with_bias,
                                     (long long)m, (long long)n, got, want);
                    }
                tk_tensor_free(y);
            }
            tk_tensor_free(tx);
            tk_tensor_free(tw);
            tk_tensor_free(tb);
        }
        free(x);
        free(w);
        free(b);
    }
}

/* nn.Linear accepts [..., in]: leading dimensions are kept. */
static void ref__linear_keeps_leading_dimensions(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t xs[] = {2, 1, 3}, ws[] = {4, 3}, bs[] = {4};
    const float x[] = {1, 2, 3, -1, 0, 1};
    const float w[] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
    const float b[] = {0, 0, 0, 0.5f};
    const float want[] = {1, 2, 3, 6.5f, -1, 0, 1, 0.5f};
    tk_tensor *tx = tensor_of(TK_F32, 3, xs, x), *tw = tensor_of(TK_F32, 2, ws, w), *tb = tensor_of(TK_F32, 1, bs, b);
    tk_tensor *y = tk_linear(ctx, tx, tw, tb);
    assert_non_null(y);
    assert_int_equal(tk_tensor_rank(y), 3);
    assert_int_equal(tk_tensor_dim(y, 0), 2);
    assert_int_equal(tk_tensor_dim(y, 1), 1);
    assert_int_equal(tk_tensor_dim(y, 2), 4);
    for (int64_t i = 0; i < 8; i++)
        assert_true(value_at(y, i) == want[i]);
    tk_tensor_free(tx);
    tk_tensor_free(tw);
    tk_tensor_free(tb);
    tk_tensor_free(y);
}

/* --- registration and meta errors --------------------------------------------------------- */

static void ops__builtins_are_registered_with_their_schemas(void **state)
{
    (void)state;
    const char *const binary[] = {"tk::add", "tk::mul"};
    const char *const unary[] = {"tk::sin", "tk::cos", "tk::silu"};
    for (size_t i = 0; i < 2; i++) {
        const tk_op_def *def = tk_op_find(binary[i]);
        assert_non_null(def);
        assert_string_equal(def->schema, "(Tensor a, Tensor b) -> Tensor");
        assert_non_null(def->meta);
        assert_non_null(def->cpu);
    }
    for (size_t i = 0; i < 3; i++) {
        const tk_op_def *def = tk_op_find(unary[i]);
        assert_non_null(def);
        assert_string_equal(def->schema, "(Tensor x) -> Tensor");
        assert_non_null(def->meta);
        assert_non_null(def->cpu);
    }
    static const struct {
        const char *name, *schema;
    } rest[] = {
        {"tk::gelu", "(Tensor x, str approximate=\"tanh\") -> Tensor"},
        {"tk::softmax", "(Tensor x, int dim=-1) -> Tensor"},
        {"tk::layer_norm", "(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor"},
        {"tk::rms_norm", "(Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor"},
    };
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) {
        const tk_op_def *def = tk_op_find(rest[i].name);
        assert_non_null(def);
        assert_string_equal(def->schema, rest[i].schema);
        assert_non_null(def->meta);
        assert_non_null(def->cpu);
        assert_non_null(def->body);
        assert_non_null(def->cost);
    }
    const tk_op_def *lin = tk_op_find("tk::linear");
    assert_non_null(lin);
    assert_string_equal(lin->schema, "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor");
    assert_non_null(lin->cpu);
}

static tk_tensor *zeros(tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtype, rank, shape));
    memset(tk_tensor_data(t), 0, tk_tensor_nbytes(t));
    return t;
}

static int run1(tk_ctx *ctx, const char *op, int nin, tk_tensor *a, tk_tensor *b, tk_tensor *c)
{
    tk_tensor *in[3] = {a, b, c}, *out[1] = {NULL};
    int rc = tk_op_run(ctx, op, in, nin, out, 1);
    tk_tensor_free(out[0]);
    return rc;
}

static void meta__elementwise_errors_name_the_op_inputs_and_shapes(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t s23[] = {2, 3}, s32[] = {3, 2}, s6[] = {6};
    tk_tensor *a = zeros(TK_F32, 2, s23), *b = zeros(TK_F32, 2, s32), *c = zeros(TK_F32, 1, s6);
    tk_tensor *h = zeros(TK_F16, 2, s23), *i = zeros(TK_I32, 2, s23);
    tk_assert_error(run1(ctx, "tk::add", 2, a, b, NULL), TK_EINVAL,
                    "op 'tk::add': input 'a' is [2, 3] but 'b' is [3, 2] (shapes must match)");
    tk_assert_error(run1(ctx, "tk::mul", 2, a, c, NULL), TK_EINVAL,
                    "op 'tk::mul': input 'a' is [2, 3] but 'b' is [6] (shapes must match)");
    tk_assert_error(run1(ctx, "tk::add", 2, a, h, NULL), TK_EINVAL, "op 'tk::add': input 'a' is f32 but 'b' is f16");
    tk_assert_error(run1(ctx, "tk::silu", 1, i, NULL, NULL), TK_EUNSUPPORTED,
                    "op 'tk::silu' does not support dtype 'i32' (expected f32, f16 or bf16)");
    tk_assert_error(run1(ctx, "tk::mul", 2, i, i, NULL), TK_EUNSUPPORTED,
                    "op 'tk::mul' does not support dtype 'i32' (expected f32, f16 or bf16)");
    tk_assert_ok(run1(ctx, "tk::add", 2, a, a, NULL));
    tk_tensor *free_list[] = {a, b, c, h, i};
    for (size_t k = 0; k < sizeof free_list / sizeof *free_list; k++)
        tk_tensor_free(free_list[k]);
}

static void meta__linear_errors_name_the_mismatched_shapes(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t xs[] = {4, 128}, ws[] = {64, 100}, wok[] = {64, 128}, w3[] = {64, 128, 1};
    const int64_t bs[] = {32}, bok[] = {64};
    tk_tensor *x = zeros(TK_BF16, 2, xs), *w = zeros(TK_BF16, 2, ws), *wgood = zeros(TK_BF16, 2, wok);
    tk_tensor *w3d = zeros(TK_BF16, 3, w3), *b = zeros(TK_BF16, 1, bs), *bgood = zeros(TK_BF16, 1, bok);
    tk_tensor *wf = zeros(TK_F32, 2, wok), *xi = zeros(TK_I64, 2, xs);
    tk_assert_error(run1(ctx, "tk::linear", 3, x, w, bgood), TK_EINVAL,
                    "op 'tk::linear': weight is [64, 100] but x has 128 features");
    tk_assert_error(run1(ctx, "tk::linear", 3, x, wgood, b), TK_EINVAL,
                    "op 'tk::linear': bias is [32] but weight has 64 output features (expected [64])");
    tk_assert_error(run1(ctx, "tk::linear", 3, x, w3d, bgood), TK_EINVAL,
                    "op 'tk::linear': weight is [64, 128, 1], expected [out_features, in_features]");
    tk_assert_error(run1(ctx, "tk::linear", 3, x, wf, bgood), TK_EINVAL,
                    "op 'tk::linear': x is bf16, weight f32 and bias bf16 (they must share a dtype)");
    tk_assert_error(run1(ctx, "tk::linear", 3, xi, wgood, bgood), TK_EUNSUPPORTED,
                    "op 'tk::linear' does not support dtype 'i64' (expected f32, f16 or bf16)");
    tk_assert_ok(run1(ctx, "tk::linear", 3, x, wgood, bgood));
    tk_tensor *free_list[] = {x, w, wgood, w3d, b, bgood, wf, xi};
    for (size_t k = 0; k < sizeof free_list / sizeof *free_list; k++)
        tk_tensor_free(free_list[k]);
}

/* A caller-provided output must have the shape the meta function gives. */
static void meta__a_wrong_output_is_refused(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t s4[] = {4}, s5[] = {5};
    tk_tensor *x = zeros(TK_F32, 1, s4), *y = zeros(TK_F32, 1, s5);
    tk_tensor *in[1] = {x}, *out[1] = {y};
    assert_int_equal(tk_op_run(ctx, "tk::sin", in, 1, out, 1), TK_EINVAL);
    tk_tensor_free(x);
    tk_tensor_free(y);
}

/* The causal attention kernel's block order (kernels/attention_grid.h): every head and query
 * block exactly once; within a group of heads, query blocks from the last (longest) down; groups
 * of every head while their k and v fit in L2 together, of what 32 MB holds (at least 8) past it. */
static void grid__causal_attention_blocks_cover_the_grid_once_longest_first(void **state)
{
    (void)state;
    assert_int_equal(tk_sdpa_causal_group(2ll * 1024 * 64 * 2, 96), 96);        /* GPT-2: 24 MB, one group */
    assert_int_equal(tk_sdpa_causal_group(2ll * 4096 * 128 * 2, 32), 32);       /* 64 MB: one */
    assert_int_equal(tk_sdpa_causal_group(2ll * 4096 * 128 * 2, 96), 16);       /* 192 MB: 16 heads of 2 MB */
    assert_int_equal(tk_sdpa_causal_group(2ll * 65536 * 128 * 2, 96), 8);       /* 32 MB a head: at least 8 */
    assert_int_equal(tk_sdpa_causal_group(2ll * 65536 * 128 * 2, 5), 5);
    const int heads[] = {1, 7, 8, 40, 96}, nqs[] = {1, 3, 64}, groups[] = {1, 3, 8, 16, 200};
    for (size_t a = 0; a < sizeof heads / sizeof *heads; a++)
        for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
            for (size_t c = 0; c < sizeof groups / sizeof *groups; c++) {
                int nh = heads[a], nq = nqs[b], group = groups[c] < nh ? groups[c] : nh;
                unsigned char *seen = calloc((size_t)(nh * nq), 1);
                int *last = malloc(sizeof(int) * (size_t)nh);
                assert_non_null(seen);
                assert_non_null(last);
                for (int h = 0; h < nh; h++)
                    last[h] = nq;
                for (int lin = 0; lin < nh * nq; lin++) {
                    int h = -1, q = -1;
                    tk_sdpa_causal_block(lin, nh, nq, group, &h, &q);
                    assert_true(h >= 0 && h < nh && q >= 0 && q < nq);
                    assert_int_equal(seen[h * nq + q], 0);
                    seen[h * nq + q] = 1;
                    assert_true(q < last[h]); /* a head's blocks come longest first */
                    last[h] = q;
                    assert_int_equal(h / group, lin / (group * nq)); /* its group's blocks together */
                }
                free(seen);
                free(last);
            }
}

/* The flash kernel's form (attention_grid.h): two warpgroups a block where a block reads 1024 keys
 * or more on average (causal: half of the keys), and the dynamic shared memory each form takes. */
static void grid__attention_blocks_of_many_keys_take_two_warpgroups(void **state)
{
    (void)state;
    assert_int_equal(tk_sdpa_warpgroups(4096, 4096, 0), 2);
    assert_int_equal(tk_sdpa_warpgroups(4096, 4096, 1), 2);
    assert_int_equal(tk_sdpa_warpgroups(1024, 1024, 0), 2);
    assert_int_equal(tk_sdpa_warpgroups(1023, 1023, 0), 1);
    assert_int_equal(tk_sdpa_warpgroups(1024, 1024, 1), 1); /* causal: 512 keys a block on average */
    assert_int_equal(tk_sdpa_warpgroups(2048, 2048, 1), 2);
    assert_int_equal(tk_sdpa_warpgroups(70, 1030, 0), 2);   /* few queries, many keys */
    assert_int_equal(tk_sdpa_warpgroups(70, 4096, 1), 1);   /* causal: key j <= query i, so 70 at most */
    assert_int_equal(tk_sdpa_warpgroups(128, 128, 0), 1);   /* GPT-2 at batch 1 seq 128 */
    /* q, then k and v: two tiles each at D 64, one each at D 128; static up to 48 KiB, else
     * dynamic with 1 KiB to align */
    assert_int_equal(TK_SDPA_TILES(64, 1), (64 + 4 * 64) * 64 * 2);
    assert_int_equal(TK_SDPA_DYNAMIC(64, 1), 0);
    assert_int_equal(TK_SDPA_DYNAMIC(64, 2), 0); /* 48 KiB exactly */
    assert_int_equal(TK_SDPA_DYNAMIC(128, 1), 0);
    assert_int_equal(TK_SDPA_DYNAMIC(128, 2), (128 + 2 * 64) * 128 * 2 + 1024);
}

#define CPU_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_cpu, teardown_cpu)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half__every_bf16_and_f16_survives_a_round_trip_through_float),
        cmocka_unit_test(grid__causal_attention_blocks_cover_the_grid_once_longest_first),
        cmocka_unit_test(grid__attention_blocks_of_many_keys_take_two_warpgroups),
        cmocka_unit_test(half__widening_gives_the_exact_values),
        cmocka_unit_test(half__bf16_rounds_to_nearest_even),
        cmocka_unit_test(half__f16_rounds_to_nearest_even_with_subnormals_and_overflow),
        CPU_TEST(ref__unary_ops_match_hand_computed_values),
        CPU_TEST(ref__binary_ops_add_and_multiply_elementwise),
        CPU_TEST(ref__gelu_exact_matches_the_erf_form),
        CPU_TEST(ref__row_ops_match_hand_computed_rows),
        CPU_TEST(ref__row_ops_in_16_bits_round_once),
        CPU_TEST(ref__sdpa_matches_hand_computed_attention),
        CPU_TEST(ref__sdpa_layouts_agree),
        CPU_TEST(ref__matmul_matches_hand_computed_products),
        CPU_TEST(ref__mlp_runs_the_pairs_through_the_hidden_tensor_it_is_given),
        CPU_TEST(ref__embedding_gathers_rows),
        CPU_TEST(ref__layout_ops_move_elements_where_pytorch_does),
        CPU_TEST(ref__f16_and_bf16_compute_in_float_and_round_once),
        CPU_TEST(ref__gelu_matches_the_tanh_form_evaluated_in_double),
        CPU_TEST(ref__linear_matches_a_hand_computed_2x3_example),
        CPU_TEST(ref__linear_without_bias),
        CPU_TEST(ref__linear_keeps_leading_dimensions),
        CPU_TEST(cpu__linear_tiles_and_threads_match_double_sums),
        cmocka_unit_test(ops__builtins_are_registered_with_their_schemas),
        CPU_TEST(meta__elementwise_errors_name_the_op_inputs_and_shapes),
        CPU_TEST(meta__linear_errors_name_the_mismatched_shapes),
        CPU_TEST(meta__a_wrong_output_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
