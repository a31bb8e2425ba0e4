/* The compilers the AOT stage drives: where nvcc and the C compiler are, what they are (their
 * --version output enters every cache key), and which architectures nvcc knows. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aoti.h"
#include "proc.h"
#include "strbuf.h"

int tk_run_capture(char *const *argv, char **out)
{
    int status, rc = tk_proc_run_capture(argv, out, &status);
    if (rc)
        return rc;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char how[96], last[240];
    tk_proc_describe(status, how, sizeof how);
    tk_proc_last_line(*out, last, sizeof last);
    free(*out);
    *out = NULL;
    if (last[0])
        return tk_error_set(TK_ETOOL, "'%s %s' %s: %s", argv[0], argv[1] ? argv[1] : "", how, last);
    return tk_error_set(TK_ETOOL, "'%s %s' %s and printed nothing", argv[0], argv[1] ? argv[1] : "", how);
}

static int executable(const char *path)
{
    struct stat st;
    return path && path[0] && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* name looked up on PATH, into out. */
static int on_path(const char *name, char *out, size_t n)
{
    const char *path = getenv("PATH");
    if (strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return executable(out);
    }
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        snprintf(out, n, "%.*s/%s", (int)len, len ? path : ".", name);
        if (executable(out))
            return 1;
        path = end ? end + 1 : NULL;
    }
    return 0;
}

/* The line of text holding needle, copied; NULL when none does. */
static char *line_with(const char *text, const char *needle)
{
    const char *p = needle ? strstr(text, needle) : text;
    if (!p)
        return NULL;
    while (p > text && p[-1] != '\n')
        p--;
    size_t len = strcspn(p, "\r\n");
    return strndup(p, len);
}

int tk_toolchain_nvcc(tk_toolchain *tc)
{
    if (tc->nvcc)
        return 0;
    char path[PATH_MAX], tried[3 * PATH_MAX] = "";
    const char *env = getenv("TKEXPORT_NVCC");
    if (env && env[0]) {
        if (!on_path(env, path, sizeof path))
            return tk_error_set(TK_ETOOL, "nvcc not found: TKEXPORT_NVCC is '%s', which is not an executable",
                                env);
    } else {
        const char *home = getenv("CUDA_HOME");
        int found = 0;
        if (home && home[0]) {
            snprintf(path, sizeof path, "%s/bin/nvcc", home);
            found = executable(path);
            snprintf(tried, sizeof tried, "%s, ", path);
        }
        if (!found) {
            snprintf(path, sizeof path, "/usr/local/cuda/bin/nvcc");
            found = executable(path);
        }
        if (!found && !on_path("nvcc", path, sizeof path))
            return tk_error_set(TK_ETOOL, "nvcc not found (looked at %s/usr/local/cuda/bin/nvcc and PATH): set "
                                "TKEXPORT_NVCC or CUDA_HOME", tried);
    }
    char *argv[] = {path, "--version", NULL};
    char *listv[] = {path, "--list-gpu-code", NULL};
    int rc = tk_run_capture(argv, &tc->nvcc_version);
    if (!rc)
        rc = tk_run_capture(listv, &tc->nvcc_archs);
    if (rc) {
        free(tc->nvcc_version);
        tc->nvcc_version = NULL;
        return tk_error_set(TK_ETOOL, "nvcc at '%s' does not run: %s", path, tk_error_last());
    }
    for (char *c = tc->nvcc_archs; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    tc->nvcc_release = line_with(tc->nvcc_version, "release");
    if (!tc->nvcc_release)
        tc->nvcc_release = line_with(tc->nvcc_version, NULL);
    if (!(tc->nvcc = strdup(path)) || !tc->nvcc_release)
        return tk_error_set(TK_ENOMEM, "out of memory");
    return 0;
}

int tk_toolchain_cc(tk_toolchain *tc)
{
    if (tc->cc)
        return 0;
    const char *cc = getenv("CC");
    char path[PATH_MAX];
    if (!cc || !cc[0])
        cc = "cc";
    if (!on_path(cc, path, sizeof path))
        return tk_error_set(TK_ETOOL, "the C compiler '%s' was not found on PATH: install one or set CC", cc);
    char *argv[] = {path, "--version", NULL};
    int rc = tk_run_capture(argv, &tc->cc_version);
    if (rc)
        return tk_error_set(TK_ETOOL, "the C compiler '%s' does not run: %s", path, tk_error_last());
    tc->cc_line = line_with(tc->cc_version, NULL);
    if (!(tc->cc = strdup(path)) || !tc->cc_line)
        return tk_error_set(TK_ENOMEM, "out of memory");
    return 0;
}

void tk_toolchain_release(tk_toolchain *tc)
{
    free(tc->nvcc);
    free(tc->nvcc_version);
    free(tc->nvcc_release);
    free(tc->nvcc_archs);
    free(tc->cc);
    free(tc->cc_version);
    free(tc->cc_line);
    memset(tc, 0, sizeof(*tc));
}
