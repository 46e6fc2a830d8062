/* format_table.c - the format table: one row per format, lookups, plane sizes. */
#include "internal.h"

#include <ctype.h>
#include <math.h>

/* Reference functions of each family. */
#define FNS_MX .quantize = bfp_mx_quantize_ref, .dequantize_row = bfp_mx_dequantize_row_ref, \
               .block_is_bad = bfp_mx_block_is_bad
#define FNS_MXP .quantize = bfp_mxplus_quantize_ref, \
                .dequantize_row = bfp_mxplus_dequantize_row_ref, \
                .block_is_bad = bfp_mxplus_block_is_bad
#define FNS_NV .quantize = bfp_nvfp4_quantize_ref, \
               .dequantize_row = bfp_nvfp4_dequantize_row_ref, \
               .block_is_bad = bfp_nvfp4_block_is_bad
#define FNS_HIF4 .quantize = bfp_hif4_quantize_ref, \
                 .dequantize_row = bfp_hif4_dequantize_row_ref, \
                 .block_is_bad = bfp_hif4_block_is_bad

/* An MX-family row: block 32, E8M0 scale, optional meta byte (MX+). */
#define MX_ROW(ID, NAME, FAM, BITS, ELEM, CODEC, BM, META, MAXV, DESC, FNS)            \
    [ID] = {.info = {ID, NAME, FAM, 32, BITS, ELEM, BFP_SCALE_E8M0, 1, META, 0,       \
                     BITS + (8.0 + 8.0 * META) / 32, MAXV, DESC},                     \
            .elem = &CODEC, .bm_elem = BM, FNS}

#define P127 1.7014118346046923e38 /* 2^127, the largest E8M0 scale */

