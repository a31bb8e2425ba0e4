/* A bounded, thread-safe cache from fixed-size keys to values it owns: what tk::linear keeps per
 * GPU of cuBLASLt's plans (kernels/linear.c), written without CUDA so that its keys, reference
 * counts and eviction are tested on any machine (tests/test_lt_cache.c).
 *
 * Invariants. At most `capacity` entries are in the cache; adding one more evicts the least
 * recently used (a hit makes an entry the most recently used). An entry handed out by get or add
 * is held by the caller until tk_lt_cache_release: eviction takes it out of the cache at once
 * but frees its value (free_value) only when the last holder releases it, so a value never goes
 * away under a thread that uses it. One mutex guards the table and the list; releasing is an
 * atomic decrement. Internal to libtkrt. */
#ifndef TK_LT_CACHE_H
#define TK_LT_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Every field is an int64_t, so the struct has no padding and compares with memcmp. Zero the
 * fields a kind of entry does not use. */
typedef struct tk_lt_key {
    int64_t kind;      /* what the value is: the user's own numbering (linear.c: plan or algorithm) */
    int64_t m, n, k;   /* the product's sizes */
    int64_t dtype;
    int64_t epilogue;
    int64_t align;     /* the operands' alignments, packed by the user */
    int64_t workspace; /* bytes of workspace the value may use */
    int64_t batch;     /* products in one call (strided batches; 0 or 1: one) */
    int64_t form;      /* which product (linear.c: x W^T, or a b with b shared or batched) */
} tk_lt_key;

typedef struct tk_lt_cache tk_lt_cache;
typedef struct tk_lt_entry tk_lt_entry;

/* Counters since the cache was made; entries is the number in the cache now. */
typedef struct tk_lt_cache_stats {
    uint64_t hits, misses, adds, evictions;
    size_t entries, capacity;
} tk_lt_cache_stats;

/* A cache of at most capacity (>= 1) entries; free_value(value, arg) frees a value when its
 * entry is evicted and released, or when the cache is freed. TK_EINVAL, TK_ENOMEM. */
int tk_lt_cache_new(tk_lt_cache **out, size_t capacity, void (*free_value)(void *value, void *arg), void *arg);
/* Frees every value; no entry may be held any more. Accepts NULL. */
void tk_lt_cache_free(tk_lt_cache *c);

/* The entry of key, held for the caller, or NULL (a miss). Counts a hit or a miss. */
tk_lt_entry *tk_lt_cache_get(tk_lt_cache *c, const tk_lt_key *key);
/* Adds value under key and returns its entry, held for the caller, in *out. When another thread
 * added the key first, value is freed at once (free_value) and *out is that thread's entry.
 * TK_ENOMEM leaves value the caller's and *out NULL. */
int tk_lt_cache_add(tk_lt_cache *c, const tk_lt_key *key, void *value, tk_lt_entry **out);
/* Gives back an entry of get or add (NULL is ignored). */
void tk_lt_cache_release(tk_lt_cache *c, tk_lt_entry *e);

void *tk_lt_entry_value(const tk_lt_entry *e);
void tk_lt_cache_get_stats(tk_lt_cache *c, tk_lt_cache_stats *out);

#endif
