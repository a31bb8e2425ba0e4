/* safetensors (https://github.com/huggingface/safetensors), the weights format of tk_param and of
 * .tkprog files: a validating reader over a file (mapped read-only) or a memory buffer, and a
 * writer into a file or a buffer. Internal to libtkrt and the exporter.
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [64, 128], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * (optionally padded with spaces), then the data section; offsets are bytes relative to its
 * start. The reader refuses, with one line naming the file, the tensor and the fault: a file
 * shorter than its header, a header length over 100 MiB, JSON that does not parse, an unknown
 * dtype, a rank over 8, offsets outside the data section or not matching the shape, and tensors
 * whose bytes overlap. Dtypes that tk_dtype lacks (F64, U8, BOOL, I8, ...) are read and validated
 * but cannot be loaded as tensors. */
#ifndef TK_SAFETENSORS_H
#define TK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <tk/runtime.h>

/* The header may not be larger than this (the reference implementation's limit). */
#define TK_SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

typedef struct tk_safetensors_entry {
    const char *name;
    const char *dtype;    /* the file's dtype name: "F32", "BF16", "U8", ... */
    int supported;        /* 1 when dtype is one of F32 F16 BF16 I32 I64 */
    tk_dtype tk_dtype;    /* its tk_dtype when supported */
    size_t elem_size;
    int rank;
    int64_t shape[TK_MAX_DIMS];
    uint64_t begin, end;  /* data_offsets */
    const void *data;     /* the tensor's bytes inside the file or buffer (not aligned) */
} tk_safetensors_entry;

typedef struct tk_safetensors tk_safetensors;

/* Maps the file read-only and validates it. *out is freed with tk_safetensors_free; the entries'
 * data stays mapped until then. */
int tk_safetensors_open(tk_safetensors **out, const char *path);

/* Validates a safetensors image in memory, which the caller keeps alive and unchanged until
 * tk_safetensors_free. `name` (copied) names it in messages ("mlp.tkprog:weights.safetensors"). */
int tk_safetensors_parse(tk_safetensors **out, const void *data, size_t size, const char *name);

void tk_safetensors_free(tk_safetensors *st);

/* The path or name given at open or parse. */
const char *tk_safetensors_name(const tk_safetensors *st);

/* The tensors, sorted by name (byte order); "__metadata__" is not one of them. */
size_t tk_safetensors_count(const tk_safetensors *st);
const tk_safetensors_entry *tk_safetensors_at(const tk_safetensors *st, size_t i);
const tk_safetensors_entry *tk_safetensors_find(const tk_safetensors *st, const char *name);

/* A value of the header's "__metadata__" object, or NULL. */
const char *tk_safetensors_metadata(const tk_safetensors *st, const char *key);

/* A new tensor (the caller's) on dev holding a copy of the entry; ctx is needed for a GPU (NULL
 * is fine for the CPU). TK_EUNSUPPORTED for a dtype tk_dtype lacks. */
int tk_safetensors_load(tk_tensor **out, tk_ctx *ctx, tk_device dev, const tk_safetensors *st,
                        const tk_safetensors_entry *e);

/* Writes n CPU tensors under the given names (unique, not "__metadata__"): header keys sorted,
 * compact JSON padded with spaces so the data section starts 8-byte aligned, the data packed
 * without gaps (as the reference reader requires) ordered by element size, largest first, then
 * by name, so every tensor starts aligned to its element size. The bytes depend only on the
 * names and the tensors. The buffer form gives a malloc'd image (*out, *size), the caller's; the
 * file form writes through a temporary file and a rename. */
int tk_safetensors_write_mem(void **out, size_t *size, size_t n, const char *const *names,
                             tk_tensor *const *tensors);
int tk_safetensors_write(const char *path, size_t n, const char *const *names, tk_tensor *const *tensors);

#endif
