/* gemm.cu - the GPU matmul API: packed weights in caller-owned buffers
 * (pack: prepack on the host, copy to the device; view: check the header,
 * record pointers, make the tensor maps), the path choice, the split-K plans
 * under a tuning, and the cuBLAS path for large m (W decoded from the
 * prepacked arrays to bf16 in the workspace, gemm_unpack.cu, then one bf16
 * GEMM per chunk on the calling thread's handle). */
#include "bfp.h"
#include "gemm_internal.h"
#include "matmul_image.h"

#include <cublas_v2.h>
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

using namespace bfpgemm;

struct bfp_cuda_weight {
    void *buf;                    /* the packed buffer (matmul_image.h) */
    int owns;                     /* buf is bfp_cuda_weight_upload's: freed with the view */
    bfp_format fmt;
    int kind;                     /* FMT_* */
    size_t n, k, tiles_n, tiles_k;
    void *codes, *scales, *corr;  /* prepacked, device */
    float ts;                     /* NVFP4 s_enc (host copy); the cuBLAS path decodes
                                     W * s_enc (exact in bf16) and takes alpha = 1 / s_enc */
    int mx_fold;                  /* see gemm_fused.cuh: operands carry 2^-fold */
    int sms;
    size_t small_ws;              /* workspace bytes the kernel paths may use at
                                     m <= FUSED_MAX_M (small_ws_bytes) */
    SkinnyMaps sk[2];             /* the skinny kernel's maps of codes, scales and
                                     corr for R = 4 ([0]) and R = 2 ([1]); x
                                     is filled in per call */
    WgmmaMaps wg[2];              /* the wgmma kernel's, 2 and 3 consumer warpgroups
                                     (R = wg_row_tiles(2), wg_row_tiles(3)) */
    SkinnyMaps gv;                /* the GEMV kernel's (GV_R row tiles by GV_CW k
                                     tiles); x is filled in per call */
    int wgmma_ok;                 /* the device runs sm_90a code (Hopper) */
};

namespace {

/* Rows of x above which AUTO dequantizes W and calls cuBLAS. */
constexpr size_t FUSED_MAX_M = 32; /* measured: see docs/gemm.md */
constexpr size_t CUBLAS_WS = (size_t)32 << 20; /* cuBLAS's own workspace */
constexpr size_t DEQ_CHUNK_BYTES = (size_t)256 << 20;
const bfp_matmul_tuning DEFAULTS = {}; /* every field 0: the measured defaults */

/* the matmul kind of a format's row in format_defs.h (BFP_MM_NONE: none) */
int kind_of(bfp_format f)
{
    switch (f) {
#define X(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, ...) case BFP_##ID: return BFP_MM_##MM;
        BFP_FORMAT_LIST(X)
#undef X
    }
    return BFP_MM_NONE;
}

size_t align256(size_t v) { return (v + 255) & ~(size_t)255; }

/* cuTensorMapEncodeTiled from the driver through the runtime (no libcuda
 * link); NULL when the driver lacks it */
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn; /* the same value every time: a race is harmless */
    if (!fn) {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !f)
            return nullptr;
        fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
    }
    return fn;
}

/* A map of rec-byte records [tiles_n][tiles_k] at base, as a 3-D tensor
 * {rec / 8, tiles_k, tiles_n} of 8-byte elements, with boxes of kts k tiles
 * (1: the skinny kernel's unit) by r row tiles; records past tiles_k or
 * tiles_n read as zeros */
bool encode_records(CUtensorMap *map, void *base, size_t rec, size_t tiles_n, size_t tiles_k,
                    int r, int kts = 1)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
    const cuuint64_t dim[3] = {rec / 8, tiles_k, tiles_n};
    const cuuint64_t stride[2] = {rec, rec * tiles_k}; /* bytes, of dims 1 and 2 */
    const cuuint32_t box[3] = {(cuuint32_t)(rec / 8), (cuuint32_t)kts, (cuuint32_t)r};
    const cuuint32_t estride[3] = {1, 1, 1};
    return enc && enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, base, dim, stride, box, estride,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}


/* The skinny kernel's maps of a weight's codes, scales and corr, for
 * R = 4 and 2 */
bool encode_weight_maps(bfp_cuda_weight *w)
{
    const size_t scb = (size_t)tile_scale_bytes(w->kind), crb = (size_t)tile_corr_bytes(w->kind);
    for (int i = 0; i < 2; i++) {
        const int r = skinny_rows(i == 0 ? 1 : 4);
        SkinnyMaps &sm = w->sk[i];
        if (!encode_records(&sm.codes, w->codes, 512, w->tiles_n, w->tiles_k, r) ||
            !encode_records(&sm.scales, w->scales, scb, w->tiles_n, w->tiles_k, r) ||
            (crb && !encode_records(&sm.corr, w->corr, crb, w->tiles_n, w->tiles_k, r)))
            return false;
    }
    SkinnyMaps &gm = w->gv;
    if (!encode_records(&gm.codes, w->codes, 512, w->tiles_n, w->tiles_k, GV_R, GV_CW) ||
        !encode_records(&gm.scales, w->scales, scb, w->tiles_n, w->tiles_k, GV_R, GV_CW) ||
        (crb && !encode_records(&gm.corr, w->corr, crb, w->tiles_n, w->tiles_k, GV_R, GV_CW)))
        return false;
    for (int c = 2; c <= 3; c++) {
        WgmmaMaps &wm = w->wg[c - 2];
        const int r = wg_row_tiles(c);
        if (!encode_records(&wm.codes, w->codes, 512, w->tiles_n, w->tiles_k, r) ||
            !encode_records(&wm.scales, w->scales, scb, w->tiles_n, w->tiles_k, r) ||
            (crb && !encode_records(&wm.corr, w->corr, crb, w->tiles_n, w->tiles_k, r)))
            return false;
    }
    return true;
}

