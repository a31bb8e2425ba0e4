/* tkexport run: open a .tkpkg, feed it inputs from .npy files (or deterministic random ones), run
 * it on the CPU or a GPU through a session, write its outputs as .npy, and optionally time it
 * (--bench, on one shape or a stream of them: --shapes) or show where the time goes per op
 * (--profile). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fsutil.h"
#include "npy.h"
#include "numarg.h"
#include "options.h"
#include "call_stats.h"
#include "shape_stream.h"
#include "strbuf.h"
#include <tk/error.h>
#include <tk/half.h>
#include <tk/runtime.h>

static const tk_cli_option options[] = {
    {{"device", required_argument, NULL, 'd'}, "cpu|cuda[:N]", "where to run (default: cuda:0 when a GPU is there, else cpu)"},
    {{"input", required_argument, NULL, 'i'}, "NAME=SPEC",
     "input NAME from SPEC: FILE.npy, or random:DxD (pseudo-random of that shape); repeatable"},
    {{"output-dir", required_argument, NULL, 'o'}, "DIR",
     "write each output as DIR/<name>.npy (DIR is created); -o FILE.npy: the program's one output into FILE.npy"},
    {{"bench", required_argument, NULL, 'b'}, "N", "time N calls (run + sync, inputs on the device) after the warm-up"},
    {{"warmup", required_argument, NULL, 'w'}, "N", "untimed calls before --bench's (default 100)"},
    {{"profile", no_argument, NULL, 'p'}, NULL,
     "one more run with per-op times: device (kernel) us, % of total, host (dispatch) us, % of peak"},
    {{"seed", required_argument, NULL, 's'}, "S", "the seed of random: inputs and of --shapes uniform (default 0)"},
    {{"shapes", required_argument, NULL, 'S'}, "KIND",
     "the shapes of --bench's calls: fixed (--input's; the default), cycle, uniform or file:PATH (below)"},
    {{"prefill", required_argument, NULL, 'P'}, "KIND",
     "with --shapes: auto (the default), now (the session captures every shape from its creation and is waited for) or off"},
    {{"bind", no_argument, NULL, 'B'}, NULL,
     "with --shapes: bind the session's buffers (tk_session_bind) and wait for its graphs on them"},
    {{"dense-outputs", no_argument, NULL, 'D'}, NULL,
     "allocate every output contiguous (by default an output the program narrows out of a larger value is a view of it)"},
    {{"allow-unsigned", no_argument, NULL, 'u'}, NULL,
     "run a package that carries no signature (refused otherwise; docs/security.md)"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

#define MAX_BENCH 10000000
#define DEFAULT_WARMUP 100

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport run PKG.tkpkg [--device cpu|cuda[:N]] [--input NAME=FILE.npy | NAME=random:DxD]...\n"
               "                    [--output-dir DIR | -o FILE.npy] [--bench N] [--warmup N] [--profile] [--seed S]\n"
               "                    [--dense-outputs] [--allow-unsigned]\n"
               "       tkexport run PKG.tkpkg --shapes cycle|uniform|file:PATH --bench N [--device ...] [--warmup N]\n"
               "                    [--prefill auto|now|off] [--bind] [--profile] [--seed S] [--allow-unsigned]\n\n"
               "Opens the package (verifying its signature against the keys this machine trusts, then every\n"
               "entry's SHA-256; an unsigned package only with --allow-unsigned), reads each of the program's inputs by its\n"
               "name from a .npy file (float32 or float16 files convert to f32, f16 or bf16, rounding to nearest\n"
               "even; int32 or int64 files to i32 or i64) or makes it pseudo-random with the shape given\n"
               "(random:4x128; the same seed gives the same values), checks them against the program's dims and\n"
               "ranges, runs the program and prints each output's shape; with --output-dir it writes them as\n"
               "DIR/<output name>.npy (f16 and bf16 as float32, exactly; -o FILE.npy: a program's one output into\n"
               "that file). `tkexport inspect PKG` lists the inputs and outputs.\n"
               "--bench N times N calls of run + sync after the session's warm-up and --warmup calls, with the\n"
               "inputs already on the device, and prints the median, p10, p90, p99 and min in microseconds,\n"
               "calls/s and samples/s (samples: dim 0 of the first input). --profile runs once more, eagerly,\n"
               "with each node's device (kernel) time and the host's time dispatching it. An output the program\n"
               "cuts out of a larger value with tk::narrow (GPT-2's logits out of padded rows) is a view of that\n"
               "value, computed in place and not copied (tk_session_options.output_views); --dense-outputs makes\n"
               "every output contiguous.\n\n"
               "--shapes times a stream of shapes instead, as a server sees them; the inputs are then made by the\n"
               "command (random values, no --input) with every dynamic dim a symbol of the program:\n"
               "  cycle        8 sizes per symbol, from its min to its max spaced geometrically, in turn\n"
               "  uniform      each symbol drawn uniformly in its range for every call (--seed)\n"
               "  file:PATH    one call a line, cycled: NAME=VALUE for each symbol (e.g. 'batch=16 seq=128';\n"
               "               '#' starts a comment), to replay the sizes a service really gets\n"
               "Every call is timed (run + sync, inputs already on the device); besides the statistics above it\n"
               "reports the mean and, apart, the calls whose shape was new to the session (they plan, and on a\n"
               "GPU may capture a CUDA graph) and those that repeat one. --prefill and --bind set the session up as\n"
               "a service would (docs/runtime.md): --prefill now captures every shape of a small symbol space from\n"
               "the session's creation, --bind binds the buffers the calls are views of, so that each shape's graph\n"
               "is captured on them; both are waited for before the warm-up, and the wait is printed.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "diobwpsh");
    tk_cli_print_exit_statuses(f);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int fail(int err)
{
    fprintf(stderr, "tkexport run: error: %s\n", tk_error_last());
    return tk_cli_exit_status(err);
}

/* --- what the program expects ------------------------------------------------------------- */

