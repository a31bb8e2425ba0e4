/* Dtypes, devices and tensors: contiguous row-major storage on the CPU (64-byte aligned) or on a
 * GPU (through the context's device), owned or borrowed; and traced tensors (no storage, dims as
 * tk_sym) that tracing passes between ops. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

/* Host tensors start on a cache line, and on the alignment AVX-512 loads like. */
#define TK_HOST_ALIGN 64

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [TK_F32] = {"f32", 4}, [TK_F16] = {"f16", 2}, [TK_BF16] = {"bf16", 2}, [TK_I32] = {"i32", 4}, [TK_I64] = {"i64", 8},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

size_t tk_dtype_size(tk_dtype dtype)
{
    return (unsigned)dtype < NDTYPES ? dtypes[dtype].size : 0;
}

const char *tk_dtype_name(tk_dtype dtype)
{
    return (unsigned)dtype < NDTYPES ? dtypes[dtype].name : "unknown";
}

int tk_dtype_parse(tk_dtype *out, const char *name)
{
    for (size_t i = 0; name && i < NDTYPES; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (tk_dtype)i;
            return 0;
        }
    }
    return tk_error_set(TK_EINVAL, "unknown dtype '%s' (expected f32, f16, bf16, i32 or i64)", name ? name : "");
}

int tk_device_parse(tk_device *out, const char *text)
{
    if (text && strcmp(text, "cpu") == 0) {
        *out = (tk_device){TK_DEVICE_CPU, 0};
        return 0;
    }
    if (text && strcmp(text, "cuda") == 0) {
        *out = (tk_device){TK_DEVICE_CUDA, 0};
        return 0;
    }
    if (text && strncmp(text, "cuda:", 5) == 0 && text[5] >= '0' && text[5] <= '9') {
        long index = 0;
        const char *p = text + 5;
        for (; *p >= '0' && *p <= '9' && index <= INT_MAX; p++)
            index = index * 10 + (*p - '0');
        if (!*p && index <= INT_MAX) {
            *out = (tk_device){TK_DEVICE_CUDA, (int)index};
            return 0;
        }
    }
    return tk_error_set(TK_EINVAL, "unknown device '%s' (expected cpu, cuda or cuda:N)", text ? text : "");
}

const char *tk_device_name(tk_device dev, char *buf, size_t n)
{
    if (dev.kind == TK_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "cuda:%d", dev.index);
    return buf;
}

static int same_device(tk_device a, tk_device b)
{
    return a.kind == b.kind && (a.kind == TK_DEVICE_CPU || a.index == b.index);
}

/* "[2, 3]" into buf, for messages. */
static const char *shape_str(int rank, const int64_t *shape, char *buf, size_t n)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}

/* Checks dtype, rank and shape, and computes the byte count without overflow. */
static int check_layout(size_t *nbytes, tk_dtype dtype, int rank, const int64_t *shape)
{
    char s[256];
    size_t esize = tk_dtype_size(dtype);
    if (!esize)
        return tk_error_set(TK_EINVAL, "unknown dtype %d", (int)dtype);
    if (rank < 0 || rank > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "tensor rank %d is outside [0, %d]", rank, TK_MAX_DIMS);
    if (rank > 0 && !shape)
        return tk_error_set(TK_EINVAL, "a rank-%d tensor needs a shape", rank);
    uint64_t numel = 1;
    int overflow = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return tk_error_set(TK_EINVAL, "tensor dim %d is %lld in shape %s (dims must be >= 0)", i,
                                (long long)shape[i], shape_str(rank, shape, s, sizeof(s)));
        if (shape[i] && numel > (uint64_t)INT64_MAX / (uint64_t)shape[i])
            overflow = 1; /* keep going: a 0 dim later still makes it empty */
        numel *= (uint64_t)shape[i];
    }
    for (int i = 0; i < rank; i++)
        if (shape[i] == 0)
            overflow = 0, numel = 0;
    if (overflow || numel > (uint64_t)PTRDIFF_MAX / esize)
        return tk_error_set(TK_EINVAL, "tensor %s %s is too large (its byte count overflows)",
                            shape_str(rank, shape, s, sizeof(s)), tk_dtype_name(dtype));
    *nbytes = (size_t)numel * esize;
    return 0;
}

void tk_tensor_view_init(tk_tensor *t, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, void *data)
{
    memset(t, 0, sizeof(*t));
    t->dtype = dtype;
    t->rank = rank;
    t->device = dev.kind == TK_DEVICE_CPU ? (tk_device){TK_DEVICE_CPU, 0} : dev;
    size_t nbytes = tk_dtype_size(dtype);
    uint64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->dims[i] = TK_SYM(shape[i]);
        t->strides[i] = (int64_t)stride;
        stride *= shape[i] ? (uint64_t)shape[i] : 1u;
        nbytes *= (size_t)shape[i]; /* the caller checked the product (check_layout or a plan) */
    }
    t->nbytes = nbytes;
    t->data = data;
}

