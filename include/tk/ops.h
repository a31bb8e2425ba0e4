/* Typed helpers for the built-in ops of libtkrt (kernels/): each calls its op through the
 * registry (tk_call), so it runs on the context's device: the CUDA kernel on a GPU, the CPU
 * reference on the CPU. Each returns a new tensor on the context's device, owned by the caller
 * (tk_tensor_free), or NULL with the reason in tk_error_last(). */
#ifndef TK_OPS_H
#define TK_OPS_H

#include <tk/op.h>
#include <tk/export.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

/* Elementwise, on f32, f16 or bf16; the two inputs of add and mul have the same dtype and
 * shape (no broadcasting). Math is done in float; 16-bit results are rounded to nearest even. */
tk_tensor *tk_add(tk_ctx *ctx, tk_tensor *a, tk_tensor *b);  /* tk::add: a + b */
tk_tensor *tk_mul(tk_ctx *ctx, tk_tensor *a, tk_tensor *b);  /* tk::mul: a * b */
tk_tensor *tk_sin(tk_ctx *ctx, tk_tensor *x);                /* tk::sin */
tk_tensor *tk_cos(tk_ctx *ctx, tk_tensor *x);                /* tk::cos */
tk_tensor *tk_silu(tk_ctx *ctx, tk_tensor *x);               /* tk::silu: x * sigmoid(x) */
/* tk::gelu, schema (Tensor x, str approximate="tanh") -> Tensor, PyTorch's F.gelu with its
 * `approximate` (the default differs: PyTorch's is "none"; here "tanh", the form GPT-2 uses and
 * packages made before the argument computed):
 *   "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   tk_gelu(ctx, x)
 *   "none": 0.5 x (1 + erf(x / sqrt 2)), the exact form        tk_gelu_exact(ctx, x)
 * or tk_call(ctx, "tk::gelu", x, "none"). Another string is refused. */
tk_tensor *tk_gelu(tk_ctx *ctx, tk_tensor *x);
tk_tensor *tk_gelu_exact(tk_ctx *ctx, tk_tensor *x);

/* Over the last dim of x (any rank >= 1, f32, f16 or bf16; math in float with float sums):
 * tk::softmax     (Tensor x, int dim=-1) -> Tensor: exp(x - max) / sum; dim must be the last
 *                 (-1 or rank - 1). A row of -inf gives NaN, as in PyTorch.
 * tk::layer_norm  (Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor:
 *                 (x - mean) / sqrt(var + eps) * weight + bias, var biased (F.layer_norm over
 *                 normalized_shape = [x's last dim]); weight, bias [last dim] of x's dtype or NULL.
 * tk::rms_norm    (Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor:
 *                 x / sqrt(mean(x^2) + eps) * weight (F.rms_norm over the last dim; PyTorch's eps
 *                 defaults to the dtype's epsilon, Llama's to 1e-06 or 1e-05: pass it).
 * Each returns x's shape and dtype. */
tk_tensor *tk_softmax(tk_ctx *ctx, tk_tensor *x);
tk_tensor *tk_layer_norm(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b, double eps);
tk_tensor *tk_rms_norm(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, double eps);

/* tk::linear, PyTorch's nn.Linear: y = x W^T + b with x [..., K] (leading dims kept, flattened
 * into M rows), w [N, K] (out_features, in_features), b [N] or NULL (no bias: nn.Linear(bias=False)),
 * y [..., N]; all of one dtype (f32, f16 or bf16), accumulated in f32 (cuBLASLt on a GPU). */
tk_tensor *tk_linear(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b);

/* tk::matmul, torch.matmul for a [..., M, K] (rank >= 2) and b [K, N] (one b for every product)
 * or b [..., K, N] with exactly a's leading dims (batched, no broadcasting): y [..., M, N]; one
 * dtype (f32, f16, bf16), accumulated in f32; a GPU makes all the products in one cuBLASLt call
 * (strided batches). (Tensor a, Tensor b) -> Tensor. */
