/* The AOT stage end to end through `tkexport compile` on tests/fixtures/aoti/three (three ops,
 * each with its own kernel source; programs using one, two or none of them): tree shaking,
 * byte-identical packages, the compile cache, the manifest's digests against sha256sum, the
 * failure paths (a broken kernel, no nvcc, an unknown architecture) leaving nothing behind, the
 * signature (a key given, the per-user key made on first use, --no-sign, inspect's report); and
 * the package reader (runtime/pkgfile.c) on hostile variants of a good package. Tests that run
 * nvcc are skipped when it is not installed. The suite signs with a key of its own, trusted
 * through a trust file of its own (TKEXPORT_SIGN_KEY, TKEXPORT_TRUST_FILE). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "pkgfile.h"
#include <tk/runtime.h>
#include "sha256.h"
#include "strbuf.h"
#include "tkprog.h"
#include "tk_test.h"
#include "tk_test_proc.h"
#include "zipfile.h"

static char *g_dir;                  /* the suite's temporary folder */
static char g_one[600], g_two[600]; /* the programs "one" and "two", exported once */
static char g_builtin[600];
static char g_key[600], g_trust[600]; /* the suite's signing key and trust file */
static int g_have_nvcc;
/* the hostile packages below are made unsigned: the reader allows that explicitly */
static const tk_package_options g_allow_unsigned = {TK_PACKAGE_OPTIONS_VERSION, 1, NULL, 0};
static const tk_pkgfile_trust g_unsigned_ok = {&g_allow_unsigned, 0};


/* tkexport with args (NULL-terminated), extra environment env; exit status checked. */
static void cli_at(const char *file, int line, int expect, const char *const *env, const char *const *args,
                   char **out, char **err)
{
    const char *argv[40];
    size_t n = 0;
    argv[n++] = TK_TKEXPORT;
    for (; *args && n < 39; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    char *o = NULL, *e = NULL;
    int rc = tk_test_run(argv, env, &o, &e);
    if (rc != expect)
        tk_fail_at(file, line, "tkexport %s exited %d, expected %d\nstdout:\n%s\nstderr:\n%s", argv[1], rc, expect, o,
                   e);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
}
#define CLI(expect, env, out, err, ...)                                                         \
    do {                                                                                        \
        const char *tk__args[] = {__VA_ARGS__, NULL};                                           \
        cli_at(__FILE__, __LINE__, (expect), (env), tk__args, (out), (err));                    \
    } while (0)

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

static void copy_tree(const char *from, const char *to)
{
    const char *argv[] = {"cp", "-r", from, to, NULL};
    assert_int_equal(tk_test_run(argv, NULL, NULL, NULL), 0);
}

static int setup(void **state)
{
    (void)state;
    g_dir = tk_test_temp_dir();
    g_have_nvcc = access(getenv("TKEXPORT_NVCC") ? getenv("TKEXPORT_NVCC") : "/usr/local/cuda/bin/nvcc", X_OK) == 0;
    path_in(g_one, sizeof g_one, "one.tkprog");
    path_in(g_two, sizeof g_two, "two.tkprog");
    path_in(g_builtin, sizeof g_builtin, "builtin.tkprog");
    path_in(g_key, sizeof g_key, "sign.key");
    path_in(g_trust, sizeof g_trust, "trusted_keys");
    setenv("TKEXPORT_TRUST_FILE", g_trust, 1);
    unsetenv("TKEXPORT_TRUSTED_KEYS");
    CLI(0, NULL, NULL, NULL, "keygen", "-o", g_key, "--trust");
    setenv("TKEXPORT_SIGN_KEY", g_key, 1);
    CLI(0, NULL, NULL, NULL, "export", TK_AOTI_FIXTURE, "--program", "one", "--no-cache", "-o", g_one);
    CLI(0, NULL, NULL, NULL, "export", TK_AOTI_FIXTURE, "--program", "two", "--no-cache", "-o", g_two);
    CLI(0, NULL, NULL, NULL, "export", TK_AOTI_FIXTURE, "--program", "builtin_only", "--no-cache", "-o", g_builtin);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tk_test_rm_tree(g_dir);
    return 0;
}

#define NEED_NVCC()                                                                             \
    do {                                                                                        \
        if (!g_have_nvcc) {                                                                     \
            print_message("nvcc is not installed: skipped\n");                                  \
            skip();                                                                             \
        }                                                                                       \
    } while (0)

/* The names of the package's entries, one per line, in archive order. */
static char *entry_names(const char *pkg)
{
    size_t len = 0;
    char *data = tk_test_read_file(pkg, &len);
    assert_non_null(data);
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, data, len, pkg, ".tkpkg", 100));
    tk_strbuf sb = {0};
    for (size_t i = 0; i < tk_zip_count(z); i++)
        tk_assert_ok(tk_strbuf_addf(&sb, "%s\n", tk_zip_name(z, i)));
    tk_zip_close(z);
    free(data);
    return tk_strbuf_detach(&sb);
}

static void compile__tree_shaking_packs_only_the_kernels_the_program_needs(void **state)
{
    (void)state;
    NEED_NVCC();
    char pkg[640];
    path_in(pkg, sizeof pkg, "one.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", g_one, "-o", pkg, "--no-cache");
    char *names = entry_names(pkg);
    /* a.cu only: b.cu and c.cu define kernels of ops the program does not call */
    assert_contains(names, "three/a.fatbin\n");
    assert_null(strstr(names, "b.fatbin"));
    assert_null(strstr(names, "c.fatbin"));
    assert_string_equal(strstr(names, "manifest.json"),
                        "manifest.json\nmanifest.sig\nprogram.json\nweights.safetensors\n");
    assert_true(!strncmp(names, "host/ops.so\nkernels/", 20));
    free(names);

    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, pkg, NULL));
    assert_int_equal(f->nkernels, 1);
    assert_string_equal(f->kernels[0].name, "a_kernel");
    assert_int_equal(f->narchs, 1);
    assert_string_equal(f->archs[0], "sm_90");
    assert_string_equal(f->ptx, "compute_90");
    assert_non_null(f->host);
    /* stored entries are used in place in the file's mapping; deflated ones are inflated copies */
    assert_non_null(f->map);
    assert_true(tk_pkgfile_entry(f, "weights.safetensors")->mapped);
    assert_true(tk_pkgfile_entry(f, f->kernels[0].fatbin)->mapped);
    assert_false(tk_pkgfile_entry(f, "program.json")->mapped);
    assert_false(tk_pkgfile_entry(f, "host/ops.so")->mapped);
    tk_pkgfile_free(f);
    size_t len = 0;
    char *bytes = tk_test_read_file(pkg, &len);
    tk_assert_ok(tk_pkgfile_read_mem(&f, bytes, len, "'mem.tkpkg'", NULL));
    free(bytes); /* read_mem keeps copies */
    assert_null(f->map);
    assert_false(tk_pkgfile_entry(f, "weights.safetensors")->mapped);
    tk_pkgfile_free(f);
}

