/* tk::_mlp, the fused MLP of narrow width (kernels/mlp.cu, launched by kernels/mlp_ops.c), timed and
 * checked against the CPU in one command: the harness for experiments on mlp.cu (edit the kernel,
 * rebuild, run this).
 *   y = residual + linear2(gelu_tanh(linear1(x)))   x, residual, y [M, D]; w1 [H, D], b1 [H]; w2 [D, H], b2 [D]
 *
 *   bench_mlp [--dtype bf16|f16] [--d 128|64] [--h 512] [--rows 1,77,256,...] [--residual x|own]
 *             [--runs 10] [--reps 20] [--device cuda:N]
 *
 * For each row count M, a sample times `reps` back-to-back calls into a preallocated y (the op
 * resolved once, as a program's node runs it, with no hidden tensor) and one sync, with
 * CLOCK_MONOTONIC; the figure is the median of `runs` samples. TFLOP/s counts the two linears,
 * 4 M D H. The residual is x itself by default (the executor's case, the kernel's fastest), or a
 * random tensor of its own (--residual own). Then y is copied back and compared, element by
 * element, with tk::_mlp on a CPU context (the two linears) over a sample of the rows: every k-th
 * and the last, k the largest odd number at most M / 2048 (all rows up to 6143: 2048 or more
 * rows, and an odd step falls on every row position of the kernel's tiles of 64), within
 * check_mlp's tolerance in tests/test_kernels_gpu.c; the table gives the worst |gpu - cpu| /
 * (1 + |cpu|). Exit status: 0 done and every element within tolerance, 1 failed or an element
 * outside it, 2 usage, 77 no GPU. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/runtime.h>
#include "numarg.h" /* common/: the one reader of numeric options */

#include "rt_internal.h"
#include "bench_gpu.h" /* after rt_internal.h: its resolved-op call too */

#define MAX_ROW_COUNTS 64

static const tk_device CPU = {TK_DEVICE_CPU, 0};

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: bench_mlp [--dtype bf16|f16] [--d 128|64] [--h N] [--rows M,M,...] [--residual x|own]\n"
                "                 [--runs N] [--reps N] [--device cuda:N]\n"
                "Times tk::_mlp (y = residual + linear2(gelu(linear1(x))), x [M, D], hidden H; defaults bf16,\n"
                "D 128, H 512, residual x, 10 runs of 20 calls) for each row count M and checks y against the\n"
                "CPU's tk::_mlp on a sample of the rows; prints a markdown table. Exit status: 0 done, 1 failed\n"
                "or outside tolerance, 2 usage, 77 no GPU.\n");
    return status;
}

/* An integer in [lo, hi] from all of text. */
static int parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    long long v;
    if (tk_parse_whole(text, lo, hi, &v))
        return -1;
    *out = v;
    return 0;
}

/* "1,77,256": row counts of 1 to 2^31 - 1 (the kernel's int), at most MAX_ROW_COUNTS of them. */
static int parse_rows(const char *text, int64_t *rows, int *n)
{
    char buf[32];
    *n = 0;
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        if (*n == MAX_ROW_COUNTS || len == 0 || len >= sizeof buf)
            return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (parse_int(buf, 1, INT32_MAX, &rows[(*n)++]))
            return -1;
        p += len;
        if (!*p)
            return 0;
    }
}

static double value_at(const tk_tensor *t, int64_t i)
{
    uint16_t v = ((const uint16_t *)tk_tensor_data(t))[i];
    return tk_tensor_dtype(t) == TK_F16 ? tk_f16_to_f32(v) : tk_bf16_to_f32(v);
}

/* What the check of one row count found: the worst |gpu - cpu| / (1 + |cpu|), the elements outside
 * rtol |cpu| + atol and the first of them. */
typedef struct mlp_check {
    int64_t rows, elements, bad, bad_row, bad_col;
    double worst, gpu, cpu;
} mlp_check;

