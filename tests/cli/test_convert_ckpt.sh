#!/usr/bin/env bash
# bfp convert of whole checkpoints: every layout writes, `bfp dequantize`
# reads compressed-tensors back, SIGKILL mid-run then a rerun gives the
# output of an uninterrupted run, and bad input exits 2 with one line and
# writes nothing. (tests/python/test_ckpt_interop.py reads the outputs with
# the gguf and compressed-tensors libraries.)
# Usage: bash tests/cli/test_convert_ckpt.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
ROOT=$PWD
PY=${PYTHON:-python3}
one_line() { test "$(wc -l <"$1")" -eq 1 && grep -q '^bfp: error: ' "$1"; }
refuse() { # refuse DESCRIPTION OUT PATTERN ARGS...: exit 2, one line, no OUT
    local what=$1 out=$2 pat=$3; shift 3
    "$BFP" convert "$@" >"$W/out" 2>"$W/err"
    local rc=$?
    check "$what: exit 2" test $rc -eq 2
    check "$what: one error line" one_line "$W/err"
    check "$what: says '$pat'" grep -q -- "$pat" "$W/err"
    check "$what: nothing written" test ! -e "$out"
}

"$PY" "$ROOT/tests/tools/make_ckpt.py" "$W/in" || exit 2

# ---- every layout writes; the right tensors are quantized
"$BFP" convert -f mxfp4 --layout compressed-tensors --json "$W/in" "$W/ct" >"$W/j" 2>"$W/err"
check "ct mxfp4: exit 0" test $? -eq 0
check "ct: no progress bar when stderr is not a terminal" test ! -s "$W/err"
check "ct: 5 of 12 quantized (not embeddings, norms, head, 1-D, 7x33)" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert (j["tensors"], j["quantized"], j["shards"]) == (12, 5, 3), j' "$W/j"
check "ct: config.json keeps the model's keys and adds quantization_config" \
    "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); q=c["quantization_config"]; assert c["model_type"]=="llama" and q["format"]=="mxfp4-pack-quantized" and q["quant_method"]=="compressed-tensors" and "lm_head" in q["ignore"] and "model.layers.0.mlp.odd_proj" in q["ignore"], q' "$W/ct/config.json"
# on a terminal (script(1) from util-linux gives it one): the progress bar
script -qc "'$BFP' convert -f mxfp4 '$W/in' '$W/tty'" /dev/null >"$W/tty.out" 2>&1
check "on a terminal: a progress bar with tensors, bytes, rate and ETA" \
    grep -q '\[#*\] 12/12 tensors .*KiB / .*KiB .*/s  ETA' "$W/tty.out"
check "ct: tokenizer.json copied" cmp -s "$W/in/tokenizer.json" "$W/ct/tokenizer.json"
check "ct: index names the packed tensors" grep -q '"model.layers.0.mlp.up_proj.weight_packed"' "$W/ct/model.safetensors.index.json"
check "ct: no temporary file left" test -z "$(find "$W/ct" -name '*.bfp-tmp')"

"$BFP" dequantize --name model.layers.0.mlp.up_proj "$W/ct" "$W/up.npy" >"$W/out" 2>"$W/err"
check "dequantize a compressed-tensors module" test $? -eq 0
check "dequantize names format and shape" grep -q "mxfp4 96x64" "$W/out"
"$BFP" quantize -f mxfp4 --name model.layers.0.mlp.up_proj.weight \
    "$W/in/model-00002-of-00003.safetensors" "$W/up.safetensors" >/dev/null 2>&1
"$BFP" dequantize "$W/up.safetensors" "$W/up_ref.npy" >/dev/null 2>&1
check "convert's planes decode like 'bfp quantize' of the same tensor (bit-exact paths)" \
    cmp -s "$W/up.npy" "$W/up_ref.npy"

