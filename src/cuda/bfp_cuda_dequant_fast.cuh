/* bfp_cuda_dequant_fast.cuh - the dequantize kernel: the exact per-element
 * decoder (decode8, any output dtype) and, for bf16 output, per-block fast
 * paths that build the bf16 bits with a few integer / packed instructions
 * per element (issue #3: the decoder was instruction-issue bound).
 *
 * Every fast path is taken only where it is exact by construction (the
 * argument is written beside each); anything else (NaN / zero / huge / tiny
 * scales, NaN and Inf codes, bad MX+ / NVFP4+ planes, a bad tensor scale)
 * falls back, per thread and row, to decode8 + f32_to_bf16, which is the
 * reference's arithmetic (fp32 of the exact product, then RNE to bf16). */
#ifndef BFP_CUDA_DEQUANT_FAST_CUH
#define BFP_CUDA_DEQUANT_FAST_CUH

#include "bfp_cuda_params.cuh"
#include "bfp_cuda_quant_bf16.cuh" /* the bf16x2 helpers */

#include <cuda_fp8.h>

namespace bfpcuda {

/* ---- stores ------------------------------------------------------------------ */

__device__ __forceinline__ void store8(unsigned char *dst, int dt, size_t e, int n, bool vec,
                                       const float v[8])
{
    if (dt == BFP_DTYPE_F32) {
        if (vec && n == 8) {
            uint4 *p = reinterpret_cast<uint4 *>(dst + e * 4);
            p[0] = make_uint4(f2u(v[0]), f2u(v[1]), f2u(v[2]), f2u(v[3]));
            p[1] = make_uint4(f2u(v[4]), f2u(v[5]), f2u(v[6]), f2u(v[7]));
            return;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= n)
                break;
            uint32_t b = f2u(v[j]);
            unsigned char *p = dst + (e + (size_t)j) * 4;
            p[0] = (unsigned char)b;
            p[1] = (unsigned char)(b >> 8);
            p[2] = (unsigned char)(b >> 16);
            p[3] = (unsigned char)(b >> 24);
        }
        return;
    }
    uint32_t hv[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        hv[j] = dt == BFP_DTYPE_BF16 ? f32_to_bf16(v[j]) : f32_to_f16(v[j]);
    if (vec && n == 8) {
        *reinterpret_cast<uint4 *>(dst + e * 2) =
            make_uint4(hv[0] | hv[1] << 16, hv[2] | hv[3] << 16, hv[4] | hv[5] << 16,
                       hv[6] | hv[7] << 16);
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= n)
            break;
        unsigned char *p = dst + (e + (size_t)j) * 2;
        p[0] = (unsigned char)hv[j];
        p[1] = (unsigned char)(hv[j] >> 8);
    }
}

/* 8 bf16 values as 4 words (element 2k in the low half of w[k]) */
__device__ __forceinline__ void store_bf16x8(unsigned char *dst, size_t e, int n, bool vec,
                                             const uint32_t w[4])
{
    if (vec && n == 8) {
        *reinterpret_cast<uint4 *>(dst + e * 2) = make_uint4(w[0], w[1], w[2], w[3]);
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= n)
            break;
        uint32_t h = w[j / 2] >> (16 * (j & 1));
        unsigned char *p = dst + (e + (size_t)j) * 2;
        p[0] = (unsigned char)h;
        p[1] = (unsigned char)(h >> 8);
    }
}

/* The per-block bytes a decoder needs, in one word: the scale (HiF4: the
 * whole 32-bit scale word) and, for MX+ / NVFP4+, the meta byte << 8. */
template <int FMT>
__device__ __forceinline__ uint32_t load_aux(const DParams &P, size_t bidx)
{
    constexpr FmtT F = fmt_of(FMT);
    if (F.fam == BFP_FAMILY_HIF4) {
        const unsigned char *p = P.scales + 4 * bidx;
        return (uint32_t)__ldg(p) | (uint32_t)__ldg(p + 1) << 8 | (uint32_t)__ldg(p + 2) << 16 |
               (uint32_t)__ldg(p + 3) << 24;
    }
    uint32_t a = __ldg(P.scales + bidx);
    if (F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP ||
        F.fam == BFP_FAMILY_NVFP4_PLUS)
        a |= (uint32_t)__ldg(P.meta + bidx) << 8;
    return a;
}

/* ---- the exact decoder (every dtype; the fallback of the bf16 fast paths) ---- */

/* MX+ / MX++ block check (bfp_mxplus_block_is_bad), the part of one thread's
 * codes: nonzero if a flushed block (scale 0 / 0xFF) has a nonzero code or a
 * NaN / Inf / INT -max-1 code sits anywhere but at the block max. nn: the
 * valid codes (a partial group's padding is not checked). */
