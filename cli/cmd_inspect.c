/* tkexport inspect: a .tkprog as text for people, its program.json for tools, or a Graphviz
 * picture of its graph. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exporter.h"
#include "options.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    {{"format", required_argument, NULL, 'f'}, "text|json|dot", "output format (default: text)"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport inspect FILE.tkprog [--format text|json|dot]\n\n"
               "Reads a .tkprog (checking its format, version, digests and weights) and shows it: text lists\n"
               "the inputs with their dimensions' ranges, the parameters, the nodes with their shapes and\n"
               "source lines, the guards, the ops with their kernels and the sources; json prints its\n"
               "program.json as stored; dot prints a Graphviz digraph of values and nodes.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "fh");
    fprintf(f, "\nexit status: 0 done, 1 the file is not a readable .tkprog, 2 usage error, 3 internal error\n");
}

int cmd_inspect(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    const char *format = "text";
    int rc = TK_EXIT_USAGE, err;
    tk_program_model *m = NULL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "f:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "dot")) {
                fprintf(stderr, "tkexport inspect: unknown format '%s' (expected text, json or dot)\n", optarg);
                return TK_EXIT_USAGE;
            }
            format = optarg;
            break;
        case 'h': help(stdout); return TK_EXIT_OK;
        default:
            fprintf(stderr, "tkexport inspect: see 'tkexport inspect --help'\n");
            return TK_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tkexport inspect: no FILE given (expected a .tkprog)\n");
        return TK_EXIT_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "tkexport inspect: one FILE at a time (got %d)\n", argc - optind);
        return TK_EXIT_USAGE;
    }
    if ((err = tk_tkprog_read(&m, argv[optind]))) {
        fprintf(stderr, "tkexport inspect: %s\n", tk_error_last());
        return err == TK_ENOMEM || err == TK_EINTERNAL ? TK_EXIT_INTERNAL : TK_EXIT_FINDINGS;
    }
    if (!strcmp(format, "json"))
        err = fputs(m->program_json, stdout) < 0 ? tk_error_set(TK_EIO, "writing the output failed") : 0;
    else if (!strcmp(format, "dot"))
        err = tk_program_model_write_dot(m, stdout);
    else
        err = tk_program_model_write_text(m, stdout);
    if (err)
        fprintf(stderr, "tkexport inspect: %s\n", tk_error_last());
    rc = err ? TK_EXIT_FINDINGS : TK_EXIT_OK;
    tk_program_model_free(m);
    return rc;
}