struct FusedPlan {
    int nt, mchunks, splits, tiles_per_split, chunk_tiles;
    unsigned ctas_n;
    size_t ws_bytes, ctr_offset;
};

FusedPlan plan_fused(const bfp_cuda_weight *w, size_t m, const bfp_matmul_tuning &t)
{
    FusedPlan P;
    size_t mc = m < 128 ? m : 128;
    P.nt = 1;
    while ((size_t)P.nt * 8 < mc)
        P.nt *= 2;
    P.mchunks = (int)((m + 8 * P.nt - 1) / (8 * P.nt));
    P.ctas_n = (unsigned)((w->tiles_n + WARPS - 1) / WARPS);
    /* split K so that the grid fills about 8 CTAs per SM in whole waves;
     * each split takes whole groups of 4 tiles */
    size_t ctas = (size_t)P.ctas_n * (size_t)P.mchunks;
    const int per_sm = t.ctas_per_sm ? t.ctas_per_sm : 8;
    size_t want = (size_t)w->sms * (size_t)per_sm / ctas;
    size_t groups = (w->tiles_k + 3) / 4;
    if (want > groups)
        want = groups;
    if (want < 1)
        want = 1;
    size_t groups_per_split = (groups + want - 1) / want;
    P.tiles_per_split = (int)(groups_per_split * 4);
    P.splits = (int)((w->tiles_k + P.tiles_per_split - 1) / P.tiles_per_split);
    /* stage x's columns of a split at once when they fit the budget */
    size_t fit = (size_t)SMEM_X_BUDGET / ((size_t)8 * P.nt * 64 * 2) / 4 * 4;
    if (fit < 4)
        fit = 4;
    P.chunk_tiles = (int)(fit < (size_t)P.tiles_per_split ? fit : (size_t)P.tiles_per_split);
    P.ctr_offset = align256(m * w->n * sizeof(float));
    P.ws_bytes = P.splits > 1 ? P.ctr_offset + align256(ctas * sizeof(unsigned)) : 0;
    return P;
}

/* The skinny kernel's plan (m <= FUSED_MAX_M): every warp of a resident
 * grid takes upw units of work, at least MIN_UPW. */
constexpr size_t MIN_UPW = 2;

struct SkinnyPlan {
    int nt, units, upw;
    size_t ws_bytes, ctr_offset;
};

bool skinny_fits(const bfp_cuda_weight *w, size_t m)
{
    return m <= FUSED_MAX_M && w->tiles_n * w->tiles_k <= (size_t)INT_MAX / 2;
}

SkinnyPlan plan_skinny(const bfp_cuda_weight *w, size_t m, const bfp_matmul_tuning &t)
{
    SkinnyPlan P;
    P.nt = m <= 8 ? 1 : m <= 16 ? 2 : 4;
    size_t rows = (size_t)skinny_rows(P.nt);
    size_t bands = (w->tiles_n + rows - 1) / rows;
    P.units = (int)(bands * w->tiles_k);
    const int cap = t.warps_per_sm ? t.warps_per_sm : 64;
    int per_sm = skinny_resident_warps(w->kind, P.nt);
    size_t warps = (size_t)w->sms * (size_t)(per_sm < cap ? per_sm : cap);
    size_t upw = ((size_t)P.units + warps - 1) / warps;
    P.upw = (int)(upw < MIN_UPW ? MIN_UPW : upw);
    P.ctr_offset = align256(m * w->n * sizeof(float));
    bool split = P.upw % w->tiles_k != 0; /* some warp ends inside a band */
    P.ws_bytes = split ? P.ctr_offset + align256(bands * sizeof(unsigned)) : 0;
    return P;
}

/* The GEMV kernel's plan (gemm_gemv.cu, m <= GEMV_MAX_M): units of GV_R
 * row tiles by GV_CW k tiles. By default a grid of every CTA the SMs hold
 * at once (at most one per unit), each CTA an equal contiguous run; the
 * workspace (m x n fp32 sums, then a counter per group) only when a run
 * starts or ends inside a group. With tuning gemv_split = 2, clusters
 * (GemvArgs::cluster) that add their sums in shared memory: no workspace
 * (opt-in: faster at one or two groups per cluster, slower beyond, and
 * racecheck reports hazards on the exchange; docs/gemm.md). */
constexpr size_t GEMV_MAX_M = 16;

struct GemvPlan {
    int nt, groups, chunks, units, cluster;
    unsigned grid;
    size_t ws_bytes, ctr_offset;
};

bool gemv_fits(const bfp_cuda_weight *w, size_t m)
{
    return m <= GEMV_MAX_M && w->tiles_n * w->tiles_k <= (size_t)INT_MAX / 2;
}

/* The cluster plan: the size S (1, 2, 4 or 8, at most the chunks when above
 * 1) whose busiest SM has the fewest units (iterations x chunks per rank x
 * CTAs per SM), ties to the most CTAs; as many clusters as the GPU holds at
 * once, at most one per group. false when the runtime gives no capacity. */
static bool plan_gemv_cluster(const bfp_cuda_weight *w, GemvPlan *P)
{
    long long best = -1, best_ctas = 0;
    for (int S = 1; S <= 8; S *= 2) {
        if (S > 1 && S > P->chunks)
            break;
        const long long cap = gemv_cluster_capacity(w->kind, P->nt, S);
        if (cap < 1)
            continue;
        const long long ncl = cap < P->groups ? cap : P->groups;
        const long long iters = (P->groups + ncl - 1) / ncl, per_rank = (P->chunks + S - 1) / S;
        const long long ctas = ncl * S, per_sm = (ctas + w->sms - 1) / w->sms;
        const long long cost = iters * per_rank * per_sm;
        if (best < 0 || cost < best || (cost == best && ctas > best_ctas)) {
            best = cost, best_ctas = ctas;
            P->cluster = S;
            P->grid = (unsigned)ctas;
        }
    }
    return best >= 0;
}

