/* Programs (tk/program.h): the registry TK_PROGRAM's constructors join, input declarations,
 * weights and tk_param, and eager runs with their inputs checked against the declaration. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/program.h>

#include "log.h"
#include "map.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "strbuf.h"

/* --- the registry: programs in registration order; a name defined twice keeps the first ---- */

static pthread_mutex_t programs_lock = PTHREAD_MUTEX_INITIALIZER;
static tk_program_node *programs;

void tk_program_register(tk_program_node *node)
{
    if (!node || !node->def.name)
        return;
    if (node->def.version != TK_PROGRAM_DEF_VERSION) {
        tk_log(TK_LOG_WARN, "program '%s' (%s:%d) was built for program record version %u, this runtime reads %d; "
                            "not registered", node->def.name, node->def.file ? node->def.file : "?", node->def.line,
               node->def.version, TK_PROGRAM_DEF_VERSION);
        return;
    }
    pthread_mutex_lock(&programs_lock);
    tk_program_node **p = &programs;
    const tk_program_def *first = NULL;
    for (; *p; p = &(*p)->next) {
        if (*p == node)
            goto done;
        if (!first && strcmp((*p)->def.name, node->def.name) == 0)
            first = &(*p)->def;
    }
    node->next = NULL;
    *p = node;
    if (first)
        /* constructors have no caller to return an error to */
        tk_log(TK_LOG_WARN, "program '%s' is defined twice (%s:%d and %s:%d); the first definition is used",
               node->def.name, first->file ? first->file : "?", first->line, node->def.file ? node->def.file : "?",
               node->def.line);
done:
    pthread_mutex_unlock(&programs_lock);
}

void tk_program_unregister(tk_program_node *node)
{
    pthread_mutex_lock(&programs_lock);
    for (tk_program_node **p = &programs; *p; p = &(*p)->next) {
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&programs_lock);
}

const tk_program_def *tk_program_find(const char *name)
{
    const tk_program_def *def = NULL;
    if (!name)
        return NULL;
    pthread_mutex_lock(&programs_lock);
    for (tk_program_node *p = programs; p; p = p->next) {
        if (strcmp(p->def.name, name) == 0) {
            def = &p->def;
            break;
        }
    }
    pthread_mutex_unlock(&programs_lock);
    return def;
}

size_t tk_program_count(void)
{
    size_t n = 0;
    pthread_mutex_lock(&programs_lock);
    for (tk_program_node *p = programs; p; p = p->next)
        n++;
    pthread_mutex_unlock(&programs_lock);
    return n;
}

const tk_program_def *tk_program_at(size_t i)
{
    const tk_program_def *def = NULL;
    pthread_mutex_lock(&programs_lock);
    for (tk_program_node *p = programs; p; p = p->next, i--) {
        if (i == 0) {
            def = &p->def;
            break;
        }
    }
    pthread_mutex_unlock(&programs_lock);
    return def;
}

tk_input_spec tk__input(const char *name, tk_dtype dtype, int rank, const tk_dim_spec *dims)
{
    tk_input_spec in;
    memset(&in, 0, sizeof(in));
    in.name = name;
    in.dtype = dtype;
    /* more than 8 dims cannot be held: rank -1 marks the declaration bad (tk_program_run says so) */
    in.rank = rank >= 0 && rank <= (int)(sizeof(in.dims) / sizeof(in.dims[0])) ? rank : -1;
    for (int i = 0; i < in.rank; i++)
        in.dims[i] = dims[i];
    return in;
}

/* --- weights and parameters ------------------------------------------------------------------ */

struct tk_weights {
    tk_safetensors *st;
    tk_map params; /* entry name (owned by st) -> tk_tensor * on the context's device */
};

void tk_weights_free(tk_weights *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->params.cap; i++)
        if (w->params.keys && w->params.keys[i])
            tk_tensor_free(w->params.vals[i]);
    tk_map_release(&w->params);
    tk_safetensors_free(w->st);
    free(w);
}