static void compile__only_builtin_ops_needs_no_compiler(void **state)
{
    (void)state;
    char pkg[640];
    char *err = NULL;
    path_in(pkg, sizeof pkg, "builtin.tkpkg");
    const char *env[] = {"TKEXPORT_NVCC=/nonexistent/nvcc", "CC=/nonexistent/cc", NULL};
    CLI(0, env, NULL, &err, "compile", g_builtin, "-o", pkg, "--no-cache");
    assert_contains(err, "no kernel source, no host code");
    char *names = entry_names(pkg);
    assert_string_equal(names, "manifest.json\nmanifest.sig\nprogram.json\nweights.safetensors\n");
    free(names);
    free(err);
}

static void compile__same_input_gives_same_bytes(void **state)
{
    (void)state;
    NEED_NVCC();
    char a[640], b[640], c[640], cache[640];
    path_in(a, sizeof a, "same-a.tkpkg");
    path_in(b, sizeof b, "same-b.tkpkg");
    path_in(c, sizeof c, "same-c.tkpkg");
    path_in(cache, sizeof cache, "same-cache");
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", a, "--no-cache", "-j", "1", "--arch", "sm_90", "--arch", "sm_80");
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", b, "--cache-dir", cache, "-j", "4", "--arch", "sm_80", "--arch",
        "sm_90");
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", c, "--cache-dir", cache, "--arch", "sm_80", "--arch", "sm_90");
    size_t la = 0, lb = 0, lc = 0;
    char *da = tk_test_read_file(a, &la), *db = tk_test_read_file(b, &lb), *dc = tk_test_read_file(c, &lc);
    assert_non_null(da);
    assert_non_null(db);
    assert_non_null(dc);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    assert_int_equal(la, lc);
    assert_memory_equal(da, dc, la);
    /* nothing of this machine inside: no temporary folder, no home, no user */
    assert_null(memmem(da, la, "tkexport-", 9)); /* the compile's own temporary folders */
    assert_null(memmem(da, la, g_dir, strlen(g_dir)));
    const char *home = getenv("HOME");
    if (home && strlen(home) > 1)
        assert_null(memmem(da, la, home, strlen(home)));
    free(da);
    free(db);
    free(dc);

    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, a, NULL));
    assert_int_equal(f->narchs, 2);
    assert_string_equal(f->archs[0], "sm_80");
    assert_string_equal(f->archs[1], "sm_90");
    assert_string_equal(f->ptx, "compute_80");
    tk_pkgfile_free(f);
}

/* The number of files in dir. */
static int count_files(const char *dir)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -1 '%s' | wc -l", dir);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    char *out = NULL;
    assert_int_equal(tk_test_run(argv, NULL, &out, NULL), 0);
    int n = atoi(out);
    free(out);
    return n;
}

/* TK_AUTOTUNE and TK_HEURISTIC are read once, by the analyzer at export, and program.json records
 * them: here the configurations come from a macro spread over two lines, which the lexer compile
 * used to run over the sources refused ("takes string literals"). compile builds b's variants
 * from the record (the default configuration once per heuristic value). */
static void tuning__read_at_export_recorded_and_compiled_from_the_record(void **state)
{
    (void)state;
    char src[640], prog[640], pkg[640], path[700], *out = NULL, *err = NULL;
    path_in(src, sizeof src, "three-macro");
    copy_tree(TK_AOTI_FIXTURE, src);
    snprintf(path, sizeof path, "%s/op_b.c", src);
    size_t len = 0;
    char *text = tk_test_read_file(path, &len);
    const char *decl = "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"256\", \"128\", \"512\");";
    char *at = strstr(text, decl);
    assert_non_null(at);
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_add(&sb, text, (size_t)(at - text));
    tk_strbuf_adds(&sb, "#define B_BLOCKS \"256\", \\\n    \"128\", \"512\"\nTK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", B_BLOCKS);");
    tk_strbuf_adds(&sb, at + strlen(decl));
    tk_test_write_file(path, sb.buf, sb.len);
    tk_strbuf_release(&sb);
    free(text);
    int line = tk_line_of(path, "TK_AUTOTUNE(b_kernel");

    path_in(prog, sizeof prog, "two-macro.tkprog");
    CLI(0, NULL, NULL, NULL, "export", src, "--program", "two", "--no-cache", "-o", prog);
    CLI(0, NULL, &out, NULL, "inspect", prog, "--format", "json");
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    const cJSON *tuning = cJSON_GetObjectItemCaseSensitive(doc, "tuning");
    assert_int_equal(cJSON_GetArraySize(tuning), 1);
    char *got = cJSON_PrintUnformatted(cJSON_GetArrayItem(tuning, 0));
    /* the file is the source's path inside the archive (its tree's path, relative to the test's folder) */
    assert_non_null(strstr(got, "{\"kernel\":\"b_kernel\",\"key\":\"n\",\"params\":[\"BLOCK\"],\"configs\":[[256],[128],[512]],"
                                "\"heuristic\":{\"param\":\"EVEN\",\"values\":[0,1]},\"file\":\""));
    assert_non_null(strstr(got, "three-macro/op_b.c\""));
    char tail[64];
    snprintf(tail, sizeof tail, "\"line\":%d}", line);
    assert_non_null(strstr(got, tail));
    free(got);
    cJSON_Delete(doc);
    free(out);

    if (!g_have_nvcc)
        return;
    path_in(pkg, sizeof pkg, "two-macro.tkpkg");
    CLI(0, NULL, NULL, &err, "compile", prog, "-o", pkg, "--no-cache");
    assert_contains(err, "2 kernel sources as 3 fatbins with the tuning variants, for sm_90");
    free(err);
}

