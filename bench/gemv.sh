#!/usr/bin/env bash
# bench/gemv.sh - the GEMV path (BFP_MATMUL_GEMV, src/cuda/gemm_gemv.cu) in one
# call on an H200: build, its tests (test_cuda_matmul with BFP_TEST_GEMV_ONLY=1,
# which includes AUTO's rule and the shared workspace, and test_cuda_matmul_api),
# compute-sanitizer memcheck and racecheck on the GEMV cases (quick set), then
# gpu_gemm at m = 1 and 16 on the three shapes against AUTO, FUSED, SKINNY and
# cuBLAS bf16 in the same run; then the build-time variants of gemm_gemv.cu in
# GEMV_VARIANTS ("name:nvcc flags;..."), each its quick tests and its timing.
#
#   OUT=dir bash bench/gemv.sh     # writes $OUT/h200-gemv.json, h200-gemv-NAME.json, logs
#
# PREBUILT=dir takes libbfp.a and libbfp_cuda.a from dir (built elsewhere from
# this tree) and rebuilds only gemm.cu and gemm_gemv.cu into them; else cmake
# builds everything. NO_SAN=1 skips the sanitizers, NO_TEST=1 the tests;
# GEMM_MS, GEMM_FORMATS, GEMM_PATHS (default 0,1,3,6,7: AUTO, FUSED, SKINNY,
# GEMV, GEMV with programmatic dependent launch) pass through to gpu_gemm.
# BASE_OBJS="dir/gemm_gemv.cu.o ..." (objects of libbfp_cuda.a from an earlier
# build, e.g. the commit before a change) also times the same paths with
# those objects swapped into a copy of the library, in the same run
# ($OUT/h200-gemv-base.json).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
B=build-gemv
mkdir -p $B
status=0
NV="nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Isrc/core -Isrc/cuda"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | head -2
t0=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
    cp "$PREBUILT/libbfp.a" "$PREBUILT/libbfp_cuda.a" $B/ &&
        $NV -c src/cuda/gemm.cu -o $B/gemm.cu.o && $NV -c src/cuda/gemm_gemv.cu -o $B/gemm_gemv.cu.o &&
        (cd $B && ar r libbfp_cuda.a gemm.cu.o gemm_gemv.cu.o) >"$OUT/build.log" 2>&1 ||
        { cat "$OUT/build.log"; exit 1; }
else
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF -DBFP_MPI=OFF \
        >"$OUT/build.log" 2>&1 &&
        cmake --build build-gpu --target bfp_cuda bfp -j "$(nproc)" >>"$OUT/build.log" 2>&1 &&
        cp build-gpu/libbfp.a build-gpu/libbfp_cuda.a $B/ || { tail -n 30 "$OUT/build.log"; exit 1; }
fi
source bench/link_gpu.sh
link_tests() { # $1: libbfp_cuda.a, $2: output dir
    for t in test_cuda_matmul test_cuda_matmul_api; do
        link_test $t "$2/$t" "$1" $B/libbfp.a || return 1
    done
}
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Itests -c bench/gpu_gemm.cu \
    -o $B/gpu_gemm.o >>"$OUT/build.log" 2>&1 &&
    nvcc $B/gpu_gemm.o $B/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/gpu_gemm >>"$OUT/build.log" 2>&1 &&
    link_tests $B/libbfp_cuda.a $B >>"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
# the variants: the files that read the GEMV's build knobs (gemm_internal.h's
# BFP_GV_R among them) rebuilt with their flags into a copy of the library
IFS=';' read -r -a VARS <<<"${GEMV_VARIANTS:-}"
GV_FILES="gemm.cu gemm_gemv.cu gemm_grouped_api.cu"
for v in "${VARS[@]}"; do
    [ -n "$v" ] || continue
    name=${v%%:*} flags=${v#*:}
    (mkdir -p $B/$name && for f in $GV_FILES; do
        $NV $flags -c src/cuda/$f -o $B/$name/$f.o || exit 1
    done && cp $B/libbfp_cuda.a $B/$name/ && cd $B/$name && ar r libbfp_cuda.a $(printf "%s.o " $GV_FILES)) \
        >>"$OUT/build.log" 2>&1 &
done
wait
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
if [ -n "${BASE_OBJS:-}" ]; then
    echo "== base: $BASE_OBJS"
    mkdir -p $B/base && cp $B/libbfp_cuda.a $B/base/ && cp $BASE_OBJS $B/base/ &&
        (cd $B/base && ar r libbfp_cuda.a $(for o in $BASE_OBJS; do basename $o; done)) &&
        nvcc $B/gpu_gemm.o $B/base/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/base/gpu_gemm \
            >>"$OUT/build.log" 2>&1 &&
        GEMM_MS=${GEMM_MS:-1,16} GEMM_PATHS=${GEMM_PATHS:-0,1,3,6,7} timeout 300 $B/base/gpu_gemm \
            "$OUT/h200-gemv-base.json" 2>&1 | grep -v "^$" || status=1
fi
for v in "${VARS[@]}"; do
    [ -n "$v" ] || continue
    name=${v%%:*}
    echo "== variant $name (${v#*:})"
    [ -f $B/$name/libbfp_cuda.a ] || { echo "variant $name did not build"; status=1; continue; }
    nvcc $B/gpu_gemm.o $B/$name/libbfp_cuda.a $B/libbfp.a -lcublas -o $B/$name/gpu_gemm &&
        link_tests $B/$name/libbfp_cuda.a $B/$name || { status=1; continue; }
    BFP_TEST_GEMV_ONLY=1 BFP_TEST_QUICK=1 timeout 60 $B/$name/test_cuda_matmul 2>&1 | tail -n 3
    GEMM_MS=${GEMM_MS:-1,16} GEMM_PATHS=6,7 timeout 120 $B/$name/gpu_gemm "$OUT/h200-gemv-$name.json" 2>&1 |
        grep -v "^$" | sed 's/(fused.*wgmma nan err nan, //' || status=1
done
# NCU_SHAPE=NxK: ncu of the GEMV kernel (mxfp4, m = NCU_M or 1) in the base build
# and the variants named in NCU_VARIANTS (space-separated): issue and pipe utilization and warp states (section bodies),
# then per-pipe instruction counts, into $OUT/gemv-ncu.txt
if [ -n "${NCU_SHAPE:-}" ]; then
    M=smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg
    for pipe in alu fma fmaheavy fp16 lsu uniform; do
        M="$M,sm__inst_executed_pipe_$pipe.avg.pct_of_peak_sustained_active"
    done
    for bin in $B/gpu_gemm $(for v in ${NCU_VARIANTS:-}; do echo "$B/$v/gpu_gemm"; done); do
        [ -x "$bin" ] || continue
        echo "== ncu $bin ${NCU_SHAPE} m=${NCU_M:-1}"
        for what in "--section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --print-details all" \
            "--metrics $M"; do
            # shellcheck disable=SC2086
            GEMM_MS=${NCU_M:-1} GEMM_FORMATS=mxfp4 GEMM_SHAPES=$NCU_SHAPE GEMM_PATHS=6 timeout 120 \
                ncu --kernel-name-base demangled -k "regex:gemm_gemv_kernel" -c 1 $what \
                "$bin" /tmp/ncu.json quick 2>&1 | grep -v "^\s*$"
        done
    done 2>&1 | tee "$OUT/gemv-ncu.txt"
fi
exit $status
