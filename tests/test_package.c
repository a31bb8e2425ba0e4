/* The package runtime on the CPU (runtime/exec.c, runtime/package.c): the executor over a model
 * built here (results against a reference computed here, plans per shape signature, input and
 * output checks and their messages, guards, profiles, several sessions on several threads), and
 * .tkpkg files written here opened and run end to end, with and without a host object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <pthread.h>
#include <unistd.h>

#include "rt_internal.h"
#include "tk_test_package.h"

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* A program and its weights, kept for the length of one test. */
typedef struct fixture {
    tk_program_model *m;
    void *weights;
    size_t wlen;
    tk_exec_program *p;
} fixture;

static void fixture_init(fixture *fx, tk_program_model *m)
{
    fx->m = m;
    fx->weights = tp_weights(&fx->wlen);
    tk_assert_ok(tk_exec_program_new(&fx->p, fx->m, fx->weights, fx->wlen, "'test'", NULL));
}

static void fixture_release(fixture *fx)
{
    tk_exec_program_free(fx->p);
    free(fx->weights);
    tk_program_model_free(fx->m);
}

/* Runs s on x into two new outputs, checked against the reference; frees them. */
static void run_and_check(tk_session *s, tk_tensor *x)
{
    tk_tensor *out[2] = {NULL, NULL};
    tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
    tp_check(x, out[0], out[1]);
    tk_tensor_free(out[0]);
    tk_tensor_free(out[1]);
}

/* --- the executor ------------------------------------------------------------------------------ */

