/* bfp_cuda_kernels.cuh - the quantize and dequantize kernels of every
 * family and their launchers, as templates on the format id. Each
 * bfp_cuda_k_*.cu instantiates the launchers of a few formats (so that the
 * build compiles them in parallel); bfp_cuda.cu holds the C API. */
#ifndef BFP_CUDA_KERNELS_CUH
#define BFP_CUDA_KERNELS_CUH

#include "bfp_cuda_common.cuh"

#include <stdlib.h>
#include "bfp_cuda_quant_bf16.cuh"

#include <float.h>
#include <limits.h>

namespace bfpcuda {

/* kernel<<<grid, block, 0, stream>>>(args), as a macro so that the kernels
 * can also run in a host-side warp simulator during development */
#ifndef BFP_LAUNCH
#define BFP_LAUNCH(kernel, grid, block, stream, ...) kernel<<<grid, block, 0, stream>>>(__VA_ARGS__)
#endif

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        if ((call) != cudaSuccess)                                             \
            return BFP_ERR_DEVICE;                                             \
    } while (0)

struct QParams {
    Layout L;
    const unsigned char *src;
    int dt;
    bool vec_in, vec_out;
    unsigned char *codes;
    size_t crb; /* code bytes per row */
    size_t G;   /* blocks per row */
    unsigned char *scales, *meta;
    float *tscale;
    unsigned long long *nonfinite;
    uint64_t seed;
    int mode, scale_mode, no_ts;
    int swz;
    size_t swz_ncol;
};

struct DParams {
    Layout L;
    const unsigned char *codes;
    size_t crb, G;
    bool vec_in, vec_out;
    const unsigned char *scales, *meta;
    const float *tscale;
    unsigned char *dst;
    int dt;
};

__device__ __forceinline__ size_t scale_index(const QParams &P, size_t row, size_t blk)
{
    return P.swz ? swizzle_offset(row, blk, P.swz_ncol) : row * P.G + blk;
}

template <int W>
__device__ __forceinline__ void pack(PackT<W> &packed, uint32_t code, int j)
{
    packed |= (PackT<W>)code << (W * j);
}

template <int W>
__device__ __forceinline__ void put_codes(const QParams &P, size_t row, size_t col0, int n,
                                          PackT<W> packed)
{
    if (n <= 0)
        return;
    size_t off = col0 / 8 * W;
    size_t left = P.crb - off;
    int nb = left < (size_t)W ? (int)left : W;
    store_codes<W>(P.codes + row * P.crb + off, packed, nb, P.vec_out);
}

/* ---- MX ------------------------------------------------------------------ */

template <int ELEM>
__device__ __forceinline__ int mx_shared_exp(uint32_t ab, int mode)
{
    constexpr Grid G = grid_of(ELEM);
    if (ab == 0)
        return -127;
    int fl = flog2_bits(ab);
    if (mode == BFP_SCALE_FLOOR) { /* the default: skip the significand work */
        int se = fl - G.emax;
        return se < -127 ? -127 : se > 127 ? 127 : se;
    }
    uint32_t S;
    int p;
    if (ab >> 23) {
        S = (ab & 0x7FFFFFu) | 0x800000u;
        p = 23;
    } else {
        S = ab;
        p = 31 - __clz((int)ab);
    }
    int se;
    if (mode == BFP_SCALE_CEIL) {
        se = (S == (1u << p) ? fl : fl + 1) - G.emax;
    } else if (mode == BFP_SCALE_EVEN) {
        /* amax rounded half-up to m bits below the leading one carries into
         * the next binade iff S + half >= 2^(p+1) */
        int k = p - G.m;
        int carry = k > 0 && S + (1u << (k - 1)) >= (1u << (p + 1));
        se = fl + carry - G.emax;
    } else if (mode == BFP_SCALE_RCEIL) {
        constexpr int maxe = grid_maxe(G);
        constexpr uint32_t msig = grid_maxsig24(G);
        uint32_t sig = S << (23 - p);
        se = fl - maxe + (sig > msig ? 1 : 0);
    } else {
        se = fl - G.emax;
    }
    return se < -127 ? -127 : se > 127 ? 127 : se;
}

/* BF: the group's 8 elements are the bf16 words w (x unused) and the
 * rounding is RNE onto a FLOAT grid: the bf16x2 encoder applies. */
