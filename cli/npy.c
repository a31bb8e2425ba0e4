/* .npy files (cli/npy.h): a validating reader into CPU tensors, with float32/float16 to bf16 and
 * f16 conversion, and an atomic writer. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"
#include <tk/half.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads and writes little-endian elements with memcpy: a big-endian host needs byte swaps"
#endif

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
#define EXPECTED "expected '<f4', '<f2', '<i4' or '<i8'"

/* numpy's names, for messages about what a file holds */
static const char *np_name(tk_dtype d)
{
    switch (d) {
    case TK_F32: return "float32";
    case TK_F16: return "float16";
    case TK_I32: return "int32";
    case TK_I64: return "int64";
    default: return "?";
    }
}

static const char *np_descr(tk_dtype d)
{
    switch (d) {
    case TK_F32: return "<f4";
    case TK_F16: return "<f2";
    case TK_I32: return "<i4";
    case TK_I64: return "<i8";
    default: return NULL;
    }
}

static int is_float(tk_dtype d) { return d == TK_F32 || d == TK_F16 || d == TK_BF16; }

/* "(2, 128)" into buf, for messages. */
static const char *shape_text(const int64_t *shape, int rank, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n)
        snprintf(buf + at, n - at, rank == 1 ? ",)" : ")");
    return buf;
}

/* --- the header: a Python dict literal ---------------------------------------------------- */

typedef struct hparser {
    const char *p, *end;
    const char *path;
} hparser;

static void skip_ws(hparser *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static int bad_header(const hparser *h, const char *what)
{
    return tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: %s", h->path, what);
}

/* A quoted string without escapes into buf. */
static int parse_string(hparser *h, char *buf, size_t n, const char *what)
{
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return bad_header(h, what);
    char q = *h->p++;
    const char *s = h->p;
    while (h->p < h->end && *h->p != q && *h->p != '\\')
        h->p++;
    if (h->p >= h->end || *h->p != q)
        return bad_header(h, what);
    size_t len = (size_t)(h->p - s);
    h->p++;
    if (len >= n)
        return tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: a string of %zu characters (%s)", h->path, len,
                            what);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

static int parse_word(hparser *h, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, word, n))
        return 0;
    h->p += n;
    return 1;
}

/* (d0, d1, ...) with an optional trailing comma; Python 2's 3L suffix is accepted. */
static int parse_shape(hparser *h, tk_npy_info *info)
{
    if (h->p >= h->end || *h->p != '(')
        return bad_header(h, "'shape' is not a tuple of whole numbers");
    h->p++;
    int rank = 0;
    for (;;) {
        skip_ws(h);
        if (h->p < h->end && *h->p == ')') {
            h->p++;
            break;
        }
        if (h->p >= h->end || *h->p < '0' || *h->p > '9')
            return bad_header(h, "'shape' is not a tuple of whole numbers");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return tk_error_set(TK_EFORMAT, "'%s': .npy shape has a dimension too large to be real", h->path);
            v = v * 10 + (*h->p++ - '0');
        }
        if (h->p < h->end && *h->p == 'L')
            h->p++;
        if (rank == TK_MAX_DIMS)
            return tk_error_set(TK_EFORMAT, "'%s': .npy shape has more than the %d dimensions supported", h->path,
                                TK_MAX_DIMS);
        info->shape[rank++] = v;
        skip_ws(h);
        if (h->p < h->end && *h->p == ',') {
            h->p++;
            continue;
        }
        if (h->p < h->end && *h->p == ')') {
            h->p++;
            break;
        }
        return bad_header(h, "'shape' is not a tuple of whole numbers");
    }
    info->rank = rank;
    return 0;
}