# verify a compressed-tensors module against the reference
"$PY" - "$W/in/model-00002-of-00003.safetensors" "$W/up.bin" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
e = json.loads(d[8:8 + n])["model.layers.0.mlp.up_proj.weight"]
open(sys.argv[2], "wb").write(d[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
PY
"$BFP" verify -f mxfp4 -s 96x64 --layout compressed-tensors --name model.layers.0.mlp.up_proj \
    "$W/up.bin" "$W/ct" >"$W/out" 2>"$W/err"
check "verify --layout compressed-tensors: IDENTICAL (exit 0)" test $? -eq 0
"$BFP" convert -f mxint8 --layout compressed-tensors "$W/in" "$W/cti" >/dev/null 2>&1
"$BFP" verify -f mxint8 -s 96x64 --layout compressed-tensors --name model.layers.0.mlp.up_proj \
    "$W/up.bin" "$W/cti" >"$W/out" 2>"$W/err"
check "mxint8 (int-quantized, bf16 scales 2^(e-133)) read back: IDENTICAL" test $? -eq 0
"$BFP" convert -f mxint4 --layout compressed-tensors "$W/in" "$W/cti4" >/dev/null 2>&1
"$BFP" verify -f mxint4 -s 96x64 --layout compressed-tensors --name model.layers.0.mlp.up_proj \
    "$W/up.bin" "$W/cti4" >"$W/out" 2>"$W/err"
check "mxint4 (pack-quantized: int32 words of k+8) read back: IDENTICAL" test $? -eq 0
cp -r "$W/ct" "$W/ctbad"
"$PY" - "$W/ctbad/model-00002-of-00003.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; d = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", d[:8])[0]
e = json.loads(d[8:8 + n])["model.layers.0.mlp.up_proj.weight_packed"]
i = 8 + n + e["data_offsets"][0] + 5
d[i] = (d[i] >> 4) | ((d[i] & 15) << 4)  # a kernel that packs the nibbles the other way
open(p, "wb").write(d)
PY
"$BFP" verify -f mxfp4 -s 96x64 --layout compressed-tensors --name model.layers.0.mlp.up_proj \
    "$W/up.bin" "$W/ctbad" >"$W/out" 2>"$W/err"
check "verify --layout compressed-tensors: a swapped pair is DIFFERENT (exit 1)" test $? -eq 1
check "... named nibble-order" grep -q "nibble-order" "$W/out"
"$BFP" verify -f nvfp4 -s 96x64 --layout compressed-tensors --name model.layers.0.mlp.up_proj \
    "$W/up.bin" "$W/ct" >"$W/out" 2>"$W/err"
check "verify: a module of another format is refused (exit 2)" test $? -eq 2
check "... naming both" grep -q "holds mxfp4 96x64, not the nvfp4 96x64" "$W/err"

"$BFP" convert -f nvfp4 --layout gguf "$W/in" "$W/m.gguf" >"$W/out" 2>"$W/err"
check "gguf nvfp4: exit 0" test $? -eq 0
check "gguf: 4 quantized (down_proj's 96 columns are not a multiple of 64)" grep -q "4 quantized" "$W/out"
# compare a converted tensor (ggml blocks here, tensor scale 1) with its
# original: the stored row is what the reference makes with --no-tensor-scale
"$BFP" compare --json -f nvfp4 --no-tensor-scale --name model.layers.0.mlp.up_proj.weight \
    --ref "$W/in" "$W/m.gguf" >"$W/j" 2>"$W/err"
check "compare --ref of a GGUF's NVFP4 tensor: exit 0" test $? -eq 0
check "compare: the stored row equals the reference's" "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))[0]; r = t["results"]
assert t["input"].startswith("nvfp4 96x64 stored, against --ref"), t["input"]
assert [(x["format"], x["stored"]) for x in r] == [("nvfp4", True), ("nvfp4", False)], r
assert r[0]["sqnr_db"] == r[1]["sqnr_db"] and r[0]["rmse"] == r[1]["rmse"], r' "$W/j"
"$BFP" convert -f mxfp8_e5m2+ "$W/in" "$W/bfp" >"$W/out" 2>"$W/err"
check "bfp layout, an MX+ format: exit 0" test $? -eq 0
check "bfp layout quantizes the odd 7x33 too" grep -q "6 quantized" "$W/out"
"$BFP" dequantize --name model.layers.0.mlp.odd_proj.weight "$W/bfp" "$W/odd.npy" >"$W/out" 2>"$W/err"
check "dequantize a tensor of the bfp layout" grep -q "mxfp8_e5m2+ 7x33" "$W/out"
"$BFP" quantize -f mxfp8_e5m2+ --name model.layers.0.mlp.odd_proj.weight \
    "$W/in/model-00002-of-00003.safetensors" "$W/odd.safetensors" >/dev/null 2>&1
"$BFP" dequantize "$W/odd.safetensors" "$W/odd_ref.npy" >/dev/null 2>&1
check "bfp layout: the planes of 'bfp quantize'" cmp -s "$W/odd.npy" "$W/odd_ref.npy"
"$BFP" convert -f mxfp4 --report "$W/in/model-00002-of-00003.safetensors" "$W/one" >"$W/out" 2>"$W/err"
check "a single .safetensors file: exit 0" test $? -eq 0
check "--report prints SQNR per tensor" grep -q "sqnr_db" "$W/out"
check "a single file gives no index" test ! -e "$W/one/model.safetensors.index.json"
"$BFP" convert -f mxfp4 --include 'norm' --exclude 'up_proj' --json "$W/in" "$W/inc" >"$W/j" 2>"$W/err"
check "--include/--exclude: 7 quantized (6, + 2 norms, - up_proj)" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["quantized"] == 7, j' "$W/j"

# ---- rerun: finished shards are kept (and checked)
"$BFP" convert -f mxfp4 --layout compressed-tensors --json "$W/in" "$W/ct" >"$W/j" 2>"$W/err"
check "rerun of a finished run keeps its 3 shards" \
    "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["shards_kept"] == 3' "$W/j"
printf 'x' | dd of="$W/ct/model-00002-of-00003.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
cp -r "$W/ct" "$W/ct_damaged"
"$BFP" convert -f mxfp4 --layout compressed-tensors --json "$W/in" "$W/ct" >"$W/j" 2>"$W/err"
check "a damaged shard is redone, the others kept" \
    "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["shards_kept"] == 2' "$W/j"
"$BFP" convert -f mxfp4 --layout compressed-tensors "$W/in" "$W/ct2" >/dev/null 2>&1
check "and the result equals a fresh run" diff -r "$W/ct" "$W/ct2"

# ---- SIGKILL mid-run, rerun: identical to an uninterrupted run
"$PY" "$ROOT/tests/tools/make_ckpt.py" "$W/many" --many 8 || exit 2
"$BFP" convert -f nvfp4 --layout compressed-tensors "$W/many" "$W/ref" >/dev/null 2>&1
# memory follows the largest tensor (4 MiB), not the checkpoint (128 MiB)
check "peak resident memory under 48 MiB for a 128 MiB checkpoint" "$PY" - "$BFP" "$W/many" "$W/mem" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "convert", "-f", "nvfp4", "--layout", "compressed-tensors",
                sys.argv[2], sys.argv[3]], check=True, stdout=subprocess.DEVNULL)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB
