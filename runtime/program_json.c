/* program.json: the writer (fixed key order, one line per table entry, integers printed exactly)
 * and the reader (format and version first, then every field checked, one-line errors). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "progmodel.h"
#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

/* --- writer -------------------------------------------------------------------------------- */

/* A strbuf whose first failure sticks, so the writer checks once at the end. */
typedef struct jw {
    tk_strbuf sb;
    int err;
} jw;

static void put(jw *w, const char *s)
{
    if (!w->err)
        w->err = tk_strbuf_adds(&w->sb, s);
}

static void putf(jw *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void putf(jw *w, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        w->err = TK_EINTERNAL;
        return;
    }
    put(w, buf);
}

static void str(jw *w, const char *s)
{
    char esc[8];
    put(w, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p && !w->err; p++) {
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            esc[2] = '\0';
            put(w, esc);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            put(w, esc);
        } else {
            if (!w->err)
                w->err = tk_strbuf_add(&w->sb, p, 1);
        }
    }
    put(w, "\"");
}

static void shape(jw *w, const tk_pm_value *v)
{
    put(w, "[");
    for (int i = 0; i < v->rank; i++) {
        if (i)
            put(w, ", ");
        if (v->dims[i].expr)
            str(w, v->dims[i].expr);
        else
            putf(w, "%lld", (long long)v->dims[i].value);
    }
    put(w, "]");
}

/* {"name": .., "id": .., "dtype": .., "shape": [..]} (name left out for node outputs). */
static void value(jw *w, const tk_pm_value *v, int named)
{
    put(w, "{");
    if (named) {
        put(w, "\"name\": ");
        str(w, v->name);
        put(w, ", ");
    }
    putf(w, "\"id\": %d, \"dtype\": ", v->id);
    str(w, tk_dtype_name(v->dtype));
    put(w, ", \"shape\": ");
    shape(w, v);
    put(w, "}");
}

/* "name": value, in the JSON type of its kind (a float always with a '.' or an exponent). */
static void attr(jw *w, const tk_pm_attr *a, int j)
{
    char num[40];
    if (j)
        put(w, ", ");
    str(w, a->name);
    put(w, ": ");
    switch (a->kind) {
    case TK_VALUE_INT: putf(w, "%lld", (long long)a->i); break;
    case TK_VALUE_FLOAT: put(w, tk_pm_format_float(num, sizeof num, a->f)); break;
    case TK_VALUE_BOOL: put(w, a->i ? "true" : "false"); break;
    case TK_VALUE_STR: str(w, a->s); break;
    default:
        put(w, "[");
        for (int i = 0; i < a->nints; i++)
            putf(w, i ? ", %lld" : "%lld", (long long)a->ints[i]);
        put(w, "]");
    }
}

static void open_list(jw *w, const char *key, size_t n)
{
    put(w, ",\n  ");
    str(w, key);
    put(w, n ? ": [\n" : ": [");
}

static void item_sep(jw *w, size_t i, size_t n)
{
    put(w, i + 1 < n ? ",\n" : "\n  ");
}

static void strings(jw *w, const char *key, char *const *list, size_t n)
{
    open_list(w, key, n);
    for (size_t i = 0; i < n; i++) {
        put(w, "    ");
        str(w, list[i]);
        item_sep(w, i, n);
    }
    put(w, "]");
}

