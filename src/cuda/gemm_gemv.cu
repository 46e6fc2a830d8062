/* gemm_gemv.cu - the weight-only matmul for m <= 16 (BFP_MATMUL_GEMV): a
 * persistent stream-K GEMV that keeps W's bytes in flight per CTA, not per
 * warp. W's prepacked tiles are cut into CTA units of GV_R row tiles (a
 * group: 64 rows of W) by GV_CW consecutive k tiles, ordered group-major,
 * and each CTA of a grid that is resident all at once takes an equal
 * contiguous run of units (within one unit of each other). One producer
 * warp fills a ring of stages with three TMA copies per unit (codes, scales,
 * corrections: boxes of GV_CW k tiles by GV_R row tiles) and x's k tiles;
 * each of the GV_CW consumer warps takes one k tile of every unit, decodes
 * its GV_R tiles in registers as the fused kernel does (decode_tile) and
 * multiplies them on the tensor cores. At the end of a group the consumer
 * warps add their sums in shared memory; a CTA that covered the whole group
 * writes y, else the group's CTAs meet in the fp32 workspace (at most two
 * per CTA), the last one (counted in units) writing y and zeroing it.
 * With programmatic dependent launch (tuning gemv_pdl) the first stages'
 * W copies start before the previous kernel in the stream has finished;
 * x, y and the workspace are touched only after griddepcontrol.wait. A
 * grouped call under PDL overlaps only its launch and set-up (where W is
 * read follows from the offsets, read after the wait), or with a.early
 * also the offsets and W's first stages. */
#include "gemm_gemv_flush.cuh"
#include "gemm_gemv_parts.cuh"
#include "gemm_gemv_units.cuh"
#include "gemm_grouped.cuh"

