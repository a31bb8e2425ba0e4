/* The package runtime on a GPU: the executor's eager runs, CUDA graph capture and replay against
 * each other and the reference computed on the host, several sessions sharing one upload of the
 * weights, per-node profiles with device events. Exits 77 (skipped) without a CUDA driver. */
#define _POSIX_C_SOURCE 200809L /* setenv (for tk_test_package.h too), clock_gettime */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "tk_test.h"

#include <tk/half.h>
#include <tk/log.h>
#include <tk/ops.h>

#include "rt_internal.h"
#include "tk_test_package.h"

/* test::via_call: y = x + x through tk_call, whose result the body allocates: a graph cannot hold
 * that, so sessions run it eagerly on every call. */
static int via_call(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    tk_tensor *t = tk_add(ctx, in[0], in[0]);
    if (!t)
        return TK_EINVAL;
    int rc = tk_tensor_copy(ctx, out[0], t);
    if (!rc)
        rc = tk_ctx_sync(ctx); /* t's memory goes back next */
    tk_tensor_free(t);
    return rc;
}

TK_OP(via_call_op, "test::via_call", "(Tensor x) -> Tensor", .cpu = via_call)
{
    return via_call(ctx, in, out);
}

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
    tk_assert_ok(tk_exec_program_new(&fx->p, fx->m, fx->weights, fx->wlen, "'test'", NULL));
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

/* Runs s on a fresh input of this batch, checks y and h against the reference; the run's mode. */
static tk_exec_mode run_checked(tk_session *s, int64_t batch, int seed)
{
    tk_exec_stats st;
    tk_tensor *x = tp_input(batch, seed), *y, *h;
    run_to_host(s, x, &y, &h);
    tp_check(x, y, h);
    tk_exec_session_stats(s, &st);
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(h);
    return st.last_mode;
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
    tk_session_options off = TK_SESSION_OPTIONS_INIT;
    off.prefill = TK_PREFILL_OFF; /* this test counts eager runs and captures: no warm-up either */
    tk_assert_ok(tk_exec_session_new(&g, fx.p, GPU, &off));
    tk_assert_ok(tk_exec_session_new(&e, fx.p, GPU, NULL));
    tk_exec_session_set_graphs(e, 0);
    /* the first run of a signature is eager and hands it to the capture thread; later runs
     * replay the graph it made */
    const tk_exec_mode want[] = {TK_EXEC_EAGER, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED};
    tk_exec_session_stats(g, &st);
    size_t grows = st.arena_grows;
    for (int i = 0; i < 4; i++) {
        tk_tensor *x = tp_input(13, i), *gy, *gh, *ey, *eh;
        run_to_host(g, x, &gy, &gh);
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.last_mode, want[i]);
        tk_exec_session_wait_captures(g);
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
    /* a bigger signature: eager, then its own graph; the arena, sized at creation for the largest
     * batch, does not move, so the older graph stays valid */
    const int batches[] = {60, 60, 13};
    const tk_exec_mode modes[] = {TK_EXEC_EAGER, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED};
    for (int i = 0; i < 3; i++) {
        tk_tensor *x = tp_input(batches[i], 7 + i), *y, *h;
        run_to_host(g, x, &y, &h);
        tp_check(x, y, h);
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.last_mode, modes[i]);
        tk_exec_session_wait_captures(g);
        tk_tensor_free(x);
        tk_tensor_free(y);
        tk_tensor_free(h);
    }
    tk_exec_session_stats(g, &st);
    assert_int_equal(st.plans, 2);
    assert_int_equal(st.captures, 2);
    assert_int_equal(st.arena_grows, grows);
    tk_session_free(g);
    tk_session_free(e);
    fixture_release(&fx);
}

/* Warm-up, then prefill. From its creation the capture thread captures batch 1, 2, 4, ..., 64 (a
 * first run of those sizes replays); once requests have brought 16 other batches, it captures
 * every signature of the (small) symbol space; then every batch, run before or not, replays. */
static void gpu__the_whole_small_symbol_space_is_captured_ahead(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, NULL));
    tk_exec_session_wait_captures(s);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, 7); /* the warm-up: 1, 2, 4, 8, 16, 32, 64 */
    assert_int_equal(st.plans, 7);
    assert_int_equal(run_checked(s, 32, 32), TK_EXEC_REPLAYED); /* never run, warmed up */
    assert_int_equal(run_checked(s, 3, 3), TK_EXEC_EAGER);      /* never run */
    for (int64_t b = 1; b <= 4; b++) /* a few shapes: no prefill */
        run_checked(s, b, (int)b);
    tk_exec_session_wait_captures(s);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, 8);
    assert_int_equal(st.plans, 8);
    for (int64_t b = 41; b <= 55; b++) /* shapes that vary: 16 brought by requests in all */
        run_checked(s, b, (int)b);
    tk_exec_session_wait_captures(s);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, TP_MAX_BATCH); /* batch 1..64 */
    assert_int_equal(st.plans, TP_MAX_BATCH);
    for (int64_t b = TP_MAX_BATCH; b >= 1; b -= 7)
        assert_int_equal(run_checked(s, b, (int)b), TK_EXEC_REPLAYED);
    tk_session_free(s);
    fixture_release(&fx);
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Under traffic the capture thread paces itself (exec.c: CAPTURE_PACE_US, here 300 ms): through
 * 100 ms of calls over 8 batches, each new to the session and queuing its graph, one graph is
 * captured; unpaced (a session made with the pace at 0), all 8. Once the calls stop, the pause
 * under way ends and the other 7 follow without one (no request came since). TK_PREFILL_OFF:
 * no warm-up, so that the captures are the requests'. */
static void gpu__the_capture_thread_gives_way_to_requests(void **state)
{
    (void)state;
    fixture fx;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_OFF;
    for (int paced = 1; paced >= 0; paced--) {
        tk_session *s;
        setenv("TK_CAPTURE_PACE_US", paced ? "300000" : "0", 1); /* read by the session's creation */
        tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, &o));
        setenv("TK_CAPTURE_PACE_US", "0", 1); /* main's, for the other tests */
        double t0 = mono_ms();
        for (int i = 0; mono_ms() - t0 < 100; i++)
            run_checked(s, 1 + i % 8, i);
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.captures, paced ? 1 : 8);
        t0 = mono_ms();
        tk_exec_session_wait_captures(s);
        double waited = mono_ms() - t0;
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.captures, 8);
        if (paced) /* what is left of one pause, not seven more (2.1 s) */
            assert_true(waited < 1000);
        for (int64_t b = 1; b <= 8; b++)
            assert_int_equal(run_checked(s, b, (int)b), TK_EXEC_REPLAYED);
        tk_session_free(s);
    }
    fixture_release(&fx);
}

