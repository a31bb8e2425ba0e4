/* tk::linear, PyTorch's nn.Linear: y = x W^T + b on cuBLASLt (f32 accumulation, the bias added
 * by the matmul's epilogue) for f32, f16 and bf16, and its CPU reference. The bias is optional
 * (nn.Linear(bias=False)): absent, the epilogue adds nothing. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "cublaslt.h"
#include "lt_cache.h"
#include "ref.h"
#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

/* --- shapes ------------------------------------------------------------------------------
 * x is [..., K] (leading dimensions flattened into M rows), weight [N, K], bias [N], and y is
 * [..., N]: x's shape with the last dimension replaced. */

/* Dtypes and ranks, which tracing knows as well as eager runs. */
static int linear_check_kinds(tk_tensor *const *in)
{
    const tk_tensor *x = in[0], *w = in[1], *b = in[2];
    char sw[160], sb[160];
    tk_dtype dtype = tk_tensor_dtype(x);
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::linear' does not support dtype '%s' (expected f32, f16 or bf16)",
                            tk_dtype_name(dtype));
    if (tk_tensor_dtype(w) != dtype || (b && tk_tensor_dtype(b) != dtype))
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is %s, weight %s and bias %s (they must share a dtype)",
                            tk_dtype_name(dtype), tk_dtype_name(tk_tensor_dtype(w)), tk_dtype_name(tk_tensor_dtype(b)));
    if (tk_tensor_rank(x) < 1)
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is a scalar, expected [..., in_features]");
    if (tk_tensor_rank(w) != 2) {
        tk_tensor_format_shape(w, sw, sizeof sw);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': weight is %s, expected [out_features, in_features]", sw);
    }
    if (b && tk_tensor_rank(b) != 1) {
        tk_strbuf n = TK_STRBUF_INIT;
        tk_sym_print(tk_tensor_sym(w, 0), &n);
        tk_tensor_format_shape(b, sb, sizeof sb);
        int err = tk_error_set(TK_EINVAL, "op 'tk::linear': bias is %s but weight has %s output features (expected [%s])",
                               sb, n.buf ? n.buf : "?", n.buf ? n.buf : "?");
        tk_strbuf_release(&n);
        return err;
    }
    return 0;
}

/* The shape rule with tk_sym dims: constants that disagree are refused here with the shapes in
 * the message; anything symbolic (tracing) becomes a requirement. Eagerly every dim is a constant
 * and the requirements would all hold after the checks above them, so they are not stated: the
 * per-call path formats no text. */
static int linear_check_dims(tk_ctx *ctx, tk_tensor *const *in)
{
    const tk_tensor *x = in[0], *w = in[1], *b = in[2];
    char sx[160], sw[160], sb[160], what[64];
    int err, rank = tk_tensor_rank(x);
    tk_sym K = tk_tensor_sym(x, -1), wK = tk_tensor_sym(w, 1), N = tk_tensor_sym(w, 0);
    tk_sym bN = b ? tk_tensor_sym(b, 0) : N; /* no bias: nothing to agree with */
    int constant = tk_sym_is_const(K) && tk_sym_is_const(wK) && tk_sym_is_const(N) && tk_sym_is_const(bN);
    if (tk_sym_is_const(K) && tk_sym_is_const(wK) && K.value != wK.value) {
        tk_tensor_format_shape(w, sw, sizeof sw);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': weight is %s but x has %lld features", sw, (long long)K.value);
    }
    if (!constant) {
        snprintf(what, sizeof what, "x dim %d == weight dim 1", rank - 1);
        if ((err = tk_require_eq(ctx, K, wK, what)))
            return err;
    }
    if (tk_sym_is_const(N) && tk_sym_is_const(bN) && N.value != bN.value) {
        tk_tensor_format_shape(b, sb, sizeof sb);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': bias is %s but weight has %lld output features (expected [%lld])",
                            sb, (long long)N.value, (long long)N.value);
    }
    if (!constant && (err = tk_require_eq(ctx, bN, N, "bias dim 0 == weight dim 0")))
        return err;
    if (tk_sym_is_const(K) && K.value == 0) {
        tk_tensor_format_shape(x, sx, sizeof sx);
        return tk_error_set(TK_EINVAL, "op 'tk::linear': x is %s, with no features", sx);
    }
    if (constant)
        return 0;
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
    for (int64_t k = 0; k < cols; k++)
        dst[k] = tk_ref_load(dtype, src, i * cols + k);
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
            tk_ref_store(dtype, y, m * N + n, acc);
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
    return tk_cpu_linear(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), tk_tensor_data(in[1]),
                         in[2] ? tk_tensor_data(in[2]) : NULL, tk_tensor_data(out[0]), M, K, N, 0);
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

/* What a matmul does besides x W^T + b: GELU (tanh) on the result (cuBLASLt's GELU epilogue, the
 * tanh approximation, as tk::gelu), or a residual of y's shape added (cuBLASLt's C with beta 1):
 * the fused forms below. */
typedef struct lt_extra {
    int gelu;
    const tk_tensor *residual;
} lt_extra;

/* The largest power of two up to 256 that divides a (an address, or a byte offset): what we may
 * promise cuBLASLt (it assumes 256 unless told, and may pick a kernel that needs that). */
static uint32_t alignment_of(uint64_t a)
{
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1)))
        al >>= 1;
    return al;
}

static uint32_t ptr_alignment(const void *p) { return alignment_of((uintptr_t)p); }

