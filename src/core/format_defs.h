/* format_defs.h - every fact about the formats, once, as preprocessor data.
 *
 * Plain C preprocessor, no declarations of its own beyond a few enums and
 * macros, so that C (src/core, src/cpu) and CUDA (src/cuda) read the same
 * rows: the format table (format_table.c), the element grids (minifloat.c,
 * the CPU kernels' constants, the CUDA kernels' constexpr grids), the CPU
 * kernel tables' size, the CUDA launchers and the matmul's format kinds.
 * docs/adding-a-format.md walks through adding a row. */
#ifndef BFP_FORMAT_DEFS_H
#define BFP_FORMAT_DEFS_H

#include "bfp.h"

#include <float.h>

/* ---- element grids (SPEC section 1) -------------------------------------
 * An element code is a sign bit and a magnitude index into a monotonic grid.
 * Fields: kind, bits (code width), mbits (mantissa bits; INT: fraction
 * bits), bias (FLOAT exponent bias), emax (exponent of the largest power of
 * two), max_mag (largest finite magnitude index). */
#define BFP_GK_FLOAT 0
#define BFP_GK_INT 1
#define BFP_GK_EXT 2

#define BFP_GRID_E2M1 BFP_GK_FLOAT, 4, 1, 1, 2, 7
#define BFP_GRID_E1M2 BFP_GK_FLOAT, 4, 2, 1, 0, 7 /* HiF4 "S1P2" */
#define BFP_GRID_E2M3 BFP_GK_FLOAT, 6, 3, 1, 2, 31
#define BFP_GRID_E3M2 BFP_GK_FLOAT, 6, 2, 3, 4, 31
#define BFP_GRID_E4M3 BFP_GK_FLOAT, 8, 3, 7, 8, 0x7E /* 0x7F is NaN */
#define BFP_GRID_E5M2 BFP_GK_FLOAT, 8, 2, 15, 15, 0x7B /* 0x7C Inf, above NaN */
#define BFP_GRID_INT8 BFP_GK_INT, 8, 6, 0, 0, 127 /* k / 64, two's complement */
#define BFP_GRID_INT4 BFP_GK_INT, 4, 2, 0, 0, 7   /* k / 4 */

/* The MX+ block-max grid of an element grid: sign and bits-1 mantissa bits
 * with the exponent fixed at emax, value 2^emax * (1 + i / 2^(bits-1)).
 * Use as BFP_GRID_EXT(BFP_GRID_E2M1). */
#define BFP_GRID_EXT(...) BFP_GRID_EXT_(__VA_ARGS__)
#define BFP_GRID_EXT_(kind, bits, mbits, bias, emax, max_mag) \
    BFP_GK_EXT, bits, (bits) - 1, 0, emax, (1 << ((bits) - 1)) - 1

/* Fields of a grid, for constant expressions: BFP_GRID_BITS(BFP_GRID_E2M1). */
#define BFP_GRID_BITS(...) BFP_GRID_BITS_(__VA_ARGS__)
#define BFP_GRID_BITS_(kind, bits, ...) bits

/* X(ELEM, name, block-max name): every element type. ELEM names the
 * bfp_elem_type (BFP_ELEM_##ELEM) and its grid (BFP_GRID_##ELEM). */
#define BFP_ELEM_LIST(X)         \
    X(E2M1, "e2m1", "e0m3@2")    \
    X(E1M2, "e1m2", "e0m3@0")    \
    X(E2M3, "e2m3", "e0m5@2")    \
    X(E3M2, "e3m2", "e0m5@4")    \
    X(E4M3, "e4m3", "e0m7@8")    \
    X(E5M2, "e5m2", "e0m7@15")   \
    X(INT8, "int8", "u1.7@0")    \
    X(INT4, "int4", "u1.3@0")
#define BFP_ELEM_PLUS_ONE_(...) +1
/* element type ids are 1..count (minifloat.c checks): tables indexed by them */
enum { BFP_ELEM_ID_LIMIT = 1 BFP_ELEM_LIST(BFP_ELEM_PLUS_ONE_) };

/* ---- families ----------------------------------------------------------
 * What a family's algorithm fixes for all its formats, as
 * BFP_FAMILY_<FAMILY>_FACTS: name, scale type (BFP_SCALE_##), scale bytes
 * per block, meta bytes per block, tensor scale (0/1), default rounding
 * (BFP_ROUND_##), the options it accepts (bfp_option bits). SPEC section 2
 * gives the scale modes to MX alone (MX+ and MX++ need FLOOR: the block max
 * must sit at emax); section 3 the tensor-scale opt-out and 2-D tiles to
 * NVFP4; section 5 refuses 2-D for NVFP4+. Rounding modes go everywhere;
 * HiF4 elements round half away by default (section 4). */
#define BFP_FAMILY_MX_FACTS "mx", E8M0, 1, 0, 0, NEAREST_EVEN, \
    (BFP_OPT_ROUNDING | BFP_OPT_SCALE_MODE)
