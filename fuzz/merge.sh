#!/usr/bin/env bash
# Fold what the fuzzers found into the checked-in seed corpora, keeping them
# small: per target, libFuzzer's -merge=1 picks the inputs of the scratch
# corpus (BUILD/corpus/<target>) that add coverage over fuzz/corpus/<target>;
# of those, the MAX smallest are copied in (named by content hash).
# Usage: fuzz/merge.sh BUILD MAX TARGET...
set -eu
BUILD=${1:?usage: merge.sh BUILD MAX TARGET...}
MAX=${2:?max files per target}
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
for t in "$@"; do
    exe=$BUILD/fuzz_$t
    [ -x "$exe" ] && [ -d "$BUILD/corpus/$t" ] || { echo "merge: skip $t (no $exe or scratch corpus)"; continue; }
    new=$(mktemp -d)
    cp -r "$ROOT/fuzz/corpus/$t/." "$new/"
    before=$(ls "$new" | wc -l)
    # inputs that add features to the seeds land in $new
    nice -n 19 "$exe" -merge=1 -rss_limit_mb=4096 "$new" "$BUILD/corpus/$t" >"$BUILD/logs/merge_$t.log" 2>&1
    added=0
    for f in $(cd "$new" && ls -S -r); do
        [ -e "$ROOT/fuzz/corpus/$t/$f" ] && continue
        [ $added -ge "$MAX" ] && break
        cp "$new/$f" "$ROOT/fuzz/corpus/$t/$f"
        added=$((added + 1))
    done
    echo "merge: $t: $(($(ls "$new" | wc -l) - before)) inputs add coverage, $added smallest copied"
    rm -rf "$new"
done
