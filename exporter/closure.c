/* The op table and the source closure of a program, from the analyzer's op->kernel map: each
 * op's function, file and kernels; the files that define the ops, the helpers they reach and
 * their kernels, and the headers those include with #include "...", each stored with its SHA-256. */
#define _DEFAULT_SOURCE /* realpath */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "exporter.h"
#include "fsutil.h"
#include "map.h"
#include "sha256.h"

/* Source files over this size are refused: a closure is code, not data. */
#define MAX_SOURCE (64u << 20)

typedef struct fileset {
    char **paths; /* canonical: relative to the current folder when below it, else absolute */
    size_t n, cap;
    tk_map seen;
} fileset;

static void fileset_release(fileset *fs)
{
    for (size_t i = 0; i < fs->n; i++)
        free(fs->paths[i]);
    free(fs->paths);
    tk_map_release(&fs->seen);
}

/* Adds path (any spelling of an existing file) once. Returns 0, 1 when it does not exist, or
 * TK_ENOMEM. */
static int fileset_add(fileset *fs, const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return 1;
    char *canon = tk_path_relative_to_cwd(real);
    if (!canon)
        return tk_error_set(TK_ENOMEM, "out of memory");
    if (tk_map_get(&fs->seen, canon)) {
        free(canon);
        return 0;
    }
    if (fs->n == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 16;
        char **p = realloc(fs->paths, cap * sizeof(*p));
        if (!p) {
            free(canon);
            return tk_error_set(TK_ENOMEM, "out of memory");
        }
        fs->paths = p;
        fs->cap = cap;
    }
    fs->paths[fs->n++] = canon;
    return tk_map_put(&fs->seen, canon, canon);
}

/* The name of a #include "name" line, copied into buf; 0 when the line is no such include. */
static int quoted_include(const char *line, const char *end, char *buf, size_t n)
{
    const char *p = line;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p++ != '#')
        return 0;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 7 || strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p++ != '"')
        return 0;
    const char *q = p;
    while (q < end && *q != '"')
        q++;
    if (q == end || q == p || (size_t)(q - p) >= n)
        return 0;
    memcpy(buf, p, (size_t)(q - p));
    buf[q - p] = '\0';
    return 1;
}

/* Adds the headers fs->paths[i] includes with quotes and that exist beside it. */
static int add_includes(fileset *fs, size_t i, const char *text, size_t len)
{
    char dir[PATH_MAX], name[PATH_MAX], path[2 * PATH_MAX + 2];
    snprintf(dir, sizeof dir, "%s", fs->paths[i]);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    for (const char *line = text, *end = text + len; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        if (quoted_include(line, eol, name, sizeof name)) {
            if (name[0] == '/')
                snprintf(path, sizeof path, "%s", name);
            else
                snprintf(path, sizeof path, "%s/%s", dir, name);
            int rc = fileset_add(fs, path);
            if (rc < 0)
                return rc;
        }
        line = eol + 1;
    }
    return 0;
}

/* The path a file has inside the archive: its canonical path without a leading '/'. */
static const char *archive_path(const char *canon)
{
    while (*canon == '/')
        canon++;
    return canon;
}

static const cJSON *find_op(const cJSON *ops, const char *name)
{
    const cJSON *op;
    cJSON_ArrayForEach(op, ops)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(op, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return op;
    }
    return NULL;
}

