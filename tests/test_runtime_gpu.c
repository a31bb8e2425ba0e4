/* Tests of libtkrt on a GPU (CTest label `gpu`): copies between host and device, launches of the
 * kernels of tests/kernels/test_kernels.cu (embedded by tk_add_kernels), tk_wrap's argument checks,
 * eager dispatch to an op's CUDA body, and cuBLASLt loading. Exits 77 (skipped) without a driver. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tk/op.h>
#include <tk/runtime.h>

#ifdef TK_HAVE_CUDA_HEADERS
#include "cublaslt.h"
#endif
#include "rt_internal.h" /* graphs and their end-of-graph signal */

static const tk_device CPU = {TK_DEVICE_CPU, 0};
static const tk_device GPU = {TK_DEVICE_CUDA, 0};

TK_KERNEL_DECL(test_fill_f32);
TK_KERNEL_DECL(test_axpy_f32);
TK_KERNEL_DECL(test_echo_scalars);
TK_KERNEL_DECL(test_shared_reverse_f32);
TK_KERNEL_DECL(test_late_fill_f32);
TK_KERNEL_DECL(no_such_kernel);

enum { BLOCK = 256 };

/* out = a * x + y with a = 2: the CUDA body copies y and launches axpy; the CPU fallback loops. */
static int axpy2_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    const float *x = tk_tensor_data(in[0]), *y = tk_tensor_data(in[1]);
    float *o = tk_tensor_data(out[0]);
    for (int64_t i = 0; i < tk_numel(in[0]); i++)
        o[i] = 2.0f * x[i] + y[i];
    return 0;
}

TK_OP(axpy2_op, "gpu_test::axpy2", "(Tensor x, Tensor y) -> Tensor", .cpu = axpy2_cpu)
{
    long long n = tk_numel(in[0]);
    int rc = tk_tensor_copy(ctx, out[0], in[1]);
    if (rc)
        return rc;
    return tk_wrap(ctx, test_axpy_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), 2.0f, in[0], out[0], n);
}

/* Fresh values in [-1, 1), never all zeros. */
static void fill_random(float *p, int64_t n, unsigned seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffffff) / (float)(1 << 23) - 1.0f;
    }
}

static tk_tensor *cpu_f32(int64_t n)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 1, &n));
    return t;
}

static tk_tensor *gpu_f32(tk_ctx *ctx, int64_t n)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, ctx, GPU, TK_F32, 1, &n));
    return t;
}

static void assert_close(const float *got, const float *want, int64_t n, float rtol)
{
    for (int64_t i = 0; i < n; i++) {
        float tol = rtol * fmaxf(1.0f, fabsf(want[i]));
        if (!(fabsf(got[i] - want[i]) <= tol))
            fail_msg("element %lld is %.9g, expected %.9g", (long long)i, got[i], want[i]);
    }
}

static int setup_ctx(void **state)
{
    tk_ctx *ctx;
    if (tk_ctx_new(&ctx, GPU) != 0) {
        print_error("tk_ctx_new(cuda:0): %s\n", tk_error_last());
        return -1;
    }
    *state = ctx;
    return 0;
}

static int teardown_ctx(void **state)
{
    tk_ctx_free(*state);
    return 0;
}

static void gpu__tensor_round_trip_host_device_host(void **state)
{
    tk_ctx *ctx = *state;
    const int64_t n = 1000003; /* not a multiple of any vector width */
    tk_tensor *h = cpu_f32(n), *back = cpu_f32(n), *d = gpu_f32(ctx, n), *d2 = gpu_f32(ctx, n);
    fill_random(tk_tensor_data(h), n, 1);
    memset(tk_tensor_data(back), 0xff, tk_tensor_nbytes(back)); /* poisoned: NaNs */
    assert_int_equal(tk_tensor_device(d).kind, TK_DEVICE_CUDA);
    assert_int_equal((uintptr_t)tk_tensor_data(d) % 256, 0);
    tk_assert_ok(tk_tensor_copy(ctx, d, h));
    tk_assert_ok(tk_tensor_copy(ctx, d2, d));
    tk_assert_ok(tk_tensor_copy(ctx, back, d2));
    assert_memory_equal(tk_tensor_data(back), tk_tensor_data(h), tk_tensor_nbytes(h));
    tk_tensor_free(h);
    tk_tensor_free(back);
    tk_tensor_free(d);
    tk_tensor_free(d2);
}

