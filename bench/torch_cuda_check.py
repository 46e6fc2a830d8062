#!/usr/bin/env python3
"""GPU check of the torch ops and bfp.nn.Linear (issue #22): run on a CUDA machine with
bfp built with CUDA.

* CUDA planes, decodes and fake_quant equal the CPU ones bit for bit;
* packed weights: the GPU decode (torch.ops.bfp.unpack) equals the CPU one
  bit for bit; torch.ops.bfp.matmul_packed (bfp_cuda_matmul, every AUTO
  path: m = 1 .. 600) and the plane matmul stay within the rounding bound of
  the float64 product that the CPU op is held to (tests/python/test_torch_ops.py);
* a quantized MLP: torch.compile(mode="reduce-overhead") with no cudagraph
  skip, and a manual torch.cuda.graph capture (decode m = 8 and prefill
  m = 600, the dequantize + cuBLAS path), agree with eager within that
  bound, with no allocation of a workspace inside the op;
* state_dict on CUDA through torch.save / torch.load into a fresh module,
  and .to("cuda") of a module built on the CPU: the same packed bytes and
  outputs within the bound;
* quantized activations (x_format, bfp_cuda_matmul_xq): for every kernel
  pair, m = 1 .. 300, the CUDA op against the C reference
  (bfp_matmul_ref_q of W's planes and x's bfp_quantize planes): relative
  error < max(2e-3, bf16's own rounding of the reference + 1e-4), as
  test_cuda_matmul_xq; a pair without a kernel equals the CPU op within two
  bf16 roundings; bfp.nn.Linear modules with x_format (NVFP4's tensor scale
  on the host) captured by torch.cuda.graph, replayed with new x;
* Linear(pdl=True) (programmatic dependent launch of the GEMV kernel): two
  chained, eager and in 20 replays of a CUDA graph, and after a
  load_state_dict right before the call, agree with pdl=False.

Exit 0 when all hold.

    PYTHONPATH=build/python python bench/torch_cuda_check.py
"""
import copy
import io
import sys

import numpy as np
import torch

import bfp
import bfp._core as core
import bfp.nn
import bfp.torch_packed as tp
import torch_peers  # bench/: the CUDA-graph capture idiom

MATMUL_FORMATS = ["mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4"]


def bound(x, w, y64):
    k = x.shape[-1]
    e = (k + 1) * 2.0 ** -24 * (x.double().abs() @ w.double().abs().t())
    return 2.0 ** -8 * (y64.abs() + e) + e


def within(y, x, w, bias=None):
    """y (bf16) against the float64 x @ w.T (+ bias), w the exact weight"""
    y64 = x.double().cpu() @ w.double().cpu().t()
    if bias is not None:
        y64 = y64 + bias.double().cpu()
    return bool(((y.double().cpu() - y64).abs() <= bound(x.cpu(), w.cpu(), y64)).all())


def close(a, b):
    """two bf16 results of one product (split-K sums meet through fp32
    atomics, so not bit for bit): within two bf16 roundings of the larger"""
    a, b = a.double().cpu(), b.double().cpu()
    tol = 2.0 ** -7 * torch.maximum(a.abs(), b.abs()) + 1e-3 * b.abs().mean()
    return bool(((a - b).abs() <= tol).all())


def check(what, ok, bad):
    print(f"{what}: {ok}")
    bad[0] += not ok


def ops(bad, g):
    for fmt in MATMUL_FORMATS + ["mxfp6_e2m3", "mxfp8_e4m3"]:
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
        check(f"{fmt}: quantize/dequantize/fake_quant CUDA == CPU", same, bad)
        n, k = 384, 520
        w = torch.randn(n, k, generator=g)
        wp = torch.ops.bfp.quantize(w.cuda(), fmt)
        wq = torch.ops.bfp.dequantize(*[p.cpu() for p in wp], fmt, [n, k], -1, torch.float32)
        packed = tp.pack(*wp, fmt, n, k) if fmt in MATMUL_FORMATS else None
        if packed is not None:
            ws = torch.zeros(tp.workspace_bytes(packed, fmt, n, k), dtype=torch.uint8,
                             device="cuda")
            wu = torch.ops.bfp.unpack(packed, fmt, n, k)
            check(f"{fmt}: unpack CUDA == CPU == dequantize",
                  torch.equal(wu.cpu(), torch.ops.bfp.unpack(packed.cpu(), fmt, n, k))
                  and torch.equal(wu.cpu().nan_to_num(7.0), wq.nan_to_num(7.0)), bad)
        for m in (1, 16, 48, 200, 600):
            xb = torch.randn(m, k, generator=g).bfloat16()
            y = torch.ops.bfp.matmul(xb.cuda(), *wp, None, fmt, n, k, "bf16")
            ok = within(y, xb, wq)
            if packed is not None:
                yp = torch.ops.bfp.matmul_packed(xb.cuda(), packed, ws, None, fmt, n, k, "bf16")
                ok &= within(yp, xb, wq)
            check(f"{fmt}: matmul (planes{', packed' if packed is not None else ''}) m={m} "
                  "within bound", ok, bad)
        if fmt == "nvfp4+":
            torch.library.opcheck(torch.ops.bfp.matmul_packed.default,
                                  (torch.randn(3, k, device="cuda").bfloat16(), packed, ws,
                                   None, fmt, n, k, "bf16"))
            print(f"{fmt}: opcheck matmul_packed on CUDA: passed")


