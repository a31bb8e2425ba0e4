/* tkexport export: compile a model's host sources, load them, trace the named program with
 * symbolic shapes and write it, with its weights, op table and source closure, as a .tkprog. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "exporter.h"
#include "options.h"
#include <tk/error.h>
#include <tk/program.h>
#include <tk/runtime.h>

static const tk_cli_option options[] = {
    {{"program", required_argument, NULL, 'P'}, "NAME", "the program to export (a TK_PROGRAM's name)"},
    {{"weights", required_argument, NULL, 'w'}, "FILE", "the parameters' values, a .safetensors file"},
    {{"output", required_argument, NULL, 'o'}, "OUT", "the .tkprog to write (through a temporary file)"},
    TK_CLI_ANALYZER_OPTIONS,
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport export PATH... --program NAME [--weights FILE.safetensors] -o OUT.tkprog\n\n"
               "Compiles the .c files under PATHs (files, or folders searched recursively) with the system C\n"
               "compiler ($CC, else cc) against tkexport's headers into a temporary shared object, loads it,\n"
               "traces the program NAME with symbolic shapes (each TK_DIM a symbol with its range) and writes\n"
               "OUT: program.json (symbols, inputs, nodes, guards, the op table), the weights of the parameters\n"
               "the program uses, and the sources needed to compile its ops (found by the analyzer).\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "pwojh");
    tk_cli_print_exit_statuses(f);
}

static void list_programs(const char *name)
{
    size_t n = tk_program_count();
    fprintf(stderr, "tkexport export: no program '%s' in the given paths (", name);
    if (!n)
        fprintf(stderr, "found none; a model is declared with TK_PROGRAM");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s'%s'", i ? ", " : "found: ", tk_program_at(i)->name);
    fprintf(stderr, ")\n");
}

int cmd_export(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);

    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    const char *program = NULL, *weights = NULL, *output = NULL;
    int rc = TK_EXIT_USAGE, err;
    const char **extra = calloc((size_t)argc + 1, sizeof(*extra));
    char *so = NULL, *tmpdir = NULL;
    void *handle = NULL;
    tk_program_model *m = NULL;
    if (!extra)
        return TK_EXIT_INTERNAL;
    optind = 1;
    int c;
    while ((c = tk_cli_getopt("export", argc, argv, "w:o:p:j:h", longopts)) != -1) {
        int shared = tk_cli_analyzer_option("export", c, optarg, &opts, extra);
        if (shared < 0)
            goto done;
        if (shared)
            continue;
        switch (c) {
        case 'P': program = optarg; break;
        case 'w': weights = optarg; break;
        case 'o': output = optarg; break;
        case 'h': help(stdout); rc = TK_EXIT_OK; goto done;
        default: /* '?': tk_cli_getopt said what */
            goto done;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tkexport export: no PATH given (expected the model's source files or folders)\n");
        goto done;
    }
    if (!program) {
        fprintf(stderr, "tkexport export: no --program NAME given\n");
        goto done;
    }
    if (!output) {
        fprintf(stderr, "tkexport export: no -o OUT.tkprog given\n");
        goto done;
    }
    const char *const *paths = (const char *const *)argv + optind;
    size_t npaths = (size_t)(argc - optind);
    if (!strcmp(output, "-")) {
        fprintf(stderr, "tkexport export: -o -: a program is a zip archive, written to a file: give its path\n");
        goto done;
    }
    if (tk_cli_output_clobbers("export", output, paths, npaths) ||
        tk_cli_output_clobbers("export", output, &weights, weights ? 1 : 0))
        goto done;
    if (weights && access(weights, F_OK) != 0) { /* before the sources are compiled */
        fprintf(stderr, "tkexport export: --weights '%s' does not exist (expected a .safetensors file)\n", weights);
        goto done;
    }
    int progress = isatty(STDERR_FILENO);
    opts.extra_args = extra;
    opts.progress = progress;

    if ((err = tk_export_compile(&so, &tmpdir, paths, npaths, progress))) {
        fprintf(stderr, "tkexport export: %s\n", tk_error_last());
        rc = err == TK_ENOTFOUND ? TK_EXIT_USAGE : tk_cli_exit_status(err);
        goto done;
    }
    if ((err = tk_ops_load(&handle, so))) {
        fprintf(stderr, "tkexport export: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    const tk_program_def *def = tk_program_find(program);
    if (!def) {
        list_programs(program);
        rc = TK_EXIT_FINDINGS;
        goto done;
    }
    if (progress)
        fprintf(stderr, "tkexport export: tracing '%s'\n", program);
    if ((err = tk_export_trace(&m, def, weights))) {
        fprintf(stderr, "tkexport export: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    if (progress)
        fprintf(stderr, "tkexport export: finding the ops' kernels and sources\n");
    if ((err = tk_export_closure(m, &opts, paths, npaths))) {
        fprintf(stderr, "tkexport export: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    if ((err = tk_tkprog_write(m, output))) {
        fprintf(stderr, "tkexport export: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    if (progress)
        fprintf(stderr, "tkexport export: wrote %s (%zu nodes, %zu parameters, %zu sources)\n", output, m->nnodes,
                m->nparams, m->nsources);
    rc = TK_EXIT_OK;
done:
    tk_program_model_free(m);
    tk_ops_unload(handle);
    tk_export_compile_cleanup(so, tmpdir);
    free(extra);
    return rc;
}