#ifdef TK_HAVE_CUDA_HEADERS
/* --- plans -------------------------------------------------------------------------------
 * What a call needs besides its pointers is a plan: the matrix layouts and the algorithm, which
 * depend on (M, N, K), the dtype, the epilogue, the operands' alignments and the workspace
 * available. Plans live in the device's cache (kernels/lt_cache.c), so a shape seen before
 * creates no descriptor and asks no heuristic: the call is a lookup, the bias pointer set on the
 * context's own descriptor when it changed, and cublasLtMatmul.
 *
 * A shape never seen before still needs its layouts (three small host objects) and an algorithm.
 * The algorithm comes from the size's power-of-two bucket of M (2^(b-1) < M <= 2^b): the
 * heuristic is asked once per bucket, at M = 2^b, and for another M of the bucket that algorithm
 * is checked with cublasLtMatmulAlgoCheck against the real layouts (it reports whether the
 * algorithm runs this problem and how much workspace it needs, which must fit). Only a refusal
 * asks the heuristic for that M itself. This is valid because an algorithm descriptor
 * (cublasLtMatmulAlgo_t: algorithm id, tile, stages, split-K, swizzle...) holds no problem size:
 * any algorithm that passes the check computes any problem it is checked for, and only its speed
 * may differ from the heuristic's own choice for that M, within a factor-2 band of rows where the
 * best tile rarely changes (the reasoning of the autotuner's buckets, docs/autotune.md). It also
 * makes the algorithm, hence the rounding, the same for every M of a bucket whatever order the
 * sizes come in. TK_CUBLASLT_EXACT=1 asks the heuristic for every new M instead. */

enum { PLAN_EXACT = 1, PLAN_BUCKET = 2 }; /* tk_lt_key.kind */

static int64_t log2_of(uint32_t v)
{
    int64_t l = 0;
    while (v > 1)
        v >>= 1, l++;
    return l;
}

/* The top of M's bucket: the smallest power of two >= M. */
static int64_t bucket_top(int64_t m)
{
    int64_t t = 1;
    while (t < m && t < ((int64_t)1 << 62))
        t <<= 1;
    return t;
}

#define LT_CHECK(call)                                                                        \
    do {                                                                                      \
        cublasStatus_t lt__s = (call);                                                        \
        if (lt__s != CUBLAS_STATUS_SUCCESS) {                                                 \
            rc = tk_error_set(TK_EDEVICE, "op 'tk::linear': %s failed at %s:%d: %s (%d)", #call, \
                              __FILE__, __LINE__, api->GetStatusString(lt__s), (int)lt__s);   \
            goto done;                                                                        \
        }                                                                                     \
    } while (0)

/* What one call multiplies, for plans and messages. */
typedef struct lt_problem {
    tk_dtype dtype;
    cudaDataType_t type;
    int64_t M, K, N;
    uint32_t align_a, align_b, align_c, align_d; /* weight, x, residual (y's when none), y */
    uint32_t epilogue;
    int gelu;                           /* the epilogue applies GELU (tanh) */
    int matmul;                         /* tk::matmul's a b (see there), not x W^T */
    int64_t batch;                      /* tk::matmul: products a call; its b shared by them (0) or not */
    int shared_b;
    int b_t;                            /* tk::matmul's b a transposed view: [..., N, K] in memory */
    tk_lt_key key;                      /* kind PLAN_EXACT, m = M */
} lt_problem;

/* The context's matmul descriptor for the problem's dtype and epilogue (made on first need:
 * f32 accumulation and f32 alpha/beta for every dtype, CUBLAS_COMPUTE_32F never using TF32),
 * with bias as its bias pointer. */
