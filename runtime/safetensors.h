/* safetensors (https://github.com/huggingface/safetensors), the weights format of tk_param and of
 * .tkprog files: what libtkrt and the tools add to the public reader and writer of
 * tk/safetensors.h. The entry's fields, a reader over a memory buffer and a writer into one.
 * Internal to libtkrt and the exporter.
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
#ifndef TK_RT_SAFETENSORS_H
#define TK_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <tk/runtime.h>
#include <tk/safetensors.h>

/* The header may not be larger than this (the reference implementation's limit). */
#define TK_SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

struct tk_safetensors_entry {
    const char *name;
    const char *dtype;    /* the file's dtype name: "F32", "BF16", "U8", ... */
    int supported;        /* 1 when dtype is one of F32 F16 BF16 I32 I64 */
    tk_dtype tk_dtype;    /* its tk_dtype when supported */
    size_t elem_size;
    int rank;
    int64_t shape[TK_MAX_DIMS];
    uint64_t begin, end;  /* data_offsets */
    const void *data;     /* the tensor's bytes inside the file or buffer (not aligned) */
};

/* Validates a safetensors image in memory, which the caller keeps alive and unchanged until
 * tk_safetensors_free. `name` (copied) names it in messages ("mlp.tkprog:weights.safetensors"). */
int tk_safetensors_parse(tk_safetensors **out, const void *data, size_t size, const char *name);

/* tk_safetensors_write into a malloc'd image (*out, *size), the caller's. */
int tk_safetensors_write_mem(void **out, size_t *size, size_t n, const char *const *names,
                             tk_tensor *const *tensors);

#endif
