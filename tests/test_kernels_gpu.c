/* The built-in kernels on a GPU (CTest label `gpu`): every elementwise op in every dtype, and
 * tk::linear on cuBLASLt, against their CPU references (the same ops run on a CPU context) on
 * fresh random inputs, at sizes on and off the 16-byte vector width, with the GPU output
 * poisoned (all bits set: NaN in every float format) before each run; tk::linear's plan cache
 * over a stream of sizes and from several threads. Exits 77 (skipped) where there is no CUDA
 * driver. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <tk/half.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "cublaslt.h" /* tk_linear_stats_get */

static const tk_device CPU = {TK_DEVICE_CPU, 0};
static const tk_device GPU = {TK_DEVICE_CUDA, 0};

typedef struct fixture {
    tk_ctx *gpu, *cpu;
} fixture;

static int setup(void **state)
{
    static fixture f;
    if (tk_ctx_new(&f.gpu, GPU) != 0) {
        print_error("tk_ctx_new(cuda:0): %s\n", tk_error_last());
        return -1;
    }
    tk_assert_ok(tk_ctx_new(&f.cpu, CPU));
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tk_ctx_free(f->gpu);
    tk_ctx_free(f->cpu);
    return 0;
}

static const tk_dtype DTYPES[] = {TK_F32, TK_F16, TK_BF16};

/* float: 1e-5; f16 and bf16: 1e-2 (one 16-bit rounding apart is at most 2^-7 relative). The
 * absolute floor covers f16 subnormals, where one unit is 6e-8. */
static double rtol_of(tk_dtype d) { return d == TK_F32 ? 1e-5 : 1e-2; }
static double atol_of(tk_dtype d) { return d == TK_F32 ? 1e-7 : 1e-5; }

/* Uniform in [lo, hi), from a per-test seed: fresh values, never all zeros. */
static uint32_t g_seed = 12345u;
static float urand(float lo, float hi)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_seed >> 8) * (1.0f / 16777216.0f);
}

static void fill(tk_tensor *t, float lo, float hi)
{
    void *p = tk_tensor_data(t);
    for (int64_t i = 0; i < tk_numel(t); i++) {
        float v = urand(lo, hi);
        switch (tk_tensor_dtype(t)) {
        case TK_F16: ((uint16_t *)p)[i] = tk_f32_to_f16(v); break;
        case TK_BF16: ((uint16_t *)p)[i] = tk_f32_to_bf16(v); break;
        default: ((float *)p)[i] = v; break;
        }
    }
}

static void set_at(tk_tensor *t, int64_t i, float v)
{
    void *p = tk_tensor_data(t);
    switch (tk_tensor_dtype(t)) {
    case TK_F16: ((uint16_t *)p)[i] = tk_f32_to_f16(v); break;
    case TK_BF16: ((uint16_t *)p)[i] = tk_f32_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

static double value_at(const tk_tensor *t, int64_t i)
{
    const void *p = tk_tensor_data(t);
    switch (tk_tensor_dtype(t)) {
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)p)[i]);
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static tk_tensor *host(tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtype, rank, shape));
    return t;
}

/* A GPU copy of a host tensor. */
static tk_tensor *upload(fixture *f, const tk_tensor *h)
{
    tk_tensor *d;
    tk_assert_ok(tk_tensor_new(&d, f->gpu, GPU, tk_tensor_dtype(h), tk_tensor_rank(h), tk_tensor_shape(h)));
    tk_assert_ok(tk_tensor_copy(f->gpu, d, h));
    return d;
}

/* A GPU tensor filled with 0xff bytes: NaN in f32, f16 and bf16 alike. */
static tk_tensor *poisoned(fixture *f, tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_tensor *h = host(dtype, rank, shape);
    memset(tk_tensor_data(h), 0xff, tk_tensor_nbytes(h));
    tk_tensor *d = upload(f, h);
    tk_tensor_free(h);
    return d;
}

static tk_tensor *download(fixture *f, const tk_tensor *d)
{
    tk_tensor *h = host(tk_tensor_dtype(d), tk_tensor_rank(d), tk_tensor_shape(d));
    tk_assert_ok(tk_tensor_copy(f->gpu, h, d));
    return h;
}

/* got and want agree within rtol |want| + atol everywhere (a NaN left from the poison fails). */
static void assert_close(const char *what, const tk_tensor *got, const tk_tensor *want, double rtol, double atol)
{
    int64_t n = tk_numel(want);
    for (int64_t i = 0; i < n; i++) {
        double g = value_at(got, i), w = value_at(want, i), err = fabs(g - w);
        if (!(err <= rtol * fabs(w) + atol))
            fail_msg("%s: element %lld of %lld is %.9g, the reference %.9g (error %.3g > %.3g)", what, (long long)i,
                     (long long)n, g, w, err, rtol * fabs(w) + atol);
    }
}

/* Runs op on inputs (host tensors): on the CPU for the reference, on the GPU into a poisoned
 * output (optionally through device tensors offset by `offset` elements, which takes the
 * kernels' unaligned path), and compares. */
static void check_op(fixture *f, const char *op, int nin, tk_tensor *const *hin, int offset, double rtol,
                     double atol)
{
    char what[128];
    tk_tensor *ref[1] = {NULL}, *dout[1] = {NULL}, *din[3] = {NULL}, *bases[4] = {NULL};
    tk_assert_ok(tk_op_run(f->cpu, op, hin, nin, ref, 1));
    const tk_tensor *r = ref[0];
    tk_dtype dtype = tk_tensor_dtype(r);
    if (!offset) {
        for (int i = 0; i < nin; i++)
            din[i] = upload(f, hin[i]);
        dout[0] = poisoned(f, dtype, tk_tensor_rank(r), tk_tensor_shape(r));
    } else {
        /* each operand inside a larger allocation, `offset` elements in */
        size_t es = tk_dtype_size(dtype);
        for (int i = 0; i <= nin; i++) {
            const tk_tensor *shape_of = i < nin ? hin[i] : r;
            int64_t big = tk_numel(shape_of) + offset;
            tk_tensor *hb = host(dtype, 1, &big);
            memset(tk_tensor_data(hb), 0xff, tk_tensor_nbytes(hb));
            if (i < nin)
                memcpy((char *)tk_tensor_data(hb) + (size_t)offset * es, tk_tensor_data(hin[i]), tk_tensor_nbytes(hin[i]));
            bases[i] = upload(f, hb);
            tk_tensor_free(hb);
            tk_tensor **slot = i < nin ? &din[i] : &dout[0];
            tk_assert_ok(tk_tensor_wrap(slot, GPU, dtype, tk_tensor_rank(shape_of), tk_tensor_shape(shape_of),
                                        (char *)tk_tensor_data(bases[i]) + (size_t)offset * es));
        }
    }
    tk_assert_ok(tk_op_run(f->gpu, op, din, nin, dout, 1));
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dout[0]);
    snprintf(what, sizeof what, "%s %s n=%lld%s", op, tk_dtype_name(dtype), (long long)tk_numel(r),
             offset ? " (unaligned)" : "");
    assert_close(what, got, r, rtol, atol);
    tk_tensor_free(got);
    tk_tensor_free(ref[0]);
    tk_tensor_free(dout[0]);
    for (int i = 0; i < 3; i++)
        tk_tensor_free(din[i]);
    for (int i = 0; i < 4; i++)
        tk_tensor_free(bases[i]);
}

/* Sizes on and off the vector widths (4 floats, 8 halves): below one vector, exactly one, one
 * past, a tail of 3, a grid smaller than the cap, and 2^23 + 5, large enough that the
 * grid-stride loop makes several trips (unrolled and single) on any GPU. */
