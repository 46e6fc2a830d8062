/* bfp_cuda_qblock_hif4.cuh - HiF4 quantizer for bf16 input with a whole
 * 64-element block per thread. The hot path of HiF4: bf16 input, its default rounding
 * (ties away), rows of whole blocks, 16-byte aligned input and codes, 4-byte
 * aligned scale words. A thread reads its block as eight 16-byte vectors
 * (vector k = E1_8 group k), takes every maximum with packed 16-bit max,
 * decides the flags with packed integer compares against two thresholds and
 * encodes two elements per pair of bf16x2 FMAs; no shuffles. Same results
 * as hif4_body and src/core/hif4.c (SPEC section 4), bit for bit:
 *
 *  - SF = BF16_RNE(Vmax * C), C = BF16(1/7) = 73 * 2^-9: the fp32 product of
 *    an 8-bit and a 7-bit significand is exact (its lowest bit is >= 2^-142),
 *    then rounded to 8 and to 3 significant bits by integer RNE on its bits
 *    (below 2^-126 the result is clamped to 2^-48 anyway). Clamping after
 *    the 3-bit rounding equals clamping before it: both bounds (2^-48,
 *    1.5 * 2^15) have 3 significant bits.
 *  - REC = r * 2^-ex, r = BF16(1/(1 + m2/4)) = {128, 205, 171, 146} / 256.
 *  - The flags compare V * REC (exact in the reference) with 2 and 4. For a
 *    bf16 V, V * REC >= 2 iff V >= T2, the least such bf16: 2^(ex+1) times
 *    the least significand s/128 with s * r >= 128 * 256, s = 128, 160, 192,
 *    225 for m2 = 0..3; V * REC >= 4 iff V >= T4 = 2 T2 (bits + 0x80). bf16
 *    magnitudes order like their bits, so V >= T is the top bit of the
 *    16-bit lane V + 0x8000 - T (no carry leaves the lane). E1_16 = V16 >=
 *    (E1_8 ? T4 : T2), and the group's F halves once for "E1_8 or V16 >=
 *    T2" and once more for "V16 >= T4".
 *  - Element: t = |x| * F, F = 4 REC 2^-(E1_8 + E1_16); k = floor(t + 1/2),
 *    at most 7. t has up to 16 significant bits (8 x 8), so it is not a
 *    bf16, but fma.rn.bf16x2(|x|, F, M) rounds the exact t + M once (PTX:
 *    no loss of precision in the intermediate product and addition). With
 *    M = 128 (bf16 ulp 1 on [128, 256)) the result's bits minus M's are
 *    rne(t), ties to even; with M = 129 it is t rounded with ties to odd.
 *    The two agree off a tie and differ by one on it, so (k1 + k2 + 1) >> 1
 *    is t rounded half up: ties away. (A tie needs t = odd / 2 <= 15 / 2,
 *    so the odd part of r, 205, 171 or 73 for m2 > 0, must be 1: ties occur
 *    only for m2 = 0.) Were the FMA's sum first rounded to fp32, nothing
 *    would change: for 1/2 <= t < 127 the sum has at most 24 significant
 *    bits (t's lowest bit is >= 2^-16), above that k saturates anyway, and
 *    below 1/2 the fp32 sum could reach M + 1/2 only at t = 1/2 - 2^-17 =
 *    65535 * 2^-17, and 65535 = 3 * 5 * 17 * 257 is no s * r. k beyond 7 is
 *    clamped by the lane min; t stays finite (REC <= 2^48 only when Vmax <
 *    2^-45, and REC <= 2^-15 once Vmax > 2^18).
 *  - A block holding a NaN or Inf has a lane >= 0x7F80: word 0xFF, codes 0.
 * tools/dev/quant_emul_hif4.cc runs the kernel's two steps per warp (the
 * staging, then the encoder) on the host, the packed instructions emulated
 * exactly, against bfp_quantize_ref. */
#ifndef BFP_CUDA_QBLOCK_HIF4_CUH
#define BFP_CUDA_QBLOCK_HIF4_CUH

#include "bfp_cuda_qblock_ctas.cuh"
#include "bfp_cuda_quant_hif4.cuh"
#include "bfp_cuda_quant_rows.cuh"

