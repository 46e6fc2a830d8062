/* test_format_table.c - the format table (src/core/format_defs.h) is the one
 * source every layer sizes its tables by: ids are 1..count with a row each;
 * an id outside it is refused by every entry point and read past no table;
 * every listed id dispatches on the CPU; a format whose kernel entries are
 * missing runs on the reference, bit for bit; the GPU entry points refuse
 * what they have no kernels for; the option rules are SPEC's. */
#include "bfp.h"
#include "check.h"
#include "cpu_internal.h"
#include "format_defs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(BFP_CPU_NFMT == BFP_FORMAT_COUNT + 1, "CPU kernel tables sized by the format list");
_Static_assert(BFP_FORMAT_ID_LIMIT == BFP_FORMAT_COUNT + 1, "ids are 1..count");

#define ROWS 3
#define COLS 70 /* a partial last block for every block size */

typedef struct {
    uint8_t *codes, *scales, *meta;
    float ts;
    bfp_planes p;
    bfp_plane_sizes sz;
} planes;

static void planes_alloc(planes *q, bfp_format fmt)
{
    memset(q, 0, sizeof *q);
    bfp_plane_sizes_for(fmt, ROWS, COLS, &q->sz);
    q->codes = calloc(q->sz.codes + 1, 1);
    q->scales = calloc(q->sz.scales + 1, 1);
    q->meta = calloc(q->sz.meta + 1, 1);
    q->p = (bfp_planes){q->codes, q->scales, q->meta, &q->ts};
}

static void planes_free(planes *q)
{
    free(q->codes), free(q->scales), free(q->meta);
}

static int same_planes(const planes *a, const planes *b)
{
    return !memcmp(a->codes, b->codes, a->sz.codes) && !memcmp(a->scales, b->scales, a->sz.scales) &&
           !memcmp(a->meta, b->meta, a->sz.meta) && !memcmp(&a->ts, &b->ts, 4);
}

static void fill(float *x, size_t n)
{
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * ((s & 15) == 0 ? 300.0f : 3.0f);
    }
}

/* Ids 1..count each have a row whose id is its own; nothing else does. */
static void test_ids(void)
{
    CHECK(bfp_format_count() == BFP_FORMAT_COUNT, "count %d vs the list's %d", bfp_format_count(),
          (int)BFP_FORMAT_COUNT);
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        CHECK(f && (int)f->id == i + 1 && bfp_format_get(f->id) == f, "row %d", i);
        bfp_format back;
        CHECK(f && bfp_format_from_name(f->name, &back) == BFP_OK && back == f->id, "name of %d", i);
        CHECK(f && f->bits_per_value == f->elem_bits + 8.0 * (f->scale_bytes + f->meta_bytes) / f->block,
              "%s bits per value", f ? f->name : "?");
    }
    CHECK(bfp_format_at(-1) == NULL && bfp_format_at(bfp_format_count()) == NULL, "at() past the table");
}

/* Every entry point refuses an id outside the table (and must not index a
 * table with it: the ASan build runs this). */
static void test_unknown_ids(void)
{
    static const int bad[] = {0, -1, BFP_FORMAT_COUNT + 1, BFP_FORMAT_COUNT + 2, 255, 1 << 20};
    float x[64] = {1}, y[64];
    uint8_t buf[256] = {0};
    float ts = 1;
    bfp_planes p = {buf, buf + 64, buf + 128, &ts};
    bfp_const_planes cp = {buf, buf + 64, buf + 128, &ts};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bfp_format f = (bfp_format)bad[i];
        bfp_plane_sizes sz;
        bfp_packed_sizes ps;
        size_t nbad;
        CHECK(bfp_format_get(f) == NULL, "get(%d)", bad[i]);
        CHECK(bfp_plane_sizes_for(f, 1, 32, &sz) == BFP_ERR_FORMAT, "plane sizes %d", bad[i]);
        CHECK(bfp_quantize(f, BFP_DTYPE_F32, x, 1, 32, NULL, &p, NULL) == BFP_ERR_FORMAT, "quantize %d", bad[i]);
        CHECK(bfp_quantize_ref(f, BFP_DTYPE_F32, x, 1, 32, NULL, &p, NULL) == BFP_ERR_FORMAT, "ref %d", bad[i]);
        CHECK(bfp_dequantize(f, &cp, 1, 32, BFP_DTYPE_F32, y) == BFP_ERR_FORMAT, "dequantize %d", bad[i]);
        CHECK(bfp_validate(f, &cp, 1, 32, &nbad, NULL) == BFP_ERR_FORMAT, "validate %d", bad[i]);
        CHECK(bfp_matmul_packed_sizes(f, 16, 64, &ps) == BFP_ERR_FORMAT, "packed sizes %d", bad[i]);
        CHECK(!bfp_matmul_format_supported(f), "matmul %d", bad[i]);
        CHECK(bfp_options_check(f, NULL, NULL, NULL) == BFP_ERR_FORMAT, "check_options %d", bad[i]);
        CHECK(!bfp_format_accepts(f, BFP_OPT_ROUNDING), "accepts %d", bad[i]);
        CHECK(bfp_cuda_quantize(f, BFP_DTYPE_F32, x, 1, 32, NULL, 0, &p, NULL, NULL) != BFP_OK,
              "cuda quantize %d", bad[i]);
        CHECK(bfp_cuda_dequantize(f, &cp, 1, 32, BFP_DTYPE_F32, y, NULL) != BFP_OK,
              "cuda dequantize %d", bad[i]);
    }
}

