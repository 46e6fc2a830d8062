/* matmul_pack.c - the prepacked weight layout of the GPU matmul, and its
 * exact inverse. A tile is 16 rows x 64 columns of W. Lane l of the warp
 * that multiplies it (g = l / 4, t = l % 4) holds 32 codes in one 16-byte
 * vector: four words j = 0..3 (one per mma k16 step), each the four A-operand
 * registers pp = 0..3 of step j (row g + 8 * (pp & 1), columns 16j + 2t +
 * 8 * (pp >> 1) and + 1). A word stores the 32 bits of its registers' decoded
 * bf16 patterns (gemm_fused.cuh: magnitude bits at 8:6 for E2M1, 7:5 for
 * E1M2, sign at 15, in each half) at the places from which the kernel gets
 * each register with a rotation and an AND (code_grps). Scale records are per
 * lane group g, with UE4M3 and HiF4 scales re-encoded so that a scale operand
 * is one PRMT and one IMAD (docs/gemm.md). An MX+/NVFP4+ block max
 * 4 * (1 + m/8) is stored as the E2M1 code of its high part (4 or 6, SPEC 5
 * "BM split for matrix units") and a correction byte saying which lane and
 * register hold it and its two low mantissa bits, which the kernel ORs into
 * the decoded bf16 (bits 5:4 under E2M1's one mantissa bit), making the
 * value exact again. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#define TILE_N 16
#define TILE_K 64
#define CODE_TILE 512

typedef struct {
    const bfp_format_impl *impl;
    int block;        /* 32, 16 or 64 */
    int scale_rec;    /* bytes of scales per tile: 32 or 64 */
    int corr_rec;     /* bytes of corrections per tile: 0, 32 or 64 */
} pack_fmt;

static bfp_status pack_fmt_get(bfp_format fmt, pack_fmt *pf)
{
    memset(pf, 0, sizeof *pf);
    pf->impl = bfp_impl_get(fmt);
    if (!pf->impl)
        return BFP_ERR_FORMAT;
    pf->block = pf->impl->info.block;
    if (pf->impl->mm_kind == BFP_MM_NONE)
        return BFP_ERR_UNSUPPORTED;
    pf->scale_rec = BFP_MM_SCALE_REC(pf->impl->mm_kind);
    pf->corr_rec = BFP_MM_CORR_REC(pf->impl->mm_kind);
    return BFP_OK;
}

int bfp_matmul_format_supported(bfp_format fmt)
{
    pack_fmt pf;
    return pack_fmt_get(fmt, &pf) == BFP_OK;
}

int bfp_matmul_qx_supported(bfp_format x_fmt)
{
    const bfp_format_info *fi = bfp_format_get(x_fmt);
    return fi && !fi->has_tensor_scale; /* a code times a power of two: bf16 holds it */
}

bfp_status bfp_matmul_packed_sizes(bfp_format fmt, size_t n, size_t k,
                                   bfp_packed_sizes *out)
{
    pack_fmt pf;
    bfp_status st = pack_fmt_get(fmt, &pf);
    if (st != BFP_OK)
        return st;
    if (!out)
        return BFP_ERR_ARG;
    if (n == 0 || k == 0)
        return BFP_ERR_SHAPE;
    size_t tiles_n = (n + TILE_N - 1) / TILE_N, tiles_k = (k + TILE_K - 1) / TILE_K;
    if (tiles_n > SIZE_MAX / CODE_TILE / tiles_k)
        return BFP_ERR_SHAPE;
    out->codes = tiles_n * tiles_k * CODE_TILE;
    out->scales = tiles_n * tiles_k * (size_t)pf.scale_rec;
    out->corr = tiles_n * tiles_k * (size_t)pf.corr_rec;
    return BFP_OK;
}

/* Row and column (inside the tile) of slot p of word j of lane l: half p / 4
 * of A-operand register p % 4 of k16 step j (PTX mma.m16n8k16 layout). */
