/* bfp_cuda_common.cuh - device helpers shared by the quantize and dequantize
 * kernels: the format table as compile-time constants, exact element
 * rounding by integer / power-of-two tricks, the stochastic-rounding bits,
 * loads and stores of 8-element groups, the 128x4 scale swizzle.
 *
 * Exactness: the reference (src/core) decides every rounding by comparing
 * the input with grid points times the scale in exact arithmetic. Here a
 * power-of-two scale is applied with one or two fp32 multiplications, which
 * are exact unless the result underflows below 2^-126 (then it is far below
 * half the smallest grid step, so only stochastic rounding with r == 0 can
 * tell; round_q() handles that case). Every fp32 operation is an explicit
 * _rn/_rz intrinsic so that no FMA contraction can change a result. */
#ifndef BFP_CUDA_COMMON_CUH
#define BFP_CUDA_COMMON_CUH

#include "bfp.h"
#include "format_defs.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace bfpcuda {

/* ---- format table as constants (src/core/format_defs.h) ---------------- */

enum { GK_FLOAT = BFP_GK_FLOAT, GK_INT = BFP_GK_INT, GK_EXT = BFP_GK_EXT, GK_NONE = -1 };

/* An element grid (see minifloat.h): magnitude index 0..maxidx. FLOAT: m
 * mantissa bits, exponent bias; INT: value i / 2^m; EXT (MX+ block max):
 * value 2^emax * (1 + i / 2^m). emax: exponent of the largest power of two. */
struct Grid {
    int kind, bits, m, bias, emax, maxidx;
};

/* GK_NONE for an unknown element type: every kernel that uses it fails to compile */
#define BFP_CUDA_GRID_(ELEM, ...) elem == BFP_ELEM_##ELEM ? Grid{BFP_GRID_##ELEM} :
#define BFP_CUDA_EXT_(ELEM, ...) elem == BFP_ELEM_##ELEM ? Grid{BFP_GRID_EXT(BFP_GRID_##ELEM)} :
__host__ __device__ constexpr Grid grid_of(int elem)
{
    return BFP_ELEM_LIST(BFP_CUDA_GRID_) Grid{GK_NONE, 0, 0, 0, 0, 0};
}

/* The MX+ block-max codec of an element type: sign + bits-1 mantissa bits. */
__host__ __device__ constexpr Grid ext_of(int elem)
{
    return BFP_ELEM_LIST(BFP_CUDA_EXT_) Grid{GK_NONE, 0, 0, 0, 0, 0};
}
#undef BFP_CUDA_GRID_
#undef BFP_CUDA_EXT_

/* floor(log2(largest value)) and its significand as a 24-bit integer
 * (value = sig24 * 2^(maxe - 23)), for the RCEIL scale mode. */
__host__ __device__ constexpr int msb_of(int v) { return v <= 1 ? 0 : 1 + msb_of(v >> 1); }
__host__ __device__ constexpr int grid_maxe(Grid g)
{
    return g.kind == GK_FLOAT ? (g.maxidx >> g.m) - g.bias : msb_of(g.maxidx) - g.m;
}
__host__ __device__ constexpr uint32_t grid_maxsig24(Grid g)
{
    return g.kind == GK_FLOAT
               ? (uint32_t)((1 << g.m) + (g.maxidx & ((1 << g.m) - 1))) << (23 - g.m)
               : (uint32_t)g.maxidx << (23 - msb_of(g.maxidx));
}

struct FmtT {
    int fam, elem, block;
};

/* fam 0 for an id outside the table (or without CUDA kernels): fmt_known()
 * is false and the launchers refuse to instantiate it */
