/* The analyzer's driver: finds the translation units, summarizes them in parallel (one libclang
 * index per worker, summaries cached on disk), then links and resolves them. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonutil.h"
#include "fsutil.h"
#include "internal.h"
#include <tk/error.h>
#include "strbuf.h"

#define MAX_SOURCE_SIZE (64u << 20)
#define WORKER_STACK (16u << 20)

struct tk_analysis {
    cJSON *doc;
    tk_analysis_stats stats;
};

typedef struct job {
    tk_tu tu;
    cJSON *summary;
    int cached;
    int header; /* a header among the paths: parsed on its own only when no source includes it */
} job;

typedef struct pool {
    job *jobs;
    size_t n, next, done;
    tk_cache *cache;
    struct CXUnsavedFile *unsaved; /* editor buffers, by absolute path */
    unsigned n_unsaved;
    pthread_mutex_t lock;
    int progress;
    int oom;
    const volatile int *cancel;
} pool;

/* --- finding files ------------------------------------------------------------------------ */

typedef struct filelist {
    char **v;
    size_t n, cap;
} filelist;

static int list_add(filelist *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], path) == 0)
            return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return tk_error_set(TK_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(path)))
        return tk_error_set(TK_ENOMEM, "out of memory");
    l->n++;
    return 0;
}

static void list_free(filelist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

static int source_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".cu") || !strcmp(dot, ".cuh"));
}

/* tk_walk_files' visitor: the sources the analyzer reads, by their real paths. */
static int add_source(const char *path, void *arg)
{
    const char *slash = strrchr(path, '/');
    if (!source_ext(slash ? slash + 1 : path))
        return 0;
    char *real = realpath(path, NULL);
    int rc = real ? list_add(arg, real) : 0;
    free(real);
    return rc;
}

