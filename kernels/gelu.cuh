/* tk::gelu's tanh form as a device function, for the elementwise kernel (elementwise.cu) and the
 * fused MLP's hidden layer (mlp.cu), so both compute the same values. */
#ifndef TK_KERNELS_GELU_CUH
#define TK_KERNELS_GELU_CUH

namespace {

/* The tanh form 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
 * x * sigmoid(2u): 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) exactly, and this form does not cancel
 * where tanh(u) nears -1 (x below about -3), so it stays accurate in relative terms there. */
struct op_gelu {
    __device__ __forceinline__ float operator()(float x) const
    {
        const float k2 = 1.5957691216057308f; /* 2 sqrt(2/pi) */
        float u2 = k2 * fmaf(0.044715f * x, x * x, x);
        return __fdividef(x, 1.0f + expf(-u2));
    }
};

} // namespace

#endif
