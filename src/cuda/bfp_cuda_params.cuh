/* bfp_cuda_params.cuh - what every GPU quantize and dequantize kernel is
 * given (QParams, DParams), how it is launched (BFP_LAUNCH, the grid
 * helpers, Tiling) and how it writes a thread's codes. */
#ifndef BFP_CUDA_PARAMS_CUH
#define BFP_CUDA_PARAMS_CUH

#include "bfp_cuda_common.cuh"

#include <float.h>
#include <limits.h>

namespace bfpcuda {

/* kernel<<<grid, block, 0, stream>>>(args), as a macro so that the kernels
 * can also run in a host-side warp simulator during development */
#ifndef BFP_LAUNCH
#define BFP_LAUNCH(kernel, grid, block, stream, ...) kernel<<<grid, block, 0, stream>>>(__VA_ARGS__)
#endif

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        if ((call) != cudaSuccess)                                             \
            return BFP_ERR_DEVICE;                                             \
    } while (0)

struct QParams {
    Layout L;
    const unsigned char *src;
    int dt;
    bool vec_in, vec_out;
    unsigned char *codes;
    size_t crb; /* code bytes per row */
    size_t G;   /* blocks per row */
    unsigned char *scales, *meta;
    float *tscale;
    unsigned long long *nonfinite;
    uint64_t seed;
    int mode, scale_mode, no_ts;
    int swz;
    size_t swz_ncol;
};

struct DParams {
    Layout L;
    const unsigned char *codes;
    size_t crb, G;
    bool vec_in, vec_out;
    const unsigned char *scales, *meta;
    const float *tscale;
    unsigned char *dst;
    int dt;
};

__device__ __forceinline__ size_t scale_index(const QParams &P, size_t row, size_t blk)
{
    return P.swz ? swizzle_offset(row, blk, P.swz_ncol) : row * P.G + blk;
}

template <int W>
__device__ __forceinline__ void pack(PackT<W> &packed, uint32_t code, int j)
{
    packed |= (PackT<W>)code << (W * j);
}

template <int W>
__device__ __forceinline__ void put_codes(const QParams &P, size_t row, size_t col0, int n,
                                          PackT<W> packed)
{
    if (n <= 0)
        return;
    size_t off = col0 / 8 * W;
    size_t left = P.crb - off;
    int nb = left < (size_t)W ? (int)left : W;
    store_codes<W>(P.codes + row * P.crb + off, packed, nb, P.vec_out);
}

/* Groups of QU consecutive rows per thread in the format's default rounding
 * mode (the hot path): all QU loads are issued before any is used, and the
 * per-thread setup is paid once for 8 * QU elements. */
constexpr int QU = 4;

/* CTAs of a grid-stride kernel of 256 threads with one thread per item:
 * one pass, at most 2^20 CTAs (the threads stride over the rest) */
inline unsigned stride_grid(size_t items)
{
    size_t ctas = (items + 255) / 256;
    return (unsigned)(ctas < (1u << 20) ? ctas : (1u << 20));
}

/* CTA tiling for one thread per 8 elements and T threads per block. */
struct Tiling {
    Layout L;
    unsigned gx;
    size_t rows_per_launch;
};

} // namespace bfpcuda

#endif /* BFP_CUDA_PARAMS_CUH */
