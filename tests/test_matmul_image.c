/* test_matmul_image.c - the packed GPU weight buffer on the host (no GPU
 * needed): bfp_cuda_weight_packed_size's layout, bfp_cuda_weight_pack_host's
 * image (header, prepacked arrays equal to bfp_matmul_prepack's and nothing
 * else, the MX fold exponent, the NVFP4 tensor scale) and the header check
 * the view makes; bfp_matmul_tuning_check's ranges; argument errors. */
#include "bfp.h"
#include "check.h"
#include "matmul_image.h"
#include "prng.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                  BFP_HIF4};
static prng rng = {0xB0F1};

static void test_image(bfp_format f, size_t n, size_t k, double scale)
{
    const char *name = bfp_format_get(f)->name;
    float *x = malloc(n * k * sizeof *x);
    for (size_t i = 0; i < n * k; i++)
        x[i] = (float)((prng_unit(&rng) - 0.5) * scale * (i % 97 == 3 ? 40.0 : 1.0));
    bfp_plane_sizes sz;
    bfp_packed_sizes ps;
    CHECK(bfp_plane_sizes_for(f, n, k, &sz) == BFP_OK, "sizes");
    CHECK(bfp_matmul_packed_sizes(f, n, k, &ps) == BFP_OK, "packed sizes");
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales), *meta = malloc(sz.meta + 1);
    float ts = 0;
    bfp_planes out = {codes, scales, meta, &ts};
    CHECK(bfp_quantize(f, BFP_DTYPE_F32, x, n, k, NULL, &out, NULL) == BFP_OK, "quantize");
    bfp_const_planes c = {codes, scales, meta, &ts};

    size_t bytes = 0;
    CHECK(bfp_cuda_weight_packed_size(f, n, k, &bytes) == BFP_OK, "%s packed size", name);
    bfp_wimg_layout L;
    CHECK(bfp_wimg_layout_get(f, n, k, &L) == BFP_OK && L.total == bytes, "layout");
    /* sections in order, aligned, disjoint, inside the buffer */
    const size_t off[] = {L.codes, L.scales, L.corr};
    const size_t len[] = {ps.codes, ps.scales, ps.corr};
    size_t end = BFP_WIMG_ALIGN;
    for (int i = 0; i < 3; i++) {
        CHECK(off[i] % BFP_WIMG_ALIGN == 0 && off[i] >= end, "%s section %d placed", name, i);
        end = off[i] + len[i];
    }
    CHECK(end <= bytes && bytes % BFP_WIMG_ALIGN == 0, "%s buffer covers its sections", name);
    /* no planar copy (issue #22's memory bound): the header, the prepacked
     * arrays and at most one alignment pad after each of the four */
    CHECK(bytes < ps.codes + ps.scales + ps.corr + 4 * BFP_WIMG_ALIGN,
          "%s buffer holds only the header and the prepacked arrays (%zu bytes)", name, bytes);

    uint8_t *img = malloc(bytes + 1), *pc = malloc(ps.codes), *psc = malloc(ps.scales),
            *pcorr = malloc(ps.corr + 1);
    memset(img, 0xA5, bytes + 1);
    CHECK(bfp_cuda_weight_pack_host(f, &c, n, k, img, bytes - 1) == BFP_ERR_ARG,
          "%s buffer one byte short", name);
    CHECK(bfp_cuda_weight_pack_host(f, &c, n, k, img, bytes) == BFP_OK, "%s pack", name);
    CHECK(img[bytes] == 0xA5, "%s pack writes past its size", name);
    CHECK(bfp_matmul_prepack(f, &c, n, k, pc, psc, ps.corr ? pcorr : NULL) == BFP_OK, "prepack");
    CHECK(memcmp(img + L.codes, pc, ps.codes) == 0 && memcmp(img + L.scales, psc, ps.scales) == 0 &&
              (!ps.corr || memcmp(img + L.corr, pcorr, ps.corr) == 0),
          "%s prepacked sections equal bfp_matmul_prepack's", name);
    /* padding between and after the sections is zero (the image is bytes
     * that can be compared and saved) */
    for (size_t i = BFP_WIMG_ALIGN; i < bytes; i++) {
        int inside = (i >= L.codes && i < L.codes + ps.codes) ||
                     (i >= L.scales && i < L.scales + ps.scales) ||
                     (ps.corr && i >= L.corr && i < L.corr + ps.corr);
        if (!inside && img[i] != 0) {
            CHECK(0, "%s padding byte %zu is %u", name, i, img[i]);
            break;
        }
    }
    /* the image decodes on the host to the reference's values */
    float *dec = malloc(n * k * sizeof *dec), *want = malloc(n * k * sizeof *want);
    CHECK(bfp_cuda_weight_unpack_host(f, n, k, img, bytes, dec) == BFP_OK &&
              bfp_dequantize_ref(f, &c, n, k, BFP_DTYPE_F32, want) == BFP_OK,
          "%s unpack_host", name);
    size_t diff = 0;
    for (size_t i = 0; i < n * k; i++)
        diff += isnan(want[i]) ? !isnan(dec[i]) : memcmp(&dec[i], &want[i], 4) != 0;
    CHECK(diff == 0, "%s unpack_host: %zu values differ from bfp_dequantize_ref's", name, diff);
    CHECK(bfp_cuda_weight_unpack_host(f, n, k, img, bytes - 1, dec) == BFP_ERR_ARG &&
              bfp_cuda_weight_unpack_host(f, n + 1, k, img, bytes * 2, dec) == BFP_ERR_ARG &&
              bfp_cuda_weight_unpack_host(f, n, k, NULL, bytes, dec) == BFP_ERR_ARG &&
              bfp_cuda_weight_unpack_host(f, n, k, img, bytes, NULL) == BFP_ERR_ARG,
          "%s unpack_host refuses a short buffer, another shape, NULL", name);
    free(dec), free(want);
    /* the fold: from the largest finite E8M0 code of the planes (MX, MX+) */
    int want_fold = 0;
    if (f == BFP_MXFP4 || f == BFP_MXFP4_PLUS) {
        unsigned smax = 0;
        for (size_t i = 0; i < sz.scales; i++)
            if (scales[i] != 0xFF && scales[i] > smax)
                smax = scales[i];
        want_fold = smax > 128 ? (int)smax - 128 : 0;
    }
    int fold = -1;
    float hts = 0;
    CHECK(bfp_wimg_header_read(img, f, n, k, bytes, &fold, &hts) == BFP_OK, "%s header", name);
    CHECK(fold == want_fold, "%s fold %d, want %d", name, fold, want_fold);
    CHECK(hts == (sz.tensor_scale ? ts : 1.0f), "%s tensor scale in the header", name);
    if (scale > 1e20)
        CHECK(want_fold > 0 || f != BFP_MXFP4, "huge values give a fold (test's own check)");
    /* the view refuses another weight's header or a short buffer */
    const bfp_format other = f == BFP_MXFP4 ? BFP_MXFP4_PLUS : BFP_MXFP4;
    size_t other_bytes = 0;
    bfp_cuda_weight_packed_size(other, n, k, &other_bytes);
    CHECK(bfp_wimg_header_read(img, f, n, k, bytes - 1, &fold, &hts) == BFP_ERR_ARG &&
              bfp_wimg_header_read(img, f, n + 1, k, bytes * 2, &fold, &hts) == BFP_ERR_ARG &&
              bfp_wimg_header_read(img, f, n, k + 64, bytes * 2, &fold, &hts) == BFP_ERR_ARG &&
              bfp_wimg_header_read(img, other, n, k, other_bytes + bytes, &fold, &hts) ==
                  BFP_ERR_ARG,
          "%s header of another weight refused", name);
    img[1] ^= 1;
    CHECK(bfp_wimg_header_read(img, f, n, k, bytes, &fold, &hts) == BFP_ERR_ARG,
          "%s bad magic refused", name);
    free(img), free(pc), free(psc), free(pcorr);
    free(codes), free(scales), free(meta), free(x);
}

