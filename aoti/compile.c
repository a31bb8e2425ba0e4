/* tkexport compile: a .tkprog into a .tkpkg. The sources of the program's closure are written to
 * a private temporary folder; each .cu that defines a kernel an op launches becomes a fatbin
 * and the .c files one host object, compiled concurrently unless the cache has them; the
 * results are packed with program.json and the weights into a reproducible zip. */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aoti.h"
#include "fsutil.h"
#include "pkgfile.h"
#include "rt_internal.h"
#include "sha256.h"
#include "strbuf.h"
#include "tkprog.h"

#ifndef TK_VERSION
#define TK_VERSION "0.0.0"
#endif

#define DEFAULT_ARCH "sm_90"
#define MAX_ARTIFACT ((size_t)1 << 32)

/* --- architectures ------------------------------------------------------------------------- */

int tk_aoti_check_arch(const char *arch)
{
    const char *p = arch;
    int ok = strncmp(p, "sm_", 3) == 0;
    size_t digits = 0;
    if (ok) {
        p += 3;
        while (isdigit((unsigned char)p[digits]))
            digits++;
        ok = digits >= 2 && digits <= 3 && atoi(p) >= 75 &&
             (p[digits] == '\0' || ((p[digits] == 'a' || p[digits] == 'f') && p[digits + 1] == '\0'));
    }
    if (!ok)
        return tk_error_set(TK_EINVAL, "unknown architecture '%s': expected sm_XX with XX a compute capability nvcc "
                            "supports (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121; 'a' or 'f' suffixes too)",
                            arch);
    return 0;
}

/* The architecture's number: 90 for sm_90a. */
static int arch_number(const char *arch) { return atoi(arch + 3); }

