/* Symbolic shapes (runtime/sym.c): a table of simplifications written by hand, ranges, evaluation,
 * printing and parsing, overflow, narrowing, and the requirements meta functions state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <stdlib.h>
#include <string.h>
#include <tk/op.h>
#include <tk/runtime.h>

#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* The symbols every test sees: batch in [1, 1024], seq in [1, 4096], k in [0, 7], d in [-10, 10]. */
typedef struct fixture {
    tk_ctx *ctx;
    tk_sym batch, seq, k, d;
} fixture;

static const char *const NAMES[] = {"batch", "seq", "k", "d"};

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || tk_ctx_new(&f->ctx, CPU))
        return -1;
    f->batch = tk_sym_var(f->ctx, "batch", 1, 1024);
    f->seq = tk_sym_var(f->ctx, "seq", 1, 4096);
    f->k = tk_sym_var(f->ctx, "k", 0, 7);
    f->d = tk_sym_var(f->ctx, "d", -10, 10);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tk_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* s printed, in a static buffer (one per call site is enough for the tests). */
static const char *str(tk_sym s, char *buf, size_t n)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    if (tk_sym_print(s, &sb))
        snprintf(buf, n, "<print failed: %s>", tk_error_last());
    else
        snprintf(buf, n, "%s", sb.buf ? sb.buf : "");
    tk_strbuf_release(&sb);
    return buf;
}

