/* The package runtime on the CPU (runtime/exec.c, runtime/package.c): the executor over a model
 * built here (results against a reference computed here, plans per shape signature, input and
 * output checks and their messages, guards, profiles, several sessions on several threads),
 * .tkpkg files written here opened and run end to end, with and without a host object, and their
 * signatures (runtime/sign.c, the reader's refusals, trust from a file, the environment and the
 * API, tkexport run and tkexport keygen). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/stat.h>

#include "rt_internal.h"
#include <tk/half.h>
#include <tk/ops.h>

#include "tk_test_package.h"
#include "tk_test_proc.h"
#include "zipfile.h"

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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
/* tk_session_options through the executor: max_shapes bounds the plans kept (the least recently
 * used going), a wrong version or value is refused with one line, and a CPU session has no
 * prefill to wait for. */
static void exec__session_options_bound_the_plans_and_are_checked(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s = NULL;
    tk_exec_stats st;
    fixture_init(&fx, tp_model());
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.version = 99;
    assert_int_equal(tk_exec_session_new(&s, fx.p, CPU, &o), TK_EINVAL);
    assert_null(s);
    assert_non_null(strstr(tk_error_last(), "options version 99"));
    o = (tk_session_options)TK_SESSION_OPTIONS_INIT;
    o.prefill = (tk_prefill)7;
    assert_int_equal(tk_exec_session_new(&s, fx.p, CPU, &o), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "prefill 7"));
    o = (tk_session_options)TK_SESSION_OPTIONS_INIT;
    o.max_shapes = (size_t)TK_SESSION_MAX_SHAPES + 1;
    assert_int_equal(tk_exec_session_new(&s, fx.p, CPU, &o), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "max_shapes"));

    o = (tk_session_options)TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_NOW;
    o.max_shapes = 3;
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, &o));
    assert_int_equal(tk_session_wait_ready(s), 0); /* the CPU runs eagerly: nothing to prefill */
    for (int64_t b = 1; b <= 6; b++) {
        tk_tensor *x = tp_input(b, (int)b);
        run_and_check(s, x);
        tk_tensor_free(x);
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.plans, b < 3 ? b : 3);
        assert_int_equal(st.planned, b);
    }
    /* the plans of 4, 5, 6 are kept; 4 used again, then 7 made: 5 goes (the least recently used),
     * not 4, though 4 was planned first */
    static const struct {
        int64_t batch;
        size_t planned;
    } uses[] = {{4, 6}, {7, 7}, {4, 7}, {6, 7}, {5, 8}};
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        tk_tensor *x = tp_input(uses[i].batch, 1);
        run_and_check(s, x);
        tk_tensor_free(x);
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.plans, 3);
        assert_int_equal(st.planned, uses[i].planned);
    }
    tk_tensor *x = tp_input(TP_MAX_BATCH, 1);
    assert_int_equal(tk_session_bind(s, &x, 1, NULL, 0), TK_EINVAL); /* two outputs */
    tk_tensor *outs[2] = {x, x};
    assert_int_equal(tk_session_bind(s, &x, 1, outs, 2), TK_EUNSUPPORTED); /* a CPU session */
    assert_non_null(strstr(tk_error_last(), "without CUDA graphs"));
    tk_tensor_free(x);
    tk_session_free(s);
    assert_int_equal(tk_session_wait_ready(NULL), TK_EINVAL);
    fixture_release(&fx);
}

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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
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

/* --- fusion -------------------------------------------------------------------------------------
 * test::fuse, x [batch, 4]:
 *   n0 h = linear(x, W1, b1)    n1 g = gelu(h)      -> one tk::_linear_gelu
 *   n2 m = linear(g, W2)        n3 y = add(x, m)    -> one tk::_linear_add (x the residual)
 *   n4 z = linear(y, W1, b1)    n5 q = gelu(z)      -> not fused: z is an output too
 * W1 [3, 4], b1 [3], W2 [4, 3]. Values: x 0, W1 1, b1 2, W2 3, h 4, g 5, m 6, y 7, z 8, q 9. */
static float fz_w1[12], fz_b1[3], fz_w2[12];

static tk_program_model *fuse_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::fuse"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, 4);
    tp_set(m, tk_pm_add_param(m), 1, "w1", 2, NULL, 3, 4);
    tp_set(m, tk_pm_add_param(m), 2, "b1", 1, NULL, 3, 0);
    tp_set(m, tk_pm_add_param(m), 3, "w2", 2, NULL, 4, 3);
    static const struct {
        const char *op;
        int nin, in[3], out, width;
    } nodes[] = {{"tk::linear", 3, {0, 1, 2}, 4, 3}, {"tk::gelu", 1, {4}, 5, 3},   {"tk::linear", 3, {5, 3, -1}, 6, 4},
                 {"tk::add", 2, {0, 6}, 7, 4},       {"tk::linear", 3, {7, 1, 2}, 8, 3}, {"tk::gelu", 1, {8}, 9, 3}};
    for (int i = 0; i < 6; i++) {
        tk_pm_node *n = tk_pm_add_node(m, nodes[i].op, nodes[i].nin, 1, "fuse.c", 10 + i);
        for (int k = 0; k < nodes[i].nin; k++)
            n->inputs[k] = nodes[i].in[k];
        tp_set(m, &n->outputs[0], nodes[i].out, NULL, 2, "batch", 0, nodes[i].width);
    }
    tp_set(m, tk_pm_add_output(m), 9, NULL, 2, "batch", 0, 3);
    tp_set(m, tk_pm_add_output(m), 8, NULL, 2, "batch", 0, 3);
    tp_op(m, "tk::add", "(Tensor a, Tensor b) -> Tensor", 1);
    tp_op(m, "tk::gelu", "(Tensor x) -> Tensor", 1);
    tp_op(m, "tk::linear", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", 1);
    tk_pm_sort(m);
    return m;
}

static void *fuse_weights(size_t *len)
{
    for (int i = 0; i < 12; i++) {
        fz_w1[i] = 0.3f * (float)(i % 5) - 0.6f;
        fz_w2[i] = 0.2f * (float)(i % 7) - 0.5f;
    }
    for (int i = 0; i < 3; i++)
        fz_b1[i] = 0.25f * (float)i - 0.2f;
    const int64_t w1s[] = {3, 4}, b1s[] = {3}, w2s[] = {4, 3};
    tk_tensor *ts[] = {tp_f32(2, w1s, fz_w1), tp_f32(1, b1s, fz_b1), tp_f32(2, w2s, fz_w2)};
    const char *names[] = {"w1", "b1", "w2"};
    void *img = NULL;
    tk_assert_ok(tk_safetensors_write_mem(&img, len, 3, names, ts));
    for (int i = 0; i < 3; i++)
        tk_tensor_free(ts[i]);
    return img;
}

