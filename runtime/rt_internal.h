/* What the runtime's files share: the tensor and context structs behind the opaque public types,
 * and the CUDA backend's interface. Included by runtime/ and kernels/ only. */
#ifndef TK_RT_INTERNAL_H
#define TK_RT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <tk/export.h>
#include <tk/program.h>
#include <tk/runtime.h>

#include "schema.h"

typedef struct tk_registry tk_registry;

typedef enum tk_mode { TK_MODE_EAGER, TK_MODE_TRACE } tk_mode;

struct tk_tensor {
    tk_dtype dtype;
    int rank;
    int64_t shape[TK_MAX_DIMS];
    int64_t strides[TK_MAX_DIMS]; /* in elements; row-major contiguous except session output views */
    tk_device device;
    void *data;      /* host pointer, or a CUdeviceptr stored in a pointer */
    size_t nbytes;
    int owned;       /* tk_tensor_free releases data (base, where set) */
    void *base;      /* a strided view's storage, which data points into (NULL: data is the start) */
    size_t base_bytes; /* its size */
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
    /* the registry of the op being dispatched (NULL: the process registry): its kernels, tuning
     * and the ops it calls by name are resolved there */
    tk_registry *scope;
    /* set on a context that captures graphs which another context's stream will run (the
     * executor's capture thread): per-stream resources (cuBLASLt's workspace) are that one's */
    tk_ctx *stream_owner;
    /* autotuning (runtime/tune.c): the configuration tk_tune chose last, which the next tk_wrap
     * of that kernel launches; and a configuration forced for every call (the tuner's runs) */
    const tk_kernel *tune_kernel;
    int tune_base;   /* the chosen configuration's first variant; -1 when no variants are loaded */
    int tune_launch; /* the variant tk_wrap launches: tune_base + tk_tune_set's value index */
    int64_t tune_key;
    const char *tune_force_kernel;
    int tune_force_config;
    /* the message of the first tk_call or tk_param of this run that failed: a NULL passed on
     * later names it, whatever succeeded in between (tk_ctx_note_failure) */
    char *first_failure;
    const struct tk_call_args *args; /* the op being run's arguments (tk_arg_int...), or NULL */
};

/* Keeps tk_error_last() as ctx's first failure unless one is kept already. */
void tk_ctx_note_failure(tk_ctx *ctx);
/* Forgets it: a program's run starts clean. */
void tk_ctx_reset_failures(tk_ctx *ctx);

/* A tensor struct the caller embeds (not owned, never passed to tk_tensor_free) over data, for
 * the executor's views into its arena; the shape was checked when the plan was made. */
void tk_tensor_view_init(tk_tensor *t, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, void *data);
/* The same with strides (elements; NULL: contiguous). */
void tk_tensor_view_strided(tk_tensor *t, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape,
                            const int64_t *strides, void *data);
/* A new strided view owning its storage: storage bytes allocated on dev (ctx for a GPU), the
 * elements from offset bytes in, at these strides (elements). */
int tk_tensor_new_view(tk_tensor **out, tk_ctx *ctx, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape,
                       const int64_t *strides, size_t storage, size_t offset);

/* A traced tensor (no storage) with the given dtype and symbolic shape, owned by ctx's caller. */
int tk_tensor_new_traced(tk_tensor **out, tk_ctx *ctx, tk_dtype dtype, int rank, const tk_sym *dims);

/* t's shape as "[batch, 128]" (dims as expressions where t is traced), for messages: into buf
 * (cut to n bytes; "[?]" where memory ran out). */
void tk_tensor_format_shape(const tk_tensor *t, char *buf, size_t n);

/* --- CUDA backend (runtime/cuda.c, runtime/launch.c) ----------------------------------------
 * Every function returns 0 or a negative tk_error_code with the message set; none aborts. On a
 * machine without a driver they fail with TK_EDEVICE "no CUDA driver: ...". */
int tk_cuda_ctx_init(tk_ctx *ctx, int device);
void tk_cuda_ctx_release(tk_ctx *ctx);
int tk_cuda_alloc(tk_ctx *ctx, void **ptr, size_t n);
void tk_cuda_free(tk_ctx *ctx, void *ptr);
/* dst/src on the given devices; host<->device copies wait for completion. */
int tk_cuda_memcpy(tk_ctx *ctx, void *dst, tk_device dst_dev, const void *src, tk_device src_dev, size_t n);
/* height rows of width bytes, from src (rows pitch bytes apart) to dst (dpitch apart), as
 * tk_cuda_memcpy orders and waits. */
int tk_cuda_memcpy2d(tk_ctx *ctx, void *dst, tk_device dst_dev, size_t dpitch, const void *src, tk_device src_dev,
                     size_t spitch, size_t width, size_t height);