#define assert_prints(s, want)                                                                     \
    do {                                                                                           \
        char b__[256];                                                                             \
        const char *got__ = str((s), b__, sizeof b__);                                             \
        if (strcmp(got__, (want)) != 0)                                                            \
            fail_msg("%s prints '%s', expected '%s'", #s, got__, (want));                         \
    } while (0)

typedef struct sym_case {
    const char *what; /* how the expression was built, for the failure message */
    tk_sym value;
    const char *want; /* its canonical printed form */
} sym_case;

#define C(v) TK_SYM(v)
#define ADD(a, b) tk_sym_add(ctx, (a), (b))
#define SUB(a, b) tk_sym_sub(ctx, (a), (b))
#define MUL(a, k) tk_sym_mul(ctx, (a), (k))
#define FDIV(a, k) tk_sym_floordiv(ctx, (a), (k))
#define MOD(a, k) tk_sym_mod(ctx, (a), (k))
#define MIN(a, b) tk_sym_min(ctx, (a), (b))
#define MAX(a, b) tk_sym_max(ctx, (a), (b))
#define CASE(expr, want) {#expr, (expr), (want)}

/* Built with the API, checked against what a person writes for the simplified form. */
static size_t make_cases(fixture *f, sym_case *out)
{
    tk_ctx *ctx = f->ctx;
    tk_sym batch = f->batch, seq = f->seq, k = f->k, d = f->d;
    const sym_case cases[] = {
        /* constants fold */
        CASE(ADD(C(2), C(3)), "5"),
        CASE(MUL(C(-4), 3), "-12"),
        CASE(FDIV(C(-7), 2), "-4"),
        CASE(MOD(C(-7), 2), "1"),
        CASE(MIN(C(3), C(-2)), "-2"),
        CASE(MAX(C(3), C(-2)), "3"),
        /* linear terms are collected, sorted by name, zero terms dropped */
        CASE(ADD(batch, C(0)), "batch"),
        CASE(ADD(batch, batch), "2*batch"),
        CASE(SUB(batch, batch), "0"),
        CASE(ADD(MUL(batch, 2), C(1)), "2*batch + 1"),
        CASE(SUB(batch, C(1)), "batch - 1"),
        CASE(SUB(C(4), batch), "-batch + 4"),
        CASE(ADD(seq, batch), "batch + seq"),
        CASE(SUB(ADD(MUL(seq, 3), batch), MUL(seq, 5)), "batch - 2*seq"),
        CASE(SUB(ADD(batch, seq), batch), "seq"),
        CASE(MUL(ADD(batch, C(3)), 3), "3*batch + 9"),
        CASE(MUL(batch, 0), "0"),
        CASE(MUL(SUB(batch, seq), -1), "-batch + seq"),
        /* floor division */
        CASE(FDIV(batch, 1), "batch"),
        CASE(FDIV(MUL(batch, 4), 4), "batch"),
        CASE(FDIV(ADD(MUL(batch, 4), C(3)), 4), "batch"),
        CASE(FDIV(ADD(MUL(batch, 4), C(5)), 4), "batch + 1"),
        CASE(FDIV(ADD(MUL(batch, 4), C(-1)), 4), "batch - 1"),
        CASE(FDIV(ADD(MUL(batch, 8), seq), 8), "batch + seq // 8"),
        CASE(FDIV(ADD(batch, C(255)), 256), "(batch + 255) // 256"),
        CASE(FDIV(ADD(batch, C(9)), 4), "(batch + 1) // 4 + 2"),
        CASE(FDIV(MUL(batch, 2), 4), "batch // 2"),
        CASE(FDIV(ADD(MUL(batch, 2), C(2)), 4), "(batch + 1) // 2"),
        CASE(FDIV(FDIV(batch, 2), 4), "batch // 8"),
        CASE(FDIV(FDIV(FDIV(seq, 2), 3), 5), "seq // 30"),
        CASE(FDIV(batch, 2048), "0"),
        CASE(FDIV(ADD(batch, C(1023)), 1024), "1"),
        CASE(FDIV(ADD(seq, C(1023)), 1024), "(seq + 1023) // 1024"),
        CASE(FDIV(ADD(batch, C(2047)), 2048), "1"),
        CASE(FDIV(k, 8), "0"),
        CASE(FDIV(d, 4), "d // 4"),
        CASE(FDIV(MUL(batch, -1), 2), "(-batch) // 2"),
        /* modulo */
        CASE(MOD(batch, 1), "0"),
        CASE(MOD(k, 8), "k"),
        CASE(MOD(ADD(k, C(8)), 8), "k"),
        CASE(MOD(ADD(k, C(16)), 8), "k"),
        CASE(MOD(k, 4), "k % 4"),
        CASE(MOD(batch, 8), "batch % 8"),
        CASE(MOD(ADD(MUL(batch, 8), C(3)), 8), "3"),
        CASE(MOD(ADD(MUL(batch, 9), C(10)), 8), "(batch + 2) % 8"),
        CASE(MOD(MUL(batch, 2), 4), "2*(batch % 2)"),
        CASE(MOD(MOD(batch, 8), 4), "batch % 4"),
        CASE(MOD(MOD(batch, 4), 8), "batch % 4"),
        CASE(MOD(d, 4), "d % 4"),
        /* min and max by ranges, by the difference of the operands, operands in canonical order */
        CASE(MIN(batch, C(2048)), "batch"),
        CASE(MIN(batch, C(1024)), "batch"),
        CASE(MIN(batch, C(16)), "min(batch, 16)"),
        CASE(MIN(C(16), batch), "min(batch, 16)"),
        CASE(MAX(batch, C(0)), "batch"),
        CASE(MAX(C(1), batch), "batch"),
        CASE(MAX(batch, C(16)), "max(batch, 16)"),
        CASE(MAX(batch, ADD(batch, C(1))), "batch + 1"),
        CASE(MIN(batch, ADD(batch, C(1))), "batch"),
        CASE(MIN(batch, batch), "batch"),
        CASE(MIN(seq, batch), "min(batch, seq)"),
        CASE(MIN(k, C(8)), "k"),
        CASE(MIN(MOD(batch, 8), C(8)), "batch % 8"),
        CASE(MAX(MOD(batch, 8), C(7)), "7"),
        CASE(MIN(MIN(batch, C(16)), C(8)), "min(batch, 8)"),
        CASE(MIN(C(8), MIN(batch, C(16))), "min(batch, 8)"),
        CASE(MAX(MAX(batch, C(16)), C(32)), "max(batch, 32)"),
        CASE(MIN(MIN(batch, seq), batch), "min(batch, seq)"),
        /* atoms inside linear forms, with the parentheses Python needs */
        CASE(ADD(FDIV(batch, 4), FDIV(batch, 4)), "2*(batch // 4)"),
        CASE(SUB(batch, FDIV(batch, 4)), "batch - batch // 4"),
        CASE(MUL(FDIV(batch, 4), -1), "-(batch // 4)"),
        CASE(SUB(C(1), MUL(MOD(batch, 4), 3)), "-3*(batch % 4) + 1"),
        CASE(ADD(MOD(d, 4), C(1)), "d % 4 + 1"),
        CASE(ADD(MUL(MIN(batch, C(16)), 2), seq), "seq + 2*min(batch, 16)"),
        CASE(FDIV(MIN(batch, C(16)), 2), "min(batch, 16) // 2"),
        CASE(FDIV(ADD(MOD(batch, 8), seq), 2), "(seq + batch % 8) // 2"),
        CASE(MOD(FDIV(batch, 4), 2), "(batch // 4) % 2"),
        CASE(MIN(ADD(batch, seq), C(100)), "min(batch + seq, 100)"),
    };
    memcpy(out, cases, sizeof(cases));
    return sizeof(cases) / sizeof(cases[0]);
}

enum { MAX_CASES = 128 };

static void simplify__table_of_cases_prints_the_canonical_form(void **state)
{
    fixture *f = *state;
    sym_case cases[MAX_CASES];
    size_t n = make_cases(f, cases);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[256];
        const char *got = str(cases[i].value, buf, sizeof buf);
        if (strcmp(got, cases[i].want) != 0) {
            print_error("%s\n  prints '%s', expected '%s'\n", cases[i].what, got, cases[i].want);
            bad++;
        }
    }
    if (bad)
        fail_msg("%d of %zu simplification cases differ", bad, n);
}

