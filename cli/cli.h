/* What the subcommands share: the command table entry points and exit codes. */
#ifndef TK_CLI_H
#define TK_CLI_H

enum { TK_EXIT_OK = 0, TK_EXIT_FINDINGS = 1, TK_EXIT_USAGE = 2, TK_EXIT_INTERNAL = 3 };

int cmd_analyze(int argc, char **argv);
int cmd_lsp(int argc, char **argv);
int cmd_lint(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_keygen(int argc, char **argv);

#endif