static tk_tensor *tensor_alloc(tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, size_t nbytes)
{
    tk_tensor *t = malloc(sizeof(*t));
    if (!t)
        return NULL;
    tk_tensor_view_init(t, dev, dtype, rank, shape, NULL);
    t->nbytes = nbytes;
    return t;
}

int tk_tensor_new(tk_tensor **out, tk_ctx *ctx, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape)
{
    char a[32], b[32];
    size_t nbytes;
    tk_tensor *t = NULL;
    int rc;
    *out = NULL;
    if ((rc = check_layout(&nbytes, dtype, rank, shape)))
        return rc;
    if (dev.kind == TK_DEVICE_CUDA && (!ctx || !same_device(ctx->device, dev)))
        return tk_error_set(TK_EINVAL, "a tensor on '%s' needs a context on '%s', got %s%s%s",
                            tk_device_name(dev, a, sizeof(a)), a, ctx ? "one on '" : "none",
                            ctx ? tk_device_name(ctx->device, b, sizeof(b)) : "", ctx ? "'" : "");
    if (dev.kind != TK_DEVICE_CPU && dev.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EINVAL, "unknown device kind %d", (int)dev.kind);
    if (!(t = tensor_alloc(dev, dtype, rank, shape, nbytes)))
        return tk_error_set(TK_ENOMEM, "out of memory");
    t->owned = 1;
    if (dev.kind == TK_DEVICE_CPU) {
        /* aligned_alloc wants a multiple of the alignment; an empty tensor still gets a pointer */
        size_t rounded = nbytes ? (nbytes + TK_HOST_ALIGN - 1) / TK_HOST_ALIGN * TK_HOST_ALIGN : TK_HOST_ALIGN;
        if (rounded < nbytes || !(t->data = aligned_alloc(TK_HOST_ALIGN, rounded))) {
            rc = tk_error_set(TK_ENOMEM, "out of memory allocating %zu bytes for a tensor", nbytes);
            goto done;
        }
    } else {
        t->owner = ctx;
        if ((rc = tk_cuda_alloc(ctx, &t->data, nbytes)))
            goto done;
    }
    *out = t;
    t = NULL;
done:
    tk_tensor_free(t);
    return rc;
}

int tk_tensor_wrap(tk_tensor **out, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, void *data)
{
    size_t nbytes;
    int rc;
    *out = NULL;
    if ((rc = check_layout(&nbytes, dtype, rank, shape)))
        return rc;
    if (dev.kind != TK_DEVICE_CPU && dev.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EINVAL, "unknown device kind %d", (int)dev.kind);
    if (!data && nbytes)
        return tk_error_set(TK_EINVAL, "tk_tensor_wrap of a %zu-byte tensor over a NULL pointer", nbytes);
    tk_tensor *t = tensor_alloc(dev, dtype, rank, shape, nbytes);
    if (!t)
        return tk_error_set(TK_ENOMEM, "out of memory");
    t->data = data;
    *out = t;
    return 0;
}

int tk_tensor_new_traced(tk_tensor **out, tk_ctx *ctx, tk_dtype dtype, int rank, const tk_sym *dims)
{
    *out = NULL;
    if (!tk_dtype_size(dtype))
        return tk_error_set(TK_EINVAL, "unknown dtype %d", (int)dtype);
    if (rank < 0 || rank > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "tensor rank %d is outside [0, %d]", rank, TK_MAX_DIMS);
    if (rank > 0 && !dims)
        return tk_error_set(TK_EINVAL, "a rank-%d tensor needs a shape", rank);
    for (int i = 0; i < rank; i++)
        if (!dims[i].expr && dims[i].value < 0)
            return tk_error_set(TK_EINVAL, "tensor dim %d is %lld (dims must be >= 0)", i, (long long)dims[i].value);
    tk_tensor *t = calloc(1, sizeof(*t));
    if (!t)
        return tk_error_set(TK_ENOMEM, "out of memory");
    t->dtype = dtype;
    t->rank = rank;
    t->device = ctx ? ctx->device : (tk_device){TK_DEVICE_CPU, 0};
    t->traced = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->shape[i] = dims[i].expr ? TK_SYM_DYNAMIC_VALUE : dims[i].value;
    }
    /* strides only where every later dim is a constant */
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->strides[i] = stride;
        if (stride < 0 || t->shape[i] < 0 || __builtin_mul_overflow(stride, t->shape[i] ? t->shape[i] : 1, &stride))
            stride = -1;
    }
    *out = t;
    return 0;
}

