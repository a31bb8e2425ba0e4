/* tk::linear, PyTorch's nn.Linear: y = x W^T + b on cuBLASLt (f32 accumulation, the bias added
 * by the matmul's epilogue) for f32, f16 and bf16, and its CPU reference. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "cublaslt.h"
#include "ref.h"
#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

/* --- shapes ------------------------------------------------------------------------------
 * x is [..., K] (leading dimensions flattened into M rows), weight [N, K], bias [N], and y is
 * [..., N]: x's shape with the last dimension replaced. */

/* "[batch, 128]" (dims as expressions when the tensor is traced), for messages. */
static void format_shape(char *buf, size_t n, const tk_tensor *t)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_adds(&sb, "[");
    for (int i = 0; i < tk_tensor_rank(t); i++) {
        if (i)
            tk_strbuf_adds(&sb, ", ");
        tk_sym_print(tk_tensor_sym(t, i), &sb);
    }
    tk_strbuf_adds(&sb, "]");
    snprintf(buf, n, "%s", sb.buf ? sb.buf : "[?]");
    tk_strbuf_release(&sb);
}

/* Dtypes and ranks, which tracing knows as well as eager runs. */
static int linear_check_kinds(tk_tensor *const *in)
{
    const tk_tensor *x = in[0], *w = in[1], *b = in[2];
    char sw[160], sb[160];
    tk_dtype dtype = tk_tensor_dtype(x);
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::linear' does not support dtype '%s' (expected f32, f16 or bf16)",
                            tk_dtype_name(dtype));
    if (tk_tensor_dtype(w) != dtype || tk_tensor_dtype(b) != dtype)
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is %s, weight %s and bias %s (they must share a dtype)",
                            tk_dtype_name(dtype), tk_dtype_name(tk_tensor_dtype(w)), tk_dtype_name(tk_tensor_dtype(b)));
    if (tk_tensor_rank(x) < 1)
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is a scalar, expected [..., in_features]");
    if (tk_tensor_rank(w) != 2) {
        format_shape(sw, sizeof sw, w);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': weight is %s, expected [out_features, in_features]", sw);
    }
    if (tk_tensor_rank(b) != 1) {
        tk_strbuf n = TK_STRBUF_INIT;
        tk_sym_print(tk_tensor_sym(w, 0), &n);
        format_shape(sb, sizeof sb, b);
        int err = tk_error_set(TK_EINVAL, "op 'tk::linear': bias is %s but weight has %s output features (expected [%s])",
                               sb, n.buf ? n.buf : "?", n.buf ? n.buf : "?");
        tk_strbuf_release(&n);
        return err;
    }
    return 0;
}

/* The shape rule with tk_sym dims: constants that disagree are refused here with the shapes in
 * the message; anything symbolic (tracing) becomes a requirement. */
static int linear_check_dims(tk_ctx *ctx, tk_tensor *const *in)
{
    const tk_tensor *x = in[0], *w = in[1], *b = in[2];
    char sx[160], sw[160], sb[160], what[64];
    int err, rank = tk_tensor_rank(x);
    tk_sym K = tk_tensor_sym(x, -1), wK = tk_tensor_sym(w, 1), N = tk_tensor_sym(w, 0), bN = tk_tensor_sym(b, 0);
    if (tk_sym_is_const(K) && tk_sym_is_const(wK) && K.value != wK.value) {
        format_shape(sw, sizeof sw, w);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': weight is %s but x has %lld features", sw, (long long)K.value);
    }
    snprintf(what, sizeof what, "x dim %d == weight dim 1", rank - 1);
    if ((err = tk_require_eq(ctx, K, wK, what)))
        return err;
    if (tk_sym_is_const(N) && tk_sym_is_const(bN) && N.value != bN.value) {
        format_shape(sb, sizeof sb, b);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': bias is %s but weight has %lld output features (expected [%lld])",
                            sb, (long long)N.value, (long long)N.value);
    }
    if ((err = tk_require_eq(ctx, bN, N, "bias dim 0 == weight dim 0")))
        return err;
    if (tk_sym_is_const(K) && K.value == 0) {
        format_shape(sx, sizeof sx, x);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is %s, with no features", sx);
    }
    snprintf(what, sizeof what, "x dim %d >= 1", rank - 1);
    return tk_require_range(ctx, K, 1, INT64_MAX, what);
}

