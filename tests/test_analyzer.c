/* Tests of the analyzer: each folder of tests/fixtures/analyzer/ exercises one way an op reaches
 * its kernels; the tests run the analyzer on it and check its JSON map against hand-written sets. */
#define _XOPEN_SOURCE 700

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <tk/error.h>

#include "analyzer.h"

/* CMake passes the absolute folders; the defaults suit a run from the repository root. */
#ifndef TK_FIXTURES_DIR
#define TK_FIXTURES_DIR "tests/fixtures/analyzer"
#endif
#ifndef TK_TEST_INCLUDE_DIR
#define TK_TEST_INCLUDE_DIR "include"
#endif

#define MAX_NAMES 64
#define MAX_TMPDIRS 4



/* ---- temporary folders, removed after each test (pass or fail) ---- */

static char g_tmpdirs[MAX_TMPDIRS][PATH_MAX];
static int g_n_tmpdirs;

static const char *make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    assert_true(g_n_tmpdirs < MAX_TMPDIRS);
    char *dir = g_tmpdirs[g_n_tmpdirs];
    snprintf(dir, PATH_MAX, "%s/tkexport-test-XXXXXX", base);
    if (!mkdtemp(dir))
        fail_msg("mkdtemp '%s' failed", dir);
    g_n_tmpdirs++;
    return dir;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int remove_tmpdirs(void **state) {
    (void)state;
    for (int i = 0; i < g_n_tmpdirs; i++)
        nftw(g_tmpdirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_n_tmpdirs = 0;
    return 0;
}

static void join_path(char *buf, const char *dir, const char *name) {
    int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    assert_true(n > 0 && n < PATH_MAX);
}

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot write '%s'", path);
    size_t written = size ? fwrite(data, 1, size, f) : 0;
    int closed = fclose(f);
    if (written != size || closed != 0)
        fail_msg("cannot write '%s'", path);
}

static void write_text_file(const char *dir, const char *name, const char *text) {
    char path[PATH_MAX];
    join_path(path, dir, name);
    write_file(path, text, strlen(text));
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- running the analyzer ---- */

static tk_analyze_options test_options(void) {
    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.no_cache = 1;
    opts.jobs = 2;
    return opts;
}

/* Runs the analyzer and returns its JSON text (the caller frees it); STATS may be NULL. */
static char *analyze_text(const tk_analyze_options *opts, const char *const *paths, size_t n_paths,
                          tk_analysis_stats *stats) {
    tk_analysis *a = NULL;
    tk_assert_ok(tk_analysis_run(&a, opts, paths, n_paths));
    assert_non_null(a);
    if (stats)
        tk_analysis_get_stats(a, stats);
    char *text = tk_analysis_to_json(a);
    tk_analysis_free(a);
    assert_non_null(text);
    return text;
}

static cJSON *get_field(const cJSON *obj, const char *key) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        fail_msg("JSON object has no '%s'", key);
    return v;
}

static cJSON *get_array(const cJSON *obj, const char *key) {
    cJSON *v = get_field(obj, key);
    if (!cJSON_IsArray(v))
        fail_msg("'%s' is not an array", key);
    return v;
}

static const char *get_string(const cJSON *obj, const char *key) {
    cJSON *v = get_field(obj, key);
    if (!cJSON_IsString(v))
        fail_msg("'%s' is not a string", key);
    return v->valuestring;
}

static int get_int(const cJSON *obj, const char *key) {
    cJSON *v = get_field(obj, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valueint;
}

/* Parses the analyzer's JSON and checks the envelope: version 1 and the three arrays. */
static cJSON *parse_map(const char *text) {
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        fail_msg("analyzer output is not JSON, near: %.80s", at ? at : text);
    }
    assert_int_equal(get_int(root, "version"), 1);
    get_array(root, "ops");
    get_array(root, "kernels");
    get_array(root, "diagnostics");
    return root;
}

static cJSON *analyze_paths(const tk_analyze_options *opts, const char *const *paths, size_t n_paths,
                            tk_analysis_stats *stats) {
    char *text = analyze_text(opts, paths, n_paths, stats);
    cJSON *root = parse_map(text);
    free(text);
    return root;
}

/* The map of one fixture folder (relative to the fixtures folder, the current directory). */
static cJSON *analyze_dir(const char *fixture) {
    tk_analyze_options opts = test_options();
    return analyze_paths(&opts, &fixture, 1, NULL);
}

static void print_diagnostics(const cJSON *root) {
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "diagnostics")) {
        char *s = cJSON_PrintUnformatted(d);
        print_error("  diagnostic: %s\n", s ? s : "?");
        free(s);
    }
}

/* The first diagnostic whose file ends with FILE_SUFFIX and, when not NULL, has RULE. */
static cJSON *find_diag(const cJSON *root, const char *file_suffix, const char *rule) {
    cJSON *d;
    cJSON_ArrayForEach(d, get_array(root, "diagnostics")) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(d, "file");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "rule");
        if (!cJSON_IsString(file) || !ends_with(file->valuestring, file_suffix))
            continue;
        if (rule && (!cJSON_IsString(r) || strcmp(r->valuestring, rule) != 0))
            continue;
        return d;
    }
    return NULL;
}

static void assert_no_parse_errors_at(const char *file, int line, const cJSON *root) {
    if (find_diag(root, "", "tk-parse-error")) {
        print_diagnostics(root);
        tk_fail_at(file, line, "unexpected tk-parse-error diagnostics");
    }
}
#define assert_no_parse_errors(root) assert_no_parse_errors_at(__FILE__, __LINE__, root)

/* A fixture that must parse cleanly: a parse error would make any missing kernel confusing. */
static cJSON *analyze_fixture(const char *fixture) {
    cJSON *root = analyze_dir(fixture);
    assert_no_parse_errors(root);
    return root;
}

/* The op named NAME; fails the test, listing the ops found, when there is none. */
static cJSON *find_op_at(const char *file, int line, cJSON *root, const char *name) {
    cJSON *op;
    cJSON_ArrayForEach(op, get_array(root, "ops")) {
        if (strcmp(get_string(op, "name"), name) == 0)
            return op;
    }
    cJSON_ArrayForEach(op, get_array(root, "ops")) {
        print_error("  op found: %s\n", get_string(op, "name"));
    }
    print_diagnostics(root);
    tk_fail_at(file, line, "no op '%s' in the analyzer's map", name);
    return NULL;
}
#define find_op(root, name) find_op_at(__FILE__, __LINE__, root, name)

/* The element of ARRAY whose "name" is NAME, or NULL. */
static cJSON *find_named(const cJSON *array, const char *name) {
    cJSON *e;
    cJSON_ArrayForEach(e, array) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return e;
    }
    return NULL;
}

static cJSON *find_kernel_at(const char *file, int line, cJSON *root, const char *name) {
    cJSON *k = find_named(get_array(root, "kernels"), name);
    if (!k)
        tk_fail_at(file, line, "no kernel '%s' in the map's kernel list", name);
    return k;
}
#define find_kernel(root, name) find_kernel_at(__FILE__, __LINE__, root, name)

static cJSON *op_kernel_at(const char *file, int line, cJSON *op, const char *name) {
    cJSON *k = find_named(get_array(op, "kernels"), name);
    if (!k)
        tk_fail_at(file, line, "op '%s' has no kernel '%s'", get_string(op, "name"), name);
    return k;
}
#define op_kernel(op, name) op_kernel_at(__FILE__, __LINE__, op, name)

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts NAMES and joins them with commas into BUF. */
static void join_sorted(const char **names, size_t n, char *buf, size_t size) {
    qsort(names, n, sizeof *names, cmp_str);
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i ? "," : "", names[i]);
    }
}

