/* Autotuning at run time: the TK_AUTOTUNE declarations of loaded objects (parsed once when they
 * register, into the registry being loaded), the per-bucket choices packages bring
 * (tk_tune_set_table, in the package's registry), and tk_tune, which picks a configuration for a
 * call and tells the next tk_wrap of that kernel which variant to launch. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rt_internal.h"
#include "tunespec.h"

struct tk_tune_entry {
    tk_tune_node *node;
    char kernel[128];
    int nparams, nconfigs;
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    int has_table;
    signed char table[TK_TUNE_BUCKETS]; /* config per bucket */
    struct tk_tune_entry *next;
};
typedef struct tk_tune_entry tune_entry;

/* A heuristic parameter, registered apart from its TK_AUTOTUNE (either may load first). */
struct tk_heur_entry {
    tk_heuristic_node *node;
    char kernel[128];
    int nvalues;
    int values[TK_TUNE_MAX_CONFIGS];
    struct tk_heur_entry *next;
};
typedef struct tk_heur_entry heur_entry;

/* ctx's scope: the registry of the op running, else the process's. */
static tk_registry *scope_of(tk_ctx *ctx)
{
    return ctx && ctx->scope ? ctx->scope : tk_registry_process();
}

int tk_tune_bucket(int64_t key)
{
    int b = 0;
    while (b < TK_TUNE_BUCKETS - 1 && (int64_t)1 << b < key)
        b++;
    return b;
}

/* Parses a declaration with the one grammar of tunespec.h; a malformed one is reported on stderr
 * (constructors have no caller) and left out, so tk_tune of its kernel fails with a message.
 * lint reports the same mistakes, read by the same rules. */
static int parse_decl(tune_entry *e, const tk_tune_decl *d)
{
    const char *where = d->file ? d->file : "?";
    if (!d->kernel || !d->kernel->name || !d->params || !d->key)
        return -1;
    if (d->version != TK_TUNE_DECL_VERSION) {
        tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d) was built for declaration version %u, this runtime reads %d; "
                            "ignored", d->kernel->name, where, d->line, d->version, TK_TUNE_DECL_VERSION);
        return -1;
    }
    snprintf(e->kernel, sizeof e->kernel, "%s", d->kernel->name);
    char names[TK_TUNE_MAX_PARAMS][TK_TUNESPEC_NAME_MAX], why[160];
    e->nconfigs = d->nconfigs;
    if (tk_tunespec_names(d->params, names, TK_TUNE_MAX_PARAMS, &e->nparams, why, sizeof why) != 0) {
        tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d): %s; ignored", e->kernel, where, d->line, why);
        return -1;
    }
    if (e->nconfigs < 1 || e->nconfigs > TK_TUNE_MAX_CONFIGS) {
        tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d) needs 1 to %d configurations; ignored", e->kernel, where,
               d->line, TK_TUNE_MAX_CONFIGS);
        return -1;
    }
    for (int c = 0; c < e->nconfigs; c++) {
        int k = 0;
        if (tk_tunespec_ints(d->configs[c], e->values[c], TK_TUNE_MAX_PARAMS, &k, why, sizeof why) != 0 ||
            k != e->nparams) {
            tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d): configuration \"%s\" is not %d integers; ignored",
                   e->kernel, where, d->line, d->configs[c] ? d->configs[c] : "", e->nparams);
            return -1;
        }
    }
    return 0;
}

void tk_tune_register(tk_tune_node *node)
{
    tune_entry *e = calloc(1, sizeof(*e));
    if (!e || !node || !node->decl || parse_decl(e, node->decl) != 0) {
        free(e);
        return;
    }
    e->node = node;
    tk_registry *r = tk_registry_target();
    pthread_mutex_lock(&r->lock);
    e->next = r->tunes;
    r->tunes = e;
    pthread_mutex_unlock(&r->lock);
}

