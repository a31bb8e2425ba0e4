/* Export-mode tracing: the tk_tracer a trace context calls for every op, requirement and
 * parameter; one symbol per dynamic dimension name; guards simplified against the symbols'
 * ranges into nothing, a narrowed range, a recorded guard or a constraint error. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"
#include "fsutil.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "strbuf.h"
#include "sym.h"

#define MAX_SYMS (TK_PROGRAM_MAX_INPUTS * TK_MAX_DIMS)
/* divisibility by k is decided by looking at k consecutive values at most */
#define MAX_DIVISOR_SCAN (1 << 20)

/* A dynamic dimension: its symbol and where it was first declared, for messages. */
typedef struct sym_info {
    tk_sym var;
    const char *name;
    const char *input;
    int dim;
    int64_t decl_min, decl_max;
} sym_info;

/* A parameter placeholder handed to the model (the tracer owns it). */
typedef struct param_slot {
    const char *name;
    tk_tensor *t;
} param_slot;

typedef struct tracer {
    tk_tracer hooks;
    tk_program_model *m;
    const tk_program_def *def;
    tk_ctx *ctx;
    sym_info syms[MAX_SYMS];
    int nsyms;
    int next_id;
    tk_tensor *inputs[TK_PROGRAM_MAX_INPUTS];
    param_slot *params;
    size_t nparams;
    tk_safetensors *weights;
    const char *weights_path;
    int err;          /* the first failure the hooks reported, kept across the model's cleanup */
    char msg[2048];
} tracer;

/* Sets the error, prefixed "cannot export 'NAME': ", and remembers it for tk_export_trace. */
static int fail(tracer *t, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(tracer *t, int code, const char *fmt, ...)
{
    char body[1900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    tk_error_set(code, "cannot export '%s': %s", t->def->name, body);
    if (!t->err) {
        t->err = code;
        snprintf(t->msg, sizeof t->msg, "%s", tk_error_last());
    }
    return code;
}

/* A source path as programs record it: relative to the current folder when below it, else
 * without its leading '/' (as the source closure names files: no absolute path in a program). */
static char *rel_path(tk_program_model *m, const char *file)
{
    if (!file)
        return tk_pm_strdup(m, "");
    if (file[0] == '/') {
        char *r = tk_path_relative_to_cwd(file);
        const char *q = r;
        while (q && *q == '/')
            q++;
        char *p = q ? tk_pm_strdup(m, q) : NULL;
        free(r);
        return p;
    }
    while (file[0] == '.' && file[1] == '/')
        file += 2;
    return tk_pm_strdup(m, file);
}

/* "file:line" of the op call being dispatched, relative like node sources. */
static const char *site_text(tracer *t, char *buf, size_t n)
{
    const tk_site *s = &t->ctx->site;
    char *r = s->file ? tk_path_relative_to_cwd(s->file) : NULL;
    const char *f = r ? r : s->file ? s->file : "?";
    while (f[0] == '.' && f[1] == '/')
        f += 2;
    snprintf(buf, n, "%s:%d", f, s->line);
    free(r);
    return buf;
}

static const char *site_op(tracer *t) { return t->ctx->site.op ? t->ctx->site.op : "?"; }

static sym_info *find_sym_var(tracer *t, tk_sym var)
{
    for (int i = 0; i < t->nsyms; i++)
        if (tk_sym_equal(t->syms[i].var, var))
            return &t->syms[i];
    return NULL;
}

/* The printed form of s (malloc'd), or NULL. */
static char *print_sym(tk_sym s)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    if (tk_sym_print(s, &sb)) {
        tk_strbuf_release(&sb);
        return NULL;
    }
    return tk_strbuf_detach(&sb);
}

/* Records dims of a traced tensor as model dims. */
static int record_value(tracer *t, tk_pm_value *v, const tk_tensor *x, const char *what)
{
    v->id = x->trace_id;
    v->dtype = x->dtype;
    v->rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        tk_sym s = x->dims[i];
        if (tk_sym_is_const(s)) {
            if (s.value < 0 || s.value > TK_PM_INT_MAX)
                return fail(t, TK_EINVAL, "%s dim %d is %lld, outside [0, 2^53]", what, i, (long long)s.value);
            v->dims[i].value = s.value;
            continue;
        }
        char *p = print_sym(s);
        if (!p)
            return fail(t, TK_ENOMEM, "out of memory printing a shape");
        v->dims[i].expr = tk_pm_strdup(t->m, p);
        free(p);
        if (!v->dims[i].expr)
            return TK_ENOMEM;
    }
    return 0;
}

/* --- op table ------------------------------------------------------------------------------ */

/* Whether def is one of libtkrt's own ops (kernels/), which every runtime brings: the tk::
 * namespace is theirs (tk/ops.h). Not where def lives: in a program linked with the runtime
 * built in (tkrt_internal), its own ops and the runtime's share one object. */