namespace bfpcuda {

/* A word of two elements: per lane k1 + k2 + 1 (see the header), clamped
 * to 15, so that the lane shifted right by one is the rounded magnitude. */
__device__ __forceinline__ uint32_t hif4_enc2(uint32_t a2, uint32_t f2)
{
    uint32_t r1 = bf2_fma(a2, f2, 0x43004300u); /* 128 + t, ties to even */
    uint32_t r2 = bf2_fma(a2, f2, 0x43014301u); /* 129 + t, ties to odd */
    return min_u16x2(r1 + r2 - 0x86008600u, 0x000F000Fu);
}

/* Block b of the tensor (elements [64 b, 64 b + 64) of the flat input).
 * Vector k (elements 8k..8k+7 = e0..e7) is regrouped into the words u0 =
 * (e0, e4), u1 = (e1, e5), u2 = (e2, e6), u3 = (e3, e7): lane 0 of each is
 * E1_16 group 2k, lane 1 group 2k+1, so that one word of two per-group
 * factors serves all four, and the 4-bit codes come out with two PRMTs. */
template <int FMT, class Vec>
__device__ __forceinline__ void hif4_block_enc(const QParams &P, size_t b, Vec vec)
{
    uint32_t a[8][4], se[8], so[8], v16[8], vm = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint4 x = vec(k); /* read where it is used: fewer registers live */
        uint32_t u[4] = {__byte_perm(x.x, x.z, 0x5410), __byte_perm(x.x, x.z, 0x7632),
                         __byte_perm(x.y, x.w, 0x5410), __byte_perm(x.y, x.w, 0x7632)};
        /* the signs of e0, e2, e4, e6 / e1, e3, e5, e7 at bit 4 of bytes 0-3 */
        se[k] = prmt_sx(u[0], u[2], 0xFBD9u) & 0x10101010u;
        so[k] = prmt_sx(u[1], u[3], 0xFBD9u) & 0x10101010u;
#pragma unroll
        for (int j = 0; j < 4; j++)
            a[k][j] = u[j] & 0x7FFF7FFFu;
        v16[k] = max_u16x2(max_u16x2(a[k][0], a[k][1]), max_u16x2(a[k][2], a[k][3]));
        vm = max_u16x2(vm, v16[k]);
    }
    uint32_t vmax = max(vm & 0xFFFFu, vm >> 16); /* bf16 bits of Vmax */
    bool nonfinite = vmax >= 0x7F80u;
    uint32_t word = 0xFFu, c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (!nonfinite) {
        /* SF = BF16(Vmax * C) then 3 significant bits, RNE on the fp32 bits */
        uint32_t p = f2u(__fmul_rn(u2f(vmax << 16), 0.142578125f));
        p = (p + 0x7FFFu + ((p >> 16) & 1u)) & 0xFFFF0000u;
        p = (p + 0xFFFFFu + ((p >> 21) & 1u)) & 0xFFE00000u;
        p = min(max(p, 0x27800000u), 0x47400000u); /* [2^-48, 49152] */
        uint32_t code = (p >> 21) - 316u;         /* (ex + 48) << 2 | m2 */
        uint32_t m2 = code & 3u, ex7 = ((p >> 23) - 127u) << 7;
        /* bf16 bits of F for no flag (4 REC) and of T2 (see the header) */
        uint32_t fb = 0x4000u + ((0x122B4D80u >> (8 * m2)) & 0xFFu) - ex7;
        uint32_t t2 = 0x4000u + ((0x61402000u >> (8 * m2)) & 0xFFu) + ex7;
        uint32_t k2 = (0x8000u - t2) * LANES2, k4 = k2 - 0x80u * LANES2;
        uint32_t f2 = (fb - 0x100u) * LANES2; /* F after both halvings */
        /* per group (lane), xn: neither E1_8 nor V16 >= T2, yn: not V16 >=
         * T4, at the lane's top bit; each adds 0x80 (a doubling) to f2. xn,
         * yn of vector k collect at bits 8 + k and 24 + k of ax, ay. */
        uint32_t ax = 0, ay = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            uint32_t d2 = v16[k] + k2, d4 = v16[k] + k4; /* lane top bit: V16 >= T2, >= T4 */
            uint32_t sw = __byte_perm(d4, 0, 0x1032);    /* the other group's */
            uint32_t xn = ~(d2 | sw) & 0x80008000u, yn = ~d4 & 0x80008000u;
            uint32_t f = f2 + (xn >> 8) + (yn >> 8);
            ax = (ax >> 1) + xn;
            ay = (ay >> 1) + yn;
            uint32_t v[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                v[j] = hif4_enc2(a[k][j], f);
            /* bytes: lane values of e0, e2, e4, e6 (e1, e3, e5, e7) | sign << 4 */
            uint32_t ev = __byte_perm(v[0], v[2], 0x6240) | se[k];
            uint32_t od = __byte_perm(v[1], v[3], 0x6240) | so[k];
            c[k] = ((ev >> 1) & 0x0F0F0F0Fu) | ((od << 3) & 0xF0F0F0F0u);
        }
        /* E1_8 = either group's ys; E1_16 = xs ^ ys ^ E1_8 = xn ^ yn ^ E1_8 */
        uint32_t e8 = ~(ay & ay >> 16) & 0xFF00u;
        uint32_t z = ((ax ^ ay ^ (e8 | e8 << 16)) & 0xFF00FF00u) >> 8; /* group 2k (2k+1) at bit k (16 + k) */
        z = (z | z << 4) & 0x0F0F0F0Fu; /* interleave: group g at bit g (+ 16) */
        z = (z | z << 2) & 0x33333333u;
        z = (z | z << 1) & 0x55555555u;
        word = code | e8 | ((z & 0xFFFFu) | z >> 15) << 16;
    }
    uint4 *cp = reinterpret_cast<uint4 *>(P.codes) + 2 * b;
    cp[0] = make_uint4(c[0], c[1], c[2], c[3]);
    cp[1] = make_uint4(c[4], c[5], c[6], c[7]);
    reinterpret_cast<uint32_t *>(P.scales)[b] = word;
    if (nonfinite && P.nonfinite)
        atomicAdd(P.nonfinite, 1ull);
}

