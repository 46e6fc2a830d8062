/* gpu_gemm_xq.cu - time bfp_cuda_matmul_xq (x quantized on the fly, its
 * quantize kernel included) and bfp_cuda_matmul_xq_planes (x quantized
 * beforehand) against cuBLAS bf16, same run.
 *
 *   gpu_gemm_xq OUT.json [quick]
 *
 * Pairs (W, x): mxfp4 x mxfp8_e4m3 (W4A8), mxfp4 x mxfp4, mxfp4+ x mxfp4+
 * (W4A4), nvfp4 x nvfp4. Shapes (n, k) = (8192, 8192), (28672, 8192),
 * (8192, 28672), m = 1, 16, 128, 4096 (quick: the first shape). Weights
 * rotate over >= 200 MB of copies; time = median over 7 replays of a CUDA
 * graph of 20 calls (each call the next weight), per call. rel_err =
 * ||y - y_ref|| / ||y_ref||, y_ref = fp32 SGEMM of the dequantized x and W.
 * GEMM_XQ_PAIRS=mxfp4:mxfp8_e4m3,..., GEMM_XQ_SHAPES=8192x28672,... and
 * GEMM_XQ_MS=1,16 limit the pairs, shapes and m. The MX pairs on Hopper are
 * timed on the wgmma kernel too (tuning xq_kernel = 2): wgmma_us (x quantized
 * on the fly, as us), wgmma_prequant_us, wgmma_rel_err; -1 where not run.
 * Pairs whose x format decodes exactly to bf16 (bfp_matmul_qx_supported)
 * are also timed on the bf16-x route, bfp_cuda_matmul_qx on the packed
 * weight (x quantized, decoded to bf16, the bf16-x matmul with AUTO: what
 * bfp.nn.Linear runs), all of it in the timed graph: bf16x_us, bf16x_path
 * (AUTO's path for m), bf16x_rel_err. */
#include "bfp.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_gpu.cuh"
#include "cuda_check.h" /* tests/ */

#include <algorithm>
#include <string>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

/* v for the JSON: NaN (a NaN in y) as null */
static std::string json_num(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.3e", v);
    return isnan(v) ? "null" : b;
}

