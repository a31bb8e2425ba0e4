/* The CUDA driver as libtkrt uses it (runtime/cuda.c): libcuda.so.1 opened with dlopen, its
 * functions called under their own names through a table, the checking macro, and the state
 * each GPU shares between the contexts on it. Included by runtime/ files only. */
#ifndef TK_CUDA_DRIVER_H
#define TK_CUDA_DRIVER_H

#include <pthread.h>
#include <stddef.h>

/* Types and constants only: nothing links libcuda. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "map.h"
#include "rt_internal.h"

/* The driver entry points, resolved by dlsym under the ABI names of cuda.h (cuMemAlloc is
 * cuMemAlloc_v2, ...). FuncGetParamInfo is NULL on drivers older than CUDA 12.4. */
typedef struct tk_cu_api {
    PFN_cuInit_v2000 Init;
    PFN_cuDriverGetVersion_v2020 DriverGetVersion;
    PFN_cuGetErrorName_v6000 GetErrorName;
    PFN_cuGetErrorString_v6000 GetErrorString;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetCount_v2000 DeviceGetCount;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease;
    PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
    PFN_cuStreamCreate_v2000 StreamCreate;
    PFN_cuStreamDestroy_v4000 StreamDestroy;
    PFN_cuStreamSynchronize_v2000 StreamSynchronize;
    PFN_cuMemAlloc_v3020 MemAlloc;
    PFN_cuMemFree_v3020 MemFree;
    PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
    PFN_cuMemcpyDtoDAsync_v3020 MemcpyDtoDAsync;
    PFN_cuMemcpy2DAsync_v3020 Memcpy2DAsync;
    PFN_cuModuleLoadData_v2000 ModuleLoadData;
    PFN_cuModuleGetFunction_v2000 ModuleGetFunction;
    PFN_cuModuleUnload_v2000 ModuleUnload;
    PFN_cuLaunchKernel_v4000 LaunchKernel;
    PFN_cuFuncGetParamInfo_v12040 FuncGetParamInfo;
    PFN_cuFuncSetAttribute_v9000 FuncSetAttribute;
    PFN_cuDeviceGetName_v2000 DeviceGetName;
    PFN_cuEventCreate_v2000 EventCreate;
    PFN_cuEventRecord_v2000 EventRecord;
    PFN_cuEventRecordWithFlags_v11010 EventRecordWithFlags; /* optional */
    PFN_cuEventSynchronize_v2000 EventSynchronize;
    PFN_cuEventElapsedTime_v12080 EventElapsedTime;
    PFN_cuEventDestroy_v4000 EventDestroy;
    /* newer drivers only, not declared by CUDA 13.0's cuda.h: the parameter count without
       probing past the last parameter (which sanitizers report as an API error) */
    CUresult (*FuncGetParamCount)(CUfunction func, size_t *count);
    /* CUDA graphs (runtime/exec.c's replay); NULL when the driver lacks one, and then sessions
       run eagerly */
    PFN_cuStreamBeginCapture_v10010 StreamBeginCapture;
    PFN_cuStreamEndCapture_v10000 StreamEndCapture;
    PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags;
    PFN_cuGraphLaunch_v10000 GraphLaunch;
    PFN_cuGraphExecDestroy_v10000 GraphExecDestroy;
    PFN_cuGraphDestroy_v10000 GraphDestroy;
    PFN_cuGraphUpload_v11010 GraphUpload; /* NULL: a graph is uploaded at its first launch */
    /* the end-of-graph signal (cuda.c, tk_cuda_sync): NULL when missing, and then graphs are
       waited for with cuStreamSynchronize */
    PFN_cuStreamQuery_v2000 StreamQuery;
    PFN_cuMemHostAlloc_v2020 MemHostAlloc;
    PFN_cuMemHostGetDevicePointer_v3020 MemHostGetDevicePointer;
    PFN_cuMemFreeHost_v2000 MemFreeHost;
    PFN_cuMemsetD32Async_v3020 MemsetD32Async;
    /* the signal launched as a programmatic dependent of the graph's last kernel (cuda.c, sm_90
       and newer): NULL when missing, and then it is launched as any kernel */
    PFN_cuLaunchKernelEx_v11060 LaunchKernelEx;
    PFN_cuStreamGetCaptureInfo_v12030 StreamGetCaptureInfo;
    PFN_cuGraphNodeGetType_v10000 GraphNodeGetType;
    /* graph families (cuda_family.c): NULL when missing, and then every graph is instantiated
       alone */
    PFN_cuGraphGetNodes_v10000 GraphGetNodes;
    PFN_cuGraphGetEdges_v12030 GraphGetEdges;
    PFN_cuGraphKernelNodeGetParams_v12000 GraphKernelNodeGetParams;
    PFN_cuGraphKernelNodeGetAttribute_v11000 GraphKernelNodeGetAttribute;
    PFN_cuGraphExecKernelNodeSetParams_v12000 GraphExecKernelNodeSetParams;
} tk_cu_api;

