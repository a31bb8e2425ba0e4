/* tk::sdpa, PyTorch's F.scaled_dot_product_attention without a mask tensor or dropout:
 *   (Tensor q, Tensor k, Tensor v, bool causal=False, float scale=0.0, int heads=0) -> Tensor
 * and tk::sdpa_qkv, the same on q, k and v packed side by side in one tensor, as one linear makes
 * them (flash-attn's qkvpacked form), read where they lie (no slices copied):
 *   (Tensor qkv, int heads, bool causal=False, float scale=0.0) -> Tensor
 *   qkv [B, S, 3*heads*D] (q, k, v in that order), out [B, S, heads*D]
 * heads 0: q [B, H, S, D], k and v [B, H, Sk, D] (PyTorch's layout), out [B, H, S, D];
 * heads n: q [B, S, n*D], k and v [B, Sk, n*D] (what a linear makes: no transpose), out like q.
 * scale 0 is 1/sqrt(D); causal masks key j > query i (PyTorch's is_causal, top-left aligned).
 * On a GPU the flash kernel of attention.cu for f16/bf16 with D 64 or 128 on 16-byte aligned
 * rows (64 queries a block), the row kernel otherwise (D up to 256); attention_ref.c on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "attention_grid.h"
#include "ref.h"
#include "rt_internal.h"

TK_KERNEL_DECL(tk_sdpa_flash_f16_d64);
TK_KERNEL_DECL(tk_sdpa_flash_f16_d128);
TK_KERNEL_DECL(tk_sdpa_flash_bf16_d64);
TK_KERNEL_DECL(tk_sdpa_flash_bf16_d128);
TK_KERNEL_DECL(tk_sdpa_flash_f16_d64_q128);
TK_KERNEL_DECL(tk_sdpa_flash_f16_d128_q128);
TK_KERNEL_DECL(tk_sdpa_flash_bf16_d64_q128);
TK_KERNEL_DECL(tk_sdpa_flash_bf16_d128_q128);
TK_KERNEL_DECL(tk_sdpa_rows_f32);
TK_KERNEL_DECL(tk_sdpa_rows_f16);
TK_KERNEL_DECL(tk_sdpa_rows_bf16);

static const char *const names[3] = {"q", "k", "v"};

/* The inputs' agreement (dtype, ranks, dims: symbolic ones become requirements) and the head dim. */
static int sdpa_check(tk_ctx *ctx, tk_tensor *const *in, int64_t *dhead)
{
    int64_t heads = tk_arg_int(ctx, 5);
    int rank = heads ? 3 : 4;
    tk_dtype dt = tk_tensor_dtype(in[0]);
    if (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::sdpa' does not support dtype '%s' (expected f32, f16 or bf16)",
                            tk_dtype_name(dt));
    if (heads < 0)
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa': heads is %lld; 0 (q [B, H, S, D]) or the number of heads "
                            "(q [B, S, heads*D])", (long long)heads);
    for (int i = 0; i < 3; i++) {
        if (tk_tensor_dtype(in[i]) != dt || tk_tensor_rank(in[i]) != rank)
            return tk_error_set(TK_EINVAL, "op 'tk::sdpa': input '%s' (in[%d]) is %s of rank %d, expected %s of rank %d "
                                "(%s)", names[i], i, tk_dtype_name(tk_tensor_dtype(in[i])), tk_tensor_rank(in[i]),
                                tk_dtype_name(dt), rank, heads ? "[B, S, heads*D]" : "[B, H, S, D]");
    }
    tk_sym last = tk_tensor_sym(in[0], rank - 1);
    if (!tk_sym_is_const(last))
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa': q's last dim must be static (the head dim%s)",
                            heads ? " times heads" : "");
    if (heads && last.value % heads)
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa': q's last dim %lld is not a multiple of heads %lld",
                            (long long)last.value, (long long)heads);
    *dhead = heads ? last.value / heads : last.value;
    /* dims that must agree: every input's batch, head and last dims; k's and v's key counts */
    char what[96];
    int err = 0;
    for (int i = 1; i < 3 && !err; i++)
        for (int d = 0; d < rank && !err; d++) {
            int seq = d == rank - 2;
            if (seq && i == 1)
                continue; /* k's keys against q's queries: any */
            tk_sym x = tk_tensor_sym(seq ? in[1] : in[0], d), y = tk_tensor_sym(in[i], d);
            if (tk_sym_is_const(x) && tk_sym_is_const(y) && x.value == y.value)
                continue; /* an eager call formats no text */
            snprintf(what, sizeof what, "%s dim %d == %s dim %d", seq ? "k" : "q", d, names[i], d);
            err = tk_require_eq(ctx, x, y, what);
        }
    return err;
}