/* Fills op from the analyzer's entry a and adds its files to fs. */
static int complete_op(tk_program_model *m, tk_pm_op *op, const cJSON *a, fileset *fs)
{
    char note[1024];
    const char *fn = tk_json_str(a, "function", NULL), *file = tk_json_str(a, "file", NULL);
    const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(a, "kernels");
    const cJSON *unresolved = cJSON_GetObjectItemCaseSensitive(a, "unresolved");
    int rc;
    if (file) {
        if ((rc = fileset_add(fs, file)) < 0)
            return rc;
        char real[PATH_MAX];
        char *canon = realpath(file, real) ? tk_path_relative_to_cwd(real) : NULL;
        op->file = tk_pm_strdup(m, archive_path(canon ? canon : file));
        free(canon);
        if (!op->file)
            return TK_ENOMEM;
    }
    if (fn && !(op->function = tk_pm_strdup(m, fn)))
        return TK_ENOMEM;
    int nk = cJSON_GetArraySize(kernels);
    if (!(op->kernels = tk_pm_alloc(m, sizeof(char *) * (size_t)(nk ? nk : 1))))
        return TK_ENOMEM;
    op->nkernels = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, kernels)
    {
        const char *kname = tk_json_str(k, "name", NULL), *kfile = tk_json_str(k, "file", NULL);
        if (!kname)
            continue;
        if (!(op->kernels[op->nkernels++] = tk_pm_strdup(m, kname)))
            return TK_ENOMEM;
        if (kfile) {
            if ((rc = fileset_add(fs, kfile)) < 0)
                return rc;
        } else {
            snprintf(note, sizeof note, "kernel '%s' of op '%s' has no TK_KERNEL definition under the exported paths",
                     kname, op->name);
            if (tk_pm_add_note(m, note))
                return TK_ENOMEM;
        }
    }
    /* the files of the helpers the op reaches (the analyzer's "reached" list) */
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(a, "reached"))
    {
        const char *rfile = tk_json_str(r, "file", NULL);
        if (rfile && (rc = fileset_add(fs, rfile)) < 0)
            return rc;
    }
    const cJSON *u;
    cJSON_ArrayForEach(u, unresolved)
    {
        const cJSON *line = cJSON_GetObjectItemCaseSensitive(u, "line");
        const char *ufile = tk_json_str(u, "file", NULL), *why = tk_json_str(u, "reason", NULL);
        snprintf(note, sizeof note, "op '%s' has a launch the analyzer could not resolve at %s:%d (%s)", op->name,
                 ufile ? ufile : "?", cJSON_IsNumber(line) ? line->valueint : 0, why ? why : "?");
        if (tk_pm_add_note(m, note))
            return TK_ENOMEM;
    }
    return 0;
}

/* A source the program needs (an op's, a kernel's, a header they include) that does not parse
 * would fail at compile, once per variant: it fails the export instead, naming the first error. */
static int check_parse_errors(const tk_program_model *m, const cJSON *doc, const fileset *fs)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(doc, "diagnostics")) {
        const char *rule = tk_json_str(d, "rule", NULL), *sev = tk_json_str(d, "severity", NULL), *file = tk_json_str(d, "file", NULL);
        if (!rule || strcmp(rule, "tk-parse-error") || !sev || strcmp(sev, "error") || !file)
            continue;
        char real[PATH_MAX], other[PATH_MAX];
        if (!realpath(file, real))
            continue;
        for (size_t i = 0; i < fs->n; i++) {
            if (!realpath(fs->paths[i], other) || strcmp(real, other))
                continue;
            const cJSON *line = cJSON_GetObjectItemCaseSensitive(d, "line"), *col = cJSON_GetObjectItemCaseSensitive(d, "column");
            const char *msg = tk_json_str(d, "message", NULL);
            return tk_error_set(TK_EINVAL, "cannot export '%s': %s:%d:%d does not parse: %s (the program needs this "
                                "file; its kernels would not compile)", m->name, file,
                                cJSON_IsNumber(line) ? line->valueint : 0, cJSON_IsNumber(col) ? col->valueint : 0,
                                msg ? msg : "?");
        }
    }
    return 0;
}

/* Whether an op of m launches kernel. */
static int launched(const tk_program_model *m, const char *kernel)
{
    for (size_t i = 0; i < m->nops; i++)
        for (size_t k = 0; k < m->ops[i].nkernels; k++)
            if (!strcmp(m->ops[i].kernels[k], kernel))
                return 1;
    return 0;
}

/* program.json's "tuning": the TK_AUTOTUNE declarations (with their TK_HEURISTIC) of the kernels
 * the program launches, as the analyzer read them; compile tunes from this record alone. */
