/* Autotuning at run time (runtime/tune.c), on the CPU: TK_AUTOTUNE declarations registering
 * themselves, tk_tune's default, a package's table selecting per power-of-two bucket, the
 * tuner's forced configuration, the variant tk_wrap would launch, and malformed declarations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "rt_internal.h"
#include "tk_test.h"
#include "tunespec.h"
#include <tk/log.h>
#include <tk/op.h>
#include <tk/runtime.h>

TK_KERNEL_DECL(tuned_k);
TK_KERNEL_DECL(other_k);
TK_KERNEL_DECL(undeclared_k);

TK_AUTOTUNE(tuned_k, "n", "BLOCK ITEMS", "256 1", "128 4", "1024 2");
TK_HEURISTIC(tuned_k, "EVEN", "0 1");

static tk_ctx *g_ctx;

static int setup(void **state)
{
    (void)state;
    tk_device cpu = {TK_DEVICE_CPU, 0};
    return tk_ctx_new(&g_ctx, cpu);
}

static int teardown(void **state)
{
    (void)state;
    tk_ctx_free(g_ctx);
    return 0;
}

static void bucket__is_the_smallest_power_of_two_at_least_the_key(void **state)
{
    (void)state;
    assert_int_equal(tk_tune_bucket(-5), 0);
    assert_int_equal(tk_tune_bucket(0), 0);
    assert_int_equal(tk_tune_bucket(1), 0);
    assert_int_equal(tk_tune_bucket(2), 1);
    assert_int_equal(tk_tune_bucket(3), 2);
    assert_int_equal(tk_tune_bucket(1024), 10);
    assert_int_equal(tk_tune_bucket(1025), 11);
    assert_int_equal(tk_tune_bucket(INT64_C(1) << 40), 40);
    assert_int_equal(tk_tune_bucket(INT64_MAX), TK_TUNE_BUCKETS - 1);
}

static void tune__default_without_a_table(void **state)
{
    (void)state;
    const int *cfg = tk_tune(g_ctx, tuned_k, 5000);
    assert_non_null(cfg);
    assert_int_equal(cfg[0], 256);
    assert_int_equal(cfg[1], 1);
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 0);
    assert_int_equal(tk_tune_config_for(g_ctx, other_k), 0);
}

static void tune__table_selects_per_bucket_and_tk_wrap_follows(void **state)
{
    (void)state;
    signed char table[TK_TUNE_BUCKETS] = {0};
    for (int b = 10; b < TK_TUNE_BUCKETS; b++)
        table[b] = b < 20 ? 1 : 2;
    tk_assert_ok(tk_tune_set_table(NULL, "tuned_k", table));
    const int *cfg = tk_tune(g_ctx, tuned_k, 512); /* bucket 9 */
    assert_int_equal(cfg[0], 256);
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 0);
    cfg = tk_tune(g_ctx, tuned_k, 513); /* bucket 10 */
    assert_int_equal(cfg[0], 128);
    assert_int_equal(cfg[1], 4);
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 2); /* configuration 1, EVEN's first value */
    assert_int_equal(tk_tune_config_for(g_ctx, other_k), 0); /* only the kernel tk_tune chose for */
    cfg = tk_tune(g_ctx, tuned_k, INT64_C(1) << 30);
    assert_int_equal(cfg[0], 1024);
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 4);
    assert_int_equal(g_ctx->tune_key, INT64_C(1) << 30);

    /* the tuner's forced configuration wins over the table */
    g_ctx->tune_force_kernel = "tuned_k";
    g_ctx->tune_force_config = 0;
    cfg = tk_tune(g_ctx, tuned_k, INT64_C(1) << 30);
    assert_int_equal(cfg[0], 256);
    g_ctx->tune_force_kernel = NULL;

    tk_tune_clear_table(NULL, "tuned_k");
    cfg = tk_tune(g_ctx, tuned_k, INT64_C(1) << 30);
    assert_int_equal(cfg[0], 256);
}

static void tune__bad_tables_and_undeclared_kernels_are_refused(void **state)
{
    (void)state;
    signed char table[TK_TUNE_BUCKETS] = {0};
    table[7] = 3; /* tuned_k has 3 configurations */
    tk_assert_fails(tk_tune_set_table(NULL, "tuned_k", table), TK_EINVAL, "kernel 'tuned_k': bucket 7 selects configuration 3 of 3");
    table[7] = 0;
    tk_assert_fails(tk_tune_set_table(NULL, "nope_k", table), TK_ENOTFOUND, "kernel 'nope_k' has a tuning table");
    assert_null(tk_tune(g_ctx, undeclared_k, 1));
    assert_non_null(strstr(tk_error_last(), "kernel 'undeclared_k' has no TK_AUTOTUNE declaration"));
}

