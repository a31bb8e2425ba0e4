/* Cross-file resolution: links the per-file summaries by USR and computes, for every op, the
 * kernels its tk_wrap launches can denote, following values through locals, parameters (with
 * the caller's arguments: context-sensitive), returns, struct fields (field-sensitive), tables,
 * function pointers, file-scope variables and op-to-op calls, to a bounded depth in function
 * hops. What it cannot follow is reported per op with the reason. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "fsutil.h"
#include "internal.h"
#include "strbuf.h"
#include "tunespec.h"
#include <tk/op.h>
#include <tk/error.h>

/* Evaluation steps allowed per op: context-sensitive evaluation can multiply paths, and the
 * analyzer must stay bounded on any input. */
#define STEP_BUDGET 400000

typedef struct fninfo fninfo;

typedef struct callsite {
    fninfo *caller;
    cJSON *call; /* {line,col,f,a} */
} callsite;

struct fninfo {
    cJSON *node;
    const char *usr, *name, *file, *op;
    int may_launch;
    callsite *callers;
    size_t ncallers, capcallers;
};

typedef struct globinfo {
    cJSON **facts;      /* initializers and whole assignments */
    const char **files;
    size_t n, cap;
    const char *name;
    fninfo **touch;     /* functions that store below it, point at it or pass it on */
    size_t ntouch, captouch;
} globinfo;

typedef struct linker {
    fninfo *fns;
    size_t nfns;
    globinfo *globs;
    size_t nglobs;
    tk_map fn_by_usr, op_by_name, glob_by_usr, kernel_by_name, kernel_file;
    tk_map idents_by_file; /* file path -> the identifiers its code uses (kernel files) */
    int max_depth;
} linker;

/* A function activation: the function, the arguments of the call that reached it (NULL when
 * reached without a call, as for an op or an initializer) and the caller's frame they are
 * evaluated in. `up` is the chain of activations being explored, for cycle detection. */
typedef struct frame {
    fninfo *fn; /* NULL: file scope */
    const char *file;
    cJSON *args;
    struct frame *caller;
    struct frame *up;
    int depth;
} frame;

typedef enum vkind { V_KERNEL, V_FUNC, V_AGG, V_UNKNOWN, V_NULL, V_INPUT } vkind;

/* What an expression can denote. V_NULL is a value that is no kernel but is known (NULL, a
 * zero-initialized field, an op's ctx or out); V_INPUT is in[idx] of the op `fn` (idx -1: an
 * index that is not constant), for the mutation check. */
typedef struct value {
    vkind kind;
    const char *s;     /* kernel name, function usr, or the reason of an unknown */
    cJSON *agg;        /* V_AGG: ["rec",{..}] or ["arr",[..],[..]] */
    frame *where;      /* V_AGG: where its elements are evaluated */
    const char *file;  /* V_UNKNOWN: where resolution stopped (line 0: the launch's kernel expression) */
    int line, col;
    const fninfo *fn;  /* V_INPUT: the op */
    int idx;           /* V_INPUT: the input */
    const char *name;  /* V_FUNC: the function's name as written (its USR is s) */
} value;

typedef struct vset {
    value *v;
    size_t n, cap;
} vset;

/* An access path below a variable: fields and indices (index -1: any element), outermost
 * first. p->f and (*p).f and p[0].f are one path: pointers are looked through. */
typedef struct sel {
    const char *field; /* NULL: an index */
    long long index;
    const struct sel *next;
} sel;

/* Memory of one op's resolution, freed at once. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used;
    char data[];
} arena_block;

typedef struct opctx {
    linker *lk;
    arena_block *arena;
    long steps;
    int oom;
    long cuts;         /* evaluations cut short by a cycle or a repeated recursion */
    /* locations under evaluation, to cut cyclic assignments */
    const void *busy_frame[256];
    const char *busy_key[256];
    int nbusy;
    /* results */
    cJSON *kernels;    /* name -> via array */
    cJSON *unresolved; /* array of {file,line,reason} */
    cJSON *diags;      /* lint findings, NULL when not linting */
    fninfo *op;
    cJSON *temps;      /* expressions made during resolution (variables as roots), freed at once */
    tk_map reached;    /* usr -> fninfo of every function resolution consulted (source closure) */
} opctx;

#define ARENA_BLOCK (64u << 10)

static void *arena_alloc(opctx *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!c->arena || c->arena->used + n > ARENA_BLOCK) {
        size_t sz = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        arena_block *b = malloc(sizeof(*b) + sz);
        if (!b) {
            c->oom = 1;
            return NULL;
        }
        b->next = c->arena;
        b->used = 0;
        c->arena = b;
    }
    void *p = c->arena->data + c->arena->used;
    c->arena->used += n;
    return p;
}

