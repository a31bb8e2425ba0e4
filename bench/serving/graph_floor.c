/* graph_floor: what the CUDA driver alone allows a call of a small package to cost, and how far it
 * scales over threads, with no tkexport code in the loop. Each thread has its own stream and its
 * own instantiated graph of `--kernels` empty kernels (a chain, as a package's nodes are) and does
 * what a session's call does at a fixed shape: cuGraphLaunch, then wait: `--wait sync`
 * (cuStreamSynchronize), `poll` (spinning on cuStreamQuery), `flag` (the graph ends with a
 * cuStreamWriteValue32 node setting a word of mapped host memory, which the host clears before the
 * launch and spins on after it: no driver call in the wait) or `kflag` (the same word set by one more
 * kernel instead of the memory-op node). The threads start together; calls/s is every thread's calls
 * over the wall time to the last thread's end (bench_serving's definition), so the two tables
 * compare line by line. Driver API through dlopen, the kernel as PTX (the driver compiles it):
 * nothing to build with nvcc. Exits 77 where there is no CUDA driver.
 *
 *   graph_floor [--threads 1,2,4,8,16] [--calls N] [--warmup N] [--kernels K] [--wait sync|poll|flag|kflag]
 *               [--set-current] [--launcher] [--graphs N] [--in-order] [--direct] [--update] [--json F]
 *               [--beside capture|instantiate|upload|update|update-upload] [--beside-pause US]
 *               [--upload same|other|thread|none]
 * --set-current: cuCtxSetCurrent before each launch, as libtkrt does. --launcher (with --wait flag
 * or kflag): one more thread makes every launch, on the workers' requests. --graphs N: each thread
 * instantiates its graph N times and launches a random one of them every call, as a session
 * launches the graph of the call's shape among many (bench_serving --max-shapes): what a cold
 * graph costs the driver against one launched over and over. --direct: no graph; each call launches
 * the kernels (and, with --wait flag or kflag, the write or the signal kernel) one by one on the
 * stream, as an eager run does: what a program of one kernel saves or loses without its graph.
 * --in-order (with --graphs N): the graphs one after the other instead of at random, each launched
 * the first time in calls 1..N and again in N+1..2N: the table gains the median, p99 and max of each
 * pass and of the host's part of its calls (until cuGraphLaunch returned), what a graph's first
 * launch costs against its second (a session's prefill instantiates and uploads graphs it launches
 * later: graph_floor --graphs 32768 --in-order --calls 65536 --warmup 0).
 * --upload: where the graphs are uploaded once instantiated: `same` (default: the stream that
 * launches them), `other` (another stream of the worker's thread), `thread` (instantiated and
 * uploaded by another thread on its own stream, as a session's capture thread does) or `none`.
 * --update: one graph, its kernels' arguments and grid changed before every launch
 * (cuGraphExecKernelNodeSetParams), as one graph shared by many shapes would be.
 * --beside: one more thread, on its own stream, makes graphs of the same kernels over and over while
 * the workers call, as a session's capture thread does under traffic: `capture` (begin, launches,
 * end, destroy), `instantiate` (and cuGraphInstantiate, cuGraphExecDestroy) or `upload` (and
 * cuGraphUpload + cuStreamSynchronize, as libtkrt does) or `update` (captures, then one graph
 * updated from each with cuGraphExecUpdate instead of instantiated; `update-upload`: and uploaded);
 * --beside-pause US sleeps between two. Which
 * of these steps makes the workers' calls wait: the table gains their median, p99 and max, and the
 * median time of each step (with the graph's first and second launch, each waited for with
 * cuStreamSynchronize, after instantiate or update). */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call_stats.h"
#include "numarg.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry tk_floor_empty(.param .u64 p)\n{\n\tret;\n}\n"
                          ".visible .entry tk_floor_signal(.param .u64 p)\n{\n"
                          "\t.reg .b64 %rd<2>;\n\t.reg .b32 %r<2>;\n"
                          "\tld.param.u64 %rd1, [p];\n\tmov.u32 %r1, 1;\n"
                          "\tst.release.sys.global.u32 [%rd1], %r1;\n\tret;\n}\n";