/* Every listed id goes through the kernel tables of every ISA this CPU
 * has, and through a table with its entries removed (the reference). */
static void test_dispatch(void)
{
    float x[ROWS * COLS];
    fill(x, ROWS * COLS);
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        planes ref, got;
        planes_alloc(&ref, f->id);
        planes_alloc(&got, f->id);
        CHECK(bfp_quantize_ref(f->id, BFP_DTYPE_F32, x, ROWS, COLS, NULL, &ref.p, NULL) == BFP_OK,
              "%s ref", f->name);
        float yref[ROWS * COLS], y[ROWS * COLS];
        bfp_const_planes cref = {ref.codes, ref.scales, ref.meta, &ref.ts};
        CHECK(bfp_dequantize_ref(f->id, &cref, ROWS, COLS, BFP_DTYPE_F32, yref) == BFP_OK, "%s deq", f->name);
        for (int isa = 0; isa <= BFP_ISA_COUNT; isa++) {
            bfp_kernels none;
            const bfp_kernels *k = isa < BFP_ISA_COUNT ? bfp_cpu_kernels_for(isa) : NULL;
            if (isa == BFP_ISA_COUNT) { /* no fast path for this format at all */
                none = *bfp_cpu_kernels_for(BFP_ISA_GENERIC);
                memset(none.quant[f->id], 0, sizeof none.quant[f->id]);
                memset(none.dequant[f->id], 0, sizeof none.dequant[f->id]);
                k = &none;
            }
            if (!k)
                continue;
            memset(got.codes, 0xA5, got.sz.codes);
            CHECK(bfp_cpu_quantize(k, f->id, BFP_DTYPE_F32, x, ROWS, COLS, NULL, &got.p, NULL) == BFP_OK &&
                      same_planes(&got, &ref),
                  "%s through %s: the reference's planes", f->name,
                  isa < BFP_ISA_COUNT ? k->name : "no kernels");
            CHECK(bfp_cpu_dequantize(k, f->id, &cref, ROWS, COLS, BFP_DTYPE_F32, y) == BFP_OK &&
                      !memcmp(y, yref, sizeof y),
                  "%s decoded through %s: the reference's values", f->name,
                  isa < BFP_ISA_COUNT ? k->name : "no kernels");
        }
        /* a row without GPU kernels (CUDA = 0): a clear BFP_ERR_UNSUPPORTED
         * before any device memory is touched */
        if (!f->cuda && bfp_cuda_available())
            CHECK(bfp_cuda_quantize(f->id, BFP_DTYPE_F32, x, ROWS, COLS, NULL, 0, &got.p, NULL, NULL) ==
                          BFP_ERR_UNSUPPORTED &&
                      bfp_cuda_dequantize(f->id, &cref, ROWS, COLS, BFP_DTYPE_F32, y, NULL) ==
                          BFP_ERR_UNSUPPORTED,
                  "%s has no GPU kernels: unsupported", f->name);
        planes_free(&ref);
        planes_free(&got);
    }
}

/* SPEC's option rules, written out here (not read from the table). */
static void test_option_rules(void)
{
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        int mx = f->family == BFP_FAMILY_MX;
        int nv = f->id == BFP_NVFP4, nvp = f->id == BFP_NVFP4_PLUS;
        CHECK(bfp_format_accepts(f->id, BFP_OPT_ROUNDING), "%s: rounding modes", f->name);
        CHECK(bfp_format_accepts(f->id, BFP_OPT_SCALE_MODE) == mx, "%s: scale modes", f->name);
        CHECK(bfp_format_accepts(f->id, BFP_OPT_NO_TENSOR_SCALE) == (nv || nvp), "%s: no ts", f->name);
        CHECK(bfp_format_accepts(f->id, BFP_OPT_2D) == nv, "%s: 2-D (not NVFP4+, SPEC 5)", f->name);
        CHECK(f->default_rounding ==
                  (f->id == BFP_HIF4 ? BFP_ROUND_NEAREST_AWAY : BFP_ROUND_NEAREST_EVEN),
              "%s: default rounding", f->name);
        bfp_options o = {.nvfp4_2d = 1};
        CHECK(bfp_options_check(f->id, &o, NULL, NULL) == (nv ? BFP_OK : BFP_ERR_UNSUPPORTED), "%s: 2d", f->name);
        o = (bfp_options){.scale_mode = BFP_SCALE_RCEIL};
        CHECK(bfp_options_check(f->id, &o, NULL, NULL) == (mx ? BFP_OK : BFP_ERR_UNSUPPORTED), "%s: rceil", f->name);
        o = (bfp_options){.rounding = (bfp_rounding)7};
        CHECK(bfp_options_check(f->id, &o, NULL, NULL) == BFP_ERR_ARG, "%s: bad rounding", f->name);
        int mm = f->id == BFP_MXFP4 || f->id == BFP_MXFP4_PLUS || f->id == BFP_NVFP4 ||
                 f->id == BFP_NVFP4_PLUS || f->id == BFP_HIF4;
        CHECK(f->matmul == mm && bfp_matmul_format_supported(f->id) == mm, "%s: matmul", f->name);
        CHECK(strcmp(bfp_family_name(f->family), "?") != 0, "%s: family name", f->name);
    }
    CHECK(!bfp_format_accepts(BFP_NVFP4, (bfp_option)0), "no option is not an option");
}

int main(void)
{
    test_ids();
    test_unknown_ids();
    test_dispatch();
    test_option_rules();
    return check_summary("test_format_table");
}