static void exec__cpu_run_matches_reference(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    fixture_init(&fx, tp_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    int64_t batches[] = {1, 5, 17, 64};
    for (size_t i = 0; i < 4; i++) {
        tk_tensor *x = tp_input(batches[i], (int)i);
        run_and_check(s, x);
        tk_tensor_free(x);
    }
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__plans_are_cached_per_signature_in_one_arena(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    fixture_init(&fx, tp_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    int64_t batches[] = {9, 5, 9, 5, 9};
    for (size_t i = 0; i < 5; i++) {
        tk_tensor *x = tp_input(batches[i], (int)i);
        run_and_check(s, x);
        tk_tensor_free(x);
    }
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.plans, 2);
    assert_int_equal(st.arena_grows, 1); /* batch 5 fits where batch 9 was planned */
    assert_int_equal(st.last_mode, TK_EXEC_EAGER);
    /* one intermediate (silu's output, 9 x 3 floats) lives in the arena; h and y are outputs */
    assert_int_equal(st.arena_bytes, 9 * TP_OUT * sizeof(float));
    tk_tensor *x = tp_input(40, 3);
    run_and_check(s, x);
    tk_tensor_free(x);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.plans, 3);
    assert_int_equal(st.arena_grows, 2);
    tk_session_free(s);
    fixture_release(&fx);
}

/* x [n] -> x + x, n in [1, 3000]: more signatures than a session keeps plans for (1024). */
static void exec__least_recently_used_plans_go_beyond_the_cache(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::double"));
    assert_non_null(tk_pm_add_symbol(m, "n", 1, 3000));
    tp_set(m, tk_pm_add_input(m), 0, "x", 1, "n", 0, 0);
    tk_pm_node *n = tk_pm_add_node(m, "tk::add", 2, 1, "model.c", 2);
    n->inputs[0] = 0, n->inputs[1] = 0;
    tp_set(m, &n->outputs[0], 1, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 1, NULL, 1, "n", 0, 0);
    tp_op(m, "tk::add", "(Tensor a, Tensor b) -> Tensor", 1);
    fixture_init(&fx, m);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    /* 1100 sizes, then the first ones again (evicted, planned anew) and the last ones (cached) */
    for (int round = 0; round < 2; round++) {
        for (int64_t k = 1; k <= 1100; k += round ? 99 : 1) {
            float v[1100];
            for (int64_t i = 0; i < k; i++)
                v[i] = (float)(i % 17) - 3.0f;
            tk_tensor *x = tp_f32(1, &k, v), *y = NULL;
            tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
            for (int64_t i = 0; i < k; i++)
                assert_true(((float *)tk_tensor_data(y))[i] == 2 * v[i]);
            tk_tensor_free(x);
            tk_tensor_free(y);
        }
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.plans, 1024);
    }
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__inputs_are_checked_before_anything_runs(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_tensor *out[2] = {NULL, NULL};
    fixture_init(&fx, tp_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    tk_tensor *x = tp_input(3, 0);
    tk_tensor *two[] = {x, x};
    tk_assert_fails(tk_session_run(s, two, 2, out, 2), TK_EINVAL, "program 'test::mlp' takes 1 input, got 2");
    tk_assert_fails(tk_session_run(s, &x, 1, out, 1), TK_EINVAL, "gives 2 outputs, got 1 output slot");
    tk_tensor *null_in = NULL;
    tk_assert_fails(tk_session_run(s, &null_in, 1, out, 2), TK_EINVAL, "input 'x' of program 'test::mlp' is NULL");

    const int64_t big[] = {2000, TP_IN}, wide[] = {3, 100}, flat[] = {12};
    tk_tensor *b = tp_f32(2, big, NULL), *w = tp_f32(2, wide, NULL), *f = tp_f32(1, flat, NULL), *h;
    tk_assert_fails(tk_session_run(s, &b, 1, out, 2), TK_EINVAL, "input 'x' dim 0 is 2000, outside [1, 64] of 'batch'");
    tk_assert_fails(tk_session_run(s, &w, 1, out, 2), TK_EINVAL, "input 'x' dim 1 is 100, expected 4");
    tk_assert_fails(tk_session_run(s, &f, 1, out, 2), TK_EINVAL,
                    "input 'x' has 1 dim, program 'test::mlp' declares f32[batch, 4]");
    const int64_t ok[] = {3, TP_IN};
    tk_assert_ok(tk_tensor_new(&h, NULL, CPU, TK_F16, 2, ok));
    tk_assert_fails(tk_session_run(s, &h, 1, out, 2), TK_EINVAL, "input 'x' is f16, program 'test::mlp' declares f32");
    assert_null(out[0]);
    assert_null(out[1]);
    tk_exec_stats st;
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.plans, 0);
    tk_tensor_free(b);
    tk_tensor_free(w);
    tk_tensor_free(f);
    tk_tensor_free(h);
    tk_tensor_free(x);
    tk_session_free(s);
    fixture_release(&fx);
}

/* a [n], b [n], c [2*n] -> a + b, and c back (an output that is an input, copied). */
static tk_program_model *pair_model(const char *guard)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::pair"));
    assert_non_null(tk_pm_add_symbol(m, "n", 1, 8));
    tp_set(m, tk_pm_add_input(m), 0, "a", 1, "n", 0, 0);
    tp_set(m, tk_pm_add_input(m), 1, "b", 1, "n", 0, 0);
    tp_set(m, tk_pm_add_input(m), 2, "c", 1, "2*n", 0, 0);
    tk_pm_node *n = tk_pm_add_node(m, "tk::add", 2, 1, "model.c", 3);
    n->inputs[0] = 0, n->inputs[1] = 1;
    tp_set(m, &n->outputs[0], 3, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 3, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 2, NULL, 1, "2*n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 3, NULL, 1, "n", 0, 0);
    tp_op(m, "tk::add", "(Tensor a, Tensor b) -> Tensor", 1);
    if (guard)
        tk_assert_ok(tk_pm_add_guard(m, guard));
    return m;
}

static void exec__symbols_agree_across_inputs_and_expressions(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_tensor *out[3] = {NULL, NULL, NULL};
    fixture_init(&fx, pair_model(NULL));
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    const int64_t n4[] = {4}, n3[] = {3}, n8[] = {8}, n7[] = {7};
    const float av[] = {1, 2, 3, 4}, bv[] = {10, 20, 30, 40}, cv[] = {1, 2, 3, 4, 5, 6, 7, 8};
    tk_tensor *a = tp_f32(1, n4, av), *b = tp_f32(1, n4, bv), *b3 = tp_f32(1, n3, bv), *c = tp_f32(1, n8, cv),
              *c7 = tp_f32(1, n7, cv);
    tk_tensor *bad_n[] = {a, b3, c}, *bad_c[] = {a, b, c7}, *good[] = {a, b, c};
    tk_assert_fails(tk_session_run(s, bad_n, 3, out, 3), TK_EINVAL, "input 'b' dim 0 is 3 but 'n' is 4 (input 'a' dim 0)");
    tk_assert_fails(tk_session_run(s, bad_c, 3, out, 3), TK_EINVAL, "input 'c' dim 0 is 7, expected 8 (2*n)");
    tk_assert_ok(tk_session_run(s, good, 3, out, 3));
    for (int i = 0; i < 4; i++) {
        assert_true(((float *)tk_tensor_data(out[0]))[i] == av[i] + bv[i]);
        assert_true(((float *)tk_tensor_data(out[2]))[i] == av[i] + bv[i]);
    }
    assert_ptr_not_equal(out[0], out[2]);
    assert_memory_equal(tk_tensor_data(out[1]), cv, sizeof cv);
    assert_ptr_not_equal(tk_tensor_data(out[1]), tk_tensor_data(c));
    for (int i = 0; i < 3; i++)
        tk_tensor_free(out[i]);
    tk_tensor_free(a);
    tk_tensor_free(b);
    tk_tensor_free(b3);
    tk_tensor_free(c);
    tk_tensor_free(c7);
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__guards_are_checked(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_tensor *out[3] = {NULL, NULL, NULL};
    fixture_init(&fx, pair_model("n % 2 == 0"));
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    const int64_t n3[] = {3}, n6[] = {6};
    tk_tensor *a = tp_f32(1, n3, NULL), *c = tp_f32(1, n6, NULL);
    tk_tensor *in[] = {a, a, c};
    tk_assert_fails(tk_session_run(s, in, 3, out, 3), TK_EINVAL, "program 'test::pair' requires n % 2 == 0");
    tk_tensor_free(a);
    tk_tensor_free(c);
    tk_session_free(s);
    fixture_release(&fx);

    tk_program_model *m = pair_model("2 <= n <= 3");
    fixture_init(&fx, m);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    const int64_t n4[] = {4}, n8[] = {8};
    a = tp_f32(1, n4, NULL), c = tp_f32(1, n8, NULL);
    tk_tensor *in4[] = {a, a, c};
    tk_assert_fails(tk_session_run(s, in4, 3, out, 3), TK_EINVAL, "requires 2 <= n <= 3");
    tk_tensor_free(a);
    tk_tensor_free(c);
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__caller_outputs_are_written_in_place_and_checked(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    fixture_init(&fx, tp_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    tk_tensor *x = tp_input(6, 1);
    const int64_t ys[] = {6, TP_OUT}, wrong[] = {5, TP_OUT};
    tk_tensor *y = tp_f32(2, ys, NULL), *bad = tp_f32(2, wrong, NULL), *h16;
    tk_assert_ok(tk_tensor_new(&h16, NULL, CPU, TK_F16, 2, ys));
    tk_tensor *out[2] = {y, NULL};
    tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
    assert_ptr_equal(out[0], y);
    tp_check(x, y, out[1]);
    tk_tensor_free(out[1]);
    out[1] = bad;
    tk_assert_fails(tk_session_run(s, &x, 1, out, 2), TK_EINVAL,
                    "output 1 is f32 [5, 3], the program gives f32 [6, 3] for these inputs");
    out[1] = h16;
    tk_assert_fails(tk_session_run(s, &x, 1, out, 2), TK_EINVAL, "output 1 is f16 [6, 3]");
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(bad);
    tk_tensor_free(h16);
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__profiles_time_each_node(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    const tk_node_profile *prof;
    fixture_init(&fx, tp_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU));
    tk_tensor *x = tp_input(8, 2);
    run_and_check(s, x);
    assert_int_equal(tk_session_profile(s, &prof), 0);
    tk_assert_ok(tk_session_set_profiling(s, 1));
    run_and_check(s, x);
    assert_int_equal(tk_session_profile(s, &prof), 3);
    assert_string_equal(prof[0].op, "tk::linear");
    assert_string_equal(prof[1].op, "tk::silu");
    assert_string_equal(prof[2].op, "tk::add");
    for (int i = 0; i < 3; i++) {
        assert_true(prof[i].time_us >= 0);
        assert_true(prof[i].bytes > 0); /* the built-in ops declare their cost */
    }
    assert_true(prof[0].flops >= 2.0 * 8 * TP_IN * TP_OUT);
    tk_tensor_free(x);
    tk_session_free(s);
    fixture_release(&fx);
}

static void exec__bad_programs_are_refused(void **state)
{
    (void)state;
    tk_exec_program *p = NULL;
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_program_model *m = tp_model();
    m->params[0].dims[1].value = 5;
    tk_assert_fails(tk_exec_program_new(&p, m, w, wlen, "'t'", NULL), TK_EINVAL,
                    "'t': parameter 'lin.weight' is f32 [3, 4] in weights.safetensors, the program declares f32 [3, 5]");
    assert_null(p);
    m->params[0].dims[1].value = TP_IN;
    m->params[0].name = tk_pm_strdup(m, "lin.missing");
    tk_assert_fails(tk_exec_program_new(&p, m, w, wlen, "'t'", NULL), TK_EINVAL,
                    "parameter 'lin.missing' is not in weights.safetensors");
    tk_program_model_free(m);
    m = tp_model();
    m->nodes[0].inputs[0] = 5;
    tk_assert_fails(tk_exec_program_new(&p, m, w, wlen, "'t'", NULL), TK_EINVAL, "node 0 (op 'tk::linear') reads value 5");
    tk_program_model_free(m);
    m = pair_model("n ~ 3");
    tk_assert_fails(tk_exec_program_new(&p, m, w, wlen, "'t'", NULL), TK_EINVAL, "guard 'n ~ 3'");
    tk_program_model_free(m);
    free(w);
}

typedef struct worker {
    tk_exec_program *p;
    int seed;
    int failures;
    float sums[8];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    tk_session *s;
    if (tk_exec_session_new(&s, w->p, CPU)) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < 8; i++) {
        tk_tensor *x = tp_input(1 + (i * 7) % TP_MAX_BATCH, i), *out[2] = {NULL, NULL};
        if (tk_session_run(s, &x, 1, out, 2)) {
            w->failures++;
        } else {
            const float *y = tk_tensor_data(out[0]);
            for (int64_t k = 0; k < tk_numel(out[0]); k++)
                w->sums[i] += y[k] * (float)(k + 1);
        }
        tk_tensor_free(out[0]);
        tk_tensor_free(out[1]);
        tk_tensor_free(x);
    }
    tk_session_free(s);
    return NULL;
}

static void exec__sessions_on_threads_give_identical_results(void **state)
{
    (void)state;
    fixture fx;
    pthread_t th[4];
    worker w[4];
    fixture_init(&fx, tp_model());
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].p = fx.p;
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(w[i].failures, 0);
        assert_memory_equal(w[i].sums, w[0].sums, sizeof w[0].sums);
    }
    fixture_release(&fx);
}

/* --- packages ---------------------------------------------------------------------------------- */

static void package_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", TK_TEST_TMPDIR, name);
}

