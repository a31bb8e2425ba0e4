/* tk::sdpa against PyTorch's F.scaled_dot_product_attention (attention_torch.py, same shapes, same
 * method): q, k, v [B, H, S, D] of one dtype, causal and not, S from 512 to 4096, D 64 and 128.
 *
 *   bench_attention [--dtype bf16|f16] [--runs 10] [--reps 10] [--batch-heads 32]
 *
 * A sample times `reps` back-to-back calls into a preallocated output (the op run as a program's
 * node runs it: resolved once, its scalars passed as values) and one sync, with CLOCK_MONOTONIC;
 * the figure is the median of `runs` samples. TFLOP/s counts 4 B H S^2 D (half of it causal), as
 * PyTorch's own attention benchmarks do. Exit status: 0 done, 1 failed, 2 usage, 77 no GPU. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/runtime.h>
#include "numarg.h" /* common/: the one reader of numeric options */

#include "rt_internal.h"
#include "bench_gpu.h" /* after rt_internal.h: its resolved-op call too */

int main(int argc, char **argv)
{
    tk_dtype dt = TK_BF16;
    int runs = 10, reps = 10, bh = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_attention [--dtype bf16|f16] [--runs N] [--reps N] [--batch-heads N]\n"
                   "Times tk::sdpa on q, k, v [B, H, S, D] (B H = batch-heads, 32 by default) for S 512..4096,\n"
                   "D 64 and 128, causal and not; prints a markdown table. Compare with attention_torch.py.\n");
            return 0;
        }
        if (!v || !((!strcmp(a, "--dtype") && !tk_dtype_parse(&dt, v) && (dt == TK_F16 || dt == TK_BF16)) ||
                    (!strcmp(a, "--runs") && !tk_parse_int(v, 1, 256, &runs)) ||
                    (!strcmp(a, "--reps") && !tk_parse_int(v, 1, 1000000, &reps)) ||
                    (!strcmp(a, "--batch-heads") && !tk_parse_int(v, 1, 1 << 20, &bh)))) {
            fprintf(stderr, "bench_attention: bad option '%s'\n", a);
            return 2;
        }
        i++;
    }
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "bench_attention: skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_device dev = {TK_DEVICE_CUDA, 0};
    tk_ctx *ctx = NULL;
    tk_resolved_op op;
    if (tk_ctx_new(&ctx, dev) || tk_op_resolve(&op, NULL, "tk::sdpa")) {
        fprintf(stderr, "bench_attention: %s\n", tk_error_last());
        return 1;
    }
    printf("| S | D | causal | tk::sdpa %s us | TFLOP/s |\n| --- | --- | --- | --- | --- |\n", tk_dtype_name(dt));
    int rc = 0;
    static const int64_t seqs[] = {512, 1024, 2048, 4096}, dims[] = {64, 128};
    for (size_t di = 0; di < 2 && !rc; di++)
        for (size_t si = 0; si < 4 && !rc; si++)
            for (int causal = 0; causal < 2 && !rc; causal++) {
                int64_t S = seqs[si], D = dims[di], shape[4] = {bh / 8 ? bh / 8 : 1, bh / 8 ? 8 : bh, S, D};
                tk_tensor *q = tk_bench_random_tensor(ctx, dev, dt, 4, shape, -2.0f, 2.0f, 1);
                tk_tensor *k = tk_bench_random_tensor(ctx, dev, dt, 4, shape, -2.0f, 2.0f, 2);
                tk_tensor *v = tk_bench_random_tensor(ctx, dev, dt, 4, shape, -2.0f, 2.0f, 3), *y = NULL;
                if (!q || !k || !v || tk_tensor_new(&y, ctx, dev, dt, 4, shape)) {
                    rc = 1;
                } else {
                    tk_value args[5] = {tk__val_tensor(q), tk__val_tensor(k), tk__val_tensor(v), tk__val_bool(causal),
                                        tk__val_float(0.0)};
                    tk_bench_op_call call = {ctx, &op, args, 5, y};
                    double us = tk_bench_time_us(ctx, tk_bench_call_op, &call, 2, runs, reps);
                    rc = us < 0;
                    if (!rc) {
                        double flops = 4.0 * (double)bh * (double)S * (double)S * (double)D * (causal ? 0.5 : 1.0);
                        printf("| %lld | %lld | %s | %.1f | %.1f |\n", (long long)S, (long long)D, causal ? "yes" : "no",
                               us, flops / (us * 1e-6) / 1e12);
                        fflush(stdout);
                    }
                }
                tk_tensor_free(q);
                tk_tensor_free(k);
                tk_tensor_free(v);
                tk_tensor_free(y);
            }
    if (rc)
        fprintf(stderr, "bench_attention: %s\n", tk_error_last());
    tk_ctx_free(ctx);
    return rc ? 1 : 0;
}
