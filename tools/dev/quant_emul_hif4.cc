/* quant_emul_hif4.cc - runs the GPU's block-per-thread HiF4 quantizer for
 * bf16 input (hif4_block_bf16 in src/cuda/bfp_cuda_qblock_hif4.cuh) on the
 * host, the packed bf16x2 and PRMT instructions emulated exactly by
 * bfp_cuda_quant_bf16.cuh's host branches, and compares codes, scale words
 * and the non-finite count byte for byte with bfp_quantize_ref. Data: each
 * 64-block is two emul_gen.h blocks (zeros, NaN/Inf, subnormals, huge,
 * outliers, grid ties, ...), or a HiF4 case: 4-element groups of very
 * different magnitude (every E1_8 / E1_16 combination), group maxima on
 * either side of the flag thresholds V * REC = 2 and 4, block maxima over
 * every bf16 significand (ties of both scale roundings), and elements that
 * are exact ties of the element rounding at every flag level.
 * It checks the encoder's logic on a machine without a GPU;
 * tests/test_cuda.c remains the real check.
 *
 * Built as the ctest test_cuda_quant_emul_hif4 when CUDA is enabled. */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_host_stubs.h"
#include "emul_gen.h"
#include "emul_check.h"
#include "bfp_cuda_launch_quant.cuh"

using namespace bfpcuda;

static double bf16_val(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t bf16_of(double v) /* v exactly a bf16 */
{
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}

/* REC of a block whose max |x| is vmax (SPEC 4 steps 2-3, in double) */
static double spec_rec(double vmax)
{
    auto rne = [](double v, int sig) {
        if (v == 0)
            return 0.0;
        int e;
        frexp(v, &e);
        double q = ldexp(1.0, e - sig), t = v / q, fl = floor(t);
        bool up = t - fl > 0.5 || (t - fl == 0.5 && fmod(fl, 2) != 0);
        return (fl + up) * q;
    };
    double sf = rne(vmax * rne(1.0 / 7, 8), 8);
    sf = fmin(fmax(sf, ldexp(1.0, -48)), 49152.0);
    double e6m2 = rne(sf, 3);
    return rne(1 / e6m2, 8);
}

/* the least bf16 magnitude v with v * rec >= lim, by bisection on the bits */
static uint16_t least_bf16(double rec, double lim)
{
    uint16_t lo = 0, hi = 0x7F7F;
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (bf16_val(mid) * rec >= lim)
            hi = mid;
        else
            lo = (uint16_t)(mid + 1);
    }
    return lo;
}

static uint16_t rnd_sign(uint16_t h) { return (uint16_t)(h | (rnd() & 1) << 15); }

/* 64 bf16 values of a HiF4-specific kind */
static void gen_hif4(uint16_t *x)
{
    uint64_t u = rnd();
    int kind = (int)(u % 4);
    int c = 20 + (int)((u >> 8) % 215); /* the block's exponent field */
    if ((u >> 20) % 8 == 0)
        c = (int)((u >> 24) % 40); /* near 2^-48 * 7 and below: the clamped scale */
    switch (kind) {
    case 0: /* groups of 4 at very different magnitudes */
        for (int g = 0; g < 16; g++) {
            int ge = c - (int)(rnd() % 5);
            for (int i = 0; i < 4; i++)
                x[4 * g + i] = bf((uint32_t)(rnd() & 1), ge - (int)(rnd() % 3), (uint32_t)rnd());
        }
        break;
    case 1: { /* group maxima at the flag thresholds, other elements below */
        x[0] = bf(0, c, (uint32_t)rnd());
        double rec = spec_rec(bf16_val(x[0]));
        uint16_t t2 = least_bf16(rec, 2), t4 = least_bf16(rec, 4);
        for (int g = 0; g < 16; g++) {
            uint64_t v = rnd();
            uint16_t m = (v & 3) == 0 ? t2 : (v & 3) == 1 ? t4 : (v & 3) == 2 ? t2 - 1 : t4 - 1;
            if ((v >> 2) % 5 == 0)
                m = (uint16_t)(m - 0x80); /* a binade lower */
            for (int i = 0; i < 4; i++)
                if (g || i)
                    x[4 * g + i] = rnd_sign((uint16_t)(m - (i == (int)(v >> 8) % 4 ? 0 : rnd() % 0x200)));
        }
        if (bf16_val(x[0]) < bf16_val(t4)) /* keep x[0] the max */
            x[0] = t4;
        break;
    }
    case 2: /* the block max over every significand: ties of BF16(Vmax * C) and of E6M2 */
        for (int i = 0; i < 64; i++)
            x[i] = bf((uint32_t)(rnd() & 1), c - 1 - (int)(rnd() % 6), (uint32_t)rnd());
        x[rnd() % 64] = bf(0, c, (uint32_t)(u >> 32));
        break;
    default: /* small odd multiples of powers of two: element ties at every flag level */
        for (int i = 0; i < 64; i++) {
            uint64_t v = rnd();
            x[i] = rnd_sign(bf16_of(ldexp((double)(1 + 2 * (v % 8)), c - 127 - (int)((v >> 3) % 6))));
        }
        break;
    }
}

