/* Tests of lint: --checks lists, NOLINT comments and the text and SARIF renderings on documents
 * built by hand, then the analyzer's lint checks end to end on tests/fixtures/lint (one defect
 * per rule in defects/, their near misses in clean/) and on examples/. */
#define _XOPEN_SOURCE 700

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <ctype.h>
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
#include "lint.h"

/* CMake passes the absolute folders; the defaults suit a run from the repository root. */
#ifndef TK_LINT_FIXTURES_DIR
#define TK_LINT_FIXTURES_DIR "tests/fixtures/lint"
#endif
#ifndef TK_EXAMPLES_DIR
#define TK_EXAMPLES_DIR "examples"
#endif

#define MAX_TMPDIRS 4



/* ---- temporary folders entered for a test, left and removed after it ---- */

static char g_fixtures_cwd[PATH_MAX];
static char g_tmpdirs[MAX_TMPDIRS][PATH_MAX];
static int g_n_tmpdirs;

static const char *make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    assert_true(g_n_tmpdirs < MAX_TMPDIRS);
    char *dir = g_tmpdirs[g_n_tmpdirs];
    snprintf(dir, PATH_MAX, "%s/tkexport-lint-XXXXXX", base);
    if (!mkdtemp(dir))
        fail_msg("mkdtemp '%s' failed", dir);
    g_n_tmpdirs++;
    return dir;
}

/* Makes a fresh folder the current directory, so documents can name files relatively. */
static void enter_tmpdir(void) {
    const char *dir = make_tmpdir();
    if (chdir(dir) != 0)
        fail_msg("cannot enter '%s'", dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    (void)state;
    if (chdir(g_fixtures_cwd) != 0)
        return -1;
    for (int i = 0; i < g_n_tmpdirs; i++)
        nftw(g_tmpdirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_n_tmpdirs = 0;
    return 0;
}

static void write_text_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot write '%s'", path);
    size_t n = strlen(text);
    size_t written = n ? fwrite(text, 1, n, f) : 0;
    if (fclose(f) != 0 || written != n)
        fail_msg("cannot write '%s'", path);
}

/* ---- documents built by hand ---- */

static cJSON *new_doc(void) {
    cJSON *doc = cJSON_CreateObject();
    assert_non_null(doc);
    cJSON_AddNumberToObject(doc, "version", 1);
    cJSON_AddArrayToObject(doc, "ops");
    cJSON_AddArrayToObject(doc, "kernels");
    cJSON_AddArrayToObject(doc, "diagnostics");
    return doc;
}

/* Appends a diagnostic; file NULL makes a null "file", ecol 0 leaves out end_line/end_column
 * (as tk-parse-error diagnostics of older analyzers have them). */
static void add_diag(cJSON *doc, const char *file, int line, int col, int ecol, const char *severity,
                     const char *rule, const char *message) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "file", file ? cJSON_CreateString(file) : cJSON_CreateNull());
    cJSON_AddNumberToObject(d, "line", line);
    cJSON_AddNumberToObject(d, "column", col);
    if (ecol) {
        cJSON_AddNumberToObject(d, "end_line", line);
        cJSON_AddNumberToObject(d, "end_column", ecol);
    }
    cJSON_AddStringToObject(d, "severity", severity);
    cJSON_AddStringToObject(d, "rule", rule);
    cJSON_AddStringToObject(d, "message", message);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(doc, "diagnostics"), d);
}

static cJSON *diags_of(const cJSON *doc) {
    cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "diagnostics");
    if (!cJSON_IsArray(d))
        fail_msg("the document has no diagnostics array");
    return d;
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        fail_msg("'%s' is not a string", key);
    return v->valuestring;
}

static int int_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valueint;
}

static void print_diags(const cJSON *doc) {
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        char *s = cJSON_PrintUnformatted(d);
        print_error("  diagnostic: %s\n", s ? s : "?");
        free(s);
    }
}

/* The rules of doc's diagnostics, in order, joined with commas. */
static void rules_csv(const cJSON *doc, char *buf, size_t size) {
    buf[0] = '\0';
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        size_t n = strlen(buf);
        snprintf(buf + n, size - n, "%s%s", n ? "," : "", str_of(d, "rule"));
    }
}

static void assert_rules_at(const char *file, int line, const cJSON *doc, const char *expected) {
    char got[2048];
    rules_csv(doc, got, sizeof got);
    if (strcmp(got, expected) != 0) {
        print_diags(doc);
        tk_fail_at(file, line, "diagnostics' rules are '%s', expected '%s'", got, expected);
    }
}
#define assert_rules(doc, expected) assert_rules_at(__FILE__, __LINE__, doc, expected)

/* The text rendering of doc. */
static char *render_text(const cJSON *doc, int color) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    tk_assert_ok(tk_lint_write_text(doc, m, color));
    assert_int_equal(fclose(m), 0);
    return buf;
}

static char *render_summary(const cJSON *doc) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    tk_assert_ok(tk_lint_write_summary(doc, m));
    assert_int_equal(fclose(m), 0);
    return buf;
}

/* Compares two texts line by line, naming the first line that differs. */
static void assert_same_lines_at(const char *file, int line, const char *got, const char *expected) {
    int n = 1;
    const char *g = got, *e = expected;
    while (*g || *e) {
        size_t gl = strcspn(g, "\n"), el = strcspn(e, "\n");
        if (gl != el || memcmp(g, e, gl) != 0 || (g[gl] == '\n') != (e[el] == '\n'))
            tk_fail_at(file, line, "line %d differs:\n  got:      '%.*s'\n  expected: '%.*s'\n--- got:\n%s--- expected:\n%s",
                    n, (int)gl, g, (int)el, e, got, expected);
        g += gl + (g[gl] == '\n');
        e += el + (e[el] == '\n');
        n++;
    }
}
#define assert_same_lines(got, expected) assert_same_lines_at(__FILE__, __LINE__, got, expected)

/* ---- the rule table ---- */

static void rules__table_lists_every_rule_with_its_default_severity_and_texts(void **state) {
    (void)state;
    static const char *const expected[][2] = {
        {"tk-raw-launch", "error"},         {"tk-unresolved-kernel", "warning"},
        {"tk-depth-limit", "warning"},      {"tk-undefined-kernel", "error"},
        {"tk-arg-mismatch", "error"},       {"tk-undeclared-mutation", "warning"},
        {"tk-duplicate-op", "error"},       {"tk-bad-op-name", "error"},
        {"tk-bad-schema", "error"},         {"tk-bad-autotune", "error"},
        {"tk-parse-error", "error"},
    };
    assert_int_equal(tk_lint_nrules, sizeof(expected) / sizeof(expected[0]));
    for (size_t i = 0; i < tk_lint_nrules; i++) {
        const tk_lint_rule *r = &tk_lint_rules[i];
        assert_string_equal(r->id, expected[i][0]);
        assert_string_equal(r->severity, expected[i][1]);
        assert_ptr_equal(tk_lint_rule_find(r->id), r);
        assert_true(r->name[0] && isupper((unsigned char)r->name[0]));
        assert_true(strlen(r->short_desc) > 10 && r->short_desc[strlen(r->short_desc) - 1] != '.');
        assert_true(strlen(r->full_desc) > 40 && r->full_desc[strlen(r->full_desc) - 1] == '.');
        assert_true(strlen(r->help) > 80 && strstr(r->help, "NOLINT") != NULL);
    }
    assert_null(tk_lint_rule_find("tk-no-such-rule"));
    assert_null(tk_lint_rule_find(NULL));
}