/* nvcc's own list ("sm_75 sm_80 ..."), against which each requested base architecture is checked. */
static int check_arch_known(const char *arch, const char *known)
{
    char base[16];
    snprintf(base, sizeof base, "sm_%d", arch_number(arch));
    const char *p = known;
    size_t n = strlen(base);
    while ((p = strstr(p, base))) {
        if ((p == known || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 0;
        p += n;
    }
    return tk_error_set(TK_EINVAL, "unknown architecture '%s': this nvcc compiles for %s", arch, known);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_arch(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int d = arch_number(x) - arch_number(y);
    return d ? d : strcmp(x, y);
}

/* --- sources --------------------------------------------------------------------------------- */

/* text with comments, string and character literals blanked out (same length). */
static char *strip_comments(const unsigned char *data, size_t len)
{
    char *t = malloc(len + 1);
    if (!t)
        return NULL;
    memcpy(t, data, len);
    t[len] = '\0';
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '/' && t[i + 1] == '/') {
            while (i < len && t[i] != '\n')
                t[i++] = ' ';
        } else if (t[i] == '/' && t[i + 1] == '*') {
            t[i] = t[i + 1] = ' ';
            for (i += 2; i < len && !(t[i] == '*' && t[i + 1] == '/'); i++)
                if (t[i] != '\n')
                    t[i] = ' ';
            if (i < len)
                t[i] = t[i + 1] = ' ', i++;
        } else if (t[i] == '"' || t[i] == '\'') {
            char q = t[i];
            for (i++; i < len && t[i] != q && t[i] != '\n'; i++) {
                if (t[i] == '\\' && i + 1 < len)
                    t[i++] = ' ';
                t[i] = ' ';
            }
        }
    }
    return t;
}

/* Does the .cu text define kernel `name`? A definition is TK_KERNEL or __global__, then the
 * declarator whose name is followed by its parameter list and a body. */
static int defines_kernel(const char *text, const char *name)
{
    static const char *const marks[] = {"TK_KERNEL", "__global__"};
    size_t nl = strlen(name);
    for (size_t m = 0; m < 2; m++) {
        size_t ml = strlen(marks[m]);
        for (const char *p = strstr(text, marks[m]); p; p = strstr(p + ml, marks[m])) {
            if ((p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) || isalnum((unsigned char)p[ml]) ||
                p[ml] == '_')
                continue;
            /* the declarator's name is the identifier before one of the parentheses that
             * follow (others belong to attributes such as __launch_bounds__(256)) */
            const char *stop = p + ml + strcspn(p + ml, ";{");
            for (const char *paren = strchr(p + ml, '('); paren && paren < stop; paren = strchr(paren + 1, '(')) {
                const char *e = paren;
                while (e > p && isspace((unsigned char)e[-1]))
                    e--;
                const char *b = e;
                while (b > p && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
                    b--;
                if ((size_t)(e - b) != nl || strncmp(b, name, nl) != 0)
                    continue;
                int depth = 0;
                const char *q = paren;
                for (; *q; q++) {
                    if (*q == '(')
                        depth++;
                    else if (*q == ')' && --depth == 0)
                        break;
                }
                if (!*q)
                    break;
                for (q++; *q && isspace((unsigned char)*q); q++)
                    ;
                if (*q == '{')
                    return 1;
            }
        }
    }
    return 0;
}

/* --- the work ------------------------------------------------------------------------------ */

typedef struct unit {
    const tk_pm_source *src; /* the .cu, or NULL for the host object */
    char key[65];
    char *cache_path;
    char *out_path; /* what the compiler writes in the temporary folder */
    char *entry;    /* "kernels/<path>.fatbin" or "host/ops.so" */
    unsigned char *bytes;
    size_t len;
    int cached;
    int job; /* index into the job list, or -1 */
    const tk_aoti_tune *tune; /* a tuned kernel's source: compiled once per configuration */
    int config;
} unit;

typedef struct compile {
    const tk_aoti_options *o;
    tk_program_model *m;
    tk_toolchain tc;
    const char *archs[TK_AOTI_MAX_ARCHS];
    size_t narchs;
    char include[PATH_MAX];
    char tmp[PATH_MAX];
    char *cache;    /* NULL: no cache */
    char *tk_heads; /* "path sha\n" of tkexport's headers, for keys */
    unit *units;
    size_t nunits;
    char **kernel_src; /* per kernel of the op table (flattened order): the source path */
    tk_job *jobs;
    size_t njobs;
    tk_aoti_tune *tunes; /* the TK_AUTOTUNE declarations of the program's kernels */
    size_t ntunes;
    int variants; /* compile every configuration (--autotune with a GPU), else the default only */
    int has_kernels, has_host; /* what plan() found to compile */
    char tune_note[200];
} compile;

static int add_list(tk_strbuf *sb, char *const *argv)
{
    int rc = 0;
    for (size_t i = 0; argv[i] && !rc; i++)
        rc = tk_strbuf_addf(sb, "%s\n", argv[i]);
    return rc;
}

/* tk_walk_files' visitor for hash_tk_headers: "tk/<name> sha256\n" of one header. */
typedef struct head_walk {
    tk_strbuf sb;
    size_t skip; /* the length of the folder's path and its '/' */
} head_walk;

static int hash_one_header(const char *path, void *arg)
{
    head_walk *w = arg;
    char *data = NULL, hex[65];
    size_t len;
    int rc = tk_file_read(&data, &len, path, 1u << 24);
    if (!rc) {
        tk_sha256_hex(data, len, hex);
        rc = tk_strbuf_addf(&w->sb, "tk/%s %s\n", path + w->skip, hex);
    }
    free(data);
    return rc;
}

/* "tk/<name> sha256\n" of every file in tkexport's include/tk, in name order (tk_walk_files). */
static int hash_tk_headers(compile *c)
{
    char dir[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/tk", c->include);
    head_walk w = {.sb = {0}, .skip = strlen(dir) + 1};
    int rc = tk_walk_files(dir, hash_one_header, &w);
    if (!rc && !(c->tk_heads = tk_strbuf_detach(&w.sb)))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    tk_strbuf_release(&w.sb);
    return rc;
}

/* The digest of everything a unit's output depends on. */
static int unit_key(compile *c, unit *u, char *const *argv)
{
    tk_strbuf sb = {0};
    int rc = tk_strbuf_addf(&sb, "tkexport-aoti %s\n%s\n", TK_VERSION, u->src ? "fatbin" : "host");
    if (!rc)
        rc = tk_strbuf_adds(&sb, u->src ? c->tc.nvcc_version : c->tc.cc_version);
    if (!rc)
        rc = add_list(&sb, argv);
    if (!rc)
        rc = tk_strbuf_adds(&sb, c->tk_heads);
    for (size_t i = 0; i < c->m->nsources && !rc; i++) {
        const tk_pm_source *s = &c->m->sources[i];
        int is_cu = tk_ends_with(s->path, ".cu"), is_c = tk_ends_with(s->path, ".c");
        int wanted = u->src ? (s == u->src || (!is_cu && !is_c)) : !is_cu;
        if (wanted)
            rc = tk_strbuf_addf(&sb, "%s %s\n", s->path, s->sha256);
    }
    if (!rc) {
        tk_sha256_hex(sb.buf, sb.len, u->key);
        if (c->cache) {
            size_t n = strlen(c->cache) + 80;
            if (!(u->cache_path = malloc(n)))
                rc = tk_error_set(TK_ENOMEM, "out of memory");
            else
                snprintf(u->cache_path, n, "%s/%s.%s", c->cache, u->key, u->src ? "fatbin" : "so");
        }
    }
    tk_strbuf_release(&sb);
    return rc;
}

static char **argv_new(const char *const *items, size_t n, const char *const *more, size_t nmore)
{
    char **v = calloc(n + nmore + 1, sizeof(char *));
    if (!v)
        return NULL;
    for (size_t i = 0; i < n + nmore; i++)
        if (!(v[i] = strdup(i < n ? items[i] : more[i - n]))) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    return v;
}

static void argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The nvcc command for a kernel source, run in tmp/src. */
static char **nvcc_argv(compile *c, const unit *u, const char *out)
{
    const char *path = u->src->path;
    const char *items[8 + 4 * TK_AOTI_MAX_ARCHS + TK_TUNE_MAX_PARAMS + 1];
    char gencode[TK_AOTI_MAX_ARCHS + 1][64], inc[PATH_MAX + 4], defs[TK_TUNE_MAX_PARAMS + 1][160];
    size_t n = 0;
    snprintf(inc, sizeof inc, "-I%s", c->include);
    items[n++] = c->tc.nvcc;
    items[n++] = "-fatbin";
    items[n++] = "-O3";
    items[n++] = "-std=c++17";
    items[n++] = inc;
    for (size_t i = 0; i < c->narchs; i++) {
        snprintf(gencode[i], sizeof gencode[i], "arch=compute_%s,code=%s", c->archs[i] + 3, c->archs[i]);
        items[n++] = "-gencode";
        items[n++] = gencode[i];
    }
    snprintf(gencode[c->narchs], sizeof gencode[0], "arch=compute_%d,code=compute_%d", arch_number(c->archs[0]),
             arch_number(c->archs[0]));
    items[n++] = "-gencode";
    items[n++] = gencode[c->narchs];
    for (int i = 0; u->tune && i < u->tune->nparams; i++) {
        snprintf(defs[i], sizeof defs[i], "-D%s=%d", u->tune->params[i], u->tune->values[u->config / u->tune->nh][i]);
        items[n++] = defs[i];
    }
    if (u->tune && u->tune->hparam) {
        snprintf(defs[TK_TUNE_MAX_PARAMS], sizeof defs[0], "-D%s=%d", u->tune->hparam,
                 u->tune->hvalues[u->config % u->tune->nh]);
        items[n++] = defs[TK_TUNE_MAX_PARAMS];
    }
    const char *tail[] = {"-o", out, path};
    return argv_new(items, n, tail, 3);
}

/* The C compiler's command for the host object, run in tmp/src on every .c of the closure. */
static char **cc_argv(compile *c, const char *out)
{
    char inc[PATH_MAX + 4], map1[2 * PATH_MAX], map2[2 * PATH_MAX];
    snprintf(inc, sizeof inc, "-I%s", c->include);
    snprintf(map1, sizeof map1, "-ffile-prefix-map=%s/src/=", c->tmp);
    snprintf(map2, sizeof map2, "-ffile-prefix-map=%s=tk-include", c->include);
    const char *items[] = {c->tc.cc, "-std=c11", "-O2", "-fPIC", "-shared", "-g0", inc, map1, map2, "-o", out};
    size_t n = sizeof items / sizeof items[0], nc = 0;
    const char *files[4096];
    for (size_t i = 0; i < c->m->nsources && nc < 4096; i++)
        if (tk_ends_with(c->m->sources[i].path, ".c"))
            files[nc++] = c->m->sources[i].path;
    return argv_new(items, n, files, nc);
}

/* The arguments of a command without the temporary folder's name (for cache keys). */
static char **argv_for_key(compile *c, char *const *argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **v = calloc(n + 1, sizeof(char *));
    if (!v)
        return NULL;
    size_t tl = strlen(c->tmp);
    for (size_t i = 0; i < n; i++) {
        const char *a = argv[i];
        const char *hit = strstr(a, c->tmp);
        char buf[3 * PATH_MAX];
        if (hit) {
            snprintf(buf, sizeof buf, "%.*s<tmp>%s", (int)(hit - a), a, hit + tl);
            a = buf;
        }
        if (!(v[i] = strdup(a))) {
            argv_free(v);
            return NULL;
        }
    }
    return v;
}

/* Writes the closure's sources under tmp/src. */
static int write_sources(compile *c)
{
    for (size_t i = 0; i < c->m->nsources; i++) {
        const tk_pm_source *s = &c->m->sources[i];
        char path[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s/src/%s", c->tmp, s->path);
        char *slash = strrchr(path, '/');
        *slash = '\0';
        int rc = tk_mkdirs(path);
        *slash = '/';
        if (rc || (rc = tk_file_write_atomic(path, s->data, s->len)))
            return rc;
    }
    return 0;
}

/* Plans the units: one per kernel source defining a kernel of the op table, one for the host
 * code. Every kernel an op launches must be defined in a .cu of the closure. */
static int plan(compile *c)
{
    tk_program_model *m = c->m;
    char **texts = calloc(m->nsources + 1, sizeof(char *));
    int *used = calloc(m->nsources + 1, sizeof(int));
    size_t nk = 0;
    for (size_t i = 0; i < m->nops; i++)
        nk += m->ops[i].nkernels;
    c->kernel_src = calloc(nk + 1, sizeof(char *));
    c->units = calloc(m->nsources + 2, sizeof(unit)); /* grown once the tuned kernels are known */
    int rc = 0, have_c = 0;
    if (!texts || !used || !c->kernel_src || !c->units) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m->nsources && !rc; i++) {
        if (tk_ends_with(m->sources[i].path, ".c"))
            have_c = 1;
        if (tk_ends_with(m->sources[i].path, ".cu") && !(texts[i] = strip_comments(m->sources[i].data, m->sources[i].len)))
            rc = tk_error_set(TK_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < m->nops && !rc; i++) {
        for (size_t j = 0; j < m->ops[i].nkernels && !rc; j++, k++) {
            const char *name = m->ops[i].kernels[j];
            for (size_t s = 0; s < m->nsources && !c->kernel_src[k]; s++) {
                if (texts[s] && defines_kernel(texts[s], name)) {
                    c->kernel_src[k] = m->sources[s].path;
                    used[s] = 1;
                }
            }
            if (!c->kernel_src[k])
                rc = tk_error_set(TK_EINVAL, "kernel '%s' of op '%s' is defined in no .cu source of the program (%s "
                                  "declares its kernels with TK_KERNEL or __global__ in a .cu file)",
                                  name, m->ops[i].name, m->ops[i].file ? m->ops[i].file : "the op");
        }
    }
    if (!rc)
        rc = tk_aoti_find_tunes(m, &c->tunes, &c->ntunes);
    size_t nunits = 1;
    for (size_t t = 0; t < c->ntunes; t++)
        nunits += (size_t)c->tunes[t].nconfigs * (size_t)c->tunes[t].nh;
    unit *grown = rc ? NULL : realloc(c->units, (m->nsources + nunits + 1) * sizeof(unit));
    if (!rc && !grown)
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    if (grown) {
        c->units = grown;
        memset(c->units, 0, (m->nsources + nunits + 1) * sizeof(unit));
    }
    for (size_t s = 0; s < m->nsources && !rc; s++) {
        if (!used[s])
            continue;
        const tk_aoti_tune *tune = NULL;
        for (size_t t = 0; t < c->ntunes && !rc; t++) {
            size_t k = 0;
            for (size_t i = 0; i < m->nops; i++)
                for (size_t j = 0; j < m->ops[i].nkernels; j++, k++)
                    if (!strcmp(m->ops[i].kernels[j], c->tunes[t].kernel) && c->kernel_src[k] == m->sources[s].path)
                        c->tunes[t].source = m->sources[s].path;
            if (c->tunes[t].source == m->sources[s].path) {
                if (tune)
                    rc = tk_error_set(TK_EINVAL, "%s defines two tuned kernels, '%s' and '%s': one TK_AUTOTUNE kernel "
                                      "per .cu file", m->sources[s].path, tune->kernel, c->tunes[t].kernel);
                tune = &c->tunes[t];
            }
        }
        /* variant v: configuration v / nh with the heuristic's value v % nh; every configuration
         * with --autotune on a GPU, else the default's (with every heuristic value) */
        int nvariants = tune ? (c->variants ? tune->nconfigs : 1) * tune->nh : 1;
        for (int v = 0; v < nvariants && !rc; v++) {
            unit *u = &c->units[c->nunits++];
            u->src = &m->sources[s];
            u->tune = tune;
            u->config = v;
        }
    }
    if (!rc && have_c)
        c->units[c->nunits++].src = NULL;
    c->has_host = !rc && have_c;
    c->has_kernels = !rc && c->nunits > (size_t)c->has_host;
done:
    for (size_t i = 0; texts && i < m->nsources; i++)
        free(texts[i]);
    free(texts);
    free(used);
    return rc;
}

/* Cache hit: the unit's bytes from the cache file. */
static int cache_get(unit *u)
{
    if (!u->cache_path || access(u->cache_path, R_OK) != 0)
        return 0;
    char *data;
    size_t len;
    if (tk_file_read(&data, &len, u->cache_path, MAX_ARTIFACT) != 0) {
        tk_error_clear();
        return 0;
    }
    u->bytes = (unsigned char *)data;
    u->len = len;
    u->cached = 1;
    return 1;
}

static int prepare_units(compile *c)
{
    int rc = 0;
    for (size_t i = 0; i < c->nunits && !rc; i++) {
        unit *u = &c->units[i];
        char out[2 * PATH_MAX], entry[PATH_MAX + 32];
        if (u->src) {
            char variant[16] = "";
            if (u->config)
                snprintf(variant, sizeof variant, "@c%d", u->config);
            snprintf(out, sizeof out, "%s/out/%zu.fatbin", c->tmp, i);
            snprintf(entry, sizeof entry, "kernels/%.*s%s.fatbin", (int)(strlen(u->src->path) - 3), u->src->path,
                     variant);
        } else {
            snprintf(out, sizeof out, "%s/out/ops.so", c->tmp);
            snprintf(entry, sizeof entry, "host/ops.so");
        }
        if (!(u->out_path = strdup(out)) || !(u->entry = strdup(entry)))
            return tk_error_set(TK_ENOMEM, "out of memory");
        char **argv = u->src ? nvcc_argv(c, u, out) : cc_argv(c, out);
        char **keyv = argv ? argv_for_key(c, argv) : NULL;
        if (!argv || !keyv) {
            argv_free(argv);
            argv_free(keyv);
            return tk_error_set(TK_ENOMEM, "out of memory");
        }
        rc = unit_key(c, u, keyv);
        argv_free(keyv);
        if (!rc && cache_get(u)) {
            argv_free(argv);
            u->job = -1;
            continue;
        }
        tk_job *j = &c->jobs[c->njobs];
        memset(j, 0, sizeof(*j));
        j->argv = argv;
        j->label = u->src ? u->src->path : "host code";
        u->job = (int)c->njobs++;
    }
    return rc;
}

/* The compilers' messages, then one line naming the first source that failed. */
static int run_jobs(compile *c)
{
    char cwd[2 * PATH_MAX];
    snprintf(cwd, sizeof cwd, "%s/src", c->tmp);
    for (size_t i = 0; i < c->njobs; i++)
        c->jobs[i].cwd = cwd;
    int parallel = c->o->jobs > 0 ? c->o->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    int rc = tk_jobs_run(c->jobs, c->njobs, parallel < 1 ? 1 : parallel, c->o->progress);
    const tk_job *failed = NULL;
    for (size_t i = 0; i < c->njobs; i++) {
        if (c->jobs[i].log && c->jobs[i].log[0])
            fputs(c->jobs[i].log, stderr);
        if (c->jobs[i].status != 0 && !failed)
            failed = &c->jobs[i];
    }
    if (rc)
        return rc;
    if (failed)
        return tk_error_set(TK_EINVAL, "%s does not compile (%s exited with status %d; its messages are above)",
                            failed->label, strrchr(failed->argv[0], '/') ? strrchr(failed->argv[0], '/') + 1
                                                                          : failed->argv[0],
                            failed->status);
    for (size_t i = 0; i < c->nunits; i++) {
        unit *u = &c->units[i];
        if (u->cached)
            continue;
        char *data;
        if ((rc = tk_file_read(&data, &u->len, u->out_path, MAX_ARTIFACT)))
            return rc;
        u->bytes = (unsigned char *)data;
        /* a cache that cannot be written costs speed only */
        if (u->cache_path && tk_file_write_atomic(u->cache_path, u->bytes, u->len) != 0) {
            fprintf(stderr, "tkexport compile: warning: cannot write the cache: %s\n", tk_error_last());
            tk_error_clear();
        }
    }
    return 0;
}

/* --- the package ---------------------------------------------------------------------------- */

/* The package as runtime/pkgfile.h describes it, written (and signed) by tk_pkgfile_write, the
 * format's one writer. Everything it points to belongs to c, except the arrays freed below. */
typedef struct pkg_desc {
    tk_pkgfile f;
    char ptx[32];
    char **fatbins; /* the kernel table's fatbin names */
} pkg_desc;

static void pkg_desc_release(pkg_desc *d)
{
    for (size_t i = 0; d->fatbins && i < d->f.nkernels; i++)
        free(d->fatbins[i]);
    free(d->fatbins);
    free(d->f.kernels);
    free(d->f.ops);
    for (size_t i = 0; i < d->f.ntunes; i++)
        free(d->f.tunes[i].rows);
    free(d->f.tunes);
    free(d->f.entries);
}

/* kernels[]: every kernel of the op table once, with its fatbin entry and source. */
static int describe_kernels(compile *c, pkg_desc *d)
{
    tk_program_model *m = c->m;
    size_t nk = 0, k = 0;
    for (size_t i = 0; i < m->nops; i++)
        nk += m->ops[i].nkernels;
    if (!(d->f.kernels = calloc(nk + 1, sizeof(*d->f.kernels))) || !(d->fatbins = calloc(nk + 1, sizeof(char *))))
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->nops; i++)
        for (size_t j = 0; j < m->ops[i].nkernels; j++, k++) {
            int seen = 0;
            for (size_t x = 0; x < d->f.nkernels && !seen; x++)
                seen = !strcmp(d->f.kernels[x].name, m->ops[i].kernels[j]);
            if (seen)
                continue;
            const char *src = c->kernel_src[k];
            size_t n = strlen(src) + 16;
            char *fatbin = malloc(n);
            if (!fatbin)
                return tk_error_set(TK_ENOMEM, "out of memory");
            snprintf(fatbin, n, "kernels/%.*s.fatbin", (int)(strlen(src) - 3), src);
            d->fatbins[d->f.nkernels] = fatbin;
            d->f.kernels[d->f.nkernels++] = (tk_pkg_kernel){m->ops[i].kernels[j], fatbin, (char *)src};
        }
    return 0;
}

/* tuning[]: per tuned kernel its declaration, the fatbin of each compiled variant and, when
 * measured, what measuring found. */
static int describe_tuning(compile *c, pkg_desc *d)
{
    if (!(d->f.tunes = calloc(c->ntunes + 1, sizeof(*d->f.tunes))))
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->ntunes; i++) {
        const tk_aoti_tune *t = &c->tunes[i];
        tk_pkg_tune *p = &d->f.tunes[d->f.ntunes++];
        p->kernel = t->kernel;
        p->key = t->key;
        p->nparams = t->nparams;
        p->nconfigs = t->nconfigs;
        for (int k = 0; k < t->nparams; k++)
            p->params[k] = t->params[k];
        memcpy(p->values, t->values, sizeof p->values);
        p->hparam = t->hparam;
        p->nh = t->nh;
        memcpy(p->hvalues, t->hvalues, sizeof p->hvalues);
        /* variant v is configuration v / nh with the heuristic's value v % nh */
        for (int v = 0; v < t->nconfigs * t->nh; v++)
            for (size_t u = 0; u < c->nunits; u++)
                if (c->units[u].tune == t && c->units[u].config == v)
                    p->fatbins[p->nfatbins++] = c->units[u].entry;
        p->measured = t->measured;
        p->device = t->measured ? (char *)t->device : NULL;
        p->driver = t->measured ? (char *)t->driver : NULL;
        if (!t->measured || !t->nrows)
            continue;
        if (!(p->rows = calloc(t->nrows, sizeof(*p->rows))))
            return tk_error_set(TK_ENOMEM, "out of memory");
        for (size_t r = 0; r < t->nrows; r++) {
            p->rows[r].bucket = t->rows[r].bucket;
            p->rows[r].key = t->rows[r].key;
            p->rows[r].winner = t->rows[r].winner;
            memcpy(p->rows[r].times_us, t->rows[r].times_us, sizeof p->rows[r].times_us);
        }
        p->nrows = t->nrows;
    }
    return 0;
}

static int write_package(compile *c, const char *out, tk_aoti_stats *stats)
{
    tk_program_model *m = c->m;
    pkg_desc d = {0};
    int kernels = c->has_kernels, host = c->has_host, rc;
    d.f.tkexport = TK_VERSION;
    d.f.program_name = m->name;
    d.f.archs = kernels ? (char **)c->archs : NULL;
    d.f.narchs = kernels ? c->narchs : 0;
    snprintf(d.ptx, sizeof d.ptx, "compute_%d", arch_number(c->archs[0]));
    d.f.ptx = kernels ? d.ptx : NULL;
    d.f.nvcc = kernels ? c->tc.nvcc_release : NULL;
    d.f.cc = host ? c->tc.cc_line : NULL;
    d.f.host = host ? "host/ops.so" : NULL;
    if ((rc = describe_kernels(c, &d)) || (rc = describe_tuning(c, &d)))
        goto done;
    d.f.ops = calloc(m->nops + 1, sizeof(*d.f.ops));
    d.f.entries = calloc(c->nunits + 3, sizeof(*d.f.entries));
    if (!d.f.ops || !d.f.entries) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m->nops; i++)
        d.f.ops[d.f.nops++] = (tk_pkg_op){m->ops[i].name, m->ops[i].builtin, m->ops[i].nkernels, m->ops[i].kernels};
    for (size_t i = 0; i < c->nunits; i++)
        d.f.entries[d.f.nentries++] = (tk_pkg_entry){.path = c->units[i].entry, .data = c->units[i].bytes,
                                                     .size = c->units[i].len};
    d.f.entries[d.f.nentries++] = (tk_pkg_entry){.path = "program.json", .data = (unsigned char *)m->program_json,
                                                 .size = strlen(m->program_json)};
    d.f.entries[d.f.nentries++] = (tk_pkg_entry){.path = "weights.safetensors", .data = m->weights,
                                                 .size = m->weights_len};
    rc = tk_pkgfile_write(out, &d.f, c->o->sign_key, &stats->package_bytes);
done:
    pkg_desc_release(&d);
    return rc;
}

/* --autotune: the compiled code measured on the GPU; without one, the defaults are recorded and
 * stats say why. */
static int autotune(compile *c, tk_aoti_stats *stats)
{
    tk_aoti_blob *blobs = calloc(c->nunits + 1, sizeof(*blobs));
    if (!blobs)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->nunits; i++)
        blobs[i] = (tk_aoti_blob){c->units[i].entry, c->units[i].bytes, c->units[i].len,
                                  c->units[i].src ? c->units[i].config : -1};
    int rc = tk_aoti_measure(c->m, c->tunes, c->ntunes, blobs, c->nunits, c->cache, c->o->progress);
    free(blobs);
    if (rc == TK_EDEVICE) {
        snprintf(stats->tune_note, sizeof stats->tune_note, "%s; the declared default configurations are recorded",
                 tk_error_last());
        tk_error_clear();
        return 0;
    }
    for (size_t i = 0; i < c->ntunes; i++) {
        stats->tuned += c->tunes[i].measured;
        stats->tune_cached += c->tunes[i].cached;
    }
    return rc;
}

