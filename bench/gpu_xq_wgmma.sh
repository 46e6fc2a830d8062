#!/usr/bin/env bash
# bench/gpu_xq_wgmma.sh - the quantized-x matmul's wgmma kernel (xq_kernel = 2,
# src/cuda/gemm_xq_wgmma.cu) on an H200 in one call, under T_TOTAL seconds
# (default 380) in all: build; test_cuda_matmul_xq on the wgmma kernel, quick
# set then full; compute-sanitizer memcheck on the quick set; the SASS check
# (tools/dev/wgmma_operand_check.py); bench/gpu_xq_probe.cu (where each W
# element lands); gpu_gemm_xq at 8192 x 8192, m = 1, 16,
# 128, 4096, both kernels (us / wgmma_us), MX pairs. At most 8 files in $OUT.
#
#   OUT=/some/dir bash bench/gpu_xq_wgmma.sh     # OUT defaults to bench/out
#
# BIN=dir: test_cuda_matmul_xq, gpu_gemm_xq (and gpu_xq_probe) prebuilt in dir;
# REUSE=dir: an existing Release build tree (bench/h200_check.sh's build-h200).
# Each step has its own limit (T_BUILD, T_QUICK, T_FULL, T_MEMCHECK, T_BENCH),
# cut to what is left of T_TOTAL. Exit 0 only if every step passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin" # nvcc, cuobjdump, compute-sanitizer
T0=$(date +%s)
status=0
SUM="$OUT/summary.txt"
: >"$SUM"
say() { echo "== $*" | tee -a "$SUM"; }
# the limit for a step: its own, or what is left of T_TOTAL less a margin
lim() {
    local left=$((${T_TOTAL:-380} - ($(date +%s) - T0) - 10))
    [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"
}
step() { # name, rc: record the result
    if [ "$2" -eq 0 ]; then say "$1: ok ($(($(date +%s) - T0)) s)"; else
        say "$1: FAILED rc=$2 ($(($(date +%s) - T0)) s; 124 = time limit)"; status=1; fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv 2>&1 | head -2 | tee -a "$SUM"
git log --oneline -1 2>/dev/null | tee -a "$SUM"

if [ -n "${BIN:-}" ] && [ -x "$BIN/test_cuda_matmul_xq" ] && [ -x "$BIN/gpu_gemm_xq" ]; then
    T=$BIN/test_cuda_matmul_xq G=$BIN/gpu_gemm_xq P=$BIN/gpu_xq_probe OBJ=""
else
    # REUSE=dir: a Release build tree that already holds the libraries and the test
    B=${REUSE:-build-gpu}
    cfg="cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF -DBFP_MPI=OFF &&"
    [ -n "${REUSE:-}" ] && cfg=""
    timeout "$(lim "${T_BUILD:-200}")" bash -c "$cfg
        cmake --build $B --target test_cuda_matmul_xq bfp_cuda -j $(nproc) &&
        nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Itests -Ibench \
            bench/gpu_gemm_xq.cu $B/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/gpu_gemm_xq &&
        nvcc -O2 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Itests -Ibench \
            bench/gpu_xq_probe.cu $B/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/gpu_xq_probe" \
        >"$OUT/build.log" 2>&1
    rc=$?
    step build $rc
    [ $rc -ne 0 ] && { tail -20 "$OUT/build.log"; exit 1; }
    T=$B/test_cuda_matmul_xq G=$B/gpu_gemm_xq P=$B/gpu_xq_probe
    OBJ=$B/CMakeFiles/bfp_cuda.dir/src/cuda/gemm_xq_wgmma.cu.o
fi

# QGMMA (FP8 wgmma) present, no A operand or accumulator touched in flight,
# no local memory: cheap, and says where to look if the tests fail
if [ -n "$OBJ" ] && command -v cuobjdump >/dev/null; then
    {
        cuobjdump -sass "$OBJ" >"$OUT/sass_check.txt.tmp" 2>&1
        echo "QGMMA instructions: $(grep -c QGMMA "$OUT/sass_check.txt.tmp")"
        grep -o "QGMMA\.[0-9x]*\.F32\.E4M3\.E4M3" "$OUT/sass_check.txt.tmp" | sort | uniq -c
        echo "local memory (LDL/STL): $(grep -cE '\b(LDL|STL)\b' "$OUT/sass_check.txt.tmp")"
        python3 tools/dev/wgmma_operand_check.py "$OUT/sass_check.txt.tmp"
        echo "operand check rc=$?"
        rm -f "$OUT/sass_check.txt.tmp"
    } >"$OUT/sass_check.txt" 2>&1
    tee -a "$SUM" <"$OUT/sass_check.txt"
fi

# where each weight element lands (one-hot W, identity x), both kernels: names
# the wrong layout, if any, in a few lines
if [ -x "$P" ]; then
    timeout "$(lim 30)" "$P" >>"$SUM" 2>&1
    rc=$?
    step "probe" $rc
    [ $rc -eq 124 ] && { say "probe timed out (a hang): stopping"; exit 1; }
fi

BFP_TEST_XQ_KERNEL=2 BFP_TEST_QUICK=1 BFP_TEST_VERBOSE=1 timeout "$(lim "${T_QUICK:-45}")" "$T" \
    >"$OUT/test_quick.log" 2>&1
rc=$?
step "test quick (wgmma)" $rc
grep -E "FAIL|passed|skipped" "$OUT/test_quick.log" | tail -12 | tee -a "$SUM"
if [ $rc -eq 124 ]; then # a hang (an mbarrier never completes): the rest would hang too
    say "quick test timed out: the last case it printed is in test_quick.log; stopping"
    say "total $(($(date +%s) - T0)) s, status 1"
    exit 1
fi

BFP_TEST_XQ_KERNEL=2 BFP_TEST_VERBOSE=1 timeout "$(lim "${T_FULL:-120}")" "$T" \
    >"$OUT/test_full.log" 2>&1
step "test full (wgmma)" $?
grep -E "FAIL|passed|skipped" "$OUT/test_full.log" | tail -12 | tee -a "$SUM"

BFP_TEST_XQ_KERNEL=2 BFP_TEST_QUICK=1 timeout "$(lim "${T_MEMCHECK:-80}")" \
    compute-sanitizer --tool memcheck --error-exitcode 3 "$T" >"$OUT/memcheck.log" 2>&1
step "memcheck quick (wgmma)" $?
grep -E "ERROR SUMMARY|passed|FAIL" "$OUT/memcheck.log" | tail -5 | tee -a "$SUM"

GEMM_XQ_SHAPES=8192x8192 GEMM_XQ_PAIRS=mxfp4:mxfp8_e4m3,mxfp4:mxfp4,mxfp4+:mxfp4+ \
    timeout "$(lim "${T_BENCH:-90}")" "$G" "$OUT/gpu_gemm_xq_wgmma.json" quick >"$OUT/bench.log" 2>&1
step "bench 8192^2" $?
tail -14 "$OUT/bench.log" | tee -a "$SUM"
say "total $(($(date +%s) - T0)) s, status $status"
exit $status
