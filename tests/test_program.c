/* Programs (runtime/program.c): TK_PROGRAM registration, eager runs on the CPU through the built-in
 * ops' fallbacks with weights the test writes, input checks and their messages, tk_param and its
 * errors, ownership of outputs, and what dispatch hands a tracer in trace mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

#include "fsutil.h"
#include "rt_internal.h"
#include "safetensors.h"
#include "strbuf.h"
#include "sym.h"

static const tk_device CPU = {TK_DEVICE_CPU, 0};

enum { IN = 4, OUT = 3, MAX_BATCH = 64 };

/* y = silu(x W^T + b) + x W^T + b, on x [batch, 4]: tk::linear, tk::silu and tk::add. */
TK_PROGRAM(tiny, "test::tiny", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, MAX_BATCH), IN))
{
    tk_tensor *w = tk_param(ctx, "lin.weight"), *b = tk_param(ctx, "lin.bias");
    tk_tensor *h = tk_linear(ctx, in[0], w, b); /* a NULL parameter fails here, keeping its reason */
    if (!h)
        return TK_EINVAL;
    tk_tensor *a = tk_silu(ctx, h);
    out[0] = a ? tk_add(ctx, a, h) : NULL;
    tk_tensor_free(a);
    tk_tensor_free(h);
    return out[0] ? 0 : TK_EINVAL;
}

/* Two inputs sharing the symbol n. */
TK_PROGRAM(pair, "test::pair", TK_INPUT("a", TK_F32, TK_DIM("n", 1, 8)), TK_INPUT("b", TK_F32, TK_DIM("n", 1, 8)))
{
    out[0] = tk_add(ctx, in[0], in[1]);
    return out[0] ? 0 : TK_EINVAL;
}

/* Returns what it does not own: its input, a parameter, and one of them twice. */
TK_PROGRAM(borrow, "test::borrow", TK_INPUT("x", TK_F32, 2))
{
    out[0] = in[0];
    out[1] = tk_param(ctx, "lin.bias");
    out[2] = out[1];
    return out[1] ? 0 : TK_ENOTFOUND;
}

/* Sets out[1] but not out[0]. */
TK_PROGRAM(gap, "test::gap", TK_INPUT("x", TK_F32, 2))
{
    out[1] = tk_sin(ctx, in[0]);
    return 0;
}

/* Fails after making an output. */
TK_PROGRAM(fails, "test::fails", TK_INPUT("x", TK_F32, 2))
{
    out[0] = tk_sin(ctx, in[0]);
    return tk_error_set(TK_EUNSUPPORTED, "test::fails gives up");
}

/* --- helpers ------------------------------------------------------------------------------------ */

static char *tmp_path(const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", TK_TEST_TMPDIR, name);
    return buf;
}

static tk_tensor *f32(int rank, const int64_t *shape, const float *vals)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, rank, shape));
    for (int64_t i = 0; vals && i < tk_numel(t); i++)
        ((float *)tk_tensor_data(t))[i] = vals[i];
    return t;
}

static float W[OUT * IN], B[OUT];

/* The weights file of test::tiny, written once per test run. */
static const char *weights_path(void)
{
    static int written;
    const char *path = tmp_path("program_weights.safetensors");
    if (!written) {
        for (int i = 0; i < OUT * IN; i++)
            W[i] = 0.25f * (float)(i % 7) - 0.5f;
        for (int i = 0; i < OUT; i++)
            B[i] = 0.1f * (float)i - 0.1f;
        const int64_t ws[] = {OUT, IN}, bs[] = {OUT}, us[] = {2};
        tk_tensor *w = f32(2, ws, W), *b = f32(1, bs, B), *u;
        tk_assert_ok(tk_tensor_new(&u, NULL, CPU, TK_I32, 1, us));
        memset(tk_tensor_data(u), 0, tk_tensor_nbytes(u));
        const char *names[] = {"lin.weight", "lin.bias", "other"};
        tk_tensor *ts[] = {w, b, u};
        tk_assert_ok(tk_safetensors_write(path, 3, names, ts));
        tk_tensor_free(w);
        tk_tensor_free(b);
        tk_tensor_free(u);
        written = 1;
    }
    return path;
}

static tk_ctx *weighted_ctx(void)
{
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_assert_ok(tk_ctx_set_weights(ctx, weights_path()));
    return ctx;
}

