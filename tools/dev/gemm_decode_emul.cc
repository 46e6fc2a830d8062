/* gemm_decode_emul.cc - runs the matmul kernels' tile decode (decode_tile in
 * src/cuda/gemm_fused.cuh) on the host for all 32 lanes of every tile of
 * prepacked weights, the bf16x2 multiply and PRMT emulated exactly, maps each
 * lane's A-fragment registers back to (row, column) by the PTX layout of
 * mma.m16n8k16 and compares value times 2^fold (divided by the NVFP4 tensor
 * scale, as the kernels' epilogue does) with bfp_matmul_unpack and
 * bfp_dequantize_ref bit for bit, NaN for NaN. Weights: bf16 data quantized
 * by the reference (zeros, huge, tiny, subnormal, NaN/Inf blocks, outliers),
 * and random plane bytes with every scale byte in turn (NaN, zero and
 * subnormal UE4M3 scales, bytes the reference rejects), block maxima of
 * MX+ / NVFP4+ at every index, HiF4 flag words of every kind, and E8M0
 * scales up to 254 (the MX fold). Padding of partial tiles must decode
 * finite (it meets zero columns of x). It checks the decode's logic on a
 * machine without a GPU; tests/test_cuda_matmul.c remains the real check.
 *
 * Built as the ctest test_cuda_gemm_decode_emul when CUDA is enabled, or:
 *   g++ -O2 -std=c++17 -Iinclude -Isrc/core -Isrc/cuda -I/usr/local/cuda/include \
 *       tools/dev/gemm_decode_emul.cc build/libbfp.a -lm -o /tmp/gde && /tmp/gde
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "bfp.h"
#include "cuda_host_stubs.h"
#include "emul_gen.h"
#include "gemm_fused.cuh"

using namespace bfpgemm;

static float bf16_f(uint32_t h)
{
    uint32_t b = h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static bool same(float a, float b) { return std::isnan(a) ? std::isnan(b) : memcmp(&a, &b, 4) == 0; }

struct Weight {
    bfp_format fmt;
    size_t n, k;
    std::vector<uint8_t> codes, scales, meta;
    float ts = 1.0f;
};

/* the kernel's fold exponent for this weight (gemm.cu: bfp_cuda_weight_upload) */
static int fold_of(int F, const std::vector<uint8_t> &ps)
{
    if (F == FMT_NV || F == FMT_NVPLUS)
        return NV_FOLD;
    if (F == FMT_HIF4)
        return HIF4_FOLD;
    unsigned smax = 0;
    for (uint8_t s : ps)
        if (s != 0xFF && s > smax)
            smax = s;
    return smax > 128 ? (int)smax - 128 : 0;
}

/* Decode every tile of w as the kernels do and compare; returns mismatches.
 * POST (MX+ / NVFP4+): as the skinny kernel at small m does, the tile
 * decoded as plain MX / NVFP4 plus each block max's corr_coef at its
 * corr_col, which must give the same values. */
