/* Growable strings. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/error.h>

static int grow(tk_strbuf *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->alloc)
        return 0;
    size_t want = sb->alloc ? sb->alloc : 64;
    while (want < sb->len + extra + 1)
        want *= 2;
    char *p = realloc(sb->buf, want);
    if (!p)
        return tk_error_set(TK_ENOMEM, "out of memory");
    sb->buf = p;
    sb->alloc = want;
    return 0;
}

int tk_strbuf_add(tk_strbuf *sb, const void *data, size_t n)
{
    if (grow(sb, n))
        return TK_ENOMEM;
    memcpy(sb->buf + sb->len, data, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
    return 0;
}

int tk_strbuf_adds(tk_strbuf *sb, const char *s) { return tk_strbuf_add(sb, s, strlen(s)); }

int tk_strbuf_addf(tk_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(sb, (size_t)n))
        return TK_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
    return 0;
}

void tk_strbuf_release(tk_strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
}

char *tk_strbuf_detach(tk_strbuf *sb)
{
    char *s = sb->buf ? sb->buf : calloc(1, 1);
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
    return s;
}

int tk_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}
