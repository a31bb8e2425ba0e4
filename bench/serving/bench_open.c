/* bench_open: what a package with large weights costs to open and to start, on libtkrt's public
 * API only.
 *
 *   bench_open PKG.tkpkg [--device cuda[:N]|cpu] [--run] [--json FILE]
 *
 * Times tk_package_open (the file mapped, every entry's SHA-256 verified, the program prepared)
 * and the first tk_session_new on the device (its context, the weights uploaded), and reads the
 * process's memory from /proc/self/status after each step: VmHWM (the peak resident set), VmRSS,
 * RssAnon (private memory: a copy of the weights would show here) and RssFile (pages of mapped
 * files: the package's). Weights used in place from the mapped package count once, under
 * RssFile; a peak near twice the package would mean a copy. With --run, one call with every
 * dynamic dim at its minimum (zeros as input) checks that the package runs, timed with its sync.
 * Exit status: 0 done, 1 failed, 2 usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <tk/runtime.h>

typedef struct mem {
    long long hwm_kb, rss_kb, anon_kb, file_kb;
} mem;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static mem mem_now(void)
{
    mem m = {-1, -1, -1, -1};
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return m;
    while (fgets(line, sizeof line, f)) {
        long long v;
        if (sscanf(line, "VmHWM: %lld", &v) == 1)
            m.hwm_kb = v;
        else if (sscanf(line, "VmRSS: %lld", &v) == 1)
            m.rss_kb = v;
        else if (sscanf(line, "RssAnon: %lld", &v) == 1)
            m.anon_kb = v;
        else if (sscanf(line, "RssFile: %lld", &v) == 1)
            m.file_kb = v;
    }
    fclose(f);
    return m;
}

static double gib(long long kb) { return kb < 0 ? -1.0 : (double)kb / (1024.0 * 1024.0); }

static void print_mem(const char *when, mem m)
{
    printf("  %-22s peak %8.3f GiB   rss %8.3f GiB   anon %8.3f GiB   file %8.3f GiB\n", when, gib(m.hwm_kb),
           gib(m.rss_kb), gib(m.anon_kb), gib(m.file_kb));
}

static void json_mem(FILE *f, const char *key, mem m)
{
    fprintf(f, " \"%s\": {\"vm_hwm_kb\": %lld, \"vm_rss_kb\": %lld, \"rss_anon_kb\": %lld, \"rss_file_kb\": %lld},\n", key,
            m.hwm_kb, m.rss_kb, m.anon_kb, m.file_kb);
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_open: %s: %s\n", what, tk_error_last());
    return 1;
}

/* One call with every dynamic dim at its minimum and zeros as inputs; its time with the sync. */
static int run_once(tk_session *s, const tk_package *pkg, double *ms)
{
    size_t nin = tk_package_num_inputs(pkg), nout = tk_package_num_outputs(pkg);
    tk_tensor **in = calloc(nin + 1, sizeof *in), **out = calloc(nout + 1, sizeof *out);
    tk_ctx *ctx = tk_session_ctx(s);
    tk_device dev = tk_ctx_device(ctx), cpu = {TK_DEVICE_CPU, 0};
    int rc = in && out ? 0 : tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < nin && !rc; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        int64_t shape[TK_MAX_DIMS];
        tk_tensor *h = NULL;
        for (int d = 0; d < io->rank; d++)
            shape[d] = io->dims[d].sym ? io->dims[d].min : io->dims[d].value;
        if (!(rc = tk_tensor_new(&h, NULL, cpu, io->dtype, io->rank, shape))) {
            memset(tk_tensor_data(h), 0, tk_tensor_nbytes(h));
            if (dev.kind == TK_DEVICE_CPU) {
                in[i] = h;
                continue;
            }
            if (!(rc = tk_tensor_new(&in[i], ctx, dev, io->dtype, io->rank, shape)))
                rc = tk_tensor_copy(ctx, in[i], h);
            tk_tensor_free(h);
        }
    }
    if (!rc && !(rc = tk_ctx_sync(ctx))) {
        double t0 = now_ms();
        if (!(rc = tk_session_run(s, in, nin, out, nout)))
            rc = tk_ctx_sync(ctx);
        *ms = now_ms() - t0;
    }
    for (size_t i = 0; in && i < nin; i++)
        tk_tensor_free(in[i]);
    for (size_t i = 0; out && i < nout; i++)
        tk_tensor_free(out[i]);
    free(in);
    free(out);
    return rc;
}

