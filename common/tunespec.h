/* The strings of TK_AUTOTUNE and TK_HEURISTIC (include/tk/op.h), read by one set of rules: the
 * analyzer reads them at export (program.json records the result, which compile uses) and the
 * runtime reads the declarations of the objects it loads; both call these. Words are separated
 * by spaces or tabs; a parameter name is a C identifier, a value a decimal integer (a sign
 * allowed) that fits an int. */
#ifndef TK_TUNESPEC_H
#define TK_TUNESPEC_H

#include <stddef.h>

#define TK_TUNESPEC_NAME_MAX 64

/* The names in s into names[0..*n), at most max. 0, or -1 with why set ("BLOCK 2x is not a
 * name"): an empty list, too many names, a word that is not an identifier or is too long. */
int tk_tunespec_names(const char *s, char (*names)[TK_TUNESPEC_NAME_MAX], int max, int *n, char *why, size_t whyn);

/* The integers in s into v[0..*n), at most max. 0, or -1 with why set: an empty list, too many
 * values, a word that is not a decimal integer, one out of int's range. */
int tk_tunespec_ints(const char *s, int *v, int max, int *n, char *why, size_t whyn);

#endif