static void gpu__fill_and_axpy_kernels_launch_on_the_context_stream(void **state)
{
    tk_ctx *ctx = *state;
    const long long n = 100001;
    tk_tensor *x = gpu_f32(ctx, n), *y = gpu_f32(ctx, n), *hx = cpu_f32(n), *hy = cpu_f32(n);
    fill_random(tk_tensor_data(hx), n, 2);
    tk_assert_ok(tk_tensor_copy(ctx, x, hx));
    tk_assert_ok(tk_wrap(ctx, test_fill_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), y, 3.5f, n));
    tk_assert_ok(tk_wrap(ctx, test_axpy_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), -0.75f, x, y, n));
    tk_assert_ok(tk_tensor_copy(ctx, hy, y));
    float *want = malloc(sizeof(float) * (size_t)n);
    const float *xs = tk_tensor_data(hx);
    for (long long i = 0; i < n; i++)
        want[i] = -0.75f * xs[i] + 3.5f;
    assert_close(tk_tensor_data(hy), want, n, 1e-6f);
    free(want);
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(hx);
    tk_tensor_free(hy);
}

static void gpu__scalars_reach_the_kernel_in_their_c_types(void **state)
{
    tk_ctx *ctx = *state;
    tk_tensor *d, *h;
    const int64_t six = 6;
    tk_assert_ok(tk_tensor_new(&d, ctx, GPU, TK_I64, 1, &six));
    tk_assert_ok(tk_tensor_new(&h, NULL, CPU, TK_I64, 1, &six));
    tk_assert_ok(tk_wrap(ctx, test_echo_scalars, TK_DIM3(1), TK_DIM3(32), d, (signed char)-3, (short)-300,
                         (unsigned char)200, 123456, 1ull << 40, 2.5));
    tk_assert_ok(tk_tensor_copy(ctx, h, d));
    const long long want[] = {-3, -300, 200, 123456, 1ll << 40, 10};
    assert_memory_equal(tk_tensor_data(h), want, sizeof(want));
    tk_tensor_free(d);
    tk_tensor_free(h);
}

/* cuFuncGetParamInfo (CUDA 12.4 drivers) is what lets tk_wrap check sizes. */
static int driver_reports_params(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int has = lib && dlsym(lib, "cuFuncGetParamInfo") != NULL;
    if (lib)
        dlclose(lib);
    return has;
}

static void gpu__argument_mismatches_are_refused_naming_the_parameter(void **state)
{
    tk_ctx *ctx = *state;
    const long long n = 64;
    tk_tensor *y = gpu_f32(ctx, n);
    if (!driver_reports_params()) {
        print_message("driver without cuFuncGetParamInfo: size checks not exercised\n");
        tk_tensor_free(y);
        skip();
    }
    tk_assert_fails(tk_wrap(ctx, test_fill_f32, TK_DIM3(1), TK_DIM3(64), y, 1.0f, (int)n), TK_EINVAL,
                    "kernel 'test_fill_f32' parameter 3 takes 8 bytes, tk_wrap passed a 4-byte integer");
    tk_assert_fails(tk_wrap(ctx, test_fill_f32, TK_DIM3(1), TK_DIM3(64), y, 1.0, n), TK_EINVAL,
                    "kernel 'test_fill_f32' parameter 2 takes 4 bytes, tk_wrap passed a double");
    tk_assert_fails(tk_wrap(ctx, test_fill_f32, TK_DIM3(1), TK_DIM3(64), y, 1.0f), TK_EINVAL,
                    "kernel 'test_fill_f32' takes 3 parameters, tk_wrap passed 2");
    tk_tensor_free(y);
}

/* tk_wrap_shared: 100 KiB of dynamic shared memory (past the 48 KiB every block has, so the
 * runtime must opt the kernel in, or the launch fails), then more than any GPU gives a block. */
static void gpu__dynamic_shared_memory_past_48_kib_is_opted_in_and_too_much_is_refused(void **state)
{
    tk_ctx *ctx = *state;
    const int n = 25600; /* 100 KiB of floats */
    tk_tensor *x = gpu_f32(ctx, n), *y = gpu_f32(ctx, n), *hx = cpu_f32(n), *hy = cpu_f32(n);
    fill_random(tk_tensor_data(hx), n, 7);
    tk_assert_ok(tk_tensor_copy(ctx, x, hx));
    tk_assert_ok(tk_wrap_shared(ctx, test_shared_reverse_f32, TK_DIM3(1), TK_DIM3(1024), (size_t)n * 4, x, y, n));
    tk_assert_ok(tk_tensor_copy(ctx, hy, y));
    const float *xs = tk_tensor_data(hx), *ys = tk_tensor_data(hy);
    for (int i = 0; i < n; i++)
        if (ys[i] != xs[n - 1 - i])
            fail_msg("y[%d] = %g, expected x[%d] = %g", i, ys[i], n - 1 - i, xs[n - 1 - i]);
    tk_assert_fails(tk_wrap_shared(ctx, test_shared_reverse_f32, TK_DIM3(1), TK_DIM3(1024), (size_t)1 << 20, x, y, n),
                    TK_EINVAL, "kernel 'test_shared_reverse_f32' asks for 1048576 bytes of dynamic shared memory; "
                    "cuda:0 gives a block at most ");
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(hx);
    tk_tensor_free(hy);
}

