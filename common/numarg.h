/* Whole numbers given on a command line or in the environment, read one way by tkexport's
 * subcommands (cli/options.c, cmd_run.c, shape_stream.c), the runtime's variables (TK_* counts,
 * runtime/context.c) and the benchmarks: all of the text, no spaces, no '+', a '-' only where the
 * range has negatives. Header-only, so that the benchmarks need no library for it. */
#ifndef TK_COMMON_NUMARG_H
#define TK_COMMON_NUMARG_H

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* A decimal whole number in [lo, hi] into *out: 0, or -1 (*out untouched). */
static inline int tk_parse_whole(const char *text, long long lo, long long hi, long long *out)
{
    char *end;
    if (!text || !*text || isspace((unsigned char)*text) || *text == '+' || (*text == '-' && lo >= 0))
        return -1;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The same into an int. */
static inline int tk_parse_int(const char *text, int lo, int hi, int *out)
{
    long long v;
    if (tk_parse_whole(text, lo, hi, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* A seed: a whole number from 0 to 2^64-1, decimal or 0x hexadecimal, into *out: 0, or -1. */
static inline int tk_parse_u64(const char *text, uint64_t *out)
{
    char *end;
    if (!text || !*text || !isdigit((unsigned char)*text))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, *text == '0' && (text[1] == 'x' || text[1] == 'X') ? 16 : 10);
    if (*end || errno)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

#endif
