#!/usr/bin/env bash
# bfp dequantize, compare and verify on compressed-tensors checkpoints that
# the compressed-tensors library wrote itself (tests/tools/make_ct_ckpt.py:
# its NVFP4A16, MXFP4A16, MXFP8A16 and MXFP6A16 presets, compress_module):
# the values against its
# own decompress_module, the stored planes against the reference, and bad
# input (exit 2, one line). PYTHON must have compressed-tensors and torch
# (requirements-interop.txt).
# Usage: bash tests/cli/test_ct_input.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
ROOT=$PWD
PY=${PYTHON:-python3}
one_line() { test "$(wc -l <"$1")" -eq 1 && grep -q '^bfp: error: ' "$1"; }
refuse() { # refuse DESCRIPTION PATTERN ARGS...: exit 2 and one line saying PATTERN
    local what=$1 pat=$2; shift 2
    "$BFP" "$@" >"$W/out" 2>"$W/err"
    local rc=$?
    check "$what: exit 2" test $rc -eq 2
    check "$what: one error line" one_line "$W/err"
    check "$what: says '$pat'" grep -q -- "$pat" "$W/err"
}
if ! "$PY" -c 'import compressed_tensors, torch' 2>/dev/null; then
    echo "FAIL: $PY lacks compressed-tensors or torch: $PY -m pip install -r requirements-interop.txt"
    exit 1
fi
UP=model.layers.0.mlp.up_proj DOWN=model.layers.0.mlp.down_proj

# same_bf16 OURS.safetensors THEIRS.npy MAXSTEP: our BF16 tensor against
# compressed-tensors' decompressed bf16 values, at most MAXSTEP bf16 steps apart
# and equal in 99% of the values
same_bf16() {
    "$PY" - "$@" <<'PY'
import json, struct, sys
import numpy as np
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
e = [v for k, v in json.loads(d[8:8 + n]).items() if k != "__metadata__"][0]
ours = np.frombuffer(d[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]], "<u2")
theirs = np.load(sys.argv[2]).astype(np.float32)
assert e["dtype"] == "BF16" and list(theirs.shape) == e["shape"], (e, theirs.shape)
tb = (theirs.view(np.uint32) >> 16).astype(np.uint16).ravel()
assert (theirs.view(np.uint32) & 0xFFFF == 0).all()  # theirs are bf16 values
step = np.abs(ours.astype(np.int32) - tb.astype(np.int32))
assert step.max() <= int(sys.argv[3]) and (step != 0).mean() < 0.01, (step.max(), (step != 0).mean())
PY
}

for fmt in nvfp4 mxfp4 mxfp8_e4m3 mxfp6_e2m3; do
    D=$W/$fmt CT=$W/$fmt/ct
    "$PY" "$ROOT/tests/tools/make_ct_ckpt.py" "$D" $fmt || exit 2
    # their MX scale rounds amax to the element's mantissa first: our EVEN
    opt=(); [ $fmt != nvfp4 ] && opt=(--scale-mode even)
    # nvfp4: theirs decode code * (scale / global) in two f32 roundings, then
    # bf16; ours code * scale / global in one: at most one bf16 step apart
    maxstep=0; [ $fmt = nvfp4 ] && maxstep=1

    # ---- dequantize: compressed-tensors' own decompressor's values
    for m in $UP $DOWN; do
        "$BFP" dequantize -t bf16 --name $m "$CT" "$W/ours.$fmt.$m.safetensors" >"$W/out" 2>"$W/err"
        check "$fmt $m: dequantize the directory (exit 0)" test $? -eq 0
        check "$fmt $m: decompress_module's values" \
            same_bf16 "$W/ours.$fmt.$m.safetensors" "$D/theirs.$m.npy" $maxstep
    done
    check "$fmt: dequantize names format and shape" grep -q "$fmt 24x64" "$W/out"
    "$BFP" dequantize -t bf16 --name $UP "$CT/model-00001-of-00002.safetensors" \
        "$W/shard.safetensors" >/dev/null 2>&1
    check "$fmt: a shard gives the directory's bytes" \
        cmp -s "$W/shard.safetensors" "$W/ours.$fmt.$UP.safetensors"
    rm -f "$W/shard.safetensors"

    # ---- verify: the stored planes against the reference
    "$BFP" verify -f $fmt "${opt[@]}" -s 24x64 "$D/orig.$DOWN.bin" \
        "$CT/model-00002-of-00002.safetensors" >"$W/out" 2>"$W/err"
    rc=$?
    if [ $fmt = mxfp4 ] || [ $fmt = mxfp6_e2m3 ]; then
        check "$fmt: verify --scale-mode even of a shard with one module: IDENTICAL" test $rc -eq 0
        check "$fmt: the layout was guessed from the shard" \
            grep -q "compressed-tensors layout (guessed: a shard" "$W/out"
        "$BFP" verify -f $fmt -s 40x96 --name $UP "$D/orig.$UP.bin" "$CT" >"$W/out" 2>&1
        check "$fmt: OCP's floor scale is not theirs: DIFFERENT (exit 1)" test $? -eq 1
        "$BFP" verify -f $fmt --scale-mode even -s 40x96 --name $UP "$D/orig.$UP.bin" "$CT" >"$W/out" 2>&1
        check "$fmt: verify of a checkpoint directory (guessed), --scale-mode even: IDENTICAL" \
            test $? -eq 0
    elif [ $fmt = mxfp8_e4m3 ]; then
        # theirs rounds amax to E2M1's one mantissa bit, not E4M3's three, before
        # the exponent: a block max of mantissa 1.75..1.9375 gets a scale one
        # step up, and its codes follow that scale
        "$BFP" verify --json --max-mismatches 100000 -f $fmt "${opt[@]}" -s 40x96 --name $UP \
            "$D/orig.$UP.bin" "$CT" >"$W/j" 2>"$W/err"
        check "mxfp8_e4m3: verify --scale-mode even: DIFFERENT (exit 1)" test $? -eq 1
        check "mxfp8_e4m3: every scale theirs is one step up; codes follow it" "$PY" -c '