/* Filled by tk_cu_load; read-only afterwards. */
extern tk_cu_api tk_cu;

/* Driver calls are written as in NVIDIA's documentation; cuda.h maps cuMemAlloc to
 * cuMemAlloc_v2 and these map the ABI names to the table. */
#define cuInit tk_cu.Init
#define cuDriverGetVersion tk_cu.DriverGetVersion
#define cuGetErrorName tk_cu.GetErrorName
#define cuGetErrorString tk_cu.GetErrorString
#define cuDeviceGet tk_cu.DeviceGet
#define cuDeviceGetCount tk_cu.DeviceGetCount
#define cuDeviceGetAttribute tk_cu.DeviceGetAttribute
#define cuDevicePrimaryCtxRetain tk_cu.DevicePrimaryCtxRetain
#define cuDevicePrimaryCtxRelease_v2 tk_cu.DevicePrimaryCtxRelease
#define cuCtxSetCurrent tk_cu.CtxSetCurrent
#define cuStreamCreate tk_cu.StreamCreate
#define cuStreamDestroy_v2 tk_cu.StreamDestroy
#define cuStreamSynchronize tk_cu.StreamSynchronize
#define cuMemAlloc_v2 tk_cu.MemAlloc
#define cuMemFree_v2 tk_cu.MemFree
#define cuMemcpyHtoDAsync_v2 tk_cu.MemcpyHtoDAsync
#define cuMemcpyDtoHAsync_v2 tk_cu.MemcpyDtoHAsync
#define cuMemcpyDtoDAsync_v2 tk_cu.MemcpyDtoDAsync
#define cuMemcpy2DAsync_v2 tk_cu.Memcpy2DAsync
#define cuModuleLoadData tk_cu.ModuleLoadData
#define cuModuleGetFunction tk_cu.ModuleGetFunction
#define cuModuleUnload tk_cu.ModuleUnload
#define cuLaunchKernel tk_cu.LaunchKernel
#define cuFuncGetParamInfo tk_cu.FuncGetParamInfo
#define cuFuncSetAttribute tk_cu.FuncSetAttribute
#define cuDeviceGetName tk_cu.DeviceGetName
#define cuEventCreate tk_cu.EventCreate
#define cuEventRecord tk_cu.EventRecord
#define cuEventSynchronize tk_cu.EventSynchronize
#define cuEventElapsedTime_v2 tk_cu.EventElapsedTime
#define cuEventDestroy_v2 tk_cu.EventDestroy
#define cuStreamBeginCapture_v2 tk_cu.StreamBeginCapture
#define cuStreamEndCapture tk_cu.StreamEndCapture
#define cuGraphInstantiateWithFlags tk_cu.GraphInstantiateWithFlags
#define cuGraphLaunch tk_cu.GraphLaunch
#define cuGraphExecDestroy tk_cu.GraphExecDestroy
#define cuGraphDestroy tk_cu.GraphDestroy
#define cuGraphUpload tk_cu.GraphUpload
#define cuStreamQuery tk_cu.StreamQuery
#define cuMemHostAlloc tk_cu.MemHostAlloc
#define cuMemHostGetDevicePointer_v2 tk_cu.MemHostGetDevicePointer
#define cuMemFreeHost tk_cu.MemFreeHost
#define cuMemsetD32Async tk_cu.MemsetD32Async
#define cuLaunchKernelEx tk_cu.LaunchKernelEx
#define cuStreamGetCaptureInfo_v3 tk_cu.StreamGetCaptureInfo
#define cuGraphNodeGetType tk_cu.GraphNodeGetType
#define cuGraphGetNodes tk_cu.GraphGetNodes
#define cuGraphGetEdges_v2 tk_cu.GraphGetEdges
#define cuGraphKernelNodeGetParams_v2 tk_cu.GraphKernelNodeGetParams
#define cuGraphKernelNodeGetAttribute tk_cu.GraphKernelNodeGetAttribute
#define cuGraphExecKernelNodeSetParams_v2 tk_cu.GraphExecKernelNodeSetParams