/* Exact set equality of the op's kernel names with the comma-separated EXPECTED_CSV ("" for
 * none); also checks that the op's kernels come sorted by name, as the format promises. */
static void assert_kernels_at(const char *file, int line, cJSON *op, const char *expected_csv) {
    const char *actual[MAX_NAMES], *expected[MAX_NAMES];
    size_t n_actual = 0, n_expected = 0;
    char actual_csv[2048], expected_sorted[2048], copy[2048];

    const cJSON *k;
    const char *prev = NULL;
    cJSON_ArrayForEach(k, get_array(op, "kernels")) {
        assert_true(n_actual < MAX_NAMES);
        const char *name = get_string(k, "name");
        if (prev && strcmp(prev, name) >= 0)
            tk_fail_at(file, line, "op '%s': kernels not sorted by name ('%s' before '%s')",
                    get_string(op, "name"), prev, name);
        actual[n_actual++] = prev = name;
    }
    snprintf(copy, sizeof copy, "%s", expected_csv);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        assert_true(n_expected < MAX_NAMES);
        expected[n_expected++] = t;
    }
    join_sorted(actual, n_actual, actual_csv, sizeof actual_csv);
    join_sorted(expected, n_expected, expected_sorted, sizeof expected_sorted);
    if (strcmp(actual_csv, expected_sorted) != 0) {
        const cJSON *u;
        cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(op, "unresolved")) {
            char *s = cJSON_PrintUnformatted(u);
            print_error("  unresolved: %s\n", s ? s : "?");
            free(s);
        }
        tk_fail_at(file, line, "op '%s': kernels {%s}, expected {%s}", get_string(op, "name"), actual_csv,
                expected_sorted);
    }
}
#define assert_kernels(op, expected_csv) assert_kernels_at(__FILE__, __LINE__, op, expected_csv)

/* The op's kernel KERNEL was reached through the functions EXPECTED_CSV (op function first). */
static void assert_via_at(const char *file, int line, cJSON *op, const char *kernel,
                          const char *expected_csv) {
    char actual[1024] = "";
    const cJSON *f;
    cJSON_ArrayForEach(f, get_array(op_kernel_at(file, line, op, kernel), "via")) {
        assert_true(cJSON_IsString(f));
        size_t len = strlen(actual);
        snprintf(actual + len, sizeof actual - len, "%s%s", len ? "," : "", f->valuestring);
    }
    if (strcmp(actual, expected_csv) != 0)
        tk_fail_at(file, line, "op '%s', kernel '%s': via [%s], expected [%s]", get_string(op, "name"),
                kernel, actual, expected_csv);
}
#define assert_via(op, kernel, expected_csv) assert_via_at(__FILE__, __LINE__, op, kernel, expected_csv)

/* The kernel's parameters as "name=type|name=type" equal EXPECTED. */
static void assert_params_at(const char *file, int line, cJSON *kernel, const char *expected) {
    char actual[1024] = "";
    const cJSON *p;
    cJSON_ArrayForEach(p, get_array(kernel, "params")) {
        size_t len = strlen(actual);
        snprintf(actual + len, sizeof actual - len, "%s%s=%s", len ? "|" : "", get_string(p, "name"),
                 get_string(p, "type"));
    }
    if (strcmp(actual, expected) != 0)
        tk_fail_at(file, line, "kernel '%s': params '%s', expected '%s'", get_string(kernel, "name"), actual,
                expected);
}
#define assert_params(kernel, expected) assert_params_at(__FILE__, __LINE__, kernel, expected)

/* The op's unresolved entry whose reason starts with PREFIX, or NULL. */
static cJSON *find_unresolved(cJSON *op, const char *prefix) {
    cJSON *u;
    cJSON_ArrayForEach(u, get_array(op, "unresolved")) {
        if (strncmp(get_string(u, "reason"), prefix, strlen(prefix)) == 0)
            return u;
    }
    return NULL;
}

static void print_unresolved(cJSON *op) {
    const cJSON *u;
    cJSON_ArrayForEach(u, get_array(op, "unresolved")) {
        print_error("  unresolved reason: %s\n", get_string(u, "reason"));
    }
}

static cJSON *assert_unresolved_reason_prefix_at(const char *file, int line, cJSON *op,
                                                  const char *prefix) {
    cJSON *u = find_unresolved(op, prefix);
    if (!u) {
        print_unresolved(op);
        tk_fail_at(file, line, "op '%s': no unresolved launch with a reason starting '%s'",
                get_string(op, "name"), prefix);
    }
    return u;
}
#define assert_unresolved_reason_prefix(op, prefix)                                            \
    assert_unresolved_reason_prefix_at(__FILE__, __LINE__, op, prefix)

/* Every launch of the op was resolved: no unresolved entry at all. */
static void assert_no_unresolved_at(const char *file, int line, cJSON *op) {
    if (cJSON_GetArraySize(get_array(op, "unresolved")) != 0) {
        const cJSON *u;
        cJSON_ArrayForEach(u, get_array(op, "unresolved")) {
            print_error("  unresolved: %s:%d: %s\n", get_string(u, "file"), get_int(u, "line"),
                        get_string(u, "reason"));
        }
        tk_fail_at(file, line, "op '%s': unexpected unresolved launches", get_string(op, "name"));
    }
}
#define assert_no_unresolved(op) assert_no_unresolved_at(__FILE__, __LINE__, op)

/* The op launches exactly the kernels EXPECTED_CSV and nothing of it is left unresolved. */
static void assert_resolved_at(const char *file, int line, cJSON *op, const char *expected_csv) {
    assert_kernels_at(file, line, op, expected_csv);
    assert_no_unresolved_at(file, line, op);
}
#define assert_resolved(op, expected_csv) assert_resolved_at(__FILE__, __LINE__, op, expected_csv)

static void assert_same_text(const char *a, const char *b, const char *what) {
    if (strcmp(a, b) == 0)
        return;
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    size_t from = i > 60 ? i - 60 : 0;
    fail_msg("%s differ at byte %zu:\n  first:  ...%.120s\n  second: ...%.120s", what, i, a + from,
             b + from);
}

/* ---- resolution patterns, one fixture each ---- */

static void resolve__kernel_through_direct_wrap_of_handle(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("direct");
    cJSON *op = find_op(root, "test::direct");

    assert_string_equal(get_string(op, "function"), "direct_op");
    assert_string_equal(get_string(op, "file"), "direct/op.c");
    assert_int_equal(get_int(op, "line"), tk_line_of("direct/op.c", "TK_OP(direct_op,"));
    assert_string_equal(get_string(op, "schema"), "(Tensor x) -> Tensor");
    assert_kernels(op, "direct_k");
    cJSON *k = op_kernel(op, "direct_k");
    assert_string_equal(get_string(k, "file"), "direct/kernels.cu");
    assert_int_equal(get_int(k, "line"), tk_line_of("direct/kernels.cu", "TK_KERNEL void direct_k("));
    assert_via(op, "direct_k", "direct_op");
    assert_no_unresolved(op);

    cJSON_Delete(root);
}

static void resolve__kernel_through_local_assignment_unions_branches(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("local_assign");
    assert_resolved(find_op(root, "test::local_assign"), "la_k_small,la_k_large,la_k_half");
    cJSON_Delete(root);
}

