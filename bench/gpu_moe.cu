/* gpu_moe.cu - the grouped (MoE) matmul benchmark (docs/gemm.md, "Grouped
 * (MoE) matmul"): gpt-oss-120b (128 experts) and gpt-oss-20b (32) expert
 * shapes, gate+up fused (n = 5760, k = 2880) and down (2880 x 2880), top-4
 * routing of T tokens (4T rows), T = 1 .. 4096 (quick: 1, 16, 64; t1: 1, e.g.
 * for one kernel under ncu), uniform and skewed, mxfp4
 * and mxfp4+: bfp_cuda_grouped_matmul against a loop of per-expert
 * bfp_cuda_matmul calls (AUTO path, counts known on the host), and the
 * grouped call on the Hopper wgmma kernel (tuning grouped_kernel = 2,
 * wgmma_us; from T = 256 also with 256-row m tiles, wgmma_bn = 256,
 * wgmma256_us) and on the grouped GEMV kernel (3) launched without
 * programmatic dependent launch (gemv_pdl = -1, gemv_us) and with it
 * (gemv_pdl = 1, the default, gemv_pdl_us; 2, gemv_pdl2_us: no kernel in
 * its graph writes the offsets or W); -1 where
 * refused or not run. Each timing
 * is a CUDA graph of 20 calls, each call with its own routing (so other
 * experts, not L2's), replayed 7 times, median. read_us: the floor under
 * any kernel for the call, a kernel that only reads the routed experts'
 * packed bytes (read_experts), timed the same way. Writes the routes too
 * (bench/moe_torch.py times torch's bf16 grouped GEMM on the same ones).
 *   gpu_moe OUT.json ROUTES.json [quick|t1] */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_check.h"
#include "bench_gpu.cuh"
#include "bfp_grouped.h"
#include "cuda_check.h"

constexpr int CALLS = 20, REPS = 7, TOPK = 4, DISTINCT = 8;

static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* offsets of 4T rows: each token picks TOPK distinct experts, uniformly or
 * (skewed) with weight 1 / (rank + 1)^1.5 over a random order of experts */
static std::vector<int32_t> route(int e_count, int tokens, bool skewed, uint64_t seed)
{
    std::vector<int> order(e_count), cnt(e_count, 0);
    for (int e = 0; e < e_count; e++)
        order[e] = e;
    for (int e = e_count - 1; e > 0; e--)
        std::swap(order[e], order[sm64(&seed) % (uint64_t)(e + 1)]);
    std::vector<double> cum(e_count);
    double acc = 0;
    for (int r = 0; r < e_count; r++)
        cum[r] = acc += skewed ? 1.0 / pow(r + 1.0, 1.5) : 1.0;
    for (int t = 0; t < tokens; t++) {
        int picked[TOPK], np = 0;
        while (np < TOPK) {
            double u = (double)(sm64(&seed) >> 11) * 0x1p-53 * acc;
            int r = (int)(std::lower_bound(cum.begin(), cum.end(), u) - cum.begin());
            int e = order[std::min(r, e_count - 1)];
            bool dup = false;
            for (int i = 0; i < np; i++)
                dup |= picked[i] == e;
            if (!dup)
                picked[np++] = e;
        }
        for (int i = 0; i < TOPK; i++)
            cnt[picked[i]]++;
    }
    std::vector<int32_t> off(e_count + 1, 0);
    for (int e = 0; e < e_count; e++)
        off[e + 1] = off[e] + cnt[e];
    return off;
}