static void tune__malformed_declarations_are_not_registered(void **state)
{
    (void)state;
    static const char *const short_configs[] = {"256 1", "128"};
    static const tk_tune_decl bad = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK ITEMS", 2, short_configs, "bad.c", 3};
    static tk_tune_node node = {&bad, NULL};
    tk_tune_register(&node); /* prints why on stderr */
    assert_null(tk_tune(g_ctx, other_k, 1));
    tk_tune_unregister(&node);

    static const char *const good[] = {"64"};
    static const tk_tune_decl ok = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK", 1, good, "ok.c", 4};
    static tk_tune_node ok_node = {&ok, NULL};
    tk_tune_register(&ok_node);
    const int *cfg = tk_tune(g_ctx, other_k, 1);
    assert_non_null(cfg);
    assert_int_equal(cfg[0], 64);
    tk_tune_unregister(&ok_node);
    assert_null(tk_tune(g_ctx, other_k, 1));
}

/* A declaration built against another record layout is left out (with a warning), not misread. */
static void tune__declarations_of_another_record_version_are_not_registered(void **state)
{
    (void)state;
    static const char *const configs[] = {"64"};
    static const tk_tune_decl future = {TK_TUNE_DECL_VERSION + 1, other_k, "n", "BLOCK", 1, configs, "new.c", 5};
    static tk_tune_node node = {&future, NULL};
    tk_tune_register(&node);
    assert_null(tk_tune(g_ctx, other_k, 1));
    tk_tune_unregister(&node);

    static const tk_tune_decl ok = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK", 1, configs, "ok.c", 6};
    static tk_tune_node ok_node = {&ok, NULL};
    static const tk_heuristic_decl hfuture = {TK_HEURISTIC_DECL_VERSION + 1, other_k, "EVEN", "0 1", "new.c", 7};
    static tk_heuristic_node hnode = {&hfuture, NULL};
    tk_tune_register(&ok_node);
    tk_heuristic_register(&hnode);
    assert_non_null(tk_tune(g_ctx, other_k, 1));
    tk_assert_fails(tk_tune_set(g_ctx, other_k, "EVEN", 0), TK_EINVAL, "kernel 'other_k' declares no heuristic");
    tk_heuristic_unregister(&hnode);
    tk_tune_unregister(&ok_node);
}

static void tune__heuristic_picks_the_variant_of_the_chosen_configuration(void **state)
{
    (void)state;
    /* without a package's variants: always the default kernel */
    assert_non_null(tk_tune(g_ctx, tuned_k, 4096));
    tk_assert_ok(tk_tune_set(g_ctx, tuned_k, "EVEN", 1));
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 0);
    /* with them: configuration * 2 + the value's index */
    signed char table[TK_TUNE_BUCKETS] = {0};
    table[12] = 2;
    tk_assert_ok(tk_tune_set_table(NULL, "tuned_k", table));
    assert_non_null(tk_tune(g_ctx, tuned_k, 4096));
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 4);
    tk_assert_ok(tk_tune_set(g_ctx, tuned_k, "EVEN", 1));
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 5);
    /* tk_tune starts every call from the first value */
    assert_non_null(tk_tune(g_ctx, tuned_k, 4096));
    assert_int_equal(tk_tune_config_for(g_ctx, tuned_k), 4);
    tk_assert_fails(tk_tune_set(g_ctx, tuned_k, "EVEN", 2), TK_EINVAL, "compiles EVEN for the values \"0 1\", not 2");
    tk_assert_fails(tk_tune_set(g_ctx, tuned_k, "ODD", 0), TK_EINVAL, "declares no heuristic parameter 'ODD'");
    tk_assert_fails(tk_tune_set(g_ctx, other_k, "EVEN", 0), TK_EINVAL, "kernel 'other_k' declares no heuristic");
    tk_tune_clear_table(NULL, "tuned_k");
}

/* The one grammar of TK_AUTOTUNE / TK_HEURISTIC strings (common/tunespec.h), which the analyzer
 * and the runtime both use: what it takes, and a one-line reason for what it refuses. */