template <int FMT>
__device__ __forceinline__ uint32_t mxplus_bad_codes(PackT<grid_of(fmt_of(FMT).elem).bits> codes,
                                                     uint32_t aux, int sub, int nn)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits;
    constexpr uint32_t CMASK = (1u << W) - 1;
    constexpr Grid G = grid_of(F.elem);
    uint32_t sc = aux & 0xFFu, bmi = (aux >> 8) & 0x1Fu;
    bool empty = sc == 0u || sc == 0xFFu;
    PackT<W> vm = nn >= 8 ? ~(PackT<W>)0 : (((PackT<W>)1 << (W * (nn > 0 ? nn : 0))) - 1);
    PackT<W> cv = codes & vm;
    uint32_t bad = empty && cv != 0;
    /* E2M1, E2M3 and E3M2 have no special codes */
    if (G.kind == GK_INT || (int)CMASK / 2 > G.maxidx) {
        /* all 8 codes at once (W = 4 or 8): the excluded codes (padding, the
         * block max) become a harmless code first */
        constexpr PackT<W> ONES = (PackT<W>)0x0101010101010101ull * (W == 4 ? 0x11u : 1u);
        constexpr PackT<W> TOP = ONES << (W - 1); /* the top bit of every code */
        PackT<W> ex = ~vm;
        if ((uint32_t)sub == bmi / 8)
            ex |= (PackT<W>)CMASK << (W * (bmi % 8));
        if (G.kind == GK_INT) {
            /* special: code == TOP; any zero code of v = codes ^ TOP, with
             * the excluded codes made 1: (v - ONES) & ~v & TOP is nonzero iff
             * some code of v is zero (a borrow starts only at a zero code) */
            PackT<W> v = (codes ^ TOP) & ~ex | (ex & ONES);
            bad |= ((v - ONES) & ~v & TOP) != 0;
        } else {
            /* E4M3 mag 0x7F, E5M2 mag >= 0x7C: mag + (0x80 - first special
             * magnitude) reaches bit 7, with no carry out of the byte */
            constexpr PackT<W> ADD = ONES * (uint32_t)(CMASK / 2 - G.maxidx);
            bad |= ((((codes & ~ex) & ~TOP) + ADD) & TOP) != 0;
        }
    }
    return bad;
}

/* The block check's meta part: a flushed block with meta, a block-max index
 * past the block's nblk elements, MX+ with a delta. */
template <int FMT>
__device__ __forceinline__ bool mxplus_bad_meta(uint32_t aux, bool valid, int nblk)
{
    uint32_t sc = aux & 0xFFu, meta = (aux >> 8) & 0xFFu;
    bool empty = sc == 0u || sc == 0xFFu;
    return valid && ((empty && meta != 0) || (int)(meta & 0x1Fu) >= nblk ||
                     (fmt_of(FMT).fam == BFP_FAMILY_MX_PLUS && (meta >> 5) != 0));
}

/* The whole check over the T lanes of the block: all 32 lanes of the warp
 * must call it (it shuffles). */
template <int FMT>
__device__ __forceinline__ bool mxplus_bad(PackT<grid_of(fmt_of(FMT).elem).bits> codes, uint32_t aux,
                                           bool valid, int sub, int n, int nblk)
{
    constexpr int T = fmt_of(FMT).block / 8;
    uint32_t bad = group_or<T>(mxplus_bad_codes<FMT>(codes, aux, sub, valid ? n : 0));
    return bad != 0 || mxplus_bad_meta<FMT>(aux, valid, nblk);
}

/* Decode one thread's 8 codes of block blk exactly as the reference does.
 * MX+ / MX++ take the block check from mxplus_bad (so this shuffles never
 * and may run in a divergent branch). */
