/* What the runtime's files share: the tensor and context structs behind the opaque public types,
 * and the CUDA backend's interface. Included by runtime/ and kernels/ only. */
#ifndef TK_RT_INTERNAL_H
#define TK_RT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <tk/runtime.h>

typedef enum tk_mode { TK_MODE_EAGER } tk_mode;

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
};

struct tk_tensor_spec {
    tk_dtype dtype;
    int rank;
    int64_t shape[TK_MAX_DIMS];
    int set;
};

typedef struct tk_cuda_ctx tk_cuda_ctx; /* runtime/cuda.c: CUcontext, stream, module cache */

struct tk_ctx {
    tk_device device;
    tk_mode mode;
    tk_cuda_ctx *cuda; /* NULL on the CPU */
};

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
/* Looks kernel->name up in the registered fatbins (modules loaded on first use per device),
 * checks args against the kernel's parameters and launches on ctx's stream. */
int tk_cuda_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, int nargs, const tk_arg *args);

/* Fatbins embedded by tk_add_kernels (cmake/tkexport_kernels.cmake) register themselves from a
 * constructor, like ops. */
typedef struct tk_fatbin_node {
    const void *image;
    size_t size;
    const char *name; /* the target it was built for, for messages */
    struct tk_fatbin_node *next;
} tk_fatbin_node;

void tk_fatbin_register(tk_fatbin_node *node);
void tk_fatbin_unregister(tk_fatbin_node *node);
/* Calls fn on each registered fatbin, oldest first, with the registry locked, until fn returns
 * non-zero; returns that value (0 when every call returned 0). */
int tk_fatbin_foreach(int (*fn)(const tk_fatbin_node *node, void *arg), void *arg);
/* Bumped whenever a fatbin is unregistered, so caches of kernels found in fatbins know when to
 * look again. */
unsigned tk_fatbin_generation(void);

#endif