static const char *arena_printf(opctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static const char *arena_printf(opctx *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *p = arena_alloc(c, strlen(buf) + 1);
    if (p)
        strcpy(p, buf);
    return p ? p : "unknown value: out of memory";
}

static int same_value(const value *w, const value *v)
{
    /* aggregates of file-scope initializers are the same whatever frame read them */
    const frame *wf = w->where, *vf = v->where;
    int same_where = wf == vf || (wf && vf && !wf->fn && !vf->fn);
    return w->kind == v->kind && w->agg == v->agg && same_where && w->line == v->line && w->fn == v->fn &&
           w->idx == v->idx && strcmp(w->s ? w->s : "", v->s ? v->s : "") == 0;
}

static int vs_has(const vset *s, const value *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (same_value(&s->v[i], v))
            return 1;
    return 0;
}

/* A function value's name for messages: as written, else the tail of its USR. */
static const char *func_name(const value *v)
{
    const char *at = strrchr(v->s, '@');
    return v->name ? v->name : at ? at + 1 : v->s;
}

static void vs_add(opctx *c, vset *s, value v)
{
    if (vs_has(s, &v))
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        value *nv = arena_alloc(c, cap * sizeof(*nv));
        if (!nv)
            return;
        if (s->n)
            memcpy(nv, s->v, s->n * sizeof(*nv));
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
}

static void vs_merge(opctx *c, vset *into, const vset *from)
{
    for (size_t i = 0; i < from->n; i++)
        vs_add(c, into, from->v[i]);
}

static value unknown_at(const char *reason, const char *file, int line, int col)
{
    value v = {V_UNKNOWN, reason, NULL, NULL, file, line, col, NULL, 0, NULL};
    return v;
}

static value simple(vkind kind, const char *s)
{
    value v = {kind, s, NULL, NULL, NULL, 0, 0, NULL, 0, NULL};
    return v;
}

static frame *new_frame(opctx *c, fninfo *fn, cJSON *args, frame *caller, frame *up, int depth)
{
    frame *f = arena_alloc(c, sizeof(*f));
    if (!f)
        return NULL;
    /* every function resolution consults is part of the op's source closure */
    if (fn && !tk_map_get(&c->reached, fn->usr) && tk_map_put(&c->reached, fn->usr, fn))
        c->oom = 1;
    f->fn = fn;
    f->file = fn ? fn->file : (up ? up->file : NULL);
    f->args = args;
    f->caller = caller;
    f->up = up;
    f->depth = depth;
    return f;
}

static int on_chain(const frame *f, const fninfo *fn)
{
    for (; f; f = f->up)
        if (f->fn == fn)
            return 1;
    return 0;
}

static const char *tag(const cJSON *e) { return cJSON_IsArray(e) && cJSON_IsString(e->child) ? e->child->valuestring : ""; }
static cJSON *arg(const cJSON *e, int i) { return cJSON_GetArrayItem(e, i); }
static int line_of(const cJSON *o) { return tk_json_int(o, "line", 0); }
static int col_of(const cJSON *o) { return tk_json_int(o, "col", 0); }

static void evalp(opctx *c, const cJSON *e, const sel *path, frame *f, vset *out);

static void eval(opctx *c, const cJSON *e, frame *f, vset *out) { evalp(c, e, NULL, f, out); }

/* --- access paths ---------------------------------------------------------------------------- */

static const sel *sel_push(opctx *c, const char *field, long long index, const sel *next)
{
    sel *s = arena_alloc(c, sizeof(*s));
    if (!s)
        return next;
    s->field = field;
    s->index = index;
    s->next = next;
    return s;
}

/* The variable an lvalue expression is rooted in: ["l"], ["p"] or ["g"] below its fields and
 * indices, or NULL. */
static const cJSON *root_node(const cJSON *e)
{
    for (int guard = 0; guard < 64 && (!strcmp(tag(e), "m") || !strcmp(tag(e), "i")); guard++)
        e = arg(e, 1);
    const char *t = tag(e);
    return !strcmp(t, "l") || !strcmp(t, "p") || !strcmp(t, "g") ? e : NULL;
}

/* The variable an lvalue expression is rooted in (["l"], ["p"] or ["g"]) and, in *path, the
 * fields and indices below it; NULL when it is rooted in something else (a call's result...). */
static const cJSON *root_of(opctx *c, const cJSON *e, const sel **path)
{
    const cJSON *chain[64];
    int n = 0;
    while ((!strcmp(tag(e), "m") || !strcmp(tag(e), "i")) && n < 64) {
        chain[n++] = e;
        e = arg(e, 1);
    }
    const char *t = tag(e);
    if (strcmp(t, "l") && strcmp(t, "p") && strcmp(t, "g"))
        return NULL;
    const sel *p = *path;
    for (int i = 0; i < n; i++) { /* innermost selector first, so the list reads outermost first */
        const cJSON *x = chain[i];
        if (!strcmp(tag(x), "m"))
            p = sel_push(c, arg(x, 2)->valuestring, 0, p);
        else
            p = sel_push(c, NULL, cJSON_IsNumber(arg(x, 2)) ? (long long)arg(x, 2)->valuedouble : -1, p);
    }
    *path = p;
    return e;
}

static int same_root(const cJSON *a, const cJSON *b)
{
    const char *ta = tag(a);
    if (strcmp(ta, tag(b)))
        return 0;
    if (ta[0] == 'p')
        return arg(a, 1)->valueint == arg(b, 1)->valueint;
    return !strcmp(arg(a, 1)->valuestring, arg(b, 1)->valuestring); /* local id, global usr */
}

/* Whether a store (or an argument) at path `s` below a variable reaches what a read at path `p`
 * below it sees; *rest is what the read selects below the stored value. A store below the
 * read's path through indices only is the same memory (*out = k and out[0] = k). */
static int path_match(const sel *s, const sel *p, const sel **rest)
{
    for (; s && p; s = s->next, p = p->next) {
        if (!s->field != !p->field)
            return 0;
        if (s->field ? strcmp(s->field, p->field) != 0 : (s->index >= 0 && p->index >= 0 && s->index != p->index))
            return 0;
    }
    for (; s; s = s->next)
        if (s->field)
            return 0;
    *rest = p;
    return 1;
}

static void path_text(const sel *p, char *buf, size_t size)
{
    for (; p; p = p->next) {
        size_t n = strlen(buf);
        if (p->field)
            snprintf(buf + n, size - n, ".%s", p->field);
        else if (p->index >= 0)
            snprintf(buf + n, size - n, "[%lld]", p->index);
        else
            snprintf(buf + n, size - n, "[*]");
    }
}

/* --- cycles, depth, recursion ------------------------------------------------------------- */

static int busy_enter(opctx *c, const void *fr, const char *key)
{
    for (int i = 0; i < c->nbusy; i++)
        if (c->busy_frame[i] == fr && strcmp(c->busy_key[i], key) == 0) {
            c->cuts++;
            return 0;
        }
    if (c->nbusy == 256) {
        c->cuts++;
        return 0;
    }
    c->busy_frame[c->nbusy] = fr;
    c->busy_key[c->nbusy] = key;
    c->nbusy++;
    return 1;
}

static void busy_leave(opctx *c) { c->nbusy--; }

/* A key for a location under evaluation: kind, variable and path. */
static const char *loc_key(opctx *c, const char *kind, const char *var, const sel *path)
{
    char p[512] = "";
    path_text(path, p, sizeof p);
    return arena_printf(c, "%s:%s%s", kind, var, p);
}

static value depth_limit(opctx *c, frame *f, const char *target, int line, int col)
{
    const char *last = f && f->fn ? f->fn->name : "file scope";
    return unknown_at(arena_printf(c, "depth limit: stopped after %d function hops in '%s' before '%s' (raise --max-depth)",
                                   c->lk->max_depth, last, target),
                      f ? f->file : NULL, line, col);
}

/* Whether calling fn from frame f with args can bring values that no activation of fn already
 * on the path has: recursion is entered again with new contexts (bounded by the depth), and
 * cut where it would repeat one. */
static int new_context(opctx *c, frame *f, const fninfo *fn, cJSON *args)
{
    if (!on_chain(f, fn))
        return 1;
    for (frame *g = f; args && g; g = g->up) {
        if (g->fn != fn)
            continue;
        if (!g->args || !g->caller)
            break; /* reached without a call: its parameters already take every caller's values */
        int covered = 1;
        for (int j = 0; covered && j < cJSON_GetArraySize(args); j++) {
            vset now = {0}, before = {0};
            eval(c, arg(args, j), f, &now);
            eval(c, arg(g->args, j), g->caller, &before);
            for (size_t i = 0; covered && i < now.n; i++)
                covered = vs_has(&before, &now.v[i]);
        }
        if (covered)
            break;
        if (!on_chain(g->up, fn))
            return 1; /* no activation on the path has these values */
    }
    c->cuts++;
    return 0;
}

/* --- evaluation ------------------------------------------------------------------------------ */

static int stores_in(opctx *c, const cJSON *root, const sel *path, frame *f, vset *out);

static void eval_local(opctx *c, const cJSON *e, const sel *path, frame *f, vset *out)
{
    if (!f || !f->fn)
        return;
    const char *id = arg(e, 1)->valuestring;
    const char *key = loc_key(c, "l", id, path);
    if (!busy_enter(c, f, key))
        return;
    long cuts = c->cuts;
    vset here = {0};
    int facts = 0;
    cJSON *locals = cJSON_GetObjectItemCaseSensitive(f->fn->node, "locals"), *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(locals, id))
    {
        evalp(c, a, path, f, &here);
        facts++;
    }
    facts += stores_in(c, e, path, f, &here);
    busy_leave(c);
    cJSON *esc;
    cJSON_ArrayForEach(esc, cJSON_GetObjectItemCaseSensitive(f->fn->node, "escapes"))
    {
        /* its address was kept where stores through it are not followed: say what may be missing */
        if (strcmp(tk_json_str(esc, "v", ""), id) != 0)
            continue;
        cJSON *nm = arg(e, 2);
        vs_add(c, &here, unknown_at(arena_printf(c, "unknown value: the address of '%s' is stored %s, and what is stored through it is not followed",
                                                 cJSON_IsString(nm) ? nm->valuestring : "?", tk_json_str(esc, "into", "")),
                                    f->file, line_of(esc), col_of(esc)));
        facts++;
    }
    if (!here.n && cuts == c->cuts && !c->oom) {
        /* nothing at all: never assigned, or stored only where the analyzer does not look */
        cJSON *nm = arg(e, 2);
        char what[600];
        snprintf(what, sizeof what, "%s", cJSON_IsString(nm) ? nm->valuestring : "?");
        path_text(path, what, sizeof what);
        vs_add(c, &here, unknown_at(facts || path ? arena_printf(c, "unknown value: no value the analyzer follows is stored in '%s' (a local of '%s')", what, f->fn->name)
                                                  : arena_printf(c, "unknown value: local '%s' of '%s' is declared without a value and never assigned", what, f->fn->name),
                                    f->file, 0, 0));
    }
    vs_merge(c, out, &here);
}

static void eval_param(opctx *c, const cJSON *e, const sel *path, frame *f, int line, vset *out)
{
    if (!f || !f->fn)
        return;
    int idx = arg(e, 1)->valueint;
    fninfo *fn = f->fn;
    if (fn->op && !f->args) {
        /* an op's own parameters (ctx, in, out): in[K] is an input, the rest holds no kernel */
        value v = simple(idx == 1 ? V_INPUT : V_NULL, NULL);
        if (idx == 1) {
            v.fn = fn;
            v.idx = path && !path->field ? (int)path->index : -1;
        }
        vs_add(c, out, v);
        return;
    }
    char id[16];
    snprintf(id, sizeof(id), "p%d", idx);
    const char *key = loc_key(c, "p", id, path);
    if (!busy_enter(c, f, key))
        return;
    cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fn->node, "locals"), id))
        evalp(c, a, path, f, out); /* assignments to the parameter inside the function */
    stores_in(c, e, path, f, out); /* stores through it, here and in the functions it is passed to */
    busy_leave(c);
    if (f->args) {
        /* context-sensitive: the argument of the call that reached this activation */
        cJSON *a2 = cJSON_GetArrayItem(f->args, idx);
        if (a2 && f->caller)
            evalp(c, a2, path, f->caller, out);
        return;
    }
    if (fn->ncallers == 0) {
        cJSON *pn = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(fn->node, "params"), idx);
        vs_add(c, out, unknown_at(arena_printf(c, "unknown value: parameter '%s' of '%s' has no caller in the scanned sources",
                                               pn ? pn->valuestring : "?", fn->name),
                                  fn->file, line, 0));
        return;
    }
    /* reached without a call (from an initializer or a store): every caller's argument */
    for (size_t i = 0; i < fn->ncallers; i++) {
        callsite *cs = &fn->callers[i];
        if (on_chain(f, cs->caller)) {
            c->cuts++;
            continue;
        }
        int cline = line_of(cs->call);
        if (f->depth + 1 > c->lk->max_depth) {
            vs_add(c, out, depth_limit(c, f, cs->caller->name, cline, col_of(cs->call)));
            continue;
        }
        frame *cf = new_frame(c, cs->caller, NULL, NULL, f, f->depth + 1);
        cJSON *a2 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cs->call, "a"), idx);
        if (cf && a2)
            evalp(c, a2, path, cf, out);
    }
}

