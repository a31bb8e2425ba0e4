/* The .tkpkg format in both directions. Reading: manifest.sig's signature of manifest.json checked
 * against the trusted keys first, then manifest.json parsed and checked, every entry's name, size
 * and SHA-256 verified against it before the call returns, program.json parsed, the op tables
 * compared. Writing: the manifest made from the same structs, every digest computed, the
 * manifest signed, the entries zipped reproducibly. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "fsutil.h"
#include "pkgfile.h"
#include "rt_internal.h"
#include "sha256.h"
#include "strbuf.h"
#include "zipfile.h"

#define PKG_MAX_FILE ((size_t)1 << 40)

typedef struct reader {
    tk_pkgfile *f;
    const char *origin;
    int in_place; /* stored entries point into the archive's buffer, which the file keeps */
    const tk_pkgfile_trust *trust;
} reader;

static int bad(const reader *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int bad(const reader *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tk_error_set(TK_EFORMAT, "%s: %s", r->origin, msg);
}

static char *dup_or_null(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = 1;
    return d;
}

/* A string member (required), copied. */
static int get_str(const reader *r, const cJSON *obj, const char *key, char **out, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0])
        return bad(r, "manifest.json: %s: '%s' is missing or not a non-empty string", where, key);
    if (!(*out = strdup(v->valuestring)))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    return 0;
}

/* A string member that may be null. */
static int get_str_or_null(const reader *r, const cJSON *obj, const char *key, char **out, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (cJSON_IsNull(v))
        return 0;
    return get_str(r, obj, key, out, where);
}

static int get_array(const reader *r, const cJSON *obj, const char *key, const cJSON **out, size_t *n,
                     size_t max, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsArray(v))
        return bad(r, "manifest.json: %s: '%s' is missing or not an array", where, key);
    int count = cJSON_GetArraySize(v);
    if (count < 0 || (size_t)count > max)
        return bad(r, "manifest.json: %s: '%s' has %d items, more than the %zu allowed", where, key, count, max);
    *out = v;
    *n = (size_t)count;
    return 0;
}

/* "sm_90", "sm_90a", "sm_100": a real architecture nvcc names. */
static int valid_arch(const char *s, const char *prefix)
{
    size_t p = strlen(prefix);
    if (strncmp(s, prefix, p) != 0)
        return 0;
    s += p;
    size_t digits = 0;
    while (isdigit((unsigned char)s[digits]))
        digits++;
    if (digits < 2 || digits > 3)
        return 0;
    return s[digits] == '\0' || (s[digits] == 'a' && s[digits + 1] == '\0') ||
           (s[digits] == 'f' && s[digits + 1] == '\0');
}

/* An entry name a reader may trust: relative, '/'-separated, no empty, '.' or '..' segment,
 * printable ASCII. */
static int safe_path(const char *p)
{
    if (!p[0] || p[0] == '/' || strlen(p) > 1024)
        return 0;
    for (const char *c = p; *c; c++)
        if (*c == '\\' || (unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            return 0;
    const char *seg = p;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
            return 0;
        if (!end)
            return 1;
        seg = end + 1;
    }
}

static int is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return s[64] == '\0';
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tk_pkg_entry *)a)->path, ((const tk_pkg_entry *)b)->path);
}
static int cmp_kernel(const void *a, const void *b)
{
    return strcmp(((const tk_pkg_kernel *)a)->name, ((const tk_pkg_kernel *)b)->name);
}
static int cmp_op(const void *a, const void *b)
{
    return strcmp(((const tk_pkg_op *)a)->name, ((const tk_pkg_op *)b)->name);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* An entry's optional "chunks": {"size": bytes, "sha256": [one digest per chunk]}, the chunk size
 * a power of two from 1 MiB to 1 GiB and exactly as many digests as chunks. */
static int read_chunks(reader *r, const cJSON *e, tk_pkg_entry *x, const char *where)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "chunks");
    if (!c)
        return 0;
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(c, "size");
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, "sha256");
    double v = cJSON_IsNumber(size) ? size->valuedouble : 0;
    uint64_t cs = v >= (double)(1u << 20) && v <= (double)(1u << 30) ? (uint64_t)v : 0;
    if (!cJSON_IsObject(c) || !cs || (cs & (cs - 1)) || (double)cs != v)
        return bad(r, "manifest.json: %s: 'chunks' needs a 'size' that is a power of two from 1 MiB to 1 GiB", where);
    size_t want = (size_t)((x->size + cs - 1) / cs);
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != want)
        return bad(r, "manifest.json: %s: 'chunks' needs %zu digests in 'sha256' for %llu bytes in chunks of %llu",
                   where, want, (unsigned long long)x->size, (unsigned long long)cs);
    if (!(x->chunk_sha256 = calloc(want + 1, sizeof(*x->chunk_sha256))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    x->chunk_size = cs;
    x->nchunks = want;
    size_t i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, arr)
    {
        if (!cJSON_IsString(d) || strlen(d->valuestring) != 64 || !is_hex64(d->valuestring))
            return bad(r, "manifest.json: %s: chunk %zu's digest is not 64 lowercase hex digits", where, i);
        memcpy(x->chunk_sha256[i++], d->valuestring, 65);
    }
    return 0;
}

