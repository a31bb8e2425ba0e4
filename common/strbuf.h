/* A growable, always NUL-terminated string (git's strbuf). buf is NULL only before the first
 * addition; len excludes the NUL. */
#ifndef TK_STRBUF_H
#define TK_STRBUF_H

#include <stddef.h>

typedef struct tk_strbuf {
    char *buf;
    size_t len;
    size_t alloc;
} tk_strbuf;

#define TK_STRBUF_INIT {NULL, 0, 0}

/* Additions return 0 or TK_ENOMEM (the buffer is unchanged then). */
int tk_strbuf_add(tk_strbuf *sb, const void *data, size_t n);
int tk_strbuf_adds(tk_strbuf *sb, const char *s);
int tk_strbuf_addf(tk_strbuf *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tk_strbuf_release(tk_strbuf *sb);
/* The string (caller frees; "" allocated when empty), leaving sb empty. NULL when out of memory. */
char *tk_strbuf_detach(tk_strbuf *sb);

/* Whether s ends with suffix ("silu.cu", ".cu"). */
int tk_ends_with(const char *s, const char *suffix);

#endif