int tk_program_json_write(char **out, const tk_program_model *m)
{
    jw w = {TK_STRBUF_INIT, 0};
    *out = NULL;
    put(&w, "{\n  \"format\": ");
    str(&w, TK_TKPROG_FORMAT);
    int has_attrs = 0;
    for (size_t i = 0; i < m->nnodes; i++)
        has_attrs |= m->nodes[i].nattrs > 0;
    putf(&w, ",\n  \"version\": %d,\n  \"program\": ", has_attrs ? TK_TKPROG_VERSION : TK_TKPROG_VERSION_MIN);
    str(&w, m->name);

    open_list(&w, "symbols", m->nsymbols);
    for (size_t i = 0; i < m->nsymbols; i++) {
        put(&w, "    {\"name\": ");
        str(&w, m->symbols[i].name);
        putf(&w, ", \"min\": %lld", (long long)m->symbols[i].min);
        putf(&w, ", \"max\": %lld}", (long long)m->symbols[i].max);
        item_sep(&w, i, m->nsymbols);
    }
    put(&w, "]");

    const struct {
        const char *key;
        const tk_pm_value *v;
        size_t n;
        int named;
    } lists[] = {{"inputs", m->inputs, m->ninputs, 1}, {"outputs", m->outputs, m->noutputs, 0},
                 {"parameters", m->params, m->nparams, 1}};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        open_list(&w, lists[l].key, lists[l].n);
        for (size_t i = 0; i < lists[l].n; i++) {
            put(&w, "    ");
            value(&w, &lists[l].v[i], lists[l].named);
            item_sep(&w, i, lists[l].n);
        }
        put(&w, "]");
    }

    open_list(&w, "nodes", m->nnodes);
    for (size_t i = 0; i < m->nnodes; i++) {
        const tk_pm_node *n = &m->nodes[i];
        put(&w, "    {\"op\": ");
        str(&w, n->op);
        put(&w, ", \"inputs\": [");
        for (int j = 0; j < n->nin; j++) {
            if (j)
                put(&w, ", ");
            if (n->inputs[j] < 0)
                put(&w, "null");
            else
                putf(&w, "%d", n->inputs[j]);
        }
        put(&w, "], \"outputs\": [");
        for (int j = 0; j < n->nout; j++) {
            if (j)
                put(&w, ", ");
            value(&w, &n->outputs[j], 0);
        }
        put(&w, "], \"attrs\": {");
        for (int j = 0; j < n->nattrs; j++)
            attr(&w, &n->attrs[j], j);
        put(&w, "}, \"source\": {\"file\": ");
        str(&w, n->file);
        putf(&w, ", \"line\": %d}}", n->line);
        item_sep(&w, i, m->nnodes);
    }
    put(&w, "]");

    strings(&w, "guards", m->guards, m->nguards);
    strings(&w, "notes", m->notes, m->nnotes);

    open_list(&w, "ops", m->nops);
    for (size_t i = 0; i < m->nops; i++) {
        const tk_pm_op *op = &m->ops[i];
        put(&w, "    {\"name\": ");
        str(&w, op->name);
        put(&w, ", \"schema\": ");
        str(&w, op->schema);
        put(&w, ", \"function\": ");
        if (op->function)
            str(&w, op->function);
        else
            put(&w, "null");
        put(&w, ", \"file\": ");
        str(&w, op->file);
        put(&w, op->builtin ? ", \"builtin\": true" : ", \"builtin\": false");
        put(&w, ", \"kernels\": [");
        for (size_t k = 0; k < op->nkernels; k++) {
            if (k)
                put(&w, ", ");
            str(&w, op->kernels[k]);
        }
        put(&w, "]}");
        item_sep(&w, i, m->nops);
    }
    put(&w, "]");

    if (m->has_tuning) {
        open_list(&w, "tuning", m->ntunes);
        for (size_t i = 0; i < m->ntunes; i++) {
            const tk_pm_tune *t = &m->tunes[i];
            put(&w, "    {\"kernel\": ");
            str(&w, t->kernel);
            put(&w, ", \"key\": ");
            str(&w, t->key);
            put(&w, ", \"params\": [");
            for (int k = 0; k < t->nparams; k++) {
                put(&w, k ? ", " : "");
                str(&w, t->params[k]);
            }
            put(&w, "], \"configs\": [");
            for (int c = 0; c < t->nconfigs; c++) {
                put(&w, c ? ", [" : "[");
                for (int k = 0; k < t->nparams; k++)
                    putf(&w, "%s%d", k ? ", " : "", t->values[c][k]);
                put(&w, "]");
            }
            put(&w, "], \"heuristic\": ");
            if (t->hparam) {
                put(&w, "{\"param\": ");
                str(&w, t->hparam);
                put(&w, ", \"values\": [");
                for (int k = 0; k < t->nh; k++)
                    putf(&w, "%s%d", k ? ", " : "", t->hvalues[k]);
                put(&w, "]}");
            } else {
                put(&w, "null");
            }
            put(&w, ", \"file\": ");
            str(&w, t->file);
            putf(&w, ", \"line\": %d}", t->line);
            item_sep(&w, i, m->ntunes);
        }
        put(&w, "]");
    }

    open_list(&w, "sources", m->nsources);
    for (size_t i = 0; i < m->nsources; i++) {
        put(&w, "    {\"path\": ");
        str(&w, m->sources[i].path);
        put(&w, ", \"sha256\": ");
        str(&w, m->sources[i].sha256);
        put(&w, "}");
        item_sep(&w, i, m->nsources);
    }
    put(&w, "]\n}\n");

    if (w.err) {
        tk_strbuf_release(&w.sb);
        return tk_error_set(TK_ENOMEM, "out of memory writing program.json");
    }
    *out = tk_strbuf_detach(&w.sb);
    return *out ? 0 : tk_error_set(TK_ENOMEM, "out of memory writing program.json");
}

/* --- reader -------------------------------------------------------------------------------- */

typedef struct jr {
    const char *origin;
    tk_program_model *m;
    tk_ctx *ctx;          /* for parsing shape expressions */
    const char **names;   /* the symbols, to parse expressions against */
    tk_sym *vars;
    int nvars;
    int version;
} jr;