GemvPlan plan_gemv(const bfp_cuda_weight *w, size_t m, const bfp_matmul_tuning &t)
{
    GemvPlan P;
    P.nt = m <= 8 ? 1 : 2;
    P.groups = (int)((w->tiles_n + GV_R - 1) / GV_R);
    P.chunks = (int)((w->tiles_k + GV_CW - 1) / GV_CW);
    P.units = P.groups * P.chunks;
    P.cluster = 0;
    if (t.gemv_split == 2 && plan_gemv_cluster(w, &P)) {
        P.ws_bytes = P.ctr_offset = 0;
        return P;
    }
    size_t ctas = (size_t)w->sms * (size_t)gemv_resident_ctas(w->kind, P.nt);
    P.grid = (unsigned)(ctas < (size_t)P.units ? ctas : (size_t)P.units);
    /* some run may start or end inside a group (an overestimate: the
     * kernel decides per run, and then needs the workspace) */
    const bool split = P.chunks > 1 && !(P.units % P.grid == 0 &&
                                         (P.units / P.grid) % P.chunks == 0);
    P.ctr_offset = align256(m * w->n * sizeof(float));
    P.ws_bytes = split ? P.ctr_offset + align256((size_t)P.groups * sizeof(unsigned)) : 0;
    return P;
}

constexpr size_t MIN_SPLIT_TILES = 4; /* k tiles per split at least */
constexpr int MAX_SPLITS = 16;

/* K splits for a grid of ctas CTAs, one per SM: the count that fills the
 * last wave best, a larger one taken only for 3% more of it (every split
 * adds an m x n fp32 slice to write, read and zero). From two waves on no
 * split: the last wave's idle SMs cost less than the slices (docs/gemm.md,
 * the wgmma kernel's epilogue). */
size_t pick_splits(size_t ctas, size_t sms, size_t tiles_k)
{
    if (ctas >= 2 * sms)
        return 1;
    auto fill = [&](size_t s) {
        size_t c = ctas * s;
        return (double)c / (double)(((c + sms - 1) / sms) * sms);
    };
    size_t smax = tiles_k / MIN_SPLIT_TILES;
    if (smax > (size_t)MAX_SPLITS)
        smax = MAX_SPLITS;
    size_t best = 1;
    for (size_t s = 2; s <= smax; s++)
        if (fill(s) > fill(best) + 0.03)
            best = s;
    return best;
}

/* The wgmma kernel's plan: CTAs of wg_row_tiles(consumers) row tiles of W
 * by bn rows of x (the tuning's wgmma_bn; 0: 64 up to m = 64, 128 up to
 * WG_BN128_MAX_M, then 256 with 2 consumers when that still makes at least
 * half as many CTAs as SMs), K split by pick_splits (one CTA per SM);
 * consumers from the tuning (0: 2) */
struct WgPlan {
    int bn, consumers, mchunks, splits, tiles_per_split;
    unsigned ctas_n;
    size_t ws_bytes, ctr_offset, slice_offset;
};

bool wgmma_fits(size_t m) { return (m + 63) / 64 <= 65535; }

/* Above this m the default takes CTAs of 256 rows of x when they make at
 * least half as many CTAs as SMs: on an H100 they beat 128-row CTAs at
 * m = 512..4096 and lost at m = 128 and 256, and where they left fewer CTAs
 * than that (bench/results/h100-wgmma-bn256-5845ade.json,
 * h100-wgmma-auto-f974e82.json; docs/gemm.md). */
constexpr size_t WG_BN128_MAX_M = 256;

WgPlan plan_wgmma(const bfp_cuda_weight *w, size_t m, const bfp_matmul_tuning &t)
{
    WgPlan P;
    P.consumers = t.wgmma_consumers ? t.wgmma_consumers : 2;
    const size_t rt = (size_t)wg_row_tiles(P.consumers);
    P.ctas_n = (unsigned)((w->tiles_n + rt - 1) / rt);
    const bool wide = m > WG_BN128_MAX_M && P.consumers == 2 &&
                      2 * (size_t)P.ctas_n * ((m + 255) / 256) >= (size_t)w->sms;
    P.bn = t.wgmma_bn ? t.wgmma_bn : m <= 64 ? 64 : wide ? 256 : 128;
    P.mchunks = (int)((m + P.bn - 1) / P.bn);
    const size_t ctas = (size_t)P.ctas_n * (size_t)P.mchunks;
    size_t best = pick_splits(ctas, (size_t)w->sms, w->tiles_k);
    P.tiles_per_split = (int)((w->tiles_k + best - 1) / best);
    P.splits = (int)((w->tiles_k + P.tiles_per_split - 1) / P.tiles_per_split);
    /* Split K: the splits' slices after the front that the small-m kernels
     * keep zero (each split writes its whole slice, so nothing needs
     * zeroing before or after), the tiles' counters in that front where
     * they fit (the last CTA of a tile resets its counter, so the front
     * stays zero and the call needs no memset), else after the slices,
     * zeroed by the call */
    const size_t slices = align256((size_t)P.splits * m * w->n * sizeof(float));
    const size_t ctr_bytes = align256(ctas * sizeof(unsigned));
    P.slice_offset = align256(w->small_ws);
    P.ctr_offset = ctr_bytes <= w->small_ws ? 0 : P.slice_offset + slices;
    P.ws_bytes = P.splits == 1 ? 0 : P.ctr_offset ? P.ctr_offset + ctr_bytes : P.slice_offset + slices;
    return P;
}

size_t deq_chunk_rows(const bfp_cuda_weight *w)
{
    size_t rows = DEQ_CHUNK_BYTES / (2 * w->k);
    rows &= ~(size_t)15;
    if (rows < 16)
        rows = 16;
    return rows < w->n ? rows : w->n;
}