static void simplify__equal_forms_are_one_node(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym batch = f->batch, seq = f->seq;
    /* built in different orders, the same canonical form */
    tk_sym a = ADD(ADD(MUL(batch, 2), seq), C(3)), b = ADD(C(3), ADD(seq, ADD(batch, batch)));
    assert_true(tk_sym_equal(a, b));
    assert_ptr_equal(a.expr, b.expr);
    assert_true(tk_sym_equal(FDIV(ADD(batch, C(7)), 8), FDIV(ADD(batch, C(7)), 8)));
    assert_true(tk_sym_equal(MIN(batch, seq), MIN(seq, batch)));
    assert_false(tk_sym_equal(MIN(batch, seq), MAX(batch, seq)));
    assert_false(tk_sym_equal(batch, seq));
    assert_true(tk_sym_equal(C(5), C(5)));
    assert_false(tk_sym_equal(C(5), batch));
}

/* The printed form depends on the structure only: another context that made its symbols in the
 * other order and built the same expressions the other way round prints the same text. */
static void simplify__printing_does_not_depend_on_the_order_of_construction(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym e1 = ADD(MIN(f->seq, f->batch), ADD(FDIV(f->seq, 4), MUL(f->batch, 3)));
    tk_ctx *other;
    tk_assert_ok(tk_ctx_new(&other, CPU));
    tk_sym seq = tk_sym_var(other, "seq", 1, 4096), batch = tk_sym_var(other, "batch", 1, 1024);
    ctx = other;
    tk_sym e2 = ADD(ADD(MUL(batch, 3), FDIV(seq, 4)), MIN(batch, seq));
    char a[256], b[256];
    assert_string_equal(str(e1, a, sizeof a), str(e2, b, sizeof b));
    assert_string_equal(a, "3*batch + seq // 4 + min(batch, seq)");
    tk_ctx_free(other);
}

static void simplify__constants_never_allocate(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_sym s = ADD(MUL(C(3), 4), C(1));
    s = MAX(MIN(FDIV(s, 2), C(100)), MOD(C(9), 4));
    assert_true(tk_sym_is_const(s));
    assert_int_equal(s.value, 6);
    assert_null(ctx->syms); /* eager meta functions do all of this: no pool */
    tk_ctx_free(ctx);
}

static void simplify__division_by_zero_or_negative_is_refused(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym r = FDIV(f->batch, 0);
    assert_true(tk_sym_is_const(r) && r.value == -1);
    assert_non_null(strstr(tk_error_last(), "floor division by 0 (the divisor must be > 0)"));
    r = MOD(C(5), -2);
    assert_int_equal(r.value, -1);
    assert_non_null(strstr(tk_error_last(), "modulo by -2"));
}

static void range__interval_arithmetic(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym batch = f->batch, d = f->d, k = f->k;
    const struct {
        const char *what;
        tk_sym s;
        int64_t lo, hi;
    } cases[] = {
        {"batch", batch, 1, 1024},
        {"2*batch + 1", ADD(MUL(batch, 2), C(1)), 3, 2049},
        {"-batch + 4", SUB(C(4), batch), -1020, 3},
        {"-3*d", MUL(d, -3), -30, 30},
        {"d // 4", FDIV(d, 4), -3, 2},          /* floor: -10 // 4 == -3 */
        {"-d // 3", FDIV(MUL(d, -1), 3), -4, 3}, /* -10 // 3 == -4 */
        {"d % 4", MOD(d, 4), 0, 3},
        {"k % 4", MOD(k, 4), 0, 3},
        {"(k + 8) % 16", MOD(ADD(k, C(8)), 16), 8, 15},
        {"min(batch, 16)", MIN(batch, C(16)), 1, 16},
        {"max(batch, 16)", MAX(batch, C(16)), 16, 1024},
        {"batch - d", SUB(batch, d), -9, 1034},
        {"(batch + 255) // 256", FDIV(ADD(batch, C(255)), 256), 1, 4},
        {"7", C(7), 7, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t lo, hi;
        tk_sym_range(cases[i].s, &lo, &hi);
        if (lo != cases[i].lo || hi != cases[i].hi)
            fail_msg("range of %s is [%lld, %lld], expected [%lld, %lld]", cases[i].what, (long long)lo,
                     (long long)hi, (long long)cases[i].lo, (long long)cases[i].hi);
    }
}

/* Products of two dynamic dims: one node whichever the order, coefficients pulled out, ranges
 * from the factors', values by evaluation, printed forms that parse back to the same node. */
static void product__of_two_symbols_is_one_canonical_atom(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    char a[128], b[128];
    tk_sym bs = tk_sym_mul_sym(ctx, f->batch, f->seq), sb = tk_sym_mul_sym(ctx, f->seq, f->batch);
    assert_ptr_equal(bs.expr, sb.expr);
    assert_string_equal(str(bs, a, sizeof a), "batch*seq");
    tk_sym twice = tk_sym_mul_sym(ctx, tk_sym_mul(ctx, f->batch, 2), f->seq);
    assert_string_equal(str(twice, a, sizeof a), "2*(batch*seq)");
    tk_sym shifted = tk_sym_mul_sym(ctx, tk_sym_add(ctx, f->batch, TK_SYM(1)), f->seq);
    assert_string_equal(str(shifted, a, sizeof a), "seq*(batch + 1)");
    assert_ptr_equal(tk_sym_mul_sym(ctx, f->batch, TK_SYM(3)).expr, tk_sym_mul(ctx, f->batch, 3).expr);
    int64_t lo, hi;
    tk_sym_range(bs, &lo, &hi);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 1024 * 4096);
    tk_sym_range(tk_sym_mul_sym(ctx, f->d, f->batch), &lo, &hi); /* d in [-10, 10] */
    assert_int_equal(lo, -10240);
    assert_int_equal(hi, 10240);
    const int64_t values[4] = {3, 5, 2, -4};
    int64_t v;
    tk_assert_ok(tk_sym_eval(twice, NAMES, values, 4, &v));
    assert_int_equal(v, 30);
    tk_assert_ok(tk_sym_eval(shifted, NAMES, values, 4, &v));
    assert_int_equal(v, 20);
    const tk_sym vars[] = {f->batch, f->seq, f->k, f->d};
    const tk_sym forms[] = {bs, twice, shifted, tk_sym_add(ctx, bs, f->batch),
                            tk_sym_floordiv(ctx, bs, 4), tk_sym_mul_sym(ctx, bs, f->k)};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        tk_sym back;
        str(forms[i], a, sizeof a);
        tk_assert_ok(tk_sym_parse(ctx, a, NAMES, vars, 4, &back));
        if (back.expr != forms[i].expr)
            fail_msg("'%s' parses back as '%s'", a, str(back, b, sizeof b));
    }
}

