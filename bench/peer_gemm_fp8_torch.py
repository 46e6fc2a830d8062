"""Peers of the quantized-x matmul (bench/gpu_gemm_xq.cu), timed in the same
run on the shapes of its JSON, and the committed result:

    python3 bench/peer_gemm_fp8_torch.py gpu_gemm_xq.json h200-gemm-fp8.json

- torch.matmul bf16 (cuBLAS): cublas_bf16_us
- torch._scaled_mm, FP8 E4M3 x and W per-tensor scaled, prepared beforehand
  (cuBLASLt): scaled_mm_fp8_us
- Triton tl.dot_scaled (the NVFP4 tutorial's op; on Hopper Triton upcasts
  the e2m1 operands): bf16 x e2m1 (dot_scaled_bf16_e2m1_us) and e2m1 x e2m1
  (dot_scaled_e2m1_e2m1_us), the best of a few tile configs.
Timing as gpu_gemm_xq: weights rotate over >= 200 MB of copies, median over
7 replays of a CUDA graph of 20 calls. -1: the peer failed on that shape
(the reason is printed)."""
import json
import os
import subprocess
import sys

import torch

from torch_peers import DEV, graph_us, guarded, rotation, time_bf16, time_scaled_mm


try:
    import triton
    import triton.language as tl

    @triton.jit
    def dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K,
                          A_FMT: tl.constexpr, A_DIV: tl.constexpr, BM: tl.constexpr,
                          BN: tl.constexpr, BK: tl.constexpr):
        """c[M, N] = a[M, K] . b[N, K]^T; b e2m1 packed 2 per byte along K with
        E8M0 scales [N, K/32]; a bf16 [M, K] or e2m1 like b."""
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_n = pid_n * BN + tl.arange(0, BN)
        offs_ak = tl.arange(0, BK // A_DIV)
        offs_bk = tl.arange(0, BK // 2)
        offs_s = tl.arange(0, BK // 32)
        mm = offs_m < M
        nm = offs_n < N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + offs_m[:, None] * (K // A_DIV) + (k // A_DIV + offs_ak)[None, :],
                        mask=mm[:, None], other=0)
            b = tl.load(b_ptr + offs_n[None, :] * (K // 2) + (k // 2 + offs_bk)[:, None],
                        mask=nm[None, :], other=0)
            bs = tl.load(bs_ptr + offs_n[:, None] * (K // 32) + (k // 32 + offs_s)[None, :],
                         mask=nm[:, None], other=127)
            if A_FMT == "e2m1":
                sa = tl.load(as_ptr + offs_m[:, None] * (K // 32) + (k // 32 + offs_s)[None, :],
                             mask=mm[:, None], other=127)
                acc = tl.dot_scaled(a, sa, "e2m1", b, bs, "e2m1", acc=acc)
            else:
                acc = tl.dot_scaled(a, None, "bf16", b, bs, "e2m1", acc=acc)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16),
                 mask=mm[:, None] & nm[None, :])

    HAVE_TRITON = True
except Exception as e:  # noqa: BLE001
    print("peer_gemm_fp8_torch: no triton (%s)" % e)
    HAVE_TRITON = False

CONFIGS = [  # (BM, BN, BK, warps, stages)
    (16, 64, 256, 4, 3),
    (64, 128, 128, 4, 3),
    (128, 128, 128, 8, 3),
]


def time_dot_scaled(m, n, k, a_fmt):
    rot = rotation(n * k // 2)
    ws = [torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=DEV) for _ in range(rot)]
    wss = [torch.randint(120, 130, (n, k // 32), dtype=torch.uint8, device=DEV)
           for _ in range(rot)]
    if a_fmt == "e2m1":
        a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device=DEV)
        sa = torch.randint(120, 130, (m, k // 32), dtype=torch.uint8, device=DEV)
    else:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        sa = a  # unused
    c = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    best, why = -1.0, ""
    for (bm, bn, bk, nw, ns) in CONFIGS:
        if m >= 128 and bm == 16:
            continue
        if m <= 16 and bm > 64:
            continue
        grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))

        def run(i, bm=bm, bn=bn, bk=bk, nw=nw, ns=ns, grid=grid):
            dot_scaled_kernel[grid](a, sa, ws[i % rot], wss[i % rot], c, m, n, k, A_FMT=a_fmt,
                                    A_DIV=2 if a_fmt == "e2m1" else 1, BM=bm, BN=bn, BK=bk,
                                    num_warps=nw, num_stages=ns)
        try:
            t = graph_us(run)
            best = t if best < 0 else min(best, t)
        except Exception as e:  # noqa: BLE001
            why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    if best < 0:
        print("dot_scaled %s m %d n %d k %d failed: %s" % (a_fmt, m, n, k, why))
    del ws, wss, a, c
    return best


def main():
    src, dst = sys.argv[1], sys.argv[2]
    text = open(src).read()
    try:
        doc = json.loads(text)
    except ValueError:  # gpu_gemm_xq cut short: close its list
        doc = json.loads(text + "\n]}")
        print("peer_gemm_fp8_torch: %s was cut short (%d results)" % (src, len(doc["results"])))
    shapes = sorted({(r["M"], r["N"], r["K"]) for r in doc["results"]})
    peers = {}
    for (m, n, k) in shapes:
        p = {"cublas_bf16_us": guarded("cublas_bf16", m, n, k, lambda: time_bf16(m, n, k)),
             "scaled_mm_fp8_us": guarded("scaled_mm", m, n, k, lambda: time_scaled_mm(m, n, k))}
        if HAVE_TRITON and os.environ.get("PEER_TRITON", "1") != "0":
            p["dot_scaled_bf16_e2m1_us"] = time_dot_scaled(m, n, k, "bf16")
            p["dot_scaled_e2m1_e2m1_us"] = time_dot_scaled(m, n, k, "e2m1")
        peers[(m, n, k)] = p
        print("peers m %d n %d k %d: %s" % (m, n, k, {a: round(b, 1) for a, b in p.items()}))
        sys.stdout.flush()
        torch.cuda.empty_cache()
    for r in doc["results"]:
        p = peers[(r["M"], r["N"], r["K"])]
        for a, b in p.items():
            r[a] = round(b, 2)
        r["speedup_vs_bf16"] = round(p["cublas_bf16_us"] / r["us"], 3)
        if p["scaled_mm_fp8_us"] > 0:
            r["speedup_vs_scaled_mm"] = round(p["scaled_mm_fp8_us"] / r["us"], 3)
            if r.get("bf16x_us", -1) > 0:  # the bf16-x route (x decoded to bf16 first)
                r["bf16x_speedup_vs_scaled_mm"] = round(p["scaled_mm_fp8_us"] / r["bf16x_us"], 3)
    code = os.environ.get("BFP_CODE", "")
    if not code:
        try:
            code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip() or "unknown"
        except OSError:
            code = "unknown"
    out = {"date": doc["date"],
           "command": os.environ.get("BENCH_COMMAND", "gpu_gemm_xq + peer_gemm_fp8_torch.py"),
           "gpu": doc["gpu"], "baseline": "torch.matmul", "code": code,
           "torch": torch.__version__,
           "triton": triton.__version__ if HAVE_TRITON else None,
           "results": doc["results"]}
    json.dump(out, open(dst, "w"), indent=1)
    print("\n%-8s %-11s %5s %6s %6s %9s %9s %9s %9s %9s %9s" % (
        "W", "x", "M", "N", "K", "us", "bf16x", "bf16", "fp8_smm", "ds_bf16", "ds_e2m1"))
    for r in doc["results"]:
        print("%-8s %-11s %5d %6d %6d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f" % (
            r["format"], r["x_format"], r["M"], r["N"], r["K"], r["us"], r.get("bf16x_us", -1),
            r["cublas_bf16_us"], r["scaled_mm_fp8_us"], r.get("dot_scaled_bf16_e2m1_us", -1),
            r.get("dot_scaled_e2m1_e2m1_us", -1)))


if __name__ == "__main__":
    main()