/* The geometry of a call: dims and strides in either layout, of contiguous tensors or of q, k, v
 * as strided views whose last dim is contiguous (tk_sdpa_takes_strided: [B, S, H, D] transposed to
 * [B, H, S, D] is read where it lies). */
static void sdpa_dims(tk_ctx *ctx, tk_tensor *const *in, int64_t D, tk_sdpa_dims *g)
{
    int64_t heads = tk_arg_int(ctx, 5);
    double scale = tk_arg_float(ctx, 4);
    g->D = D;
    g->B = tk_tensor_dim(in[0], 0);
    if (heads) {
        g->H = heads;
        g->S = tk_tensor_dim(in[0], 1);
        g->Sk = tk_tensor_dim(in[1], 1);
    } else {
        g->H = tk_tensor_dim(in[0], 1);
        g->S = tk_tensor_dim(in[0], 2);
        g->Sk = tk_tensor_dim(in[1], 2);
    }
    for (int t = 0; t < 4; t++) {
        int64_t *st = t == 0 ? g->q : t == 1 ? g->k : t == 2 ? g->v : g->o;
        int64_t seq = t == 1 || t == 2 ? g->Sk : g->S;
        if (t < 3 && !tk_tensor_is_contiguous(in[t])) {
            const int64_t *ts = tk_tensor_strides(in[t]);
            if (heads)
                st[0] = ts[0], st[1] = D, st[2] = ts[1];
            else
                st[0] = ts[0], st[1] = ts[1], st[2] = ts[2];
        } else if (heads) {
            st[0] = seq * heads * D, st[1] = D, st[2] = heads * D;
        } else {
            st[0] = g->H * seq * D, st[1] = seq * D, st[2] = D;
        }
    }
    g->scale = scale != 0 ? scale : 1.0 / sqrt((double)D);
    g->causal = tk_arg_bool(ctx, 3);
}

/* A concrete call's checks and geometry (the meta function checks only: its dims may be symbolic). */
static int sdpa_geometry(tk_ctx *ctx, tk_tensor *const *in, tk_sdpa_dims *g)
{
    int64_t D;
    int err = sdpa_check(ctx, in, &D);
    if (!err)
        sdpa_dims(ctx, in, D, g);
    return err;
}

static int sdpa_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    int64_t D;
    int err = sdpa_check(ctx, in, &D);
    return err ? err : tk_spec_like(out[0], in[0]);
}

static int sdpa_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    tk_sdpa_dims g;
    int err = sdpa_geometry(ctx, in, &g);
    return err ? err : tk_ref_sdpa(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), tk_tensor_data(in[1]),
                                   tk_tensor_data(in[2]), tk_tensor_data(out[0]), &g);
}

/* q k^T and p v: 4 B H S Sk D flops (causal: about half); q, k, v and o read or written once */
static int sdpa_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double q = (double)tk_numel(in[0]), k = (double)tk_numel(in[1]), sz = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    int rank = tk_tensor_rank(in[1]);
    double sk = (double)tk_tensor_dim(in[1], rank - 2);
    cost->flops = 4.0 * q * sk;
    cost->bytes = (2 * q + 2 * k) * sz;
    (void)out;
    return 0;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The GPU launch for geometry g on q, k, v at the given addresses (their dtype dt), into out. */