static int bad(const jr *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int bad(const jr *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tk_error_set(TK_EFORMAT, "%s: program.json: %s", r->origin, msg);
}

static const cJSON *field(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* "ORIGIN: program.json: WHERE", the place a checked accessor names */
static const char *place(const jr *r, const char *where, char *buf, size_t n)
{
    snprintf(buf, n, "%s: program.json: %s", r->origin, where);
    return buf;
}

static int get_int(const jr *r, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   const char *where)
{
    char at[512];
    return tk_json_need_int(obj, key, place(r, where, at, sizeof at), lo, hi, out);
}

static int get_str(const jr *r, const cJSON *obj, const char *key, const char **out, const char *where)
{
    char at[512];
    return tk_json_need_str(obj, key, place(r, where, at, sizeof at), out);
}

static int get_array(const jr *r, const cJSON *obj, const char *key, const cJSON **out, const char *where)
{
    const cJSON *v = field(obj, key);
    if (!cJSON_IsArray(v))
        return bad(r, "%s: '%s' is missing or not an array", where, key);
    *out = v;
    return 0;
}

static int get_dtype(const jr *r, const cJSON *obj, tk_dtype *out, const char *where)
{
    const char *s = NULL;
    int rc = get_str(r, obj, "dtype", &s, where);
    if (rc)
        return rc;
    if (tk_dtype_parse(out, s))
        return bad(r, "%s: unknown dtype '%s' (expected f32, f16, bf16, i32 or i64)", where, s);
    return 0;
}

static int get_shape(jr *r, const cJSON *obj, tk_pm_value *v, int symbolic, const char *where)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, obj, "shape", &arr, where);
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    if (n > TK_MAX_DIMS)
        return bad(r, "%s: shape has %d dims (at most %d)", where, n, TK_MAX_DIMS);
    v->rank = n;
    for (int i = 0; i < n; i++) {
        const cJSON *d = cJSON_GetArrayItem(arr, i);
        if (cJSON_IsNumber(d)) {
            if (d->valuedouble != floor(d->valuedouble) || d->valuedouble < 0 || d->valuedouble > (double)TK_PM_INT_MAX)
                return bad(r, "%s: shape[%d] is %g, expected a whole number in [0, 2^53]", where, i, d->valuedouble);
            v->dims[i].value = (int64_t)d->valuedouble;
        } else if (cJSON_IsString(d) && symbolic) {
            tk_sym s;
            if (tk_sym_parse(r->ctx, d->valuestring, r->names, r->vars, r->nvars, &s))
                return bad(r, "%s: shape[%d] '%s': %s", where, i, d->valuestring, tk_error_last());
            if (!(v->dims[i].expr = tk_pm_strdup(r->m, d->valuestring)))
                return TK_ENOMEM;
        } else {
            return bad(r, "%s: shape[%d] is not %s", where, i,
                       symbolic ? "a whole number or an expression" : "a whole number");
        }
    }
    return 0;
}

/* An id not used yet (ids are unique across inputs, parameters and node outputs). */
static int check_new_id(const jr *r, int id, const char *where)
{
    if (tk_pm_find_value(r->m, id))
        return bad(r, "%s: id %d is used twice", where, id);
    return 0;
}

static int read_value(jr *r, const cJSON *obj, tk_pm_value *v, int named, int symbolic, const char *where)
{
    int64_t id = 0;
    int rc;
    if (!cJSON_IsObject(obj))
        return bad(r, "%s is not an object", where);
    if (named) {
        const char *name = NULL;
        if ((rc = get_str(r, obj, "name", &name, where)))
            return rc;
        if (!name[0])
            return bad(r, "%s: empty name", where);
        if (!(v->name = tk_pm_strdup(r->m, name)))
            return TK_ENOMEM;
    }
    if ((rc = get_int(r, obj, "id", 0, INT32_MAX, &id, where)) || (rc = get_dtype(r, obj, &v->dtype, where)) ||
        (rc = get_shape(r, obj, v, symbolic, where)))
        return rc;
    v->id = (int)id;
    return 0;
}

static int same_shape(const tk_pm_value *a, const tk_pm_value *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++) {
        if ((a->dims[i].expr == NULL) != (b->dims[i].expr == NULL))
            return 0;
        if (a->dims[i].expr ? strcmp(a->dims[i].expr, b->dims[i].expr) != 0 : a->dims[i].value != b->dims[i].value)
            return 0;
    }
    return 1;
}

static int valid_ident(const char *s)
{
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* A relative path without "." or ".." parts, backslashes or empty parts. */
static int valid_source_path(const char *p)
{
    if (!p[0] || p[0] == '/' || strchr(p, '\\'))
        return 0;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        s += n;
        if (*s == '/')
            s++;
        if (e && !*s)
            return 0;
    }
    return 1;
}

