/* Empty on purpose: CUDA 13 removed texture_fetch_functions.h, but clang 19's CUDA runtime
 * wrapper (__clang_cuda_runtime_wrapper.h) still includes it. The analyzer puts this folder on
 * the include path of CUDA translation units so real kernels parse. */
