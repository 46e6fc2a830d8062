#!/usr/bin/env bash
# bench/wg_exp.sh - the wgmma kernel in its default shape against a variant
# of its tuning (3 consumer warpgroups, bfp_matmul_tuning.wgmma_consumers, or
# 256 rows of x per CTA, wgmma_bn), in one GPU call of at most BUDGET s
# (400): build bfp_cuda and test_cuda_matmul, check the wgmma SASS's A
# operands, run test_cuda_matmul's wgmma cases (BFP_TEST_WGMMA_ONLY=1), then
# time the formats at the m values on 8192x8192 and (with the time left)
# 28672x8192 and 8192x28672: AUTO, wgmma with the default tuning (wgmma_us)
# and the variant (wgmma_alt_us), dequantize + cuBLAS, cuBLAS bf16, in the
# same run.
#
#   OUT=/some/dir bash bench/wg_exp.sh                  # 3 consumers
#   ALT_BN=256 OUT=/some/dir bash bench/wg_exp.sh       # 256 rows of x
#   ALT_PIPE=2 OUT=/some/dir bash bench/wg_exp.sh       # one k16 step at a time
#
# FORMATS (mxfp4,nvfp4+), MS (64,128,256,1024,4096), SHAPES (8192x8192
# 28672x8192) pick the cases. PREBUILT=dir takes libbfp.a and libbfp_cuda.a
# built from this tree (sm_90a) instead of building them here.
# Writes to $OUT: build.log, test.log, sass_check.log, bench.log, wg.json
# (every shape's gpu_gemm rows, BFP_CODE as its code), summary.txt (the
# table printed last).
# BASE_OBJS="dir/gemm_wgmma.cu.o ..." (objects of libbfp_cuda.a from an
# earlier build, e.g. the commit before a change) also times AUTO and the
# wgmma kernel with those objects swapped into a copy of the library, in the
# same run (base_us, base_wg_us in the summary; wg_base.json).
# WG_PIPE=0 times the serial mainloops instead (BFP_MATMUL_WG_PIPE). SAN=1
# then runs compute-sanitizer memcheck and racecheck on the quick wgmma set
# with the time left (memcheck.log, racecheck.log).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
B=build-wg
T0=$(date +%s)
left() { echo $((${BUDGET:-400} - ($(date +%s) - T0))); }
say() { echo "== $* ($(($(date +%s) - T0)) s)"; }
status=0

if [ -n "${ALT_PIPE:-}" ]; then # a mainloop (BFP_MATMUL_WG_PIPE's values: 2 = k16 steps)
    ALT="GEMM_WG_PIPE=$ALT_PIPE GEMM_WG_BN=${ALT_BN:-} GEMM_WG_CONSUMERS=${ALT_CONSUMERS:-}"
elif [ -n "${ALT_BN:-}" ]; then
    ALT="GEMM_WG_BN=$ALT_BN GEMM_WG_CONSUMERS=${ALT_CONSUMERS:-}"
else
    ALT="GEMM_WG_CONSUMERS=${ALT_CONSUMERS:-3}"
fi
source bench/link_gpu.sh
say "build"
if [ -n "${PREBUILT:-}" ]; then
    mkdir -p $B && cp "$PREBUILT/libbfp.a" "$PREBUILT/libbfp_cuda.a" $B/ &&
        link_test test_cuda_matmul $B/test_cuda_matmul $B/libbfp_cuda.a $B/libbfp.a \
            >"$OUT/build.log" 2>&1 &&
        (cd $B && ar x libbfp_cuda.a gemm_wgmma.cu.o && mkdir -p CMakeFiles/bfp_cuda.dir/src/cuda &&
            mv gemm_wgmma.cu.o CMakeFiles/bfp_cuda.dir/src/cuda/) >>"$OUT/build.log" 2>&1 ||
        { tail -n 20 "$OUT/build.log"; echo "build failed"; exit 1; }
elif ! timeout 240 bash -c "cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF \
        -DBFP_PYTHON=OFF -DBFP_MPI=OFF && cmake --build $B -j $(nproc) --target bfp_cuda \
        test_cuda_matmul" >"$OUT/build.log" 2>&1; then
    tail -n 20 "$OUT/build.log"
    echo "build failed"
    exit 1
fi
grep -i "warning" "$OUT/build.log" | grep -i "gemm_wgmma" | head -5
# the benchmark, built while the tests run
(timeout 150 bash -c "source bench/link_gpu.sh &&
    link_bench gpu_gemm $B/gpu_gemm $B/libbfp_cuda.a $B/libbfp.a"
    rc=$?
    if [ $rc -eq 0 ] && [ -n "${BASE_OBJS:-}" ]; then
        mkdir -p $B/base && cp $B/libbfp_cuda.a $B/base/ && cp $BASE_OBJS $B/base/ &&
            (cd $B/base && ar r libbfp_cuda.a $(for o in $BASE_OBJS; do basename $o; done)) &&
            link_bench gpu_gemm $B/gpu_gemm_base $B/base/libbfp_cuda.a $B/libbfp.a
        rc=$?
    fi
    echo $rc >"$B/gpu_gemm.rc") >"$OUT/bench_build.log" 2>&1 &
bpid=$!

say "wgmma A operands (tools/dev/wgmma_operand_check.py)"
timeout 60 bash -c "cuobjdump -sass $B/CMakeFiles/bfp_cuda.dir/src/cuda/gemm_wgmma.cu.o |
    python3 tools/dev/wgmma_operand_check.py" >"$OUT/sass_check.log" 2>&1
rc=$?
tail -n 3 "$OUT/sass_check.log"
[ $rc -eq 0 ] || { echo "operand check rc=$rc"; status=1; }

