/* cuBLASLt, loaded with dlopen at first use (runtime/cublaslt.c): the functions kernels/linear.c
 * calls, as a table of pointers; per GPU the handle and the cache of tk::linear's plans; per
 * context the workspace and the matmul descriptors. Types come from <cublasLt.h>
 * (TK_HAVE_CUDA_HEADERS is set by the build when the toolkit's headers are there); nothing links
 * libcublasLt. */
#ifndef TK_CUBLASLT_H
#define TK_CUBLASLT_H

#include <tk/op.h>

#ifdef TK_HAVE_CUDA_HEADERS
#include <cublasLt.h>

/* The resolved entry points; each has the signature of the cublasLt function of its name. */
typedef struct tk_cublaslt {
    cublasStatus_t (*Create)(cublasLtHandle_t *handle);
    cublasStatus_t (*Destroy)(cublasLtHandle_t handle);
    cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                       cudaDataType_t scale);
    cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t desc);
    cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                             const void *buf, size_t size);
    cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                         uint64_t cols, int64_t ld);
    cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t layout);
    cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                               const void *buf, size_t size);
    cublasStatus_t (*Matmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                             const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                             cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                             cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                             const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_size,
                             cudaStream_t stream);
    cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t *pref);
    cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref,
                                                   cublasLtMatmulPreferenceAttributes_t attr,
                                                   const void *buf, size_t size);
    cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref);
    cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                             cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                             cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                             cublasLtMatmulPreference_t pref, int requested,
                                             cublasLtMatmulHeuristicResult_t results[], int *returned);
    cublasStatus_t (*MatmulAlgoCheck)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                      cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                      cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                      const cublasLtMatmulAlgo_t *algo, cublasLtMatmulHeuristicResult_t *result);
    const char *(*GetStatusString)(cublasStatus_t status);
} tk_cublaslt;

/* A plan of tk::linear (kernels/linear.c), the value of an entry of the device's plan cache: for
 * one product shape the three matrix layouts (A, B, and D which serves as C too) and the
 * algorithm with its workspace need; an entry that records a size bucket's algorithm alone has no
 * layouts (NULL). The cache owns it and destroys the layouts when the entry goes. */
typedef struct tk_lt_plan {
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulHeuristicResult_t heur;
} tk_lt_plan;

/* Destroys a plan's layouts (leaving them NULL); frees a plan (NULL is ignored; arg unused: the
 * plan cache's free function). */
void tk_lt_plan_free_layouts(tk_lt_plan *p);
void tk_lt_plan_free(void *plan, void *arg);

/* What tk::linear counts per device, beside the cache's own hits and misses. */
typedef struct tk_lt_counters {
    _Atomic unsigned long long plan_hits;   /* a product's shape found in the cache */
    _Atomic unsigned long long plan_misses; /* not found: a plan made */
    _Atomic unsigned long long heuristics; /* cublasLtMatmulAlgoGetHeuristic queries */
    _Atomic unsigned long long checks;     /* cublasLtMatmulAlgoCheck calls */
    _Atomic unsigned long long reuses;     /* a bucket's algorithm accepted for another size */
    _Atomic unsigned long long fused_fallbacks; /* a fused form (tk::_linear_gelu, _add) run as two ops */
} tk_lt_counters;

/* Matmul descriptors of a context: tk::linear's one per dtype (f32, f16, bf16), bias or none,
 * GELU or none; tk::matmul's one per dtype, with b as it lies or b a transposed view. */
enum { TK_LT_NDESC = 18 };

/* What one context keeps for cuBLASLt: its own, because a context is used by one thread at a
 * time and its stream orders its work. The workspace (tk::linear's matmuls run one after another
 * on that stream, so they share it), made at the first use outside a CUDA graph capture; and the
 * matmul descriptors, since cuBLASLt reads the bias pointer from the descriptor: one shared by
 * threads would race on it. */
typedef struct tk_lt_ctx {
    void *workspace;
    size_t workspace_size;
    int workspace_done;                     /* tried (made, borrowed, or none to be had) */
    int workspace_borrowed;                 /* the stream owner's (tk_ctx.stream_owner): not freed here */
    cublasLtMatmulDesc_t desc[TK_LT_NDESC]; /* created on first need */
    const void *desc_bias[TK_LT_NDESC];     /* the bias pointer each holds now */
} tk_lt_ctx;

typedef struct tk_lt_cache tk_lt_cache;

/* What tk_cublaslt_get hands out: the table (process-wide), the device's handle, plan cache and
 * counters (shared by its contexts, thread-safe), and the context's own state. */
typedef struct tk_cublaslt_ref {
    const tk_cublaslt *api;
    cublasLtHandle_t handle;
    tk_lt_cache *plans;
    tk_lt_counters *counters;
    tk_lt_ctx *local;
} tk_cublaslt_ref;

/* The cuBLASLt of ctx's device, made on first use (handle, plan cache; kept for the life of the
 * process like the device's primary context), with that context current on the calling thread,
 * and ctx's own state, whose workspace is made here at the first call that is not under a CUDA
 * graph capture (until then local->workspace_size is 0). Queue work on tk_cuda_stream(ctx).
 * TK_EUNSUPPORTED on a CPU context; TK_EDEVICE when libcublasLt cannot be loaded ("no cuBLASLt:
 * ..." with the names tried) or the handle cannot be created. Thread-safe across contexts. */
int tk_cublaslt_get(tk_ctx *ctx, tk_cublaslt_ref *out);
/* Frees ctx's cuBLASLt state (after its stream finished): called by tk_cuda_ctx_release. */
void tk_cublaslt_ctx_release(tk_ctx *ctx);
#else
/* libtkrt built without the CUDA toolkit's headers: tk::linear fails on a GPU. */
typedef struct tk_cublaslt tk_cublaslt;
#endif

/* The plan cache of tk::linear on ctx's device and its counters, for tests and benchmarks:
 * plan_hits and plan_misses count lookups of exact shapes (a hit does no descriptor creation and
 * no heuristic query); heuristics the cublasLtMatmulAlgoGetHeuristic queries made; checks the
 * cublasLtMatmulAlgoCheck calls and reuses how many of them let a new size use the algorithm of
 * its power-of-two bucket; fused_fallbacks the calls of a fused form (tk::_linear_gelu,
 * tk::_linear_add) for which cuBLASLt had no algorithm, run as the two ops; entries and capacity
 * the cache's fill. TK_EDEVICE when cuBLASLt is not there. */
typedef struct tk_linear_stats {
    unsigned long long plan_hits, plan_misses, heuristics, checks, reuses, fused_fallbacks, adds, evictions;
    size_t entries, capacity;
} tk_linear_stats;
int tk_linear_stats_get(tk_ctx *ctx, tk_linear_stats *out);

#endif