import json, sys
j = json.load(open(sys.argv[1])); m = j["first_mismatches"]
assert len(m) == j["mismatches"] and j["planes"]["scales"]["differ"] > 0, j["planes"]
up = {(x["row"], x["block"]) for x in m if x["plane"] == "scales"}
assert all(x["received"] == x["expected"] + 1 for x in m if x["plane"] == "scales"), m
assert all((x["row"], x["block"]) in up and x["cause"] == "scale-step"
           for x in m if x["plane"] == "codes"), m' "$W/j"
    else
        check "nvfp4: verify of a shard runs (exit 0 or 1)" test $rc -le 1
        "$BFP" verify --json -f nvfp4 -s 40x96 --name $UP "$D/orig.$UP.bin" "$CT" >"$W/j" 2>"$W/err"
        check "nvfp4: verify of the directory: DIFFERENT (exit 1)" test $? -eq 1
        # their zero scale is the E4M3 eps 0.125 (0x20), ours 0: the all-zero
        # block of row 1 (two NVFP4 blocks); codes and tensor scale equal
        check "nvfp4: only the zero block's scales differ (0x00 here, 0x20 theirs)" "$PY" -c '
import json, sys
j = json.load(open(sys.argv[1])); p = j["planes"]
assert p["codes"]["differ"] == 0 and p["tensor_scale"]["differ"] == 0, p
assert [(m["plane"], m["row"], m["block"], m["expected"], m["received"])
        for m in j["first_mismatches"]] == [("scales", 1, 0, 0, 32), ("scales", 1, 1, 0, 32)], j
assert j["error"]["reference"]["sqnr_db"] == j["error"]["dut"]["sqnr_db"], j["error"]' "$W/j"
    fi

    # ---- compare: the stored planes against the original, beside our own
    theirs=$D/theirs.$UP.npy; [ $fmt = nvfp4 ] && theirs=$D/theirs32.$UP.npy # f32, not bf16
    "$BFP" compare --json -f $fmt "${opt[@]}" --name $UP --ref "$D/orig" "$CT" >"$W/j" 2>"$W/err"
    check "$fmt: compare --ref ORIGINAL_DIR of a module (exit 0)" test $? -eq 0
    check "$fmt: the stored row's SQNR is decompress_module's, and equals ours" "$PY" -c '