static const int64_t SIZES[] = {1, 3, 7, 8, 9, 1000, 4096, 4099, (1 << 20) + 3, (1 << 23) + 5};
#define NSIZES (sizeof SIZES / sizeof *SIZES)

static void check_unary(fixture *f, const char *op, float lo, float hi)
{
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < NSIZES; s++) {
            tk_tensor *x = host(DTYPES[d], 1, &SIZES[s]);
            fill(x, lo, hi);
            check_op(f, op, 1, &x, 0, rtol_of(DTYPES[d]), atol_of(DTYPES[d]));
            tk_tensor_free(x);
        }
    }
}

static void check_binary(fixture *f, const char *op)
{
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < NSIZES; s++) {
            tk_tensor *ab[2] = {host(DTYPES[d], 1, &SIZES[s]), host(DTYPES[d], 1, &SIZES[s])};
            fill(ab[0], -4.0f, 4.0f);
            fill(ab[1], -4.0f, 4.0f);
            check_op(f, op, 2, ab, 0, rtol_of(DTYPES[d]), atol_of(DTYPES[d]));
            tk_tensor_free(ab[0]);
            tk_tensor_free(ab[1]);
        }
    }
}

static void gpu__add_matches_the_reference(void **state) { check_binary(*state, "tk::add"); }
static void gpu__mul_matches_the_reference(void **state) { check_binary(*state, "tk::mul"); }
static void gpu__sin_matches_the_reference(void **state) { check_unary(*state, "tk::sin", -10.0f, 10.0f); }
static void gpu__cos_matches_the_reference(void **state) { check_unary(*state, "tk::cos", -10.0f, 10.0f); }
static void gpu__silu_matches_the_reference(void **state) { check_unary(*state, "tk::silu", -8.0f, 8.0f); }
static void gpu__gelu_matches_the_reference(void **state) { check_unary(*state, "tk::gelu", -8.0f, 8.0f); }

/* Tensors that are not 16-byte aligned (wrapped one element into an allocation) take the
 * kernels' scalar path and still match. */
static void gpu__unaligned_tensors_match_the_reference(void **state)
{
    fixture *f = *state;
    const int64_t sizes[] = {5, 4099, (1 << 20) + 3};
    const char *const unary[] = {"tk::sin", "tk::cos", "tk::silu", "tk::gelu"};
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < 3; s++) {
            tk_tensor *ab[2] = {host(DTYPES[d], 1, &sizes[s]), host(DTYPES[d], 1, &sizes[s])};
            fill(ab[0], -4.0f, 4.0f);
            fill(ab[1], -4.0f, 4.0f);
            check_op(f, "tk::add", 2, ab, 1, rtol_of(DTYPES[d]), atol_of(DTYPES[d]));
            check_op(f, "tk::mul", 2, ab, 3, rtol_of(DTYPES[d]), atol_of(DTYPES[d]));
            for (size_t u = 0; u < 4; u++)
                check_op(f, unary[u], 1, ab, 1, rtol_of(DTYPES[d]), atol_of(DTYPES[d]));
            tk_tensor_free(ab[0]);
            tk_tensor_free(ab[1]);
        }
    }
}

/* --- tk::linear ---------------------------------------------------------------------------- */

/* got (y of x [M, K] = hin[0], weight hin[1], bias hin[2]) against the CPU reference ref. Both
 * accumulate in float, in different orders: |gpu - cpu| <= 2 K u S + rtol |ref| per element, with
 * u = 2^-24 and S = sum_k |x w| + |b| (the classic dot-product bound, so the tolerance grows with
 * K), rtol the output format's. */
static void assert_linear_close(const char *what, tk_tensor *const *hin, const tk_tensor *ref, const tk_tensor *got,
                                int64_t M, int64_t K, int64_t N)
{
    tk_dtype dtype = tk_tensor_dtype(ref);
    const double u = ldexp(1.0, -24), rtol = rtol_of(dtype);
    double max_err = 0.0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double s = hin[2] ? fabs(value_at(hin[2], n)) : 0.0;
            for (int64_t k = 0; k < K; k++)
                s += fabs(value_at(hin[0], m * K + k) * value_at(hin[1], n * K + k));
            double g = value_at(got, m * N + n), r = value_at(ref, m * N + n), err = fabs(g - r);
            double tol = 2.0 * (double)K * u * s + rtol * fabs(r) + atol_of(dtype);
            if (!(err <= tol))
                fail_msg("%s: y[%lld, %lld] is %.9g, the reference %.9g (error %.3g > %.3g)", what, (long long)m,
                         (long long)n, g, r, err, tol);
            if (err > max_err)
                max_err = err;
        }
    }
    print_message("%s: max abs error %.3g\n", what, max_err);
}

/* y = x W^T + b on cuBLASLt against the CPU reference (assert_linear_close), on fresh random
 * operands; with offset, each operand `offset` elements into a larger allocation; without_bias:
 * no b (nn.Linear(bias=False): the matmul's default epilogue). */
static void check_linear_ex(fixture *f, tk_dtype dtype, int rank_x, const int64_t *xshape, int64_t N, int offset,
                            int without_bias)
{
    char what[160];
    int64_t K = xshape[rank_x - 1], M = 1;
    for (int i = 0; i < rank_x - 1; i++)
        M *= xshape[i];
    const int64_t wshape[2] = {N, K};
    tk_tensor *hin[3] = {host(dtype, rank_x, xshape), host(dtype, 2, wshape), host(dtype, 1, &N)};
    fill(hin[0], -1.0f, 1.0f);
    fill(hin[1], -1.0f, 1.0f);
    fill(hin[2], -1.0f, 1.0f);
    if (without_bias) {
        tk_tensor_free(hin[2]);
        hin[2] = NULL;
    }
    tk_tensor *ref[1] = {NULL};
    tk_assert_ok(tk_op_run(f->cpu, "tk::linear", hin, 3, ref, 1));

    tk_tensor *din[3] = {NULL}, *dout[1] = {NULL}, *bases[4] = {NULL};
    size_t es = tk_dtype_size(dtype);
    for (int i = 0; i < 4; i++) {
        const tk_tensor *like = i < 3 ? hin[i] : ref[0];
        if (!like)
            continue; /* no bias */
        if (!offset) {
            bases[i] = i < 3 ? upload(f, like) : poisoned(f, dtype, tk_tensor_rank(like), tk_tensor_shape(like));
            *(i < 3 ? &din[i] : &dout[0]) = bases[i];
            continue;
        }
        int64_t big = tk_numel(like) + offset;
        tk_tensor *hb = host(dtype, 1, &big);
        memset(tk_tensor_data(hb), 0xff, tk_tensor_nbytes(hb));
        if (i < 3)
            memcpy((char *)tk_tensor_data(hb) + (size_t)offset * es, tk_tensor_data(like), tk_tensor_nbytes(like));
        bases[i] = upload(f, hb);
        tk_tensor_free(hb);
        tk_assert_ok(tk_tensor_wrap(i < 3 ? &din[i] : &dout[0], GPU, dtype, tk_tensor_rank(like),
                                    tk_tensor_shape(like), (char *)tk_tensor_data(bases[i]) + (size_t)offset * es));
    }
    tk_assert_ok(tk_op_run(f->gpu, "tk::linear", din, 3, dout, 1));
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dout[0]);

    snprintf(what, sizeof what, "tk::linear %s M=%lld K=%lld N=%lld%s%s", tk_dtype_name(dtype), (long long)M,
             (long long)K, (long long)N, offset ? " (unaligned)" : "", without_bias ? " (no bias)" : "");
    assert_linear_close(what, hin, ref[0], got, M, K, N);
    tk_tensor_free(got);
    tk_tensor_free(ref[0]);
    for (int i = 0; i < 3; i++) {
        tk_tensor_free(hin[i]);
        if (offset && din[i])
            tk_tensor_free(din[i]);
    }
    if (offset)
        tk_tensor_free(dout[0]);
    for (int i = 0; i < 4; i++)
        tk_tensor_free(bases[i]);
}