static double fz_gelu(double v) { return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/* q and z of test::fuse for row r of x, in double. */
static void fuse_reference(const float *x, double *q, double *z)
{
    double g[3], y[4];
    for (int o = 0; o < 3; o++) {
        double h = fz_b1[o];
        for (int k = 0; k < 4; k++)
            h += (double)x[k] * fz_w1[o * 4 + k];
        g[o] = fz_gelu(h);
    }
    for (int o = 0; o < 4; o++) {
        double mm = 0;
        for (int k = 0; k < 3; k++)
            mm += g[k] * fz_w2[o * 3 + k];
        y[o] = x[o] + mm;
    }
    for (int o = 0; o < 3; o++) {
        z[o] = fz_b1[o];
        for (int k = 0; k < 4; k++)
            z[o] += y[k] * fz_w1[o * 4 + k];
        q[o] = fz_gelu(z[o]);
    }
}

/* The runs of test::fuse on batches 1..40 (a profiled run last), outputs appended to qz. */
static void fuse_run(int fusion, float *qz, tk_exec_stats *st, const char **labels)
{
    void *w;
    size_t wlen;
    tk_exec_program *p;
    tk_session *s;
    tk_program_model *m = fuse_model();
    w = fuse_weights(&wlen);
    if (!fusion)
        setenv("TK_FUSION", "0", 1);
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'fuse'", NULL));
    unsetenv("TK_FUSION");
    tk_assert_ok(tk_exec_session_new(&s, p, CPU, NULL));
    for (int64_t batch = 1; batch <= 40; batch += 13) {
        if (batch > 30)
            tk_assert_ok(tk_session_set_profiling(s, 1));
        tk_tensor *x = tp_input(batch, (int)batch), *out[2] = {NULL, NULL};
        tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
        const float *xp = tk_tensor_data(x), *qp = tk_tensor_data(out[0]), *zp = tk_tensor_data(out[1]);
        for (int64_t r = 0; r < batch; r++) {
            double q[3], z[3];
            fuse_reference(xp + r * 4, q, z);
            for (int o = 0; o < 3; o++) {
                if (fabs(qp[r * 3 + o] - q[o]) > 1e-5 || fabs(zp[r * 3 + o] - z[o]) > 1e-5)
                    fail_msg("fusion %d batch %lld row %lld col %d: q %g z %g, expected %g %g", fusion,
                             (long long)batch, (long long)r, o, qp[r * 3 + o], zp[r * 3 + o], q[o], z[o]);
                *qz++ = qp[r * 3 + o];
                *qz++ = zp[r * 3 + o];
            }
        }
        tk_tensor_free(out[0]);
        tk_tensor_free(out[1]);
        tk_tensor_free(x);
    }
    tk_exec_session_stats(s, st);
    const tk_node_profile *prof;
    assert_int_equal(tk_session_profile(s, &prof), 6);
    for (int i = 0; i < 6; i++) {
        labels[i] = strdup(prof[i].op);
        /* a fused node costs its pair's flops; the skipped one nothing */
        if (fusion && (i == 1 || i == 3))
            assert_true(prof[i].flops == 0 && prof[i].bytes == 0 && prof[i].time_us == 0);
        else
            assert_true(prof[i].bytes > 0);
    }
    tk_session_free(s);
    tk_exec_program_free(p);
    free(w);
    tk_program_model_free(m);
}

/* linear + gelu and linear + add of the result and a tensor of its shape run as one node each;
 * a linear whose result is an output is left alone; the results are those of the unfused
 * program, bit for bit on the CPU, and of a reference in double; the fused-away results take no
 * arena memory; TK_FUSION=0 turns it off. */
static void exec__linear_and_its_elementwise_consumer_run_fused(void **state)
{
    (void)state;
    static float a[2 * 3 * (1 + 14 + 27 + 40)], b[sizeof a / sizeof *a];
    tk_exec_stats fused, plain;
    const char *la[6], *lb[6];
    fuse_run(1, a, &fused, la);
    fuse_run(0, b, &plain, lb);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(fused.fused, 2);
    assert_int_equal(plain.fused, 0);
    assert_true(fused.arena_bytes < plain.arena_bytes);
    static const char *const want_fused[6] = {"tk::_linear_gelu", "tk::gelu (fused into node 0)",
                                              "tk::_linear_add",  "tk::add (fused into node 2)",
                                              "tk::linear",       "tk::gelu"};
    static const char *const want_plain[6] = {"tk::linear", "tk::gelu", "tk::linear", "tk::add", "tk::linear",
                                              "tk::gelu"};
    for (int i = 0; i < 6; i++) {
        assert_string_equal(la[i], want_fused[i]);
        assert_string_equal(lb[i], want_plain[i]);
        free((void *)la[i]);
        free((void *)lb[i]);
    }
}

/* test::tokmlp on batches 1..40 with TK_FUSION=fusion (NULL: unset), outputs appended to y; the
 * last run profiled, its labels copied. */
static void mlpfuse_run(const char *fusion, uint16_t *y, tk_exec_stats *st, const char **labels)
{
    size_t wlen;
    tk_exec_program *p;
    tk_session *s;
    tk_program_model *m = mlpfuse_model();
    void *w = mlpfuse_weights(&wlen, 0);
    if (fusion)
        setenv("TK_FUSION", fusion, 1);
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'tokmlp'", NULL));
    unsetenv("TK_FUSION");
    tk_assert_ok(tk_exec_session_new(&s, p, CPU, NULL));
    for (int64_t batch = 1; batch <= 40; batch += 13) {
        if (batch > 30)
            tk_assert_ok(tk_session_set_profiling(s, 1));
        const int64_t xs[] = {batch, MF_D};
        tk_tensor *x = mf_bf16(2, xs, -1, 0), *out[1] = {NULL};
        for (int64_t i = 0; i < batch * MF_D; i++)
            ((uint16_t *)tk_tensor_data(x))[i] = tk_f32_to_bf16(0.01f * (float)((i * 29 + batch) % 301) - 1.5f);
        tk_assert_ok(tk_session_run(s, &x, 1, out, 1));
        const uint16_t *xp = tk_tensor_data(x), *yp = tk_tensor_data(out[0]);
        for (int64_t r = 0; r < batch; r++) /* against a reference in double, within bf16's rounding */
            for (int o = 0; o < MF_D; o++) {
                double acc = mf_param(3, o, 0);
                for (int u = 0; u < MF_H; u++) {
                    double hv = mf_param(1, u, 0);
                    for (int k = 0; k < MF_D; k++)
                        hv += (double)tk_bf16_to_f32(xp[r * MF_D + k]) * mf_param(0, (int64_t)u * MF_D + k, 0);
                    acc += fz_gelu(hv) * mf_param(2, (int64_t)o * MF_H + u, 0);
                }
                double want = tk_bf16_to_f32(xp[r * MF_D + o]) + acc, got = tk_bf16_to_f32(yp[r * MF_D + o]);
                if (fabs(got - want) > 0.02 + 0.02 * fabs(want))
                    fail_msg("TK_FUSION=%s batch %lld row %lld col %d: %g, expected %g", fusion ? fusion : "(unset)",
                             (long long)batch, (long long)r, o, got, want);
            }
        memcpy(y, yp, sizeof(uint16_t) * (size_t)(batch * MF_D));
        y += batch * MF_D;
        tk_tensor_free(out[0]);
        tk_tensor_free(x);
    }
    tk_exec_session_stats(s, st);
    const tk_node_profile *prof;
    assert_int_equal(tk_session_profile(s, &prof), 4);
    for (int i = 0; i < 4; i++)
        labels[i] = strdup(prof[i].op);
    tk_session_free(s);
    tk_exec_program_free(p);
    free(w);
    tk_program_model_free(m);
}

/* linear, gelu, linear and the add of x run as one node, tk::_mlp (the pairs first fuse into
 * tk::_linear_gelu and tk::_linear_add, then those two); every skipped node says which node runs
 * it; the results are those of the pairs and of the unfused program, bit for bit on the CPU, and
 * of a reference in double; TK_FUSION=pairs stops at the pairs. */
static void exec__linear_gelu_linear_add_run_as_one_fused_mlp(void **state)
{
    (void)state;
    enum { N = (1 + 14 + 27 + 40) * MF_D };
    static uint16_t a[N], b[N], c[N];
    tk_exec_stats sa, sb, sc;
    const char *la[4], *lb[4], *lc[4];
    mlpfuse_run(NULL, a, &sa, la);
    mlpfuse_run("pairs", b, &sb, lb);
    mlpfuse_run("0", c, &sc, lc);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(a, c, sizeof a);
    assert_int_equal(sa.fused, 3);
    assert_int_equal(sb.fused, 2);
    assert_int_equal(sc.fused, 0);
    static const char *const want[3][4] = {
        {"tk::_mlp", "tk::gelu (fused into node 0)", "tk::linear (fused into node 0)", "tk::add (fused into node 0)"},
        {"tk::_linear_gelu", "tk::gelu (fused into node 0)", "tk::_linear_add", "tk::add (fused into node 2)"},
        {"tk::linear", "tk::gelu", "tk::linear", "tk::add"}};
    const char **got[3] = {la, lb, lc};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) {
            assert_string_equal(got[k][i], want[k][i]);
            free((void *)got[k][i]);
        }
}

/* y = linear(x, transpose(transpose(lin.weight)), lin.bias): both transposes read parameters only */
static tk_program_model *fold_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::fold"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, TP_IN);
    tp_set(m, tk_pm_add_param(m), 1, "lin.weight", 2, NULL, TP_OUT, TP_IN);
    tp_set(m, tk_pm_add_param(m), 2, "lin.bias", 1, NULL, TP_OUT, 0);
    for (int i = 0; i < 2; i++) {
        tk_pm_node *n = tk_pm_add_node(m, "tk::transpose", 3, 1, "model.c", 20 + i);
        n->inputs[0] = 1 + 2 * i, n->inputs[1] = -1, n->inputs[2] = -1;
        tp_set(m, &n->outputs[0], 3 + i, NULL, 2, NULL, i ? TP_OUT : TP_IN, i ? TP_IN : TP_OUT);
        tk_pm_attr *a = tk_pm_node_attrs(m, n, 2);
        assert_non_null(a);
        a[0] = (tk_pm_attr){.name = tk_pm_strdup(m, "dim0"), .arg = 1, .kind = TK_VALUE_INT, .i = 0};
        a[1] = (tk_pm_attr){.name = tk_pm_strdup(m, "dim1"), .arg = 2, .kind = TK_VALUE_INT, .i = 1};
    }
    /* node 0 makes value 3 from 1; node 1 value 4 from 3 */
    m->nodes[1].inputs[0] = 3;
    tk_pm_node *n = tk_pm_add_node(m, "tk::linear", 3, 1, "model.c", 22);
    n->inputs[0] = 0, n->inputs[1] = 4, n->inputs[2] = 2;
    tp_set(m, &n->outputs[0], 5, NULL, 2, "batch", 0, TP_OUT);
    tp_set(m, tk_pm_add_output(m), 5, NULL, 2, "batch", 0, TP_OUT);
    tp_op(m, "tk::linear", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", 1);
    tp_op(m, "tk::transpose", "(Tensor x, int dim0, int dim1) -> Tensor", 1);
    tk_pm_sort(m);
    return m;
}

