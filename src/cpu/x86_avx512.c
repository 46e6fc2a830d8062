/* x86_avx512.c - AVX-512 (F, BW, VL) kernels for every format: sixteen
 * lanes, compares into mask registers, 16- and 32-entry value tables in
 * registers for dequantization. Built with -mavx512f -mavx512bw -mavx512vl
 * plus the AVX2 flags (set per file in the top-level CMakeLists.txt); without them this file gives
 * nothing and the AVX2 kernels stay. Decisions are those of kern_scalar.h,
 * as in x86_avx2.c (whose 256-bit helpers, x86_avx2_inl.h, do the
 * eight-blocks-at-a-time scale arithmetic here too). */
#include "kern_scalar.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "x86_avx2_inl.h"

#include "x86_avx512_enc.h"
#include "x86_avx512_q16.h"

A5 void q_mx(ks_elem e, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
             uint8_t *scales, bfp_stats *st)
{
    const size_t es = esz(dt), cb = (size_t)(4 * e.bits), sbytes = 32 * es;
    const unsigned char *s = (const unsigned char *)src;
    const enck k = enck_make(e);
    size_t b = 0, nonfinite = 0;
    if (dt == BFP_DTYPE_BF16) {
        b = q_mx_groups16(e, &k, src, nb, codes, scales, &nonfinite);
        s += b * sbytes;
        codes += b * cb;
    }
    for (; b + 8 <= nb; b += 8, s += 8 * sbytes, codes += 8 * cb) {
        if (dt == BFP_DTYPE_F32)
            prefetch_span(s, 8 * sbytes);
        __m256i pm[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            pm[j] = fold16(block32_absmax16(dt, s + (size_t)j * sbytes));
        __m256i amax = hmax_8x8(pm);
        __m256i nf = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
        __m256i se = _mm256_sub_epi32(flog2_8(amax), _mm256_set1_epi32(e.emax));
        se = _mm256_min_epi32(_mm256_max_epi32(se, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
        store8_bytes(scales + b, _mm256_or_si256(_mm256_add_epi32(se, _mm256_set1_epi32(127)),
                                                 _mm256_and_si256(nf, _mm256_set1_epi32(0xFF))));
        float f[8];
        _mm256_storeu_ps(f, pow2neg_8(se));
        unsigned nfm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf));
        for (int j = 0; j < 8; j++) {
            if (nfm >> j & 1) {
                memset(codes + (size_t)j * cb, 0, cb);
                nonfinite++;
            } else {
                mx_encode16(e, &k, dt, s + (size_t)j * sbytes, _mm512_set1_ps(f[j]), codes + (size_t)j * cb);
            }
        }
    }
    for (; b < nb; b++, s += sbytes, codes += cb) {
        uint32_t amax = (uint32_t)_mm512_reduce_max_epi32(block32_absmax16(dt, s));
        if (amax >= 0x7F800000u) {
            scales[b] = 0xFF;
            memset(codes, 0, cb);
            nonfinite++;
            continue;
        }
        int se = ks_mx_shared_exp(amax, e.emax);
        scales[b] = (uint8_t)(se + 127);
        mx_encode16(e, &k, dt, s, _mm512_set1_ps(ks_pow2(-se)), codes);
    }
    st->nonfinite_blocks += nonfinite;
}

/* ---- MX+ and MX++ ----------------------------------------------------------------- */

/* One MX+ block in float32 lanes: elements at scale 2^-nbm, the block max
 * (index bm; bm < 0: found here from its magnitude amax) given its sign
 * and the extended mantissa xq. Returns bm. */
A5 int mxp_block32(ks_elem e, const enck *k, bfp_dtype dt, const unsigned char *sj, int nbm, int bm, uint32_t amax,
                   int xq, uint8_t *cj)
{
    const size_t es = esz(dt);
    __m512i x0 = ld16(dt, sj), x1 = ld16(dt, sj + 16 * es);
    __m512i a0 = abs16(x0), a1 = abs16(x1), c0, c1;
    if (bm < 0) { /* ties go to the lowest index */
        __m512i am = _mm512_set1_epi32((int)amax);
        bm = ks_ctz32((uint32_t)_mm512_cmpeq_epi32_mask(a0, am) | (uint32_t)_mm512_cmpeq_epi32_mask(a1, am) << 16);
    }
    if (-nbm <= 127) {
        __m512 f = _mm512_set1_ps(ks_pow2(-nbm));
        c0 = enc16(e, k, x0, a0, f);
        c1 = enc16(e, k, x1, a1, f);
    } else { /* MX++ of a tiny block: 2^-nbm needs two exact steps */
        __m512 f = _mm512_set1_ps(ks_pow2(-nbm - 64)), up = _mm512_set1_ps(0x1p64f);
        c0 = enc16(e, k, x0, _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(a0), up)), f);
        c1 = enc16(e, k, x1, _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(a1), up)), f);
    }
    __m512i bmv = _mm512_set1_epi32(xq | (sj[es * (size_t)bm + es - 1] >> 7) << (e.bits - 1));
    c0 = _mm512_mask_mov_epi32(c0, (__mmask16)(1u << bm), bmv);
    c1 = _mm512_mask_mov_epi32(c1, (__mmask16)((1u << bm) >> 16), bmv);
    store_codes32(e.bits, c0, c1, cj);
    return bm;
}