/* ---- --checks ---- */

static void checks__null_and_empty_lists_enable_every_rule(void **state) {
    (void)state;
    for (size_t i = 0; i < tk_lint_nrules; i++) {
        assert_true(tk_lint_rule_enabled(NULL, tk_lint_rules[i].id));
        assert_true(tk_lint_rule_enabled("", tk_lint_rules[i].id));
        assert_true(tk_lint_rule_enabled(" , ,", tk_lint_rules[i].id));
    }
    tk_assert_ok(tk_lint_checks_validate(NULL));
    tk_assert_ok(tk_lint_checks_validate(""));
    tk_assert_ok(tk_lint_checks_validate("tk-raw-launch,"));
}

static void checks__minus_star_then_a_rule_keeps_only_that_rule(void **state) {
    (void)state;
    const char *checks = "-*,tk-raw-launch";
    tk_assert_ok(tk_lint_checks_validate(checks));
    for (size_t i = 0; i < tk_lint_nrules; i++)
        assert_int_equal(tk_lint_rule_enabled(checks, tk_lint_rules[i].id),
                         strcmp(tk_lint_rules[i].id, "tk-raw-launch") == 0);
}

static void checks__minus_a_rule_drops_only_that_rule(void **state) {
    (void)state;
    const char *checks = "-tk-depth-limit";
    tk_assert_ok(tk_lint_checks_validate(checks));
    for (size_t i = 0; i < tk_lint_nrules; i++)
        assert_int_equal(tk_lint_rule_enabled(checks, tk_lint_rules[i].id),
                         strcmp(tk_lint_rules[i].id, "tk-depth-limit") != 0);
}

static void checks__globs_apply_left_to_right_and_later_entries_win(void **state) {
    (void)state;
    const char *kernels = "-*,tk-*-kernel";
    tk_assert_ok(tk_lint_checks_validate(kernels));
    assert_true(tk_lint_rule_enabled(kernels, "tk-unresolved-kernel"));
    assert_true(tk_lint_rule_enabled(kernels, "tk-undefined-kernel"));
    assert_false(tk_lint_rule_enabled(kernels, "tk-raw-launch"));

    assert_false(tk_lint_rule_enabled("tk-*,-tk-*", "tk-bad-schema"));
    assert_true(tk_lint_rule_enabled("-tk-*,tk-*", "tk-bad-schema"));
    assert_true(tk_lint_rule_enabled("-tk-bad-schema,tk-bad-schema", "tk-bad-schema"));
    assert_false(tk_lint_rule_enabled("tk-bad-schema,-tk-bad-schema", "tk-bad-schema"));
    /* blanks around entries, as in a list split over lines of a config file */
    assert_true(tk_lint_rule_enabled(" -* ,\ttk-parse-error ", "tk-parse-error"));
    assert_false(tk_lint_rule_enabled(" -* ,\ttk-parse-error ", "tk-bad-op-name"));
    /* '*' matches any run, also an empty one and one across '-' */
    assert_true(tk_lint_rule_enabled("-*,*mutation", "tk-undeclared-mutation"));
    assert_true(tk_lint_rule_enabled("-*,tk-*-*-*", "tk-bad-op-name"));
    assert_false(tk_lint_rule_enabled("-*,tk-*-*-*", "tk-raw-launch"));
    tk_assert_ok(tk_lint_checks_validate("-*,tk-*,-tk-parse-error, *mutation"));
}

static void checks__unknown_rule_or_malformed_entry_is_einval_naming_it(void **state) {
    (void)state;
    assert_int_equal(tk_lint_checks_validate("-*,tk-foo"), TK_EINVAL);
    assert_string_equal(tk_error_last(), "unknown check 'tk-foo' in --checks (expected rule ids such as "
                                         "tk-raw-launch, globs, or -prefixed ones)");
    assert_int_equal(tk_lint_checks_validate("-tk-raw-lunch"), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "'tk-raw-lunch'"));
    assert_int_equal(tk_lint_checks_validate("tk-raw launch"), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "malformed check 'tk-raw launch'"));
    assert_int_equal(tk_lint_checks_validate("tk-raw-launch,-"), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "'-'"));
    assert_int_equal(tk_lint_checks_validate("tk-raw-launch;tk-bad-schema"), TK_EINVAL);

    /* the filter refuses the list and leaves the document as it was */
    cJSON *doc = new_doc();
    add_diag(doc, "nowhere.c", 1, 1, 2, "error", "tk-raw-launch", "m");
    assert_int_equal(tk_lint_filter(doc, "-*,tk-foo"), TK_EINVAL);
    assert_rules(doc, "tk-raw-launch");
    cJSON_Delete(doc);
}

/* ---- filtering ---- */

static void filter__checks_remove_the_diagnostics_of_disabled_rules(void **state) {
    (void)state;
    cJSON *doc = new_doc();
    add_diag(doc, "nowhere/a.c", 1, 1, 2, "error", "tk-raw-launch", "a");
    add_diag(doc, "nowhere/a.c", 2, 1, 2, "warning", "tk-depth-limit", "b");
    add_diag(doc, "nowhere/b.c", 3, 1, 2, "warning", "tk-unresolved-kernel", "c");
    add_diag(doc, "nowhere/b.c", 4, 1, 2, "error", "tk-undefined-kernel", "d");
    cJSON *copy = cJSON_Duplicate(doc, 1);

    tk_assert_ok(tk_lint_filter(doc, "-tk-depth-limit"));
    assert_rules(doc, "tk-raw-launch,tk-unresolved-kernel,tk-undefined-kernel");
    tk_assert_ok(tk_lint_filter(doc, "-*,tk-*-kernel"));
    assert_rules(doc, "tk-unresolved-kernel,tk-undefined-kernel");

    tk_assert_ok(tk_lint_filter(copy, NULL));
    assert_rules(copy, "tk-raw-launch,tk-depth-limit,tk-unresolved-kernel,tk-undefined-kernel");
    tk_assert_ok(tk_lint_filter(copy, "-*"));
    assert_rules(copy, "");
    /* the rest of the document is left alone */
    assert_non_null(cJSON_GetObjectItemCaseSensitive(copy, "ops"));
    assert_int_equal(int_of(copy, "version"), 1);
    cJSON_Delete(copy);
    cJSON_Delete(doc);

    assert_int_equal(tk_lint_filter(NULL, NULL), TK_EINVAL);
    cJSON *arr = cJSON_CreateArray();
    assert_int_equal(tk_lint_filter(arr, NULL), TK_EINVAL);
    cJSON_Delete(arr);
}

static void filter__nolint_on_the_line_suppresses_every_rule_or_the_listed_ones(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("op.c",
                    "int a; // NOLINT\n"                                  /* 1: every rule */
                    "int b; // NOLINT(tk-raw-launch)\n"                   /* 2: that rule */
                    "int c; // NOLINT(tk-arg-mismatch)\n"                 /* 3: another rule */
                    "int d; /* NOLINT(tk-bad-schema, tk-raw-launch) */\n" /* 4: a list */
                    "int e; // NOLINT(tk-*)\n"                            /* 5: a glob */
                    "int f; // NOLINTBEGIN NOLINTFOO\n"                   /* 6: other words */
                    "int g; // NOLINT()\n"                                /* 7: an empty list */
                    "int h; // NOLINTNEXTLINE(tk-raw-launch)\n"           /* 8: not this line, */
                    "int i;\n"                                            /* 9: but this one */
                    "int j; // NOLINT(tk-raw-launch\n");                  /* 10: unclosed: all */
    cJSON *doc = new_doc();
    for (int line = 1; line <= 10; line++)
        add_diag(doc, "op.c", line, 5, 6, "error", "tk-raw-launch", "m");
    tk_assert_ok(tk_lint_filter(doc, NULL));
    char lines[64] = "";
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        snprintf(lines + strlen(lines), sizeof lines - strlen(lines), "%s%d", lines[0] ? "," : "", int_of(d, "line"));
    }
    assert_string_equal(lines, "3,6,7,8");
    cJSON_Delete(doc);
}

