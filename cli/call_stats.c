/* Statistics of call times (call_stats.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "call_stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-th percentile of n sorted values, nearest rank. */
static double percentile(const double *v, size_t n, double p)
{
    long k = (long)ceil(p / 100.0 * (double)n) - 1;
    return v[k < 0 ? 0 : k >= (long)n ? (long)n - 1 : k];
}

void call_stats_compute(double *t, size_t n, call_stats *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (!n)
        return;
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += t[i];
    qsort(t, n, sizeof *t, cmp_double);
    out->median = percentile(t, n, 50);
    out->p10 = percentile(t, n, 10);
    out->p90 = percentile(t, n, 90);
    out->p99 = percentile(t, n, 99);
    out->min = t[0];
    out->max = t[n - 1];
    out->mean = total / (double)n;
    out->calls_per_s = out->mean > 0 ? 1e6 / out->mean : 0;
}
