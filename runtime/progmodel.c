/* The in-memory program model: an arena for its strings and small arrays, appenders for its
 * tables, lookups and the shape formatting every output shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/error.h>

#include "progmodel.h"

/* The arena: blocks of at least 16 KiB, objects 16-byte aligned. With TK_ARENA_MALLOC each
 * object is its own allocation, so that ASan and valgrind see them one by one. */
typedef struct tk_pm_block {
    struct tk_pm_block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} tk_pm_block;

struct tk_pm_arena {
    tk_pm_block *head;
};

void *tk_pm_alloc(tk_program_model *m, size_t n)
{
    struct tk_pm_arena *a = m->arena;
    n = (n + 15) & ~(size_t)15;
#ifdef TK_ARENA_MALLOC
    size_t want = n;
#else
    size_t want = n > 16384 ? n : 16384;
    if (a->head && a->head->size - a->head->used >= n) {
        void *p = a->head->data + a->head->used;
        a->head->used += n;
        return p;
    }
#endif
    tk_pm_block *b = calloc(1, sizeof(*b) + want);
    if (!b) {
        tk_error_set(TK_ENOMEM, "out of memory");
        return NULL;
    }
    b->size = want;
    b->used = n;
    /* a full block goes behind the current one so the latter keeps its free room */
    if (a->head && n == want) {
        b->next = a->head->next;
        a->head->next = b;
    } else {
        b->next = a->head;
        a->head = b;
    }
    return b->data;
}