int tk_ctx_set_weights(tk_ctx *ctx, const char *safetensors_path)
{
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_ctx_set_weights: no context");
    if (ctx->weights)
        return tk_error_set(TK_EINVAL, "the context already has weights ('%s'); tensors of tk_param stay valid as "
                                       "long as the context, so they are set once",
                            tk_safetensors_name(ctx->weights->st));
    tk_weights *w = calloc(1, sizeof(*w));
    if (!w)
        return tk_error_set(TK_ENOMEM, "out of memory");
    int rc = tk_safetensors_open(&w->st, safetensors_path);
    if (rc) {
        free(w);
        return rc;
    }
    ctx->weights = w;
    return 0;
}

/* "a, b, c and 4 more": some of the names the weights have, for messages. */
static void some_names(tk_strbuf *sb, const tk_safetensors *st)
{
    size_t n = tk_safetensors_count(st), shown = n < 6 ? n : 6;
    for (size_t i = 0; i < shown; i++)
        tk_strbuf_addf(sb, "%s'%s'", i ? ", " : "", tk_safetensors_at(st, i)->name);
    if (n > shown)
        tk_strbuf_addf(sb, " and %zu more", n - shown);
    if (!n)
        tk_strbuf_adds(sb, "no tensors");
}

static tk_tensor *param_get(tk_ctx *ctx, const char *name);

/* A failure is kept as the run's first (tk_ctx_note_failure): a NULL passed on names it. */
tk_tensor *tk_param(tk_ctx *ctx, const char *name)
{
    tk_tensor *t = param_get(ctx, name);
    if (!t)
        tk_ctx_note_failure(ctx);
    return t;
}

static tk_tensor *param_get(tk_ctx *ctx, const char *name)
{
    if (!ctx) {
        tk_error_set(TK_EINVAL, "tk_param: no context");
        return NULL;
    }
    if (!name) {
        tk_error_set(TK_EINVAL, "tk_param: no name");
        return NULL;
    }
    if (ctx->mode == TK_MODE_TRACE) {
        if (!ctx->tracer || !ctx->tracer->on_param) {
            tk_error_set(TK_EINTERNAL, "parameter '%s' asked of a context in trace mode without a tracer", name);
            return NULL;
        }
        tk_error_clear();
        tk_tensor *t = ctx->tracer->on_param(ctx->tracer->self, ctx, name);
        if (!t && !tk_error_last()[0])
            tk_error_set(TK_EINVAL, "the tracer gave no tensor for parameter '%s'", name);
        return t;
    }
    tk_weights *w = ctx->weights;
    if (!w) {
        tk_error_set(TK_EINVAL, "parameter '%s': the context has no weights (tk_ctx_set_weights)", name);
        return NULL;
    }
    tk_tensor *t = tk_map_get(&w->params, name);
    if (t)
        return t;
    const tk_safetensors_entry *e = tk_safetensors_find(w->st, name);
    if (!e) {
        tk_strbuf sb = TK_STRBUF_INIT;
        some_names(&sb, w->st);
        tk_error_set(TK_ENOTFOUND, "parameter '%s' is not in '%s' (it has %s)", name, tk_safetensors_name(w->st),
                     sb.buf ? sb.buf : "?");
        tk_strbuf_release(&sb);
        return NULL;
    }
    if (tk_safetensors_load(&t, ctx, ctx->device, w->st, e))
        return NULL;
    if (tk_map_put(&w->params, e->name, t)) {
        tk_tensor_free(t);
        tk_error_set(TK_ENOMEM, "out of memory");
        return NULL;
    }
    return t;
}

/* 1 when t is a parameter the context owns. */
static int is_param(tk_ctx *ctx, const tk_tensor *t)
{
    tk_weights *w = ctx->weights;
    for (size_t i = 0; w && i < w->params.cap; i++)
        if (w->params.keys[i] && w->params.vals[i] == t)
            return 1;
    return 0;
}

/* --- eager runs ------------------------------------------------------------------------------ */

/* "[batch, 128]" for messages. */
static void decl_str(tk_strbuf *sb, const tk_input_spec *in)
{
    tk_strbuf_adds(sb, "[");
    for (int i = 0; i < in->rank; i++) {
        if (i)
            tk_strbuf_adds(sb, ", ");
        if (in->dims[i].sym)
            tk_strbuf_adds(sb, in->dims[i].sym);
        else
            tk_strbuf_addf(sb, "%lld", (long long)in->dims[i].value);
    }
    tk_strbuf_adds(sb, "]");
}