/* Top two of a multiset as (largest, second) pairs, 8 dword lanes (values
 * non-negative): merging (a1, a2) and (b1, b2) gives max(a1, b1) and
 * max(min(a1, b1), a2, b2). */
A5 void top2_merge8(__m256i a1, __m256i a2, __m256i b1, __m256i b2, __m256i *m1, __m256i *m2)
{
    *m1 = _mm256_max_epi32(a1, b1);
    *m2 = _mm256_max_epi32(_mm256_min_epi32(a1, b1), _mm256_max_epi32(a2, b2));
}

/* A float32-lane block's |x| as (largest, second) pairs in 8 lanes. */
A5 void top2_block32(bfp_dtype dt, const unsigned char *s, __m256i *t1, __m256i *t2)
{
    __m512i a0 = abs16(ld16(dt, s)), a1 = abs16(ld16(dt, s + 16 * esz(dt)));
    __m512i m1 = _mm512_max_epi32(a0, a1), m2 = _mm512_min_epi32(a0, a1);
    top2_merge8(_mm512_castsi512_si256(m1), _mm512_castsi512_si256(m2), _mm512_extracti64x4_epi64(m1, 1),
                _mm512_extracti64x4_epi64(m2, 1), t1, t2);
}

/* hmax_8x8() of v1 and, in *second, lane j: the second largest of block j
 * (the largest again where it repeats), from its pairs (v1[j], v2[j]). */
A5 __m256i hmax_8x8_top2(const __m256i *v1, const __m256i *v2, __m256i *second)
{
    __m256i q1[4], q2[4], h1[2], h2[2], r1, r2;
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        top2_merge8(_mm256_unpacklo_epi32(v1[2 * i], v1[2 * i + 1]), _mm256_unpacklo_epi32(v2[2 * i], v2[2 * i + 1]),
                    _mm256_unpackhi_epi32(v1[2 * i], v1[2 * i + 1]), _mm256_unpackhi_epi32(v2[2 * i], v2[2 * i + 1]),
                    &q1[i], &q2[i]);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        top2_merge8(_mm256_unpacklo_epi64(q1[2 * i], q1[2 * i + 1]), _mm256_unpacklo_epi64(q2[2 * i], q2[2 * i + 1]),
                    _mm256_unpackhi_epi64(q1[2 * i], q1[2 * i + 1]), _mm256_unpackhi_epi64(q2[2 * i], q2[2 * i + 1]),
                    &h1[i], &h2[i]);
    top2_merge8(_mm256_permute2x128_si256(h1[0], h1[1], 0x20), _mm256_permute2x128_si256(h2[0], h2[1], 0x20),
                _mm256_permute2x128_si256(h1[0], h1[1], 0x31), _mm256_permute2x128_si256(h2[0], h2[1], 0x31),
                &r1, &r2);
    *second = r2;
    return r1;
}

/* The scale side of eight MX+ / MX++ blocks from their max |x| (float32
 * bits) and, MX++, the others' max: shared exponents, scale bytes, block-max
 * mantissas, the others' exponents (MX+: se) and which blocks are empty. */
typedef struct {
    __m256i nf, se, empty, sc, xq, nbm;
} mxps8;

/* fl2n: floor(log2) of normal numbers only (the biased exponent less 127),
 * for mxp_side16(): a subnormal max there gives an empty block either way
 * (scale byte 0, codes and meta zeroed by mxp_groups16()), a subnormal
 * second max an nbm below Q16_MIN_S or the clamp's se - 7 either way, and
 * mxp_side16() gives groups with such an nbm back to the exact path. */
A5 __m256i fl2n_8(__m256i a, int normal)
{
    return normal ? _mm256_sub_epi32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32(127)) : flog2_8(a);
}

