/* gemm_gemv_flush.cuh - the GEMV kernel's end of a group (gemm_gemv.cu):
 * the consumer warps' sums added in shared memory, then written to y or
 * met in the fp32 workspace (stream-K), or exchanged through distributed
 * shared memory (cluster plans). */
#pragma once
#include "gemm_gemv_parts.cuh"

namespace bfpgemm {

/* The consumer warps' sums into the GV_SLICES slices of red (zeroing
 * acc); all GV_CW * 32 consumer threads call it, and it ends with their
 * barrier */
template <int NT>
__device__ __forceinline__ void gv_red_add(float (&acc)[GV_R][NT][4], float *red, int warp,
                                           int lane)
{
    const int g = lane >> 2, t = lane & 3;
    /* round j: warps [j S, (j + 1) S) store (j = 0) or add their sums into
     * slice warp % S */
    float *slice = red + (warp % GV_SLICES) * NT * 8 * GV_RED_LD;
#pragma unroll 1
    for (int j = 0; j < GV_CW / GV_SLICES; j++) {
        if (warp / GV_SLICES == j) {
#pragma unroll
            for (int r = 0; r < GV_R; r++)
#pragma unroll
                for (int q = 0; q < NT; q++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int row = r * 16 + g + 8 * (e >> 1), mm = q * 8 + 2 * t + (e & 1);
                        float *a = slice + mm * GV_RED_LD + row;
                        *a = j ? *a + acc[r][q][e] : acc[r][q][e];
                        acc[r][q][e] = 0.0f;
                    }
        }
        bar_consumers();
    }
}

/* row's sum for x row mm over red's slices */
template <int NT>
__device__ __forceinline__ float gv_red_sum(const float *red, int mm, int row)
{
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < GV_SLICES; w++)
        v += red[(w * NT * 8 + mm) * GV_RED_LD + row];
    return v;
}

/* The consumers' sums of group grp over units [c0, c1) of its chunks: added
 * across warps in red, then written to y (the whole group) or added to the
 * workspace, the group's last CTA writing y and zeroing its part. All
 * GV_CW * 32 consumer threads call it. */
template <int NT>
__device__ __forceinline__ void gv_flush(const Params &p, const GemvArgs &a,
                                         float (&acc)[GV_R][NT][4], float *red,
                                         unsigned *last_flag, int grp, int c0, int c1, int warp,
                                         int lane)
{
    const int tid = warp * 32 + lane;
    constexpr int ROWS = GV_R * 16;
    gv_red_add<NT>(acc, red, warp, lane);
    const bool whole = c0 == 0 && c1 == a.chunks;
    const int nbase = grp * ROWS;
    for (int i = tid; i < ROWS * p.m; i += GV_CW * 32) {
        const int row = i % ROWS, mm = i / ROWS, n = nbase + row;
        float v = gv_red_sum<NT>(red, mm, row);
        if (n >= p.n)
            continue;
        v *= p.post;
        if (whole)
            p.y[(size_t)mm * p.n + n] = finish(p, v, n);
        else
            atomicAdd(&p.ws[(size_t)mm * p.n + n], v);
    }
    bar_consumers(); /* red is free again; this CTA's adds to the workspace are issued */
    if (whole)
        return;
    if (tid == 0) {
        /* one fence, after the barrier: it is cumulative over the adds the
         * barrier ordered before it, so they land before the count does */
        __threadfence();
        *last_flag = atomicAdd(&p.counters[grp], (unsigned)(c1 - c0)) + (unsigned)(c1 - c0) ==
                     (unsigned)a.chunks;
    }
    bar_consumers();
    if (!*last_flag)
        return;
    __threadfence();
    ws_flush<2 * NT>(p, ROWS * p.m, tid, GV_CW * 32, [&](int i, size_t &off, int &n) {
        n = nbase + i % ROWS;
        off = (size_t)(i / ROWS) * p.n + n;
        return n < p.n;
    });
    if (tid == 0)
        p.counters[grp] = 0u;
}