tk_tensor *tk_matmul(tk_ctx *ctx, tk_tensor *a, tk_tensor *b);

/* tk::sdpa, F.scaled_dot_product_attention(q, k, v, is_causal=causal) without a mask tensor or
 * dropout: (Tensor q, Tensor k, Tensor v, bool causal=False, float scale=0.0, int heads=0) -> Tensor.
 *   heads 0: q [B, H, S, D], k and v [B, H, Sk, D] (PyTorch's layout), out [B, H, S, D];
 *   heads n: q [B, S, n*D], k and v [B, Sk, n*D] (a linear's output, heads side by side), out
 *            [B, S, n*D]: tk_call(ctx, "tk::sdpa", q, k, v, causal, 0.0, n).
 * All of one dtype (f32, f16, bf16); B, H, Sk agree between the inputs; S and Sk may be dynamic,
 * D is static. scale 0 means 1/sqrt(D). causal masks key j > query i (top-left aligned, as
 * PyTorch's is_causal). On a GPU: tensor cores for f16/bf16 with D 64 or 128, a row kernel
 * otherwise (D up to 256); softmax in float. */
tk_tensor *tk_sdpa(tk_ctx *ctx, tk_tensor *q, tk_tensor *k, tk_tensor *v, int causal);

/* tk::sdpa_qkv, tk::sdpa on q, k and v side by side in one tensor, as one linear of 3*n*D outputs
 * makes them (flash-attn's qkvpacked form): (Tensor qkv, int heads, bool causal=False,
 * float scale=0.0) -> Tensor. qkv [B, S, 3*n*D] (q, k, v in that order, each n heads of D side by
 * side), out [B, S, n*D]; heads n > 0; the last dim static and a multiple of 3n. q, k and v are
 * read where they lie in qkv, with its row pitch: no slices are copied. Otherwise as tk::sdpa
 * with heads n (the same kernels). */
tk_tensor *tk_sdpa_qkv(tk_ctx *ctx, tk_tensor *qkv, int heads, int causal);

/* tk::embedding, (Tensor weight, Tensor indices) -> Tensor (aten::embedding; F.embedding(ids, w)):
 * weight [rows, D] (f32, f16, bf16), indices of any shape (i32, i64), out [*indices, D]. An index
 * outside [0, rows) is refused on the CPU; on a GPU it gives a row of zeros (no check without a
 * sync). */
tk_tensor *tk_embedding(tk_ctx *ctx, tk_tensor *weight, tk_tensor *indices);

/* Layout, any dtype, negative dims from the end; dynamic dims keep their symbols. Called eagerly
 * each copies into a new contiguous tensor (tensors have no strides yet); in a package's session
 * a node whose result is one contiguous run of its input's bytes copies nothing (a view): flatten,
 * unflatten and reshape always, narrow along the first dim (or any dim whose leading dims are 1), permute
 * and transpose that move only dims of 1, expand that grows nothing; and a transpose or permute
 * that only tk::matmul reads as its b (cuBLASLt's op T) or only tk::sdpa reads as q, k or v (any
 * batch, head and sequence strides, the head dim contiguous): a strided view they read where it
 * lies (TK_VIEWS=0: copies).
 *   tk::permute    (Tensor x, int[] dims) -> Tensor                  x.permute(dims)
 *   tk::transpose  (Tensor x, int dim0, int dim1) -> Tensor          x.transpose(dim0, dim1)
 *   tk::narrow     (Tensor x, int dim, int start, int length) -> Tensor   static start and length;
 *                  x's dim must hold start + length (a guard when it is dynamic)
 *   tk::flatten    (Tensor x, int start_dim=0, int end_dim=-1) -> Tensor  the flattened dims'
 *                  product (symbolic: "batch*seq")
 *   tk::unflatten  (Tensor x, int dim, int[] sizes) -> Tensor        sizes static, one may be -1
 *                  (inferred; x's dim must divide: a guard when it is dynamic)
 *   tk::reshape    (Tensor x, int[] shape) -> Tensor                x.reshape(shape) / x.view(shape):
 *                  static sizes, one may be -1 (inferred from x's symbols: [batch, seq, 768] to
 *                  [-1, 12, 64] gives [batch*seq, 12, 64])
 *   tk::cat        (Tensor a, Tensor b, int dim=0) -> Tensor         torch.cat([a, b], dim): one dtype,
 *                  the other dims equal (guards when dynamic); the dim's size is a's plus b's
 * e.g. tk_call(ctx, "tk::unflatten", h, 2, TK_INTS(12, 64)) makes [B, S, 768] into [B, S, 12, 64]. */
