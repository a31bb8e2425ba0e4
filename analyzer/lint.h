/* Lint on top of the analyzer: the rule table, the --checks list and NOLINT comments that filter
 * the document's "diagnostics", and the three renderings (compiler-style text, SARIF 2.1.0, and
 * exit status). The findings themselves come from tk_analysis_run with opts.lint set. */
#ifndef TK_LINT_H
#define TK_LINT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

#include "analyzer.h"

/* Where docs/lint.md is published: SARIF's informationUri, and helpUri with "#<rule id>". */
#define TK_LINT_INFO_URI "https://github.com/tkexport/tkexport/blob/main/docs/lint.md"

/* One rule. Every string is a static constant. */
typedef struct tk_lint_rule {
    const char *id;          /* "tk-raw-launch": what diagnostics carry as "rule" */
    const char *name;        /* "RawLaunch": SARIF's rule name */
    const char *severity;    /* default severity: "error" or "warning" */
    const char *short_desc;  /* one line, no final full stop */
    const char *full_desc;   /* what it finds, a few sentences */
    const char *help;        /* why it matters and how to fix or suppress it: one paragraph */
} tk_lint_rule;

/* Every rule, in the order of docs/lint.md; that order is also SARIF's ruleIndex. */
extern const tk_lint_rule tk_lint_rules[];
extern const size_t tk_lint_nrules;

/* The rule with that id, or NULL. */
const tk_lint_rule *tk_lint_rule_find(const char *id);

/* A --checks list as clang-tidy reads it: comma-separated entries, each a rule id or a glob
 * ('*' matches any run of characters), '-' in front to disable; every rule starts enabled and
 * the entries apply left to right, later ones winning ("-*,tk-raw-launch" keeps one rule,
 * "-tk-depth-limit" drops one). Blanks around entries and empty entries are ignored.
 * Returns 0, or TK_EINVAL with a message naming the first bad entry: one with characters other
 * than letters, digits, '-', '_', '.', '*', or without '*' naming no known rule. */
int tk_lint_checks_validate(const char *checks);

/* Whether the (valid) list enables rule; NULL enables every rule. */
int tk_lint_rule_enabled(const char *checks, const char *rule);

/* Removes from doc's "diagnostics" those whose rule checks disables (NULL: none) and those
 * suppressed in the source: "NOLINT" on the diagnostic's line or "NOLINTNEXTLINE" on the line
 * above it, bare (every rule) or with a list "NOLINT(tk-rule, tk-other*)". Files are read from
 * disk ("file" relative to the current directory or absolute), each once per call; a file that
 * cannot be read suppresses nothing. Returns 0, or TK_EINVAL for a malformed checks list (as
 * tk_lint_checks_validate; doc is then unchanged) or a doc that is not an object, or TK_ENOMEM. */
int tk_lint_filter(cJSON *doc, const char *checks);

/* As tk_lint_filter, with NOLINT comments read from editor buffers for the files they name
 * (matched by absolute path) instead of the files on disk. */
int tk_lint_filter_unsaved(cJSON *doc, const char *checks, const tk_unsaved_file *unsaved, size_t n_unsaved);

/* Counts doc's diagnostics by severity (anything not "warning" counts as an error). */
void tk_lint_count(const cJSON *doc, int *errors, int *warnings);

/* The exit status lint gives: 0 when doc has no error (and, with werror, no warning either),
 * 1 otherwise. */
int tk_lint_exit_status(const cJSON *doc, int werror);

/* Writes doc's diagnostics as compilers do, in doc's order:
 *     file:line:col: error: message [tk-rule]
 *     <the source line>
 *     <blanks (tabs kept) up to the column>^~~~ (under the rest of the range on that line)
 * The source lines are read from disk; a diagnostic whose line cannot be read gets only its
 * first line, one without a file starts with "tkexport:". color adds clang's ANSI colors (bold
 * location and message, red "error:", magenta "warning:", green caret). Returns 0 or TK_EIO. */
int tk_lint_write_text(const cJSON *doc, FILE *f, int color);

/* Writes clang's summary, "1 warning and 2 errors generated.", nothing when doc has no
 * diagnostic. Returns 0 or TK_EIO. */
int tk_lint_write_summary(const cJSON *doc, FILE *f);

/* doc's diagnostics as a SARIF 2.1.0 log for GitHub code scanning, in *out (the caller deletes
 * it with cJSON_Delete): one run, the tool's driver with every rule, one result per diagnostic
 * with a region (columns in UTF-16 code units, the run's columnKind) on a URI relative to
 * %SRCROOT% (the current directory) and a primaryLocationLineHash fingerprint that depends on
 * the rule, the file, the line's trimmed text and its occurrence index, not the line number.
 * Returns 0, or TK_ENOMEM with *out NULL. */
int tk_lint_to_sarif(cJSON **out, const cJSON *doc);

#endif