/* Replaces the first `from` in the file at path with `to`. */
static void replace_in_file(const char *path, const char *from, const char *to)
{
    size_t len = 0;
    char *text = tk_test_read_file(path, &len);
    assert_non_null(text);
    char *at = strstr(text, from);
    assert_non_null(at);
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_add(&sb, text, (size_t)(at - text));
    tk_strbuf_adds(&sb, to);
    tk_strbuf_adds(&sb, at + strlen(from));
    tk_test_write_file(path, sb.buf, sb.len);
    tk_strbuf_release(&sb);
    free(text);
}

/* program.json's tuning[0], printed without spaces. */
static char *first_tuning(const char *prog)
{
    char *out = NULL;
    CLI(0, NULL, &out, NULL, "inspect", prog, "--format", "json");
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    const cJSON *tuning = cJSON_GetObjectItemCaseSensitive(doc, "tuning");
    assert_int_equal(cJSON_GetArraySize(tuning), 1);
    char *got = cJSON_PrintUnformatted(cJSON_GetArrayItem(tuning, 0));
    cJSON_Delete(doc);
    free(out);
    return got;
}

/* The strings are read as the compiler makes them, which is what the runtime's eager path reads
 * too: escapes decoded ("\t" is a tab, a separator) and adjacent literals joined. Before, the
 * analyzer took libclang's re-escaped spelling ("\\t" as two characters), found "\t512" and
 * "0\t1" malformed and left the declaration out of the record (the program compiled untuned,
 * silently), and compile's lexer read "\t" as "t" and refused the file. */
static void tuning__strings_are_read_as_the_compiler_makes_them(void **state)
{
    (void)state;
    char src[640], prog[640], path[700];
    path_in(src, sizeof src, "three-escapes");
    copy_tree(TK_AOTI_FIXTURE, src);
    snprintf(path, sizeof path, "%s/op_b.c", src);
    replace_in_file(path, "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"256\", \"128\", \"512\");",
                    "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"256\", \"12\" \"8\", \"\\t512\");");
    replace_in_file(path, "TK_HEURISTIC(b_kernel, \"EVEN\", \"0 1\");", "TK_HEURISTIC(b_kernel, \"EVEN\", \"0\\t1\");");
    path_in(prog, sizeof prog, "two-escapes.tkprog");
    CLI(0, NULL, NULL, NULL, "export", src, "--program", "two", "--no-cache", "-o", prog);
    char *got = first_tuning(prog);
    assert_non_null(strstr(got, "{\"kernel\":\"b_kernel\",\"key\":\"n\",\"params\":[\"BLOCK\"],\"configs\":[[256],[128],[512]],"
                                "\"heuristic\":{\"param\":\"EVEN\",\"values\":[0,1]},\"file\":\""));
    free(got);
}

/* A declaration whose configurations times heuristic values exceed what a package holds (a fatbin
 * per variant, at most TK_TUNE_MAX_CONFIGS) stops the export, naming it; before, compile wrote
 * past its table of fatbins. */
static void tuning__export_refuses_more_variants_than_a_package_holds(void **state)
{
    (void)state;
    char src[640], prog[640], path[700], *err = NULL;
    path_in(src, sizeof src, "three-many");
    copy_tree(TK_AOTI_FIXTURE, src);
    snprintf(path, sizeof path, "%s/op_b.c", src);
    tk_strbuf decl = TK_STRBUF_INIT;
    tk_strbuf_adds(&decl, "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\"");
    for (int c = 0; c < 33; c++)
        tk_strbuf_addf(&decl, ", \"%d\"", 32 * (c + 1));
    tk_strbuf_adds(&decl, ");");
    replace_in_file(path, "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"256\", \"128\", \"512\");", decl.buf);
    tk_strbuf_release(&decl);
    int line = tk_line_of(path, "TK_AUTOTUNE(b_kernel");
    path_in(prog, sizeof prog, "two-many.tkprog");
    CLI(1, NULL, NULL, &err, "export", src, "--program", "two", "--no-cache", "-o", prog);
    char want[200];
    snprintf(want, sizeof want, "three-many/op_b.c:%d) has 33 configurations and 2 TK_HEURISTIC values, 66 variants; "
             "at most 64", line);
    assert_contains(err, "cannot export 'two': kernel 'b_kernel' (");
    assert_contains(err, want);
    assert_false(file_exists(prog));
    free(err);
}

/* compile builds the variants program.json records, never what the sources say: here the
 * program's copy of op_b.c is edited after export (two other configurations, no heuristic; the
 * digest updated so the file stays valid), and the package still records the export's reading,
 * with a fatbin per heuristic value. */
static void tuning__compile_uses_the_record_not_the_sources(void **state)
{
    (void)state;
    NEED_NVCC();
    char prog[640], pkg[640];
    tk_program_model *m = NULL;
    tk_assert_ok(tk_tkprog_read(&m, g_two));
    tk_pm_source *src = NULL;
    for (size_t i = 0; i < m->nsources; i++)
        if (tk_ends_with(m->sources[i].path, "/op_b.c"))
            src = &m->sources[i];
    assert_non_null(src);
    char *text = strndup((const char *)src->data, src->len);
    const char *decl = "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"256\", \"128\", \"512\");";
    char *at = strstr(text, decl), *heur = strstr(text, "TK_HEURISTIC(b_kernel");
    assert_non_null(at);
    assert_non_null(heur);
    memcpy(heur, "//", 2); /* the heuristic commented out */
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_add(&sb, text, (size_t)(at - text));
    tk_strbuf_adds(&sb, "TK_AUTOTUNE(b_kernel, \"n\", \"BLOCK\", \"64\", \"32\");");
    tk_strbuf_adds(&sb, at + strlen(decl));
    free(src->data);
    src->len = sb.len;
    src->data = (unsigned char *)tk_strbuf_detach(&sb);
    tk_sha256_hex(src->data, src->len, src->sha256);
    free(text);
    path_in(prog, sizeof prog, "two-edited.tkprog");
    tk_assert_ok(tk_tkprog_write(m, prog));
    tk_program_model_free(m);

    path_in(pkg, sizeof pkg, "two-edited.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", prog, "-o", pkg, "--no-cache");
    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, pkg, NULL));
    assert_int_equal(f->ntunes, 1);
    const tk_pkg_tune *t = &f->tunes[0];
    assert_int_equal(t->nconfigs, 3);
    assert_int_equal(t->values[0][0], 256);
    assert_int_equal(t->values[2][0], 512);
    assert_non_null(t->hparam);
    assert_string_equal(t->hparam, "EVEN");
    assert_int_equal(t->nh, 2);
    assert_int_equal(t->nfatbins, 2); /* the default configuration, with EVEN 0 and 1 */
    tk_pkgfile_free(f);
}

