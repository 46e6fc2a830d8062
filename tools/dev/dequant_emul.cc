/* dequant_emul.cc - runs the GPU dequantizer's per-thread decode functions
 * (src/cuda/bfp_cuda_dequant_fast.cuh) on the host, with the CUDA intrinsics
 * emulated by their IEEE meaning, and compares the f32 / bf16 / f16 output with
 * bfp_dequantize_ref: every format, exhaustive scale bytes x random and
 * special code patterns, MX+ meta bytes, NVFP4 tensor scales. It checks the
 * logic of the fast paths (tables, selectors, exponent ranges, fallbacks)
 * on a machine without a GPU; tests/test_cuda.c remains the real check.
 *
 * Built as the ctest test_cuda_dequant_emul when CUDA is enabled, or:
 *   g++ -O2 -std=c++17 -Iinclude -Isrc/core -Isrc/cuda -I/usr/local/cuda/include \
 *       tools/dev/dequant_emul.cc build/libbfp.a -lm -o /tmp/dequant_emul && /tmp/dequant_emul
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
#include "bfp_cuda_launch_dequant.cuh"

using namespace bfpcuda;

/* the GPU's bf16 output of a whole tensor, thread by thread (NU = 1) */
/* dt: the output dtype; out holds rows * cols values of its size */
template <int FMT>
static void emul_bf16(const bfp_const_planes *in, size_t rows, size_t cols, int dt, void *out)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    constexpr bool NV = F.fam == BFP_FAMILY_NVFP4 || F.fam == BFP_FAMILY_NVFP4_PLUS;
    bfp_plane_sizes sz;
    bfp_plane_sizes_for((bfp_format)FMT, rows, cols, &sz);
    DParams P;
    memset(&P, 0, sizeof P);
    P.L.rows = rows;
    P.L.cols = cols;
    P.L.gpr = sz.blocks_per_row * T;
    P.codes = in->codes;
    P.crb = sz.code_row_bytes;
    P.G = sz.blocks_per_row;
    P.scales = in->scales;
    P.meta = in->meta;
    P.tscale = in->tensor_scale;
    float s_enc = NV ? *in->tensor_scale : 1.0f;
    static uint4 nvtab[256];
    if (NV)
        for (unsigned t = 0; t < 256; t++)
            nvtab[t] = nv_bf16_table(t, s_enc);
    for (size_t row = 0; row < rows; row++)
        for (size_t blk = 0; blk < sz.blocks_per_row; blk++) {
            PackT<W> codes[T];
            uint32_t aux = load_aux<FMT>(P, row * P.G + blk);
            int nblk = (int)min(cols - blk * F.block, (size_t)F.block);
            bool bad = false;
            for (int sub = 0; sub < T; sub++) {
                size_t col0 = blk * F.block + (size_t)sub * 8;
                int n = col0 < cols ? (int)min(cols - col0, (size_t)8) : 0;
                size_t off = col0 / 8 * W;
                int nb = n > 0 ? (int)min(P.crb - off, (size_t)W) : 0;
                codes[sub] = nb > 0 ? (PackT<W>)load_codes<W>(P.codes + row * P.crb + off, nb, false) : 0;
                if (MXP)
                    bad |= mxplus_bad<FMT>(codes[sub], aux, true, sub, n, nblk);
            }
            for (int sub = 0; sub < T; sub++) {
                size_t col0 = blk * F.block + (size_t)sub * 8;
                int n = col0 < cols ? (int)min(cols - col0, (size_t)8) : 0;
                size_t e = row * cols + col0;
                if (dt == BFP_DTYPE_BF16) {
                    uint32_t w[4], patch;
                    decode8_bf16<FMT>(codes[sub], aux, true, sub, nblk, s_enc, bad, nvtab, w, nullptr, patch);
                    for (int j = 0; j < n; j++)
                        ((uint16_t *)out)[e + j] = (uint16_t)(w[j / 2] >> (16 * (j & 1)));
                } else {
                    float v[8];
                    decode8<FMT>(codes[sub], aux, true, sub, nblk, s_enc, bad, v);
                    for (int j = 0; j < n; j++) {
                        if (dt == BFP_DTYPE_F32)
                            ((uint32_t *)out)[e + j] = f2u(v[j]);
                        else
                            ((uint16_t *)out)[e + j] = f32_to_f16(v[j]);
                    }
                }
            }
        }
}

