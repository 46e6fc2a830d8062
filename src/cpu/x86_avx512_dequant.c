/* x86_avx512_dequant.c - AVX-512 (F, BW, VL) dequantize kernels, installed
 * by bfp_cpu_avx512_init(). Built with the flags of x86_avx512.c.
 *
 * bfloat16 output works in 16-bit lanes, 32 values per vector. MX values
 * have at most 8 significant bits, so code value * 2^k is exact in bfloat16
 * while it stays a normal number: the values at scale 1 come from a table
 * (vpermw / vpermi2w) and k is added to their exponent field. Each element
 * type has a range of k for which that holds for all of its nonzero finite
 * values; a block outside it (or with a NaN scale) is decoded per element.
 * NVFP4 values are rounded: a table per scale code holds them. */
#include "kern_scalar.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "x86_avx2_inl.h"

#include <stdalign.h>
#include <threads.h>

#define A5 static inline __attribute__((always_inline))

/* Two 16-bit lanes (a low, b high) as one 32-bit lane. */
#define W2(a, b) ((a) | (b) << 16)

/* ---- shared pieces ------------------------------------------------------------ */

/* bfloat16 bits (low half of each lane) of 16 float32 values, as
 * bfp_f32_to_bf16: RNE, NaN kept quiet. */
A5 __m512i bf16_bits16(__m512 v)
{
    __m512i b = _mm512_castps_si512(v);
    __m512i a = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
}

/* Where a kernel's output goes, 64 bytes at a time in order. Large outputs
 * (p->stream) bypass the cache with non-temporal stores, which need 64-byte
 * aligned lines. A float32 output off that alignment by a multiple of 4
 * bytes o (malloc gives 16) is still streamed: each line is joined from the
 * last o bytes of one vector and the first 64 - o of the next (vpermt2d),
 * the partial first and last lines stored with masks. (For bfloat16, whose
 * decoders do more work per byte, the extra permute cost more than the
 * stores saved.) Other offsets use plain stores. */
typedef struct {
    unsigned char *d;     /* where the next vector goes */
    int mode;             /* SINK_PLAIN, SINK_STREAM (aligned) or SINK_JOIN */
    int o, started;       /* SINK_JOIN: d's offset in its line; a vector seen */
    __m512i prev, idx;    /* SINK_JOIN: the last vector; line dwords from (prev, next) */
} sink;

enum { SINK_PLAIN, SINK_STREAM, SINK_JOIN };

A5 sink sink_at(bfp_dtype dt, void *dst, int stream)
{
    sink s;
    s.d = (unsigned char *)dst;
    s.o = (int)((uintptr_t)dst & 63);
    s.mode = !stream                                 ? SINK_PLAIN
             : s.o == 0                              ? SINK_STREAM
             : dt == BFP_DTYPE_F32 && s.o % 4 == 0 ? SINK_JOIN
                                                     : SINK_PLAIN;
    s.started = 0;
    s.prev = _mm512_setzero_si512();
    /* line dword i = dword i - o/4 of the next vector, or of prev below 0 */
    s.idx = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                             _mm512_set1_epi32(16 - s.o / 4));
    return s;
}

A5 void sink_push(sink *s, __m512i v)
{
    if (s->mode == SINK_PLAIN) {
        _mm512_storeu_si512(s->d, v);
    } else if (s->mode == SINK_STREAM) {
        _mm512_stream_si512((__m512i *)s->d, v);
    } else if (s->started) {
        _mm512_stream_si512((__m512i *)(s->d - s->o), _mm512_permutex2var_epi32(s->prev, s->idx, v));
        s->prev = v;
    } else { /* the first line: only its last 64 - o bytes are ours */
        _mm512_mask_storeu_epi8(s->d, (__mmask64)(~0ull >> s->o), v);
        s->prev = v;
        s->started = 1;
    }
    s->d += 64;
}

/* Writes what is left (SINK_JOIN: the last o bytes) and orders the
 * non-temporal stores before the caller's. */
A5 void sink_end(sink *s)
{
    if (s->mode == SINK_JOIN && s->started)
        _mm512_mask_storeu_epi8(s->d - s->o, (__mmask64)(~0ull >> (64 - s->o)),
                                _mm512_permutex2var_epi32(s->prev, s->idx, _mm512_setzero_si512()));
    if (s->mode != SINK_PLAIN)
        _mm_sfence();
    s->mode = SINK_PLAIN;
    s->started = 0;
}

