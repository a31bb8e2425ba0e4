/* The host sources of an export as one shared object: every .c under the PATHs compiled by the
 * system C compiler against tkexport's headers, into a temporary folder. */
#define _DEFAULT_SOURCE /* realpath, mkdtemp */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporter.h"
#include "fsutil.h"
#include "proc.h"
#include "strbuf.h"


typedef struct list {
    char **v;
    size_t n, cap;
} list;

static int list_push(list *l, const char *s)
{
    if (l->n + 1 >= l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **p = realloc(l->v, cap * sizeof(*p));
        if (!p)
            return tk_error_set(TK_ENOMEM, "out of memory");
        l->v = p;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s)))
        return tk_error_set(TK_ENOMEM, "out of memory");
    l->v[++l->n] = NULL;
    return 0;
}

static void list_release(list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* tk_walk_files' visitor: the .c files of a folder, as the analyzer finds them. */
static int add_c_source(const char *path, void *arg)
{
    return tk_ends_with(path, ".c") ? list_push(arg, path) : 0;
}

static int run(char *const *argv)
{
    pid_t pid;
    int status, rc = tk_proc_spawn(&pid, argv, NULL, -1);
    if (rc)
        return tk_error_set(TK_ETOOL, "cannot run the C compiler '%s' (set CC): %s", argv[0], tk_error_last());
    if ((rc = tk_proc_wait(&pid, &status)))
        return rc;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char how[96];
    tk_proc_describe(status, how, sizeof how);
    return tk_error_set(TK_EINVAL, "compiling the sources failed ('%s' %s; its messages are above)", argv[0], how);
}

void tk_export_compile_cleanup(char *so_path, char *tmpdir)
{
    if (tmpdir)
        tk_remove_tree(tmpdir);
    free(so_path);
    free(tmpdir);
}

int tk_export_compile(char **so_path, char **tmpdir, const char *const *paths, size_t n, int progress)
{
    list sources = {0}, argv = {0};
    char inc[PATH_MAX], flag[PATH_MAX + 8], tmpl[PATH_MAX], so[PATH_MAX + 16];
    *so_path = NULL;
    *tmpdir = NULL;
    int rc = tk_tool_include_dir(inc, sizeof inc);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s", paths[i]);
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
            p[--len] = '\0';
        int isdir = tk_path_is_dir(p);
        if (isdir < 0)
            rc = tk_error_set(TK_ENOTFOUND, "'%s' does not exist", paths[i]);
        else if (isdir)
            rc = tk_walk_files(p, add_c_source, &sources);
        else if (tk_ends_with(p, ".c"))
            rc = list_push(&sources, p);
    }
    if (rc)
        goto done;
    if (!sources.n) {
        rc = tk_error_set(TK_ENOTFOUND, "no .c file under the given paths (a model is a .c file with TK_PROGRAM)");
        goto done;
    }
    if ((rc = tk_tempdir_new(tmpl, sizeof tmpl)))
        goto done;
    if (!(*tmpdir = strdup(tmpl))) {
        rmdir(tmpl);
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    snprintf(so, sizeof so, "%s/ops.so", tmpl);
    snprintf(flag, sizeof flag, "-I%s", inc);
    const char *cc = getenv("CC");
    const char *fixed[] = {cc && cc[0] ? cc : "cc", "-std=c11", "-shared", "-fPIC", "-O1", flag, "-o", so};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && !rc; i++)
        rc = list_push(&argv, fixed[i]);
    for (size_t i = 0; i < sources.n && !rc; i++)
        rc = list_push(&argv, sources.v[i]);
    if (rc)
        goto done;
    if (progress)
        fprintf(stderr, "tkexport export: compiling %zu source%s with %s\n", sources.n, sources.n == 1 ? "" : "s",
                argv.v[0]);
    if ((rc = run(argv.v)))
        goto done;
    if (!(*so_path = strdup(so)))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
done:
    if (rc && *tmpdir) {
        tk_export_compile_cleanup(NULL, *tmpdir);
        *tmpdir = NULL;
    }
    list_release(&sources);
    list_release(&argv);
    return rc;
}
