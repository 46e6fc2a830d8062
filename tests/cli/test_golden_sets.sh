#!/usr/bin/env bash
# bfp golden: OUTDIR changes as one set or not at all. A failed --force run
# leaves the old set, a rerun with another format leaves no stale file,
# concurrent runs leave one run's set whole, a user's directory is refused.
# Usage: bash tests/cli/test_golden_sets.sh /path/to/bfp   (from the repo root)
. "$(dirname "$0")/lib.sh" "$@"
# A digest of a directory: each file's name and checksum, sorted.
digest() { (cd "$1" && for f in $(ls -A | LC_ALL=C sort); do printf '%s %s\n' "$f" "$(cksum <"$f")"; done); }
# The directory holds exactly the files its report.json lists.
only_listed() {
    python3 - "$1" <<'PY'
import json, os, sys
d = sys.argv[1]
assert sorted(json.load(open(os.path.join(d, "report.json")))["files"]) == sorted(os.listdir(d))
PY
}
no_temps() { [ -z "$(ls -A "$W" | grep '^\.bfp-')" ]; }

# 128x256 f32: dequant.f32.bin is 128 KiB, past a 50 KiB file size limit.
python3 - "$W/in.bin" <<'PY'
import random, struct, sys
random.seed(11)
open(sys.argv[1], "wb").write(struct.pack("<32768f", *[random.gauss(0, 1) for _ in range(32768)]))
PY
G() { "$BFP" golden -s 128x256 "$@"; }

# A failure midway (ulimit -f) leaves the old set as it was.
G -f hif4 "$W/in.bin" "$W/out" >/dev/null
old=$(digest "$W/out")
(ulimit -f 100; G -f nvfp4 --force "$W/in.bin" "$W/out" >/dev/null 2>"$W/err")
check "ulimit -f: exit 2" test $? -eq 2
check "ulimit -f: the error names the output, not a temporary name" \
    grep -q "^bfp: error: cannot write $W/out/dequant.f32.bin (write): " "$W/err"
check "ulimit -f: the old set is untouched" test "$(digest "$W/out")" = "$old"
check "ulimit -f: no temporary directory left" no_temps

# A rerun with another format leaves none of the old format's files.
G -f mxfp4 --force "$W/in.bin" "$W/out" >/dev/null
check "hif4 -> mxfp4: exit 0" test $? -eq 0
check "hif4 -> mxfp4: only the new files (no golden_*.bin)" only_listed "$W/out"
G -f mxfp4 "$W/in.bin" "$W/fresh" >/dev/null
check "hif4 -> mxfp4: the set equals a fresh run's" test "$(digest "$W/out")" = "$(digest "$W/fresh")"
check "no temporary directory left after a replacement" no_temps

# An entry golden does not write (a directory under a golden name, a user's
# file) is refused, with or without --force, and nothing changes.
old=$(digest "$W/fresh")
mkdir "$W/fresh/meta.bin"
G -f mxfp4+ --force "$W/in.bin" "$W/fresh" >/dev/null 2>"$W/err"
check "a directory named meta.bin: exit 2" test $? -eq 2
check "a directory named meta.bin: one error line naming it" \
    test "$(cat "$W/err")" = "bfp: error: $W/fresh holds 'meta.bin', which is not one of the files written there; not replacing the directory"
rmdir "$W/fresh/meta.bin"
check "a directory named meta.bin: the set is untouched" test "$(digest "$W/fresh")" = "$old"
mkdir "$W/mine" && echo notes >"$W/mine/notes.txt"
G -f mxfp4 --force "$W/in.bin" "$W/mine" >/dev/null 2>"$W/err"
check "a user's directory: refused even with --force" grep -q "holds 'notes.txt'" "$W/err"
check "a user's directory: its file stays" test "$(cat "$W/mine/notes.txt")" = notes

# Without --force a set is never replaced; an empty directory is taken.
G -f mxfp4 "$W/in.bin" "$W/out" >/dev/null 2>"$W/err"
check "existing set without --force: exit 2 naming --force" grep -q "exists (use --force" "$W/err"
mkdir "$W/empty"
G -f mxfp4 "$W/in.bin" "$W/empty" >/dev/null
check "an empty OUTDIR is filled" test "$(digest "$W/empty")" = "$(digest "$W/fresh")"

# The input may not be one of the files the new set replaces.
cp "$W/in.bin" "$W/empty/dequant.f32.bin" 2>/dev/null
G -f mxfp4 --force "$W/empty/dequant.f32.bin" "$W/empty" >/dev/null 2>"$W/err"
check "INPUT inside OUTDIR: refused" grep -q "which golden would replace" "$W/err"
check "INPUT inside OUTDIR: still there" cmp -s "$W/in.bin" "$W/empty/dequant.f32.bin"

# A symlink to the directory: the directory it points to gets the new set.
G -f hif4 "$W/in.bin" "$W/real" >/dev/null && ln -s real "$W/link"
G -f mxfp4 --force "$W/in.bin" "$W/link" >/dev/null
check "OUTDIR a symlink: stays a symlink" test -L "$W/link"
check "OUTDIR a symlink: the target holds the new set only" \
    test "$(digest "$W/real")" = "$(digest "$W/fresh")"

# Concurrent --force runs of different formats: one run's set, whole.
fmts="hif4 mxfp4 nvfp4 mxfp8_e4m3+ mxint8"
for f in $fmts; do G -f "$f" "$W/in.bin" "$W/single_$f" >/dev/null; done
bad=0
for round in 1 2 3 4 5 6; do
    for f in $fmts; do G -f "$f" --force "$W/in.bin" "$W/race" >/dev/null 2>>"$W/race_err" & done
    wait
    won=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["format"])' "$W/race/report.json")
    if [ "$(digest "$W/race")" != "$(digest "$W/single_$won")" ]; then
        bad=$((bad + 1)); echo "round $round: the set is not $won's"; ls "$W/race"
    fi
done
check "concurrent runs: every round leaves one run's whole set" test $bad -eq 0
check "concurrent runs: none failed" test ! -s "$W/race_err"
check "concurrent runs: no temporary directory left" no_temps

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
