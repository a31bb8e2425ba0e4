/* Autotuning at run time: the TK_AUTOTUNE and TK_HEURISTIC declarations of loaded objects (read
 * when they register into the process registry; in a package's registry they are the package's
 * record instead, tk_tune_set_recorded), the per-bucket choices packages bring, and tk_tune,
 * which picks a configuration for a call and tells the next tk_wrap of that kernel which variant
 * to launch. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pkgfile.h"
#include "rt_internal.h"
#include "tunespec.h"

/* A kernel's configurations. In the process registry: its registered declaration, read at once
 * (eager use). In a package's registry: the declaration the package records (what the analyzer
 * read at export, tk_tune_set_recorded); one the package does not record is read by
 * tk_tune_prepare. */
struct tk_tune_entry {
    tk_tune_node *node; /* the registered declaration; NULL for one the package's record alone brings */
    char kernel[128];
    int ready;    /* nparams, nconfigs and values hold the declaration: tk_tune may use it */
    int recorded; /* they come from the package's record */
    int nparams, nconfigs;
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    int has_table;
    signed char table[TK_TUNE_BUCKETS]; /* config per bucket */
    struct tk_tune_entry *next;
};
typedef struct tk_tune_entry tune_entry;

/* A heuristic parameter, registered apart from its TK_AUTOTUNE (either may load first); ready
 * and recorded as for tune_entry. */
struct tk_heur_entry {
    tk_heuristic_node *node;
    char kernel[128];
    char param[TK_TUNESPEC_NAME_MAX];
    int ready, recorded;
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

/* Reads a registered declaration's strings with the one grammar of tunespec.h; a malformed one
 * is reported through the log (constructors have no caller) and left out, so tk_tune of its
 * kernel fails with a message. lint reports the same mistakes, read by the same rules. */
static int parse_decl(tune_entry *e, const tk_tune_decl *d)
{
    const char *where = d->file ? d->file : "?";
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
        int k = 0, bad = tk_tunespec_ints(d->configs[c], e->values[c], TK_TUNE_MAX_PARAMS, &k, why, sizeof why) != 0;
        if (!bad && k != e->nparams)
            bad = snprintf(why, sizeof why, "%d value%s for %d parameter%s", k, k == 1 ? "" : "s", e->nparams,
                           e->nparams == 1 ? "" : "s") > 0;
        if (bad) {
            tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d): configuration \"%s\": %s; ignored", e->kernel, where,
                   d->line, d->configs[c] ? d->configs[c] : "", why);
            return -1;
        }
    }
    e->ready = 1;
    return 0;
}

static int parse_heuristic(heur_entry *h, const tk_heuristic_decl *d)
{
    char why[160];
    snprintf(h->param, sizeof h->param, "%s", d->param);
    if (tk_tunespec_ints(d->values, h->values, TK_TUNE_MAX_CONFIGS, &h->nvalues, why, sizeof why) != 0) {
        tk_log(TK_LOG_WARN, "TK_HEURISTIC of '%s' (%s:%d): \"%s\" is not a list of integers (%s); ignored", h->kernel,
               d->file ? d->file : "?", d->line, d->values, why);
        return -1;
    }
    h->ready = 1;
    return 0;
}

