/* The MLP example end to end in eager mode: the seed's model, linear(128 -> 64), custom_ops::silu,
 * linear(64 -> 128), in bf16, with deterministic pseudo-random weights, on a batch given on the
 * command line. It prints a checksum of the output; on a GPU it also runs the same model on the
 * CPU (tk::linear's reference and custom_ops::silu's fallback) and compares.
 *
 *   example_mlp [--device cpu|cuda|cuda:N] [BATCH]      (BATCH 1..1024, default 8)
 *   example_mlp --write-weights FILE.safetensors
 *
 * The second form writes the same parameters, under the model's state_dict names (model.c), as
 * safetensors through tk/safetensors.h's writer: the build makes mlp.safetensors with it.
 *
 * Exit status: 0 done, 1 failed or the GPU and CPU disagree, 2 usage, 77 the requested GPU is not
 * there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>
#include <tk/safetensors.h>

enum { IN = 128, HIDDEN = 64, OUT = 128, MAX_BATCH = 1024 };

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* The model's parameters and input, on one device. */
typedef struct mlp {
    tk_tensor *w1, *b1, *w2, *b2, *x;
} mlp;

static void mlp_free(mlp *m)
{
    tk_tensor_free(m->w1);
    tk_tensor_free(m->b1);
    tk_tensor_free(m->w2);
    tk_tensor_free(m->b2);
    tk_tensor_free(m->x);
}

/* xorshift32: the same numbers on every machine */
static uint32_t g_state = 0x9e3779b9u;
static float uniform(float lo, float hi)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 17;
    g_state ^= g_state << 5;
    return lo + (hi - lo) * (float)(g_state >> 8) * (1.0f / 16777216.0f);
}

/* A bf16 CPU tensor, uniform in [-bound, bound) like nn.Linear's initialization. */
static int random_bf16(tk_tensor **out, int rank, const int64_t *shape, float bound)
{
    int rc = tk_tensor_new(out, NULL, CPU, TK_BF16, rank, shape);
    if (rc)
        return rc;
    uint16_t *p = tk_tensor_data(*out);
    for (int64_t i = 0; i < tk_numel(*out); i++)
        p[i] = tk_f32_to_bf16(uniform(-bound, bound));
    return 0;
}

static int mlp_init(mlp *m, int64_t batch)
{
    const int64_t w1[] = {HIDDEN, IN}, b1[] = {HIDDEN}, w2[] = {OUT, HIDDEN}, b2[] = {OUT}, x[] = {batch, IN};
    memset(m, 0, sizeof *m);
    int rc;
    if ((rc = random_bf16(&m->w1, 2, w1, 1.0f / sqrtf(IN))) || (rc = random_bf16(&m->b1, 1, b1, 1.0f / sqrtf(IN))) ||
        (rc = random_bf16(&m->w2, 2, w2, 1.0f / sqrtf(HIDDEN))) ||
        (rc = random_bf16(&m->b2, 1, b2, 1.0f / sqrtf(HIDDEN))) || (rc = random_bf16(&m->x, 2, x, 1.0f)))
        mlp_free(m);
    return rc;
}

/* A copy of a tensor on ctx's device. */
static int to_device(tk_tensor **out, tk_ctx *ctx, const tk_tensor *t)
{
    int rc = tk_tensor_new(out, ctx, tk_ctx_device(ctx), tk_tensor_dtype(t), tk_tensor_rank(t), tk_tensor_shape(t));
    if (!rc && (rc = tk_tensor_copy(ctx, *out, t))) {
        tk_tensor_free(*out);
        *out = NULL;
    }
    return rc;
}

static int mlp_to_device(mlp *dst, tk_ctx *ctx, const mlp *src)
{
    int rc;
    memset(dst, 0, sizeof *dst);
    if ((rc = to_device(&dst->w1, ctx, src->w1)) || (rc = to_device(&dst->b1, ctx, src->b1)) ||
        (rc = to_device(&dst->w2, ctx, src->w2)) || (rc = to_device(&dst->b2, ctx, src->b2)) ||
        (rc = to_device(&dst->x, ctx, src->x)))
        mlp_free(dst);
    return rc;
}

/* y = linear2(silu(linear1(x))), each step an op call on ctx's device; NULL on failure. */
static tk_tensor *mlp_forward(tk_ctx *ctx, const mlp *m)
{
    tk_tensor *h = tk_linear(ctx, m->x, m->w1, m->b1);
    if (!h)
        return NULL;
    tk_tensor *a = tk_call(ctx, "custom_ops::silu", h);
    tk_tensor_free(h);
    if (!a)
        return NULL;
    tk_tensor *y = tk_linear(ctx, a, m->w2, m->b2);
    tk_tensor_free(a);
    return y;
}

