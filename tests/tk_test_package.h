/* What the package suites (test_package.c, test_package_gpu.c) share: the test program as a model
 * built with runtime/progmodel.h, its weights, its reference computed here, and a .tkpkg around a
 * model written through the format's own writer (runtime/pkgfile.h), signed with the suite's
 * key, which the suite trusts through a trust file of its own. Include after <cmocka.h> and
 * tk_test.h. */
#ifndef TK_TEST_PACKAGE_H
#define TK_TEST_PACKAGE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include <unistd.h>

#include "exec.h"
#include "pkgfile.h"
#include "progmodel.h"
#include "safetensors.h"
#include "sign.h"

enum { TP_IN = 4, TP_OUT = 3, TP_MAX_BATCH = 64 };

static float tp_w[TP_OUT * TP_IN], tp_b[TP_OUT];

static inline tk_pm_value *tp_value(tk_pm_value *v, int id, const char *name, int rank, const char *e0, int64_t d0, int64_t d1)
{
    v->id = id;
    v->name = (char *)name; /* replaced by a copy below */
    v->dtype = TK_F32;
    v->rank = rank;
    v->dims[0].expr = (char *)e0;
    v->dims[0].value = e0 ? -1 : d0;
    if (rank > 1)
        v->dims[1].value = d1;
    return v;
}

/* Strings a value holds, copied into the model (the model frees them with itself). */
static inline void tp_own(tk_program_model *m, tk_pm_value *v)
{
    if (v->name)
        v->name = tk_pm_strdup(m, v->name);
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d].expr)
            v->dims[d].expr = tk_pm_strdup(m, v->dims[d].expr);
}

static inline void tp_set(tk_program_model *m, tk_pm_value *v, int id, const char *name, int rank, const char *e0,
                   int64_t d0, int64_t d1)
{
    tp_own(m, tp_value(v, id, name, rank, e0, d0, d1));
}

/* A built-in op in m's table, its schema as the runtime registers it. */
static inline void tp_builtin(tk_program_model *m, const char *name)
{
    const tk_op_def *def = tk_op_find(name);
    assert_non_null(def);
    tk_pm_op *op = tk_pm_add_op(m, name);
    assert_non_null(op);
    op->schema = tk_pm_strdup(m, def->schema);
    op->file = tk_pm_strdup(m, "<builtin>");
    op->builtin = 1;
}

static inline void tp_op(tk_program_model *m, const char *name, const char *schema, int builtin)
{
    tk_pm_op *op = tk_pm_add_op(m, name);
    assert_non_null(op);
    op->schema = tk_pm_strdup(m, schema);
    op->file = tk_pm_strdup(m, builtin ? "<builtin>" : "tests/test_ops_module.c");
    op->builtin = builtin;
}

/* test::mlp: h = linear(x, W, b); y = silu(h) + h, x [batch, 4] with batch in [1, 64]; the
 * outputs are y and h. Values: x 0, lin.weight 1, lin.bias 2, h 3, s 4, y 5. */
static inline tk_program_model *tp_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::mlp"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, TP_IN);
    tp_set(m, tk_pm_add_param(m), 1, "lin.weight", 2, NULL, TP_OUT, TP_IN);
    tp_set(m, tk_pm_add_param(m), 2, "lin.bias", 1, NULL, TP_OUT, 0);
    tk_pm_node *n = tk_pm_add_node(m, "tk::linear", 3, 1, "model.c", 10);
    n->inputs[0] = 0, n->inputs[1] = 1, n->inputs[2] = 2;
    tp_set(m, &n->outputs[0], 3, NULL, 2, "batch", 0, TP_OUT);
    n = tk_pm_add_node(m, "tk::silu", 1, 1, "model.c", 11);
    n->inputs[0] = 3;
    tp_set(m, &n->outputs[0], 4, NULL, 2, "batch", 0, TP_OUT);
    n = tk_pm_add_node(m, "tk::add", 2, 1, "model.c", 12);
    n->inputs[0] = 4, n->inputs[1] = 3;
    tp_set(m, &n->outputs[0], 5, NULL, 2, "batch", 0, TP_OUT);
    tp_set(m, tk_pm_add_output(m), 5, NULL, 2, "batch", 0, TP_OUT);
    tp_set(m, tk_pm_add_output(m), 3, NULL, 2, "batch", 0, TP_OUT);
    tp_op(m, "tk::add", "(Tensor a, Tensor b) -> Tensor", 1);
    tp_op(m, "tk::linear", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", 1);
    tp_op(m, "tk::silu", "(Tensor x) -> Tensor", 1);
    tk_pm_sort(m);
    return m;
}