static int unlink_tune(tk_registry *r, tk_tune_node *node)
{
    int found = 0;
    pthread_mutex_lock(&r->lock);
    for (tune_entry **p = &r->tunes; *p; p = &(*p)->next) {
        if ((*p)->node == node) {
            tune_entry *e = *p;
            *p = e->next;
            free(e);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

void tk_tune_unregister(tk_tune_node *node)
{
    tk_registry *r = tk_registry_target();
    if (!unlink_tune(r, node) && r != tk_registry_process())
        unlink_tune(tk_registry_process(), node);
}

void tk_tune_release(tk_registry *r)
{
    while (r->tunes) {
        tune_entry *e = r->tunes;
        r->tunes = e->next;
        free(e);
    }
    while (r->heuristics) {
        heur_entry *h = r->heuristics;
        r->heuristics = h->next;
        free(h);
    }
}

static tune_entry *find(tk_registry *r, const char *kernel)
{
    for (tune_entry *e = r->tunes; e; e = e->next)
        if (!strcmp(e->kernel, kernel))
            return e;
    return NULL;
}

static heur_entry *find_heuristic(tk_registry *r, const char *kernel)
{
    for (heur_entry *h = r->heuristics; h; h = h->next)
        if (!strcmp(h->kernel, kernel))
            return h;
    return NULL;
}

void tk_heuristic_register(tk_heuristic_node *node)
{
    const tk_heuristic_decl *d = node ? node->decl : NULL;
    heur_entry *h = d && d->kernel && d->param && d->values ? calloc(1, sizeof(*h)) : NULL;
    if (!h)
        return;
    if (d->version != TK_HEURISTIC_DECL_VERSION) {
        tk_log(TK_LOG_WARN, "TK_HEURISTIC of '%s' (%s:%d) was built for declaration version %u, this runtime reads %d; "
                            "ignored", d->kernel->name, d->file ? d->file : "?", d->line, d->version,
               TK_HEURISTIC_DECL_VERSION);
        free(h);
        return;
    }
    snprintf(h->kernel, sizeof h->kernel, "%s", d->kernel->name);
    char why[160];
    if (tk_tunespec_ints(d->values, h->values, TK_TUNE_MAX_CONFIGS, &h->nvalues, why, sizeof why) != 0) {
        tk_log(TK_LOG_WARN, "TK_HEURISTIC of '%s' (%s:%d): \"%s\" is not a list of integers (%s); ignored", h->kernel,
               d->file ? d->file : "?", d->line, d->values, why);
        free(h);
        return;
    }
    h->node = node;
    tk_registry *r = tk_registry_target();
    pthread_mutex_lock(&r->lock);
    h->next = r->heuristics;
    r->heuristics = h;
    pthread_mutex_unlock(&r->lock);
}

static int unlink_heuristic(tk_registry *r, tk_heuristic_node *node)
{
    int found = 0;
    pthread_mutex_lock(&r->lock);
    for (heur_entry **p = &r->heuristics; *p; p = &(*p)->next) {
        if ((*p)->node == node) {
            heur_entry *h = *p;
            *p = h->next;
            free(h);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

void tk_heuristic_unregister(tk_heuristic_node *node)
{
    tk_registry *r = tk_registry_target();
    if (!unlink_heuristic(r, node) && r != tk_registry_process())
        unlink_heuristic(tk_registry_process(), node);
}

int tk_tune_set(tk_ctx *ctx, const tk_kernel *kernel, const char *param, int value)
{
    if (!ctx || !kernel || !param)
        return tk_error_set(TK_EINVAL, "tk_tune_set: no %s", !ctx ? "context" : !kernel ? "kernel" : "parameter");
    tk_registry *r = scope_of(ctx);
    pthread_mutex_lock(&r->lock);
    heur_entry *h = find_heuristic(r, kernel->name);
    int rc = 0, idx = -1;
    if (!h || strcmp(h->node->decl->param, param) != 0)
        rc = tk_error_set(TK_EINVAL, "tk_tune_set: kernel '%s' declares no heuristic parameter '%s' (TK_HEURISTIC)",
                          kernel->name, param);
    for (int i = 0; !rc && i < h->nvalues && idx < 0; i++)
        if (h->values[i] == value)
            idx = i;
    if (!rc && idx < 0)
        rc = tk_error_set(TK_EINVAL, "tk_tune_set: kernel '%s' compiles %s for the values \"%s\", not %d", kernel->name,
                          param, h->node->decl->values, value);
    if (!rc && ctx->tune_base >= 0 && ctx->tune_kernel && !strcmp(ctx->tune_kernel->name, kernel->name))
        ctx->tune_launch = ctx->tune_base + idx;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int tk_tune_set_table(tk_registry *r, const char *kernel, const signed char *table)
{
    if (!r)
        r = tk_registry_process();
    pthread_mutex_lock(&r->lock);
    tune_entry *e = find(r, kernel);
    int rc = 0;
    if (!e)
        rc = tk_error_set(TK_ENOTFOUND, "kernel '%s' has a tuning table but no TK_AUTOTUNE declaration is loaded",
                          kernel);
    else {
        for (int b = 0; b < TK_TUNE_BUCKETS && !rc; b++)
            if (table[b] < 0 || table[b] >= e->nconfigs)
                rc = tk_error_set(TK_EINVAL, "kernel '%s': bucket %d selects configuration %d of %d", kernel, b,
                                  table[b], e->nconfigs);
        if (!rc) {
            memcpy(e->table, table, sizeof e->table);
            e->has_table = 1;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void tk_tune_clear_table(tk_registry *r, const char *kernel)
{
    if (!r)
        r = tk_registry_process();
    pthread_mutex_lock(&r->lock);
    tune_entry *e = find(r, kernel);
    if (e)
        e->has_table = 0;
    pthread_mutex_unlock(&r->lock);
}

int tk_tune_describe(tk_registry *r, const char *kernel, int *nparams, int *nconfigs, const tk_tune_decl **decl)
{
    if (!r)
        r = tk_registry_process();
    pthread_mutex_lock(&r->lock);
    tune_entry *e = find(r, kernel);
    if (e) {
        *nparams = e->nparams;
        *nconfigs = e->nconfigs;
        *decl = e->node->decl;
    }
    pthread_mutex_unlock(&r->lock);
    return e ? 0 : tk_error_set(TK_ENOTFOUND, "kernel '%s' has no TK_AUTOTUNE declaration", kernel);
}

const int *tk_tune(tk_ctx *ctx, const tk_kernel *kernel, int64_t key)
{
    if (!ctx || !kernel) {
        tk_error_set(TK_EINVAL, "tk_tune: no %s", ctx ? "kernel" : "context");
        return NULL;
    }
    tk_registry *r = scope_of(ctx);
    pthread_mutex_lock(&r->lock);
    tune_entry *e = find(r, kernel->name);
    const int *values = NULL;
    if (!e) {
        tk_error_set(TK_ENOTFOUND, "tk_tune: kernel '%s' has no TK_AUTOTUNE declaration", kernel->name);
    } else {
        int config = 0;
        if (ctx->tune_force_kernel && !strcmp(ctx->tune_force_kernel, kernel->name))
            config = ctx->tune_force_config;
        else if (e->has_table)
            config = e->table[tk_tune_bucket(key)];
        /* the compiled variants are there when a package brought a table, or for the tuner;
         * variant = configuration * (heuristic values) + the value's index (tk_tune_set) */
        heur_entry *h = find_heuristic(r, kernel->name);
        ctx->tune_kernel = kernel;
        ctx->tune_key = key;
        ctx->tune_base = e->has_table || ctx->tune_force_kernel ? config * (h ? h->nvalues : 1) : -1;
        ctx->tune_launch = ctx->tune_base > 0 ? ctx->tune_base : 0;
        values = e->values[config];
    }
    pthread_mutex_unlock(&r->lock);
    return values;
}

int tk_tune_config_for(tk_ctx *ctx, const tk_kernel *kernel)
{
    /* on every launch: no lock, only what tk_tune and tk_tune_set left in the context */
    return ctx && ctx->tune_kernel && kernel && !strcmp(ctx->tune_kernel->name, kernel->name) ? ctx->tune_launch : 0;
}