static void range__narrowing_folds_later_expressions(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym n = tk_sym_var(ctx, "n", 1, 1024);
    assert_prints(FDIV(n, 512), "n // 512");
    tk_assert_ok(tk_sym_narrow(n, 1, 511));
    assert_prints(FDIV(n, 512), "0");
    const char *name;
    int64_t lo, hi;
    assert_true(tk_sym_as_var(n, &name, &lo, &hi));
    assert_string_equal(name, "n");
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 511);
    /* narrowing intersects */
    tk_assert_ok(tk_sym_narrow(n, 0, 2000));
    tk_sym_range(n, &lo, &hi);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 511);
    tk_assert_fails(tk_sym_narrow(n, 600, 700), TK_EINVAL,
                    "the range of 'n' would be empty: [1, 511] narrowed to [600, 700]");
    tk_assert_fails(tk_sym_narrow(ADD(n, C(1)), 1, 2), TK_EINVAL, "not a symbol");
}

static void var__names_and_ranges_are_checked(void **state)
{
    fixture *f = *state;
    tk_sym s = tk_sym_var(f->ctx, "2x", 0, 1);
    assert_int_equal(s.value, -1);
    assert_string_equal(tk_error_last(), "symbol name '2x' is not an identifier");
    s = tk_sym_var(f->ctx, "a b", 0, 1);
    assert_string_equal(tk_error_last(), "symbol name 'a b' is not an identifier");
    s = tk_sym_var(f->ctx, "n", 5, 4);
    assert_string_equal(tk_error_last(), "symbol 'n' has an empty range [5, 4]");
    /* two calls with one name make two symbols */
    tk_sym a = tk_sym_var(f->ctx, "twice", 0, 9), b = tk_sym_var(f->ctx, "twice", 0, 9);
    assert_false(tk_sym_equal(a, b));
}

static void linear1__recognizes_k_times_var_plus_c(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym var;
    int64_t k, c;
    assert_true(tk_sym_as_linear1(ADD(MUL(f->batch, 2), C(-3)), &var, &k, &c));
    assert_true(tk_sym_equal(var, f->batch));
    assert_int_equal(k, 2);
    assert_int_equal(c, -3);
    assert_true(tk_sym_as_linear1(f->seq, &var, &k, &c));
    assert_true(k == 1 && c == 0 && tk_sym_equal(var, f->seq));
    assert_false(tk_sym_as_linear1(C(4), &var, &k, &c));
    assert_false(tk_sym_as_linear1(ADD(f->batch, f->seq), &var, &k, &c));
    assert_false(tk_sym_as_linear1(FDIV(f->batch, 2), &var, &k, &c));
    assert_false(tk_sym_as_var(MUL(f->batch, 2), NULL, NULL, NULL));
}

static void eval__binds_symbols_by_name(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    const int64_t values[] = {1000, 3, 5, -7};
    int64_t v;
    tk_assert_ok(tk_sym_eval(ADD(MUL(f->batch, 2), C(1)), NAMES, values, 4, &v));
    assert_int_equal(v, 2001);
    tk_assert_ok(tk_sym_eval(FDIV(ADD(f->batch, C(255)), 256), NAMES, values, 4, &v));
    assert_int_equal(v, 4);
    tk_assert_ok(tk_sym_eval(FDIV(f->d, 4), NAMES, values, 4, &v));
    assert_int_equal(v, -2); /* -7 // 4 */
    tk_assert_ok(tk_sym_eval(MOD(f->d, 4), NAMES, values, 4, &v));
    assert_int_equal(v, 1); /* -7 % 4 */
    tk_assert_ok(tk_sym_eval(MIN(f->batch, C(16)), NAMES, values, 4, &v));
    assert_int_equal(v, 16);
    tk_assert_ok(tk_sym_eval(MAX(f->seq, f->k), NAMES, values, 4, &v));
    assert_int_equal(v, 5);
    tk_assert_ok(tk_sym_eval(C(42), NULL, NULL, 0, &v));
    assert_int_equal(v, 42);
    tk_assert_fails(tk_sym_eval(ADD(f->batch, f->seq), NAMES, values, 1, &v), TK_EINVAL, "symbol 'seq' has no value");
}

