/* swizzle.c - the 128x4 swizzled scale layout of cuBLASLt / CUTLASS /
 * FlashInfer block-scaled GEMMs, for scale planes of one byte per block.
 *
 * The rows x blocks_per_row scale matrix is padded with zeros to a multiple
 * of 128 rows and 4 columns and cut into 128x4 tiles of 512 bytes, stored
 * row-tile major (all column tiles of rows 0..127 first). Inside a tile,
 * scale (r, c) is at byte (r % 32) * 16 + (r / 32) * 4 + c: the four 32-row
 * slices are interleaved so that 16 consecutive bytes hold rows r, r+32,
 * r+64, r+96, four block-columns each. This is the layout of the cuBLAS
 * documentation ("1D Block Scaling Factors Layout") and of torchao's
 * to_blocked() (torchao/prototype/mx_formats/utils.py). */
#include "bfp.h"

#include <stdint.h>
#include <string.h>

static size_t offset_of(size_t r, size_t c, size_t col_tiles)
{
    return ((r / 128) * col_tiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

size_t bfp_swizzled_scales_size(size_t rows, size_t blocks_per_row)
{
    if (rows == 0 || blocks_per_row == 0)
        return 0;
    size_t row_tiles = rows / 128 + (rows % 128 != 0);
    size_t col_tiles = blocks_per_row / 4 + (blocks_per_row % 4 != 0);
    if (row_tiles > SIZE_MAX / 512 / col_tiles)
        return 0;
    return row_tiles * col_tiles * 512;
}

bfp_status bfp_scales_to_swizzled(const uint8_t *scales, size_t rows, size_t blocks_per_row,
                                  uint8_t *out)
{
    if (!scales || !out)
        return BFP_ERR_ARG;
    size_t total = bfp_swizzled_scales_size(rows, blocks_per_row);
    if (total == 0)
        return BFP_ERR_SHAPE;
    size_t col_tiles = blocks_per_row / 4 + (blocks_per_row % 4 != 0);
    memset(out, 0, total); /* padding rows and columns are zero */
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < blocks_per_row; c++)
            out[offset_of(r, c, col_tiles)] = scales[r * blocks_per_row + c];
    return BFP_OK;
}

bfp_status bfp_scales_from_swizzled(const uint8_t *swizzled, size_t rows,
                                    size_t blocks_per_row, uint8_t *scales)
{
    if (!swizzled || !scales)
        return BFP_ERR_ARG;
    if (bfp_swizzled_scales_size(rows, blocks_per_row) == 0)
        return BFP_ERR_SHAPE;
    size_t col_tiles = blocks_per_row / 4 + (blocks_per_row % 4 != 0);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < blocks_per_row; c++)
            scales[r * blocks_per_row + c] = swizzled[offset_of(r, c, col_tiles)];
    return BFP_OK;
}
