/* generic.c - portable C kernels for every format and dtype. Same decisions
 * as the reference, in float32 integer-and-bit arithmetic (kern_scalar.h
 * says why it is exact), one block at a time, no allocation. They fill the
 * kernel table first; the ISA files override what they speed up. */
#include "kern_scalar.h"

#include <math.h>
#include <threads.h>

/* ---- element value tables -------------------------------------------------- */

static float lut_e2m1[16], lut_e1m2[16], lut_int4[16], lut_e2m3[64], lut_e3m2[64],
    lut_e4m3[256], lut_e5m2[256], lut_int8[256], lut_x_e2m1[16], lut_x_int4[16],
    lut_x_e2m3[64], lut_x_e3m2[64], lut_x_e4m3[256], lut_x_e5m2[256], lut_x_int8[256];

/* 1 for the codes the quantizer never writes (bfp_elem_code_is_special). */
static uint8_t sp_e2m1[16], sp_int4[16], sp_e2m3[64], sp_e3m2[64], sp_e4m3[256], sp_e5m2[256],
    sp_int8[256];

static const struct {
    const bfp_elem_desc *e;
    float *lut;
    uint8_t *special; /* for the MX+ element types */
} luts[] = {
    {&bfp_e2m1, lut_e2m1, sp_e2m1},   {&bfp_e1m2, lut_e1m2, NULL},      {&bfp_int4, lut_int4, sp_int4},
    {&bfp_e2m3, lut_e2m3, sp_e2m3},   {&bfp_e3m2, lut_e3m2, sp_e3m2},   {&bfp_e4m3, lut_e4m3, sp_e4m3},
    {&bfp_e5m2, lut_e5m2, sp_e5m2},   {&bfp_int8, lut_int8, sp_int8},   {&bfp_ext_e2m1, lut_x_e2m1, NULL},
    {&bfp_ext_int4, lut_x_int4, NULL}, {&bfp_ext_e2m3, lut_x_e2m3, NULL}, {&bfp_ext_e3m2, lut_x_e3m2, NULL},
    {&bfp_ext_e4m3, lut_x_e4m3, NULL}, {&bfp_ext_e5m2, lut_x_e5m2, NULL}, {&bfp_ext_int8, lut_x_int8, NULL},
};

const float *bfp_cpu_elem_lut(const bfp_elem_desc *e)
{
    for (size_t i = 0; i < sizeof luts / sizeof luts[0]; i++)
        if (luts[i].e == e)
            return luts[i].lut;
    return NULL;
}

const uint8_t *bfp_cpu_elem_special(const bfp_elem_desc *e)
{
    for (size_t i = 0; i < sizeof luts / sizeof luts[0]; i++)
        if (luts[i].e == e)
            return luts[i].special;
    return NULL;
}

static once_flag luts_once = ONCE_FLAG_INIT;

static void build_luts_once(void)
{
    for (size_t i = 0; i < sizeof luts / sizeof luts[0]; i++)
        for (unsigned c = 0; c < (1u << luts[i].e->bits); c++) {
            luts[i].lut[c] = (float)bfp_elem_code_value(luts[i].e, c); /* exact */
            if (luts[i].special)
                luts[i].special[c] = (uint8_t)bfp_elem_code_is_special(luts[i].e, c);
        }
}

/* ---- loads, stores, code streams ------------------------------------------- */

