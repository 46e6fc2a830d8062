"""The direct-cast accuracy study: run each configuration, score it, measure
per-layer SQNR and the block-level error data for the plots.

Results are plain dicts/lists (JSON-serializable), consumed by report.py.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

import bfp

from .models import MiniLM, Quant, SmolLM2

# The formats of the direct-cast comparison, in the report's order.
FORMATS = ["mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+", "hif4",
           "mxfp6_e2m3", "mxfp6_e2m3+", "mxfp8_e4m3"]


# The GPU matmul's operand pairs, weight x activation (docs/gemm.md: bfp_cuda_matmul for
# W4A16, bfp_cuda_matmul_xq for W4A8 and W4A4), as (kind, weight, activation). A pair with
# the same format on both sides is that format's W+A run, not run again.
PAIRS: List[Tuple[str, str, str]] = [
    ("W4A16", "mxfp4", "bf16"), ("W4A16", "mxfp4+", "bf16"), ("W4A16", "nvfp4", "bf16"),
    ("W4A8", "mxfp4", "mxfp8_e4m3"), ("W4A8", "mxfp4+", "mxfp8_e4m3"),
    ("W4A4", "mxfp4", "mxfp4"), ("W4A4", "mxfp4+", "mxfp4+"), ("W4A4", "nvfp4", "nvfp4"),
    ("W4A4", "nvfp4+", "nvfp4")]


def pair_label(kind: str, w: str, a: str) -> str:
    """The run label of a matmul operand pair."""
    return w if w == a else f"{w} {kind}"


def configs(formats: List[str]) -> List[Dict[str, Any]]:
    """(label, weight format, activation format, kind) of every run after
    the float32 reference: BF16, each format on weights and activations,
    weight-only and activation-only for MXFP4 and MXFP4+, then the matmul
    operand pairs of PAIRS whose weight and activation formats are both in
    `formats` (bf16 always is): W4A8 needs mxfp8_e4m3 among them."""
    out: List[Dict[str, Any]] = [
        {"label": "bf16", "w": "bf16", "a": "bf16", "kind": "W+A", "fmt": "bf16"}]
    out += [{"label": f, "w": f, "a": f, "kind": "W+A", "fmt": f} for f in formats]
    for f in ("mxfp4", "mxfp4+"):
        if f in formats:
            out.append({"label": f"{f} W-only", "w": f, "a": None, "kind": "W", "fmt": f})
            out.append({"label": f"{f} A-only", "w": None, "a": f, "kind": "A", "fmt": f})
    allowed = set(formats) | {"bf16"}
    out += [{"label": pair_label(k, w, a), "w": w, "a": a, "kind": k, "fmt": w}
            for k, w, a in PAIRS if w != a and w in allowed and a in allowed]
    return out


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    out: np.ndarray = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return out


# --------------------------------------------------------------------------
# SmolLM2: perplexity


def run_smollm2(model: SmolLM2, ids: List[int], n_windows: int, window: int,
                formats: List[str], log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Perplexity over n_windows non-overlapping windows of `window` tokens
    (each scored on its tokens 2..window given the previous ones), plus the
    mean KL divergence from the float32 model's next-token distribution and
    the agreement of their top-1 predictions."""
    need = n_windows * window
    if len(ids) < need:
        n_windows = len(ids) // window
        need = n_windows * window
        log(f"  the text has {len(ids)} tokens: using {n_windows} windows")
    wins = [ids[i * window:(i + 1) * window] for i in range(n_windows)]
    record: Dict[str, np.ndarray] = {}
    t0 = time.time()
    base_lp, base_top, nll = [], [], []
    for k, w in enumerate(wins):
        lp = _log_softmax(model.logits(w, Quant(None, None, record if k == 0 else None)))
        nll.append(-lp[np.arange(window - 1), w[1:]])
        base_lp.append(lp[:-1].astype(np.float16))
        base_top.append(lp[:-1].argmax(-1))
    base_nll = np.concatenate(nll)
    rows = [{"label": "fp32", "w": None, "a": None, "kind": "ref", "fmt": "fp32",
             "ppl": float(np.exp(base_nll.mean())), "nll": float(base_nll.mean()),
             "kl": 0.0, "top1": 1.0, "seconds": time.time() - t0}]
    log(f"  fp32 reference: ppl {rows[0]['ppl']:.3f} ({rows[0]['seconds']:.0f} s)")
    for c in configs(formats):
        t0 = time.time()
        q = Quant(c["w"], c["a"])
        nll, kl, top = [], [], []
        for k, w in enumerate(wins):
            lp = _log_softmax(model.logits(w, q))
            nll.append(-lp[np.arange(window - 1), w[1:]])
            blp = base_lp[k].astype(np.float32)
            kl.append((np.exp(blp) * (blp - lp[:-1])).sum(-1))
            top.append(lp[:-1].argmax(-1) == base_top[k])
        nll_all = np.concatenate(nll)
        r = dict(c, ppl=float(np.exp(nll_all.mean())), nll=float(nll_all.mean()),
                 kl=float(np.concatenate(kl).mean()), top1=float(np.concatenate(top).mean()),
                 seconds=time.time() - t0)
        rows.append(r)
        log(f"  {c['label']:<16} ppl {r['ppl']:8.3f}  KL {r['kl']:.4f}  top-1 {r['top1']:.3f}"
            f"  ({r['seconds']:.0f} s)")
    return {"rows": rows, "tokens_scored": int(n_windows * (window - 1)),
            "n_windows": n_windows, "window": window, "text_tokens": len(ids),
            "activations": record}


