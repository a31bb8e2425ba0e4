/* Tests of libtkrt that need no GPU: dtypes, devices, tensors, the op registry, eager dispatch
 * through CPU fallbacks and meta functions, ops in a loaded shared object, tk_wrap's refusal on
 * the CPU, and the "no CUDA driver" path (or, on a GPU machine, a context that works). */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tk/op.h>
#include <tk/runtime.h>

#ifndef TK_TEST_OPS_MODULE
#define TK_TEST_OPS_MODULE "tests/libtest_ops.so"
#endif



#define assert_error_contains(text)                                                        \
    do {                                                                                   \
        if (!strstr(tk_error_last(), (text)))                                              \
            fail_msg("error '%s' does not contain '%s'", tk_error_last(), (text));         \
    } while (0)

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* A CPU f32 tensor holding vals. */
static tk_tensor *f32_tensor(int rank, const int64_t *shape, const float *vals)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, rank, shape));
    if (vals)
        memcpy(tk_tensor_data(t), vals, tk_tensor_nbytes(t));
    return t;
}

/* ---- the ops these tests dispatch to --------------------------------------------------- */

TK_KERNEL_DECL(scale2_kernel);
TK_KERNEL_DECL(test_kernel);

static int scale2_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    const float *x = tk_tensor_data(in[0]);
    float *y = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++)
        y[i] = 2.0f * x[i];
    return 0;
}

/* No meta function: the output is shaped like the input. */
TK_OP(scale2_op, "test::scale2", "(Tensor x) -> Tensor", .cpu = scale2_cpu)
{
    int64_t n = tk_numel(in[0]);
    return tk_wrap(ctx, scale2_kernel, TK_DIM3(tk_cdiv(n, 256)), TK_DIM3(256), in[0], out[0], n);
}

static int addmul_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    if (tk_numel(in[0]) != tk_numel(in[1]))
        return tk_error_set(TK_EINVAL, "test::addmul: inputs differ in size");
    int rc = tk_spec_like(out[0], in[0]);
    return rc ? rc : tk_spec_like(out[1], in[0]);
}

static int addmul_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    const float *a = tk_tensor_data(in[0]), *b = tk_tensor_data(in[1]);
    float *s = tk_tensor_data(out[0]), *p = tk_tensor_data(out[1]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++) {
        s[i] = a[i] + b[i];
        p[i] = a[i] * b[i];
    }
    return 0;
}

TK_OP(addmul_op, "test::addmul", "(Tensor a, Tensor b) -> (Tensor sum, Tensor prod)", .meta = addmul_meta,
      .cpu = addmul_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

/* [m, n] f32 -> [m] f32: a meta function that changes the shape. */
static int rowsum_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    if (tk_tensor_rank(in[0]) != 2)
        return tk_error_set(TK_EINVAL, "test::rowsum takes a matrix");
    int64_t m = tk_tensor_dim(in[0], 0);
    return tk_spec_set(out[0], TK_F32, 1, &m);
}

static int rowsum_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    int64_t m = tk_tensor_dim(in[0], 0), n = tk_tensor_dim(in[0], 1);
    const float *x = tk_tensor_data(in[0]);
    float *y = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < m; i++) {
        y[i] = 0;
        for (int64_t j = 0; j < n; j++)
            y[i] += x[i * n + j];
    }
    return 0;
}

TK_OP(rowsum_op, "test::rowsum", "(Tensor x) -> Tensor", .meta = rowsum_meta, .cpu = rowsum_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

/* Any tensor -> a rank-0 i64 holding its element count: the meta function changes the dtype. */
static int numel_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx, (void)in;
    return tk_spec_set(out[0], TK_I64, 0, NULL);
}

static int numel_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    *(int64_t *)tk_tensor_data(out[0]) = tk_numel(in[0]);
    return 0;
}

