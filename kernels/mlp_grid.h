/* The fused MLP kernel's shapes (kernels/mlp.cu), in one place for the kernel, the op that
 * launches it (mlp_ops.c) and the executor's fusion (runtime/exec.c, through tk_mlp_fused_def).
 *
 * Clusters of two blocks of two warpgroups (256 threads), one block an SM; each block keeps half
 * of the hidden units' weights in shared memory (H / 2 rows of w1 and columns of w2: 2 H D bytes)
 * and their b1 (H bytes); each warpgroup two tiles of 64 rows of x (256 D bytes) and
 * the exchange buffer of its peer's partial sums (64 rows by D / 2 floats: 128 D bytes) and two
 * mbarriers (16 bytes); b2 (2 D bytes); with 1 KiB to align them to 1024 bytes: TK_MLP_DYNAMIC
 * bytes of dynamic shared memory, launched by tk_wrap_shared (D 128, H 512: 226 KiB). */
#ifndef TK_MLP_GRID_H
#define TK_MLP_GRID_H

#define TK_MLP_THREADS 256
#define TK_MLP_DYNAMIC(d, h) (2 * (h) * (d) + 768 * (d) + (h) + 32 + 2 * (d) + 1024)

/* Fewer rows than this run as the two linears (mlp_ops.c: min_rows). None: since a launch of few
 * tiles runs them on one warpgroup a block (the spread form, mlp.cu), the kernel is faster than the
 * cuBLASLt pair at every row count from 1 (H200, 2026-11-26, run125: 11.0-12.2 us a call against 11.9-14.7
 * from 1 to 1152 rows; bench/serving/JOURNAL.md). The environment's TK_MLP_MIN_ROWS moves it. */
#define TK_MLP_MIN_ROWS 0

/* What an SM of sm_90 gives a block at most (227 KiB): the widths the kernel takes must fit. */
#define TK_MLP_SHARED_MAX 232448

/* The widths the kernel takes: x's last dim d (the MLP's input and output) 64 or 128, and a
 * hidden layer of a multiple of 128 units, at least 256 (two chunks of 64 a block: the kernel's
 * chain of products starts with two), whose weights fit the shared memory (D 128: H up to 512;
 * D 64: up to 1408). */
static inline int tk_mlp_takes(long long d, long long hidden)
{
    return (d == 64 || d == 128) && hidden >= 256 && hidden % 128 == 0 &&
           TK_MLP_DYNAMIC(d, hidden) <= TK_MLP_SHARED_MAX;
}

#endif