/* "bf16[batch, 128]" into buf. */
static const char *io_text(const tk_io_info *io, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "%s[", tk_dtype_name(io->dtype));
    for (int d = 0; d < io->rank && at < n; d++) {
        if (io->dims[d].sym)
            at += (size_t)snprintf(buf + at, n - at, "%s%s", d ? ", " : "", io->dims[d].sym);
        else
            at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)io->dims[d].value);
    }
    if (at < n)
        snprintf(buf + at, n - at, "]");
    return buf;
}

/* "bf16[4, 128]" into buf. */
static const char *tensor_text(const tk_tensor *t, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "%s[", tk_dtype_name(tk_tensor_dtype(t)));
    for (int d = 0; d < tk_tensor_rank(t) && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)tk_tensor_dim(t, d));
    if (at < n)
        snprintf(buf + at, n - at, "]");
    return buf;
}

/* The inputs as one line: "x: bf16[batch, 128], batch in [1, 1024]"; several inputs are joined
 * with "; ", then every symbol's range once. */
static void print_expected(FILE *f, const tk_package *pkg)
{
    size_t n = tk_package_num_inputs(pkg);
    char buf[512];
    if (!n)
        fprintf(f, "no inputs");
    for (size_t i = 0; i < n; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        fprintf(f, "%s%s: %s", i ? "; " : "", io->name, io_text(io, buf, sizeof buf));
    }
    for (size_t i = 0; i < n; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        for (int d = 0; d < io->rank; d++) {
            const char *sym = io->dims[d].sym;
            int seen = 0;
            if (!sym)
                continue;
            for (size_t j = 0; j <= i && !seen; j++) {
                const tk_io_info *o = tk_package_input(pkg, j);
                for (int e = 0; e < (j == i ? d : o->rank) && !seen; e++)
                    seen = o->dims[e].sym && !strcmp(o->dims[e].sym, sym);
            }
            if (!seen)
                fprintf(f, ", %s in [%lld, %lld]", sym, (long long)io->dims[d].min, (long long)io->dims[d].max);
        }
    }
}

/* --- inputs --------------------------------------------------------------------------------- */

typedef struct input_arg {
    const char *text; /* NAME=SPEC as given */
    size_t name_len;
    const char *spec; /* after the '=' */
    int used;
} input_arg;

/* "4x128" into shape (rank at most TK_MAX_DIMS, each dim a whole number); -1 when malformed. */
static int parse_dims(const char *text, int64_t *shape, int *rank)
{
    *rank = 0;
    const char *p = text;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9' || *rank == TK_MAX_DIMS)
            return -1;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 0)
            return -1;
        shape[(*rank)++] = v;
        if (!*end)
            return 0;
        if (*end != 'x')
            return -1;
        p = end + 1;
    }
}

/* A CPU tensor of the input's dtype, uniform in [-1, 1) (integers in [0, 16)), from the seed and
 * the input's name: the same command line gives the same values. */
static int random_input(tk_tensor **out, const tk_io_info *io, int rank, const int64_t *shape, uint64_t seed)
{
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    int rc = tk_tensor_new(out, NULL, cpu, io->dtype, rank, shape);
    if (!rc)
        shape_fill_random(*out, io->name, seed);
    return rc;
}

/* Matches the --input arguments with the program's inputs: every input given once, no unknown
 * name. On a mismatch, one line naming what is wrong and what the program expects. */
static int match_inputs(input_arg *args, int nargs, const tk_package *pkg, const char *path, int *which)
{
    size_t n = tk_package_num_inputs(pkg);
    for (size_t i = 0; i < n; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        which[i] = -1;
        for (int a = 0; a < nargs; a++) {
            if (strlen(io->name) != args[a].name_len || strncmp(args[a].text, io->name, args[a].name_len))
                continue;
            if (which[i] >= 0) {
                fprintf(stderr, "tkexport run: input '%s' given twice ('%s' and '%s')\n", io->name,
                        args[which[i]].text, args[a].text);
                return -1;
            }
            which[i] = a;
            args[a].used = 1;
        }
    }
    const char *problem = NULL;
    int bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++)
        if (which[i] < 0)
            problem = "missing input", bad = (int)i;
    for (int a = 0; a < nargs && !problem; a++)
        if (!args[a].used)
            problem = "unknown input", bad = a;
    if (!problem)
        return 0;
    if (!strcmp(problem, "missing input"))
        fprintf(stderr, "tkexport run: missing input '%s' (--input %s=FILE.npy or %s=random:DxD); '%s' expects ",
                tk_package_input(pkg, (size_t)bad)->name, tk_package_input(pkg, (size_t)bad)->name,
                tk_package_input(pkg, (size_t)bad)->name, path);
    else
        fprintf(stderr, "tkexport run: unknown input '%.*s'; '%s' expects ", (int)args[bad].name_len, args[bad].text,
                path);
    print_expected(stderr, pkg);
    fprintf(stderr, "\n");
    return -1;
}

