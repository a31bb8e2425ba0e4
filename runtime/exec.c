/* The executor: program models prepared for running (nodes resolved to their ops once), weights
 * uploaded once per device, and sessions (tk_session_*) that check inputs, plan intermediates per
 * input-shape signature in one allocation, run each node and, on a GPU, replay CUDA graphs.
 *
 * Plans. The key of a plan is the vector of the program's symbol values (every shape follows from
 * it); each session keeps up to max_plans of them (1024 unless its options say) in a hash table, the least recently used going
 * first. A plan gives each value kept in the session's arena a 256-byte aligned offset: values
 * are placed in program order at the lowest offset that overlaps no value alive at the same time
 * (lifetimes in node indices; a node's inputs and outputs never share). The arena is one
 * allocation per session, sized at creation for every symbol at its maximum and reallocated only
 * when a plan needs more; that moves every intermediate, so graphs are recaptured.
 *
 * The request path does no capture. The first run of a signature is eager, on the caller's
 * tensors (no copies); it hands the plan to the session's capture thread, which captures the
 * signature's staged graph on a context of its own: there the inputs and outputs are arena slots,
 * so the graph bakes only arena and weight pointers, and later runs copy the caller's inputs into
 * the slots, launch the graph and copy the outputs out. A caller that runs one shape on the same
 * device tensors twice in a row has the capture thread make a direct graph on those tensors' own
 * pointers (no copies), replayed whenever that shape comes again with those tensors. A CPU
 * session is eager only and reads and writes the caller's tensors in place. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"
#include "log.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "strbuf.h"
#include "sym.h"

/* Intermediates start at multiples of this (what cuMemAlloc and vector loads want). */
#define ARENA_ALIGN 256
/* Node inputs and outputs, more than any schema holds (dispatch stops at its own limit). */
#define MAX_NODE_IO 64

enum { V_INPUT, V_PARAM, V_NODE };

/* A value of the program: where it comes from, its dims as parsed expressions, its lifetime in
 * node indices (inputs start at -1), and the first program output that returns it. */
typedef struct xvalue {
    const tk_pm_value *pm;
    int kind, index;
    tk_sym dims[TK_MAX_DIMS];
    int sym[TK_MAX_DIMS]; /* the symbol's index when the dim is a bare symbol, else -1 */
    int first, last;
    int output;           /* the program output it is (first occurrence), or -1 */
    int fused_away;       /* made and read only inside a fused node: never stored */
    int mlp_hidden;       /* tk::_mlp's hidden tensor (fuse_mlp): not stored where the kernel takes every call */
    int folded;           /* computed from parameters alone, once per device (fold_nodes) */
    int src;              /* made by a layout node that may be a view (mark_views): its input, else -1 */
    int feeds;            /* the output whose strided view this value may be the storage of, else -1 */
    int tview;            /* a view candidate every reader of which takes strided tensors (tk::matmul's b) */
    int hold;             /* the last node reading a view of this value's bytes, else -1 */
} xvalue;

typedef struct xnode {
    const tk_pm_node *pm;
    tk_resolved_op op;    /* resolved once, when the program is prepared */
    int nin;              /* pm->nin, or the fused op's count */
    int in[MAX_NODE_IO];  /* value indices, -1 for an optional input left out */
    int out[MAX_NODE_IO];
    int absorbed;         /* run inside the node before it (fuse_nodes): skipped */
    int folded;           /* reads parameters (or folded values) only: run once per device with the weights */
    tk_value *attrs;      /* per argument: its scalar (program.json's attrs), or a tensor kind; NULL: none */
    const char *label;    /* the op name profiles show */
    const char *view_label; /* ... when the node is a view in a run: "tk::flatten (view)" */
} xnode;

/* A guard of program.json: lhs == rhs, or lo <= lhs <= hi. */
typedef struct xguard {
    const char *text;
    int range;
    tk_sym lhs, rhs;
    int64_t lo, hi;
} xguard;

/* The parameters uploaded to one device, shared by the sessions there. */
typedef struct devweights {
    tk_device dev;
    tk_ctx *ctx; /* owns the device memory */
    tk_tensor **params;
    tk_tensor **folded; /* per value: the folded nodes' outputs, computed when the weights came */
    struct devweights *next;
} devweights;

struct tk_exec_program {
    const tk_program_model *m;
    char *origin;
    tk_registry *reg; /* where the nodes' ops were resolved (borrowed) */
    tk_ctx *symctx; /* a CPU context owning the parsed expressions; read-only after new */
    int nsyms;
    const char **symnames;
    size_t nvalues;
    xvalue *values;
    xnode *nodes;
    int *outputs; /* per program output: its value */
    size_t nguards;
    xguard *guards;
    tk_safetensors *st;
    const tk_safetensors_entry **pentries;
    pthread_mutex_t lock; /* guards weights */
    devweights *weights;
    size_t nfused;
    size_t nfolded;       /* nodes folded (fold_nodes) */
    char **labels;        /* the profile labels of folded, absorbed and view nodes (node_label) */
    size_t nlabels;
    size_t ntview;        /* values with tview */
    int *out_src;         /* per output: the value it is a strided view of (mark_output_views), or -1 */
};

/* --- preparing a program -------------------------------------------------------------------- */

static int find_value(const tk_exec_program *p, int id)
{
    for (size_t i = 0; i < p->nvalues; i++)
        if (p->values[i].pm->id == id)
            return (int)i;
    return -1;
}

static int parse_dims(tk_exec_program *p, xvalue *v, const tk_sym *vars)
{
    for (int d = 0; d < v->pm->rank; d++) {
        const tk_pm_dim *pd = &v->pm->dims[d];
        v->sym[d] = -1;
        if (!pd->expr) {
            v->dims[d] = TK_SYM(pd->value);
            continue;
        }
        if (tk_sym_parse(p->symctx, pd->expr, p->symnames, vars, p->nsyms, &v->dims[d]))
            return tk_error_set(TK_EINVAL, "%s: value %d dim %d '%s': %s", p->origin, v->pm->id, d, pd->expr,
                                tk_error_last());
        const char *name;
        if (tk_sym_as_var(v->dims[d], &name, NULL, NULL))
            for (int k = 0; k < p->nsyms; k++)
                if (!strcmp(p->symnames[k], name))
                    v->sym[d] = k;
    }
    return 0;
}

static int add_values(tk_exec_program *p, const tk_pm_value *vals, size_t n, int kind, int node)
{
    for (size_t i = 0; i < n; i++) {
        xvalue *v = &p->values[p->nvalues++];
        v->pm = &vals[i];
        v->kind = kind;
        v->index = kind == V_NODE ? node : (int)i;
        v->first = v->last = kind == V_NODE ? node : -1;
        v->output = -1;
        v->src = v->hold = v->feeds = -1;
    }
    return 0;
}

/* "lhs == rhs" or "lo <= expr <= hi", as the exporter writes them. */
static int parse_guard(tk_exec_program *p, xguard *g, const char *text, const tk_sym *vars)
{
    const char *eq = strstr(text, " == "), *le1 = strstr(text, " <= ");
    char *buf = strdup(text);
    int rc = 0;
    if (!buf)
        return tk_error_set(TK_ENOMEM, "out of memory");
    g->text = text;
    if (eq) {
        buf[eq - text] = '\0';
        if (tk_sym_parse(p->symctx, buf, p->symnames, vars, p->nsyms, &g->lhs) ||
            tk_sym_parse(p->symctx, buf + (eq - text) + 4, p->symnames, vars, p->nsyms, &g->rhs))
            rc = tk_error_set(TK_EINVAL, "%s: guard '%s' cannot be read: %s", p->origin, text, tk_error_last());
    } else if (le1 && strstr(le1 + 4, " <= ")) {
        const char *le2 = strstr(le1 + 4, " <= ");
        char *end;
        g->range = 1;
        buf[le2 - text] = '\0';
        g->lo = strtoll(text, &end, 10);
        g->hi = strtoll(le2 + 4, NULL, 10);
        if (end != le1 || tk_sym_parse(p->symctx, buf + (le1 - text) + 4, p->symnames, vars, p->nsyms, &g->lhs))
            rc = tk_error_set(TK_EINVAL, "%s: guard '%s' cannot be read", p->origin, text);
    } else {
        rc = tk_error_set(TK_EINVAL, "%s: guard '%s' is neither 'a == b' nor 'lo <= e <= hi'", p->origin, text);
    }
    free(buf);
    return rc;
}

/* Each node's inputs are earlier values; lifetimes end at the last node reading a value. */
static int link_nodes(tk_exec_program *p)
{
    const tk_program_model *m = p->m;
    for (size_t n = 0; n < m->nnodes; n++) {
        const tk_pm_node *pn = &m->nodes[n];
        xnode *x = &p->nodes[n];
        x->pm = pn;
        x->nin = pn->nin;
        x->label = pn->op;
        if (pn->nin > MAX_NODE_IO || pn->nout > MAX_NODE_IO)
            return tk_error_set(TK_EINVAL, "%s: node %zu (op '%s') has more than %d inputs or outputs", p->origin, n,
                                pn->op, MAX_NODE_IO);
        int rc = tk_op_resolve(&x->op, p->reg, pn->op);
        if (rc) {
            char why[768];
            snprintf(why, sizeof why, "%s", tk_error_last());
            return tk_error_set(rc, "%s: node %zu: %s", p->origin, n, why);
        }
        for (int i = 0; i < pn->nin; i++) {
            x->in[i] = pn->inputs[i] < 0 ? -1 : find_value(p, pn->inputs[i]);
            if (pn->inputs[i] >= 0 && (x->in[i] < 0 || p->values[x->in[i]].first >= (int)n))
                return tk_error_set(TK_EINVAL, "%s: node %zu (op '%s') reads value %d before it is made", p->origin,
                                    n, pn->op, pn->inputs[i]);
            if (x->in[i] >= 0 && p->values[x->in[i]].last < (int)n)
                p->values[x->in[i]].last = (int)n;
        }
        for (int o = 0; o < pn->nout; o++)
            x->out[o] = find_value(p, pn->outputs[o].id);
        if (pn->nattrs) { /* the scalars at their argument's index (the reader checked them) */
            if (!(x->attrs = calloc((size_t)pn->nin, sizeof(tk_value))))
                return tk_error_set(TK_ENOMEM, "out of memory");
            for (int a = 0; a < pn->nattrs; a++) {
                const tk_pm_attr *at = &pn->attrs[a];
                if (at->arg < 0 || at->arg >= pn->nin)
                    return tk_error_set(TK_EINVAL, "%s: node %zu (op '%s'): attribute '%s' is argument %d of %d",
                                        p->origin, n, pn->op, at->name, at->arg, pn->nin);
                tk_value *v = &x->attrs[at->arg];
                switch (at->kind) {
                case TK_VALUE_FLOAT: *v = tk__val_float(at->f); break;
                case TK_VALUE_BOOL: *v = tk__val_bool((int)at->i); break;
                case TK_VALUE_STR: *v = tk__val_str(at->s); break;
                case TK_VALUE_INTS: *v = tk__val_ints(at->ints, at->nints); break;
                default: *v = tk__val_int(at->i); break;
                }
            }
        }
    }
    for (size_t i = 0; i < m->noutputs; i++) {
        int v = find_value(p, m->outputs[i].id);
        if (v < 0)
            return tk_error_set(TK_EINVAL, "%s: output %zu is value %d, which the program does not make", p->origin,
                                i, m->outputs[i].id);
        p->outputs[i] = v;
        if (p->values[v].output < 0)
            p->values[v].output = (int)i;
    }
    return 0;
}

/* x's arguments for tk_op_run_resolved: its tensors from t (by value index; NULL for an optional
 * input left out) into in[], and each argument, scalar (attrs) or tensor, into args[]. */
static void node_args(const xnode *x, tk_tensor *const *t, tk_tensor **in, tk_value *args)
{
    for (int i = 0; i < x->nin; i++) {
        in[i] = x->in[i] < 0 ? NULL : t[x->in[i]];
        args[i] = x->attrs && x->attrs[i].kind != TK_VALUE_TENSOR ? x->attrs[i] : tk__val_tensor(in[i]);
    }
}