TK_OP(numel_op, "test::numel", "(Tensor x) -> Tensor", .meta = numel_meta, .cpu = numel_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

/* CUDA only. */
TK_OP(gpu_only_op, "test::gpu_only", "(Tensor x) -> Tensor")
{
    int64_t n = tk_numel(in[0]);
    return tk_wrap(ctx, scale2_kernel, TK_DIM3(tk_cdiv(n, 256)), TK_DIM3(256), in[0], out[0], n);
}

/* An op calling an op through the registry: x * 4 as scale2(scale2(x)). */
static int scale4_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int rc = 0;
    tk_tensor *twice = tk_call(ctx, "test::scale2", in[0]);
    tk_tensor *four = twice ? tk_call(ctx, "test::scale2", twice) : NULL;
    if (!four)
        rc = TK_EINVAL; /* the message is tk_call's */
    else
        rc = tk_tensor_copy(ctx, out[0], four);
    tk_tensor_free(twice);
    tk_tensor_free(four);
    return rc;
}

TK_OP(scale4_op, "test::scale4", "(Tensor x) -> Tensor", .cpu = scale4_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

/* An optional second input: x + y, or x when y is left out. */
static int addopt_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    const float *x = tk_tensor_data(in[0]);
    const float *y = in[1] ? tk_tensor_data(in[1]) : NULL;
    float *o = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++)
        o[i] = x[i] + (y ? y[i] : 0.0f);
    return 0;
}

TK_OP(addopt_op, "test::addopt", "(Tensor x, Tensor? y=None) -> Tensor", .cpu = addopt_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

/* A CPU fallback that fails (after its outputs were allocated), and one that launches a kernel. */
static int fails_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx, (void)in, (void)out;
    return tk_error_set(TK_EINVAL, "test::fails failed on purpose");
}

TK_OP(fails_op, "test::fails", "(Tensor x) -> (Tensor, Tensor)", .cpu = fails_cpu)
{
    (void)in, (void)out;
    return tk_wrap(ctx, test_kernel, TK_DIM3(1), TK_DIM3(1), 0);
}

static int launches_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    return tk_wrap(ctx, scale2_kernel, TK_DIM3(1), TK_DIM3(32), in[0], out[0], tk_numel(in[0]));
}

TK_OP(launches_op, "test::launches", "(Tensor x) -> Tensor", .cpu = launches_cpu)
{
    return launches_cpu(ctx, in, out);
}

/* ---- dtypes and devices ------------------------------------------------------------------ */

static void dtype__sizes_names_and_parse(void **state)
{
    (void)state;
    static const struct {
        tk_dtype d;
        const char *name;
        size_t size;
    } cases[] = {{TK_F32, "f32", 4}, {TK_F16, "f16", 2}, {TK_BF16, "bf16", 2}, {TK_I32, "i32", 4}, {TK_I64, "i64", 8}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tk_dtype d;
        assert_int_equal(tk_dtype_size(cases[i].d), cases[i].size);
        assert_string_equal(tk_dtype_name(cases[i].d), cases[i].name);
        tk_assert_ok(tk_dtype_parse(&d, cases[i].name));
        assert_int_equal(d, cases[i].d);
    }
    tk_dtype d;
    tk_assert_fails(tk_dtype_parse(&d, "float128"), TK_EINVAL, "unknown dtype 'float128'");
    assert_int_equal(tk_dtype_size((tk_dtype)99), 0);
}

static void device__parse_and_name_round_trip(void **state)
{
    (void)state;
    tk_device d;
    char buf[32];
    tk_assert_ok(tk_device_parse(&d, "cpu"));
    assert_int_equal(d.kind, TK_DEVICE_CPU);
    assert_string_equal(tk_device_name(d, buf, sizeof(buf)), "cpu");
    tk_assert_ok(tk_device_parse(&d, "cuda"));
    assert_int_equal(d.kind, TK_DEVICE_CUDA);
    assert_int_equal(d.index, 0);
    assert_string_equal(tk_device_name(d, buf, sizeof(buf)), "cuda:0");
    tk_assert_ok(tk_device_parse(&d, "cuda:13"));
    assert_int_equal(d.kind, TK_DEVICE_CUDA);
    assert_int_equal(d.index, 13);
    assert_string_equal(tk_device_name(d, buf, sizeof(buf)), "cuda:13");
}

static void device__parse_rejects_unknown_with_one_line(void **state)
{
    (void)state;
    static const char *const bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CPU", "", "cuda:99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tk_device d;
        char want[128];
        snprintf(want, sizeof(want), "unknown device '%s' (expected cpu, cuda or cuda:N)", bad[i]);
        tk_assert_fails(tk_device_parse(&d, bad[i]), TK_EINVAL, want);
        assert_string_equal(tk_error_last(), want);
    }
}

