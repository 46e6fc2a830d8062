#!/usr/bin/env bash
# Time `bfp convert -f mxfp4` of a bf16 checkpoint (default 1 GiB, 4096x4096
# weights in 256 MiB shards, made by tests/tools/make_ckpt.py) against `cp`
# of the same files to the same disk, alternating, and write a JSON result.
# Issue #24's bar: convert takes at most twice as long as cp.
# usage: bench/convert_vs_cp.sh [BFP] [OUT.json] [MIB] [REPEATS] [LAYOUT]
# DEVICES="cpu cuda" also times `--device cuda` in the same run (a CUDA
# build on a GPU machine); the first device is the one the bar is about.
set -eu
BFP=${1:-build/bfp}
OUT=${2:-bench/results/convert_vs_cp.json}
MIB=${3:-1024}
REPS=${4:-3}
LAYOUT=${5:-compressed-tensors}
DEVICES=${DEVICES:-cpu}
PY=${PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/bfp_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$PY" tests/tools/make_ckpt.py "$W/in" --big "$MIB"
sync
now() { date +%s.%N; }
cps=() bydev=()
declare -A conv
for r in $(seq 1 "$REPS"); do
    rm -rf "$W/cp"
    sync
    t0=$(now); mkdir "$W/cp"; cp "$W"/in/* "$W/cp/"; sync; t1=$(now)
    cps+=("$(echo "$t1 - $t0" | bc -l)")
    for dev in $DEVICES; do
        rm -rf "$W/out"
        sync
        t0=$(now)
        "$BFP" convert -f mxfp4 --layout "$LAYOUT" --device "$dev" "$W/in" "$W/out" >/dev/null
        sync; t1=$(now)
        conv[$dev]="${conv[$dev]:-} $(echo "$t1 - $t0" | bc -l)"
    done
done
for dev in $DEVICES; do bydev+=("$dev:${conv[$dev]// /,}"); done
bytes=$(du -sb "$W/in" | cut -f1)
outbytes=$(du -sb "$W/out" | cut -f1)
"$PY" - "$OUT" "$bytes" "$outbytes" "$LAYOUT" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(nproc)" "$(cat /proc/loadavg)" "${bydev[*]}" "${cps[*]}" <<'PY'
import json, statistics, sys, datetime
out, b, ob, layout, commit, ncpu, load, bydev, cps = sys.argv[1:]
bydev = [d.split(":") for d in bydev.split()]
bydev = {d: [float(x) for x in t.split(",") if x] for d, t in bydev}
conv = list(bydev.values())[0]
cps = [float(x) for x in cps.split()]
r = {
    "command": "bench/convert_vs_cp.sh (bfp convert -f mxfp4 --layout %s --device %s vs cp, "
               "then sync)" % (layout, "|".join(bydev)),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit, "cpus": int(ncpu), "loadavg_before": load,
    "input_bytes": int(b), "output_bytes": int(ob),
    "convert_seconds": conv, "cp_seconds": cps,
    "convert_median_s": statistics.median(conv), "cp_median_s": statistics.median(cps),
    "ratio_median": statistics.median(conv) / statistics.median(cps),
    "bar": "convert <= 2 x cp",
}
if len(bydev) > 1:
    r["by_device"] = {d: {"seconds": t, "median_s": statistics.median(t),
                          "ratio_median": statistics.median(t) / statistics.median(cps)}
                      for d, t in bydev.items()}
r["meets_bar"] = r["ratio_median"] <= 2.0
json.dump(r, open(out, "w"), indent=2)
print(json.dumps(r, indent=2))
PY
