/* Layout built-ins. Called eagerly each copies into a new contiguous tensor; in a session
 * (runtime/exec.c) a node whose output is a contiguous run of its input's bytes is a view of them
 * and copies nothing (tk_layout_view):
 *   tk::permute    (Tensor x, int[] dims) -> Tensor                 x.permute(dims)
 *   tk::transpose  (Tensor x, int dim0, int dim1) -> Tensor         x.transpose(dim0, dim1)
 *   tk::narrow     (Tensor x, int dim, int start, int length) -> Tensor   x.narrow(...)
 *   tk::flatten    (Tensor x, int start_dim=0, int end_dim=-1) -> Tensor  x.flatten(...)
 *   tk::unflatten  (Tensor x, int dim, int[] sizes) -> Tensor       x.unflatten(dim, sizes)
 *   tk::reshape    (Tensor x, int[] shape) -> Tensor                x.reshape(shape), x.view(shape)
 *   tk::cat        (Tensor a, Tensor b, int dim=0) -> Tensor         torch.cat([a, b], dim)
 *   tk::expand     (Tensor x, int[] sizes) -> Tensor                x.expand(sizes)
 * and tk_split (x.split(sizes, dim)), one tk::narrow per part. Any dtype; negative dims count from the end. narrow and cat are 2-D copies of rows (tk_copy2d_*:
 * 16-byte vectors when every row, pitch and offset allows); permute, transpose and expand (a
 * stride of 0 where a dim of 1 grows) run the strided copy of layout.cu (CPU: tk_ref_strided_copy); flatten and unflatten keep the bytes in order and copy
 * them as they are. Dynamic dims keep their symbols: narrow's length and start are static,
 * flatten multiplies the dims ("batch*seq" when two are dynamic), unflatten may split a dynamic
 * dim into static sizes and one -1 (a divisibility requirement). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "ref.h"
#include "rt_internal.h"

TK_KERNEL_DECL(tk_strided_copy_b2);
TK_KERNEL_DECL(tk_strided_copy_b4);
TK_KERNEL_DECL(tk_strided_copy_b8);
TK_KERNEL_DECL(tk_strided_rows_v16);
TK_KERNEL_DECL(tk_copy2d_b2);
TK_KERNEL_DECL(tk_copy2d_b4);
TK_KERNEL_DECL(tk_copy2d_b8);
TK_KERNEL_DECL(tk_copy2d_v16);
TK_KERNEL_DECL(tk_copy2d_dense_b2);
TK_KERNEL_DECL(tk_copy2d_dense_b4);
TK_KERNEL_DECL(tk_copy2d_dense_b8);

/* nrows rows of width elements (es bytes) from x (row pitch sp, first at so) into y (pitch dp,
 * first at dst0), all in elements: memcpy per row on the CPU; on a GPU tk_copy2d_v16 when every
 * offset and pitch is whole 16-byte vectors, tk_copy2d_dense_* when y is dense from its aligned
 * start (vectors written whole, gathered element by element), else the element's size. */
static int copy2d(tk_ctx *ctx, const tk_tensor *x, tk_tensor *y, size_t es, int64_t nrows, int64_t width, int64_t sp,
                  int64_t so, int64_t dp, int64_t dst0)
{
    const char *xp = tk_tensor_data(x);
    char *yp = tk_tensor_data(y);
    if (nrows * width == 0)
        return 0;
    if (tk_tensor_device(x).kind != TK_DEVICE_CUDA) {
        for (int64_t r = 0; r < nrows; r++)
            memcpy(yp + (size_t)(dst0 + r * dp) * es, xp + (size_t)(so + r * sp) * es, (size_t)width * es);
        return 0;
    }
    /* k elements a 16-byte vector: every count and offset a multiple of k, both pointers aligned */
    int64_t k = 16 / (int64_t)es;
    if ((((uintptr_t)xp | (uintptr_t)yp) & 15u) || width % k || sp % k || so % k || dp % k || dst0 % k)
        k = 1;
    if (k == 1 && dp == width && dst0 == 0 && !((uintptr_t)yp & 15u)) {
        const tk_kernel *dense = es == 2 ? tk_copy2d_dense_b2 : es == 4 ? tk_copy2d_dense_b4 : tk_copy2d_dense_b8;
        int64_t blocks = tk_cdiv(tk_cdiv(nrows * width, 16 / (int64_t)es), 256);
        if (blocks > 65535 * 8)
            blocks = 65535 * 8;
        return tk_wrap(ctx, dense, TK_DIM3(blocks), TK_DIM3(256), x, y, (long long)(nrows * width), (long long)width,
                       (long long)sp, (long long)so);
    }
    const tk_kernel *kern = k > 1 ? tk_copy2d_v16 : es == 2 ? tk_copy2d_b2 : es == 4 ? tk_copy2d_b4 : tk_copy2d_b8;
    int64_t blocks = tk_cdiv(nrows * (width / k), 256);
    if (blocks > 65535 * 8)
        blocks = 65535 * 8;
    return tk_wrap(ctx, kern, TK_DIM3(blocks), TK_DIM3(256), x, y, (long long)nrows, (long long)(width / k),
                   (long long)(sp / k), (long long)(so / k), (long long)(dp / k), (long long)(dst0 / k));
}

