"""The matmul peers a user would pick instead of bfp, timed the way the C
benchmarks time bfp (bench_gpu.cuh): weights rotate over enough copies
(>= 200 MB) that L2 does not hold them, and each time is the median over 7
replays of one CUDA graph of 20 calls, per call, in µs. -1: the peer failed
on that shape (the reason is printed).

- cuBLAS bf16 (torch.matmul)
- cuBLASLt FP8 E4M3 per-tensor (torch._scaled_mm, x and W prepared beforehand)
- cuBLASLt FP8 E4M3 with fp32 scales per row and 128 columns of K on both
  operands (torch._scaled_mm's BlockWise1x128 pair, DeepSeek-style; cuBLAS >=
  12.9, compute capability 9.0 only)
- tinygemm int4, group 128 (torch.ops.aten._weight_int4pack_mm)
- gemlite A16W4 (PyPI, Triton): int4 group 64, and MXFP4 (A16W4_MXFP)

bench/peer_gemm_torch.py (weight-only matmul) and bench/peer_gemm_fp8_torch.py
(quantized x) use them."""
import torch

DEV = "cuda"


def capture(warm, body):
    """(graph, body()'s result): warm() on a side stream first (torch's idiom:
    lazy init and autotuning stay out of the capture), then body() captured"""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        warm()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = body()
    return g, out


def graph_us(fn, calls=20, reps=7):
    """fn(i) for i < calls captured as one CUDA graph (fn(0), fn(1) on a side
    stream first), the median replay per call in µs"""
    def run(n):
        for i in range(n):
            fn(i)
    g, _ = capture(lambda: run(2), lambda: run(calls))
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(reps):
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        t.append(a.elapsed_time(b) * 1000.0 / calls)
    t.sort()
    return t[len(t) // 2]


def rotation(nbytes):
    return 1 if nbytes >= (200 << 20) else (200 << 20) // nbytes + 1


def _first_line(e):
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def guarded(name, m, n, k, timer):
    """timer() or -1 with the reason printed, so one failing peer leaves the rest"""
    try:
        return timer()
    except Exception as e:  # noqa: BLE001
        print("peer %s m %d n %d k %d failed: %s" % (name, m, n, k, _first_line(e)))
        return -1.0
    finally:
        torch.cuda.empty_cache()


def time_bf16(m, n, k):
    rot = rotation(n * k * 2)
    ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) * 0.05 for _ in range(rot)]
    x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    return graph_us(lambda i: torch.matmul(x, ws[i % rot].t()))


def time_scaled_mm(m, n, k):
    rot = rotation(n * k)
    f8 = torch.float8_e4m3fn
    ws = [(torch.randn(n, k, device=DEV) * 0.05).to(f8) for _ in range(rot)]
    x = torch.randn(m, k, device=DEV).to(f8)
    sa = torch.tensor(1.0, device=DEV)
    sb = torch.tensor(1.0, device=DEV)
    return graph_us(lambda i: torch._scaled_mm(x, ws[i % rot].t(), scale_a=sa, scale_b=sb,
                                               out_dtype=torch.bfloat16))


def time_scaled_mm_1x128(m, n, k):
    rot = rotation(n * k)
    f8 = torch.float8_e4m3fn
    kb = (k + 127) // 128
    ws = [(torch.randn(n, k, device=DEV) * 0.05).to(f8) for _ in range(rot)]
    x = torch.randn(m, k, device=DEV).to(f8)
    # cuBLASLt reads both scale arrays outer-dimension-major: [kb][m] and [kb][n]
    sa = torch.rand(kb, m, device=DEV).add_(0.5).t()
    sb = torch.rand(kb, n, device=DEV).add_(0.5)
    return graph_us(lambda i: torch._scaled_mm(x, ws[i % rot].t(), scale_a=sa, scale_b=sb,
                                               out_dtype=torch.bfloat16))


