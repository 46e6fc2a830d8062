#!/usr/bin/env python3
"""End-to-end decoder benchmark: bf16 weights against bfp 4-bit weights (issue #22).

A Llama-3-8B-shaped decoder (hidden 4096, 32 query / 8 key-value heads of
128, FFN 14336, 32 layers, vocabulary 128256) with RANDOM weights (normal,
std 0.02: the speed and memory do not depend on the values) and a static KV
cache, run with torch.compile (fullgraph, per decoder layer) and one CUDA
graph per decode step and per prefill on both sides. For each weight format it measures
decode tokens/s at batch 1 and 16, the time of a 2048-token prefill at batch
1, the bytes of the weights (all, and the linears alone) and the peak GPU
memory. A "floor" run replaces every nn.Linear by its input cut or tiled to
the output width: the time of everything else, which no weight format
changes; each format's linears_speedup_* is bf16's step time over its own
with the floor taken off both (the speed of the linears alone, in the
model), linears_gbps_* their weight bytes over that time, next to the
device's copy_gbps; issue_22_linears_gbps_needed_b1 / _b16 is the rate the
linears would need for 2.5x / 2x bf16's tokens/s with the rest of the step
as the floor, and us_per_call_over_copy_rate_b1 / _b16 the time per matmul
call beyond streaming the weights at copy_gbps: what bf16 and the format
pay, and what that bar allows the format. --inductor-pdl turns on
inductor's programmatic dependent launch on both sides. It writes
bench/results/h200-e2e.json (temporary name, then rename; an existing file
only with --force).

bfp side: bfp.quantize_model(model, fmt, exclude=()) swaps every nn.Linear,
lm_head included, for bfp.nn.Linear (torch.ops.bfp.matmul_packed, bf16
activations); the embedding stays bf16 (a gather, not a matmul) unless
--embeddings quantizes it too (bfp.nn.Embedding). A format
written FMT:XFMT quantizes the activations too (x_format=XFMT, e.g.
mxfp4:mxfp8_e4m3 for W4A8: torch.ops.bfp.matmul, bfp_cuda_matmul_xq).

    python bench/e2e_torch.py                      # on the H200, bfp built with CUDA
    python bench/e2e_torch.py --tiny --out /tmp/e.json   # CPU smoke test (toy sizes)
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

import bfp
import bfp.nn  # noqa: F401 - registers torch.ops.bfp
from e2e_budget import us_beyond_copy  # bench/e2e_budget.py, beside this script

FLOOR = "floor (no linears)"
LLAMA3_8B = dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, layers=32, vocab=128256)
TINY = dict(hidden=128, heads=4, kv_heads=2, ffn=256, layers=2, vocab=512)


class Attention(torch.nn.Module):
    def __init__(self, c: Dict[str, int]) -> None:
        super().__init__()
        d, self.h, self.kv = c["hidden"], c["heads"], c["kv_heads"]
        self.hd = d // self.h
        self.fused = bool(c.get("fused", 0))
        if self.fused:  # one [q; k; v] weight, as serving engines load it
            self.qkv_proj = torch.nn.Linear(d, (self.h + 2 * self.kv) * self.hd, bias=False)
        else:
            self.q_proj = torch.nn.Linear(d, self.h * self.hd, bias=False)
            self.k_proj = torch.nn.Linear(d, self.kv * self.hd, bias=False)
            self.v_proj = torch.nn.Linear(d, self.kv * self.hd, bias=False)
        self.o_proj = torch.nn.Linear(self.h * self.hd, d, bias=False)
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)

    def set_cache(self, batch: int, length: int, device: Any) -> None:
        shape = (batch, self.kv, length, self.hd)
        self.k_cache = torch.zeros(shape, dtype=torch.bfloat16, device=device)
        self.v_cache = torch.zeros(shape, dtype=torch.bfloat16, device=device)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        if self.fused:
            qx, kx, vx = self.qkv_proj(x).split(
                [self.h * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        else:
            qx, kx, vx = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = qx.reshape(b, t, self.h, self.hd).transpose(1, 2)
        k = kx.reshape(b, t, self.kv, self.hd).transpose(1, 2)
        v = vx.reshape(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        assert self.k_cache is not None and self.v_cache is not None
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        length = self.k_cache.shape[2]
        mask = torch.arange(length, device=x.device)[None, :] <= pos[:, None]
        o = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, self.h * self.hd))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class Layer(torch.nn.Module):
    def __init__(self, c: Dict[str, int]) -> None:
        super().__init__()
        d = c["hidden"]
        self.input_norm = torch.nn.RMSNorm(d, eps=1e-5)
        self.attn = Attention(c)
        self.post_norm = torch.nn.RMSNorm(d, eps=1e-5)
        self.fused = bool(c.get("fused", 0))
        if self.fused:  # one [gate; up] weight
            self.gate_up_proj = torch.nn.Linear(d, 2 * c["ffn"], bias=False)
        else:
            self.gate_proj = torch.nn.Linear(d, c["ffn"], bias=False)
            self.up_proj = torch.nn.Linear(d, c["ffn"], bias=False)
        self.down_proj = torch.nn.Linear(c["ffn"], d, bias=False)

    def forward(self, h: torch.Tensor, pos: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.input_norm(h), pos, cos, sin)
        x = self.post_norm(h)
        if self.fused:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return h + self.down_proj(F.silu(gate) * up)


class Decoder(torch.nn.Module):
    def __init__(self, c: Dict[str, int]) -> None:
        super().__init__()
        self.c = c
        self.embed_tokens = torch.nn.Embedding(c["vocab"], c["hidden"])
        self.layers = torch.nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.norm = torch.nn.RMSNorm(c["hidden"], eps=1e-5)
        self.lm_head = torch.nn.Linear(c["hidden"], c["vocab"], bias=False)
        self.register_buffer("cos_t", None, persistent=False)
        self.register_buffer("sin_t", None, persistent=False)

    def set_cache(self, batch: int, length: int) -> None:
        dev = self.norm.weight.device  # the embedding may be a bfp one (no .weight)
        for layer in self.layers:
            assert isinstance(layer, Layer)
            layer.attn.set_cache(batch, length, dev)
        hd = self.c["hidden"] // self.c["heads"]
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
        ang = torch.arange(length, device=dev).float()[:, None] * inv[None, :]
        self.cos_t, self.sin_t = ang.cos(), ang.sin()

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos_t[pos], self.sin_t[pos]
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h, pos, cos, sin)
        return self.lm_head(self.norm(h[:, -1:]))  # logits of the last position


def build(c: Dict[str, int], device: str, seed: int) -> Decoder:
    torch.manual_seed(seed)
    with torch.device(device):
        m = Decoder(c).to(torch.bfloat16)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)  # random weights, stated in the results
    return m.eval()


class NoLinear(torch.nn.Module):
    """A Linear's stand-in that returns x itself, tiled or cut to the output
    width: the "floor" run, everything of a step but the linears (attention,
    norms, RoPE, the KV cache, the graph's launches), which no weight format
    can speed up. Not zeros: the compiler would fold the attention away."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.reps = -(-out_features // in_features)
        self.out_features = out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.reps > 1:
            x = x.repeat(*([1] * (x.dim() - 1)), self.reps)
        return x[..., :self.out_features]


def strip_linears(m: torch.nn.Module) -> None:
    for name, child in m.named_children():
        if isinstance(child, torch.nn.Linear):
            setattr(m, name, NoLinear(child.in_features, child.out_features))
        else:
            strip_linears(child)


def linears(m: torch.nn.Module) -> List[torch.nn.Module]:
    """The linear layers (bf16, or bfp's): each is one matmul call a step."""
    return [x for x in m.modules() if isinstance(x, (torch.nn.Linear, bfp.nn.Linear))]


def linear_bytes(m: torch.nn.Module) -> int:
    """Bytes of the linear layers alone (bf16 weights, or bfp's packed ones)."""
    return sum(weight_bytes(x) for x in linears(m))


def weight_bytes(m: torch.nn.Module) -> int:
    """Bytes of the parameters and weight buffers (not the KV cache, not RoPE)."""
    skip = ("k_cache", "v_cache", "cos_t", "sin_t")
    tensors: List[torch.Tensor] = [t for _, t in m.named_parameters()]
    tensors += [t for n, t in m.named_buffers() if n.rsplit(".", 1)[-1] not in skip]
    return sum(t.numel() * t.element_size() for t in tensors)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def progress(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def timed(fn: Any, device: str, reps: int) -> float:
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / reps


def compile_layers(model: Decoder) -> None:
    """torch.compile each decoder layer (regional compilation): the layers are
    alike and their weights are graph inputs, so dynamo compiles one graph per
    input shape and every layer reuses it; the whole 32-layer model compiled as
    one graph took minutes per shape, longer than a device call."""
    for layer in model.layers:
        layer.compile(fullgraph=True, dynamic=False)


def graphed(fn: Any, device: str) -> Any:
    """fn recorded as one CUDA graph (after two warm-up calls on a side
    stream, which compile and autotune), returned as its replay; on the CPU,
    fn itself after the same warm-up."""
    if device != "cuda":
        for _ in range(2):
            fn()
        return fn
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def kernel_profile(step: Any, reps: int = 4, top: int = 24) -> Dict[str, Any]:
    """The GPU kernels of `reps` replays of a step's graph (torch.profiler,
    CUPTI): per kernel name, launches and microseconds per step, the `top`
    longest; busy_us_per_step, their sum over all kernels, against the step's
    time shows the gaps between kernels."""
    from torch.profiler import ProfilerActivity, profile
    sync("cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
        sync("cuda")
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0.0)
        if us > 0:
            rows.append({"kernel": e.key[:120], "calls_per_step": e.count / reps,
                         "us_per_step": us / reps})
    rows.sort(key=lambda r: -r["us_per_step"])
    return {"busy_us_per_step": sum(r["us_per_step"] for r in rows),
            "launches_per_step": sum(r["calls_per_step"] for r in rows), "top": rows[:top]}


@torch.no_grad()  # inference: no autograd graph
def measure(model: Decoder, a: argparse.Namespace, device: str) -> Dict[str, Any]:
    torch._dynamo.utils.counters.clear()
    compile_layers(model)
    out: Dict[str, Any] = {"weight_bytes": weight_bytes(model),
                           "linear_weight_bytes": linear_bytes(model),
                           "linear_calls": len(linears(model))}
    for batch in a.batches:
        model.set_cache(batch, a.context + a.decode_steps + 1)
        ids = torch.randint(0, model.c["vocab"], (batch, 1), device=device)
        pos = torch.tensor([a.context], device=device)  # the graph reads it: set per step
        positions = [torch.tensor([a.context + i], device=device) for i in range(a.decode_steps)]
        tc = time.perf_counter()
        step = graphed(lambda: model(ids, pos), device)
        sync(device)
        progress(f"decode b{batch}: compiled and captured in {time.perf_counter() - tc:.1f} s")
        t0 = time.perf_counter()
        for p in positions:
            pos.copy_(p)
            step()
        sync(device)
        dt = time.perf_counter() - t0
        out[f"decode_b{batch}"] = {"tokens_per_s": batch * a.decode_steps / dt,
                                   "ms_per_step": 1e3 * dt / a.decode_steps,
                                   "context": a.context, "steps": a.decode_steps}
        if a.profile and device == "cuda":
            out[f"decode_b{batch}"]["kernels"] = kernel_profile(step)
    model.set_cache(1, a.prefill)
    ids = torch.randint(0, model.c["vocab"], (1, a.prefill), device=device)
    pos = torch.arange(a.prefill, device=device)
    tc = time.perf_counter()
    step = graphed(lambda: model(ids, pos), device)
    sync(device)
    progress(f"prefill {a.prefill}: compiled and captured in {time.perf_counter() - tc:.1f} s")
    out["prefill"] = {"tokens": a.prefill, "ms": 1e3 * timed(step, device, a.prefill_reps)}
    out["compiled_graphs"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    if device == "cuda":
        out["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated())
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true",
                    help="toy sizes on the CPU: a smoke test of the script, not a measurement")
    ap.add_argument("--formats", default="mxfp4,nvfp4,mxfp4+",
                    help="bfp weight formats to compare with bf16 (comma-separated; "
                         "FMT:XFMT also quantizes the activations, e.g. mxfp4:mxfp8_e4m3; "
                         "a trailing @pdl sets bfp.nn.Linear's pdl, e.g. mxfp4@pdl)")
    ap.add_argument("--out", default=None,
                    help="results file (default bench/results/h200-e2e.json; --tiny: none)")
    ap.add_argument("--force", action="store_true", help="replace an existing --out file")
    ap.add_argument("--embeddings", action="store_true",
                    help="quantize the token embedding too (bfp.nn.Embedding, the weight format)")
    ap.add_argument("--fused", action="store_true",
                    help="one q/k/v and one gate/up weight per layer (as vLLM and SGLang load "
                         "Llama), on both sides")
    ap.add_argument("--profile", action="store_true",
                    help="also record each decode step's kernels (torch.profiler): time per "
                         "kernel name and the step's busy time, in the JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=None,
                    help="decoder layers (default 32; fewer for a quick check, not a result)")
    ap.add_argument("--batches", default=None,
                    help="decode batch sizes, comma-separated (default 1,16; --tiny 1,2)")
    ap.add_argument("--decode-steps", type=int, default=None,
                    help="decode steps timed per batch (default 128)")
    ap.add_argument("--inductor-pdl", action="store_true",
                    help="torch._inductor.config.triton.enable_pdl on both sides: the compiled "
                         "kernels launch with programmatic dependent launch")
    a = ap.parse_args(argv)
    device = "cpu" if a.tiny else "cuda"
    cfg = dict(TINY if a.tiny else LLAMA3_8B)
    if a.layers is not None:
        if a.layers < 1:
            print("e2e_torch: --layers must be at least 1", file=sys.stderr)
            return 2
        cfg["layers"] = a.layers
    if a.fused:
        cfg["fused"] = 1
    try:
        a.batches = ([int(b) for b in a.batches.split(",")] if a.batches
                     else [1, 16] if not a.tiny else [1, 2])
    except ValueError:
        a.batches = []
    if not a.batches or min(a.batches) < 1:
        print("e2e_torch: --batches takes positive integers, e.g. 1,16", file=sys.stderr)
        return 2
    steps = a.decode_steps
    a.context, a.decode_steps = (512, 128) if not a.tiny else (16, 4)
    if steps is not None:
        if steps < 4:
            print("e2e_torch: --decode-steps must be at least 4", file=sys.stderr)
            return 2
        a.decode_steps = steps
    a.prefill, a.prefill_reps = (2048, 5) if not a.tiny else (32, 1)
    if a.out is None and not a.tiny:
        a.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                             "h200-e2e.json")
    if a.out and os.path.exists(a.out) and not a.force:
        print(f"e2e_torch: {a.out} exists; pass --force to replace it", file=sys.stderr)
        return 2
    fmts = [f.strip() for f in a.formats.split(",") if f.strip()]
    try:
        for f in fmts:
            w, xf, _ = parse_format(f)
            bfp.format_info(w)
            bfp.torch_ops.x_format_name(xf or None)
    except (bfp.BfpError, ValueError) as exc:
        print(f"e2e_torch: --formats: {exc}", file=sys.stderr)
        return 2
    if device == "cuda" and not (torch.cuda.is_available() and bfp.cuda_available()):
        print("e2e_torch: needs a GPU and bfp built with CUDA "
              "(pip install ./python -C cmake.define.BFP_CUDA=ON); --tiny runs on the CPU",
              file=sys.stderr)
        return 2
    if a.inductor_pdl:
        import torch._inductor.config as inductor_config
        if not hasattr(inductor_config.triton, "enable_pdl"):
            print(f"e2e_torch: --inductor-pdl: torch {torch.__version__}'s inductor has no "
                  "triton.enable_pdl", file=sys.stderr)
            return 2
        inductor_config.triton.enable_pdl = True
    a.copy_gbps = copy_gbps(device)
    runs: Dict[str, Any] = {}
    for name in ["bf16", FLOOR] + fmts:
        t0 = time.perf_counter()
        model = build(cfg, device, a.seed)
        if name == FLOOR:
            strip_linears(model)
        elif name != "bf16":
            w, xf, pdl = parse_format(name)
            bfp.quantize_model(model, w, x_format=xf or None, exclude=(),
                               embeddings=a.embeddings, pdl=pdl)
        if device == "cuda":  # the peak of the run, not of building the bf16 model
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        runs[name] = measure(model, a, device)
        runs[name]["setup_s"] = round(t1 - t0, 1)  # build (+ quantize_model)
        runs[name]["measure_s"] = round(time.perf_counter() - t1, 1)  # compile + capture + timing
        brief = {k: ({kk: vv for kk, vv in v.items() if kk != "kernels"}
                     if isinstance(v, dict) else v) for k, v in runs[name].items()}
        print(f"{name}: {json.dumps(brief)}", file=sys.stderr, flush=True)
        del model
        torch._dynamo.reset()
        # after every variant, so a run cut short keeps what it measured
        write(a, cfg, device, fmts, runs)
    return 0


def parse_format(name: str) -> Tuple[str, str, bool]:
    """FMT[:XFMT][@pdl] -> (FMT, XFMT or "", pdl)"""
    base, at, opt = name.partition("@")
    if at and opt != "pdl":
        raise ValueError(f"{name}: the only option after @ is pdl")
    w, _, xf = base.partition(":")
    return w, xf, bool(at)


def copy_gbps(device: str) -> Optional[float]:
    """The device's copy bandwidth (bytes read + written) over 512 MiB, best of 5 reps of
    10 copies: the reference for the linears' GB/s. None on the CPU."""
    if device != "cuda":
        return None
    n = 512 << 20
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = 0.0
    for _ in range(5):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(10):
            dst.copy_(src)
        t1.record()
        t1.synchronize()
        best = max(best, 2.0 * n * 10 / (t0.elapsed_time(t1) * 1e6))
    del src, dst
    return round(best, 1)


def linear_ms(runs: Dict[str, Any], name: str, key: str) -> float:
    """Milliseconds of a step spent in the linears: the run less the floor run."""
    def ms(r: Dict[str, Any]) -> float:
        return float(r[key]["ms_per_step"] if key != "prefill" else r[key]["ms"])

    return ms(runs[name]) - ms(runs[FLOOR])


def write(a: argparse.Namespace, cfg: Dict[str, int], device: str, fmts: List[str],
          runs: Dict[str, Any]) -> None:
    base = runs["bf16"]
    keys = [f"decode_b{b}" for b in a.batches] + ["prefill"]
    ratios = {f: {"weight_bytes": runs[f]["weight_bytes"] / base["weight_bytes"],
                  "linear_weight_bytes": runs[f]["linear_weight_bytes"]
                  / base["linear_weight_bytes"],
                  "prefill_time": runs[f]["prefill"]["ms"] / base["prefill"]["ms"],
                  **{f"tokens_per_s_b{b}": runs[f][f"decode_b{b}"]["tokens_per_s"]
                     / base[f"decode_b{b}"]["tokens_per_s"] for b in a.batches},
                  # bf16's linear time over this format's, the floor taken off both
                  **{f"linears_speedup_{k}": linear_ms(runs, "bf16", k)
                     / max(linear_ms(runs, f, k), 1e-9)
                     for k in keys if FLOOR in runs},
                  # the linears' weight bytes over their time (the floor taken off), GB/s
                  **{f"linears_gbps_{k}": runs[f]["linear_weight_bytes"]
                     / max(linear_ms(runs, f, k), 1e-9) / 1e6
                     for k in keys[:-1] if FLOOR in runs}}
              for f in fmts if f in runs}
    shape = {k: v for k, v in cfg.items() if k != "fused"}  # fusing keeps the model
    if not a.tiny and a.batches == [1, 16] and shape == LLAMA3_8B:
        # issue #22's bar: >= 2.5x / 2x tokens/s, prefill no slower, <= 30% weights
        for f, r in ratios.items():
            r["meets_issue_22"] = bool(r["tokens_per_s_b1"] >= 2.5 and r["tokens_per_s_b16"] >= 2.0
                                       and r["prefill_time"] <= 1.0 and r["weight_bytes"] <= 0.30)
            if FLOOR not in runs:
                continue
            # the GB/s the linears would need for the bar: bf16's step over the target,
            # less the floor, is their time budget (None: the floor alone exceeds it)
            for b, target in ((1, 2.5), (16, 2.0)):
                k = f"decode_b{b}"
                budget = (base[k]["ms_per_step"] / target - runs[FLOOR][k]["ms_per_step"])
                r[f"issue_22_linears_gbps_needed_b{b}"] = (
                    runs[f]["linear_weight_bytes"] / budget / 1e6 if budget > 0 else None)
                # per matmul call, what the linears take beyond streaming their weights at
                # the copy rate: what bf16 pays, and what the bar leaves this format
                if a.copy_gbps and "linear_calls" in runs[f]:
                    def over_copy(name: str, ms: float) -> float:
                        return us_beyond_copy(ms, runs[name]["linear_weight_bytes"],
                                              runs[name]["linear_calls"], a.copy_gbps)
                    r[f"us_per_call_over_copy_rate_b{b}"] = {
                        "bf16": over_copy("bf16", linear_ms(runs, "bf16", k)),
                        f: over_copy(f, linear_ms(runs, f, k)),
                        "issue_22_allows": over_copy(f, budget)}
    res = {"what": "Llama-3-8B-shaped decoder, RANDOM weights (normal, std 0.02)",
           "config": cfg, "tiny": a.tiny, "device": torch.cuda.get_device_name()
           if device == "cuda" else platform.processor() or "cpu",
           "torch": torch.__version__, "bfp": bfp.library_version(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python3 " + " ".join(sys.argv),
           "code": os.environ.get("BFP_CODE", ""),  # the commit (bench/h200_check.sh passes it)
           "compile": "each decoder layer torch.compile(fullgraph=True) (one graph per shape, "
                      "reused by every layer); on CUDA each decode step and the prefill are "
                      "one CUDA graph (torch.cuda.graph), replayed",
           "bfp_side": "quantize_model(exclude=()): every nn.Linear incl. lm_head; "
                       + ("embedding in the weight format (embeddings=True); " if a.embeddings
                          else "embedding bf16; ")
                       + "activations bf16 (FMT:XFMT: quantized to XFMT); FMT@pdl: "
                         "quantize_model(pdl=True), the GEMV kernel with programmatic "
                         "dependent launch up to 16 rows",
           "floor": f"run '{FLOOR}': every nn.Linear returns its input tiled or cut to its "
                    "output width (what no weight format can speed up); linears_speedup "
                    "takes it off both sides",
           "copy_gbps": getattr(a, "copy_gbps", None),  # bytes read + written, 512 MiB
           "inductor_pdl": a.inductor_pdl,
           "runs": runs, "vs_bf16": ratios,
           "complete": all(f in runs for f in fmts)}
    text = json.dumps(res, indent=2) + "\n"
    if a.out:
        d = os.path.dirname(os.path.abspath(a.out))
        fd, tmp = tempfile.mkstemp(prefix=".e2e_torch.", dir=d)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, a.out)
    elif res["complete"]:
        sys.stdout.write(text)


if __name__ == "__main__":
    sys.exit(main())
