/* The program model: what program.json holds (docs/formats/tkprog.md), in memory, with its JSON
 * writer and validating reader. Part of libtkrt, which reads programs out of packages; the
 * exporter builds models by tracing and writes them. */
#ifndef TK_PROGMODEL_H
#define TK_PROGMODEL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <tk/runtime.h>

#include "strbuf.h"

#define TK_TKPROG_FORMAT "tkprog"
/* The version written: 2 when a node has scalar attributes, else 1 (which readers before
 * attributes also read). Readers take both. */
#define TK_TKPROG_VERSION 2
#define TK_TKPROG_VERSION_MIN 1

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

/* A scalar argument of a node ("attrs" in program.json): the schema's argument `arg`, by name,
 * with its value of the schema's type (int, float, bool, str or int[]). */
typedef struct tk_pm_attr {
    char *name;
    int arg;
    tk_value_kind kind; /* TK_VALUE_INT, _FLOAT, _BOOL, _STR or _INTS */
    int64_t i;          /* int, bool */
    double f;           /* float */
    char *s;            /* str */
    int64_t *ints;      /* int[] */
    int nints;
} tk_pm_attr;

/* One op call, in program order. inputs[i] is a value id, or -1 for an optional input left out
 * or for a scalar argument (its value is among attrs). */
typedef struct tk_pm_node {
    char *op;
    int nin;
    int *inputs;
    int nout;
    tk_pm_value *outputs;
    char *file; /* the model's source line that called the op */
    int line;
    int nattrs;
    tk_pm_attr *attrs; /* in argument order */
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

/* A TK_AUTOTUNE declaration of a kernel the program launches, as the analyzer read it at export
 * (common/tunespec.h's rules), with the kernel's TK_HEURISTIC; `compile` tunes from this. */
typedef struct tk_pm_tune {
    char *kernel, *key, *file;
    int line;
    int nparams, nconfigs;
    char *params[TK_TUNE_MAX_PARAMS];
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    char *hparam; /* NULL without a heuristic */
    int nh;
    int hvalues[TK_TUNE_MAX_CONFIGS];
} tk_pm_tune;

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
    size_t ntunes;
    tk_pm_tune *tunes;     /* "tuning", sorted by kernel */
    int has_tuning;        /* program.json has a "tuning" record (older exports do not) */
    unsigned char *weights; /* weights.safetensors: the parameters the program uses */
    size_t weights_len;
    char *program_json;     /* the program.json text a read model came from; NULL when traced */
    struct tk_pm_arena *arena;
} tk_program_model;

/* --- progmodel.c: the model ------------------------------------------------------------------ */

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
/* n's attribute array of nattrs zeroed entries (owned by the model). */
tk_pm_attr *tk_pm_node_attrs(tk_program_model *m, tk_pm_node *n, int nattrs);
tk_pm_source *tk_pm_add_source(tk_program_model *m, const char *path, const void *data, size_t len);
tk_pm_tune *tk_pm_add_tune(tk_program_model *m, const char *kernel);
/* Adds s unless the list already holds it. */
int tk_pm_add_guard(tk_program_model *m, const char *s);
int tk_pm_add_note(tk_program_model *m, const char *s);

tk_pm_symbol *tk_pm_find_symbol(const tk_program_model *m, const char *name);
tk_pm_op *tk_pm_find_op(const tk_program_model *m, const char *name);
/* The value with this id (an input, a parameter or a node output), or NULL. */
const tk_pm_value *tk_pm_find_value(const tk_program_model *m, int id);

/* Sorts the op table by name and the sources by path (the order program.json records). */
void tk_pm_sort(tk_program_model *m);

/* "eps=1e-05", "causal=True", "mode='tanh'", "dims=[0, 2]" into sb (the schema's notation). */
int tk_pm_format_attr(tk_strbuf *sb, const tk_pm_attr *a);
/* A float as the shortest text that reads back to the same double, with a '.' or an exponent
 * ("1.0", "1e-05", "0.1"); into buf of at least 32 bytes. */
const char *tk_pm_format_float(char *buf, size_t n, double f);

/* "bf16[batch, 128]" into sb. */
int tk_pm_format_shape(tk_strbuf *sb, const tk_pm_value *v);

/* --- program_json.c: program.json ----------------------------------------------------------- */

/* program.json of m, deterministic (fixed key order, sorted tables). *out is malloc'd. */
int tk_program_json_write(char **out, const tk_program_model *m);

/* Parses program.json into a new model (without weights and source bytes). origin names the
 * file in messages ("'mlp.tkprog'"). Checks the format and version and every field; TK_EFORMAT
 * with a one-line message for anything malformed. */
int tk_program_json_read(tk_program_model **out, const char *text, size_t len, const char *origin);

/* --- render.c: tkexport inspect -------------------------------------------------------------- */

/* For people: inputs with their symbols' ranges, parameters, nodes with shapes, outputs, guards,
 * notes, ops with their kernels, sources. Returns 0 or TK_EIO. */
int tk_program_model_write_text(const tk_program_model *m, FILE *f);
/* A Graphviz digraph: values as ellipses, nodes as boxes. */
int tk_program_model_write_dot(const tk_program_model *m, FILE *f);

#endif