static int read_symbols(jr *r, const cJSON *doc)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, "symbols", &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    if (n > TK_PROGRAM_MAX_INPUTS * TK_MAX_DIMS)
        return bad(r, "%d symbols (at most %d)", n, TK_PROGRAM_MAX_INPUTS * TK_MAX_DIMS);
    r->names = calloc((size_t)n + 1, sizeof(*r->names));
    r->vars = calloc((size_t)n + 1, sizeof(*r->vars));
    if (!r->names || !r->vars)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        char where[48];
        const cJSON *s = cJSON_GetArrayItem(arr, i);
        const char *name = NULL;
        int64_t min = 0, max = 0;
        snprintf(where, sizeof where, "symbols[%d]", i);
        if (!cJSON_IsObject(s))
            return bad(r, "%s is not an object", where);
        if ((rc = get_str(r, s, "name", &name, where)) || (rc = get_int(r, s, "min", 0, TK_PM_INT_MAX, &min, where)) ||
            (rc = get_int(r, s, "max", 0, TK_PM_INT_MAX, &max, where)))
            return rc;
        if (!valid_ident(name))
            return bad(r, "%s: name '%s' is not an identifier", where, name);
        if (min > max)
            return bad(r, "%s: '%s' has the empty range [%lld, %lld]", where, name, (long long)min, (long long)max);
        if (tk_pm_find_symbol(r->m, name))
            return bad(r, "%s: symbol '%s' is declared twice", where, name);
        const tk_pm_symbol *sym = tk_pm_add_symbol(r->m, name, min, max);
        if (!sym)
            return TK_ENOMEM;
        r->vars[i] = tk_sym_var(r->ctx, sym->name, min, max);
        if (tk_sym_is_const(r->vars[i]))
            return tk_error_set(TK_ENOMEM, "out of memory");
        r->nvars = i + 1;
    }
    /* names point into the model, which keeps them at fixed addresses */
    for (int i = 0; i < n; i++)
        r->names[i] = r->m->symbols[i].name;
    return 0;
}

static int read_values(jr *r, const cJSON *doc, const char *key, int named, int symbolic)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, key, &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    for (int i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "%s[%d]", key, i);
        tk_pm_value v;
        memset(&v, 0, sizeof v);
        if ((rc = read_value(r, cJSON_GetArrayItem(arr, i), &v, named, symbolic, where)))
            return rc;
        if (!strcmp(key, "outputs")) {
            const tk_pm_value *def = tk_pm_find_value(r->m, v.id);
            if (!def)
                return bad(r, "%s: id %d is no value of the program", where, v.id);
            if (!same_shape(def, &v))
                return bad(r, "%s: dtype and shape differ from those of value %d", where, v.id);
            tk_pm_value *slot = tk_pm_add_output(r->m);
            if (!slot)
                return TK_ENOMEM;
            *slot = v;
            continue;
        }
        if ((rc = check_new_id(r, v.id, where)))
            return rc;
        const tk_pm_value *list = !strcmp(key, "inputs") ? r->m->inputs : r->m->params;
        size_t nlist = !strcmp(key, "inputs") ? r->m->ninputs : r->m->nparams;
        for (size_t j = 0; j < nlist; j++)
            if (!strcmp(list[j].name, v.name))
                return bad(r, "%s: '%s' is listed twice", where, v.name);
        tk_pm_value *slot = !strcmp(key, "inputs") ? tk_pm_add_input(r->m) : tk_pm_add_param(r->m);
        if (!slot)
            return TK_ENOMEM;
        *slot = v;
    }
    return 0;
}