/* test::fold's output for x, against linear(x, W, b) computed here */
static void fold_check(const tk_tensor *x, const tk_tensor *y, const char *what)
{
    const float *xp = tk_tensor_data(x), *yp = tk_tensor_data(y);
    int64_t batch = tk_tensor_dim(x, 0);
    assert_int_equal(tk_tensor_dim(y, 0), batch);
    for (int64_t r = 0; r < batch; r++)
        for (int o = 0; o < TP_OUT; o++) {
            float acc = tp_b[o];
            for (int k = 0; k < TP_IN; k++)
                acc += xp[r * TP_IN + k] * tp_w[o * TP_IN + k];
            if (fabsf(yp[r * TP_OUT + o] - acc) > 1e-5f)
                fail_msg("%s batch %lld row %lld col %d: %g, expected %g", what, (long long)batch, (long long)r, o,
                         yp[r * TP_OUT + o], acc);
        }
}

/* Nodes that read parameters only run once, when the weights reach the device: the results are
 * those of running them every time, the profile names them, the stats count them. */
static void exec__parameter_only_nodes_are_folded_with_the_weights(void **state)
{
    (void)state;
    size_t wlen;
    void *w = tp_weights(&wlen);
    float y[2][TP_MAX_BATCH * TP_OUT];
    for (int folding = 1; folding >= 0; folding--) {
        tk_program_model *m = fold_model();
        tk_exec_program *p;
        tk_session *s;
        tk_exec_stats st;
        if (!folding)
            setenv("TK_FOLDING", "0", 1);
        tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'fold'", NULL));
        unsetenv("TK_FOLDING");
        tk_assert_ok(tk_exec_session_new(&s, p, CPU, NULL));
        tk_assert_ok(tk_session_set_profiling(s, 1));
        tk_tensor *x = tp_input(TP_MAX_BATCH, 3), *out = NULL;
        tk_assert_ok(tk_session_run(s, &x, 1, &out, 1));
        fold_check(x, out, folding ? "folded" : "not folded");
        memcpy(y[folding], tk_tensor_data(out), sizeof y[0]);
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.folded, folding ? 2 : 0);
        const tk_node_profile *prof;
        assert_int_equal(tk_session_profile(s, &prof), 3);
        assert_string_equal(prof[0].op, folding ? "tk::transpose (folded)" : "tk::transpose");
        assert_string_equal(prof[2].op, "tk::linear");
        tk_tensor_free(x);
        tk_tensor_free(out);
        tk_session_free(s);
        tk_exec_program_free(p);
        tk_program_model_free(m);
    }
    assert_memory_equal(y[0], y[1], sizeof y[0]);
    free(w);
}

/* Two folded programs open at once, one with two sessions, each call a new batch size: every
 * session reads its own program's folded weights, every result
 * is right. */
static void exec__folded_weights_serve_two_programs_and_changing_shapes(void **state)
{
    (void)state;
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_program_model *m[2] = {fold_model(), fold_model()};
    tk_exec_program *p[2];
    tk_session *s[3];
    for (int i = 0; i < 2; i++)
        tk_assert_ok(tk_exec_program_new(&p[i], m[i], w, wlen, i ? "'fold b'" : "'fold a'", NULL));
    tk_assert_ok(tk_exec_session_new(&s[0], p[0], CPU, NULL));
    tk_assert_ok(tk_exec_session_new(&s[1], p[0], CPU, NULL));
    tk_assert_ok(tk_exec_session_new(&s[2], p[1], CPU, NULL));
    for (int call = 0; call < 30; call++) {
        int64_t batch = 1 + (call * 37) % TP_MAX_BATCH;
        tk_tensor *x = tp_input(batch, call), *out = NULL;
        tk_assert_ok(tk_session_run(s[call % 3], &x, 1, &out, 1));
        fold_check(x, out, call % 3 == 2 ? "program b" : "program a");
        tk_exec_stats st;
        tk_exec_session_stats(s[call % 3], &st);
        assert_int_equal(st.folded, 2);
        tk_tensor_free(x);
        tk_tensor_free(out);
    }
    for (int i = 0; i < 3; i++)
        tk_session_free(s[i]);
    for (int i = 0; i < 2; i++) {
        tk_exec_program_free(p[i]);
        tk_program_model_free(m[i]);
    }
    free(w);
}

/* --- views -------------------------------------------------------------------------------------- */

/* tk_layout_view answers yes only where the output is one contiguous run of the input's bytes. */
static void exec__layout_views_only_where_the_bytes_run_contiguous(void **state)
{
    (void)state;
    const tk_op_def *narrow = tk_op_find("tk::narrow"), *perm = tk_op_find("tk::permute"),
                    *tr = tk_op_find("tk::transpose"), *expand = tk_op_find("tk::expand"),
                    *flatten = tk_op_find("tk::flatten"), *add = tk_op_find("tk::add");
    const int64_t s2x6[] = {2, 6}, s1x6[] = {1, 6}, s1513[] = {1, 5, 1, 3}, s15[] = {1, 5};
    const int64_t p_ok[] = {2, 1, 0, 3}, p_bad[] = {0, 3, 2, 1}, grow[] = {4, 1, 5}, keep[] = {1, 1, -1};
    tk_value nar_rows[] = {tk__val_tensor(NULL), tk__val_int(0), tk__val_int(1), tk__val_int(1)},
             nar_cols[] = {tk__val_tensor(NULL), tk__val_int(-1), tk__val_int(2), tk__val_int(3)},
             nar_past[] = {tk__val_tensor(NULL), tk__val_int(1), tk__val_int(5), tk__val_int(3)},
             pa[] = {tk__val_tensor(NULL), tk__val_ints(p_ok, 4)}, pb[] = {tk__val_tensor(NULL), tk__val_ints(p_bad, 4)},
             t01[] = {tk__val_tensor(NULL), tk__val_int(0), tk__val_int(1)},
             eg[] = {tk__val_tensor(NULL), tk__val_ints(grow, 3)}, ek[] = {tk__val_tensor(NULL), tk__val_ints(keep, 3)};
    uint64_t off = 99;
    tk_error_clear();
    assert_true(tk_layout_view(flatten, NULL, 0, 2, s2x6, 4, &off) && off == 0);
    assert_true(tk_layout_view(tk_op_find("tk::reshape"), NULL, 0, 2, s2x6, 4, &off) && off == 0);
    assert_true(tk_layout_view(narrow, nar_rows, 4, 2, s2x6, 4, &off) && off == 6 * 4); /* row 1 of 2 */
    assert_false(tk_layout_view(narrow, nar_cols, 4, 2, s2x6, 4, &off));                 /* cols of 2 rows */
    assert_true(tk_layout_view(narrow, nar_cols, 4, 2, s1x6, 2, &off) && off == 2 * 2);  /* cols of 1 row */
    assert_false(tk_layout_view(narrow, nar_past, 4, 2, s1x6, 4, &off));                 /* past the dim */
    assert_false(tk_layout_view(narrow, nar_rows, 2, 2, s2x6, 4, &off));                 /* args missing */
    assert_true(tk_layout_view(perm, pa, 2, 4, s1513, 4, &off));  /* only 1s move */
    assert_false(tk_layout_view(perm, pb, 2, 4, s1513, 4, &off)); /* 5 and 3 swap */
    assert_true(tk_layout_view(tr, t01, 3, 2, s15, 4, &off));
    assert_false(tk_layout_view(tr, t01, 3, 2, s2x6, 4, &off));
    assert_false(tk_layout_view(expand, eg, 2, 2, s15, 4, &off)); /* grows */
    assert_true(tk_layout_view(expand, ek, 2, 2, s15, 4, &off));
    assert_false(tk_layout_view(add, NULL, 0, 2, s2x6, 4, &off));
    assert_false(tk_layout_view(add, NULL, 0, 0, NULL, 0, &off));
    assert_true(tk_layout_view(narrow, NULL, 0, 0, NULL, 0, &off));
    assert_null(tk_error_last_code() ? tk_error_last() : NULL);
}

/* test::views on a CPU session, a new batch each call: the results; which nodes ran as views. */
static void exec__layout_nodes_run_as_views_of_their_input(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    const tk_node_profile *prof;
    fixture_init(&fx, tp_views_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
    tk_assert_ok(tk_session_set_profiling(s, 1));
    const int64_t batches[] = {1, 3, 1, 64, 2, 17, 1};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        tk_tensor *x = tp_input(batches[i], (int)i), *out[2] = {NULL, NULL};
        tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
        tp_views_check(x, out[0], out[1]);
        assert_int_equal(tk_session_profile(s, &prof), 8);
        int one = batches[i] == 1;
        assert_string_equal(prof[1].op, "tk::flatten (view)");
        assert_string_equal(prof[2].op, "tk::unflatten (view)");
        assert_string_equal(prof[3].op, one ? "tk::narrow (view)" : "tk::narrow");
        assert_string_equal(prof[6].op, one ? "tk::transpose (view)" : "tk::transpose");
        assert_string_equal(prof[4].op, "tk::mul");
        assert_true(prof[1].bytes == 0 && prof[2].bytes == 0);
        tk_tensor_free(out[0]);
        tk_tensor_free(out[1]);
        tk_tensor_free(x);
    }
    tk_session_free(s);
    fixture_release(&fx);
}