/* outer: the product of x's dims before d; inner: after it */
static void around(const tk_tensor *x, int d, int64_t *outer, int64_t *inner)
{
    *outer = 1, *inner = 1;
    for (int i = 0; i < tk_tensor_rank(x); i++) {
        if (i < d)
            *outer *= tk_tensor_dim(x, i);
        else if (i > d)
            *inner *= tk_tensor_dim(x, i);
    }
}

/* A dim index of a rank-r tensor: -r..r-1 into 0..r-1 (extra: one past the end allowed). */
static int norm_dim(const char *op, const char *what, int64_t d, int rank, int extra, int *out)
{
    int top = rank + extra;
    if (d < -top || d >= top)
        return tk_error_set(TK_EINVAL, "op '%s': %s is %lld, outside [%d, %d] for x of rank %d", op, what,
                            (long long)d, -top, top - 1, rank);
    *out = (int)(d < 0 ? d + top : d);
    return 0;
}

/* The permutation of permute (dims: n entries) or transpose (dims NULL: d0 and d1 swapped). */
static int perm_from(const char *op, int rank, int64_t d0, int64_t d1, const int64_t *dims, int64_t n, int *perm)
{
    int err = 0;
    if (!dims) {
        int a = 0, b = 0;
        if ((err = norm_dim(op, "dim0", d0, rank, 0, &a)) || (err = norm_dim(op, "dim1", d1, rank, 0, &b)))
            return err;
        for (int d = 0; d < rank; d++)
            perm[d] = d;
        perm[a] = b, perm[b] = a;
        return 0;
    }
    unsigned seen = 0;
    if (n != rank)
        return tk_error_set(TK_EINVAL, "op 'tk::permute': dims has %lld entries, x has rank %d", (long long)n, rank);
    for (int d = 0; d < rank; d++) {
        if ((err = norm_dim(op, "a dim of dims", dims[d], rank, 0, &perm[d])))
            return err;
        if (seen & (1u << perm[d]))
            return tk_error_set(TK_EINVAL, "op 'tk::permute': dims names dim %d twice", perm[d]);
        seen |= 1u << perm[d];
    }
    return 0;
}

/* The permutation of permute (or transpose) from the call's arguments. */
static int perm_of(tk_ctx *ctx, const char *op, const tk_tensor *x, int *perm)
{
    int64_t n = 0;
    if (!strcmp(op, "tk::transpose"))
        return perm_from(op, tk_tensor_rank(x), tk_arg_int(ctx, 1), tk_arg_int(ctx, 2), NULL, 0, perm);
    const int64_t *dims = tk_arg_ints(ctx, 1, &n);
    return perm_from(op, tk_tensor_rank(x), 0, 0, dims, n, perm);
}

/* expand's output dims (as tk::expand's sizes say: -1 keeps x's dim, a dim of 1 grows, new
 * leading dims come first) and, for each, the dim of x it reads (-1: a new leading dim) or
 * whether it broadcasts. Symbolic dims: a size against a dynamic dim becomes a requirement. */