void tk_tensor_format_shape(const tk_tensor *t, char *buf, size_t n)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_adds(&sb, "[");
    for (int i = 0; i < t->rank; i++) {
        if (i)
            tk_strbuf_adds(&sb, ", ");
        tk_sym_print(t->dims[i], &sb);
    }
    tk_strbuf_adds(&sb, "]");
    snprintf(buf, n, "%s", sb.buf ? sb.buf : "[?]");
    tk_strbuf_release(&sb);
}

tk_sym tk_tensor_sym(const tk_tensor *t, int i)
{
    if (!t) {
        tk_error_set(TK_EINVAL, "tk_tensor_sym: no tensor");
        return TK_SYM(-1);
    }
    int j = i < 0 ? i + t->rank : i;
    if (j < 0 || j >= t->rank) {
        tk_error_set(TK_EINVAL, "dim %d is out of range for a rank-%d tensor", i, t->rank);
        return TK_SYM(-1);
    }
    return t->dims[j];
}

void tk_tensor_free(tk_tensor *t)
{
    if (!t)
        return;
    void *storage = t->base ? t->base : t->data;
    if (t->owned && storage) {
        if (t->device.kind == TK_DEVICE_CPU)
            free(storage);
        else
            tk_cuda_free(t->owner, storage);
    }
    free(t);
}

void tk_tensor_view_strided(tk_tensor *t, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape,
                            const int64_t *strides, void *data)
{
    tk_tensor_view_init(t, dev, dtype, rank, shape, data);
    for (int i = 0; strides && i < rank; i++)
        t->strides[i] = strides[i];
}