/* Output views on the CPU: y comes back as a view of x + x's rows, is read through its strides,
 * is written in place when passed again (the narrow skipped), copies into and out of contiguous
 * tensors; a strided view is refused as an input, to an op and for other shapes. */
static void exec__outputs_cut_from_a_value_come_back_as_views_of_it(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s, *plain;
    const tk_node_profile *prof;
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.output_views = 1;
    fixture_init(&fx, tp_oview_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, &o));
    tk_assert_ok(tk_exec_session_new(&plain, fx.p, CPU, NULL));
    tk_tensor *x = tp_input(5, 1), *out[2] = {NULL, NULL}, *pout[2] = {NULL, NULL};
    tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
    assert_false(tk_tensor_is_contiguous(out[0]));
    assert_true(tk_tensor_is_contiguous(out[1]));
    assert_int_equal(tk_tensor_strides(out[0])[0], TP_IN);
    assert_int_equal(tk_tensor_strides(out[0])[1], 1);
    assert_int_equal(tk_tensor_nbytes(out[0]), 5 * 2 * sizeof(float));
    tp_oview_check(x, out[0], out[1]);
    tk_assert_ok(tk_session_run(plain, &x, 1, pout, 2)); /* the default: contiguous */
    assert_true(tk_tensor_is_contiguous(pout[0]));
    tp_oview_check(x, pout[0], pout[1]);
    /* passed again: computed in place, the narrow skipped */
    tk_tensor *x2 = tp_input(5, 7);
    tk_assert_ok(tk_session_set_profiling(s, 1));
    tk_assert_ok(tk_session_run(s, &x2, 1, out, 2));
    tp_oview_check(x2, out[0], out[1]);
    assert_int_equal(tk_session_profile(s, &prof), 3);
    assert_string_equal(prof[1].op, "tk::narrow (output view)");
    assert_true(prof[1].bytes == 0);
    tk_assert_ok(tk_session_set_profiling(s, 0));
    /* copies: the view into a contiguous tensor and back into the view */
    tk_tensor *dense = NULL;
    tk_assert_ok(tk_tensor_new(&dense, NULL, CPU, TK_F32, 2, tk_tensor_shape(out[0])));
    tk_assert_ok(tk_tensor_copy(NULL, dense, out[0]));
    tp_oview_check(x2, dense, out[1]);
    tk_assert_ok(tk_tensor_copy(NULL, out[0], pout[0]));
    tp_oview_check(x, out[0], pout[1]);
    /* refusals */
    tk_tensor *x3 = tp_input(3, 2);
    tk_assert_fails(tk_session_run(s, &x3, 1, out, 2), TK_EINVAL, "output 0 is f32 [5, 2], the program gives f32 [3, 2]");
    tk_tensor *wrong = NULL;
    const int64_t shp[2] = {5, 2};
    tk_assert_ok(tk_tensor_new_view(&wrong, NULL, CPU, TK_F32, 2, shp, (const int64_t[]){4, 1}, 5 * 4 * 4, 0));
    tk_tensor *xs[1] = {x};
    tk_tensor *mixed[2] = {wrong, NULL};
    tk_assert_fails(tk_session_run(s, xs, 1, mixed, 2), TK_EINVAL,
                    "output 0 is a strided view this program does not make for these inputs");
    assert_null(tk_add(tk_session_ctx(s), out[0], out[0]));
    assert_contains(tk_error_last(), "input 'a' (in[0]) of op 'tk::add' is a strided view");
    tk_tensor *fx_in = NULL;
    const int64_t shape4[2] = {5, 4};
    tk_assert_ok(tk_tensor_new_view(&fx_in, NULL, CPU, TK_F32, 2, shape4, (const int64_t[]){8, 1}, 5 * 8 * 4, 0));
    tk_assert_fails(tk_session_run(s, &fx_in, 1, pout + 0, 2), TK_EINVAL, "input 'x' is a strided view");
    tk_tensor *frees[] = {x, x2, x3, out[0], out[1], pout[0], pout[1], dense, wrong, fx_in};
    for (size_t i = 0; i < sizeof frees / sizeof *frees; i++)
        tk_tensor_free(frees[i]);
    tk_session_free(s);
    tk_session_free(plain);
    fixture_release(&fx);
}

/* A transpose that only tk::matmul reads is a strided view of k (the CPU fallback reads b
 * through its strides); one that an add reads too is copied. tk_op_takes_strided's rule. */
static void exec__a_transpose_read_by_matmul_is_a_strided_view(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    const tk_node_profile *prof;
    const tk_op_def *mm = tk_op_find("tk::matmul");
    const int64_t shape[] = {2, 4, 5}, kt_st[] = {20, 1, 4}, other[] = {20, 5, 1}, bad[] = {40, 1, 4};
    assert_true(tk_op_takes_strided(mm, 1, 0, NULL, NULL));
    assert_false(tk_op_takes_strided(mm, 0, 0, NULL, NULL));
    assert_false(tk_op_takes_strided(tk_op_find("tk::add"), 0, 0, NULL, NULL));
    assert_true(tk_op_takes_strided(mm, 1, 3, shape, kt_st));
    assert_false(tk_op_takes_strided(mm, 1, 3, shape, other)); /* contiguous: not one of its strided forms */
    assert_false(tk_op_takes_strided(mm, 1, 3, shape, bad));  /* batches not back to back */
    fixture_init(&fx, tp_tview_model());
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
    tk_assert_ok(tk_session_set_profiling(s, 1));
    const int64_t batches[] = {1, 4, 2};
    for (size_t i = 0; i < 3; i++) {
        tk_tensor *in[2], *out[3] = {NULL, NULL, NULL};
        tp_tview_inputs(batches[i], (int)i, &in[0], &in[1]);
        tk_assert_ok(tk_session_run(s, in, 2, out, 3));
        tp_tview_check(in[0], in[1], out);
        assert_int_equal(tk_session_profile(s, &prof), 5);
        assert_string_equal(prof[0].op, "tk::transpose (view)");
        assert_string_equal(prof[2].op, "tk::transpose");
        for (int o = 0; o < 3; o++)
            tk_tensor_free(out[o]);
        tk_tensor_free(in[0]);
        tk_tensor_free(in[1]);
    }
    tk_session_free(s);
    fixture_release(&fx);
}

/* q = x.view(B, S, H, D).transpose(1, 2) read by tk::sdpa alone: both layout nodes are views, the
 * CPU reference reads q through its strides, and the result equals the eager one (copies). */
static void exec__attention_reads_a_transposed_view_where_it_lies(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_ctx *cpu = NULL;
    const tk_node_profile *prof;
    const tk_op_def *sdpa = tk_op_find("tk::sdpa");
    const int64_t shape[] = {3, 2, 4, 8}, tr[] = {64, 8, 16, 1}, inner[] = {64, 8, 16, 2};
    assert_true(tk_op_takes_strided(sdpa, 0, 4, shape, tr));
    assert_true(tk_op_takes_strided(sdpa, 2, 4, shape, tr));
    assert_false(tk_op_takes_strided(sdpa, 0, 4, shape, inner)); /* the head dim must be contiguous */
    assert_false(tk_op_takes_strided(sdpa, 3, 4, shape, tr));
    fixture_init(&fx, tp_sview_model(8, TK_F32));
    tk_assert_ok(tk_ctx_new(&cpu, CPU));
    tk_assert_ok(tk_exec_session_new(&s, fx.p, CPU, NULL));
    tk_assert_ok(tk_session_set_profiling(s, 1));
    for (int64_t batch = 1; batch <= 3; batch++) {
        const int64_t xs[] = {batch, 4, 16};
        tk_tensor *x = tp_f32(3, xs, NULL), *out = NULL;
        for (int64_t i = 0; i < batch * 64; i++)
            ((float *)tk_tensor_data(x))[i] = 0.1f * (float)((i * 13 + batch) % 23) - 1.0f;
        tk_assert_ok(tk_session_run(s, &x, 1, &out, 1));
        tk_tensor *want = tp_sview_eager(cpu, x, 8);
        assert_memory_equal(tk_tensor_data(out), tk_tensor_data(want), tk_tensor_nbytes(want));
        assert_int_equal(tk_session_profile(s, &prof), 3);
        assert_string_equal(prof[0].op, "tk::unflatten (view)");
        assert_string_equal(prof[1].op, "tk::transpose (view)");
        tk_tensor_free(want);
        tk_tensor_free(out);
        tk_tensor_free(x);
    }
    tk_session_free(s);
    tk_ctx_free(cpu);
    fixture_release(&fx);
}