static void resolve__kernel_through_conditional_expression_takes_both_arms(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("conditional");
    assert_resolved(find_op(root, "test::conditional"), "cond_k_f16,cond_k_f32");
    assert_resolved(find_op(root, "test::conditional_inline"), "cond_k_wide,cond_k_narrow");
    cJSON_Delete(root);
}

static void resolve__kernel_through_nested_helper_return_values(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("helper_return");
    cJSON *op = find_op(root, "test::helper_return");
    assert_resolved(op, "hr_k_bf16,hr_k_f32");
    /* The launch is in the op itself: the helpers only produce the handle. */
    assert_via(op, "hr_k_bf16", "hr_op");
    cJSON_Delete(root);
}

static void resolve__kernel_through_parameter_is_context_sensitive(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("param_context");
    cJSON *a = find_op(root, "test::param_a");
    cJSON *b = find_op(root, "test::param_b");
    assert_resolved(a, "pc_k_a");
    assert_resolved(b, "pc_k_b");
    assert_via(a, "pc_k_a", "pc_op_a,pc_launch");
    assert_via(b, "pc_k_b", "pc_op_b,pc_launch");
    cJSON_Delete(root);
}

static void resolve__kernel_through_struct_field_is_field_sensitive(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("struct_field");
    assert_resolved(find_op(root, "test::struct_fwd"), "sf_k_fwd");
    assert_resolved(find_op(root, "test::struct_bwd"), "sf_k_bwd");
    cJSON_Delete(root);
}

static void resolve__kernel_through_table_index_takes_every_entry(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("table");
    assert_resolved(find_op(root, "test::table"), "tb_k1,tb_k2,tb_k3");
    cJSON_Delete(root);
}

static void resolve__call_through_function_pointer_variable_takes_both_targets(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("fnptr");
    cJSON *op = find_op(root, "test::fnptr");
    assert_resolved(op, "fp_k_a,fp_k_b");
    assert_via(op, "fp_k_a", "fp_op,fp_launch_a");
    assert_via(op, "fp_k_b", "fp_op,fp_launch_b");
    cJSON_Delete(root);
}

static void resolve__file_scope_variable_unions_assignments_in_all_functions_and_files(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("globals");
    /* static: assigned in gl_init and gl_use_wide of op.c */
    assert_resolved(find_op(root, "test::global_static"), "gl_k1,gl_k2");
    /* extern: initialized in op.c, assigned in setup.c */
    assert_resolved(find_op(root, "test::global_extern"), "gl_k3,gl_k4");
    cJSON_Delete(root);
}

static void resolve__kernel_through_macros(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("macros");
    assert_resolved(find_op(root, "test::macro_name"), "mac_silu_k");
    assert_resolved(find_op(root, "test::macro_call"), "mac_gelu_k");
    cJSON_Delete(root);
}

static void resolve__op_calling_another_op_includes_its_kernels(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("op_to_op");
    assert_resolved(find_op(root, "test::other"), "o2o_k_other");

    cJSON *by_name = find_op(root, "test::via_tk_call");
    assert_resolved(by_name, "o2o_k_other,o2o_k_self");
    assert_via(by_name, "o2o_k_other", "o2o_via_call,o2o_other");

    cJSON *direct = find_op(root, "test::via_direct_call");
    assert_resolved(direct, "o2o_k_other");
    assert_via(direct, "o2o_k_other", "o2o_via_direct,o2o_other");
    cJSON_Delete(root);
}

static void resolve__helper_in_another_translation_unit(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("cross_tu");
    cJSON *op = find_op(root, "test::cross_tu");
    assert_resolved(op, "xtu_k_small,xtu_k_large");
    /* the helper's file is in the op's source closure */
    const char *expect[][2] = {{"xtu_op", "cross_tu/op.c"}, {"xtu_pick", "cross_tu/helper.c"}};
    cJSON *reached = cJSON_GetObjectItemCaseSensitive(op, "reached");
    assert_int_equal(cJSON_GetArraySize(reached), 2);
    for (int i = 0; i < 2; i++) {
        cJSON *r = cJSON_GetArrayItem(reached, i);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "name")->valuestring, expect[i][0]);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "file")->valuestring, expect[i][1]);
    }
    cJSON_Delete(root);
}

static void resolve__same_named_static_helpers_stay_in_their_file(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("cross_tu");
    assert_resolved(find_op(root, "test::static_a"), "sn_k_a");
    assert_resolved(find_op(root, "test::static_b"), "sn_k_b");
    cJSON_Delete(root);
}

static void resolve__chain_deeper_than_max_depth_is_unresolved_depth_limit(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("depth");
    cJSON *op = find_op(root, "test::depth");
    assert_kernels(op, "");
    assert_unresolved_reason_prefix(op, "depth limit");
    cJSON_Delete(root);
}

static void resolve__chain_within_raised_max_depth_is_found(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    opts.max_depth = 10;
    const char *paths[] = {"depth"};
    cJSON *root = analyze_paths(&opts, paths, 1, NULL);
    assert_no_parse_errors(root);
    cJSON *op = find_op(root, "test::depth");
    assert_resolved(op, "dp_k");
    assert_via(op, "dp_k", "dp_op,dp_h1,dp_h2,dp_h3,dp_h4,dp_h5,dp_h6,dp_h7");
    assert_null(find_unresolved(op, "depth limit"));
    cJSON_Delete(root);
}

/* A resolver that loops never returns: CTest's TIMEOUT on this suite turns that into a failure. */
static void resolve__recursion_terminates_and_finds_kernels(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("cycles");
    assert_kernels(find_op(root, "test::cycle_call"), "cy_k_call");
    assert_kernels(find_op(root, "test::cycle_return"), "cy_k_ret");
    assert_kernels(find_op(root, "test::cycle_param"), "cy_k_param");
    cJSON_Delete(root);
}

static void resolve__extern_function_without_definition_is_unknown_value(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("unresolved");
    cJSON *op = find_op(root, "test::unresolved_extern");
    assert_kernels(op, "");
    cJSON *u = assert_unresolved_reason_prefix(op, "unknown value");
    assert_string_equal(get_string(u, "file"), "unresolved/op.c");
    assert_int_equal(get_int(u, "line"), tk_line_of("unresolved/op.c", "ur_external_pick(tk_numel"));
    cJSON_Delete(root);
}

static void resolve__call_through_unbound_function_pointer_parameter_is_unresolved(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("unresolved");
    cJSON *op = find_op(root, "test::unresolved_indirect");
    assert_kernels(op, "");
    if (!find_unresolved(op, "indirect call") && !find_unresolved(op, "unknown value")) {
        print_unresolved(op);
        fail_msg("op 'test::unresolved_indirect': no unresolved launch with reason 'indirect call' or "
                 "'unknown value'");
    }
    cJSON_Delete(root);
}

/* ---- stores through memory, precision, recursion, no silent drop (issue 15) ---- */

static void resolve__kernel_stored_through_out_parameter_is_found(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("stores");
    /* *out = k in st_pick, and in st_pick_inner, which st_pick passes the out-parameter to */
    cJSON *op = find_op(root, "test::out_param");
    assert_resolved(op, "st_k_out,st_k_out2");
    /* the launch is in the op: the helpers only store the handle */
    assert_via(op, "st_k_out2", "st_out_op");
    /* through a local alias of the out-parameter */
    assert_resolved(find_op(root, "test::alias_store"), "st_k_alias");
    cJSON_Delete(root);
}

