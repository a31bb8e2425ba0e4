/* bench_serving: a package called the way a server calls it, on libtkrt's public API only.
 *
 *   bench_serving PKG.tkpkg [--device cuda[:N]|cpu] [--streams fixed,cycle,uniform|none]
 *                 [--threads 1,2,4,8] [--calls N] [--warmup N] [--fixed SYM=V[,SYM=V]...]
 *                 [--first N] [--gap US] [--seed S] [--label TEXT] [--json FILE] [--csv FILE]
 *                 [--first-csv FILE]
 *
 * Streams of input shapes (cli/shape_stream.c): `fixed` one shape (--fixed, default every
 * symbol at min(16, its max)), `cycle` 8 sizes per symbol spaced geometrically over its range,
 * `uniform` every symbol drawn uniformly in its range on every call. For each stream and each
 * thread count T, T threads each open their own session on the device, make their inputs once
 * (random values at the largest shapes, on the device; each call a view of its shape), run
 * --warmup calls, wait for each other, then time --calls calls each: a call is tk_session_run +
 * tk_ctx_sync. Reported per (stream, T): median, p90, p99, mean and max microseconds per call
 * over all threads' calls, calls/s (all threads' calls over the wall time from the start line to
 * the last thread's end), how many calls had a shape new to their session, the host's part of
 * a call (until tk_session_run returned, the wait for the GPU apart): its mean, and "all busy/s":
 * the calls/s while every thread was running (busy_rate), which a thread that falls behind does not
 * stretch as it stretches the wall time.
 *
 * Before the streams, first calls: a fresh session runs the fixed shape once (its first call),
 * then --first distinct shapes never run before (uniform draws), each once, timed; then each of
 * them once more. The two distributions side by side are the price of a shape never seen; the
 * first calls' host part (until tk_session_run returned, the wait for the GPU apart) is a row of
 * its own, and so is each shape's first call less its second ("first-second": what a shape
 * costs the first time beyond what it costs again, its own GPU time apart). --gap
 * pauses so many microseconds before each of those calls (untimed): requests spaced as a service
 * gets them, which leave the session's background work (captures, prefill) room between them.
 *
 * Output: a table on stdout, --json (everything), --csv (one row per stream and T) and --first-csv
 * (one row per first-call shape, in the order they ran: its symbols, its first and second calls and
 * their host parts).
 * Exit status: 0 done, 1 a run failed, 2 usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tk/runtime.h>

#include "call_stats.h"
#include "numarg.h"
#include "shape_stream.h"

#define MAX_THREADS 64
#define MAX_RUNS 64
#define MAX_IO 64 /* inputs and outputs of a program; more are refused */

typedef struct options {
    const char *pkg_path, *device, *streams, *threads, *fixed, *label, *json, *csv, *prefill, *first_csv;
    int calls, warmup, first, gap, max_shapes, bind, ready;
    uint64_t seed;
    tk_session_options session; /* from --prefill and --max-shapes */
} options;

typedef struct run_result {
    const char *stream;
    int threads;
    call_stats st, host; /* host: until tk_session_run returned */
    double wall_s, calls_per_s;
    double busy_calls_per_s; /* the calls that began and ended while every thread was running, over that time */
    size_t new_calls;
    double new_median, repeat_median;
} run_result;

typedef struct first_result {
    int shapes;
    double session_new_ms, ready_ms, session_first_us;
    int ready;
    call_stats first, first_host, second, second_host; /* *_host: until tk_session_run returned (the wait apart) */
    call_stats excess, excess_host;                    /* per shape: its first call less its second */
} first_result;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int usage(FILE *f, int status)
{
    fprintf(f, "usage: bench_serving PKG.tkpkg [--device cuda[:N]|cpu] [--streams fixed,cycle,uniform|none]\n"
               "                     [--threads 1,2,4,8] [--calls N] [--warmup N] [--fixed SYM=V[,SYM=V]...]\n"
               "                     [--first N] [--gap US] [--seed S] [--label TEXT] [--json FILE] [--csv FILE]\n"
               "                     [--first-csv FILE] [--prefill auto|now|off] [--max-shapes N] [--bind] [--ready]\n"
               "--first N: a fresh session's first calls of N shapes never run before, then each again; --gap: a\n"
               "pause of US microseconds before each of them (untimed), as between a service's requests;\n"
               "--first-csv: those calls one shape a row, in the order they ran.\n"
               "--prefill now: each session captures its whole symbol space from creation and is waited for\n"
               "(tk_session_wait_ready) before its first call; --max-shapes: the signatures a session keeps;\n"
               "--bind: each session's buffers (largest shapes) are bound (tk_session_bind) and its prefill\n"
               "waited for: calls on them replay graphs captured on them. --ready: each session's background\n"
               "work (the warm-up of --prefill auto) waited for before its first call, as a service does at\n"
               "start-up.\n");
    return status;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_serving: %s: %s\n", what, tk_error_last());
    return 1;
}