/* The output as floats on the host (a new array), or NULL. */
static float *to_host_floats(tk_ctx *ctx, const tk_tensor *y)
{
    tk_tensor *h = NULL;
    float *f = NULL;
    if (tk_tensor_device(y).kind == TK_DEVICE_CPU) {
        h = (tk_tensor *)y;
    } else if (tk_tensor_new(&h, NULL, CPU, TK_BF16, tk_tensor_rank(y), tk_tensor_shape(y)) ||
               tk_tensor_copy(ctx, h, y)) {
        goto done;
    }
    if (!(f = malloc(sizeof(float) * (size_t)tk_numel(y))))
        goto done;
    const uint16_t *p = tk_tensor_data(h);
    for (int64_t i = 0; i < tk_numel(y); i++)
        f[i] = tk_bf16_to_f32(p[i]);
done:
    if (h != y)
        tk_tensor_free(h);
    return f;
}

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: example_mlp [--device cpu|cuda|cuda:N] [BATCH]   (BATCH 1..%d, default 8)\n"
                "       example_mlp --write-weights FILE.safetensors\n", MAX_BATCH);
    return status;
}

/* The parameters (bf16, the xorshift seed above) as safetensors with nn.Linear's names. */
static int write_weights(const char *path)
{
    mlp m;
    if (mlp_init(&m, 1)) {
        fprintf(stderr, "example_mlp: %s\n", tk_error_last());
        return 1;
    }
    const char *names[] = {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
    tk_tensor *tensors[] = {m.w1, m.b1, m.w2, m.b2};
    int rc = tk_safetensors_write(path, 4, names, tensors);
    if (rc)
        fprintf(stderr, "example_mlp: %s\n", tk_error_last());
    mlp_free(&m);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    int64_t batch = 8;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--write-weights") && i + 1 < argc) {
            return write_weights(argv[i + 1]);
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            return usage(stdout, 0);
        } else {
            batch = strtoll(argv[i], &end, 10);
            if (*end || batch < 1 || batch > MAX_BATCH)
                return usage(stderr, 2);
        }
    }

    tk_device dev = CPU;
    if (device) {
        if (tk_device_parse(&dev, device)) {
            fprintf(stderr, "example_mlp: %s\n", tk_error_last());
            return 2;
        }
        if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available()) {
            fprintf(stderr, "example_mlp: %s requested, but %s\n", device, tk_error_last());
            return 77;
        }
    } else if (tk_cuda_available() == 0) {
        dev.kind = TK_DEVICE_CUDA;
    } else {
        fprintf(stderr, "example_mlp: no GPU (%s); running on the CPU\n", tk_error_last());
    }

    int rc = 1;
    char name[32];
    mlp host, on_gpu = {0};
    tk_ctx *cpu = NULL, *gpu = NULL;
    tk_tensor *y_cpu = NULL, *y_gpu = NULL;
    float *fc = NULL, *fg = NULL;
    if (mlp_init(&host, batch)) {
        fprintf(stderr, "example_mlp: %s\n", tk_error_last());
        return 1;
    }
    if (tk_ctx_new(&cpu, CPU) || !(y_cpu = mlp_forward(cpu, &host)) || !(fc = to_host_floats(cpu, y_cpu)))
        goto fail;
    const float *y = fc;
    if (dev.kind == TK_DEVICE_CUDA) {
        if (tk_ctx_new(&gpu, dev) || mlp_to_device(&on_gpu, gpu, &host) || !(y_gpu = mlp_forward(gpu, &on_gpu)) ||
            !(fg = to_host_floats(gpu, y_gpu)))
            goto fail;
        y = fg;
    }

    int64_t n = batch * OUT;
    double sum = 0.0, sum_abs = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += y[i];
        sum_abs += fabs(y[i]);
    }
    printf("mlp on %s, batch %lld: y [%lld, %d] bf16, checksum sum %.6f sum|y| %.6f, y[0, 0:4] = %.6f %.6f %.6f %.6f\n",
           tk_device_name(dev, name, sizeof name), (long long)batch, (long long)batch, OUT, sum, sum_abs, y[0], y[1],
           y[2], y[3]);

    if (fg) {
        /* Both run in bf16 with f32 accumulation, in different orders: results may differ by a
         * bf16 rounding or two of the hidden layer, which stays well under 1e-2 here
         * (|y| is about 0.1). */
        double worst = 0.0;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)fg[i] - fc[i]);
            worst = fmax(worst, d);
            if (!(d <= 1e-2 + 1e-2 * fabs(fc[i])))
                bad++;
        }
        printf("gpu vs cpu: max |difference| %.3g, %lld of %lld outside 1e-2 + 1e-2 |y|\n", worst, (long long)bad,
               (long long)n);
        if (bad)
            goto done;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "example_mlp: %s\n", tk_error_last());
done:
    free(fc);
    free(fg);
    tk_tensor_free(y_cpu);
    tk_tensor_free(y_gpu);
    mlp_free(&host);
    mlp_free(&on_gpu);
    tk_ctx_free(cpu);
    tk_ctx_free(gpu);
    return rc;
}