namespace bfpgemm {

/* Params of a grouped call's unit u (the rest as the call's p): expert e's
 * fold, 2^fold and tensor scale (es, from its header) and bias row; its rows
 * of x, y and the workspace from row0 on (at most 8 NT); the counters from
 * its (expert, m chunk) on, so that gv_flush's counters[grp] is the group's */
__device__ __forceinline__ Params gv_unit_params(const Params &p, const GemvArgs &a, int u, int e,
                                                 int row0, int rows, int grp, int ch,
                                                 const ExpertScales &es)
{
    Params q = p;
    q.mx_fold = es.fold;
    q.post = es.post;
    q.ts = es.ts;
    q.m = rows;
    q.x = p.x + (size_t)row0 * p.k;
    q.y = p.y + (size_t)row0 * p.n;
    q.ws = p.ws + (size_t)row0 * p.n;
    q.counters = p.counters + ((u - ch) / a.chunks - grp);
    q.bias = p.bias ? p.bias + (size_t)e * p.n : nullptr;
    return q;
}

/* A consumer warp's part of stage i % STAGES (its k tile kt of the unit):
 * wait for the stage, decode and multiply, release it */
template <int F, int NT, int STAGES>
__device__ __forceinline__ void gv_stage(const Params &p, float (&acc)[GV_R][NT][4],
                                         unsigned char *ring, uint32_t ring_a,
                                         uint64_t *full, uint64_t *empty, int i, int kt,
                                         int warp, int lane)
{
    using S = GvStage<F, NT>;
    const int s = i % STAGES;
    uint32_t xb[NT][8];
    if (!GV_XSMEM && kt < p.tiles_k)
        gv_x_early<NT>(p, kt, lane, xb);
    mbar_wait(smem_addr(&full[s]), (uint32_t)(i / STAGES) & 1u);
    if (kt < p.tiles_k)
        gv_consume<F, NT>(p, acc, xb, ring + s * S::BYTES, ring_a + s * S::BYTES, warp, kt, lane);
    __syncwarp(); /* every lane is done reading stage s */
    if (lane == 0)
        mbar_arrive(smem_addr(&empty[s]));
}

/* The consumers of a grouped call's run [u0, u0 + nu): as the dense loop,
 * with each unit's expert and rows (gv_unit_params) and a flush at the end
 * of each (expert, m chunk, group) */
template <int F, int NT>
__device__ __forceinline__ void gv_grouped_consumers(const Params &p, const GemvArgs &a,
                                                     const int *upre, int u0, int nu,
                                                     float (&acc)[GV_R][NT][4],
                                                     unsigned char *ring, uint32_t ring_a,
                                                     float *red, uint64_t *full, uint64_t *empty,
                                                     unsigned *last_flag, int warp, int lane)
{
    constexpr int STAGES = GvRing<F, NT, true>::STAGES;
    int e, row0, rows, grp, ch;
    gv_unit<NT>(a, upre, u0, &e, &row0, &rows, &grp, &ch);
    int c0 = ch;
    Params q = gv_unit_params(p, a, u0, e, row0, rows, grp, ch,
                              expert_scales<F>(a.base + (size_t)e * a.stride));
    for (int i = 0; i < nu; i++) {
        gv_stage<F, NT, STAGES>(q, acc, ring, ring_a, full, empty, i, ch * GV_CW + warp, warp,
                                lane);
        if (++ch == a.chunks || i == nu - 1) {
            /* the next unit starts an (expert, m chunk, group): found, and its
             * expert's header read, before the flush, whose barriers and
             * atomics then cover those loads' latency */
            const bool more = i < nu - 1;
            int e1 = e, r1 = row0, n1 = rows, g1 = grp, h1 = ch;
            ExpertScales es{};
            if (more) {
                gv_walk<NT>(a, upre, u0, i + 1, &e1, &r1, &n1, &g1, &h1);
                es = expert_scales<F>(a.base + (size_t)e1 * a.stride);
            }
            gv_flush<NT>(q, a, acc, red, last_flag, grp, c0, ch, warp, lane);
            if (more) {
                e = e1, row0 = r1, rows = n1, grp = g1, ch = c0 = h1;
                q = gv_unit_params(p, a, u0 + i + 1, e, row0, rows, grp, ch, es);
            }
        }
    }
}

/* G: a grouped call (gemm_grouped_api.cu, grouped_kernel = 3). The units
 * exist only on the device: every CTA counts them from the offsets
 * (count_units), then takes its run of all of them; W is read through 4-D
 * maps {record, k tiles, row tiles, experts}, x through a map with boxes of
 * 8 NT rows at the unit's row0, and each unit's sums go to its expert's
 * rows (gv_unit_params). */
template <int F, int NT, bool G, bool CL>
__global__ void __launch_bounds__(GV_THREADS, gv_ctas<F, NT>())
    gemm_gemv_kernel(const Params p, const __grid_constant__ SkinnyMaps mp, const GemvArgs a)
{
    static_assert(!(G && CL), "a grouped call has no cluster plan");
    using S = GvStage<F, NT>;
    constexpr int STAGES = GvRing<F, NT, G, CL>::STAGES;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ __align__(8) uint64_t cfull[CL ? 2 : 1], cfree[CL ? 2 : 1]; /* cluster plans */
    __shared__ unsigned last_flag;
    __shared__ int upre[G ? G_MAX_EXPERTS + 1 : 1]; /* grouped: units before expert e */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int u0 = (int)((long long)blockIdx.x * a.units / gridDim.x);
    int u1 = (int)((long long)(blockIdx.x + 1) * a.units / gridDim.x);
    if (G && warp == 0) { /* the offsets may be the previous kernel's output (PDL) */
        if (!a.early)
            griddep_wait();
        count_units(a.offsets, a.e_count, a.t_rows, 8 * NT, (long long)a.groups * a.chunks,
                    a.units, upre, lane);
    }
    unsigned char *ring = smem + ((1024 - (smem_addr(smem) & 1023)) & 1023);
    float *red = reinterpret_cast<float *>(ring + STAGES * S::BYTES);
    float *recv = red + S::RED / 4; /* cluster plans (at one offset in every CTA) */
    const uint32_t ring_a = smem_addr(ring);
    GvCluster c = {};
    if (CL)
        c = gv_cluster(a);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init<1>(smem_addr(&full[s]));
            mbar_init<GV_CW>(smem_addr(&empty[s]));
        }
        if (CL && c.size > 1)
            for (int s = 0; s < 2; s++) {
                mbar_init_n(smem_addr(&cfull[s]), (unsigned)(c.size - 1));
                mbar_init_n(smem_addr(&cfree[s]), (unsigned)(c.size - 1));
            }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (CL)
        cl_sync(); /* every CTA's barriers are set before any other CTA arrives on them */
    else
        __syncthreads();
    if (G) { /* the units, counted above */
        u0 = (int)((long long)blockIdx.x * upre[a.e_count] / gridDim.x);
        u1 = (int)((long long)(blockIdx.x + 1) * upre[a.e_count] / gridDim.x);
    }
    if (CL) /* iters groups of c1 - c0 units each */
        u0 = 0, u1 = c.iters * (c.c1 - c.c0);
    griddep_launch(); /* the next kernel may start as our CTAs leave */
    const int nu = u1 - u0;