A5 mxps8 mxp_scales8(ks_elem e, int pp, int normal, __m256i amax, __m256i max2)
{
    const int xmb = e.bits - 1;
    mxps8 o;
    o.nf = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
    __m256i se = _mm256_sub_epi32(fl2n_8(amax, normal), _mm256_set1_epi32(e.emax));
    o.empty = _mm256_or_si256(o.nf, _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), se)); /* NaN or flushed */
    se = _mm256_max_epi32(_mm256_min_epi32(se, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
    o.sc = _mm256_or_si256(_mm256_andnot_si256(o.empty, _mm256_add_epi32(se, _mm256_set1_epi32(127))),
                           _mm256_and_si256(o.nf, _mm256_set1_epi32(0xFF)));
    __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(amax), pow2neg_8(se)); /* in [2^emax, 2^(emax+1)) */
    __m256i xq = _mm256_sub_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_set1_ps(ks_pow2(xmb - e.emax)))),
                                  _mm256_set1_epi32(1 << xmb));
    o.xq = _mm256_max_epi32(_mm256_min_epi32(xq, _mm256_set1_epi32((1 << xmb) - 1)), _mm256_setzero_si256());
    o.se = o.nbm = se;
    if (pp) { /* MX++: the others' scale, from their max (ks_mxpp_nbm_exp) */
        __m256i ev = _mm256_sub_epi32(fl2n_8(max2, normal), _mm256_set1_epi32(e.emax - 1));
        ev = _mm256_min_epi32(_mm256_max_epi32(ev, _mm256_sub_epi32(se, _mm256_set1_epi32(7))), se);
        o.nbm = _mm256_blendv_epi8(ev, se, _mm256_cmpeq_epi32(max2, _mm256_setzero_si256()));
    }
    return o;
}

/* The scale side of eight MX+ / MX++ bfloat16 blocks, for mxp_groups16():
 * the scale bytes (written), and the per-block words of enc32w_bm() as
 * pairs (read back by broadcasts from memory) with the meta bytes. */
typedef struct {
    uint32_t amv[8], parv[8], parkv[8], xqv[8]; /* max word, q16 words of nbm, block-max mantissa */
    uint64_t meta;                              /* (se - nbm) << 5 per byte, bm still to add */
    unsigned empty, nf;                         /* masks: empty blocks (codes and meta 0), non-finite ones */
} mxpw8;

/* Returns 0, writing nothing, if a block that is not empty has its nbm below
 * Q16_MIN_S (q_mxplus does such groups). Empty blocks (NaN, Inf or flushed)
 * get their scale byte here and zero codes and meta in mxp_groups16(). */
A5 int mxp_side16(ks_elem e, int pp, const q16k *c, const unsigned char *s, uint8_t *scales, mxpw8 *w)
{
    prefetch_span(s, 8 * 64);
    __m512i h[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        h[j] = _mm512_and_si512(_mm512_loadu_si512(s + 64 * j), c->abs);
    __m256i max2 = _mm256_setzero_si256();
    const __m256i amax = pp ? hmax8w_top2(h, &max2) : hmax8w(h);
    const mxps8 o = mxp_scales8(e, pp, 1, amax, max2);
    if (_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_andnot_si256(o.empty, _mm256_cmpgt_epi32(_mm256_set1_epi32(Q16_MIN_S), o.nbm)))))
        return 0;
    w->empty = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(o.empty));
    w->nf = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(o.nf));
    store8_bytes(scales, o.sc);
    const __m256i par8 = q16_param8(e, o.nbm);
    _mm256_storeu_si256((__m256i *)w->parv, par8);
    _mm256_storeu_si256((__m256i *)w->parkv, _mm256_add_epi32(par8, _mm256_set1_epi32((int)q16_park(e, 0))));
    _mm256_storeu_si256((__m256i *)w->amv, _mm256_or_si256(amax, _mm256_srli_epi32(amax, 16)));
    _mm256_storeu_si256((__m256i *)w->xqv, _mm256_or_si256(o.xq, _mm256_slli_epi32(o.xq, 16)));
    store8_bytes((uint8_t *)&w->meta,
                 _mm256_andnot_si256(o.empty, _mm256_slli_epi32(_mm256_sub_epi32(o.se, o.nbm), 5)));
    return 1;
}

/* MX+ / MX++ blocks of bfloat16 in groups of eight from the start, while no
 * block of a group that is not empty has its nbm below Q16_MIN_S (the
 * common case). Software-pipelined: the scale side of the next group (a
 * long dependency chain) is issued before this group's codes. Returns the
 * blocks done, a multiple of 8 (q_mxplus does the group it stopped at). */
