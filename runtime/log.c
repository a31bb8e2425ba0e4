/* The log callback behind tk_log_set and tk_log: the runtime's one way to output, by default a
 * line on stderr. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tk_log_fn log_fn; /* NULL: log_default */
static void *log_user;

/* Warnings and errors; the chatter of INFO and DEBUG (packages opened and closed...) only reaches
 * a callback that asks for it. */
static void log_default(tk_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level <= TK_LOG_WARN)
        fprintf(stderr, "tkexport: %s\n", msg); /* one call: lines from threads do not interleave */
}

void tk_log_set(tk_log_fn fn, void *user)
{
    pthread_mutex_lock(&lock);
    log_fn = fn;
    log_user = fn ? user : NULL;
    pthread_mutex_unlock(&lock);
}

void tk_log(tk_log_level level, const char *fmt, ...)
{
    char buf[1024], *msg = buf;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf && (msg = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    } else if (!msg) {
        msg = buf; /* out of memory: the message cut at sizeof buf - 1 bytes */
    }

    /* the pair is read under the lock and called without it, so that a callback may call
       tk_log_set */
    pthread_mutex_lock(&lock);
    tk_log_fn fn = log_fn ? log_fn : log_default;
    void *user = log_user;
    pthread_mutex_unlock(&lock);
    fn(level, msg, user);
    if (msg != buf)
        free(msg);
}