static inline tk_tensor *tp_f32(int rank, const int64_t *shape, const float *vals)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, rank, shape));
    for (int64_t i = 0; i < tk_numel(t); i++)
        ((float *)tk_tensor_data(t))[i] = vals ? vals[i] : 0.0f;
    return t;
}

/* weights.safetensors of test::mlp (malloc'd image), with one tensor the program does not use. */
static inline void *tp_weights(size_t *len)
{
    for (int i = 0; i < TP_OUT * TP_IN; i++)
        tp_w[i] = 0.25f * (float)(i % 7) - 0.5f;
    for (int i = 0; i < TP_OUT; i++)
        tp_b[i] = 0.1f * (float)i - 0.1f;
    const int64_t ws[] = {TP_OUT, TP_IN}, bs[] = {TP_OUT}, us[] = {2};
    const float unused[2] = {0};
    tk_tensor *ts[] = {tp_f32(2, ws, tp_w), tp_f32(1, bs, tp_b), tp_f32(1, us, unused)};
    const char *names[] = {"lin.weight", "lin.bias", "other"};
    void *img = NULL;
    tk_assert_ok(tk_safetensors_write_mem(&img, len, 3, names, ts));
    for (int i = 0; i < 3; i++)
        tk_tensor_free(ts[i]);
    return img;
}

/* x [batch, 4] with values that depend on seed. */
static inline tk_tensor *tp_input(int64_t batch, int seed)
{
    const int64_t shape[] = {batch, TP_IN};
    tk_tensor *x = tp_f32(2, shape, NULL);
    float *p = tk_tensor_data(x);
    for (int64_t i = 0; i < batch * TP_IN; i++)
        p[i] = 0.01f * (float)((i * 37 + seed * 11) % 201) - 1.0f;
    return x;
}

/* y and h of test::mlp computed here, and compared with the outputs. */
static inline void tp_check(const tk_tensor *x, const tk_tensor *y, const tk_tensor *h)
{
    const float *xp = tk_tensor_data(x), *yp = tk_tensor_data(y), *hp = tk_tensor_data(h);
    int64_t batch = tk_tensor_shape(x)[0];
    assert_int_equal(tk_tensor_shape(y)[0], batch);
    assert_int_equal(tk_tensor_shape(y)[1], TP_OUT);
    for (int64_t r = 0; r < batch; r++) {
        for (int o = 0; o < TP_OUT; o++) {
            float acc = tp_b[o];
            for (int k = 0; k < TP_IN; k++)
                acc += xp[r * TP_IN + k] * tp_w[o * TP_IN + k];
            float want_y = acc / (1.0f + expf(-acc)) + acc;
            if (fabsf(hp[r * TP_OUT + o] - acc) > 1e-5f || fabsf(yp[r * TP_OUT + o] - want_y) > 1e-5f)
                fail_msg("row %lld col %d: h %g y %g, expected %g %g", (long long)r, o, hp[r * TP_OUT + o],
                         yp[r * TP_OUT + o], acc, want_y);
        }
    }
}

/* test::views, x [batch, 4]; outputs y = 2x + x*x and z = transpose(4 x[:, 1:3]) [2, batch]:
 *   n0 a = add(x, x)              n1 f = flatten(a) [4*batch]    n2 g = unflatten(f, 0, [-1, 4])
 *   n3 h = narrow(a, 1, 1, 2)     n4 k = mul(x, x)               n5 y = add(g, k)
 *   n6 t = transpose(h, 0, 1)     n7 z = add(t, t)
 * f and g are views of a's bytes in every run; h and t only at batch 1 (a's rows of one). k is
 * made after a's last direct reader (n3) while g, a view of a, is still to be read (n5): it must
 * not take a's place. Values: x 0, a 1, f 2, g 3, h 4, k 5, y 6, t 7, z 8. */
static inline tk_pm_node *tp_node(tk_program_model *m, const char *op, int nin, int line, int a, int b)
{
    tk_pm_node *n = tk_pm_add_node(m, op, nin, 1, "views.c", line);
    assert_non_null(n);
    n->inputs[0] = a;
    for (int i = 1; i < nin; i++)
        n->inputs[i] = i == 1 ? b : -1;
    return n;
}

