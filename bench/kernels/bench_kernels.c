/* Bandwidth of the elementwise kernels (tk::add, tk::mul, tk::sin, tk::cos, tk::silu, tk::gelu)
 * against a device-to-device copy of the same bytes in the same run, printed as a markdown table.
 *
 *   bench_kernels [--log2n 28] [--dtype bf16|f16|f32] [--runs 20] [--reps 10] [--device cuda:N]
 *
 * Each figure is the median of `runs` samples; a sample times `reps` back-to-back launches (each
 * a full eager tk_op_run into a preallocated output, or a tk_tensor_copy) and one tk_ctx_sync
 * with CLOCK_MONOTONIC, divided by `reps`, so the host's launch and sync latency is spread over
 * several kernels. Bytes moved count reads and writes: a unary op and the copy move 2 n
 * elements, a binary op 3 n. Exit status: 0 done, 1 failed, 2 usage, 77 no GPU. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_clock.h"
#include <tk/half.h>
#include <tk/op.h>
#include <tk/runtime.h>
#include "numarg.h" /* common/: the one reader of numeric options */

static const tk_device CPU = {TK_DEVICE_CPU, 0};

typedef struct bench {
    tk_ctx *ctx;
    tk_tensor *a, *b, *y, *copy_dst;
    int runs, reps;
} bench;

/* One launch: the op `name` (NULL: the copy a -> copy_dst). */
static int launch(bench *B, const char *name, int nin)
{
    if (!name)
        return tk_tensor_copy(B->ctx, B->copy_dst, B->a);
    tk_tensor *in[2] = {B->a, B->b}, *out[1] = {B->y};
    return tk_op_run(B->ctx, name, in, nin, out, 1);
}

/* The median seconds per launch, or a negative value with the error in tk_error_last(). */
static double measure(bench *B, const char *name, int nin)
{
    double *samples = malloc(sizeof(double) * (size_t)B->runs), t = -1.0;
    if (!samples)
        return -1.0;
    for (int w = 0; w < 3; w++) /* warm-up: module load, clocks, caches */
        if (launch(B, name, nin))
            goto done;
    if (tk_ctx_sync(B->ctx))
        goto done;
    for (int r = 0; r < B->runs; r++) {
        double t0 = tk_bench_now();
        for (int k = 0; k < B->reps; k++)
            if (launch(B, name, nin))
                goto done;
        if (tk_ctx_sync(B->ctx))
            goto done;
        samples[r] = (tk_bench_now() - t0) / B->reps;
    }
    t = tk_bench_median(samples, B->runs);
done:
    free(samples);
    return t;
}

/* Fills a device tensor with values uniform in [-8, 8): a host chunk of 2^22 random values,
 * copied over the tensor slice by slice (the pattern repeats; bandwidth does not care). */
static int fill_random(tk_ctx *ctx, tk_tensor *t, uint32_t seed)
{
    const int64_t chunk = (int64_t)1 << 22, n = tk_numel(t);
    tk_dtype dtype = tk_tensor_dtype(t);
    size_t es = tk_dtype_size(dtype);
    int64_t len = n < chunk ? n : chunk;
    tk_tensor *h = NULL, *slice = NULL;
    int rc = tk_tensor_new(&h, NULL, CPU, dtype, 1, &len);
    if (rc)
        return rc;
    void *p = tk_tensor_data(h);
    for (int64_t i = 0; i < len; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = -8.0f + 16.0f * (float)(seed >> 8) * (1.0f / 16777216.0f);
        if (dtype == TK_F32)
            ((float *)p)[i] = v;
        else
            ((uint16_t *)p)[i] = dtype == TK_F16 ? tk_f32_to_f16(v) : tk_f32_to_bf16(v);
    }
    for (int64_t off = 0; off < n && !rc; off += len) {
        int64_t m = n - off < len ? n - off : len;
        tk_tensor *src = h;
        if (m != len && (rc = tk_tensor_wrap(&src, CPU, dtype, 1, &m, p)))
            break;
        if (!(rc = tk_tensor_wrap(&slice, tk_tensor_device(t), dtype, 1, &m, (char *)tk_tensor_data(t) + (size_t)off * es)))
            rc = tk_tensor_copy(ctx, slice, src);
        tk_tensor_free(slice);
        slice = NULL;
        if (src != h)
            tk_tensor_free(src);
    }
    tk_tensor_free(h);
    return rc;
}

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: bench_kernels [--log2n N] [--dtype bf16|f16|f32] [--runs N] [--reps N] [--device cuda:N]\n");
    if (to == stdout)
        printf("The elementwise kernels' bandwidth against a device-to-device copy of the same bytes, as a\n"
               "markdown table: 2^log2n elements (28), the median of --runs samples (20) of --reps launches\n"
               "(10). Exit status: 0 done, 1 failed, 2 usage, 77 no GPU.\n");
    return status;
}