/* --- the whole ------------------------------------------------------------------------------ */

/* The compile cache folder (<cache>/aoti), created; none with --no-cache or when it cannot be. */
static void open_cache(compile *c)
{
    const tk_aoti_options *o = c->o;
    if (!o->no_cache) {
        char *root = o->cache_dir ? strdup(o->cache_dir) : tk_default_cache_dir();
        if (root) {
            size_t n = strlen(root) + 8;
            if ((c->cache = malloc(n)))
                snprintf(c->cache, n, "%s/aoti", root);
            free(root);
            if (c->cache && tk_mkdirs(c->cache) != 0) {
                fprintf(stderr, "tkexport compile: warning: no cache: %s\n", tk_error_last());
                tk_error_clear();
                free(c->cache);
                c->cache = NULL;
            }
        }
    }
}

/* The identity of this machine's GPUs as the kernel driver shows it, without initializing CUDA
 * (which costs about 0.3 s): the driver's version and each GPU's information file, hashed.
 * -1 when there is no NVIDIA driver. */
static int gpu_identity(char key[65])
{
    static const char root[] = "/proc/driver/nvidia";
    char path[PATH_MAX], buf[4096];
    tk_strbuf sb = {0};
    snprintf(path, sizeof path, "%s/version", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        tk_strbuf_add(&sb, buf, got);
    fclose(f);
    snprintf(path, sizeof path, "%s/gpus", root);
    DIR *d = opendir(path);
    char *names[64];
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    if (d)
        closedir(d);
    int complete = 1;
    for (size_t i = 0; i < n; i++)
        complete &= names[i] != NULL;
    if (complete) /* sorted, so the order readdir gives does not matter */
        qsort(names, n, sizeof(char *), cmp_name);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/gpus/%s/information", root, names[i] ? names[i] : "");
        if (names[i] && (f = fopen(path, "r"))) {
            while ((got = fread(buf, 1, sizeof buf, f)) > 0)
                tk_strbuf_add(&sb, buf, got);
            fclose(f);
        }
        free(names[i]);
    }
    tk_sha256_hex(sb.buf ? sb.buf : "", sb.len, key);
    tk_strbuf_release(&sb);
    return 0;
}