static int is_builtin(const tk_op_def *def) { return def->name && !strncmp(def->name, "tk::", 4); }

static int note_op(tracer *t, const tk_op_def *def)
{
    if (tk_pm_find_op(t->m, def->name))
        return 0;
    tk_pm_op *op = tk_pm_add_op(t->m, def->name);
    if (!op || !(op->schema = tk_pm_strdup(t->m, def->schema ? def->schema : "")))
        return fail(t, TK_ENOMEM, "out of memory");
    op->builtin = is_builtin(def);
    op->file = op->builtin ? tk_pm_strdup(t->m, "<builtin>") : rel_path(t->m, def->file);
    return op->file ? 0 : fail(t, TK_ENOMEM, "out of memory");
}

/* The node's scalar arguments (ctx->args, checked against the schema with the defaults filled
 * in) as its attrs, by the schema's names. */
static int record_attrs(tracer *t, tk_ctx *ctx, tk_pm_node *n, int nin, const char *rel, int line)
{
    const tk_call_args *ca = ctx->args;
    int nscalar = 0;
    if (!ca)
        return 0;
    for (int i = 0; i < nin && i < ca->n; i++)
        nscalar += ca->v[i].kind != TK_VALUE_TENSOR;
    if (!nscalar)
        return 0;
    tk_pm_attr *a = tk_pm_node_attrs(t->m, n, nscalar);
    if (!a)
        return fail(t, TK_ENOMEM, "out of memory");
    for (int i = 0; i < nin && i < ca->n; i++) {
        const tk_value *v = &ca->v[i];
        char nm[64];
        if (v->kind == TK_VALUE_TENSOR)
            continue;
        tk_schema_arg_name(ca->op->def->schema, &ca->op->schema, i, nm, sizeof nm);
        if (!(a->name = tk_pm_strdup(t->m, nm)))
            return fail(t, TK_ENOMEM, "out of memory");
        a->arg = i;
        a->kind = v->kind;
        switch (v->kind) {
        case TK_VALUE_FLOAT:
            if (!isfinite(v->u.f))
                return fail(t, TK_EINVAL, "argument '%s' (in[%d]) of op '%s' at %s:%d is %g; a program holds finite "
                            "floats only", nm, i, ca->op->def->name, rel, line, v->u.f);
            a->f = v->u.f;
            break;
        case TK_VALUE_STR:
            if (!(a->s = tk_pm_strdup(t->m, v->u.s)))
                return fail(t, TK_ENOMEM, "out of memory");
            break;
        case TK_VALUE_INTS:
            if (v->u.ints.n > 1024)
                return fail(t, TK_EINVAL, "argument '%s' (in[%d]) of op '%s' at %s:%d holds %lld ints; a program holds "
                            "at most 1024", nm, i, ca->op->def->name, rel, line, (long long)v->u.ints.n);
            a->nints = (int)v->u.ints.n;
            if (!(a->ints = tk_pm_alloc(t->m, sizeof(int64_t) * (size_t)(a->nints ? a->nints : 1))))
                return fail(t, TK_ENOMEM, "out of memory");
            for (int k = 0; k < a->nints; k++) {
                if (v->u.ints.v[k] > TK_PM_INT_MAX || v->u.ints.v[k] < -TK_PM_INT_MAX)
                    return fail(t, TK_EINVAL, "argument '%s' (in[%d]) of op '%s' at %s:%d: %lld is beyond +-2^53",
                                nm, i, ca->op->def->name, rel, line, (long long)v->u.ints.v[k]);
                a->ints[k] = v->u.ints.v[k];
            }
            break;
        default:
            if (v->kind == TK_VALUE_INT && (v->u.i > TK_PM_INT_MAX || v->u.i < -TK_PM_INT_MAX))
                return fail(t, TK_EINVAL, "argument '%s' (in[%d]) of op '%s' at %s:%d: %lld is beyond +-2^53", nm, i,
                            ca->op->def->name, rel, line, (long long)v->u.i);
            a->i = v->u.i;
        }
        a++;
    }
    return 0;
}

/* --- the hooks ----------------------------------------------------------------------------- */

