/* lt_candidates: cuBLASLt's own candidates for tk::linear's products, each timed. Not tkexport
 * code: an experiment on cuBLASLt itself, to see how far its heuristic's first pick (what
 * kernels/linear.c takes) is from the fastest of its candidates (32 asked for; it gave 6 to 8 on
 * an H200; bench/serving/JOURNAL.md, 2026-11-26). The same layouts as kernels/linear.c (W [N, K] as
 * op T, x [M, K], y [M, N], f32 compute), epilogue BIAS or GELU_BIAS, the residual as C with beta 1
 * where asked; each candidate timed as a CUDA graph of 20 back-to-back calls, the median of 7
 * replays. Built by hand, run on a GPU machine:
 *
 *   nvcc -O2 -std=c++17 -o lt_candidates bench/kernels/experiments/lt_candidates.cu -lcublasLt
 *   ./lt_candidates M,N,K,gelu,residual ...      e.g. 8192,512,128,1,0 8192,128,512,0,1
 *
 * Prints, per product: how many candidates, the first pick's time, the fastest and its rank. */
#include <algorithm>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        auto r_ = (x);                                                                                                 \
        if ((int)r_ != 0) {                                                                                            \
            printf("%s failed %d line %d\n", #x, (int)r_, __LINE__);                                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
int main(int argc, char **argv)
{
    cublasLtHandle_t h;
    CK(cublasLtCreate(&h));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t big = (size_t)8192 * 50304 * 2;
    void *x, *w, *y, *r, *bias, *ws;
    CK(cudaMalloc(&x, big));
    CK(cudaMalloc(&w, big));
    CK(cudaMalloc(&y, big));
    CK(cudaMalloc(&r, big));
    CK(cudaMalloc(&bias, 65536 * 2));
    CK(cudaMalloc(&ws, 32 << 20));
    CK(cudaMemset(x, 0, big));
    CK(cudaMemset(w, 0, big));
    CK(cudaMemset(r, 0, big));
    CK(cudaMemset(bias, 0, 131072));
    struct C {
        int M, N, K, gelu, res;
    };
    std::vector<C> cs;
    for (int i = 1; i < argc; i++) {
        C c;
        if (sscanf(argv[i], "%d,%d,%d,%d,%d", &c.M, &c.N, &c.K, &c.gelu, &c.res) == 5)
            cs.push_back(c);
    }
    for (auto c : cs)
        for (size_t wsb : {(size_t)0}) {
            int M = c.M;
            cublasLtMatmulDesc_t d;
            CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
            CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
            CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
            cublasLtEpilogue_t ep = c.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
            CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
            CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
            cublasLtMatrixLayout_t la, lb, ld;
            CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c.K, c.N, c.K));
            CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c.K, M, c.K));
            CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, c.N, M, c.N));
            cublasLtMatmulPreference_t p;
            CK(cublasLtMatmulPreferenceCreate(&p));
            uint64_t wsz = wsb;
            CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
            cublasLtMatmulHeuristicResult_t res[32];
            int n = 0;
            CK(cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, ld, ld, p, 32, res, &n));
            float alpha = 1, beta = c.res ? 1.f : 0.f;
            void *C = c.res ? r : y;
            std::vector<float> t(n);
            for (int i = 0; i < n; i++) {
                auto run = [&]() {
                    return cublasLtMatmul(h, d, &alpha, w, la, x, lb, &beta, C, ld, y, ld, &res[i].algo, ws, wsb, s);
                };
                if (run() != CUBLAS_STATUS_SUCCESS) {
                    t[i] = 1e9;
                    continue;
                }
                CK(cudaStreamSynchronize(s));
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                for (int k = 0; k < 20; k++)
                    run();
                CK(cudaStreamEndCapture(s, &g));
                CK(cudaGraphInstantiate(&ge, g, 0));
                cudaEvent_t e0, e1;
                cudaEventCreate(&e0);
                cudaEventCreate(&e1);
                std::vector<float> v;
                for (int rep = 0; rep < 7; rep++) {
                    cudaEventRecord(e0, s);
                    cudaGraphLaunch(ge, s);
                    cudaEventRecord(e1, s);
                    cudaEventSynchronize(e1);
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    v.push_back(ms * 1000 / 20);
                }
                std::sort(v.begin(), v.end());
                t[i] = v[3];
                cudaGraphExecDestroy(ge);
                cudaGraphDestroy(g);
                cudaEventDestroy(e0);
                cudaEventDestroy(e1);
            }
            int best = 0;
            for (int i = 1; i < n; i++)
                if (t[i] < t[best])
                    best = i;
            printf("N%d K%d %s M %5d ws %2zuM: %2d algos, heuristic#0 %.2f us, best #%d %.2f us (%.2fx); top5:", c.N,
                   c.K, c.gelu ? "gelu" : "res ", M, wsb >> 20, n, n ? t[0] : 0, best, n ? t[best] : 0,
                   n ? t[0] / t[best] : 0);
            for (int i = 0; i < n && i < 5; i++)
                printf(" %.2f", t[i]);
            printf("\n");
            fflush(stdout);
            cublasLtMatmulPreferenceDestroy(p);
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(ld);
            cublasLtMatmulDescDestroy(d);
        }
    return 0;
}
