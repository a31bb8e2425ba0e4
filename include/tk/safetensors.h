/* safetensors files (https://github.com/huggingface/safetensors), the weights format of PyTorch's
 * state_dicts, of tk_ctx_set_weights and of packages: open and validate one, list and find its
 * tensors, load one onto a device, and write CPU tensors into a new file.
 *
 * The reader maps the file read-only and refuses, with one line naming the file, the tensor and
 * the fault, a header that does not parse or lies (offsets outside the data or not matching the
 * shape, overlapping tensors, a rank over TK_MAX_DIMS). Tensors of dtypes tk_dtype lacks (F64,
 * U8, BOOL, ...) are listed but cannot be loaded. */
#ifndef TK_SAFETENSORS_H
#define TK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <tk/export.h>
#include <tk/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

/* An open file, and one tensor of it; both opaque. Entries belong to their file. */
typedef struct tk_safetensors tk_safetensors;
typedef struct tk_safetensors_entry tk_safetensors_entry;

/* Maps the file read-only and validates it; *out (the caller's, NULL on failure) is freed with
 * tk_safetensors_free. TK_EIO when it cannot be read, TK_EFORMAT when it is not valid. */
int tk_safetensors_open(tk_safetensors **out, const char *path);
/* Unmaps the file; entries found in it are gone with it. Accepts NULL. */
void tk_safetensors_free(tk_safetensors *st);

/* The path given to tk_safetensors_open. */
const char *tk_safetensors_name(const tk_safetensors *st);

/* The tensors, sorted by name (byte order): tensor i for i < count, NULL past the end. */
size_t tk_safetensors_count(const tk_safetensors *st);
const tk_safetensors_entry *tk_safetensors_at(const tk_safetensors *st, size_t i);
/* The tensor called name ("linear1.weight"), or NULL with TK_ENOTFOUND set. */
const tk_safetensors_entry *tk_safetensors_find(const tk_safetensors *st, const char *name);

/* A string of the header's "__metadata__" object, or NULL. */
const char *tk_safetensors_metadata(const tk_safetensors *st, const char *key);

/* The tensor's name. */
const char *tk_safetensors_entry_name(const tk_safetensors_entry *e);
/* The tensor's dtype, rank and shape (rank values; TK_MAX_DIMS is room for any), each pointer
 * NULL when not wanted. TK_EUNSUPPORTED, naming the file's dtype, for a dtype tk_dtype lacks;
 * rank and shape are filled in all the same. */
int tk_safetensors_entry_info(const tk_safetensors_entry *e, tk_dtype *dtype, int *rank, int64_t *shape);

/* A new tensor on dev (the caller's, NULL on failure) holding a copy of entry e of st; ctx is
 * needed for a GPU (NULL is fine for the CPU). TK_EUNSUPPORTED for a dtype tk_dtype lacks. */
int tk_safetensors_load(tk_tensor **out, tk_ctx *ctx, tk_device dev, const tk_safetensors *st,
                        const tk_safetensors_entry *e);

/* Writes n CPU tensors under the given names (unique, not "__metadata__") into path, through a
 * temporary file and a rename. The bytes depend only on the names and the tensors: compact JSON
 * with sorted keys, padded with spaces so that the data starts 8-byte aligned, then the data
 * packed without gaps, largest element size first, then by name (each tensor aligned to its
 * element size). */
int tk_safetensors_write(const char *path, size_t n, const char *const *names, tk_tensor *const *tensors);

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