static int get_desc(const tk_cublaslt_ref *lt, const lt_problem *pb, const void *bias, cublasLtMatmulDesc_t *out)
{
    const tk_cublaslt *api = lt->api;
    tk_lt_ctx *local = lt->local;
    int dt = pb->dtype == TK_F32 ? 0 : pb->dtype == TK_F16 ? 1 : 2;
    int rc = 0, slot = pb->matmul ? 12 + 3 * pb->b_t + dt : dt * 4 + pb->gelu * 2 + (bias != NULL);
    cublasLtMatmulDesc_t desc = local->desc[slot];
    if (!desc) {
        int32_t trans_a = pb->matmul && !pb->b_t ? CUBLAS_OP_N : CUBLAS_OP_T, trans_b = CUBLAS_OP_N,
                bias_type = (int32_t)pb->type;
        uint32_t epilogue = pb->epilogue;
        LT_CHECK(api->MatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LT_CHECK(api->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
        LT_CHECK(api->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
        LT_CHECK(api->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        if (bias)
            LT_CHECK(api->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                 sizeof bias_type));
        local->desc[slot] = desc;
        local->desc_bias[slot] = NULL;
    }
    if (bias && local->desc_bias[slot] != bias) {
        LT_CHECK(api->MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        local->desc_bias[slot] = bias;
    }
    *out = desc;
done:
    if (rc && desc && desc != local->desc[slot])
        api->MatmulDescDestroy(desc);
    return rc;
}

/* The layouts of the product with m rows of x (see the mapping above; tk::matmul's below it):
 * strided batches of them for tk::matmul over several products. */
static int make_layouts(const tk_cublaslt *api, const lt_problem *pb, int64_t m, tk_lt_plan *p)
{
    int rc = 0;
    if (pb->matmul && !pb->b_t)
        LT_CHECK(api->MatrixLayoutCreate(&p->a, pb->type, (uint64_t)pb->N, (uint64_t)pb->K, pb->N));
    else /* W [N, K] (tk::linear), or b as the transposed view of a [..., N, K]: K x N, ld K, op T */
        LT_CHECK(api->MatrixLayoutCreate(&p->a, pb->type, (uint64_t)pb->K, (uint64_t)pb->N, pb->K));
    LT_CHECK(api->MatrixLayoutCreate(&p->b, pb->type, (uint64_t)pb->K, (uint64_t)m, pb->K));
    LT_CHECK(api->MatrixLayoutCreate(&p->d, pb->type, (uint64_t)pb->N, (uint64_t)m, pb->N));
    if (pb->batch > 1) {
        int32_t count = (int32_t)pb->batch;
        int64_t sa = pb->shared_b ? 0 : pb->K * pb->N, sb = m * pb->K, sd = m * pb->N;
        cublasLtMatrixLayout_t l[3] = {p->a, p->b, p->d};
        int64_t st[3] = {sa, sb, sd};
        for (int i = 0; i < 3; i++) {
            LT_CHECK(api->MatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
            LT_CHECK(api->MatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i],
                                                   sizeof st[i]));
        }
    }
done:
    return rc;
}

/* The heuristic's first choice for the product the layouts of p describe (m rows), into p->heur. */
static int query(const tk_cublaslt_ref *lt, cublasLtMatmulDesc_t desc, const lt_problem *pb, int64_t m, tk_lt_plan *p)
{
    const tk_cublaslt *api = lt->api;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t workspace = (uint64_t)pb->key.workspace;
    int rc = 0, found = 0;
    LT_CHECK(api->MatmulPreferenceCreate(&pref));
    LT_CHECK(api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof workspace));
    LT_CHECK(api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &pb->align_a,
                                               sizeof pb->align_a));
    LT_CHECK(api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &pb->align_b,
                                               sizeof pb->align_b));
    LT_CHECK(api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &pb->align_c,
                                               sizeof pb->align_c));
    LT_CHECK(api->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &pb->align_d,
                                               sizeof pb->align_d));
    atomic_fetch_add_explicit(&lt->counters->heuristics, 1, memory_order_relaxed);
    cublasStatus_t hs = api->MatmulAlgoGetHeuristic(lt->handle, desc, p->a, p->b, p->d, p->d, pref, 1, &p->heur,
                                                    &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
        rc = tk_error_set(TK_EUNSUPPORTED,
                          "op 'tk::linear': cuBLASLt has no algorithm for %s x [%lld, %lld] by weight [%lld, %lld]"
                          " (alignment x %u, weight %u, y %u bytes): %s",
                          tk_dtype_name(pb->dtype), (long long)m, (long long)pb->K, (long long)pb->N,
                          (long long)pb->K, (unsigned)pb->align_b, (unsigned)pb->align_a, (unsigned)pb->align_d,
                          hs != CUBLAS_STATUS_SUCCESS ? api->GetStatusString(hs) : "no result");
done:
    if (pref)
        api->MatmulPreferenceDestroy(pref);
    return rc;
}

/* The algorithm of M's bucket (asked of the heuristic at the bucket's top the first time, and
 * kept in the cache as a plan without layouts) into *heur. */
static int bucket_algo(const tk_cublaslt_ref *lt, cublasLtMatmulDesc_t desc, const lt_problem *pb,
                       cublasLtMatmulHeuristicResult_t *heur)
{
    tk_lt_key key = pb->key;
    key.kind = PLAN_BUCKET;
    key.m = bucket_top(pb->M);
    tk_lt_entry *e = tk_lt_cache_get(lt->plans, &key);
    if (e) {
        *heur = ((const tk_lt_plan *)tk_lt_entry_value(e))->heur;
        tk_lt_cache_release(lt->plans, e);
        return 0;
    }
    tk_lt_plan *p = calloc(1, sizeof *p);
    if (!p)
        return tk_error_set(TK_ENOMEM, "out of memory");
    int rc = make_layouts(lt->api, pb, key.m, p);
    if (!rc)
        rc = query(lt, desc, pb, key.m, p);
    *heur = p->heur;
    tk_lt_plan_free_layouts(p);
    if (!rc && tk_lt_cache_add(lt->plans, &key, p, &e) == 0) {
        tk_lt_cache_release(lt->plans, e);
    } else {
        free(p); /* uncached: a result is still good for this call */
        if (!rc)
            tk_error_clear();
    }
    return rc;
}

/* A new plan for the problem (layouts for M rows and an algorithm), made without the cache's lock:
 * two threads may make the same one, and the cache keeps the first. */