    if (warp == GV_CW) { /* the producer */
        if (lane != 0 || nu <= 0) {
            griddep_wait();
            return;
        }
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&mp.codes)) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&mp.scales)) : "memory");
        const int grp0 = u0 / a.chunks, ch0 = u0 - grp0 * a.chunks;
        /* W of the first stages before the wait (W is not written by the
         * kernels this one may overlap), x after it */
        const int pre = nu < STAGES ? nu : STAGES;
        auto xbytes = [&](int ch) {
            if (!GV_XSMEM || !p.x_vec)
                return 0u;
            const int kts = p.tiles_k - ch * GV_CW;
            return (uint32_t)(kts < GV_CW ? kts : GV_CW) * (uint32_t)(G ? 8 * NT : p.m) * 128u;
        };
        auto copy_w = [&](int s, int grp, int ch, int e) {
            const uint32_t st = ring_a + s * S::BYTES, bar = smem_addr(&full[s]);
            mbar_expect(bar, S::W_TX + xbytes(ch));
            if (G) {
                tma_4d(st + S::XBYTES, mp.codes, 0, ch * GV_CW, grp * GV_R, e, bar);
                tma_4d(st + S::SCALES, mp.scales, 0, ch * GV_CW, grp * GV_R, e, bar);
                if (S::CRB)
                    tma_4d(st + S::CORR, mp.corr, 0, ch * GV_CW, grp * GV_R, e, bar);
                return;
            }
            tma_3d(st + S::XBYTES, mp.codes, 0, ch * GV_CW, grp * GV_R, bar);
            tma_3d(st + S::SCALES, mp.scales, 0, ch * GV_CW, grp * GV_R, bar);
            if (S::CRB)
                tma_3d(st + S::CORR, mp.corr, 0, ch * GV_CW, grp * GV_R, bar);
        };
        auto copy_x = [&](int s, int ch, int row0) {
            if (!GV_XSMEM || !p.x_vec)
                return;
            const uint32_t st = ring_a + s * S::BYTES, bar = smem_addr(&full[s]);
            for (int kw = 0; kw < GV_CW && ch * GV_CW + kw < p.tiles_k; kw++)
                tma_2d(st + kw * S::XPART, mp.x, (ch * GV_CW + kw) * 64, row0, bar);
        };
        if (G) { /* W's place follows from the offsets: W before the wait only
                  * where they were read before it (a.early) */
            int e, row0, rows, grp, ch;
            const int early = a.early ? pre : 0;
            for (int i = 0; i < early; i++) {
                gv_walk<NT>(a, upre, u0, i, &e, &row0, &rows, &grp, &ch);
                copy_w(i, grp, ch, e);
            }
            griddep_wait();
            for (int i = 0; i < nu; i++) {
                const int s = i % STAGES;
                gv_walk<NT>(a, upre, u0, i, &e, &row0, &rows, &grp, &ch);
                if (i >= STAGES)
                    mbar_wait(smem_addr(&empty[s]), (uint32_t)(i / STAGES - 1) & 1u);
                if (i >= early)
                    copy_w(s, grp, ch, e);
                copy_x(s, ch, row0);
            }
            return;
        }
        /* the run's units in order: stream-K from (grp0, ch0) over whole
         * groups; a cluster plan's chunks [c0, c1) of groups cid, cid + ncl, ... */
        const int lo = CL ? c.c0 : 0, hi = CL ? c.c1 : a.chunks, gstep = CL ? c.ncl : 1;
        const int gfirst = CL ? c.cid : grp0, cfirst = CL ? c.c0 : ch0;
        int grp = gfirst, ch = cfirst;
        auto next = [&]() {
            if (++ch == hi)
                ch = lo, grp += gstep;
        };
        for (int i = 0; i < pre; i++, next())
            copy_w(i, grp, ch, 0);
        griddep_wait();
        grp = gfirst, ch = cfirst;
        for (int i = 0; i < pre; i++, next())
            copy_x(i, ch, 0);
        for (int i = pre; i < nu; i++, next()) {
            const int s = i % STAGES;
            mbar_wait(smem_addr(&empty[s]), (uint32_t)(i / STAGES - 1) & 1u);
            copy_w(s, grp, ch, 0);
            copy_x(s, ch, 0);
        }
        return;
    }

    /* the consumers */
    griddep_wait();
    if (CL ? c.iters == 0 : nu <= 0) /* a cluster plan's rank without chunks still adds */
        return;
    float acc[GV_R][NT][4];
#pragma unroll
    for (int r = 0; r < GV_R; r++)
#pragma unroll
        for (int q = 0; q < NT; q++)
            acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;
    if (G) {
        gv_grouped_consumers<F, NT>(p, a, upre, u0, nu, acc, ring, ring_a, red, full, empty,
                                    &last_flag, warp, lane);
        return;
    }
    if (CL) {
        for (int it = 0, i = 0; it < c.iters; it++) {
            for (int ch = c.c0; ch < c.c1; ch++, i++)
                gv_stage<F, NT, STAGES>(p, acc, ring, ring_a, full, empty, i, ch * GV_CW + warp,
                                        warp, lane);
            gv_flush_cluster<NT>(p, c, acc, red, recv, cfull, cfree, c.cid + it * c.ncl, it,
                                 warp, lane);
        }
        /* no CTA leaves while another may still write its shared memory (the
         * producer's threads have left: they do not count) */
        cl_sync();
        return;
    }
    int grp = u0 / a.chunks, ch = u0 - grp * a.chunks, c0 = ch;
    for (int i = 0; i < nu; i++) {
        gv_stage<F, NT, STAGES>(p, acc, ring, ring_a, full, empty, i, ch * GV_CW + warp, warp,
                                lane);
        if (++ch == a.chunks || i == nu - 1) {
            gv_flush<NT>(p, a, acc, red, &last_flag, grp, c0, ch, warp, lane);
            ch = c0 = 0;
            grp++;
        }
    }
}

