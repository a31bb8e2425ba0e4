/* Child processes (proc.h): posix_spawn with a process group of its own, signals blocked between
 * the spawn and the registration, so that an interrupt never misses a child. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np (glibc 2.29) */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tk/error.h>

#include "cleanup.h"
#include "strbuf.h"

extern char **environ;

#define CAPTURE_MAX (1u << 20)

int tk_proc_spawn(pid_t *pid, char *const *argv, const char *cwd, int out_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    }
    if (cwd)
        posix_spawn_file_actions_addchdir_np(&fa, cwd);
    /* its own process group: ended with everything it starts (nvcc runs cicc, ptxas...); the
     * child gets the default signal dispositions and an empty mask */
    sigset_t all, old, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGHUP);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &def);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
    if (rc == 0)
        tk_cleanup_add_child(*pid);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0)
        return tk_error_set(TK_ENOTFOUND, "cannot run '%s': %s", argv[0], strerror(rc));
    return 0;
}

int tk_proc_wait(pid_t *pid, int *status)
{
    pid_t got;
    while ((got = waitpid(*pid, status, 0)) < 0 && errno == EINTR)
        ;
    if (got < 0)
        return tk_error_set(TK_EIO, "waiting for a child process: %s", strerror(errno));
    tk_cleanup_drop_child(got);
    *pid = got;
    return 0;
}

int tk_proc_run_capture(char *const *argv, char **out, int *status)
{
    *out = NULL;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return tk_error_set(TK_EIO, "pipe: %s", strerror(errno));
    pid_t pid;
    int rc = tk_proc_spawn(&pid, argv, NULL, pipefd[1]);
    close(pipefd[1]);
    if (rc) {
        close(pipefd[0]);
        return rc;
    }
    tk_strbuf sb = TK_STRBUF_INIT;
    char buf[4096];
    ssize_t got;
    int oom = 0;
    while ((got = read(pipefd[0], buf, sizeof buf)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (sb.len < CAPTURE_MAX && tk_strbuf_add(&sb, buf, (size_t)got))
            oom = 1;
    }
    close(pipefd[0]);
    rc = tk_proc_wait(&pid, status);
    if (!rc && oom)
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    if (!rc && !(*out = sb.buf ? tk_strbuf_detach(&sb) : strdup("")))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    tk_strbuf_release(&sb);
    return rc;
}

void tk_proc_describe(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "ended with wait status %d", status);
}

void tk_proc_last_line(const char *output, char *buf, size_t n)
{
    const char *end = output ? output + strlen(output) : NULL;
    buf[0] = '\0';
    while (end && end > output && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    if (!end || end == output)
        return;
    const char *start = end;
    while (start > output && start[-1] != '\n')
        start--;
    snprintf(buf, n, "%.*s", (int)(end - start), start);
}