static int read_entries(reader *r, const cJSON *doc)
{
    tk_pkgfile *f = r->f;
    const cJSON *arr;
    size_t n = 0;
    int rc = get_array(r, doc, "entries", &arr, &n, TK_TKPKG_MAX_ENTRIES, "top level");
    if (rc)
        return rc;
    if (!(f->entries = calloc(n + 1, sizeof(*f->entries))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        tk_pkg_entry *x = &f->entries[f->nentries++];
        char where[64];
        snprintf(where, sizeof where, "entries[%zu]", f->nentries - 1);
        char *sha = NULL;
        if ((rc = get_str(r, e, "path", &x->path, where)) || (rc = get_str(r, e, "sha256", &sha, where)))
            return rc;
        int ok = strlen(sha) == 64 && is_hex64(sha);
        if (ok)
            memcpy(x->sha256, sha, 65);
        free(sha);
        if (!ok)
            return bad(r, "manifest.json: %s: 'sha256' is not 64 lowercase hex digits", where);
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
        if (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble != floor(size->valuedouble) ||
            size->valuedouble > (double)TK_TKPKG_MAX_ENTRY)
            return bad(r, "manifest.json: %s: 'size' is missing or not a whole number in [0, 2^36]", where);
        x->size = (uint64_t)size->valuedouble;
        if (!safe_path(x->path) || !strcmp(x->path, TK_TKPKG_MANIFEST) || !strcmp(x->path, TK_TKPKG_SIGNATURE))
            return bad(r, "manifest.json: entry name '%s' is not a safe relative path", x->path);
        if ((rc = read_chunks(r, e, x, where)))
            return rc;
    }
    qsort(f->entries, f->nentries, sizeof(*f->entries), cmp_entry);
    for (size_t i = 1; i < f->nentries; i++)
        if (!strcmp(f->entries[i - 1].path, f->entries[i].path))
            return bad(r, "manifest.json: entry '%s' is listed twice", f->entries[i].path);
    return 0;
}

static int read_kernels(reader *r, const cJSON *doc)
{
    tk_pkgfile *f = r->f;
    const cJSON *arr, *k;
    size_t n = 0;
    int rc = get_array(r, doc, "kernels", &arr, &n, 1u << 16, "top level");
    if (rc)
        return rc;
    if (!(f->kernels = calloc(n + 1, sizeof(*f->kernels))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    cJSON_ArrayForEach(k, arr)
    {
        tk_pkg_kernel *x = &f->kernels[f->nkernels++];
        char where[64];
        snprintf(where, sizeof where, "kernels[%zu]", f->nkernels - 1);
        if ((rc = get_str(r, k, "name", &x->name, where)) || (rc = get_str(r, k, "fatbin", &x->fatbin, where)) ||
            (rc = get_str(r, k, "source", &x->source, where)))
            return rc;
    }
    qsort(f->kernels, f->nkernels, sizeof(*f->kernels), cmp_kernel);
    for (size_t i = 1; i < f->nkernels; i++)
        if (!strcmp(f->kernels[i - 1].name, f->kernels[i].name))
            return bad(r, "manifest.json: kernel '%s' is listed twice", f->kernels[i].name);
    return 0;
}

static int read_ops(reader *r, const cJSON *doc)
{
    tk_pkgfile *f = r->f;
    const cJSON *arr, *o;
    size_t n = 0;
    int rc = get_array(r, doc, "ops", &arr, &n, 1u << 16, "top level");
    if (rc)
        return rc;
    if (!(f->ops = calloc(n + 1, sizeof(*f->ops))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    cJSON_ArrayForEach(o, arr)
    {
        tk_pkg_op *x = &f->ops[f->nops++];
        char where[64];
        snprintf(where, sizeof where, "ops[%zu]", f->nops - 1);
        if ((rc = get_str(r, o, "name", &x->name, where)))
            return rc;
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "builtin");
        if (!cJSON_IsBool(b))
            return bad(r, "manifest.json: op '%s': 'builtin' is missing or not true/false", x->name);
        x->builtin = cJSON_IsTrue(b);
        const cJSON *ks, *k;
        size_t nk = 0;
        if ((rc = get_array(r, o, "kernels", &ks, &nk, 1u << 16, where)))
            return rc;
        if (!(x->kernels = calloc(nk + 1, sizeof(char *))))
            return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        cJSON_ArrayForEach(k, ks)
        {
            if (!cJSON_IsString(k) || !k->valuestring[0])
                return bad(r, "manifest.json: op '%s': a kernel name is not a non-empty string", x->name);
            if (!(x->kernels[x->nkernels++] = strdup(k->valuestring)))
                return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        }
        qsort(x->kernels, x->nkernels, sizeof(char *), cmp_str);
    }
    qsort(f->ops, f->nops, sizeof(*f->ops), cmp_op);
    for (size_t i = 1; i < f->nops; i++)
        if (!strcmp(f->ops[i - 1].name, f->ops[i].name))
            return bad(r, "manifest.json: op '%s' is listed twice", f->ops[i].name);
    return 0;
}

static int read_tuning(reader *r, const cJSON *doc);

/* The manifest's format and version: a version 1 package (unsigned, from before signatures) is
 * told to recompile. */
static int check_header(reader *r, const cJSON *doc)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TK_TKPKG_FORMAT) != 0)
        return bad(r, "not a tkpkg file (manifest.json has format '%s', expected '" TK_TKPKG_FORMAT "')",
                   cJSON_IsString(fmt) ? fmt->valuestring : "?");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != floor(ver->valuedouble) || fabs(ver->valuedouble) > 1e6)
        return bad(r, "manifest.json: 'version' is missing or not a whole number");
    if (ver->valuedouble < TK_TKPKG_VERSION)
        return tk_error_set(TK_EFORMAT, "%s is a version %d package; this runtime reads version %d (recompile it with "
                                       "tkexport compile)", r->origin, (int)ver->valuedouble, TK_TKPKG_VERSION);
    if (ver->valuedouble > TK_TKPKG_VERSION)
        return tk_error_set(TK_EFORMAT, "%s is a version %d package; this runtime reads version %d (open it with the "
                                       "tkexport that wrote it or a newer one)", r->origin, (int)ver->valuedouble,
                            TK_TKPKG_VERSION);
    return 0;
}

static int read_manifest(reader *r, const char *text, size_t len)
{
    tk_pkgfile *f = r->f;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc || !cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return bad(r, "manifest.json is not valid JSON");
    }
    int rc = 0, failed = 0;
    if ((rc = check_header(r, doc)))
        goto done;
    if ((rc = get_str(r, doc, "tkexport", &f->tkexport, "top level")) ||
        (rc = get_str(r, doc, "program", &f->program_name, "top level")) ||
        (rc = get_str_or_null(r, doc, "ptx", &f->ptx, "top level")) ||
        (rc = get_str_or_null(r, doc, "host", &f->host, "top level")))
        goto done;
    if (f->ptx && !valid_arch(f->ptx, "compute_")) {
        rc = bad(r, "manifest.json: 'ptx' is '%s', expected compute_XX", f->ptx);
        goto done;
    }
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(doc, "compilers");
    if (!cJSON_IsObject(comp)) {
        rc = bad(r, "manifest.json: 'compilers' is missing or not an object");
        goto done;
    }
    if ((rc = get_str_or_null(r, comp, "nvcc", &f->nvcc, "compilers")) ||
        (rc = get_str_or_null(r, comp, "cc", &f->cc, "compilers")))
        goto done;
    const cJSON *archs, *a;
    size_t na = 0;
    if ((rc = get_array(r, doc, "architectures", &archs, &na, 64, "top level")))
        goto done;
    if (!(f->archs = calloc(na + 1, sizeof(char *)))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        goto done;
    }
    cJSON_ArrayForEach(a, archs)
    {
        if (!cJSON_IsString(a) || !valid_arch(a->valuestring, "sm_")) {
            rc = bad(r, "manifest.json: architecture '%s' is not sm_XX", cJSON_IsString(a) ? a->valuestring : "?");
            goto done;
        }
        f->archs[f->narchs++] = dup_or_null(a->valuestring, &failed);
    }
    if (failed) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        goto done;
    }
    if ((rc = read_entries(r, doc)) || (rc = read_kernels(r, doc)) || (rc = read_ops(r, doc)) ||
        (rc = read_tuning(r, doc)))
        goto done;
