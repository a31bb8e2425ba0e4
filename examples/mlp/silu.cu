/* The activation of the MLP example: y = x * sigmoid(x) on bf16, computed in f32.
 *
 * Tuned (TK_AUTOTUNE in silu_op.c): each block of BLOCK threads covers BLOCK * ITEMS contiguous
 * elements, each thread ITEMS of them a block apart, so every load instruction of a warp reads
 * consecutive addresses. `tkexport compile` builds one variant per configuration with
 * -DBLOCK=... -DITEMS=...; the defaults below are the first configuration's, for builds without
 * tuning. EVEN (TK_HEURISTIC, set by the op when n is a multiple of BLOCK * ITEMS) drops the
 * bounds check. */
#include <tk/kernel.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef EVEN
#define EVEN 0
#endif

TK_KERNEL void __launch_bounds__(BLOCK) silu_kernel(const __nv_bfloat16 *x, __nv_bfloat16 *y, long long n)
{
    long long base = (long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        long long i = base + (long long)j * BLOCK;
        if (EVEN || i < n) {
            float v = __bfloat162float(x[i]);
            y[i] = __float2bfloat16(v / (1.0f + __expf(-v)));
        }
    }
}
