/* x86_avx512_nv.h - NVFP4 and NVFP4+ quantization and the tensor amax pass.
 * Included by x86_avx512.c only (its flags, its helpers).
 *
 * The E2M1 index of a = |t| under block scale sb is the count of the
 * reference's seven decisions a > mid_k*sb (even k) or a >= mid_k*sb (odd
 * k), all exact (the products are exact floats). They are monotone, so
 * three of them decide, as a binary search whose steps each use one
 * predicate kind: k = 3 (>=), then k = 1 or 5 (>=), then k = 0, 2, 4, 6 (>).
 * The running index holds the steps' outcomes (the sign bit joins in the
 * last step); steps 2 and 3 read their thresholds from one vector by that
 * index, and the code
 * bytes are remapped to mag | s << 3 while packing (one byte shuffle per
 * 64 codes). A zero scale uses sb = inf: no threshold is crossed, every
 * element is a signed zero.
 */
#ifndef BFP_CPU_X86_AVX512_NV_H
#define BFP_CPU_X86_AVX512_NV_H

#include "x86_avx512_nvscale.h"

/* ---- NVFP4 and NVFP4+ ----------------------------------------------------------------- */

/* Constants of the NVFP4 loop, made once per call and kept in registers
 * (keep512). */
typedef struct {
    __m512 senc, mids;
    __m512i absm, c8, c6, c2, lut;
} nvk;

A5 nvk nvk_make(float s_enc)
{
    nvk c;
    c.senc = _mm512_castsi512_ps(keep512(_mm512_castps_si512(_mm512_set1_ps(s_enc))));
    /* midpoints at the lanes nv_index16 reads: step 2 at 8*m1 (k = 1, 5),
     * step 3 at 8*m1 + 4*m2 + 2 (k = 0, 2, 4, 6) */
    c.mids = _mm512_castsi512_ps(keep512(_mm512_castps_si512(_mm512_setr_ps(
        0.75f, 0, 0.25f, 0, 0, 0, 1.25f, 0, 3.5f, 0, 2.5f, 0, 0, 0, 5.0f, 0))));
    c.absm = keep512(_mm512_set1_epi32(0x7FFFFFFF));
    c.c8 = keep512(_mm512_set1_epi32(8));
    c.c6 = keep512(_mm512_set1_epi32(6));
    c.c2 = keep512(_mm512_set1_epi32(2));
    /* index (bits: sign, !m3, m2, m1) -> code mag | s << 3, mag = 4 m1 + 2 m2 + m3 */
    c.lut = keep512(_mm512_broadcast_i32x4(
        _mm_setr_epi8(1, 9, 0, 8, 3, 11, 2, 10, 5, 13, 4, 12, 7, 15, 6, 14)));
    return c;
}

/* Per-block values of a group of up to sixteen, each read back as a broadcast. */
typedef struct {
    float t3[16], sb[16];             /* 1.75 sb, sb (inf for scale 0) */
    uint32_t tmax[16], xq[16];        /* NVFP4+: max |t| bits, its block-max index (as nv_index16's) */
    uint32_t bmon[16];                /* NVFP4+: 0xFFFF where the block max gets its own code */
} nvgrp;

/* Block scales of sixteen blocks from their max |t| bits (lanes of absent
 * blocks hold 0); returns the mask of non-finite blocks. */