/* dequant_flat_kernel's output (bf16, cols a multiple of the block), warp
 * chunk by warp chunk: the loads, the MX+ exchange (__any_sync and
 * group_or done here across the 32 lanes), then each lane's stores; the
 * last chunk is partial when rows * cols / 8 is not a multiple of 32 * FU
 * (flat_fu).
 * out must be 16-byte aligned. */
template <int FMT>
static void emul_flat(const bfp_const_planes *in, size_t rows, size_t cols, int, void *out)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits, FU = flat_fu<FMT>();
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    constexpr bool NV = F.fam == BFP_FAMILY_NVFP4 || F.fam == BFP_FAMILY_NVFP4_PLUS;
    bfp_plane_sizes sz;
    bfp_plane_sizes_for((bfp_format)FMT, rows, cols, &sz);
    DParams P;
    memset(&P, 0, sizeof P);
    P.L.rows = rows;
    P.L.cols = cols;
    P.codes = in->codes;
    P.crb = sz.code_row_bytes;
    P.G = sz.blocks_per_row;
    P.scales = in->scales;
    P.meta = in->meta;
    P.tscale = in->tensor_scale;
    P.dst = (unsigned char *)out;
    P.dt = BFP_DTYPE_BF16;
    float s_enc = NV ? *in->tensor_scale : 1.0f;
    static uint4 nvtab[256];
    static uint16_t nvbm[128 * 8];
    if (NV)
        for (unsigned t = 0; t < 256; t++)
            nvtab[t] = nv_bf16_table(t, s_enc);
    for (unsigned i = 0; i < 128 * 8; i++)
        nvbm[i] = (uint16_t)nv_bm_bf16(i >> 3, i & 7u, s_enc);
    size_t ngroups = rows * (cols / 8);
    const size_t CH = 32 * FU;
    for (size_t base = 0; base < ngroups; base += CH) {
        bool full = base + CH <= ngroups;
        PackT<W> c[32][FU];
        uint32_t a[32][FU], lb[32][FU];
        bool any = false;
        for (unsigned l = 0; l < 32; l++) {
            if (full)
                flat_load<FMT, true>(P, ngroups, base, l, c[l], a[l]);
            else
                flat_load<FMT, false>(P, ngroups, base, l, c[l], a[l]);
            for (int k = 0; k < FU; k++)
                lb[l][k] = 0;
            if (MXP)
                any |= flat_lbad<FMT>(c[l], a[l], l, lb[l]);
        }
        if (any) { /* group_or over the T lanes of each block */
            uint32_t v[32][FU];
            for (unsigned l = 0; l < 32; l++)
                for (int k = 0; k < FU; k++)
                    v[l][k] = flat_lbad_full<FMT>(c[l][k], a[l][k], l, lb[l][k]);
            for (unsigned l = 0; l < 32; l++)
                for (int k = 0; k < FU; k++) {
                    uint32_t o = 0;
                    for (unsigned m = l / T * T; m < l / T * T + T; m++)
                        o |= v[m][k];
                    lb[l][k] = o;
                }
        }
        for (unsigned l = 0; l < 32; l++)
            for (int k = 0; k < FU; k++) {
                size_t g = base + l + 32 * k;
                flat_out<FMT>(P, g, (int)(l % T), full || g < ngroups, c[l][k], a[l][k], lb[l][k], s_enc, nvtab, nvbm);
            }
    }
}

typedef void (*emul_fn)(const bfp_const_planes *, size_t, size_t, int, void *);
static emul_fn fns[23], flat_fns[23];
template <int I> static void reg()
{
    fns[I] = emul_bf16<I>;
    flat_fns[I] = emul_flat<I>;
    if constexpr (I < 22)
        reg<I + 1>();
}