template <int F, bool POST = false>
static long check(const Weight &w, const char *what, long *checked, long *checked_small)
{
    constexpr int DF = !POST ? F : F == FMT_MXPLUS ? FMT_MX : FMT_NV; /* decoded as */
    const bfp_format_info *fi = bfp_format_get(w.fmt);
    bfp_packed_sizes ps;
    bfp_matmul_packed_sizes(w.fmt, w.n, w.k, &ps);
    std::vector<uint8_t> pc(ps.codes), psc(ps.scales), pcr(ps.corr + 8);
    bfp_const_planes cp = {w.codes.data(), w.scales.data(), w.meta.empty() ? NULL : w.meta.data(),
                           &w.ts};
    std::vector<float> ref(w.n * w.k), unp(w.n * w.k);
    if (bfp_dequantize_ref(w.fmt, &cp, w.n, w.k, BFP_DTYPE_F32, ref.data()) != BFP_OK ||
        bfp_matmul_prepack(w.fmt, &cp, w.n, w.k, pc.data(), psc.data(), pcr.data()) != BFP_OK ||
        bfp_matmul_unpack(w.fmt, pc.data(), psc.data(), pcr.data(), w.ts, w.n, w.k, unp.data()) !=
            BFP_OK) {
        printf("%s %s: reference, prepack or unpack failed\n", fi->name, what);
        return 1;
    }
    const int fold = fold_of(F, psc);
    const bool wide = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    const int srec = wide ? 64 : 32, crec = F == FMT_MXPLUS ? 32 : F == FMT_NVPLUS ? 64 : 0;
    const size_t tiles_n = (w.n + 15) / 16, tiles_k = (w.k + 63) / 64;
    long bad = 0, flushed = 0;
    for (size_t nt = 0; nt < tiles_n; nt++)
        for (size_t kt = 0; kt < tiles_k; kt++) {
            const size_t tile = nt * tiles_k + kt;
            float add[16][64] = {}; /* POST: the corrections, in the operands' units */
            for (int r = 0; POST && r < 16; r++) {
                const int nb = F == FMT_MXPLUS ? 2 : 4, off = (r % 8) * (crec / 8) + (r / 8) * nb;
                for (int b = 0; b < nb; b++) {
                    const uint32_t cb = pcr[tile * crec + off + b], sb = psc[tile * srec + off + b];
                    if (cb & 3u)
                        add[r][b * (64 / nb) + corr_col<F>(cb)] =
                            corr_coef<F>(cb, sb, ldexpf(1.0f, -1 - fold));
                }
            }
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane >> 2, t = lane & 3;
                uint4 wc;
                uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
                memcpy(&wc, &pc[tile * 512 + (size_t)lane * 16], 16);
                memcpy(&sc, &psc[tile * srec + (size_t)g * (wide ? 8 : 4)], wide ? 8 : 4);
                if (crec)
                    memcpy(&cr, &pcr[tile * crec + (size_t)g * (crec / 8)], (size_t)crec / 8);
                uint32_t a[4][4];
                decode_tile<DF>(wc, sc, cr, t, fold, a);
                for (int j = 0; j < 4; j++)
                    for (int r = 0; r < 4; r++)
                        for (int hi = 0; hi < 2; hi++) {
                            /* PTX mma.m16n8k16 A fragment: a[r] holds row g (+8 for
                             * r = 1, 3), columns 2t (+8 for r = 2, 3) and +1 */
                            size_t row = nt * 16 + (size_t)g + 8 * (r & 1);
                            size_t col = kt * 64 + 16 * (size_t)j + 2 * (size_t)t +
                                         8 * (size_t)(r >> 1) + (size_t)hi;
                            float v = bf16_f(a[j][r] >> (16 * hi) & 0xFFFFu);
                            const float c = add[g + 8 * (r & 1)][16 * j + 2 * t + 8 * (r >> 1) + hi];
                            if (POST && c != 0.0f) /* (-0 + 0 would be +0; the kernel adds no zero) */
                                v += c;
                            v = ldexpf(v, fold);
                            if (F == FMT_NV || F == FMT_NVPLUS)
                                v = v / w.ts;
                            (*checked)++;
                            if (row >= w.n || col >= w.k) {
                                /* padding meets zero columns of x: finite, or NaN in
                                 * a NaN block whose row is NaN in y anyway */
                                size_t b0 = col / (size_t)fi->block * (size_t)fi->block;
                                bool nan_row = row < w.n && b0 < w.k &&
                                               std::isnan(ref[row * w.k + b0]);
                                if (std::isfinite(v) || (std::isnan(v) && nan_row))
                                    continue;
                                if (bad++ < 8)
                                    printf("%s %s: padding (%zu, %zu) decodes to %g\n", fi->name,
                                           what, row, col, v);
                                continue;
                            }
                            float want = unp[row * w.k + col];
                            bool ok = same(v, want) && same(want, ref[row * w.k + col]);
                            if (!ok && (F == FMT_MX || F == FMT_MXPLUS) && fold > 0 &&
                                same(want, ref[row * w.k + col]) && std::isfinite(want)) {
                                /* documented: with fold > 0 the operand is W * 2^-fold
                                 * in bf16, so values below 2^(fold - 126) keep only the
                                 * bits of a bf16 subnormal, and a block more than 2^253
                                 * below the weight's largest flushes to zero */
                                size_t bpr = (w.k + 31) / 32;
                                uint8_t s = w.scales[row * bpr + col / 32];
                                float r = ldexpf(bf16_f(bfpcuda::bf16_rne_host(
                                                     ldexp((double)want, -fold), 0.0)),
                                                 fold);
                                ok = (int)s + 126 - fold < 1 ? v == 0.0f : same(v, r);
                                /* POST: the high part so rounded, the low bits exact */
                                if (POST && !ok)
                                    ok = std::fabs(v - want) <= ldexpf(1.0f, fold - 133);
                                flushed++;
                            }
                            if (ok)
                                continue;
                            if (bad++ < 8)
                                printf("%s %s: (%zu, %zu) lane %d a[%d][%d].%d = %04x: %g, unpack %g, "
                                       "ref %g\n",
                                       fi->name, what, row, col, lane, j, r, hi,
                                       a[j][r] >> (16 * hi) & 0xFFFFu, v, want,
                                       ref[row * w.k + col]);
                        }
            }
        }
    *checked_small += flushed;
    return bad;
}