/* 16 4-bit codes from 8 bytes, as dwords (bits above the low 4 are junk:
 * only vpermd reads them). */
A5 __m512i nib16(const uint8_t *p)
{
    __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    return _mm512_cvtepu8_epi32(_mm_or_si128(x, _mm_slli_epi16(x, 4)));
}

/* The 32 codes of a block at width w, one per 16-bit lane. */
A5 __m512i words32(int w, const uint8_t *blk)
{
    if (w == 4) { /* a byte per dword: low nibble to the low word, high nibble to the high word */
        __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)blk));
        return _mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), _mm512_set1_epi32(0x000F000F), 0xA8);
    }
    if (w == 8)
        return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)blk));
    /* 6 bits: codes 8l..8l+7 are bytes 6l..6l+5; bring them to 128-bit lane l
     * (word granularity: 6l is even), then each code's two bytes to its word */
    __m512i q = _mm512_castsi256_si512(_mm256_maskz_loadu_epi8(0xFFFFFF, blk));
    q = _mm512_permutexvar_epi16(_mm512_setr_epi32(W2(0, 1), W2(2, 3), 0, 0, W2(3, 4), W2(5, 6), 0, 0,
                                                   W2(6, 7), W2(8, 9), 0, 0, W2(9, 10), W2(11, 12), 0, 0),
                                 q);
    q = _mm512_shuffle_epi8(q, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6)));
    q = _mm512_srlv_epi16(q, _mm512_broadcast_i32x4(_mm_setr_epi16(0, 6, 4, 2, 0, 6, 4, 2)));
    return _mm512_and_si512(q, _mm512_set1_epi16(0x3F));
}

/* ---- bfloat16 tables of the MX element types, built once ------------------------ */

typedef struct {
    alignas(64) uint16_t v[128]; /* bf16 at scale 1: every code (4, 6 bits), magnitudes (8 bits) */
    uint32_t scaled[4];          /* per 32 entries: the nonzero finite ones (2^k applies) */
    int kmin, kmax;              /* 2^k keeps all of them normal bfloat16 */
    int ok;                      /* every value is exact in bfloat16 */
} wdef;

static wdef wdefs[KS_ID_NONE];
static alignas(64) uint16_t hif4_rows[256][16]; /* bf16 of code value * E6M2 scale */
static once_flag tabs_once = ONCE_FLAG_INIT;

static void wdef_build(wdef *wd, const bfp_elem_desc *e)
{
    const float *lut = bfp_cpu_elem_lut(e);
    const unsigned n = 1u << e->bits, nt = e->bits == 8 ? 128 : n;
    int lo = 255, hi = 0;
    wd->ok = 1;
    for (unsigned c = 0; c < n; c++) {
        uint32_t b = ks_bits(lut[c]);
        unsigned f = (b >> 23) & 0xFF;
        if ((b & 0x7FFFFFFF) == 0 || f == 0xFF)
            continue;
        wd->ok &= (b & 0xFFFF) == 0 && f != 0;
        lo = (int)f < lo ? (int)f : lo;
        hi = (int)f > hi ? (int)f : hi;
        if (c < nt)
            wd->scaled[c / 32] |= 1u << (c % 32);
    }
    for (unsigned c = 0; c < nt; c++)
        wd->v[c] = ks_bf16(ks_bits(lut[c]));
    if (e->bits == 8 && e->kind == BFP_GRID_FLOAT) /* sign and magnitude, as wvals takes them */
        for (unsigned c = 128; c < 256; c++)
            wd->ok &= ks_bf16(ks_bits(lut[c])) == (wd->v[c - 128] | 0x8000);
    wd->kmin = 1 - lo;
    wd->kmax = 254 - hi;
}

static const bfp_elem_desc *elem_for(int id)
{
    for (int f = 1; f < BFP_CPU_NFMT; f++) {
        const bfp_format_impl *impl = bfp_impl_get((bfp_format)f);
        if (impl && (impl->info.family == BFP_FAMILY_MX || impl->info.family == BFP_FAMILY_MX_PLUS) &&
            ks_elem_id(impl) == id)
            return impl->elem;
    }
    return NULL;
}

static void tabs_build(void)
{
    for (int id = 0; id < KS_ID_NONE; id++) {
        const bfp_elem_desc *e = elem_for(id);
        if (e)
            wdef_build(&wdefs[id], e);
    }
    const float *e1m2 = bfp_cpu_elem_lut(&bfp_e1m2); /* the grid's values, -0 included */
    for (unsigned code = 0; code < 256; code++)
        for (int i = 0; i < 16; i++)
            hif4_rows[code][i] = ks_bf16(ks_bits(e1m2[i] * ks_hif4_scale(code))); /* exact */
}

