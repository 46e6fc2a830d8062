#!/usr/bin/env bash
# bench/moe_gpu.sh - the grouped (MoE) matmul on the GPU in one call: its
# test against the reference, compute-sanitizer memcheck and racecheck on the
# quick set, bench/gpu_moe.cu and its torch peer bench/moe_torch.py.
#
#   OUT=/tmp/o bash bench/moe_gpu.sh                # builds build-gpu-moe (cmake, Release)
#   MOE_BIN=dir OUT=/tmp/o bash bench/moe_gpu.sh    # prebuilt test_cuda_grouped and gpu_moe
#   PREBUILT=dir OUT=/tmp/o bash bench/moe_gpu.sh   # link both from dir's libbfp.a and
#                                                   # libbfp_cuda.a (sm_90a, this tree)
#
# Writes $OUT/moe.log (the summary), test.log, memcheck.log, racecheck.log,
# gpu_moe.json, moe_routes.json and h200-moe.json. MOE_QUICK=1: tokens 1, 16, 64.
# MOE_BENCH_ONLY=1: no test or sanitizer runs (after a call that ran them).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/link_gpu.sh
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
LOG=$OUT/moe.log
status=0
say() { echo "== $*" | tee -a "$LOG"; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$LOG"

B=${MOE_BIN:-}
if [ -n "$B" ]; then
    timeout 200 "$B/test_cuda_grouped" >"$OUT/test.log" 2>&1
    if ! grep -q " passed, " "$OUT/test.log"; then
        say "prebuilt binaries do not run here:"
        tail -3 "$OUT/test.log" | tee -a "$LOG"
        B=
    fi
fi
if [ -z "$B" ] && [ -n "${PREBUILT:-}" ]; then
    say "link test_cuda_grouped and gpu_moe from $PREBUILT's libraries"
    B=build-gpu-moe
    mkdir -p $B
    { link_test test_cuda_grouped $B/test_cuda_grouped "$PREBUILT/libbfp_cuda.a" "$PREBUILT/libbfp.a" &&
      link_bench gpu_moe $B/gpu_moe "$PREBUILT/libbfp_cuda.a" "$PREBUILT/libbfp.a"; } \
        >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log" | tee -a "$LOG"; exit 1; }
    [ -n "${MOE_BENCH_ONLY:-}" ] || timeout 200 $B/test_cuda_grouped >"$OUT/test.log" 2>&1
fi
if [ -z "$B" ]; then
    say "build (cmake, Release, test_cuda_grouped; nvcc gpu_moe)"
    B=build-gpu-moe
    { cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF -DBFP_MPI=OFF &&
      cmake --build $B --target test_cuda_grouped -j "$(nproc)" &&
      link_bench gpu_moe $B/gpu_moe $B/libbfp_cuda.a $B/libbfp.a; } \
        >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log" | tee -a "$LOG"; exit 1; }
    timeout 200 $B/test_cuda_grouped >"$OUT/test.log" 2>&1
fi
if [ -z "${MOE_BENCH_ONLY:-}" ]; then
    say "test_cuda_grouped: $(tail -1 "$OUT/test.log")"
    grep FAIL "$OUT/test.log" | head -20 | tee -a "$LOG"
    grep -q ", 0 failed" "$OUT/test.log" || status=1
fi

if [ -z "${MOE_BENCH_ONLY:-}" ] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        BFP_TEST_QUICK=1 timeout 120 compute-sanitizer --tool $tool $B/test_cuda_grouped \
            >"$OUT/$tool.log" 2>&1
        rc=$?
        say "$tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
        [ $rc -eq 0 ] || status=1
    done
fi

say "bench (gpu_moe, then moe_torch.py)"
timeout 360 $B/gpu_moe "$OUT/gpu_moe.json" "$OUT/moe_routes.json" ${MOE_QUICK:+quick} 2>&1 |
    tee -a "$LOG"
timeout 200 python3 bench/moe_torch.py "$OUT/gpu_moe.json" "$OUT/moe_routes.json" \
    "$OUT/h200-moe.json" 2>&1 | tee -a "$LOG"
exit $status
