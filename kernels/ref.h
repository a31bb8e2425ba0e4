/* The CPU references of the built-in kernels (elementwise_ref.c, linear.c, linear_cpu.c): the math the GPU
 * kernels implement, in float, over f32, f16 and bf16 buffers. They serve as the ops' CPU
 * fallbacks and as what the GPU tests compare against. Internal to libtkrt and kernels/. */
#ifndef TK_KERNELS_REF_H
#define TK_KERNELS_REF_H

#include <stdint.h>
#include <tk/half.h>
#include <tk/op.h>

/* Element i of a dtype buffer widened to float (16-bit values exactly), and v rounded into one
 * (to nearest even): the one reading of f32/f16/bf16 buffers the CPU paths share. */
static inline float tk_ref_load(tk_dtype dtype, const void *p, int64_t i)
{
    switch (dtype) {
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)p)[i]);
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static inline void tk_ref_store(tk_dtype dtype, void *p, int64_t i, float v)
{
    switch (dtype) {
    case TK_F16: ((uint16_t *)p)[i] = tk_f32_to_f16(v); break;
    case TK_BF16: ((uint16_t *)p)[i] = tk_f32_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

typedef enum tk_ew_op { TK_EW_ADD, TK_EW_MUL, TK_EW_SIN, TK_EW_COS, TK_EW_SILU, TK_EW_GELU, TK_EW_GELU_ERF } tk_ew_op;

/* The scalar functions, in float. gelu is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x +
 * 0.044715 x^3))), evaluated as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)), the same value
 * without the cancellation of 1 + tanh near -1. */
float tk_ref_silu(float x);
float tk_ref_gelu(float x);
float tk_ref_gelu_erf(float x);

/* y[i] = op(x[i]) (sin, cos, silu, gelu) or op(a[i], b[i]) (add, mul) for n elements of dtype
 * (f32, f16 or bf16; 16-bit values widened exactly, results rounded to nearest even). y may
 * alias an input. Return 0, or TK_EUNSUPPORTED for another dtype or an op of the other arity. */
int tk_ref_unary(tk_ew_op op, tk_dtype dtype, const void *x, void *y, int64_t n);
int tk_ref_binary(tk_ew_op op, tk_dtype dtype, const void *a, const void *b, void *y, int64_t n);

/* Over rows of cols elements of dtype (f32, f16 or bf16), sums in double, each result rounded
 * once: softmax (max subtracted first; a row of -inf gives NaN as in PyTorch), layer_norm
 * ((x - mean) / sqrt(var + eps) * w + b, var the biased mean of squared deviations) and rms_norm
 * (x / sqrt(mean(x^2) + eps) * w); w, b [cols] or NULL. 0, or TK_EUNSUPPORTED for another dtype. */
int tk_ref_softmax(tk_dtype dtype, const void *x, void *y, int64_t rows, int64_t cols);
int tk_ref_layer_norm(tk_dtype dtype, const void *x, const void *w, const void *b, void *y, int64_t rows,
                      int64_t cols, float eps);
int tk_ref_rms_norm(tk_dtype dtype, const void *x, const void *w, void *y, int64_t rows, int64_t cols, float eps);

/* tk::sdpa's geometry: B batches of H heads, S queries, Sk keys, head dim D; each tensor's strides
 * (in elements) of batch, head and seq, the head dim contiguous; the scale (already resolved from
 * 0 to 1/sqrt(D)) and whether key j > query i is masked. */
typedef struct tk_sdpa_dims {
    int64_t B, H, S, Sk, D;
    int64_t q[3], k[3], v[3], o[3];
    double scale;
    int causal;
} tk_sdpa_dims;

/* o = softmax(q k^T * scale) v over g (attention_ref.c), sums in double. 0, TK_EUNSUPPORTED for a
 * dtype other than f32, f16, bf16, TK_ENOMEM. */
int tk_ref_sdpa(tk_dtype dtype, const void *q, const void *k, const void *v, void *o, const tk_sdpa_dims *g);

/* y[i, :] = w[ids[i], :] for n ids (i32 or i64) into a [rows, cols] weight of dtype (gather_ref.c).
 * 0, or TK_EINVAL naming the first id outside [0, rows). */
int tk_ref_embedding(tk_dtype dtype, const void *w, int64_t rows, int64_t cols, tk_dtype idtype, const void *ids,
                     int64_t n, void *y);

/* y (contiguous, rank dims) = x read at sum_d i_d * st[d], elements of es bytes
 * (layout_ref.c; the layout built-ins' CPU path). Returns 0. */
int tk_ref_strided_copy(size_t es, const void *x, void *y, int rank, const int64_t *dims, const int64_t *st);

/* y[m][n] = sum_k x[m][k] w[n][k] + b[n] (nn.Linear): x [M, K], w [N, K], b [N] (or NULL),
 * y [M, N], all of dtype, accumulated in float in order of k, the bias added last, rounded once
 * to dtype. Returns 0, or TK_EUNSUPPORTED for a dtype other than f32, f16, bf16. */
int tk_ref_linear(tk_dtype dtype, const void *x, const void *w, const void *b, void *y,
                  int64_t M, int64_t K, int64_t N);

/* tk_ref_linear's result computed fast (linear_cpu.c: vectorized tiles, rows over threads;
 * threads 0: one per CPU, at most 16): the same math, the float sums in another order. */
int tk_cpu_linear(tk_dtype dtype, const void *x, const void *w, const void *b, void *y, int64_t M, int64_t K,
                  int64_t N, int threads);

#endif
