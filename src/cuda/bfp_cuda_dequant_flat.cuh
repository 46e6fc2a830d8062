/* bfp_cuda_dequant_flat.cuh - the flat bf16 dequantize kernel: rows of whole
 * blocks as one array of 8-element groups, chunks strided over by a capped
 * grid, on the decoders of bfp_cuda_dequant_fast.cuh. */
#ifndef BFP_CUDA_DEQUANT_FLAT_CUH
#define BFP_CUDA_DEQUANT_FLAT_CUH

#include "bfp_cuda_dequant_fast.cuh"

namespace bfpcuda {

/* ---- bf16 output, rows of whole blocks: the flat kernel --------------------------- *
 * With cols a multiple of the block, group g (8 elements) of the tensor reads
 * its codes at g * W bytes, its scale (meta) at g / T and writes 16 bytes at
 * g * 16: the tensor is one flat array of groups, and no row / column
 * arithmetic or partial-group check is left per group. A grid of
 * warps strides over chunks of 32 * FU groups (FU = flat_fu); lane l of a warp takes groups
 * base + l + 32k (k < FU), so every load and store has a constant offset
 * from the lane's pointers and each 16-byte store of the warp is 512
 * contiguous bytes; the next chunk's loads are issued before this chunk's
 * stores. MX+ shuffles only when some lane of the warp has a code-level
 * block error (__any_sync), and the block max is patched into its register. */
template <int FMT>
__host__ __device__ constexpr bool flat_plain4()
{
    return grid_of(fmt_of(FMT).elem).bits == 4 && fmt_of(FMT).fam != BFP_FAMILY_MX_PLUS &&
           fmt_of(FMT).fam != BFP_FAMILY_MX_PP && fmt_of(FMT).fam != BFP_FAMILY_NVFP4_PLUS;
}

/* groups per lane in a chunk: 8 for the plain 4-bit formats, whose warps
 * waited on too few loads in flight with 4 (docs/gpu.md); 4 for the others */
template <int FMT>
__host__ __device__ constexpr int flat_fu()
{
    return flat_plain4<FMT>() ? 8 : 4;
}

template <int FMT, bool FULL>
__device__ __forceinline__ void flat_load(const DParams &P, size_t ngroups, size_t base, unsigned lane,
                                          PackT<grid_of(fmt_of(FMT).elem).bits> c[], uint32_t a[])
{
    constexpr int T = fmt_of(FMT).block / 8, W = grid_of(fmt_of(FMT).elem).bits, FU = flat_fu<FMT>();
    size_t g0 = base + lane;
    const unsigned char *cp = P.codes + g0 * W; /* constant offsets below */
    size_t b0 = g0 / T;
#pragma unroll
    for (int k = 0; k < FU; k++) {
        bool ok = FULL || g0 + 32 * k < ngroups;
        if (W == 6) {
            /* 4-aligned codes (launch_dequant): g * 6 is 4-aligned for even g
             * (g's parity is the lane's): a 32-bit and a 16-bit load, not three */
            uint32_t p = lane & 1u;
            uint32_t u = ok ? __ldg(reinterpret_cast<const uint32_t *>(cp + 32 * k * W + 2 * p)) : 0u;
            uint32_t h = ok ? __ldg(reinterpret_cast<const uint16_t *>(cp + 32 * k * W + 4 - 4 * p)) : 0u;
            /* codes 0-3 and 4-7 (24 bits each): even g u0 u1 u2 | u3 h0 h1,
             * odd g h0 h1 u0 | u1 u2 u3 (selector 6: a zero byte of h) */
            uint32_t lo = prmt_sx(u, h, p ? 0x6054u : 0x6210u), hi = prmt_sx(u, h, p ? 0x6321u : 0x6543u);
            c[k] = (PackT<W>)((uint64_t)lo | (uint64_t)hi << 24);
        } else {
            c[k] = ok ? (PackT<W>)load_codes<W>(cp + 32 * k * W, W, true) : (PackT<W>)0;
        }
        if (fmt_of(FMT).fam == BFP_FAMILY_HIF4) /* 4-aligned scales (launch_dequant) */
            a[k] = ok ? __ldg(reinterpret_cast<const uint32_t *>(P.scales) + b0 + 32 * k / T) : 0u;
        else
            a[k] = ok ? load_aux<FMT>(P, b0 + 32 * k / T) : 0u;
    }
}

/* one group (index sub in its block): decode and store (invalid groups of
 * the last chunk store nothing) */
template <int FMT>
__device__ __forceinline__ void flat_out(const DParams &P, size_t g, int sub, bool ok, PackT<grid_of(fmt_of(FMT).elem).bits> c,
                                         uint32_t a, uint32_t lbad, float s_enc, const uint4 *nvtab,
                                         const uint16_t *nvbm)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    uint32_t w[4], patch;
    bool mpbad = MXP && lbad != 0;
    decode8_bf16<FMT, true>(c, a, true, sub, F.block, s_enc, mpbad, nvtab, w, nvbm, patch);
    /* the block max into its register: a second, 2-byte store instead
     * saturated a memory unit (docs/gpu.md) */
    if (patch != ~0u)
        put_bf16(w, (int)(a >> 8 & 7u), patch, true);
    if (ok)
        *reinterpret_cast<uint4 *>(P.dst + g * 16) = make_uint4(w[0], w[1], w[2], w[3]);
}

/* MX+ code check of a lane's FU groups, before the warp exchange: lb[k] is
 * the lane's part (formats with special codes) and the result says whether
 * the warp must exchange. E2M1, E2M3, E3M2 have no special codes: only a
 * flushed block (scale 0 / 0xFF) can fail, and its lb is found in
 * flat_lbad_full. base and 32k are multiples of T: a group's index in its
 * block is lane % T. */
