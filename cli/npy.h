/* NumPy's .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html), the
 * tensors of `tkexport run`'s command line: a reader into CPU tensors and an atomic writer.
 *
 * The format: the magic "\x93NUMPY", a major and a minor version byte, the header's length (2
 * bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), the header (a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 128), }, padded with spaces, ending in a
 * newline), then the elements in C order, without gaps.
 *
 * The reader takes versions 1.0, 2.0 and 3.0 with descr '<f4', '<f2', '<i4' or '<i8' ('|'
 * instead of '<' is not a byte order numpy writes for them) in C order, rank 0 to TK_MAX_DIMS.
 * It refuses, with one line naming the file and the fault (TK_EINVAL): a bad magic or version,
 * a header longer than TK_NPY_MAX_HEADER or than the file, a header that is not such a dict
 * (missing, unknown or repeated keys), fortran_order True, big-endian or other dtypes (objects,
 * structured arrays, float64, ...), a rank over TK_MAX_DIMS, shapes whose byte count overflows,
 * and a data section shorter (truncated) or longer than the shape says. */
#ifndef TK_CLI_NPY_H
#define TK_CLI_NPY_H

#include <stddef.h>
#include <tk/runtime.h>

/* numpy itself reads headers up to 10000 bytes by default (max_header_size); ours are far
 * smaller: a rank-8 shape fits in 200 bytes. */
#define TK_NPY_MAX_HEADER 10000u

/* What a .npy file declares: the element type as tk_dtype, and the shape. */
typedef struct tk_npy_info {
    tk_dtype dtype; /* TK_F32 for '<f4', TK_F16 '<f2', TK_I32 '<i4', TK_I64 '<i8' */
    int rank;
    int64_t shape[TK_MAX_DIMS];
    int major, minor;   /* the format version */
    size_t data_offset; /* where the elements start */
} tk_npy_info;

/* Reads the header of path into *info and checks the file's size against it; nothing else is
 * read. Errors as above (TK_EIO when the file cannot be read). */
int tk_npy_read_info(tk_npy_info *info, const char *path);

/* Reads path into a new CPU tensor (*out, the caller's) of dtype `want`, converting: float32 and
 * float16 files to f32, f16 or bf16 (rounding to nearest even, as tk/half.h does), int32 and
 * int64 files to i32 or i64 (an int64 value outside int32's range is an error naming its
 * index). Floats are not read into integer tensors nor integers into float ones (TK_EINVAL).
 * want NULL keeps the file's dtype. *out is NULL on failure. */
int tk_npy_read(tk_tensor **out, const char *path, const tk_dtype *want);

/* The .npy image of a CPU tensor (version 1.0, C order): f32, i32 and i64 as they are; f16 and
 * bf16 widened (exactly) to '<f4', which every numpy reads. *out is malloc'd, the caller's.
 * TK_EINVAL for a tensor that is not on the CPU. */
int tk_npy_encode(void **out, size_t *len, const tk_tensor *t);

/* tk_npy_encode written to path through a temporary file and a rename. */
int tk_npy_write(const char *path, const tk_tensor *t);

#endif