static int make_plan(const tk_cublaslt_ref *lt, cublasLtMatmulDesc_t desc, const lt_problem *pb, tk_lt_plan **out)
{
    const tk_cublaslt *api = lt->api;
    int rc;
    tk_lt_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return tk_error_set(TK_ENOMEM, "out of memory");
    if ((rc = make_layouts(api, pb, pb->M, p)))
        goto done;
    const char *exact = getenv("TK_CUBLASLT_EXACT");
    int reused = 0;
    cublasLtMatmulHeuristicResult_t heur, checked;
    if (bucket_top(pb->M) != pb->M && !(exact && !strcmp(exact, "1"))) {
        if (bucket_algo(lt, desc, pb, &heur) == 0) {
            atomic_fetch_add_explicit(&lt->counters->checks, 1, memory_order_relaxed);
            memset(&checked, 0, sizeof checked);
            cublasStatus_t st = api->MatmulAlgoCheck(lt->handle, desc, p->a, p->b, p->d, p->d, &heur.algo, &checked);
            reused = st == CUBLAS_STATUS_SUCCESS && checked.workspaceSize <= (size_t)pb->key.workspace;
        } else {
            tk_error_clear(); /* the heuristic has nothing at the bucket's top: ask for M itself */
        }
    }
    if (reused) {
        p->heur = heur;
        p->heur.workspaceSize = checked.workspaceSize;
        atomic_fetch_add_explicit(&lt->counters->reuses, 1, memory_order_relaxed);
    }
    if (!reused && (rc = query(lt, desc, pb, pb->M, p)))
        goto done;
    if (!reused && bucket_top(pb->M) == pb->M) {
        /* M is its bucket's top: this is the bucket's algorithm too */
        tk_lt_key key = pb->key;
        tk_lt_entry *e;
        tk_lt_plan *bp = calloc(1, sizeof *bp);
        key.kind = PLAN_BUCKET;
        if (bp) {
            bp->heur = p->heur;
            if (tk_lt_cache_add(lt->plans, &key, bp, &e)) {
                free(bp);
                tk_error_clear();
            } else {
                tk_lt_cache_release(lt->plans, e);
            }
        }
    }
done:
    if (rc)
        tk_lt_plan_free(p, NULL);
    else
        *out = p;
    return rc;
}

/* D = epilogue(alpha op(A) op(B) + beta C + bias) for the problem, with its plan from the cache
 * (made and added on a miss), on stream. */
static int lt_run(const tk_cublaslt_ref *lt, const lt_problem *pb, const void *bias, const void *a, const void *b,
                  const void *c, void *d, float beta, cudaStream_t stream)
{
    const tk_cublaslt *api = lt->api;
    tk_lt_entry *entry = NULL;
    tk_lt_plan *plan = NULL, *uncached = NULL;
    cublasLtMatmulDesc_t desc = NULL;
    int rc;
    if ((rc = get_desc(lt, pb, bias, &desc)))
        goto done;
    if ((entry = tk_lt_cache_get(lt->plans, &pb->key))) {
        atomic_fetch_add_explicit(&lt->counters->plan_hits, 1, memory_order_relaxed);
        plan = tk_lt_entry_value(entry);
    } else {
        atomic_fetch_add_explicit(&lt->counters->plan_misses, 1, memory_order_relaxed);
        if ((rc = make_plan(lt, desc, pb, &plan)))
            goto done;
        if (tk_lt_cache_add(lt->plans, &pb->key, plan, &entry)) {
            uncached = plan; /* no memory for the entry: this call uses the plan, then frees it */
            tk_error_clear();
        } else {
            plan = tk_lt_entry_value(entry);
        }
    }
    float alpha = 1.0f;
    LT_CHECK(api->Matmul(lt->handle, desc, &alpha, a, plan->a, b, plan->b, &beta, c, plan->d, d, plan->d,
                         &plan->heur.algo, plan->heur.workspaceSize ? lt->local->workspace : NULL,
                         plan->heur.workspaceSize ? lt->local->workspace_size : 0, stream));
done:
    tk_lt_cache_release(lt->plans, entry);
    tk_lt_plan_free(uncached, NULL);
    return rc;
}

static int linear_cublaslt(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K,
                           int64_t N, const lt_extra *ex)
{
    int rc;
    tk_cublaslt_ref lt;
    if ((rc = tk_cublaslt_get(ctx, &lt)))
        return rc;
    tk_tensor *bias_copy = NULL;
    const void *x = tk_tensor_data(in[0]), *w = tk_tensor_data(in[1]), *bias = in[2] ? tk_tensor_data(in[2]) : NULL;
    void *y = tk_tensor_data(out[0]);
    const void *r = ex->residual ? tk_tensor_data(ex->residual) : y;
    lt_problem pb;
    pb.dtype = tk_tensor_dtype(in[0]);
    /* The bias epilogue reads the bias in vectors, and no preference tells cuBLASLt otherwise
     * (Marian NMT's cuBLASLt code found it needs 8 to 16 bytes): a bias that is not 16-byte
     * aligned, only possible in a wrapped tensor, is copied (N elements) to a fresh allocation. */
    if (bias && ptr_alignment(bias) < 16) {
        if ((rc = tk_tensor_new(&bias_copy, ctx, tk_ctx_device(ctx), pb.dtype, 1, &N)) ||
            (rc = tk_tensor_copy(ctx, bias_copy, in[2])))
            goto done;
        bias = tk_tensor_data(bias_copy);
    }
    pb.type = pb.dtype == TK_F32 ? CUDA_R_32F : pb.dtype == TK_F16 ? CUDA_R_16F : CUDA_R_16BF;
    pb.M = M, pb.K = K, pb.N = N;
    pb.align_a = ptr_alignment(w), pb.align_b = ptr_alignment(x), pb.align_d = ptr_alignment(y);
    pb.align_c = ptr_alignment(r);
    pb.gelu = ex->gelu;
    pb.matmul = 0, pb.batch = 1, pb.shared_b = 0, pb.b_t = 0;
    if (ex->gelu)
        pb.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    else
        pb.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    pb.key = (tk_lt_key){.kind = PLAN_EXACT, .m = M, .n = N, .k = K, .dtype = pb.dtype, .epilogue = pb.epilogue,
                         .align = log2_of(pb.align_a) | log2_of(pb.align_b) << 8 | log2_of(pb.align_d) << 16 |
                                  log2_of(pb.align_c) << 24 | (int64_t)(ex->residual != NULL) << 32,
                         .workspace = (int64_t)lt.local->workspace_size};

    rc = lt_run(&lt, &pb, bias, w, x, r, y, ex->residual ? 1.0f : 0.0f, (cudaStream_t)tk_cuda_stream(ctx));
done:
    if (rc == TK_EUNSUPPORTED && (ex->gelu || ex->residual))
        atomic_fetch_add_explicit(&lt.counters->fused_fallbacks, 1, memory_order_relaxed);
    if (bias_copy) {
        /* the matmul reads it: wait for the stream before the memory goes back (rare path) */
        int src = tk_ctx_sync(ctx);
        if (!rc)
            rc = src;
        tk_tensor_free(bias_copy);
    }
    return rc;
}

