/* The CUDA backend: libcuda.so.1 opened with dlopen at first GPU use, the state each GPU shares
 * (its primary context), and per-context streams, device memory and copies. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TK_HAVE_CUDA_HEADERS
#include "cublaslt.h"
#include "cuda_driver.h"
#include "log.h"

tk_cu_api tk_cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
/* Set once load() has made the devices table, for tk_cu_foreach_ready (which must not load). */
static atomic_int devices_made;
static char load_msg[512];
static void *libcuda;
static int ndevices;
static tk_cu_device *devices;

int tk_cu_fail(CUresult r, const char *stmt, const char *file, int line)
{
    const char *name = NULL, *text = NULL;
    if (!tk_cu.GetErrorName || tk_cu.GetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (!tk_cu.GetErrorString || tk_cu.GetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    const char *base = strrchr(file, '/');
    char code[32];
    if (!name) {
        snprintf(code, sizeof(code), "CUDA error %d", (int)r);
        name = code;
    }
    return tk_error_set(r == CUDA_ERROR_OUT_OF_MEMORY ? TK_ENOMEM : TK_EDEVICE, "%s failed at %s:%d: %s: %s",
                        stmt, base ? base + 1 : file, line, name, text ? text : "no description");
}

/* dlsym into a function pointer of the table; POSIX guarantees the conversion works. */
static int resolve(void *fnptr, size_t size, const char *symbol, int required)
{
    void *sym = dlsym(libcuda, symbol);
    if (!sym && required) {
        snprintf(load_msg, sizeof(load_msg),
                 "no CUDA driver: libcuda.so.1 has no %s (a driver older than CUDA 11 ?)", symbol);
        return -1;
    }
    memcpy(fnptr, &sym, size);
    return 0;
}

static void load(void)
{
    int rc = 0;
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libcuda) {
        const char *why = dlerror();
        snprintf(load_msg, sizeof(load_msg), "no CUDA driver: libcuda.so.1 could not be loaded (%s)",
                 why ? why : "unknown reason");
        load_rc = TK_EDEVICE;
        return;
    }
#define SYM(field, symbol, required)                                                       \
    if (resolve(&tk_cu.field, sizeof(tk_cu.field), symbol, required)) {                    \
        load_rc = TK_EDEVICE;                                                              \
        return;                                                                            \
    }
    SYM(Init, "cuInit", 1)
    SYM(DriverGetVersion, "cuDriverGetVersion", 1)
    SYM(GetErrorName, "cuGetErrorName", 1)
    SYM(GetErrorString, "cuGetErrorString", 1)
    SYM(DeviceGet, "cuDeviceGet", 1)
    SYM(DeviceGetCount, "cuDeviceGetCount", 1)
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute", 1)
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1)
    SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 1)
    SYM(CtxSetCurrent, "cuCtxSetCurrent", 1)
    SYM(StreamCreate, "cuStreamCreate", 1)
    SYM(StreamDestroy, "cuStreamDestroy_v2", 1)
    SYM(StreamSynchronize, "cuStreamSynchronize", 1)
    SYM(DeviceGetName, "cuDeviceGetName", 1)
    SYM(EventCreate, "cuEventCreate", 1)
    SYM(EventRecord, "cuEventRecord", 1)
    SYM(EventRecordWithFlags, "cuEventRecordWithFlags", 0)
    SYM(EventSynchronize, "cuEventSynchronize", 1)
    SYM(EventElapsedTime, "cuEventElapsedTime_v2", 1)
    SYM(EventDestroy, "cuEventDestroy_v2", 1)
    SYM(MemAlloc, "cuMemAlloc_v2", 1)
    SYM(MemFree, "cuMemFree_v2", 1)
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1)
    SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1)
    SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", 1)
    SYM(Memcpy2DAsync, "cuMemcpy2DAsync_v2", 1)
    SYM(ModuleLoadData, "cuModuleLoadData", 1)
    SYM(ModuleGetFunction, "cuModuleGetFunction", 1)
    SYM(ModuleUnload, "cuModuleUnload", 1)
    SYM(LaunchKernel, "cuLaunchKernel", 1)
    SYM(FuncSetAttribute, "cuFuncSetAttribute", 1)
    SYM(FuncGetParamInfo, "cuFuncGetParamInfo", 0) /* CUDA 12.4 drivers and newer */
    SYM(FuncGetParamCount, "cuFuncGetParamCount", 0)
    SYM(StreamBeginCapture, "cuStreamBeginCapture_v2", 0)
    SYM(StreamEndCapture, "cuStreamEndCapture", 0)
    SYM(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 0)
    SYM(GraphLaunch, "cuGraphLaunch", 0)
    SYM(GraphExecDestroy, "cuGraphExecDestroy", 0)
    SYM(GraphUpload, "cuGraphUpload", 0)
    SYM(GraphDestroy, "cuGraphDestroy", 0)
    SYM(StreamQuery, "cuStreamQuery", 0)
    SYM(MemHostAlloc, "cuMemHostAlloc", 0)
    SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", 0)
    SYM(MemFreeHost, "cuMemFreeHost", 0)
    SYM(MemsetD32Async, "cuMemsetD32Async", 0)
    SYM(LaunchKernelEx, "cuLaunchKernelEx", 0)
    SYM(StreamGetCaptureInfo, "cuStreamGetCaptureInfo_v3", 0)
    SYM(GraphNodeGetType, "cuGraphNodeGetType", 0)
    SYM(GraphGetNodes, "cuGraphGetNodes", 0)
    SYM(GraphGetEdges, "cuGraphGetEdges_v2", 0)
    SYM(GraphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2", 0)
    SYM(GraphKernelNodeGetAttribute, "cuGraphKernelNodeGetAttribute", 0)
    SYM(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", 0)
#undef SYM

    TK_CU_CHECK(cuInit(0));
    TK_CU_CHECK(cuDeviceGetCount(&ndevices));
    if (ndevices > 0) {
        devices = calloc((size_t)ndevices, sizeof(*devices));
        if (!devices) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < ndevices; i++) {
            pthread_mutex_init(&devices[i].lock, NULL);
            devices[i].ordinal = i;
        }
        atomic_store(&devices_made, 1);
    }
done:
    if (rc) {
        /* the driver is there but unusable (cuInit fails without a GPU, or with a driver too
         * old for the kernel module): say so with the driver's words */
        snprintf(load_msg, sizeof(load_msg), "no CUDA driver: %s", tk_error_last());
        load_rc = rc == TK_ENOMEM ? TK_ENOMEM : TK_EDEVICE;
    }
}