static int expand_of(tk_ctx *ctx, const tk_tensor *x, int *rank_out, tk_sym *shape, int *bcast)
{
    int64_t n = 0;
    const int64_t *sizes = tk_arg_ints(ctx, 1, &n);
    int rank = tk_tensor_rank(x), err;
    if (n < rank || n > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "op 'tk::expand': sizes has %lld entries, x has rank %d (expected %d to %d)",
                            (long long)n, rank, rank, TK_MAX_DIMS);
    for (int i = 0; i < (int)n; i++) {
        int j = i - ((int)n - rank); /* x's dim, or negative for a new leading dim */
        int64_t want = sizes[i];
        if (j < 0) {
            if (want < 0)
                return tk_error_set(TK_EINVAL, "op 'tk::expand': size %lld for new leading dim %d (expected >= 0)",
                                    (long long)want, i);
            shape[i] = TK_SYM(want), bcast[i] = 1;
            continue;
        }
        tk_sym have = tk_tensor_sym(x, j);
        bcast[i] = 0;
        if (want == -1 || (tk_sym_is_const(have) && have.value == want)) {
            shape[i] = have;
        } else if (tk_sym_is_const(have) && have.value == 1 && want >= 0) {
            shape[i] = TK_SYM(want), bcast[i] = 1;
        } else if (!tk_sym_is_const(have) && want >= 0) {
            char what[64];
            snprintf(what, sizeof what, "x dim %d == expand's size %lld", j, (long long)want);
            if ((err = tk_require_eq(ctx, have, TK_SYM(want), what)))
                return err;
            shape[i] = TK_SYM(want);
        } else {
            return tk_error_set(TK_EINVAL, "op 'tk::expand': x dim %d is %lld, which cannot become %lld (only dims of "
                                "size 1 expand; -1 keeps a dim)", j, (long long)have.value, (long long)want);
        }
    }
    *rank_out = (int)n;
    return 0;
}

/* The strided view of x that permute, transpose and expand copy: out dims and their strides in
 * x, in elements (0 where expand broadcasts). Concrete shapes (eager or a session). */
static int view_of(tk_ctx *ctx, const char *op, const tk_tensor *x, int64_t *dims, int64_t *st, int *rank_out)
{
    int rank = tk_tensor_rank(x), perm[TK_MAX_DIMS], err;
    int64_t in_st[TK_MAX_DIMS], s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        in_st[d] = s;
        s *= tk_tensor_dim(x, d);
    }
    *rank_out = rank;
    if (!strcmp(op, "tk::expand")) {
        tk_sym shape[TK_MAX_DIMS];
        int bcast[TK_MAX_DIMS], n;
        if ((err = expand_of(ctx, x, &n, shape, bcast)))
            return err;
        for (int i = 0; i < n; i++) {
            dims[i] = shape[i].value;
            st[i] = bcast[i] ? 0 : in_st[i - (n - rank)];
        }
        *rank_out = n;
        return 0;
    }
    if ((err = perm_of(ctx, op, x, perm)))
        return err;
    for (int d = 0; d < rank; d++)
        dims[d] = tk_tensor_dim(x, perm[d]), st[d] = in_st[perm[d]];
    return 0;
}

static int view_meta(tk_ctx *ctx, const char *op, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    const tk_tensor *x = in[0];
    int rank = tk_tensor_rank(x), perm[TK_MAX_DIMS], err;
    tk_sym shape[TK_MAX_DIMS];
    if (!strcmp(op, "tk::narrow")) {
        int dim = 0;
        int64_t start = tk_arg_int(ctx, 2), len = tk_arg_int(ctx, 3);
        if ((err = norm_dim(op, "dim", tk_arg_int(ctx, 1), rank, 0, &dim)))
            return err;
        if (start < 0 || len < 0)
            return tk_error_set(TK_EINVAL, "op 'tk::narrow': start %lld and length %lld must be >= 0", (long long)start,
                                (long long)len);
        char what[96];
        snprintf(what, sizeof what, "x dim %d >= narrow's start + length (%lld)", dim, (long long)(start + len));
        if ((err = tk_require_range(ctx, tk_tensor_sym(x, dim), start + len, INT64_MAX / 4, what)))
            return err;
        for (int d = 0; d < rank; d++)
            shape[d] = tk_tensor_sym(x, d);
        shape[dim] = TK_SYM(len);
        return tk_spec_set_sym(out[0], tk_tensor_dtype(x), rank, shape);
    }
    if (!strcmp(op, "tk::expand")) {
        int bcast[TK_MAX_DIMS], n;
        err = expand_of(ctx, x, &n, shape, bcast);
        return err ? err : tk_spec_set_sym(out[0], tk_tensor_dtype(x), n, shape);
    }
    if ((err = perm_of(ctx, op, x, perm)))
        return err;
    for (int d = 0; d < rank; d++)
        shape[d] = tk_tensor_sym(x, perm[d]);
    return tk_spec_set_sym(out[0], tk_tensor_dtype(x), rank, shape);
}

