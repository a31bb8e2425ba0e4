/* The one way tkexport runs another program (nvcc, the C compiler, their --version): each child
 * leads a process group of its own, registered with cleanup.h while it runs, so an interrupted
 * command ends it and whatever it started; stdin is /dev/null; failures say why. */
#ifndef TK_PROC_H
#define TK_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Starts argv (argv[0] looked up on PATH) in cwd (NULL: ours), its stdout and stderr into out_fd
 * (-1: ours). TK_ENOTFOUND with the reason when it cannot start. */
int tk_proc_spawn(pid_t *pid, char *const *argv, const char *cwd, int out_fd);

/* Waits for pid (or, with pid -1, for any child, into *pid) and gives its wait status; the child
 * leaves the cleanup registry. TK_EIO when there is nothing to wait for. */
int tk_proc_wait(pid_t *pid, int *status);

/* Runs argv to its end with stdout and stderr captured together (at most 1 MiB kept) into *out
 * (malloc'd, NUL-terminated) and its wait status into *status. Starting it is the only failure. */
int tk_proc_run_capture(char *const *argv, char **out, int *status);

/* "exited with status 1" or "was killed by signal 9 (Killed)". */
void tk_proc_describe(int status, char *buf, size_t n);

/* The last non-empty line of a program's output (at most n - 1 bytes), "" when it printed nothing. */
void tk_proc_last_line(const char *output, char *buf, size_t n);

#endif
