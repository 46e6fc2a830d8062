/* bfp_cuda_quant_nv.cuh - the NVFP4 and NVFP4+ quantizers at 8 elements per
 * thread (any dtype and rounding; 1-D blocks and 16x16 tiles). */
#ifndef BFP_CUDA_QUANT_NV_CUH
#define BFP_CUDA_QUANT_NV_CUH

#include "bfp_cuda_params.cuh"
#include "bfp_cuda_quant_bf16.cuh"

namespace bfpcuda {

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

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_NV_CUH */
