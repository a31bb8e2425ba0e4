/* Two versions of one model in one process, through the public API only (tests/two_packages.cmake
 * builds them from fixtures/ns): both define ns::affine and ns_affine_k, version 1 as 2x and
 * version 2 as 3x + 1. Each must run its own code while both are open, after the other closes,
 * and during a hot swap where worker threads move from version 1 to version 2 while serving;
 * version 1 must go away (the runtime's log says when) once its last session ends.
 *   two_packages V1.tkpkg V2.tkpkg cpu|cuda
 * Exits 0 when every check held, 77 when DEVICE is cuda and there is no GPU, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tk/log.h>
#include <tk/runtime.h>

enum { WIDTH = 64, MAX_BATCH = 256, WORKERS = 4, CALLS_AFTER_SWAP = 150 };

static const float coef_a[3] = {0, 2.0f, 3.0f}, coef_b[3] = {0, 0.0f, 1.0f};
static tk_device dev;
static atomic_int failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "two_packages: %s:%d: ", __FILE__, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", tk_error_last());                      \
            atomic_fetch_add(&failures, 1);                                               \
        }                                                                                 \
    } while (0)

/* x [batch, 64] on the CPU, values from seed; y on the session's device. */
static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Runs s on a batch drawn from *seed and checks y against version v's formula; 0 when it held. */
static int run_check(tk_session *s, int v, unsigned *seed)
{
    int64_t batch = 1 + (int64_t)(next_rand(seed) % MAX_BATCH);
    const int64_t shape[] = {batch, WIDTH};
    tk_tensor *x = NULL, *xd = NULL, *y = NULL, *yh = NULL;
    tk_ctx *ctx = tk_session_ctx(s);
    int bad = 0;
    if (tk_tensor_new(&x, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape) ||
        tk_tensor_new(&yh, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 2, shape) ||
        tk_tensor_new(&xd, ctx, dev, TK_F32, 2, shape)) {
        CHECK(0, "tensors of batch %lld", (long long)batch);
        bad = 1;
        goto done;
    }
    float *xp = tk_tensor_data(x);
    for (int64_t i = 0; i < batch * WIDTH; i++)
        xp[i] = (float)(next_rand(seed) % 2001) / 1000.0f - 1.0f;
    if (tk_tensor_copy(ctx, xd, x) || tk_session_run(s, &xd, 1, &y, 1) || tk_ctx_sync(ctx) ||
        tk_tensor_copy(ctx, yh, y)) {
        CHECK(0, "version %d at batch %lld failed", v, (long long)batch);
        bad = 1;
        goto done;
    }
    const float *yp = tk_tensor_data(yh);
    for (int64_t i = 0; i < batch * WIDTH && !bad; i++) {
        float want = coef_a[v] * xp[i] + coef_b[v];
        if (fabsf(yp[i] - want) > 1e-5f) {
            CHECK(0, "version %d batch %lld element %lld is %g, expected %g", v, (long long)batch, (long long)i,
                  yp[i], want);
            bad = 1;
        }
    }
done:
    tk_tensor_free(x);
    tk_tensor_free(xd);
    tk_tensor_free(y);
    tk_tensor_free(yh);
    return bad;
}

static void run_some(tk_package *pkg, int v, int calls, unsigned seed)
{
    tk_session *s = NULL;
    if (tk_session_new(&s, pkg, dev)) {
        CHECK(0, "session on version %d", v);
        return;
    }
    for (int i = 0; i < calls; i++)
        run_check(s, v, &seed);
    tk_session_free(s);
}

/* Packages alive, as the runtime tells through its log callback (DEBUG lines "package 'x'
 * opened" and "package 'x' closed", the latter once its host object is unloaded). */
static atomic_int packages_alive;

