/* tkexport analyze: the op->kernel map of a source tree, as text or JSON. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer.h"
#include "cli.h"
#include "fsutil.h"
#include <tk/error.h>

static const struct {
    struct option opt;
    const char *arg, *help;
} options[] = {
    {{"build-dir", required_argument, NULL, 'p'}, "BUILD_DIR", "read translation units and flags from BUILD_DIR/compile_commands.json"},
    {{"max-depth", required_argument, NULL, 'd'}, "N", "follow at most N function hops from an op (default 5)"},
    {{"format", required_argument, NULL, 'f'}, "json|text", "output format (default: text, or json with -o)"},
    {{"output", required_argument, NULL, 'o'}, "FILE", "write the result to FILE (atomically) instead of stdout"},
    {{"extra-arg", required_argument, NULL, 'x'}, "ARG", "append ARG to every file's compiler arguments (repeatable)"},
    {{"jobs", required_argument, NULL, 'j'}, "N", "parse N files at once (default: the number of cores)"},
    {{"cache-dir", required_argument, NULL, 'c'}, "DIR", "summary cache folder (default $XDG_CACHE_HOME/tkexport)"},
    {{"no-cache", no_argument, NULL, 'n'}, NULL, "neither read nor write the summary cache"},
    {{"verbose", no_argument, NULL, 'v'}, NULL, "text output: show each kernel's call path"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

/* The one-letter form of an option, when it has one. */
static int short_of(int val) { return strchr("pojvh", val) ? val : 0; }

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport analyze [-p BUILD_DIR] [--max-depth N] [--format json|text] [-o FILE]\n"
               "                        [--extra-arg ARG]... PATH...\n\n"
               "Finds the ops (TK_OP) and kernels (TK_KERNEL) in PATHs (files, or folders searched for\n"
               ".c .h .cu .cuh) and resolves, for each op, the kernels its tk_wrap launches can reach.\n\n"
               "options:\n");
    for (size_t i = 0; i < NOPT; i++) {
        char left[64], shrt[8] = "    ";
        int s = short_of(options[i].opt.val);
        if (s)
            snprintf(shrt, sizeof(shrt), "-%c, ", s);
        snprintf(left, sizeof(left), "%s--%s%s%s", shrt, options[i].opt.name, options[i].arg ? " " : "",
                 options[i].arg ? options[i].arg : "");
        fprintf(f, "  %-30s %s\n", left, options[i].help);
    }
    fprintf(f, "\nexit status: 0 done, 2 usage error or missing path, 3 internal error\n");
}

static int parse_int(const char *s, const char *what, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v > 1000) {
        fprintf(stderr, "tkexport analyze: %s '%s' is not a whole number from 0 to 1000\n", what, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cmd_analyze(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    for (size_t i = 0; i < NOPT; i++)
        longopts[i] = options[i].opt;
    memset(&longopts[NOPT], 0, sizeof(longopts[NOPT]));

    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.progress = 1;
    const char *format = NULL, *output = NULL;
    int verbose = 0, rc = TK_EXIT_USAGE;
    const char **extra = calloc((size_t)argc + 1, sizeof(*extra));
    tk_analysis *a = NULL;
    char *text = NULL;
    if (!extra)
        return TK_EXIT_INTERNAL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "p:o:j:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p': opts.compdb_dir = optarg; break;
        case 'd': if (parse_int(optarg, "--max-depth", &opts.max_depth)) goto done; break;
        case 'j': if (parse_int(optarg, "--jobs", &opts.jobs)) goto done; break;
        case 'f':
            if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
                fprintf(stderr, "tkexport analyze: unknown format '%s' (expected json or text)\n", optarg);
                goto done;
            }
            format = optarg;
            break;
        case 'o': output = optarg; break;
        case 'x': extra[opts.n_extra_args++] = optarg; break;
        case 'c': opts.cache_dir = optarg; break;
        case 'n': opts.no_cache = 1; break;
        case 'v': verbose = 1; break;
        case 'h': help(stdout); rc = TK_EXIT_OK; goto done;
        default:
            fprintf(stderr, "tkexport analyze: see 'tkexport analyze --help'\n");
            goto done;
        }
    }
    if (optind >= argc && !opts.compdb_dir) {
        fprintf(stderr, "tkexport analyze: no PATH given (expected source files or folders, or -p BUILD_DIR)\n");
        goto done;
    }
    opts.extra_args = extra;
    int err = tk_analysis_run(&a, &opts, (const char *const *)argv + optind, (size_t)(argc - optind));
    if (err) {
        fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
        rc = err == TK_ENOTFOUND || err == TK_EINVAL ? TK_EXIT_USAGE : TK_EXIT_INTERNAL;
        goto done;
    }
    int json = format ? !strcmp(format, "json") : output != NULL;
    if (json) {
        text = tk_analysis_to_json(a);
        if (!text) {
            fprintf(stderr, "tkexport analyze: out of memory\n");
            rc = TK_EXIT_INTERNAL;
            goto done;
        }
    }
    if (output) {
        if (!json) {
            FILE *m = NULL;
            size_t len = 0;
            m = open_memstream(&text, &len);
            if (!m || tk_analysis_write_text(a, m, verbose) || fclose(m)) {
                fprintf(stderr, "tkexport analyze: out of memory\n");
                rc = TK_EXIT_INTERNAL;
                goto done;
            }
        }
        if (tk_file_write_atomic(output, text, strlen(text))) {
            fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
            rc = TK_EXIT_INTERNAL;
            goto done;
        }
    } else if (json) {
        fputs(text, stdout);
    } else if (tk_analysis_write_text(a, stdout, verbose)) {
        fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    rc = TK_EXIT_OK;
done:
    free(text);
    tk_analysis_free(a);
    free(extra);
    return rc;
}
