#!/usr/bin/env python3
"""bench/cpu_targets.py - issue #4's CPU targets from `bfp bench`, in one command.

    python3 bench/cpu_targets.py [--bfp build/bfp] [--rounds 3] [--out cpu-targets.json]

Runs `bfp bench --json` on one thread and on two, alternated, --rounds times
each (a shared machine's memcpy moves by tens of percent between runs, so a
single run says little), and prints every format's median ratio to memcpy
(GB/s of input + output over memcpy's read + write, both from the same run)
against the issue's targets: 4-bit quantize >= 50% and dequantize >= 60%,
6/8-bit >= 35% and >= 45%, from / to float32 and bfloat16, one thread; two
threads >= 1.7x one thread (median GB/s). Writes every run to --out.
"""
import argparse
import json
import statistics
import subprocess
import sys

TARGET = {(4, "quantize"): 0.50, (4, "dequantize"): 0.60,
          (6, "quantize"): 0.35, (6, "dequantize"): 0.45,
          (8, "quantize"): 0.35, (8, "dequantize"): 0.45}
SCALING = 1.7


def bits(fmt):
    if "fp8" in fmt or "int8" in fmt:
        return 8
    return 6 if "fp6" in fmt else 4


def bench(bfp, threads, extra):
    out = subprocess.run([bfp, "bench", "--json", "--threads", str(threads)] + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bfp", default="build/bfp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="cpu-targets.json")
    ap.add_argument("--reps", default="5", help="bfp bench --reps")
    ap.add_argument("-f", "--formats", default=None, help="bfp bench -f")
    a = ap.parse_args()
    extra = ["--reps", a.reps] + (["-f", a.formats] if a.formats else [])

    runs = {1: [], 2: []}
    for r in range(a.rounds):
        for t in (1, 2):
            print("round %d, %d thread(s)" % (r + 1, t), file=sys.stderr)
            runs[t].append(bench(a.bfp, t, extra))

    def key(rec):
        return rec["format"], rec["op"], rec["dtype"]

    ratio, gbps = {}, {1: {}, 2: {}}
    for t in (1, 2):
        for run in runs[t]:
            for rec in run:
                gbps[t].setdefault(key(rec), []).append(rec["gbps"])
                if t == 1:
                    ratio.setdefault(key(rec), []).append(rec["gbps"] / rec["memcpy_gbps"])

    met = failed = 0
    print("%-14s %-10s %-5s %8s %7s %7s %6s  %s" %
          ("format", "op", "dtype", "GB/s", "ratio", "target", "2t/1t", "verdict"))
    for k in ratio:
        f, op, dt = k
        rmed = statistics.median(ratio[k])
        g1 = statistics.median(gbps[1][k])
        scale = statistics.median(gbps[2][k]) / g1 if k in gbps[2] else float("nan")
        want = TARGET[(bits(f), op)]
        ok = rmed >= want and scale >= SCALING
        met += ok
        failed += not ok
        why = [] if ok else (["ratio"] if rmed < want else []) + (["2 threads"] if scale < SCALING else [])
        print("%-14s %-10s %-5s %8.2f %6.0f%% %6.0f%% %6.2f  %s" %
              (f, op, dt, g1, 100 * rmed, 100 * want, scale, "ok" if ok else "below: " + ", ".join(why)))
    print("%d met, %d not met (of %d; medians of %d rounds)" % (met, failed, met + failed, a.rounds))
    json.dump({"command": " ".join(sys.argv), "rounds": a.rounds,
               "runs": {str(t): runs[t] for t in runs}}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