#define BFP_FAMILY_MX_PLUS_FACTS "mx+", E8M0, 1, 1, 0, NEAREST_EVEN, (BFP_OPT_ROUNDING)
#define BFP_FAMILY_MX_PP_FACTS "mx++", E8M0, 1, 1, 0, NEAREST_EVEN, (BFP_OPT_ROUNDING)
#define BFP_FAMILY_NVFP4_FACTS "nvfp4", UE4M3, 1, 0, 1, NEAREST_EVEN, \
    (BFP_OPT_ROUNDING | BFP_OPT_NO_TENSOR_SCALE | BFP_OPT_2D)
#define BFP_FAMILY_NVFP4_PLUS_FACTS "nvfp4+", UE4M3, 1, 1, 1, NEAREST_EVEN, \
    (BFP_OPT_ROUNDING | BFP_OPT_NO_TENSOR_SCALE)
#define BFP_FAMILY_HIF4_FACTS "hif4", HIF4, 4, 0, 0, NEAREST_AWAY, (BFP_OPT_ROUNDING)
/* X(FAMILY): every family */
#define BFP_FAMILY_LIST(X) X(MX) X(MX_PLUS) X(MX_PP) X(NVFP4) X(NVFP4_PLUS) X(HIF4)

/* ---- matmul kinds: how the GPU matmul decodes a weight ------------------- */
#define BFP_MM_NONE (-1) /* no prepacked layout, no GPU matmul */
#define BFP_MM_MX 0
#define BFP_MM_MXPLUS 1
#define BFP_MM_NV 2
#define BFP_MM_NVPLUS 3
#define BFP_MM_HIF4 4
/* bytes per 16x64 tile of the prepacked scale record and of the block-max
 * correction record (0: none) */
#define BFP_MM_SCALE_REC(k) ((k) == BFP_MM_MX || (k) == BFP_MM_MXPLUS ? 32 : 64)
#define BFP_MM_CORR_REC(k) ((k) == BFP_MM_MXPLUS ? 32 : (k) == BFP_MM_NVPLUS ? 64 : 0)

/* ---- the formats ----------------------------------------------------------
 * X(ID, name, FAMILY, ELEM, block, max_value, MM, CUDA, description)
 * ID: bfp_format BFP_##ID (its number is in bfp.h, never renumbered);
 * FAMILY: BFP_FAMILY_##FAMILY; ELEM: BFP_ELEM_##ELEM; max_value: largest
 * finite magnitude; MM: matmul kind (BFP_MM_##MM); CUDA: 1 if src/cuda has
 * quantize/dequantize kernels for it (else the GPU entry points return
 * BFP_ERR_UNSUPPORTED). The CPU kernels pick formats up by family and
 * element type; formats they do not know run on the reference. */
#define BFP_P127 1.7014118346046923e38 /* 2^127, the largest E8M0 scale */