int tk_cu_load(void)
{
    pthread_once(&load_once, load);
    if (load_rc)
        return tk_error_set(load_rc, "%s", load_msg);
    return 0;
}

int tk_cuda_available(void)
{
    int rc = tk_cu_load();
    if (rc)
        return rc;
    if (ndevices == 0) {
        int version = 0;
        cuDriverGetVersion(&version);
        return tk_error_set(TK_EDEVICE, "no CUDA device: the CUDA driver (%d.%d) reports none",
                            version / 1000, version % 1000 / 10);
    }
    return 0;
}

/* The shared state of GPU `ordinal`, set up at first use. */
static int device_get(tk_cu_device **out, int ordinal)
{
    int rc = tk_cuda_available();
    *out = NULL;
    if (rc)
        return rc;
    if (ordinal < 0 || ordinal >= ndevices)
        return tk_error_set(TK_EDEVICE, "device 'cuda:%d' does not exist (%d CUDA device%s)", ordinal,
                            ndevices, ndevices == 1 ? "" : "s");
    tk_cu_device *d = &devices[ordinal];
    pthread_mutex_lock(&d->lock);
    if (!d->ready) {
        TK_CU_CHECK(cuDeviceGet(&d->dev, ordinal));
        TK_CU_CHECK(cuDevicePrimaryCtxRetain(&d->pctx, d->dev));
        /* held for the life of the process: modules, memory and library handles outlive contexts */
        int sms = 0;
        TK_CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev));
        d->sm_count = sms > 0 ? sms : 1;
        int major = 0, minor = 0;
        TK_CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev));
        TK_CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev));
        d->cc = major * 10 + minor;
        d->ready = 1;
    }
    *out = d;
done:
    if (rc && d->pctx && !d->ready) {
        cuDevicePrimaryCtxRelease(d->dev);
        d->pctx = NULL;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void tk_cu_foreach_ready(void (*fn)(tk_cu_device *d))
{
    if (!atomic_load(&devices_made))
        return;
    for (int i = 0; i < ndevices; i++) {
        tk_cu_device *d = &devices[i];
        pthread_mutex_lock(&d->lock);
        int ready = d->ready;
        pthread_mutex_unlock(&d->lock);
        if (ready && cuCtxSetCurrent(d->pctx) == CUDA_SUCCESS)
            fn(d);
    }
}

/* a spinning thread's pause */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* until the launcher has taken c's pending graph (cuda.c's launcher section) */
static void slot_wait(tk_cuda_ctx *c)
{
    while (__atomic_load_n(&c->slot.req, __ATOMIC_ACQUIRE))
        cpu_relax();
}

static int slot_settle(tk_cuda_ctx *c);

int tk_cu_enter(tk_ctx *ctx, tk_cu_device **dev)
{
    int rc = 0;
    char name[32];
    if (!ctx || !ctx->cuda)
        return tk_error_set(TK_EINVAL, "a CUDA operation needs a context on a CUDA device, got one on '%s'",
                            ctx ? tk_device_name(ctx->device, name, sizeof(name)) : "(null)");
    TK_CU_CHECK(cuCtxSetCurrent(ctx->cuda->dev->pctx));
    *dev = ctx->cuda->dev;
    /* a graph the launcher has yet to launch goes first on the stream, and its failure is this
       call's; whatever the caller queues now comes after the signalled launch */
    if (__atomic_load_n(&ctx->cuda->slot.req, __ATOMIC_ACQUIRE) || ctx->cuda->slot.result != CUDA_SUCCESS)
        rc = slot_settle(ctx->cuda);
    ctx->cuda->armed = 0;
done:
    return rc;
}

int tk_cuda_ctx_init(tk_ctx *ctx, int device)
{
    tk_cu_device *d;
    tk_cuda_ctx *c = NULL;
    int rc = device_get(&d, device);
    if (rc)
        return rc;
    c = calloc(1, sizeof(*c));
    if (!c)
        return tk_error_set(TK_ENOMEM, "out of memory");
    c->dev = d;
    TK_CU_CHECK(cuCtxSetCurrent(d->pctx));
    TK_CU_CHECK(cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING));
    ctx->cuda = c;
    c = NULL;
done:
    free(c);
    return rc;
}

static void launcher_forget(tk_cuda_ctx *c);

void tk_cuda_ctx_release(tk_ctx *ctx)
{
    if (!ctx || !ctx->cuda)
        return;
    /* a replay the launcher has yet to launch goes on the stream first (a failure of its launch is
       no one's to hear now), and the launcher forgets this context */
    if (slot_settle(ctx->cuda))
        tk_error_clear();
    if (ctx->cuda->slot_registered)
        launcher_forget(ctx->cuda);
    /* cuBLASLt's workspace waits for the stream; work still queued completes first:
       cuStreamDestroy releases the stream afterwards */
    tk_cublaslt_ctx_release(ctx);
    if (tk_cu.CtxSetCurrent(ctx->cuda->dev->pctx) == CUDA_SUCCESS) {
        tk_cu_signal *sg = ctx->cuda->signal;
        if (sg) { /* the graphs that write it ran to their end first */
            __atomic_sub_fetch(&ctx->cuda->dev->nsignals, 1, __ATOMIC_RELAXED);
            cuStreamSynchronize(ctx->cuda->stream);
            tk_cu_families_free(sg);
            pthread_mutex_destroy(&sg->lock);
            cuMemFreeHost((void *)sg->host);
            cuMemFree(sg->count);
            free(sg);
        }
        cuStreamDestroy(ctx->cuda->stream);
    }
    free(ctx->cuda);
    ctx->cuda = NULL;
}

