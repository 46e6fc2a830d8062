/* gpu_bench.cu - time bfp_cuda_quantize / bfp_cuda_dequantize for every
 * format, bf16 in and out, at 16384x16384 and 16x8192, with CUDA events,
 * against a device-to-device cudaMemcpy measured in the same run.
 *
 *   gpu_bench OUT.json
 *
 * Bytes moved = bytes the operation must read plus write at least once
 * (input, codes, scales, meta, tensor scale); GB/s = bytes / time; the
 * ratio is to the copy's (read + write) GB/s. Small inputs rotate over
 * enough buffers to exceed the L2 cache, so every call reads HBM. Inputs
 * are random bf16 (normal-ish, per-block scales spread over 2^-20..2^20,
 * outliers), made on the device.
 *
 * BFP_BENCH_DEQUANT_CTAS_PER_SM=N times the dequantizer with that launch
 * choice (bfp_cuda_tuning.quant.dequant_ctas_per_sm; unset: the default). */
#include "bfp.h"

#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_gpu.cuh"
#include "cuda_check.h" /* tests/ */

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

__global__ void fill_bf16(uint16_t *x, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t z = fill_bits(seed, i);
        uint64_t b = (seed + 0x9E3779B97F4A7C15ull * (i / 32 + 7)) * 0xBF58476D1CE4E5B9ull;
        float g = ((float)(z & 0xFFFF) + (float)((z >> 16) & 0xFFFF) + (float)((z >> 32) & 0xFFFF)) /
                      65536.0f - 1.5f;
        float v = ldexpf(g, (int)((b >> 40) % 41) - 20) * (((z >> 48) & 255) == 0 ? 64.0f : 1.0f);
        uint32_t u;
        memcpy(&u, &v, 4);
        x[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
}

struct Row {
    char format[40];
    const char *op;
    size_t rows, cols;
    double us, bytes;
};

static std::vector<Row> results;
static double copy_gbps;
static bfp_cuda_tuning tuning; /* zero: the library's defaults */

/* median per-call time in microseconds of `reps` batches of `batch` calls */
template <class F>
static double time_us(F call, int batch, int reps)
{
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        call(i);
    CU(cudaDeviceSynchronize());
    std::vector<float> t;
    int k = 0;
    for (int r = 0; r < reps; r++) {
        CU(cudaEventRecord(a));
        for (int i = 0; i < batch; i++)
            call(k++);
        CU(cudaEventRecord(b));
        CU(cudaEventSynchronize(b));
        float ms;
        CU(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f / (float)batch);
    }
    CU(cudaGetLastError());
    std::sort(t.begin(), t.end());
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    return t[t.size() / 2];
}

static void add(const char *fmt, const char *op, size_t rows, size_t cols, double us, double bytes)
{
    Row r;
    snprintf(r.format, sizeof r.format, "%s", fmt);
    r.op = op;
    r.rows = rows;
    r.cols = cols;
    r.us = us;
    r.bytes = bytes;
    results.push_back(r);
    double gbps = bytes / us / 1e3;
    printf("%-28s %-16s %6zux%-6zu %10.2f us %12.0f B %8.1f GB/s %6.1f%%\n", fmt, op, rows, cols,
           us, bytes, gbps, 100.0 * gbps / copy_gbps);
    fflush(stdout);
}

/* Bandwidth roofs for the byte mixes of the kernels: read one 16-byte vector
 * per thread and write R (expand: dequantize's mix, 4 for 4-bit codes to
 * bf16), or read R and write one (shrink: quantize's). Every access of a warp
 * is 512 contiguous bytes, as in the flat kernels. */
template <int R>
__global__ void expand_kernel(const uint4 *in, uint4 *out, size_t n_in)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_in)
        return;
    uint4 v = in[i];
#pragma unroll
    for (int j = 0; j < R; j++)
        out[i + j * n_in] = make_uint4(v.x ^ (unsigned)j, v.y, v.z, v.w);
}

template <int R>
__global__ void shrink_kernel(const uint4 *in, uint4 *out, size_t n_out)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_out)
        return;
    uint4 v = in[i];
#pragma unroll
    for (int j = 1; j < R; j++) {
        uint4 u = in[i + j * n_out];
        v = make_uint4(v.x ^ u.x, v.y ^ u.y, v.z ^ u.z, v.w ^ u.w);
    }
    out[i] = v;
}