/* test::views, test::oview (output views) and test::tview open at once, a new batch every call. */
static void exec__view_programs_run_side_by_side_with_changing_batches(void **state)
{
    (void)state;
    tp_view_programs_side_by_side(CPU, 60);
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
    if (tk_exec_session_new(&s, w->p, CPU, NULL)) {
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

/* test::neg: y = test_module::neg(x), x [n] with n in [1, 100]; the op lives in the package's
 * host object (test_ops_module.c). */
static tk_program_model *neg_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::neg"));
    assert_non_null(tk_pm_add_symbol(m, "n", 1, 100));
    tp_set(m, tk_pm_add_input(m), 0, "x", 1, "n", 0, 0);
    tk_pm_node *n = tk_pm_add_node(m, "test_module::neg", 1, 1, "model.c", 1);
    n->inputs[0] = 0;
    tp_set(m, &n->outputs[0], 1, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 1, NULL, 1, "n", 0, 0);
    tp_op(m, "test_module::neg", "(Tensor x) -> Tensor", 0);
    return m;
}

/* y = test_module::neg(x) with the op in the package's host object (test_ops_module.c). */
static void package__host_object_is_loaded_and_unloaded(void **state)
{
    (void)state;
    char path[1024];
    size_t wlen, len, hlen;
    void *w = tp_weights(&wlen), *host = read_all(TK_TEST_OPS_MODULE, &hlen);
    tk_program_model *m = neg_model();
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

/* A package's tuned kernel runs with the declaration its manifest records (what the analyzer read
 * at export), not with a reading of its host object's strings: the host object declares BLOCK 256
 * or 512 and EVEN 0, 1 or 2 (test_tuned_ops_module.c); the record says BLOCK 64 or 32 and EVEN 0
 * or 1, and its measured table picks 32. */
static void package__tuned_kernels_use_the_recorded_declaration(void **state)
{
    (void)state;
    char path[1024];
    size_t wlen, len, hlen;
    void *w = tp_weights(&wlen), *host = read_all(TK_TEST_TUNED_OPS_MODULE, &hlen);
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::tuned"));
    assert_non_null(tk_pm_add_symbol(m, "n", 2, 100));
    tp_set(m, tk_pm_add_input(m), 0, "x", 1, "n", 0, 0);
    tk_pm_node *node = tk_pm_add_node(m, "test_module::tuned", 1, 1, "model.c", 1);
    node->inputs[0] = 0;
    tp_set(m, &node->outputs[0], 1, NULL, 1, "n", 0, 0);
    tp_set(m, tk_pm_add_output(m), 1, NULL, 1, "n", 0, 0);
    tp_op(m, "test_module::tuned", "(Tensor x) -> Tensor", 0);
    char *pj = NULL;
    tk_assert_ok(tk_program_json_write(&pj, m));

    static const char fake[] = "fatbins are not read on the CPU";
    char *kernel_names[] = {"tuned_kernel"};
    tk_pkg_kernel kernel = {"tuned_kernel", "kernels/tuned.fatbin", "tuned.cu"};
    tk_pkg_op op = {"test_module::tuned", 0, 1, kernel_names};
    tk_pkg_tune_row row = {.bucket = 3, .key = 8, .winner = 1, .times_us = {2.0, 1.0}};
    tk_pkg_tune tune = {.kernel = "tuned_kernel", .key = "n", .nparams = 1, .nconfigs = 2, .params = {"BLOCK"},
                        .values = {{64}, {32}}, .hparam = "EVEN", .nh = 2, .hvalues = {0, 1}, .nfatbins = 4,
                        .fatbins = {"kernels/tuned.fatbin", "kernels/tuned@c1.fatbin", "kernels/tuned@c2.fatbin",
                                    "kernels/tuned@c3.fatbin"},
                        .measured = 1, .device = "test", .driver = "13.0", .nrows = 1, .rows = &row};
    tk_pkg_entry entries[7];
    size_t n = 0;
    entries[n++] = (tk_pkg_entry){.path = "host/ops.so", .data = host, .size = hlen};
    for (size_t i = 0; i < tune.nfatbins; i++)
        entries[n++] = (tk_pkg_entry){.path = tune.fatbins[i], .data = (unsigned char *)fake, .size = sizeof fake};
    entries[n++] = (tk_pkg_entry){.path = "program.json", .data = (unsigned char *)pj, .size = strlen(pj)};
    entries[n++] = (tk_pkg_entry){.path = "weights.safetensors", .data = w, .size = wlen};
    tk_pkgfile f = {.tkexport = "0.1.0", .program_name = m->name, .host = "host/ops.so", .nkernels = 1,
                    .kernels = &kernel, .nops = 1, .ops = &op, .nentries = n, .entries = entries, .ntunes = 1,
                    .tunes = &tune};
    void *zip = NULL;
    tk_assert_ok(tk_pkgfile_write_mem(&zip, &len, &f, tp_key()));
    package_path(path, sizeof path, "package_tuned.tkpkg");
    tp_write_file(path, zip, len);
    free(zip);
    free(pj);
    free(host);
    free(w);
    tk_program_model_free(m);

    tk_package *pkg;
    tk_session *s;
    tk_assert_ok(tk_package_open(&pkg, path));
    tk_assert_ok(tk_session_new(&s, pkg, CPU));
    const int64_t shape[] = {4};
    const float xv[] = {1, 2, 3, 4};
    tk_tensor *x = tp_f32(1, shape, xv), *y = NULL;
    tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
    const float *yv = tk_tensor_data(y);
    assert_true(yv[0] == 32.0f); /* the record's configuration 1, which its table picks; not 256 or 512 */
    assert_true(yv[1] == 0.0f);  /* EVEN 2 is not among the recorded values */
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_session_free(s);
    tk_package_close(pkg);
}

/* --- signatures ------------------------------------------------------------------------------- */

static void sign__keys_sign_verify_and_round_trip_as_text_and_files(void **state)
{
    (void)state;
    tk_sign_key *key, *loaded;
    tk_sign_public pub, pub2, parsed;
    unsigned char sig[TK_SIGN_BYTES], sig2[TK_SIGN_BYTES];
    char text[TK_SIGN_TEXT_MAX], id[TK_SIGN_ID_MAX], path[1024];
    const char msg[] = "tkpkg manifest v2\n{\"format\": \"tkpkg\"}";
    tk_assert_ok(tk_sign_key_generate(&key));
    tk_sign_key_public(key, &pub);
    tk_assert_ok(tk_sign_bytes(sig, key, msg, sizeof msg - 1));
    assert_int_equal(tk_sign_verify(&pub, sig, msg, sizeof msg - 1), 0);
    /* another message, another signature, another key: no */
    assert_int_equal(tk_sign_verify(&pub, sig, msg, sizeof msg - 2), 1);
    sig[10] ^= 4;
    assert_int_equal(tk_sign_verify(&pub, sig, msg, sizeof msg - 1), 1);
    sig[10] ^= 4;
    tk_sign_public other = pub;
    other.raw[0] ^= 1;
    assert_int_equal(tk_sign_verify(&other, sig, msg, sizeof msg - 1), 1);

    /* text: "ed25519:" and 44 characters of base64; the id: 16 hex digits */
    tk_sign_public_format(&pub, text);
    assert_int_equal(strlen(text), 52);
    assert_memory_equal(text, "ed25519:", 8);
    tk_assert_ok(tk_sign_public_parse(&parsed, text, strlen(text)));
    assert_memory_equal(parsed.raw, pub.raw, 32);
    tk_sign_public_id(&pub, id);
    assert_int_equal(strlen(id), 16);
    assert_int_equal(strspn(id, "0123456789abcdef"), 16);
    tk_assert_fails(tk_sign_public_parse(&parsed, "ed25519:abc", 11), TK_EINVAL,
                    "'ed25519:abc' is not a public key (expected ed25519: and the base64 of 32 bytes)");
    char bad[TK_SIGN_TEXT_MAX];
    memcpy(bad, text, sizeof bad);
    memcpy(bad, "rsa4096:", 8);
    tk_assert_fails(tk_sign_public_parse(&parsed, bad, strlen(bad)), TK_EINVAL, "is not a public key");
    memcpy(bad, text, sizeof bad);
    /* the last character before '=' carries two spare bits, which must be zero */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    bad[50] = b64[(strchr(b64, bad[50]) - b64) ^ 1];
    tk_assert_fails(tk_sign_public_parse(&parsed, bad, strlen(bad)), TK_EINVAL, "is not a public key");

    /* the private key file: PEM PKCS#8, mode 0600; read back, it signs the same bytes (Ed25519 is
     * deterministic) */
    snprintf(path, sizeof path, "%s/sign-test-%d.key", TK_TEST_TMPDIR, (int)getpid());
    unlink(path);
    tk_assert_ok(tk_sign_key_save(key, path, 1));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *pem = tk_test_read_file(path, NULL);
    assert_non_null(strstr(pem, "-----BEGIN PRIVATE KEY-----"));
    free(pem);
    assert_int_equal(tk_sign_key_save(key, path, 1), 1); /* kept: it exists */
    tk_assert_ok(tk_sign_key_load(&loaded, path));
    tk_sign_key_public(loaded, &pub2);
    assert_memory_equal(pub2.raw, pub.raw, 32);
    tk_assert_ok(tk_sign_bytes(sig2, loaded, msg, sizeof msg - 1));
    assert_memory_equal(sig2, sig, sizeof sig);
    tk_sign_key_free(loaded);
    tp_write_file(path, "not a key\n", 10);
    tk_assert_fails(tk_sign_key_load(&loaded, path), TK_EFORMAT, "is not a private key in PEM (PKCS#8)");
    assert_null(loaded);
    unlink(path);
    tk_sign_key_free(key);
    tk_sign_key_free(NULL);
}

/* The bytes of a zip with entry name set to data (n bytes), or removed when data is NULL. */
static void *rezip(const void *zip, size_t len, const char *name, const void *data, size_t n, size_t *out_len)
{
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, zip, len, "'t'", "zip", 100));
    size_t count = tk_zip_count(z), k = 0;
    tk_zip_entry e[101];
    unsigned char *bytes[101];
    for (size_t i = 0; i < count; i++) {
        size_t blen;
        tk_assert_ok(tk_zip_read(z, i, 1u << 30, &bytes[i], &blen));
        if (strcmp(tk_zip_name(z, i), name) != 0)
            e[k++] = (tk_zip_entry){tk_zip_name(z, i), bytes[i], blen, 0};
    }
    if (data)
        e[k++] = (tk_zip_entry){name, data, n, 0};
    void *out = NULL;
    tk_assert_ok(tk_zip_write_mem(&out, out_len, e, k, "the test package"));
    for (size_t i = 0; i < count; i++)
        free(bytes[i]);
    tk_zip_close(z);
    return out;
}