def mlp(fmt, device, seed=1):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 256)).to(device).bfloat16()
    return bfp.quantize_model(m, fmt, exclude=())


def compiled(model, x):
    """4 calls of torch.compile(mode="reduce-overhead") and its cudagraph skips"""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    c = torch.compile(model, fullgraph=True, mode="reduce-overhead")
    outs = [c(x).clone() for _ in range(4)]
    return outs, dict(torch._dynamo.utils.counters["inductor"]).get("cudagraph_skips", 0)


def captured(model, static_x):
    """torch.cuda.graph of one call (two warm-up calls on a side stream): (graph, output)"""
    return torch_peers.capture(lambda: [model(static_x) for _ in range(2)],
                               lambda: model(static_x))


def graphs(bad):
    model = mlp("mxfp4+", "cuda")
    ws_before = [id(lin._workspace) for lin in (model[0], model[2])]
    with torch.no_grad():
        for m in (8, 600):
            x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
            eager = model(x)
            outs, skips = compiled(model, x)
            check(f"reduce-overhead m={m}: no cudagraph skip ({skips}), == eager within bound",
                  skips == 0 and all(close(o, eager) for o in outs), bad)
            # a manual capture, replayed with new x
            static_x = x.clone()
            graph, static_y = captured(model, static_x)
            static_x.copy_(torch.randn(m, 512, device="cuda", dtype=torch.bfloat16))
            graph.replay()
            check(f"torch.cuda.graph m={m}: replay with new x == eager within bound",
                  close(static_y, model(static_x)), bad)
    check("one shared workspace per device, not remade by the calls",
          ws_before == [id(lin._workspace) for lin in (model[0], model[2])]
          and model[0]._workspace is model[2]._workspace, bad)


