/* Files, temporary folders and child processes for the suites that drive the tkexport command
 * or compilers: whole-file reads, a fresh folder and its removal, a run with captured output.
 * Include after <cmocka.h>. */
#ifndef TK_TEST_PROC_H
#define TK_TEST_PROC_H

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The file's bytes plus a NUL (length in *len when len is not NULL), or NULL. */
static inline char *tk_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    if (buf && len)
        *len = (size_t)n;
    fclose(f);
    return buf;
}

/* Writes n bytes to path (failing the test when it cannot). */
static inline void tk_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n)
        fail_msg("cannot write '%s'", path);
    fclose(f);
}

/* A fresh temporary folder (malloc'd; removed by tk_test_rm_tree). */
static inline char *tk_test_temp_dir(void)
{
    char tmpl[] = "/tmp/tk-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

/* Runs argv (argv[0] looked up on PATH) with stdout and stderr into *out and *err (malloc'd,
 * either may be NULL to drop it); env: extra "NAME=value" settings, NULL-terminated, or NULL.
 * Returns the exit status, or -1 when it did not exit normally. */
static inline int tk_test_run(const char *const *argv, const char *const *env, char **out, char **err)
{
    char tmpl[] = "/tmp/tk-test-run-XXXXXX", outp[64], errp[64];
    assert_non_null(mkdtemp(tmpl));
    snprintf(outp, sizeof outp, "%s/out", tmpl);
    snprintf(errp, sizeof errp, "%s/err", tmpl);
    size_t nenv = 0, nextra = 0;
    while (environ[nenv])
        nenv++;
    while (env && env[nextra])
        nextra++;
    char **envp = calloc(nenv + nextra + 1, sizeof(char *));
    assert_non_null(envp);
    size_t k = 0;
    for (size_t i = 0; i < nextra; i++)
        envp[k++] = (char *)env[i];
    for (size_t i = 0; i < nenv; i++) {
        int overridden = 0;
        for (size_t j = 0; j < nextra; j++) {
            size_t len = strcspn(env[j], "=");
            overridden |= !strncmp(environ[i], env[j], len + 1);
        }
        if (!overridden)
            envp[k++] = environ[i];
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int status = -1;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rc == 0)
        waitpid(pid, &status, 0);
    if (out)
        *out = tk_test_read_file(outp, NULL);
    if (err)
        *err = tk_test_read_file(errp, NULL);
    unlink(outp);
    unlink(errp);
    rmdir(tmpl);
    if (rc != 0)
        fail_msg("cannot run '%s'", argv[0]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* rm -rf dir, then free(dir). */
static inline void tk_test_rm_tree(char *dir)
{
    const char *argv[] = {"rm", "-rf", dir, NULL};
    tk_test_run(argv, NULL, NULL, NULL);
    free(dir);
}

#endif