static void filter__nolintnextline_suppresses_only_the_line_below(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("op.cu",
                    "// NOLINTNEXTLINE(tk-raw-launch)\n" /* 1 */
                    "k<<<1, 1>>>(x);\n"                  /* 2: suppressed */
                    "k<<<1, 1>>>(x);\n"                  /* 3: two lines below: kept */
                    "// NOLINT(tk-raw-launch)\n"         /* 4 */
                    "k<<<1, 1>>>(x);\n"                  /* 5: NOLINT above: kept */
                    "// NOLINTNEXTLINE\n"                /* 6 */
                    "k<<<1, 1>>>(x);\n"                  /* 7: every rule: suppressed */
                    "// NOLINTNEXTLINE(tk-depth-limit)\n"/* 8 */
                    "k<<<1, 1>>>(x);\n");                /* 9: another rule: kept */
    cJSON *doc = new_doc();
    for (int line = 2; line <= 9; line++)
        if (line != 4 && line != 6 && line != 8)
            add_diag(doc, "op.cu", line, 1, 2, "error", "tk-raw-launch", "m");
    add_diag(doc, "op.cu", 9, 1, 2, "warning", "tk-depth-limit", "m");
    tk_assert_ok(tk_lint_filter(doc, NULL));
    char got[128] = "";
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d:%s", got[0] ? "," : "", int_of(d, "line"),
                 str_of(d, "rule"));
    }
    assert_string_equal(got, "3:tk-raw-launch,5:tk-raw-launch,9:tk-raw-launch");
    cJSON_Delete(doc);
}

static void filter__missing_file_or_line_suppresses_nothing(void **state) {
    (void)state;
    enter_tmpdir();
    tk_error_clear();
    write_text_file("short.c", "int a; // NOLINT\n");
    cJSON *doc = new_doc();
    add_diag(doc, "gone.c", 1, 1, 2, "error", "tk-raw-launch", "m");
    add_diag(doc, "short.c", 7, 1, 2, "error", "tk-raw-launch", "m");
    add_diag(doc, NULL, 1, 1, 2, "error", "tk-parse-error", "m");
    tk_assert_ok(tk_lint_filter(doc, NULL));
    assert_rules(doc, "tk-raw-launch,tk-raw-launch,tk-parse-error");
    assert_string_equal(tk_error_last(), "");
    cJSON_Delete(doc);
}

static void filter__editor_buffer_replaces_the_file_on_disk(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("a.c", "int a;\n");
    write_text_file("b.c", "int b; // NOLINT\n");
    const char *a_buf = "int a; // NOLINT(tk-bad-schema)\n";
    const char *b_buf = "int b;\n";
    char cwd[PATH_MAX], b_abs[PATH_MAX + 8];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(b_abs, sizeof b_abs, "%s/b.c", cwd);
    tk_unsaved_file unsaved[] = {{"a.c", a_buf, strlen(a_buf)}, {b_abs, b_buf, strlen(b_buf)}};
    cJSON *doc = new_doc();
    add_diag(doc, "a.c", 1, 1, 2, "error", "tk-bad-schema", "m");
    add_diag(doc, "b.c", 1, 1, 2, "error", "tk-bad-schema", "m");
    cJSON *disk = cJSON_Duplicate(doc, 1);
    tk_assert_ok(tk_lint_filter_unsaved(doc, NULL, unsaved, 2));
    assert_int_equal(cJSON_GetArraySize(diags_of(doc)), 1);
    assert_string_equal(str_of(cJSON_GetArrayItem(diags_of(doc), 0), "file"), "b.c");
    tk_assert_ok(tk_lint_filter(disk, NULL));
    assert_int_equal(cJSON_GetArraySize(diags_of(disk)), 1);
    assert_string_equal(str_of(cJSON_GetArrayItem(diags_of(disk), 0), "file"), "a.c");
    cJSON_Delete(disk);
    cJSON_Delete(doc);
}

/* ---- text ---- */

static void text__location_severity_message_rule_source_line_and_caret(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("op.c", "#include <tk/op.h>\n"
                            "\n"
                            "int f(void) { return call(a, b); }\n");
    cJSON *doc = new_doc();
    add_diag(doc, "op.c", 1, 1, 0, "warning", "tk-depth-limit", "stopped after 5 hops");
    add_diag(doc, "op.c", 3, 22, 32, "error", "tk-raw-launch", "kernel 'k' launched with <<<>>>");
    char *text = render_text(doc, 0);
    assert_same_lines(text, "op.c:1:1: warning: stopped after 5 hops [tk-depth-limit]\n"
                            "#include <tk/op.h>\n"
                            "^\n"
                            "op.c:3:22: error: kernel 'k' launched with <<<>>> [tk-raw-launch]\n"
                            "int f(void) { return call(a, b); }\n"
                            "                     ^~~~~~~~~~\n");
    free(text);
    cJSON_Delete(doc);
}

static void text__caret_keeps_tabs_and_marks_characters_not_bytes(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("k.cu", "\t\tk<<<1, 1>>>(x);\r\n"
                            "s = \"\xc3\xa9\xc3\xa9\"; y = 1;\n"
                            "long_call(a,\n"
                            "          b);\n");
    cJSON *doc = new_doc();
    add_diag(doc, "k.cu", 1, 3, 18, "error", "tk-raw-launch", "raw");
    add_diag(doc, "k.cu", 2, 5, 11, "error", "tk-bad-schema", "utf8 range");
    add_diag(doc, "k.cu", 2, 13, 14, "error", "tk-bad-schema", "after utf8");
    cJSON *multi = cJSON_CreateObject();
    cJSON_AddStringToObject(multi, "file", "k.cu");
    cJSON_AddNumberToObject(multi, "line", 3);
    cJSON_AddNumberToObject(multi, "column", 1);
    cJSON_AddNumberToObject(multi, "end_line", 4);
    cJSON_AddNumberToObject(multi, "end_column", 13);
    cJSON_AddStringToObject(multi, "severity", "error");
    cJSON_AddStringToObject(multi, "rule", "tk-arg-mismatch");
    cJSON_AddStringToObject(multi, "message", "two lines");
    cJSON_AddItemToArray(diags_of(doc), multi);
    add_diag(doc, "k.cu", 4, 40, 41, "error", "tk-arg-mismatch", "past the end");
    char *text = render_text(doc, 0);
    assert_same_lines(text, "k.cu:1:3: error: raw [tk-raw-launch]\n"
                            "\t\tk<<<1, 1>>>(x);\n"
                            "\t\t^~~~~~~~~~~~~~~\n"
                            "k.cu:2:5: error: utf8 range [tk-bad-schema]\n"
                            "s = \"\xc3\xa9\xc3\xa9\"; y = 1;\n"
                            "    ^~~~\n"
                            "k.cu:2:13: error: after utf8 [tk-bad-schema]\n"
                            "s = \"\xc3\xa9\xc3\xa9\"; y = 1;\n"
                            "          ^\n"
                            "k.cu:3:1: error: two lines [tk-arg-mismatch]\n"
                            "long_call(a,\n"
                            "^~~~~~~~~~~~\n"
                            "k.cu:4:40: error: past the end [tk-arg-mismatch]\n"
                            "          b);\n"
                            "             ^\n");
    free(text);
    cJSON_Delete(doc);
}

