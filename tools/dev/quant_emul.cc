/* quant_emul.cc - runs the GPU's block-per-thread bf16 quantizer
 * (block_thread and mx_block_bf16 in src/cuda/bfp_cuda_qblock_mx*.cuh, with the bf16x2 encoders
 * of bfp_cuda_quant_bf16.cuh) on the host, the packed bf16x2 and PRMT
 * instructions emulated exactly by those files' host branches, and compares
 * codes, scales, meta bytes and the non-finite count byte for byte with
 * bfp_quantize_ref: every format the block path takes (MX and MX+, FLOAT and
 * INT grids; MX++ through mxpp_block_bf16 of bfp_cuda_qblock_mxpp.cuh),
 * random blocks over the whole bf16 range with outliers, ties on the grids, repeated maxima, NaN, +-Inf, -0, subnormals, all-zero blocks,
 * huge and tiny blocks; for MX++ a second max 0..11 binades below the max,
 * tiny blocks near the flush limit, a power-of-two or repeated second max,
 * grid ties at the NBM scale; every MX scale mode; planar and swizzled scales.
 * It checks the encoders' logic on a machine without a GPU;
 * tests/test_cuda.c remains the real check.
 *
 * Built as the ctest test_cuda_quant_emul when CUDA is enabled, or:
 *   g++ -O2 -std=c++17 -Iinclude -Isrc/core -Isrc/cuda -I/usr/local/cuda/include \
 *       tools/dev/quant_emul.cc build/libbfp.a -lm -o /tmp/quant_emul && /tmp/quant_emul
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_host_stubs.h"
#include "emul_gen.h"
#include "emul_check.h"
#include "bfp_cuda_launch_quant.cuh"

using namespace bfpcuda;

static long pp_delta[8], pp_tiny; /* MX++ blocks by delta; with nbm < -127 */

template <int FMT>
static long run_fmt(const std::vector<uint16_t> &src, size_t rows, size_t cols, int smode, int swz,
                    long *checked)
{
    const bfp_format_info *f = bfp_format_get((bfp_format)FMT);
    bfp_plane_sizes sz;
    bfp_plane_sizes_for((bfp_format)FMT, rows, cols, &sz);
    bfp_options o;
    bfp_options_init(&o);
    o.scale_mode = (bfp_scale_mode)smode;
    std::vector<uint8_t> rc(sz.codes, 0), rs(sz.scales, 0), rm(sz.meta + 1, 0);
    bfp_planes ref = {rc.data(), rs.data(), sz.meta ? rm.data() : NULL, NULL};
    bfp_stats stats;
    if (bfp_quantize_ref((bfp_format)FMT, BFP_DTYPE_BF16, src.data(), rows, cols, &o, &ref, &stats) !=
        BFP_OK) {
        printf("%s: reference failed\n", f->name);
        return 1;
    }
    std::vector<uint8_t> gc, gs, gm;
    emul_gpu_planes(sz, rows, swz, rs, gc, gs, gm);
    unsigned long long nonfinite = 0;
    QParams P;
    emul_qparams_bf16(P, sz, rows, cols, src.data(), gc.data(), gs.data(),
                      sz.meta ? gm.data() : NULL, &nonfinite, RM_RNE);
    P.scale_mode = smode ? smode : BFP_SCALE_FLOOR; /* resolved, as bfp_cuda_quantize passes it */
    P.swz = swz;
    P.swz_ncol = (sz.blocks_per_row + 3) / 4;
    size_t nblocks = rows * (cols / 32);
    if (!mx_block_ok<FMT>(P)) {
        printf("%s: not on the block path\n", f->name);
        return 1;
    }
    /* threads of a grid smaller than the launch's, so that the loop and,
     * with two blocks per thread, an odd tail run too */
    const size_t stride = nblocks > 8 ? nblocks / 3 + 1 : 1;
    for (size_t i = 0; i < stride; i++)
        block_thread<FMT>(P, i, stride, nblocks);
    if (f->family == BFP_FAMILY_MX_PP) /* what the MX++ data reached */
        for (size_t b = 0; b < sz.scales && !swz; b++)
            if (rs[b] != 0x00 && rs[b] != 0xFF) {
                pp_delta[rm[b] >> 5]++;
                pp_tiny += (int)rs[b] - 127 - (rm[b] >> 5) < -127;
            }
    long bad = 0;
    char label[64];
    snprintf(label, sizeof label, "%s mode %d swz %d", f->name, smode, swz);
    const char *plane[3] = {"codes", "scales", "meta"};
    const std::vector<uint8_t> *r3[3] = {&rc, &rs, &rm}, *g3[3] = {&gc, &gs, &gm};
    for (int p = 0; p < 3; p++) /* no input for swizzled scales: their index is no block */
        emul_compare_plane(
            label, plane[p], r3[p]->data(), g3[p]->data(), p == 2 ? sz.meta : r3[p]->size(),
            [&](size_t i) { return p == 0 ? i * 8 / f->elem_bits / 32 : p == 1 && swz ? SIZE_MAX : i; },
            src.data(), 32, nblocks, checked, &bad);
    emul_compare_nonfinite(f->name, nonfinite, stats.nonfinite_blocks, &bad);
    return bad;
}

