#!/usr/bin/env bash
# The host side of src/cuda/quantize_host.cu (bfp convert --device cuda)
# checked without a GPU: compiled against a fake CUDA runtime (here: device
# memory is host memory) and a bfp_cuda_quantize that runs bfp_quantize,
# linked into the CLI of a build without CUDA. tests/cli/test_convert_cuda.sh
# must then pass (chunked uploads, plane offsets, the copies back, NaN
# counts, resume), and a CUDA call failing at each point must give one error
# line, exit 2, and leave a run that resumes to the CPU's bytes.
# usage: tools/dev/cuda_host_fake/run.sh [BUILD]   (from the repo root; BUILD:
# a -DBFP_CUDA=OFF build with bfp_cli built, default build)
set -eu
B=${1:-build}
D=$(dirname "$0")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
g++ -O1 -g -x c++ -I"$D" -Iinclude -c src/cuda/quantize_host.cu -o "$W/qh.o"
gcc -O1 -g -Iinclude -c "$D/fake_quant.c" -o "$W/fake.o"
# the fakes come first: their definitions win over the stub's
gcc -o "$W/bfp" "$B/CMakeFiles/bfp_cli.dir/tools/bfp/main.c.o" "$W/qh.o" "$W/fake.o" \
    "$B/libbfp_cli_commands.a" "$B/libbfp_io.a" "$B/libbfp_cuda.a" "$B/libbfp.a" \
    -lcjson -lm -lpthread -lstdc++ -Wl,--allow-multiple-definition
bash tests/cli/test_convert_cuda.sh "$W/bfp"
set +e # from here failures are counted

PY=${PYTHON:-python3}
"$PY" tests/tools/make_ckpt.py "$W/in"
"$W/bfp" convert -f nvfp4 "$W/in" "$W/cpu" >/dev/null
calls=$(FAKE_REPORT=1 "$W/bfp" convert --device cuda -f nvfp4 "$W/in" "$W/all" 2>&1 >/dev/null |
        sed -n 's/^fake: \([0-9]*\) CUDA calls.*/\1/p')
bad=0
# the last call is bfp_cuda_stage_free's synchronize, after the work is done
# (its status is not used), so every call before it
for n in $(seq 1 $((calls - 1))); do
    rm -rf "$W/f"
    FAKE_FAIL=$n "$W/bfp" convert --device cuda -f nvfp4 "$W/in" "$W/f" >/dev/null 2>"$W/err"
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <"$W/err")" -ne 1 ]; then
        echo "FAIL: CUDA call $n failing: exit $rc, stderr: $(cat "$W/err")"; bad=$((bad + 1))
    elif ! "$W/bfp" convert --device cuda -f nvfp4 "$W/in" "$W/f" >/dev/null 2>&1 ||
         ! diff -r "$W/cpu" "$W/f" >/dev/null; then
        echo "FAIL: CUDA call $n failing: the rerun is not the CPU's output"; bad=$((bad + 1))
    fi
done
echo "cuda_host_fake: $((calls - 1)) failure points, $bad failed"
[ "$bad" -eq 0 ]
