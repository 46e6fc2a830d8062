/* gemm_grouped_api.cu - the grouped (MoE) matmul's host side (bfp_grouped.h):
 * device pack, view of a grouped buffer, the plans (rows per chunk, K
 * splits; or the wgmma kernel's rows per tile and grid) from T alone, and
 * the call. docs/gemm.md, "Grouped (MoE) matmul". */
#include "bfp_grouped.h"
#include "format_defs.h"
#include "gemm_grouped.cuh"
#include "gemm_internal.h"
#include "matmul_image.h"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

using namespace bfpgemm;

struct bfp_cuda_grouped_weight {
    const uint8_t *buf;
    bfp_format fmt;
    int kind;
    size_t e_count, n, k, stride, tiles_n, tiles_k;
    bfp_wimg_layout L;
    int sms;
    bool wg_ok;        /* sm_90 and the maps below made */
    GroupedWgMaps wg;  /* W's maps of the wgmma kernel (x's set per call) */
    bool gv_ok;        /* sm_90 and the GEMV kernel's maps made */
    SkinnyMaps gv;     /* W's maps of the GEMV kernel (x's set per call) */
};

namespace {

int g_kind_of(bfp_format f)
{
    switch (f) {
#define X(ID, NAME, FAM, ELEM, BLOCK, MAXV, MM, ...) case BFP_##ID: return BFP_MM_##MM;
        BFP_FORMAT_LIST(X)
#undef X
    }
    return BFP_MM_NONE;
}

size_t g_align256(size_t v) { return (v + 255) & ~(size_t)255; }

/* experts that can have rows (min(E, T)) and their mean rows, rounded up:
 * what the plans know of the routing */
size_t g_active(const bfp_cuda_grouped_weight *w, size_t t_rows)
{
    return t_rows < w->e_count ? t_rows : w->e_count;
}
size_t g_mean_rows(const bfp_cuda_grouped_weight *w, size_t t_rows)
{
    const size_t active = g_active(w, t_rows);
    return active ? (t_rows + active - 1) / active : 1;
}

struct GroupedPlan {
    int nt, splits, tiles_per_split, chunk_tiles, max_tiles;
    size_t ws_bytes, ctr_offset;
    bool ok;
};

/* NT from the mean rows of an expert that has any (T / min(E, T)); K split
 * so that even T rows in one expert give the grid about ctas_per_sm CTAs
 * per SM; every unit count bounded by max_tiles * splits. */
GroupedPlan plan_grouped(const bfp_cuda_grouped_weight *w, size_t t_rows,
                         const bfp_matmul_tuning &tu)
{
    GroupedPlan P{};
    const size_t active = g_active(w, t_rows), mean = g_mean_rows(w, t_rows);
    P.nt = mean <= 12 ? 1 : mean <= 48 ? 4 : 16;
    const size_t mc = (size_t)8 * P.nt;
    const size_t cols = (w->tiles_n + WARPS - 1) / WARPS;
    const size_t least = cols * ((t_rows + mc - 1) / mc); /* all rows in one expert */
    const int per_sm = tu.ctas_per_sm ? tu.ctas_per_sm : 8;
    size_t want = least ? (size_t)w->sms * (size_t)per_sm / least : 1;
    const size_t groups = (w->tiles_k + 3) / 4;
    if (want > groups)
        want = groups;
    if (want < 1)
        want = 1;
    P.tiles_per_split = (int)((groups + want - 1) / want * 4);
    P.splits = (int)((w->tiles_k + P.tiles_per_split - 1) / P.tiles_per_split);
    size_t fit = (size_t)SMEM_X_BUDGET / (mc * 64 * 2) / 4 * 4;
    if (fit < 4)
        fit = 4;
    P.chunk_tiles = (int)(fit < (size_t)P.tiles_per_split ? fit : (size_t)P.tiles_per_split);
    const size_t tiles = cols * (t_rows / mc + active);
    P.ok = t_rows <= INT32_MAX && tiles * (size_t)P.splits <= (size_t)INT_MAX &&
           t_rows <= SIZE_MAX / 4 / w->n;
    P.max_tiles = P.ok ? (int)tiles : 0;
    P.ctr_offset = g_align256(t_rows * w->n * sizeof(float));
    P.ws_bytes = P.splits > 1 ? P.ctr_offset + g_align256(tiles * sizeof(unsigned)) : 0;
    return P;
}

const bfp_matmul_tuning G_DEFAULTS = {};

/* W's maps of all experts (codes, scales, corrections) with boxes of r row
 * tiles by kts k tiles of an expert: the wgmma kernel's (wg_row_tiles(2)
 * by 1) or the GEMV kernel's (GV_R by GV_CW) */
template <class Maps>
bool encode_expert_maps(const bfp_cuda_grouped_weight *h, Maps *m, int r, int kts)
{
    const size_t scb = (size_t)tile_scale_bytes(h->kind), crb = (size_t)tile_corr_bytes(h->kind);
    return h->stride % 16 == 0 &&
           encode_expert_records(&m->codes, h->buf + h->L.codes, 512, h->tiles_n, h->tiles_k,
                                 h->e_count, h->stride, r, kts) &&
           encode_expert_records(&m->scales, h->buf + h->L.scales, scb, h->tiles_n, h->tiles_k,
                                 h->e_count, h->stride, r, kts) &&
           (!crb || encode_expert_records(&m->corr, h->buf + h->L.corr, crb, h->tiles_n,
                                          h->tiles_k, h->e_count, h->stride, r, kts));
}

/* The GEMV kernel (grouped_kernel = 3; gemm_gemv.cu with G): units of an
 * expert's 8 nt rows of x by a group (GV_R row tiles) by GV_CW k tiles,
 * counted on the device; nt = 1 while an active expert has at most 4 rows
 * on average, else 2. Every CTA the SMs hold at once, each an equal run.
 * The workspace: t_rows x n fp32 sums, then a counter per (expert, m chunk,
 * group), at most (ceil(T / 8 nt) + min(E, T)) x groups of them. */
struct GroupedGemvPlan {
    int nt, groups, chunks, max_units;
    unsigned grid;
    size_t ws_bytes, ctr_offset;
    bool ok;
};

GroupedGemvPlan plan_grouped_gemv(const bfp_cuda_grouped_weight *w, size_t t_rows)
{
    GroupedGemvPlan P{};
    P.nt = g_mean_rows(w, t_rows) <= 4 ? 1 : 2;
    const size_t mc = (size_t)8 * P.nt;
    P.groups = (int)((w->tiles_n + GV_R - 1) / GV_R);
    P.chunks = (int)((w->tiles_k + GV_CW - 1) / GV_CW);
    const size_t triples = ((t_rows + mc - 1) / mc + g_active(w, t_rows)) * (size_t)P.groups;
    P.ok = t_rows <= INT32_MAX && t_rows <= SIZE_MAX / 4 / w->n &&
           triples <= (size_t)INT_MAX / (size_t)P.chunks;
    P.max_units = P.ok ? (int)(triples * (size_t)P.chunks) : 0;
    P.grid = (unsigned)w->sms * (unsigned)gemv_resident_ctas(w->kind, P.nt, true);
    P.ctr_offset = g_align256(t_rows * w->n * sizeof(float));
    P.ws_bytes = P.ctr_offset + g_align256(triples * sizeof(unsigned));
    return P;
}

/* The wgmma kernel: bn rows of an expert's x per tile (64 when an active
 * expert has at most 64 rows on average, 256 from G_WG256_MEAN_ROWS, else
 * 128; the tuning's wgmma_bn when set), CTA columns of 128 rows of W, and
 * a grid of one CTA per SM, or fewer when the tiles are fewer (at most
 * ceil(T / bn) + min(E, T) m tiles, each expert's last one partial). */
struct GroupedWgPlan {
    int bn, cols;
    unsigned grid;
};

/* 256-row m tiles from 128 rows per active expert on average: faster than
 * 128-row ones there on gpt-oss shapes but for skewed routing over 128
 * experts, slower below (H100; docs/gemm.md, "256-row m tiles";
 * bench/results/h100-moe-wg256-16a0c5d.json) */
constexpr size_t G_WG256_MEAN_ROWS = 128;

GroupedWgPlan plan_grouped_wgmma(const bfp_cuda_grouped_weight *w, size_t t_rows,
                                 const bfp_matmul_tuning *tu)
{
    GroupedWgPlan P;
    const size_t active = g_active(w, t_rows);
    const size_t mean = g_mean_rows(w, t_rows);
    P.bn = tu && tu->wgmma_bn ? tu->wgmma_bn
           : mean <= 64       ? 64
           : mean < G_WG256_MEAN_ROWS ? 128
                                      : 256;
    const size_t rt = (size_t)wg_row_tiles(2);
    P.cols = (int)((w->tiles_n + rt - 1) / rt);
    const size_t tiles = ((t_rows + P.bn - 1) / P.bn + active) * (size_t)P.cols;
    P.grid = (unsigned)(tiles < (size_t)w->sms ? tiles : (size_t)w->sms);
    return P;
}

/* The default's choice on Hopper, by rows per active expert on average
 * (T / min(E, T)): the GEMV kernel up to G_GEMV_MEAN_ROWS, the wgmma kernel
 * from G_WGMMA_MEAN_ROWS, the unit kernel between (and off Hopper). Measured
 * on gpt-oss shapes (docs/gemm.md): GEMV beats the unit kernel at 1 to 8 mean
 * rows and loses at 32; the wgmma kernel wins at 32 and above. */
constexpr size_t G_GEMV_MEAN_ROWS = 8, G_WGMMA_MEAN_ROWS = 16;

bool wants_wgmma(const bfp_cuda_grouped_weight *w, size_t t_rows, const bfp_matmul_tuning *tu)
{
    if (tu && tu->grouped_kernel)
        return tu->grouped_kernel == 2;
    return w->wg_ok && g_mean_rows(w, t_rows) >= G_WGMMA_MEAN_ROWS;
}

bool wants_gemv(const bfp_cuda_grouped_weight *w, size_t t_rows, const bfp_matmul_tuning *tu)
{
    if (tu && tu->grouped_kernel)
        return tu->grouped_kernel == 3;
    return w->gv_ok && g_mean_rows(w, t_rows) <= G_GEMV_MEAN_ROWS;
}

/* The GEMV kernel's PDL level: the tuning's gemv_pdl, -1 off; the default
 * is 1, which reads nothing before the previous kernel has finished and so
 * asks nothing of it (measured in docs/gemm.md, "The grouped GEMV under
 * programmatic dependent launch") */
int grouped_pdl(const bfp_matmul_tuning *tu)
{
    if (!tu || tu->gemv_pdl == 0)
        return 1;
    return tu->gemv_pdl < 0 ? 0 : tu->gemv_pdl;
}

/* the parameters both kernels read */
GroupedParams grouped_params(const bfp_cuda_grouped_weight *w, const void *d_x, size_t t_rows,
                             const int32_t *d_offsets, const void *d_bias, void *d_y)
{
    GroupedParams p{};
    p.base = w->buf;
    p.stride = w->stride;
    p.off_codes = w->L.codes;
    p.off_scales = w->L.scales;
    p.off_corr = w->L.ps.corr ? w->L.corr : 0;
    p.x = static_cast<const __nv_bfloat16 *>(d_x);
    p.offsets = d_offsets;
    p.bias = static_cast<const __nv_bfloat16 *>(d_bias);
    p.y = static_cast<__nv_bfloat16 *>(d_y);
    p.e_count = (int)w->e_count;
    p.n = (int)w->n;
    p.k = (int)w->k;
    p.t_rows = (int)t_rows;
    p.tiles_n = (int)w->tiles_n;
    p.tiles_k = (int)w->tiles_k;
    p.x_vec = (uintptr_t)d_x % 16 == 0 && w->k % 8 == 0;
    p.use_ts = w->kind == FMT_NV || w->kind == FMT_NVPLUS;
    return p;
}

bfp_status run_grouped_wgmma(const bfp_cuda_grouped_weight *w, const void *d_x, size_t t_rows,
                             const int32_t *d_offsets, const void *d_bias, void *d_y,
                             const bfp_matmul_tuning *tuning, cudaStream_t s)
{
    if (!w->wg_ok)
        return BFP_ERR_UNSUPPORTED;
    if (t_rows > INT32_MAX || t_rows > SIZE_MAX / 4 / w->n)
        return BFP_ERR_SHAPE;
    const GroupedWgPlan P = plan_grouped_wgmma(w, t_rows, tuning);
    GroupedParams p = grouped_params(w, d_x, t_rows, d_offsets, d_bias, d_y);
    p.cols = P.cols;
    GroupedWgMaps maps = w->wg;
    if (p.x_vec && !encode_x(&maps.x, d_x, w->k, t_rows, (size_t)P.bn))
        return BFP_ERR_DEVICE;
    return launch_grouped_wgmma(w->kind, p, maps, P.bn, P.grid, s) == cudaSuccess
               ? BFP_OK
               : BFP_ERR_DEVICE;
}

bfp_status run_grouped_gemv(const bfp_cuda_grouped_weight *w, const void *d_x, size_t t_rows,
                            const int32_t *d_offsets, const void *d_bias, void *d_y,
                            void *d_workspace, size_t workspace_bytes, int pdl, cudaStream_t s)
{
    if (!w->gv_ok)
        return BFP_ERR_UNSUPPORTED;
    const GroupedGemvPlan P = plan_grouped_gemv(w, t_rows);
    if (!P.ok)
        return BFP_ERR_SHAPE;
    if (!d_workspace || workspace_bytes < P.ws_bytes)
        return BFP_ERR_ARG;
    Params p{};
    p.x = static_cast<const __nv_bfloat16 *>(d_x);
    p.bias = static_cast<const __nv_bfloat16 *>(d_bias);
    p.y = static_cast<__nv_bfloat16 *>(d_y);
    p.ws = static_cast<float *>(d_workspace);
    p.counters = reinterpret_cast<unsigned *>(static_cast<char *>(d_workspace) + P.ctr_offset);
    p.use_ts = w->kind == FMT_NV || w->kind == FMT_NVPLUS;
    p.n = (int)w->n;
    p.k = (int)w->k;
    p.m = 8 * P.nt;
    p.tiles_n = (int)w->tiles_n;
    p.tiles_k = (int)w->tiles_k;
    p.x_vec = (uintptr_t)d_x % 16 == 0 && w->k % 8 == 0;
    SkinnyMaps maps = w->gv;
    if (p.x_vec && gemv_stages_x() && !encode_x(&maps.x, d_x, w->k, t_rows, (size_t)(8 * P.nt)))
        return BFP_ERR_DEVICE;
    GemvArgs a{};
    a.units = P.max_units;
    a.chunks = P.chunks;
    a.offsets = d_offsets;
    a.base = w->buf;
    a.stride = w->stride;
    a.e_count = (int)w->e_count;
    a.t_rows = (int)t_rows;
    a.groups = P.groups;
    a.early = pdl == 2;
    return launch_gemv(w->kind, p, maps, a, P.nt, P.grid, pdl, s, true) == cudaSuccess
               ? BFP_OK
               : BFP_ERR_DEVICE;
}

} // namespace