static int under(const char *path, const char *root)
{
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* Sources before headers, each by path. */
static int cmp_job(const void *a, const void *b)
{
    const job *x = a, *y = b;
    return x->header != y->header ? x->header - y->header : strcmp(x->tu.path, y->tu.path);
}

static int is_header(const char *path) { return tk_ends_with(path, ".h") || tk_ends_with(path, ".cuh"); }

static int has_job(const struct pool *p, const char *path);

static int has_job(const pool *p, const char *path)
{
    for (size_t j = 0; j < p->n; j++)
        if (strcmp(p->jobs[j].tu.path, path) == 0)
            return 1;
    return 0;
}

/* --- the language of headers parsed on their own -------------------------------------------- */

typedef struct includers {
    tk_map lang; /* header (real path, or "* /name" when not found beside) -> "cuda" | "c++" | "c" */
    cJSON *keys; /* owns the keys */
} includers;

static int lang_rank(const char *l) { return !l ? 0 : !strcmp(l, "cuda") ? 3 : !strcmp(l, "c++") ? 2 : 1; }

static const char *lang_of_ext(const char *path)
{
    static const char *const ext[][2] = {{".c", "c"},     {".cu", "cuda"}, {".cuh", "cuda"}, {".cc", "c++"},
                                         {".cpp", "c++"}, {".cxx", "c++"}, {".hpp", "c++"},  {".hh", "c++"},
                                         {".hxx", "c++"}, {".C", "c++"}};
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (tk_ends_with(path, ext[i][0]))
            return ext[i][1];
    return NULL;
}

static void vote(includers *in, const char *key, const char *lang)
{
    const char *old = tk_map_get(&in->lang, key);
    if (lang_rank(lang) <= lang_rank(old))
        return;
    if (!old) {
        cJSON *k = cJSON_CreateString(key);
        if (!k)
            return;
        cJSON_AddItemToArray(in->keys, k);
        key = k->valuestring;
    }
    tk_map_put(&in->lang, key, (void *)lang);
}

/* tk_walk_files' visitor: every C, C++ or CUDA file under the paths votes, for each header it
 * names in an #include, for its own language (C++ files too, which are never analyzed). */
static int note_includes(const char *path, void *arg)
{
    includers *in = arg;
    const char *lang = lang_of_ext(path);
    char *text = NULL;
    size_t len = 0;
    if (!lang || tk_file_read(&text, &len, path, MAX_SOURCE_SIZE) != 0) {
        tk_error_clear();
        return 0;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    for (const char *at = strstr(text, "#include"); at; at = strstr(at + 8, "#include")) {
        const char *q = at + 8;
        while (*q == ' ' || *q == '\t')
            q++;
        const char *end = *q == '"' ? strchr(q + 1, '"') : *q == '<' ? strchr(q + 1, '>') : NULL;
        const char *eol = strchr(q, '\n');
        if (!end || (eol && end > eol) || end - q - 1 <= 0 || end - q - 1 >= PATH_MAX / 2)
            continue;
        char name[PATH_MAX], key[2 * PATH_MAX];
        snprintf(name, sizeof(name), "%.*s", (int)(end - q - 1), q + 1);
        snprintf(key, sizeof(key), "%s/%s", dir, name);
        char *real = realpath(key, NULL);
        const char *base = strrchr(name, '/');
        if (real)
            vote(in, real, lang);
        snprintf(key, sizeof(key), "*/%s", base ? base + 1 : name);
        vote(in, key, lang);
        free(real);
    }
    free(text);
    return 0;
}

/* The strongest language among the files under roots that include header, or NULL. */
static const char *includers_language(const includers *in, const char *header)
{
    const char *l = tk_map_get(&in->lang, header);
    if (l)
        return l;
    const char *base = strrchr(header, '/');
    char key[PATH_MAX + 2];
    snprintf(key, sizeof(key), "*/%s", base ? base + 1 : header);
    return tk_map_get(&in->lang, key);
}

/* Keeps, of the header jobs p->n..n_all, those no summarized source includes (their definitions
 * came with the includers' summaries), gives them the language of the files that include them
 * (C++ sources among them), and makes them the next jobs to run. */
static int skip_included_headers(pool *p, size_t n_all, const filelist *roots, const tk_env *env,
                                 const tk_analyze_options *opts)
{
    tk_map included = TK_MAP_INIT;
    for (size_t i = 0; i < p->n; i++) {
        const cJSON *h;
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(p->jobs[i].summary, "includes"))
            if (cJSON_IsString(h) && tk_map_put(&included, h->valuestring, (void *)h)) {
                tk_map_release(&included);
                return tk_error_set(TK_ENOMEM, "out of memory");
            }
    }
    size_t keep = p->n;
    includers in = {TK_MAP_INIT, NULL};
    int rc = 0;
    for (size_t i = p->n; i < n_all; i++) {
        char *path = p->jobs[i].tu.path;
        p->jobs[i].tu.path = NULL;
        if (tk_map_get(&included, path) || rc) {
            free(path);
            continue;
        }
        if (!in.keys) { /* once, and only when some header is read on its own */
            in.keys = cJSON_CreateArray();
            struct stat st;
            for (size_t r = 0; r < roots->n && in.keys; r++)
                if (stat(roots->v[r], &st) == 0 && S_ISDIR(st.st_mode))
                    tk_walk_files(roots->v[r], note_includes, &in);
        }
        job *j = &p->jobs[keep];
        *j = (job){0};
        j->header = 1;
        rc = tk_tu_make(&j->tu, path, tk_header_language(path, includers_language(&in, path)), NULL, 0, env,
                        opts->extra_args, opts->n_extra_args);
        free(path);
        if (!rc)
            keep++;
    }
    tk_map_release(&in.lang);
    cJSON_Delete(in.keys);
    tk_map_release(&included);
    p->n = keep;
    return rc;
}

static int cmp_summary(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    int r = strcmp(tk_json_str(x, "path", ""), tk_json_str(y, "path", ""));
    return r ? r : strcmp(tk_json_str(x, "config", ""), tk_json_str(y, "config", ""));
}

/* Every job's summary and, once per header and configuration, the summaries of the headers
 * they included, sorted by path: what tk_resolve links. The array borrows them. */
static int gather_summaries(const pool *p, cJSON ***out, size_t *n_out)
{
    size_t cap = p->n + 1, n = 0;
    for (size_t i = 0; i < p->n; i++)
        cap += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p->jobs[i].summary, "headers"));
    cJSON **sums = calloc(cap, sizeof(*sums));
    char (*keys)[PATH_MAX + 24] = calloc(cap, sizeof(*keys));
    tk_map seen = TK_MAP_INIT;
    int rc = sums && keys ? 0 : TK_ENOMEM;
    for (size_t i = 0; i < p->n && !rc; i++) {
        sums[n++] = p->jobs[i].summary;
        cJSON *h;
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(p->jobs[i].summary, "headers"))
        {
            char *key = keys[n];
            snprintf(key, sizeof(keys[0]), "%s#%s", tk_json_str(h, "path", ""), tk_json_str(h, "config", ""));
            if (tk_map_get(&seen, key) || has_job(p, tk_json_str(h, "path", "")))
                continue;
            if ((rc = tk_map_put(&seen, key, h)))
                break;
            sums[n++] = h;
        }
    }
    tk_map_release(&seen);
    free(keys);
    if (rc) {
        free(sums);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    qsort(sums, n, sizeof(*sums), cmp_summary);
    *out = sums;
    *n_out = n;
    return 0;
}