static int sdpa_launch(tk_ctx *ctx, tk_dtype dt, const tk_sdpa_dims *g, const void *q, const void *k, const void *v,
                       tk_tensor *out)
{
    int64_t D = g->D;
    if (g->B * g->H > 65535 || g->S > 64 * 65535LL || g->Sk > INT32_MAX) /* grid y: one or the other */
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::sdpa': %lld batches x heads (at most 65535), %lld queries (at "
                            "most 4194240) or %lld keys (at most 2^31 - 1)", (long long)(g->B * g->H), (long long)g->S,
                            (long long)g->Sk);
    if (g->S == 0 || g->B * g->H == 0)
        return 0;
    int flash = dt != TK_F32 && (D == 64 || D == 128) && aligned16(q) && aligned16(k) && aligned16(v) &&
                aligned16(tk_tensor_data(out));
    for (int i = 0; i < 3; i++)
        flash = flash && (g->q[i] | g->k[i] | g->v[i] | g->o[i]) % 8 == 0;
    long long s[12] = {g->q[0], g->q[1], g->q[2], g->k[0], g->k[1], g->k[2],
                       g->v[0], g->v[1], g->v[2], g->o[0], g->o[1], g->o[2]};
    int H = (int)g->H, S = (int)g->S, Sk = (int)g->Sk, causal = g->causal;
    float scale = (float)g->scale;
    if (flash) {
        /* one warpgroup a block, or two where blocks read many keys (attention_grid.h) */
        static const tk_kernel *const kernels[2][2][2] = {
            {{tk_sdpa_flash_f16_d64, tk_sdpa_flash_f16_d128},
             {tk_sdpa_flash_f16_d64_q128, tk_sdpa_flash_f16_d128_q128}},
            {{tk_sdpa_flash_bf16_d64, tk_sdpa_flash_bf16_d128},
             {tk_sdpa_flash_bf16_d64_q128, tk_sdpa_flash_bf16_d128_q128}}};
        int wg = tk_sdpa_warpgroups(S, Sk, causal);
        const tk_kernel *kern = kernels[dt == TK_BF16][wg - 1][D == 128];
        unsigned bh = (unsigned)(g->B * g->H), qb = (unsigned)tk_cdiv(S, 64 * wg);
        tk_dim3 grid = causal ? (tk_dim3){bh, qb, 1} : (tk_dim3){qb, bh, 1}; /* see the kernel */
        return tk_wrap_shared(ctx, kern, grid, TK_DIM3(128 * wg), TK_SDPA_DYNAMIC((int)D, wg), q, k, v, out, H,
                              S, Sk, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], scale,
                              causal);
    }
    if (D > 256)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::sdpa': head dim %lld on a GPU (at most 256)", (long long)D);
    const tk_kernel *kern = dt == TK_F32 ? tk_sdpa_rows_f32 : dt == TK_F16 ? tk_sdpa_rows_f16 : tk_sdpa_rows_bf16;
    int64_t bx = tk_cdiv(S, 4);
    tk_dim3 grid = {(unsigned)(bx < 65535 ? bx : 65535), (unsigned)(g->B * g->H), 1};
    int d = (int)D;
    return tk_wrap(ctx, kern, grid, TK_DIM3(128), q, k, v, out, H, S, Sk, s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                   s[7], s[8], s[9], s[10], s[11], scale, causal, d);
}

TK_OP(tk_sdpa_op, "tk::sdpa", "(Tensor q, Tensor k, Tensor v, bool causal=False, float scale=0.0, int heads=0) -> Tensor",
      .meta = sdpa_meta, .cpu = sdpa_cpu, .cost = sdpa_cost)
{
    tk_sdpa_dims g;
    int err = sdpa_geometry(ctx, in, &g);
    return err ? err : sdpa_launch(ctx, tk_tensor_dtype(in[0]), &g, tk_tensor_data(in[0]), tk_tensor_data(in[1]),
                                   tk_tensor_data(in[2]), out[0]);
}

int tk_sdpa_takes_strided(const tk_op_def *def, int i, int rank, const int64_t *shape, const int64_t *strides)
{
    if (def != &tk__op_def_tk_sdpa_op || i < 0 || i > 2)
        return 0;
    if (!shape)
        return 1;
    /* q, k, v [B, H, S, D] or [B, S, H*D] with the last dim contiguous: the kernels take any
     * batch, head and sequence strides */
    if (rank < 3 || rank > 4 || (shape[rank - 1] != 1 && strides[rank - 1] != 1))
        return 0;
    for (int d = 0; d < rank - 1; d++)
        if (strides[d] < 0)
            return 0;
    return 1;
}

/* --- tk::sdpa_qkv ------------------------------------------------------------------------------ */

