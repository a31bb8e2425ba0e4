/* The CPU reference of tk::sdpa (attention.cu): o = softmax(q k^T * scale, causal: key j <= query i)
 * v per batch and head, through the same strides, sums in double, the result rounded once. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

int tk_ref_sdpa(tk_dtype dtype, const void *q, const void *k, const void *v, void *o, const tk_sdpa_dims *g)
{
    if (dtype != TK_F32 && dtype != TK_F16 && dtype != TK_BF16)
        return tk_error_set(TK_EUNSUPPORTED, "sdpa reference: dtype %d is not f32, f16 or bf16", (int)dtype);
    double *p = malloc(sizeof(double) * (size_t)(g->Sk ? g->Sk : 1)), *acc = malloc(sizeof(double) * (size_t)g->D);
    if (!p || !acc) {
        free(p);
        free(acc);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t h = 0; h < g->H; h++)
            for (int64_t i = 0; i < g->S; i++) {
                int64_t qo = b * g->q[0] + h * g->q[1] + i * g->q[2];
                int64_t jend = g->causal ? (i + 1 < g->Sk ? i + 1 : g->Sk) : g->Sk;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < jend; j++) {
                    int64_t ko = b * g->k[0] + h * g->k[1] + j * g->k[2];
                    double dot = 0;
                    for (int64_t d = 0; d < g->D; d++)
                        dot += (double)tk_ref_load(dtype, q, qo + d) * tk_ref_load(dtype, k, ko + d);
                    p[j] = dot * g->scale;
                    if (p[j] > mx)
                        mx = p[j];
                }
                for (int64_t d = 0; d < g->D; d++)
                    acc[d] = 0;
                for (int64_t j = 0; j < jend; j++) {
                    double e = exp(p[j] - mx);
                    int64_t vo = b * g->v[0] + h * g->v[1] + j * g->v[2];
                    sum += e;
                    for (int64_t d = 0; d < g->D; d++)
                        acc[d] += e * tk_ref_load(dtype, v, vo + d);
                }
                int64_t oo = b * g->o[0] + h * g->o[1] + i * g->o[2];
                for (int64_t d = 0; d < g->D; d++)
                    tk_ref_store(dtype, o, oo + d, (float)(sum > 0 ? acc[d] / sum : 0));
            }
    free(p);
    free(acc);
    return 0;
}
