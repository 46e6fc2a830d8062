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
#include <string.h>

#include "format_defs.h"
#include "bfp_cuda_ptx.cuh" /* bf2_mul, prmt_sx, min_u16x2: exact host branches */

namespace bfpgemm {

enum { FMT_MX = BFP_MM_MX, FMT_MXPLUS = BFP_MM_MXPLUS, FMT_NV = BFP_MM_NV, FMT_NVPLUS = BFP_MM_NVPLUS,
       FMT_HIF4 = BFP_MM_HIF4 }; /* matmul kinds of format_defs.h */

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
    /* the wgmma kernel (gemm_wgmma.cu): 1 keeps one k tile's wgmma in flight
     * across k tiles, 0 waits for each before the next is issued */
    int wg_pipe;
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

/* ---- Decode (the packed layout is src/core/matmul_pack.c's; docs/gemm.md).
 * An operand register holds two codes as bf16 bit patterns worth the code's
 * value times 2^-126: the 3 magnitude bits in the exponent's low bits and the
 * mantissa's top (E2M1 at bits 8:6, E1M2 at 7:5; E2M1 0.5 and E1M2 0.25..0.75
 * are bf16 subnormals) and the sign at bit 15, in both 16-bit halves. One
 * mul.bf16x2 by a scale operand that carries 2^126 then gives exact values.
 * The prepack stores each code word so that a register is a rotation of the
 * word and one AND, magnitude and sign in place; one register of the four
 * (E1M2: two) takes a second rotation and AND. */

__device__ __forceinline__ uint32_t rotr(uint32_t x, int d)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_r(x, x, d);
#else
    return d ? (x >> d) | (x << (32 - d)) : x;
#endif
}

__device__ __forceinline__ uint32_t umulhi(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t)((uint64_t)a * b >> 32);
#endif
}

/* Register pp of a word is OR over groups i = 0, 1 of rotr(word, code_rot)
 * & code_mask (a mask of 0: no second group); matmul_pack.c has the same
 * table (code_grps). No four rotations of one mask cover the 32 bits, hence
 * the registers of two groups. */
__host__ __device__ constexpr int code_rot(bool e1m2, int pp, int i)
{
    return e1m2 ? (pp == 0 ? i : pp == 1 ? 4 - 2 * i : pp == 2 ? 13 : 8)
                : (pp == 0 ? 8 * i : pp == 1 ? 2 : pp == 2 ? 12 : 6);
}
__host__ __device__ constexpr uint32_t code_mask(bool e1m2, int pp, int i)
{
    return e1m2 ? (pp == 0 ? (i ? 0x80808080u : 0x00600060u)
                   : pp == 1 ? (i ? 0x80008000u : 0x00E000E0u)
                             : (i ? 0u : 0x80E080E0u))
                : (pp == 0 ? (i ? 0x01000100u : 0x80C080C0u) : (i ? 0u : 0x81C081C0u));
}

/* Operand register pp of code word w; extra (MX+ / NVFP4+ block-max bits
 * under E2M1's mantissa bit) ORed in by the same instruction */
template <bool E1M2>
__device__ __forceinline__ uint32_t code_reg(uint32_t w, int pp, uint32_t extra)
{
    uint32_t r = (rotr(w, code_rot(E1M2, pp, 0)) & code_mask(E1M2, pp, 0)) | extra;
    if (code_mask(E1M2, pp, 1))
        r |= rotr(w, code_rot(E1M2, pp, 1)) & code_mask(E1M2, pp, 1);
    return r;
}

/* The decoded code patterns are the values times 2^-126 (code_reg). Each
 * scale operand carries 2^126 times the scale, times 2^-fold so that it fits
 * bf16: fold = 9 for UE4M3 (max 448), 16 for HiF4 (max 1.5 * 2^17 with its
 * flags), and for E8M0 the weight's largest code - 128 (0 for ordinary
 * weights). The epilogue multiplies the sums by 2^fold. One multiply per
 * operand register instead of two. */
constexpr int NV_FOLD = 9, HIF4_FOLD = 16;