template <int FMT>
__device__ __forceinline__ bool flat_lbad(const PackT<grid_of(fmt_of(FMT).elem).bits> c[], const uint32_t a[],
                                          unsigned lane, uint32_t lb[])
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, FU = flat_fu<FMT>();
    constexpr bool SPECIAL = grid_of(F.elem).kind == GK_INT ||
                             (int)((1u << grid_of(F.elem).bits) - 1) / 2 > grid_of(F.elem).maxidx;
    bool any = false;
#pragma unroll
    for (int k = 0; k < FU; k++) {
        lb[k] = SPECIAL ? mxplus_bad_codes<FMT>(c[k], a[k], (int)(lane % T), 8) : 0u;
        any = any || (SPECIAL ? lb[k] != 0 : (a[k] & 0xFFu) - 1u >= 254u);
    }
    return any;
}

template <int FMT>
__device__ __forceinline__ uint32_t flat_lbad_full(PackT<grid_of(fmt_of(FMT).elem).bits> c, uint32_t a,
                                                   unsigned lane, uint32_t lb)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr bool SPECIAL = grid_of(F.elem).kind == GK_INT ||
                             (int)((1u << grid_of(F.elem).bits) - 1) / 2 > grid_of(F.elem).maxidx;
    return SPECIAL ? lb : mxplus_bad_codes<FMT>(c, a, (int)(lane % (F.block / 8)), 8);
}

template <int FMT, bool FULL>
__device__ __forceinline__ void flat_chunk(const DParams &P, size_t ngroups, size_t base, unsigned lane,
                                           const PackT<grid_of(fmt_of(FMT).elem).bits> c[],
                                           const uint32_t a[], float s_enc, const uint4 *nvtab,
                                           const uint16_t *nvbm)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, FU = flat_fu<FMT>();
    constexpr bool MXP = F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP;
    uint32_t lb[FU] = {};
    if (MXP && __any_sync(0xFFFFFFFFu, flat_lbad<FMT>(c, a, lane, lb))) { /* warp-uniform, rare */
#pragma unroll
        for (int k = 0; k < FU; k++)
            lb[k] = group_or<T>(flat_lbad_full<FMT>(c[k], a[k], lane, lb[k]));
    }
#pragma unroll
    for (int k = 0; k < FU; k++) {
        size_t g = base + lane + 32 * k;
        flat_out<FMT>(P, g, (int)(lane % T), FULL || g < ngroups, c[k], a[k], lb[k], s_enc, nvtab, nvbm);
    }
}

/* CTAs per SM the register count must allow: 8-bit codes (two registers a
 * group, twice for the prefetch), NVFP4+ (else a spill) and the plain 4-bit
 * formats (8 groups a lane) get up to 64 registers, the others 48 */
template <int FMT>
__host__ __device__ constexpr int flat_min_ctas()
{
    return grid_of(fmt_of(FMT).elem).bits == 8 || fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS ||
                   flat_plain4<FMT>()
               ? 4
               : 5;
}

template <int FMT>
__global__ void __launch_bounds__(256, flat_min_ctas<FMT>()) dequant_flat_kernel(const DParams P, size_t ngroups)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits;
    constexpr bool NV = F.fam == BFP_FAMILY_NVFP4 || F.fam == BFP_FAMILY_NVFP4_PLUS;
    constexpr bool NVP = F.fam == BFP_FAMILY_NVFP4_PLUS;
    constexpr int FU = flat_fu<FMT>();
    constexpr size_t CH = 32 * FU; /* groups per warp chunk */
    __shared__ uint4 nvtab[NV ? 256 : 1];
    __shared__ uint16_t nvbm[NVP ? 128 * 8 : 1];
    const unsigned lane = threadIdx.x & 31u;
    const size_t step = (size_t)gridDim.x * 8 * CH;
    size_t base = ((size_t)blockIdx.x * 8 + threadIdx.x / 32) * CH;
    PackT<W> c[FU], cn[FU] = {};
    uint32_t a[FU], an[FU] = {};
    bool have = base + CH <= ngroups; /* warp-uniform, as base */
    /* the first chunk's loads go out before the tables are built, so that a
     * CTA's table work overlaps their latency (a CTA takes only a few chunks) */
    if (have)
        flat_load<FMT, true>(P, ngroups, base, lane, c, a);
    float s_enc = 1.0f;
    if (NV) { /* the tables once per CTA */
        s_enc = __ldg(P.tscale);
        nvtab[threadIdx.x] = nv_bf16_table(threadIdx.x, s_enc);
        if (NVP)
            for (unsigned i = threadIdx.x; i < 128 * 8; i += 256)
                nvbm[i] = (uint16_t)nv_bm_bf16(i >> 3, i & 7u, s_enc);
        __syncthreads();
    }
    while (have) { /* whole chunks */
        size_t nb = base + step;
        bool more = nb + CH <= ngroups;
        if (more)
            flat_load<FMT, true>(P, ngroups, nb, lane, cn, an);
        flat_chunk<FMT, true>(P, ngroups, base, lane, c, a, s_enc, nvtab, nvbm);
#pragma unroll
        for (int k = 0; k < FU; k++) {
            c[k] = cn[k];
            a[k] = an[k];
        }
        base = nb;
        have = more;
    }
    if (base < ngroups) { /* the last, partial chunk (one warp) */
        flat_load<FMT, false>(P, ngroups, base, lane, c, a);
        flat_chunk<FMT, false>(P, ngroups, base, lane, c, a, s_enc, nvtab, nvbm);
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_DEQUANT_FLAT_CUH */