/* A program exported before program.json recorded the declarations (examples/mlp, exported on
 * 2026-11-23), whose sources use TK_AUTOTUNE: compile refuses it, saying to export again. */
static void tuning__a_program_without_the_record_is_refused_with_the_fix(void **state)
{
    (void)state;
    char pkg[640], *err = NULL;
    path_in(pkg, sizeof pkg, "pre-tuning.tkpkg");
    CLI(4, NULL, NULL, &err, "compile", TK_AOTI_PRE_TUNING, "-o", pkg, "--no-cache");
    assert_contains(err, "program 'mlp' was exported before program.json recorded TK_AUTOTUNE declarations, and "
                         "examples/mlp/silu_op.c has some: export it again with this tkexport");
    free(err);
    struct stat st;
    assert_int_not_equal(stat(pkg, &st), 0); /* nothing half-written */
}

static void compile__cache_reuses_and_recompiles_only_the_changed_kernel(void **state)
{
    (void)state;
    NEED_NVCC();
    char pkg[640], cache[640], aoti[700], src[640], prog[640], cu[700], *err = NULL;
    path_in(pkg, sizeof pkg, "cache.tkpkg");
    path_in(cache, sizeof cache, "cache-dir");
    snprintf(aoti, sizeof aoti, "%s/aoti", cache);
    path_in(src, sizeof src, "three-cache");
    copy_tree(TK_AOTI_FIXTURE, src);
    path_in(prog, sizeof prog, "two-cache.tkprog");
    CLI(0, NULL, NULL, NULL, "export", src, "--program", "two", "--no-cache", "-o", prog);
    CLI(0, NULL, NULL, &err, "compile", prog, "-o", pkg, "--cache-dir", cache);
    /* b's default configuration with EVEN 0 and 1 */
    assert_contains(err, "2 kernel sources as 3 fatbins with the tuning variants, for sm_90 (0 from the cache), host code\n");
    assert_int_equal(count_files(aoti), 4); /* a, b twice and the host object */
    free(err);
    CLI(0, NULL, NULL, &err, "compile", prog, "-o", pkg, "--cache-dir", cache);
    assert_contains(err, "2 kernel sources as 3 fatbins with the tuning variants, for sm_90 (3 from the cache), host code from the cache\n");
    assert_int_equal(count_files(aoti), 4);
    free(err);

    /* b.cu changes: only its fatbin is compiled again */
    snprintf(cu, sizeof cu, "%s/b.cu", src);
    size_t len = 0;
    char *text = tk_test_read_file(cu, &len);
    char *at = strstr(text, "* 2.0f");
    assert_non_null(at);
    at[2] = '4';
    tk_test_write_file(cu, text, len);
    free(text);
    CLI(0, NULL, NULL, NULL, "export", src, "--program", "two", "--no-cache", "-o", prog);
    CLI(0, NULL, NULL, &err, "compile", prog, "-o", pkg, "--cache-dir", cache);
    assert_contains(err, "2 kernel sources as 3 fatbins with the tuning variants, for sm_90 (1 from the cache), host code from the cache\n");
    assert_int_equal(count_files(aoti), 6);
    free(err);
}

static void compile__manifest_lists_every_entry_with_its_digest(void **state)
{
    (void)state;
    NEED_NVCC();
    char pkg[640];
    path_in(pkg, sizeof pkg, "digests.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", pkg, "--no-cache");
    size_t len = 0;
    char *data = tk_test_read_file(pkg, &len);
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, data, len, pkg, ".tkpkg", 100));
    cJSON *manifest = NULL;
    size_t nfiles = 0;
    char *dir = tk_test_temp_dir();
    for (size_t i = 0; i < tk_zip_count(z); i++) {
        unsigned char *bytes;
        size_t n;
        tk_assert_ok(tk_zip_read(z, i, 1u << 30, &bytes, &n));
        if (!strcmp(tk_zip_name(z, i), "manifest.json")) {
            manifest = cJSON_ParseWithLength((const char *)bytes, n);
        } else if (strcmp(tk_zip_name(z, i), "manifest.sig") != 0) {
            char path[800];
            snprintf(path, sizeof path, "%s/%zu", dir, i);
            tk_test_write_file(path, bytes, n);
            nfiles++;
        }
        free(bytes);
    }
    assert_non_null(manifest);
    const cJSON *entries = cJSON_GetObjectItem(manifest, "entries");
    assert_int_equal(cJSON_GetArraySize(entries), nfiles);
    /* each listed entry: the archive's bytes, their size and sha256sum's digest */
    for (size_t i = 0; i < tk_zip_count(z); i++) {
        const char *name = tk_zip_name(z, i);
        if (!strcmp(name, "manifest.json") || !strcmp(name, "manifest.sig"))
            continue;
        const cJSON *e, *found = NULL;
        cJSON_ArrayForEach(e, entries) if (!strcmp(cJSON_GetObjectItem(e, "path")->valuestring, name)) found = e;
        if (!found)
            fail_msg("entry '%s' is not in the manifest", name);
        char path[800], *sum = NULL;
        snprintf(path, sizeof path, "%s/%zu", dir, i);
        const char *argv[] = {"sha256sum", path, NULL};
        assert_int_equal(tk_test_run(argv, NULL, &sum, NULL), 0);
        assert_memory_equal(sum, cJSON_GetObjectItem(found, "sha256")->valuestring, 64);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal((double)st.st_size, cJSON_GetObjectItem(found, "size")->valuedouble);
        free(sum);
    }
    cJSON_Delete(manifest);
    tk_zip_close(z);
    free(data);
    tk_test_rm_tree(dir);
}

