/* The runtime a program links (libtkrt): devices, contexts, tensors, the op registry and eager
 * calls. Package loading joins it with the package-runtime issue. No CUDA type appears here:
 * the CUDA driver is loaded with dlopen at first GPU use. */
#ifndef TK_RUNTIME_H
#define TK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <tk/error.h>
#include <tk/op.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TK_MAX_DIMS 8

typedef enum tk_device_kind { TK_DEVICE_CPU, TK_DEVICE_CUDA } tk_device_kind;

typedef struct tk_device {
    tk_device_kind kind;
    int index; /* the GPU ordinal for TK_DEVICE_CUDA, 0 for the CPU */
} tk_device;

/* "cpu", "cuda" (= cuda:0) or "cuda:N". TK_EINVAL with a message for anything else. */
int tk_device_parse(tk_device *out, const char *text);
/* "cpu" or "cuda:N" into buf (at least 16 bytes); returns buf. */
const char *tk_device_name(tk_device dev, char *buf, size_t n);

/* 0 when the CUDA driver loaded and has at least one device; otherwise TK_EDEVICE with the
 * reason ("no CUDA driver: ...") in tk_error_last(). Never aborts. */
int tk_cuda_available(void);

/* Element size in bytes, and the short name ("f32", "f16", "bf16", "i32", "i64"). */
size_t tk_dtype_size(tk_dtype dtype);
const char *tk_dtype_name(tk_dtype dtype);
/* Parses a short name; TK_EINVAL for an unknown one. */
int tk_dtype_parse(tk_dtype *out, const char *name);

/* --- contexts ---------------------------------------------------------------------------- */

/* A context: device, stream (its own, on a GPU), mode (eager) and the last error of calls made
 * through it. One context is used by one thread at a time; contexts of one device may run in
 * parallel from different threads. */
int tk_ctx_new(tk_ctx **out, tk_device dev);
void tk_ctx_free(tk_ctx *ctx);
tk_device tk_ctx_device(const tk_ctx *ctx);
/* Waits for everything queued on the context's stream. */
int tk_ctx_sync(tk_ctx *ctx);

/* --- tensors ----------------------------------------------------------------------------- */

/* A new contiguous tensor on dev (owned storage, uninitialized; host storage is 64-byte aligned).
 * rank 0..8, dims >= 0; TK_EINVAL for a bad shape or a byte count that overflows. A tensor on a
 * GPU needs ctx on that GPU (ctx may be NULL for the CPU) and must be freed before ctx is. */
int tk_tensor_new(tk_tensor **out, tk_ctx *ctx, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape);
/* A tensor over memory the caller owns (host memory for the CPU, a device pointer for a GPU);
 * tk_tensor_free leaves that memory alone. */
int tk_tensor_wrap(tk_tensor **out, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, void *data);
void tk_tensor_free(tk_tensor *t);

tk_device tk_tensor_device(const tk_tensor *t);
const int64_t *tk_tensor_shape(const tk_tensor *t);
size_t tk_tensor_nbytes(const tk_tensor *t);

/* Copies src into dst (same dtype and element count; any devices), on ctx's stream, and waits
 * when either side is host memory. */
int tk_tensor_copy(tk_ctx *ctx, tk_tensor *dst, const tk_tensor *src);

/* --- ops --------------------------------------------------------------------------------- */

/* The registered ops (those of the executable and of every loaded shared object). The pointer
 * stays valid while the object that defines the op is loaded. */
size_t tk_op_count(void);
const tk_op_def *tk_op_at(size_t i);
const tk_op_def *tk_op_find(const char *name);

/* Loads a shared object (dlopen) and with it the ops (and tk_add_kernels fatbins) it defines;
 * *handle for tk_ops_unload. TK_EIO with dlerror()'s words when it cannot be loaded. Unloading
 * removes them again: nothing of the object may be running or in use then. An op name defined
 * twice keeps its first definition (with a warning on stderr). */
int tk_ops_load(void **handle, const char *path);
void tk_ops_unload(void *handle);

/* Runs op `name` on ctx's device: the op's body on a GPU, its CPU fallback on the CPU. out has
 * nout slots; NULL slots are allocated on ctx's device from the op's meta function (the caller
 * frees them). The numbers of inputs and outputs must match the op's schema. */
int tk_op_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int nout);

#ifdef __cplusplus
}
#endif
#endif
