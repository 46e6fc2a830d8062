"""bfp.nn.Linear and bfp.quantize_model (issue #22): weights as torch
buffers that survive state_dict / torch.save; the README's example."""
import io
import pathlib
import re

import numpy as np
import pytest
import torch

import bfp
import bfp.nn

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Block(torch.nn.Module):
    """A transformer-like block: norms, attention projections, an MLP."""

    def __init__(self, d=64, ff=128):
        super().__init__()
        self.input_norm = torch.nn.LayerNorm(d)
        self.q_proj = torch.nn.Linear(d, d, bias=False)
        self.k_proj = torch.nn.Linear(d, d, bias=False)
        self.v_proj = torch.nn.Linear(d, d, bias=False)
        self.o_proj = torch.nn.Linear(d, d)
        self.post_norm = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, ff), torch.nn.ReLU(),
                                       torch.nn.Linear(ff, d))

    def forward(self, h):
        x = self.input_norm(h)
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        a = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v
        h = h + self.o_proj(a)
        return h + self.mlp(self.post_norm(h))


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=100, d=64, layers=2):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList(Block(d) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def _lm(seed=0):
    torch.manual_seed(seed)
    return TinyLM().eval()


def _kinds(model):
    return {n: type(m) for n, m in model.named_modules() if n}


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4", "mxfp8_e4m3"])
def test_from_float_holds_the_library_planes(fmt):
    torch.manual_seed(1)
    lin = torch.nn.Linear(96, 40)
    q = bfp.nn.Linear.from_float(lin, fmt)
    ref = bfp.quantize(lin.weight.detach(), fmt)
    np.testing.assert_array_equal(q.codes.flatten().numpy(), ref.codes)
    np.testing.assert_array_equal(q.scales.flatten().numpy(), ref.scales)
    if ref.meta is not None:
        np.testing.assert_array_equal(q.meta.flatten().numpy(), ref.meta)
    np.testing.assert_array_equal(q.dequantize().numpy(), ref.dequantize())
    assert torch.equal(q.bias, lin.bias)
    x = torch.randn(3, 96)
    want = torch.ops.bfp.matmul(x.bfloat16(), q.codes, q.scales, q.meta, q.tensor_scale,
                                lin.bias.detach().bfloat16(), q.fmt, 40, 96, "bf16").float()
    assert torch.equal(q(x), want)


def test_quantize_model_default_include_exclude():
    m = bfp.quantize_model(_lm(), "mxfp4")
    kinds = _kinds(m)
    swapped = sorted(n for n, t in kinds.items() if t is bfp.nn.Linear)
    assert len(swapped) == 2 * 6
    assert kinds["lm_head"] is torch.nn.Linear          # head left alone
    assert kinds["embed_tokens"] is torch.nn.Embedding  # embeddings and norms untouched
    assert kinds["norm"] is torch.nn.LayerNorm and kinds["layers.0.input_norm"] is torch.nn.LayerNorm

    m = bfp.quantize_model(_lm(), "nvfp4", include=r"\.mlp\.")
    swapped = sorted(n for n, t in _kinds(m).items() if t is bfp.nn.Linear)
    assert swapped == ["layers.0.mlp.0", "layers.0.mlp.2", "layers.1.mlp.0", "layers.1.mlp.2"]

    m = bfp.quantize_model(_lm(), "mxfp4", exclude=[r"k_proj$", r"^layers\.1\."])
    swapped = sorted(n for n, t in _kinds(m).items() if t is bfp.nn.Linear)
    # a given exclude replaces the default one: lm_head is swapped here
    assert swapped == ["layers.0." + s for s in ("mlp.0", "mlp.2", "o_proj", "q_proj", "v_proj")
                       ] + ["lm_head"]

    m = bfp.quantize_model(_lm(), "mxfp4", exclude=())
    assert _kinds(m)["lm_head"] is bfp.nn.Linear

    with pytest.raises(ValueError, match="x_format 'fp8'"):
        bfp.quantize_model(_lm(), "mxfp4", x_format="fp8")
    with pytest.raises(bfp.BfpError, match="unknown format"):
        bfp.quantize_model(_lm(), "fp3")


def test_quantized_model_is_close_to_float_and_compiles_to_the_same_output():
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(3))
    ref = _lm()(ids)
    m = bfp.quantize_model(_lm(), "mxfp4+")
    with torch.no_grad():
        eager = m(ids)
        rel = float((eager - ref).norm() / ref.norm())
        assert 0 < rel < 0.25, rel  # 4-bit weights: close, not equal
        compiled = torch.compile(m, fullgraph=True)(ids)
    torch.testing.assert_close(compiled, eager)
    # an MLP has no op inductor could reorder: compiled == eager bit for bit
    mlp = bfp.quantize_model(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                                 torch.nn.Linear(128, 32)), "nvfp4")
    x = torch.randn(5, 64)
    with torch.no_grad():
        assert torch.equal(torch.compile(mlp, fullgraph=True)(x), mlp(x))


