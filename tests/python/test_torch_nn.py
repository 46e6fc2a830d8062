"""bfp.nn.Linear and bfp.quantize_model (issue #22): weights as torch
buffers that survive state_dict / torch.save; the README's example."""
import copy
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
def test_from_float_holds_the_library_weight(fmt):
    """Matmul formats: the packed image of the library's planes
    (bfp_cuda_weight_pack_host), nothing else; other formats: the planes."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(96, 40)
    q = bfp.nn.Linear.from_float(lin, fmt)
    ref = bfp.quantize(lin.weight.detach(), fmt)
    info = bfp.format_info(fmt)
    planes = [torch.from_numpy(ref.codes).view(40, -1), torch.from_numpy(ref.scales).view(40, -1),
              torch.from_numpy(ref.meta if ref.meta is not None else np.zeros(0, np.uint8)),
              torch.tensor([ref.tensor_scale or 1.0], dtype=torch.float32)]
    if fmt in ("mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4"):
        assert all(getattr(q, p) is None for p in ("codes", "scales", "meta", "tensor_scale"))
        img = np.zeros(bfp.torch_packed.packed_bytes(fmt, 40, 96), np.uint8)
        core = bfp._core
        core.cuda_weight_pack_host(info["id"], ref.codes, ref.scales, ref.meta,
                                   np.array([ref.tensor_scale or 1.0], np.float32), 40, 96, img)
        assert q.packed.dtype == torch.uint8 and q.packed.shape == (img.size,)
        np.testing.assert_array_equal(q.packed.numpy(), img)
        assert set(dict(q.named_buffers())) == {"packed"}
    else:
        assert q.packed is None
        np.testing.assert_array_equal(q.codes.flatten().numpy(), ref.codes)
        np.testing.assert_array_equal(q.scales.flatten().numpy(), ref.scales)
        if ref.meta is not None:
            np.testing.assert_array_equal(q.meta.flatten().numpy(), ref.meta)
    np.testing.assert_array_equal(q.dequantize().numpy(), ref.dequantize())
    assert torch.equal(q.bias, lin.bias)
    x = torch.randn(3, 96)
    want = torch.ops.bfp.matmul(x.bfloat16(), planes[0], planes[1],
                                planes[2].view(40, -1) if ref.meta is not None
                                else torch.zeros(40, 0, dtype=torch.uint8), planes[3],
                                lin.bias.detach().bfloat16(), q.fmt, 40, 96, "bf16").float()
    assert torch.equal(q(x), want)


def test_packed_ops_opcheck_unpack_and_gradients():
    torch.manual_seed(5)
    lin = torch.nn.Linear(130, 33)
    q = bfp.nn.Linear.from_float(lin, "nvfp4+")
    ws = torch.empty(0, dtype=torch.uint8)
    x = torch.randn(2, 5, 130).bfloat16()
    b = lin.bias.detach().bfloat16()
    for args in ((x, q.packed, ws, b, "nvfp4+", 33, 130, "bf16"),
                 (x[0], q.packed, ws, None, "nvfp4+", 33, 130, "bf16"),
                 (x[0], q.packed, ws, b, "nvfp4+", 33, 130, "bf16", True)):
        torch.library.opcheck(torch.ops.bfp.matmul_packed.default, args)
    torch.library.opcheck(torch.ops.bfp.unpack.default, (q.packed, "nvfp4+", 33, 130,
                                                         torch.bfloat16))
    w = torch.ops.bfp.unpack(q.packed, "nvfp4+", 33, 130)
    assert torch.equal(torch.ops.bfp.unpack(q.packed, "nvfp4+", 33, 130, torch.bfloat16),
                       w.bfloat16())
    # another format's, shape's or a cut buffer is refused
    for bad in (("nvfp4", 33, 130), ("nvfp4+", 34, 130)):
        with pytest.raises((ValueError, bfp.BfpError)):
            torch.ops.bfp.unpack(q.packed, *bad)
    with pytest.raises(ValueError, match="packed weight must be uint8"):
        torch.ops.bfp.matmul_packed(x, q.packed[:-1], ws, None, "nvfp4+", 33, 130, "bf16")
    # the gradient flows to x and the bias (W is constant): dx = dy @ W
    xr = torch.randn(4, 130, requires_grad=True)
    y = q(xr)
    y.sum().backward()
    gx = (torch.ones(4, 33) @ w).bfloat16().float()
    assert torch.equal(xr.grad, gx)
    assert torch.equal(q.bias.grad, torch.full((33,), 4.0))


def test_pdl_option_reaches_every_linear_and_keeps_the_cpu_result():
    torch.manual_seed(6)
    base = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Linear(48, 40))
    x = torch.randn(3, 64)
    plain = bfp.quantize_model(copy.deepcopy(base), "mxfp4", exclude=())
    fast = bfp.quantize_model(copy.deepcopy(base), "mxfp4", exclude=(), pdl=True)
    assert [lin.pdl for lin in fast] == [True, True] and not plain[0].pdl
    assert "pdl=True" in repr(fast[0]) and "pdl" not in repr(plain[0])
    assert torch.equal(fast(x), plain(x))  # the CPU path has no launch to overlap
    # a runtime setting, not part of the weight: the state dict is the same
    assert fast.state_dict().keys() == plain.state_dict().keys()
    assert bfp.nn.Linear.from_float(base[0], "nvfp4", pdl=True).pdl


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


@pytest.mark.parametrize("fmt,xf", [("mxfp4", "mxfp8_e4m3"), ("mxfp4+", "mxfp4+"),
                                    ("nvfp4", "nvfp4"), ("hif4", "mxfp6_e2m3")])
def test_quantized_activations_state_dict_and_compile(fmt, xf):
    """x formats that decode to bf16 exactly keep W packed (x decoded to bf16,
    then the bf16-x matmul); NVFP4 x keeps the planes (torch.ops.bfp.matmul).
    Either way the product is the op's on W's planes with x quantized."""
    from bfp.torch_moe import decodes_to_bf16
    ids = torch.randint(0, 100, (2, 10), generator=torch.Generator().manual_seed(5))
    m = bfp.quantize_model(_lm(0), fmt, x_format=xf)
    lin = m.layers[0].q_proj
    packs = decodes_to_bf16(xf)
    assert isinstance(lin, bfp.nn.Linear) and lin.x_format == xf
    assert (lin.packed is not None) == packs and (lin.codes is None) == packs
    x = torch.randn(3, 64)
    with torch.no_grad():
        w = _lm(0).layers[0].q_proj.weight.detach()
        codes, scales, meta, ts = torch.ops.bfp.quantize(w, fmt)
        want = torch.ops.bfp.matmul(x.bfloat16(), codes, scales, meta, ts, None, fmt, 64, 64,
                                    xf).float()
        assert torch.equal(lin(x), want)
        # the same weight with bf16 activations gives another product
        bf = bfp.nn.Linear.from_float(_lm(0).layers[0].q_proj, fmt)
        assert not torch.equal(lin(x), bf(x))
        ref, eager = _lm(0)(ids), m(ids)
        assert 0 < float((eager - ref).norm() / ref.norm()) < 0.5
        torch.testing.assert_close(torch.compile(m, fullgraph=True)(ids), eager)
    sd = m.state_dict()
    assert sd["layers.0.q_proj." + ("packed" if packs else "codes")].dtype == torch.uint8
    assert sd["layers.0.q_proj._extra_state"]["x_format"] == xf
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    fresh = bfp.quantize_model(_lm(3), fmt, x_format=xf)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    with torch.no_grad():
        assert torch.equal(fresh(ids), eager)
    # a bf16-x module holds W packed: it takes the packed kind (and its
    # x_format), not the planes
    bf16x = bfp.quantize_model(_lm(0), fmt)
    if packs:
        bf16x.load_state_dict(sd)
        with torch.no_grad():
            assert bf16x.layers[0].q_proj.x_format == xf and torch.equal(bf16x(ids), eager)
    else:
        with pytest.raises((ValueError, RuntimeError), match="packed|Missing key"):
            bf16x.load_state_dict(sd)


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
    assert sd["layers.0.q_proj.packed"].dtype == torch.uint8
    assert "layers.0.q_proj.codes" not in sd and "layers.0.q_proj.tensor_scale" not in sd
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
    # .half() / .to(bfloat16) cast the bias, never the packed bytes
    packed = q.packed.clone()
    q.half()
    assert q.packed.dtype == torch.uint8 and torch.equal(q.packed, packed)
    assert q.bias.dtype == torch.float16 and q(x.half()).dtype == torch.float16
    q.to(torch.device("cpu"), torch.bfloat16)
    assert torch.equal(q.packed, packed)
    # a constructed module computes with an all-zero weight
    assert torch.equal(bfp.nn.Linear(64, 32, bias=False, fmt="hif4")(x), torch.zeros(4, 32))
    # plane modules (formats without the packed matmul) keep the float32 tensor scale
    p8 = bfp.nn.Linear.from_float(torch.nn.Linear(64, 32), "mxfp8_e4m3").half()
    assert p8.tensor_scale.dtype == torch.float32 and p8.packed is None


def test_state_dict_of_planes_loads_into_a_packed_module():
    """Checkpoints saved with planes (before weights were packed) still load."""
    torch.manual_seed(6)
    lin = torch.nn.Linear(64, 48)
    q = bfp.nn.Linear.from_float(lin, "mxfp4+")
    codes, scales, meta, ts = torch.ops.bfp.quantize(lin.weight.detach(), "mxfp4+")
    sd = {"codes": codes, "scales": scales, "meta": meta, "tensor_scale": ts,
          "bias": lin.bias.detach(), "_extra_state": q.get_extra_state()}
    fresh = bfp.nn.Linear(64, 48, fmt="mxfp4+")
    fresh.load_state_dict(sd)
    assert torch.equal(fresh.packed, q.packed)


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


@pytest.mark.parametrize("fn", [bfp.quantize_model, bfp.nn.Linear.from_float,
                                bfp.nn.Embedding.from_float])
def test_public_functions_document_every_parameter(fn):
    import inspect
    doc = inspect.getdoc(fn) or ""
    for name in inspect.signature(fn).parameters:
        assert name in doc, f"{fn.__name__}'s docstring does not mention {name!r}"
    assert "Returns" in doc and "Raises" in doc, fn.__name__


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxfp4+", "hif4", "mxfp8_e4m3"])
def test_embedding_rows_are_the_decoded_table_rows(fmt, device):
    if device == "cuda" and not (torch.cuda.is_available() and bfp.cuda_available()):
        pytest.skip("skipped: no GPU")
    torch.manual_seed(3)
    emb = torch.nn.Embedding(37, 70)  # 70: a partial last block
    with torch.no_grad():
        emb.weight[5, 3] = 300.0  # an outlier in one block
        emb.weight[6].zero_()
    ref = torch.from_numpy(bfp.quantize(emb.weight.detach().numpy(), fmt).dequantize())
    q = bfp.nn.Embedding.from_float(emb.to(device), fmt)
    assert torch.equal(q.dequantize().cpu(), ref)
    ids = torch.tensor([[5, 0, 36], [6, 6, 17]], device=device)
    out = q(ids)
    assert out.shape == (2, 3, 70) and out.dtype == torch.float32
    assert torch.equal(out.cpu(), ref[ids.cpu()])
    torch._dynamo.reset()  # each case is a new module: stay under dynamo's recompile limit
    assert torch.equal(torch.compile(q, fullgraph=True)(ids), out)


def test_embedding_state_dict_dtype_and_quantize_model_option():
    model = _lm()
    ids = torch.tensor([[1, 2, 3, 99]])
    kept = bfp.quantize_model(_lm(), "mxfp4")
    assert type(kept.embed_tokens) is torch.nn.Embedding
    bfp.quantize_model(model, "mxfp4", embeddings=True)
    assert isinstance(model.embed_tokens, bfp.nn.Embedding)
    assert isinstance(model.layers[0].q_proj, bfp.nn.Linear)
    assert type(model.lm_head) is torch.nn.Linear  # the default exclude still holds
    # a fresh module of the same shape takes the state dict, through torch.save
    buf = io.BytesIO()
    torch.save(model.embed_tokens.state_dict(), buf)
    fresh = bfp.nn.Embedding(100, 64, "mxfp4")
    fresh.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    assert torch.equal(fresh(ids), model.embed_tokens(ids))
    with pytest.raises(ValueError, match="same format and shape"):
        bfp.nn.Embedding(100, 64, "nvfp4").load_state_dict(model.embed_tokens.state_dict())
    # nvfp4's float32 tensor scale keeps its bits through .to(bfloat16)
    nv = bfp.nn.Embedding.from_float(torch.nn.Embedding(10, 32), "nvfp4")
    ts = nv.tensor_scale.clone()
    nv.to(torch.bfloat16)
    assert nv.tensor_scale.dtype == torch.float32 and torch.equal(nv.tensor_scale, ts)
    with pytest.raises(ValueError, match="max_norm"):
        bfp.nn.Embedding.from_float(torch.nn.Embedding(10, 32, max_norm=1.0), "mxfp4")
    with pytest.raises(TypeError):
        bfp.nn.Embedding.from_float(torch.nn.Linear(3, 4), "mxfp4")