static Weight alloc(bfp_format f, size_t n, size_t k)
{
    Weight w;
    w.fmt = f;
    w.n = n;
    w.k = k;
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(f, n, k, &sz);
    w.codes.assign(sz.codes, 0);
    w.scales.assign(sz.scales, 0);
    w.meta.assign(sz.meta + 1, 0);
    return w;
}

/* bf16 data of every kind (emul_gen.h), quantized by the reference */
static Weight quantized(bfp_format f, size_t n, size_t k)
{
    Weight w = alloc(f, n, k);
    std::vector<uint16_t> x(n * k + 32);
    for (size_t i = 0; i < n * k; i += 32)
        gen_block(&x[i]);
    bfp_planes out = {w.codes.data(), w.scales.data(), w.meta.data(), &w.ts};
    if (bfp_quantize_ref(f, BFP_DTYPE_BF16, x.data(), n, k, NULL, &out, NULL) != BFP_OK)
        printf("%s: quantize failed\n", bfp_format_get(f)->name);
    return w;
}

/* random plane bytes; scale bytes (HiF4: UE6M2 bytes) run through all 256
 * values in turn, meta bytes through every block-max index; mode 1 keeps
 * the scales moderate (MX: fold 0), mode 2 random */
static Weight random_bytes(bfp_format f, size_t n, size_t k, int mode)
{
    Weight w = alloc(f, n, k);
    for (auto &c : w.codes)
        c = (uint8_t)rnd();
    const bfp_format_info *fi = bfp_format_get(f);
    size_t sbytes = w.scales.size();
    for (size_t i = 0; i < sbytes; i++) {
        uint8_t b = (uint8_t)rnd();
        if (fi->block == 64) /* HiF4 words: byte 0 is the UE6M2 scale */
            b = i % 4 ? b : (uint8_t)(mode == 0 ? i / 4 : mode == 1 ? 90 + rnd() % 39 : rnd());
        else
            b = (uint8_t)(mode == 0 ? i : mode == 1 ? 90 + rnd() % 39 : rnd());
        w.scales[i] = b;
    }
    for (size_t i = 0; i + 1 < w.meta.size(); i++)
        w.meta[i] = (uint8_t)(mode == 0 ? i : rnd() % 2 ? rnd() : rnd() % 32);
    w.ts = mode == 0 ? 1.0f : mode == 1 ? 3.0f : 1e-3f;
    return w;
}

template <int F, bool POST = false>
static int run(bfp_format f)
{
    long checked = 0, small = 0, bad = 0;
    static const size_t shapes[][2] = {{16, 64}, {40, 200}, {33, 257}, {128, 512}};
    for (auto &s : shapes) {
        bad += check<F, POST>(quantized(f, s[0], s[1]), "quantized", &checked, &small);
        for (int mode = 0; mode < 3; mode++)
            bad += check<F, POST>(random_bytes(f, s[0], s[1], mode), "random bytes", &checked,
                                  &small);
    }
    printf("  %-8s %9ld values (%ld below the MX fold's bf16 range)%s %s\n",
           bfp_format_get(f)->name, checked, small, POST ? ", block max after the mma" : "",
           bad ? "FAILED" : "ok");
    return bad != 0;
}

int main()
{
    int fails = run<FMT_MX>(BFP_MXFP4) + run<FMT_MXPLUS>(BFP_MXFP4_PLUS) + run<FMT_NV>(BFP_NVFP4) +
                run<FMT_NVPLUS>(BFP_NVFP4_PLUS) + run<FMT_HIF4>(BFP_HIF4) +
                run<FMT_MXPLUS, true>(BFP_MXFP4_PLUS) + run<FMT_NVPLUS, true>(BFP_NVFP4_PLUS);
    return fails != 0;
}
