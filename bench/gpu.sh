#!/usr/bin/env bash
# bench/gpu.sh - everything GPU in one command, on a machine with an H200
# (or any sm_90 GPU): build, bit-exactness tests, compute-sanitizer memcheck
# on a small representative run, the benchmark and its torch.compile peer.
#
#   bash bench/gpu.sh            # writes $OUT (default bench/out) /h200-quant.json
#
# Logs and JSON go to $OUT: test_cuda.log, memcheck.log, bench.log,
# h200-quant.json. Exit status: 0 only if the build, the tests and memcheck
# passed and the benchmark ran.
#
# PARTS picks what runs (default "test qbench gemm"; also ncu, sass, gemmprof,
# skinnysweep, postsweep, skstages, qctas, deqchunk, below). For a quick look: BFP_BENCH_BIG_ONLY=1 (16384x16384 only),
# BFP_BENCH_FORMATS=a,b, QBENCH_NO_PEER=1, GEMM_QUICK=1 (8192x8192 only),
# GEMM_MS=1,16 (those m only), NO_MEMCHECK=1 (the matmul memcheck), GEMM_BENCH_ONLY=1
# (no matmul tests before the benchmark), GEMM_PEERS=a,b and PEER_CAP (s) for the
# peers (bench/torch_peers.py; gemlite must be importable: carry its wheel).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
mkdir -p "$OUT"
B=build-gpu
JOBS=$(nproc 2>/dev/null || echo 4)
status=0
say() { echo "== $*"; }
# BFP_CODE=<commit> from the caller wins: the GPU machine's copy of .git can be stale
BFP_CODE=${BFP_CODE:-$(git rev-parse --short HEAD 2>/dev/null || echo "unknown (no .git on this machine)")}
export BFP_CODE

say "GPU"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | head -3

source bench/link_gpu.sh # link_test, link_bench

# ---- build --------------------------------------------------------------------
# (no file layer, CLI or Python extension: the GPU tests and benchmarks need none,
# and the GPU machine may lack cJSON and the Python headers)
say "build (cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF)"
t0=$(date +%s)
if cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_IO=OFF -DBFP_PYTHON=OFF >"$OUT/build.log" 2>&1 &&
    cmake --build $B --target test_cuda test_cuda_matmul test_cuda_matmul_api bfp_cuda -j "$JOBS" >>"$OUT/build.log" 2>&1; then
    LIBS="$B/libbfp_cuda.a $B/libbfp.a"
    TEST=$B/test_cuda
    TEST_MM=$B/test_cuda_matmul
    TEST_MMA=$B/test_cuda_matmul_api