/* tk::matmul on cuBLASLt: y[M, N] = a[M, K] b[K, N], row-major, for each of `batch` products. In
 * cuBLASLt's column-major terms Y^T (N x M, ld N) = B^T (N x K, ld N) A^T (K x M, ld K): A = the
 * buffer of b, B = the buffer of a, both untransposed; batches strided by whole matrices (b's by
 * 0 when one b serves every product). */
static int matmul_cublaslt(tk_ctx *ctx, const tk_tensor *a, const tk_tensor *b, tk_tensor *y, int64_t batch,
                           int64_t M, int64_t K, int64_t N, int shared_b)
{
    int rc;
    tk_cublaslt_ref lt;
    if ((rc = tk_cublaslt_get(ctx, &lt)))
        return rc;
    lt_problem pb = {.dtype = tk_tensor_dtype(a), .M = M, .K = K, .N = N, .matmul = 1, .batch = batch,
                     .shared_b = shared_b, .b_t = !tk_tensor_is_contiguous(b), .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
    pb.type = pb.dtype == TK_F32 ? CUDA_R_32F : pb.dtype == TK_F16 ? CUDA_R_16F : CUDA_R_16BF;
    pb.align_a = ptr_alignment(tk_tensor_data(b)), pb.align_b = ptr_alignment(tk_tensor_data(a));
    pb.align_c = pb.align_d = ptr_alignment(tk_tensor_data(y));
    /* strided batches start every matrix at a multiple of its size: the alignment that holds */
    uint32_t es = (uint32_t)tk_dtype_size(pb.dtype);
    if (batch > 1) {
        uint32_t am = alignment_of((uint64_t)(M * K * es)), bm = alignment_of((uint64_t)(K * N * es));
        uint32_t dm = alignment_of((uint64_t)(M * N * es));
        pb.align_b = pb.align_b < am ? pb.align_b : am;
        pb.align_a = shared_b || pb.align_a < bm ? pb.align_a : bm;
        pb.align_c = pb.align_d = pb.align_d < dm ? pb.align_d : dm;
    }
    pb.key = (tk_lt_key){.kind = PLAN_EXACT, .m = M, .n = N, .k = K, .dtype = pb.dtype, .epilogue = pb.epilogue,
                         .align = log2_of(pb.align_a) | log2_of(pb.align_b) << 8 | log2_of(pb.align_d) << 16,
                         .workspace = (int64_t)lt.local->workspace_size, .batch = batch,
                         .form = (shared_b ? 2 : 1) + 2 * pb.b_t};
    void *d = tk_tensor_data(y);
    return lt_run(&lt, &pb, NULL, tk_tensor_data(b), tk_tensor_data(a), d, d, 0.0f, (cudaStream_t)tk_cuda_stream(ctx));
}
#else
static int matmul_cublaslt(tk_ctx *ctx, const tk_tensor *a, const tk_tensor *b, tk_tensor *y, int64_t batch,
                           int64_t M, int64_t K, int64_t N, int shared_b)
{
    (void)ctx, (void)a, (void)b, (void)y, (void)batch, (void)M, (void)K, (void)N, (void)shared_b;
    return tk_error_set(TK_EUNSUPPORTED, "op 'tk::matmul': libtkrt was built without the CUDA toolkit's "
                                         "headers, so without cuBLASLt");
}
static int linear_cublaslt(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K,
                           int64_t N, const lt_extra *ex)
{
    (void)ctx, (void)in, (void)out, (void)M, (void)K, (void)N, (void)ex;
    return tk_error_set(TK_EUNSUPPORTED, "op 'tk::linear': libtkrt was built without the CUDA toolkit's "
                                         "headers, so without cuBLASLt");
}
#endif

/* --- few rows: the op's own kernel ----------------------------------------------------------
 * tk::linear (not its fused forms: cuBLASLt's epilogues are faster there) of up to
 * LINEAR_SMALL_ROWS rows of f16 or bf16 with K and N multiples of 64, contiguous 16-byte aligned
 * tensors, on sm_80 and later: linear_small.cu's kernel, whose launch costs the host what any
 * launch does, where a call of cublasLtMatmul spends 6 to 10 us there (bench/serving/JOURNAL.md,
 * run96, run97). $TK_LINEAR_SMALL_ROWS sets another bound (0: never). */
#define LINEAR_SMALL_ROWS 1024

TK_KERNEL_DECL(tk_linear_small_f16);
TK_KERNEL_DECL(tk_linear_small_bf16);

static int64_t small_rows(void)
{
    static _Atomic int64_t v = -1;
    if (v < 0)
        v = tk_env_count("TK_LINEAR_SMALL_ROWS", LINEAR_SMALL_ROWS);
    return v;
}

static int small_operand(const tk_tensor *t, tk_dtype dt)
{
    return !t || (tk_tensor_dtype(t) == dt && tk_tensor_is_contiguous(t) && ptr_alignment(tk_tensor_data(t)) >= 16);
}

/* Whether the kernel for few rows takes this problem (the conditions above; its sizes are ints) */
static int small_takes(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K, int64_t N)
{
    tk_dtype dt = tk_tensor_dtype(in[0]);
    if ((dt != TK_F16 && dt != TK_BF16) || M > small_rows() || K % 64 || N % 64 || M > INT32_MAX || K > INT32_MAX ||
        N > INT32_MAX)
        return 0;
    return tk_cuda_cc_of(ctx) >= 80 && small_operand(in[0], dt) && small_operand(in[1], dt) &&
           small_operand(in[2], dt) && small_operand(out[0], dt);
}

/* tk::linear on the GPU: the kernel for few rows where it takes the problem, cuBLASLt otherwise. */
static int linear_gpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out, int64_t M, int64_t K, int64_t N)
{
    static const lt_extra plain = {0, NULL};
    if (!small_takes(ctx, in, out, M, K, N))
        return linear_cublaslt(ctx, in, out, M, K, N, &plain);
    int m = (int)M, n = (int)N, k = (int)K;
    return tk_wrap(ctx, tk_tensor_dtype(in[0]) == TK_BF16 ? tk_linear_small_bf16 : tk_linear_small_f16,
                   TK_DIM3((uint32_t)(N / 64), (uint32_t)tk_cdiv(M, 64)), TK_DIM3(128), in[0], in[1], in[2], out[0], m,
                   n, k);
}

