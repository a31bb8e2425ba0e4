/* libtkrt's public surface, through libtkrt.so and include/tk only (no runtime/ header is on this
 * suite's include path): tk_error_last_code beside the message, the log callback (tk/log.h) and
 * its default, and safetensors files through tk/safetensors.h. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/log.h>
#include <tk/program.h>
#include <tk/runtime.h>
#include <tk/safetensors.h>
#include <unistd.h>

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* --- tk_error_last_code ------------------------------------------------------------------- */

static void error__code_beside_the_message_of_a_null_return(void **state)
{
    (void)state;
    tk_ctx *ctx = NULL;
    tk_assert_ok(tk_ctx_new(&ctx, CPU));
    tk_error_clear();
    assert_int_equal(tk_error_last_code(), 0);
    assert_string_equal(tk_error_last(), "");

    /* a function returning a tensor: NULL, and the code of why */
    assert_null(tk_call_op(ctx, "abi::no_such_op", 0, NULL));
    assert_int_equal(tk_error_last_code(), TK_ENOTFOUND);
    assert_non_null(strstr(tk_error_last(), "'abi::no_such_op' is not registered"));

    /* a call that succeeds leaves both as they were */
    tk_device dev;
    tk_assert_ok(tk_device_parse(&dev, "cpu"));
    assert_int_equal(tk_error_last_code(), TK_ENOTFOUND);
    assert_non_null(strstr(tk_error_last(), "abi::no_such_op"));

    assert_int_equal(tk_device_parse(&dev, "tpu"), TK_EINVAL);
    assert_int_equal(tk_error_last_code(), TK_EINVAL);
    tk_error_clear();
    assert_int_equal(tk_error_last_code(), 0);
    assert_string_equal(tk_error_last(), "");
    tk_ctx_free(ctx);
}

static void *fail_on_thread(void *arg)
{
    (void)arg;
    tk_device dev;
    if (tk_device_parse(&dev, "tpu") != TK_EINVAL || tk_error_last_code() != TK_EINVAL)
        return (void *)1;
    return NULL;
}

