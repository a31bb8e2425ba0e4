/* Compiler processes run concurrently: at most `parallel` at a time, each with its output in a
 * log file of its own (read back once it ends, so messages of parallel jobs never interleave),
 * and a progress line on a terminal. */
#define _DEFAULT_SOURCE /* mkstemp, pread */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aoti.h"
#include "fsutil.h"
#include "proc.h"

#define LOG_MAX (4u << 20)

typedef struct slot {
    pid_t pid;
    size_t job;
    int log_fd;
} slot;

static int start(tk_job *j, slot *s, size_t index)
{
    char tmpl[] = "/tmp/tkexport-log-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return tk_error_set(TK_EIO, "cannot create a log file: %s", strerror(errno));
    unlink(tmpl); /* read back through fd; nothing stays behind */
    int rc = tk_proc_spawn(&s->pid, j->argv, j->cwd, fd);
    if (rc) {
        close(fd);
        j->status = -1;
        return rc;
    }
    s->job = index;
    s->log_fd = fd;
    return 0;
}

static void collect(tk_job *j, slot *s, int status)
{
    j->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    off_t size = lseek(s->log_fd, 0, SEEK_END);
    if (size > (off_t)LOG_MAX)
        size = LOG_MAX;
    j->log = malloc(size > 0 ? (size_t)size + 1 : 1);
    if (j->log) {
        ssize_t got = size > 0 ? pread(s->log_fd, j->log, (size_t)size, 0) : 0;
        j->log[got > 0 ? got : 0] = '\0';
    }
    close(s->log_fd);
    s->pid = 0;
}

static void progress_line(size_t done, size_t n, const char *label)
{
    fprintf(stderr, "\r\033[K[%zu/%zu] %s", done, n, label);
    fflush(stderr);
}

int tk_jobs_run(tk_job *jobs, size_t n, int parallel, int progress)
{
    if (parallel < 1)
        parallel = 1;
    slot *slots = calloc((size_t)parallel, sizeof(*slots));
    if (!slots)
        return tk_error_set(TK_ENOMEM, "out of memory");
    size_t next = 0, done = 0, running = 0;
    int rc = 0;
    while (done < n) {
        while (!rc && next < n && running < (size_t)parallel) {
            slot *s = NULL;
            for (int i = 0; i < parallel && !s; i++)
                if (!slots[i].pid)
                    s = &slots[i];
            if ((rc = start(&jobs[next], s, next)))
                break;
            if (progress)
                progress_line(done, n, jobs[next].label);
            next++;
            running++;
        }
        if (!running)
            break;
        int status;
        pid_t pid = -1;
        if ((rc = tk_proc_wait(&pid, &status)))
            break;
        for (int i = 0; i < parallel; i++) {
            if (slots[i].pid == pid) {
                collect(&jobs[slots[i].job], &slots[i], status);
                running--;
                done++;
                if (progress)
                    progress_line(done, n, jobs[slots[i].job].label);
            }
        }
    }
    /* after a failure to start: let the others finish, so no process outlives us */
    for (int i = 0; i < parallel; i++) {
        if (slots[i].pid) {
            int status = 0;
            pid_t pid = slots[i].pid;
            tk_proc_wait(&pid, &status);
            collect(&jobs[slots[i].job], &slots[i], status);
        }
    }
    if (progress && n)
        fputs("\r\033[K", stderr);
    free(slots);
    return rc;
}