static const bfp_format_impl table[] = {
    MX_ROW(BFP_MXFP4, "mxfp4", BFP_FAMILY_MX, 4, BFP_ELEM_E2M1, bfp_e2m1, NULL, 0, 6 * P127,
           "OCP MX: 32 x E2M1, E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXFP6_E2M3, "mxfp6_e2m3", BFP_FAMILY_MX, 6, BFP_ELEM_E2M3, bfp_e2m3, NULL, 0, 7.5 * P127,
           "OCP MX: 32 x E2M3, E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXFP6_E3M2, "mxfp6_e3m2", BFP_FAMILY_MX, 6, BFP_ELEM_E3M2, bfp_e3m2, NULL, 0, 28 * P127,
           "OCP MX: 32 x E3M2, E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXFP8_E4M3, "mxfp8_e4m3", BFP_FAMILY_MX, 8, BFP_ELEM_E4M3, bfp_e4m3, NULL, 0, 448 * P127,
           "OCP MX: 32 x E4M3, E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXFP8_E5M2, "mxfp8_e5m2", BFP_FAMILY_MX, 8, BFP_ELEM_E5M2, bfp_e5m2, NULL, 0, 57344 * P127,
           "OCP MX: 32 x E5M2, E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXINT8, "mxint8", BFP_FAMILY_MX, 8, BFP_ELEM_INT8, bfp_int8, NULL, 0, 127.0 / 64 * P127,
           "OCP MX: 32 x INT8 (k/64), E8M0 scale", FNS_MX),
    MX_ROW(BFP_MXINT4, "mxint4", BFP_FAMILY_MX, 4, BFP_ELEM_INT4, bfp_int4, NULL, 0, 7.0 / 4 * P127,
           "MX+ paper Table 10: 32 x INT4 (k/4), E8M0 scale", FNS_MX),
    [BFP_NVFP4] = {.info = {BFP_NVFP4, "nvfp4", BFP_FAMILY_NVFP4, 16, 4, BFP_ELEM_E2M1,
                            BFP_SCALE_UE4M3, 1, 0, 1, 4.5, 6 * 448.0,
                            "NVIDIA: 16 x E2M1, UE4M3 scale, fp32 tensor scale"},
                   .elem = &bfp_e2m1, FNS_NV},
    [BFP_HIF4] = {.info = {BFP_HIF4, "hif4", BFP_FAMILY_HIF4, 64, 4, BFP_ELEM_E1M2,
                           BFP_SCALE_HIF4, 4, 0, 0, 4.5, 1.75 * 49152 * 4,
                           "HiFloat4: 64 x E1M2, UE6M2 + 8 + 16 one-bit exponents"},
                  .elem = &bfp_e1m2, FNS_HIF4},
    MX_ROW(BFP_MXFP4_PLUS, "mxfp4+", BFP_FAMILY_MX_PLUS, 4, BFP_ELEM_E2M1, bfp_e2m1, &bfp_ext_e2m1, 1, 7.5 * P127,
           "MX+: MXFP4, block max stored as E0M3 (index byte)", FNS_MXP),
    MX_ROW(BFP_MXFP6_E2M3_PLUS, "mxfp6_e2m3+", BFP_FAMILY_MX_PLUS, 6, BFP_ELEM_E2M3, bfp_e2m3, &bfp_ext_e2m3, 1,
           7.875 * P127, "MX+: MXFP6 E2M3, block max stored as E0M5", FNS_MXP),
    MX_ROW(BFP_MXFP6_E3M2_PLUS, "mxfp6_e3m2+", BFP_FAMILY_MX_PLUS, 6, BFP_ELEM_E3M2, bfp_e3m2, &bfp_ext_e3m2, 1,
           31.5 * P127, "MX+: MXFP6 E3M2, block max stored as E0M5", FNS_MXP),
    MX_ROW(BFP_MXFP8_E4M3_PLUS, "mxfp8_e4m3+", BFP_FAMILY_MX_PLUS, 8, BFP_ELEM_E4M3, bfp_e4m3, &bfp_ext_e4m3, 1,
           510 * P127, "MX+: MXFP8 E4M3, block max stored as E0M7", FNS_MXP),
    MX_ROW(BFP_MXFP8_E5M2_PLUS, "mxfp8_e5m2+", BFP_FAMILY_MX_PLUS, 8, BFP_ELEM_E5M2, bfp_e5m2, &bfp_ext_e5m2, 1,
           65280 * P127, "MX+: MXFP8 E5M2, block max stored as E0M7", FNS_MXP),
    MX_ROW(BFP_MXINT8_PLUS, "mxint8+", BFP_FAMILY_MX_PLUS, 8, BFP_ELEM_INT8, bfp_int8, &bfp_ext_int8, 1,
           255.0 / 128 * P127, "MX+: MXINT8, block max as 1.7 fixed point", FNS_MXP),
    MX_ROW(BFP_MXINT4_PLUS, "mxint4+", BFP_FAMILY_MX_PLUS, 4, BFP_ELEM_INT4, bfp_int4, &bfp_ext_int4, 1,
           15.0 / 8 * P127, "MX+: MXINT4, block max as 1.3 fixed point", FNS_MXP),
    MX_ROW(BFP_MXFP4_PP, "mxfp4++", BFP_FAMILY_MX_PP, 4, BFP_ELEM_E2M1, bfp_e2m1, &bfp_ext_e2m1, 1, 7.5 * P127,
           "MX++: MXFP4+ with a separate exponent for the other elements", FNS_MXP),
    MX_ROW(BFP_MXFP6_E2M3_PP, "mxfp6_e2m3++", BFP_FAMILY_MX_PP, 6, BFP_ELEM_E2M3, bfp_e2m3, &bfp_ext_e2m3, 1,
           7.875 * P127, "MX++: MXFP6 E2M3+ with a separate exponent for the rest", FNS_MXP),
    MX_ROW(BFP_MXFP6_E3M2_PP, "mxfp6_e3m2++", BFP_FAMILY_MX_PP, 6, BFP_ELEM_E3M2, bfp_e3m2, &bfp_ext_e3m2, 1,
           31.5 * P127, "MX++: MXFP6 E3M2+ with a separate exponent for the rest", FNS_MXP),
    MX_ROW(BFP_MXFP8_E4M3_PP, "mxfp8_e4m3++", BFP_FAMILY_MX_PP, 8, BFP_ELEM_E4M3, bfp_e4m3, &bfp_ext_e4m3, 1,
           510 * P127, "MX++: MXFP8 E4M3+ with a separate exponent for the rest", FNS_MXP),
    MX_ROW(BFP_MXFP8_E5M2_PP, "mxfp8_e5m2++", BFP_FAMILY_MX_PP, 8, BFP_ELEM_E5M2, bfp_e5m2, &bfp_ext_e5m2, 1,
           65280 * P127, "MX++: MXFP8 E5M2+ with a separate exponent for the rest", FNS_MXP),
    [BFP_NVFP4_PLUS] = {.info = {BFP_NVFP4_PLUS, "nvfp4+", BFP_FAMILY_NVFP4_PLUS, 16, 4,
                                 BFP_ELEM_E2M1, BFP_SCALE_UE4M3, 1, 1, 1, 5.0,
                                 7.5 * 448.0,
                                 "NVFP4 + block max as E0M3 (4-bit index in a meta byte)"},
                        .elem = &bfp_e2m1, .bm_elem = &bfp_ext_e2m1, FNS_NV},
};