A5 size_t mxp_groups16(ks_elem e, int pp, const q16k *c, __m512i madd, const unsigned char *s, size_t nb,
                       uint8_t *codes, uint8_t *scales, uint8_t *meta, size_t *nonfinite, size_t *flushed)
{
    const size_t cb = (size_t)(4 * e.bits);
    mxpw8 w[2];
    size_t b = 0;
    int more = nb >= 8 && mxp_side16(e, pp, c, s, scales, &w[0]);
    for (; more; b += 8, s += 8 * 64, codes += 8 * cb) {
        const mxpw8 *cur = &w[b / 8 & 1];
        more = b + 16 <= nb && mxp_side16(e, pp, c, s + 8 * 64, scales + b + 8, &w[(b / 8 + 1) & 1]);
        __asm__("" : "+r"(cur)); /* broadcasts from memory, not shuffles of the vectors stored */
        uint64_t m = cur->meta;
        __m512i q[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512i x = _mm512_loadu_si512(s + 64 * j), h = _mm512_and_si512(x, c->abs);
            /* the block max: the first lane holding the max word (in an empty
             * block perhaps none: fixed up below) */
            uint32_t eq = (uint32_t)_mm512_cmpeq_epi16_mask(h, _mm512_set1_epi32((int)cur->amv[j]));
            q[j] = enc32w_bm(e, c, x, h, _mm512_set1_epi32((int)cur->parv[j]), _mm512_set1_epi32((int)cur->parkv[j]),
                             eq & (0u - eq), _mm512_set1_epi32((int)cur->xqv[j]));
            if (e.bits != 4)
                store_codes32w(e.bits, q[j], madd, codes + (size_t)j * cb);
            else if (j % 4 == 3)
                store_codes4x32w4(q + j - 3, madd, codes + (size_t)(j - 3) * cb);
            m |= (uint64_t)ks_ctz32(eq | 0x80000000u) << 8 * j;
        }
        memcpy(meta + b, &m, 8);
        if (cur->empty) { /* rare: codes and meta 0 (a branch keeps the common case as it was) */
            for (unsigned em = cur->empty; em; em &= em - 1) {
                const unsigned j = (unsigned)ks_ctz32(em);
                memset(codes + j * cb, 0, cb);
                meta[b + j] = 0;
            }
            *nonfinite += (size_t)__builtin_popcount(cur->empty & cur->nf);
            *flushed += (size_t)__builtin_popcount(cur->empty & ~cur->nf);
        }
    }
    return b;
}

A5 void q_mxplus(ks_elem e, bfp_dtype dt, const bfp_qparams *p, const void *src, size_t nb,
                 uint8_t *codes, uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int pp = p->impl->info.family == BFP_FAMILY_MX_PP;
    /* bfloat16 in 16-bit lanes; MX++ INT grids (none exist) would need k < 1 */
    const int w16 = dt == BFP_DTYPE_BF16 && !(pp && e.kind == BFP_GRID_INT);
    const size_t es = esz(dt), cb = (size_t)(4 * e.bits), sbytes = 32 * es;
    const unsigned char *s = (const unsigned char *)src;
    const q16k c = q16k_make(e);
    const enck k = enck_make(e);
    const __m512i madd = keep512(_mm512_set1_epi32(0x00100001));
    size_t nonfinite = 0, flushed = 0;
    for (size_t b = 0; b < nb; b += 8, s += 8 * sbytes, codes += 8 * cb) {
        if (w16) { /* the common case; the loop below does the rest */
            const size_t d = mxp_groups16(e, pp, &c, madd, s, nb - b, codes, scales + b, meta + b,
                                          &nonfinite, &flushed);
            b += d, s += d * sbytes, codes += d * cb;
            if (b >= nb)
                break;
        }
        const size_t g = nb - b < 8 ? nb - b : 8;
        /* eight blocks' maxima, shared exponents and block-max codes at once */
        if (dt != BFP_DTYPE_F16) /* bf16 gains too on Zen 4 */
            prefetch_span(s, g * sbytes);
        __m512i h[8];
        __m256i pm[8], amax;
        __m256i max2w = _mm256_setzero_si256(); /* MX++ */
        if (w16) {
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                h[j] = (size_t)j < g ? _mm512_and_si512(_mm512_loadu_si512(s + (size_t)j * sbytes), c.abs)
                                     : _mm512_setzero_si512();
            amax = pp ? hmax8w_top2(h, &max2w) : hmax8w(h);
        } else if (pp) { /* the others' max with the block max: top two */
            __m256i p2[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                h[j] = _mm512_setzero_si512(); /* unused */
                pm[j] = p2[j] = _mm256_setzero_si256();
                if ((size_t)j < g)
                    top2_block32(dt, s + (size_t)j * sbytes, &pm[j], &p2[j]);
            }
            amax = hmax_8x8_top2(pm, p2, &max2w);
        } else {
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                h[j] = _mm512_setzero_si512(); /* unused */
                pm[j] = (size_t)j < g ? fold16(block32_absmax16(dt, s + (size_t)j * sbytes)) : _mm256_setzero_si256();
            }
            amax = hmax_8x8(pm);
        }
        const mxps8 o = mxp_scales8(e, pp, 0, amax, max2w);
        const __m256i nf = o.nf, se = o.se, empty = o.empty, sc = o.sc, nbm = o.nbm;
        __m256i xq = o.xq;
        int sev[8], nbmv[8], xqv[8];
        uint32_t amv[8], parv[8], parkv[8];
        _mm256_storeu_si256((__m256i *)amv, amax);
        if (w16) { /* word pairs for the 16-bit lanes */
            const __m256i par8 = q16_param8(e, nbm);
            _mm256_storeu_si256((__m256i *)parv, par8);
            _mm256_storeu_si256((__m256i *)parkv, _mm256_add_epi32(par8, _mm256_set1_epi32((int)q16_park(e, 0))));
            _mm256_storeu_si256((__m256i *)amv, _mm256_or_si256(amax, _mm256_srli_epi32(amax, 16)));
            xq = _mm256_or_si256(xq, _mm256_slli_epi32(xq, 16));
        }
        uint8_t sc8[8];
        _mm256_storeu_si256((__m256i *)sev, se);
        _mm256_storeu_si256((__m256i *)nbmv, nbm);
        _mm256_storeu_si256((__m256i *)xqv, xq);
        store8_bytes(sc8, sc);
        memcpy(scales + b, sc8, g);
        const unsigned emptym = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(empty));
        const unsigned nfm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf));