static void check_linear(fixture *f, tk_dtype dtype, int rank_x, const int64_t *xshape, int64_t N, int offset)
{
    check_linear_ex(f, dtype, rank_x, xshape, N, offset, 0);
}

/* nn.Linear(bias=False) on cuBLASLt: no bias pointer, the default epilogue, against the CPU
 * reference; aligned and not, and a leading dimension kept. */
static void gpu__linear_without_bias_matches_the_reference(void **state)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 100, 33}, {128, 128, 64}, {257, 512, 129}};
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int64_t xshape[2] = {shapes[s][0], shapes[s][1]};
            check_linear_ex(*state, DTYPES[d], 2, xshape, shapes[s][2], 0, 1);
            check_linear_ex(*state, DTYPES[d], 2, xshape, shapes[s][2], 1, 1);
        }
        const int64_t x3[3] = {2, 5, 64};
        check_linear_ex(*state, DTYPES[d], 3, x3, 48, 0, 1);
    }
}

static void gpu__linear_matches_the_reference(void **state)
{
    fixture *f = *state;
    /* {M, K, N}: tiny, odd, the MLP's two layers, not multiples of 8 or 16, and a larger one */
    static const int64_t shapes[][3] = {{1, 1, 1},     {2, 3, 2},      {7, 100, 33}, {128, 128, 64},
                                        {128, 64, 128}, {257, 512, 129}, {512, 1024, 256}};
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int64_t xshape[2] = {shapes[s][0], shapes[s][1]};
            check_linear(f, DTYPES[d], 2, xshape, shapes[s][2], 0);
        }
    }
}

/* x [2, 5, 64]: leading dimensions flattened into M = 10 rows. */
static void gpu__linear_flattens_leading_dimensions(void **state)
{
    const int64_t xshape[3] = {2, 5, 64};
    for (size_t d = 0; d < 3; d++)
        check_linear(*state, DTYPES[d], 3, xshape, 48, 0);
}

/* Operands one element off 256-byte alignment: the alignment promised to cuBLASLt follows the
 * pointers, so it picks a kernel that can read them. */
static void gpu__linear_with_unaligned_tensors_matches_the_reference(void **state)
{
    const int64_t xshape[2] = {33, 72};
    for (size_t d = 0; d < 3; d++)
        check_linear(*state, DTYPES[d], 2, xshape, 40, 1);
}

/* --- the fused forms ---------------------------------------------------------------------------
 * tk::_linear_gelu and tk::_linear_add (what the executor runs for linear + gelu and linear + add):
 * one cuBLASLt matmul with the GELU epilogue, or with the residual as C, against the exact value
 * in double; the CPU fallback (the two ops, rounded in between) against the same. The bound is
 * tk::linear's (assert_linear_close) through GELU (slope at most 1.13) or with the residual's own
 * rounding, plus one 16-bit rounding of the intermediate on the CPU side, and one of the product
 * before the bias: on an H200 cuBLASLt's GELU_BIAS algorithm for bf16 33x100 (N x K) put
 * y = gelu(-0.0173) at -0.00772 instead of -0.00862, an error of 0.0018 in the pre-activation,
 * which a 16-bit rounding of the product (about 0.5) before the bias was added explains. */

static double gelu_exact(double v) { return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

static void check_fused(fixture *f, int gelu, tk_dtype dtype, int64_t M, int64_t K, int64_t N, int with_bias)
{
    const int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N};
    tk_tensor *x = host(dtype, 2, xs), *w = host(dtype, 2, ws), *b = with_bias ? host(dtype, 1, &N) : NULL;
    tk_tensor *r = gelu ? NULL : host(dtype, 2, ys);
    fill(x, -1.0f, 1.0f);
    fill(w, -1.0f, 1.0f);
    if (b)
        fill(b, -1.0f, 1.0f);
    if (r)
        fill(r, -2.0f, 2.0f);
    tk_tensor *hin[4] = {r, x, w, b}, **args = gelu ? hin + 1 : hin;
    int nin = gelu ? 3 : 4;
    const char *op = gelu ? "tk::_linear_gelu" : "tk::_linear_add";
    tk_tensor *din[4] = {NULL}, *dout[1] = {poisoned(f, dtype, 2, ys)}, *cout[1] = {NULL};
    for (int i = 0; i < nin; i++)
        din[i] = args[i] ? upload(f, args[i]) : NULL;
    tk_assert_ok(tk_op_run(f->gpu, op, din, nin, dout, 1));
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_assert_ok(tk_op_run(f->cpu, op, args, nin, cout, 1));
    tk_tensor *got = download(f, dout[0]);
    const double u = ldexp(1.0, -24), rtol = rtol_of(dtype);
    double max_err = 0.0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double h = b ? value_at(b, n) : 0.0, s = b ? fabs(h) : 0.0, bias = fabs(h);
            for (int64_t k = 0; k < K; k++) {
                double p = value_at(x, m * K + k) * value_at(w, n * K + k);
                h += p;
                s += fabs(p);
            }
            double want = gelu ? gelu_exact(h) : h + value_at(r, m * N + n);
            double tol = 1.2 * (2.0 * (double)K * u * s + 2.0 * rtol * (fabs(h) + bias)) + rtol * fabs(want) +
                         atol_of(dtype);
            double g = value_at(got, m * N + n), c = value_at(cout[0], m * N + n);
            if (!(fabs(g - want) <= tol) || !(fabs(c - want) <= tol))
                fail_msg("%s %s M=%lld K=%lld N=%lld%s: y[%lld, %lld] is %.9g on the GPU and %.9g on the CPU, "
                         "exactly %.9g (bound %.3g)", op, tk_dtype_name(dtype), (long long)M, (long long)K,
                         (long long)N, b ? "" : " (no bias)", (long long)m, (long long)n, g, c, want, tol);
            if (fabs(g - want) > max_err)
                max_err = fabs(g - want);
        }
    }
    print_message("%s %s M=%lld K=%lld N=%lld%s: max abs error %.3g\n", op, tk_dtype_name(dtype), (long long)M,
                  (long long)K, (long long)N, b ? "" : " (no bias)", max_err);
    tk_tensor_free(got);
    tk_tensor_free(cout[0]);
    tk_tensor_free(dout[0]);
    for (int i = 0; i < 4; i++) {
        tk_tensor_free(din[i]);
        tk_tensor_free(hin[i]);
    }
}

static void gpu__fused_linear_forms_match_the_exact_values(void **state)
{
    fixture *f = *state;
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 100, 33}, {128, 128, 512}, {257, 512, 128}, {4096, 128, 512}};
    tk_linear_stats before, after;
    tk_assert_ok(tk_linear_stats_get(f->gpu, &before));
    for (int gelu = 0; gelu < 2; gelu++)
        for (size_t d = 0; d < 3; d++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (int bias = 0; bias < 2; bias++)
                    check_fused(f, gelu, DTYPES[d], shapes[s][0], shapes[s][1], shapes[s][2], bias);
    tk_assert_ok(tk_linear_stats_get(f->gpu, &after));
    /* how many ran as two ops (no fused algorithm): reported; bf16 and f16 must have one */
    print_message("fused forms: %llu of %zu calls fell back to two ops\n",
                  after.fused_fallbacks - before.fused_fallbacks, (size_t)2 * 3 * 5 * 2);
    tk_assert_ok(tk_linear_stats_get(f->gpu, &before));
    for (int gelu = 0; gelu < 2; gelu++)
        for (int bias = 0; bias < 2; bias++) {
            check_fused(f, gelu, TK_BF16, 4096, 128, 512, bias);
            check_fused(f, gelu, TK_F16, 96, 512, 128, bias);
        }
    tk_assert_ok(tk_linear_stats_get(f->gpu, &after));
    assert_int_equal(after.fused_fallbacks, before.fused_fallbacks);
}