/* --- summarizing -------------------------------------------------------------------------- */

static cJSON *unreadable_summary(const char *path, const char *why)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "v", TK_SUMMARY_VERSION);
    cJSON_AddStringToObject(s, "path", path);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "file", path);
    cJSON_AddNumberToObject(d, "line", 1);
    cJSON_AddNumberToObject(d, "col", 1);
    cJSON_AddStringToObject(d, "severity", "error");
    cJSON_AddStringToObject(d, "rule", "tk-parse-error");
    cJSON_AddStringToObject(d, "message", why);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(s, "diags"), d);
    cJSON_AddArrayToObject(s, "kernels");
    cJSON_AddArrayToObject(s, "handles");
    cJSON_AddArrayToObject(s, "funcs");
    cJSON_AddArrayToObject(s, "globals");
    return s;
}

static const struct CXUnsavedFile *find_unsaved(const pool *p, const char *path)
{
    for (unsigned i = 0; i < p->n_unsaved; i++)
        if (strcmp(p->unsaved[i].Filename, path) == 0)
            return &p->unsaved[i];
    return NULL;
}

static void summarize_job(pool *p, CXIndex idx, job *j)
{
    char *content = NULL;
    size_t len = 0;
    const struct CXUnsavedFile *buf = find_unsaved(p, j->tu.path);
    if (buf) {
        content = malloc(buf->Length + 1);
        if (content) {
            memcpy(content, buf->Contents, buf->Length);
            len = buf->Length;
        }
    }
    if (!content && tk_file_read(&content, &len, j->tu.path, MAX_SOURCE_SIZE) != 0) {
        j->summary = unreadable_summary(j->tu.path, tk_error_last());
        tk_error_clear();
        return;
    }
    char key[65];
    tk_cache_key(&j->tu, content, len, key);
    j->summary = tk_cache_get(p->cache, key);
    if (j->summary) {
        free(content);
        j->cached = 1;
        return;
    }
    cJSON *deps = NULL;
    if (tk_frontend_summarize(&j->summary, &deps, idx, &j->tu, p->unsaved, p->n_unsaved) != 0) {
        free(content);
        pthread_mutex_lock(&p->lock);
        p->oom = 1;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    tk_cache_put(p->cache, key, &j->tu, content, len, j->summary, deps);
    free(content);
    cJSON_Delete(deps);
}

static void *worker(void *arg)
{
    pool *p = arg;
    CXIndex idx = clang_createIndex(0, 0);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next < p->n && !p->oom && !(p->cancel && *p->cancel) ? p->next++ : p->n;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            break;
        summarize_job(p, idx, &p->jobs[i]);
        pthread_mutex_lock(&p->lock);
        p->done++;
        if (p->progress)
            fprintf(stderr, "\ranalyze: %zu/%zu files", p->done, p->n);
        pthread_mutex_unlock(&p->lock);
    }
    clang_disposeIndex(idx);
    return NULL;
}