/* Entry name of a zip (malloc'd, NUL-terminated), or NULL. */
static char *zip_entry(const void *zip, size_t len, const char *name)
{
    tk_zip_reader *z;
    unsigned char *bytes = NULL;
    size_t n;
    tk_assert_ok(tk_zip_open(&z, zip, len, "'t'", "zip", 100));
    for (size_t i = 0; i < tk_zip_count(z) && !bytes; i++)
        if (!strcmp(tk_zip_name(z, i), name))
            tk_assert_ok(tk_zip_read(z, i, 1u << 30, &bytes, &n));
    tk_zip_close(z);
    return (char *)bytes;
}

/* test::mlp as a package at TK_TEST_TMPDIR/name, signed with key (NULL: unsigned). */
static void mlp_package(char *path, size_t n, const char *name, const tk_sign_key *key)
{
    size_t wlen, len;
    void *w = tp_weights(&wlen);
    tk_program_model *m = tp_model();
    void *zip = tp_package_signed(&len, m, w, wlen, NULL, 0, key);
    package_path(path, n, name);
    tp_write_file(path, zip, len);
    free(zip);
    free(w);
    tk_program_model_free(m);
}

static void package__unsigned_is_refused_unless_allowed_explicitly(void **state)
{
    (void)state;
    char path[1024];
    tk_package *pkg = (tk_package *)1;
    mlp_package(path, sizeof path, "package_unsigned.tkpkg", NULL);
    char want[1400];
    snprintf(want, sizeof want, "'%s' is not signed; refusing to run it (sign it with tkexport compile --sign-key, or "
                                "allow unsigned packages explicitly: tkexport run --allow-unsigned, "
                                "tk_package_options.allow_unsigned)", path);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, want);
    assert_string_equal(tk_error_last(), want);
    assert_null(pkg);
    /* no environment variable opens it: the opt-in is the caller's */
    setenv("TKEXPORT_ALLOW_UNSIGNED", "1", 1);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, "is not signed; refusing to run it");
    unsetenv("TKEXPORT_ALLOW_UNSIGNED");
    tk_package_options opts = TK_PACKAGE_OPTIONS_INIT;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EINVAL, "is not signed");
    opts.allow_unsigned = 1;
    tk_assert_ok(tk_package_open_ex(&pkg, path, &opts));
    assert_null(tk_package_signer(pkg));
    tk_package_close(pkg);
    assert_null(tk_package_signer(NULL));
    /* options of an unknown version */
    opts.version = 99;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EINVAL,
                    "tk_package_options version 99; this libtkrt knows version 1");
}

static void package__signed_by_an_untrusted_key_is_refused_naming_it(void **state)
{
    (void)state;
    char path[1024], text[TK_SIGN_TEXT_MAX], id[TK_SIGN_ID_MAX], want[2600];
    tk_sign_key *other;
    tk_sign_public pub;
    tk_package *pkg;
    tk_assert_ok(tk_sign_key_generate(&other));
    tk_sign_key_public(other, &pub);
    tk_sign_public_format(&pub, text);
    tk_sign_public_id(&pub, id);
    mlp_package(path, sizeof path, "package_other_key.tkpkg", other);
    snprintf(want, sizeof want, "'%s' is signed by key %s (%s), which is not trusted on this machine (trusted keys "
                                "come from '%s'; add the key there if you trust whoever holds it)", path, id, text,
             tp_trust_file());
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, want);
    assert_null(pkg);

    /* trusted from the environment: one of several keys, separated by commas or white space */
    char env[400];
    snprintf(env, sizeof env, " ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,%s\n", text);
    setenv("TKEXPORT_TRUSTED_KEYS", env, 1);
    tk_assert_ok(tk_package_open(&pkg, path));
    char signer[200];
    snprintf(signer, sizeof signer, "%s (key id %s)", text, id);
    assert_string_equal(tk_package_signer(pkg), signer);
    tk_package_close(pkg);
    /* ... but not when the caller ignores the default trust */
    tk_package_options opts = TK_PACKAGE_OPTIONS_INIT;
    opts.ignore_default_trust = 1;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EINVAL,
                    "which is not trusted on this machine (trusted keys come from nowhere (the caller ignores");
    unsetenv("TKEXPORT_TRUSTED_KEYS");
    snprintf(want, sizeof want, "(trusted keys come from '%s'", tp_trust_file());
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, want);

    /* trusted through the API */
    const char *keys[] = {text, NULL};
    opts.trusted_keys = keys;
    tk_assert_ok(tk_package_open_ex(&pkg, path, &opts));
    tk_package_close(pkg);
    /* the caller's keys come on top of the default trust: the suite's own key still opens its packages */
    mlp_package(path, sizeof path, "package_own_key.tkpkg", tp_key());
    opts.ignore_default_trust = 0;
    tk_assert_ok(tk_package_open_ex(&pkg, path, &opts));
    tk_package_close(pkg);
    opts.ignore_default_trust = 1;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EINVAL, "is not trusted on this machine");
    tk_sign_key_free(other);
}

static void package__trust_file_lines_and_keys_are_checked(void **state)
{
    (void)state;
    char path[1024], trust[1100], text[TK_SIGN_TEXT_MAX], own[TK_SIGN_TEXT_MAX], body[600];
    tk_sign_key *other;
    tk_sign_public pub;
    tk_package *pkg;
    tk_assert_ok(tk_sign_key_generate(&other));
    tk_sign_key_public(other, &pub);
    tk_sign_public_format(&pub, text);
    tk_sign_key_public(tp_key(), &pub);
    tk_sign_public_format(&pub, own);
    mlp_package(path, sizeof path, "package_file_trust.tkpkg", other);
    snprintf(trust, sizeof trust, "%s/trust-lines-%d", TK_TEST_TMPDIR, (int)getpid());
    setenv("TKEXPORT_TRUST_FILE", trust, 1);

    /* comments, blank lines, white space and a comment after the key */
    snprintf(body, sizeof body, "# keys of the release team\n\n   %s  alice's laptop # since 2026\n\t%s\r\n", own, text);
    tp_write_file(trust, body, strlen(body));
    tk_assert_ok(tk_package_open(&pkg, path));
    tk_package_close(pkg);
    /* a malformed line: the file and the line */
    snprintf(body, sizeof body, "%s\n# next\ned25519:tooshort bob\n%s\n", own, text);
    tp_write_file(trust, body, strlen(body));
    char want[1300];
    snprintf(want, sizeof want, "'%s' line 3: 'ed25519:tooshort' is not a public key (expected ed25519: and the "
                                "base64 of 32 bytes)", trust);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT, want);
    /* in the environment, and in the options */
    tp_write_file(trust, text, strlen(text));
    setenv("TKEXPORT_TRUSTED_KEYS", "ed25519:?", 1);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT, "TKEXPORT_TRUSTED_KEYS: 'ed25519:?' is not a public key");
    unsetenv("TKEXPORT_TRUSTED_KEYS");
    tk_package_options opts = TK_PACKAGE_OPTIONS_INIT;
    const char *keys[] = {text, "nonsense", NULL};
    opts.trusted_keys = keys;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EFORMAT,
                    "trusted key 1 of the options: 'nonsense' is not a public key");
    /* a missing file holds no keys */
    unlink(trust);
    snprintf(want, sizeof want, "(trusted keys come from '%s' (absent);", trust);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EINVAL, want);
    /* tk_trust_add appends a line once */
    int added = 0;
    tk_sign_key_public(other, &pub);
    tk_assert_ok(tk_trust_add(&pub, "bob\nmallory", NULL, &added));
    assert_true(added);
    tk_assert_ok(tk_trust_add(&pub, "bob", NULL, &added));
    assert_false(added);
    char *lines = tk_test_read_file(trust, NULL);
    snprintf(want, sizeof want, "%s bob mallory\n", text);
    assert_string_equal(lines, want);
    free(lines);
    tk_assert_ok(tk_package_open(&pkg, path));
    tk_package_close(pkg);
    unlink(trust);
    setenv("TKEXPORT_TRUST_FILE", tp_trust_file(), 1);
    tk_sign_key_free(other);
}

