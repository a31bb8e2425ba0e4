/* The option helpers of cli/options.h. */
#include "options.h"

#include <stdlib.h>
#include <string.h>

void tk_cli_longopts(struct option *longopts, const tk_cli_option *opts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        longopts[i] = opts[i].opt;
    memset(&longopts[n], 0, sizeof(longopts[n]));
}

void tk_cli_print_options(FILE *f, const tk_cli_option *opts, size_t n, const char *shorts)
{
    for (size_t i = 0; i < n; i++) {
        char left[64], shrt[8] = "    ";
        int v = opts[i].opt.val;
        if (v > 0 && v < 128 && strchr(shorts, v))
            snprintf(shrt, sizeof(shrt), "-%c, ", v);
        snprintf(left, sizeof(left), "%s--%s%s%s", shrt, opts[i].opt.name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        fprintf(f, "  %-30s %s\n", left, opts[i].help);
    }
}

int tk_cli_parse_int(const char *cmd, const char *text, const char *what, int max, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 0 || v > max) {
        fprintf(stderr, "tkexport %s: %s '%s' is not a whole number from 0 to %d\n", cmd, what, text, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

#ifdef TK_WITH_ANALYZER
int tk_cli_analyzer_option(const char *cmd, int c, const char *arg, tk_analyze_options *opts, const char **extra)
{
    switch (c) {
    case 'p': opts->compdb_dir = arg; return 1;
    case 'd': return tk_cli_parse_int(cmd, arg, "--max-depth", 1000, &opts->max_depth) ? -1 : 1;
    case 'j': return tk_cli_parse_int(cmd, arg, "--jobs", 1000, &opts->jobs) ? -1 : 1;
    case 'x': extra[opts->n_extra_args++] = arg; return 1;
    case 'c': opts->cache_dir = arg; return 1;
    case 'n': opts->no_cache = 1; return 1;
    default: return 0;
    }
}
#endif