/* qkv's agreement ([B, S, 3*heads*D], a float dtype), its geometry and the byte offsets of k and v. */
static int qkv_check(tk_ctx *ctx, tk_tensor *const *in, tk_sdpa_dims *g, size_t *koff)
{
    int64_t heads = tk_arg_int(ctx, 1);
    tk_dtype dt = tk_tensor_dtype(in[0]);
    if (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "op 'tk::sdpa_qkv' does not support dtype '%s' (expected f32, f16 or "
                            "bf16)", tk_dtype_name(dt));
    if (tk_tensor_rank(in[0]) != 3)
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa_qkv': input 'qkv' (in[0]) is of rank %d, expected 3 "
                            "([B, S, 3*heads*D])", tk_tensor_rank(in[0]));
    tk_sym last = tk_tensor_sym(in[0], 2);
    if (heads <= 0)
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa_qkv': heads is %lld, expected the number of heads (> 0)",
                            (long long)heads);
    if (!tk_sym_is_const(last) || last.value % (3 * heads))
        return tk_error_set(TK_EINVAL, "op 'tk::sdpa_qkv': qkv's last dim must be a static multiple of 3*heads = "
                            "%lld", (long long)(3 * heads));
    int64_t D = last.value / (3 * heads), HD = heads * D;
    double scale = tk_arg_float(ctx, 3);
    g->B = tk_tensor_dim(in[0], 0);
    g->S = g->Sk = tk_tensor_dim(in[0], 1);
    g->H = heads;
    g->D = D;
    for (int t = 0; t < 3; t++) {
        int64_t *st = t == 0 ? g->q : t == 1 ? g->k : g->v;
        st[0] = g->S * 3 * HD, st[1] = D, st[2] = 3 * HD;
    }
    g->o[0] = g->S * HD, g->o[1] = D, g->o[2] = HD;
    g->scale = scale != 0 ? scale : 1.0 / sqrt((double)D);
    g->causal = tk_arg_bool(ctx, 2);
    *koff = (size_t)HD * tk_dtype_size(dt);
    return 0;
}

static int qkv_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    tk_sdpa_dims g;
    size_t koff;
    int err = qkv_check(ctx, in, &g, &koff);
    if (err)
        return err;
    tk_sym shape[3] = {tk_tensor_sym(in[0], 0), tk_tensor_sym(in[0], 1), TK_SYM(g.H * g.D)};
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), 3, shape);
}

static int qkv_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    tk_sdpa_dims g;
    size_t koff;
    int err = qkv_check(ctx, in, &g, &koff);
    const char *base = tk_tensor_data(in[0]);
    return err ? err : tk_ref_sdpa(tk_tensor_dtype(in[0]), base, base + koff, base + 2 * koff, tk_tensor_data(out[0]), &g);
}

/* as tk::sdpa: q k^T and p v, qkv read once and the output written once */
static int qkv_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    double o = (double)tk_numel(out[0]), sz = (double)tk_dtype_size(tk_tensor_dtype(in[0]));
    cost->flops = 4.0 * o * (double)tk_tensor_dim(in[0], 1);
    cost->bytes = ((double)tk_numel(in[0]) + o) * sz;
    return 0;
}

TK_OP(tk_sdpa_qkv_op, "tk::sdpa_qkv", "(Tensor qkv, int heads, bool causal=False, float scale=0.0) -> Tensor",
      .meta = qkv_meta, .cpu = qkv_cpu, .cost = qkv_cost)
{
    tk_sdpa_dims g;
    size_t koff;
    int err = qkv_check(ctx, in, &g, &koff);
    const char *base = tk_tensor_data(in[0]);
    return err ? err : sdpa_launch(ctx, tk_tensor_dtype(in[0]), &g, base, base + koff, base + 2 * koff, out[0]);
}

tk_tensor *(tk_sdpa)(tk_ctx *ctx, tk_tensor *q, tk_tensor *k, tk_tensor *v, int causal)
{
    return tk_call(ctx, "tk::sdpa", q, k, v, causal != 0);
}

tk_tensor *(tk_sdpa_qkv)(tk_ctx *ctx, tk_tensor *qkv, int heads, int causal)
{
    return tk_call(ctx, "tk::sdpa_qkv", qkv, heads, causal != 0);
}