static int read_nodes(jr *r, const cJSON *doc)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, "nodes", &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    for (int i = 0; i < n; i++) {
        char where[64], sub[96];
        const cJSON *o = cJSON_GetArrayItem(arr, i), *ins = NULL, *outs = NULL, *attrs, *src;
        const char *op = NULL, *file = NULL;
        int64_t line = 0;
        snprintf(where, sizeof where, "nodes[%d]", i);
        if (!cJSON_IsObject(o))
            return bad(r, "%s is not an object", where);
        if ((rc = get_str(r, o, "op", &op, where)) || (rc = get_array(r, o, "inputs", &ins, where)) ||
            (rc = get_array(r, o, "outputs", &outs, where)))
            return rc;
        attrs = field(o, "attrs");
        if (!cJSON_IsObject(attrs))
            return bad(r, "%s: 'attrs' is missing or not an object", where);
        if (attrs->child && r->version < 2)
            return bad(r, "%s: 'attrs' must be an empty object in version %d", where, r->version);
        src = field(o, "source");
        snprintf(sub, sizeof sub, "%s.source", where);
        if (!cJSON_IsObject(src))
            return bad(r, "%s: 'source' is missing or not an object", where);
        if ((rc = get_str(r, src, "file", &file, sub)) || (rc = get_int(r, src, "line", 0, INT32_MAX, &line, sub)))
            return rc;
        int nin = cJSON_GetArraySize(ins), nout = cJSON_GetArraySize(outs);
        if (nin > 64 || nout > 64 || nout < 1)
            return bad(r, "%s: %d inputs and %d outputs (1 to 64 outputs, at most 64 inputs)", where, nin, nout);
        tk_pm_node *node = tk_pm_add_node(r->m, op, nin, nout, file, (int)line);
        if (!node)
            return TK_ENOMEM;
        for (int j = 0; j < nin; j++) {
            const cJSON *x = cJSON_GetArrayItem(ins, j);
            if (cJSON_IsNull(x)) {
                node->inputs[j] = -1;
                continue;
            }
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
                x->valuedouble > INT32_MAX)
                return bad(r, "%s: inputs[%d] is not a value id", where, j);
            node->inputs[j] = (int)x->valuedouble;
            /* the node itself is already in the list, with zeroed outputs: look among earlier ones */
            r->m->nnodes--;
            const tk_pm_value *def = tk_pm_find_value(r->m, node->inputs[j]);
            r->m->nnodes++;
            if (!def)
                return bad(r, "%s: inputs[%d] is value %d, which no input, parameter or earlier node defines", where, j,
                           node->inputs[j]);
        }
        for (int j = 0; j < nout; j++) {
            tk_pm_value v;
            memset(&v, 0, sizeof v);
            snprintf(sub, sizeof sub, "%s.outputs[%d]", where, j);
            if ((rc = read_value(r, cJSON_GetArrayItem(outs, j), &v, 0, 1, sub)))
                return rc;
            r->m->nnodes--;
            rc = check_new_id(r, v.id, sub);
            r->m->nnodes++;
            for (int k = 0; k < j && !rc; k++)
                if (node->outputs[k].id == v.id)
                    rc = bad(r, "%s: id %d is used twice", sub, v.id);
            if (rc)
                return rc;
            node = &r->m->nodes[r->m->nnodes - 1];
            node->outputs[j] = v;
        }
    }
    return 0;
}

static int read_strings(jr *r, const cJSON *doc, const char *key, int (*add)(tk_program_model *, const char *))
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, key, &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(arr, i);
        if (!cJSON_IsString(s))
            return bad(r, "%s[%d] is not a string", key, i);
        if (add(r->m, s->valuestring))
            return TK_ENOMEM;
    }
    return 0;
}

static int read_ops(jr *r, const cJSON *doc)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, "ops", &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    for (int i = 0; i < n; i++) {
        char where[48];
        const cJSON *o = cJSON_GetArrayItem(arr, i), *fn, *builtin, *kernels = NULL;
        const char *name = NULL, *schema = NULL, *file = NULL;
        snprintf(where, sizeof where, "ops[%d]", i);
        if (!cJSON_IsObject(o))
            return bad(r, "%s is not an object", where);
        if ((rc = get_str(r, o, "name", &name, where)) || (rc = get_str(r, o, "schema", &schema, where)) ||
            (rc = get_str(r, o, "file", &file, where)) || (rc = get_array(r, o, "kernels", &kernels, where)))
            return rc;
        fn = field(o, "function");
        builtin = field(o, "builtin");
        if (!cJSON_IsNull(fn) && !cJSON_IsString(fn))
            return bad(r, "%s: 'function' is missing or neither a string nor null", where);
        if (!cJSON_IsBool(builtin))
            return bad(r, "%s: 'builtin' is missing or not true or false", where);
        if (tk_pm_find_op(r->m, name))
            return bad(r, "%s: op '%s' is listed twice", where, name);
        tk_pm_op *op = tk_pm_add_op(r->m, name);
        if (!op || !(op->schema = tk_pm_strdup(r->m, schema)) || !(op->file = tk_pm_strdup(r->m, file)) ||
            (cJSON_IsString(fn) && !(op->function = tk_pm_strdup(r->m, fn->valuestring))))
            return TK_ENOMEM;
        op->builtin = cJSON_IsTrue(builtin);
        int nk = cJSON_GetArraySize(kernels);
        if (!(op->kernels = tk_pm_alloc(r->m, sizeof(char *) * (size_t)(nk ? nk : 1))))
            return TK_ENOMEM;
        for (int k = 0; k < nk; k++) {
            const cJSON *s = cJSON_GetArrayItem(kernels, k);
            if (!cJSON_IsString(s))
                return bad(r, "%s: kernels[%d] is not a string", where, k);
            if (!(op->kernels[k] = tk_pm_strdup(r->m, s->valuestring)))
                return TK_ENOMEM;
        }
        op->nkernels = (size_t)nk;
    }
    for (size_t i = 0; i < r->m->nnodes; i++)
        if (!tk_pm_find_op(r->m, r->m->nodes[i].op))
            return bad(r, "nodes[%zu]: op '%s' is not in the op table", i, r->m->nodes[i].op);
    return 0;
}

static int is_hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == 64;
}

