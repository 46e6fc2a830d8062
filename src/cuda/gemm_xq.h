/* gemm_xq.h - what the quantized-x matmul (gemm_xq.cu) reads of W: its
 * planar planes on the device (bfp_cuda_planar_weight) and their sizes. */
#pragma once
#include "bfp.h"

#include <stddef.h>
#include <stdint.h>

namespace bfpgemm {

struct WeightPlanar {
    bfp_format fmt;
    size_t n, k;
    bfp_plane_sizes sz;
    const uint8_t *codes, *scales, *meta; /* device */
    float ts;                             /* NVFP4(+) s_enc, else 1 */
};


} // namespace bfpgemm