/* Tables of one element type in registers. */
typedef struct {
    __m512i t[4];
    __mmask32 m[4];
    int kmin, kmax;
} wregs;

A5 wregs wregs_load(ks_elem e, int id)
{
    const wdef *wd = &wdefs[id];
    wregs r;
    for (int i = 0; i < 4; i++) {
        r.t[i] = _mm512_load_si512(wd->v + 32 * i);
        r.m[i] = (__mmask32)wd->scaled[i];
    }
    r.kmin = wd->kmin;
    r.kmax = wd->kmax;
    return r;
}

A5 int k_fast(const wregs *r, int k)
{
    return (unsigned)(k - r->kmin) <= (unsigned)(r->kmax - r->kmin);
}

/* bfloat16 bits of the 32 codes cw times 2^k (k in the table's range; kk:
 * k * 128 in every lane): the exponent field of every nonzero finite value
 * moves by k. */
A5 __m512i wvals(ks_elem e, const wregs *r, __m512i cw, const uint8_t *blk, __m512i kk)
{
    if (e.kind == BFP_GRID_INT && e.bits == 8) { /* int8 -> float32 is exact; its high half is bfloat16 */
        __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk)));
        __m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 16))));
        const __m512i odd = _mm512_setr_epi32(W2(1, 3), W2(5, 7), W2(9, 11), W2(13, 15), W2(17, 19), W2(21, 23),
                                              W2(25, 27), W2(29, 31), W2(33, 35), W2(37, 39), W2(41, 43),
                                              W2(45, 47), W2(49, 51), W2(53, 55), W2(57, 59), W2(61, 63));
        __m512i v = _mm512_permutex2var_epi16(_mm512_castps_si512(f0), odd, _mm512_castps_si512(f1));
        const __m512i k6 = _mm512_sub_epi16(kk, _mm512_set1_epi16((short)(e.mbits << 7)));
        return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, v), v, k6);
    }
    if (e.bits == 4)
        return _mm512_permutexvar_epi16(cw, _mm512_mask_add_epi16(r->t[0], r->m[0], r->t[0], kk));
    if (e.bits == 6)
        return _mm512_permutex2var_epi16(_mm512_mask_add_epi16(r->t[0], r->m[0], r->t[0], kk), cw,
                                         _mm512_mask_add_epi16(r->t[1], r->m[1], r->t[1], kk));
    /* 8-bit floats: 128 magnitudes, then the sign */
    __m512i lo = _mm512_permutex2var_epi16(_mm512_mask_add_epi16(r->t[0], r->m[0], r->t[0], kk), cw,
                                           _mm512_mask_add_epi16(r->t[1], r->m[1], r->t[1], kk));
    __m512i hi = _mm512_permutex2var_epi16(_mm512_mask_add_epi16(r->t[2], r->m[2], r->t[2], kk), cw,
                                           _mm512_mask_add_epi16(r->t[3], r->m[3], r->t[3], kk));
    __m512i v = _mm512_mask_mov_epi16(lo, _mm512_test_epi16_mask(cw, _mm512_set1_epi16(0x40)), hi);
    return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(cw, 8), _mm512_set1_epi16((short)0x8000), 0xF8);
}

/* 32 values in the output's form (bfloat16 lanes) to d as dtype: float32
 * is bfloat16 widened, exact. */
A5 void st_block16(bfp_dtype dt, sink *o, __m512i v)
{
    if (dt == BFP_DTYPE_BF16) {
        sink_push(o, v);
        return;
    }
    const __m512i z = _mm512_setzero_si512();
    const __m512i lo = _mm512_setr_epi32(W2(0, 32), W2(0, 33), W2(0, 34), W2(0, 35), W2(0, 36), W2(0, 37),
                                         W2(0, 38), W2(0, 39), W2(0, 40), W2(0, 41), W2(0, 42), W2(0, 43),
                                         W2(0, 44), W2(0, 45), W2(0, 46), W2(0, 47));
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(W2(0, 16)));
    sink_push(o, _mm512_permutex2var_epi16(z, lo, v));
    sink_push(o, _mm512_permutex2var_epi16(z, hi, v));
}

/* ---- MX -------------------------------------------------------------------------- */