/* The CPU tensor for input io from its argument: a .npy file converted to the input's dtype, or
 * random:DxD. Returns 0, TK_EXIT_USAGE for a malformed random: spec (printed), or an error
 * code with the message set. */
static int load_input(tk_tensor **out, const tk_io_info *io, const input_arg *a, uint64_t seed, int *usage)
{
    *usage = 0;
    if (!strncmp(a->spec, "random:", 7)) {
        int64_t shape[TK_MAX_DIMS];
        int rank;
        if (parse_dims(a->spec + 7, shape, &rank)) {
            fprintf(stderr, "tkexport run: '%s': expected random:DxD..., the shape as whole numbers joined by 'x' "
                    "(e.g. %s=random:4x128), at most %d of them\n", a->text, io->name, TK_MAX_DIMS);
            *usage = 1;
            return TK_EINVAL;
        }
        /* checked before anything is allocated: a shape the program refuses never costs memory */
        if (rank != io->rank) {
            fprintf(stderr, "tkexport run: '%s': %d dims, input '%s' has %d\n", a->text, rank, io->name, io->rank);
            *usage = 1;
            return TK_EINVAL;
        }
        for (int d = 0; d < rank; d++) {
            const tk_io_dim *dim = &io->dims[d];
            int64_t lo = dim->sym ? dim->min : dim->value, hi = dim->sym ? dim->max : dim->value;
            if (shape[d] >= lo && shape[d] <= hi)
                continue;
            if (dim->sym)
                fprintf(stderr, "tkexport run: '%s': dim %d (%s) is %lld, outside its range [%lld, %lld]\n", a->text, d,
                        dim->sym, (long long)shape[d], (long long)lo, (long long)hi);
            else
                fprintf(stderr, "tkexport run: '%s': dim %d is %lld, input '%s' has %lld there\n", a->text, d,
                        (long long)shape[d], io->name, (long long)hi);
            *usage = 1;
            return TK_EINVAL;
        }
        return random_input(out, io, rank, shape, seed);
    }
    if (access(a->spec, F_OK) != 0) {
        fprintf(stderr, "tkexport run: input '%s': '%s' does not exist (expected a .npy file or random:DxD)\n", io->name,
                a->spec);
        *usage = 1;
        return TK_ENOTFOUND;
    }
    return tk_npy_read(out, a->spec, &io->dtype);
}

/* --- outputs -------------------------------------------------------------------------------- */

static double value_at(const tk_tensor *t, int64_t i)
{
    const void *d = tk_tensor_data(t);
    switch (tk_tensor_dtype(t)) {
    case TK_F32: return ((const float *)d)[i];
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)d)[i]);
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)d)[i]);
    case TK_I32: return ((const int32_t *)d)[i];
    case TK_I64: return (double)((const int64_t *)d)[i];
    }
    return 0;
}

/* A CPU copy of t (t itself when it is on the CPU already: *owned stays NULL). */
static int to_host(const tk_tensor **host, tk_tensor **owned, tk_ctx *ctx, const tk_tensor *t)
{
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    *owned = NULL;
    *host = t;
    if (tk_tensor_device(t).kind == TK_DEVICE_CPU && tk_tensor_is_contiguous(t))
        return 0;
    int rc = tk_tensor_new(owned, NULL, cpu, tk_tensor_dtype(t), tk_tensor_rank(t), tk_tensor_shape(t));
    if (!rc && (rc = tk_tensor_copy(ctx, *owned, t))) {
        tk_tensor_free(*owned);
        *owned = NULL;
    }
    if (!rc)
        *host = *owned;
    return rc;
}

