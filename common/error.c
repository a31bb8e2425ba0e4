/* The thread-local last error behind tk_error_last(). */
#include <stdarg.h>
#include <stdio.h>
#include <tk/error.h>

static _Thread_local char last_error[1024];

const char *tk_error_last(void) { return last_error; }

void tk_error_clear(void) { last_error[0] = '\0'; }

int tk_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return code;
}
