/* Kernel authoring: TK_KERNEL marks a CUDA kernel that ops launch through tk_wrap. The cubin
 * symbol is the source name (C linkage), which is how the runtime finds it. */
#ifndef TK_KERNEL_H
#define TK_KERNEL_H

#include <stdint.h>

#if defined(__clang__)
/* What the analyzer finds: TK_KERNEL definitions carry this annotation. */
#define TK__KERNEL_ANNOTATE __attribute__((annotate("tk.kernel")))
#else
#define TK__KERNEL_ANNOTATE
#endif

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TK_KERNEL extern "C" TK__KERNEL_ANNOTATE __global__
#elif defined(__cplusplus)
/* A kernel source read by a host C++ compiler: the kernel is an ordinary C function. */
#define TK_KERNEL extern "C" TK__KERNEL_ANNOTATE
#else
/* A kernel source read by a C compiler (for example beside its CPU reference). */
#define TK_KERNEL TK__KERNEL_ANNOTATE
#endif

#endif