/* One attribute's JSON value as the schema's type says (kind: TK_SCHEMA_INT...). */
static int read_attr(jr *r, const cJSON *x, int kind, tk_pm_attr *a, const char *where)
{
    switch (kind) {
    case TK_SCHEMA_INT:
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > TK_PM_INT_MAX)
            return bad(r, "%s is not an int within +-2^53", where);
        a->kind = TK_VALUE_INT;
        a->i = (int64_t)x->valuedouble;
        return 0;
    case TK_SCHEMA_FLOAT:
        if (!cJSON_IsNumber(x))
            return bad(r, "%s is not a number (the schema says float)", where);
        a->kind = TK_VALUE_FLOAT;
        a->f = x->valuedouble;
        return 0;
    case TK_SCHEMA_BOOL:
        if (!cJSON_IsBool(x))
            return bad(r, "%s is not true or false (the schema says bool)", where);
        a->kind = TK_VALUE_BOOL;
        a->i = cJSON_IsTrue(x);
        return 0;
    case TK_SCHEMA_STR:
        if (!cJSON_IsString(x))
            return bad(r, "%s is not a string (the schema says str)", where);
        a->kind = TK_VALUE_STR;
        return (a->s = tk_pm_strdup(r->m, x->valuestring)) ? 0 : TK_ENOMEM;
    case TK_SCHEMA_INTS: {
        int n = cJSON_IsArray(x) ? cJSON_GetArraySize(x) : -1;
        if (n < 0 || n > 1024)
            return bad(r, "%s is not an array of at most 1024 ints (the schema says int[])", where);
        a->kind = TK_VALUE_INTS;
        a->nints = n;
        if (!(a->ints = tk_pm_alloc(r->m, sizeof(int64_t) * (size_t)(n ? n : 1))))
            return TK_ENOMEM;
        for (int i = 0; i < n; i++) {
            const cJSON *e = cJSON_GetArrayItem(x, i);
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || fabs(e->valuedouble) > TK_PM_INT_MAX)
                return bad(r, "%s[%d] is not an int within +-2^53", where, i);
            a->ints[i] = (int64_t)e->valuedouble;
        }
        return 0;
    }
    default: return bad(r, "%s: the schema gives it a type attributes cannot hold", where);
    }
}

/* Each node's "attrs" against its op's schema (in the op table): one entry per scalar argument
 * the node passes, named as the schema names it, of the schema's type, and nothing else. */
static int read_attrs(jr *r, const cJSON *doc)
{
    const cJSON *arr = field(doc, "nodes");
    for (size_t i = 0; i < r->m->nnodes; i++) {
        tk_pm_node *node = &r->m->nodes[i];
        const cJSON *attrs = field(cJSON_GetArrayItem(arr, (int)i), "attrs");
        const tk_pm_op *op = tk_pm_find_op(r->m, node->op);
        tk_schema sc;
        char why[200], where[200], nm[64];
        if (!op) {
            if (!attrs->child)
                continue;
            return bad(r, "nodes[%zu] has attrs, but its op '%s' is not in the op table", i, node->op);
        }
        if (tk_schema_parse(op->schema, &sc, why, sizeof why))
            return bad(r, "op '%s': schema '%s': %s", op->name, op->schema, why);
        int nscalar = 0;
        for (int j = 0; j < node->nin && j < sc.nargs && j < TK_SCHEMA_MAX; j++)
            nscalar += sc.kind[j] != TK_SCHEMA_TENSOR && sc.kind[j] != TK_SCHEMA_TENSOR_OPT;
        if (!nscalar && !attrs->child)
            continue;
        if (node->nin > sc.nargs)
            return bad(r, "nodes[%zu] passes %d arguments; op '%s' takes %d", i, node->nin, op->name, sc.nargs);
        tk_pm_attr *a = tk_pm_node_attrs(r->m, node, nscalar);
        if (!a)
            return TK_ENOMEM;
        for (int j = 0; j < node->nin; j++) {
            int kind = sc.kind[j];
            if (kind == TK_SCHEMA_TENSOR || kind == TK_SCHEMA_TENSOR_OPT)
                continue;
            tk_schema_arg_name(op->schema, &sc, j, nm, sizeof nm);
            const cJSON *x = field(attrs, nm);
            snprintf(where, sizeof where, "nodes[%zu].attrs.%s", i, nm);
            if (!x)
                return bad(r, "nodes[%zu]: attrs lack '%s', argument %d of op '%s' (a %s)", i, nm, j, op->name,
                           tk_schema_kind_name(kind));
            if (node->inputs[j] >= 0)
                return bad(r, "nodes[%zu]: inputs[%d] is a value id, but argument '%s' of op '%s' is a %s", i, j, nm,
                           op->name, tk_schema_kind_name(kind));
            a->arg = j;
            int rc = (a->name = tk_pm_strdup(r->m, nm)) ? read_attr(r, x, kind, a, where) : TK_ENOMEM;
            if (rc)
                return rc;
            a++;
        }
        for (const cJSON *x = attrs->child; x; x = x->next) {
            int known = 0;
            for (int k = 0; k < node->nattrs; k++)
                known |= !strcmp(node->attrs[k].name, x->string);
            if (!known)
                return bad(r, "nodes[%zu].attrs has '%s', which is no scalar argument the node passes to op '%s'", i,
                           x->string, op->name);
        }
    }
    return 0;
}