static int on_op(void *self, tk_ctx *ctx, const tk_op_def *op, tk_tensor *const *in, int nin, tk_tensor *const *out,
                 int nout, const char *file, int line)
{
    tracer *t = self;
    (void)ctx;
    char *rel = rel_path(t->m, file);
    if (!rel)
        return fail(t, TK_ENOMEM, "out of memory");
    if (!op->meta)
        return fail(t, TK_EINVAL,
                    "op '%s' (%s:%d) called at %s:%d has no meta function; export needs one to compute its outputs' "
                    "shapes (TK_OP(..., .meta = fn))",
                    op->name, op->file ? op->file : "?", op->line, rel, line);
    for (int i = 0; i < nin; i++)
        if (in[i] && !in[i]->traced)
            return fail(t, TK_EINVAL,
                        "input in[%d] of op '%s' at %s:%d is a tensor the model made itself; a program's values "
                        "come from its inputs, its parameters (tk_param) and ops",
                        i, op->name, rel, line);
    int rc = note_op(t, op);
    if (rc)
        return rc;
    tk_pm_node *n = tk_pm_add_node(t->m, op->name, nin, nout, NULL, line);
    if (!n)
        return fail(t, TK_ENOMEM, "out of memory");
    n->file = rel;
    for (int i = 0; i < nin; i++)
        n->inputs[i] = in[i] ? in[i]->trace_id : -1;
    if ((rc = record_attrs(t, ctx, n, nin, rel, line)))
        return rc;
    for (int i = 0; i < nout; i++) {
        char what[160];
        snprintf(what, sizeof what, "output out[%d] of op '%s' at %s:%d", i, op->name, rel, line);
        out[i]->trace_id = t->next_id++;
        if ((rc = record_value(t, &n->outputs[i], out[i], what)))
            return rc;
    }
    return 0;
}

static tk_tensor *on_param(void *self, tk_ctx *ctx, const char *name)
{
    tracer *t = self;
    for (size_t i = 0; i < t->nparams; i++)
        if (!strcmp(t->params[i].name, name))
            return t->params[i].t;
    if (!t->weights) {
        fail(t, TK_EINVAL, "parameter '%s' needs a weights file (--weights FILE.safetensors)", name);
        return NULL;
    }
    const tk_safetensors_entry *st = tk_safetensors_find(t->weights, name);
    if (!st) {
        fail(t, TK_ENOTFOUND, "parameter '%s' is not in '%s' (it holds %zu tensors)", name, t->weights_path,
             tk_safetensors_count(t->weights));
        return NULL;
    }
    if (!st->supported) {
        fail(t, TK_EUNSUPPORTED, "parameter '%s' in '%s' has dtype %s (tkexport loads F32, F16, BF16, I32 and I64)",
             name, t->weights_path, st->dtype);
        return NULL;
    }
    tk_sym dims[TK_MAX_DIMS];
    for (int i = 0; i < st->rank; i++) {
        if (st->shape[i] > TK_PM_INT_MAX) {
            fail(t, TK_EINVAL, "parameter '%s' in '%s' has dim %d of %lld, more than 2^53", name, t->weights_path, i,
                 (long long)st->shape[i]);
            return NULL;
        }
        dims[i] = TK_SYM(st->shape[i]);
    }
    param_slot *slots = realloc(t->params, sizeof(*slots) * (t->nparams + 1));
    if (!slots) {
        fail(t, TK_ENOMEM, "out of memory");
        return NULL;
    }
    t->params = slots;
    tk_tensor *x = NULL;
    tk_pm_value *v = NULL;
    if (tk_tensor_new_traced(&x, ctx, st->tk_dtype, st->rank, dims)) {
        fail(t, TK_ENOMEM, "parameter '%s': %s", name, tk_error_last());
        return NULL;
    }
    x->trace_id = t->next_id++;
    slots[t->nparams].t = x;
    if (!(slots[t->nparams].name = tk_pm_strdup(t->m, name)) || !(v = tk_pm_add_param(t->m))) {
        tk_tensor_free(x);
        fail(t, TK_ENOMEM, "out of memory");
        return NULL;
    }
    t->nparams++;
    v->name = (char *)slots[t->nparams - 1].name;
    if (record_value(t, v, x, name))
        return NULL;
    return x;
}

/* --- guards -------------------------------------------------------------------------------- */