/* --- tk::linear's plan cache -------------------------------------------------------------- */

static tk_linear_stats stats_of(fixture *f)
{
    tk_linear_stats st;
    tk_assert_ok(tk_linear_stats_get(f->gpu, &st));
    return st;
}

/* Up to 1024 rows of f16 or bf16 with K and N multiples of 64, aligned: tk::linear runs
 * linear_small.cu's kernel (cuBLASLt's counters do not move), with and without a bias, every
 * result against the reference; from 1025 rows, or N = 72, cuBLASLt (a plan looked up), and its
 * fused forms always (the same shapes through tk::_linear_gelu and tk::_linear_add). */
static void gpu__few_rows_run_the_ops_own_kernel(void **state)
{
    fixture *f = *state;
    static const int64_t few[][3] = {{1, 64, 64}, {63, 128, 512}, {65, 512, 128}, {300, 128, 512}, {1024, 64, 192}};
    for (size_t d = 0; d < 2; d++) {
        tk_dtype dt = d ? TK_BF16 : TK_F16;
        for (size_t s = 0; s < sizeof few / sizeof *few; s++) {
            const int64_t xshape[2] = {few[s][0], few[s][1]};
            tk_linear_stats a = stats_of(f), b;
            check_linear(f, dt, 2, xshape, few[s][2], 0);
            check_linear_ex(f, dt, 2, xshape, few[s][2], 0, 1); /* no bias */
            b = stats_of(f);
            assert_int_equal(b.plan_hits + b.plan_misses, a.plan_hits + a.plan_misses);
            for (int gelu = 0; gelu < 2; gelu++)
                check_fused(f, gelu, dt, few[s][0], few[s][1], few[s][2], 1);
            a = stats_of(f);
            assert_true(a.plan_hits + a.plan_misses >= b.plan_hits + b.plan_misses + 2); /* one each, two on a fallback */
        }
        static const int64_t lt[][3] = {{1025, 64, 64}, {64, 64, 72}};
        for (size_t s = 0; s < 2; s++) {
            const int64_t xshape[2] = {lt[s][0], lt[s][1]};
            tk_linear_stats a = stats_of(f), b;
            check_linear(f, dt, 2, xshape, lt[s][2], 0);
            b = stats_of(f);
            assert_int_equal(b.plan_hits + b.plan_misses, a.plan_hits + a.plan_misses + 1);
        }
    }
}

/* A serving stream: the MLP's first layer (bf16, K = 128, N = 64) over many batch sizes in
 * [1, 1024] in random order (the kernel for few rows), each new one and each repeat against the
 * reference; then plain
 * counts on a shape no other test uses (N = 72): a repeat is a hit with no heuristic query, and a
 * new M of a known bucket costs one cublasLtMatmulAlgoCheck, not a query, when the check passes. */
static void gpu__linear_over_a_stream_of_sizes_matches_and_caches_plans(void **state)
{
    fixture *f = *state;
    uint32_t s = 2024u;
    for (int i = 0; i < 48; i++) {
        s = s * 1664525u + 1013904223u;
        int64_t M = i % 4 == 3 ? 1 + (int64_t)(i * 7) % 1024 : 1 + (int64_t)(s >> 8) % 1024;
        const int64_t xshape[2] = {M, 128};
        check_linear(f, TK_BF16, 2, xshape, 64, 0);
        if (i % 8 == 7) /* the same size again, through the cached plan */
            check_linear(f, TK_BF16, 2, xshape, 64, 0);
    }

    const int64_t x300[2] = {300, 96}, x301[2] = {301, 96};
    tk_linear_stats s0 = stats_of(f);
    check_linear(f, TK_BF16, 2, x300, 72, 0);
    tk_linear_stats s1 = stats_of(f);
    print_message("M=300: %llu heuristic queries, %llu checks, %llu reused; %zu plans of %zu\n",
                  s1.heuristics - s0.heuristics, s1.checks - s0.checks, s1.reuses - s0.reuses, s1.entries,
                  s1.capacity);
    assert_int_equal(s1.plan_misses, s0.plan_misses + 1);
    assert_int_equal(s1.plan_hits, s0.plan_hits);
    /* the bucket's algorithm asked at M = 512, then checked for 300 (and asked for 300 itself only
     * when the check refuses it) */
    assert_true(s1.heuristics - s0.heuristics >= 1 && s1.heuristics - s0.heuristics <= 2);
    assert_int_equal(s1.checks, s0.checks + 1);

    check_linear(f, TK_BF16, 2, x300, 72, 0);
    tk_linear_stats s2 = stats_of(f);
    assert_int_equal(s2.plan_hits, s1.plan_hits + 1);
    assert_int_equal(s2.plan_misses, s1.plan_misses);
    assert_int_equal(s2.heuristics, s1.heuristics);
    assert_int_equal(s2.checks, s1.checks);

    check_linear(f, TK_BF16, 2, x301, 72, 0);
    tk_linear_stats s3 = stats_of(f);
    assert_int_equal(s3.plan_misses, s2.plan_misses + 1);
    assert_int_equal(s3.checks, s2.checks + 1);
    assert_int_equal(s3.heuristics - s2.heuristics, s3.reuses > s2.reuses ? 0 : 1);
    assert_true(s3.entries <= s3.capacity);
}

/* Threads, each with its own context, run tk::linear over their own sizes on shared weights at
 * once (one plan cache, a descriptor per context); every output against the reference after. */
enum { LT_THREADS = 4, LT_CALLS = 24 };

typedef struct lt_worker {
    tk_ctx *ctx;
    tk_tensor *x[LT_CALLS], *y[LT_CALLS];
    tk_tensor *w, *b;
    int rc;
    char err[512];
} lt_worker;

static void *lt_work(void *arg)
{
    lt_worker *w = arg;
    for (int i = 0; i < LT_CALLS && !w->rc; i++) {
        tk_tensor *in[3] = {w->x[i], w->w, w->b};
        w->rc = tk_op_run(w->ctx, "tk::linear", in, 3, &w->y[i], 1);
    }
    if (!w->rc)
        w->rc = tk_ctx_sync(w->ctx);
    if (w->rc)
        snprintf(w->err, sizeof w->err, "%s", tk_error_last());
    return NULL;
}