static void text__unreadable_source_gives_the_first_line_only(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("one.c", "int x;\n");
    cJSON *doc = new_doc();
    add_diag(doc, "gone.c", 4, 2, 3, "error", "tk-duplicate-op", "defined twice");
    add_diag(doc, "one.c", 9, 1, 2, "error", "tk-bad-op-name", "beyond the last line");
    add_diag(doc, NULL, 1, 1, 0, "error", "tk-parse-error", "no file");
    char *text = render_text(doc, 0);
    assert_same_lines(text, "gone.c:4:2: error: defined twice [tk-duplicate-op]\n"
                            "one.c:9:1: error: beyond the last line [tk-bad-op-name]\n"
                            "tkexport: error: no file [tk-parse-error]\n");
    free(text);
    cJSON_Delete(doc);
}

static void text__color_uses_clang_escape_sequences(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("op.c", "x = k(1);\n");
    cJSON *doc = new_doc();
    add_diag(doc, "op.c", 1, 5, 9, "error", "tk-raw-launch", "raw");
    add_diag(doc, "op.c", 1, 1, 2, "warning", "tk-depth-limit", "deep");
    char *text = render_text(doc, 1);
    assert_same_lines(text, "\033[1mop.c:1:5: \033[0;1;31merror: \033[0m\033[1mraw [tk-raw-launch]\033[0m\n"
                            "x = k(1);\n"
                            "\033[0;1;32m    ^~~~\033[0m\n"
                            "\033[1mop.c:1:1: \033[0;1;35mwarning: \033[0m\033[1mdeep [tk-depth-limit]\033[0m\n"
                            "x = k(1);\n"
                            "\033[0;1;32m^\033[0m\n");
    free(text);
    char *plain = render_text(doc, 0);
    assert_null(strchr(plain, '\033'));
    free(plain);
    cJSON_Delete(doc);
}

static void text__summary_counts_as_clang_does(void **state) {
    (void)state;
    cJSON *doc = new_doc();
    char *s = render_summary(doc);
    assert_string_equal(s, "");
    free(s);
    add_diag(doc, "a.c", 1, 1, 2, "error", "tk-raw-launch", "m");
    s = render_summary(doc);
    assert_string_equal(s, "1 error generated.\n");
    free(s);
    add_diag(doc, "a.c", 2, 1, 2, "error", "tk-raw-launch", "m");
    s = render_summary(doc);
    assert_string_equal(s, "2 errors generated.\n");
    free(s);
    add_diag(doc, "a.c", 3, 1, 2, "warning", "tk-depth-limit", "m");
    s = render_summary(doc);
    assert_string_equal(s, "1 warning and 2 errors generated.\n");
    free(s);
    cJSON *w = new_doc();
    add_diag(w, "a.c", 3, 1, 2, "warning", "tk-depth-limit", "m");
    add_diag(w, "a.c", 4, 1, 2, "warning", "tk-depth-limit", "m");
    s = render_summary(w);
    assert_string_equal(s, "2 warnings generated.\n");
    free(s);
    cJSON_Delete(w);
    cJSON_Delete(doc);
}

static void exit_status__errors_fail_and_warnings_fail_only_with_werror(void **state) {
    (void)state;
    cJSON *doc = new_doc();
    int e = -1, w = -1;
    tk_lint_count(doc, &e, &w);
    assert_int_equal(e, 0);
    assert_int_equal(w, 0);
    assert_int_equal(tk_lint_exit_status(doc, 0), 0);
    assert_int_equal(tk_lint_exit_status(doc, 1), 0);
    add_diag(doc, "a.c", 1, 1, 2, "warning", "tk-depth-limit", "m");
    assert_int_equal(tk_lint_exit_status(doc, 0), 0);
    assert_int_equal(tk_lint_exit_status(doc, 1), 1);
    add_diag(doc, "a.c", 2, 1, 2, "error", "tk-raw-launch", "m");
    assert_int_equal(tk_lint_exit_status(doc, 0), 1);
    tk_lint_count(doc, &e, &w);
    assert_int_equal(e, 1);
    assert_int_equal(w, 1);
    cJSON_Delete(doc);
}

/* ---- SARIF ---- */

static cJSON *sarif_of(const cJSON *doc) {
    cJSON *log = NULL;
    tk_assert_ok(tk_lint_to_sarif(&log, doc));
    assert_non_null(log);
    /* what goes to the file must survive printing and parsing */
    char *text = cJSON_Print(log);
    assert_non_null(text);
    cJSON *back = cJSON_Parse(text);
    free(text);
    assert_non_null(back);
    cJSON_Delete(log);
    return back;
}

static cJSON *path_get(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *cur = (cJSON *)o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) {
        if (isdigit((unsigned char)tok[0]))
            cur = cJSON_GetArrayItem(cur, atoi(tok));
        else
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        if (!cur)
            fail_msg("SARIF has no '%s' (at '%s')", path, tok);
    }
    return cur;
}

static const char *path_str(const cJSON *o, const char *path) {
    cJSON *v = path_get(o, path);
    if (!cJSON_IsString(v))
        fail_msg("SARIF '%s' is not a string", path);
    return v->valuestring;
}

static int path_int(const cJSON *o, const char *path) {
    cJSON *v = path_get(o, path);
    if (!cJSON_IsNumber(v))
        fail_msg("SARIF '%s' is not a number", path);
    return v->valueint;
}