template <int FMT, int MODE, bool BF>
__device__ __forceinline__ void mx_body(const QParams &P, size_t row, bool valid, size_t blk,
                                        int sub, size_t col0, int n, const uint32_t x[8],
                                        const uint4 &w)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    uint32_t ab[8], am = 0;
    if (BF) {
        am = amax8_bf16(w);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            ab[j] = x[j] & 0x7FFFFFFFu;
            am = max(am, ab[j]);
        }
    }
    am = group_max<T>(am);
    PackT<W> packed = 0;
    uint32_t sc;
    if (am >= 0x7F800000u) {
        sc = 0xFF;
    } else {
        int se = mx_shared_exp<F.elem>(am, P.scale_mode);
        sc = (uint32_t)(se + 127);
        /* bf16 input: se <= 127 - 2 + 1 (CEIL), so 2^-se is a normal bf16 */
        if (BF) { /* (FLOAT grids only: quant_body's MXF) */
            uint32_t f2, m2;
            enc_args_bf16<F.elem>(se, f2, m2);
            packed = enc8_bf16<F.elem>(w, f2, m2);
        }
        float f = pow2f(-se);
        size_t e0 = row * P.L.cols + col0;
#pragma unroll
        for (int j = 0; j < 8 && !BF; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float v = __fmul_rn(u2f(ab[j]), f);
            int mag = enc_mag<F.elem, false, MODE>(v, r, ab[j] != 0);
            pack<W>(packed, make_code<F.elem, false>(x[j], mag), j);
        }
    }
    if (valid) {
        put_codes<W>(P, row, col0, n, packed);
        if (sub == 0) {
            P.scales[scale_index(P, row, blk)] = (unsigned char)sc;
            if (sc == 0xFF && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

/* ---- MX+ and MX++ ---------------------------------------------------------- */

/* Magnitude index of the block max on the extended grid, from the fp32 bits
 * of |BM|, a normal number (the block is not flushed): scaled by 2^-se it is
 * 2^emax times its significand, so the index is the 23-bit fraction rounded
 * to the grid's m bits by MODE, saturated. Integer ops; the same index as
 * enc_mag<ELEM, true, MODE> of the scaled value (r: the SR bits). */
template <int ELEM, int MODE>
__device__ __forceinline__ uint32_t bm_mag(uint32_t am, uint32_t r)
{
    constexpr Grid G = ext_of(ELEM);
    constexpr int SH = 23 - G.m;
    constexpr uint32_t HALF = 1u << (SH - 1);
    uint32_t q = (am & 0x7FFFFFu) >> SH, rem = am & ((1u << SH) - 1);
    bool up = MODE == RM_RNE    ? rem > HALF || (rem == HALF && (q & 1u))
              : MODE == RM_AWAY ? rem >= HALF
              : MODE == RM_SR   ? ((uint64_t)rem << (32 - SH)) > (uint64_t)r
                                : false;
    return min(q + (up ? 1u : 0u), (uint32_t)G.maxidx);
}

/* The 8 packed codes with the BM's code at element j: magnitude bits from
 * bm_mag, sign bit kept. The element's own code there has the BM's sign in
 * its top bit: FLOAT codes always; INT codes are two's complement of an
 * index >= 2^m (the BM scales to at least 1), so negative iff the BM is. */
template <int W>
__device__ __forceinline__ PackT<W> bm_put(PackT<W> packed, int j, uint32_t mag)
{
    constexpr PackT<W> MAG = (PackT<W>)((1u << (W - 1)) - 1);
    return (packed & ~(MAG << (W * j))) | (PackT<W>)mag << (W * j);
}

template <int FMT, int MODE, bool BF>
__device__ __forceinline__ void mxplus_body(const QParams &P, size_t row, bool valid, size_t blk,
                                            int sub, size_t col0, int n, const uint32_t x[8],
                                            const uint4 &w)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    constexpr int EMAX = grid_of(F.elem).emax;
    static_assert(!BF || F.fam == BFP_FAMILY_MX_PLUS, "the bf16x2 path assumes nbm = se");
    uint32_t ab[8], am = 0;
    if (BF) {
        am = amax8_bf16(w);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            ab[j] = x[j] & 0x7FFFFFFFu;
            am = max(am, ab[j]);
        }
    }
    am = group_max<T>(am);
    /* block max: the lowest index holding am */
    uint32_t cand = 0xFFu;
    if (BF) {
        int j = first_eq_bf16(w, am >> 16);
        cand = j < 8 ? (uint32_t)(sub * 8 + j) : 0xFFu;
    } else {
#pragma unroll
        for (int j = 7; j >= 0; j--)
            if (ab[j] == am)
                cand = (uint32_t)(sub * 8 + j);
    }
    cand = group_min<T>(cand);
    uint32_t m2 = 0;
    if (F.fam == BFP_FAMILY_MX_PP) {
#pragma unroll
        for (int j = 0; j < 8; j++) /* (BF is never set for MX++) */
            if ((uint32_t)(sub * 8 + j) != cand)
                m2 = max(m2, ab[j]);
        m2 = group_max<T>(m2);
    }
    PackT<W> packed = 0;
    uint32_t sc = 0, meta = 0;
    bool nonfinite = am >= 0x7F800000u;
    if (nonfinite) {
        sc = 0xFF;
    } else if (am != 0 && flog2_bits(am) - EMAX > -127) { /* else flushed: all 0 */
        int se = flog2_bits(am) - EMAX;
        int nbm = se;
        if (F.fam == BFP_FAMILY_MX_PP && m2 != 0) {
            int e = flog2_bits(m2) - EMAX + 1;
            nbm = e < se - 7 ? se - 7 : e > se ? se : e;
        }
        sc = (uint32_t)(se + 127);
        meta = cand | (uint32_t)(se - nbm) << 5;
        int k = -nbm; /* NBM scaling 2^k, k in [-126, 133] */
        float f1 = k > 127 ? 18446744073709551616.0f : 1.0f;
        float f2 = pow2f(k > 127 ? k - 64 : k);
        size_t e0 = row * P.L.cols + col0;
        if (BF) { /* MX+ FLOAT only: nbm = se >= -126, so 2^k is a normal bf16 */
            uint32_t f2, m2;
            enc_args_bf16<F.elem>(se, f2, m2);
            packed = enc8_bf16<F.elem>(w, f2, m2);
        }
#pragma unroll
        for (int j = 0; j < 8 && !BF; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float v = __fmul_rn(__fmul_rn(u2f(ab[j]), f1), f2);
            int mag = enc_mag<F.elem, false, MODE>(v, r, ab[j] != 0);
            pack<W>(packed, make_code<F.elem, false>(x[j], mag), j);
        }
        if (cand / 8 == (uint32_t)sub) { /* this thread holds the block max */
            int jb = (int)(cand % 8);
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + (size_t)jb) : 0u;
            packed = bm_put<W>(packed, jb, bm_mag<F.elem, MODE>(am, r));
        }
    }
    if (valid) {
        put_codes<W>(P, row, col0, n, packed);
        if (sub == 0) {
            P.scales[scale_index(P, row, blk)] = (unsigned char)sc;
            P.meta[row * P.G + blk] = (unsigned char)meta;
            if (nonfinite && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

/* ---- NVFP4 and NVFP4+ ------------------------------------------------------ */

/* E2M1 magnitudes and midpoints in units of the block scale; every product
 * with a UE4M3 scale (4 significant bits) is exact in fp32. */
__device__ __forceinline__ float nv_grid(int i) { return grid_value<BFP_ELEM_E2M1, false>((uint32_t)i); }

/* Magnitude index of a / sb on the E2M1 grid (EXT: the NVFP4+ block-max
 * grid 4 * (1 + i/8)), decided by exact fp32 comparisons of a with grid
 * points and midpoints times sb. th[]: the 7 thresholds (see nv_thresholds). */
template <int MODE, bool EXT>
__device__ __forceinline__ int nv_round(float a, float sb, const float th[7], uint32_t r)
{
    int idx = 0;
#pragma unroll
    for (int k = 0; k < 7; k++) {
        if (MODE == RM_RNE)
            idx += (k & 1) ? (a >= th[k]) : (a > th[k]); /* ties to the even index */
        else
            idx += a >= th[k];
    }
    if (MODE == RM_SR && idx < 7) {
        float lo = EXT ? grid_value<BFP_ELEM_E2M1, true>((uint32_t)idx) : nv_grid(idx);
        float hi = EXT ? grid_value<BFP_ELEM_E2M1, true>((uint32_t)idx + 1) : nv_grid(idx + 1);
        double vlo = (double)__fmul_rn(lo, sb), vhi = (double)__fmul_rn(hi, sb);
        /* up with probability (a - vlo) / (vhi - vlo), all exact in double */
        if (__dmul_rn(__dsub_rn((double)a, vlo), 4294967296.0) >
            __dmul_rn((double)r, __dsub_rn(vhi, vlo)))
            idx++;
    }
    return idx;
}

template <int MODE, bool EXT>
__device__ __forceinline__ void nv_thresholds(float sb, float th[7])
{
#pragma unroll
    for (int k = 0; k < 7; k++) {
        float lo = EXT ? grid_value<BFP_ELEM_E2M1, true>((uint32_t)k) : nv_grid(k);
        float hi = EXT ? grid_value<BFP_ELEM_E2M1, true>((uint32_t)k + 1) : nv_grid(k + 1);
        float t = (MODE == RM_RNE || MODE == RM_AWAY) ? __fmul_rn(__fadd_rn(lo, hi), 0.5f) : hi;
        th[k] = __fmul_rn(t, sb);
    }
}

/* Encode one thread's 8 scaled values tb (fp32 bits) of a row-block whose
 * block scale comes from smax (the block's, or the 2-D tile's, max |t|).
 * bm: index in the row-block of its max |t| (NVFP4+). */
template <int FMT, int MODE>
__device__ __forceinline__ void nv_encode(const QParams &P, size_t row, size_t col0, int h,
                                          const uint32_t tb[8], uint32_t smax, uint32_t bm,
                                          uint32_t &packed, uint32_t &sc, uint32_t &meta)
{
    constexpr bool PLUS = fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS;
    packed = 0;
    meta = 0;
    if (smax >= 0x7F800000u) {
        sc = 0x7F;
        return;
    }
    /* UE4M3 RNE satfinite of fp32(max / 6) */
    float q = __fdiv_rn(u2f(smax), 6.0f);
    sc = (uint32_t)enc_mag<BFP_ELEM_E4M3, false, RM_RNE, true>(q, 0u, false);
    if (sc == 0) { /* signed zeros */
#pragma unroll
        for (int j = 0; j < 8; j++)
            pack<4>(packed, (tb[j] >> 31) << 3, j);
        return;
    }
    float sb = grid_value<BFP_ELEM_E4M3, false>(sc);
    float th[7];
    nv_thresholds<MODE, false>(sb, th);
    size_t e0 = row * P.L.cols + col0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
        int mag = nv_round<MODE, false>(u2f(tb[j] & 0x7FFFFFFFu), sb, th, r);
        pack<4>(packed, (uint32_t)mag | (tb[j] >> 31) << 3, j);
    }
    if (PLUS && sc > 0x02) {
        meta = bm;
        if (bm / 8 == (uint32_t)h) {
            int jb = (int)(bm % 8);
            uint32_t t = 0;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j == jb)
                    t = tb[j];
            float the[7];
            nv_thresholds<MODE, true>(sb, the);
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + (size_t)jb) : 0u;
            int mag = nv_round<MODE, true>(u2f(t & 0x7FFFFFFFu), sb, the, r);
            uint32_t mask = 0xFu << (4 * jb);
            packed = (packed & ~mask) | ((uint32_t)mag | (t >> 31) << 3) << (4 * jb);
        }
    }
}

__device__ __forceinline__ float nv_senc(const QParams &P)
{
    return P.no_ts ? 1.0f : *P.tscale;
}

/* scaled values t = fp32(x * s_enc), their max |t| and the lowest index of
 * it (within this thread's 8) */
__device__ __forceinline__ uint32_t nv_scale8(const uint32_t x[8], float s_enc, uint32_t tb[8])
{
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        tb[j] = f2u(__fmul_rn(u2f(x[j]), s_enc));
        m = max(m, tb[j] & 0x7FFFFFFFu);
    }
    return m;
}

