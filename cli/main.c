/* tkexport: one command table, one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
#ifdef TK_WITH_ANALYZER
    {"analyze", cmd_analyze, "map every op to the CUDA kernels it launches (libclang)"},
    {"lint", cmd_lint, "check ops for mistakes export would hit: compiler-style text, JSON or SARIF"},
    {"lsp", cmd_lsp, "language server for editors: lint findings as you type (LSP on stdio)"},
    {"export", cmd_export, "trace a model (TK_PROGRAM) into a .tkprog: program, weights, op sources"},
#endif
    {"compile", cmd_compile, "compile a .tkprog's kernels and host code ahead of time into a .tkpkg"},
    {"inspect", cmd_inspect, "show a .tkprog or .tkpkg: inputs and ranges, nodes, ops, kernels, digests"},
    {"run", cmd_run, "run a .tkpkg on the CPU or a GPU: inputs and outputs as .npy, --bench, --profile"},
    {"keygen", cmd_keygen, "make an Ed25519 key pair that signs packages (compile --sign-key), optionally trusted"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tkexport <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'tkexport <command> --help' describes a command, 'tkexport [<command>] --version' prints the\n"
               "version; man tkexport, and docs/cli.md for the exit statuses.\n");
}

int main(int argc, char **argv)
{
    /* an interrupt removes temporary files and folders and ends child compilers (cleanup.h) */
    tk_cleanup_install();
    if (argc < 2) {
        usage(stderr);
        return TK_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return TK_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tkexport %s\n", TK_VERSION);
        return TK_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name))
            continue;
        /* tkexport SUBCOMMAND --version, the same for every subcommand */
        if (argc == 3 && !strcmp(argv[2], "--version")) {
            printf("tkexport %s %s\n", commands[i].name, TK_VERSION);
            return TK_EXIT_OK;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
#ifndef TK_WITH_ANALYZER
    if (!strcmp(argv[1], "analyze") || !strcmp(argv[1], "lint") || !strcmp(argv[1], "lsp") || !strcmp(argv[1], "export")) {
        fprintf(stderr, "tkexport: '%s' needs the analyzer, and this tkexport was built without it "
                        "(cmake -DTK_WITH_ANALYZER=ON, with libclang 19)\n", argv[1]);
        return TK_EXIT_USAGE;
    }
#endif
    fprintf(stderr, "tkexport: unknown command '%s' (expected one of:", argv[1]);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(stderr, "%s %s", i ? "," : "", commands[i].name);
    fprintf(stderr, ")\n");
    return TK_EXIT_USAGE;
}