/* narrow: the rows of x as [outer, dim * inner], a window of each: a 2-D copy */
static int narrow_run(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int dim = 0, err = norm_dim("tk::narrow", "dim", tk_arg_int(ctx, 1), tk_tensor_rank(in[0]), 0, &dim);
    int64_t outer, inner, start = tk_arg_int(ctx, 2), len = tk_arg_int(ctx, 3), full = tk_tensor_dim(in[0], dim);
    if (err)
        return err;
    if (start < 0 || len < 0 || start + len > full)
        return tk_error_set(TK_EINVAL, "op 'tk::narrow': start %lld + length %lld is past dim %d's %lld",
                            (long long)start, (long long)len, dim, (long long)full);
    around(in[0], dim, &outer, &inner);
    return copy2d(ctx, in[0], out[0], tk_dtype_size(tk_tensor_dtype(in[0])), outer, len * inner, full * inner,
                  start * inner, len * inner, 0);
}

/* permute, transpose and expand: the strided view of x copied */
static int view_run(tk_ctx *ctx, const char *op, tk_tensor *const *in, tk_tensor *const *out)
{
    int64_t dims[TK_MAX_DIMS] = {0}, st[TK_MAX_DIMS] = {0};
    int rank = 0, err = view_of(ctx, op, in[0], dims, st, &rank);
    size_t es = tk_dtype_size(tk_tensor_dtype(in[0]));
    int64_t n = tk_numel(out[0]);
    if (err)
        return err;
    if (tk_tensor_device(in[0]).kind != TK_DEVICE_CUDA)
        return tk_ref_strided_copy(es, tk_tensor_data(in[0]), tk_tensor_data(out[0]), rank, dims, st);
    if (n == 0)
        return 0;
    /* the last dim contiguous in x, rows whole 16-byte vectors: the row kernel */
    int rows_ok = rank >= 1 && st[rank - 1] == 1 && ((uintptr_t)tk_tensor_data(in[0]) & 15u) == 0 &&
                  ((uintptr_t)tk_tensor_data(out[0]) & 15u) == 0 && (dims[rank - 1] * (int64_t)es) % 16 == 0;
    for (int d = 0; d < rank - 1 && rows_ok; d++)
        rows_ok = (st[d] * (int64_t)es) % 16 == 0;
    if (rows_ok) {
        long long D[7] = {1, 1, 1, 1, 1, 1, 1}, S[7] = {0, 0, 0, 0, 0, 0, 0};
        for (int d = 0; d < rank - 1; d++)
            D[d] = (long long)dims[d], S[d] = (long long)(st[d] * (int64_t)es);
        long long nvec = (long long)(dims[rank - 1] * (int64_t)es / 16), nrows = (long long)(n / dims[rank - 1]);
        int64_t vblocks = tk_cdiv(nrows * nvec, 256);
        if (vblocks > 65535 * 8)
            vblocks = 65535 * 8;
        if (nrows * nvec == 0)
            return 0;
        return tk_wrap(ctx, tk_strided_rows_v16, TK_DIM3(vblocks), TK_DIM3(256), in[0], out[0], nrows, nvec, rank - 1,
                       D[0], D[1], D[2], D[3], D[4], D[5], D[6], S[0], S[1], S[2], S[3], S[4], S[5], S[6]);
    }
    for (int d = rank; d < TK_MAX_DIMS; d++)
        dims[d] = 1, st[d] = 0;
    const tk_kernel *k = es == 2 ? tk_strided_copy_b2 : es == 4 ? tk_strided_copy_b4 : tk_strided_copy_b8;
    int64_t blocks = tk_cdiv(n, 256);
    if (blocks > 65535 * 8)
        blocks = 65535 * 8;
    long long D[8], S[8];
    for (int d = 0; d < 8; d++)
        D[d] = (long long)dims[d], S[d] = (long long)st[d];
    return tk_wrap(ctx, k, TK_DIM3(blocks), TK_DIM3(256), in[0], out[0], (long long)n, rank, D[0], D[1], D[2], D[3],
                   D[4], D[5], D[6], D[7], S[0], S[1], S[2], S[3], S[4], S[5], S[6], S[7]);
}

/* copies read x once and write y once */
static int layout_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    (void)in;
    cost->flops = 0;
    cost->bytes = 2.0 * (double)tk_tensor_nbytes(out[0]);
    return 0;
}

/* --- flatten and unflatten: the same bytes under another shape ---------------------------------- */

/* The sizes of unflatten or reshape (arg: the argument's name) for whole (what: how messages name
 * it, "x dim 2"): static, at most one -1, inferred as whole // the others' product (whole must
 * divide; a requirement), else their product must be whole; into out[0..n-1]. */
