#!/usr/bin/env bash
# Run libFuzzer targets built in BUILD (make fuzz): each for SECONDS, JOBS at
# a time, niced. New inputs go to BUILD/corpus/<target> (scratch; the seed
# corpus fuzz/corpus/<target> is only read), crashes to
# BUILD/crashes/<target>, logs to BUILD/logs/<target>.log; the final
# libFuzzer status line of each target goes to BUILD/logs/summary.txt.
# Usage: fuzz/run.sh BUILD SECONDS JOBS TARGET...
set -u
BUILD=${1:?usage: run.sh BUILD SECONDS JOBS TARGET...}
SECONDS_EACH=${2:?seconds}
JOBS=${3:?jobs}
shift 3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$BUILD/logs"

run_one() {
    local t=$1 exe=$BUILD/fuzz_$1
    if [ ! -x "$exe" ]; then
        echo "fuzz: no $exe (build with make fuzz)" >&2
        return 1
    fi
    mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes/$t"
    local extra=()
    # the CLI parsers print one error line per rejected input
    [ "$t" = cli_args ] && extra+=(-close_fd_mask=3)
    [ -f "$ROOT/fuzz/dict/$t.dict" ] && extra+=("-dict=$ROOT/fuzz/dict/$t.dict")
    nice -n 19 "$exe" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$t/" "${extra[@]}" \
        "$BUILD/corpus/$t" "$ROOT/fuzz/corpus/$t" >"$BUILD/logs/$t.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$BUILD/logs/$t.log" | tail -1)
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/logs/$t.log")
    echo "$t rc=$rc seconds=$SECONDS_EACH executions=${execs:-?} $last" >>"$BUILD/logs/summary.txt"
    return $rc
}

status=0
pids=()
for t in "$@"; do
    run_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do
    wait "$p" || status=1
done
cat "$BUILD/logs/summary.txt"
exit $status
