/* Error codes and the thread-local last error shared by every tkexport library. */
#ifndef TK_ERROR_H
#define TK_ERROR_H

#include <tk/export.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

/* Library functions return 0 or one of these negative codes; the message that goes with the
 * failure is in tk_error_last() of the failing thread. */
typedef enum tk_error_code {
    TK_OK = 0,
    TK_EINVAL = -1,   /* bad argument, or an input refused (a shape, a signature, a policy) */
    TK_ENOMEM = -2,   /* out of memory */
    TK_EIO = -3,      /* a file could not be read or written */
    TK_ENOTFOUND = -4,/* a named op, kernel, entry or file does not exist */
    TK_EUNSUPPORTED = -5, /* no implementation for this device or dtype */
    TK_EDEVICE = -6,  /* the CUDA driver or the device failed, or there is none */
    TK_EINTERNAL = -7, /* a bug in tkexport */
    TK_EFORMAT = -8,  /* an input file is malformed: truncated, not of its format, another version */
    TK_ETOOL = -9     /* a program tkexport runs (nvcc, the C compiler) is missing or does not run */
} tk_error_code;

/* The message of the last failure on this thread, "" when there was none. The string stays
 * valid until the next tk_error_set on this thread. */
const char *tk_error_last(void);

/* The code (a tk_error_code) of the last failure on this thread, 0 when there was none: what a
 * function that returns a pointer (tk_call, tk_add...) failed with when it returned NULL. A call
 * that succeeds leaves the code and the message as they were; tk_error_clear resets both. */
int tk_error_last_code(void);

/* Records a one-line message (printf format) and code as this thread's last error and returns
 * code, so that a failing function can say `return tk_error_set(TK_EINVAL, "...", ...);`. */
int tk_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears this thread's last error: message "" and code 0. */
void tk_error_clear(void);

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