#define BFP_CUDA_FMT_(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, CUDA, ...) \
    BFP_IF_(CUDA, id == BFP_##ID ? FmtT{BFP_FAMILY_##FAM, BFP_ELEM_##ELEM, BLOCK} :)
__host__ __device__ constexpr FmtT fmt_of(int id)
{
    return BFP_FORMAT_LIST(BFP_CUDA_FMT_) FmtT{0, 0, 0};
}
#undef BFP_CUDA_FMT_

__host__ __device__ constexpr bool fmt_known(int id) { return fmt_of(id).fam != 0; }

/* ---- scalar helpers ------------------------------------------------------ */

__device__ __forceinline__ float u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint32_t f2u(float f) { return __float_as_uint(f); }

/* 2^k as a float, k in [-149, 127] (subnormal below -126). */
__device__ __forceinline__ float pow2f(int k)
{
    return k >= -126 ? u2f((uint32_t)(k + 127) << 23) : u2f(1u << (k + 149));
}

/* floor(log2 a) of a finite a > 0 given by its bits (subnormals included). */
__device__ __forceinline__ int flog2_bits(uint32_t b)
{
    uint32_t e = b >> 23;
    return e ? (int)e - 127 : (31 - __clz((int)b)) - 149;
}

/* splitmix64 at counter index+1 from seed, high 32 bits (formats.md). */
__device__ __forceinline__ uint32_t sr_bits(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

/* Rounding modes as template arguments (DEFAULT is resolved on the host). */
enum { RM_RNE = BFP_ROUND_NEAREST_EVEN, RM_AWAY = BFP_ROUND_NEAREST_AWAY,
       RM_RZ = BFP_ROUND_TOWARD_ZERO, RM_SR = BFP_ROUND_STOCHASTIC };

/* Round y >= 0 (y < 2^22, in units of the grid step) to an integer by MODE.
 * y is exact, or, if it underflowed, tiny: nz says the true value was not
 * zero, which matters only for stochastic rounding with r == 0 (the
 * reference rounds up any nonzero remainder then). */
template <int MODE>
__device__ __forceinline__ int round_q(float y, uint32_t r, bool nz)
{
    if (MODE == RM_RNE)
        return (int)(f2u(__fadd_rn(y, 8388608.0f)) - 0x4B000000u);
    float tz = __fadd_rz(y, 8388608.0f);
    int n = (int)(f2u(tz) - 0x4B000000u);
    if (MODE == RM_RZ)
        return n;
    float frac = __fsub_rn(y, __fsub_rn(tz, 8388608.0f)); /* exact */
    if (MODE == RM_AWAY)
        return n + (frac >= 0.5f ? 1 : 0);
    bool up = __dmul_rn((double)frac, 4294967296.0) > (double)r || (r == 0u && n == 0 && nz);
    return n + (up ? 1 : 0);
}

/* The same for an exact double y < 2^30. */
template <int MODE>
__device__ __forceinline__ int round_qd(double y, uint32_t r)
{
    double fl = floor(y);
    int n = (int)fl;
    double frac = __dsub_rn(y, fl);
    switch (MODE) {
    case RM_RZ: return n;
    case RM_AWAY: return n + (frac >= 0.5 ? 1 : 0);
    case RM_SR: return n + (__dmul_rn(frac, 4294967296.0) > (double)r ? 1 : 0);
    default: return n + ((frac > 0.5 || (frac == 0.5 && (n & 1))) ? 1 : 0);
    }
}

/* Magnitude index of v on grid G with the reference's rounding, where v is
 * |x| / scale for a power-of-two scale (exact, or tiny if it underflowed).
 * Callers guarantee v < 2^(emax+2) unless SAFE, which also saturates v of
 * any size (used for the NVFP4 block scale, a saturating E4M3 encode). */
template <int GKIND, int GBITS, int GM, int GBIAS, int GEMAX, int GMAX, int MODE, bool SAFE>
__device__ __forceinline__ int enc_mag_t(float v, uint32_t r, bool nz)
{
    int idx;
    if (GKIND == GK_FLOAT) {
        constexpr int EMINF = 128 - GBIAS; /* exponent field of 2^(1-bias) */
        int eb = max((int)(f2u(v) >> 23), EMINF);
        if (SAFE)
            eb = min(eb, 128 + GEMAX);
        /* y = v / step, step = 2^(eb - 127 - m): an exact power-of-two scaling */
        float y = __fmul_rn(v, u2f((uint32_t)(254 + GM - eb) << 23));
        if (SAFE)
            y = fminf(y, 4194304.0f);
        idx = round_q<MODE>(y, r, nz) + ((eb - EMINF) << GM);
    } else if (GKIND == GK_INT) {
        float y = __fmul_rn(v, (float)(1 << GM));
        idx = round_q<MODE>(y, r, nz);
    } else { /* EXT: v in [2^emax, 2^(emax+1)); smaller values clamp to index 0 */
        float y = __fmul_rn(v, u2f((uint32_t)(127 + GM - GEMAX) << 23));
        idx = max(round_q<MODE>(y, r, nz) - (1 << GM), 0);
    }
    idx = min(idx, GMAX);
    return idx;
}

template <int ELEM, bool EXT, int MODE, bool SAFE = false>
__device__ __forceinline__ int enc_mag(float v, uint32_t r, bool nz)
{
    constexpr Grid G = EXT ? ext_of(ELEM) : grid_of(ELEM);
    return enc_mag_t<G.kind, G.bits, G.m, G.bias, G.emax, G.maxidx, MODE, SAFE>(v, r, nz);
}

/* Full code from a sign and a magnitude index (INT: two's complement). */
template <int ELEM, bool EXT>
__device__ __forceinline__ uint32_t make_code(uint32_t xbits, int mag)
{
    constexpr Grid G = EXT ? ext_of(ELEM) : grid_of(ELEM);
    if (G.kind == GK_INT)
        return (xbits >> 31) ? (uint32_t)(-mag) & ((1u << G.bits) - 1) : (uint32_t)mag;
    return (uint32_t)mag | ((xbits >> 31) << (G.bits - 1));
}

/* Value of magnitude index i of a FLOAT or EXT grid, or of a signed INT
 * code; exact in fp32. */
template <int ELEM, bool EXT>
__device__ __forceinline__ float grid_value(uint32_t i)
{
    constexpr Grid G = EXT ? ext_of(ELEM) : grid_of(ELEM);
    if (G.kind == GK_EXT)
        return u2f((uint32_t)(G.emax + 127) << 23 | i << (23 - G.m));
    uint32_t e = i >> G.m, man = i & ((1u << G.m) - 1);
    if (e)
        return u2f((e + 127 - G.bias) << 23 | man << (23 - G.m));
    /* subnormal: man * 2^(1 - bias - m); man < 2^m is exact in the sum */
    return __fmul_rn(__fsub_rn(u2f(0x4B000000u | man), 8388608.0f),
                     u2f((uint32_t)(128 - G.bias - G.m) << 23));
}

/* Decoded value of a full code (sign, NaN and Inf codes included), exact. */
template <int ELEM, bool EXT>
__device__ __forceinline__ float code_value(uint32_t code)
{
    constexpr Grid G = EXT ? ext_of(ELEM) : grid_of(ELEM);
    if (ELEM == BFP_ELEM_E2M1 && !EXT) {
        /* magnitudes 2..7 are (mag << 22) + bits(0.5); 1 is 0.5, 0 is 0 */
        uint32_t mag = code & 7u;
        uint32_t b = mag >= 2u ? (mag << 22) + 0x3F000000u : (mag ? 0x3F000000u : 0u);
        return u2f(b | (code & 8u) << 28);
    }
    if (G.kind == GK_INT) {
        int k = (code & (1u << (G.bits - 1))) ? (int)code - (1 << G.bits) : (int)code;
        return __fmul_rn((float)k, u2f((uint32_t)(127 - G.m) << 23));
    }
    uint32_t sign = (code >> (G.bits - 1)) & 1u, mag = code & ((1u << (G.bits - 1)) - 1);
    float v;
    if (G.kind == GK_FLOAT && (int)mag > G.maxidx) /* E4M3 0x7F, E5M2 0x7C.. */
        v = (G.bits == 8 && G.m == 2 && mag == 0x7Cu) ? u2f(0x7F800000u) : u2f(0x7FC00000u);
    else
        v = grid_value<ELEM, EXT>(mag);
    return u2f(f2u(v) | sign << 31); /* bit op: keeps NaN payloads as the CPU does */
}

/* 1 if the quantizer never writes this code: NaN / Inf codes, and the INT
 * codes -2 (0x80, 0x8) outside +-max (bfp_elem_code_is_special). */
template <int ELEM>
__device__ __forceinline__ bool code_special(uint32_t code)
{
    constexpr Grid G = grid_of(ELEM);
    if (G.kind == GK_INT)
        return code == (1u << (G.bits - 1));
    return (int)(code & ((1u << (G.bits - 1)) - 1)) > G.maxidx;
}

/* ---- output conversions, as bfp_f32_to_bf16 / bfp_f32_to_f16 ---------- */

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t b = f2u(f);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

__device__ __forceinline__ uint16_t f32_to_f16(float f)
{
    uint32_t b = f2u(f);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(((b >> 16) & 0x8000u) | 0x7E00u);
    return __half_as_ushort(__float2half_rn(f));
}

/* ---- the 128x4 swizzled scale layout (cuBLASLt / CUTLASS / torchao
 * to_blocked): tiles of 128 rows x 4 block-columns, 512 bytes each, row-tile
 * major; inside a tile, row r and column c go to (r % 32) * 16 + (r / 32 % 4)
 * * 4 + c % 4. ncol_tiles = ceil(blocks_per_row / 4). ----------------- */
__host__ __device__ __forceinline__ size_t swizzle_offset(size_t r, size_t c, size_t ncol_tiles)
{
    return ((r >> 7) * ncol_tiles + (c >> 2)) * 512 + (r & 31) * 16 + ((r >> 5) & 3) * 4 + (c & 3);
}

/* ---- thread layout --------------------------------------------------------
 * Every kernel gives a thread 8 consecutive elements of one row (one 16-byte
 * vector of bf16/f16, two of f32) and T = block / 8 neighbouring lanes one
 * block. A CTA of 256 threads covers rt rows x 2^ct_log2 groups: a segment
 * of one long row (ct_log2 = 8), or several short rows. */
struct Layout {
    size_t rows, cols;
    size_t row0;      /* first row of this launch */
    size_t gpr;       /* groups (threads) per row: blocks_per_row * T */
    int ct_log2, rt;  /* CTA tile: rt x qu rows x 2^ct_log2 groups */
    int qu;           /* consecutive rows per thread (1 or QU) */
    size_t tiles;     /* row tiles of this launch (quantize: blockIdx.y strides) */
};

/* the thread's group g within its rows, and its first row */
__device__ __forceinline__ void layout_base(const Layout &L, size_t &row, size_t &g)
{
    unsigned t = threadIdx.x;
    g = ((size_t)blockIdx.x << L.ct_log2) | (t & ((1u << L.ct_log2) - 1));
    row = L.row0 + ((size_t)blockIdx.y * (size_t)L.rt + (t >> L.ct_log2)) * (size_t)L.qu;
}

/* Max / or over the T aligned lanes of a block (all 32 lanes call it). */
template <int T>
__device__ __forceinline__ uint32_t group_max(uint32_t v)
{
#pragma unroll
    for (int o = 1; o < T; o <<= 1)
        v = max(v, (uint32_t)__shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

template <int T>
__device__ __forceinline__ uint32_t group_min(uint32_t v)
{
#pragma unroll
    for (int o = 1; o < T; o <<= 1)
        v = min(v, (uint32_t)__shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

template <int T>
__device__ __forceinline__ uint32_t group_or(uint32_t v)
{
#pragma unroll
    for (int o = 1; o < T; o <<= 1)
        v |= (uint32_t)__shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

/* One group's raw input: a (bf16/f16, or the first 4 f32), b (last 4 f32). */
struct Raw {
    uint4 a, b;
};

__device__ __forceinline__ void load_vec(const unsigned char *src, int dt, size_t e, Raw &r)
{
    if (dt == BFP_DTYPE_F32) {
        const uint4 *p = reinterpret_cast<const uint4 *>(src + e * 4);
        r.a = __ldg(p);
        r.b = __ldg(p + 1);
    } else {
        r.a = __ldg(reinterpret_cast<const uint4 *>(src + e * 2));
    }
}

/* the 8 elements of a vector-loaded group as fp32 bits */
__device__ __forceinline__ void unpack_vec(int dt, const Raw &r, uint32_t x[8])
{
    if (dt == BFP_DTYPE_F32) {
        x[0] = r.a.x; x[1] = r.a.y; x[2] = r.a.z; x[3] = r.a.w;
        x[4] = r.b.x; x[5] = r.b.y; x[6] = r.b.z; x[7] = r.b.w;
        return;
    }
    uint32_t w[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
    if (dt == BFP_DTYPE_BF16) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            x[2 * k] = w[k] << 16;
            x[2 * k + 1] = w[k] & 0xFFFF0000u;
        }
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[k]));
            x[2 * k] = f2u(f.x);
            x[2 * k + 1] = f2u(f.y);
        }
    }
}

/* Load n (<= 8) elements of dtype dt at element offset e of src as fp32
 * bits; the rest are +0. vec: src is 16-byte aligned and the group whole. */
__device__ __forceinline__ void load8(const unsigned char *src, int dt, size_t e, int n, bool vec,
                                      uint32_t x[8])
{
    if (vec && n == 8) {
        Raw r;
        load_vec(src, dt, e, r);
        unpack_vec(dt, r, x);
        return;
    }
    /* any alignment: byte loads */
    int es = dt == BFP_DTYPE_F32 ? 4 : 2;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint32_t v = 0;
        if (j < n) {
            const unsigned char *p = src + (e + (size_t)j) * (size_t)es;
            if (es == 4) {
                v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                    (uint32_t)p[3] << 24;
            } else {
                uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
                v = dt == BFP_DTYPE_BF16 ? h << 16
                                         : f2u(__half2float(__ushort_as_half((unsigned short)h)));
            }
        }
        x[j] = v;
    }
}

/* The 8 codes of a thread: 32 bits for 4-bit codes, else 64. */
template <int W> struct PackSel { typedef uint64_t type; };
template <> struct PackSel<4> { typedef uint32_t type; };
template <int W> using PackT = typename PackSel<W>::type;

/* Store the codes of one 8-element group (W bytes for W-bit codes) at p,
 * only the first nb bytes; vec: p is aligned for one wide store. */
template <int W>
__device__ __forceinline__ void store_codes(unsigned char *p, uint64_t packed, int nb, bool vec)
{
    if (vec && nb == W) {
        if (W == 4) {
            *reinterpret_cast<uint32_t *>(p) = (uint32_t)packed;
        } else if (W == 8) {
            *reinterpret_cast<uint64_t *>(p) = packed;
        } else {
            uint16_t *q = reinterpret_cast<uint16_t *>(p);
            q[0] = (uint16_t)packed;
            q[1] = (uint16_t)(packed >> 16);
            q[2] = (uint16_t)(packed >> 32);
        }
        return;
    }
    for (int k = 0; k < nb; k++)
        p[k] = (unsigned char)(packed >> (8 * k));
}

/* Load the codes of one group (W bytes, only nb of them valid). */
template <int W>
__device__ __forceinline__ uint64_t load_codes(const unsigned char *p, int nb, bool vec)
{
    if (vec && nb == W) {
        if (W == 4)
            return __ldg(reinterpret_cast<const uint32_t *>(p));
        if (W == 8)
            return __ldg(reinterpret_cast<const unsigned long long *>(p));
        const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
        return (uint64_t)__ldg(q) | (uint64_t)__ldg(q + 1) << 16 | (uint64_t)__ldg(q + 2) << 32;
    }
    uint64_t v = 0;
    for (int k = 0; k < nb; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_COMMON_CUH */