int tk_cuda_alloc(tk_ctx *ctx, void **ptr, size_t n)
{
    tk_cu_device *d;
    CUdeviceptr p = 0;
    int rc = tk_cu_enter(ctx, &d);
    *ptr = NULL;
    if (rc || n == 0)
        return rc;
    /* memory made while capturing is not part of the graph, and freed before its replays */
    if (ctx->cuda->capturing)
        return tk_error_set(TK_EUNSUPPORTED, "%zu bytes of device memory asked for while a CUDA graph is captured "
                                             "(an op allocates in its body)", n);
    TK_CU_CHECK(cuMemAlloc(&p, n));
    *ptr = (void *)(uintptr_t)p;
done:
    return rc;
}

void tk_cuda_free(tk_ctx *ctx, void *ptr)
{
    tk_cu_device *d;
    if (!ptr || tk_cu_enter(ctx, &d))
        return;
    cuMemFree((CUdeviceptr)(uintptr_t)ptr);
}

static int check_device(tk_ctx *ctx, tk_device dev)
{
    char a[32], b[32];
    if (dev.kind == TK_DEVICE_CUDA && dev.index != ctx->device.index)
        return tk_error_set(TK_EINVAL, "memory on '%s' cannot be copied through a context on '%s'",
                            tk_device_name(dev, a, sizeof(a)), tk_device_name(ctx->device, b, sizeof(b)));
    return 0;
}

int tk_cuda_memcpy(tk_ctx *ctx, void *dst, tk_device dst_dev, const void *src, tk_device src_dev, size_t n)
{
    tk_cu_device *d;
    int rc = tk_cu_enter(ctx, &d);
    if (rc || (rc = check_device(ctx, dst_dev)) || (rc = check_device(ctx, src_dev)) || n == 0)
        return rc;
    CUstream s = ctx->cuda->stream;
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
    int dst_host = dst_dev.kind == TK_DEVICE_CPU, src_host = src_dev.kind == TK_DEVICE_CPU;
    if (dst_host && src_host) {
        memcpy(dst, src, n);
    } else if (src_host) {
        /* on the context's stream, after the work queued there, then waited for: the legacy
         * synchronous copies run on the default stream, which our non-blocking stream ignores */
        TK_CU_CHECK(cuMemcpyHtoDAsync(dp, src, n, s));
        TK_CU_CHECK(cuStreamSynchronize(s));
    } else if (dst_host) {
        TK_CU_CHECK(cuMemcpyDtoHAsync(dst, sp, n, s));
        TK_CU_CHECK(cuStreamSynchronize(s));
    } else {
        TK_CU_CHECK(cuMemcpyDtoDAsync(dp, sp, n, s));
    }
done:
    return rc;
}

int tk_cuda_memcpy2d(tk_ctx *ctx, void *dst, tk_device dst_dev, size_t dpitch, const void *src, tk_device src_dev,
                     size_t spitch, size_t width, size_t height)
{
    tk_cu_device *d;
    int rc = tk_cu_enter(ctx, &d);
    if (rc || (rc = check_device(ctx, dst_dev)) || (rc = check_device(ctx, src_dev)) || !width || !height)
        return rc;
    int dst_host = dst_dev.kind == TK_DEVICE_CPU, src_host = src_dev.kind == TK_DEVICE_CPU;
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = src_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.dstMemoryType = dst_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (src_host)
        c.srcHost = src;
    else
        c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    if (dst_host)
        c.dstHost = dst;
    else
        c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.srcPitch = spitch, c.dstPitch = dpitch, c.WidthInBytes = width, c.Height = height;
    TK_CU_CHECK(cuMemcpy2DAsync(&c, ctx->cuda->stream));
    if (dst_host || src_host) /* as tk_cuda_memcpy: the host's memory is read or written when this returns */
        TK_CU_CHECK(cuStreamSynchronize(ctx->cuda->stream));
done:
    return rc;
}

static int wait_signal(tk_ctx *ctx);

int tk_cuda_sync(tk_ctx *ctx)
{
    tk_cu_device *d;
    if (ctx && ctx->cuda && ctx->cuda->armed)
        return wait_signal(ctx);
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    TK_CU_CHECK(cuStreamSynchronize(ctx->cuda->stream));
done:
    return rc;
}

void *tk_cuda_stream(tk_ctx *ctx)
{
    if (!ctx || !ctx->cuda)
        return NULL;
    slot_wait(ctx->cuda); /* the launcher's launch goes first */
    ctx->cuda->armed = 0;  /* the caller may queue work on it */
    return (void *)ctx->cuda->stream;
}

int tk_cuda_sm_count_of(tk_ctx *ctx)
{
    return ctx && ctx->cuda ? ctx->cuda->dev->sm_count : 1;
}

int tk_cuda_cc_of(tk_ctx *ctx)
{
    return ctx && ctx->cuda ? ctx->cuda->dev->cc : 0;
}

int tk_cuda_device_count(int *n)
{
    *n = 0;
    int rc = tk_cuda_available();
    if (!rc)
        *n = ndevices;
    return rc;
}

int tk_cuda_compute_capability(int ordinal, int *major, int *minor)
{
    tk_cu_device *d;
    int rc = device_get(&d, ordinal);
    if (rc)
        return rc;
    *major = d->cc / 10, *minor = d->cc % 10;
    return 0;
}