static int run_pool(pool *p, int jobs)
{
    if (jobs <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = nc > 0 ? (int)nc : 1;
    }
    if ((size_t)jobs > p->n)
        jobs = p->n ? (int)p->n : 1;
    pthread_t th[64];
    if (jobs > 64)
        jobs = 64;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WORKER_STACK);
    int started = 0;
    for (int i = 0; i < jobs; i++)
        if (pthread_create(&th[started], &attr, worker, p) == 0)
            started++;
    pthread_attr_destroy(&attr);
    if (!started)
        worker(p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (p->progress && p->n)
        fputs("\r\033[K", stderr); /* the progress line goes away once the work is done */
    return p->oom ? tk_error_set(TK_ENOMEM, "out of memory") : 0;
}

int tk_analysis_run(tk_analysis **out, const tk_analyze_options *opts, const char *const *paths, size_t n_paths)
{
    *out = NULL;
    tk_analyze_options defaults = TK_ANALYZE_OPTIONS_INIT;
    if (!opts)
        opts = &defaults;
    if (opts->version != TK_ANALYZE_OPTIONS_VERSION)
        return tk_error_set(TK_EINVAL, "analyzer options version %u, expected %d", opts->version, TK_ANALYZE_OPTIONS_VERSION);
    if (opts->max_depth < 0)
        return tk_error_set(TK_EINVAL, "max depth %d is negative, expected 0 or more", opts->max_depth);
    if (n_paths == 0 && !opts->compdb_dir)
        return tk_error_set(TK_EINVAL, "no path to analyze (expected files or folders, or a build folder with -p)");

    int rc = 0;
    tk_env env;
    filelist files = {0}, roots = {0};
    tk_tu *cdb = NULL;
    size_t ncdb = 0;
    pool p;
    memset(&p, 0, sizeof(p));
    pthread_mutex_init(&p.lock, NULL);
    tk_cache cache;
    char *cache_dir = NULL;
    cJSON **sums = NULL;
    int have_env = 0, have_cache = 0;
    size_t n_all = 0; /* jobs made, whether run or not */

    if ((rc = tk_env_init(&env)))
        goto done;
    have_env = 1;
    for (size_t i = 0; i < n_paths; i++) {
        char *real = realpath(paths[i], NULL);
        if (!real) {
            rc = tk_error_set(TK_ENOTFOUND, "'%s' does not exist (expected a source file or a folder)", paths[i]);
            goto done;
        }
        struct stat st;
        rc = list_add(&roots, real);
        if (!rc && stat(real, &st) == 0 && S_ISDIR(st.st_mode))
            rc = tk_walk_files(real, add_source, &files);
        else if (!rc && stat(real, &st) == 0 && !S_ISREG(st.st_mode))
            rc = tk_error_set(TK_EINVAL, "'%s' is not a regular file (a FIFO, socket or device is never read; expected "
                                         "a source file or a folder)", paths[i]);
        else if (!rc)
            rc = list_add(&files, real);
        free(real);
        if (rc)
            goto done;
    }
    /* editor buffers: absolute paths, and analyzed even when not saved yet */
    if (opts->n_unsaved) {
        p.unsaved = calloc(opts->n_unsaved, sizeof(*p.unsaved));
        if (!p.unsaved) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < opts->n_unsaved; i++) {
            const tk_unsaved_file *u = &opts->unsaved[i];
            char *abs = realpath(u->path, NULL);
            if (!abs && u->path[0] != '/') {
                char cwd[PATH_MAX];
                tk_strbuf sb = TK_STRBUF_INIT;
                if (getcwd(cwd, sizeof(cwd)))
                    tk_strbuf_addf(&sb, "%s/%s", cwd, u->path);
                abs = tk_strbuf_detach(&sb);
            } else if (!abs) {
                abs = strdup(u->path);
            }
            if (!abs) {
                rc = tk_error_set(TK_ENOMEM, "out of memory");
                goto done;
            }
            p.unsaved[p.n_unsaved].Filename = abs;
            p.unsaved[p.n_unsaved].Contents = u->contents;
            p.unsaved[p.n_unsaved].Length = (unsigned long)u->length;
            p.n_unsaved++;
            for (size_t r = 0; r < roots.n; r++)
                if (under(abs, roots.v[r]) && source_ext(abs) && (rc = list_add(&files, abs)))
                    goto done;
        }
    }
    if (opts->compdb_dir && (rc = tk_compdb_load(&cdb, &ncdb, opts->compdb_dir, &env, opts->extra_args, opts->n_extra_args)))
        goto done;

    p.jobs = calloc(files.n + ncdb + 1, sizeof(*p.jobs));
    if (!p.jobs) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    /* the compilation database's entries (under PATHs, when any), then the other files */
    for (size_t i = 0; i < ncdb; i++) {
        int keep = roots.n == 0;
        for (size_t r = 0; r < roots.n && !keep; r++)
            keep = under(cdb[i].path, roots.v[r]);
        if (keep) {
            p.jobs[p.n++].tu = cdb[i];
            memset(&cdb[i], 0, sizeof(cdb[i]));
        }
    }
    /* headers wait: those a source includes are read in its language, with its flags (below) */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < files.n; i++) {
            if (is_header(files.v[i]) != pass || has_job(&p, files.v[i]))
                continue;
            if (pass == 1 && !(p.jobs[p.n].tu.path = strdup(files.v[i])))
                rc = tk_error_set(TK_ENOMEM, "out of memory");
            else if (pass == 0)
                rc = tk_tu_make(&p.jobs[p.n].tu, files.v[i], NULL, NULL, 0, &env, opts->extra_args, opts->n_extra_args);
            if (rc)
                goto done;
            p.jobs[p.n++].header = pass;
        }
    }
    qsort(p.jobs, p.n, sizeof(*p.jobs), cmp_job);

    cache_dir = opts->no_cache ? NULL : (opts->cache_dir ? strdup(opts->cache_dir) : tk_default_cache_dir());
    tk_cache_init(&cache, cache_dir);
    have_cache = 1;
    for (unsigned i = 0; i < p.n_unsaved; i++)
        tk_cache_override(&cache, p.unsaved[i].Filename, p.unsaved[i].Contents, p.unsaved[i].Length);
    p.cache = &cache;
    p.progress = opts->progress && isatty(2);
    p.cancel = opts->cancel;
    /* sources first; then the headers none of them includes, each parsed on its own */
    n_all = p.n;
    p.n = 0;
    while (p.n < n_all && !p.jobs[p.n].header)
        p.n++;
    if ((rc = run_pool(&p, opts->jobs)))
        goto done;
    if ((rc = skip_included_headers(&p, n_all, &roots, &env, opts)) || (rc = run_pool(&p, opts->jobs)))
        goto done;
    if (opts->cancel && *opts->cancel) {
        rc = tk_error_set(TK_EIO, "analysis canceled");
        goto done;
    }

    tk_analysis *a = calloc(1, sizeof(*a));
    if (!a) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < p.n; i++) {
        a->stats.files++;
        a->stats.cached += (size_t)p.jobs[i].cached;
        a->stats.parsed += (size_t)!p.jobs[i].cached;
        a->stats.parse_errors += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p.jobs[i].summary, "diags")) > 0;
    }
    size_t nsums = 0;
    if ((rc = gather_summaries(&p, &sums, &nsums))) {
        free(a);
        goto done;
    }
    if ((rc = tk_resolve(&a->doc, sums, nsums, opts->max_depth, opts->lint)) || (rc = tk_output_finish(a->doc))) {
        tk_analysis_free(a);
        goto done;
    }
    *out = a;