static int is_hex64(const char *s) {
    if (strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
            return 0;
    return 1;
}

static void sarif__log_has_the_structure_github_code_scanning_reads(void **state) {
    (void)state;
    enter_tmpdir();
    assert_int_equal(mkdir("src", 0755), 0);
    write_text_file("src/op.c", "int x;\nint f(void) { return k(1); }\n");
    cJSON *doc = new_doc();
    add_diag(doc, "src/op.c", 2, 22, 26, "error", "tk-arg-mismatch", "argument 1 is an int");
    add_diag(doc, "src/op.c", 1, 1, 0, "warning", "tk-unresolved-kernel", "unknown value");
    cJSON *log = sarif_of(doc);

    assert_string_equal(path_str(log, "$schema"), "https://json.schemastore.org/sarif-2.1.0.json");
    assert_string_equal(path_str(log, "version"), "2.1.0");
    assert_int_equal(cJSON_GetArraySize(path_get(log, "runs")), 1);
    const cJSON *run = path_get(log, "runs.0");
    assert_string_equal(path_str(run, "tool.driver.name"), "tkexport");
    assert_true(strlen(path_str(run, "tool.driver.version")) > 0);
    assert_string_equal(path_str(run, "tool.driver.informationUri"),
                        "https://github.com/tkexport/tkexport/blob/main/docs/lint.md");

    const cJSON *rules = path_get(run, "tool.driver.rules");
    assert_int_equal(cJSON_GetArraySize(rules), (int)tk_lint_nrules);
    for (size_t i = 0; i < tk_lint_nrules; i++) {
        const cJSON *r = cJSON_GetArrayItem(rules, (int)i);
        const tk_lint_rule *t = &tk_lint_rules[i];
        assert_string_equal(path_str(r, "id"), t->id);
        assert_string_equal(path_str(r, "name"), t->name);
        assert_string_equal(path_str(r, "shortDescription.text"), t->short_desc);
        assert_string_equal(path_str(r, "fullDescription.text"), t->full_desc);
        assert_string_equal(path_str(r, "defaultConfiguration.level"), t->severity);
        assert_string_equal(path_str(r, "help.text"), t->help);
        char uri[256];
        snprintf(uri, sizeof uri, "https://github.com/tkexport/tkexport/blob/main/docs/lint.md#%s", t->id);
        assert_string_equal(path_str(r, "helpUri"), uri);
    }

    const cJSON *results = path_get(run, "results");
    assert_int_equal(cJSON_GetArraySize(results), 2);
    const cJSON *r0 = cJSON_GetArrayItem(results, 0), *r1 = cJSON_GetArrayItem(results, 1);
    assert_string_equal(path_str(r0, "ruleId"), "tk-arg-mismatch");
    assert_int_equal(path_int(r0, "ruleIndex"), (int)(tk_lint_rule_find("tk-arg-mismatch") - tk_lint_rules));
    assert_string_equal(path_str(r0, "level"), "error");
    assert_string_equal(path_str(r0, "message.text"), "argument 1 is an int");
    assert_int_equal(cJSON_GetArraySize(path_get(r0, "locations")), 1);
    assert_string_equal(path_str(r0, "locations.0.physicalLocation.artifactLocation.uri"), "src/op.c");
    assert_string_equal(path_str(r0, "locations.0.physicalLocation.artifactLocation.uriBaseId"), "%SRCROOT%");
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.startLine"), 2);
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.startColumn"), 22);
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.endLine"), 2);
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.endColumn"), 26);
    assert_true(is_hex64(path_str(r0, "partialFingerprints.primaryLocationLineHash")));

    assert_string_equal(path_str(r1, "ruleId"), "tk-unresolved-kernel");
    assert_int_equal(path_int(r1, "ruleIndex"), 1);
    assert_string_equal(path_str(r1, "level"), "warning");
    /* a missing end is one character after the start */
    assert_int_equal(path_int(r1, "locations.0.physicalLocation.region.endColumn"), 2);
    assert_string_not_equal(path_str(r0, "partialFingerprints.primaryLocationLineHash"),
                            path_str(r1, "partialFingerprints.primaryLocationLineHash"));
    cJSON_Delete(log);
    cJSON_Delete(doc);

    /* no finding: still a valid log with the rules and an empty results list */
    cJSON *empty = new_doc();
    log = sarif_of(empty);
    assert_int_equal(cJSON_GetArraySize(path_get(log, "runs.0.results")), 0);
    assert_int_equal(cJSON_GetArraySize(path_get(log, "runs.0.tool.driver.rules")), (int)tk_lint_nrules);
    cJSON_Delete(log);
    cJSON_Delete(empty);
}

static const char *fingerprint(const cJSON *log, int i) {
    char path[64];
    snprintf(path, sizeof path, "runs.0.results.%d.partialFingerprints.primaryLocationLineHash", i);
    return path_str(log, path);
}

static void sarif__fingerprints_follow_line_text_not_line_numbers(void **state) {
    (void)state;
    enter_tmpdir();
    write_text_file("a.c", "int x;\n  return k(1);  \ncall();\ncall();\n");
    cJSON *doc = new_doc();
    add_diag(doc, "a.c", 2, 10, 11, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 3, 1, 5, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 4, 1, 5, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 4, 1, 5, "warning", "tk-depth-limit", "m");
    cJSON *before = sarif_of(doc);
    cJSON *again = sarif_of(doc);
    for (int i = 0; i < 4; i++)
        assert_string_equal(fingerprint(before, i), fingerprint(again, i));
    /* identical lines, and the same line under another rule, stay distinct */
    assert_string_not_equal(fingerprint(before, 1), fingerprint(before, 2));
    assert_string_not_equal(fingerprint(before, 2), fingerprint(before, 3));
    cJSON_Delete(doc);

    /* two lines added above and the indentation changed: the same fingerprints */
    write_text_file("a.c", "// one\n// two\nint x;\n\treturn k(1);\ncall();\ncall();\n");
    doc = new_doc();
    add_diag(doc, "a.c", 4, 9, 10, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 5, 1, 5, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 6, 1, 5, "error", "tk-raw-launch", "m");
    add_diag(doc, "a.c", 6, 1, 5, "warning", "tk-depth-limit", "m");
    cJSON *after = sarif_of(doc);
    for (int i = 0; i < 4; i++)
        assert_string_equal(fingerprint(before, i), fingerprint(after, i));
    cJSON_Delete(doc);
    cJSON_Delete(before);
    cJSON_Delete(again);
    cJSON_Delete(after);
}

static void sarif__columns_count_utf16_units_and_uris_are_encoded(void **state) {
    (void)state;
    enter_tmpdir();
    assert_int_equal(mkdir("my dir", 0755), 0);
    /* U+1F600 is 4 bytes of UTF-8 and 2 UTF-16 units; U+00E9 is 2 bytes and 1 unit */
    write_text_file("my dir/e.c", "s(\"\xf0\x9f\x98\x80\xc3\xa9\", k);\n");
    cJSON *doc = new_doc();
    add_diag(doc, "my dir/e.c", 1, 13, 14, "error", "tk-arg-mismatch", "m");
    add_diag(doc, "/abs/x y.c", 1, 1, 2, "error", "tk-parse-error", "m");
    add_diag(doc, NULL, 1, 1, 2, "error", "tk-parse-error", "nowhere");
    cJSON *log = sarif_of(doc);
    assert_string_equal(path_str(log, "runs.0.columnKind"), "utf16CodeUnits");
    const cJSON *r0 = path_get(log, "runs.0.results.0");
    assert_string_equal(path_str(r0, "locations.0.physicalLocation.artifactLocation.uri"), "my%20dir/e.c");
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.startColumn"), 10);
    assert_int_equal(path_int(r0, "locations.0.physicalLocation.region.endColumn"), 11);
    const cJSON *r1 = path_get(log, "runs.0.results.1");
    assert_string_equal(path_str(r1, "locations.0.physicalLocation.artifactLocation.uri"), "file:///abs/x%20y.c");
    assert_null(cJSON_GetObjectItemCaseSensitive(path_get(r1, "locations.0.physicalLocation.artifactLocation"),
                                                 "uriBaseId"));
    const cJSON *r2 = path_get(log, "runs.0.results.2");
    assert_null(cJSON_GetObjectItemCaseSensitive(r2, "locations"));
    assert_string_equal(path_str(r2, "message.text"), "nowhere");
    cJSON_Delete(log);
    cJSON_Delete(doc);
}

/* ---- end to end: the analyzer's lint checks on the fixtures ---- */

static cJSON *lint_run(const char *path) {
    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.no_cache = 1;
    opts.jobs = 2;
    opts.lint = 1;
    tk_analysis *a = NULL;
    tk_assert_ok(tk_analysis_run(&a, &opts, &path, 1));
    cJSON *doc = cJSON_Duplicate(tk_analysis_doc(a), 1);
    tk_analysis_free(a);
    assert_non_null(doc);
    diags_of(doc);
    return doc;
}

/* Where each defect of fixtures/lint/defects is: one finding per rule, at the line holding the
 * needle. */
static const struct {
    const char *rule, *file, *needle;
} k_defects[] = {
    {"tk-arg-mismatch", "defects/arg_mismatch.c", "return tk_wrap"},
    {"tk-bad-autotune", "defects/bad_autotune.c", "TK_AUTOTUNE(tuned_k"},
    {"tk-bad-op-name", "defects/bad_op_name.c", "TK_OP("},
    {"tk-bad-schema", "defects/bad_schema.c", "TK_OP("},
    {"tk-depth-limit", "defects/depth.c", "static int depth_h5"},
    {"tk-duplicate-op", "defects/duplicate_op_b.c", "TK_OP("},
    {"tk-parse-error", "defects/parse_error.c", "return a + ;"},
    {"tk-raw-launch", "defects/raw_launch.cu", "fill_k<<<"},
    {"tk-undeclared-mutation", "defects/undeclared_mutation.c", "return tk_wrap"},
    {"tk-undefined-kernel", "defects/undefined_kernel.c", "return tk_wrap"},
    {"tk-unresolved-kernel", "defects/unresolved.c", "return tk_wrap"},
};
#define N_DEFECTS (sizeof(k_defects) / sizeof(k_defects[0]))

/* Every finding at the line and column of the value it is about, even on a line of its own;
 * tk_wrap's (and tk_wrap_shared's, C and C++) arguments numbered as the call has them;
 * "an 8-byte"; two ops one X-macro line defines both reported; a UTF-16 file reported at its
 * start. */
static void e2e__findings_point_at_their_values(void **state) {
    (void)state;
    cJSON *doc = lint_run("diagpos");
    static const struct {
        const char *rule, *file, *needle, *message;
    } expect[] = {
        {"tk-unresolved-kernel", "diagpos/op.c", "dp_unknown(),",
         "cannot resolve the kernel launched by op 'test::dp_unresolved': unknown value: return value of 'dp_unknown', "
         "which has no definition in the scanned sources"},
        {"tk-arg-mismatch", "diagpos/op.c", "(float)tk_numel",
         "tk_wrap's argument 7 (the kernel's argument 3) is a float, but parameter 'n' of kernel 'dp_k' is 'int64_t'"},
        {"tk-arg-mismatch", "diagpos/op.c", "tk_numel(in[0]) + 0);",
         "tk_wrap's argument 7 (the kernel's argument 3) is an 8-byte integer, but parameter 'n' of kernel "
         "'dp_k_double' is 'double'"},
        {"tk-undefined-kernel", "diagpos/op.c", "dp_nodef, TK_DIM3",
         "kernel 'dp_nodef' launched by op 'test::dp_undefined' has no TK_KERNEL definition in the scanned sources"},
        {"tk-arg-mismatch", "diagpos/op.c", "1.5f",
         "tk_wrap's argument 7 (the kernel's argument 3) is a float, but parameter 'n' of kernel 'dp_xa' is 'int64_t'"},
        {"tk-arg-mismatch", "diagpos/op.c", "1.5f",
         "tk_wrap's argument 7 (the kernel's argument 3) is a float, but parameter 'n' of kernel 'dp_xb' is 'int64_t'"},
        {"tk-arg-mismatch", "diagpos/op.c", "2.5f",
         "tk_wrap_shared's argument 8 (the kernel's argument 3) is a float, but parameter 'n' of kernel 'dp_k' is "
         "'int64_t'"},
        {"tk-arg-mismatch", "diagpos/op_cxx.cu", "0.5)",
         "tk_wrap_shared's argument 8 (the kernel's argument 3) is a double, but parameter 'n' of kernel 'dp_xb' is "
         "'int64_t'"},
        {"tk-parse-error", "diagpos/utf16.c", NULL,
         "the file is UTF-16 (it starts with a UTF-16 byte order mark): expected UTF-8, without a byte order mark or "
         "with the UTF-8 one"},
    };
    const size_t n = sizeof expect / sizeof expect[0];
    if ((size_t)cJSON_GetArraySize(diags_of(doc)) != n) {
        print_diags(doc);
        fail_msg("%d findings, expected %zu", cJSON_GetArraySize(diags_of(doc)), n);
    }
    for (size_t i = 0; i < n; i++) {
        const cJSON *hit = NULL, *d;
        cJSON_ArrayForEach(d, diags_of(doc)) {
            if (!strcmp(str_of(d, "message"), expect[i].message))
                hit = d;
        }
        if (!hit) {
            print_diags(doc);
            fail_msg("no finding says: %s", expect[i].message);
        }
        assert_string_equal(str_of(hit, "rule"), expect[i].rule);
        assert_string_equal(str_of(hit, "file"), expect[i].file);
        int line = expect[i].needle ? tk_line_of(expect[i].file, expect[i].needle) : 1;
        int col = expect[i].needle ? tk_col_of(expect[i].file, expect[i].needle) : 1;
        assert_int_equal(int_of(hit, "line"), line);
        assert_int_equal(int_of(hit, "column"), col);
    }
    cJSON_Delete(doc);
}

/* tk-undeclared-mutation through any element type: kernels over __nv_bfloat16 and __half write
 * through operator= and operator+= (calls, not C assignments); both are found, the kernel that
 * only reads its half input is not. */
static void e2e__undeclared_mutation_through_bf16_and_half(void **state) {
    (void)state;
    cJSON *doc = lint_run("elemtypes");
    char rules[512];
    rules_csv(doc, rules, sizeof rules);
    if (strcmp(rules, "tk-undeclared-mutation,tk-undeclared-mutation")) {
        print_diags(doc);
        fail_msg("rules: %s", rules);
    }
    const int want[] = {tk_line_of("elemtypes/op.c", "kb, TK_DIM3"), tk_line_of("elemtypes/op.c", "kh, TK_DIM3")};
    const char *kernels[] = {"kernel 'kb' writes through parameter 'y'", "kernel 'kh' writes through parameter 'x'"};
    const cJSON *d;
    int i = 0;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        assert_int_equal(int_of(d, "line"), want[i]);
        assert_non_null(strstr(str_of(d, "message"), kernels[i]));
        i++;
    }
    cJSON_Delete(doc);
}

