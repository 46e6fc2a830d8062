#!/usr/bin/env bash
# Every error path: exit 2, exactly one stderr line starting "bfp: error:",
# nothing on stdout, and no output file or directory left behind.
# Usage: bash tests/cli/test_errors.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
# fails DESCRIPTION PATTERN ABSENT_PATH -- ARGS...: bfp ARGS must fail cleanly
# with an error line matching PATTERN and leave nothing at ABSENT_PATH.
fails() {
    local what=$1 pattern=$2 absent=$3; shift 4
    "$BFP" "$@" >"$W/stdout" 2>"$W/stderr"
    local rc=$? lines
    lines=$(wc -l <"$W/stderr")
    if [ $rc -ne 2 ]; then
        fail=$((fail + 1)); echo "FAIL: $what: exit $rc, want 2"
    elif [ "$lines" -ne 1 ] || ! grep -q '^bfp: error: ' "$W/stderr"; then
        fail=$((fail + 1)); echo "FAIL: $what: stderr is not one 'bfp: error:' line:"; cat "$W/stderr"
    elif ! grep -Eq -- "$pattern" "$W/stderr"; then
        fail=$((fail + 1)); echo "FAIL: $what: '$(cat "$W/stderr")' does not match '$pattern'"
    elif [ -s "$W/stdout" ]; then
        fail=$((fail + 1)); echo "FAIL: $what: wrote to stdout"
    elif [ -n "$absent" ] && [ -e "$absent" ]; then
        fail=$((fail + 1)); echo "FAIL: $what: left $absent behind"
    else
        pass=$((pass + 1))
    fi
}

python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64f", *[0.25 * i - 3 for i in range(64)]))' "$W/in.bin"
python3 - "$W/in.npy" <<'PY'
import struct, sys
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 32), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode()
                               + struct.pack("<64f", *[0.25 * i - 3 for i in range(64)]))
PY
O="$W/out"

# The command line itself.
fails "no command" "no command" "" -- 
fails "unknown command" "unknown command 'frobnicate'" "" -- frobnicate
fails "unknown top-level option" "unknown option '--frob'" "" -- --frob
fails "help for an unknown command" "unknown command 'nope'" "" -- help nope
fails "unknown long option" "unknown .*option '--bogus'" "$O" -- golden -f mxfp4 -s 2x32 --bogus "$W/in.bin" "$O"
fails "unknown short option" "unknown option '-z'" "$O" -- golden -f mxfp4 -s 2x32 -z "$W/in.bin" "$O"
fails "option without its value" "option '--rounding' needs a value" "" -- golden -f mxfp4 -s 2x32 "$W/in.bin" "$O" --rounding
fails "short option without its value" "option '-s' needs a value" "" -- golden -f mxfp4 -s
fails "flag given a value" "'--force=yes'" "$O" -- golden -f mxfp4 -s 2x32 --force=yes "$W/in.bin" "$O"
fails "formats --json=1" "'--json=1'" "" -- formats --json=1
fails "compare unknown option" "unknown .*option '--nope'" "" -- compare --nope "$W/in.npy"
fails "quantize unknown option" "unknown .*option '--nope'" "$W/q.safetensors" -- quantize -f mxfp4 --nope "$W/in.npy" "$W/q.safetensors"
fails "dequantize unknown option" "unknown .*option '--nope'" "$W/d.npy" -- dequantize --nope "$W/q.safetensors" "$W/d.npy"

# Formats.
fails "golden: unknown format lists the valid ones" "unknown format 'mxfp5' \(valid: mxfp4, .*nvfp4.*hif4.*\)" "$O" -- golden -f mxfp5 -s 2x32 "$W/in.bin" "$O"
fails "compare: unknown format in a list" "unknown format 'bogus'" "" -- compare -f mxfp4,bogus "$W/in.npy"
fails "compare: empty format list" "at least one format" "" -- compare -f , "$W/in.npy"
fails "compare: trailing comma in the list" "format list 'mxfp4,' has an empty entry" "" -- compare -f mxfp4, "$W/in.npy"
fails "compare: empty entry inside the list" "format list 'mxfp4,,nvfp4' has an empty entry" "" -- compare -f mxfp4,,nvfp4 "$W/in.npy"
fails "compare: leading comma" "format list ',mxfp4' has an empty entry" "" -- compare -f ,mxfp4 "$W/in.npy"
fails "quantize: unknown format" "unknown format 'int3'" "$W/q.safetensors" -- quantize -f int3 "$W/in.npy" "$W/q.safetensors"
fails "quantize: no format" "needs -f FORMAT" "$W/q.safetensors" -- quantize "$W/in.npy" "$W/q.safetensors"