/* The workspace's front: what the fused and skinny kernels use at any
 * m <= FUSED_MAX_M under the default tuning. They rely on it being zero (each call leaves it zero
 * again), so the dequantize path, which writes W and cuBLAS's scratch into
 * the workspace, starts after it: AUTO may switch between decode-sized and
 * large m on one workspace. Kernel paths at larger m (and a tuning that
 * needs more than the front) zero their own region first
 * (zero_ws_first). */
size_t small_ws_bytes(const bfp_cuda_weight *w)
{
    size_t most = 0;
    for (size_t m = 1; m <= FUSED_MAX_M; m++) {
        size_t b = plan_fused(w, m, DEFAULTS).ws_bytes;
        if (skinny_fits(w, m) && plan_skinny(w, m, DEFAULTS).ws_bytes > b)
            b = plan_skinny(w, m, DEFAULTS).ws_bytes;
        if (gemv_fits(w, m) && plan_gemv(w, m, DEFAULTS).ws_bytes > b)
            b = plan_gemv(w, m, DEFAULTS).ws_bytes;
        most = b > most ? b : most;
    }
    return align256(most);
}

size_t deq_ws_bytes(const bfp_cuda_weight *w)
{
    return w->small_ws + align256(deq_chunk_rows(w) * w->k * 2) + CUBLAS_WS;
}

__global__ void fill_bias(__nv_bfloat16 *y, const __nv_bfloat16 *bias, size_t m, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m * n)
        y[i] = bias[i % n];
}

enum Kernel { K_FUSED, K_SKINNY, K_WGMMA, K_GEMV };

bfp_status run_fused(const bfp_cuda_weight *w, const void *x, size_t m, const void *bias,
                     void *y, void *ws, size_t ws_bytes, Kernel kern,
                     const bfp_matmul_tuning &t, cudaStream_t s)
{
    const bool skinny = kern == K_SKINNY, wgk = kern == K_WGMMA;
    const bool gemv = kern == K_GEMV;
    FusedPlan P = {};
    SkinnyPlan S = {};
    WgPlan G = {};
    GemvPlan V = {};
    if (gemv)
        V = plan_gemv(w, m, t);
    else if (skinny)
        S = plan_skinny(w, m, t);
    else if (wgk)
        G = plan_wgmma(w, m, t);
    else
        P = plan_fused(w, m, t);
    const size_t need = gemv     ? V.ws_bytes
                        : skinny ? S.ws_bytes
                        : wgk    ? G.ws_bytes
                                 : P.ws_bytes;
    if (need > ws_bytes || (need && !ws))
        return BFP_ERR_ARG;
    /* beyond the front that every path keeps zero (small_ws_bytes), the
     * dequantize path may have left W: start from zeros (the wgmma kernel:
     * only its counters, when they are not in the front) */
    const size_t zero_from = !wgk ? 0 : G.ctr_offset ? G.ctr_offset : need;
    const bool zero_ws_first = wgk || m > FUSED_MAX_M || need > w->small_ws;
    if (need > zero_from && zero_ws_first &&
        cudaMemsetAsync(static_cast<char *>(ws) + zero_from, 0, need - zero_from, s) !=
            cudaSuccess)
        return BFP_ERR_DEVICE;
    Params p;
    p.codes = static_cast<const uint4 *>(w->codes);
    p.scales = static_cast<const uint8_t *>(w->scales);
    p.corr = static_cast<const uint8_t *>(w->corr);
    p.x = static_cast<const __nv_bfloat16 *>(x);
    p.bias = static_cast<const __nv_bfloat16 *>(bias);
    p.y = static_cast<__nv_bfloat16 *>(y);
    p.ws = static_cast<float *>(ws);
    const size_t ctr = gemv     ? V.ctr_offset
                       : skinny ? S.ctr_offset
                       : wgk  ? G.ctr_offset
                              : P.ctr_offset;
    p.counters = need ? reinterpret_cast<unsigned *>(static_cast<char *>(ws) + ctr) : nullptr;
    p.ts = w->ts;
    int fold = w->kind == FMT_NV || w->kind == FMT_NVPLUS ? NV_FOLD
               : w->kind == FMT_HIF4                      ? HIF4_FOLD
                                                          : w->mx_fold;
    p.mx_fold = w->mx_fold;
    p.post = ldexpf(1.0f, fold);
    p.use_ts = w->kind == FMT_NV || w->kind == FMT_NVPLUS;
    p.n = (int)w->n;
    p.k = (int)w->k;
    p.m = (int)m;
    p.tiles_n = (int)w->tiles_n;
    p.tiles_k = (int)w->tiles_k;
    p.tiles_per_split = P.tiles_per_split;
    p.splits = P.splits;
    p.chunk_tiles = P.chunk_tiles;
    p.xs_ld = P.chunk_tiles * 64 + 8;
    p.x_vec = ((uintptr_t)x % 16 == 0) && w->k % 8 == 0;
    if (wgk) {
        p.wg_pipe = t.wgmma_serial == 1 ? 0 : t.wgmma_serial == 2 ? 2 : 1;
        p.tiles_per_split = G.tiles_per_split;
        p.splits = G.splits;
        p.ws = reinterpret_cast<float *>(static_cast<char *>(ws) + G.slice_offset);
        p.chunk_tiles = 0;
        p.xs_ld = 0;
        WgmmaMaps maps = w->wg[G.consumers - 2];
        if (p.x_vec && !encode_x(&maps.x, x, w->k, m, (size_t)G.bn))
            return BFP_ERR_DEVICE;
        dim3 grid(G.ctas_n, (unsigned)G.splits, (unsigned)G.mchunks);
        return launch_wgmma(w->kind, p, maps, G.bn, G.consumers, grid, s) == cudaSuccess
                   ? BFP_OK
                   : BFP_ERR_DEVICE;
    }
    if (gemv) {
        p.units = V.units;
        p.upw = 0;
        SkinnyMaps maps = w->gv;
        if (p.x_vec && gemv_stages_x() && !encode_x(&maps.x, x, w->k, m, m))
            return BFP_ERR_DEVICE;
        GemvArgs a = {V.units, V.chunks};
        a.groups = V.groups;
        a.cluster = V.cluster;
        return launch_gemv(w->kind, p, maps, a, V.nt, V.grid, t.gemv_pdl > 0, s) == cudaSuccess
                   ? BFP_OK
                   : BFP_ERR_DEVICE;
    }
    if (skinny) {
        p.units = S.units;
        p.upw = S.upw;
        SkinnyMaps maps = w->sk[skinny_rows(S.nt) == 4 ? 0 : 1];
        if (p.x_vec && !encode_x(&maps.x, x, w->k, m, m))
            return BFP_ERR_DEVICE;
        return launch_skinny(w->kind, p, maps, S.nt, t.post_max_m, s) == cudaSuccess
                   ? BFP_OK
                   : BFP_ERR_DEVICE;
    }
    dim3 grid(P.ctas_n, (unsigned)P.splits, (unsigned)P.mchunks);
    return launch_fused(w->kind, p, P.nt, grid, s) == cudaSuccess ? BFP_OK : BFP_ERR_DEVICE;
}

