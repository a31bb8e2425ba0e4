/* tk::linear on the CPU, fast enough to run a model: y = x W^T + b with the weight widened to
 * float once, x a tile of rows at a time, and every dot product accumulated in 8 independent
 * lanes (so the compiler emits vector multiply-adds without reordering one sum), over tiles of
 * 4 rows of x by 2 rows of W (8 accumulators, held in registers), rows of x split over threads.
 * tk_ref_linear (linear.c) stays the plain loop the tests compare this with. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tk/half.h>
#include <tk/runtime.h>

#include "ref.h"

#define MAX_THREADS 16
#define ROWS 4 /* rows of x per tile */
#define COLS 2 /* rows of W per tile */

typedef float v8 __attribute__((vector_size(32)));

/* x86-64 runs the variant for its CPU: AVX2 with FMA where there is one, else SSE2 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define TK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TK_CLONES
#endif

typedef struct job {
    tk_dtype dtype;
    const void *x, *b;
    void *y;
    const float *wf, *bf;
    int64_t M, K, N;
    int64_t row0, row1; /* this thread's rows of x */
    int err;
} job;

/* out[r][c] = dot(xs[r], ws[c]) for rows r < nr of xs and c < nc of ws, each K long (ld K). */
TK_CLONES static void tile(const float *xs, int nr, const float *ws, int nc, int64_t K, float out[ROWS][COLS])
{
    v8 acc[ROWS][COLS];
    memset(acc, 0, sizeof(acc));
    int64_t k8 = K & ~(int64_t)7;
    for (int64_t k = 0; k < k8; k += 8) {
        v8 w[COLS];
        for (int c = 0; c < COLS; c++)
            if (c < nc)
                memcpy(&w[c], ws + c * K + k, sizeof(v8));
            else
                w[c] = (v8){0};
        for (int r = 0; r < ROWS; r++) {
            v8 x = {0};
            if (r < nr)
                memcpy(&x, xs + r * K + k, sizeof(v8));
            for (int c = 0; c < COLS; c++)
                acc[r][c] += x * w[c];
        }
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            const v8 a = acc[r][c];
            float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            for (int64_t k = k8; k < K; k++)
                s += xs[r * K + k] * ws[c * K + k];
            out[r][c] = s;
        }
}

static void *run_rows(void *arg)
{
    job *j = arg;
    float *xs = malloc((size_t)(ROWS * j->K + 1) * sizeof(float));
    if (!xs) {
        j->err = 1;
        return NULL;
    }
    for (int64_t m = j->row0; m < j->row1; m += ROWS) {
        int nr = (int)(j->row1 - m < ROWS ? j->row1 - m : ROWS);
        for (int r = 0; r < nr; r++)
            for (int64_t k = 0; k < j->K; k++)
                xs[r * j->K + k] = tk_ref_load(j->dtype, j->x, (m + r) * j->K + k);
        for (int64_t n = 0; n < j->N; n += COLS) {
            int nc = (int)(j->N - n < COLS ? j->N - n : COLS);
            float out[ROWS][COLS];
            tile(xs, nr, j->wf + n * j->K, nc, j->K, out);
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++)
                    tk_ref_store(j->dtype, j->y, (m + r) * j->N + n + c, out[r][c] + (j->b ? j->bf[n + c] : 0.0f));
        }
    }
    free(xs);
    return NULL;
}

int tk_cpu_linear(tk_dtype dtype, const void *x, const void *w, const void *b, void *y, int64_t M, int64_t K,
                  int64_t N, int threads)
{
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "linear on the CPU: dtype %d is not f32, f16 or bf16", (int)dtype);
    float *wf = malloc((size_t)(N * K + N + 1) * sizeof(float));
    if (!wf)
        return tk_error_set(TK_ENOMEM, "linear on the CPU: out of memory for a [%lld, %lld] weight", (long long)N,
                            (long long)K);
    for (int64_t i = 0; i < N * K; i++)
        wf[i] = tk_ref_load(dtype, w, i);
    float *bf = wf + N * K;
    for (int64_t i = 0; b && i < N; i++)
        bf[i] = tk_ref_load(dtype, b, i);

    if (threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 0 ? (int)nc : 1;
    }
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    int64_t tiles = (M + ROWS - 1) / ROWS;
    if ((double)M * (double)N * (double)K < (double)(1 << 20)) /* a thread costs more than it saves */
        threads = 1;
    if (threads > tiles)
        threads = tiles > 0 ? (int)tiles : 1;
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){dtype, x, b, y, wf, bf, M, K, N, 0, 0, 0};
        jobs[t].row0 = tiles * t / threads * ROWS;
        jobs[t].row1 = tiles * (t + 1) / threads * ROWS;
        if (jobs[t].row1 > M)
            jobs[t].row1 = M;
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&th[t], NULL, run_rows, &jobs[t]) == 0;
    for (int t = 1; t < threads; t++) /* a thread that did not start: its rows run here */
        if (!started[t])
            run_rows(&jobs[t]);
    run_rows(&jobs[0]);
    int err = jobs[0].err;
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        err |= jobs[t].err;
    }
    free(wf);
    return err ? tk_error_set(TK_ENOMEM, "linear on the CPU: out of memory for a tile of x") : 0;
}