A5 unsigned nv_scales16(__m512i tmax, int plus, nvgrp *g, uint8_t *sc16)
{
    __mmask16 nf = _mm512_cmpgt_epu32_mask(tmax, _mm512_set1_epi32(0x7F7FFFFF));
    __m512i sc = nv_e4m3_code16(nv_div6_16(_mm512_castsi512_ps(tmax)));
    sc = _mm512_mask_mov_epi32(sc, nf, _mm512_set1_epi32(0x7F));
    __m512 sb = nv_e4m3_value16(sc);
    if (plus) {
        /* The block max's index on its own grid 4 (1 + i/8) sb, RNE: the
         * reference counts its midpoints (4.25 + j/2) sb below tmax. Those
         * have 5 significant bits, sb 4, so y = fp32(tmax / sb) is on the
         * same side of each midpoint as the exact quotient (equal only when
         * it is equal): the index is RNE(2 (y - 4)), exact for y in [2, 8]
         * (Sterbenz), clamped to 0..7 (only y near 6 occurs with scale > 2,
         * or y > 8 under a saturated scale). */
        __m512 y = _mm512_div_ps(_mm512_castsi512_ps(tmax), sb);
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(y, _mm512_set1_ps(4.0f)), _mm512_set1_ps(2.0f));
        __m512i q = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_min_ps(d, _mm512_set1_ps(7.0f))),
                                     _mm512_setzero_si512()); /* min first: no int overflow */
        /* as an index of nv_index16 without the sign: ((x ^ 1) & 7) << 1 */
        q = _mm512_slli_epi32(_mm512_and_si512(_mm512_xor_si512(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(7)), 1);
        _mm512_storeu_si512(g->xq, q);
        _mm512_storeu_si512(g->tmax, tmax);
        _mm512_storeu_si512(g->bmon, _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(sc, _mm512_set1_epi32(KS_NV_PLAIN_MAX)),
                                                            _mm512_set1_epi32(0xFFFF)));
    }
    /* scale 0: every element a signed zero, as no threshold is crossed */
    sb = _mm512_mask_mov_ps(sb, _mm512_cmpeq_epi32_mask(sc, _mm512_setzero_si512()),
                            _mm512_castsi512_ps(_mm512_set1_epi32(0x7F800000)));
    _mm512_storeu_ps(g->t3, _mm512_mul_ps(sb, _mm512_set1_ps(1.75f)));
    _mm512_storeu_ps(g->sb, sb);
    _mm_storeu_si128((__m128i *)sc16, _mm512_cvtepi32_epi8(sc));
    return (unsigned)nf;
}

/* nv_scales16() for eight blocks in 256-bit lanes (groups of 8). */
A5 unsigned nv_scales8(__m256i tmax, int plus, nvgrp *g, uint8_t *sc8)
{
    __mmask8 nf = _mm256_cmpgt_epu32_mask(tmax, _mm256_set1_epi32(0x7F7FFFFF));
    __m256i sc = nv_e4m3_code8(nv_div6_8(_mm256_castsi256_ps(tmax)));
    sc = _mm256_mask_mov_epi32(sc, nf, _mm256_set1_epi32(0x7F));
    __m256 sb = nv_e4m3_value8(sc);
    if (plus) { /* as in nv_scales16() */
        __m256 y = _mm256_div_ps(_mm256_castsi256_ps(tmax), sb);
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(y, _mm256_set1_ps(4.0f)), _mm256_set1_ps(2.0f));
        __m256i q = _mm256_max_epi32(_mm256_cvtps_epi32(_mm256_min_ps(d, _mm256_set1_ps(7.0f))),
                                     _mm256_setzero_si256());
        q = _mm256_slli_epi32(_mm256_and_si256(_mm256_xor_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(7)), 1);
        _mm256_storeu_si256((__m256i *)g->xq, q);
        _mm256_storeu_si256((__m256i *)g->tmax, tmax);
        _mm256_storeu_si256((__m256i *)g->bmon, _mm256_maskz_mov_epi32(_mm256_cmpgt_epi32_mask(sc, _mm256_set1_epi32(KS_NV_PLAIN_MAX)),
                                                                        _mm256_set1_epi32(0xFFFF)));
    }
    sb = _mm256_mask_mov_ps(sb, _mm256_cmpeq_epi32_mask(sc, _mm256_setzero_si256()),
                            _mm256_castsi256_ps(_mm256_set1_epi32(0x7F800000)));
    _mm256_storeu_ps(g->t3, _mm256_mul_ps(sb, _mm256_set1_ps(1.75f)));
    _mm256_storeu_ps(g->sb, sb);
    store8_bytes(sc8, sc);
    return (unsigned)nf;
}

/* Compares and products with a per-block float as an embedded broadcast
 * operand (free on Zen 4; a separate vbroadcastss takes a shuffle slot). */
A5 __mmask16 cmpge_bc(__m512 a, const float *p)
{
    __mmask16 k;
    __asm__("vcmpps $0x1d, %2%{1to16%}, %1, %0" : "=k"(k) : "v"(a), "m"(*p)); /* GE_OQ */
    return k;
}

