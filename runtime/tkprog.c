/* The .tkprog file: a zip (libzip) of program.json, sources/<path> and weights.safetensors,
 * written byte-for-byte deterministically and read back with every entry checked. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tkprog.h"
#include "fsutil.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "sha256.h"
#include "zipfile.h"

/* program.json larger than this is refused (a program of a million nodes stays far below) */
#define TKPROG_MAX_JSON (256u << 20)
#define TKPROG_MAX_FILE ((size_t)1 << 40)
#define TKPROG_MAX_ENTRIES 100000

int tk_tkprog_write_mem(void **data, size_t *len, const tk_program_model *m)
{
    *data = NULL;
    *len = 0;
    char *json = NULL;
    tk_zip_entry *entries = NULL;
    char **names = NULL;
    size_t n = 0;
    int rc = tk_program_json_write(&json, m);
    if (rc)
        return rc;
    entries = calloc(m->nsources + 2, sizeof(*entries));
    names = calloc(m->nsources + 1, sizeof(*names));
    if (!entries || !names) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    entries[n++] = (tk_zip_entry){"program.json", json, strlen(json), 0};
    entries[n++] = (tk_zip_entry){"weights.safetensors", m->weights, m->weights_len, 1};
    for (size_t i = 0; i < m->nsources; i++) {
        size_t nl = strlen(m->sources[i].path) + sizeof("sources/");
        if (!(names[i] = malloc(nl))) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            goto done;
        }
        snprintf(names[i], nl, "sources/%s", m->sources[i].path);
        entries[n++] = (tk_zip_entry){names[i], m->sources[i].data, m->sources[i].len, 0};
    }
    rc = tk_zip_write_mem(data, len, entries, n, "the .tkprog");
done:
    for (size_t i = 0; names && i < m->nsources; i++)
        free(names[i]);
    free(names);
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
            rc = tk_error_set(TK_EFORMAT, "%s: parameter '%s' is not in weights.safetensors", origin, m->params[i].name);
        else if (!same_param(&m->params[i], t))
            rc = tk_error_set(TK_EFORMAT, "%s: parameter '%s' differs in dtype or shape from weights.safetensors",
                              origin, m->params[i].name);
    }
    if (!rc && tk_safetensors_count(st) != m->nparams)
        rc = tk_error_set(TK_EFORMAT, "%s: weights.safetensors holds %zu tensors for %zu parameters", origin,
                          tk_safetensors_count(st), m->nparams);
    tk_safetensors_free(st);
    return rc;
}

int tk_tkprog_read_mem(tk_program_model **out, const void *data, size_t len, const char *origin)
{
    *out = NULL;
    tk_program_model *m = NULL;
    unsigned char *json = NULL, *weights = NULL;
    size_t json_len = 0, weights_len = 0;
    unsigned char *seen = NULL;
    tk_zip_reader *z = NULL;
    int rc = tk_zip_open(&z, data, len, origin, ".tkprog", TKPROG_MAX_ENTRIES);
    if (rc)
        return rc;
    size_t n = tk_zip_count(z);
    long long json_idx = -1, weights_idx = -1;
    for (size_t i = 0; i < n; i++) {
        const char *name = tk_zip_name(z, i);
        if (!name) {
            rc = tk_error_set(TK_EFORMAT, "%s: entry %zu has no name", origin, i);
            goto done;
        }
        if (!strcmp(name, "program.json") || !strcmp(name, "weights.safetensors")) {
            long long *slot = name[0] == 'p' ? &json_idx : &weights_idx;
            if (*slot >= 0) {
                rc = tk_error_set(TK_EFORMAT, "%s: entry '%s' appears twice", origin, name);
                goto done;
            }
            *slot = (long long)i;
        } else if (strncmp(name, "sources/", 8) != 0) {
            rc = tk_error_set(TK_EFORMAT, "%s: unexpected entry '%s' (a .tkprog holds program.json, "
                              "weights.safetensors and sources/)", origin, name);
            goto done;
        }
    }
    if (json_idx < 0) {
        rc = tk_error_set(TK_EFORMAT, "%s is not a .tkprog (no program.json)", origin);
        goto done;
    }
    if ((rc = tk_zip_read(z, (size_t)json_idx, TKPROG_MAX_JSON, &json, &json_len)) ||
        (rc = tk_program_json_read(&m, (const char *)json, json_len, origin)))
        goto done;
    m->program_json = (char *)json;
    json = NULL;
    if (weights_idx < 0) {
        rc = tk_error_set(TK_EFORMAT, "%s has no weights.safetensors", origin);
        goto done;
    }
    if ((rc = tk_zip_read(z, (size_t)weights_idx, TKPROG_MAX_FILE, &weights, &weights_len)))
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
    for (size_t i = 0; i < n; i++) {
        const char *name = tk_zip_name(z, i);
        if (strncmp(name, "sources/", 8) != 0)
            continue;
        size_t j = 0;
        while (j < m->nsources && strcmp(m->sources[j].path, name + 8) != 0)
            j++;
        if (j == m->nsources) {
            rc = tk_error_set(TK_EFORMAT, "%s: entry '%s' is not listed in program.json's sources", origin, name);
            goto done;
        }
        if (seen[j]) {
            rc = tk_error_set(TK_EFORMAT, "%s: entry '%s' appears twice", origin, name);
            goto done;
        }
        seen[j] = 1;
        tk_pm_source *s = &m->sources[j];
        unsigned char *bytes;
        size_t blen;
        char hex[65];
        if ((rc = tk_zip_read(z, i, TKPROG_MAX_FILE, &bytes, &blen)))
            goto done;
        tk_sha256_hex(bytes, blen, hex);
        if (strcmp(hex, s->sha256) != 0) {
            free(bytes);
            rc = tk_error_set(TK_EFORMAT, "%s: entry '%s' does not match its SHA-256 in program.json", origin, name);
            goto done;
        }
        free(s->data);
        s->data = bytes;
        s->len = blen;
    }
    for (size_t j = 0; j < m->nsources; j++) {
        if (!seen[j]) {
            rc = tk_error_set(TK_EFORMAT, "%s: source '%s' listed in program.json is missing", origin,
                              m->sources[j].path);
            goto done;
        }
    }
done:
    free(seen);
    tk_zip_close(z);
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
