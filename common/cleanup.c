/* The registry and the signal handler of cleanup.h. Slots are claimed by the thread that makes a
 * path or a child and read by the handler: each slot's state is an atomic int (0 free, 1 being
 * written, 2 live), so the handler only ever reads complete entries. */
#define _GNU_SOURCE /* O_DIRECTORY, syscall */
#include "cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PATHS 32
#define MAX_CHILDREN 64

static struct {
    atomic_int state;
    int is_dir;
    char path[PATH_MAX];
} paths[MAX_PATHS];

static struct {
    atomic_int state;
    pid_t pid;
} children[MAX_CHILDREN];

void tk_cleanup_add_path(const char *path, int is_dir)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX)
        return;
    for (int i = 0; i < MAX_PATHS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&paths[i].state, &expect, 1)) {
            memcpy(paths[i].path, path, n + 1);
            paths[i].is_dir = is_dir;
            atomic_store(&paths[i].state, 2);
            return;
        }
    }
}

void tk_cleanup_drop_path(const char *path)
{
    for (int i = 0; i < MAX_PATHS; i++)
        if (atomic_load(&paths[i].state) == 2 && !strcmp(paths[i].path, path)) {
            atomic_store(&paths[i].state, 0);
            return;
        }
}

void tk_cleanup_add_child(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&children[i].state, &expect, 1)) {
            children[i].pid = pid;
            atomic_store(&children[i].state, 2);
            return;
        }
    }
}

void tk_cleanup_drop_child(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (atomic_load(&children[i].state) == 2 && children[i].pid == pid) {
            atomic_store(&children[i].state, 0);
            return;
        }
}

/* rm -r with system calls only (no malloc, no stdio): entries read with getdents64 into a
 * buffer on the stack, removed with unlinkat; depth bounded. */
struct linux_dirent64 {
    ino64_t d_ino;
    off64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* 1 when name (in parent) is gone afterwards. */
static int remove_at(int parent, const char *name, int depth)
{
    if (unlinkat(parent, name, 0) == 0)
        return 1;
    if (depth > 16)
        return 0;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096];
    /* passes over what is left, until one removes nothing (an entry that cannot go) */
    for (int removed = 1; removed;) {
        removed = 0;
        lseek(fd, 0, SEEK_SET);
        long n;
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
                off += d->d_reclen;
                if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
                    removed |= remove_at(fd, d->d_name, depth + 1);
            }
        }
    }
    close(fd);
    return unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (atomic_load(&children[i].state) == 2) {
            kill(-children[i].pid, SIGTERM); /* the child's process group */
            kill(children[i].pid, SIGTERM);
        }
    for (int i = 0; i < MAX_PATHS; i++)
        if (atomic_load(&paths[i].state) == 2)
            paths[i].is_dir ? remove_at(AT_FDCWD, paths[i].path, 0) : (void)unlink(paths[i].path);
    /* the children go before us; a child that ignores SIGTERM is left to its process group */
    signal(sig, SIG_DFL);
    raise(sig);
}

void tk_cleanup_install(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old;
        /* a signal the caller ignores (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}