/* bm_mag (the MX+ block max's index, also used by mxplus_body for f32 / f16
 * input and every rounding mode) against the float encoder enc_mag on the
 * extended grid; fp32 block maxima over the unflushed range, ties included */
template <int ELEM, int MODE>
static long check_bm_mag()
{
    constexpr int EMAX = grid_of(ELEM).emax;
    long bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint64_t v = rnd();
        int fl = EMAX - 126 + (int)(v % (uint64_t)(254 - EMAX));
        uint32_t man = (uint32_t)(v >> 16) & 0x7FFFFFu;
        if (i % 4 == 1)
            man &= 0x7F0000u; /* a bf16 max */
        if (i % 4 == 2)
            man = (man & ~0xFFFFu) | 0x8000u * (uint32_t)(v >> 60 & 1); /* ties below 7 bits */
        uint32_t am = (uint32_t)(fl + 127) << 23 | man, r = (uint32_t)(v >> 32);
        if (i % 8 == 3)
            r = 0;
        int se = fl - EMAX;
        float x = __fmul_rn(u2f(am), pow2f(-se));
        uint32_t want = (uint32_t)enc_mag<ELEM, true, MODE>(x, r, true), got = bm_mag<ELEM, MODE>(am, r);
        if (got != want && bad++ < 4)
            printf("bm_mag<%d, %d>(%08x, %08x) = %u, enc_mag %u\n", ELEM, MODE, am, r, got, want);
    }
    return bad;
}

template <int ELEM>
static long check_bm_modes()
{
    return check_bm_mag<ELEM, RM_RNE>() + check_bm_mag<ELEM, RM_AWAY>() + check_bm_mag<ELEM, RM_RZ>() +
           check_bm_mag<ELEM, RM_SR>();
}

/* A block for MX++'s second exponent: a max and a second max d binades
 * below it (d up to 11: across the clamp at se - 7), the rest below that;
 * kinds: any exponent; tiny (the max's exponent field 0..29, so se near
 * the flush limit -127 and nbm down to -133, subnormals among the rest);
 * the second max a power of two (the edge of its binade); few mantissa
 * bits (ties on the grid at scale 2^nbm); the second max repeated. */
static void gen_block_pp(uint16_t *x)
{
    uint64_t u = rnd();
    int kind = (int)(u % 5);
    int c = kind == 1 ? (int)((u >> 8) % 30) : 1 + (int)((u >> 8) % 254);
    int d = (int)((u >> 16) % 12), spread = 1 + (int)((u >> 24) % 6);
    for (int i = 0; i < 32; i++) {
        uint64_t v = rnd();
        x[i] = bf((uint32_t)(v & 1), c - d - 1 - (int)((v >> 1) % (uint64_t)spread), (uint32_t)(v >> 8));
    }
    int i1 = (int)(rnd() % 32), i2 = (i1 + 1 + (int)(rnd() % 31)) % 32;
    uint64_t v = rnd();
    x[i1] = bf((uint32_t)(v & 1), c, (uint32_t)(v >> 8));
    x[i2] = bf((uint32_t)(v >> 1 & 1), c - d, kind == 2 ? 0 : (uint32_t)(v >> 16));
    if (kind == 3) {
        static const uint16_t masks[4] = {0xFFC0, 0xFFE0, 0xFFF0, 0xFFF8};
        for (int i = 0; i < 32; i++)
            x[i] &= masks[(v >> 24) % 4];
    }
    int i3 = (i1 + 1 + (int)(rnd() % 31)) % 32; /* not the max; maybe i2 itself */
    if (kind == 4)
        x[i3] = (uint16_t)(x[i2] ^ (v >> 2 & 1) << 15);
}

