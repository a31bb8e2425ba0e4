/* tk_log: stand-in writing to stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void tk_log(tk_log_level level, const char *fmt, ...)
{
    (void)level;
    va_list ap;
    va_start(ap, fmt);
    fputs("tkexport: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