/* One launch of gemm_gemv_kernel<F, NT, G, CL> (clusters of a.cluster CTAs
 * when CL), or with resident set the CTAs of it one SM holds, or with
 * clusters set the clusters the GPU holds (the grid unused) */
template <int F, int NT, bool G, bool CL>
static cudaError_t gemv_k(unsigned grid, const Params *p, const SkinnyMaps *mp,
                          const GemvArgs *a, int pdl, int csize, int *resident, int *clusters,
                          cudaStream_t s)
{
    constexpr int smem = gemv_smem<F, NT, G, CL>();
    auto kern = gemm_gemv_kernel<F, NT, G, CL>;
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    if (resident)
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, kern, GV_THREADS, smem);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(clusters ? (unsigned)csize : grid);
    cfg.blockDim = dim3(GV_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[2];
    int na = 0;
    if (CL) {
        attr[na].id = cudaLaunchAttributeClusterDimension;
        attr[na].val.clusterDim.x = (unsigned)csize;
        attr[na].val.clusterDim.y = 1;
        attr[na++].val.clusterDim.z = 1;
    }
    if (pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = na;
    if (clusters)
        return cudaOccupancyMaxActiveClusters(clusters, kern, &cfg);
    return cudaLaunchKernelEx(&cfg, kern, *p, *mp, *a);
}

static cudaError_t gemv_any(int fmt_kind, int nt, bool grouped, unsigned grid, const Params *p,
                            const SkinnyMaps *mp, const GemvArgs *a, int pdl, int csize,
                            int *resident, int *clusters, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        if (grouped)
            return nt == 1
                       ? gemv_k<F, 1, true, false>(grid, p, mp, a, pdl, 0, resident, nullptr, s)
                       : gemv_k<F, 2, true, false>(grid, p, mp, a, pdl, 0, resident, nullptr, s);
        if (csize > 0)
            return nt == 1
                       ? gemv_k<F, 1, false, true>(grid, p, mp, a, pdl, csize, resident, clusters, s)
                       : gemv_k<F, 2, false, true>(grid, p, mp, a, pdl, csize, resident, clusters, s);
        return nt == 1 ? gemv_k<F, 1, false, false>(grid, p, mp, a, pdl, 0, resident, nullptr, s)
                       : gemv_k<F, 2, false, false>(grid, p, mp, a, pdl, 0, resident, nullptr, s);
    });
}

bool gemv_stages_x() { return GV_XSMEM; }

int gemv_resident_ctas(int fmt_kind, int nt, bool grouped)
{
    static int cache[5][2][2]; /* the same value every time: a race is harmless */
    int &c = cache[fmt_kind][nt == 1 ? 0 : 1][grouped ? 1 : 0];
    if (c == 0) {
        int blocks = 0;
        if (gemv_any(fmt_kind, nt, grouped, 1, nullptr, nullptr, nullptr, 0, 0, &blocks, nullptr,
                     0) != cudaSuccess ||
            blocks < 1)
            blocks = 1;
        c = blocks;
    }
    return c;
}

int gemv_cluster_capacity(int fmt_kind, int nt, int size)
{
    static int cache[5][2][4]; /* size 1, 2, 4, 8; -1: the query failed */
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return 0;
    const int si = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3;
    int &c = cache[fmt_kind][nt == 1 ? 0 : 1][si];
    if (c == 0) {
        int n = 0;
        if (gemv_any(fmt_kind, nt, false, 0, nullptr, nullptr, nullptr, 0, size, nullptr, &n, 0) !=
                cudaSuccess ||
            n < 1) {
            (void)cudaGetLastError(); /* a refused query leaves no error behind */
            n = -1;
        }
        c = n;
    }
    return c > 0 ? c : 0;
}

cudaError_t launch_gemv(int fmt_kind, const Params &p, const SkinnyMaps &maps, const GemvArgs &a,
                        int nt, unsigned grid, int pdl, cudaStream_t s, bool grouped)
{
    cudaError_t e = gemv_any(fmt_kind, nt, grouped, grid, &p, &maps, &a, pdl,
                             grouped ? 0 : a.cluster, nullptr, nullptr, s);
    return e == cudaSuccess ? cudaGetLastError() : e;
}

} // namespace bfpgemm