assert peak < 48 * 1024, peak
PY
killed=0
for try in 1 2 3; do
    rm -rf "$W/k"
    "$BFP" convert -f nvfp4 --layout compressed-tensors --report "$W/many" "$W/k" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 2000); do # until the first shard is recorded
        # (the manifest exists from the start, empty: wait for a shard in it)
        grep -Eq '"[0-9]+:[0-9a-f]{16}"' "$W/k/.bfp-convert.json" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.005
    done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ $? -eq 137 ] && { killed=1; break; }
done
check "the run was killed before it finished" test $killed -eq 1
check "killed: no index or config.json yet" test ! -e "$W/k/model.safetensors.index.json" -a ! -e "$W/k/config.json"
"$BFP" convert -f nvfp4 --layout compressed-tensors --json "$W/many" "$W/k" >"$W/j" 2>"$W/err"
check "rerun after SIGKILL: exit 0" test $? -eq 0
check "rerun kept some shards and redid the others" \
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert 1 <= j["shards_kept"] < 8, j' "$W/j"
check "rerun after SIGKILL: identical to the uninterrupted run" diff -r "$W/ref" "$W/k"

# ---- bad input: exit 2, one line, nothing written
refuse "missing IN" "$W/o1" "no such file" -f mxfp4 "$W/nope" "$W/o1"
mkdir "$W/empty"
refuse "directory without shards" "$W/o2" "no model.safetensors.index.json" -f mxfp4 "$W/empty" "$W/o2"
refuse "hif4 in compressed-tensors" "$W/o3" "compressed-tensors stores" \
    -f hif4 --layout compressed-tensors "$W/in" "$W/o3"
