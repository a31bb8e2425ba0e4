/* The GPT-2 example (model.c) eagerly, and the writer of its weights.
 *
 *   example_gpt2 --write-weights FILE.safetensors [--tiny] [--dtype bf16|f32]
 *   example_gpt2 --weights FILE.safetensors [--tiny] [--device cpu|cuda|cuda:N] [BATCH SEQ]
 *
 * The first form writes random parameters with a fixed seed under the Hugging Face GPT-2 names
 * and shapes (no checkpoint can be downloaded here): GPT-2 small (vocab 50257, 1024 positions,
 * width 768, 12 layers), or with --tiny a 2-layer model of width 64 (vocab 500, 128 positions;
 * not a multiple of 64, so the tiny model pads its LM head and narrows the logits as GPT-2 does)
 * for tests. Linear weights ~ N(0, 0.02) as GPT-2's initialization (the residual projections
 * scaled by 1/sqrt(2 layers)), LayerNorm weights 1 and biases 0 plus small noise, so that
 * activations stay in the ranges a trained model has. The second form runs the program on
 * tokens drawn with a fixed seed (positions 0..SEQ-1) and prints the logits' shape, mean and
 * the argmax of the last position of each sequence.
 *
 * Exit status: 0 done, 1 failed, 2 usage, 77 the requested GPU is not there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>
#include <tk/safetensors.h>

static const tk_device CPU = {TK_DEVICE_CPU, 0};

typedef struct config {
    int64_t vocab, ctx, width, layers;
} config;

static const config SMALL = {50257, 1024, 768, 12}, TINY = {500, 128, 64, 2};

/* xorshift32 and Box-Muller: the same numbers on every machine */
static uint32_t g_state = 0x2545f491u;
static double uniform01(void)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 17;
    g_state ^= g_state << 5;
    return ((double)(g_state >> 8) + 0.5) / 16777216.0;
}
static float normal(float mean, float std)
{
    double u = uniform01(), v = uniform01();
    return mean + std * (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static tk_tensor *random_param(tk_dtype dt, int rank, int64_t d0, int64_t d1, float mean, float std)
{
    const int64_t shape[2] = {d0, d1};
    tk_tensor *t = NULL;
    if (tk_tensor_new(&t, NULL, CPU, dt, rank, shape))
        return NULL;
    for (int64_t i = 0; i < tk_numel(t); i++) {
        float v = normal(mean, std);
        if (dt == TK_F32)
            ((float *)tk_tensor_data(t))[i] = v;
        else
            ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_bf16(v);
    }
    return t;
}

static int write_weights(const char *path, const config *c, tk_dtype dt)
{
    enum { PER_LAYER = 12, MAX = 4 + 12 * PER_LAYER };
    char names[MAX][64];
    const char *np[MAX];
    tk_tensor *ts[MAX];
    int n = 0, rc = 0;
    int64_t E = c->width;
    float proj = 0.02f / sqrtf(2.0f * (float)c->layers);
#define ADD(nm, l, rank, d0, d1, mean, std)                                                  \
    do {                                                                                     \
        snprintf(names[n], sizeof names[n], nm, l);                                          \
        np[n] = names[n];                                                                    \
        ts[n++] = random_param(dt, rank, d0, d1, mean, std);                                 \
    } while (0)
    ADD("wte.weight%.0d", 0, 2, c->vocab, E, 0.0f, 0.02f);
    ADD("wpe.weight%.0d", 0, 2, c->ctx, E, 0.0f, 0.01f);
    for (int l = 0; l < c->layers; l++) {
        ADD("h.%d.ln_1.weight", l, 1, E, 0, 1.0f, 0.05f);
        ADD("h.%d.ln_1.bias", l, 1, E, 0, 0.0f, 0.02f);
        ADD("h.%d.attn.c_attn.weight", l, 2, E, 3 * E, 0.0f, 0.02f); /* Conv1D: [in, out] */
        ADD("h.%d.attn.c_attn.bias", l, 1, 3 * E, 0, 0.0f, 0.02f);
        ADD("h.%d.attn.c_proj.weight", l, 2, E, E, 0.0f, proj);
        ADD("h.%d.attn.c_proj.bias", l, 1, E, 0, 0.0f, 0.02f);
        ADD("h.%d.ln_2.weight", l, 1, E, 0, 1.0f, 0.05f);
        ADD("h.%d.ln_2.bias", l, 1, E, 0, 0.0f, 0.02f);
        ADD("h.%d.mlp.c_fc.weight", l, 2, E, 4 * E, 0.0f, 0.02f);
        ADD("h.%d.mlp.c_fc.bias", l, 1, 4 * E, 0, 0.0f, 0.02f);
        ADD("h.%d.mlp.c_proj.weight", l, 2, 4 * E, E, 0.0f, proj);
        ADD("h.%d.mlp.c_proj.bias", l, 1, E, 0, 0.0f, 0.02f);
    }
    ADD("ln_f.weight%.0d", 0, 1, E, 0, 1.0f, 0.05f);
    ADD("ln_f.bias%.0d", 0, 1, E, 0, 0.0f, 0.02f);
#undef ADD
    for (int i = 0; i < n; i++)
        if (!ts[i])
            rc = TK_ENOMEM;
    if (!rc)
        rc = tk_safetensors_write(path, (size_t)n, np, ts);
    for (int i = 0; i < n; i++)
        tk_tensor_free(ts[i]);
    return rc;
}

static int usage(FILE *to, int status)
{
    fprintf(to, "usage: example_gpt2 --write-weights FILE.safetensors [--tiny] [--dtype bf16|f32]\n"
                "       example_gpt2 --weights FILE.safetensors [--tiny] [--device cpu|cuda|cuda:N] [BATCH SEQ]\n"
                "Writes GPT-2's parameters (random, fixed seed, Hugging Face names), or runs the model\n"
                "(model.c: 'gpt2', or 'gpt2_tiny' with --tiny) eagerly on tokens drawn with a fixed seed.\n");
    return status;
}

int main(int argc, char **argv)
{
    const char *write = NULL, *weights = NULL, *device = NULL;
    int tiny = 0;
    tk_dtype dt = TK_BF16;
    int64_t batch = 2, seq = 16;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout, 0);
        if (!strcmp(a, "--tiny")) {
            tiny = 1;
        } else if ((!strcmp(a, "--write-weights") || !strcmp(a, "--weights") || !strcmp(a, "--device") ||
                    !strcmp(a, "--dtype")) && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--write-weights"))
                write = v;
            else if (!strcmp(a, "--weights"))
                weights = v;
            else if (!strcmp(a, "--device"))
                device = v;
            else if (tk_dtype_parse(&dt, v) || (dt != TK_BF16 && dt != TK_F32)) {
                fprintf(stderr, "example_gpt2: --dtype '%s': expected bf16 or f32\n", v);
                return 2;
            }
        } else if (a[0] != '-' && npos < 2) {
            char *end;
            long long v = strtoll(a, &end, 10);
            if (*end || v < 1) {
                fprintf(stderr, "example_gpt2: '%s' is not a positive integer\n", a);
                return 2;
            }
            *(npos++ ? &seq : &batch) = v;
        } else {
            fprintf(stderr, "example_gpt2: unexpected argument '%s'\n", a);
            return usage(stderr, 2);
        }
    }
    const config *c = tiny ? &TINY : &SMALL;
    if (write) {
        if (write_weights(write, c, dt)) {
            fprintf(stderr, "example_gpt2: %s\n", tk_error_last());
            return 1;
        }
        printf("wrote %s (%s GPT-2, %s, %lld layers, width %lld)\n", write, tiny ? "tiny" : "small",
               tk_dtype_name(dt), (long long)c->layers, (long long)c->width);
        return 0;
    }
    if (!weights)
        return usage(stderr, 2);
    if (seq > c->ctx || batch > 16) {
        fprintf(stderr, "example_gpt2: batch %lld seq %lld: at most 16 and %lld\n", (long long)batch, (long long)seq,
                (long long)c->ctx);
        return 2;
    }
    tk_device dev = CPU;
    if (device && tk_device_parse(&dev, device)) {
        fprintf(stderr, "example_gpt2: %s\n", tk_error_last());
        return 2;
    }
    if (dev.kind == TK_DEVICE_CUDA && tk_cuda_available() != 0) {
        fprintf(stderr, "example_gpt2: skipped: %s\n", tk_error_last());
        return 77;
    }
    tk_ctx *ctx = NULL;
    tk_tensor *in[2] = {NULL, NULL}, *dev_in[2] = {NULL, NULL}, *out[1] = {NULL}, *host = NULL;
    int nout = 0, rc;
    const int64_t shape[2] = {batch, seq};
    if ((rc = tk_ctx_new(&ctx, dev)) || (rc = tk_ctx_set_weights(ctx, weights)) ||
        (rc = tk_tensor_new(&in[0], NULL, CPU, TK_I64, 2, shape)) || (rc = tk_tensor_new(&in[1], NULL, CPU, TK_I64, 2, shape)))
        goto done;
    for (int64_t i = 0; i < batch * seq; i++) {
        ((int64_t *)tk_tensor_data(in[0]))[i] = (int64_t)(uniform01() * (double)c->vocab) % c->vocab;
        ((int64_t *)tk_tensor_data(in[1]))[i] = i % seq;
    }
    for (int i = 0; i < 2; i++)
        if ((rc = tk_tensor_new(&dev_in[i], ctx, dev, TK_I64, 2, shape)) || (rc = tk_tensor_copy(ctx, dev_in[i], in[i])))
            goto done;
    if ((rc = tk_program_run(ctx, tiny ? "gpt2_tiny" : "gpt2", dev_in, 2, out, &nout)))
        goto done;
    if ((rc = tk_tensor_new(&host, NULL, CPU, tk_tensor_dtype(out[0]), 3, tk_tensor_shape(out[0]))) ||
        (rc = tk_tensor_copy(ctx, host, out[0])))
        goto done;
    double sum = 0;
    int64_t V = tk_tensor_dim(host, 2);
    for (int64_t i = 0; i < tk_numel(host); i++) {
        float v = dt == TK_F32 ? ((float *)tk_tensor_data(host))[i] : tk_bf16_to_f32(((uint16_t *)tk_tensor_data(host))[i]);
        if (!isfinite(v)) {
            rc = tk_error_set(TK_EINVAL, "logit %lld is %g", (long long)i, v);
            goto done;
        }
        sum += v;
    }
    printf("logits %s[%lld, %lld, %lld] on %s, mean %.6g; next token of each sequence:", tk_dtype_name(tk_tensor_dtype(host)),
           (long long)batch, (long long)seq, (long long)V, device ? device : "cpu", sum / (double)tk_numel(host));
    for (int64_t b = 0; b < batch; b++) {
        int64_t best = 0;
        float bv = -INFINITY;
        for (int64_t v = 0; v < V; v++) {
            int64_t at = (b * seq + seq - 1) * V + v;
            float x = dt == TK_F32 ? ((float *)tk_tensor_data(host))[at] : tk_bf16_to_f32(((uint16_t *)tk_tensor_data(host))[at]);
            if (x > bv)
                bv = x, best = v;
        }
        printf(" %lld", (long long)best);
    }
    printf("\n");
done:
    if (rc)
        fprintf(stderr, "example_gpt2: %s\n", tk_error_last());
    for (int i = 0; i < 2; i++) {
        tk_tensor_free(in[i]);
        tk_tensor_free(dev_in[i]);
    }
    tk_tensor_free(out[0]);
    tk_tensor_free(host);
    tk_ctx_free(ctx);
    return rc ? 1 : 0;
}