static void gpu__linear_from_threads_matches_the_reference(void **state)
{
    fixture *f = *state;
    /* N = 72, not a multiple of 64: cuBLASLt's shared plan cache, not the kernel for few rows */
    const int64_t K = 128, N = 72, wshape[2] = {N, K};
    tk_tensor *hw = host(TK_BF16, 2, wshape), *hb = host(TK_BF16, 1, &N);
    fill(hw, -1.0f, 1.0f);
    fill(hb, -1.0f, 1.0f);
    tk_tensor *dw = upload(f, hw), *db = upload(f, hb);
    static lt_worker workers[LT_THREADS];
    tk_tensor *hx[LT_THREADS][LT_CALLS];
    pthread_t threads[LT_THREADS];
    uint32_t s = 77u;
    for (int t = 0; t < LT_THREADS; t++) {
        lt_worker *w = &workers[t];
        memset(w, 0, sizeof *w);
        tk_assert_ok(tk_ctx_new(&w->ctx, GPU));
        w->w = dw, w->b = db;
        for (int i = 0; i < LT_CALLS; i++) {
            s = s * 1664525u + 1013904223u;
            const int64_t xshape[2] = {1 + (int64_t)(s >> 8) % 512, K};
            hx[t][i] = host(TK_BF16, 2, xshape);
            fill(hx[t][i], -1.0f, 1.0f);
            w->x[i] = upload(f, hx[t][i]);
            const int64_t yshape[2] = {xshape[0], N};
            w->y[i] = poisoned(f, TK_BF16, 2, yshape);
        }
    }
    tk_assert_ok(tk_ctx_sync(f->gpu));
    for (int t = 0; t < LT_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, lt_work, &workers[t]), 0);
    for (int t = 0; t < LT_THREADS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    for (int t = 0; t < LT_THREADS; t++) {
        lt_worker *w = &workers[t];
        if (w->rc)
            fail_msg("thread %d: tk::linear failed (%d): %s", t, w->rc, w->err);
        for (int i = 0; i < LT_CALLS; i++) {
            char what[96];
            tk_tensor *hin[3] = {hx[t][i], hw, hb}, *ref[1] = {NULL};
            int64_t M = tk_tensor_dim(hx[t][i], 0);
            tk_assert_ok(tk_op_run(f->cpu, "tk::linear", hin, 3, ref, 1));
            tk_tensor *got = download(f, w->y[i]);
            snprintf(what, sizeof what, "thread %d call %d: tk::linear bf16 M=%lld", t, i, (long long)M);
            assert_linear_close(what, hin, ref[0], got, M, K, N);
            tk_tensor_free(got);
            tk_tensor_free(ref[0]);
            tk_tensor_free(hx[t][i]);
            tk_tensor_free(w->x[i]);
            tk_tensor_free(w->y[i]);
        }
        tk_ctx_free(w->ctx);
    }
    tk_tensor_free(dw);
    tk_tensor_free(db);
    tk_tensor_free(hw);
    tk_tensor_free(hb);
}

/* --- the row ops: softmax, layer_norm, rms_norm; gelu's exact form ------------------------- */

/* op on host x (and w, b: [cols] or NULL) on the CPU and on the GPU, called as a model calls it
 * (tk_call with the scalar), compared. */
static void check_row_op(fixture *f, const char *op, tk_dtype dt, int rank, const int64_t *shape, int with_w,
                         int with_b, double rtol, double atol)
{
    int64_t cols = shape[rank - 1];
    tk_tensor *hx = host(dt, rank, shape), *hw = NULL, *hb = NULL;
    fill(hx, -4.0f, 4.0f);
    if (with_w) {
        hw = host(dt, 1, &cols);
        fill(hw, 0.5f, 1.5f);
    }
    if (with_b) {
        hb = host(dt, 1, &cols);
        fill(hb, -1.0f, 1.0f);
    }
    tk_tensor *dx = upload(f, hx), *dw = hw ? upload(f, hw) : NULL, *db = hb ? upload(f, hb) : NULL;
    tk_tensor *ref, *dy;
    if (!strcmp(op, "tk::softmax")) {
        ref = tk_call(f->cpu, op, hx);
        dy = tk_call(f->gpu, op, dx);
    } else if (!strcmp(op, "tk::layer_norm")) {
        ref = tk_call(f->cpu, op, hx, hw, hb, 1e-5);
        dy = tk_call(f->gpu, op, dx, dw, db, 1e-5);
    } else if (!strcmp(op, "tk::rms_norm")) {
        ref = tk_call(f->cpu, op, hx, hw, 1e-6);
        dy = tk_call(f->gpu, op, dx, dw, 1e-6);
    } else { /* tk::gelu, exact */
        ref = tk_call(f->cpu, op, hx, "none");
        dy = tk_call(f->gpu, op, dx, "none");
    }
    if (!ref || !dy)
        fail_msg("%s %s: %s", op, tk_dtype_name(dt), tk_error_last());
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dy);
    char what[160];
    snprintf(what, sizeof what, "%s %s rows=%lld cols=%lld%s%s", op, tk_dtype_name(dt),
             (long long)(tk_numel(hx) / (cols ? cols : 1)), (long long)cols, with_w ? " weight" : "",
             with_b ? " bias" : "");
    assert_close(what, got, ref, rtol, atol);
    tk_tensor *free_list[] = {hx, hw, hb, dx, dw, db, ref, dy, got};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

/* Rows shorter than a warp, odd, the sizes of GPT-2 (768) and Llama heads, one past 4096, and
 * 10000 columns: longer than a block keeps in registers (8 x 1024), the re-reading path. */
static const int64_t ROW_SHAPES[][2] = {{1, 1}, {3, 37}, {64, 64}, {17, 768}, {4096, 768}, {5, 1024}, {2, 4097},
                                        {3, 10000}};

static void gpu__row_ops_match_the_reference(void **state)
{
    fixture *f = *state;
    for (size_t d = 0; d < 3; d++) {
        tk_dtype dt = DTYPES[d];
        /* f32: __expf and float sums against double ones; 16-bit: one rounding apart */
        double rtol = dt == TK_F32 ? 2e-5 : 1e-2, atol = dt == TK_F32 ? 1e-5 : 1e-3;
        for (size_t s = 0; s < sizeof ROW_SHAPES / sizeof *ROW_SHAPES; s++) {
            const int64_t *sh = ROW_SHAPES[s];
            check_row_op(f, "tk::softmax", dt, 2, sh, 0, 0, rtol, atol * 1e-2);
            check_row_op(f, "tk::layer_norm", dt, 2, sh, 1, 1, rtol, atol);
            check_row_op(f, "tk::layer_norm", dt, 2, sh, 0, 0, rtol, atol);
            check_row_op(f, "tk::rms_norm", dt, 2, sh, 1, 0, rtol, atol);
            check_row_op(f, "tk::rms_norm", dt, 2, sh, 0, 0, rtol, atol);
        }
        const int64_t s3[3] = {2, 3, 50};
        check_row_op(f, "tk::softmax", dt, 3, s3, 0, 0, rtol, atol * 1e-2);
        check_row_op(f, "tk::layer_norm", dt, 3, s3, 1, 0, rtol, atol);
        for (size_t s = 0; s < NSIZES; s++)
            check_row_op(f, "tk::gelu", dt, 1, &SIZES[s], 0, 0, rtol_of(dt), atol_of(dt));
    }
}

/* --- tk::_mlp ------------------------------------------------------------------------------- */

/* y = r + linear(gelu(linear(x, w1, b1)), w2, b2), x [B, S, D], hidden H: the GPU (the fused
 * kernel where it takes the widths, else the two fused linears) against the CPU's two ops. The
 * residual is x itself (the executor's case: tokmlp) or a tensor of its own. Tolerances: the GPU
 * rounds the hidden layer to 16 bits once (after GELU in float), the CPU twice. */