#define TABLE_LEN ((int)(sizeof table / sizeof table[0]))

#define TABLE_LEN ((int)(sizeof table / sizeof table[0]))

const bfp_format_impl *bfp_impl_get(bfp_format id)
{
    if ((int)id <= 0 || (int)id >= TABLE_LEN || table[id].info.name == NULL)
        return NULL;
    return &table[id];
}

int bfp_format_count(void)
{
    return TABLE_LEN - 1; /* ids start at 1 */
}

const bfp_format_info *bfp_format_at(int i)
{
    const bfp_format_impl *impl = bfp_impl_get((bfp_format)(i + 1));
    return impl ? &impl->info : NULL;
}

const bfp_format_info *bfp_format_get(bfp_format id)
{
    const bfp_format_impl *impl = bfp_impl_get(id);
    return impl ? &impl->info : NULL;
}

bfp_status bfp_format_from_name(const char *name, bfp_format *out)
{
    if (!name || !out)
        return BFP_ERR_FORMAT;
    for (int i = 1; i < TABLE_LEN; i++) {
        const char *a = table[i].info.name, *b = name;
        while (*a && tolower((unsigned char)*b) == *a) {
            a++;
            b++;
        }
        if (*a == 0 && *b == 0) {
            *out = table[i].info.id;
            return BFP_OK;
        }
    }
    return BFP_ERR_FORMAT;
}

const char *bfp_elem_name(bfp_elem_type t)
{
    const bfp_elem_desc *e = bfp_elem_desc_for(t);
    return e ? e->name : "?";
}

const char *bfp_scale_name(bfp_scale_type t)
{
    switch (t) {
    case BFP_SCALE_E8M0: return "e8m0";
    case BFP_SCALE_UE4M3: return "ue4m3";
    case BFP_SCALE_HIF4: return "ue6m2+e1x8+e1x16";
    }
    return "?";
}

const char *bfp_dtype_name(bfp_dtype t)
{
    switch (t) {
    case BFP_DTYPE_F32: return "f32";
    case BFP_DTYPE_BF16: return "bf16";
    case BFP_DTYPE_F16: return "f16";
    }
    return "?";
}

size_t bfp_dtype_size(bfp_dtype t)
{
    return t == BFP_DTYPE_F32 ? 4 : (t == BFP_DTYPE_BF16 || t == BFP_DTYPE_F16) ? 2 : 0;
}

bfp_status bfp_plane_sizes_for(bfp_format fmt, size_t rows, size_t cols,
                               bfp_plane_sizes *out)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    if (!impl)
        return BFP_ERR_FORMAT;
    if (!out)
        return BFP_ERR_ARG;
    const bfp_format_info *f = &impl->info;
    if (rows == 0 || cols == 0 || cols > SIZE_MAX / 8 || rows > SIZE_MAX / cols)
        return BFP_ERR_SHAPE;
    bfp_plane_sizes s;
    s.blocks_per_row = (cols + (size_t)f->block - 1) / (size_t)f->block;
    s.code_row_bytes = (cols * (size_t)f->elem_bits + 7) / 8;
    size_t blocks = rows * s.blocks_per_row; /* <= rows * cols: no overflow */
    if (rows > SIZE_MAX / s.code_row_bytes || blocks > SIZE_MAX / 4)
        return BFP_ERR_SHAPE;
    s.codes = rows * s.code_row_bytes;
    s.scales = blocks * (size_t)f->scale_bytes;
    s.meta = blocks * (size_t)f->meta_bytes;
    s.tensor_scale = f->has_tensor_scale ? 4 : 0;
    *out = s;
    return BFP_OK;
}
