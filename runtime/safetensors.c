/* safetensors: the validating reader (a read-only mapping of the file, or a buffer) and the
 * deterministic writer of tk/safetensors.h and runtime/safetensors.h. */
#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "rt_internal.h"
#include "strbuf.h"

struct tk_safetensors {
    char *name;
    void *map; /* the mapping of tk_safetensors_open, NULL for a buffer */
    size_t map_size;
    const unsigned char *data; /* the data section */
    uint64_t data_size;
    tk_safetensors_entry *entries; /* sorted by name */
    size_t count;
    cJSON *header; /* owns the names and dtype strings of the entries and the metadata */
    const cJSON *metadata;
};

/* Every dtype of the format; the ones tk_dtype has map to it. */
static const struct {
    const char *name;
    size_t size;
    int supported;
    tk_dtype tk;
} st_dtypes[] = {
    {"F64", 8, 0, TK_F32},     {"F32", 4, 1, TK_F32},     {"F16", 2, 1, TK_F16},      {"BF16", 2, 1, TK_BF16},
    {"I64", 8, 1, TK_I64},     {"I32", 4, 1, TK_I32},     {"I16", 2, 0, TK_F32},      {"I8", 1, 0, TK_F32},
    {"U64", 8, 0, TK_F32},     {"U32", 4, 0, TK_F32},     {"U16", 2, 0, TK_F32},      {"U8", 1, 0, TK_F32},
    {"BOOL", 1, 0, TK_F32},    {"F8_E4M3", 1, 0, TK_F32}, {"F8_E5M2", 1, 0, TK_F32},
};
#define NST_DTYPES (sizeof(st_dtypes) / sizeof(st_dtypes[0]))

static const char *st_name_of(tk_dtype d)
{
    for (size_t i = 0; i < NST_DTYPES; i++)
        if (st_dtypes[i].supported && st_dtypes[i].tk == d)
            return st_dtypes[i].name;
    return NULL;
}

/* JSON numbers are doubles: integers are exact up to 2^53. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b)
{
    const tk_safetensors_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const tk_safetensors_entry *)a)->name, ((const tk_safetensors_entry *)b)->name);
}

/* One tensor of the header into e. */
static int parse_entry(tk_safetensors *st, const cJSON *item, tk_safetensors_entry *e)
{
    const char *f = st->name, *n = item->string;
    e->name = n;
    if (!cJSON_IsObject(item))
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' is not a JSON object", f, n);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype))
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has no \"dtype\" string", f, n);
    size_t k = 0;
    while (k < NST_DTYPES && strcmp(st_dtypes[k].name, dtype->valuestring) != 0)
        k++;
    if (k == NST_DTYPES)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has an unknown dtype '%s'", f, n, dtype->valuestring);
    e->dtype = st_dtypes[k].name;
    e->elem_size = st_dtypes[k].size;
    e->supported = st_dtypes[k].supported;
    e->tk_dtype = st_dtypes[k].tk;
    if (!cJSON_IsArray(shape))
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has no \"shape\" array", f, n);
    int rank = cJSON_GetArraySize(shape);
    if (rank > TK_MAX_DIMS)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has %d dims, more than the %d tkexport supports", f, n, rank,
                            TK_MAX_DIMS);
    e->rank = rank;
    uint64_t nbytes = e->elem_size;
    int empty = 0, big = 0;
    for (int i = 0; i < rank; i++) {
        uint64_t d;
        if (!json_uint(cJSON_GetArrayItem(shape, i), &d))
            return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has a shape with a dim that is not a non-negative integer",
                                f, n);
        e->shape[i] = (int64_t)d;
        if (d == 0)
            empty = 1;
        else if (__builtin_mul_overflow(nbytes, d, &nbytes))
            big = 1;
    }
    if (empty)
        nbytes = 0;
    else if (big || nbytes > (uint64_t)PTRDIFF_MAX)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' is too large (its byte count overflows)", f, n);
    uint64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(cJSON_GetArrayItem(offs, 0), &b) ||
        !json_uint(cJSON_GetArrayItem(offs, 1), &en))
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has no \"data_offsets\" pair of non-negative integers", f, n);
    e->begin = b;
    e->end = en;
    if (b > en)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has data_offsets [%llu, %llu] that end before they begin", f,
                            n, (unsigned long long)b, (unsigned long long)en);
    if (en > st->data_size)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has data_offsets [%llu, %llu] outside the data section "
                                       "(%llu bytes)", f, n, (unsigned long long)b, (unsigned long long)en,
                            (unsigned long long)st->data_size);
    if (en - b != nbytes)
        return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' has data_offsets [%llu, %llu] (%llu bytes) but a %s tensor "
                                       "of its shape takes %llu bytes", f, n, (unsigned long long)b,
                            (unsigned long long)en, (unsigned long long)(en - b), e->dtype,
                            (unsigned long long)nbytes);
    e->data = st->data + b;
    return 0;
}