static void package__opened_and_run_on_the_cpu(void **state)
{
    (void)state;
    char path[1024];
    size_t wlen, len;
    void *w = tp_weights(&wlen);
    tk_program_model *m = tp_model();
    void *zip = tp_package(&len, m, w, wlen, NULL, 0);
    package_path(path, sizeof path, "package_mlp.tkpkg");
    tp_write_file(path, zip, len);
    free(zip);
    free(w);
    tk_program_model_free(m);

    tk_package *pkg;
    tk_session *s1, *s2;
    tk_assert_ok(tk_package_open(&pkg, path));
    assert_string_equal(tk_package_program(pkg), "test::mlp");
    assert_int_equal(tk_package_num_inputs(pkg), 1);
    assert_int_equal(tk_package_num_outputs(pkg), 2);
    const tk_io_info *in = tk_package_input(pkg, 0), *out1 = tk_package_output(pkg, 1);
    assert_string_equal(in->name, "x");
    assert_int_equal(in->rank, 2);
    assert_string_equal(in->dims[0].sym, "batch");
    assert_int_equal(in->dims[0].min, 1);
    assert_int_equal(in->dims[0].max, TP_MAX_BATCH);
    assert_null(in->dims[1].sym);
    assert_int_equal(in->dims[1].value, TP_IN);
    assert_string_equal(out1->name, "out1");
    assert_null(tk_package_input(pkg, 1));
    tk_assert_ok(tk_session_new(&s1, pkg, CPU));
    tk_assert_ok(tk_session_new(&s2, pkg, CPU));
    tk_tensor *x = tp_input(11, 4);
    run_and_check(s1, x);
    run_and_check(s2, x);
    run_and_check(s1, x);
    assert_non_null(tk_session_ctx(s1));
    tk_tensor_free(x);
    tk_session_free(s1);
    tk_session_free(s2);
    tk_package_close(pkg);
}