static void check_mlp(fixture *f, tk_dtype dt, int64_t B, int64_t S, int64_t D, int64_t H, int bias1, int bias2,
                      int own_residual)
{
    const int64_t sx[3] = {B, S, D}, sw1[2] = {H, D}, sw2[2] = {D, H};
    tk_tensor *h[6] = {own_residual ? host(dt, 3, sx) : NULL, host(dt, 3, sx), host(dt, 2, sw1),
                       bias1 ? host(dt, 1, &H) : NULL, host(dt, 2, sw2), bias2 ? host(dt, 1, &D) : NULL};
    const float lim[6] = {1.0f, 2.0f, 1.0f / sqrtf((float)D), 0.5f, 1.0f / sqrtf((float)H), 0.5f};
    tk_tensor *d[6] = {NULL};
    for (int i = 0; i < 6; i++)
        if (h[i]) {
            fill(h[i], -lim[i], lim[i]);
            d[i] = upload(f, h[i]);
        }
    if (!own_residual)
        h[0] = h[1], d[0] = d[1];
    tk_tensor *ref = tk_call(f->cpu, "tk::_mlp", h[0], h[1], h[2], h[3], h[4], h[5]);
    tk_tensor *dy = tk_call(f->gpu, "tk::_mlp", d[0], d[1], d[2], d[3], d[4], d[5]);
    if (!ref || !dy)
        fail_msg("tk::_mlp %s: %s", tk_dtype_name(dt), tk_error_last());
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dy);
    char what[160];
    snprintf(what, sizeof what, "tk::_mlp %s B=%lld S=%lld D=%lld H=%lld%s%s%s", tk_dtype_name(dt), (long long)B,
             (long long)S, (long long)D, (long long)H, bias1 ? " b1" : "", bias2 ? " b2" : "",
             own_residual ? " residual" : "");
    assert_close(what, got, ref, dt == TK_F16 ? 1e-2 : 3e-2, dt == TK_F16 ? 4e-3 : 2e-2);
    for (int i = own_residual ? 0 : 1; i < 6; i++) {
        tk_tensor_free(h[i]);
        tk_tensor_free(d[i]);
    }
    tk_tensor_free(ref);
    tk_tensor_free(dy);
    tk_tensor_free(got);
}

static void gpu__fused_mlp_matches_the_two_linears(void **state)
{
    fixture *f = *state;
    const tk_dtype dts[] = {TK_BF16, TK_F16};
    for (int i = 0; i < 2; i++) {
        tk_dtype dt = dts[i];
        /* tiles of 64 rows; on 132 SMs (66 clusters, 132 tiles a round) the spread form runs a last
         * round of 66 tiles or fewer on one warpgroup a block, the other form the rest */
        check_mlp(f, dt, 1, 1, 64, 256, 1, 1, 0);       /* one row; two chunks a block (the fewest it takes) */
        check_mlp(f, dt, 2, 77, 128, 512, 1, 1, 0);     /* tokmlp's widths, 3 tiles (spread), one partial */
        check_mlp(f, dt, 1, 128, 128, 512, 1, 1, 0);    /* 2 tiles on two clusters (spread) */
        check_mlp(f, dt, 3, 1500, 128, 512, 1, 1, 1);   /* 71 tiles, 36 clusters; a residual of its own */
        check_mlp(f, dt, 4, 5000, 128, 512, 1, 1, 0);   /* 313 tiles: several rounds, the last spread */
        check_mlp(f, dt, 1, 16000, 128, 512, 1, 1, 1);  /* 250 tiles: two rounds, the last of 118 tiles */
        check_mlp(f, dt, 2, 4224, 128, 512, 1, 1, 0);   /* 132 tiles: one whole round */
        check_mlp(f, dt, 1, 300, 64, 384, 0, 1, 0);     /* three chunks a block (the loop, then one); no b1 */
        check_mlp(f, dt, 1, 65, 128, 256, 1, 0, 1);     /* two chunks a block; no b2 */
        check_mlp(f, dt, 1, 900, 64, 1152, 1, 1, 1);    /* nine chunks a block */
        check_mlp(f, dt, 1, 16000, 64, 384, 1, 1, 1);  /* three chunks over two rounds: the turns of an odd chain */
        check_mlp(f, dt, 2, 5000, 64, 1152, 1, 1, 0);   /* nine chunks, 157 tiles: turns, then a spread round */
        check_mlp(f, dt, 2, 150, 64, 1408, 1, 1, 0);    /* eleven: the widest H D 64 takes */
        check_mlp(f, dt, 2, 700, 128, 640, 1, 1, 0);    /* weights past the shared memory: the two linears */
        check_mlp(f, dt, 2, 33, 128, 192, 1, 1, 0);     /* H not a multiple of 128: the two linears */
        check_mlp(f, dt, 3, 40, 64, 128, 1, 1, 0);      /* H 128, one chunk a block: the two linears */
        check_mlp(f, dt, 2, 33, 32, 128, 1, 1, 0);      /* D 32: the two linears */
    }
}

/* --- tk::sdpa ------------------------------------------------------------------------------- */

/* Attention's tolerances: f16/bf16 round p to the dtype before p v (tensor cores), the output once
 * more. */
#define SDPA_RTOL(dt) ((dt) == TK_F32 ? 1e-4 : (dt) == TK_F16 ? 1e-2 : 3e-2)
#define SDPA_ATOL(dt) ((dt) == TK_F32 ? 1e-5 : (dt) == TK_F16 ? 2e-3 : 1e-2)

/* q [B, H, S, D] (or [B, S, H*D] with heads), k and v with Sk keys: GPU against the CPU.
 * With a ramp, scores that climb (ramp > 0) or fall (ramp < 0) along the keys: element 0 of every
 * q row is 1 and of key j's k row ramp * j / 8, so a row's maximum moves by far more than a tile's scores spread
 * (the kernel's running maximum then moves tile after tile, or never after the first). */
static void check_sdpa_ramped(fixture *f, tk_dtype dt, int64_t B, int64_t H, int64_t S, int64_t Sk, int64_t D,
                              int causal, int heads_layout, int64_t ramp)
{
    int64_t sq[4] = {B, H, S, D}, skv[4] = {B, H, Sk, D}, sq3[3] = {B, S, H * D}, skv3[3] = {B, Sk, H * D};
    int rank = heads_layout ? 3 : 4;
    tk_tensor *h[3] = {host(dt, rank, heads_layout ? sq3 : sq), host(dt, rank, heads_layout ? skv3 : skv),
                       host(dt, rank, heads_layout ? skv3 : skv)};
    tk_tensor *d[3];
    for (int i = 0; i < 3; i++) {
        fill(h[i], -2.0f, 2.0f);
        if (ramp && i < 2) /* [B, H, S, D] only: rows of D values one after the other */
            for (int64_t r = 0; r < tk_numel(h[i]) / D; r++)
                set_at(h[i], r * D, i == 0 ? 1.0f : (float)(ramp * (r % Sk)) / 8.0f);
        d[i] = upload(f, h[i]);
    }
    int64_t heads = heads_layout ? H : 0;
    tk_tensor *ref = tk_call(f->cpu, "tk::sdpa", h[0], h[1], h[2], causal != 0, 0.0, heads);
    tk_tensor *dy = tk_call(f->gpu, "tk::sdpa", d[0], d[1], d[2], causal != 0, 0.0, heads);
    if (!ref || !dy)
        fail_msg("tk::sdpa %s: %s", tk_dtype_name(dt), tk_error_last());
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dy);
    char what[192];
    snprintf(what, sizeof what, "tk::sdpa %s B=%lld H=%lld S=%lld Sk=%lld D=%lld%s%s ramp %lld/8", tk_dtype_name(dt),
             (long long)B, (long long)H, (long long)S, (long long)Sk, (long long)D, causal ? " causal" : "",
             heads_layout ? " [B, S, H*D]" : "", (long long)ramp);
    assert_close(what, got, ref, SDPA_RTOL(dt), SDPA_ATOL(dt));
    tk_tensor *free_list[] = {h[0], h[1], h[2], d[0], d[1], d[2], ref, dy, got};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

static void check_sdpa(fixture *f, tk_dtype dt, int64_t B, int64_t H, int64_t S, int64_t Sk, int64_t D, int causal,
                       int heads_layout)
{
    check_sdpa_ramped(f, dt, B, H, S, Sk, D, causal, heads_layout, 0);
}