static __int128 floor_div(__int128 a, __int128 b)
{
    __int128 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static __int128 ceil_div(__int128 a, __int128 b) { return -floor_div(-a, b); }

/* "dim 'batch' (input 'x' dim 0, declared dynamic in [1, 1024])" */
static const char *describe_sym(const sym_info *si, char *buf, size_t n)
{
    snprintf(buf, n, "dim '%s' (input '%s' dim %d, declared dynamic in [%lld, %lld])", si->name, si->input, si->dim,
             (long long)si->decl_min, (long long)si->decl_max);
    return buf;
}

static int forced(tracer *t, const sym_info *si, int64_t v, const char *what)
{
    char d[400], site[600];
    return fail(t, TK_EINVAL, "%s is forced to %lld by op '%s' at %s (%s); declare it static (%lld) or make the model "
                "accept any %s",
                describe_sym(si, d, sizeof d), (long long)v, site_op(t), site_text(t, site, sizeof site), what,
                (long long)v, si->name);
}

/* req: the requirement as printed ("batch == 2000 (what)"); why: "for 'batch' in [1, 1024]" or
 * "(16 != 32)". */
static int never(tracer *t, const char *req, const char *why)
{
    char site[600];
    return fail(t, TK_EINVAL, "op '%s' at %s requires %s, which never holds %s", site_op(t),
                site_text(t, site, sizeof site), req, why);
}

static int is_word_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* "for 'batch' in [1, 1024] and 'seq' in [1, 512]": the current ranges of the symbols the printed
 * expressions mention. */
static const char *ranges_of(tracer *t, const char *a, const char *b, char *buf, size_t n)
{
    size_t len = 0;
    int count = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->nsyms && len < n; i++) {
        const char *name = t->syms[i].name;
        size_t nl = strlen(name);
        int used = 0;
        for (int side = 0; side < 2 && !used; side++) {
            const char *text = side ? b : a;
            for (const char *p = text; p && (p = strstr(p, name)); p += nl)
                if ((p == text || !is_word_char(p[-1])) && !is_word_char(p[nl]))
                    used = 1;
        }
        if (!used)
            continue;
        int64_t lo, hi;
        tk_sym_range(t->syms[i].var, &lo, &hi);
        len += (size_t)snprintf(buf + len, n - len, "%s'%s' in [%lld, %lld]", count ? " and " : "for ", name,
                                (long long)lo, (long long)hi);
        count++;
    }
    return buf;
}

/* Narrows si's symbol to [lo, hi] (inside its current range) and notes it. */
static int narrow(tracer *t, sym_info *si, int64_t cur_lo, int64_t cur_hi, int64_t lo, int64_t hi, const char *what)
{
    char site[600], note[1200];
    if (tk_sym_narrow(si->var, lo, hi))
        return fail(t, TK_EINTERNAL, "narrowing dim '%s': %s", si->name, tk_error_last());
    snprintf(note, sizeof note, "dim '%s' narrowed from [%lld, %lld] to [%lld, %lld] by op '%s' at %s (%s)", si->name,
             (long long)cur_lo, (long long)cur_hi, (long long)lo, (long long)hi, site_op(t),
             site_text(t, site, sizeof site), what);
    return tk_pm_add_note(t->m, note) ? fail(t, TK_ENOMEM, "out of memory") : 0;
}

static int guard(tracer *t, const char *text)
{
    return tk_pm_add_guard(t->m, text) ? fail(t, TK_ENOMEM, "out of memory") : 0;
}

static int require_eq(tracer *t, tk_sym a, tk_sym b, const char *what)
{
    char why[600], req[1000];
    tk_sym d = tk_sym_sub(t->ctx, a, b);
    int64_t lo, hi;
    tk_sym_range(d, &lo, &hi);
    if (lo == 0 && hi == 0)
        return 0; /* always holds */
    char *pa = print_sym(a), *pb = print_sym(b);
    if (!pa || !pb) {
        free(pa);
        free(pb);
        return fail(t, TK_ENOMEM, "out of memory");
    }
    snprintf(req, sizeof req, "%s == %s (%s)", pa, pb, what);
    int rc = 0;
    tk_sym var;
    int64_t k, c;
    if (tk_sym_is_const(a) && tk_sym_is_const(b)) {
        snprintf(why, sizeof why, "(%s != %s)", pa, pb);
        rc = never(t, req, why);
    } else if (lo > 0 || hi < 0) {
        rc = never(t, req, ranges_of(t, pa, pb, why, sizeof why));
    } else if (tk_sym_as_linear1(d, &var, &k, &c) == 1 && k != 0) {
        sym_info *si = find_sym_var(t, var);
        if (c % k != 0) {
            snprintf(why, sizeof why, "(no whole value of '%s' solves it)", si ? si->name : "?");
            rc = never(t, req, why);
        } else if (si) {
            rc = forced(t, si, -c / k, what);
        } else {
            rc = fail(t, TK_EINTERNAL, "requirement '%s' is over a symbol the trace did not declare", what);
        }
    } else {
        tk_strbuf sb = TK_STRBUF_INIT;
        if (tk_strbuf_addf(&sb, "%s == %s", pa, pb))
            rc = fail(t, TK_ENOMEM, "out of memory");
        else
            rc = guard(t, sb.buf);
        tk_strbuf_release(&sb);
    }
    free(pa);
    free(pb);
    return rc;
}