static int sizes_of(tk_ctx *ctx, const char *op, const char *arg, tk_sym whole, const char *what,
                    const int64_t *sizes, int n, tk_sym *out)
{
    int infer = -1, err;
    int64_t known = 1;
    char req[160];
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1 && infer < 0)
            infer = i;
        else if (sizes[i] < 0)
            return tk_error_set(TK_EINVAL, "op 'tk::%s': %s[%d] is %lld (sizes are >= 0, one may be -1)", op, arg, i,
                                (long long)sizes[i]);
        else
            known *= sizes[i];
        out[i] = TK_SYM(sizes[i]);
    }
    if (infer >= 0) {
        if (known == 0)
            return tk_error_set(TK_EINVAL, "op 'tk::%s': a -1 beside a size of 0 cannot be inferred", op);
        snprintf(req, sizeof req, "%s divisible by %lld (%s's %s)", what, (long long)known, op, arg);
        if ((err = tk_require_divisible(ctx, whole, known, req)))
            return err;
        out[infer] = tk_sym_floordiv(ctx, whole, known);
        return 0;
    }
    snprintf(req, sizeof req, "%s == %lld (the product of %s's %s)", what, (long long)known, op, arg);
    return tk_require_eq(ctx, whole, TK_SYM(known), req);
}

/* tk::reshape: x's elements in order under shape (static sizes, at most one -1, inferred from x's
 * element count: "batch*seq" for [batch, seq, 768] to [-1, 768]; a divisibility requirement). */
static int reshape_to(tk_ctx *ctx, const tk_tensor *x, tk_tensor_spec *const *out)
{
    int64_t n = 0;
    const int64_t *sizes = tk_arg_ints(ctx, 1, &n);
    tk_sym shape[TK_MAX_DIMS], numel = TK_SYM(1);
    int err;
    if (n > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "op 'tk::reshape': shape has %lld entries (at most %d)", (long long)n,
                            TK_MAX_DIMS);
    for (int d = 0; d < tk_tensor_rank(x); d++)
        numel = tk_sym_mul_sym(ctx, numel, tk_tensor_sym(x, d));
    if ((err = sizes_of(ctx, "reshape", "shape", numel, "x's element count", sizes, (int)n, shape)))
        return err;
    return tk_spec_set_sym(out[0], tk_tensor_dtype(x), (int)n, shape);
}

static int regroup_meta(tk_ctx *ctx, const char *op, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    const tk_tensor *x = in[0];
    int rank = tk_tensor_rank(x), err, r = 0;
    tk_sym shape[TK_MAX_DIMS];
    if (!strcmp(op, "tk::flatten")) {
        int a = 0, b = 0;
        if ((err = norm_dim(op, "start_dim", tk_arg_int(ctx, 1), rank ? rank : 1, 0, &a)) ||
            (err = norm_dim(op, "end_dim", tk_arg_int(ctx, 2), rank ? rank : 1, 0, &b)))
            return err;
        if (a > b)
            return tk_error_set(TK_EINVAL, "op 'tk::flatten': start_dim %d is after end_dim %d", a, b);
        tk_sym prod = TK_SYM(1);
        for (int d = a; d <= b && d < rank; d++)
            prod = tk_sym_mul_sym(ctx, prod, tk_tensor_sym(x, d));
        if (tk_sym_is_const(prod) && prod.value < 0)
            return tk_error_set(TK_EINVAL, "op 'tk::flatten': dims %d to %d: %s", a, b, tk_error_last());
        for (int d = 0; d < a; d++)
            shape[r++] = tk_tensor_sym(x, d);
        shape[r++] = prod;
        for (int d = b + 1; d < rank; d++)
            shape[r++] = tk_tensor_sym(x, d);
        return tk_spec_set_sym(out[0], tk_tensor_dtype(x), r, shape);
    }
    if (!strcmp(op, "tk::reshape"))
        return reshape_to(ctx, x, out);
    int dim = 0;
    int64_t n = 0;
    const int64_t *sizes = tk_arg_ints(ctx, 2, &n);
    tk_sym parts[TK_MAX_DIMS];
    char what[32];
    if ((err = norm_dim(op, "dim", tk_arg_int(ctx, 1), rank, 0, &dim)))
        return err;
    if (n < 1 || rank - 1 + n > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "op 'tk::unflatten': sizes has %lld entries (1 to %d for x of rank %d)",
                            (long long)n, TK_MAX_DIMS - rank + 1, rank);
    snprintf(what, sizeof what, "x dim %d", dim);
    if ((err = sizes_of(ctx, "unflatten", "sizes", tk_tensor_sym(x, dim), what, sizes, (int)n, parts)))
        return err;
    for (int d = 0; d < dim; d++)
        shape[r++] = tk_tensor_sym(x, d);
    for (int i = 0; i < n; i++)
        shape[r++] = parts[i];
    for (int d = dim + 1; d < rank; d++)
        shape[r++] = tk_tensor_sym(x, d);
    return tk_spec_set_sym(out[0], tk_tensor_dtype(x), r, shape);
}

