/* gemm_internal.h - between the matmul host code (gemm.cu) and the kernels'
 * launchers (gemm_fused.cu, gemm_skinny.cu). */
#pragma once
#include "gemm_fused.cuh"

#include <cuda_runtime.h>

namespace bfpgemm {

/* Launch the fused kernel for a format kind (FMT_*) with nt n8 tiles of x
 * per CTA on grid (CTA columns, splits, m chunks). */
cudaError_t launch_fused(int fmt_kind, const Params &p, int nt, dim3 grid, cudaStream_t s);

/* The skinny kernel (gemm_skinny.cu, m <= 32): nt = 1, 2 or 4 n8 tiles of
 * x; a unit is skinny_rows(nt) row tiles of W by one k tile. */
constexpr int skinny_rows(int nt) { return nt == 4 ? 2 : 4; }
/* warps of it that one SM holds at once */
int skinny_resident_warps(int fmt_kind, int nt);
/* grid: ceil(p.units / p.upw) warps */
cudaError_t launch_skinny(int fmt_kind, const Params &p, int nt, cudaStream_t s);

} // namespace bfpgemm
