/* wg_trace.cu - where the wgmma kernel's k tiles go, from its own clock:
 * built only against a libbfp_cuda.a whose gemm_wgmma.cu has the trace
 * (-DBFP_WG_TRACE; bench/wg_trace.sh). For each m it runs the dense matmul
 * (path BFP_MATMUL_WGMMA, mxfp4, n x k) a few times, reads the clock marks
 * of the last call (gemm_wgmma_parts.cuh, mainloop_pipelined) and prints,
 * per consumer warpgroup and k tile in the steady state, the median cycles
 *   issue   the four wgmma and their commit,
 *   wait    wait_group 1 (the previous tile's group) after them,
 *   stage   the release and the wait for the next stage's bytes,
 *   decode  the next tile's fragments,
 *   tile    one whole k tile (issue to issue),
 * and, over the CTAs, the spread of their mainloops' starts and ends (global
 * timer, ns: the ramp and the tail).
 *
 *   wg_trace OUT.json [n k]      (m from WG_TRACE_MS, default 128,256,1024)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "bench_check.h"
#include "bench_gpu.cuh"

extern "C" int bfp_wg_trace_read(uint32_t *host, size_t cap, int dims[4]);
extern "C" int bfp_wg_trace_reset(void);

static double median(std::vector<double> v)
{
    if (v.empty())
        return -1;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: wg_trace OUT.json [n k]\n");
        return 2;
    }
    const size_t n = argc > 3 ? strtoul(argv[2], NULL, 10) : 8192;
    const size_t k = argc > 3 ? strtoul(argv[3], NULL, 10) : 8192;
    std::vector<size_t> ms = {128, 256, 1024};
    if (const char *e = getenv("WG_TRACE_MS")) {
        ms.clear();
        for (const char *q = e; *q;) {
            ms.push_back(strtoul(q, (char **)&q, 10));
            q += *q == ',';
        }
    }
    /* W: random normal-ish floats, quantized on the host (bfp_quantize) */
    const bfp_format f = BFP_MXFP4;
    std::vector<float> wf(n * k);
    uint64_t z = 12345;
    for (float &v : wf) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        v = ((float)(z >> 40) / 16777216.0f - 0.5f) * 0.1f;
    }
    bfp_plane_sizes sz;
    BFP(bfp_plane_sizes_for(f, n, k, &sz));
    std::vector<uint8_t> hc(sz.codes), hs(sz.scales), hm(sz.meta + 1);
    float hts = 1;
    bfp_planes hq = {hc.data(), hs.data(), hm.data(), &hts};
    BFP(bfp_quantize(f, BFP_DTYPE_F32, wf.data(), n, k, NULL, &hq, NULL));
    bfp_const_planes hp = {hc.data(), hs.data(), hm.data(), &hts};
    bfp_cuda_weight *W;
    BFP(bfp_cuda_weight_upload(f, &hp, n, k, &W));
    __nv_bfloat16 *x, *y;
    const size_t mmax = *std::max_element(ms.begin(), ms.end());
    CU(cudaMalloc(&x, mmax * k * 2));
    CU(cudaMalloc(&y, mmax * n * 2));
    fill_bf16_outliers<<<1024, 256>>>(x, mmax * k, 7, 1.0f);
    CU(cudaGetLastError());
    size_t wsb = 0;
    for (size_t m : ms)
        wsb = std::max(wsb, bfp_cuda_matmul_workspace_size_ex(W, m, BFP_MATMUL_WGMMA, NULL));
    void *ws;
    CU(cudaMalloc(&ws, wsb + 1));
    CU(cudaMemset(ws, 0, wsb + 1));
    int dims[4]; /* set whatever the capacity: ask with none first */
    (void)bfp_wg_trace_read(NULL, 0, dims); /* cudaErrorInvalidValue: no room, by design */
    std::vector<uint32_t> buf((size_t)dims[0] * dims[1] * dims[2] * dims[3]);
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        fprintf(stderr, "wg_trace: cannot write %s\n", argv[1]);
        return 1;
    }
    fprintf(out, "{\"n\": %zu, \"k\": %zu, \"format\": \"mxfp4\", \"runs\": [", n, k);
    printf("%6s %6s %6s %6s %6s %6s %6s  %s\n", "m", "issue", "wait", "stage", "decode", "tile",
           "ctas", "spread of starts / ends, ns");
    for (size_t mi = 0; mi < ms.size(); mi++) {
        const size_t m = ms[mi];
        for (int r = 0; r < 3; r++) { /* warm, then the traced call */
            if (r == 2)
                CU((cudaError_t)bfp_wg_trace_reset());
            BFP(bfp_cuda_matmul_ex(W, x, m, NULL, y, ws, wsb, BFP_MATMUL_WGMMA, NULL, NULL));
            CU(cudaDeviceSynchronize());
        }
        CU((cudaError_t)bfp_wg_trace_read(buf.data(), buf.size(), dims));
        const int NC = dims[0], NW = dims[1], NT = dims[2], NP = dims[3];
        auto at = [&](int c, int w, int t, int p) {
            return buf[((size_t)(c * NW + w) * NT + t) * NP + p];
        };
        std::vector<double> ph[5], starts, ends;
        int ctas = 0;
        for (int c = 0; c < NC; c++) {
            bool any = false;
            for (int w = 0; w < NW; w++) {
                int nt = 0; /* tiles with an issue mark */
                while (nt < NT && at(c, w, nt, 0))
                    nt++;
                if (nt < 4)
                    continue;
                any = true;
                starts.push_back((double)(int32_t)(at(c, w, 1, 5) - at(0, 0, 1, 5)));
                ends.push_back((double)(int32_t)(at(c, w, 2, 5) - at(0, 0, 1, 5)));
                for (int t = 2; t + 2 < nt; t++) { /* steady state */
                    const uint32_t p0 = at(c, w, t, 0), p1 = at(c, w, t, 1), p2 = at(c, w, t, 2),
                                   p3 = at(c, w, t, 3), p4 = at(c, w, t, 4),
                                   n0 = at(c, w, t + 1, 0);
                    ph[0].push_back((double)(uint32_t)(p1 - p0));
                    ph[1].push_back((double)(uint32_t)(p2 - p1));
                    ph[2].push_back((double)(uint32_t)(p3 - p2));
                    ph[3].push_back((double)(uint32_t)(p4 - p3));
                    ph[4].push_back((double)(uint32_t)(n0 - p0));
                }
            }
            ctas += any;
        }
        auto spread = [](std::vector<double> v) {
            if (v.empty())
                return -1.0;
            std::sort(v.begin(), v.end());
            return v.back() - v.front();
        };
        double md[5];
        for (int i = 0; i < 5; i++)
            md[i] = median(ph[i]);
        printf("%6zu %6.0f %6.0f %6.0f %6.0f %6.0f %6d  %.0f / %.0f\n", m, md[0], md[1], md[2],
               md[3], md[4], ctas, spread(starts), spread(ends));
        fprintf(out,
                "%s{\"m\": %zu, \"issue\": %.0f, \"wait\": %.0f, \"stage\": %.0f, "
                "\"decode\": %.0f, \"tile\": %.0f, \"ctas_traced\": %d, \"samples\": %zu, "
                "\"start_spread_ns\": %.0f, \"end_spread_ns\": %.0f}",
                mi ? ", " : "", m, md[0], md[1], md[2], md[3], md[4], ctas, ph[4].size(),
                spread(starts), spread(ends));
    }
    fprintf(out, "]}\n");
    fclose(out);
    return 0;
}
