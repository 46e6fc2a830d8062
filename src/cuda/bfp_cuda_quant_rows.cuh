/* bfp_cuda_quant_rows.cuh - loads of a thread's rows and the stores of a
 * whole block's codes and scale, shared by the quantize kernels. */
#ifndef BFP_CUDA_QUANT_ROWS_CUH
#define BFP_CUDA_QUANT_ROWS_CUH

#include "bfp_cuda_params.cuh"
#include "bfp_cuda_quant_bf16.cuh"

namespace bfpcuda {

template <int NU>
__device__ __forceinline__ void load_rows(const QParams &P, bool vec, size_t row0, size_t col0,
                                          Raw raw[NU])
{
#pragma unroll
    for (int u = 0; u < NU; u++) {
        raw[u].a = raw[u].b = make_uint4(0, 0, 0, 0);
        if (vec && row0 + u < P.L.rows)
            load_vec(P.src, P.dt, (row0 + u) * P.L.cols + col0, raw[u]);
    }
}

/* The codes of block b at the 4 * W bytes of codes it owns: one 16-byte
 * store (4-bit), three 8-byte ones (6-bit: 2-byte stores were much slower,
 * docs/gpu.md), or one 8-byte store per group (8-bit). */
template <int W>
__device__ __forceinline__ void put_block_codes(const QParams &P, size_t b, const PackT<W> packed[4])
{
    unsigned char *cp = P.codes + b * (size_t)(4 * W);
    if (W == 4 && ((uintptr_t)P.codes & 15u) == 0) {
        *reinterpret_cast<uint4 *>(cp) = make_uint4((uint32_t)packed[0], (uint32_t)packed[1],
                                                    (uint32_t)packed[2], (uint32_t)packed[3]);
    } else if (W == 6 && ((uintptr_t)P.codes & 7u) == 0) {
        uint64_t *q = reinterpret_cast<uint64_t *>(cp);
        uint64_t p0 = packed[0], p1 = packed[1], p2 = packed[2], p3 = packed[3];
        q[0] = p0 | p1 << 48;
        q[1] = p1 >> 16 | p2 << 32;
        q[2] = p2 >> 32 | p3 << 16;
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
            store_codes<W>(cp + k * W, packed[k], W, true);
    }
}

/* The rest of block b of a block-per-thread MX kernel: its E8M0 scale
 * (planar or swizzled), its meta byte (MX+ / MX++: has_meta), and the count
 * of non-finite blocks. */
__device__ __forceinline__ void put_block_scale(const QParams &P, size_t b, uint32_t sc,
                                                bool has_meta, uint32_t meta, bool nonfinite)
{
    P.scales[P.swz ? swizzle_offset(b / P.G, b % P.G, P.swz_ncol) : b] = (unsigned char)sc;
    if (has_meta)
        P.meta[b] = (unsigned char)meta;
    if (nonfinite && P.nonfinite)
        atomicAdd(P.nonfinite, 1ull);
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_ROWS_CUH */
