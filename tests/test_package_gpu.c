/* The package runtime on a GPU: the executor's eager runs, CUDA graph capture and replay against
 * each other and the reference computed on the host, several sessions sharing one upload of the
 * weights, per-node profiles with device events. Exits 77 (skipped) without a CUDA driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include "rt_internal.h"
#include "tk_test_package.h"

static const tk_device GPU = {TK_DEVICE_CUDA, 0};
static const tk_device CPU = {TK_DEVICE_CPU, 0};

typedef struct fixture {
    tk_program_model *m;
    void *weights;
    size_t wlen;
    tk_exec_program *p;
} fixture;

static void fixture_init(fixture *fx)
{
    fx->m = tp_model();
    fx->weights = tp_weights(&fx->wlen);
    tk_assert_ok(tk_exec_program_new(&fx->p, fx->m, fx->weights, fx->wlen, "'test'"));
}

static void fixture_release(fixture *fx)
{
    tk_exec_program_free(fx->p);
    free(fx->weights);
    tk_program_model_free(fx->m);
}

/* Runs s on the host tensor x (copied in by the session) and returns y and h on the host. */
static void run_to_host(tk_session *s, tk_tensor *x, tk_tensor **y, tk_tensor **h)
{
    tk_tensor *out[2] = {NULL, NULL};
    tk_ctx *ctx = tk_session_ctx(s);
    tk_assert_ok(tk_session_run(s, &x, 1, out, 2));
    tk_assert_ok(tk_ctx_sync(ctx));
    for (int i = 0; i < 2; i++) {
        tk_tensor *host;
        tk_assert_ok(tk_tensor_new(&host, NULL, CPU, TK_F32, 2, tk_tensor_shape(out[i])));
        tk_assert_ok(tk_tensor_copy(ctx, host, out[i]));
        tk_tensor_free(out[i]);
        *(i ? h : y) = host;
    }
}

/* The built-in kernels compute in float with their own instruction order: within 1e-5 of the
 * host reference, as tp_check allows. */
static void gpu__graph_replay_matches_eager_and_reference(void **state)
{
    (void)state;
    fixture fx;
    tk_session *g, *e;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_assert_ok(tk_exec_session_new(&g, fx.p, GPU));
    tk_assert_ok(tk_exec_session_new(&e, fx.p, GPU));
    tk_exec_session_set_graphs(e, 0);
    const tk_exec_mode want[] = {TK_EXEC_EAGER, TK_EXEC_CAPTURED, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED};
    for (int i = 0; i < 4; i++) {
        tk_tensor *x = tp_input(13, i), *gy, *gh, *ey, *eh;
        run_to_host(g, x, &gy, &gh);
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.last_mode, want[i]);
        run_to_host(e, x, &ey, &eh);
        tk_exec_session_stats(e, &st);
        assert_int_equal(st.last_mode, TK_EXEC_EAGER);
        tp_check(x, gy, gh);
        assert_memory_equal(tk_tensor_data(gy), tk_tensor_data(ey), tk_tensor_nbytes(gy));
        assert_memory_equal(tk_tensor_data(gh), tk_tensor_data(eh), tk_tensor_nbytes(gh));
        tk_tensor_free(x);
        tk_tensor_free(gy);
        tk_tensor_free(gh);
        tk_tensor_free(ey);
        tk_tensor_free(eh);
    }
    /* a bigger signature grows the arena: its graph and the older ones are captured anew */
    for (int i = 0; i < 3; i++) {
        tk_tensor *x = tp_input(i == 2 ? 13 : 60, 7 + i), *y, *h;
        run_to_host(g, x, &y, &h);
        tp_check(x, y, h);
        tk_tensor_free(x);
        tk_tensor_free(y);
        tk_tensor_free(h);
    }
    tk_exec_session_stats(g, &st);
    assert_int_equal(st.plans, 2);
    assert_int_equal(st.last_mode, TK_EXEC_CAPTURED);
    tk_session_free(g);
    tk_session_free(e);
    fixture_release(&fx);
}

static void gpu__sessions_share_weights_and_agree(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s[3];
    tk_tensor *y0 = NULL;
    fixture_init(&fx);
    for (int i = 0; i < 3; i++)
        tk_assert_ok(tk_exec_session_new(&s[i], fx.p, GPU));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            tk_tensor *x = tp_input(33, round), *y, *h;
            run_to_host(s[i], x, &y, &h);
            tp_check(x, y, h);
            if (i == 0) {
                tk_tensor_free(y0);
                y0 = y;
            } else {
                assert_memory_equal(tk_tensor_data(y), tk_tensor_data(y0), tk_tensor_nbytes(y));
                tk_tensor_free(y);
            }
            tk_tensor_free(h);
            tk_tensor_free(x);
        }
    }
    tk_tensor_free(y0);
    for (int i = 0; i < 3; i++)
        tk_session_free(s[i]);
    fixture_release(&fx);
}

static void gpu__profiles_use_device_events(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    const tk_node_profile *prof;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU));
    tk_assert_ok(tk_session_set_profiling(s, 1));
    for (int i = 0; i < 3; i++) {
        tk_tensor *x = tp_input(20, i), *y, *h;
        run_to_host(s, x, &y, &h);
        tp_check(x, y, h);
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.last_mode, TK_EXEC_EAGER); /* profiling never replays */
        tk_tensor_free(x);
        tk_tensor_free(y);
        tk_tensor_free(h);
    }
    assert_int_equal(tk_session_profile(s, &prof), 3);
    for (int i = 0; i < 3; i++)
        assert_true(prof[i].time_us > 0);
    tk_session_free(s);
    fixture_release(&fx);
}

int main(void)
{
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "skipped: %s\n", tk_error_last());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu__graph_replay_matches_eager_and_reference),
        cmocka_unit_test(gpu__sessions_share_weights_and_agree),
        cmocka_unit_test(gpu__profiles_use_device_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