/* Value v stored as element i of a dtype array at d. */
A5 void st_value(bfp_dtype dt, unsigned char *d, unsigned i, float v)
{
    if (dt == BFP_DTYPE_F32) {
        memcpy(d + 4 * i, &v, 4);
    } else {
        uint16_t h = ks_bf16(ks_bits(v));
        memcpy(d + 2 * i, &h, 2);
    }
}

/* A block of 32 values of dtype at buf (64-byte aligned) to the sink. */
A5 void push_block(bfp_dtype dt, sink *o, const unsigned char *buf)
{
    sink_push(o, _mm512_load_si512(buf));
    if (dt == BFP_DTYPE_F32)
        sink_push(o, _mm512_load_si512(buf + 64));
}

/* One block per element from the value table (NaN scales and scales
 * outside the exponent-add range: rare), stored as dtype. */
static void mx_slow(const float *lut, int w, const uint8_t *blk, unsigned sc, bfp_dtype dt, sink *o)
{
    alignas(64) unsigned char d[128];
    float s = ks_pow2((int)sc - 127);
    for (unsigned i = 0; i < 32; i++) {
        float x = lut[ks_get_code(blk, i, w)];
        st_value(dt, d, i, sc == 0xFF ? ks_nan_scaled(x) : x * s);
    }
    push_block(dt, o, d);
}

A5 void d_mx(ks_elem e, int id, bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes,
             const uint8_t *scales, size_t nb, void *dst)
{
    const int w = e.bits;
    const size_t cb = (size_t)(4 * w);
    const float *lut = bfp_cpu_elem_lut(p->impl->elem);
    sink o = sink_at(dt, dst, p->stream);
    const wregs r = wregs_load(e, id);
    for (size_t b = 0; b < nb; b++, codes += cb) {
        int k = (int)scales[b] - 127;
        if (k_fast(&r, k))
            st_block16(dt, &o, wvals(e, &r, words32(w, codes), codes, _mm512_set1_epi16((short)(k * 128))));
        else
            mx_slow(lut, w, codes, scales[b], dt, &o);
    }
    sink_end(&o);
}

/* ---- MX+ and MX++ ----------------------------------------------------------------- */

/* One MX+ block per element from the value tables (scales outside the
 * exponent-add range: rare), stored as dtype. */
static void mxplus_slow(const float *lut, const float *xlut, int w, const uint8_t *blk, int se,
                        unsigned delta, unsigned idx, bfp_dtype dt, sink *o)
{
    alignas(64) unsigned char d[128];
    float s = ks_pow2(se - (int)delta);
    for (unsigned i = 0; i < 32; i++) {
        unsigned c = ks_get_code(blk, i, w);
        st_value(dt, d, i, i == idx ? xlut[c] * ks_pow2(se) : lut[c] * s);
    }
    push_block(dt, o, d);
}

/* The block max's bfloat16 lane: 1.m * 2^(emax + se), m the code's low
 * bits; xe: its exponent field, broadcast and shifted to bit 7. */
A5 __m512i bm_lanes(ks_elem e, __m512i cw, __m512i xe)
{
    const int w = e.bits;
    __m512i x = _mm512_ternarylogic_epi32(_mm512_slli_epi16(cw, 8 - w), xe, _mm512_set1_epi16(0x7F), 0xEC); /* (a & c) | b */
    return _mm512_ternarylogic_epi32(x, _mm512_slli_epi16(cw, 16 - w), _mm512_set1_epi16((short)0x8000), 0xF8);
}

/* The lanes of the codes an MX+ decoder rejects (but at the block max). */
A5 uint32_t special_lanes(ks_elem e, __m512i cw)
{
    const int sbit = 1 << (e.bits - 1), special = special_rule(e);
    if (special == SPECIAL_INT_MIN)
        return _mm512_cmpeq_epi16_mask(cw, _mm512_set1_epi16((short)sbit));
    if (special == SPECIAL_ABOVE_MAX)
        return _mm512_cmpgt_epi16_mask(_mm512_and_si512(cw, _mm512_set1_epi16((short)(sbit - 1))),
                                       _mm512_set1_epi16((short)e.max_mag));
    return 0;
}

/* One MX+ block, any case (empty, flushed, bad, NaN scale, scales outside
 * the exponent-add range), stored as dtype. */