template <int FMT>
__device__ __forceinline__ void decode8(PackT<grid_of(fmt_of(FMT).elem).bits> codes, uint32_t aux,
                                        bool valid, int sub, int nblk, float s_enc, bool mpbad,
                                        float v[8])
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits;
    constexpr uint32_t CMASK = (1u << W) - 1;
    constexpr bool SPECIAL = F.elem == BFP_ELEM_E4M3 || F.elem == BFP_ELEM_E5M2;
    const float qnan = u2f(0x7FC00000u);
    if (F.fam == BFP_FAMILY_MX) {
        uint32_t sc = aux & 0xFFu;
        float s = pow2f((int)sc - 127);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t c = (uint32_t)(codes >> (W * j)) & CMASK;
            float e = code_value<F.elem, false>(c);
            if (SPECIAL && (f2u(e) & 0x7FFFFFFFu) > 0x7F800000u)
                v[j] = e; /* a NaN code stays that NaN, sign included */
            else
                v[j] = sc == 0xFFu ? qnan : __fmul_rn(e, s);
        }
    } else if (F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP) {
        uint32_t sc = aux & 0xFFu, meta = (aux >> 8) & 0xFFu;
        uint32_t bmi = meta & 0x1Fu, delta = meta >> 5;
        int se = (int)sc - 127;
        float sbm = pow2f(se), snbm = pow2f(se - (int)delta);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t c = (uint32_t)(codes >> (W * j)) & CMASK;
            uint32_t i = (uint32_t)(sub * 8 + j);
            if (sc == 0xFFu || mpbad)
                v[j] = qnan;
            else if (sc == 0u)
                v[j] = 0.0f;
            else if (i == bmi)
                v[j] = __fmul_rn(code_value<F.elem, true>(c), sbm);
            else
                v[j] = __fmul_rn(code_value<F.elem, false>(c), snbm);
        }
    } else if (F.fam == BFP_FAMILY_HIF4) {
        uint32_t w = aux, c8 = w & 0xFFu;
        float s = u2f((((c8 >> 2) + 79u) << 23) | (c8 & 3u) << 21); /* (1+m/4) 2^(e-48) */
        /* value = k * s * 2^(shift - 2), k = code & 7; exact in fp32 */
        int sh8 = (int)((w >> (8 + sub)) & 1u);
        float fa = __fmul_rn(s, pow2f(sh8 + (int)((w >> (16 + 2 * sub)) & 1u) - 2));
        float fb = __fmul_rn(s, pow2f(sh8 + (int)((w >> (17 + 2 * sub)) & 1u) - 2));
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t c = (codes >> (4 * j)) & 0xFu;
            float k = __fsub_rn(u2f(0x4B000000u | (c & 7u)), 8388608.0f);
            float m = __fmul_rn(k, j < 4 ? fa : fb);
            v[j] = c8 == 0xFFu ? qnan : u2f(f2u(m) | (c & 8u) << 28);
        }
    } else { /* NVFP4, NVFP4+ */
        constexpr bool PLUS = F.fam == BFP_FAMILY_NVFP4_PLUS;
        bool bad = !(s_enc > 0.0f) || (f2u(s_enc) & 0x7F800000u) == 0x7F800000u;
        uint32_t sc = aux & 0xFFu;
        bad = bad || (sc & 0x80u) || sc == 0x7Fu;
        uint32_t bm = 0xFFu;
        if (PLUS) {
            uint32_t meta = (aux >> 8) & 0xFFu;
            bool plain = sc <= 0x02u || sc == 0x7Fu;
            if ((meta & 0xF0u) || (plain && meta != 0) || (int)meta >= (valid ? nblk : 0))
                bad = true;
            if (!bad && sc > 0x02u)
                bm = meta;
        }
        float sb = grid_value<BFP_ELEM_E4M3, false>(sc & 0x7Fu);
        /* |q| * sb / s_enc takes two values up to powers of two:
         * d1 = sb / s_enc (q = 0.5, 1, 2, 4) and d3 = 1.5 sb / s_enc (1.5, 3, 6);
         * RN(2^k x) = 2^k RN(x) while the results stay normal */
        float d1 = __fdiv_rn(sb, s_enc), d3 = __fdiv_rn(__fmul_rn(1.5f, sb), s_enc);
        /* 2^-125: 0.5 d1 is normal; d1 finite: an overflowed d1 would make
         * 0.5 d1 Inf where fp32(0.5 sb / s_enc) is finite (s_enc < ~1e-36);
         * a d3 or 2^k d that overflows is Inf in the reference as well */
        bool fast = d1 >= 2.350988701644575e-38f && d1 <= 3.402823466e38f;
        if (fast) { /* one branch per block, not per element */
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t c = (codes >> (4 * j)) & 0xFu, mag = c & 7u;
                float base = (mag & 1u) && mag > 1u ? d3 : d1;
                int k = mag < 2u ? -1 : (int)(mag >> 1) - 1;
                float q = mag ? __fmul_rn(base, pow2f(k)) : 0.0f;
                v[j] = bad ? qnan : u2f(f2u(q) | (c & 8u) << 28);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t c = (codes >> (4 * j)) & 0xFu;
                float q = __fdiv_rn(__fmul_rn(code_value<BFP_ELEM_E2M1, false>(c), sb), s_enc);
                v[j] = bad ? qnan : q;
            }
        }
        if (PLUS && bm / 8 == (uint32_t)sub) { /* the block max, E0M3 with exponent 2 */
            int jb = (int)(bm % 8);
            uint32_t c = (codes >> (4 * jb)) & 0xFu;
            float q = __fdiv_rn(__fmul_rn(code_value<BFP_ELEM_E2M1, true>(c), sb), s_enc);
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j == jb)
                    v[j] = q;
        }
    }
}

/* ---- bf16 fast paths ------------------------------------------------------------ *
 * Packed helpers (bf2_mul, bf2_fma, prmt_sx) come from bfp_cuda_quant_bf16.cuh;
 * the uses here have exact, normal results. */

/* 8 sign-magnitude 4-bit codes (element j in bits 4j..4j+3) to 8 bf16 values
 * from a table of 8 magnitudes, given as its high bytes (hia: entries 0-3,
 * hib: 4-7) and low bytes (loa, lob); the code's bit 3 becomes bit 15.
 * PRMT picks bytes by 4-bit selectors, whose bit 3 would switch to sign
 * replication: the selectors are the magnitudes (bits 0-2) only. */
__device__ __forceinline__ void lut4_bf16(uint32_t c, uint32_t hia, uint32_t hib, uint32_t loa,
                                          uint32_t lob, uint32_t w[4])
{
    uint32_t m = c & 0x77777777u, c4 = c << 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t sel = h ? m >> 16 : m; /* PRMT reads the low 16 bits */
        uint32_t hi = __byte_perm(hia, hib, sel), lo = __byte_perm(loa, lob, sel);
        /* sign of element 4h+i to bit 7 of byte i: bit 3 of a code byte
         * (c << 4) or bit 7 (c), bytes 2h, 2h+1 */
        uint32_t sg = __byte_perm(c4, c, h ? 0x7362u : 0x5140u);
        hi |= sg & 0x80808080u;
        w[2 * h] = __byte_perm(lo, hi, 0x5140u);
        w[2 * h + 1] = __byte_perm(lo, hi, 0x7362u);
    }
}

/* Byte tables of the bf16 bits of the E2M1 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6
 * (0x0000 3F00 3F80 3FC0 4000 4040 4080 40C0) and of the integers 0..7 (HiF4,
 * 0x0000 3F80 4000 4040 4080 40A0 40C0 40E0). */