static void on_log(tk_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == TK_LOG_DEBUG && strncmp(msg, "package ", 8) == 0) {
        if (strstr(msg, " opened"))
            atomic_fetch_add(&packages_alive, 1);
        else if (strstr(msg, " closed"))
            atomic_fetch_sub(&packages_alive, 1);
        return;
    }
    fprintf(stderr, "tkexport: %s\n", msg);
}

static int host_objects_loaded(void)
{
    return atomic_load(&packages_alive);
}

/* --- the hot swap ------------------------------------------------------------------------------ */

static pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER;
static tk_package *current;
static int current_version;
static atomic_int calls_by_version[3];

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    tk_session *s = NULL;
    int v = 0, after_swap = 0;
    while (after_swap < CALLS_AFTER_SWAP) {
        pthread_mutex_lock(&swap_lock);
        /* a new request goes to the current version; the session of the old one is let go */
        if (v != current_version) {
            tk_session_free(s);
            s = NULL;
            v = current_version;
            if (tk_session_new(&s, current, dev)) {
                CHECK(0, "worker session on version %d", v);
                pthread_mutex_unlock(&swap_lock);
                break;
            }
        }
        pthread_mutex_unlock(&swap_lock);
        run_check(s, v, &seed);
        atomic_fetch_add(&calls_by_version[v], 1);
        if (v == 2)
            after_swap++;
    }
    tk_session_free(s);
    return NULL;
}

int main(int argc, char **argv)
{
    tk_package *p1 = NULL, *p2 = NULL;
    if (argc != 4 || tk_device_parse(&dev, argv[3])) {
        fprintf(stderr, "usage: two_packages V1.tkpkg V2.tkpkg cpu|cuda\n");
        return 2;
    }
    if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available()) {
        printf("two_packages: skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_log_set(on_log, NULL);
    int base = host_objects_loaded();

    /* both open: each its own */
    CHECK(tk_package_open(&p1, argv[1]) == 0, "open %s", argv[1]);
    CHECK(tk_package_open(&p2, argv[2]) == 0, "open %s", argv[2]);
    if (!p1 || !p2)
        return 1;
    CHECK(host_objects_loaded() == base + 2, "%d packages alive, expected %d", host_objects_loaded(), base + 2);
    run_some(p1, 1, 20, 1);
    run_some(p2, 2, 20, 2);
    run_some(p1, 1, 20, 3);
    /* one closed: the other is untouched, and the closed one is gone */
    tk_package_close(p1);
    CHECK(host_objects_loaded() == base + 1, "version 1 still alive after its close");
    run_some(p2, 2, 20, 4);
    CHECK(tk_package_open(&p1, argv[1]) == 0, "reopen %s", argv[1]);
    tk_package_close(p2);
    run_some(p1, 1, 20, 5);
    printf("two_packages: both versions open, each ran its own op and kernel; closing either left the other "
           "correct\n");

    /* the hot swap: workers serve version 1, version 2 is opened and made current, version 1 is
     * closed at once and goes away when its last session ends */
    current = p1;
    current_version = 1;
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    while (atomic_load(&calls_by_version[1]) < 50 * WORKERS && atomic_load(&failures) == 0)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    CHECK(tk_package_open(&p2, argv[2]) == 0, "open %s during the swap", argv[2]);
    pthread_mutex_lock(&swap_lock);
    current = p2;
    current_version = 2;
    pthread_mutex_unlock(&swap_lock);
    tk_package_close(p1); /* its sessions keep it alive until they end */
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    CHECK(host_objects_loaded() == base + 1, "%d packages alive after the swap, expected %d (version 1 gone)",
          host_objects_loaded(), base + 1);
    run_some(p2, 2, 10, 6);
    tk_package_close(p2);
    CHECK(host_objects_loaded() == base, "packages left after closing everything");
    printf("two_packages: hot swap on %d threads: %d calls on version 1, %d on version 2, %d failed\n", WORKERS,
           atomic_load(&calls_by_version[1]), atomic_load(&calls_by_version[2]), atomic_load(&failures));
    return atomic_load(&failures) ? 1 : 0;
}