A5 __m512 mul_bc(__m512 a, const float *p)
{
    __m512 r;
    __asm__("vmulps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(a), "m"(*p));
    return r;
}

A5 __mmask16 cmpeq_bc(__m512i a, const uint32_t *p)
{
    __mmask16 k;
    __asm__("vpcmpeqd %2%{1to16%}, %1, %0" : "=k"(k) : "v"(a), "m"(*p));
    return k;
}

/* q with lanes k set to x | *p. */
A5 __m512i or_bc(__m512i q, __mmask16 k, __m512i x, const uint32_t *p)
{
    __asm__("vpord %3%{1to16%}, %2, %0%{%1%}" : "+v"(q) : "Yk"(k), "v"(x), "m"(*p));
    return q;
}

/* Index of block j's 16 values (t their bits, a = |t|), bits: 0 the sign,
 * 3 and 2 the first two search steps, 1 the third one inverted. Step 2
 * changes the index either way (ors 2 or 6), so that steps 2 and 3 read
 * different lanes of one threshold vector; each step is a compare and
 * mask-selected constants (merge-masked adds cost a compare slot); the
 * sign comes in with the third step's outcome, one three-way xor. */
A5 __m512i nv_index16(const nvk *c, const nvgrp *g, int j, __m512i t, __m512 a)
{
    __m512 thr = mul_bc(c->mids, &g->sb[j]);
    __m512i q = _mm512_maskz_mov_epi32(cmpge_bc(a, &g->t3[j]), c->c8);
    __mmask16 m2 = _mm512_cmp_ps_mask(a, _mm512_permutexvar_ps(q, thr), _CMP_GE_OQ);
    q = _mm512_or_si512(q, _mm512_mask_blend_epi32(m2, c->c2, c->c6));
    __mmask16 m3 = _mm512_cmp_ps_mask(a, _mm512_permutexvar_ps(q, thr), _CMP_GT_OQ);
    /* q ^ (m3 ? 2 : 0) ^ sign */
    return _mm512_ternarylogic_epi32(q, _mm512_maskz_mov_epi32(m3, c->c2), _mm512_srli_epi32(t, 31), 0x96);
}

/* 64 indices (four vectors of dwords 0..15) as 32 code bytes. */
A5 __m256i nv_bytes64(const nvk *c, const __m512i *q)
{
    __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(q[0], q[1]), _mm512_packus_epi32(q[2], q[3]));
    b = _mm512_shuffle_epi8(c->lut, b);
    __m256i w = _mm512_cvtepi16_epi8(_mm512_maddubs_epi16(b, _mm512_set1_epi16(0x1001))); /* c0 + 16 c1 */
    return _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), w);
}

/* A group of up to 8 or 16 blocks (nv_group) between the two stages: the scale side
 * (loads, t, block maxima, scales; one long dependency chain) and the
 * element side (codes). The loop runs the scale side of the next group
 * before the element side of this one, so that out-of-order execution
 * overlaps that chain with independent work instead of waiting on it. */
typedef struct {
    __m512i t[16];
    nvgrp g;
    uint8_t sc16[16];
    unsigned nf;
} nvstage;

/* Blocks per group: 16 for 16-bit input (the scale side runs once per 16
 * blocks), 8 for float32 (at 64 MiB, groups of 16 made float32 slower:
 * nvfp4 8.0 -> 7.5 GB/s, nvfp4+ 7.5 -> 7.2, while faster in cache; a group's
 * 1 KiB of loads and its longer code stage leave less overlap with the
 * memory latency). */
A5 int nv_group(bfp_dtype dt)
{
    return dt == BFP_DTYPE_F32 ? 8 : 16;
}

