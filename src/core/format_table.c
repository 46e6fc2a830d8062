/* format_table.c - the format table: one row per format, lookups, plane sizes. */
#include "internal.h"

#include <ctype.h>
#include <math.h>

/* Reference functions of each family. */
#define FNS_MX .quantize = bfp_mx_quantize_ref, .dequantize_row = bfp_mx_dequantize_row_ref, \
               .block_is_bad = bfp_mx_block_is_bad
#define FNS_MX_PLUS .quantize = bfp_mxplus_quantize_ref, \
                    .dequantize_row = bfp_mxplus_dequantize_row_ref, \
                    .block_is_bad = bfp_mxplus_block_is_bad
#define FNS_MX_PP FNS_MX_PLUS
#define FNS_NVFP4 .quantize = bfp_nvfp4_quantize_ref, \
                  .dequantize_row = bfp_nvfp4_dequantize_row_ref, \
                  .block_is_bad = bfp_nvfp4_block_is_bad
#define FNS_NVFP4_PLUS FNS_NVFP4
#define FNS_HIF4 .quantize = bfp_hif4_quantize_ref, \
                 .dequantize_row = bfp_hif4_dequantize_row_ref, \
                 .block_is_bad = bfp_hif4_block_is_bad

/* One row of format_defs.h with its family's facts spread after it. */
#define ROW(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, CUDA, DESC) \
    ROW_(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, CUDA, DESC, BFP_FAMILY_##FAM##_FACTS)
#define ROW_(...) ROW_FACTS(__VA_ARGS__)
#define ROW_FACTS(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, CUDA, DESC, FNAME, SCALE, SBYTES, META, \
                  TS, ROUND, OPTS)                                                           \
    [BFP_##ID] = {.info = {.id = BFP_##ID,                                                   \
                           .name = NAME,                                                     \
                           .family = BFP_FAMILY_##FAM,                                       \
                           .block = BLOCK,                                                   \
                           .elem_bits = BFP_GRID_BITS(BFP_GRID_##ELEM),                      \
                           .elem = BFP_ELEM_##ELEM,                                          \
                           .scale = BFP_SCALE_##SCALE,                                       \
                           .scale_bytes = SBYTES,                                            \
                           .meta_bytes = META,                                               \
                           .has_tensor_scale = TS,                                           \
                           .bits_per_value = BFP_GRID_BITS(BFP_GRID_##ELEM) +                \
                                             8.0 * (SBYTES + META) / (BLOCK),                \
                           .max_value = MAXV,                                                \
                           .description = DESC,                                              \
                           .default_rounding = BFP_ROUND_##ROUND,                            \
                           .options = OPTS,                                                  \
                           .matmul = BFP_MM_##MM != BFP_MM_NONE,                             \
                           .cuda = CUDA},                                                    \
                  .elem = &bfp_elem_grid[BFP_ELEM_##ELEM],                                   \
                  .bm_elem = META ? &bfp_ext_grid[BFP_ELEM_##ELEM] : NULL,                   \
                  .mm_kind = BFP_MM_##MM,                                                    \
                  FNS_##FAM},

static const bfp_format_impl table[BFP_FORMAT_ID_LIMIT] = {BFP_FORMAT_LIST(ROW)};

#define TABLE_LEN BFP_FORMAT_ID_LIMIT

/* Ids are 1..BFP_FORMAT_COUNT: in range here, and distinct because a
 * repeated id is a repeated case label, which does not compile. */
#define ID_IN_RANGE(ID, ...)                                                  \
    _Static_assert((int)BFP_##ID >= 1 && (int)BFP_##ID <= (int)BFP_FORMAT_COUNT,             \
                   "format id " #ID " outside 1..BFP_FORMAT_COUNT");
BFP_FORMAT_LIST(ID_IN_RANGE)

static int id_is_listed(int id)
{
    switch (id) {
#define ID_CASE(ID, ...) case BFP_##ID:
        BFP_FORMAT_LIST(ID_CASE)
        return 1;
#undef ID_CASE
    }
    return 0;
}

const bfp_format_impl *bfp_impl_get(bfp_format id)
{
    if ((int)id <= 0 || (int)id >= TABLE_LEN || !id_is_listed((int)id))
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

int bfp_format_accepts(bfp_format fmt, bfp_option opt)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    return impl && opt != 0 && (impl->info.options & (unsigned)opt) == (unsigned)opt;
}

const char *bfp_family_name(bfp_family family)
{
    switch (family) {
#define FAMILY_NAME(FAM) case BFP_FAMILY_##FAM: return FAMILY_NAME_(BFP_FAMILY_##FAM##_FACTS);
#define FAMILY_NAME_(...) FAMILY_NAME_FIRST(__VA_ARGS__)
#define FAMILY_NAME_FIRST(name, ...) name
        BFP_FAMILY_LIST(FAMILY_NAME)
#undef FAMILY_NAME
    }
    return "?";
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
