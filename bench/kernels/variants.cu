// Side-by-side timing of elementwise kernel variants (bf16, 2^28 elements) on one GPU: which
// memory hints, unrolling and math intrinsics reach the device-to-device copy's bandwidth.
// Standalone (CUDA runtime API): nvcc -O3 -arch=sm_90 -o variants variants.cu && ./variants
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

enum Hint { PLAIN, CS };
template <Hint H> __device__ __forceinline__ uint4 ld(const uint4 *p) { return H == CS ? __ldcs(p) : __ldg(p); }
template <Hint H> __device__ __forceinline__ void st(uint4 *p, uint4 v) { if (H == CS) __stcs(p, v); else *p = v; }

__device__ __forceinline__ void unpack(uint4 q, float (&v)[8]) {
    uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int i = 0; i < 4; i++) { v[2*i] = __uint_as_float(w[i] << 16); v[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); }
}
__device__ __forceinline__ uint32_t pk(float a, float b) { __nv_bfloat162 h = __floats2bfloat162_rn(a, b); return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ uint4 pack(const float (&v)[8]) { return make_uint4(pk(v[0],v[1]), pk(v[2],v[3]), pk(v[4],v[5]), pk(v[6],v[7])); }

struct f_silu_acc { __device__ float operator()(float x) const { return __fdividef(x, 1.0f + expf(-x)); } };
struct f_silu_fast { __device__ float operator()(float x) const { return __fdividef(x, 1.0f + __expf(-x)); } };
struct f_sin_acc { __device__ float operator()(float x) const { return sinf(x); } };
struct f_sin_fast { __device__ float operator()(float x) const {
    // Cody-Waite reduction to [-pi, pi], then the SFU sine
    float k = rintf(x * 0.15915494309189535f);
    float r = fmaf(k, -6.28318548202514648f, x);
    r = fmaf(k, 1.7484555e-7f, r);
    return __sinf(r); } };
struct f_gelu_acc { __device__ float operator()(float x) const { float u2 = 1.5957691216057308f * fmaf(0.044715f * x, x * x, x); return __fdividef(x, 1.0f + expf(-u2)); } };
struct f_gelu_fast { __device__ float operator()(float x) const { float u2 = 1.5957691216057308f * fmaf(0.044715f * x, x * x, x); return __fdividef(x, 1.0f + __expf(-u2)); } };

template <Hint H, int U, typename F>
__global__ void __launch_bounds__(256) unary(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nvec, F f) {
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, nt = (long long)gridDim.x * blockDim.x;
    long long i = tid;
    for (; i + (U - 1) * nt < nvec; i += U * nt) {
        uint4 q[U];
#pragma unroll
        for (int u = 0; u < U; u++) q[u] = ld<H>(x + i + u * nt);
#pragma unroll
        for (int u = 0; u < U; u++) { float v[8]; unpack(q[u], v);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = f(v[k]);
            st<H>(y + i + u * nt, pack(v)); }
    }
    for (; i < nvec; i += nt) { float v[8]; unpack(ld<H>(x + i), v); for (int k = 0; k < 8; k++) v[k] = f(v[k]); st<H>(y + i, pack(v)); }
}

template <Hint H, int U>
__global__ void __launch_bounds__(256) add(const uint4 *__restrict__ a, const uint4 *__restrict__ b, uint4 *__restrict__ y, long long nvec) {
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, nt = (long long)gridDim.x * blockDim.x;
    long long i = tid;
    for (; i + (U - 1) * nt < nvec; i += U * nt) {
        uint4 qa[U], qb[U];
#pragma unroll
        for (int u = 0; u < U; u++) { qa[u] = ld<H>(a + i + u * nt); qb[u] = ld<H>(b + i + u * nt); }
#pragma unroll
        for (int u = 0; u < U; u++) { float va[8], vb[8]; unpack(qa[u], va); unpack(qb[u], vb);
            for (int k = 0; k < 8; k++) va[k] += vb[k];
            st<H>(y + i + u * nt, pack(va)); }
    }
    for (; i < nvec; i += nt) { float va[8], vb[8]; unpack(ld<H>(a + i), va); unpack(ld<H>(b + i), vb); for (int k = 0; k < 8; k++) va[k] += vb[k]; st<H>(y + i, pack(va)); }
}

template <Hint H>
__global__ void __launch_bounds__(256) copyk(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long nvec) {
    long long nt = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nvec; i += nt) st<H>(y + i, ld<H>(x + i));
}