static void tunespec__reads_names_and_integers_and_says_what_is_wrong(void **state)
{
    (void)state;
    char names[4][TK_TUNESPEC_NAME_MAX], why[160];
    int v[4], n = -1;
    assert_int_equal(tk_tunespec_names("  BLOCK\tITEMS ", names, 4, &n, why, sizeof why), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "BLOCK");
    assert_string_equal(names[1], "ITEMS");
    assert_int_equal(tk_tunespec_ints("256 -4\t+8", v, 4, &n, why, sizeof why), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[0], 256);
    assert_int_equal(v[1], -4);
    assert_int_equal(v[2], 8);
    static const struct {
        int names;
        const char *text, *why;
    } bad[] = {
        {1, "", "no parameter name in \"\""},
        {1, "BLOCK 2x", "'2x' is not a parameter name (a C identifier of at most 63 characters)"},
        {1, "A B C D E", "more than 4 parameters"},
        {0, "  ", "no value in \"  \""},
        {0, "256 4k", "'4k' is not a decimal integer"},
        {0, "0x10", "'0x10' is not a decimal integer"},
        {0, "1,2", "'1,2' is not a decimal integer"},
        {0, "99999999999", "99999999999 is out of range (an int)"},
        {0, "1 2 3 4 5", "more than 4 values"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = bad[i].names ? tk_tunespec_names(bad[i].text, names, 4, &n, why, sizeof why)
                              : tk_tunespec_ints(bad[i].text, v, 4, &n, why, sizeof why);
        assert_int_equal(rc, -1);
        assert_string_equal(why, bad[i].why);
    }
}

static void keep_last(tk_log_level level, const char *msg, void *user)
{
    (void)level;
    snprintf(user, 512, "%s", msg);
}

/* The eager path (no package) reads registered declarations with the same grammar and says in
 * one line what it refused and why, naming the declaration's place. */
static void tune__eager_declarations_are_refused_with_the_grammar_s_reason(void **state)
{
    (void)state;
    char last[512] = "";
    tk_log_set(keep_last, last);
    static const char *const configs[] = {"256 1", "128 4k"};
    static const tk_tune_decl bad = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK ITEMS", 2, configs, "bad.c", 3};
    static tk_tune_node node = {&bad, NULL};
    tk_tune_register(&node);
    assert_string_equal(last, "TK_AUTOTUNE of 'other_k' (bad.c:3): configuration \"128 4k\": '4k' is not a decimal "
                              "integer; ignored");
    static const char *const short_configs[] = {"256 1", "128"};
    static const tk_tune_decl short_decl = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK ITEMS", 2, short_configs, "bad.c", 4};
    static tk_tune_node short_node = {&short_decl, NULL};
    tk_tune_register(&short_node);
    assert_string_equal(last, "TK_AUTOTUNE of 'other_k' (bad.c:4): configuration \"128\": 1 value for 2 parameters; "
                              "ignored");
    static const char *const tabbed[] = {"64\t2"};
    static const tk_tune_decl names = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK 2x", 1, tabbed, "bad.c", 5};
    static tk_tune_node names_node = {&names, NULL};
    tk_tune_register(&names_node);
    assert_string_equal(last, "TK_AUTOTUNE of 'other_k' (bad.c:5): '2x' is not a parameter name (a C identifier of at "
                              "most 63 characters); ignored");
    static const tk_heuristic_decl hbad = {TK_HEURISTIC_DECL_VERSION, other_k, "EVEN", "0 one", "bad.c", 6};
    static tk_heuristic_node hnode = {&hbad, NULL};
    tk_heuristic_register(&hnode);
    assert_string_equal(last, "TK_HEURISTIC of 'other_k' (bad.c:6): \"0 one\" is not a list of integers ('one' is not "
                              "a decimal integer); ignored");
    tk_log_set(NULL, NULL);
    assert_null(tk_tune(g_ctx, other_k, 1));
    /* a tab separates as a space does */
    static const tk_tune_decl good = {TK_TUNE_DECL_VERSION, other_k, "n", "BLOCK\tITEMS", 1, tabbed, "ok.c", 7};
    static tk_tune_node good_node = {&good, NULL};
    tk_tune_register(&good_node);
    const int *cfg = tk_tune(g_ctx, other_k, 1);
    assert_non_null(cfg);
    assert_int_equal(cfg[0], 64);
    assert_int_equal(cfg[1], 2);
    tk_tune_unregister(&good_node);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bucket__is_the_smallest_power_of_two_at_least_the_key),
        cmocka_unit_test(tunespec__reads_names_and_integers_and_says_what_is_wrong),
        cmocka_unit_test(tune__default_without_a_table),
        cmocka_unit_test(tune__table_selects_per_bucket_and_tk_wrap_follows),
        cmocka_unit_test(tune__bad_tables_and_undeclared_kernels_are_refused),
        cmocka_unit_test(tune__malformed_declarations_are_not_registered),
        cmocka_unit_test(tune__declarations_of_another_record_version_are_not_registered),
        cmocka_unit_test(tune__heuristic_picks_the_variant_of_the_chosen_configuration),
        cmocka_unit_test(tune__eager_declarations_are_refused_with_the_grammar_s_reason),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
