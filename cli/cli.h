/* What the subcommands share: the command table entry points and exit codes. */
#ifndef TK_CLI_H
#define TK_CLI_H

/* The exit statuses of every subcommand (docs/cli.md has the table). */
enum {
    TK_EXIT_OK = 0,        /* done; lint and analyze: no finding of error severity */
    TK_EXIT_FINDINGS = 1,  /* the work failed on its own terms: lint errors, a program that does not
                              trace, a kernel that does not compile, a package refused (unsigned,
                              untrusted), inputs the program refuses */
    TK_EXIT_USAGE = 2,     /* the command line: an unknown option, a missing argument, an input that
                              does not exist, an output that would overwrite an input */
    TK_EXIT_INTERNAL = 3,  /* out of memory or a bug in tkexport */
    TK_EXIT_BAD_INPUT = 4, /* an input file that is malformed: truncated, of another format or version */
    TK_EXIT_IO = 5,        /* a file or folder that cannot be read or written (permissions, a full disk) */
    TK_EXIT_TOOL = 6,      /* nvcc or the C compiler is missing or does not run */
    TK_EXIT_DEVICE = 7     /* no usable GPU, or the CUDA driver failed */
};

/* The exit status for a library failure (a tk_error_code): the one mapping every subcommand uses. */
int tk_cli_exit_status(int err);

int cmd_analyze(int argc, char **argv);
int cmd_lsp(int argc, char **argv);
int cmd_lint(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_keygen(int argc, char **argv);

#endif
