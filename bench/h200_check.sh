#!/usr/bin/env bash
# bench/h200_check.sh - one GPU call after a merge: build everything (CUDA,
# io, CLI, Python), run every GPU test program, the CLI's --device cuda test,
# the torch checks and GPU pytest cases, then the end-to-end decoder
# benchmark (bench/e2e_torch.py) for E2E_FORMATS, each step under a time cap.
#
#   BFP_CODE=<commit> OUT=/tmp/o bash bench/h200_check.sh
#
# Logs go to $OUT/logs.tar.gz, the e2e JSON to $OUT/h200-e2e.json and a
# summary (one line per step: rc, seconds, the test's own summary line) to
# $OUT/summary.txt. E2E_FORMATS (default mxfp4,nvfp4,mxfp4+,mxfp4:mxfp8_e4m3),
# E2E_ARGS (more arguments, e.g. --embeddings), E2E_CAP
# (seconds; default what is left of 570 s since the start), NO_E2E=1. STEPS
# (default "tests torch e2e"): which groups run after the build; "wgprof" adds
# an ncu profile of the wgmma kernel (WGPROF_M rows of x, default 128; mxfp4,
# or WGPROF_KERNEL / WGPROF_PATHS / WGPROF_FORMATS: another kernel, path, format;
# 8192^2, or WGPROF_SHAPES) to $OUT/wgprof.txt; "realmodel" runs bench/real_model_torch.py on
# the GPU (SmolLM2 and MiniLM, REAL_FORMATS) against the CPU study's values in
# bench/results/cpu-real-model-torch.json, into $OUT/h200-real-model.json,
# once bench/carry_models.sh has brought the models; "moe" runs
# bench/moe_gpu.sh on this build (sanitizers on test_cuda_grouped's quick set,
# bench/gpu_moe.cu and its torch peer) into $OUT/h200-moe.json; "gemm" runs
# bench/gpu_gemm.cu (its GEMM_* variables pass through) into $OUT/gemm.json. cJSON, when the machine lacks it: carry .deb
# files and set DEBS=dir (dpkg -x into /). PREBUILT=dir (libbfp.a and
# libbfp_cuda.a built on the CPU machine from this tree, sm_90a): no cmake
# build; the test programs, gpu_gemm and gpu_moe are linked from them in
# seconds (steps tests, gemm, wgprof and moe only: torch, e2e and realmodel
# need the Python extension of a full build).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
L=$OUT/logs
mkdir -p "$L"
B=build-h200
S=$OUT/summary.txt
export BFP_CODE=${BFP_CODE:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
T0=$(date +%s)
echo "# h200_check at $BFP_CODE, $(date -u +'%Y-%m-%d %H:%M UTC')" >"$S"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$S" 2>&1
if [ -n "${DEBS:-}" ]; then
    for f in "$DEBS"/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
step() { # step NAME CAP CMD...: run, log, one summary line
    local name=$1 cap=$2
    shift 2
    local t0=$(date +%s)
    timeout "$cap" "$@" >"$L/$name.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E "passed|failed|skipped|OK|Error|error" "$L/$name.log" | tail -n 1)
    echo "$name rc=$rc $(($(date +%s) - t0))s: $last" >>"$S"
    return $rc
}
STEPS=${STEPS:-tests torch e2e}
[ -z "${PREBUILT:-}" ] || STEPS=${STEPS// torch/} STEPS=${STEPS// e2e/} STEPS=${STEPS// realmodel/}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
build() { # the cmake build, or PREBUILT's libraries and the programs linked from them
    if [ -z "${PREBUILT:-}" ]; then
        cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DBFP_MPI=OFF && cmake --build $B -j "$(nproc)"
        return
    fi
    local t
    source bench/link_gpu.sh
    mkdir -p $B && cp "$PREBUILT/libbfp.a" "$PREBUILT/libbfp_cuda.a" $B/ || return 1
    for t in ${TESTS:-test_cuda_matmul_xq test_cuda_grouped test_cuda_matmul_api test_cuda_matmul test_cuda}; do
        link_test $t $B/$t $B/libbfp_cuda.a $B/libbfp.a || return 1
    done
}
export -f build
export B
if step build 300 bash -c build; then
    if want tests; then
        for t in ${TESTS:-test_cuda_matmul_xq test_cuda_grouped test_cuda_matmul_api test_cuda_matmul test_cuda}; do
            step "$t" 180 "$B/$t"
        done
        [ -n "${PREBUILT:-}" ] || # the CLI's test needs the full build
            step convert_cuda 180 bash -c "cd $B && ctest -R cli_test_convert_cuda --output-on-failure"
    fi
    export PYTHONPATH=$PWD/$B/python
    if want torch; then
        step torch_cuda_check 180 python3 bench/torch_cuda_check.py
        step pytest_gpu 180 python3 -m pytest -q -rf --tb=short tests/python/test_torch_moe.py \
            tests/python/test_torch_ops.py tests/python/test_torch_nn.py
    fi
    if want wgprof || want gemm; then
        step gemm_build 120 bash -c "source bench/link_gpu.sh &&
            link_bench gpu_gemm $B/gpu_gemm $B/libbfp_cuda.a $B/libbfp.a"
    fi
    if want gemm; then # GEMM_SHAPES, GEMM_MS, GEMM_PATHS, GEMM_FORMATS pass through
        step gemm "${GEMM_CAP:-240}" $B/gpu_gemm "$OUT/gemm.json"
    fi
    if want wgprof; then
        step wgprof 200 env GEMM_MS=${WGPROF_M:-128} GEMM_FORMATS=${WGPROF_FORMATS:-mxfp4} \
            GEMM_SHAPES=${WGPROF_SHAPES:-${GEMM_SHAPES:-}} \
            GEMM_PATHS=${WGPROF_PATHS:-} ncu --kernel-name-base demangled \
            -k "regex:${WGPROF_KERNEL:-gemm_wgmma_kernel<.int.0}" -c 1 \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section SchedulerStats --section InstructionStats \
            --section MemoryWorkloadAnalysis --section SourceCounters \
            $B/gpu_gemm /tmp/wgprof.json quick
        cp "$L/wgprof.log" "$OUT/wgprof.txt"
    fi
    if want moe; then
        step moe_build 120 bash -c "source bench/link_gpu.sh &&
            link_bench gpu_moe $B/gpu_moe $B/libbfp_cuda.a $B/libbfp.a"
        step moe "${MOE_CAP:-420}" env MOE_BIN=$B OUT="$L/moe" bash bench/moe_gpu.sh
        cp "$L/moe/h200-moe.json" "$OUT/" 2>/dev/null
        grep -E "^== " "$L/moe/moe.log" >>"$S"
    fi
    if want realmodel; then # the models arrive first: bench/carry_models.sh
        if exports=$(bash bench/carry_models.sh ready 2>>"$S"); then
            eval "$exports"
            step realmodel "${REAL_CAP:-300}" python3 bench/real_model_torch.py --device cuda \
                --text "$BFP_EVAL_TEXT" --study bench/results/cpu-real-model-torch.json \
                --formats "${REAL_FORMATS:-mxfp4,nvfp4,mxfp4+,nvfp4+,hif4}" \
                --json-out "$OUT/h200-real-model.json"
        fi
    fi
    if want e2e && [ -z "${NO_E2E:-}" ]; then
        cap=${E2E_CAP:-$((570 - ($(date +%s) - T0)))} # the rest of a 10-minute call
        [ "$cap" -lt 60 ] && cap=60
        step e2e "$cap" python3 bench/e2e_torch.py --force \
            --formats "${E2E_FORMATS:-mxfp4,nvfp4,mxfp4+,mxfp4:mxfp8_e4m3}" ${E2E_ARGS:-} \
            --out "$OUT/h200-e2e.json"
        grep -E "^(bf16|mx|nv|hif)" "$L/e2e.log" >>"$S"
    fi
fi
cat "$S"
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