/* --- registry ----------------------------------------------------------------------------------- */

static void registry__programs_are_found_with_their_declaration(void **state)
{
    (void)state;
    const tk_program_def *def = tk_program_find("test::tiny");
    assert_non_null(def);
    assert_string_equal(def->name, "test::tiny");
    assert_ptr_equal(def->body, tiny);
    assert_non_null(strstr(def->file, "test_program.c"));
    assert_true(def->line > 0);
    assert_int_equal(def->ninputs, 1);
    const tk_input_spec *x = &def->inputs[0];
    assert_string_equal(x->name, "x");
    assert_int_equal(x->dtype, TK_F32);
    assert_int_equal(x->rank, 2);
    assert_string_equal(x->dims[0].sym, "batch");
    assert_int_equal(x->dims[0].min, 1);
    assert_int_equal(x->dims[0].max, MAX_BATCH);
    assert_null(x->dims[1].sym);
    assert_int_equal(x->dims[1].value, IN);
    assert_int_equal(tk_program_find("test::pair")->ninputs, 2);
    assert_null(tk_program_find("test::nope"));
    assert_null(tk_program_find(NULL));
    /* enumeration sees each once */
    const char *mine[] = {"test::tiny", "test::pair", "test::borrow", "test::gap", "test::fails"};
    for (size_t k = 0; k < sizeof mine / sizeof mine[0]; k++) {
        int seen = 0;
        for (size_t i = 0; i < tk_program_count(); i++)
            seen += strcmp(tk_program_at(i)->name, mine[k]) == 0;
        assert_int_equal(seen, 1);
    }
    assert_null(tk_program_at(tk_program_count()));
}

/* A TK_PROGRAM record built against another layout is left out (with a warning), not misread. */
static void registry__a_record_of_another_version_is_not_registered(void **state)
{
    (void)state;
    static tk_program_node node;
    node.def = *tk_program_find("test::pair");
    node.def.name = "test::future";
    node.def.version = TK_PROGRAM_DEF_VERSION + 1;
    size_t n = tk_program_count();
    tk_program_register(&node); /* warns through the log */
    assert_int_equal(tk_program_count(), n);
    assert_null(tk_program_find("test::future"));
}

static void registry__a_duplicate_keeps_the_first_and_unregister_removes(void **state)
{
    (void)state;
    static tk_program_node node;
    node.def = *tk_program_find("test::pair");
    node.def.body = gap;
    size_t n = tk_program_count();
    tk_program_register(&node); /* warns on stderr */
    assert_int_equal(tk_program_count(), n + 1);
    assert_ptr_equal(tk_program_find("test::pair")->body, pair);
    tk_program_register(&node); /* twice: once in the list */
    assert_int_equal(tk_program_count(), n + 1);
    tk_program_unregister(&node);
    assert_int_equal(tk_program_count(), n);
}

static void input__declarations_copy_their_dims(void **state)
{
    (void)state;
    tk_input_spec s = TK_INPUT("y", TK_BF16, 3, TK_DIM("seq", 2, 16), 7);
    assert_string_equal(s.name, "y");
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dims[0].value, 3);
    assert_int_equal(s.dims[0].min, 3);
    assert_string_equal(s.dims[1].sym, "seq");
    assert_int_equal(s.dims[1].max, 16);
    assert_int_equal(s.dims[2].value, 7);
    tk_dim_spec nine[9];
    for (int i = 0; i < 9; i++)
        nine[i] = (tk_dim_spec){1, NULL, 1, 1};
    assert_int_equal(tk__input("z", TK_F32, 9, nine).rank, -1); /* more than 8: marked bad */
}

/* --- eager runs ---------------------------------------------------------------------------------- */

static float silu(float v) { return v / (1.0f + expf(-v)); }