static void slot_pos(int l, int j, int p, int *row, int *col)
{
    int g = l >> 2, t = l & 3;
    *row = g + 8 * (p & 1);
    *col = 16 * j + 2 * t + 8 * ((p >> 1) & 1) + (p >> 2);
}

/* Offset of a block's scale in a tile's record: by lane group g = row % 8,
 * then row / 8, then block; HiF4 stores 4-byte words. */
static size_t scale_off(const pack_fmt *pf, int row, int b)
{
    int per_row = TILE_K / pf->block; /* 2, 4 or 1 */
    int bytes = pf->block == 64 ? 4 : 1;
    return (size_t)((row & 7) * 2 * per_row + (row >> 3) * per_row + b) * bytes;
}

/* Offset of a block's correction byte: laid out like the one-byte scales,
 * so a lane loads the corrections of its rows with one word per tile. */
static size_t corr_off(const pack_fmt *pf, int row, int b)
{
    int per_row = TILE_K / pf->block;
    return (size_t)((row & 7) * 2 * per_row + (row >> 3) * per_row + b);
}

/* Register pp of a code word is OR over its groups of rotr(word, rot) &
 * mask (gemm_fused.cuh code_rot / code_mask, the same table); [E1M2][pp]. */
typedef struct {
    int rot;
    uint32_t mask;
} code_grp;
static const code_grp code_grps[2][4][2] = {
    {{{0, 0x80C080C0u}, {8, 0x01000100u}}, {{2, 0x81C081C0u}, {0, 0}},
     {{12, 0x81C081C0u}, {0, 0}}, {{6, 0x81C081C0u}, {0, 0}}},
    {{{0, 0x00600060u}, {1, 0x80808080u}}, {{4, 0x00E000E0u}, {2, 0x80008000u}},
     {{13, 0x80E080E0u}, {0, 0}}, {{8, 0x80E080E0u}, {0, 0}}},
};

/* A 4-bit code as the kernel's bf16 pattern (magnitude bits 8:6 or 7:5, sign 15) */
static uint32_t code_pattern(int e1m2, unsigned c)
{
    return (uint32_t)(c & 7) << (e1m2 ? 5 : 6) | (uint32_t)(c & 8) << 12;
}

static unsigned pattern_code(int e1m2, uint32_t p)
{
    return (unsigned)(p >> (e1m2 ? 5 : 6) & 7) | (unsigned)(p >> 12 & 8);
}

/* Word of four registers' patterns reg[pp] (low half | high half << 16), and back */
static uint32_t code_word(int e1m2, const uint32_t reg[4])
{
    uint32_t w = 0;
    for (int pp = 0; pp < 4; pp++)
        for (int i = 0; i < 2; i++)
            for (int b = 0; b < 32; b++)
                if (code_grps[e1m2][pp][i].mask >> b & 1)
                    w |= (reg[pp] >> b & 1) << ((b + code_grps[e1m2][pp][i].rot) & 31);
    return w;
}

/* code_word() moves each of the 32 bits of a word's eight codes (slot p:
 * register p % 4, half p / 4, code bits 4p .. 4p + 3) to a fixed place and
 * ORs them, so four tables of 256 words, one per byte of those 32 bits, give
 * the word in four lookups. code_word() itself walks 256 mask bits a word
 * (tens of ns per element; a 8192 x 8192 weight took 2.3 s). */
typedef struct {
    uint32_t t[4][256];
} word_tables;

static void word_tables_make(int e1m2, word_tables *wt)
{
    for (int i = 0; i < 4; i++)
        for (unsigned v = 0; v < 256; v++) {
            uint32_t reg[4] = {0, 0, 0, 0};
            for (int h = 0; h < 2; h++) {
                int p = 2 * i + h;
                reg[p & 3] |= code_pattern(e1m2, v >> (4 * h) & 15) << (16 * (p >> 2));
            }
            wt->t[i][v] = code_word(e1m2, reg);
        }
}

