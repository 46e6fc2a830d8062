#!/usr/bin/env bash
# Speed-up of `mpirun -n 2 bfp convert` over `-n 1` (issue #25), next to a
# plain run and `cp` of the same files to the same disk: the bf16 checkpoint
# of bench/convert_vs_cp.sh (default 1 GiB, four 256 MiB shards, so two per
# rank at -n 2), each variant REPEATS times, alternating, each followed by
# sync; also `mpirun -n 2 bfp convert --help` (MPI's start and end) and the
# plain run's CPU time. Writes a JSON result with the command, date, commit,
# CPU count and load average (the ranks share this machine's CPUs with whatever else runs).
# usage: bench/convert_mpi.sh [BFP] [OUT.json] [MIB] [REPEATS] [LAYOUT]
set -eu
BFP=${1:-build/bfp}
OUT=${2:-bench/results/convert_mpi.json}
MIB=${3:-1024}
REPS=${4:-3}
LAYOUT=${5:-compressed-tensors}
PY=${PYTHON:-python3}
MPIRUN=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d "${TMPDIR:-/tmp}/bfp_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$PY" tests/tools/make_ckpt.py "$W/in" --big "$MIB"
sync
load_before=$(cat /proc/loadavg)
now() { date +%s.%N; }
timed() { # timed CMD...: seconds of CMD then sync
    local t0 t1
    t0=$(now); "$@" >/dev/null; sync; t1=$(now)
    echo "$t1 - $t0" | bc -l
}
copy() { mkdir "$W/out" && cp "$W"/in/* "$W/out/"; }
conv() { "$BFP" convert -f mxfp4 --layout "$LAYOUT" "$W/in" "$W/out"; }
mpi() { "$MPIRUN" --oversubscribe -n "$1" "$BFP" convert -f mxfp4 --layout "$LAYOUT" "$W/in" "$W/out"; }
# mpirun, MPI_Init and MPI_Finalize of two ranks that convert nothing
startup() { "$MPIRUN" --oversubscribe -n 2 "$BFP" convert --help; }
cps=() plain=() n1=() n2=() st=() cpu=()
for r in $(seq 1 "$REPS"); do
    st+=("$(timed startup)")
    rm -rf "$W/out"; sync; cps+=("$(timed copy)")
    rm -rf "$W/out"; sync; plain+=("$(timed conv)")
    # the plain run's CPU time (user + system), for the per-rank compute rate
    rm -rf "$W/out"; sync
    cpu+=("$( { /usr/bin/time -f '%U + %S' "$BFP" convert -f mxfp4 --layout "$LAYOUT" \
        "$W/in" "$W/out" >/dev/null; } 2>&1 | tail -1 | bc -l)")
    rm -rf "$W/out"; sync; n1+=("$(timed mpi 1)")
    rm -rf "$W/out"; sync; n2+=("$(timed mpi 2)")
done
bytes=$(du -sb "$W/in" | cut -f1)
"$PY" - "$OUT" "$bytes" "$LAYOUT" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(nproc)" "$load_before" "$(cat /proc/loadavg)" "${cps[*]}" "${plain[*]}" "${n1[*]}" \
    "${n2[*]}" "${st[*]}" "${cpu[*]}" "$("$MPIRUN" --version 2>/dev/null | head -1)" <<'PY'
import json, statistics, sys, datetime
out, b, layout, commit, ncpu, load0, load1, cps, plain, n1, n2, st, cpu, mpiv = sys.argv[1:]
f = lambda s: [float(x) for x in s.split()]
cps, plain, n1, n2, st, cpu = f(cps), f(plain), f(n1), f(n2), f(st), f(cpu)
med = statistics.median
b = int(b)
r = {
    "command": "bench/convert_mpi.sh (bfp convert -f mxfp4 --layout %s: plain, "
               "mpirun --oversubscribe -n 1 and -n 2; cp of the same files; each then sync)" % layout,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit, "cpus": int(ncpu), "mpirun": mpiv,
    "loadavg_before": load0, "loadavg_after": load1,
    "input_bytes": b,
    "cp_seconds": cps, "plain_seconds": plain, "n1_seconds": n1, "n2_seconds": n2,
    "mpirun_start_seconds": st, "mpirun_start_median_s": med(st),
    "cp_median_s": med(cps), "plain_median_s": med(plain),
    "n1_median_s": med(n1), "n2_median_s": med(n2),
    "speedup_n1_to_n2": med(n1) / med(n2),
    "n2_vs_cp": med(n2) / med(cps),
    # the conversion alone: MPI's start and end (mpirun -n 2 bfp convert --help) taken off
    "speedup_n1_to_n2_without_start": (med(n1) - med(st)) / max(med(n2) - med(st), 1e-9),
    "plain_cpu_seconds": cpu,
    "plain_input_gb_per_s": b / med(plain) / 1e9,
    "plain_input_gb_per_cpu_s": b / med(cpu) / 1e9,
    "n1_input_gb_per_s": b / med(n1) / 1e9,
    "n2_input_gb_per_s": b / med(n2) / 1e9,
    "cp_gb_per_s": b / med(cps) / 1e9,
}
json.dump(r, open(out, "w"), indent=2)
print(json.dumps(r, indent=2))
PY