static void eval_global(opctx *c, const cJSON *e, const sel *path, frame *f, int line, vset *out)
{
    const char *usr = arg(e, 1)->valuestring, *name = arg(e, 2)->valuestring;
    globinfo *g = tk_map_get(&c->lk->glob_by_usr, usr);
    if (!g || (g->n == 0 && g->ntouch == 0)) {
        vs_add(c, out, unknown_at(arena_printf(c, "unknown value: '%s' is never initialized or assigned in the scanned sources", name),
                                  f ? f->file : NULL, line, 0));
        return;
    }
    if (!busy_enter(c, NULL, loc_key(c, "g", usr, path)))
        return;
    for (size_t i = 0; i < g->n; i++) {
        cJSON *fact = g->facts[i];
        cJSON *fnu = cJSON_GetObjectItemCaseSensitive(fact, "fn");
        fninfo *fn = cJSON_IsString(fnu) ? tk_map_get(&c->lk->fn_by_usr, fnu->valuestring) : NULL;
        frame *gf;
        if (fn) {
            /* a store inside a function: evaluated there, whoever called it */
            if (f && f->depth + 1 > c->lk->max_depth) {
                vs_add(c, out, depth_limit(c, f, fn->name, line_of(fact), 0));
                continue;
            }
            gf = new_frame(c, fn, NULL, NULL, f, f ? f->depth + 1 : 1);
        } else {
            gf = new_frame(c, NULL, NULL, NULL, f, f ? f->depth : 0);
            if (gf)
                gf->file = g->files[i];
        }
        if (gf)
            evalp(c, cJSON_GetObjectItemCaseSensitive(fact, "e"), path, gf, out);
    }
    /* stores below it (g.fwd = k, TABLE[1] = k), through pointers to it and by the functions
     * it is passed to, wherever they are */
    for (size_t i = 0; i < g->ntouch; i++) {
        fninfo *fn = g->touch[i];
        if (f && f->depth + 1 > c->lk->max_depth) {
            vs_add(c, out, depth_limit(c, f, fn->name, line, 0));
            continue;
        }
        frame *gf = new_frame(c, fn, NULL, NULL, f, f ? f->depth + 1 : 1);
        if (gf)
            stores_in(c, e, path, gf, out);
    }
    busy_leave(c);
}

static void eval_call(opctx *c, const cJSON *e, const sel *path, frame *f, vset *out)
{
    int line = arg(e, 3) ? arg(e, 3)->valueint : 0, col = arg(e, 4) ? arg(e, 4)->valueint : 0;
    vset callee = {0};
    eval(c, arg(e, 1), f, &callee);
    for (size_t i = 0; i < callee.n; i++) {
        value *v = &callee.v[i];
        if (v->kind == V_UNKNOWN) {
            vs_add(c, out, unknown_at(arena_printf(c, "indirect call: the called function could not be resolved (%s)", v->s),
                                      v->file, v->line, v->col));
            continue;
        }
        if (v->kind != V_FUNC)
            continue;
        fninfo *fn = tk_map_get(&c->lk->fn_by_usr, v->s);
        if (!fn) {
            vs_add(c, out, unknown_at(arena_printf(c, "unknown value: return value of '%s', which has no definition in the scanned sources",
                                                   func_name(v)),
                                      f ? f->file : NULL, line, col));
            continue;
        }
        if (!new_context(c, f, fn, arg(e, 2)))
            continue; /* recursion that repeats a context: the activation on the path gives its values */
        int depth = f ? f->depth + 1 : 1;
        if (depth > c->lk->max_depth) {
            vs_add(c, out, depth_limit(c, f, fn->name, line, col));
            continue;
        }
        frame *cf = new_frame(c, fn, arg(e, 2), f, f, depth);
        cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(fn->node, "rets"))
        if (cf)
            evalp(c, r, path, cf, out);
    }
}

/* An aggregate initializer read at path: a struct's field, an array's element (every element
 * for an index that is not constant; a field of every element for a field). */
static void eval_agg(opctx *c, const cJSON *e, const sel *path, frame *f, vset *out)
{
    if (!path) {
        value v = simple(V_AGG, NULL);
        v.agg = (cJSON *)e;
        v.where = f;
        vs_add(c, out, v);
        return;
    }
    if (tag(e)[0] == 'r') {
        if (!path->field) { /* p[0].f on a pointer to one struct */
            evalp(c, e, path->next, f, out);
            return;
        }
        cJSON *fe = cJSON_GetObjectItemCaseSensitive(arg(e, 1), path->field);
        if (fe)
            evalp(c, fe, path->next, f, out);
        else
            vs_add(c, out, simple(V_NULL, NULL)); /* a field the initializer leaves zero */
        return;
    }
    cJSON *el = arg(e, 1)->child, *ix = cJSON_GetArrayItem(e, 2) ? arg(e, 2)->child : NULL;
    int hit = 0;
    for (long long pos = 0; el; el = el->next, pos++) {
        long long at = ix ? (long long)ix->valuedouble : pos;
        if (ix)
            ix = ix->next;
        if (path->field)
            evalp(c, el, path, f, out);
        else if (path->index < 0 || path->index == at) {
            evalp(c, el, path->next, f, out);
            hit = 1;
        }
    }
    if (!path->field && !hit)
        vs_add(c, out, simple(V_NULL, NULL)); /* an element the initializer leaves zero */
}

static int only_indices(const sel *p)
{
    for (; p; p = p->next)
        if (p->field)
            return 0;
    return 1;
}

static void evalp(opctx *c, const cJSON *e, const sel *path, frame *f, vset *out)
{
    if (!e || c->oom)
        return;
    if (++c->steps > STEP_BUDGET) {
        if (c->steps == STEP_BUDGET + 1)
            vs_add(c, out, unknown_at("unknown value: resolution budget exhausted", f ? f->file : NULL, 0, 0));
        return;
    }
    const char *t = tag(e);
    switch (t[0]) {
    case 'k':
    case 'f':
        if (only_indices(path)) { /* *k, k[0]: pointers are looked through */
            value v = simple(t[0] == 'k' ? V_KERNEL : V_FUNC, arg(e, 1)->valuestring);
            v.name = t[0] == 'f' && cJSON_IsString(arg(e, 2)) ? arg(e, 2)->valuestring : NULL;
            vs_add(c, out, v);
        } else
            vs_add(c, out, unknown_at("unknown value: a member of something that is not a struct", f ? f->file : NULL, 0, 0));
        return;
    case 'l':
        eval_local(c, e, path, f, out);
        return;
    case 'p':
        eval_param(c, e, path, f, 0, out);
        return;
    case 'g':
        eval_global(c, e, path, f, 0, out);
        return;
    case 'c':
        eval_call(c, e, path, f, out);
        return;
    case 'u': {
        cJSON *alt;
        cJSON_ArrayForEach(alt, arg(e, 1))
            evalp(c, alt, path, f, out);
        return;
    }
    case 'm':
        evalp(c, arg(e, 1), sel_push(c, arg(e, 2)->valuestring, 0, path), f, out);
        return;
    case 'i':
        evalp(c, arg(e, 1), sel_push(c, NULL, cJSON_IsNumber(arg(e, 2)) ? (long long)arg(e, 2)->valuedouble : -1, path), f, out);
        return;
    case 'r':
    case 'a':
        eval_agg(c, e, path, f, out);
        return;
    case '?':
        vs_add(c, out, unknown_at(arg(e, 1)->valuestring, f ? f->file : NULL, arg(e, 2)->valueint,
                                  arg(e, 3) ? arg(e, 3)->valueint : 0));
        return;
    case 'x':
        vs_add(c, out, unknown_at("unknown value: the expression is not a kernel handle", f ? f->file : NULL, 0, 0));
        return;
    default: /* "0": null */
        vs_add(c, out, simple(V_NULL, NULL));
        return;
    }
}