static void resolve__kernel_stored_in_struct_fields_at_run_time_is_found_field_sensitively(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("stores");
    /* .fwd is stored by a helper; .bwd, stored by the op, is not read */
    assert_resolved(find_op(root, "test::field_store"), "st_k_field");
    /* stored through a local pointer to the struct, read by a helper through its parameter */
    assert_resolved(find_op(root, "test::field_store_helper"), "st_k_field_bwd");
    /* memory from malloc holds only what is stored into it */
    assert_resolved(find_op(root, "test::heap_store"), "st_k_heap");
    /* a file-scope struct without initializer, stored by a function no op calls */
    assert_resolved(find_op(root, "test::global_field_store"), "st_k_global");
    cJSON_Delete(root);
}

static void resolve__array_element_stores_follow_constant_indices(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("stores");
    assert_resolved(find_op(root, "test::element_store_one"), "st_k_elem1");
    assert_resolved(find_op(root, "test::element_store"), "st_k_elem0,st_k_elem1");
    cJSON_Delete(root);
}

static void resolve__constant_index_into_a_constant_table_selects_one_entry(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("precision");
    assert_resolved(find_op(root, "test::const_index"), "pr_k2_fwd");
    assert_resolved(find_op(root, "test::enum_index"), "pr_k1_bwd");
    /* [PR_BF16] = {...} written first: the designator, not the position, is the index */
    assert_resolved(find_op(root, "test::designated_index"), "pr_k2_fwd");
    assert_resolved(find_op(root, "test::pointer_arith_index"), "pr_k1_fwd");
    /* a runtime index still takes every entry's field, and only that field */
    assert_resolved(find_op(root, "test::dynamic_index"), "pr_k0_fwd,pr_k1_fwd,pr_k2_fwd");
    cJSON_Delete(root);
}

static void resolve__gnu_elvis_and_statement_expressions_resolve(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("precision");
    assert_resolved(find_op(root, "test::gnu_elvis"), "pr_k_first,pr_k_fallback");
    assert_resolved(find_op(root, "test::statement_expression"), "pr_k_stmt,pr_k_stmt_other");
    cJSON_Delete(root);
}

static void resolve__kernel_passed_only_through_recursion_is_found(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("recursion");
    assert_resolved(find_op(root, "test::recursive_argument"), "rc_k_first,rc_k_last");
    assert_resolved(find_op(root, "test::recursive_return"), "rc_k_outer,rc_k_inner");
    cJSON_Delete(root);

    /* re-entering is bounded by the depth: beyond it, what recursion adds is a depth limit */
    tk_analyze_options opts = test_options();
    opts.max_depth = 1;
    const char *paths[] = {"recursion"};
    root = analyze_paths(&opts, paths, 1, NULL);
    cJSON *op = find_op(root, "test::recursive_argument");
    assert_kernels(op, "rc_k_first");
    cJSON *u = assert_unresolved_reason_prefix(op, "depth limit");
    assert_int_equal(get_int(u, "line"), tk_line_of("recursion/op.c", "return rc_run(ctx, n == 1"));
    cJSON_Delete(root);
}

/* Each launch of silent/ may miss kernels: the op carries an unresolved entry naming the pattern,
 * and lint reports it at the launch. */
static void silent__launches_that_may_be_incomplete_are_unresolved_and_lint_findings(void **state) {
    (void)state;
    static const struct {
        const char *op, *kernels, *needle, *reason;
    } expect[] = {
        {"test::never_assigned", "", "return tk_wrap(ctx, k,",
         "unknown value: local 'k' of 'sl_unassigned_op' is declared without a value and never assigned"},
        {"test::extern_out_param", "sl_k_known", "sl_maybe_override(&k);",
         "unknown value: 'k' is passed to 'sl_maybe_override', which has no definition in the scanned sources: "
         "what it stores there is not followed"},
        {"test::escaped_field", "", "sl_current = &ops;",
         "unknown value: the address of 'ops' is stored in a file-scope variable, and what is stored through it "
         "is not followed"},
        {"test::out_param_in_struct", "sl_k_known", "struct sl_request req = {&k};",
         "unknown value: the address of 'k' is stored in an initializer, and what is stored through it is not "
         "followed"},
        {"test::unset_function_field", "", "return ops.run(",
         "indirect call: the called function could not be resolved (unknown value: no value the analyzer follows "
         "is stored in 'ops.run' (a local of 'sl_unset_call_op'))"},
        {"test::null_kernel", "", "return tk_wrap(ctx, none,",
         "unknown value: no kernel handle reaches this tk_wrap (the kernel expression is NULL, or set only where "
         "the analyzer does not look)"},
    };
    tk_analyze_options opts = test_options();
    opts.lint = 1;
    const char *paths[] = {"silent"};
    cJSON *root = analyze_paths(&opts, paths, 1, NULL);
    assert_no_parse_errors(root);
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        cJSON *op = find_op(root, expect[i].op);
        assert_kernels(op, expect[i].kernels);
        int line = tk_line_of("silent/op.c", expect[i].needle);
        assert_int_equal(cJSON_GetArraySize(get_array(op, "unresolved")), 1);
        cJSON *u = cJSON_GetArrayItem(get_array(op, "unresolved"), 0);
        assert_string_equal(get_string(u, "reason"), expect[i].reason);
        assert_string_equal(get_string(u, "file"), "silent/op.c");
        assert_int_equal(get_int(u, "line"), line);
        /* and the lint finding, at the same place, with the op and the reason */
        char message[1024];
        snprintf(message, sizeof message, "cannot resolve the kernel launched by op '%s': %s", expect[i].op,
                 expect[i].reason);
        const cJSON *d, *hit = NULL;
        cJSON_ArrayForEach(d, get_array(root, "diagnostics")) {
            if (!strcmp(get_string(d, "message"), message))
                hit = d;
        }
        if (!hit) {
            print_diagnostics(root);
            fail_msg("no lint finding '%s'", message);
        }
        assert_string_equal(get_string(hit, "rule"), "tk-unresolved-kernel");
        assert_string_equal(get_string(hit, "file"), "silent/op.c");
        assert_int_equal(get_int(hit, "line"), line);
    }
    cJSON_Delete(root);
}

/* ---- inputs: compile_commands.json, CUDA headers, broken and hostile files ---- */

static void add_compdb_entry(cJSON *db, const char *directory, const char *file) {
    cJSON *e = cJSON_CreateObject();
    assert_non_null(e);
    cJSON_AddItemToArray(db, e);
    assert_non_null(cJSON_AddStringToObject(e, "directory", directory));
    assert_non_null(cJSON_AddStringToObject(e, "file", file));
}

