/* cuda_host_stubs.h - the CUDA built-ins the kernels' per-thread functions
 * use, with their IEEE / documented meaning on the host, for the emulation
 * tests (quant_emul.cc, dequant_emul.cc). The packed bf16x2 helpers and PRMT
 * with sign replication have their host branches in the kernels' headers.
 * One thread stands for a warp: a shuffle returns the caller's own value and
 * the callers combine lanes themselves. Include before the kernel headers. */
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>

static uint3 threadIdx, blockIdx, gridDim, blockDim;
static inline void __syncthreads() {}
static inline void __syncwarp(unsigned = 0xFFFFFFFFu) {}
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, int) { return v; }
template <typename T> static inline T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    uint64_t v = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) /* CUDA's meaning: 3 bits of each nibble */
        r |= ((unsigned)(v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rz(float a, float b)
{
    double d = (double)a + (double)b; /* exact for the uses here */
    float f = (float)d;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    return f;
}
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
static inline unsigned __ballot_sync(unsigned, int p) { return p ? 1u : 0u; }
static inline int __all_sync(unsigned, int p) { return p; }
static inline int __any_sync(unsigned, int p) { return p; }
#define __launch_bounds__(...)
#define BFP_LAUNCH(kernel, grid, block, stream, ...) (void)0
using std::max;
using std::min;
static inline size_t min(size_t a, size_t b) { return a < b ? a : b; }
#define atomicAdd(p, v) (*(p) += (v))
#define atomicMax(p, v) (*(p) = *(p) > (v) ? *(p) : (v))