/* ---- tensors -------------------------------------------------------------------------------- */

static void tensor__new_has_shape_strides_and_aligned_storage(void **state)
{
    (void)state;
    tk_tensor *t;
    const int64_t shape[] = {2, 3, 4};
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_BF16, 3, shape));
    assert_int_equal(tk_tensor_rank(t), 3);
    assert_int_equal(tk_tensor_dtype(t), TK_BF16);
    assert_int_equal(tk_numel(t), 24);
    assert_int_equal(tk_tensor_nbytes(t), 48);
    assert_int_equal(tk_tensor_dim(t, 0), 2);
    assert_int_equal(tk_tensor_dim(t, 2), 4);
    assert_memory_equal(tk_tensor_shape(t), shape, sizeof(shape));
    assert_int_equal(tk_tensor_device(t).kind, TK_DEVICE_CPU);
    assert_non_null(tk_tensor_data(t));
    assert_int_equal((uintptr_t)tk_tensor_data(t) % 64, 0);
    memset(tk_tensor_data(t), 0xab, tk_tensor_nbytes(t)); /* ASan: the whole range is ours */
    tk_tensor_free(t);
    tk_tensor_free(NULL);

    /* rank 0 is a scalar; a zero dim makes an empty tensor */
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_I64, 0, NULL));
    assert_int_equal(tk_numel(t), 1);
    assert_int_equal(tk_tensor_nbytes(t), 8);
    tk_tensor_free(t);
    const int64_t empty[] = {5, 0, 7};
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 3, empty));
    assert_int_equal(tk_numel(t), 0);
    assert_int_equal(tk_tensor_nbytes(t), 0);
    tk_tensor_free(t);
}

static void tensor__dim_takes_negative_indices_and_rejects_out_of_range(void **state)
{
    (void)state;
    const int64_t shape[] = {2, 3};
    tk_tensor *t = f32_tensor(2, shape, NULL);
    assert_int_equal(tk_tensor_dim(t, -1), 3);
    assert_int_equal(tk_tensor_dim(t, -2), 2);
    assert_int_equal(tk_tensor_dim(t, 2), -1);
    assert_error_contains("dim 2 is out of range for a rank-2 tensor");
    assert_int_equal(tk_tensor_dim(t, -3), -1);
    tk_tensor_free(t);
}

static void tensor__new_rejects_bad_rank_dims_and_dtype(void **state)
{
    (void)state;
    tk_tensor *t = (tk_tensor *)&t; /* must come back NULL */
    int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, TK_F32, 9, shape), TK_EINVAL, "tensor rank 9 is outside [0, 8]");
    assert_null(t);
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, TK_F32, -1, shape), TK_EINVAL, "rank -1");
    const int64_t neg[] = {3, -2};
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, TK_F32, 2, neg), TK_EINVAL, "tensor dim 1 is -2 in shape [3, -2]");
    assert_null(t);
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, (tk_dtype)42, 1, shape), TK_EINVAL, "unknown dtype 42");
    /* eight dims is the limit, not past it */
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 8, shape));
    tk_tensor_free(t);
}

static void tensor__new_rejects_sizes_that_overflow(void **state)
{
    (void)state;
    tk_tensor *t = (tk_tensor *)&t;
    const int64_t huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, TK_F32, 2, huge), TK_EINVAL, "is too large");
    assert_null(t);
    const int64_t bytes[] = {INT64_C(1) << 62}; /* fits as a count, not as f32 bytes */
    tk_assert_fails(tk_tensor_new(&t, NULL, CPU, TK_F32, 1, bytes), TK_EINVAL, "[4611686018427387904] f32 is too large");
    /* a zero anywhere makes it empty, however large the other dims */
    const int64_t zero[] = {INT64_C(1) << 40, INT64_C(1) << 40, 0};
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 3, zero));
    assert_int_equal(tk_tensor_nbytes(t), 0);
    assert_int_equal(tk_numel(t), 0);
    tk_tensor_free(t);
}

