#!/usr/bin/env python3
"""Per matmul call, what the decoder's linears take beyond streaming their
weights at the copy rate, from an e2e_torch.py result (issue #22).

For bf16 and each format: the linears' time a step (the run less the floor
run), less the weight bytes over the run's copy_gbps, over the matmul calls a
step (layers x 4 fused or 7 unfused, + lm_head). And what issue #22's bar
(2.5x bf16's tokens/s at batch 1, 2x at 16) leaves each format per call at
that rate: bf16's step over the target, less the floor and the streaming.
A format that streams below the copy rate has less.

    python3 bench/e2e_budget.py bench/results/h100-e2e-00f4254.json
    python3 bench/e2e_budget.py RESULT.json 4212.5   # copy GB/s for a file without it
"""
import json
import sys

FLOOR = "floor (no linears)"


def us_beyond_copy(ms: float, weight_bytes: float, calls: int, copy_gbps: float) -> float:
    """Microseconds per matmul call of `ms` of linear time beyond streaming
    weight_bytes at copy_gbps (e2e_torch.py writes the same figure)."""
    return 1e3 * (ms - weight_bytes / (copy_gbps * 1e6)) / calls


def main(path: str, copy_gbps: str = "") -> int:
    d = json.load(open(path))
    runs, cfg, gbps = d["runs"], d["config"], d.get("copy_gbps") or float(copy_gbps or 0)
    if FLOOR not in runs or not gbps:
        print(f"e2e_budget: {path} has no floor run or no copy_gbps", file=sys.stderr)
        return 2
    # files before linear_calls: layers x (4 fused or 7) + lm_head
    calls = runs["bf16"].get("linear_calls") or cfg["layers"] * (4 if cfg.get("fused") else 7) + 1
    print(f"{path}: {d.get('device')}, code {d.get('code')}, copy {gbps:.0f} GB/s, "
          f"{calls} matmul calls a step")
    for b, target in ((1, 2.5), (16, 2.0)):
        k = f"decode_b{b}"
        floor = runs[FLOOR][k]["ms_per_step"]
        bf16 = runs["bf16"][k]["ms_per_step"]
        for name, r in runs.items():
            if name == FLOOR or k not in r:
                continue
            lin, wb = r[k]["ms_per_step"] - floor, r["linear_weight_bytes"]
            line = (f"  batch {b:2d} {name:>10}: linears {lin:.3f} ms, at copy rate "
                    f"{wb / (gbps * 1e6):.3f} ms, {us_beyond_copy(lin, wb, calls, gbps):6.2f} "
                    "us per call beyond")
            if name != "bf16":
                allow = us_beyond_copy(bf16 / target - floor, wb, calls, gbps)
                line += f"; {target}x bf16 allows {allow:6.2f} us per call"
            print(line)
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print("usage: e2e_budget.py RESULT.json [COPY_GBPS]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
