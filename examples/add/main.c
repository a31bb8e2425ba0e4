/* The vector-add example end to end in eager mode: out = x + y through mylib::add, on a GPU
 * (add_kernel, launched by the op through tk_wrap) or on the CPU (the op's fallback).
 *
 *   example_add [--device cpu|cuda|cuda:N] [-n N]
 *
 * Without --device it uses the GPU when there is one and says so when there is not. Exit status:
 * 0 done, 1 failed, 2 usage, 77 the requested GPU is not there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/op.h>
#include <tk/runtime.h>

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: example_add [--device cpu|cuda|cuda:N] [-n N]\n");
    return status;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    int64_t n = 1 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            n = strtoll(argv[++i], &end, 10);
            if (*end || end == argv[i] || n < 1) {
                fprintf(stderr, "example_add: -n takes a whole number of at least 1, not '%s'\n", argv[i]);
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

    tk_device dev = {TK_DEVICE_CPU, 0};
    if (device) {
        if (tk_device_parse(&dev, device)) {
            fprintf(stderr, "example_add: %s\n", tk_error_last());
            return 2;
        }
        if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available()) {
            fprintf(stderr, "example_add: %s requested, but %s\n", device, tk_error_last());
            return 77;
        }
    } else if (tk_cuda_available() == 0) {
        dev.kind = TK_DEVICE_CUDA;
    } else {
        fprintf(stderr, "example_add: no GPU (%s); running on the CPU\n", tk_error_last());
    }

    int rc = 1;
    char name[32];
    tk_ctx *ctx = NULL;
    tk_tensor *hx = NULL, *hy = NULL, *hout = NULL, *x = NULL, *y = NULL, *out = NULL;
    if (tk_ctx_new(&ctx, dev) || tk_tensor_new(&hx, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 1, &n) ||
        tk_tensor_new(&hy, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 1, &n))
        goto fail;
    float *xs = tk_tensor_data(hx), *ys = tk_tensor_data(hy);
    for (int64_t i = 0; i < n; i++) {
        xs[i] = sinf((float)i);
        ys[i] = 0.5f * (float)(i % 1000);
    }

    /* inputs on the context's device: the CPU tensors themselves, or GPU copies */
    if (dev.kind == TK_DEVICE_CUDA) {
        if (tk_tensor_new(&x, ctx, dev, TK_F32, 1, &n) || tk_tensor_new(&y, ctx, dev, TK_F32, 1, &n) ||
            tk_tensor_copy(ctx, x, hx) || tk_tensor_copy(ctx, y, hy))
            goto fail;
    }
    out = tk_call(ctx, "mylib::add", x ? x : hx, y ? y : hy);
    if (!out)
        goto fail;
    if (dev.kind == TK_DEVICE_CUDA) {
        if (tk_tensor_new(&hout, NULL, (tk_device){TK_DEVICE_CPU, 0}, TK_F32, 1, &n) || tk_tensor_copy(ctx, hout, out))
            goto fail;
    }

    const float *o = tk_tensor_data(hout ? hout : out);
    int64_t wrong = 0;
    double checksum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (o[i] != xs[i] + ys[i]) /* one float addition: exact on both devices */
            wrong++;
        checksum += o[i];
    }
    printf("mylib::add on %s: %lld elements, %lld wrong, checksum %.6f\n", tk_device_name(dev, name, sizeof name),
           (long long)n, (long long)wrong, checksum);
    rc = wrong ? 1 : 0;
    goto done;
fail:
    fprintf(stderr, "example_add: %s\n", tk_error_last());
done:
    tk_tensor_free(out);
    tk_tensor_free(hout);
    tk_tensor_free(x);
    tk_tensor_free(y);
    tk_tensor_free(hx);
    tk_tensor_free(hy);
    tk_ctx_free(ctx);
    return rc;
}