/* tk-undeclared-mutation follows in[0] through helpers (their parameters and locals, as kernels
 * are resolved) and sees writes through atomics, local aliases, int8_t and struct elements; the
 * near misses (a declared mutation, an output, a read-only parameter, a const input read through
 * an alias, an atomic on the output) yield nothing. */
static void e2e__undeclared_mutation_through_helpers_atomics_and_aliases(void **state) {
    (void)state;
    cJSON *doc = lint_run("mutation");
    static const struct {
        const char *needle, *message;
    } expect[] = {
        {"tk_wrap(ctx, mu_scale_k,",
         "kernel 'mu_scale_k' writes through parameter 'x', which receives in[0] of op 'mu::helper' (passed along "
         "mu_helper_op -> mu_prepare -> mu_scale), but the schema does not mark that input mutated (declare it "
         "'Tensor(a!)')"},
        {"mu_atomic_k, TK_DIM3", "kernel 'mu_atomic_k' writes through parameter 'x', which receives in[0] of op 'mu::atomic', but"},
        {"mu_alias_k, TK_DIM3", "kernel 'mu_alias_k' writes through parameter 'x', which receives in[0] of op 'mu::alias', but"},
        {"mu_cast_k, TK_DIM3", "kernel 'mu_cast_k' writes through parameter 'x', which receives in[0] of op 'mu::cast', but"},
        {"mu_struct_k, TK_DIM3", "kernel 'mu_struct_k' writes through parameter 'pts', which receives in[0] of op 'mu::struct', but"},
    };
    size_t n = sizeof expect / sizeof expect[0];
    if ((size_t)cJSON_GetArraySize(diags_of(doc)) != n) {
        print_diags(doc);
        fail_msg("mutation/: %d findings, expected %zu", cJSON_GetArraySize(diags_of(doc)), n);
    }
    for (size_t i = 0; i < n; i++) {
        const cJSON *d, *hit = NULL;
        cJSON_ArrayForEach(d, diags_of(doc)) if (!strncmp(str_of(d, "message"), expect[i].message, strlen(expect[i].message))) hit = d;
        if (!hit) {
            print_diags(doc);
            fail_msg("no finding '%s'", expect[i].message);
        }
        assert_string_equal(str_of(hit, "rule"), "tk-undeclared-mutation");
        assert_string_equal(str_of(hit, "file"), "mutation/ops.c");
        assert_int_equal(int_of(hit, "line"), tk_line_of("mutation/ops.c", expect[i].needle));
    }
    cJSON_Delete(doc);
}