#pragma GCC unroll 1
        for (int j = 0; j < 8; j++) {
            if ((size_t)j >= g)
                break;
            uint8_t *cj = codes + (size_t)j * cb;
            if (emptym >> j & 1) { /* codes and meta 0 */
                meta[b + j] = 0;
                memset(cj, 0, cb);
                nonfinite += nfm >> j & 1;
                flushed += !(nfm >> j & 1);
                continue;
            }
            const unsigned char *sj = s + (size_t)j * sbytes;
            const int nb_j = nbmv[j];
            int bm = -1; /* float32 lanes: mxp_block32 finds it */
            uint32_t eq = 0;
            if (w16) { /* the first lane holding the max word */
                eq = (uint32_t)_mm512_cmpeq_epi16_mask(h[j], _mm512_broadcastd_epi32(_mm_loadu_si32(amv + j)));
                bm = ks_ctz32(eq);
            }
            if (w16 && nb_j >= Q16_MIN_S) {
                /* the block max: its sign and the extended mantissa */
                __m512i q = enc32w_bm(e, &c, _mm512_loadu_si512(sj), h[j], _mm512_set1_epi32((int)parv[j]),
                                      _mm512_set1_epi32((int)parkv[j]),
                                      eq & (0u - eq), _mm512_broadcastd_epi32(_mm_loadu_si32(xqv + j)));
                store_codes32w(e.bits, q, madd, cj);
            } else {
                bm = mxp_block32(e, &k, dt, sj, nb_j, bm, amv[j], xqv[j] & 0xFFFF, cj);
            }
            meta[b + j] = (uint8_t)(bm | (sev[j] - nb_j) << 5);
        }
    }
    st->nonfinite_blocks += nonfinite;
    st->flushed_blocks += flushed;
}

/* ---- HiF4 ----------------------------------------------------------------------------- */

/* Exactly a * r >= th: the FMA rounds a * r - th once, which keeps its sign. */
A5 __mmask16 ge_exact16(__m512 a, __m512 r, __m512 th)
{
    return _mm512_cmp_ps_mask(_mm512_fmsub_ps(a, r, th), _mm512_setzero_ps(), _CMP_GE_OQ);
}

/* UE6M2 codes of eight blocks from their max |x| (ks_hif4_code, in float64
 * lanes: Vmax * BF16(1/7) is exact there). */
A5 __m256i hif4_code8(__m256i vmax)
{
    const __m512i one = _mm512_set1_epi64(1);
    __m512d v = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(vmax)), _mm512_set1_pd(0.142578125));
    __mmask8 small = _mm512_cmp_pd_mask(v, _mm512_set1_pd(0x1p-48), _CMP_LT_OQ); /* SF = 2^-48 */
    __m512i b = _mm512_castpd_si512(v);
    b = _mm512_add_epi64(b, _mm512_add_epi64(_mm512_set1_epi64(((int64_t)1 << 44) - 1),
                                             _mm512_and_si512(_mm512_srli_epi64(b, 45), one)));
    b = _mm512_and_si512(b, _mm512_set1_epi64(~(((int64_t)1 << 45) - 1))); /* BF16 */
    b = _mm512_castpd_si512(_mm512_min_pd(_mm512_castsi512_pd(b), _mm512_set1_pd(49152.0)));
    b = _mm512_add_epi64(b, _mm512_add_epi64(_mm512_set1_epi64(((int64_t)1 << 49) - 1),
                                             _mm512_and_si512(_mm512_srli_epi64(b, 50), one))); /* E6M2 */
    __m512i ex = _mm512_sub_epi64(_mm512_srli_epi64(b, 52), _mm512_set1_epi64(1023 - 48));
    __m512i code = _mm512_or_si512(_mm512_slli_epi64(ex, 2), _mm512_and_si512(_mm512_srli_epi64(b, 50),
                                                                               _mm512_set1_epi64(3)));
    return _mm512_cvtepi64_epi32(_mm512_maskz_mov_epi64((__mmask8)~small, code));
}

