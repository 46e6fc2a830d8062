#!/usr/bin/env bash
# bfp convert --device cuda gives byte for byte the files of the CPU run:
# every format in the bfp layout (odd shapes and partial blocks included),
# the compressed-tensors and GGUF layouts, quantization options, NaN/Inf
# blocks, a tensor larger than the upload chunk, --report's SQNRs, and a
# killed GPU run resumed. Without CUDA in the build or without a GPU,
# --device cuda is one error line, exit 2, nothing written, and the test
# prints "skipped: no GPU".
# Usage: bash tests/cli/test_convert_cuda.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
ROOT=$PWD
PY=${PYTHON:-python3}
one_line() { test "$(wc -l <"$1")" -eq 1 && grep -q '^bfp: error: ' "$1"; }
"$PY" "$ROOT/tests/tools/make_ckpt.py" "$W/in" || exit 2

"$BFP" convert -f mxfp4 --device cuda "$W/in" "$W/probe" >"$W/out" 2>"$W/err"
rc=$?
if [ $rc -ne 0 ] && grep -Eq "built without CUDA|no usable CUDA GPU" "$W/err"; then
    check "no GPU: exit 2" test $rc -eq 2
    check "no GPU: one error line" one_line "$W/err"
    check "no GPU: nothing written" test ! -e "$W/probe"
    echo "test_convert_cuda: skipped: no GPU ($(sed 's/^bfp: error: //' "$W/err"))"
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi
check "--device cuda runs (exit 0)" test $rc -eq 0
[ $rc -eq 0 ] || cat "$W/err"

# one file: a 3072x2048 F32 tensor (24 MiB, three upload chunks) with NaN,
# Inf and -0.0 blocks, and a bf16 one
"$PY" - "$W/big.safetensors" <<'PY'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(7)
a = (rng.standard_normal((3072, 2048)) * np.logspace(-3, 2, 2048)).astype(np.float32)
a[5, 100] = np.nan; a[6, 0] = np.inf; a[7, 64:96] = -0.0; a[8, 3] = -np.inf
b = rng.standard_normal((256, 512)).astype(np.float32)
bb = ((b.view(np.uint32).astype(np.uint64) + 0x7FFF + ((b.view(np.uint32) >> 16) & 1)) >> 16).astype(np.uint16)
ts = [("model.layers.0.mlp.up_proj.weight", "F32", a.shape, a.tobytes()),
      ("model.layers.0.mlp.down_proj.weight", "BF16", b.shape, bb.tobytes())]
h, off = {}, 0
for n, dt, sh, raw in ts:
    h[n] = {"dtype": dt, "shape": list(sh), "data_offsets": [off, off + len(raw)]}; off += len(raw)
hj = json.dumps(h).encode(); hj += b" " * (-len(hj) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj + b"".join(t[3] for t in ts))
PY

# same ARGS...: convert IN with ARGS on the CPU and on the GPU; the outputs
# must be identical (every file, the manifest included)
n=0
same() {
    local in=$1; shift
    n=$((n + 1))
    local cpu=$W/cpu$n gpu=$W/gpu$n
    case " $* " in *" --layout gguf "*) cpu=$cpu.gguf gpu=$gpu.gguf ;; esac
    "$BFP" convert "$@" "$in" "$cpu" >"$W/c.out" 2>"$W/c.err"
    local rc1=$?
    "$BFP" convert --device cuda "$@" "$in" "$gpu" >"$W/g.out" 2>"$W/g.err"
    local rc2=$?
    check "$*: both runs exit 0 ($rc1, $rc2)" test $rc1 -eq 0 -a $rc2 -eq 0
    [ $rc2 -eq 0 ] || cat "$W/g.err"
    check "$*: --device cuda writes the CPU's bytes" diff -r "$cpu" "$gpu"
    rm -rf "$cpu" "$gpu"
}
for f in $("$BFP" formats --json | "$PY" -c 'import json,sys; print(" ".join(f["name"] for f in json.load(sys.stdin)))'); do
    same "$W/in" -f "$f" --include 'odd_proj' # 7x33: partial blocks
    same "$W/big.safetensors" -f "$f"
done
same "$W/in" -f mxfp4 --rounding stochastic --seed 7
same "$W/in" -f mxfp8_e4m3 --scale-mode rceil
same "$W/in" -f mxint8 --scale-mode even --rounding away
same "$W/in" -f nvfp4 --2d
same "$W/in" -f nvfp4 --no-tensor-scale
same "$W/in" -f hif4 --rounding rne
for f in mxfp4 nvfp4 mxfp6_e2m3 mxfp8_e4m3 mxint8 mxint4; do
    same "$W/in" -f $f --layout compressed-tensors
    same "$W/big.safetensors" -f $f --layout compressed-tensors
done
for f in mxfp4 nvfp4; do
    same "$W/in" -f $f --layout gguf
    same "$W/big.safetensors" -f $f --layout gguf
done

# --report: the same SQNRs and NaN block counts; --json says the device
"$BFP" convert --json --report -f nvfp4 "$W/big.safetensors" "$W/rc" >"$W/rc.json" 2>/dev/null
"$BFP" convert --json --report --device cuda -f nvfp4 "$W/big.safetensors" "$W/rg" >"$W/rg.json" 2>/dev/null
check "--report: the GPU's SQNRs and NaN blocks are the CPU's" "$PY" -c '
import json, sys
c, g = (json.load(open(p)) for p in sys.argv[1:3])
assert (c["device"], g["device"]) == ("cpu", "cuda"), (c["device"], g["device"])
assert json.dumps(c["report"]) == json.dumps(g["report"]), (c["report"], g["report"])
assert c["report"][0]["nonfinite_blocks"] == 3, c["report"][0]' "$W/rc.json" "$W/rg.json"

# a GPU run killed after two tensors, then rerun: the CPU's bytes
"$BFP" convert -f mxfp4 --layout compressed-tensors "$W/in" "$W/kc" >/dev/null 2>&1
BFP_CONVERT_TEST_DIE_AFTER=2 "$BFP" convert --device cuda -f mxfp4 --layout compressed-tensors \
    "$W/in" "$W/kg" >/dev/null 2>&1
check "killed GPU run: SIGKILL (exit 137)" test $? -eq 137
"$BFP" convert --device cuda -f mxfp4 --layout compressed-tensors "$W/in" "$W/kg" >"$W/out" 2>&1
check "rerun on the GPU: exit 0" test $? -eq 0
check "rerun on the GPU: the CPU's bytes" diff -r "$W/kc" "$W/kg"

"$BFP" convert --device tpu -f mxfp4 "$W/in" "$W/bad" >"$W/out" 2>"$W/err"
check "unknown device: exit 2" test $? -eq 2
check "unknown device: one line" grep -q "unknown device 'tpu' (cpu, cuda)" "$W/err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