static void code_regs(int e1m2, uint32_t w, uint32_t reg[4])
{
    for (int pp = 0; pp < 4; pp++) {
        reg[pp] = 0;
        for (int i = 0; i < 2; i++)
            for (int b = 0; b < 32; b++)
                if (code_grps[e1m2][pp][i].mask >> b & 1)
                    reg[pp] |= (w >> ((b + code_grps[e1m2][pp][i].rot) & 31) & 1) << b;
    }
}

/* Packed UE4M3: q = (E + 10) << 3 | m for the value 2^E (1 + m/8) (its
 * subnormals normalized), 0 for zero, 0xA8 for NaN: the kernel's operand is
 * q * 16 + 234 * 128 (gemm_fused.cuh ue4m3_operand). */
#define NV_PACKED_NAN 0xA8u
static uint8_t ue4m3_pack(uint32_t s)
{
    if (s == 0x7F)
        return NV_PACKED_NAN;
    double v = bfp_grid_value(&bfp_e4m3, s);
    if (v == 0.0)
        return 0;
    int e;
    double f = frexp(v, &e); /* v = f 2^e, f in [0.5, 1) */
    return (uint8_t)((e - 1 + 10) << 3 | (int)((2.0 * f - 1.0) * 8.0));
}

static double ue4m3_packed_value(uint32_t q)
{
    if (q == NV_PACKED_NAN)
        return NAN;
    return q == 0 ? 0.0 : ldexp(1.0 + (q & 7) / 8.0, (int)(q >> 3) - 10);
}

/* Packed HiF4 word: UE6M2 in bits 31:24, and for each 8-column group c the
 * flags E1_8[c], E1_16[2c], E1_16[2c + 1] in bits 3c, 3c + 1, 3c + 2, so a
 * lane gets its groups' flag sums with two ANDs and one add. */
static uint32_t hif4_pack(uint32_t s)
{
    uint32_t w = (s & 0xFFu) << 24;
    for (int c = 0; c < 8; c++)
        w |= (s >> (8 + c) & 1) << (3 * c) | (s >> (16 + 2 * c) & 3) << (3 * c + 1);
    return w;
}

/* Exponent of the flags of column col (0..63) of a packed HiF4 word */
static int hif4_flags(uint32_t w, int col)
{
    int c = col / 8, half = (col / 4) & 1;
    return (int)(w >> (3 * c) & 1) + (int)(w >> (3 * c + 1 + half) & 1);
}

/* Correction byte of a block max at index idx of its block (of block
 * elements) with low bits lo and sign bit sign: lo (bits 1:0), the sign
 * (bit 2), then the max's slot among its lane's registers of the block,
 * p = cand + C * half (C = 4 for 32-element blocks, 2 for 16; cand =
 * 2 * (k16 step within the block) + k half, half = the half of the
 * register), then the lane t that holds it. The operand decode's shift
 * amount is 4 + 8p (gemm_fused.cuh corr_slots); the skinny kernel's
 * correction after the mma reads the column and the sign (corr_col,
 * corr_coef). */
static uint8_t corr_pack(int block, unsigned idx, unsigned lo, unsigned sign)
{
    unsigned cbits = block == 32 ? 2 : 1;
    unsigned t = (idx & 7) >> 1, cand = ((idx >> 4) & 1) * 2 + ((idx >> 3) & 1);
    unsigned p = cand | (idx & 1) << cbits;
    return (uint8_t)(lo | sign << 2 | p << 3 | t << (4 + cbits));
}

static unsigned corr_index(int block, uint8_t b)
{
    unsigned cbits = block == 32 ? 2 : 1;
    unsigned p = (unsigned)b >> 3 & ((2u << cbits) - 1), t = (unsigned)b >> (4 + cbits) & 3;
    unsigned cand = p & ((1u << cbits) - 1), half = p >> cbits;
    return (cand >> 1) << 4 | (cand & 1) << 3 | t << 1 | half;
}