/* REC = BF16(1 / E6M2) of eight UE6M2 codes (ks_hif4_rec). */
A5 __m256 hif4_rec8(__m256i code)
{
    __m256 m = _mm256_permutevar8x32_ps(_mm256_setr_ps(1.0f, 0.80078125f, 0.66796875f, 0.5703125f, 0, 0, 0, 0),
                                        _mm256_and_si256(code, _mm256_set1_epi32(3)));
    __m256i e = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127 + 48), _mm256_srli_epi32(code, 2)), 23);
    return _mm256_mul_ps(m, _mm256_castsi256_ps(e));
}

/* The 16 group maxima of a 64-element block, in order, from its four vectors. */
A5 __m512i hif4_v16(const __m512i *a)
{
    __m512i g[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512i m = _mm512_max_epi32(a[k], _mm512_shuffle_epi32(a[k], (_MM_PERM_ENUM)0xB1));
        g[k] = _mm512_max_epi32(m, _mm512_shuffle_epi32(m, (_MM_PERM_ENUM)0x4E)); /* max of 4 */
    }
    const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 8, 12, 16, 20, 24, 28);
    return _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi32(g[0], lo, g[1]),
                                   _mm512_permutex2var_epi32(g[2], hi, g[3]));
}

/* hif4_v16() of a bfloat16 block straight from its 16-bit words: the max
 * of each group of four is word 3 of a qword after two shift-max steps, the
 * high half of its odd dword; one two-source permutation gathers those
 * (the down-converting vpmovqd it replaces costs two uops on Zen 4). */
A5 __m512i hif4_v16w(const unsigned char *s)
{
    __m512i g[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
        __m512i h = _mm512_and_si512(_mm512_loadu_si512(s + 64 * k), _mm512_set1_epi16(0x7FFF));
        h = _mm512_max_epu16(h, _mm512_slli_epi64(h, 16));
        g[k] = _mm512_max_epu16(h, _mm512_slli_epi64(h, 32));
    }
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_and_si512(_mm512_permutex2var_epi32(g[0], odd, g[1]), _mm512_set1_epi32((int)0xFFFF0000u));
}

/* HiF4 codes of one bfloat16 block (64 words) into 32 bytes, in 16-bit lanes
 * (twice the elements per instruction of widening to float32). Exact: with
 * h = |x| bits, E1 = max(h >> 7, 1), |x| = sig 2^(E1 - 134) (sig < 256), and
 * R' = 4 REC / 2^drop = M 2^(42 - ce - drop) (M = 256, 205, 171, 146 for the
 * UE6M2 code's low bits, ce its exponent field), so |x| R' = P / 2^k with
 * P = sig M < 2^16 and k = 92 + ce + drop - E1. n = floor(P / 2^k + 1/2)
 * (ties away) is ((P >> (k - 1)) + 1) >> 1; where k <= 0 the count 0 gives
 * (P + 1) >> 1 >= 73 for x != 0 (P >= 146), capped to 7 as |x| R' >= 7.5 is;
 * counts of 16 and more give 0, right as P / 2^k < 1/2 there. */
/* The constants of hif4_enc64w(), made once per call (keep512). */
typedef struct {
    __m512i one, c7fff, seven, eight, madd, order, grp[2];
} h16k;

A5 h16k h16k_make(void)
{
    static const uint16_t grp[64] = { /* word 0 of the dword of each word's group */
         0,  0,  0,  0,  2,  2,  2,  2,  4,  4,  4,  4,  6,  6,  6,  6,
         8,  8,  8,  8, 10, 10, 10, 10, 12, 12, 12, 12, 14, 14, 14, 14,
        16, 16, 16, 16, 18, 18, 18, 18, 20, 20, 20, 20, 22, 22, 22, 22,
        24, 24, 24, 24, 26, 26, 26, 26, 28, 28, 28, 28, 30, 30, 30, 30};
    h16k c;
    c.one = keep512(_mm512_set1_epi16(1));
    c.c7fff = keep512(_mm512_set1_epi16(0x7FFF));
    c.seven = keep512(_mm512_set1_epi16(7));
    c.eight = keep512(_mm512_set1_epi16(8));
    c.madd = keep512(_mm512_set1_epi16(0x1001));
    c.order = keep512(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0));
    c.grp[0] = keep512(_mm512_loadu_si512(grp));
    c.grp[1] = keep512(_mm512_loadu_si512(grp + 32));
    return c;
}