static void run__computes_the_model_on_the_cpu(void **state)
{
    (void)state;
    tk_ctx *ctx = weighted_ctx();
    const int64_t batch = 5, xs[] = {batch, IN};
    float xv[5 * IN];
    for (int i = 0; i < 5 * IN; i++)
        xv[i] = 0.3f * (float)(i % 5) - 0.6f;
    tk_tensor *x = f32(2, xs, xv), *out[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int nout = -1;
    tk_assert_ok(tk_program_run(ctx, "test::tiny", &x, 1, out, &nout));
    assert_int_equal(nout, 1);
    assert_int_equal(tk_tensor_rank(out[0]), 2);
    assert_int_equal(tk_tensor_dim(out[0], 0), batch);
    assert_int_equal(tk_tensor_dim(out[0], 1), OUT);
    const float *y = tk_tensor_data(out[0]);
    for (int m = 0; m < batch; m++) {
        for (int n = 0; n < OUT; n++) {
            float h = B[n];
            for (int k = 0; k < IN; k++)
                h += xv[m * IN + k] * W[n * IN + k];
            float want = silu(h) + h;
            if (fabsf(y[m * OUT + n] - want) > 1e-5f)
                fail_msg("y[%d, %d] = %g, expected %g", m, n, (double)y[m * OUT + n], (double)want);
        }
    }
    tk_tensor_free(out[0]);
    /* again, with the parameters cached on the context */
    tk_assert_ok(tk_program_run(ctx, "test::tiny", &x, 1, out, &nout));
    tk_tensor_free(out[0]);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void run__inputs_are_checked_against_the_declaration(void **state)
{
    (void)state;
    tk_ctx *ctx = weighted_ctx();
    tk_tensor *out[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int nout;
    const int64_t s65[] = {65, IN}, s0[] = {0, IN}, s35[] = {3, 5}, s4[] = {IN}, s34[] = {3, IN};
    tk_tensor *big = f32(2, s65, NULL), *none = f32(2, s0, NULL), *wide = f32(2, s35, NULL), *flat = f32(1, s4, NULL);
    tk_tensor *half;
    tk_assert_ok(tk_tensor_new(&half, NULL, CPU, TK_F16, 2, s34));
    tk_tensor *ok = f32(2, s34, NULL);
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &big, 1, out, &nout), TK_EINVAL,
                    "input 'x' dim 0 is 65, outside [1, 64] of 'batch'");
    assert_string_equal(tk_error_last(), "input 'x' dim 0 is 65, outside [1, 64] of 'batch'");
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &none, 1, out, &nout), TK_EINVAL,
                    "input 'x' dim 0 is 0, outside [1, 64] of 'batch'");
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &wide, 1, out, &nout), TK_EINVAL,
                    "input 'x' dim 1 is 5, program 'test::tiny' declares 4");
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &flat, 1, out, &nout), TK_EINVAL,
                    "input 'x' has 1 dim, program 'test::tiny' declares [batch, 4]");
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &half, 1, out, &nout), TK_EINVAL,
                    "input 'x' is f16, program 'test::tiny' declares f32");
    tk_tensor *two[] = {ok, ok};
    tk_assert_fails(tk_program_run(ctx, "test::tiny", two, 2, out, &nout), TK_EINVAL,
                    "program 'test::tiny' takes 1 input, got 2");
    tk_tensor *null_in[] = {NULL};
    tk_assert_fails(tk_program_run(ctx, "test::tiny", null_in, 1, out, &nout), TK_EINVAL,
                    "input 'x' of program 'test::tiny' is NULL");
    tk_assert_fails(tk_program_run(ctx, "test::nope", &ok, 1, out, &nout), TK_ENOTFOUND,
                    "program 'test::nope' is not registered (there are ");
    assert_non_null(strstr(tk_error_last(), "'test::tiny'"));
    for (int i = 0; i < TK_PROGRAM_MAX_OUTPUTS; i++)
        assert_null(out[i]);

    /* one symbol, one value across inputs */
    const int64_t n3[] = {3}, n4[] = {4};
    tk_tensor *a = f32(1, n3, NULL), *b = f32(1, n4, NULL), *c = f32(1, n3, NULL);
    tk_tensor *ab[] = {a, b}, *ac[] = {a, c};
    tk_assert_fails(tk_program_run(ctx, "test::pair", ab, 2, out, &nout), TK_EINVAL,
                    "input 'b' dim 0 is 4 but 'n' is 3 (input 'a' dim 0)");
    tk_assert_ok(tk_program_run(ctx, "test::pair", ac, 2, out, &nout));
    assert_int_equal(nout, 1);
    tk_tensor_free(out[0]);
    tk_tensor *list[] = {big, none, wide, flat, half, ok, a, b, c};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        tk_tensor_free(list[i]);
    tk_ctx_free(ctx);
}

