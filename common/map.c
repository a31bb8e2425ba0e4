/* String-keyed hash map with linear probing (FNV-1a hashes). */
#include "map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tk/error.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int grow(tk_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(cap, sizeof(*keys));
    void **vals = calloc(cap, sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = hash(m->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int tk_map_put(tk_map *m, const char *key, void *val)
{
    if ((m->count + 1) * 2 > m->cap && grow(m))
        return TK_ENOMEM;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j] && strcmp(m->keys[j], key) != 0)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j])
        m->count++;
    m->keys[j] = key;
    m->vals[j] = val;
    return 0;
}

void *tk_map_get(const tk_map *m, const char *key)
{
    if (!m->cap)
        return NULL;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0)
            return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void tk_map_release(tk_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = 0;
}