done:
    cJSON_Delete(doc);
    return rc;
}

/* tuning[] (optional): tuned kernels, each checked against the entries and its own sizes. */
static int read_tune(reader *r, const cJSON *o, tk_pkg_tune *t, size_t index)
{
    char where[64];
    snprintf(where, sizeof where, "tuning[%zu]", index);
    int rc;
    if ((rc = get_str(r, o, "kernel", &t->kernel, where)) || (rc = get_str(r, o, "key", &t->key, where)) ||
        (rc = get_str_or_null(r, o, "device", &t->device, where)) ||
        (rc = get_str_or_null(r, o, "driver", &t->driver, where)))
        return rc;
    const cJSON *params, *configs, *fatbins, *table, *x;
    size_t np = 0, nc = 0, nf = 0, nt = 0;
    if ((rc = get_array(r, o, "params", &params, &np, TK_TUNE_MAX_PARAMS, where)) ||
        (rc = get_array(r, o, "configs", &configs, &nc, TK_TUNE_MAX_CONFIGS, where)) ||
        (rc = get_array(r, o, "fatbins", &fatbins, &nf, TK_TUNE_MAX_CONFIGS, where)) ||
        (rc = get_array(r, o, "table", &table, &nt, TK_TUNE_BUCKETS, where)))
        return rc;
    t->nh = 1;
    const cJSON *heur = cJSON_GetObjectItemCaseSensitive(o, "heuristic");
    if (heur && !cJSON_IsNull(heur)) {
        const cJSON *hv, *x2;
        size_t nv = 0;
        if ((rc = get_str(r, heur, "param", &t->hparam, where)) ||
            (rc = get_array(r, heur, "values", &hv, &nv, TK_TUNE_MAX_CONFIGS, where)))
            return rc;
        if (!nv)
            return bad(r, "manifest.json: %s: kernel '%s' has a heuristic without values", where, t->kernel);
        t->nh = 0;
        cJSON_ArrayForEach(x2, hv)
        {
            if (!cJSON_IsNumber(x2) || x2->valuedouble != floor(x2->valuedouble) || fabs(x2->valuedouble) > 1e9)
                return bad(r, "manifest.json: %s: a heuristic value of kernel '%s' is not an integer", where, t->kernel);
            t->hvalues[t->nh++] = (int)x2->valuedouble;
        }
    }
    if (!np || !nc || nc * (size_t)t->nh > TK_TUNE_MAX_CONFIGS || (nf != (size_t)t->nh && nf != nc * (size_t)t->nh))
        return bad(r, "manifest.json: %s: kernel '%s' needs parameters, configurations and a fatbin per variant (%d, "
                   "or %zu with every configuration)", where, t->kernel, t->nh, nc * (size_t)t->nh);
    t->nparams = (int)np;
    t->nconfigs = (int)nc;
    int k = 0;
    cJSON_ArrayForEach(x, params)
    {
        if (!cJSON_IsString(x))
            return bad(r, "manifest.json: %s: a parameter name is not a string", where);
        if (!(t->params[k++] = strdup(x->valuestring)))
            return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    }
    int c = 0;
    cJSON_ArrayForEach(x, configs)
    {
        if (cJSON_GetArraySize(x) != t->nparams)
            return bad(r, "manifest.json: %s: configuration %d does not have %d values", where, c, t->nparams);
        for (int k = 0; k < t->nparams; k++) {
            const cJSON *v = cJSON_GetArrayItem(x, k);
            if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 1e9)
                return bad(r, "manifest.json: %s: configuration %d holds a value that is not an integer", where, c);
            t->values[c][k] = (int)v->valuedouble;
        }
        c++;
    }
    cJSON_ArrayForEach(x, fatbins)
    {
        char want[32];
        size_t i = t->nfatbins;
        snprintf(want, sizeof want, "@c%zu.fatbin", i);
        if (!cJSON_IsString(x) || !tk_pkgfile_entry(r->f, x->valuestring))
            return bad(r, "manifest.json: %s: fatbin %zu of kernel '%s' is not an entry of the package", where, i,
                       t->kernel);
        size_t len = strlen(x->valuestring), wl = strlen(want);
        if (i && (len < wl || strcmp(x->valuestring + len - wl, want) != 0))
            return bad(r, "manifest.json: %s: fatbin %zu of kernel '%s' is '%s', expected a name ending in '%s'",
                       where, i, t->kernel, x->valuestring, want);
        if (!(t->fatbins[t->nfatbins++] = strdup(x->valuestring)))
            return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "measured");
    if (!cJSON_IsBool(m))
        return bad(r, "manifest.json: %s: 'measured' is missing or not true/false", where);
    t->measured = cJSON_IsTrue(m);
    if (nt && !(t->rows = calloc(nt, sizeof(*t->rows))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    cJSON_ArrayForEach(x, table)
    {
        tk_pkg_tune_row *row = &t->rows[t->nrows];
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(x, "bucket"), *w = cJSON_GetObjectItemCaseSensitive(x, "winner");
        const cJSON *kv = cJSON_GetObjectItemCaseSensitive(x, "key"), *times = cJSON_GetObjectItemCaseSensitive(x, "times_us");
        if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble >= TK_TUNE_BUCKETS || !cJSON_IsNumber(w) ||
            w->valuedouble < 0 || w->valuedouble >= (double)(t->nfatbins / (size_t)t->nh) || !cJSON_IsNumber(kv) ||
            cJSON_GetArraySize(times) != t->nconfigs)
            return bad(r, "manifest.json: %s: table row %zu of kernel '%s' is malformed (bucket 0..%d, a winner among "
                       "the %zu compiled configurations, a time per configuration)", where, t->nrows, t->kernel,
                       TK_TUNE_BUCKETS - 1, t->nfatbins / (size_t)t->nh);
        row->bucket = (int)b->valuedouble;
        row->winner = (int)w->valuedouble;
        row->key = (int64_t)kv->valuedouble;
        for (int cfg = 0; cfg < t->nconfigs; cfg++)
            row->times_us[cfg] = cJSON_GetNumberValue(cJSON_GetArrayItem(times, cfg));
        t->nrows++;
    }
    /* every bucket takes the winner of the nearest measured one */
    for (int bucket = 0; bucket < TK_TUNE_BUCKETS; bucket++) {
        int best = -1, dist = 0;
        for (size_t i = 0; i < t->nrows; i++) {
            int d = abs(t->rows[i].bucket - bucket);
            if (best < 0 || d < dist || (d == dist && t->rows[i].bucket < t->rows[best].bucket))
                best = (int)i, dist = d;
        }
        t->table[bucket] = (signed char)(best < 0 ? 0 : t->rows[best].winner);
    }
    return 0;
}

