/* What an interrupted command leaves behind: nothing. The temporary folders and files a command
 * makes and the child processes it runs are registered here while they exist; on SIGINT, SIGTERM
 * or SIGHUP the handler ends the children (their whole process group: nvcc's own children too),
 * removes the registered folders and files, and lets the signal end the process as it would
 * have (exit status 128 + the signal's number). The handler uses async-signal-safe calls only. */
#ifndef TK_CLEANUP_H
#define TK_CLEANUP_H

#include <sys/types.h>

/* Installs the handler (once; the CLI does it at start-up). */
void tk_cleanup_install(void);

/* A temporary folder (removed whole) or file made by this process; dropped once it is gone or
 * kept for good. At most 32 of each at once: more are simply not tracked. */
void tk_cleanup_add_path(const char *path, int is_dir);
void tk_cleanup_drop_path(const char *path);

/* A child process, leader of its own process group (tk_proc_spawn makes it so). */
void tk_cleanup_add_child(pid_t pid);
void tk_cleanup_drop_child(pid_t pid);

#endif