/* The calling thread's cuBLAS handle for device dev, made on first use and
 * destroyed when the thread ends. Per thread, so that no lock is needed and
 * a call's cublasSetStream / cublasSetWorkspace / cublasGemmEx sequence
 * cannot interleave with another thread's on the same handle (docs/gemm.md,
 * "Packed weights"); per device, as a handle belongs to the device current
 * when it was made. */
constexpr int MAX_DEVICES = 64;
struct ThreadBlas {
    cublasHandle_t h[MAX_DEVICES] = {};
    ~ThreadBlas()
    {
        for (cublasHandle_t b : h)
            if (b)
                (void)cublasDestroy(b); /* at thread exit: nothing to report to */
    }
};

cublasHandle_t thread_blas()
{
    static thread_local ThreadBlas tb;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEVICES)
        return nullptr;
    if (!tb.h[dev] && cublasCreate(&tb.h[dev]) != CUBLAS_STATUS_SUCCESS) {
        tb.h[dev] = nullptr;
        return nullptr;
    }
    return tb.h[dev];
}

bfp_status run_cublas(const bfp_cuda_weight *w, const void *x, size_t m, const void *bias,
                      void *y, void *ws, size_t ws_bytes, cudaStream_t s)
{
    if (!ws || ws_bytes < deq_ws_bytes(w))
        return BFP_ERR_ARG;
    size_t chunk = deq_chunk_rows(w);
    char *wbuf = static_cast<char *>(ws) + w->small_ws; /* clear of the kernels' front */
    cublasHandle_t blas = thread_blas();
    if (!blas || cublasSetStream(blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(blas, wbuf + align256(chunk * w->k * 2), CUBLAS_WS) !=
            CUBLAS_STATUS_SUCCESS)
        return BFP_ERR_DEVICE;
    /* NVFP4: W is dequantized without its tensor scale (the E2M1 x UE4M3
     * products are exact in bf16; divided by s_enc, they were rounded to bf16
     * and a sum that cancels showed it) and the sums scaled by 1 / s_enc */
    float alpha = 1.0f / w->ts, beta = 0.0f;
    if (bias) {
        size_t total = m * w->n;
        fill_bias<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(
            static_cast<__nv_bfloat16 *>(y), static_cast<const __nv_bfloat16 *>(bias), m, w->n);
        if (cudaGetLastError() != cudaSuccess)
            return BFP_ERR_DEVICE;
        beta = 1.0f;
    }
    for (size_t r0 = 0; r0 < w->n; r0 += chunk) { /* chunk: a multiple of 16 rows */
        size_t rows = w->n - r0 < chunk ? w->n - r0 : chunk;
        if (launch_unpack(w->kind, w->codes, w->scales, w->corr, (int)w->tiles_k, (int)w->n,
                          (int)w->k, (int)(r0 / 16), (int)((rows + 15) / 16), wbuf,
                          false, 1.0f, s) != cudaSuccess)
            return BFP_ERR_DEVICE;
        /* column-major view: y^T[n, m] = W[n, k] . x^T[k, m] */
        cublasStatus_t cs = cublasGemmEx(
            blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)m, (int)w->k, &alpha, wbuf,
            CUDA_R_16BF, (int)w->k, x, CUDA_R_16BF, (int)w->k, &beta,
            static_cast<__nv_bfloat16 *>(y) + r0, CUDA_R_16BF, (int)w->n, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS)
            return BFP_ERR_DEVICE;
    }
    return BFP_OK;
}

/* A zeroed view, aligned for its tensor maps (CUtensorMap: alignas(128)) */
bfp_cuda_weight *view_alloc()
{
    const size_t hbytes = (sizeof(bfp_cuda_weight) + alignof(bfp_cuda_weight) - 1) /
                          alignof(bfp_cuda_weight) * alignof(bfp_cuda_weight);
    void *h = aligned_alloc(alignof(bfp_cuda_weight), hbytes);
    if (h)
        memset(h, 0, hbytes);
    return static_cast<bfp_cuda_weight *>(h);
}

bool aligned_buf(const void *p) { return (uintptr_t)p % BFP_WIMG_ALIGN == 0; }

/* the planes a weight of fmt needs are there (fmt is a matmul format) */
bool planes_ok(bfp_format fmt, const bfp_const_planes *w)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    return w && w->codes && w->scales && (!f->meta_bytes || w->meta) &&
           (!f->has_tensor_scale || w->tensor_scale);
}

} // namespace