/* Loads libcuda.so.1 and resolves the table, once per process (later calls repeat the first
 * outcome). 0, or TK_EDEVICE "no CUDA driver: ..." when the library or cuInit fails. */
int tk_cu_load(void);

/* Records "stmt failed at file:line: CUDA_ERROR_X: text" and returns TK_EDEVICE (TK_ENOMEM for
 * CUDA_ERROR_OUT_OF_MEMORY). */
int tk_cu_fail(CUresult r, const char *stmt, const char *file, int line);

/* Every driver call goes through this macro (ggml's CU_CHECK, but returning): on failure it
 * records the statement, file, line and the driver's error, sets the enclosing function's
 * `int rc` and jumps to its `done:` label. */
#define TK_CU_CHECK(call)                                                                  \
    do {                                                                                   \
        CUresult tk__cu_r = (call);                                                        \
        if (tk__cu_r != CUDA_SUCCESS) {                                                    \
            rc = tk_cu_fail(tk__cu_r, #call, __FILE__, __LINE__);                          \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

/* A module loaded from one registered fatbin on one device. */
typedef struct tk_cu_module {
    const tk_fatbin_node *node; /* the registration it came from */
    unsigned long long serial;  /* node->serial when it was loaded */
    CUmodule module;            /* NULL when the fatbin has nothing this GPU can run */
    int live;                   /* still registered (launch.c's bookkeeping) */
    struct tk_cu_module *next;
} tk_cu_module;

/* What every context on one GPU shares. The primary context is retained once, at first use,
 * and kept for the life of the process, so contexts come and go cheaply and device memory,
 * modules and library handles stay valid across them. */
typedef struct tk_cu_device {
    pthread_mutex_t lock; /* guards everything below once ready */
    int ready;
    int ordinal;
    CUdevice dev;
    CUcontext pctx;
    int sm_count;
    int cc; /* compute capability, major * 10 + minor */
    int shared_optin; /* the dynamic shared memory a block may opt in to (launch.c; 0: not asked yet) */
    /* launch.c: modules loaded on first need and the kernels found in them */
    tk_cu_module *modules;
    tk_map kernels;        /* kernel name -> tk_cu_kernel * (launch.c) */
    unsigned fatbin_gen;   /* tk_fatbin_generation() when kernels was filled */
    void *retired;         /* kernels forgotten after an unload, kept for launches in flight */
    /* cublaslt.c: the handle and tk::linear's plan cache, made on first use and published with
       release semantics (read without the lock) */
    void *cublaslt;
    /* cuda.c: the end-of-graph signal kernel, loaded on first need (signal_fn_state: 0 not yet
       tried, 1 loaded, -1 unavailable) */
    CUmodule signal_mod;
    CUfunction signal_fn;
    CUfunction signal_after_fn; /* the same, waiting for the kernels before it (sm_90: NULL before) */
    int signal_fn_state;
    /* cuda.c: the launcher, where several sessions launch graphs on this GPU (started on first
       need, never stopped) */
    struct tk_cu_launcher *launcher;
    int nsignals; /* contexts with an end-of-graph signal (sessions); atomic */
} tk_cu_device;

/* A context's request to the device's launcher thread (cuda.c): req 1 while a graph waits to be
 * launched (set by the context's thread, cleared by the launcher once cuGraphLaunch returned);
 * result the launch's outcome. */
typedef struct tk_cu_launch_slot {
    CUgraphExec exec;
    CUstream stream;
    int req;
    CUresult result;
    struct tk_cu_launch_slot *next; /* the launcher's list, under its lock */
} tk_cu_launch_slot;

/* The end-of-graph signal of a context (cuda.c): a word of host memory the GPU can write and a
 * launch counter in device memory. A graph that will replay on the context ends with a one-thread
 * kernel that adds one to the counter and stores the count in the word; tk_cuda_sync waits for
 * the word to reach the count of launches without a driver call (the driver's locks are what
 * stops a stream synchronization from scaling over threads). Made once, published with release
 * semantics: the capture thread may make it while the session's thread reads it. */
typedef struct tk_cu_signal {
    volatile unsigned *host; /* mapped, written by the GPU */
    CUdeviceptr host_dev;    /* the same word as the GPU sees it */
    CUdeviceptr count;       /* the launches that reached their end, in device memory */
    /* the graph families of the graphs that replay on the context (cuda_family.c), under lock */
    pthread_mutex_t lock;
    struct tk_cu_family *families;
} tk_cu_signal;

struct tk_cuda_ctx {
    tk_cu_device *dev;
    CUstream stream; /* non-blocking: never waits on the legacy default stream */
    int capturing;   /* a CUDA graph capture is under way on stream (tk_cuda_alloc refuses) */
    void *lt;        /* cublaslt.c's tk_lt_ctx: workspace and matmul descriptors, made on first use */
    tk_cu_signal *signal; /* NULL until a graph for this context was captured (atomic) */
    tk_cu_signal *capture_signal; /* the signal the capture under way on stream ends with */
    int share_graphs;             /* graphs made to replay here join families (tk_cuda_share_graphs) */
    int capture_shares;           /* the capture under way makes such a graph */
    unsigned launched;    /* signalled launches queued so far (the launching thread's) */
    int armed;            /* the last work queued is a signalled launch: tk_cuda_sync spins on it */
    tk_cu_launch_slot slot; /* graphs launched by the device's launcher thread (registered with it) */
    int slot_registered;
};

/* fn's parameters as the driver lays them out (cuFuncGetParamInfo): their count (at most max - 1),
 * with their sizes, and their offsets where offsets is not NULL; -1 where the driver cannot tell
 * (before CUDA 12.4, or one of the parameters cuFuncGetParamCount counts is not described: never
 * part of a layout) or there are max or more (launch.c). */
int tk_cu_param_layout(CUfunction fn, size_t *offsets, size_t *sizes, int max);

/* graph instantiated, and uploaded with stream so that its first launch costs what later ones do
 * (cuda.c): 0, or the driver's error. */
int tk_cu_instantiate(CUgraph graph, CUstream stream, CUgraphExec *exec);

/* Graph families (cuda_family.c). A session replays a graph per input-shape signature, and the
 * graphs of two signatures are mostly the same kernels with other grids and arguments, while each
 * instantiated graph costs the host about 40 KB (tokmlp's 32,768: 1.3 GB) and its making most of a
 * prefill's time. So, in the sessions that ask for it (tk_cuda_share_graphs: those that keep many
 * graphs), the graphs of one form (the same kernels with the same blocks, shared memory and launch
 * attributes, joined by the same edges) that replay on one context share one instantiated graph:
 * a member keeps only its kernels' grids and arguments, set on the shared graph
 * (cuGraphExecKernelNodeSetParams) when it launches after another member. That setting is not
 * free (bench/serving/JOURNAL.md, nineteenth session), hence not for every session. The context's
 * signal holds its families: every signalled graph replays on that context alone, launched by one
 * thread at a time. */
typedef struct tk_cu_family tk_cu_family;
typedef struct tk_cu_member tk_cu_member;
/* Whether families can be made: the driver has the calls. */
int tk_cu_families_on(void);
/* graph, captured to replay on sg's context, into the family of its form, made (instantiated, and
 * uploaded on stream) where none has its form yet; *graph becomes NULL where the new family keeps
 * it. 0 with *family NULL where graph has no form a family takes (a node that is not a kernel, a
 * kernel whose arguments the driver cannot lay out): the caller instantiates it alone. */
int tk_cu_family_join(tk_cu_signal *sg, CUgraph *graph, CUstream stream, tk_cu_family **family, tk_cu_member **member);
/* The family's instantiated graph with member's grids and arguments set. */
int tk_cu_family_select(tk_cu_signal *sg, tk_cu_family *family, const tk_cu_member *member, CUgraphExec *exec);
/* member out of the family, the family freed with its last member. */
void tk_cu_family_leave(tk_cu_signal *sg, tk_cu_family *family, tk_cu_member *member);
/* How many families sg has, and members in them. */
void tk_cu_families_count(tk_cu_signal *sg, size_t *families, size_t *members);
/* The families left on sg (their members' graphs leaked by their owners), at the context's end. */
void tk_cu_families_free(tk_cu_signal *sg);

/* ctx's device, with its primary context made current on the calling thread (driver calls
 * act on the current context of the thread, and a context may move between threads). */
int tk_cu_enter(tk_ctx *ctx, tk_cu_device **dev);
/* Calls fn on each GPU set up so far, with its primary context current; nothing when no GPU was
 * ever used (it does not load the driver). */
void tk_cu_foreach_ready(void (*fn)(tk_cu_device *d));

#endif