# Shapes.
for bad in 0x32 2x0 0 -2x32 2x-32 +2x32 2x32x1 x32 2x 2xx32 "2 x32" 2.5x32 abc 0x10 \
    99999999999999999999x1 18446744073709551615x18446744073709551615 4611686018427387904; do
    fails "bad shape '$bad'" "shape" "$O" -- golden -f mxfp4 -s "$bad" "$W/in.bin" "$O"
done

# Sizes, files, dtypes.
fails "size mismatch names both numbers" "in.bin has 256 bytes, but 3x32 f32 values need 384 bytes" "$O" -- golden -f mxfp4 -s 3x32 "$W/in.bin" "$O"
fails "size mismatch for bf16" "has 256 bytes, but 1x64 bf16 values need 128 bytes" "$O" -- golden -f mxfp4 -t bf16 -s 1x64 "$W/in.bin" "$O"
fails "missing input" "missing.bin" "$O" -- golden -f mxfp4 -s 2x32 "$W/missing.bin" "$O"
fails "unknown dtype" "unknown dtype 'f64'" "$O" -- golden -f mxfp4 -t f64 -s 2x32 "$W/in.bin" "$O"
fails "golden without -f" "needs -f FORMAT and -s" "$O" -- golden -s 2x32 "$W/in.bin" "$O"
fails "golden without -s" "needs -f FORMAT and -s" "$O" -- golden -f mxfp4 "$W/in.bin" "$O"
fails "golden with one argument" "needs INPUT.bin and OUTDIR" "" -- golden -f mxfp4 -s 2x32 "$W/in.bin"
fails "golden into a regular file" "not a directory" "" -- golden -f mxfp4 -s 2x32 "$W/in.bin" "$W/in.npy"

# Options that do not apply, bad option values.
fails "unknown rounding" "unknown rounding 'fast'" "$O" -- golden -f mxfp4 -s 2x32 --rounding fast "$W/in.bin" "$O"
fails "unknown scale mode" "unknown scale mode 'up'" "$O" -- golden -f mxfp4 -s 2x32 --scale-mode up "$W/in.bin" "$O"
fails "negative seed" "--seed wants a non-negative integer" "$O" -- golden -f mxfp4 -s 2x32 --rounding stochastic --seed -1 "$W/in.bin" "$O"
fails "seed too large" "does not fit in 64 bits" "$O" -- golden -f mxfp4 -s 2x32 --rounding stochastic --seed 18446744073709551616 "$W/in.bin" "$O"
fails "seed without stochastic rounding" "--seed needs --rounding stochastic" "$O" -- golden -f mxfp4 -s 2x32 --seed 1 "$W/in.bin" "$O"
# the environment the CLI passes to the library (bfp_set_isa, bfp_set_threads)
BFP_ISA=avx3 fails "BFP_ISA not a kernel set" "BFP_ISA='avx3' is not one of generic, avx2, avx512" "$O" -- golden -f mxfp4 -s 2x32 "$W/in.bin" "$O"
BFP_THREADS=four fails "BFP_THREADS not a number" "BFP_THREADS='four' is not a thread count" "" -- formats
BFP_THREADS=-2 fails "BFP_THREADS negative" "BFP_THREADS='-2' is not a thread count" "" -- formats
BFP_THREADS=3x fails "BFP_THREADS with junk" "BFP_THREADS='3x' is not a thread count" "" -- formats
fails "--2d on mxfp4" "--2d applies only to nvfp4" "$O" -- golden -f mxfp4 -s 2x32 --2d "$W/in.bin" "$O"
fails "--no-tensor-scale on hif4" "--no-tensor-scale applies only" "$O" -- golden -f hif4 -s 1x64 --no-tensor-scale "$W/in.bin" "$O"
fails "--scale-mode on mxfp4+" "--scale-mode ceil applies only to the MX formats" "$O" -- golden -f mxfp4+ -s 2x32 --scale-mode ceil "$W/in.bin" "$O"
fails "--scale-mode floor on nvfp4" "--scale-mode floor applies only to the MX formats, not nvfp4" "$O" -- golden -f nvfp4 -s 2x32 --scale-mode floor "$W/in.bin" "$O"
fails "--2d on nvfp4+" "--2d applies only to nvfp4 \(nvfp4\+ has no 2-D variant\), not nvfp4\+" "$O" -- golden -f nvfp4+ -s 2x32 --2d "$W/in.bin" "$O"