def state_and_moves(bad):
    model = mlp("nvfp4", "cuda")
    x = torch.randn(5, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        y = model(x)
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        buf.seek(0)
        sd = torch.load(buf, weights_only=True)
        fresh = torch.nn.Sequential(bfp.nn.Linear(512, 1024, fmt="nvfp4"), torch.nn.ReLU(),
                                    bfp.nn.Linear(1024, 256, fmt="nvfp4")).cuda()
        fresh.load_state_dict(sd)
        check("state_dict on CUDA -> torch.save/load -> fresh CUDA module: same bytes, "
              "output within bound",
              torch.equal(fresh[0].packed, model[0].packed) and close(fresh(x), y), bad)
        # rewritten in place (load_state_dict copies into the same buffer):
        # the cached view is remade, with the new header's tensor scale
        other = mlp("nvfp4", "cuda", seed=2)
        ptr = fresh[0].packed.data_ptr()
        fresh.load_state_dict(other.state_dict())
        y2 = fresh(x)
        check("load_state_dict into the same CUDA buffers: the new weight's output",
              fresh[0].packed.data_ptr() == ptr and close(y2, other(x)) and not close(y2, y),
              bad)
        cpu_built = mlp("nvfp4", "cpu")
        y_cpu = cpu_built(x.cpu())
        cpu_built.to("cuda")
        check(".to('cuda') of a CPU-built module: bytes kept, CUDA output == CPU within bound",
              torch.equal(cpu_built[0].packed.cpu(), model[0].packed.cpu())
              and cpu_built[0]._workspace.is_cuda and close(cpu_built(x), y_cpu.cuda()), bad)
        w0 = cpu_built[0].dequantize()
        check("dequantize on CUDA == on the CPU", torch.equal(
            w0.cpu(), mlp("nvfp4", "cpu")[0].dequantize()), bad)


def gemv_weight(fmt, n, k, g):
    """(packed buffer, its view, the exact float32 weight) of a random n x k
    weight; keep the buffer alive while the view is used (a view holds no
    reference)"""
    wp = torch.ops.bfp.quantize(torch.randn(n, k, generator=g).cuda(), fmt)
    wq = torch.ops.bfp.dequantize(*[q.cpu() for q in wp], fmt, [n, k], -1, torch.float32)
    packed = tp.pack(*wp, fmt, n, k)
    return packed, tp._view(packed, fmt, n, k), wq


def gemv_call(v, x, n, ws, pdl_on):
    """bfp_cuda_matmul_ex on path GEMV (6) into a NaN-poisoned y, not synchronized"""
    y = torch.full((x.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    core.cuda_matmul(v.cap, x.data_ptr(), x.shape[0], 0, y.data_ptr(), ws.data_ptr(),
                     ws.numel(), 6, tp._stream(x), pdl_on)
    return y


def raw_gemv(bad, g):
    """The GEMV path called directly (bfp_cuda_matmul_ex, path GEMV) on the
    shapes the pdl check uses, with and without PDL, on a private zeroed
    workspace: y within the float64 bound and the workspace all zeros after
    each call; then two calls chained (the second's x the first's y)"""
    for fmt in MATMUL_FORMATS:
        for pdl_on in (0, 1):
            ok_y, ok_ws, ok_chain = True, True, True
            for (n, k) in ((1000, 512), (333, 1000)):
                packed, v, wq = gemv_weight(fmt, n, k, g)
                ws = torch.zeros(v.ws_max, dtype=torch.uint8, device="cuda")
                for m in (1, 3, 8, 16):
                    xb = torch.randn(m, k, generator=g).bfloat16().cuda()
                    y = gemv_call(v, xb, n, ws, pdl_on)
                    torch.cuda.synchronize()
                    ok_y &= within(y, xb.cpu(), wq)
                    ok_ws &= int(ws.count_nonzero()) == 0
            # chained: 1000 x 512 then 333 x 1000, x2 = y1, no kernel between
            n1, k1, n2 = 1000, 512, 333
            b1, v1, _ = gemv_weight(fmt, n1, k1, g)
            b2, v2, q2 = gemv_weight(fmt, n2, n1, g)
            ws = torch.zeros(max(v1.ws_max, v2.ws_max), dtype=torch.uint8, device="cuda")
            for m in (1, 5, 16):
                xb = torch.randn(m, k1, generator=g).bfloat16().cuda()
                torch.cuda.synchronize()
                y1 = gemv_call(v1, xb, n1, ws, pdl_on)
                y2 = gemv_call(v2, y1, n2, ws, pdl_on)
                torch.cuda.synchronize()
                ok_chain &= within(y2, y1.cpu(), q2) and int(ws.count_nonzero()) == 0
            check(f"{fmt}: GEMV path direct, gemv_pdl={pdl_on}: y within bound {ok_y}, "
                  f"workspace left zero {ok_ws}, chained {ok_chain}",
                  ok_y and ok_ws and ok_chain, bad)


def private_workspace(fmt, modules):
    """one zeroed workspace for these bfp.nn.Linear modules in place of the
    device's shared one, so that a check can see the calls leave it zero"""
    need = max(tp.workspace_bytes(lin.packed, fmt, lin.out_features, lin.in_features)
               for lin in modules)
    ws = torch.zeros(need, dtype=torch.uint8, device="cuda")
    for lin in modules:
        lin._workspace = ws
    return ws


def pair(model, x):
    """the two layers of model, the second's x the first's y (no kernel between)"""
    y1 = model[0](x)
    return y1, model[1](y1)


def pair_within(model, w, x, y1, y2):
    """each layer's y within the float64 bound of its own input (w: the exact weights)"""
    torch.cuda.synchronize()
    return within(y1, x.cpu(), w[0], model[0].bias) and \
        within(y2, y1.cpu(), w[1], model[1].bias)


def pdl_pair(fmt, pdl_on):
    torch.manual_seed(3)
    base = torch.nn.Sequential(torch.nn.Linear(512, 1000), torch.nn.Linear(1000, 333))
    return bfp.quantize_model(base.cuda().bfloat16(), fmt, exclude=(), pdl=pdl_on)


def pdl(bad, g):
    """Linear(pdl=True): two modules chained, each within the float64 bound
    of its own input, on a private zeroed workspace that must stay zero;
    eager, in 20 replays of a CUDA graph with new x each time, and after
    load_state_dict right before the call"""
    for fmt in MATMUL_FORMATS:
        fast = pdl_pair(fmt, True)
        ws = private_workspace(fmt, fast)
        w = [lin.dequantize().cpu() for lin in fast]
        with torch.no_grad():
            eager = all(pair_within(fast, w, x, *pair(fast, x)) for x in
                        (torch.randn(m, 512, generator=g).bfloat16().cuda()
                         for m in (1, 3, 16, 17)))
            eager_ws = int(ws.count_nonzero()) == 0
            static_x = torch.zeros(1, 512, device="cuda", dtype=torch.bfloat16)
            graph, (sy1, sy2) = captured(lambda x: pair(fast, x), static_x)
            replays = True
            for _ in range(20):
                static_x.copy_(torch.randn(1, 512, generator=g).bfloat16())
                graph.replay()
                replays &= pair_within(fast, w, static_x, sy1, sy2)
            del graph
            graph_ws = int(ws.count_nonzero()) == 0
            torch.manual_seed(5)
            other = bfp.quantize_model(torch.nn.Sequential(
                torch.nn.Linear(512, 1000), torch.nn.Linear(1000, 333)).cuda().bfloat16(),
                fmt, exclude=())
            fast.load_state_dict(other.state_dict())
            private_workspace(fmt, fast)  # loading took the shared one again
            w = [lin.dequantize().cpu() for lin in fast]
            x = torch.randn(1, 512, generator=g).bfloat16().cuda()
            loaded = pair_within(fast, w, x, *pair(fast, x)) and \
                torch.equal(fast[0].packed, other[0].packed)
        check(f"{fmt}: Linear(pdl=True) chained: eager m = 1..17 {eager} (workspace zero "
              f"{eager_ws}), 20 graph replays {replays} (workspace zero {graph_ws}), after "
              f"load_state_dict {loaded}", eager and eager_ws and replays and graph_ws and loaded,
              bad)


def pdl_mixed(bad, g):
    """Linear(pdl=True) and plain Linear modules of the same weights taking
    turns on one zeroed workspace (PDL GEMV calls between ordinary fused /
    skinny ones), eager and with a CUDA graph of the pdl pair replayed
    between eager plain calls: every output within its bound (bias
    included) and the workspace zero at the end"""
    for fmt in MATMUL_FORMATS:
        plain, fast = pdl_pair(fmt, False), pdl_pair(fmt, True)
        ws = private_workspace(fmt, list(fast) + list(plain))
        w = [lin.dequantize().cpu() for lin in fast]
        ok = all(torch.equal(a.packed, b.packed) for a, b in zip(fast, plain))  # one weight
        with torch.no_grad():
            for m in (1, 3, 16, 17, 1, 40):
                x = torch.randn(m, 512, generator=g).bfloat16().cuda()
                ok &= pair_within(fast, w, x, *pair(fast, x)) and \
                    pair_within(plain, w, x, *pair(plain, x))
            static_x = torch.zeros(1, 512, device="cuda", dtype=torch.bfloat16)
            graph, _ = captured(lambda x: pair(fast, x), static_x)
            for i in range(10):
                static_x.copy_(torch.randn(1, 512, generator=g).bfloat16())
                graph.replay()
                x = torch.randn(1 + i, 512, generator=g).bfloat16().cuda()
                ok &= pair_within(plain, w, x, *pair(plain, x))
            del graph
            torch.cuda.synchronize()
        zero = int(ws.count_nonzero()) == 0
        check(f"{fmt}: pdl and plain modules taking turns on one workspace: outputs within "
              f"bound {ok}, workspace zero {zero}", ok and zero, bad)


XQ_PAIRS = [("mxfp4", "mxfp8_e4m3"), ("mxfp4", "mxfp4"), ("mxfp4", "mxfp4+"),
            ("mxfp4+", "mxfp8_e4m3"), ("mxfp4+", "mxfp4"), ("mxfp4+", "mxfp4+"),
            ("nvfp4", "nvfp4"), ("nvfp4+", "nvfp4")]


def ref_q(fmt, xf, planes, x, bias):
    """bfp_matmul_ref_q (float64 sums) of W's planes and x's bfp_quantize planes"""
    wi, xi = bfp.format_info(fmt), bfp.format_info(xf)
    c, s, mt, ts = (p.cpu() for p in planes)
    xc, xs, xm, xt = torch.ops.bfp.quantize(x.cpu(), xf)
    m, k = x.shape
    n = c.shape[0]
    y = np.empty(m * n, dtype=np.float32)
    core.matmul_ref_q(wi["id"], c.numpy(), s.numpy(), mt.numpy() if wi["meta_bytes"] else None,
                      ts.numpy() if wi["has_tensor_scale"] else None, n, k, xi["id"],
                      xc.numpy(), xs.numpy(), xm.numpy() if xi["meta_bytes"] else None,
                      xt.numpy() if xi["has_tensor_scale"] else None, m,
                      None if bias is None else bias.cpu().view(torch.int16).numpy(), y)
    return torch.from_numpy(y).double().view(m, n)


def quantized_x(bad):
    g = torch.Generator().manual_seed(3)
    n, k = 1000, 1056  # k: 33 blocks of 32, 66 of 16
    for fmt, xf in XQ_PAIRS:
        w = torch.randn(n, k, generator=g)
        planes = [p.cuda() for p in torch.ops.bfp.quantize(w, fmt)]
        bias = torch.randn(n, generator=g).bfloat16().cuda()
        worst, ok = 0.0, bfp.torch_ops.xq_kernel(fmt, xf)
        for m in (1, 16, 17, 128, 300):
            x = (torch.randn(m, k, generator=g) * 3).bfloat16()
            x[0, :32] *= 2.0 ** 40  # a block far from the others
            y = torch.ops.bfp.matmul(x.cuda(), *planes, bias, fmt, n, k, xf)
            ref = ref_q(fmt, xf, planes, x, bias)
            rel = float((y.double().cpu() - ref).norm() / ref.norm())
            rnd = float((ref.bfloat16().double() - ref).norm() / ref.norm())
            ok &= rel < max(2e-3, rnd + 1e-4)
            worst = max(worst, rel)
        check(f"x_format {fmt} x {xf}: kernel within the bound of bfp_matmul_ref_q at "
              f"m = 1..300 (worst rel {worst:.2e})", bool(ok), bad)
    # a pair without a kernel: the decode path on the GPU == the CPU op
    planes = torch.ops.bfp.quantize(torch.randn(64, 256, generator=g), "hif4")
    x = torch.randn(9, 256, generator=g).bfloat16()
    check("x_format hif4 x mxfp8_e4m3 (no kernel): CUDA == CPU within two bf16 roundings",
          close(torch.ops.bfp.matmul(x.cuda(), *(p.cuda() for p in planes), None, "hif4",
                                     64, 256, "mxfp8_e4m3"),
                torch.ops.bfp.matmul(x, *planes, None, "hif4", 64, 256, "mxfp8_e4m3")), bad)
    # modules with quantized x under a CUDA graph (NVFP4: the host tensor scale)
    for fmt, xf in (("mxfp4", "mxfp8_e4m3"), ("nvfp4", "nvfp4")):
        torch.manual_seed(4)
        model = bfp.quantize_model(
            torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 256)).cuda().bfloat16(),
            fmt, x_format=xf, exclude=())
        with torch.no_grad():
            static_x = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16)
            graph, static_y = captured(model, static_x)
            static_x.copy_(torch.randn(8, 512, device="cuda", dtype=torch.bfloat16))
            graph.replay()
            check(f"x_format {xf} modules ({fmt}) in torch.cuda.graph: replay with new x == "
                  "eager within two bf16 roundings", close(static_y, model(static_x)), bad)
            on_cpu = copy.deepcopy(model).cpu()  # mxfp4: packed, x decoded to bf16 first
            check(f"x_format {xf} modules ({fmt}): CUDA == CPU within two bf16 roundings "
                  f"(W {'packed' if model[0].packed is not None else 'as planes'})",
                  close(model(static_x), on_cpu(static_x.cpu())), bad)
            if fmt == "mxfp4":  # no tensor scale: no host input, so CUDA graphs apply
                outs, skips = compiled(model, static_x)
                check(f"x_format {xf} reduce-overhead: no cudagraph skip ({skips}), == eager",
                      skips == 0 and all(close(o, model(static_x)) for o in outs), bad)


def memory():
    shapes = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096), (14336, 4096),
              (14336, 4096), (4096, 14336)]
    bf16 = sum(2 * n * k for n, k in shapes)
    for fmt in MATMUL_FORMATS:
        b = sum(tp.packed_bytes(fmt, n, k) for n, k in shapes)
        print(f"{fmt}: packed bytes of an 8B layer's linears / bf16's: {b / bf16:.4f}")


def main() -> int:
    if not (torch.cuda.is_available() and bfp.cuda_available()):
        print("torch_cuda_check: needs a GPU and bfp built with CUDA", file=sys.stderr)
        return 2
    bad = [0]
    ops(bad, torch.Generator().manual_seed(0))
    graphs(bad)
    state_and_moves(bad)
    raw_gemv(bad, torch.Generator().manual_seed(2))
    pdl(bad, torch.Generator().manual_seed(1))
    pdl_mixed(bad, torch.Generator().manual_seed(4))
    quantized_x(bad)
    memory()
    print("FAILED" if bad[0] else "OK")
    return 1 if bad[0] else 0


if __name__ == "__main__":
    sys.exit(main())