/* A CTA's part of a cluster plan (GemvArgs::cluster): its rank of size
 * CTAs, its cluster cid of ncl, the groups it takes (cid, cid + ncl, ...:
 * iters of them, as every rank of its cluster) and its chunks [c0, c1) of
 * each */
struct GvCluster {
    int rank, size, cid, ncl, iters, c0, c1;
};

__device__ __forceinline__ GvCluster gv_cluster(const GemvArgs &a)
{
    GvCluster c;
    c.rank = cl_rank();
    c.size = cl_size();
    c.cid = cl_id();
    c.ncl = cl_count();
    c.iters = c.cid < a.groups ? (a.groups - c.cid + c.ncl - 1) / c.ncl : 0;
    c.c0 = c.rank * a.chunks / c.size;
    c.c1 = (c.rank + 1) * a.chunks / c.size;
    return c;
}

/* A cluster plan's end of group grp (its iteration it): the warps' sums
 * into red, then warp w < size (w != rank) sends rank w its rows (summed
 * over red's slices) through DSMEM and arrives on w's cfull; each rank adds
 * the size parts of its rows in rank order (the same sum whichever rank
 * owns a row) and writes y. cfree tells a sender that the receiver is done
 * with a parity's buffer (waited for from iteration 2 on; not given for the
 * last two, whose buffers nobody reuses). size 1: the CTA's own sums. Each
 * iteration waits for the whole cluster (at three and more iterations per
 * CTA the plans lost to stream-K; docs/gemm.md). */
template <int NT>
__device__ __forceinline__ void gv_flush_cluster(const Params &p, const GvCluster &c,
                                                 float (&acc)[GV_R][NT][4], float *red,
                                                 float *recv, uint64_t *cfull, uint64_t *cfree,
                                                 int grp, int it, int warp, int lane)
{
    constexpr int ROWS = GV_R * 16, MC = 8 * NT;
    const int tid = warp * 32 + lane, S = c.size, rpo = ROWS / S, par = it & 1;
    const int vals = rpo * p.m;
    gv_red_add<NT>(acc, red, warp, lane);
    if (S > 1 && warp < S && warp != c.rank) {
        if (it >= 2) /* the receiver is done with this parity's buffer */
            mbar_wait_cluster(smem_addr(&cfree[par]), (uint32_t)((it - 2) >> 1) & 1u);
        const uint32_t dst = cl_map(smem_addr(recv), warp);
        for (int v = lane; v < vals; v += 32) {
            const int rl = v % rpo, mm = v / rpo;
            cl_st(dst + 4u * (uint32_t)(((par * S + c.rank) * MC + mm) * rpo + rl),
                  gv_red_sum<NT>(red, mm, warp * rpo + rl));
        }
        /* one arrival per sender warp (remote arrivals serialize at the
         * receiver): each lane's stores are ordered before lane 0's release */
        asm volatile("fence.acq_rel.cluster;" ::: "memory");
        __syncwarp();
        if (lane == 0)
            cl_arrive(cl_map(smem_addr(&cfull[par]), warp));
    }
    if (S > 1)
        mbar_wait_cluster(smem_addr(&cfull[par]), (uint32_t)(it >> 1) & 1u);
    for (int v = tid; v < vals; v += GV_CW * 32) {
        const int rl = v % rpo, mm = v / rpo, row = c.rank * rpo + rl, n = grp * ROWS + row;
        float sum = 0.0f;
        for (int r = 0; r < S; r++)
            sum += r == c.rank ? gv_red_sum<NT>(red, mm, row)
                               : recv[((par * S + r) * MC + mm) * rpo + rl];
        if (n < p.n)
            p.y[(size_t)mm * p.n + n] = finish(p, sum * p.post, n);
    }
    bar_consumers(); /* red and this parity's buffer are free again */
    if (S > 1 && it + 2 < c.iters && tid < S && tid != c.rank)
        cl_arrive(cl_map(smem_addr(&cfree[par]), tid));
}

} // namespace bfpgemm