/* A new session's buffers bound (--bind) and its prefill waited for (--prefill now, or --ready: its
 * warm-up under --prefill auto): *ready_ms is the time both took, *ready tk_session_wait_ready's
 * answer. */
static int session_settle(const tk_session_options *so, int bind, int wait, tk_session *s, const shape_buffers *b,
                          double *ready_ms, int *ready)
{
    double t0 = now_us();
    int rc = 0;
    *ready_ms = 0;
    *ready = 0;
    if (bind && (rc = tk_session_bind(s, b->in, b->nin, b->out, b->nout)))
        return rc;
    if (so->prefill == TK_PREFILL_NOW || bind || wait) {
        rc = tk_session_wait_ready(s);
        *ready = rc > 0;
    }
    *ready_ms = (now_us() - t0) / 1000.0;
    return rc < 0 ? rc : 0;
}

/* --- one thread of a run -------------------------------------------------------------------- */

typedef struct worker {
    const tk_session_options *so;
    int bind, wait;
    tk_package *pkg;
    tk_device dev;
    shape_stream_kind kind;
    const char *list;
    uint64_t seed;
    int index, warmup, calls;
    pthread_barrier_t *ready, *done;
    double *t, *h;        /* calls times, us; their host part (until tk_session_run returned) */
    double *end;          /* when each timed call ended (now_us) */
    unsigned char *is_new;
    int rc;
    char err[512];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    tk_session *s = NULL;
    shape_stream st;
    shape_buffers bufs = {0};
    tk_tensor *in[MAX_IO], *out[MAX_IO];
    int64_t values[SHAPES_MAX_SYMS];
    int stream_ok = 0, ready;
    double ready_ms;
    char err[512];
    if ((w->rc = tk_session_new_ex(&s, w->pkg, w->dev, w->so))) {
        snprintf(w->err, sizeof w->err, "tk_session_new: %s", tk_error_last());
    } else if (shape_stream_init(&st, w->pkg, w->kind, w->list, w->seed + 7919u * (uint64_t)w->index, err,
                                 sizeof err)) {
        w->rc = -1;
        snprintf(w->err, sizeof w->err, "%s", err);
    } else {
        stream_ok = 1;
        st.next = st.nrows ? (size_t)w->index % st.nrows : 0; /* threads of a cycle start apart */
        if ((w->rc = shape_buffers_init(&bufs, &st, w->pkg, s, w->seed)))
            snprintf(w->err, sizeof w->err, "buffers: %s", tk_error_last());
        else if ((w->rc = session_settle(w->so, w->bind, w->wait, s, &bufs, &ready_ms, &ready)))
            snprintf(w->err, sizeof w->err, "bind and prefill: %s", tk_error_last());
    }
    tk_ctx *ctx = s ? tk_session_ctx(s) : NULL;
    for (int i = 0; i < w->warmup + w->calls; i++) {
        if (i == w->warmup)
            pthread_barrier_wait(w->ready); /* every thread warm: the timed part starts together */
        if (w->rc)
            continue;
        shape_stream_next(&st, values);
        int first = shape_stream_first_time(&st, values);
        if ((w->rc = shape_buffers_bind(&bufs, &st, w->pkg, values, in, out))) {
            snprintf(w->err, sizeof w->err, "views: %s", tk_error_last());
            continue;
        }
        double t0 = now_us();
        w->rc = tk_session_run(s, in, bufs.nin, out, bufs.nout);
        double dh = now_us() - t0;
        if (!w->rc)
            w->rc = tk_ctx_sync(ctx);
        double dt = now_us() - t0;
        if (w->rc)
            snprintf(w->err, sizeof w->err, "tk_session_run: %s", tk_error_last());
        shape_buffers_unbind(&bufs, in, out);
        if (i >= w->warmup) {
            w->t[i - w->warmup] = dt;
            w->h[i - w->warmup] = dh;
            w->is_new[i - w->warmup] = first > 0;
            w->end[i - w->warmup] = t0 + dt;
        }
    }
    pthread_barrier_wait(w->done);
    shape_buffers_release(&bufs);
    if (stream_ok)
        shape_stream_release(&st);
    tk_session_free(s);
    return NULL;
}

