/* File helpers shared by the components. */
#define _POSIX_C_SOURCE 200809L
#include "fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <tk/error.h>

int tk_file_read(char **out, size_t *len, const char *path, size_t max_size)
{
    int rc = 0;
    char *buf = NULL;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tk_error_set(TK_EIO, "cannot read '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = tk_error_set(TK_EIO, "cannot read '%s': not a regular file", path);
        goto done;
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
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return write_in_place(path, data, n);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return tk_error_set(TK_ENOMEM, "out of memory");
    snprintf(tmp, plen + 16, "%s.tmpXXXXXX", path);
    int rc = 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        goto done;
    }
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
    fchmod(fd, 0644);
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        rc = tk_error_set(TK_EIO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    }
done:
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