import json, sys
import numpy as np
r = json.load(open(sys.argv[1]))[0]["results"]
assert [(x["format"], x["stored"]) for x in r] == [(sys.argv[4], True), (sys.argv[4], False)], r
x = np.fromfile(sys.argv[2], "<f4").astype(np.float64)
y = np.load(sys.argv[3]).astype(np.float64).ravel()
sqnr = 10 * np.log10((x * x).sum() / ((x - y) ** 2).sum())
assert abs(r[0]["sqnr_db"] - sqnr) < 1e-4, (r[0]["sqnr_db"], sqnr)
if sys.argv[4] != "mxfp8_e4m3":  # its scale rule is not one of ours (above)
    assert r[0]["sqnr_db"] == r[1]["sqnr_db"] and r[0]["saturated"] == r[1]["saturated"], r
' "$W/j" "$D/orig.$UP.bin" "$theirs" $fmt
    "$BFP" compare -f $fmt --ref "$D/orig/model-00001-of-00002.safetensors" \
        --ref-name $UP.weight "$CT/model-00001-of-00002.safetensors" >"$W/out" 2>"$W/err"
    check "$fmt: compare of a shard, --ref-name (exit 0)" test $? -eq 0
    check "$fmt: the table has the stored row" grep -q "^  $fmt (stored) " "$W/out"
done

"$BFP" compare --json -f mxfp4,mxfp8_e4m3 --name $UP "$W/mxfp4/ct" >"$W/j" 2>"$W/err"
check "compare without --ref: its dequantized values (exit 0)" test $? -eq 0
check "without --ref: mxfp4 and mxfp8_e4m3 hold stored mxfp4 values exactly" "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))[0]
assert t["input"].startswith("mxfp4 40x96 stored, its dequantized values"), t["input"]
assert [(x["format"], x["stored"], x["sqnr_db"], x["rmse"]) for x in t["results"]] == \
    [("mxfp4", False, None, 0), ("mxfp8_e4m3", False, None, 0)], t["results"]' "$W/j"

# ---- bad input
CT=$W/nvfp4/ct
refuse "compare: a directory without --name" "name the module to read (--name)" compare "$CT"
refuse "compare: --ref of another shape" "its tensor is 24x64, the stored one 40x96" \
    compare --name $UP --ref "$W/nvfp4/orig" --ref-name $DOWN.weight "$CT"
refuse "compare: --ref with a float FILE" "is the original of a quantized FILE" \
    compare --ref "$W/nvfp4/orig" "$W/nvfp4/orig/model-00001-of-00002.safetensors"
refuse "compare: --ref-name without --ref" "--ref is missing" compare --ref-name x "$CT"
refuse "compare: --ref without the tensor" "no tensor 'nope' in its model.safetensors.index.json" \
    compare --name $UP --ref "$W/nvfp4/orig" --ref-name nope "$CT"
refuse "compare: a module that is not there" "no quantized module 'nope'" compare --name nope "$CT"
refuse "verify: another shape" "holds nvfp4 40x96, not the nvfp4 24x64" \
    verify -f nvfp4 -s 24x64 --name $UP "$W/nvfp4/orig.$DOWN.bin" "$CT"
refuse "verify: a float shard as DUT" "is not a directory" \
    verify -f nvfp4 -s 24x64 "$W/nvfp4/orig.$DOWN.bin" "$W/nvfp4/orig/model-00002-of-00002.safetensors"
# a config.json naming a scheme bfp does not read (FP8 per channel), or its
# group size not the format's block (W4A16's 128)
edit_config() { # edit_config DIR KEY=VALUE: a copy of $CT with config.json changed
    rm -rf "$1"; cp -r "$CT" "$1"
    "$PY" - "$1/config.json" "$2" <<'PY'
import json, sys
p, (k, v) = sys.argv[1], sys.argv[2].split("=")
c = json.load(open(p)); q = c["quantization_config"]
if k == "format":
    q["format"] = v
else:
    for g in q["config_groups"].values():
        g["weights"]["group_size"] = int(v)
json.dump(c, open(p, "w"))
PY
}
edit_config "$W/bad_format" format=float-quantized
refuse "dequantize: a config.json format bfp does not read" \
    "config.json: quantization_config's format 'float-quantized' is not one bfp reads" \
    dequantize --name $UP "$W/bad_format" "$W/x.npy"
edit_config "$W/bad_group" group_size=128
refuse "compare: a group size that is not the block" \
    "config.json: 'nvfp4-pack-quantized' with group_size 128, not nvfp4's block of 16" \
    compare --name $UP "$W/bad_group"
refuse "dequantize: a module that is not there" "no quantized module 'nope'" \
    dequantize --name nope "$CT" "$W/x.npy"
check "dequantize: nothing written on error" test ! -e "$W/x.npy"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
