/* The CPU reference of tk::embedding (gather.cu): rows of the weight copied by index. */
#include <string.h>
#include <tk/runtime.h>

#include "ref.h"

int tk_ref_embedding(tk_dtype dtype, const void *w, int64_t rows, int64_t cols, tk_dtype idtype, const void *ids,
                     int64_t n, void *y)
{
    size_t row = (size_t)cols * tk_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t id = idtype == TK_I64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
        if (id < 0 || id >= rows)
            return tk_error_set(TK_EINVAL, "op 'tk::embedding': indices[%lld] is %lld, outside the weight's %lld rows",
                                (long long)i, (long long)id, (long long)rows);
        memcpy((char *)y + (size_t)i * row, (const char *)w + (size_t)id * row, row);
    }
    return 0;
}
