/* Symbolic integers behind tk_sym (tk/op.h): expression nodes, simplification to a canonical
 * form, ranges, evaluation, printing and parsing. Internal to libtkrt and the exporter.
 *
 * Canonical form: every expression is  c0 + sum(ci * atom_i)  with the atoms sorted by structure
 * (symbols by name, so the order does not depend on the order expressions were built in) and no
 * zero coefficient, where an atom is a symbol or a non-linear node (floordiv, mod, min, max)
 * whose operands are themselves canonical; nodes are interned per context. Two expressions are
 * equal exactly when their canonical forms are; constant operands are folded; `x // 1`,
 * `min(x, x)`, `(k*x) // k` and the like simplify, and nodes whose result is fixed by their
 * operands' ranges (e.g. `x // 2048` when x lies in [1, 1024]) fold to constants. Equal
 * canonical forms print alike whatever context built them. */
#ifndef TK_SYM_H
#define TK_SYM_H

#include <stdint.h>
#include <tk/op.h>

#include "strbuf.h"

/* A new symbol of the context with its range (min <= max); the name must be an identifier
 * ([A-Za-z_][A-Za-z0-9_]*, what tk_sym_parse reads back). TK_SYM(-1) with the error set on
 * failure. Two calls with one name give two symbols: the exporter keeps one per dimension name.
 * A bare symbol never folds to a constant, even with min == max; expressions over it do. */
tk_sym tk_sym_var(tk_ctx *ctx, const char *name, int64_t min, int64_t max);

/* 1 with the symbol's name (owned by the context) and range when s is a single symbol
 * (coefficient 1, no constant), else 0. Any out-pointer may be NULL. */
int tk_sym_as_var(tk_sym s, const char **name, int64_t *min, int64_t *max);

/* Narrows a symbol's range to its intersection with [min, max] (the exporter, applying a
 * guard); TK_EINVAL when it would be empty. Expressions built before keep their form; those
 * built after simplify against the new range. */
int tk_sym_narrow(tk_sym var, int64_t min, int64_t max);

/* The interval of values s can take given its symbols' ranges (exact for linear forms with one
 * symbol, a sound over-approximation otherwise). */
void tk_sym_range(tk_sym s, int64_t *lo, int64_t *hi);

/* 1 when a and b have the same canonical form (within one context), else 0. */
int tk_sym_equal(tk_sym a, tk_sym b);

/* 1 when s is linear in exactly one symbol, s = k * var + c (k != 0), with var, k and c; else 0. */
int tk_sym_as_linear1(tk_sym s, tk_sym *var, int64_t *k, int64_t *c);

/* The value of s with each symbol bound by name (names[i] = values[i]); TK_EINVAL naming an
 * unbound symbol. */
int tk_sym_eval(tk_sym s, const char *const *names, const int64_t *values, int n, int64_t *out);

/* Prints s as a Python-like expression: "128", "batch", "2*batch + 1", "batch // 4",
 * "batch % 8", "min(batch, 16)". Deterministic: equal expressions print alike. */
int tk_sym_print(tk_sym s, tk_strbuf *sb);

/* Parses what tk_sym_print writes, resolving names through vars (names[i] -> vars[i]);
 * TK_EINVAL with the position for bad text or an unknown name. */
int tk_sym_parse(tk_ctx *ctx, const char *text, const char *const *names, const tk_sym *vars, int n, tk_sym *out);

#endif
