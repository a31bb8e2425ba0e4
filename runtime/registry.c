/* Registries: the lists that TK_OP's, TK_AUTOTUNE's and tk_add_kernels' constructors join when an
 * object is loaded, and leave when it is unloaded. The process registry holds what the
 * application links or loads itself; each package has its own, filled while its host object is
 * loaded (tk_registry_load), so that packages with the same op and kernel names stay apart. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rt_internal.h"

static tk_registry process = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Every package registry alive, for tk_fatbin_foreach_all (which modules are still in use). */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static tk_registry *all;

/* The registry that constructors and destructors running on this thread register into: a
 * package's while tk_registry_load/unload runs its object's constructors or destructors (the
 * dynamic loader runs them on the thread that calls dlopen/dlclose), else the process's. */
static _Thread_local tk_registry *loading;
/* One package object loaded or unloaded at a time, so `loading` is never ambiguous. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Moves on whenever a fatbin leaves any registry. */
static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned fatbins_gen;

tk_registry *tk_registry_process(void)
{
    return &process;
}

static tk_registry *target(void)
{
    return loading ? loading : &process;
}

tk_registry *tk_registry_target(void)
{
    return target();
}

int tk_registry_new(tk_registry **out, const char *origin)
{
    *out = NULL;
    tk_registry *r = calloc(1, sizeof(*r));
    if (!r || !(r->origin = strdup(origin ? origin : "package"))) {
        free(r);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_lock(&all_lock);
    r->next = all;
    all = r;
    pthread_mutex_unlock(&all_lock);
    *out = r;
    return 0;
}

void tk_registry_free(tk_registry *r)
{
    if (!r || r == &process)
        return;
    pthread_mutex_lock(&all_lock);
    for (tk_registry **p = &all; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&all_lock);
    /* its fatbins are gone: kernel caches look again (before the address can be reused) */
    if (r->fatbins) {
        pthread_mutex_lock(&gen_lock);
        fatbins_gen++;
        pthread_mutex_unlock(&gen_lock);
    }
    tk_tune_release(r);
    pthread_mutex_destroy(&r->lock);
    free(r->origin);
    free(r);
}

int tk_registry_load(tk_registry *r, void **handle, const char *path)
{
    pthread_mutex_lock(&load_lock);
    loading = r == &process ? NULL : r;
    int rc = tk_ops_load(handle, path);
    loading = NULL;
    pthread_mutex_unlock(&load_lock);
    return rc;
}

void tk_registry_unload(tk_registry *r, void *handle)
{
    if (!handle)
        return;
    pthread_mutex_lock(&load_lock);
    loading = r == &process ? NULL : r;
    tk_ops_unload(handle);
    loading = NULL;
    pthread_mutex_unlock(&load_lock);
}

/* --- ops --------------------------------------------------------------------------------------- */

void tk_op_register(tk_op_node *node)
{
    const tk_op_def *def = node ? node->def : NULL;
    if (!def || !def->name)
        return;
    if (def->version != TK_OP_DEF_VERSION) {
        /* constructors have no caller to return an error to */
        tk_log(TK_LOG_WARN, "op '%s' (%s:%d) was built for op record version %u, this runtime reads %d; not registered",
               def->name, def->file ? def->file : "?", def->line, def->version, TK_OP_DEF_VERSION);
        return;
    }
    tk_registry *r = target();
    pthread_mutex_lock(&r->lock);
    tk_op_node **p = &r->ops;
    const tk_op_def *first = NULL;
    for (; *p; p = &(*p)->next) {
        if (*p == node)
            goto done; /* already registered */
        if (!first && strcmp((*p)->def->name, def->name) == 0)
            first = (*p)->def;
    }
    node->next = NULL;
    *p = node;
    if (first)
        tk_log(TK_LOG_WARN, "op '%s' is defined twice%s%s (%s:%d and %s:%d); the first definition is used", def->name,
               r->origin ? " in " : "", r->origin ? r->origin : "", first->file ? first->file : "?", first->line,
               def->file ? def->file : "?", def->line);
done:
    pthread_mutex_unlock(&r->lock);
}

/* Unlinks node from r's list; 1 when it was there. */
static int unlink_op(tk_registry *r, tk_op_node *node)
{
    int found = 0;
    pthread_mutex_lock(&r->lock);
    for (tk_op_node **p = &r->ops; *p; p = &(*p)->next) {
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

void tk_op_unregister(tk_op_node *node)
{
    if (!unlink_op(target(), node) && target() != &process)
        unlink_op(&process, node);
}

size_t tk_op_count(void)
{
    size_t n = 0;
    pthread_mutex_lock(&process.lock);
    for (tk_op_node *p = process.ops; p; p = p->next)
        n++;
    pthread_mutex_unlock(&process.lock);
    return n;
}

const tk_op_def *tk_op_at(size_t i)
{
    const tk_op_def *def = NULL;
    pthread_mutex_lock(&process.lock);
    for (tk_op_node *p = process.ops; p; p = p->next, i--) {
        if (i == 0) {
            def = p->def;
            break;
        }
    }
    pthread_mutex_unlock(&process.lock);
    return def;
}

const tk_op_def *tk_registry_find_op(tk_registry *r, const char *name)
{
    const tk_op_def *def = NULL;
    if (!name)
        return NULL;
    if (!r)
        r = &process;
    pthread_mutex_lock(&r->lock);
    for (tk_op_node *p = r->ops; p; p = p->next) {
        if (strcmp(p->def->name, name) == 0) {
            def = p->def;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return def;
}

const tk_op_def *tk_op_find(const char *name)
{
    return tk_registry_find_op(&process, name);
}

int tk_op_resolve(tk_resolved_op *out, tk_registry *scope, const char *name)
{
    char why[256];
    memset(out, 0, sizeof(*out));
    if (scope && scope != &process && (out->def = tk_registry_find_op(scope, name)))
        out->owner = scope;
    else if ((out->def = tk_registry_find_op(&process, name)))
        out->owner = &process;
    else if (scope && scope != &process)
        return tk_error_set(TK_ENOTFOUND, "op '%s' is not registered in %s nor in the application", name ? name : "",
                            scope->origin);
    else
        return tk_error_set(TK_ENOTFOUND, "op '%s' is not registered", name ? name : "");
    const tk_op_def *def = out->def;
    if (!def->schema || tk_schema_parse(def->schema, &out->schema, why, sizeof(why)) != 0)
        return tk_error_set(TK_EINVAL, "op '%s' (%s:%d) has a bad schema: %s", name, def->file ? def->file : "?",
                            def->line, def->schema ? why : "none");
    if (out->schema.nargs > TK_SCHEMA_MAX || out->schema.nrets > TK_SCHEMA_MAX)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' has more than %d arguments or returns", name, TK_SCHEMA_MAX);
    return 0;
}

int tk_ops_load(void **handle, const char *path)
{
    *handle = NULL;
    if (!path)
        return tk_error_set(TK_EINVAL, "tk_ops_load: no path");
    /* RTLD_NOW: a missing symbol fails here, not at the first call into the object */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return tk_error_set(TK_EIO, "cannot load ops from '%s': %s", path, why ? why : "unknown reason");
    }
    *handle = h;
    return 0;
}

void tk_ops_unload(void *handle)
{
    if (handle)
        dlclose(handle);
}

/* --- fatbins ----------------------------------------------------------------------------------- */

void tk_registry_add_fatbin(tk_registry *r, tk_fatbin_node *node)
{
    if (!node || !node->image)
        return;
    if (node->version != TK_FATBIN_RECORD_VERSION) {
        tk_log(TK_LOG_WARN, "fatbin '%s' was registered with record version %u, this runtime reads %d; not registered",
               node->name ? node->name : "?", node->version, TK_FATBIN_RECORD_VERSION);
        return;
    }
    if (!r)
        r = &process;
    pthread_mutex_lock(&r->lock);
    tk_fatbin_node **p = &r->fatbins;
    while (*p && *p != node)
        p = &(*p)->next;
    if (!*p) {
        /* a serial no other registration shares, so that a module loaded from an earlier node at
         * the same address (a closed package's) is never taken for this one's */
        static atomic_ullong serials;
        node->serial = atomic_fetch_add(&serials, 1) + 1;
        node->next = NULL;
        *p = node;
    }
    pthread_mutex_unlock(&r->lock);
}

void tk_fatbin_register(tk_fatbin_node *node)
{
    tk_registry_add_fatbin(target(), node);
}

static int unlink_fatbin(tk_registry *r, tk_fatbin_node *node)
{
    int found = 0;
    pthread_mutex_lock(&r->lock);
    for (tk_fatbin_node **p = &r->fatbins; *p; p = &(*p)->next) {
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (found) {
        pthread_mutex_lock(&gen_lock);
        fatbins_gen++;
        pthread_mutex_unlock(&gen_lock);
    }
    return found;
}

void tk_fatbin_unregister(tk_fatbin_node *node)
{
    if (!unlink_fatbin(target(), node) && target() != &process)
        unlink_fatbin(&process, node);
}

unsigned tk_fatbin_generation(void)
{
    pthread_mutex_lock(&gen_lock);
    unsigned gen = fatbins_gen;
    pthread_mutex_unlock(&gen_lock);
    return gen;
}

int tk_fatbin_foreach(tk_registry *r, int (*fn)(const tk_fatbin_node *node, void *arg), void *arg)
{
    /* fn runs on a snapshot, without the lock: it loads modules, and the driver may dlopen its
     * JIT compiler, which would wait on a constructor of another thread waiting on this lock.
     * An object must therefore not be unloaded while its kernels may still be looked up. */
    size_t n = 0;
    if (!r)
        r = &process;
    pthread_mutex_lock(&r->lock);
    for (tk_fatbin_node *p = r->fatbins; p; p = p->next)
        n++;
    const tk_fatbin_node **snap = malloc(sizeof(*snap) * (n ? n : 1));
    if (!snap) {
        pthread_mutex_unlock(&r->lock);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    n = 0;
    for (tk_fatbin_node *p = r->fatbins; p; p = p->next)
        snap[n++] = p;
    pthread_mutex_unlock(&r->lock);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = fn(snap[i], arg);
    free(snap);
    return rc;
}

int tk_fatbin_foreach_all(int (*fn)(const tk_fatbin_node *node, void *arg), void *arg)
{
    int rc = tk_fatbin_foreach(&process, fn, arg);
    pthread_mutex_lock(&all_lock);
    for (tk_registry *r = all; r && !rc; r = r->next)
        rc = tk_fatbin_foreach(r, fn, arg);
    pthread_mutex_unlock(&all_lock);
    return rc;
}
