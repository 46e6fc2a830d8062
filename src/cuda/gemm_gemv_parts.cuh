/* gemm_gemv_parts.cuh - the GEMV kernel's pieces (gemm_gemv.cu): its
 * build-time knobs, the ring's stage layout and depth per format, and a
 * consumer warp's k tile of a unit (x's B fragments, decode, mma). */
#pragma once
#include "gemm_async.cuh"
#include "gemm_fused.cuh"
#include "gemm_grouped.cuh" /* G_MAX_EXPERTS */
#include "gemm_internal.h"

namespace bfpgemm {

constexpr int GV_THREADS = (GV_CW + 1) * 32; /* GV_CW consumers + the producer */
constexpr int GV_RED_LD = GV_R * 16 + 4; /* floats per row of x in the sums' buffer:
                                            lanes (g, t) hit 32 banks */

constexpr int gv_pad128(int b) { return (b + 127) & ~127; }
constexpr int gv_pad1024(int b) { return (b + 1023) & ~1023; }

/* Build-time knobs for the variants bench/gemv.sh compares (docs/gemm.md
 * has the measurements behind the defaults):
 * BFP_GV_XSMEM 1 stages x's k tiles with W's (TMA), 0 has each lane load
 * its B fragments from global memory (L1) before it waits for the stage,
 * so a stage is W alone and more CTAs fit (slower on the H200);
 * BFP_GV_CTAS1 / 2 the CTAs per SM aimed at for NT = 1 / 2 (registers capped
 * for them, and the ring as deep as the shared memory then allows, at most
 * GV_MAX_STAGES); at NT = 2 only mxfp4 and nvfp4 take BFP_GV_CTAS2, the
 * other formats one (gv_ctas). */
#ifndef BFP_GV_XSMEM
#define BFP_GV_XSMEM 1
#endif
#ifndef BFP_GV_CTAS1
#define BFP_GV_CTAS1 2
#endif
#ifndef BFP_GV_CTAS2
#define BFP_GV_CTAS2 2
#endif
/* BFP_GV_RED_SLICES: slices of the shared buffer in which the consumer
 * warps add their sums at the end of a group (GV_CW / slices rounds, a
 * barrier each); fewer slices leave more shared memory to the ring */
#ifndef BFP_GV_RED_SLICES
#define BFP_GV_RED_SLICES 8
#endif
constexpr int GV_SLICES = BFP_GV_RED_SLICES;
static_assert(GV_SLICES >= 1 && GV_CW % GV_SLICES == 0, "whole rounds");
constexpr bool GV_XSMEM = BFP_GV_XSMEM != 0;

/* CTAs per SM for format kind F at NT. At NT = 2 two CTAs (16 consumer
 * warps, two 2-stage rings) hide more of the decode's latency than one
 * with a 5-stage ring for mxfp4 and nvfp4; MX+ gained little and its
 * grouped instance, HiF4's and NVFP4+'s decode spill under two CTAs'
 * register cap (docs/gemm.md, "Two CTAs per SM at m = 9..16") */
template <int F, int NT>
constexpr int gv_ctas()
{
    return NT == 1 ? BFP_GV_CTAS1 : F == FMT_MX || F == FMT_NV ? BFP_GV_CTAS2 : 1;
}
constexpr int GV_MAX_STAGES = 6;

/* One stage: x's GV_CW k tiles when staged (8 NT rows of 128 bytes each,
 * 128-byte swizzled as TMA leaves them: 1024-byte aligned), then W's part as
 * the 3-D boxes land, [row tile][k tile][record]: codes, scales,
 * corrections. */
template <int F, int NT>
struct GvStage {
    static constexpr int R = GV_R, CW = GV_CW;
    static constexpr bool WIDE = tile_scale_bytes(F) == 64;
    static constexpr int SCB = tile_scale_bytes(F), CRB = tile_corr_bytes(F);
    static constexpr int XPART = 8 * NT * 128, XBYTES = GV_XSMEM ? CW * XPART : 0;
    static constexpr int SCALES = XBYTES + R * CW * 512;
    static constexpr int CORR = SCALES + gv_pad128(R * CW * SCB);
    static constexpr int BYTES = gv_pad1024(CORR + gv_pad128(R * CW * CRB));
    static constexpr uint32_t W_TX = R * CW * (512 + SCB + CRB);
    static constexpr int RED = GV_SLICES * NT * 8 * GV_RED_LD * 4; /* the sums' buffer */
};

/* The receive buffer of a cluster plan: [2 (iteration parity)][size
 * (sender)][8 NT (row of x)][ROWS / size (row of the receiver's part)]
 * floats; rank r owns rows [r ROWS / size, (r + 1) ROWS / size) of every
 * group */
template <int NT>
constexpr int gv_recv_bytes()
{
    return 2 * GV_R * 16 * 8 * NT * 4;
}

/* The ring: as many stages as fit CTAS CTAs per SM (228 KB, 1 KB of it
 * reserved per CTA, the barriers' static bytes and a grouped call's unit
 * counts, 1 KB of slack to align the dynamic part, a cluster plan's
 * receive buffer), at least 2 */
template <int F, int NT, bool G = false, bool CL = false>
struct GvRing {
    static constexpr int CTAS = gv_ctas<F, NT>();
    static constexpr int UPRE = G ? (G_MAX_EXPERTS + 1) * 4 : 0; /* grouped: units per expert */
    static constexpr int RECV = CL ? gv_recv_bytes<NT>() : 0;
    static constexpr int BUDGET =
        228 * 1024 / CTAS - 1024 - 256 - UPRE - 1024 - GvStage<F, NT>::RED - RECV;
    static constexpr int FIT = BUDGET / GvStage<F, NT>::BYTES;
    static constexpr int STAGES = FIT < 2 ? 2 : FIT > GV_MAX_STAGES ? GV_MAX_STAGES : FIT;
};

template <int F, int NT, bool G = false, bool CL = false>
constexpr int gemv_smem()
{
    return GvRing<F, NT, G, CL>::STAGES * GvStage<F, NT>::BYTES + GvStage<F, NT>::RED +
           GvRing<F, NT, G, CL>::RECV + 1024;
}
static_assert(gemv_smem<FMT_NVPLUS, 2>() <= 227 * 1024 &&
                  gemv_smem<FMT_NVPLUS, 2, false, true>() <= 227 * 1024,
              "one CTA per SM at least");
static_assert(GvRing<FMT_MX, 2, true>::FIT >= 2 && GvRing<FMT_NV, 2, true>::FIT >= 2 &&
                  GvRing<FMT_NV, 2>::FIT >= 2,
              "two stages in each CTA where gv_ctas asks for two");

__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void griddep_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

__device__ __forceinline__ void bar_consumers()
{
    asm volatile("bar.sync 1, %0;" ::"n"(GV_CW * 32) : "memory");
}

__device__ __forceinline__ uint32_t gv_lds32(uint32_t a)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

/* x's B fragments of k tile kt straight from global memory, as 32-bit
 * words when x_vec (16-byte aligned x, k % 8 == 0: every pair in bounds
 * together), else load_x (gemm_fused.cuh). Before the stage's wait, so their latency
 * overlaps it (x is L1 / L2 resident: every CTA reads it). */
template <int NT>
__device__ __forceinline__ void gv_x_early(const Params &p, int kt, int lane,
                                           uint32_t (&xb)[NT][8])
{
    const int g = lane >> 2, t = lane & 3;
    if (!p.x_vec) {
        load_x<NT>(p, kt, g, t, xb);
        return;
    }
    const int c0 = kt * 64 + 2 * t;
#pragma unroll
    for (int q = 0; q < NT; q++) {
        const int mm = q * 8 + g;
        const uint32_t *row =
            reinterpret_cast<const uint32_t *>(p.x) + (size_t)(mm < p.m ? mm : 0) * (p.k / 2);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c = c0 + 16 * (i >> 1) + 8 * (i & 1);
            xb[q][i] = mm < p.m && c < p.k ? __ldg(row + c / 2) : 0u;
        }
    }
}