static int parse_descr(hparser *h, tk_npy_info *info)
{
    char d[64];
    if (h->p < h->end && *h->p == '[')
        return tk_error_set(TK_EFORMAT, "'%s': structured arrays (a list 'descr') are not supported; " EXPECTED,
                            h->path);
    int rc = parse_string(h, d, sizeof d, "expected a string as 'descr'");
    if (rc)
        return rc;
    if (!strcmp(d, "<f4"))
        info->dtype = TK_F32;
    else if (!strcmp(d, "<f2"))
        info->dtype = TK_F16;
    else if (!strcmp(d, "<i4"))
        info->dtype = TK_I32;
    else if (!strcmp(d, "<i8"))
        info->dtype = TK_I64;
    else if (d[0] == '>' && d[1] && strchr("fiu", d[1]))
        return tk_error_set(TK_EFORMAT, "'%s': dtype '%s' is big-endian; " EXPECTED " (numpy: a.astype(a.dtype.newbyteorder('<')))",
                            h->path, d);
    else if (!strcmp(d, "|O") || !strcmp(d, "O"))
        return tk_error_set(TK_EFORMAT, "'%s': object arrays (dtype '%s') are not supported; " EXPECTED, h->path, d);
    else
        return tk_error_set(TK_EFORMAT, "'%s': dtype '%s' is not supported; " EXPECTED, h->path, d);
    return 0;
}