A5 void mxplus_block(ks_elem e, const wregs *r, const bfp_dparams *p, const uint8_t *blk,
                     unsigned sc, unsigned m, size_t n, bfp_dtype dt, sink *o)
{
    const int w = e.bits, plus_only = p->impl->info.family == BFP_FAMILY_MX_PLUS;
    unsigned idx = m & 0x1F, delta = m >> 5;
    int empty = sc == 0x00 || sc == 0xFF;
    int bad = (empty && m != 0) || idx >= n || (plus_only && delta != 0);
    __m512i cw = words32(w, blk);
    bad |= (empty && _mm512_test_epi16_mask(cw, cw)) || (special_lanes(e, cw) & ~(1u << idx)) != 0;
    int se = (int)sc - 127, xe = 127 + e.emax + se;
    __m512i v;
    if (sc == 0xFF || bad || sc == 0) {
        v = _mm512_set1_epi16((short)(sc == 0 && !bad ? 0 : 0x7FC0));
    } else if (!k_fast(r, se - (int)delta) || xe > 254) {
        mxplus_slow(bfp_cpu_elem_lut(p->impl->elem), bfp_cpu_elem_lut(p->impl->bm_elem), w, blk, se, delta,
                    idx, dt, o);
        return;
    } else {
        v = wvals(e, r, cw, blk, _mm512_set1_epi16((short)((se - (int)delta) * 128)));
        v = _mm512_mask_mov_epi16(v, (__mmask32)(1u << idx), bm_lanes(e, cw, _mm512_set1_epi16((short)(xe << 7))));
    }
    st_block16(dt, o, v);
}

A5 void d_mxplus(ks_elem e, int id, bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes,
                 const uint8_t *scales, const uint8_t *meta, size_t nb, size_t last_len, void *dst)
{
    const int plus_only = p->impl->info.family == BFP_FAMILY_MX_PLUS;
    const size_t cb = (size_t)(4 * e.bits);
    sink o = sink_at(dt, dst, p->stream);
    const wregs r = wregs_load(e, id);
    alignas(64) int16_t kw[32], xw[32];
    for (size_t b0 = 0; b0 < nb; b0 += 32) {
        /* 32 blocks at once: which take the common path (scale byte not 0 or
         * 0xFF, delta allowed, 2^k and the block max in range, index inside
         * the block), their k and block-max exponent fields */
        const size_t g = nb - b0 < 32 ? nb - b0 : 32;
        const __mmask32 in = (__mmask32)(g == 32 ? ~0u : (1u << g) - 1);
        __m512i sc = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, scales + b0));
        __m512i mt = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, meta + b0));
        __m512i se = _mm512_sub_epi16(sc, _mm512_set1_epi16(127));
        __m512i k = _mm512_sub_epi16(se, _mm512_srli_epi16(mt, 5));
        _mm512_store_si512(kw, _mm512_slli_epi16(k, 7));
        _mm512_store_si512(xw, _mm512_slli_epi16(_mm512_add_epi16(se, _mm512_set1_epi16((short)(127 + e.emax))), 7));
        uint32_t fast = in & _mm512_cmpneq_epi16_mask(sc, _mm512_setzero_si512()) &
                        _mm512_cmpneq_epi16_mask(sc, _mm512_set1_epi16(0xFF)) &
                        _mm512_cmple_epu16_mask(_mm512_sub_epi16(k, _mm512_set1_epi16((short)r.kmin)),
                                                _mm512_set1_epi16((short)(r.kmax - r.kmin))) &
                        _mm512_cmple_epi16_mask(se, _mm512_set1_epi16((short)(127 - e.emax)));
        if (plus_only)
            fast &= _mm512_testn_epi16_mask(mt, _mm512_set1_epi16(0xE0));
        if (b0 + g == nb && last_len < 32)
            fast &= ~(1u << (g - 1)); /* a partial block checks its index */
        for (size_t j = 0; j < g; j++, codes += cb) {
            if (!(fast >> j & 1)) {
                mxplus_block(e, &r, p, codes, scales[b0 + j], meta[b0 + j], b0 + j + 1 == nb ? last_len : 32,
                             dt, &o);
                continue;
            }
            unsigned idx = meta[b0 + j] & 0x1F;
            __m512i cw = words32(e.bits, codes), v;
            if (special_lanes(e, cw) & ~(1u << idx)) {
                v = _mm512_set1_epi16(0x7FC0);
            } else {
                v = wvals(e, &r, cw, codes, _mm512_set1_epi16(kw[j]));
                v = _mm512_mask_mov_epi16(v, (__mmask32)(1u << idx), bm_lanes(e, cw, _mm512_set1_epi16(xw[j])));
            }
            st_block16(dt, &o, v);
        }
    }
    sink_end(&o);
}

