#!/usr/bin/env bash
# bfp golden: the file set and sizes of every format, the NVFP4 tutorial
# example bit for bit, HiF4's golden_* files, report.json, --force, options.
# Usage: bash tests/cli/test_golden.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
HERE=$(cd "$(dirname "$0")" && pwd)
hex() { od -An -v -tx1 "$1" | tr -d '\n' | sed 's/^ //' | tr a-f A-F; }

# A 3x70 input: partial last blocks for every block size (16, 32, 64).
python3 - "$W/r.bin" <<'PY'
import random, struct, sys
random.seed(7)
v = [random.gauss(0, 1) * (10 ** random.randint(-3, 3)) for _ in range(3 * 70)]
open(sys.argv[1], "wb").write(struct.pack("<210f", *v))
PY

# Every format writes exactly the expected files with the expected sizes.
grep -v '^#' "$HERE/expected/golden_sizes_3x70.txt" | while read -r fmt want; do
    out="$W/g_$fmt"
    "$BFP" golden -f "$fmt" -s 3x70 "$W/r.bin" "$out" >"$W/stdout" 2>"$W/stderr"
    rc=$?
    got=$(cd "$out" 2>/dev/null && for f in $(ls | LC_ALL=C sort); do
        if [ "$f" = report.json ]; then printf '%s=* ' "$f"; else printf '%s=%s ' "$f" "$(wc -c <"$f")"; fi
    done)
    if [ $rc -eq 0 ] && [ "${got% }" = "$want" ] && [ ! -s "$W/stderr" ] &&
        grep -q "^golden $fmt 3x70 f32: wrote .* files to .*SQNR" "$W/stdout"; then
        echo ok
    else
        echo "FAIL: golden $fmt: rc $rc, files '${got% }', want '$want'; $(cat "$W/stderr")" >&2
        echo bad
    fi
done >"$W/results"
check "golden writes the expected files for all 22 formats" test "$(grep -c '^ok$' "$W/results")" -eq 22
check "report.json of every format parses and has the stats" python3 - "$W" <<'PY'
import glob, json, math, os, sys
keys = {"format", "shape", "dtype", "options", "blocks", "nonfinite_blocks", "flushed_blocks",
        "max_rel_err", "mean_rel_err", "rmse", "sqnr_db"}
reports = sorted(glob.glob(os.path.join(sys.argv[1], "g_*", "report.json")))
assert len(reports) == 22, len(reports)
for p in reports:
    r = json.load(open(p))
    assert keys <= set(r), (p, keys - set(r))
    assert r["shape"] == [3, 70] and r["dtype"] == "f32" and r["nonfinite_blocks"] == 0
    assert r["format"] == os.path.basename(os.path.dirname(p))[2:]
    assert r["sqnr_db"] > 5 and 0 < r["rmse"] and 0 <= r["mean_rel_err"] <= r["max_rel_err"]
    assert sorted(r["files"]) == sorted(os.listdir(os.path.dirname(p)))
PY

# The NVFP4 tutorial example (SPEC section 3): codes, block scales, tensor scale.
python3 - "$W/nv.bin" <<'PY'
import struct, sys
v = [0.12, -0.05, 0.31, 0.02, -0.18, 0.07, 0.00, -0.09, 0.15, -0.22, 0.04, 0.11, -0.01, 0.26, -0.13, 0.08,
     0.010, -0.030, 0.045, 0.005, -0.020, 0.015, -0.040, 0.025, 0.000, 0.035, -0.008, 0.012, -0.050, 0.018, 0.003, -0.027]
open(sys.argv[1], "wb").write(struct.pack("<32f", *v))
PY
"$BFP" golden -f nvfp4 -s 1x32 "$W/nv.bin" "$W/nv" >/dev/null
check "nvfp4 tutorial: golden exits 0" test $? -eq 0
check "nvfp4 tutorial: codes" test "$(hex "$W/nv/codes.bin")" = "$(cat "$HERE/expected/nvfp4_tutorial_codes.txt")"
check "nvfp4 tutorial: block scales" test "$(hex "$W/nv/scales.bin")" = "$(cat "$HERE/expected/nvfp4_tutorial_scales.txt")"
check "nvfp4 tutorial: tensor scale 8670.9677734375" python3 -c '
import struct, sys
assert struct.unpack("<f", open(sys.argv[1], "rb").read()) == (8670.9677734375,)' "$W/nv/tensor_scale.bin"
check "nvfp4 tutorial: report records the tensor scale" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["tensor_scale"] == 8670.9677734375 and r["blocks"] == 2 and r["options"]["rounding"] == "rne"' "$W/nv/report.json"
"$BFP" golden -f NVFP4 -s 2x16 "$W/nv.bin" "$W/nv2x16" >/dev/null
check "nvfp4 tutorial as 2x16 (format name in capitals): same codes" cmp -s "$W/nv/codes.bin" "$W/nv2x16/codes.bin"