bool bfpgemm::encode_2d(CUtensorMap *map, CUtensorMapDataType dt, const void *base,
                        uint64_t cols, uint64_t rows, uint64_t row_bytes, uint32_t box_cols,
                        uint32_t box_rows, CUtensorMapSwizzle swizzle)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
    const cuuint64_t dim[2] = {cols, rows};
    const cuuint64_t stride[1] = {row_bytes};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t estride[2] = {1, 1};
    return enc && enc(map, dt, 2, const_cast<void *>(base), dim, stride, box, estride,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

size_t bfpgemm::weight_k(const bfp_cuda_weight *w) { return w->k; }
size_t bfpgemm::weight_zero_front(const bfp_cuda_weight *w) { return w->small_ws; }

bool bfpgemm::current_device(int *sms, bool *sm90)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    *sm90 = major == 9 && minor == 0;
    return true;
}

/* gemm_internal.h */
bool bfpgemm::encode_x(CUtensorMap *map, const void *x, size_t k, size_t m, size_t box_rows)
{
    return encode_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, k, m, k * 2, 64,
                     (uint32_t)box_rows, CU_TENSOR_MAP_SWIZZLE_128B);
}

bool bfpgemm::encode_expert_records(CUtensorMap *map, const void *base, size_t rec,
                                    size_t tiles_n, size_t tiles_k, size_t experts,
                                    size_t expert_stride, int r, int kts)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
    const cuuint64_t dim[4] = {rec / 8, tiles_k, tiles_n, experts};
    const cuuint64_t stride[3] = {rec, rec * tiles_k, expert_stride}; /* bytes, dims 1..3 */
    const cuuint32_t box[4] = {(cuuint32_t)(rec / 8), (cuuint32_t)kts, (cuuint32_t)r, 1};
    const cuuint32_t estride[4] = {1, 1, 1, 1};
    return enc && enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT64, 4, const_cast<void *>(base), dim,
                      stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