/* TK_PREFILL_NOW: the capture starts with the session; once tk_session_wait_ready says so, every
 * batch, never run before, replays a graph on its first run. With max_shapes below the symbol
 * space there is no prefill, the session keeps at most max_shapes plans, and a signature's graph
 * waits for its second run. */
static void gpu__prefill_now_makes_every_first_run_a_replay(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_NOW;
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, &o));
    assert_int_equal(tk_session_wait_ready(s), 1);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, TP_MAX_BATCH);
    for (int64_t b = TP_MAX_BATCH; b >= 1; b -= 5)
        assert_int_equal(run_checked(s, b, (int)b), TK_EXEC_REPLAYED);
    tk_session_free(s);

    o.max_shapes = TP_MAX_BATCH / 2;
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, &o));
    assert_int_equal(tk_session_wait_ready(s), 0);
    for (int64_t b = 1; b <= TP_MAX_BATCH; b++)
        assert_int_equal(run_checked(s, b, (int)b), TK_EXEC_EAGER);
    tk_exec_session_wait_captures(s);
    tk_exec_session_stats(s, &st);
    assert_true(st.plans <= TP_MAX_BATCH / 2);
    /* a space above max_shapes: a signature's graph is captured after its second run only */
    assert_int_equal(st.captures, 0);
    assert_int_equal(run_checked(s, TP_MAX_BATCH, 1), TK_EXEC_EAGER);
    tk_exec_session_wait_captures(s);
    assert_int_equal(run_checked(s, TP_MAX_BATCH, 2), TK_EXEC_REPLAYED);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, 1);
    tk_session_free(s);
    fixture_release(&fx);
}

/* A batch that changes on every call (a server's load): each result right, first runs eager, the
 * repeats replayed from graphs the capture thread made meanwhile. */
static void gpu__a_new_batch_every_call_stays_correct(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, NULL));
    unsigned seed = 12345;
    size_t replayed = 0;
    for (int i = 0; i < 300; i++) {
        seed = seed * 1103515245u + 12345u;
        replayed += run_checked(s, 1 + (int64_t)((seed >> 8) % TP_MAX_BATCH), i) == TK_EXEC_REPLAYED;
    }
    tk_exec_session_wait_captures(s);
    tk_exec_session_stats(s, &st);
    assert_true(st.plans <= TP_MAX_BATCH);
    assert_true(st.captures > 0);
    assert_true(replayed > 0);
    tk_session_free(s);
    fixture_release(&fx);
}

/* test::views on the GPU, a batch in [1, 4] each call (1: narrow and transpose are views too),
 * the input from the host (staged graphs) or already on the device (eager, then direct graphs
 * on the same tensors): every result against the host's. */
static void gpu__layout_views_stay_correct_through_graphs(void **state)
{
    (void)state;
    tk_program_model *m = tp_views_model();
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_exec_program *p;
    tk_session *s;
    tk_exec_stats st;
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'views'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, GPU, NULL));
    tk_ctx *ctx = tk_session_ctx(s);
    size_t replayed = 0;
    for (int i = 0; i < 120; i++) {
        int64_t batch = 1 + (i * 7 % 11) % 4;
        int on_device = (i / 20) % 2;
        tk_tensor *x = tp_input(batch, i % 3), *dx = NULL, *out[2] = {NULL, NULL}, *host[2];
        if (on_device) {
            tk_assert_ok(tk_tensor_new(&dx, ctx, GPU, TK_F32, 2, tk_tensor_shape(x)));
            tk_assert_ok(tk_tensor_copy(ctx, dx, x));
        }
        tk_tensor *arg = on_device ? dx : x;
        tk_assert_ok(tk_session_run(s, &arg, 1, out, 2));
        tk_exec_session_stats(s, &st);
        replayed += st.last_mode == TK_EXEC_REPLAYED;
        for (int o = 0; o < 2; o++) {
            tk_assert_ok(tk_tensor_new(&host[o], NULL, CPU, TK_F32, 2, tk_tensor_shape(out[o])));
            tk_assert_ok(tk_tensor_copy(ctx, host[o], out[o]));
            tk_tensor_free(out[o]);
        }
        tk_assert_ok(tk_ctx_sync(ctx));
        tp_views_check(x, host[0], host[1]);
        tk_tensor_free(host[0]);
        tk_tensor_free(host[1]);
        tk_tensor_free(dx);
        tk_tensor_free(x);
    }
    assert_true(replayed > 0);
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(m);
    free(w);
}

/* Output views on the GPU: the first run allocates y as a view of x + x's rows; the same tensors
 * again run through a direct graph that writes the view in place (the narrow skipped); inputs from
 * the host go through the staged graph, its y copied into the view with a 2-D copy. Every result
 * read back through tk_tensor_copy against the host's. */
static void gpu__output_views_are_written_in_place_by_graphs(void **state)
{
    (void)state;
    tk_program_model *m = tp_oview_model();
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_exec_program *p;
    tk_session *s;
    tk_exec_stats st;
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.output_views = 1;
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'oview'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, GPU, &o));
    tk_ctx *ctx = tk_session_ctx(s);
    tk_tensor *x = tp_input(6, 0), *dx = NULL, *out[2] = {NULL, NULL};
    tk_assert_ok(tk_tensor_new(&dx, ctx, GPU, TK_F32, 2, tk_tensor_shape(x)));
    size_t direct = 0, replayed = 0;
    for (int i = 0; i < 40; i++) {
        tk_tensor *xi = tp_input(6, i), *host[2];
        int from_host = i >= 30;
        tk_assert_ok(tk_tensor_copy(ctx, dx, xi));
        tk_tensor *arg = from_host ? xi : dx;
        tk_assert_ok(tk_session_run(s, &arg, 1, out, 2));
        assert_false(tk_tensor_is_contiguous(out[0]));
        tk_exec_session_stats(s, &st);
        direct += st.last_direct;
        replayed += st.last_mode == TK_EXEC_REPLAYED;
        for (int k = 0; k < 2; k++) {
            tk_assert_ok(tk_tensor_new(&host[k], NULL, CPU, TK_F32, 2, tk_tensor_shape(out[k])));
            tk_assert_ok(tk_tensor_copy(ctx, host[k], out[k]));
        }
        tp_oview_check(xi, host[0], host[1]);
        tk_tensor_free(host[0]);
        tk_tensor_free(host[1]);
        tk_tensor_free(xi);
        if (i == 20)
            tk_exec_session_wait_captures(s);
    }
    assert_true(direct > 0);
    assert_true(replayed > direct); /* the staged graph too */
    tk_tensor_free(out[0]);
    tk_tensor_free(out[1]);
    tk_tensor_free(dx);
    tk_tensor_free(x);
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(m);
    free(w);
}

/* test::tview on the GPU: the transpose that only tk::matmul reads is a strided view, which
 * cuBLASLt reads with op T (eagerly, profiled, and through staged and direct graphs); the one an
 * add reads too is copied. Every result against the host's. */