static int read_tuning(reader *r, const cJSON *doc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "tuning"), *o;
    if (!arr)
        return 0;
    size_t n = 0;
    int rc = get_array(r, doc, "tuning", &arr, &n, 1024, "top level");
    if (rc)
        return rc;
    if (!(r->f->tunes = calloc(n + 1, sizeof(*r->f->tunes))))
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    cJSON_ArrayForEach(o, arr)
    {
        tk_pkg_tune *t = &r->f->tunes[r->f->ntunes++];
        if ((rc = read_tune(r, o, t, r->f->ntunes - 1)))
            return rc;
        if (!tk_pkgfile_kernel(r->f, t->kernel))
            return bad(r, "manifest.json: tuned kernel '%s' is not in the kernel table", t->kernel);
    }
    return 0;
}

/* The archive holds exactly manifest.json, manifest.sig (sig_idx, or n when unsigned) and the
 * listed entries, each of its size and digest. */
/* Every byte of every entry against the manifest, all digests at once over the CPU's cores: the
 * chunks of an entry that has them (each chunk a job), else the whole entry. The first mismatch
 * in entry order is reported. */
static int verify_digests(reader *r)
{
    tk_pkgfile *f = r->f;
    size_t njobs = 0;
    for (size_t i = 0; i < f->nentries; i++)
        njobs += f->entries[i].chunk_sha256 ? f->entries[i].nchunks : 1;
    tk_sha256_job *jobs = calloc(njobs + 1, sizeof(*jobs));
    if (!jobs)
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    size_t k = 0;
    for (size_t i = 0; i < f->nentries; i++) {
        const tk_pkg_entry *e = &f->entries[i];
        if (!e->chunk_sha256) {
            jobs[k++] = (tk_sha256_job){e->data, (size_t)e->size, ""};
            continue;
        }
        for (size_t c = 0; c < e->nchunks; c++) {
            uint64_t at = c * e->chunk_size, n = e->size - at < e->chunk_size ? e->size - at : e->chunk_size;
            jobs[k++] = (tk_sha256_job){e->data + at, (size_t)n, ""};
        }
    }
    int rc = tk_sha256_hex_many(jobs, njobs, 0);
    k = 0;
    for (size_t i = 0; i < f->nentries && !rc; i++) {
        const tk_pkg_entry *e = &f->entries[i];
        if (!e->chunk_sha256) {
            const char *hex = jobs[k++].hex;
            if (strcmp(hex, e->sha256) != 0)
                rc = bad(r, "entry '%s' has SHA-256 %.12s..., the manifest says %.12s...", e->path, hex, e->sha256);
            continue;
        }
        for (size_t c = 0; c < e->nchunks && !rc; c++) {
            const char *hex = jobs[k++].hex;
            if (strcmp(hex, e->chunk_sha256[c]) != 0)
                rc = bad(r, "entry '%s' chunk %zu (bytes from %llu) has SHA-256 %.12s..., the manifest says %.12s...",
                         e->path, c, (unsigned long long)(c * e->chunk_size), hex, e->chunk_sha256[c]);
        }
    }
    free(jobs);
    return rc;
}

static int read_entry_bytes(reader *r, tk_zip_reader *z, size_t manifest_idx, size_t sig_idx)
{
    tk_pkgfile *f = r->f;
    size_t n = tk_zip_count(z);
    unsigned char *seen = calloc(f->nentries + 1, 1);
    if (!seen)
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i == manifest_idx || i == sig_idx)
            continue;
        const char *name = tk_zip_name(z, i);
        if (!name) {
            rc = bad(r, "entry %zu has no name", i);
            break;
        }
        tk_pkg_entry key = {.path = (char *)name};
        tk_pkg_entry *e = bsearch(&key, f->entries, f->nentries, sizeof(*e), cmp_entry);
        if (!e) {
            rc = bad(r, "entry '%s' is not listed in manifest.json", name);
            break;
        }
        if (seen[e - f->entries]) {
            rc = bad(r, "entry '%s' appears twice", name);
            break;
        }
        seen[e - f->entries] = 1;
        uint64_t size;
        if ((rc = tk_zip_size(z, i, &size)))
            break;
        if (size != e->size) {
            rc = bad(r, "entry '%s' is %llu bytes, the manifest says %llu", name, (unsigned long long)size,
                     (unsigned long long)e->size);
            break;
        }
        int json = !strcmp(e->path, "program.json");
        size_t len;
        const unsigned char *span;
        if (!json && r->in_place && tk_zip_stored_span(z, i, &span, &len) == 0) {
            e->data = (unsigned char *)span; /* read-only mapping: never written */
            e->mapped = 1;
        } else if ((rc = tk_zip_read(z, i, json ? TK_TKPKG_MAX_JSON : TK_TKPKG_MAX_ENTRY, &e->data, &len))) {
            break;
        }
    }
    for (size_t i = 0; i < f->nentries && !rc; i++)
        if (!seen[i])
            rc = bad(r, "entry '%s' listed in manifest.json is missing", f->entries[i].path);
    free(seen);
    return rc ? rc : verify_digests(r);
}

/* program.json parsed; its op table and the manifest's agree; every kernel an op needs is in a
 * fatbin entry; the host object is an entry. */
static int check_program(reader *r)
{
    tk_pkgfile *f = r->f;
    const tk_pkg_entry *pj = tk_pkgfile_entry(f, "program.json");
    if (!pj)
        return bad(r, "no program.json");
    int rc = tk_program_json_read(&f->program, (const char *)pj->data, (size_t)pj->size, r->origin);
    if (rc)
        return rc;
    const tk_program_model *m = f->program;
    if (strcmp(m->name, f->program_name) != 0)
        return bad(r, "manifest.json names program '%s', program.json '%s'", f->program_name, m->name);
    if (m->nops != f->nops)
        return bad(r, "manifest.json lists %zu ops, program.json %zu", f->nops, m->nops);
    for (size_t i = 0; i < m->nops; i++) {
        const tk_pm_op *po = &m->ops[i];
        tk_pkg_op key = {.name = po->name};
        const tk_pkg_op *o = bsearch(&key, f->ops, f->nops, sizeof(*o), cmp_op);
        if (!o)
            return bad(r, "op '%s' of program.json is not in manifest.json", po->name);
        if (o->builtin != (po->builtin != 0))
            return bad(r, "op '%s' is built in according to one of manifest.json and program.json only", po->name);
        for (size_t k = 0; k < o->nkernels; k++) {
            const tk_pkg_kernel *kk = tk_pkgfile_kernel(f, o->kernels[k]);
            if (!kk)
                return bad(r, "kernel '%s' of op '%s' is not in the manifest's kernel table", o->kernels[k], o->name);
            if (!tk_pkgfile_entry(f, kk->fatbin))
                return bad(r, "kernel '%s' of op '%s': its fatbin '%s' is not in the package", kk->name, o->name,
                           kk->fatbin);
        }
        for (size_t k = 0; k < po->nkernels; k++)
            if (!bsearch(&po->kernels[k], o->kernels, o->nkernels, sizeof(char *), cmp_str))
                return bad(r, "kernel '%s' of op '%s' is missing from the package", po->kernels[k], po->name);
    }
    if (f->host && !tk_pkgfile_entry(f, f->host))
        return bad(r, "the host object '%s' is not in the package", f->host);
    return 0;
}