else
    # e.g. a machine with too old a cmake: build the two libraries and the
    # tests directly, with the same flags
    say "cmake build failed (tail of build.log below); building bfp, bfp_cuda and test_cuda directly"
    tail -n 5 "$OUT/build.log"
    D=$B/direct
    rm -rf $D && mkdir -p $D/core $D/cuda
    for f in src/core/*.c src/cpu/*.c; do
        [ -f "$f" ] || continue
        gcc -O3 -std=c11 -ffp-contract=off -fno-fast-math -Iinclude -Isrc/core -Isrc/cpu \
            -c "$f" -o "$D/core/$(basename "$f" .c).o" &
    done
    for f in src/cuda/*.cu src/cuda/instances/*.cu; do
        nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Isrc/core -Isrc/cuda \
            -c "$f" -o "$D/cuda/$(basename "$f" .cu).o" &
    done
    wait
    ar rcs $D/libbfp.a $D/core/*.o && ar rcs $D/libbfp_cuda.a $D/cuda/*.o || status=1
    for t in test_cuda test_cuda_matmul test_cuda_matmul_api; do
        link_test $t $D/$t $D/libbfp_cuda.a $D/libbfp.a || status=1
    done
    LIBS="$D/libbfp_cuda.a $D/libbfp.a"
    TEST=$D/test_cuda
    TEST_MM=$D/test_cuda_matmul
    TEST_MMA=$D/test_cuda_matmul_api
fi
echo "build took $(($(date +%s) - t0)) s"
[ -x "$TEST" ] || { echo "no test binary"; exit 1; }

PARTS=${PARTS:-test qbench gemm}   # test: test_cuda + memcheck; qbench: quantize benchmark
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# one translation unit of libbfp_cuda with the library's flags, plus the
# -D options, -c and -o given (for the rebuilt variants below)
lib_tu() { nvcc -O3 -DNDEBUG -DBFP_HAVE_CUDA=1 --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
    -Xcompiler=-fPIC -Iinclude -Isrc/core -Isrc/cuda -x cu "$@"; }
# dir/libbfp_cuda.a: the library with dir's objects (named as cmake names them) in place
lib_variant() { # dir objects...
    local d=$1
    shift
    cp $B/libbfp_cuda.a "$d/libbfp_cuda.a" && (cd "$d" && ar r libbfp_cuda.a "$@")
}

if want test; then
# ---- bit-exactness ------------------------------------------------------------
say "test_cuda (all formats, dtypes, options; 16384x16384 sampled)"
t0=$(date +%s)
timeout 420 "$TEST" >"$OUT/test_cuda.log" 2>&1
rc=$?
grep -v "^   first difference" "$OUT/test_cuda.log" | grep -E "cases|rows compared|FAIL|passed" | head -80
echo "test_cuda exit $rc, $(($(date +%s) - t0)) s"
[ $rc -eq 0 ] || status=1

# ---- memcheck -----------------------------------------------------------------
say "compute-sanitizer --tool memcheck (quick set: nvfp4+, mxfp6_e3m2++, hif4)"
t0=$(date +%s)
: >"$OUT/memcheck.log"
for f in nvfp4+ mxfp6_e3m2++ hif4; do
    BFP_TEST_QUICK=1 BFP_TEST_FORMAT=$f timeout 100 compute-sanitizer --tool memcheck \
        --error-exitcode 3 "$TEST" >>"$OUT/memcheck.log" 2>&1
    rc=$?
    echo "memcheck $f: exit $rc; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
    [ $rc -eq 0 ] || status=1
done
echo "memcheck took $(($(date +%s) - t0)) s"

fi

if want qbench; then
# ---- benchmark ----------------------------------------------------------------
say "benchmark (bf16, 16384x16384 and 16x8192)"
link_bench gpu_bench $B/gpu_bench $LIBS >"$OUT/bench.log" 2>&1 || { cat "$OUT/bench.log"; exit 1; }
timeout 300 $B/gpu_bench "$OUT/gpu_bench.json" 2>&1 | tee -a "$OUT/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
COPY=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['copy_gbps'])" "$OUT/gpu_bench.json")

if [ -z "${QBENCH_NO_PEER:-}" ]; then   # QBENCH_NO_PEER=1: skip the peer (a quick look)
say "peer: torch.compile MXFP4 / NVFP4 (bench/peer_torch.py)"
timeout 240 python3 bench/peer_torch.py "$OUT/peer.json" "$COPY" 2>&1 | tail -n 8 | tee -a "$OUT/bench.log"
fi

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
b = json.load(open(os.path.join(out, "gpu_bench.json")))
peer = []
p = os.path.join(out, "peer.json")
if os.path.exists(p):
    peer = json.load(open(p))
doc = {"date": b["date"], "command": "bash bench/gpu.sh", "gpu": b["gpu"],
       "code": os.environ.get("BFP_CODE", "unknown"),
       "copy_gbps": b["copy_gbps"], "results": b["results"], "roofs": b.get("roofs", []),
       "peer": peer}
json.dump(doc, open(os.path.join(out, "h200-quant.json"), "w"), indent=1)
# summary against the issue's targets at 16384x16384
need = {4: 0.90, 6: 0.85, 8: 0.85}
bits = {}
for r in b["results"]:
    name = r["format"].split(" ")[0]
    w = 8 if any(k in name for k in ("fp8", "int8")) else 6 if "fp6" in name else 4
    bits[r["format"]] = w
print("\n%-30s %-10s %8s %8s  target" % ("format (16384x16384 bf16)", "op", "us", "of copy"))
for r in b["results"]:
    if r["rows"] != 16384:
        continue
    t = need[bits[r["format"]]]
    print("%-30s %-10s %8.1f %7.1f%%  %s" % (r["format"], r["op"], r["us"], 100 * r["ratio_to_copy"],
          "ok" if r["ratio_to_copy"] >= t else "below %d%%" % (100 * t)))
for r in peer:
    if r["rows"] == 16384:
        print("%-30s %-10s %8.1f %7.1f%%  (peer)" % ("torch.compile " + r["format"], r["op"], r["us"],
              100 * (r["ratio_to_copy"] or 0)))
EOF
fi

# ---- profile (PARTS=ncu): where the quantize kernels' time goes -------------------
if want ncu; then
say "ncu: quantize / dequantize kernels at 16384x16384 (formats: \${NCU_FORMATS:-mxfp4,nvfp4,mxfp4+})"
[ -x $B/gpu_bench ] || link_bench gpu_bench $B/gpu_bench $LIBS >>"$OUT/ncu.log" 2>&1
for f in $(echo "${NCU_FORMATS:-mxfp4,nvfp4,mxfp4+}" | tr , ' '); do
    for k in ${NCU_KREGEX:-"^quant_kernel" "^dequant_kernel" "amax"}; do
        BFP_BENCH_FORMATS=$f BFP_BENCH_BIG_ONLY=1 timeout 120 ncu --section SpeedOfLight \
            --section Occupancy --section LaunchStats --section WarpStateStats \
            --section SchedulerStats --section MemoryWorkloadAnalysis ${NCU_EXTRA:-} -k "regex:$k" -c 1 \
            $B/gpu_bench /tmp/ncu_bench.json >"$OUT/ncu_one.log" 2>&1
        echo "#### $f $k" >>"$OUT/ncu.log"
        grep -vE "^(format|mxfp|nvfp|hif|mxint|GPU:)" "$OUT/ncu_one.log" >>"$OUT/ncu.log"
    done
done
rm -f "$OUT/ncu_one.log"
grep -E "^####|Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Block Limit Registers|Executed Instructions |Mem Busy|Max Bandwidth|Mem Pipes" "$OUT/ncu.log" | head -200
fi

# ---- SASS of the MX kernels (PARTS=sass; no disassembler on the build machine) ----
if want sass; then
    o=$(find $B -name "${SASS_OBJ:-quant_mxfp4.cu.o}" | head -1)
    cuobjdump -sass "$o" >"$OUT/sass.log" 2>&1 || echo "cuobjdump failed"
    echo "sass: $(wc -l <"$OUT/sass.log") lines from $o"
fi

# ---- profile of the skinny matmul kernel (PARTS=gemmprof; NCU_KERNELS: regexes
# of demangled names, default mxfp4 and nvfp4 at m <= 8) ----
if want gemmprof; then
    link_bench gpu_gemm $B/gpu_gemm $LIBS >"$OUT/gemmprof.log" 2>&1
    for k in ${NCU_KERNELS:-"gemm_skinny_kernel<.int.0, .int.1>" "gemm_skinny_kernel<.int.2, .int.1>"}; do
        echo "#### $k" >>"$OUT/gemmprof.log"
        timeout 200 ncu --kernel-name-base demangled -k "regex:$k" -c 1 --section SpeedOfLight \
            --section Occupancy --section LaunchStats --section WarpStateStats \
            --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
            ${NCU_EXTRA:-} $B/gpu_gemm /tmp/gemmprof.json quick >>"$OUT/gemmprof.log" 2>&1
    done
    grep -E "^####|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions |Block Limit|Grid Size|Dynamic Shared" "$OUT/gemmprof.log" | head -80
fi

# ---- matmul (issue #6) ----------------------------------------------------------
if want gemm; then
if [ -z "${GEMM_BENCH_ONLY:-}" ]; then # GEMM_BENCH_ONLY=1: the benchmark alone
say "test_cuda_matmul (fused kernel and dequant+cuBLAS vs bfp_matmul_ref)"
t0=$(date +%s)
timeout 300 "$TEST_MM" >"$OUT/test_cuda_matmul.log" 2>&1
rc=$?
grep -E "FAIL|passed" "$OUT/test_cuda_matmul.log" | head -40
echo "test_cuda_matmul exit $rc, $(($(date +%s) - t0)) s"
[ $rc -eq 0 ] || status=1
# the API around the kernels: packed weights in the caller's buffer, the tuning struct
timeout 120 "$TEST_MMA" >"$OUT/test_cuda_matmul_api.log" 2>&1
rc=$?
echo "test_cuda_matmul_api exit $rc: $(grep -E "FAIL|passed" "$OUT/test_cuda_matmul_api.log" | head -20)"
[ $rc -eq 0 ] || status=1
# the skinny kernel's block max after the mma for MX+ and NVFP4+ at every m <= 8
# (by default only MX+ at m = 1 takes it): the quick set once more
BFP_MATMUL_POST_MAX_M=8 BFP_TEST_QUICK=1 timeout 120 "$TEST_MM" >"$OUT/test_cuda_matmul_post.log" 2>&1
rc=$?
echo "test_cuda_matmul, BFP_MATMUL_POST_MAX_M=8, quick: $(grep -E "FAIL|passed" "$OUT/test_cuda_matmul_post.log" | head -20)"
[ $rc -eq 0 ] || status=1

# the wgmma kernel's serial mainloop (BFP_MATMUL_WG_PIPE=0): the quick set once more
BFP_MATMUL_WG_PIPE=0 BFP_TEST_QUICK=1 timeout 120 "$TEST_MM" >"$OUT/test_cuda_matmul_pipe0.log" 2>&1
rc=$?
echo "test_cuda_matmul, BFP_MATMUL_WG_PIPE=0, quick: $(grep -E "FAIL|passed" "$OUT/test_cuda_matmul_pipe0.log" | head -20)"
[ $rc -eq 0 ] || status=1
# no instruction may write an HGMMA's A registers before its group ends (docs/gemm.md)
o=$(find $B -name gemm_wgmma.cu.o | head -1)
if [ -n "$o" ] && command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$o" | python3 tools/dev/wgmma_operand_check.py || status=1
fi

if [ -z "${NO_MEMCHECK:-}" ]; then   # NO_MEMCHECK=1: skip it (a quick look)
say "compute-sanitizer memcheck on the matmul test (quick)"
BFP_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 "$TEST_MM" \
    >"$OUT/memcheck_matmul.log" 2>&1
rc=$?
echo "memcheck matmul: exit $rc; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_matmul.log" | tail -1)"
[ $rc -eq 0 ] || status=1
# racecheck: cuBLAS's own split-K kernel reports hazards (docs/gemm.md), so
# only the reports that name bfp's kernels count
BFP_TEST_QUICK=1 timeout 200 compute-sanitizer --tool racecheck "$TEST_MM" \
    >"$OUT/racecheck_matmul.log" 2>&1
n=$(grep "Race reported" "$OUT/racecheck_matmul.log" | grep -c bfpgemm)
echo "racecheck matmul: $n hazards in bfp's kernels; $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck_matmul.log" | tail -1)"
[ "$n" -eq 0 ] || status=1
fi

fi # GEMM_BENCH_ONLY

say "matmul benchmark (bench/gpu_gemm.cu; peers in bench/peer_gemm_torch.py)"
link_bench gpu_gemm $B/gpu_gemm $LIBS >"$OUT/gemm_bench.log" 2>&1 || { cat "$OUT/gemm_bench.log"; status=1; }
timeout 400 $B/gpu_gemm "$OUT/gpu_gemm.json" ${GEMM_QUICK:+quick} 2>&1 | tee -a "$OUT/gemm_bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
timeout "${PEER_CAP:-300}" python3 bench/peer_gemm_torch.py "$OUT/gpu_gemm.json" "$OUT/h200-gemm.json" 2>&1 |
    tee -a "$OUT/gemm_bench.log"
fi

# ---- the skinny kernel under each value of a runtime knob: gpu_gemm at
# GEMM_MS (at most 4 m) and GEMM_FORMATS per value; summary in $OUT/<name>.json ----
skinny_sweep() { # knob "values" name default_ms default_formats
    local knob=$1 vals=$2 name=$3
    say "skinny kernel: $knob in $vals"
    [ -x $B/gpu_gemm ] || link_bench gpu_gemm $B/gpu_gemm $LIBS >"$OUT/$name.log" 2>&1
    for v in $vals; do
        env "$knob=$v" GEMM_MS=${GEMM_MS:-$4} GEMM_FORMATS=${GEMM_FORMATS:-$5} timeout 200 \
            $B/gpu_gemm "$OUT/${name}_$v.json" ${GEMM_QUICK:+quick} >>"$OUT/$name.log" 2>&1 || status=1
    done
    sweep_summary "$name" "$knob" $vals
}

# the table and $OUT/<name>.json of the runs $OUT/<name>_<value>.json
sweep_summary() { # name knob values...
    local name=$1 knob=$2
    shift 2
    python3 - "$OUT" "$name" "$knob" "$@" <<'PYEOF'
import json, os, sys
out, name, knob, vals = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
path = lambda v: os.path.join(out, "%s_%s.json" % (name, v))
runs = {v: json.load(open(path(v)))["results"] for v in vals if os.path.exists(path(v))}
key = lambda r: (r["format"], r["M"], r["N"], r["K"])
by = {v: {key(r): r["skinny_us"] for r in runs[v]} for v in runs}
print("format    M      N      K  skinny_us by %s: " % knob + "  ".join(runs))
for r in next(iter(runs.values()), []):
    print("%-7s %3d %6d %6d  " % key(r) +
          "  ".join("%7.1f" % by[v].get(key(r), float("nan")) for v in runs))
json.dump({"knob": knob, "runs": runs}, open(os.path.join(out, name + ".json"), "w"))
PYEOF
    rm -f "$OUT/${name}"_*.json
}

# The skinny kernel rebuilt with BFP_SK_STAGES = each of SK_STAGES_SWEEP (fewer
# stages per warp leave shared memory for more warps), gpu_gemm at GEMM_MS
if want skstages; then
    say "skinny kernel: BFP_SK_STAGES in ${SK_STAGES_SWEEP:-3 4}"
    for v in ${SK_STAGES_SWEEP:-3 4}; do
        D=$B/skstages_$v
        mkdir -p "$D"
        lib_tu -DBFP_SK_STAGES=$v -c src/cuda/gemm_skinny.cu -o "$D/gemm_skinny.cu.o" >"$D/build.log" 2>&1 &
    done
    wait
    for v in ${SK_STAGES_SWEEP:-3 4}; do
        D=$B/skstages_$v
        lib_variant "$D" gemm_skinny.cu.o &&
            link_bench gpu_gemm "$D/gpu_gemm" "$D/libbfp_cuda.a" $B/libbfp.a >>"$OUT/skstages.log" 2>&1 ||
            { echo "stages $v: build failed"; status=1; continue; }
        GEMM_MS=${GEMM_MS:-1,16} GEMM_FORMATS=${GEMM_FORMATS:-} timeout 200 "$D/gpu_gemm" \
            "$OUT/skstages_$v.json" ${GEMM_QUICK:+quick} >>"$OUT/skstages.log" 2>&1 || status=1
    done
    sweep_summary skstages BFP_SK_STAGES ${SK_STAGES_SWEEP:-3 4}
fi

# More warps per SM made it slower (docs/gemm.md); this times fewer, at m = 1 and 16
want skinnysweep && skinny_sweep BFP_MATMUL_WARPS_PER_SM "${SWEEP_WARPS:-4 8 12 16}" skinnysweep 1,16 ""
# MX+ / NVFP4+: the block max after the mma (gemm_skinny.cu post_max_m) against
# in the operands (0) at every m of the NT = 1 kernel
want postsweep && skinny_sweep BFP_MATMUL_POST_MAX_M "${POST_SWEEP:-0 8}" postsweep 1,2,4,8 \
    mxfp4,mxfp4+,nvfp4,nvfp4+

# ---- the block quantizers' register cap (PARTS=qctas): rebuild their
# translation units (src/cuda/instances/quant_*.cu but HiF4's) with BFP_QBLOCK_CTAS_{MX,MXPLUS,MXPP,NV} (min CTAs per SM;
# 0 = the compiler's choice, -1 = the library's default) and
# BFP_MXQ_BLOCKS_{MXPLUS,MXPP} (blocks per thread; -1 = the default), one
# library per variant "mx:mxplus:mxpp:nv:blocks_mxplus:blocks_mxpp" of
# QCTAS_VARIANTS, and time the quantizers at 16384x16384 with each ----
if want qctas; then
QV=${QCTAS_VARIANTS:-"-1:-1:-1:-1:-1:-1 -1:-1:0:-1:-1:2 -1:-1:4:-1:-1:2"}
QF=${QCTAS_FORMATS:-mxfp4,mxfp4+,mxfp4++,mxfp6_e2m3,mxfp6_e2m3+,mxfp6_e2m3++,mxfp8_e4m3,mxfp8_e4m3++}
QCTAS_TUS=$(cd src/cuda/instances && ls quant_*.cu | grep -v '^quant_hif4' | sed 's/\.cu$//')
say "quantize block kernels' min CTAs per SM: variants $QV on $QF"
t0=$(date +%s)
for v in $QV; do
    IFS=: read -r a b c d e f2 <<<"$v"
    D=$B/qctas_${a}_${b}_${c}_${d}_${e:--1}_${f2:--1}
    mkdir -p "$D"
    for f in $QCTAS_TUS; do
        lib_tu -Xptxas -v -DBFP_QBLOCK_CTAS_MX=$a -DBFP_QBLOCK_CTAS_MXPLUS=$b \
            -DBFP_QBLOCK_CTAS_MXPP=$c -DBFP_QBLOCK_CTAS_NV=$d -DBFP_MXQ_BLOCKS_MXPLUS=${e:--1} \
            -DBFP_MXQ_BLOCKS_MXPP=${f2:--1} -c src/cuda/instances/$f.cu -o "$D/$f.cu.o" \
            >"$D/ptxas_$f.log" 2>&1 &
    done
done
wait
echo "variant builds took $(($(date +%s) - t0)) s"
for v in $QV; do
    IFS=: read -r a b c d e f2 <<<"$v"
    D=$B/qctas_${a}_${b}_${c}_${d}_${e:--1}_${f2:--1}
    lib_variant "$D" $(for f in $QCTAS_TUS; do echo "$f.cu.o"; done) &&
        link_bench gpu_bench "$D/gpu_bench" "$D/libbfp_cuda.a" $B/libbfp.a >>"$OUT/qctas.log" 2>&1 ||
        { echo "variant $v: build failed"; status=1; continue; }
    echo "#### variant $v" >>"$OUT/qctas.log"
    BFP_BENCH_BIG_ONLY=1 BFP_BENCH_FORMATS=$QF timeout 200 "$D/gpu_bench" "$OUT/qctas_$v.json" \
        >>"$OUT/qctas.log" 2>&1 || status=1
done
python3 - "$OUT" $QV <<'PYEOF'
import json, os, sys
out, vs = sys.argv[1], sys.argv[2:]
runs = {}
for v in vs:
    p = os.path.join(out, "qctas_%s.json" % v)
    if os.path.exists(p):
        runs[v] = json.load(open(p))
rows = {}
for v, d in runs.items():
    for r in d["results"]:
        if r["op"] == "quantize":
            rows.setdefault(r["format"], {})[v] = (r["us"], r["ratio_to_copy"])
print("quantize 16384x16384 bf16, us (of copy) by variant mx:mxplus:mxpp:nv:blocks_mxplus:blocks_mxpp")
print("%-26s" % "format" + "".join("%20s" % v for v in runs))
for f, by in rows.items():
    print("%-26s" % f + "".join("%12.1f (%4.1f%%)" % (by[v][0], 100 * by[v][1]) if v in by else "%20s" % "-"
                                for v in runs))
json.dump({v: runs[v] for v in runs}, open(os.path.join(out, "qctas.json"), "w"))
PYEOF
rm -f "$OUT"/qctas_*.json
fi

# ---- the dequantize + cuBLAS path in chunks (PARTS=deqchunk; an experiment) ----
if want deqchunk; then
say "dequantize + cuBLAS by chunks of W rows (bench/gpu_deqchunk.cu)"
nvcc -O3 -gencode arch=compute_90,code=sm_90 -std=c++17 -Iinclude -Itests bench/gpu_deqchunk.cu \
    $LIBS -lcublas -o $B/gpu_deqchunk >"$OUT/deqchunk.log" 2>&1 || { cat "$OUT/deqchunk.log"; status=1; }
timeout 300 $B/gpu_deqchunk "$OUT/h200-deqchunk.json" 2>&1 | tee -a "$OUT/deqchunk.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

# at most 8 files come back from the GPU machine: logs go in one archive
(cd "$OUT" && tar czf logs.tar.gz ./*.log && rm -f ./*.log peer.json)
say "done: status $status; results in $OUT"
exit $status
