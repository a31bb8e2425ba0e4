/* GPT-2 as a program: token and position embeddings, N blocks of (LayerNorm, causal multi-head
 * attention, residual, LayerNorm, GELU MLP, residual), a final LayerNorm and the LM head tied to
 * the token embedding. The parameters carry the Hugging Face GPT-2 names and shapes
 * (openai-community/gpt2's model.safetensors: "h.0.attn.c_attn.weight" ..., its Conv1D weights
 * stored [in, out]), so that checkpoint loads unchanged; the transposes tk::linear needs read
 * parameters only, so a package computes them once, with the weights (constant folding).
 *
 *   gpt2       12 layers, 12 heads (GPT-2 small: 768 wide, 50257 tokens, 1024 positions)
 *   gpt2_tiny   2 layers,  4 heads (any width divisible by 4: the tests use 64)
 *
 * Inputs: ids and pos, i64 [batch, seq]: the tokens and their positions (Hugging Face's
 * position_ids; 0..seq-1 for one sequence). Output: logits [batch, seq, vocab] in the weights'
 * dtype. Widths come from the weights. */
#include <stdbool.h>
#include <stdio.h>
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

/* A parameter by its Hugging Face name; NULL (the run's first failure kept) when missing. */
static tk_tensor *param(tk_ctx *ctx, const char *fmt, int layer)
{
    char name[64];
    snprintf(name, sizeof name, fmt, layer);
    return tk_param(ctx, name);
}

/* y = x W + b with a Conv1D weight W [in, out]: tk::linear on W^T (folded in a package). */
static tk_tensor *conv1d(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b)
{
    tk_tensor *wt = tk_transpose(ctx, w, 0, 1);
    tk_tensor *y = tk_linear(ctx, x, wt, b);
    tk_tensor_free(wt);
    return y;
}

/* h + attention(ln_1(h)): c_attn makes q, k and v side by side, which tk::sdpa_qkv reads where
 * they lie (one GEMM of 3x the width, no slices copied) */
static tk_tensor *attention(tk_ctx *ctx, tk_tensor *h, int l, int heads)
{
    tk_tensor *a = tk_layer_norm(ctx, h, param(ctx, "h.%d.ln_1.weight", l), param(ctx, "h.%d.ln_1.bias", l), 1e-5);
    tk_tensor *qkv = conv1d(ctx, a, param(ctx, "h.%d.attn.c_attn.weight", l), param(ctx, "h.%d.attn.c_attn.bias", l));
    tk_tensor *o = tk_sdpa_qkv(ctx, qkv, heads, true); /* causal, scale 1/sqrt(head dim) */
    tk_tensor *p = conv1d(ctx, o, param(ctx, "h.%d.attn.c_proj.weight", l), param(ctx, "h.%d.attn.c_proj.bias", l));
    tk_tensor *y = tk_add(ctx, h, p);
    tk_tensor *tmp[] = {a, qkv, o, p};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tk_tensor_free(tmp[i]);
    return y;
}

/* h + mlp(ln_2(h)), the MLP c_fc (4x wider), GELU (tanh form, GPT-2's "gelu_new"), c_proj */
static tk_tensor *mlp(tk_ctx *ctx, tk_tensor *h, int l)
{
    tk_tensor *a = tk_layer_norm(ctx, h, param(ctx, "h.%d.ln_2.weight", l), param(ctx, "h.%d.ln_2.bias", l), 1e-5);
    tk_tensor *f = conv1d(ctx, a, param(ctx, "h.%d.mlp.c_fc.weight", l), param(ctx, "h.%d.mlp.c_fc.bias", l));
    tk_tensor *g = tk_gelu(ctx, f);
    tk_tensor *p = conv1d(ctx, g, param(ctx, "h.%d.mlp.c_proj.weight", l), param(ctx, "h.%d.mlp.c_proj.bias", l));
    tk_tensor *y = tk_add(ctx, h, p);
    tk_tensor *tmp[] = {a, f, g, p};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tk_tensor_free(tmp[i]);
    return y;
}

static int gpt2(tk_ctx *ctx, tk_tensor *const *in, tk_tensor **out, int layers, int heads)
{
    tk_tensor *wte = tk_param(ctx, "wte.weight");
    tk_tensor *te = tk_embedding(ctx, wte, in[0]), *pe = tk_embedding(ctx, tk_param(ctx, "wpe.weight"), in[1]);
    tk_tensor *h = tk_add(ctx, te, pe);
    tk_tensor_free(te);
    tk_tensor_free(pe);
    for (int l = 0; l < layers && h; l++) {
        tk_tensor *a = attention(ctx, h, l, heads);
        tk_tensor_free(h);
        h = a ? mlp(ctx, a, l) : NULL;
        tk_tensor_free(a);
    }
    tk_tensor *f = tk_layer_norm(ctx, h, tk_param(ctx, "ln_f.weight"), tk_param(ctx, "ln_f.bias"), 1e-5);
    /* The LM head: wte [vocab, width] is tk::linear's [N, K]. 50257 logits a row are not whole
     * 16-byte vectors, and cuBLASLt is 6x slower on such rows (bench: examples/gpt2/README.md):
     * the vocabulary padded to a multiple of 64 (as llm.c does; the extra rows are copies of the
     * first ones, their logits dropped), the padded weight folded once with the weights. */
    int64_t vocab = tk_tensor_dim(wte, 0), pad = (vocab + 63) / 64 * 64 - vocab;
    if (pad) {
        tk_tensor *extra = tk_narrow(ctx, wte, 0, 0, pad);
        tk_tensor *wpad = tk_call(ctx, "tk::cat", wte, extra, 0);
        tk_tensor *logits = tk_linear(ctx, f, wpad, NULL);
        out[0] = tk_narrow(ctx, logits, 2, 0, vocab);
        tk_tensor_free(extra);
        tk_tensor_free(wpad);
        tk_tensor_free(logits);
    } else {
        out[0] = tk_linear(ctx, f, wte, NULL);
    }
    tk_tensor_free(h);
    tk_tensor_free(f);
    return out[0] ? 0 : TK_EINVAL;
}

TK_PROGRAM(gpt2_small, "gpt2", TK_INPUT("ids", TK_I64, TK_DIM("batch", 1, 16), TK_DIM("seq", 1, 1024)),
           TK_INPUT("pos", TK_I64, TK_DIM("batch", 1, 16), TK_DIM("seq", 1, 1024)))
{
    return gpt2(ctx, in, out, 12, 12);
}

TK_PROGRAM(gpt2_tiny, "gpt2_tiny", TK_INPUT("ids", TK_I64, TK_DIM("batch", 1, 16), TK_DIM("seq", 1, 128)),
           TK_INPUT("pos", TK_I64, TK_DIM("batch", 1, 16), TK_DIM("seq", 1, 128)))
{
    return gpt2(ctx, in, out, 2, 4);
}