char *tk_pm_strdup(tk_program_model *m, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = tk_pm_alloc(m, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

int tk_program_model_new(tk_program_model **out, const char *name)
{
    *out = NULL;
    tk_program_model *m = calloc(1, sizeof(*m));
    if (!m || !(m->arena = calloc(1, sizeof(*m->arena)))) {
        free(m);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    if (!(m->name = tk_pm_strdup(m, name ? name : ""))) {
        tk_program_model_free(m);
        return TK_ENOMEM;
    }
    *out = m;
    return 0;
}

void tk_program_model_free(tk_program_model *m)
{
    if (!m)
        return;
    free(m->symbols);
    free(m->inputs);
    free(m->outputs);
    free(m->params);
    free(m->nodes);
    free(m->guards);
    free(m->notes);
    free(m->ops);
    for (size_t i = 0; i < m->nsources; i++)
        free(m->sources[i].data);
    free(m->sources);
    free(m->tunes);
    free(m->weights);
    free(m->program_json);
    if (m->arena) {
        for (tk_pm_block *b = m->arena->head, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        free(m->arena);
    }
    free(m);
}

/* Capacity of an array holding n elements: 0, then powers of two from 4. */
static size_t cap_of(size_t n)
{
    size_t c = 4;
    if (!n)
        return 0;
    while (c < n)
        c *= 2;
    return c;
}

/* Appends one zeroed element to a malloc'd array of *n elements. */
static void *push(void **arr, size_t *n, size_t elem)
{
    if (*n == cap_of(*n)) {
        void *p = realloc(*arr, cap_of(*n + 1) * elem);
        if (!p) {
            tk_error_set(TK_ENOMEM, "out of memory");
            return NULL;
        }
        *arr = p;
    }
    unsigned char *e = (unsigned char *)*arr + *n * elem;
    memset(e, 0, elem);
    (*n)++;
    return e;
}

#define PUSH(m, field, count) push((void **)&(m)->field, &(m)->count, sizeof(*(m)->field))

tk_pm_symbol *tk_pm_add_symbol(tk_program_model *m, const char *name, int64_t min, int64_t max)
{
    char *nm = tk_pm_strdup(m, name);
    tk_pm_symbol *s = nm ? PUSH(m, symbols, nsymbols) : NULL;
    if (s) {
        s->name = nm;
        s->min = min;
        s->max = max;
    }
    return s;
}

tk_pm_value *tk_pm_add_input(tk_program_model *m) { return PUSH(m, inputs, ninputs); }
tk_pm_value *tk_pm_add_param(tk_program_model *m) { return PUSH(m, params, nparams); }
tk_pm_value *tk_pm_add_output(tk_program_model *m) { return PUSH(m, outputs, noutputs); }

tk_pm_node *tk_pm_add_node(tk_program_model *m, const char *op, int nin, int nout, const char *file, int line)
{
    char *o = tk_pm_strdup(m, op), *f = tk_pm_strdup(m, file ? file : "");
    int *ins = tk_pm_alloc(m, sizeof(int) * (size_t)(nin > 0 ? nin : 1));
    tk_pm_value *outs = tk_pm_alloc(m, sizeof(tk_pm_value) * (size_t)(nout > 0 ? nout : 1));
    tk_pm_node *n = o && f && ins && outs ? PUSH(m, nodes, nnodes) : NULL;
    if (n) {
        n->op = o;
        n->nin = nin;
        n->inputs = ins;
        n->nout = nout;
        n->outputs = outs;
        n->file = f;
        n->line = line;
    }
    return n;
}

tk_pm_attr *tk_pm_node_attrs(tk_program_model *m, tk_pm_node *n, int nattrs)
{
    tk_pm_attr *a = tk_pm_alloc(m, sizeof(tk_pm_attr) * (size_t)(nattrs > 0 ? nattrs : 1));
    if (a) {
        n->attrs = a;
        n->nattrs = nattrs;
    }
    return a;
}

tk_pm_op *tk_pm_add_op(tk_program_model *m, const char *name)
{
    char *nm = tk_pm_strdup(m, name);
    tk_pm_op *op = nm ? PUSH(m, ops, nops) : NULL;
    if (op)
        op->name = nm;
    return op;
}

tk_pm_source *tk_pm_add_source(tk_program_model *m, const char *path, const void *data, size_t len)
{
    char *p = tk_pm_strdup(m, path);
    unsigned char *copy = malloc(len ? len : 1);
    tk_pm_source *s = p && copy ? PUSH(m, sources, nsources) : NULL;
    if (!s) {
        free(copy);
        if (p && !copy)
            tk_error_set(TK_ENOMEM, "out of memory");
        return NULL;
    }
    if (len)
        memcpy(copy, data, len);
    s->path = p;
    s->data = copy;
    s->len = len;
    return s;
}

tk_pm_tune *tk_pm_add_tune(tk_program_model *m, const char *kernel)
{
    char *k = tk_pm_strdup(m, kernel);
    tk_pm_tune *t = k ? PUSH(m, tunes, ntunes) : NULL;
    if (t)
        t->kernel = k;
    return t;
}

static int add_unique(tk_program_model *m, char ***list, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*list)[i], s))
            return 0;
    char *copy = tk_pm_strdup(m, s);
    char **slot = copy ? push((void **)list, n, sizeof(char *)) : NULL;
    if (!slot)
        return TK_ENOMEM;
    *slot = copy;
    return 0;
}

int tk_pm_add_guard(tk_program_model *m, const char *s) { return add_unique(m, &m->guards, &m->nguards, s); }
int tk_pm_add_note(tk_program_model *m, const char *s) { return add_unique(m, &m->notes, &m->nnotes, s); }

tk_pm_symbol *tk_pm_find_symbol(const tk_program_model *m, const char *name)
{
    for (size_t i = 0; i < m->nsymbols; i++)
        if (!strcmp(m->symbols[i].name, name))
            return &m->symbols[i];
    return NULL;
}

tk_pm_op *tk_pm_find_op(const tk_program_model *m, const char *name)
{
    for (size_t i = 0; i < m->nops; i++)
        if (!strcmp(m->ops[i].name, name))
            return &m->ops[i];
    return NULL;
}

const tk_pm_value *tk_pm_find_value(const tk_program_model *m, int id)
{
    for (size_t i = 0; i < m->ninputs; i++)
        if (m->inputs[i].id == id)
            return &m->inputs[i];
    for (size_t i = 0; i < m->nparams; i++)
        if (m->params[i].id == id)
            return &m->params[i];
    for (size_t i = 0; i < m->nnodes; i++)
        for (int j = 0; j < m->nodes[i].nout; j++)
            if (m->nodes[i].outputs[j].id == id)
                return &m->nodes[i].outputs[j];
    return NULL;
}

static int cmp_op(const void *a, const void *b)
{
    return strcmp(((const tk_pm_op *)a)->name, ((const tk_pm_op *)b)->name);
}

static int cmp_source(const void *a, const void *b)
{
    return strcmp(((const tk_pm_source *)a)->path, ((const tk_pm_source *)b)->path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_tune(const void *a, const void *b)
{
    return strcmp(((const tk_pm_tune *)a)->kernel, ((const tk_pm_tune *)b)->kernel);
}

void tk_pm_sort(tk_program_model *m)
{
    if (m->nops)
        qsort(m->ops, m->nops, sizeof(*m->ops), cmp_op);
    if (m->nsources)
        qsort(m->sources, m->nsources, sizeof(*m->sources), cmp_source);
    if (m->ntunes > 1)
        qsort(m->tunes, m->ntunes, sizeof(*m->tunes), cmp_tune);
    for (size_t i = 0; i < m->nops; i++)
        if (m->ops[i].nkernels)
            qsort(m->ops[i].kernels, m->ops[i].nkernels, sizeof(char *), cmp_str);
}

const char *tk_pm_format_float(char *buf, size_t n, double f)
{
    if (f != f || (f == f * 2 && f != 0)) { /* NaN, +-inf: no JSON number; the schema's spelling */
        snprintf(buf, n, "%s", f != f ? "nan" : f > 0 ? "inf" : "-inf");
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    if (!strpbrk(buf, ".e"))
        snprintf(buf + strlen(buf), n - strlen(buf), ".0");
    return buf;
}

int tk_pm_format_attr(tk_strbuf *sb, const tk_pm_attr *a)
{
    char num[40];
    int rc = tk_strbuf_addf(sb, "%s=", a->name);
    switch (a->kind) {
    case TK_VALUE_INT: return rc ? rc : tk_strbuf_addf(sb, "%lld", (long long)a->i);
    case TK_VALUE_FLOAT: return rc ? rc : tk_strbuf_adds(sb, tk_pm_format_float(num, sizeof num, a->f));
    case TK_VALUE_BOOL: return rc ? rc : tk_strbuf_adds(sb, a->i ? "True" : "False");
    case TK_VALUE_STR: {
        char q = strchr(a->s, '"') ? '\'' : '"';
        return rc ? rc : tk_strbuf_addf(sb, "%c%s%c", q, a->s, q);
    }
    case TK_VALUE_INTS:
        rc = rc ? rc : tk_strbuf_adds(sb, "[");
        for (int i = 0; i < a->nints && !rc; i++)
            rc = tk_strbuf_addf(sb, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
        return rc ? rc : tk_strbuf_adds(sb, "]");
    default: return rc ? rc : tk_strbuf_adds(sb, "?");
    }
}

int tk_pm_format_shape(tk_strbuf *sb, const tk_pm_value *v)
{
    int rc = tk_strbuf_addf(sb, "%s[", tk_dtype_name(v->dtype));
    for (int i = 0; i < v->rank && !rc; i++) {
        if (v->dims[i].expr)
            rc = tk_strbuf_addf(sb, "%s%s", i ? ", " : "", v->dims[i].expr);
        else
            rc = tk_strbuf_addf(sb, "%s%lld", i ? ", " : "", (long long)v->dims[i].value);
    }
    return rc ? rc : tk_strbuf_adds(sb, "]");
}