/* what the data reached, read from the reference's planes: (E1_8, E1_16)
 * pairs, group maxima at / just below the flag thresholds (V * REC * 2^-E1_8
 * against 2, V8 * REC against 4), element ties t = k + 1/2 (k < 7) at 0, 1
 * and 2 halvings, both scale clamps, NaN blocks */
static long cov_flags[2][2], cov_at[2], cov_below[2], cov_tie[3], cov_lo, cov_hi, cov_nan;

static void coverage(const uint16_t *x, uint32_t w)
{
    if ((w & 0xFF) == 0xFF) {
        cov_nan++;
        return;
    }
    static const double rt[4] = {1.0, 0.80078125, 0.66796875, 0.5703125};
    double rec = ldexp(rt[w & 3], 48 - (int)((w & 0xFF) >> 2));
    cov_lo += (w & 0xFF) == 0;
    cov_hi += (w & 0xFF) == 0xFE;
    for (int g = 0; g < 16; g++) {
        int e8 = (int)(w >> (8 + g / 2) & 1), e16 = (int)(w >> (16 + g) & 1);
        cov_flags[e8][e16]++;
        uint16_t m = 0, m8 = 0;
        for (int i = 0; i < 4; i++)
            m = std::max(m, (uint16_t)(x[4 * g + i] & 0x7FFF));
        for (int i = 0; i < 8; i++)
            m8 = std::max(m8, (uint16_t)(x[8 * (g / 2) + i] & 0x7FFF));
        const uint16_t v[2] = {m, m8};
        const double lim[2] = {e8 ? 4.0 : 2.0, 4.0};
        for (int l = 0; l < 2; l++) {
            cov_at[l] += v[l] && bf16_val(v[l]) * rec >= lim[l] && bf16_val(v[l] - 1) * rec < lim[l];
            cov_below[l] += bf16_val(v[l]) * rec < lim[l] && bf16_val(v[l] + 1) * rec >= lim[l];
        }
        for (int i = 0; i < 4; i++) {
            double t = ldexp(fabs(bf16_val(x[4 * g + i])) * rec, 2 - e8 - e16);
            cov_tie[e8 + e16] += t < 7 && t - floor(t) == 0.5;
        }
    }
}

