#!/usr/bin/env python3
"""Split a gpu_gemm JSON's times into a fixed part and a per-byte part.

    python3 bench/gemm_fit.py bench/results/h100-gemm-small.json

For each format, m and path it fits us = fixed + weight_bytes / rate over
the shapes by least squares and prints fixed (µs), rate (GB/s), the rate
as a fraction of the run's copy bandwidth, and each shape's time beside the
fit; the file's empty-kernel floor (gpu_gemm) is printed for reference."""
import json
import sys

PATHS = ["us", "fused_us", "skinny_us", "gemv_us", "gemv_pdl_us", "gemv_cl_us", "gemv_cl_pdl_us",
         "wgmma_us", "cublas_bf16_us"]


def fit(points):
    """least squares of y = a + b x; (a, b)"""
    n = len(points)
    sx = sum(p[0] for p in points)
    sy = sum(p[1] for p in points)
    sxx = sum(p[0] * p[0] for p in points)
    sxy = sum(p[0] * p[1] for p in points)
    d = n * sxx - sx * sx
    if n < 2 or d == 0:
        return None
    b = (n * sxy - sx * sy) / d
    return (sy - b * sx) / n, b


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gemm_fit.py GEMM.json")
    with open(sys.argv[1]) as f:
        d = json.load(f)
    print(f"{d.get('gpu')}: copy {d.get('copy_gbps')} GB/s; empty kernel in a graph "
          f"{d.get('empty_kernel_us', '?')} us, GEMV-sized grid {d.get('empty_grid_us', '?')} us")
    rows = d["results"]
    keys = sorted({(r["format"], r["M"]) for r in rows})
    for fmt, m in keys:
        sel = [r for r in rows if r["format"] == fmt and r["M"] == m]
        for path in PATHS:
            pts = []
            for r in sel:
                us = r.get(path, -1)
                b = r["weight_bytes"] if path != "cublas_bf16_us" else 2 * r["N"] * r["K"]
                if us is not None and us > 0:
                    pts.append((b, us, f"{r['N']}x{r['K']}"))
            f = fit(pts)
            if not f or f[1] <= 0:
                continue
            rate = 1e-3 / f[1]  # bytes per us -> GB/s
            shapes = " ".join(f"{s}:{us:.1f}" for _, us, s in pts)
            print(f"{fmt:7} m={m:<3} {path:15} fixed {f[0]:6.2f} us  rate {rate:7.0f} GB/s "
                  f"({rate / d['copy_gbps']:.2f} of copy)  {shapes}")


if __name__ == "__main__":
    main()