int tk_tensor_new_view(tk_tensor **out, tk_ctx *ctx, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape,
                       const int64_t *strides, size_t storage, size_t offset)
{
    size_t nbytes;
    void *base = NULL;
    int rc;
    *out = NULL;
    if ((rc = check_layout(&nbytes, dtype, rank, shape)))
        return rc;
    if (dev.kind == TK_DEVICE_CPU) {
        size_t rounded = (storage + TK_HOST_ALIGN - 1) / TK_HOST_ALIGN * TK_HOST_ALIGN;
        if (!(base = aligned_alloc(TK_HOST_ALIGN, rounded ? rounded : TK_HOST_ALIGN)))
            return tk_error_set(TK_ENOMEM, "out of memory allocating %zu bytes for a tensor", storage);
    } else if ((rc = tk_cuda_alloc(ctx, &base, storage))) {
        return rc;
    }
    tk_tensor *t = tensor_alloc(dev, dtype, rank, shape, nbytes);
    if (!t) {
        if (dev.kind == TK_DEVICE_CPU)
            free(base);
        else
            tk_cuda_free(ctx, base);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    for (int i = 0; i < rank; i++)
        t->strides[i] = strides[i];
    t->data = (char *)base + offset;
    t->owned = 1;
    t->owner = dev.kind == TK_DEVICE_CPU ? NULL : ctx;
    t->base = base;
    t->base_bytes = storage;
    *out = t;
    return 0;
}

const int64_t *tk_tensor_strides(const tk_tensor *t) { return t ? t->strides : NULL; }

int tk_tensor_is_contiguous(const tk_tensor *t)
{
    int64_t s = 1;
    for (int i = t ? t->rank - 1 : -1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

/* t as rows of row elements with pitch elements from one row's start to the next: a
 * contiguous run of its last dims, the dims before it one uniform pitch apart. 0 when t is not
 * of that form. */
static int rows_of(const tk_tensor *t, int64_t *rows, int64_t *row, int64_t *pitch)
{
    int d = t->rank - 1;
    *rows = 1, *row = 1, *pitch = 0;
    for (; d >= 0 && (t->shape[d] == 1 || t->strides[d] == *row); d--)
        *row *= t->shape[d];
    for (int64_t next = -1; d >= 0; d--) {
        if (t->shape[d] == 1)
            continue;
        if (next >= 0 && t->strides[d] != next)
            return 0;
        if (!*pitch)
            *pitch = t->strides[d];
        *rows *= t->shape[d];
        next = t->strides[d] * t->shape[d];
    }
    if (!*pitch)
        *pitch = *row;
    return *pitch >= *row;
}

int64_t tk_numel(const tk_tensor *t)
{
    if (!t)
        return 0;
    for (int i = 0; t->traced && i < t->rank; i++) {
        if (t->dims[i].expr) {
            char shape[256];
            tk_tensor_format_shape(t, shape, sizeof shape);
            tk_error_set(TK_EINVAL, "the element count of a traced tensor is dynamic (%s): use tk_tensor_sym in "
                                    "meta functions", shape);
            return TK_SYM_DYNAMIC_VALUE;
        }
    }
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] == 0)
            return 0; /* before the product: the other dims of an empty tensor may overflow it */
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

tk_dtype tk_tensor_dtype(const tk_tensor *t) { return t->dtype; }
int tk_tensor_rank(const tk_tensor *t) { return t ? t->rank : 0; }
void *tk_tensor_data(const tk_tensor *t) { return t ? t->data : NULL; }
tk_device tk_tensor_device(const tk_tensor *t) { return t->device; }
const int64_t *tk_tensor_shape(const tk_tensor *t) { return t ? t->shape : NULL; }
size_t tk_tensor_nbytes(const tk_tensor *t) { return t ? t->nbytes : 0; }

int64_t tk_tensor_dim(const tk_tensor *t, int i)
{
    if (!t)
        return -1;
    int j = i < 0 ? i + t->rank : i;
    if (j < 0 || j >= t->rank) {
        tk_error_set(TK_EINVAL, "dim %d is out of range for a rank-%d tensor", i, t->rank);
        return -1;
    }
    if (t->dims[j].expr) {
        tk_strbuf sb = TK_STRBUF_INIT;
        tk_sym_print(t->dims[j], &sb);
        tk_error_set(TK_EINVAL, "dim %d of a traced tensor is dynamic ('%s'): use tk_tensor_sym in meta functions", j,
                     sb.buf ? sb.buf : "?");
        tk_strbuf_release(&sb);
        return TK_SYM_DYNAMIC_VALUE;
    }
    return t->shape[j];
}

int tk_tensor_copy(tk_ctx *ctx, tk_tensor *dst, const tk_tensor *src)
{
    char a[256], b[256], d1[32], d2[32];
    if (!dst || !src)
        return tk_error_set(TK_EINVAL, "tk_tensor_copy: %s tensor is NULL", dst ? "the source" : "the destination");
    if (dst->traced || src->traced)
        return tk_error_set(TK_EINVAL, "tk_tensor_copy: the %s tensor is traced (it has no data)",
                            src->traced ? "source" : "destination");
    if (dst->dtype != src->dtype || tk_numel(dst) != tk_numel(src))
        return tk_error_set(TK_EINVAL, "cannot copy a %s %s tensor into a %s %s one",
                            shape_str(src->rank, src->shape, a, sizeof(a)), tk_dtype_name(src->dtype),
                            shape_str(dst->rank, dst->shape, b, sizeof(b)), tk_dtype_name(dst->dtype));
    int host = dst->device.kind == TK_DEVICE_CPU && src->device.kind == TK_DEVICE_CPU;
    if (!host && (!ctx || ctx->device.kind != TK_DEVICE_CUDA))
        return tk_error_set(TK_EINVAL, "copying a tensor from '%s' to '%s' needs a context on a CUDA device, got %s",
                            tk_device_name(src->device, d1, sizeof(d1)), tk_device_name(dst->device, d2, sizeof(d2)),
                            ctx ? "one on 'cpu'" : "none");
    if (!tk_tensor_is_contiguous(dst) || !tk_tensor_is_contiguous(src)) {
        /* a strided view: both as rows with a pitch (the contiguous side's rows back to back) */
        const tk_tensor *v = tk_tensor_is_contiguous(dst) ? src : dst;
        int64_t rows, row, pitch, r2, w2, p2;
        size_t es = tk_dtype_size(src->dtype);
        if (dst->rank != src->rank || memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)src->rank) ||
            !rows_of(v, &rows, &row, &pitch) ||
            (!tk_tensor_is_contiguous(dst) && !tk_tensor_is_contiguous(src) &&
             (!rows_of(v == src ? dst : src, &r2, &w2, &p2) || r2 != rows || w2 != row)))
            return tk_error_set(TK_EUNSUPPORTED, "tk_tensor_copy: a %s strided view copies only into or from one of "
                                "its shape, as rows a pitch apart", shape_str(v->rank, v->shape, a, sizeof(a)));
        int64_t sp = tk_tensor_is_contiguous(src) ? row : v == src ? pitch : p2;
        int64_t dp = tk_tensor_is_contiguous(dst) ? row : v == dst ? pitch : p2;
        if (host) {
            for (int64_t r = 0; r < rows; r++)
                memmove((char *)dst->data + (size_t)(r * dp) * es, (const char *)src->data + (size_t)(r * sp) * es,
                        (size_t)row * es);
            return 0;
        }
        return tk_cuda_memcpy2d(ctx, dst->data, dst->device, (size_t)dp * es, src->data, src->device, (size_t)sp * es,
                                (size_t)row * es, (size_t)rows);
    }
    if (host) {
        if (src->nbytes)
            memmove(dst->data, src->data, src->nbytes);
        return 0;
    }
    return tk_cuda_memcpy(ctx, dst->data, dst->device, src->data, src->device, src->nbytes);
}