# --------------------------------------------------------------------------
# MiniLM: embedding similarity and neighbour rankings


def _neighbours(e: np.ndarray, k: int) -> np.ndarray:
    s = e @ e.T
    np.fill_diagonal(s, -np.inf)
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


def run_minilm(model: MiniLM, sentences: List[str], formats: List[str], k: int = 10,
               log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Cosine similarity of each sentence embedding to the float32 model's,
    and how well the nearest-neighbour rankings among the sentences agree:
    top-1 (same nearest neighbour) and overlap of the k nearest."""
    seqs = model.encode(sentences)
    record: Dict[str, np.ndarray] = {}
    t0 = time.time()
    base = model.embed(seqs, Quant(None, None, record))
    nb = _neighbours(base, k)
    rows = [{"label": "fp32", "w": None, "a": None, "kind": "ref", "fmt": "fp32",
             "cos_mean": 1.0, "cos_min": 1.0, "nn_top1": 1.0, f"nn_overlap{k}": 1.0,
             "seconds": time.time() - t0}]
    for c in configs(formats):
        t0 = time.time()
        e = model.embed(seqs, Quant(c["w"], c["a"]))
        cos = (e * base).sum(1)
        nq = _neighbours(e, k)
        overlap = np.mean([len(set(a) & set(b)) / k for a, b in zip(nb, nq)])
        r = dict(c, cos_mean=float(cos.mean()), cos_min=float(cos.min()),
                 nn_top1=float((nq[:, 0] == nb[:, 0]).mean()), **{f"nn_overlap{k}": float(overlap)},
                 seconds=time.time() - t0)
        rows.append(r)
        log(f"  {c['label']:<16} cos {r['cos_mean']:.5f} (min {r['cos_min']:.4f})  "
            f"NN top-1 {r['nn_top1']:.3f}  top-{k} overlap {overlap:.3f}")
    return {"rows": rows, "n_sentences": len(sentences), "tokens": int(sum(map(len, seqs))),
            "k": k, "activations": record}


# --------------------------------------------------------------------------
# per-layer SQNR


def _parts(x: np.ndarray, fmt: str) -> Tuple[float, float, float]:
    """(signal energy, error energy, error energy on block maxima) of x cast
    to fmt, blocks along the last axis: bfp.error, the statistics of
    `bfp compare`; bf16 is plain rounding (no blocks, no BM share)."""
    if fmt == "bf16":
        d = x.astype(np.float64) - Quant.cast(x, fmt).astype(np.float64)
        return float(np.square(x, dtype=np.float64).sum()), float((d * d).sum()), float("nan")
    e = bfp.error(x, fmt)
    err = e["rmse"] ** 2 * e["count"]
    sig = float(np.square(x, dtype=np.float64).sum())
    return sig, err, (e["bm_share"] * err if err > 0 else 0.0)


def _db(sig: float, err: float) -> float:
    return float("inf") if err == 0 else 10.0 * np.log10(sig / err)


def layer_sqnr(tensors: Dict[str, np.ndarray], layer_of: Callable[[str], int],
               kind_of: Callable[[str], str], formats: List[str]) -> Dict[str, Any]:
    """SQNR (dB) of each format on each tensor, combined per layer and per
    kind of tensor (error energies added, then 10 log10 signal / error), and
    over everything together with the BM share (fraction of the squared
    error on the block maxima)."""
    acc: Dict[Tuple[str, str, Any], List[float]] = {}
    per_tensor: Dict[str, Dict[str, float]] = {f: {} for f in formats}

    def add(key: Tuple[str, str, Any], s: float, e: float, b: float) -> None:
        a = acc.setdefault(key, [0.0, 0.0, 0.0])
        a[0] += s
        a[1] += e
        a[2] += b

    for name, x in tensors.items():
        x2 = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
        for f in formats:
            s, e, b = _parts(x2, f)
            add((f, "layer", layer_of(name)), s, e, b)
            add((f, "kind", kind_of(name)), s, e, b)
            add((f, "all", None), s, e, b)
            per_tensor[f][name] = _db(s, e)
    return {
        "layers": sorted({layer_of(n) for n in tensors}),
        "kinds": list(dict.fromkeys(kind_of(n) for n in tensors)),
        "by_layer": {f: {k[2]: _db(v[0], v[1]) for k, v in acc.items()
                         if k[0] == f and k[1] == "layer"} for f in formats},
        "by_kind": {f: {k[2]: _db(v[0], v[1]) for k, v in acc.items()
                        if k[0] == f and k[1] == "kind"} for f in formats},
        "total": {f: {"sqnr_db": _db(acc[(f, "all", None)][0], acc[(f, "all", None)][1]),
                      "bm_share": (acc[(f, "all", None)][2] / acc[(f, "all", None)][1]
                                   if acc[(f, "all", None)][1] > 0 else float("nan"))}
                  for f in formats},
        "by_tensor": per_tensor,
    }


# --------------------------------------------------------------------------
# block-level error data (error vs block-max magnitude)


def block_errors(tensors: Dict[str, np.ndarray], formats: List[str],
                 block: int = 32) -> Dict[str, Any]:
    """Per 32-element block (along the last axis) of every tensor: the block
    max |x|, the block RMS, the error energy of each format over the block and
    the relative error of each format on the block-max element itself.
    Blocks are those of MX (32); a 16-block NVFP4 or a 64-block HiF4 is
    measured over the same 32 elements for a like-for-like comparison."""
    bm, rms, pos = [], [], []
    err: Dict[str, List[np.ndarray]] = {f: [] for f in formats}
    bm_err: Dict[str, List[np.ndarray]] = {f: [] for f in formats}
    for x in tensors.values():
        x2 = x.reshape(-1, x.shape[-1])
        if x2.shape[1] % block:
            continue
        xb = x2.reshape(-1, block).astype(np.float64)
        a = np.abs(xb)
        idx = a.argmax(1)
        m = a[np.arange(len(a)), idx]
        keep = m > 0
        bm.append(m[keep])
        rms.append(np.sqrt((xb * xb).mean(1))[keep])
        pos.append(idx[keep])
        for f in formats:
            y = Quant.cast(x2, f).reshape(-1, block).astype(np.float64)
            d = xb - y
            err[f].append((d * d).sum(1)[keep])
            bm_err[f].append((np.abs(d[np.arange(len(d)), idx]) / m)[keep])
    return {
        "bm": np.concatenate(bm), "rms": np.concatenate(rms),
        "err": {f: np.concatenate(v) for f, v in err.items()},
        "bm_rel_err": {f: np.concatenate(v) for f, v in bm_err.items()},
        "block": block,
    }


def summarize_outliers(acts: Dict[str, np.ndarray]) -> Dict[str, float]:
    """Max/median |x| over all recorded activations and the largest value."""
    a = np.concatenate([np.abs(v).reshape(-1) for v in acts.values()])
    return {"max": float(a.max()), "median": float(np.median(a)),
            "ratio": float(a.max() / np.median(a))}