/* n values of dtype at src as float32 bits (exact). */
static inline void g_load(bfp_dtype dt, const void *src, size_t n, uint32_t *x)
{
    const unsigned char *p = (const unsigned char *)src;
    if (dt == BFP_DTYPE_F32) {
        memcpy(x, p, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        x[i] = dt == BFP_DTYPE_BF16 ? (uint32_t)h << 16 : ks_bits(ks_f16_to_f32(h));
    }
}

static inline void g_store(bfp_dtype dt, void *dst, size_t n, const float *v)
{
    unsigned char *p = (unsigned char *)dst;
    if (dt == BFP_DTYPE_F32) {
        memcpy(p, v, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = ks_bf16(ks_bits(v[i]));
        memcpy(p + 2 * i, &h, 2);
    }
}

/* n codes (n a multiple of 4) of width w into an LSB-first byte stream. */
static inline void g_pack(const uint8_t *c, size_t n, int w, uint8_t *out)
{
    if (w == 8) {
        memcpy(out, c, n);
    } else if (w == 4) {
        for (size_t k = 0; k < n / 2; k++)
            out[k] = (uint8_t)(c[2 * k] | c[2 * k + 1] << 4);
    } else {
        for (size_t k = 0; k < n / 4; k++) {
            uint32_t v = (uint32_t)c[4 * k] | (uint32_t)c[4 * k + 1] << 6 |
                         (uint32_t)c[4 * k + 2] << 12 | (uint32_t)c[4 * k + 3] << 18;
            out[3 * k] = (uint8_t)v;
            out[3 * k + 1] = (uint8_t)(v >> 8);
            out[3 * k + 2] = (uint8_t)(v >> 16);
        }
    }
}

static inline void g_unpack(const uint8_t *in, size_t n, int w, uint8_t *c)
{
    if (w == 8) {
        memcpy(c, in, n);
    } else if (w == 4) {
        for (size_t k = 0; k < n / 2; k++) {
            c[2 * k] = in[k] & 0x0F;
            c[2 * k + 1] = in[k] >> 4;
        }
    } else {
        for (size_t k = 0; k < n / 4; k++) {
            uint32_t v = (uint32_t)in[3 * k] | (uint32_t)in[3 * k + 1] << 8 |
                         (uint32_t)in[3 * k + 2] << 16;
            for (int j = 0; j < 4; j++)
                c[4 * k + (size_t)j] = (uint8_t)(v >> (6 * j) & 0x3F);
        }
    }
}

static inline size_t g_esize(bfp_dtype dt)
{
    return dt == BFP_DTYPE_F32 ? 4 : 2;
}

/* ---- MX -------------------------------------------------------------------- */

static inline void g_q_mx(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb,
                          uint8_t *codes, uint8_t *scales, bfp_stats *st)
{
    const bfp_elem_desc *e = p->impl->elem;
    const size_t cb = (size_t)(32 * e->bits / 8);
    uint32_t x[32];
    uint8_t c[32];
    for (size_t b = 0; b < nb; b++, codes += cb) {
        g_load(dt, (const unsigned char *)src + b * 32 * g_esize(dt), 32, x);
        uint32_t amax = 0;
        for (int i = 0; i < 32; i++) {
            uint32_t a = x[i] & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        if (amax >= 0x7F800000u) { /* NaN or Inf: NaN scale, zero codes */
            scales[b] = 0xFF;
            memset(codes, 0, cb);
            st->nonfinite_blocks++;
            continue;
        }
        int se = ks_mx_shared_exp(amax, e->emax);
        scales[b] = (uint8_t)(se + 127);
        float f = ks_pow2(-se);
        for (int i = 0; i < 32; i++) {
            float y = ks_float(x[i] & 0x7FFFFFFFu) * f;
            c[i] = (uint8_t)ks_make_code(e, x[i] >> 31, ks_enc_mag(e, y));
        }
        g_pack(c, 32, e->bits, codes);
    }
}

static inline void g_d_mx(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes,
                          const uint8_t *scales, size_t nb, void *dst)
{
    const bfp_elem_desc *e = p->impl->elem;
    const float *lut = bfp_cpu_elem_lut(e);
    const size_t cb = (size_t)(32 * e->bits / 8);
    uint8_t c[32];
    float v[32];
    for (size_t b = 0; b < nb; b++) {
        g_unpack(codes + b * cb, 32, e->bits, c);
        if (scales[b] == 0xFF) {
            for (int i = 0; i < 32; i++)
                v[i] = ks_nan_scaled(lut[c[i]]);
        } else {
            float s = ks_pow2((int)scales[b] - 127);
            for (int i = 0; i < 32; i++)
                v[i] = lut[c[i]] * s;
        }
        g_store(dt, (unsigned char *)dst + b * 32 * g_esize(dt), 32, v);
    }
}

/* ---- MX+ and MX++ ---------------------------------------------------------- */

static inline void g_q_mxplus(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb,
                              uint8_t *codes, uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const bfp_elem_desc *e = p->impl->elem, *ext = p->impl->bm_elem;
    const int pp = p->impl->info.family == BFP_FAMILY_MX_PP;
    const size_t cb = (size_t)(32 * e->bits / 8);
    uint32_t x[32];
    uint8_t c[32];
    for (size_t b = 0; b < nb; b++, codes += cb) {
        g_load(dt, (const unsigned char *)src + b * 32 * g_esize(dt), 32, x);
        uint32_t amax = 0;
        int bm = 0;
        for (int i = 0; i < 32; i++) { /* first index of the max: ties go low */
            uint32_t a = x[i] & 0x7FFFFFFFu;
            if (a > amax) {
                amax = a;
                bm = i;
            }
        }
        if (amax >= 0x7F800000u || amax == 0 || ks_flog2(amax) - e->emax <= -127) {
            int nonfinite = amax >= 0x7F800000u;
            scales[b] = nonfinite ? 0xFF : 0x00; /* NaN or flushed block */
            meta[b] = 0;
            memset(codes, 0, cb);
            if (nonfinite)
                st->nonfinite_blocks++;
            else
                st->flushed_blocks++;
            continue;
        }
        int se = ks_flog2(amax) - e->emax, nbm = se;
        if (pp) {
            uint32_t max2 = 0;
            for (int i = 0; i < 32; i++) {
                uint32_t a = x[i] & 0x7FFFFFFFu;
                if (i != bm && a > max2)
                    max2 = a;
            }
            nbm = ks_mxpp_nbm_exp(max2, se, e->emax);
        }
        scales[b] = (uint8_t)(se + 127);
        meta[b] = (uint8_t)(bm | (se - nbm) << 5);
        /* 2^-nbm may pass 2^127 (MX++ of tiny blocks): then two exact steps */
        float f1 = -nbm > 127 ? 0x1p64f : 1.0f, f2 = ks_pow2(-nbm - (-nbm > 127 ? 64 : 0));
        for (int i = 0; i < 32; i++) {
            float y = ks_float(x[i] & 0x7FFFFFFFu) * f1 * f2;
            c[i] = (uint8_t)ks_make_code(e, x[i] >> 31, ks_enc_mag(e, y));
        }
        float ybm = ks_float(amax) * ks_pow2(-se);
        c[bm] = (uint8_t)ks_make_code(ext, x[bm] >> 31, ks_enc_ext(ext, ybm));
        g_pack(c, 32, e->bits, codes);
    }
}

/* 1 if an MX+ block's bytes are impossible (as bfp_mxplus_block_is_bad). */
static inline int g_mxplus_bad(const bfp_format_impl *impl, uint8_t sc, uint8_t m,
                               const uint8_t *c, size_t n)
{
    int empty = sc == 0x00 || sc == 0xFF;
    unsigned idx = m & 0x1Fu, delta = (unsigned)m >> 5;
    if ((empty && m != 0) || idx >= n ||
        (impl->info.family == BFP_FAMILY_MX_PLUS && delta != 0))
        return 1;
    const uint8_t *special = bfp_cpu_elem_special(impl->elem);
    for (size_t i = 0; i < n; i++) {
        if (empty && c[i] != 0)
            return 1;
        if (i != idx && special[c[i]])
            return 1;
    }
    return 0;
}

static inline void g_d_mxplus(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes,
                              const uint8_t *scales, const uint8_t *meta, size_t nb,
                              size_t last_len, void *dst)
{
    const bfp_elem_desc *e = p->impl->elem;
    const float *lut = bfp_cpu_elem_lut(e), *xlut = bfp_cpu_elem_lut(p->impl->bm_elem);
    const size_t cb = (size_t)(32 * e->bits / 8);
    uint8_t c[32];
    float v[32];
    for (size_t b = 0; b < nb; b++) {
        size_t n = b + 1 == nb ? last_len : 32;
        uint8_t sc = scales[b], m = meta[b];
        g_unpack(codes + b * cb, 32, e->bits, c);
        if (sc == 0xFF || g_mxplus_bad(p->impl, sc, m, c, n)) {
            for (int i = 0; i < 32; i++)
                v[i] = ks_float(0x7FC00000u);
        } else if (sc == 0x00) {
            for (int i = 0; i < 32; i++)
                v[i] = 0.0f;
        } else {
            int se = (int)sc - 127;
            float s = ks_pow2(se - (int)(m >> 5));
            for (int i = 0; i < 32; i++)
                v[i] = lut[c[i]] * s;
            v[m & 0x1F] = xlut[c[m & 0x1F]] * ks_pow2(se);
        }
        g_store(dt, (unsigned char *)dst + b * 32 * g_esize(dt), 32, v);
    }
}

/* ---- NVFP4 and NVFP4+ ------------------------------------------------------ */

static inline void g_q_nvfp4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb,
                             uint8_t *codes, uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int plus = p->impl->bm_elem != NULL;
    uint32_t x[16], t[16];
    uint8_t c[16];
    for (size_t b = 0; b < nb; b++, codes += 8) {
        g_load(dt, (const unsigned char *)src + b * 16 * g_esize(dt), 16, x);
        uint32_t tmax = 0;
        for (int i = 0; i < 16; i++) {
            t[i] = ks_bits(ks_float(x[i]) * p->s_enc); /* t = fp32(x * s_enc) */
            uint32_t a = t[i] & 0x7FFFFFFFu;
            tmax = a > tmax ? a : tmax;
        }
        if (plus)
            meta[b] = 0;
        if (tmax >= 0x7F800000u) {
            scales[b] = 0x7F;
            memset(codes, 0, 8);
            st->nonfinite_blocks++;
            continue;
        }
        unsigned sc = ks_nvfp4_scale_code(ks_float(tmax));
        scales[b] = (uint8_t)sc;
        float sb = ks_e4m3_value(sc), thr[7];
        for (int k = 0; k < 7; k++)
            thr[k] = ks_e2m1_mid[k] * sb;
        for (int i = 0; i < 16; i++) {
            unsigned mag = sc ? ks_mid_index(ks_float(t[i] & 0x7FFFFFFFu), thr) : 0;
            c[i] = (uint8_t)(mag | (t[i] >> 31) << 3);
        }
        if (plus && sc > KS_NV_PLAIN_MAX) {
            int bm = 0;
            while ((t[bm] & 0x7FFFFFFFu) != tmax)
                bm++;
            for (int k = 0; k < 7; k++)
                thr[k] = ks_ext4_mid[k] * sb;
            c[bm] = (uint8_t)(ks_mid_index(ks_float(tmax), thr) | (t[bm] >> 31) << 3);
            meta[b] = (uint8_t)bm;
        }
        g_pack(c, 16, 4, codes);
    }
}

static inline void g_d_nvfp4(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes,
                             const uint8_t *scales, const uint8_t *meta, size_t nb,
                             size_t last_len, void *dst)
{
    const int plus = p->impl->bm_elem != NULL;
    uint8_t c[16];
    float v[16];
    for (size_t b = 0; b < nb; b++) {
        size_t n = b + 1 == nb ? last_len : 16;
        unsigned sc = scales[b];
        int bad = !p->s_enc_ok || (sc & 0x80) || sc == 0x7F;
        int bm = -1;
        if (plus && !bad) {
            unsigned m = meta[b];
            if ((m & 0xF0) || (sc <= KS_NV_PLAIN_MAX && m != 0) || m >= n)
                bad = 1;
            else if (sc > KS_NV_PLAIN_MAX)
                bm = (int)m;
        }
        g_unpack(codes + b * 8, 16, 4, c);
        float sb = ks_e4m3_value(sc & 0x7F);
        for (int i = 0; i < 16; i++) {
            float q_sb = (i == bm ? lut_x_e2m1[c[i]] : lut_e2m1[c[i]]) * sb; /* exact */
            v[i] = bad ? ks_float(0x7FC00000u) : q_sb / p->s_enc;
        }
        g_store(dt, (unsigned char *)dst + b * 16 * g_esize(dt), 16, v);
    }
}

/* ---- HiF4 ------------------------------------------------------------------ */

static inline void g_q_hif4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb,
                            uint8_t *codes, uint8_t *scales, bfp_stats *st)
{
    uint32_t x[64];
    uint8_t c[64];
    for (size_t b = 0; b < nb; b++, codes += 32) {
        g_load(dt, (const unsigned char *)src + b * 64 * g_esize(dt), 64, x);
        uint32_t v16[16], v8[8], vmax = 0;
        for (int j = 0; j < 16; j++) {
            uint32_t m = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++) {
                uint32_t a = x[i] & 0x7FFFFFFFu;
                m = a > m ? a : m;
            }
            v16[j] = m;
        }
        for (int k = 0; k < 8; k++) {
            v8[k] = v16[2 * k] > v16[2 * k + 1] ? v16[2 * k] : v16[2 * k + 1];
            vmax = v8[k] > vmax ? v8[k] : vmax;
        }
        if (vmax >= 0x7F800000u) {
            ks_store_le32(scales + 4 * b, 0xFFu);
            memset(codes, 0, 32);
            st->nonfinite_blocks++;
            continue;
        }
        unsigned code = ks_hif4_code(ks_float(vmax));
        double rec = ks_hif4_rec(code); /* products with rec are exact in double */
        uint32_t e1_8 = 0, e1_16 = 0;
        for (int k = 0; k < 8; k++)
            if ((double)ks_float(v8[k]) * rec >= 4)
                e1_8 |= 1u << k;
        for (int g = 0; g < 16; g++)
            if ((double)ks_float(v16[g]) * rec >= ((e1_8 >> (g / 2)) & 1 ? 4.0 : 2.0))
                e1_16 |= 1u << g;
        for (int i = 0; i < 64; i++) {
            int shift = (int)((e1_8 >> (i / 8)) & 1) + (int)((e1_16 >> (i / 4)) & 1);
            double t = (double)ks_float(x[i] & 0x7FFFFFFFu) * rec * (double)(4 >> shift);
            double k = floor(t + 0.5); /* ties away; t + 0.5 cannot cross an integer */
            c[i] = (uint8_t)((k > 7 ? 7u : (unsigned)k) | (x[i] >> 31) << 3);
        }
        ks_store_le32(scales + 4 * b, code | e1_8 << 8 | e1_16 << 16);
        g_pack(c, 64, 4, codes);
    }
}