/* Consumer warp w's k tile (kw = w) of the stage at st (shared address
 * st_a): its GV_R row tiles decoded and multiplied into acc. The x part of
 * k tile kw is at st_a + kw * XPART: register i of the B fragment is 16-byte
 * chunk i of row 8 q + g, word t, chunk index XORed with the row (the
 * 128-byte swizzle; gemm_skinny.cu x_lane / x_chunk). */
template <int F, int NT>
__device__ __forceinline__ void gv_consume(const Params &p, float (&acc)[GV_R][NT][4],
                                           uint32_t (&xb)[NT][8], const unsigned char *st,
                                           uint32_t st_a, int kw, int kt, int lane)
{
    using S = GvStage<F, NT>;
    const int g = lane >> 2, t = lane & 3;
    if (!GV_XSMEM) {
        /* xb was loaded before the stage's wait (gv_x_early) */
    } else if (p.x_vec) {
        /* rows of x from m on are stale bytes (the boxes have m rows): they
         * reach only the sums of those rows, which nobody reads, so no lane
         * needs a branch */
        const uint32_t xl = st_a + (uint32_t)(kw * S::XPART + g * 144 + 4 * t);
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int q = 0; q < NT; q++)
                xb[q][i] = gv_lds32((xl ^ (16u * i)) + 1024u * q);
    } else {
        load_x<NT>(p, kt, g, t, xb);
    }
#pragma unroll
    for (int r = 0; r < GV_R; r++) {
        const int tile = r * GV_CW + kw; /* [row tile][k tile] in the boxes */
        const uint4 wc = *reinterpret_cast<const uint4 *>(st + S::XBYTES + tile * 512 + lane * 16);
        uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
        if (S::WIDE)
            sc = *reinterpret_cast<const uint2 *>(st + S::SCALES + tile * 64 + g * 8);
        else
            sc.x = *reinterpret_cast<const uint32_t *>(st + S::SCALES + tile * 32 + g * 4);
        if (F == FMT_MXPLUS)
            cr.x = *reinterpret_cast<const uint32_t *>(st + S::CORR + tile * 32 + g * 4);
        if (F == FMT_NVPLUS)
            cr = *reinterpret_cast<const uint2 *>(st + S::CORR + tile * 64 + g * 8);
        uint32_t a[4][4];
        decode_tile<F>(wc, sc, cr, t, p.mx_fold, a);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < NT; q++)
                mma_bf16(acc[r][q], a[j], xb[q][2 * j], xb[q][2 * j + 1]);
    }
}

} // namespace bfpgemm