/* ["l",id] or ["p",index]: a variable as a root for stores_in, owned by the op's resolution. */
static const cJSON *var_ref(opctx *c, const char *local, int param)
{
    cJSON *ref = cJSON_CreateArray();
    if (!ref || !cJSON_AddItemToArray(c->temps, ref)) {
        cJSON_Delete(ref);
        c->oom = 1;
        return NULL;
    }
    cJSON_AddItemToArray(ref, cJSON_CreateString(local ? "l" : "p"));
    cJSON_AddItemToArray(ref, local ? cJSON_CreateString(local) : cJSON_CreateNumber(param));
    if (!arg(ref, 1))
        c->oom = 1;
    return c->oom ? NULL : ref;
}

/* Values stored into the variable `root` (of frame f) at `path` by f's function: stores through
 * it (*out = k, s->fwd = k, ks[1] = k), stores through local pointers to it, and what the
 * functions it is passed to store there (to the depth bound). Returns how many such facts there
 * are, followed or reported. */
static int stores_in(opctx *c, const cJSON *root, const sel *path, frame *f, vset *out)
{
    if (!f || !f->fn)
        return 0;
    cJSON *node = f->fn->node, *it;
    int facts = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(node, "stores"))
    {
        const sel *sp = NULL, *rest;
        const cJSON *r = root_of(c, cJSON_GetObjectItemCaseSensitive(it, "t"), &sp);
        if (r && same_root(r, root) && path_match(sp, path, &rest)) {
            evalp(c, cJSON_GetObjectItemCaseSensitive(it, "e"), rest, f, out);
            facts++;
        }
    }
    /* local pointers to it: p = &o (or a copy: over-approximated as the same object) */
    cJSON *locals = cJSON_GetObjectItemCaseSensitive(node, "locals"), *var;
    cJSON_ArrayForEach(var, locals)
    {
        cJSON *a;
        cJSON_ArrayForEach(a, var)
        {
            const sel *sp = NULL, *rest;
            const cJSON *r = root_of(c, a, &sp);
            if (!r || !same_root(r, root) || !path_match(sp, path, &rest) || var->string[0] == 'p')
                continue;
            const cJSON *ref = var_ref(c, var->string, 0);
            if (!ref)
                return facts;
            if (busy_enter(c, f, loc_key(c, "alias", var->string, rest))) {
                facts += stores_in(c, ref, rest, f, out);
                busy_leave(c);
            }
        }
    }
    /* the functions it is passed to */
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(node, "calls"))
    {
        cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "a"), *a;
        int j = 0, line = line_of(it), col = col_of(it);
        for (a = args ? args->child : NULL; a; a = a->next, j++) {
            const sel *sp = NULL, *rest;
            const cJSON *r = root_of(c, a, &sp);
            if (!r || !same_root(r, root) || !path_match(sp, path, &rest))
                continue;
            facts++;
            vset callees = {0};
            eval(c, cJSON_GetObjectItemCaseSensitive(it, "f"), f, &callees);
            for (size_t i = 0; i < callees.n; i++) {
                value *v = &callees.v[i];
                fninfo *callee = v->kind == V_FUNC ? tk_map_get(&c->lk->fn_by_usr, v->s) : NULL;
                char what[600];
                const cJSON *nm = tag(root)[0] == 'l' ? arg(root, 2) : NULL;
                snprintf(what, sizeof what, "%s", cJSON_IsString(nm) ? nm->valuestring : "a value");
                if (v->kind == V_UNKNOWN) {
                    vs_add(c, out, unknown_at(arena_printf(c, "indirect call: '%s' is passed to a function the analyzer cannot resolve, which may store a kernel there", what),
                                              f->file, line, col));
                } else if (v->kind == V_FUNC && !callee) {
                    vs_add(c, out, unknown_at(arena_printf(c, "unknown value: '%s' is passed to '%s', which has no definition in the scanned sources: what it stores there is not followed",
                                                           what, func_name(v)),
                                              f->file, line, col));
                } else if (callee && !on_chain(f, callee)) {
                    if (f->depth + 1 > c->lk->max_depth) {
                        vs_add(c, out, depth_limit(c, f, callee->name, line, col));
                        continue;
                    }
                    frame *cf = new_frame(c, callee, args, f, f, f->depth + 1);
                    const cJSON *pref = var_ref(c, NULL, j);
                    if (!cf || !pref)
                        return facts;
                    stores_in(c, pref, rest, cf, out);
                } else if (callee) {
                    c->cuts++;
                }
            }
        }
    }
    return facts;
}

/* --- walking an op ------------------------------------------------------------------------ */

static void add_unresolved_at(opctx *c, const char *file, int line, int col, int ecol, const char *reason)
{
    if (c->diags) {
        int depth = strncmp(reason, "depth limit", 11) == 0;
        if (depth)
            tk_diag_add(c->diags, file, line, col, ecol, "warning", "tk-depth-limit",
                        "kernel resolution for op '%s' %s", c->op->op, reason + strlen("depth limit: "));
        else
            tk_diag_add(c->diags, file, line, col, ecol, "warning", "tk-unresolved-kernel",
                        "cannot resolve the kernel launched by op '%s': %s", c->op->op, reason);
    }
    for (cJSON *u = c->unresolved->child; u; u = u->next) {
        cJSON *uf = cJSON_GetObjectItemCaseSensitive(u, "file");
        if (cJSON_GetObjectItemCaseSensitive(u, "line")->valueint == line &&
            strcmp(cJSON_GetObjectItemCaseSensitive(u, "reason")->valuestring, reason) == 0 &&
            strcmp(cJSON_IsString(uf) ? uf->valuestring : "", file ? file : "") == 0)
            return;
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddItemToObject(u, "file", file ? cJSON_CreateString(file) : cJSON_CreateNull());
    (void)ecol;
    cJSON_AddNumberToObject(u, "line", line);
    cJSON_AddStringToObject(u, "reason", reason);
    cJSON_AddItemToArray(c->unresolved, u);
}

static void add_unresolved(opctx *c, const char *file, int line, int col, const char *reason)
{
    add_unresolved_at(c, file, line, col, 0, reason);
}

/* The call path of the activation f, outermost first. */
static cJSON *via_of(const frame *f)
{
    const char *names[256];
    int n = 0;
    for (; f && n < 256; f = f->up)
        if (f->fn)
            names[n++] = f->fn->name;
    cJSON *a = cJSON_CreateArray();
    while (n--)
        cJSON_AddItemToArray(a, cJSON_CreateString(names[n]));
    return a;
}

static void add_kernel(opctx *c, const char *name, const frame *f)
{
    cJSON *via = via_of(f);
    cJSON *old = cJSON_GetObjectItemCaseSensitive(c->kernels, name);
    if (old && cJSON_GetArraySize(old) <= cJSON_GetArraySize(via)) {
        cJSON_Delete(via);
        return;
    }
    if (old)
        cJSON_ReplaceItemInObjectCaseSensitive(c->kernels, name, via);
    else
        cJSON_AddItemToObject(c->kernels, name, via);
}

static void walk(opctx *c, frame *f);

static void enter(opctx *c, frame *f, fninfo *callee, cJSON *args, int line, int col)
{
    if (!new_context(c, f, callee, args))
        return; /* a cycle that repeats a context: its launches are already being collected */
    if (f->depth + 1 > c->lk->max_depth) {
        value v = depth_limit(c, f, callee->name, line, col);
        add_unresolved(c, v.file, v.line, v.col, v.s);
        return;
    }
    frame *cf = new_frame(c, callee, args, args ? f : NULL, f, f->depth + 1);
    if (cf)
        walk(c, cf);
}

/* The call path of the activation f as "op -> helper -> ...". */
static void via_text(const frame *f, char *path, size_t size)
{
    cJSON *via = via_of(f);
    path[0] = '\0';
    for (cJSON *v = via ? via->child : NULL; v; v = v->next)
        snprintf(path + strlen(path), size - strlen(path), "%s%s", v == via->child ? "" : " -> ", v->valuestring);
    cJSON_Delete(via);
}

/* tk-undeclared-mutation: each argument the kernel writes through is followed back, through
 * helpers' parameters and locals, to the op inputs it can be; one the op's schema keeps
 * constant is a finding. */
static void check_mutation(opctx *c, frame *f, const cJSON *launch, const char *kernel, const cJSON *kdef)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(launch, "args");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(kdef, "params"), *w;
    if (cJSON_GetArraySize(args) != cJSON_GetArraySize(params))
        return; /* tk-arg-mismatch's finding */
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(kdef, "writes"))
    {
        const cJSON *a = cJSON_GetArrayItem(args, w->valueint);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(a, "e");
        if (!e)
            continue;
        vset vs = {0};
        eval(c, e, f, &vs);
        for (size_t i = 0; i < vs.n; i++) {
            const value *v = &vs.v[i];
            if (v->kind != V_INPUT || v->idx < 0)
                continue;
            char via[512] = "";
            if (v->fn != f->fn)
                via_text(f, via, sizeof via);
            tk_check_mutation(c->diags, f->file, a, kernel, cJSON_GetArrayItem(params, w->valueint), v->idx, v->fn->op,
                              cJSON_GetObjectItemCaseSensitive(v->fn->node, "schema")->valuestring, *via ? via : NULL);
        }
    }
}

