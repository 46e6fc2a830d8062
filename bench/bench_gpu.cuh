/* bench_gpu.cuh - what the GPU benchmarks (bench/gpu_*.cu) share.
 *
 * graph_us: the one way they time a call: `calls`
 * launches f(0), f(1), ... (each may pick its own rotating weight or
 * routing) captured on stream s as one CUDA graph, the graph replayed
 * `reps` times; the median replay over `calls` is the time per call, in µs.
 * So no side pays for host launches, as the torch peers (torch.cuda.graph)
 * don't. Two uncaptured calls first: handles, kernel attributes, lazy
 * module loading. */
#ifndef BFP_BENCH_GPU_CUH
#define BFP_BENCH_GPU_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

#include "bfp.h"
#include "cuda_check.h" /* tests/ */

/* element i's 64 random bits in a fill seeded with seed (splitmix64) */
__device__ __forceinline__ uint64_t fill_bits(uint64_t seed, size_t i)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* random bf16 times scale: normal-ish (three 16-bit uniforms summed), one
 * in 512 twenty times larger */
__global__ void fill_bf16_outliers(__nv_bfloat16 *x, size_t n, uint64_t seed, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t z = fill_bits(seed, i);
        float g = ((float)(z & 0xFFFF) + (float)((z >> 16) & 0xFFFF) +
                   (float)((z >> 32) & 0xFFFF)) / 65536.0f - 1.5f;
        if (((z >> 48) & 511) == 0)
            g *= 20.0f;
        x[i] = __float2bfloat16_rn(g * scale);
    }
}

template <class F> static double graph_us(cudaStream_t s, F f, int calls = 20, int reps = 7)
{
    f(0);
    f(1 % calls);
    CU(cudaStreamSynchronize(s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < calls; i++)
        f(i);
    CU(cudaStreamEndCapture(s, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphLaunch(ge, s)); /* the first replay uploads the graph */
    CU(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        CU(cudaEventRecord(a, s));
        CU(cudaGraphLaunch(ge, s));
        CU(cudaEventRecord(b, s));
        CU(cudaEventSynchronize(b));
        float ms;
        CU(cudaEventElapsedTime(&ms, a, b));
        t.push_back(1000.0 * ms / calls);
    }
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* GB/s (bytes read + written) of `per_rep` back-to-back D2D copies of
 * `bytes` on s, median of `reps` timed reps after one warm-up: the
 * roofline's reference. Stream launches, not a graph: a captured copy runs on
 * a copy engine, slower than the copy kernel a stream runs (2.4 against 3.0
 * TB/s on an H100). */
static double stream_copy_gbps(cudaStream_t s, size_t bytes, int per_rep, int reps)
{
    void *a, *b;
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    CU(cudaMemsetAsync(a, 1, bytes, s));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int r = 0; r <= reps; r++) {
        CU(cudaEventRecord(e0, s));
        for (int i = 0; i < per_rep; i++)
            CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CU(cudaEventRecord(e1, s));
        CU(cudaEventSynchronize(e1));
        float ms;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (r) /* rep 0 warms up */
            t.push_back(ms / per_rep);
    }
    std::sort(t.begin(), t.end());
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    CU(cudaFree(a));
    CU(cudaFree(b));
    return 2.0 * (double)bytes / (t[t.size() / 2] * 1e6);
}

/* ||y - ref|| / ||ref|| of n bf16 outputs against fp32 ones (both on the
 * device); NaN when y holds a NaN */
static double rel_err(const __nv_bfloat16 *dy, const float *dref, size_t n)
{
    std::vector<uint16_t> y(n);
    std::vector<float> r(n);
    CU(cudaMemcpy(y.data(), dy, n * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(r.data(), dref, n * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double v = bfp_bf16_to_f32(y[i]), d = v - r[i];
        if (isnan(v))
            return NAN;
        num += d * d;
        den += (double)r[i] * r[i];
    }
    return sqrt(num / den);
}

/* a bfp_matmul_path's name in the benchmarks' tables and JSON */
static const char *path_name(bfp_matmul_path p)
{
    static const char *const names[] = {"auto",      "fused", "dequant+cublas", "skinny",
                                        "(retired)", "wgmma", "gemv"};
    return p >= 0 && p < (int)(sizeof names / sizeof names[0]) ? names[p] : "?";
}

#endif