/* Calls/s while every thread was running: from the last thread's first call to the first thread's
 * last end, the calls that began and ended in that window over its length. The wall time to the
 * last thread's end (calls_per_s) also counts the stretch where threads that finished early wait
 * for one that fell behind; a server's threads never finish, and this is the rate they keep. */
static double busy_rate(const double *t, const double *end, int nthreads, int calls)
{
    double from = 0, to = 0;
    for (int i = 0; i < nthreads; i++) {
        const double *e = end + (size_t)i * (size_t)calls, *d = t + (size_t)i * (size_t)calls;
        double begin = e[0] - d[0], last = e[calls - 1];
        if (i == 0 || begin > from)
            from = begin;
        if (i == 0 || last < to)
            to = last;
    }
    if (to <= from)
        return 0;
    size_t k = 0;
    for (size_t c = 0; c < (size_t)nthreads * (size_t)calls; c++)
        k += end[c] - t[c] >= from && end[c] <= to;
    return (double)k / ((to - from) * 1e-6);
}

/* Median of the calls whose flag is `which`. */
static double subset_median(const double *t, const unsigned char *is_new, size_t n, int which, size_t *count)
{
    double *sub = malloc((n + 1) * sizeof *sub);
    size_t k = 0;
    call_stats st;
    if (!sub)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (is_new[i] == which)
            sub[k++] = t[i];
    call_stats_compute(sub, k, &st);
    free(sub);
    if (count)
        *count = k;
    return st.median;
}

static int run_one(const options *o, tk_package *pkg, tk_device dev, shape_stream_kind kind, const char *name,
                   const char *list, int nthreads, run_result *r)
{
    worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    pthread_barrier_t ready, done;
    size_t n = (size_t)nthreads * (size_t)o->calls;
    double *t = malloc((n + 1) * sizeof *t), *h = malloc((n + 1) * sizeof *h), *end = malloc((n + 1) * sizeof *end);
    unsigned char *is_new = malloc(n + 1);
    int rc = 0, started = 0;
    if (!t || !h || !end || !is_new) {
        free(t);
        free(h);
        free(end);
        free(is_new);
        fprintf(stderr, "bench_serving: out of memory\n");
        return 1;
    }
    /* the main thread joins both barriers: it takes the time between them */
    pthread_barrier_init(&ready, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&done, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){.so = &o->session, .bind = o->bind, .wait = o->ready, .pkg = pkg, .dev = dev, .kind = kind,
                        .list = list, .seed = o->seed, .index = i, .warmup = o->warmup, .calls = o->calls,
                        .ready = &ready, .done = &done,
                        .t = t + (size_t)i * (size_t)o->calls, .h = h + (size_t)i * (size_t)o->calls,
                        .end = end + (size_t)i * (size_t)o->calls,
                        .is_new = is_new + (size_t)i * (size_t)o->calls};
        if (pthread_create(&th[i], NULL, work, &w[i])) {
            fprintf(stderr, "bench_serving: cannot start thread %d\n", i);
            exit(1); /* the others wait at a barrier sized for every thread */
        }
        started++;
    }
    pthread_barrier_wait(&ready);
    double t0 = now_us();
    pthread_barrier_wait(&done);
    double wall = now_us() - t0;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&done);
    for (int i = 0; i < nthreads && !rc; i++) {
        if (w[i].rc) {
            fprintf(stderr, "bench_serving: %s, %d threads: thread %d: %s\n", name, nthreads, i, w[i].err);
            rc = 1;
        }
    }
    if (!rc) {
        memset(r, 0, sizeof *r);
        r->stream = name;
        r->threads = nthreads;
        r->new_median = subset_median(t, is_new, n, 1, &r->new_calls);
        r->repeat_median = subset_median(t, is_new, n, 0, NULL);
        call_stats_compute(t, n, &r->st);
        call_stats_compute(h, n, &r->host);
        r->wall_s = wall * 1e-6;
        r->calls_per_s = wall > 0 ? (double)n / (wall * 1e-6) : 0;
        r->busy_calls_per_s = busy_rate(t, end, nthreads, o->calls);
    }
    free(t);
    free(h);
    free(end);
    free(is_new);
    return rc;
}

