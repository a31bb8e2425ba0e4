/* tk::_mlp, the fully fused MLP of narrow width that the executor runs where a program has
 *   h = tk::linear(x, w1, b1); a = tk::gelu(h) (tanh); m = tk::linear(a, w2, b2); y = tk::add(r, m)
 * with nothing else reading h, a or m (runtime/exec.c fuses the pairs into tk::_linear_gelu and
 * tk::_linear_add first, then those two into this, tk_mlp_fused_def):
 *   (Tensor residual, Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2, Tensor? hidden) -> Tensor
 *   x, residual, y [..., D]; w1 [H, D], b1 [H]; w2 [D, H], b2 [D]; hidden [..., H], scratch
 * On an sm_90 GPU (from TK_MLP_MIN_ROWS rows: every call by default), the persistent kernel of
 * mlp.cu (clusters of two blocks holding the weights in shared memory) for f16/bf16 with D 64 or
 * 128 and H a multiple of 128, 256 at least, whose weights fit (tk_mlp_takes), contiguous 16-byte
 * aligned tensors; otherwise (and on the CPU) the two fused linears it replaces, through `hidden`
 * (or a tensor of its own where the call gives none: not while a CUDA graph is captured). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <tk/op.h>
#include <tk/runtime.h>

#include "mlp_grid.h"
#include "rt_internal.h"

TK_KERNEL_DECL(tk_mlp_fused_f16_d64);
TK_KERNEL_DECL(tk_mlp_fused_f16_d128);
TK_KERNEL_DECL(tk_mlp_fused_bf16_d64);
TK_KERNEL_DECL(tk_mlp_fused_bf16_d128);
TK_KERNEL_DECL(tk_mlp_spread_f16_d64);
TK_KERNEL_DECL(tk_mlp_spread_f16_d128);
TK_KERNEL_DECL(tk_mlp_spread_bf16_d64);
TK_KERNEL_DECL(tk_mlp_spread_bf16_d128);

/* the two ops it replaces: h = tk::_linear_gelu(x, w1, b1) into `hidden` (the executor's, planned
 * in the session's memory), or a tensor of its own on ctx's device where the call gives none, then
 * out = tk::_linear_add(residual, h, w2, b2) */
static int mlp_unfused(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    const tk_tensor *x = in[1];
    int rank = tk_tensor_rank(x), rc = 0;
    if (rank < 1 || tk_tensor_rank(in[2]) != 2)
        return tk_error_set(TK_EINVAL, "tk::_mlp: x has %d dims and w1 %d; expected x [..., D] and w1 [H, D]", rank,
                            tk_tensor_rank(in[2]));
    int64_t shape[TK_MAX_DIMS];
    for (int i = 0; i < rank - 1; i++)
        shape[i] = tk_tensor_dim(x, i);
    shape[rank - 1] = tk_tensor_dim(in[2], 0);
    tk_tensor *h = in[6], *own = NULL;
    int same = h && tk_tensor_rank(h) == rank && tk_tensor_dtype(h) == tk_tensor_dtype(x);
    for (int i = 0; same && i < rank; i++)
        same = tk_tensor_dim(h, i) == shape[i];
    if (h && !same)
        return tk_error_set(TK_EINVAL, "tk::_mlp: the hidden tensor is not x's shape and dtype with %lld units last",
                            (long long)shape[rank - 1]);
    if (!h && (rc = tk_tensor_new(&own, ctx, tk_ctx_device(ctx), tk_tensor_dtype(x), rank, shape)))
        return rc;
    if (own)
        h = own;
    tk_tensor *gin[3] = {in[1], in[2], in[3]}, *hout[1] = {h};
    rc = tk_op_run(ctx, "tk::_linear_gelu", gin, 3, hout, 1);
    if (!rc) {
        tk_tensor *ain[4] = {in[0], h, in[4], in[5]};
        rc = tk_op_run(ctx, "tk::_linear_add", ain, 4, (tk_tensor **)out, 1);
    }
    tk_tensor_free(own);
    return rc;
}

/* Rows below which the two linears (cuBLASLt) run instead of the kernel (mlp_grid.h: none by
 * default). TK_MLP_MIN_ROWS sets it, for measurements and tests; read once (tk_mlp_env_reload
 * reads it again). */
static _Atomic int64_t min_rows_env = -1;
static int64_t min_rows(void)
{
    if (min_rows_env < 0)
        min_rows_env = tk_env_count("TK_MLP_MIN_ROWS", TK_MLP_MIN_ROWS);
    return min_rows_env;
}

void tk_mlp_env_reload(void) { min_rows_env = -1; }

/* Whether the kernel runs a call of this many rows on ctx's device (which takes it: mlp_kernel_takes):
 * sm_90 (its only cubin), from min_rows() rows */
static int kernel_runs(tk_ctx *ctx, int64_t rows) { return tk_cuda_cc_of(ctx) == 90 && rows >= min_rows(); }

int tk_mlp_kernel_only(tk_ctx *ctx) { return kernel_runs(ctx, 1); }