tk_tensor *tk_transpose(tk_ctx *ctx, tk_tensor *x, int dim0, int dim1);
tk_tensor *tk_narrow(tk_ctx *ctx, tk_tensor *x, int dim, int64_t start, int64_t length);

/* x.split(sizes, dim) (torch.split with a list of sizes): n parts along dim, part i sizes[i]
 * long, their sum x's dim (a guard when the dim is dynamic), into parts[0..n-1] (the caller's
 * to free), each one tk::narrow node with the model's line. 0, or a negative tk_error_code with
 * every part NULL. e.g. int64_t sz[] = {768, 768, 768}; tk_split(ctx, qkv, sz, 3, -1, qkv3). */
int tk_split_at(tk_ctx *ctx, const char *file, int line, tk_tensor *x, const int64_t *sizes, int n, int dim,
                tk_tensor **parts);
#define tk_split(ctx, x, sizes, n, dim, parts) \
    tk_split_at((ctx), __FILE__, __LINE__, (x), (sizes), (n), (dim), (parts))

/* Each helper is also a macro calling tk_call where it is used, so a traced program records the
 * model's source line for the node (not kernels/'s); (tk_add)(...) or &tk_add reach the function. */
#define tk_add(ctx, a, b) tk_call((ctx), "tk::add", (a), (b))
#define tk_mul(ctx, a, b) tk_call((ctx), "tk::mul", (a), (b))
#define tk_sin(ctx, x) tk_call((ctx), "tk::sin", (x))
#define tk_cos(ctx, x) tk_call((ctx), "tk::cos", (x))
#define tk_silu(ctx, x) tk_call((ctx), "tk::silu", (x))
#define tk_gelu(ctx, x) tk_call((ctx), "tk::gelu", (x))
#define tk_gelu_exact(ctx, x) tk_call((ctx), "tk::gelu", (x), "none")
#define tk_softmax(ctx, x) tk_call((ctx), "tk::softmax", (x))
#define tk_layer_norm(ctx, x, w, b, eps) tk_call((ctx), "tk::layer_norm", (x), (w), (b), (double)(eps))
#define tk_rms_norm(ctx, x, w, eps) tk_call((ctx), "tk::rms_norm", (x), (w), (double)(eps))
#define tk_linear(ctx, x, w, b) tk_call((ctx), "tk::linear", (x), (w), (b))
#define tk_matmul(ctx, a, b) tk_call((ctx), "tk::matmul", (a), (b))
#define tk_transpose(ctx, x, d0, d1) tk_call((ctx), "tk::transpose", (x), (int)(d0), (int)(d1))
#define tk_narrow(ctx, x, d, start, len) tk_call((ctx), "tk::narrow", (x), (int)(d), (int64_t)(start), (int64_t)(len))
#define tk_embedding(ctx, w, ids) tk_call((ctx), "tk::embedding", (w), (ids))
#define tk_sdpa(ctx, q, k, v, causal) tk_call((ctx), "tk::sdpa", (q), (k), (v), ((causal) != 0))
#define tk_sdpa_qkv(ctx, qkv, heads, causal) tk_call((ctx), "tk::sdpa_qkv", (qkv), (int)(heads), ((causal) != 0))

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