static void compdb__defines_include_dirs_and_nvcc_commands_are_honoured(void **state) {
    (void)state;
    char cwd[PATH_MAX], dir[PATH_MAX], cuda_dir[PATH_MAX], op_c[PATH_MAX], k_cu[PATH_MAX];
    char command[4 * PATH_MAX], db_path[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    join_path(dir, cwd, "compdb");
    join_path(cuda_dir, dir, "cuda");
    join_path(op_c, dir, "src/op.c");
    join_path(k_cu, cuda_dir, "k.cu");

    cJSON *db = cJSON_CreateArray();
    assert_non_null(db);
    /* A C entry in "arguments" form; -Iinclude is relative to "directory". */
    add_compdb_entry(db, dir, op_c);
    const char *args[] = {"cc", "-std=c11", "-DUSE_FAST=1", "-Iinclude", ("-I" TK_TEST_INCLUDE_DIR),
                          "-c", "src/op.c", "-o", "op.o"};
    cJSON *arguments = cJSON_CreateStringArray(args, (int)(sizeof args / sizeof *args));
    assert_non_null(arguments);
    cJSON_AddItemToObject(cJSON_GetArrayItem(db, 0), "arguments", arguments);
    /* An nvcc entry in "command" form, with flags clang does not take as they are. */
    add_compdb_entry(db, cuda_dir, k_cu);
    snprintf(command, sizeof command,
             "/usr/local/cuda/bin/nvcc -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC "
             "--expt-relaxed-constexpr -I%s/include -I%s -c k.cu -o k.o",
             dir, TK_TEST_INCLUDE_DIR);
    assert_non_null(cJSON_AddStringToObject(cJSON_GetArrayItem(db, 1), "command", command));

    const char *tmp = make_tmpdir();
    char *db_text = cJSON_Print(db);
    cJSON_Delete(db);
    assert_non_null(db_text);
    join_path(db_path, tmp, "compile_commands.json");
    write_file(db_path, db_text, strlen(db_text));
    free(db_text);

    tk_analyze_options opts = test_options();
    opts.compdb_dir = tmp;
    tk_analysis_stats stats;
    cJSON *root = analyze_paths(&opts, NULL, 0, &stats);
    assert_no_parse_errors(root);
    assert_int_equal(stats.files, 2);

    cJSON *op = find_op(root, "test::compdb");
    assert_string_equal(get_string(op, "file"), "compdb/src/op.c");
    assert_kernels(op, "cdb_k_fast");
    assert_true(ends_with(get_string(op_kernel(op, "cdb_k_fast"), "file"), "compdb/cuda/k.cu"));
    assert_params(find_kernel(root, "cdb_k_fast"), "x=const float *|y=float *|n=int64_t");
    assert_params(find_kernel(root, "cdb_k_slow"), "x=const float *|y=float *|n=int64_t");
    cJSON_Delete(root);
}

/* ---- headers: helpers and kernels reached through includes, headers on their own ---- */

static const char *const HEADER_OPS[][2] = {{"test::hd_scale", "hd_k_scale"},
                                            {"test::hd_picked_a", "hd_k_a"},
                                            {"test::hd_picked_b", "hd_k_b"},
                                            {"test::hd_tiled", "hd_k_tile"}};

/* headers/'s exact maps: each op its kernels, nothing unresolved, no parse error. */
static void assert_header_maps(cJSON *root) {
    assert_no_parse_errors(root);
    for (size_t i = 0; i < sizeof HEADER_OPS / sizeof HEADER_OPS[0]; i++) {
        cJSON *op = find_op(root, HEADER_OPS[i][0]);
        assert_kernels(op, HEADER_OPS[i][1]);
        assert_no_unresolved(op);
    }
    assert_string_equal(get_string(find_kernel(root, "hd_k_tile"), "file"), "headers/include/hd_tile.cuh");
    assert_int_equal(get_int(find_kernel(root, "hd_k_tile"), "line"),
                     tk_line_of("headers/include/hd_tile.cuh", "TK_KERNEL void hd_k_tile"));
}

static void headers__helpers_in_headers_outside_the_paths_are_followed(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    const char *paths[] = {"headers/ops", "headers/kernels"};
    tk_analysis_stats stats;
    cJSON *root = analyze_paths(&opts, paths, 2, &stats);
    assert_header_maps(root);
    assert_int_equal(stats.files, 3);
    /* the helper's launch is in the header, where the user reads it */
    cJSON *k = op_kernel(find_op(root, "test::hd_picked_a"), "hd_k_a");
    assert_non_null(k);
    cJSON_Delete(root);
}

static void headers__compile_database_gives_the_maps_the_paths_give(void **state) {
    (void)state;
    char cwd[PATH_MAX], dir[PATH_MAX], file[PATH_MAX], db_path[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    join_path(dir, cwd, "headers");
    cJSON *db = cJSON_CreateArray();
    assert_non_null(db);
    const char *sources[] = {"ops/op_a.c", "ops/op_b.c", "kernels/k.cu"};
    for (int i = 0; i < 3; i++) {
        join_path(file, dir, sources[i]);
        add_compdb_entry(db, dir, file);
        int cu = ends_with(sources[i], ".cu");
        const char *args[] = {cu ? "nvcc" : "cc", "-I" TK_TEST_INCLUDE_DIR, "-c", sources[i], "-o", "x.o"};
        cJSON_AddItemToObject(cJSON_GetArrayItem(db, i), "arguments", cJSON_CreateStringArray(args, 6));
    }
    const char *tmp = make_tmpdir();
    char *db_text = cJSON_Print(db);
    cJSON_Delete(db);
    join_path(db_path, tmp, "compile_commands.json");
    write_file(db_path, db_text, strlen(db_text));
    free(db_text);

    tk_analyze_options opts = test_options();
    opts.compdb_dir = tmp;
    cJSON *by_db = analyze_paths(&opts, NULL, 0, NULL);
    assert_header_maps(by_db);
    tk_analyze_options plain = test_options();
    const char *paths[] = {"headers"};
    cJSON *by_paths = analyze_paths(&plain, paths, 1, NULL);
    assert_header_maps(by_paths);
    char *a = cJSON_Print(get_array(by_db, "ops")), *b = cJSON_Print(get_array(by_paths, "ops"));
    assert_same_text(a, b, "the ops of -p and of the paths");
    free(a);
    free(b);
    cJSON_Delete(by_db);
    cJSON_Delete(by_paths);
}

static void headers__headers_among_the_paths_parse_in_their_language(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    const char *paths[] = {"headers"};
    tk_analysis_stats stats;
    cJSON *root = analyze_paths(&opts, paths, 1, &stats);
    /* the included headers come with their includers (hd_pick.h alone would stop at its #error);
     * the four no analyzed file includes are parsed on their own: as CUDA, C++ and C by what
     * their code says, and hd_host.h as C++, the language of the C++ file that includes it */
    assert_header_maps(root);
    assert_int_equal(stats.files, 7);
    assert_int_equal(stats.parse_errors, 0);
    cJSON_Delete(root);
}

static void headers__an_error_in_a_header_is_reported_once_naming_an_includer(void **state) {
    (void)state;
    cJSON *root = analyze_dir("header_errors");
    int n = 0;
    cJSON *d;
    cJSON_ArrayForEach(d, get_array(root, "diagnostics")) {
        assert_string_equal(get_string(d, "rule"), "tk-parse-error");
        assert_string_equal(get_string(d, "file"), "header_errors/bad.h");
        assert_int_equal(get_int(d, "line"), tk_line_of("header_errors/bad.h", "he_broken"));
        assert_string_equal(get_string(d, "message"), "expected expression (in a header included from header_errors/a.c)");
        n++;
    }
    assert_int_equal(n, 1);
    cJSON_Delete(root);
}

static void headers__cub_from_cuda_13_cccl_parses_as_under_nvcc(void **state) {
    (void)state;
    const char *cuda = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    char cub[PATH_MAX];
    snprintf(cub, sizeof cub, "%s/include/cccl/cub/cub.cuh", cuda);
    if (access(cub, R_OK) != 0) {
        print_message("no %s: the CUDA 13 toolkit is not installed here\n", cub);
        skip();
    }
    cJSON *root = analyze_dir("cub");
    assert_no_parse_errors(root);
    assert_int_equal(cJSON_GetArraySize(get_array(root, "diagnostics")), 0);
    assert_kernels(find_op(root, "test::cub_rowsum"), "cub_k_rowsum");
    cJSON_Delete(root);
}

/* C++ host code: tk_wrap through function templates, a template picking its kernel by a
 * non-type parameter (each specialization is its template), a template with no body named as
 * written. */
static void resolve__function_templates_in_cuda_host_code(void **state) {
    (void)state;
    cJSON *root = analyze_dir("templates");
    assert_no_parse_errors(root);
    cJSON *op = find_op(root, "test::tp");
    assert_resolved(op, "tp_k");
    assert_via(op, "tp_k", "tp_op,tp_launch");
    assert_resolved(find_op(root, "test::tp_picked"), "tp_k,tp_k_wide");
    cJSON *missing = find_op(root, "test::tp_missing");
    assert_kernels(missing, "");
    assert_unresolved_reason_prefix(missing, "unknown value: return value of 'tp_missing', which has no definition");
    cJSON_Delete(root);
}

static void kernels__params_list_names_and_types(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("kernel_params");
    cJSON *axpy = find_kernel(root, "pr_axpy");
    assert_string_equal(get_string(axpy, "file"), "kernel_params/k.cu");
    assert_int_equal(get_int(axpy, "line"), tk_line_of("kernel_params/k.cu", "TK_KERNEL void pr_axpy("));
    assert_params(axpy, "x=const float *|y=float *|alpha=float|n=int64_t");
    assert_params(find_kernel(root, "pr_fill"), "out=int32_t *|value=int32_t|n=uint32_t");
    /* Only TK_KERNEL definitions are kernels: not a plain __global__, not a __device__ helper. */
    assert_null(find_named(get_array(root, "kernels"), "pr_plain"));
    assert_null(find_named(get_array(root, "kernels"), "pr_twice"));
    cJSON_Delete(root);
}

static void kernels__cuda_half_and_bfloat16_params_parse_cleanly(void **state) {
    (void)state;
    cJSON *root = analyze_fixture("cuda_headers");
    assert_params(find_kernel(root, "ch_scale_f16"), "x=const __half *|y=__half *|s=float|n=int64_t");
    assert_params(find_kernel(root, "ch_scale_bf16"),
                  "x=const __nv_bfloat16 *|y=__nv_bfloat16 *|s=float|n=int64_t");
    cJSON *op = find_op(root, "test::cuda_headers");
    assert_kernels(op, "ch_scale_f16");
    assert_string_equal(get_string(op_kernel(op, "ch_scale_f16"), "file"), "cuda_headers/k.cu");
    cJSON_Delete(root);
}

static void diagnostics__broken_file_is_reported_and_other_files_resolve(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    const char *paths[] = {"broken"};
    tk_analysis_stats stats;
    cJSON *root = analyze_paths(&opts, paths, 1, &stats);

    assert_kernels(find_op(root, "test::beside_broken_a"), "brk_k_a");
    assert_kernels(find_op(root, "test::beside_broken_b"), "brk_k_b");

    cJSON *d = find_diag(root, "broken/broken.c", "tk-parse-error");
    if (!d) {
        print_diagnostics(root);
        fail_msg("no tk-parse-error diagnostic for broken/broken.c");
    }
    assert_string_equal(get_string(d, "file"), "broken/broken.c");
    assert_string_equal(get_string(d, "severity"), "error");
    assert_int_equal(get_int(d, "line"), tk_line_of("broken/broken.c", "int brk_broken("));
    assert_true(get_int(d, "column") >= 1);
    assert_true(strlen(get_string(d, "message")) > 0);
    assert_null(find_diag(root, "good_a.c", "tk-parse-error"));
    assert_null(find_diag(root, "good_b.c", "tk-parse-error"));
    assert_int_equal(stats.parse_errors, 1);
    cJSON_Delete(root);
}

/* An empty file, binary garbage with NUL bytes, 5000 nested parentheses and a 5000-term sum in
 * an op body (made here), beside robustness/'s good op and its macro-recursive file. */
static void robustness__hostile_inputs_do_not_crash(void **state) {
    (void)state;
    const char *tmp = make_tmpdir();
    char path[PATH_MAX];

    join_path(path, tmp, "empty.c");
    write_file(path, "", 0);

    unsigned char bytes[4096];
    uint32_t x = 0x9e3779b9u; /* fixed seed: the same garbage every run */
    for (size_t i = 0; i < sizeof bytes; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes[i] = i % 7 == 0 ? 0 : (unsigned char)x;
    }
    join_path(path, tmp, "binary.c");
    write_file(path, bytes, sizeof bytes);

    enum { DEPTH = 5000 };
    static char text[8 * DEPTH + 512];
    char *p = text;
    p += sprintf(p, "int rb_deep(void) {\n    return ");
    memset(p, '(', DEPTH);
    p += DEPTH;
    *p++ = '1';
    memset(p, ')', DEPTH);
    p += DEPTH;
    sprintf(p, ";\n}\n");
    join_path(path, tmp, "nested_parens.c");
    write_file(path, text, strlen(text));

    p = text;
    p += sprintf(p, "#include <tk/op.h>\nTK_KERNEL_DECL(rb_k_sum);\n"
                    "TK_OP(rb_sum_op, \"test::robust_sum\", \"(Tensor x) -> Tensor\") {\n"
                    "    int64_t n = 1");
    for (int i = 1; i < DEPTH; i++)
        p += sprintf(p, " + 1");
    sprintf(p, ";\n    return tk_wrap(ctx, rb_k_sum, TK_DIM3(n), TK_DIM3(256), in[0], out[0]);\n}\n");
    join_path(path, tmp, "long_sum.c");
    write_file(path, text, strlen(text));

    tk_analyze_options opts = test_options();
    const char *paths[] = {"robustness", tmp};
    cJSON *root = analyze_paths(&opts, paths, 2, NULL);

    assert_kernels(find_op(root, "test::robust"), "rb_k");
    assert_kernels(find_op(root, "test::robust_sum"), "rb_k_sum");
    if (!find_diag(root, "/binary.c", NULL) || !find_diag(root, "macro_rec.c", NULL)) {
        print_diagnostics(root);
        fail_msg("expected diagnostics for binary.c and macro_rec.c");
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, get_array(root, "diagnostics")) {
        if (ends_with(get_string(d, "file"), "/empty.c") &&
            strcmp(get_string(d, "severity"), "error") == 0)
            fail_msg("an empty file is not an error: %s", get_string(d, "message"));
    }
    cJSON_Delete(root);
}

/* ---- the summary cache ---- */

/* A two-file tree in a fresh temporary folder: src/op.c (its kernel named in src/pick.h) and
 * src/other.c, with an empty cache folder beside it. */
struct cache_tree {
    char src[PATH_MAX];
    char op_c[PATH_MAX];
    char other_c[PATH_MAX];
    char cache[PATH_MAX];
    const char *paths[2];
    tk_analyze_options opts;
};

static void write_pick_h(const struct cache_tree *t, const char *kernel) {
    char text[512];
    snprintf(text, sizeof text,
             "/* Cache fixture: the kernel src/op.c launches. */\n"
             "#include <tk/op.h>\n"
             "TK_KERNEL_DECL(cache_k_a);\n"
             "TK_KERNEL_DECL(cache_k_b_v2);\n"
             "#define CACHE_KERNEL %s\n",
             kernel);
    write_text_file(t->src, "pick.h", text);
}

static void write_other_c(const struct cache_tree *t, const char *kernel) {
    char text[512];
    snprintf(text, sizeof text,
             "/* Cache fixture: an op independent of pick.h. */\n"
             "#include <tk/op.h>\n"
             "TK_KERNEL_DECL(%s);\n"
             "TK_OP(cache_other_op, \"test::cache_other\", \"(Tensor x) -> Tensor\") {\n"
             "    return tk_wrap(ctx, %s, TK_DIM3(1), TK_DIM3(256), in[0], out[0]);\n"
             "}\n",
             kernel, kernel);
    write_text_file(t->src, "other.c", text);
}

static void make_cache_tree(struct cache_tree *t) {
    const char *tmp = make_tmpdir();
    join_path(t->src, tmp, "src");
    join_path(t->cache, tmp, "cache"); /* not created: the analyzer makes it */
    assert_int_equal(mkdir(t->src, 0755), 0);
    join_path(t->op_c, t->src, "op.c");
    join_path(t->other_c, t->src, "other.c");
    write_text_file(t->src, "op.c",
                    "/* Cache fixture: an op whose kernel comes from a non-system header. */\n"
                    "#include <tk/op.h>\n"
                    "#include \"pick.h\"\n"
                    "TK_OP(cache_op, \"test::cache\", \"(Tensor x) -> Tensor\") {\n"
                    "    return tk_wrap(ctx, CACHE_KERNEL, TK_DIM3(1), TK_DIM3(256), in[0], out[0]);\n"
                    "}\n");
    write_pick_h(t, "cache_k_a");
    write_other_c(t, "cache_k_other");
    t->paths[0] = t->op_c;
    t->paths[1] = t->other_c;
    t->opts = test_options();
    t->opts.no_cache = 0;
    t->opts.cache_dir = t->cache;
}

/* Runs the analyzer on the tree; the JSON text goes to *TEXT when TEXT is not NULL. */
static cJSON *run_cache_tree(const struct cache_tree *t, tk_analysis_stats *stats, char **text) {
    char *json = analyze_text(&t->opts, t->paths, 2, stats);
    cJSON *root = parse_map(json);
    if (text)
        *text = json;
    else
        free(json);
    assert_no_parse_errors(root);
    return root;
}

static void cache__second_run_reads_every_summary_from_cache(void **state) {
    (void)state;
    struct cache_tree t;
    make_cache_tree(&t);
    tk_analysis_stats first, second;
    char *text1 = NULL, *text2 = NULL;

    cJSON *root1 = run_cache_tree(&t, &first, &text1);
    assert_int_equal(first.files, 2);
    assert_int_equal(first.parsed, 2);
    assert_int_equal(first.cached, 0);
    assert_kernels(find_op(root1, "test::cache"), "cache_k_a");

    cJSON *root2 = run_cache_tree(&t, &second, &text2);
    assert_int_equal(second.files, 2);
    assert_int_equal(second.cached, second.files);
    assert_int_equal(second.parsed, 0);
    assert_same_text(text1, text2, "JSON of the parsing run and of the cached run");

    free(text1);
    free(text2);
    cJSON_Delete(root1);
    cJSON_Delete(root2);
}

/* Runs the analyzer on one file with extra arguments and a cache; its op's kernels. */
static void expect_cached_run(tk_analyze_options *opts, const char *file, size_t parsed, const char *kernels) {
    tk_analysis_stats stats;
    cJSON *root = analyze_paths(opts, &file, 1, &stats);
    assert_no_parse_errors(root);
    assert_int_equal(stats.parsed, parsed);
    assert_int_equal(stats.cached, 1 - parsed);
    assert_kernels(find_op(root, "test::shadow"), kernels);
    cJSON_Delete(root);
}

static void cache__a_shadowing_header_or_a_new_has_include_answer_is_seen(void **state) {
    (void)state;
    const char *tmp = make_tmpdir();
    char src[PATH_MAX], inc1[PATH_MAX], inc2[PATH_MAX], cache[PATH_MAX], op_c[PATH_MAX];
    char arg1[PATH_MAX + 2], arg2[PATH_MAX + 2];
    join_path(src, tmp, "src");
    join_path(inc1, tmp, "inc1");
    join_path(inc2, tmp, "inc2");
    join_path(cache, tmp, "cache");
    join_path(op_c, src, "op.c");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(inc1, 0755), 0);
    assert_int_equal(mkdir(inc2, 0755), 0);
    static const char decls[] = "#include <tk/op.h>\n"
                                "TK_KERNEL_DECL(sh_k_one);\nTK_KERNEL_DECL(sh_k_two);\nTK_KERNEL_DECL(sh_k_three);\n";
    char text[512];
    snprintf(text, sizeof text, "%s#define SH_KERNEL sh_k_two\n", decls);
    write_text_file(inc2, "pick.h", text);
    write_text_file(src, "op.c",
                    "/* Cache fixture: pick.h is found in the second -I folder; extra.h is optional. */\n"
                    "#include <pick.h>\n"
                    "#if __has_include(\"extra.h\")\n"
                    "#include \"extra.h\"\n"
                    "#endif\n"
                    "#ifndef SH_EXTRA\n"
                    "#define SH_EXTRA SH_KERNEL\n"
                    "#endif\n"
                    "TK_OP(sh_op, \"test::shadow\", \"(Tensor x) -> Tensor\") {\n"
                    "    return tk_wrap(ctx, SH_EXTRA, TK_DIM3(1), TK_DIM3(256), in[0], out[0]);\n"
                    "}\n");
    snprintf(arg1, sizeof arg1, "-I%s", inc1);
    snprintf(arg2, sizeof arg2, "-I%s", inc2);
    const char *extra[] = {arg1, arg2};
    tk_analyze_options opts = test_options();
    opts.no_cache = 0;
    opts.cache_dir = cache;
    opts.extra_args = extra;
    opts.n_extra_args = 2;

    expect_cached_run(&opts, op_c, 1, "sh_k_two");
    expect_cached_run(&opts, op_c, 0, "sh_k_two"); /* nothing changed: from the cache */
    /* a pick.h earlier on the -I path now answers the same #include */
    snprintf(text, sizeof text, "%s#define SH_KERNEL sh_k_one\n", decls);
    write_text_file(inc1, "pick.h", text);
    expect_cached_run(&opts, op_c, 1, "sh_k_one");
    expect_cached_run(&opts, op_c, 0, "sh_k_one");
    /* a file that now satisfies __has_include */
    write_text_file(src, "extra.h", "#define SH_EXTRA sh_k_three\n");
    expect_cached_run(&opts, op_c, 1, "sh_k_three");
    expect_cached_run(&opts, op_c, 0, "sh_k_three");
}

static void cache__edited_file_alone_is_parsed_again(void **state) {
    (void)state;
    struct cache_tree t;
    make_cache_tree(&t);
    tk_analysis_stats stats;

    cJSON_Delete(run_cache_tree(&t, NULL, NULL));
    write_other_c(&t, "cache_k_other_v2"); /* a new size too, should the cache look at sizes */
    cJSON *root = run_cache_tree(&t, &stats, NULL);
    assert_int_equal(stats.files, 2);
    assert_int_equal(stats.parsed, 1);
    assert_int_equal(stats.cached, 1);
    assert_kernels(find_op(root, "test::cache_other"), "cache_k_other_v2");
    assert_kernels(find_op(root, "test::cache"), "cache_k_a");
    cJSON_Delete(root);
}

static void cache__edited_header_invalidates_the_files_including_it(void **state) {
    (void)state;
    struct cache_tree t;
    make_cache_tree(&t);
    tk_analysis_stats stats;

    cJSON_Delete(run_cache_tree(&t, NULL, NULL));
    write_pick_h(&t, "cache_k_b_v2");
    cJSON *root = run_cache_tree(&t, &stats, NULL);
    assert_true(stats.parsed >= 1);
    assert_int_equal(stats.parsed + stats.cached, stats.files);
    assert_kernels(find_op(root, "test::cache"), "cache_k_b_v2");
    assert_kernels(find_op(root, "test::cache_other"), "cache_k_other");
    cJSON_Delete(root);
}

/* ---- output ---- */

static void assert_sorted_by_name(const cJSON *array, const char *what) {
    const char *prev = NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, array) {
        const char *name = get_string(e, "name");
        if (prev && strcmp(prev, name) > 0)
            fail_msg("%s not sorted by name: '%s' before '%s'", what, prev, name);
        prev = name;
    }
}