/* qkv [B, S, 3*H*D] packed: GPU tk::sdpa_qkv against the CPU's */
static void check_sdpa_qkv(fixture *f, tk_dtype dt, int64_t B, int64_t H, int64_t S, int64_t D, int causal)
{
    int64_t shape[3] = {B, S, 3 * H * D};
    tk_tensor *h = host(dt, 3, shape);
    fill(h, -2.0f, 2.0f);
    tk_tensor *d = upload(f, h);
    tk_tensor *ref = tk_sdpa_qkv(f->cpu, h, (int)H, causal), *dy = tk_sdpa_qkv(f->gpu, d, (int)H, causal);
    if (!ref || !dy)
        fail_msg("tk::sdpa_qkv %s: %s", tk_dtype_name(dt), tk_error_last());
    tk_assert_ok(tk_ctx_sync(f->gpu));
    tk_tensor *got = download(f, dy);
    char what[160];
    snprintf(what, sizeof what, "tk::sdpa_qkv %s B=%lld H=%lld S=%lld D=%lld%s", tk_dtype_name(dt), (long long)B,
             (long long)H, (long long)S, (long long)D, causal ? " causal" : "");
    assert_close(what, got, ref, SDPA_RTOL(dt), SDPA_ATOL(dt));
    tk_tensor *free_list[] = {h, d, ref, dy, got};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++)
        tk_tensor_free(free_list[i]);
}

static void gpu__sdpa_matches_the_reference(void **state)
{
    fixture *f = *state;
    for (size_t t = 0; t < 3; t++) {
        tk_dtype dt = DTYPES[t];
        for (int causal = 0; causal < 2; causal++) {
            check_sdpa(f, dt, 2, 3, 77, 77, 64, causal, 0);     /* tensor cores (16-bit), a partial tile */
            check_sdpa(f, dt, 1, 2, 130, 130, 128, causal, 0);  /* D 128 */
            check_sdpa(f, dt, 2, 4, 50, 50, 64, causal, 1);     /* heads side by side */
            check_sdpa(f, dt, 1, 2, 33, 100, 64, causal, 0);    /* more keys than queries */
            check_sdpa(f, dt, 1, 2, 100, 33, 128, causal, 0);   /* fewer keys than queries */
            check_sdpa(f, dt, 1, 88, 257, 257, 64, causal, 0);  /* 5 blocks of 64 queries, the last of 1 */
            check_sdpa(f, dt, 1, 1, 2100, 2100, 64, causal, 0); /* 2 warpgroups a block, the last of 52 rows */
            check_sdpa(f, dt, 1, 1, 2100, 2100, 128, causal, 0);
            check_sdpa(f, dt, 2, 2, 70, 1030, 128, causal, 1);  /* not causal: 2 warpgroups, one partly idle */
            check_sdpa(f, dt, 1, 2, 40, 40, 32, causal, 0);     /* D 32: the row kernel */
            check_sdpa(f, dt, 1, 1, 1, 1, 64, causal, 0);       /* one query, one key */
            for (int64_t ramp = -8; ramp <= 8; ramp += 4) { /* maxima that move, or never */
                if (!ramp)
                    continue;
                check_sdpa_ramped(f, dt, 1, 2, 300, 300, 64, causal, 0, ramp);
                check_sdpa_ramped(f, dt, 1, 2, 200, 260, 128, causal, 0, ramp);
            }
            check_sdpa_qkv(f, dt, 2, 12, 77, 64, causal);        /* packed: GPT-2's heads, a partial tile */
            check_sdpa_qkv(f, dt, 1, 2, 70, 128, causal);        /* packed, D 128 */
            check_sdpa_qkv(f, dt, 1, 3, 40, 32, causal);         /* packed, the row kernel */
        }
    }
}

/* tk::matmul: a [batch..., M, K] by b [K, N] or [batch..., K, N], GPU (one strided-batch cuBLASLt
 * call) against the CPU; sizes not multiples of 8, a batch of 1, rank 4 */
static void gpu__matmul_matches_the_reference(void **state)
{
    fixture *f = *state;
    static const int64_t cases[][6] = {/* batch0, batch1, M, K, N, shared b */
                                       {3, 1, 37, 64, 48, 0}, {3, 1, 37, 64, 48, 1}, {2, 3, 16, 33, 7, 0},
                                       {1, 1, 128, 128, 64, 0}, {4, 2, 1, 256, 100, 1}};
    for (size_t t = 0; t < 3; t++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            tk_dtype dt = DTYPES[t];
            const int64_t *k = cases[c];
            int64_t sa[4] = {k[0], k[1], k[2], k[3]}, sb[4] = {k[0], k[1], k[3], k[4]};
            tk_tensor *ha = host(dt, 4, sa), *hb = k[5] ? host(dt, 2, sb + 2) : host(dt, 4, sb);
            fill(ha, -1.0f, 1.0f);
            fill(hb, -1.0f, 1.0f);
            tk_tensor *da = upload(f, ha), *db = upload(f, hb);
            tk_tensor *ref = tk_matmul(f->cpu, ha, hb), *dy = tk_matmul(f->gpu, da, db);
            if (!ref || !dy)
                fail_msg("tk::matmul %s: %s", tk_dtype_name(dt), tk_error_last());
            tk_assert_ok(tk_ctx_sync(f->gpu));
            tk_tensor *got = download(f, dy);
            char what[128];
            snprintf(what, sizeof what, "tk::matmul %s [%lld, %lld, %lld, %lld] x %s", tk_dtype_name(dt),
                     (long long)k[0], (long long)k[1], (long long)k[2], (long long)k[3], k[5] ? "shared b" : "batched b");
            /* f32: cuBLASLt's own summation order; 16-bit: the output rounded once */
            double rtol = dt == TK_F32 ? 1e-4 : 1e-2, atol = dt == TK_F32 ? 1e-4 : 2e-2;
            assert_close(what, got, ref, rtol, atol);
            tk_tensor *fl[] = {ha, hb, da, db, ref, dy, got};
            for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
                tk_tensor_free(fl[i]);
        }
}

/* tk::embedding: GPT-2's vocabulary rows (768: whole vectors) and 37 columns (element by element) */
static void gpu__embedding_matches_the_reference(void **state)
{
    fixture *f = *state;
    static const int64_t shapes[][2] = {{50257, 768}, {100, 37}};
    for (size_t d = 0; d < 3; d++)
        for (size_t s = 0; s < 2; s++)
            for (int wide = 0; wide < 2; wide++) {
                int64_t is[2] = {3, 129};
                tk_tensor *hw = host(DTYPES[d], 2, shapes[s]), *hi;
                fill(hw, -1.0f, 1.0f);
                tk_assert_ok(tk_tensor_new(&hi, NULL, CPU, wide ? TK_I64 : TK_I32, 2, is));
                for (int64_t i = 0; i < 3 * 129; i++) {
                    int64_t id = (i * 7919) % shapes[s][0];
                    if (wide)
                        ((int64_t *)tk_tensor_data(hi))[i] = id;
                    else
                        ((int32_t *)tk_tensor_data(hi))[i] = (int32_t)id;
                }
                tk_tensor *dw = upload(f, hw), *di = upload(f, hi);
                tk_tensor *ref = tk_call(f->cpu, "tk::embedding", hw, hi), *dy = tk_call(f->gpu, "tk::embedding", dw, di);
                if (!ref || !dy)
                    fail_msg("tk::embedding: %s", tk_error_last());
                tk_assert_ok(tk_ctx_sync(f->gpu));
                tk_tensor *got = download(f, dy);
                assert_memory_equal(tk_tensor_data(got), tk_tensor_data(ref), tk_tensor_nbytes(ref));
                tk_tensor *fl[] = {hw, hi, dw, di, ref, dy, got};
                for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
                    tk_tensor_free(fl[i]);
            }
}