/* Prints each output's shape and, with dir, writes it as dir/<name>.npy. */
static int report_outputs(tk_session *s, const tk_package *pkg, tk_tensor **outs, size_t nout, const char *dir)
{
    int rc = 0;
    char shape[256];
    /* -o NAME.npy: the one output into that file; otherwise -o is a folder of NAME.npy files */
    const char *file = dir && tk_ends_with(dir, ".npy") ? dir : NULL;
    if (file)
        dir = NULL;
    if (dir && (rc = tk_mkdirs(dir)))
        return rc;
    for (size_t i = 0; i < nout && !rc; i++) {
        const tk_io_info *io = tk_package_output(pkg, i);
        char fallback[32];
        const char *name = io && io->name ? io->name : NULL;
        if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
            snprintf(fallback, sizeof fallback, "out%zu", i);
            name = fallback;
        }
        const tk_tensor *h;
        tk_tensor *owned;
        if ((rc = to_host(&h, &owned, tk_session_ctx(s), outs[i])))
            break;
        double sum = 0, sum_abs = 0;
        int64_t n = tk_numel(h);
        for (int64_t k = 0; k < n; k++) {
            double v = value_at(h, k);
            sum += v;
            sum_abs += fabs(v);
        }
        printf("%s: %s  mean %.6g  mean|y| %.6g", name, tensor_text(h, shape, sizeof shape), n ? sum / (double)n : 0.0,
               n ? sum_abs / (double)n : 0.0);
        if (file) {
            if (!(rc = tk_npy_write(file, h)))
                printf("  -> %s", file);
        } else if (dir) {
            size_t len = strlen(dir) + strlen(name) + 8;
            char *path = malloc(len);
            if (!path) {
                rc = tk_error_set(TK_ENOMEM, "out of memory");
            } else {
                snprintf(path, len, "%s/%s.npy", dir, name);
                if (!(rc = tk_npy_write(path, h)))
                    printf("  -> %s", path);
                free(path);
            }
        }
        printf("\n");
        tk_tensor_free(owned);
    }
    return rc;
}

/* --- bench and profile ---------------------------------------------------------------------- */

/* The lines bench/e2e/run.sh reads (median, p10, p90, p99, min, calls/s, samples/s), and the mean. */
static void print_stats(const call_stats *st, double samples)
{
    printf("  median    %10.2f us\n", st->median);
    printf("  p10       %10.2f us\n", st->p10);
    printf("  p90       %10.2f us\n", st->p90);
    printf("  p99       %10.2f us\n", st->p99);
    printf("  min       %10.2f us\n", st->min);
    printf("  mean      %10.2f us\n", st->mean);
    printf("  calls/s   %10.0f   (1 / mean)\n", st->calls_per_s);
    printf("  samples/s %10.0f   (samples / time: dim 0 of the first input per call)\n",
           st->mean > 0 ? samples / (st->mean * (double)st->n) * 1e6 : 0.0);
}

static int run_sync(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor **out, size_t nout)
{
    int rc = tk_session_run(s, in, nin, out, nout);
    return rc ? rc : tk_ctx_sync(tk_session_ctx(s));
}

static int bench(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor **out, size_t nout, int n, int warmup,
                 int64_t batch, const char *devname)
{
    double *t = malloc(sizeof(double) * (size_t)n);
    int rc = 0;
    if (!t)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (int i = 0; i < warmup && !rc; i++)
        rc = run_sync(s, in, nin, out, nout);
    for (int i = 0; i < n && !rc; i++) {
        double t0 = now_us();
        rc = run_sync(s, in, nin, out, nout);
        t[i] = now_us() - t0;
    }
    if (!rc) {
        call_stats st;
        call_stats_compute(t, (size_t)n, &st);
        printf("bench on %s, batch %lld: %d calls (run + sync, inputs on the device) after %d warm-up\n", devname,
               (long long)batch, n, warmup);
        print_stats(&st, (double)batch * (double)n);
    }
    free(t);
    return rc;
}

/* Dense bf16 tensor-core peak and memory bandwidth of the GPUs we know, by device name (the
 * vendors' data sheets; SXM parts unless the name says otherwise). First match wins. */
static const struct peak {
    const char *name_part;
    double tflops, gbps;
} peaks[] = {
    {"H100 PCIe", 756, 2000},  {"H100 NVL", 835, 3900}, {"H100", 989, 3350}, {"H200", 989, 4800},
    {"GH200", 989, 4000},      {"B200", 2250, 8000},    {"A100-PCIE-40GB", 312, 1555},
    {"A100-SXM4-40GB", 312, 1555}, {"A100 80GB PCIe", 312, 1935}, {"A100", 312, 2039},
    {"L40S", 362, 864},        {"L4", 121, 300},        {"A10G", 70, 600}, {"A10", 125, 600},
};