/* --- the signature --------------------------------------------------------------------------- */

/* A string member of manifest.sig, or NULL. */
/* manifest.sig: parsed, its signature of TK_TKPKG_SIG_DOMAIN + manifest.json verified, the signer
 * recorded in the file and checked against the trusted keys. Nothing of manifest.json has been
 * parsed yet. */
static int check_signature(reader *r, const unsigned char *manifest, size_t mlen, const unsigned char *sig,
                           size_t slen)
{
    tk_pkgfile *f = r->f;
    const tk_package_options *opts = r->trust ? r->trust->opts : NULL;
    cJSON *doc = cJSON_ParseWithLength((const char *)sig, slen);
    unsigned char raw[TK_SIGN_BYTES + 3], *msg = NULL;
    size_t nraw = 0, dl = strlen(TK_TKPKG_SIG_DOMAIN);
    tk_sign_public pub;
    tk_trust trust = {0};
    int rc = 0;
    const char *fmt = tk_json_str(doc, "format", NULL), *alg = tk_json_str(doc, "algorithm", NULL);
    const char *key = tk_json_str(doc, "public_key", NULL), *sigtext = tk_json_str(doc, "signature", NULL);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!cJSON_IsObject(doc)) {
        rc = bad(r, "manifest.sig is malformed: not a JSON object");
        goto done;
    }
    if (!fmt || strcmp(fmt, TK_TKPKG_SIG_FORMAT) != 0 || !cJSON_IsNumber(ver) ||
        ver->valuedouble != TK_TKPKG_SIG_VERSION) {
        rc = bad(r, "manifest.sig is malformed: expected format '" TK_TKPKG_SIG_FORMAT "' version %d",
                 TK_TKPKG_SIG_VERSION);
        goto done;
    }
    if (!alg || strcmp(alg, "ed25519") != 0) {
        rc = bad(r, "manifest.sig is malformed: algorithm '%s', expected 'ed25519'", alg ? alg : "?");
        goto done;
    }
    if (!key || tk_sign_public_parse(&pub, key, strlen(key)) != 0) {
        rc = bad(r, "manifest.sig is malformed: 'public_key' is not ed25519: and the base64 of 32 bytes");
        goto done;
    }
    if (!sigtext || tk_base64_decode(raw, sizeof raw, &nraw, sigtext, strlen(sigtext)) != 0 || nraw != TK_SIGN_BYTES) {
        rc = bad(r, "manifest.sig is malformed: 'signature' is not the base64 of 64 bytes");
        goto done;
    }
    tk_sign_public_format(&pub, f->signer_key);
    tk_sign_public_id(&pub, f->signer_id);
    if (!(msg = malloc(dl + mlen + 1))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        goto done;
    }
    memcpy(msg, TK_TKPKG_SIG_DOMAIN, dl);
    memcpy(msg + dl, manifest, mlen);
    if ((rc = tk_sign_verify(&pub, raw, msg, dl + mlen)) == 1) {
        rc = bad(r, "signature does not match the manifest (manifest.json was changed after key %s signed it, or "
                    "the signature was made for another manifest)", f->signer_id);
        goto done;
    }
    if (rc)
        goto done;
    size_t n = strlen(f->signer_key) + strlen(f->signer_id) + 16;
    if (!(f->signer = malloc(n))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", r->origin);
        goto done;
    }
    snprintf(f->signer, n, "%s (key id %s)", f->signer_key, f->signer_id);
    if ((rc = tk_trust_load(&trust, opts ? opts->trusted_keys : NULL, opts ? opts->ignore_default_trust : 0)))
        goto done;
    f->trusted = tk_trust_has(&trust, &pub);
    if (!f->trusted && !(r->trust && r->trust->report_only))
        rc = tk_error_set(TK_EINVAL, "%s is signed by key %s (%s), which is not trusted on this machine (trusted keys "
                                     "come from %s; add the key there if you trust whoever holds it)",
                          r->origin, f->signer_id, f->signer_key, trust.sources);
done:
    tk_trust_release(&trust);
    free(msg);
    cJSON_Delete(doc);
    return rc;
}

/* An unsigned package: its header checked first, so that a version 1 package (from before
 * signatures) is told to recompile, then refused unless unsigned packages are allowed. */
static int check_unsigned(reader *r, const unsigned char *manifest, size_t mlen)
{
    cJSON *doc = cJSON_ParseWithLength((const char *)manifest, mlen);
    int rc = !cJSON_IsObject(doc) ? bad(r, "manifest.json is not valid JSON") : check_header(r, doc);
    cJSON_Delete(doc);
    const tk_package_options *opts = r->trust ? r->trust->opts : NULL;
    if (!rc && !(opts && opts->allow_unsigned) && !(r->trust && r->trust->report_only))
        rc = tk_error_set(TK_EINVAL, "%s is not signed; refusing to run it (sign it with tkexport compile --sign-key, "
                                     "or allow unsigned packages explicitly: tkexport run --allow-unsigned, "
                                     "tk_package_options.allow_unsigned)", r->origin);
    return rc;
}

/* The index of the entry named name in *idx (n when there is none); TK_EINVAL when it is there
 * twice. */
static int find_entry(reader *r, tk_zip_reader *z, const char *name, size_t *idx)
{
    size_t n = tk_zip_count(z), found = 0;
    *idx = n;
    for (size_t i = 0; i < n; i++) {
        const char *e = tk_zip_name(z, i);
        if (e && !strcmp(e, name)) {
            *idx = i;
            found++;
        }
    }
    return found > 1 ? bad(r, "entry '%s' appears twice", name) : 0;
}