static void gpu__matmul_reads_a_transposed_view_in_place(void **state)
{
    (void)state;
    tk_program_model *m = tp_tview_model();
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_exec_program *p;
    tk_session *s;
    tk_exec_stats st;
    const tk_node_profile *prof;
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'tview'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, GPU, NULL));
    tk_ctx *ctx = tk_session_ctx(s);
    size_t replayed = 0;
    for (int i = 0; i < 60; i++) {
        int64_t batch = i < 40 ? 1 + i % 3 : 7;
        tk_tensor *hin[2], *din[2] = {NULL, NULL}, *out[3] = {NULL, NULL, NULL}, *host[3];
        tp_tview_inputs(batch, i, &hin[0], &hin[1]);
        int on_device = i >= 20;
        for (int k = 0; on_device && k < 2; k++) {
            tk_assert_ok(tk_tensor_new(&din[k], ctx, GPU, TK_F32, 3, tk_tensor_shape(hin[k])));
            tk_assert_ok(tk_tensor_copy(ctx, din[k], hin[k]));
        }
        tk_assert_ok(tk_session_set_profiling(s, i == 5));
        tk_assert_ok(tk_session_run(s, on_device ? din : hin, 2, out, 3));
        if (i == 5) {
            assert_int_equal(tk_session_profile(s, &prof), 5);
            assert_string_equal(prof[0].op, "tk::transpose (view)");
            assert_string_equal(prof[2].op, "tk::transpose");
        }
        tk_exec_session_stats(s, &st);
        replayed += st.last_mode == TK_EXEC_REPLAYED;
        for (int o = 0; o < 3; o++) {
            tk_assert_ok(tk_tensor_new(&host[o], NULL, CPU, TK_F32, 3, tk_tensor_shape(out[o])));
            tk_assert_ok(tk_tensor_copy(ctx, host[o], out[o]));
            tk_tensor_free(out[o]);
        }
        tp_tview_check(hin[0], hin[1], host);
        for (int k = 0; k < 3; k++)
            tk_tensor_free(host[k]);
        for (int k = 0; k < 2; k++) {
            tk_tensor_free(hin[k]);
            tk_tensor_free(din[k]);
        }
    }
    assert_true(replayed > 0);
    tk_session_free(s);
    tk_exec_program_free(p);
    tk_program_model_free(m);
    free(w);
}

/* q = x.view(B, S, H, D).transpose(1, 2) read by tk::sdpa alone, on the GPU: the flash kernel (bf16,
 * D 64) and the row kernel (f32, D 8) read the strided view where it lies, eagerly and through
 * graphs; each result equals the eager run's on copies, bit for bit (the same arithmetic). */
static void gpu__attention_reads_a_transposed_view_where_it_lies(void **state)
{
    (void)state;
    const int64_t Ds[2] = {64, 8};
    const tk_dtype dts[2] = {TK_BF16, TK_F32};
    for (int c = 0; c < 2; c++) {
        int64_t D = Ds[c];
        tk_program_model *m = tp_sview_model(D, dts[c]);
        size_t wlen, es = tk_dtype_size(dts[c]);
        void *w = tp_weights(&wlen);
        tk_exec_program *p;
        tk_session *s;
        const tk_node_profile *prof;
        tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'sview'", NULL));
        tk_assert_ok(tk_exec_session_new(&s, p, GPU, NULL));
        tk_ctx *ctx = tk_session_ctx(s);
        for (int i = 0; i < 30; i++) {
            int64_t batch = 1 + i % 3;
            const int64_t xs[] = {batch, 4, 2 * D};
            tk_tensor *hx = NULL, *dx = NULL, *out = NULL, *want = NULL, *h1 = NULL, *h2 = NULL;
            tk_assert_ok(tk_tensor_new(&hx, NULL, CPU, dts[c], 3, xs));
            for (int64_t e = 0; e < batch * 8 * D; e++) {
                float v = 0.05f * (float)((e * 13 + i) % 41) - 1.0f;
                if (dts[c] == TK_BF16)
                    ((uint16_t *)tk_tensor_data(hx))[e] = tk_f32_to_bf16(v);
                else
                    ((float *)tk_tensor_data(hx))[e] = v;
            }
            tk_assert_ok(tk_tensor_new(&dx, ctx, GPU, dts[c], 3, xs));
            tk_assert_ok(tk_tensor_copy(ctx, dx, hx));
            tk_assert_ok(tk_session_set_profiling(s, i == 1));
            tk_assert_ok(tk_session_run(s, &dx, 1, &out, 1));
            if (i == 1) {
                assert_int_equal(tk_session_profile(s, &prof), 3);
                assert_string_equal(prof[1].op, "tk::transpose (view)");
            }
            want = tp_sview_eager(ctx, dx, D);
            tk_assert_ok(tk_tensor_new(&h1, NULL, CPU, dts[c], 4, tk_tensor_shape(out)));
            tk_assert_ok(tk_tensor_new(&h2, NULL, CPU, dts[c], 4, tk_tensor_shape(want)));
            tk_assert_ok(tk_tensor_copy(ctx, h1, out));
            tk_assert_ok(tk_tensor_copy(ctx, h2, want));
            assert_int_equal(tk_tensor_nbytes(h1), (size_t)(batch * 8 * D) * es);
            assert_memory_equal(tk_tensor_data(h1), tk_tensor_data(h2), tk_tensor_nbytes(h1));
            tk_tensor *fr[] = {hx, dx, out, want, h1, h2};
            for (size_t k = 0; k < sizeof fr / sizeof *fr; k++)
                tk_tensor_free(fr[k]);
        }
        tk_session_free(s);
        tk_exec_program_free(p);
        tk_program_model_free(m);
        free(w);
    }
}

/* test::views, test::oview (output views) and test::tview open at once, a new batch every call. */
static void gpu__view_programs_run_side_by_side_with_changing_batches(void **state)
{
    (void)state;
    tp_view_programs_side_by_side(GPU, 90);
}

static void gpu__sessions_share_weights_and_agree(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s[3];
    tk_tensor *y0 = NULL;
    fixture_init(&fx);
    for (int i = 0; i < 3; i++)
        tk_assert_ok(tk_exec_session_new(&s[i], fx.p, GPU, NULL));
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

/* x [batch, 4] -> test::via_call -> y */
static tk_program_model *via_call_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::via"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, TP_IN);
    tk_pm_node *n = tk_pm_add_node(m, "test::via_call", 1, 1, "model.c", 1);
    n->inputs[0] = 0;
    tp_set(m, &n->outputs[0], 1, NULL, 2, "batch", 0, TP_IN);
    tp_set(m, tk_pm_add_output(m), 1, NULL, 2, "batch", 0, TP_IN);
    tp_op(m, "test::via_call", "(Tensor x) -> Tensor", 0);
    return m;
}