static int profile(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor **out, size_t nout, tk_device dev,
                   const char *devname)
{
    int rc;
    const tk_node_profile *nodes = NULL;
    if ((rc = tk_session_set_profiling(s, 1)) || (rc = run_sync(s, in, nin, out, nout)))
        return rc;
    size_t n = tk_session_profile(s, &nodes);
    tk_session_set_profiling(s, 0);
    const struct peak *pk = NULL;
    char gpu[128] = "";
    int driver;
    if (dev.kind == TK_DEVICE_CUDA && tk_cuda_device_info(dev.index, gpu, sizeof gpu, &driver) == 0)
        for (size_t i = 0; i < sizeof peaks / sizeof peaks[0] && !pk; i++)
            if (strstr(gpu, peaks[i].name_part))
                pk = &peaks[i];
    tk_error_clear();
    double total = 0, host_total = 0;
    int have_host = 0, gpu_dev = dev.kind == TK_DEVICE_CUDA;
    for (size_t i = 0; i < n; i++) {
        total += nodes[i].time_us;
        host_total += nodes[i].host_us;
        have_host |= nodes[i].host_us > 0;
    }
    printf("profile on %s%s%s%s: %zu nodes\n", devname, gpu[0] ? " (" : "", gpu, gpu[0] ? ")" : "", n);
    printf("  %-4s %-28s %10s %8s %10s  %s\n", "node", "op", gpu_dev ? "gpu us" : "time us", "% total", "host us",
           "achieved");
    for (size_t i = 0; i < n; i++) {
        const tk_node_profile *p = &nodes[i];
        char ach[160] = "", host[32] = "-";
        double sec = p->time_us * 1e-6;
        if (sec > 0 && (p->flops > 0 || p->bytes > 0)) {
            size_t at = 0;
            if (p->flops > 0)
                at += (size_t)snprintf(ach + at, sizeof ach - at, "%.3g TFLOP/s", p->flops / sec * 1e-12);
            if (p->flops > 0 && pk)
                at += (size_t)snprintf(ach + at, sizeof ach - at, " (%.1f%% of %.0f)", 100.0 * p->flops / sec * 1e-12 / pk->tflops,
                                       pk->tflops);
            if (p->bytes > 0)
                at += (size_t)snprintf(ach + at, sizeof ach - at, "%s%.3g GB/s", at ? ", " : "", p->bytes / sec * 1e-9);
            if (p->bytes > 0 && pk)
                snprintf(ach + at, sizeof ach - at, " (%.1f%% of %.0f)", 100.0 * p->bytes / sec * 1e-9 / pk->gbps, pk->gbps);
        }
        if (have_host)
            snprintf(host, sizeof host, "%.2f", p->host_us);
        printf("  %-4zu %-28s %10.2f %7.1f%% %10s  %s\n", i, p->op ? p->op : "?", p->time_us,
               total > 0 ? 100.0 * p->time_us / total : 0.0, host, ach);
    }
    char host[32] = "-";
    if (have_host)
        snprintf(host, sizeof host, "%.2f", host_total);
    printf("  %-4s %-28s %10.2f %7.1f%% %10s\n", "", "total", total, total > 0 ? 100.0 : 0.0, host);
    if (gpu_dev)
        printf("  (gpu us: the node's kernels, between events around it in a CUDA graph replayed back to back; "
               "host us: the wall time the host spent dispatching it eagerly%s)\n",
               have_host ? "" : ", not reported by this libtkrt");
    else
        printf("  (time us: the node's wall time; host us: the same, measured around its dispatch%s)\n",
               have_host ? "" : ", not reported by this libtkrt");
    if (dev.kind == TK_DEVICE_CPU)
        printf("  (on the CPU: no peak figures; achieved rates only)\n");
    else if (!pk)
        printf("  (no peak figures for '%s': achieved rates only)\n", gpu[0] ? gpu : devname);
    else
        printf("  (peaks of '%s': %.0f TFLOP/s dense bf16, %.0f GB/s; profiling turns CUDA graph replay off)\n",
               pk->name_part, pk->tflops, pk->gbps);
    return 0;
}

/* --- streams of shapes (--shapes) ------------------------------------------------------- */

/* Percentiles of the calls whose flag is `which` (new shapes, or repeats), on one line. */
static void print_subset(const char *label, const double *t, const unsigned char *is_new, size_t n, int which)
{
    size_t k = 0;
    double *sub = malloc((n + 1) * sizeof *sub);
    if (!sub)
        return;
    for (size_t i = 0; i < n; i++)
        if (is_new[i] == which)
            sub[k++] = t[i];
    call_stats st;
    call_stats_compute(sub, k, &st);
    if (k)
        printf("  %-13s %6zu calls: median %.2f us, p90 %.2f us, p99 %.2f us, max %.2f us\n", label, k, st.median, st.p90,
               st.p99, st.max);
    else
        printf("  %-13s %6zu calls\n", label, k);
    free(sub);
}

/* --bench N over the stream: warm-up calls from the stream too, then N timed ones, each a new
 * draw; the inputs are views over buffers already on the device. */
static int bench_stream(tk_session *s, const tk_package *pkg, shape_stream *st, const shape_buffers *bufs, int n,
                        int warmup, uint64_t seed, const char *label, const char *devname)
{
    size_t nin = bufs->nin, nout = bufs->nout;
    tk_tensor **in = calloc(nin + 1, sizeof *in), **out = calloc(nout + 1, sizeof *out);
    double *t = malloc(sizeof(double) * (size_t)n), samples = 0;
    unsigned char *is_new = malloc((size_t)n + 1);
    int64_t values[SHAPES_MAX_SYMS];
    int rc = 0;
    if (!in || !out || !t || !is_new) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < warmup + n && !rc; i++) {
        shape_stream_next(st, values);
        int first = shape_stream_first_time(st, values);
        if (first < 0) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            break;
        }
        if ((rc = shape_buffers_bind(bufs, st, pkg, values, in, out)))
            break;
        double t0 = now_us();
        rc = run_sync(s, in, nin, out, nout);
        double dt = now_us() - t0;
        if (i >= warmup) {
            t[i - warmup] = dt;
            is_new[i - warmup] = (unsigned char)first;
            samples += nin && tk_tensor_rank(in[0]) > 0 ? (double)tk_tensor_dim(in[0], 0) : 1.0;
        }
        shape_buffers_unbind(bufs, in, out);
    }
    if (!rc) {
        char what[512];
        call_stats all;
        shape_stream_describe(st, what, sizeof what);
        printf("bench on %s, shapes %s over %s: %d calls (run + sync, inputs on the device) after %d warm-up, "
               "seed %llu\n", devname, label, what, n, warmup, (unsigned long long)seed);
        /* the subsets first: call_stats_compute sorts t */
        double *sorted = malloc(sizeof(double) * (size_t)n);
        if (!sorted) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(sorted, t, sizeof(double) * (size_t)n);
        call_stats_compute(sorted, (size_t)n, &all);
        free(sorted);
        print_stats(&all, samples);
        print_subset("new shapes", t, is_new, (size_t)n, 1);
        print_subset("repeat shapes", t, is_new, (size_t)n, 0);
    }