int tk_cuda_device_info(int ordinal, char *name, size_t n, int *driver_version)
{
    tk_cu_device *d;
    int rc = device_get(&d, ordinal);
    if (rc)
        return rc;
    TK_CU_CHECK(cuDeviceGetName(name, (int)n, d->dev));
    TK_CU_CHECK(cuDriverGetVersion(driver_version));
done:
    return rc;
}

int tk_cuda_time(tk_ctx *ctx, int (*fn)(void *arg, int rep), void *arg, int warmup, int reps, double *times_us)
{
    tk_cu_device *d;
    CUevent ev[2] = {NULL, NULL};
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    TK_CU_CHECK(cuEventCreate(&ev[0], CU_EVENT_DEFAULT));
    TK_CU_CHECK(cuEventCreate(&ev[1], CU_EVENT_DEFAULT));
    for (int i = 0; i < warmup && !rc; i++)
        rc = fn(arg, i);
    for (int i = 0; i < reps && !rc; i++) {
        TK_CU_CHECK(cuEventRecord(ev[0], ctx->cuda->stream));
        if ((rc = fn(arg, warmup + i)))
            break;
        TK_CU_CHECK(cuEventRecord(ev[1], ctx->cuda->stream));
        TK_CU_CHECK(cuEventSynchronize(ev[1]));
        float ms = 0;
        TK_CU_CHECK(cuEventElapsedTime_v2(&ms, ev[0], ev[1]));
        times_us[i] = 1000.0 * ms;
    }
done:
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cuEventDestroy_v2(ev[i]);
    return rc;
}

/* --- the end-of-graph signal ------------------------------------------------------------ */

/* One thread: count[0] += 1, then the count stored to the host's word with release semantics at
 * system scope (every write of the graph's earlier nodes is done before it: stream order). */
#define TK_SIGNAL_ENTRY(name, wait)                                                                         \
    ".visible .entry " name "(.param .u64 count, .param .u64 word)\n{\n"                                   \
    "\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<3>;\n" wait "\tld.param.u64 %rd1, [count];\n"                   \
    "\tld.param.u64 %rd2, [word];\n\tld.global.u32 %r1, [%rd1];\n\tadd.u32 %r2, %r1, 1;\n"                 \
    "\tst.global.u32 [%rd1], %r2;\n\tst.release.sys.global.u32 [%rd2], %r2;\n\tret;\n}\n"
static const char signal_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n" TK_SIGNAL_ENTRY("tk_graph_signal", "");
/* From sm_90 on, the module also has tk_graph_signal_after: the same, launched as a programmatic
 * dependent of the kernel before it (the graph's last node), so that the GPU can start its block
 * while that kernel runs (where the kernel says so: griddepcontrol.launch_dependents) and it waits
 * in griddepcontrol.wait, which returns once the kernels before it are done and their memory
 * visible; the count's store then follows as it would after an ordinary launch. */
static const char signal_ptx90[] = ".version 7.8\n.target sm_90\n.address_size 64\n" TK_SIGNAL_ENTRY(
    "tk_graph_signal", "") TK_SIGNAL_ENTRY("tk_graph_signal_after", "\tgriddepcontrol.wait;\n");
#undef TK_SIGNAL_ENTRY

static int signal_wanted(void)
{
    static int wanted = -1;
    int w = __atomic_load_n(&wanted, __ATOMIC_RELAXED);
    if (w < 0) {
        w = tk_env_on("TK_GRAPH_SIGNAL") && tk_cu.StreamQuery && tk_cu.MemHostAlloc && tk_cu.MemHostGetDevicePointer &&
            tk_cu.MemFreeHost && tk_cu.MemsetD32Async;
        __atomic_store_n(&wanted, w, __ATOMIC_RELAXED);
    }
    return w;
}

/* The device's signal kernel, loaded (the driver compiles the PTX) on first need; NULL where it
 * cannot be, and graphs are then waited for with cuStreamSynchronize. */