refuse "mxfp4+ in gguf" "$W/o4.gguf" "GGUF stores" -f mxfp4+ --layout gguf "$W/in" "$W/o4.gguf"
refuse "gguf layout, OUT not .gguf" "$W/o5" "one .gguf file" -f mxfp4 --layout gguf "$W/in" "$W/o5"
refuse "--include of a 1-D tensor in compressed-tensors" "$W/o6" \
    "model-00001-of-00003.safetensors: tensor 'model.layers.0.input_layernorm.weight'" \
    -f mxfp4 --layout compressed-tensors --include layernorm "$W/in" "$W/o6"
"$BFP" convert -f nvfp4 --layout gguf "$W/in" "$W/in.gguf" >/dev/null 2>&1
refuse "a GGUF input into compressed-tensors" "$W/o12" "converts to --layout gguf only" \
    -f mxfp4 --layout compressed-tensors "$W/in.gguf" "$W/o12"
"$BFP" convert -f mxfp4 --layout gguf "$W/in.gguf" "$W/re.gguf" >"$W/out" 2>"$W/err"
check "GGUF to GGUF: exit 0, down_proj (BF16 in the input) now quantized" grep -q "1 quantized" "$W/out"
"$BFP" convert -f mxfp4 --force "$W/in" "$W/in" >"$W/out" 2>"$W/err"
check "OUT = IN, even with --force: exit 2" test $? -eq 2
check "OUT = IN: says so" grep -q "OUT is the input's directory" "$W/err"
check "OUT = IN: the input is untouched" test ! -e "$W/in/.bfp-convert.json"
"$PY" - "$W/dup.safetensors" <<'PY'
import json, struct, sys
h = {"a.weight": {"dtype": "F32", "shape": [4, 32], "data_offsets": [0, 512]},
     "a.weight.codes": {"dtype": "F32", "shape": [4], "data_offsets": [512, 528]}}
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(528))
PY
refuse "an input name equal to another tensor's plane" "$W/o13" "tensor 'a.weight.codes' twice" \
    -f mxfp4 "$W/dup.safetensors" "$W/o13"
refuse "bad regex" "$W/o7" "not a valid regular expression" -f mxfp4 --include '(' "$W/in" "$W/o7"
refuse "unknown layout" "$W/o8" "unknown layout" -f mxfp4 --layout onnx "$W/in" "$W/o8"
mkdir "$W/busy"; touch "$W/busy/x"
"$BFP" convert -f mxfp4 "$W/in" "$W/busy" >"$W/out" 2>"$W/err"
check "OUT holding something else: exit 2" test $? -eq 2
check "OUT holding something else: one line naming --force" grep -q -- "--force" "$W/err"
"$BFP" convert -f nvfp4 --layout compressed-tensors "$W/in" "$W/ct" >"$W/out" 2>"$W/err"
check "rerun with other settings: exit 2" test $? -eq 2
check "rerun with other settings: one line" one_line "$W/err"
cp -r "$W/in" "$W/bad"
"$PY" - "$W/bad/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
j["weight_map"]["ghost.weight"] = "model-00001-of-00003.safetensors"
json.dump(j, open(p, "w"))
PY
refuse "index lists a tensor its shard lacks" "$W/o9" "lists 13 tensors" -f mxfp4 "$W/bad" "$W/o9"
cp -r "$W/in" "$W/trunc"
truncate -s 4000 "$W/trunc/model-00002-of-00003.safetensors"
refuse "truncated shard" "$W/o10" "model-00002-of-00003.safetensors" -f mxfp4 "$W/trunc" "$W/o10"
"$PY" - "$W/zero.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"a.weight": {"dtype": "F32", "shape": [2, 0], "data_offsets": [0, 0]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
refuse "zero-dimension tensor included" "$W/o11" "zero.safetensors: tensor 'a.weight'.*zero dimension" \
    -f mxfp4 --include . "$W/zero.safetensors" "$W/o11"

# the same tensor through `bfp quantize` / `compare`: the message names file and tensor
"$BFP" quantize -f mxfp4 --name a.weight "$W/zero.safetensors" "$W/zq.safetensors" >"$W/out" 2>"$W/err"
check "quantize of a zero-dimension tensor: exit 2" test $? -eq 2
check "quantize of a zero-dimension tensor: names file and tensor" \
    grep -q "zero.safetensors: tensor 'a.weight' has shape \[2x0\]" "$W/err"
"$BFP" compare -f mxfp4 "$W/zero.safetensors" >"$W/out" 2>"$W/err"
check "compare of a zero-dimension tensor: one line naming the file" grep -q "zero.safetensors: its tensor has shape" "$W/err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