# quantize / dequantize.
fails "quantize: missing input" "missing.npy" "$W/q.safetensors" -- quantize -f mxfp4 "$W/missing.npy" "$W/q.safetensors"
fails "quantize: output not .safetensors" "must end in .safetensors" "$W/q.npy" -- quantize -f mxfp4 "$W/in.npy" "$W/q.npy"
fails "quantize: raw input" "" "$W/q.safetensors" -- quantize -f mxfp4 "$W/in.bin" "$W/q.safetensors"
fails "quantize: one argument" "needs INPUT and OUTPUT" "" -- quantize -f mxfp4 "$W/in.npy"
fails "dequantize: missing input" "missing.safetensors" "$W/d.npy" -- dequantize "$W/missing.safetensors" "$W/d.npy"
fails "dequantize: input not .safetensors" "must be a .safetensors container" "$W/d.npy" -- dequantize "$W/in.npy" "$W/d.npy"
python3 - "$W/float.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<2f", 1, 2))
PY
fails "dequantize: a float safetensors is not a container" "" "$W/d.npy" -- dequantize "$W/float.safetensors" "$W/d.npy"
fails "dequantize: output not .npy/.safetensors" "must end in .npy or .safetensors" "$W/d.bin" -- dequantize "$W/q.safetensors" "$W/d.bin"
fails "dequantize: unknown dtype" "unknown dtype 'int8'" "$W/d.npy" -- dequantize -t int8 "$W/q.safetensors" "$W/d.npy"

# A quantized container is not a float tensor, whatever its format (an
# NVFP4 one holds an F32 tensor scale): quantize refuses it, compare reads
# its planes (its dequantized 2x32 values, not the one-value tensor scale).
for f in mxfp4 nvfp4 nvfp4+; do
    "$BFP" quantize -f "$f" "$W/in.npy" "$W/c_$f.safetensors" >/dev/null
    "$BFP" compare -f mxfp4 "$W/c_$f.safetensors" >"$W/stdout" 2>"$W/stderr"
    check "compare: a $f container is read as its planes" \
        grep -q "c_$f.safetensors: $f 2x32 stored, its dequantized values (f32), 64 values" "$W/stdout"
    fails "compare: a $f container with -s" "carries its own shape" "" -- compare -f mxfp4 -s 2x32 "$W/c_$f.safetensors"
    fails "quantize: a $f container" "bfp quantized container" "$W/cq.safetensors" -- quantize -f mxfp4 "$W/c_$f.safetensors" "$W/cq.safetensors"
done

# Existing outputs are never replaced without --force, and stay untouched.
echo precious >"$W/exists.safetensors"
fails "quantize: existing output" "exists.safetensors exists .*--force" "" -- quantize -f mxfp4 "$W/in.npy" "$W/exists.safetensors"
check "quantize: existing output untouched" test "$(cat "$W/exists.safetensors")" = precious
echo precious >"$W/exists.npy"
fails "dequantize: existing output" "exists.npy exists .*--force" "" -- dequantize "$W/exists.safetensors" "$W/exists.npy"
check "dequantize: existing output untouched" test "$(cat "$W/exists.npy")" = precious
mkdir "$W/gold" && echo precious >"$W/gold/report.json"
fails "golden: existing file in OUTDIR" "report.json exists .*--force" "" -- golden -f mxfp4 -s 2x32 "$W/in.bin" "$W/gold"
check "golden: existing file untouched, nothing else written" test "$(cat "$W/gold/report.json")@$(ls "$W/gold")" = "precious@report.json"

# compare.
fails "compare: two files" "at most one FILE" "" -- compare "$W/in.npy" "$W/in.npy"
fails "compare: raw file without -s" "give raw input its shape with -s" "" -- compare "$W/in.bin"
fails "compare: -s with an .npy" "-s and -t are for raw input" "" -- compare -s 2x32 "$W/in.npy"
fails "compare: -t without -s" "-t describes raw input" "" -- compare -t bf16 "$W/in.bin"
fails "compare: raw size mismatch" "has 256 bytes, but 4x32 f32 values need 512 bytes" "" -- compare -s 4x32 "$W/in.bin"
fails "compare: missing file" "missing.npy" "" -- compare "$W/missing.npy"
(cd "$W" && "$BFP" compare >"$W/stdout" 2>"$W/stderr"); rc=$?
check "compare with no FILE and no data/: exit 2, one error line" \
    test "$rc:$(wc -l <"$W/stderr")" = "2:1" -a -n "$(grep '^bfp: error: no FILE given and no data/\*.npy' "$W/stderr")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
