#!/usr/bin/env python3
"""GPU check of the torch ops (issue #22): run on a CUDA machine with bfp built with CUDA.

CUDA planes, decodes and fake_quant equal the CPU ones bit for bit; the
CUDA matmul (bfp_cuda_matmul for its formats, else decode + torch) stays
within the same rounding bound of the float64 product as the CPU op (tests/
python/test_torch_ops.py); a quantized model compiled with CUDA graphs
(mode="reduce-overhead") gives its eager output. Exit 0 when all hold.

    PYTHONPATH=build/python python bench/torch_cuda_check.py
"""
import sys

import torch

import bfp
import bfp.nn  # noqa: F401


def bound(x, w, y64):
    k = x.shape[-1]
    e = (k + 1) * 2.0 ** -24 * (x.double().abs() @ w.double().abs().t())
    return 2.0 ** -8 * (y64.abs() + e) + e


def main() -> int:
    if not (torch.cuda.is_available() and bfp.cuda_available()):
        print("torch_cuda_check: needs a GPU and bfp built with CUDA", file=sys.stderr)
        return 2
    bad = 0
    g = torch.Generator().manual_seed(0)
    for fmt in ["mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4", "mxfp6_e2m3", "mxfp8_e4m3"]:
        x = torch.randn(64, 512, generator=g)
        gp = torch.ops.bfp.quantize(x.cuda(), fmt)
        cp = torch.ops.bfp.quantize(x, fmt)
        same = all(torch.equal(a.cpu(), b) for a, b in zip(gp, cp))
        dg = torch.ops.bfp.dequantize(*gp, fmt, [64, 512], -1, torch.bfloat16)
        dc = torch.ops.bfp.dequantize(*cp, fmt, [64, 512], -1, torch.bfloat16)
        same &= torch.equal(dg.cpu(), dc)
        fq = torch.ops.bfp.fake_quant(x.cuda(), fmt, -1, "default", 0, "", False, False)
        same &= torch.equal(fq.cpu(), torch.ops.bfp.fake_quant(x, fmt, -1, "default", 0, "",
                                                               False, False))
        print(f"{fmt}: quantize/dequantize/fake_quant CUDA == CPU: {same}")
        bad += not same
        n, k = 384, 512
        w = torch.randn(n, k, generator=g)
        wp = torch.ops.bfp.quantize(w.cuda(), fmt)
        wq = torch.ops.bfp.dequantize(*[p.cpu() for p in wp], fmt, [n, k], -1, torch.float32)
        for m in (1, 16, 48, 200, 600):
            xb = torch.randn(m, k, generator=g).bfloat16()
            y = torch.ops.bfp.matmul(xb.cuda(), *wp, None, fmt, n, k, "bf16").cpu()
            y64 = xb.double() @ wq.double().t()
            ok = bool(((y.double() - y64).abs() <= bound(xb, wq, y64)).all())
            print(f"{fmt}: matmul m={m}: within bound: {ok}")
            bad += not ok
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 256)).cuda().bfloat16()
    bfp.quantize_model(mlp, "mxfp4+")
    x = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        eager = mlp(x)
        c = torch.compile(mlp, fullgraph=True, mode="reduce-overhead")
        outs = [c(x).clone() for _ in range(4)]
    ok = all(torch.equal(o, eager) for o in outs)
    print(f"compiled (CUDA graphs) == eager: {ok}")
    bad += not ok
    sd = {k: v.cpu() for k, v in mlp.state_dict().items() if isinstance(v, torch.Tensor)}
    ok = all(v.device.type == "cpu" for v in sd.values()) and mlp[0].codes.is_cuda
    print(f"buffers on the GPU after .cuda(): {ok}")
    bad += not ok
    print("FAILED" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