/* The value a scale byte (word for HiF4) stands for, NaN for NaN codes. */
static double scale_value(const pack_fmt *pf, uint32_t s)
{
    switch (pf->impl->info.scale) {
    case BFP_SCALE_E8M0: return s == 0xFF ? NAN : ldexp(1.0, (int)s - 127);
    case BFP_SCALE_UE4M3: return ue4m3_packed_value(s);
    default: return bfp_scale_decode(BFP_SCALE_HIF4, s >> 24);
    }
}

/* A block's scale (NaN code for NaN blocks) as the packed record stores it */
static uint32_t scale_pack(const pack_fmt *pf, uint32_t s)
{
    switch (pf->impl->info.scale) {
    case BFP_SCALE_E8M0: return s;
    case BFP_SCALE_UE4M3: return ue4m3_pack(s);
    default: return hif4_pack(s);
    }
}

static uint32_t nan_scale(const pack_fmt *pf)
{
    return pf->impl->info.scale == BFP_SCALE_UE4M3 ? 0x7F : 0xFF;
}

/* Pack one block: its scale (or NaN code) and, for MX+/NVFP4+, the block
 * max's index in the block, or -1. */
static int pack_block(const pack_fmt *pf, const bfp_const_planes *w,
                      const bfp_plane_sizes *sz, size_t r, size_t bk, size_t cols,
                      uint32_t *scale)
{
    const bfp_format_impl *impl = pf->impl;
    size_t idx = r * sz->blocks_per_row + bk;
    if (pf->block == 64)
        memcpy(scale, w->scales + 4 * idx, 4);
    else
        *scale = w->scales[idx];
    int bad = impl->block_is_bad(impl, w, sz, r, bk, cols);
    if (impl->info.scale == BFP_SCALE_E8M0 && *scale == 0xFF)
        bad = 1;
    if (impl->info.scale == BFP_SCALE_UE4M3 && (*scale & 0x80 || *scale == 0x7F))
        bad = 1;
    if (impl->info.scale == BFP_SCALE_HIF4 && (*scale & 0xFF) == 0xFF)
        bad = 1;
    if (bad) {
        *scale = pf->block == 64 ? 0xFFu : nan_scale(pf);
        return -2;
    }
    if (!impl->bm_elem)
        return -1;
    if (impl->info.family == BFP_FAMILY_MX_PLUS && *scale == 0x00)
        return -1; /* flushed block: all codes zero */
    if (impl->info.family == BFP_FAMILY_NVFP4_PLUS && *scale <= 0x02)
        return -1; /* plain NVFP4 block */
    return (int)(w->meta[idx] & (pf->block == 32 ? 0x1F : 0x0F));
}

/* What the prepack's threads share; each packs whole row bands of tiles. */
typedef struct {
    pack_fmt pf;
    bfp_plane_sizes sz;
    const bfp_const_planes *w;
    size_t n, k, tiles_n, tiles_k;
    int per_row, e1m2;
    uint8_t *codes, *scales, *corr;
    word_tables wt; /* 4 KB */
} prepack_ctx;

