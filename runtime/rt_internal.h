/* What the runtime's files share: the tensor and context structs behind the opaque public types,
 * and the CUDA backend's interface. Included by runtime/ and kernels/ only. */
#ifndef TK_RT_INTERNAL_H
#define TK_RT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <tk/export.h>
#include <tk/program.h>
#include <tk/runtime.h>

typedef enum tk_mode { TK_MODE_EAGER, TK_MODE_TRACE } tk_mode;

struct tk_tensor {
    tk_dtype dtype;
    int rank;
    int64_t shape[TK_MAX_DIMS];
    int64_t strides[TK_MAX_DIMS]; /* in elements; contiguous, row-major */
    tk_device device;
    void *data;      /* host pointer, or a CUdeviceptr stored in a pointer */
    size_t nbytes;
    int owned;       /* tk_tensor_free releases data */
    tk_ctx *owner;   /* the context that allocated data (device memory is freed through it) */
    tk_sym dims[TK_MAX_DIMS]; /* the shape as tk_sym: constants (= shape[]) unless traced */
    int traced;      /* a trace-mode value: no data, dims may be symbolic, shape[] is -1 there */
    int trace_id;    /* the exporter's value id for traced tensors */
};

struct tk_tensor_spec {
    tk_dtype dtype;
    int rank;
    int64_t shape[TK_MAX_DIMS]; /* -1 where dims[i] is symbolic */
    tk_sym dims[TK_MAX_DIMS];
    int set;
};

/* Trace mode: the exporter installs these hooks on a context (the runtime never includes the
 * exporter's headers). With them, tk_op_run computes each op's output specs with its meta
 * function, makes traced output tensors (no data, symbolic dims) and calls on_op instead of
 * running the op; requirements stated by meta functions go to on_require; tk_param goes to
 * on_param. Each returns 0 or a negative tk_error_code with the message set. */
typedef enum tk_require_kind { TK_REQUIRE_EQ, TK_REQUIRE_RANGE, TK_REQUIRE_DIVISIBLE } tk_require_kind;

typedef struct tk_tracer {
    void *self;
    int (*on_op)(void *self, tk_ctx *ctx, const tk_op_def *op, tk_tensor *const *in, int nin,
                 tk_tensor *const *out, int nout, const char *file, int line);
    /* EQ: a == b; RANGE: lo <= a <= hi; DIVISIBLE: a % lo == 0. ctx->site says which op and
       which source line of the model stated it. */
    int (*on_require)(void *self, tk_ctx *ctx, tk_require_kind kind, tk_sym a, tk_sym b, int64_t lo,
                      int64_t hi, const char *what);
    tk_tensor *(*on_param)(void *self, tk_ctx *ctx, const char *name);
} tk_tracer;

/* Where the call being dispatched comes from, for messages: the op and the model's source line. */
typedef struct tk_site {
    const char *op;
    const char *file;
    int line;
} tk_site;

typedef struct tk_sym_pool tk_sym_pool;   /* runtime/sym.c: the context's expression nodes */
typedef struct tk_weights tk_weights;     /* runtime/program.c: safetensors loaded for tk_param */

/* Called by tk_ctx_free: the expression nodes, and the weights with the parameters made from them. */
void tk_sym_pool_free(tk_sym_pool *pool);
void tk_weights_free(tk_weights *weights);

typedef struct tk_cuda_ctx tk_cuda_ctx; /* runtime/cuda.c: CUcontext, stream, module cache */

struct tk_ctx {
    tk_device device;
    tk_mode mode;
    tk_cuda_ctx *cuda;   /* NULL on the CPU */
    tk_tracer *tracer;   /* set with mode TK_MODE_TRACE */
    tk_site site;        /* the op call being dispatched */
    tk_sym_pool *syms;   /* expression nodes, freed with the context */
    tk_weights *weights; /* tk_ctx_set_weights */
    /* autotuning (runtime/tune.c): the configuration tk_tune chose last, which the next tk_wrap
     * of that kernel launches; and a configuration forced for every call (the tuner's runs) */
    const tk_kernel *tune_kernel;
    int tune_base;   /* the chosen configuration's first variant; -1 when no variants are loaded */
    int tune_launch; /* the variant tk_wrap launches: tune_base + tk_tune_set's value index */
    int64_t tune_key;
    const char *tune_force_kernel;
    int tune_force_config;
};

/* A traced tensor (no storage) with the given dtype and symbolic shape, owned by ctx's caller. */
int tk_tensor_new_traced(tk_tensor **out, tk_ctx *ctx, tk_dtype dtype, int rank, const tk_sym *dims);