/* y[M, N] = x[M, K] w[N, K]^T + b: 2MNK flops for the product and MN for the bias; x, w, b and y
 * each cross memory once. */
static int linear_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double M = (double)tk_numel(in[0]) / (double)tk_tensor_dim(in[0], -1), K = (double)tk_tensor_dim(in[0], -1);
    double N = (double)tk_tensor_dim(in[1], 0), size = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    (void)out;
    double bias = in[2] ? 1.0 : 0.0;
    cost->flops = 2.0 * M * N * K + bias * M * N;
    cost->bytes = (M * K + N * K + bias * N + M * N) * size;
    return 0;
}

TK_OP(tk_linear_op, "tk::linear", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
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
    return linear_gpu(ctx, in, out, M, K, N);
}

tk_tensor *(tk_linear)(tk_ctx *ctx, tk_tensor *x, tk_tensor *w, tk_tensor *b) { return tk_call(ctx, "tk::linear", x, w, b); }

/* --- fused forms -------------------------------------------------------------------------
 * The executor (runtime/exec.c) runs tk::linear followed by tk::gelu of its result, or by tk::add
 * of its result and a tensor of its shape, as one of these when nothing else reads the linear's
 * result (tk_linear_fused_def): on a GPU one cuBLASLt matmul, with the GELU epilogue or with the
 * residual as C (beta 1), instead of a matmul and an elementwise pass over its output. Where
 * cuBLASLt has no algorithm for the fused form, the two ops run as before. The CPU fallbacks
 * compute what the two ops compute, in the same order and roundings: the linear into y, then the
 * elementwise op in place. */

static int fused_fallback(tk_ctx *ctx, const char *op, tk_tensor *const *in, int nin, tk_tensor *y)
{
    tk_tensor *out[1] = {y};
    return tk_op_run(ctx, op, in, nin, out, 1);
}

static int linear_gelu_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int rc = linear_cpu(ctx, in, out);
    return rc ? rc
              : tk_ref_unary(TK_EW_GELU, tk_tensor_dtype(out[0]), tk_tensor_data(out[0]), tk_tensor_data(out[0]),
                             tk_numel(out[0]));
}

TK_OP(tk_linear_gelu_op, "tk::_linear_gelu", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
      .meta = linear_meta, .cpu = linear_gelu_cpu, .cost = linear_cost)
{
    int64_t M, K, N;
    int rc = linear_check(ctx, in, &M, &K, &N);
    if (!rc)
        rc = linear_check_out(in[0], out[0], M, N);
    if (rc || M == 0 || N == 0)
        return rc;
    static const lt_extra gelu = {1, NULL}, plain = {0, NULL};
    if ((rc = linear_cublaslt(ctx, in, out, M, K, N, &gelu)) != TK_EUNSUPPORTED)
        return rc;
    tk_error_clear(); /* no fused algorithm for this problem: the matmul, then tk::gelu in place */
    if ((rc = linear_cublaslt(ctx, in, out, M, K, N, &plain)))
        return rc;
    return fused_fallback(ctx, "tk::gelu", out, 1, out[0]);
}