static inline void g_d_hif4(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes,
                            const uint8_t *scales, size_t nb, void *dst)
{
    uint8_t c[64];
    float v[64];
    for (size_t b = 0; b < nb; b++) {
        uint32_t w = ks_load_le32(scales + 4 * b);
        g_unpack(codes + b * 32, 64, 4, c);
        if ((w & 0xFF) == 0xFF) {
            for (int i = 0; i < 64; i++)
                v[i] = ks_float(0x7FC00000u);
        } else {
            float s = ks_hif4_scale(w & 0xFF);
            for (int i = 0; i < 64; i++) {
                int shift = (int)((w >> (8 + i / 8)) & 1) + (int)((w >> (16 + i / 4)) & 1);
                v[i] = lut_e1m2[c[i]] * s * (float)(1 << shift); /* exact */
            }
        }
        g_store(dt, (unsigned char *)dst + b * 64 * g_esize(dt), 64, v);
    }
}

/* ---- amax (NVFP4 tensor scale) ---------------------------------------------- */

static inline float g_amax(bfp_dtype dt, const void *src, size_t n)
{
    uint32_t x[256], m = 0;
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        size_t k = n - i0 < 256 ? n - i0 : 256;
        g_load(dt, (const unsigned char *)src + i0 * g_esize(dt), k, x);
        for (size_t i = 0; i < k; i++) {
            uint32_t a = x[i] & 0x7FFFFFFFu;
            if (a < 0x7F800000u && a > m)
                m = a;
        }
    }
    return ks_float(m);
}

