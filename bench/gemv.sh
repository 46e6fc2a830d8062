#!/usr/bin/env bash
# bench/gemv.sh - the GEMV path (BFP_MATMUL_GEMV, src/cuda/gemm_gemv.cu) in one
# call on an H200: build, its tests (test_cuda_matmul with BFP_TEST_GEMV_ONLY=1,
# test_cuda_matmul_api), compute-sanitizer memcheck and racecheck on the GEMV
# cases (quick set), then gpu_gemm at m = 1 and 16 on the three shapes against
# AUTO, FUSED, SKINNY and cuBLAS bf16 in the same run.
#
#   OUT=dir bash bench/gemv.sh     # writes $OUT/gemv.log, $OUT/h200-gemv.json
#
# NO_SAN=1 skips the sanitizers, NO_TEST=1 the tests; GEMM_MS, GEMM_FORMATS,
# GEMM_PATHS (default 0,1,3,6,7: AUTO, FUSED, SKINNY, GEMV, GEMV with
# programmatic dependent launch) pass through to gpu_gemm.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
B=build-gpu
status=0
say() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | head -2
t0=$(date +%s)
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF -DBFP_MPI=OFF \
    >"$OUT/build.log" 2>&1 &&
    cmake --build $B --target test_cuda_matmul test_cuda_matmul_api bfp_cuda -j "$(nproc)" \
        >>"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
nvcc -O3 -gencode arch=compute_90,code=sm_90 -std=c++17 -Iinclude -Itests bench/gpu_gemm.cu \
    $B/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/gpu_gemm >>"$OUT/build.log" 2>&1 ||
    { tail -n 30 "$OUT/build.log"; exit 1; }
echo "build took $(($(date +%s) - t0)) s"

if [ -z "${NO_TEST:-}" ]; then
    t0=$(date +%s)
    BFP_TEST_GEMV_ONLY=1 timeout 200 $B/test_cuda_matmul 2>&1 | tail -n 12 || status=1
    timeout 100 $B/test_cuda_matmul_api 2>&1 | tail -n 5 || status=1
    echo "tests took $(($(date +%s) - t0)) s"
fi
if [ -z "${NO_SAN:-}" ]; then
    t0=$(date +%s)
    BFP_TEST_GEMV_ONLY=1 BFP_TEST_QUICK=1 timeout 150 compute-sanitizer --tool memcheck \
        --error-exitcode 3 $B/test_cuda_matmul >"$OUT/memcheck_gemv.log" 2>&1
    echo "memcheck gemv: exit $?; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_gemv.log" | tail -1)"
    BFP_TEST_GEMV_ONLY=1 BFP_TEST_QUICK=1 timeout 150 compute-sanitizer --tool racecheck \
        $B/test_cuda_matmul >"$OUT/racecheck_gemv.log" 2>&1
    echo "racecheck gemv: exit $?; $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck_gemv.log" | tail -1)"
    echo "sanitizers took $(($(date +%s) - t0)) s"
fi
t0=$(date +%s)
GEMM_MS=${GEMM_MS:-1,16} GEMM_PATHS=${GEMM_PATHS:-0,1,3,6,7} timeout 300 $B/gpu_gemm \
    "$OUT/h200-gemv.json" 2>&1 | tee "$OUT/gemv_bench.log" | grep -v "^$" || status=1
echo "bench took $(($(date +%s) - t0)) s"
exit $status
