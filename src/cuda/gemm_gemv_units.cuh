/* gemm_gemv_units.cuh - where a grouped GEMV call's units are (gemm_gemv.cu
 * with G): a unit's expert, rows of x, group and chunk from its index, or
 * from the unit before it. Host-compilable (tools/dev/gemv_units_emul.cc
 * checks them without a GPU). */
#pragma once
#include "gemm_grouped.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

/* A grouped call's unit u (G): expert e, the first of its 8 NT rows of x
 * (row0) and how many of them it has (rows), the group and chunk. Units are
 * [expert][m chunk][group][chunk] (gemm_grouped.cuh count_units:
 * ceil(rows / 8 NT) * groups * chunks per expert), so (u - ch) / chunks
 * numbers the (expert, m chunk, group) triples: their counters. */
template <int NT>
__device__ __forceinline__ void gv_unit(const GemvArgs &a, const int *upre, int u, int *e,
                                        int *row0, int *rows, int *grp, int *ch)
{
    *e = expert_of(upre, a.e_count, u);
    const int local = u - upre[*e], per = a.groups * a.chunks;
    const int mc = local / per, rem = local - mc * per;
    int ra, rb;
    expert_rows(a.offsets, a.t_rows, *e, &ra, &rb);
    *row0 = ra + mc * 8 * NT;
    *rows = min(8 * NT, rb - *row0);
    *grp = rem / a.chunks;
    *ch = rem - *grp * a.chunks;
}

/* BFP_GV_STEP 1 (a build variant, for bench/gemv_ab.sh): a grouped call's
 * producer and consumers step from one unit to the next (gv_next) instead
 * of finding each from its index (gv_unit: a search of the unit counts and
 * integer divisions) */
#ifndef BFP_GV_STEP
#define BFP_GV_STEP 0
#endif

/* The unit after one (e, row0, rows, grp, ch; ch may be a.chunks at a
 * group's end) in the order [expert][m chunk][group][chunk], empty experts
 * skipped: what gv_unit gives for the next index. Only where that unit
 * exists (index < upre[e_count]). */
template <int NT>
__device__ __forceinline__ void gv_next(const GemvArgs &a, const int *upre, int *e, int *row0,
                                        int *rows, int *grp, int *ch)
{
    if (++*ch < a.chunks)
        return;
    *ch = 0;
    if (++*grp < a.groups)
        return;
    *grp = 0;
    int ra, rb;
    expert_rows(a.offsets, a.t_rows, *e, &ra, &rb);
    if (*row0 + 8 * NT < rb) { /* e's next m chunk */
        *row0 += 8 * NT;
        *rows = min(8 * NT, rb - *row0);
        return;
    }
    do
        ++*e;
    while (*e < a.e_count - 1 && upre[*e + 1] == upre[*e]);
    expert_rows(a.offsets, a.t_rows, *e, &ra, &rb);
    *row0 = ra;
    *rows = min(8 * NT, rb - ra);
}

/* Unit u0 + i of a run walked from i = 0: found from its index, or with
 * BFP_GV_STEP the one after unit u0 + i - 1 (in e ... ch) */
template <int NT>
__device__ __forceinline__ void gv_walk(const GemvArgs &a, const int *upre, int u0, int i, int *e,
                                        int *row0, int *rows, int *grp, int *ch)
{
    if (BFP_GV_STEP && i > 0)
        gv_next<NT>(a, upre, e, row0, rows, grp, ch);
    else
        gv_unit<NT>(a, upre, u0 + i, e, row0, rows, grp, ch);
}

} // namespace bfpgemm