/* ---- thin wrappers per dtype ------------------------------------------------- */

#define G_QUANT(NAME, BODY)                                                          \
    static void NAME##_f32(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, \
                           uint8_t *sc, uint8_t *m, bfp_stats *st)                    \
    { BODY(BFP_DTYPE_F32); }                                                          \
    static void NAME##_bf16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,\
                            uint8_t *sc, uint8_t *m, bfp_stats *st)                   \
    { BODY(BFP_DTYPE_BF16); }                                                         \
    static void NAME##_f16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, \
                           uint8_t *sc, uint8_t *m, bfp_stats *st)                    \
    { BODY(BFP_DTYPE_F16); }

#define Q_MX(DT) g_q_mx(p, DT, s, nb, c, sc, st)
#define Q_MXP(DT) g_q_mxplus(p, DT, s, nb, c, sc, m, st)
#define Q_NV(DT) g_q_nvfp4(p, DT, s, nb, c, sc, m, st)
#define Q_HIF4(DT) g_q_hif4(p, DT, s, nb, c, sc, st)
G_QUANT(gq_mx, Q_MX)
G_QUANT(gq_mxplus, Q_MXP)
G_QUANT(gq_nvfp4, Q_NV)
G_QUANT(gq_hif4, Q_HIF4)

#define G_DEQUANT(NAME, BODY)                                                         \
    static void NAME##_f32(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,  \
                           const uint8_t *m, size_t nb, size_t last, void *d)          \
    { BODY(BFP_DTYPE_F32); }                                                           \
    static void NAME##_bf16(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc, \
                            const uint8_t *m, size_t nb, size_t last, void *d)         \
    { BODY(BFP_DTYPE_BF16); }

