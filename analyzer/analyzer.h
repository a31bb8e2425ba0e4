/* The analyzer's API: parse C/CUDA sources with libclang, summarize each file, link the
 * summaries across files and resolve, for every op, the set of kernels it can launch. */
#ifndef TK_ANALYZER_H
#define TK_ANALYZER_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

#define TK_ANALYZE_OPTIONS_VERSION 1
#define TK_ANALYZE_DEFAULT_DEPTH 5

/* A buffer an editor has not saved: analyzed instead of the file's contents on disk. */
typedef struct tk_unsaved_file {
    const char *path;     /* as given in PATHs or absolute */
    const char *contents;
    size_t length;
} tk_unsaved_file;

typedef struct tk_analyze_options {
    unsigned version;               /* TK_ANALYZE_OPTIONS_VERSION */
    const char *compdb_dir;         /* -p: folder holding compile_commands.json, or NULL */
    int max_depth;                  /* function hops followed from an op (default 5) */
    const char *const *extra_args;  /* --extra-arg: appended to every file's flags */
    size_t n_extra_args;
    int jobs;                       /* parallel parsers; 0 = the number of cores */
    const char *cache_dir;          /* summary cache; NULL = $TKEXPORT_CACHE_DIR, else
                                       $XDG_CACHE_HOME/tkexport, else ~/.cache/tkexport */
    int no_cache;                   /* neither read nor write the summary cache */
    int progress;                   /* a progress line on stderr (only when it is a terminal) */
    int lint;                       /* run every lint check: fills "diagnostics" (docs/lint.md) */
    const tk_unsaved_file *unsaved; /* editor buffers that replace files on disk */
    size_t n_unsaved;
    const volatile int *cancel;     /* when set to nonzero (by another thread), the run stops at
                                       the next file and fails with TK_EIO "canceled" (the LSP) */
} tk_analyze_options;

#define TK_ANALYZE_OPTIONS_INIT {TK_ANALYZE_OPTIONS_VERSION, NULL, TK_ANALYZE_DEFAULT_DEPTH, NULL, 0, 0, NULL, 0, 0, 0, NULL, 0, NULL}

typedef struct tk_analysis tk_analysis;

/* Counters of one run, for progress and benchmarks. */
typedef struct tk_analysis_stats {
    size_t files;        /* translation units analyzed */
    size_t parsed;       /* of which parsed by libclang */
    size_t cached;       /* of which taken from the summary cache */
    size_t parse_errors; /* files that did not parse cleanly */
} tk_analysis_stats;

/* Analyzes PATHS (files, or folders searched recursively for .c .h .cu .cuh) and, with
 * opts->compdb_dir, the translation units of compile_commands.json (restricted to PATHS when
 * any are given). A file that does not parse yields a tk-parse-error diagnostic; the others are
 * still analyzed. Returns 0 and a new analysis in *out (free with tk_analysis_free), or a
 * negative tk_error_code for bad options or an unreadable path, with *out NULL. */
int tk_analysis_run(tk_analysis **out, const tk_analyze_options *opts,
                    const char *const *paths, size_t n_paths);

void tk_analysis_free(tk_analysis *a);

/* The result document (the JSON of tk_analysis_to_json), owned by the analysis. Lint filters
 * and renders its "diagnostics" array in place. */
cJSON *tk_analysis_doc(tk_analysis *a);

void tk_analysis_get_stats(const tk_analysis *a, tk_analysis_stats *out);

/* A diagnostic in the document: {"file","line","column","end_line","end_column","severity"
 * ("error"|"warning"),"rule","message"}; lines and columns 1-based, end_column one past the
 * last character of the range (as SARIF's endColumn). Lint rules (docs/lint.md) are filled when
 * opts->lint is set; tk-parse-error always. */

/* The map as JSON text (format version 1, docs/analyzer.md), sorted and deterministic, paths
 * relative to the current directory. Returns a malloc'd string the caller frees, or NULL when
 * out of memory. */
char *tk_analysis_to_json(const tk_analysis *a);

/* The map for people: one line per op with its kernels; verbose adds each kernel's call path
 * and the unresolved launches. Returns 0 or TK_EIO. */
int tk_analysis_write_text(const tk_analysis *a, FILE *f, int verbose);

#endif