static int require_range(tracer *t, tk_sym a, int64_t min, int64_t max, const char *what)
{
    char why[1000], d[400], site[600];
    int64_t lo, hi;
    if (min > max)
        return fail(t, TK_EINVAL, "op '%s' at %s states an empty range [%lld, %lld] (%s)", site_op(t),
                    site_text(t, site, sizeof site), (long long)min, (long long)max, what);
    tk_sym_range(a, &lo, &hi);
    if (lo >= min && hi <= max)
        return 0;
    char *pa = print_sym(a);
    if (!pa)
        return fail(t, TK_ENOMEM, "out of memory");
    int rc = 0;
    tk_sym var;
    int64_t k, c;
    if (tk_sym_is_const(a) || lo > max || hi < min) {
        char r[500];
        snprintf(why, sizeof why, "%s (%s lies in [%lld, %lld])", ranges_of(t, pa, NULL, r, sizeof r), pa,
                 (long long)lo, (long long)hi);
        if (tk_sym_is_const(a))
            snprintf(why, sizeof why, "(it is %lld)", (long long)a.value);
        if (!tk_sym_is_const(a) && tk_sym_as_linear1(a, &var, &k, &c) == 1 && k != 0 && find_sym_var(t, var)) {
            sym_info *si = find_sym_var(t, var);
            __int128 s_lo, s_hi;
            if (k > 0) {
                s_lo = ceil_div((__int128)min - c, k);
                s_hi = floor_div((__int128)max - c, k);
            } else {
                s_lo = ceil_div((__int128)max - c, k);
                s_hi = floor_div((__int128)min - c, k);
            }
            if (s_lo < 0)
                s_lo = 0;
            if (s_hi > TK_PM_INT_MAX)
                s_hi = TK_PM_INT_MAX;
            int64_t vlo, vhi;
            tk_sym_range(var, &vlo, &vhi);
            if (s_lo > s_hi)
                rc = fail(t, TK_EINVAL, "%s needs %s in [%lld, %lld] for op '%s' at %s (%s), which no value of '%s' "
                          "gives", describe_sym(si, d, sizeof d), pa, (long long)min, (long long)max, site_op(t),
                          site_text(t, site, sizeof site), what, si->name);
            else
                rc = fail(t, TK_EINVAL, "%s must lie in [%lld, %lld] for op '%s' at %s (%s), which leaves nothing of "
                          "its range [%lld, %lld]; declare its range within [%lld, %lld]",
                          describe_sym(si, d, sizeof d), (long long)s_lo, (long long)s_hi, site_op(t),
                          site_text(t, site, sizeof site), what, (long long)vlo, (long long)vhi, (long long)s_lo,
                          (long long)s_hi);
        } else {
            char req[600];
            snprintf(req, sizeof req, "%s in [%lld, %lld] (%s)", pa, (long long)min, (long long)max, what);
            rc = never(t, req, why);
        }
    } else if (tk_sym_as_linear1(a, &var, &k, &c) == 1 && k != 0 && find_sym_var(t, var)) {
        sym_info *si = find_sym_var(t, var);
        int64_t vlo, vhi;
        tk_sym_range(var, &vlo, &vhi);
        __int128 s_lo, s_hi;
        if (k > 0) {
            s_lo = ceil_div((__int128)min - c, k);
            s_hi = floor_div((__int128)max - c, k);
        } else {
            s_lo = ceil_div((__int128)max - c, k);
            s_hi = floor_div((__int128)min - c, k);
        }
        int64_t nlo = s_lo > vlo ? (int64_t)s_lo : vlo, nhi = s_hi < vhi ? (int64_t)s_hi : vhi;
        if (nlo > nhi)
            rc = fail(t, TK_EINVAL, "%s must lie in [%lld, %lld] for op '%s' at %s (%s), which leaves nothing of its "
                      "range [%lld, %lld]; declare its range within [%lld, %lld]",
                      describe_sym(si, d, sizeof d), (long long)s_lo, (long long)s_hi, site_op(t),
                      site_text(t, site, sizeof site), what, (long long)vlo, (long long)vhi, (long long)s_lo,
                      (long long)s_hi);
        else if (nlo == nhi && si->decl_min < si->decl_max)
            rc = forced(t, si, nlo, what);
        else
            rc = narrow(t, si, vlo, vhi, nlo, nhi, what);
    } else {
        tk_strbuf sb = TK_STRBUF_INIT;
        if (tk_strbuf_addf(&sb, "%lld <= %s <= %lld", (long long)min, pa, (long long)max))
            rc = fail(t, TK_ENOMEM, "out of memory");
        else
            rc = guard(t, sb.buf);
        tk_strbuf_release(&sb);
    }
    free(pa);
    return rc;
}