__global__ void fill_bf16(uint16_t *x, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = (float)((fill_bits(seed, i) >> 40) & 0xFFFF) / 32768.0f - 1.0f;
        uint32_t b;
        memcpy(&b, &g, 4);
        x[i] = (uint16_t)((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
    }
}

/* The floor under a grouped call: read the packed bytes (words 16-byte
 * words from each image's start, images `stride` words apart) of every
 * expert that the offsets give rows, as a streaming kernel would, and
 * nothing else. Launched as the grouped GEMV is (PDL, the offsets read after
 * griddepcontrol.wait); sink is written only if the bytes' XOR is a value
 * no real data makes, so the loads cannot be dropped. */
__global__ void __launch_bounds__(256) read_experts(const uint4 *base, unsigned stride,
                                                    unsigned words, const int32_t *off,
                                                    int e_count, unsigned *sink)
{
    __shared__ int act[1024];
    __shared__ int na;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0)
        na = 0;
    __syncthreads();
    for (int e = threadIdx.x; e < e_count; e += blockDim.x)
        if (off[e + 1] > off[e])
            act[atomicAdd(&na, 1)] = e;
    __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;");
    constexpr int UNROLL = 4;
    const unsigned step = gridDim.x * blockDim.x;
    unsigned a = 0, w = blockIdx.x * blockDim.x + threadIdx.x; /* expert slot, word */
    uint32_t x = 0;
    while (a < (unsigned)na) {
        uint4 v[UNROLL];
#pragma unroll
        for (int j = 0; j < UNROLL; j++) {
            while (a < (unsigned)na && w >= words)
                w -= words, a++;
            v[j] = a < (unsigned)na ? __ldcs(base + (size_t)act[a] * stride + w)
                                    : make_uint4(0, 0, 0, 0);
            w += step;
        }
#pragma unroll
        for (int j = 0; j < UNROLL; j++)
            x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    if (x == 0x9E3779B9u)
        *sink = x;
}

static void launch_read(const uint8_t *base, size_t one, double bytes, const int32_t *off,
                        int e_count, unsigned *sink, int grid, cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    CU(cudaLaunchKernelEx(&cfg, read_experts, (const uint4 *)base, (unsigned)(one / 16),
                          (unsigned)(bytes / 16), off, e_count, sink));
}

/* ||a - b|| / ||b|| of two bf16 outputs */
static double rel_diff(const std::vector<uint16_t> &a, const std::vector<uint16_t> &b)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double u = bfp_bf16_to_f32(a[i]), v = bfp_bf16_to_f32(b[i]);
        num += (u - v) * (u - v), den += v * v;
    }
    return den > 0 ? sqrt(num / den) : NAN;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gpu_moe OUT.json ROUTES.json [quick|t1]\n");
        return 2;
    }
    const bool quick = argc > 3 && !strcmp(argv[3], "quick");
    const bool t1 = argc > 3 && !strcmp(argv[3], "t1");
    if (!bfp_cuda_available()) {
        printf("gpu_moe: skipped: no GPU\n");
        return 0;
    }
    FILE *fo = fopen(argv[1], "w"), *fr = fopen(argv[2], "w");
    if (!fo || !fr) {
        fprintf(stderr, "gpu_moe: cannot write %s / %s\n", argv[1], argv[2]);
        return 1;
    }
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const double bw = stream_copy_gbps(s, (size_t)2 << 30, 1, REPS) * 1e9; /* bytes/s */
    printf("device copy bandwidth: %.0f GB/s\n", bw / 1e9);
    const struct { const char *name; int e; } models[] = {{"gpt-oss-120b", 128}, {"gpt-oss-20b", 32}};
    const struct { const char *name; int n, k; } projs[] = {{"gate_up", 5760, 2880},
                                                           {"down", 2880, 2880}};
    const int tokens_all[] = {1, 16, 64, 256, 1024, 4096};
    const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS};
    const int max_rows = 4096 * TOPK;

    /* routes: [model][T][dist][call] */
    fprintf(fr, "{\"topk\": %d, \"calls\": %d, \"routes\": [\n", TOPK, CALLS);
    std::vector<std::vector<int32_t>> routes[2][6][2];
    bool first = true;
    for (int mi = 0; mi < 2; mi++)
        for (int ti = 0; ti < 6; ti++)
            for (int di = 0; di < 2; di++)
                for (int c = 0; c < CALLS; c++) {
                    auto off = route(models[mi].e, tokens_all[ti], di == 1,
                                     0x23ull + 1000003ull * (mi * 97 + ti * 13 + di * 7 + c * 101));
                    fprintf(fr, "%s{\"model\": \"%s\", \"tokens\": %d, \"routing\": \"%s\", "
                            "\"call\": %d, \"offsets\": [",
                            first ? "" : ",\n", models[mi].name, tokens_all[ti],
                            di ? "skewed" : "uniform", c);
                    for (size_t i = 0; i < off.size(); i++)
                        fprintf(fr, "%s%d", i ? "," : "", off[i]);
                    fprintf(fr, "]}");
                    first = false;
                    routes[mi][ti][di].push_back(off);
                }
    fprintf(fr, "\n]}\n");
    fclose(fr);

    int sms = 0;
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned *dsink;
    CU(cudaMalloc(&dsink, 4));
    void *dx, *dy, *dy2, *doff;
    CU(cudaMalloc(&dx, (size_t)max_rows * 2880 * 2));
    CU(cudaMalloc(&dy, (size_t)max_rows * 5760 * 2));
    CU(cudaMalloc(&dy2, (size_t)max_rows * 5760 * 2));
    CU(cudaMalloc(&doff, (size_t)CALLS * 129 * 4));
    fill_bf16<<<1024, 256, 0, s>>>((uint16_t *)dx, (size_t)max_rows * 2880, 7);
    CU(cudaGetLastError());

    fprintf(fo, "{\"copy_bandwidth_GBps\": %.1f, \"results\": [\n", bw / 1e9);
    first = true;
    for (int mi = 0; mi < 2; mi++)
        for (int pi = 0; pi < 2; pi++)
            for (int fi = 0; fi < 2; fi++) {
                const int E = models[mi].e, n = projs[pi].n, k = projs[pi].k;
                const bfp_format fmt = fmts[fi];
                /* DISTINCT quantized experts, expert e a copy of e % DISTINCT */
                bfp_plane_sizes sz;
                BFP(bfp_plane_sizes_for(fmt, n, k, &sz));
                size_t one, total;
                BFP(bfp_cuda_weight_packed_size(fmt, n, k, &one));
                BFP(bfp_cuda_grouped_weight_packed_size(fmt, E, n, k, &total));
                std::vector<float> src((size_t)n * k);
                std::vector<uint8_t> codes(sz.codes), scales(sz.scales), meta(sz.meta + 1),
                    img(one);
                uint8_t *dbuf;
                CU(cudaMalloc(&dbuf, total));
                uint64_t seed = 99 + fi;
                for (int d = 0; d < DISTINCT; d++) {
                    for (auto &v : src)
                        v = (float)((double)(sm64(&seed) >> 11) * 0x1p-53 - 0.5) * 0.05f;
                    bfp_planes pl = {codes.data(), scales.data(), meta.data(), NULL};
                    BFP(bfp_quantize_f32(fmt, src.data(), n, k, NULL, &pl, NULL));
                    bfp_const_planes cp = {codes.data(), scales.data(), meta.data(), NULL};
                    BFP(bfp_cuda_weight_pack_host(fmt, &cp, n, k, img.data(), one));
                    for (int e = d; e < E; e += DISTINCT)
                        CU(cudaMemcpy(dbuf + (size_t)e * one, img.data(), one,
                                      cudaMemcpyHostToDevice));
                }
                bfp_cuda_grouped_weight *gw;
                BFP(bfp_cuda_grouped_weight_view(fmt, E, n, k, dbuf, total, &gw));
                std::vector<bfp_cuda_weight *> views(E);
                for (int e = 0; e < E; e++)
                    BFP(bfp_cuda_weight_view(fmt, n, k, dbuf + (size_t)e * one, one, &views[e]));
                bfp_packed_sizes ps;
                BFP(bfp_matmul_packed_sizes(fmt, n, k, &ps));
                const double expert_bytes = (double)(ps.codes + ps.scales + ps.corr);
                /* every m an expert may get (AUTO's need is not monotonic in m) */
                const size_t loop_ws = bfp_cuda_matmul_workspace_size_max(views[0]);
                void *dlws;
                CU(cudaMalloc(&dlws, loop_ws + 256));
                CU(cudaMemset(dlws, 0, loop_ws + 256));
                for (int ti = 0; ti < (t1 ? 1 : quick ? 3 : 6); ti++)
                    for (int di = 0; di < 2; di++) {
                        const int T = tokens_all[ti], rows = T * TOPK;
                        auto &rt = routes[mi][ti][di];
                        for (int c = 0; c < CALLS; c++)
                            CU(cudaMemcpy((int32_t *)doff + c * (E + 1), rt[c].data(),
                                          (E + 1) * 4, cudaMemcpyHostToDevice));
                        size_t gws_bytes = bfp_cuda_grouped_matmul_workspace_size(gw, rows, NULL);
                        void *gws = NULL;
                        if (gws_bytes) { /* zeros before the first call (bfp_grouped.h) */
                            CU(cudaMalloc(&gws, gws_bytes));
                            CU(cudaMemset(gws, 0, gws_bytes));
                        }
                        double used = 0;
                        int active_max = 0;
                        for (int c = 0; c < CALLS; c++) {
                            int act = 0;
                            for (int e = 0; e < E; e++)
                                act += rt[c][e + 1] > rt[c][e];
                            used += act * expert_bytes + (double)rows * (k + n) * 2;
                            active_max = std::max(active_max, act);
                        }
                        used /= CALLS;
                        const double g_us = graph_us(s, [&](int c) {
                            BFP(bfp_cuda_grouped_matmul(gw, dx, rows,
                                                        (int32_t *)doff + c * (E + 1), NULL,
                                                        dy, gws, gws_bytes, NULL, s));
                        }, CALLS, REPS);
                        const double l_us = graph_us(s, [&](int c) {
                            for (int e = 0; e < E; e++) {
                                const int a = rt[c][e], m = rt[c][e + 1] - a;
                                if (m)
                                    BFP(bfp_cuda_matmul(views[e], (uint16_t *)dx + (size_t)a * k,
                                                        m, NULL, (uint16_t *)dy2 + (size_t)a * n,
                                                        dlws, loop_ws, BFP_MATMUL_AUTO, s));
                            }
                        }, CALLS, REPS);
                        const double r_us = graph_us(s, [&](int c) {
                            launch_read(dbuf, one, expert_bytes, (int32_t *)doff + c * (E + 1), E,
                                        dsink, 8 * sms, s);
                        }, CALLS, REPS);
                        /* the last call of each: grouped against the loop */
                        CU(cudaStreamSynchronize(s));
                        std::vector<uint16_t> y1((size_t)rows * n), y2((size_t)rows * n);
                        CU(cudaMemcpy(y1.data(), dy, y1.size() * 2, cudaMemcpyDeviceToHost));
                        CU(cudaMemcpy(y2.data(), dy2, y2.size() * 2, cudaMemcpyDeviceToHost));
                        const double rel = rel_diff(y1, y2);
                        /* the other kernels, where this GPU has them (-1 where refused) */
                        const int32_t *last_off = (int32_t *)doff + (CALLS - 1) * (E + 1);
                        auto alt = [&](int kernel, int bn, int pdl, double *rel_out) {
                            const bfp_matmul_tuning t = {.gemv_pdl = pdl, .grouped_kernel = kernel,
                                                         .wgmma_bn = bn};
                            const size_t wb = bfp_cuda_grouped_matmul_workspace_size(gw, rows, &t);
                            void *ws = NULL;
                            if (wb) {
                                CU(cudaMalloc(&ws, wb));
                                CU(cudaMemset(ws, 0, wb));
                            }
                            double us = -1;
                            *rel_out = NAN;
                            if (bfp_cuda_grouped_matmul(gw, dx, rows, last_off, NULL, dy, ws, wb,
                                                        &t, s) == BFP_OK) {
                                us = graph_us(s, [&](int c) {
                                    BFP(bfp_cuda_grouped_matmul(
                                        gw, dx, rows, (int32_t *)doff + c * (E + 1), NULL, dy,
                                        ws, wb, &t, s));
                                }, CALLS, REPS);
                                CU(cudaStreamSynchronize(s));
                                CU(cudaMemcpy(y1.data(), dy, y1.size() * 2,
                                              cudaMemcpyDeviceToHost));
                                *rel_out = rel_diff(y1, y2);
                            }
                            if (ws)
                                CU(cudaFree(ws));
                            return us;
                        };
                        double w_rel, v_rel, vp_rel, vp2_rel, w256_rel = NAN;
                        const double w_us = alt(2, 0, 0, &w_rel);
                        const double v_us = alt(3, 0, -1, &v_rel);
                        const double vp_us = alt(3, 0, 1, &vp_rel);
                        const double vp2_us = alt(3, 0, 2, &vp2_rel);
                        const double w256_us = T >= 256 ? alt(2, 256, 0, &w256_rel) : -1;
                        const double frac = used / (g_us * 1e-6) / bw;
                        printf("%-13s %-7s %-6s T=%4d %-7s grouped %9.1f us  wgmma %9.1f us  "
                               "wgmma256 %9.1f us  gemv %9.1f us  gemv+pdl %9.1f / %9.1f us  "
                               "loop %9.1f us  read %9.1f us  used %.1f MB  "
                               "%.0f%% of copy bw  rel %.1e / %.1e / %.1e / %.1e\n",
                               models[mi].name, projs[pi].name, bfp_format_get(fmt)->name, T,
                               di ? "skewed" : "uniform", g_us, w_us, w256_us, v_us, vp_us,
                               vp2_us, l_us, r_us,
                               used / 1e6, 100 * frac, rel, w_rel, w256_rel, v_rel);
                        fflush(stdout);
                        fprintf(fo,
                                "%s{\"model\": \"%s\", \"proj\": \"%s\", \"n\": %d, \"k\": %d, "
                                "\"experts\": %d, \"format\": \"%s\", \"tokens\": %d, "
                                "\"rows\": %d, \"routing\": \"%s\", \"grouped_us\": %.2f, "
                                "\"loop_us\": %.2f, \"wgmma_us\": %.2f, \"wgmma256_us\": %.2f, "
                                "\"gemv_us\": %.2f, \"gemv_pdl_us\": %.2f, "
                                "\"gemv_pdl2_us\": %.2f, \"read_us\": %.2f, "
                                "\"read_frac_copy_bw\": %.4f, "
                                "\"bytes_used\": %.0f, "
                                "\"active_experts_max\": %d, \"roofline_frac_copy_bw\": %.4f, "
                                "\"roofline_frac_4800GBps\": %.4f, "
                                "\"rel_diff_grouped_vs_loop\": %.3e, "
                                "\"rel_diff_wgmma_vs_loop\": %.3e, "
                                "\"rel_diff_wgmma256_vs_loop\": %.3e, "
                                "\"rel_diff_gemv_vs_loop\": %.3e, "
                                "\"rel_diff_gemv_pdl_vs_loop\": %.3e, "
                                "\"rel_diff_gemv_pdl2_vs_loop\": %.3e}",
                                first ? "" : ",\n", models[mi].name, projs[pi].name, n, k, E,
                                bfp_format_get(fmt)->name, T, rows, di ? "skewed" : "uniform",
                                g_us, l_us, w_us, w256_us, v_us, vp_us, vp2_us, r_us,
                                used / (r_us * 1e-6) / bw, used,
                                active_max, frac,
                                used / (g_us * 1e-6) / 4.8e12, rel,
                                std::isnan(w_rel) ? -1.0 : w_rel,
                                std::isnan(w256_rel) ? -1.0 : w256_rel,
                                std::isnan(v_rel) ? -1.0 : v_rel,
                                std::isnan(vp_rel) ? -1.0 : vp_rel,
                                std::isnan(vp2_rel) ? -1.0 : vp2_rel);
                        first = false;
                        if (gws)
                            CU(cudaFree(gws));
                    }
                for (auto *v : views)
                    bfp_cuda_weight_free(v);
                bfp_cuda_grouped_weight_free(gw);
                CU(cudaFree(dlws));
                CU(cudaFree(dbuf));
            }
    fprintf(fo, "\n]}\n");
    fclose(fo);
    CU(cudaFree(dsink));
    return 0;
}