static inline void tp_int_attrs(tk_program_model *m, tk_pm_node *n, int first, int count, const int64_t *vals,
                                const char *const *names)
{
    tk_pm_attr *a = tk_pm_node_attrs(m, n, count);
    assert_non_null(a);
    for (int i = 0; i < count; i++)
        a[i] = (tk_pm_attr){.name = tk_pm_strdup(m, names[i]), .arg = first + i, .kind = TK_VALUE_INT, .i = vals[i]};
}

/* n's attributes of tk::unflatten: dim, and sizes [s0, s1] (copied into the model). */
static inline void tp_unflatten_attrs(tk_program_model *m, tk_pm_node *n, int64_t dim, int64_t s0, int64_t s1)
{
    tk_pm_attr *a = tk_pm_node_attrs(m, n, 2);
    int64_t *sizes = tk_pm_alloc(m, 2 * sizeof(int64_t));
    assert_non_null(a);
    assert_non_null(sizes);
    sizes[0] = s0, sizes[1] = s1;
    a[0] = (tk_pm_attr){.name = tk_pm_strdup(m, "dim"), .arg = 1, .kind = TK_VALUE_INT, .i = dim};
    a[1] = (tk_pm_attr){.name = tk_pm_strdup(m, "sizes"), .arg = 2, .kind = TK_VALUE_INTS, .ints = sizes, .nints = 2};
}