/* Eager: the checks with concrete M, K, N (x's leading dims flattened into M rows). */
static int linear_check(tk_ctx *ctx, tk_tensor *const *in, int64_t *M, int64_t *K, int64_t *N)
{
    int err = linear_check_kinds(in);
    if (!err)
        err = linear_check_dims(ctx, in);
    if (err)
        return err;
    *K = tk_tensor_dim(in[0], -1);
    *N = tk_tensor_dim(in[1], 0);
    *M = tk_numel(in[0]) / *K;
    return 0;
}

/* y is x's shape with the last dim replaced by N: symbolic leading dims carry over. */
static int linear_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = linear_check_kinds(in);
    if (!err)
        err = linear_check_dims(ctx, in);
    if (err)
        return err;
    tk_sym shape[TK_MAX_DIMS];
    int rank = tk_tensor_rank(in[0]);
    for (int i = 0; i < rank - 1; i++)
        shape[i] = tk_tensor_sym(in[0], i);
    shape[rank - 1] = tk_tensor_sym(in[1], 0);
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), rank, shape);
}

/* A caller may hand tk_op_run its own output: it must hold the result. */
static int linear_check_out(const tk_tensor *x, const tk_tensor *y, int64_t M, int64_t N)
{
    if (tk_tensor_dtype(y) != tk_tensor_dtype(x) || tk_numel(y) != M * N)
        return tk_error_set(TK_EINVAL, "op 'tk::linear': output is %s with %lld elements, expected %s with %lld",
                            tk_dtype_name(tk_tensor_dtype(y)), (long long)tk_numel(y),
                            tk_dtype_name(tk_tensor_dtype(x)), (long long)(M * N));
    return 0;
}

/* --- CPU reference ----------------------------------------------------------------------- */

/* Row i of a [rows, cols] buffer of dtype, widened to float into dst. */
static void widen_row(tk_dtype dtype, const void *src, int64_t i, int64_t cols, float *dst)
{
    for (int64_t k = 0; k < cols; k++) {
        int64_t j = i * cols + k;
        switch (dtype) {
        case TK_F16: dst[k] = tk_f16_to_f32(((const uint16_t *)src)[j]); break;
        case TK_BF16: dst[k] = tk_bf16_to_f32(((const uint16_t *)src)[j]); break;
        default: dst[k] = ((const float *)src)[j]; break;
        }
    }
}

int tk_ref_linear(tk_dtype dtype, const void *x, const void *w, const void *b, void *y,
                  int64_t M, int64_t K, int64_t N)
{
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "linear reference: dtype %d is not f32, f16 or bf16", (int)dtype);
    /* 16-bit inputs are widened once (w whole, x a row at a time): the inner loop is floats. */
    float *wf = malloc((size_t)(N * K + K + N) * sizeof(float) + 1);
    if (!wf)
        return tk_error_set(TK_ENOMEM, "linear reference: out of memory for a [%lld, %lld] weight",
                            (long long)N, (long long)K);
    float *xf = wf + N * K, *bf = xf + K;
    for (int64_t n = 0; n < N; n++)
        widen_row(dtype, w, n, K, wf + n * K);
    if (b)
        widen_row(dtype, b, 0, N, bf);
    for (int64_t m = 0; m < M; m++) {
        widen_row(dtype, x, m, K, xf);
        for (int64_t n = 0; n < N; n++) {
            const float *wr = wf + n * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += xf[k] * wr[k];
            if (b)
                acc += bf[n];
            int64_t j = m * N + n;
            switch (dtype) {
            case TK_F16: ((uint16_t *)y)[j] = tk_f32_to_f16(acc); break;
            case TK_BF16: ((uint16_t *)y)[j] = tk_f32_to_bf16(acc); break;
            default: ((float *)y)[j] = acc; break;
            }
        }
    }
    free(wf);
    return 0;
}

