/* gemm_async.cuh - mbarrier and TMA tensor-copy wrappers (PTX ISA 8.0, sm_90)
 * shared by the matmul kernels that stage operands with the copy engine
 * (gemm_skinny.cu, gemm_wgmma.cu, gemm_grouped_wgmma.cu, gemm_gemv.cu), and
 * the cluster primitives with which the GEMV kernel's CTAs add their sums
 * in each other's shared memory. */
#ifndef BFP_GEMM_ASYNC_CUH
#define BFP_GEMM_ASYNC_CUH

#include <cuda.h> /* CUtensorMap */
#include <stdint.h>

namespace bfpgemm {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* a barrier that completes a phase after COUNT arrivals */
template <unsigned COUNT>
__device__ __forceinline__ void mbar_init(uint32_t bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "n"(COUNT) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* mbar_arrive when go is nonzero, by a predicate rather than a branch: a
 * branch between a wgmma and the wait that retires it made ptxas
 * serialize every wgmma of the kernel (gemm_wgmma_parts.cuh) */
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, uint32_t go)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %1, 0;\n"
                 "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}" ::"r"(bar),
                 "r"(go)
                 : "memory");
}

/* Spin on try_wait.parity until the phase of parity has completed; SEM
 * the wait's semantics (mbar_wait_cluster also acquires what other CTAs of
 * the cluster released with their arrivals, cl_arrive) */
#define BFP_MBAR_WAIT(name, sem)                                                                \
    __device__ __forceinline__ void name(uint32_t bar, uint32_t parity)                          \
    {                                                                                            \
        uint32_t done = 0;                                                                       \
        while (!done)                                                                            \
            asm volatile("{ .reg .pred p;\n"                                                     \
                         "mbarrier.try_wait.parity" sem ".shared::cta.b64 p, [%1], %2;\n"        \
                         "selp.u32 %0, 1, 0, p; }"                                               \
                         : "=r"(done)                                                            \
                         : "r"(bar), "r"(parity)                                                 \
                         : "memory");                                                            \
    }
BFP_MBAR_WAIT(mbar_wait, "")
BFP_MBAR_WAIT(mbar_wait_cluster, ".acquire.cluster")
#undef BFP_MBAR_WAIT

/* mbar_init with a count known only at run time */
__device__ __forceinline__ void mbar_init_n(uint32_t bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/* Thread block clusters (PTX ISA 7.8, sm_90): this CTA's rank in its
 * cluster, the cluster's size, the cluster's index and the clusters in
 * the grid (1-D grids), each a special register */
#define BFP_CLUSTER_SREG(fn, reg)                                                          \
    __device__ __forceinline__ int fn()                                                    \
    {                                                                                      \
        uint32_t r;                                                                        \
        asm volatile("mov.u32 %0, %%" reg ";" : "=r"(r));                                  \
        return (int)r;                                                                     \
    }
BFP_CLUSTER_SREG(cl_rank, "cluster_ctarank")
BFP_CLUSTER_SREG(cl_size, "cluster_nctarank")
BFP_CLUSTER_SREG(cl_id, "clusterid.x")
BFP_CLUSTER_SREG(cl_count, "nclusterid.x")
#undef BFP_CLUSTER_SREG

/* the shared address a (of this CTA) in CTA rank r of the cluster */
__device__ __forceinline__ uint32_t cl_map(uint32_t a, int r)
{
    uint32_t d;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(r));
    return d;
}

/* a float into another CTA's shared memory (an address from cl_map) */
__device__ __forceinline__ void cl_st(uint32_t a, float v)
{
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory");
}

/* one arrival on another CTA's mbarrier (an address from cl_map),
 * releasing this thread's earlier writes to the cluster */
__device__ __forceinline__ void cl_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar)
                 : "memory");
}

/* every thread of every CTA of the cluster meets here (all must call it) */
__device__ __forceinline__ void cl_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}

/* The box of map at coordinates {c0, c1, c2} (innermost first) to shared
 * memory at dst; elements outside the tensor arrive as zeros and count in
 * the bytes (the whole box) */
__device__ __forceinline__ void tma_3d(uint32_t dst, const CUtensorMap &map, int c0, int c1,
                                       int c2, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

/* tma_3d with a fourth coordinate c3 (the expert of a grouped weight) */
__device__ __forceinline__ void tma_4d(uint32_t dst, const CUtensorMap &map, int c0, int c1,
                                       int c2, int c3, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void tma_2d(uint32_t dst, const CUtensorMap &map, int c0, int c1,
                                       uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

} // namespace bfpgemm

#endif /* BFP_GEMM_ASYNC_CUH */
