#!/usr/bin/env bash
# bench/stall_source.sh - where a kernel's warps wait, per SASS instruction:
# ncu's warp-state sampling (SourceCounters) of one launch, printed as the
# source page (one row per instruction, its samples by stall reason), then
# summed by bench/stall_source.py over the kernel's regions (the stretches
# between barriers, waits and tensor-core instructions). Two kernels:
#   wgmma  the wgmma kernel at m = 128, 8192^2, mxfp4 (issue #20's m = 128)
#   gemv   the grouped GEMV at T = 1 (gpt-oss-120b gate_up, mxfp4; issue #23)
#
#   OUT=dir bash bench/stall_source.sh [wgmma] [gemv]
#
# build/ holds libbfp.a and libbfp_cuda.a of this tree (sm_90a; carry them).
# Writes $OUT/stall-KERNEL.csv.gz (the page) and $OUT/stall-KERNEL.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/link_gpu.sh
bench_dirs
status=0
page() { # page NAME: the report's source page as CSV, then the summary
    ncu -i "$X/$1.ncu-rep" --page source --csv --print-source sass >"$X/$1.csv" 2>"$X/$1.err" ||
        { cat "$X/$1.err"; return 1; }
    python3 bench/stall_source.py "$X/$1.csv" >"$O/stall-$1.txt" 2>&1 || status=1
    gzip -c "$X/$1.csv" >"$O/stall-$1.csv.gz"
    head -n 40 "$O/stall-$1.txt"
}
NCU="ncu --kernel-name-base demangled -c 1 --section SourceCounters --section WarpStateStats
    --import-source no -f"
KS=("$@")
[ ${#KS[@]} -gt 0 ] || KS=(wgmma gemv)
for k in "${KS[@]}"; do
    case $k in
    wgmma)
        link_bench gpu_gemm $X/gpu_gemm build/libbfp_cuda.a build/libbfp.a || exit 1
        # shellcheck disable=SC2086
        GEMM_MS=128 GEMM_FORMATS=mxfp4 GEMM_SHAPES=8192x8192 GEMM_PATHS=5 timeout 240 $NCU \
            -k "regex:gemm_wgmma_kernel<.int.0" -o "$X/wgmma" $X/gpu_gemm $X/gemm.json quick \
            >"$X/wgmma.log" 2>&1 || { tail -n 5 "$X/wgmma.log"; status=1; }
        page wgmma || status=1
        ;;
    gemv)
        link_bench gpu_moe $X/gpu_moe build/libbfp_cuda.a build/libbfp.a || exit 1
        # shellcheck disable=SC2086
        timeout 240 $NCU -k "regex:gemm_gemv_kernel<.int.0, .int.1, .bool.1" -o "$X/gemv" \
            $X/gpu_moe $X/moe.json $X/routes.json t1 >"$X/gemv.log" 2>&1 ||
            { tail -n 5 "$X/gemv.log"; status=1; }
        page gemv || status=1
        ;;
    *) echo "stall_source: unknown kernel $k (wgmma, gemv)"; status=2 ;;
    esac
done
rm -rf "$X"
exit $status
