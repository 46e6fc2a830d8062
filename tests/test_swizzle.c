/* test_swizzle.c - the 128x4 swizzled scale layout (cuBLASLt / CUTLASS /
 * torchao to_blocked): sizes, hand-worked offsets, zero padding, round
 * trips, argument errors. */
#include "bfp.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_sizes(void)
{
    CHECK(bfp_swizzled_scales_size(1, 1) == 512, "1x1 pads to one 128x4 tile");
    CHECK(bfp_swizzled_scales_size(128, 4) == 512, "exact tile");
    CHECK(bfp_swizzled_scales_size(129, 4) == 1024, "129 rows: two row tiles");
    CHECK(bfp_swizzled_scales_size(128, 5) == 1024, "5 columns: two column tiles");
    CHECK(bfp_swizzled_scales_size(16384, 512) == 16384 * 512, "16384 x 512: no padding");
    CHECK(bfp_swizzled_scales_size(0, 4) == 0 && bfp_swizzled_scales_size(4, 0) == 0, "zero");
    CHECK(bfp_swizzled_scales_size(SIZE_MAX, SIZE_MAX) == 0, "overflow gives 0");
}

/* Worked by hand from the layout: byte = ((r/128) * ceil(C/4) + c/4) * 512
 * + (r%32) * 16 + ((r%128)/32) * 4 + c%4, for a 130 x 5 scale matrix
 * (2 x 2 tiles, 2048 bytes). */
static void test_worked_offsets(void)
{
    const size_t R = 130, C = 5;
    uint8_t in[130 * 5], out[2048];
    memset(in, 0, sizeof in);
    in[33 * C + 2] = 0x11;  /* tile 0:  1*16 + 1*4 + 2 = 22 */
    in[100 * C + 3] = 0x22; /* tile 0:  4*16 + 3*4 + 3 = 79 */
    in[129 * C + 4] = 0x33; /* tile 3 (row tile 1, col tile 1): 1536 + 1*16 = 1552 */
    in[0 * C + 4] = 0x44;   /* tile 1: 512 */
    in[127 * C + 0] = 0x55; /* tile 0: 31*16 + 3*4 = 508 */
    in[128 * C + 1] = 0x66; /* tile 2: 1024 + 1 = 1025 */
    CHECK(bfp_scales_to_swizzled(in, R, C, out) == BFP_OK, "to swizzled");
    CHECK(out[22] == 0x11, "(33,2) at 22: %02x", out[22]);
    CHECK(out[79] == 0x22, "(100,3) at 79: %02x", out[79]);
    CHECK(out[1552] == 0x33, "(129,4) at 1552: %02x", out[1552]);
    CHECK(out[512] == 0x44, "(0,4) at 512: %02x", out[512]);
    CHECK(out[508] == 0x55, "(127,0) at 508: %02x", out[508]);
    CHECK(out[1025] == 0x66, "(128,1) at 1025: %02x", out[1025]);
    int others = 0;
    for (size_t i = 0; i < sizeof out; i++)
        others += out[i] != 0 && i != 22 && i != 79 && i != 1552 && i != 512 && i != 508 &&
                  i != 1025;
    CHECK(others == 0, "every other byte is 0 (%d are not)", others);
}

/* Random planes: round trip, every real scale lands on a distinct byte and
 * every padding byte is zero. */
static void test_round_trip(size_t R, size_t C)
{
    size_t n = R * C, total = bfp_swizzled_scales_size(R, C);
    uint8_t *in = malloc(n), *sw = malloc(total), *back = malloc(n), *hit = calloc(total, 1);
    uint32_t s = (uint32_t)(R * 2654435761u + C);
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        in[i] = (uint8_t)(1 + (s >> 24) % 255); /* never 0, so padding is visible */
    }
    memset(sw, 0xEE, total);
    CHECK(bfp_scales_to_swizzled(in, R, C, sw) == BFP_OK, "to %zux%zu", R, C);
    CHECK(bfp_scales_from_swizzled(sw, R, C, back) == BFP_OK, "from %zux%zu", R, C);
    CHECK(memcmp(in, back, n) == 0, "round trip %zux%zu", R, C);
    /* mark the real positions through the formula, then check the rest is 0 */
    size_t ct = (C + 3) / 4, dup = 0, pad_nonzero = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            size_t o = ((r / 128) * ct + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
            dup += hit[o]++ != 0;
        }
    for (size_t i = 0; i < total; i++)
        pad_nonzero += !hit[i] && sw[i] != 0;
    CHECK(dup == 0, "%zux%zu: %zu positions hit twice", R, C, dup);
    CHECK(pad_nonzero == 0, "%zux%zu: %zu padding bytes not zero", R, C, pad_nonzero);
    free(in);
    free(sw);
    free(back);
    free(hit);
}

static void test_errors(void)
{
    uint8_t a[512], b[512];
    memset(a, 0, sizeof a);
    CHECK(bfp_scales_to_swizzled(NULL, 1, 1, b) == BFP_ERR_ARG, "null in");
    CHECK(bfp_scales_to_swizzled(a, 1, 1, NULL) == BFP_ERR_ARG, "null out");
    CHECK(bfp_scales_to_swizzled(a, 0, 1, b) == BFP_ERR_SHAPE, "zero rows");
    CHECK(bfp_scales_from_swizzled(NULL, 1, 1, b) == BFP_ERR_ARG, "from null");
    CHECK(bfp_scales_from_swizzled(a, 1, 0, b) == BFP_ERR_SHAPE, "from zero cols");
}

int main(void)
{
    test_sizes();
    test_worked_offsets();
    static const size_t shapes[][2] = {{1, 1}, {1, 33}, {128, 4}, {130, 5}, {3, 1000},
                                       {257, 9}, {512, 128}, {1000, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_round_trip(shapes[i][0], shapes[i][1]);
    test_errors();
    return check_summary("test_swizzle");
}