static __int128 mod_pos(__int128 a, __int128 k)
{
    __int128 r = a % k;
    return r < 0 ? r + k : r;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    if (a < 0)
        a = -a;
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static int require_divisible(tracer *t, tk_sym a, int64_t k, const char *what)
{
    char why[1000], site[600], req[600];
    if (k <= 0)
        return fail(t, TK_EINVAL, "op '%s' at %s requires divisibility by %lld (%s); the divisor must be positive",
                    site_op(t), site_text(t, site, sizeof site), (long long)k, what);
    int64_t lo, hi;
    tk_sym_range(a, &lo, &hi);
    char *pa = print_sym(a);
    if (!pa)
        return fail(t, TK_ENOMEM, "out of memory");
    snprintf(req, sizeof req, strchr(pa, ' ') ? "(%s) %% %lld == 0 (%s)" : "%s %% %lld == 0 (%s)", pa, (long long)k,
             what);
    int rc = 0;
    tk_sym var;
    int64_t k1, c;
    if (lo == hi) {
        if (mod_pos(lo, k) != 0) {
            snprintf(why, sizeof why, "(%lld %% %lld is %lld)", (long long)lo, (long long)k,
                     (long long)mod_pos(lo, k));
            rc = never(t, req, why);
        }
    } else if (tk_sym_as_linear1(a, &var, &k1, &c) == 1 && k1 != 0 && find_sym_var(t, var) && k <= MAX_DIVISOR_SCAN) {
        sym_info *si = find_sym_var(t, var);
        int64_t vlo, vhi;
        tk_sym_range(var, &vlo, &vhi);
        /* k1*s + c is 0 mod k on every p-th value of s, p = k / gcd(k1, k) */
        int64_t p = k / gcd64(k1, k);
        __int128 s0 = -1;
        for (int64_t i = 0; i < p && vlo + i <= vhi; i++) {
            if (mod_pos((__int128)k1 * (vlo + i) + c, k) == 0) {
                s0 = vlo + i;
                break;
            }
        }
        if (s0 < 0) {
            rc = never(t, req, ranges_of(t, pa, NULL, why, sizeof why));
        } else if (p == 1) {
            /* every value */
        } else if (s0 + p > vhi) {
            char fw[1000];
            snprintf(fw, sizeof fw, "%s, which needs %.*s", what, (int)(strlen(req) - strlen(what) - 3), req);
            rc = forced(t, si, (int64_t)s0, fw);
        } else {
            tk_sym r = tk_sym_mod(t->ctx, a, k);
            char *pr = print_sym(r);
            tk_strbuf sb = TK_STRBUF_INIT;
            if (!pr || tk_strbuf_addf(&sb, "%s == 0", pr))
                rc = fail(t, TK_ENOMEM, "out of memory");
            else
                rc = guard(t, sb.buf);
            tk_strbuf_release(&sb);
            free(pr);
        }
    } else {
        tk_sym r = tk_sym_mod(t->ctx, a, k);
        int64_t rlo, rhi;
        tk_sym_range(r, &rlo, &rhi);
        if (tk_sym_is_const(r) || rlo == rhi) {
            if (rlo != 0) {
                snprintf(why, sizeof why, "(it is %lld)", (long long)rlo);
                rc = never(t, req, why);
            }
        } else if (rlo > 0) {
            char r[500];
            snprintf(why, sizeof why, "%s (the remainder lies in [%lld, %lld])", ranges_of(t, pa, NULL, r, sizeof r),
                     (long long)rlo, (long long)rhi);
            rc = never(t, req, why);
        } else {
            char *pr = print_sym(r);
            tk_strbuf sb = TK_STRBUF_INIT;
            if (!pr || tk_strbuf_addf(&sb, "%s == 0", pr))
                rc = fail(t, TK_ENOMEM, "out of memory");
            else
                rc = guard(t, sb.buf);
            tk_strbuf_release(&sb);
            free(pr);
        }
    }
    free(pa);
    return rc;
}

static int on_require(void *self, tk_ctx *ctx, tk_require_kind kind, tk_sym a, tk_sym b, int64_t lo, int64_t hi,
                      const char *what)
{
    tracer *t = self;
    (void)ctx;
    char fallback[64];
    if (!what || !what[0]) {
        snprintf(fallback, sizeof fallback, "unnamed requirement");
        what = fallback;
    }
    switch (kind) {
    case TK_REQUIRE_EQ: return require_eq(t, a, b, what);
    case TK_REQUIRE_RANGE: return require_range(t, a, lo, hi, what);
    case TK_REQUIRE_DIVISIBLE: return require_divisible(t, a, lo, what);
    }
    return fail(t, TK_EINTERNAL, "unknown requirement kind %d", (int)kind);
}

/* --- the trace ----------------------------------------------------------------------------- */

static int valid_sym_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return 0;
    return 1;
}