bfp_status bfp_cuda_grouped_weight_pack(bfp_format fmt, const bfp_const_planes *w,
                                        size_t e_count, size_t n, size_t k, void *d_buf,
                                        size_t bytes, void *stream)
{
    size_t total;
    bfp_status st = bfp_cuda_grouped_weight_packed_size(fmt, e_count, n, k, &total);
    if (st != BFP_OK)
        return st;
    if (!w || !d_buf || (uintptr_t)d_buf % BFP_WIMG_ALIGN || bytes < total)
        return BFP_ERR_ARG;
    const size_t one = total / e_count;
    for (size_t e = 0; e < e_count && st == BFP_OK; e++)
        st = bfp_cuda_weight_pack(fmt, &w[e], n, k, static_cast<uint8_t *>(d_buf) + e * one, one,
                                  stream);
    return st;
}

bfp_status bfp_cuda_grouped_weight_view(bfp_format fmt, size_t e_count, size_t n, size_t k,
                                        const void *d_buf, size_t bytes,
                                        bfp_cuda_grouped_weight **out)
{
    if (out)
        *out = nullptr;
    size_t total;
    bfp_status st = bfp_cuda_grouped_weight_packed_size(fmt, e_count, n, k, &total);
    if (st != BFP_OK)
        return st;
    if (!out || !d_buf || (uintptr_t)d_buf % BFP_WIMG_ALIGN || bytes < total)
        return BFP_ERR_ARG;
    if (!bfp_cuda_available())
        return BFP_ERR_DEVICE;
    const size_t one = total / e_count;
    uint8_t *hdr = static_cast<uint8_t *>(malloc(e_count * BFP_WIMG_ALIGN));
    bfp_cuda_grouped_weight *h =
        static_cast<bfp_cuda_grouped_weight *>(calloc(1, sizeof(bfp_cuda_grouped_weight)));
    if (!hdr || !h) {
        free(hdr), free(h);
        return BFP_ERR_NOMEM;
    }
    /* every expert's header in one strided copy */
    if (cudaMemcpy2D(hdr, BFP_WIMG_ALIGN, d_buf, one, BFP_WIMG_ALIGN, e_count,
                     cudaMemcpyDeviceToHost) != cudaSuccess)
        st = BFP_ERR_DEVICE;
    for (size_t e = 0; e < e_count && st == BFP_OK; e++) {
        int fold;
        float ts;
        st = bfp_wimg_header_read(hdr + e * BFP_WIMG_ALIGN, fmt, n, k, one, &fold, &ts);
    }
    free(hdr);
    bool sm90 = false;
    if (st == BFP_OK && !current_device(&h->sms, &sm90))
        st = BFP_ERR_DEVICE;
    if (st == BFP_OK)
        st = bfp_wimg_layout_get(fmt, n, k, &h->L);
    if (st != BFP_OK) {
        free(h);
        return st;
    }
    h->buf = static_cast<const uint8_t *>(d_buf);
    h->fmt = fmt;
    h->kind = g_kind_of(fmt);
    h->e_count = e_count, h->n = n, h->k = k, h->stride = one;
    h->tiles_n = (n + 15) / 16;
    h->tiles_k = (k + 63) / 64;
    /* a map the driver refuses leaves only the mma.sync kernel */
    h->wg_ok = sm90 && encode_expert_maps(h, &h->wg, wg_row_tiles(2), 1);
    h->gv_ok = sm90 && encode_expert_maps(h, &h->gv, GV_R, GV_CW);
    *out = h;
    return BFP_OK;
}