static void tensor__cuda_tensor_needs_a_cuda_context(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_tensor *t = (tk_tensor *)&t;
    const int64_t shape[] = {4};
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_assert_fails(tk_tensor_new(&t, ctx, (tk_device){TK_DEVICE_CUDA, 0}, TK_F32, 1, shape), TK_EINVAL,
                    "a tensor on 'cuda:0' needs a context on 'cuda:0', got one on 'cpu'");
    assert_null(t);
    tk_assert_fails(tk_tensor_new(&t, NULL, (tk_device){TK_DEVICE_CUDA, 1}, TK_F32, 1, shape), TK_EINVAL,
                    "needs a context on 'cuda:1', got none");
    tk_ctx_free(ctx);
}

static void tensor__wrap_borrows_memory(void **state)
{
    (void)state;
    float buf[6] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[] = {3, 2};
    tk_tensor *t;
    tk_assert_ok(tk_tensor_wrap(&t, CPU, TK_F32, 2, shape, buf));
    assert_ptr_equal(tk_tensor_data(t), buf);
    assert_int_equal(tk_numel(t), 6);
    tk_tensor_free(t); /* leaves buf alone (ASan would object to freeing a stack array) */
    assert_true(buf[5] == 6.0f);
    tk_assert_fails(tk_tensor_wrap(&t, CPU, TK_F32, 2, shape, NULL), TK_EINVAL, "NULL pointer");
    assert_null(t);
}

static void tensor__copy_between_cpu_tensors_and_refuses_mismatch(void **state)
{
    (void)state;
    const float vals[] = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -1.0f};
    const int64_t s23[] = {2, 3}, s6[] = {6}, s5[] = {5};
    tk_tensor *a = f32_tensor(2, s23, vals), *b = f32_tensor(1, s6, NULL), *c = f32_tensor(1, s5, NULL);
    tk_tensor *h;
    tk_assert_ok(tk_tensor_new(&h, NULL, CPU, TK_F16, 1, s6));
    tk_assert_ok(tk_tensor_copy(NULL, b, a)); /* same element count, other shape: fine */
    assert_memory_equal(tk_tensor_data(b), vals, sizeof(vals));
    tk_assert_fails(tk_tensor_copy(NULL, c, a), TK_EINVAL, "cannot copy a [2, 3] f32 tensor into a [5] f32 one");
    tk_assert_fails(tk_tensor_copy(NULL, h, b), TK_EINVAL, "into a [6] f16 one");

    /* a copy that involves a GPU tensor needs a CUDA context */
    float dummy[6];
    tk_tensor *g;
    tk_assert_ok(tk_tensor_wrap(&g, (tk_device){TK_DEVICE_CUDA, 0}, TK_F32, 1, s6, dummy));
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_assert_fails(tk_tensor_copy(ctx, g, a), TK_EINVAL,
                    "copying a tensor from 'cpu' to 'cuda:0' needs a context on a CUDA device, got one on 'cpu'");
    tk_ctx_free(ctx);
    tk_tensor_free(g);
    tk_tensor_free(a);
    tk_tensor_free(b);
    tk_tensor_free(c);
    tk_tensor_free(h);
}

/* ---- contexts ------------------------------------------------------------------------------- */

static void ctx__cpu_context_basics(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    assert_int_equal(tk_ctx_device(ctx).kind, TK_DEVICE_CPU);
    assert_int_equal(tk_ctx_sm_count(ctx), 1);
    tk_assert_ok(tk_ctx_sync(ctx));
    tk_ctx_free(ctx);
    tk_ctx_free(NULL);
}

/* Without a driver, a CUDA context fails cleanly with "no CUDA driver"; with one, it works. */
static void ctx__cuda_context_without_driver_says_no_cuda_driver(void **state)
{
    (void)state;
    tk_ctx *ctx = (tk_ctx *)&ctx;
    int available = tk_cuda_available();
    if (available != 0) {
        char reason[1024];
        snprintf(reason, sizeof(reason), "%s", tk_error_last());
        assert_int_equal(available, TK_EDEVICE);
        assert_non_null(strstr(reason, "no CUDA"));
        tk_assert_fails(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CUDA, 0}), TK_EDEVICE, reason);
        assert_null(ctx);
        void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!driver) {
            /* "... libcuda.so.1 could not be loaded (<dlerror>)", or built without cuda.h */
            assert_int_equal(strncmp(tk_error_last(), "no CUDA driver: ", 16), 0);
        } else {
            dlclose(driver);
        }
        /* the CPU still works after the refusal */
        tk_assert_ok(tk_ctx_new(&ctx, CPU));
        tk_ctx_free(ctx);
    } else {
        tk_assert_ok(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CUDA, 0}));
        assert_true(tk_ctx_sm_count(ctx) >= 1);
        tk_assert_ok(tk_ctx_sync(ctx));
        tk_ctx_free(ctx);
        tk_assert_fails(tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CUDA, 4096}), TK_EDEVICE,
                        "device 'cuda:4096' does not exist");
        assert_null(ctx);
    }
}