/* The architectures of the GPUs present, else sm_90. Asking the driver means initializing CUDA,
 * so the answer is kept in the cache by the GPUs' identity (gpu_identity). */
static int default_archs(compile *c)
{
    static char found[TK_AOTI_MAX_ARCHS][16];
    char key[65], path[PATH_MAX + 100], *text = NULL;
    size_t len;
    int known = gpu_identity(key) == 0;
    if (known && c->cache) {
        snprintf(path, sizeof path, "%s/gpus-%s.txt", c->cache, key);
        if (access(path, R_OK) == 0 && tk_file_read(&text, &len, path, 4096) == 0) {
            for (char *tok = strtok(text, " \n"); tok && c->narchs < TK_AOTI_MAX_ARCHS; tok = strtok(NULL, " \n"))
                if (tk_aoti_check_arch(tok) == 0) {
                    snprintf(found[c->narchs], sizeof found[0], "%s", tok);
                    c->archs[c->narchs] = found[c->narchs];
                    c->narchs++;
                }
            free(text);
        }
        tk_error_clear();
        if (c->narchs)
            return 0;
    }
    int n = 0;
    if (known && tk_cuda_device_count(&n) == 0) {
        for (int i = 0; i < n && c->narchs < TK_AOTI_MAX_ARCHS; i++) {
            int major, minor;
            if (tk_cuda_compute_capability(i, &major, &minor) != 0)
                continue;
            snprintf(found[c->narchs], sizeof found[0], "sm_%d%d", major, minor);
            int dup = 0;
            for (size_t j = 0; j < c->narchs; j++)
                dup |= !strcmp(c->archs[j], found[c->narchs]);
            if (!dup)
                c->archs[c->narchs] = found[c->narchs], c->narchs++;
        }
    }
    tk_error_clear();
    if (known && c->narchs && c->cache) {
        tk_strbuf sb = {0};
        for (size_t i = 0; i < c->narchs; i++)
            tk_strbuf_addf(&sb, "%s\n", c->archs[i]);
        if (sb.buf && tk_file_write_atomic(path, sb.buf, sb.len) != 0)
            tk_error_clear();
        tk_strbuf_release(&sb);
    }
    if (!c->narchs)
        c->archs[c->narchs++] = DEFAULT_ARCH;
    return 0;
}