static void gpu__uncapturable_ops_run_eagerly(void **state)
{
    (void)state;
    tk_program_model *m = via_call_model();
    size_t wlen;
    void *w = tp_weights(&wlen);
    tk_exec_program *p;
    tk_session *s;
    tk_exec_stats st;
    tk_assert_ok(tk_exec_program_new(&p, m, w, wlen, "'via'", NULL));
    tk_assert_ok(tk_exec_session_new(&s, p, GPU, NULL));
    for (int i = 0; i < 4; i++) {
        tk_tensor *x = tp_input(9, i), *y = NULL, *host;
        tk_assert_ok(tk_session_run(s, &x, 1, &y, 1));
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.last_mode, TK_EXEC_EAGER);
        tk_exec_session_wait_captures(s);
        tk_assert_ok(tk_tensor_new(&host, NULL, CPU, TK_F32, 2, tk_tensor_shape(y)));
        tk_assert_ok(tk_tensor_copy(tk_session_ctx(s), host, y));
        const float *xp = tk_tensor_data(x), *yp = tk_tensor_data(host);
        for (int64_t k = 0; k < tk_numel(x); k++)
            assert_true(yp[k] == xp[k] + xp[k]);
        tk_tensor_free(host);
        tk_tensor_free(y);
        tk_tensor_free(x);
    }
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.captures, 0); /* the capture failed: no graph, eager from then on */
    tk_session_free(s);
    tk_exec_program_free(p);
    free(w);
    tk_program_model_free(m);
}

static void gpu__profiles_use_device_events(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    const tk_node_profile *prof;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, NULL));
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

/* Device tensors from the host. */
static tk_tensor *on_gpu(tk_ctx *ctx, const tk_tensor *host)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, ctx, GPU, TK_F32, 2, tk_tensor_shape(host)));
    tk_assert_ok(tk_tensor_copy(ctx, t, host));
    return t;
}

static tk_tensor *to_host(tk_ctx *ctx, const tk_tensor *dev)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 2, tk_tensor_shape(dev)));
    tk_assert_ok(tk_tensor_copy(ctx, t, dev));
    return t;
}

/* A caller that runs one shape on the same device tensors again and again gets the direct
 * graph (no staging copies), made by the capture thread after its second run (which replays the
 * staged graph: the request path never captures); it reads the inputs' current contents; other
 * output tensors take the staged path again, and coming back to the first ones asks for a new
 * direct graph. */
static void gpu__same_tensors_run_through_a_direct_graph(void **state)
{
    (void)state;
    fixture fx;
    tk_session *g;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_session_options off = TK_SESSION_OPTIONS_INIT;
    off.prefill = TK_PREFILL_OFF;
    tk_assert_ok(tk_exec_session_new(&g, fx.p, GPU, &off));
    tk_ctx *ctx = tk_session_ctx(g);
    const int64_t oshape[] = {13, TP_OUT};
    tk_tensor *x = tp_input(13, 3), *dx = on_gpu(ctx, x), *dout[2], *other[2];
    for (int i = 0; i < 2; i++) {
        tk_assert_ok(tk_tensor_new(&dout[i], ctx, GPU, TK_F32, 2, oshape));
        tk_assert_ok(tk_tensor_new(&other[i], ctx, GPU, TK_F32, 2, oshape));
    }
    const tk_exec_mode want[] = {TK_EXEC_EAGER, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED, TK_EXEC_REPLAYED};
    const int want_direct[] = {0, 0, 1, 1};
    for (int i = 0; i < 5; i++) {
        tk_exec_session_wait_captures(g);
        if (i == 4) { /* new contents in the same input tensor */
            tk_tensor_free(x);
            x = tp_input(13, 9);
            tk_assert_ok(tk_tensor_copy(ctx, dx, x));
        }
        tk_assert_ok(tk_session_run(g, &dx, 1, dout, 2));
        tk_assert_ok(tk_ctx_sync(ctx));
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.last_mode, want[i < 4 ? i : 3]);
        assert_int_equal(st.last_direct, want_direct[i < 4 ? i : 3]);
        tk_tensor *y = to_host(ctx, dout[0]), *h = to_host(ctx, dout[1]);
        tp_check(x, y, h);
        tk_tensor_free(y);
        tk_tensor_free(h);
    }
    /* other outputs: the staged graph of the signature, made by the capture thread */
    tk_assert_ok(tk_session_run(g, &dx, 1, other, 2));
    tk_assert_ok(tk_ctx_sync(ctx));
    tk_exec_session_stats(g, &st);
    assert_int_equal(st.last_mode, TK_EXEC_REPLAYED);
    assert_int_equal(st.last_direct, 0);
    assert_int_equal(st.direct_captures, 1);
    tk_tensor *y = to_host(ctx, other[0]), *h = to_host(ctx, other[1]);
    tp_check(x, y, h);
    tk_tensor_free(y);
    tk_tensor_free(h);
    /* back to dout: the graph on dout was dropped for other's pointers; two runs ask again */
    for (int i = 0; i < 3; i++) {
        tk_exec_session_wait_captures(g);
        tk_assert_ok(tk_session_run(g, &dx, 1, dout, 2));
        tk_assert_ok(tk_ctx_sync(ctx));
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.last_direct, i == 2);
        y = to_host(ctx, dout[0]), h = to_host(ctx, dout[1]);
        tp_check(x, y, h);
        tk_tensor_free(y);
        tk_tensor_free(h);
    }
    assert_int_equal(st.direct_captures, 2);
    for (int i = 0; i < 2; i++) {
        tk_tensor_free(dout[i]);
        tk_tensor_free(other[i]);
    }
    tk_tensor_free(dx);
    tk_tensor_free(x);
    tk_session_free(g);
    fixture_release(&fx);
}

/* tk_session_bind: a server's buffers at the largest shape, each call a view of its shape at their
 * start. The prefill captures every signature's graph on those buffers, so every batch, never
 * run before included, replays its direct graph (no staging copies). Buffers of another dtype
 * or too small are refused. */