/* --- CUDA backend (runtime/cuda.c, runtime/launch.c) ----------------------------------------
 * Every function returns 0 or a negative tk_error_code with the message set; none aborts. On a
 * machine without a driver they fail with TK_EDEVICE "no CUDA driver: ...". */
int tk_cuda_ctx_init(tk_ctx *ctx, int device);
void tk_cuda_ctx_release(tk_ctx *ctx);
int tk_cuda_alloc(tk_ctx *ctx, void **ptr, size_t n);
void tk_cuda_free(tk_ctx *ctx, void *ptr);
/* dst/src on the given devices; host<->device copies wait for completion. */
int tk_cuda_memcpy(tk_ctx *ctx, void *dst, tk_device dst_dev, const void *src, tk_device src_dev, size_t n);
int tk_cuda_sync(tk_ctx *ctx);
/* ctx's CUstream (cast to cudaStream_t for CUDA libraries), NULL on the CPU. */
void *tk_cuda_stream(tk_ctx *ctx);
int tk_cuda_sm_count_of(tk_ctx *ctx);
/* The number of CUDA devices, and the compute capability of one (7.5, 9.0...); TK_EDEVICE with
 * the reason when there is no usable driver. */
int tk_cuda_device_count(int *n);
int tk_cuda_compute_capability(int ordinal, int *major, int *minor);
/* Times fn on ctx's stream with device events: warmup untimed calls, then reps timed ones, each
 * one's microseconds into times_us[]. fn(arg, i) queues work on ctx (i counts every call). */
int tk_cuda_time(tk_ctx *ctx, int (*fn)(void *arg, int rep), void *arg, int warmup, int reps, double *times_us);
/* Looks kernel->name up in the registered fatbins (modules loaded on first use per device),
 * checks args against the kernel's parameters and launches on ctx's stream. */
int tk_cuda_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, int nargs, const tk_arg *args);
/* CUDA graphs (runtime/exec.c): 1 when the driver has stream capture. Capture on ctx's stream
 * in thread-local mode; capture_end always ends it and, with keep, instantiates what was
 * captured (*exec, for graph_launch and graph_free). */
int tk_cuda_graphs_available(void);
int tk_cuda_capture_begin(tk_ctx *ctx);
int tk_cuda_capture_end(tk_ctx *ctx, int keep, void **exec);
int tk_cuda_graph_launch(tk_ctx *ctx, void *exec);
void tk_cuda_graph_free(tk_ctx *ctx, void *exec);
/* Device events for per-node profiles: recorded on ctx's stream; elapsed_us waits for end. */
int tk_cuda_event_new(tk_ctx *ctx, void **ev);
void tk_cuda_event_free(tk_ctx *ctx, void *ev);
int tk_cuda_event_record(tk_ctx *ctx, void *ev);
int tk_cuda_event_elapsed_us(tk_ctx *ctx, void *start, void *end, double *us);

/* --- autotuning (runtime/tune.c) --------------------------------------------------------- */

/* A package's measured choice per key bucket for kernel (TK_TUNE_BUCKETS entries, each a
 * configuration index of its declaration); TK_ENOTFOUND when no declaration of it is loaded. */
int tk_tune_set_table(const char *kernel, const signed char *table);
void tk_tune_clear_table(const char *kernel);
/* The declaration of kernel, with its parameter and configuration counts. */
int tk_tune_describe(const char *kernel, int *nparams, int *nconfigs, const tk_tune_decl **decl);
/* The variant tk_wrap of kernel launches on ctx: configuration * (heuristic values) + the
 * heuristic value's index, for the configuration tk_tune chose last; 0 (the default) when no
 * package brought the kernel's variants. */
int tk_tune_config_for(tk_ctx *ctx, const tk_kernel *kernel);

/* Fatbins embedded by tk_add_kernels (cmake/tkexport_kernels.cmake) register themselves from a
 * constructor, like ops. The code it generates declares register and unregister itself and calls
 * them from users' programs: they are exported (TK_API) though no public header declares them. */
typedef struct tk_fatbin_node {
    const void *image;
    size_t size;
    const char *name; /* the target it was built for, for messages; a name ending in "@cN" holds the
                         variants of configuration N of tuned kernels (packages) */
    struct tk_fatbin_node *next;
} tk_fatbin_node;

TK_API void tk_fatbin_register(tk_fatbin_node *node);
TK_API void tk_fatbin_unregister(tk_fatbin_node *node);
/* Calls fn on each registered fatbin, oldest first, with the registry locked, until fn returns
 * non-zero; returns that value (0 when every call returned 0). */
int tk_fatbin_foreach(int (*fn)(const tk_fatbin_node *node, void *arg), void *arg);
/* Bumped whenever a fatbin is unregistered, so caches of kernels found in fatbins know when to
 * look again. */
unsigned tk_fatbin_generation(void);

#endif