static int parse_header(tk_npy_info *info, const char *text, size_t len, const char *path)
{
    hparser h = {text, text + len, path};
    int seen_descr = 0, seen_order = 0, seen_shape = 0, fortran = 0, rc;
    skip_ws(&h);
    if (h.p >= h.end || *h.p != '{')
        return bad_header(&h, "expected a dict ('{')");
    h.p++;
    for (;;) {
        char key[32];
        skip_ws(&h);
        if (h.p < h.end && *h.p == '}') {
            h.p++;
            break;
        }
        if ((rc = parse_string(&h, key, sizeof key, "expected a quoted key")))
            return rc;
        skip_ws(&h);
        if (h.p >= h.end || *h.p != ':')
            return bad_header(&h, "expected ':' after a key");
        h.p++;
        skip_ws(&h);
        int *seen;
        rc = 0;
        if (!strcmp(key, "descr")) {
            seen = &seen_descr;
            rc = parse_descr(&h, info);
        } else if (!strcmp(key, "fortran_order")) {
            seen = &seen_order;
            if (parse_word(&h, "True"))
                fortran = 1;
            else if (!parse_word(&h, "False"))
                rc = bad_header(&h, "'fortran_order' is neither True nor False");
        } else if (!strcmp(key, "shape")) {
            seen = &seen_shape;
            rc = parse_shape(&h, info);
        } else {
            return tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: unknown key '%s' (expected 'descr', "
                                "'fortran_order' and 'shape')", path, key);
        }
        if (rc)
            return rc;
        if (*seen)
            return tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: key '%s' given twice", path, key);
        *seen = 1;
        skip_ws(&h);
        if (h.p < h.end && *h.p == ',') {
            h.p++;
            continue;
        }
        if (h.p < h.end && *h.p == '}') {
            h.p++;
            break;
        }
        return bad_header(&h, "expected ',' or '}' after a value");
    }
    skip_ws(&h);
    if (h.p != h.end)
        return bad_header(&h, "text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: no '%s' key", path,
                            !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    /* An array with at most one dimension over 1 has the same bytes in either order, but numpy
     * marks those C-contiguous and never writes fortran_order True for them: refuse all alike. */
    if (fortran)
        return tk_error_set(TK_EFORMAT, "'%s': fortran_order arrays are not supported; save a C-order array "
                            "(numpy: np.save(f, np.ascontiguousarray(a)))", path);
    return 0;
}

/* --- reading ------------------------------------------------------------------------------- */

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The header of the open file f into *info and, in *data_bytes, the size of its data section
 * (checked against the shape). */
static int read_info(tk_npy_info *info, FILE *f, const char *path)
{
    struct stat st;
    unsigned char pre[12];
    char *text = NULL;
    int rc;
    memset(info, 0, sizeof *info);
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        return tk_error_set(TK_EIO, "cannot read '%s': not a regular file", path);
    uint64_t fsize = (uint64_t)st.st_size;
    size_t got = fread(pre, 1, sizeof pre, f);
    if (got < sizeof MAGIC || memcmp(pre, MAGIC, sizeof MAGIC))
        return tk_error_set(TK_EFORMAT, "'%s': not a .npy file (it does not start with \"\\x93NUMPY\")", path);
    if (got < 8)
        return tk_error_set(TK_EFORMAT, "'%s': truncated .npy file (%zu bytes, no version)", path, got);
    info->major = pre[6];
    info->minor = pre[7];
    if ((info->major != 1 && info->major != 2 && info->major != 3) || info->minor != 0)
        return tk_error_set(TK_EFORMAT, "'%s': .npy version %d.%d is not supported (expected 1.0, 2.0 or 3.0)", path,
                            info->major, info->minor);
    int lenbytes = info->major == 1 ? 2 : 4;
    if (got < (size_t)(8 + lenbytes))
        return tk_error_set(TK_EFORMAT, "'%s': truncated .npy file (%zu bytes, no header length)", path, got);
    uint64_t hlen = le(pre + 8, lenbytes);
    uint64_t hstart = 8u + (uint64_t)lenbytes;
    if (hlen > TK_NPY_MAX_HEADER)
        return tk_error_set(TK_EFORMAT, "'%s': .npy header length %llu is more than the %u bytes allowed", path,
                            (unsigned long long)hlen, TK_NPY_MAX_HEADER);
    if (hstart + hlen > fsize)
        return tk_error_set(TK_EFORMAT, "'%s': truncated .npy file: the header of %llu bytes runs past its end "
                            "(%llu bytes)", path, (unsigned long long)hlen, (unsigned long long)fsize);
    if (!(text = malloc(hlen + 1)))
        return tk_error_set(TK_ENOMEM, "out of memory");
    if (fseek(f, (long)hstart, SEEK_SET) != 0 || fread(text, 1, hlen, f) != hlen) {
        rc = tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    text[hlen] = '\0';
    if (memchr(text, '\0', hlen)) {
        rc = tk_error_set(TK_EFORMAT, "'%s': malformed .npy header: it holds a NUL byte", path);
        goto done;
    }
    if ((rc = parse_header(info, text, hlen, path)))
        goto done;
    info->data_offset = (size_t)(hstart + hlen);

    /* bytes = prod(shape) * element size, refusing overflow before comparing with the file */
    char sh[256];
    uint64_t bytes = tk_dtype_size(info->dtype);
    for (int i = 0; i < info->rank; i++) {
        uint64_t d = (uint64_t)info->shape[i];
        if (d && bytes > UINT64_MAX / d) {
            rc = tk_error_set(TK_EFORMAT, "'%s': .npy shape %s is too large (its byte count overflows)", path,
                              shape_text(info->shape, info->rank, sh, sizeof sh));
            goto done;
        }
        bytes *= d;
    }
    uint64_t have = fsize - info->data_offset;
    if (have < bytes)
        rc = tk_error_set(TK_EFORMAT, "'%s': truncated .npy file: shape %s of %s needs %llu bytes of data, the file "
                          "has %llu", path, shape_text(info->shape, info->rank, sh, sizeof sh), np_name(info->dtype),
                          (unsigned long long)bytes, (unsigned long long)have);
    else if (have > bytes)
        rc = tk_error_set(TK_EFORMAT, "'%s': %llu bytes after the data of shape %s of %s (not a .npy file numpy "
                          "wrote, or a corrupt one)", path, (unsigned long long)(have - bytes),
                          shape_text(info->shape, info->rank, sh, sizeof sh), np_name(info->dtype));
    else if (bytes > SIZE_MAX)
        rc = tk_error_set(TK_EFORMAT, "'%s': %llu bytes of data do not fit in memory", path, (unsigned long long)bytes);
done:
    free(text);
    return rc;
}

int tk_npy_read_info(tk_npy_info *info, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    int rc = read_info(info, f, path);
    fclose(f);
    return rc;
}

/* n elements of the file's dtype `from` (raw, little-endian) into dst of dtype `to`. */
static int convert(void *dst, tk_dtype to, const void *src, tk_dtype from, size_t n, const char *path)
{
    if (to == from) {
        memcpy(dst, src, n * tk_dtype_size(to));
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        float v = 0.0f;
        if (from == TK_F32) {
            memcpy(&v, (const char *)src + 4 * i, 4);
        } else if (from == TK_F16) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            v = tk_f16_to_f32(h); /* exact, so bf16 below rounds once */
        } else if (from == TK_I32 && to == TK_I64) {
            int32_t x;
            memcpy(&x, (const char *)src + 4 * i, 4);
            ((int64_t *)dst)[i] = x;
            continue;
        } else if (from == TK_I64 && to == TK_I32) {
            int64_t x;
            memcpy(&x, (const char *)src + 8 * i, 8);
            if (x < INT32_MIN || x > INT32_MAX)
                return tk_error_set(TK_EINVAL, "'%s': element %zu is %lld, outside the range of i32", path, i,
                                    (long long)x);
            ((int32_t *)dst)[i] = (int32_t)x;
            continue;
        }
        switch (to) {
        case TK_F32: ((float *)dst)[i] = v; break;
        case TK_F16: ((uint16_t *)dst)[i] = tk_f32_to_f16(v); break;
        case TK_BF16: ((uint16_t *)dst)[i] = tk_f32_to_bf16(v); break;
        default: return tk_error_set(TK_EINTERNAL, "npy: no conversion from %d to %d", (int)from, (int)to);
        }
    }
    return 0;
}

int tk_npy_read(tk_tensor **out, const char *path, const tk_dtype *want)
{
    tk_npy_info info;
    tk_tensor *t = NULL;
    void *raw = NULL;
    int rc;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    if ((rc = read_info(&info, f, path)))
        goto done;
    tk_dtype to = want ? *want : info.dtype;
    if (is_float(to) != is_float(info.dtype)) {
        rc = tk_error_set(TK_EINVAL, "'%s' holds %s, which does not convert to %s (%s expected)", path,
                          np_name(info.dtype), tk_dtype_name(to),
                          is_float(to) ? "float32 or float16" : "int32 or int64");
        goto done;
    }
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    if ((rc = tk_tensor_new(&t, NULL, cpu, to, info.rank, info.shape)))
        goto done;
    size_t n = (size_t)tk_numel(t), bytes = n * tk_dtype_size(info.dtype);
    void *dst = tk_tensor_data(t);
    if (to != info.dtype && bytes && !(raw = malloc(bytes))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading '%s'", path);
        goto done;
    }
    if (fseek(f, (long)info.data_offset, SEEK_SET) != 0 || fread(raw ? raw : dst, 1, bytes, f) != bytes) {
        rc = tk_error_set(TK_EIO, "cannot read '%s': %s", path, ferror(f) ? strerror(errno) : "file shrank");
        goto done;
    }
    if (raw && (rc = convert(dst, to, raw, info.dtype, n, path)))
        goto done;
    *out = t;
    t = NULL;
done:
    tk_tensor_free(t);
    free(raw);
    fclose(f);
    return rc;
}

/* --- writing ------------------------------------------------------------------------------- */

int tk_npy_encode(void **out, size_t *len, const tk_tensor *t)
{
    *out = NULL;
    *len = 0;
    if (tk_tensor_device(t).kind != TK_DEVICE_CPU)
        return tk_error_set(TK_EINVAL, "npy: a tensor to write must be on the CPU");
    tk_dtype from = tk_tensor_dtype(t);
    tk_dtype as = from == TK_F16 || from == TK_BF16 ? TK_F32 : from;
    int rank = tk_tensor_rank(t);
    char sh[256], header[400];
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", np_descr(as),
                      shape_text(tk_tensor_shape(t), rank, sh, sizeof sh));
    /* numpy pads with spaces and ends with a newline so the data starts 64-byte aligned */
    size_t total = 10 + (size_t)hl + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    size_t n = (size_t)tk_numel(t), data = n * tk_dtype_size(as);
    unsigned char *buf = malloc(padded + data);
    if (!buf)
        return tk_error_set(TK_ENOMEM, "out of memory");
    memcpy(buf, MAGIC, sizeof MAGIC);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, header, (size_t)hl);
    memset(buf + 10 + hl, ' ', hlen - (size_t)hl - 1);
    buf[padded - 1] = '\n';
    const void *src = tk_tensor_data(t);
    if (as == from) {
        if (data)
            memcpy(buf + padded, src, data);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = ((const uint16_t *)src)[i];
            float v = from == TK_BF16 ? tk_bf16_to_f32(h) : tk_f16_to_f32(h);
            memcpy(buf + padded + 4 * i, &v, 4);
        }
    }
    *out = buf;
    *len = padded + data;
    return 0;
}

int tk_npy_write(const char *path, const tk_tensor *t)
{
    void *img;
    size_t len;
    int rc = tk_npy_encode(&img, &len, t);
    if (rc)
        return rc;
    rc = tk_file_write_atomic(path, img, len);
    free(img);
    return rc;
}
