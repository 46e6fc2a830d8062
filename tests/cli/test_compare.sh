#!/usr/bin/env bash
# bfp compare: the table on the repo's data/*.npy (skipped while there is
# none), a hand-computed BM share, format order, --json, raw and
# safetensors input, non-finite inputs.
# Usage: bash tests/cli/test_compare.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
HERE=$(cd "$(dirname "$0")" && pwd)

# With no FILE: every data/*.npy of the repository, in sorted order.
ROOT=$(cd "$HERE/../.." && pwd)
shopt -s nullglob
data=("$ROOT"/data/*.npy)
shopt -u nullglob
if [ ${#data[@]} -eq 0 ]; then
    echo "SKIP: data/ has no .npy files yet, so 'bfp compare' without FILE is not run"
else
    (cd "$ROOT" && "$BFP" compare >"$W/table" 2>"$W/err")
    check "compare (data/*.npy): exit 0, nothing on stderr" test $? -eq 0 -a ! -s "$W/err"
    grep -E '^data/[^ ]+\.npy: ' "$W/table" | cut -d: -f1 >"$W/titles"
    (cd "$ROOT" && printf '%s\n' data/*.npy) >"$W/want"
    check "compare (data/*.npy): one title per file, sorted" cmp -s "$W/titles" "$W/want"
    check "compare (data/*.npy): titles give dtype and shape" \
        test "$(grep -Ec '^data/[^ ]+\.npy: (f32|f16|bf16) [0-9]+(x[0-9]+)*, [0-9]+ values' "$W/table")" -eq ${#data[@]}
    check "compare (data/*.npy): an mxfp4 line per file" \
        test "$(grep -Ec '^  mxfp4 +4\.250 +[0-9.e-]+ +[0-9.]+ ' "$W/table")" -eq ${#data[@]}
    check "compare (data/*.npy): 22 format rows per file" \
        test "$(grep -Ec '^  [a-z0-9_+]+ +[0-9]\.[0-9]{3} ' "$W/table")" -eq $((22 * ${#data[@]}))
    check "compare (data/*.npy): column header" grep -q '^  format  *bits/val  *RMSE  *SQNR dB  *max rel err  *mean rel err  *BM share  *saturated$' "$W/table"
    (cd "$ROOT" && "$BFP" compare --json -f mxfp4,nvfp4 >"$W/json")
    check "compare --json (data/*.npy): one object per file" python3 - "$W/json" ${#data[@]} <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == int(sys.argv[2]) and all(o["file"].startswith("data/") for o in d)
for o in d:
    assert [r["format"] for r in o["results"]] == ["mxfp4", "nvfp4"]
    assert all(r["sqnr_db"] > 5 and 0 <= r["bm_share"] <= 1 for r in o["results"])
PY
fi

# BM share by hand. Row 0: block max 5.5 rounds to 6 in MXFP4 (error 0.5),
# everything else exact. Row 1: max 6 exact, 0.3 rounds to 0.5 (error 0.2).
# MXFP4: 0.25 / (0.25 + 0.04) = 86.2%; MXFP4+ stores 5.5 exactly: 0.0%.
python3 - "$W/bm.bin" <<'PY'
import struct, sys
r0 = [5.5] + [1.0, -0.5, 2.0, 0.0, 1.5, -3.0, 4.0] * 4 + [1.0, 1.0, 1.0]
r1 = [1.0] * 10 + [6.0, 0.3] + [1.0] * 20
open(sys.argv[1], "wb").write(struct.pack("<64f", *(r0 + r1)))
PY
"$BFP" compare -s 2x32 -f mxfp4+,mxfp4 "$W/bm.bin" >"$W/bm"
check "compare raw -s 2x32: exit 0" test $? -eq 0
check "title names the raw file and its shape" grep -q "bm.bin: f32 2x32, 64 values$" "$W/bm"
check "rows in format-table order (mxfp4 before mxfp4+)" \
    test "$(grep -Eo '^  mxfp4\+? ' "$W/bm" | tr -d ' ' | tr '\n' ' ')" = "mxfp4 mxfp4+ "
check "mxfp4 BM share 86.2%" grep -Eq '^  mxfp4 +4\.250 .* 86\.2% +[0-9]+$' "$W/bm"
check "mxfp4+ BM share 0.0%" grep -Eq '^  mxfp4\+ +4\.500 .* 0\.0% +[0-9]+$' "$W/bm"
"$BFP" compare -s 2x32 -f mxfp4 --json "$W/bm.bin" >"$W/bm.json"
check "--json: bm_share and rmse of the hand example" python3 - "$W/bm.json" <<'PY'
import json, math, struct, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
e = (struct.unpack("<f", struct.pack("<f", 0.3))[0] - 0.5) ** 2
assert abs(r["bm_share"] - 0.25 / (0.25 + e)) < 1e-12, r
assert abs(r["rmse"] - math.sqrt((0.25 + e) / 64)) < 1e-12, r
assert r["format"] == "mxfp4" and r["bits_per_value"] == 4.25
PY

# bf16 raw input, safetensors input with --name.
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64H", *([0x3F80, 0xBFC0, 0x4040, 0x3D00] * 16)))' "$W/b.bin"
"$BFP" compare -s 64 -t bf16 -f hif4 "$W/b.bin" >"$W/b"
check "raw bf16: title says bf16 1x64" grep -q "b.bin: bf16 1x64, 64 values" "$W/b"
python3 - "$W/m.safetensors" <<'PY'
import json, struct, sys
a, b = struct.pack("<32f", *range(32)), struct.pack("<16f", *[0.5] * 16)
h = json.dumps({"a": {"dtype": "F32", "shape": [1, 32], "data_offsets": [0, 128]},
                "b": {"dtype": "F32", "shape": [16], "data_offsets": [128, 192]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + a + b)
PY
"$BFP" compare --name a -f nvfp4 "$W/m.safetensors" >"$W/m"
check "safetensors --name a: title names file, tensor and shape" grep -q "m.safetensors 'a': f32 1x32, 32 values" "$W/m"

# Non-finite inputs are counted, left out, and their NaN blocks named.
python3 -c '
import struct, sys
v = [0.1 * i - 3 for i in range(64)]; v[5] = float("nan"); v[20] = float("-inf")
open(sys.argv[1], "wb").write(struct.pack("<64f", *v))' "$W/nan.bin"
"$BFP" compare -s 1x64 -f mxfp4,nvfp4 "$W/nan.bin" >"$W/nan" 2>"$W/err"
check "non-finite: exit 0" test $? -eq 0
check "non-finite: count in the title" grep -q "nan.bin: f32 1x64, 64 values, 2 non-finite (left out of the statistics)" "$W/nan"
check "non-finite: stats stay finite" grep -Eq '^  mxfp4 +4\.250 +[0-9.e-]+ +[0-9]+\.[0-9]+ ' "$W/nan"
check "non-finite: NaN blocks listed" grep -q "NaN blocks, all their values left out: mxfp4 1, nvfp4 2" "$W/nan"
"$BFP" compare -s 1x64 -f mxfp4,nvfp4 --json "$W/nan.bin" >"$W/nan.json"
check "non-finite --json: values not compared, by reason" python3 - "$W/nan.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))[0]["results"]:
    # 2 non-finite inputs; the other 30 values of their NaN block(s) decode to NaN
    assert (r["compared"], r["skipped_input"], r["skipped_output"]) == (32, 2, 30), r
PY
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64f", float("nan"), *[float("inf")] * 63))' "$W/allnan.bin"
"$BFP" compare -s 1x64 -f mxfp4 --json "$W/allnan.bin" >"$W/allnan.json"
check "all non-finite: nothing compared, no statistic (null), not exact" python3 - "$W/allnan.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["compared"] == 0 and r["skipped_input"] == 64 and r["sqnr_db"] is None and r["rmse"] is None, r
PY

# Saturation: 7 in an mxfp4 block of max 7 (shared exponent 0, largest element 6) is clipped,
# and 3e38 (shared exponent 125: 7.05 > 6) too; mxfp4+'s block max reaches 7.5 and keeps both;
# hif4 clips 3e38 to 344064 (its largest scale times 7); nvfp4's tensor scale keeps 3e38 in range.
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<64f", 7.0, *[1.0] * 31, 3e38, *[1.0] * 31))' "$W/sat.bin"
"$BFP" compare -s 1x64 -f mxfp4,mxfp4+,nvfp4,hif4 "$W/sat.bin" >"$W/sat"
check "saturated column: mxfp4 2" grep -Eq '^  mxfp4 .* 2$' "$W/sat"
check "saturated column: mxfp4+ 0" grep -Eq '^  mxfp4\+ .* 0$' "$W/sat"
"$BFP" compare -s 1x64 -f mxfp4,mxfp4+,nvfp4,hif4 --json "$W/sat.bin" >"$W/sat.json"
check "--json saturated per format" python3 - "$W/sat.json" <<'PY'
import json, sys
got = {r["format"]: r["saturated"] for r in json.load(open(sys.argv[1]))[0]["results"]}
assert got == {"mxfp4": 2, "mxfp4+": 0, "nvfp4": 0, "hif4": 1}, got
PY

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
