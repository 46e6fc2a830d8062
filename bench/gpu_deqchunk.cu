/* gpu_deqchunk.cu - how large m's "dequantize W to bf16, then cuBLAS" path
 * should be cut into chunks of W's rows (an experiment for src/cuda/gemm.cu,
 * not a test).
 *
 *   gpu_deqchunk OUT.json
 *
 * For each weight format, (n, k) in the issue's shapes and m in 128, 512,
 * 4096, it times y = x . W^T three ways: W dequantized whole into one
 * buffer then one GEMM ("whole", what the library did); chunks of R rows
 * dequantized into one reused buffer, each followed by its GEMM on the same
 * stream ("chunk", R = 256..4096: a chunk that fits L2 is written and read
 * back there); and the same chunks on two streams with two buffers, chunk
 * i+1's dequantize overlapping chunk i's GEMM ("overlap"). Weights rotate
 * over copies so that every call reads HBM. Median of 7 x 10 calls. */
#include "bfp.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_gpu.cuh"
#include "cuda_check.h" /* tests/ */

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <vector>

__global__ void fill_bf16(__nv_bfloat16 *x, size_t n, uint64_t seed, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t z = fill_bits(seed, i);
        float g = ((float)(z & 0xFFFF) + (float)((z >> 16) & 0xFFFF)) / 65536.0f - 1.0f;
        x[i] = __float2bfloat16_rn(g * scale);
    }
}

struct Planes {
    uint8_t *c, *s, *m;
    float *ts;
};