done:
    free(in);
    free(out);
    free(t);
    free(is_new);
    return rc;
}

/* tkexport run PKG --shapes KIND --bench N: the session, the buffers, the stream, and --profile on
 * the stream's first shape. Returns the exit status. */
static int run_stream(tk_package *pkg, tk_device dev, const char *devname, shape_stream_kind kind, const char *label,
                      const char *list_path, int nbench, int warmup, uint64_t seed, int do_profile, double t_open,
                      const tk_session_options *so, int bind)
{
    shape_stream st;
    shape_buffers bufs = {0};
    tk_session *s = NULL;
    char *list = NULL, err[600];
    size_t len;
    int rc = TK_EXIT_USAGE, e;
    if (list_path && tk_file_read(&list, &len, list_path, (size_t)64 << 20)) {
        fprintf(stderr, "tkexport run: --shapes file:%s: %s\n", list_path, tk_error_last());
        return TK_EXIT_USAGE;
    }
    const char *nul = list ? memchr(list, '\0', len) : NULL;
    if (nul) { /* the list is read as text: what follows a NUL would be dropped without a word */
        fprintf(stderr, "tkexport run: --shapes file:%s: a NUL byte at offset %zu: expected a text file of NAME=VALUE "
                        "lines\n", list_path, (size_t)(nul - list));
        free(list);
        return TK_EXIT_USAGE;
    }
    if (shape_stream_init(&st, pkg, kind, list, seed, err, sizeof err)) {
        fprintf(stderr, "tkexport run: --shapes %s: %s\n", label, err);
        free(list);
        return TK_EXIT_USAGE;
    }
    free(list);
    double t_session = now_us();
    if ((e = tk_session_new_ex(&s, pkg, dev, so))) {
        rc = fail(e);
        goto done;
    }
    t_session = now_us() - t_session;
    if ((e = shape_buffers_init(&bufs, &st, pkg, s, seed))) {
        rc = fail(e);
        goto done;
    }
    printf("package opened in %.2f ms (digests verified, host object loaded); session on %s in %.2f ms "
           "(context, weights uploaded)\n", t_open / 1000.0, devname, t_session / 1000.0);
    double t_ready = now_us();
    if (bind && (e = tk_session_bind(s, bufs.in, bufs.nin, bufs.out, bufs.nout))) {
        rc = fail(e);
        goto done;
    }
    int ready = tk_session_wait_ready(s); /* the prefill, or the warm-up only (docs/runtime.md): not timed */
    if (ready < 0) {
        rc = fail(ready);
        goto done;
    }
    if (bind || so->prefill == TK_PREFILL_NOW)
        printf("session ready in %.2f ms: %s\n", (now_us() - t_ready) / 1000.0,
               ready ? "every shape of the program has its graph" : "no prefill (the symbol space is above 1024 shapes, or a "
                                                                   "CPU session): new shapes run eagerly first");
    if ((e = bench_stream(s, pkg, &st, &bufs, nbench, warmup, seed, label, devname))) {
        rc = fail(e);
        goto done;
    }
    if (do_profile) {
        tk_tensor **in = calloc(bufs.nin + 1, sizeof *in), **out = calloc(bufs.nout + 1, sizeof *out);
        int64_t values[SHAPES_MAX_SYMS];
        st.next = 0;
        shape_stream_next(&st, values);
        e = !in || !out ? tk_error_set(TK_ENOMEM, "out of memory") : shape_buffers_bind(&bufs, &st, pkg, values, in, out);
        if (!e) {
            char what[256];
            shape_stream_format(&st, values, what, sizeof what);
            printf("profile of %s:\n", what);
            e = profile(s, in, bufs.nin, out, bufs.nout, dev, devname);
            shape_buffers_unbind(&bufs, in, out);
        }
        free(in);
        free(out);
        if (e) {
            rc = fail(e);
            goto done;
        }
    }
    rc = tk_cli_stdout_done("run");
done:
    shape_buffers_release(&bufs);
    tk_session_free(s);
    shape_stream_release(&st);
    return rc;
}

/* --- the command ---------------------------------------------------------------------------- */