static void prepack_bands(const prepack_ctx *c, size_t nt0, size_t nt1)
{
    const size_t tiles_k = c->tiles_k;
    const int per_row = c->per_row;
    for (size_t nt = nt0; nt < nt1; nt++)
        for (size_t kc = 0; kc < tiles_k; kc++) {
            size_t tile = nt * tiles_k + kc;
            uint8_t tcodes[TILE_N][TILE_K];
            uint8_t *srec = c->scales + tile * (size_t)c->pf.scale_rec;
            uint8_t *crec = c->pf.corr_rec ? c->corr + tile * (size_t)c->pf.corr_rec : NULL;
            memset(tcodes, 0, sizeof tcodes);
            memset(srec, 0, (size_t)c->pf.scale_rec);
            if (crec)
                memset(crec, 0, (size_t)c->pf.corr_rec);
            for (int r = 0; r < TILE_N; r++) {
                size_t row = nt * TILE_N + (size_t)r;
                if (row >= c->n)
                    break;
                const uint8_t *crow = c->w->codes + row * c->sz.code_row_bytes;
                for (int b = 0; b < per_row; b++) {
                    size_t col0 = kc * TILE_K + (size_t)b * (size_t)c->pf.block;
                    if (col0 >= c->k)
                        break;
                    uint32_t scale;
                    int bm = pack_block(&c->pf, c->w, &c->sz, row, col0 / (size_t)c->pf.block,
                                        c->k, &scale);
                    uint32_t packed = scale_pack(&c->pf, scale);
                    memcpy(srec + scale_off(&c->pf, r, b), &packed, c->pf.block == 64 ? 4 : 1);
                    if (bm == -2)
                        continue; /* NaN block: zero codes, NaN scale */
                    /* a zero UE4M3 scale packs as a finite operand: zero the
                     * magnitudes (the signs keep the values' -0) */
                    unsigned keep = c->pf.impl->info.scale == BFP_SCALE_UE4M3 && packed == 0 ? 8 : 15;
                    for (int i = 0; i < c->pf.block && col0 + (size_t)i < c->k; i++) {
                        unsigned code = bfp_get_code(crow, col0 + (size_t)i, 4) & keep;
                        if (i == bm) { /* high part as E2M1, low bits aside */
                            unsigned lo = code & 3;
                            if (lo)
                                crec[corr_off(&c->pf, r, b)] =
                                    corr_pack(c->pf.block, (unsigned)i, lo, code >> 3);
                            code = (code & 8) | (6 + ((code & 7) >> 2));
                        }
                        tcodes[r][b * c->pf.block + i] = (uint8_t)code;
                    }
                }
            }
            uint8_t *cdst = c->codes + tile * CODE_TILE;
            for (int l = 0; l < 32; l++)
                for (int j = 0; j < 4; j++) {
                    uint32_t word = 0;
                    for (int i = 0; i < 4; i++) { /* slots 2i and 2i + 1 */
                        int row0, col0, row1, col1;
                        slot_pos(l, j, 2 * i, &row0, &col0);
                        slot_pos(l, j, 2 * i + 1, &row1, &col1);
                        word |= c->wt.t[i][tcodes[row0][col0] | tcodes[row1][col1] << 4];
                    }
                    for (int i = 0; i < 4; i++)
                        cdst[l * 16 + j * 4 + i] = (uint8_t)(word >> (8 * i));
                }
        }
}

static void prepack_task(void *ctx, int t, int nthreads)
{
    const prepack_ctx *c = (const prepack_ctx *)ctx;
    prepack_bands(c, c->tiles_n * (size_t)t / (size_t)nthreads,
                  c->tiles_n * (size_t)(t + 1) / (size_t)nthreads);
}

bfp_status bfp_matmul_prepack_par(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                  size_t k, uint8_t *codes, uint8_t *scales, uint8_t *corr,
                                  const bfp_parallel *par)
{
    prepack_ctx *c = malloc(sizeof *c);
    if (!c)
        return BFP_ERR_NOMEM;
    bfp_status st = bfp_matmul_packed_sizes(fmt, n, k, &(bfp_packed_sizes){0});
    if (st != BFP_OK) {
        free(c);
        return st;
    }
    pack_fmt_get(fmt, &c->pf);
    if (!w || !w->codes || !w->scales || !codes || !scales ||
        (c->pf.corr_rec && (!w->meta || !corr))) {
        free(c);
        return BFP_ERR_ARG;
    }
    bfp_plane_sizes_for(fmt, n, k, &c->sz);
    c->w = w;
    c->n = n, c->k = k;
    c->tiles_n = (n + TILE_N - 1) / TILE_N, c->tiles_k = (k + TILE_K - 1) / TILE_K;
    c->per_row = TILE_K / c->pf.block, c->e1m2 = c->pf.block == 64;
    c->codes = codes, c->scales = scales, c->corr = corr;
    word_tables_make(c->e1m2, &c->wt);
    /* bands of tiles are independent: the bytes are the same for any count */
    if (par)
        par->run(par->threads_for(0, c->sz.codes, c->tiles_n), prepack_task, c);
    else
        prepack_task(c, 0, 1);
    free(c);
    return BFP_OK;
}

