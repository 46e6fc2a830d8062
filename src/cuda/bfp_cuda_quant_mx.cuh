/* bfp_cuda_quant_mx.cuh - the MX family's quantizer at 8 elements per
 * thread (any dtype and rounding): shared exponent and element codes. */
#ifndef BFP_CUDA_QUANT_MX_CUH
#define BFP_CUDA_QUANT_MX_CUH

#include "bfp_cuda_params.cuh"
#include "bfp_cuda_quant_bf16.cuh"

namespace bfpcuda {

template <int ELEM>
__device__ __forceinline__ int mx_shared_exp(uint32_t ab, int mode)
{
    constexpr Grid G = grid_of(ELEM);
    if (ab == 0)
        return -127;
    int fl = flog2_bits(ab);
    if (mode == BFP_SCALE_FLOOR) { /* the default: skip the significand work */
        int se = fl - G.emax;
        return se < -127 ? -127 : se > 127 ? 127 : se;
    }
    uint32_t S;
    int p;
    if (ab >> 23) {
        S = (ab & 0x7FFFFFu) | 0x800000u;
        p = 23;
    } else {
        S = ab;
        p = 31 - __clz((int)ab);
    }
    int se;
    if (mode == BFP_SCALE_CEIL) {
        se = (S == (1u << p) ? fl : fl + 1) - G.emax;
    } else if (mode == BFP_SCALE_EVEN) {
        /* amax rounded half-up to m bits below the leading one carries into
         * the next binade iff S + half >= 2^(p+1) */
        int k = p - G.m;
        int carry = k > 0 && S + (1u << (k - 1)) >= (1u << (p + 1));
        se = fl + carry - G.emax;
    } else if (mode == BFP_SCALE_RCEIL) {
        constexpr int maxe = grid_maxe(G);
        constexpr uint32_t msig = grid_maxsig24(G);
        uint32_t sig = S << (23 - p);
        se = fl - maxe + (sig > msig ? 1 : 0);
    } else {
        se = fl - G.emax;
    }
    return se < -127 ? -127 : se > 127 ? 127 : se;
}

/* BF: the group's 8 elements are the bf16 words w (x unused) and the
 * rounding is RNE onto a FLOAT grid: the bf16x2 encoder applies. */
template <int FMT, int MODE, bool BF>
__device__ __forceinline__ void mx_body(const QParams &P, size_t row, bool valid, size_t blk,
                                        int sub, size_t col0, int n, const uint32_t x[8],
                                        const uint4 &w)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    uint32_t ab[8], am = 0;
    if (BF) {
        am = amax8_bf16(w);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            ab[j] = x[j] & 0x7FFFFFFFu;
            am = max(am, ab[j]);
        }
    }
    am = group_max<T>(am);
    PackT<W> packed = 0;
    uint32_t sc;
    if (am >= 0x7F800000u) {
        sc = 0xFF;
    } else {
        int se = mx_shared_exp<F.elem>(am, P.scale_mode);
        sc = (uint32_t)(se + 127);
        /* bf16 input: se <= 127 - 2 + 1 (CEIL), so 2^-se is a normal bf16 */
        if (BF) { /* (FLOAT grids only: quant_body's MXF) */
            uint32_t f2, m2;
            enc_args_bf16<F.elem>(se, f2, m2);
            packed = enc8_bf16<F.elem>(w, f2, m2);
        }
        float f = pow2f(-se);
        size_t e0 = row * P.L.cols + col0;
#pragma unroll
        for (int j = 0; j < 8 && !BF; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float v = __fmul_rn(u2f(ab[j]), f);
            int mag = enc_mag<F.elem, false, MODE>(v, r, ab[j] != 0);
            pack<W>(packed, make_code<F.elem, false>(x[j], mag), j);
        }
    }
    if (valid) {
        put_codes<W>(P, row, col0, n, packed);
        if (sub == 0) {
            P.scales[scale_index(P, row, blk)] = (unsigned char)sc;
            if (sc == 0xFF && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_MX_CUH */