constexpr uint32_t E2M1_HIA = 0x3F3F3F00u, E2M1_HIB = 0x40404040u, E2M1_LOA = 0xC0800000u,
                   E2M1_LOB = 0xC0804000u;
constexpr uint32_t INT3_HIA = 0x40403F00u, INT3_HIB = 0x40404040u, INT3_LOA = 0x40008000u,
                   INT3_LOB = 0xE0C0A080u;

template <int ELEM>
__host__ __device__ constexpr int f16_shift()
{
    return ELEM == BFP_ELEM_E2M3 ? -6 : ELEM == BFP_ELEM_E3M2 ? -12 : 0;
}

/* Range of shared exponents se for which value * 2^se is an fp32 / bf16
 * normal number for every nonzero finite element value of ELEM, and the
 * constants of the f16 embedding below stay normal fp32 numbers. */
template <int ELEM>
__host__ __device__ constexpr int fast_se_lo()
{
    /* smallest nonzero value: 2^(1-bias-m) (FLOAT), 2^-m (INT) */
    return grid_of(ELEM).kind == GK_INT ? grid_of(ELEM).m - 126
                                        : grid_of(ELEM).bias + grid_of(ELEM).m - 127;
}
template <int ELEM>
__host__ __device__ constexpr int fast_se_hi()
{
    /* FLOAT: values < 2^(emax+1), and the multiplier 2^(se - f16_shift) <=
     * 2^127; INT: (2^23 + 2^(bits-1)) * 2^(se-m) < 2^128 (int_scaled) */
    return grid_of(ELEM).kind == GK_INT
               ? grid_of(ELEM).m + 104
               : (127 - grid_of(ELEM).emax < 127 + f16_shift<ELEM>() ? 127 - grid_of(ELEM).emax
                                                                     : 127 + f16_shift<ELEM>());
}

/* 1 if any of the 8 codes is a NaN / Inf code (E4M3 mag 0x7F, E5M2 mag >= 0x7C) */
template <int ELEM>
__device__ __forceinline__ bool any_nan_inf(uint64_t codes)
{
    if (ELEM != BFP_ELEM_E4M3 && ELEM != BFP_ELEM_E5M2)
        return false;
    constexpr uint64_t ADD = ELEM == BFP_ELEM_E4M3 ? 0x0101010101010101ull : 0x0404040404040404ull;
    /* per byte: (mag + ADD) reaches bit 7 exactly for the special magnitudes;
     * mag + ADD <= 0x82, so no carry leaves a byte */
    return (((codes & 0x7F7F7F7F7F7F7F7Full) + ADD) & 0x8080808080808080ull) != 0;
}

/* 6/8-bit FLOAT codes as 4 f16x2 words (element 2k in the low half of
 * h[k]), each f16 = value * 2^f16_shift exactly, sign and subnormal codes
 * included; finite codes only (NaN / Inf codes give garbage):
 * E5M2 is f16's top byte (shift 0); E4M3 converts exactly in hardware
 * (cvt.rn.f16x2.e4m3x2: every E4M3 value is an f16 normal); E2M3 and E3M2
 * are first rewritten as E4M3 / E5M2 bytes with the same exponent and
 * mantissa fields (s e m -> s 0 0 e m): fields at the exponent field's
 * bottom scale every value, subnormals included, by 2^(bias - bias') =
 * 2^-6 (E2M3 in E4M3) and 2^-12 (E3M2 in E5M2). */
/* 4 six-bit codes (24 bits) to bytes, sign from bit 5 to bit 7 */
__device__ __forceinline__ uint32_t six_to_bytes(uint32_t t)
{
    uint32_t p = (t & 0xFFFu) | (t << 4 & 0x0FFF0000u);     /* 2 codes per 16-bit lane */
    uint32_t y = (p & 0x003F003Fu) | (p << 2 & 0x3F003F00u); /* one per byte */
    return (y & 0x1F1F1F1Fu) | (y << 2 & 0x80808080u);
}

template <int ELEM, typename PK>
__device__ __forceinline__ void f16_pairs(PK codes, uint32_t h[4])
{
    uint32_t lo, hi; /* 4 byte codes each */
    if (grid_of(ELEM).bits == 6) {
        uint64_t c = (uint64_t)codes;
        lo = six_to_bytes((uint32_t)c);
        hi = six_to_bytes((uint32_t)(c >> 24));
    } else {
        lo = (uint32_t)(uint64_t)codes;
        hi = (uint32_t)((uint64_t)codes >> 32);
    }
    if (ELEM == BFP_ELEM_E5M2 || ELEM == BFP_ELEM_E3M2) {
        h[0] = __byte_perm(lo, 0u, 0x1404u); /* bytes 0, 1 to the lanes' top bytes */
        h[1] = __byte_perm(lo, 0u, 0x3424u);
        h[2] = __byte_perm(hi, 0u, 0x1404u);
        h[3] = __byte_perm(hi, 0u, 0x3424u);
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
                (__nv_fp8x2_storage_t)((k < 2 ? lo : hi) >> (16 * (k & 1))), __NV_E4M3);
            h[k] = (uint32_t)r.x | (uint32_t)r.y << 16;
        }
    }
}