/* ---- NVFP4 and NVFP4+ ----------------------------------------------------------------- */

/* (q * sb) / s_enc of the 16 codes (and of the block-max codes) per scale
 * code, in the output's form: float32 rows f and xf, or one 32-lane
 * bfloat16 row in f (16 codes, then 16 block-max codes). Bad scale codes
 * (and a bad tensor scale) give NaN rows. Made when a scale code is first
 * met, or all at once for a long call. */
typedef struct {
    alignas(64) uint32_t f[256][16];
    alignas(64) uint32_t xf[256][16];
    uint8_t have[256];
} nvrows;

static void nvrow_make(nvrows *t, const bfp_dparams *p, bfp_dtype dt, unsigned sc)
{
    const __m512 base = _mm512_setr_ps(0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -.5f, -1, -1.5f, -2, -3, -4, -6);
    const __m512 xbase = _mm512_setr_ps(4, 4.5f, 5, 5.5f, 6, 6.5f, 7, 7.5f, -4, -4.5f, -5, -5.5f, -6, -6.5f, -7, -7.5f);
    const int bad = !p->s_enc_ok || (sc & 0x80) || sc == 0x7F;
    const __m512 sb = _mm512_set1_ps(ks_e4m3_value(sc & 0x7F)), senc = _mm512_set1_ps(p->s_enc);
    __m512 v = _mm512_div_ps(_mm512_mul_ps(base, sb), senc); /* the products are exact */
    __m512 x = _mm512_div_ps(_mm512_mul_ps(xbase, sb), senc);
    if (bad)
        v = x = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
    if (dt == BFP_DTYPE_F32) {
        _mm512_store_ps(t->f[sc], v);
        _mm512_store_ps(t->xf[sc], x);
    } else {
        __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(bf16_bits16(v))),
                                       _mm512_cvtepi32_epi16(bf16_bits16(x)), 1);
        _mm512_store_si512(t->f[sc], h);
    }
    t->have[sc] = 1;
}

/* For up to 32 blocks from b0 (g of them, the last of the call n codes
 * long): the row of each block in rs[] (0xFF, a NaN row, for an NVFP4+ block
 * whose meta is bad) and the lane of its block max in bm[] (0: none). */
A5 void nv_group(int plus, const uint8_t *scales, const uint8_t *meta, size_t g, size_t n_last,
                 uint16_t *rs, uint16_t *bm)
{
    const __mmask32 in = (__mmask32)(g == 32 ? ~0u : (1u << g) - 1);
    __m512i sc = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, scales));
    if (!plus) {
        _mm512_store_si512(rs, sc);
        _mm512_store_si512(bm, _mm512_setzero_si512());
        return;
    }
    __m512i m = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, meta));
    const __m512i plain = _mm512_set1_epi16(KS_NV_PLAIN_MAX);
    __mmask32 ext = _mm512_cmpgt_epu16_mask(sc, plain);
    __mmask32 bad = _mm512_test_epi16_mask(m, _mm512_set1_epi16(0xF0)) |
                    _mm512_mask_test_epi16_mask((__mmask32)~ext, m, m);
    if (n_last < 16) /* the call's last block is partial: its index must be inside */
        bad |= (__mmask32)((uint32_t)_mm512_cmpge_epu16_mask(m, _mm512_set1_epi16((short)n_last)) & (1u << (g - 1)));
    _mm512_store_si512(rs, _mm512_mask_mov_epi16(sc, bad, _mm512_set1_epi16(0xFF)));
    _mm512_store_si512(bm, _mm512_maskz_sllv_epi16(ext & ~bad, _mm512_set1_epi16(1), m));
}