static void walk(opctx *c, frame *f)
{
    cJSON *node = f->fn->node;
    cJSON *it;
    cJSON *raw = c->diags ? cJSON_GetObjectItemCaseSensitive(node, "raw") : NULL;
    cJSON_ArrayForEach(it, raw)
    {
        char path[512];
        via_text(f, path, sizeof path);
        const char *kernel = cJSON_GetObjectItemCaseSensitive(it, "kernel")->valuestring;
        tk_diag_add(c->diags, f->file, tk_json_int(it, "line", 0), tk_json_int(it, "col", 0), tk_json_int(it, "ecol", 0), "error", "tk-raw-launch",
                    "%s%s%s launched with %s inside op '%s' (via %s): invisible to export and packaging; launch it with tk_wrap",
                    *kernel ? "kernel '" : "a kernel", kernel, *kernel ? "'" : "",
                    cJSON_GetObjectItemCaseSensitive(it, "kind")->valuestring, c->op->op, path);
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(node, "launches"))
    {
        vset ks = {0};
        eval(c, cJSON_GetObjectItemCaseSensitive(it, "k"), f, &ks);
        int lline = tk_json_int(it, "line", 0), lcol = tk_json_int(it, "col", 0), lecol = tk_json_int(it, "ecol", 0);
        /* findings about the kernel point at its expression, which may sit on a line of its own */
        const cJSON *kpos = cJSON_GetObjectItemCaseSensitive(it, "kpos");
        int kline = kpos ? line_of(kpos) : lline, kcol = kpos ? col_of(kpos) : lcol, kecol = kpos ? tk_json_int(kpos, "ecol", 0) : lecol;
        int accounted = 0; /* a kernel found, or a reason why not */
        for (size_t i = 0; i < ks.n; i++) {
            value *v = &ks.v[i];
            accounted |= v->kind != V_NULL;
            if (v->kind == V_KERNEL) {
                add_kernel(c, v->s, f);
                cJSON *def = tk_map_get(&c->lk->kernel_by_name, v->s);
                if (c->diags && !def)
                    tk_diag_add(c->diags, f->file, kline, kcol, kecol, "error", "tk-undefined-kernel",
                                "kernel '%s' launched by op '%s' has no TK_KERNEL definition in the scanned sources",
                                v->s, c->op->op);
                else if (c->diags) {
                    tk_check_launch(c->diags, f->file, it, v->s, def);
                    check_mutation(c, f, it, v->s, def);
                }
            } else if (v->kind == V_UNKNOWN) {
                int here = !v->line || (v->line == kline && (!v->col || v->col == kcol));
                add_unresolved_at(c, v->line ? v->file : f->file, here ? kline : v->line, here ? kcol : v->col,
                                  here ? kecol : 0, v->s);
            } else if (v->kind != V_NULL) {
                add_unresolved_at(c, f->file, kline, kcol, kecol,
                                  v->kind == V_FUNC    ? "unknown value: the kernel expression denotes a function, not a kernel handle"
                                  : v->kind == V_INPUT ? "unknown value: the kernel expression denotes a tensor, not a kernel handle"
                                                       : "unknown value: the kernel expression denotes a struct or table, not a kernel handle");
            }
        }
        /* never silently empty: every launch has kernels or says why it has none */
        if (!accounted && !c->oom)
            add_unresolved_at(c, f->file, kline, kcol, kecol,
                              "unknown value: no kernel handle reaches this tk_wrap (the kernel expression is NULL, or "
                              "set only where the analyzer does not look)");
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(node, "calls"))
    {
        vset fs = {0};
        cJSON *fe = cJSON_GetObjectItemCaseSensitive(it, "f");
        eval(c, fe, f, &fs);
        int line = tk_json_int(it, "line", 0), col = col_of(it), accounted = 0;
        for (size_t i = 0; i < fs.n; i++) {
            value *v = &fs.v[i];
            accounted |= v->kind != V_NULL;
            if (v->kind == V_UNKNOWN) {
                add_unresolved(c, f->file, line, col, arena_printf(c, "indirect call: the called function could not be resolved (%s)", v->s));
                continue;
            }
            fninfo *callee = v->kind == V_FUNC ? tk_map_get(&c->lk->fn_by_usr, v->s) : NULL;
            if (callee && callee->may_launch)
                enter(c, f, callee, cJSON_GetObjectItemCaseSensitive(it, "a"), line, col);
        }
        if (!accounted && !c->oom && strcmp(tag(fe), "f") != 0)
            add_unresolved(c, f->file, line, col,
                           "indirect call: no function reaches this call through a pointer (it is NULL, or set only where "
                           "the analyzer does not look)");
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(node, "opcalls"))
    {
        cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsString(name)) {
            add_unresolved(c, f->file, line_of(it), col_of(it), "unknown value: tk_call with an op name that is not a string literal");
            continue;
        }
        fninfo *op = tk_map_get(&c->lk->op_by_name, name->valuestring);
        if (!op) {
            add_unresolved(c, f->file, line_of(it), col_of(it),
                           arena_printf(c, "unknown value: op '%s' called through tk_call is not defined in the scanned sources",
                                        name->valuestring));
            continue;
        }
        enter(c, f, op, NULL, line_of(it), col_of(it));
    }
}

/* --- linking ------------------------------------------------------------------------------ */

static int may_launch_direct(cJSON *fnode)
{
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fnode, "launches")) ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fnode, "opcalls")) ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fnode, "raw")))
        return 1;
    cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(fnode, "calls"))
    if (strcmp(tag(cJSON_GetObjectItemCaseSensitive(call, "f")), "f") != 0)
        return 1; /* an indirect call may reach anything */
    return 0;
}

/* Calls fn(lk, root, owner) for every variable a function's stores, call arguments and local
 * assignments are rooted in; stops at the first nonzero return. */
static int each_root(linker *lk, cJSON *fnode, fninfo *owner, int (*fn)(linker *, const cJSON *, fninfo *))
{
    static const char *const lists[] = {"stores", "calls"};
    for (int l = 0; l < 2; l++) {
        cJSON *it, *a;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(fnode, lists[l]))
        {
            if (l == 0) {
                const cJSON *r = root_node(cJSON_GetObjectItemCaseSensitive(it, "t"));
                if (r && fn(lk, r, owner))
                    return 1;
                continue;
            }
            cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(it, "a"))
            {
                const cJSON *r = root_node(a);
                if (r && fn(lk, r, owner))
                    return 1;
            }
        }
    }
    cJSON *var, *a;
    cJSON_ArrayForEach(var, cJSON_GetObjectItemCaseSensitive(fnode, "locals"))
    cJSON_ArrayForEach(a, var)
    {
        const cJSON *r = root_node(a);
        if (r && fn(lk, r, owner))
            return 1;
    }
    return 0;
}

static int count_global_root(linker *lk, const cJSON *r, fninfo *owner)
{
    (void)owner;
    lk->nglobs += tag(r)[0] == 'g'; /* an upper bound on the globals only stores touch */
    return 0;
}