/* Block b read straight from global memory (each lane 128 bytes apart). */
template <int FMT>
__device__ __forceinline__ void hif4_block_bf16(const QParams &P, size_t b)
{
    const uint4 *src = reinterpret_cast<const uint4 *>(P.src) + 8 * b;
    hif4_block_enc<FMT>(P, b, [&](int k) { return __ldg(src + k); });
}

/* The kernel stages a warp's 32 blocks through shared memory. Read straight,
 * each 16-byte load of the warp touched 32 cache lines (its lanes 128 bytes
 * apart) and kept an L1 unit busier than DRAM (docs/gpu.md).
 * Here lane l loads vector c = 32 i + l (i < 8) of the warp's 4 KB, so each
 * load reads 512 contiguous bytes, and puts it at row c / 8 (its block),
 * column c % 8 of the stage. Rows are HIF4_ROW = 9 vectors apart, so both
 * the stores (8 lanes: one row's 128 bytes) and the reads (8 lanes: vector k
 * of 8 rows, 144 bytes apart) hit 32 different banks. */
constexpr int HIF4_ROW = 9;

template <int FMT>
__device__ __forceinline__ void hif4_stage_put(const QParams &P, size_t base, size_t nblocks,
                                               unsigned lane, uint4 *stage)
{
    const uint4 *src = reinterpret_cast<const uint4 *>(P.src) + 8 * base;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned c = 32u * i + lane;
        if (base + c / 8 < nblocks)
            stage[(c / 8) * HIF4_ROW + c % 8] = __ldg(src + c);
    }
}

/* After the warp's hif4_stage_put (and a __syncwarp): lane l encodes block
 * base + l from row l. */
template <int FMT>
__device__ __forceinline__ void hif4_stage_enc(const QParams &P, size_t base, size_t nblocks,
                                               unsigned lane, const uint4 *stage)
{
    if (base + lane >= nblocks)
        return;
    const uint4 *row = stage + lane * HIF4_ROW;
    hif4_block_enc<FMT>(P, base + lane, [&](int k) { return row[k]; });
}

template <int FMT>
__global__ void __launch_bounds__(256, 3) hif4_block_kernel(const QParams P, size_t nblocks)
{
    __shared__ uint4 stage[8][32 * HIF4_ROW]; /* 4608 bytes a warp */
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    /* warp-uniform loop: a warp's lanes take blocks base .. base + 31 */
    for (size_t base = (size_t)blockIdx.x * blockDim.x + 32u * warp; base < nblocks; base += stride) {
        hif4_stage_put<FMT>(P, base, nblocks, lane, stage[warp]);
        __syncwarp();
        hif4_stage_enc<FMT>(P, base, nblocks, lane, stage[warp]);
        __syncwarp(); /* every lane has read its row before the next chunk's stores */
    }
}

/* Whether hif4_block_kernel applies: HiF4, bf16 input, the default rounding
 * (ties away), whole blocks per row (block b is elements [64 b, 64 b + 64)
 * of the flat input, codes [32 b, 32 b + 32), scale word b), 16-byte
 * aligned input and codes, 4-byte aligned scale words. */
template <int FMT>
bool hif4_block_ok(const QParams &P)
{
    if constexpr (fmt_of(FMT).fam != BFP_FAMILY_HIF4)
        return false;
    return P.dt == BFP_DTYPE_BF16 && P.mode == RM_AWAY && P.vec_in && P.vec_out && !P.swz &&
           P.L.cols % 64 == 0 && ((uintptr_t)P.src & 15u) == 0 && ((uintptr_t)P.codes & 15u) == 0 &&
           ((uintptr_t)P.scales & 3u) == 0;
}

template <int FMT>
bfp_status launch_hif4_block(const QParams &P, cudaStream_t s)
{
    if constexpr (fmt_of(FMT).fam != BFP_FAMILY_HIF4) { /* hif4_block_ok is false */
        return BFP_ERR_ARG;
    } else {
        size_t nblocks = P.L.rows * (P.L.cols / 64);
        if (nblocks == 0)
            return BFP_OK;
        BFP_LAUNCH(hif4_block_kernel<FMT>, stride_grid(nblocks), 256, s, P, nblocks);
        CUDA_OK(cudaGetLastError());
        return BFP_OK;
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_HIF4_CUH */