static int check_declaration(const tk_program_def *def)
{
    for (int i = 0; i < def->ninputs; i++) {
        const tk_input_spec *in = &def->inputs[i];
        if (in->rank < 0)
            return tk_error_set(TK_EINVAL, "program '%s' input '%s' declares more than 8 dims", def->name,
                                in->name ? in->name : "?");
        if (!tk_dtype_size(in->dtype))
            return tk_error_set(TK_EINVAL, "program '%s' input '%s' declares unknown dtype %d", def->name,
                                in->name ? in->name : "?", (int)in->dtype);
        for (int d = 0; d < in->rank; d++) {
            const tk_dim_spec *s = &in->dims[d];
            if (!s->sym && s->value < 0)
                return tk_error_set(TK_EINVAL, "program '%s' input '%s' dim %d is declared %lld (dims must be >= 0)",
                                    def->name, in->name ? in->name : "?", d, (long long)s->value);
            if (s->sym && (s->min > s->max || s->min < 0))
                return tk_error_set(TK_EINVAL, "program '%s' input '%s' dim %d declares '%s' in [%lld, %lld], "
                                               "which is %s", def->name, in->name ? in->name : "?", d, s->sym,
                                    (long long)s->min, (long long)s->max, s->min > s->max ? "empty" : "negative");
        }
    }
    return 0;
}

/* Inputs against the declaration: dtype, rank, static dims, dynamic dims in range and the same
 * for every dim that shares a symbol. */
static int check_inputs(tk_ctx *ctx, const tk_program_def *def, tk_tensor *const *in, int nin)
{
    char d1[32], d2[32];
    if (nin != def->ninputs)
        return tk_error_set(TK_EINVAL, "program '%s' takes %d input%s, got %d", def->name, def->ninputs,
                            def->ninputs == 1 ? "" : "s", nin);
    if (nin && !in)
        return tk_error_set(TK_EINVAL, "program '%s': no inputs given", def->name);
    for (int i = 0; i < nin; i++) {
        const tk_input_spec *s = &def->inputs[i];
        const tk_tensor *t = in[i];
        const char *name = s->name ? s->name : "?";
        if (!t)
            return tk_error_set(TK_EINVAL, "input '%s' of program '%s' is NULL", name, def->name);
        if (t->traced)
            return tk_error_set(TK_EINVAL, "input '%s' of program '%s' is a traced tensor (it has no data)", name,
                                def->name);
        if (t->device.kind != ctx->device.kind || (t->device.kind == TK_DEVICE_CUDA && t->device.index != ctx->device.index))
            return tk_error_set(TK_EINVAL, "input '%s' is on '%s', the context is on '%s'", name,
                                tk_device_name(t->device, d1, sizeof(d1)), tk_device_name(ctx->device, d2, sizeof(d2)));
        if (t->dtype != s->dtype)
            return tk_error_set(TK_EINVAL, "input '%s' is %s, program '%s' declares %s", name, tk_dtype_name(t->dtype),
                                def->name, tk_dtype_name(s->dtype));
        if (t->rank != s->rank) {
            tk_strbuf sb = TK_STRBUF_INIT;
            decl_str(&sb, s);
            int rc = tk_error_set(TK_EINVAL, "input '%s' has %d dim%s, program '%s' declares %s", name, t->rank,
                                  t->rank == 1 ? "" : "s", def->name, sb.buf ? sb.buf : "?");
            tk_strbuf_release(&sb);
            return rc;
        }
        for (int d = 0; d < s->rank; d++) {
            const tk_dim_spec *ds = &s->dims[d];
            long long v = (long long)t->shape[d];
            if (!ds->sym) {
                if (t->shape[d] != ds->value)
                    return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld, program '%s' declares %lld", name, d, v,
                                        def->name, (long long)ds->value);
                continue;
            }
            if (t->shape[d] < ds->min || t->shape[d] > ds->max)
                return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld, outside [%lld, %lld] of '%s'", name, d, v,
                                    (long long)ds->min, (long long)ds->max, ds->sym);
            /* the first earlier dim of the same symbol fixes its value */
            for (int j = 0; j <= i; j++) {
                const tk_input_spec *o = &def->inputs[j];
                for (int e = 0; e < o->rank && (j < i || e < d); e++) {
                    if (!o->dims[e].sym || strcmp(o->dims[e].sym, ds->sym) != 0)
                        continue;
                    if (in[j]->shape[e] != t->shape[d])
                        return tk_error_set(TK_EINVAL, "input '%s' dim %d is %lld but '%s' is %lld (input '%s' dim %d)",
                                            name, d, v, ds->sym, (long long)in[j]->shape[e],
                                            o->name ? o->name : "?", e);
                    goto next_dim;
                }
            }
        next_dim:;
        }
    }
    return 0;
}

