/* CPU references of the row kernels of norm.cu (tk::softmax, tk::layer_norm, tk::rms_norm): the
 * same formulas over f32, f16 and bf16 rows, sums in double, results rounded once to the dtype. */
#include <math.h>
#include <tk/half.h>

#include "ref.h"

static int float_dtype(tk_dtype dtype) { return dtype == TK_F32 || dtype == TK_F16 || dtype == TK_BF16; }

static int dtype_refused(const char *what, tk_dtype dtype)
{
    return tk_error_set(TK_EUNSUPPORTED, "%s reference: dtype %d is not f32, f16 or bf16", what, (int)dtype);
}

int tk_ref_softmax(tk_dtype dtype, const void *x, void *y, int64_t rows, int64_t cols)
{
    if (!float_dtype(dtype))
        return dtype_refused("softmax", dtype);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t o = r * cols;
        float m = -INFINITY;
        double s = 0;
        for (int64_t i = 0; i < cols; i++)
            m = fmaxf(m, tk_ref_load(dtype, x, o + i));
        if (m == -INFINITY)
            m = 0; /* every value -inf: 0/0, NaN, as the kernel and PyTorch give */
        for (int64_t i = 0; i < cols; i++)
            s += exp((double)tk_ref_load(dtype, x, o + i) - m);
        for (int64_t i = 0; i < cols; i++)
            tk_ref_store(dtype, y, o + i, (float)(exp((double)tk_ref_load(dtype, x, o + i) - m) / s));
    }
    return 0;
}

int tk_ref_layer_norm(tk_dtype dtype, const void *x, const void *w, const void *b, void *y, int64_t rows,
                      int64_t cols, float eps)
{
    if (!float_dtype(dtype))
        return dtype_refused("layer_norm", dtype);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t o = r * cols;
        double s = 0, q = 0;
        for (int64_t i = 0; i < cols; i++)
            s += tk_ref_load(dtype, x, o + i);
        const double mean = s / (double)cols;
        for (int64_t i = 0; i < cols; i++) {
            double d = tk_ref_load(dtype, x, o + i) - mean;
            q += d * d;
        }
        const double rstd = 1.0 / sqrt(q / (double)cols + eps);
        for (int64_t i = 0; i < cols; i++) {
            double v = (tk_ref_load(dtype, x, o + i) - mean) * rstd;
            if (w)
                v *= tk_ref_load(dtype, w, i);
            if (b)
                v += tk_ref_load(dtype, b, i);
            tk_ref_store(dtype, y, o + i, (float)v);
        }
    }
    return 0;
}

int tk_ref_rms_norm(tk_dtype dtype, const void *x, const void *w, void *y, int64_t rows, int64_t cols, float eps)
{
    if (!float_dtype(dtype))
        return dtype_refused("rms_norm", dtype);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t o = r * cols;
        double q = 0;
        for (int64_t i = 0; i < cols; i++) {
            double v = tk_ref_load(dtype, x, o + i);
            q += v * v;
        }
        const double rstd = 1.0 / sqrt(q / (double)cols + eps);
        for (int64_t i = 0; i < cols; i++) {
            double v = tk_ref_load(dtype, x, o + i) * rstd;
            tk_ref_store(dtype, y, o + i, (float)(w ? v * tk_ref_load(dtype, w, i) : v));
        }
    }
    return 0;
}