static void test_tuning(void)
{
    bfp_matmul_tuning t = {0};
    CHECK(bfp_matmul_tuning_check(NULL) == BFP_OK && bfp_matmul_tuning_check(&t) == BFP_OK,
          "NULL and {0} are the defaults");
    const bfp_matmul_tuning good = {.ctas_per_sm = 64, .warps_per_sm = 64, .post_max_m = 32,
                                    .wgmma_serial = 1, .gemv_pdl = 2, .wgmma_consumers = 3,
                                    .xq_kernel = 2, .grouped_kernel = 3, .gemv_split = 2,
                                    .wgmma_bn = 128},
                            good2 = {.ctas_per_sm = 1, .warps_per_sm = 1, .post_max_m = -1,
                                     .gemv_pdl = -1,
                                     .wgmma_consumers = 2, .xq_kernel = 1, .grouped_kernel = 1,
                                     .gemv_split = 1, .wgmma_bn = 256},
                            good3 = {.wgmma_bn = 64, .wgmma_serial = 2},
                            good4 = {.wgmma_bn = 256};
    CHECK(bfp_matmul_tuning_check(&good) == BFP_OK && bfp_matmul_tuning_check(&good2) == BFP_OK &&
              bfp_matmul_tuning_check(&good3) == BFP_OK && bfp_matmul_tuning_check(&good4) == BFP_OK,
          "range ends accepted");
    const bfp_matmul_tuning bad[] = {
        {.ctas_per_sm = -1},     {.ctas_per_sm = 65},  {.ctas_per_sm = INT_MAX},
        {.warps_per_sm = -1},    {.warps_per_sm = 65}, {.post_max_m = -2},
        {.post_max_m = 33},      {.wgmma_serial = 3},  {.wgmma_serial = -1},
        {.gemv_pdl = 3},         {.gemv_pdl = -2},     {.wgmma_consumers = 1},
        {.wgmma_consumers = 4},  {.wgmma_consumers = -1}, {.xq_kernel = 3},
        {.xq_kernel = -1},       {.grouped_kernel = 4}, {.grouped_kernel = -1},
        {.gemv_split = 3},       {.gemv_split = -1},   {.wgmma_bn = 32},
        {.wgmma_bn = 192},       {.wgmma_bn = 512},    {.wgmma_bn = -1},
        {.wgmma_bn = 256, .wgmma_consumers = 3}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(bfp_matmul_tuning_check(&bad[i]) == BFP_ERR_ARG, "tuning %zu out of range", i);
}

static void test_errors(void)
{
    size_t bytes = 0;
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP4, 16, 64, NULL) == BFP_ERR_ARG, "NULL bytes");
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP6_E2M3, 16, 64, &bytes) == BFP_ERR_UNSUPPORTED,
          "mxfp6 is not a matmul format");
    CHECK(bfp_cuda_weight_packed_size((bfp_format)99, 16, 64, &bytes) == BFP_ERR_FORMAT, "bad id");
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP4, 0, 64, &bytes) == BFP_ERR_SHAPE, "n = 0");
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP4, (size_t)INT_MAX + 1, 64, &bytes) ==
              BFP_ERR_SHAPE, "n above INT_MAX");
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP4, SIZE_MAX / 2, SIZE_MAX / 2, &bytes) ==
              BFP_ERR_SHAPE, "overflow");
    uint8_t buf[4096];
    uint8_t codes[16 * 32] = {0}, sc[32] = {0};
    bfp_const_planes c = {codes, sc, NULL, NULL};
    CHECK(bfp_cuda_weight_pack_host(BFP_MXFP4, NULL, 16, 64, buf, sizeof buf) == BFP_ERR_ARG,
          "NULL planes");
    CHECK(bfp_cuda_weight_pack_host(BFP_MXFP4, &c, 16, 64, NULL, sizeof buf) == BFP_ERR_ARG,
          "NULL buffer");
    CHECK(bfp_cuda_weight_pack_host(BFP_MXFP4_PLUS, &c, 16, 64, buf, sizeof buf) == BFP_ERR_ARG,
          "MX+ needs meta");
    CHECK(bfp_cuda_weight_pack_host(BFP_NVFP4, &c, 16, 64, buf, sizeof buf) == BFP_ERR_ARG,
          "NVFP4 needs its tensor scale");
    CHECK(bfp_cuda_weight_pack_host(BFP_MXFP4, &c, 16, 64, buf, sizeof buf) == BFP_OK,
          "a small weight packs");
}

int main(void)
{
    static const size_t shapes[][2] = {{16, 64}, {17, 65}, {100, 640}, {33, 1000}, {1, 1}};
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            test_image(fmts[fi], shapes[si][0], shapes[si][1], si == 3 ? 1e30 : 1.0);
    test_tuning();
    test_errors();
    return check_summary("test_matmul_image");
}