void bfp_cuda_grouped_weight_free(bfp_cuda_grouped_weight *w) { free(w); }

size_t bfp_cuda_grouped_matmul_workspace_size(const bfp_cuda_grouped_weight *w, size_t t_rows,
                                              const bfp_matmul_tuning *tuning)
{
    if (!w || bfp_matmul_tuning_check(tuning) != BFP_OK || t_rows == 0)
        return 0;
    if (wants_gemv(w, t_rows, tuning)) {
        const GroupedGemvPlan P = plan_grouped_gemv(w, t_rows);
        return P.ok ? P.ws_bytes : 0;
    }
    if (wants_wgmma(w, t_rows, tuning))
        return 0; /* the wgmma kernel needs none */
    GroupedPlan P = plan_grouped(w, t_rows, tuning ? *tuning : G_DEFAULTS);
    return P.ok ? P.ws_bytes : 0;
}

bfp_status bfp_cuda_grouped_matmul(const bfp_cuda_grouped_weight *w, const void *d_x,
                                   size_t t_rows, const int32_t *d_offsets, const void *d_bias,
                                   void *d_y, void *d_workspace, size_t workspace_bytes,
                                   const bfp_matmul_tuning *tuning, void *stream)
{
    if (!w || !d_offsets || bfp_matmul_tuning_check(tuning) != BFP_OK)
        return BFP_ERR_ARG;
    if (t_rows == 0)
        return BFP_OK;
    if (!d_x || !d_y || (uintptr_t)d_x % 2 || (uintptr_t)d_y % 2 || (d_bias && (uintptr_t)d_bias % 2))
        return BFP_ERR_ARG;
    if (wants_gemv(w, t_rows, tuning))
        return run_grouped_gemv(w, d_x, t_rows, d_offsets, d_bias, d_y, d_workspace,
                                workspace_bytes, grouped_pdl(tuning),
                                static_cast<cudaStream_t>(stream));
    if (wants_wgmma(w, t_rows, tuning))
        return run_grouped_wgmma(w, d_x, t_rows, d_offsets, d_bias, d_y, tuning,
                                 static_cast<cudaStream_t>(stream));
    GroupedPlan P = plan_grouped(w, t_rows, tuning ? *tuning : G_DEFAULTS);
    if (!P.ok)
        return BFP_ERR_SHAPE;
    if (P.ws_bytes && (!d_workspace || workspace_bytes < P.ws_bytes))
        return BFP_ERR_ARG;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    GroupedParams p = grouped_params(w, d_x, t_rows, d_offsets, d_bias, d_y);
    p.ws = P.ws_bytes ? static_cast<float *>(d_workspace) : nullptr;
    p.counters = P.ws_bytes ? reinterpret_cast<unsigned *>(static_cast<char *>(d_workspace) +
                                                           P.ctr_offset)
                            : nullptr;
    p.max_tiles = P.max_tiles;
    p.cols = (int)((w->tiles_n + WARPS - 1) / WARPS);
    p.splits = P.splits;
    p.tiles_per_split = P.tiles_per_split;
    p.chunk_tiles = P.chunk_tiles;
    p.xs_ld = P.chunk_tiles * 64 + 8;
    return launch_grouped(w->kind, p, P.nt, w->sms, s) == cudaSuccess ? BFP_OK : BFP_ERR_DEVICE;
}
