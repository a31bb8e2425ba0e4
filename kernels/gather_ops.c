/* tk::embedding, PyTorch's aten::embedding (F.embedding(ids, weight) with the arguments swapped):
 *   (Tensor weight, Tensor indices) -> Tensor
 * weight [rows, D] (f32, f16 or bf16), indices of any shape (i32 or i64), out [*indices, D] of the
 * weight's dtype. The kernel of gather.cu on a GPU (an id outside [0, rows) gives a row of zeros
 * there), gather_ref.c on the CPU (which refuses such an id, naming it). */
#include <stdint.h>
#include <stdio.h>
#include <tk/op.h>
#include <tk/ops.h>
#include <tk/runtime.h>

#include "ref.h"

TK_KERNEL_DECL(tk_embedding_f32_i32);
TK_KERNEL_DECL(tk_embedding_f32_i64);
TK_KERNEL_DECL(tk_embedding_f16_i32);
TK_KERNEL_DECL(tk_embedding_f16_i64);
TK_KERNEL_DECL(tk_embedding_bf16_i32);
TK_KERNEL_DECL(tk_embedding_bf16_i64);

/* [dtype][index dtype: 0 i32, 1 i64] */
static const tk_kernel *const kernels[3][2] = {{tk_embedding_f32_i32, tk_embedding_f32_i64},
                                               {tk_embedding_f16_i32, tk_embedding_f16_i64},
                                               {tk_embedding_bf16_i32, tk_embedding_bf16_i64}};

static int embedding_check(tk_tensor *const *in)
{
    tk_dtype wt = tk_tensor_dtype(in[0]), it = tk_tensor_dtype(in[1]);
    if ((wt != TK_F32 && wt != TK_F16 && wt != TK_BF16) || tk_tensor_rank(in[0]) != 2)
        return tk_error_set(TK_EINVAL, "op 'tk::embedding': input 'weight' (in[0]) is %s of rank %d, expected f32, "
                            "f16 or bf16 [rows, D]", tk_dtype_name(wt), tk_tensor_rank(in[0]));
    if (it != TK_I32 && it != TK_I64)
        return tk_error_set(TK_EINVAL, "op 'tk::embedding': input 'indices' (in[1]) is %s, expected i32 or i64",
                            tk_dtype_name(it));
    if (tk_tensor_rank(in[1]) + 1 > TK_MAX_DIMS)
        return tk_error_set(TK_EINVAL, "op 'tk::embedding': indices of rank %d give an output above %d dims",
                            tk_tensor_rank(in[1]), TK_MAX_DIMS);
    return 0;
}

static int embedding_meta(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out)
{
    (void)ctx;
    int err = embedding_check(in), r = tk_tensor_rank(in[1]);
    if (err)
        return err;
    tk_sym shape[TK_MAX_DIMS];
    for (int d = 0; d < r; d++)
        shape[d] = tk_tensor_sym(in[1], d);
    shape[r] = tk_tensor_sym(in[0], 1);
    return tk_spec_set_sym(out[0], tk_tensor_dtype(in[0]), r + 1, shape);
}

static int embedding_cpu(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)
{
    (void)ctx;
    int err = embedding_check(in);
    return err ? err
               : tk_ref_embedding(tk_tensor_dtype(in[0]), tk_tensor_data(in[0]), tk_tensor_dim(in[0], 0),
                                  tk_tensor_dim(in[0], 1), tk_tensor_dtype(in[1]), tk_tensor_data(in[1]),
                                  tk_numel(in[1]), tk_tensor_data(out[0]));
}

/* moves one row of the weight per index, and reads the indices */
static int embedding_cost(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost)
{
    cost->flops = 0;
    cost->bytes = 2.0 * (double)tk_tensor_nbytes(out[0]) + (double)tk_tensor_nbytes(in[1]);
    return 0;
}

TK_OP(tk_embedding_op, "tk::embedding", "(Tensor weight, Tensor indices) -> Tensor", .meta = embedding_meta,
      .cpu = embedding_cpu, .cost = embedding_cost)
{
    int err = embedding_check(in);
    if (err)
        return err;
    long long n = (long long)tk_numel(in[1]), rows = (long long)tk_tensor_dim(in[0], 0),
              cols = (long long)tk_tensor_dim(in[0], 1);
    if (n == 0 || cols == 0)
        return 0;
    int64_t per = 16 / (int64_t)tk_dtype_size(tk_tensor_dtype(in[0]));
    int64_t work = cols % per == 0 ? n * (cols / per) : n * cols, blocks = tk_cdiv(work, 256);
    if (blocks > 65535 * 8)
        blocks = 65535 * 8;
    const tk_kernel *k = kernels[tk_tensor_dtype(in[0])][tk_tensor_dtype(in[1]) == TK_I64];
    return tk_wrap(ctx, k, TK_DIM3(blocks), TK_DIM3(256), in[0], in[1], out[0], n, rows, cols);
}

tk_tensor *(tk_embedding)(tk_ctx *ctx, tk_tensor *weight, tk_tensor *indices)
{
    return tk_call(ctx, "tk::embedding", weight, indices);
}
