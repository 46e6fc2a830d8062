#!/usr/bin/env python3
"""What issue #23's roofline bar (70% of the memory roofline at 1 and 16
tokens) leaves a grouped call beyond streaming its experts' bytes, from a
gpu_moe result (bench/results/*moe*.json): per cell, the bytes of the experts
used, their time at the run's copy rate, the time 70% of it allows, and so
the microseconds a call may spend beyond the streaming, against what the
grouped call took beyond it; and, where the file has it (gpu_moe's read_us),
what a kernel that only reads the same experts' bytes took: the floor under
any kernel for that call, as a fraction of the roofline.

    python3 bench/moe_budget.py bench/results/h100-moe-00f4254.json [COPY_GBPS]

COPY_GBPS overrides the file's copy_bandwidth_GBps (e.g. another GPU's rate,
to ask what the same bytes would allow there).
"""
import json
import sys


def main(path: str, copy: str = "") -> int:
    d = json.load(open(path))
    gbps = float(copy) if copy else d["copy_bandwidth_GBps"]
    print(f"{path}: {d.get('device')}, code {d.get('code')}; copy rate {gbps:.0f} GB/s")
    for r in d["results"]:
        if r["tokens"] not in (1, 16) or r["format"] != "mxfp4":
            continue
        stream = r["bytes_used"] / (gbps * 1e3)  # us at the copy rate
        allow = stream / 0.70 - stream
        print(f"  {r['model']:>12} {r['proj']:>7} T={r['tokens']:<2} {r['routing']:>7}: "
              f"{r['bytes_used'] / 1e6:6.1f} MB, {stream:5.1f} us at copy rate; 70% allows "
              f"{allow:4.1f} us beyond, the grouped call took {r['grouped_us'] - stream:5.1f} "
              f"beyond ({r['grouped_us']:.1f} us)"
              + (f"; a read alone {r['read_us']:.1f} us, {r['read_frac_copy_bw']:.2f} of it"
                 if r.get("read_us", -1) > 0 and not copy else ""))
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print("usage: moe_budget.py RESULT.json [COPY_GBPS]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