static void gpu__bound_buffers_replay_direct_graphs_for_every_shape(void **state)
{
    (void)state;
    fixture fx;
    tk_session *s;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_NOW;
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, &o));
    tk_ctx *ctx = tk_session_ctx(s);
    const int64_t ishape[] = {TP_MAX_BATCH, TP_IN}, oshape[] = {TP_MAX_BATCH, TP_OUT}, small[] = {TP_MAX_BATCH - 1, TP_IN};
    tk_tensor *xbuf, *obuf[2], *tiny;
    tk_assert_ok(tk_tensor_new(&xbuf, ctx, GPU, TK_F32, 2, ishape));
    tk_assert_ok(tk_tensor_new(&tiny, ctx, GPU, TK_F32, 2, small));
    for (int i = 0; i < 2; i++)
        tk_assert_ok(tk_tensor_new(&obuf[i], ctx, GPU, TK_F32, 2, oshape));
    assert_int_equal(tk_session_bind(s, &tiny, 1, obuf, 2), TK_EINVAL);
    assert_non_null(strstr(tk_error_last(), "largest shape"));
    tk_assert_ok(tk_session_bind(s, &xbuf, 1, obuf, 2));
    assert_int_equal(tk_session_wait_ready(s), 1);
    tk_exec_session_stats(s, &st);
    assert_int_equal(st.direct_captures, TP_MAX_BATCH);
    const int64_t batches[] = {5, 64, 1, 33, 17, 2};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        int64_t b = batches[i];
        const int64_t is[] = {b, TP_IN}, os[] = {b, TP_OUT};
        tk_tensor xv, ov[2], *x = tp_input(b, (int)i), *outs[2] = {&ov[0], &ov[1]}, *in = &xv;
        tk_tensor_view_init(&xv, GPU, TK_F32, 2, is, tk_tensor_data(xbuf));
        for (int k = 0; k < 2; k++)
            tk_tensor_view_init(&ov[k], GPU, TK_F32, 2, os, tk_tensor_data(obuf[k]));
        tk_assert_ok(tk_tensor_copy(ctx, &xv, x));
        tk_assert_ok(tk_session_run(s, &in, 1, outs, 2));
        tk_assert_ok(tk_ctx_sync(ctx));
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.last_mode, TK_EXEC_REPLAYED);
        assert_int_equal(st.last_direct, 1);
        tk_tensor *y = to_host(ctx, &ov[0]), *h = to_host(ctx, &ov[1]);
        tp_check(x, y, h);
        tk_tensor_free(y);
        tk_tensor_free(h);
        tk_tensor_free(x);
    }
    tk_tensor_free(xbuf);
    tk_tensor_free(tiny);
    tk_tensor_free(obuf[0]);
    tk_tensor_free(obuf[1]);
    tk_session_free(s);
    fixture_release(&fx);
}

/* A replay's tk_ctx_sync spins on the graph's end-of-graph signal instead of synchronizing the
 * stream: armed by the launch, disarmed by any later work, and once it returns the GPU has counted
 * every launch (a wait that returned early would leave the count behind: the graph takes
 * microseconds after its launch returns). With a second session on the GPU the launches go
 * through the device's launcher thread: work queued after one (a copy of its output) still runs
 * after it. */
static void signal_waits(int second_session)
{
    const char *env = getenv("TK_GRAPH_SIGNAL"), *lenv = getenv("TK_LAUNCHER");
    int off = env && !strcmp(env, "0");
    int launcher = second_session ? !(lenv && !strcmp(lenv, "0")) : lenv && !strcmp(lenv, "1");
    fixture fx;
    tk_session *s, *other = NULL;
    tk_exec_stats st;
    fixture_init(&fx);
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_NOW;
    if (second_session) { /* its graphs give the GPU a second signalled session */
        tk_assert_ok(tk_exec_session_new(&other, fx.p, GPU, &o));
        assert_int_equal(tk_session_wait_ready(other), 1);
    }
    tk_assert_ok(tk_exec_session_new(&s, fx.p, GPU, &o));
    tk_ctx *ctx = tk_session_ctx(s);
    const int64_t ishape[] = {TP_MAX_BATCH, TP_IN}, oshape[] = {TP_MAX_BATCH, TP_OUT};
    tk_tensor *xbuf, *obuf[2], *spare;
    tk_assert_ok(tk_tensor_new(&xbuf, ctx, GPU, TK_F32, 2, ishape));
    tk_assert_ok(tk_tensor_new(&spare, ctx, GPU, TK_F32, 2, oshape));
    for (int i = 0; i < 2; i++)
        tk_assert_ok(tk_tensor_new(&obuf[i], ctx, GPU, TK_F32, 2, oshape));
    tk_assert_ok(tk_session_bind(s, &xbuf, 1, obuf, 2));
    assert_int_equal(tk_session_wait_ready(s), 1);
    unsigned launched, seen, before = 0;
    for (int i = 0; i < 40; i++) {
        int64_t b = 1 + (int64_t)((i * 37) % TP_MAX_BATCH);
        const int64_t is[] = {b, TP_IN}, os[] = {b, TP_OUT};
        tk_tensor xv, ov[2], *x = tp_input(b, i), *outs[2] = {&ov[0], &ov[1]}, *in = &xv;
        tk_tensor_view_init(&xv, GPU, TK_F32, 2, is, tk_tensor_data(xbuf));
        for (int k = 0; k < 2; k++)
            tk_tensor_view_init(&ov[k], GPU, TK_F32, 2, os, tk_tensor_data(obuf[k]));
        tk_assert_ok(tk_tensor_copy(ctx, &xv, x));
        tk_cuda_signal_state(ctx, &before, &seen);
        tk_assert_ok(tk_session_run(s, &in, 1, outs, 2));
        tk_exec_session_stats(s, &st);
        assert_int_equal(st.last_mode, TK_EXEC_REPLAYED);
        int armed = tk_cuda_signal_state(ctx, &launched, &seen);
        if (off) {
            assert_int_equal(armed, -1);
        } else {
            assert_int_equal(armed, 1);
            assert_int_equal(launched, before + 1);
        }
        if (i % 4 == 3) { /* work queued after the launch: the wait is the stream's again */
            tk_assert_ok(tk_tensor_copy(ctx, spare, obuf[0]));
            assert_int_equal(tk_cuda_signal_state(ctx, &launched, &seen), off ? -1 : 0);
        }
        tk_assert_ok(tk_ctx_sync(ctx));
        assert_int_equal(tk_cuda_signal_state(ctx, &launched, &seen), off ? -1 : 0);
        assert_int_equal(seen, launched);
        tk_tensor *y = to_host(ctx, &ov[0]), *h = to_host(ctx, &ov[1]);
        tp_check(x, y, h);
        if (i % 4 == 3) { /* the copy ran after the graph: this call's output, not the last one's */
            tk_tensor sv, *sh;
            tk_tensor_view_init(&sv, GPU, TK_F32, 2, os, tk_tensor_data(spare));
            sh = to_host(ctx, &sv);
            assert_memory_equal(tk_tensor_data(sh), tk_tensor_data(y), (size_t)(b * TP_OUT) * sizeof(float));
            tk_tensor_free(sh);
        }
        tk_tensor_free(y);
        tk_tensor_free(h);
        tk_tensor_free(x);
    }
    if (!off)
        assert_true(launched >= 40);
    assert_int_equal(tk_cuda_launcher_used(ctx), !off && launcher);
    tk_tensor_free(xbuf);
    tk_tensor_free(spare);
    tk_tensor_free(obuf[0]);
    tk_tensor_free(obuf[1]);
    tk_session_free(s);
    tk_session_free(other);
    fixture_release(&fx);
}