#define API(X)                                                                                          \
    X(cuInit, (unsigned))                                                                               \
    X(cuDeviceGet, (CUdevice *, int))                                                                   \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                               \
    X(cuCtxSetCurrent, (CUcontext))                                                                     \
    X(cuModuleLoadData, (CUmodule *, const void *))                                                    \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                                     \
    X(cuStreamCreate, (CUstream *, unsigned))                                                           \
    X(cuStreamDestroy_v2, (CUstream))                                                                   \
    X(cuStreamBeginCapture, (CUstream, CUstreamCaptureMode))                                           \
    X(cuStreamEndCapture, (CUstream, CUgraph *))                                                        \
    X(cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long))                       \
    X(cuGraphUpload, (CUgraphExec, CUstream))                                                           \
    X(cuGraphExecDestroy, (CUgraphExec))                                                                \
    X(cuGraphDestroy, (CUgraph))                                                                        \
    X(cuGraphExecUpdate_v2, (CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))                      \
    X(cuGraphLaunch, (CUgraphExec, CUstream))                                                           \
    X(cuStreamSynchronize, (CUstream))                                                                  \
    X(cuStreamQuery, (CUstream))                                                                        \
    X(cuMemHostAlloc, (void **, size_t, unsigned))                                                      \
    X(cuMemHostGetDevicePointer_v2, (CUdeviceptr *, void *, unsigned))                                  \
    X(cuStreamWriteValue32_v2, (CUstream, CUdeviceptr, cuuint32_t, unsigned))                           \
    X(cuGraphGetNodes, (CUgraph, CUgraphNode *, size_t *))                                              \
    X(cuGraphKernelNodeGetParams_v2, (CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))                          \
    X(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))   \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                       CUstream, void **, void **))

#define DECLARE(name, args) static CUresult(*p_##name) args;
API(DECLARE)

static CUcontext g_ctx;
static CUfunction g_fn, g_signal;
static int g_calls = 20000, g_warmup = 2000, g_kernels = 3;
enum { WAIT_SYNC, WAIT_POLL, WAIT_FLAG, WAIT_KFLAG };
static const char *const wait_names[] = {"sync", "poll", "flag", "kflag"};
static int g_wait = WAIT_SYNC, g_set_current, g_graphs = 1, g_direct, g_update, g_in_order;
enum { BESIDE_NONE, BESIDE_CAPTURE, BESIDE_INSTANTIATE, BESIDE_UPLOAD, BESIDE_UPDATE, BESIDE_UPDATE_UPLOAD };
static const char *const beside_names[] = {"none", "capture", "instantiate", "upload", "update", "update-upload"};
static int g_beside, g_beside_pause_us;
/* --upload: where each graph is uploaded after cuGraphInstantiate (the workers launch on their own
 * stream): on that stream, on another stream of the same thread, on another thread's stream (as a
 * session's capture thread does) or not at all (the first launch uploads) */
enum { UPLOAD_SAME, UPLOAD_OTHER, UPLOAD_THREAD, UPLOAD_NONE };
static const char *const upload_names[] = {"same", "other", "thread", "none"};
static int g_upload = UPLOAD_SAME;