A5 void nv_stage_scales(bfp_dtype dt, int plus, const nvk *c, const unsigned char *s, size_t n,
                        nvstage *st)
{
    const size_t es = esz(dt);
    const int G = nv_group(dt);
    __m256i pm[16];
    if (dt != BFP_DTYPE_F16)
        prefetch_span(s, n * 16 * es);
#pragma GCC unroll 16
    for (int j = 0; j < G; j++) {
        __m512i t = _mm512_setzero_si512();
        if ((size_t)j < n)
            t = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(ld16(dt, s + (size_t)j * 16 * es)), c->senc));
        st->t[j] = t;
        pm[j] = fold16(_mm512_and_si512(t, c->absm));
    }
    if (G == 16)
        st->nf = nv_scales16(_mm512_inserti64x4(_mm512_castsi256_si512(hmax_8x8(pm)), hmax_8x8(pm + 8), 1), plus,
                             &st->g, st->sc16);
    else
        st->nf = nv_scales8(hmax_8x8(pm), plus, &st->g, st->sc16);
}

A5 void nv_stage_codes(int G, int plus, const nvk *c, const nvstage *st, size_t n, uint8_t *codes,
                       uint8_t *scales, uint8_t *meta, size_t *nonfinite)
{
    __m512i q[16];
#pragma GCC unroll 16
    for (int j = 0; j < G; j++) {
        __m512i t = st->t[j];
        __m512 a = _mm512_castsi512_ps(_mm512_and_si512(t, c->absm));
        q[j] = nv_index16(c, &st->g, j, t, a);
        if (plus) { /* NVFP4+: the first lane holding the max gets its own code */
            unsigned eq = cmpeq_bc(_mm512_castps_si512(a), &st->g.tmax[j]);
            unsigned bm = (unsigned)ks_ctz32(eq | 0x10000u), on = st->g.bmon[j];
            q[j] = or_bc(q[j], (__mmask16)(eq & -eq & on), _mm512_srli_epi32(t, 31), &st->g.xq[j]);
            if ((size_t)j < n)
                meta[j] = (uint8_t)(bm & on & 15);
        }
    }
    if (n == (size_t)G) { /* four blocks' codes per 32-byte store */
        memcpy(scales, st->sc16, (size_t)G);
        for (int i = 0; i < G / 4; i++)
            _mm256_storeu_si256((__m256i *)(codes + 32 * i), nv_bytes64(c, q + 4 * i));
    } else {
        uint8_t buf[128];
        memcpy(scales, st->sc16, n);
        for (int i = 0; i < G / 4; i++)
            _mm256_storeu_si256((__m256i *)(buf + 32 * i), nv_bytes64(c, q + 4 * i));
        memcpy(codes, buf, 8 * n);
    }
    for (unsigned nf = st->nf & ((1u << n) - 1); nf; nf &= nf - 1) { /* NaN or Inf: codes and meta 0 */
        unsigned j = (unsigned)ks_ctz32(nf);
        memset(codes + 8 * j, 0, 8);
        if (plus)
            meta[j] = 0;
        (*nonfinite)++;
    }
}

/* The full groups of nb blocks, pipelined; returns how many blocks. */
A5 size_t nv_groups(bfp_dtype dt, int plus, const nvk *c, const unsigned char *s, size_t nb,
                    uint8_t *codes, uint8_t *scales, uint8_t *meta, size_t *nonfinite)
{
    const int G = nv_group(dt);
    const size_t gb = (size_t)G * 16 * esz(dt), ng = nb / (size_t)G;
    nvstage st[2];
    if (ng == 0)
        return 0;
    nv_stage_scales(dt, plus, c, s, (size_t)G, &st[0]);
    for (size_t i = 0; i < ng; i++) {
        if (i + 1 < ng)
            nv_stage_scales(dt, plus, c, s + (i + 1) * gb, (size_t)G, &st[(i + 1) & 1]);
        nv_stage_codes(G, plus, c, &st[i & 1], (size_t)G, codes + 8 * (size_t)G * i, scales + (size_t)G * i,
                       plus ? meta + (size_t)G * i : NULL, nonfinite);
    }
    return (size_t)G * ng;
}