static inline tk_program_model *tp_views_model(void)
{
    tk_program_model *m;
    static const int64_t narrow_args[] = {1, 1, 2}, transpose_args[] = {0, 1};
    tk_assert_ok(tk_program_model_new(&m, "test::views"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, TP_IN);
    tk_pm_node *n = tp_node(m, "tk::add", 2, 1, 0, 0);
    tp_set(m, &n->outputs[0], 1, NULL, 2, "batch", 0, TP_IN);
    static const int64_t flatten_args[] = {0, -1};
    static const char *const flatten_names[] = {"start_dim", "end_dim"}, *const narrow_names[] = {"dim", "start", "length"},
                             *const transpose_names[] = {"dim0", "dim1"};
    n = tp_node(m, "tk::flatten", 3, 2, 1, -1);
    tp_int_attrs(m, n, 1, 2, flatten_args, flatten_names);
    tp_set(m, &n->outputs[0], 2, NULL, 1, "4*batch", 0, 0);
    n = tp_node(m, "tk::unflatten", 3, 3, 2, -1);
    tp_unflatten_attrs(m, n, 0, -1, TP_IN);
    tp_set(m, &n->outputs[0], 3, NULL, 2, "batch", 0, TP_IN);
    n = tp_node(m, "tk::narrow", 4, 4, 1, -1);
    tp_int_attrs(m, n, 1, 3, narrow_args, narrow_names);
    tp_set(m, &n->outputs[0], 4, NULL, 2, "batch", 0, 2);
    tp_set(m, &tp_node(m, "tk::mul", 2, 5, 0, 0)->outputs[0], 5, NULL, 2, "batch", 0, TP_IN);
    tp_set(m, &tp_node(m, "tk::add", 2, 6, 3, 5)->outputs[0], 6, NULL, 2, "batch", 0, TP_IN);
    n = tp_node(m, "tk::transpose", 3, 7, 4, -1);
    tp_int_attrs(m, n, 1, 2, transpose_args, transpose_names);
    tp_set(m, &n->outputs[0], 7, NULL, 2, NULL, 2, 0);
    n->outputs[0].dims[1].expr = tk_pm_strdup(m, "batch"), n->outputs[0].dims[1].value = -1;
    n = tp_node(m, "tk::add", 2, 8, 7, 7);
    tp_set(m, &n->outputs[0], 8, NULL, 2, NULL, 2, 0);
    n->outputs[0].dims[1].expr = tk_pm_strdup(m, "batch"), n->outputs[0].dims[1].value = -1;
    tp_set(m, tk_pm_add_output(m), 6, NULL, 2, "batch", 0, TP_IN);
    tk_pm_value *z = tk_pm_add_output(m);
    tp_set(m, z, 8, NULL, 2, NULL, 2, 0);
    z->dims[1].expr = tk_pm_strdup(m, "batch"), z->dims[1].value = -1;
    static const char *const ops[] = {"tk::add", "tk::mul", "tk::flatten", "tk::unflatten", "tk::narrow", "tk::transpose"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        tp_builtin(m, ops[i]);
    tk_pm_sort(m);
    return m;
}

/* test::views' outputs against x, computed here. */
static inline void tp_views_check(const tk_tensor *x, const tk_tensor *y, const tk_tensor *z)
{
    const float *xp = tk_tensor_data(x), *yp = tk_tensor_data(y), *zp = tk_tensor_data(z);
    int64_t batch = tk_tensor_shape(x)[0];
    assert_int_equal(tk_tensor_shape(z)[0], 2);
    assert_int_equal(tk_tensor_shape(z)[1], batch);
    for (int64_t i = 0; i < batch * TP_IN; i++)
        if (fabsf(yp[i] - (2 * xp[i] + xp[i] * xp[i])) > 1e-5f)
            fail_msg("batch %lld: y[%lld] is %g, expected %g", (long long)batch, (long long)i, yp[i],
                     2 * xp[i] + xp[i] * xp[i]);
    for (int c = 0; c < 2; c++)
        for (int64_t r = 0; r < batch; r++)
            if (zp[c * batch + r] != 4 * xp[r * TP_IN + 1 + c])
                fail_msg("batch %lld: z[%d][%lld] is %g, expected %g", (long long)batch, c, (long long)r,
                         zp[c * batch + r], 4 * xp[r * TP_IN + 1 + c]);
}

/* test::oview, x [batch, 4]: y = narrow(x + x, 1, 1, 2) [batch, 2] (an output view of x + x's
 * rows: strides {4, 1}, from element 1) and k = x * x. Values: x 0, a 1, y 2, k 3. */
static inline tk_program_model *tp_oview_model(void)
{
    tk_program_model *m;
    static const int64_t narrow_args[] = {1, 1, 2};
    static const char *const narrow_names[] = {"dim", "start", "length"};
    tk_assert_ok(tk_program_model_new(&m, "test::oview"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set(m, tk_pm_add_input(m), 0, "x", 2, "batch", 0, TP_IN);
    tp_set(m, &tp_node(m, "tk::add", 2, 1, 0, 0)->outputs[0], 1, NULL, 2, "batch", 0, TP_IN);
    tk_pm_node *n = tp_node(m, "tk::narrow", 4, 2, 1, -1);
    tp_int_attrs(m, n, 1, 3, narrow_args, narrow_names);
    tp_set(m, &n->outputs[0], 2, NULL, 2, "batch", 0, 2);
    tp_set(m, &tp_node(m, "tk::mul", 2, 3, 0, 0)->outputs[0], 3, NULL, 2, "batch", 0, TP_IN);
    tp_set(m, tk_pm_add_output(m), 2, NULL, 2, "batch", 0, 2);
    tp_set(m, tk_pm_add_output(m), 3, NULL, 2, "batch", 0, TP_IN);
    tp_builtin(m, "tk::add");
    tp_builtin(m, "tk::mul");
    tp_builtin(m, "tk::narrow");
    tk_pm_sort(m);
    return m;
}

/* test::oview's outputs (on the host, y contiguous or a view of rows of 4) against x. */
static inline void tp_oview_check(const tk_tensor *x, const tk_tensor *y, const tk_tensor *k)
{
    const float *xp = tk_tensor_data(x), *yp = tk_tensor_data(y), *kp = tk_tensor_data(k);
    const int64_t *ys = tk_tensor_strides(y);
    int64_t batch = tk_tensor_shape(x)[0];
    assert_int_equal(tk_tensor_shape(y)[0], batch);
    assert_int_equal(tk_tensor_shape(y)[1], 2);
    for (int64_t r = 0; r < batch; r++) {
        for (int c = 0; c < 2; c++)
            if (yp[r * ys[0] + c * ys[1]] != 2 * xp[r * TP_IN + 1 + c])
                fail_msg("batch %lld: y[%lld][%d] is %g, expected %g", (long long)batch, (long long)r, c,
                         yp[r * ys[0] + c * ys[1]], 2 * xp[r * TP_IN + 1 + c]);
        for (int c = 0; c < TP_IN; c++)
            if (kp[r * TP_IN + c] != xp[r * TP_IN + c] * xp[r * TP_IN + c])
                fail_msg("batch %lld: k[%lld][%d] is %g", (long long)batch, (long long)r, c, kp[r * TP_IN + c]);
    }
}

/* A value of rank 3, [batch, d1, d2]. */
static inline void tp_set3(tk_program_model *m, tk_pm_value *v, int id, const char *name, int64_t d1, int64_t d2)
{
    tp_set(m, v, id, name, 2, "batch", 0, d1);
    v->rank = 3;
    v->dims[2].value = d2;
}

/* test::tview, q [batch, 3, 4] and k [batch, 5, 4]: s1 = matmul(q, transpose(k, 1, 2)), where
 * the transpose is read by the matmul alone (a strided view: cuBLASLt's op T, the CPU through
 * strides), and s2 = matmul(q, kt2), u = kt2 + kt2 for a second transpose that an add reads too
 * (copied). Values: q 0, k 1, kt1 2, s1 3, kt2 4, s2 5, u 6. */
static inline tk_program_model *tp_tview_model(void)
{
    tk_program_model *m;
    static const int64_t transpose_args[] = {1, 2};
    static const char *const names[] = {"dim0", "dim1"};
    tk_assert_ok(tk_program_model_new(&m, "test::tview"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tp_set3(m, tk_pm_add_input(m), 0, "q", 3, 4);
    tp_set3(m, tk_pm_add_input(m), 1, "k", 5, 4);
    for (int i = 0; i < 2; i++) {
        tk_pm_node *n = tp_node(m, "tk::transpose", 3, 10 + 3 * i, 1, -1);
        tp_int_attrs(m, n, 1, 2, transpose_args, names);
        tp_set3(m, &n->outputs[0], 2 + 2 * i, NULL, 4, 5);
        tp_set3(m, &tp_node(m, "tk::matmul", 2, 11 + 3 * i, 0, 2 + 2 * i)->outputs[0], 3 + 2 * i, NULL, 3, 5);
    }
    tp_set3(m, &tp_node(m, "tk::add", 2, 16, 4, 4)->outputs[0], 6, NULL, 4, 5);
    tp_set3(m, tk_pm_add_output(m), 3, NULL, 3, 5);
    tp_set3(m, tk_pm_add_output(m), 5, NULL, 3, 5);
    tp_set3(m, tk_pm_add_output(m), 6, NULL, 4, 5);
    tp_builtin(m, "tk::add");
    tp_builtin(m, "tk::matmul");
    tp_builtin(m, "tk::transpose");
    tk_pm_sort(m);
    return m;
}

/* q [batch, 3, 4] and k [batch, 5, 4] with values that depend on seed. */
static inline void tp_tview_inputs(int64_t batch, int seed, tk_tensor **q, tk_tensor **k)
{
    const int64_t qs[] = {batch, 3, 4}, ks[] = {batch, 5, 4};
    *q = tp_f32(3, qs, NULL);
    *k = tp_f32(3, ks, NULL);
    for (int64_t i = 0; i < batch * 12; i++)
        ((float *)tk_tensor_data(*q))[i] = 0.25f * (float)((i * 7 + seed) % 9) - 1.0f;
    for (int64_t i = 0; i < batch * 20; i++)
        ((float *)tk_tensor_data(*k))[i] = 0.5f * (float)((i * 5 + 3 * seed) % 7) - 1.5f;
}

/* test::tview's outputs (on the host) against q and k: s = q k^T (both), u = 2 k^T. */
static inline void tp_tview_check(const tk_tensor *q, const tk_tensor *k, tk_tensor *const *out)
{
    const float *qp = tk_tensor_data(q), *kp = tk_tensor_data(k);
    int64_t batch = tk_tensor_shape(q)[0];
    for (int64_t b = 0; b < batch; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                float want = 0.0f;
                for (int d = 0; d < 4; d++)
                    want += qp[(b * 3 + i) * 4 + d] * kp[(b * 5 + j) * 4 + d];
                for (int o = 0; o < 2; o++) {
                    float got = ((const float *)tk_tensor_data(out[o]))[(b * 3 + i) * 5 + j];
                    if (fabsf(got - want) > 1e-5f)
                        fail_msg("batch %lld: s%d[%lld][%d][%d] is %g, expected %g", (long long)batch, o + 1,
                                 (long long)b, i, j, got, want);
                }
            }
    for (int64_t b = 0; b < batch; b++)
        for (int d = 0; d < 4; d++)
            for (int j = 0; j < 5; j++)
                if (((const float *)tk_tensor_data(out[2]))[(b * 4 + d) * 5 + j] != 2 * kp[(b * 5 + j) * 4 + d])
                    fail_msg("batch %lld: u[%lld][%d][%d] is wrong", (long long)batch, (long long)b, d, j);
}

/* test::sview, x [batch, 4, 2*D] (4 tokens, 2 heads of D): q = x.view(batch, 4, 2, D).transpose(1, 2)
 * as PyTorch writes attention, o = sdpa(q, q, q) [batch, 2, 4, D]. The unflatten is a view of x;
 * the transpose, read by tk::sdpa alone, a strided view the kernels read where it lies. Values:
 * x 0, u 1, q 2, o 3; dtype dt. */
static inline tk_program_model *tp_sview_model(int64_t D, tk_dtype dt)
{
    tk_program_model *m;
    const int64_t tr[] = {1, 2};
    static const char *const tr_names[] = {"dim0", "dim1"};
    tk_assert_ok(tk_program_model_new(&m, "test::sview"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tk_pm_value *x = tk_pm_add_input(m);
    tp_set3(m, x, 0, "x", 4, 2 * D);
    tk_pm_node *n = tp_node(m, "tk::unflatten", 3, 20, 0, -1);
    tp_unflatten_attrs(m, n, 2, 2, D);
    tp_set3(m, &n->outputs[0], 1, NULL, 4, 2);
    n->outputs[0].rank = 4, n->outputs[0].dims[3].value = D;
    n = tp_node(m, "tk::transpose", 3, 21, 1, -1);
    tp_int_attrs(m, n, 1, 2, tr, tr_names);
    tp_set3(m, &n->outputs[0], 2, NULL, 2, 4);
    n->outputs[0].rank = 4, n->outputs[0].dims[3].value = D;
    n = tk_pm_add_node(m, "tk::sdpa", 6, 1, "views.c", 22);
    assert_non_null(n);
    n->inputs[0] = n->inputs[1] = n->inputs[2] = 2;
    n->inputs[3] = n->inputs[4] = n->inputs[5] = -1;
    tk_pm_attr *a = tk_pm_node_attrs(m, n, 3);
    assert_non_null(a);
    a[0] = (tk_pm_attr){.name = tk_pm_strdup(m, "causal"), .arg = 3, .kind = TK_VALUE_BOOL, .i = 0};
    a[1] = (tk_pm_attr){.name = tk_pm_strdup(m, "scale"), .arg = 4, .kind = TK_VALUE_FLOAT, .f = 0.0};
    a[2] = (tk_pm_attr){.name = tk_pm_strdup(m, "heads"), .arg = 5, .kind = TK_VALUE_INT, .i = 0};
    tp_set3(m, &n->outputs[0], 3, NULL, 2, 4);
    n->outputs[0].rank = 4, n->outputs[0].dims[3].value = D;
    tk_pm_value *o = tk_pm_add_output(m);
    tp_set3(m, o, 3, NULL, 2, 4);
    o->rank = 4, o->dims[3].value = D;
    x->dtype = n->outputs[0].dtype = o->dtype = dt;
    for (size_t k = 0; k < m->nnodes; k++)
        m->nodes[k].outputs[0].dtype = dt;
    tp_builtin(m, "tk::unflatten");
    tp_builtin(m, "tk::transpose");
    tp_builtin(m, "tk::sdpa");
    tk_pm_sort(m);
    return m;
}

/* test::sview's o computed eagerly on ctx (each layout op a copy, tk::sdpa on contiguous q). */
static inline tk_tensor *tp_sview_eager(tk_ctx *ctx, tk_tensor *x, int64_t D)
{
    tk_tensor *u = tk_call(ctx, "tk::unflatten", x, 2, TK_INTS(2, D)), *q = u ? tk_transpose(ctx, u, 1, 2) : NULL;
    tk_tensor *o = q ? tk_call(ctx, "tk::sdpa", q, q, q, TK_BOOL(0), 0.0, 0) : NULL;
    assert_non_null(o);
    tk_tensor_free(u);
    tk_tensor_free(q);
    return o;
}

/* Three programs that use views open at once (test::views, test::oview in a session with output
 * views, test::tview), one session each on dev, called in turn with a new batch every call for
 * calls calls; every result checked on the host. */
static inline void tp_view_programs_side_by_side(tk_device dev, int calls)
{
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    tk_program_model *m[3] = {tp_views_model(), tp_oview_model(), tp_tview_model()};
    tk_exec_program *p[3];
    tk_session *s[3];
    tk_session_options views = TK_SESSION_OPTIONS_INIT;
    size_t wlen;
    void *w = tp_weights(&wlen);
    views.output_views = 1;
    for (int i = 0; i < 3; i++) {
        tk_assert_ok(tk_exec_program_new(&p[i], m[i], w, wlen, "'side by side'", NULL));
        tk_assert_ok(tk_exec_session_new(&s[i], p[i], dev, i == 1 ? &views : NULL));
    }
    for (int call = 0; call < calls; call++) {
        int which = call % 3;
        int64_t batch = 1 + (call * 37) % 9;
        tk_tensor *in[2] = {NULL, NULL}, *out[3] = {NULL, NULL, NULL}, *host[3] = {NULL, NULL, NULL};
        int nin = which == 2 ? 2 : 1, nout = which == 2 ? 3 : 2;
        if (which == 2)
            tp_tview_inputs(batch, call, &in[0], &in[1]);
        else
            in[0] = tp_input(batch, call);
        tk_assert_ok(tk_session_run(s[which], in, (size_t)nin, out, (size_t)nout));
        tk_ctx *ctx = tk_session_ctx(s[which]);
        for (int o = 0; o < nout; o++) {
            tk_assert_ok(tk_tensor_new(&host[o], NULL, cpu, TK_F32, tk_tensor_rank(out[o]), tk_tensor_shape(out[o])));
            tk_assert_ok(tk_tensor_copy(ctx, host[o], out[o]));
        }
        if (which == 0)
            tp_views_check(in[0], host[0], host[1]);
        else if (which == 1)
            tp_oview_check(in[0], host[0], host[1]);
        else
            tp_tview_check(in[0], in[1], host);
        for (int o = 0; o < 3; o++) {
            tk_tensor_free(out[o]);
            tk_tensor_free(host[o]);
        }
        tk_tensor_free(in[0]);
        tk_tensor_free(in[1]);
    }
    for (int i = 0; i < 3; i++) {
        tk_session_free(s[i]);
        tk_exec_program_free(p[i]);
        tk_program_model_free(m[i]);
    }
    free(w);
}

/* The suite's signing key and trust file (TK_TEST_TMPDIR/trusted_keys-<pid>, set as
 * TKEXPORT_TRUST_FILE, the key its one line; TKEXPORT_TRUSTED_KEYS unset), so that nothing
 * reads the home folder's. Made by tp_trust_setup, dropped by tp_trust_teardown. */
static inline tk_sign_key **tp_key_slot(void)
{
    static tk_sign_key *key;
    return &key;
}

static inline const tk_sign_key *tp_key(void) { return *tp_key_slot(); }

static inline const char *tp_trust_file(void)
{
    static char path[1100];
    if (!path[0])
        snprintf(path, sizeof path, "%s/trusted_keys-%d", TK_TEST_TMPDIR, (int)getpid());
    return path;
}

static inline int tp_trust_setup(void **state)
{
    (void)state;
    tk_sign_public pub;
    int added = 0;
    unlink(tp_trust_file());
    setenv("TKEXPORT_TRUST_FILE", tp_trust_file(), 1);
    unsetenv("TKEXPORT_TRUSTED_KEYS");
    tk_assert_ok(tk_sign_key_generate(tp_key_slot()));
    tk_sign_key_public(tp_key(), &pub);
    tk_assert_ok(tk_trust_add(&pub, "the test suite's key", NULL, &added));
    assert_true(added);
    return 0;
}

static inline int tp_trust_teardown(void **state)
{
    (void)state;
    tk_sign_key_free(*tp_key_slot());
    *tp_key_slot() = NULL;
    unlink(tp_trust_file());
    return 0;
}

/* A .tkpkg around model m (program.json written from it), weights and an optional host object,
 * signed with key (NULL: unsigned) by tk_pkgfile_write_mem. *len and the bytes are the
 * caller's. */
static inline void *tp_package_signed(size_t *len, const tk_program_model *m, const void *weights, size_t wlen,
                                      const void *host, size_t hlen, const tk_sign_key *key)
{
    char *pj = NULL;
    tk_assert_ok(tk_program_json_write(&pj, m));
    tk_pkg_op *ops = calloc(m->nops + 1, sizeof(*ops));
    assert_non_null(ops);
    for (size_t i = 0; i < m->nops; i++)
        ops[i] = (tk_pkg_op){m->ops[i].name, m->ops[i].builtin, 0, NULL};
    tk_pkg_entry entries[3];
    size_t n = 0;
    if (host)
        entries[n++] = (tk_pkg_entry){.path = "host/ops.so", .data = (unsigned char *)host, .size = hlen};
    entries[n++] = (tk_pkg_entry){.path = "program.json", .data = (unsigned char *)pj, .size = strlen(pj)};
    entries[n++] = (tk_pkg_entry){.path = "weights.safetensors", .data = (unsigned char *)weights, .size = wlen};
    tk_pkgfile f = {.tkexport = "0.1.0", .program_name = m->name, .host = host ? "host/ops.so" : NULL,
                    .nops = m->nops, .ops = ops, .nentries = n, .entries = entries};
    void *zip = NULL;
    tk_assert_ok(tk_pkgfile_write_mem(&zip, len, &f, key));
    free(ops);
    free(pj);
    return zip;
}

/* tp_package_signed with the suite's key. */
static inline void *tp_package(size_t *len, const tk_program_model *m, const void *weights, size_t wlen,
                               const void *host, size_t hlen)
{
    return tp_package_signed(len, m, weights, wlen, host, hlen, tp_key());
}

static inline void tp_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* test::tokmlp: y = x + linear(gelu(linear(x, w1, b1)), w2, b2), bf16, x [batch, MF_D], hidden
 * MF_H; values x 0, w1 1, b1 2, w2 3, b2 4, h 5, a 6, m 7, y 8. */
#define MF_D 64
#define MF_H 256
static inline tk_program_model *mlpfuse_model(void)
{
    tk_program_model *m;
    tk_assert_ok(tk_program_model_new(&m, "test::tokmlp"));
    assert_non_null(tk_pm_add_symbol(m, "batch", 1, TP_MAX_BATCH));
    tk_pm_value *v[5] = {tk_pm_add_input(m), tk_pm_add_param(m), tk_pm_add_param(m), tk_pm_add_param(m),
                         tk_pm_add_param(m)};
    tp_set(m, v[0], 0, "x", 2, "batch", 0, MF_D);
    tp_set(m, v[1], 1, "w1", 2, NULL, MF_H, MF_D);
    tp_set(m, v[2], 2, "b1", 1, NULL, MF_H, 0);
    tp_set(m, v[3], 3, "w2", 2, NULL, MF_D, MF_H);
    tp_set(m, v[4], 4, "b2", 1, NULL, MF_D, 0);
    static const struct {
        const char *op;
        int nin, in[3], out, width;
    } nodes[] = {{"tk::linear", 3, {0, 1, 2}, 5, MF_H}, {"tk::gelu", 1, {5}, 6, MF_H},
                 {"tk::linear", 3, {6, 3, 4}, 7, MF_D}, {"tk::add", 2, {0, 7}, 8, MF_D}};
    for (int i = 0; i < 4; i++) {
        tk_pm_node *n = tk_pm_add_node(m, nodes[i].op, nodes[i].nin, 1, "tokmlp.c", 10 + i);
        for (int k = 0; k < nodes[i].nin; k++)
            n->inputs[k] = nodes[i].in[k];
        tp_set(m, &n->outputs[0], nodes[i].out, NULL, 2, "batch", 0, nodes[i].width);
        n->outputs[0].dtype = TK_BF16;
    }
    tp_set(m, tk_pm_add_output(m), 8, NULL, 2, "batch", 0, MF_D);
    for (size_t i = 0; i < 5; i++)
        v[i]->dtype = TK_BF16;
    m->outputs[0].dtype = TK_BF16;
    tp_op(m, "tk::add", "(Tensor a, Tensor b) -> Tensor", 1);
    tp_op(m, "tk::gelu", "(Tensor x) -> Tensor", 1);
    tp_op(m, "tk::linear", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", 1);
    tk_pm_sort(m);
    return m;
}

/* element i of parameter k (0 w1, 1 b1, 2 w2, 3 b2) of weight set `set`, in nn.Linear's range,
 * exact in bf16 */
static inline float mf_param(int k, int64_t i, int set)
{
    float bound = k < 2 ? 0.125f : 0.0625f; /* 1 / sqrt(fan_in): D 64, H 256 */
    return tk_bf16_to_f32(tk_f32_to_bf16(bound * (float)((i * 37 + k * 11 + set * 7) % 65 - 32) / 32.0f));
}

static inline tk_tensor *mf_bf16(int rank, const int64_t *shape, int k, int set)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_BF16, rank, shape));
    for (int64_t i = 0; i < tk_numel(t); i++)
        ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_bf16(k >= 0 ? mf_param(k, i, set) : 0.0f);
    return t;
}

static inline void *mlpfuse_weights(size_t *len, int set)
{
    const int64_t w1s[] = {MF_H, MF_D}, b1s[] = {MF_H}, w2s[] = {MF_D, MF_H}, b2s[] = {MF_D};
    tk_tensor *ts[] = {mf_bf16(2, w1s, 0, set), mf_bf16(1, b1s, 1, set), mf_bf16(2, w2s, 2, set),
                       mf_bf16(1, b2s, 3, set)};
    const char *names[] = {"w1", "b1", "w2", "b2"};
    void *img = NULL;
    tk_assert_ok(tk_safetensors_write_mem(&img, len, 4, names, ts));
    for (int i = 0; i < 4; i++)
        tk_tensor_free(ts[i]);
    return img;
}


#endif
