/* gemm_xq_emul.cc - the quantized-x wgmma kernel's operand layout on the
 * host (src/cuda/gemm_xq_wgmma.cu, xq_kernel = 2), with the CUDA intrinsics
 * emulated: x's pre-pass (xq_prep_lane), W's A fragments (mx4_decode of the
 * words a lane reads from the TMA stage, or from global memory without TMA),
 * put back into a 64 x 32 A tile and a BN x 32 B tile by the PTX ISA's
 * layouts for wgmma.m64nNk32 with 8-bit types (stated here, independently
 * of the kernel: A register r byte v of lane (g, t) of warp w is row
 * 16 w + g + 8 (r % 2), k slot 4 t + v + 16 (r / 2); B is K-major, slot s
 * at byte s of the row; D element 4 q + e of lane (g, t) is row
 * 16 w + g + 8 (e / 2), column 8 q + 2 t + e % 2). Each block's partial is
 * the exact sum of 32 E4M3 products; acc += (partial * scale_w) * scale_x
 * in fp32 as the kernel's scale_add. Checked against bfp_matmul_ref_q of
 * the same planes: relative error < 1e-5, NaN exactly where the reference
 * has it. MX pairs, odd shapes, NaN blocks, scales 2^60 apart, zero blocks.
 * It checks the index math on a machine without a GPU; the swizzle, TMA
 * and the tensor cores are the GPU's (tests/test_cuda_matmul_xq.c).
 *
 * Built as the ctest test_cuda_gemm_xq_emul when CUDA is enabled, or:
 *   g++ -O2 -std=c++17 -Iinclude -Isrc/core -Isrc/cuda -I/usr/local/cuda/include \
 *       tools/dev/gemm_xq_emul.cc build/libbfp.a -lm -o /tmp/xqe && /tmp/xqe
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "bfp.h"
#include "cuda_host_stubs.h"
#include "gemm_xq_decode.cuh"

using namespace bfpgemm::xq;

static double e4m3(uint32_t b)
{
    const int s = b >> 7 & 1, e = b >> 3 & 15, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    const double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

static uint64_t rng = 88172645463325252ull;
static double unif()
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* rows of kinds: plain, outliers, zero blocks, blocks 2^60 apart */
static float value(size_t r, size_t c, int salt)
{
    const int kind = (int)((r * 7 + (size_t)salt) % 4);
    double g = (unif() + unif() + unif() - 1.5) * 2.0;
    if (kind == 1 && unif() < 0.03)
        g *= 200.0;
    if (kind == 2 && (c / 32) % 3 == 1)
        g = 0.0;
    if (kind == 3)
        g *= (c / 32) % 2 ? 0x1p30 : 0x1p-30;
    return (float)g;
}

struct Planes {
    bfp_plane_sizes sz;
    std::vector<uint8_t> codes, scales, meta;
    float ts = 0;
    void make(bfp_format f, const std::vector<float> &v, size_t rows, size_t cols)
    {
        bfp_plane_sizes_for(f, rows, cols, &sz);
        codes.assign(sz.codes + 16, 0);
        scales.assign(sz.scales + 16, 0);
        meta.assign(sz.meta + 16, 0);
        bfp_planes p = {codes.data(), scales.data(), meta.data(), &ts};
        if (bfp_quantize(f, BFP_DTYPE_F32, v.data(), rows, cols, NULL, &p, NULL) != BFP_OK)
            printf("quantize failed\n");
    }
    bfp_const_planes cp() const { return {codes.data(), scales.data(), meta.data(), &ts}; }
};