static uint64_t st = 7;
static uint64_t rnd()
{
    uint64_t z = (st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main()
{
    reg<1>();
    int fails = 0;
    for (int fmt = 1; fmt <= 22; fmt++) {
        const bfp_format_info *f = bfp_format_get((bfp_format)fmt);
        /* rows: every scale byte (and meta byte patterns) several times */
        const size_t cols_list[2] = {f->block == 64 ? 128u : 96u, 37};
        long checked = 0, bad = 0;
        for (int ci = 0; ci < 2; ci++) {
            size_t cols = cols_list[ci], rows = 256 * 16 + 3; /* + 3: a partial flat chunk */
            bfp_plane_sizes sz;
            bfp_plane_sizes_for((bfp_format)fmt, rows, cols, &sz);
            std::vector<uint8_t> codes(sz.codes), scales(sz.scales), meta(sz.meta ? sz.meta : 1);
            for (int ts = 0; ts < (f->has_tensor_scale ? 10 : 1); ts++) {
                /* d = sb / s_enc from below 2^-126 to above 2^126 */
                static const float tsv[10] = {1.0f, 3.0e-5f, 1234.5f, 3.0e37f, 448.0f * 6 / 3.1f, 1e-30f,
                                              5.0e-36f, 1.0e-37f, 1.0e-40f, 1.4e-45f};
                float tscale = tsv[ts];
                for (size_t i = 0; i < sz.codes; i++) {
                    uint64_t u = rnd();
                    /* mostly random codes; some rows of small codes, zeros */
                    size_t r = i / sz.code_row_bytes;
                    codes[i] = (r % 5 == 1) ? (uint8_t)(u & 0x11) : (r % 5 == 2) ? 0 : (uint8_t)u;
                }
                for (size_t i = 0; i < sz.scales; i++) {
                    size_t r = i / sz.blocks_per_row;
                    uint64_t u = rnd();
                    scales[i] = (uint8_t)((r + (u & 1)) % 256); /* every byte, HiF4: below */
                }
                if (f->scale_bytes == 4) /* HiF4: scale words, every first byte */
                    for (size_t i = 0; i < sz.scales / 4; i++) {
                        uint32_t wv = (uint32_t)rnd();
                        wv = (wv & 0xFFFFFF00u) | (uint32_t)((i / sz.blocks_per_row) % 256);
                        memcpy(&scales[4 * i], &wv, 4);
                    }
                for (size_t i = 0; i < sz.meta; i++) {
                    uint64_t u = rnd();
                    meta[i] = (u & 3) == 0 ? (uint8_t)(u >> 8) : (uint8_t)((u >> 8) % (f->block == 16 ? 16 : 32));
                    if (f->family == BFP_FAMILY_MX_PP && (u & 12) == 0)
                        meta[i] = (uint8_t)((meta[i] & 0x1F) | ((u >> 20) & 7) << 5);
                }
                bfp_const_planes cp = {codes.data(), scales.data(), sz.meta ? meta.data() : NULL,
                                       f->has_tensor_scale ? &tscale : NULL};
                /* d = 3: bf16 by the flat kernel (whole blocks only) */
                static const bfp_dtype dts[4] = {BFP_DTYPE_BF16, BFP_DTYPE_F32, BFP_DTYPE_F16, BFP_DTYPE_BF16};
                for (int d = 0; d < 4; d++) {
                    if (d == 3 && cols % f->block != 0)
                        continue;
                    size_t es = bfp_dtype_size(dts[d]);
                    std::vector<uint8_t> ref(rows * cols * es);
                    std::vector<uint4> got_v((rows * cols * es + 15) / 16);
                    uint8_t *got = (uint8_t *)got_v.data();
                    if (bfp_dequantize_ref((bfp_format)fmt, &cp, rows, cols, dts[d], ref.data()) != BFP_OK) {
                        printf("%s: ref failed\n", f->name);
                        return 1;
                    }
                    (d == 3 ? flat_fns : fns)[fmt](&cp, rows, cols, dts[d], got);
                    for (size_t i = 0; i < rows * cols; i++) {
                        checked++;
                        if (memcmp(&got[i * es], &ref[i * es], es) != 0) {
                            if (bad < 5)
                                printf("%s %s%s %zux%zu ts=%g: [%zu,%zu] got %x ref %x (scale %02x meta %02x)\n", f->name,
                                       bfp_dtype_name(dts[d]), d == 3 ? " (flat)" : "", rows, cols, (double)tscale, i / cols, i % cols, got[i * es] | got[i * es + 1] << 8, ref[i * es] | ref[i * es + 1] << 8,
                                       f->scale_bytes == 1 ? scales[(i / cols) * sz.blocks_per_row + (i % cols) / f->block] : 0,
                                       sz.meta ? meta[(i / cols) * sz.blocks_per_row + (i % cols) / f->block] : 0);
                            bad++;
                        }
                    }
                }
            }
        }
        printf("  %-16s %9ld values %s\n", f->name, checked, bad ? "FAILED" : "ok");
        fails += bad != 0;
    }
    return fails != 0;
}