/* The output: the residual's dtype and shape (the two linears check the rest when they run). */
static int mlp_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    return tk_spec_like(out[0], in[0]);
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Whether the kernel takes this call: dtypes, widths, contiguous aligned tensors. */
static int mlp_kernel_takes(tk_tensor *const *in, const tk_tensor *y, int64_t *M, int64_t *D, int64_t *H)
{
    const tk_tensor *r = in[0], *x = in[1], *w1 = in[2], *b1 = in[3], *w2 = in[4], *b2 = in[5];
    tk_dtype dt = tk_tensor_dtype(x);
    int rank = tk_tensor_rank(x);
    if ((dt != TK_F16 && dt != TK_BF16) || rank < 1 || tk_tensor_rank(w1) != 2 || tk_tensor_rank(w2) != 2)
        return 0;
    *D = tk_tensor_dim(x, rank - 1);
    *H = tk_tensor_dim(w1, 0);
    *M = *D ? tk_numel(x) / *D : 0;
    if (!tk_mlp_takes(*D, *H) || *M > INT32_MAX || tk_tensor_dim(w1, 1) != *D || tk_tensor_dim(w2, 0) != *D ||
        tk_tensor_dim(w2, 1) != *H || tk_numel(r) != tk_numel(x) || tk_numel(y) != tk_numel(x) ||
        (b1 && tk_numel(b1) != *H) || (b2 && tk_numel(b2) != *D))
        return 0;
    const tk_tensor *all[6] = {r, x, w1, w2, y, NULL};
    for (int i = 0; all[i]; i++)
        if (tk_tensor_dtype(all[i]) != dt || !tk_tensor_is_contiguous(all[i]) || !aligned16(tk_tensor_data(all[i])))
            return 0;
    return (!b1 || (tk_tensor_dtype(b1) == dt && tk_tensor_is_contiguous(b1) && aligned16(tk_tensor_data(b1)))) &&
           (!b2 || (tk_tensor_dtype(b2) == dt && tk_tensor_is_contiguous(b2) && aligned16(tk_tensor_data(b2))));
}

/* the two linears' FLOPs and the GELU's; bytes: x, the residual, the weights and y once each (the
 * hidden layer stays on the chip) */
static int mlp_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double es = (double)tk_dtype_size(tk_tensor_dtype(in[1])), n = (double)tk_numel(in[1]);
    double w = (double)tk_numel(in[2]) + (double)tk_numel(in[4]), D = (double)tk_tensor_dim(in[2], 1);
    double rows = D > 0 ? n / D : 0, hidden = (double)tk_tensor_dim(in[2], 0);
    cost->flops = 4.0 * rows * D * hidden + 8.0 * rows * hidden + 2.0 * n;
    cost->bytes = es * (2.0 * n + (double)tk_numel(out[0]) + w);
    return 0;
}

TK_OP(tk_mlp_op, "tk::_mlp",
      "(Tensor residual, Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2, Tensor? hidden=None) -> Tensor",
      .meta = mlp_meta, .cpu = mlp_unfused, .cost = mlp_cost)
{
    int64_t M, D, H;
    if (!mlp_kernel_takes(in, out[0], &M, &D, &H))
        return mlp_unfused(ctx, in, out);
    if (M == 0)
        return 0;
    if (!kernel_runs(ctx, M))
        return mlp_unfused(ctx, in, out);
    static const tk_kernel *const kernels[2][2][2] = {
        {{tk_mlp_fused_f16_d64, tk_mlp_fused_f16_d128}, {tk_mlp_fused_bf16_d64, tk_mlp_fused_bf16_d128}},
        {{tk_mlp_spread_f16_d64, tk_mlp_spread_f16_d128}, {tk_mlp_spread_bf16_d64, tk_mlp_spread_bf16_d128}}};
    /* A cluster takes two tiles of 64 rows a round, one a warpgroup, as many clusters as SM pairs at
     * most (each then walks several rounds). Where the last round has no more tiles than there are
     * clusters, the spread form runs them one a cluster, on one warpgroup a block (faster than two
     * sharing the SM's tensor cores), with a cluster per tile where they all fit in one round. */
    int64_t most = tk_ctx_sm_count(ctx) / 2, tiles = tk_cdiv(M, 64);
    if (most < 1)
        most = 1;
    const int64_t rest = tiles % (2 * most);
    const int spread = rest != 0 && rest <= most;
    int64_t clusters = spread ? tiles : tk_cdiv(tiles, 2);
    if (clusters > most)
        clusters = most;
    const tk_kernel *kern = kernels[spread][tk_tensor_dtype(in[1]) == TK_BF16][D == 128];
    int m = (int)M, h = (int)H;
    return tk_wrap_shared(ctx, kern, TK_DIM3((uint32_t)(2 * clusters)), TK_DIM3(TK_MLP_THREADS),
                          TK_MLP_DYNAMIC((int)D, h), in[0], in[1], in[2], in[3], in[4], in[5], out[0], m, h);
}

const tk_op_def *tk_mlp_fused_def(const tk_op_def *first, const tk_op_def *second, tk_dtype dtype, int64_t d,
                                  int64_t hidden)
{
    if (!first || !second || first != tk_op_find("tk::_linear_gelu") || second != tk_op_find("tk::_linear_add"))
        return NULL;
    if ((dtype != TK_F16 && dtype != TK_BF16) || !tk_mlp_takes(d, hidden))
        return NULL;
    return &tk__op_def_tk_mlp_op;
}