/* the layout ops: GPU copies against the CPU's, bit for bit, in 2-, 4- and 8-byte elements, through
 * the element kernel, (rows of whole 16-byte vectors, the last dim kept) the row kernel and (narrow's
 * rows not whole vectors: 33 and 37 elements, a partial last vector) the dense kernel */
static void gpu__layout_ops_match_the_reference(void **state)
{
    fixture *f = *state;
    const tk_dtype dts[3] = {TK_BF16, TK_F32, TK_I64};
    const int64_t shape[4] = {3, 37, 5, 64};
    for (int d = 0; d < 3; d++) {
        tk_tensor *hx = host(dts[d], 4, shape);
        for (int64_t i = 0; i < tk_numel(hx); i++) {
            if (dts[d] == TK_I64)
                ((int64_t *)tk_tensor_data(hx))[i] = i * 1000003;
            else if (dts[d] == TK_F32)
                ((float *)tk_tensor_data(hx))[i] = (float)i;
            else
                ((uint16_t *)tk_tensor_data(hx))[i] = (uint16_t)(i * 7);
        }
        tk_tensor *dx = upload(f, hx);
        for (int op = 0; op < 12; op++) { /* 11: the default, unflatten */
            tk_tensor *ref = NULL, *dy = NULL;
            switch (op) {
            case 0: ref = tk_transpose(f->cpu, hx, 1, 2), dy = tk_transpose(f->gpu, dx, 1, 2); break;
            case 1:
                ref = tk_call(f->cpu, "tk::permute", hx, TK_INTS(3, 0, 2, 1));
                dy = tk_call(f->gpu, "tk::permute", dx, TK_INTS(3, 0, 2, 1));
                break;
            case 2: ref = tk_narrow(f->cpu, hx, -1, 16, 33), dy = tk_narrow(f->gpu, dx, -1, 16, 33); break;
            case 3: ref = tk_call(f->cpu, "tk::flatten", hx, 1), dy = tk_call(f->gpu, "tk::flatten", dx, 1); break;
            case 4: /* whole 16-byte vectors a row: the row kernel */
                ref = tk_narrow(f->cpu, hx, -1, 8, 32), dy = tk_narrow(f->gpu, dx, -1, 8, 32);
                break;
            case 6: ref = tk_narrow(f->cpu, hx, 1, 3, 20), dy = tk_narrow(f->gpu, dx, 1, 3, 20); break;
            case 7:
                ref = tk_call(f->cpu, "tk::cat", hx, hx, 2), dy = tk_call(f->gpu, "tk::cat", dx, dx, 2);
                break;
            case 8: /* rows of 64 + 37 elements: not whole vectors */
                ref = tk_narrow(f->cpu, hx, 3, 5, 37);
                dy = tk_narrow(f->gpu, dx, 3, 5, 37);
                if (ref && dy) {
                    tk_tensor *r2 = tk_call(f->cpu, "tk::cat", hx, ref, -1), *d2 = tk_call(f->gpu, "tk::cat", dx, dy, -1);
                    tk_tensor_free(ref);
                    tk_tensor_free(dy);
                    ref = r2, dy = d2;
                }
                break;
            case 5:
                ref = tk_call(f->cpu, "tk::permute", hx, TK_INTS(2, 0, 1, 3));
                dy = tk_call(f->gpu, "tk::permute", dx, TK_INTS(2, 0, 1, 3));
                break;
            case 9: /* expand [3, 1, 5, 64] to [2, 3, 4, 5, 64]: whole rows (the row kernel), stride 0 */
            case 10: { /* expand [3, 37, 5, 1] to [3, 37, 5, 7]: the last dim broadcast (element kernel) */
                int d1 = op == 9 ? 1 : 3;
                tk_tensor *h1 = tk_narrow(f->cpu, hx, d1, 2, 1), *g1 = tk_narrow(f->gpu, dx, d1, 2, 1);
                if (op == 9) {
                    ref = tk_call(f->cpu, "tk::expand", h1, TK_INTS(2, 3, 4, 5, 64));
                    dy = tk_call(f->gpu, "tk::expand", g1, TK_INTS(2, -1, 4, -1, -1));
                } else {
                    ref = tk_call(f->cpu, "tk::expand", h1, TK_INTS(-1, -1, -1, 7));
                    dy = tk_call(f->gpu, "tk::expand", g1, TK_INTS(3, 37, 5, 7));
                }
                tk_tensor_free(h1);
                tk_tensor_free(g1);
                break;
            }
            default:
                ref = tk_call(f->cpu, "tk::unflatten", hx, 3, TK_INTS(4, -1));
                dy = tk_call(f->gpu, "tk::unflatten", dx, 3, TK_INTS(4, -1));
            }
            if (!ref || !dy)
                fail_msg("layout op %d %s: %s", op, tk_dtype_name(dts[d]), tk_error_last());
            tk_assert_ok(tk_ctx_sync(f->gpu));
            tk_tensor *got = download(f, dy);
            assert_int_equal(tk_tensor_rank(got), tk_tensor_rank(ref));
            assert_memory_equal(tk_tensor_shape(got), tk_tensor_shape(ref), sizeof(int64_t) * (size_t)tk_tensor_rank(ref));
            assert_memory_equal(tk_tensor_data(got), tk_tensor_data(ref), tk_tensor_nbytes(ref));
            tk_tensor_free(ref);
            tk_tensor_free(dy);
            tk_tensor_free(got);
        }
        tk_tensor_free(hx);
        tk_tensor_free(dx);
    }
}

#define GPU_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    /* tk::_mlp runs calls under TK_MLP_MIN_ROWS rows as the two linears: every case here through the kernel */
    setenv("TK_MLP_MIN_ROWS", "0", 1);
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "skipped: %s\n", tk_error_last());
        return 77;
    }
#ifndef TK_TEST_HAVE_KERNELS
    fprintf(stderr, "skipped: libtkrt was built without nvcc (TK_WITH_CUDA=OFF), so without its kernels\n");
    return 77;
#endif
    const char *only = getenv("TK_TEST_FILTER"); /* one test's name, or a pattern with * and ? */
    if (only && *only)
        cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        GPU_TEST(gpu__add_matches_the_reference),
        GPU_TEST(gpu__mul_matches_the_reference),
        GPU_TEST(gpu__sin_matches_the_reference),
        GPU_TEST(gpu__cos_matches_the_reference),
        GPU_TEST(gpu__silu_matches_the_reference),
        GPU_TEST(gpu__gelu_matches_the_reference),
        GPU_TEST(gpu__row_ops_match_the_reference),
        GPU_TEST(gpu__sdpa_matches_the_reference),
        GPU_TEST(gpu__fused_mlp_matches_the_two_linears),
        GPU_TEST(gpu__matmul_matches_the_reference),
        GPU_TEST(gpu__embedding_matches_the_reference),
        GPU_TEST(gpu__layout_ops_match_the_reference),
        GPU_TEST(gpu__unaligned_tensors_match_the_reference),
        GPU_TEST(gpu__linear_matches_the_reference),
        GPU_TEST(gpu__linear_without_bias_matches_the_reference),
        GPU_TEST(gpu__fused_linear_forms_match_the_exact_values),
        GPU_TEST(gpu__linear_flattens_leading_dimensions),
        GPU_TEST(gpu__linear_with_unaligned_tensors_matches_the_reference),
        GPU_TEST(gpu__linear_over_a_stream_of_sizes_matches_and_caches_plans),
        GPU_TEST(gpu__few_rows_run_the_ops_own_kernel),
        GPU_TEST(gpu__linear_from_threads_matches_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