/* The residual r (in[0]) has the result's dtype and shape: [..., N] with x's leading dims. */
static int residual_check(tk_ctx *ctx, tk_tensor *const *in)
{
    const tk_tensor *r = in[0], *x = in[1], *w = in[2];
    int rank = tk_tensor_rank(x), err;
    char sr[160], want[160];
    if (tk_tensor_dtype(r) != tk_tensor_dtype(x))
        return tk_error_set(TK_EINVAL, "op 'tk::_linear_add': residual is %s and x %s (they must share a dtype)",
                            tk_dtype_name(tk_tensor_dtype(r)), tk_dtype_name(tk_tensor_dtype(x)));
    int differ = tk_tensor_rank(r) != rank;
    for (int i = 0; i < rank && !differ; i++) {
        tk_sym a = tk_tensor_sym(r, i), b = i < rank - 1 ? tk_tensor_sym(x, i) : tk_tensor_sym(w, 0);
        differ = tk_sym_is_const(a) && tk_sym_is_const(b) && a.value != b.value;
    }
    if (differ) {
        tk_tensor_format_shape(r, sr, sizeof sr);
        tk_tensor_format_shape(x, want, sizeof want);
        return tk_error_set(TK_EINVAL,
                            "op 'tk::_linear_add': residual is %s, expected x's shape %s with the last dim the "
                            "weight's output features", sr, want);
    }
    for (int i = 0; i < rank; i++) {
        tk_sym a = tk_tensor_sym(r, i), b = i < rank - 1 ? tk_tensor_sym(x, i) : tk_tensor_sym(w, 0);
        if (tk_sym_is_const(a) && tk_sym_is_const(b))
            continue;
        char what[64];
        snprintf(what, sizeof what, "residual dim %d == result dim %d", i, i);
        if ((err = tk_require_eq(ctx, a, b, what)))
            return err;
    }
    return 0;
}

static int linear_add_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = linear_meta(ctx, in + 1, out);
    return err ? err : residual_check(ctx, in);
}

static int linear_add_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int rc = residual_check(ctx, in);
    if (!rc)
        rc = linear_cpu(ctx, in + 1, out);
    return rc ? rc
              : tk_ref_binary(TK_EW_ADD, tk_tensor_dtype(out[0]), tk_tensor_data(in[0]), tk_tensor_data(out[0]),
                              tk_tensor_data(out[0]), tk_numel(out[0]));
}

/* tk::linear's cost and the residual's read (and add) */
static int linear_add_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    linear_cost(in + 1, out, cost);
    double n = (double)tk_numel(in[0]);
    cost->flops += n;
    cost->bytes += n * (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    return 0;
}

TK_OP(tk_linear_add_op, "tk::_linear_add", "(Tensor residual, Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
      .meta = linear_add_meta, .cpu = linear_add_cpu, .cost = linear_add_cost)
{
    int64_t M, K, N;
    int rc = residual_check(ctx, in);
    if (!rc)
        rc = linear_check(ctx, in + 1, &M, &K, &N);
    if (!rc)
        rc = linear_check_out(in[1], out[0], M, N);
    if (rc || M == 0 || N == 0)
        return rc;
    lt_extra res = {0, in[0]};
    static const lt_extra plain = {0, NULL};
    if ((rc = linear_cublaslt(ctx, in + 1, out, M, K, N, &res)) != TK_EUNSUPPORTED)
        return rc;
    tk_error_clear(); /* no fused algorithm: the matmul, then tk::add in place */
    if ((rc = linear_cublaslt(ctx, in + 1, out, M, K, N, &plain)))
        return rc;
    tk_tensor *ab[2] = {in[0], out[0]};
    return fused_fallback(ctx, "tk::add", ab, 2, out[0]);
}

const tk_op_def *tk_linear_fused_def(const tk_op_def *linear, const tk_op_def *next)
{
    if (linear != &tk__op_def_tk_linear_op || !next)
        return NULL;
    if (next == tk_op_find("tk::gelu"))
        return &tk__op_def_tk_linear_gelu_op;
    if (next == tk_op_find("tk::add"))
        return &tk__op_def_tk_linear_add_op;
    return NULL;
}

/* --- tk::matmul --------------------------------------------------------------------------
 * torch.matmul for a [..., M, K] and b [K, N] (one b for every product) or b [..., K, N] with a's
 * leading dims (batched): y [..., M, N]. One cuBLASLt call of strided batches on a GPU. */

static int matmul_check(tk_ctx *ctx, tk_tensor *const *in)
{
    const tk_tensor *a = in[0], *b = in[1];
    tk_dtype dt = tk_tensor_dtype(a);
    int ra = tk_tensor_rank(a), rb = tk_tensor_rank(b), err;
    char sa[160], sb[160], what[64];
    if (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::matmul' does not support dtype '%s' (expected f32, f16 or bf16)",
                            tk_dtype_name(dt));
    if (tk_tensor_dtype(b) != dt)
        return tk_error_set(TK_EINVAL, "op 'tk::matmul': a is %s and b %s (they must share a dtype)", tk_dtype_name(dt),
                            tk_dtype_name(tk_tensor_dtype(b)));
    if (ra < 2 || (rb != 2 && rb != ra)) {
        tk_tensor_format_shape(a, sa, sizeof sa); /* shapes are formatted for messages only: not per call */
        tk_tensor_format_shape(b, sb, sizeof sb);
        return tk_error_set(TK_EINVAL, "op 'tk::matmul': a is %s and b %s; expected a [..., M, K] and b [K, N] or "
                            "b [..., K, N] with a's leading dims", sa, sb);
    }
    for (int i = 0; i < rb - 1; i++) {
        /* b's leading dims against a's, then K: a's last against b's second to last */
        int ia = i < rb - 2 ? i : ra - 1;
        tk_sym x = tk_tensor_sym(a, ia), y = tk_tensor_sym(b, i);
        if (tk_sym_is_const(x) && tk_sym_is_const(y)) {
            if (x.value != y.value) {
                tk_tensor_format_shape(a, sa, sizeof sa);
                tk_tensor_format_shape(b, sb, sizeof sb);
                return tk_error_set(TK_EINVAL, "op 'tk::matmul': a is %s and b %s: a dim %d (%lld) != b dim %d (%lld)%s",
                                    sa, sb, ia, (long long)x.value, i, (long long)y.value,
                                    i == rb - 2 ? " (K)" : " (batch)");
            }
            continue;
        }
        snprintf(what, sizeof what, "a dim %d == b dim %d", ia, i);
        if ((err = tk_require_eq(ctx, x, y, what)))
            return err;
    }
    return 0;
}

