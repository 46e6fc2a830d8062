/* wgmma_issue_probe.cu - does issuing wgmma hold the issuing warp? The
 * question behind the wgmma kernel's per-tile cost (docs/gemm.md, "What a k
 * tile costs"): one warp reads the SM clock before its warpgroup issues a
 * group of wgmma m64n128k16 (A from registers, as the kernel's), after the
 * commit, and after wait_group 0. If the issue returns at once, "issue" is a
 * few tens of cycles and "drain" the group's tensor-core time; if it holds
 * the warp, "issue" takes most of it. Cases: one or two warpgroups issuing
 * at the same time (the kernel has two consumers), and groups of 4 wgmma (the
 * kernel's default) or of 1 (its k16-step mainloop). One CTA per SM, every
 * SM busy; medians over the SMs' samples, in SM clock cycles.
 *
 *   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Isrc/cuda -Itests \
 *       bench/wgmma_issue_probe.cu -o probe && ./probe [OUT.json]
 */
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"
#include "gemm_wgmma_mma.cuh"

using namespace bfpgemm::wg;

constexpr int ITERS = 64;

__device__ __forceinline__ uint32_t sm_clock()
{
    uint32_t c;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory");
    return c;
}

/* per CTA and iteration: {issue, drain} of warp 0 of each issuing warpgroup */
template <int PER_GROUP>
__global__ void __launch_bounds__(256, 1) probe(int groups_issuing, uint32_t *out)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    /* the 128-byte swizzle's B tile starts on 1024 bytes */
    unsigned char *smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    for (int i = threadIdx.x; i < 16384 / 4; i += blockDim.x)
        reinterpret_cast<uint32_t *>(smem)[i] = 0x3F803F80u; /* 1.0 bf16 pairs */
    __syncthreads();
    if (wg >= groups_issuing)
        return;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = 0.0f;
    uint32_t a[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            a[j][e] = 0x3F803F80u + (uint32_t)(threadIdx.x & 1);
    const uint64_t d0 = desc_sw128((uint32_t)__cvta_generic_to_shared(smem));
    for (int it = 0; it < ITERS; it++) {
        const uint32_t t0 = sm_clock();
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (PER_GROUP == 1 || j == 0) {
                fence_regs(acc);
                wgmma_fence();
            }
            wgmma_n128(acc, a[j], d0 + (uint64_t)(2 * j));
            if (PER_GROUP == 1 || j == 3)
                wgmma_commit();
        }
        const uint32_t t1 = sm_clock();
        wgmma_wait0();
        fence_regs(acc);
        keep_live(a);
        const uint32_t t2 = sm_clock();
        if (warp == 0 && lane == 0) {
            uint32_t *o = out + (((size_t)blockIdx.x * 2 + wg) * ITERS + it) * 2;
            o[0] = t1 - t0;
            o[1] = t2 - t1;
        }
    }
    float s = 0.0f; /* the sums leave the kernel, so the multiplies stay */
#pragma unroll
    for (int i = 0; i < 64; i++)
        s += acc[i];
    if (s == 12345.0f)
        out[0] = 0;
}

template <int PER_GROUP>
static void run(int ctas, int groups_issuing, FILE *json, bool *first)
{
    std::vector<uint32_t> h((size_t)ctas * 2 * ITERS * 2);
    uint32_t *d;
    CU(cudaMalloc(&d, h.size() * 4));
    CU(cudaMemset(d, 0, h.size() * 4));
    CU(cudaFuncSetAttribute(probe<PER_GROUP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            16384 + 1024));
    for (int rep = 0; rep < 2; rep++) /* the first launch warms up */
        probe<PER_GROUP><<<ctas, 256, 16384 + 1024>>>(groups_issuing, d);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
    CU(cudaFree(d));
    std::vector<double> issue, drain;
    for (int c = 0; c < ctas; c++)
        for (int w = 0; w < groups_issuing; w++)
            for (int it = 4; it < ITERS; it++) { /* past the first iterations */
                const uint32_t *o = &h[(((size_t)c * 2 + w) * ITERS + it) * 2];
                issue.push_back(o[0]);
                drain.push_back(o[1]);
            }
    auto med = [](std::vector<double> &v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? -1.0 : v[v.size() / 2];
    };
    const double mi = med(issue), md = med(drain);
    printf("%d wgmma a group, %d warpgroup(s) issuing: issue %.0f, drain %.0f cycles (4 wgmma "
           "at the tensor cores' peak rate: 256)\n",
           PER_GROUP == 1 ? 1 : 4, groups_issuing, mi, md);
    fprintf(json,
            "%s{\"wgmma_per_group\": %d, \"warpgroups\": %d, \"issue_cycles\": %.0f, "
            "\"drain_cycles\": %.0f}",
            *first ? "" : ", ", PER_GROUP == 1 ? 1 : 4, groups_issuing, mi, md);
    *first = false;
}

int main(int argc, char **argv)
{
    int dev = 0, sms = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        printf("skipped: no GPU\n");
        return 0;
    }
    if (major != 9) {
        printf("wgmma_issue_probe: needs compute capability 9.0 (sm_90a)\n");
        return 1;
    }
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    FILE *json = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
    if (!json) {
        fprintf(stderr, "wgmma_issue_probe: cannot write %s\n", argv[1]);
        return 1;
    }
    fprintf(json, "{\"sms\": %d, \"cases\": [", sms);
    bool first = true;
    for (int g = 1; g <= 2; g++) {
        run<4>(sms, g, json, &first);
        run<1>(sms, g, json, &first);
    }
    fprintf(json, "]}\n");
    fclose(json);
    return 0;
}