static CUfunction signal_kernel(tk_cu_device *d)
{
    int state = __atomic_load_n(&d->signal_fn_state, __ATOMIC_ACQUIRE);
    if (!state) {
        pthread_mutex_lock(&d->lock);
        if (!(state = d->signal_fn_state)) {
            /* the signal as a programmatic dependent where it can be (TK_GRAPH_SIGNAL_AFTER=0: never);
               decided once a device, here */
            const int after = d->cc >= 90 && tk_env_on("TK_GRAPH_SIGNAL_AFTER") && tk_cu.LaunchKernelEx &&
                              tk_cu.StreamGetCaptureInfo && tk_cu.GraphNodeGetType;
            CUresult r = cuModuleLoadData(&d->signal_mod, after ? signal_ptx90 : signal_ptx);
            if (r != CUDA_SUCCESS && after) { /* a driver that cannot compile it: the plain signal */
                tk_log(TK_LOG_DEBUG, "cuda:%d: no programmatic end-of-graph signal (driver error %d)", d->ordinal,
                       (int)r);
                r = cuModuleLoadData(&d->signal_mod, signal_ptx);
            }
            if (r == CUDA_SUCCESS)
                r = cuModuleGetFunction(&d->signal_fn, d->signal_mod, "tk_graph_signal");
            if (r == CUDA_SUCCESS && after &&
                cuModuleGetFunction(&d->signal_after_fn, d->signal_mod, "tk_graph_signal_after") != CUDA_SUCCESS)
                d->signal_after_fn = NULL;
            state = r == CUDA_SUCCESS ? 1 : -1;
            if (state < 0)
                tk_log(TK_LOG_DEBUG, "cuda:%d: no end-of-graph signal kernel (driver error %d): graphs are waited "
                                     "for with cuStreamSynchronize", d->ordinal, (int)r);
            __atomic_store_n(&d->signal_fn_state, state, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&d->lock);
    }
    return state > 0 ? d->signal_fn : NULL;
}

/* on's signal, made on first need by ctx's thread (not capturing yet: it allocates and waits on
 * ctx's stream); NULL where signals are off or could not be made */
static tk_cu_signal *signal_of(tk_ctx *ctx, tk_ctx *on)
{
    tk_cuda_ctx *c = on->cuda;
    tk_cu_signal *sg = __atomic_load_n(&c->signal, __ATOMIC_ACQUIRE);
    if (sg || !signal_wanted() || !signal_kernel(c->dev))
        return sg;
    void *host = NULL;
    pthread_mutex_lock(&c->dev->lock);
    if (!(sg = c->signal) && (sg = calloc(1, sizeof *sg))) {
        CUresult r = cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        if (r == CUDA_SUCCESS) {
            memset(host, 0, 64);
            r = cuMemHostGetDevicePointer(&sg->host_dev, host, 0);
        }
        if (r == CUDA_SUCCESS)
            r = cuMemAlloc(&sg->count, sizeof(unsigned));
        if (r == CUDA_SUCCESS)
            r = cuMemsetD32Async(sg->count, 0, 1, ctx->cuda->stream);
        if (r == CUDA_SUCCESS)
            r = cuStreamSynchronize(ctx->cuda->stream);
        if (r == CUDA_SUCCESS) {
            sg->host = host;
            pthread_mutex_init(&sg->lock, NULL);
            __atomic_store_n(&c->signal, sg, __ATOMIC_RELEASE);
            __atomic_add_fetch(&c->dev->nsignals, 1, __ATOMIC_RELAXED);
        } else {
            tk_log(TK_LOG_DEBUG, "cuda:%d: no end-of-graph signal (driver error %d): graphs are waited for with "
                                 "cuStreamSynchronize", c->dev->ordinal, (int)r);
            if (sg->count)
                cuMemFree(sg->count);
            if (host)
                cuMemFreeHost(host);
            free(sg);
            sg = NULL;
        }
    }
    pthread_mutex_unlock(&c->dev->lock);
    return sg;
}

/* tk_cuda_sync after a signalled launch: spins on the host word until the GPU has counted every
 * launch queued (no driver call, so no driver lock shared with the other threads' sessions); every
 * 2048 turns, cuStreamQuery (the stream's errors, and the end of work the word does not see) and a
 * yield to other threads. */
static int wait_signal(tk_ctx *ctx)
{
    tk_cuda_ctx *c = ctx->cuda;
    int rc = slot_settle(c); /* launched by now (or failed to be) */
    c->armed = 0;
    if (rc)
        return rc;
    const tk_cu_signal *sg = __atomic_load_n(&c->signal, __ATOMIC_ACQUIRE);
    unsigned want = c->launched;
    for (unsigned n = 1;; n++) {
        unsigned got = __atomic_load_n(sg->host, __ATOMIC_ACQUIRE);
        if ((int)(got - want) >= 0)
            return 0;
        if (n % 2048) {
            cpu_relax();
            continue;
        }
        tk_cu_device *d;
        if ((rc = tk_cu_enter(ctx, &d)))
            return rc;
        CUresult r = cuStreamQuery(c->stream);
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_NOT_READY)
            return tk_cu_fail(r, "cuStreamQuery(ctx->cuda->stream)", __FILE__, __LINE__);
        sched_yield();
    }
}

/* --- the launcher ------------------------------------------------------------------------- */

/* The driver's calls on one context take its locks: sessions launching graphs from several
 * threads wait for each other there (bench/serving's graph_floor: 4 threads of the bare driver
 * make 2.6x to 2.8x the launches of one). Where a GPU has two sessions or more, their signalled
 * graphs are launched by one thread of the device's, which the sessions' threads hand them to
 * through a slot each (a store, and the launcher's own spin): 3.4x to 3.65x for the bare driver's
 * 4 threads (use_launcher says when). It spins while there is work and sleeps after about 200 us
 * without any. Each session's thread then waits on the graph's signal as before. $TK_LAUNCHER=0
 * never uses it, =1 always. */
typedef struct tk_cu_launcher {
    pthread_mutex_t lock; /* slots and sleeping's wake-up */
    pthread_cond_t cond;
    tk_cu_launch_slot *slots;
    int sleeping;
    CUcontext pctx;
} tk_cu_launcher;

static int launcher_mode(void)
{
    static int mode = -2;
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m == -2) {
        m = tk_env_force("TK_LAUNCHER");
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

/* one pass over the slots, with the lock held: whether any graph was launched */
static int launcher_pass(tk_cu_launcher *l)
{
    int any = 0;
    for (tk_cu_launch_slot *s = l->slots; s; s = s->next)
        if (__atomic_load_n(&s->req, __ATOMIC_ACQUIRE)) {
            s->result = cuGraphLaunch(s->exec, s->stream);
            __atomic_store_n(&s->req, 0, __ATOMIC_RELEASE);
            any = 1;
        }
    return any;
}

static void *launcher_main(void *arg)
{
    tk_cu_launcher *l = arg;
    tk_cu.CtxSetCurrent(l->pctx);
    unsigned idle = 0;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        int any = launcher_pass(l);
        if (!any && ++idle >= 4096) { /* about 200 us without a request: sleep until one comes */
            __atomic_store_n(&l->sleeping, 1, __ATOMIC_SEQ_CST);
            __atomic_thread_fence(__ATOMIC_SEQ_CST); /* against a request stored meanwhile */
            if (launcher_pass(l))
                __atomic_store_n(&l->sleeping, 0, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&l->sleeping, __ATOMIC_SEQ_CST))
                pthread_cond_wait(&l->cond, &l->lock);
            idle = 0;
        }
        pthread_mutex_unlock(&l->lock);
        if (any)
            idle = 0;
        else
            cpu_relax();
    }
    return NULL;
}

/* d's launcher, started on first need, with c's slot on its list; NULL where no thread could be
 * made (launches are then the caller's) */
