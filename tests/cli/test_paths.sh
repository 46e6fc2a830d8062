#!/usr/bin/env bash
# Output paths: an OUTPUT that is the INPUT file (directly, by symlink or
# hard link) is refused and the input kept; a 250-byte output name works;
# a failed write names the output, never a temporary file.
# Usage: bash tests/cli/test_paths.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
one_error() { # one_error PATTERN: stderr is one error line matching PATTERN
    [ "$(wc -l <"$W/err")" -eq 1 ] && grep -Eq "^bfp: error: $1" "$W/err"
}

python3 - "$W/in.npy" <<'PY'
import struct, sys
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
raw = struct.pack("<256f", *[0.01 * i - 1 for i in range(256)])
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + raw)
PY
"$BFP" quantize -f mxfp4 "$W/in.npy" "$W/q.safetensors" >/dev/null || exit 2
cp "$W/q.safetensors" "$W/q.orig"

# dequantize --force q q: the container would replace itself.
"$BFP" dequantize --force "$W/q.safetensors" "$W/q.safetensors" >/dev/null 2>"$W/err"
check "dequantize OUTPUT = INPUT: exit 2" test $? -eq 2
check "dequantize OUTPUT = INPUT: says so" one_error "OUTPUT .*q.safetensors is the INPUT file"
check "dequantize OUTPUT = INPUT: input kept" cmp -s "$W/q.safetensors" "$W/q.orig"
ln -s q.safetensors "$W/sym.safetensors"
"$BFP" dequantize --force "$W/q.safetensors" "$W/sym.safetensors" >/dev/null 2>"$W/err"
check "dequantize OUTPUT a symlink to INPUT: refused" one_error ".*is the INPUT file"
check "dequantize OUTPUT a symlink to INPUT: input kept" cmp -s "$W/q.safetensors" "$W/q.orig"
ln "$W/q.safetensors" "$W/hard.safetensors"
"$BFP" dequantize --force "$W/hard.safetensors" "$W/q.safetensors" >/dev/null 2>"$W/err"
check "dequantize INPUT a hard link to OUTPUT: refused" one_error ".*is the INPUT file"
check "dequantize INPUT a hard link to OUTPUT: input kept" cmp -s "$W/q.safetensors" "$W/q.orig"
"$BFP" dequantize --force "$W/q.safetensors" "$W/f.safetensors" >/dev/null
check "dequantize to another file still works" test -s "$W/f.safetensors"
cp "$W/f.safetensors" "$W/f.orig"
"$BFP" quantize -f mxfp4 --force "$W/f.safetensors" "$W/./f.safetensors" >/dev/null 2>"$W/err"
check "quantize OUTPUT = INPUT: refused" one_error ".*is the INPUT file"
check "quantize OUTPUT = INPUT: input kept" cmp -s "$W/f.safetensors" "$W/f.orig"

# A legal 250-byte output name (NAME_MAX is 255).
long=$(printf 'x%.0s' $(seq 238)).safetensors
"$BFP" quantize -f mxfp4 "$W/in.npy" "$W/$long" >/dev/null 2>"$W/err"
check "a 250-byte output name is written" cmp -s "$W/$long" "$W/q.safetensors"
"$BFP" dequantize "$W/$long" "$W/${long%.safetensors}.npy" >/dev/null 2>"$W/err"
check "and read back" test -s "$W/${long%.safetensors}.npy"

# A failed write names the user's output.
(ulimit -f 1; "$BFP" dequantize "$W/q.safetensors" "$W/big.npy" >/dev/null 2>"$W/err")
check "ulimit -f: the error names OUTPUT" one_error "cannot write $W/big.npy \(write\): "
check "ulimit -f: nothing left" test -z "$(ls -A "$W" | grep -v -e '^q' -e '^in' -e '^sym' -e '^hard' -e '^f\.' -e '^x' -e '^err$')"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
