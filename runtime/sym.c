/* Symbolic integers (tk_sym of tk/op.h, runtime/sym.h): expression nodes interned in the
 * context's pool, simplification to a canonical form, ranges, evaluation, printing and parsing.
 *
 * A non-constant tk_sym points at one node: a symbol, a non-linear atom (floordiv, mod, min,
 * max) or a linear node c0 + sum(ci * atom_i). Every node but a symbol is interned (one node per
 * structure), so within a context equal canonical forms are the same pointer. Atoms are ordered
 * structurally (symbols by name), never by address or creation order, so the printed form does
 * not depend on the order in which a program built its expressions. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "sym.h"

typedef enum sym_kind { K_VAR, K_FLOORDIV, K_MOD, K_MIN, K_MAX, K_LIN, K_MUL } sym_kind;

typedef struct sym_term {
    int64_t coef;
    const tk_sym_expr *atom;
} sym_term;

struct tk_sym_expr {
    sym_kind kind;
    union {
        struct {
            const char *name;
            int64_t min, max; /* mutable: tk_sym_narrow */
            unsigned id;
        } var;
        struct {
            tk_sym a;
            int64_t k;
        } div; /* K_FLOORDIV, K_MOD: a // k, a % k with k >= 2 */
        struct {
            tk_sym a, b;
        } mm; /* K_MIN, K_MAX, K_MUL (a product of two non-constant atoms): operands in canonical order */
        struct {
            int64_t c;
            int n; /* >= 1; never a single term with coefficient 1 and c == 0 (that is the atom) */
            const sym_term *terms;
        } lin;
    } u;
};

/* --- the pool: an arena of nodes and the intern table ---------------------------------------- */

typedef struct pool_chunk {
    struct pool_chunk *next;
    size_t size, used;
    max_align_t data[];
} pool_chunk;

struct tk_sym_pool {
    pool_chunk *chunks;
    const tk_sym_expr **table; /* open addressing, NULL = empty */
    size_t cap, count;
    unsigned next_id;
};

#if defined(__SANITIZE_ADDRESS__)
#define POOL_CHUNK_PER_OBJECT 1 /* ASan sees each node as its own allocation */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_CHUNK_PER_OBJECT 1
#endif
#endif
#ifndef POOL_CHUNK_PER_OBJECT
#define POOL_CHUNK_PER_OBJECT 0
#endif

enum { POOL_CHUNK_SIZE = 8192 };

