/* What the subcommands share for their options: a declarative table (getopt_long's entry plus
 * the argument's name and one line of help), its help printer, whole-number parsing, and the
 * options of every command built on the analyzer. */
#ifndef TK_CLI_OPTIONS_H
#define TK_CLI_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#ifdef TK_WITH_ANALYZER
#include "analyzer.h"
#endif

typedef struct tk_cli_option {
    struct option opt;
    const char *arg; /* the argument's name in the help, NULL for a flag */
    const char *help;
} tk_cli_option;

/* Fills longopts (n + 1 entries; the last is zeroed) from the table. */
void tk_cli_longopts(struct option *longopts, const tk_cli_option *opts, size_t n);

/* The table as two aligned columns; letters in `shorts` also get their "-x, " form. */
void tk_cli_print_options(FILE *f, const tk_cli_option *opts, size_t n, const char *shorts);

/* getopt_long for a command: its own one-line errors instead of getopt's (which name the
 * subcommand alone and take a second line to point at --help). shorts is the getopt string without
 * a leading ':'; returns what getopt_long returns, with an unknown option, a missing value or a
 * value given to a flag printed as "tkexport CMD: ... (see 'tkexport CMD --help')" and '?'. */
int tk_cli_getopt(const char *cmd, int argc, char **argv, const char *shorts, const struct option *longopts);

/* A whole number from 0 to max into *out, or a one-line error "tkexport CMD: ..." on stderr and -1. */
int tk_cli_parse_int(const char *cmd, const char *text, const char *what, int max, int *out);

/* After a command wrote its result to stdout: TK_EXIT_OK when all of it went out, else one line
 * "tkexport CMD: cannot write to stdout: REASON" on stderr and TK_EXIT_IO (a full disk, a closed
 * pipe: the result is lost, so the command has failed). */
int tk_cli_stdout_done(const char *cmd);

/* The exit-status table every subcommand's --help ends with (the same as docs/cli.md's). */
void tk_cli_print_exit_statuses(FILE *f);

/* Whether writing output would replace one of the command's inputs: the same file (a hard link
 * or a symlink to it included), or, for an input folder, a C, C++ or CUDA source inside it. 1
 * with a one-line error "tkexport CMD: -o OUTPUT is ..." on stderr, else 0 (an output that does
 * not exist yet, or "-", is never one). */
int tk_cli_output_clobbers(const char *cmd, const char *output, const char *const *inputs, size_t n);

#ifdef TK_WITH_ANALYZER
/* -p, --max-depth, --extra-arg, -j, --cache-dir, --no-cache: spliced into a command's table and
 * applied by tk_cli_analyzer_option. */
#define TK_CLI_ANALYZER_OPTIONS                                                                       \
    {{"build-dir", required_argument, NULL, 'p'}, "BUILD_DIR",                                        \
     "read translation units and flags from BUILD_DIR/compile_commands.json"},                        \
    {{"max-depth", required_argument, NULL, 'd'}, "N", "follow at most N function hops from an op (default 5)"}, \
    {{"extra-arg", required_argument, NULL, 'x'}, "ARG", "append ARG to every file's compiler arguments (repeatable)"}, \
    {{"jobs", required_argument, NULL, 'j'}, "N", "parse N files at once (default: the number of cores)"}, \
    {{"cache-dir", required_argument, NULL, 'c'}, "DIR", "summary cache folder (default $XDG_CACHE_HOME/tkexport)"}, \
    {{"no-cache", no_argument, NULL, 'n'}, NULL, "neither read nor write the summary cache"}

/* 1 with a one-line error on stderr when the analysis read no source at all (folders holding only
 * .cpp files, say): a run that checked nothing must not pass as clean. */
int tk_cli_no_sources(const char *cmd, const tk_analysis *a, const char *const *paths, size_t n);

/* Applies option c (with its argument) when it is one of TK_CLI_ANALYZER_OPTIONS: 1 done, 0 not
 * one of them, -1 a bad value (the error is printed). --extra-arg values go to extra[], which has
 * room for every argument of the command line. */
int tk_cli_analyzer_option(const char *cmd, int c, const char *arg, tk_analyze_options *opts, const char **extra);

#endif

#endif