template <int XK>
static void prep(const Planes &x, size_t m, size_t k, std::vector<uint8_t> &xc, size_t kp,
                 std::vector<float> &xs, size_t mp)
{
    const int bpr = (int)x.sz.blocks_per_row;
    for (size_t row = 0; row < m; row++)
        for (int b = 0; b < bpr; b++)
            for (int t = 0; t < 4; t++) {
                uint32_t lo, hi;
                float s = xq_prep_lane<XK>(x.codes.data(), x.scales.data(), x.meta.data(),
                                           x.sz.code_row_bytes, bpr, (int)row, b, t, (int)k,
                                           false, lo, hi);
                memcpy(&xc[row * kp + b * 32 + 4 * t], &lo, 4);
                memcpy(&xc[row * kp + b * 32 + 16 + 4 * t], &hi, 4);
                if (t == 0)
                    xs[(size_t)b * mp + row] = s;
            }
}

/* The kernel's product for one pair; returns failures */
template <bool PLUS>
static int run(bfp_format wf, bfp_format xf, size_t m, size_t n, size_t k, bool tma)
{
    const int BN = 8; /* columns of x per emulated tile: any multiple of 8 */
    std::vector<float> wv(n * k), xv(m * k);
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < k; c++)
            wv[r * k + c] = value(r, c, 0);
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < k; c++)
            xv[r * k + c] = value(r, c, 1) * (c % 97 == 5 ? 30.0f : 1.0f);
    const int wnan = n > 3 ? (int)(n / 2) : -1, xnan = m > 3 ? (int)(m / 3) : -1;
    if (wnan >= 0)
        wv[(size_t)wnan * k + k - 1] = NAN;
    if (xnan >= 0)
        xv[(size_t)xnan * k] = NAN;
    Planes W, X;
    W.make(wf, wv, n, k);
    X.make(xf, xv, m, k);
    std::vector<float> ref(m * n);
    bfp_const_planes cw = W.cp(), cx = X.cp();
    if (bfp_matmul_ref_q(wf, &cw, n, k, xf, &cx, m, NULL, ref.data()) != BFP_OK) {
        printf("reference failed\n");
        return 1;
    }
    const int bpr = (int)((k + 31) / 32), tiles_k = (bpr + 3) / 4;
    const size_t kp = (size_t)bpr * 32, mp = (m + 3) & ~(size_t)3;
    const size_t mt = (m + BN - 1) / BN * BN; /* x rows past m: zeros, as TMA's */
    std::vector<uint8_t> xc(mt * kp, 0);
    std::vector<float> xs((size_t)bpr * mp, 0.0f);
    if (xf == BFP_MXFP8_E4M3)
        prep<XQ_X_E4M3>(X, m, k, xc, kp, xs, mp);
    else if (xf == BFP_MXFP4)
        prep<XQ_X_MX4>(X, m, k, xc, kp, xs, mp);
    else
        prep<XQ_X_MX4P>(X, m, k, xc, kp, xs, mp);

    const size_t crb = W.sz.code_row_bytes;
    std::vector<double> y(m * n, 0.0);
    for (size_t w0 = 0; w0 < n; w0 += 64) /* one warpgroup's 64 rows of W */
        for (size_t m0 = 0; m0 < m; m0 += BN) {
            std::vector<float> acc(64 * BN, 0.0f); /* [row][col], as the threads hold it */
            for (int kt = 0; kt < tiles_k; kt++)
                for (int j = 0; j < 4; j++) {
                    const int b = kt * 4 + j;
                    uint8_t A[64][32];
                    float sw[64];
                    for (int warp = 0; warp < 4; warp++)
                        for (int lane = 0; lane < 32; lane++) {
                            const int g = lane >> 2, t = lane & 3;
                            for (int h = 0; h < 2; h++) {
                                const size_t lr = (size_t)(16 * warp + g + 8 * h);
                                const size_t row = std::min(w0 + lr, n - 1);
                                uint32_t v = 0, s = 0, mt8 = 0;
                                if (tma) { /* the stage: bytes kt * 64 .. + 63 of the row, zeros past */
                                    for (int i = 0; i < 4; i++) {
                                        const size_t o = (size_t)kt * 64 + 16 * j + 4 * t + i;
                                        if (w0 + lr < n && o < crb)
                                            v |= (uint32_t)W.codes[(w0 + lr) * crb + o] << (8 * i);
                                    }
                                } else {
                                    const int e0 = b * 32 + 8 * t;
                                    v = load4(W.codes.data() + row * crb, e0,
                                              std::min(std::max((int)k - e0, 0), 8), false);
                                }
                                if (b < bpr) {
                                    s = W.scales[row * bpr + b];
                                    mt8 = PLUS ? W.meta[row * bpr + b] : 0;
                                }
                                uint32_t r[4];
                                mx4_decode<PLUS>(v, s, mt8, t, r[h], r[2 + h]);
                                /* the PTX layout puts register r of this lane at */
                                for (int ri = h; ri < 4; ri += 2)
                                    for (int by = 0; by < 4; by++) {
                                        const int ar = 16 * warp + g + 8 * (ri % 2);
                                        const int slot = 4 * t + by + 16 * (ri / 2);
                                        A[ar][slot] = (uint8_t)(r[ri] >> (8 * by));
                                    }
                                sw[lr] = e8m0_f(s);
                            }
                        }
                    for (int ar = 0; ar < 64; ar++)
                        for (int c = 0; c < BN; c++) {
                            const uint8_t *B = &xc[(m0 + c) * kp]; /* K-major row */
                            double p = 0;
                            for (int s = 0; s < 32; s++)
                                if (b * 32 + s < (int)kp) /* TMA: zeros past kp */
                                    p += e4m3(A[ar][s]) * e4m3(B[b * 32 + s]);
                            const float sx = m0 + c < m && b < bpr ? xs[(size_t)b * mp + m0 + c]
                                                                   : 0.0f;
                            float &a = acc[ar * BN + c];
                            a = fmaf((float)p * sw[ar], sx, a);
                        }
                }
            for (int ar = 0; ar < 64; ar++)
                for (int c = 0; c < BN; c++)
                    if (w0 + ar < n && m0 + c < m)
                        y[(m0 + c) * n + w0 + ar] = acc[ar * BN + c];
        }
    double num = 0, den = 0;
    size_t nan_diff = 0;
    for (size_t i = 0; i < m * n; i++) {
        if (std::isnan(ref[i]) || std::isnan(y[i])) {
            nan_diff += std::isnan(ref[i]) != std::isnan(y[i]);
            continue;
        }
        num += (y[i] - ref[i]) * (y[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const bool ok = rel < 1e-5 && nan_diff == 0 && (wnan < 0 || std::isnan(y[wnan]));
    if (!ok || getenv("BFP_TEST_VERBOSE"))
        printf("%s %s x %s m %zu n %zu k %zu%s: rel %.3g, NaN mismatches %zu\n", ok ? "ok" : "FAIL",
               bfp_format_get(wf)->name, bfp_format_get(xf)->name, m, n, k,
               tma ? " (tma)" : "", rel, nan_diff);
    return ok ? 0 : 1;
}

int main()
{
    const bfp_format ws[] = {BFP_MXFP4, BFP_MXFP4_PLUS};
    const bfp_format xs[] = {BFP_MXFP8_E4M3, BFP_MXFP4, BFP_MXFP4_PLUS};
    const size_t shapes[][3] = {{5, 33, 65}, {17, 130, 256}, {3, 20, 333}, {9, 64, 1024},
                                {1, 1, 1},   {8, 70, 520}};
    int bad = 0, runs = 0;
    for (bfp_format wf : ws)
        for (bfp_format xf : xs)
            for (auto &s : shapes)
                for (int tma = 0; tma < 2; tma++) {
                    if (tma && s[2] % 32) /* the kernel's TMA needs rows of 16-byte multiples */
                        continue;
                    bad += wf == BFP_MXFP4_PLUS ? run<true>(wf, xf, s[0], s[1], s[2], tma)
                                                : run<false>(wf, xf, s[0], s[1], s[2], tma);
                    runs++;
                }
    printf("gemm_xq_emul: %d of %d cases passed\n", runs - bad, runs);
    return bad != 0;
}
