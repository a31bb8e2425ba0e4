/* The option helpers of cli/options.h. */
#define _DEFAULT_SOURCE
#include "options.h"

#include <tk/error.h>

#include "cli.h"
#include "numarg.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

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
    long long v;
    if (tk_parse_whole(text, 0, max, &v)) {
        fprintf(stderr, "tkexport %s: %s '%s' is not a whole number from 0 to %d\n", cmd, what, text, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

void tk_cli_print_exit_statuses(FILE *f)
{
    fprintf(f, "\n--version (alone after the subcommand) prints tkexport's version.\n");
    fprintf(f, "\nexit status (every subcommand, docs/cli.md):\n"
               "  0  done (lint: no error finding, nor a warning with --werror)\n"
               "  1  the work failed on its own terms: findings, a program that does not trace, a kernel that\n"
               "     does not compile, a package refused (unsigned, untrusted), inputs the program refuses\n"
               "  2  usage: the command line, an input that does not exist, an output over an input\n"
               "  3  internal error (out of memory, a bug)\n"
               "  4  a malformed input file (truncated, another format or version)\n"
               "  5  a file that cannot be read or written\n"
               "  6  nvcc or the C compiler missing or not running\n"
               "  7  no usable GPU, or the CUDA driver failed\n"
               "  128+N  ended by signal N (temporary files removed, child compilers ended)\n");
}

int tk_cli_getopt(const char *cmd, int argc, char **argv, const char *shorts, const struct option *longopts)
{
    char spec[64];
    snprintf(spec, sizeof spec, ":%s", shorts);
    opterr = 0;
    int c = getopt_long(argc, argv, spec, longopts, NULL);
    if (c != '?' && c != ':')
        return c;
    /* the word at fault: the long option just read (getopt names no letter for an unknown or
       ambiguous one, and a known one's letter for a missing or unwanted value), else the letter
       getopt names, which may sit inside a cluster (-pz) whose word is not read to its end yet */
    const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    char letter[3] = {'-', (char)optopt, 0};
    int wlen = (int)strcspn(word, "="), matches = 0, exact = -1, named = 0;
    for (int i = 0; !strncmp(word, "--", 2) && longopts[i].name; i++)
        if (!strncmp(longopts[i].name, word + 2, (size_t)wlen - 2)) {
            matches++;
            named |= optopt && longopts[i].val == optopt;
            if ((int)strlen(longopts[i].name) == wlen - 2)
                exact = i;
        }
    int is_long = !strncmp(word, "--", 2) && (!optopt || named);
    const char *name = is_long || !optopt ? word : letter;
    int len = (int)strcspn(name, "=");
    if (c == ':')
        fprintf(stderr, "tkexport %s: option '%.*s' needs a value", cmd, len, name);
    else if (is_long && (exact >= 0 || matches == 1) && name[len] == '=')
        fprintf(stderr, "tkexport %s: option '%.*s' takes no value", cmd, len, name);
    else if (is_long && matches > 1 && exact < 0)
        fprintf(stderr, "tkexport %s: option '%.*s' is ambiguous: it begins %d options", cmd, len, name, matches);
    else
        fprintf(stderr, "tkexport %s: unknown option '%.*s'", cmd, len, name);
    fprintf(stderr, " (see 'tkexport %s --help')\n", cmd);
    return '?';
}

int tk_cli_stdout_done(const char *cmd)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return TK_EXIT_OK;
    fprintf(stderr, "tkexport %s: cannot write to stdout: %s\n", cmd, errno ? strerror(errno) : "write error");
    return TK_EXIT_IO;
}

int tk_cli_exit_status(int err)
{
    switch (err) {
    case TK_OK: return TK_EXIT_OK;
    case TK_ENOMEM:
    case TK_EINTERNAL: return TK_EXIT_INTERNAL;
    case TK_EFORMAT: return TK_EXIT_BAD_INPUT;
    case TK_EIO: return TK_EXIT_IO;
    case TK_ETOOL: return TK_EXIT_TOOL;
    case TK_EDEVICE: return TK_EXIT_DEVICE;
    default: return TK_EXIT_FINDINGS; /* TK_EINVAL, TK_ENOTFOUND, TK_EUNSUPPORTED: the work refused */
    }
}

#ifdef TK_WITH_ANALYZER
int tk_cli_no_sources(const char *cmd, const tk_analysis *a, const char *const *paths, size_t n)
{
    tk_analysis_stats st;
    tk_analysis_get_stats(a, &st);
    if (st.files > 0)
        return 0;
    fprintf(stderr, "tkexport %s: no C or CUDA source found in %s%s (files ending in .c, .h, .cu or .cuh are read; "
                    "C++ files are not)\n", cmd, n ? paths[0] : "the compilation database", n > 1 ? " and the other paths" : "");
    return 1;
}

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

/* A source the analyzer reads, by its extension. */
static int is_source_name(const char *path)
{
    static const char *const exts[] = {".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".inl"};
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return 0;
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (!strcmp(dot, exts[i]))
            return 1;
    return 0;
}

static int is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int tk_cli_output_clobbers(const char *cmd, const char *output, const char *const *inputs, size_t n)
{
    struct stat so, si;
    if (!output || !strcmp(output, "-") || stat(output, &so) != 0)
        return 0;
    char out_real[PATH_MAX], in_real[PATH_MAX];
    int have_real = realpath(output, out_real) != NULL;
    for (size_t i = 0; i < n; i++) {
        if (!inputs[i] || stat(inputs[i], &si) != 0)
            continue;
        if (so.st_dev == si.st_dev && so.st_ino == si.st_ino) {
            /* the same path spelt another way, or another name for the file (a hard or symbolic link) */
            int same_path = !strcmp(output, inputs[i]) ||
                            (have_real && realpath(inputs[i], in_real) && !strcmp(out_real, in_real) && !is_link(output) &&
                             !is_link(inputs[i]));
            fprintf(stderr, "tkexport %s: -o %s is the input %s itself%s: writing it would destroy the input "
                            "(choose another output)\n", cmd, output, inputs[i],
                    same_path ? "" : " (a link to the same file)");
            return 1;
        }
        if (S_ISDIR(si.st_mode) && S_ISREG(so.st_mode) && have_real && is_source_name(out_real) &&
            realpath(inputs[i], in_real)) {
            size_t len = strlen(in_real);
            if (!strncmp(out_real, in_real, len) && (out_real[len] == '/' || (len == 1 && in_real[0] == '/'))) {
                fprintf(stderr, "tkexport %s: -o %s is a source inside the input folder %s: writing it would "
                                "destroy the input (choose another output)\n", cmd, output, inputs[i]);
                return 1;
            }
        }
    }
    return 0;
}
