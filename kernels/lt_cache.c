/* The bounded cache of kernels/lt_cache.h: a chained hash table of entries that also sit on a
 * doubly linked list in order of use (most recent first), with per-entry reference counts. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <tk/error.h>

#include "lt_cache.h"

struct tk_lt_entry {
    tk_lt_key key;
    void *value;
    atomic_uint refs;       /* the cache's own reference while in it, plus one per holder */
    tk_lt_entry *chain;     /* next in the same bucket */
    tk_lt_entry *newer, *older;
};

struct tk_lt_cache {
    pthread_mutex_t lock;
    tk_lt_entry **buckets;
    size_t nbuckets;        /* a power of two, at least twice the capacity */
    size_t count, capacity;
    tk_lt_entry *newest, *oldest;
    void (*free_value)(void *value, void *arg);
    void *arg;
    uint64_t hits, misses, adds, evictions;
};

/* splitmix64's finalizer over each field in turn: every bit of the key reaches every bit of the
 * hash, so keys that differ in one size land in unrelated buckets. */
static uint64_t key_hash(const tk_lt_key *k)
{
    const int64_t f[] = {k->kind, k->m, k->n, k->k, k->dtype, k->epilogue, k->align, k->workspace, k->batch, k->form};
    _Static_assert(sizeof f == sizeof *k, "tk_lt_key: hash every field");
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        h ^= (uint64_t)f[i];
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

int tk_lt_cache_new(tk_lt_cache **out, size_t capacity, void (*free_value)(void *value, void *arg), void *arg)
{
    *out = NULL;
    if (capacity == 0 || capacity > ((size_t)1 << 30) || !free_value)
        return tk_error_set(TK_EINVAL, "tk_lt_cache_new: capacity %zu (expected 1 to 2^30) or no free function",
                            capacity);
    tk_lt_cache *c = calloc(1, sizeof *c);
    size_t nb = 16;
    while (nb < 2 * capacity)
        nb <<= 1;
    if (c)
        c->buckets = calloc(nb, sizeof *c->buckets);
    if (!c || !c->buckets) {
        free(c);
        return tk_error_set(TK_ENOMEM, "out of memory for a cache of %zu entries", capacity);
    }
    pthread_mutex_init(&c->lock, NULL);
    c->nbuckets = nb;
    c->capacity = capacity;
    c->free_value = free_value;
    c->arg = arg;
    *out = c;
    return 0;
}

static void entry_drop(tk_lt_cache *c, tk_lt_entry *e)
{
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) {
        c->free_value(e->value, c->arg);
        free(e);
    }
}

void tk_lt_cache_free(tk_lt_cache *c)
{
    if (!c)
        return;
    for (tk_lt_entry *e = c->newest, *next; e; e = next) {
        next = e->older;
        entry_drop(c, e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

/* With the lock held: the list and the chains. */
static void list_unlink(tk_lt_cache *c, tk_lt_entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void list_push_newest(tk_lt_cache *c, tk_lt_entry *e)
{
    e->newer = NULL;
    e->older = c->newest;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

static tk_lt_entry *find(tk_lt_cache *c, const tk_lt_key *key, size_t bucket)
{
    for (tk_lt_entry *e = c->buckets[bucket]; e; e = e->chain)
        if (!memcmp(&e->key, key, sizeof *key))
            return e;
    return NULL;
}

static void chain_remove(tk_lt_cache *c, tk_lt_entry *e)
{
    tk_lt_entry **p = &c->buckets[key_hash(&e->key) & (c->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
}

tk_lt_entry *tk_lt_cache_get(tk_lt_cache *c, const tk_lt_key *key)
{
    size_t b = key_hash(key) & (c->nbuckets - 1);
    pthread_mutex_lock(&c->lock);
    tk_lt_entry *e = find(c, key, b);
    if (e) {
        c->hits++;
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
        if (c->newest != e) {
            list_unlink(c, e);
            list_push_newest(c, e);
        }
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

int tk_lt_cache_add(tk_lt_cache *c, const tk_lt_key *key, void *value, tk_lt_entry **out)
{
    size_t b = key_hash(key) & (c->nbuckets - 1);
    tk_lt_entry *evicted = NULL;
    *out = NULL;
    tk_lt_entry *fresh = malloc(sizeof *fresh);
    if (!fresh)
        return tk_error_set(TK_ENOMEM, "out of memory for a cache entry");
    pthread_mutex_lock(&c->lock);
    tk_lt_entry *e = find(c, key, b);
    if (e) {
        /* another thread made the same value first: use its entry */
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&c->lock);
        free(fresh);
        c->free_value(value, c->arg);
        *out = e;
        return 0;
    }
    if (c->count == c->capacity) {
        evicted = c->oldest;
        list_unlink(c, evicted);
        chain_remove(c, evicted);
        c->count--;
        c->evictions++;
    }
    memcpy(&fresh->key, key, sizeof *key);
    fresh->value = value;
    atomic_init(&fresh->refs, 2); /* the cache's and the caller's */
    fresh->chain = c->buckets[b];
    c->buckets[b] = fresh;
    list_push_newest(c, fresh);
    c->count++;
    c->adds++;
    pthread_mutex_unlock(&c->lock);
    if (evicted)
        entry_drop(c, evicted); /* freed now unless a thread still holds it */
    *out = fresh;
    return 0;
}

void tk_lt_cache_release(tk_lt_cache *c, tk_lt_entry *e)
{
    if (e)
        entry_drop(c, e);
}

void *tk_lt_entry_value(const tk_lt_entry *e)
{
    return e ? e->value : NULL;
}

void tk_lt_cache_get_stats(tk_lt_cache *c, tk_lt_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits;
    out->misses = c->misses;
    out->adds = c->adds;
    out->evictions = c->evictions;
    out->entries = c->count;
    out->capacity = c->capacity;
    pthread_mutex_unlock(&c->lock);
}