static void compile__broken_kernel_reports_nvcc_message_and_leaves_nothing(void **state)
{
    (void)state;
    NEED_NVCC();
    char src[640], cu[700], prog[640], pkg[640], *err = NULL;
    path_in(src, sizeof src, "three-broken");
    copy_tree(TK_AOTI_FIXTURE, src);
    snprintf(cu, sizeof cu, "%s/b.cu", src);
    size_t len = 0;
    char *text = tk_test_read_file(cu, &len);
    char *at = strstr(text, "y[i] = x[i] * 2.0f;");
    assert_non_null(at);
    /* an error only nvcc sees: export refuses a kernel the analyzer (clang) cannot parse, so the
       broken branch is one clang skips (it does not define __NVCC__) */
    static const char broken[] = "\n#ifdef __NVCC__\ny[i] = x[i] * 2.0f + ;\n#else\ny[i] = x[i] * 2.0f;\n#endif\n";
    size_t head = (size_t)(at - text), tail = len - head - strlen("y[i] = x[i] * 2.0f;");
    char *edited = malloc(len + sizeof broken);
    assert_non_null(edited);
    memcpy(edited, text, head);
    memcpy(edited + head, broken, sizeof broken - 1);
    memcpy(edited + head + sizeof broken - 1, at + strlen("y[i] = x[i] * 2.0f;"), tail);
    tk_test_write_file(cu, edited, head + sizeof broken - 1 + tail);
    free(edited);
    free(text);
    int line = tk_line_of(cu, "y[i] = x[i] * 2.0f + ;");
    path_in(prog, sizeof prog, "broken.tkprog");
    CLI(0, NULL, NULL, NULL, "export", src, "--program", "two", "--no-cache", "-o", prog);

    /* a package already there stays as it was */
    path_in(pkg, sizeof pkg, "broken.tkpkg");
    tk_test_write_file(pkg, "old", 3);
    CLI(1, NULL, NULL, &err, "compile", prog, "-o", pkg, "--no-cache");
    char where[64];
    snprintf(where, sizeof where, "b.cu(%d): error", line); /* nvcc's own message, its line */
    assert_contains(err, where);
    assert_contains(err, "three-broken/b.cu does not compile (nvcc exited with status");
    char *kept = tk_test_read_file(pkg, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(kept, "old", 3);
    free(kept);
    free(err);
    /* no temporary file beside it */
    assert_int_equal(count_files(g_dir) > 0, 1);
    char cmd[800], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '^\\.broken' || true", g_dir);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    tk_test_run(argv, NULL, &out, NULL);
    assert_int_equal(atoi(out), 0);
    free(out);
}

static void compile__missing_nvcc_is_one_line(void **state)
{
    (void)state;
    char pkg[640], *err = NULL;
    path_in(pkg, sizeof pkg, "nonvcc.tkpkg");
    const char *env[] = {"TKEXPORT_NVCC=/nonexistent/bin/nvcc", NULL};
    CLI(6, env, NULL, &err, "compile", g_one, "-o", pkg, "--no-cache");
    assert_string_equal(err, "tkexport compile: nvcc not found: TKEXPORT_NVCC is '/nonexistent/bin/nvcc', which is "
                             "not an executable\n");
    assert_false(file_exists(pkg));
    free(err);
    /* no TKEXPORT_NVCC, no CUDA_HOME, /usr/local/cuda elsewhere: what was looked at is named */
    const char *env2[] = {"CUDA_HOME=/nonexistent/cuda", "PATH=/usr/bin:/bin", NULL};
    CLI(g_have_nvcc ? 0 : 6, env2, NULL, &err, "compile", g_one, "-o", pkg, "--no-cache");
    if (!g_have_nvcc)
        assert_contains(err, "nvcc not found (looked at /nonexistent/cuda/bin/nvcc, /usr/local/cuda/bin/nvcc and PATH)");
    free(err);
}

static void compile__bad_usage_is_exit_2(void **state)
{
    (void)state;
    char pkg[640], *err = NULL;
    path_in(pkg, sizeof pkg, "usage.tkpkg");
    CLI(2, NULL, NULL, &err, "compile", g_one, "-o", pkg, "--arch", "sm_12");
    assert_contains(err, "unknown architecture 'sm_12': expected sm_XX");
    free(err);
    CLI(2, NULL, NULL, &err, "compile", g_one, "-o", pkg, "--arch", "compute_90");
    assert_contains(err, "unknown architecture 'compute_90'");
    free(err);
    CLI(2, NULL, NULL, &err, "compile", g_one);
    assert_contains(err, "no -o OUT.tkpkg given");
    free(err);
    CLI(2, NULL, NULL, &err, "compile", "/nonexistent.tkprog", "-o", pkg);
    assert_contains(err, "'/nonexistent.tkprog' does not exist");
    free(err);
    CLI(0, NULL, NULL, NULL, "compile", "--help");
    assert_false(file_exists(pkg));
}

/* Without --sign-key or TKEXPORT_SIGN_KEY: the per-user key under XDG_CONFIG_HOME, made on the
 * first compile (one line on stderr) and trusted on this machine; --no-sign: an unsigned package;
 * inspect says who signed and whether this machine trusts the key. */
static void compile__signs_with_the_per_user_key_made_on_first_use(void **state)
{
    (void)state;
    char cfg[640], env_cfg[700], pkg[640], unsigned_pkg[640], key[700], trust[700], *err = NULL, *out = NULL;
    path_in(cfg, sizeof cfg, "user-config");
    path_in(pkg, sizeof pkg, "user-signed.tkpkg");
    path_in(unsigned_pkg, sizeof unsigned_pkg, "unsigned.tkpkg");
    snprintf(env_cfg, sizeof env_cfg, "XDG_CONFIG_HOME=%s", cfg);
    snprintf(key, sizeof key, "%s/tkexport/signing_key", cfg);
    snprintf(trust, sizeof trust, "%s/tkexport/trusted_keys", cfg);
    /* empty variables count as unset */
    const char *env[] = {env_cfg, "TKEXPORT_SIGN_KEY=", "TKEXPORT_TRUST_FILE=", NULL};
    CLI(0, env, NULL, &err, "compile", g_builtin, "-o", pkg, "--no-cache");
    char want[1600];
    snprintf(want, sizeof want, "tkexport compile: created your signing key '%s' (key id ", key);
    assert_contains(err, want);
    snprintf(want, sizeof want, ") and added it to this machine's trusted keys in '%s'\n", trust);
    assert_contains(err, want);
    assert_contains(err, "bytes, signed by key ");
    free(err);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *trusted = tk_test_read_file(trust, NULL);
    assert_non_null(trusted);
    assert_true(!strncmp(trusted, "ed25519:", 8));
    /* the second compile uses it, quietly */
    CLI(0, env, NULL, &err, "compile", g_builtin, "-o", pkg, "--no-cache");
    assert_null(strstr(err, "created your signing key"));
    free(err);
    char *again = tk_test_read_file(trust, NULL);
    assert_string_equal(again, trusted);
    free(again);
    /* inspect: the signer, trusted where the key was made, not elsewhere */
    CLI(0, env, &out, NULL, "inspect", pkg);
    snprintf(want, sizeof want, "signed by: %.52s (key id ", trusted);
    assert_contains(out, want);
    assert_contains(out, ", trusted on this machine)\n");
    free(out);
    CLI(0, NULL, &out, NULL, "inspect", pkg);
    assert_contains(out, ", NOT trusted on this machine)\n");
    free(out);
    CLI(0, env, &out, NULL, "inspect", "--format", "json", pkg);
    snprintf(want, sizeof want, "\"signature\": {\"public_key\": \"%.52s\", \"key_id\": \"", trusted);
    assert_contains(out, want);
    assert_contains(out, "\"trusted\": true}");
    free(out);
    /* the package reader with this machine's trust (not the suite's): opens */
    setenv("TKEXPORT_TRUST_FILE", trust, 1);
    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, pkg, NULL));
    assert_true(f->trusted);
    tk_pkgfile_free(f);
    setenv("TKEXPORT_TRUST_FILE", g_trust, 1);
    tk_assert_fails(tk_pkgfile_read(&f, pkg, NULL), TK_EINVAL, "which is not trusted on this machine");

    /* --no-sign: unsigned, said so; inspect shows it, the reader refuses it */
    CLI(0, env, NULL, &err, "compile", g_builtin, "-o", unsigned_pkg, "--no-cache", "--no-sign");
    assert_contains(err, "bytes, unsigned) in ");
    assert_contains(err, "is not signed: tkexport run and tk_package_open refuse it unless unsigned packages are allowed");
    free(err);
    CLI(0, env, &out, NULL, "inspect", unsigned_pkg);
    assert_contains(out, "\nunsigned (no manifest.sig");
    free(out);
    CLI(0, env, &out, NULL, "inspect", "--format", "json", unsigned_pkg);
    assert_contains(out, "\"signature\": null");
    free(out);
    tk_assert_fails(tk_pkgfile_read(&f, unsigned_pkg, NULL), TK_EINVAL, "is not signed; refusing to run it");
    /* keys that cannot be used */
    CLI(2, env, NULL, &err, "compile", g_builtin, "-o", unsigned_pkg, "--no-sign", "--sign-key", g_key);
    assert_contains(err, "--sign-key and --no-sign contradict each other");
    free(err);
    CLI(2, env, NULL, &err, "compile", g_builtin, "-o", pkg, "--sign-key", "/nonexistent/key");
    assert_contains(err, "tkexport compile: --sign-key '/nonexistent/key' does not exist");
    free(err);
    CLI(4, env, NULL, &err, "compile", g_builtin, "-o", pkg, "--sign-key", g_builtin); /* a malformed key file */
    assert_contains(err, "is not a private key in PEM (PKCS#8) without a passphrase");
    free(err);
    free(trusted);
}

