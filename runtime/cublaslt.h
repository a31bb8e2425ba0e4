/* cuBLASLt, loaded with dlopen at first use (runtime/cublaslt.c): the functions kernels/linear.c
 * calls, as a table of pointers. Types come from <cublasLt.h> (TK_HAVE_CUDA_HEADERS is set by the
 * build when the toolkit's headers are there); nothing links libcublasLt. */
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
    const char *(*GetStatusString)(cublasStatus_t status);
} tk_cublaslt;
#else
/* libtkrt built without the CUDA toolkit's headers: tk_cublaslt_get always fails. */
typedef struct tk_cublaslt tk_cublaslt;
#endif

/* The cuBLASLt table (*out, process-wide) and the cublasLtHandle_t of ctx's device (*handle,
 * created once per device, owned by the runtime), with the device's context current on the
 * calling thread. Queue work on tk_cuda_stream(ctx) (cast to cudaStream_t). TK_EUNSUPPORTED on
 * a CPU context; TK_EDEVICE when libcublasLt cannot be loaded ("no cuBLASLt: ..." with the names
 * tried) or the handle cannot be created. Thread-safe. */
int tk_cublaslt_get(tk_ctx *ctx, const tk_cublaslt **out, void **handle);

#endif
