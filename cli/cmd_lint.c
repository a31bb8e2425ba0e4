/* tkexport lint: the analyzer's lint findings, filtered by --checks and NOLINT comments, as
 * compiler-style text, the analyzer's JSON or SARIF. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzer.h"
#include "cli.h"
#include "fsutil.h"
#include "lint.h"
#include "options.h"
#include "strbuf.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    TK_CLI_ANALYZER_OPTIONS,
    {{"format", required_argument, NULL, 'f'}, "text|json|sarif", "output format (default: text; with -o, from FILE's extension)"},
    {{"checks", required_argument, NULL, 'k'}, "LIST", "rules to run, clang-tidy style: '-*,tk-raw-launch', '-tk-depth-limit'"},
    {{"werror", no_argument, NULL, 'W'}, NULL, "exit with 1 on warnings too"},
    {{"output", required_argument, NULL, 'o'}, "FILE", "write the findings to FILE (atomically) instead of stdout"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport lint [-p BUILD_DIR] [--max-depth N] [--format text|json|sarif]\n"
               "                     [--checks=LIST] [--werror] [-o FILE] [--extra-arg ARG]... PATH...\n\n"
               "Checks the ops (TK_OP) and kernels (TK_KERNEL) in PATHs (files, or folders searched for\n"
               ".c .h .cu .cuh) for mistakes export and packaging would hit: raw kernel launches,\n"
               "kernels that cannot be resolved or are not defined, tk_wrap arguments that do not fit,\n"
               "writes the schema does not declare, bad op names and schemas. Suppress a finding with\n"
               "// NOLINT(tk-rule) on its line or // NOLINTNEXTLINE(tk-rule) above it.\n\n"
               "rules:\n");
    for (size_t i = 0; i < tk_lint_nrules; i++)
        fprintf(f, "  %-24s %-7s %s\n", tk_lint_rules[i].id, tk_lint_rules[i].severity, tk_lint_rules[i].short_desc);
    fprintf(f, "\noptions:\n");
    tk_cli_print_options(f, options, NOPT, "pojh");
    tk_cli_print_exit_statuses(f);
}

/* The format -o FILE implies when --format is not given. */
static const char *format_of_output(const char *path)
{
    if (tk_ends_with(path, ".sarif") || tk_ends_with(path, ".sarif.json"))
        return "sarif";
    return tk_ends_with(path, ".json") ? "json" : "text";
}

/* The findings as the format says, in a malloc'd string (text never colored). */
static int render(char **out, tk_analysis *a, const char *format)
{
    cJSON *doc = tk_analysis_doc(a);
    *out = NULL;
    if (!strcmp(format, "json")) {
        *out = tk_analysis_to_json(a);
        return *out ? 0 : tk_error_set(TK_ENOMEM, "out of memory");
    }
    if (!strcmp(format, "sarif")) {
        cJSON *log = NULL;
        int rc = tk_lint_to_sarif(&log, doc);
        if (rc)
            return rc;
        *out = cJSON_Print(log);
        cJSON_Delete(log);
        return *out ? 0 : tk_error_set(TK_ENOMEM, "out of memory");
    }
    size_t len = 0;
    FILE *m = open_memstream(out, &len);
    if (!m)
        return tk_error_set(TK_ENOMEM, "out of memory");
    int rc = tk_lint_write_text(doc, m, 0);
    if (fclose(m) != 0 && !rc)
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int cmd_lint(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);

    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.progress = 1;
    opts.lint = 1;
    const char *format = NULL, *output = NULL, *checks = NULL;
    int werror = 0, rc = TK_EXIT_USAGE;
    const char **extra = calloc((size_t)argc + 1, sizeof(*extra));
    tk_analysis *a = NULL;
    char *text = NULL;
    if (!extra)
        return TK_EXIT_INTERNAL;
    optind = 1;
    int c;
    while ((c = tk_cli_getopt("lint", argc, argv, "p:o:j:h", longopts)) != -1) {
        int shared = tk_cli_analyzer_option("lint", c, optarg, &opts, extra);
        if (shared < 0)
            goto done;
        if (shared)
            continue;
        switch (c) {
        case 'f':
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "sarif")) {
                fprintf(stderr, "tkexport lint: unknown format '%s' (expected text, json or sarif)\n", optarg);
                goto done;
            }
            format = optarg;
            break;
        case 'k':
            if (tk_lint_checks_validate(optarg)) {
                fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
                goto done;
            }
            checks = optarg;
            break;
        case 'W': werror = 1; break;
        case 'o': output = optarg; break;
        case 'h': help(stdout); rc = TK_EXIT_OK; goto done;
        default: /* '?': tk_cli_getopt said what */
            goto done;
        }
    }
    if (optind >= argc && !opts.compdb_dir) {
        fprintf(stderr, "tkexport lint: no PATH given (expected source files or folders, or -p BUILD_DIR)\n");
        goto done;
    }
    if (!format)
        format = output ? format_of_output(output) : "text";
    opts.extra_args = extra;
    if (tk_cli_output_clobbers("lint", output, (const char *const *)argv + optind, (size_t)(argc - optind)))
        goto done;
    if (output && !strcmp(output, "-"))
        output = NULL; /* -o -: stdout, in --format's format */
    int err = tk_analysis_run(&a, &opts, (const char *const *)argv + optind, (size_t)(argc - optind));
    if (err) {
        fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
        rc = err == TK_ENOTFOUND || err == TK_EINVAL ? TK_EXIT_USAGE : tk_cli_exit_status(err);
        goto done;
    }
    if (tk_cli_no_sources("lint", a, (const char *const *)argv + optind, (size_t)(argc - optind))) {
        rc = TK_EXIT_USAGE;
        goto done;
    }
    cJSON *doc = tk_analysis_doc(a);
    if (tk_lint_filter(doc, checks)) {
        fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    if (output || strcmp(format, "text")) {
        if (render(&text, a, format)) {
            fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
            rc = TK_EXIT_INTERNAL;
            goto done;
        }
        if (output && tk_file_write_atomic(output, text, strlen(text))) {
            fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
            rc = TK_EXIT_IO;
            goto done;
        }
        if (!output)
            printf("%s\n", text);
    } else {
        /* colors as clang gives them: on a terminal, unless NO_COLOR (no-color.org) is set */
        const char *no_color = getenv("NO_COLOR");
        int color = isatty(STDOUT_FILENO) && !(no_color && *no_color);
        if (tk_lint_write_text(doc, stdout, color)) {
            fprintf(stderr, "tkexport lint: %s\n", tk_error_last());
            rc = TK_EXIT_INTERNAL;
            goto done;
        }
    }
    if (!output && (rc = tk_cli_stdout_done("lint")))
        goto done;
    /* the count goes to stderr, so stdout holds only the findings */
    tk_lint_write_summary(doc, stderr);
    rc = tk_lint_exit_status(doc, werror) ? TK_EXIT_FINDINGS : TK_EXIT_OK;
done:
    free(text);
    tk_analysis_free(a);
    free(extra);
    return rc;
}