int main(int argc, char **argv)
{
    int log2n = 28;
    const char *dtype_name = "bf16", *device = "cuda";
    bench B = {0};
    B.runs = 20;
    B.reps = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(stdout, 0);
        if (i + 1 >= argc)
            return usage(stderr, 2);
        if (!strcmp(argv[i], "--log2n")) {
            if (tk_parse_int(argv[++i], 10, 33, &log2n))
                return usage(stderr, 2);
        } else if (!strcmp(argv[i], "--runs")) {
            if (tk_parse_int(argv[++i], 1, 1000000, &B.runs))
                return usage(stderr, 2);
        } else if (!strcmp(argv[i], "--reps")) {
            if (tk_parse_int(argv[++i], 1, 1000000, &B.reps))
                return usage(stderr, 2);
        }
        else if (!strcmp(argv[i], "--dtype"))
            dtype_name = argv[++i];
        else if (!strcmp(argv[i], "--device"))
            device = argv[++i];
        else
            return usage(stderr, 2);
    }
    tk_dtype dtype;
    tk_device dev;
    if (log2n < 10 || log2n > 33 || B.runs < 1 || B.reps < 1 || tk_dtype_parse(&dtype, dtype_name) ||
        (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16) || tk_device_parse(&dev, device) ||
        dev.kind != TK_DEVICE_CUDA)
        return usage(stderr, 2);
    if (tk_cuda_available()) {
        fprintf(stderr, "bench_kernels: %s\n", tk_error_last());
        return 77;
    }

    const int64_t n = (int64_t)1 << log2n;
    int rc = 1;
    if (tk_ctx_new(&B.ctx, dev) || tk_tensor_new(&B.a, B.ctx, dev, dtype, 1, &n) ||
        tk_tensor_new(&B.b, B.ctx, dev, dtype, 1, &n) || tk_tensor_new(&B.y, B.ctx, dev, dtype, 1, &n) ||
        tk_tensor_new(&B.copy_dst, B.ctx, dev, dtype, 1, &n) || fill_random(B.ctx, B.a, 1) ||
        fill_random(B.ctx, B.b, 2))
        goto fail;

    const double nbytes = (double)n * (double)tk_dtype_size(dtype);
    char name[32];
    /* the copy before and after the ops: the better of the two is the reference */
    double copy1 = measure(&B, NULL, 0);
    if (copy1 < 0)
        goto fail;
    static const struct { const char *op; int nin; } ops[] = {
        {"tk::add", 2}, {"tk::mul", 2}, {"tk::sin", 1}, {"tk::cos", 1}, {"tk::silu", 1}, {"tk::gelu", 1},
    };
    double t[6];
    for (int i = 0; i < 6; i++)
        if ((t[i] = measure(&B, ops[i].op, ops[i].nin)) < 0)
            goto fail;
    double copy2 = measure(&B, NULL, 0);
    if (copy2 < 0)
        goto fail;
    double copy = fmin(copy1, copy2), copy_gbs = 2.0 * nbytes / copy / 1e9;

    printf("device %s (%d SMs), %lld %s elements (%.0f MiB per tensor), median of %d runs of %d launches\n\n",
           tk_device_name(dev, name, sizeof name), tk_ctx_sm_count(B.ctx), (long long)n, dtype_name,
           nbytes / 1048576.0, B.runs, B.reps);
    printf("| op | time (us) | GB/s | %% of copy |\n| --- | ---: | ---: | ---: |\n");
    printf("| copy (device to device) | %.1f | %.1f | 100.0 |\n", copy * 1e6, copy_gbs);
    for (int i = 0; i < 6; i++) {
        double gbs = (ops[i].nin + 1) * nbytes / t[i] / 1e9;
        printf("| %s | %.1f | %.1f | %.1f |\n", ops[i].op, t[i] * 1e6, gbs, 100.0 * gbs / copy_gbs);
    }
    printf("\ncopy before the ops %.1f us, after %.1f us; GB/s = (reads + writes) / time, 1 GB = 1e9 bytes\n",
           copy1 * 1e6, copy2 * 1e6);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_kernels: %s\n", tk_error_last());
done:
    tk_tensor_free(B.a);
    tk_tensor_free(B.b);
    tk_tensor_free(B.y);
    tk_tensor_free(B.copy_dst);
    tk_ctx_free(B.ctx);
    return rc;
}
