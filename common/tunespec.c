/* The grammar of TK_AUTOTUNE and TK_HEURISTIC strings (tunespec.h). */
#include "tunespec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next word of *p (skipping blanks) into [*start, *end); 0 at the end of the string. */
static int next_word(const char **p, const char **start, const char **end)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return 0;
    *start = s;
    while (*s && *s != ' ' && *s != '\t')
        s++;
    *end = *p = s;
    return 1;
}

int tk_tunespec_names(const char *s, char (*names)[TK_TUNESPEC_NAME_MAX], int max, int *n, char *why, size_t whyn)
{
    const char *p = s ? s : "", *a, *b;
    *n = 0;
    while (next_word(&p, &a, &b)) {
        int ok = (isalpha((unsigned char)*a) || *a == '_') && b - a < TK_TUNESPEC_NAME_MAX;
        for (const char *c = a; ok && c < b; c++)
            ok = isalnum((unsigned char)*c) || *c == '_';
        if (!ok) {
            snprintf(why, whyn, "'%.*s' is not a parameter name (a C identifier of at most %d characters)", (int)(b - a),
                     a, TK_TUNESPEC_NAME_MAX - 1);
            return -1;
        }
        if (*n == max) {
            snprintf(why, whyn, "more than %d parameters", max);
            return -1;
        }
        memcpy(names[*n], a, (size_t)(b - a));
        names[(*n)++][b - a] = '\0';
    }
    if (*n == 0) {
        snprintf(why, whyn, "no parameter name in \"%s\"", s ? s : "");
        return -1;
    }
    return 0;
}

int tk_tunespec_ints(const char *s, int *v, int max, int *n, char *why, size_t whyn)
{
    const char *p = s ? s : "", *a, *b;
    *n = 0;
    while (next_word(&p, &a, &b)) {
        char word[32];
        char *end = NULL;
        long x = 0;
        int ok = b - a < (long)sizeof(word);
        if (ok) {
            memcpy(word, a, (size_t)(b - a));
            word[b - a] = '\0';
            errno = 0;
            x = strtol(word, &end, 10);
            ok = end != word && *end == '\0' && (isdigit((unsigned char)word[0]) || word[0] == '-' || word[0] == '+');
        }
        if (!ok) {
            snprintf(why, whyn, "'%.*s' is not a decimal integer", (int)(b - a), a);
            return -1;
        }
        if (errno == ERANGE || x < INT_MIN || x > INT_MAX) {
            snprintf(why, whyn, "%s is out of range (an int)", word);
            return -1;
        }
        if (*n == max) {
            snprintf(why, whyn, "more than %d values", max);
            return -1;
        }
        v[(*n)++] = (int)x;
    }
    if (*n == 0) {
        snprintf(why, whyn, "no value in \"%s\"", s ? s : "");
        return -1;
    }
    return 0;
}
