/* bfp_cuda_qblock_nv.cuh - NVFP4 / NVFP4+ quantizer for bf16 input with
 * whole blocks per thread (RNE, 1-D blocks, rows of whole 16-element
 * blocks, vector-aligned input and codes).
 * launch_quant takes it when nv_block_ok says so. tools/dev/quant_emul_nv.cc
 * runs nv_block_bf16 on the host against the reference.
 *
 * A thread owns two blocks (32 elements: four 16-byte loads, one 16-byte
 * store of codes). Per block, the scalar part is the reference's own
 * arithmetic: tmax = fp32(amax|x| * s_enc) (rounding is monotone, so this is
 * the max of the t_i), fp32(tmax / 6), UE4M3 RNE satfinite by the hardware
 * conversion, sb decoded exactly.
 *
 * Elements, exactly: the reference rounds t_i = fp32(x_i * s_enc) by
 * comparing it with the midpoints T_k = m_k * sb (m = .25 .75 1.25 1.75 2.5
 * 3.5 5; exact in fp32), strictly for even k (ties to the even index). As
 * x -> fp32(x * s_enc) is monotone, "t_i passes T_k" is "|x_i| >= X_k" for
 * one bf16 threshold X_k per block. X_k is found from an upper bound ut of
 * the real crossing point (directed roundings: ut is above it by under 2^-19
 * relative, far less than a bf16 step), so X_k is trunc_bf16(ut) or the next
 * bf16, and one fp32 product decides which, exactly as the reference would
 * round that value (nv_xthr). X_4, X_5, X_6 are 2 X_2, 2 X_3, 4 X_2 (T_4 =
 * 2 T_2 etc., and x -> 2x maps the bf16 values from 2^-125 up onto those
 * from 2^-124 up). An element then costs a 3-step binary search over the
 * thresholds with packed bf16x2 compares (two elements per instruction; for
 * non-negative bf16 the float order is the integer order) and mask selects
 * (LOP3). A block whose X_0 is below 2^-125 or X_3 above 2^125 (extreme
 * s_enc), or whose scale is zero, takes every X_k exactly and integer
 * compares, so no subnormal ever reaches the float compare. */
#ifndef BFP_CUDA_QBLOCK_NV_CUH
#define BFP_CUDA_QBLOCK_NV_CUH

#include "bfp_cuda_qblock_ctas.cuh"
#include "bfp_cuda_quant_nv.cuh"
#include "bfp_cuda_quant_rows.cuh"

namespace bfpcuda {

/* ---- scalar helpers with directed rounding; host branches exact ---------- */

__device__ __forceinline__ float nv_mul_ru(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_ru(a, b);
#else
    double p = (double)a * (double)b; /* exact: 24 x 24 bits */
    float f = (float)p;
    return (double)f < p ? std::nextafter(f, HUGE_VALF) : f;
#endif
}

/* 1 / s rounded up (s > 0 finite) */
__device__ __forceinline__ float nv_rcp_ru(float s)
{
#ifdef __CUDA_ARCH__
    return __frcp_ru(s);
#else
    /* 1 / s is never within 2^-53 of a float unless it is one (s * f would
     * be a 48-bit product next to a power of two), so the double quotient
     * rounds to float on the same side */
    double r = 1.0 / (double)s;
    float f = (float)r;
    return (double)f < r ? std::nextafter(f, HUGE_VALF) : f;
#endif
}

/* UE4M3 code of q >= 0: RNE, saturating to 448 (cvt.rn.satfinite, sm_89) */
__device__ __forceinline__ uint32_t nv_e4m3(float q)
{
#ifdef __CUDA_ARCH__
    uint16_t h;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(q));
    return h; /* the high byte is the code of 0.0f: 0 */
#else
    return (uint32_t)enc_mag<BFP_ELEM_E4M3, false, RM_RNE, true>(q, 0u, false);
#endif
}

/* fp32(a / 6) for a >= 2^-123 (below, a result under 2^-125 may be one ulp
 * off, far below any E4M3 rounding point): q0 = a * RN(1/6), its exact
 * remainder by FMA, one correction. A run over every float found no other
 * difference from the division; quant_emul_nv.cc checks three whole binades
 * and 2^22 random floats. */
__device__ __forceinline__ float nv_div6(float a)
{
    const float C = u2f(0x3E2AAAABu); /* RN(1/6) */
    float q0 = __fmul_rn(a, C);
    return __fmaf_rn(__fmaf_rn(-6.0f, q0, a), C, q0);
}