/* Replace bf16 value j (0..7) of the 4 words w by hb if on, with one PRMT
 * per word: selector 0x3210 keeps a word, 0x3254 / 0x5410 put hb into its
 * low / high half. (A loop over w with a test on j would become a dynamic
 * index and put w in local memory.) */
__device__ __forceinline__ void put_bf16(uint32_t w[4], int j, uint32_t hb, bool on)
{
    uint32_t d = on ? ((j & 1) ? 0x5410u ^ 0x3210u : 0x3254u ^ 0x3210u) : 0u;
    uint64_t sels = 0x3210321032103210ull ^ ((uint64_t)d << (16 * (j >> 1)));
    uint32_t slo = (uint32_t)sels, shi = (uint32_t)(sels >> 32);
    w[0] = prmt_sx(w[0], hb, slo);
    w[1] = prmt_sx(w[1], hb, slo >> 16);
    w[2] = prmt_sx(w[2], hb, shi);
    w[3] = prmt_sx(w[3], hb, shi >> 16);
}

/* NVFP4+ block max: bf16 of fp32(ext(c) * sb / s_enc) for scale byte sc <
 * 0x7F and a good s_enc. ext * sb exactly: sc's bits at the exponent
 * field's bottom are sb * 2^-120 (subnormal sc included), ext * that has at
 * most 8 significant bits (at worst a subnormal multiple of 2^-130), then
 * * 2^120; the quotient's RNE to bf16 needs no NaN case (finite / finite
 * > 0). The sign of c only sets bit 15 (every step is odd in c). */
__device__ __forceinline__ uint32_t nv_bm_bf16(uint32_t sc, uint32_t c, float s_enc)
{
    float qsb = __fmul_rn(__fmul_rn(code_value<BFP_ELEM_E2M1, true>(c), u2f(sc << 20)),
                          u2f(247u << 23)); /* 2^120 */
    uint32_t qb = f2u(__fdiv_rn(qsb, s_enc));
    return (qb + 0x7FFFu + (qb >> 16 & 1u)) >> 16;
}

/* decode8_bf16's fast path of HiF4: true when it wrote w, false when the
 * block falls back */
template <int FMT>
__device__ __forceinline__ bool decode8_bf16_hif4(PackT<grid_of(fmt_of(FMT).elem).bits> codes, uint32_t aux,
                                                  int sub, uint32_t w[4])
{
    bool fast;
    /* value = k * s * 2^(shift - 2): k = code & 7 (3 bits), s = (1 + m/4)
     * 2^(e-48) (3 bits), so the product has at most 6 significant bits,
     * and lies in [2^-50, 7 * 1.75 * 2^15]: exact normal bf16 */
    uint32_t c8 = aux & 0xFFu;
    fast = c8 != 0xFFu;
    if (fast) {
        uint32_t hs = (((c8 >> 2) + 79u) << 7 | (c8 & 3u) << 5) - (2u << 7); /* bf16 s/4 */
        uint32_t sh8 = aux >> (8 + sub) & 1u;
        uint32_t ha = hs + ((sh8 + (aux >> (16 + 2 * sub) & 1u)) << 7);
        uint32_t hb = hs + ((sh8 + (aux >> (17 + 2 * sub) & 1u)) << 7);
        lut4_bf16((uint32_t)codes, INT3_HIA, INT3_HIB, INT3_LOA, INT3_LOB, w);
        w[0] = bf2_mul(w[0], ha * 0x10001u);
        w[1] = bf2_mul(w[1], ha * 0x10001u);
        w[2] = bf2_mul(w[2], hb * 0x10001u);
        w[3] = bf2_mul(w[3], hb * 0x10001u);
        return true;
    }
    return false;
}

/* decode8_bf16's fast path of NVFP4 and NVFP4+ (the CTA's table for this
 * scale byte): true when it wrote w (and patch), false when the block falls
 * back */
template <int FMT, bool FLAT>
__device__ __forceinline__ bool decode8_bf16_nv(PackT<grid_of(fmt_of(FMT).elem).bits> codes, uint32_t aux,
                                                bool valid, int sub, int nblk, float s_enc, const uint4 *nvtab,
                                                uint32_t w[4], const uint16_t *nvbm,
                                                uint32_t &patch)
{
    constexpr FmtT F = fmt_of(FMT);
    bool fast;
    uint32_t sc = aux & 0xFFu;
    uint4 t = nvtab[sc];
    fast = (t.z & 0xFFu) == 0u; /* entry 0 is 0 in a fast table */
    uint32_t bm = 0xFFu;
    if (F.fam == BFP_FAMILY_NVFP4_PLUS) {
        uint32_t meta = (aux >> 8) & 0xFFu;
        bool plain = sc <= 0x02u; /* 0x7F: not fast anyway */
        fast = fast && !((meta & 0xF0u) || (plain && meta != 0) || (int)meta >= (valid ? nblk : 0));
        if (sc > 0x02u)
            bm = meta;
    }
    if (fast) {
        lut4_bf16((uint32_t)codes, t.x, t.y, t.z, t.w, w);
        if (F.fam == BFP_FAMILY_NVFP4_PLUS && bm / 8 == (uint32_t)sub) {
            int jb = (int)(bm % 8);
            uint32_t c = ((uint32_t)codes >> (4 * jb)) & 0xFu;
            if (FLAT) { /* nv_bm_bf16 of this scale byte and magnitude */
                patch = nvbm[sc * 8 + (c & 7u)] | (c & 8u) << 12;
                return true;
            }
            put_bf16(w, jb, nv_bm_bf16(sc, c, s_enc), true);
        }
        return true;
    }
    return false;
}

