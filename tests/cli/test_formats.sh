#!/usr/bin/env bash
# bfp formats (table and --json), help and version.
# Usage: bash tests/cli/test_formats.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
HERE=$(cd "$(dirname "$0")" && pwd)

# The table: every one of the 22 formats, one row each, in table order.
"$BFP" formats >"$W/table" 2>"$W/err"
check "formats exits 0" test $? -eq 0
check "formats writes nothing on stderr" test ! -s "$W/err"
check "table has a header" grep -q '^format *block *bits/val *element *scale *max *description' "$W/table"
awk 'NR > 1 { print $1 }' "$W/table" >"$W/names"
check "table rows are the 22 formats in table order" cmp -s "$W/names" "$HERE/expected/formats.txt"
check "mxfp4 row: block 32, 4.25 bits, e2m1, e8m0" grep -Eq '^mxfp4 +32 +4\.25 +e2m1 +e8m0 ' "$W/table"
check "nvfp4 row: block 16, 4.50 bits, ue4m3, max 2688" grep -Eq '^nvfp4 +16 +4\.50 +e2m1 +ue4m3 +2688 ' "$W/table"
check "hif4 row: block 64, 4.50 bits" grep -Eq '^hif4 +64 +4\.50 +e1m2 ' "$W/table"

# --json: one array, same names and order, every field present.
"$BFP" formats --json >"$W/json"
check "formats --json exits 0" test $? -eq 0
check "json is one array of 22 objects with every field, names in order" python3 - "$W/json" "$HERE/expected/formats.txt" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
names = open(sys.argv[2]).read().split()
keys = {"name", "id", "family", "block", "elem_bits", "bits_per_value", "element", "scale",
        "scale_bytes", "meta_bytes", "has_tensor_scale", "max_value", "description"}
assert isinstance(data, list) and [o["name"] for o in data] == names, [o.get("name") for o in data]
for o in data:
    assert keys <= set(o), (o["name"], keys - set(o))
nv = {o["name"]: o for o in data}["nvfp4"]
assert nv["block"] == 16 and nv["has_tensor_scale"] is True and nv["bits_per_value"] == 4.5
PY

# Help and version.
"$BFP" --help >"$W/help"
check "--help exits 0" test $? -eq 0
for cmd in formats golden compare quantize dequantize; do
    check "--help lists $cmd" grep -q "^  $cmd " "$W/help"
    "$BFP" help "$cmd" >"$W/h1" && "$BFP" "$cmd" --help >"$W/h2"
    check "help $cmd and $cmd --help exit 0" test $? -eq 0
    check "help $cmd prints its usage" grep -q "^usage: bfp $cmd" "$W/h1"
    check "help $cmd equals $cmd --help" cmp -s "$W/h1" "$W/h2"
done
check "--version prints 'bfp X.Y.Z'" bash -c '"$1" --version | grep -Eqx "bfp [0-9]+\.[0-9]+\.[0-9]+"' _ "$BFP"
"$BFP" formats extra >/dev/null 2>&1
check "formats with an argument exits 2" test $? -eq 2

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