/* Records that owner touches the global r (stores below it, points at it, passes it on). */
static int touch_global(linker *lk, const cJSON *r, fninfo *owner)
{
    if (tag(r)[0] != 'g')
        return 0;
    const char *usr = arg(r, 1)->valuestring;
    globinfo *g = tk_map_get(&lk->glob_by_usr, usr);
    if (!g) {
        g = &lk->globs[lk->nglobs++];
        g->name = arg(r, 2)->valuestring;
        if (tk_map_put(&lk->glob_by_usr, usr, g))
            return 1;
    }
    if (g->ntouch && g->touch[g->ntouch - 1] == owner)
        return 0;
    if (g->ntouch == g->captouch) {
        size_t cap = g->captouch ? g->captouch * 2 : 4;
        fninfo **t = realloc(g->touch, cap * sizeof(*t));
        if (!t)
            return 1;
        g->touch = t;
        g->captouch = cap;
    }
    g->touch[g->ntouch++] = owner;
    return 0;
}

static int link_summaries(linker *lk, cJSON *const *sums, size_t n)
{
    size_t nf = 0, ng = 0;
    for (size_t i = 0; i < n; i++) {
        nf += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sums[i], "funcs"));
        ng += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sums[i], "globals"));
        cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sums[i], "funcs"))
            each_root(lk, it, NULL, count_global_root);
    }
    ng += lk->nglobs;
    lk->nglobs = 0;
    lk->fns = calloc(nf + 1, sizeof(*lk->fns));
    lk->globs = calloc(ng + 1, sizeof(*lk->globs));
    if (!lk->fns || !lk->globs)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *file = cJSON_GetObjectItemCaseSensitive(sums[i], "path")->valuestring;
        cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sums[i], "funcs"))
        {
            const char *usr = cJSON_GetObjectItemCaseSensitive(it, "usr")->valuestring;
            if (tk_map_get(&lk->fn_by_usr, usr))
                continue; /* one definition per USR: the first file (sorted) wins */
            fninfo *fi = &lk->fns[lk->nfns++];
            fi->node = it;
            fi->usr = usr;
            fi->name = cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring;
            fi->file = file;
            cJSON *op = cJSON_GetObjectItemCaseSensitive(it, "op");
            fi->op = cJSON_IsString(op) ? op->valuestring : NULL;
            if (tk_map_put(&lk->fn_by_usr, usr, fi))
                return TK_ENOMEM;
            if (fi->op && !tk_map_get(&lk->op_by_name, fi->op) && tk_map_put(&lk->op_by_name, fi->op, fi))
                return TK_ENOMEM;
        }
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sums[i], "globals"))
        {
            const char *usr = cJSON_GetObjectItemCaseSensitive(it, "usr")->valuestring;
            globinfo *g = tk_map_get(&lk->glob_by_usr, usr);
            if (!g) {
                g = &lk->globs[lk->nglobs++];
                g->name = cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring;
                if (tk_map_put(&lk->glob_by_usr, usr, g))
                    return TK_ENOMEM;
            }
            if (g->n == g->cap) {
                size_t cap = g->cap ? g->cap * 2 : 4;
                cJSON **nf2 = realloc(g->facts, cap * sizeof(*nf2));
                const char **files = realloc(g->files, cap * sizeof(*files));
                if (nf2)
                    g->facts = nf2;
                if (files)
                    g->files = files;
                if (!nf2 || !files)
                    return tk_error_set(TK_ENOMEM, "out of memory");
                g->cap = cap;
            }
            g->facts[g->n] = it;
            g->files[g->n++] = file;
        }
        cJSON *idents = cJSON_GetObjectItemCaseSensitive(sums[i], "idents");
        if (idents && !tk_map_get(&lk->idents_by_file, file) && tk_map_put(&lk->idents_by_file, file, idents))
            return TK_ENOMEM;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sums[i], "kernels"))
        {
            const char *name = cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring;
            if (!tk_map_get(&lk->kernel_by_name, name)) {
                if (tk_map_put(&lk->kernel_by_name, name, it) || tk_map_put(&lk->kernel_file, name, (void *)file))
                    return TK_ENOMEM;
            }
        }
    }
    /* the functions that store below each global, point at it or pass it on */
    for (size_t i = 0; i < lk->nfns; i++)
        if (each_root(lk, lk->fns[i].node, &lk->fns[i], touch_global))
            return tk_error_set(TK_ENOMEM, "out of memory");
    /* callers of each function, through direct calls */
    for (size_t i = 0; i < lk->nfns; i++) {
        cJSON *call;
        cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(lk->fns[i].node, "calls"))
        {
            cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "f");
            if (strcmp(tag(f), "f") != 0)
                continue;
            fninfo *callee = tk_map_get(&lk->fn_by_usr, arg(f, 1)->valuestring);
            if (!callee)
                continue;
            if (callee->ncallers == callee->capcallers) {
                size_t cap = callee->capcallers ? callee->capcallers * 2 : 4;
                callsite *cs = realloc(callee->callers, cap * sizeof(*cs));
                if (!cs)
                    return tk_error_set(TK_ENOMEM, "out of memory");
                callee->callers = cs;
                callee->capcallers = cap;
            }
            callee->callers[callee->ncallers].caller = &lk->fns[i];
            callee->callers[callee->ncallers++].call = call;
        }
    }
    /* which functions can reach a launch: a fixed point over direct calls */
    for (size_t i = 0; i < lk->nfns; i++)
        lk->fns[i].may_launch = may_launch_direct(lk->fns[i].node);
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < lk->nfns; i++) {
            fninfo *fi = &lk->fns[i];
            if (!fi->may_launch)
                continue;
            for (size_t j = 0; j < fi->ncallers; j++) {
                if (!fi->callers[j].caller->may_launch) {
                    fi->callers[j].caller->may_launch = 1;
                    changed = 1;
                }
            }
        }
    }
    return 0;
}

static void linker_release(linker *lk)
{
    for (size_t i = 0; i < lk->nfns; i++)
        free(lk->fns[i].callers);
    for (size_t i = 0; i < lk->nglobs; i++) {
        free(lk->globs[i].facts);
        free(lk->globs[i].files);
        free(lk->globs[i].touch);
    }
    free(lk->fns);
    free(lk->globs);
    tk_map_release(&lk->fn_by_usr);
    tk_map_release(&lk->op_by_name);
    tk_map_release(&lk->glob_by_usr);
    tk_map_release(&lk->kernel_by_name);
    tk_map_release(&lk->kernel_file);
    tk_map_release(&lk->idents_by_file);
}

/* doc's "tunes": every well-formed TK_AUTOTUNE, read once here by tunespec.h's rules, with its
 * kernel's TK_HEURISTIC: {kernel, key, params:[name], configs:[[int]], file, line,
 * heuristic:{param, values:[int]} | null}. Malformed ones are lint's findings and are left out.
 * export records this in program.json, and compile reads it from there. */
static int add_tunes(cJSON *doc, cJSON *const *summaries, size_t n)
{
    cJSON *tunes = cJSON_AddArrayToObject(doc, "tunes");
    if (!tunes)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *file = cJSON_GetObjectItemCaseSensitive(summaries[i], "path")->valuestring;
        const cJSON *t, *c;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(summaries[i], "tunes"))
        {
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "heuristic")))
                continue;
            char names[TK_TUNE_MAX_PARAMS][TK_TUNESPEC_NAME_MAX], why[160];
            int np = 0, ok = tk_tunespec_names(tk_json_str(t, "params", ""), names, TK_TUNE_MAX_PARAMS, &np, why,
                                               sizeof why) == 0;
            const cJSON *configs = cJSON_GetObjectItemCaseSensitive(t, "configs");
            ok = ok && cJSON_GetArraySize(configs) > 0 && cJSON_GetArraySize(configs) <= TK_TUNE_MAX_CONFIGS;
            cJSON *o = cJSON_CreateObject(), *cl = cJSON_CreateArray();
            cJSON_ArrayForEach(c, configs)
            {
                int v[TK_TUNE_MAX_PARAMS], nv = 0;
                ok = ok && tk_tunespec_ints(tk_json_str(c, "s", ""), v, TK_TUNE_MAX_PARAMS, &nv, why, sizeof why) == 0 &&
                     nv == np;
                if (ok)
                    cJSON_AddItemToArray(cl, cJSON_CreateIntArray(v, nv));
            }
            cJSON_AddStringToObject(o, "kernel", tk_json_str(t, "kernel", ""));
            cJSON_AddStringToObject(o, "key", tk_json_str(t, "key", ""));
            cJSON *pl = cJSON_AddArrayToObject(o, "params");
            for (int k = 0; k < np; k++)
                cJSON_AddItemToArray(pl, cJSON_CreateString(names[k]));
            cJSON_AddItemToObject(o, "configs", cl);
            cJSON_AddStringToObject(o, "file", file);
            cJSON_AddNumberToObject(o, "line", tk_json_int(t, "line", 0));
            cJSON_AddNullToObject(o, "heuristic");
            if (ok)
                cJSON_AddItemToArray(tunes, o);
            else
                cJSON_Delete(o);
        }
    }
    for (size_t i = 0; i < n; i++) { /* each kernel's heuristic onto its declaration */
        const cJSON *t, *o;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(summaries[i], "tunes"))
        {
            int v[TK_TUNE_MAX_CONFIGS], nv = 0;
            char why[160];
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "heuristic")) ||
                tk_tunespec_ints(tk_json_str(t, "values", ""), v, TK_TUNE_MAX_CONFIGS, &nv, why, sizeof why) != 0)
                continue;
            cJSON_ArrayForEach(o, tunes)
            {
                if (strcmp(tk_json_str(o, "kernel", ""), tk_json_str(t, "kernel", "")) != 0)
                    continue;
                cJSON *h = cJSON_CreateObject();
                cJSON_AddStringToObject(h, "param", tk_json_str(t, "param", ""));
                cJSON_AddItemToObject(h, "values", cJSON_CreateIntArray(v, nv));
                cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)o, "heuristic", h);
            }
        }
    }
    return 0;
}