static void compile__autotune_compiles_every_configuration_or_records_the_default(void **state)
{
    (void)state;
    NEED_NVCC();
    char pkg[640], plain[640], *err = NULL;
    path_in(pkg, sizeof pkg, "tuned.tkpkg");
    path_in(plain, sizeof plain, "untuned.tkpkg");
    int gpu = tk_cuda_available() == 0;
    tk_error_clear();
    CLI(0, NULL, NULL, &err, "compile", g_two, "-o", pkg, "--no-cache", "--autotune");
    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, pkg, NULL));
    assert_int_equal(f->ntunes, 1);
    const tk_pkg_tune *t = &f->tunes[0];
    assert_string_equal(t->kernel, "b_kernel");
    assert_string_equal(t->key, "n");
    assert_int_equal(t->nparams, 1);
    assert_string_equal(t->params[0], "BLOCK");
    assert_int_equal(t->nconfigs, 3);
    assert_int_equal(t->values[1][0], 128);
    assert_string_equal(t->hparam, "EVEN");
    assert_int_equal(t->nh, 2);
    assert_int_equal(t->hvalues[1], 1);
    if (gpu) {
        /* every configuration compiled (with EVEN 0 and 1) and measured at n = 1, 2, 4, ..., 4096 */
        assert_contains(err, "autotune: 1 kernel tuned");
        assert_int_equal(t->nfatbins, 6);
        assert_true(t->measured);
        assert_int_equal(t->nrows, 13);
        for (size_t r = 0; r < t->nrows; r++) {
            assert_int_equal(t->rows[r].bucket, (int)r);
            for (int c = 0; c < 3; c++)
                assert_true(t->rows[r].times_us[c] > 0);
            assert_true(t->rows[r].times_us[t->rows[r].winner] <= t->rows[r].times_us[0]);
        }
    } else {
        /* no GPU: the default only, and the summary says so */
        assert_contains(err, "autotune: nothing measured: no CUDA");
        assert_contains(err, "the declared default configurations are recorded");
        assert_int_equal(t->nfatbins, 2); /* the default, with EVEN 0 and 1 */
        assert_false(t->measured);
        assert_int_equal(t->nrows, 0);
        for (int b = 0; b < TK_TUNE_BUCKETS; b++)
            assert_int_equal(t->table[b], 0);
    }
    tk_pkgfile_free(f);
    free(err);
    /* without --autotune: the default configuration only, not measured */
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", plain, "--no-cache");
    tk_assert_ok(tk_pkgfile_read(&f, plain, NULL));
    assert_int_equal(f->tunes[0].nfatbins, 2);
    assert_false(f->tunes[0].measured);
    tk_pkgfile_free(f);
}

/* ---- the reader on hostile packages --------------------------------------------------------- */

typedef struct pkg_parts {
    size_t n;
    char *names[16];
    unsigned char *data[16];
    size_t len[16];
    cJSON *manifest;
} pkg_parts;

static void parts_load(pkg_parts *p, const char *pkg)
{
    memset(p, 0, sizeof(*p));
    size_t len = 0;
    char *data = tk_test_read_file(pkg, &len);
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, data, len, pkg, ".tkpkg", 100));
    for (size_t i = 0; i < tk_zip_count(z) && p->n < 16; i++) {
        unsigned char *b;
        size_t n;
        tk_assert_ok(tk_zip_read(z, i, 1u << 30, &b, &n));
        if (!strcmp(tk_zip_name(z, i), "manifest.json")) {
            p->manifest = cJSON_ParseWithLength((const char *)b, n);
            free(b);
            continue;
        }
        if (!strcmp(tk_zip_name(z, i), "manifest.sig")) { /* the parts make unsigned packages */
            free(b);
            continue;
        }
        p->names[p->n] = strdup(tk_zip_name(z, i));
        p->data[p->n] = b;
        p->len[p->n++] = n;
    }
    tk_zip_close(z);
    free(data);
}

