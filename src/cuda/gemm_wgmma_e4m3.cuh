/* gemm_wgmma_e4m3.cuh - wgmma.mma_async m64nNk32 e4m3 x e4m3 -> f32 with
 * scale-d = 0 (D = A . B, the accumulator's old value ignored): the block
 * partials of the quantized-x wgmma kernel (gemm_xq_wgmma.cu). A from
 * registers, 4 per thread: the mma.m16n8k32 A fragment of the warp's 16
 * rows (reg 0: row g, k 4t..4t+3; 1: row g + 8, the same k; 2 and 3: k + 16),
 * B by shared-memory descriptor (K-major; 8-bit wgmma has no transpose).
 * D as gemm_wgmma_mma.cuh's: d[4q + e] is (row g + 8 (e / 2), col 8q + 2t +
 * e % 2). N = 8, 16, 32, 64. Needs sm_90a. */
#pragma once
#include <stdint.h>

namespace bfpgemm {
namespace wg {

__device__ __forceinline__ void wgmma_e4m3_n8(float (&d)[4], const uint32_t (&a)[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
                 "{"
                 "%0,%1,%2,%3"
                 "}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wgmma_e4m3_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
                 "{"
                 "%0,%1,%2,%3,%4,%5,%6,%7"
                 "}, {%8,%9,%10,%11}, %12, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wgmma_e4m3_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
                 "{"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
                 "}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wgmma_e4m3_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
                 "{"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                 "}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* D = A . B for N = BN (8, 16, 32 or 64) */
template <int BN>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t desc)
{
    if constexpr (BN == 8)
        wgmma_e4m3_n8(d, a, desc);
    else if constexpr (BN == 16)
        wgmma_e4m3_n16(d, a, desc);
    else if constexpr (BN == 32)
        wgmma_e4m3_n32(d, a, desc);
    else
        wgmma_e4m3_n64(d, a, desc);
}

} // namespace wg
} // namespace bfpgemm
