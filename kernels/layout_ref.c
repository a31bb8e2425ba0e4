/* The CPU reference of the strided copy (layout.cu): y contiguous of rank dims gets
 * y[i...] = x[sum_d i_d * st[d]], elements of es bytes. */
#include <string.h>
#include <tk/runtime.h>

#include "ref.h"

int tk_ref_strided_copy(size_t es, const void *x, void *y, int rank, const int64_t *dims, const int64_t *st)
{
    int64_t n = 1, idx[TK_MAX_DIMS] = {0};
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    for (int64_t t = 0; t < n; t++) {
        int64_t src = 0;
        for (int d = 0; d < rank; d++)
            src += idx[d] * st[d];
        memcpy((char *)y + (size_t)t * es, (const char *)x + (size_t)src * es, es);
        for (int d = rank - 1; d >= 0; d--) { /* the next index, last dim fastest */
            if (++idx[d] < dims[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}
