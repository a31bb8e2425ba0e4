/* tk::matmul against PyTorch's torch.matmul (matmul_torch.py, same shapes, same method): batched
 * products of attention's shapes (q k^T and p v per head) and a [batch, M, K] by one [K, N].
 *
 *   bench_matmul [--dtype bf16|f16] [--runs 10] [--reps 20]
 *
 * A sample times `reps` back-to-back calls into a preallocated output (the op resolved once, as a
 * program's node runs it) and one sync, with CLOCK_MONOTONIC; the figure is the median of `runs`
 * samples. TFLOP/s counts 2 batch M N K. Exit status: 0 done, 1 failed, 2 usage, 77 no GPU. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/runtime.h>
#include "numarg.h" /* common/: the one reader of numeric options */

#include "rt_internal.h"
#include "bench_gpu.h" /* after rt_internal.h: its resolved-op call too */

int main(int argc, char **argv)
{
    tk_dtype dt = TK_BF16;
    int runs = 10, reps = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_matmul [--dtype bf16|f16] [--runs N] [--reps N]\n"
                   "Times tk::matmul on batched and shared-b products; prints a markdown table. Compare with\n"
                   "matmul_torch.py.\n");
            return 0;
        }
        if (!v || !((!strcmp(a, "--dtype") && !tk_dtype_parse(&dt, v) && (dt == TK_F16 || dt == TK_BF16)) ||
                    (!strcmp(a, "--runs") && !tk_parse_int(v, 1, 256, &runs)) ||
                    (!strcmp(a, "--reps") && !tk_parse_int(v, 1, 1000000, &reps)))) {
            fprintf(stderr, "bench_matmul: bad option '%s'\n", a);
            return 2;
        }
        i++;
    }
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "bench_matmul: skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_device dev = {TK_DEVICE_CUDA, 0};
    tk_ctx *ctx = NULL;
    tk_resolved_op op;
    if (tk_ctx_new(&ctx, dev) || tk_op_resolve(&op, NULL, "tk::matmul")) {
        fprintf(stderr, "bench_matmul: %s\n", tk_error_last());
        return 1;
    }
    /* batch, M, K, N, b shared: attention's q k^T and p v for GPT-2 (96 heads of 64, seq 1024) and
     * Llama-like heads of 128; a [8, 1024, 4096] activation by one [4096, 4096] weight */
    static const int64_t cases[][5] = {{96, 1024, 64, 1024, 0}, {96, 1024, 1024, 64, 0}, {32, 2048, 128, 2048, 0},
                                       {32, 2048, 2048, 128, 0}, {8, 1024, 4096, 4096, 1}};
    printf("| batch | M | K | N | b | tk::matmul %s us | TFLOP/s |\n| --- | --- | --- | --- | --- | --- | --- |\n",
           tk_dtype_name(dt));
    int rc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases && !rc; c++) {
        const int64_t *k = cases[c];
        int64_t sa[3] = {k[0], k[1], k[2]}, sb[3] = {k[0], k[2], k[3]}, sy[3] = {k[0], k[1], k[3]};
        tk_tensor *a = tk_bench_random_tensor(ctx, dev, dt, 3, sa, -1.0f, 1.0f, 1);
        tk_tensor *b = k[4] ? tk_bench_random_tensor(ctx, dev, dt, 2, sb + 1, -1.0f, 1.0f, 2)
                            : tk_bench_random_tensor(ctx, dev, dt, 3, sb, -1.0f, 1.0f, 2);
        tk_tensor *y = NULL;
        if (!a || !b || tk_tensor_new(&y, ctx, dev, dt, 3, sy)) {
            rc = 1;
        } else {
            tk_value args[2] = {tk__val_tensor(a), tk__val_tensor(b)};
            tk_bench_op_call call = {ctx, &op, args, 2, y};
            double us = tk_bench_time_us(ctx, tk_bench_call_op, &call, 3, runs, reps);
            rc = us < 0;
            if (!rc) {
                double flops = 2.0 * (double)k[0] * (double)k[1] * (double)k[2] * (double)k[3];
                printf("| %lld | %lld | %lld | %lld | %s | %.1f | %.1f |\n", (long long)k[0], (long long)k[1],
                       (long long)k[2], (long long)k[3], k[4] ? "shared" : "batched", us, flops / (us * 1e-6) / 1e12);
                fflush(stdout);
            }
        }
        tk_tensor_free(a);
        tk_tensor_free(b);
        tk_tensor_free(y);
    }
    if (rc)
        fprintf(stderr, "bench_matmul: %s\n", tk_error_last());
    tk_ctx_free(ctx);
    return rc ? 1 : 0;
}
