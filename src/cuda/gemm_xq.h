/* gemm_xq.h - what the quantized-x matmul (gemm_xq.cu) reads of a packed
 * weight: its planar planes, which gemm.cu's view keeps on the device. */
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

/* the planar planes of a weight view (gemm.cu) */
void weight_planar(const bfp_cuda_weight *w, WeightPlanar *out);

} // namespace bfpgemm
