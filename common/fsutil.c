/* File helpers shared by the components. */
#define _DEFAULT_SOURCE /* mkdtemp, realpath */
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <tk/error.h>

#include "cleanup.h"

int tk_file_read(char **out, size_t *len, const char *path, size_t max_size)
{
    int rc = 0;
    char *buf = NULL;
    *out = NULL;
    /* opened without blocking and checked before any read: a FIFO would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tk_error_set(TK_EIO, "cannot read '%s': not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    }
    if ((size_t)st.st_size > max_size) {
        rc = tk_error_set(TK_EINVAL, "'%s' is %lld bytes, more than the %zu allowed", path,
                          (long long)st.st_size, max_size);
        goto done;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading '%s'", path);
        goto done;
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        rc = tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    *out = buf;
    buf = NULL;
done:
    free(buf);
    fclose(f);
    return rc;
}

/* A path that exists and is not a regular file (/dev/stdout, /dev/null, a pipe) is written in
 * place: replacing it by a rename would destroy it. */
static int write_in_place(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
    int bad = fwrite(data, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno)) : 0;
}

int tk_file_write_atomic(const char *path, const void *data, size_t n)
{
    return tk_file_write_atomic_mode(path, data, n, 0644, 0);
}

int tk_file_write_atomic_mode(const char *path, const void *data, size_t n, unsigned mode, int keep_existing)
{
    struct stat st;
    if (!keep_existing && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return write_in_place(path, data, n);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return tk_error_set(TK_ENOMEM, "out of memory");
    snprintf(tmp, plen + 16, "%s.tmpXXXXXX", path);
    int rc = 0;
    int fd = mkstemp(tmp); /* mode 0600 until fchmod: a private file is never readable by others */
    if (fd < 0) {
        rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        goto done;
    }
    tk_cleanup_add_path(tmp, 0); /* an interrupt removes it: nothing half-written stays */
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
            close(fd);
            unlink(tmp);
            goto done;
        }
        p += w;
        left -= (size_t)w;
    }
    fchmod(fd, (mode_t)mode); /* where it fails (some file systems), the file stays 0600 */
    if (close(fd) != 0) {
        rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (keep_existing) {
        /* link() publishes the file only where there is none, atomically: of two processes
         * creating it at once, one wins and the other reads the winner's */
        if (link(tmp, path) != 0)
            rc = errno == EEXIST ? 1 : tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    }
done:
    tk_cleanup_drop_path(tmp);
    free(tmp);
    return rc;
}

int tk_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof(buf))
        return tk_error_set(TK_EINVAL, "path too long: '%s'", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tk_error_set(TK_EIO, "cannot create '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return tk_error_set(TK_EIO, "cannot create '%s': %s", buf, strerror(errno));
    return 0;
}

char *tk_path_relative_to_cwd(const char *abs_path)
{
    char cwd[PATH_MAX];
    if (abs_path[0] == '/' && getcwd(cwd, sizeof(cwd))) {
        size_t n = strlen(cwd);
        if (n == 1)
            return strdup(abs_path + 1);
        if (strncmp(abs_path, cwd, n) == 0 && abs_path[n] == '/')
            return strdup(abs_path + n + 1);
    }
    return strdup(abs_path);
}

int tk_path_is_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    return S_ISDIR(st.st_mode) ? 1 : 0;
}

char *tk_default_config_dir(void)
{
    const char *e = getenv("XDG_CONFIG_HOME");
    char buf[PATH_MAX];
    if (e && *e) {
        snprintf(buf, sizeof(buf), "%s/tkexport", e);
        return strdup(buf);
    }
    if ((e = getenv("HOME")) && *e) {
        snprintf(buf, sizeof(buf), "%s/.config/tkexport", e);
        return strdup(buf);
    }
    return NULL;
}

char *tk_default_cache_dir(void)
{
    const char *e = getenv("TKEXPORT_CACHE_DIR");
    char buf[PATH_MAX];
    if (e && *e)
        return strdup(e);
    if ((e = getenv("XDG_CACHE_HOME")) && *e) {
        snprintf(buf, sizeof(buf), "%s/tkexport", e);
        return strdup(buf);
    }
    if ((e = getenv("HOME")) && *e) {
        snprintf(buf, sizeof(buf), "%s/.cache/tkexport", e);
        return strdup(buf);
    }
    return NULL;
}

/* tkexport's include folder, found as the analyzer finds it: $TKEXPORT_INCLUDE_DIR, then
 * <prefix>/share/tkexport/include beside the executable, then the source tree's. */
int tk_tool_include_dir(char *out, size_t n)
{
    char exe[PATH_MAX], share[PATH_MAX + 40], probe[PATH_MAX + 64];
    share[0] = '\0';
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(share, sizeof share, "%s/../share/tkexport/include", exe);
        }
    }
    const char *candidates[] = {getenv("TKEXPORT_INCLUDE_DIR"), share, TK_SOURCE_INCLUDE_DIR};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (!candidates[i] || !candidates[i][0])
            continue;
        snprintf(probe, sizeof probe, "%s/tk/program.h", candidates[i]);
        if (access(probe, R_OK) == 0 && realpath(candidates[i], probe) && strlen(probe) < n) {
            snprintf(out, n, "%s", probe);
            return 0;
        }
    }
    return tk_error_set(TK_ENOTFOUND, "cannot find tkexport's own headers (tk/program.h); set TKEXPORT_INCLUDE_DIR");
}

int tk_remove_tree(const char *path)
{
    struct stat st;
    /* lstat: a symbolic link is removed itself, never the folder it points to */
    tk_cleanup_drop_path(path);
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char sub[PATH_MAX];
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            tk_remove_tree(sub);
        }
        if (d)
            closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

static int walk(const char *dir, int depth, int (*visit)(const char *path, void *arg), void *arg)
{
    char path[PATH_MAX];
    if (depth > TK_WALK_MAX_DEPTH)
        return 0;
    snprintf(path, sizeof path, "%s/CMakeCache.txt", dir);
    if (depth > 0 && access(path, F_OK) == 0)
        return 0; /* a CMake build tree: generated sources, not the user's */
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort), rc = 0;
    if (n < 0)
        return tk_error_set(TK_EIO, "cannot read folder '%s': %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        struct stat lst, st;
        if (!rc && name[0] != '.' && (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path &&
            lstat(path, &lst) == 0) {
            if (S_ISDIR(lst.st_mode))
                rc = walk(path, depth + 1, visit, arg);
            else if (S_ISREG(lst.st_mode) || (S_ISLNK(lst.st_mode) && stat(path, &st) == 0 && S_ISREG(st.st_mode)))
                rc = visit(path, arg);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int tk_walk_files(const char *dir, int (*visit)(const char *path, void *arg), void *arg)
{
    return walk(dir, 0, visit, arg);
}

int tk_tempdir_new(char *out, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, n, "%s/tkexport-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(out))
        return tk_error_set(TK_EIO, "cannot create a temporary folder '%s': %s", out, strerror(errno));
    tk_cleanup_add_path(out, 1); /* removed on an interrupt; tk_remove_tree lets it go */
    return 0;
}