A5 void d_nvfp4(bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes, const uint8_t *scales,
                const uint8_t *meta, size_t nb, size_t last_len, void *dst)
{
    const int plus = p->impl->bm_elem != NULL;
    sink o = sink_at(dt, dst, p->stream);
    nvrows t;
    memset(t.have, 0, sizeof t.have);
    const int lazy = nb < 16384; /* else every row at once, no test per block */
    if (!lazy)
        for (unsigned sc = 0; sc < 256; sc++)
            nvrow_make(&t, p, dt, sc);
    alignas(64) uint16_t rs[32], bm[32];
    for (size_t b0 = 0; b0 < nb; b0 += 32) {
        const size_t g = nb - b0 < 32 ? nb - b0 : 32;
        nv_group(plus, scales + b0, plus ? meta + b0 : NULL, g, b0 + g == nb ? last_len : 16, rs, bm);
        if (lazy)
            for (size_t j = 0; j < g; j++)
                if (!t.have[rs[j]])
                    nvrow_make(&t, p, dt, rs[j]);
        if (dt == BFP_DTYPE_F32) {
            for (size_t j = 0; j < g; j++, codes += 8) {
                __m512i c = nib16(codes);
                __m512i v = _mm512_permutexvar_epi32(c, _mm512_load_si512(t.f[rs[j]]));
                if (plus)
                    v = _mm512_mask_permutexvar_epi32(v, (__mmask16)bm[j], c, _mm512_load_si512(t.xf[rs[j]]));
                sink_push(&o, v);
            }
            continue;
        }
        /* bfloat16: two blocks per vector, from the two blocks' rows: index
         * bit 4 picks the block-max half of a row, bit 5 the second block */
        const __m512i hi = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, W2(32, 32), W2(32, 32), W2(32, 32), W2(32, 32),
                                             W2(32, 32), W2(32, 32), W2(32, 32), W2(32, 32));
        for (size_t j = 0; j < g; j += 2, codes += 16) {
            const int two = j + 1 < g;
            __m512i dw = two ? _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)codes))
                             : _mm512_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)codes));
            __m512i idx = _mm512_or_si512(_mm512_ternarylogic_epi32(dw, _mm512_slli_epi32(dw, 12),
                                                                    _mm512_set1_epi32(0x000F000F), 0xA8), hi);
            uint32_t bmm = bm[j] | (two ? (uint32_t)bm[j + 1] << 16 : 0);
            if (plus)
                idx = _mm512_mask_add_epi16(idx, (__mmask32)bmm, idx, _mm512_set1_epi16(16));
            __m512i v = _mm512_permutex2var_epi16(_mm512_load_si512(t.f[rs[j]]), idx,
                                                  _mm512_load_si512(t.f[rs[two ? j + 1 : j]]));
            if (two) {
                sink_push(&o, v);
            } else { /* the call's last block */
                sink_end(&o);
                _mm256_storeu_si256((__m256i *)o.d, _mm512_castsi512_si256(v));
            }
        }
    }
    sink_end(&o);
}

/* ---- HiF4 ----------------------------------------------------------------------------- */

/* Values k/4 * E6M2 * 2^(E1_8 + E1_16): the bfloat16 row of the E6M2 code
 * (exact: 3 significant bits times 3), then 1 or 2 added to the exponent
 * field of the nonzero lanes of each group of 8 and of 4. */
A5 void d_hif4(bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes, const uint8_t *scales,
               size_t nb, void *dst)
{
    sink o = sink_at(dt, dst, p->stream);
    /* lane i of a half: bit i/4 of E1_16's byte, bit i/8 of E1_8's nibble */
    const __m512i g4 = _mm512_setr_epi32(W2(1, 1), W2(1, 1), W2(2, 2), W2(2, 2), W2(4, 4), W2(4, 4), W2(8, 8),
                                         W2(8, 8), W2(16, 16), W2(16, 16), W2(32, 32), W2(32, 32), W2(64, 64),
                                         W2(64, 64), W2(128, 128), W2(128, 128));
    const __m512i g8 = _mm512_setr_epi32(W2(1, 1), W2(1, 1), W2(1, 1), W2(1, 1), W2(2, 2), W2(2, 2), W2(2, 2),
                                         W2(2, 2), W2(4, 4), W2(4, 4), W2(4, 4), W2(4, 4), W2(8, 8), W2(8, 8),
                                         W2(8, 8), W2(8, 8));
    const __m512i one = _mm512_set1_epi16(1 << 7);
    for (size_t b = 0; b < nb; b++, codes += 32) {
        uint32_t w = ks_load_le32(scales + 4 * b);
        __m512i tab = _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)hif4_rows[w & 0xFF]));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_set1_epi16(0x7FC0);
            if ((w & 0xFF) != 0xFF) {
                __m512i cw = words32(4, codes + 16 * h);
                __mmask32 nz = _mm512_test_epi16_mask(cw, _mm512_set1_epi16(7));
                __mmask32 m16 = _mm512_mask_test_epi16_mask(nz, _mm512_set1_epi16((short)((w >> (16 + 8 * h)) & 0xFF)), g4);
                __mmask32 m8 = _mm512_mask_test_epi16_mask(nz, _mm512_set1_epi16((short)((w >> (8 + 4 * h)) & 0xF)), g8);
                v = _mm512_permutexvar_epi16(cw, tab);
                v = _mm512_mask_add_epi16(v, m16, v, one);
                v = _mm512_mask_add_epi16(v, m8, v, one);
            }
            st_block16(dt, &o, v);
        }
    }
    sink_end(&o);
}