static void overflow__is_an_error_not_undefined_behaviour(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_sym r = ADD(C(INT64_MAX), C(1));
    assert_true(tk_sym_is_const(r) && r.value == -1);
    assert_string_equal(tk_error_last(), "symbolic expression overflows");
    tk_error_clear();
    r = SUB(C(INT64_MIN), C(1));
    assert_string_equal(tk_error_last(), "symbolic expression overflows");
    tk_error_clear();
    r = MUL(C(INT64_MAX / 2 + 1), 2);
    assert_string_equal(tk_error_last(), "symbolic expression overflows");
    tk_error_clear();
    tk_sym big = MUL(f->batch, INT64_MAX);
    assert_false(tk_sym_is_const(big));
    r = ADD(big, big);
    assert_true(tk_sym_is_const(r) && r.value == -1);
    assert_string_equal(tk_error_last(), "symbolic expression overflows");
    tk_error_clear();
    r = ADD(ADD(f->batch, C(INT64_MAX)), C(1));
    assert_string_equal(tk_error_last(), "symbolic expression overflows");
    /* ranges saturate instead; min/max still decide */
    int64_t lo, hi;
    tk_sym_range(big, &lo, &hi);
    assert_int_equal(lo, INT64_MAX);
    assert_int_equal(hi, INT64_MAX);
    tk_assert_ok(0);
    /* evaluation overflows with the same message */
    const int64_t values[] = {2, 1, 0, 0};
    int64_t v;
    tk_assert_fails(tk_sym_eval(big, NAMES, values, 4, &v), TK_EINVAL, "symbolic expression overflows");
    tk_sym m = MIN(big, f->batch);
    assert_prints(m, "batch");
}

/* print -> parse gives the same node, for every expression of the table */
static void parse__round_trips_every_printed_form(void **state)
{
    fixture *f = *state;
    sym_case cases[MAX_CASES];
    size_t n = make_cases(f, cases);
    const tk_sym vars[] = {f->batch, f->seq, f->k, f->d};
    for (size_t i = 0; i < n; i++) {
        tk_strbuf sb = TK_STRBUF_INIT;
        tk_sym back;
        tk_assert_ok(tk_sym_print(cases[i].value, &sb));
        int rc = tk_sym_parse(f->ctx, sb.buf, NAMES, vars, 4, &back);
        if (rc)
            fail_msg("%s: parse of '%s' failed: %s", cases[i].what, sb.buf, tk_error_last());
        if (!tk_sym_equal(back, cases[i].value)) {
            char buf[256];
            fail_msg("%s: '%s' parses back as '%s'", cases[i].what, sb.buf, str(back, buf, sizeof buf));
        }
        tk_strbuf_release(&sb);
    }
}

/* A pseudo-random expression of depth <= depth over batch, seq, a symbol of one value (one in
 * [7, 7]) and constants up to the int64 limits; a combination that overflows is left out. */