/* 0 the first time (kind, file, text, line, col) is seen, else 1. */
static int first_time(tk_map *seen, cJSON *keys, const char *kind, const char *file, const char *text, int line, int col)
{
    tk_strbuf k = TK_STRBUF_INIT;
    tk_strbuf_addf(&k, "%s\n%s\n%d:%d\n%s", kind, file, line, col, text);
    if (!k.buf || tk_map_get(seen, k.buf)) {
        int known = k.buf != NULL;
        tk_strbuf_release(&k);
        return known;
    }
    cJSON *key = cJSON_CreateString(k.buf);
    tk_strbuf_release(&k);
    if (key) {
        cJSON_AddItemToArray(keys, key);
        tk_map_put(seen, key->valuestring, key);
    }
    return 0;
}

static cJSON *resolve_op(linker *lk, fninfo *op, cJSON *diags)
{
    opctx c;
    memset(&c, 0, sizeof(c));
    c.lk = lk;
    c.diags = diags;
    c.op = op;
    c.kernels = cJSON_CreateObject();
    c.unresolved = cJSON_CreateArray();
    c.temps = cJSON_CreateArray();
    c.oom = !c.kernels || !c.unresolved || !c.temps;
    frame *top = new_frame(&c, op, NULL, NULL, NULL, 0);
    if (top)
        walk(&c, top);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", op->op);
    cJSON_AddStringToObject(o, "function", op->name);
    cJSON_AddStringToObject(o, "file", op->file);
    cJSON_AddNumberToObject(o, "line", tk_json_int(op->node, "line", 0));
    cJSON_AddStringToObject(o, "schema", cJSON_GetObjectItemCaseSensitive(op->node, "schema")->valuestring);
    cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
    cJSON *k;
    cJSON_ArrayForEach(k, c.kernels)
    {
        cJSON *ko = cJSON_CreateObject();
        cJSON_AddStringToObject(ko, "name", k->string);
        cJSON *def = tk_map_get(&lk->kernel_by_name, k->string);
        const char *file = tk_map_get(&lk->kernel_file, k->string);
        cJSON_AddItemToObject(ko, "file", file ? cJSON_CreateString(file) : cJSON_CreateNull());
        cJSON_AddItemToObject(ko, "line", def ? cJSON_CreateNumber(tk_json_int(def, "line", 0)) : cJSON_CreateNull());
        cJSON_AddItemToObject(ko, "via", cJSON_Duplicate(k, 1));
        cJSON_AddItemToArray(ks, ko);
    }
    cJSON_AddItemToObject(o, "unresolved", c.unresolved);
    /* the functions resolution consulted, with their files: what compiling the op needs */
    cJSON *reached = cJSON_AddArrayToObject(o, "reached");
    for (size_t i = 0; i < c.reached.cap; i++) {
        const fninfo *fi = c.reached.vals[i];
        if (!c.reached.keys[i])
            continue;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", fi->name);
        cJSON_AddStringToObject(r, "file", fi->file);
        cJSON_AddItemToArray(reached, r);
    }
    tk_map_release(&c.reached);
    cJSON_Delete(c.kernels);
    cJSON_Delete(c.temps);
    while (c.arena) {
        arena_block *next = c.arena->next;
        free(c.arena);
        c.arena = next;
    }
    return o;
}

/* tk-bad-op-name, tk-bad-schema (syntax and arity against in[]/out[] use), tk-duplicate-op. */
static void check_op(linker *lk, fninfo *op, cJSON *diags)
{
    int line = tk_json_int(op->node, "line", 0), col = tk_json_int(op->node, "col", 0);
    if (!tk_op_name_valid(op->op))
        tk_diag_add(diags, op->file, line, col, 0, "error", "tk-bad-op-name",
                    "op name '%s' is not 'namespace::name' with identifier parts (e.g. 'mylib::silu')", op->op);
    fninfo *first = tk_map_get(&lk->op_by_name, op->op);
    if (first && first != op) {
        char *rel = tk_path_relative_to_cwd(first->file);
        tk_diag_add(diags, op->file, line, col, 0, "error", "tk-duplicate-op",
                    "op '%s' is defined twice: here (function '%s') and at %s:%d (function '%s')", op->op, op->name,
                    rel ? rel : first->file, tk_json_int(first->node, "line", 0), first->name);
        free(rel);
    }
    const char *schema = cJSON_GetObjectItemCaseSensitive(op->node, "schema")->valuestring;
    tk_schema sc;
    char why[160];
    if (tk_schema_parse(schema, &sc, why, sizeof(why)) != 0) {
        tk_diag_add(diags, op->file, line, col, 0, "error", "tk-bad-schema", "schema '%s' of op '%s' does not parse: %s",
                    schema, op->op, why);
        return;
    }
    int in_max = tk_json_int(op->node, "in_max", 0), out_max = tk_json_int(op->node, "out_max", 0);
    if (in_max >= sc.nargs)
        tk_diag_add(diags, op->file, line, col, 0, "error", "tk-bad-schema",
                    "op '%s' reads in[%d], but its schema '%s' declares %d argument%s", op->op, in_max, schema, sc.nargs,
                    sc.nargs == 1 ? "" : "s");
    if (out_max >= sc.nrets)
        tk_diag_add(diags, op->file, line, col, 0, "error", "tk-bad-schema",
                    "op '%s' writes out[%d], but its schema '%s' declares %d return%s", op->op, out_max, schema, sc.nrets,
                    sc.nrets == 1 ? "" : "s");
}

/* Whether the identifier `name` appears in the code of the file defining a kernel, outside
 * comments and preprocessor lines (a TK_AUTOTUNE parameter reaches the kernel as -DNAME=value;
 * its #ifndef/#define default does not count as a use). The frontend collected the file's
 * identifiers from the buffer clang parsed, so an editor's unsaved text counts, not the disk's.
 * -1 when the file's summary has no such list. */
static int source_uses(const linker *lk, const char *path, const char *name)
{
    const cJSON *idents = tk_map_get(&lk->idents_by_file, path), *w;
    if (!idents)
        return -1;
    cJSON_ArrayForEach(w, idents)
    if (cJSON_IsString(w) && !strcmp(w->valuestring, name))
        return 1;
    return 0;
}

