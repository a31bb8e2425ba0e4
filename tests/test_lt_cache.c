/* The bounded cache behind tk::linear's cuBLASLt plans (kernels/lt_cache.c), on the CPU: keys,
 * hits and misses, least-recently-used eviction, entries held across their eviction, duplicate
 * adds, and threads sharing one cache. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lt_cache.h"

/* Values are malloc'd ints holding their key's m; what is made and freed is counted. */
static atomic_int g_made, g_freed;

static void free_int(void *value, void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_freed, 1);
    free(value);
}

static int *int_value(int64_t v)
{
    int *p = malloc(sizeof *p);
    if (p) /* no cmocka assertion here: workers call it from their threads */
        *p = (int)v;
    atomic_fetch_add(&g_made, 1);
    return p;
}

static tk_lt_key key_m(int64_t m)
{
    return (tk_lt_key){.kind = 1, .m = m, .n = 64, .k = 128, .dtype = 2, .epilogue = 4, .align = 0x80808,
                       .workspace = 32 << 20};
}

static tk_lt_cache *new_cache(size_t capacity)
{
    tk_lt_cache *c;
    atomic_store(&g_freed, 0);
    atomic_store(&g_made, 0);
    tk_assert_ok(tk_lt_cache_new(&c, capacity, free_int, NULL));
    return c;
}

/* Adds m (must not be there) and releases the entry. */
static void add(tk_lt_cache *c, int64_t m)
{
    tk_lt_key k = key_m(m);
    tk_lt_entry *e;
    tk_assert_ok(tk_lt_cache_add(c, &k, int_value(m), &e));
    assert_int_equal(*(int *)tk_lt_entry_value(e), (int)m);
    tk_lt_cache_release(c, e);
}

/* Whether m is there (a lookup: counts a hit or a miss, and a hit makes it the newest). */
static int has(tk_lt_cache *c, int64_t m)
{
    tk_lt_key k = key_m(m);
    tk_lt_entry *e = tk_lt_cache_get(c, &k);
    if (e) {
        assert_int_equal(*(int *)tk_lt_entry_value(e), (int)m);
        tk_lt_cache_release(c, e);
    }
    return e != NULL;
}

static void lt_cache__a_miss_an_add_then_hits(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(8);
    tk_lt_cache_stats st;
    assert_false(has(c, 16));
    add(c, 16);
    assert_true(has(c, 16));
    assert_true(has(c, 16));
    tk_lt_cache_get_stats(c, &st);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.adds, 1);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.capacity, 8);
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 1);
}

/* Keys that differ in any one field are different entries. */
static void lt_cache__keys_differing_in_one_field_are_distinct(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(64);
    tk_lt_key base = key_m(7);
    tk_lt_entry *e;
    tk_assert_ok(tk_lt_cache_add(c, &base, int_value(-1), &e));
    tk_lt_cache_release(c, e);
    for (int field = 0; field < 8; field++) {
        tk_lt_key k = base;
        int64_t *f = (int64_t *)&k;
        f[field] += 1;
        assert_null(tk_lt_cache_get(c, &k));
        tk_assert_ok(tk_lt_cache_add(c, &k, int_value(field), &e));
        assert_int_equal(*(int *)tk_lt_entry_value(e), field);
        tk_lt_cache_release(c, e);
    }
    e = tk_lt_cache_get(c, &base);
    assert_non_null(e);
    assert_int_equal(*(int *)tk_lt_entry_value(e), -1);
    tk_lt_cache_release(c, e);
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 9);
}

/* A full cache evicts the least recently used entry; a hit counts as a use. */
static void lt_cache__evicts_the_least_recently_used(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(3);
    tk_lt_cache_stats st;
    add(c, 1);
    add(c, 2);
    add(c, 3);
    assert_true(has(c, 1)); /* order of use now: 2, 3, 1 */
    add(c, 4);              /* evicts 2 */
    assert_int_equal(atomic_load(&g_freed), 1);
    assert_false(has(c, 2));
    assert_true(has(c, 3));
    assert_true(has(c, 1));
    assert_true(has(c, 4));
    add(c, 5); /* evicts 3 */
    assert_false(has(c, 3));
    tk_lt_cache_get_stats(c, &st);
    assert_int_equal(st.evictions, 2);
    assert_int_equal(st.entries, 3);
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 5);
}