/* The autotune check reads the kernel's source from the buffer clang parsed, so under the LSP an
 * unsaved edit counts: here the buffer uses UNROLL and mentions BLOCK only in its #define and a
 * comment, the opposite of the file on disk. */
static void e2e__autotune_source_check_reads_the_editor_buffer(void **state) {
    (void)state;
    char abs[PATH_MAX];
    assert_non_null(realpath("autotune/tuned.cu", abs));
    const char *buf = "#include <tk/kernel.h>\n"
                      "#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
                      "#ifndef BLOCK\n#define BLOCK 256\n#endif\n"
                      "/* BLOCK is not used below */\n"
                      "TK_KERNEL void tuned_k(const float *x, float *y, long long n)\n"
                      "{\n"
                      "    for (int u = 0; u < UNROLL; u++) {\n"
                      "        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x + u;\n"
                      "        if (i < n)\n            y[i] = x[i];\n"
                      "    }\n"
                      "}\n";
    tk_unsaved_file unsaved[] = {{abs, buf, strlen(buf)}};
    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.no_cache = 1;
    opts.jobs = 2;
    opts.lint = 1;
    opts.unsaved = unsaved;
    opts.n_unsaved = 1;
    const char *path = "autotune";
    tk_analysis *a = NULL;
    tk_assert_ok(tk_analysis_run(&a, &opts, &path, 1));
    int block = 0, unroll = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(tk_analysis_doc(a))) {
        block += strstr(str_of(d, "message"), "parameter 'BLOCK' is not used") != NULL;
        unroll += strstr(str_of(d, "message"), "parameter 'UNROLL' is not used") != NULL;
    }
    /* both declarations (cases.c and empty.c) name BLOCK; only cases.c names UNROLL */
    if (block != 2 || unroll != 0) {
        print_diags(tk_analysis_doc(a));
        fail_msg("BLOCK findings %d (expected 2), UNROLL findings %d (expected 0)", block, unroll);
    }
    tk_analysis_free(a);
}

/* tk-bad-autotune's other findings, each under the argument at fault. */
static void e2e__autotune_declarations_are_checked_against_the_kernel(void **state) {
    (void)state;
    cJSON *doc = lint_run("autotune");
    static const struct {
        const char *file, *needle, *message;
    } expect[] = {
        {"autotune/cases.c", "\"BLOCK UNROLL\"",
         "TK_AUTOTUNE of 'tuned_k': parameter 'UNROLL' is not used by the kernel's source autotune/tuned.cu, so every "
         "configuration compiles to the same kernel"},
        {"autotune/cases.c", "\"128\"",
         "TK_AUTOTUNE of 'tuned_k': configuration \"128\" is not 2 integers (one per parameter of \"BLOCK UNROLL\")"},
        {"autotune/empty.c", "TK_AUTOTUNE(",
         "TK_AUTOTUNE of 'tuned_k' lists no configuration (expected one string of 1 integer per configuration)"},
    };
    assert_int_equal(cJSON_GetArraySize(diags_of(doc)), 3);
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const cJSON *d, *hit = NULL;
        cJSON_ArrayForEach(d, diags_of(doc)) if (!strcmp(str_of(d, "message"), expect[i].message)) hit = d;
        if (!hit) {
            print_diags(doc);
            fail_msg("no finding '%s'", expect[i].message);
        }
        assert_string_equal(str_of(hit, "rule"), "tk-bad-autotune");
        assert_string_equal(str_of(hit, "file"), expect[i].file);
        assert_int_equal(int_of(hit, "line"), tk_line_of(expect[i].file, expect[i].needle));
    }
    cJSON_Delete(doc);
}

static void e2e__defects_yield_exactly_one_finding_per_rule(void **state) {
    (void)state;
    cJSON *doc = lint_run("defects");
    int n = cJSON_GetArraySize(diags_of(doc));
    int ok = n == (int)N_DEFECTS;
    int seen[N_DEFECTS] = {0};
    const cJSON *d;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        size_t i = 0;
        while (i < N_DEFECTS && strcmp(k_defects[i].rule, str_of(d, "rule")) != 0)
            i++;
        if (i == N_DEFECTS) {
            print_error("unexpected rule '%s'\n", str_of(d, "rule"));
            ok = 0;
            continue;
        }
        seen[i]++;
        int line = tk_line_of(k_defects[i].file, k_defects[i].needle);
        if (strcmp(str_of(d, "file"), k_defects[i].file) != 0 || int_of(d, "line") != line) {
            print_error("%s at %s:%d, expected %s:%d\n", k_defects[i].rule, str_of(d, "file"), int_of(d, "line"),
                        k_defects[i].file, line);
            ok = 0;
        }
        if (strcmp(str_of(d, "severity"), tk_lint_rule_find(k_defects[i].rule)->severity) != 0) {
            print_error("%s has severity '%s'\n", k_defects[i].rule, str_of(d, "severity"));
            ok = 0;
        }
        if (int_of(d, "column") < 1) {
            print_error("%s has column %d\n", k_defects[i].rule, int_of(d, "column"));
            ok = 0;
        }
    }
    for (size_t i = 0; i < N_DEFECTS; i++)
        if (seen[i] != 1) {
            print_error("%s: %d findings, expected 1\n", k_defects[i].rule, seen[i]);
            ok = 0;
        }
    if (!ok) {
        print_diags(doc);
        fail_msg("defects/ should yield exactly one finding per rule (%zu), got %d", N_DEFECTS, n);
    }
    /* nothing there is suppressed, and the list is sorted by file and line */
    tk_assert_ok(tk_lint_filter(doc, NULL));
    assert_int_equal(cJSON_GetArraySize(diags_of(doc)), (int)N_DEFECTS);
    const cJSON *prev = NULL;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        if (prev) {
            int c = strcmp(str_of(prev, "file"), str_of(d, "file"));
            assert_true(c < 0 || (c == 0 && int_of(prev, "line") <= int_of(d, "line")));
        }
        prev = d;
    }
    cJSON_Delete(doc);
}