static void gpu__a_replay_is_waited_for_on_its_end_of_graph_signal(void **state)
{
    (void)state;
    signal_waits(0);
}

static void gpu__two_sessions_hand_their_replays_to_the_launcher(void **state)
{
    (void)state;
    signal_waits(1);
}

/* One call of batch rows on GPU session g (from dx, a device tensor, where given) and CPU session
 * c; fails where they differ. With `other`, another CPU session, the number of elements where g's
 * result differs from other's on the same input (0 without). */
static int mf_agree(tk_session *g, tk_session *c, tk_session *other, int64_t batch, int call, tk_tensor *dx)
{
    const int64_t xs[] = {batch, MF_D};
    tk_tensor *x = mf_bf16(2, xs, -1, 0), *gy[1] = {NULL}, *cy[1] = {NULL}, *oy[1] = {NULL}, *host;
    for (int64_t i = 0; i < batch * MF_D; i++)
        ((uint16_t *)tk_tensor_data(x))[i] = tk_f32_to_bf16(0.01f * (float)((i * 29 + call) % 301) - 1.5f);
    tk_ctx *ctx = tk_session_ctx(g);
    if (dx)
        tk_assert_ok(tk_tensor_copy(ctx, dx, x));
    tk_assert_ok(tk_session_run(g, dx ? &dx : &x, 1, gy, 1));
    tk_assert_ok(tk_ctx_sync(ctx));
    tk_assert_ok(tk_tensor_new(&host, NULL, CPU, TK_BF16, 2, xs));
    tk_assert_ok(tk_tensor_copy(ctx, host, gy[0]));
    tk_assert_ok(tk_session_run(c, &x, 1, cy, 1));
    if (other)
        tk_assert_ok(tk_session_run(other, &x, 1, oy, 1));
    const uint16_t *a = tk_tensor_data(host), *b = tk_tensor_data(cy[0]), *o = other ? tk_tensor_data(oy[0]) : NULL;
    int apart = 0;
    for (int64_t i = 0; i < batch * MF_D; i++) {
        double got = tk_bf16_to_f32(a[i]), want = tk_bf16_to_f32(b[i]);
        if (fabs(got - want) > 0.02 + 0.02 * fabs(want))
            fail_msg("call %d batch %lld element %lld: %g on the GPU, %g on the CPU", call, (long long)batch,
                     (long long)i, got, want);
        apart += o && a[i] != o[i];
    }
    tk_tensor *fl[] = {x, gy[0], cy[0], oy[0], host};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        tk_tensor_free(fl[i]);
    return apart;
}

/* Two test::tokmlp programs (other weights) open at once on the GPU, taking turns, a new batch
 * every call: each output against the same program's CPU session (within bf16's rounding), and
 * the two programs' outputs apart. TK_MLP_MIN_ROWS=32 (read again: tk_mlp_env_reload) sends
 * batches under 32 through the cuBLASLt pair and the hidden tensor the session plans, the others
 * through the fused kernel; captured graphs replay both. */
static void gpu__two_fused_mlp_programs_with_a_new_batch_every_call(void **state)
{
    (void)state;
    setenv("TK_MLP_MIN_ROWS", "32", 1);
    tk_mlp_env_reload();
    tk_program_model *m = mlpfuse_model();
    tk_exec_program *p[2];
    tk_session *g[2], *c[2];
    void *w[2];
    size_t wl[2];
    for (int i = 0; i < 2; i++) {
        w[i] = mlpfuse_weights(&wl[i], i);
        tk_assert_ok(tk_exec_program_new(&p[i], m, w[i], wl[i], i ? "'tokmlp 2'" : "'tokmlp 1'", NULL));
        tk_assert_ok(tk_exec_session_new(&g[i], p[i], GPU, NULL));
        tk_assert_ok(tk_exec_session_new(&c[i], p[i], CPU, NULL));
    }
    unsigned seed = 777;
    int apart = 0, kernel_calls = 0, pair_calls = 0;
    for (int call = 0; call < 240; call++) {
        seed = seed * 1103515245u + 12345u;
        int64_t batch = 1 + (int64_t)((seed >> 8) % TP_MAX_BATCH);
        int k = call & 1;
        *(batch >= 32 ? &kernel_calls : &pair_calls) += 1;
        apart += mf_agree(g[k], c[k], c[k ^ 1], batch, call, NULL);
    }
    assert_true(kernel_calls > 0 && pair_calls > 0);
    assert_true(apart > 0);
    for (int i = 0; i < 2; i++) {
        tk_exec_stats st;
        tk_exec_session_wait_captures(g[i]);
        tk_exec_session_stats(g[i], &st);
        assert_int_equal(st.fused, 3);
        assert_true(st.captures > 0);
        tk_session_free(g[i]);
        tk_session_free(c[i]);
        tk_exec_program_free(p[i]);
        free(w[i]);
    }
    tk_program_model_free(m);
}

/* Where tk::_mlp's kernel takes every call (an sm_90 GPU, TK_MLP_MIN_ROWS unset), a session keeps
 * no hidden tensor for it: its memory is smaller by the hidden layer of the largest batch than with
 * TK_MLP_MIN_ROWS=32 (the pairs then run below 32 rows, through that tensor); on other GPUs both
 * keep it. Two such programs (other weights) open at once, a new batch every call, each call
 * agrees with its own program on the CPU either way, those from an input 2 bytes off alignment
 * too: the kernel declines it, so the signature's first run, eager on that tensor, runs the pairs
 * through a hidden tensor of the op's own (later runs replay the staged graph, on an aligned copy). */
