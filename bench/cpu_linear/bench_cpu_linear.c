/* tk::linear on the CPU: the fast path (tk_cpu_linear: vectorized tiles, rows over threads)
 * against the plain reference loop (tk_ref_linear), side by side in one run, on the shapes of a
 * Llama-style block's projections (K 256; N 256, 768, 1024), bf16 and f32. Prints the median of
 * REPS runs of each and the ratio; the reference runs on fewer rows (its time per row does not
 * depend on the row count), so both are quoted in GFLOP/s. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_clock.h"
#include <tk/half.h>

#include "numarg.h"
#include "ref.h"

static const char usage[] = "usage: bench_cpu_linear [REPS (1-100)] [ROWS] [REFERENCE_ROWS]\n";

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%stk::linear on the CPU, the fast path against the reference loop, at K 256 and N 256, 768\n"
               "and 1024, bf16 and f32: the median of REPS runs (default 5) over ROWS rows (32768), the\n"
               "reference over REFERENCE_ROWS (512), in GFLOP/s. Exit status: 0 done, 1 out of memory, 2 usage.\n",
               usage);
        return 0;
    }
    int reps = 5;
    long long rows = 32768, ref_rows = 512; /* batch 16 x seq 2048 */
    if (argc > 4 || (argc > 1 && tk_parse_int(argv[1], 1, 100, &reps)) ||
        (argc > 2 && tk_parse_whole(argv[2], 1, 1 << 24, &rows)) ||
        (argc > 3 && tk_parse_whole(argv[3], 1, 1 << 24, &ref_rows))) {
        fprintf(stderr, "bench_cpu_linear: expected up to three whole numbers; %s", usage);
        return 2;
    }
    if (ref_rows > rows) {
        fprintf(stderr, "bench_cpu_linear: REFERENCE_ROWS (%lld) must not exceed ROWS (%lld)\n", ref_rows, rows);
        return 2;
    }
    const int64_t K = 256, Ns[] = {256, 768, 1024};
    const tk_dtype dtypes[] = {TK_BF16, TK_F32};
    printf("| dtype | M x K x N | reference GFLOP/s (M=%lld) | fast GFLOP/s | fast ms | speed-up |\n", (long long)ref_rows);
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
    for (int d = 0; d < 2; d++) {
        for (int s = 0; s < 3; s++) {
            int64_t N = Ns[s];
            size_t es = dtypes[d] == TK_F32 ? 4 : 2;
            unsigned char *x = malloc((size_t)(rows * K) * es), *w = malloc((size_t)(N * K) * es);
            unsigned char *b = malloc((size_t)N * es), *y = malloc((size_t)(rows * N) * es);
            if (!x || !w || !b || !y) {
                fprintf(stderr, "bench_cpu_linear: out of memory\n");
                return 1;
            }
            unsigned seed = 7;
            for (int64_t i = 0; i < rows * K + N * K + N; i++) {
                float v = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
                unsigned char *dst = i < rows * K ? x + i * (int64_t)es
                                     : i < rows * K + N * K ? w + (i - rows * K) * (int64_t)es
                                                            : b + (i - rows * K - N * K) * (int64_t)es;
                if (es == 4)
                    memcpy(dst, &v, 4);
                else {
                    uint16_t h = tk_f32_to_bf16(v);
                    memcpy(dst, &h, 2);
                }
            }
            double tref[100], tfast[100];
            for (int r = 0; r < reps; r++) {
                double t0 = tk_bench_now();
                if (tk_ref_linear(dtypes[d], x, w, b, y, ref_rows, K, N))
                    return 1;
                double t1 = tk_bench_now();
                if (tk_cpu_linear(dtypes[d], x, w, b, y, rows, K, N, 0))
                    return 1;
                double t2 = tk_bench_now();
                tref[r] = t1 - t0;
                tfast[r] = t2 - t1;
            }
            double ref_gf = 2.0 * ref_rows * K * N / tk_bench_median(tref, reps) / 1e9;
            double fm = tk_bench_median(tfast, reps), fast_gf = 2.0 * rows * K * N / fm / 1e9;
            printf("| %s | %lld x %lld x %lld | %.2f | %.2f | %.1f | %.1fx |\n", es == 4 ? "f32" : "bf16",
                   (long long)rows, (long long)K, (long long)N, ref_gf, fast_gf, fm * 1e3, fast_gf / ref_gf);
            free(x);
            free(w);
            free(b);
            free(y);
        }
    }
    return 0;
}
