"""Time torch.matmul (cuBLAS bf16) on the shapes of gpu_gemm's JSON and write
the committed result: speedup = torch bf16 time / bfp time.

    python3 bench/peer_gemm_torch.py gpu_gemm.json h200-gemm.json

Weights rotate over enough copies (>= 200 MB) that L2 does not hold them,
as in gpu_gemm. Without torch, the direct cublasGemmEx time stays."""
import json
import os
import subprocess
import sys


def time_torch(shapes):
    import torch
    out = {}
    dev = "cuda"
    for (m, n, k) in shapes:
        rot = max(1, (200 << 20) // (n * k * 2) + 1) if n * k * 2 < (200 << 20) else 1
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.05 for _ in range(rot)]
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        for i in range(3):
            torch.matmul(x, ws[i % rot].t())
        torch.cuda.synchronize()
        times = []
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(7):
            a.record()
            for i in range(20):
                torch.matmul(x, ws[i % rot].t())
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000 / 20)
        times.sort()
        out[(m, n, k)] = times[len(times) // 2]
        del ws, x
        torch.cuda.empty_cache()
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    doc = json.load(open(src))
    shapes = sorted({(r["M"], r["N"], r["K"]) for r in doc["results"]})
    try:
        peer = time_torch(shapes)
        peer_name = "torch.matmul"
    except Exception as e:  # no torch: keep gpu_gemm's own cublasGemmEx time
        print("peer_gemm_torch: torch unavailable (%s); keeping cublasGemmEx times" % e)
        peer, peer_name = {}, "cublasGemmEx"
    for r in doc["results"]:
        r["cublas_direct_us"] = r["cublas_bf16_us"]
        key = (r["M"], r["N"], r["K"])
        if key in peer:
            r["cublas_bf16_us"] = round(peer[key], 2)
        r["speedup"] = round(r["cublas_bf16_us"] / r["us"], 3)
    # BFP_CODE: the commit, from the caller (the GPU machine's copy of .git can be stale)
    code = os.environ.get("BFP_CODE", "")
    try:
        code = code or subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                      capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        code = "unknown"
    out = {"date": doc["date"], "command": "bash bench/gpu.sh  (PARTS=gemm for this part only)",
           "gpu": doc["gpu"], "copy_gbps": doc.get("copy_gbps"), "baseline": peer_name,
           "code": code, "results": doc["results"]}
    json.dump(out, open(dst, "w"), indent=1)
    need = {1: 4.0, 16: 4.0, 128: 2.0, 4096: 0.9}
    print("\n%-8s %5s %6s %6s %9s %9s %8s  target" % ("format", "M", "N", "K", "us",
                                                     "bf16 us", "speedup"))
    for r in doc["results"]:
        t = need[r["M"]]
        if r["M"] in (1, 16) and r["N"] == 28672:
            t = 3.0
        if r["M"] in (1, 16) and r["K"] == 28672:
            t = None  # the issue sets no target for (8192, 28672) at small M
        ok = "" if t is None else ("ok" if r["speedup"] >= t else "below %.1fx" % t)
        print("%-8s %5d %6d %6d %9.1f %9.1f %8.2f  %s" % (r["format"], r["M"], r["N"], r["K"],
              r["us"], r["cublas_bf16_us"], r["speedup"], ok))


if __name__ == "__main__":
    main()
