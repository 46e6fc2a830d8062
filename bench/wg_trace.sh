#!/usr/bin/env bash
# bench/wg_trace.sh - the wgmma kernel's own clock, per k tile
# (bench/wg_trace.cu): this tree's gemm_wgmma.cu built with the trace
# (-DBFP_WG_TRACE) into a copy of build/libbfp_cuda.a, then the median
# cycles of a tile's phases (issue, wait, stage, decode) at m = 128, 256 and
# 1024 on 8192^2 mxfp4. VARIANTS="name:flags;..." (e.g.
# "s9:-DBFP_WG_STAGES=9") traces those builds too and runs test_cuda_matmul's
# wgmma cases on each (without the trace). The trace's clock reads and
# stores cost a few instructions a tile: compare phases, not µs.
#
#   OUT=dir bash bench/wg_trace.sh        # $OUT/wgtrace-base.json, wgtrace-NAME.json
#
# build/ holds libbfp.a and libbfp_cuda.a of this tree (sm_90a; carry them).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/link_gpu.sh
bench_dirs
status=0
variant() { # variant NAME FLAGS: $X/NAME/libbfp_cuda.a with gemm_wgmma.cu built so
    mkdir -p "$X/$1" && cp build/libbfp_cuda.a "$X/$1/" || return 1
    # shellcheck disable=SC2086
    nvcc -O2 -DNDEBUG -DBFP_HAVE_CUDA=1 \
        "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" -Xcompiler=-fPIC -std=c++17 -Iinclude -Isrc/core -Isrc/cuda $2 \
        -c src/cuda/gemm_wgmma.cu -o "$X/$1/gemm_wgmma.cu.o" && # the cmake build's flags
        (cd "$X/$1" && ar r libbfp_cuda.a gemm_wgmma.cu.o)
}
trace() { # trace NAME FLAGS
    variant "tr-$1" "-DBFP_WG_TRACE $2" &&
        link_bench wg_trace "$X/tr-$1/wg_trace" "$X/tr-$1/libbfp_cuda.a" build/libbfp.a || return 1
    echo "== $1 ($2)"
    timeout 120 "$X/tr-$1/wg_trace" "$O/wgtrace-$1.json"
}
trace base "" || status=1
IFS=';' read -ra VS <<<"${VARIANTS:-}"
for v in "${VS[@]}"; do
    name=${v%%:*} flags=${v#*:}
    trace "$name" "$flags" || status=1
    variant "$name" "$flags" &&
        link_test test_cuda_matmul "$X/$name/test" "$X/$name/libbfp_cuda.a" build/libbfp.a &&
        BFP_TEST_WGMMA_ONLY=1 timeout 200 "$X/$name/test" 2>&1 | tail -n 2 || status=1
done
rm -rf "$X"
exit $status