/* 0xFFFF in each 16-bit lane where a >= b as bf16 (set.ge.u32.bf16x2,
 * sm_90). Used only on non-negative, non-NaN operands that are not
 * subnormal-against-subnormal (see nv_block_bf16). */
__device__ __forceinline__ uint32_t nv_ge_bf16x2(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("set.ge.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    uint32_t d = 0;
    for (int l = 0; l < 2; l++)
        if (bf16_host(a >> 16 * l & 0xFFFFu) >= bf16_host(b >> 16 * l & 0xFFFFu))
            d |= 0xFFFFu << 16 * l;
    return d;
#endif
}

/* the same as integers, lanes <= 0x7FFF: a lane of (a | 0x8000) - b stays
 * positive (no borrow between lanes) and has bit 15 set iff a >= b; PRMT
 * spreads that bit over the lane */
__device__ __forceinline__ uint32_t nv_ge_u15x2(uint32_t a, uint32_t b)
{
    return prmt_sx((a | 0x80008000u) - b, 0u, 0xBB99u);
}

/* ---- thresholds ---------------------------------------------------------- */

/* fp32 bits of the E2M1 midpoints m_k */
__host__ __device__ constexpr uint32_t nv_mid_bits(int k)
{
    return k == 0 ? 0x3E800000u   /* 0.25 */
           : k == 1 ? 0x3F400000u /* 0.75 */
           : k == 2 ? 0x3FA00000u /* 1.25 */
           : k == 3 ? 0x3FE00000u /* 1.75 */
           : k == 4 ? 0x40200000u /* 2.5 */
           : k == 5 ? 0x40600000u /* 3.5 */
                    : 0x40A00000u; /* 5 */
}

/* X_k: the least bf16 magnitude x with fp32(x * s) > T_k (even k) or >= T_k
 * (odd k), T_k = m_k * sb, in both lanes. q >= sb / s (rounded up).
 * Let u be the real crossing point (fp32(x s) > T iff x s > T + ulp(T) / 2,
 * T having 7 significant bits; >= iff x s >= T - ulp / 2). ut >= m_k (1 +
 * 2^-22.8) sb / s > u, and ut - u is below 2^-19 u plus a few 2^-149, less
 * than the bf16 step at u; so c = trunc_bf16(ut) has c + 1 step > u and its
 * predecessor below u: X_k is c or c + 1 step, as c passes or not. */
template <int K, bool TS>
__device__ __forceinline__ uint32_t nv_xthr(float sb, float q, float s)
{
    constexpr uint32_t MB = nv_mid_bits(K);
    float T = __fmul_rn(u2f(MB), sb);
    uint32_t c = f2u(nv_mul_ru(u2f(MB + 2u), q)) & 0xFFFF0000u;
    float t = TS ? __fmul_rn(u2f(c), s) : u2f(c); /* the reference's t for x = c */
    bool pass = (K & 1) ? t >= T : t > T;
    uint32_t X = __byte_perm(c, 0u, 0x3232u); /* c's bf16 in both lanes */
    return pass ? X : X + LANES2;
}

/* ---- one block ----------------------------------------------------------- */

/* Codes of 8 elements (one uint4 of bf16) given the 7 thresholds X (both
 * lanes). HW: the bf16x2 compare (else integer); ZERO: a zero block scale,
 * every element a signed zero (no compares). Word k's nibbles go to bits 0 / 20
 * (k even) or 8 / 28 (k odd) so that two PRMTs put all 8 in order. */
template <bool HW, bool ZERO = false>
__device__ __forceinline__ uint32_t nv_enc8(const uint4 &w, const uint32_t X[7])
{
    const uint32_t in[4] = {w.x, w.y, w.z, w.w};
    uint32_t p[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        /* the signs of words 2h, 2h + 1 over whole bytes, at bits 3, 11, 23, 31 */
        uint32_t acc = prmt_sx(in[2 * h], in[2 * h + 1], 0xFBD9u) & 0x80800808u;
#pragma unroll
        for (int k = 2 * h; k < 2 * h + 2 && !ZERO; k++) {
            uint32_t L = in[k] & 0x7FFF7FFFu;
            /* binary search: b2 = idx >= 4, b1, b0; idx = #thresholds passed */
            uint32_t b2 = HW ? nv_ge_bf16x2(L, X[3]) : nv_ge_u15x2(L, X[3]);
            uint32_t t1 = (b2 & X[5]) | (~b2 & X[1]);
            uint32_t b1 = HW ? nv_ge_bf16x2(L, t1) : nv_ge_u15x2(L, t1);
            uint32_t ta = (b1 & X[2]) | (~b1 & X[0]), tb = (b1 & X[6]) | (~b1 & X[4]);
            uint32_t t0 = (b2 & tb) | (~b2 & ta);
            uint32_t b0 = HW ? nv_ge_bf16x2(L, t0) : nv_ge_u15x2(L, t0);
            const uint32_t K0 = (k & 1) ? (1u << 8 | 1u << 28) : (1u << 0 | 1u << 20);
            acc = (b0 & K0) | acc; /* one LOP3 each */
            acc = (b1 & K0 << 1) | acc;
            acc = (b2 & K0 << 2) | acc;
        }
        p[h] = acc;
    }
    /* p[0]: e0 @0, e2 @8, e1 @20, e3 @28; p[1] likewise e4..e7 */
    return __byte_perm(p[0], p[1], 0x7610) | __byte_perm(p[0], p[1], 0x5432);
}

/* Lowest index in 0..15 whose |x| has bf16 bits am16 (the block max), from
 * the 8-element maxima a0 (of w0); as first_max32_bf16. */
__device__ __forceinline__ uint32_t nv_first_max16(const uint4 &w0, const uint4 &w1, uint32_t a0,
                                                   uint32_t am16)
{
    bool lo = a0 == am16;
    uint4 v = lo ? w0 : w1;
    const uint32_t K = (0x8000u - am16) * LANES2;
    uint32_t h0 = (v.x & 0x7FFF7FFFu) + K, h1 = (v.y & 0x7FFF7FFFu) + K;
    uint32_t h2 = (v.z & 0x7FFF7FFFu) + K, h3 = (v.w & 0x7FFF7FFFu) + K;
    uint32_t p = prmt_sx(h0, h1, 0xFDB9u), q = prmt_sx(h2, h3, 0xFDB9u);
    uint32_t j = p ? (uint32_t)(__ffs(p) - 1) >> 3 : 4u + ((uint32_t)(__ffs(q) - 1) >> 3);
    return (lo ? 0u : 8u) + j;
}

/* max |x| of 8 bf16 as a 16-bit magnitude */
__device__ __forceinline__ uint32_t nv_amax8(const uint4 &w)
{
    return amax8_bf16(w) >> 16;
}

/* One block (16 bf16 in w0, w1) with tensor scale s (rinv = 1 / s rounded
 * up): codes c[0..1] (8 elements each), scale code, meta. Returns whether
 * the block is non-finite. */
template <int FMT, bool TS>
__device__ __forceinline__ bool nv_block_bf16(const uint4 &w0, const uint4 &w1, float s,
                                              float rinv, uint32_t c[2], uint32_t &sc,
                                              uint32_t &meta)
{
    constexpr bool PLUS = fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS;
    uint32_t a0 = nv_amax8(w0), a1 = nv_amax8(w1);
    uint32_t am16 = max(a0, a1);
    float tm = TS ? __fmul_rn(u2f(am16 << 16), s) : u2f(am16 << 16); /* max |t_i| */
    c[0] = c[1] = 0u;
    meta = 0u;
    if (f2u(tm) >= 0x7F800000u) { /* NaN / Inf, or t overflowed */
        sc = 0x7Fu;
        return true;
    }
    sc = nv_e4m3(nv_div6(tm));
    float sb = __fmul_rn(u2f(sc << 20), u2f(247u << 23)); /* E4M3 bits as fp32, times 2^120 */
    float q = TS ? nv_mul_ru(sb, rinv) : sb;
    uint32_t X[7];
    X[0] = nv_xthr<0, TS>(sb, q, s);
    X[1] = nv_xthr<1, TS>(sb, q, s);
    X[2] = nv_xthr<2, TS>(sb, q, s);
    X[3] = nv_xthr<3, TS>(sb, q, s);
    /* The fast path: 2^-125 <= X_0 (so no subnormal reaches the compare, and
     * x -> 2x maps the bf16 values at and above X_2 onto those at and above
     * X_4) and X_3 <= 2^125 (no doubling overflows). A zero scale (X_0 = 1
     * step) and tiny or huge thresholds take the exact path. */
    if (X[0] >= 0x0100u * LANES2 && X[3] <= 0x7E00u * LANES2) {
        X[4] = X[2] + 0x0080u * LANES2; /* 2 X_2 */
        X[5] = X[3] + 0x0080u * LANES2; /* 2 X_3 */
        X[6] = X[2] + 0x0100u * LANES2; /* 4 X_2 */
        c[0] = nv_enc8<true>(w0, X);
        c[1] = nv_enc8<true>(w1, X);
    } else if (sc == 0u) { /* zero or tiny block: signed zeros */
        c[0] = nv_enc8<false, true>(w0, X);
        c[1] = nv_enc8<false, true>(w1, X);
    } else {
        X[4] = nv_xthr<4, TS>(sb, q, s);
        X[5] = nv_xthr<5, TS>(sb, q, s);
        X[6] = nv_xthr<6, TS>(sb, q, s);
        c[0] = nv_enc8<false>(w0, X);
        c[1] = nv_enc8<false>(w1, X);
    }
    if (PLUS && sc > 0x02u) {
        /* the block max on the extended grid (4 + i/2) sb, from tm itself:
         * binary search on exact midpoints (4.25 + i/2) sb, >= for odd i */
        uint32_t bm = nv_first_max16(w0, w1, a0, am16);
        bool e2 = tm >= __fmul_rn(5.75f, sb);
        bool e1 = tm >= __fmul_rn(e2 ? 6.75f : 4.75f, sb);
        float m0 = 4.25f + (e2 ? 2.0f : 0.0f) + (e1 ? 1.0f : 0.0f);
        bool e0 = tm > __fmul_rn(m0, sb);
        uint32_t mag = (e2 ? 4u : 0u) | (e1 ? 2u : 0u) | (e0 ? 1u : 0u);
        uint32_t sh = 4u * (bm & 7u), keep = ~(7u << sh), put = mag << sh;
        /* the element's code already has the sign bit: replace magnitude */
        c[0] = bm < 8u ? (c[0] & keep) | put : c[0];
        c[1] = bm < 8u ? c[1] : (c[1] & keep) | put;
        meta = bm;
    }
    return false;
}

/* NB (1 or 2) blocks from block b of the tensor; SWZ: swizzled scales; TS:
 * with tensor scale (else s = rinv = 1 and the products by them vanish). */
template <int FMT, bool SWZ, bool TS, int NB>
__device__ __forceinline__ void nv_blocks_bf16(const QParams &P, size_t b, float s, float rinv)
{
    constexpr bool PLUS = fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS;
    const uint4 *src = reinterpret_cast<const uint4 *>(P.src) + 2 * b;
    uint4 w[2 * NB];
#pragma unroll
    for (int k = 0; k < 2 * NB; k++)
        w[k] = __ldg(src + k);
    uint32_t c[2 * NB], sc[NB], meta[NB];
    uint32_t bad = 0;
#pragma unroll
    for (int k = 0; k < NB; k++)
        if (nv_block_bf16<FMT, TS>(w[2 * k], w[2 * k + 1], s, rinv, c + 2 * k, sc[k], meta[k]))
            bad++;
    unsigned char *cp = P.codes + 8 * b;
    if (NB == 2 && ((uintptr_t)P.codes & 15u) == 0) {
        *reinterpret_cast<uint4 *>(cp) =
            make_uint4(c[0], c[1], c[NB == 2 ? 2 : 0], c[NB == 2 ? 3 : 1]);
    } else { /* codes are 4-byte aligned (vec_out) */
#pragma unroll
        for (int k = 0; k < 2 * NB; k++)
            reinterpret_cast<uint32_t *>(cp)[k] = c[k];
    }
    if (SWZ) {
        size_t row = b / P.G, col = b - row * P.G;
        size_t o = swizzle_offset(row, col, P.swz_ncol);
        if (NB == 2 && (col & 1) == 0 && col + 1 < P.G) { /* b + 1: same row, at o + 1 */
            if (((uintptr_t)(P.scales + o) & 1u) == 0) {
                *reinterpret_cast<uint16_t *>(P.scales + o) = (uint16_t)(sc[0] | sc[NB - 1] << 8);
            } else {
                P.scales[o] = (unsigned char)sc[0];
                P.scales[o + 1] = (unsigned char)sc[NB - 1];
            }
        } else {
            P.scales[o] = (unsigned char)sc[0];
            if (NB == 2) {
                if (++col == P.G) {
                    col = 0;
                    row++;
                }
                P.scales[swizzle_offset(row, col, P.swz_ncol)] = (unsigned char)sc[NB - 1];
            }
        }
    } else if (NB == 2 && ((uintptr_t)P.scales & 1u) == 0) { /* b is even */
        *reinterpret_cast<uint16_t *>(P.scales + b) = (uint16_t)(sc[0] | sc[NB - 1] << 8);
    } else {
#pragma unroll
        for (int k = 0; k < NB; k++)
            P.scales[b + k] = (unsigned char)sc[k];
    }
    if (PLUS && P.meta) {
        if (NB == 2 && ((uintptr_t)P.meta & 1u) == 0) {
            *reinterpret_cast<uint16_t *>(P.meta + b) = (uint16_t)(meta[0] | meta[NB - 1] << 8);
        } else {
#pragma unroll
            for (int k = 0; k < NB; k++)
                P.meta[b + k] = (unsigned char)meta[k];
        }
    }
    if (bad && P.nonfinite)
        atomicAdd(P.nonfinite, (unsigned long long)bad);
}

/* The tensor scale s_enc and 1 / s_enc rounded up (TS: read s_enc) */
template <bool TS>
__device__ __forceinline__ void nv_tensor_scale(const QParams &P, float &s, float &rinv)
{
    s = TS ? *P.tscale : 1.0f;
    rinv = TS ? nv_rcp_ru(s) : 1.0f;
}

/* Thread i takes blocks 2 i and 2 i + 1 (npairs pairs); an odd last block
 * is nv_tail_kernel's. */
template <int FMT, bool SWZ, bool TS>
__global__ void __launch_bounds__(256, qblock_min_ctas<FMT>()) nv_block_kernel(const QParams P, size_t npairs)
{
    float s, rinv;
    nv_tensor_scale<TS>(P, s, rinv);
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < npairs; p += stride)
        nv_blocks_bf16<FMT, SWZ, TS, 2>(P, 2 * p, s, rinv);
}

