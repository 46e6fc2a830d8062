/* gemm_internal.h - between the matmul host code (gemm.cu) and the fused
 * kernel's launcher (gemm_fused.cu). */
#pragma once
#include "gemm_fused.cuh"

#include <cuda_runtime.h>

namespace bfpgemm {

/* Launch the fused kernel for a format kind (FMT_*) with nt n8 tiles of x
 * per CTA on grid (CTA columns, splits, m chunks). */
cudaError_t launch_fused(int fmt_kind, const Params &p, int nt, dim3 grid, cudaStream_t s);

} // namespace bfpgemm
