"""peer_torch.py - the peer for bench/gpu_bench: MXFP4 and NVFP4 quantizers
written the way a PyTorch user would, compiled with torch.compile, timed the
same way (CUDA events, median) on the same shapes, bf16 input.

    python3 bench/peer_torch.py OUT.json COPY_GBPS

Bytes moved are counted as for gpu_bench: input + packed codes + scales
(+ the NVFP4 tensor scale). These quantizers round like the spec except on
exact ties (they are the speed peer, not a reference)."""
import json
import sys

import torch

E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def e2m1_codes(y, negative):
    """E2M1 magnitude index of y >= 0 (already saturated at 6) plus sign."""
    mag = torch.zeros_like(y, dtype=torch.int32)
    for t in E2M1_MIDPOINTS:
        mag = mag + (y > t).to(torch.int32)
    return (mag | (negative.to(torch.int32) << 3)).to(torch.uint8)


def pack_nibbles(codes):
    c = codes.reshape(codes.shape[0], -1, 2)
    return c[..., 0] | (c[..., 1] << 4)


def mxfp4_quantize(x):
    m, k = x.shape
    xb = x.float().reshape(m, k // 32, 32)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    e = torch.floor(torch.log2(amax.clamp(min=2.0 ** -126))) - 2
    e = e.clamp(-127, 127)
    y = (xb.abs() * torch.exp2(-e)).clamp(max=6.0)
    codes = e2m1_codes(y, xb < 0).reshape(m, k)
    scales = (e + 127).to(torch.uint8).reshape(m, k // 32)
    return pack_nibbles(codes), scales


def nvfp4_quantize(x):
    m, k = x.shape
    xf = x.float()
    amax = xf.abs().amax()
    s_enc = torch.where(amax > 0, 2688.0 / amax, torch.ones_like(amax))
    t = (xf * s_enc).reshape(m, k // 16, 16)
    bmax = t.abs().amax(dim=-1, keepdim=True)
    sb = (bmax / 6.0).clamp(max=448.0).to(torch.float8_e4m3fn)
    sbf = sb.float()
    y = torch.where(sbf > 0, t.abs() / sbf, torch.zeros_like(t)).clamp(max=6.0)
    codes = e2m1_codes(y, t < 0).reshape(m, k)
    return pack_nibbles(codes), sb.view(torch.uint8).reshape(m, k // 16), s_enc


def time_us(fn, args_list, batch, reps):
    for i in range(3):
        fn(args_list[i % len(args_list)])
    torch.cuda.synchronize()
    times = []
    k = 0
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn(args_list[k % len(args_list)])
            k += 1
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / batch)
    times.sort()
    return times[len(times) // 2]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "peer_torch.json"
    copy_gbps = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    torch.manual_seed(0)
    rows_out = []
    impls = {
        "mxfp4": (torch.compile(mxfp4_quantize, dynamic=False), 32),
        "nvfp4": (torch.compile(nvfp4_quantize, dynamic=False), 16),
    }
    for rows, cols in ((16384, 16384), (16, 8192)):
        n = rows * cols
        nbuf = 1 if n * 2 >= (256 << 20) else min(512, (160 << 20) // (n * 2) + 1)
        xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        batch, reps = (5, 11) if nbuf == 1 else (100, 9)
        for name, (fn, block) in impls.items():
            us = time_us(fn, xs, batch, reps)
            nbytes = n * 2 + n // 2 + n // block + (4 if name == "nvfp4" else 0)
            gbps = nbytes / us / 1e3
            row = {"format": name, "op": "quantize", "dtype": "bf16", "rows": rows,
                   "cols": cols, "us": round(us, 3), "bytes": nbytes, "gbps": round(gbps, 1),
                   "ratio_to_copy": round(gbps / copy_gbps, 4) if copy_gbps else None,
                   "impl": "torch.compile (PyTorch %s)" % torch.__version__}
            rows_out.append(row)
            print("peer %-22s %-10s %6dx%-6d %10.2f us %8.1f GB/s %6.1f%%" % (
                "torch.compile " + name, "quantize", rows, cols, us, gbps,
                100.0 * gbps / copy_gbps if copy_gbps else 0.0), flush=True)
        del xs
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