#define BFP_FORMAT_LIST(X)                                                                   \
    X(MXFP4, "mxfp4", MX, E2M1, 32, 6 * BFP_P127, MX, 1, "OCP MX: 32 x E2M1, E8M0 scale")   \
    X(MXFP6_E2M3, "mxfp6_e2m3", MX, E2M3, 32, 7.5 * BFP_P127, NONE, 1,                        \
      "OCP MX: 32 x E2M3, E8M0 scale")                                                      \
    X(MXFP6_E3M2, "mxfp6_e3m2", MX, E3M2, 32, 28 * BFP_P127, NONE, 1,                         \
      "OCP MX: 32 x E3M2, E8M0 scale")                                                      \
    X(MXFP8_E4M3, "mxfp8_e4m3", MX, E4M3, 32, 448 * BFP_P127, NONE, 1,                        \
      "OCP MX: 32 x E4M3, E8M0 scale")                                                      \
    X(MXFP8_E5M2, "mxfp8_e5m2", MX, E5M2, 32, 57344 * BFP_P127, NONE, 1,                      \
      "OCP MX: 32 x E5M2, E8M0 scale")                                                      \
    X(MXINT8, "mxint8", MX, INT8, 32, 127.0 / 64 * BFP_P127, NONE, 1,                         \
      "OCP MX: 32 x INT8 (k/64), E8M0 scale")                                               \
    X(MXINT4, "mxint4", MX, INT4, 32, 7.0 / 4 * BFP_P127, NONE, 1,                            \
      "MX+ paper Table 10: 32 x INT4 (k/4), E8M0 scale")                                    \
    X(NVFP4, "nvfp4", NVFP4, E2M1, 16, 6 * 448.0, NV, 1,                                     \
      "NVIDIA: 16 x E2M1, UE4M3 scale, fp32 tensor scale")                                  \
    X(HIF4, "hif4", HIF4, E1M2, 64, 1.75 * 49152 * 4, HIF4, 1,                               \
      "HiFloat4: 64 x E1M2, UE6M2 + 8 + 16 one-bit exponents")                              \
    X(MXFP4_PLUS, "mxfp4+", MX_PLUS, E2M1, 32, 7.5 * BFP_P127, MXPLUS, 1,                     \
      "MX+: MXFP4, block max stored as E0M3 (index byte)")                                  \
    X(MXFP6_E2M3_PLUS, "mxfp6_e2m3+", MX_PLUS, E2M3, 32, 7.875 * BFP_P127, NONE, 1,           \
      "MX+: MXFP6 E2M3, block max stored as E0M5")                                          \
    X(MXFP6_E3M2_PLUS, "mxfp6_e3m2+", MX_PLUS, E3M2, 32, 31.5 * BFP_P127, NONE, 1,            \
      "MX+: MXFP6 E3M2, block max stored as E0M5")                                          \
    X(MXFP8_E4M3_PLUS, "mxfp8_e4m3+", MX_PLUS, E4M3, 32, 510 * BFP_P127, NONE, 1,             \
      "MX+: MXFP8 E4M3, block max stored as E0M7")                                          \
    X(MXFP8_E5M2_PLUS, "mxfp8_e5m2+", MX_PLUS, E5M2, 32, 65280 * BFP_P127, NONE, 1,           \
      "MX+: MXFP8 E5M2, block max stored as E0M7")                                          \
    X(MXINT8_PLUS, "mxint8+", MX_PLUS, INT8, 32, 255.0 / 128 * BFP_P127, NONE, 1,             \
      "MX+: MXINT8, block max as 1.7 fixed point")                                          \
    X(MXINT4_PLUS, "mxint4+", MX_PLUS, INT4, 32, 15.0 / 8 * BFP_P127, NONE, 1,                \
      "MX+: MXINT4, block max as 1.3 fixed point")                                          \
    X(MXFP4_PP, "mxfp4++", MX_PP, E2M1, 32, 7.5 * BFP_P127, NONE, 1,                          \
      "MX++: MXFP4+ with a separate exponent for the other elements")                       \
    X(MXFP6_E2M3_PP, "mxfp6_e2m3++", MX_PP, E2M3, 32, 7.875 * BFP_P127, NONE, 1,              \
      "MX++: MXFP6 E2M3+ with a separate exponent for the rest")                            \
    X(MXFP6_E3M2_PP, "mxfp6_e3m2++", MX_PP, E3M2, 32, 31.5 * BFP_P127, NONE, 1,               \
      "MX++: MXFP6 E3M2+ with a separate exponent for the rest")                            \
    X(MXFP8_E4M3_PP, "mxfp8_e4m3++", MX_PP, E4M3, 32, 510 * BFP_P127, NONE, 1,                \
      "MX++: MXFP8 E4M3+ with a separate exponent for the rest")                            \
    X(MXFP8_E5M2_PP, "mxfp8_e5m2++", MX_PP, E5M2, 32, 65280 * BFP_P127, NONE, 1,              \
      "MX++: MXFP8 E5M2+ with a separate exponent for the rest")                            \
    X(NVFP4_PLUS, "nvfp4+", NVFP4_PLUS, E2M1, 16, 7.5 * 448.0, NVPLUS, 1,                    \
      "NVFP4 + block max as E0M3 (4-bit index in a meta byte)")

/* Formats in the list (enums: a macro would not expand inside the list's own
 * expansion). Ids are 1..BFP_FORMAT_COUNT, each once (format_table.c proves
 * it at compile time), so BFP_FORMAT_ID_LIMIT sizes every table indexed by
 * id. */
#define BFP_FORMAT_PLUS_ONE_(...) +1
enum { BFP_FORMAT_COUNT = 0 BFP_FORMAT_LIST(BFP_FORMAT_PLUS_ONE_) };
enum { BFP_FORMAT_ID_LIMIT = BFP_FORMAT_COUNT + 1 };

/* Expand x when flag is 1 (for the list's 0/1 columns). */
#define BFP_IF_(flag, x) BFP_IF_##flag(x)
#define BFP_IF_0(x)
#define BFP_IF_1(x) x

/* ---- the NVFP4 tensor scale (SPEC section 3) ------------------------------
 * s_enc = min(fp32(448 * 6 / amax), FLT_MAX) over the finite values, 1 when
 * amax is 0: one fp32 division, the same in every layer. */
#ifdef __CUDACC__
#define BFP_HOST_DEVICE_ __host__ __device__
#else
#define BFP_HOST_DEVICE_
#endif
static inline BFP_HOST_DEVICE_ float bfp_nvfp4_s_enc(float amax)
{
    if (!(amax > 0))
        return 1.0f;
#ifdef __CUDA_ARCH__
    float s = __fdiv_rn(2688.0f, amax);
#else
    float s = 2688.0f / amax; /* 448 (E4M3 max) * 6 (E2M1 max) */
#endif
    return s > FLT_MAX ? FLT_MAX : s;
}

#endif /* BFP_FORMAT_DEFS_H */