/* Every fixture at once (broken files included), with different numbers of parser threads. */
static void determinism__two_runs_produce_identical_sorted_json(void **state) {
    (void)state;
    const char *paths[] = {"."};
    tk_analyze_options opts = test_options();
    opts.jobs = 1;
    char *text1 = analyze_text(&opts, paths, 1, NULL);
    opts.jobs = 4;
    char *text2 = analyze_text(&opts, paths, 1, NULL);
    assert_same_text(text1, text2, "JSON of two runs (1 and 4 jobs)");

    cJSON *root = parse_map(text1);
    assert_sorted_by_name(get_array(root, "ops"), "ops");
    assert_sorted_by_name(get_array(root, "kernels"), "kernels");
    cJSON_Delete(root);
    free(text1);
    free(text2);
}

static char *read_stream(FILE *f) {
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    buf[size] = '\0';
    return buf;
}

static void output__text_lists_ops_kernels_and_verbose_call_paths(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    const char *paths[] = {"param_context"};
    tk_analysis *a = NULL;
    tk_assert_ok(tk_analysis_run(&a, &opts, paths, 1));

    FILE *f = tmpfile();
    assert_non_null(f);
    tk_assert_ok(tk_analysis_write_text(a, f, 0));
    char *plain = read_stream(f);
    fclose(f);
    f = tmpfile();
    assert_non_null(f);
    tk_assert_ok(tk_analysis_write_text(a, f, 1));
    char *verbose = read_stream(f);
    fclose(f);
    tk_analysis_free(a);

    assert_non_null(strstr(plain, "test::param_a"));
    assert_non_null(strstr(plain, "pc_k_a"));
    assert_non_null(strstr(plain, "test::param_b"));
    assert_non_null(strstr(plain, "pc_k_b"));
    assert_non_null(strstr(verbose, "pc_launch"));
    free(plain);
    free(verbose);
}