static void gpu__tensor_on_another_device_is_refused(void **state)
{
    tk_ctx *ctx = *state;
    const long long n = 64;
    tk_tensor *h = cpu_f32(n);
    tk_assert_fails(tk_wrap(ctx, test_fill_f32, TK_DIM3(1), TK_DIM3(64), h, 1.0f, n), TK_EINVAL,
                    "argument 1 of kernel 'test_fill_f32' is a tensor on cpu, expected cuda:0");
    tk_tensor_free(h);
}

static void gpu__unknown_kernel_is_not_found(void **state)
{
    tk_ctx *ctx = *state;
    tk_assert_fails(tk_wrap(ctx, no_such_kernel, TK_DIM3(1), TK_DIM3(1), 0), TK_ENOTFOUND,
                    "kernel 'no_such_kernel' is not in any loaded fatbin (built with tk_add_kernels?)");
}

static void gpu__empty_grid_launches_nothing(void **state)
{
    tk_ctx *ctx = *state;
    tk_assert_ok(tk_wrap(ctx, test_fill_f32, TK_DIM3(0), TK_DIM3(BLOCK), (float *)NULL, 1.0f, 0ll));
    tk_assert_ok(tk_ctx_sync(ctx));
}

static void gpu__op_runs_its_cuda_body_on_the_gpu_and_its_fallback_on_the_cpu(void **state)
{
    tk_ctx *ctx = *state, *cpu;
    const int64_t n = 4099;
    tk_tensor *hx = cpu_f32(n), *hy = cpu_f32(n), *gx = gpu_f32(ctx, n), *gy = gpu_f32(ctx, n), *back = cpu_f32(n);
    fill_random(tk_tensor_data(hx), n, 3);
    fill_random(tk_tensor_data(hy), n, 4);
    tk_assert_ok(tk_tensor_copy(ctx, gx, hx));
    tk_assert_ok(tk_tensor_copy(ctx, gy, hy));

    tk_tensor *gin[2] = {gx, gy}, *gout = NULL;
    tk_assert_ok(tk_op_run(ctx, "gpu_test::axpy2", gin, 2, &gout, 1));
    assert_int_equal(tk_tensor_device(gout).kind, TK_DEVICE_CUDA); /* allocated on ctx's device */
    tk_assert_ok(tk_tensor_copy(ctx, back, gout));

    tk_assert_ok(tk_ctx_new(&cpu, CPU));
    tk_tensor *hout = tk_call(cpu, "gpu_test::axpy2", hx, hy);
    if (!hout)
        fail_msg("tk_call on the CPU: %s", tk_error_last());
    assert_close(tk_tensor_data(back), tk_tensor_data(hout), n, 1e-6f);
    tk_tensor_free(hout);
    tk_ctx_free(cpu);
    tk_tensor_free(gout);
    tk_tensor_free(hx);
    tk_tensor_free(hy);
    tk_tensor_free(gx);
    tk_tensor_free(gy);
    tk_tensor_free(back);
}

static void gpu__contexts_of_one_device_share_its_kernels_and_memory(void **state)
{
    tk_ctx *a = *state, *b;
    tk_assert_ok(tk_ctx_new(&b, GPU));
    assert_true(tk_ctx_sm_count(b) > 1);
    const long long n = 1000;
    tk_tensor *y = gpu_f32(a, n), *h = cpu_f32(n);
    tk_assert_ok(tk_wrap(b, test_fill_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), y, -2.0f, n));
    tk_assert_ok(tk_ctx_sync(b));
    tk_assert_ok(tk_tensor_copy(a, h, y));
    for (long long i = 0; i < n; i++)
        assert_true(((float *)tk_tensor_data(h))[i] == -2.0f);
    tk_tensor_free(y);
    tk_tensor_free(h);
    tk_ctx_free(b);
}

/* One handle and plan cache per device, shared by its contexts; each context its own workspace
 * and descriptors. */