int tk_cuda_sync(tk_ctx *ctx);
/* ctx's CUstream (cast to cudaStream_t for CUDA libraries), NULL on the CPU. */
void *tk_cuda_stream(tk_ctx *ctx);
int tk_cuda_sm_count_of(tk_ctx *ctx);
/* A whole number >= 0 from the environment variable `name`: the runtime's tuning knobs
 * (TK_MLP_MIN_ROWS and TK_LINEAR_SMALL_ROWS, read once by their ops; TK_CAPTURE_PACE_US, at each
 * session's creation). dflt when it is unset, and, with a warning, when it is not such a number. */
int64_t tk_env_count(const char *name, int64_t dflt);
/* Whether the switch `name` is on: anything but "0", unset included (TK_GRAPH_SIGNAL, TK_FOLDING,
 * TK_VIEWS and the like, which "0" turns off). */
int tk_env_on(const char *name);
/* A switch that forces a choice the runtime otherwise makes itself: 1 for "1", 0 for "0", -1
 * (decide) for anything else, unset included (TK_LAUNCHER, TK_GRAPH_FAMILIES). */
int tk_env_force(const char *name);
/* The compute capability of ctx's GPU as major * 10 + minor (90: sm_90), read once per device; 0 on the CPU. */
int tk_cuda_cc_of(tk_ctx *ctx);
/* The number of CUDA devices, and the compute capability of one (7.5, 9.0...); TK_EDEVICE with
 * the reason when there is no usable driver. */
int tk_cuda_device_count(int *n);
int tk_cuda_compute_capability(int ordinal, int *major, int *minor);
/* Times fn on ctx's stream with device events: warmup untimed calls, then reps timed ones, each
 * one's microseconds into times_us[]. fn(arg, i) queues work on ctx (i counts every call). */
int tk_cuda_time(tk_ctx *ctx, int (*fn)(void *arg, int rep), void *arg, int warmup, int reps, double *times_us);
/* Looks kernel->name up in the registered fatbins (modules loaded on first use per device),
 * checks args against the kernel's parameters and launches on ctx's stream. */
int tk_cuda_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, size_t shared, int nargs,
                   const tk_arg *args);
/* Unloads, on every GPU in use, the modules of fatbins that left every registry (a closed
 * package's) and forgets the kernels found in them; a no-op when no GPU was used. */
void tk_cuda_unload_stale(void);
/* CUDA graphs (runtime/exec.c): 1 when the driver has stream capture. Capture on ctx's stream
 * in thread-local mode; capture_end always ends it and, with keep, instantiates what was
 * captured (*exec, for graph_launch and graph_free). A graph captured for replay_on (non-NULL)
 * ends with that context's end-of-graph signal, and tk_cuda_sync waits for its replays there
 * without a driver call; it must be launched on replay_on only (graph_launch refuses another).
 * $TK_GRAPH_SIGNAL=0 leaves the signal out (the wait is then cuStreamSynchronize). On sm_90 the
 * signal is a programmatic dependent of a last node that is a kernel (it waits for that kernel's
 * end on the GPU: docs/runtime.md); $TK_GRAPH_SIGNAL_AFTER=0 launches it as any kernel. */
int tk_cuda_graphs_available(void);
int tk_cuda_capture_begin(tk_ctx *ctx, tk_ctx *replay_on);
int tk_cuda_capture_end(tk_ctx *ctx, int keep, void **exec);
int tk_cuda_graph_launch(tk_ctx *ctx, void *exec);
/* For tests: -1 when ctx has no end-of-graph signal; else whether tk_cuda_sync would wait on it
 * (1: the last work queued is a signalled launch), with the launches counted so far and the count
 * the GPU has written back. */
int tk_cuda_signal_state(tk_ctx *ctx, unsigned *launched, unsigned *seen);
/* For tests: whether ctx's graphs have gone through the device's launcher thread (cuda.c: used
 * where two sessions or more have graphs on the GPU, or with TK_LAUNCHER=1). */
int tk_cuda_launcher_used(tk_ctx *ctx);
void tk_cuda_graph_free(tk_ctx *ctx, void *exec);
/* Whether the graphs captured from now on to replay on ctx join graph families (runtime/cuda_family.c;
 * off by default). */
void tk_cuda_share_graphs(tk_ctx *ctx, int on);
/* The graph families of the graphs that replay on ctx (runtime/cuda_family.c) and their members;
 * zeros without any. */
void tk_cuda_graph_families(tk_ctx *ctx, size_t *families, size_t *members);
/* Device events for per-node profiles: recorded on ctx's stream; elapsed_us waits for end. */
int tk_cuda_event_new(tk_ctx *ctx, void **ev);
void tk_cuda_event_free(tk_ctx *ctx, void *ev);
int tk_cuda_event_record(tk_ctx *ctx, void *ev);
int tk_cuda_event_elapsed_us(tk_ctx *ctx, void *start, void *end, double *us);

