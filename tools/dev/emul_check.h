/* emul_check.h - what the GPU quantizer emulation tests (tools/dev/
 * quant_emul*.cc) share: the planes the GPU writes into, the kernels'
 * parameters for bf16 input, and the byte-for-byte plane comparison (every
 * byte counted, the first differences printed with the bf16 input of their
 * block). */
#ifndef BFP_EMUL_CHECK_H
#define BFP_EMUL_CHECK_H
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bfp.h"

/* The planes the GPU writes, 0xA5 so that every byte must be written;
 * swizzled scales (swz): rs, the reference's, is swizzled in place, and gs
 * starts zeroed where the launcher zeroes it (padding rows or columns). */
static inline void emul_gpu_planes(const bfp_plane_sizes &sz, size_t rows, bool swz,
                                   std::vector<uint8_t> &rs, std::vector<uint8_t> &gc,
                                   std::vector<uint8_t> &gs, std::vector<uint8_t> &gm)
{
    if (swz) {
        std::vector<uint8_t> sw(bfp_swizzled_scales_size(rows, sz.blocks_per_row), 0);
        bfp_scales_to_swizzled(rs.data(), rows, sz.blocks_per_row, sw.data());
        rs = sw;
    }
    gc.assign(sz.codes, 0xA5);
    gs.assign(rs.size(), 0xA5);
    gm.assign(sz.meta + 1, 0xA5);
    if (swz && (rows % 128 || sz.blocks_per_row % 4))
        std::fill(gs.begin(), gs.end(), 0); /* the launcher's memset */
}

/* The quantizer parameters (QParams) of a bf16 tensor of whole rows of
 * vectors, writing codes, scales and meta (NULL: none) in the plane layout
 * of sz; the caller sets the rest. */
template <class Q>
static inline void emul_qparams_bf16(Q &P, const bfp_plane_sizes &sz, size_t rows, size_t cols,
                                     const uint16_t *src, uint8_t *codes, uint8_t *scales,
                                     uint8_t *meta, unsigned long long *nonfinite, int mode)
{
    memset(&P, 0, sizeof P);
    P.L.rows = rows;
    P.L.cols = cols;
    P.src = (const unsigned char *)src;
    P.dt = BFP_DTYPE_BF16;
    P.vec_in = P.vec_out = true;
    P.codes = codes;
    P.crb = sz.code_row_bytes;
    P.G = sz.blocks_per_row;
    P.scales = scales;
    P.meta = meta;
    P.nonfinite = nonfinite;
    P.mode = (decltype(P.mode))mode;
}

/* Compares n bytes of one plane; *bad counts differences over all planes of
 * a run (the first 6 are printed, after label). block_of(i) is the block of
 * byte i, or SIZE_MAX to print no input; a block is block_elems values of
 * src, and there are nblocks. */
template <class BlockOf>
static inline void emul_compare_plane(const char *label, const char *plane, const uint8_t *ref,
                                      const uint8_t *got, size_t n, BlockOf block_of,
                                      const uint16_t *src, int block_elems, size_t nblocks,
                                      long *checked, long *bad)
{
    for (size_t i = 0; i < n; i++) {
        (*checked)++;
        if (ref[i] == got[i])
            continue;
        if (*bad < 6) {
            size_t blk = block_of(i);
            printf("%s: %s[%zu] got %02x ref %02x", label, plane, i, got[i], ref[i]);
            if (blk < nblocks) {
                printf("  block %zu:", blk);
                for (int j = 0; j < block_elems; j++)
                    printf(" %04x", src[blk * block_elems + j]);
            }
            printf("\n");
        }
        (*bad)++;
    }
}

static inline void emul_compare_nonfinite(const char *name, unsigned long long got, size_t ref,
                                          long *bad)
{
    if (got != ref) {
        printf("%s: non-finite count %llu, ref %zu\n", name, got, ref);
        (*bad)++;
    }
}

#endif