static int record_tuning(tk_program_model *m, const cJSON *doc)
{
    const cJSON *t, *x;
    m->has_tuning = 1;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(doc, "tunes"))
    {
        const char *kernel = tk_json_str(t, "kernel", "");
        if (!launched(m, kernel))
            continue;
        for (size_t i = 0; i < m->ntunes; i++)
            if (!strcmp(m->tunes[i].kernel, kernel))
                return tk_error_set(TK_EINVAL, "cannot export '%s': kernel '%s' has two TK_AUTOTUNE declarations (%s:%d "
                                    "and %s:%d); keep one", m->name, kernel, m->tunes[i].file, m->tunes[i].line,
                                    tk_json_str(t, "file", "?"), tk_json_int(t, "line", 0));
        tk_pm_tune *pt = tk_pm_add_tune(m, kernel);
        char *rel = tk_path_relative_to_cwd(tk_json_str(t, "file", ""));
        if (!pt || !(pt->key = tk_pm_strdup(m, tk_json_str(t, "key", ""))) ||
            !(pt->file = tk_pm_strdup(m, archive_path(rel ? rel : tk_json_str(t, "file", ""))))) {
            free(rel);
            return TK_ENOMEM;
        }
        free(rel);
        pt->line = tk_json_int(t, "line", 0);
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(t, "params"))
            if (pt->nparams < TK_TUNE_MAX_PARAMS && !(pt->params[pt->nparams++] = tk_pm_strdup(m, x->valuestring)))
                return TK_ENOMEM;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(t, "configs"))
        {
            const cJSON *v;
            int k = 0;
            cJSON_ArrayForEach(v, x)
                if (k < TK_TUNE_MAX_PARAMS)
                    pt->values[pt->nconfigs][k++] = v->valueint;
            if (++pt->nconfigs == TK_TUNE_MAX_CONFIGS)
                break;
        }
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "heuristic");
        pt->nh = 1;
        if (cJSON_IsObject(h)) {
            if (!(pt->hparam = tk_pm_strdup(m, tk_json_str(h, "param", ""))))
                return TK_ENOMEM;
            pt->nh = 0;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(h, "values"))
                if (pt->nh < TK_TUNE_MAX_CONFIGS)
                    pt->hvalues[pt->nh++] = x->valueint;
        }
        /* each variant is a fatbin of the package; readers take at most TK_TUNE_MAX_CONFIGS */
        if (pt->nconfigs * pt->nh > TK_TUNE_MAX_CONFIGS)
            return tk_error_set(TK_EINVAL, "cannot export '%s': kernel '%s' (%s:%d) has %d configurations and %d "
                                "TK_HEURISTIC values, %d variants; at most %d", m->name, kernel, pt->file, pt->line,
                                pt->nconfigs, pt->nh, pt->nconfigs * pt->nh, TK_TUNE_MAX_CONFIGS);
    }
    return 0;
}

int tk_export_closure(tk_program_model *m, const tk_analyze_options *opts, const char *const *paths, size_t n)
{
    tk_analysis *a = NULL;
    fileset fs;
    memset(&fs, 0, sizeof fs);
    int rc = tk_analysis_run(&a, opts, paths, n);
    if (rc)
        return rc;
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(tk_analysis_doc(a), "ops");
    for (size_t i = 0; i < m->nops; i++) {
        tk_pm_op *op = &m->ops[i];
        if (op->builtin)
            continue;
        const cJSON *entry = find_op(ops, op->name);
        if (!entry) {
            rc = tk_error_set(TK_ENOTFOUND, "cannot export '%s': op '%s' (%s) is not among the ops the analyzer found "
                              "under the exported paths; its source must be there", m->name, op->name, op->file);
            goto done;
        }
        if ((rc = complete_op(m, op, entry, &fs)))
            goto done;
    }
    /* fs grows while it is walked: headers found add their own includes */
    for (size_t i = 0; i < fs.n; i++) {
        char *text = NULL;
        size_t len = 0;
        if ((rc = tk_file_read(&text, &len, fs.paths[i], MAX_SOURCE)))
            goto done;
        if ((rc = add_includes(&fs, i, text, len))) {
            free(text);
            goto done;
        }
        tk_pm_source *s = tk_pm_add_source(m, archive_path(fs.paths[i]), text, len);
        if (s)
            tk_sha256_hex(text, len, s->sha256);
        free(text);
        if (!s) {
            rc = TK_ENOMEM;
            goto done;
        }
    }
    if ((rc = check_parse_errors(m, tk_analysis_doc(a), &fs)) || (rc = record_tuning(m, tk_analysis_doc(a))))
        goto done;
    tk_pm_sort(m);
done:
    fileset_release(&fs);
    tk_analysis_free(a);
    return rc;
}
