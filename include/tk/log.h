/* The library's only output: libtkrt prints nothing itself. What it has to say outside a return
 * value (a warning from a constructor, which has no caller to return an error to) goes to one
 * process-wide callback, by default a line on stderr. */
#ifndef TK_LOG_H
#define TK_LOG_H

#include <tk/export.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

typedef enum tk_log_level { TK_LOG_ERROR, TK_LOG_WARN, TK_LOG_INFO, TK_LOG_DEBUG } tk_log_level;

/* A log callback: msg is one line without its newline, valid during the call only; user is what
 * was given to tk_log_set. Called on the thread that has something to say, possibly on several
 * threads at once, and possibly while that thread holds a lock of the library (a registry's, when
 * a constructor warns): it must not call libtkrt, tk_log_set excepted. */
typedef void (*tk_log_fn)(tk_log_level level, const char *msg, void *user);

/* Sends every later message, of every level, to fn(level, msg, user). tk_log_set(NULL, NULL)
 * restores the default, which writes "tkexport: <msg>\n" to stderr for errors and warnings and
 * drops INFO and DEBUG (a package opened or closed, its host object loaded or unloaded). Thread-safe;
 * a message another thread has already started to deliver may still reach the previous callback. */
void tk_log_set(tk_log_fn fn, void *user);

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
