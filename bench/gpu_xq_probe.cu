/* gpu_xq_probe.cu - where the quantized-x matmul puts each weight element:
 * W (256 x 256) has one 1 per row j, at column c(j) = (37 j + 11) mod 256,
 * and x is the 256 x 256 identity, so y[i][j] = 1 exactly when i = c(j).
 * A wrong A / B fragment layout or k permutation moves the 1 to another i
 * (the k slot it met), a wrong accumulator layout to another column; the
 * probe prints, per kernel and pair, the columns that are right and the
 * first wrong ones with where their ones landed (and which W row has its 1
 * there). Exact in every format (1.0 is an E2M1 value and an MX+ block max).
 *
 *   gpu_xq_probe        (bench/gpu_xq_wgmma.sh runs it; exit 1 on a wrong column)
 */
#include "bfp.h"

#include <cuda_runtime.h>

#include "bench_check.h"
#include "cuda_check.h" /* tests/ */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <vector>

constexpr size_t N = 256, K = 256, M = 256;

static int col_of(size_t j) { return (int)((37 * j + 11) % K); }

struct Dev {
    std::vector<void *> p;
    void *put(const void *h, size_t bytes)
    {
        void *d;
        CU(cudaMalloc(&d, bytes + 16));
        CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        p.push_back(d);
        return d;
    }
    ~Dev()
    {
        for (void *d : p)
            CU(cudaFree(d));
    }
};

struct Host {
    bfp_plane_sizes sz;
    std::vector<uint8_t> c, s, m;
    float ts = 0;
    void make(bfp_format f, const std::vector<float> &v, size_t rows, size_t cols)
    {
        BFP(bfp_plane_sizes_for(f, rows, cols, &sz));
        c.assign(sz.codes + 16, 0), s.assign(sz.scales + 16, 0), m.assign(sz.meta + 16, 0);
        bfp_planes p = {c.data(), s.data(), m.data(), &ts};
        BFP(bfp_quantize(f, BFP_DTYPE_F32, v.data(), rows, cols, NULL, &p, NULL));
    }
};

/* returns the number of wrong columns */
static int probe(int kern, bfp_format wf, bfp_format xf)
{
    std::vector<float> w(N * K, 0.0f), x(M * K, 0.0f);
    for (size_t j = 0; j < N; j++)
        w[j * K + col_of(j)] = 1.0f;
    for (size_t i = 0; i < M; i++)
        x[i * K + i] = 1.0f;
    Host hw, hx;
    hw.make(wf, w, N, K);
    hx.make(xf, x, M, K);
    Dev d;
    bfp_cuda_planar_weight pw = {wf, N, K, d.put(hw.c.data(), hw.sz.codes),
                                 d.put(hw.s.data(), hw.sz.scales),
                                 d.put(hw.m.data(), hw.sz.meta), 0.0f};
    bfp_const_planes px = {(const uint8_t *)d.put(hx.c.data(), hx.sz.codes),
                           (const uint8_t *)d.put(hx.s.data(), hx.sz.scales),
                           (const uint8_t *)d.put(hx.m.data(), hx.sz.meta), NULL};
    bfp_matmul_tuning t = {};
    t.xq_kernel = kern;
    size_t wsb = bfp_cuda_matmul_xq_workspace_size(&pw, xf, M, &t);
    std::vector<uint16_t> y(M * N, 0xFFFF);
    void *dy = d.put(y.data(), M * N * 2), *ws = NULL;
    CU(cudaMalloc(&ws, wsb + 256));
    bfp_status st = bfp_cuda_matmul_xq_planes(&pw, xf, &px, M, NULL, dy, ws, wsb, &t, NULL);
    CU(cudaDeviceSynchronize());
    CU(cudaFree(ws));
    const char *wn = bfp_format_get(wf)->name, *xn = bfp_format_get(xf)->name;
    if (st != BFP_OK) {
        printf("probe k%d %s x %s: %s\n", kern, wn, xn, bfp_status_str(st));
        return (int)N;
    }
    CU(cudaMemcpy(y.data(), dy, M * N * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t j = 0; j < N; j++) {
        int ones[4], n1 = 0, other = 0;
        for (size_t i = 0; i < M; i++) {
            float v = bfp_bf16_to_f32(y[i * N + j]);
            if (v == 1.0f && n1 < 4)
                ones[n1++] = (int)i;
            else if (v != 0.0f)
                other++;
        }
        if (n1 == 1 && ones[0] == col_of(j) && !other)
            continue;
        if (bad++ < 6) {
            printf("  col %zu: want its 1 at k %d; ones at k", j, col_of(j));
            for (int a = 0; a < n1; a++) {
                int from = -1; /* the W row whose 1 is at that k */
                for (size_t r = 0; r < N; r++)
                    from = col_of(r) == ones[a] ? (int)r : from;
                printf(" %d (W row %d's)", ones[a], from);
            }
            printf("%s; %d other nonzero\n", n1 ? "" : " none", other);
        }
    }
    printf("probe k%d %s x %s: %zu of %zu columns right\n", kern, wn, xn, N - bad, N);
    return bad;
}

int main()
{
    if (!bfp_cuda_available()) {
        printf("gpu_xq_probe: no GPU\n");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const bfp_format pairs[][2] = {{BFP_MXFP4, BFP_MXFP8_E4M3},
                                   {BFP_MXFP4_PLUS, BFP_MXFP4},
                                   {BFP_MXFP4, BFP_MXFP4_PLUS}};
    int bad = 0;
    for (int kern = 1; kern <= 2; kern++)
        for (auto &p : pairs)
            bad += probe(kern, p[0], p[1]);
    return bad != 0;
}