static int reshape_run(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    if (tk_numel(in[0]) != tk_numel(out[0]) || tk_tensor_dtype(in[0]) != tk_tensor_dtype(out[0]))
        return tk_error_set(TK_EINTERNAL, "reshape: %lld elements into %lld", (long long)tk_numel(in[0]),
                            (long long)tk_numel(out[0]));
    if (tk_tensor_device(in[0]).kind != TK_DEVICE_CUDA) {
        memcpy(tk_tensor_data(out[0]), tk_tensor_data(in[0]), tk_tensor_nbytes(in[0]));
        return 0;
    }
    tk_tensor *v = NULL; /* x's bytes under y's shape, copied as a whole */
    int err = tk_tensor_wrap(&v, tk_tensor_device(in[0]), tk_tensor_dtype(in[0]), tk_tensor_rank(out[0]),
                             tk_tensor_shape(out[0]), tk_tensor_data(in[0]));
    if (!err)
        err = tk_tensor_copy(ctx, out[0], v);
    tk_tensor_free(v);
    return err;
}

/* --- cat: a and b one after the other along dim ------------------------------------------------- */

static int cat_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    const tk_tensor *a = in[0], *b = in[1];
    int rank = tk_tensor_rank(a), dim = 0, err;
    tk_sym shape[TK_MAX_DIMS];
    if (tk_tensor_dtype(b) != tk_tensor_dtype(a) || tk_tensor_rank(b) != rank)
        return tk_error_set(TK_EINVAL, "op 'tk::cat': input 'b' (in[1]) is %s of rank %d, 'a' %s of rank %d",
                            tk_dtype_name(tk_tensor_dtype(b)), tk_tensor_rank(b), tk_dtype_name(tk_tensor_dtype(a)), rank);
    if ((err = norm_dim("tk::cat", "dim", tk_arg_int(ctx, 2), rank, 0, &dim)))
        return err;
    for (int d = 0; d < rank; d++) {
        char what[64];
        snprintf(what, sizeof what, "a dim %d == b dim %d", d, d);
        if (d != dim && (err = tk_require_eq(ctx, tk_tensor_sym(a, d), tk_tensor_sym(b, d), what)))
            return err;
        shape[d] = d == dim ? tk_sym_add(ctx, tk_tensor_sym(a, d), tk_tensor_sym(b, d)) : tk_tensor_sym(a, d);
    }
    return tk_spec_set_sym(out[0], tk_tensor_dtype(a), rank, shape);
}

static int cat_run(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int dim = 0, err = norm_dim("tk::cat", "dim", tk_arg_int(ctx, 2), tk_tensor_rank(in[0]), 0, &dim);
    int64_t outer, inner, na = tk_tensor_dim(in[0], dim), nb = tk_tensor_dim(in[1], dim);
    size_t es = tk_dtype_size(tk_tensor_dtype(in[0]));
    if (err)
        return err;
    around(in[0], dim, &outer, &inner);
    err = copy2d(ctx, in[0], out[0], es, outer, na * inner, na * inner, 0, (na + nb) * inner, 0);
    return err ? err : copy2d(ctx, in[1], out[0], es, outer, nb * inner, nb * inner, 0, (na + nb) * inner, na * inner);
}

static int cat_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out) { return cat_run(ctx, in, out); }

TK_OP(tk_cat_op, "tk::cat", "(Tensor a, Tensor b, int dim=0) -> Tensor", .meta = cat_meta, .cpu = cat_cpu,
      .cost = layout_cost)
{
    return cat_run(ctx, in, out);
}