/* rows [r0, r0 + rows) of a planar weight */
static bfp_const_planes rows_of(bfp_format f, const Planes &p, const bfp_plane_sizes &sz,
                                size_t r0)
{
    const bfp_format_info *fi = bfp_format_get(f);
    size_t b0 = r0 * sz.blocks_per_row;
    bfp_const_planes pl = {p.c + r0 * sz.code_row_bytes, p.s + b0 * (size_t)fi->scale_bytes,
                           p.m ? p.m + b0 * (size_t)fi->meta_bytes : NULL, p.ts};
    return pl;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_deqchunk OUT.json\n");
        return 2;
    }
    if (!bfp_cuda_available()) {
        fprintf(stderr, "gpu_deqchunk: no GPU\n");
        return 1;
    }
    FILE *fp = fopen(argv[1], "w");
    if (!fp) {
        perror(argv[1]);
        return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(fp, "{\"date\": \"%s\", \"command\": \"PARTS=deqchunk bash bench/gpu.sh\", "
                "\"results\": [\n", date);
    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    cudaStream_t s0, s1;
    CU(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cudaEvent_t ta, tb, ev[2], done[2];
    CU(cudaEventCreate(&ta));
    CU(cudaEventCreate(&tb));
    for (int i = 0; i < 2; i++) {
        CU(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    void *cws;
    CU(cudaMalloc(&cws, (size_t)32 << 20));
    CB(cublasSetWorkspace(blas, cws, (size_t)32 << 20));
    const bfp_format fmts[] = {BFP_MXFP4, BFP_NVFP4_PLUS, BFP_NVFP4, BFP_HIF4, BFP_MXFP4_PLUS};
    const size_t shapes[][2] = {{8192, 8192}, {28672, 8192}, {8192, 28672}};
    const size_t ms[] = {128, 512, 4096};
    const size_t chunks[] = {256, 512, 1024, 2048, 4096};
    bool first = true;
    for (auto &sh : shapes) {
        size_t n = sh[0], k = sh[1];
        __nv_bfloat16 *wsrc, *x, *y, *buf[2], *whole;
        CU(cudaMalloc(&wsrc, n * k * 2));
        CU(cudaMalloc(&whole, n * k * 2));
        CU(cudaMalloc(&x, 4096 * k * 2));
        CU(cudaMalloc(&y, 4096 * n * 2));
        for (int i = 0; i < 2; i++)
            CU(cudaMalloc(&buf[i], 4096 * k * 2));
        fill_bf16<<<1024, 256>>>(wsrc, n * k, 3, 0.05f);
        fill_bf16<<<1024, 256>>>(x, 4096 * k, 7, 1.0f);
        CU(cudaGetLastError());
        for (bfp_format f : fmts) {
            bfp_plane_sizes sz;
            BFP(bfp_plane_sizes_for(f, n, k, &sz));
            size_t qb = sz.codes + sz.scales + sz.meta;
            int rot = (int)(((size_t)300 << 20) / qb + 1);
            std::vector<Planes> W(rot);
            for (auto &p : W) {
                CU(cudaMalloc(&p.c, sz.codes));
                CU(cudaMalloc(&p.s, sz.scales));
                p.m = NULL;
                if (sz.meta)
                    CU(cudaMalloc(&p.m, sz.meta));
                CU(cudaMalloc(&p.ts, 4));
                bfp_planes dp = {p.c, p.s, p.m, p.ts};
                BFP(bfp_cuda_quantize(f, BFP_DTYPE_BF16, wsrc, n, k, NULL, 0, &dp, NULL, NULL));
            }
            CU(cudaDeviceSynchronize());
            for (size_t m : ms) {
                float alpha = 1, beta = 0;
                auto gemm = [&](const __nv_bfloat16 *wb, size_t r0, size_t rows, cudaStream_t s) {
                    CB(cublasSetStream(blas, s));
                    CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)m, (int)k,
                                    &alpha, wb, CUDA_R_16BF, (int)k, x, CUDA_R_16BF, (int)k,
                                    &beta, y + r0, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
                };
                /* variant: 0 whole, 1 chunk on one stream, 2 overlap on two */
                auto run = [&](int variant, size_t R, int i) {
                    const Planes &p = W[i % rot];
                    if (variant == 0) {
                        bfp_const_planes pl = rows_of(f, p, sz, 0);
                        BFP(bfp_cuda_dequantize(f, &pl, n, k, BFP_DTYPE_BF16, whole, s0));
                        gemm(whole, 0, n, s0);
                        return;
                    }
                    int c = 0;
                    for (size_t r0 = 0; r0 < n; r0 += R, c++) {
                        size_t rows = std::min(R, n - r0);
                        bfp_const_planes pl = rows_of(f, p, sz, r0);
                        if (variant == 1) {
                            BFP(bfp_cuda_dequantize(f, &pl, rows, k, BFP_DTYPE_BF16, buf[0], s0));
                            gemm(buf[0], r0, rows, s0);
                            continue;
                        }
                        int b = c & 1;
                        /* s1 dequantizes into buf[b] once the GEMM that read it is done */
                        CU(cudaStreamWaitEvent(s1, done[b], 0));
                        BFP(bfp_cuda_dequantize(f, &pl, rows, k, BFP_DTYPE_BF16, buf[b], s1));
                        CU(cudaEventRecord(ev[b], s1));
                        CU(cudaStreamWaitEvent(s0, ev[b], 0));
                        gemm(buf[b], r0, rows, s0);
                        CU(cudaEventRecord(done[b], s0));
                    }
                    CU(cudaStreamWaitEvent(s1, done[0], 0)); /* s1 idle before timing ends */
                };
                auto time_us = [&](int variant, size_t R) {
                    for (int i = 0; i < 2; i++)
                        run(variant, R, i);
                    CU(cudaDeviceSynchronize());
                    std::vector<double> t;
                    for (int rep = 0; rep < 7; rep++) {
                        CU(cudaEventRecord(ta, s0));
                        CU(cudaStreamWaitEvent(s1, ta, 0));
                        for (int i = 0; i < 10; i++)
                            run(variant, R, i);
                        CU(cudaEventRecord(ev[0], s1));
                        CU(cudaStreamWaitEvent(s0, ev[0], 0));
                        CU(cudaEventRecord(tb, s0));
                        CU(cudaEventSynchronize(tb));
                        float ms_;
                        CU(cudaEventElapsedTime(&ms_, ta, tb));
                        t.push_back(100.0 * ms_); /* 1000 * ms / 10 calls */
                    }
                    std::sort(t.begin(), t.end());
                    return t[3];
                };
                /* cuBLAS alone on an already dequantized W, for the ratio */
                std::vector<double> t;
                {
                    bfp_const_planes pl = rows_of(f, W[0], sz, 0);
                    BFP(bfp_cuda_dequantize(f, &pl, n, k, BFP_DTYPE_BF16, whole, s0));
                    for (int rep = 0; rep < 7; rep++) {
                        CU(cudaEventRecord(ta, s0));
                        for (int i = 0; i < 10; i++)
                            gemm(whole, 0, n, s0);
                        CU(cudaEventRecord(tb, s0));
                        CU(cudaEventSynchronize(tb));
                        float ms_;
                        CU(cudaEventElapsedTime(&ms_, ta, tb));
                        t.push_back(100.0 * ms_);
                    }
                    std::sort(t.begin(), t.end());
                }
                double gemm_only = t[3];
                double whole_us = time_us(0, 0);
                printf("%-8s m=%4zu %5zux%-5zu gemm-only %8.1f whole %8.1f |", bfp_format_get(f)->name,
                       m, n, k, gemm_only, whole_us);
                fprintf(fp, "%s {\"format\": \"%s\", \"M\": %zu, \"N\": %zu, \"K\": %zu, "
                            "\"gemm_only_us\": %.2f, \"whole_us\": %.2f",
                        first ? "" : ",\n", bfp_format_get(f)->name, m, n, k, gemm_only, whole_us);
                first = false;
                for (size_t R : chunks) {
                    double c1 = time_us(1, R), c2 = time_us(2, R);
                    printf(" R%zu %.1f/%.1f", R, c1, c2);
                    fprintf(fp, ", \"chunk%zu_us\": %.2f, \"overlap%zu_us\": %.2f", R, c1, R, c2);
                }
                printf("\n");
                fprintf(fp, "}");
                fflush(stdout);
            }
            for (auto &p : W) {
                CU(cudaFree(p.c));
                CU(cudaFree(p.s));
                if (p.m)
                    CU(cudaFree(p.m));
                CU(cudaFree(p.ts));
            }
        }
        CU(cudaFree(wsrc));
        CU(cudaFree(whole));
        CU(cudaFree(x));
        CU(cudaFree(y));
        for (int i = 0; i < 2; i++)
            CU(cudaFree(buf[i]));
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    cublasDestroy(blas);
    return 0;
}