static int read_archive(tk_pkgfile **out, const void *data, size_t len, const char *origin, int in_place,
                        const tk_pkgfile_trust *trust)
{
    *out = NULL;
    const tk_package_options *opts = trust ? trust->opts : NULL;
    if (opts && opts->version != TK_PACKAGE_OPTIONS_VERSION)
        return tk_error_set(TK_EINVAL, "tk_package_options version %u; this libtkrt knows version %d (initialize "
                                       "them with TK_PACKAGE_OPTIONS_INIT)", opts->version, TK_PACKAGE_OPTIONS_VERSION);
    tk_pkgfile *f = calloc(1, sizeof(*f));
    if (!f || !(f->origin = strdup(origin))) {
        free(f);
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", origin);
    }
    reader r = {f, f->origin, in_place, trust};
    tk_zip_reader *z = NULL;
    unsigned char *manifest = NULL, *sig = NULL;
    size_t manifest_len = 0, manifest_idx = 0, sig_len = 0, sig_idx = 0;
    int rc = tk_zip_open(&z, data, len, f->origin, ".tkpkg", TK_TKPKG_MAX_ENTRIES + 1);
    if (rc || (rc = find_entry(&r, z, TK_TKPKG_MANIFEST, &manifest_idx)) ||
        (rc = find_entry(&r, z, TK_TKPKG_SIGNATURE, &sig_idx)))
        goto done;
    if (manifest_idx == tk_zip_count(z)) {
        rc = bad(&r, "is not a .tkpkg (no manifest.json)");
        goto done;
    }
    /* the signature before anything else of the package matters */
    if ((rc = tk_zip_read(z, manifest_idx, TK_TKPKG_MAX_JSON, &manifest, &manifest_len)))
        goto done;
    if (sig_idx < tk_zip_count(z)) {
        if ((rc = tk_zip_read(z, sig_idx, TK_TKPKG_MAX_SIG, &sig, &sig_len)) ||
            (rc = check_signature(&r, manifest, manifest_len, sig, sig_len)))
            goto done;
    } else if ((rc = check_unsigned(&r, manifest, manifest_len))) {
        goto done;
    }
    if ((rc = read_manifest(&r, (const char *)manifest, manifest_len)) ||
        (rc = read_entry_bytes(&r, z, manifest_idx, sig_idx)) || (rc = check_program(&r)))
        goto done;
    f->manifest_json = (char *)manifest;
    manifest = NULL;
done:
    free(manifest);
    free(sig);
    tk_zip_close(z);
    if (rc) {
        tk_pkgfile_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int tk_pkgfile_read_mem(tk_pkgfile **out, const void *data, size_t len, const char *origin,
                        const tk_pkgfile_trust *trust)
{
    return read_archive(out, data, len, origin, 0, trust);
}

int tk_pkgfile_read(tk_pkgfile **out, const char *path, const tk_pkgfile_trust *trust)
{
    char origin[1100];
    *out = NULL;
    snprintf(origin, sizeof origin, "'%s'", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *map = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= PKG_MAX_FILE)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0)
        close(fd);
    if (map != MAP_FAILED) {
        int rc = read_archive(out, map, (size_t)st.st_size, origin, 1, trust);
        if (rc) {
            munmap(map, (size_t)st.st_size);
            return rc;
        }
        (*out)->map = map;
        (*out)->map_len = (size_t)st.st_size;
        return 0;
    }
    /* not mappable (a pipe, an empty file...): read, with tk_file_read's messages */
    char *data = NULL;
    size_t len = 0;
    int rc = tk_file_read(&data, &len, path, PKG_MAX_FILE);
    if (rc)
        return rc;
    rc = read_archive(out, data, len, origin, 0, trust);
    free(data);
    return rc;
}

void tk_pkgfile_free(tk_pkgfile *f)
{
    if (!f)
        return;
    free(f->origin);
    free(f->manifest_json);
    free(f->signer);
    free(f->tkexport);
    free(f->program_name);
    for (size_t i = 0; i < f->narchs; i++)
        free(f->archs[i]);
    free(f->archs);
    free(f->ptx);
    free(f->nvcc);
    free(f->cc);
    free(f->host);
    for (size_t i = 0; i < f->nkernels; i++) {
        free(f->kernels[i].name);
        free(f->kernels[i].fatbin);
        free(f->kernels[i].source);
    }
    free(f->kernels);
    for (size_t i = 0; i < f->nops; i++) {
        free(f->ops[i].name);
        for (size_t k = 0; k < f->ops[i].nkernels; k++)
            free(f->ops[i].kernels[k]);
        free(f->ops[i].kernels);
    }
    free(f->ops);
    for (size_t i = 0; i < f->nentries; i++) {
        free(f->entries[i].path);
        free(f->entries[i].chunk_sha256);
        if (!f->entries[i].mapped)
            free(f->entries[i].data);
    }
    free(f->entries);
    for (size_t i = 0; i < f->ntunes; i++) {
        tk_pkg_tune *t = &f->tunes[i];
        free(t->kernel);
        free(t->key);
        free(t->hparam);
        free(t->device);
        free(t->driver);
        for (int k = 0; k < t->nparams; k++)
            free(t->params[k]);
        for (size_t k = 0; k < t->nfatbins; k++)
            free(t->fatbins[k]);
        free(t->rows);
    }
    free(f->tunes);
    tk_program_model_free(f->program);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f);
}

const tk_pkg_entry *tk_pkgfile_entry(const tk_pkgfile *f, const char *path)
{
    tk_pkg_entry key = {.path = (char *)path};
    return f->nentries ? bsearch(&key, f->entries, f->nentries, sizeof(key), cmp_entry) : NULL;
}

const tk_pkg_kernel *tk_pkgfile_kernel(const tk_pkgfile *f, const char *name)
{
    tk_pkg_kernel key = {.name = (char *)name};
    return f->nkernels ? bsearch(&key, f->kernels, f->nkernels, sizeof(key), cmp_kernel) : NULL;
}

/* --- writing ------------------------------------------------------------------------------------ */

/* cJSON building with every allocation checked: a failed one marks the writer failed, so that an
 * incomplete manifest is never written. */
typedef struct json_writer {
    int failed;
} json_writer;

static cJSON *put(json_writer *w, cJSON *parent, const char *key, cJSON *item)
{
    int ok = item && parent && (key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item));
    if (!ok) {
        cJSON_Delete(item);
        w->failed = 1;
        return NULL;
    }
    return item;
}

static cJSON *str_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

static cJSON *str_array(json_writer *w, char *const *items, size_t n, int sorted)
{
    cJSON *arr = cJSON_CreateArray();
    char **copy = n ? malloc(n * sizeof(char *)) : NULL;
    if (n && !copy) {
        cJSON_Delete(arr);
        w->failed = 1;
        return NULL;
    }
    if (n)
        memcpy(copy, items, n * sizeof(char *));
    if (sorted && n)
        qsort(copy, n, sizeof(char *), cmp_str);
    for (size_t i = 0; i < n; i++)
        put(w, arr, NULL, cJSON_CreateString(copy[i]));
    free(copy);
    return arr;
}

