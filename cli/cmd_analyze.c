/* tkexport analyze: the op->kernel map of a source tree, as text or JSON. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer.h"
#include "cli.h"
#include "fsutil.h"
#include "options.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    TK_CLI_ANALYZER_OPTIONS,
    {{"format", required_argument, NULL, 'f'}, "json|text", "output format (default: text, or json with -o)"},
    {{"output", required_argument, NULL, 'o'}, "FILE", "write the result to FILE (atomically) instead of stdout"},
    {{"verbose", no_argument, NULL, 'v'}, NULL, "text output: show each kernel's call path"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport analyze [-p BUILD_DIR] [--max-depth N] [--format json|text] [-o FILE]\n"
               "                        [--extra-arg ARG]... PATH...\n\n"
               "Finds the ops (TK_OP) and kernels (TK_KERNEL) in PATHs (files, or folders searched for\n"
               ".c .h .cu .cuh) and resolves, for each op, the kernels its tk_wrap launches can reach.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "pojvh");
    tk_cli_print_exit_statuses(f);
}

int cmd_analyze(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);

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
    while ((c = tk_cli_getopt("analyze", argc, argv, "p:o:j:vh", longopts)) != -1) {
        int shared = tk_cli_analyzer_option("analyze", c, optarg, &opts, extra);
        if (shared < 0)
            goto done;
        if (shared)
            continue;
        switch (c) {
        case 'f':
            if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
                fprintf(stderr, "tkexport analyze: unknown format '%s' (expected json or text)\n", optarg);
                goto done;
            }
            format = optarg;
            break;
        case 'o': output = optarg; break;
        case 'v': verbose = 1; break;
        case 'h': help(stdout); rc = TK_EXIT_OK; goto done;
        default: /* '?': tk_cli_getopt said what */
            goto done;
        }
    }
    if (optind >= argc && !opts.compdb_dir) {
        fprintf(stderr, "tkexport analyze: no PATH given (expected source files or folders, or -p BUILD_DIR)\n");
        goto done;
    }
    opts.extra_args = extra;
    if (tk_cli_output_clobbers("analyze", output, (const char *const *)argv + optind, (size_t)(argc - optind)))
        goto done;
    int err = tk_analysis_run(&a, &opts, (const char *const *)argv + optind, (size_t)(argc - optind));
    if (err) {
        fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
        rc = err == TK_ENOTFOUND || err == TK_EINVAL ? TK_EXIT_USAGE : tk_cli_exit_status(err);
        goto done;
    }
    if (tk_cli_no_sources("analyze", a, (const char *const *)argv + optind, (size_t)(argc - optind))) {
        rc = TK_EXIT_USAGE;
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
    if (output && !strcmp(output, "-")) {
        output = NULL; /* -o -: stdout, in -o's format (JSON unless --format says) */
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
        if ((err = tk_file_write_atomic(output, text, strlen(text)))) {
            fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
            rc = tk_cli_exit_status(err);
            goto done;
        }
    } else if (json) {
        fputs(text, stdout);
    } else if (tk_analysis_write_text(a, stdout, verbose)) {
        fprintf(stderr, "tkexport analyze: %s\n", tk_error_last());
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    rc = output ? TK_EXIT_OK : tk_cli_stdout_done("analyze");
done:
    free(text);
    tk_analysis_free(a);
    free(extra);
    return rc;
}