static void gpu__fused_mlp_sessions_keep_no_hidden_tensor_where_the_kernel_takes_every_call(void **state)
{
    (void)state;
    tk_program_model *m = mlpfuse_model();
    tk_exec_program *p[2];
    void *w[2];
    size_t wl[2];
    for (int i = 0; i < 2; i++) { /* two programs, other weights, open at once */
        w[i] = mlpfuse_weights(&wl[i], i);
        tk_assert_ok(tk_exec_program_new(&p[i], m, w[i], wl[i], i ? "'tokmlp 2'" : "'tokmlp 1'", NULL));
    }
    tk_session_options off = TK_SESSION_OPTIONS_INIT;
    off.prefill = TK_PREFILL_OFF;
    size_t arena[2][2];
    int cc = 0, apart = 0;
    for (int k = 0; k < 2; k++) {
        if (k)
            setenv("TK_MLP_MIN_ROWS", "32", 1);
        else
            unsetenv("TK_MLP_MIN_ROWS");
        tk_mlp_env_reload();
        tk_session *g[2], *c[2];
        for (int i = 0; i < 2; i++) {
            tk_assert_ok(tk_exec_session_new(&g[i], p[i], GPU, &off));
            tk_assert_ok(tk_exec_session_new(&c[i], p[i], CPU, NULL));
        }
        cc = tk_cuda_cc_of(tk_session_ctx(g[0]));
        const int64_t batches[] = {TP_MAX_BATCH, 1, 40, 7, 40, 64, 13, 1, 33, 7};
        for (int i = 0; i < 10; i++) /* a new batch every call, the programs in turn */
            apart += mf_agree(g[i & 1], c[i & 1], c[(i & 1) ^ 1], batches[i], 10 * k + i, NULL);
        const int64_t odd[] = {23, MF_D}, rows[] = {MF_D, 1};
        tk_tensor *dx;
        tk_assert_ok(tk_tensor_new_view(&dx, tk_session_ctx(g[0]), GPU, TK_BF16, 2, odd, rows, 23 * MF_D * 2 + 2, 2));
        for (int i = 0; i < 3; i++)
            mf_agree(g[0], c[0], NULL, 23, 30 + i, dx);
        for (int i = 0; i < 2; i++) {
            tk_exec_stats st;
            tk_exec_session_wait_captures(g[i]);
            mf_agree(g[i], c[i], NULL, 40, 20 + k, NULL); /* a replay */
            tk_exec_session_stats(g[i], &st);
            assert_int_equal(st.fused, 3);
            arena[i][k] = st.arena_bytes;
        }
        mf_agree(g[0], c[0], NULL, 23, 40 + k, dx);
        tk_tensor_free(dx);
        for (int i = 0; i < 2; i++) {
            tk_session_free(g[i]);
            tk_session_free(c[i]);
        }
    }
    unsetenv("TK_MLP_MIN_ROWS");
    tk_mlp_env_reload();
    assert_true(apart > 0); /* the programs' weights differ: each session ran its own */
    const size_t hidden = (size_t)TP_MAX_BATCH * MF_H * 2;
    for (int i = 0; i < 2; i++) {
        if (cc == 90)
            assert_true(arena[i][1] >= arena[i][0] + hidden);
        else
            assert_int_equal(arena[i][0], arena[i][1]);
        tk_exec_program_free(p[i]);
        free(w[i]);
    }
    tk_program_model_free(m);
}

/* A bound test::tokmlp session g on buffers xb, yb: one call of batch b (the input made from
 * `call`), checked against the program's CPU session c; with another program's CPU session
 * `other`, how many output elements differ from its output for the same input. */
static int fam_call(tk_session *g, tk_session *c, tk_session *other, tk_tensor *xb, tk_tensor *yb, int64_t b, int call,
                    const char *label)
{
    tk_ctx *ctx = tk_session_ctx(g);
    const int64_t xs[] = {b, MF_D};
    tk_tensor *x = mf_bf16(2, xs, -1, 0), *cy[1] = {NULL}, *host, xv, yv, *in = &xv, *out[1] = {&yv};
    tk_exec_stats st;
    for (int64_t e = 0; e < b * MF_D; e++)
        ((uint16_t *)tk_tensor_data(x))[e] = tk_f32_to_bf16(0.01f * (float)((e * 31 + 7 * call) % 257) - 1.25f);
    tk_tensor_view_init(&xv, GPU, TK_BF16, 2, xs, tk_tensor_data(xb));
    tk_tensor_view_init(&yv, GPU, TK_BF16, 2, xs, tk_tensor_data(yb));
    tk_assert_ok(tk_tensor_copy(ctx, &xv, x));
    tk_assert_ok(tk_session_run(g, &in, 1, out, 1));
    tk_assert_ok(tk_ctx_sync(ctx));
    tk_exec_session_stats(g, &st);
    assert_int_equal(st.last_direct, 1);
    tk_assert_ok(tk_tensor_new(&host, NULL, CPU, TK_BF16, 2, xs));
    tk_assert_ok(tk_tensor_copy(ctx, host, &yv));
    tk_assert_ok(tk_session_run(c, &x, 1, cy, 1));
    const uint16_t *got = tk_tensor_data(host), *want = tk_tensor_data(cy[0]);
    for (int64_t e = 0; e < b * MF_D; e++) {
        double gv = tk_bf16_to_f32(got[e]), wv = tk_bf16_to_f32(want[e]);
        if (fabs(gv - wv) > 0.02 + 0.02 * fabs(wv))
            fail_msg("%s, call %d batch %lld element %lld: %g on the GPU, %g on the CPU", label, call, (long long)b,
                     (long long)e, gv, wv);
    }
    int apart = 0;
    if (other) {
        tk_tensor *oy[1] = {NULL};
        tk_assert_ok(tk_session_run(other, &x, 1, oy, 1));
        const uint16_t *o = tk_tensor_data(oy[0]);
        for (int64_t e = 0; e < b * MF_D; e++)
            apart += got[e] != o[e];
        tk_tensor_free(oy[0]);
    }
    tk_tensor_free(x);
    tk_tensor_free(cy[0]);
    tk_tensor_free(host);
    return apart;
}

/* test::tokmlp's GPU session bound to new buffers of its largest batch, its prefill waited for */
static tk_session *fam_session(tk_exec_program *p, size_t max_shapes, tk_tensor **xb, tk_tensor **yb)
{
    tk_session *g;
    tk_session_options o = TK_SESSION_OPTIONS_INIT;
    o.prefill = TK_PREFILL_NOW;
    o.max_shapes = max_shapes;
    tk_assert_ok(tk_exec_session_new(&g, p, GPU, &o));
    const int64_t big[] = {TP_MAX_BATCH, MF_D};
    tk_assert_ok(tk_tensor_new(xb, tk_session_ctx(g), GPU, TK_BF16, 2, big));
    tk_assert_ok(tk_tensor_new(yb, tk_session_ctx(g), GPU, TK_BF16, 2, big));
    tk_assert_ok(tk_session_bind(g, xb, 1, yb, 1));
    assert_int_equal(tk_session_wait_ready(g), 1);
    return g;
}

/* the switch the test below sets, unset whether it passed or failed */
static int families_env_unset(void **state)
{
    (void)state;
    unsetenv("TK_GRAPH_FAMILIES");
    return 0;
}

/* Graphs of one form share one instantiated graph (runtime/cuda_family.c) in sessions that may hold
 * more than 4,096 graphs (test::tokmlp's 64 signatures never do, whatever max_shapes), or all with
 * TK_GRAPH_FAMILIES=1, none with 0: test::tokmlp bound and prefilled over its 64 batches makes 64
 * direct graphs, in families on an sm_90 GPU a few (tk::_mlp's kernel at every batch); calls that
 * switch batches, up and down, each agree with the CPU (a member launched with another's grid and
 * arguments would compute another number of rows: after a smaller batch, a larger one would keep
 * the rows of an earlier input), families or not. Then two programs (other weights, the same
 * kernels: graphs of one form) open at once, each session with families of its own, taking turns
 * with a new batch every call: each agrees with its own program, and their outputs differ. */
