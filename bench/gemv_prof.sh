#!/usr/bin/env bash
# bench/gemv_prof.sh - ncu profiles of the GEMV kernel at one row of x per
# expert, grouped against dense at the same weight bytes, so that the grouped
# call's cost beyond streaming (docs/gemm.md, issue #23's T = 1 roofline) is
# split into the kernel's own time and what lies outside it: the grouped
# GEMV's first launch in gpu_moe's t1 set (gpt-oss-120b gate_up, mxfp4, T = 1,
# uniform routing: 4 experts of 5760 x 2880) and the dense GEMV (path 6) at
# m = 1 on 23040 x 2880 (the same 4 x 5760 rows). ncu flushes the caches
# before each profiled launch, so W comes from HBM as in the graph timings.
#
#   OUT=dir bash bench/gemv_prof.sh     # $OUT/gemvprof-grouped.txt, gemvprof-dense.txt
#
# build/ holds libbfp.a and libbfp_cuda.a of this tree (sm_90a; carry them).
# PROF_LAUNCHES (default 2): how many launches of each kernel to profile.
# PROF_METRICS: more ncu metrics (its --metrics list), e.g. the stall reasons,
# "regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio".
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/link_gpu.sh
bench_dirs
link_bench gpu_moe $X/gpu_moe build/libbfp_cuda.a build/libbfp.a &&
    link_bench gpu_gemm $X/gpu_gemm build/libbfp_cuda.a build/libbfp.a || exit 1
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
    --section MemoryWorkloadAnalysis --section SchedulerStats
    ${PROF_METRICS:+--metrics $PROF_METRICS}"
N=${PROF_LAUNCHES:-2}
status=0
# shellcheck disable=SC2086
timeout 200 ncu --kernel-name-base demangled -k "regex:gemm_gemv_kernel<.int.0, .int.1, .bool.1" -c "$N" \
    $SECTIONS $X/gpu_moe $X/moe.json $X/routes.json t1 >"$O/gemvprof-grouped.txt" 2>&1 || status=1
# shellcheck disable=SC2086
GEMM_PATHS=6 GEMM_MS=1 GEMM_FORMATS=mxfp4 GEMM_SHAPES=23040x2880 timeout 200 ncu \
    --kernel-name-base demangled -k "regex:gemm_gemv_kernel<.int.0, .int.1, .bool.0, .bool.0" -c "$N" \
    $SECTIONS $X/gpu_gemm $X/gemm.json >"$O/gemvprof-dense.txt" 2>&1 || status=1
for f in grouped dense; do
    echo "== $f"
    grep -E "gemm_gemv_kernel|Duration|DRAM Throughput|Memory Throughput|Grid Size|Registers|Waves" \
        "$O/gemvprof-$f.txt" | head -n 24
done
rm -rf "$X"
exit $status
