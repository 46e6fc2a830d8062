#!/usr/bin/env bash
# Names and headers from hostile files: tensor names reach the terminal
# quoted with control characters escaped (no ESC byte), names with spaces
# stay unambiguous, names holding NUL are refused, and size caps are
# reported as caps, not as "exceeds the file".
# Usage: bash tests/cli/test_hostile_names.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
# run ARGS...: bfp ARGS must exit 2 with one error line, kept in $W/err
run2() {
    "$BFP" "$@" >"$W/out" 2>"$W/err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ] && [ ! -s "$W/out" ] ||
        { echo "  (exit $rc: $(cat "$W/err"))"; return 1; }
}
no_esc() { ! grep -q "$(printf '\033')" "$W/err" "$W/out"; }

# safetensors with the given header (raw JSON text) and data bytes
cat >"$W/st.py" <<'PY'
import struct, sys
path, header, nbytes = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
open(path, "wb").write(struct.pack("<Q", len(header)) + header + bytes(nbytes))
PY
st() { python3 "$W/st.py" "$@"; }

# Two float tensors, one named with an escape sequence, one with a space.
st "$W/esc.safetensors" '{"\u001b[31mred":{"dtype":"F32","shape":[32],"data_offsets":[0,128]},"a b":{"dtype":"F32","shape":[32],"data_offsets":[128,256]}}' 256
run2 compare -f mxfp4 "$W/esc.safetensors"
check "two float tensors: refused" true
check "the list of names has no ESC byte" no_esc
check "the list quotes and escapes each name" \
    grep -qF "name one of: '\\x1b[31mred' 'a b'" "$W/err"
run2 compare -f mxfp4 --name "$(printf 'nope\033[0m')" "$W/esc.safetensors"
check "an unknown name with ESC: escaped in the error" grep -qF "no tensor named 'nope\\x1b[0m'" "$W/err"
check "an unknown name with ESC: no ESC byte" no_esc
"$BFP" compare -f mxfp4 --name "a b" "$W/esc.safetensors" >"$W/out" 2>"$W/err"
check "a name with a space: read, and quoted in the title" grep -q "esc.safetensors 'a b': f32 32, 32 values" "$W/out"
st "$W/dtype.safetensors" '{"\u001b]0;title\u0007":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}' 4
run2 compare --name "$(printf '\033]0;title\007')" "$W/dtype.safetensors"
check "a wrong dtype names the tensor escaped" grep -qF "tensor '\\x1b]0;title\\x07' has dtype I32" "$W/err"
check "no ESC or BEL byte reaches stderr" bash -c '! grep -q "[[:cntrl:]]" "$1"' _ "$W/err"

# NUL inside names: cJSON would cut both to "a", so refuse them.
st "$W/nul.safetensors" '{"a\u0000x":{"dtype":"F32","shape":[32],"data_offsets":[0,128]},"a\u0000y":{"dtype":"F32","shape":[32],"data_offsets":[128,256]}}' 256
run2 compare -f mxfp4 "$W/nul.safetensors"
check "names holding NUL: refused as such, not as 'a' twice" \
    grep -q "holds a NUL character" "$W/err"
st "$W/bs.safetensors" '{"a\\u0000":{"dtype":"F32","shape":[32],"data_offsets":[0,128]}}' 128
"$BFP" compare -f mxfp4 --name 'a\u0000' "$W/bs.safetensors" >"$W/out" 2>"$W/err"
check "an escaped backslash before u0000 is no NUL (read, name quoted)" \
    grep -qF "bs.safetensors 'a\\\\u0000': f32 32" "$W/out"

# Caps are named as caps.
python3 - "$W/big.npy" <<'PY'
import struct, sys
f = open(sys.argv[1], "wb")
f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", (1 << 20) + 1))
f.truncate(8 << 20)   # sparse: bigger than the header it claims
PY
run2 compare "$W/big.npy"
check ".npy header over the cap: names the cap" grep -q "header length 1048577 exceeds the cap of 1048576 bytes" "$W/err"
python3 - "$W/big.safetensors" <<'PY'
import struct, sys
f = open(sys.argv[1], "wb")
f.write(struct.pack("<Q", 100000001))
f.truncate(200000000)  # sparse
PY
run2 compare "$W/big.safetensors"
check "safetensors header over the cap: names the cap" grep -q "header length 100000001 exceeds the cap of 100000000 bytes" "$W/err"
python3 - "$W/short.npy" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", 200) + b"{" * 20)
PY
run2 compare "$W/short.npy"
check ".npy header past the end: names the file size" grep -q "header length 200 exceeds the file (30 bytes)" "$W/err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