static void gpu__graphs_of_one_form_share_one_instantiated_graph(void **state)
{
    (void)state;
    tk_program_model *m = mlpfuse_model();
    tk_exec_program *p[2];
    size_t wl[2];
    void *w[2];
    for (int i = 0; i < 2; i++) {
        w[i] = mlpfuse_weights(&wl[i], i);
        tk_assert_ok(tk_exec_program_new(&p[i], m, w[i], wl[i], i ? "'tokmlp 2'" : "'tokmlp 1'", NULL));
    }
    static const struct {
        const char *env;
        size_t max_shapes;
        int shared;
    } cases[] = {{"1", 0, 1}, {"0", 0, 0}, {NULL, 8192, 0}, {NULL, 0, 0}, {"1", 8192, 1}};
    const int64_t batches[] = {1, 64, 5, 64, 33, 2, 63, 40, 40, 7, 64, 1};
    const int nb = (int)(sizeof batches / sizeof *batches);
    tk_exec_stats st;
    for (int k = 0; k < (int)(sizeof cases / sizeof *cases); k++) {
        const int off = !cases[k].shared;
        if (cases[k].env)
            setenv("TK_GRAPH_FAMILIES", cases[k].env, 1);
        else
            unsetenv("TK_GRAPH_FAMILIES");
        tk_tensor *xb, *yb;
        tk_session *g = fam_session(p[0], cases[k].max_shapes, &xb, &yb), *c;
        tk_assert_ok(tk_exec_session_new(&c, p[0], CPU, NULL));
        tk_exec_session_stats(g, &st);
        assert_int_equal(st.direct_captures, TP_MAX_BATCH);
        fprintf(stderr, "TK_GRAPH_FAMILIES=%s, max_shapes %zu: %zu families of %zu graphs (%zu direct, %zu staged)\n",
                cases[k].env ? cases[k].env : "(unset)", cases[k].max_shapes, st.families, st.family_members,
                st.direct_captures, st.captures);
        if (off) {
            assert_int_equal(st.families, 0);
        } else {
            /* every graph the session holds: each direct one, and any staged one the prefill made before
             * the bind (the same kernels on the arena's addresses) */
            assert_true(st.family_members >= st.direct_captures);
            assert_true(st.family_members <= st.direct_captures + st.captures);
            assert_true(st.families >= 1 && st.families <= st.family_members);
            if (tk_cuda_cc_of(tk_session_ctx(g)) == 90)
                assert_true(st.families <= 4);
        }
        for (int i = 0; i < nb; i++)
            fam_call(g, c, NULL, xb, yb, batches[i], i, off ? "families off" : "families on");
        tk_tensor_free(xb);
        tk_tensor_free(yb);
        tk_session_free(g);
        tk_session_free(c);
    }
    /* two programs at once, families on, a new batch every call */
    setenv("TK_GRAPH_FAMILIES", "1", 1);
    tk_session *g[2], *c[2];
    tk_tensor *xb[2], *yb[2];
    for (int i = 0; i < 2; i++) {
        g[i] = fam_session(p[i], 0, &xb[i], &yb[i]);
        tk_assert_ok(tk_exec_session_new(&c[i], p[i], CPU, NULL));
    }
    int apart = 0;
    for (int i = 0; i < 2 * nb; i++) {
        const int j = i & 1;
        apart += fam_call(g[j], c[j], c[j ^ 1], xb[j], yb[j], batches[(i / 2 + 3 * j) % nb], i,
                          j ? "tokmlp 2" : "tokmlp 1");
    }
    assert_true(apart > 0); /* each session ran its own program's weights */
    for (int i = 0; i < 2; i++) {
        tk_exec_session_stats(g[i], &st);
        fprintf(stderr, "two programs, session %d: %zu families of %zu graphs (%zu direct, %zu staged)\n", i,
                st.families, st.family_members, st.direct_captures, st.captures);
        assert_int_equal(st.direct_captures, TP_MAX_BATCH);
        assert_true(st.family_members >= st.direct_captures);
        assert_true(st.family_members <= st.direct_captures + st.captures);
        tk_tensor_free(xb[i]);
        tk_tensor_free(yb[i]);
        tk_session_free(g[i]);
        tk_session_free(c[i]);
    }
    unsetenv("TK_GRAPH_FAMILIES");
    for (int i = 0; i < 2; i++) {
        tk_exec_program_free(p[i]);
        free(w[i]);
    }
    tk_program_model_free(m);
}

/* Every message, DEBUG included (a capture that failed says why), on stderr. */
static void log_all(tk_log_level level, const char *msg, void *user)
{
    (void)level, (void)user;
    fprintf(stderr, "log: %s\n", msg);
}

int main(void)
{
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_log_set(log_all, NULL);
    /* the tests count graphs and replays where a pause after a capture would make them depend on
     * timing: no pacing, but in the test of the pacing (which sets its own) */
    setenv("TK_CAPTURE_PACE_US", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu__graph_replay_matches_eager_and_reference),
        cmocka_unit_test(gpu__a_new_batch_every_call_stays_correct),
        cmocka_unit_test(gpu__two_fused_mlp_programs_with_a_new_batch_every_call),
        cmocka_unit_test(gpu__fused_mlp_sessions_keep_no_hidden_tensor_where_the_kernel_takes_every_call),
        cmocka_unit_test(gpu__the_whole_small_symbol_space_is_captured_ahead),
        cmocka_unit_test(gpu__prefill_now_makes_every_first_run_a_replay),
        cmocka_unit_test(gpu__the_capture_thread_gives_way_to_requests),
        cmocka_unit_test(gpu__bound_buffers_replay_direct_graphs_for_every_shape),
        cmocka_unit_test_teardown(gpu__graphs_of_one_form_share_one_instantiated_graph, families_env_unset),
        cmocka_unit_test(gpu__a_replay_is_waited_for_on_its_end_of_graph_signal),
        cmocka_unit_test(gpu__two_sessions_hand_their_replays_to_the_launcher),
        cmocka_unit_test(gpu__sessions_share_weights_and_agree),
        cmocka_unit_test(gpu__layout_views_stay_correct_through_graphs),
        cmocka_unit_test(gpu__output_views_are_written_in_place_by_graphs),
        cmocka_unit_test(gpu__matmul_reads_a_transposed_view_in_place),
        cmocka_unit_test(gpu__attention_reads_a_transposed_view_where_it_lies),
        cmocka_unit_test(gpu__view_programs_run_side_by_side_with_changing_batches),
        cmocka_unit_test(gpu__uncapturable_ops_run_eagerly),
        cmocka_unit_test(gpu__profiles_use_device_events),
        cmocka_unit_test(gpu__same_tensors_run_through_a_direct_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