say "test_cuda_matmul, wgmma cases (2 and 3 consumers, 256 rows of x, k16 steps)"
BFP_TEST_WGMMA_ONLY=1 timeout 150 "$B/test_cuda_matmul" >"$OUT/test.log" 2>&1
rc=$?
grep -E "FAIL|passed|failed" "$OUT/test.log" | head -20
[ $rc -eq 0 ] || { echo "test rc=$rc"; status=1; }

wait $bpid
if [ "$(cat $B/gpu_gemm.rc 2>/dev/null)" != 0 ]; then
    tail -n 20 "$OUT/bench_build.log"
    echo "gpu_gemm build failed"
    exit 1
fi
cat "$OUT/bench_build.log" >>"$OUT/build.log"
rm -f "$OUT/bench_build.log"

: >"$OUT/bench.log"
for shape in ${SHAPES:-8192x8192 28672x8192}; do
    cap=$(left)
    if [ "$cap" -lt 40 ]; then
        echo "$shape: skipped, $cap s left"
        continue
    fi
    say "gpu_gemm $shape (cap $cap s)"
    env GEMM_SHAPES=$shape GEMM_FORMATS=${FORMATS:-mxfp4,nvfp4+} \
        GEMM_MS=${MS:-64,128,256,1024,4096} GEMM_PATHS=0,2,5 $ALT \
        BFP_MATMUL_WG_PIPE=${WG_PIPE:-} timeout "$cap" "$B/gpu_gemm" \
        "$OUT/wg_$shape.json" >>"$OUT/bench.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { echo "gpu_gemm $shape rc=$rc"; tail -n 5 "$OUT/bench.log"; status=1; }
    [ -n "${BASE_OBJS:-}" ] || continue
    cap=$(left)
    [ "$cap" -ge 20 ] || { echo "$shape base: skipped, $cap s left"; continue; }
    say "gpu_gemm $shape with BASE_OBJS (cap $cap s)"
    env GEMM_SHAPES=$shape GEMM_FORMATS=${FORMATS:-mxfp4,nvfp4+} \
        GEMM_MS=${MS:-64,128,256,1024,4096} GEMM_PATHS=0,5 \
        BFP_MATMUL_WG_PIPE=${WG_PIPE:-} timeout "$cap" "$B/gpu_gemm_base" \
        "$OUT/base_$shape.json" >>"$OUT/bench.log" 2>&1 ||
        { echo "gpu_gemm base $shape rc=$?"; status=1; }
done

if [ -n "${SAN:-}" ]; then # compute-sanitizer on the quick wgmma set, with the time left
    for tool in memcheck racecheck; do
        cap=$(left)
        [ "$cap" -ge 30 ] || { echo "$tool: skipped, $cap s left"; continue; }
        say "$tool (cap $cap s)"
        BFP_TEST_WGMMA_ONLY=1 BFP_TEST_QUICK=1 timeout "$cap" compute-sanitizer --tool $tool \
            "$B/test_cuda_matmul" >"$OUT/$tool.log" 2>&1
        echo "$tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' "$OUT/$tool.log" |
            tail -2 | tr '\n' ' ')"
    done
fi

say "summary"
python3 - "$OUT" <<'EOF' | tee "$OUT/summary.txt"
import glob, json, re, sys
import os
def load(pattern):
    rows, head = [], None
    for f in sorted(glob.glob(sys.argv[1] + pattern)):
        try:  # printf writes nan; a run cut short leaves no closing bracket
            t = re.sub(r"\b-?nan\b", "NaN", open(f).read()).rstrip()
            if not t.endswith("}"):
                t = t.rstrip(",\n") + "\n]}"
            d = json.loads(t)
            rows += d["results"]
            head = head or {k: v for k, v in d.items() if k != "results"}
            os.remove(f)  # one file back from the GPU machine, not one per shape
        except (OSError, ValueError) as e:
            print(f, "unreadable:", e)
    return rows, head
for pattern, name in (("/wg_*.json", "wg.json"), ("/base_*.json", "wg_base.json")):
    rows, head = load(pattern)
    if head:
        head.update(code=os.environ.get("BFP_CODE", "unknown"), results=rows)
        json.dump(head, open(sys.argv[1] + "/" + name, "w"), indent=1)
    if name == "wg.json":
        main = rows
key = lambda r: (r["format"], r["N"], r["K"], r["M"])
base = {key(r): r for r in rows}
rows = main
print("%-7s %-12s %5s %9s %9s %-15s %9s %9s %9s %7s %8s %8s" % (
    "format", "NxK", "M", "cublas", "auto", "(path)", "deq+cub", "wg_us", "alt_us", "alt/wg",
    "cub/wg", "cub/alt") + ("  base_auto base_wg" if base else ""))
for r in rows:
    w2, w3, cb = r["wgmma_us"], r["wgmma_alt_us"], r["cublas_bf16_us"]
    q = lambda a, b: "%.3f" % (a / b) if a > 0 and b > 0 else "-"
    b = base.get(key(r))
    print("%-7s %-12s %5d %9.1f %9.1f %-15s %9.1f %9.1f %9.1f %7s %8s %8s  err %.1e %.1e" % (
        r["format"], "%dx%d" % (r["N"], r["K"]), r["M"], cb, r["us"], r["path"],
        r["dequant_cublas_us"], w2, w3, q(w3, w2), q(cb, w2), q(cb, w3), r["wgmma_rel_err"],
        r["wgmma_alt_rel_err"]) + ("  %9.1f %7.1f" % (b["us"], b["wgmma_us"]) if b else ""))
EOF
say "done, status $status"
exit $status