/* bf16 output of one thread's 8 codes and one row: 4 words of bf16 pairs.
 * mpbad: the MX+ block check (from mxplus_bad); nvtab: the NVFP4 tables.
 * FLAT (dequant_flat_kernel): mpbad is the code part of the MX+ check only
 * (the meta part is tested here: with a good scale it is the block-max index
 * and MX+'s delta); the MX+ / NVFP4+ block max is not put into w but
 * returned as its bf16 bits in patch (else ~0u), for flat_out to put at
 * element (aux >> 8) % 8; NVFP4+ reads it from nvbm. */
template <int FMT, bool FLAT = false>
__device__ __forceinline__ void decode8_bf16(PackT<grid_of(fmt_of(FMT).elem).bits> codes, uint32_t aux,
                                             bool valid, int sub, int nblk, float s_enc, bool mpbad,
                                             const uint4 *nvtab, uint32_t w[4],
                                             const uint16_t *nvbm, uint32_t &patch)
{
    patch = ~0u;
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits;
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    bool fast;
    if (F.fam == BFP_FAMILY_MX || MXP) {
        uint32_t sc = aux & 0xFFu;
        int se = (int)sc - 127;
        /* elements but the block max: 2^(se - delta); delta is 0 for MX+ (the
         * flat path tests that below, so it need not subtract it) */
        if (F.fam == BFP_FAMILY_MX_PP || (MXP && !FLAT))
            se -= (int)(aux >> 13 & 7u);
        /* MX: the range excludes sc = 0xFF; MX+ also needs a good block and
         * sc != 0 (flushed: zeros), sc != 0xFF (NaN), sc + emax <= 254 (the
         * block max is a normal bf16) */
        fast = (unsigned)(se - fast_se_lo<F.elem>()) <=
                   (unsigned)(fast_se_hi<F.elem>() - fast_se_lo<F.elem>()) &&
               (MXP ? !mpbad && sc - 1u < 254u - (uint32_t)ext_of(F.elem).emax &&
                          (!FLAT || ((int)(aux >> 8 & 0x1Fu) < nblk &&
                                     (F.fam != BFP_FAMILY_MX_PLUS || (aux & 0xE000u) == 0)))
                    : !any_nan_inf<F.elem>((uint64_t)codes));
        if (FLAT && F.fam == BFP_FAMILY_MX_PLUS) {
            /* the same test with se = sc - 127: both scale ranges as one */
            constexpr int LO = fast_se_lo<F.elem>() + 127 > 1 ? fast_se_lo<F.elem>() + 127 : 1;
            constexpr int HI = fast_se_hi<F.elem>() + 127 < 254 - ext_of(F.elem).emax
                                   ? fast_se_hi<F.elem>() + 127
                                   : 254 - ext_of(F.elem).emax;
            fast = sc - (uint32_t)LO <= (uint32_t)(HI - LO) && !mpbad && (aux & 0xE000u) == 0 &&
                   (int)(aux >> 8 & 0x1Fu) < nblk;
        }
        if (fast) {
            if (F.elem == BFP_ELEM_E2M1) {
                /* e * 2^se for the 2-significant-bit normal bf16 e is exact
                 * and normal in this range; +-0 stays +-0 */
                lut4_bf16((uint32_t)codes, E2M1_HIA, E2M1_HIB, E2M1_LOA, E2M1_LOB, w);
                uint32_t s2 = (uint32_t)(se + 127) * 0x00800080u; /* 2^se twice */
#pragma unroll
                for (int k = 0; k < 4; k++)
                    w[k] = bf2_mul(w[k], s2);
            } else if (grid_of(F.elem).kind == GK_INT && W == 4) {
                /* k * s, s = 2^(se - m), in bf16 pairs: x = 0x4300 | (k + 8)
                 * is the bf16 of 136 + k (7 mantissa bits), and the fma
                 * x * s - 136 s rounds the exact k * s once: at most 4
                 * significant bits, normal or zero in the fast range, where
                 * s and 136 s (bf16 0x08 mantissa) are normal bf16 numbers */
                constexpr Grid G = grid_of(F.elem);
                uint32_t sb = (uint32_t)(se - G.m + 127) << 7;
                uint32_t s2 = sb * 0x10001u, n2 = (0x8000u | (sb + (7u << 7)) | 0x08u) * 0x10001u;
                uint32_t c = (uint32_t)codes ^ 0x88888888u; /* k + 8 per nibble */
                uint32_t e = c & 0x0F0F0F0Fu, o = c >> 4 & 0x0F0F0F0Fu; /* even, odd elements */
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    /* bytes e_k, 0, o_k, 0 (selector 8: the sign of byte 0 of e, 0) */
                    uint32_t x = prmt_sx(e, o, 0x8480u + 0x101u * (uint32_t)k) | 0x43004300u;
                    w[k] = bf2_fma(x, s2, n2);
                }
            } else if (grid_of(F.elem).kind == GK_INT) {
                /* k * s, s = 2^(se - m): f = 2^23 + 2^(W-1) + k is exact; the
                 * fma f * s - (2^23 + 2^(W-1)) * s rounds once, and k * s (at
                 * most 8 significant bits, normal or zero for se in the fast
                 * range) is representable: exact, and its high half is its
                 * bf16 encoding */
                constexpr Grid G = grid_of(F.elem);
                float sv = u2f((uint32_t)(se - G.m + 127) << 23);
                float nc = -u2f((uint32_t)(se - G.m + 127 + 23) << 23 | 1u << (W - 1)); /* (2^23 + 2^(W-1)) s */
                /* code bytes with the top bit flipped (c ^ 2^(W-1) = k + 2^(W-1)),
                 * INT4 spread to bytes: even elements in e, odd in o */
                uint32_t e, o;
                if (W == 8) {
                    e = (uint32_t)(uint64_t)codes ^ 0x80808080u;
                    o = (uint32_t)((uint64_t)codes >> 32) ^ 0x80808080u;
                } else {
                    uint32_t c = (uint32_t)codes ^ 0x88888888u;
                    e = c & 0x0F0F0F0Fu;
                    o = c >> 4 & 0x0F0F0F0Fu;
                }
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    /* f = 2^23 + byte: PRMT of the byte under 0x4B000000 */
                    uint32_t fa, fb;
                    if (W == 8) {
                        uint32_t r = k < 2 ? e : o;
                        fa = prmt_sx(r, 0x4B000000u, 0x7440u | (uint32_t)(2 * k & 3));
                        fb = prmt_sx(r, 0x4B000000u, 0x7440u | (uint32_t)((2 * k + 1) & 3));
                    } else {
                        fa = prmt_sx(e, 0x4B000000u, 0x7440u | (uint32_t)k);
                        fb = prmt_sx(o, 0x4B000000u, 0x7440u | (uint32_t)k);
                    }
                    w[k] = prmt_sx(f2u(__fmaf_rn(u2f(fa), sv, nc)), f2u(__fmaf_rn(u2f(fb), sv, nc)), 0x7632u);
                }
            } else {
                /* f16 value * 2^(se - f16_shift): v * 2^se exactly, a normal
                 * fp32 number (or +-0) with at most 4 significant bits, so its
                 * high half is its bf16 encoding */
                uint32_t h[4];
                f16_pairs<F.elem>(codes, h);
                float sv = u2f((uint32_t)(se - f16_shift<F.elem>() + 127) << 23);
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float fx = __half2float(__ushort_as_half((unsigned short)h[k]));
                    float fy = __half2float(__ushort_as_half((unsigned short)(h[k] >> 16)));
                    w[k] = __byte_perm(f2u(__fmul_rn(fx, sv)), f2u(__fmul_rn(fy, sv)), 0x7632u);
                }
            }
            if (MXP) { /* the block max, in the lane that holds it (no branch) */
                /* ext value 2^emax (1 + i / 2^(W-1)) * 2^se: at most 8
                 * significant bits, exponent field sc + emax in [1, 254]
                 * (checked above): an exact normal bf16 */
                constexpr Grid X = ext_of(F.elem);
                uint32_t bmi = aux >> 8 & 0x1Fu;
                int jb = (int)(bmi % 8);
                uint32_t c = (uint32_t)(codes >> (W * jb)) & ((1u << W) - 1);
                uint32_t e7 = ((aux & 0xFFu) + X.emax) << 7, hb;
                if (F.elem == BFP_ELEM_E2M1) /* c << 4 | c << 12: mantissa and sign at once */
                    hb = (c * 0x1010u & 0x8070u) | e7;
                else
                    hb = (c >> (W - 1)) << 15 | e7 | (c & (uint32_t)X.maxidx) << (7 - X.m);
                if (FLAT)
                    patch = bmi / 8 == (uint32_t)sub ? hb : ~0u;
                else
                    put_bf16(w, jb, hb, bmi / 8 == (uint32_t)sub);
            }
            return;
        }
    } else if (F.fam == BFP_FAMILY_HIF4) {
        if (decode8_bf16_hif4<FMT>(codes, aux, sub, w))
            return;
    } else if (decode8_bf16_nv<FMT, FLAT>(codes, aux, valid, sub, nblk, s_enc, nvtab, w, nvbm,
                                          patch)) {
        return;
    }
    /* fallback: the exact decoder */
    if (FLAT && MXP)
        mpbad = mpbad || mxplus_bad_meta<FMT>(aux, valid, nblk);
    float v[8];
    decode8<FMT>(codes, aux, valid, sub, nblk, s_enc, mpbad, v);
