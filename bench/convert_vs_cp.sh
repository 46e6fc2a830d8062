#!/usr/bin/env bash
# Time `bfp convert -f mxfp4` of a bf16 checkpoint (default 1 GiB, 4096x4096
# weights in 256 MiB shards, made by tests/tools/make_ckpt.py) against `cp`
# of the same files to the same disk, alternating, and write a JSON result.
# Issue #24's bar: convert takes at most twice as long as cp.
# usage: bench/convert_vs_cp.sh [BFP] [OUT.json] [MIB] [REPEATS] [LAYOUT]
set -eu
BFP=${1:-build/bfp}
OUT=${2:-bench/results/convert_vs_cp.json}
MIB=${3:-1024}
REPS=${4:-3}
LAYOUT=${5:-compressed-tensors}
PY=${PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/bfp_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$PY" tests/tools/make_ckpt.py "$W/in" --big "$MIB"
sync
now() { date +%s.%N; }
conv=() cps=()
for r in $(seq 1 "$REPS"); do
    rm -rf "$W/cp" "$W/out"
    sync
    t0=$(now); mkdir "$W/cp"; cp "$W"/in/* "$W/cp/"; sync; t1=$(now)
    cps+=("$(echo "$t1 - $t0" | bc -l)")
    sync
    t0=$(now); "$BFP" convert -f mxfp4 --layout "$LAYOUT" "$W/in" "$W/out" >/dev/null; sync; t1=$(now)
    conv+=("$(echo "$t1 - $t0" | bc -l)")
done
bytes=$(du -sb "$W/in" | cut -f1)
outbytes=$(du -sb "$W/out" | cut -f1)
"$PY" - "$OUT" "$bytes" "$outbytes" "$LAYOUT" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(nproc)" "$(cat /proc/loadavg)" "${conv[*]}" "${cps[*]}" <<'PY'
import json, statistics, sys, datetime
out, b, ob, layout, commit, ncpu, load, conv, cps = sys.argv[1:]
conv = [float(x) for x in conv.split()]
cps = [float(x) for x in cps.split()]
r = {
    "command": "bench/convert_vs_cp.sh (bfp convert -f mxfp4 --layout %s vs cp, then sync)" % layout,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit, "cpus": int(ncpu), "loadavg_before": load,
    "input_bytes": int(b), "output_bytes": int(ob),
    "convert_seconds": conv, "cp_seconds": cps,
    "convert_median_s": statistics.median(conv), "cp_median_s": statistics.median(cps),
    "ratio_median": statistics.median(conv) / statistics.median(cps),
    "bar": "convert <= 2 x cp",
}
r["meets_bar"] = r["ratio_median"] <= 2.0
json.dump(r, open(out, "w"), indent=2)
print(json.dumps(r, indent=2))
PY
