/* bfp_cuda_quant_hif4.cuh - the HiF4 quantizer at 8 elements per thread
 * (any dtype and rounding). */
#ifndef BFP_CUDA_QUANT_HIF4_CUH
#define BFP_CUDA_QUANT_HIF4_CUH

#include "bfp_cuda_params.cuh"
#include "bfp_cuda_quant_bf16.cuh"

namespace bfpcuda {

__device__ __forceinline__ double bf16_rne_d(double p)
{
    /* round to 8 significant bits, ties to even (p >= 0, finite) */
    uint64_t b = (uint64_t)__double_as_longlong(p);
    b = (b + 0xFFFFFFFFFFFull + ((b >> 45) & 1u)) & ~0x1FFFFFFFFFFFull;
    return __longlong_as_double((long long)b);
}

template <int FMT, int MODE>
__device__ __forceinline__ void hif4_body(const QParams &P, size_t row, bool valid, size_t blk,
                                          int sub, size_t col0, int n, const uint32_t x[8])
{
    uint32_t ab[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        ab[j] = x[j] & 0x7FFFFFFFu;
    uint32_t v16a = max(max(ab[0], ab[1]), max(ab[2], ab[3]));
    uint32_t v16b = max(max(ab[4], ab[5]), max(ab[6], ab[7]));
    uint32_t v8 = max(v16a, v16b);
    uint32_t vmax = group_max<8>(v8);
    bool nonfinite = vmax >= 0x7F800000u;
    /* scale: SF = BF16(Vmax * BF16(1/7)) clamped, RNE to 3 significant bits */
    double sf = bf16_rne_d(__dmul_rn((double)u2f(vmax), 0.142578125));
    sf = fmin(fmax(sf, 3.552713678800501e-15 /* 2^-48 */), 49152.0);
    uint64_t b = (uint64_t)__double_as_longlong(sf);
    b = (b + 0x1FFFFFFFFFFFFull + ((b >> 50) & 1u)) & ~0x3FFFFFFFFFFFFull;
    int ex = (int)(b >> 52) - 1023;
    uint32_t m2 = (uint32_t)(b >> 50) & 3u;
    uint32_t code = (uint32_t)(ex + 48) << 2 | m2;
    const float rtab[4] = {1.0f, 0.80078125f, 0.66796875f, 0.5703125f};
    float rm = m2 == 0 ? rtab[0] : m2 == 1 ? rtab[1] : m2 == 2 ? rtab[2] : rtab[3];
    float rec = __fmul_rn(rm, pow2f(-ex)); /* REC = BF16(1/E6M2), exact */
    bool e8 = __dmul_rn((double)u2f(v8), (double)rec) >= 4.0;
    double h8 = e8 ? 0.5 : 1.0;
    bool e16a = __dmul_rn(__dmul_rn((double)u2f(v16a), (double)rec), h8) >= 2.0;
    bool e16b = __dmul_rn(__dmul_rn((double)u2f(v16b), (double)rec), h8) >= 2.0;
    unsigned base = threadIdx.x & 24u;
    uint32_t b8 = (__ballot_sync(0xFFFFFFFFu, e8) >> base) & 0xFFu;
    uint32_t b16a = (__ballot_sync(0xFFFFFFFFu, e16a) >> base) & 0xFFu;
    uint32_t b16b = (__ballot_sync(0xFFFFFFFFu, e16b) >> base) & 0xFFu;
    uint32_t packed = 0;
    uint32_t word = 0xFFu;
    if (!nonfinite) {
        uint32_t e16 = 0;
#pragma unroll
        for (int k = 0; k < 8; k++)
            e16 |= ((b16a >> k) & 1u) << (2 * k) | ((b16b >> k) & 1u) << (2 * k + 1);
        word = code | b8 << 8 | e16 << 16;
        float fa = __fmul_rn(rec, pow2f(2 - (int)e8 - (int)e16a));
        float fb = __fmul_rn(rec, pow2f(2 - (int)e8 - (int)e16b));
        size_t e0 = row * P.L.cols + col0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float f = j < 4 ? fa : fb;
            int k;
            if (P.dt == BFP_DTYPE_F32) { /* 24 x 8 bits: exact in double */
                double y = fmin(__dmul_rn((double)u2f(ab[j]), (double)f), 8.0);
                k = round_qd<MODE>(y, r);
            } else { /* 8 or 11 x 8 bits: exact in fp32 */
                float y = fminf(__fmul_rn(u2f(ab[j]), f), 8.0f);
                k = round_q<MODE>(y, r, ab[j] != 0);
            }
            k = min(k, 7);
            pack<4>(packed, (uint32_t)k | (x[j] >> 31) << 3, j);
        }
    }
    if (valid) {
        put_codes<4>(P, row, col0, n, packed);
        if (sub == 0) {
            unsigned char *s = P.scales + 4 * (row * P.G + blk);
            s[0] = (unsigned char)word;
            s[1] = (unsigned char)(word >> 8);
            s[2] = (unsigned char)(word >> 16);
            s[3] = (unsigned char)(word >> 24);
            if (nonfinite && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_HIF4_CUH */
