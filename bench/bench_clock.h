/* What every C benchmark of bench/ times with: a monotonic clock and the median of samples
 * (one owner: the copies in each bench had drifted, two took the upper middle for an even count). */
#ifndef TK_BENCH_CLOCK_H
#define TK_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double tk_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int tk_bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (sorts v in place); the mean of the middle two for an even n. */
static inline double tk_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, tk_bench_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