/* byte i of w in both 16-bit halves (PRMT; selectors 4 pick zero bytes) */
__device__ __forceinline__ uint32_t byte_x2(uint32_t w, int i)
{
    return bfpcuda::prmt_sx(w, 0u, 0x4040u + 0x0101u * (uint32_t)i);
}

/* E8M0 codes s (bytes 2h and 2h + 1 of w, one per 16-bit half) -> bf16 of
 * 2^(s - 127 + 126 - fold) in each half: the exponent field s + 126 - fold
 * is in [0, 254] for every finite code (fold <= 126), 0 flushing a block
 * more than 2^253 below the weight's largest; NaN (0xFF) lands above 254
 * and the min makes it Inf, which times the NaN block's zero codes is NaN.
 * Two scales per PRMT, IMAD and min; a PRMT then splats each. */
__device__ __forceinline__ uint32_t e8m0_pair(uint32_t w, int h, uint32_t bias)
{
    const uint32_t v = bfpcuda::prmt_sx(w, 0u, 0x4040u + 0x0100u * (uint32_t)(2 * h + 1) +
                                                   (uint32_t)(2 * h));
    return bfpcuda::min_u16x2(v * 128u + bias, 0x7F807F80u);
}

/* Packed UE4M3 scale q (matmul_pack.c re-encodes it: q = (E + 10) << 3 | m
 * for a value 2^E (1 + m/8), subnormals normalized; 0 for zero, 0xA8 for
 * NaN) -> bf16x2 of value * 2^(126 - NV_FOLD): exponent field E + 244 =
 * (q >> 3) + 234, so the bf16 bits are q * 16 + 234 * 128. NaN gives Inf
 * (0x7F80; times zero codes: NaN); zero gives 2^108, and the prepack zeroes
 * the magnitudes of zero-scale blocks. */
constexpr uint32_t NV_BIAS = (234u << 7) * 0x10001u;
__device__ __forceinline__ uint32_t ue4m3_operand(uint32_t w, int i)
{
    return byte_x2(w, i) * 16u + NV_BIAS;
}