A5 void hif4_enc64w(const h16k *c, const unsigned char *s, int code, __mmask16 g8, __mmask16 g16, uint8_t *out)
{
    static const uint16_t msig[4] = {256, 205, 171, 146};
    /* k - 2 + E1 per group (drop = g8 + g16), in the low word of its dword
     * (c->one adds 1 to both words: the high ones are not read) */
    __m512i base = _mm512_set1_epi32(90 + (code >> 2));
    base = _mm512_mask_add_epi32(base, g8, base, c->one);
    base = _mm512_mask_add_epi32(base, g16, base, c->one);
    const __m512i m = _mm512_set1_epi16((short)msig[code & 3]);
    __m512i n[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
        __m512i x = _mm512_loadu_si512(s + 64 * k);
        __m512i h = _mm512_and_si512(x, c->c7fff);
        __m512i e0 = _mm512_subs_epu16(_mm512_srli_epi16(h, 7), c->one); /* E1 - 1 */
        __m512i sig = _mm512_sub_epi16(h, _mm512_slli_epi16(e0, 7));
        __m512i kb = _mm512_permutexvar_epi16(c->grp[k], base);
        __m512i cnt = _mm512_subs_epu16(kb, e0); /* max(k - 1, 0) */
        __m512i t = _mm512_srlv_epi16(_mm512_mullo_epi16(sig, m), cnt);
        n[k] = _mm512_min_epu16(_mm512_avg_epu16(t, _mm512_setzero_si512()), c->seven); /* (t + 1) >> 1 */
        n[k] = _mm512_mask_add_epi16(n[k], _mm512_movepi16_mask(x), n[k], c->eight); /* n < 8: add = or */
    }
    /* as bytes, 128-bit lane L holds words 8L..8L+7 of n[0], then of n[1];
     * c0 + 16 c1 joins the pairs, a second pack makes them bytes, and a
     * dword permutation puts the lanes' four-byte pieces in order (single-uop
     * steps: the down-converting vpmovdb costs two on Zen 4) */
    __m512i w = _mm512_maddubs_epi16(_mm512_packus_epi16(n[0], n[1]), c->madd);
    w = _mm512_permutexvar_epi32(c->order, _mm512_packus_epi16(w, w));
    _mm256_storeu_si256((__m256i *)out, _mm512_castsi512_si256(w));
}

/* A group of up to eight HiF4 blocks between the two stages: the scale side
 * (group maxima, UE6M2 codes and REC in float64 lanes: a long dependency
 * chain) and the per-block side (flags, scale words, codes). q_hif4 runs
 * the scale side of the next group before the per-block side of this one,
 * so that out-of-order execution overlaps that chain with independent
 * work (as x86_avx512_nv.h does for NVFP4). */
typedef struct {
    __m512i v16[8];
    int codev[8];
    float recv[8];
    unsigned nfm;
} h4stage;

A5 void hif4_stage_scales(bfp_dtype dt, const unsigned char *s, size_t g, h4stage *st)
{
    const size_t es = esz(dt), sbytes = 64 * es;
    if (dt != BFP_DTYPE_F16)
        prefetch_span(s, g * sbytes);
    __m256i pm[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        if ((size_t)j < g) {
            if (dt == BFP_DTYPE_BF16) {
                st->v16[j] = hif4_v16w(s + (size_t)j * sbytes);
            } else {
                __m512i a[4];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    a[k] = abs16(ld16(dt, s + (size_t)j * sbytes + (size_t)k * 16 * es));
                st->v16[j] = hif4_v16(a);
            }
            pm[j] = fold16(st->v16[j]);
        } else {
            st->v16[j] = _mm512_setzero_si512();
            pm[j] = _mm256_setzero_si256();
        }
    }
    __m256i vmax = hmax_8x8(pm);
    __m256i code8 = hif4_code8(vmax);
    _mm256_storeu_si256((__m256i *)st->codev, code8);
    _mm256_storeu_ps(st->recv, hif4_rec8(code8));
    st->nfm = (unsigned)_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(vmax, _mm256_set1_epi32(0x7F7FFFFF))));
}