done:
    free(sums);
    for (size_t i = 0; i < (p.n > n_all ? p.n : n_all); i++) {
        tk_tu_release(&p.jobs[i].tu);
        cJSON_Delete(p.jobs[i].summary);
    }
    free(p.jobs);
    for (unsigned i = 0; i < p.n_unsaved; i++)
        free((char *)p.unsaved[i].Filename);
    free(p.unsaved);
    for (size_t i = 0; i < ncdb; i++)
        tk_tu_release(&cdb[i]);
    free(cdb);
    pthread_mutex_destroy(&p.lock);
    if (have_cache)
        tk_cache_release(&cache);
    free(cache_dir);
    if (have_env)
        tk_env_release(&env);
    list_free(&files);
    list_free(&roots);
    return rc;
}

void tk_analysis_free(tk_analysis *a)
{
    if (!a)
        return;
    cJSON_Delete(a->doc);
    free(a);
}

void tk_analysis_get_stats(const tk_analysis *a, tk_analysis_stats *out) { *out = a->stats; }

cJSON *tk_analysis_doc(tk_analysis *a) { return a->doc; }

char *tk_analysis_to_json(const tk_analysis *a)
{
    char *s = cJSON_Print(a->doc);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *r = realloc(s, n + 2);
    if (!r) {
        free(s);
        return NULL;
    }
    r[n] = '\n';
    r[n + 1] = '\0';
    return r;
}