def time_tinygemm(m, n, k, group=128):
    rot = rotation(n * k // 2)
    ws, szs = [], []
    for _ in range(rot):
        nib = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=DEV)
        ws.append(torch.ops.aten._convert_weight_to_int4pack(nib, 8))
        szs.append(torch.randn(k // group, n, 2, device=DEV, dtype=torch.bfloat16) * 0.01)
    x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)

    def run(i):
        return torch.ops.aten._weight_int4pack_mm(x, ws[i % rot], group, szs[i % rot])
    slow = m >= 1024  # tinygemm takes tens of ms there: fewer calls
    return graph_us(run, calls=3 if slow else 20, reps=3 if slow else 7)


def _gemlite_layers(kind, n, k, rot):
    import gemlite
    from gemlite.helper import A16W4_MXFP
    layers = []
    for _ in range(rot):
        if kind == "int4_g64":
            g = 64
            lin = gemlite.GemLiteLinear(4, group_size=g, in_features=k, out_features=n,
                                        input_dtype=gemlite.DType.BF16,
                                        output_dtype=gemlite.DType.BF16)
            wq = torch.randint(0, 16, (n, k), dtype=torch.uint8, device=DEV)
            sc = torch.rand(n, k // g, device=DEV, dtype=torch.bfloat16) * 0.01 + 0.001
            zr = torch.full((n, k // g), 7.5, device=DEV, dtype=torch.bfloat16)
            lin.pack(wq, sc, zr, None)
        else:  # mxfp4, quantized by gemlite from a random bf16 linear
            src = torch.nn.Linear(k, n, bias=False, device=DEV, dtype=torch.bfloat16)
            lin = A16W4_MXFP(device=DEV, dtype=torch.bfloat16).from_linear(src)
        layers.append(lin)
    return layers


def time_gemlite(m, n, k, kind):
    rot = rotation(n * k // 2)
    layers = _gemlite_layers(kind, n, k, rot)
    x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    for lin in layers[:2]:  # autotune (or the shipped config) outside the capture
        lin(x)
    torch.cuda.synchronize()
    slow = m >= 1024
    return graph_us(lambda i: layers[i % rot](x), calls=5 if slow else 20, reps=5 if slow else 7)


PEERS = {  # name in the JSON: timer(m, n, k)
    "cublas_bf16": time_bf16,
    "cublaslt_fp8_e4m3_per_tensor": time_scaled_mm,
    "cublaslt_fp8_e4m3_block1x128": time_scaled_mm_1x128,
    "tinygemm_int4_g128": time_tinygemm,
    "gemlite_a16w4_int4_g64": lambda m, n, k: time_gemlite(m, n, k, "int4_g64"),
    "gemlite_a16w4_mxfp4": lambda m, n, k: time_gemlite(m, n, k, "mxfp4"),
}


def time_peers(shapes, names=None):
    """[{"peer", "M", "N", "K", "us"}] for every (m, n, k) and peer"""
    out = []
    for (m, n, k) in shapes:
        for name, timer in PEERS.items():
            if names and name not in names:
                continue
            us = guarded(name, m, n, k, lambda: timer(m, n, k))
            out.append({"peer": name, "M": m, "N": n, "K": k, "us": round(us, 2)})
            print("peer %-30s m %5d n %6d k %6d: %9.1f us" % (name, m, n, k, us), flush=True)
    return out


def main():
    """python3 bench/torch_peers.py OUT.json PEER[,PEER] MxNxK[,MxNxK...]: the
    named peers on the shapes, written as {"command", "date", "gpu", "torch",
    "peers": [...]}"""
    import datetime
    import json
    import os
    import sys
    dst, names, shapes = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    shapes = [tuple(int(v) for v in s.split("x")) for s in shapes]
    peers = time_peers(shapes, names)
    json.dump({"command": "python3 " + " ".join(sys.argv),
               "date": datetime.date.today().isoformat(),
               "code": os.environ.get("BFP_CODE", "unknown"),
               "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cuda": torch.version.cuda,
               "peers": peers}, open(dst, "w"), indent=1)


if __name__ == "__main__":
    main()