/* x << s, 0 for s >= 32 (PTX shl clamps the amount) */
__device__ __forceinline__ uint32_t shl_clamp(uint32_t x, uint32_t s)
{
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("shl.b32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(s));
    return r;
#else
    return s >= 32 ? 0u : x << s;
#endif
}

/* MX+ / NVFP4+ block max: a packed correction byte (matmul_pack.c) is the
 * max's two low mantissa bits (1:0; 0: nothing to do), its sign (bit 2),
 * its slot among this lane group's registers of the block, p = candidate
 * register + CB * half of the register (CB = 4 candidates for MX+, 2 for
 * NVFP4+), and the lane t that holds it. This lane gets lo << 4 in byte p
 * of the 64-bit (*z2 : *z), nothing when another lane holds it (the shift
 * is then >= 64), and candidate k's bits to OR into its bf16 pattern are
 * one PRMT of them: bytes k and CB + k to bytes 0 and 2 (corr_bits). */
template <int F>
__device__ __forceinline__ void corr_slots(uint32_t byte, int t, uint32_t *z, uint32_t *z2)
{
    constexpr uint32_t TPOS = F == FMT_MXPLUS ? 6 : 5; /* where the owner lane is */
    /* 4 + 8p from bits 3..TPOS-1 and a 4 in place of the sign; another
     * owner adds 32, 64 or 96 (MX+: 64..192). One LOP3 as before. */
    const uint32_t s = (byte & 0xF8u) ^ ((uint32_t)t << TPOS | 4u);
    *z = shl_clamp(byte & 3u, s);
    if (F == FMT_MXPLUS)
        *z2 = shl_clamp(byte & 3u, s - 32u); /* a wrapped amount is >= 32 too */
}

template <int F>
__device__ __forceinline__ uint32_t corr_bits(uint32_t z, uint32_t z2, int k)
{
    constexpr uint32_t CB = F == FMT_MXPLUS ? 4 : 2;
    /* selector nibbles 8: copy of a byte's top bit, always 0 here */
    return bfpcuda::prmt_sx(z, F == FMT_MXPLUS ? z2 : z,
                            0x8080u | (uint32_t)k | ((CB + (uint32_t)k) << 8));
}

/* The block max's low bits after the mma instead (the skinny kernel at
 * small m): a block decoded as plain MX / NVFP4 has the max's E2M1 high
 * part, and the sums lack sign * lo/2 * scale * x[col]. corr_col is col
 * within the block, from the byte's slot and lane fields (matmul_pack.c
 * corr_index); corr_coef is sign * lo/2 * scale in the sums' units (times
 * 2^-fold, as the operands), from the correction byte cb, the block's packed
 * scale byte sb and half = 2^-(1 + fold). Only for cb & 3 != 0 (NaN and
 * zero-scale blocks have cb = 0). Exact except where the value is below
 * float's normal range, 2^-126 (MX+ blocks at most 2^-125 high: there the
 * operands themselves keep only bf16-subnormal bits, docs/gemm.md). */
template <int F>
__host__ __device__ __forceinline__ uint32_t corr_col(uint32_t cb)
{
    return F == FMT_MXPLUS ? (cb & 0x18u) | (cb >> 5 & 7u) : (cb & 0x08u) | (cb >> 4 & 7u);
}

__host__ __device__ __forceinline__ float float_of_bits(uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    memcpy(&f, &b, 4);
    return f;
#endif
}

template <int F>
__host__ __device__ __forceinline__ float corr_coef(uint32_t cb, uint32_t sb, float half)
{
    /* the scale as a float: E8M0 2^(sb - 127) is the exponent field sb (the
     * subnormal 0x400000 for sb = 0); packed UE4M3 q = (E + 10) << 3 | m
     * (ue4m3_operand) is 2^E (1 + m/8), the field (q >> 3) + 117 over the
     * mantissa's top bits m */
    const uint32_t e8 = sb << 23;
    const uint32_t bits = F == FMT_MXPLUS ? (e8 > 0x400000u ? e8 : 0x400000u)
                                          : sb * (1u << 20) + (117u << 23);
    return float_of_bits(bits | (cb & 4u) << 29) * ((float)(cb & 3u) * half);
}

/* An MX+ / NVFP4+ tile's correction record cr as this lane's slots z, z2
 * (corr_slots per block byte, [row half][block]); other formats: none */
template <int F>
__device__ __forceinline__ void tile_corr_slots(const uint2 &cr, int t, uint32_t (&z)[2][4],
                                                uint32_t (&z2)[2][4])
{
    if (F == FMT_MXPLUS || F == FMT_NVPLUS)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int b = 0; b < (F == FMT_MXPLUS ? 2 : 4); b++) {
                const uint32_t byte = F == FMT_MXPLUS ? cr.x >> (8 * (2 * h + b))
                                                      : (h ? cr.y : cr.x) >> (8 * b);
                corr_slots<F>(byte & 0xFFu, t, &z[h][b], &z2[h][b]);
            }
}

/* Register pp of k16 step j of a tile: two codes as bf16 patterns worth
 * code x 2^-126 (code_reg), with the block max's low bits ORed in (MX+,
 * NVFP4+; z, z2 from tile_corr_slots) */
template <int F>
__device__ __forceinline__ uint32_t tile_code(const uint32_t (&words)[4], const uint32_t (&z)[2][4],
                                              const uint32_t (&z2)[2][4], int j, int pp)
{
    const int h = pp & 1, kh = pp >> 1;
    uint32_t extra = 0;
    if (F == FMT_MXPLUS)
        extra = corr_bits<F>(z[h][j >> 1], z2[h][j >> 1], (j & 1) * 2 + kh);
    if (F == FMT_NVPLUS)
        extra = corr_bits<F>(z[h][j], 0u, kh);
    return code_reg<F == FMT_HIF4>(words[j], pp, extra);
}

/* What decoding a tile needs beyond its codes, computed once a tile: the
 * scale operands by [row half][block] (HiF4: [row half][8-column group])
 * and the MX+ / NVFP4+ correction slots. tile_step then decodes one k16
 * step, so that a mainloop can decode step by step between its wgmma. */
template <int F>
struct TileOps {
    uint32_t words[4];
    uint32_t s2[2][8], z[2][4], z2[2][4];
};