static void e2e__defects_show_the_same_findings_in_all_three_formats(void **state) {
    (void)state;
    cJSON *doc = lint_run("defects");
    tk_assert_ok(tk_lint_filter(doc, NULL));

    /* JSON: the document itself */
    char *json = cJSON_PrintUnformatted(doc);
    cJSON *back = cJSON_Parse(json);
    free(json);
    assert_non_null(back);
    assert_int_equal(cJSON_GetArraySize(diags_of(back)), (int)N_DEFECTS);
    cJSON_Delete(back);

    /* text: one "file:line:col: severity: message [rule]" line per finding */
    char *text = render_text(doc, 0);
    int seen[N_DEFECTS] = {0};
    int headers = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "defects/", 8) != 0)
            continue;
        headers++;
        for (size_t i = 0; i < N_DEFECTS; i++) {
            char head[256], tail[64];
            int l = tk_line_of(k_defects[i].file, k_defects[i].needle);
            snprintf(head, sizeof head, "%s:%d:", k_defects[i].file, l);
            snprintf(tail, sizeof tail, " [%s]", k_defects[i].rule);
            size_t n = strlen(line), tn = strlen(tail);
            if (strncmp(line, head, strlen(head)) == 0 && n > tn && strcmp(line + n - tn, tail) == 0 &&
                strstr(line, tk_lint_rule_find(k_defects[i].rule)->severity))
                seen[i]++;
        }
    }
    free(text);
    assert_int_equal(headers, (int)N_DEFECTS);
    for (size_t i = 0; i < N_DEFECTS; i++)
        if (seen[i] != 1)
            fail_msg("text output: %d lines for %s, expected 1", seen[i], k_defects[i].rule);

    /* SARIF: one result per finding, with its rule, file and line */
    cJSON *log = sarif_of(doc);
    const cJSON *results = path_get(log, "runs.0.results");
    assert_int_equal(cJSON_GetArraySize(results), (int)N_DEFECTS);
    for (size_t i = 0; i < N_DEFECTS; i++) {
        int found = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, results) {
            if (strcmp(path_str(r, "ruleId"), k_defects[i].rule) != 0)
                continue;
            found++;
            assert_string_equal(path_str(r, "locations.0.physicalLocation.artifactLocation.uri"), k_defects[i].file);
            assert_int_equal(path_int(r, "locations.0.physicalLocation.region.startLine"),
                             tk_line_of(k_defects[i].file, k_defects[i].needle));
            assert_string_equal(path_str(r, "level"), tk_lint_rule_find(k_defects[i].rule)->severity);
        }
        if (found != 1)
            fail_msg("SARIF: %d results for %s, expected 1", found, k_defects[i].rule);
    }
    cJSON_Delete(log);
    cJSON_Delete(doc);
}

static void e2e__checks_select_findings_on_defects(void **state) {
    (void)state;
    cJSON *doc = lint_run("defects");
    cJSON *copy = cJSON_Duplicate(doc, 1);
    tk_assert_ok(tk_lint_filter(doc, "-*,tk-raw-launch"));
    assert_rules(doc, "tk-raw-launch");
    tk_assert_ok(tk_lint_filter(copy, "-tk-depth-limit"));
    assert_int_equal(cJSON_GetArraySize(diags_of(copy)), (int)N_DEFECTS - 1);
    assert_int_equal(tk_lint_exit_status(copy, 0), 1);
    cJSON_Delete(copy);
    cJSON_Delete(doc);
}

/* Whether the source line of d (or, for NOLINTNEXTLINE, the one above) carries a marker. */
static int has_nolint_marker(const cJSON *d) {
    const char *file = str_of(d, "file");
    int line = int_of(d, "line");
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char buf[1024], prev[1024] = "";
    int n = 0, found = 0;
    while (fgets(buf, sizeof buf, f)) {
        if (++n == line) {
            found = strstr(buf, "NOLINT") != NULL || strstr(prev, "NOLINTNEXTLINE") != NULL;
            break;
        }
        snprintf(prev, sizeof prev, "%s", buf);
    }
    fclose(f);
    return found;
}

static void e2e__clean_near_misses_yield_nothing_but_suppressed_findings(void **state) {
    (void)state;
    cJSON *doc = lint_run("clean");
    /* the analyzer does find the three suppressed defects (so the suppression is what hides
     * them) and nothing else */
    const cJSON *d;
    int ok = 1;
    cJSON_ArrayForEach(d, diags_of(doc)) {
        if (strncmp(str_of(d, "file"), "clean/nolint_", 13) != 0 || !has_nolint_marker(d))
            ok = 0;
    }
    if (!ok) {
        print_diags(doc);
        fail_msg("clean/ has findings outside the NOLINT-marked lines");
    }
    assert_rules(doc, "tk-depth-limit,tk-bad-op-name,tk-raw-launch");
    tk_assert_ok(tk_lint_filter(doc, NULL));
    assert_rules(doc, "");
    assert_int_equal(tk_lint_exit_status(doc, 1), 0);
    cJSON_Delete(doc);
}

static void e2e__examples_are_clean(void **state) {
    (void)state;
    cJSON *doc = lint_run(TK_EXAMPLES_DIR);
    cJSON *ops = cJSON_GetObjectItemCaseSensitive(doc, "ops");
    assert_true(cJSON_GetArraySize(ops) > 0);
    assert_rules(doc, "");
    cJSON_Delete(doc);
}

#define TK_TEST(fn) cmocka_unit_test_teardown(fn, teardown)

int main(void) {
    /* Fixture paths, and the relative paths of the diagnostics, are relative to this folder. */
    if (chdir(TK_LINT_FIXTURES_DIR) != 0 || !getcwd(g_fixtures_cwd, sizeof g_fixtures_cwd)) {
        fprintf(stderr, "test_lint: cannot enter '%s'\n", TK_LINT_FIXTURES_DIR);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        TK_TEST(rules__table_lists_every_rule_with_its_default_severity_and_texts),
        TK_TEST(checks__null_and_empty_lists_enable_every_rule),
        TK_TEST(checks__minus_star_then_a_rule_keeps_only_that_rule),
        TK_TEST(checks__minus_a_rule_drops_only_that_rule),
        TK_TEST(checks__globs_apply_left_to_right_and_later_entries_win),
        TK_TEST(checks__unknown_rule_or_malformed_entry_is_einval_naming_it),
        TK_TEST(filter__checks_remove_the_diagnostics_of_disabled_rules),
        TK_TEST(filter__nolint_on_the_line_suppresses_every_rule_or_the_listed_ones),
        TK_TEST(filter__nolintnextline_suppresses_only_the_line_below),
        TK_TEST(filter__missing_file_or_line_suppresses_nothing),
        TK_TEST(filter__editor_buffer_replaces_the_file_on_disk),
        TK_TEST(text__location_severity_message_rule_source_line_and_caret),
        TK_TEST(text__caret_keeps_tabs_and_marks_characters_not_bytes),
        TK_TEST(text__unreadable_source_gives_the_first_line_only),
        TK_TEST(text__color_uses_clang_escape_sequences),
        TK_TEST(text__summary_counts_as_clang_does),
        TK_TEST(exit_status__errors_fail_and_warnings_fail_only_with_werror),
        TK_TEST(sarif__log_has_the_structure_github_code_scanning_reads),
        TK_TEST(sarif__fingerprints_follow_line_text_not_line_numbers),
        TK_TEST(sarif__columns_count_utf16_units_and_uris_are_encoded),
        TK_TEST(e2e__defects_yield_exactly_one_finding_per_rule),
        TK_TEST(e2e__autotune_declarations_are_checked_against_the_kernel),
        TK_TEST(e2e__findings_point_at_their_values),
        TK_TEST(e2e__undeclared_mutation_through_bf16_and_half),
        TK_TEST(e2e__undeclared_mutation_through_helpers_atomics_and_aliases),
        TK_TEST(e2e__autotune_source_check_reads_the_editor_buffer),
        TK_TEST(e2e__defects_show_the_same_findings_in_all_three_formats),
        TK_TEST(e2e__checks_select_findings_on_defects),
        TK_TEST(e2e__clean_near_misses_yield_nothing_but_suppressed_findings),
        TK_TEST(e2e__examples_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