/* ---- thin wrappers: one per family and dtype, a case per element type ------------------ */

#define DARGS const bfp_dparams *p, const uint8_t *c, const uint8_t *sc, const uint8_t *m, \
              size_t nb, size_t last, void *d

A5 void dq_mx_any(bfp_dtype dt, DARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: d_mx(KS_E2M1, KS_ID_E2M1, dt, p, c, sc, nb, d); break;
    case KS_ID_E2M3: d_mx(KS_E2M3, KS_ID_E2M3, dt, p, c, sc, nb, d); break;
    case KS_ID_E3M2: d_mx(KS_E3M2, KS_ID_E3M2, dt, p, c, sc, nb, d); break;
    case KS_ID_E4M3: d_mx(KS_E4M3, KS_ID_E4M3, dt, p, c, sc, nb, d); break;
    case KS_ID_E5M2: d_mx(KS_E5M2, KS_ID_E5M2, dt, p, c, sc, nb, d); break;
    case KS_ID_INT8: d_mx(KS_INT8, KS_ID_INT8, dt, p, c, sc, nb, d); break;
    case KS_ID_INT4: d_mx(KS_INT4, KS_ID_INT4, dt, p, c, sc, nb, d); break;
    }
}

A5 void dq_mxplus_any(bfp_dtype dt, DARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: d_mxplus(KS_E2M1, KS_ID_E2M1, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E2M3: d_mxplus(KS_E2M3, KS_ID_E2M3, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E3M2: d_mxplus(KS_E3M2, KS_ID_E3M2, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E4M3: d_mxplus(KS_E4M3, KS_ID_E4M3, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E5M2: d_mxplus(KS_E5M2, KS_ID_E5M2, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_INT8: d_mxplus(KS_INT8, KS_ID_INT8, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_INT4: d_mxplus(KS_INT4, KS_ID_INT4, dt, p, c, sc, m, nb, last, d); break;
    }
}

static void dq_mx_f32(DARGS) { dq_mx_any(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void dq_mx_bf16(DARGS) { dq_mx_any(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void dq_mxplus_f32(DARGS) { dq_mxplus_any(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void dq_mxplus_bf16(DARGS) { dq_mxplus_any(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void dq_nvfp4_f32(DARGS) { d_nvfp4(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void dq_nvfp4_bf16(DARGS) { d_nvfp4(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void dq_hif4_f32(DARGS) { d_hif4(BFP_DTYPE_F32, p, c, sc, nb, d); }
static void dq_hif4_bf16(DARGS) { d_hif4(BFP_DTYPE_BF16, p, c, sc, nb, d); }

int bfp_cpu_avx512_dequant_init(bfp_kernels *k)
{
    call_once(&tabs_once, tabs_build);
    for (int id = 1; id < BFP_CPU_NFMT; id++) {
        const bfp_format_impl *impl = bfp_impl_get((bfp_format)id);
        if (!impl)
            continue;
        bfp_dkernel *d = k->dequant[id];
        int eid = ks_elem_id(impl);
        switch (impl->info.family) {
        case BFP_FAMILY_MX:
            if (eid == KS_ID_NONE)
                break;
            if (wdefs[eid].ok)
                d[0] = dq_mx_f32, d[1] = dq_mx_bf16;
            break;
        case BFP_FAMILY_MX_PLUS:
        case BFP_FAMILY_MX_PP:
            if (eid == KS_ID_NONE || !special_rule_holds(impl->elem, ks_elem_of_id[eid]))
                break;
            if (wdefs[eid].ok)
                d[0] = dq_mxplus_f32, d[1] = dq_mxplus_bf16;
            break;
        case BFP_FAMILY_NVFP4:
        case BFP_FAMILY_NVFP4_PLUS:
            if (!ks_elem_is(impl->elem, KS_E2M1))
                break;
            d[0] = dq_nvfp4_f32, d[1] = dq_nvfp4_bf16;
            break;
        case BFP_FAMILY_HIF4:
            d[0] = dq_hif4_f32, d[1] = dq_hif4_bf16;
            break;
        }
    }
    return 1;
}

#else /* built without the AVX-512 flags */

int bfp_cpu_avx512_dequant_init(bfp_kernels *k)
{
    (void)k;
    return 0;
}

#endif