/* --- autotuning (runtime/tune.c) --------------------------------------------------------- */

/* A measured choice per key bucket for kernel (TK_TUNE_BUCKETS entries, each a configuration
 * index of its declaration), set in r (NULL: the process registry); TK_ENOTFOUND when r holds no
 * declaration of it. Packages use tk_tune_set_recorded. */
int tk_tune_set_table(tk_registry *r, const char *kernel, const signed char *table);
void tk_tune_clear_table(tk_registry *r, const char *kernel);
/* A package's record of a tuned kernel (its manifest's "tuning" entry: the declaration as the
 * analyzer read it at export, and the measured table), installed in the package's registry r:
 * tk_tune and tk_tune_set of the kernel in r use the record's parameters, configurations and
 * heuristic values, never the strings of the host object's TK_AUTOTUNE and TK_HEURISTIC.
 * TK_EINVAL for a record out of bounds or a table selecting a configuration it does not have. */
struct tk_pkg_tune;
int tk_tune_set_recorded(tk_registry *r, const struct tk_pkg_tune *t);
/* Once a package's records are installed: reads (tunespec.h) the declarations its host object
 * registered in r that no record covers, as the process registry reads them at registration. */
void tk_tune_prepare(tk_registry *r);
/* Frees r's tuning lists (tk_registry_free). */
void tk_tune_release(tk_registry *r);
/* The variant tk_wrap of kernel launches on ctx: configuration * (heuristic values) + the
 * heuristic value's index, for the configuration tk_tune chose last; 0 (the default) when no
 * package brought the kernel's variants. */
int tk_tune_config_for(tk_ctx *ctx, const tk_kernel *kernel);

/* --- registries (runtime/registry.c) --------------------------------------------------------
 * What TK_OP, TK_AUTOTUNE, TK_HEURISTIC and tk_add_kernels' fatbin records register goes into a
 * registry: the process registry for what the application links or loads itself (its own ops, the
 * built-in tk:: ops, tk_ops_load), or the registry of a package, whose host object is loaded with
 * that registry as the target of its constructors (tk_registry_load). Names are resolved inside
 * one registry: two packages may both define "custom_ops::silu" and a kernel "silu_kernel", and
 * each runs its own. */
typedef struct tk_tune_entry tk_tune_entry; /* runtime/tune.c */
typedef struct tk_heur_entry tk_heur_entry;

struct tk_registry {
    pthread_mutex_t lock; /* guards the lists */
    char *origin;         /* "'mlp.tkpkg'" for messages; NULL for the process registry */
    tk_op_node *ops;      /* in registration order: a name defined twice keeps the first */
    tk_fatbin_node *fatbins;
    tk_tune_entry *tunes; /* tune.c's lists, under lock */
    tk_heur_entry *heuristics;
    struct tk_registry *next; /* registry.c's list of package registries */
};

/* The application's registry; lives as long as the process. */
tk_registry *tk_registry_process(void);
/* The registry constructors running on this thread register into (tune.c). */
tk_registry *tk_registry_target(void);
/* A new, empty registry for a package; tk_registry_free empties and frees one (never the
 * process registry). */
int tk_registry_new(tk_registry **out, const char *origin);
void tk_registry_free(tk_registry *r);
/* Loads a shared object (dlopen, RTLD_LOCAL) whose constructors register into r, and unloads one
 * whose destructors unregister from r. One load or unload at a time in the process. */
int tk_registry_load(tk_registry *r, void **handle, const char *path);
void tk_registry_unload(tk_registry *r, void *handle);
/* The op `name` in r alone (NULL when absent); r NULL is the process registry. */
const tk_op_def *tk_registry_find_op(tk_registry *r, const char *name);
/* Calls fn on each of r's fatbins, oldest first, until fn returns non-zero; returns that value.
 * fn runs on a snapshot, without the lock. */
int tk_fatbin_foreach(tk_registry *r, int (*fn)(const tk_fatbin_node *node, void *arg), void *arg);
/* The same over every registry alive (fn must not free registries). */
int tk_fatbin_foreach_all(int (*fn)(const tk_fatbin_node *node, void *arg), void *arg);
/* Adds a fatbin to r directly (a package's entries have no constructor). */
void tk_registry_add_fatbin(tk_registry *r, tk_fatbin_node *node);
/* Bumped whenever a fatbin leaves any registry, so caches of kernels found in fatbins know when
 * to look again. */
unsigned tk_fatbin_generation(void);