static int linear_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int64_t M, K, N;
    int err = linear_check(ctx, in, &M, &K, &N);
    if (!err)
        err = linear_check_out(in[0], out[0], M, N);
    if (err)
        return err;
    return tk_ref_linear(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), tk_tensor_data(in[1]),
                         tk_tensor_data(in[2]), tk_tensor_data(out[0]), M, K, N);
}

/* --- cuBLASLt ----------------------------------------------------------------------------
 * cuBLASLt is column-major; our tensors are row-major, and a row-major [r, c] matrix is the
 * column-major [c, r] matrix of its transpose, with the same leading dimension c. So
 *   x [M, K] row-major is X^T: column-major K x M, ld K
 *   W [N, K] row-major is W^T: column-major K x N, ld K
 *   y [M, N] row-major is Y^T: column-major N x M, ld N
 * and y = x W^T is, transposed, Y^T = W X^T: an N x M column-major product D = op(A) op(B) with
 *   A = the buffer of W (K x N, ld K), op(A) = A^T = W    (N x K)   TRANSA = T
 *   B = the buffer of x (K x M, ld K), op(B) = B   = X^T  (K x M)   TRANSB = N
 *   D = C = the buffer of y (N x M, ld N),  m = N, n = M, k = K.
 * The bias epilogue adds a vector of D's row count (N, one per output feature) to every column
 * (every row of y): exactly nn.Linear's bias. With both operands' K contiguous this is the
 * "TN" layout, the one every cuBLASLt kernel family supports. */

#ifdef TK_HAVE_CUDA_HEADERS
/* The largest power of two up to 256 that divides the address: what we may promise cuBLASLt
 * (it assumes 256 unless told, and may pick a kernel that needs that). */
static uint32_t ptr_alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1)))
        al >>= 1;
    return al;
}

#define LT_CHECK(call)                                                                        \
    do {                                                                                      \
        cublasStatus_t lt__s = (call);                                                        \
        if (lt__s != CUBLAS_STATUS_SUCCESS) {                                                 \
            rc = tk_error_set(TK_EDEVICE, "op 'tk::linear': %s failed at %s:%d: %s (%d)", #call, \
                              __FILE__, __LINE__, lt->GetStatusString(lt__s), (int)lt__s);    \
            goto done;                                                                        \
        }                                                                                     \
    } while (0)