static int matmul_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int err = matmul_check(ctx, in);
    if (err)
        return err;
    tk_sym shape[TK_MAX_DIMS];
    int ra = tk_tensor_rank(in[0]);
    for (int i = 0; i < ra - 1; i++)
        shape[i] = tk_tensor_sym(in[0], i);
    shape[ra - 1] = tk_tensor_sym(in[1], -1);
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), ra, shape);
}

/* The products a call makes, their sizes, and whether b is one for all. */
static void matmul_dims(tk_tensor *const *in, int64_t *batch, int64_t *M, int64_t *K, int64_t *N, int *shared)
{
    *M = tk_tensor_dim(in[0], -2), *K = tk_tensor_dim(in[0], -1), *N = tk_tensor_dim(in[1], -1);
    *batch = 1;
    for (int i = 0; i < tk_tensor_rank(in[0]) - 2; i++)
        *batch *= tk_tensor_dim(in[0], i);
    *shared = tk_tensor_rank(in[1]) == 2;
}

/* y = a b in float, each product's b rows widened once */
static int matmul_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    int err = matmul_check(ctx, in), shared;
    int64_t batch, M, K, N;
    if (err)
        return err;
    matmul_dims(in, &batch, &M, &K, &N, &shared);
    tk_dtype dt = tk_tensor_dtype(in[0]);
    const void *a = tk_tensor_data(in[0]), *b = tk_tensor_data(in[1]);
    void *y = tk_tensor_data(out[0]);
    float *bf = malloc((size_t)(K * N + N) * sizeof(float) + 1);
    if (!bf)
        return tk_error_set(TK_ENOMEM, "op 'tk::matmul': out of memory for a [%lld, %lld] operand", (long long)K,
                            (long long)N);
    float *acc = bf + K * N;
    const int64_t *st = tk_tensor_strides(in[1]);
    int rb = tk_tensor_rank(in[1]), strided = !tk_tensor_is_contiguous(in[1]);
    for (int64_t p = 0; p < batch; p++) {
        if ((p == 0 || !shared) && strided) /* b a transposed view (tk_op_takes_strided) */
            for (int64_t k = 0; k < K; k++)
                for (int64_t n = 0; n < N; n++)
                    bf[k * N + n] = tk_ref_load(dt, b, (shared ? 0 : p * K * N) + k * st[rb - 2] + n * st[rb - 1]);
        else if (p == 0 || !shared)
            for (int64_t k = 0; k < K; k++)
                widen_row(dt, b, (shared ? 0 : p * K) + k, N, bf + k * N);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t n = 0; n < N; n++)
                acc[n] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float x = tk_ref_load(dt, a, (p * M + i) * K + k);
                const float *br = bf + k * N;
                for (int64_t n = 0; n < N; n++)
                    acc[n] += x * br[n];
            }
            for (int64_t n = 0; n < N; n++)
                tk_ref_store(dt, y, (p * M + i) * N + n, acc[n]);
        }
    }
    free(bf);
    return 0;
}

/* 2 batch M N K flops; a, b (once, or once a product) and y cross memory once */
static int matmul_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double y = (double)tk_numel(out[0]), K = (double)tk_tensor_dim(in[0], -1);
    cost->flops = 2.0 * y * K;
    cost->bytes = ((double)tk_numel(in[0]) + (double)tk_numel(in[1]) + y) * (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    return 0;
}

TK_OP(tk_matmul_op, "tk::matmul", "(Tensor a, Tensor b) -> Tensor", .meta = matmul_meta, .cpu = matmul_cpu,
      .cost = matmul_cost)
{
    int err = matmul_check(ctx, in), shared;
    int64_t batch, M, K, N;
    if (err)
        return err;
    matmul_dims(in, &batch, &M, &K, &N, &shared);
    if (batch == 0 || M == 0 || N == 0)
        return 0;
    if (K == 0)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::matmul': K is 0 (an all-zero result) on a GPU");
    if (batch > INT32_MAX)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::matmul': %lld products in one call (at most 2^31 - 1)",
                            (long long)batch);
    return matmul_cublaslt(ctx, in[0], in[1], out[0], batch, M, K, N, shared);
}

tk_tensor *(tk_matmul)(tk_ctx *ctx, tk_tensor *a, tk_tensor *b) { return tk_call(ctx, "tk::matmul", a, b); }

int tk_matmul_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides)
{
    if (def != &tk__op_def_tk_matmul_op || i != 1)
        return 0;
    if (!shape)
        return 1;
    /* b [..., K, N] as the transposed view of a contiguous [..., N, K]: cuBLASLt's op T */
    if (rank < 2 || (shape[rank - 2] != 1 && strides[rank - 2] != 1) ||
        (shape[rank - 1] != 1 && strides[rank - 1] != shape[rank - 2]))
        return 0;
    int64_t next = shape[rank - 2] * shape[rank - 1];
    for (int d = rank - 3; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != next)
            return 0;
        next *= shape[d];
    }
    return 1;
}
