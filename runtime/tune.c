/* Autotuning at run time: the TK_AUTOTUNE declarations of loaded objects (parsed once when they
 * register), the per-bucket choices packages bring (tk_tune_set_table), and tk_tune, which picks
 * a configuration for a call and tells the next tk_wrap of that kernel which variant to launch. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

typedef struct tune_entry {
    tk_tune_node *node;
    char kernel[128];
    int nparams, nconfigs;
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    int has_table;
    signed char table[TK_TUNE_BUCKETS]; /* config per bucket */
    struct tune_entry *next;
} tune_entry;

/* A heuristic parameter, registered apart from its TK_AUTOTUNE (either may load first). */
typedef struct heur_entry {
    tk_heuristic_node *node;
    char kernel[128];
    int nvalues;
    int values[TK_TUNE_MAX_CONFIGS];
    struct heur_entry *next;
} heur_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tune_entry *entries;
static heur_entry *heuristics;

int tk_tune_bucket(int64_t key)
{
    int b = 0;
    while (b < TK_TUNE_BUCKETS - 1 && (int64_t)1 << b < key)
        b++;
    return b;
}

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        n++;
        while (*p && *p != ' ')
            p++;
    }
    return n;
}

/* Parses a declaration; a malformed one is reported on stderr (constructors have no caller) and
 * left out, so tk_tune of its kernel fails with a message. lint reports the same mistakes. */
static int parse_decl(tune_entry *e, const tk_tune_decl *d)
{
    const char *where = d->file ? d->file : "?";
    if (!d->kernel || !d->kernel->name || !d->params || !d->key)
        return -1;
    snprintf(e->kernel, sizeof e->kernel, "%s", d->kernel->name);
    e->nparams = count_words(d->params);
    e->nconfigs = d->nconfigs;
    if (e->nparams < 1 || e->nparams > TK_TUNE_MAX_PARAMS || e->nconfigs < 1 || e->nconfigs > TK_TUNE_MAX_CONFIGS) {
        fprintf(stderr, "tkexport: TK_AUTOTUNE of '%s' (%s:%d) needs 1 to %d parameters and 1 to %d configurations; "
                        "ignored\n", e->kernel, where, d->line, TK_TUNE_MAX_PARAMS, TK_TUNE_MAX_CONFIGS);
        return -1;
    }
    for (int c = 0; c < e->nconfigs; c++) {
        const char *p = d->configs[c];
        int k = 0;
        char *end;
        while (p && *p && k <= e->nparams) {
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (k < e->nparams)
                e->values[c][k] = (int)v;
            k++;
            p = end;
            while (*p == ' ')
                p++;
        }
        if (!p || *p || k != e->nparams) {
            fprintf(stderr, "tkexport: TK_AUTOTUNE of '%s' (%s:%d): configuration \"%s\" is not %d integers; "
                            "ignored\n", e->kernel, where, d->line, d->configs[c] ? d->configs[c] : "", e->nparams);
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
    pthread_mutex_lock(&lock);
    e->next = entries;
    entries = e;
    pthread_mutex_unlock(&lock);
}

void tk_tune_unregister(tk_tune_node *node)
{
    pthread_mutex_lock(&lock);
    for (tune_entry **p = &entries; *p; p = &(*p)->next) {
        if ((*p)->node == node) {
            tune_entry *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

static tune_entry *find(const char *kernel)
{
    for (tune_entry *e = entries; e; e = e->next)
        if (!strcmp(e->kernel, kernel))
            return e;
    return NULL;
}

static heur_entry *find_heuristic(const char *kernel)
{
    for (heur_entry *h = heuristics; h; h = h->next)
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
    snprintf(h->kernel, sizeof h->kernel, "%s", d->kernel->name);
    const char *p = d->values;
    char *end;
    while (*p && h->nvalues < TK_TUNE_MAX_CONFIGS) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        h->values[h->nvalues++] = (int)v;
        for (p = end; *p == ' '; p++)
            ;
    }
    if (*p || h->nvalues == 0) {
        fprintf(stderr, "tkexport: TK_HEURISTIC of '%s' (%s:%d): \"%s\" is not a list of integers; ignored\n",
                h->kernel, d->file ? d->file : "?", d->line, d->values);
        free(h);
        return;
    }
    h->node = node;
    pthread_mutex_lock(&lock);
    h->next = heuristics;
    heuristics = h;
    pthread_mutex_unlock(&lock);
}

void tk_heuristic_unregister(tk_heuristic_node *node)
{
    pthread_mutex_lock(&lock);
    for (heur_entry **p = &heuristics; *p; p = &(*p)->next) {
        if ((*p)->node == node) {
            heur_entry *h = *p;
            *p = h->next;
            free(h);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

int tk_tune_set(tk_ctx *ctx, const tk_kernel *kernel, const char *param, int value)
{
    if (!ctx || !kernel || !param)
        return tk_error_set(TK_EINVAL, "tk_tune_set: no %s", !ctx ? "context" : !kernel ? "kernel" : "parameter");
    pthread_mutex_lock(&lock);
    heur_entry *h = find_heuristic(kernel->name);
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
    pthread_mutex_unlock(&lock);
    return rc;
}

int tk_tune_set_table(const char *kernel, const signed char *table)
{
    pthread_mutex_lock(&lock);
    tune_entry *e = find(kernel);
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
    pthread_mutex_unlock(&lock);
    return rc;
}

void tk_tune_clear_table(const char *kernel)
{
    pthread_mutex_lock(&lock);
    tune_entry *e = find(kernel);
    if (e)
        e->has_table = 0;
    pthread_mutex_unlock(&lock);
}

int tk_tune_describe(const char *kernel, int *nparams, int *nconfigs, const tk_tune_decl **decl)
{
    pthread_mutex_lock(&lock);
    tune_entry *e = find(kernel);
    if (e) {
        *nparams = e->nparams;
        *nconfigs = e->nconfigs;
        *decl = e->node->decl;
    }
    pthread_mutex_unlock(&lock);
    return e ? 0 : tk_error_set(TK_ENOTFOUND, "kernel '%s' has no TK_AUTOTUNE declaration", kernel);
}

const int *tk_tune(tk_ctx *ctx, const tk_kernel *kernel, int64_t key)
{
    if (!ctx || !kernel) {
        tk_error_set(TK_EINVAL, "tk_tune: no %s", ctx ? "kernel" : "context");
        return NULL;
    }
    pthread_mutex_lock(&lock);
    tune_entry *e = find(kernel->name);
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
        heur_entry *h = find_heuristic(kernel->name);
        ctx->tune_kernel = kernel;
        ctx->tune_key = key;
        ctx->tune_base = e->has_table || ctx->tune_force_kernel ? config * (h ? h->nvalues : 1) : -1;
        ctx->tune_launch = ctx->tune_base > 0 ? ctx->tune_base : 0;
        values = e->values[config];
    }
    pthread_mutex_unlock(&lock);
    return values;
}

int tk_tune_config_for(tk_ctx *ctx, const tk_kernel *kernel)
{
    /* on every launch: no lock, only what tk_tune and tk_tune_set left in the context */
    return ctx && ctx->tune_kernel && kernel && !strcmp(ctx->tune_kernel->name, kernel->name) ? ctx->tune_launch : 0;
}