/* ---- the registry ----------------------------------------------------------------------------- */

static void registry__enumerates_the_ops_of_the_executable(void **state)
{
    (void)state;
    static const char *const names[] = {"test::scale2", "test::addmul", "test::rowsum", "test::numel",
                                        "test::gpu_only", "test::scale4", "test::addopt", "test::fails",
                                        "test::launches"};
    size_t n = tk_op_count();
    assert_true(n >= sizeof(names) / sizeof(names[0]));
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int seen = 0;
        for (size_t i = 0; i < n; i++) {
            const tk_op_def *def = tk_op_at(i);
            assert_non_null(def);
            if (strcmp(def->name, names[k]) == 0)
                seen++;
        }
        if (seen != 1)
            fail_msg("op '%s' enumerated %d times", names[k], seen);
    }
    assert_null(tk_op_at(n));

    const tk_op_def *def = tk_op_find("test::addmul");
    assert_non_null(def);
    assert_int_equal(def->version, TK_OP_DEF_VERSION);
    assert_string_equal(def->schema, "(Tensor a, Tensor b) -> (Tensor sum, Tensor prod)");
    assert_ptr_equal(def->body, addmul_op);
    assert_ptr_equal(def->meta, addmul_meta);
    assert_ptr_equal(def->cpu, addmul_cpu);
    assert_non_null(strstr(def->file, "test_runtime.c"));
    assert_true(def->line > 0);
    assert_null(tk_op_find("test::nope"));
    assert_null(tk_op_find(NULL));
}

static void registry__loaded_module_ops_appear_and_disappear_on_unload(void **state)
{
    (void)state;
    void *h;
    size_t before = tk_op_count();
    assert_null(tk_op_find("test_module::neg"));
    tk_assert_ok(tk_ops_load(&h, TK_TEST_OPS_MODULE));
    assert_non_null(h);
    assert_int_equal(tk_op_count(), before + 2); /* test_module::neg and its own test::scale2 */
    const tk_op_def *def = tk_op_find("test_module::neg");
    assert_non_null(def);
    assert_non_null(strstr(def->file, "test_ops_module.c"));

    /* a name defined twice keeps its first definition: the executable's test::scale2 */
    assert_ptr_equal(tk_op_find("test::scale2")->body, scale2_op);

    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float vals[] = {1, -2, 3};
    const int64_t shape[] = {3};
    tk_tensor *x = f32_tensor(1, shape, vals), *y = NULL;
    tk_assert_ok(tk_op_run(ctx, "test_module::neg", &x, 1, &y, 1));
    const float *o = tk_tensor_data(y);
    assert_true(o[0] == -1.0f && o[1] == 2.0f && o[2] == -3.0f);
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_ctx_free(ctx);

    tk_ops_unload(h);
    assert_int_equal(tk_op_count(), before);
    assert_null(tk_op_find("test_module::neg"));
    assert_ptr_equal(tk_op_find("test::scale2")->body, scale2_op);
    tk_ops_unload(NULL);
}

static void registry__load_of_a_missing_object_fails_with_dlerror(void **state)
{
    (void)state;
    void *h = (void *)&h;
    tk_assert_fails(tk_ops_load(&h, "/nonexistent/libnope.so"), TK_EIO,
                    "cannot load ops from '/nonexistent/libnope.so': ");
    assert_null(h);
    assert_null(strchr(tk_error_last(), '\n'));
}

/* ---- dispatch --------------------------------------------------------------------------------- */