static uint64_t rnd_next(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static tk_sym rnd_expr(tk_ctx *ctx, const tk_sym *vars, uint64_t *st, int depth)
{
    static const int64_t consts[] = {0, 1, -1, 3, 7, -12, INT64_MAX, INT64_MIN, INT64_MIN + 1, 1000000007};
    uint64_t r = rnd_next(st);
    if (depth == 0 || r % 7 == 0)
        return r % 3 ? vars[(r >> 8) % 3] : C(consts[(r >> 8) % 10]);
    tk_sym a = rnd_expr(ctx, vars, st, depth - 1), b = rnd_expr(ctx, vars, st, depth - 1), out;
    int64_t k = (int64_t)((r >> 16) % 9) - 4;
    switch ((r >> 4) % 7) {
    case 0: out = ADD(a, b); break;
    case 1: out = SUB(a, b); break;
    case 2: out = MUL(a, k ? k : 2); break;
    case 3: out = tk_sym_floordiv(ctx, a, k > 0 ? k : 3); break;
    case 4: out = MOD(a, k > 0 ? k : 5); break;
    case 5: out = MIN(a, b); break;
    default: out = MAX(a, b); break;
    }
    if (!out.expr && out.value == -1 && tk_error_last()[0]) { /* overflow: keep an operand */
        tk_error_clear();
        return a;
    }
    return out;
}

/* Whatever the simplifier builds reads back as itself: 400 random expressions, symbols with one
 * value and the int64 limits included, printed, parsed, printed again (the same text) and
 * evaluated at random points (the same values). */
static void parse__random_expressions_read_back_what_they_print(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    const char *const names[] = {"batch", "seq", "one"};
    const tk_sym vars[] = {f->batch, f->seq, tk_sym_var(ctx, "one", 7, 7)};
    uint64_t st = 12345;
    for (int i = 0; i < 400; i++) {
        tk_error_clear();
        tk_sym e = rnd_expr(ctx, vars, &st, 4), back;
        tk_error_clear();
        tk_strbuf a = TK_STRBUF_INIT, b = TK_STRBUF_INIT;
        tk_assert_ok(tk_sym_print(e, &a));
        if (tk_sym_parse(ctx, a.buf, names, vars, 3, &back))
            fail_msg("'%s' does not parse back: %s", a.buf, tk_error_last());
        tk_assert_ok(tk_sym_print(back, &b));
        if (strcmp(a.buf, b.buf))
            fail_msg("'%s' parses back as '%s'", a.buf, b.buf);
        for (int p = 0; p < 4; p++) {
            int64_t vals[3] = {1 + (int64_t)(rnd_next(&st) % 1024), 1 + (int64_t)(rnd_next(&st) % 4096), 7}, x, y;
            int rx = tk_sym_eval(e, names, vals, 3, &x), ry = tk_sym_eval(back, names, vals, 3, &y);
            assert_int_equal(rx, ry);
            if (!rx && x != y)
                fail_msg("'%s' at batch=%lld seq=%lld: %lld, read back: %lld", a.buf, (long long)vals[0],
                         (long long)vals[1], (long long)x, (long long)y);
            tk_error_clear();
        }
        tk_strbuf_release(&a);
        tk_strbuf_release(&b);
    }
    /* the two cases of issue 16 */
    tk_sym d = vars[2], diff = SUB(f->seq, d), back;
    assert_prints(diff, "seq - 7");
    tk_assert_ok(tk_sym_parse(ctx, "-one + seq", names, vars, 3, &back));
    assert_true(tk_sym_equal(back, diff));
    assert_prints(C(INT64_MIN), "(-9223372036854775807 - 1)");
    tk_assert_ok(tk_sym_parse(ctx, "(-9223372036854775807 - 1)", names, vars, 3, &back));
    assert_true(!back.expr && back.value == INT64_MIN);
}

/* Python's reading of the text: unary minus binds tighter than //, * and // associate left */
static void parse__reads_python_precedence_and_spacing(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    const tk_sym vars[] = {f->batch, f->seq, f->k, f->d};
    const struct {
        const char *text;
        tk_sym want;
    } cases[] = {
        {"2 * batch+1", ADD(MUL(f->batch, 2), C(1))},
        {"batch*2", MUL(f->batch, 2)},
        {"-batch // 2", FDIV(MUL(f->batch, -1), 2)},
        {"-(batch // 2)", MUL(FDIV(f->batch, 2), -1)},
        {"2*batch // 4", FDIV(f->batch, 2)},
        {"batch // 2 // 3", FDIV(f->batch, 6)},
        {"batch - seq - 1", SUB(SUB(f->batch, f->seq), C(1))},
        {"min(batch, 16, 8)", MIN(f->batch, C(8))},
        {"max( seq ,batch )", MAX(f->batch, f->seq)},
        {"(batch + 1) % 8", MOD(ADD(f->batch, C(1)), 8)},
        {"  42 ", C(42)},
        {"-3", C(-3)},
        {"+batch", f->batch},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_sym got;
        tk_assert_ok(tk_sym_parse(ctx, cases[i].text, NAMES, vars, 4, &got));
        if (!tk_sym_equal(got, cases[i].want)) {
            char a[256], b[256];
            fail_msg("'%s' parses as '%s', expected '%s'", cases[i].text, str(got, a, sizeof a),
                     str(cases[i].want, b, sizeof b));
        }
    }
}

static void parse__errors_name_the_column(void **state)
{
    fixture *f = *state;
    const tk_sym vars[] = {f->batch, f->seq, f->k, f->d};
    const struct {
        const char *text, *want;
    } cases[] = {
        {"batch +", "bad symbolic expression 'batch +': unexpected end, expected a number, a name, min(, max( or ( "
                    "at column 8"},
        {"batch // seq", "bad symbolic expression 'batch // seq': '//' by a symbolic expression (the divisor must be "
                         "a constant) at column 7"},
        {"batch % 0", "bad symbolic expression 'batch % 0': '%' by 0 (the divisor must be > 0) at column 7"},
        {"foo + 1", "bad symbolic expression 'foo + 1': unknown symbol 'foo' at column 1"},
        {"(batch", "bad symbolic expression '(batch': expected ')' at column 7"},
        {"batch )", "bad symbolic expression 'batch )': unexpected ')' after the expression at column 7"},
        {"min(batch)", "bad symbolic expression 'min(batch)': min( takes at least 2 arguments at column 1"},
        {"min(batch; 2)", "bad symbolic expression 'min(batch; 2)': expected ',' or ')' at column 10"},
        {"99999999999999999999", "bad symbolic expression '99999999999999999999': integer too large at column 1"},
        {"", "bad symbolic expression '': unexpected end, expected a number, a name, min(, max( or ( at column 1"},
        {"9223372036854775807 + 1", "bad symbolic expression '9223372036854775807 + 1': symbolic expression "
                                    "overflows at column 21"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_sym got;
        int rc = tk_sym_parse(f->ctx, cases[i].text, NAMES, vars, 4, &got);
        if (rc != TK_EINVAL)
            fail_msg("'%s' parsed (rc %d)", cases[i].text, rc);
        if (strcmp(tk_error_last(), cases[i].want) != 0)
            fail_msg("'%s':\n  error '%s'\n  expected '%s'", cases[i].text, tk_error_last(), cases[i].want);
    }
    /* nesting is bounded, not a stack overflow */
    char deep[2100];
    memset(deep, '(', 2000);
    strcpy(deep + 2000, "1");
    tk_sym got;
    tk_assert_fails(tk_sym_parse(f->ctx, deep, NAMES, vars, 4, &got), TK_EINVAL, "nested too deeply");
}

/* --- requirements ------------------------------------------------------------------------------ */

static void require__constants_are_checked_at_once(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_assert_ok(tk_require_eq(ctx, C(128), C(128), "x dim 1 == weight dim 1"));
    tk_assert_fails(tk_require_eq(ctx, C(128), C(100), "x dim 1 == weight dim 1"), TK_EINVAL,
                    "x dim 1 == weight dim 1 does not hold (128 vs 100)");
    tk_assert_ok(tk_require_range(ctx, C(5), 1, 8, "n in [1, 8]"));
    tk_assert_fails(tk_require_range(ctx, C(9), 1, 8, "n in [1, 8]"), TK_EINVAL,
                    "n in [1, 8] does not hold (9 is outside [1, 8])");
    tk_assert_ok(tk_require_divisible(ctx, C(96), 32, "x dim 0 % 32 == 0"));
    tk_assert_fails(tk_require_divisible(ctx, C(100), 32, "x dim 0 % 32 == 0"), TK_EINVAL,
                    "x dim 0 % 32 == 0 does not hold (100 is not a multiple of 32)");
    tk_assert_fails(tk_require_divisible(ctx, C(100), 0, "x dim 0 % 0 == 0"), TK_EINVAL, "divisor 0");
    /* a symbol without a tracer: nothing decides it */
    tk_assert_fails(tk_require_eq(ctx, f->batch, C(8), "x dim 0 == 8"), TK_EINVAL,
                    "x dim 0 == 8: a symbolic requirement outside trace mode");
}

/* An op whose meta function requires its input's dim 0 to be a multiple of 4. */
static int quad_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int rc = tk_require_divisible(ctx, tk_tensor_sym(in[0], 0), 4, "x dim 0 % 4 == 0");
    if (rc)
        return rc;
    tk_sym shape[1] = {tk_sym_floordiv(ctx, tk_tensor_sym(in[0], 0), 4)};
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), 1, shape);
}

