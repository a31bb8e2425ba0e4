/* A string-keyed hash map (open addressing) holding borrowed keys and values: the caller keeps
 * both alive while the map is used. */
#ifndef TK_MAP_H
#define TK_MAP_H

#include <stddef.h>

typedef struct tk_map {
    const char **keys;
    void **vals;
    size_t cap;   /* power of two, 0 when empty */
    size_t count;
} tk_map;

#define TK_MAP_INIT {NULL, NULL, 0, 0}

/* Sets key to val (replacing an old value); 0 or TK_ENOMEM. */
int tk_map_put(tk_map *m, const char *key, void *val);
/* The value of key, or NULL. */
void *tk_map_get(const tk_map *m, const char *key);
void tk_map_release(tk_map *m);

#endif