struct Roof {
    const char *name;
    double read, written, us;
};
static std::vector<Roof> roofs;

static void add_roof(const char *name, double read, double written, double us)
{
    roofs.push_back({name, read, written, us});
    double gbps = (read + written) / us / 1e3;
    printf("roof %-34s %10.2f us %8.1f GB/s %6.1f%% of copy\n", name, us, gbps,
           100.0 * gbps / copy_gbps);
}

/* 512 MiB on the wide side, as the 16384x16384 bf16 tensor */
static void bench_roofs()
{
    const size_t wide = (size_t)512 << 20, nv = wide / 16;
    uint4 *a, *b;
    CU(cudaMalloc(&a, wide));
    CU(cudaMalloc(&b, wide));
    CU(cudaMemset(a, 1, wide));
    add_roof("write only (cudaMemsetAsync)", 0, (double)wide,
             time_us([&](int) { CU(cudaMemsetAsync(b, 0, wide)); }, 5, 11));
    add_roof("read 1 : write 2 (expand)", wide / 2.0, (double)wide, time_us([&](int) {
                 expand_kernel<2><<<(unsigned)((nv / 2 + 255) / 256), 256>>>(a, b, nv / 2);
             }, 5, 11));
    add_roof("read 1 : write 4 (expand)", wide / 4.0, (double)wide, time_us([&](int) {
                 expand_kernel<4><<<(unsigned)((nv / 4 + 255) / 256), 256>>>(a, b, nv / 4);
             }, 5, 11));
    add_roof("read 4 : write 1 (shrink)", (double)wide, wide / 4.0, time_us([&](int) {
                 shrink_kernel<4><<<(unsigned)((nv / 4 + 255) / 256), 256>>>(a, b, nv / 4);
             }, 5, 11));
    CU(cudaGetLastError());
    CU(cudaFree(a));
    CU(cudaFree(b));
}

