// Side-by-side timing of memory layouts for elementwise kernels (bf16, 2^28 elements): grid-stride
// over resident blocks versus one block per contiguous chunk, against the D2D memcpy.
// Standalone: nvcc -O3 -std=c++17 -arch=sm_90 -o variants_layout variants_layout.cu
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ uint4 ld256(const uint4 *p) {
    uint4 v; asm volatile("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)); return v; }
__device__ __forceinline__ uint4 ldg(const uint4 *p) { return __ldg(p); }
__device__ __forceinline__ void unpack(uint4 q, float (&v)[8]) { uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int i = 0; i < 4; i++) { v[2*i] = __uint_as_float(w[i] << 16); v[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); } }
__device__ __forceinline__ uint32_t pk(float a, float b) { __nv_bfloat162 h = __floats2bfloat162_rn(a, b); return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ uint4 pack(const float (&v)[8]) { return make_uint4(pk(v[0],v[1]), pk(v[2],v[3]), pk(v[4],v[5]), pk(v[6],v[7])); }
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

template <bool P> __global__ void __launch_bounds__(256) copy_gs(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nvec) {
    long long nt = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nvec; i += nt) y[i] = P ? ld256(x + i) : ldg(x + i); }
// blocked: each block owns a contiguous chunk of U*256 vectors, no grid stride
template <bool P, int U, bool SILU> __global__ void __launch_bounds__(256) blocked(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nvec) {
    long long base = (long long)blockIdx.x * 256 * U + threadIdx.x;
    uint4 q[U];
#pragma unroll
    for (int u = 0; u < U; u++) { long long i = base + u * 256; if (i < nvec) q[u] = P ? ld256(x + i) : ldg(x + i); }
#pragma unroll
    for (int u = 0; u < U; u++) { long long i = base + u * 256; if (i < nvec) { if (SILU) { float v[8]; unpack(q[u], v); for (int k = 0; k < 8; k++) v[k] = silu(v[k]); y[i] = pack(v); } else y[i] = q[u]; } }
}
// grid-stride with U vectors per trip, optional L2 256B prefetch, optional silu
template <bool P, int U, bool SILU> __global__ void __launch_bounds__(256) gs(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nvec) {
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, nt = (long long)gridDim.x * blockDim.x, i = tid;
    for (; i + (U - 1) * nt < nvec; i += U * nt) { uint4 q[U];
#pragma unroll
        for (int u = 0; u < U; u++) q[u] = P ? ld256(x + i + u * nt) : ldg(x + i + u * nt);
#pragma unroll
        for (int u = 0; u < U; u++) { if (SILU) { float v[8]; unpack(q[u], v); for (int k = 0; k < 8; k++) v[k] = silu(v[k]); y[i + u * nt] = pack(v); } else y[i + u * nt] = q[u]; } }
    for (; i < nvec; i += nt) { uint4 q = ldg(x + i); if (SILU) { float v[8]; unpack(q, v); for (int k = 0; k < 8; k++) v[k] = silu(v[k]); y[i] = pack(v); } else y[i] = q; }
}
template <typename L> float timeit(L launch) {
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); for (int w = 0; w < 3; w++) launch();
    std::vector<float> t; for (int r = 0; r < 20; r++) { CK(cudaEventRecord(e0)); for (int k = 0; k < 10; k++) launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms * 100.0f); }
    CK(cudaGetLastError()); std::sort(t.begin(), t.end()); return t[t.size() / 2]; }
int main() {
    const long long n = 1LL << 28, nvec = n / 8; const size_t bytes = n * 2; int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    uint4 *a, *y; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&y, bytes)); CK(cudaMemset(a, 0x3f, bytes));
    float tc = timeit([&] { CK(cudaMemcpyAsync(y, a, bytes, cudaMemcpyDeviceToDevice)); }); double bwc = 2.0 * bytes / tc / 1e3;
    printf("memcpy D2D %.1f us %.1f GB/s\n| variant | us | %% of copy |\n|---|---|---|\n", tc, bwc);
    auto row = [&](const char *nm, float us) { printf("| %s | %.1f | %.1f |\n", nm, us, 100.0 * (2.0 * bytes / us / 1e3) / bwc); };
    int g8 = sms * 8;
    row("copy gs ldg g8", timeit([&] { copy_gs<false><<<g8, 256>>>(a, y, nvec); }));
    row("copy gs L2::256B g8", timeit([&] { copy_gs<true><<<g8, 256>>>(a, y, nvec); }));
    row("copy gs u4 L2::256B g8", timeit([&] { gs<true, 4, false><<<g8, 256>>>(a, y, nvec); }));
    for (int U : {1, 2, 4, 8}) { (void)U; }
    row("copy blocked u1 ldg", timeit([&] { blocked<false, 1, false><<<(nvec + 255) / 256, 256>>>(a, y, nvec); }));
    row("copy blocked u4 ldg", timeit([&] { blocked<false, 4, false><<<(nvec + 1023) / 1024, 256>>>(a, y, nvec); }));
    row("copy blocked u4 L2::256B", timeit([&] { blocked<true, 4, false><<<(nvec + 1023) / 1024, 256>>>(a, y, nvec); }));
    row("copy blocked u8 L2::256B", timeit([&] { blocked<true, 8, false><<<(nvec + 2047) / 2048, 256>>>(a, y, nvec); }));
    row("silu gs u2 ldg g8", timeit([&] { gs<false, 2, true><<<g8, 256>>>(a, y, nvec); }));
    row("silu gs u2 L2::256B g8", timeit([&] { gs<true, 2, true><<<g8, 256>>>(a, y, nvec); }));
    row("silu gs u4 L2::256B g8", timeit([&] { gs<true, 4, true><<<g8, 256>>>(a, y, nvec); }));
    row("silu blocked u4 L2::256B", timeit([&] { blocked<true, 4, true><<<(nvec + 1023) / 1024, 256>>>(a, y, nvec); }));
    row("silu blocked u8 L2::256B", timeit([&] { blocked<true, 8, true><<<(nvec + 2047) / 2048, 256>>>(a, y, nvec); }));
    row("silu blocked u4 ldg", timeit([&] { blocked<false, 4, true><<<(nvec + 1023) / 1024, 256>>>(a, y, nvec); }));
    return 0;
}