/* A node's profile label, "tk::transpose (folded)", kept by the program; NULL with TK_ENOMEM set. */
static const char *node_label(tk_exec_program *p, const char *op, const char *what)
{
    size_t n = strlen(op) + strlen(what) + 4;
    char *label = malloc(n), **grown = realloc(p->labels, (p->nlabels + 1) * sizeof(char *));
    if (grown)
        p->labels = grown;
    if (!label || !grown) {
        free(label);
        tk_error_set(TK_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(label, n, "%s (%s)", op, what);
    return p->labels[p->nlabels++] = label;
}

/* --- constant folding --------------------------------------------------------------------------
 * A node whose tensor inputs are all parameters, or outputs of such nodes, computes the same
 * thing on every run: a weight transposed, split or cast. It runs once per device when the
 * weights are uploaded there (weights_on), its outputs kept beside them; runs skip it and read
 * them. Its outputs' shapes are static (parameters' are). TK_FOLDING=0 turns it off. */
static int fold_nodes(tk_exec_program *p)
{
    if (!tk_env_on("TK_FOLDING"))
        return 0;
    for (size_t n = 0; n < p->m->nnodes; n++) {
        xnode *x = &p->nodes[n];
        int tensors = 0, constant = 1;
        for (int i = 0; i < x->nin && constant; i++) {
            if (x->in[i] < 0)
                continue;
            const xvalue *v = &p->values[x->in[i]];
            tensors++;
            constant = v->kind == V_PARAM || v->folded;
        }
        for (int o = 0; o < x->pm->nout && constant; o++) {
            const xvalue *v = &p->values[x->out[o]];
            for (int d = 0; d < v->pm->rank; d++)
                constant = constant && !v->pm->dims[d].expr;
        }
        if (!tensors || !constant)
            continue;
        x->folded = 1;
        for (int o = 0; o < x->pm->nout; o++)
            p->values[x->out[o]].folded = 1;
        p->nfolded++;
        if (!(x->label = node_label(p, x->pm->op, "folded")))
            return TK_ENOMEM;
    }
    return 0;
}

/* Runs the folded nodes on ctx over the parameters there, into folded[value] (which owns them). */
static int run_folded(const tk_exec_program *p, tk_ctx *ctx, tk_tensor **params, tk_tensor **folded)
{
    tk_tensor *in[MAX_NODE_IO], *out[MAX_NODE_IO];
    tk_value args[MAX_NODE_IO];
    tk_tensor **t = calloc(p->nvalues + 1, sizeof(*t)); /* every value a folded node may read */
    int rc = t ? 0 : tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t v = 0; t && v < p->nvalues; v++)
        t[v] = p->values[v].kind == V_PARAM ? params[p->values[v].index] : NULL;
    for (size_t n = 0; !rc && n < p->m->nnodes; n++) {
        const xnode *x = &p->nodes[n];
        if (!x->folded)
            continue;
        node_args(x, t, in, args);
        for (int o = 0; o < x->pm->nout; o++)
            out[o] = NULL;
        if ((rc = tk_op_run_resolved(ctx, &x->op, x->pm->file, x->pm->line, args, x->nin, out, x->pm->nout))) {
            char why[768];
            snprintf(why, sizeof why, "%s", tk_error_last());
            rc = tk_error_set(rc, "%s: node %zu (op '%s', folded with the weights): %s", p->origin, n, x->pm->op, why);
            break;
        }
        for (int o = 0; o < x->pm->nout; o++)
            folded[x->out[o]] = t[x->out[o]] = out[o];
    }
    free(t);
    return rc;
}

/* --- fusion ------------------------------------------------------------------------------------
 * A tk::linear whose result only the next node reads, through tk::gelu or tk::add with a tensor of
 * the result's shape, runs as one fused built-in (tk_linear_fused_def): the linear's node takes
 * the pair's inputs and the second node's output, the second node is skipped, and the result in
 * between is never stored. Only adjacent pairs: the fused node then writes its output one node
 * early, when no other node runs in between. TK_FUSION=0 turns it off (comparisons). Then fuse_mlp. */

static int same_shape(const xvalue *a, const xvalue *b)
{
    if (a->pm->dtype != b->pm->dtype || a->pm->rank != b->pm->rank)
        return 0;
    for (int d = 0; d < a->pm->rank; d++) {
        const tk_pm_dim *x = &a->pm->dims[d], *y = &b->pm->dims[d];
        if ((x->expr == NULL) != (y->expr == NULL) || (x->expr ? strcmp(x->expr, y->expr) : x->value != y->value))
            return 0;
    }
    return 1;
}

/* How many times the nodes read value v. */
static int readers(const tk_exec_program *p, int v)
{
    int n = 0;
    for (size_t k = 0; k < p->m->nnodes; k++)
        for (int i = 0; i < p->nodes[k].nin; i++)
            n += p->nodes[k].in[i] == v;
    return n;
}

/* A constant dim of value v (-1 where symbolic). */
static int64_t const_dim(const xvalue *v, int d)
{
    return d < v->pm->rank && !v->pm->dims[d].expr ? v->pm->dims[d].value : -1;
}

/* Then a tk::_linear_gelu whose result only the next node that runs reads, as the x of a
 * tk::_linear_add, is one fully fused MLP (tk_mlp_fused_def, kernels/mlp.cu) where its widths
 * allow: the first node takes (residual, x, w1, b1, w2, b2, h), the second is skipped; h, the
 * hidden layer, keeps its place in the memory of sessions where the op may run as the pairs
 * (mlp_hidden; none where the kernel takes every call: tk_mlp_kernel_only).
 * TK_FUSION=pairs stops at the pairs (comparisons). */
static int fuse_mlp(tk_exec_program *p)
{
    size_t nn = p->m->nnodes;
    for (size_t n = 0; n < nn; n++) {
        xnode *a = &p->nodes[n], *b = NULL;
        size_t k = n + 1;
        while (k < nn && p->nodes[k].absorbed)
            k++;
        if (a->absorbed || a->folded || k == nn)
            continue;
        b = &p->nodes[k];
        /* the values (where the ops are tk_mlp_fused_def's, x is a's input 0, w1 its 1, h b's input 1,
         * w2 its 2), then the ops with the widths */
        int h = a->out[0];
        if (b->folded || a->pm->nout != 1 || b->pm->nout != 1 || a->nin < 2 || b->nin < 3 || a->in[1] < 0 ||
            b->in[2] < 0 || b->in[1] != h || b->in[0] < 0 || p->values[h].output >= 0 || readers(p, h) != 1)
            continue;
        const xvalue *w1 = &p->values[a->in[1]], *w2 = &p->values[b->in[2]];
        int64_t d = const_dim(w1, 1), hidden = const_dim(w1, 0);
        if (w1->pm->rank != 2 || w2->pm->rank != 2 || const_dim(w2, 0) != d || const_dim(w2, 1) != hidden)
            continue;
        const tk_op_def *fused = tk_mlp_fused_def(a->op.def, b->op.def, p->values[h].pm->dtype, d, hidden);
        tk_resolved_op op;
        if (!fused || tk_op_resolve(&op, NULL, fused->name)) {
            tk_error_clear();
            continue;
        }
        /* h stays in the session's memory where the op may run the pairs into it (another GPU than
         * sm_90, or fewer rows than TK_MLP_MIN_ROWS): elsewhere it is left out (tk_mlp_kernel_only) */
        int in[7] = {b->in[0], a->in[0], a->in[1], a->nin > 2 ? a->in[2] : -1, b->in[2], b->nin > 3 ? b->in[3] : -1,
                     h};
        a->op = op;
        memcpy(a->in, in, sizeof in);
        a->nin = 7;
        a->out[0] = b->out[0];
        a->label = fused->name;
        p->values[h].mlp_hidden = 1;
        p->values[b->out[0]].first = (int)n;
        b->absorbed = 1;
        p->nfused++;
        /* the second node and the one fused into it (its pair's tk::add, right after it) run here */
        char what[48];
        snprintf(what, sizeof what, "fused into node %zu", n);
        for (size_t j = k; j < nn && j <= k + 1 && (j == k || p->nodes[j].absorbed); j++)
            if (!(p->nodes[j].label = node_label(p, p->nodes[j].pm->op, what)))
                return TK_ENOMEM;
    }
    return 0;
}

static int fuse_nodes(tk_exec_program *p)
{
    const char *mode = getenv("TK_FUSION"); /* "0": no fusion; "pairs": no fuse_mlp */
    size_t nn = p->m->nnodes;
    if (mode && !strcmp(mode, "0"))
        return 0;
    for (size_t n = 0; n + 1 < nn; n++) {
        xnode *a = &p->nodes[n], *b = &p->nodes[n + 1];
        const tk_op_def *fused = tk_linear_fused_def(a->op.def, b->op.def);
        if (!fused || a->absorbed || a->folded || b->folded || a->attrs || a->pm->nout != 1 || b->pm->nout != 1 ||
            a->nin + 1 > MAX_NODE_IO)
            continue;
        int h = a->out[0], r = -1, bnin = b->nin;
        if (p->values[h].output >= 0 || readers(p, h) != 1)
            continue;
        if (b->attrs) { /* only tk::gelu's approximate="tanh", the epilogue's form */
            if (bnin != 2 || b->in[1] >= 0 || b->attrs[1].kind != TK_VALUE_STR || strcmp(b->attrs[1].u.s, "tanh"))
                continue;
            bnin = 1;
        }
        if (bnin == 2) { /* tk::add: h and a residual of h's shape */
            r = b->in[0] == h ? b->in[1] : b->in[0];
            if (r < 0 || r == h || !same_shape(&p->values[r], &p->values[h]))
                continue;
        } else if (bnin != 1 || b->in[0] != h) {
            continue;
        }
        tk_resolved_op op;
        if (tk_op_resolve(&op, NULL, fused->name)) {
            tk_error_clear();
            continue;
        }
        a->op = op;
        if (r >= 0) {
            memmove(a->in + 1, a->in, sizeof(int) * (size_t)a->nin);
            a->in[0] = r;
            a->nin++;
        }
        a->out[0] = b->out[0];
        a->label = fused->name;
        p->values[b->out[0]].first = (int)n;
        p->values[h].fused_away = 1;
        b->absorbed = 1;
        p->nfused++;
        char what[48]; /* the skipped node's profile label: "tk::gelu (fused into node 2)" */
        snprintf(what, sizeof what, "fused into node %zu", n);
        if (!(b->label = node_label(p, b->pm->op, what)))
            return TK_ENOMEM;
    }
    return mode && !strcmp(mode, "pairs") ? 0 : fuse_mlp(p);
}

/* --- views ---------------------------------------------------------------------------------------
 * Tensors are contiguous, so a layout node (flatten, unflatten, narrow, permute, transpose,
 * expand) whose output is a contiguous run of its input's bytes needs no copy: each plan asks
 * tk_layout_view (kernels/layout_ops.c) for its shapes and, where it answers yes, binds the
 * output to the input's storage at the run's offset and skips the node. Here the candidates are
 * marked, and the storage they read stays alive (hold) as long as any view of it is read. A
 * permute or transpose every reader of which takes strided tensors there (tk_op_takes_strided:
 * tk::matmul's b) is marked tview: where its result is not contiguous, each plan binds it as a
 * strided view of its input (strided_view) and the readers read it in place. Not for
 * program outputs (a caller's tensor of its own), folded nodes (computed once anyway), or programs
 * with an op that writes its input (a view would see the write, a copy does not). TK_VIEWS=0
 * turns it off (comparisons). */
static int mark_views(tk_exec_program *p)
{
    size_t nn = p->m->nnodes;
    if (!tk_env_on("TK_VIEWS"))
        return 0;
    for (size_t n = 0; n < nn; n++)
        for (int i = 0; i < p->nodes[n].nin && i < TK_SCHEMA_MAX; i++)
            if (p->nodes[n].op.schema.mutated[i])
                return 0;
    for (size_t n = 0; n < nn; n++) {
        xnode *x = &p->nodes[n];
        uint64_t at;
        if (x->absorbed || x->folded || x->pm->nout != 1 || x->nin < 1 || x->in[0] < 0 ||
            !tk_layout_view(x->op.def, NULL, 0, 0, NULL, 0, &at))
            continue;
        int v = x->out[0];
        if (p->values[v].output >= 0 || p->values[v].folded || p->values[x->in[0]].fused_away)
            continue;
        p->values[v].src = x->in[0];
        for (int u = x->in[0]; u >= 0; u = p->values[u].src)
            if (p->values[u].hold < p->values[v].last)
                p->values[u].hold = p->values[v].last;
        if (!(x->view_label = node_label(p, x->pm->op, "view")))
            return TK_ENOMEM;
        /* every reader takes strided tensors there (tk::matmul's b, tk::sdpa's q, k, v): a
         * transposed view, per plan */
        int readers_take = 0, others = 0;
        for (size_t k = n + 1; k <= (size_t)p->values[v].last && k < nn; k++)
            for (int i = 0; i < p->nodes[k].nin; i++)
                if (p->nodes[k].in[i] == v) {
                    if (!p->nodes[k].absorbed && !p->nodes[k].folded &&
                        tk_op_takes_strided(p->nodes[k].op.def, i, 0, NULL, NULL))
                        readers_take++;
                    else
                        others++;
                }
        if (readers_take && !others) {
            p->values[v].tview = 1;
            p->ntview++;
        }
    }
    return 0;
}

/* Output views: a program output that a tk::narrow node cuts out of a value of its own (made by
 * a node, read by nothing after it is cut) can be a strided view of that value's storage. A
 * session with output_views allocates such outputs that way (bind_tensors), and a run given one
 * back computes the value straight into its storage and skips the narrow (run_nodes): GPT-2's
 * logits stay in their padded rows. Marked here; each plan computes the strides. */
static int mark_output_views(tk_exec_program *p)
{
    for (size_t i = 0; i < p->m->noutputs; i++) {
        int o = p->outputs[i];
        const xvalue *x = &p->values[o];
        uint64_t off;
        p->out_src[i] = -1;
        if (x->kind != V_NODE || x->output != (int)i || x->folded || x->fused_away || readers(p, o))
            continue;
        const xnode *n = &p->nodes[x->index];
        if (n->absorbed || n->folded || n->pm->nout != 1 || n->nin < 1 || n->in[0] < 0 ||
            !tk_layout_strided(n->op.def, NULL, 0, 0, NULL, 0, NULL, &off))
            continue;
        xvalue *v = &p->values[n->in[0]];
        if (v->kind != V_NODE || v->output >= 0 || v->folded || v->fused_away || v->src >= 0 || v->feeds >= 0)
            continue;
        p->out_src[i] = n->in[0];
        v->feeds = (int)i;
        if (!(p->nodes[x->index].view_label = node_label(p, n->pm->op, "output view")))
            return TK_ENOMEM;
    }
    return 0;
}

/* "f32 [64, 128]", for messages. */
static const char *shape_text(char *buf, size_t n, tk_dtype dtype, int rank, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, n, "%s [", tk_dtype_name(dtype));
    for (int i = 0; i < rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}

/* Every parameter is in the weights with the dtype and shape the program declares. */
static int check_params(tk_exec_program *p)
{
    const tk_program_model *m = p->m;
    char a[160], b[160];
    for (size_t i = 0; i < m->nparams; i++) {
        const tk_pm_value *pv = &m->params[i];
        const tk_safetensors_entry *e = tk_safetensors_find(p->st, pv->name);
        if (!e)
            return tk_error_set(TK_EINVAL, "%s: parameter '%s' is not in weights.safetensors", p->origin, pv->name);
        int64_t shape[TK_MAX_DIMS];
        int same = e->supported && e->tk_dtype == pv->dtype && e->rank == pv->rank;
        for (int d = 0; d < pv->rank; d++) {
            shape[d] = pv->dims[d].value;
            same = same && !pv->dims[d].expr && d < e->rank && e->shape[d] == shape[d];
        }
        if (!same)
            return tk_error_set(TK_EINVAL, "%s: parameter '%s' is %s in weights.safetensors, the program declares %s",
                                p->origin, pv->name,
                                e->supported ? shape_text(a, sizeof a, e->tk_dtype, e->rank, e->shape) : e->dtype,
                                shape_text(b, sizeof b, pv->dtype, pv->rank, shape));
        p->pentries[i] = e;
    }
    return 0;
}

static int prepare(tk_exec_program *p, const void *weights, size_t len)
{
    const tk_program_model *m = p->m;
    tk_sym vars[64];
    size_t nvals = m->ninputs + m->nparams;
    char stname[1200];
    int rc;
    if (m->nsymbols > 64)
        return tk_error_set(TK_EUNSUPPORTED, "%s: %zu symbols, at most 64", p->origin, m->nsymbols);
    for (size_t n = 0; n < m->nnodes; n++)
        nvals += (size_t)m->nodes[n].nout;
    p->nsyms = (int)m->nsymbols;
    p->symnames = calloc(m->nsymbols + 1, sizeof(char *));
    p->values = calloc(nvals + 1, sizeof(xvalue));
    p->nodes = calloc(m->nnodes + 1, sizeof(xnode));
    p->outputs = calloc(m->noutputs + 1, sizeof(int));
    p->out_src = calloc(m->noutputs + 1, sizeof(int));
    p->guards = calloc(m->nguards + 1, sizeof(xguard));
    p->pentries = calloc(m->nparams + 1, sizeof(*p->pentries));
    if (!p->symnames || !p->values || !p->nodes || !p->outputs || !p->out_src || !p->guards || !p->pentries)
        return tk_error_set(TK_ENOMEM, "out of memory");
    if ((rc = tk_ctx_new(&p->symctx, (tk_device){TK_DEVICE_CPU, 0})))
        return rc;
    for (int i = 0; i < p->nsyms; i++) {
        p->symnames[i] = m->symbols[i].name;
        vars[i] = tk_sym_var(p->symctx, m->symbols[i].name, m->symbols[i].min, m->symbols[i].max);
        if (!vars[i].expr)
            return tk_error_set(TK_EINVAL, "%s: symbol '%s': %s", p->origin, m->symbols[i].name, tk_error_last());
    }
    add_values(p, m->inputs, m->ninputs, V_INPUT, -1);
    add_values(p, m->params, m->nparams, V_PARAM, -1);
    for (size_t n = 0; n < m->nnodes; n++)
        add_values(p, m->nodes[n].outputs, (size_t)m->nodes[n].nout, V_NODE, (int)n);
    for (size_t i = 0; i < p->nvalues; i++)
        if ((rc = parse_dims(p, &p->values[i], vars)))
            return rc;
    for (size_t i = 0; i < m->nguards; i++, p->nguards++)
        if ((rc = parse_guard(p, &p->guards[i], m->guards[i], vars)))
            return rc;
    if ((rc = link_nodes(p)) || (rc = fold_nodes(p)) || (rc = fuse_nodes(p)) || (rc = mark_views(p)) ||
        (rc = mark_output_views(p)))
        return rc;
    snprintf(stname, sizeof stname, "%s:weights.safetensors", p->origin);
    if (m->nparams && !weights)
        return tk_error_set(TK_EINVAL, "%s: the program has parameters but no weights", p->origin);
    if (weights && (rc = tk_safetensors_parse(&p->st, weights, len, stname)))
        return rc;
    return check_params(p);
}

int tk_exec_program_new(tk_exec_program **out, const tk_program_model *m, const void *weights, size_t len,
                        const char *origin, tk_registry *reg)
{
    *out = NULL;
    if (!m)
        return tk_error_set(TK_EINVAL, "tk_exec_program_new: no program");
    tk_exec_program *p = calloc(1, sizeof(*p));
    if (!p)
        return tk_error_set(TK_ENOMEM, "out of memory");
    pthread_mutex_init(&p->lock, NULL);
    p->m = m;
    p->reg = reg;
    p->origin = strdup(origin ? origin : m->name);
    int rc = p->origin ? prepare(p, weights, len) : tk_error_set(TK_ENOMEM, "out of memory");
    if (rc) {
        tk_exec_program_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static void devweights_free(devweights *w, size_t nparams, size_t nvalues)
{
    if (!w)
        return;
    for (size_t i = 0; w->params && i < nparams; i++)
        tk_tensor_free(w->params[i]);
    free(w->params);
    for (size_t i = 0; w->folded && i < nvalues; i++)
        tk_tensor_free(w->folded[i]);
    free(w->folded);
    tk_ctx_free(w->ctx);
    free(w);
}

void tk_exec_program_free(tk_exec_program *p)
{
    if (!p)
        return;
    while (p->weights) {
        devweights *w = p->weights;
        p->weights = w->next;
        devweights_free(w, p->m->nparams, p->nvalues);
    }
    tk_safetensors_free(p->st);
    tk_ctx_free(p->symctx);
    free(p->symnames);
    free(p->values);
    for (size_t n = 0; p->nodes && n < p->m->nnodes; n++)
        free(p->nodes[n].attrs);
    free(p->nodes);
    for (size_t i = 0; i < p->nlabels; i++)
        free(p->labels[i]);
    free(p->labels);
    free(p->out_src);
    free(p->outputs);
    free(p->guards);
    free(p->pentries);
    free(p->origin);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The parameters on dev, uploaded by the first session there. */
static int weights_on(tk_exec_program *p, tk_device dev, tk_tensor ***out, tk_tensor ***folded)
{
    int rc = 0;
    devweights *w = NULL;
    pthread_mutex_lock(&p->lock);
    for (devweights *x = p->weights; x; x = x->next) {
        if (x->dev.kind == dev.kind && x->dev.index == dev.index) {
            *out = x->params;
            *folded = x->folded;
            goto done;
        }
    }
    if (!(w = calloc(1, sizeof(*w))) || !(w->params = calloc(p->m->nparams + 1, sizeof(tk_tensor *))) ||
        !(w->folded = calloc(p->nvalues + 1, sizeof(tk_tensor *)))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    w->dev = dev;
    if ((rc = tk_ctx_new(&w->ctx, dev)))
        goto done;
    for (size_t i = 0; i < p->m->nparams; i++)
        if ((rc = tk_safetensors_load(&w->params[i], w->ctx, dev, p->st, p->pentries[i])))
            goto done;
    if (p->nfolded && ((rc = run_folded(p, w->ctx, w->params, w->folded)) || (rc = tk_ctx_sync(w->ctx))))
        goto done;
    w->next = p->weights;
    p->weights = w;
    *out = w->params;
    *folded = w->folded;
    w = NULL;
done:
    devweights_free(w, p->m->nparams, p->nvalues);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* --- sessions ----------------------------------------------------------------------------------- */

/* A plan's staged graph: none yet, waiting for the capture thread, ready, or never (a capture
 * failed: an op that allocates or synchronizes runs eagerly for that signature). */
enum { GRAPH_NONE, GRAPH_QUEUED, GRAPH_READY, GRAPH_NEVER };

/* At most this many inputs plus outputs for direct graphs. */
#define TK_DIRECT_MAX 32
/* Plans kept per session by default (each a few hundred bytes plus, on a GPU, its graph): enough
 * that a batch drawn anew on every call from [1, 1024] stops missing once each size was seen.
 * tk_session_options.max_shapes sets another bound; symbol spaces up to that many signatures are
 * captured whole, ahead of requests (prefill). */
#define DEFAULT_MAX_PLANS 1024
/* Sessions that may hold more graphs than this (the signatures of their symbol space, at most
 * max_shapes) share one instantiated graph among those of one form
 * (runtime/cuda_family.c): tokmlp bound and prefilled over its 32,768 signatures had a peak RSS of
 * 1.57 GB with a graph each and 0.28 GB in families, ready 3.1-3.8 s against 0.58 s after the bind,
 * its first calls as fast; but a member launched after another sets its kernels' grids and
 * arguments first, which cost the mlp's uniform stream (three kernels a graph) 3 us a call on one
 * thread and 9 on four (H100, bench/serving/JOURNAL.md, nineteenth session), where its 1,024
 * graphs take 40 MB. $TK_GRAPH_FAMILIES=1 shares them in every session, 0 in none. */
#define FAMILY_MIN_PLANS 4096
/* The automatic prefill starts once requests have brought this many signatures: its shapes vary. */
#define PREFILL_AFTER 16
/* The warm-up walks at most this many signatures (and at most half the plans a session keeps). */
#define WARM_MAX 256
/* Under traffic the capture thread waits this long after a capture before the next (microseconds;
 * $TK_CAPTURE_PACE_US sets another, 0 none). A capture holds the driver's locks for hundreds of
 * microseconds at a time (the instantiation and upload of its graph), and a request that needs the
 * driver meanwhile waits: unpaced, the mlp's first calls of new sizes had a p99 of 416 to 469 us
 * while the capture thread worked beside them, paced 80 to 93 (bench/serving/JOURNAL.md, run95). A
 * capture with no request since the thread's last capture or pause is not followed by a pause: an
 * idle session (the warm-up, a prefill waited for) captures at full speed. */
#define CAPTURE_PACE_US 5000

/* The intermediates of one input-shape signature: every value's shape, and where the values
 * kept in the arena start. */
typedef struct plan {
    int64_t key[64];       /* the symbols' values */
    uint64_t hash;
    int64_t *shapes;       /* nvalues * TK_MAX_DIMS */
    size_t *offset;        /* SIZE_MAX: not in the arena */
    size_t *size;          /* bytes of each value */
    uint64_t *view_at;     /* a view's start in its source's bytes (mark_views); UINT64_MAX: none */
    int64_t *ostr;         /* per output view (out_src): its strides, TK_MAX_DIMS each */
    uint64_t *ooff;        /* ... and its first element's offset in the source's bytes */
    unsigned char *vst;    /* per value (programs with tview values): a strided view in this plan */
    int64_t *vstr;         /* ... its strides, TK_MAX_DIMS each */
    size_t total;
    size_t runs;
    int graph_state;       /* under the session's capture lock */
    void *graph;           /* CUgraphExec of the staged nodes */
    unsigned graph_arena;  /* the arena generation the graph's pointers belong to */
    /* The direct graph: captured with the caller's input and output pointers themselves, for
     * callers that run the same shape on the same tensors again and again (a serving loop, a
     * benchmark, a server's buffers at the largest shape), which then skip the staging copies.
     * Asked of the capture thread once two consecutive runs brought the same pointers (ptrs); the
     * graph bakes dptrs and runs only for those. Other pointers take the staged path. */
    void *ptrs[TK_DIRECT_MAX];
    size_t nptrs;
    size_t same_ptr_runs;
    int direct_state;              /* under the session's lock, as everything below */
    void *direct;
    void *dptrs[TK_DIRECT_MAX];    /* the pointers direct bakes (or will, while queued) */
    uint64_t mask, dmask;          /* outputs passed as output views (ptrs, dptrs): written in place */
    unsigned direct_arena;
    int in_queue;
    struct plan *prev, *next; /* most recently used first */
    struct plan *hnext;       /* the hash bucket's chain */
    struct plan *qnext;       /* the capture queue */
} plan;

struct tk_session {
    tk_exec_program *p;
    tk_ctx *ctx;
    tk_tensor **params;
    tk_tensor **folded; /* per value: the folded nodes' outputs on this device (the program's) */
    int staged;     /* GPU: graphs bake arena pointers only; inputs and outputs are copied around them */
    int no_mlp_hidden; /* tk::_mlp takes every call here (tk_mlp_kernel_only): its hidden tensors are left out */
    int graphs;
    int profiling;
    void *arena;
    size_t arena_size, arena_grows;
    unsigned arena_gen;
    plan *plans, *oldest; /* most recently used first */
    size_t nplans, max_plans;
    plan **buckets;       /* nbuckets chains, a power of two at least twice max_plans */
    size_t nbuckets;
    tk_tensor *views; /* nvalues tensors over the arena for a run (no allocation per call) */
    tk_tensor **t;    /* nvalues: each value's tensor in a run */
    tk_node_profile *profile;
    size_t nprofile;
    void **events;  /* 2 per node, made at the first profiled GPU run */
    tk_exec_mode last_mode;
    void (*release)(void *arg); /* tk_exec_session_set_owner */
    void *release_arg;
    /* The capture thread: the staged graph of a signature is captured there, on a context of its
     * own, after the signature's first (eager) run, so no request waits for a capture. It reads
     * the arena, which stays put while a capture is under way (arena_reserve waits). */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int capturer;           /* the thread runs */
    int stop;
    pthread_t thread;
    plan *queue, *queue_tail;
    plan *in_capture;
    size_t captures;        /* staged graphs captured */
    size_t direct_captures; /* direct graphs captured */
    size_t capture_failures; /* graphs the prefill could not capture (those signatures stay eager) */
    /* tk_session_bind: the caller's buffers (inputs, then outputs); the prefill captures each
     * signature's direct graph on them instead of its staged graph */
    int bound;
    void *bound_ptrs[TK_DIRECT_MAX];
    int last_direct;        /* the last run replayed a direct graph */
    int output_views;       /* tk_session_options.output_views */
    /* Prefill: the capture thread also plans and captures every signature of a small symbol
     * space (at most max_plans) that no request brought yet, in order, requests first; so that a
     * server's later first calls of a size replay too. It starts once the session has run
     * PREFILL_AFTER signatures (TK_PREFILL_AUTO) or at creation (TK_PREFILL_NOW).
     * Warm-up: a TK_PREFILL_AUTO session on a GPU first walks a few signatures from creation on,
     * each symbol at its minimum, the powers of two above it and its maximum (walk_step), and
     * captures them as the prefill would: what the first run of a size bucket does once per
     * device (cuBLASLt's heuristic, a module loaded: milliseconds) is done then, off the request
     * path, for every bucket a later size falls in. */
    int walk_warm;          /* the walk under way is the warm-up */
    atomic_ulong calls;     /* tk_session_run calls begun: the capture thread's sign of traffic */
    long pace_us;           /* CAPTURE_PACE_US or $TK_CAPTURE_PACE_US */
    size_t requested;       /* plans made by requests: PREFILL_AFTER counts these */
    int prefill_allowed;    /* graphs on and the space small enough */
    int space_large;        /* more signatures than max_plans: a staged graph waits for a
                               signature's second run (most come once), so captures that would
                               never replay do not compete with requests */
    int prefill_on, prefill_done;
    int prefill_walked; /* the walk passed its last signature; done once that one is handed out */
    int64_t prefill_key[64];
    tk_ctx *cap_ctx;
    tk_tensor *cap_views;
    tk_tensor **cap_t;
};

static int plan_new(plan **out, tk_session *s, const int64_t *key);
static int arena_reserve(tk_session *s, size_t size);
static void plan_free(tk_session *s, plan *pl);

/* The value after v of a symbol whose largest is max in a walk of its values: every value (the
 * prefill), or (warm) the powers of two above v's and max last; -1 past max. */
static int64_t walk_step(int warm, int64_t v, int64_t max)
{
    if (v >= max)
        return -1;
    if (!warm)
        return v + 1;
    int64_t p = 1;
    while (p <= v && p < max && p < ((int64_t)1 << 62))
        p <<= 1;
    return p < max ? p : max;
}

/* The arena is sized up front for the largest shapes the program allows (every symbol at its
 * maximum), so a growing batch does not reallocate it (and recapture every graph) on the request
 * path; where that size is not to be had, it grows on demand as before. */
static void arena_presize(tk_session *s)
{
    const tk_program_model *m = s->p->m;
    int64_t key[64] = {0};
    plan *pl = NULL;
    for (size_t k = 0; k < m->nsymbols; k++)
        key[k] = m->symbols[k].max;
    if (plan_new(&pl, s, key) == 0)
        arena_reserve(s, pl->total);
    plan_free(s, pl);
    tk_error_clear();
}

static int capturer_start_locked(tk_session *s);

int tk_exec_session_new(tk_session **out, tk_exec_program *p, tk_device dev, const tk_session_options *opts)
{
    static const tk_session_options defaults = TK_SESSION_OPTIONS_INIT;
    *out = NULL;
    if (!p)
        return tk_error_set(TK_EINVAL, "tk_session_new: no program");
    if (!opts)
        opts = &defaults;
    if (opts->version < 1 || opts->version > TK_SESSION_OPTIONS_VERSION)
        return tk_error_set(TK_EINVAL, "tk_session_new_ex: options version %u, this libtkrt knows versions 1 to %u "
                                       "(initialize them with TK_SESSION_OPTIONS_INIT)",
                            opts->version, (unsigned)TK_SESSION_OPTIONS_VERSION);
    int output_views = opts->version >= 2 && opts->output_views; /* version 1 has no such field */
    if (opts->prefill != TK_PREFILL_AUTO && opts->prefill != TK_PREFILL_NOW && opts->prefill != TK_PREFILL_OFF)
        return tk_error_set(TK_EINVAL, "tk_session_new_ex: prefill %d is not TK_PREFILL_AUTO, _NOW or _OFF",
                            (int)opts->prefill);
    if (opts->max_shapes > TK_SESSION_MAX_SHAPES)
        return tk_error_set(TK_EINVAL, "tk_session_new_ex: max_shapes %zu is above %zu", opts->max_shapes,
                            (size_t)TK_SESSION_MAX_SHAPES);
    tk_session *s = calloc(1, sizeof(*s));
    if (!s)
        return tk_error_set(TK_ENOMEM, "out of memory");
    s->p = p;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca; /* the capture thread's paced waits count on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    s->pace_us = (long)tk_env_count("TK_CAPTURE_PACE_US", CAPTURE_PACE_US);
    int rc = 0;
    s->max_plans = opts->max_shapes ? opts->max_shapes : DEFAULT_MAX_PLANS;
    s->output_views = output_views;
    for (s->nbuckets = 16; s->nbuckets < 2 * s->max_plans; s->nbuckets <<= 1)
        ;
    if (!(s->views = calloc(p->nvalues + 1, sizeof(tk_tensor))) || !(s->t = calloc(p->nvalues + 1, sizeof(tk_tensor *))) ||
        !(s->buckets = calloc(s->nbuckets, sizeof(plan *))))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    if (!rc)
        rc = tk_ctx_new(&s->ctx, dev);
    if (!rc)
        rc = weights_on(p, s->ctx->device, &s->params, &s->folded);
    if (rc) {
        tk_session_free(s);
        return rc;
    }
    s->staged = s->ctx->device.kind == TK_DEVICE_CUDA;
    s->no_mlp_hidden = tk_mlp_kernel_only(s->ctx);
    s->graphs = s->staged && tk_cuda_graphs_available();
    if (s->staged)
        arena_presize(s);
    /* the symbol space: small enough to capture whole? */
    const tk_program_model *m = p->m;
    uint64_t space = 1, limit = s->max_plans;
    for (size_t k = 0; k < m->nsymbols && space <= limit; k++) {
        s->prefill_key[k] = m->symbols[k].min;
        uint64_t n = m->symbols[k].max >= m->symbols[k].min ? (uint64_t)(m->symbols[k].max - m->symbols[k].min) + 1 : 0;
        space = n && space <= limit / n ? space * n : limit + 1;
    }
    s->prefill_allowed = s->graphs && m->nsymbols > 0 && space <= limit && opts->prefill != TK_PREFILL_OFF;
    s->space_large = space > limit;
    if (s->graphs) { /* families where the session may hold many graphs: its space and its bound */
        int forced = tk_env_force("TK_GRAPH_FAMILIES");
        uint64_t held = s->space_large ? limit : space;
        tk_cuda_share_graphs(s->ctx, forced >= 0 ? forced : held > FAMILY_MIN_PLANS);
    }
    uint64_t warm = 1; /* the warm-up's signatures */
    for (size_t k = 0; k < m->nsymbols && warm <= WARM_MAX; k++) {
        uint64_t n = 1;
        for (int64_t v = m->symbols[k].min; n <= WARM_MAX && (v = walk_step(1, v, m->symbols[k].max)) >= 0;)
            n++;
        warm *= n;
    }
    int warm_up = s->graphs && m->nsymbols > 0 && opts->prefill == TK_PREFILL_AUTO && warm <= WARM_MAX &&
                  warm <= s->max_plans / 2;
    int prefill_now = s->prefill_allowed && opts->prefill == TK_PREFILL_NOW;
    if (prefill_now || warm_up) {
        pthread_mutex_lock(&s->lock);
        if (capturer_start_locked(s) == 0) {
            s->walk_warm = !prefill_now;
            for (size_t k = 0; k < m->nsymbols; k++)
                s->prefill_key[k] = m->symbols[k].min;
            s->prefill_on = 1;
            pthread_cond_signal(&s->cond);
        }
        pthread_mutex_unlock(&s->lock);
    }
    *out = s;
    return 0;
}

static void plan_free(tk_session *s, plan *pl)
{
    if (!pl)
        return;
    tk_cuda_graph_free(s->ctx, pl->graph);
    tk_cuda_graph_free(s->ctx, pl->direct);
    free(pl->shapes);
    free(pl->offset);
    free(pl->size);
    free(pl->view_at);
    free(pl->ostr);
    free(pl->ooff);
    free(pl->vst);
    free(pl->vstr);
    free(pl);
}

static void arena_free(tk_session *s)
{
    if (!s->arena)
        return;
    if (s->ctx->device.kind == TK_DEVICE_CUDA)
        tk_cuda_free(s->ctx, s->arena);
    else
        free(s->arena);
    s->arena = NULL;
    s->arena_size = 0;
}

static void events_free(tk_session *s)
{
    for (size_t i = 0; s->events && i < 2 * s->p->m->nnodes; i++)
        tk_cuda_event_free(s->ctx, s->events[i]);
    free(s->events);
    s->events = NULL;
}

static void capturer_stop(tk_session *s)
{
    if (!s->capturer)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->capturer = 0;
}

void tk_session_free(tk_session *s)
{
    if (!s)
        return;
    capturer_stop(s);
    if (s->ctx) {
        /* graphs and buffers may still be in use by queued work */
        if (s->ctx->device.kind == TK_DEVICE_CUDA)
            tk_cuda_sync(s->ctx);
        while (s->plans) {
            plan *pl = s->plans;
            s->plans = pl->next;
            plan_free(s, pl);
        }
        events_free(s);
        arena_free(s);
    }
    free(s->profile);
    tk_ctx_free(s->cap_ctx);
    free(s->cap_views);
    free(s->cap_t);
    free(s->views);
    free(s->t);
    free(s->buckets);
    tk_ctx_free(s->ctx);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    void (*release)(void *) = s->release;
    void *arg = s->release_arg;
    free(s);
    if (release)
        release(arg);
}

void tk_exec_session_set_owner(tk_session *s, void (*release)(void *arg), void *arg)
{
    s->release = release;
    s->release_arg = arg;
}

tk_ctx *tk_session_ctx(tk_session *s)
{
    return s ? s->ctx : NULL;
}

int tk_session_set_profiling(tk_session *s, int on)
{
    if (!s)
        return tk_error_set(TK_EINVAL, "tk_session_set_profiling: no session");
    s->profiling = on != 0;
    return 0;
}

size_t tk_session_profile(const tk_session *s, const tk_node_profile **nodes)
{
    if (nodes)
        *nodes = s ? s->profile : NULL;
    return s ? s->nprofile : 0;
}

void tk_exec_session_stats(const tk_session *s, tk_exec_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!s)
        return;
    st->arena_bytes = s->arena_size;
    st->arena_grows = s->arena_grows;
    st->last_mode = s->last_mode;
    st->fused = s->p->nfused;
    st->folded = s->p->nfolded;
    /* the capture thread adds plans and graphs */
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    st->plans = s->nplans;
    st->planned = s->requested;
    st->captures = s->captures;
    st->direct_captures = s->direct_captures;
    st->last_direct = s->last_direct;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
    if (s->ctx)
        tk_cuda_graph_families(s->ctx, &st->families, &st->family_members);
}

void tk_exec_session_set_graphs(tk_session *s, int on)
{
    if (s)
        s->graphs = on && s->staged && tk_cuda_graphs_available();
}

void tk_exec_session_wait_captures(tk_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    while (s->capturer && (s->queue || s->in_capture || (s->prefill_on && !s->prefill_done)))
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

int tk_session_wait_ready(tk_session *s)
{
    if (!s)
        return tk_error_set(TK_EINVAL, "tk_session_wait_ready: no session");
    pthread_mutex_lock(&s->lock);
    while (s->capturer && s->prefill_on && !s->prefill_done && !s->stop)
        pthread_cond_wait(&s->cond, &s->lock);
    /* the walk is over; the last signature it handed out may still be under capture */
    while (s->capturer && s->prefill_on && s->in_capture)
        pthread_cond_wait(&s->cond, &s->lock);
    int ready = s->capturer && s->prefill_on && s->prefill_done && s->graphs && !s->capture_failures;
    pthread_mutex_unlock(&s->lock);
    return ready;
}

/* --- input checks --------------------------------------------------------------------------- */

typedef struct binding {
    int64_t val[64];
    int bound[64];
    int from_in[64], from_dim[64]; /* where a symbol got its value, for messages */
} binding;

static int same_dev(tk_device a, tk_device b)
{
    return a.kind == b.kind && (a.kind == TK_DEVICE_CPU || a.index == b.index);
}

/* Count, presence, device, dtype and rank of each input. */
static int check_input_kinds(const tk_session *s, tk_tensor *const *in, size_t nin)
{
    const tk_program_model *m = s->p->m;
    char d1[32], d2[32];
    if (nin != m->ninputs)
        return tk_error_set(TK_EINVAL, "program '%s' takes %zu input%s, got %zu", m->name, m->ninputs,
                            m->ninputs == 1 ? "" : "s", nin);
    if (nin && !in)
        return tk_error_set(TK_EINVAL, "program '%s': no inputs given", m->name);
    for (size_t i = 0; i < nin; i++) {
        const tk_pm_value *v = &m->inputs[i];
        const tk_tensor *t = in[i];
        if (!t)
            return tk_error_set(TK_EINVAL, "input '%s' of program '%s' is NULL", v->name, m->name);
        if (t->traced)
            return tk_error_set(TK_EINVAL, "input '%s' of program '%s' is a traced tensor (it has no data)", v->name,
                                m->name);
        if (!same_dev(t->device, s->ctx->device) && !(s->staged && t->device.kind == TK_DEVICE_CPU))
            return tk_error_set(TK_EINVAL, "input '%s' is on '%s', the session is on '%s'", v->name,
                                tk_device_name(t->device, d1, sizeof d1),
                                tk_device_name(s->ctx->device, d2, sizeof d2));
        if (t->dtype != v->dtype)
            return tk_error_set(TK_EINVAL, "input '%s' is %s, program '%s' declares %s", v->name,
                                tk_dtype_name(t->dtype), m->name, tk_dtype_name(v->dtype));
        if (t->rank != v->rank) {
            tk_strbuf sb = TK_STRBUF_INIT;
            tk_pm_format_shape(&sb, v);
            int rc = tk_error_set(TK_EINVAL, "input '%s' has %d dim%s, program '%s' declares %s", v->name, t->rank,
                                  t->rank == 1 ? "" : "s", m->name, sb.buf ? sb.buf : "?");
            tk_strbuf_release(&sb);
            return rc;
        }
        if (!tk_tensor_is_contiguous(t))
            return tk_error_set(TK_EINVAL, "input '%s' is a strided view (a session's output): copy it into a "
                                "contiguous tensor with tk_tensor_copy first", v->name);
    }
    return 0;
}

/* Static dims, and the symbols that are whole dims: inside their range, one value each. */
static int bind_symbols(const tk_session *s, tk_tensor *const *in, binding *b)
{
    const tk_exec_program *p = s->p;
    const tk_program_model *m = p->m;
    for (size_t i = 0; i < m->ninputs; i++) {
        const xvalue *v = &p->values[i];
        const char *name = v->pm->name;
        for (int d = 0; d < v->pm->rank; d++) {
            long long x = (long long)in[i]->shape[d];
            int k = v->sym[d];
            if (!v->pm->dims[d].expr) {
                if (x != v->pm->dims[d].value)
                    return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld, expected %lld", name, d, x,
                                        (long long)v->pm->dims[d].value);
                continue;
            }
            if (k < 0)
                continue;
            const tk_pm_symbol *sy = &m->symbols[k];
            if (x < sy->min || x > sy->max)
                return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld, outside [%lld, %lld] of '%s'", name, d, x,
                                    (long long)sy->min, (long long)sy->max, sy->name);
            if (b->bound[k] && b->val[k] != x)
                return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld but '%s' is %lld (input '%s' dim %d)", name,
                                    d, x, sy->name, (long long)b->val[k], m->inputs[b->from_in[k]].name,
                                    b->from_dim[k]);
            if (!b->bound[k]) {
                b->bound[k] = 1;
                b->val[k] = x;
                b->from_in[k] = (int)i;
                b->from_dim[k] = d;
            }
        }
    }
    return 0;
}

/* Symbols met only inside expressions of one symbol (k*s + c): solved from the first such dim. */
static void solve_symbols(const tk_session *s, tk_tensor *const *in, binding *b)
{
    const tk_exec_program *p = s->p;
    for (size_t i = 0; i < p->m->ninputs; i++) {
        const xvalue *v = &p->values[i];
        for (int d = 0; d < v->pm->rank; d++) {
            tk_sym var;
            int64_t k, c;
            const char *name;
            if (!v->pm->dims[d].expr || v->sym[d] >= 0 || !tk_sym_as_linear1(v->dims[d], &var, &k, &c) ||
                !tk_sym_as_var(var, &name, NULL, NULL))
                continue;
            for (int j = 0; j < p->nsyms; j++) {
                if (b->bound[j] || strcmp(p->symnames[j], name) != 0 || (in[i]->shape[d] - c) % k != 0)
                    continue;
                b->bound[j] = 1;
                b->val[j] = (in[i]->shape[d] - c) / k;
                b->from_in[j] = (int)i;
                b->from_dim[j] = d;
            }
        }
    }
}

/* Every dim that is an expression equals its value under the binding; the guards hold. */
static int check_expressions(const tk_session *s, tk_tensor *const *in, binding *b)
{
    const tk_exec_program *p = s->p;
    const tk_program_model *m = p->m;
    for (int k = 0; k < p->nsyms; k++) {
        const tk_pm_symbol *sy = &m->symbols[k];
        if (!b->bound[k])
            return tk_error_set(TK_EINVAL, "program '%s': no input dim gives the value of '%s'", m->name, sy->name);
        if (b->val[k] < sy->min || b->val[k] > sy->max)
            return tk_error_set(TK_EINVAL, "input '%s' dim %d makes '%s' %lld, outside [%lld, %lld]",
                                m->inputs[b->from_in[k]].name, b->from_dim[k], sy->name, (long long)b->val[k],
                                (long long)sy->min, (long long)sy->max);
    }
    for (size_t i = 0; i < m->ninputs; i++) {
        const xvalue *v = &p->values[i];
        for (int d = 0; d < v->pm->rank; d++) {
            int64_t want;
            if (!v->pm->dims[d].expr || v->sym[d] >= 0)
                continue;
            if (tk_sym_eval(v->dims[d], p->symnames, b->val, p->nsyms, &want))
                return tk_error_set(TK_EINTERNAL, "input '%s' dim %d: %s", v->pm->name, d, tk_error_last());
            if (in[i]->shape[d] != want)
                return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld, expected %lld (%s)", v->pm->name, d,
                                    (long long)in[i]->shape[d], (long long)want, v->pm->dims[d].expr);
        }
    }
    for (size_t g = 0; g < p->nguards; g++) {
        const xguard *x = &p->guards[g];
        int64_t a = 0, c = 0;
        if (tk_sym_eval(x->lhs, p->symnames, b->val, p->nsyms, &a) ||
            (!x->range && tk_sym_eval(x->rhs, p->symnames, b->val, p->nsyms, &c)))
            return tk_error_set(TK_EINTERNAL, "guard '%s': %s", x->text, tk_error_last());
        if (x->range ? (a < x->lo || a > x->hi) : a != c)
            return tk_error_set(TK_EINVAL, "program '%s' requires %s, which these inputs break", m->name, x->text);
    }
    return 0;
}

/* --- plans ------------------------------------------------------------------------------------ */

/* A value no node stores: made and read inside a fused node, or tk::_mlp's hidden tensor where the
 * kernel takes every call */
static int never_stored(const tk_session *s, const xvalue *v)
{
    return v->fused_away || (v->mlp_hidden && s->no_mlp_hidden);
}

static int in_arena(const tk_session *s, const xvalue *v)
{
    if (v->kind == V_PARAM || v->folded || never_stored(s, v))
        return 0;
    if (v->kind == V_INPUT)
        return s->staged;
    return s->staged || v->output < 0;
}

/* The last node during which a value's storage is in use: to the end for outputs kept in the
 * arena (copied out afterwards), else until its last reader or the last reader of a view of it. */
static int life_end(const tk_session *s, const xvalue *x)
{
    return x->output >= 0 && s->staged ? (int)s->p->m->nnodes : x->hold > x->last ? x->hold : x->last;
}

/* Lowest 256-aligned offset where value v fits beside the arena values alive at the same time
 * (the inputs and outputs of one node never share: a node reads while it writes). */
static size_t place(const tk_session *s, const plan *pl, int v)
{
    const xvalue *vals = s->p->values, *x = &vals[v];
    int end = life_end(s, x);
    size_t at = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int u = 0; u < v; u++) {
            const xvalue *y = &vals[u];
            if (pl->offset[u] == SIZE_MAX || life_end(s, y) < x->first || end < y->first)
                continue;
            if (at < pl->offset[u] + pl->size[u] && pl->offset[u] < at + pl->size[v]) {
                at = (pl->offset[u] + pl->size[u] + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
                moved = 1;
            }
        }
    }
    return at;
}

static uint64_t key_hash(const int64_t *key, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Whether value v (a permute or transpose, tview) is a strided view in plan pl: its strides in
 * its source's bytes into pl->vstr, and every node reading it takes a tensor of those strides
 * at that input (tk_op_takes_strided). The source is contiguous: no reader of a strided view is
 * a layout node. */
static int strided_view(const tk_exec_program *p, plan *pl, int v)
{
    const xvalue *x = &p->values[v], *from = &p->values[x->src];
    const xnode *node = &p->nodes[x->index];
    int64_t *st = &pl->vstr[(size_t)v * TK_MAX_DIMS];
    const int64_t *shape = &pl->shapes[(size_t)v * TK_MAX_DIMS];
    if (!tk_layout_permuted(node->op.def, node->attrs, node->nin, from->pm->rank,
                            &pl->shapes[(size_t)x->src * TK_MAX_DIMS], st))
        return 0;
    for (int n = x->first + 1; n <= x->last && n < (int)p->m->nnodes; n++)
        for (int i = 0; i < p->nodes[n].nin; i++)
            if (p->nodes[n].in[i] == v && !tk_op_takes_strided(p->nodes[n].op.def, i, x->pm->rank, shape, st))
                return 0;
    return 1;
}

static int plan_new(plan **out, tk_session *s, const int64_t *key)
{
    const tk_exec_program *p = s->p;
    size_t n = p->nvalues;
    plan *pl = calloc(1, sizeof(*pl));
    *out = NULL;
    if (!pl || !(pl->shapes = calloc(n * TK_MAX_DIMS + 1, sizeof(int64_t))) ||
        !(pl->offset = calloc(n + 1, sizeof(size_t))) || !(pl->size = calloc(n + 1, sizeof(size_t))) ||
        !(pl->view_at = calloc(n + 1, sizeof(uint64_t))) ||
        !(pl->ostr = calloc(p->m->noutputs * TK_MAX_DIMS + 1, sizeof(int64_t))) ||
        !(pl->ooff = calloc(p->m->noutputs + 1, sizeof(uint64_t))) ||
        (p->ntview && (!(pl->vst = calloc(n + 1, 1)) || !(pl->vstr = calloc(n * TK_MAX_DIMS + 1, sizeof(int64_t)))))) {
        plan_free(s, pl);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    memcpy(pl->key, key, sizeof(int64_t) * (size_t)p->nsyms);
    pl->hash = key_hash(key, p->nsyms);
    for (size_t v = 0; v < n; v++) {
        const xvalue *x = &p->values[v];
        size_t bytes = tk_dtype_size(x->pm->dtype);
        for (int d = 0; d < x->pm->rank; d++) {
            int64_t *dim = &pl->shapes[v * TK_MAX_DIMS + (size_t)d];
            if (tk_sym_eval(x->dims[d], p->symnames, key, p->nsyms, dim) || *dim < 0 ||
                __builtin_mul_overflow(bytes, (size_t)*dim, &bytes)) {
                plan_free(s, pl);
                return tk_error_set(TK_EINVAL, "program '%s': value %d dim %d (%s) is %lld for these inputs",
                                    p->m->name, x->pm->id, d, x->pm->dims[d].expr ? x->pm->dims[d].expr : "static",
                                    (long long)*dim);
            }
        }
        pl->size[v] = bytes;
        pl->offset[v] = SIZE_MAX;
        pl->view_at[v] = UINT64_MAX;
        if (x->src >= 0) { /* a view of its source's bytes for these shapes: no storage of its own */
            const xnode *node = &p->nodes[x->index];
            const xvalue *from = &p->values[x->src];
            uint64_t at;
            if (tk_layout_view(node->op.def, node->attrs, node->nin, from->pm->rank,
                               &pl->shapes[(size_t)x->src * TK_MAX_DIMS], tk_dtype_size(from->pm->dtype), &at) &&
                at + bytes <= pl->size[x->src]) {
                pl->view_at[v] = at;
                continue;
            }
            if (x->tview && strided_view(p, pl, (int)v)) { /* a transposed view its readers take */
                pl->view_at[v] = 0;
                pl->vst[v] = 1;
                continue;
            }
        }
        if (!in_arena(s, x))
            continue;
        pl->offset[v] = place(s, pl, (int)v);
        if (pl->offset[v] + bytes > pl->total)
            pl->total = pl->offset[v] + bytes;
    }
    for (size_t i = 0; i < p->m->noutputs; i++) { /* output views: strides for these shapes */
        int v = p->out_src[i];
        if (v < 0)
            continue;
        const xnode *node = &p->nodes[p->values[p->outputs[i]].index];
        if (!tk_layout_strided(node->op.def, node->attrs, node->nin, p->values[v].pm->rank,
                               &pl->shapes[(size_t)v * TK_MAX_DIMS], tk_dtype_size(p->values[v].pm->dtype),
                               &pl->ostr[i * TK_MAX_DIMS], &pl->ooff[i]))
            pl->ooff[i] = UINT64_MAX; /* not for these shapes */
    }
    *out = pl;
    return 0;
}

static void lru_unlink(tk_session *s, plan *pl)
{
    if (pl->prev)
        pl->prev->next = pl->next;
    else
        s->plans = pl->next;
    if (pl->next)
        pl->next->prev = pl->prev;
    else
        s->oldest = pl->prev;
    pl->prev = pl->next = NULL;
}

static void lru_push_front(tk_session *s, plan *pl)
{
    pl->prev = NULL;
    pl->next = s->plans;
    if (s->plans)
        s->plans->prev = pl;
    else
        s->oldest = pl;
    s->plans = pl;
}

/* With the lock held: the plan of key, or NULL. */
static plan *plan_lookup_locked(tk_session *s, const int64_t *key, uint64_t hash)
{
    size_t keylen = sizeof(int64_t) * (size_t)s->p->nsyms;
    for (plan *pl = s->buckets[hash & (s->nbuckets - 1)]; pl; pl = pl->hnext)
        if (pl->hash == hash && !memcmp(pl->key, key, keylen))
            return pl;
    return NULL;
}

static void plan_insert_locked(tk_session *s, plan *pl)
{
    plan **bucket = &s->buckets[pl->hash & (s->nbuckets - 1)];
    pl->hnext = *bucket;
    *bucket = pl;
    lru_push_front(s, pl);
    s->nplans++;
}

/* With the lock held: unlinks the least recently used plan that is not being captured (a queued
 * one leaves the queue) and returns it, for the caller to free without the lock. */
static plan *plan_evict_locked(tk_session *s)
{
    plan *pl = s->oldest;
    while (pl && pl == s->in_capture)
        pl = pl->prev;
    if (!pl)
        return NULL;
    if (pl->in_queue) {
        plan **q = &s->queue, *last = NULL;
        while (*q && *q != pl) {
            last = *q;
            q = &(*q)->qnext;
        }
        if (*q) {
            *q = pl->qnext;
            if (s->queue_tail == pl)
                s->queue_tail = last;
        }
    }
    lru_unlink(s, pl);
    for (plan **h = &s->buckets[pl->hash & (s->nbuckets - 1)]; *h; h = &(*h)->hnext) {
        if (*h == pl) {
            *h = pl->hnext;
            break;
        }
    }
    s->nplans--;
    return pl;
}

/* The plan of this signature: found through its hash and moved to the front, or made (the least
 * recently used one beyond max_plans goes). The table is shared with the capture thread, which
 * adds the plans of signatures not run yet (prefill). */
static int plan_get(tk_session *s, const binding *b, plan **out)
{
    uint64_t hash = key_hash(b->val, s->p->nsyms);
    plan *pl, *victim = NULL;
    pthread_mutex_lock(&s->lock);
    if ((pl = plan_lookup_locked(s, b->val, hash))) {
        if (pl != s->plans) {
            lru_unlink(s, pl);
            lru_push_front(s, pl);
        }
        pthread_mutex_unlock(&s->lock);
        *out = pl;
        return 0;
    }
    pthread_mutex_unlock(&s->lock);
    int rc = plan_new(&pl, s, b->val);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->lock);
    plan *other = plan_lookup_locked(s, b->val, hash); /* the capture thread's, made meanwhile */
    if (other) {
        victim = pl;
        pl = other;
    } else {
        if (s->nplans >= s->max_plans)
            victim = plan_evict_locked(s);
        plan_insert_locked(s, pl);
        s->requested++;
    }
    pthread_mutex_unlock(&s->lock);
    plan_free(s, victim);
    *out = pl;
    return 0;
}

/* The arena holds at least size bytes; growing it moves every intermediate, so graphs that baked
 * the old pointers are recaptured. It waits for a capture under way, which reads the arena. */
static int arena_reserve(tk_session *s, size_t size)
{
    if (size <= s->arena_size)
        return 0;
    void *mem = NULL;
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    while (s->in_capture)
        pthread_cond_wait(&s->cond, &s->lock);
    if (s->ctx->device.kind == TK_DEVICE_CUDA) {
        /* queued work may still read the old arena */
        if (!(rc = tk_cuda_sync(s->ctx))) {
            arena_free(s);
            rc = tk_cuda_alloc(s->ctx, &mem, size);
        }
    } else {
        arena_free(s);
        if (posix_memalign(&mem, ARENA_ALIGN, size))
            rc = tk_error_set(TK_ENOMEM, "out of memory: %zu bytes for the intermediates", size);
    }
    if (!rc) {
        s->arena = mem;
        s->arena_size = size;
        s->arena_grows++;
        s->arena_gen++;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* --- running ---------------------------------------------------------------------------------- */

/* Whether t, given for output i, is an output view this plan writes in place: allocated by a
 * session (its storage known) at the strides and offset of output i's view for these shapes. */
static int output_in_place(const tk_session *s, const plan *pl, size_t i, const tk_tensor *t)
{
    int v = s->p->out_src[i];
    if (!t || v < 0 || pl->ooff[i] == UINT64_MAX || tk_tensor_is_contiguous(t) || !t->base ||
        t->base_bytes < pl->size[v] || (const char *)t->data != (const char *)t->base + pl->ooff[i])
        return 0;
    return !memcmp(t->strides, &pl->ostr[i * TK_MAX_DIMS], sizeof(int64_t) * (size_t)t->rank);
}

/* Outputs the caller supplied hold what the program gives: device, dtype, shape; contiguous, or
 * an output view the run writes in place. */
static int check_outputs(const tk_session *s, const plan *pl, tk_tensor *const *out)
{
    const tk_exec_program *p = s->p;
    char d1[32], d2[32], a[160], b[160];
    for (size_t i = 0; i < p->m->noutputs; i++) {
        const tk_tensor *t = out[i];
        const xvalue *x = &p->values[p->outputs[i]];
        const int64_t *shape = &pl->shapes[(size_t)p->outputs[i] * TK_MAX_DIMS];
        if (!t)
            continue;
        if (!same_dev(t->device, s->ctx->device) || t->traced)
            return tk_error_set(TK_EINVAL, "output %zu is on '%s', the session is on '%s'", i,
                                tk_device_name(t->device, d1, sizeof d1), tk_device_name(s->ctx->device, d2, sizeof d2));
        if (t->dtype != x->pm->dtype || t->rank != x->pm->rank ||
            memcmp(t->shape, shape, sizeof(int64_t) * (size_t)t->rank) != 0)
            return tk_error_set(TK_EINVAL, "output %zu is %s, the program gives %s for these inputs", i,
                                shape_text(a, sizeof a, t->dtype, t->rank, t->shape),
                                shape_text(b, sizeof b, x->pm->dtype, x->pm->rank, shape));
        if (!tk_tensor_is_contiguous(t) && !output_in_place(s, pl, i, t))
            return tk_error_set(TK_EINVAL, "output %zu is a strided view this program does not make for these inputs "
                                "(pass a contiguous tensor, or NULL)", i);
    }
    return 0;
}

static void op_cost(const tk_op_def *def, tk_tensor *const *in, tk_tensor *const *out, tk_node_profile *np)
{
    tk_op_cost c = {0, 0};
    if (def->version >= 2 && def->cost && def->cost(in, out, &c) == 0) {
        np->flops = c.flops;
        np->bytes = c.bytes;
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Whether node n runs no work of its own in a run of pl: absorbed by a fusion, folded with the
 * weights, or a view of its input's bytes. */
static int skipped(const tk_exec_program *p, const plan *pl, tk_tensor *const *t, size_t n)
{
    const xnode *x = &p->nodes[n];
    if (x->absorbed || x->folded)
        return 1;
    /* a view of its input; or an output view, its input computed in place (bind_tensors) */
    return x->pm->nout == 1 && (pl->view_at[x->out[0]] != UINT64_MAX ||
                                (t[x->out[0]] && !tk_tensor_is_contiguous(t[x->out[0]])));
}

/* Runs every node on ctx (the session's, or the capture thread's) with its outputs in place;
 * with prof, times each (on a GPU with events around each node, read at the end unless the
 * nodes are being captured into a graph). */
static int run_nodes(tk_session *s, const plan *pl, tk_ctx *ctx, tk_tensor **t, tk_node_profile *prof, int captured)
{
    const tk_exec_program *p = s->p;
    int gpu = ctx->device.kind == TK_DEVICE_CUDA, rc = 0;
    tk_tensor *in[MAX_NODE_IO], *out[MAX_NODE_IO];
    tk_value args[MAX_NODE_IO];
    for (size_t n = 0; n < p->m->nnodes; n++) {
        const xnode *x = &p->nodes[n];
        double t0 = 0;
        if (skipped(p, pl, t, n)) { /* ran inside the node before, or with the weights, or a view */
            if (prof)
                prof[n] = (tk_node_profile){.op = x->absorbed || x->folded ? x->label : x->view_label};
            continue;
        }
        node_args(x, t, in, args);
        for (int o = 0; o < x->pm->nout; o++)
            out[o] = t[x->out[o]];
        if (prof && gpu && (rc = tk_cuda_event_record(ctx, s->events[2 * n])))
            return rc;
        if (prof)
            t0 = now_us();
        if ((rc = tk_op_run_resolved(ctx, &x->op, x->pm->file, x->pm->line, args, x->nin, out, x->pm->nout)))
            return rc;
        double host = prof ? now_us() - t0 : 0;
        if (prof && gpu && (rc = tk_cuda_event_record(ctx, s->events[2 * n + 1])))
            return rc;
        if (prof) {
            prof[n].op = x->label;
            /* the host's time dispatching the node; on a GPU the kernels' time comes from events */
            prof[n].host_us = host;
            prof[n].time_us = gpu ? 0 : host;
            op_cost(x->op.def, in, out, &prof[n]);
        }
    }
    for (size_t n = 0; prof && gpu && !captured && n < p->m->nnodes; n++)
        if (!skipped(p, pl, t, n) && (rc = tk_cuda_event_elapsed_us(ctx, s->events[2 * n], s->events[2 * n + 1], &prof[n].time_us)))
            return rc;
    return 0;
}

/* The nodes' device times without the host's gaps. Eagerly, an event pair around a node also
 * times the GPU waiting for the host to queue the node's work (a matmul's plan looked up, a
 * kernel's arguments checked): the times of small nodes were the host's. Here the nodes are
 * captured into a CUDA graph with an event-record node around each and the graph is replayed
 * twice: the GPU runs the nodes back to back, as a service's replays do, and each event pair
 * times one node alone. When the nodes cannot be captured (an op that allocates or waits), the
 * eager times stay. */
static int time_in_graph(tk_session *s, const plan *pl, tk_tensor **t, tk_node_profile *prof)
{
    size_t nn = s->p->m->nnodes;
    void *exec = NULL;
    tk_node_profile *cap = calloc(nn + 1, sizeof(*cap));
    if (!cap)
        return tk_error_set(TK_ENOMEM, "out of memory");
    int rc = tk_cuda_capture_begin(s->ctx, NULL); /* timed by its events: no end-of-graph signal */
    if (!rc) {
        int body = run_nodes(s, pl, s->ctx, t, cap, 1);
        rc = tk_cuda_capture_end(s->ctx, body == 0, &exec);
        if (!rc && body)
            rc = body;
    }
    free(cap);
    if (rc || !exec) {
        tk_error_clear(); /* not capturable: the eager times stay */
        return 0;
    }
    for (int rep = 0; rep < 2 && !rc; rep++)
        rc = tk_cuda_graph_launch(s->ctx, exec);
    for (size_t n = 0; !rc && n < nn; n++)
        if (!skipped(s->p, pl, t, n))
            rc = tk_cuda_event_elapsed_us(s->ctx, s->events[2 * n], s->events[2 * n + 1], &prof[n].time_us);
    if (!rc)
        rc = tk_ctx_sync(s->ctx);
    tk_cuda_graph_free(s->ctx, exec);
    return rc;
}

/* A profiled run: eager, node times into the session's profile. */
static int run_profiled(tk_session *s, const plan *pl, tk_tensor **t)
{
    size_t nn = s->p->m->nnodes;
    int rc;
    tk_node_profile *prof = calloc(nn + 1, sizeof(*prof));
    if (!prof)
        return tk_error_set(TK_ENOMEM, "out of memory");
    if (s->ctx->device.kind == TK_DEVICE_CUDA && !s->events) {
        if (!(s->events = calloc(2 * nn + 1, sizeof(void *)))) {
            free(prof);
            return tk_error_set(TK_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < 2 * nn; i++) {
            if ((rc = tk_cuda_event_new(s->ctx, &s->events[i]))) {
                events_free(s);
                free(prof);
                return rc;
            }
        }
    }
    rc = run_nodes(s, pl, s->ctx, t, prof, 0);
    if (!rc && s->ctx->device.kind == TK_DEVICE_CUDA)
        rc = time_in_graph(s, pl, t, prof);
    if (rc) {
        free(prof);
        return rc;
    }
    free(s->profile);
    s->profile = prof;
    s->nprofile = nn;
    return 0;
}

/* Nodes captured on ctx into a new graph (*exec); NULL with the error set when the capture failed
 * (an op that allocates or synchronizes). */
static int capture(tk_session *s, const plan *pl, tk_ctx *ctx, tk_tensor **t, void **exec)
{
    *exec = NULL;
    int rc = tk_cuda_capture_begin(ctx, s->ctx); /* replayed on the session's stream, and waited for there */
    if (rc)
        return rc;
    int body = run_nodes(s, pl, ctx, t, NULL, 1);
    rc = tk_cuda_capture_end(ctx, body == 0, exec);
    if (!rc && (body || !*exec)) {
        tk_cuda_graph_free(ctx, *exec);
        *exec = NULL;
        rc = body ? body : tk_error_set(TK_EINTERNAL, "a capture gave no graph");
    }
    return rc;
}

/* How a run binds each value to a tensor. */
typedef enum bind_mode {
    BIND_DIRECT, /* inputs and outputs are the caller's tensors, intermediates in the arena */
    BIND_STAGED, /* inputs copied into arena slots, outputs in arena slots (copied out after) */
    BIND_ARENA,  /* the capture thread: inputs and outputs in arena slots, nothing copied */
    BIND_PTRS    /* the capture thread's direct graphs: inputs and outputs at the caller's pointers
                    (ptrs: inputs, then outputs), as contiguous tensors of the plan's shapes, or
                    output views for the outputs in mask */
} bind_mode;

/* Tensors for every value of this run into t[] (views[] holds the arena views): inputs, parameters,
 * arena views and outputs (the caller's or new ones, noted in made[]). */
static int bind_tensors(tk_session *s, tk_ctx *ctx, const plan *pl, bind_mode mode, tk_tensor *const *in,
                        tk_tensor **out, tk_tensor **t, tk_tensor *views, unsigned char *made, void *const *ptrs,
                        uint64_t mask)
{
    const tk_exec_program *p = s->p;
    tk_device dev = s->ctx->device;
    int rc;
    for (size_t i = 0; (mode == BIND_DIRECT || mode == BIND_STAGED) && i < p->m->noutputs; i++) {
        const xvalue *x = &p->values[p->outputs[i]];
        const int64_t *shape = &pl->shapes[(size_t)p->outputs[i] * TK_MAX_DIMS];
        int v = p->out_src[i];
        if (out[i])
            continue;
        if (s->output_views && v >= 0 && pl->ooff[i] != UINT64_MAX)
            rc = tk_tensor_new_view(&out[i], s->ctx, dev, x->pm->dtype, x->pm->rank, shape, &pl->ostr[i * TK_MAX_DIMS],
                                    pl->size[v], (size_t)pl->ooff[i]);
        else
            rc = tk_tensor_new(&out[i], s->ctx, dev, x->pm->dtype, x->pm->rank, shape);
        if (rc)
            return rc;
        made[i] = 1;
    }
    for (size_t v = 0; v < p->nvalues; v++) {
        const xvalue *x = &p->values[v];
        char *base = NULL; /* the storage of an output view this value is computed into */
        if (x->feeds >= 0 && mode == BIND_DIRECT && output_in_place(s, pl, (size_t)x->feeds, out[x->feeds]))
            base = out[x->feeds]->base;
        else if (x->feeds >= 0 && mode == BIND_PTRS && (mask >> x->feeds & 1u))
            base = (char *)ptrs[p->m->ninputs + (size_t)x->feeds] - pl->ooff[x->feeds];
        if (base) {
            tk_tensor_view_init(&views[v], dev, x->pm->dtype, x->pm->rank, &pl->shapes[v * TK_MAX_DIMS], base);
            t[v] = &views[v];
        } else if (never_stored(s, x)) {
            t[v] = NULL;
        } else if (x->folded) {
            t[v] = s->folded[v];
        } else if (pl->view_at[v] != UINT64_MAX) { /* bytes of a value bound before it */
            char *at = t[x->src] && tk_tensor_data(t[x->src]) ? (char *)tk_tensor_data(t[x->src]) + pl->view_at[v] : NULL;
            tk_tensor_view_strided(&views[v], dev, x->pm->dtype, x->pm->rank, &pl->shapes[v * TK_MAX_DIMS],
                                   pl->vst && pl->vst[v] ? &pl->vstr[v * TK_MAX_DIMS] : NULL, at);
            t[v] = &views[v];
        } else if (mode == BIND_PTRS && (x->kind == V_INPUT || (x->kind == V_NODE && x->output >= 0))) {
            void *at = ptrs[x->kind == V_INPUT ? (size_t)x->index : p->m->ninputs + (size_t)x->output];
            int view = x->kind == V_NODE && (mask >> x->output & 1u);
            tk_tensor_view_strided(&views[v], dev, x->pm->dtype, x->pm->rank, &pl->shapes[v * TK_MAX_DIMS],
                                   view ? &pl->ostr[(size_t)x->output * TK_MAX_DIMS] : NULL, at);
            t[v] = &views[v];
        } else if (mode == BIND_DIRECT && x->kind == V_INPUT) {
            t[v] = in[x->index];
        } else if (mode == BIND_DIRECT && x->kind == V_NODE && x->output >= 0) {
            t[v] = out[x->output];
        } else if (pl->offset[v] != SIZE_MAX) {
            tk_tensor_view_init(&views[v], dev, x->pm->dtype, x->pm->rank, &pl->shapes[v * TK_MAX_DIMS],
                                s->arena ? (char *)s->arena + pl->offset[v] : NULL);
            t[v] = &views[v];
            if (x->kind == V_INPUT && mode == BIND_STAGED && (rc = tk_tensor_copy(ctx, t[v], in[x->index])))
                return rc;
        } else if (x->kind == V_INPUT) {
            t[v] = in[x->index];
        } else if (x->kind == V_PARAM) {
            t[v] = s->params[x->index];
        } else {
            t[v] = out[x->output];
        }
    }
    return 0;
}

/* --- the capture thread ------------------------------------------------------------------------ */

/* With the lock held: the walk is over. The prefill is done; after the warm-up, the prefill
 * proper waits for its start (or starts now, when requests brought PREFILL_AFTER signatures
 * meanwhile). */
static void walk_over_locked(tk_session *s)
{
    if (!s->walk_warm) {
        s->prefill_done = 1;
        return;
    }
    s->walk_warm = s->prefill_walked = 0;
    for (size_t k = 0; k < s->p->m->nsymbols; k++)
        s->prefill_key[k] = s->p->m->symbols[k].min;
    s->prefill_on = s->prefill_allowed && s->requested >= PREFILL_AFTER;
}

/* With the lock held: the next signature of the symbol space that has no graph yet, planned and
 * put in the table when no request made its plan (the lock is let go meanwhile); NULL when the
 * walk is over (or the table is full). */
static plan *prefill_next_locked(tk_session *s)
{
    const tk_program_model *m = s->p->m;
    int nsyms = s->p->nsyms;
    while (s->prefill_on && !s->prefill_done && !s->stop) {
        if (s->prefill_walked) {
            /* only now: the last signature was handed out and marked in capture under the lock
             * (set done as it was walked past, tk_session_wait_ready would have returned while
             * its plan was still being made, the lock released, and before its graph existed) */
            walk_over_locked(s);
            continue;
        }
        int64_t key[64];
        memcpy(key, s->prefill_key, sizeof(int64_t) * (size_t)nsyms);
        /* advance: the last symbol fastest; past the end the walk is over */
        int k = nsyms - 1;
        for (; k >= 0; k--) {
            int64_t next = walk_step(s->walk_warm, s->prefill_key[k], m->symbols[k].max);
            if (next >= 0) {
                s->prefill_key[k] = next;
                break;
            }
            s->prefill_key[k] = m->symbols[k].min;
        }
        if (k < 0)
            s->prefill_walked = 1;
        uint64_t hash = key_hash(key, nsyms);
        plan *pl = plan_lookup_locked(s, key, hash);
        if (pl) {
            if (s->bound) {
                /* a direct graph on other pointers stays: the request path drops it (it may be
                 * launching it now) and asks again */
                if (pl->direct_state != GRAPH_NONE || pl->in_queue || pl == s->in_capture)
                    continue;
                memcpy(pl->dptrs, s->bound_ptrs, sizeof pl->dptrs), pl->dmask = 0;
                pl->direct_state = GRAPH_QUEUED;
                return pl;
            }
            if (pl->graph_state != GRAPH_NONE)
                continue;
            pl->graph_state = GRAPH_QUEUED; /* so that no request queues it while it is captured */
            return pl;
        }
        if (s->nplans >= s->max_plans) {
            s->prefill_walked = 1;
            walk_over_locked(s);
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        int rc = plan_new(&pl, s, key);
        pthread_mutex_lock(&s->lock);
        if (rc) {
            tk_error_clear(); /* a signature the program's expressions refuse: no request brings it */
            continue;
        }
        if (plan_lookup_locked(s, key, hash) || s->nplans >= s->max_plans) {
            plan_free(s, pl); /* a request made it meanwhile; it has no graph to free yet */
            continue;
        }
        plan_insert_locked(s, pl);
        if (s->bound) {
            memcpy(pl->dptrs, s->bound_ptrs, sizeof pl->dptrs), pl->dmask = 0;
            pl->direct_state = GRAPH_QUEUED;
        } else {
            pl->graph_state = GRAPH_QUEUED;
        }
        /* least recently used: requested signatures stay ahead of prefilled ones */
        lru_unlink(s, pl);
        pl->prev = s->oldest;
        pl->next = NULL;
        if (s->oldest)
            s->oldest->next = pl;
        else
            s->plans = pl;
        s->oldest = pl;
        return pl;
    }
    return NULL;
}

/* One capture on the capture thread's context: the staged graph (BIND_ARENA) or the direct graph
 * on ptrs (BIND_PTRS); NULL when the capture failed (the error cleared). A failure is tried once
 * more: the first use of a kernel on a device loads its module, which a capture does not allow
 * (the prefill captures before any request has run a kernel eagerly); the module stays loaded. */
static void *capture_one(tk_session *s, plan *pl, bind_mode mode, void *const *ptrs, uint64_t mask)
{
    void *exec = NULL;
    int rc = bind_tensors(s, s->cap_ctx, pl, mode, NULL, NULL, s->cap_t, s->cap_views, NULL, ptrs, mask);
    for (int attempt = 0; !rc && !exec && attempt < 2; attempt++)
        if (capture(s, pl, s->cap_ctx, s->cap_t, &exec))
            tk_log(TK_LOG_DEBUG, "program '%s': a %s graph's capture failed (attempt %d): %s", s->p->m->name,
                   mode == BIND_PTRS ? "direct" : "staged", attempt + 1, tk_error_last());
    tk_error_clear();
    return exec;
}

static void *capturer_main(void *arg)
{
    tk_session *s = arg;
    void *ptrs[TK_DIRECT_MAX];
    uint64_t mask = 0;
    /* the calls begun when the thread last finished a capture or a pause (0 at its start, which
     * may follow requests: their captures started it): more since, traffic */
    unsigned long seen = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stop && !s->queue && !(s->prefill_on && !s->prefill_done))
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->stop)
            break;
        plan *pl = s->queue;
        int warm = 0; /* a signature of the warm-up: never paced (it takes slow first runs off requests) */
        if (pl) {
            s->queue = pl->qnext;
            if (!s->queue)
                s->queue_tail = NULL;
            pl->qnext = NULL;
            pl->in_queue = 0;
        } else if (!(pl = prefill_next_locked(s))) {
            pthread_cond_broadcast(&s->cond); /* the prefill is done */
            continue;
        } else {
            warm = s->walk_warm;
        }
        s->in_capture = pl;
        unsigned gen = s->arena_gen;
        int staged = pl->graph_state == GRAPH_QUEUED, direct = pl->direct_state == GRAPH_QUEUED;
        if (direct)
            memcpy(ptrs, pl->dptrs, sizeof ptrs), mask = pl->dmask;
        pthread_mutex_unlock(&s->lock);

        /* the arena stays put until in_capture is cleared (arena_reserve waits for it) */
        void *exec = staged ? capture_one(s, pl, BIND_ARENA, NULL, 0) : NULL;
        void *dexec = direct ? capture_one(s, pl, BIND_PTRS, ptrs, mask) : NULL;

        pthread_mutex_lock(&s->lock);
        if (staged && exec && gen == s->arena_gen) {
            pl->graph = exec;
            pl->graph_arena = gen;
            pl->graph_state = GRAPH_READY;
            s->captures++;
        } else if (staged) {
            if (exec)
                tk_cuda_graph_free(s->cap_ctx, exec);
            pl->graph_state = exec ? GRAPH_NONE : GRAPH_NEVER;
            s->capture_failures += !exec;
        }
        /* a request that brought other pointers meanwhile changed dptrs: this graph is stale */
        if (direct && dexec && gen == s->arena_gen && pl->direct_state == GRAPH_QUEUED &&
            !memcmp(ptrs, pl->dptrs, sizeof ptrs) && mask == pl->dmask) {
            pl->direct = dexec;
            pl->direct_arena = gen;
            pl->direct_state = GRAPH_READY;
            s->direct_captures++;
        } else if (direct) {
            if (dexec)
                tk_cuda_graph_free(s->cap_ctx, dexec);
            if (pl->direct_state == GRAPH_QUEUED)
                pl->direct_state = dexec ? GRAPH_NONE : GRAPH_NEVER;
            s->capture_failures += !dexec && s->bound;
        }
        s->in_capture = NULL;
        pthread_cond_broadcast(&s->cond);
        /* a request came since the last capture or pause ended (a capture's own request included): the
         * next capture waits (CAPTURE_PACE_US), or for the stop. Not "during the capture" only: a
         * small graph is captured between two requests, and then requests went on unpaced (in
         * run100 the pacing test saw all 8 graphs made in its 100 ms of calls). */
        const unsigned long calls = atomic_load_explicit(&s->calls, memory_order_relaxed);
        const int traffic = calls != seen;
        seen = calls;
        if (!warm && s->pace_us > 0 && traffic) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += s->pace_us / 1000000;
            until.tv_nsec += (s->pace_us % 1000000) * 1000;
            if (until.tv_nsec >= 1000000000)
                until.tv_sec++, until.tv_nsec -= 1000000000;
            while (!s->stop && pthread_cond_timedwait(&s->cond, &s->lock, &until) != ETIMEDOUT)
                ;
            seen = atomic_load_explicit(&s->calls, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* With the lock held: the capture thread runs (started now, with its context, if need be); else
 * -1, and the session runs eagerly from then on. */
static int capturer_start_locked(tk_session *s)
{
    if (s->capturer)
        return 0;
    const size_t n = s->p->nvalues + 1;
    if ((!s->cap_ctx && tk_ctx_new(&s->cap_ctx, s->ctx->device)) ||
        (!s->cap_views && !(s->cap_views = calloc(n, sizeof(tk_tensor)))) ||
        (!s->cap_t && !(s->cap_t = calloc(n, sizeof(tk_tensor *)))))
        goto failed;
    s->cap_ctx->stream_owner = s->ctx;
    s->stop = 0;
    if (pthread_create(&s->thread, NULL, capturer_main, s) != 0)
        goto failed;
    s->capturer = 1;
    return 0;
failed:
    s->graphs = 0;
    tk_error_clear();
    return -1;
}

/* With the lock held: pl joins the capture queue (unless it is there) for what its states ask. */
static void enqueue_locked(tk_session *s, plan *pl)
{
    if (pl->in_queue || capturer_start_locked(s))
        return;
    pl->in_queue = 1;
    pl->qnext = NULL;
    if (s->queue_tail)
        s->queue_tail->qnext = pl;
    else
        s->queue = pl;
    s->queue_tail = pl;
    pthread_cond_signal(&s->cond);
}

/* Asks the capture thread for pl's staged graph (started on first need, with its own context). */
static void capture_later(tk_session *s, plan *pl)
{
    pthread_mutex_lock(&s->lock);
    if (pl->graph_state == GRAPH_NONE) {
        /* a session whose shapes vary (PREFILL_AFTER signatures so far) gets the rest of its
         * small space captured too; one that serves a few shapes never pays for it */
        if (s->prefill_allowed && !s->prefill_on && s->requested >= PREFILL_AFTER)
            s->prefill_on = 1;
        pl->graph_state = GRAPH_QUEUED;
        enqueue_locked(s, pl);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The staged graph of pl when the capture thread has made it for the current arena. */
static void *staged_graph(tk_session *s, plan *pl)
{
    void *g = NULL;
    pthread_mutex_lock(&s->lock);
    if (pl->graph_state == GRAPH_READY && pl->graph_arena == s->arena_gen)
        g = pl->graph;
    else if (pl->graph_state == GRAPH_READY) {
        /* the arena moved since: capture again */
        tk_cuda_graph_free(s->ctx, pl->graph);
        pl->graph = NULL;
        pl->graph_state = GRAPH_NONE;
    }
    pthread_mutex_unlock(&s->lock);
    return g;
}

/* --- direct graphs ------------------------------------------------------------------------------ */

/* The direct graph for this run, or NULL. It may serve a graphs session whose caller supplies
 * the outputs (those the runtime allocates are new every call) as distinct node values, all on
 * the session's device. Counts consecutive runs with the same pointers; the second asks the
 * capture thread for a direct graph on them (the request path never captures); a graph baked on
 * other pointers, or on an arena since moved, is dropped. */
static void *direct_graph(tk_session *s, plan *pl, tk_tensor *const *in, tk_tensor **out)
{
    const tk_exec_program *p = s->p;
    size_t nin = p->m->ninputs, nout = p->m->noutputs;
    void *ptrs[TK_DIRECT_MAX] = {0}, *g = NULL;
    uint64_t mask = 0;
    if (!s->graphs || s->profiling || nin + nout > TK_DIRECT_MAX)
        return NULL;
    for (size_t i = 0; i < nin; i++) {
        if (!same_dev(tk_tensor_device(in[i]), s->ctx->device))
            return NULL;
        ptrs[i] = tk_tensor_data(in[i]);
    }
    for (size_t i = 0; i < nout; i++) {
        const xvalue *x = &p->values[p->outputs[i]];
        if (!out[i] || x->kind != V_NODE || x->output != (int)i || !same_dev(tk_tensor_device(out[i]), s->ctx->device))
            return NULL;
        ptrs[nin + i] = tk_tensor_data(out[i]);
        if (!tk_tensor_is_contiguous(out[i])) /* an output view (check_outputs): written in place */
            mask |= (uint64_t)1 << i;
    }
    size_t n = nin + nout;
    if (pl->nptrs == n && !memcmp(pl->ptrs, ptrs, sizeof ptrs) && pl->mask == mask) {
        pl->same_ptr_runs++;
    } else {
        memcpy(pl->ptrs, ptrs, sizeof ptrs);
        pl->nptrs = n;
        pl->mask = mask;
        pl->same_ptr_runs = 0;
    }
    pthread_mutex_lock(&s->lock);
    int same = !memcmp(pl->dptrs, ptrs, sizeof ptrs) && pl->dmask == mask;
    if (pl->direct_state == GRAPH_READY && (!same || pl->direct_arena != s->arena_gen)) {
        tk_cuda_graph_free(s->ctx, pl->direct);
        pl->direct = NULL;
        pl->direct_state = GRAPH_NONE;
    }
    if (pl->direct_state == GRAPH_READY) {
        g = pl->direct;
    } else if (pl->same_ptr_runs >= 1 && (pl->direct_state == GRAPH_NONE || (pl->direct_state == GRAPH_QUEUED && !same))) {
        memcpy(pl->dptrs, ptrs, sizeof ptrs);
        pl->dmask = mask;
        pl->direct_state = GRAPH_QUEUED;
        enqueue_locked(s, pl);
    }
    pthread_mutex_unlock(&s->lock);
    return g;
}

/* --- bound buffers ----------------------------------------------------------------------------- */

int tk_session_bind(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor *const *out, size_t nout)
{
    if (!s)
        return tk_error_set(TK_EINVAL, "tk_session_bind: no session");
    const tk_exec_program *p = s->p;
    const tk_program_model *m = p->m;
    char d1[32], d2[32];
    if (nin != m->ninputs || nout != m->noutputs || (nin && !in) || (nout && !out))
        return tk_error_set(TK_EINVAL, "tk_session_bind: program '%s' has %zu inputs and %zu outputs, got %zu and %zu",
                            m->name, m->ninputs, m->noutputs, in ? nin : 0, out ? nout : 0);
    if (!s->graphs)
        return tk_error_set(TK_EUNSUPPORTED, "tk_session_bind: the session on %s runs without CUDA graphs: nothing to "
                                             "bind", tk_device_name(s->ctx->device, d1, sizeof d1));
    if (nin + nout > TK_DIRECT_MAX)
        return tk_error_set(TK_EUNSUPPORTED, "tk_session_bind: program '%s' has %zu inputs and outputs, at most %d bind",
                            m->name, nin + nout, TK_DIRECT_MAX);
    /* the largest shape of every input and output: every symbol at its maximum */
    int64_t key[64] = {0};
    plan *big = NULL;
    for (size_t k = 0; k < m->nsymbols; k++)
        key[k] = m->symbols[k].max;
    int rc = plan_new(&big, s, key);
    if (rc)
        return rc;
    void *ptrs[TK_DIRECT_MAX] = {0};
    for (size_t i = 0; i < nin + nout && !rc; i++) {
        int is_in = i < nin;
        size_t j = is_in ? i : i - nin;
        tk_tensor *t = is_in ? in[j] : out[j];
        int v = is_in ? -1 : p->outputs[j];
        for (size_t u = 0; is_in && u < p->nvalues; u++)
            if (p->values[u].kind == V_INPUT && p->values[u].index == (int)j)
                v = (int)u;
        if (v < 0) {
            rc = tk_error_set(TK_EINTERNAL, "tk_session_bind: input %zu of program '%s' has no value", j, m->name);
            break;
        }
        const xvalue *x = &p->values[v];
        if (!is_in && (x->kind != V_NODE || x->output != (int)j))
            rc = tk_error_set(TK_EUNSUPPORTED, "tk_session_bind: output %zu of program '%s' is not a value of its own "
                                               "(an input, a parameter or another output): it cannot be bound", j, m->name);
        else if (!t || !same_dev(tk_tensor_device(t), s->ctx->device))
            rc = tk_error_set(TK_EINVAL, "tk_session_bind: %s %zu is %s%s, expected a tensor on %s", is_in ? "input" : "output",
                              j, t ? "on " : "missing", t ? tk_device_name(tk_tensor_device(t), d1, sizeof d1) : "",
                              tk_device_name(s->ctx->device, d2, sizeof d2));
        else if (!tk_tensor_is_contiguous(t))
            rc = tk_error_set(TK_EINVAL, "tk_session_bind: %s %zu is a strided view, expected a contiguous buffer",
                              is_in ? "input" : "output", j);
        else if (tk_tensor_dtype(t) != x->pm->dtype || (size_t)tk_numel(t) * tk_dtype_size(x->pm->dtype) < big->size[v])
            rc = tk_error_set(TK_EINVAL, "tk_session_bind: %s %zu is %s with %lld elements, expected %s holding the "
                                         "largest shape (%zu bytes)", is_in ? "input" : "output", j,
                              tk_dtype_name(tk_tensor_dtype(t)), (long long)tk_numel(t), tk_dtype_name(x->pm->dtype),
                              big->size[v]);
        else
            ptrs[i] = tk_tensor_data(t);
    }
    plan_free(s, big);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->lock);
    memcpy(s->bound_ptrs, ptrs, sizeof ptrs);
    s->bound = 1;
    if (s->prefill_allowed && capturer_start_locked(s) == 0) {
        /* the walk again, from the start: every signature gets its graph on the buffers */
        for (size_t k = 0; k < m->nsymbols; k++)
            s->prefill_key[k] = m->symbols[k].min;
        s->prefill_done = s->prefill_walked = s->walk_warm = 0;
        s->prefill_on = 1;
        s->capture_failures = 0;
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Whether every input lies on the session's device (an eager run then reads them in place). */
static int inputs_on_device(const tk_session *s, tk_tensor *const *in)
{
    for (size_t i = 0; i < s->p->m->ninputs; i++)
        if (!same_dev(in[i]->device, s->ctx->device))
            return 0;
    return 1;
}

/* One run: profiled (eager), the direct graph, the staged graph when the capture thread has made
 * it, else eager on the caller's tensors (asking for the staged graph for next time). */
static int execute(tk_session *s, plan *pl, tk_tensor *const *in, tk_tensor **out, unsigned char *made)
{
    const tk_exec_program *p = s->p;
    tk_tensor **t = s->t;
    int rc;
    void *g = NULL;
    s->last_mode = TK_EXEC_EAGER;
    s->last_direct = 0;
    if ((rc = arena_reserve(s, pl->total)))
        return rc;
    if (s->profiling) {
        bind_mode mode = !s->staged || inputs_on_device(s, in) ? BIND_DIRECT : BIND_STAGED;
        if (!(rc = bind_tensors(s, s->ctx, pl, mode, in, out, t, s->views, made, NULL, 0)))
            rc = run_profiled(s, pl, t);
        /* the timing graph's replays ran the nodes again after the eager run, which may have reused
         * a staged input's arena space for a later value: the inputs staged again, the nodes once
         * more, so the outputs are those of the caller's inputs */
        if (!rc && mode == BIND_STAGED && s->ctx->device.kind == TK_DEVICE_CUDA &&
            !(rc = bind_tensors(s, s->ctx, pl, mode, in, out, t, s->views, made, NULL, 0)))
            rc = run_nodes(s, pl, s->ctx, t, NULL, 0);
    } else if ((g = direct_graph(s, pl, in, out))) {
        if (!(rc = bind_tensors(s, s->ctx, pl, BIND_DIRECT, in, out, t, s->views, made, NULL, 0)) &&
            !(rc = tk_cuda_graph_launch(s->ctx, g))) {
            s->last_mode = TK_EXEC_REPLAYED;
            s->last_direct = 1;
        }
    } else if (s->graphs && (g = staged_graph(s, pl))) {
        if (!(rc = bind_tensors(s, s->ctx, pl, BIND_STAGED, in, out, t, s->views, made, NULL, 0)) &&
            !(rc = tk_cuda_graph_launch(s->ctx, g)))
            s->last_mode = TK_EXEC_REPLAYED;
    } else {
        bind_mode mode = !s->staged || inputs_on_device(s, in) ? BIND_DIRECT : BIND_STAGED;
        if (!(rc = bind_tensors(s, s->ctx, pl, mode, in, out, t, s->views, made, NULL, 0)))
            rc = run_nodes(s, pl, s->ctx, t, NULL, 0);
        if (!rc && s->graphs && (!s->space_large || pl->runs >= 1))
            capture_later(s, pl);
    }
    /* outputs that are not their value's storage: staged ones, inputs, parameters, repeats */
    for (size_t i = 0; !rc && i < p->m->noutputs; i++)
        if (t[p->outputs[i]] != out[i])
            rc = tk_tensor_copy(s->ctx, out[i], t[p->outputs[i]]);
    if (!rc)
        pl->runs++;
    return rc;
}

int tk_session_run(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor **out, size_t nout)
{
    binding b;
    plan *pl;
    unsigned char made[256] = {0};
    int rc;
    if (!s)
        return tk_error_set(TK_EINVAL, "tk_session_run: no session");
    const tk_program_model *m = s->p->m;
    if (nout < m->noutputs || !out)
        return tk_error_set(TK_EINVAL, "program '%s' gives %zu output%s, got %zu output slot%s", m->name, m->noutputs,
                            m->noutputs == 1 ? "" : "s", out ? nout : 0, nout == 1 ? "" : "s");
    if (m->noutputs > sizeof made)
        return tk_error_set(TK_EUNSUPPORTED, "program '%s' has %zu outputs, at most %zu", m->name, m->noutputs,
                            sizeof made);
    atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
    memset(&b, 0, sizeof b);
    if ((rc = check_input_kinds(s, in, nin)) || (rc = bind_symbols(s, in, &b)))
        return rc;
    solve_symbols(s, in, &b);
    if ((rc = check_expressions(s, in, &b)) || (rc = plan_get(s, &b, &pl)) || (rc = check_outputs(s, pl, out)))
        return rc;
    if ((rc = execute(s, pl, in, out, made))) {
        for (size_t i = 0; i < m->noutputs; i++) {
            if (made[i]) {
                tk_tensor_free(out[i]);
                out[i] = NULL;
            }
        }
    }
    return rc;
}
