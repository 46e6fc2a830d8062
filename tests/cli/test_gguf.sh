#!/usr/bin/env bash
# GGUF input: quantize / compare a float tensor of a .gguf file, dequantize a
# ggml MXFP4 tensor, and one clean error line for a damaged or ambiguous file.
# Usage: bash tests/cli/test_gguf.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
ROOT=$PWD
python3 "$ROOT/tests/tools/gguf_write.py" "$W/m.gguf" demo || exit 2

"$BFP" quantize -f mxfp4 --name w "$W/m.gguf" "$W/w.safetensors" >"$W/out" 2>"$W/err"
check "quantize a GGUF F32 tensor" test $? -eq 0
check "quantize names the 2x64 shape" grep -q "f32 2x64" "$W/out"
"$BFP" quantize -f mxfp4 "$W/m.gguf" "$W/x.safetensors" >"$W/out" 2>"$W/err"
check "no --name with two float tensors: exit 2" test $? -eq 2
check "no --name lists the float tensors" grep -q "name one of: 'w' 'b'" "$W/err"
check "nothing written" test ! -e "$W/x.safetensors"

"$BFP" compare -f mxfp4 --name b "$W/m.gguf" >"$W/out" 2>"$W/err"
check "compare a GGUF BF16 tensor" test $? -eq 0

# q: scale 2^0, codes 0..15 along each block: E2M1 values
"$BFP" dequantize --name q "$W/m.gguf" "$W/q.npy" >"$W/out" 2>"$W/err"
check "dequantize a GGUF MXFP4 tensor" test $? -eq 0
python3 - "$W/q.npy" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", d[8:10])[0]
assert b"(2, 64)" in d[10:10 + hl], d[10:10 + hl]
v = struct.unpack("<128f", d[10 + hl:])
e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
want = [e2m1[c % 16] for c in range(32)] * 4
# bit patterns, not ==: -0.0 == 0.0 in Python, and code 8 must decode to -0.0
bits = lambda xs: [struct.pack("<f", x) for x in xs]
assert bits(v) == bits(want), (v[:20], want[:20])
PY
check "MXFP4 blocks decode to the E2M1 values of their codes" test $? -eq 0

head -c 200 "$W/m.gguf" >"$W/cut.gguf"
"$BFP" dequantize "$W/cut.gguf" "$W/c.npy" >"$W/out" 2>"$W/err"
check "truncated GGUF: exit 2" test $? -eq 2
check "truncated GGUF: one error line" test "$(grep -Ec '^bfp: error: .*cut.gguf: GGUF (header is truncated|.*past the end)' "$W/err")" -eq 1
check "truncated GGUF: no output" test ! -e "$W/c.npy"
"$BFP" dequantize --name w "$W/m.gguf" "$W/c.npy" >"$W/out" 2>"$W/err"
check "an F32 tensor is not quantized: exit 2" test $? -eq 2
check "an F32 tensor is not quantized: says so" grep -q "ggml type F32 (expected MXFP4 or NVFP4)" "$W/err"

# ggml blocks of a -0.0 block beside a +0.0 block, written as 34 zero bytes
# (ggml has no -0): signed-zero, not the block-shift the neighbour suggests
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64f", *([0.0]*32 + [-0.0]*32)))' "$W/z.bin"
mkdir "$W/zd" && head -c 34 /dev/zero >"$W/zd/blocks.bin"
"$BFP" verify -f mxfp4 -s 1x64 --layout ggml "$W/z.bin" "$W/zd" >"$W/out" 2>"$W/err"
check "ggml +0 for -0: exit 1 (different)" test $? -eq 1
check "ggml +0 for -0: every mismatch is signed-zero" test "$(grep -c 'signed-zero$' "$W/out")" -ge 10
check "ggml +0 for -0: none is block-shift" test "$(grep -c 'block-shift' "$W/out")" -eq 0

echo "test_gguf: $pass passed, $fail failed"
[ $fail -eq 0 ]