static void parts_free(pkg_parts *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->names[i]);
        free(p->data[i]);
    }
    cJSON_Delete(p->manifest);
}

/* The parts as an archive (the manifest as given: raw text, or the parts' own). */
static void *parts_zip(pkg_parts *p, const char *manifest_text, size_t *len)
{
    tk_zip_entry e[17];
    char *text = manifest_text ? NULL : cJSON_Print(p->manifest);
    for (size_t i = 0; i < p->n; i++)
        e[i] = (tk_zip_entry){p->names[i], p->data[i], p->len[i], 1};
    e[p->n] = (tk_zip_entry){"manifest.json", manifest_text ? manifest_text : text,
                             strlen(manifest_text ? manifest_text : text), 0};
    void *zip;
    tk_assert_ok(tk_zip_write_mem(&zip, len, e, p->n + 1, "the test package"));
    cJSON_free(text);
    return zip;
}

static cJSON *manifest_entry(pkg_parts *p, const char *path)
{
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(p->manifest, "entries")) if (
        !strcmp(cJSON_GetObjectItem(e, "path")->valuestring, path)) return e;
    fail_msg("no entry '%s'", path);
    return NULL;
}

#define assert_refused(p, manifest_text, text)                                                  \
    do {                                                                                        \
        size_t tk__len;                                                                         \
        void *tk__zip = parts_zip((p), (manifest_text), &tk__len);                              \
        tk_pkgfile *tk__f = NULL;                                                               \
        tk_assert_fails(tk_pkgfile_read_mem(&tk__f, tk__zip, tk__len, "'t.tkpkg'", &g_unsigned_ok), TK_EFORMAT, (text)); \
        assert_null(tk__f);                                                                     \
        free(tk__zip);                                                                          \
    } while (0)

static void reader__refuses_hostile_packages(void **state)
{
    (void)state;
    char pkg[640];
    path_in(pkg, sizeof pkg, "builtin-good.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", g_builtin, "-o", pkg, "--no-cache");
    pkg_parts p;
    parts_load(&p, pkg);
    assert_int_equal(p.n, 2); /* program.json, weights.safetensors */

    /* the parts as they are: read fine */
    size_t len = 0;
    void *zip = parts_zip(&p, NULL, &len);
    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read_mem(&f, zip, len, "'t.tkpkg'", &g_unsigned_ok));
    tk_pkgfile_free(f);

    /* truncated: not a zip any more */
    tk_assert_fails(tk_pkgfile_read_mem(&f, zip, len / 2, "'t.tkpkg'", &g_unsigned_ok), TK_EFORMAT,
                    "'t.tkpkg' is not a .tkpkg");
    /* a zip without a manifest */
    tk_zip_entry only = {"program.json", p.data[0], p.len[0], 0};
    void *nomani;
    size_t nlen;
    tk_assert_ok(tk_zip_write_mem(&nomani, &nlen, &only, 1, "t"));
    tk_assert_fails(tk_pkgfile_read_mem(&f, nomani, nlen, "'t.tkpkg'", &g_unsigned_ok), TK_EFORMAT, "no manifest.json");
    free(nomani);
    /* a huge declared size in the central directory of the deflated manifest */
    unsigned char *cd = memmem(zip, len, "PK\001\002", 4), *last = NULL;
    while (cd) {
        last = cd;
        cd = memmem(cd + 4, len - (size_t)(cd + 4 - (unsigned char *)zip), "PK\001\002", 4);
    }
    assert_non_null(last);
    memcpy(last + 24, "\xff\xff\xff\x7f", 4); /* uncompressed size of the last entry (manifest.json) */
    assert_int_not_equal(tk_pkgfile_read_mem(&f, zip, len, "'t.tkpkg'", &g_unsigned_ok), 0);
    free(zip);

    /* one byte of an entry changed: its digest no longer matches */
    p.data[1][p.len[1] - 1] ^= 1;
    assert_refused(&p, NULL, "entry 'weights.safetensors' has SHA-256");
    p.data[1][p.len[1] - 1] ^= 1;

    /* the manifest's format, version, JSON */
    assert_refused(&p, "{\"format\": \"tkprog\", \"version\": 1}", "not a tkpkg file (manifest.json has format 'tkprog'");
    assert_refused(&p, "{\"format\": \"tkpkg\", \"version\": 3}",
                   "'t.tkpkg' is a version 3 package; this runtime reads version 2 (open it with the tkexport");
    assert_refused(&p, "{\"format\": \"tkpkg\", \"version\": 1}",
                   "'t.tkpkg' is a version 1 package; this runtime reads version 2 (recompile it with tkexport compile)");
    assert_refused(&p, "{\"format\": \"tkpkg\", \"vers", "manifest.json is not valid JSON");

    /* sizes: lying, or beyond any bound */
    cJSON *w = manifest_entry(&p, "weights.safetensors");
    double size = cJSON_GetObjectItem(w, "size")->valuedouble;
    cJSON_SetNumberValue(cJSON_GetObjectItem(w, "size"), size + 1);
    assert_refused(&p, NULL, "entry 'weights.safetensors' is 16 bytes, the manifest says 17");
    cJSON_SetNumberValue(cJSON_GetObjectItem(w, "size"), 1e15);
    assert_refused(&p, NULL, "'size' is missing or not a whole number");
    cJSON_SetNumberValue(cJSON_GetObjectItem(w, "size"), size);

    /* names: outside the package, or not listed */
    cJSON *path = cJSON_GetObjectItem(w, "path");
    const char *bad_names[] = {"../weights.safetensors", "/weights.safetensors", "a//b", "a\\b", "./x"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        cJSON_SetValuestring(path, bad_names[i]);
        assert_refused(&p, NULL, "is not a safe relative path");
    }
    cJSON_SetValuestring(path, "weights2.safetensors");
    assert_refused(&p, NULL, "entry 'weights.safetensors' is not listed in manifest.json");
    cJSON_SetValuestring(path, "weights.safetensors");
    free(p.names[1]);
    p.names[1] = strdup("weights.safetensorz");
    assert_refused(&p, NULL, "is not listed in manifest.json");
    free(p.names[1]);
    p.names[1] = strdup("weights.safetensors");

    /* an op whose kernel is not in the package */
    cJSON *op = cJSON_GetArrayItem(cJSON_GetObjectItem(p.manifest, "ops"), 0);
    cJSON_AddItemToArray(cJSON_GetObjectItem(op, "kernels"), cJSON_CreateString("ghost_kernel"));
    assert_refused(&p, NULL, "kernel 'ghost_kernel' of op 'tk::add' is not in the manifest's kernel table");
    parts_free(&p);
}