int tk_analysis_write_text(const tk_analysis *a, FILE *f, int verbose)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    const cJSON *op, *k;
    int nops = 0, nunres = 0;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(a->doc, "ops"))
    {
        nops++;
        tk_strbuf_addf(&sb, "%s (%s:%d):", tk_json_str(op, "name", "?"), tk_json_str(op, "file", "?"), tk_json_int(op, "line", 0));
        const cJSON *ks = cJSON_GetObjectItemCaseSensitive(op, "kernels");
        if (!cJSON_GetArraySize(ks))
            tk_strbuf_adds(&sb, " no kernels");
        int first = 1;
        cJSON_ArrayForEach(k, ks)
        {
            tk_strbuf_addf(&sb, "%s %s", first ? "" : ",", tk_json_str(k, "name", "?"));
            first = 0;
        }
        tk_strbuf_adds(&sb, "\n");
        if (verbose) {
            cJSON_ArrayForEach(k, ks)
            {
                tk_strbuf_addf(&sb, "    %s via ", tk_json_str(k, "name", "?"));
                const cJSON *v;
                int i = 0;
                cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(k, "via"))
                tk_strbuf_addf(&sb, "%s%s", i++ ? " -> " : "", v->valuestring);
                if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(k, "file")))
                    tk_strbuf_addf(&sb, " (defined at %s:%d)", tk_json_str(k, "file", "?"), tk_json_int(k, "line", 0));
                else
                    tk_strbuf_adds(&sb, " (no TK_KERNEL definition found)");
                tk_strbuf_adds(&sb, "\n");
            }
        }
        const cJSON *u;
        cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(op, "unresolved"))
        {
            nunres++;
            tk_strbuf_addf(&sb, "    unresolved at %s:%d: %s\n", tk_json_str(u, "file", "?"), tk_json_int(u, "line", 0), tk_json_str(u, "reason", "?"));
        }
    }
    const cJSON *d;
    int ndiag = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(a->doc, "diagnostics"))
    {
        ndiag++;
        tk_strbuf_addf(&sb, "%s:%d:%d: %s: %s [%s]\n", tk_json_str(d, "file", "?"), tk_json_int(d, "line", 0), tk_json_int(d, "column", 0), tk_json_str(d, "severity", "?"),
                       tk_json_str(d, "message", "?"), tk_json_str(d, "rule", "?"));
    }
    tk_strbuf_addf(&sb, "%d ops, %d kernels, %d unresolved, %d diagnostics (%zu files, %zu from cache)\n", nops,
                   cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(a->doc, "kernels")), nunres, ndiag, a->stats.files,
                   a->stats.cached);
    int rc = sb.buf && fwrite(sb.buf, 1, sb.len, f) == sb.len ? 0 : tk_error_set(TK_EIO, "cannot write the analysis");
    tk_strbuf_release(&sb);
    return rc;
}