static void package__errors_are_one_line(void **state)
{
    (void)state;
    tk_package *pkg = (tk_package *)1;
    char path[1024];
    package_path(path, sizeof path, "package_missing.tkpkg");
    unlink(path);
    assert_true(tk_package_open(&pkg, path) < 0);
    assert_null(pkg);
    assert_non_null(strstr(tk_error_last(), "package_missing.tkpkg"));
    assert_null(strchr(tk_error_last(), '\n'));

    /* an op nothing registers */
    size_t wlen, len;
    void *w = tp_weights(&wlen);
    tk_program_model *m = pair_model(NULL);
    m->nodes[0].op = tk_pm_strdup(m, "nowhere::op");
    m->ops[0].name = m->nodes[0].op;
    m->ops[0].builtin = 0;
    m->ops[0].file = tk_pm_strdup(m, "ops/nowhere.c");
    void *zip = tp_package(&len, m, w, wlen, NULL, 0);
    package_path(path, sizeof path, "package_noop.tkpkg");
    tp_write_file(path, zip, len);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, "op 'nowhere::op' is not registered after loading");
    assert_null(pkg);
    free(zip);
    free(w);
    tk_program_model_free(m);

    /* a GPU session where there is none */
    tk_session *s = (tk_session *)1;
    package_path(path, sizeof path, "package_mlp.tkpkg");
    tk_assert_ok(tk_package_open(&pkg, path));
    if (tk_cuda_available() != 0) {
        assert_true(tk_session_new(&s, pkg, (tk_device){TK_DEVICE_CUDA, 0}) < 0);
        assert_null(s);
    }
    tk_package_close(pkg);
}

