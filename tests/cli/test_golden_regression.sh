#!/usr/bin/env bash
# Regression lock on the golden model: every case of tests/golden/cases.txt run
# through `bfp golden` must reproduce tests/golden/SHA256SUMS byte for byte.
# Usage: bash tests/cli/test_golden_regression.sh /path/to/bfp [--update]
set -u
BFP=${1:?usage: test_golden_regression.sh /path/to/bfp [--update]}
UPDATE=${2:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
G=$ROOT/tests/golden
W=$(mktemp -d) || exit 2
trap 'rm -rf "$W"' EXIT

: >"$W/sums"
grep -v '^#' "$G/cases.txt" | grep '|' | while IFS='|' read -r name opts; do
    name=$(echo "$name" | tr -d ' ')
    # shellcheck disable=SC2086 # opts is a list of words
    if ! "$BFP" golden $opts "$G/input_4x200.f32.bin" "$W/$name" >/dev/null 2>"$W/err"; then
        echo "FAIL: case $name: $(cat "$W/err")" >&2
        echo "$name/ERROR -" >>"$W/sums"
        continue
    fi
    for f in $(cd "$W/$name" && ls | LC_ALL=C sort); do
        [ "$f" = report.json ] && continue # floats in text: checked by other tests
        echo "$name/$f $(sha256sum <"$W/$name/$f" | cut -d' ' -f1)" >>"$W/sums"
    done
done

if [ "$UPDATE" = --update ]; then
    cp "$W/sums" "$G/SHA256SUMS"
    echo "updated $G/SHA256SUMS ($(wc -l <"$G/SHA256SUMS") files)"
    exit 0
fi
pass=0 fail=0
while read -r key sum; do
    got=$(grep -F "$key " "$W/sums" | cut -d' ' -f2)
    if [ "$got" = "$sum" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $key changed"; fi
done <"$G/SHA256SUMS"
extra=$(cut -d' ' -f1 "$W/sums" | grep -vxFf <(cut -d' ' -f1 "$G/SHA256SUMS") | wc -l)
if [ "$extra" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $extra files not in SHA256SUMS"; fi
echo "test_golden_regression: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
