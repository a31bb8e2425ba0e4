/* Statistics of call times, one definition for every timing table of the serving benchmarks
 * (tkexport run --bench, bench/serving's bench_serving and graph_floor). Plain C, no libtkrt:
 * graph_floor times the CUDA driver alone. */
#ifndef TK_CALL_STATS_H
#define TK_CALL_STATS_H

#include <stddef.h>

/* Statistics of n call times in microseconds (sorts t): nearest-rank percentiles. */
typedef struct call_stats {
    size_t n;
    double median, p10, p90, p99, min, max, mean, calls_per_s;
} call_stats;
void call_stats_compute(double *t, size_t n, call_stats *out);

#endif
