/* Assertions every CMocka suite of tkexport shares (libgit2's cl_git_pass): a failing call
 * prints tk_error_last(), so a red test says why. Include after <cmocka.h>. */
#ifndef TK_TEST_H
#define TK_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <tk/error.h>

/* Fails the test with tk_error_last() when a tkexport call does not return 0. */
#define tk_assert_ok(expr)                                                                 \
    do {                                                                                   \
        int tk__rc = (expr);                                                               \
        if (tk__rc != 0)                                                                   \
            fail_msg("%s returned %d: %s", #expr, tk__rc, tk_error_last());                \
    } while (0)

/* The call fails with `code` and a last error containing `text`. */
#define tk_assert_fails(expr, code, text)                                                  \
    do {                                                                                   \
        int tk__rc = (expr);                                                               \
        if (tk__rc != (code))                                                              \
            fail_msg("%s returned %d (expected %d): %s", #expr, tk__rc, (code), tk_error_last()); \
        if (!strstr(tk_error_last(), (text)))                                              \
            fail_msg("%s: error '%s' does not contain '%s'", #expr, tk_error_last(), (text)); \
    } while (0)

/* Fails the test with a printf message reported at FILE:LINE: the test's line that called an
 * assertion helper, not the helper's own (each helper has a macro passing __FILE__, __LINE__). */
static inline void tk_fail_at(const char *file, int line, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_error("%s\n", msg);
    _fail(file, line);
}

/* The 1-based line of path holding needle first (failing the test when there is none), so
 * expectations follow edits of a fixture. */
static inline int tk_line_of(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read '%s'", path);
    char line[4096];
    int n = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, needle)) {
            found = n;
            break;
        }
    }
    fclose(f);
    if (!found)
        fail_msg("'%s' does not contain '%s'", path, needle);
    return found;
}

/* The 1-based column of needle on the first line of path that holds it. */
static inline int tk_col_of(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read '%s'", path);
    char line[4096];
    int col = 0;
    while (!col && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, needle);
        if (at)
            col = (int)(at - line) + 1;
    }
    fclose(f);
    if (!col)
        fail_msg("'%s' does not contain '%s'", path, needle);
    return col;
}

/* text contains needle (text may be NULL: then it fails), reported at the test's line. */
static inline void tk_assert_contains_at(const char *file, int line, const char *text, const char *needle)
{
    if (!text || !strstr(text, needle))
        tk_fail_at(file, line, "expected '%s' in:\n%s", needle, text ? text : "(null)");
}
#define assert_contains(text, needle) tk_assert_contains_at(__FILE__, __LINE__, (text), (needle))

#endif