struct DevPlanes {
    bfp_plane_sizes sz;
    uint8_t *c = nullptr, *s = nullptr, *m = nullptr;
    float *ts = nullptr;
    void alloc(bfp_format f, size_t rows, size_t cols)
    {
        BFP(bfp_plane_sizes_for(f, rows, cols, &sz));
        CU(cudaMalloc(&c, sz.codes));
        CU(cudaMalloc(&s, sz.scales));
        CU(cudaMalloc(&m, sz.meta + 1));
        CU(cudaMalloc(&ts, 4));
    }
    void release()
    {
        CU(cudaFree(c));
        CU(cudaFree(s));
        CU(cudaFree(m));
        CU(cudaFree(ts));
    }
    bfp_planes p() { return bfp_planes{c, s, m, ts}; }
    bfp_const_planes cp() { return bfp_const_planes{c, s, m, ts}; }
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_gemm_xq OUT.json [quick]\n");
        return 2;
    }
    bool quick = argc > 2 && !strcmp(argv[2], "quick");
    if (!bfp_cuda_available()) {
        fprintf(stderr, "gpu_gemm_xq: no GPU\n");
        return 1;
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    FILE *fp = fopen(argv[1], "w");
    if (!fp) {
        perror(argv[1]);
        return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(fp, "{\"date\": \"%s\", \"gpu\": \"%s\", \"results\": [\n", date, prop.name);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    CB(cublasSetStream(blas, st));

    static const bfp_format pairs[][2] = {{BFP_MXFP4, BFP_MXFP8_E4M3},
                                          {BFP_MXFP4, BFP_MXFP4},
                                          {BFP_MXFP4_PLUS, BFP_MXFP4_PLUS},
                                          {BFP_NVFP4, BFP_NVFP4}};
    const size_t shapes[][2] = {{8192, 8192}, {28672, 8192}, {8192, 28672}};
    const size_t ms[] = {1, 16, 128, 4096};
    int nshapes = quick ? 1 : 3;
    bool first = true;
    printf("%-8s %-11s %5s %6s %6s %9s %9s %9s %10s %8s %9s %10s\n", "W", "x", "M", "N", "K",
           "us", "planes_us", "bf16_us", "rel_err", "TFLOP/s", "wgmma_us", "wg_rel_err");
    const bool hopper = prop.major == 9 && prop.minor == 0;
    bfp_matmul_tuning wgt = {};
    wgt.xq_kernel = 2;
    for (int si = 0; si < nshapes; si++) {
        size_t n = shapes[si][0], k = shapes[si][1], mmax = 4096;
        char sname[32];
        snprintf(sname, sizeof sname, "%zux%zu", n, k);
        if (!in_env_list("GEMM_XQ_SHAPES", sname)) /* e.g. 8192x28672 */
            continue;
        __nv_bfloat16 *wbf, *x, *y;
        float *wf, *xf, *yref;
        CU(cudaMalloc(&wbf, n * k * 2));
        CU(cudaMalloc(&x, mmax * k * 2));
        CU(cudaMalloc(&y, mmax * n * 2));
        CU(cudaMalloc(&wf, n * k * 4));
        CU(cudaMalloc(&xf, mmax * k * 4));
        CU(cudaMalloc(&yref, mmax * n * 4));
        fill_bf16_outliers<<<1024, 256>>>(wbf, n * k, 1000, 0.05f);
        fill_bf16_outliers<<<1024, 256>>>(x, mmax * k, 7, 1.0f);
        CU(cudaGetLastError());
        /* cuBLAS bf16 over rotating bf16 weights, as gpu_gemm */
        size_t wb16 = n * k * 2;
        int rot16 = wb16 >= ((size_t)200 << 20) ? 1 : (int)(((size_t)200 << 20) / wb16 + 1);
        std::vector<__nv_bfloat16 *> wr(rot16);
        for (int r = 0; r < rot16; r++) {
            CU(cudaMalloc(&wr[r], wb16));
            CU(cudaMemcpy(wr[r], wbf, wb16, cudaMemcpyDeviceToDevice));
        }
        double cublas_us[4];
        for (int mi = 0; mi < 4; mi++) {
            size_t m = ms[mi];
            cublas_us[mi] = graph_us(st, [&](int i) {
                float alpha = 1, beta = 0;
                CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha,
                                wr[i % rot16], CUDA_R_16BF, (int)k, x, CUDA_R_16BF, (int)k,
                                &beta, y, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
            });
        }
        for (auto p : wr)
            CU(cudaFree(p));

        for (auto &pr : pairs) {
            bfp_format wfm = pr[0], xfm = pr[1];
            const char *wn = bfp_format_get(wfm)->name, *xn = bfp_format_get(xfm)->name;
            char key[64];
            snprintf(key, sizeof key, "%s:%s", wn, xn);
            if (!in_env_list("GEMM_XQ_PAIRS", key))
                continue;
            DevPlanes wq;
            wq.alloc(wfm, n, k);
            bfp_planes wp = wq.p();
            BFP(bfp_cuda_quantize(wfm, BFP_DTYPE_BF16, wbf, n, k, NULL, 0, &wp, NULL, st));
            bfp_const_planes wcp = wq.cp();
            BFP(bfp_cuda_dequantize(wfm, &wcp, n, k, BFP_DTYPE_F32, wf, st));
            float hts = 1;
            CU(cudaStreamSynchronize(st));
            CU(cudaMemcpy(&hts, wq.ts, 4, cudaMemcpyDeviceToHost));
            size_t qbytes = wq.sz.codes + wq.sz.scales + wq.sz.meta;
            int rot = qbytes >= ((size_t)200 << 20) ? 1 : (int)(((size_t)200 << 20) / qbytes + 1);
            /* rot copies of W's planes (the calls read planar W) */
            std::vector<bfp_cuda_planar_weight> W(rot);
            std::vector<void *> bufs;
            for (int r = 0; r < rot; r++) {
                void *c, *sc, *mt;
                CU(cudaMalloc(&c, wq.sz.codes));
                CU(cudaMalloc(&sc, wq.sz.scales));
                CU(cudaMalloc(&mt, wq.sz.meta + 1));
                CU(cudaMemcpy(c, wq.c, wq.sz.codes, cudaMemcpyDeviceToDevice));
                CU(cudaMemcpy(sc, wq.s, wq.sz.scales, cudaMemcpyDeviceToDevice));
                CU(cudaMemcpy(mt, wq.m, wq.sz.meta + 1, cudaMemcpyDeviceToDevice));
                bufs.push_back(c), bufs.push_back(sc), bufs.push_back(mt);
                W[r] = bfp_cuda_planar_weight{wfm, n, k, c, sc, mt, hts};
            }
            /* the packed weight of the bf16-x route, rot copies */
            const bool bx = bfp_matmul_qx_supported(xfm);
            std::vector<bfp_cuda_weight *> Wp;
            if (bx) {
                std::vector<uint8_t> hc(wq.sz.codes), hs(wq.sz.scales), hm(wq.sz.meta + 1);
                CU(cudaMemcpy(hc.data(), wq.c, wq.sz.codes, cudaMemcpyDeviceToHost));
                CU(cudaMemcpy(hs.data(), wq.s, wq.sz.scales, cudaMemcpyDeviceToHost));
                CU(cudaMemcpy(hm.data(), wq.m, wq.sz.meta + 1, cudaMemcpyDeviceToHost));
                bfp_const_planes hp = {hc.data(), hs.data(), hm.data(), &hts};
                Wp.resize(rot);
                for (int r = 0; r < rot; r++)
                    BFP(bfp_cuda_weight_upload(wfm, &hp, n, k, &Wp[r]));
            }
            for (int mi = 0; mi < 4; mi++) {
                size_t m = ms[mi];
                char mname[16];
                snprintf(mname, sizeof mname, "%zu", m);
                if (!in_env_list("GEMM_XQ_MS", mname))
                    continue;
                const bool wg = hopper && wfm != BFP_NVFP4 && wfm != BFP_NVFP4_PLUS;
                size_t wsb = bfp_cuda_matmul_xq_workspace_size(&W[0], xfm, m, NULL);
                size_t wsb2 = wg ? bfp_cuda_matmul_xq_workspace_size(&W[0], xfm, m, &wgt) : 0;
                wsb = std::max(wsb, wsb2);
                void *ws;
                CU(cudaMalloc(&ws, wsb));
                /* x's planes once, for the pre-quantized call and the reference */
                DevPlanes xq;
                xq.alloc(xfm, m, k);
                bfp_planes xp = xq.p();
                BFP(bfp_cuda_quantize(xfm, BFP_DTYPE_BF16, x, m, k, NULL, 0, &xp, NULL, st));
                bfp_const_planes xcp = xq.cp();
                BFP(bfp_cuda_dequantize(xfm, &xcp, m, k, BFP_DTYPE_F32, xf, st));
                float alpha = 1, beta = 0;
                CB(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, wf,
                               (int)k, xf, (int)k, &beta, yref, (int)n));
                double us = graph_us(st, [&](int i) {
                    BFP(bfp_cuda_matmul_xq(&W[i % rot], xfm, x, m, NULL, y, ws, wsb, NULL, st));
                });
                CU(cudaStreamSynchronize(st));
                double err = rel_err(y, yref, m * n);
                double pus = graph_us(st, [&](int i) {
                    BFP(bfp_cuda_matmul_xq_planes(&W[i % rot], xfm, &xcp, m, NULL, y, ws, wsb,
                                                  NULL, st));
                });
                CU(cudaStreamSynchronize(st));
                double perr = rel_err(y, yref, m * n);
                double wus = -1, wpus = -1, werr = -1;
                if (wg) {
                    CU(cudaMemsetAsync(y, 0xFF, m * n * 2, st)); /* NaN: nothing left over */
                    wus = graph_us(st, [&](int i) {
                        BFP(bfp_cuda_matmul_xq(&W[i % rot], xfm, x, m, NULL, y, ws, wsb, &wgt,
                                               st));
                    });
                    CU(cudaStreamSynchronize(st));
                    werr = rel_err(y, yref, m * n);
                    wpus = graph_us(st, [&](int i) {
                        BFP(bfp_cuda_matmul_xq_planes(&W[i % rot], xfm, &xcp, m, NULL, y, ws,
                                                      wsb, &wgt, st));
                    });
                    CU(cudaStreamSynchronize(st));
                }
                double bus = -1, berr = NAN;
                const char *bpath = "none";
                if (bx) {
                    const size_t qb =
                        bfp_cuda_matmul_qx_workspace_size(Wp[0], xfm, m, BFP_MATMUL_AUTO, NULL);
                    void *qws;
                    CU(cudaMalloc(&qws, qb));
                    CU(cudaMemset(qws, 0, qb)); /* the matmul's part, zeroed once */
                    CU(cudaMemsetAsync(y, 0xFF, m * n * 2, st));
                    bus = graph_us(st, [&](int i) {
                        BFP(bfp_cuda_matmul_qx(Wp[i % rot], xfm, x, m, NULL, y, qws, qb,
                                               BFP_MATMUL_AUTO, NULL, st));
                    });
                    CU(cudaStreamSynchronize(st));
                    berr = rel_err(y, yref, m * n);
                    bpath = path_name(bfp_cuda_matmul_auto_path(Wp[0], m));
                    CU(cudaFree(qws));
                }
                double tflops = 2.0 * m * n * k / us * 1e-6;
                printf("%-8s %-11s %5zu %6zu %6zu %9.1f %9.1f %9.1f %10.2e %8.1f %9.1f %10.2e "
                       "bf16x %.1f (%s) %.1e\n",
                       wn, xn, m, n, k, us, pus, cublas_us[mi], err, tflops, wus, werr, bus, bpath,
                       berr);
                fflush(stdout);
                fprintf(fp,
                        "%s {\"format\": \"%s\", \"x_format\": \"%s\", \"M\": %zu, \"N\": %zu, "
                        "\"K\": %zu, \"us\": %.2f, \"prequant_us\": %.2f, "
                        "\"cublas_bf16_direct_us\": %.2f, \"rel_err\": %.3e, "
                        "\"prequant_rel_err\": %.3e, \"tflops\": %.2f, \"weight_bytes\": %zu, "
                        "\"path\": \"xq_mma_sync\", \"wgmma_us\": %.2f, "
                        "\"wgmma_prequant_us\": %.2f, \"wgmma_rel_err\": %s, "
                        "\"bf16x_us\": %.2f, \"bf16x_path\": \"%s\", \"bf16x_rel_err\": %s}",
                        first ? "" : ",\n", wn, xn, m, n, k, us, pus, cublas_us[mi], err, perr,
                        tflops, qbytes, wus, wpus, json_num(werr).c_str(), bus, bpath,
                        json_num(berr).c_str());
                first = false;
                fflush(fp); /* a run cut short keeps what it measured */
                xq.release();
                CU(cudaFree(ws));
            }
            for (auto b : bufs)
                CU(cudaFree(b));
            for (auto w : Wp)
                bfp_cuda_weight_free(w);
            wq.release();
        }
        CU(cudaFree(wbf));
        CU(cudaFree(x));
        CU(cudaFree(y));
        CU(cudaFree(wf));
        CU(cudaFree(xf));
        CU(cudaFree(yref));
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    cublasDestroy(blas);
    CU(cudaStreamDestroy(st));
    return 0;
}
