/* Op names and schemas in PyTorch's syntax, "(Tensor x, Tensor(a!) y, int n=4) -> (Tensor, Tensor)":
 * what the analyzer's lint and the runtime's dispatch need of them. */
#ifndef TK_SCHEMA_H
#define TK_SCHEMA_H

#include <stddef.h>

#define TK_SCHEMA_MAX 64

/* Counts of arguments and returns. Per-argument facts are kept for the first TK_SCHEMA_MAX
 * arguments; nargs counts them all. */
typedef struct tk_schema {
    int nargs, nrets;
    int nrequired;                        /* arguments up to the last one without a default */
    unsigned char mutated[TK_SCHEMA_MAX]; /* argument i is Tensor(x!) */
    unsigned short name_at[TK_SCHEMA_MAX]; /* argument i's name: name_len bytes at this offset of */
    unsigned char name_len[TK_SCHEMA_MAX]; /* the schema text (0: too far in to say) */
} tk_schema;

/* Argument i's name from the schema text sc was parsed from ("weight"), or "?" when unknown. */
const char *tk_schema_arg_name(const char *schema, const tk_schema *sc, int i, char *buf, size_t n);

/* 0, or -1 with a one-line reason in why ("expected '->' at column 12 of the schema"). */
int tk_schema_parse(const char *schema, tk_schema *out, char *why, size_t nwhy);

/* 1 for namespace::name with identifier parts (and an optional .overload), else 0. */
int tk_op_name_valid(const char *name);

#endif