bfp_status bfp_matmul_unpack(bfp_format fmt, const uint8_t *codes,
                             const uint8_t *scales, const uint8_t *corr,
                             float tensor_scale, size_t n, size_t k, float *w)
{
    pack_fmt pf;
    bfp_packed_sizes ps;
    bfp_status st = bfp_matmul_packed_sizes(fmt, n, k, &ps);
    if (st != BFP_OK)
        return st;
    pack_fmt_get(fmt, &pf);
    if (!codes || !scales || !w || (pf.corr_rec && !corr))
        return BFP_ERR_ARG;
    const bfp_elem_desc *elem = pf.impl->elem; /* E2M1 or E1M2 */
    const int per_row = TILE_K / pf.block;
    size_t tiles_n = (n + TILE_N - 1) / TILE_N, tiles_k = (k + TILE_K - 1) / TILE_K;

    for (size_t nt = 0; nt < tiles_n; nt++)
        for (size_t kc = 0; kc < tiles_k; kc++) {
            size_t tile = nt * tiles_k + kc;
            const uint8_t *cs = codes + tile * CODE_TILE;
            const uint8_t *srec = scales + tile * (size_t)pf.scale_rec;
            double val[TILE_N][TILE_K];
            for (int l = 0; l < 32; l++)
                for (int j = 0; j < 4; j++) {
                    const uint8_t *wb = cs + l * 16 + j * 4;
                    uint32_t reg[4];
                    code_regs(elem == &bfp_e1m2, (uint32_t)wb[0] | (uint32_t)wb[1] << 8 |
                                                     (uint32_t)wb[2] << 16 | (uint32_t)wb[3] << 24,
                              reg);
                    for (int p = 0; p < 8; p++) {
                        int row, col;
                        slot_pos(l, j, p, &row, &col);
                        unsigned c = pattern_code(elem == &bfp_e1m2, reg[p & 3] >> (16 * (p >> 2)));
                        val[row][col] = bfp_elem_code_value(elem, c);
                    }
                }
            for (int r = 0; pf.corr_rec && r < TILE_N; r++)
                for (int b = 0; b < per_row; b++) {
                    uint8_t cb = corr[tile * (size_t)pf.corr_rec + corr_off(&pf, r, b)];
                    double lo = 0.5 * (cb & 3);
                    double *v = &val[r][b * pf.block + (int)corr_index(pf.block, cb)];
                    if (lo != 0.0) /* the byte's sign, which is the code's (4 or 6, never 0) */
                        *v += cb & 4 ? -lo : lo;
                }
            for (int r = 0; r < TILE_N; r++) {
                size_t row = nt * TILE_N + (size_t)r;
                if (row >= n)
                    break;
                for (int col = 0; col < TILE_K; col++) {
                    size_t kk = kc * TILE_K + (size_t)col;
                    if (kk >= k)
                        break;
                    int b = col / pf.block;
                    uint32_t s = 0;
                    memcpy(&s, srec + scale_off(&pf, r, b), pf.block == 64 ? 4 : 1);
                    double sv = scale_value(&pf, s);
                    if (pf.block == 64) /* E1_8 and E1_16 flags of the column */
                        sv = ldexp(sv, hif4_flags(s, col));
                    float v = (float)(val[r][col] * sv);
                    if (pf.impl->info.has_tensor_scale)
                        v = v / tensor_scale;
                    w[row * k + kk] = v;
                }
            }
        }
    return BFP_OK;
}