__device__ __forceinline__ uint32_t nv_bm_cand(const uint32_t tb[8], uint32_t m, int h)
{
    uint32_t cand = 0xFFu;
#pragma unroll
    for (int j = 7; j >= 0; j--)
        if ((tb[j] & 0x7FFFFFFFu) == m)
            cand = (uint32_t)(h * 8 + j);
    return cand;
}

template <int FMT, int MODE>
__device__ __forceinline__ void nv_body(const QParams &P, size_t row, bool valid, size_t blk,
                                        int sub, size_t col0, int n, const uint32_t x[8])
{
    uint32_t tb[8];
    uint32_t m = group_max<2>(nv_scale8(x, nv_senc(P), tb));
    uint32_t bm = group_min<2>(nv_bm_cand(tb, m, sub));
    uint32_t packed;
    uint32_t sc, meta;
    nv_encode<FMT, MODE>(P, row, col0, sub, tb, m, bm, packed, sc, meta);
    if (valid) {
        put_codes<4>(P, row, col0, n, packed);
        if (sub == 0) {
            P.scales[scale_index(P, row, blk)] = (unsigned char)sc;
            if (P.meta)
                P.meta[row * P.G + blk] = (unsigned char)meta;
            if (sc == 0x7F && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

/* ---- HiF4 -------------------------------------------------------------------- */

__device__ __forceinline__ double bf16_rne_d(double p)
{
    /* round to 8 significant bits, ties to even (p >= 0, finite) */
    uint64_t b = (uint64_t)__double_as_longlong(p);
    b = (b + 0xFFFFFFFFFFFull + ((b >> 45) & 1u)) & ~0x1FFFFFFFFFFFull;
    return __longlong_as_double((long long)b);
}

template <int FMT, int MODE>
__device__ __forceinline__ void hif4_body(const QParams &P, size_t row, bool valid, size_t blk,
                                          int sub, size_t col0, int n, const uint32_t x[8])
{
    uint32_t ab[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        ab[j] = x[j] & 0x7FFFFFFFu;
    uint32_t v16a = max(max(ab[0], ab[1]), max(ab[2], ab[3]));
    uint32_t v16b = max(max(ab[4], ab[5]), max(ab[6], ab[7]));
    uint32_t v8 = max(v16a, v16b);
    uint32_t vmax = group_max<8>(v8);
    bool nonfinite = vmax >= 0x7F800000u;
    /* scale: SF = BF16(Vmax * BF16(1/7)) clamped, RNE to 3 significant bits */
    double sf = bf16_rne_d(__dmul_rn((double)u2f(vmax), 0.142578125));
    sf = fmin(fmax(sf, 3.552713678800501e-15 /* 2^-48 */), 49152.0);
    uint64_t b = (uint64_t)__double_as_longlong(sf);
    b = (b + 0x1FFFFFFFFFFFFull + ((b >> 50) & 1u)) & ~0x3FFFFFFFFFFFFull;
    int ex = (int)(b >> 52) - 1023;
    uint32_t m2 = (uint32_t)(b >> 50) & 3u;
    uint32_t code = (uint32_t)(ex + 48) << 2 | m2;
    const float rtab[4] = {1.0f, 0.80078125f, 0.66796875f, 0.5703125f};
    float rm = m2 == 0 ? rtab[0] : m2 == 1 ? rtab[1] : m2 == 2 ? rtab[2] : rtab[3];
    float rec = __fmul_rn(rm, pow2f(-ex)); /* REC = BF16(1/E6M2), exact */
    bool e8 = __dmul_rn((double)u2f(v8), (double)rec) >= 4.0;
    double h8 = e8 ? 0.5 : 1.0;
    bool e16a = __dmul_rn(__dmul_rn((double)u2f(v16a), (double)rec), h8) >= 2.0;
    bool e16b = __dmul_rn(__dmul_rn((double)u2f(v16b), (double)rec), h8) >= 2.0;
    unsigned base = threadIdx.x & 24u;
    uint32_t b8 = (__ballot_sync(0xFFFFFFFFu, e8) >> base) & 0xFFu;
    uint32_t b16a = (__ballot_sync(0xFFFFFFFFu, e16a) >> base) & 0xFFu;
    uint32_t b16b = (__ballot_sync(0xFFFFFFFFu, e16b) >> base) & 0xFFu;
    uint32_t packed = 0;
    uint32_t word = 0xFFu;
    if (!nonfinite) {
        uint32_t e16 = 0;
#pragma unroll
        for (int k = 0; k < 8; k++)
            e16 |= ((b16a >> k) & 1u) << (2 * k) | ((b16b >> k) & 1u) << (2 * k + 1);
        word = code | b8 << 8 | e16 << 16;
        float fa = __fmul_rn(rec, pow2f(2 - (int)e8 - (int)e16a));
        float fb = __fmul_rn(rec, pow2f(2 - (int)e8 - (int)e16b));
        size_t e0 = row * P.L.cols + col0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float f = j < 4 ? fa : fb;
            int k;
            if (P.dt == BFP_DTYPE_F32) { /* 24 x 8 bits: exact in double */
                double y = fmin(__dmul_rn((double)u2f(ab[j]), (double)f), 8.0);
                k = round_qd<MODE>(y, r);
            } else { /* 8 or 11 x 8 bits: exact in fp32 */
                float y = fminf(__fmul_rn(u2f(ab[j]), f), 8.0f);
                k = round_q<MODE>(y, r, ab[j] != 0);
            }
            k = min(k, 7);
            pack<4>(packed, (uint32_t)k | (x[j] >> 31) << 3, j);
        }
    }
    if (valid) {
        put_codes<4>(P, row, col0, n, packed);
        if (sub == 0) {
            unsigned char *s = P.scales + 4 * (row * P.G + blk);
            s[0] = (unsigned char)word;
            s[1] = (unsigned char)(word >> 8);
            s[2] = (unsigned char)(word >> 16);
            s[3] = (unsigned char)(word >> 24);
            if (nonfinite && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

/* ---- quantize kernels --------------------------------------------------------- */

/* Groups of QU consecutive rows per thread in the format's default rounding
 * mode (the hot path): all QU loads are issued before any is used, and the
 * per-thread setup is paid once for 8 * QU elements. */
constexpr int QU = 4;

template <int NU>
__device__ __forceinline__ void load_rows(const QParams &P, bool vec, size_t row0, size_t col0,
                                          Raw raw[NU])
{
#pragma unroll
    for (int u = 0; u < NU; u++) {
        raw[u].a = raw[u].b = make_uint4(0, 0, 0, 0);
        if (vec && row0 + u < P.L.rows)
            load_vec(P.src, P.dt, (row0 + u) * P.L.cols + col0, raw[u]);
    }
}

/* The codes of block b at the 4 * W bytes of codes it owns: one 16-byte
 * store (4-bit), three 8-byte ones (6-bit: 2-byte stores measured 4x slower
 * on the H200), or one 8-byte store per group (8-bit). */
template <int W>
__device__ __forceinline__ void put_block_codes(const QParams &P, size_t b, const PackT<W> packed[4])
{
    unsigned char *cp = P.codes + b * (size_t)(4 * W);
    if (W == 4 && ((uintptr_t)P.codes & 15u) == 0) {
        *reinterpret_cast<uint4 *>(cp) = make_uint4((uint32_t)packed[0], (uint32_t)packed[1],
                                                    (uint32_t)packed[2], (uint32_t)packed[3]);
    } else if (W == 6 && ((uintptr_t)P.codes & 7u) == 0) {
        uint64_t *q = reinterpret_cast<uint64_t *>(cp);
        uint64_t p0 = packed[0], p1 = packed[1], p2 = packed[2], p3 = packed[3];
        q[0] = p0 | p1 << 48;
        q[1] = p1 >> 16 | p2 << 32;
        q[2] = p2 >> 32 | p3 << 16;
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
            store_codes<W>(cp + k * W, packed[k], W, true);
    }
}

/* The rest of block b of a block-per-thread MX kernel: its E8M0 scale
 * (planar or swizzled), its meta byte (MX+ / MX++: has_meta), and the count
 * of non-finite blocks. */
__device__ __forceinline__ void put_block_scale(const QParams &P, size_t b, uint32_t sc,
                                                bool has_meta, uint32_t meta, bool nonfinite)
{
    P.scales[P.swz ? swizzle_offset(b / P.G, b % P.G, P.swz_ncol) : b] = (unsigned char)sc;
    if (has_meta)
        P.meta[b] = (unsigned char)meta;
    if (nonfinite && P.nonfinite)
        atomicAdd(P.nonfinite, 1ull);
}

/* CTAs of a grid-stride kernel of 256 threads with one thread per item:
 * one pass, at most 2^20 CTAs (the threads stride over the rest) */
inline unsigned stride_grid(size_t items)
{
    size_t ctas = (items + 255) / 256;
    return (unsigned)(ctas < (1u << 20) ? ctas : (1u << 20));
}

/* ---- bf16 MX / MX+ with a whole block per thread ------------------------------- *
 * The hot path of the MX family (bf16 input, RNE, rows of whole blocks, vector
 * alignment; FLOAT and INT grids, MX and MX+): a thread reads its block as
 * four 16-byte vectors, finds the max without shuffles, encodes with the
 * bf16x2 encoder and writes all its codes. With 8 elements per thread the
 * per-group work (shuffles, scale, addressing) cost as much as the encoding.
 * Same decisions as mx_body / mxplus_body. MX+: the BM's index from packed
 * compares (first_max32_bf16), its code from the bits of am (bm_mag). */
__device__ __forceinline__ void mx_block_load(const QParams &P, size_t b, uint4 (&w)[4])
{
    const uint4 *src = reinterpret_cast<const uint4 *>(P.src) + 4 * b;
#pragma unroll
    for (int k = 0; k < 4; k++)
        w[k] = __ldg(src + k);
}

template <int FMT>
__device__ __forceinline__ void mx_block_bf16(const QParams &P, size_t b, const uint4 (&w)[4])
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits, EMAX = grid_of(F.elem).emax;
    constexpr bool PLUS = F.fam == BFP_FAMILY_MX_PLUS;
    uint32_t am = 0, a8[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        a8[k] = amax8_bf16(w[k]);
        am = max(am, a8[k]);
    }
    PackT<W> packed[4] = {0, 0, 0, 0};
    uint32_t sc = 0, meta = 0;
    bool nonfinite = am >= 0x7F800000u;
    if (nonfinite) {
        sc = 0xFF;
    } else if (!PLUS || (am != 0 && flog2_bits(am) - EMAX > -127)) { /* MX+: else flushed */
        int se = PLUS ? flog2_bits(am) - EMAX : mx_shared_exp<F.elem>(am, P.scale_mode);
        sc = (uint32_t)(se + 127);
        uint32_t f2, m2;
        enc_args_bf16<F.elem>(se, f2, m2); /* se in [-127, 127] for bf16 input */
#pragma unroll
        for (int k = 0; k < 4; k++)
            packed[k] = enc8_bf16<F.elem>(w[k], f2, m2);
        if (PLUS) { /* the block max: lowest index holding am, on the extended grid */
            int cand = first_max32_bf16(w, a8, am);
            meta = (uint32_t)cand;
            uint32_t mag = bm_mag<F.elem, RM_RNE>(am, 0u);
#pragma unroll
            for (int k = 0; k < 4; k++) /* a select per word, no dynamic index */
                packed[k] = k == cand / 8 ? bm_put<W>(packed[k], cand % 8, mag) : packed[k];
        }
    }
    put_block_codes<W>(P, b, packed);
    put_block_scale(P, b, sc, PLUS, meta, nonfinite);
}

/* Blocks a thread of mx_block_kernel (MX, MX+ and MX++) loads before it
 * encodes them: 1, or 2 for more bytes in flight per thread at the cost of
 * registers (CTAs per SM). Measured on the H200 at 16384x16384 bf16
 * (bench/results/h200-qctas.json): 2 took mxfp4+ from 171.6 to 161.1 us
 * (mxfp4: 162.1) and mxfp6_e2m3+ from 191.2 to 180.6 (mxfp6_e2m3: 173.5),
 * mxfp4++ from 171.8 to 161.4 and mxfp6_e2m3++ from 200.6 to 190.6; mxfp8+
 * (194.6 -> 199.2), mxfp8++ (194.0 both), mxint8+ (192.1 -> 273.2) and
 * mxint4+ (160.9 -> 161.1) keep 1. BFP_MXQ_BLOCKS_{MX,MXPLUS,MXPP} >= 1 override it at build
 * time, for sweeps (bench/gpu.sh PARTS=qctas). */
#ifndef BFP_MXQ_BLOCKS_MX
#define BFP_MXQ_BLOCKS_MX -1
#endif
#ifndef BFP_MXQ_BLOCKS_MXPLUS
#define BFP_MXQ_BLOCKS_MXPLUS -1
#endif
#ifndef BFP_MXQ_BLOCKS_MXPP
#define BFP_MXQ_BLOCKS_MXPP -1
#endif
template <int FMT>
__host__ __device__ constexpr int mxq_blocks()
{
    constexpr int fam = fmt_of(FMT).fam;
    constexpr Grid G = grid_of(fmt_of(FMT).elem);
    constexpr int set = fam == BFP_FAMILY_MX_PLUS ? BFP_MXQ_BLOCKS_MXPLUS
                        : fam == BFP_FAMILY_MX_PP ? BFP_MXQ_BLOCKS_MXPP
                                                  : BFP_MXQ_BLOCKS_MX;
    return set >= 1                                                               ? set
           : fam != BFP_FAMILY_MX && G.kind == GK_FLOAT && G.bits <= 6 ? 2
                                                                       : 1;
}

/* CTAs of 256 threads per SM that the block-per-thread quantizers' register
 * count must allow (mx_block_kernel for MX, MX+ and MX++; nv_block_kernel;
 * 0: the compiler's choice). Measured on the H200 (bench/results/h200-qctas.json), one block
 * per thread: the 4-bit MX+ kernels took 45-48 registers (5 CTAs) where MX
 * took 40 (6), and at 6 (40 registers, at most 4 bytes of spill) mxint4+
 * went from 165 to 161 us; the 6- and 8-bit MX+ kernels spill 32 bytes or
 * more at 6 and were 16-29% slower. With two blocks per thread the
 * compiler's choice was fastest. BFP_QBLOCK_CTAS_{MX,MXPLUS,MXPP,NV} >= 0
 * override it at build time, for sweeps (bench/gpu.sh PARTS=qctas). */
#ifndef BFP_QBLOCK_CTAS_MX
#define BFP_QBLOCK_CTAS_MX -1
#endif
#ifndef BFP_QBLOCK_CTAS_MXPLUS
#define BFP_QBLOCK_CTAS_MXPLUS -1
#endif
#ifndef BFP_QBLOCK_CTAS_MXPP
#define BFP_QBLOCK_CTAS_MXPP -1
#endif
#ifndef BFP_QBLOCK_CTAS_NV
#define BFP_QBLOCK_CTAS_NV -1
#endif
template <int FMT>
__host__ __device__ constexpr int qblock_min_ctas()
{
    constexpr int fam = fmt_of(FMT).fam;
    constexpr int set = fam == BFP_FAMILY_MX        ? BFP_QBLOCK_CTAS_MX
                        : fam == BFP_FAMILY_MX_PLUS ? BFP_QBLOCK_CTAS_MXPLUS
                        : fam == BFP_FAMILY_MX_PP   ? BFP_QBLOCK_CTAS_MXPP
                                                    : BFP_QBLOCK_CTAS_NV;
    return set >= 0                                                 ? set
           : mxq_blocks<FMT>() == 1 && fam == BFP_FAMILY_MX_PLUS &&
                     grid_of(fmt_of(FMT).elem).bits == 4 ? 6
                                                         : 0;
}

/* Thread i of a grid of `stride` threads over nblocks blocks: blocks i and
 * i + stride (NB = 2) are loaded before either is encoded by enc(b, w), then
 * on from i + NB * stride */
template <int NB, class Enc>
__device__ __forceinline__ void blocks_of_thread(const QParams &P, size_t i, size_t stride,
                                                 size_t nblocks, Enc enc)
{
    static_assert(NB == 1 || NB == 2, "one or two blocks per thread");
    for (size_t b = i; b < nblocks; b += NB * stride) {
        uint4 w0[4], w1[4];
        mx_block_load(P, b, w0);
        const bool two = NB == 2 && b + stride < nblocks;
        if (two)
            mx_block_load(P, b + stride, w1);
        enc(b, w0);
        if (two)
            enc(b + stride, w1);
    }
}

/* MX++'s block encoder (bfp_cuda_qblock_mxpp.cuh; it may scale w in place) */
template <int FMT>
__device__ __forceinline__ void mxpp_block_bf16(const QParams &P, size_t b, uint4 (&w)[4]);

/* Block b, loaded in w, by its family's encoder: MX and MX+ here, MX++ in
 * bfp_cuda_qblock_mxpp.cuh */
template <int FMT>
__device__ __forceinline__ void block_bf16(const QParams &P, size_t b, uint4 (&w)[4])
{
    if constexpr (fmt_of(FMT).fam == BFP_FAMILY_MX_PP)
        mxpp_block_bf16<FMT>(P, b, w);
    else
        mx_block_bf16<FMT>(P, b, w);
}

/* the same, loading the block itself */
template <int FMT>
__device__ __forceinline__ void block_bf16(const QParams &P, size_t b)
{
    uint4 w[4];
    mx_block_load(P, b, w);
    block_bf16<FMT>(P, b, w);
}

/* The blocks of thread i of a grid of `stride` threads (mxq_blocks at a
 * time; the launch's grid covers nblocks / mxq_blocks threads, capped: more
 * in a loop) */
template <int FMT>
__device__ __forceinline__ void block_thread(const QParams &P, size_t i, size_t stride,
                                             size_t nblocks)
{
    blocks_of_thread<mxq_blocks<FMT>()>(P, i, stride, nblocks, [&](size_t b, uint4(&w)[4]) {
        block_bf16<FMT>(P, b, w);
    });
}

/* The block-per-thread quantizer of the MX, MX+ and MX++ formats */
template <int FMT>
__global__ void __launch_bounds__(256, qblock_min_ctas<FMT>())
    mx_block_kernel(const QParams P, size_t nblocks)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    if constexpr (mxq_blocks<FMT>() == 1) {
        /* block_thread's loop, as it was: written otherwise (or through the
         * call) mxfp6 took 48 registers instead of 40 */
        for (size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x; b < nblocks; b += stride)
            block_bf16<FMT>(P, b);
    } else {
        block_thread<FMT>(P, (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride, nblocks);
    }
}

/* Whether mx_block_kernel applies: MX, MX+ or MX++, bf16, RNE, whole blocks
 * per row (block b of the tensor is elements [32 b, 32 b + 32) of the flat
 * input and codes), 16-byte aligned input and aligned codes. */
template <int FMT>
bool mx_block_ok(const QParams &P)
{
    constexpr FmtT F = fmt_of(FMT);
    if constexpr (F.fam != BFP_FAMILY_MX && F.fam != BFP_FAMILY_MX_PLUS &&
                  F.fam != BFP_FAMILY_MX_PP)
        return false;
    return P.dt == BFP_DTYPE_BF16 && P.mode == RM_RNE && P.vec_in && P.vec_out &&
           P.L.cols % 32 == 0;
}

/* Whether a format's quantizer prefetches: a CTA then strides over the
 * launch's row tiles (blockIdx.y, += gridDim.y) and loads the next tile's
 * rows before it encodes the current ones, so that a warp has loads in
 * flight while it computes. Measured on the H200 at 16384x16384 bf16 it
 * helped HiF4 (532 -> 470 us) and cost the MX families registers and time
 * (mxfp4 283 -> 297 us, mxfp4+ 410 -> 456, mxfp4++ 559 -> 766): they keep
 * one tile per CTA. */
template <int FMT>
__host__ __device__ constexpr bool quant_prefetch()
{
    return fmt_of(FMT).fam == BFP_FAMILY_HIF4 || fmt_of(FMT).fam == BFP_FAMILY_NVFP4 ||
           fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS;
}

template <int FMT, int MODE, int NU>
__device__ __forceinline__ void quant_body(const QParams &P)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8;
    size_t row0, g;
    layout_base(P.L, row0, g);
    const size_t tile_rows = (size_t)P.L.rt * NU;
    size_t blk = g / T;
    int sub = (int)(g % T);
    size_t col0 = blk * F.block + (size_t)sub * 8;
    int n = g < P.L.gpr && col0 < P.L.cols ? (int)min(P.L.cols - col0, (size_t)8) : 0;
    bool vec = P.vec_in && n == 8;
    /* the bf16x2 encoder, for the whole warp or not at all (the block
     * reductions are warp shuffles): every lane's group vector-loaded or empty */
    /* (MX++ measured slower with it on the H200: 547 vs 502 us for mxfp4++) */
    constexpr bool MXF = (F.fam == BFP_FAMILY_MX || F.fam == BFP_FAMILY_MX_PLUS) &&
                         grid_of(F.elem).kind == GK_FLOAT && MODE == RM_RNE;
    bool bf = MXF && P.dt == BFP_DTYPE_BF16 && __all_sync(0xFFFFFFFFu, vec || n == 0);
    constexpr bool PF = quant_prefetch<FMT>();
    Raw next[PF ? NU : 1];
    if constexpr (PF)
        load_rows<NU>(P, vec, row0, col0, next);
    for (size_t ty = blockIdx.y; ty < P.L.tiles; ty += gridDim.y, row0 += gridDim.y * tile_rows) {
        Raw raw[NU];
        if constexpr (PF) {
#pragma unroll
            for (int u = 0; u < NU; u++)
                raw[u] = next[PF ? u : 0];
            if (ty + gridDim.y < P.L.tiles)
                load_rows<NU>(P, vec, row0 + gridDim.y * tile_rows, col0, next);
        } else {
            load_rows<NU>(P, vec, row0, col0, raw);
        }
#pragma unroll
        for (int u = 0; u < NU; u++) {
            size_t row = row0 + u;
            bool valid = g < P.L.gpr && row < P.L.rows; /* n may be 0: padding lane of a block */
            int nu = valid ? n : 0;
            uint32_t x[8];
            if constexpr (MXF) {
                if (bf) {
                    if constexpr (F.fam == BFP_FAMILY_MX)
                        mx_body<FMT, MODE, true>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
                    else
                        mxplus_body<FMT, MODE, true>(P, row, valid, blk, sub, col0, nu, x,
                                                     raw[u].a);
                    continue;
                }
            }
            if (vec && valid)
                unpack_vec(P.dt, raw[u], x);
            else
                load8(P.src, P.dt, row * P.L.cols + col0, nu, false, x);
            if (F.fam == BFP_FAMILY_MX)
                mx_body<FMT, MODE, false>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
            else if (F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP)
                mxplus_body<FMT, MODE, false>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
            else if (F.fam == BFP_FAMILY_HIF4)
                hif4_body<FMT, MODE>(P, row, valid, blk, sub, col0, nu, x);
            else
                nv_body<FMT, MODE>(P, row, valid, blk, sub, col0, nu, x);
        }
    }
}

template <int FMT>
__host__ __device__ constexpr int default_mode()
{
    return fmt_of(FMT).fam == BFP_FAMILY_HIF4 ? RM_AWAY : RM_RNE;
}

/* One kernel per input dtype: registers are allocated for the worst path of
 * a kernel, and f32's two vectors per group would cost bf16 occupancy. */
template <int FMT, int DT>
__global__ void __launch_bounds__(256) quant_kernel(const QParams P0)
{
    QParams P = P0;
    P.dt = DT; /* a constant from here on */
    if (P.L.qu == QU) { /* the host sets qu = QU exactly for the default mode */
        quant_body<FMT, default_mode<FMT>(), QU>(P);
        return;
    }
    switch (P.mode) {
    case RM_AWAY: quant_body<FMT, RM_AWAY, 1>(P); break;
    case RM_RZ: quant_body<FMT, RM_RZ, 1>(P); break;
    case RM_SR: quant_body<FMT, RM_SR, 1>(P); break;
    default: quant_body<FMT, RM_RNE, 1>(P); break;
    }
}

/* NVFP4 with 16x16 tiles: a warp is one tile, lane = 2 * row + half. */
template <int FMT, int MODE>
__device__ __forceinline__ void nv2d_body(const QParams &P)
{
    unsigned lane = threadIdx.x & 31u;
    size_t tile_col = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    size_t row = P.L.row0 + (size_t)blockIdx.y * 16 + (lane >> 1);
    int h = (int)(lane & 1u);
    size_t col0 = tile_col * 16 + (size_t)h * 8;
    bool valid = row < P.L.rows && tile_col < P.G;
    int n = valid && col0 < P.L.cols ? (int)min(P.L.cols - col0, (size_t)8) : 0;
    uint32_t x[8], tb[8];
    load8(P.src, P.dt, row * P.L.cols + col0, n, P.vec_in, x);
    uint32_t m = nv_scale8(x, nv_senc(P), tb);
    uint32_t tile_max = group_max<32>(m);
    uint32_t rb_max = group_max<2>(m);
    uint32_t bm = group_min<2>(nv_bm_cand(tb, rb_max, h));
    uint32_t packed;
    uint32_t sc, meta;
    nv_encode<FMT, MODE>(P, row, col0, h, tb, tile_max, bm, packed, sc, meta);
    if (valid) {
        put_codes<4>(P, row, col0, n, packed);
        if (h == 0) {
            P.scales[scale_index(P, row, tile_col)] = (unsigned char)sc;
            if (P.meta)
                P.meta[row * P.G + tile_col] = (unsigned char)meta;
            if (sc == 0x7F && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

template <int FMT>
__global__ void __launch_bounds__(256) nv2d_kernel(const QParams P)
{
    switch (P.mode) {
    case RM_AWAY: nv2d_body<FMT, RM_AWAY>(P); break;
    case RM_RZ: nv2d_body<FMT, RM_RZ>(P); break;
    case RM_SR: nv2d_body<FMT, RM_SR>(P); break;
    default: nv2d_body<FMT, RM_RNE>(P); break;
    }
}

/* ---- dequantize: bfp_cuda_dequant_fast.cuh ---------------------------------------- */

} // namespace bfpcuda

#include "bfp_cuda_dequant_fast.cuh"
#include "bfp_cuda_qblock_mxpp.cuh"
#include "bfp_cuda_qblock_hif4.cuh"
#include "bfp_cuda_qblock_nv.cuh"

namespace bfpcuda {

/* CTA tiling for one thread per 8 elements and T threads per block. */
struct Tiling {
    Layout L;
    unsigned gx;
    size_t rows_per_launch;
};

/* CTAs of a quantize launch: as many as the GPU holds at once (the kernel
 * strides over the row tiles), found once per kernel. */
template <int FMT, int DT>
bfp_status resident_ctas(unsigned *out)
{
    static unsigned cached = 0;
    if (!cached) {
        int dev = 0, sms = 0, per_sm = 0;
        CUDA_OK(cudaGetDevice(&dev));
        CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, quant_kernel<FMT, DT>, 256, 0));
        cached = (unsigned)(sms > 0 ? sms : 1) * (unsigned)(per_sm > 0 ? per_sm : 1);
    }
    *out = cached;
    return BFP_OK;
}

template <int FMT, int DT>
bfp_status launch_quant_dt(QParams P, const Tiling &t, cudaStream_t s)
{
    unsigned ctas;
    bfp_status st = resident_ctas<FMT, DT>(&ctas);
    if (st != BFP_OK)
        return st;
    for (size_t r0 = 0; r0 < P.L.rows; r0 += t.rows_per_launch) {
        size_t nr = P.L.rows - r0 < t.rows_per_launch ? P.L.rows - r0 : t.rows_per_launch;
        P.L.row0 = r0;
        size_t tile_rows = (size_t)t.L.rt * (size_t)P.L.qu;
        P.L.tiles = (nr + tile_rows - 1) / tile_rows;
        size_t gy = quant_prefetch<FMT>() ? (ctas + t.gx - 1) / t.gx : P.L.tiles;
        dim3 grid(t.gx, (unsigned)(gy < P.L.tiles ? gy : P.L.tiles));
        BFP_LAUNCH((quant_kernel<FMT, DT>), grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

template <int FMT>
bfp_status launch_quant(QParams P, const Tiling &t, cudaStream_t s)
{
    static_assert(fmt_known(FMT), "not a format with CUDA kernels (format_defs.h)");
    if (hif4_block_ok<FMT>(P)) /* bfp_cuda_qblock_hif4.cuh */
        return launch_hif4_block<FMT>(P, s);
    if (nv_block_ok<FMT>(P)) /* bfp_cuda_qblock_nv.cuh */
        return launch_nv_block<FMT>(P, s);
    if (mx_block_ok<FMT>(P)) {
        size_t nblocks = P.L.rows * (P.L.cols / 32);
        constexpr size_t NB = mxq_blocks<FMT>();
        BFP_LAUNCH(mx_block_kernel<FMT>, stride_grid((nblocks + NB - 1) / NB), 256, s, P, nblocks);
        CUDA_OK(cudaGetLastError());
        return BFP_OK;
    }
    switch (P.dt) {
    case BFP_DTYPE_BF16: return launch_quant_dt<FMT, BFP_DTYPE_BF16>(P, t, s);
    case BFP_DTYPE_F16: return launch_quant_dt<FMT, BFP_DTYPE_F16>(P, t, s);
    default: return launch_quant_dt<FMT, BFP_DTYPE_F32>(P, t, s);
    }
}

template <int FMT>
bfp_status launch_nv2d(QParams P, cudaStream_t s)
{
    static_assert(FMT == BFP_NVFP4, "2-D tiles are NVFP4's alone (SPEC section 5)");
    size_t gx = (P.G + 7) / 8;
    if (gx > (size_t)INT_MAX)
        return BFP_ERR_SHAPE;
    const size_t rows_per_launch = (size_t)65535 * 16;
    for (size_t r0 = 0; r0 < P.L.rows; r0 += rows_per_launch) {
        size_t nr = P.L.rows - r0 < rows_per_launch ? P.L.rows - r0 : rows_per_launch;
        P.L.row0 = r0;
        dim3 grid((unsigned)gx, (unsigned)((nr + 15) / 16));
        BFP_LAUNCH(nv2d_kernel<FMT>, grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

/* bf16 output, rows of whole blocks, vector-aligned codes and output (6-bit
 * codes and HiF4 scales 4-byte aligned): the flat kernel
 * (bfp_cuda_dequant_fast.cuh) on a grid of at most FLAT_CTAS_PER_SM CTAs per
 * SM, each striding over the chunks. Measured on the H200 at 16384^2
 * (docs/gpu.md): a resident grid (4-5 CTAs per SM) left the 4-bit formats at
 * 88-89% of copy and NVFP4+ at 84%; 96 per SM gives 93% and 90%. One chunk
 * per warp (no loop) is as fast for the MX formats but slower for the NVFP4
 * ones, whose CTAs each build their decode tables first. */
constexpr unsigned FLAT_CTAS_PER_SM = 96;

template <int FMT>
bfp_status launch_dequant_flat(const DParams &P, size_t ngroups, cudaStream_t s)
{
    static unsigned cached = 0;
    if (!cached) {
        int dev = 0, sms = 0;
        CUDA_OK(cudaGetDevice(&dev));
        CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        unsigned per_sm = FLAT_CTAS_PER_SM;
        /* BFP_DEQUANT_CTAS_PER_SM: a tuning knob for benchmarks */
        const char *e = getenv("BFP_DEQUANT_CTAS_PER_SM");
        if (e && atoi(e) > 0 && atoi(e) <= 1 << 20)
            per_sm = (unsigned)atoi(e);
        cached = (unsigned)(sms > 0 ? sms : 1) * per_sm;
    }
    constexpr size_t CTA_GROUPS = 8 * 32 * flat_fu<FMT>(); /* groups per CTA per step */
    size_t need = (ngroups + CTA_GROUPS - 1) / CTA_GROUPS;
    unsigned ctas = need < cached ? (unsigned)need : cached;
    BFP_LAUNCH(dequant_flat_kernel<FMT>, ctas, 256, s, P, ngroups);
    CUDA_OK(cudaGetLastError());
    return BFP_OK;
}

/* Plain 8-bit MX formats keep the 8-elements-per-thread kernel: measured on
 * the H200 at 16384^2 it reached 97% of copy for them, the flat one 90-91%
 * (their 8-byte code loads already keep enough bytes in flight) */
template <int FMT>
__host__ __device__ constexpr bool dequant_flat_fmt()
{
    return !(fmt_of(FMT).fam == BFP_FAMILY_MX && grid_of(fmt_of(FMT).elem).bits == 8);
}

template <int FMT>
bfp_status launch_dequant(DParams P, const Tiling &t, cudaStream_t s)
{
    static_assert(fmt_known(FMT), "not a format with CUDA kernels (format_defs.h)");
    if (dequant_flat_fmt<FMT>() && P.dt == BFP_DTYPE_BF16 && P.vec_in && P.vec_out &&
        P.L.cols % fmt_of(FMT).block == 0 &&
        P.L.rows > 0 && P.L.cols > 0 &&
        (fmt_of(FMT).fam != BFP_FAMILY_HIF4 || (uintptr_t)P.scales % 4 == 0) &&
        (grid_of(fmt_of(FMT).elem).bits != 6 || (uintptr_t)P.codes % 4 == 0))
        return launch_dequant_flat<FMT>(P, P.L.rows * (P.L.cols / 8), s);
    for (size_t r0 = 0; r0 < P.L.rows; r0 += t.rows_per_launch) {
        size_t nr = P.L.rows - r0 < t.rows_per_launch ? P.L.rows - r0 : t.rows_per_launch;
        P.L.row0 = r0;
        size_t tile_rows = (size_t)t.L.rt * (size_t)P.L.qu;
        dim3 grid(t.gx, (unsigned)((nr + tile_rows - 1) / tile_rows));
        BFP_LAUNCH(dequant_kernel<FMT>, grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

} // namespace bfpcuda

/* EXTERN = extern: declare (the C API's file); empty: instantiate here */
#define BFP_FORMAT_LAUNCHERS(EXTERN, id)                                                      \
    EXTERN template bfp_status bfpcuda::launch_quant<id>(bfpcuda::QParams,                   \
                                                         const bfpcuda::Tiling &, cudaStream_t); \
    EXTERN template bfp_status bfpcuda::launch_dequant<id>(bfpcuda::DParams,                 \
                                                           const bfpcuda::Tiling &, cudaStream_t);
#define BFP_NV2D_LAUNCHER(EXTERN, id)                                                         \
    EXTERN template bfp_status bfpcuda::launch_nv2d<id>(bfpcuda::QParams, cudaStream_t);

#endif /* BFP_CUDA_KERNELS_CUH */