/* The host object of a signed package is replaced by other bytes and the manifest's digests are
 * made again by the writer: the old signature no longer matches, whatever the digests say, and
 * nothing of the package is loaded. */
/* An entry larger than a chunk carries a digest per chunk; the reader checks every chunk (on all
 * cores) and names the one that does not match. */
static void package__large_entries_are_verified_chunk_by_chunk(void **state)
{
    (void)state;
    char path[1024];
    size_t wlen, len;
    /* the test model's weights plus an unused 130 MiB tensor: three chunks of 64 MiB */
    const int64_t big[] = {130 * 1024 * 1024 / 4};
    tk_tensor *ts[3];
    const int64_t ws[] = {TP_OUT, TP_IN}, bs[] = {TP_OUT};
    void *small = tp_weights(&wlen);
    free(small);
    ts[0] = tp_f32(2, ws, tp_w);
    ts[1] = tp_f32(1, bs, tp_b);
    tk_assert_ok(tk_tensor_new(&ts[2], NULL, CPU, TK_F32, 1, big));
    memset(tk_tensor_data(ts[2]), 0x3c, tk_tensor_nbytes(ts[2]));
    const char *names[] = {"lin.weight", "lin.bias", "unused.big"};
    void *w = NULL;
    tk_assert_ok(tk_safetensors_write_mem(&w, &wlen, 3, names, ts));
    for (int i = 0; i < 3; i++)
        tk_tensor_free(ts[i]);
    tk_program_model *m = tp_model();
    unsigned char *zip = tp_package(&len, m, w, wlen, NULL, 0);
    package_path(path, sizeof path, "package_big.tkpkg");
    tp_write_file(path, zip, len);

    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, path, NULL));
    const tk_pkg_entry *e = tk_pkgfile_entry(f, "weights.safetensors");
    assert_non_null(e);
    assert_int_equal(e->chunk_size, TK_TKPKG_CHUNK);
    assert_int_equal(e->nchunks, 3);
    size_t at = (size_t)(e->data - (unsigned char *)f->map); /* where the stored weights start in the file */
    tk_pkgfile_free(f);
    tk_package *pkg;
    tk_assert_ok(tk_package_open(&pkg, path));
    tk_package_close(pkg);

    /* one byte of the second chunk changed in place */
    zip[at + TK_TKPKG_CHUNK + 12345] ^= 1;
    tp_write_file(path, zip, len);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT,
                    "entry 'weights.safetensors' chunk 1 (bytes from 67108864) has SHA-256");
    free(zip);
    free(w);
    tk_program_model_free(m);
}

static void package__altered_after_signing_is_refused(void **state)
{
    (void)state;
    char path[1024], bad_path[1024];
    size_t wlen, len, hlen, blen, tlen;
    void *w = tp_weights(&wlen), *host = read_all(TK_TEST_OPS_MODULE, &hlen);
    tk_program_model *m = neg_model();
    void *zip = tp_package(&len, m, w, wlen, host, hlen);
    package_path(path, sizeof path, "package_signed_host.tkpkg");
    tp_write_file(path, zip, len);
    tk_package *pkg;
    tk_assert_ok(tk_package_open(&pkg, path));
    tk_package_close(pkg);

    /* the attacker's package: other host code, digests recomputed, the old signature kept */
    tk_pkgfile *f;
    tk_assert_ok(tk_pkgfile_read(&f, path, NULL));
    tk_pkgfile g = *f;
    tk_pkg_entry entries[8];
    assert_true(f->nentries <= 8);
    memcpy(entries, f->entries, f->nentries * sizeof(*entries));
    static const char evil[] = "#!/bin/sh\necho replaced\n";
    for (size_t i = 0; i < f->nentries; i++)
        if (!strcmp(entries[i].path, "host/ops.so"))
            entries[i].data = (unsigned char *)evil, entries[i].size = sizeof evil - 1;
    g.entries = entries;
    void *unsigned_zip, *tampered;
    tk_assert_ok(tk_pkgfile_write_mem(&unsigned_zip, &blen, &g, NULL));
    char *sig = zip_entry(zip, len, TK_TKPKG_SIGNATURE);
    assert_non_null(sig);
    tampered = rezip(unsigned_zip, blen, TK_TKPKG_SIGNATURE, sig, strlen(sig), &tlen);
    package_path(bad_path, sizeof bad_path, "package_tampered.tkpkg");
    tp_write_file(bad_path, tampered, tlen);
    tk_assert_fails(tk_package_open(&pkg, bad_path), TK_EFORMAT, "signature does not match the manifest");
    assert_null(pkg);
    assert_null(tk_op_find("test_module::neg"));
    /* even allowing unsigned packages and ignoring trust does not open it: the signature is there */
    tk_package_options opts = TK_PACKAGE_OPTIONS_INIT;
    opts.allow_unsigned = 1;
    tk_assert_fails(tk_package_open_ex(&pkg, bad_path, &opts), TK_EFORMAT, "signature does not match the manifest");

    /* tkexport run: a one-line refusal, exit status 4 (a damaged input file), no crash */
    const char *argv[] = {TK_TKEXPORT, "run", bad_path, "--device", "cpu", "--input", "x=random:5", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tk_test_run(argv, NULL, &out, &err), 4);
    char want[1300];
    snprintf(want, sizeof want, "tkexport run: error: '%s': signature does not match the manifest", bad_path);
    assert_non_null(strstr(err, want));
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1); /* one line */
    free(out);
    free(err);

    /* re-signed by the attacker's own key: not trusted */
    tk_sign_key *evil_key;
    tk_assert_ok(tk_sign_key_generate(&evil_key));
    free(tampered);
    tk_assert_ok(tk_pkgfile_write_mem(&tampered, &tlen, &g, evil_key));
    tp_write_file(bad_path, tampered, tlen);
    tk_assert_fails(tk_package_open(&pkg, bad_path), TK_EINVAL, "which is not trusted on this machine");
    /* the signature dropped: unsigned */
    free(tampered);
    tampered = rezip(zip, len, TK_TKPKG_SIGNATURE, NULL, 0, &tlen);
    tp_write_file(bad_path, tampered, tlen);
    tk_assert_fails(tk_package_open(&pkg, bad_path), TK_EINVAL, "is not signed; refusing to run it");
    /* a manifest changed by one byte under its signature (digests untouched) */
    char *manifest = zip_entry(zip, len, TK_TKPKG_MANIFEST);
    char *at = strstr(manifest, "test::neg");
    assert_non_null(at);
    at[5] = 'N';
    free(tampered);
    tampered = rezip(zip, len, TK_TKPKG_MANIFEST, manifest, strlen(manifest), &tlen);
    tp_write_file(bad_path, tampered, tlen);
    tk_assert_fails(tk_package_open(&pkg, bad_path), TK_EFORMAT, "signature does not match the manifest");
    assert_null(tk_op_find("test_module::neg"));

    tk_sign_key_free(evil_key);
    free(manifest);
    free(tampered);
    free(sig);
    free(unsigned_zip);
    tk_pkgfile_free(f);
    free(zip);
    free(host);
    free(w);
    tk_program_model_free(m);
}

static void package__malformed_signature_entries_are_refused(void **state)
{
    (void)state;
    char path[1024];
    size_t len = 0, tlen;
    mlp_package(path, sizeof path, "package_sig_good.tkpkg", tp_key());
    void *zip = tk_test_read_file(path, &len);
    char *sig = zip_entry(zip, len, TK_TKPKG_SIGNATURE);
    assert_non_null(strstr(sig, "{\"format\":\"tkpkg-signature\",\"version\":1,\"algorithm\":\"ed25519\","
                                "\"public_key\":\"ed25519:"));
    assert_non_null(strstr(sig, "\",\"signature\":\""));
    struct {
        const char *sig, *message;
    } cases[] = {
        {"[]", "manifest.sig is malformed: not a JSON object"},
        {"{\"format\":\"tkpkg-signature\",\"version\":2}", "manifest.sig is malformed: expected format "
                                                           "'tkpkg-signature' version 1"},
        {"{\"format\":\"tkpkg-signature\",\"version\":1,\"algorithm\":\"rsa\"}",
         "manifest.sig is malformed: algorithm 'rsa', expected 'ed25519'"},
        {"{\"format\":\"tkpkg-signature\",\"version\":1,\"algorithm\":\"ed25519\",\"public_key\":\"ed25519:x\"}",
         "manifest.sig is malformed: 'public_key' is not ed25519: and the base64 of 32 bytes"},
    };
    tk_package *pkg;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *bad = rezip(zip, len, TK_TKPKG_SIGNATURE, cases[i].sig, strlen(cases[i].sig), &tlen);
        tp_write_file(path, bad, tlen);
        tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT, cases[i].message);
        free(bad);
    }
    /* a signature of the wrong length */
    char *cut = strstr(sig, "\"signature\":\"");
    assert_non_null(cut);
    strcpy(cut + 13, "AAAA\"}");
    void *bad = rezip(zip, len, TK_TKPKG_SIGNATURE, sig, strlen(sig), &tlen);
    tp_write_file(path, bad, tlen);
    tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT,
                    "manifest.sig is malformed: 'signature' is not the base64 of 64 bytes");
    free(bad);
    free(sig);
    free(zip);
}