/* A host copy of device tensor t; NULL with the error set. */
static tk_tensor *download(tk_ctx *ctx, const tk_tensor *t)
{
    tk_tensor *h = NULL;
    if (tk_tensor_new(&h, NULL, CPU, tk_tensor_dtype(t), tk_tensor_rank(t), tk_tensor_shape(t)) ||
        tk_tensor_copy(ctx, h, t)) {
        tk_tensor_free(h);
        return NULL;
    }
    return h;
}

/* Row i of the sample of M rows taken every `step` rows (n of them, the last row last). */
static int64_t sample_row(int64_t i, int64_t n, int64_t step, int64_t M) { return i == n - 1 ? M - 1 : i * step; }

/* y (the GPU's, [M, D]) against tk::_mlp on the CPU context `cpu` over a sample of the rows of r and
 * x (device tensors; r may be x) with the weights w (host copies of w1, b1, w2, b2). 0 when the
 * comparison ran (its findings in *out), else an error code with the error set. */
static int check_rows(tk_ctx *ctx, tk_ctx *cpu, const tk_resolved_op *op, tk_tensor *const *w, const tk_tensor *r,
                      const tk_tensor *x, const tk_tensor *y, double rtol, double atol, mlp_check *out)
{
    const int64_t M = tk_tensor_dim(x, 0), D = tk_tensor_dim(x, 1);
    int64_t step = M < 2048 ? 1 : M / 2048;
    if (step % 2 == 0)
        step--; /* odd: coprime to the tiles of 64 rows */
    const int64_t n = (M - 1) / step + 1 + ((M - 1) % step != 0);
    const size_t row_bytes = (size_t)D * tk_dtype_size(tk_tensor_dtype(x));
    const int64_t shape[2] = {n, D};
    tk_tensor *hx = download(ctx, x), *hr = r == x ? NULL : download(ctx, r), *hy = download(ctx, y);
    tk_tensor *sx = NULL, *sr = NULL, *sy = NULL;
    int rc = -1;
    if (!hx || (r != x && !hr) || !hy)
        goto done;
    if ((rc = tk_tensor_new(&sx, NULL, CPU, tk_tensor_dtype(x), 2, shape)) ||
        (r != x && (rc = tk_tensor_new(&sr, NULL, CPU, tk_tensor_dtype(x), 2, shape))))
        goto done;
    for (int64_t i = 0; i < n; i++) {
        size_t from = (size_t)sample_row(i, n, step, M) * row_bytes, to = (size_t)i * row_bytes;
        memcpy((char *)tk_tensor_data(sx) + to, (const char *)tk_tensor_data(hx) + from, row_bytes);
        if (sr)
            memcpy((char *)tk_tensor_data(sr) + to, (const char *)tk_tensor_data(hr) + from, row_bytes);
    }
    /* the residual is the same tensor as x where the GPU's was: the CPU runs the same call */
    tk_value args[7] = {tk__val_tensor(sr ? sr : sx), tk__val_tensor(sx), tk__val_tensor(w[0]), tk__val_tensor(w[1]),
                        tk__val_tensor(w[2]), tk__val_tensor(w[3]), tk__val_null(NULL)};
    if ((rc = tk_op_run_resolved(cpu, op, NULL, 0, args, 7, &sy, 1)))
        goto done;
    *out = (mlp_check){.rows = n, .elements = n * D, .bad_row = -1, .bad_col = -1};
    for (int64_t i = 0; i < n; i++) {
        const int64_t row = sample_row(i, n, step, M);
        for (int64_t c = 0; c < D; c++) {
            double g = value_at(hy, row * D + c), want = value_at(sy, i * D + c), err = fabs(g - want);
            double rel = err / (1.0 + fabs(want));
            if (!(rel <= out->worst) && !isnan(out->worst)) /* a NaN, once met, stays the worst */
                out->worst = rel;
            if (!(err <= rtol * fabs(want) + atol) && out->bad++ == 0) {
                out->bad_row = row;
                out->bad_col = c;
                out->gpu = g;
                out->cpu = want;
            }
        }
    }
done:
    tk_tensor_free(hx);
    tk_tensor_free(hr);
    tk_tensor_free(hy);
    tk_tensor_free(sx);
    tk_tensor_free(sr);
    tk_tensor_free(sy);
    return rc;
}