extern "C" {

bfp_status bfp_cuda_weight_pack(bfp_format fmt, const bfp_const_planes *w, size_t n, size_t k,
                                void *d_buf, size_t bytes, void *stream)
{
    bfp_wimg_layout L;
    bfp_status st = bfp_wimg_layout_get(fmt, n, k, &L);
    if (st != BFP_OK)
        return st;
    if (!planes_ok(fmt, w) || !d_buf || !aligned_buf(d_buf) || bytes < L.total)
        return BFP_ERR_ARG;
    if (!bfp_cuda_available())
        return BFP_ERR_DEVICE;
    void *img = malloc(L.total);
    if (!img)
        return BFP_ERR_NOMEM;
    st = bfp_cuda_weight_pack_host(fmt, w, n, k, img, L.total);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    /* the image is freed below: wait for the copy (an offline step) */
    if (st == BFP_OK && (cudaMemcpyAsync(d_buf, img, L.total, cudaMemcpyHostToDevice, s) !=
                             cudaSuccess ||
                         cudaStreamSynchronize(s) != cudaSuccess))
        st = BFP_ERR_DEVICE;
    free(img);
    return st;
}

bfp_status bfp_cuda_weight_view(bfp_format fmt, size_t n, size_t k, const void *d_buf,
                                size_t bytes, bfp_cuda_weight **out)
{
    if (out)
        *out = nullptr;
    bfp_wimg_layout L;
    bfp_status st = bfp_wimg_layout_get(fmt, n, k, &L);
    if (st != BFP_OK)
        return st;
    if (!out || !d_buf || !aligned_buf(d_buf) || bytes < L.total)
        return BFP_ERR_ARG;
    if (!bfp_cuda_available())
        return BFP_ERR_DEVICE;
    uint8_t hdr[BFP_WIMG_ALIGN];
    if (cudaMemcpy(hdr, d_buf, sizeof hdr, cudaMemcpyDeviceToHost) != cudaSuccess)
        return BFP_ERR_DEVICE;
    int fold = 0;
    float ts = 1.0f;
    st = bfp_wimg_header_read(hdr, fmt, n, k, bytes, &fold, &ts);
    if (st != BFP_OK)
        return st;
    bfp_cuda_weight *h = view_alloc();
    if (!h)
        return BFP_ERR_NOMEM;
    char *b = static_cast<char *>(const_cast<void *>(d_buf)); /* kernels only read it */
    h->buf = b;
    h->fmt = fmt;
    h->kind = kind_of(fmt);
    h->n = n;
    h->k = k;
    h->tiles_n = (n + 15) / 16;
    h->tiles_k = (k + 63) / 64;
    h->ts = ts;
    h->mx_fold = fold;
    h->codes = b + L.codes;
    h->scales = b + L.scales;
    h->corr = L.ps.corr ? b + L.corr : nullptr;
    bool sm90 = false;
    if (!current_device(&h->sms, &sm90) || !encode_weight_maps(h)) {
        free(h);
        return BFP_ERR_DEVICE;
    }
    h->small_ws = small_ws_bytes(h);
    h->wgmma_ok = sm90;
    *out = h;
    return BFP_OK;
}

bfp_status bfp_cuda_weight_upload(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                  size_t k, bfp_cuda_weight **out)
{
    size_t bytes = 0;
    bfp_status st = bfp_cuda_weight_packed_size(fmt, n, k, &bytes);
    if (st != BFP_OK)
        return st;
    if (!out || !planes_ok(fmt, w))
        return BFP_ERR_ARG;
    *out = nullptr;
    if (!bfp_cuda_available())
        return BFP_ERR_DEVICE;
    void *buf = nullptr;
    if (cudaMalloc(&buf, bytes) != cudaSuccess)
        return BFP_ERR_DEVICE;
    st = bfp_cuda_weight_pack(fmt, w, n, k, buf, bytes, nullptr);
    if (st == BFP_OK)
        st = bfp_cuda_weight_view(fmt, n, k, buf, bytes, out);
    if (st != BFP_OK) {
        (void)cudaFree(buf); /* the error reported is the first one */
        return st;
    }
    (*out)->owns = 1;
    return BFP_OK;
}

void bfp_cuda_weight_free(bfp_cuda_weight *w)
{
    if (!w)
        return;
    if (w->owns)
        (void)cudaFree(w->buf); /* a free has no one to report to */
    free(w);
}

/* Measured on the H200 (docs/gemm.md, bench/results/h200-gemm.json), with
 * the skinny kernel's tensor-map copies and 3 stages per warp: at m = 1 and
 * 16 it took 15-53% less time than the fused one on weights of 28672 x 8192
 * and 8192 x 28672 in every format (NVFP4+ included); at 8192 x 8192, 3-10%
 * less at m = 16 (two runs) but 2-8% more at m = 1. m = 9..15 run the same
 * kernels as m = 16 (two n8 tiles of x). GEMV comes first at m = 2..16
 * (below), so at m <= 16 this rule serves m = 1 and weights GEMV cannot take. */
constexpr double SKINNY_MIN_ELEMS = 134217728.0;    /* 2^27: twice 8192 x 8192 */
constexpr double SKINNY_MIN_ELEMS_NT2 = 67108864.0; /* 2^26, m = 9..16 */

/* Rows of x up to which AUTO takes the wgmma kernel above FUSED_MAX_M
 * (Hopper only): where it beat dequant + cuBLAS on every measured shape, up
 * to 256 with 128-row CTAs on the H200 (bench/results/h200-gemm-wgmma.json),
 * to 1024 with the plan's CTAs on an H100; above, results were mixed
 * (bench/results/h100-wgmma-auto-f974e82.json, docs/gemm.md). */
constexpr size_t WGMMA_MAX_M = 1024;

/* Above WGMMA_MAX_M the wgmma kernel still beat dequant + cuBLAS where K
 * is at least N, and lost where N is larger (two H100 runs; docs/gemm.md,
 * "AUTO above m = 1024"). So AUTO takes it there when K >= N and its plan
 * needs no K split (no workspace: bfp_cuda_matmul_workspace_size_max stays
 * the largest over m <= WGMMA_MAX_M and the dequantize path's). */
static bool wgmma_large_m(const bfp_cuda_weight *w, size_t m, const bfp_matmul_tuning &t)
{
    return w->k >= w->n && wgmma_fits(m) && plan_wgmma(w, m, t).splits == 1;
}

/* AUTO takes the GEMV kernel at m = 9..16 on weights from 2^22 elements
 * and at m = 2..8 from 2^25 (above 2^27 too: there it beat the skinny
 * kernel, docs/gemm.md "AUTO at m = 17..32"). On the
 * H200 it beat the skinny kernel at m = 16 on the three 2^26..2^28 shapes in
 * every format (bench/results/h200-gemv-c78b16c.json); on an H100 it beat
 * the fused kernel on the 8B decoder's shapes (1024..28672 x 4096 and 4096 x
 * 14336) at m = 9..16 from 2^22 elements (0.70-0.98x, ties at 4096^2) and at
 * m = 2..8 from 2^25 (0.69-1.04x, the losses mxfp4+ / nvfp4 at m = 2..4);
 * docs/gemm.md. At m = 1 it was about even with the better of the fused and
 * skinny kernels (ahead with gemv_pdl, which AUTO cannot assume). */
constexpr double GEMV_MIN_ELEMS = 4194304.0;     /* 2^22, m = 9..16 */
constexpr double GEMV_MIN_ELEMS_NT1 = 33554432.0; /* 2^25, m = 2..8 */
constexpr size_t GEMV_AUTO_MIN_M = 9;
/* m = 1, MXFP4 only, from 2^26 elements: there GEMV took 0.98-1.00x the
 * better of the fused and skinny kernels' time on the H200 (c78b16c) and
 * 0.84-0.97x on an H100 (c13d106, dff0bb1); for the other formats it lost
 * somewhere (NVFP4 1.03-1.04x on the H200; MX+ and HiF4 up to 1.06x, where
 * the skinny kernel adds the block max after the mma). */
constexpr double GEMV_MIN_ELEMS_M1 = 67108864.0; /* 2^26 */

/* m = 17..32 from 2^24 elements: the wgmma kernel (one 64-row x tile, its
 * time nearly flat in m) where k >= n, else the skinny kernel; below, the
 * fused kernel. The best of the three in every measured case (docs/gemm.md,
 * "AUTO at m = 17..32"). */
constexpr double NT4_MIN_ELEMS = 16777216.0; /* 2^24 */

bfp_matmul_path bfp_cuda_matmul_auto_path(const bfp_cuda_weight *w, size_t m)
{
    return bfp_cuda_matmul_auto_path_ex(w, m, nullptr);
}

/* With gemv_pdl = 1 the GEMV kernel was the fastest path at m = 1 in 14 of
 * the 15 measured cases on the H200 (the 15th a tie) and at m = 16 in all
 * (docs/gemm.md), so AUTO takes it at every m <= 16 when the caller allows
 * PDL; the Hopper test stands in for the TMA maps the kernel needs. */
bfp_matmul_path bfp_cuda_matmul_auto_path_ex(const bfp_cuda_weight *w, size_t m,
                                             const bfp_matmul_tuning *tuning)
{
    if (w && m > FUSED_MAX_M && w->wgmma_ok &&
        (m <= WGMMA_MAX_M || wgmma_large_m(w, m, tuning ? *tuning : DEFAULTS)))
        return BFP_MATMUL_WGMMA;
    if (!w || m > FUSED_MAX_M)
        return BFP_MATMUL_DEQUANT_CUBLAS;
    const double elems = (double)w->n * (double)w->k;
    if (tuning && tuning->gemv_pdl > 0 && w->wgmma_ok && gemv_fits(w, m)) /* m <= 16 */
        return BFP_MATMUL_GEMV;
    if (m >= GEMV_AUTO_MIN_M && elems >= GEMV_MIN_ELEMS && gemv_fits(w, m))
        return BFP_MATMUL_GEMV;
    if (m >= 2 && elems >= GEMV_MIN_ELEMS_NT1 && gemv_fits(w, m))
        return BFP_MATMUL_GEMV;
    if (m == 1 && w->kind == FMT_MX && elems >= GEMV_MIN_ELEMS_M1 && gemv_fits(w, m))
        return BFP_MATMUL_GEMV;
    if (m <= 16 && elems >= (m > 8 ? SKINNY_MIN_ELEMS_NT2 : SKINNY_MIN_ELEMS) &&
        skinny_fits(w, m))
        return BFP_MATMUL_SKINNY;
    if (m > 16 && elems >= NT4_MIN_ELEMS) {
        if (w->wgmma_ok && w->k >= w->n)
            return BFP_MATMUL_WGMMA;
        if (skinny_fits(w, m))
            return BFP_MATMUL_SKINNY;
    }
    return BFP_MATMUL_FUSED;
}

size_t bfp_cuda_matmul_workspace_size_ex(const bfp_cuda_weight *w, size_t m,
                                         bfp_matmul_path path, const bfp_matmul_tuning *tuning)
{
    if (!w || m == 0 || bfp_matmul_tuning_check(tuning) != BFP_OK)
        return 0;
    const bfp_matmul_tuning &t = tuning ? *tuning : DEFAULTS;
    if (path == BFP_MATMUL_AUTO)
        path = bfp_cuda_matmul_auto_path_ex(w, m, &t);
    if (path == BFP_MATMUL_SKINNY)
        return skinny_fits(w, m) ? plan_skinny(w, m, t).ws_bytes : 0;
    if (path == BFP_MATMUL_GEMV)
        return gemv_fits(w, m) ? plan_gemv(w, m, t).ws_bytes : 0;
    if (path == BFP_MATMUL_WGMMA)
        return wgmma_fits(m) ? plan_wgmma(w, m, t).ws_bytes : 0;
    if (path == BFP_MATMUL_FUSED)
        return plan_fused(w, m, t).ws_bytes;
    return path == BFP_MATMUL_DEQUANT_CUBLAS ? deq_ws_bytes(w) : 0; /* 0: no such path */
}

size_t bfp_cuda_matmul_workspace_size(const bfp_cuda_weight *w, size_t m,
                                      bfp_matmul_path path)
{
    return bfp_cuda_matmul_workspace_size_ex(w, m, path, nullptr);
}

size_t bfp_cuda_matmul_workspace_size_max(const bfp_cuda_weight *w)
{
    if (!w)
        return 0;
    /* AUTO's kernel paths end at WGMMA_MAX_M (FUSED_MAX_M off Hopper); above,
     * the dequantize path's size does not depend on m */
    size_t most = deq_ws_bytes(w);
    for (size_t m = 1; m <= WGMMA_MAX_M; m++) {
        size_t b = bfp_cuda_matmul_workspace_size_ex(w, m, BFP_MATMUL_AUTO, nullptr);
        most = b > most ? b : most;
    }
    return most;
}

bfp_status bfp_cuda_weight_unpack(const bfp_cuda_weight *w, bfp_dtype dtype, void *d_out,
                                  void *stream)
{
    if (!w || !d_out || (dtype != BFP_DTYPE_F32 && dtype != BFP_DTYPE_BF16))
        return BFP_ERR_ARG;
    return launch_unpack(w->kind, w->codes, w->scales, w->corr, (int)w->tiles_k, (int)w->n,
                         (int)w->k, 0, (int)w->tiles_n, d_out, dtype == BFP_DTYPE_F32, w->ts,
                         static_cast<cudaStream_t>(stream)) == cudaSuccess
               ? BFP_OK
               : BFP_ERR_DEVICE;
}

bfp_status bfp_cuda_matmul(const bfp_cuda_weight *w, const void *d_x, size_t m,
                           const void *d_bias, void *d_y, void *d_workspace,
                           size_t workspace_bytes, bfp_matmul_path path, void *stream)
{
    return bfp_cuda_matmul_ex(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, path,
                              nullptr, stream);
}

bfp_status bfp_cuda_matmul_ex(const bfp_cuda_weight *w, const void *d_x, size_t m,
                              const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream)
{
    if (!w || !d_x || !d_y || bfp_matmul_tuning_check(tuning) != BFP_OK)
        return BFP_ERR_ARG;
    const bfp_matmul_tuning &t = tuning ? *tuning : DEFAULTS;
    if (m == 0 || m > INT_MAX || m > SIZE_MAX / 4 / w->n)
        return BFP_ERR_SHAPE;
    if (path == BFP_MATMUL_AUTO)
        path = bfp_cuda_matmul_auto_path_ex(w, m, &t);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (path == BFP_MATMUL_FUSED)
        return run_fused(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, K_FUSED, t, s);
    if (path == BFP_MATMUL_SKINNY)
        return skinny_fits(w, m)
                   ? run_fused(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, K_SKINNY, t, s)
                   : BFP_ERR_SHAPE;
    if (path == BFP_MATMUL_GEMV)
        return gemv_fits(w, m)
                   ? run_fused(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, K_GEMV, t, s)
                   : BFP_ERR_SHAPE;
    if (path == BFP_MATMUL_WGMMA) {
        if (!w->wgmma_ok)
            return BFP_ERR_UNSUPPORTED;
        return wgmma_fits(m)
                   ? run_fused(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, K_WGMMA, t, s)
                   : BFP_ERR_SHAPE;
    }
    if (path == BFP_MATMUL_DEQUANT_CUBLAS)
        return run_cublas(w, d_x, m, d_bias, d_y, d_workspace, workspace_bytes, s);
    return BFP_ERR_ARG;
}

} /* extern "C" */
