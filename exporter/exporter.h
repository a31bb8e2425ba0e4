/* The exporter: traces a TK_PROGRAM with symbolic shapes into an in-memory program model,
 * completes the model's op table and source closure from the analyzer, and writes or reads it
 * as a .tkprog (docs/formats/tkprog.md). Used by `tkexport export` and `tkexport inspect`. */
#ifndef TK_EXPORTER_H
#define TK_EXPORTER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <tk/program.h>
#include <tk/runtime.h>

#include "analyzer.h"
#include "progmodel.h"
#include "tkprog.h"
#include "strbuf.h"

/* --- trace.c: tracing --------------------------------------------------------------------- */

/* Traces def: a CPU context in trace mode, one symbol per distinct TK_DIM name (the same name
 * in two inputs is one symbol, and must be declared with one range), traced inputs, then the
 * body. Nodes, parameters (dtype and shape from weights_path, a safetensors file; NULL when the
 * program has none) and outputs are recorded; the requirements of the ops' meta functions are
 * simplified into guards, narrowed ranges, or an export error naming the dimension, the op,
 * the model's source line and the fix. The op table is filled from the registry (schema,
 * builtin); tk_export_closure adds functions, kernels and sources. The weights of the
 * parameters used are copied into m->weights. Returns 0 and a new model in *out, or a negative
 * tk_error_code with a one-line message and *out NULL. */
int tk_export_trace(tk_program_model **out, const tk_program_def *def, const char *weights_path);

/* --- closure.c: the op table and the source closure --------------------------------------- */

/* Runs the analyzer on paths and completes m's op table (function, file, kernels) and its
 * source closure: the files of the ops' functions, the files holding their kernels, and the
 * headers those include with #include "..." (recursively), each with its SHA-256. Ops of the
 * program not built into libtkrt must be in the analyzer's map. An op with unresolved launches
 * gets a note. Returns 0 or a negative tk_error_code. */
int tk_export_closure(tk_program_model *m, const tk_analyze_options *opts, const char *const *paths, size_t n);

/* --- compile.c: the host sources as a shared object ---------------------------------------- */

/* Compiles the .c files under paths (folders are searched recursively, skipping hidden folders
 * and CMake build trees) with the system C compiler ($CC, else cc) against tkexport's headers
 * into a shared object in a new temporary folder: *so_path (malloc'd) and *tmpdir (malloc'd;
 * remove it with tk_export_compile_cleanup). The compiler's own messages go to stderr.
 * progress: a line on stderr before compiling. TK_ENOTFOUND for a missing path or no .c file,
 * TK_EINVAL when the compiler fails. */
int tk_export_compile(char **so_path, char **tmpdir, const char *const *paths, size_t n, int progress);
void tk_export_compile_cleanup(char *so_path, char *tmpdir);

#endif
