/* gemm_xq_decode.cuh - the quantized-x matmul's operand decode, shared by
 * its mma.sync kernel (gemm_xq.cu) and its wgmma kernel (gemm_xq_wgmma.cu),
 * and run on the host by tools/dev/gemm_xq_emul.cc (cuda_host_stubs.h).
 *
 * Every 4-bit code becomes its E4M3 byte exactly (E2M1 and the MX+ / NVFP4+
 * block max, +-4 (1 + m/8), are all E4M3 values). A lane decodes 8
 * consecutive elements of a 32-wide MX block, 8t..8t+7 for lane t of a
 * quad, into two words: lo = 8t..8t+3, hi = 8t+4..8t+7. The mma / wgmma k
 * slots 4t..4t+3 take lo and 16+4t..16+4t+3 take hi (xq_slot_elem), in A
 * and B alike. */
#pragma once
#include <stdint.h>

namespace bfpgemm {
namespace xq {

/* the block element that k slot s (0..31) of the mma / wgmma holds */
__host__ __device__ constexpr int xq_slot_elem(int s)
{
    return 8 * ((s & 15) >> 2) + 4 * (s >> 4) + (s & 3);
}

/* 4 E2M1 codes (low 16 bits, element i in nibble i) -> 4 E4M3 bytes */
__device__ __forceinline__ uint32_t e2m1x4_e4m3(uint32_t v)
{
    uint32_t mag = __byte_perm(0x3C383000u, 0x4C484440u, v & 0x7777u);
    uint32_t spread = __byte_perm(v, v >> 4, 0x5140u); /* nibble i in byte i */
    return mag | ((spread << 4) & 0x80808080u);
}

/* the block max of an MX+ / NVFP4+ block: sign + E0M3 at exponent 2 */
__device__ __forceinline__ uint32_t bm_e4m3(uint32_t c) { return ((c & 8u) << 4) | 0x48u | (c & 7u); }

__device__ __forceinline__ void put_byte(uint32_t &r, int pos, uint32_t b)
{
    r = (r & ~(0xFFu << (8 * pos))) | (b << (8 * pos));
}

__device__ __forceinline__ float e8m0_f(uint32_t e)
{
    return e == 0xFFu ? __uint_as_float(0x7FC00000u) : e == 0 ? __uint_as_float(0x00400000u)
                                                               : __uint_as_float(e << 23);
}

/* UE4M3 block scale; 0x7F and sign-bit bytes decode as NaN (reference) */
__device__ __forceinline__ float ue4m3_f(uint32_t b)
{
    if (b >= 0x7Fu)
        return __uint_as_float(0x7FC00000u);
    uint32_t e = b >> 3, m = b & 7u;
    return e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0x1p-9f;
}

/* c (0..8) 4-bit codes from element e0 of a row, as one word; missing ones 0 */
__device__ __forceinline__ uint32_t load4(const uint8_t *row, int e0, int c, bool vec)
{
    if (vec && c == 8)
        return __ldg(reinterpret_cast<const uint32_t *>(row + e0 / 2));
    uint32_t v = 0;
    for (int j = 0; j < (c + 1) / 2; j++)
        v |= (uint32_t)__ldg(row + e0 / 2 + j) << (8 * j);
    return c < 8 ? v & ((1u << (4 * c)) - 1u) : v;
}

/* the same for c (0..8) 8-bit codes, as two words */
__device__ __forceinline__ uint2 load8(const uint8_t *row, int e0, int c, bool vec)
{
    if (vec && c == 8)
        return __ldg(reinterpret_cast<const uint2 *>(row + e0));
    uint32_t lo = 0, hi = 0; /* not an array: its dynamic index went to local memory */
    for (int j = 0; j < c; j++) {
        const uint32_t b = (uint32_t)__ldg(row + e0 + j) << (8 * (j & 3));
        if (j < 4)
            lo |= b;
        else
            hi |= b;
    }
    return make_uint2(lo, hi);
}

/* Lane t's 8 codes v (elements 8t..8t+7 of an MX or MX+ block with scale
 * byte s and meta byte meta) as E4M3 words lo and hi. MX+: the block max
 * (index meta & 31) replaces its E2M1 code unless the block is flushed
 * (s = 0) or NaN (s = 0xFF). */
template <bool PLUS>
__device__ __forceinline__ void mx4_decode(uint32_t v, uint32_t s, uint32_t meta, int t,
                                           uint32_t &lo, uint32_t &hi)
{
    lo = e2m1x4_e4m3(v);
    hi = e2m1x4_e4m3(v >> 16);
    if (PLUS) {
        uint32_t i = meta & 31u;
        if (s != 0 && s != 0xFFu && (int)(i >> 3) == t) {
            uint32_t bm = bm_e4m3((v >> (4 * (i & 7u))) & 15u);
            if (i & 4u)
                put_byte(hi, (int)(i & 3u), bm);
            else
                put_byte(lo, (int)(i & 3u), bm);
        }
    }
}

/* A block of an MX (32) or MX+ 4-bit row for lane t, read from global
 * memory: elements 8t..8t+7 as E4M3 words lo and hi; its scale. */
template <bool PLUS>
__device__ __forceinline__ float mx4_block(const uint8_t *codes, const uint8_t *scales,
                                           const uint8_t *meta, size_t crb, int bpr, int row,
                                           int b, int t, int k, bool vec, uint32_t &lo,
                                           uint32_t &hi)
{
    int e0 = b * 32 + 8 * t;
    int c = min(max(k - e0, 0), 8);
    uint32_t v = load4(codes + (size_t)row * crb, e0, c, vec);
    uint32_t s = __ldg(scales + (size_t)row * bpr + b);
    uint32_t mt = PLUS ? __ldg(meta + (size_t)row * bpr + b) : 0u;
    mx4_decode<PLUS>(v, s, mt, t, lo, hi);
    return e8m0_f(s);
}

/* A block of an NVFP4 (16) or NVFP4+ row for lane t: elements 4t..4t+3 */
template <bool PLUS>
__device__ __forceinline__ float nv_block(const uint8_t *codes, const uint8_t *scales,
                                          const uint8_t *meta, size_t crb, int bpr, int row,
                                          int b, int t, int k, uint32_t &r)
{
    int e0 = b * 16 + 4 * t;
    int c = min(max(k - e0, 0), 4);
    const uint8_t *p = codes + (size_t)row * crb + e0 / 2;
    uint32_t v = c > 0 ? __ldg(p) : 0u;
    if (c > 2)
        v |= (uint32_t)__ldg(p + 1) << 8;
    v &= (1u << (4 * c)) - 1u;
    r = e2m1x4_e4m3(v);
    uint32_t s = __ldg(scales + (size_t)row * bpr + b);
    if (PLUS) {
        uint32_t i = __ldg(meta + (size_t)row * bpr + b) & 15u;
        if (s > 0x02u && s < 0x7Fu && (int)(i >> 2) == t)
            put_byte(r, (int)(i & 3u), bm_e4m3((v >> (4 * (i & 3u))) & 15u));
    }
    return ue4m3_f(s);
}

/* x of an MX pair as the wgmma kernel's B operand (gemm_xq_wgmma.cu):
 * lane t of block b of row `row` (x planes: codes rows crb bytes apart,
 * bpr blocks per row, k columns) -> the E4M3 words of k slots 4t..4t+3 (lo)
 * and 16+4t..16+4t+3 (hi), so that slot s holds element xq_slot_elem(s) as
 * in the A fragments; returns the block's scale. */
enum { XQ_X_E4M3 = 0, XQ_X_MX4 = 1, XQ_X_MX4P = 2 };
template <int XK>
__device__ __forceinline__ float xq_prep_lane(const uint8_t *codes, const uint8_t *scales,
                                              const uint8_t *meta, size_t crb, int bpr, int row,
                                              int b, int t, int k, bool vec, uint32_t &lo,
                                              uint32_t &hi)
{
    if (XK != XQ_X_E4M3)
        return mx4_block<XK == XQ_X_MX4P>(codes, scales, meta, crb, bpr, row, b, t, k, vec, lo,
                                          hi);
    int e0 = b * 32 + 8 * t;
    uint2 v = load8(codes + (size_t)row * crb, e0, min(max(k - e0, 0), 8), vec);
    lo = v.x, hi = v.y;
    return e8m0_f(__ldg(scales + (size_t)row * bpr + b));
}

} // namespace xq
} // namespace bfpgemm