static void *pool_alloc(tk_sym_pool *p, size_t n)
{
    const size_t align = sizeof(max_align_t);
    n = (n + align - 1) / align * align;
    pool_chunk *c = p->chunks;
    if (POOL_CHUNK_PER_OBJECT || !c || c->size - c->used < n) {
        size_t size = POOL_CHUNK_PER_OBJECT || n > POOL_CHUNK_SIZE / 2 ? n : POOL_CHUNK_SIZE;
        pool_chunk *nc = malloc(sizeof(*nc) + size);
        if (!nc)
            return NULL;
        nc->size = size;
        nc->used = 0;
        if (c && size == n && !POOL_CHUNK_PER_OBJECT) {
            /* a large object: keep the current chunk current */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            p->chunks = nc;
        }
        c = nc;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    return r;
}

void tk_sym_pool_free(tk_sym_pool *p)
{
    if (!p)
        return;
    for (pool_chunk *c = p->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(p->table);
    free(p);
}

static tk_sym_pool *ctx_pool(tk_ctx *ctx)
{
    if (!ctx) {
        tk_error_set(TK_EINVAL, "a symbolic expression needs a context");
        return NULL;
    }
    if (!ctx->syms && !(ctx->syms = calloc(1, sizeof(*ctx->syms))))
        tk_error_set(TK_ENOMEM, "out of memory");
    return ctx->syms;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t sym_bits(tk_sym s) { return s.expr ? (uint64_t)(uintptr_t)s.expr : (uint64_t)s.value ^ 0x5bd1e995u; }

static uint64_t node_hash(const tk_sym_expr *e)
{
    uint64_t h = mix(0, (uint64_t)e->kind);
    switch (e->kind) {
    case K_FLOORDIV:
    case K_MOD:
        h = mix(mix(h, sym_bits(e->u.div.a)), (uint64_t)e->u.div.k);
        break;
    case K_MIN:
    case K_MAX:
    case K_MUL:
        h = mix(mix(h, sym_bits(e->u.mm.a)), sym_bits(e->u.mm.b));
        break;
    case K_LIN:
        h = mix(mix(h, (uint64_t)e->u.lin.c), (uint64_t)e->u.lin.n);
        for (int i = 0; i < e->u.lin.n; i++)
            h = mix(mix(h, (uint64_t)e->u.lin.terms[i].coef), (uint64_t)(uintptr_t)e->u.lin.terms[i].atom);
        break;
    case K_VAR:
        h = mix(h, (uint64_t)(uintptr_t)e);
        break;
    }
    return h;
}

static int same_sym(tk_sym a, tk_sym b) { return a.expr || b.expr ? a.expr == b.expr : a.value == b.value; }

/* Structural equality one level deep: children are interned. */
static int node_same(const tk_sym_expr *a, const tk_sym_expr *b)
{
    if (a->kind != b->kind)
        return 0;
    switch (a->kind) {
    case K_FLOORDIV:
    case K_MOD:
        return same_sym(a->u.div.a, b->u.div.a) && a->u.div.k == b->u.div.k;
    case K_MIN:
    case K_MAX:
    case K_MUL:
        return same_sym(a->u.mm.a, b->u.mm.a) && same_sym(a->u.mm.b, b->u.mm.b);
    case K_LIN:
        if (a->u.lin.c != b->u.lin.c || a->u.lin.n != b->u.lin.n)
            return 0;
        for (int i = 0; i < a->u.lin.n; i++)
            if (a->u.lin.terms[i].coef != b->u.lin.terms[i].coef || a->u.lin.terms[i].atom != b->u.lin.terms[i].atom)
                return 0;
        return 1;
    case K_VAR:
        return a == b;
    }
    return 0;
}

/* The pool's node equal to *key, or a new copy of it (LIN terms copied too). */
static const tk_sym_expr *intern(tk_sym_pool *p, const tk_sym_expr *key)
{
    if (p->count * 2 >= p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 64;
        const tk_sym_expr **nt = calloc(ncap, sizeof(*nt));
        if (!nt)
            goto oom;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->table[i])
                continue;
            size_t j = (size_t)node_hash(p->table[i]) & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = p->table[i];
        }
        free(p->table);
        p->table = nt;
        p->cap = ncap;
    }
    size_t j = (size_t)node_hash(key) & (p->cap - 1);
    for (; p->table[j]; j = (j + 1) & (p->cap - 1))
        if (node_same(p->table[j], key))
            return p->table[j];
    tk_sym_expr *e = pool_alloc(p, sizeof(*e));
    if (!e)
        goto oom;
    *e = *key;
    if (key->kind == K_LIN) {
        sym_term *t = pool_alloc(p, sizeof(*t) * (size_t)key->u.lin.n);
        if (!t)
            goto oom;
        memcpy(t, key->u.lin.terms, sizeof(*t) * (size_t)key->u.lin.n);
        e->u.lin.terms = t;
    }
    p->table[j] = e;
    p->count++;
    return e;
oom:
    tk_error_set(TK_ENOMEM, "out of memory");
    return NULL;
}

/* --- order ------------------------------------------------------------------------------------ */

static int cmp_sym(tk_sym a, tk_sym b);

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* A total order on nodes that depends on structure only (symbols by name; two symbols of one
 * name, which the exporter never makes, by creation). */
static int cmp_node(const tk_sym_expr *a, const tk_sym_expr *b)
{
    if (a == b)
        return 0;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    int r;
    switch (a->kind) {
    case K_VAR:
        r = strcmp(a->u.var.name, b->u.var.name);
        return r ? r : cmp_i64(a->u.var.id, b->u.var.id);
    case K_FLOORDIV:
    case K_MOD:
        r = cmp_sym(a->u.div.a, b->u.div.a);
        return r ? r : cmp_i64(a->u.div.k, b->u.div.k);
    case K_MIN:
    case K_MAX:
    case K_MUL:
        r = cmp_sym(a->u.mm.a, b->u.mm.a);
        return r ? r : cmp_sym(a->u.mm.b, b->u.mm.b);
    case K_LIN:
        for (int i = 0; i < a->u.lin.n && i < b->u.lin.n; i++) {
            if ((r = cmp_node(a->u.lin.terms[i].atom, b->u.lin.terms[i].atom)))
                return r;
            if ((r = cmp_i64(a->u.lin.terms[i].coef, b->u.lin.terms[i].coef)))
                return r;
        }
        if ((r = cmp_i64(a->u.lin.n, b->u.lin.n)))
            return r;
        return cmp_i64(a->u.lin.c, b->u.lin.c);
    }
    return 0;
}

/* Expressions before constants, so that min(batch, 16) reads as it is written. */
static int cmp_sym(tk_sym a, tk_sym b)
{
    if (!a.expr && !b.expr)
        return cmp_i64(a.value, b.value);
    if (!a.expr || !b.expr)
        return a.expr ? -1 : 1;
    return cmp_node(a.expr, b.expr);
}

/* --- integer helpers -------------------------------------------------------------------------- */

static int overflows(void) { return tk_error_set(TK_EINVAL, "symbolic expression overflows"); }

/* Python's floor division and modulo, for k > 0. */
static int64_t fdiv(int64_t a, int64_t k)
{
    int64_t q = a / k;
    if (a % k != 0 && a < 0)
        q--;
    return q;
}

static int64_t fmod64(int64_t a, int64_t k)
{
    int64_t r = a % k;
    return r < 0 ? r + k : r;
}

static uint64_t uabs(int64_t v) { return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; }

static uint64_t gcd_u(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* --- ranges ----------------------------------------------------------------------------------- */

/* Bounds clamp to int64 (saturate) instead of overflowing. A clamped bound still bounds every
 * int64 value the expression takes, so comparisons with it are sound; only folding to a constant
 * (lo == hi) must not trust it, hence `sat`. */
typedef struct rng {
    int64_t lo, hi;
    int sat; /* a bound was clamped */
} rng;

static int64_t sat_add(int64_t a, int64_t b, int *sat)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    *sat = 1;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat_mul(int64_t a, int64_t b, int *sat)
{
    int64_t r;
    if (!__builtin_mul_overflow(a, b, &r))
        return r;
    *sat = 1;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

static rng range_node(const tk_sym_expr *e);

static rng range_sym(tk_sym s)
{
    if (!s.expr)
        return (rng){s.value, s.value, 0};
    return range_node(s.expr);
}

static rng range_terms(int64_t c, int n, const sym_term *t)
{
    rng r = {c, c, 0};
    for (int i = 0; i < n; i++) {
        rng a = range_node(t[i].atom);
        r.sat |= a.sat;
        int64_t k = t[i].coef;
        int64_t lo = sat_mul(k, k > 0 ? a.lo : a.hi, &r.sat), hi = sat_mul(k, k > 0 ? a.hi : a.lo, &r.sat);
        r.lo = sat_add(r.lo, lo, &r.sat);
        r.hi = sat_add(r.hi, hi, &r.sat);
    }
    return r;
}

static rng range_node(const tk_sym_expr *e)
{
    rng a, b;
    switch (e->kind) {
    case K_VAR:
        return (rng){e->u.var.min, e->u.var.max, 0};
    case K_LIN:
        return range_terms(e->u.lin.c, e->u.lin.n, e->u.lin.terms);
    case K_FLOORDIV:
        a = range_sym(e->u.div.a);
        return (rng){fdiv(a.lo, e->u.div.k), fdiv(a.hi, e->u.div.k), a.sat};
    case K_MOD: {
        int64_t k = e->u.div.k;
        a = range_sym(e->u.div.a);
        if (!a.sat && fdiv(a.lo, k) == fdiv(a.hi, k)) {
            int64_t base = fdiv(a.lo, k) * k; /* |base| <= |a.lo|: no overflow */
            return (rng){a.lo - base, a.hi - base, 0};
        }
        return (rng){0, k - 1, 0};
    }
    case K_MIN:
        a = range_sym(e->u.mm.a), b = range_sym(e->u.mm.b);
        return (rng){a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi, a.sat | b.sat};
    case K_MAX:
        a = range_sym(e->u.mm.a), b = range_sym(e->u.mm.b);
        return (rng){a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi, a.sat | b.sat};
    case K_MUL: { /* the extremes are among the corners' products */
        a = range_sym(e->u.mm.a), b = range_sym(e->u.mm.b);
        int sat = a.sat | b.sat;
        int64_t c[4] = {sat_mul(a.lo, b.lo, &sat), sat_mul(a.lo, b.hi, &sat), sat_mul(a.hi, b.lo, &sat),
                        sat_mul(a.hi, b.hi, &sat)};
        rng r = {c[0], c[0], sat};
        for (int i = 1; i < 4; i++) {
            r.lo = c[i] < r.lo ? c[i] : r.lo;
            r.hi = c[i] > r.hi ? c[i] : r.hi;
        }
        return r;
    }
    }
    return (rng){INT64_MIN, INT64_MAX, 1};
}

void tk_sym_range(tk_sym s, int64_t *lo, int64_t *hi)
{
    rng r = range_sym(s);
    if (lo)
        *lo = r.lo;
    if (hi)
        *hi = r.hi;
}

/* --- linear forms ----------------------------------------------------------------------------- */

/* A working linear form c + sum(coef * atom), before it becomes a node. */
typedef struct lin {
    int64_t c;
    int n, cap;
    sym_term *t;
    sym_term small[8];
} lin;

static void lin_init(lin *l)
{
    l->c = 0;
    l->n = 0;
    l->cap = (int)(sizeof(l->small) / sizeof(l->small[0]));
    l->t = l->small;
}

static void lin_release(lin *l)
{
    if (l->t != l->small)
        free(l->t);
    lin_init(l);
}

static int lin_push(lin *l, int64_t coef, const tk_sym_expr *atom)
{
    if (l->n == l->cap) {
        int ncap = l->cap * 2;
        sym_term *nt = malloc(sizeof(*nt) * (size_t)ncap);
        if (!nt)
            return tk_error_set(TK_ENOMEM, "out of memory");
        memcpy(nt, l->t, sizeof(*nt) * (size_t)l->n);
        if (l->t != l->small)
            free(l->t);
        l->t = nt;
        l->cap = ncap;
    }
    l->t[l->n++] = (sym_term){coef, atom};
    return 0;
}

/* l += k * s */
static int lin_add(lin *l, tk_sym s, int64_t k)
{
    int64_t v;
    if (k == 0)
        return 0;
    if (!s.expr) {
        if (__builtin_mul_overflow(s.value, k, &v) || __builtin_add_overflow(l->c, v, &l->c))
            return overflows();
        return 0;
    }
    if (s.expr->kind != K_LIN) {
        /* an atom that can take one value only (a symbol of range [7, 7]) is that constant, in
         * every form it enters: `seq - d` and `-d + seq` must read back alike */
        rng r = range_node(s.expr);
        if (!r.sat && r.lo == r.hi)
            return lin_add(l, TK_SYM(r.lo), k);
        return lin_push(l, k, s.expr);
    }
    if (__builtin_mul_overflow(s.expr->u.lin.c, k, &v) || __builtin_add_overflow(l->c, v, &l->c))
        return overflows();
    for (int i = 0; i < s.expr->u.lin.n; i++) {
        int rc;
        if (__builtin_mul_overflow(s.expr->u.lin.terms[i].coef, k, &v))
            return overflows();
        if ((rc = lin_push(l, v, s.expr->u.lin.terms[i].atom)))
            return rc;
    }
    return 0;
}

static int cmp_term(const void *a, const void *b)
{
    return cmp_node(((const sym_term *)a)->atom, ((const sym_term *)b)->atom);
}

/* Sorts the terms, merges equal atoms and drops zero coefficients. */
static int lin_normalize(lin *l)
{
    qsort(l->t, (size_t)l->n, sizeof(*l->t), cmp_term);
    int w = 0;
    for (int i = 0; i < l->n; i++) {
        if (w > 0 && l->t[w - 1].atom == l->t[i].atom) {
            if (__builtin_add_overflow(l->t[w - 1].coef, l->t[i].coef, &l->t[w - 1].coef))
                return overflows();
        } else {
            l->t[w++] = l->t[i];
        }
        if (l->t[w - 1].coef == 0)
            w--;
    }
    l->n = w;
    return 0;
}

/* The tk_sym of a normalized form: a constant, an atom, or an interned linear node; constant
 * when the form's range is a single value. */
static int lin_build(tk_ctx *ctx, lin *l, tk_sym *out)
{
    if (l->n == 0) {
        *out = TK_SYM(l->c);
        return 0;
    }
    if (l->n == 1 && l->t[0].coef == 1 && l->c == 0 && l->t[0].atom->kind == K_VAR) {
        *out = (tk_sym){TK_SYM_DYNAMIC_VALUE, l->t[0].atom};
        return 0;
    }
    rng r = range_terms(l->c, l->n, l->t);
    if (!r.sat && r.lo == r.hi) {
        *out = TK_SYM(r.lo);
        return 0;
    }
    if (l->n == 1 && l->t[0].coef == 1 && l->c == 0) {
        *out = (tk_sym){TK_SYM_DYNAMIC_VALUE, l->t[0].atom};
        return 0;
    }
    tk_sym_pool *p = ctx_pool(ctx);
    if (!p)
        return TK_ENOMEM;
    tk_sym_expr key;
    memset(&key, 0, sizeof(key));
    key.kind = K_LIN;
    key.u.lin.c = l->c;
    key.u.lin.n = l->n;
    key.u.lin.terms = l->t;
    const tk_sym_expr *e = intern(p, &key);
    if (!e)
        return TK_ENOMEM;
    *out = (tk_sym){TK_SYM_DYNAMIC_VALUE, e};
    return 0;
}

/* An interned non-linear atom, folded to a constant when its range is a single value. */
static int atom_build(tk_ctx *ctx, const tk_sym_expr *key, tk_sym *out)
{
    rng r = range_node(key);
    if (!r.sat && r.lo == r.hi) {
        *out = TK_SYM(r.lo);
        return 0;
    }
    tk_sym_pool *p = ctx_pool(ctx);
    if (!p)
        return TK_ENOMEM;
    const tk_sym_expr *e = intern(p, key);
    if (!e)
        return TK_ENOMEM;
    *out = (tk_sym){TK_SYM_DYNAMIC_VALUE, e};
    return 0;
}

/* --- arithmetic ------------------------------------------------------------------------------- */

/* ka * a + kb * b */
static int sym_combine(tk_ctx *ctx, tk_sym a, int64_t ka, tk_sym b, int64_t kb, tk_sym *out)
{
    lin l;
    lin_init(&l);
    int rc = lin_add(&l, a, ka);
    if (!rc)
        rc = lin_add(&l, b, kb);
    if (!rc)
        rc = lin_normalize(&l);
    if (!rc)
        rc = lin_build(ctx, &l, out);
    lin_release(&l);
    return rc;
}

static int sym_floordiv(tk_ctx *ctx, tk_sym a, int64_t k, tk_sym *out);

/* r // k where r is a normalized form whose coefficients and constant share no factor with k
 * and are not all multiples of it; the atom or constant this floor division gives. */
static int floordiv_rest(tk_ctx *ctx, lin *r, int64_t k, tk_sym *out)
{
    rng rr = range_terms(r->c, r->n, r->t);
    if (!rr.sat && fdiv(rr.lo, k) == fdiv(rr.hi, k)) {
        *out = TK_SYM(fdiv(rr.lo, k));
        return 0;
    }
    tk_sym inner;
    int rc = lin_build(ctx, r, &inner);
    if (rc)
        return rc;
    if (!inner.expr) {
        *out = TK_SYM(fdiv(inner.value, k));
        return 0;
    }
    /* (x // a) // k = x // (a*k) */
    int64_t ak;
    if (inner.expr->kind == K_FLOORDIV && !__builtin_mul_overflow(inner.expr->u.div.k, k, &ak))
        return sym_floordiv(ctx, inner.expr->u.div.a, ak, out);
    tk_sym_expr key;
    memset(&key, 0, sizeof(key));
    key.kind = K_FLOORDIV;
    key.u.div.a = inner;
    key.u.div.k = k;
    return atom_build(ctx, &key, out);
}

static int sym_floordiv(tk_ctx *ctx, tk_sym a, int64_t k, tk_sym *out)
{
    if (k <= 0)
        return tk_error_set(TK_EINVAL, "symbolic floor division by %lld (the divisor must be > 0)", (long long)k);
    if (!a.expr) {
        *out = TK_SYM(fdiv(a.value, k));
        return 0;
    }
    if (k == 1) {
        *out = a;
        return 0;
    }
    /* (k*Q + R + c) // k = Q + c // k + (R + c % k) // k */
    lin l, q, r;
    lin_init(&l), lin_init(&q), lin_init(&r);
    int rc = lin_add(&l, a, 1);
    if (rc)
        goto done;
    q.c = fdiv(l.c, k);
    r.c = fmod64(l.c, k);
    for (int i = 0; i < l.n && !rc; i++)
        rc = l.t[i].coef % k == 0 ? lin_push(&q, l.t[i].coef / k, l.t[i].atom) : lin_push(&r, l.t[i].coef, l.t[i].atom);
    if (rc)
        goto done;
    if (r.n > 0) {
        /* a common factor g of the rest and k: (g*R') // (g*k') = R' // k' */
        uint64_t g = gcd_u((uint64_t)k, (uint64_t)r.c);
        for (int i = 0; i < r.n; i++)
            g = gcd_u(g, uabs(r.t[i].coef));
        int64_t kk = k / (int64_t)g;
        r.c /= (int64_t)g;
        for (int i = 0; i < r.n; i++)
            r.t[i].coef /= (int64_t)g;
        tk_sym atom;
        if ((rc = floordiv_rest(ctx, &r, kk, &atom)) || (rc = lin_add(&q, atom, 1)))
            goto done;
    }
    if (!(rc = lin_normalize(&q)))
        rc = lin_build(ctx, &q, out);
done:
    lin_release(&l), lin_release(&q), lin_release(&r);
    return rc;
}

static int sym_mod(tk_ctx *ctx, tk_sym a, int64_t k, tk_sym *out)
{
    if (k <= 0)
        return tk_error_set(TK_EINVAL, "symbolic modulo by %lld (the divisor must be > 0)", (long long)k);
    if (!a.expr) {
        *out = TK_SYM(fmod64(a.value, k));
        return 0;
    }
    if (k == 1) {
        *out = TK_SYM(0);
        return 0;
    }
    /* (k*Q + R + c) % k = (R mod k + c mod k) % k, each coefficient taken modulo k */
    lin l, r;
    lin_init(&l), lin_init(&r);
    int rc = lin_add(&l, a, 1);
    if (rc)
        goto done;
    r.c = fmod64(l.c, k);
    for (int i = 0; i < l.n && !rc; i++)
        if (fmod64(l.t[i].coef, k))
            rc = lin_push(&r, fmod64(l.t[i].coef, k), l.t[i].atom);
    if (rc || (rc = lin_normalize(&r)))
        goto done;
    if (r.n == 0) {
        *out = TK_SYM(r.c % k);
        goto done;
    }
    /* a common factor g: (g*R') % (g*k') = g * (R' % k') */
    uint64_t g = gcd_u((uint64_t)k, (uint64_t)r.c);
    for (int i = 0; i < r.n; i++)
        g = gcd_u(g, uabs(r.t[i].coef));
    if (g > 1) {
        tk_sym rest, m;
        r.c /= (int64_t)g;
        for (int i = 0; i < r.n; i++)
            r.t[i].coef /= (int64_t)g;
        if (!(rc = lin_build(ctx, &r, &rest)) && !(rc = sym_mod(ctx, rest, k / (int64_t)g, &m)))
            rc = sym_combine(ctx, m, (int64_t)g, TK_SYM(0), 0, out);
        goto done;
    }
    /* inside one period: x % k = x - q*k */
    rng rr = range_terms(r.c, r.n, r.t);
    if (!rr.sat && fdiv(rr.lo, k) == fdiv(rr.hi, k)) {
        if (__builtin_add_overflow(r.c, -(fdiv(rr.lo, k) * k), &r.c)) {
            rc = overflows();
            goto done;
        }
        rc = lin_build(ctx, &r, out);
        goto done;
    }
    tk_sym inner;
    if ((rc = lin_build(ctx, &r, &inner)))
        goto done;
    if (!inner.expr) {
        *out = TK_SYM(fmod64(inner.value, k));
        goto done;
    }
    /* (x % (k*m)) % k = x % k */
    if (inner.expr->kind == K_MOD && inner.expr->u.div.k % k == 0) {
        rc = sym_mod(ctx, inner.expr->u.div.a, k, out);
        goto done;
    }
    tk_sym_expr key;
    memset(&key, 0, sizeof(key));
    key.kind = K_MOD;
    key.u.div.a = inner;
    key.u.div.k = k;
    rc = atom_build(ctx, &key, out);
done:
    lin_release(&l), lin_release(&r);
    return rc;
}

static int sym_minmax(tk_ctx *ctx, tk_sym a, tk_sym b, int is_max, tk_sym *out)
{
    if (!a.expr && !b.expr) {
        *out = TK_SYM(is_max ? (a.value > b.value ? a.value : b.value) : (a.value < b.value ? a.value : b.value));
        return 0;
    }
    if (same_sym(a, b)) {
        *out = a;
        return 0;
    }
    /* min(min(x, c1), c2) = min(x, min(c1, c2)); min(min(x, y), x) = min(x, y) */
    for (int swap = 0; swap < 2; swap++) {
        tk_sym inner = swap ? b : a, other = swap ? a : b;
        if (!inner.expr || inner.expr->kind != (is_max ? K_MAX : K_MIN))
            continue;
        tk_sym p = inner.expr->u.mm.a, q = inner.expr->u.mm.b;
        if (same_sym(other, p) || same_sym(other, q)) {
            *out = inner;
            return 0;
        }
        if (!other.expr && !q.expr) /* constants sort last: q is the constant one if any */
            return sym_minmax(ctx, p, TK_SYM(is_max ? (q.value > other.value ? q.value : other.value)
                                                    : (q.value < other.value ? q.value : other.value)),
                              is_max, out);
    }
    /* decided by the range of a - b (tighter than the two ranges when they share symbols) */
    lin d;
    lin_init(&d);
    int rc = lin_add(&d, a, 1);
    if (!rc)
        rc = lin_add(&d, b, -1);
    if (!rc)
        rc = lin_normalize(&d);
    int le, ge; /* a <= b, a >= b for every value of the symbols */
    if (rc) {
        /* the difference overflows: the operands' own ranges decide */
        rng ra = range_sym(a), rb = range_sym(b);
        le = ra.hi <= rb.lo;
        ge = ra.lo >= rb.hi;
        tk_error_clear();
    } else {
        rng r = range_terms(d.c, d.n, d.t);
        le = r.hi <= 0;
        ge = r.lo >= 0;
    }
    lin_release(&d);
    if (le || ge) {
        *out = le == is_max ? b : a;
        return 0;
    }
    if (cmp_sym(a, b) > 0) {
        tk_sym t = a;
        a = b;
        b = t;
    }
    tk_sym_expr key;
    memset(&key, 0, sizeof(key));
    key.kind = is_max ? K_MAX : K_MIN;
    key.u.mm.a = a;
    key.u.mm.b = b;
    return atom_build(ctx, &key, out);
}

/* a * b: by a constant, a linear combination; two symbolic factors, a product atom (their
 * coefficients pulled out: (2*batch)*seq is 2*(batch*seq); factors in canonical order). */
static int sym_mul_sym(tk_ctx *ctx, tk_sym a, tk_sym b, tk_sym *out)
{
    if (!a.expr || !b.expr) {
        tk_sym x = a.expr ? a : b;
        int64_t k = a.expr ? b.value : a.value;
        if (!x.expr) {
            int64_t v;
            if (__builtin_mul_overflow(a.value, b.value, &v))
                return overflows();
            *out = TK_SYM(v);
            return 0;
        }
        return sym_combine(ctx, x, k, TK_SYM(0), 0, out);
    }
    int64_t k = 1;
    tk_sym f[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const tk_sym_expr *e = f[i].expr;
        if (e->kind == K_LIN && e->u.lin.n == 1 && e->u.lin.c == 0) {
            if (__builtin_mul_overflow(k, e->u.lin.terms[0].coef, &k))
                return overflows();
            f[i] = (tk_sym){TK_SYM_DYNAMIC_VALUE, e->u.lin.terms[0].atom};
        }
    }
    if (cmp_sym(f[0], f[1]) > 0) {
        tk_sym t = f[0];
        f[0] = f[1];
        f[1] = t;
    }
    tk_sym_expr key;
    memset(&key, 0, sizeof(key));
    key.kind = K_MUL;
    key.u.mm.a = f[0];
    key.u.mm.b = f[1];
    tk_sym prod;
    int rc = atom_build(ctx, &key, &prod);
    if (rc || k == 1) {
        *out = prod;
        return rc;
    }
    return sym_combine(ctx, prod, k, TK_SYM(0), 0, out);
}

/* --- the public arithmetic: TK_SYM(-1) and the error set on failure ---------------------------- */

static tk_sym result(int rc, tk_sym s) { return rc ? TK_SYM(-1) : s; }

tk_sym tk_sym_add(tk_ctx *ctx, tk_sym a, tk_sym b)
{
    tk_sym s = TK_SYM(0);
    if (!a.expr && !b.expr) {
        int64_t v;
        return __builtin_add_overflow(a.value, b.value, &v) ? result(overflows(), s) : TK_SYM(v);
    }
    return result(sym_combine(ctx, a, 1, b, 1, &s), s);
}

tk_sym tk_sym_sub(tk_ctx *ctx, tk_sym a, tk_sym b)
{
    tk_sym s = TK_SYM(0);
    if (!a.expr && !b.expr) {
        int64_t v;
        return __builtin_sub_overflow(a.value, b.value, &v) ? result(overflows(), s) : TK_SYM(v);
    }
    return result(sym_combine(ctx, a, 1, b, -1, &s), s);
}

tk_sym tk_sym_mul(tk_ctx *ctx, tk_sym a, int64_t k)
{
    tk_sym s = TK_SYM(0);
    if (!a.expr) {
        int64_t v;
        return __builtin_mul_overflow(a.value, k, &v) ? result(overflows(), s) : TK_SYM(v);
    }
    return result(sym_combine(ctx, a, k, TK_SYM(0), 0, &s), s);
}

tk_sym tk_sym_mul_sym(tk_ctx *ctx, tk_sym a, tk_sym b)
{
    tk_sym s = TK_SYM(0);
    return result(sym_mul_sym(ctx, a, b, &s), s);
}

tk_sym tk_sym_floordiv(tk_ctx *ctx, tk_sym a, int64_t k)
{
    tk_sym s = TK_SYM(0);
    return result(sym_floordiv(ctx, a, k, &s), s);
}

tk_sym tk_sym_mod(tk_ctx *ctx, tk_sym a, int64_t k)
{
    tk_sym s = TK_SYM(0);
    return result(sym_mod(ctx, a, k, &s), s);
}

tk_sym tk_sym_min(tk_ctx *ctx, tk_sym a, tk_sym b)
{
    tk_sym s = TK_SYM(0);
    return result(sym_minmax(ctx, a, b, 0, &s), s);
}

tk_sym tk_sym_max(tk_ctx *ctx, tk_sym a, tk_sym b)
{
    tk_sym s = TK_SYM(0);
    return result(sym_minmax(ctx, a, b, 1, &s), s);
}

/* --- symbols ---------------------------------------------------------------------------------- */

static int is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

tk_sym tk_sym_var(tk_ctx *ctx, const char *name, int64_t min, int64_t max)
{
    if (!name || !is_ident_start(name[0])) {
        tk_error_set(TK_EINVAL, "symbol name '%s' is not an identifier", name ? name : "");
        return TK_SYM(-1);
    }
    for (const char *c = name; *c; c++) {
        if (!is_ident_char(*c)) {
            tk_error_set(TK_EINVAL, "symbol name '%s' is not an identifier", name);
            return TK_SYM(-1);
        }
    }
    if (min > max) {
        tk_error_set(TK_EINVAL, "symbol '%s' has an empty range [%lld, %lld]", name, (long long)min, (long long)max);
        return TK_SYM(-1);
    }
    tk_sym_pool *p = ctx_pool(ctx);
    if (!p)
        return TK_SYM(-1);
    size_t n = strlen(name) + 1;
    tk_sym_expr *e = pool_alloc(p, sizeof(*e));
    char *copy = e ? pool_alloc(p, n) : NULL;
    if (!copy) {
        tk_error_set(TK_ENOMEM, "out of memory");
        return TK_SYM(-1);
    }
    memcpy(copy, name, n);
    memset(e, 0, sizeof(*e));
    e->kind = K_VAR;
    e->u.var.name = copy;
    e->u.var.min = min;
    e->u.var.max = max;
    e->u.var.id = p->next_id++;
    return (tk_sym){TK_SYM_DYNAMIC_VALUE, e};
}

int tk_sym_as_var(tk_sym s, const char **name, int64_t *min, int64_t *max)
{
    if (!s.expr || s.expr->kind != K_VAR)
        return 0;
    if (name)
        *name = s.expr->u.var.name;
    if (min)
        *min = s.expr->u.var.min;
    if (max)
        *max = s.expr->u.var.max;
    return 1;
}

int tk_sym_narrow(tk_sym var, int64_t min, int64_t max)
{
    if (!var.expr || var.expr->kind != K_VAR)
        return tk_error_set(TK_EINVAL, "tk_sym_narrow: not a symbol");
    tk_sym_expr *e = (tk_sym_expr *)var.expr; /* the pool's node: ranges are mutable */
    int64_t lo = min > e->u.var.min ? min : e->u.var.min, hi = max < e->u.var.max ? max : e->u.var.max;
    if (lo > hi)
        return tk_error_set(TK_EINVAL, "the range of '%s' would be empty: [%lld, %lld] narrowed to [%lld, %lld]",
                            e->u.var.name, (long long)e->u.var.min, (long long)e->u.var.max, (long long)min,
                            (long long)max);
    e->u.var.min = lo;
    e->u.var.max = hi;
    return 0;
}

int tk_sym_equal(tk_sym a, tk_sym b) { return same_sym(a, b); }

int tk_sym_as_linear1(tk_sym s, tk_sym *var, int64_t *k, int64_t *c)
{
    const tk_sym_expr *v = NULL;
    int64_t kk = 1, cc = 0;
    if (!s.expr)
        return 0;
    if (s.expr->kind == K_VAR) {
        v = s.expr;
    } else if (s.expr->kind == K_LIN && s.expr->u.lin.n == 1 && s.expr->u.lin.terms[0].atom->kind == K_VAR) {
        v = s.expr->u.lin.terms[0].atom;
        kk = s.expr->u.lin.terms[0].coef;
        cc = s.expr->u.lin.c;
    } else {
        return 0;
    }
    if (var)
        *var = (tk_sym){TK_SYM_DYNAMIC_VALUE, v};
    if (k)
        *k = kk;
    if (c)
        *c = cc;
    return 1;
}

/* --- evaluation ------------------------------------------------------------------------------- */

static int eval_sym(tk_sym s, const char *const *names, const int64_t *values, int n, int64_t *out);

static int eval_node(const tk_sym_expr *e, const char *const *names, const int64_t *values, int n, int64_t *out)
{
    int64_t a, b, v;
    int rc;
    switch (e->kind) {
    case K_VAR:
        for (int i = 0; i < n; i++) {
            if (names[i] && strcmp(names[i], e->u.var.name) == 0) {
                *out = values[i];
                return 0;
            }
        }
        return tk_error_set(TK_EINVAL, "symbol '%s' has no value", e->u.var.name);
    case K_LIN:
        a = e->u.lin.c;
        for (int i = 0; i < e->u.lin.n; i++) {
            if ((rc = eval_node(e->u.lin.terms[i].atom, names, values, n, &b)))
                return rc;
            if (__builtin_mul_overflow(b, e->u.lin.terms[i].coef, &v) || __builtin_add_overflow(a, v, &a))
                return overflows();
        }
        *out = a;
        return 0;
    case K_FLOORDIV:
    case K_MOD:
        if ((rc = eval_sym(e->u.div.a, names, values, n, &a)))
            return rc;
        *out = e->kind == K_FLOORDIV ? fdiv(a, e->u.div.k) : fmod64(a, e->u.div.k);
        return 0;
    case K_MIN:
    case K_MAX:
        if ((rc = eval_sym(e->u.mm.a, names, values, n, &a)) || (rc = eval_sym(e->u.mm.b, names, values, n, &b)))
            return rc;
        *out = (e->kind == K_MIN) == (a < b) ? a : b;
        return 0;
    case K_MUL:
        if ((rc = eval_sym(e->u.mm.a, names, values, n, &a)) || (rc = eval_sym(e->u.mm.b, names, values, n, &b)))
            return rc;
        return __builtin_mul_overflow(a, b, out) ? overflows() : 0;
    }
    return tk_error_set(TK_EINTERNAL, "bad symbolic expression node");
}

static int eval_sym(tk_sym s, const char *const *names, const int64_t *values, int n, int64_t *out)
{
    if (!s.expr) {
        *out = s.value;
        return 0;
    }
    return eval_node(s.expr, names, values, n, out);
}

int tk_sym_eval(tk_sym s, const char *const *names, const int64_t *values, int n, int64_t *out)
{
    int64_t v = 0;
    int rc = eval_sym(s, names, values, n, &v);
    if (!rc && out)
        *out = v;
    return rc;
}

/* --- printing --------------------------------------------------------------------------------- */

static int print_sym(tk_strbuf *sb, tk_sym s);

/* A constant as text the parser reads back: INT64_MIN has no literal of its own (its magnitude is
 * past INT64_MAX), so it is written as a difference. */
static int print_const(tk_strbuf *sb, int64_t v)
{
    if (v == INT64_MIN)
        return tk_strbuf_addf(sb, "(%lld - 1)", (long long)-INT64_MAX);
    return tk_strbuf_addf(sb, "%lld", (long long)v);
}

/* An atom as an operand of `k*`, of unary minus or of // and %: parentheses around anything that
 * would bind differently (Python: 2*x // 4 is (2*x) // 4). */
static int print_node(tk_strbuf *sb, const tk_sym_expr *e, int tight)
{
    int rc;
    if (tight && e->kind != K_VAR && e->kind != K_MIN && e->kind != K_MAX) {
        if ((rc = tk_strbuf_adds(sb, "(")) || (rc = print_node(sb, e, 0)))
            return rc;
        return tk_strbuf_adds(sb, ")");
    }
    switch (e->kind) {
    case K_VAR:
        return tk_strbuf_adds(sb, e->u.var.name);
    case K_FLOORDIV:
    case K_MOD:
        if (e->u.div.a.expr)
            rc = print_node(sb, e->u.div.a.expr, 1);
        else
            rc = print_const(sb, e->u.div.a.value);
        return rc ? rc : tk_strbuf_addf(sb, " %s %lld", e->kind == K_FLOORDIV ? "//" : "%", (long long)e->u.div.k);
    case K_MIN:
    case K_MAX:
        if ((rc = tk_strbuf_adds(sb, e->kind == K_MIN ? "min(" : "max(")) || (rc = print_sym(sb, e->u.mm.a)) ||
            (rc = tk_strbuf_adds(sb, ", ")) || (rc = print_sym(sb, e->u.mm.b)))
            return rc;
        return tk_strbuf_adds(sb, ")");
    case K_MUL: /* operands that are not atoms in parentheses: "batch*seq", "(batch + 1)*seq" */
        if ((rc = e->u.mm.a.expr ? print_node(sb, e->u.mm.a.expr, e->u.mm.a.expr->kind == K_LIN)
                                 : print_const(sb, e->u.mm.a.value)) ||
            (rc = tk_strbuf_adds(sb, "*")))
            return rc;
        return e->u.mm.b.expr ? print_node(sb, e->u.mm.b.expr, e->u.mm.b.expr->kind != K_VAR &&
                                                                   e->u.mm.b.expr->kind != K_MIN &&
                                                                   e->u.mm.b.expr->kind != K_MAX)
                              : print_const(sb, e->u.mm.b.value);
    case K_LIN:
        for (int i = 0; i < e->u.lin.n; i++) {
            int64_t k = e->u.lin.terms[i].coef;
            uint64_t mag = uabs(k);
            if (k == INT64_MIN)
                rc = (i ? tk_strbuf_adds(sb, " + ") : 0) || print_const(sb, k) || tk_strbuf_adds(sb, "*");
            else if (i == 0)
                rc = k == 1 ? 0 : k == -1 ? tk_strbuf_adds(sb, "-") : tk_strbuf_addf(sb, "%lld*", (long long)k);
            else if (mag == 1)
                rc = tk_strbuf_adds(sb, k < 0 ? " - " : " + ");
            else
                rc = tk_strbuf_addf(sb, "%s%llu*", k < 0 ? " - " : " + ", (unsigned long long)mag);
            if (rc || (rc = print_node(sb, e->u.lin.terms[i].atom, i == 0 ? k != 1 : mag != 1)))
                return rc;
        }
        if (e->u.lin.c == INT64_MIN)
            return tk_strbuf_adds(sb, " + ") || print_const(sb, e->u.lin.c);
        if (e->u.lin.c)
            return tk_strbuf_addf(sb, "%s%llu", e->u.lin.c < 0 ? " - " : " + ", (unsigned long long)uabs(e->u.lin.c));
        return 0;
    }
    return 0;
}

static int print_sym(tk_strbuf *sb, tk_sym s)
{
    if (!s.expr)
        return print_const(sb, s.value);
    return print_node(sb, s.expr, 0);
}

int tk_sym_print(tk_sym s, tk_strbuf *sb)
{
    if (!sb)
        return tk_error_set(TK_EINVAL, "tk_sym_print: no buffer");
    return print_sym(sb, s) ? tk_error_set(TK_ENOMEM, "out of memory") : 0;
}

/* --- parsing: Python's precedence; products and divisions by constants only ------------------- */

typedef struct parser {
    tk_ctx *ctx;
    const char *text, *p;
    const char *const *names;
    const tk_sym *vars;
    int n, depth;
} parser;

enum { PARSE_MAX_DEPTH = 200 };

static int parse_fail(parser *ps, const char *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int parse_fail(parser *ps, const char *at, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    /* a long text is cut: the message stays one readable line */
    size_t len = strlen(ps->text);
    return tk_error_set(TK_EINVAL, "bad symbolic expression '%.*s%s': %s at column %d", len > 80 ? 60 : (int)len,
                        ps->text, len > 80 ? "..." : "", what, (int)(at - ps->text) + 1);
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

static int parse_expr(parser *ps, tk_sym *out);

/* A failed tk_sym_* call reports its own error; the position goes with it. */
static int arith_rc(parser *ps, const char *at, int rc)
{
    if (!rc)
        return 0;
    char why[512];
    snprintf(why, sizeof(why), "%s", tk_error_last());
    parse_fail(ps, at, "%s", why);
    return rc;
}

static int parse_primary(parser *ps, tk_sym *out)
{
    int rc;
    skip_ws(ps);
    const char *at = ps->p;
    if (*at >= '0' && *at <= '9') {
        uint64_t v = 0;
        for (; *ps->p >= '0' && *ps->p <= '9'; ps->p++) {
            if (v > ((uint64_t)INT64_MAX - (uint64_t)(*ps->p - '0')) / 10)
                return parse_fail(ps, at, "integer too large");
            v = v * 10 + (uint64_t)(*ps->p - '0');
        }
        *out = TK_SYM((int64_t)v);
        return 0;
    }
    if (*at == '(') {
        ps->p++;
        if ((rc = parse_expr(ps, out)))
            return rc;
        skip_ws(ps);
        if (*ps->p != ')')
            return parse_fail(ps, ps->p, "expected ')'");
        ps->p++;
        return 0;
    }
    if (is_ident_start(*at)) {
        while (is_ident_char(*ps->p))
            ps->p++;
        size_t len = (size_t)(ps->p - at);
        const char *after = ps->p;
        skip_ws(ps);
        if (*ps->p == '(' && len == 3 && (strncmp(at, "min", 3) == 0 || strncmp(at, "max", 3) == 0)) {
            int is_max = at[1] == 'a';
            ps->p++;
            tk_sym acc, next;
            if ((rc = parse_expr(ps, &acc)))
                return rc;
            int nargs = 1;
            for (;;) {
                skip_ws(ps);
                if (*ps->p == ')') {
                    ps->p++;
                    break;
                }
                if (*ps->p != ',')
                    return parse_fail(ps, ps->p, "expected ',' or ')'");
                ps->p++;
                if ((rc = parse_expr(ps, &next)))
                    return rc;
                if ((rc = arith_rc(ps, at, sym_minmax(ps->ctx, acc, next, is_max, &acc))))
                    return rc;
                nargs++;
            }
            if (nargs < 2)
                return parse_fail(ps, at, "%s( takes at least 2 arguments", is_max ? "max" : "min");
            *out = acc;
            return 0;
        }
        ps->p = after;
        for (int i = 0; i < ps->n; i++) {
            if (ps->names[i] && strlen(ps->names[i]) == len && strncmp(ps->names[i], at, len) == 0) {
                *out = ps->vars[i];
                return 0;
            }
        }
        return parse_fail(ps, at, "unknown symbol '%.*s'", (int)len, at);
    }
    if (!*at)
        return parse_fail(ps, at, "unexpected end, expected a number, a name, min(, max( or (");
    return parse_fail(ps, at, "unexpected '%c', expected a number, a name, min(, max( or (", *at);
}

static int parse_unary(parser *ps, tk_sym *out)
{
    skip_ws(ps);
    if (++ps->depth > PARSE_MAX_DEPTH)
        return parse_fail(ps, ps->p, "expression nested too deeply");
    int rc;
    if (*ps->p == '-') {
        const char *at = ps->p++;
        tk_sym v;
        if (!(rc = parse_unary(ps, &v)))
            rc = arith_rc(ps, at, sym_combine(ps->ctx, v, -1, TK_SYM(0), 0, out));
    } else if (*ps->p == '+') {
        ps->p++;
        rc = parse_unary(ps, out);
    } else {
        rc = parse_primary(ps, out);
    }
    ps->depth--;
    return rc;
}

static int parse_term(parser *ps, tk_sym *out)
{
    tk_sym acc, rhs;
    int rc = parse_unary(ps, &acc);
    while (!rc) {
        skip_ws(ps);
        const char *at = ps->p;
        int op;
        if (at[0] == '/' && at[1] == '/')
            op = '/', ps->p += 2;
        else if (at[0] == '*' || at[0] == '%')
            op = at[0], ps->p++;
        else
            break;
        if ((rc = parse_unary(ps, &rhs)))
            break;
        if (op == '*') {
            rc = arith_rc(ps, at, sym_mul_sym(ps->ctx, acc, rhs, &acc));
        } else {
            if (rhs.expr)
                return parse_fail(ps, at, "'%s' by a symbolic expression (the divisor must be a constant)",
                                  op == '/' ? "//" : "%");
            if (rhs.value <= 0)
                return parse_fail(ps, at, "'%s' by %lld (the divisor must be > 0)", op == '/' ? "//" : "%",
                                  (long long)rhs.value);
            rc = arith_rc(ps, at, op == '/' ? sym_floordiv(ps->ctx, acc, rhs.value, &acc)
                                            : sym_mod(ps->ctx, acc, rhs.value, &acc));
        }
    }
    if (!rc)
        *out = acc;
    return rc;
}

static int parse_expr(parser *ps, tk_sym *out)
{
    tk_sym acc, rhs;
    int rc = parse_term(ps, &acc);
    while (!rc) {
        skip_ws(ps);
        const char *at = ps->p;
        if (*at != '+' && *at != '-')
            break;
        ps->p++;
        if ((rc = parse_term(ps, &rhs)))
            break;
        rc = arith_rc(ps, at, sym_combine(ps->ctx, acc, 1, rhs, *at == '+' ? 1 : -1, &acc));
    }
    if (!rc)
        *out = acc;
    return rc;
}

int tk_sym_parse(tk_ctx *ctx, const char *text, const char *const *names, const tk_sym *vars, int n, tk_sym *out)
{
    if (!text)
        return tk_error_set(TK_EINVAL, "tk_sym_parse: no text");
    parser ps = {ctx, text, text, names, vars, n, 0};
    tk_sym s;
    int rc = parse_expr(&ps, &s);
    if (rc)
        return rc;
    skip_ws(&ps);
    if (*ps.p)
        return parse_fail(&ps, ps.p, "unexpected '%c' after the expression", *ps.p);
    if (out)
        *out = s;
    return 0;
}
