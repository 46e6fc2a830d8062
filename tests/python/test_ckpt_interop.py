"""`bfp convert` output read back by the other side's own library.

GGUF: the `gguf` package's GGUFReader and its dequantizer (gguf.quants).
compressed-tensors: its QuantizationConfig parses our config.json, its
apply_quantization_config + compress_module give each Linear the parameters
it expects (load_state_dict(strict=True) proves names, dtypes and shapes),
and its decompress_module decodes them. Both must give the values of
`bfp dequantize` of the same output. Copied tensors must be byte-identical.

BFP_CLI names the bfp executable (ctest sets it). BFP_INTEROP=gguf or ct
picks a half (ctest runs them as two tests: ct needs torch).
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import make_ckpt  # noqa: E402

BFP = os.environ.get("BFP_CLI", os.path.join(ROOT, "build", "bfp"))
WHICH = os.environ.get("BFP_INTEROP", "gguf,ct").split(",")


def run(*args):
    p = subprocess.run([BFP, *args], capture_output=True, text=True)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p.stdout


def read_st(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}


def all_inputs(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            out.update(read_st(os.path.join(d, fn)))
    return out


def bfp_values(tmp_path, src, name):
    """bfp dequantize of one tensor, as float32."""
    npy = tmp_path / ("deq_" + name.replace("/", "_") + ".npy")
    if npy.exists():
        npy.unlink()
    run("dequantize", "--name", name, str(src), str(npy))
    return np.load(npy)


def need_gguf():
    try:
        import gguf
        from gguf import quants
    except ImportError as exc:
        pytest.fail(f"{exc}: {sys.executable} -m pip install -r "
                    f"{os.path.join(ROOT, 'requirements-interop.txt')}")
    return gguf, quants


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt") / "in"
    os.makedirs(d)
    make_ckpt.small(str(d))
    return d


# ---- GGUF ---------------------------------------------------------------------

@pytest.mark.skipif("gguf" not in WHICH, reason="BFP_INTEROP excludes gguf")
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_gguf_reader_and_dequantizer(ckpt, tmp_path, fmt):
    gguf, quants = need_gguf()

    out = tmp_path / f"m_{fmt}.gguf"
    run("convert", "-f", fmt, "--layout", "gguf", str(ckpt), str(out))
    r = gguf.GGUFReader(str(out))
    assert r.fields["general.file_type"].contents() == (39 if fmt == "nvfp4" else 38)
    assert r.fields["general.architecture"].contents() == "llama"
    want_type = gguf.GGMLQuantizationType.NVFP4 if fmt == "nvfp4" else gguf.GGMLQuantizationType.MXFP4
    inputs = all_inputs(ckpt)
    assert sorted(t.name for t in r.tensors) == sorted(inputs)
    nq = 0
    for t in r.tensors:
        dtype, shape, raw = inputs[t.name]
        assert list(reversed([int(x) for x in t.shape])) == shape, t.name
        if t.tensor_type == want_type:
            nq += 1
            theirs = quants.dequantize(t.data, t.tensor_type).reshape(shape)
            ours = bfp_values(tmp_path, out, t.name)
            assert ours.shape == theirs.shape
            # equal as numbers (-0.0 == 0.0) ...
            assert np.array_equal(ours, theirs), t.name
            # ... and ggml drops the sign of zero: code 8 decodes to +0
            sign_diff = np.signbit(ours) != np.signbit(theirs)
            assert np.all(ours[sign_diff] == 0), t.name
        else:
            assert bytes(t.data.tobytes()) == raw, t.name  # copied as is
    assert nq >= 3
    # the block of -0.0 in q_proj: bfp keeps the sign, ggml cannot
    q = bfp_values(tmp_path, out, "model.layers.0.self_attn.q_proj.weight")
    assert np.signbit(q[0, 32:64]).all() and not np.signbit(q[0, :32]).any()


# ---- compressed-tensors ----------------------------------------------------

def ct_model(inputs, torch):
    """A module tree with an nn.Linear for every 2-D MODULE.weight."""
    root = torch.nn.Module()
    for name, (dtype, shape, _) in inputs.items():
        if not name.endswith(".weight") or len(shape) != 2:
            continue
        parts = name[:-len(".weight")].split(".")
        m = root
        for p in parts[:-1]:
            if not hasattr(m, p):
                m.add_module(p, torch.nn.Module())
            m = getattr(m, p)
        m.add_module(parts[-1], torch.nn.Linear(shape[1], shape[0], bias=False,
                                                dtype=torch.bfloat16))
    return root


def st_to_torch(torch, dtype, shape, raw):
    tt = {"U8": torch.uint8, "F8_E4M3": torch.float8_e4m3fn, "F32": torch.float32,
          "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64,
          "I8": torch.int8, "I32": torch.int32}[dtype]
    return torch.frombuffer(bytearray(raw), dtype=tt).reshape(shape)


@pytest.mark.skipif("ct" not in WHICH, reason="BFP_INTEROP excludes ct")
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxfp6_e2m3", "mxfp8_e4m3", "mxint8",
                                 "mxint4"])
def test_compressed_tensors_decompressor(ckpt, tmp_path, fmt):
    try:
        import torch
        from compressed_tensors.compressors.base import compress_module, decompress_module
        from compressed_tensors.quantization import (QuantizationConfig,
                                                     apply_quantization_config)
    except ImportError as exc:  # a failure, not a skip: the round trip is the test
        pytest.fail(f"{exc}: install the interop packages: {sys.executable} -m pip "
                    f"install -r {os.path.join(ROOT, 'requirements-interop.txt')}")

    out = tmp_path / f"ct_{fmt}"
    run("convert", "-f", fmt, "--layout", "compressed-tensors", str(ckpt), str(out))
    cfg = json.load(open(out / "config.json"))
    assert cfg["model_type"] == "llama"  # the input's config is kept
    qc = QuantizationConfig.model_validate(cfg["quantization_config"])
    inputs = all_inputs(ckpt)
    outputs = all_inputs(out)
    model = ct_model(inputs, torch)
    apply_quantization_config(model, qc, show_progress=False)
    quantized = [n for n, m in model.named_modules() if hasattr(m, "quantization_scheme")]
    assert len(quantized) >= 4, quantized
    for n, m in model.named_modules():
        if hasattr(m, "quantization_scheme"):
            compress_module(m)
    # every parameter the library expects is in our files, same dtype and
    # shape, as the safetensors library loads them (as transformers does)
    from safetensors.torch import load_file
    state = {}
    for fn in sorted(os.listdir(out)):
        if fn.endswith(".safetensors"):
            state.update(load_file(str(out / fn)))
    assert sorted(state) == sorted(outputs)
    for k, v in outputs.items():
        assert torch.equal(state[k].view(torch.uint8).flatten(),
                           st_to_torch(torch, *v).view(torch.uint8).flatten()), k
    expected = model.state_dict()
    for k, v in expected.items():
        assert k in state, k
        assert state[k].dtype == v.dtype and tuple(state[k].shape) == tuple(v.shape), k
    model.load_state_dict({k: state[k] for k in expected}, strict=True)
    for n, m in model.named_modules():
        if hasattr(m, "quantization_scheme"):
            decompress_module(m)
            theirs = m.weight.detach().to(torch.float32).numpy()
            ours = bfp_values(tmp_path, out, n)
            theirs_bf16 = m.weight.detach()
            ours_bf16 = torch.from_numpy(ours).to(torch.bfloat16)
            if fmt == "nvfp4":
                # theirs: code * (scale / global) rounded twice in f32, then to
                # bf16; ours: code * scale / global rounded once. At most one
                # bf16 step apart, and equal almost everywhere.
                diff = (theirs_bf16.view(torch.int16).to(torch.int32)
                        - ours_bf16.view(torch.int16).to(torch.int32)).abs()
                assert int(diff.max()) <= 1, n
                assert float((diff != 0).float().mean()) < 0.01, n
            else:
                assert torch.equal(theirs_bf16.view(torch.int16), ours_bf16.view(torch.int16)), n
            assert theirs.shape == ours.shape
    # tensors not quantized are copied byte for byte
    for k, (dtype, shape, raw) in inputs.items():
        if k[:-len(".weight")] not in quantized:
            assert outputs[k] == (dtype, shape, raw), k


@pytest.mark.skipif("gguf" not in WHICH, reason="BFP_INTEROP excludes gguf")
def test_gguf_input_keeps_key_values_and_other_types(tmp_path):
    """A GGUF written by gguf's own GGUFWriter, converted to mxfp4: its
    key-values come through (the four the output restates aside), a Q8_0
    tensor is copied byte for byte, and the F16 weight is quantized exactly as
    `bfp quantize` quantizes it."""
    gguf, quants = need_gguf()
    rng = np.random.default_rng(5)
    src = tmp_path / "in.gguf"
    w = gguf.GGUFWriter(str(src), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
    w.add_file_type(1)
    emb = rng.standard_normal((40, 64)).astype(np.float32)
    q = (rng.standard_normal((64, 64)) * 0.05).astype(np.float16)
    down = rng.standard_normal((64, 64)).astype(np.float32)
    down_q8 = quants.quantize(down, gguf.GGMLQuantizationType.Q8_0)
    norm = rng.standard_normal(64).astype(np.float32)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("blk.0.attn_q.weight", q)
    w.add_tensor("blk.0.ffn_down.weight", down_q8,
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_norm.weight", norm)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    out = tmp_path / "out.gguf"
    run("convert", "-f", "mxfp4", "--layout", "gguf", str(src), str(out))
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(out))
    restated = {"general.file_type", "general.quantization_version", "general.alignment"}
    for k, f in a.fields.items():
        if k.startswith("GGUF.") or k in restated:
            continue
        assert k in b.fields, k
        assert b.fields[k].contents() == f.contents(), k
    assert b.fields["general.file_type"].contents() == 38
    tb = {t.name: t for t in b.tensors}
    ta = {t.name: t for t in a.tensors}
    assert tb["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tb["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tb["blk.0.ffn_down.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert tb["blk.0.ffn_down.weight"].data.tobytes() == ta["blk.0.ffn_down.weight"].data.tobytes()
    assert tb["token_embd.weight"].data.tobytes() == emb.tobytes()
    t = tb["blk.0.attn_q.weight"]
    assert t.tensor_type == gguf.GGMLQuantizationType.MXFP4
    theirs = quants.dequantize(t.data, t.tensor_type).reshape(64, 64)
    run("quantize", "-f", "mxfp4", "--name", "blk.0.attn_q.weight", str(src),
        str(tmp_path / "q.safetensors"))
    ref = bfp_values(tmp_path, tmp_path / "q.safetensors", "blk.0.attn_q.weight")
    assert np.array_equal(theirs, ref)