static int read_sources(jr *r, const cJSON *doc)
{
    const cJSON *arr = NULL;
    int rc = get_array(r, doc, "sources", &arr, "the document");
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(arr);
    for (int i = 0; i < n; i++) {
        char where[48];
        const cJSON *o = cJSON_GetArrayItem(arr, i);
        const char *path = NULL, *sha = NULL;
        snprintf(where, sizeof where, "sources[%d]", i);
        if (!cJSON_IsObject(o))
            return bad(r, "%s is not an object", where);
        if ((rc = get_str(r, o, "path", &path, where)) || (rc = get_str(r, o, "sha256", &sha, where)))
            return rc;
        if (!valid_source_path(path))
            return bad(r, "%s: path '%s' is not a relative path inside the archive", where, path);
        if (!is_hex64(sha))
            return bad(r, "%s: sha256 '%s' is not 64 lower-case hex digits", where, sha);
        for (size_t j = 0; j < r->m->nsources; j++)
            if (!strcmp(r->m->sources[j].path, path))
                return bad(r, "%s: '%s' is listed twice", where, path);
        tk_pm_source *s = tk_pm_add_source(r->m, path, NULL, 0);
        if (!s)
            return TK_ENOMEM;
        memcpy(s->sha256, sha, 65);
    }
    return 0;
}

/* n integers of an array into v (at most max). */
static int read_ints(const jr *r, const cJSON *arr, int *v, int max, int *n, const char *where)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 || cJSON_GetArraySize(arr) > max)
        return bad(r, "%s is not an array of 1 to %d integers", where, max);
    *n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr)
    {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < INT_MIN ||
            x->valuedouble > INT_MAX)
            return bad(r, "%s holds something that is not an integer", where);
        v[(*n)++] = (int)x->valuedouble;
    }
    return 0;
}

/* "tuning": the TK_AUTOTUNE declarations the analyzer read at export; absent in programs exported
 * before it was recorded (has_tuning stays 0). */
static int read_tuning(jr *r, const cJSON *doc)
{
    const cJSON *arr = field(doc, "tuning");
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return bad(r, "'tuning' is not an array");
    r->m->has_tuning = 1;
    int n = cJSON_GetArraySize(arr), rc;
    for (int i = 0; i < n; i++) {
        char where[64], sub[96];
        const cJSON *o = cJSON_GetArrayItem(arr, i), *params = NULL, *configs = NULL, *h, *c;
        const char *kernel = NULL, *key = NULL, *file = NULL;
        int64_t line = 0;
        snprintf(where, sizeof where, "tuning[%d]", i);
        if (!cJSON_IsObject(o))
            return bad(r, "%s is not an object", where);
        if ((rc = get_str(r, o, "kernel", &kernel, where)) || (rc = get_str(r, o, "key", &key, where)) ||
            (rc = get_str(r, o, "file", &file, where)) || (rc = get_int(r, o, "line", 0, INT_MAX, &line, where)) ||
            (rc = get_array(r, o, "params", &params, where)) || (rc = get_array(r, o, "configs", &configs, where)))
            return rc;
        for (size_t j = 0; j < r->m->ntunes; j++)
            if (!strcmp(r->m->tunes[j].kernel, kernel))
                return bad(r, "%s: kernel '%s' is listed twice", where, kernel);
        tk_pm_tune *t = tk_pm_add_tune(r->m, kernel);
        if (!t || !(t->key = tk_pm_strdup(r->m, key)) || !(t->file = tk_pm_strdup(r->m, file)))
            return TK_ENOMEM;
        t->line = (int)line;
        if (cJSON_GetArraySize(params) < 1 || cJSON_GetArraySize(params) > TK_TUNE_MAX_PARAMS)
            return bad(r, "%s: 'params' holds %d names, expected 1 to %d", where, cJSON_GetArraySize(params),
                       TK_TUNE_MAX_PARAMS);
        cJSON_ArrayForEach(c, params)
        {
            if (!cJSON_IsString(c))
                return bad(r, "%s: params[%d] is not a string", where, t->nparams);
            if (!(t->params[t->nparams++] = tk_pm_strdup(r->m, c->valuestring)))
                return TK_ENOMEM;
        }
        if (cJSON_GetArraySize(configs) < 1 || cJSON_GetArraySize(configs) > TK_TUNE_MAX_CONFIGS)
            return bad(r, "%s: 'configs' holds %d configurations, expected 1 to %d", where, cJSON_GetArraySize(configs),
                       TK_TUNE_MAX_CONFIGS);
        cJSON_ArrayForEach(c, configs)
        {
            int nv = 0;
            snprintf(sub, sizeof sub, "%s: configs[%d]", where, t->nconfigs);
            if ((rc = read_ints(r, c, t->values[t->nconfigs], TK_TUNE_MAX_PARAMS, &nv, sub)))
                return rc;
            if (nv != t->nparams)
                return bad(r, "%s holds %d values for %d parameters", sub, nv, t->nparams);
            t->nconfigs++;
        }
        h = field(o, "heuristic");
        t->nh = 1;
        if (h && !cJSON_IsNull(h)) {
            const char *param = NULL;
            snprintf(sub, sizeof sub, "%s: heuristic", where);
            if (!cJSON_IsObject(h))
                return bad(r, "%s is neither an object nor null", sub);
            if ((rc = get_str(r, h, "param", &param, sub)) ||
                (rc = read_ints(r, field(h, "values"), t->hvalues, TK_TUNE_MAX_CONFIGS, &t->nh, sub)))
                return rc;
            if (!(t->hparam = tk_pm_strdup(r->m, param)))
                return TK_ENOMEM;
        }
        if (t->nconfigs * t->nh > TK_TUNE_MAX_CONFIGS)
            return bad(r, "%s: %d configurations with %d heuristic values make %d variants, more than %d", where,
                       t->nconfigs, t->nh, t->nconfigs * t->nh, TK_TUNE_MAX_CONFIGS);
    }
    return 0;
}

