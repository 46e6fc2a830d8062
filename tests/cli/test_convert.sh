#!/usr/bin/env bash
# bfp quantize -> bfp dequantize round trips (.npy and .safetensors): the
# reconstruction equals golden's dequant.f32.bin bit for bit, the shape
# survives, --name picks a tensor, --force replaces.
# Usage: bash tests/cli/test_convert.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"

# Minimal .npy / safetensors readers and writers (numpy is not assumed).
cat >"$W/t.py" <<'PY'
import ast, json, random, struct, sys

def npy_write(path, descr, shape, raw):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + raw)

def npy_read(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", path
    n, off = (struct.unpack("<H", b[8:10])[0], 10) if b[6] == 1 else (struct.unpack("<I", b[8:12])[0], 12)
    h = ast.literal_eval(b[off:off + n].decode())
    return h["descr"], list(h["shape"]), b[off + n:]

def st_write(path, tensors):  # tensors: name -> (dtype, shape, raw)
    hdr, data = {}, b""
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)

def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    return meta, {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                  for k, v in hdr.items()}

def values(n, seed):
    random.seed(seed)
    return [random.gauss(0, 1) * 2.0 ** random.randint(-8, 8) for _ in range(n)]
PY
py() { PYTHONPATH="$W" python3 -c "from t import *; $1" "${@:2}"; }

py 'v = values(5 * 70, 1); raw = struct.pack("<350f", *v)
open(sys.argv[1], "wb").write(raw); npy_write(sys.argv[2], "<f4", (5, 70), raw)' "$W/in.bin" "$W/in.npy"

# npy -> container -> npy equals golden's reconstruction, for every family.
for fmt in mxfp4 mxfp6_e3m2 mxint8 nvfp4 hif4 mxfp4+ mxint4+ mxfp8_e4m3++ nvfp4+; do
    "$BFP" golden -f "$fmt" -s 5x70 "$W/in.bin" "$W/g_$fmt" >/dev/null &&
        "$BFP" quantize -f "$fmt" "$W/in.npy" "$W/q_$fmt.safetensors" >"$W/qout" &&
        "$BFP" dequantize "$W/q_$fmt.safetensors" "$W/d_$fmt.npy" >"$W/dout"
    check "$fmt: golden, quantize, dequantize exit 0" test $? -eq 0
    check "$fmt: quantize prints a summary" grep -q "^quantized .*in.npy (f32 5x70) to $fmt: .*q_$fmt.safetensors, .* bits/value, SQNR" "$W/qout"
    check "$fmt: dequantize prints a summary" grep -q "^dequantized .*q_$fmt.safetensors ($fmt 5x70) to f32: " "$W/dout"
    check "$fmt: round trip equals golden dequant.f32.bin, shape (5, 70)" py '
d, shape, raw = npy_read(sys.argv[1])
assert d == "<f4" and shape == [5, 70], (d, shape)
assert raw == open(sys.argv[2], "rb").read()' "$W/d_$fmt.npy" "$W/g_$fmt/dequant.f32.bin"
    check "$fmt: container planes equal golden's files" py '
meta, t = st_read(sys.argv[1])
assert meta["bfp.format"] == sys.argv[3], meta
g = lambda n: open(sys.argv[2] + "/" + n, "rb").read()
assert t["tensor.codes"][2] == g("codes.bin") and t["tensor.scales"][2] == g("scales.bin")
if "tensor.meta" in t: assert t["tensor.meta"][2] == g("meta.bin")
if "tensor.tensor_scale" in t: assert t["tensor.tensor_scale"][2] == g("tensor_scale.bin")' \
        "$W/q_$fmt.safetensors" "$W/g_$fmt" "$fmt"
done

# Shape: a 3-D tensor keeps its shape; blocks run along the last axis.
py 'npy_write(sys.argv[1], "<f4", (2, 3, 40), struct.pack("<240f", *values(240, 2)))' "$W/3d.npy"
"$BFP" quantize -f nvfp4 "$W/3d.npy" "$W/3d.safetensors" >/dev/null &&
    "$BFP" dequantize "$W/3d.safetensors" "$W/3d_out.npy" >/dev/null
