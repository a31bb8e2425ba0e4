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
#include "strbuf.h"

#define TK_TKPROG_FORMAT "tkprog"
#define TK_TKPROG_VERSION 1

/* Integers in program.json are JSON numbers: the model keeps dims, ranges and ids within
 * +-2^53 so that every reader (cJSON keeps numbers as doubles) reads them exactly. */
#define TK_PM_INT_MAX (INT64_C(1) << 53)

/* One dimension of a value: static (expr NULL, value) or symbolic (expr, the printed form of a
 * tk_sym over the program's symbols: "batch", "2*batch", "batch // 4"). */
typedef struct tk_pm_dim {
    int64_t value;
    char *expr;
} tk_pm_dim;

/* A value of the program: an input, a parameter or an output of a node. Ids are unique in a
 * program; inputs come first, then values in the order the trace made them. */
typedef struct tk_pm_value {
    int id;
    char *name; /* inputs and parameters; NULL for node outputs */
    tk_dtype dtype;
    int rank;
    tk_pm_dim dims[TK_MAX_DIMS];
} tk_pm_value;

/* A dynamic dimension: its name and the range the program accepts (declared, then narrowed by
 * the guards the trace met). */
typedef struct tk_pm_symbol {
    char *name;
    int64_t min, max;
} tk_pm_symbol;

/* One op call, in program order. inputs[i] is a value id, or -1 for an optional input left out. */
typedef struct tk_pm_node {
    char *op;
    int nin;
    int *inputs;
    int nout;
    tk_pm_value *outputs;
    char *file; /* the model's source line that called the op */
    int line;
} tk_pm_node;

/* An entry of the op table: what a later stage needs to compile the op. Built-in ops (those of
 * libtkrt, e.g. tk::linear) have builtin set, file "<builtin>", no function and no kernels. */
typedef struct tk_pm_op {
    char *name;
    char *schema;
    char *function; /* the C function TK_OP defines; NULL when unknown or built in */
    char *file;
    int builtin;
    size_t nkernels;
    char **kernels; /* sorted */
} tk_pm_op;

/* A file of the source closure, stored as sources/<path> in the .tkprog. */
typedef struct tk_pm_source {
    char *path;
    char sha256[65];
    unsigned char *data;
    size_t len;
} tk_pm_source;

/* The program: everything program.json holds, plus the bytes of weights.safetensors and of the
 * source closure. Strings and the small arrays belong to the model (tk_program_model_free). */
typedef struct tk_program_model {
    char *name;
    size_t nsymbols, ninputs, noutputs, nparams, nnodes, nguards, nnotes, nops, nsources;
    tk_pm_symbol *symbols;
    tk_pm_value *inputs;
    tk_pm_value *outputs;
    tk_pm_value *params;
    tk_pm_node *nodes;
    char **guards; /* printed: "batch % 8 == 0", "batch == seq" */
    char **notes;  /* what export did that a reader should know: "dim 'batch' narrowed ..." */
    tk_pm_op *ops; /* sorted by name */
    tk_pm_source *sources; /* sorted by path */
    unsigned char *weights; /* weights.safetensors: the parameters the program uses */
    size_t weights_len;
    char *program_json;     /* the program.json text a read model came from; NULL when traced */
    struct tk_pm_arena *arena;
} tk_program_model;

/* --- program.c: the model ------------------------------------------------------------------ */

int tk_program_model_new(tk_program_model **out, const char *name);
void tk_program_model_free(tk_program_model *m);

/* Copies of strings and zeroed memory owned by the model; NULL with TK_ENOMEM set. */
char *tk_pm_strdup(tk_program_model *m, const char *s);
void *tk_pm_alloc(tk_program_model *m, size_t n);

/* Appenders: each returns the new (zeroed, except for what it was given) element, or NULL with
 * TK_ENOMEM set. Strings are copied. */
tk_pm_symbol *tk_pm_add_symbol(tk_program_model *m, const char *name, int64_t min, int64_t max);
tk_pm_value *tk_pm_add_input(tk_program_model *m);
tk_pm_value *tk_pm_add_param(tk_program_model *m);
tk_pm_value *tk_pm_add_output(tk_program_model *m);
tk_pm_node *tk_pm_add_node(tk_program_model *m, const char *op, int nin, int nout, const char *file, int line);
tk_pm_op *tk_pm_add_op(tk_program_model *m, const char *name);
tk_pm_source *tk_pm_add_source(tk_program_model *m, const char *path, const void *data, size_t len);
/* Adds s unless the list already holds it. */
int tk_pm_add_guard(tk_program_model *m, const char *s);
int tk_pm_add_note(tk_program_model *m, const char *s);

tk_pm_symbol *tk_pm_find_symbol(const tk_program_model *m, const char *name);
tk_pm_op *tk_pm_find_op(const tk_program_model *m, const char *name);
/* The value with this id (an input, a parameter or a node output), or NULL. */
const tk_pm_value *tk_pm_find_value(const tk_program_model *m, int id);

/* Sorts the op table by name and the sources by path (the order program.json records). */
void tk_pm_sort(tk_program_model *m);

/* "bf16[batch, 128]" into sb. */
int tk_pm_format_shape(tk_strbuf *sb, const tk_pm_value *v);

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

/* --- program_json.c: program.json ----------------------------------------------------------- */

/* program.json of m, deterministic (fixed key order, sorted tables). *out is malloc'd. */
int tk_program_json_write(char **out, const tk_program_model *m);

/* Parses program.json into a new model (without weights and source bytes). origin names the
 * file in messages ("'mlp.tkprog'"). Checks the format and version and every field; TK_EINVAL
 * with a one-line message for anything malformed. */
int tk_program_json_read(tk_program_model **out, const char *text, size_t len, const char *origin);

/* --- tkprog.c: the .tkprog zip -------------------------------------------------------------- */

/* The .tkprog bytes (a zip: program.json, sources/<path>..., weights.safetensors), sorted,
 * with fixed timestamps and attributes, so that equal models give equal bytes. *data malloc'd. */
int tk_tkprog_write_mem(void **data, size_t *len, const tk_program_model *m);
/* Writes the .tkprog to path through a temporary file and a rename. */
int tk_tkprog_write(const tk_program_model *m, const char *path);

/* Reads a .tkprog: program.json checked (format, version, fields), every source against its
 * SHA-256, the weights' header validated and the parameters' dtypes and shapes against it, no
 * unexpected entry. Returns 0 and a new model, or a negative tk_error_code with *out NULL. */
int tk_tkprog_read(tk_program_model **out, const char *path);
int tk_tkprog_read_mem(tk_program_model **out, const void *data, size_t len, const char *origin);

/* --- render.c: tkexport inspect -------------------------------------------------------------- */

/* For people: inputs with their symbols' ranges, parameters, nodes with shapes, outputs, guards,
 * notes, ops with their kernels, sources. Returns 0 or TK_EIO. */
int tk_program_model_write_text(const tk_program_model *m, FILE *f);
/* A Graphviz digraph: values as ellipses, nodes as boxes. */
int tk_program_model_write_dot(const tk_program_model *m, FILE *f);

#endif