template <typename L> float timeit(L launch) {
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int w = 0; w < 3; w++) launch();
    std::vector<float> t;
    for (int r = 0; r < 20; r++) { CK(cudaEventRecord(e0)); for (int k = 0; k < 10; k++) launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms * 100.0f); }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end()); return t[t.size() / 2]; // us per launch
}

int main() {
    const long long n = 1LL << 28, nvec = n / 8; const size_t bytes = n * 2;
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    uint4 *a, *b, *y; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes)); CK(cudaMalloc(&y, bytes));
    std::vector<uint16_t> h(n); uint32_t s = 12345; for (auto &v : h) { s = s * 1664525u + 1013904223u; float f = ((s >> 8) / 16777216.0f) * 8.0f - 4.0f; uint32_t u; memcpy(&u, &f, 4); v = (uint16_t)(u >> 16); }
    CK(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice)); CK(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
    float tcopy = timeit([&] { CK(cudaMemcpyAsync(y, a, bytes, cudaMemcpyDeviceToDevice)); });
    double bw_copy = 2.0 * bytes / tcopy / 1e3;
    printf("device: %d SMs; memcpy D2D %.1f us = %.1f GB/s\n| variant | grid | us | GB/s | %% of copy |\n|---|---|---|---|---|\n", sms, tcopy, bw_copy);
    auto row = [&](const char *name, int grid, double nbytes, float us) { double bw = nbytes / us / 1e3; printf("| %s | %d | %.1f | %.1f | %.1f |\n", name, grid, us, bw, 100.0 * bw / bw_copy); };
    for (int bps : {4, 8, 16}) {
        int g = sms * bps;
        row("copy kernel plain", g, 2.0 * bytes, timeit([&] { copyk<PLAIN><<<g, 256>>>(a, y, nvec); }));
        row("copy kernel cs", g, 2.0 * bytes, timeit([&] { copyk<CS><<<g, 256>>>(a, y, nvec); }));
        row("add plain u2", g, 3.0 * bytes, timeit([&] { add<PLAIN, 2><<<g, 256>>>(a, b, y, nvec); }));
        row("add cs u2", g, 3.0 * bytes, timeit([&] { add<CS, 2><<<g, 256>>>(a, b, y, nvec); }));
        row("add cs u4", g, 3.0 * bytes, timeit([&] { add<CS, 4><<<g, 256>>>(a, b, y, nvec); }));
        row("silu acc plain u2", g, 2.0 * bytes, timeit([&] { unary<PLAIN, 2><<<g, 256>>>(a, y, nvec, f_silu_acc()); }));
        row("silu fast plain u2", g, 2.0 * bytes, timeit([&] { unary<PLAIN, 2><<<g, 256>>>(a, y, nvec, f_silu_fast()); }));
        row("silu fast cs u2", g, 2.0 * bytes, timeit([&] { unary<CS, 2><<<g, 256>>>(a, y, nvec, f_silu_fast()); }));
        row("silu fast cs u4", g, 2.0 * bytes, timeit([&] { unary<CS, 4><<<g, 256>>>(a, y, nvec, f_silu_fast()); }));
        row("sin acc plain u2", g, 2.0 * bytes, timeit([&] { unary<PLAIN, 2><<<g, 256>>>(a, y, nvec, f_sin_acc()); }));
        row("sin fast cs u2", g, 2.0 * bytes, timeit([&] { unary<CS, 2><<<g, 256>>>(a, y, nvec, f_sin_fast()); }));
        row("sin fast cs u4", g, 2.0 * bytes, timeit([&] { unary<CS, 4><<<g, 256>>>(a, y, nvec, f_sin_fast()); }));
        row("gelu acc plain u2", g, 2.0 * bytes, timeit([&] { unary<PLAIN, 2><<<g, 256>>>(a, y, nvec, f_gelu_acc()); }));
        row("gelu fast cs u2", g, 2.0 * bytes, timeit([&] { unary<CS, 2><<<g, 256>>>(a, y, nvec, f_gelu_fast()); }));
        row("gelu fast cs u4", g, 2.0 * bytes, timeit([&] { unary<CS, 4><<<g, 256>>>(a, y, nvec, f_gelu_fast()); }));
    }
    return 0;
}