A5 void hif4_stage_codes(bfp_dtype dt, const h16k *hk, const h4stage *st, const unsigned char *s, size_t g,
                         uint8_t *codes, uint8_t *scales, size_t *nonfinite)
{
    const size_t es = esz(dt), sbytes = 64 * es;
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f);
    const __m512 half = _mm512_set1_ps(0.5f), cap = _mm512_set1_ps(7.5f);
    for (size_t j = 0; j < g; j++) {
        uint8_t *cj = codes + 32 * j;
        if (st->nfm >> j & 1) { /* NaN or Inf: NaN word, flags and codes 0 */
            ks_store_le32(scales + 4 * j, 0xFFu);
            memset(cj, 0, 32);
            (*nonfinite)++;
            continue;
        }
        const __m512 r = _mm512_set1_ps(st->recv[j]);
        __m512i v16 = st->v16[j];
        __m512i v8 = _mm512_max_epi32(v16, _mm512_shuffle_epi32(v16, (_MM_PERM_ENUM)0xB1));
        __m512 f8 = _mm512_castsi512_ps(v8), f16 = _mm512_castsi512_ps(v16);
        __mmask16 g8 = ge_exact16(f8, r, four);
        __mmask16 g16 = ge_exact16(f16, r, _mm512_mask_mov_ps(two, g8, four));
        uint32_t m8 = (uint32_t)g8 & 0x5555u; /* pairs agree: keep the even bits */
        m8 = (m8 | m8 >> 1) & 0x3333u;
        m8 = (m8 | m8 >> 2) & 0x0F0Fu;
        m8 = (m8 | m8 >> 4) & 0x00FFu;
        ks_store_le32(scales + 4 * j, (uint32_t)st->codev[j] | m8 << 8 | (uint32_t)g16 << 16);
        /* per group: the exponent drop E1_8 + E1_16, then R' = 4 REC / 2^drop */
        if (dt == BFP_DTYPE_BF16) {
            hif4_enc64w(hk, s + j * sbytes, st->codev[j], g8, g16, cj);
            continue;
        }
        __m512i drop = _mm512_add_epi32(_mm512_maskz_mov_epi32(g8, _mm512_set1_epi32(1 << 23)),
                                        _mm512_maskz_mov_epi32(g16, _mm512_set1_epi32(1 << 23)));
        __m512i rtab = _mm512_sub_epi32(_mm512_set1_epi32((int)ks_bits(st->recv[j] * 4.0f)), drop);
        const unsigned char *sj = s + j * sbytes;
        __m512i c[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i gi = _mm512_setr_epi32(4 * k, 4 * k, 4 * k, 4 * k, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1,
                                           4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 3, 4 * k + 3,
                                           4 * k + 3, 4 * k + 3);
            __m512i x = ld16(dt, sj + (size_t)k * 16 * es);
            __m512 rk = _mm512_castsi512_ps(_mm512_permutexvar_epi32(gi, rtab));
            __m512 af = _mm512_castsi512_ps(abs16(x));
            /* n = floor(|x| R' + 1/2), ties away: the FMA rounds the exact sum
             * down, which never crosses an integer (integers are floats), so
             * its floor is exact; capped at 7.5 (the scale saturates) */
            __m512 u = _mm512_fmadd_round_ps(af, rk, half, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m512i n = _mm512_cvt_roundps_epi32(_mm512_min_ps(u, cap), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            c[k] = _mm512_mask_or_epi32(n, _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512()), n,
                                        _mm512_set1_epi32(8));
        }
        _mm256_storeu_si256((__m256i *)cj, nib_bytes64(c));
    }
}

A5 void q_hif4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
               uint8_t *scales, bfp_stats *st)
{
    (void)p; /* the AVX2 kernel's signature (x86_quant_table.h) */
    const size_t gb = 8 * 64 * esz(dt), ng = nb / 8;
    const unsigned char *s = (const unsigned char *)src;
    const h16k hk = h16k_make();
    size_t nonfinite = 0;
    h4stage stg[2];
    if (dt != BFP_DTYPE_BF16) { /* float32: pipelined was slower at 64 MiB (15.1 -> 13.6 GB/s), though
                                 * faster in cache */
        for (size_t i = 0; i < ng; i++) {
            hif4_stage_scales(dt, s + i * gb, 8, &stg[0]);
            hif4_stage_codes(dt, &hk, &stg[0], s + i * gb, 8, codes + 8 * 32 * i, scales + 8 * 4 * i, &nonfinite);
        }
    } else {
        if (ng)
            hif4_stage_scales(dt, s, 8, &stg[0]);
        for (size_t i = 0; i < ng; i++) {
            if (i + 1 < ng)
                hif4_stage_scales(dt, s + (i + 1) * gb, 8, &stg[(i + 1) & 1]);
            hif4_stage_codes(dt, &hk, &stg[i & 1], s + i * gb, 8, codes + 8 * 32 * i, scales + 8 * 4 * i,
                             &nonfinite);
        }
    }
    if (8 * ng < nb) {
        h4stage t;
        hif4_stage_scales(dt, s + ng * gb, nb - 8 * ng, &t);
        hif4_stage_codes(dt, &hk, &t, s + ng * gb, nb - 8 * ng, codes + 8 * 32 * ng, scales + 8 * 4 * ng,
                         &nonfinite);
    }
    st->nonfinite_blocks += nonfinite;
}

#include "x86_avx512_nv.h"
#include "x86_quant_table.h" /* the quantize wrappers and x86_set_quant */

int bfp_cpu_avx512_init(bfp_kernels *k)
{
    x86_set_quant(k);
    return bfp_cpu_avx512_dequant_init(k); /* x86_avx512_dequant.c */
}

#else /* built without the AVX-512 flags */

int bfp_cpu_avx512_init(bfp_kernels *k)
{
    (void)k;
    return 0;
}

#endif
