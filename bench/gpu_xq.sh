#!/usr/bin/env bash
# bench/gpu_xq.sh - the quantized-x matmul (W4A8 / W4A4, src/cuda/gemm_xq.cu)
# on a GPU machine in one command: test_cuda_matmul_xq, compute-sanitizer
# memcheck and racecheck on its quick set, bench/gpu_gemm_xq.cu and its peers
# (bench/peer_gemm_fp8_torch.py) into $OUT/h200-gemm-fp8.json. On Hopper the
# test and the benchmark also run the wgmma kernel (xq_kernel = 2, MX pairs:
# wgmma_us in the JSON); bench/gpu_xq_wgmma.sh is its own shorter check.
#
#   bash bench/gpu_xq.sh              # OUT defaults to bench/out
#
# BIN=dir: take test_cuda_matmul_xq and gpu_gemm_xq prebuilt from dir (skips
# the build); XQ_QUICK=1: the benchmark's first shape only; PEER_TRITON=0:
# no Triton peer; T_TEST, T_MEMCHECK, T_RACECHECK, T_BENCH, T_PEER: each
# step's time limit in seconds. Exit status 0 only if the tests and sanitizers passed and
# the benchmark ran.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
status=0
say() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv 2>&1 | head -2
if [ -n "${BIN:-}" ] && [ -x "$BIN/test_cuda_matmul_xq" ] && [ -x "$BIN/gpu_gemm_xq" ]; then
    T=$BIN/test_cuda_matmul_xq G=$BIN/gpu_gemm_xq
else
    say "build"
    B=build-gpu
    t0=$(date +%s)
    cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF -DBFP_MPI=OFF \
        >"$OUT/build.log" 2>&1 &&
        cmake --build $B --target test_cuda_matmul_xq bfp_cuda -j "$(nproc)" >>"$OUT/build.log" 2>&1 ||
        { tail -20 "$OUT/build.log"; exit 1; }
    nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Itests -Ibench \
        bench/gpu_gemm_xq.cu $B/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/gpu_gemm_xq \
        >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "build took $(($(date +%s) - t0)) s"
    T=$B/test_cuda_matmul_xq G=$B/gpu_gemm_xq
fi

say "test_cuda_matmul_xq"
BFP_TEST_VERBOSE=1 timeout ${T_TEST:-240} "$T" >"$OUT/test_xq.log" 2>&1 || status=1
grep -E "FAIL|passed" "$OUT/test_xq.log" | tail -15

say "memcheck (quick set)"
BFP_TEST_QUICK=1 timeout ${T_MEMCHECK:-200} compute-sanitizer --tool memcheck --error-exitcode 3 "$T" \
    >"$OUT/memcheck_xq.log" 2>&1 || status=1
grep -E "ERROR SUMMARY|passed" "$OUT/memcheck_xq.log" | tail -3
say "racecheck (quick set)"
BFP_TEST_QUICK=1 timeout ${T_RACECHECK:-200} compute-sanitizer --tool racecheck --error-exitcode 3 "$T" \
    >"$OUT/racecheck_xq.log" 2>&1 || status=1
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed" "$OUT/racecheck_xq.log" | tail -3

say "benchmark"
timeout ${T_BENCH:-300} "$G" "$OUT/gpu_gemm_xq.json" ${XQ_QUICK:+quick} 2>&1 | tee "$OUT/bench_xq.log" || status=1
BENCH_COMMAND="bash bench/gpu_xq.sh" timeout ${T_PEER:-300} python3 bench/peer_gemm_fp8_torch.py \
    "$OUT/gpu_gemm_xq.json" "$OUT/h200-gemm-fp8.json" 2>&1 | tee -a "$OUT/bench_xq.log" || status=1
exit $status
