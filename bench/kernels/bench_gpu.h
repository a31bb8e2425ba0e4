/* What the GPU benchmarks of bench/kernels share: random device tensors made on the host, and the
 * timing of a call (warm-up calls, then `runs` samples of `reps` back-to-back calls and one sync,
 * the median of the samples in microseconds a call). */
#ifndef TK_BENCH_GPU_H
#define TK_BENCH_GPU_H

#include <stdint.h>
#include <tk/half.h>
#include <tk/runtime.h>

#include "bench_clock.h"

/* A device tensor of uniform values in [lo, hi) of dtype f32, f16 or bf16 (a fixed LCG from
 * seed), made on the host and copied; NULL with the error set. */
static inline tk_tensor *tk_bench_random_tensor(tk_ctx *ctx, tk_device dev, tk_dtype dt, int rank,
                                                const int64_t *shape, float lo, float hi, uint32_t seed)
{
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    tk_tensor *h = NULL, *d = NULL;
    if (tk_tensor_new(&h, NULL, cpu, dt, rank, shape))
        return NULL;
    for (int64_t i = 0; i < tk_numel(h); i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = lo + (hi - lo) * (float)(seed >> 8) * (1.0f / 16777216.0f);
        if (dt == TK_F32)
            ((float *)tk_tensor_data(h))[i] = v;
        else
            ((uint16_t *)tk_tensor_data(h))[i] = dt == TK_F16 ? tk_f32_to_f16(v) : tk_f32_to_bf16(v);
    }
    if (tk_tensor_new(&d, ctx, dev, dt, rank, shape) || tk_tensor_copy(ctx, d, h)) {
        tk_tensor_free(d);
        d = NULL;
    }
    tk_tensor_free(h);
    return d;
}

/* Median microseconds of call(arg) (0 or an error code) on ctx: `warmup` calls, then `runs`
 * (at most 256) samples of `reps` calls and a tk_ctx_sync. A negative value when a call failed
 * (the error in tk_error_last()). */
static inline double tk_bench_time_us(tk_ctx *ctx, int (*call)(void *arg), void *arg, int warmup, int runs, int reps)
{
    double samples[256];
    for (int w = 0; w < warmup; w++)
        if (call(arg))
            return -1;
    if (tk_ctx_sync(ctx))
        return -1;
    for (int r = 0; r < runs && r < 256; r++) {
        double t0 = tk_bench_now();
        for (int i = 0; i < reps; i++)
            if (call(arg))
                return -1;
        if (tk_ctx_sync(ctx))
            return -1;
        samples[r] = (tk_bench_now() - t0) / reps * 1e6;
    }
    return tk_bench_median(samples, runs < 256 ? runs : 256);
}

#ifdef TK_RT_INTERNAL_H
/* One call of a resolved op (its values as a program's node passes them) into y, for
 * tk_bench_time_us: for benches built on libtkrt's internals (rt_internal.h included first). */
typedef struct tk_bench_op_call {
    tk_ctx *ctx;
    const tk_resolved_op *op;
    tk_value *args;
    int nargs;
    tk_tensor *y;
} tk_bench_op_call;

static inline int tk_bench_call_op(void *arg)
{
    tk_bench_op_call *c = arg;
    return tk_op_run_resolved(c->ctx, c->op, NULL, 0, c->args, c->nargs, &c->y, 1);
}
#endif

#endif