int tk_program_json_read(tk_program_model **out, const char *text, size_t len, const char *origin)
{
    jr r;
    memset(&r, 0, sizeof r);
    r.origin = origin ? origin : "program.json";
    *out = NULL;
    int rc = 0;
    const cJSON *fmt, *ver;
    const char *name = NULL;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc || !cJSON_IsObject(doc)) {
        rc = bad(&r, "not a JSON object");
        goto done;
    }
    fmt = field(doc, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TK_TKPROG_FORMAT)) {
        rc = tk_error_set(TK_EFORMAT, "%s is not a tkprog file (program.json has format %s%s%s, expected '%s')",
                          r.origin,
                          cJSON_IsString(fmt) ? "'" : "", cJSON_IsString(fmt) ? fmt->valuestring : "none",
                          cJSON_IsString(fmt) ? "'" : "", TK_TKPROG_FORMAT);
        goto done;
    }
    ver = field(doc, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != floor(ver->valuedouble)) {
        rc = bad(&r, "'version' is missing or not a whole number");
        goto done;
    }
    if (ver->valuedouble < TK_TKPROG_VERSION_MIN || ver->valuedouble > TK_TKPROG_VERSION) {
        rc = tk_error_set(TK_EFORMAT, "%s is tkprog version %.0f; this tkexport reads versions %d to %d", r.origin,
                          ver->valuedouble, TK_TKPROG_VERSION_MIN, TK_TKPROG_VERSION);
        goto done;
    }
    r.version = (int)ver->valuedouble;
    if ((rc = get_str(&r, doc, "program", &name, "the document")))
        goto done;
    if (!name[0]) {
        rc = bad(&r, "'program' is empty");
        goto done;
    }
    if ((rc = tk_program_model_new(&r.m, name)) || (rc = tk_ctx_new(&r.ctx, (tk_device){TK_DEVICE_CPU, 0})))
        goto done;
    if ((rc = read_symbols(&r, doc)) || (rc = read_values(&r, doc, "inputs", 1, 1)) ||
        (rc = read_values(&r, doc, "parameters", 1, 0)) || (rc = read_nodes(&r, doc)) ||
        (rc = read_values(&r, doc, "outputs", 0, 1)) || (rc = read_strings(&r, doc, "guards", tk_pm_add_guard)) ||
        (rc = read_strings(&r, doc, "notes", tk_pm_add_note)) || (rc = read_ops(&r, doc)) ||
        (rc = read_attrs(&r, doc)) || (rc = read_tuning(&r, doc)) || (rc = read_sources(&r, doc)))
        goto done;
    if (r.m->noutputs == 0) {
        rc = bad(&r, "the program has no outputs");
        goto done;
    }
    tk_pm_sort(r.m);
done:
    if (rc == TK_ENOMEM && !strstr(tk_error_last(), "memory"))
        tk_error_set(TK_ENOMEM, "out of memory reading %s", r.origin);
    cJSON_Delete(doc);
    free(r.names);
    free(r.vars);
    tk_ctx_free(r.ctx);
    if (rc) {
        tk_program_model_free(r.m);
        return rc;
    }
    *out = r.m;
    return 0;
}