static long run(const std::vector<uint16_t> &src, size_t rows, size_t cols, long *checked)
{
    const int FMT = BFP_HIF4;
    bfp_plane_sizes sz;
    bfp_plane_sizes_for((bfp_format)FMT, rows, cols, &sz);
    std::vector<uint8_t> rc(sz.codes, 0), rs(sz.scales, 0);
    bfp_planes ref = {rc.data(), rs.data(), NULL, NULL};
    bfp_stats stats;
    if (bfp_quantize_ref((bfp_format)FMT, BFP_DTYPE_BF16, src.data(), rows, cols, NULL, &ref, &stats) !=
        BFP_OK) {
        printf("hif4: reference failed\n");
        return 1;
    }
    for (size_t b = 0; b < rows * cols / 64; b++)
        coverage(&src[64 * b], (uint32_t)rs[4 * b] | (uint32_t)rs[4 * b + 1] << 8 |
                                   (uint32_t)rs[4 * b + 2] << 16 | (uint32_t)rs[4 * b + 3] << 24);
    /* the GPU's planes start as garbage: every byte must be written */
    std::vector<uint8_t> gc(sz.codes + 16, 0xA5), gs(sz.scales + 4, 0xA5);
    unsigned long long nonfinite = 0;
    QParams P;
    /* 16-byte aligned codes and 4-byte aligned scales, as the launcher requires */
    uint8_t *codes = gc.data() + ((16 - (uintptr_t)gc.data() % 16) % 16);
    uint8_t *scales = gs.data() + ((4 - (uintptr_t)gs.data() % 4) % 4);
    emul_qparams_bf16(P, sz, rows, cols, src.data(), codes, scales, NULL, &nonfinite, RM_AWAY);
    if ((uintptr_t)P.src % 16 || !hif4_block_ok<FMT>(P)) {
        printf("hif4: not on the block path\n");
        return 1;
    }
    /* the kernel's warps, lane by lane: every lane stages, then every lane
     * encodes (a partial last warp when nblocks % 32 != 0) */
    size_t nblocks = rows * (cols / 64);
    std::vector<uint4> stage(32 * HIF4_ROW);
    for (size_t base = 0; base < nblocks; base += 32) {
        std::fill(stage.begin(), stage.end(), make_uint4(0xDEADBEEFu, 0xDEADBEEFu, 0xDEADBEEFu, 0xDEADBEEFu));
        for (unsigned lane = 0; lane < 32; lane++)
            hif4_stage_put<FMT>(P, base, nblocks, lane, stage.data());
        for (unsigned lane = 0; lane < 32; lane++)
            hif4_stage_enc<FMT>(P, base, nblocks, lane, stage.data());
    }
    long bad = 0;
    emul_compare_plane("hif4", "codes", rc.data(), P.codes, sz.codes,
                       [](size_t i) { return i / 32; }, src.data(), 64, nblocks, checked, &bad);
    emul_compare_plane("hif4", "scales", rs.data(), P.scales, sz.scales,
                       [](size_t i) { return i / 4; }, src.data(), 64, nblocks, checked, &bad);
    emul_compare_nonfinite("hif4", nonfinite, stats.nonfinite_blocks, &bad);
    return bad;
}

int main()
{
    /* 256 x 256 (4 blocks a row) of each kind of data, then 5 x 640 */
    long checked = 0, bad = 0;
    for (int rep = 0; rep < 24; rep++) {
        size_t rows = rep == 23 ? 5 : 256, cols = rep == 23 ? 640 : 256;
        std::vector<uint16_t> x(rows * cols); /* malloc: 16-byte aligned */
        for (size_t b = 0; b < rows * cols / 64; b++) {
            if (rep % 2 == 0) {
                gen_block(&x[64 * b]);
                gen_block(&x[64 * b + 32]);
            } else {
                gen_hif4(&x[64 * b]);
            }
        }
        bad += run(x, rows, cols, &checked);
    }
    printf("  %-16s %9ld bytes %s\n", "hif4", checked, bad ? "FAILED" : "ok");
    printf("  groups by (E1_8, E1_16): %ld %ld %ld %ld; at / below the thresholds: %ld %ld / %ld %ld;\n"
           "  element ties at 0, 1, 2 halvings: %ld %ld %ld; scale clamped low / high: %ld / %ld; NaN "
           "blocks %ld\n",
           cov_flags[0][0], cov_flags[0][1], cov_flags[1][0], cov_flags[1][1], cov_at[0], cov_at[1],
           cov_below[0], cov_below[1], cov_tie[0], cov_tie[1], cov_tie[2], cov_lo, cov_hi, cov_nan);
    long *all[] = {&cov_flags[0][0], &cov_flags[0][1], &cov_flags[1][0], &cov_flags[1][1], &cov_at[0],
                   &cov_at[1], &cov_below[0], &cov_below[1], &cov_tie[0], &cov_tie[1], &cov_tie[2],
                   &cov_lo, &cov_hi, &cov_nan};
    for (long *c : all)
        if (*c == 0) {
            printf("  coverage: a case above never occurred\n");
            bad++;
        }
    return bad != 0;
}