static int parse_header(tk_safetensors *st, const unsigned char *buf, size_t size)
{
    const char *f = st->name;
    if (size < 8)
        return tk_error_set(TK_EFORMAT, "'%s' is truncated: %zu bytes, where a safetensors file starts with an 8-byte "
                                       "header length", f, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    if (hlen > TK_SAFETENSORS_MAX_HEADER)
        return tk_error_set(TK_EFORMAT, "'%s': header length %llu is more than the %u bytes allowed (not a safetensors "
                                       "file?)", f, (unsigned long long)hlen, TK_SAFETENSORS_MAX_HEADER);
    if (hlen > size - 8)
        return tk_error_set(TK_EFORMAT, "'%s' is truncated: its header is %llu bytes but only %zu follow the length",
                            f, (unsigned long long)hlen, size - 8);
    const char *json = (const char *)buf + 8;
    size_t j = 0;
    while (j < hlen && (json[j] == ' ' || json[j] == '\t' || json[j] == '\n' || json[j] == '\r'))
        j++;
    if (j == hlen || json[j] != '{')
        return tk_error_set(TK_EFORMAT, "'%s': the header is not a JSON object (it starts with %s)", f,
                            j == hlen ? "nothing" : "something else than '{'");
    const char *end = NULL;
    st->header = cJSON_ParseWithLengthOpts(json, (size_t)hlen, &end, 0);
    if (!st->header) {
        size_t at = end && end >= json && end <= json + hlen ? (size_t)(end - json) : 0;
        return tk_error_set(TK_EFORMAT, "'%s': the header is not valid JSON (at byte %zu of %llu)", f, at,
                            (unsigned long long)hlen);
    }
    for (const char *p = end; p < json + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return tk_error_set(TK_EFORMAT, "'%s': the header has bytes after its JSON object (at byte %zu of %llu)", f,
                                (size_t)(p - json), (unsigned long long)hlen);
    if (!cJSON_IsObject(st->header))
        return tk_error_set(TK_EFORMAT, "'%s': the header is not a JSON object", f);
    st->data = buf + 8 + hlen;
    st->data_size = size - 8 - hlen;

    size_t n = 0;
    for (const cJSON *it = st->header->child; it; it = it->next)
        n++;
    if (n && !(st->entries = calloc(n, sizeof(*st->entries))))
        return tk_error_set(TK_ENOMEM, "out of memory");
    int rc;
    for (const cJSON *it = st->header->child; it; it = it->next) {
        if (!it->string)
            return tk_error_set(TK_EFORMAT, "'%s': the header has an entry without a name", f);
        if (strcmp(it->string, "__metadata__") == 0) {
            if (st->metadata)
                return tk_error_set(TK_EFORMAT, "'%s': the header has \"__metadata__\" twice", f);
            if (!cJSON_IsObject(it))
                return tk_error_set(TK_EFORMAT, "'%s': \"__metadata__\" is not a JSON object", f);
            for (const cJSON *m = it->child; m; m = m->next)
                if (!cJSON_IsString(m))
                    return tk_error_set(TK_EFORMAT, "'%s': \"__metadata__\" value '%s' is not a string", f,
                                        m->string ? m->string : "");
            st->metadata = it;
            continue;
        }
        if ((rc = parse_entry(st, it, &st->entries[st->count])))
            return rc;
        st->count++;
    }
    /* overlaps: in order of offsets, each non-empty tensor starts at or after the previous end */
    if (st->count > 1) /* entries is NULL for an empty header */
        qsort(st->entries, st->count, sizeof(*st->entries), cmp_begin);
    const tk_safetensors_entry *prev = NULL;
    for (size_t i = 0; i < st->count; i++) {
        const tk_safetensors_entry *e = &st->entries[i];
        if (e->begin == e->end)
            continue;
        if (prev && e->begin < prev->end)
            return tk_error_set(TK_EFORMAT, "'%s': tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", f,
                                prev->name, (unsigned long long)prev->begin, (unsigned long long)prev->end, e->name,
                                (unsigned long long)e->begin, (unsigned long long)e->end);
        prev = e;
    }
    if (st->count > 1)
        qsort(st->entries, st->count, sizeof(*st->entries), cmp_name);
    for (size_t i = 1; i < st->count; i++)
        if (strcmp(st->entries[i - 1].name, st->entries[i].name) == 0)
            return tk_error_set(TK_EFORMAT, "'%s': tensor '%s' appears twice in the header", f, st->entries[i].name);
    return 0;
}

int tk_safetensors_parse(tk_safetensors **out, const void *data, size_t size, const char *name)
{
    *out = NULL;
    if (!data && size)
        return tk_error_set(TK_EINVAL, "tk_safetensors_parse: no data");
    tk_safetensors *st = calloc(1, sizeof(*st));
    if (!st || !(st->name = strdup(name ? name : "<buffer>"))) {
        free(st);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    int rc = parse_header(st, data ? data : (const void *)"", size);
    if (rc) {
        tk_safetensors_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

int tk_safetensors_open(tk_safetensors **out, const char *path)
{
    int rc = 0;
    void *map = NULL;
    size_t size = 0;
    *out = NULL;
    if (!path)
        return tk_error_set(TK_EINVAL, "tk_safetensors_open: no path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rc = tk_error_set(TK_EIO, "cannot read '%s': not a regular file", path);
        goto done;
    }
    size = (size_t)sb.st_size;
    if (size > 0 && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        map = NULL;
        rc = tk_error_set(TK_EIO, "cannot map '%s': %s", path, strerror(errno));
        goto done;
    }
    if ((rc = tk_safetensors_parse(out, map, size, path)))
        goto done;
    (*out)->map = map;
    (*out)->map_size = size;
    map = NULL;
done:
    if (map)
        munmap(map, size);
    close(fd);
    return rc;
}

void tk_safetensors_free(tk_safetensors *st)
{
    if (!st)
        return;
    if (st->map)
        munmap(st->map, st->map_size);
    cJSON_Delete(st->header);
    free(st->entries);
    free(st->name);
    free(st);
}

const char *tk_safetensors_name(const tk_safetensors *st) { return st ? st->name : ""; }
size_t tk_safetensors_count(const tk_safetensors *st) { return st ? st->count : 0; }

const tk_safetensors_entry *tk_safetensors_at(const tk_safetensors *st, size_t i)
{
    return st && i < st->count ? &st->entries[i] : NULL;
}

const tk_safetensors_entry *tk_safetensors_find(const tk_safetensors *st, const char *name)
{
    const tk_safetensors_entry *e = NULL;
    if (st && name && st->count) {
        tk_safetensors_entry key;
        key.name = name;
        e = bsearch(&key, st->entries, st->count, sizeof(key), cmp_name);
    }
    if (!e)
        tk_error_set(TK_ENOTFOUND, "'%s' has no tensor '%s'", st ? st->name : "", name ? name : "");
    return e;
}

const char *tk_safetensors_entry_name(const tk_safetensors_entry *e) { return e ? e->name : ""; }

int tk_safetensors_entry_info(const tk_safetensors_entry *e, tk_dtype *dtype, int *rank, int64_t *shape)
{
    if (!e)
        return tk_error_set(TK_EINVAL, "tk_safetensors_entry_info: no entry");
    if (rank)
        *rank = e->rank;
    if (shape)
        memcpy(shape, e->shape, sizeof(int64_t) * (size_t)e->rank);
    if (!e->supported)
        return tk_error_set(TK_EUNSUPPORTED, "tensor '%s' is %s, which tkexport does not support (F32, F16, BF16, I32 "
                                             "or I64)", e->name, e->dtype);
    if (dtype)
        *dtype = e->tk_dtype;
    return 0;
}

const char *tk_safetensors_metadata(const tk_safetensors *st, const char *key)
{
    if (!st || !st->metadata || !key)
        return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int tk_safetensors_load(tk_tensor **out, tk_ctx *ctx, tk_device dev, const tk_safetensors *st,
                        const tk_safetensors_entry *e)
{
    *out = NULL;
    if (!st || !e)
        return tk_error_set(TK_EINVAL, "tk_safetensors_load: no entry");
    if (!e->supported)
        return tk_error_set(TK_EUNSUPPORTED, "'%s': tensor '%s' is %s, which tkexport does not support (F32, F16, "
                                             "BF16, I32 or I64)", st->name, e->name, e->dtype);
    tk_tensor *t = NULL, *view = NULL;
    int rc = tk_tensor_new(&t, ctx, dev, e->tk_dtype, e->rank, e->shape);
    if (rc)
        return rc;
    if (dev.kind == TK_DEVICE_CPU) {
        if (tk_tensor_nbytes(t))
            memcpy(tk_tensor_data(t), e->data, tk_tensor_nbytes(t));
    } else {
        /* a borrowed view of the mapping: tk_tensor_copy only reads it */
        if (!(rc = tk_tensor_wrap(&view, (tk_device){TK_DEVICE_CPU, 0}, e->tk_dtype, e->rank, e->shape,
                                  (void *)(uintptr_t)e->data)))
            rc = tk_tensor_copy(ctx, t, view);
        tk_tensor_free(view);
    }
    if (rc) {
        tk_tensor_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* --- the writer ------------------------------------------------------------------------------ */

typedef struct wentry {
    const char *name;
    const tk_tensor *t;
    uint64_t begin, end;
} wentry;

static int cmp_wname(const void *a, const void *b) { return strcmp(((const wentry *)a)->name, ((const wentry *)b)->name); }

/* Data order: larger elements first, so that every tensor stays aligned to its element size. */
static int cmp_wdata(const void *a, const void *b)
{
    const wentry *x = a, *y = b;
    size_t sx = tk_dtype_size(tk_tensor_dtype(x->t)), sy = tk_dtype_size(tk_tensor_dtype(y->t));
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int json_string(tk_strbuf *sb, const char *s)
{
    int rc = tk_strbuf_adds(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        if (*p == '"' || *p == '\\')
            rc = tk_strbuf_addf(sb, "\\%c", *p);
        else if (*p < 0x20)
            rc = tk_strbuf_addf(sb, "\\u%04x", *p);
        else
            rc = tk_strbuf_add(sb, p, 1);
    }
    return rc ? rc : tk_strbuf_adds(sb, "\"");
}

int tk_safetensors_write_mem(void **out, size_t *size, size_t n, const char *const *names,
                             tk_tensor *const *tensors)
{
    int rc = 0;
    tk_strbuf hdr = TK_STRBUF_INIT;
    unsigned char *buf = NULL;
    *out = NULL;
    *size = 0;
    if (n && (!names || !tensors))
        return tk_error_set(TK_EINVAL, "tk_safetensors_write: no names or tensors");
    wentry *w = calloc(n ? n : 1, sizeof(*w));
    if (!w)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const tk_tensor *t = tensors[i];
        const char *name = names[i];
        if (!name || !name[0] || strcmp(name, "__metadata__") == 0) {
            rc = tk_error_set(TK_EINVAL, "tk_safetensors_write: tensor %zu has the name '%s', which safetensors "
                                         "cannot hold", i, name ? name : "");
            goto done;
        }
        if (!t || t->traced || t->device.kind != TK_DEVICE_CPU) {
            rc = tk_error_set(TK_EINVAL, "tk_safetensors_write: tensor '%s' is %s (only CPU tensors with data can be "
                                         "written)", name, !t ? "NULL" : t->traced ? "traced" : "on a GPU");
            goto done;
        }
        if (!st_name_of(t->dtype)) {
            rc = tk_error_set(TK_EINVAL, "tk_safetensors_write: tensor '%s' has unknown dtype %d", name, (int)t->dtype);
            goto done;
        }
        w[i] = (wentry){name, t, 0, 0};
    }
    qsort(w, n, sizeof(*w), cmp_wname);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(w[i - 1].name, w[i].name) == 0) {
            rc = tk_error_set(TK_EINVAL, "tk_safetensors_write: tensor name '%s' is given twice", w[i].name);
            goto done;
        }
    }
    /* offsets in data order, then the header in name order */
    qsort(w, n, sizeof(*w), cmp_wdata);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        w[i].begin = off;
        if (__builtin_add_overflow(off, (uint64_t)w[i].t->nbytes, &off)) {
            rc = tk_error_set(TK_EINVAL, "tk_safetensors_write: the tensors are too large together");
            goto done;
        }
        w[i].end = off;
    }
    qsort(w, n, sizeof(*w), cmp_wname);
    rc = tk_strbuf_adds(&hdr, "{");
    for (size_t i = 0; i < n && !rc; i++) {
        const tk_tensor *t = w[i].t;
        if (i)
            rc |= tk_strbuf_adds(&hdr, ",");
        rc |= json_string(&hdr, w[i].name);
        rc |= tk_strbuf_addf(&hdr, ":{\"dtype\":\"%s\",\"shape\":[", st_name_of(t->dtype));
        for (int d = 0; d < t->rank; d++)
            rc |= tk_strbuf_addf(&hdr, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        rc |= tk_strbuf_addf(&hdr, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)w[i].begin,
                             (unsigned long long)w[i].end);
    }
    rc |= tk_strbuf_adds(&hdr, "}");
    while (!rc && (8 + hdr.len) % 8)
        rc = tk_strbuf_adds(&hdr, " ");
    if (rc) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    size_t total;
    if (__builtin_add_overflow(8 + hdr.len, (size_t)off, &total) || !(buf = malloc(total ? total : 1))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory for a %llu-byte safetensors image",
                          (unsigned long long)(8 + hdr.len + off));
        goto done;
    }
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)hdr.len >> (8 * b));
    memcpy(buf + 8, hdr.buf, hdr.len);
    for (size_t i = 0; i < n; i++)
        if (w[i].t->nbytes)
            memcpy(buf + 8 + hdr.len + w[i].begin, w[i].t->data, w[i].t->nbytes);
    *out = buf;
    *size = total;
    buf = NULL;
done:
    free(buf);
    free(w);
    tk_strbuf_release(&hdr);
    return rc;
}

int tk_safetensors_write(const char *path, size_t n, const char *const *names, tk_tensor *const *tensors)
{
    void *buf;
    size_t size;
    if (!path)
        return tk_error_set(TK_EINVAL, "tk_safetensors_write: no path");
    int rc = tk_safetensors_write_mem(&buf, &size, n, names, tensors);
    if (rc)
        return rc;
    rc = tk_file_write_atomic(path, buf, size);
    free(buf);
    return rc;
}
