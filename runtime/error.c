/* The thread-local last error behind tk_error_last() and tk_error_last_code(). It lives here, in
 * the runtime, and nowhere else: a process has one runtime (libtkrt.so or tkrt_static) and so
 * one error state, which tkcommon, the analyzer and the tools report into as well. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <tk/error.h>

static _Thread_local char last_error[1024];
static _Thread_local int last_code;

const char *tk_error_last(void) { return last_error; }

int tk_error_last_code(void) { return last_code; }

void tk_error_clear(void)
{
    last_error[0] = '\0';
    last_code = 0;
}

int tk_error_set(int code, const char *fmt, ...)
{
    /* formatted apart first: the arguments may be the last error itself (a message that wraps its
     * cause, tk_error_set(..., "...: %s", tk_error_last())) */
    char text[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    memcpy(last_error, text, sizeof last_error);
    last_code = code;
    return code;
}