static int quad_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx, (void)in, (void)out;
    return 0;
}

TK_OP(quad_op, "test_sym::quad", "(Tensor x) -> Tensor", .meta = quad_meta, .cpu = quad_cpu)
{
    (void)ctx, (void)in, (void)out;
    return 0;
}

static void require__an_eager_failure_names_the_op(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t s6[] = {6}, s8[] = {8};
    tk_tensor *x6, *x8;
    tk_assert_ok(tk_tensor_new(&x6, ctx, CPU, TK_F32, 1, s6));
    tk_assert_ok(tk_tensor_new(&x8, ctx, CPU, TK_F32, 1, s8));
    assert_null(tk_call(ctx, "test_sym::quad", x6));
    assert_true(strncmp(tk_error_last(), "op 'test_sym::quad': x dim 0 % 4 == 0 does not hold (6 is not a multiple of 4) (at ",
                        strlen("op 'test_sym::quad': x dim 0 % 4 == 0 does not hold (6 is not a multiple of 4) (at ")) == 0);
    tk_tensor *y = tk_call(ctx, "test_sym::quad", x8);
    assert_non_null(y);
    assert_int_equal(tk_tensor_dim(y, 0), 2);
    assert_null(ctx->syms);
    tk_tensor_free(y);
    tk_tensor_free(x6);
    tk_tensor_free(x8);
    tk_ctx_free(ctx);
}

/* --- traced tensors ---------------------------------------------------------------------------- */