static void compile_release(compile *c)
{
    if (c->tmp[0])
        tk_remove_tree(c->tmp);
    for (size_t i = 0; i < c->nunits; i++) {
        free(c->units[i].cache_path);
        free(c->units[i].out_path);
        free(c->units[i].entry);
        free(c->units[i].bytes);
    }
    free(c->units);
    for (size_t i = 0; i < c->njobs; i++) {
        argv_free(c->jobs[i].argv);
        free(c->jobs[i].log);
    }
    free(c->jobs);
    free(c->kernel_src);
    tk_aoti_tunes_free(c->tunes, c->ntunes);
    free(c->cache);
    free(c->tk_heads);
    tk_toolchain_release(&c->tc);
    tk_program_model_free(c->m);
}

int tk_aoti_compile(const char *in, const char *out, const tk_aoti_options *o, tk_aoti_stats *stats)
{
    compile c = {.o = o};
    memset(stats, 0, sizeof(*stats));
    int rc = 0;
    for (size_t i = 0; i < o->narchs && !rc; i++) {
        rc = tk_aoti_check_arch(o->archs[i]);
        int dup = 0;
        for (size_t j = 0; j < c.narchs; j++)
            dup |= !strcmp(c.archs[j], o->archs[i]);
        if (!dup)
            c.archs[c.narchs++] = o->archs[i];
    }
    if (rc)
        return rc;
    open_cache(&c);
    if (!c.narchs)
        default_archs(&c);
    qsort(c.archs, c.narchs, sizeof(char *), cmp_arch);
    if (o->autotune) {
        /* no GPU to measure on: the default configurations only, and the reason for the summary */
        if (tk_cuda_available() == 0)
            c.variants = 1;
        else
            snprintf(c.tune_note, sizeof c.tune_note, "%s", tk_error_last());
        tk_error_clear();
    }
    if ((rc = tk_tkprog_read(&c.m, in)) || (rc = tk_tool_include_dir(c.include, sizeof c.include)) ||
        (rc = hash_tk_headers(&c)) || (rc = plan(&c)))
        goto done;
    int kernels = c.has_kernels, host = c.has_host;
    if (kernels && (rc = tk_toolchain_nvcc(&c.tc)))
        goto done;
    for (size_t i = 0; kernels && i < c.narchs && !rc; i++)
        rc = check_arch_known(c.archs[i], c.tc.nvcc_archs);
    if (rc || (host && (rc = tk_toolchain_cc(&c.tc))))
        goto done;
    if ((rc = tk_tempdir_new(c.tmp, sizeof c.tmp)))
        goto done;
    if (!(c.jobs = calloc(c.nunits + 1, sizeof(tk_job)))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = prepare_units(&c)))
        goto done;
    if (c.njobs) {
        char outdir[PATH_MAX + 8];
        snprintf(outdir, sizeof outdir, "%s/out", c.tmp);
        if ((rc = write_sources(&c)) || (rc = tk_mkdirs(outdir)) || (rc = run_jobs(&c)))
            goto done;
    }
    if (o->autotune && c.ntunes && c.variants && (rc = autotune(&c, stats)))
        goto done;
    if (o->autotune && c.ntunes && !c.variants)
        snprintf(stats->tune_note, sizeof stats->tune_note, "%s; the declared default configurations are recorded",
                 c.tune_note);
    if ((rc = write_package(&c, out, stats)))
        goto done;
    for (size_t i = 0; i < c.nunits; i++) {
        if (c.units[i].src) {
            stats->fatbins++;
            stats->kernel_sources += c.units[i].config == 0;
            stats->kernels_cached += c.units[i].cached;
        } else {
            stats->host = 1;
            stats->host_cached = c.units[i].cached;
        }
    }
    size_t at = 0;
    for (size_t i = 0; kernels && i < c.narchs; i++)
        at += (size_t)snprintf(stats->archs + at, sizeof stats->archs - at, "%s%s", i ? " " : "", c.archs[i]);
done:
    compile_release(&c);
    return rc;
}
