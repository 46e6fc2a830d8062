#!/usr/bin/env python3
"""Sum ncu's per-instruction warp-state samples (the source page, CSV, as
bench/stall_source.sh writes it) into what a reader can act on: the columns
the page has, the total samples, the instructions that hold the most, and
the samples of each stretch of code between waits, barriers and tensor-core
instructions, in address order.

    python3 bench/stall_source.py PAGE.csv [--top N]
"""
import argparse
import csv
import re
import sys

# instructions that end a stretch: where warps meet something outside themselves
BOUNDARY = re.compile(r"\b(HGMMA|HMMA|WARPGROUP|SYNCS|BAR|DEPBAR|MEMBAR|RED|ATOM|EXIT)\b")


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read_page(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # the header is the first row that names an address column
    for i, row in enumerate(rows):
        if any(c.strip().strip('"') == "Address" for c in row):
            return row, rows[i + 1:]
    raise SystemExit(f"stall_source: no 'Address' header in {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    head, body = read_page(a.page)
    col = {name: i for i, name in enumerate(head)}
    src = col.get("Source")
    samp = next((i for n, i in col.items() if "Sampling" in n and "All" in n), None)
    if src is None or samp is None:
        print("columns:", head)
        raise SystemExit("stall_source: no Source or sampling column")
    reasons = [(n, i) for n, i in col.items() if "stall" in n.lower() and "Sampling" not in n]
    print("columns:", "; ".join(head))
    rows = []
    for r in body:
        if len(r) <= max(src, samp):
            continue
        s = number(r[samp])
        if s is None:
            continue
        rows.append((r[col["Address"]], r[src].strip(), s,
                     {n: number(r[i]) or 0.0 for n, i in reasons}))
    total = sum(s for _, _, s, _ in rows) or 1.0
    print(f"instructions {len(rows)}, samples {total:.0f}")
    print(f"\n== top {a.top} instructions by samples (share of all)")
    for addr, text, s, rs in sorted(rows, key=lambda x: -x[2])[: a.top]:
        why = ", ".join(f"{n.split('(')[0].strip()} {v:.0f}"
                        for n, v in sorted(rs.items(), key=lambda x: -x[1])[:3] if v)
        print(f"{s / total:6.1%} {addr:>8} {text[:60]:60} {why}")
    print("\n== stretches (address order; a stretch ends at a wait, barrier or MMA)")
    start, acc, n = None, 0.0, 0
    for addr, text, s, _ in rows:
        start = start or addr
        acc += s
        n += 1
        if BOUNDARY.search(text):
            if acc / total >= 0.002:
                print(f"{acc / total:6.1%} {start:>8}..{addr:<8} {n:4d} instr, ends {text[:50]}")
            start, acc, n = None, 0.0, 0
    if acc / total >= 0.002:
        print(f"{acc / total:6.1%} {start:>8}..end {n:4d} instr")
    return 0


if __name__ == "__main__":
    sys.exit(main())