static void traced__tensors_carry_symbolic_dims(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_tensor *t;
    const tk_sym dims[] = {f->batch, C(128)};
    tk_assert_ok(tk_tensor_new_traced(&t, ctx, TK_BF16, 2, dims));
    assert_true(tk_sym_equal(tk_tensor_sym(t, 0), f->batch));
    assert_true(tk_sym_equal(tk_tensor_sym(t, -1), C(128)));
    assert_int_equal(tk_tensor_dim(t, 1), 128);
    /* a dynamic dim read as a number is TK_SYM_DYNAMIC_VALUE: negative, and odd */
    assert_int_equal(tk_tensor_dim(t, 0), TK_SYM_DYNAMIC_VALUE);
    assert_true(TK_SYM_DYNAMIC_VALUE < 0 && TK_SYM_DYNAMIC_VALUE % 2 != 0);
    assert_int_equal(f->batch.value, TK_SYM_DYNAMIC_VALUE);
    assert_string_equal(tk_error_last(),
                        "dim 0 of a traced tensor is dynamic ('batch'): use tk_tensor_sym in meta functions");
    assert_int_equal(tk_numel(t), TK_SYM_DYNAMIC_VALUE);
    assert_string_equal(tk_error_last(), "the element count of a traced tensor is dynamic ([batch, 128]): use "
                                         "tk_tensor_sym in meta functions");
    assert_int_equal(tk_tensor_shape(t)[0], TK_SYM_DYNAMIC_VALUE);
    assert_int_equal(tk_tensor_shape(t)[1], 128);
    assert_null(tk_tensor_data(t));
    tk_sym bad = tk_tensor_sym(t, 2);
    assert_int_equal(bad.value, -1);
    assert_string_equal(tk_error_last(), "dim 2 is out of range for a rank-2 tensor");
    /* an ordinary tensor's dims are constants */
    tk_tensor *e;
    const int64_t shape[] = {3, 4};
    tk_assert_ok(tk_tensor_new(&e, ctx, CPU, TK_F32, 2, shape));
    assert_true(tk_sym_is_const(tk_tensor_sym(e, 0)) && tk_tensor_sym(e, 0).value == 3);
    assert_true(tk_sym_is_const(tk_tensor_sym(e, -1)) && tk_tensor_sym(e, -1).value == 4);
    tk_assert_fails(tk_tensor_copy(ctx, e, t), TK_EINVAL, "traced");
    tk_tensor_free(e);
    tk_tensor_free(t);
    const tk_sym negative[] = {C(-2)};
    tk_assert_fails(tk_tensor_new_traced(&t, ctx, TK_F32, 1, negative), TK_EINVAL, "dim 0 is -2");
}

static void traced__specs_keep_symbolic_dims(void **state)
{
    fixture *f = *state;
    tk_ctx *ctx = f->ctx;
    tk_tensor_spec spec;
    memset(&spec, 0, sizeof spec);
    const tk_sym dims[] = {MUL(f->batch, 2), C(64)};
    tk_assert_ok(tk_spec_set_sym(&spec, TK_F16, 2, dims));
    assert_true(spec.set);
    assert_int_equal(spec.shape[0], -1);
    assert_int_equal(spec.shape[1], 64);
    assert_true(tk_sym_equal(spec.dims[0], dims[0]));
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new_traced(&t, ctx, TK_F16, 2, dims));
    memset(&spec, 0, sizeof spec);
    tk_assert_ok(tk_spec_like(&spec, t));
    assert_true(tk_sym_equal(spec.dims[0], dims[0]));
    assert_int_equal(spec.rank, 2);
    tk_tensor_free(t);
    /* a failed tk_sym_* call (TK_SYM(-1)) is refused, with the reason */
    const tk_sym bad[] = {FDIV(f->batch, 0)};
    tk_assert_fails(tk_spec_set_sym(&spec, TK_F16, 1, bad), TK_EINVAL,
                    "tk_spec_set_sym: dim 0 is -1 (dims must be >= 0); an earlier call failed: symbolic floor "
                    "division by 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(simplify__table_of_cases_prints_the_canonical_form),
        cmocka_unit_test(simplify__equal_forms_are_one_node),
        cmocka_unit_test(simplify__printing_does_not_depend_on_the_order_of_construction),
        cmocka_unit_test(simplify__constants_never_allocate),
        cmocka_unit_test(simplify__division_by_zero_or_negative_is_refused),
        cmocka_unit_test(range__interval_arithmetic),
        cmocka_unit_test(product__of_two_symbols_is_one_canonical_atom),
        cmocka_unit_test(range__narrowing_folds_later_expressions),
        cmocka_unit_test(var__names_and_ranges_are_checked),
        cmocka_unit_test(linear1__recognizes_k_times_var_plus_c),
        cmocka_unit_test(eval__binds_symbols_by_name),
        cmocka_unit_test(overflow__is_an_error_not_undefined_behaviour),
        cmocka_unit_test(parse__round_trips_every_printed_form),
        cmocka_unit_test(parse__random_expressions_read_back_what_they_print),
        cmocka_unit_test(parse__reads_python_precedence_and_spacing),
        cmocka_unit_test(parse__errors_name_the_column),
        cmocka_unit_test(require__constants_are_checked_at_once),
        cmocka_unit_test(require__an_eager_failure_names_the_op),
        cmocka_unit_test(traced__tensors_carry_symbolic_dims),
        cmocka_unit_test(traced__specs_keep_symbolic_dims),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