/* tuning[]: per tuned kernel its declaration, the fatbin of each variant and, when measured, the
 * winner and every configuration's time per key bucket. */
static void add_tuning(json_writer *w, cJSON *doc, const tk_pkgfile *f)
{
    cJSON *arr = put(w, doc, "tuning", cJSON_CreateArray());
    for (size_t i = 0; arr && i < f->ntunes; i++) {
        const tk_pkg_tune *t = &f->tunes[i];
        cJSON *o = put(w, arr, NULL, cJSON_CreateObject());
        put(w, o, "kernel", cJSON_CreateString(t->kernel));
        put(w, o, "key", cJSON_CreateString(t->key));
        put(w, o, "bucket", cJSON_CreateString("pow2"));
        put(w, o, "params", str_array(w, t->params, (size_t)t->nparams, 0));
        cJSON *configs = put(w, o, "configs", cJSON_CreateArray());
        for (int cfg = 0; cfg < t->nconfigs; cfg++)
            put(w, configs, NULL, cJSON_CreateIntArray(t->values[cfg], t->nparams));
        if (t->hparam) {
            cJSON *h = put(w, o, "heuristic", cJSON_CreateObject());
            put(w, h, "param", cJSON_CreateString(t->hparam));
            put(w, h, "values", cJSON_CreateIntArray(t->hvalues, t->nh));
        } else {
            put(w, o, "heuristic", cJSON_CreateNull());
        }
        put(w, o, "fatbins", str_array(w, t->fatbins, t->nfatbins, 0));
        put(w, o, "measured", cJSON_CreateBool(t->measured));
        put(w, o, "device", str_or_null(t->device));
        put(w, o, "driver", str_or_null(t->driver));
        cJSON *table = put(w, o, "table", cJSON_CreateArray());
        for (size_t r = 0; r < t->nrows; r++) {
            const tk_pkg_tune_row *row = &t->rows[r];
            cJSON *e = put(w, table, NULL, cJSON_CreateObject());
            put(w, e, "bucket", cJSON_CreateNumber(row->bucket));
            put(w, e, "key", cJSON_CreateNumber((double)row->key));
            put(w, e, "winner", cJSON_CreateNumber(row->winner));
            cJSON *times = put(w, e, "times_us", cJSON_CreateArray());
            for (int cfg = 0; cfg < t->nconfigs; cfg++) {
                /* to 0.01 us, so that equal measurements print equally */
                double us = row->times_us[cfg] < 0 ? -1 : (double)(long long)(row->times_us[cfg] * 100 + 0.5) / 100;
                put(w, times, NULL, cJSON_CreateNumber(us));
            }
        }
    }
}

/* manifest.json for f, whose entries (sorted by path) have the digests in sha. */
static char *manifest_text(const tk_pkgfile *f, const tk_pkg_entry *entries, char (*sha)[65])
{
    json_writer w = {0};
    cJSON *doc = cJSON_CreateObject();
    tk_pkg_kernel *kernels = f->nkernels ? malloc(f->nkernels * sizeof(*kernels)) : NULL;
    tk_pkg_op *ops = f->nops ? malloc(f->nops * sizeof(*ops)) : NULL;
    char *text = NULL;
    if (!doc || (f->nkernels && !kernels) || (f->nops && !ops))
        goto done;
    put(&w, doc, "format", cJSON_CreateString(TK_TKPKG_FORMAT));
    put(&w, doc, "version", cJSON_CreateNumber(TK_TKPKG_VERSION));
    put(&w, doc, "tkexport", cJSON_CreateString(f->tkexport));
    put(&w, doc, "program", cJSON_CreateString(f->program_name));
    put(&w, doc, "architectures", str_array(&w, f->archs, f->narchs, 0));
    put(&w, doc, "ptx", str_or_null(f->ptx));
    cJSON *comp = put(&w, doc, "compilers", cJSON_CreateObject());
    put(&w, comp, "nvcc", str_or_null(f->nvcc));
    put(&w, comp, "cc", str_or_null(f->cc));
    put(&w, doc, "host", str_or_null(f->host));
    cJSON *arr = put(&w, doc, "kernels", cJSON_CreateArray());
    if (f->nkernels) {
        memcpy(kernels, f->kernels, f->nkernels * sizeof(*kernels));
        qsort(kernels, f->nkernels, sizeof(*kernels), cmp_kernel);
    }
    for (size_t i = 0; i < f->nkernels; i++) {
        cJSON *e = put(&w, arr, NULL, cJSON_CreateObject());
        put(&w, e, "name", cJSON_CreateString(kernels[i].name));
        put(&w, e, "fatbin", cJSON_CreateString(kernels[i].fatbin));
        put(&w, e, "source", cJSON_CreateString(kernels[i].source));
    }
    arr = put(&w, doc, "ops", cJSON_CreateArray());
    if (f->nops) {
        memcpy(ops, f->ops, f->nops * sizeof(*ops));
        qsort(ops, f->nops, sizeof(*ops), cmp_op);
    }
    for (size_t i = 0; i < f->nops; i++) {
        cJSON *o = put(&w, arr, NULL, cJSON_CreateObject());
        put(&w, o, "name", cJSON_CreateString(ops[i].name));
        put(&w, o, "builtin", cJSON_CreateBool(ops[i].builtin));
        put(&w, o, "kernels", str_array(&w, ops[i].kernels, ops[i].nkernels, 1));
    }
    add_tuning(&w, doc, f);
    arr = put(&w, doc, "entries", cJSON_CreateArray());
    for (size_t i = 0; i < f->nentries; i++) {
        cJSON *e = put(&w, arr, NULL, cJSON_CreateObject());
        put(&w, e, "path", cJSON_CreateString(entries[i].path));
        put(&w, e, "size", cJSON_CreateNumber((double)entries[i].size));
        put(&w, e, "sha256", cJSON_CreateString(sha[i]));
        if (entries[i].chunk_sha256) {
            cJSON *c = put(&w, e, "chunks", cJSON_CreateObject());
            put(&w, c, "size", cJSON_CreateNumber((double)entries[i].chunk_size));
            cJSON *d = put(&w, c, "sha256", cJSON_CreateArray());
            for (size_t k = 0; k < entries[i].nchunks; k++)
                put(&w, d, NULL, cJSON_CreateString(entries[i].chunk_sha256[k]));
        }
    }
    if (!w.failed)
        text = cJSON_Print(doc);
done:
    cJSON_Delete(doc);
    free(kernels);
    free(ops);
    return text;
}