/* --- first calls of new shapes ---------------------------------------------------------------- */

/* One row per first-call shape, in the order they ran (--first-csv). */
static int write_first_csv(const char *path, const shape_stream *st, const int64_t *shapes, int n, const double *t1,
                           const double *h1, const double *t2, const double *h2)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_serving: cannot write '%s': %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f, "index");
    for (size_t k = 0; k < st->nsyms; k++)
        fprintf(f, ",%s", st->names[k]);
    fprintf(f, ",first_us,first_host_us,second_us,second_host_us\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d", i);
        for (size_t k = 0; k < st->nsyms; k++)
            fprintf(f, ",%lld", (long long)shapes[(size_t)i * SHAPES_MAX_SYMS + k]);
        fprintf(f, ",%.3f,%.3f,%.3f,%.3f\n", t1[i], h1[i], t2[i], h2[i]);
    }
    if (fclose(f)) {
        fprintf(stderr, "bench_serving: cannot write '%s': %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

static int run_first(const options *o, tk_package *pkg, tk_device dev, const char *fixed, first_result *r)
{
    tk_session *s = NULL;
    shape_stream fx, un;
    shape_buffers bufs = {0};
    tk_tensor *in[MAX_IO], *out[MAX_IO];
    int64_t v[SHAPES_MAX_SYMS];
    int64_t *shapes = NULL;
    double *t1 = NULL, *t2 = NULL, *h1 = NULL, *h2 = NULL, *d = NULL, *dh = NULL;
    char err[512];
    int rc = 1, have_fx = 0, have_un = 0;
    memset(r, 0, sizeof *r);
    if (shape_stream_init(&fx, pkg, SHAPES_LIST, fixed, o->seed, err, sizeof err)) {
        fprintf(stderr, "bench_serving: %s\n", err);
        goto done;
    }
    have_fx = 1;
    if (shape_stream_init(&un, pkg, SHAPES_UNIFORM, NULL, o->seed ^ 0xf1f1u, err, sizeof err)) {
        fprintf(stderr, "bench_serving: %s\n", err);
        goto done;
    }
    have_un = 1;
    double t0 = now_us();
    if (tk_session_new_ex(&s, pkg, dev, &o->session)) {
        fail("tk_session_new");
        goto done;
    }
    r->session_new_ms = (now_us() - t0) / 1000.0;
    if (shape_buffers_init(&bufs, &fx, pkg, s, o->seed)) {
        fail("buffers");
        goto done;
    }
    if (session_settle(&o->session, o->bind, o->ready, s, &bufs, &r->ready_ms, &r->ready)) {
        fail("bind and prefill");
        goto done;
    }
    tk_ctx *ctx = tk_session_ctx(s);
    /* the session's first call, on the fixed shape */
    shape_stream_next(&fx, v);
    shape_stream_first_time(&un, v);
    if (shape_buffers_bind(&bufs, &fx, pkg, v, in, out))
        goto failed;
    t0 = now_us();
    int e = tk_session_run(s, in, bufs.nin, out, bufs.nout);
    if (!e)
        e = tk_ctx_sync(ctx);
    r->session_first_us = now_us() - t0;
    shape_buffers_unbind(&bufs, in, out);
    if (e)
        goto failed;
    /* distinct new shapes: uniform draws not seen yet (a range too small to hold --first of them
       stops early) */
    shapes = calloc((size_t)o->first * SHAPES_MAX_SYMS + 1, sizeof *shapes);
    t1 = calloc((size_t)o->first + 1, sizeof *t1);
    t2 = calloc((size_t)o->first + 1, sizeof *t2);
    h1 = calloc((size_t)o->first + 1, sizeof *h1);
    h2 = calloc((size_t)o->first + 1, sizeof *h2);
    d = calloc((size_t)o->first + 1, sizeof *d);
    dh = calloc((size_t)o->first + 1, sizeof *dh);
    if (!shapes || !t1 || !t2 || !h1 || !h2 || !d || !dh) {
        fprintf(stderr, "bench_serving: out of memory\n");
        goto done;
    }
    int n = 0;
    for (int tries = 0; n < o->first && tries < 100 * o->first; tries++) {
        shape_stream_next(&un, v);
        if (shape_stream_first_time(&un, v) == 1)
            memcpy(shapes + (size_t)n++ * SHAPES_MAX_SYMS, v, sizeof v);
    }
    const struct timespec gap = {o->gap / 1000000, (long)(o->gap % 1000000) * 1000};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            if (shape_buffers_bind(&bufs, &un, pkg, shapes + (size_t)i * SHAPES_MAX_SYMS, in, out))
                goto failed;
            if (o->gap > 0)
                nanosleep(&gap, NULL);
            t0 = now_us();
            e = tk_session_run(s, in, bufs.nin, out, bufs.nout);
            (pass ? h2 : h1)[i] = now_us() - t0;
            if (!e)
                e = tk_ctx_sync(ctx);
            (pass ? t2 : t1)[i] = now_us() - t0;
            shape_buffers_unbind(&bufs, in, out);
            if (e)
                goto failed;
        }
    }
    r->shapes = n;
    if (o->first_csv && write_first_csv(o->first_csv, &un, shapes, n, t1, h1, t2, h2))
        goto done;
    for (int i = 0; i < n; i++) { /* before the statistics, which sort their arrays */
        d[i] = t1[i] - t2[i];
        dh[i] = h1[i] - h2[i];
    }
    call_stats_compute(d, (size_t)n, &r->excess);
    call_stats_compute(dh, (size_t)n, &r->excess_host);
    call_stats_compute(t1, (size_t)n, &r->first);
    call_stats_compute(h1, (size_t)n, &r->first_host);
    call_stats_compute(h2, (size_t)n, &r->second_host);
    call_stats_compute(t2, (size_t)n, &r->second);
    rc = 0;
    goto done;
failed:
    fail("first calls");
done:
    shape_buffers_release(&bufs);
    tk_session_free(s);
    if (have_fx)
        shape_stream_release(&fx);
    if (have_un)
        shape_stream_release(&un);
    free(shapes);
    free(t1);
    free(t2);
    free(h1);
    free(h2);
    free(d);
    free(dh);
    return rc;
}