# HiF4 golden files: sizes, fp4 = codes, and ea/eb/ec/scale from the scale words.
check "hif4 golden_* files agree with scales.bin" python3 - "$W/g_hif4" <<'PY'
import os, struct, sys
d = sys.argv[1]
rd = lambda n: open(os.path.join(d, n), "rb").read()
words = struct.unpack("<6I", rd("scales.bin"))
assert rd("golden_fp4.bin") == rd("codes.bin")
assert rd("golden_ea.bin") == bytes(w & 0xFF for w in words)
assert rd("golden_eb.bin") == bytes((w >> 8) & 0xFF for w in words)
assert rd("golden_ec.bin") == b"".join(struct.pack("<H", w >> 16) for w in words)
assert len(rd("golden_scale.bin")) == 6 * 16 * 2
PY

# Input dtypes: bf16 and f16 take 2 bytes a value.
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64H", *([0x3F80, 0xC000, 0x3E00, 0] * 16)))' "$W/h.bin"
"$BFP" golden -f hif4 -t bf16 -s 1x64 "$W/h.bin" "$W/hb" >/dev/null
check "golden -t bf16 reads 2-byte values" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["dtype"] == "bf16" and r["shape"] == [1, 64] and r["options"]["rounding"] == "away"' "$W/hb/report.json"
"$BFP" golden -f mxfp8_e4m3 -t f16 -s 2x32 "$W/h.bin" "$W/hf" >/dev/null
check "golden -t f16 reads 2-byte values" test -s "$W/hf/codes.bin"

# Non-finite input: a warning line, NaN blocks counted, stats over the rest.
python3 -c '
import struct, sys
v = [0.5 * i for i in range(64)]; v[3] = float("nan"); v[40] = float("inf")
open(sys.argv[1], "wb").write(struct.pack("<64f", *v))' "$W/nan.bin"
"$BFP" golden -f mxfp4 -s 4x16 "$W/nan.bin" "$W/nan" >"$W/stdout" 2>"$W/stderr"
check "non-finite input: exit 0" test $? -eq 0
check "non-finite input: one warning line" test "$(cat "$W/stderr")" = "bfp: warning: 2 blocks held NaN/Inf and were stored as NaN blocks"
check "non-finite input: report counts them, stats finite" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["nonfinite_blocks"] == 2 and r["blocks"] == 4 and r["values"] == 32, r
assert r["sqnr_db"] is not None and r["rmse"] > 0' "$W/nan/report.json"

# Existing files: refused without --force (nothing written), replaced with it.
mkdir -p "$W/keep" && echo precious >"$W/keep/codes.bin"
"$BFP" golden -f mxfp4 -s 3x70 "$W/r.bin" "$W/keep" >/dev/null 2>"$W/stderr"
check "existing codes.bin: exit 2" test $? -eq 2
check "existing codes.bin: error names it" grep -q "^bfp: error: .*codes.bin exists" "$W/stderr"
check "existing codes.bin: untouched" test "$(cat "$W/keep/codes.bin")" = precious
check "existing codes.bin: no other file written" test "$(ls "$W/keep")" = codes.bin
"$BFP" golden -f mxfp4 -s 3x70 "$W/r.bin" "$W/keep" --force >/dev/null
check "--force replaces it" cmp -s "$W/keep/codes.bin" "$W/g_mxfp4/codes.bin"

# Options reach the quantizer.
"$BFP" golden -f mxfp4 -s 3x70 --rounding stochastic --seed 42 "$W/r.bin" "$W/s1" >/dev/null &&
    "$BFP" golden -f mxfp4 -s 3x70 --rounding stochastic --seed 42 "$W/r.bin" "$W/s2" >/dev/null
check "stochastic rounding with a seed is reproducible" cmp -s "$W/s1/codes.bin" "$W/s2/codes.bin"
check "report records rounding and seed" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))["options"]
assert o["rounding"] == "stochastic" and o["seed"] == 42, o' "$W/s1/report.json"
"$BFP" golden -f mxfp4 -s 3x70 --rounding zero "$W/r.bin" "$W/z" >/dev/null
check "--rounding zero changes the codes" bash -c '! cmp -s "$1" "$2"' _ "$W/z/codes.bin" "$W/g_mxfp4/codes.bin"
"$BFP" golden -f mxfp4 -s 3x70 --scale-mode ceil "$W/r.bin" "$W/c" >/dev/null
check "--scale-mode ceil is recorded" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["options"]["scale_mode"] == "ceil"' "$W/c/report.json"
"$BFP" golden -f nvfp4 -s 1x32 --no-tensor-scale "$W/nv.bin" "$W/nts" >/dev/null
check "--no-tensor-scale stores tensor scale 1" python3 -c '
import struct, sys
assert struct.unpack("<f", open(sys.argv[1], "rb").read()) == (1.0,)' "$W/nts/tensor_scale.bin"
python3 -c '
import random, struct, sys
random.seed(3)
open(sys.argv[1], "wb").write(struct.pack("<1024f", *[random.gauss(0, 1) for _ in range(1024)]))' "$W/t.bin"
"$BFP" golden -f nvfp4 -s 32x32 --2d "$W/t.bin" "$W/2d" >/dev/null
check "--2d: each 16x16 tile's rows share one block scale" python3 -c '
import sys
s = open(sys.argv[1], "rb").read()   # 32 rows x 2 blocks
for tr in (0, 16):
    for b in (0, 1):
        assert len({s[2 * r + b] for r in range(tr, tr + 16)}) == 1
assert len(set(s)) > 1' "$W/2d/scales.bin"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