/* manifest.sig: key's signature of TK_TKPKG_SIG_DOMAIN + the manifest's bytes. */
static int signature_text(char **out, const char *manifest, const tk_sign_key *key)
{
    size_t dl = strlen(TK_TKPKG_SIG_DOMAIN), ml = strlen(manifest);
    unsigned char sig[TK_SIGN_BYTES], *msg = malloc(dl + ml + 1);
    char b64sig[4 * ((TK_SIGN_BYTES + 2) / 3) + 1], pubtext[TK_SIGN_TEXT_MAX];
    tk_sign_public pub;
    json_writer w = {0};
    cJSON *doc = NULL;
    int rc = 0;
    *out = NULL;
    if (!msg)
        return tk_error_set(TK_ENOMEM, "out of memory");
    memcpy(msg, TK_TKPKG_SIG_DOMAIN, dl);
    memcpy(msg + dl, manifest, ml);
    if ((rc = tk_sign_bytes(sig, key, msg, dl + ml)))
        goto done;
    tk_sign_key_public(key, &pub);
    tk_sign_public_format(&pub, pubtext);
    tk_base64_encode(b64sig, sig, sizeof sig);
    doc = cJSON_CreateObject();
    put(&w, doc, "format", cJSON_CreateString(TK_TKPKG_SIG_FORMAT));
    put(&w, doc, "version", cJSON_CreateNumber(TK_TKPKG_SIG_VERSION));
    put(&w, doc, "algorithm", cJSON_CreateString("ed25519"));
    put(&w, doc, "public_key", cJSON_CreateString(pubtext));
    put(&w, doc, "signature", cJSON_CreateString(b64sig));
    if (w.failed || !doc || !(*out = cJSON_PrintUnformatted(doc)))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
done:
    cJSON_Delete(doc);
    free(msg);
    return rc;
}

/* Each entry's SHA-256 into sha[i] and, for one larger than TK_TKPKG_CHUNK, the digest of each
 * chunk into entries[i].chunk_sha256: all of them at once over the CPU's cores. */
static int entry_digests(tk_pkg_entry *entries, size_t n, char (*sha)[65])
{
    size_t njobs = n;
    for (size_t i = 0; i < n; i++)
        if (entries[i].size > TK_TKPKG_CHUNK)
            njobs += (size_t)((entries[i].size + TK_TKPKG_CHUNK - 1) / TK_TKPKG_CHUNK);
    tk_sha256_job *jobs = calloc(njobs + 1, sizeof(*jobs));
    if (!jobs)
        return tk_error_set(TK_ENOMEM, "out of memory");
    size_t k = n;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        tk_pkg_entry *e = &entries[i];
        jobs[i] = (tk_sha256_job){e->data, (size_t)e->size, ""};
        if (e->size <= TK_TKPKG_CHUNK)
            continue;
        e->chunk_size = TK_TKPKG_CHUNK;
        e->nchunks = (size_t)((e->size + TK_TKPKG_CHUNK - 1) / TK_TKPKG_CHUNK);
        if (!(e->chunk_sha256 = calloc(e->nchunks, sizeof(*e->chunk_sha256)))) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            break;
        }
        for (size_t c = 0; c < e->nchunks; c++) {
            uint64_t at = c * TK_TKPKG_CHUNK, len = e->size - at < TK_TKPKG_CHUNK ? e->size - at : TK_TKPKG_CHUNK;
            jobs[k++] = (tk_sha256_job){e->data + at, (size_t)len, ""};
        }
    }
    if (!rc)
        rc = tk_sha256_hex_many(jobs, njobs, 0);
    k = n;
    for (size_t i = 0; i < n && !rc; i++) {
        memcpy(sha[i], jobs[i].hex, 65);
        for (size_t c = 0; c < entries[i].nchunks; c++)
            memcpy(entries[i].chunk_sha256[c], jobs[k++].hex, 65);
    }
    free(jobs);
    return rc;
}

/* Fatbins and the weights are stored, to be used in place; everything else is deflated. */
static int stored(const char *path)
{
    return (!strncmp(path, "kernels/", 8) && tk_ends_with(path, ".fatbin")) || !strcmp(path, "weights.safetensors");
}

int tk_pkgfile_write_mem(void **data, size_t *len, const tk_pkgfile *f, const tk_sign_key *key)
{
    size_t n = f->nentries;
    tk_pkg_entry *entries = calloc(n + 1, sizeof(*entries));
    char (*sha)[65] = malloc((n + 1) * sizeof(*sha));
    tk_zip_entry *zips = malloc((n + 2) * sizeof(*zips));
    char *manifest = NULL, *sig = NULL;
    int rc = 0;
    *data = NULL;
    *len = 0;
    if (!entries || !sha || !zips) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        entries[i] = f->entries[i];
        entries[i].chunk_sha256 = NULL; /* the writer's own, below */
        entries[i].nchunks = 0;
        entries[i].chunk_size = 0;
    }
    qsort(entries, n, sizeof(*entries), cmp_entry);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *p = entries[i].path;
        if (!safe_path(p) || !strcmp(p, TK_TKPKG_MANIFEST) || !strcmp(p, TK_TKPKG_SIGNATURE))
            rc = tk_error_set(TK_EINVAL, "writing the .tkpkg: entry name '%s' is not a safe relative path or is "
                                         "reserved", p);
        else if (i && !strcmp(p, entries[i - 1].path))
            rc = tk_error_set(TK_EINVAL, "writing the .tkpkg: entry '%s' is given twice", p);
        else
            zips[i] = (tk_zip_entry){p, entries[i].data, (size_t)entries[i].size, stored(p)};
    }
    if (rc || (rc = entry_digests(entries, n, sha)))
        goto done;
    if (!(manifest = manifest_text(f, entries, sha))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    zips[n++] = (tk_zip_entry){TK_TKPKG_MANIFEST, manifest, strlen(manifest), 0};
    if (key) {
        if ((rc = signature_text(&sig, manifest, key)))
            goto done;
        zips[n++] = (tk_zip_entry){TK_TKPKG_SIGNATURE, sig, strlen(sig), 0};
    }
    rc = tk_zip_write_mem(data, len, zips, n, "the .tkpkg");
done:
    cJSON_free(manifest);
    cJSON_free(sig);
    for (size_t i = 0; entries && i < f->nentries; i++)
        free(entries[i].chunk_sha256);
    free(entries);
    free(sha);
    free(zips);
    return rc;
}

int tk_pkgfile_write(const char *path, const tk_pkgfile *f, const tk_sign_key *key, size_t *written)
{
    void *zip = NULL;
    size_t len = 0;
    int rc = tk_pkgfile_write_mem(&zip, &len, f, key);
    if (!rc)
        rc = tk_file_write_atomic(path, zip, len);
    if (!rc && written)
        *written = len;
    free(zip);
    return rc;
}