/* Thousands of distinct keys through a small cache: bounded, and every value freed once. */
static void lt_cache__stays_bounded_over_many_keys(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(100);
    tk_lt_cache_stats st;
    for (int64_t m = 1; m <= 5000; m++) {
        assert_false(has(c, m));
        add(c, m);
        assert_true(has(c, m));
        if (m > 1)
            assert_true(has(c, m - 1));
    }
    tk_lt_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 100);
    assert_int_equal(st.evictions, 4900);
    assert_int_equal(atomic_load(&g_freed), 4900);
    for (int64_t m = 4901; m <= 5000; m++)
        assert_true(has(c, m));
    assert_false(has(c, 4900));
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 5000);
}

/* An entry evicted while held keeps its value until released. */
static void lt_cache__a_held_entry_outlives_its_eviction(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(1);
    tk_lt_key k1 = key_m(1);
    add(c, 1);
    tk_lt_entry *held = tk_lt_cache_get(c, &k1);
    assert_non_null(held);
    add(c, 2); /* evicts 1, which is held */
    assert_false(has(c, 1));
    assert_int_equal(atomic_load(&g_freed), 0);
    assert_int_equal(*(int *)tk_lt_entry_value(held), 1);
    tk_lt_cache_release(c, held);
    assert_int_equal(atomic_load(&g_freed), 1);
    tk_lt_cache_release(c, NULL);
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 2);
}

/* A key added twice (two threads that missed together) keeps the first value; the second is freed
 * at once and the caller gets the first's entry. */
static void lt_cache__a_second_add_of_a_key_keeps_the_first(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(4);
    tk_lt_key k = key_m(9);
    tk_lt_entry *a, *b;
    tk_assert_ok(tk_lt_cache_add(c, &k, int_value(9), &a));
    int *second = int_value(99);
    tk_assert_ok(tk_lt_cache_add(c, &k, second, &b));
    assert_ptr_equal(a, b);
    assert_int_equal(*(int *)tk_lt_entry_value(b), 9);
    assert_int_equal(atomic_load(&g_freed), 1);
    tk_lt_cache_release(c, a);
    tk_lt_cache_release(c, b);
    tk_lt_cache_stats st;
    tk_lt_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.adds, 1);
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), 2);
}

static void lt_cache__refuses_a_capacity_of_zero(void **state)
{
    (void)state;
    tk_lt_cache *c = (tk_lt_cache *)&c;
    tk_assert_fails(tk_lt_cache_new(&c, 0, free_int, NULL), TK_EINVAL, "capacity 0");
    assert_null(c);
    tk_lt_cache_free(NULL);
}

/* Threads looking up and adding overlapping keys through a cache smaller than their key set:
 * every entry they get holds its own key's value while they hold it, and every value is freed
 * exactly once by the end. */
enum { THREADS = 4, ROUNDS = 20000, KEYS = 64 };

typedef struct worker {
    tk_lt_cache *c;
    unsigned seed;
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        w->seed = w->seed * 1664525u + 1013904223u;
        int64_t m = (int64_t)(w->seed >> 16) % KEYS;
        tk_lt_key k = key_m(m);
        tk_lt_entry *e = tk_lt_cache_get(w->c, &k);
        if (!e && tk_lt_cache_add(w->c, &k, int_value(m), &e))
            w->bad++;
        if (e && *(int *)tk_lt_entry_value(e) != (int)m)
            w->bad++;
        tk_lt_cache_release(w->c, e);
    }
    return NULL;
}

static void lt_cache__threads_share_it(void **state)
{
    (void)state;
    tk_lt_cache *c = new_cache(KEYS / 4);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){c, 17u * (unsigned)i + 1u, 0};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].bad, 0);
    }
    tk_lt_cache_stats st;
    tk_lt_cache_get_stats(c, &st);
    assert_int_equal(st.hits + st.misses, (uint64_t)THREADS * ROUNDS);
    assert_int_equal(st.entries, KEYS / 4);
    assert_int_equal(st.adds, st.evictions + st.entries);
    /* every value made is freed once: evicted, a duplicate add, or left in the cache */
    tk_lt_cache_free(c);
    assert_int_equal(atomic_load(&g_freed), atomic_load(&g_made));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lt_cache__a_miss_an_add_then_hits),
        cmocka_unit_test(lt_cache__keys_differing_in_one_field_are_distinct),
        cmocka_unit_test(lt_cache__evicts_the_least_recently_used),
        cmocka_unit_test(lt_cache__stays_bounded_over_many_keys),
        cmocka_unit_test(lt_cache__a_held_entry_outlives_its_eviction),
        cmocka_unit_test(lt_cache__a_second_add_of_a_key_keeps_the_first),
        cmocka_unit_test(lt_cache__refuses_a_capacity_of_zero),
        cmocka_unit_test(lt_cache__threads_share_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
