/* quant_emul_nv.cc - runs the GPU's block-per-thread bf16 NVFP4 / NVFP4+
 * quantizer (nv_pair_bf16 in src/cuda/bfp_cuda_qblock_nv.cuh) on the host,
 * its packed bf16x2 compares, PRMTs, directed-rounding products and the
 * E4M3 conversion emulated exactly by that file's and
 * bfp_cuda_quant_bf16.cuh's host branches, and compares codes, scales
 * (planar and swizzled), meta bytes and the non-finite count byte for byte
 * with bfp_quantize_ref. Data:
 *  - gen_block tensors (NaN/Inf, subnormals, huge, tiny, ties, repeated
 *    maxima), with and without tensor scale, odd block counts;
 *  - the same blocks moved to tensor exponents from subnormal to huge, so
 *    that s_enc runs from about 2^-116 to FLT_MAX (the integer-compare path);
 *  - every E2M1 midpoint (and its bf16 neighbours) of every nonzero scale
 *    code, with s_enc a power of two and without tensor scale; NVFP4+ block
 *    maxima on the extended grid's midpoints;
 *  - random s_enc with elements at the bf16 values next to T_k / s_enc, where
 *    the thresholds' one-product check decides.
 * It checks the encoder's logic on a machine without a GPU; tests/test_cuda.c
 * remains the real check.
 *
 * Built as the ctest test_cuda_quant_emul_nv when CUDA is enabled. */
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

