/* The library's only voice: messages go through the log callback (stand-in until the public
 * tk_log_set lands: they go to stderr). */
#ifndef TK_LOG_H
#define TK_LOG_H

typedef enum tk_log_level { TK_LOG_ERROR, TK_LOG_WARN, TK_LOG_INFO, TK_LOG_DEBUG } tk_log_level;

void tk_log(tk_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