check "3-D tensor: shape (2, 3, 40) survives" py '
d, shape, raw = npy_read(sys.argv[1]); assert shape == [2, 3, 40] and len(raw) == 960, shape' "$W/3d_out.npy"

# f16 input; bf16 and f16 output.
py 'import random; random.seed(4)
npy_write(sys.argv[1], "<f2", (4, 32), struct.pack("<128e", *[random.uniform(-4, 4) for _ in range(128)]))' "$W/h.npy"
"$BFP" quantize -f mxfp8_e4m3 "$W/h.npy" "$W/h.safetensors" >/dev/null &&
    "$BFP" dequantize "$W/h.safetensors" "$W/h32.npy" >/dev/null &&
    "$BFP" dequantize -t bf16 "$W/h.safetensors" "$W/h16.npy" >/dev/null &&
    "$BFP" dequantize -t f16 "$W/h.safetensors" "$W/hf16.npy" >/dev/null
check "f16 input, f32/bf16/f16 output: exit 0" test $? -eq 0
check "-t bf16 output is the f32 output rounded to bf16" py '
d32, s32, r32 = npy_read(sys.argv[1]); d16, s16, r16 = npy_read(sys.argv[2])
assert s32 == s16 == [4, 32] and d16 in ("<u2", "<V2", "bfloat16"), d16
for f, h in zip(struct.unpack("<128I", r32), struct.unpack("<128H", r16)):
    assert h == ((f + 0x7FFF + ((f >> 16) & 1)) >> 16), (hex(f), hex(h))' "$W/h32.npy" "$W/h16.npy"
check "-t f16 output is the f32 output as f16" py '
_, _, r32 = npy_read(sys.argv[1]); d, _, r16 = npy_read(sys.argv[2])
assert d == "<f2" and struct.unpack("<128e", r16) == struct.unpack("<128e", struct.pack("<128e", *struct.unpack("<128f", r32)))' \
    "$W/h32.npy" "$W/hf16.npy"

# safetensors input with several tensors: --name picks one (and names the planes).
py 'a = struct.pack("<64f", *values(64, 5)); b = struct.pack("<96f", *values(96, 6))
st_write(sys.argv[1], {"w": ("F32", [2, 32], a), "x": ("F32", [3, 32], b)})' "$W/two.safetensors"
"$BFP" quantize -f mxfp4 "$W/two.safetensors" "$W/amb.safetensors" >/dev/null 2>"$W/err"
check "two tensors without --name: exit 2" test $? -eq 2
check "two tensors without --name: one error line, no output" test "$(wc -l <"$W/err")" -eq 1 -a ! -e "$W/amb.safetensors"
"$BFP" quantize -f mxfp4 --name x "$W/two.safetensors" "$W/x.safetensors" >/dev/null &&
    "$BFP" dequantize --name x "$W/x.safetensors" "$W/x_out.safetensors" >/dev/null
check "--name x: quantize and dequantize exit 0" test $? -eq 0
check "--name x: planes and output named x, shape [3, 32]" py '
meta, t = st_read(sys.argv[1]); assert "x.codes" in t and "x.scales" in t, list(t)
meta, t = st_read(sys.argv[2]); assert list(t) == ["x"] and t["x"][:2] == ("F32", [3, 32]), t.keys()' \
    "$W/x.safetensors" "$W/x_out.safetensors"

# Options travel; --force replaces an output.
"$BFP" quantize -f nvfp4 --2d --rounding stochastic --seed 9 "$W/in.npy" "$W/opt.safetensors" >/dev/null
check "options are recorded in the container" py '
meta, _ = st_read(sys.argv[1]); o = meta["bfp.options"]
assert "stochastic" in o and "9" in o, o' "$W/opt.safetensors"
"$BFP" quantize -f mxfp4 --force "$W/in.npy" "$W/q_nvfp4.safetensors" >/dev/null
check "--force replaces an existing container" py '
meta, _ = st_read(sys.argv[1]); assert meta["bfp.format"] == "mxfp4"' "$W/q_nvfp4.safetensors"
"$BFP" dequantize --force "$W/q_mxfp4.safetensors" "$W/d_nvfp4.npy" >/dev/null
check "dequantize --force replaces an existing output" cmp -s "$W/d_nvfp4.npy" "$W/d_mxfp4.npy"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