static void run__outputs_the_caller_may_free(void **state)
{
    (void)state;
    tk_ctx *ctx = weighted_ctx();
    const int64_t s2[] = {2};
    const float xv[2] = {5.0f, 6.0f};
    tk_tensor *x = f32(1, s2, xv), *out[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int nout;
    /* the input, a parameter and a repeated output come back as copies */
    tk_assert_ok(tk_program_run(ctx, "test::borrow", &x, 1, out, &nout));
    assert_int_equal(nout, 3);
    assert_true(out[0] != x && out[1] != tk_param(ctx, "lin.bias") && out[2] != out[1]);
    assert_memory_equal(tk_tensor_data(out[0]), xv, sizeof xv);
    assert_memory_equal(tk_tensor_data(out[1]), B, sizeof B);
    assert_memory_equal(tk_tensor_data(out[2]), B, sizeof B);
    for (int i = 0; i < nout; i++)
        tk_tensor_free(out[i]);
    memset(out, 0, sizeof out);
    /* out[1] without out[0]: refused, and what the body made is freed (ASan sees leaks) */
    tk_assert_fails(tk_program_run(ctx, "test::gap", &x, 1, out, &nout), TK_EINVAL,
                    "program 'test::gap' set out[1] but not out[0]");
    assert_int_equal(nout, 0);
    /* the body's own failure comes back unchanged; its outputs are freed */
    tk_assert_fails(tk_program_run(ctx, "test::fails", &x, 1, out, &nout), TK_EUNSUPPORTED, "test::fails gives up");
    assert_string_equal(tk_error_last(), "test::fails gives up");
    assert_null(out[0]);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

/* --- tk_param ------------------------------------------------------------------------------------ */

static void param__is_loaded_once_and_owned_by_the_context(void **state)
{
    (void)state;
    tk_ctx *ctx = weighted_ctx();
    tk_tensor *w = tk_param(ctx, "lin.weight");
    assert_non_null(w);
    assert_ptr_equal(tk_param(ctx, "lin.weight"), w);
    assert_int_equal(tk_tensor_dtype(w), TK_F32);
    assert_int_equal(tk_tensor_dim(w, 0), OUT);
    assert_int_equal(tk_tensor_dim(w, 1), IN);
    assert_memory_equal(tk_tensor_data(w), W, sizeof W);
    tk_tensor *u = tk_param(ctx, "other");
    assert_non_null(u);
    assert_int_equal(tk_tensor_dtype(u), TK_I32);
    tk_ctx_free(ctx); /* frees the parameters */
}

static void param__errors_name_the_parameter_and_the_file(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    assert_null(tk_param(ctx, "lin.weight"));
    assert_string_equal(tk_error_last(), "parameter 'lin.weight': the context has no weights (tk_ctx_set_weights)");
    /* through a program: the op that got the NULL keeps the reason */
    const int64_t xs[] = {2, IN};
    tk_tensor *x = f32(2, xs, NULL), *out[TK_PROGRAM_MAX_OUTPUTS] = {0};
    int nout;
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &x, 1, out, &nout), TK_EINVAL,
                    "input 'weight' (in[1]) of op 'tk::linear' is NULL (an earlier call failed: parameter "
                    "'lin.weight': the context has no weights (tk_ctx_set_weights))");
    tk_assert_fails(tk_ctx_set_weights(ctx, tmp_path("no_such.safetensors")), TK_EIO, "cannot read '");
    /* a corrupt weights file is refused when set */
    const char *bad = tmp_path("program_bad.safetensors");
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fwrite("\x04\0\0\0\0\0\0\0{bad", 1, 12, f);
    fclose(f);
    tk_assert_fails(tk_ctx_set_weights(ctx, bad), TK_EFORMAT, "the header is not valid JSON");
    assert_non_null(strstr(tk_error_last(), bad));
    remove(bad);
    tk_assert_ok(tk_ctx_set_weights(ctx, weights_path()));
    tk_assert_fails(tk_ctx_set_weights(ctx, weights_path()), TK_EINVAL, "the context already has weights");
    assert_null(tk_param(ctx, "linear3.weight"));
    char want[1200];
    snprintf(want, sizeof want, "parameter 'linear3.weight' is not in '%s' (it has 'lin.bias', 'lin.weight', 'other')",
             weights_path());
    assert_string_equal(tk_error_last(), want);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

/* --- trace mode: what dispatch and tk_param hand a tracer ---------------------------------------- */

typedef struct fake_tracer {
    tk_tracer hooks;
    char ops[8][32];
    int lines[8];
    char files[8][256];
    char outs[8][64];
    int nops;
    char requires[8][128];
    int nreq;
    tk_tensor *params[8];
    int nparams;
} fake_tracer;

static int fake_on_op(void *self, tk_ctx *ctx, const tk_op_def *op, tk_tensor *const *in, int nin,
                      tk_tensor *const *out, int nout, const char *file, int line)
{
    (void)ctx, (void)in, (void)nin, (void)nout;
    fake_tracer *t = self;
    if (t->nops == 8)
        return tk_error_set(TK_EINVAL, "too many ops");
    snprintf(t->ops[t->nops], sizeof t->ops[0], "%s", op->name);
    snprintf(t->files[t->nops], sizeof t->files[0], "%s", file ? file : "");
    t->lines[t->nops] = line;
    tk_strbuf sb = TK_STRBUF_INIT;
    for (int i = 0; i < tk_tensor_rank(out[0]); i++) {
        tk_strbuf_adds(&sb, i ? ", " : "[");
        tk_sym_print(tk_tensor_sym(out[0], i), &sb);
    }
    tk_strbuf_adds(&sb, "]");
    snprintf(t->outs[t->nops], sizeof t->outs[0], "%s", sb.buf);
    tk_strbuf_release(&sb);
    t->nops++;
    return 0;
}

static int fake_on_require(void *self, tk_ctx *ctx, tk_require_kind kind, tk_sym a, tk_sym b, int64_t lo, int64_t hi,
                           const char *what)
{
    (void)lo, (void)hi;
    fake_tracer *t = self;
    tk_strbuf sa = TK_STRBUF_INIT, sb = TK_STRBUF_INIT;
    tk_sym_print(a, &sa);
    tk_sym_print(b, &sb);
    snprintf(t->requires[t->nreq++], sizeof t->requires[0], "%s %d %s %s: %s", ctx->site.op, (int)kind, sa.buf,
             sb.buf, what);
    tk_strbuf_release(&sa);
    tk_strbuf_release(&sb);
    return 0;
}

static tk_tensor *fake_on_param(void *self, tk_ctx *ctx, const char *name)
{
    fake_tracer *t = self;
    const tk_sym w[] = {TK_SYM(OUT), TK_SYM(IN)}, b[] = {TK_SYM(OUT)};
    int is_w = strcmp(name, "lin.weight") == 0;
    if (!is_w && strcmp(name, "lin.bias") != 0) {
        tk_error_set(TK_ENOTFOUND, "no parameter '%s' in the fake", name);
        return NULL;
    }
    tk_tensor *p;
    if (tk_tensor_new_traced(&p, ctx, TK_F32, is_w ? 2 : 1, is_w ? w : b))
        return NULL;
    t->params[t->nparams++] = p;
    return p;
}

static void fake_init(fake_tracer *t, tk_ctx *ctx)
{
    memset(t, 0, sizeof *t);
    t->hooks = (tk_tracer){t, fake_on_op, fake_on_require, fake_on_param};
    ctx->mode = TK_MODE_TRACE;
    ctx->tracer = &t->hooks;
}

static void fake_release(fake_tracer *t)
{
    for (int i = 0; i < t->nparams; i++)
        tk_tensor_free(t->params[i]);
}

/* CUDA only: tracing needs no implementation for the context's device. */
TK_OP(gpu_twice_op, "test_program::gpu_twice", "(Tensor x) -> Tensor")
{
    (void)ctx, (void)in, (void)out;
    return TK_EUNSUPPORTED;
}

static void trace__ops_become_tracer_calls_with_symbolic_outputs(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    fake_tracer t;
    fake_init(&t, ctx);
    tk_tensor *x, *out[TK_PROGRAM_MAX_OUTPUTS] = {0};
    const tk_sym dims[] = {tk_sym_var(ctx, "batch", 1, MAX_BATCH), TK_SYM(IN)};
    tk_assert_ok(tk_tensor_new_traced(&x, ctx, TK_F32, 2, dims));
    const tk_program_def *def = tk_program_find("test::tiny");
    tk_assert_ok(def->body(ctx, &x, out));
    assert_int_equal(t.nops, 3);
    assert_string_equal(t.ops[0], "tk::linear");
    assert_string_equal(t.ops[1], "tk::silu");
    assert_string_equal(t.ops[2], "tk::add");
    /* the node's source is the model's line (tk/ops.h's helpers are macros over tk_call) */
    for (int i = 0; i < 3; i++) {
        assert_non_null(strstr(t.files[i], "test_program.c"));
        assert_true(t.lines[i] > def->line);
        assert_string_equal(t.outs[i], "[batch, 3]");
    }
    /* requirements between constants were checked at once; the one between symbols (batch ==
       batch, which the exporter drops) went to the tracer */
    assert_int_equal(t.nreq, 1);
    assert_string_equal(t.requires[0], "tk::add 0 batch batch: a dim 0 == b dim 0");
    assert_non_null(out[0]);
    assert_null(tk_tensor_data(out[0]));
    tk_tensor_free(out[0]);
    assert_int_equal(t.nparams, 2);

    /* a requirement between symbols goes to the tracer, with the op that stated it */
    tk_tensor *a, *b;
    const tk_sym da[] = {tk_sym_var(ctx, "n", 1, 8)}, db[] = {tk_sym_var(ctx, "m", 1, 8)};
    tk_assert_ok(tk_tensor_new_traced(&a, ctx, TK_F32, 1, da));
    tk_assert_ok(tk_tensor_new_traced(&b, ctx, TK_F32, 1, db));
    tk_tensor *y = tk_add(ctx, a, b);
    assert_non_null(y);
    assert_int_equal(t.nreq, 2);
    assert_string_equal(t.requires[1], "tk::add 0 n m: a dim 0 == b dim 0");
    tk_tensor_free(y);
    /* constants that disagree fail at once, even while tracing, with the model's line */
    const tk_sym d5[] = {TK_SYM(5)}, d6[] = {TK_SYM(6)};
    tk_tensor *c5, *c6;
    tk_assert_ok(tk_tensor_new_traced(&c5, ctx, TK_F32, 1, d5));
    tk_assert_ok(tk_tensor_new_traced(&c6, ctx, TK_F32, 1, d6));
    int at = __LINE__ + 1;
    assert_null(tk_add(ctx, c5, c6));
    char want[512];
    char *rel = tk_path_relative_to_cwd(__FILE__);
    snprintf(want, sizeof want, "op 'tk::add': input 'a' is [5] but 'b' is [6] (shapes must match) (at %s:%d)",
             rel ? rel : __FILE__, at);
    free(rel);
    assert_string_equal(tk_error_last(), want);
    /* an op without a CPU fallback is traced on a CPU context */
    y = tk_call(ctx, "test_program::gpu_twice", a);
    assert_non_null(y);
    assert_string_equal(t.outs[t.nops - 1], "[n]");
    tk_tensor_free(y);
    /* tk_param asks the tracer */
    assert_null(tk_param(ctx, "nope"));
    assert_string_equal(tk_error_last(), "no parameter 'nope' in the fake");
    /* a traced context does not run programs eagerly, and eager ops refuse traced inputs */
    int nout;
    tk_assert_fails(tk_program_run(ctx, "test::tiny", &x, 1, out, &nout), TK_EINVAL, "this context is tracing");
    ctx->mode = TK_MODE_EAGER;
    assert_null(tk_add(ctx, a, a));
    assert_true(strstr(tk_error_last(), "input 'a' (in[0]) of op 'tk::add' is a traced tensor (it has no data) and "
                                        "the context runs eagerly (at ") == tk_error_last());
    fake_release(&t);
    tk_tensor *list[] = {x, a, b, c5, c6};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        tk_tensor_free(list[i]);
    tk_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry__programs_are_found_with_their_declaration),
        cmocka_unit_test(registry__a_duplicate_keeps_the_first_and_unregister_removes),
        cmocka_unit_test(registry__a_record_of_another_version_is_not_registered),
        cmocka_unit_test(input__declarations_copy_their_dims),
        cmocka_unit_test(run__computes_the_model_on_the_cpu),
        cmocka_unit_test(run__inputs_are_checked_against_the_declaration),
        cmocka_unit_test(run__outputs_the_caller_may_free),
        cmocka_unit_test(param__is_loaded_once_and_owned_by_the_context),
        cmocka_unit_test(param__errors_name_the_parameter_and_the_file),
        cmocka_unit_test(trace__ops_become_tracer_calls_with_symbolic_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