static void dispatch__cpu_fallbacks_compute_hand_checked_values(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float a_vals[] = {1.0f, -2.5f, 4.0f, 0.5f}, b_vals[] = {3.0f, 2.0f, -1.0f, 8.0f};
    const int64_t shape[] = {2, 2};
    tk_tensor *in[2] = {f32_tensor(2, shape, a_vals), f32_tensor(2, shape, b_vals)};

    tk_tensor *y = NULL;
    tk_assert_ok(tk_op_run(ctx, "test::scale2", in, 1, &y, 1));
    const float want2[] = {2.0f, -5.0f, 8.0f, 1.0f};
    assert_memory_equal(tk_tensor_data(y), want2, sizeof(want2));
    assert_memory_equal(tk_tensor_shape(y), shape, sizeof(shape)); /* no meta: like in[0] */
    assert_int_equal(tk_tensor_dtype(y), TK_F32);
    tk_tensor_free(y);

    tk_tensor *out[2] = {NULL, NULL};
    tk_assert_ok(tk_op_run(ctx, "test::addmul", in, 2, out, 2));
    const float sum[] = {4.0f, -0.5f, 3.0f, 8.5f}, prod[] = {3.0f, -5.0f, -4.0f, 4.0f};
    assert_memory_equal(tk_tensor_data(out[0]), sum, sizeof(sum));
    assert_memory_equal(tk_tensor_data(out[1]), prod, sizeof(prod));
    tk_tensor_free(out[0]);
    tk_tensor_free(out[1]);
    tk_tensor_free(in[0]);
    tk_tensor_free(in[1]);
    tk_ctx_free(ctx);
}