static uint16_t bf16_bits(float f) /* truncation: f is bf16-exact where used */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static float bf16_val(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* launch_nv_block_t's grid: nv_block_kernel's pairs, nv_tail_kernel's last
 * block; returns s_enc */
template <int FMT, bool SWZ, bool TS>
static float emulate(const QParams &P, size_t nblocks)
{
    float s, rinv;
    nv_tensor_scale<TS>(P, s, rinv);
    for (size_t p = 0; p < nblocks / 2; p++)
        nv_blocks_bf16<FMT, SWZ, TS, 2>(P, 2 * p, s, rinv);
    if (nblocks & 1)
        nv_blocks_bf16<FMT, SWZ, TS, 1>(P, nblocks - 1, s, rinv);
    return s;
}

template <int FMT>
static long run_fmt(const std::vector<uint16_t> &src, size_t rows, size_t cols, int no_ts, int swz,
                    long *checked)
{
    const bfp_format_info *f = bfp_format_get((bfp_format)FMT);
    bfp_plane_sizes sz;
    bfp_plane_sizes_for((bfp_format)FMT, rows, cols, &sz);
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = no_ts;
    std::vector<uint8_t> rc(sz.codes, 0), rs(sz.scales, 0), rm(sz.meta + 1, 0);
    float ts = 0;
    bfp_planes ref = {rc.data(), rs.data(), sz.meta ? rm.data() : NULL, &ts};
    bfp_stats stats;
    bfp_status st =
        bfp_quantize_ref((bfp_format)FMT, BFP_DTYPE_BF16, src.data(), rows, cols, &o, &ref, &stats);
    if (st != BFP_OK) {
        printf("%s: reference failed\n", f->name);
        return 1;
    }
    std::vector<uint8_t> gc, gs, gm;
    emul_gpu_planes(sz, rows, swz, rs, gc, gs, gm);
    unsigned long long nonfinite = 0;
    float dts = no_ts ? 1.0f : ts; /* what the tensor-scale kernel leaves on the device */
    QParams P;
    emul_qparams_bf16(P, sz, rows, cols, src.data(), gc.data(), gs.data(),
                      sz.meta ? gm.data() : NULL, &nonfinite, RM_RNE);
    P.tscale = &dts;
    P.no_ts = no_ts;
    P.swz = swz;
    P.swz_ncol = (sz.blocks_per_row + 3) / 4;
    if (!nv_block_ok<FMT>(P)) {
        printf("%s: not on the block path\n", f->name);
        return 1;
    }
    /* the launcher's kernels, one thread after another */
    size_t nblocks = rows * (cols / 16);
    float s = 0;
    if (swz)
        s = no_ts ? emulate<FMT, true, false>(P, nblocks) : emulate<FMT, true, true>(P, nblocks);
    else
        s = no_ts ? emulate<FMT, false, false>(P, nblocks) : emulate<FMT, false, true>(P, nblocks);
    long bad = 0;
    char label[96];
    snprintf(label, sizeof label, "%s ts %d swz %d (s_enc %a)", f->name, !no_ts, swz, (double)s);
    const char *plane[3] = {"codes", "scales", "meta"};
    const std::vector<uint8_t> *r3[3] = {&rc, &rs, &rm}, *g3[3] = {&gc, &gs, &gm};
    for (int p = 0; p < 3; p++) /* no input for swizzled scales: their index is no block */
        emul_compare_plane(
            label, plane[p], r3[p]->data(), g3[p]->data(), p == 2 ? sz.meta : r3[p]->size(),
            [&](size_t i) { return p == 0 ? i / 8 : p == 1 && swz ? SIZE_MAX : i; }, src.data(), 16,
            nblocks, checked, &bad);
    emul_compare_nonfinite(f->name, nonfinite, stats.nonfinite_blocks, &bad);
    return bad;
}

struct Tensor {
    std::vector<uint16_t> x;
    size_t rows, cols;
    int ts_modes; /* bit 0: run without tensor scale, bit 1: with */
};

static Tensor gen_tensor(size_t rows, size_t cols, int ts_modes)
{
    Tensor t{std::vector<uint16_t>(rows * cols), rows, cols, ts_modes};
    for (size_t b = 0; b < t.x.size() / 32; b++)
        gen_block(&t.x[b * 32]);
    for (size_t i = t.x.size() / 32 * 32; i < t.x.size(); i++) /* 16-element tail */
        t.x[i] = (uint16_t)rnd();
    return t;
}

/* gen_block data with each block's largest finite exponent moved to about E
 * (and nothing non-finite), so that the tensor's amax, and s_enc, follow E */
static Tensor shifted_tensor(size_t rows, size_t cols, int E)
{
    Tensor t = gen_tensor(rows, cols, 2);
    for (size_t b = 0; b < t.x.size() / 16; b++) {
        uint16_t *x = &t.x[b * 16];
        int emax = 0;
        for (int i = 0; i < 16; i++) {
            if ((x[i] & 0x7F80) == 0x7F80)
                x[i] = (uint16_t)(x[i] & 0x807F); /* NaN / Inf -> a subnormal */
            emax = std::max(emax, (int)(x[i] >> 7 & 0xFF));
        }
        int target = E - (int)(rnd() % 12), sh = target - emax;
        for (int i = 0; i < 16; i++) {
            int e = x[i] >> 7 & 0xFF;
            if (e == 0)
                continue; /* zeros and subnormals stay */
            e = std::min(254, std::max(1, e + sh));
            x[i] = (uint16_t)((x[i] & 0x807F) | e << 7);
        }
    }
    return t;
}

static float e4m3_value(unsigned sc)
{
    return __fmul_rn(__uint_as_float(sc << 20), __uint_as_float(247u << 23));
}

static const float MIDS[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
static long ext_hits, edge_hits; /* how many blocks of each kind were built */

/* Blocks that put elements exactly on every E2M1 midpoint times sb (and the
 * bf16 values next to them) for every nonzero scale code, with t = x * 2^j
 * exact: x = value * 2^-j. The block max 6 sb (or an extended-grid
 * midpoint, for NVFP4+) fixes sb. Element 0 of the tensor is its max A,
 * chosen so that s_enc = 2688 / A = 2^j; without tensor scale j = 0. */
static Tensor midpoint_tensor(int j)
{
    const size_t cols = 64;
    std::vector<uint16_t> x;
    for (int rep = 0; rep < 2; rep++)
        for (unsigned sc = 1; sc <= 0x7E; sc++) {
            float sb = e4m3_value(sc);
            uint16_t blk[16];
            float am = 6.0f * sb;
            if (rep == 1) { /* NVFP4+: the max on an extended-grid midpoint (4.25 + i/2) sb
                             * whose own scale is sb, where one exists */
                unsigned i0 = (unsigned)(rnd() % 7);
                for (unsigned d = 0; d < 7; d++) {
                    float m = __fmul_rn(4.25f + 0.5f * (float)((i0 + d) % 7), sb);
                    float x = ldexpf(m, -j);
                    if (bf16_val(bf16_bits(x)) != x || x > bf16_val(0x7F7F))
                        continue;
                    float tm = j == 0 ? m : __fmul_rn(x, ldexpf(1.0f, j));
                    if (nv_e4m3(nv_div6(tm)) == sc) {
                        am = m;
                        ext_hits++;
                        break;
                    }
                }
            }
            blk[0] = bf16_bits(am);
            for (int i = 1; i < 16; i++) {
                float v = ldexpf(MIDS[(i - 1) % 7] * sb, -j);
                uint16_t h = bf16_bits(v);
                int d = i < 8 ? 0 : (int)(rnd() % 3) - 1; /* exact, or a neighbour */
                h = (uint16_t)(h + d);
                if (bf16_val(h) > am)
                    h = bf16_bits(am);
                blk[i] = (uint16_t)(h | (rnd() & 1) << 15);
            }
            /* shuffle, so that the max sits anywhere */
            for (int i = 15; i > 0; i--)
                std::swap(blk[i], blk[rnd() % (unsigned)(i + 1)]);
            x.insert(x.end(), blk, blk + 16);
        }
    while (x.size() % cols)
        x.push_back(0);
    /* the tensor max A = 2688 * 2^-j = 21 * 2^(7 - j), bf16-exact */
    uint16_t A = bf16_bits(ldexpf(2688.0f, -j));
    float amax = 0;
    for (uint16_t h : x)
        amax = std::max(amax, std::fabs(bf16_val(h)));
    if (amax <= bf16_val(A))
        x[0] = A;
    return Tensor{x, x.size() / cols, cols, j == 0 ? 3 : 2};
}

/* Random s_enc (from a random tensor max A in element 0) and blocks whose
 * elements are the bf16 values around T_k / s_enc for the block's sb */
static Tensor neighbour_tensor()
{
    const size_t cols = 128, rows = 64;
    std::vector<uint16_t> x(rows * cols);
    uint16_t A = (uint16_t)(0x0100 + rnd() % (0x7F00 - 0x0100)); /* normal, finite */
    float s = 2688.0f / bf16_val(A);
    if (!(s <= 3.4028234e38f))
        s = 3.4028234e38f;
    for (size_t b = 0; b < x.size() / 16; b++) {
        uint16_t *blk = &x[b * 16];
        /* block max: a random fraction of A */
        uint16_t am = (uint16_t)(A - rnd() % 0x0600);
        if (am < 0x0100)
            am = A;
        float tm = __fmul_rn(bf16_val(am), s);
        unsigned sc = nv_e4m3(__fdiv_rn(tm, 6.0f));
        float sb = e4m3_value(sc);
        blk[0] = am;
        for (int i = 1; i < 16; i++) {
            float v = MIDS[rnd() % 7] * sb / s;
            if (i == 15) /* NVFP4+: around an extended midpoint */
                v = (4.25f + 0.5f * (float)(rnd() % 7)) * sb / s;
            uint16_t h = (uint16_t)(bf16_bits(v) + (int)(rnd() % 4) - 1);
            if (h > am || h >= 0x7F80)
                h = am;
            blk[i] = (uint16_t)(h | (rnd() & 1) << 15);
        }
        for (int i = 15; i > 0; i--)
            std::swap(blk[i], blk[rnd() % (unsigned)(i + 1)]);
    }
    x[0] = A;
    return Tensor{x, rows, cols, 2};
}

/* Tensors of one row: block 0 holds the tensor max A (so s_enc = fp32(2688 /
 * A)), block 1 an element V with fp32(V s_enc) == T_k although V s_enc !=
 * T_k (from above or below), next to a block max that gives the scale of
 * T_k: the cases where the thresholds' check must round exactly as the
 * reference does. Found by search over A, the scale codes and k. */
static void edge_tensors(std::vector<Tensor> &out, size_t want)
{
    for (uint32_t A = 0x3C00; A < 0x4800 && out.size() < want; A += 1) {
        float s = 2688.0f / bf16_val((uint16_t)A);
        for (unsigned sc = 1; sc <= 0x7E && out.size() < want; sc++) {
            float sb = e4m3_value(sc);
            /* a block max with this scale */
            uint16_t am = bf16_bits(6.0f * sb / s), amx = 0;
            for (int d = -2; d <= 2 && !amx; d++) {
                uint16_t h = (uint16_t)(am + d);
                if (bf16_val(h) <= bf16_val((uint16_t)A) &&
                    nv_e4m3(nv_div6(__fmul_rn(bf16_val(h), s))) == sc)
                    amx = h;
            }
            if (!amx)
                continue;
            for (int k = 0; k < 7; k++) {
                float T = __fmul_rn(MIDS[k], sb);
                uint16_t v0 = bf16_bits(T / s);
                for (int d = -1; d <= 2; d++) {
                    uint16_t v = (uint16_t)(v0 + d);
                    double exact = (double)bf16_val(v) * (double)s;
                    if (__fmul_rn(bf16_val(v), s) != T || exact == (double)T || v > amx)
                        continue;
                    std::vector<uint16_t> x(32, 0);
                    x[0] = (uint16_t)A;
                    x[16] = amx;
                    for (int i = 17; i < 32; i++) { /* V, its neighbours, other midpoints */
                        uint16_t h = bf16_bits(__fmul_rn(MIDS[rnd() % 7], sb) / s);
                        static const int d[4] = {0, 0, -1, 1}; /* (i & 3) = 1, 2, 3: V, V -+ 1 */
                        if ((i & 3) != 0)
                            h = (uint16_t)(v + d[i & 3]);
                        x[i] = (uint16_t)(h | (rnd() & 1) << 15);
                    }
                    for (int i = 17; i < 32; i++)
                        if ((x[i] & 0x7FFF) > amx)
                            x[i] = amx;
                    out.push_back(Tensor{x, 1, 32, 2});
                    edge_hits++;
                }
            }
        }
    }
}

/* nv_div6 against the fp32 division: every float of three binades (r
 * subnormal, 1..2, the top one) and 2^22 random ones; the E4M3 code of the
 * quotient for all, the quotient itself from 2^-123 up */
static int check_div6()
{
    long bad = 0, n = 0;
    auto one = [&](uint32_t u) {
        float a = __uint_as_float(u), q = nv_div6(a), want = a / 6.0f;
        n++;
        if ((u >= (4u << 23) && q != want) || nv_e4m3(q) != nv_e4m3(want)) {
            if (bad++ < 4)
                printf("nv_div6(%a) = %a, want %a\n", (double)a, (double)q, (double)want);
        }
    };
    const uint32_t binades[3] = {4, 127, 254};
    for (uint32_t e : binades)
        for (uint32_t m = 0; m < (1u << 23); m++)
            one(e << 23 | m);
    for (int i = 0; i < (1 << 22); i++)
        one((uint32_t)rnd() % 0x7F800000u);
    printf("  %-34s %9ld values %s\n", "nv_div6", n, bad ? "FAILED" : "ok");
    return bad != 0;
}

template <int FMT>
static int run_all(const std::vector<Tensor> &ts, const char *what)
{
    long checked = 0, bad = 0;
    for (const Tensor &t : ts)
        for (int no_ts = 0; no_ts < 2; no_ts++) {
            if (!(t.ts_modes & (no_ts ? 1 : 2)))
                continue;
            for (int swz = 0; swz < 2; swz++)
                bad += run_fmt<FMT>(t.x, t.rows, t.cols, no_ts, swz, &checked);
        }
    printf("  %-7s %-30s %9ld bytes %s\n", bfp_format_get((bfp_format)FMT)->name, what, checked,
           bad ? "FAILED" : "ok");
    return bad != 0;
}

int main()
{
    std::vector<Tensor> gen, shifted, mids, nbrs;
    /* 256 x 256: two swizzle row tiles; 3 x 96, 3 x 80 (odd block count),
     * 1 x 16: the swizzled layout's padding and the last pair's one block */
    const size_t shapes[4][2] = {{256, 256}, {3, 96}, {3, 80}, {1, 16}};
    for (int s = 0; s < 4; s++)
        for (int rep = 0; rep < (s == 0 ? 4 : 3); rep++)
            gen.push_back(gen_tensor(shapes[s][0], shapes[s][1], 3));
    const int E[] = {0, 1, 2, 3, 6, 10, 20, 40, 60, 90, 110, 127, 140, 170, 200, 230, 250, 254};
    for (int e : E)
        shifted.push_back(shifted_tensor(128, 128, e));
    const int J[] = {0, 1, 5, -3, -20, 40, 100, -100, 120, -115};
    for (int j : J)
        mids.push_back(midpoint_tensor(j));
    for (int i = 0; i < 40; i++)
        nbrs.push_back(neighbour_tensor());
    std::vector<Tensor> edges;
    edge_tensors(edges, 400);
    printf("  built: %ld extended-grid midpoint maxima, %ld rounded-onto-T_k elements\n", ext_hits,
           edge_hits);
    int fails = check_div6();
    fails += run_all<BFP_NVFP4>(gen, "gen_block");
    fails += run_all<BFP_NVFP4_PLUS>(gen, "gen_block");
    fails += run_all<BFP_NVFP4>(shifted, "tensor exponents 0..254");
    fails += run_all<BFP_NVFP4_PLUS>(shifted, "tensor exponents 0..254");
    fails += run_all<BFP_NVFP4>(mids, "midpoints, every scale");
    fails += run_all<BFP_NVFP4_PLUS>(mids, "midpoints, every scale");
    fails += run_all<BFP_NVFP4>(nbrs, "next to T_k / s_enc");
    fails += run_all<BFP_NVFP4_PLUS>(nbrs, "next to T_k / s_enc");
    fails += run_all<BFP_NVFP4>(edges, "fp32(x s_enc) == T_k, inexact");
    fails += run_all<BFP_NVFP4_PLUS>(edges, "fp32(x s_enc) == T_k, inexact");
    if (ext_hits < 100 || edge_hits < 100) {
        printf("too few constructed cases\n");
        fails++;
    }
    return fails != 0;
}