template <int F>
__device__ __forceinline__ void tile_ops(const uint4 &wc, const uint2 &sc, const uint2 &cr, int t,
                                         int mx_fold, TileOps<F> &o)
{
    constexpr bool HIF = F == FMT_HIF4;
    constexpr bool NVF = F == FMT_NV || F == FMT_NVPLUS;
    constexpr bool MXF = F == FMT_MX || F == FMT_MXPLUS;
    if (MXF) {
        const uint32_t bias = (uint32_t)(126 - mx_fold) * 128u * 0x10001u;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t pr = e8m0_pair(sc.x, h, bias);
            o.s2[h][0] = bfpcuda::prmt_sx(pr, 0u, 0x1010u);
            o.s2[h][1] = bfpcuda::prmt_sx(pr, 0u, 0x3232u);
        }
    }
    if (NVF)
#pragma unroll
        for (int i = 0; i < 8; i++)
            o.s2[i >> 2][i & 3] = ue4m3_operand(i < 4 ? sc.x : sc.y, i & 3);
    if (HIF) {
        /* packed word: bits 31:24 UE6M2 (0xFF NaN, flags clear), bits 3c+0,
         * 3c+1, 3c+2 (c = 0..7, the 8-column group) the E1_8 flag of group c
         * and the E1_16 flags of its two 4-column halves. This lane's factor
         * exponent for group c, E1_8 + E1_16 of its half t / 2, is the
         * 2-bit field at 3c of f, added to the exponent of the row's operand. */
        const uint32_t tb = (uint32_t)t >> 1;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t w = h ? sc.y : sc.x;
            const uint32_t v = byte_x2(w, 3);
            /* UE6M2 b -> bits (b << 5) + (79 + 126 - fold) << 7: at most 0x7E40, so
             * the flags' + 2 in the exponent stays finite; NaN words have no flags */
            const uint32_t base =
                v == 0x00FF00FFu ? 0x7FC07FC0u : v * 32u + ((79u + 126u - HIF4_FOLD) << 7) * 0x10001u;
            const uint32_t f = (w & 0x249249u) + umulhi(w & (0x492492u << tb), 0x80000000u >> tb);
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const uint32_t fc = c < 3 ? f : c < 6 ? f >> 9 : f >> 18;
                const int p = 3 * (c % 3);
                o.s2[h][c] = (fc & (3u << p)) * ((0x10001u << 7) >> p) + base;
            }
        }
    }
    tile_corr_slots<F>(cr, t, o.z, o.z2);
    o.words[0] = wc.x, o.words[1] = wc.y, o.words[2] = wc.z, o.words[3] = wc.w;
}

/* k16 step j of the tile: its four A operand registers */
template <int F>
__device__ __forceinline__ void tile_step(const TileOps<F> &o, int j, uint32_t (&a)[4])
{
    constexpr bool HIF = F == FMT_HIF4;
    constexpr bool NVF = F == FMT_NV || F == FMT_NVPLUS;
#pragma unroll
    for (int pp = 0; pp < 4; pp++) {
        const int h = pp & 1, kh = pp >> 1;
        const uint32_t c = tile_code<F>(o.words, o.z, o.z2, j, pp);
        a[pp] = bmul2(c, o.s2[h][HIF ? 2 * j + kh : NVF ? j : j >> 1]);
    }
}

/* One prepacked tile (this lane's codes wc, scale record sc, correction
 * record cr) as the A operands of its four k16 steps: a[j] feeds step j. */
template <int F>
__device__ __forceinline__ void decode_tile(const uint4 &wc, const uint2 &sc, const uint2 &cr,
                                            int t, int mx_fold, uint32_t (&a)[4][4])
{
    TileOps<F> o;
    tile_ops<F>(wc, sc, cr, t, mx_fold, o);
#pragma unroll
    for (int j = 0; j < 4; j++)
        tile_step<F>(o, j, a[j]);
}

/* Multiply 4 tiles (the group at column kl of x staged as [row][ld]
 * bf16, the first ngood of them) into acc; the fused and grouped kernels */