#define LAYOUT_OP(fn, NAME, SCHEMA, META, RUN)                                                       \
    static int fn##_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)              \
    {                                                                                                \
        return META(ctx, NAME, in, out);                                                             \
    }                                                                                                \
    static int fn##_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out) { return RUN; }     \
    TK_OP(tk_##fn##_op, NAME, SCHEMA, .meta = fn##_meta, .cpu = fn##_cpu, .cost = layout_cost)       \
    {                                                                                                \
        return RUN;                                                                                  \
    }

LAYOUT_OP(permute, "tk::permute", "(Tensor x, int[] dims) -> Tensor", view_meta, view_run(ctx, "tk::permute", in, out))
LAYOUT_OP(transpose, "tk::transpose", "(Tensor x, int dim0, int dim1) -> Tensor", view_meta,
          view_run(ctx, "tk::transpose", in, out))
LAYOUT_OP(expand, "tk::expand", "(Tensor x, int[] sizes) -> Tensor", view_meta, view_run(ctx, "tk::expand", in, out))
LAYOUT_OP(narrow, "tk::narrow", "(Tensor x, int dim, int start, int length) -> Tensor", view_meta,
          narrow_run(ctx, in, out))
LAYOUT_OP(flatten, "tk::flatten", "(Tensor x, int start_dim=0, int end_dim=-1) -> Tensor", regroup_meta,
          reshape_run(ctx, in, out))
LAYOUT_OP(unflatten, "tk::unflatten", "(Tensor x, int dim, int[] sizes) -> Tensor", regroup_meta,
          reshape_run(ctx, in, out))
LAYOUT_OP(reshape, "tk::reshape", "(Tensor x, int[] shape) -> Tensor", regroup_meta, reshape_run(ctx, in, out))

/* --- views: layout nodes a session runs without copying ---------------------------------------- */

/* An int argument of a node's recorded scalars, or def when it is not one. */
static int64_t attr_int(const tk_value *args, int nargs, int i, int64_t def)
{
    return args && i < nargs && args[i].kind == TK_VALUE_INT ? args[i].u.i : def;
}

int tk_layout_view(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape, size_t es,
                   uint64_t *offset)
{
    int perm[TK_MAX_DIMS], dim = 0, ok = 0;
    *offset = 0;
    if (!shape)
        return def == &tk__op_def_tk_flatten_op || def == &tk__op_def_tk_unflatten_op || def == &tk__op_def_tk_reshape_op ||
               def == &tk__op_def_tk_narrow_op || def == &tk__op_def_tk_permute_op || def == &tk__op_def_tk_transpose_op ||
               def == &tk__op_def_tk_expand_op;
    if (def == &tk__op_def_tk_flatten_op || def == &tk__op_def_tk_unflatten_op || def == &tk__op_def_tk_reshape_op)
        return 1; /* the same bytes in the same order */
    if (def == &tk__op_def_tk_narrow_op) {
        int64_t start = attr_int(args, nargs, 2, -1), len = attr_int(args, nargs, 3, -1), outer = 1, inner = 1;
        if (norm_dim("tk::narrow", "dim", attr_int(args, nargs, 1, INT64_MAX), rank, 0, &dim) || start < 0 || len < 0 ||
            start + len > shape[dim])
            goto refused;
        for (int d = 0; d < rank; d++) {
            outer *= d < dim ? shape[d] : 1;
            inner *= d > dim ? shape[d] : 1;
        }
        /* one run of bytes: nothing before dim repeats it, or the whole dim is kept */
        ok = outer == 1 || len == shape[dim];
        *offset = ok ? (uint64_t)(start * inner) * es : 0;
        return ok;
    }
    if (def == &tk__op_def_tk_permute_op || def == &tk__op_def_tk_transpose_op) {
        const tk_value *dims = args && nargs > 1 && args[1].kind == TK_VALUE_INTS ? &args[1] : NULL;
        int transpose = def == &tk__op_def_tk_transpose_op, last = -1;
        if ((!transpose && !dims) ||
            perm_from(def->name, rank, attr_int(args, nargs, 1, INT64_MAX), attr_int(args, nargs, 2, INT64_MAX),
                      transpose ? NULL : dims->u.ints.v, transpose ? 0 : dims->u.ints.n, perm))
            goto refused;
        /* dims of 1 may move anywhere; the others must keep their order */
        for (int d = 0; d < rank; d++) {
            if (shape[perm[d]] == 1)
                continue;
            if (perm[d] < last)
                return 0;
            last = perm[d];
        }
        return 1;
    }
    if (def == &tk__op_def_tk_expand_op) { /* no dim grows: new leading dims of 1, the others kept */
        const tk_value *sz = args && nargs > 1 && args[1].kind == TK_VALUE_INTS ? &args[1] : NULL;
        if (!sz || sz->u.ints.n < rank)
            return 0;
        for (int64_t i = 0; i < sz->u.ints.n; i++) {
            int64_t j = i - (sz->u.ints.n - rank), want = sz->u.ints.v[i];
            if (j < 0 ? want != 1 : want != -1 && want != shape[j])
                return 0;
        }
        return 1;
    }
    return 0;
refused: /* arguments the export checked; a copy then reports them */
    tk_error_clear();
    return 0;
}

int tk_layout_strided(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape, size_t es,
                      int64_t *strides, uint64_t *offset)
{
    int dim = 0;
    int64_t s = 1, start = attr_int(args, nargs, 2, -1), len = attr_int(args, nargs, 3, -1);
    *offset = 0;
    if (def != &tk__op_def_tk_narrow_op)
        return 0;
    if (!shape)
        return 1;
    if (norm_dim("tk::narrow", "dim", attr_int(args, nargs, 1, INT64_MAX), rank, 0, &dim) || start < 0 || len < 0 ||
        start + len > shape[dim]) {
        tk_error_clear();
        return 0;
    }
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
    *offset = (uint64_t)(start * strides[dim]) * es;
    return 1;
}

int tk_layout_permuted(const tk_op_def *def, const tk_value *args, int nargs, int rank, const int64_t *shape,
                       int64_t *strides)
{
    int perm[TK_MAX_DIMS], transpose = def == &tk__op_def_tk_transpose_op;
    int64_t in_st[TK_MAX_DIMS], s = 1;
    const tk_value *dims = args && nargs > 1 && args[1].kind == TK_VALUE_INTS ? &args[1] : NULL;
    if ((!transpose && def != &tk__op_def_tk_permute_op) || (!transpose && !dims))
        return 0;
    if (perm_from(def->name, rank, attr_int(args, nargs, 1, INT64_MAX), attr_int(args, nargs, 2, INT64_MAX),
                  transpose ? NULL : dims->u.ints.v, transpose ? 0 : dims->u.ints.n, perm)) {
        tk_error_clear();
        return 0;
    }
    for (int d = rank - 1; d >= 0; d--) {
        in_st[d] = s;
        s *= shape[d];
    }
    for (int d = 0; d < rank; d++)
        strides[d] = in_st[perm[d]];
    return 1;
}

int tk_split_at(tk_ctx *ctx, const char *file, int line, tk_tensor *x, const int64_t *sizes, int n, int dim,
                tk_tensor **parts)
{
    int d = 0, err = 0;
    int64_t total = 0, start = 0;
    char what[96];
    for (int i = 0; parts && i < n; i++)
        parts[i] = NULL;
    if (!x || !sizes || !parts || n < 1)
        return tk_error_set(TK_EINVAL, "tk_split: expected a tensor, n >= 1 sizes and room for n parts (got n %d)", n);
    if ((err = norm_dim("tk::split", "dim", dim, tk_tensor_rank(x), 0, &d)))
        return err;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return tk_error_set(TK_EINVAL, "tk_split: sizes[%d] is %lld (expected >= 0)", i, (long long)sizes[i]);
        total += sizes[i];
    }
    snprintf(what, sizeof what, "x dim %d == the sum of split's sizes (%lld)", d, (long long)total);
    if (ctx) { /* the requirement's site is the model's call of tk_split */
        tk_site outer = ctx->site;
        ctx->site = (tk_site){"tk::split", file, line};
        err = tk_require_eq(ctx, tk_tensor_sym(x, d), TK_SYM(total), what);
        ctx->site = outer;
    } else {
        err = tk_require_eq(ctx, tk_tensor_sym(x, d), TK_SYM(total), what);
    }
    if (err)
        return err;
    for (int i = 0; i < n; start += sizes[i], i++) {
        const tk_value args[] = {tk__val_tensor(x), tk__val_int(d), tk__val_int(start), tk__val_int(sizes[i])};
        if (!(parts[i] = tk_call_at(ctx, "tk::narrow", file, line, 4, args))) {
            err = tk_error_last_code() ? tk_error_last_code() : TK_EINTERNAL;
            for (int j = 0; j < i; j++) {
                tk_tensor_free(parts[j]);
                parts[j] = NULL;
            }
            return err;
        }
    }
    return 0;
}

tk_tensor *(tk_transpose)(tk_ctx *ctx, tk_tensor *x, int dim0, int dim1)
{
    return tk_call(ctx, "tk::transpose", x, dim0, dim1);
}
tk_tensor *(tk_narrow)(tk_ctx *ctx, tk_tensor *x, int dim, int64_t start, int64_t length)
{
    return tk_call(ctx, "tk::narrow", x, dim, start, length);
}