static void package__version_1_is_told_to_recompile(void **state)
{
    (void)state;
    char path[1024], want[1200];
    size_t len = 0, tlen;
    mlp_package(path, sizeof path, "package_v1.tkpkg", NULL);
    void *zip = tk_test_read_file(path, &len);
    char *manifest = zip_entry(zip, len, TK_TKPKG_MANIFEST);
    char *at = strstr(manifest, "\"version\":\t2,");
    assert_non_null(at);
    at[11] = '1';
    void *old = rezip(zip, len, TK_TKPKG_MANIFEST, manifest, strlen(manifest), &tlen);
    tp_write_file(path, old, tlen);
    snprintf(want, sizeof want, "'%s' is a version 1 package; this runtime reads version 2 (recompile it with tkexport "
                                "compile)", path);
    tk_package *pkg;
    tk_assert_fails(tk_package_open(&pkg, path), TK_EFORMAT, want);
    assert_string_equal(tk_error_last(), want);
    tk_package_options opts = TK_PACKAGE_OPTIONS_INIT;
    opts.allow_unsigned = 1;
    tk_assert_fails(tk_package_open_ex(&pkg, path, &opts), TK_EFORMAT, want);
    free(old);
    free(manifest);
    free(zip);
}

/* tkexport keygen: the private key (0600) and KEYFILE.pub; never over an existing key without
 * --force; --trust adds the key to the trust file. */
/* The runtime's counts from the environment (TK_CAPTURE_PACE_US and the like) are whole numbers
 * read as the command line reads them (common/numarg.h): anything else is the default. */
static void env__counts_are_whole_numbers_or_the_default(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t want;
    } cases[] = {{"7", 7}, {"0", 0}, {"5000", 5000}, {"12x", 99}, {" 5", 99}, {"+5", 99}, {"-1", 99}, {"5 ", 99},
                 {"x", 99}, {"99999999999999999999", 99}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TK_TEST_COUNT", cases[i].text, 1);
        int64_t got = tk_env_count("TK_TEST_COUNT", 99);
        if (got != cases[i].want)
            fail_msg("TK_TEST_COUNT='%s': %lld, expected %lld", cases[i].text, (long long)got, (long long)cases[i].want);
    }
    unsetenv("TK_TEST_COUNT");
    assert_int_equal(tk_env_count("TK_TEST_COUNT", 42), 42);
}

static void cli__keygen_writes_a_key_pair_and_keeps_existing_keys(void **state)
{
    (void)state;
    char *dir = tk_test_temp_dir(), key[600], pub[610], trust[600], cfg[600], env_trust[700], env_cfg[700];
    char *out = NULL, *err = NULL;
    snprintf(key, sizeof key, "%s/release.key", dir);
    snprintf(pub, sizeof pub, "%s/release.key.pub", dir);
    snprintf(trust, sizeof trust, "%s/trusted_keys", dir);
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    snprintf(env_trust, sizeof env_trust, "TKEXPORT_TRUST_FILE=%s", trust);
    snprintf(env_cfg, sizeof env_cfg, "XDG_CONFIG_HOME=%s", cfg);
    const char *env[] = {env_trust, env_cfg, NULL};

    const char *help[] = {TK_TKEXPORT, "keygen", "--help", NULL};
    assert_int_equal(tk_test_run(help, env, &out, NULL), 0);
    assert_non_null(strstr(out, "usage: tkexport keygen [-o KEYFILE] [--force] [--trust]"));
    free(out);

    const char *gen[] = {TK_TKEXPORT, "keygen", "-o", key, NULL};
    assert_int_equal(tk_test_run(gen, env, &out, &err), 0);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *line = tk_test_read_file(pub, NULL), *pem = tk_test_read_file(key, NULL);
    assert_non_null(line);
    tk_sign_public p;
    tk_assert_ok(tk_sign_public_parse(&p, line, strcspn(line, " ")));
    char id[TK_SIGN_ID_MAX], want[1400];
    tk_sign_public_id(&p, id);
    snprintf(want, sizeof want, "(key id %s)", id);
    assert_non_null(strstr(out, want));
    assert_int_equal(access(trust, F_OK), -1); /* not trusted without --trust */
    free(out);
    free(err);

    /* a second time: refused, the key left as it was */
    assert_int_equal(tk_test_run(gen, env, &out, &err), 1);
    snprintf(want, sizeof want, "tkexport keygen: '%s' exists; refusing to overwrite a key (--force replaces it)\n", key);
    assert_string_equal(err, want);
    char *pem2 = tk_test_read_file(key, NULL);
    assert_string_equal(pem2, pem);
    free(pem2);
    free(out);
    free(err);
    /* --force --trust: a new key, added to the trust file */
    const char *force[] = {TK_TKEXPORT, "keygen", "-o", key, "--force", "--trust", NULL};
    assert_int_equal(tk_test_run(force, env, &out, &err), 0);
    pem2 = tk_test_read_file(key, NULL);
    assert_string_not_equal(pem2, pem);
    char *line2 = tk_test_read_file(pub, NULL), *trusted = tk_test_read_file(trust, NULL);
    assert_string_equal(trusted, line2);
    snprintf(want, sizeof want, "trusted on this machine: added to '%s'", trust);
    assert_non_null(strstr(out, want));
    free(out);
    free(err);
    /* without -o: the per-user key under XDG_CONFIG_HOME */
    const char *dflt[] = {TK_TKEXPORT, "keygen", NULL};
    assert_int_equal(tk_test_run(dflt, env, &out, &err), 0);
    char user_key[700];
    snprintf(user_key, sizeof user_key, "%s/tkexport/signing_key", cfg);
    assert_int_equal(stat(user_key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    free(out);
    free(err);
    const char *extra[] = {TK_TKEXPORT, "keygen", "stray", NULL};
    assert_int_equal(tk_test_run(extra, env, NULL, &err), 2);
    assert_non_null(strstr(err, "unexpected argument 'stray'"));
    free(err);
    free(line);
    free(line2);
    free(trusted);
    free(pem);
    free(pem2);
    tk_test_rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exec__cpu_run_matches_reference),
        cmocka_unit_test(exec__plans_are_cached_per_signature_in_one_arena),
        cmocka_unit_test(exec__least_recently_used_plans_go_beyond_the_cache),
        cmocka_unit_test(exec__session_options_bound_the_plans_and_are_checked),
        cmocka_unit_test(exec__inputs_are_checked_before_anything_runs),
        cmocka_unit_test(exec__symbols_agree_across_inputs_and_expressions),
        cmocka_unit_test(exec__guards_are_checked),
        cmocka_unit_test(exec__caller_outputs_are_written_in_place_and_checked),
        cmocka_unit_test(exec__profiles_time_each_node),
        cmocka_unit_test(exec__linear_and_its_elementwise_consumer_run_fused),
        cmocka_unit_test(exec__linear_gelu_linear_add_run_as_one_fused_mlp),
        cmocka_unit_test(exec__parameter_only_nodes_are_folded_with_the_weights),
        cmocka_unit_test(exec__folded_weights_serve_two_programs_and_changing_shapes),
        cmocka_unit_test(exec__layout_views_only_where_the_bytes_run_contiguous),
        cmocka_unit_test(exec__layout_nodes_run_as_views_of_their_input),
        cmocka_unit_test(exec__outputs_cut_from_a_value_come_back_as_views_of_it),
        cmocka_unit_test(exec__a_transpose_read_by_matmul_is_a_strided_view),
        cmocka_unit_test(exec__attention_reads_a_transposed_view_where_it_lies),
        cmocka_unit_test(exec__view_programs_run_side_by_side_with_changing_batches),
        cmocka_unit_test(exec__bad_programs_are_refused),
        cmocka_unit_test(exec__sessions_on_threads_give_identical_results),
        cmocka_unit_test(package__opened_and_run_on_the_cpu),
        cmocka_unit_test(package__errors_are_one_line),
        cmocka_unit_test(package__host_object_is_loaded_and_unloaded),
        cmocka_unit_test(package__tuned_kernels_use_the_recorded_declaration),
        cmocka_unit_test(sign__keys_sign_verify_and_round_trip_as_text_and_files),
        cmocka_unit_test(package__unsigned_is_refused_unless_allowed_explicitly),
        cmocka_unit_test(package__signed_by_an_untrusted_key_is_refused_naming_it),
        cmocka_unit_test(package__trust_file_lines_and_keys_are_checked),
        cmocka_unit_test(package__altered_after_signing_is_refused),
        cmocka_unit_test(package__large_entries_are_verified_chunk_by_chunk),
        cmocka_unit_test(package__malformed_signature_entries_are_refused),
        cmocka_unit_test(package__version_1_is_told_to_recompile),
        cmocka_unit_test(cli__keygen_writes_a_key_pair_and_keeps_existing_keys),
        cmocka_unit_test(env__counts_are_whole_numbers_or_the_default),
    };
    return cmocka_run_group_tests(tests, tp_trust_setup, tp_trust_teardown);
}