static void reader__refuses_hostile_tuning_tables(void **state)
{
    (void)state;
    NEED_NVCC();
    char pkg[640];
    path_in(pkg, sizeof pkg, "tuning-good.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", g_two, "-o", pkg, "--no-cache");
    pkg_parts p;
    parts_load(&p, pkg);
    cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(p.manifest, "tuning"), 0);
    assert_non_null(t);
    /* a table row whose winner was never compiled */
    cJSON *row = cJSON_CreateObject();
    cJSON_AddNumberToObject(row, "bucket", 3);
    cJSON_AddNumberToObject(row, "key", 8);
    cJSON_AddNumberToObject(row, "winner", 2);
    cJSON *times = cJSON_AddArrayToObject(row, "times_us");
    for (int i = 0; i < 3; i++)
        cJSON_AddItemToArray(times, cJSON_CreateNumber(1));
    cJSON_AddItemToArray(cJSON_GetObjectItem(t, "table"), row);
    assert_refused(&p, NULL, "table row 0 of kernel 'b_kernel' is malformed");
    cJSON_SetNumberValue(cJSON_GetObjectItem(row, "winner"), 0);
    cJSON_SetNumberValue(cJSON_GetObjectItem(row, "bucket"), 64);
    assert_refused(&p, NULL, "table row 0 of kernel 'b_kernel' is malformed");
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(t, "table"), 0);
    /* a fatbin that is not an entry, a variant under the wrong name, a configuration too short */
    cJSON *fatbins = cJSON_GetObjectItem(t, "fatbins");
    assert_int_equal(cJSON_GetArraySize(fatbins), 2); /* EVEN=0 and EVEN=1 of the default */
    char *second = strdup(cJSON_GetArrayItem(fatbins, 1)->valuestring);
    cJSON_ReplaceItemInArray(fatbins, 1, cJSON_CreateString("kernels/ghost@c1.fatbin"));
    assert_refused(&p, NULL, "fatbin 1 of kernel 'b_kernel' is not an entry of the package");
    cJSON_ReplaceItemInArray(fatbins, 1, cJSON_CreateString("program.json"));
    assert_refused(&p, NULL, "fatbin 1 of kernel 'b_kernel' is 'program.json', expected a name ending in '@c1.fatbin'");
    cJSON_AddItemToArray(fatbins, cJSON_CreateString(second));
    assert_refused(&p, NULL, "kernel 'b_kernel' needs parameters, configurations and a fatbin per variant (2, or 6");
    cJSON_DeleteItemFromArray(fatbins, 2);
    cJSON_ReplaceItemInArray(fatbins, 1, cJSON_CreateString(second));
    free(second);
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(t, "configs"), 0, cJSON_CreateIntArray((const int[]){1, 2}, 2));
    assert_refused(&p, NULL, "configuration 0 does not have 1 values");
    parts_free(&p);
}

/* Random damage to a valid package (flipped bytes, truncation) is refused with a message or, when
 * it hits nothing that matters, read; never a crash or an unbounded allocation (CI runs this
 * under ASan and UBSan). */
static void reader__survives_random_damage(void **state)
{
    (void)state;
    char pkg[640];
    path_in(pkg, sizeof pkg, g_have_nvcc ? "damage.tkpkg" : "damage-builtin.tkpkg");
    CLI(0, NULL, NULL, NULL, "compile", g_have_nvcc ? g_two : g_builtin, "-o", pkg, "--no-cache");
    size_t len = 0;
    unsigned char *good = (unsigned char *)tk_test_read_file(pkg, &len);
    assert_non_null(good);
    unsigned char *bad = malloc(len);
    assert_non_null(bad);
    uint32_t r = 0x12345678u;
    int refused = 0;
    for (int round = 0; round < 400; round++) {
        memcpy(bad, good, len);
        size_t n = len;
        int flips = 1 + round % 4;
        for (int i = 0; i < flips; i++) {
            r ^= r << 13, r ^= r >> 17, r ^= r << 5;
            bad[r % len] ^= (unsigned char)(1u << (r >> 29));
        }
        if (round % 5 == 4) {
            r ^= r << 13, r ^= r >> 17, r ^= r << 5;
            n = r % len;
        }
        tk_pkgfile *f = NULL;
        int rc = tk_pkgfile_read_mem(&f, bad, n, "'damaged.tkpkg'", NULL);
        if (rc) {
            assert_null(f);
            assert_non_null(strstr(tk_error_last(), "damaged.tkpkg"));
            refused++;
        }
        tk_pkgfile_free(f);
    }
    /* most damage is caught (CRCs, digests); what is not touched bytes nothing reads */
    assert_true(refused > 300);
    free(bad);
    free(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compile__tree_shaking_packs_only_the_kernels_the_program_needs),
        cmocka_unit_test(compile__only_builtin_ops_needs_no_compiler),
        cmocka_unit_test(compile__same_input_gives_same_bytes),
        cmocka_unit_test(compile__cache_reuses_and_recompiles_only_the_changed_kernel),
        cmocka_unit_test(compile__manifest_lists_every_entry_with_its_digest),
        cmocka_unit_test(compile__broken_kernel_reports_nvcc_message_and_leaves_nothing),
        cmocka_unit_test(compile__missing_nvcc_is_one_line),
        cmocka_unit_test(compile__bad_usage_is_exit_2),
        cmocka_unit_test(compile__signs_with_the_per_user_key_made_on_first_use),
        cmocka_unit_test(compile__autotune_compiles_every_configuration_or_records_the_default),
        cmocka_unit_test(reader__refuses_hostile_packages),
        cmocka_unit_test(reader__refuses_hostile_tuning_tables),
        cmocka_unit_test(tuning__read_at_export_recorded_and_compiled_from_the_record),
        cmocka_unit_test(tuning__a_program_without_the_record_is_refused_with_the_fix),
        cmocka_unit_test(tuning__strings_are_read_as_the_compiler_makes_them),
        cmocka_unit_test(tuning__compile_uses_the_record_not_the_sources),
        cmocka_unit_test(tuning__export_refuses_more_variants_than_a_package_holds),
        cmocka_unit_test(reader__survives_random_damage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