static int linear_cublaslt(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K,
                           int64_t N)
{
    int rc;

    const tk_cublaslt *lt = NULL;
    void *handle = NULL;
    rc = tk_cublaslt_get(ctx, &lt, &handle);
    if (rc)
        return rc;

    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t a_layout = NULL, b_layout = NULL, d_layout = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    tk_tensor *bias_copy = NULL;
    const void *x = tk_tensor_data(in[0]), *w = tk_tensor_data(in[1]), *bias = tk_tensor_data(in[2]);
    void *y = tk_tensor_data(out[0]);
    tk_dtype dtype = tk_tensor_dtype(in[0]);
    /* The bias epilogue reads the bias in vectors, and no preference tells cuBLASLt otherwise
     * (Marian NMT's cuBLASLt code found it needs 8 to 16 bytes): a bias that is not 16-byte
     * aligned, only possible in a wrapped tensor, is copied (N elements) to a fresh allocation. */
    if (ptr_alignment(bias) < 16) {
        if ((rc = tk_tensor_new(&bias_copy, ctx, tk_ctx_device(ctx), dtype, 1, &N)) ||
            (rc = tk_tensor_copy(ctx, bias_copy, in[2])))
            goto done;
        bias = tk_tensor_data(bias_copy);
    }
    cudaDataType_t type = dtype == TK_F32 ? CUDA_R_32F : dtype == TK_F16 ? CUDA_R_16F : CUDA_R_16BF;
    int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N, bias_type = (int32_t)type;
    uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    /* No workspace: a context has no buffer to lend, and one shared between contexts would race
     * between their streams. cuBLASLt then picks among the kernels that need none. */
    uint64_t workspace = 0;
    uint32_t align_a = ptr_alignment(w), align_b = ptr_alignment(x), align_d = ptr_alignment(y);
    float alpha = 1.0f, beta = 0.0f;

    /* f32 accumulation and f32 alpha/beta for every dtype (CUBLAS_COMPUTE_32F never uses TF32) */
    LT_CHECK(lt->MatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_CHECK(lt->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    LT_CHECK(lt->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    LT_CHECK(lt->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    LT_CHECK(lt->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LT_CHECK(lt->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    LT_CHECK(lt->MatrixLayoutCreate(&a_layout, type, (uint64_t)K, (uint64_t)N, K));
    LT_CHECK(lt->MatrixLayoutCreate(&b_layout, type, (uint64_t)K, (uint64_t)M, K));
    LT_CHECK(lt->MatrixLayoutCreate(&d_layout, type, (uint64_t)N, (uint64_t)M, N));
    LT_CHECK(lt->MatmulPreferenceCreate(&pref));
    LT_CHECK(lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    LT_CHECK(lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
    LT_CHECK(lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
    LT_CHECK(lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d));
    LT_CHECK(lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d));

    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t hs = lt->MatmulAlgoGetHeuristic((cublasLtHandle_t)handle, desc, a_layout, b_layout, d_layout,
                                                   d_layout, pref, 1, &heur, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
        rc = tk_error_set(TK_EUNSUPPORTED,
                          "op 'tk::linear': cuBLASLt has no algorithm for %s x [%lld, %lld] by weight [%lld, %lld]"
                          " (alignment x %u, weight %u, y %u bytes): %s",
                          tk_dtype_name(dtype), (long long)M, (long long)K, (long long)N, (long long)K,
                          (unsigned)align_b, (unsigned)align_a, (unsigned)align_d,
                          hs != CUBLAS_STATUS_SUCCESS ? lt->GetStatusString(hs) : "no result");
        goto done;
    }
    LT_CHECK(lt->Matmul((cublasLtHandle_t)handle, desc, &alpha, w, a_layout, x, b_layout, &beta, y, d_layout,
                        y, d_layout, &heur.algo, NULL, 0, (cudaStream_t)tk_cuda_stream(ctx)));
done:
    if (pref)
        lt->MatmulPreferenceDestroy(pref);
    if (d_layout)
        lt->MatrixLayoutDestroy(d_layout);
    if (b_layout)
        lt->MatrixLayoutDestroy(b_layout);
    if (a_layout)
        lt->MatrixLayoutDestroy(a_layout);
    if (desc)
        lt->MatmulDescDestroy(desc);
    if (bias_copy) {
        /* the matmul reads it: wait for the stream before the memory goes back (rare path) */
        int src = tk_ctx_sync(ctx);
        if (!rc)
            rc = src;
        tk_tensor_free(bias_copy);
    }
    return rc;
}
#else
static int linear_cublaslt(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K,
                           int64_t N)
{
    (void)ctx, (void)in, (void)out, (void)M, (void)K, (void)N;
    return tk_error_set(TK_EUNSUPPORTED, "op 'tk::linear': libtkrt was built without the CUDA toolkit's "
                                         "headers, so without cuBLASLt");
}
#endif

/* y[M, N] = x[M, K] w[N, K]^T + b: 2MNK flops for the product and MN for the bias; x, w, b and y
 * each cross memory once. */
static int linear_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double M = (double)tk_numel(in[0]) / (double)tk_tensor_dim(in[0], -1), K = (double)tk_tensor_dim(in[0], -1);
    double N = (double)tk_tensor_dim(in[1], 0), size = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    (void)out;
    cost->flops = 2.0 * M * N * K + M * N;
    cost->bytes = (M * K + N * K + N + M * N) * size;
    return 0;
}

TK_OP(tk_linear_op, "tk::linear", "(Tensor x, Tensor weight, Tensor bias) -> Tensor",
      .meta = linear_meta, .cpu = linear_cpu, .cost = linear_cost)
{
    int64_t M, K, N;
    int rc = linear_check(ctx, in, &M, &K, &N);
    if (!rc)
        rc = linear_check_out(in[0], out[0], M, N);
    if (rc)
        return rc;
    if (M == 0 || N == 0)
        return 0;
    return linear_cublaslt(ctx, in, out, M, K, N);
}

tk_tensor *(tk_linear)(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b) { return tk_call(ctx, "tk::linear", x, w, b); }