static tk_cu_launcher *launcher_for(tk_cu_device *d, tk_cuda_ctx *c)
{
    tk_cu_launcher *l = __atomic_load_n(&d->launcher, __ATOMIC_ACQUIRE);
    if (!l) {
        pthread_mutex_lock(&d->lock);
        if (!(l = d->launcher) && (l = calloc(1, sizeof *l))) {
            pthread_t th;
            pthread_attr_t attr;
            pthread_mutex_init(&l->lock, NULL);
            pthread_cond_init(&l->cond, NULL);
            l->pctx = d->pctx;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&th, &attr, launcher_main, l) == 0) {
                __atomic_store_n(&d->launcher, l, __ATOMIC_RELEASE);
            } else {
                tk_log(TK_LOG_DEBUG, "cuda:%d: no launcher thread: sessions launch their own graphs", d->ordinal);
                pthread_cond_destroy(&l->cond);
                pthread_mutex_destroy(&l->lock);
                free(l);
                l = NULL;
            }
            pthread_attr_destroy(&attr);
        }
        pthread_mutex_unlock(&d->lock);
    }
    if (l && !c->slot_registered) {
        pthread_mutex_lock(&l->lock);
        c->slot.next = l->slots;
        l->slots = &c->slot;
        c->slot_registered = 1;
        pthread_mutex_unlock(&l->lock);
    }
    return l;
}

/* c's slot off its launcher's list (no request pending) */
static void launcher_forget(tk_cuda_ctx *c)
{
    tk_cu_launcher *l = __atomic_load_n(&c->dev->launcher, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&l->lock);
    for (tk_cu_launch_slot **p = &l->slots; *p; p = &(*p)->next)
        if (*p == &c->slot) {
            *p = c->slot.next;
            break;
        }
    pthread_mutex_unlock(&l->lock);
    c->slot_registered = 0;
}

/* Waits until the launcher has taken c's pending graph; its launch's failure, if it failed (the
 * graph never ran: it does not count). */
static int slot_settle(tk_cuda_ctx *c)
{
    slot_wait(c);
    CUresult r = c->slot.result;
    if (r == CUDA_SUCCESS)
        return 0;
    c->slot.result = CUDA_SUCCESS;
    c->launched--;
    c->armed = 0;
    return tk_cu_fail(r, "cuGraphLaunch (by the device's launcher thread)", __FILE__, __LINE__);
}

/* Whether a graph with an end-of-graph signal goes through the launcher: two sessions or more,
 * but not more than half the CPUs (the sessions' threads spin while they wait; with as many as
 * there are CPUs the launcher thread lost its CPU for a scheduler tick at times and every session
 * waited 4 to 8 ms: bench/serving, 16 threads on 16 cores). */
static int use_launcher(tk_cu_device *d)
{
    static long half_cpus;
    int mode = launcher_mode();
    if (mode >= 0)
        return mode;
    long half = __atomic_load_n(&half_cpus, __ATOMIC_RELAXED);
    if (!half) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        half = n >= 4 ? n / 2 : 2;
        __atomic_store_n(&half_cpus, half, __ATOMIC_RELAXED);
    }
    int n = __atomic_load_n(&d->nsignals, __ATOMIC_RELAXED);
    return n >= 2 && n <= half;
}

/* --- CUDA graphs and events, for runtime/exec.c ------------------------------------------- */

int tk_cuda_graphs_available(void)
{
    return tk_cu_load() == 0 && tk_cu.StreamBeginCapture && tk_cu.StreamEndCapture &&
           tk_cu.GraphInstantiateWithFlags && tk_cu.GraphLaunch && tk_cu.GraphExecDestroy && tk_cu.GraphDestroy;
}

/* An instantiated graph, or a member of a family of graphs (cuda_family.c), and the signal it ends
 * with (NULL: none). */
typedef struct tk_cu_graph {
    CUgraphExec exec; /* NULL in a family */
    tk_cu_signal *signal;
    tk_cu_family *family;
    tk_cu_member *member;
} tk_cu_graph;