void tk_tune_register(tk_tune_node *node)
{
    const tk_tune_decl *d = node ? node->decl : NULL;
    if (!d || !d->kernel || !d->kernel->name || !d->params || !d->key || !d->configs)
        return;
    if (d->version != TK_TUNE_DECL_VERSION) {
        tk_log(TK_LOG_WARN, "TK_AUTOTUNE of '%s' (%s:%d) was built for declaration version %u, this runtime reads %d; "
                            "ignored", d->kernel->name, d->file ? d->file : "?", d->line, d->version,
               TK_TUNE_DECL_VERSION);
        return;
    }
    tune_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    snprintf(e->kernel, sizeof e->kernel, "%s", d->kernel->name);
    e->node = node;
    tk_registry *r = tk_registry_target();
    /* a package's declarations wait for its record (tk_tune_set_recorded, tk_tune_prepare) */
    if (r == tk_registry_process() && parse_decl(e, d) != 0) {
        free(e);
        return;
    }
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

/* The entry of kernel in r, ready or not. */
static tune_entry *find_any(tk_registry *r, const char *kernel)
{
    for (tune_entry *e = r->tunes; e; e = e->next)
        if (!strcmp(e->kernel, kernel))
            return e;
    return NULL;
}

static tune_entry *find(tk_registry *r, const char *kernel)
{
    for (tune_entry *e = r->tunes; e; e = e->next)
        if (e->ready && !strcmp(e->kernel, kernel))
            return e;
    return NULL;
}

static heur_entry *find_heuristic_any(tk_registry *r, const char *kernel)
{
    for (heur_entry *h = r->heuristics; h; h = h->next)
        if (!strcmp(h->kernel, kernel))
            return h;
    return NULL;
}

static heur_entry *find_heuristic(tk_registry *r, const char *kernel)
{
    for (heur_entry *h = r->heuristics; h; h = h->next)
        if (h->ready && !strcmp(h->kernel, kernel))
            return h;
    return NULL;
}

void tk_heuristic_register(tk_heuristic_node *node)
{
    const tk_heuristic_decl *d = node ? node->decl : NULL;
    if (!d || !d->kernel || !d->kernel->name || !d->param || !d->values)
        return;
    if (d->version != TK_HEURISTIC_DECL_VERSION) {
        tk_log(TK_LOG_WARN, "TK_HEURISTIC of '%s' (%s:%d) was built for declaration version %u, this runtime reads %d; "
                            "ignored", d->kernel->name, d->file ? d->file : "?", d->line, d->version,
               TK_HEURISTIC_DECL_VERSION);
        return;
    }
    heur_entry *h = calloc(1, sizeof(*h));
    if (!h)
        return;
    snprintf(h->kernel, sizeof h->kernel, "%s", d->kernel->name);
    h->node = node;
    tk_registry *r = tk_registry_target();
    if (r == tk_registry_process() && parse_heuristic(h, d) != 0) {
        free(h);
        return;
    }
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
    if (!h || strcmp(h->param, param) != 0)
        rc = tk_error_set(TK_EINVAL, "tk_tune_set: kernel '%s' declares no heuristic parameter '%s' (TK_HEURISTIC)",
                          kernel->name, param);
    for (int i = 0; !rc && i < h->nvalues && idx < 0; i++)
        if (h->values[i] == value)
            idx = i;
    if (!rc && idx < 0) {
        char list[TK_TUNE_MAX_CONFIGS * 12] = "";
        for (int i = 0, at = 0; i < h->nvalues && at < (int)sizeof list; i++)
            at += snprintf(list + at, sizeof list - (size_t)at, "%s%d", i ? " " : "", h->values[i]);
        rc = tk_error_set(TK_EINVAL, "tk_tune_set: kernel '%s' compiles %s for the values \"%s\", not %d", kernel->name,
                          param, list, value);
    }
    if (!rc && ctx->tune_base >= 0 && ctx->tune_kernel && !strcmp(ctx->tune_kernel->name, kernel->name))
        ctx->tune_launch = ctx->tune_base + idx;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

static int check_table(const char *kernel, int nconfigs, const signed char *table)
{
    for (int b = 0; b < TK_TUNE_BUCKETS; b++)
        if (table[b] < 0 || table[b] >= nconfigs)
            return tk_error_set(TK_EINVAL, "kernel '%s': bucket %d selects configuration %d of %d", kernel, b, table[b],
                                nconfigs);
    return 0;
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
    else if (!(rc = check_table(kernel, e->nconfigs, table))) {
        memcpy(e->table, table, sizeof e->table);
        e->has_table = 1;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int tk_tune_set_recorded(tk_registry *r, const tk_pkg_tune *t)
{
    if (!r || r == tk_registry_process())
        return tk_error_set(TK_EINVAL, "tk_tune_set_recorded: records belong to a package's registry");
    if (strlen(t->kernel) >= sizeof(((tune_entry *)0)->kernel) || t->nparams < 1 ||
        t->nparams > TK_TUNE_MAX_PARAMS || t->nconfigs < 1 || t->nconfigs > TK_TUNE_MAX_CONFIGS ||
        (t->hparam && (strlen(t->hparam) >= TK_TUNESPEC_NAME_MAX || t->nh < 1 || t->nh > TK_TUNE_MAX_CONFIGS)))
        return tk_error_set(TK_EINVAL, "%s: the tuning record of kernel '%s' is out of bounds", r->origin, t->kernel);
    int rc = check_table(t->kernel, t->nconfigs, t->table);
    if (rc)
        return rc;
    pthread_mutex_lock(&r->lock);
    tune_entry *e = find_any(r, t->kernel);
    heur_entry *h = find_heuristic_any(r, t->kernel);
    if (!e && (e = calloc(1, sizeof(*e)))) {
        snprintf(e->kernel, sizeof e->kernel, "%s", t->kernel);
        e->next = r->tunes;
        r->tunes = e;
    }
    if (!h && t->hparam && (h = calloc(1, sizeof(*h)))) {
        snprintf(h->kernel, sizeof h->kernel, "%s", t->kernel);
        h->next = r->heuristics;
        r->heuristics = h;
    }
    if (!e || (t->hparam && !h)) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    } else {
        e->nparams = t->nparams;
        e->nconfigs = t->nconfigs;
        memcpy(e->values, t->values, sizeof e->values);
        memcpy(e->table, t->table, sizeof e->table);
        e->has_table = e->ready = e->recorded = 1;
        if (h) { /* without a recorded heuristic the package compiled none: a registered one is not used */
            h->recorded = 1;
            h->ready = t->hparam != NULL;
            if (t->hparam) {
                snprintf(h->param, sizeof h->param, "%s", t->hparam);
                h->nvalues = t->nh;
                memcpy(h->values, t->hvalues, sizeof(int) * (size_t)t->nh);
            }
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void tk_tune_prepare(tk_registry *r)
{
    pthread_mutex_lock(&r->lock);
    for (tune_entry **p = &r->tunes; *p;) {
        tune_entry *e = *p;
        if (!e->ready && !e->recorded && e->node && parse_decl(e, e->node->decl) != 0) {
            *p = e->next;
            free(e);
            continue;
        }
        p = &e->next;
    }
    for (heur_entry **p = &r->heuristics; *p;) {
        heur_entry *h = *p;
        if (!h->ready && !h->recorded && h->node && parse_heuristic(h, h->node->decl) != 0) {
            *p = h->next;
            free(h);
            continue;
        }
        p = &h->next;
    }
    pthread_mutex_unlock(&r->lock);
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