def test_state_dict_round_trip_and_torch_save_load():
    ids = torch.randint(0, 100, (1, 9), generator=torch.Generator().manual_seed(4))
    m = bfp.quantize_model(_lm(0), "nvfp4+")
    sd = m.state_dict()
    assert sd["layers.0.q_proj.codes"].dtype == torch.uint8
    assert sd["layers.0.q_proj.tensor_scale"].dtype == torch.float32
    assert sd["layers.0.q_proj._extra_state"]["format"] == "nvfp4+"
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    fresh = bfp.quantize_model(_lm(7), "nvfp4+")  # other weights, same shapes
    with torch.no_grad():
        assert not torch.equal(fresh(ids), m(ids))
        fresh.load_state_dict(loaded)
        assert torch.equal(fresh(ids), m(ids))
    for k, v in m.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(fresh.state_dict()[k], v), k
    # a module of another format refuses the state dict, naming both
    other = bfp.quantize_model(_lm(0), "mxfp4+")
    with pytest.raises((ValueError, RuntimeError), match="nvfp4\\+.*mxfp4\\+|size mismatch"):
        other.load_state_dict(loaded)
    # a whole module through torch.save
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    whole = torch.load(buf, weights_only=False)
    with torch.no_grad():
        assert torch.equal(whole(ids), m(ids))


def test_load_state_dict_into_constructed_linear_and_dtype_moves():
    torch.manual_seed(2)
    q = bfp.nn.Linear.from_float(torch.nn.Linear(64, 32), "nvfp4")
    empty = bfp.nn.Linear(64, 32, fmt="nvfp4")
    empty.load_state_dict(q.state_dict())
    x = torch.randn(4, 64)
    assert torch.equal(empty(x), q(x))
    wrong = bfp.nn.Linear(64, 32, fmt="nvfp4+")
    with pytest.raises(ValueError, match="nvfp4"):
        wrong.load_state_dict(q.state_dict(), strict=False)
    # .half() / .to(bfloat16) cast the bias, never the float32 tensor scale
    ts = q.tensor_scale.clone()
    assert float(ts) != 1.0
    q.half()
    assert q.tensor_scale.dtype == torch.float32 and torch.equal(q.tensor_scale, ts)
    assert q.bias.dtype == torch.float16 and q(x.half()).dtype == torch.float16
    q.to(torch.device("cpu"), torch.bfloat16)
    assert q.tensor_scale.dtype == torch.float32 and torch.equal(q.tensor_scale, ts)


def _example(path):
    text = (ROOT / path).read_text()
    m = re.search(r"<!-- torch-example -->\n```python\n(.*?)```", text, re.S)
    assert m, f"{path}: no <!-- torch-example --> block"
    return m.group(1)


def test_readme_example_swaps_the_linears_in_three_lines():
    code = _example("README.md")
    assert code == _example("docs/python.md")
    assert len(code.strip().splitlines()) == 4  # the import and three lines
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)  # noqa: S102 - the documented example
    model, y = ns["model"], ns["y"]
    assert [type(m).__name__ for m in model] == ["Linear", "GELU", "Linear"]
    assert all(isinstance(model[i], bfp.nn.Linear) for i in (0, 2))
    assert y.shape == (8, 64) and y.dtype == torch.float32 and bool(torch.isfinite(y).all())


@pytest.mark.parametrize("fn", [bfp.quantize_model, bfp.nn.Linear.from_float])
def test_public_functions_document_every_parameter(fn):
    import inspect
    doc = inspect.getdoc(fn) or ""
    for name in inspect.signature(fn).parameters:
        assert name in doc, f"{fn.__name__}'s docstring does not mention {name!r}"
    assert "Returns" in doc and "Raises" in doc, fn.__name__