#pragma unroll
    for (int k = 0; k < 4; k++)
        w[k] = (uint32_t)f32_to_bf16(v[2 * k]) | (uint32_t)f32_to_bf16(v[2 * k + 1]) << 16;
}

/* NVFP4 bf16 table of scale byte sc (one per thread of the CTA): the bf16
 * bits of fp32(q * sb / s_enc) for the 8 magnitudes q = 0, .5, 1, 1.5, 2, 3, 4, 6,
 * as {hi bytes 0-3, hi 4-7, lo 0-3, lo 4-7}. Fast (entry 0 is zero) only if
 * the block decodes without NaN: s_enc > 0 finite, sc < 0x7F.
 * Exactness: d1 = RN(sb / s_enc), d3 = RN(1.5 sb / s_enc); the reference's
 * fp32(q sb / s_enc) is 2^k d1 or 2^k d3 (k = -1..2) while those stay normal
 * fp32 numbers (d1 >= 2^-125) and finite; RNE to bf16 commutes with 2^k as
 * well while the bf16 results are normal and finite: bf16(d3) < 2^126
 * (exponent field <= 252). Otherwise the block falls back (tiny or huge
 * sb / s_enc, e.g. s_enc = FLT_MAX). sb = 0: every value is +-0. */
__device__ __forceinline__ uint4 nv_bf16_table(uint32_t sc, float s_enc)
{
    const uint4 slow = make_uint4(0u, 0u, 1u, 0u);
    bool ts_ok = s_enc > 0.0f && (f2u(s_enc) & 0x7F800000u) != 0x7F800000u;
    if (!ts_ok || sc >= 0x7Fu)
        return slow;
    if (sc == 0u)
        return make_uint4(0u, 0u, 0u, 0u);
    float sb = grid_value<BFP_ELEM_E4M3, false>(sc);
    float d1 = __fdiv_rn(sb, s_enc), d3 = __fdiv_rn(__fmul_rn(1.5f, sb), s_enc);
    if (!(d1 >= 2.350988701644575e-38f) || !(d3 < 8.507059173023462e37f)) /* 2^-125, 2^126 */
        return slow;
    uint32_t h1 = f32_to_bf16(d1), h3 = f32_to_bf16(d3);
    if ((h3 >> 7) > 252u)
        return slow;
    /* entries: 0, h1/2, h1, h3, 2h1, 2h3, 4h1, 4h3 */
    uint32_t e01 = (h1 - 0x80u) << 16, e23 = h1 | h3 << 16;
    uint32_t e45 = (h1 + 0x80u) | (h3 + 0x80u) << 16, e67 = (h1 + 0x100u) | (h3 + 0x100u) << 16;
    return make_uint4(__byte_perm(e01, e23, 0x7531u), __byte_perm(e45, e67, 0x7531u),
                      __byte_perm(e01, e23, 0x6420u), __byte_perm(e45, e67, 0x6420u));
}

