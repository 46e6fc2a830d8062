/* gpu_gemm.cu - time bfp_cuda_matmul (y = x . W^T, bf16 x and y, 4-bit W)
 * against cuBLAS bf16 on the same shapes, in the same run.
 *
 *   gpu_gemm OUT.json [quick]
 *
 * Shapes (n, k) = (8192, 8192), (28672, 8192), (8192, 28672); m = 1, 16,
 * 128, 4096; weight formats mxfp4, mxfp4+, nvfp4, nvfp4+, hif4. Weights
 * rotate over enough copies that every call reads HBM, not L2. Time = median
 * over 7 replays of a CUDA graph of 20 calls, per call (bench_gpu.cuh), as
 * the torch peers time theirs. rel_err =
 * ||y - y_ref|| / ||y_ref||, y_ref = fp32 SGEMM of x and the dequantized W.
 * weight_bytes = the planes' bytes, hbm_fraction = weight_bytes / us / the
 * device copy's GB/s (read + write, measured first in the same run).
 * "path" is what BFP_MATMUL_AUTO picks; fused_us, dequant_cublas_us,
 * skinny_us, wgmma_us and gemv_us time each path explicitly (-1: not
 * run); gemv_pdl_us is the GEMV path with tuning gemv_pdl = 1 (programmatic
 * dependent launch: each call's first W copies overlap the previous call);
 * gemv_cl_us and gemv_cl_pdl_us the same with tuning gemv_split = 2 (cluster
 * plans; GEMM_PATHS 9 and 10).
 * The BFP_MATMUL_* variables set the matmul's tuning (tests/matmul_tuning_env.h;
 * bench/gpu.sh's sweeps); "wgmma_consumers" is the tuning's for wgmma_us.
 * GEMM_WG_CONSUMERS=3 (or GEMM_WG_BN=256, or GEMM_WG_PIPE=2, or several)
 * also times the wgmma path with that many consumer warpgroups (rows of x
 * per CTA; mainloop, as BFP_MATMUL_WG_PIPE), the rest of the tuning the
 * same: wgmma_alt_us and wgmma_alt_rel_err, its counts in
 * "wgmma_alt_consumers", "wgmma_alt_bn" and "wgmma_alt_serial" (-1: not
 * run).
 * GEMM_SHAPES=4096x4096,28672x4096 times those shapes (NxK) instead.
 * empty_kernel_us / empty_grid_us: an empty kernel's call in the same kind
 * of graph (one CTA; two 288-thread CTAs per SM, the GEMV's grid): the
 * floor under every call's time. */
#include "bfp.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_gpu.cuh"
#include "cuda_check.h"         /* tests/ */
#include "matmul_tuning_env.h" /* tests/ */

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

__global__ void bf16_to_f32(const __nv_bfloat16 *x, float *y, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}


/* GEMM_PATHS=0,3,6 limits the paths timed (0 AUTO is always timed; 7 is
 * GEMV with gemv_pdl = 1; 8, the wgmma path with GEMM_WG_CONSUMERS, runs
 * whenever that is set) */
static bool path_wanted(int pth)
{
    const char *e = getenv("GEMM_PATHS");
    if (!e || !*e || pth == 0)
        return true;
    for (const char *q = e; *q;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q)
            return true;
        if (v == pth)
            return true;
        q = *end == ',' ? end + 1 : end;
    }
    return false;
}

__global__ void empty_kernel() {}

