"""Tests of the accuracy study (python/bfp/eval): the pieces on synthetic data,
and, when the model wheels are in the cache (BFP_EVAL_CACHE, default
~/.cache/bfp-eval; `bfp-eval` fills it), the numpy forward passes against
references. Nothing here downloads: tests that need a model skip without it.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import bfp
from bfp.eval import assets, study
from bfp.eval.models import Quant, gelu

REPO = Path(__file__).resolve().parents[2]


def cached(fn):
    try:
        return fn(assets.default_cache(), allow_download=False, log=lambda s: None)
    except FileNotFoundError as exc:
        pytest.skip(f"model not cached ({exc}); run bfp-eval once to fetch it")


def _f4(v):
    return f"{v:.4f}"


def heavy(shape, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[r.choice(x.size, x.size // 40, replace=False)] *= 30
    return x


def test_configs_cover_the_issue():
    cs = study.configs(study.FORMATS)
    labels = [c["label"] for c in cs]
    assert labels[0] == "bf16"
    for f in ("mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+", "hif4", "mxfp6_e2m3",
              "mxfp6_e2m3+", "mxfp8_e4m3"):
        assert f in labels
    for v in ("mxfp4 W-only", "mxfp4 A-only", "mxfp4+ W-only", "mxfp4+ A-only"):
        assert v in labels
    wonly = next(c for c in cs if c["label"] == "mxfp4+ W-only")
    assert wonly["w"] == "mxfp4+" and wonly["a"] is None
    # issue #21: the GPU matmul's operand pairs, after the runs above
    after = cs[labels.index("mxfp4+ A-only") + 1:]
    pairs = {c["label"]: (c["w"], c["a"], c["kind"]) for c in after}
    assert pairs == {"mxfp4 W4A16": ("mxfp4", "bf16", "W4A16"),
                     "mxfp4+ W4A16": ("mxfp4+", "bf16", "W4A16"),
                     "nvfp4 W4A16": ("nvfp4", "bf16", "W4A16"),
                     "mxfp4 W4A8": ("mxfp4", "mxfp8_e4m3", "W4A8"),
                     "mxfp4+ W4A8": ("mxfp4+", "mxfp8_e4m3", "W4A8"),
                     "nvfp4+ W4A4": ("nvfp4+", "nvfp4", "W4A4")}
    assert len(labels) == len(set(labels))  # W4A4 with W == A is the W+A run, not a second one
    # a pair runs only when both its formats are compared (bf16 always is)
    few = [c["label"] for c in study.configs(["mxfp4", "nvfp4+"])]
    assert "mxfp4 W4A16" in few and "mxfp4 W4A8" not in few and "nvfp4+ W4A4" not in few
    assert "nvfp4+ W4A4" in [c["label"] for c in study.configs(["nvfp4", "nvfp4+"])]


def test_quant_hook():
    x = heavy((8, 64))
    w1, w2 = heavy((16, 64), 1), heavy((16, 64), 2)
    rec = {}
    q = Quant("mxfp4", "nvfp4", rec)
    y1 = q.linear("l.0.a", x, w1)
    y2 = q.linear("l.0.b", x, w2)  # same input: quantized and recorded once
    assert list(rec) == ["l.0.a"] and np.array_equal(rec["l.0.a"], x)
    xq, w1q = bfp.fake_quant(x, "nvfp4"), bfp.fake_quant(w1, "mxfp4")
    assert np.array_equal(y1, xq @ w1q.T)
    assert np.array_equal(y2, xq @ bfp.fake_quant(w2, "mxfp4").T)
    assert q.weight(w1) is q.weight(w1)  # cached
    assert Quant(None, None).linear("n", x, w1, np.ones(16, np.float32)).shape == (8, 16)
    b = Quant.cast(np.float32([1.00390625, 3.0]), "bf16")
    assert b.tolist() == [1.0, 3.0]


def test_gelu_matches_erf():
    x = np.linspace(-8, 8, 4001).astype(np.float32)
    ref = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert np.max(np.abs(gelu(x) - ref)) < 2e-6


def test_layer_sqnr_and_bm_share():
    t = {"blk.0.attn_q": heavy((4, 64), 3), "blk.0.ffn_down": heavy((4, 128), 4),
         "blk.1.attn_q": heavy((4, 64), 5)}
    ls = study.layer_sqnr(t, lambda n: int(n.split(".")[1]), lambda n: n.split(".")[2],
                          ["bf16", "mxfp4", "mxfp4+"])
    assert ls["layers"] == [0, 1] and ls["kinds"] == ["attn_q", "ffn_down"]
    # a single-tensor layer equals bfp.error's SQNR
    assert ls["by_layer"]["mxfp4"][1] == pytest.approx(bfp.error(t["blk.1.attn_q"], "mxfp4")["sqnr_db"])
    # energy-combined over tensors
    sig = sum(float(np.square(v, dtype=np.float64).sum()) for v in t.values())
    err = sum(float(np.square(v.astype(np.float64) - bfp.fake_quant(v, "mxfp4")).sum())
              for v in t.values())
    assert ls["total"]["mxfp4"]["sqnr_db"] == pytest.approx(10 * math.log10(sig / err))
    assert 0 < ls["total"]["mxfp4"]["bm_share"] < 1
    assert math.isnan(ls["total"]["bf16"]["bm_share"])
    assert ls["total"]["mxfp4+"]["sqnr_db"] > ls["total"]["mxfp4"]["sqnr_db"]


def test_block_errors():
    t = {"a": heavy((16, 64), 6), "b": heavy((8, 96), 7)}
    be = study.block_errors(t, ["mxfp4", "mxfp4+", "nvfp4"])
    n = 16 * 2 + 8 * 3
    assert len(be["bm"]) == n and len(be["err"]["mxfp4"]) == n
    assert np.all(be["bm"] >= be["rms"])
    # MX+ stores the block max with 3 more mantissa bits
    assert be["bm_rel_err"]["mxfp4+"].mean() < be["bm_rel_err"]["mxfp4"].mean()


def test_text_and_sentences():
    try:
        text = assets.load_text()
    except FileNotFoundError:
        pytest.skip("Debian's perl-modules text is not installed")
    assert text.paragraphs[0] == "by Sean M. Burke and Jordan Lachler"
    prose = text.prose
    for markup in ("=head", "C<", "I<", "=over"):
        assert markup not in prose
    assert "References" not in text.paragraphs[-1]
    s = assets.sentences(text)
    assert len(s) > 100 and all(6 <= len(x.split()) <= 60 for x in s)


def test_report_renders(tmp_path):
    pytest.importorskip("matplotlib")
    from bfp.eval import report

    fm = ["mxfp4", "mxfp4+", "nvfp4", "mxfp8_e4m3"]
    labels = ["fp32"] + [c["label"] for c in study.configs(fm)]
    smol = {"rows": [dict(c, ppl=10.0 + i, nll=1.0, kl=0.01 * i, top1=1 - 0.01 * i, seconds=1.0)
                     for i, c in enumerate([{"label": "fp32", "kind": "ref", "w": None, "a": None,
                                              "fmt": "fp32"}] + study.configs(fm))],
            "tokens_scored": 63, "n_windows": 1, "window": 64, "text_tokens": 100}
    mini = {"rows": [dict(r, cos_mean=1 - 0.01 * i, cos_min=0.9, nn_top1=1.0, nn_overlap10=0.9)
                     for i, r in enumerate(smol["rows"])], "n_sentences": 5, "tokens": 50,
            "k": 10}
    for r in mini["rows"]:
        for k in ("ppl", "nll", "kl", "top1"):
            r.pop(k)
    assert [r["label"] for r in smol["rows"]] == labels
    acts = {"blk.0.attn_q": heavy((8, 64)), "blk.1.ffn_down": heavy((8, 64), 1)}
    ls = study.layer_sqnr(acts, lambda n: int(n.split(".")[1]), lambda n: n.split(".")[2],
                          ["bf16"] + fm)
    be = study.block_errors(acts, fm[:3])
    img = tmp_path / "img"
    img.mkdir()
    report.plot_scores(img / "accuracy_scores.png", smol, mini)
    report.plot_block_errors(img / "error_vs_blockmax.png", be, "t")
    report.plot_layer_sqnr(img / "layer_sqnr.png", [("a", ls)])
    ctx = {"smol": smol, "mini": mini, "formats": fm, "checks": ["c"], "models": ["m"],
           "text": ["t"], "sqnr": {"x": ls}, "sqnr_tables": [("X", "x", {})],
           "sqnr_formats": ["bf16"] + fm, "bits_per_value": {"fp32": 32, "bf16": 16,
                                                            "mxfp4": 4.25, "mxfp4+": 4.5,
                                                            "nvfp4": 4.5, "mxfp8_e4m3": 8.25},
           "block_text": "b", "command": "bfp-eval", "runtime": "r"}
    report.write_report(tmp_path / "accuracy.md", img, ctx)
    md = (tmp_path / "accuracy.md").read_text()
    assert "![score per format](img/accuracy_scores.png)" in md
    assert "*MXFP4+ loses less than MXFP4*" in md and "**agrees**" in md
    # issue #21's section: per weight format, W4A16 / W4A8 / W4A4 next to each other
    sec = md.split("### Matmul operand pairs: W4A16, W4A8, W4A4")[1].split("### Per-layer")[0]
    assert "bfp_cuda_matmul_xq" in sec and "docs/gemm.md" in sec
    assert "W4A16 ΔPPL (A `bf16`)" in sec and "W4A8 1−cos (A `mxfp8_e4m3`)" in sec
    row = {r["label"]: r for r in smol["rows"]}
    kl = [_f4(row[lb]["kl"]) for lb in ("mxfp4 W4A16", "mxfp4 W4A8", "mxfp4")]
    def cells(w):
        line = next(x for x in sec.splitlines() if x.startswith(f"| `{w}` |"))
        return [c.strip() for c in line.strip().strip("|").split("|")]

    mx = cells("mxfp4")
    assert [mx[2], mx[4], mx[7]] == kl and mx[5] == "`mxfp4`" and mx[1].startswith("+")
    nv = cells("nvfp4")
    assert nv[3] == nv[4] == "–" and nv[5] == "`nvfp4`"  # nvfp4 has no W4A8 pair
    # the findings are computed: W4A8's share of the W4A16 -> W4A4 KL increase
    s16, s8, s4 = (row[lb]["kl"] for lb in ("mxfp4 W4A16", "mxfp4 W4A8", "mxfp4"))
    assert f"({100 * (s8 - s16) / (s4 - s16):.0f}%)" in sec and "*Best pair per kind*" in sec
    for png in ("accuracy_scores.png", "error_vs_blockmax.png", "layer_sqnr.png"):
        assert (img / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- real models (cached only)

def test_minilm_matches_torch_reference():
    """Our numpy BERT reproduces data/minilm_l3_ffn_up.input.npy (PyTorch, float64)."""
    pytest.importorskip("tokenizers")
    from bfp.eval.models import MiniLM

    st, tj = cached(assets.minilm_files)
    m = MiniLM(st, tj)
    ref = np.load(REPO / "data" / "minilm_l3_ffn_up.input.npy")
    text = (REPO / "data" / "minilm_input.txt").read_text(encoding="utf-8")
    paras = [" ".join(x.strip() for x in b.splitlines() if x.strip()) for b in text.split("\n\n")]
    got = {}

    def stop(name, h):
        if name == "encoder.layer.3.intermediate.dense":
            got["h"] = h
            return True
        return False

    m.hidden(m.encode([p for p in paras if p]), Quant(None, None), stop)
    assert got["h"].shape == ref.shape
    assert np.abs(got["h"] - ref).max() < 1e-3
    e = m.embed(m.encode(["a cat sat on the mat", "a kitten sat on a rug", "tax law"]),
                Quant(None, None))
    assert np.allclose(np.linalg.norm(e, axis=1), 1)
    assert e[0] @ e[1] > e[0] @ e[2]


def test_smollm2_forward_is_a_language_model():
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    from bfp.eval.models import SmolLM2

    m = SmolLM2(cached(assets.smollm2_gguf))
    assert m.n_layer == 30 and m.d == 576
    ids = m.encode("The capital of France is")
    assert m.decode(ids) == "The capital of France is"
    assert "Paris" in m.generate("The capital of France is", 3)


@pytest.mark.skipif(not os.environ.get("BFP_EVAL_SLOW"), reason="set BFP_EVAL_SLOW=1")
def test_quick_study_end_to_end(tmp_path):
    cached(assets.minilm_files)
    from bfp.eval.__main__ import main

    assert main(["--quick", "--models", "minilm", "--report", str(tmp_path / "a.md"),
                 "--save-results", str(tmp_path / "r.pkl")]) == 0
    md = (tmp_path / "a.md").read_text()
    assert "all-MiniLM-L6-v2: every run" in md
    assert "### Matmul operand pairs: W4A16, W4A8, W4A4" in md and "`mxfp4+ W4A8`" in md
