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
} tk_schema;

/* 0, or -1 with a one-line reason in why ("expected '->' at column 12 of the schema"). */
int tk_schema_parse(const char *schema, tk_schema *out, char *why, size_t nwhy);

/* 1 for namespace::name with identifier parts (and an optional .overload), else 0. */
int tk_op_name_valid(const char *name);

#endif
