/* The sin/cos example end to end in eager mode: mylib::mysin on the GPU and through its CPU
 * fallback (the two agree), and mylib::mycos, which has no CPU fallback, on the GPU.
 *
 *   example_sincos [--device cpu|cuda|cuda:N] [-n N]
 *
 * On the CPU it runs mysin's fallback and shows that mycos refuses the CPU. Without --device it
 * uses the GPU when there is one. Exit status: 0 done, 1 failed, 2 usage, 77 the requested GPU
 * is not there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/op.h>
#include <tk/runtime.h>

static const tk_device CPU = {TK_DEVICE_CPU, 0};

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: example_sincos [--device cpu|cuda|cuda:N] [-n N]\n");
    return status;
}

/* The largest |a - b| / max(1, |b|) over n floats. */
static double max_error(const float *a, const float *b, int64_t n)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (e > worst || isnan(e))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* op(x) on ctx, copied back into a new CPU tensor (*host), or an error. */
static int run_on(tk_ctx *ctx, const char *op, tk_tensor *hx, tk_tensor **host)
{
    tk_tensor *x = NULL, *y = NULL;
    int64_t n = tk_numel(hx);
    int rc = 0;
    *host = NULL;
    if (tk_ctx_device(ctx).kind == TK_DEVICE_CPU) {
        *host = tk_call(ctx, op, hx);
        return *host ? 0 : -1;
    }
    if ((rc = tk_tensor_new(&x, ctx, tk_ctx_device(ctx), TK_F32, 1, &n)) || (rc = tk_tensor_copy(ctx, x, hx)))
        goto done;
    if (!(y = tk_call(ctx, op, x))) {
        rc = -1;
        goto done;
    }
    if ((rc = tk_tensor_new(host, NULL, CPU, TK_F32, 1, &n)) || (rc = tk_tensor_copy(ctx, *host, y))) {
        tk_tensor_free(*host);
        *host = NULL;
    }
done:
    tk_tensor_free(x);
    tk_tensor_free(y);
    return rc;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    int64_t n = 100000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            n = strtoll(argv[++i], &end, 10);
            if (*end || end == argv[i] || n < 1) {
                fprintf(stderr, "example_sincos: -n takes a whole number of at least 1, not '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(stdout, 0);
        else
            return usage(stderr, 2);
    }
    if (n < 1)
        return usage(stderr, 2);

    tk_device dev = CPU;
    if (device) {
        if (tk_device_parse(&dev, device)) {
            fprintf(stderr, "example_sincos: %s\n", tk_error_last());
            return 2;
        }
        if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available()) {
            fprintf(stderr, "example_sincos: %s requested, but %s\n", device, tk_error_last());
            return 77;
        }
    } else if (tk_cuda_available() == 0) {
        dev.kind = TK_DEVICE_CUDA;
    } else {
        fprintf(stderr, "example_sincos: no GPU (%s); running the CPU fallback only\n", tk_error_last());
    }

    int rc = 1;
    char name[32];
    tk_ctx *cpu = NULL, *gpu = NULL;
    tk_tensor *hx = NULL, *sin_cpu = NULL, *sin_gpu = NULL, *cos_gpu = NULL, *cos_cpu = NULL;
    if (tk_ctx_new(&cpu, CPU) || tk_tensor_new(&hx, NULL, CPU, TK_F32, 1, &n))
        goto fail;
    float *x = tk_tensor_data(hx);
    for (int64_t i = 0; i < n; i++)
        x[i] = -10.0f + 20.0f * (float)i / (float)n;

    /* mysin through its CPU fallback, against libm */
    if (run_on(cpu, "mylib::mysin", hx, &sin_cpu))
        goto fail;
    float *want = malloc(sizeof(float) * (size_t)n);
    if (!want)
        goto fail;
    for (int64_t i = 0; i < n; i++)
        want[i] = sinf(x[i]);
    printf("mylib::mysin on cpu (fallback): %lld elements, max error vs sinf %.3g\n", (long long)n,
           max_error(tk_tensor_data(sin_cpu), want, n));
    free(want);

    /* mycos has no CPU fallback: the runtime refuses it with one line naming the op */
    cos_cpu = tk_call(cpu, "mylib::mycos", hx);
    printf("mylib::mycos on cpu: %s\n", cos_cpu ? "ran (unexpected)" : tk_error_last());
    if (cos_cpu)
        goto done;

    if (dev.kind == TK_DEVICE_CUDA) {
        if (tk_ctx_new(&gpu, dev) || run_on(gpu, "mylib::mysin", hx, &sin_gpu) ||
            run_on(gpu, "mylib::mycos", hx, &cos_gpu))
            goto fail;
        tk_device_name(dev, name, sizeof name);
        double e_sin = max_error(tk_tensor_data(sin_gpu), tk_tensor_data(sin_cpu), n);
        const float *s = tk_tensor_data(sin_gpu), *c = tk_tensor_data(cos_gpu);
        double e_pyth = 0.0;
        for (int64_t i = 0; i < n; i++)
            e_pyth = fmax(e_pyth, fabs((double)s[i] * s[i] + (double)c[i] * c[i] - 1.0));
        printf("mylib::mysin on %s: max error vs the CPU fallback %.3g\n", name, e_sin);
        printf("mylib::mycos on %s: max |sin^2 + cos^2 - 1| %.3g\n", name, e_pyth);
        if (!(e_sin <= 1e-5 && e_pyth <= 1e-5)) {
            fprintf(stderr, "example_sincos: the GPU results are off (tolerance 1e-5)\n");
            goto done;
        }
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "example_sincos: %s\n", tk_error_last());
done:
    tk_tensor_free(hx);
    tk_tensor_free(sin_cpu);
    tk_tensor_free(sin_gpu);
    tk_tensor_free(cos_gpu);
    tk_tensor_free(cos_cpu);
    tk_ctx_free(cpu);
    tk_ctx_free(gpu);
    return rc;
}
