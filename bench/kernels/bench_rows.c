/* The row ops (tk::softmax, tk::layer_norm with weight and bias, tk::rms_norm with weight) over
 * the last dim on the shapes of GPT-2 and Llama models, printed as a markdown table; beside it,
 * rows_torch.py times PyTorch's F.softmax, F.layer_norm and F.rms_norm on the same shapes the
 * same way (README.md).
 *
 *   bench_rows [--dtype bf16|f16|f32] [--runs 20] [--reps 20] [--device cuda:N]
 *
 * A sample times `reps` back-to-back eager tk_op_run calls into a preallocated output and one
 * tk_ctx_sync with CLOCK_MONOTONIC, divided by `reps`; the figure is the median of `runs`
 * samples. GB/s counts x read once and y written once (the weights are too small to matter).
 * Exit status: 0 done, 1 failed, 2 usage, 77 no GPU. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_gpu.h"
#include <tk/half.h>
#include <tk/op.h>
#include <tk/runtime.h>
#include "numarg.h" /* common/: the one reader of numeric options */

/* what the shapes stand for: GPT-2 small (768) at batch 1 seq 128 and batch 8 seq 1024, the
 * attention scores of the latter (8 x 12 heads x 1024 x 1024), a Llama-7B hidden (4096) */
static const struct {
    const char *what;
    int64_t rows, cols;
} CASES[] = {
    {"gpt2 b1 s128", 128, 768},
    {"gpt2 b8 s1024", 8192, 768},
    {"scores b8 h12 s1024", 98304, 1024},
    {"llama b4 s512", 2048, 4096},
};

/* one call of op on in into y, for tk_bench_time_us */
typedef struct row_call {
    tk_ctx *ctx;
    const char *op;
    tk_tensor **in;
    int nin;
    tk_tensor *y;
} row_call;

static int call_row_op(void *arg)
{
    row_call *c = arg;
    tk_tensor *out[1] = {c->y};
    return tk_op_run(c->ctx, c->op, c->in, c->nin, out, 1);
}

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: bench_rows [--dtype bf16|f16|f32] [--runs N] [--reps N] [--device cuda:N]\n"
                "Times tk::softmax, tk::layer_norm and tk::rms_norm on GPT-2 and Llama shapes (median of\n"
                "runs samples of reps calls); prints a markdown table. Compare with rows_torch.py.\n");
    return status;
}

int main(int argc, char **argv)
{
    tk_dtype dt = TK_BF16;
    int runs = 20, reps = 20;
    tk_device dev = {TK_DEVICE_CUDA, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout, 0);
        if (!v)
            return usage(stderr, 2);
        if (!strcmp(a, "--dtype") && tk_dtype_parse(&dt, v) == 0 && (dt == TK_F32 || dt == TK_F16 || dt == TK_BF16))
            ;
        else if (!strcmp(a, "--runs") && !tk_parse_int(v, 1, 256, &runs))
            ;
        else if (!strcmp(a, "--reps") && !tk_parse_int(v, 1, 1000000, &reps))
            ;
        else if (!strcmp(a, "--device") && tk_device_parse(&dev, v) == 0 && dev.kind == TK_DEVICE_CUDA)
            ;
        else {
            fprintf(stderr, "bench_rows: bad option '%s %s'\n", a, v);
            return usage(stderr, 2);
        }
        i++;
    }
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "bench_rows: skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_ctx *ctx = NULL;
    if (tk_ctx_new(&ctx, dev)) {
        fprintf(stderr, "bench_rows: %s\n", tk_error_last());
        return 1;
    }
    printf("| case | rows x cols | op | %s us | GB/s |\n| --- | --- | --- | --- | --- |\n", tk_dtype_name(dt));
    int rc = 0;
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES && !rc; c++) {
        int64_t shape[2] = {CASES[c].rows, CASES[c].cols};
        tk_tensor *x = tk_bench_random_tensor(ctx, dev, dt, 2, shape, -4, 4, 7u + (uint32_t)c);
        tk_tensor *w = tk_bench_random_tensor(ctx, dev, dt, 1, shape + 1, 0.5f, 1.5f, 11u);
        tk_tensor *b = tk_bench_random_tensor(ctx, dev, dt, 1, shape + 1, -1, 1, 13u), *y = NULL;
        if (!x || !w || !b || tk_tensor_new(&y, ctx, dev, dt, 2, shape)) {
            rc = 1;
        } else {
            static const struct {
                const char *op;
                int nin;
            } ops[] = {{"tk::softmax", 1}, {"tk::layer_norm", 3}, {"tk::rms_norm", 2}};
            for (size_t o = 0; o < 3 && !rc; o++) {
                tk_tensor *in[3] = {x, w, b};
                row_call call = {ctx, ops[o].op, in, ops[o].nin, y};
                double us = tk_bench_time_us(ctx, call_row_op, &call, 3, runs, reps);
                if (us < 0) {
                    rc = 1;
                    break;
                }
                double gb = 2.0 * (double)tk_tensor_nbytes(x) / (us * 1e-6) / 1e9;
                printf("| %s | %lld x %lld | %s | %.2f | %.0f |\n", CASES[c].what, (long long)shape[0],
                       (long long)shape[1], ops[o].op, us, gb);
                fflush(stdout);
            }
        }
        tk_tensor_free(x);
        tk_tensor_free(w);
        tk_tensor_free(b);
        tk_tensor_free(y);
    }
    if (rc)
        fprintf(stderr, "bench_rows: %s\n", tk_error_last());
    tk_ctx_free(ctx);
    return rc;
}