/* One symbol per distinct name, the inputs as traced tensors with ids 0..n-1. */
static int declare_inputs(tracer *t)
{
    const tk_program_def *def = t->def;
    int rc;
    if (def->ninputs < 0 || def->ninputs > TK_PROGRAM_MAX_INPUTS)
        return fail(t, TK_EINVAL, "the program declares %d inputs (at most %d)", def->ninputs, TK_PROGRAM_MAX_INPUTS);
    for (int i = 0; i < def->ninputs; i++) {
        const tk_input_spec *in = &def->inputs[i];
        tk_sym dims[TK_MAX_DIMS];
        if (!in->name || !in->name[0])
            return fail(t, TK_EINVAL, "input %d has no name", i + 1);
        for (int j = 0; j < i; j++)
            if (!strcmp(def->inputs[j].name, in->name))
                return fail(t, TK_EINVAL, "two inputs are named '%s'", in->name);
        if (!tk_dtype_size(in->dtype))
            return fail(t, TK_EINVAL, "input '%s' has an unknown dtype %d", in->name, (int)in->dtype);
        if (in->rank < 0 || in->rank > TK_MAX_DIMS)
            return fail(t, TK_EINVAL, "input '%s' has rank %d (at most %d)", in->name, in->rank, TK_MAX_DIMS);
        for (int d = 0; d < in->rank; d++) {
            const tk_dim_spec *ds = &in->dims[d];
            if (!ds->sym) {
                if (ds->value < 0 || ds->value > TK_PM_INT_MAX)
                    return fail(t, TK_EINVAL, "input '%s' dim %d is %lld (expected 0 to 2^53)", in->name, d,
                                (long long)ds->value);
                dims[d] = TK_SYM(ds->value);
                continue;
            }
            if (!valid_sym_name(ds->sym))
                return fail(t, TK_EINVAL, "input '%s' dim %d is named '%s'; a dimension's name is an identifier",
                            in->name, d, ds->sym);
            if (ds->min < 0 || ds->min > ds->max || ds->max > TK_PM_INT_MAX)
                return fail(t, TK_EINVAL, "dim '%s' of input '%s' has the range [%lld, %lld] (expected 0 <= min <= max "
                            "<= 2^53)", ds->sym, in->name, (long long)ds->min, (long long)ds->max);
            sym_info *si = NULL;
            for (int s = 0; s < t->nsyms; s++)
                if (!strcmp(t->syms[s].name, ds->sym))
                    si = &t->syms[s];
            if (si && (si->decl_min != ds->min || si->decl_max != ds->max))
                return fail(t, TK_EINVAL, "dim '%s' is declared in [%lld, %lld] by input '%s' dim %d and in [%lld, "
                            "%lld] by input '%s' dim %d; one name is one dimension, with one range",
                            ds->sym, (long long)si->decl_min, (long long)si->decl_max, si->input, si->dim,
                            (long long)ds->min, (long long)ds->max, in->name, d);
            if (!si) {
                si = &t->syms[t->nsyms];
                si->var = tk_sym_var(t->ctx, ds->sym, ds->min, ds->max);
                if (tk_sym_is_const(si->var))
                    return fail(t, TK_ENOMEM, "dim '%s': %s", ds->sym, tk_error_last());
                si->name = ds->sym;
                si->input = in->name;
                si->dim = d;
                si->decl_min = ds->min;
                si->decl_max = ds->max;
                t->nsyms++;
                if (!tk_pm_add_symbol(t->m, ds->sym, ds->min, ds->max))
                    return fail(t, TK_ENOMEM, "out of memory");
            }
            dims[d] = si->var;
        }
        if ((rc = tk_tensor_new_traced(&t->inputs[i], t->ctx, in->dtype, in->rank, dims)))
            return fail(t, rc, "input '%s': %s", in->name, tk_error_last());
        t->inputs[i]->trace_id = t->next_id++;
        tk_pm_value *v = tk_pm_add_input(t->m);
        if (!v || !(v->name = tk_pm_strdup(t->m, in->name)))
            return fail(t, TK_ENOMEM, "out of memory");
        if ((rc = record_value(t, v, t->inputs[i], in->name)))
            return rc;
    }
    return 0;
}

/* The program's outputs: out[0..n-1], every one a value of the trace. */
static int record_outputs(tracer *t, tk_tensor **out)
{
    int n = 0;
    while (n < TK_PROGRAM_MAX_OUTPUTS && out[n])
        n++;
    if (n == 0)
        return fail(t, TK_EINVAL, "the model set no output (out[0] is NULL)");
    for (int i = n; i < TK_PROGRAM_MAX_OUTPUTS; i++)
        if (out[i])
            return fail(t, TK_EINVAL, "the model set out[%d] but not out[%d]; outputs are out[0..n-1]", i, n);
    for (int i = 0; i < n; i++) {
        char what[32];
        if (!out[i]->traced)
            return fail(t, TK_EINVAL, "out[%d] is a tensor the model made itself, not a value of the program", i);
        tk_pm_value *v = tk_pm_add_output(t->m);
        snprintf(what, sizeof what, "out[%d]", i);
        if (!v)
            return fail(t, TK_ENOMEM, "out of memory");
        int rc = record_value(t, v, out[i], what);
        if (rc)
            return rc;
    }
    return 0;
}

