#!/usr/bin/env bash
# bench/wg_sched.sh - one GPU call for the wgmma path at large m and the
# quantized-x routes, from libraries built on the CPU machine (sm_90a):
#  1. gpu_gemm at large m: AUTO, dequantize + cuBLAS and the wgmma path,
#     cuBLAS bf16 beside them -> $OUT/sched.json (GEMM_PATHS, default
#     0,2,5; the run of 2026-12-07 also had 11, a persistent schedule since
#     removed: docs/gemm.md);
#  2. test_cuda_matmul's wgmma cases;
#  3. gpu_gemm_xq (W4A8 / W4A4, with the bf16-x route: bf16x_us) at small m
#     and its cuBLASLt FP8 / bf16 peers (bench/peer_gemm_fp8_torch.py) ->
#     $OUT/xq.json;
#  4. memcheck and racecheck on the quick wgmma set, with the time left.
#
#   PREBUILT=build OUT=/some/dir bash bench/wg_sched.sh
#
# SHAPES, MS, FORMATS, GEMM_PATHS (step 1); XQ_SHAPES, XQ_MS, XQ_PAIRS (step 3); STEPS
# (default "gemm test san xq"); PEER_TRITON (0: no tl.dot_scaled sweep); SAN_CAP
# (each sanitizer's cap, 200 s); each step
# under a time cap, the whole call under BUDGET s (560). Logs in $OUT/*.log, a summary
# in $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
B=build-sched
T0=$(date +%s)
S=$OUT/summary.txt
left() { echo $((${BUDGET:-560} - ($(date +%s) - T0))); }
say() { echo "== $* ($(($(date +%s) - T0)) s)" | tee -a "$S"; }
want() { case " ${STEPS:-gemm test san xq} " in *" $1 "*) return 0 ;; esac; return 1; }
cap() { local c; c=$(left); [ "$c" -gt "$1" ] && c=$1; echo $c; }
: "${PREBUILT:?PREBUILT=dir with libbfp.a and libbfp_cuda.a}"
export BFP_CODE=${BFP_CODE:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$S"
source bench/link_gpu.sh
mkdir -p $B
L="$PREBUILT/libbfp_cuda.a $PREBUILT/libbfp.a"
say "link (three programs in parallel)"
link_test test_cuda_matmul $B/test_cuda_matmul $L >"$OUT/build_test.log" 2>&1 &
link_bench gpu_gemm $B/gpu_gemm $L >"$OUT/build_gemm.log" 2>&1 &
link_bench gpu_gemm_xq $B/gpu_gemm_xq $L >"$OUT/build_xq.log" 2>&1 &
wait
for p in test_cuda_matmul gpu_gemm gpu_gemm_xq; do
    [ -x $B/$p ] || { say "$p did not build"; cat "$OUT"/build_*.log | tail -20; exit 1; }
done
rm -f "$OUT"/build_*.log # few files come back from the GPU machine

if want gemm; then
    say "gpu_gemm: wgmma at large m"
    GEMM_SHAPES=${SHAPES:-8192x8192,28672x8192,8192x28672,28672x4096,4096x14336} \
        GEMM_MS=${MS:-512,1024,2048,4096} GEMM_FORMATS=${FORMATS:-mxfp4,nvfp4+} \
        GEMM_PATHS=${GEMM_PATHS:-0,2,5} timeout "$(cap 170)" $B/gpu_gemm "$OUT/sched.json" \
        >"$OUT/gemm.log" 2>&1
    echo "gpu_gemm rc=$?" | tee -a "$S"
fi
if want test; then
    say "test_cuda_matmul, wgmma cases"
    BFP_TEST_WGMMA_ONLY=1 timeout "$(cap 170)" $B/test_cuda_matmul >"$OUT/test.log" 2>&1
    echo "test rc=$? $(tail -n 1 "$OUT/test.log")" | tee -a "$S"
    grep FAIL "$OUT/test.log" | head -5 | tee -a "$S"
fi
if want xq; then
    c=$(cap 150)
    say "gpu_gemm_xq (cap $c s) and its peers"
    GEMM_XQ_SHAPES=${XQ_SHAPES:-} GEMM_XQ_MS=${XQ_MS:-1,16,128} \
        GEMM_XQ_PAIRS=${XQ_PAIRS:-mxfp4:mxfp8_e4m3,mxfp4:mxfp4,mxfp4+:mxfp4+} \
        timeout "$c" $B/gpu_gemm_xq "$OUT/gpu_gemm_xq.json" >"$OUT/xq.log" 2>&1
    echo "gpu_gemm_xq rc=$?" | tee -a "$S"
    PEER_TRITON=${PEER_TRITON:-0} \
        BENCH_COMMAND="PREBUILT=build bash bench/wg_sched.sh (step xq)" timeout "$(cap 90)" \
        python3 bench/peer_gemm_fp8_torch.py "$OUT/gpu_gemm_xq.json" "$OUT/xq.json" \
        >>"$OUT/xq.log" 2>&1
    echo "peers rc=$?" | tee -a "$S"
    [ -s "$OUT/xq.json" ] && rm -f "$OUT/gpu_gemm_xq.json"
fi
if want san; then
    for tool in memcheck racecheck; do
        c=$(cap ${SAN_CAP:-200}) # racecheck of the quick wgmma set ran past 80 s (H100)
        [ "$c" -ge 30 ] || { say "$tool skipped ($c s left)"; continue; }
        BFP_TEST_WGMMA_ONLY=1 BFP_TEST_QUICK=1 timeout "$c" compute-sanitizer --tool $tool \
            $B/test_cuda_matmul >"$OUT/$tool.log" 2>&1
        echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' "$OUT/$tool.log" |
            tail -n 2 | tr '\n' ' ')" | tee -a "$S"
    done
fi
say "done"
