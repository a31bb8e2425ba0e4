/* The reference side of the `tkexport run` end-to-end test (tests/run_mlp.cmake), independent of
 * tkexport's .npy code and of its ops:
 *
 *   run_ref input X.npy BATCH [COLS]   writes a float32 [BATCH, COLS] .npy (COLS 128), header by
 *                                      hand, values deterministic in [-1, 1)
 *   run_ref check W.safetensors X.npy Y.npy
 *                                      computes linear2(silu(linear1(x))) in float from the bf16
 *                                      weights (x rounded to bf16 first, as the model's input is)
 *                                      and requires every element of Y (float32, as tkexport run
 *                                      writes bf16 outputs) within 1e-2 + 1e-2 |y| of it
 *
 * Exit status: 0 done (or within tolerance), 1 a mismatch or an unreadable file, 2 usage. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/safetensors.h>

enum { IN = 128, HIDDEN = 64, OUT = 128 };

static int write_input(const char *path, long batch, long cols)
{
    char header[128];
    int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld, %ld), }", batch,
                     cols);
    int total = (10 + n + 1 + 63) / 64 * 64, hlen = total - 10;
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(header, 1, (size_t)n, f);
    for (int i = n; i < hlen - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    uint32_t s = 12345u;
    for (long i = 0; i < batch * cols; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) / 8388608.0f - 1.0f;
        fwrite(&v, 4, 1, f);
    }
    return fclose(f) ? 1 : 0;
}

/* A float32 C-order .npy of rank 2 (as this helper and tkexport run write them): *rows x *cols
 * values in a malloc'd array, or NULL with a message. */
static float *read_f32_2d(const char *path, long *rows, long *cols)
{
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    char header[4096];
    float *v = NULL;
    if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01\x00", 8)) {
        fprintf(stderr, "run_ref: '%s' is not a version 1.0 .npy file\n", path);
        goto done;
    }
    size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (hlen >= sizeof header || fread(header, 1, hlen, f) != hlen) {
        fprintf(stderr, "run_ref: '%s': bad header\n", path);
        goto done;
    }
    header[hlen] = '\0';
    const char *shape = strstr(header, "'shape': (");
    if (!strstr(header, "'descr': '<f4'") || !strstr(header, "'fortran_order': False") || !shape ||
        sscanf(shape, "'shape': (%ld, %ld)", rows, cols) != 2) {
        fprintf(stderr, "run_ref: '%s': expected a float32 C-order 2-d array, header %s\n", path, header);
        goto done;
    }
    size_t n = (size_t)(*rows * *cols);
    if (!(v = malloc(n * sizeof *v + 1)) || fread(v, sizeof *v, n, f) != n) {
        fprintf(stderr, "run_ref: '%s': truncated\n", path);
        free(v);
        v = NULL;
    }
done:
    if (f)
        fclose(f);
    return v;
}

/* The weight named `name` as floats (bf16 widened), checking its element count. */
static float *weight(const tk_safetensors *st, const char *name, size_t n)
{
    const tk_safetensors_entry *e = tk_safetensors_find(st, name);
    tk_dtype dtype;
    tk_tensor *t = NULL;
    float *w = NULL;
    if (!e || tk_safetensors_entry_info(e, &dtype, NULL, NULL) || dtype != TK_BF16 ||
        tk_safetensors_load(&t, NULL, (tk_device){TK_DEVICE_CPU, 0}, st, e) || (size_t)tk_numel(t) != n) {
        fprintf(stderr, "run_ref: no bf16 tensor '%s' of %zu elements in the weights\n", name, n);
        goto done;
    }
    const uint16_t *h = tk_tensor_data(t);
    if ((w = malloc(n * sizeof *w)))
        for (size_t i = 0; i < n; i++)
            w[i] = tk_bf16_to_f32(h[i]);
done:
    tk_tensor_free(t);
    return w;
}

static int check(const char *weights, const char *xpath, const char *ypath)
{
    int rc = 1;
    long xr, xc, yr, yc;
    tk_safetensors *st = NULL;
    float *x = read_f32_2d(xpath, &xr, &xc), *y = read_f32_2d(ypath, &yr, &yc);
    float *w1 = NULL, *b1 = NULL, *w2 = NULL, *b2 = NULL;
    if (!x || !y)
        goto done;
    if (xc != IN || yr != xr || yc != OUT) {
        fprintf(stderr, "run_ref: x is [%ld, %ld] and y [%ld, %ld]; expected [B, %d] and [B, %d]\n", xr, xc, yr, yc, IN,
                OUT);
        goto done;
    }
    if (tk_safetensors_open(&st, weights)) {
        fprintf(stderr, "run_ref: %s\n", tk_error_last());
        goto done;
    }
    if (!(w1 = weight(st, "linear1.weight", HIDDEN * IN)) || !(b1 = weight(st, "linear1.bias", HIDDEN)) ||
        !(w2 = weight(st, "linear2.weight", OUT * HIDDEN)) || !(b2 = weight(st, "linear2.bias", OUT)))
        goto done;
    double worst = 0;
    long bad = 0;
    for (long r = 0; r < xr; r++) {
        float xb[IN], h[HIDDEN];
        for (int k = 0; k < IN; k++)
            xb[k] = tk_bf16_to_f32(tk_f32_to_bf16(x[r * IN + k])); /* the model's input is bf16 */
        for (int j = 0; j < HIDDEN; j++) {
            double acc = b1[j];
            for (int k = 0; k < IN; k++)
                acc += (double)w1[j * IN + k] * xb[k];
            h[j] = (float)(acc / (1.0 + exp(-acc)));
        }
        for (int o = 0; o < OUT; o++) {
            double acc = b2[o];
            for (int j = 0; j < HIDDEN; j++)
                acc += (double)w2[o * HIDDEN + j] * h[j];
            double d = fabs(y[r * OUT + o] - acc);
            worst = fmax(worst, d);
            if (!(d <= 1e-2 + 1e-2 * fabs(acc))) {
                if (bad++ < 5)
                    fprintf(stderr, "run_ref: y[%ld, %d] is %g, the reference %g\n", r, o, (double)y[r * OUT + o], acc);
            }
        }
    }
    printf("run_ref: %ld x %d outputs, max |difference| %.3g, %ld outside 1e-2 + 1e-2 |y|\n", xr, OUT, worst, bad);
    rc = bad ? 1 : 0;
done:
    free(x), free(y), free(w1), free(b1), free(w2), free(b2);
    tk_safetensors_free(st);
    return rc;
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "input"))
        return write_input(argv[2], atol(argv[3]), argc == 5 ? atol(argv[4]) : IN);
    if (argc == 5 && !strcmp(argv[1], "check"))
        return check(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: run_ref input X.npy BATCH [COLS] | run_ref check W.safetensors X.npy Y.npy\n");
    return 2;
}