/* --- output --------------------------------------------------------------------------------- */

/* s as a JSON string (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_stats(FILE *f, const call_stats *s)
{
    fprintf(f, "{\"n\": %zu, \"median_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, \"mean_us\": %.3f, "
               "\"min_us\": %.3f, \"max_us\": %.3f}",
            s->n, s->median, s->p90, s->p99, s->mean, s->min, s->max);
}

static int write_json(const options *o, const tk_package *pkg, const char *devname, const char *gpu,
                      const char *syms, const char *fixed, const first_result *fr, const run_result *runs, int nruns)
{
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, "bench_serving: cannot write '%s': %s\n", o->json, strerror(errno));
        return 1;
    }
    const char *keys[] = {"label", "package", "program", "device", "gpu", "symbols", "fixed"};
    const char *vals[] = {o->label, o->pkg_path, tk_package_program(pkg), devname, gpu, syms, fixed};
    fprintf(f, "{\n");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        fprintf(f, " \"%s\": ", keys[i]);
        json_str(f, vals[i]);
        fprintf(f, ",\n");
    }
    fprintf(f, " \"calls\": %d, \"warmup\": %d, \"seed\": %llu, \"prefill\": \"%s\", \"max_shapes\": %d, \"bind\": %d, "
               "\"ready\": %d,\n",
            o->calls, o->warmup, (unsigned long long)o->seed, o->prefill ? o->prefill : "auto", o->max_shapes, o->bind,
            o->ready);
    fprintf(f, " \"first_calls\": {\"shapes\": %d, \"gap_us\": %d, \"session_new_ms\": %.3f, \"ready_ms\": %.3f, \"ready\": %d, "
               "\"session_first_call_us\": %.3f, \"first\": ",
            fr->shapes, o->gap, fr->session_new_ms, fr->ready_ms, fr->ready, fr->session_first_us);
    json_stats(f, &fr->first);
    fprintf(f, ", \"first_host\": ");
    json_stats(f, &fr->first_host);
    fprintf(f, ", \"second\": ");
    json_stats(f, &fr->second);
    fprintf(f, ", \"second_host\": ");
    json_stats(f, &fr->second_host);
    fprintf(f, ", \"excess\": ");
    json_stats(f, &fr->excess);
    fprintf(f, ", \"excess_host\": ");
    json_stats(f, &fr->excess_host);
    fprintf(f, "},\n \"runs\": [");
    for (int i = 0; i < nruns; i++) {
        const run_result *r = &runs[i];
        fprintf(f, "%s\n  {\"stream\": \"%s\", \"threads\": %d, \"calls_per_s\": %.1f, \"busy_calls_per_s\": %.1f, "
                   "\"wall_s\": %.6f, \"new_shape_calls\": %zu, \"new_median_us\": %.3f, \"repeat_median_us\": %.3f, "
                   "\"stats\": ",
                i ? "," : "", r->stream, r->threads, r->calls_per_s, r->busy_calls_per_s, r->wall_s, r->new_calls,
                r->new_median, r->repeat_median);
        json_stats(f, &r->st);
        fprintf(f, ", \"host\": ");
        json_stats(f, &r->host);
        fprintf(f, "}");
    }
    fprintf(f, "\n ]\n}\n");
    return fclose(f) ? 1 : 0;
}

static int write_csv(const options *o, const run_result *runs, int nruns)
{
    FILE *f = fopen(o->csv, "w");
    if (!f) {
        fprintf(stderr, "bench_serving: cannot write '%s': %s\n", o->csv, strerror(errno));
        return 1;
    }
    fprintf(f, "label,stream,threads,calls,median_us,p90_us,p99_us,mean_us,max_us,calls_per_s,new_shape_calls,"
               "host_mean_us,host_p99_us,busy_calls_per_s\n");
    for (int i = 0; i < nruns; i++) {
        const run_result *r = &runs[i];
        fprintf(f, "%s,%s,%d,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%zu,%.3f,%.3f,%.1f\n", o->label, r->stream,
                r->threads, r->st.n, r->st.median, r->st.p90, r->st.p99, r->st.mean, r->st.max, r->calls_per_s,
                r->new_calls, r->host.mean, r->host.p99, r->busy_calls_per_s);
    }
    return fclose(f) ? 1 : 0;
}

/* --- main ----------------------------------------------------------------------------------- */