typedef long (*fmt_fn)(const std::vector<uint16_t> &, size_t, size_t, int, int, long *);
#define FMT_FN(id) {id, run_fmt<id>}
static const struct {
    int id;
    fmt_fn fn;
} fmts[] = {FMT_FN(BFP_MXFP4),           FMT_FN(BFP_MXFP6_E2M3),      FMT_FN(BFP_MXFP6_E3M2),
            FMT_FN(BFP_MXFP8_E4M3),      FMT_FN(BFP_MXFP8_E5M2),      FMT_FN(BFP_MXINT8),
            FMT_FN(BFP_MXINT4),          FMT_FN(BFP_MXFP4_PLUS),      FMT_FN(BFP_MXFP6_E2M3_PLUS),
            FMT_FN(BFP_MXFP6_E3M2_PLUS), FMT_FN(BFP_MXFP8_E4M3_PLUS), FMT_FN(BFP_MXFP8_E5M2_PLUS),
            FMT_FN(BFP_MXINT8_PLUS),     FMT_FN(BFP_MXINT4_PLUS),     FMT_FN(BFP_MXFP4_PP),
            FMT_FN(BFP_MXFP6_E2M3_PP),   FMT_FN(BFP_MXFP6_E3M2_PP),   FMT_FN(BFP_MXFP8_E4M3_PP),
            FMT_FN(BFP_MXFP8_E5M2_PP)};

int main()
{
    /* 256 rows x 8 blocks (two swizzle tiles), then 3 x 96 (padding of the
     * swizzled layout); emul_gen.h's blocks, then MX++'s (gen_block_pp) */
    const size_t shapes[2][2] = {{256, 256}, {3, 96}};
    std::vector<std::vector<uint16_t>> data;
    std::vector<int> shape_of;
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < 2; s++)
            for (int rep = 0; rep < (s == 0 ? 4 - 2 * g : 1); rep++) {
                std::vector<uint16_t> x(shapes[s][0] * shapes[s][1]);
                for (size_t b = 0; b < x.size() / 32; b++)
                    (g ? gen_block_pp : gen_block)(&x[b * 32]);
                data.push_back(x);
                shape_of.push_back(s);
            }
    int fails = 0;
    long bbad = check_bm_modes<BFP_ELEM_E2M1>() + check_bm_modes<BFP_ELEM_E2M3>() +
                check_bm_modes<BFP_ELEM_E3M2>() + check_bm_modes<BFP_ELEM_E4M3>() +
                check_bm_modes<BFP_ELEM_E5M2>() + check_bm_modes<BFP_ELEM_INT8>() +
                check_bm_modes<BFP_ELEM_INT4>();
    printf("  %-16s %9d maxima %s\n", "bm_mag", 7 * 4 * 200000, bbad ? "FAILED" : "ok");
    fails += bbad != 0;
    for (const auto &fm : fmts) {
        const bfp_format_info *f = bfp_format_get((bfp_format)fm.id);
        bool plus = f->family != BFP_FAMILY_MX;
        long checked = 0, bad = 0;
        memset(pp_delta, 0, sizeof pp_delta);
        pp_tiny = 0;
        for (size_t d = 0; d < data.size(); d++) {
            size_t rows = shapes[shape_of[d]][0], cols = shapes[shape_of[d]][1];
            for (int smode = 0; smode < (plus ? 1 : 4); smode++) /* MX+, MX++: FLOOR only */
                for (int swz = 0; swz < 2; swz++)
                    bad += fm.fn(data[d], rows, cols, smode, swz, &checked);
        }
        printf("  %-16s %9ld bytes %s", f->name, checked, bad ? "FAILED" : "ok");
        if (f->family == BFP_FAMILY_MX_PP) {
            printf("  (blocks by delta:");
            for (int i = 0; i < 8; i++)
                printf(" %ld", pp_delta[i]);
            printf("; nbm < -127: %ld)", pp_tiny);
        }
        printf("\n");
        fails += bad != 0;
    }
    return fails != 0;
}