/* A copy of t on ctx's device, for an output the caller may not own as it is. */
static int copy_tensor(tk_tensor **out, tk_ctx *ctx, const tk_tensor *t)
{
    int rc = tk_tensor_new(out, ctx, ctx->device, t->dtype, t->rank, t->shape);
    if (!rc && (rc = tk_tensor_copy(ctx, *out, t))) {
        tk_tensor_free(*out);
        *out = NULL;
    }
    return rc;
}

int tk_program_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int *nout)
{
    tk_tensor *res[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int rc, k = 0;
    if (nout)
        *nout = 0;
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_program_run: no context");
    if (!out || !nout)
        return tk_error_set(TK_EINVAL, "tk_program_run: no place for the outputs");
    if (ctx->mode != TK_MODE_EAGER)
        return tk_error_set(TK_EINVAL, "tk_program_run runs programs eagerly; this context is tracing");
    const tk_program_def *def = tk_program_find(name);
    if (!def) {
        tk_strbuf sb = TK_STRBUF_INIT;
        for (size_t i = 0; i < tk_program_count(); i++) {
            const tk_program_def *p = tk_program_at(i);
            tk_strbuf_addf(&sb, "%s'%s'", i ? ", " : "", p ? p->name : "?");
        }
        rc = tk_error_set(TK_ENOTFOUND, "program '%s' is not registered (there are %s)", name ? name : "",
                          sb.len ? sb.buf : "none");
        tk_strbuf_release(&sb);
        return rc;
    }
    if ((rc = check_declaration(def)) || (rc = check_inputs(ctx, def, in, nin)))
        return rc;

    tk_error_clear();
    tk_ctx_reset_failures(ctx);
    rc = def->body(ctx, in, res);
    if (rc > 0) {
        rc = tk_error_set(TK_EINTERNAL, "program '%s' returned %d (expected 0 or a negative tk_error_code)", def->name,
                          rc);
    } else if (rc && !tk_error_last()[0] && ctx->first_failure) {
        rc = tk_error_set(rc, "program '%s' failed: %s", def->name, ctx->first_failure);
    } else if (rc && !tk_error_last()[0]) {
        rc = tk_error_set(rc, "program '%s' failed with code %d", def->name, rc);
    }
    if (rc)
        goto done;
    while (k < TK_PROGRAM_MAX_OUTPUTS && res[k])
        k++;
    for (int i = k; i < TK_PROGRAM_MAX_OUTPUTS; i++) {
        if (res[i]) {
            rc = tk_error_set(TK_EINVAL, "program '%s' set out[%d] but not out[%d]", def->name, i, k);
            goto done;
        }
    }
    /* the caller frees what it gets: an input, a parameter or a repeated output is copied */
    for (int i = 0; i < k; i++) {
        int borrowed = is_param(ctx, res[i]);
        for (int j = 0; j < nin && !borrowed; j++)
            borrowed = res[i] == in[j];
        for (int j = 0; j < i && !borrowed; j++)
            borrowed = res[i] == res[j];
        if (borrowed) {
            tk_tensor *c;
            if ((rc = copy_tensor(&c, ctx, res[i])))
                goto done;
            res[i] = c;
        }
    }
    for (int i = 0; i < k; i++)
        out[i] = res[i];
    *nout = k;
    return 0;
done:
    /* free each tensor the body made once (not inputs, not parameters) */
    for (int i = 0; i < TK_PROGRAM_MAX_OUTPUTS; i++) {
        int skip = !res[i] || is_param(ctx, res[i]);
        for (int j = 0; j < nin && !skip; j++)
            skip = res[i] == in[j];
        for (int j = 0; j < i && !skip; j++)
            skip = res[i] == res[j];
        if (!skip)
            tk_tensor_free(res[i]);
    }
    return rc;
}