/* An op resolved once: its definition, its parsed schema and the registry it came from (which
 * its tk_wrap launches and tk_tune calls search). */
typedef struct tk_resolved_op {
    const tk_op_def *def;
    tk_registry *owner;
    tk_schema schema;
} tk_resolved_op;

/* Resolves `name` in scope (NULL: the process registry), then in the process registry. */
int tk_op_resolve(tk_resolved_op *out, tk_registry *scope, const char *name);
/* The arguments of the op being run, checked against its schema with the defaults filled in
 * (runtime/dispatch.c): what tk_arg_int... read and the tracer records. */
typedef struct tk_call_args {
    const tk_resolved_op *op;
    int n;                 /* the schema's arguments (at most TK_SCHEMA_MAX) */
    tk_value v[TK_SCHEMA_MAX];
    int64_t ints[256];     /* the int[] defaults' storage */
    int nints;
    char str[512];         /* the str defaults' storage */
    size_t nstr;
} tk_call_args;

/* Runs a resolved op as tk_op_run does, with any arguments (file and line: the model's call
 * site, or NULL). */
int tk_op_run_resolved(tk_ctx *ctx, const tk_resolved_op *op, const char *file, int line, const tk_value *args,
                       int nargs, tk_tensor **out, int nout);

/* The built-in that runs tk::linear (`linear`) and the op after it (`next`, tk::gelu of its
 * result or tk::add of it and a tensor of its shape) as one (kernels/linear.c): tk::_linear_gelu
 * (x, weight, bias?) or tk::_linear_add (residual, x, weight, bias?); NULL when they do not fuse.
 * Both defs must be the process's built-ins. */
const tk_op_def *tk_linear_fused_def(const tk_op_def *linear, const tk_op_def *next);

/* The built-in that runs tk::_linear_gelu and the tk::_linear_add of its result (what the pairs
 * above make of linear, gelu, linear, add) as one fully fused MLP (kernels/mlp_ops.c): tk::_mlp
 * (residual, x, w1, b1?, w2, b2?, hidden), for dtype f16/bf16 and the widths its kernel takes
 * (tk_mlp_takes: x's last dim d 64 or 128, w1 [hidden, d]); NULL otherwise. */
const tk_op_def *tk_mlp_fused_def(const tk_op_def *first, const tk_op_def *second, tk_dtype dtype, int64_t d,
                                  int64_t hidden);

/* Whether tk::_mlp runs its kernel on ctx's device for every call that takes it (an sm_90 GPU,
 * TK_MLP_MIN_ROWS 0, the default): the executor's sessions there keep no hidden tensor for it. A
 * call the kernel still declines (a tensor not 16-byte aligned) runs the two linears through a
 * hidden tensor of the op's own, which a graph capture cannot make: its signature stays eager.
 * tk_mlp_env_reload reads TK_MLP_MIN_ROWS again (tests). */
int tk_mlp_kernel_only(tk_ctx *ctx);
void tk_mlp_env_reload(void);

/* Whether a node of layout built-in def (kernels/layout_ops.c), with its recorded arguments
 * (args: nargs values, scalars where the node has them) over an input of this concrete shape and
 * element size, gives a contiguous run of the input's bytes: 1 with the run's start in *offset
 * (bytes), so a session binds the output there and runs nothing; 0 for any other op or when the
 * node must copy. flatten and unflatten always; narrow when the dims before its dim are 1 or it
 * keeps the whole dim; permute and transpose when only dims of 1 move; expand when nothing grows.
 * With shape NULL: whether def is one of those ops at all. */
int tk_layout_view(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape, size_t es,
                   uint64_t *offset);
/* For a tk::narrow node over an input of this concrete shape: its output as a strided view of the
 * input's bytes, the input's row-major strides (elements) and the first element's offset (bytes):
 * 1, or 0 for any other op (with shape NULL: whether def is tk::narrow). */
int tk_layout_strided(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape, size_t es,
                      int64_t *strides, uint64_t *offset);
/* For a permute or transpose node over an input of this concrete shape: its output's strides in
 * the input's bytes (the input's row-major strides permuted), 1; 0 for any other op. */
int tk_layout_permuted(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape,
                       int64_t *strides);
/* Whether input i of built-in def takes a strided tensor of this shape and strides (elements)
 * without a copy (runtime/dispatch.c asks each op's rule below); with
 * shape NULL, whether it takes any. Dispatch lets such inputs through; the executor makes
 * transposes views for them. Every other op input is contiguous. */
int tk_op_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides);
/* The ops' own rules behind it: tk::matmul's b transposed (kernels/linear.c); tk::sdpa's q, k, v
 * with their last dim contiguous (kernels/attention_ops.c). */
int tk_matmul_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides);
int tk_sdpa_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides);

#endif