#define D_MX(DT) g_d_mx(p, DT, c, sc, nb, d)
#define D_MXP(DT) g_d_mxplus(p, DT, c, sc, m, nb, last, d)
#define D_NV(DT) g_d_nvfp4(p, DT, c, sc, m, nb, last, d)
#define D_HIF4(DT) g_d_hif4(p, DT, c, sc, nb, d)
G_DEQUANT(gd_mx, D_MX)
G_DEQUANT(gd_mxplus, D_MXP)
G_DEQUANT(gd_nvfp4, D_NV)
G_DEQUANT(gd_hif4, D_HIF4)

static float ga_f32(const void *s, size_t n) { return g_amax(BFP_DTYPE_F32, s, n); }
static float ga_bf16(const void *s, size_t n) { return g_amax(BFP_DTYPE_BF16, s, n); }
static float ga_f16(const void *s, size_t n) { return g_amax(BFP_DTYPE_F16, s, n); }

void bfp_cpu_generic_init(bfp_kernels *k)
{
    /* once: several kernel tables may be filled while kernels run */
    call_once(&luts_once, build_luts_once);
    memset(k, 0, sizeof *k);
    k->name = "generic";
    for (int id = 1; id < BFP_CPU_NFMT; id++) {
        const bfp_format_info *f = bfp_format_get((bfp_format)id);
        if (!f)
            continue;
        switch (f->family) {
#define SET(Q, D)                                                                     \
    k->quant[id][0] = Q##_f32, k->quant[id][1] = Q##_bf16, k->quant[id][2] = Q##_f16; \
    k->dequant[id][0] = D##_f32, k->dequant[id][1] = D##_bf16;
        case BFP_FAMILY_MX: SET(gq_mx, gd_mx) break;
        case BFP_FAMILY_MX_PLUS:
        case BFP_FAMILY_MX_PP: SET(gq_mxplus, gd_mxplus) break;
        case BFP_FAMILY_NVFP4:
        case BFP_FAMILY_NVFP4_PLUS: SET(gq_nvfp4, gd_nvfp4) break;
        case BFP_FAMILY_HIF4: SET(gq_hif4, gd_hif4) break;
#undef SET
        }
    }
    k->amax[0] = ga_f32;
    k->amax[1] = ga_bf16;
    k->amax[2] = ga_f16;
}
