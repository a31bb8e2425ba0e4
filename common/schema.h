/* Op names and schemas in PyTorch's syntax, "(Tensor x, Tensor(a!) y, int n=4) -> (Tensor, Tensor)":
 * what the analyzer's lint and the runtime's dispatch need of them. */
#ifndef TK_SCHEMA_H
#define TK_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#define TK_SCHEMA_MAX 64

/* Counts of arguments and returns. Per-argument facts are kept for the first TK_SCHEMA_MAX
 * arguments; nargs counts them all. */
typedef struct tk_schema {
    int nargs, nrets;
    int nrequired;                        /* arguments up to the last one without a default */
    unsigned char mutated[TK_SCHEMA_MAX]; /* argument i is Tensor(x!) */
    unsigned short name_at[TK_SCHEMA_MAX]; /* argument i's name: name_len bytes at this offset of */
    unsigned char name_len[TK_SCHEMA_MAX]; /* the schema text (0: too far in to say) */
    unsigned char kind[TK_SCHEMA_MAX];     /* tk_schema_kind */
    unsigned short def_at[TK_SCHEMA_MAX];  /* the default's text: def_len bytes at this offset */
    unsigned char def_len[TK_SCHEMA_MAX];  /* (0: none) */
} tk_schema;

/* The argument types a call can pass (tk/op.h's tk_value); TK_SCHEMA_OTHER for any other type
 * (Scalar, Tensor[]...), which calls cannot give yet. */
enum tk_schema_kind {
    TK_SCHEMA_TENSOR,
    TK_SCHEMA_TENSOR_OPT, /* Tensor?: NULL allowed */
    TK_SCHEMA_INT,
    TK_SCHEMA_FLOAT,
    TK_SCHEMA_BOOL,
    TK_SCHEMA_STR,
    TK_SCHEMA_INTS, /* int[] or int[N] */
    TK_SCHEMA_OTHER
};

/* "Tensor", "int", "int[]"... for messages. */
const char *tk_schema_kind_name(int kind);

/* A default's literal for a kind, read: None (an optional tensor), an integer, a float (an
 * integer too), True or False, a quoted string (no escapes), [integers]. 0, or -1 with why. For
 * strings, *s and *slen point into text; for int[], up to cap integers land in ints (*n: how
 * many). */
int tk_schema_literal(int kind, const char *text, size_t len, int64_t *i, double *f, const char **s, size_t *slen,
                      int64_t *ints, int cap, int *n, char *why, size_t nwhy);

/* Argument i's name from the schema text sc was parsed from ("weight"), or "?" when unknown. */
const char *tk_schema_arg_name(const char *schema, const tk_schema *sc, int i, char *buf, size_t n);

/* 0, or -1 with a one-line reason in why ("expected '->' at column 12 of the schema"). */
int tk_schema_parse(const char *schema, tk_schema *out, char *why, size_t nwhy);

/* 1 for namespace::name with identifier parts (and an optional .overload), else 0. */
int tk_op_name_valid(const char *name);

#endif