int cmd_run(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    const char *device = NULL, *outdir = NULL;
    int nbench = 0, warmup = DEFAULT_WARMUP, do_profile = 0, c, err, rc = TK_EXIT_USAGE, nargs = 0, bind = 0;
    tk_session_options sopts = TK_SESSION_OPTIONS_INIT;
    sopts.output_views = 1; /* the outputs are read through tk_tensor_copy (to_host) */
    const char *prefill_arg = NULL;
    tk_package_options popts = TK_PACKAGE_OPTIONS_INIT;
    shape_stream_kind shapes = SHAPES_FIXED;
    const char *shapes_arg = "fixed", *shapes_file = NULL;
    uint64_t seed = 0;
    input_arg *args = calloc((size_t)argc + 1, sizeof *args);
    int *which = NULL;
    tk_package *pkg = NULL;
    tk_session *s = NULL;
    tk_tensor **host_in = NULL, **dev_in = NULL, **outs = NULL;
    size_t nin = 0, nout = 0;
    if (!args)
        return TK_EXIT_INTERNAL;
    optind = 1;
    while ((c = tk_cli_getopt("run", argc, argv, "d:i:o:b:w:ps:h", longopts)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'i': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || !eq[1]) {
                fprintf(stderr, "tkexport run: --input '%s': expected NAME=FILE.npy or NAME=random:DxD\n", optarg);
                goto done;
            }
            args[nargs++] = (input_arg){optarg, (size_t)(eq - optarg), eq + 1, 0};
            break;
        }
        case 'o': outdir = optarg; break; /* a folder, or NAME.npy for a program of one output */
        case 'b':
            if (tk_cli_parse_int("run", optarg, "--bench", MAX_BENCH, &nbench))
                goto done;
            if (!nbench) {
                fprintf(stderr, "tkexport run: --bench 0: expected the number of calls to time, from 1 to %d (leave "
                                "--bench out to run once)\n", MAX_BENCH);
                goto done;
            }
            break;
        case 'w':
            if (tk_cli_parse_int("run", optarg, "--warmup", MAX_BENCH, &warmup))
                goto done;
            break;
        case 'p': do_profile = 1; break;
        case 'B': bind = 1; break;
        case 'D': sopts.output_views = 0; break;
        case 'P':
            prefill_arg = optarg;
            if (!strcmp(optarg, "auto"))
                sopts.prefill = TK_PREFILL_AUTO;
            else if (!strcmp(optarg, "now"))
                sopts.prefill = TK_PREFILL_NOW;
            else if (!strcmp(optarg, "off"))
                sopts.prefill = TK_PREFILL_OFF;
            else {
                fprintf(stderr, "tkexport run: --prefill '%s': expected auto, now or off\n", optarg);
                goto done;
            }
            break;
        case 'u': popts.allow_unsigned = 1; break;
        case 's':
            if (tk_parse_u64(optarg, &seed)) {
                fprintf(stderr, "tkexport run: --seed '%s' is not a whole number from 0 to 2^64-1\n", optarg);
                goto done;
            }
            break;
        case 'S':
            if (shape_stream_parse(&shapes, &shapes_file, optarg)) {
                fprintf(stderr, "tkexport run: --shapes '%s': expected fixed, cycle, uniform or file:PATH\n", optarg);
                goto done;
            }
            shapes_arg = optarg;
            break;
        case 'h': help(stdout); rc = TK_EXIT_OK; goto done;
        default: /* '?': tk_cli_getopt said what */
            goto done;
        }
    }
    if (shapes != SHAPES_FIXED) {
        const char *why = !nbench ? "needs --bench N, the number of calls to time"
                          : nargs ? "makes every input itself (random values, dims set per call): leave out --input"
                          : outdir ? "runs many shapes: --output-dir, which writes one run's outputs, does not go with it"
                                   : NULL;
        if (why) {
            fprintf(stderr, "tkexport run: --shapes %s %s\n", shapes_arg, why);
            goto done;
        }
    } else if (bind || prefill_arg) {
        fprintf(stderr, "tkexport run: %s sets up a session for a stream of shapes: it goes with --shapes "
                        "cycle|uniform|file:PATH\n", bind ? "--bind" : "--prefill");
        goto done;
    }
    if (optind >= argc) {
        fprintf(stderr, "tkexport run: no package given (expected a .tkpkg written by tkexport compile)\n");
        goto done;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "tkexport run: one package expected, got %d ('%s', '%s'...)\n", argc - optind, argv[optind],
                argv[optind + 1]);
        goto done;
    }
    const char *path = argv[optind];
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "tkexport run: '%s' does not exist\n", path);
        goto done;
    }
    if (outdir && tk_cli_output_clobbers("run", outdir, &path, 1))
        goto done; /* -o naming the package itself */

    /* the device: asked for, else the first GPU when there is one */
    tk_device dev = {TK_DEVICE_CPU, 0};
    char devname[32], why[300] = "";
    if (device) {
        if (tk_device_parse(&dev, device)) {
            fprintf(stderr, "tkexport run: %s\n", tk_error_last());
            goto done;
        }
        if (dev.kind == TK_DEVICE_CUDA && (err = tk_cuda_available())) {
            fprintf(stderr, "tkexport run: error: %s requested, but %s\n", device, tk_error_last());
            rc = TK_EXIT_DEVICE;
            goto done;
        }
    } else if (tk_cuda_available() == 0) {
        dev.kind = TK_DEVICE_CUDA;
    } else {
        snprintf(why, sizeof why, " (no GPU: %s)", tk_error_last());
    }
    tk_device_name(dev, devname, sizeof devname);

    /* the driver is initialized above, so this is the package's own cost: read, verify, load */
    double t_open = now_us();
    if ((err = tk_package_open_ex(&pkg, path, &popts))) {
        rc = fail(err);
        goto done;
    }
    t_open = now_us() - t_open;
    nin = tk_package_num_inputs(pkg);
    nout = tk_package_num_outputs(pkg);
    which = calloc(nin + 1, sizeof *which);
    host_in = calloc(nin + 1, sizeof *host_in);
    dev_in = calloc(nin + 1, sizeof *dev_in);
    outs = calloc(nout + 1, sizeof *outs);
    if (!which || !host_in || !dev_in || !outs) {
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    if (shapes != SHAPES_FIXED) {
        printf("%s: program '%s' on %s%s\n", path, tk_package_program(pkg), devname, why);
        rc = run_stream(pkg, dev, devname, shapes, shapes_arg, shapes_file, nbench, warmup, seed, do_profile, t_open,
                        &sopts, bind);
        goto done;
    }
    if (match_inputs(args, nargs, pkg, path, which))
        goto done; /* usage */
    if (outdir && tk_ends_with(outdir, ".npy") && nout != 1) {
        fprintf(stderr, "tkexport run: -o %s: program '%s' has %zu outputs, a .npy file holds one: give a folder "
                        "(each output becomes FOLDER/<name>.npy)\n", outdir, tk_package_program(pkg), nout);
        goto done;
    }
    for (int a = 0; a < nargs && outdir; a++)
        if (strncmp(args[a].spec, "random:", 7) && tk_cli_output_clobbers("run", outdir, &args[a].spec, 1))
            goto done;
    printf("%s: program '%s' on %s%s\n", path, tk_package_program(pkg), devname, why);

    char shape[256];
    for (size_t i = 0; i < nin; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        const input_arg *a = &args[which[i]];
        int usage;
        if ((err = load_input(&host_in[i], io, a, seed, &usage))) {
            rc = usage ? TK_EXIT_USAGE : fail(err);
            goto done;
        }
        printf("%s: %s  from %s\n", io->name, tensor_text(host_in[i], shape, sizeof shape), a->spec);
    }
    double t_session = now_us();
    if ((err = tk_session_new_ex(&s, pkg, dev, &sopts))) {
        rc = fail(err);
        goto done;
    }
    t_session = now_us() - t_session;
    /* tk_package_signer: "ed25519:... (key id 0123456789abcdef)" */
    const char *signer = tk_package_signer(pkg), *id = signer ? strstr(signer, "(key id ") : NULL;
    char checked[96];
    if (id)
        snprintf(checked, sizeof checked, "signed by key %.16s, signature and digests verified", id + 8);
    else
        snprintf(checked, sizeof checked, "unsigned, digests verified");
    printf("package opened in %.2f ms (%s, host object loaded); session on %s in %.2f ms (context, weights "
           "uploaded)\n", t_open / 1000.0, checked, devname, t_session / 1000.0);
    /* on a GPU the inputs go to the device once, so that --bench times the program alone */
    for (size_t i = 0; i < nin; i++) {
        if (dev.kind == TK_DEVICE_CPU) {
            dev_in[i] = host_in[i];
            continue;
        }
        tk_tensor *t = host_in[i];
        if ((err = tk_tensor_new(&dev_in[i], tk_session_ctx(s), dev, tk_tensor_dtype(t), tk_tensor_rank(t),
                                 tk_tensor_shape(t))) ||
            (err = tk_tensor_copy(tk_session_ctx(s), dev_in[i], t))) {
            rc = fail(err);
            goto done;
        }
    }
    if ((err = run_sync(s, dev_in, nin, outs, nout)) || (err = report_outputs(s, pkg, outs, nout, outdir))) {
        rc = fail(err);
        goto done;
    }
    int64_t batch = nin && tk_tensor_rank(host_in[0]) > 0 ? tk_tensor_dim(host_in[0], 0) : 1;
    /* the session's warm-up (docs/runtime.md) over before the timed calls */
    if (nbench > 0 && (err = tk_session_wait_ready(s)) < 0) {
        rc = fail(err);
        goto done;
    }
    if (nbench > 0 && (err = bench(s, dev_in, nin, outs, nout, nbench, warmup, batch, devname))) {
        rc = fail(err);
        goto done;
    }
    if (do_profile && (err = profile(s, dev_in, nin, outs, nout, dev, devname))) {
        rc = fail(err);
        goto done;
    }
    rc = tk_cli_stdout_done("run");
done:
    for (size_t i = 0; outs && i < nout; i++)
        tk_tensor_free(outs[i]);
    for (size_t i = 0; dev_in && i < nin; i++)
        if (dev_in[i] != host_in[i])
            tk_tensor_free(dev_in[i]);
    for (size_t i = 0; host_in && i < nin; i++)
        tk_tensor_free(host_in[i]);
    tk_session_free(s);
    tk_package_close(pkg);
    free(outs);
    free(dev_in);
    free(host_in);
    free(which);
    free(args);
    return rc;
}