static void error__code_is_per_thread(void **state)
{
    (void)state;
    tk_error_set(TK_EIO, "abi: the main thread's error");
    pthread_t t;
    void *ret = (void *)1;
    assert_int_equal(pthread_create(&t, NULL, fail_on_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_null(ret);
    assert_int_equal(tk_error_last_code(), TK_EIO);
    assert_string_equal(tk_error_last(), "abi: the main thread's error");
}

/* --- the log callback --------------------------------------------------------------------- */

/* A program named twice: registering the second makes the runtime warn through the log (a
 * constructor has no caller to return an error to). */
static tk_program_node first_def = {{TK_PROGRAM_DEF_VERSION, "abi::twice", NULL, "first.c", 1, 0, {{0}}}, NULL};

static void warn_twice(tk_program_node *second)
{
    tk_program_register(second);
    tk_program_unregister(second);
}

typedef struct captured {
    int calls;
    tk_log_level level;
    char msg[512];
} captured;

static void capture(tk_log_level level, const char *msg, void *user)
{
    captured *c = user;
    c->calls++;
    c->level = level;
    snprintf(c->msg, sizeof c->msg, "%s", msg);
}

static void log__callback_gets_the_runtime_warnings(void **state)
{
    (void)state;
    captured c = {0};
    tk_program_node second = {{TK_PROGRAM_DEF_VERSION, "abi::twice", NULL, "second.c", 2, 0, {{0}}}, NULL};
    tk_program_register(&first_def);
    tk_log_set(capture, &c);
    warn_twice(&second);
    tk_log_set(NULL, NULL);
    tk_program_unregister(&first_def);

    assert_int_equal(c.calls, 1);
    assert_int_equal(c.level, TK_LOG_WARN);
    /* one line, without the default's prefix and newline */
    assert_string_equal(c.msg, "program 'abi::twice' is defined twice (first.c:1 and second.c:2); the first "
                               "definition is used");
}

static void log__default_writes_one_line_to_stderr(void **state)
{
    (void)state;
    char path[] = TK_TEST_TMPDIR "/abi_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    tk_program_node second = {{TK_PROGRAM_DEF_VERSION, "abi::twice", NULL, "second.c", 2, 0, {{0}}}, NULL};
    tk_program_register(&first_def);

    /* a callback, then back to the default: stderr again */
    captured c = {0};
    tk_log_set(capture, &c);
    tk_log_set(NULL, NULL);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    warn_twice(&second);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    tk_program_unregister(&first_def);

    char text[1024] = "";
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    assert_int_equal(c.calls, 0);
    assert_string_equal(text, "tkexport: program 'abi::twice' is defined twice (first.c:1 and second.c:2); the "
                              "first definition is used\n");
}

enum { LOG_THREADS = 4, LOG_ROUNDS = 200 };
static atomic_int calls_a, calls_b;

static void count_a(tk_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg;
    if (user == &calls_a)
        atomic_fetch_add(&calls_a, 1);
}

static void count_b(tk_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg;
    if (user == &calls_b)
        atomic_fetch_add(&calls_b, 1);
}

static void *warn_rounds(void *arg)
{
    tk_program_node *second = arg;
    for (int i = 0; i < LOG_ROUNDS; i++)
        warn_twice(second);
    return NULL;
}

static void log__set_while_other_threads_log(void **state)
{
    (void)state;
    tk_program_node seconds[LOG_THREADS];
    pthread_t threads[LOG_THREADS];
    atomic_store(&calls_a, 0);
    atomic_store(&calls_b, 0);
    tk_program_register(&first_def);
    tk_log_set(count_a, &calls_a);
    for (int i = 0; i < LOG_THREADS; i++) {
        seconds[i] = (tk_program_node){{TK_PROGRAM_DEF_VERSION, "abi::twice", NULL, "second.c", 2, 0, {{0}}}, NULL};
        assert_int_equal(pthread_create(&threads[i], NULL, warn_rounds, &seconds[i]), 0);
    }
    /* every message reaches one of the two, with the user pointer that was set with it */
    for (int i = 0; i < 2000; i++) {
        if (i % 2)
            tk_log_set(count_a, &calls_a);
        else
            tk_log_set(count_b, &calls_b);
    }
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_join(threads[i], NULL);
    tk_log_set(NULL, NULL);
    tk_program_unregister(&first_def);
    assert_int_equal(atomic_load(&calls_a) + atomic_load(&calls_b), LOG_THREADS * LOG_ROUNDS);
}

/* --- tk/safetensors.h --------------------------------------------------------------------- */

static void safetensors__write_open_find_load(void **state)
{
    (void)state;
    const char *path = TK_TEST_TMPDIR "/abi_public.safetensors";
    const int64_t s23[] = {2, 3}, s5[] = {5};
    tk_tensor *w = NULL, *b = NULL, *got = NULL;
    tk_assert_ok(tk_tensor_new(&w, NULL, CPU, TK_F32, 2, s23));
    tk_assert_ok(tk_tensor_new(&b, NULL, CPU, TK_I32, 1, s5));
    for (int i = 0; i < 6; i++)
        ((float *)tk_tensor_data(w))[i] = 0.5f * (float)i - 1.0f;
    for (int i = 0; i < 5; i++)
        ((int32_t *)tk_tensor_data(b))[i] = 7 * i - 3;
    const char *names[] = {"layer.weight", "layer.bias"};
    tk_tensor *tensors[] = {w, b};
    tk_assert_ok(tk_safetensors_write(path, 2, names, tensors));

    tk_safetensors *st = NULL;
    tk_assert_ok(tk_safetensors_open(&st, path));
    assert_string_equal(tk_safetensors_name(st), path);
    assert_int_equal(tk_safetensors_count(st), 2);
    /* sorted by name */
    assert_string_equal(tk_safetensors_entry_name(tk_safetensors_at(st, 0)), "layer.bias");
    assert_string_equal(tk_safetensors_entry_name(tk_safetensors_at(st, 1)), "layer.weight");
    assert_null(tk_safetensors_at(st, 2));
    assert_null(tk_safetensors_metadata(st, "format"));

    const tk_safetensors_entry *e = tk_safetensors_find(st, "layer.weight");
    assert_non_null(e);
    tk_dtype dtype = TK_I64;
    int rank = 0;
    int64_t shape[TK_MAX_DIMS] = {0};
    tk_assert_ok(tk_safetensors_entry_info(e, &dtype, &rank, shape));
    assert_int_equal(dtype, TK_F32);
    assert_int_equal(rank, 2);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 3);
    tk_assert_ok(tk_safetensors_entry_info(e, NULL, NULL, NULL));
    tk_assert_ok(tk_safetensors_load(&got, NULL, CPU, st, e));
    assert_int_equal(tk_tensor_dtype(got), TK_F32);
    assert_memory_equal(tk_tensor_data(got), tk_tensor_data(w), 6 * sizeof(float));
    tk_tensor_free(got);
    got = NULL;

    e = tk_safetensors_find(st, "layer.bias");
    tk_assert_ok(tk_safetensors_load(&got, NULL, CPU, st, e));
    assert_int_equal(tk_tensor_rank(got), 1);
    assert_memory_equal(tk_tensor_data(got), tk_tensor_data(b), 5 * sizeof(int32_t));
    tk_tensor_free(got);

    tk_error_clear();
    assert_null(tk_safetensors_find(st, "layer.scale"));
    assert_int_equal(tk_error_last_code(), TK_ENOTFOUND);
    assert_non_null(strstr(tk_error_last(), "has no tensor 'layer.scale'"));
    tk_assert_fails(tk_safetensors_entry_info(NULL, &dtype, &rank, shape), TK_EINVAL, "no entry");

    tk_safetensors_free(st);
    tk_safetensors_free(NULL);
    tk_tensor_free(w);
    tk_tensor_free(b);
    unlink(path);
}

/* A dtype tk_dtype lacks is listed and described, but not loaded. */
static void safetensors__unsupported_dtype_is_described_not_loaded(void **state)
{
    (void)state;
    const char *path = TK_TEST_TMPDIR "/abi_u8.safetensors";
    const char header[] = "{\"flags\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[0,4]}}";
    unsigned char bytes[8 + sizeof header - 1 + 4];
    uint64_t n = sizeof header - 1;
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(n >> (8 * i));
    memcpy(bytes + 8, header, n);
    memcpy(bytes + 8 + n, "\1\0\1\1", 4);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, sizeof bytes, f), sizeof bytes);
    fclose(f);

    tk_safetensors *st = NULL;
    tk_tensor *t = NULL;
    tk_assert_ok(tk_safetensors_open(&st, path));
    const tk_safetensors_entry *e = tk_safetensors_find(st, "flags");
    assert_non_null(e);
    int rank = 0;
    int64_t shape[TK_MAX_DIMS] = {0};
    tk_dtype dtype;
    tk_assert_fails(tk_safetensors_entry_info(e, &dtype, &rank, shape), TK_EUNSUPPORTED, "'flags' is U8");
    assert_int_equal(rank, 2);
    assert_int_equal(shape[1], 2);
    tk_assert_fails(tk_safetensors_load(&t, NULL, CPU, st, e), TK_EUNSUPPORTED, "U8");
    assert_null(t);
    tk_safetensors_free(st);
    unlink(path);

    tk_assert_fails(tk_safetensors_open(&st, TK_TEST_TMPDIR "/abi_none.safetensors"), TK_EIO, "abi_none");
    assert_null(st);
    assert_int_equal(tk_error_last_code(), TK_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error__code_beside_the_message_of_a_null_return),
        cmocka_unit_test(error__code_is_per_thread),
        cmocka_unit_test(log__callback_gets_the_runtime_warnings),
        cmocka_unit_test(log__default_writes_one_line_to_stderr),
        cmocka_unit_test(log__set_while_other_threads_log),
        cmocka_unit_test(safetensors__write_open_find_load),
        cmocka_unit_test(safetensors__unsupported_dtype_is_described_not_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