/* ---- the API's errors ---- */

static void api__unreadable_path_fails_with_null_out(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    const char *paths[] = {"/nonexistent/tkexport-test"};
    tk_analysis *a = (tk_analysis *)&opts; /* must come back NULL */
    int rc = tk_analysis_run(&a, &opts, paths, 1);
    assert_true(rc < 0);
    assert_null(a);
    assert_non_null(strstr(tk_error_last(), "/nonexistent/tkexport-test"));
}

static void api__unknown_options_version_is_rejected(void **state) {
    (void)state;
    tk_analyze_options opts = test_options();
    opts.version = TK_ANALYZE_OPTIONS_VERSION + 100;
    const char *paths[] = {"direct"};
    tk_analysis *a = NULL;
    int rc = tk_analysis_run(&a, &opts, paths, 1);
    assert_true(rc < 0);
    assert_null(a);
    assert_true(strlen(tk_error_last()) > 0);
}

#define TK_TEST(fn) cmocka_unit_test_teardown(fn, remove_tmpdirs)

int main(void) {
    /* Fixture paths, and the relative paths the JSON holds, are relative to the fixtures folder. */
    if (chdir(TK_FIXTURES_DIR) != 0) {
        fprintf(stderr, "test_analyzer: cannot enter '%s'\n", TK_FIXTURES_DIR);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        TK_TEST(resolve__kernel_through_direct_wrap_of_handle),
        TK_TEST(resolve__kernel_through_local_assignment_unions_branches),
        TK_TEST(resolve__kernel_through_conditional_expression_takes_both_arms),
        TK_TEST(resolve__kernel_through_nested_helper_return_values),
        TK_TEST(resolve__kernel_through_parameter_is_context_sensitive),
        TK_TEST(resolve__kernel_through_struct_field_is_field_sensitive),
        TK_TEST(resolve__kernel_through_table_index_takes_every_entry),
        TK_TEST(resolve__call_through_function_pointer_variable_takes_both_targets),
        TK_TEST(resolve__file_scope_variable_unions_assignments_in_all_functions_and_files),
        TK_TEST(resolve__kernel_through_macros),
        TK_TEST(resolve__op_calling_another_op_includes_its_kernels),
        TK_TEST(resolve__helper_in_another_translation_unit),
        TK_TEST(resolve__same_named_static_helpers_stay_in_their_file),
        TK_TEST(resolve__chain_deeper_than_max_depth_is_unresolved_depth_limit),
        TK_TEST(resolve__chain_within_raised_max_depth_is_found),
        TK_TEST(resolve__recursion_terminates_and_finds_kernels),
        TK_TEST(resolve__extern_function_without_definition_is_unknown_value),
        TK_TEST(resolve__call_through_unbound_function_pointer_parameter_is_unresolved),
        TK_TEST(resolve__kernel_stored_through_out_parameter_is_found),
        TK_TEST(resolve__kernel_stored_in_struct_fields_at_run_time_is_found_field_sensitively),
        TK_TEST(resolve__array_element_stores_follow_constant_indices),
        TK_TEST(resolve__constant_index_into_a_constant_table_selects_one_entry),
        TK_TEST(resolve__gnu_elvis_and_statement_expressions_resolve),
        TK_TEST(resolve__kernel_passed_only_through_recursion_is_found),
        TK_TEST(silent__launches_that_may_be_incomplete_are_unresolved_and_lint_findings),
        TK_TEST(compdb__defines_include_dirs_and_nvcc_commands_are_honoured),
        TK_TEST(headers__helpers_in_headers_outside_the_paths_are_followed),
        TK_TEST(headers__compile_database_gives_the_maps_the_paths_give),
        TK_TEST(headers__headers_among_the_paths_parse_in_their_language),
        TK_TEST(headers__an_error_in_a_header_is_reported_once_naming_an_includer),
        TK_TEST(headers__cub_from_cuda_13_cccl_parses_as_under_nvcc),
        TK_TEST(resolve__function_templates_in_cuda_host_code),
        TK_TEST(kernels__params_list_names_and_types),
        TK_TEST(kernels__cuda_half_and_bfloat16_params_parse_cleanly),
        TK_TEST(diagnostics__broken_file_is_reported_and_other_files_resolve),
        TK_TEST(robustness__hostile_inputs_do_not_crash),
        TK_TEST(cache__second_run_reads_every_summary_from_cache),
        TK_TEST(cache__edited_file_alone_is_parsed_again),
        TK_TEST(cache__a_shadowing_header_or_a_new_has_include_answer_is_seen),
        TK_TEST(cache__edited_header_invalidates_the_files_including_it),
        TK_TEST(determinism__two_runs_produce_identical_sorted_json),
        TK_TEST(output__text_lists_ops_kernels_and_verbose_call_paths),
        TK_TEST(api__unreadable_path_fails_with_null_out),
        TK_TEST(api__unknown_options_version_is_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