static void bench_shape(size_t rows, size_t cols)
{
    size_t n = rows * cols;
    /* enough separate buffers that a round exceeds the 50 MB L2 */
    int nbuf = n * 2 >= ((size_t)256 << 20) ? 1 : (int)std::min<size_t>(512, ((size_t)160 << 20) / (n * 2) + 1);
    int batch = nbuf > 1 ? 100 : 5, reps = nbuf > 1 ? 9 : 11;
    std::vector<uint16_t *> src(nbuf), dq(nbuf);
    for (int i = 0; i < nbuf; i++) {
        CU(cudaMalloc(&src[i], n * 2));
        CU(cudaMalloc(&dq[i], n * 2));
        fill_bf16<<<1024, 256>>>(src[i], n, 1234 + (uint64_t)i);
        CU(cudaGetLastError());
    }
    CU(cudaDeviceSynchronize());
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        const bfp_format_info *f = bfp_format_at(fi);
        if (!in_env_list("BFP_BENCH_FORMATS", f->name)) /* limits the run (profiling) */
            continue;
        bfp_plane_sizes sz;
        BFP(bfp_plane_sizes_for(f->id, rows, cols, &sz));
        std::vector<bfp_planes> pl(nbuf);
        for (int i = 0; i < nbuf; i++) {
            CU(cudaMalloc(&pl[i].codes, sz.codes));
            CU(cudaMalloc(&pl[i].scales, sz.scales));
            CU(cudaMalloc(&pl[i].meta, sz.meta ? sz.meta : 1));
            CU(cudaMalloc(&pl[i].tensor_scale, 4));
        }
        double qbytes = (double)n * 2 + sz.codes + sz.scales + sz.meta + sz.tensor_scale;
        int variants = f->has_tensor_scale ? 2 : 1;
        for (int v = 0; v < variants; v++) {
            bfp_options o;
            bfp_options_init(&o);
            o.nvfp4_no_tensor_scale = v;
            char name[40];
            snprintf(name, sizeof name, "%s%s", f->name, v ? " (no tensor scale)" : "");
            double us = time_us(
                [&](int k) {
                    int i = k % nbuf;
                    BFP(bfp_cuda_quantize(f->id, BFP_DTYPE_BF16, src[i], rows, cols, &o, 0,
                                          &pl[i], NULL, NULL));
                },
                batch, reps);
            add(name, "quantize", rows, cols, us, qbytes);
        }
        double dbytes = (double)sz.codes + sz.scales + sz.meta + sz.tensor_scale + (double)n * 2;
        double us = time_us(
            [&](int k) {
                int i = k % nbuf;
                bfp_const_planes cp = {pl[i].codes, pl[i].scales, pl[i].meta, pl[i].tensor_scale};
                BFP(bfp_cuda_dequantize_tuned(f->id, &cp, rows, cols, BFP_DTYPE_BF16, dq[i], NULL,
                                              &tuning));
            },
            batch, reps);
        add(f->name, "dequantize", rows, cols, us, dbytes);
        for (int i = 0; i < nbuf; i++) {
            CU(cudaFree(pl[i].codes));
            CU(cudaFree(pl[i].scales));
            CU(cudaFree(pl[i].meta));
            CU(cudaFree(pl[i].tensor_scale));
        }
    }
    for (int i = 0; i < nbuf; i++) {
        CU(cudaFree(src[i]));
        CU(cudaFree(dq[i]));
    }
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "gpu_bench.json";
    if (const char *e = getenv("BFP_BENCH_DEQUANT_CTAS_PER_SM"))
        tuning.quant.dequant_ctas_per_sm = (unsigned)strtoul(e, NULL, 10);
    if (!bfp_cuda_available()) {
        fprintf(stderr, "no usable GPU\n");
        return 1;
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    /* device-to-device copy of 512 MiB: bytes read + written */
    size_t cn = (size_t)512 << 20;
    void *ca, *cb;
    CU(cudaMalloc(&ca, cn));
    CU(cudaMalloc(&cb, cn));
    CU(cudaMemset(ca, 1, cn));
    double cus = time_us([&](int) { CU(cudaMemcpyAsync(cb, ca, cn, cudaMemcpyDeviceToDevice)); }, 5, 11);
    copy_gbps = 2.0 * (double)cn / cus / 1e3;
    CU(cudaFree(ca));
    CU(cudaFree(cb));
    printf("GPU: %s, %d SMs; device copy (512 MiB, read + write): %.1f GB/s\n", prop.name,
           prop.multiProcessorCount, copy_gbps);
    printf("%-28s %-16s %13s %13s %14s %13s %7s\n", "format", "op (bf16)", "shape", "time",
           "bytes", "GB/s", "of copy");
    bench_roofs();
    bench_shape(16384, 16384);
    if (!getenv("BFP_BENCH_BIG_ONLY"))
        bench_shape(16, 8192);

    FILE *fp = fopen(out, "w");
    if (!fp) {
        perror(out);
        return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(fp, "{\"date\": \"%s\", \"gpu\": \"%s\", \"copy_gbps\": %.1f, \"results\": [\n", date,
            prop.name, copy_gbps);
    for (size_t i = 0; i < results.size(); i++) {
        const Row &r = results[i];
        double gbps = r.bytes / r.us / 1e3;
        fprintf(fp,
                "  {\"format\": \"%s\", \"op\": \"%s\", \"dtype\": \"bf16\", \"rows\": %zu, "
                "\"cols\": %zu, \"us\": %.3f, \"bytes\": %.0f, \"gbps\": %.1f, "
                "\"ratio_to_copy\": %.4f}%s\n",
                r.format, r.op, r.rows, r.cols, r.us, r.bytes, gbps, gbps / copy_gbps,
                i + 1 < results.size() ? "," : "");
    }
    fprintf(fp, "], \"roofs\": [\n");
    for (size_t i = 0; i < roofs.size(); i++) {
        const Roof &r = roofs[i];
        double gbps = (r.read + r.written) / r.us / 1e3;
        fprintf(fp,
                "  {\"name\": \"%s\", \"read\": %.0f, \"written\": %.0f, \"us\": %.3f, "
                "\"gbps\": %.1f, \"ratio_to_copy\": %.4f}%s\n",
                r.name, r.read, r.written, r.us, gbps, gbps / copy_gbps,
                i + 1 < roofs.size() ? "," : "");
    }
    fprintf(fp, "]}\n");
    fclose(fp);
    return 0;
}
