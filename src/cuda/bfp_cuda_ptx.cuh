/* bfp_cuda_ptx.cuh - packed bf16x2 and 16x2 integer instructions and PTX's
 * PRMT, each with a host branch that emulates it exactly (the tools/dev
 * emulation tests run the kernels that use them on the host). Shared by the
 * quantizers and the matmul. */
#ifndef BFP_CUDA_PTX_CUH
#define BFP_CUDA_PTX_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#ifndef __CUDA_ARCH__
#include <cmath>
#include <cstring>
#endif

namespace bfpcuda {

/* ---- packed helpers; the #else branches emulate them exactly on the host
 * (tools/dev/quant_emul.cc runs the encoders there against the reference) */

#ifndef __CUDA_ARCH__
/* bf16 bits of the RNE rounding of s + err, where s is a double and err the
 * exact error of the double operation that gave s (|err| <= half an ulp of
 * s): a bf16 tie point is a double, so err matters only when s is one. */
inline uint32_t bf16_rne_host(double s, double err)
{
    if (s != s)
        return 0x7FFFu; /* canonical NaN */
    uint32_t sign = s < 0 || (s == 0 && std::signbit(s)) ? 0x8000u : 0u;
    double a = std::fabs(s), ea = s < 0 ? -err : err;
    if (a == 0 || a == HUGE_VAL)
        return sign | (a == 0 ? 0u : 0x7F80u);
    int e;
    std::frexp(a, &e);                  /* a in [2^(e-1), 2^e) */
    int q = e - 8 < -133 ? -133 : e - 8; /* the bf16 quantum at a */
    double t = std::ldexp(a, -q), fl = std::floor(t), fr = t - fl;
    bool up = fr > 0.5 || (fr == 0.5 && (ea > 0 || (ea == 0 && std::fmod(fl, 2.0) != 0)));
    double r = std::ldexp(fl + (up ? 1 : 0), q);
    if (r > 3.4e38)
        return sign | 0x7F80u; /* beyond the largest bf16: +-Inf */
    float f = (float)r;         /* exact: 8 significant bits */
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return sign | (b >> 16 & 0x7FFFu);
}

inline double bf16_host(uint32_t h)
{
    uint32_t b = h << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return (double)f;
}

/* lane-wise a * b + c with one rounding (products of bf16 are exact in double) */
inline uint32_t bf2_fma_host(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d = 0;
    for (int l = 0; l < 2; l++) {
        double p = bf16_host(a >> 16 * l & 0xFFFFu) * bf16_host(b >> 16 * l & 0xFFFFu);
        double cc = bf16_host(c >> 16 * l & 0xFFFFu), s = p + cc;
        double bb = s - p, err = (p - (s - bb)) + (cc - bb); /* TwoSum: s + err == p + cc */
        d |= bf16_rne_host(s, std::isfinite(s) ? err : 0.0) << 16 * l;
    }
    return d;
}
#endif

__device__ __forceinline__ uint32_t bf2_mul(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return bf2_fma_host(a, b, 0x80008000u); /* + (-0): keeps a product's zero sign */
#endif
}

__device__ __forceinline__ uint32_t bf2_add(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return bf2_fma_host(a, 0x3F803F80u, b); /* a * 1 + b */
#endif
}

/* a * b + c rounded once (sm_80) */
__device__ __forceinline__ uint32_t bf2_fma(uint32_t a, uint32_t b, uint32_t c)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    return bf2_fma_host(a, b, c);
#endif
}

__device__ __forceinline__ uint32_t max_u16x2(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    uint32_t lo = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
    return lo | ((a >> 16) > (b >> 16) ? a >> 16 : b >> 16) << 16;
#endif
}

__device__ __forceinline__ uint32_t min_u16x2(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    uint32_t lo = (a & 0xFFFFu) < (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
    return lo | ((a >> 16) < (b >> 16) ? a >> 16 : b >> 16) << 16;
#endif
}

/* PRMT as PTX defines it: a selector nibble with bit 3 set replicates the
 * chosen byte's top bit (__byte_perm is documented to use 3 bits only) */
__device__ __forceinline__ uint32_t prmt_sx(uint32_t a, uint32_t b, uint32_t s)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
    return d;
#else
    uint64_t v = (uint64_t)b << 32 | a;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t n = s >> 4 * i & 0xFu, c = (uint32_t)(v >> 8 * (n & 7u)) & 0xFFu;
        r |= (n & 8u ? (c & 0x80u ? 0xFFu : 0u) : c) << 8 * i;
    }
    return r;
#endif
}

} // namespace bfpcuda

#endif /* BFP_CUDA_PTX_CUH */