/* a JSON number: -1 for a path or error not measured (NaN is not JSON) */
static double jv(double v) { return isnan(v) ? -1.0 : v; }

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_gemm OUT.json [quick]\n");
        return 2;
    }
    bool quick = argc > 2 && !strcmp(argv[2], "quick");
    bfp_matmul_tuning tuning;
    if (matmul_tuning_from_env(&tuning) < 0)
        return 2;
    bfp_matmul_tuning talt = tuning; /* GEMM_WG_CONSUMERS / _BN: the wgmma path's other variant */
    bool alt = false;
    const char *ec = getenv("GEMM_WG_CONSUMERS"), *eb = getenv("GEMM_WG_BN"),
               *ep = getenv("GEMM_WG_PIPE");
    if (ec && *ec)
        talt.wgmma_consumers = atoi(ec), alt = true;
    if (eb && *eb)
        talt.wgmma_bn = atoi(eb), alt = true;
    if (ep && *ep) /* BFP_MATMUL_WG_PIPE's values */
        talt.wgmma_serial = tuning_wg_pipe_serial(atoi(ep)), alt = true;
    if (alt && bfp_matmul_tuning_check(&talt) != BFP_OK) {
        fprintf(stderr,
                "gpu_gemm: bad GEMM_WG_CONSUMERS '%s' / GEMM_WG_BN '%s' / GEMM_WG_PIPE '%s'\n",
                ec ? ec : "", eb ? eb : "", ep ? ep : "");
        return 2;
    }
    if (!bfp_cuda_available()) {
        fprintf(stderr, "gpu_gemm: no GPU\n");
        return 1;
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    /* every timed call goes to st, captured as a graph (bench_gpu.cuh); a
     * blocking stream, so the memsets and fills on the default stream order with it */
    cudaStream_t st;
    CU(cudaStreamCreate(&st));
    FILE *fp = fopen(argv[1], "w");
    if (!fp) {
        perror(argv[1]);
        return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    /* device-to-device copy of 512 MiB, bytes read + written (as gpu_bench):
     * hbm_fraction = weight bytes / time / this */
    const double copy_gbps = stream_copy_gbps(st, (size_t)512 << 20, 5, 7);
    printf("device copy (512 MiB, read + write): %.1f GB/s\n", copy_gbps);
    /* the floor of a call in a graph: an empty kernel of one CTA, and of a
     * GEMV-sized grid (2 CTAs of 288 threads per SM) */
    const double floor1_us = graph_us(st, [&](int) {
        empty_kernel<<<1, 32, 0, st>>>();
        CU(cudaGetLastError());
    });
    const double floor_grid_us = graph_us(st, [&](int) {
        empty_kernel<<<2 * prop.multiProcessorCount, 288, 0, st>>>();
        CU(cudaGetLastError());
    });
    printf("empty kernel in a graph: %.2f us (1 CTA), %.2f us (%d CTAs)\n", floor1_us,
           floor_grid_us, 2 * prop.multiProcessorCount);
    fprintf(fp,
            "{\"date\": \"%s\", \"gpu\": \"%s\", \"copy_gbps\": %.1f, "
            "\"empty_kernel_us\": %.2f, \"empty_grid_us\": %.2f, \"results\": [\n",
            date, prop.name, copy_gbps, floor1_us, floor_grid_us);

    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    CB(cublasSetStream(blas, st));
    const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS, BFP_HIF4};
    /* GEMM_SHAPES=4096x4096,1024x4096 replaces the three issue shapes (NxK,
     * at most 8; the decoder's own shapes for AUTO's small-weight rules) */
    constexpr int MAX_SHAPES = 8;
    size_t shapes[MAX_SHAPES][2] = {{8192, 8192}, {28672, 8192}, {8192, 28672}};
    int nshapes = quick ? 1 : 3;
    if (const char *e = getenv("GEMM_SHAPES"); e && *e) {
        nshapes = 0;
        for (const char *q = e; *q;) {
            char *end;
            unsigned long n = strtoul(q, &end, 10), k = 0;
            if (end != q && *end == 'x')
                k = strtoul(end + 1, &end, 10);
            if (n == 0 || k == 0 || n > 65536 || k > 65536 || nshapes == MAX_SHAPES ||
                (*end && *end != ',')) {
                fprintf(stderr, "gpu_gemm: bad GEMM_SHAPES '%s' (at most 8 NxK, comma-separated)\n",
                        e);
                return 2;
            }
            shapes[nshapes][0] = n;
            shapes[nshapes++][1] = k;
            q = *end == ',' ? end + 1 : end;
        }
    }
    /* GEMM_MS=1,16 limits the m values (for a quick look at one regime) */
    constexpr int MAX_MS = 8;
    size_t ms[MAX_MS] = {1, 16, 128, 4096};
    int nms = 4;
    if (const char *e = getenv("GEMM_MS")) {
        nms = 0;
        for (const char *q = e; *q;) {
            char *end;
            unsigned long v = strtoul(q, &end, 10);
            if (end == q || v == 0 || v > 4096 || nms == MAX_MS) {
                fprintf(stderr,
                        "gpu_gemm: bad GEMM_MS '%s' (at most 8 m values in 1..4096, "
                        "comma-separated)\n",
                        e);
                return 2;
            }
            ms[nms++] = v;
            q = *end == ',' ? end + 1 : end;
        }
    }
    bool first = true;
    printf("%-8s %5s %6s %6s %10s %10s %8s %10s %9s %9s %s\n", "format", "M", "N", "K", "us",
           "cublas_us", "speedup", "rel_err", "TFLOP/s", "W GB/s", "path");

    for (int si = 0; si < nshapes; si++) {
        size_t n = shapes[si][0], k = shapes[si][1];
        size_t wbytes16 = n * k * 2;
        int rot16 = wbytes16 >= ((size_t)200 << 20) ? 1 : (int)(((size_t)200 << 20) / wbytes16 + 1);
        std::vector<__nv_bfloat16 *> wb(rot16);
        for (int r = 0; r < rot16; r++) {
            CU(cudaMalloc(&wb[r], wbytes16));
            fill_bf16_outliers<<<1024, 256>>>(wb[r], n * k, 1000 + r, 0.05f);
            CU(cudaGetLastError());
        }
        size_t mmax = 4096;
        __nv_bfloat16 *x, *y;
        float *xf, *yref;
        CU(cudaMalloc(&x, mmax * k * 2));
        CU(cudaMalloc(&y, mmax * n * 2));
        CU(cudaMalloc(&xf, mmax * k * 4));
        CU(cudaMalloc(&yref, mmax * n * 4));
        fill_bf16_outliers<<<1024, 256>>>(x, mmax * k, 7, 1.0f);
        bf16_to_f32<<<1024, 256>>>(x, xf, mmax * k);
        CU(cudaGetLastError());
        double cublas_us[MAX_MS];
        for (int mi = 0; mi < nms; mi++) {
            size_t m = ms[mi];
            float alpha = 1, beta = 0;
            cublas_us[mi] = graph_us(st, [&](int i) {
                CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha,
                                wb[i % rot16], CUDA_R_16BF, (int)k, x, CUDA_R_16BF, (int)k,
                                &beta, y, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
            });
        }

        for (bfp_format f : fmts) {
            const char *name = bfp_format_get(f)->name;
            if (!in_env_list("GEMM_FORMATS", name)) /* limits the formats (sweeps) */
                continue;
            /* quantize the first bf16 weight on the GPU, bring the planes home */
            bfp_plane_sizes sz;
            BFP(bfp_plane_sizes_for(f, n, k, &sz));
            uint8_t *dc, *ds, *dm = NULL;
            float *dts;
            CU(cudaMalloc(&dc, sz.codes));
            CU(cudaMalloc(&ds, sz.scales));
            if (sz.meta)
                CU(cudaMalloc(&dm, sz.meta));
            CU(cudaMalloc(&dts, 4));
            bfp_planes dp = {dc, ds, dm, dts};
            BFP(bfp_cuda_quantize(f, BFP_DTYPE_BF16, wb[0], n, k, NULL, 0, &dp, NULL, NULL));
            std::vector<uint8_t> hc(sz.codes), hs(sz.scales), hm(sz.meta + 1);
            float hts = 1;
            CU(cudaMemcpy(hc.data(), dc, sz.codes, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(hs.data(), ds, sz.scales, cudaMemcpyDeviceToHost));
            if (sz.meta)
                CU(cudaMemcpy(hm.data(), dm, sz.meta, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(&hts, dts, 4, cudaMemcpyDeviceToHost));
            /* reference weight: dequantized to fp32 */
            float *wf;
            CU(cudaMalloc(&wf, n * k * 4));
            bfp_const_planes cdp = {dc, ds, dm, dts};
            BFP(bfp_cuda_dequantize(f, &cdp, n, k, BFP_DTYPE_F32, wf, NULL));
            size_t qbytes = sz.codes + sz.scales + sz.meta;
            int rot = qbytes >= ((size_t)200 << 20) ? 1 : (int)(((size_t)200 << 20) / qbytes + 1);
            std::vector<bfp_cuda_weight *> W(rot);
            bfp_const_planes hp = {hc.data(), hs.data(), hm.data(), &hts};
            for (int r = 0; r < rot; r++)
                BFP(bfp_cuda_weight_upload(f, &hp, n, k, &W[r]));
            size_t wsb = 0;
            for (int mi = 0; mi < nms; mi++)
                for (int pth = 0; pth < 7; pth++)
                    for (const bfp_matmul_tuning *tp : {&tuning, &talt})
                        wsb = std::max(wsb, bfp_cuda_matmul_workspace_size_ex(
                                                W[0], ms[mi], (bfp_matmul_path)pth, tp));
            void *ws;
            CU(cudaMalloc(&ws, wsb));
            CU(cudaMemset(ws, 0, wsb));

            for (int mi = 0; mi < nms; mi++) {
                size_t m = ms[mi];
                float alpha = 1, beta = 0;
                CB(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, wf,
                               (int)k, xf, (int)k, &beta, yref, (int)n));
                double us[11], err[11];
                bfp_matmul_tuning tpdl = tuning, tcl = tuning, tclpdl = tuning;
                tpdl.gemv_pdl = 1;
                tcl.gemv_split = tclpdl.gemv_split = 2; /* 9, 10: GEMV with cluster plans */
                tclpdl.gemv_pdl = 1;
                for (int pth = 0; pth < 11; pth++) {
                    /* 4: the retired mid kernel */
                    if (pth == 4 || (pth == 2 && m < 16) || (pth == 3 && m > 32) ||
                        ((pth == 6 || pth == 7 || pth >= 9) && m > 16) || (pth == 8 && !alt) ||
                        (pth != 8 && !path_wanted(pth))) {
                        us[pth] = NAN, err[pth] = NAN;
                        continue;
                    }
                    /* the fused kernel at large m */
                    bool slow = pth == 1 && m >= 1024;
                    /* the kernels' split-K sums need a zeroed workspace, and the
                     * dequantize path (AUTO at m > 32, and pth 2) leaves W there */
                    if (pth != 2)
                        CU(cudaMemset(ws, 0, wsb));
                    CU(cudaMemset(y, 0xFF, m * n * 2)); /* NaN: a path that writes nothing fails */
                    const bfp_matmul_path pp = (bfp_matmul_path)(pth == 7 || pth >= 9 ? 6
                                                                 : pth == 8           ? 5
                                                                                      : pth);
                    const bfp_matmul_tuning *tp = pth == 7    ? &tpdl
                                                  : pth == 8  ? &talt
                                                  : pth == 9  ? &tcl
                                                  : pth == 10 ? &tclpdl
                                                              : &tuning;
                    us[pth] = graph_us(st, [&](int i) {
                        BFP(bfp_cuda_matmul_ex(W[i % rot], x, m, NULL, y, ws, wsb, pp, tp, st));
                    }, slow ? 2 : 20, slow ? 3 : 7);
                    CU(cudaStreamSynchronize(st));
                    err[pth] = rel_err(y, yref, m * n);
                }
                const char *path = path_name(bfp_cuda_matmul_auto_path(W[0], m));
                double sp = cublas_us[mi] / us[0];
                double tflops = 2.0 * m * n * k / us[0] * 1e-6;
                double wgbps = (double)qbytes / us[0] * 1e-3;
                const int wgc = tuning.wgmma_consumers ? tuning.wgmma_consumers : 2;
                const int wga = alt ? (talt.wgmma_consumers ? talt.wgmma_consumers : 2) : -1;
                const int wgb = alt ? talt.wgmma_bn : -1; /* 0: the default's rule */
                const int wgs = alt ? talt.wgmma_serial : -1;
                printf("%-8s %5zu %6zu %6zu %10.1f %10.1f %8.2f %10.2e %9.1f %9.0f %s (fused %.1f, "
                       "skinny %.1f, wgmma/%d %.1f err %.1e, wgmma/%d/%d %.1f err %.1e, "
                       "gemv %.1f pdl %.1f err %.1e, clusters %.1f pdl %.1f err %.1e)\n",
                       name, m, n, k, us[0], cublas_us[mi], sp, err[0], tflops, wgbps, path,
                       us[1], us[3], wgc, us[5], err[5], wga, wgb, us[8], err[8], us[6], us[7],
                       err[6], us[9], us[10], err[9]);
                fprintf(fp,
                        "%s {\"format\": \"%s\", \"M\": %zu, \"N\": %zu, \"K\": %zu, \"us\": %.2f, "
                        "\"cublas_bf16_us\": %.2f, \"speedup\": %.3f, \"rel_err\": %.3e, "
                        "\"tflops\": %.2f, \"weight_gbps\": %.1f, \"weight_bytes\": %zu, "
                        "\"hbm_fraction\": %.4f, \"path\": \"%s\", "
                        "\"fused_us\": %.2f, \"dequant_cublas_us\": %.2f, \"skinny_us\": %.2f, "
                        "\"wgmma_us\": %.2f, \"wgmma_rel_err\": %.3e, "
                        "\"wgmma_consumers\": %d, \"wgmma_alt_consumers\": %d, "
                        "\"wgmma_alt_bn\": %d, \"wgmma_alt_serial\": %d, "
                        "\"wgmma_alt_us\": %.2f, \"wgmma_alt_rel_err\": %.3e, "
                        "\"gemv_us\": %.2f, \"gemv_pdl_us\": %.2f, \"gemv_rel_err\": %.3e, "
                        "\"gemv_pdl_rel_err\": %.3e, \"gemv_cl_us\": %.2f, "
                        "\"gemv_cl_pdl_us\": %.2f, \"gemv_cl_rel_err\": %.3e, "
                        "\"gemv_cl_pdl_rel_err\": %.3e}",
                        first ? "" : ",\n", name, m, n, k, us[0], cublas_us[mi], sp,
                        jv(err[0]), tflops, wgbps, qbytes, wgbps / copy_gbps, path, jv(us[1]),
                        jv(us[2]), jv(us[3]), jv(us[5]), jv(err[5]), wgc, wga, wgb, wgs, jv(us[8]),
                        jv(err[8]), jv(us[6]), jv(us[7]), jv(err[6]), jv(err[7]), jv(us[9]),
                        jv(us[10]), jv(err[9]), jv(err[10]));
                first = false;
                fflush(stdout);
            }
            for (auto w : W)
                bfp_cuda_weight_free(w);
            CU(cudaFree(ws));
            CU(cudaFree(wf));
            CU(cudaFree(dc));
            CU(cudaFree(ds));
            if (dm)
                CU(cudaFree(dm));
            CU(cudaFree(dts));
        }
        for (auto p : wb)
            CU(cudaFree(p));
        CU(cudaFree(x));
        CU(cudaFree(y));
        CU(cudaFree(xf));
        CU(cudaFree(yref));
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    cublasDestroy(blas);
    return 0;
}