A5 void q_nvfp4(bfp_dtype dt, const bfp_qparams *p, const void *src, size_t nb, uint8_t *codes,
                uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int plus = p->impl->bm_elem != NULL;
    const unsigned char *s = (const unsigned char *)src;
    const nvk c = nvk_make(p->s_enc);
    size_t nonfinite = 0, b;
    if (plus) /* separate loops: plus or not */
        b = nv_groups(dt, 1, &c, s, nb, codes, scales, meta, &nonfinite);
    else
        b = nv_groups(dt, 0, &c, s, nb, codes, scales, NULL, &nonfinite);
    if (b < nb) {
        nvstage g;
        nv_stage_scales(dt, plus, &c, s + b * 16 * esz(dt), nb - b, &g);
        nv_stage_codes(nv_group(dt), plus, &c, &g, nb - b, codes + 8 * b, scales + b, plus ? meta + b : NULL,
                       &nonfinite);
    }
    st->nonfinite_blocks += nonfinite;
}

/* ---- amax (NVFP4 tensor scale) ------------------------------------------------------- */

A5 __m512i amax_step(int w32, __m512i m, const unsigned char *p, __m512i mask)
{
    __m512i v = _mm512_and_si512(_mm512_loadu_si512(p), mask);
    return w32 ? _mm512_max_epu32(m, v) : _mm512_max_epu16(m, v);
}

/* Max of the magnitude bits (sign cleared) of n values: float32 in dword
 * lanes, bf16/f16 in word lanes (their magnitudes order as their values).
 * Non-finite values are included: the caller checks the result. Four
 * independent accumulators over 256 bytes per step. */
A5 uint32_t amax_bits(bfp_dtype dt, const unsigned char *s, size_t n)
{
    const size_t es = esz(dt), per = 256 / es;
    const int w32 = dt == BFP_DTYPE_F32;
    const __m512i mask = w32 ? _mm512_set1_epi32(0x7FFFFFFF) : _mm512_set1_epi16(0x7FFF);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
    uint32_t r = 0;
    size_t main = n - n % per;
    for (size_t i = main; i < n; i++) {
        uint32_t a;
        if (w32) {
            memcpy(&a, s + 4 * i, 4);
            a &= 0x7FFFFFFFu;
        } else {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            a = h & 0x7FFFu;
        }
        r = a > r ? a : r;
    }
    for (const unsigned char *p = s, *e = s + main * es; p < e; p += 256) {
        for (int o = 0; o < 256; o += 64)
            _mm_prefetch((const char *)p + PREFETCH_AHEAD + o, _MM_HINT_T0);
        m0 = amax_step(w32, m0, p, mask);
        m1 = amax_step(w32, m1, p + 64, mask);
        m2 = amax_step(w32, m2, p + 128, mask);
        m3 = amax_step(w32, m3, p + 192, mask);
    }
    __m512i v = w32 ? _mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3))
                    : _mm512_max_epu16(_mm512_max_epu16(m0, m1), _mm512_max_epu16(m2, m3));
    if (!w32) /* each dword's larger word */
        v = _mm512_max_epu32(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(v, 16));
    uint32_t vm = (uint32_t)_mm512_reduce_max_epu32(v);
    return vm > r ? vm : r;
}

/* The same over finite values only, for ranges holding NaN or Inf. */
A5 float amax_finite(bfp_dtype dt, const void *src, size_t n)
{
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    const __m512i inf = _mm512_set1_epi32(0x7F800000);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i a0 = abs16(ld16(dt, s + i * es)), a1 = abs16(ld16(dt, s + (i + 16) * es));
        m0 = _mm512_mask_max_epi32(m0, _mm512_cmplt_epi32_mask(a0, inf), m0, a0);
        m1 = _mm512_mask_max_epi32(m1, _mm512_cmplt_epi32_mask(a1, inf), m1, a1);
    }
    uint32_t m = (uint32_t)_mm512_reduce_max_epi32(_mm512_max_epi32(m0, m1));
    return ks_float(ks_amax_tail(dt, s, i, n, m));
}

A5 float amax_any(bfp_dtype dt, const void *src, size_t n)
{
    uint32_t m = amax_bits(dt, (const unsigned char *)src, n);
    if (dt == BFP_DTYPE_F32)
        return m < 0x7F800000u ? ks_float(m) : amax_finite(dt, src, n);
    if (dt == BFP_DTYPE_BF16)
        return m < 0x7F80u ? ks_float(m << 16) : amax_finite(dt, src, n);
    return m < 0x7C00u ? ks_f16_to_f32((uint16_t)m) : amax_finite(dt, src, n);
}

#endif