/* The offset of word in the space-separated list (for a caret under it). */
static int name_offset(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(list, word); p; p = strstr(p + 1, word))
        if ((p == list || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\t' || p[n] == '\0'))
            return (int)(p - list);
    return 0;
}

/* tk-bad-autotune: the declaration against its kernel's parameters and source. */
static void check_tune(linker *lk, const char *file, const cJSON *t, cJSON *diags)
{
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "heuristic"))) {
        int v[TK_TUNE_MAX_CONFIGS], n = 0;
        char why[160];
        if (tk_tunespec_ints(tk_json_str(t, "values", ""), v, TK_TUNE_MAX_CONFIGS, &n, why, sizeof why) != 0)
            tk_diag_add(diags, file, tk_json_int(t, "line", 0), tk_json_int(t, "col", 0), 0, "error", "tk-bad-autotune",
                        "TK_HEURISTIC of '%s': %s (expected the values to compile, e.g. \"0 1\")",
                        tk_json_str(t, "kernel", ""), why);
        return;
    }
    const char *kernel = cJSON_GetObjectItemCaseSensitive(t, "kernel")->valuestring;
    const char *key = cJSON_GetObjectItemCaseSensitive(t, "key")->valuestring;
    const char *params = cJSON_GetObjectItemCaseSensitive(t, "params")->valuestring;
    const cJSON *configs = cJSON_GetObjectItemCaseSensitive(t, "configs"), *c;
    int line = tk_json_int(t, "line", 0), col = tk_json_int(t, "col", 0), nparams = 0;
    int kline = tk_json_int(t, "key_line", 0), kcol = tk_json_int(t, "key_col", 0), pline = tk_json_int(t, "params_line", 0), pcol = tk_json_int(t, "params_col", 0);
    char names[TK_TUNE_MAX_PARAMS][TK_TUNESPEC_NAME_MAX], why[160];
    if (tk_tunespec_names(params, names, TK_TUNE_MAX_PARAMS, &nparams, why, sizeof why) != 0) {
        nparams = 0;
        tk_diag_add(diags, file, pline, pcol, 0, "error", "tk-bad-autotune",
                    "TK_AUTOTUNE of '%s': %s (expected the compile-time parameters' names, e.g. \"BLOCK ITEMS\")",
                    kernel, why);
    }
    if (cJSON_GetArraySize(configs) == 0)
        tk_diag_add(diags, file, line, col, 0, "error", "tk-bad-autotune",
                    "TK_AUTOTUNE of '%s' lists no configuration (expected one string of %d integer%s per configuration)",
                    kernel, nparams, nparams == 1 ? "" : "s");
    cJSON_ArrayForEach(c, configs)
    {
        int n = 0, v[TK_TUNE_MAX_PARAMS];
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "s")->valuestring;
        int ok = tk_tunespec_ints(text, v, TK_TUNE_MAX_PARAMS, &n, why, sizeof why) == 0;
        if (!ok || n != nparams)
            tk_diag_add(diags, file, tk_json_int(c, "line", 0), tk_json_int(c, "col", 0), 0, "error", "tk-bad-autotune",
                        "TK_AUTOTUNE of '%s': configuration \"%s\" is not %d integer%s (one per parameter of \"%s\")",
                        kernel, text, nparams, nparams == 1 ? "" : "s", params);
    }
    const cJSON *kdef = tk_map_get(&lk->kernel_by_name, kernel);
    const char *kfile = tk_map_get(&lk->kernel_file, kernel);
    if (!kdef)
        return; /* an undefined kernel is tk-undefined-kernel's finding */
    const cJSON *p;
    int found = 0;
    tk_strbuf known = {0};
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(kdef, "params"))
    {
        const char *pn = cJSON_GetObjectItemCaseSensitive(p, "name")->valuestring;
        found |= !strcmp(pn, key);
        tk_strbuf_addf(&known, "%s%s", known.len ? ", " : "", pn);
    }
    if (!found)
        tk_diag_add(diags, file, kline, kcol, 0, "error", "tk-bad-autotune",
                    "TK_AUTOTUNE of '%s': key '%s' is not a parameter of the kernel (its parameters: %s)", kernel, key,
                    known.buf ? known.buf : "none");
    tk_strbuf_release(&known);
    for (int i = 0; i < nparams && kfile; i++)
        if (source_uses(lk, kfile, names[i]) == 0) {
            char *rel = tk_path_relative_to_cwd(kfile);
            tk_diag_add(diags, file, pline, pcol + 1 + name_offset(params, names[i]), 0, "error", "tk-bad-autotune",
                        "TK_AUTOTUNE of '%s': parameter '%s' is not used by the kernel's source %s, so every "
                        "configuration compiles to the same kernel", kernel, names[i], rel ? rel : kfile);
            free(rel);
        }
}

int tk_resolve(cJSON **out, cJSON *const *summaries, size_t n, int max_depth, int lint)
{
    *out = NULL;
    linker lk;
    memset(&lk, 0, sizeof(lk));
    lk.max_depth = max_depth;
    int rc = link_summaries(&lk, summaries, n);
    if (rc) {
        linker_release(&lk);
        return rc;
    }
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddNumberToObject(doc, "version", 1);
    cJSON *ops = cJSON_AddArrayToObject(doc, "ops");
    cJSON *lint_diags = lint ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < lk.nfns; i++) {
        if (!lk.fns[i].op)
            continue;
        cJSON_AddItemToArray(ops, resolve_op(&lk, &lk.fns[i], lint_diags));
        if (lint)
            check_op(&lk, &lk.fns[i], lint_diags);
    }
    for (size_t i = 0; lint && i < n; i++) {
        const char *file = cJSON_GetObjectItemCaseSensitive(summaries[i], "path")->valuestring;
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(summaries[i], "tunes"))
            check_tune(&lk, file, t, lint_diags);
    }
    if (add_tunes(doc, summaries, n)) {
        linker_release(&lk);
        cJSON_Delete(lint_diags);
        cJSON_Delete(doc);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    cJSON *kernels = cJSON_AddArrayToObject(doc, "kernels");
    cJSON *diags = cJSON_AddArrayToObject(doc, "diagnostics");
    tk_map said = TK_MAP_INIT; /* a header's kernels and errors, reached from several files, once */
    cJSON *said_keys = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        const char *file = cJSON_GetObjectItemCaseSensitive(summaries[i], "path")->valuestring;
        cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(summaries[i], "kernels"))
        {
            if (first_time(&said, said_keys, "k", file, tk_json_str(it, "name", ""), tk_json_int(it, "line", 0), 0))
                continue;
            cJSON *ko = cJSON_CreateObject();
            cJSON_AddStringToObject(ko, "name", cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring);
            cJSON_AddStringToObject(ko, "file", file);
            cJSON_AddNumberToObject(ko, "line", tk_json_int(it, "line", 0));
            cJSON *params = cJSON_AddArrayToObject(ko, "params"), *pi;
            cJSON_ArrayForEach(pi, cJSON_GetObjectItemCaseSensitive(it, "params"))
            {
                cJSON *po = cJSON_CreateObject();
                cJSON_AddStringToObject(po, "name", cJSON_GetObjectItemCaseSensitive(pi, "name")->valuestring);
                cJSON_AddStringToObject(po, "type", cJSON_GetObjectItemCaseSensitive(pi, "type")->valuestring);
                cJSON_AddItemToArray(params, po);
            }
            cJSON_AddItemToArray(kernels, ko);
        }
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(summaries[i], "diags"))
        {
            cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "file");
            if (first_time(&said, said_keys, tk_json_str(it, "rule", ""), cJSON_IsString(f) ? f->valuestring : "",
                           tk_json_str(it, "message", ""), tk_json_int(it, "line", 0), tk_json_int(it, "col", 0)))
                continue;
            cJSON *d = cJSON_CreateObject();
            cJSON_AddItemToObject(d, "file", cJSON_Duplicate(f, 0));
            cJSON_AddNumberToObject(d, "line", tk_json_int(it, "line", 0));
            cJSON_AddNumberToObject(d, "column", tk_json_int(it, "col", 0));
            cJSON_AddNumberToObject(d, "end_line", tk_json_int(it, "line", 0));
            cJSON_AddNumberToObject(d, "end_column", tk_json_int(it, "col", 0) + 1);
            cJSON_AddItemToObject(d, "severity", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "severity"), 0));
            cJSON_AddItemToObject(d, "rule", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "rule"), 0));
            const char *via = tk_json_str(it, "via", NULL);
            if (via) { /* an error in a header, reported once: where it was met */
                char *rel = tk_path_relative_to_cwd(via);
                tk_strbuf m = TK_STRBUF_INIT;
                tk_strbuf_addf(&m, "%s (in a header included from %s)", tk_json_str(it, "message", ""), rel ? rel : via);
                free(rel);
                cJSON_AddStringToObject(d, "message", m.buf ? m.buf : "");
                tk_strbuf_release(&m);
            } else {
                cJSON_AddItemToObject(d, "message", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "message"), 0));
            }
            cJSON_AddItemToArray(diags, d);
        }
    }
    tk_map_release(&said);
    cJSON_Delete(said_keys);
    while (lint_diags && lint_diags->child)
        cJSON_AddItemToArray(diags, cJSON_DetachItemViaPointer(lint_diags, lint_diags->child));
    cJSON_Delete(lint_diags);
    linker_release(&lk);
    *out = doc;
    return 0;
}