static int parse_int(const char *text, const char *what, int lo, int hi, int *out)
{
    long long v;
    if (tk_parse_whole(text, lo, hi, &v)) {
        fprintf(stderr, "bench_serving: %s '%s' is not a whole number in [%d, %d]\n", what, text, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* "batch=16 seq=16": every symbol at min(16, its max), or its min when that is larger. */
static void default_fixed(const shape_stream *s, char *buf, size_t n)
{
    int64_t v[SHAPES_MAX_SYMS];
    for (size_t k = 0; k < s->nsyms; k++)
        v[k] = s->max[k] < 16 ? s->max[k] : s->min[k] > 16 ? s->min[k] : 16;
    shape_stream_format(s, v, buf, n);
}

int main(int argc, char **argv)
{
    options o = {.device = "cuda:0", .streams = "fixed,cycle,uniform", .threads = "1,2,4,8", .label = "tkexport",
                 .calls = 2000, .warmup = 200, .first = 200};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = NULL, lo = 0, hi = 10000000;
        const char **str = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout, 0);
        if (!strcmp(a, "--device")) str = &o.device;
        else if (!strcmp(a, "--streams")) str = &o.streams;
        else if (!strcmp(a, "--threads")) str = &o.threads;
        else if (!strcmp(a, "--fixed")) str = &o.fixed;
        else if (!strcmp(a, "--label")) str = &o.label;
        else if (!strcmp(a, "--json")) str = &o.json;
        else if (!strcmp(a, "--csv")) str = &o.csv;
        else if (!strcmp(a, "--first-csv")) str = &o.first_csv;
        else if (!strcmp(a, "--prefill")) str = &o.prefill;
        else if (!strcmp(a, "--max-shapes")) num = &o.max_shapes;
        else if (!strcmp(a, "--bind")) {
            o.bind = 1;
            continue;
        }
        else if (!strcmp(a, "--ready")) {
            o.ready = 1;
            continue;
        }
        else if (!strcmp(a, "--calls")) num = &o.calls, lo = 1;
        else if (!strcmp(a, "--warmup")) num = &o.warmup;
        else if (!strcmp(a, "--first")) num = &o.first;
        else if (!strcmp(a, "--gap")) num = &o.gap;
        else if (!strcmp(a, "--seed")) {
            if (!v)
                return usage(stderr, 2);
            if (tk_parse_u64(v, &o.seed)) {
                fprintf(stderr, "bench_serving: --seed '%s' is not a whole number from 0 to 2^64-1\n", v);
                return 2;
            }
            i++;
            continue;
        } else if (a[0] != '-' && !o.pkg_path) {
            o.pkg_path = a;
            continue;
        } else {
            fprintf(stderr, "bench_serving: unknown argument '%s'\n", a);
            return usage(stderr, 2);
        }
        if (!v)
            return usage(stderr, 2);
        if (str)
            *str = v;
        else if (parse_int(v, a, lo, hi, num))
            return 2;
        i++;
    }
    if (!o.pkg_path)
        return usage(stderr, 2);
    o.session = (tk_session_options)TK_SESSION_OPTIONS_INIT;
    o.session.max_shapes = (size_t)o.max_shapes;
    if (!o.prefill || !strcmp(o.prefill, "auto"))
        o.session.prefill = TK_PREFILL_AUTO;
    else if (!strcmp(o.prefill, "now"))
        o.session.prefill = TK_PREFILL_NOW;
    else if (!strcmp(o.prefill, "off"))
        o.session.prefill = TK_PREFILL_OFF;
    else {
        fprintf(stderr, "bench_serving: --prefill '%s': expected auto, now or off\n", o.prefill);
        return 2;
    }

    shape_stream_kind kinds[8];
    const char *names[8];
    int nkinds = 0, nthreads[16], nt = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", o.streams);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *path;
        if (!strcmp(tok, "none"))
            continue;
        if (nkinds == 8 || shape_stream_parse(&kinds[nkinds], &path, tok) || path) {
            fprintf(stderr, "bench_serving: --streams: '%s' is not fixed, cycle, uniform or none\n", tok);
            return 2;
        }
        names[nkinds++] = !strcmp(tok, "fixed") ? "fixed" : !strcmp(tok, "cycle") ? "cycle" : "uniform";
    }
    char tbuf[256];
    snprintf(tbuf, sizeof tbuf, "%s", o.threads);
    for (char *save = NULL, *tok = strtok_r(tbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (nt == 16 || parse_int(tok, "--threads", 1, MAX_THREADS, &nthreads[nt++]))
            return 2;

    tk_device dev;
    if (tk_device_parse(&dev, o.device)) {
        fprintf(stderr, "bench_serving: %s\n", tk_error_last());
        return 2;
    }
    char devname[32], gpu[128] = "";
    int driver = 0;
    tk_device_name(dev, devname, sizeof devname);
    if (dev.kind == TK_DEVICE_CUDA && (tk_cuda_available() || tk_cuda_device_info(dev.index, gpu, sizeof gpu, &driver)))
        return fail(devname);

    tk_package *pkg = NULL;
    double t0 = now_us();
    if (tk_package_open(&pkg, o.pkg_path))
        return fail(o.pkg_path);
    double open_ms = (now_us() - t0) / 1000.0;
    if (tk_package_num_inputs(pkg) > MAX_IO || tk_package_num_outputs(pkg) > MAX_IO) {
        fprintf(stderr, "bench_serving: '%s' has more than %d inputs or outputs\n", o.pkg_path, MAX_IO);
        tk_package_close(pkg);
        return 2;
    }

    /* the stream's symbols, for the fixed shape and the report */
    shape_stream probe;
    char err[512], syms[512], fixed[512];
    if (shape_stream_init(&probe, pkg, SHAPES_UNIFORM, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "bench_serving: %s\n", err);
        tk_package_close(pkg);
        return 2;
    }
    shape_stream_describe(&probe, syms, sizeof syms);
    if (o.fixed)
        snprintf(fixed, sizeof fixed, "%s", o.fixed);
    else
        default_fixed(&probe, fixed, sizeof fixed);
    shape_stream_release(&probe);
    /* a bad --fixed is a usage error, found before anything runs */
    if (shape_stream_init(&probe, pkg, SHAPES_LIST, fixed, 0, err, sizeof err)) {
        fprintf(stderr, "bench_serving: --fixed '%s': %s\n", fixed, err);
        tk_package_close(pkg);
        return 2;
    }
    shape_stream_release(&probe);

    printf("bench_serving: %s (program '%s', %s) on %s%s%s%s; package opened in %.2f ms\n", o.pkg_path,
           tk_package_program(pkg), syms, devname, gpu[0] ? " (" : "", gpu, gpu[0] ? ")" : "", open_ms);
    printf("each call: tk_session_run + tk_ctx_sync, inputs already on the device; %d timed calls per thread after "
           "%d warm-up; fixed = %s\n\n", o.calls, o.warmup, fixed);

    first_result fr = {0};
    run_result runs[MAX_RUNS];
    int nruns = 0, rc = 0;
    if (o.first > 0 && (rc = run_first(&o, pkg, dev, fixed, &fr)))
        goto done;
    if (o.first > 0) {
        if (o.session.prefill == TK_PREFILL_NOW || o.bind || o.ready)
            printf("prefill%s: the fresh session was ready %.1f ms after its buffers (%s)\n", o.bind ? " on bound buffers" : "",
                   fr.ready_ms, fr.ready ? "every signature captured"
                                         : "not every signature: the warm-up only, or a space above --max-shapes");
        printf("first calls (a fresh session, made in %.1f ms): its first call %.1f us (%s); then %d shapes never "
               "run before, each once, and again:\n", fr.session_new_ms, fr.session_first_us, fixed, fr.shapes);
        printf("  %-12s %10s %10s %10s %10s %10s\n", "", "median us", "p90 us", "p99 us", "mean us", "max us");
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n", "first call", fr.first.median, fr.first.p90,
               fr.first.p99, fr.first.mean, fr.first.max);
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n", "  its host", fr.first_host.median, fr.first_host.p90,
               fr.first_host.p99, fr.first_host.mean, fr.first_host.max);
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n", "second call", fr.second.median, fr.second.p90,
               fr.second.p99, fr.second.mean, fr.second.max);
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n", "  its host", fr.second_host.median,
               fr.second_host.p90, fr.second_host.p99, fr.second_host.mean, fr.second_host.max);
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n", "first-second", fr.excess.median, fr.excess.p90,
               fr.excess.p99, fr.excess.mean, fr.excess.max);
        printf("  %-12s %10.1f %10.1f %10.1f %10.1f %10.1f\n\n", "  its host", fr.excess_host.median,
               fr.excess_host.p90, fr.excess_host.p99, fr.excess_host.mean, fr.excess_host.max);
    }
    if (nkinds)
        printf("  %-8s %7s %10s %10s %10s %10s %10s %11s %11s %10s %11s\n", "stream", "threads", "median us", "p90 us",
               "p99 us", "mean us", "max us", "calls/s", "new shapes", "host mean", "all busy/s");
    for (int k = 0; k < nkinds && !rc; k++) {
        for (int j = 0; j < nt && !rc; j++) {
            run_result *r = &runs[nruns];
            if (nruns == MAX_RUNS)
                break;
            rc = run_one(&o, pkg, dev, kinds[k] == SHAPES_FIXED ? SHAPES_LIST : kinds[k], names[k],
                         kinds[k] == SHAPES_FIXED ? fixed : NULL, nthreads[j], r);
            if (rc)
                break;
            nruns++;
            printf("  %-8s %7d %10.1f %10.1f %10.1f %10.1f %10.1f %11.0f %11zu %10.1f %11.0f\n", r->stream,
                   r->threads, r->st.median, r->st.p90, r->st.p99, r->st.mean, r->st.max, r->calls_per_s, r->new_calls,
                   r->host.mean, r->busy_calls_per_s);
            fflush(stdout);
        }
    }
    if (!rc && o.json)
        rc = write_json(&o, pkg, devname, gpu, syms, fixed, &fr, runs, nruns);
    if (!rc && o.csv)
        rc = write_csv(&o, runs, nruns);
done:
    tk_package_close(pkg);
    return rc;
}
