/* gemm_fused.cuh - y = x . W^T with W prepacked (src/core/matmul_pack.c),
 * decoded to bf16 in registers and multiplied with mma.sync m16n8k16
 * (bf16 in, fp32 accumulate). W is the A operand (16 rows of W per warp), x
 * the B operand (8 rows of x per n8 tile, NT tiles). A CTA of 4 warps takes
 * 4 row tiles of W and shares x's columns of its K range in shared memory
 * (staged once when they fit, else in chunks); each warp streams its tiles
 * of W four at a time with the next four already in flight;
 * the grid's y dimension splits K, and split partial sums meet in an fp32
 * workspace, the last CTA of a tile writing bf16 and zeroing it again. */
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

#include "bfp_cuda_quant_bf16.cuh" /* bf2_mul, prmt_sx, min_u16x2: exact host branches */

namespace bfpgemm {

enum { FMT_MX = 0, FMT_MXPLUS = 1, FMT_NV = 2, FMT_NVPLUS = 3, FMT_HIF4 = 4 };

constexpr int WARPS = 4;
constexpr int SMEM_X_BUDGET = 64 << 10; /* bytes of staged x per CTA */

struct Params {
    const uint4 *codes;          /* [tiles_n][tiles_k][32] */
    const uint8_t *scales;       /* [tiles_n][tiles_k][32 or 64] */
    const uint8_t *corr;         /* [tiles_n][tiles_k][32 or 64] or NULL, laid out
                                    like the scales */
    const __nv_bfloat16 *x;      /* [m][k] */
    const __nv_bfloat16 *bias;   /* [n] or NULL */
    __nv_bfloat16 *y;            /* [m][n] */
    float *ws;                   /* [m][n] fp32 partial sums (split K) */
    unsigned *counters;          /* one per (CTA column, m chunk) */
    float ts;                    /* NVFP4: s_enc, sums are divided by it */
    float post;                  /* 2^fold: undoes the operands' 2^-fold */
    int mx_fold;                 /* MX: fold exponent of this weight (>= 0) */
    int use_ts;
    int n, k, m;
    int tiles_n, tiles_k;
    int tiles_per_split;         /* multiple of 4 */
    int chunk_tiles;             /* tiles of x staged at once, multiple of 4 */
    int xs_ld;                   /* row pitch of staged x: chunk_tiles * 64 + 8
                                    (bf16), so B-fragment loads hit 32 banks */
    int splits;
    int x_vec;                   /* x 16-byte aligned and k % 8 == 0 */
    /* the skinny kernel (gemm_skinny.cu): units of R row tiles x one k tile,
     * band-major; each warp takes upw consecutive units */
    int units, upw;
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* mul.rn.bf16x2 (subnormals kept); emulated exactly on the host */
__device__ __forceinline__ uint32_t bmul2(uint32_t a, uint32_t b) { return bfpcuda::bf2_mul(a, b); }

/* Two 4-bit codes (nibbles p and p + 4 of w) as bf16x2 bit patterns whose
 * value times 2^126 is the code's value: the code's 3 magnitude bits land in
 * the exponent's low bits and the mantissa's top (E2M1: 2 + 1, E1M2: 1 + 2),
 * so E2M1 0.5 and E1M2 0.25..0.75 are bf16 subnormals; the scale operand
 * carries the 2^126 (one exact multiply; bf16 keeps subnormals). */
template <bool E1M2>
__device__ __forceinline__ uint32_t code_pair(uint32_t w, int p, uint32_t extra)
{
    uint32_t v = w >> (4 * p);
    uint32_t mag = E1M2 ? (v << 5) & 0x00E000E0u : (v << 6) & 0x01C001C0u;
    return mag | ((v << 12) & 0x80008000u) | extra;
}

__device__ __forceinline__ uint32_t bf16x2_splat(uint32_t h) { return h * 0x10001u; }

/* The decoded code patterns are the values times 2^-126 (code_pair). Each
 * scale operand carries 2^126 times the scale, times 2^-fold so that it fits
 * bf16: fold = 9 for UE4M3 (max 448), 16 for HiF4 (max 1.5 * 2^17 with its
 * flags), and for E8M0 the weight's largest code - 128 (0 for ordinary
 * weights). The epilogue multiplies the sums by 2^fold. One multiply per
 * operand register instead of two. */
constexpr int NV_FOLD = 9, HIF4_FOLD = 16;

/* E8M0 code s -> bf16 bits of 2^(s - 127 + 126 - fold); 0xFF -> NaN; blocks
 * more than 2^253 below the weight's largest flush to zero */
__device__ __forceinline__ uint32_t e8m0_operand(uint32_t s, int fold)
{
    int e = (int)s + 126 - fold;
    return s == 0xFFu ? 0x7FC0u : e < 1 ? 0u : (uint32_t)e << 7;
}

/* UE4M3 code -> bf16 bits (exact); 0x7F -> NaN */
__device__ __forceinline__ uint32_t ue4m3_bf16(uint32_t b)
{
    if (b == 0x7Fu)
        return 0x7FC0u;
    if (b >> 3)
        return (b << 4) + (120u << 7);
    float f = (float)(b & 7u) * 0.001953125f; /* m * 2^-9, exact */
    return __float_as_uint(f) >> 16;
}

/* UE4M3 code -> bf16 bits of its value * 2^(126 - NV_FOLD) (exact, < 2^127) */
__device__ __forceinline__ uint32_t ue4m3_operand(uint32_t b)
{
    return b == 0x7Fu ? 0x7FC0u : (ue4m3_bf16(b) ? ue4m3_bf16(b) + ((126u - NV_FOLD) << 7) : 0u);
}

/* HiF4 word's UE6M2 times 2^f (f = its two flags) -> bf16 bits of the value
 * * 2^(126 - HIF4_FOLD); exponent at most 15 + 2 + 110 + 127 = 254 */
__device__ __forceinline__ uint32_t ue6m2_operand(uint32_t b, uint32_t f)
{
    return b == 0xFFu ? 0x7FC0u : (b << 5) + ((79u + 126u - HIF4_FOLD) << 7) + (f << 7);
}

/* A correction byte (index, two low mantissa bits of a block max) as seen by
 * lane t: *code says which of the block's candidate registers of this lane
 * holds the block max (7: none), *bits what to OR into its bf16 pattern. */
template <int F>
__device__ __forceinline__ void corr_target(uint32_t byte, int t, uint32_t *code,
                                            uint32_t *bits)
{
    uint32_t idx = byte & (F == FMT_MXPLUS ? 31u : 15u), lo = (byte >> 5) & 3u;
    bool own = lo && ((idx >> 1) & 3u) == (uint32_t)t;
    uint32_t c = F == FMT_MXPLUS ? (idx >> 4) * 2 + ((idx >> 3) & 1u) : (idx >> 3) & 1u;
    *code = own ? c : 7u;
    *bits = lo << (4 + 16 * (idx & 1u));
}

/* One prepacked tile (this lane's codes wc, scale record sc, correction
 * record cr) as the A operands of its four k16 steps: a[j] feeds step j. */
template <int F>
__device__ __forceinline__ void decode_tile(const uint4 &wc, const uint2 &sc, const uint2 &cr,
                                            int t, int mx_fold, uint32_t (&a)[4][4])
{
    constexpr bool HIF = F == FMT_HIF4;
    constexpr bool NVF = F == FMT_NV || F == FMT_NVPLUS;
    /* scale operands (bf16x2) and block-max targets: [row half][block] */
    uint32_t s2[2][4], cc[2][4], cb[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int b = 0; b < 4; b++) {
            uint32_t word = h ? sc.y : sc.x;
            if (NVF)
                s2[h][b] = bf16x2_splat(ue4m3_operand((word >> (8 * b)) & 0xFFu));
            else if (!HIF && b < 2)
                s2[h][b] =
                    bf16x2_splat(e8m0_operand((sc.x >> (8 * (2 * h + b))) & 0xFFu, mx_fold));
            if (F == FMT_MXPLUS && b < 2)
                corr_target<F>((cr.x >> (8 * (2 * h + b))) & 0xFFu, t, &cc[h][b], &cb[h][b]);
            if (F == FMT_NVPLUS)
                corr_target<F>(((h ? cr.y : cr.x) >> (8 * b)) & 0xFFu, t, &cc[h][b], &cb[h][b]);
        }
    const uint32_t words[4] = {wc.x, wc.y, wc.z, wc.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int pp = 0; pp < 4; pp++) {
            const int h = pp & 1, kh = pp >> 1;
            uint32_t extra = 0;
            if (F == FMT_MXPLUS)
                extra = cc[h][j >> 1] == (uint32_t)((j & 1) * 2 + kh) ? cb[h][j >> 1] : 0u;
            if (F == FMT_NVPLUS)
                extra = cc[h][j] == (uint32_t)kh ? cb[h][j] : 0u;
            uint32_t c = code_pair<HIF>(words[j], pp, extra);
            uint32_t s;
            if (HIF) {
                uint32_t wd = h ? sc.y : sc.x;
                uint32_t f = ((wd >> (8 + 2 * j + kh)) & 1u) +
                             ((wd >> (16 + 4 * j + 2 * kh + (t >> 1))) & 1u);
                s = bf16x2_splat(ue6m2_operand(wd & 0xFFu, f));
            } else {
                s = s2[h][NVF ? j : j >> 1];
            }
            a[j][pp] = bmul2(c, s);
        }
}

} // namespace bfpgemm