int tk_cuda_capture_begin(tk_ctx *ctx, tk_ctx *replay_on)
{
    tk_cu_device *d = NULL;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    if (!tk_cuda_graphs_available())
        return tk_error_set(TK_EUNSUPPORTED, "the CUDA driver has no stream capture (cuStreamBeginCapture_v2)");
    if (replay_on && (!replay_on->cuda || replay_on->cuda->dev != d))
        return tk_error_set(TK_EINVAL, "a graph captured on 'cuda:%d' replays on another device", d->ordinal);
    ctx->cuda->capture_signal = replay_on ? signal_of(ctx, replay_on) : NULL;
    ctx->cuda->capture_shares = replay_on && replay_on->cuda->share_graphs;
    /* thread-local: sessions on other threads may allocate while this one captures */
    TK_CU_CHECK(cuStreamBeginCapture(ctx->cuda->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    ctx->cuda->capturing = 1;
done:
    return rc;
}

/* The signal at the end of the capture under way on stream: a programmatic dependent where every
 * node it follows is a kernel (a copy or memset before it: an ordinary launch) */
static CUresult launch_signal(tk_cu_device *d, CUstream stream, void **args)
{
    CUstreamCaptureStatus status;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 0;
    int after = d->signal_after_fn &&
                cuStreamGetCaptureInfo(stream, &status, NULL, NULL, &deps, NULL, &ndeps) == CUDA_SUCCESS && ndeps > 0;
    for (size_t i = 0; after && i < ndeps; i++) {
        CUgraphNodeType type;
        after = cuGraphNodeGetType(deps[i], &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_KERNEL;
    }
    if (!after)
        return cuLaunchKernel(d->signal_fn, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                          .hStream = stream, .attrs = &attr, .numAttrs = 1};
    return cuLaunchKernelEx(&cfg, d->signal_after_fn, args, NULL);
}

int tk_cu_instantiate(CUgraph graph, CUstream stream, CUgraphExec *exec)
{
    int rc = 0;
    CUgraphExec ge = NULL;
    TK_CU_CHECK(cuGraphInstantiate(&ge, graph, 0));
    /* the graph's device-side state made now, so its first launch costs what later ones do (the
       capture thread makes graphs ahead of the requests that launch them) */
    if (cuGraphUpload && cuGraphUpload(ge, stream) == CUDA_SUCCESS)
        cuStreamSynchronize(stream);
    *exec = ge;
done:
    return rc;
}

int tk_cuda_capture_end(tk_ctx *ctx, int keep, void **exec)
{
    tk_cu_device *d;
    CUgraph graph = NULL;
    tk_cu_graph *g = NULL;
    *exec = NULL;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    tk_cu_signal *sg = ctx->cuda->capture_signal;
    ctx->cuda->capture_signal = NULL;
    /* the signal, last: a failed launch invalidates the capture, and cuStreamEndCapture says so */
    CUresult signalled = CUDA_SUCCESS;
    if (keep && sg) {
        CUdeviceptr count = sg->count, word = sg->host_dev;
        void *args[] = {&count, &word};
        signalled = launch_signal(d, ctx->cuda->stream, args);
    }
    /* always ends the capture, even when the work captured went wrong: the stream is usable again */
    ctx->cuda->capturing = 0;
    TK_CU_CHECK(cuStreamEndCapture(ctx->cuda->stream, &graph));
    TK_CU_CHECK(signalled);
    if (!keep)
        goto done;
    if (!(g = calloc(1, sizeof *g))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    g->signal = sg;
    /* a graph that replays on a session's context joins the family of its form there */
    if (sg && ctx->cuda->capture_shares && tk_cu_families_on() &&
        (rc = tk_cu_family_join(sg, &graph, ctx->cuda->stream, &g->family, &g->member)))
        goto done;
    if (!g->family && (rc = tk_cu_instantiate(graph, ctx->cuda->stream, &g->exec)))
        goto done;
    *exec = g;
    g = NULL;
done:
    free(g);
    if (graph)
        cuGraphDestroy(graph);
    return rc;
}

int tk_cuda_graph_launch(tk_ctx *ctx, void *exec)
{
    tk_cu_device *d;
    const tk_cu_graph *g = exec;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    /* a signalled graph counts its launches on its own context's stream only */
    if (g->signal && g->signal != __atomic_load_n(&ctx->cuda->signal, __ATOMIC_ACQUIRE))
        return tk_error_set(TK_EINTERNAL, "a CUDA graph captured for another context was launched on this one");
    /* a family's graph with this member's grids and arguments (the launch before, this thread's, is
       queued by now: tk_cu_enter settled the launcher's slot) */
    CUgraphExec ge = g->exec;
    if (g->family && (rc = tk_cu_family_select(g->signal, g->family, g->member, &ge)))
        return rc;
    tk_cu_launcher *l = g->signal && use_launcher(d) ? launcher_for(d, ctx->cuda) : NULL;
    if (l) { /* handed over: the launcher launches it, tk_cuda_sync waits on its signal */
        tk_cu_launch_slot *sl = &ctx->cuda->slot;
        sl->exec = ge;
        sl->stream = ctx->cuda->stream;
        __atomic_store_n(&sl->req, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&l->sleeping, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&l->lock);
            __atomic_store_n(&l->sleeping, 0, __ATOMIC_SEQ_CST);
            pthread_cond_signal(&l->cond);
            pthread_mutex_unlock(&l->lock);
        }
    } else {
        TK_CU_CHECK(cuGraphLaunch(ge, ctx->cuda->stream));
    }
    if (g->signal) {
        ctx->cuda->launched++;
        ctx->cuda->armed = 1;
    }
done:
    return rc;
}

void tk_cuda_share_graphs(tk_ctx *ctx, int on)
{
    if (ctx && ctx->cuda)
        ctx->cuda->share_graphs = on;
}

void tk_cuda_graph_families(tk_ctx *ctx, size_t *families, size_t *members)
{
    tk_cu_signal *sg = ctx && ctx->cuda ? __atomic_load_n(&ctx->cuda->signal, __ATOMIC_ACQUIRE) : NULL;
    *families = *members = 0;
    if (sg)
        tk_cu_families_count(sg, families, members);
}

int tk_cuda_launcher_used(tk_ctx *ctx)
{
    return ctx && ctx->cuda && ctx->cuda->slot_registered;
}

int tk_cuda_signal_state(tk_ctx *ctx, unsigned *launched, unsigned *seen)
{
    const tk_cu_signal *sg = ctx && ctx->cuda ? __atomic_load_n(&ctx->cuda->signal, __ATOMIC_ACQUIRE) : NULL;
    *launched = *seen = 0;
    if (!sg)
        return -1;
    *launched = ctx->cuda->launched;
    *seen = __atomic_load_n(sg->host, __ATOMIC_ACQUIRE);
    return ctx->cuda->armed;
}

/* Not tk_cu_enter: a launch of the launcher's that failed stays for the session's next call to report
 * (this one returns nothing), and the graph goes whatever happened before; only its launch, if
 * the launcher has yet to make it, is waited for. */
void tk_cuda_graph_free(tk_ctx *ctx, void *exec)
{
    tk_cu_graph *g = exec;
    if (g && ctx && ctx->cuda && cuCtxSetCurrent(ctx->cuda->dev->pctx) == CUDA_SUCCESS) {
        slot_wait(ctx->cuda);
        if (g->family)
            tk_cu_family_leave(g->signal, g->family, g->member);
        else
            cuGraphExecDestroy(g->exec);
    }
    free(g);
}

int tk_cuda_event_new(tk_ctx *ctx, void **ev)
{
    tk_cu_device *d;
    CUevent e = NULL;
    *ev = NULL;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    TK_CU_CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    *ev = (void *)e;
done:
    return rc;
}

void tk_cuda_event_free(tk_ctx *ctx, void *ev)
{
    tk_cu_device *d;
    if (ev && tk_cu_enter(ctx, &d) == 0)
        cuEventDestroy((CUevent)ev);
}

int tk_cuda_event_record(tk_ctx *ctx, void *ev)
{
    tk_cu_device *d;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    if (ctx->cuda->capturing) {
        /* captured: an event-record node of the graph (external: it records when replayed, for
           timing), not a dependency between captured streams */
        if (!tk_cu.EventRecordWithFlags)
            return tk_error_set(TK_EUNSUPPORTED, "the CUDA driver has no cuEventRecordWithFlags: events are not "
                                                 "recorded inside CUDA graphs");
        TK_CU_CHECK(tk_cu.EventRecordWithFlags((CUevent)ev, ctx->cuda->stream, CU_EVENT_RECORD_EXTERNAL));
    } else {
        TK_CU_CHECK(cuEventRecord((CUevent)ev, ctx->cuda->stream));
    }
done:
    return rc;
}

int tk_cuda_event_elapsed_us(tk_ctx *ctx, void *start, void *end, double *us)
{
    tk_cu_device *d;
    float ms = 0;
    *us = 0;
    int rc = tk_cu_enter(ctx, &d);
    if (rc)
        return rc;
    TK_CU_CHECK(cuEventSynchronize((CUevent)end));
    TK_CU_CHECK(cuEventElapsedTime_v2(&ms, (CUevent)start, (CUevent)end));
    *us = 1000.0 * ms;
done:
    return rc;
}

#else /* built without the CUDA headers: every GPU request fails as on a machine without a driver */
#include "rt_internal.h"

static int no_cuda(void)
{
    return tk_error_set(TK_EDEVICE, "no CUDA driver: libtkrt was built without the CUDA toolkit's headers (cuda.h)");
}

int tk_cuda_available(void) { return no_cuda(); }
int tk_cuda_ctx_init(tk_ctx *ctx, int device) { (void)ctx, (void)device; return no_cuda(); }
void tk_cuda_ctx_release(tk_ctx *ctx) { (void)ctx; }
int tk_cuda_alloc(tk_ctx *ctx, void **ptr, size_t n) { (void)ctx, (void)n; *ptr = NULL; return no_cuda(); }
void tk_cuda_free(tk_ctx *ctx, void *ptr) { (void)ctx, (void)ptr; }
int tk_cuda_memcpy(tk_ctx *ctx, void *dst, tk_device dst_dev, const void *src, tk_device src_dev, size_t n)
{
    (void)ctx, (void)dst, (void)dst_dev, (void)src, (void)src_dev, (void)n;
    return no_cuda();
}
int tk_cuda_memcpy2d(tk_ctx *ctx, void *dst, tk_device dst_dev, size_t dpitch, const void *src, tk_device src_dev,
                     size_t spitch, size_t width, size_t height)
{
    (void)ctx, (void)dst, (void)dst_dev, (void)dpitch, (void)src, (void)src_dev, (void)spitch, (void)width, (void)height;
    return no_cuda();
}
int tk_cuda_sync(tk_ctx *ctx) { (void)ctx; return no_cuda(); }
void *tk_cuda_stream(tk_ctx *ctx) { (void)ctx; return NULL; }
int tk_cuda_sm_count_of(tk_ctx *ctx) { (void)ctx; return 1; }
int tk_cuda_cc_of(tk_ctx *ctx) { (void)ctx; return 0; }
int tk_cuda_device_count(int *n) { *n = 0; return no_cuda(); }
int tk_cuda_device_info(int ordinal, char *name, size_t n, int *driver_version)
{
    (void)ordinal, (void)n, *driver_version = 0;
    name[0] = '\0';
    return no_cuda();
}
int tk_cuda_time(tk_ctx *ctx, int (*fn)(void *arg, int rep), void *arg, int warmup, int reps, double *times_us)
{
    (void)ctx, (void)fn, (void)arg, (void)warmup, (void)reps, (void)times_us;
    return no_cuda();
}
int tk_cuda_compute_capability(int ordinal, int *major, int *minor)
{
    (void)ordinal, *major = *minor = 0;
    return no_cuda();
}
int tk_cuda_graphs_available(void) { return 0; }
int tk_cuda_capture_begin(tk_ctx *ctx, tk_ctx *replay_on) { (void)ctx, (void)replay_on; return no_cuda(); }
int tk_cuda_capture_end(tk_ctx *ctx, int keep, void **exec) { (void)ctx, (void)keep, *exec = NULL; return no_cuda(); }
int tk_cuda_graph_launch(tk_ctx *ctx, void *exec) { (void)ctx, (void)exec; return no_cuda(); }
void tk_cuda_graph_free(tk_ctx *ctx, void *exec) { (void)ctx, (void)exec; }
void tk_cuda_share_graphs(tk_ctx *ctx, int on) { (void)ctx, (void)on; }
void tk_cuda_graph_families(tk_ctx *ctx, size_t *families, size_t *members) { (void)ctx, *families = *members = 0; }
int tk_cuda_signal_state(tk_ctx *ctx, unsigned *launched, unsigned *seen)
{
    (void)ctx, *launched = *seen = 0;
    return -1;
}
int tk_cuda_launcher_used(tk_ctx *ctx)
{
    (void)ctx;
    return 0;
}
int tk_cuda_event_new(tk_ctx *ctx, void **ev) { (void)ctx, *ev = NULL; return no_cuda(); }
void tk_cuda_event_free(tk_ctx *ctx, void *ev) { (void)ctx, (void)ev; }
int tk_cuda_event_record(tk_ctx *ctx, void *ev) { (void)ctx, (void)ev; return no_cuda(); }
int tk_cuda_event_elapsed_us(tk_ctx *ctx, void *start, void *end, double *us)
{
    (void)ctx, (void)start, (void)end, *us = 0;
    return no_cuda();
}
#endif
