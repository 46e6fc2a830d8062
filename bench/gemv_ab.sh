#!/usr/bin/env bash
# bench/gemv_ab.sh - the GEMV kernel of this tree (side "new") against another
# gemm_gemv object (side "old"), in one GPU call: the new build's tests
# (test_cuda_matmul, test_cuda_grouped), memcheck and racecheck on their GEMV /
# grouped quick sets, then gpu_gemm (paths 6, 7: GEMV, GEMV with PDL) twice
# each, new and old alternating, and gpu_moe's quick set (T = 1, 16, 64) once
# each, all linked from the same libraries.
#
#   OLD_OBJ=dir/gemm_gemv.cu.o OUT=dir bash bench/gemv_ab.sh   # an earlier build's object
#   ALT_FLAGS="-DBFP_GV_RED_SLICES=4" OUT=dir bash bench/gemv_ab.sh
#
# build/ holds libbfp.a and libbfp_cuda.a of this tree (sm_90a). OLD_OBJ is
# swapped into a copy of libbfp_cuda.a; or, with ALT_FLAGS, this tree's
# gemm_gemv.cu built with those flags (a build-time knob) is, and its own
# quick GEMV and grouped tests run too. AB_MS, AB_FORMATS and AB_SHAPES set
# the dense timings (gpu_gemm's GEMM_MS, GEMM_FORMATS, GEMM_SHAPES);
# NO_TEST=1 skips the tests and sanitizers. Writes
# $OUT/gemv-{new,old}-{1,2}.json and $OUT/moe-{new,old}.json.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/link_gpu.sh
bench_dirs
mkdir -p $X/old
cp build/libbfp_cuda.a $X/old/ || exit 1
if [ -n "${ALT_FLAGS:-}" ]; then
    # shellcheck disable=SC2086
    nvcc -O2 -g -DNDEBUG -DBFP_HAVE_CUDA=1 "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" \
        -Xcompiler=-fPIC -std=c++17 -Iinclude -Isrc/core -Isrc/cuda $ALT_FLAGS \
        -c src/cuda/gemm_gemv.cu -o $X/old/gemm_gemv.cu.o || exit 1 # the cmake build's flags
elif [ -f "${OLD_OBJ:-}" ]; then
    cp "$OLD_OBJ" $X/old/gemm_gemv.cu.o
else
    echo "gemv_ab: set OLD_OBJ (an earlier gemm_gemv.cu.o) or ALT_FLAGS (nvcc flags)"
    exit 2
fi
(cd $X/old && ar r libbfp_cuda.a gemm_gemv.cu.o) || exit 1
for t in test_cuda_matmul test_cuda_grouped; do
    link_test $t $X/$t build/libbfp_cuda.a build/libbfp.a &&
        link_test $t $X/old/$t $X/old/libbfp_cuda.a build/libbfp.a || exit 1
done
for b in gpu_gemm gpu_moe; do
    link_bench $b $X/$b build/libbfp_cuda.a build/libbfp.a &&
        link_bench $b $X/old/$b $X/old/libbfp_cuda.a build/libbfp.a || exit 1
done
status=0
timed() { local t0=$(date +%s) rc; "$@"; rc=$?; echo "[$(($(date +%s) - t0)) s]"; return $rc; }
if [ -z "${NO_TEST:-}" ]; then
    timed timeout 170 $X/test_cuda_matmul 2>&1 | tail -n 2
    timed timeout 60 $X/test_cuda_grouped 2>&1 | tail -n 2
    for tool in memcheck racecheck; do
        BFP_TEST_GEMV_ONLY=1 BFP_TEST_QUICK=1 timed timeout 100 compute-sanitizer --tool $tool \
            --error-exitcode 3 $X/test_cuda_matmul 2>&1 | grep -E "SUMMARY|passed|\[" | tail -n 3
        BFP_TEST_QUICK=1 timed timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 \
            $X/test_cuda_grouped 2>&1 | grep -E "SUMMARY|passed|\[" | tail -n 3
    done
fi
if [ -n "${ALT_FLAGS:-}" ]; then
    echo "== old side ($ALT_FLAGS)"
    BFP_TEST_GEMV_ONLY=1 timed timeout 170 $X/old/test_cuda_matmul 2>&1 | tail -n 2
    timed timeout 60 $X/old/test_cuda_grouped 2>&1 | tail -n 2
    BFP_TEST_QUICK=1 timed timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 \
        $X/old/test_cuda_grouped 2>&1 | grep -E "SUMMARY|passed|\[" | tail -n 3
fi
export GEMM_PATHS=6,7 GEMM_MS=${AB_MS:-1,9,16} GEMM_FORMATS=${AB_FORMATS:-mxfp4,nvfp4}
export GEMM_SHAPES=${AB_SHAPES:-4096x4096,6144x4096,28672x4096,4096x14336,8192x8192,28672x8192,8192x28672}
for r in 1 2; do
    timeout 100 $X/gpu_gemm "$O/gemv-new-$r.json" >/dev/null 2>&1 || status=1
    timeout 100 $X/old/gpu_gemm "$O/gemv-old-$r.json" >/dev/null 2>&1 || status=1
done
timeout 200 $X/gpu_moe "$O/moe-new.json" $X/routes.json quick >/dev/null 2>&1 || status=1
timeout 200 $X/old/gpu_moe "$O/moe-old.json" $X/routes.json quick >/dev/null 2>&1 || status=1
rm -rf "$X"
exit $status