template <int FMT, bool SWZ, bool TS>
__global__ void nv_tail_kernel(const QParams P, size_t b)
{
    float s, rinv;
    nv_tensor_scale<TS>(P, s, rinv);
    nv_blocks_bf16<FMT, SWZ, TS, 1>(P, b, s, rinv);
}

/* Whether nv_block_kernel applies: bf16, RNE, vector-aligned, rows of whole
 * blocks (block b of the tensor is elements [16 b, 16 b + 16) of the flat
 * input, codes at byte 8 b). (2-D blocks never reach launch_quant.) */
template <int FMT>
bool nv_block_ok(const QParams &P)
{
    constexpr FmtT F = fmt_of(FMT);
    if constexpr (F.fam != BFP_FAMILY_NVFP4 && F.fam != BFP_FAMILY_NVFP4_PLUS)
        return false;
    return P.dt == BFP_DTYPE_BF16 && P.mode == RM_RNE && P.vec_in && P.vec_out &&
           P.L.cols % 16 == 0 && (P.no_ts || P.tscale);
}

/* nblocks / 2 pairs on a grid-stride grid, then an odd last block */
template <int FMT, bool SWZ, bool TS>
bfp_status launch_nv_block_t(const QParams &P, size_t nblocks, cudaStream_t s)
{
    size_t npairs = nblocks / 2;
    if (npairs) {
        BFP_LAUNCH((nv_block_kernel<FMT, SWZ, TS>), stride_grid(npairs), 256, s, P, npairs);
        CUDA_OK(cudaGetLastError());
    }
    if (nblocks & 1) {
        BFP_LAUNCH((nv_tail_kernel<FMT, SWZ, TS>), 1, 1, s, P, nblocks - 1);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

template <int FMT>
bfp_status launch_nv_block(const QParams &P, cudaStream_t s)
{
    constexpr FmtT F = fmt_of(FMT);
    if constexpr (F.fam != BFP_FAMILY_NVFP4 && F.fam != BFP_FAMILY_NVFP4_PLUS) {
        return BFP_ERR_UNSUPPORTED; /* (nv_block_ok is false: no kernel built) */
    } else {
        size_t nblocks = P.L.rows * (P.L.cols / 16);
        if (P.swz)
            return P.no_ts ? launch_nv_block_t<FMT, true, false>(P, nblocks, s)
                           : launch_nv_block_t<FMT, true, true>(P, nblocks, s);
        return P.no_ts ? launch_nv_block_t<FMT, false, false>(P, nblocks, s)
                       : launch_nv_block_t<FMT, false, true>(P, nblocks, s);
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_NV_CUH */