template <int FMT, int NU>
__device__ __forceinline__ void dequant_body(const DParams &P, uint4 *nvtab)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    constexpr bool NV = F.fam == BFP_FAMILY_NVFP4 || F.fam == BFP_FAMILY_NVFP4_PLUS;
    size_t row0, g;
    layout_base(P.L, row0, g);
    size_t blk = g / T;
    int sub = (int)(g % T);
    size_t col0 = blk * F.block + (size_t)sub * 8;
    int n = g < P.L.gpr && col0 < P.L.cols ? (int)min(P.L.cols - col0, (size_t)8) : 0;
    size_t off = col0 / 8 * W;
    int nb = n > 0 ? (int)min(P.crb - off, (size_t)W) : 0;
    /* elements in this block (MX+ / NVFP4+ meta check); the same for every row */
    int nblk = g < P.L.gpr && blk * F.block < P.L.cols ? (int)min(P.L.cols - blk * F.block, (size_t)F.block) : 0;
    /* all loads first */
    PackT<W> codes[NU];
    uint32_t aux[NU];
#pragma unroll
    for (int u = 0; u < NU; u++) {
        size_t row = row0 + u;
        bool valid = g < P.L.gpr && row < P.L.rows;
        codes[u] = valid && nb > 0 ? (PackT<W>)load_codes<W>(P.codes + row * P.crb + off, nb, P.vec_in)
                                   : (PackT<W>)0;
        aux[u] = valid ? load_aux<FMT>(P, row * P.G + blk) : 0u;
    }
    float s_enc = 1.0f;
    if (NV)
        s_enc = __ldg(P.tscale);
    const bool bf16 = P.dt == BFP_DTYPE_BF16;
    if (NV && bf16) { /* uniform per launch: every thread reaches the barrier */
        nvtab[threadIdx.x & 255u] = nv_bf16_table(threadIdx.x & 255u, s_enc);
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < NU; u++) {
        size_t row = row0 + u;
        bool valid = g < P.L.gpr && row < P.L.rows;
        bool mpbad = MXP ? mxplus_bad<FMT>(codes[u], aux[u], valid, sub, n, nblk) : false;
        if (bf16) {
            uint32_t w[4];
            uint32_t patch;
            decode8_bf16<FMT>(codes[u], aux[u], valid, sub, nblk, s_enc, mpbad, nvtab, w, nullptr, patch);
            if (valid && n > 0)
                store_bf16x8(P.dst, row * P.L.cols + col0, n, P.vec_out, w);
        } else {
            float v[8];
            decode8<FMT>(codes[u], aux[u], valid, sub, nblk, s_enc, mpbad, v);
            if (valid && n > 0)
                store8(P.dst, P.dt, row * P.L.cols + col0, n, P.vec_out, v);
        }
    }
}

template <int FMT>
__global__ void __launch_bounds__(256) dequant_kernel(const DParams P)
{
    constexpr FmtT F = fmt_of(FMT);
    __shared__ uint4 nvtab[F.fam == BFP_FAMILY_NVFP4 || F.fam == BFP_FAMILY_NVFP4_PLUS ? 256 : 1];
    if (P.L.qu == QU)
        dequant_body<FMT, QU>(P, nvtab);
    else
        dequant_body<FMT, 1>(P, nvtab);
}

} // namespace bfpcuda

#endif /* BFP_CUDA_DEQUANT_FAST_CUH */