static void dispatch__outputs_are_allocated_from_the_meta_function(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float vals[] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[] = {2, 3};
    tk_tensor *x = f32_tensor(2, shape, vals), *y = NULL;
    tk_assert_ok(tk_op_run(ctx, "test::rowsum", &x, 1, &y, 1));
    assert_int_equal(tk_tensor_rank(y), 1);
    assert_int_equal(tk_tensor_dim(y, 0), 2);
    assert_int_equal(tk_tensor_dtype(y), TK_F32);
    assert_int_equal(tk_tensor_device(y).kind, TK_DEVICE_CPU);
    const float *r = tk_tensor_data(y);
    assert_true(r[0] == 6.0f && r[1] == 15.0f);
    tk_tensor_free(y);

    y = NULL;
    tk_assert_ok(tk_op_run(ctx, "test::numel", &x, 1, &y, 1));
    assert_int_equal(tk_tensor_rank(y), 0);
    assert_int_equal(tk_tensor_dtype(y), TK_I64);
    assert_int_equal(*(int64_t *)tk_tensor_data(y), 6);
    tk_tensor_free(y);

    /* the meta function's own refusal comes back unchanged */
    const int64_t v3[] = {3};
    tk_tensor *v = f32_tensor(1, v3, vals);
    y = (tk_tensor *)NULL;
    tk_assert_fails(tk_op_run(ctx, "test::rowsum", &v, 1, &y, 1), TK_EINVAL, "test::rowsum takes a matrix");
    assert_null(y);
    tk_tensor_free(v);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void dispatch__caller_outputs_are_used_and_checked_against_meta(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float vals[] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[] = {2, 3}, two[] = {2}, three[] = {3};
    tk_tensor *x = f32_tensor(2, shape, vals), *y = f32_tensor(1, two, NULL), *bad = f32_tensor(1, three, NULL);
    tk_tensor *slot = y;
    tk_assert_ok(tk_op_run(ctx, "test::rowsum", &x, 1, &slot, 1));
    assert_ptr_equal(slot, y);
    assert_true(((float *)tk_tensor_data(y))[1] == 15.0f);
    slot = bad;
    tk_assert_fails(tk_op_run(ctx, "test::rowsum", &x, 1, &slot, 1), TK_EINVAL,
                    "output out[0] of op 'test::rowsum' is [3] f32, the op's meta function says [2] f32");
    assert_ptr_equal(slot, bad); /* the caller's tensor is left alone */
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(bad);
    tk_ctx_free(ctx);
}

static void dispatch__refuses_input_and_output_counts_that_differ_from_the_schema(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t shape[] = {2};
    tk_tensor *x = f32_tensor(1, shape, NULL);
    tk_tensor *in[3] = {x, x, x};
    tk_tensor *out[2] = {NULL, NULL};
    tk_assert_fails(tk_op_run(ctx, "test::addmul", in, 1, out, 2), TK_EINVAL, "op 'test::addmul' takes 2 arguments, got 1");
    assert_string_equal(tk_error_last(), "op 'test::addmul' takes 2 arguments, got 1");
    tk_assert_fails(tk_op_run(ctx, "test::scale2", in, 2, out, 1), TK_EINVAL, "op 'test::scale2' takes 1 argument, got 2");
    tk_assert_fails(tk_op_run(ctx, "test::addmul", in, 2, out, 1), TK_EINVAL,
                    "op 'test::addmul' returns 2 outputs, got 1 output slot");
    tk_assert_fails(tk_op_run(ctx, "test::addopt", in, 3, out, 1), TK_EINVAL,
                    "op 'test::addopt' takes 1 to 2 arguments, got 3");
    assert_null(out[0]);
    assert_null(out[1]);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void dispatch__unknown_op_is_not_found(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_tensor *out = NULL;
    tk_assert_fails(tk_op_run(ctx, "test::missing", NULL, 0, &out, 1), TK_ENOTFOUND,
                    "op 'test::missing' is not registered");
    assert_null(tk_call(ctx, "test::missing", NULL));
    /* tk_call adds the caller's line */
    char want[256];
    snprintf(want, sizeof want, "op 'test::missing' is not registered (at %s:%d)", __FILE__, __LINE__ - 3);
    assert_string_equal(tk_error_last(), want);
    tk_ctx_free(ctx);
}

static void dispatch__optional_inputs_reach_the_op_as_null(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float xv[] = {1, 2, 3}, yv[] = {10, 20, 30};
    const int64_t shape[] = {3};
    tk_tensor *in[2] = {f32_tensor(1, shape, xv), f32_tensor(1, shape, yv)};
    tk_tensor *o = NULL;
    tk_assert_ok(tk_op_run(ctx, "test::addopt", in, 1, &o, 1));
    assert_memory_equal(tk_tensor_data(o), xv, sizeof(xv));
    tk_tensor_free(o);
    o = NULL;
    tk_assert_ok(tk_op_run(ctx, "test::addopt", in, 2, &o, 1));
    const float want[] = {11, 22, 33};
    assert_memory_equal(tk_tensor_data(o), want, sizeof(want));
    tk_tensor_free(o);
    tk_tensor_free(in[0]);
    tk_tensor_free(in[1]);
    tk_ctx_free(ctx);
}

static void dispatch__op_without_cpu_fallback_fails_on_the_cpu(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t shape[] = {4};
    tk_tensor *x = f32_tensor(1, shape, NULL), *y = NULL;
    tk_assert_fails(tk_op_run(ctx, "test::gpu_only", &x, 1, &y, 1), TK_EUNSUPPORTED,
                    "op 'test::gpu_only' has no CPU implementation (device 'cpu')");
    assert_string_equal(tk_error_last(), "op 'test::gpu_only' has no CPU implementation (device 'cpu')");
    assert_null(y);
    assert_null(tk_call(ctx, "test::gpu_only", x));
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void dispatch__failing_op_frees_the_outputs_it_allocated(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t shape[] = {4};
    tk_tensor *x = f32_tensor(1, shape, NULL), *mine = f32_tensor(1, shape, NULL);
    tk_tensor *out[2] = {mine, NULL};
    tk_assert_fails(tk_op_run(ctx, "test::fails", &x, 1, out, 2), TK_EINVAL, "test::fails failed on purpose");
    assert_ptr_equal(out[0], mine); /* the caller's */
    assert_null(out[1]);            /* allocated by tk_op_run, freed again (LeakSanitizer checks) */
    tk_tensor_free(mine);
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void dispatch__inputs_must_be_on_the_context_device(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t shape[] = {4};
    float host[4];
    tk_tensor *g, *y = NULL;
    tk_assert_ok(tk_tensor_wrap(&g, (tk_device){TK_DEVICE_CUDA, 0}, TK_F32, 1, shape, host));
    tk_assert_fails(tk_op_run(ctx, "test::scale2", &g, 1, &y, 1), TK_EINVAL,
                    "input 'x' (in[0]) of op 'test::scale2' is on 'cuda:0', the context is on 'cpu'");
    assert_null(y);
    tk_tensor_free(g);
    tk_ctx_free(ctx);
}

static void dispatch__op_calls_op_through_tk_call(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const float vals[] = {1.0f, -0.25f, 3.0f};
    const int64_t shape[] = {3};
    tk_tensor *x = f32_tensor(1, shape, vals);
    tk_tensor *y = tk_call(ctx, "test::scale4", x);
    if (!y)
        fail_msg("tk_call failed: %s", tk_error_last());
    const float want[] = {4.0f, -1.0f, 12.0f};
    assert_memory_equal(tk_tensor_data(y), want, sizeof(want));
    tk_tensor_free(y);

    /* tk_call is for ops with one output */
    assert_null(tk_call(ctx, "test::addmul", x, x));
    assert_error_contains("op 'test::addmul' returns 2 outputs; tk_call takes ops with one");
    tk_tensor_free(x);
    tk_ctx_free(ctx);
}

static void dispatch__meta_setters_validate(void **state)
{
    (void)state;
    tk_tensor_spec *spec = NULL; /* opaque: only the runtime makes them; NULL is refused */
    const int64_t shape[] = {2, -1};
    tk_assert_fails(tk_spec_set(spec, TK_F32, 1, shape), TK_EINVAL, "no spec");
    tk_assert_fails(tk_spec_like(spec, NULL), TK_EINVAL, "no tensor");
}

/* ---- tk_wrap on the CPU --------------------------------------------------------------------- */

static void wrap__launch_on_a_cpu_context_is_refused(void **state)
{
    (void)state;
    tk_ctx *ctx;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    const int64_t shape[] = {4};
    tk_tensor *x = f32_tensor(1, shape, NULL), *y = f32_tensor(1, shape, NULL);
    tk_assert_fails(tk_wrap(ctx, scale2_kernel, TK_DIM3(1), TK_DIM3(32), x, y, tk_numel(x)), TK_EUNSUPPORTED,
                    "kernel 'scale2_kernel' launched on device 'cpu': ");
    /* the same refusal reaches the caller of an op whose CPU fallback launches */
    tk_tensor *slot = NULL;
    tk_assert_fails(tk_op_run(ctx, "test::launches", &x, 1, &slot, 1), TK_EUNSUPPORTED,
                    "kernel 'scale2_kernel' launched on device 'cpu'");
    assert_null(slot);
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtype__sizes_names_and_parse),
        cmocka_unit_test(device__parse_and_name_round_trip),
        cmocka_unit_test(device__parse_rejects_unknown_with_one_line),
        cmocka_unit_test(tensor__new_has_shape_strides_and_aligned_storage),
        cmocka_unit_test(tensor__dim_takes_negative_indices_and_rejects_out_of_range),
        cmocka_unit_test(tensor__new_rejects_bad_rank_dims_and_dtype),
        cmocka_unit_test(tensor__new_rejects_sizes_that_overflow),
        cmocka_unit_test(tensor__cuda_tensor_needs_a_cuda_context),
        cmocka_unit_test(tensor__wrap_borrows_memory),
        cmocka_unit_test(tensor__copy_between_cpu_tensors_and_refuses_mismatch),
        cmocka_unit_test(ctx__cpu_context_basics),
        cmocka_unit_test(ctx__cuda_context_without_driver_says_no_cuda_driver),
        cmocka_unit_test(registry__enumerates_the_ops_of_the_executable),
        cmocka_unit_test(registry__loaded_module_ops_appear_and_disappear_on_unload),
        cmocka_unit_test(registry__load_of_a_missing_object_fails_with_dlerror),
        cmocka_unit_test(dispatch__cpu_fallbacks_compute_hand_checked_values),
        cmocka_unit_test(dispatch__outputs_are_allocated_from_the_meta_function),
        cmocka_unit_test(dispatch__caller_outputs_are_used_and_checked_against_meta),
        cmocka_unit_test(dispatch__refuses_input_and_output_counts_that_differ_from_the_schema),
        cmocka_unit_test(dispatch__unknown_op_is_not_found),
        cmocka_unit_test(dispatch__optional_inputs_reach_the_op_as_null),
        cmocka_unit_test(dispatch__op_without_cpu_fallback_fails_on_the_cpu),
        cmocka_unit_test(dispatch__failing_op_frees_the_outputs_it_allocated),
        cmocka_unit_test(dispatch__inputs_must_be_on_the_context_device),
        cmocka_unit_test(dispatch__op_calls_op_through_tk_call),
        cmocka_unit_test(dispatch__meta_setters_validate),
        cmocka_unit_test(wrap__launch_on_a_cpu_context_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