static const char usage[] = "usage: bench_open PKG.tkpkg [--device cuda[:N]|cpu] [--run] [--json FILE]\n";

int main(int argc, char **argv)
{
    const char *path = NULL, *device = "cuda:0", *json = NULL;
    int do_run = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%sTimes tk_package_open (every entry's SHA-256 verified) and the first tk_session_new on the\n"
                   "device (default cuda:0), with the process's peak and resident memory after each; --run\n"
                   "makes one call at the smallest shapes; --json FILE writes the figures. Exit status: 0 done,\n"
                   "1 failed, 2 usage.\n",
                   usage);
            return 0;
        }
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--run"))
            do_run = 1;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "bench_open: unexpected '%s'; %s", argv[i], usage);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "bench_open: no package named; %s", usage);
        return 2;
    }
    tk_device dev;
    if (tk_device_parse(&dev, device)) {
        fprintf(stderr, "bench_open: %s\n", tk_error_last());
        return 2;
    }
    struct stat sb;
    if (stat(path, &sb)) {
        fprintf(stderr, "bench_open: cannot stat '%s': %s\n", path, strerror(errno));
        return 1;
    }
    /* the driver's own start is not the package's: done first */
    if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available())
        return fail(device);
    mem m0 = mem_now();
    tk_package *pkg = NULL;
    tk_session *s = NULL;
    double t0 = now_ms();
    if (tk_package_open(&pkg, path))
        return fail(path);
    double open_ms = now_ms() - t0;
    mem m1 = mem_now();
    t0 = now_ms();
    if (tk_session_new(&s, pkg, dev)) {
        tk_package_close(pkg);
        return fail("tk_session_new");
    }
    double session_ms = now_ms() - t0;
    mem m2 = mem_now();
    double run_ms = -1;
    int rc = 0;
    if (do_run && run_once(s, pkg, &run_ms))
        rc = fail("the run");
    mem m3 = mem_now();
    double size_gib = (double)sb.st_size / (1024.0 * 1024.0 * 1024.0);
    printf("bench_open: %s (%.3f GiB, program '%s') on %s\n", path, size_gib, tk_package_program(pkg), device);
    printf("  tk_package_open        %10.1f ms   (map, SHA-256 of every entry, program prepared)\n", open_ms);
    printf("  tk_session_new         %10.1f ms   (context, weights uploaded)\n", session_ms);
    if (do_run)
        printf("  first run              %10.1f ms   (every dynamic dim at its minimum, with the sync)\n", run_ms);
    print_mem("before open", m0);
    print_mem("after open", m1);
    print_mem("after session", m2);
    if (do_run)
        print_mem("after the run", m3);
    printf("  peak / package size: %.2f (about 1: the weights are used from the mapped file; about 2: copied)\n",
           size_gib > 0 ? gib(m3.hwm_kb) / size_gib : 0.0);
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "bench_open: cannot write '%s': %s\n", json, strerror(errno));
            rc = 1;
        } else {
            fprintf(f, "{\n \"package\": \"%s\", \"device\": \"%s\", \"package_bytes\": %lld,\n", path, device,
                    (long long)sb.st_size);
            fprintf(f, " \"open_ms\": %.3f, \"session_new_ms\": %.3f, \"first_run_ms\": %.3f,\n", open_ms, session_ms,
                    run_ms);
            json_mem(f, "mem_before_open", m0);
            json_mem(f, "mem_after_open", m1);
            json_mem(f, "mem_after_session", m2);
            json_mem(f, "mem_end", m3);
            fprintf(f, " \"peak_over_package\": %.4f\n}\n", size_gib > 0 ? gib(m3.hwm_kb) / size_gib : 0.0);
            if (fclose(f))
                rc = 1;
        }
    }
    tk_session_free(s);
    tk_package_close(pkg);
    return rc;
}