/* The symbols' final ranges (narrowed by guards). */
static void record_ranges(tracer *t)
{
    for (int i = 0; i < t->nsyms; i++) {
        tk_pm_symbol *s = tk_pm_find_symbol(t->m, t->syms[i].name);
        int64_t lo, hi;
        tk_sym_range(t->syms[i].var, &lo, &hi);
        if (s) {
            s->min = lo;
            s->max = hi;
        }
    }
}

/* weights.safetensors of the model: the parameters it uses, their bytes unchanged. */
static int copy_weights(tracer *t)
{
    const char **names = calloc(t->nparams + 1, sizeof(*names));
    tk_tensor **views = calloc(t->nparams + 1, sizeof(*views));
    void *data = NULL;
    size_t len = 0;
    int rc = 0;
    if (!names || !views) {
        rc = fail(t, TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->nparams && !rc; i++) {
        const tk_safetensors_entry *e = tk_safetensors_find(t->weights, t->params[i].name);
        names[i] = t->params[i].name;
        /* a view over the mapped file: the writer only reads it */
        if (tk_tensor_wrap(&views[i], (tk_device){TK_DEVICE_CPU, 0}, e->tk_dtype, e->rank, e->shape, (void *)e->data))
            rc = fail(t, TK_EINTERNAL, "parameter '%s': %s", names[i], tk_error_last());
    }
    if (!rc && tk_safetensors_write_mem(&data, &len, t->nparams, names, views))
        rc = fail(t, TK_EIO, "writing the weights: %s", tk_error_last());
    if (!rc) {
        t->m->weights = data;
        t->m->weights_len = len;
    }
done:
    for (size_t i = 0; views && i < t->nparams; i++)
        tk_tensor_free(views[i]);
    free(views);
    free(names);
    return rc;
}

int tk_export_trace(tk_program_model **out, const tk_program_def *def, const char *weights_path)
{
    *out = NULL;
    if (!def || !def->name || !def->body)
        return tk_error_set(TK_EINVAL, "tk_export_trace: no program");
    tracer t;
    memset(&t, 0, sizeof t);
    t.def = def;
    t.weights_path = weights_path;
    t.hooks.self = &t;
    t.hooks.on_op = on_op;
    t.hooks.on_require = on_require;
    t.hooks.on_param = on_param;
    tk_tensor *outs[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int rc;
    if ((rc = tk_program_model_new(&t.m, def->name)))
        return rc;
    if (weights_path && (rc = tk_safetensors_open(&t.weights, weights_path))) {
        fail(&t, rc, "%s", tk_error_last());
        goto done;
    }
    if ((rc = tk_ctx_new(&t.ctx, (tk_device){TK_DEVICE_CPU, 0})))
        goto done;
    t.ctx->mode = TK_MODE_TRACE;
    t.ctx->tracer = &t.hooks;
    if ((rc = declare_inputs(&t)))
        goto done;
    tk_error_clear();
    rc = def->body(t.ctx, t.inputs, outs);
    if (rc > 0)
        rc = TK_EINTERNAL;
    if (rc || t.err) {
        if (t.err) {
            /* the model's own cleanup may have replaced the message */
            rc = t.err;
            tk_error_set(rc, "%s", t.msg);
        } else {
            char msg[1024];
            /* the model's cleanup may have cleared the message: the first call that failed says why */
            snprintf(msg, sizeof msg, "%s", tk_error_last()[0] || !t.ctx->first_failure ? tk_error_last()
                                                                                        : t.ctx->first_failure);
            if (!msg[0])
                fail(&t, rc, "the model returned %d", rc);
            else
                fail(&t, rc, "%s", msg);
        }
        goto done;
    }
    if ((rc = record_outputs(&t, outs)))
        goto done;
    record_ranges(&t);
    if ((rc = copy_weights(&t)))
        goto done;
    tk_pm_sort(t.m);
done:
    /* outputs that are not inputs or parameters, each once */
    for (int i = 0; i < TK_PROGRAM_MAX_OUTPUTS; i++) {
        int own = 0;
        for (int j = 0; j < def->ninputs && j < TK_PROGRAM_MAX_INPUTS; j++)
            own |= outs[i] == t.inputs[j];
        for (size_t j = 0; j < t.nparams; j++)
            own |= outs[i] == t.params[j].t;
        for (int j = 0; j < i; j++)
            own |= outs[i] == outs[j];
        if (!own)
            tk_tensor_free(outs[i]);
    }
    for (int i = 0; i < TK_PROGRAM_MAX_INPUTS; i++)
        tk_tensor_free(t.inputs[i]);
    for (size_t i = 0; i < t.nparams; i++)
        tk_tensor_free(t.params[i].t);
    free(t.params);
    tk_ctx_free(t.ctx);
    tk_safetensors_free(t.weights);
    if (rc) {
        tk_program_model_free(t.m);
        return rc;
    }
    *out = t.m;
    return 0;
}
