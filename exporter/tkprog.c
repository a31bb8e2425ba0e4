/* The .tkprog file: a zip (libzip) of program.json, sources/<path> and weights.safetensors,
 * written byte-for-byte deterministically and read back with every entry checked. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "exporter.h"
#include "fsutil.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "sha256.h"

/* Every entry carries the same MS-DOS time: 1980-01-01 00:00, the format's first day. Set as a
 * DOS date directly (not through time_t, which libzip converts in the local time zone), so the
 * bytes do not depend on where or when the file is written. */
#define TKPROG_DOS_TIME 0u
#define TKPROG_DOS_DATE ((0u << 9) | (1u << 5) | 1u)
/* deflate level for program.json and sources; weights are stored so they can be read in place */
#define TKPROG_DEFLATE_LEVEL 9
/* program.json larger than this is refused (a program of a million nodes stays far below) */
#define TKPROG_MAX_JSON (256u << 20)
#define TKPROG_MAX_FILE ((size_t)1 << 40)

typedef struct entry {
    const char *name;
    const void *data;
    size_t len;
    int store;
    char *owned_name;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static int zip_fail(zip_t *za, const char *what)
{
    return tk_error_set(TK_EIO, "writing the .tkprog: %s: %s", what, za ? zip_strerror(za) : "libzip failed");
}

int tk_tkprog_write_mem(void **data, size_t *len, const tk_program_model *m)
{
    *data = NULL;
    *len = 0;
    char *json = NULL;
    entry *entries = NULL;
    size_t n = 0;
    zip_source_t *src = NULL;
    zip_t *za = NULL;
    unsigned char *buf = NULL;
    zip_error_t ze;
    zip_error_init(&ze);
    int rc = tk_program_json_write(&json, m);
    if (rc)
        goto done;
    if (!(entries = calloc(m->nsources + 2, sizeof(*entries)))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    entries[n++] = (entry){"program.json", json, strlen(json), 0, NULL};
    entries[n++] = (entry){"weights.safetensors", m->weights, m->weights_len, 1, NULL};
    for (size_t i = 0; i < m->nsources; i++) {
        size_t nl = strlen(m->sources[i].path) + sizeof("sources/");
        char *name = malloc(nl);
        if (!name) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            goto done;
        }
        snprintf(name, nl, "sources/%s", m->sources[i].path);
        entries[n++] = (entry){name, m->sources[i].data, m->sources[i].len, 0, name};
    }
    qsort(entries, n, sizeof(*entries), cmp_entry);

    if (!(src = zip_source_buffer_create(NULL, 0, 0, &ze))) {
        rc = tk_error_set(TK_ENOMEM, "writing the .tkprog: %s", zip_error_strerror(&ze));
        goto done;
    }
    zip_source_keep(src); /* zip_close releases it once; we read the archive out of it after */
    if (!(za = zip_open_from_source(src, ZIP_TRUNCATE, &ze))) {
        rc = tk_error_set(TK_EIO, "writing the .tkprog: %s", zip_error_strerror(&ze));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        static const char empty[1] = {0};
        zip_source_t *s = zip_source_buffer(za, entries[i].len ? entries[i].data : empty, entries[i].len, 0);
        if (!s) {
            rc = zip_fail(za, entries[i].name);
            goto done;
        }
        zip_int64_t idx = zip_file_add(za, entries[i].name, s, ZIP_FL_ENC_UTF_8);
        if (idx < 0) {
            zip_source_free(s); /* still ours after a failed zip_file_add */
            rc = zip_fail(za, entries[i].name);
            goto done;
        }
        if (zip_set_file_compression(za, (zip_uint64_t)idx, entries[i].store ? ZIP_CM_STORE : ZIP_CM_DEFLATE,
                                     entries[i].store ? 0 : TKPROG_DEFLATE_LEVEL) ||
            zip_file_set_dostime(za, (zip_uint64_t)idx, TKPROG_DOS_TIME, TKPROG_DOS_DATE, 0) ||
            zip_file_set_external_attributes(za, (zip_uint64_t)idx, 0, ZIP_OPSYS_UNIX, 0100644u << 16)) {
            rc = zip_fail(za, entries[i].name);
            goto done;
        }
    }
    if (zip_close(za) != 0) {
        rc = zip_fail(za, "closing the archive");
        zip_discard(za);
        za = NULL;
        goto done;
    }
    za = NULL;
    if (zip_source_open(src) != 0 || zip_source_seek(src, 0, SEEK_END) != 0) {
        rc = tk_error_set(TK_EIO, "writing the .tkprog: reading the archive back failed");
        goto done;
    }
    zip_int64_t size = zip_source_tell(src);
    if (size < 0 || zip_source_seek(src, 0, SEEK_SET) != 0) {
        zip_source_close(src);
        rc = tk_error_set(TK_EIO, "writing the .tkprog: reading the archive back failed");
        goto done;
    }
    if (!(buf = malloc((size_t)size ? (size_t)size : 1))) {
        zip_source_close(src);
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    zip_int64_t got = zip_source_read(src, buf, (zip_uint64_t)size);
    zip_source_close(src);
    if (got != size) {
        rc = tk_error_set(TK_EIO, "writing the .tkprog: reading the archive back failed");
        goto done;
    }
    *data = buf;
    *len = (size_t)size;
    buf = NULL;
done:
    if (za)
        zip_discard(za);
    zip_source_free(src);
    zip_error_fini(&ze);
    free(buf);
    for (size_t i = 0; i < n; i++)
        free(entries[i].owned_name);
    free(entries);
    free(json);
    return rc;
}

int tk_tkprog_write(const tk_program_model *m, const char *path)
{
    void *data;
    size_t len;
    int rc = tk_tkprog_write_mem(&data, &len, m);
    if (rc)
        return rc;
    rc = tk_file_write_atomic(path, data, len);
    free(data);
    return rc;
}

/* --- reading ------------------------------------------------------------------------------- */

static int read_entry(zip_t *za, zip_uint64_t idx, const char *name, size_t max, unsigned char **out, size_t *len,
                      const char *origin)
{
    zip_stat_t st;
    *out = NULL;
    zip_stat_init(&st);
    if (zip_stat_index(za, idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return tk_error_set(TK_EINVAL, "%s: entry '%s' is unreadable: %s", origin, name, zip_strerror(za));
    if (st.size > max)
        return tk_error_set(TK_EINVAL, "%s: entry '%s' is %llu bytes, more than the %zu allowed", origin, name,
                            (unsigned long long)st.size, max);
    unsigned char *buf = malloc((size_t)st.size + 1);
    if (!buf)
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", origin);
    zip_file_t *f = zip_fopen_index(za, idx, 0);
    if (!f) {
        free(buf);
        return tk_error_set(TK_EINVAL, "%s: entry '%s' cannot be opened: %s", origin, name, zip_strerror(za));
    }
    zip_int64_t got = zip_fread(f, buf, st.size);
    /* one more read reaches the end and checks the CRC */
    unsigned char extra;
    zip_int64_t more = got == (zip_int64_t)st.size ? zip_fread(f, &extra, 1) : -1;
    int bad = got != (zip_int64_t)st.size || more != 0;
    char why[256];
    snprintf(why, sizeof why, "%s", zip_file_strerror(f));
    zip_fclose(f);
    if (bad) {
        free(buf);
        return tk_error_set(TK_EINVAL, "%s: entry '%s' is corrupt or truncated (%s)", origin, name, why);
    }
    buf[st.size] = '\0';
    *out = buf;
    *len = (size_t)st.size;
    return 0;
}

static int same_param(const tk_pm_value *p, const tk_safetensors_entry *t)
{
    if (!t->supported || p->dtype != t->tk_dtype || p->rank != t->rank)
        return 0;
    for (int i = 0; i < p->rank; i++)
        if (p->dims[i].expr || p->dims[i].value != t->shape[i])
            return 0;
    return 1;
}

/* weights.safetensors: a valid file holding exactly the program's parameters. */
static int check_weights(const tk_program_model *m, const char *origin)
{
    tk_safetensors *st = NULL;
    char what[512];
    snprintf(what, sizeof what, "%s: weights.safetensors", origin);
    int rc = tk_safetensors_parse(&st, m->weights, m->weights_len, what);
    if (rc)
        return rc;
    for (size_t i = 0; i < m->nparams && !rc; i++) {
        const tk_safetensors_entry *t = tk_safetensors_find(st, m->params[i].name);
        if (!t)
            rc = tk_error_set(TK_EINVAL, "%s: parameter '%s' is not in weights.safetensors", origin, m->params[i].name);
        else if (!same_param(&m->params[i], t))
            rc = tk_error_set(TK_EINVAL, "%s: parameter '%s' differs in dtype or shape from weights.safetensors",
                              origin, m->params[i].name);
    }
    if (!rc && tk_safetensors_count(st) != m->nparams)
        rc = tk_error_set(TK_EINVAL, "%s: weights.safetensors holds %zu tensors for %zu parameters", origin,
                          tk_safetensors_count(st), m->nparams);
    tk_safetensors_free(st);
    return rc;
}

int tk_tkprog_read_mem(tk_program_model **out, const void *data, size_t len, const char *origin)
{
    *out = NULL;
    zip_error_t ze;
    zip_error_init(&ze);
    tk_program_model *m = NULL;
    unsigned char *json = NULL, *weights = NULL;
    size_t json_len = 0, weights_len = 0;
    int rc = 0;
    unsigned char *seen = NULL;
    zip_t *za = NULL;
    zip_source_t *src = zip_source_buffer_create(len ? data : "", len, 0, &ze);
    if (!src) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", origin);
        goto done;
    }
    if (!(za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze))) {
        zip_source_free(src); /* still ours when the open fails */
        rc = tk_error_set(TK_EINVAL, "%s is not a .tkprog (not a readable zip archive: %s)", origin,
                          zip_error_strerror(&ze));
        goto done;
    }
    zip_int64_t n = zip_get_num_entries(za, 0);
    zip_int64_t json_idx = -1, weights_idx = -1;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        if (!name) {
            rc = tk_error_set(TK_EINVAL, "%s: entry %lld has no name", origin, (long long)i);
            goto done;
        }
        if (!strcmp(name, "program.json") || !strcmp(name, "weights.safetensors")) {
            zip_int64_t *slot = name[0] == 'p' ? &json_idx : &weights_idx;
            if (*slot >= 0) {
                rc = tk_error_set(TK_EINVAL, "%s: entry '%s' appears twice", origin, name);
                goto done;
            }
            *slot = i;
        } else if (strncmp(name, "sources/", 8) != 0) {
            rc = tk_error_set(TK_EINVAL, "%s: unexpected entry '%s' (a .tkprog holds program.json, "
                              "weights.safetensors and sources/)", origin, name);
            goto done;
        }
    }
    if (json_idx < 0) {
        rc = tk_error_set(TK_EINVAL, "%s is not a .tkprog (no program.json)", origin);
        goto done;
    }
    if ((rc = read_entry(za, (zip_uint64_t)json_idx, "program.json", TKPROG_MAX_JSON, &json, &json_len, origin)) ||
        (rc = tk_program_json_read(&m, (const char *)json, json_len, origin)))
        goto done;
    m->program_json = (char *)json;
    json = NULL;
    if (weights_idx < 0) {
        rc = tk_error_set(TK_EINVAL, "%s has no weights.safetensors", origin);
        goto done;
    }
    if ((rc = read_entry(za, (zip_uint64_t)weights_idx, "weights.safetensors", TKPROG_MAX_FILE, &weights,
                         &weights_len, origin)))
        goto done;
    m->weights = weights;
    m->weights_len = weights_len;
    weights = NULL;
    if ((rc = check_weights(m, origin)))
        goto done;

    /* sources: every listed one present with its digest, nothing unlisted */
    if (!(seen = calloc(m->nsources + 1, 1))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading %s", origin);
        goto done;
    }
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        if (strncmp(name, "sources/", 8) != 0)
            continue;
        size_t j = 0;
        while (j < m->nsources && strcmp(m->sources[j].path, name + 8) != 0)
            j++;
        if (j == m->nsources) {
            rc = tk_error_set(TK_EINVAL, "%s: entry '%s' is not listed in program.json's sources", origin, name);
            goto done;
        }
        if (seen[j]) {
            rc = tk_error_set(TK_EINVAL, "%s: entry '%s' appears twice", origin, name);
            goto done;
        }
        seen[j] = 1;
        tk_pm_source *s = &m->sources[j];
        unsigned char *bytes;
        size_t blen;
        char hex[65];
        if ((rc = read_entry(za, (zip_uint64_t)i, name, TKPROG_MAX_FILE, &bytes, &blen, origin)))
            goto done;
        tk_sha256_hex(bytes, blen, hex);
        if (strcmp(hex, s->sha256) != 0) {
            free(bytes);
            rc = tk_error_set(TK_EINVAL, "%s: entry '%s' does not match its SHA-256 in program.json", origin, name);
            goto done;
        }
        free(s->data);
        s->data = bytes;
        s->len = blen;
    }
    for (size_t j = 0; j < m->nsources; j++) {
        if (!seen[j]) {
            rc = tk_error_set(TK_EINVAL, "%s: source '%s' listed in program.json is missing", origin,
                              m->sources[j].path);
            goto done;
        }
    }
done:
    free(seen);
    if (za)
        zip_discard(za);
    zip_error_fini(&ze);
    free(json);
    free(weights);
    if (rc) {
        tk_program_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int tk_tkprog_read(tk_program_model **out, const char *path)
{
    char *data = NULL;
    size_t len = 0;
    char origin[1100];
    *out = NULL;
    int rc = tk_file_read(&data, &len, path, TKPROG_MAX_FILE);
    if (rc)
        return rc;
    snprintf(origin, sizeof origin, "'%s'", path);
    rc = tk_tkprog_read_mem(out, data, len, origin);
    free(data);
    return rc;
}
