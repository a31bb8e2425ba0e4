/* The file helpers every command shares (common/fsutil.c): the one folder walk (name order, hidden
 * entries and CMake build trees skipped, links to folders not followed, only regular files given),
 * reads that refuse a FIFO without waiting for a writer, and tk_remove_tree, which removes a
 * symbolic link and never what it points to. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "jsonutil.h"

static void make_file(const char *dir, const char *name)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("int x;\n", f);
    fclose(f);
}

static void make_dir(const char *dir, const char *name)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(mkdir(p, 0700), 0);
}

typedef struct seen {
    char names[32][256];
    int n;
    size_t skip;
} seen;

static int record(const char *path, void *arg)
{
    seen *s = arg;
    assert_true(s->n < 32);
    snprintf(s->names[s->n++], sizeof s->names[0], "%s", path + s->skip);
    return 0;
}

static int stop_at_second(const char *path, void *arg)
{
    (void)path;
    return ++*(int *)arg == 2 ? 42 : 0;
}

static void walk__regular_files_in_name_order_and_nothing_else(void **state)
{
    (void)state;
    char root[512], p[1024], q[1024];
    assert_int_equal(tk_tempdir_new(root, sizeof root), 0);
    make_file(root, "b.c");
    make_file(root, "a.c");
    make_dir(root, "sub");
    make_file(root, "sub/z.cu");
    make_dir(root, ".hidden");
    make_file(root, ".hidden/h.c");
    make_file(root, ".dot.c");
    make_dir(root, "build");
    make_file(root, "build/CMakeCache.txt");
    make_file(root, "build/gen.c");
    snprintf(p, sizeof p, "%s/pipe.c", root);
    assert_int_equal(mkfifo(p, 0600), 0);
    /* a link to a folder (here: a loop back to the root) is not followed; a link to a file is a file */
    snprintf(p, sizeof p, "%s/loop", root);
    assert_int_equal(symlink(root, p), 0);
    snprintf(p, sizeof p, "%s/sub/z.cu", root);
    snprintf(q, sizeof q, "%s/link.c", root);
    assert_int_equal(symlink(p, q), 0);

    seen s = {.skip = strlen(root) + 1};
    assert_int_equal(tk_walk_files(root, record, &s), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.names[0], "a.c");
    assert_string_equal(s.names[1], "b.c");
    assert_string_equal(s.names[2], "link.c");
    assert_string_equal(s.names[3], "sub/z.cu");

    /* the top folder itself may be a build tree (the user asked for it) */
    seen b = {.skip = strlen(root) + 1};
    snprintf(p, sizeof p, "%s/build", root);
    assert_int_equal(tk_walk_files(p, record, &b), 0);
    assert_int_equal(b.n, 2);

    int count = 0;
    assert_int_equal(tk_walk_files(root, stop_at_second, &count), 42);
    assert_int_equal(count, 2);
    snprintf(p, sizeof p, "%s/missing", root);
    assert_int_equal(tk_walk_files(p, record, &s), TK_EIO);

    /* a FIFO is refused at once (opening it for reading would wait for a writer) */
    char *data = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/pipe.c", root);
    assert_int_equal(tk_file_read(&data, &len, p, 1024), TK_EIO);
    assert_non_null(strstr(tk_error_last(), "not a regular file"));
    assert_null(data);
    assert_int_equal(tk_remove_tree(root), 0);
    assert_int_equal(access(root, F_OK), -1);
}

static void remove_tree__removes_links_not_what_they_point_to(void **state)
{
    (void)state;
    char root[512], keep[512], p[1024];
    assert_int_equal(tk_tempdir_new(root, sizeof root), 0);
    assert_int_equal(tk_tempdir_new(keep, sizeof keep), 0);
    make_file(keep, "precious.c");
    make_dir(root, "d");
    snprintf(p, sizeof p, "%s/d/to_keep", root);
    assert_int_equal(symlink(keep, p), 0);
    snprintf(p, sizeof p, "%s/top_link", root);
    assert_int_equal(symlink(keep, p), 0);
    assert_int_equal(tk_remove_tree(root), 0);
    assert_int_equal(access(root, F_OK), -1);
    snprintf(p, sizeof p, "%s/precious.c", keep);
    assert_int_equal(access(p, F_OK), 0);
    /* a link given itself is removed as a link */
    char link[1024];
    snprintf(link, sizeof link, "%s.link", keep);
    assert_int_equal(symlink(keep, link), 0);
    assert_int_equal(tk_remove_tree(link), 0);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(tk_remove_tree(keep), 0);
}

/* common/jsonutil.c: defaults for the lenient accessors, one-line errors naming the place, the key
 * and the type for the checked ones. */
static void json__accessors_check_types(void **state)
{
    (void)state;
    cJSON *o = cJSON_Parse("{\"s\": \"text\", \"n\": 12, \"f\": 1.5, \"a\": [1]}");
    assert_non_null(o);
    assert_string_equal(tk_json_str(o, "s", NULL), "text");
    assert_null(tk_json_str(o, "n", NULL));
    assert_string_equal(tk_json_str(NULL, "s", "?"), "?");
    assert_int_equal(tk_json_int(o, "n", -1), 12);
    assert_int_equal(tk_json_int(o, "s", -1), -1);
    const char *str = NULL;
    int64_t v = 0;
    assert_int_equal(tk_json_need_str(o, "s", "here", &str), 0);
    assert_string_equal(str, "text");
    assert_int_equal(tk_json_need_str(o, "a", "file.json: ops[0]", &str), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "file.json: ops[0]: \"a\" is an array (expected a string)");
    assert_int_equal(tk_json_need_int(o, "n", "here", 0, 100, &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(tk_json_need_int(o, "f", "here", 0, 100, &v), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "here: \"f\" is 1.5 (expected a whole number in [0, 100])");
    assert_int_equal(tk_json_need_int(o, "n", "here", 0, 10, &v), TK_EFORMAT);
    assert_int_equal(tk_json_need_int(o, "missing", "here", 0, 10, &v), TK_EFORMAT);
    assert_string_equal(tk_error_last(), "here: \"missing\" is missing (expected a whole number in [0, 10])");
    cJSON_Delete(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(walk__regular_files_in_name_order_and_nothing_else),
        cmocka_unit_test(remove_tree__removes_links_not_what_they_point_to),
        cmocka_unit_test(json__accessors_check_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