static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* y = test_module::neg(x) with the op in the package's host object (test_ops_module.c). */
static void package__host_object_is_loaded_and_unloaded(void **state)
{
    (void)state;
    char path[1024];
    size_t wlen, len, hlen;
    void *w = tp_weights(&wlen), *host = read_all(TK_TEST_OPS_MODULE, &hlen);
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::neg"));
    assert_non_null(tk_pm_add_symbol(m, "n", 1, 100));
    tp_set(m, tk_pm_add_input(m), 0, "x", 1, "n", 0, 0);
    tk_pm_node *n = tk_pm_add_node(m, "test_module::neg", 1, 1, "model.c", 1);
    n->inputs[0] = 0;
    tp_set(m, &n->outputs[0], 1, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 1, NULL, 1, "n", 0, 0);
    tp_op(m, "test_module::neg", "(Tensor x) -> Tensor", 0);
    void *zip = tp_package(&len, m, w, wlen, host, hlen);
    package_path(path, sizeof path, "package_host.tkpkg");
    tp_write_file(path, zip, len);
    free(zip);
    free(host);
    free(w);
    tk_program_model_free(m);

    assert_null(tk_op_find("test_module::neg"));
    for (int round = 0; round < 2; round++) {
        tk_package *pkg;
        tk_session *s;
        tk_assert_ok(tk_package_open(&pkg, path));
        /* the package's ops are its own: not in the application's registry */
        assert_null(tk_op_find("test_module::neg"));
        tk_assert_ok(tk_session_new(&s, pkg, CPU));
        const int64_t shape[] = {5};
        const float xv[] = {1, -2, 3, -4, 5};
        tk_tensor *x = tp_f32(1, shape, xv), *y = NULL;
        tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
        for (int i = 0; i < 5; i++)
            assert_true(((float *)tk_tensor_data(y))[i] == -xv[i]);
        tk_tensor_free(x);
        tk_tensor_free(y);
        tk_session_free(s);
        tk_package_close(pkg);
        assert_null(tk_op_find("test_module::neg"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exec__cpu_run_matches_reference),
        cmocka_unit_test(exec__plans_are_cached_per_signature_in_one_arena),
        cmocka_unit_test(exec__least_recently_used_plans_go_beyond_the_cache),
        cmocka_unit_test(exec__inputs_are_checked_before_anything_runs),
        cmocka_unit_test(exec__symbols_agree_across_inputs_and_expressions),
        cmocka_unit_test(exec__guards_are_checked),
        cmocka_unit_test(exec__caller_outputs_are_written_in_place_and_checked),
        cmocka_unit_test(exec__profiles_time_each_node),
        cmocka_unit_test(exec__bad_programs_are_refused),
        cmocka_unit_test(exec__sessions_on_threads_give_identical_results),
        cmocka_unit_test(package__opened_and_run_on_the_cpu),
        cmocka_unit_test(package__errors_are_one_line),
        cmocka_unit_test(package__host_object_is_loaded_and_unloaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
