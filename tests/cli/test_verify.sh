#!/usr/bin/env bash
# bfp verify: reference planes verify clean in every format and every layout
# (planar, hif4-golden, ggml, swizzled, with the layout guessed or named);
# broken planes are detected and named (a flipped bit, a scale one step off,
# swapped nibbles, the tie rule reversed, a shifted block, reversed HiF4 flags);
# exit codes 0 / 1 / 2, --json, and bad input (missing or truncated files).
# Usage: bash tests/cli/test_verify.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
cd "$W" || exit 2
# verify_rc WANT ARGS...: run bfp verify, keep stdout/stderr in out/err
verify_rc() {
    local want=$1; shift
    "$BFP" verify "$@" >out 2>err
    local rc=$?
    [ "$rc" -eq "$want" ] || { echo "  rc $rc, want $want: bfp verify $*"; cat err; return 1; }
}
# json EXPR: evaluate a Python expression over the JSON report in out (as r)
json() { python3 -c "import json,sys; r=json.load(open('out')); sys.exit(0 if ($1) else 1)"; }
# one error line, naming what it must
one_error() { [ "$(wc -l <err)" -eq 1 ] && grep -q "^bfp: error: .*$1" err && [ ! -s out ]; }

# 3x70: partial last blocks for every block size; exact ties in row 0.
python3 - <<'PY'
import random, struct
random.seed(11)
v = [random.gauss(0, 1) * (10 ** random.randint(-2, 2)) for _ in range(3 * 70)]
v[0:8] = [6.0, 1.25, -2.5, 0.75, 5.0, -0.25, 1.75, 3.5]   # E2M1 midpoints (scale 1)
open("x.bin", "wb").write(struct.pack("<210f", *v))
# 4x128 for the layouts that need whole ggml blocks; 130 rows pad the 128x4 tiles
v = [random.gauss(0, 1) for _ in range(130 * 128)]
open("y.bin", "wb").write(struct.pack("<%df" % len(v), *v))
# ties everywhere: every block has max 6 and the others at midpoints
t = [6.0, 1.25, -2.5, 0.75, 5.0, -0.25, 1.75, 3.5] * (2 * 64 // 8)
open("t.bin", "wb").write(struct.pack("<128f", *t))
# HiF4 ties: block max 1.75 gives UE6M2 0.25 and REC 4, so |x| * 4 * 2^-shift
# lands on k/4 + 1/8 for several elements (0.125, 0.625, -1.125, ...)
h = [1.75, 0.125, -0.375, 0.625, 0.875, -1.125, 0.0625, 1.375] * (2 * 64 // 8)
open("th.bin", "wb").write(struct.pack("<128f", *h))
PY

# ---- clean: every format, planar layout guessed -------------------------------
formats=$("$BFP" formats --json | python3 -c 'import json,sys; print(" ".join(f["name"] for f in json.load(sys.stdin)))')
ok=0 n=0
for f in $formats; do
    n=$((n + 1))
    "$BFP" golden -f "$f" -s 3x70 x.bin "g_$f" >/dev/null || continue
    # (grep and awk, not python: this loop runs 44 times, also under ASan)
    if verify_rc 0 -f "$f" -s 3x70 x.bin "g_$f" && grep -q "^IDENTICAL: every plane matches" out &&
        grep -q "planar layout (guessed" out && [ ! -s err ] &&
        awk '/^  (RMSE|SQNR dB) / { n++; if ($(NF-1) != $NF) bad = 1 } END { exit !(n == 2 && !bad) }' out &&
        verify_rc 0 -f "$f" -s 3x70 --json x.bin "g_$f" &&
        grep -q '"identical":[[:space:]]*true' out && grep -q '"mismatches":[[:space:]]*0,' out &&
        grep -q '"layout":[[:space:]]*"planar"' out; then
        ok=$((ok + 1))
    else
        echo "  not clean: $f"
    fi
done
check "golden planes of all $n formats verify clean (exit 0, human and JSON)" test "$ok" -eq "$n" -a "$n" -eq 22
verify_rc 0 -f mxfp4 -s 3x70 x.bin g_mxfp4
check "error table: reference and DUT columns" grep -Eq "^  SQNR dB +[0-9.]+ +[0-9.]+$" out
verify_rc 0 -f mxfp4 -s 3x70 --layout planar x.bin g_mxfp4
check "--layout planar: no guess reported" grep -q "planar layout, reference rounding rne" out

# ---- HiF4 golden files ---------------------------------------------------------
mkdir hg && cp g_hif4/golden_fp4.bin g_hif4/golden_ea.bin g_hif4/golden_eb.bin g_hif4/golden_ec.bin \
    g_hif4/golden_scale.bin hg/
verify_rc 0 -f hif4 -s 3x70 x.bin hg
check "hif4 golden files: guessed and clean" grep -q "hif4-golden layout (guessed" out
verify_rc 0 -f hif4 -s 3x70 --json x.bin hg
check "hif4 golden files: golden_scale compared" json 'r["planes"]["golden_scale"] == {"compared": 96, "differ": 0}'
rm hg/golden_scale.bin
verify_rc 0 -f hif4 -s 3x70 --layout hif4-golden x.bin hg
check "hif4 golden files without golden_scale.bin: clean" grep -q "^IDENTICAL" out
python3 - <<'PY'
d = open("hg/golden_eb.bin", "rb").read()
open("hg/golden_eb.bin", "wb").write(bytes(int(format(b, "08b")[::-1], 2) for b in d))
PY
verify_rc 1 -f hif4 -s 3x70 --json x.bin hg
check "hif4: reversed E1_8 flags named bit-order" \
    json 'r["planes"]["meta"]["differ"] > 0 and r["planes"]["scales"]["differ"] == 0 and [c["cause"] for c in r["causes"]] == ["bit-order"]'

# ---- ggml blocks, written here from the planar files by ggml's rules ----------
# block_mxfp4 {e; qs[16]}: qs[j] = q[j] | q[j+16] << 4.
# block_nvfp4 {d[4]; qs[32]}: sub-block s in qs[8s..8s+7], qs[8s+j] = q[16s+j] | q[16s+j+8] << 4.
cat >to_ggml.py <<'PY'
import sys
fmt, rows, cols, src, dst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
codes, scales = open(src + "/codes.bin", "rb").read(), open(src + "/scales.bin", "rb").read()
q = lambda r, c: (codes[r * cols // 2 + c // 2] >> (4 * (c % 2))) & 15
out = bytearray()
blk, sub = (32, 32) if fmt == "mxfp4" else (64, 16)
for r in range(rows):
    for b in range(cols // blk):
        c0 = b * blk
        out += bytes(scales[r * (cols // sub) + (c0 + s) // sub] for s in range(0, blk, sub))
        for s in range(0, blk, sub):
            out += bytes(q(r, c0 + s + j) | q(r, c0 + s + j + sub // 2) << 4 for j in range(sub // 2))
open(dst + "/blocks.bin", "wb").write(out)
PY
"$BFP" golden -f mxfp4 -s 4x128 --force y.bin gm >/dev/null 2>&1 || true
head -c $((4 * 128 * 4)) y.bin >y4.bin
"$BFP" golden -f mxfp4 -s 4x128 y4.bin gm >/dev/null
mkdir dm && python3 to_ggml.py mxfp4 4 128 gm dm
check "block_mxfp4 file has 17 bytes per 32 values" test "$(wc -c <dm/blocks.bin)" -eq $((4 * 4 * 17))
verify_rc 0 -f mxfp4 -s 4x128 y4.bin dm
check "ggml block_mxfp4: guessed and clean" grep -q "ggml layout (guessed: blocks.bin" out
"$BFP" golden -f nvfp4 -s 4x128 --no-tensor-scale y4.bin gn >/dev/null
mkdir dn && python3 to_ggml.py nvfp4 4 128 gn dn
check "block_nvfp4 file has 36 bytes per 64 values" test "$(wc -c <dn/blocks.bin)" -eq $((4 * 2 * 36))
verify_rc 0 -f nvfp4 -s 4x128 y4.bin dn
check "ggml block_nvfp4 without tensor_scale.bin: reference without tensor scale, clean" \
    grep -q "^note: block_nvfp4 has no tensor scale" out
"$BFP" golden -f nvfp4 -s 4x128 y4.bin gn2 >/dev/null
mkdir dn2 && python3 to_ggml.py nvfp4 4 128 gn2 dn2 && cp gn2/tensor_scale.bin dn2/
verify_rc 0 -f nvfp4 -s 4x128 --layout ggml y4.bin dn2
check "ggml block_nvfp4 with tensor_scale.bin: clean" grep -q "^IDENTICAL" out
# planar codes read as ggml: the nibble order is named
mkdir dx && python3 - <<'PY'
codes = open("gm/codes.bin", "rb").read()
out = bytearray()
q = lambda c: (codes[c // 2] >> (4 * (c % 2))) & 15
for c0 in range(0, 4 * 128, 32):  # ggml order written into a planar file
    out += bytes(q(c0 + j) | q(c0 + j + 16) << 4 for j in range(16))
open("dx/codes.bin", "wb").write(out)
PY
cp gm/scales.bin dx/
verify_rc 1 -f mxfp4 -s 4x128 --json y4.bin dx
check "ggml nibble order in planar codes.bin named nibble-order" \
    json '[c["cause"] for c in r["causes"]] == ["nibble-order"] and r["planes"]["scales"]["differ"] == 0'
verify_rc 2 -f mxfp4 -s 3x70 --layout ggml x.bin dm
check "ggml layout with COLS not a multiple of 32: exit 2" one_error "multiple of 32"
verify_rc 2 -f mxfp8_e4m3 -s 4x128 --layout ggml y4.bin dm
check "ggml layout for mxfp8: exit 2" one_error "for mxfp4 and nvfp4"

# ---- 128x4 swizzled scales (cuBLAS "1D Block Scaling Factors Layout") ----------
cat >swz.py <<'PY'
import sys
rows, bpr, src, dst = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = open(src, "rb").read()
rt, ct = -(-rows // 128), -(-bpr // 4)
out = bytearray(rt * ct * 512)
for r in range(rows):
    for c in range(bpr):
        out[((r // 128) * ct + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] = s[r * bpr + c]
open(dst, "wb").write(out)
PY
for f in mxfp4 nvfp4 mxfp8_e4m3+; do
    case $f in nvfp4) bpr=8 ;; *) bpr=4 ;; esac
    "$BFP" golden -f "$f" -s 130x128 y.bin "s_$f" >/dev/null
    mkdir "w_$f" && cp "s_$f"/codes.bin "w_$f"/ && cp "s_$f"/meta.bin "s_$f"/tensor_scale.bin "w_$f"/ 2>/dev/null
    python3 swz.py 130 "$bpr" "s_$f/scales.bin" "w_$f/scales_swizzled.bin"
    verify_rc 0 -f "$f" -s 130x128 y.bin "w_$f"
    check "swizzled scales ($f 130x128): guessed and clean" grep -q "swizzled layout (guessed: scales_swizzled.bin" out
done
mv w_mxfp4/scales_swizzled.bin w_mxfp4/scales.bin
verify_rc 0 -f mxfp4 -s 130x128 y.bin w_mxfp4
check "swizzled scales in scales.bin guessed from its size" grep -q "swizzled layout (guessed: scales.bin has the swizzled size 1024" out
verify_rc 2 -f mxfp4 -s 130x128 --layout planar y.bin w_mxfp4
check "swizzled scales read as planar: size error names both sizes" one_error "scales.bin has 1024 bytes, expected 520"

# ---- broken planes --------------------------------------------------------------
# flip_bit DIR FILE BYTE MASK
flip_bit() { python3 -c '
import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read())
d[int(sys.argv[2])] ^= int(sys.argv[3], 0); open(p, "wb").write(d)' "$1/$2" "$3" "$4"; }
cp -r g_mxfp4 b1 && flip_bit b1 codes.bin 41 0x40     # row 1 (35 bytes a row), col 13: bit 2 of its code
verify_rc 1 -f mxfp4 -s 3x70 --json x.bin b1
check "flipped bit: exit 1, one code, at row 1 col 13, named bit-flip" json '
r["planes"]["codes"]["differ"] == 1 and r["mismatches"] == 1 and
[(m["row"], m["block"], m["elem"], m["col"], m["cause"]) for m in r["first_mismatches"]] == [(1, 0, 13, 13, "bit-flip")] and
r["error"]["dut"]["rmse"] != r["error"]["reference"]["rmse"]'
verify_rc 1 -f mxfp4 -s 3x70 x.bin b1
check "flipped bit: human verdict and table" grep -q "^DIFFERENT: 1 entry differ" out
check "flipped bit: the table row" grep -Eq "^  codes +1 +0 +13 +13 .* bit-flip$" out

cp -r g_mxfp8_e5m2 b2 && flip_bit b2 scales.bin 4 0x01   # row 1, block 1: code +-1
verify_rc 1 -f mxfp8_e5m2 -s 3x70 --json x.bin b2
check "scale one step off: named scale-step at row 1 block 1" json '
r["planes"]["scales"]["differ"] == 1 and r["planes"]["codes"]["differ"] == 0 and
[(m["plane"], m["row"], m["block"], m["cause"], abs(m["expected"] - m["received"])) for m in r["first_mismatches"]] == [("scales", 1, 1, "scale-step", 1)]'
"$BFP" golden -f mxfp4 -s 3x70 --scale-mode ceil x.bin b3 >/dev/null
verify_rc 1 -f mxfp4 -s 3x70 --json x.bin b3
check "a kernel using ceil(log2 amax): every mismatch named scale-step" \
    json '[c["cause"] for c in r["causes"]] == ["scale-step"] and r["planes"]["codes"]["differ"] > 0'

cp -r g_nvfp4 b4 && python3 -c '
d = bytearray(open("b4/codes.bin", "rb").read())
open("b4/codes.bin", "wb").write(bytes((b << 4 | b >> 4) & 255 for b in d))'
verify_rc 1 -f nvfp4 -s 3x70 --json x.bin b4
check "swapped nibbles: named nibble-order" json '[c["cause"] for c in r["causes"]] == ["nibble-order"]'

"$BFP" golden -f mxfp4 -s 2x64 --rounding away t.bin b5 >/dev/null
verify_rc 1 -f mxfp4 -s 2x64 --json t.bin b5
check "tie rule reversed (ties away against RNE): every mismatch named tie" json '
[c["cause"] for c in r["causes"]] == ["tie"] and r["planes"]["scales"]["differ"] == 0 and
all(abs(m["expected_value"] - m["input"]) == abs(m["received_value"] - m["input"]) for m in r["first_mismatches"])'
verify_rc 0 -f mxfp4 -s 2x64 --rounding away t.bin b5
check "the same planes verify clean against a reference with --rounding away" grep -q "^IDENTICAL" out
"$BFP" golden -f hif4 -s 2x64 --rounding rne th.bin b6 >/dev/null
verify_rc 1 -f hif4 -s 2x64 --json th.bin b6
check "hif4 with RNE instead of ties away: named tie" json '[c["cause"] for c in r["causes"]] == ["tie"]'

cp -r gm b7 && python3 -c '
c = bytearray(open("b7/codes.bin", "rb").read()); s = bytearray(open("b7/scales.bin", "rb").read())
r = 64  # row 1 starts at byte 64 (128 codes), scale 4
c[r:r + 48] = c[r + 16:r + 64]; s[4:7] = s[5:8]
open("b7/codes.bin", "wb").write(c); open("b7/scales.bin", "wb").write(s)'
verify_rc 1 -f mxfp4 -s 4x128 --json y4.bin b7
check "blocks written one block early: named block-shift" json '
[c["cause"] for c in r["causes"]] == ["block-shift"] and r["blocks"]["differ"] == 3 and r["first_mismatches"][0]["row"] == 1'

# --max-mismatches
verify_rc 1 -f nvfp4 -s 3x70 --json --max-mismatches 2 x.bin b4
check "--max-mismatches 2: two listed, all counted" json 'len(r["first_mismatches"]) == 2 and r["mismatches"] > 2'
verify_rc 1 -f nvfp4 -s 3x70 --max-mismatches 0 x.bin b4
check "--max-mismatches 0: no table, still the causes" \
    sh -c '! grep -q "mismatches:$" out && grep -q "^likely causes" out'

# ---- bad input: exit 2, one error line ---------------------------------------
cp -r g_mxfp4 e1 && head -c 100 g_mxfp4/codes.bin >e1/codes.bin
verify_rc 2 -f mxfp4 -s 3x70 x.bin e1
check "truncated codes.bin: names the file and both sizes" one_error "e1/codes.bin has 100 bytes, expected 105"
cp -r g_nvfp4 e2 && rm e2/tensor_scale.bin
verify_rc 2 -f nvfp4 -s 3x70 x.bin e2
check "missing tensor_scale.bin: names the file and its size" one_error "e2/tensor_scale.bin is missing: .*4 bytes"
cp -r g_mxfp4+ e3 && rm e3/meta.bin
verify_rc 2 -f mxfp4+ -s 3x70 x.bin e3
check "missing meta.bin: exit 2" one_error "e3/meta.bin is missing"
rm hg/golden_ec.bin
verify_rc 2 -f hif4 -s 3x70 x.bin hg
check "missing golden_ec.bin: exit 2" one_error "hg/golden_ec.bin is missing"
verify_rc 2 -f mxfp4 -s 3x70 x.bin nodir
check "missing DUT_DIR: exit 2" one_error "nodir does not exist"
verify_rc 2 -f mxfp4 -s 3x70 x.bin x.bin
check "DUT_DIR a regular file: says it is not a directory" one_error "DUT_DIR x.bin is not a directory"
verify_rc 2 -f mxfp4 -s 3x71 x.bin g_mxfp4
check "input of the wrong size: exit 2" one_error "x.bin has 840 bytes"
verify_rc 2 -f mxfp4 -s 3x70 --layout tiled x.bin g_mxfp4
check "unknown layout: exit 2" one_error "unknown layout 'tiled'"
verify_rc 2 -f mxfp4 -s 3x70 --layout hif4-golden x.bin g_mxfp4
check "hif4-golden for mxfp4: exit 2" one_error "is for hif4"
verify_rc 2 -f hif4 -s 3x70 --layout swizzled x.bin g_hif4
check "swizzled for hif4: exit 2" one_error "one-byte scales"
verify_rc 2 -f mxfp4 -s 3x70 --max-mismatches x x.bin g_mxfp4
check "bad --max-mismatches: exit 2" one_error "--max-mismatches"
verify_rc 2 -f mxfp4 -s 3x70 x.bin
check "one positional argument: exit 2" one_error "verify needs INPUT.bin and DUT_DIR"
verify_rc 2 -f mxfp4+ -s 3x70 --scale-mode ceil x.bin g_mxfp4+
check "an option the format does not take: exit 2" one_error "scale-mode"

echo "test_verify.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