int main(int argc, char **argv)
{
    tk_dtype dt = TK_BF16;
    int64_t D = 128, H = 512, runs = 10, reps = 20, rows[MAX_ROW_COUNTS];
    int nrows = 0, own_residual = 0;
    tk_device dev = {TK_DEVICE_CUDA, 0};
    parse_rows("1,77,256,1024,4096,8192,9216,12288,16384,24576,32768", rows, &nrows);
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *want = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout, 0);
        if (!strcmp(a, "--dtype"))
            want = v && !tk_dtype_parse(&dt, v) && (dt == TK_F16 || dt == TK_BF16) ? NULL : "bf16 or f16";
        else if (!strcmp(a, "--d"))
            want = v && !parse_int(v, 64, 128, &D) && (D == 64 || D == 128) ? NULL : "128 or 64";
        else if (!strcmp(a, "--h"))
            want = v && !parse_int(v, 1, 1 << 20, &H) ? NULL : "a hidden width from 1 to 1048576";
        else if (!strcmp(a, "--rows"))
            want = v && !parse_rows(v, rows, &nrows) ? NULL : "1 to 64 comma-separated row counts from 1 to 2147483647";
        else if (!strcmp(a, "--residual"))
            want = v && ((own_residual = !strcmp(v, "own")) || !strcmp(v, "x")) ? NULL : "x or own";
        else if (!strcmp(a, "--runs"))
            want = v && !parse_int(v, 1, 256, &runs) ? NULL : "a count from 1 to 256";
        else if (!strcmp(a, "--reps"))
            want = v && !parse_int(v, 1, 1000000, &reps) ? NULL : "a count from 1 to 1000000";
        else if (!strcmp(a, "--device"))
            want = v && !tk_device_parse(&dev, v) && dev.kind == TK_DEVICE_CUDA ? NULL : "cuda or cuda:N";
        else {
            fprintf(stderr, "bench_mlp: unknown option '%s' (bench_mlp --help lists them)\n", a);
            return 2;
        }
        if (want) {
            if (v)
                fprintf(stderr, "bench_mlp: bad value '%s' for '%s': expected %s\n", v, a, want);
            else
                fprintf(stderr, "bench_mlp: '%s' needs a value: %s\n", a, want);
            return 2;
        }
    }
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "bench_mlp: skipped: %s\n", tk_error_last());
        return 77;
    }
    /* check_mlp's tolerances (tests/test_kernels_gpu.c): the GPU rounds the hidden layer to 16 bits
     * once, the CPU twice */
    const double rtol = dt == TK_F16 ? 1e-2 : 3e-2, atol = dt == TK_F16 ? 4e-3 : 2e-2;
    tk_ctx *ctx = NULL, *cpu = NULL;
    tk_resolved_op op;
    tk_tensor *w[4] = {NULL}, *hw[4] = {NULL};
    int rc = 0, failed = 0;
    mlp_check checks[MAX_ROW_COUNTS] = {{0}};
    const int64_t sw1[2] = {H, D}, sw2[2] = {D, H};
    if (tk_ctx_new(&ctx, dev) || tk_ctx_new(&cpu, CPU) || tk_op_resolve(&op, NULL, "tk::_mlp") ||
        !(w[0] = tk_bench_random_tensor(ctx, dev, dt, 2, sw1, -1.0f / sqrtf((float)D), 1.0f / sqrtf((float)D), 2)) ||
        !(w[1] = tk_bench_random_tensor(ctx, dev, dt, 1, &H, -0.5f, 0.5f, 3)) ||
        !(w[2] = tk_bench_random_tensor(ctx, dev, dt, 2, sw2, -1.0f / sqrtf((float)H), 1.0f / sqrtf((float)H), 4)) ||
        !(w[3] = tk_bench_random_tensor(ctx, dev, dt, 1, &D, -0.5f, 0.5f, 5))) {
        rc = 1;
        goto done;
    }
    for (int i = 0; i < 4; i++)
        if (!(hw[i] = download(ctx, w[i]))) {
            rc = 1;
            goto done;
        }
    /* which code runs: the kernel where it takes these widths and runs on this GPU (sm_90), else the
     * two linears */
    const int takes = tk_mlp_fused_def(tk_op_find("tk::_linear_gelu"), tk_op_find("tk::_linear_add"), dt, D, H) != NULL;
    const char *path = !takes                     ? "the two linears (mlp.cu does not take these widths)"
                       : !tk_mlp_kernel_only(ctx) ? "the two linears (mlp.cu runs on sm_90 only)"
                                                  : "the fused kernel (mlp.cu)";
    char name[128] = "", devname[32];
    int driver = 0;
    if (tk_cuda_device_info(dev.index, name, sizeof name, &driver))
        snprintf(name, sizeof name, "?");
    printf("device %s %s (%d SMs, driver CUDA %d.%d): %s; %s, D %lld, H %lld, residual %s; median of %d runs of %d "
           "calls; checked against the CPU within %g |cpu| + %g\n\n",
           tk_device_name(dev, devname, sizeof devname), name, tk_ctx_sm_count(ctx), driver / 1000, driver % 1000 / 10,
           path, tk_dtype_name(dt), (long long)D, (long long)H, own_residual ? "own" : "x", (int)runs, (int)reps, rtol,
           atol);
    printf("| rows | tk::_mlp %s us | TFLOP/s | rows checked | worst error |\n| ---: | ---: | ---: | ---: | ---: |\n",
           tk_dtype_name(dt));
    for (int c = 0; c < nrows && !rc; c++) {
        const int64_t M = rows[c], sx[2] = {M, D};
        tk_tensor *x = tk_bench_random_tensor(ctx, dev, dt, 2, sx, -2.0f, 2.0f, 100u + (uint32_t)c);
        tk_tensor *r = own_residual ? tk_bench_random_tensor(ctx, dev, dt, 2, sx, -1.0f, 1.0f, 200u + (uint32_t)c) : x;
        tk_tensor *y = NULL;
        if (!x || !r || tk_tensor_new(&y, ctx, dev, dt, 2, sx)) {
            rc = 1;
        } else {
            tk_value args[7] = {tk__val_tensor(r),    tk__val_tensor(x),    tk__val_tensor(w[0]), tk__val_tensor(w[1]),
                                tk__val_tensor(w[2]), tk__val_tensor(w[3]), tk__val_null(NULL)}; /* hidden: None */
            tk_bench_op_call call = {ctx, &op, args, 7, y};
            double us = tk_bench_time_us(ctx, tk_bench_call_op, &call, 3, (int)runs, (int)reps);
            rc = us < 0 || check_rows(ctx, cpu, &op, hw, r, x, y, rtol, atol, &checks[c]);
            if (!rc) {
                const mlp_check *k = &checks[c];
                double flops = 4.0 * (double)M * (double)D * (double)H;
                printf("| %lld | %.2f | %.1f | %lld | %.2e |\n", (long long)M, us, flops / (us * 1e-6) / 1e12,
                       (long long)k->rows, k->worst);
                fflush(stdout);
                failed |= k->bad != 0;
            }
        }
        if (r != x)
            tk_tensor_free(r);
        tk_tensor_free(x);
        tk_tensor_free(y);
    }
    for (int c = 0; c < nrows; c++) {
        const mlp_check *k = &checks[c];
        if (k->bad)
            fprintf(stderr,
                    "bench_mlp: %lld rows: %lld of %lld elements checked are outside %g |cpu| + %g; the first, "
                    "y[%lld][%lld], is %.6g on the GPU and %.6g on the CPU\n",
                    (long long)rows[c], (long long)k->bad, (long long)k->elements, rtol, atol, (long long)k->bad_row,
                    (long long)k->bad_col, k->gpu, k->cpu);
    }
done:
    if (rc)
        fprintf(stderr, "bench_mlp: %s\n", tk_error_last());
    for (int i = 0; i < 4; i++) {
        tk_tensor_free(w[i]);
        tk_tensor_free(hw[i]);
    }
    tk_ctx_free(cpu);
    tk_ctx_free(ctx);
    return rc || failed ? 1 : 0;
}
