/* tk_log: how the runtime says something outside a return value. Internal to libtkrt; the
 * callback it goes to is set with tk_log_set (tk/log.h). */
#ifndef TK_RT_LOG_H
#define TK_RT_LOG_H

#include <tk/log.h>

/* Formats one line (printf format, no final newline) and hands it to the log callback. */
void tk_log(tk_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