template <int F, int NT>
__device__ __forceinline__ void mma_group(float (&acc)[NT][4], const uint4 (&wc)[4],
                                          const uint2 (&sc)[4], const uint2 (&cr)[4],
                                          const __nv_bfloat16 *xs, int ld, int kl, int ngood,
                                          int g, int t, int mx_fold)
{
#pragma unroll
    for (int u = 0; u < 4; u++) {
        if (u >= ngood)
            break;
        uint32_t a[4][4];
        decode_tile<F>(wc[u], sc[u], cr[u], t, mx_fold, a);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < NT; q++) {
                const __nv_bfloat16 *xb = xs + (q * 8 + g) * ld + kl + u * 64 + 16 * j + 2 * t;
                uint32_t b0 = *reinterpret_cast<const uint32_t *>(xb);
                uint32_t b1 = *reinterpret_cast<const uint32_t *>(xb + 8);
                mma_bf16(acc[q], a[j], b0, b1);
            }
    }
}

/* x's B fragments for k tile kt when x is not staged (p.x_vec == 0: not
 * 16-byte aligned, or k % 8 != 0, which TMA needs): lane (g, t) of n8 tile q
 * holds row q * 8 + g, columns 64 kt + 16 j + 2 t + {0, 1} and {8, 9}; zero
 * outside x */
template <int NT>
__device__ __forceinline__ void load_x(const Params &p, int kt, int g, int t,
                                       uint32_t (&xb)[NT][8])
{
    const int c0 = kt * 64 + 2 * t;
#pragma unroll
    for (int q = 0; q < NT; q++) {
        const int mm = q * 8 + g;
        const uint16_t *row = reinterpret_cast<const uint16_t *>(p.x) + (size_t)mm * p.k;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c = c0 + 16 * (i >> 1) + 8 * (i & 1);
            uint32_t v = 0;
            if (mm < p.m) {
                uint32_t lo = c < p.k ? __ldg(row + c) : 0u;
                uint32_t hi = c + 1 < p.k ? __ldg(row + c + 1) : 0u;
                v = lo | hi << 16;
            }
            xb[q][i] = v;
        }
    }
}

/* a sum (already times 2^fold) as y's bf16: NVFP4's tensor scale, then the
 * bias, b here (read by the caller: the bias of the sum's W row; unused
 * without a bias, whose absence leaves -0 as -0) */
__device__ __forceinline__ __nv_bfloat16 finish_b(const Params &p, float v, float b)
{
    if (p.use_ts)
        v = __fdiv_rn(v, p.ts);
    if (p.bias)
        v += b;
    return __float2bfloat16_rn(v);
}

/* the bias of W row n as a float (0 without one) */
__device__ __forceinline__ float bias_at(const Params &p, int n)
{
    return p.bias ? __bfloat162float(p.bias[n]) : 0.0f;
}

/* finish_b with W row n's bias (shared by the kernels' epilogues) */
__device__ __forceinline__ __nv_bfloat16 finish(const Params &p, float v, int n)
{
    return finish_b(p, v, bias_at(p, n));
}

/* The last CTA's pass over its output tile's split-K sums in the workspace:
 * y = finish(sum), the sum zeroed again. at(i, off, n) maps element i <
 * count to its offset in y and the workspace and its W row, false to skip
 * it; this thread takes t0, t0 + nthr, ... RB elements at a time, all their
 * loads (sums and bias) issued before any store: one element at a time,
 * the stores, which may alias the next loads, kept one load in flight per
 * thread. */
template <int RB = 8, class At>
__device__ __forceinline__ void ws_flush(const Params &p, int count, int t0, int nthr, At at)
{
    for (int i0 = t0; i0 < count; i0 += RB * nthr) {
        float v[RB], b[RB];
#pragma unroll
        for (int j = 0; j < RB; j++) {
            const int i = i0 + j * nthr;
            size_t off;
            int n;
            const bool in = i < count && at(i, off, n);
            v[j] = in ? __ldcg(p.ws + off) : 0.0f;
            b[j] = in ? bias_at(p, n) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < RB; j++) { /* the map again: fewer registers held */
            const int i = i0 + j * nthr;
            size_t off;
            int n;
            if (i < count && at(i, off, n)) {
                __stcg(p.ws + off, 0.0f);
                p.y[off] = finish_b(p, v[j], b[j]);
            }
        }
    }
}

} // namespace bfpgemm