#define CK(call)                                                                                  \
    do {                                                                                          \
        CUresult r__ = (call);                                                                    \
        if (r__ != CUDA_SUCCESS) {                                                                \
            fprintf(stderr, "graph_floor: %s failed (%d)\n", #call, (int)r__);                     \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct worker {
    pthread_t th;
    pthread_barrier_t *start;
    double t0, t1;
    /* --launcher: the graph and stream the launcher thread launches on this worker's request */
    CUgraphExec ge;
    CUstream s;
    int ready, req;
    double *lat;  /* each timed call's microseconds */
    double *host; /* --in-order: each timed call's microseconds until cuGraphLaunch returned */
} worker;

/* --launcher: one thread makes every cuGraphLaunch, for the workers that ask (each then spins on
 * its graph's host word): no two threads ever in the driver at once */
static int g_launcher;
static worker *g_workers;
static int g_nworkers, g_stop;

static void *launcher(void *arg)
{
    (void)arg;
    CK(p_cuCtxSetCurrent(g_ctx));
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        int any = 0;
        for (int i = 0; i < g_nworkers; i++) {
            worker *w = &g_workers[i];
            if (__atomic_load_n(&w->ready, __ATOMIC_ACQUIRE) && __atomic_load_n(&w->req, __ATOMIC_ACQUIRE)) {
                CK(p_cuGraphLaunch(w->ge, w->s));
                __atomic_store_n(&w->req, 0, __ATOMIC_RELEASE);
                any = 1;
            }
        }
        if (!any)
            __builtin_ia32_pause();
    }
    return NULL;
}

static void wait_stream(CUstream s, volatile unsigned *flag)
{
    if (g_wait == WAIT_SYNC) {
        CK(p_cuStreamSynchronize(s));
    } else if (g_wait == WAIT_POLL) {
        CUresult r;
        while ((r = p_cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
            ;
        CK(r);
    } else {
        while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
            __builtin_ia32_pause();
    }
}

/* --direct: the kernels and the end-of-call write (or signal kernel) launched one by one */
static void launch_direct(CUstream s, volatile unsigned *flag, CUdeviceptr dflag)
{
    unsigned long long dummy = 0, p = (unsigned long long)dflag;
    void *params[] = {&dummy}, *sp[] = {&p};
    if (g_set_current)
        CK(p_cuCtxSetCurrent(g_ctx));
    if (flag)
        __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
    for (int k = 0; k < g_kernels; k++)
        CK(p_cuLaunchKernel(g_fn, 1, 1, 1, 128, 1, 1, 0, s, params, NULL));
    if (g_wait == WAIT_FLAG)
        CK(p_cuStreamWriteValue32_v2(s, dflag, 1, 0));
    else if (g_wait == WAIT_KFLAG)
        CK(p_cuLaunchKernel(g_signal, 1, 1, 1, 1, 1, 1, 0, s, sp, NULL));
}

static void launch(worker *w, volatile unsigned *flag)
{
    if (g_launcher) {
        while (__atomic_load_n(&w->req, __ATOMIC_ACQUIRE)) /* the last request taken */
            __builtin_ia32_pause();
        __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
        __atomic_store_n(&w->req, 1, __ATOMIC_RELEASE);
        return;
    }
    if (g_set_current) /* as libtkrt does before each driver call: the context made current */
        CK(p_cuCtxSetCurrent(g_ctx));
    if (flag)
        __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
    CK(p_cuGraphLaunch(w->ge, w->s));
}

/* The worker's graphs: instantiated from g, and uploaded as --upload says (on `s`, the stream the
 * worker launches them on, or on a stream of the caller's own) */
typedef struct maker {
    CUgraph g;
    CUgraphExec *ges;
    CUstream s;
} maker;

static void *make_graphs(void *arg)
{
    const maker *mk = arg;
    CUstream us = mk->s;
    CK(p_cuCtxSetCurrent(g_ctx));
    if (g_upload == UPLOAD_OTHER || g_upload == UPLOAD_THREAD)
        CK(p_cuStreamCreate(&us, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < g_graphs; i++) {
        CK(p_cuGraphInstantiateWithFlags(&mk->ges[i], mk->g, 0));
        if (g_upload != UPLOAD_NONE)
            CK(p_cuGraphUpload(mk->ges[i], us));
    }
    CK(p_cuStreamSynchronize(us));
    if (us != mk->s)
        CK(p_cuStreamDestroy_v2(us));
    return NULL;
}

static void *work(void *arg)
{
    worker *w = arg;
    CUstream s;
    CUgraph g;
    CUgraphExec ge;
    CK(p_cuCtxSetCurrent(g_ctx));
    CK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long dummy = 0;
    void *params[] = {&dummy};
    volatile unsigned *flag = NULL;
    CUdeviceptr dflag = 0;
    if (g_wait >= WAIT_FLAG) {
        void *h;
        CK(p_cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
        CK(p_cuMemHostGetDevicePointer_v2(&dflag, h, 0));
        flag = h;
    }
    CK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int k = 0; k < g_kernels; k++)
        CK(p_cuLaunchKernel(g_fn, 1, 1, 1, 128, 1, 1, 0, s, params, NULL));
    if (g_wait == WAIT_FLAG) {
        CK(p_cuStreamWriteValue32_v2(s, dflag, 1, 0));
    } else if (g_wait == WAIT_KFLAG) {
        unsigned long long p = (unsigned long long)dflag;
        void *sp[] = {&p};
        CK(p_cuLaunchKernel(g_signal, 1, 1, 1, 1, 1, 1, 0, s, sp, NULL));
    }
    CK(p_cuStreamEndCapture(s, &g));
    /* --update: the kernel nodes (the signal's aside), their parameters as captured */
    CUgraphNode nodes[66];
    CUDA_KERNEL_NODE_PARAMS kp[66];
    size_t nn = 66;
    unsigned long long value = 0;
    void *vparams[] = {&value};
    if (g_update) {
        CK(p_cuGraphGetNodes(g, nodes, &nn));
        for (size_t k = 0; k < nn; k++) {
            CK(p_cuGraphKernelNodeGetParams_v2(nodes[k], &kp[k]));
            if (kp[k].func != g_fn)
                nodes[k] = NULL; /* the signal kernel stays as it is */
            kp[k].kernelParams = vparams, kp[k].extra = NULL; /* value, set anew each call */
        }
    }
    CUgraphExec *ges = malloc(sizeof *ges * (size_t)g_graphs);
    if (!ges)
        exit(1);
    maker mk = {g, ges, s};
    if (g_upload == UPLOAD_THREAD) {
        pthread_t mt;
        if (pthread_create(&mt, NULL, make_graphs, &mk) || pthread_join(mt, NULL))
            exit(1);
    } else {
        make_graphs(&mk);
    }
    CK(p_cuStreamSynchronize(s));
    ge = ges[0];
    w->ge = ge, w->s = s;
    __atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
    unsigned long long rng = 0x9e3779b97f4a7c15ull ^ (unsigned long long)(size_t)w;
    for (int i = 0; i < g_warmup + g_calls; i++) {
        if (i == g_warmup) {
            pthread_barrier_wait(w->start);
            w->t0 = now_s();
        }
        if (g_in_order) {
            w->ge = ges[i % g_graphs];
        } else if (g_graphs > 1) { /* a random one of the thread's graphs (xorshift) */
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            w->ge = ges[rng % (unsigned long long)g_graphs];
        }
        for (size_t k = 0; g_update && k < nn; k++) {
            if (!nodes[k])
                continue;
            value = (unsigned long long)i;
            kp[k].gridDimX = 1 + (unsigned)(i & 7); /* another shape: another grid */
            CK(p_cuGraphExecKernelNodeSetParams_v2(w->ge, nodes[k], &kp[k]));
        }
        const double c0 = now_s();
        if (g_direct)
            launch_direct(s, flag, dflag);
        else
            launch(w, flag);
        if (w->host && i >= g_warmup)
            w->host[i - g_warmup] = 1e6 * (now_s() - c0);
        wait_stream(s, flag);
        if (i >= g_warmup)
            w->lat[i - g_warmup] = 1e6 * (now_s() - c0);
    }
    CK(p_cuStreamSynchronize(s));
    w->t1 = now_s();
    free(ges); /* the driver's graphs go with the process */
    return NULL;
}

/* --beside: graphs of the workers' kernels made over and over on another stream; each step's
 * microseconds per iteration into steps[] (capture, instantiate or update, upload, first launch,
 * second launch, destroy) */
#define BESIDE_MAX 100000
static double *g_steps[6];
static int g_beside_n;

static void *beside(void *arg)
{
    (void)arg;
    CUstream s;
    CK(p_cuCtxSetCurrent(g_ctx));
    CK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long dummy = 0;
    void *params[] = {&dummy};
    CUgraphExec spare = NULL; /* update: the one graph updated from each capture */
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) && g_beside_n < BESIDE_MAX) {
        CUgraph g;
        CUgraphExec ge = NULL;
        double t[7];
        t[0] = now_s();
        dummy = (unsigned long long)g_beside_n; /* another shape: other arguments, another grid */
        const unsigned grid = 1 + (unsigned)(g_beside_n & 7);
        CK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        for (int k = 0; k < g_kernels + 1; k++) /* the kernels and the end-of-call signal's place */
            CK(p_cuLaunchKernel(g_fn, grid, 1, 1, 128, 1, 1, 0, s, params, NULL));
        CK(p_cuStreamEndCapture(s, &g));
        t[1] = t[2] = t[3] = now_s();
        if (g_beside >= BESIDE_UPDATE) {
            CUgraphExecUpdateResultInfo info;
            if (!spare)
                CK(p_cuGraphInstantiateWithFlags(&spare, g, 0));
            else
                CK(p_cuGraphExecUpdate_v2(spare, g, &info));
            t[2] = t[3] = now_s();
        } else if (g_beside >= BESIDE_INSTANTIATE) {
            CK(p_cuGraphInstantiateWithFlags(&ge, g, 0));
            t[2] = t[3] = now_s();
        }
        if (g_beside == BESIDE_UPLOAD || g_beside == BESIDE_UPDATE_UPLOAD) {
            CK(p_cuGraphUpload(ge ? ge : spare, s));
            CK(p_cuStreamSynchronize(s));
            t[3] = now_s();
        }
        /* the graph's first launch, waited for: what the request that first replays it pays */
        CUgraphExec first = g_beside >= BESIDE_UPDATE ? spare : ge;
        if (first) {
            CK(p_cuGraphLaunch(first, s));
            CK(p_cuStreamSynchronize(s));
        }
        t[4] = now_s();
        if (first) { /* and its second, for comparison */
            CK(p_cuGraphLaunch(first, s));
            CK(p_cuStreamSynchronize(s));
        }
        t[5] = now_s();
        if (ge)
            CK(p_cuGraphExecDestroy(ge));
        CK(p_cuGraphDestroy(g));
        t[6] = now_s();
        for (int k = 0; k < 6; k++)
            g_steps[k][g_beside_n] = 1e6 * (t[k + 1] - t[k]);
        g_beside_n++;
        if (g_beside_pause_us > 0) {
            struct timespec ts = {g_beside_pause_us / 1000000, (long)(g_beside_pause_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (spare)
        CK(p_cuGraphExecDestroy(spare));
    return NULL;
}

static call_stats g_lat;            /* the last run's calls, every thread's */
static call_stats g_pass[2], g_phost[2]; /* --in-order: its first and second launches, and their host part */

/* calls/s of n threads */
static double run(int n)
{
    worker w[64];
    pthread_t lt;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n);
    pthread_t bt;
    memset(w, 0, sizeof w);
    double *lat = malloc(sizeof *lat * (size_t)n * (size_t)g_calls);
    double *host = g_in_order ? malloc(sizeof *host * (size_t)n * (size_t)g_calls) : NULL;
    if (!lat || (g_in_order && !host))
        exit(1);
    g_stop = 0;
    if (g_launcher) {
        g_workers = w, g_nworkers = n;
        if (pthread_create(&lt, NULL, launcher, NULL))
            exit(1);
    }
    g_beside_n = 0;
    if (g_beside && pthread_create(&bt, NULL, beside, NULL))
        exit(1);
    for (int i = 0; i < n; i++) {
        w[i].start = &start;
        w[i].lat = lat + (size_t)i * (size_t)g_calls;
        w[i].host = host ? host + (size_t)i * (size_t)g_calls : NULL;
        if (pthread_create(&w[i].th, NULL, work, &w[i]))
            exit(1);
    }
    double t0 = 1e30, t1 = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        t0 = w[i].t0 < t0 ? w[i].t0 : t0;
        t1 = w[i].t1 > t1 ? w[i].t1 : t1;
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    if (g_launcher)
        pthread_join(lt, NULL);
    if (g_beside)
        pthread_join(bt, NULL);
    pthread_barrier_destroy(&start);
    if (g_in_order) { /* thread 0's two passes (calls [0, N) and [N, 2N) of its timed calls), before the
                          sort of them all below */
        for (int pass = 0; pass < 2; pass++) {
            call_stats_compute(lat + (size_t)pass * (size_t)g_graphs, (size_t)g_graphs, &g_pass[pass]);
            call_stats_compute(host + (size_t)pass * (size_t)g_graphs, (size_t)g_graphs, &g_phost[pass]);
        }
    }
    call_stats_compute(lat, (size_t)n * (size_t)g_calls, &g_lat);
    free(lat);
    free(host);
    return (double)n * g_calls / (t1 - t0);
}

/* The index of value among an option's names[first..n), or -1 with the error printed */
static int choice(const char *opt, const char *value, const char *const *names, int first, int n)
{
    for (int k = first; k < n; k++)
        if (!strcmp(value, names[k]))
            return k;
    fprintf(stderr, "graph_floor: %s takes", opt);
    for (int k = first; k < n; k++)
        fprintf(stderr, "%s %s", k == first ? "" : ",", names[k]);
    fprintf(stderr, ", not '%s'\n", value);
    return -1;
}

/* a numeric option's value (common/numarg.h: all of it a whole number); its range is checked below */
static int whole(const char *opt, const char *text, int *out)
{
    if (tk_parse_int(text, INT32_MIN, INT32_MAX, out)) {
        fprintf(stderr, "graph_floor: %s '%s' is not a whole number\n", opt, text);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *threads = "1,2,4,8,16", *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
            if (whole(argv[i], argv[i + 1], &g_calls))
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            if (whole(argv[i], argv[i + 1], &g_warmup))
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) {
            if (whole(argv[i], argv[i + 1], &g_kernels))
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--launcher"))
            g_launcher = 1;
        else if (!strcmp(argv[i], "--graphs") && i + 1 < argc) {
            if (whole(argv[i], argv[i + 1], &g_graphs))
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--in-order"))
            g_in_order = 1;
        else if (!strcmp(argv[i], "--upload") && i + 1 < argc) {
            if ((g_upload = choice("--upload", argv[++i], upload_names, 0, 4)) < 0)
                return 2;
        } else if (!strcmp(argv[i], "--direct"))
            g_direct = 1;
        else if (!strcmp(argv[i], "--update"))
            g_update = 1;
        else if (!strcmp(argv[i], "--beside") && i + 1 < argc) {
            if ((g_beside = choice("--beside", argv[++i], beside_names, 1, 6)) < 0)
                return 2;
        } else if (!strcmp(argv[i], "--beside-pause") && i + 1 < argc) {
            if (whole(argv[i], argv[i + 1], &g_beside_pause_us))
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--set-current"))
            g_set_current = 1;
        else if (!strcmp(argv[i], "--poll"))
            g_wait = WAIT_POLL;
        else if (!strcmp(argv[i], "--wait") && i + 1 < argc) {
            if ((g_wait = choice("--wait", argv[++i], wait_names, 0, 4)) < 0)
                return 2;
        }
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr, "%susage: graph_floor [--threads 1,2,4,8,16] [--calls N] [--warmup N] "
                    "[--kernels K] [--wait sync|poll|flag|kflag] [--set-current] [--launcher] [--graphs N] "
                    "[--in-order] [--direct] [--update] [--json F] [--beside capture|instantiate|upload|update|update-upload] [--beside-pause US] "
                    "[--upload same|other|thread|none]\n",
                    help ? "" : "graph_floor: unknown or incomplete option\n");
            if (help)
                printf("What the CUDA driver alone lets a small package's call cost (a graph of --kernels empty\n"
                       "kernels launched and waited for), over threads; the options are told in graph_floor.c's\n"
                       "first comment. Exit status: 0 done, 1 failed, 2 usage, 77 no CUDA driver.\n");
            return help ? 0 : 2;
        }
    }
    if (g_calls < 1 || g_kernels < 1 || g_kernels > 64 || g_warmup < 0) {
        fprintf(stderr, "graph_floor: --calls and --kernels (at most 64) must be at least 1\n");
        return 2;
    }
    if ((g_direct || g_update) && (g_launcher || g_graphs > 1 || (g_direct && g_update))) {
        fprintf(stderr, "graph_floor: --direct and --update go alone: not with each other, --launcher or --graphs\n");
        return 2;
    }
    if (g_graphs < 1 || g_graphs > 1 << 20 || (g_graphs > 1 && g_launcher)) {
        fprintf(stderr, "graph_floor: --graphs takes 1 to 1048576, and not with --launcher\n");
        return 2;
    }
    if (g_in_order && (g_graphs < 2 || g_calls < 2 * g_graphs || g_warmup || g_launcher)) {
        fprintf(stderr, "graph_floor: --in-order needs --graphs N (at least 2), --calls of at least 2 N, --warmup 0 "
                        "and no --launcher\n");
        return 2;
    }
    if (g_beside_pause_us < 0 || g_beside_pause_us > 10000000) {
        fprintf(stderr, "graph_floor: --beside-pause takes 0 to 10000000 microseconds\n");
        return 2;
    }
    for (int k = 0; g_beside && k < 6; k++)
        if (!(g_steps[k] = malloc(sizeof *g_steps[k] * BESIDE_MAX)))
            return 1;
    if (g_launcher && g_wait < WAIT_FLAG) {
        fprintf(stderr, "graph_floor: --launcher needs --wait flag or kflag (the workers spin on their graph's "
                        "word)\n");
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("skipped: no CUDA driver (%s)\n", dlerror());
        return 77;
    }
#define LOAD(name, args)                                                                          \
    if (!(*(void **)&p_##name = dlsym(lib, #name))) {                                             \
        fprintf(stderr, "graph_floor: the driver has no %s\n", #name);                            \
        return 1;                                                                                 \
    }
    API(LOAD)
    CUdevice dev;
    CUmodule mod;
    CK(p_cuInit(0));
    CK(p_cuDeviceGet(&dev, 0));
    CK(p_cuDevicePrimaryCtxRetain(&g_ctx, dev));
    CK(p_cuCtxSetCurrent(g_ctx));
    CK(p_cuModuleLoadData(&mod, ptx));
    CK(p_cuModuleGetFunction(&g_fn, mod, "tk_floor_empty"));
    CK(p_cuModuleGetFunction(&g_signal, mod, "tk_floor_signal"));
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        fprintf(stderr, "graph_floor: cannot write '%s'\n", json);
        return 1;
    }
    static const char *const wait_text[] = {"cuStreamSynchronize", "cuStreamQuery polling",
                                            "a host flag set by a write-value node", "a host flag set by a kernel"};
    if (g_direct)
        printf("%d empty kernels launched one by one (no graph) + %s, %d calls per thread\n", g_kernels,
               wait_text[g_wait], g_calls);
    else
        printf("graph of %d empty kernels (a random one of %d graphs a call%s), launch%s + %s, %d calls per thread\n",
               g_kernels, g_graphs, g_update ? ", its kernels' arguments and grid set anew" : "",
               g_launcher ? " (by one launcher thread)" : "", wait_text[g_wait], g_calls);
    if (!g_direct && g_upload != UPLOAD_SAME)
        printf("graphs uploaded: %s\n", g_upload == UPLOAD_NONE ? "not (at their first launch)"
                                         : g_upload == UPLOAD_OTHER ? "on another stream of the worker's thread"
                                                                    : "by another thread, on its own stream");
    if (g_beside)
        printf("beside the calls, another thread makes graphs (%s steps), %d us apart\n", beside_names[g_beside],
               g_beside_pause_us);
    printf("threads  calls/s    us/call/thread  x one thread  call median  p99  max (us)%s\n",
           g_beside ? "  | graphs made; median us: capture instantiate|update upload first-launch second-launch destroy" : "");
    if (jf)
        fprintf(jf, "{\"kernels\": %d, \"wait\": \"%s\", \"calls\": %d, \"rows\": [", g_kernels, wait_names[g_wait],
                g_calls);
    double one = 0;
    int first = 1;
    for (const char *p = threads; *p;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 64) {
            fprintf(stderr, "graph_floor: --threads takes numbers 1..64 separated by commas, not '%s'\n", threads);
            return 2;
        }
        double cps = run((int)n);
        if (one == 0)
            one = cps / (double)n;
        printf("%7ld  %9.0f  %14.2f  %12.2f  %11.2f  %6.2f  %7.1f", n, cps, 1e6 * (double)n / cps, cps / one,
               g_lat.median, g_lat.p99, g_lat.max);
        if (g_beside) {
            printf("  | %6d;", g_beside_n);
            for (int k = 0; k < 6; k++) {
                call_stats st;
                call_stats_compute(g_steps[k], (size_t)g_beside_n, &st);
                printf(" %7.1f", st.median);
            }
        }
        printf("\n");
        for (int pass = 0; g_in_order && pass < 2; pass++)
            printf("         %s launches (thread 0): median %.2f p99 %.2f max %.1f us; host median %.2f p99 %.2f "
                   "max %.1f us\n", pass ? "second" : "first ", g_pass[pass].median, g_pass[pass].p99, g_pass[pass].max,
                   g_phost[pass].median, g_phost[pass].p99, g_phost[pass].max);
        if (jf)
            fprintf(jf, "%s{\"threads\": %ld, \"calls_per_s\": %.0f}", first ? "" : ", ", n, cps);
        first = 0;
        p = *end == ',' ? end + 1 : end;
    }
    if (jf) {
        fprintf(jf, "]}\n");
        fclose(jf);
    }
    return 0;
}
