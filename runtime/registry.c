/* The op registry and the fatbin registry: lists that TK_OP's and tk_add_kernels' constructors
 * join when an executable starts or a shared object is loaded, and leave when it is unloaded. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* Ops in registration order. A name defined twice keeps its first definition (tk_op_find
 * returns the oldest), so what a program runs does not depend on which object loads last. */
static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;
static tk_op_node *ops;

void tk_op_register(tk_op_node *node)
{
    const tk_op_def *def = node ? node->def : NULL;
    if (!def || !def->name)
        return;
    if (def->version != TK_OP_DEF_VERSION) {
        /* constructors have no caller to return an error to */
        fprintf(stderr, "tkexport: op '%s' (%s:%d) was built for op record version %u, this runtime reads %d; "
                        "not registered\n", def->name, def->file ? def->file : "?", def->line, def->version,
                TK_OP_DEF_VERSION);
        return;
    }
    pthread_mutex_lock(&ops_lock);
    tk_op_node **p = &ops;
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
        fprintf(stderr, "tkexport: op '%s' is defined twice (%s:%d and %s:%d); the first definition is used\n",
                def->name, first->file ? first->file : "?", first->line, def->file ? def->file : "?", def->line);
done:
    pthread_mutex_unlock(&ops_lock);
}

void tk_op_unregister(tk_op_node *node)
{
    pthread_mutex_lock(&ops_lock);
    for (tk_op_node **p = &ops; *p; p = &(*p)->next) {
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&ops_lock);
}

size_t tk_op_count(void)
{
    size_t n = 0;
    pthread_mutex_lock(&ops_lock);
    for (tk_op_node *p = ops; p; p = p->next)
        n++;
    pthread_mutex_unlock(&ops_lock);
    return n;
}

const tk_op_def *tk_op_at(size_t i)
{
    const tk_op_def *def = NULL;
    pthread_mutex_lock(&ops_lock);
    for (tk_op_node *p = ops; p; p = p->next, i--) {
        if (i == 0) {
            def = p->def;
            break;
        }
    }
    pthread_mutex_unlock(&ops_lock);
    return def;
}

const tk_op_def *tk_op_find(const char *name)
{
    const tk_op_def *def = NULL;
    if (!name)
        return NULL;
    pthread_mutex_lock(&ops_lock);
    for (tk_op_node *p = ops; p; p = p->next) {
        if (strcmp(p->def->name, name) == 0) {
            def = p->def;
            break;
        }
    }
    pthread_mutex_unlock(&ops_lock);
    return def;
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

/* Fatbins, in registration order; the generation moves on every removal. */
static pthread_mutex_t fatbins_lock = PTHREAD_MUTEX_INITIALIZER;
static tk_fatbin_node *fatbins;
static unsigned fatbins_gen;

void tk_fatbin_register(tk_fatbin_node *node)
{
    if (!node || !node->image)
        return;
    pthread_mutex_lock(&fatbins_lock);
    tk_fatbin_node **p = &fatbins;
    while (*p && *p != node)
        p = &(*p)->next;
    if (!*p) {
        node->next = NULL;
        *p = node;
    }
    pthread_mutex_unlock(&fatbins_lock);
}

void tk_fatbin_unregister(tk_fatbin_node *node)
{
    pthread_mutex_lock(&fatbins_lock);
    for (tk_fatbin_node **p = &fatbins; *p; p = &(*p)->next) {
        if (*p == node) {
            *p = node->next;
            node->next = NULL;
            fatbins_gen++;
            break;
        }
    }
    pthread_mutex_unlock(&fatbins_lock);
}

unsigned tk_fatbin_generation(void)
{
    pthread_mutex_lock(&fatbins_lock);
    unsigned gen = fatbins_gen;
    pthread_mutex_unlock(&fatbins_lock);
    return gen;
}

int tk_fatbin_foreach(int (*fn)(const tk_fatbin_node *node, void *arg), void *arg)
{
    /* fn runs on a snapshot, without the lock: it loads modules, and the driver may dlopen its
     * JIT compiler, which would wait on a constructor of another thread waiting on this lock.
     * An object must therefore not be unloaded while its kernels may still be looked up. */
    size_t n = 0;
    pthread_mutex_lock(&fatbins_lock);
    for (tk_fatbin_node *p = fatbins; p; p = p->next)
        n++;
    const tk_fatbin_node **snap = malloc(sizeof(*snap) * (n ? n : 1));
    if (!snap) {
        pthread_mutex_unlock(&fatbins_lock);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    n = 0;
    for (tk_fatbin_node *p = fatbins; p; p = p->next)
        snap[n++] = p;
    pthread_mutex_unlock(&fatbins_lock);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = fn(snap[i], arg);
    free(snap);
    return rc;
}