static void gpu__cublaslt_loads_and_makes_one_handle_per_device(void **state)
{
#ifdef TK_HAVE_CUDA_HEADERS
    tk_ctx *ctx = *state, *other;
    tk_cublaslt_ref a, b, c;
    tk_assert_ok(tk_cublaslt_get(ctx, &a));
    assert_non_null(a.api);
    assert_non_null(a.handle);
    assert_non_null(a.api->Matmul);
    assert_non_null(a.plans);
    assert_non_null(a.local);
    tk_assert_ok(tk_cublaslt_get(ctx, &b));
    assert_ptr_equal(a.handle, b.handle);
    assert_ptr_equal(a.local, b.local);
    tk_assert_ok(tk_ctx_new(&other, GPU));
    tk_assert_ok(tk_cublaslt_get(other, &c));
    assert_ptr_equal(a.handle, c.handle);
    assert_ptr_equal(a.plans, c.plans);
    assert_ptr_not_equal(a.local, c.local);
    assert_true(a.local->workspace_size == c.local->workspace_size);
    tk_ctx_free(other);
#else
    (void)state;
    skip();
#endif
}

/* Once tk_ctx_sync has seen a replay's end-of-graph signal, the graph's kernels are done: a copy on
 * another context's stream (not ordered after the graph) reads what the last kernel wrote. That
 * kernel spins 200 us before it writes and, on sm_90, lets a programmatic dependent launch at its
 * start (the signal, where it is one: runtime/cuda.c): a signal that did not wait for the kernel's
 * end would let the copy read the zeros written before each replay. */
static void gpu__a_replay_s_signal_comes_after_its_last_kernel_ended(void **state)
{
    tk_ctx *ctx = *state, *other;
    if (!tk_cuda_graphs_available())
        skip();
    const long long n = 8192;
    tk_tensor *y = gpu_f32(ctx, n), *hy = cpu_f32(n);
    void *g = NULL;
    tk_assert_ok(tk_ctx_new(&other, GPU));
    tk_assert_ok(tk_cuda_capture_begin(ctx, ctx));
    tk_assert_ok(tk_wrap(ctx, test_late_fill_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), y, 7.0f,
                         n, 200000ull));
    tk_assert_ok(tk_cuda_capture_end(ctx, 1, &g));
    unsigned launched, seen;
    for (int i = 0; i < 8; i++) {
        tk_assert_ok(tk_wrap(ctx, test_fill_f32, TK_DIM3(tk_cdiv(n, BLOCK)), TK_DIM3(BLOCK), y, 0.0f, n));
        tk_assert_ok(tk_cuda_graph_launch(ctx, g));
        tk_assert_ok(tk_ctx_sync(ctx));
        tk_assert_ok(tk_tensor_copy(other, hy, y));
        const float *h = tk_tensor_data(hy);
        for (long long k = 0; k < n; k++)
            if (h[k] != 7.0f)
                fail_msg("replay %d: element %lld is %g after the wait, expected 7 (the last kernel's)", i, k, h[k]);
    }
    /* the wait was the signal's (not the stream's) unless TK_GRAPH_SIGNAL=0 */
    assert_int_equal(tk_cuda_signal_state(ctx, &launched, &seen) == -1, !tk_env_on("TK_GRAPH_SIGNAL"));
    tk_cuda_graph_free(ctx, g);
    tk_ctx_free(other);
    tk_tensor_free(y);
    tk_tensor_free(hy);
}

int main(void)
{
    if (tk_cuda_available() != 0) {
        fprintf(stderr, "skipped: %s\n", tk_error_last());
        return 77;
    }
#ifndef TK_TEST_HAVE_KERNELS
    fprintf(stderr, "skipped: built without nvcc (TK_WITH_CUDA=OFF), so without test kernels\n");
    return 77;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gpu__tensor_round_trip_host_device_host, setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__fill_and_axpy_kernels_launch_on_the_context_stream, setup_ctx,
                                        teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__scalars_reach_the_kernel_in_their_c_types, setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__argument_mismatches_are_refused_naming_the_parameter, setup_ctx,
                                        teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__dynamic_shared_memory_past_48_kib_is_opted_in_and_too_much_is_refused,
                                        setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__tensor_on_another_device_is_refused, setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__unknown_kernel_is_not_found, setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__empty_grid_launches_nothing, setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__op_runs_its_cuda_body_on_the_gpu_and_its_fallback_on_the_cpu,
                                        setup_ctx, teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__contexts_of_one_device_share_its_kernels_and_memory, setup_ctx,
                                        teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__cublaslt_loads_and_makes_one_handle_per_device, setup_ctx,
                                        teardown_ctx),
        cmocka_unit_test_setup_teardown(gpu__a_replay_s_signal_comes_after_its_last_kernel_ended, setup_ctx,
                                        teardown_ctx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
