/* layouts.c - other layouts of the planes, to planar and back, so that
 * bfp_verify() can compare what another implementation wrote:
 *   ggml / GGUF blocks: block_mxfp4 and block_nvfp4 (ggml-common.h), with
 *     ggml's nibble order (element j low, j + half high, per (sub-)block);
 *   the HiF4 golden files (golden_ea / golden_eb / golden_ec) -> scale words.
 * The 128x4 swizzled scale layout lives in swizzle.c. */
#include "internal.h"

/* ggml block geometry: elements per block, sub-block (one scale byte each),
 * and bytes per block (the scale bytes first, then the packed nibbles). */
typedef struct {
    size_t block, sub, nscales, bytes;
} ggml_geom;

static int ggml_geom_for(bfp_format fmt, ggml_geom *g)
{
    switch (fmt) {
    case BFP_MXFP4: /* uint8_t e; uint8_t qs[16]; */
        *g = (ggml_geom){32, 32, 1, 17};
        return 1;
    case BFP_NVFP4: /* uint8_t d[4]; uint8_t qs[32]; */
        *g = (ggml_geom){64, 16, 4, 36};
        return 1;
    default:
        return 0;
    }
}

bfp_status bfp_ggml_size(bfp_format fmt, size_t rows, size_t cols, size_t *bytes)
{
    ggml_geom g;
    if (!bfp_format_get(fmt))
        return BFP_ERR_FORMAT;
    if (!ggml_geom_for(fmt, &g))
        return BFP_ERR_UNSUPPORTED;
    if (!bytes)
        return BFP_ERR_ARG;
    if (rows == 0 || cols == 0 || cols % g.block != 0)
        return BFP_ERR_SHAPE;
    size_t nb = cols / g.block;
    if (rows > SIZE_MAX / nb || rows * nb > SIZE_MAX / g.bytes)
        return BFP_ERR_SHAPE;
    *bytes = rows * nb * g.bytes;
    return BFP_OK;
}

/* Check arguments shared by both directions; fills g and sz. */
static bfp_status ggml_check(bfp_format fmt, size_t rows, size_t cols, ggml_geom *g,
                             bfp_plane_sizes *sz)
{
    size_t bytes;
    bfp_status st = bfp_ggml_size(fmt, rows, cols, &bytes);
    if (st != BFP_OK)
        return st;
    ggml_geom_for(fmt, g);
    return bfp_plane_sizes_for(fmt, rows, cols, sz);
}

bfp_status bfp_ggml_to_planar(bfp_format fmt, const uint8_t *blocks, size_t rows,
                              size_t cols, const bfp_planes *out)
{
    ggml_geom g = {0}; /* set by ggml_check; zero keeps gcc -O3 from guessing */
    bfp_plane_sizes sz;
    bfp_status st = ggml_check(fmt, rows, cols, &g, &sz);
    if (st != BFP_OK)
        return st;
    if (!blocks || !out || !out->codes || !out->scales)
        return BFP_ERR_ARG;
    const size_t nb = cols / g.block, half = g.sub / 2;
    for (size_t r = 0; r < rows; r++) {
        uint8_t *codes = out->codes + r * sz.code_row_bytes;
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = blocks + (r * nb + b) * g.bytes;
            const uint8_t *qs = blk + g.nscales;
            for (size_t s = 0; s < g.nscales; s++) {
                size_t col0 = b * g.block + s * g.sub;
                out->scales[r * sz.blocks_per_row + col0 / g.sub] = blk[s];
                for (size_t j = 0; j < half; j++) {
                    uint8_t q = qs[s * half + j];
                    bfp_put_code(codes, col0 + j, 4, q & 0x0Fu);
                    bfp_put_code(codes, col0 + j + half, 4, q >> 4);
                }
            }
        }
    }
    return BFP_OK;
}

bfp_status bfp_planar_to_ggml(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                              size_t cols, uint8_t *blocks)
{
    ggml_geom g = {0}; /* set by ggml_check; zero keeps gcc -O3 from guessing */
    bfp_plane_sizes sz;
    bfp_status st = ggml_check(fmt, rows, cols, &g, &sz);
    if (st != BFP_OK)
        return st;
    if (!blocks || !in || !in->codes || !in->scales)
        return BFP_ERR_ARG;
    const size_t nb = cols / g.block, half = g.sub / 2;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *codes = in->codes + r * sz.code_row_bytes;
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk = blocks + (r * nb + b) * g.bytes;
            uint8_t *qs = blk + g.nscales;
            for (size_t s = 0; s < g.nscales; s++) {
                size_t col0 = b * g.block + s * g.sub;
                blk[s] = in->scales[r * sz.blocks_per_row + col0 / g.sub];
                for (size_t j = 0; j < half; j++)
                    qs[s * half + j] =
                        (uint8_t)(bfp_get_code(codes, col0 + j, 4) |
                                  bfp_get_code(codes, col0 + j + half, 4) << 4);
            }
        }
    }
    return BFP_OK;
}

bfp_status bfp_hif4_golden_to_scales(const uint8_t *ea, const uint8_t *eb,
                                     const uint8_t *ec, size_t nblocks, uint8_t *scales)
{
    if (nblocks && (!ea || !eb || !ec || !scales))
        return BFP_ERR_ARG;
    for (size_t b = 0; b < nblocks; b++) {
        scales[4 * b] = ea[b];
        scales[4 * b + 1] = eb[b];
        scales[4 * b + 2] = ec[2 * b];
        scales[4 * b + 3] = ec[2 * b + 1];
    }
    return BFP_OK;
}
