"""bfp.save / bfp.load: the planar-v1 container (docs/container.md) from Python.

Files must be byte-identical to what `bfp quantize` writes, `bfp dequantize`
must read ours, and bfp.load must read the CLI's. Needs BFP_CLI for the
interop tests (skipped without it).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess

import ml_dtypes
import numpy as np
import pytest

import bfp

from test_package import ALL, cli, heavy, run  # noqa: E402  (same directory)

BF16 = ml_dtypes.bfloat16


def same(a: bfp.QTensor, b: bfp.QTensor) -> None:
    assert a.format == b.format and a.shape == b.shape and a.axis % max(len(a.shape), 1) == \
        b.axis % max(len(b.shape), 1)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales)
    assert (a.meta is None) == (b.meta is None)
    if a.meta is not None:
        assert np.array_equal(a.meta, b.meta)
    assert a.tensor_scale == b.tensor_scale


@pytest.mark.parametrize("fmt", ALL)
def test_save_load_round_trip(tmp_path, fmt):
    x = heavy((3, 5, 70), seed=1)
    q = bfp.quantize(x, fmt)
    p = tmp_path / "q.safetensors"
    bfp.save(q, p)
    r = bfp.load(p)
    same(q, r)
    assert np.array_equal(r.dequantize(), q.dequantize())
    assert r.options == q.options


def test_header_layout(tmp_path):
    q = bfp.quantize(heavy((4, 40), seed=2), "nvfp4+", nvfp4_no_tensor_scale=True)
    p = tmp_path / "q.safetensors"
    bfp.save(q, p, name="blk.0.w")
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    hdr = raw[8:8 + n]
    assert hdr.startswith(b'{"__metadata__":{"bfp.format":"nvfp4+","bfp.shape":"[4, 40]",'
                          b'"bfp.name":"blk.0.w"')
    h = json.loads(hdr)
    # F32 first, then the U8 planes by name; contiguous
    names = [k for k in h if k != "__metadata__"]
    assert names == ["blk.0.w.tensor_scale", "blk.0.w.codes", "blk.0.w.meta", "blk.0.w.scales"]
    offs = [h[k]["data_offsets"] for k in names]
    assert offs[0] == [0, 4] and all(a[1] == b[0] for a, b in zip(offs, offs[1:]))
    assert offs[-1][1] == len(raw) - 8 - n
    md = h["__metadata__"]
    assert md["bfp.layout"] == "planar-v1" and md["bfp.version"] == bfp.library_version()
    assert json.loads(md["bfp.options"]) == {"rounding": "default", "seed": "0",
                                             "scale_mode": "floor",
                                             "nvfp4_no_tensor_scale": True, "nvfp4_2d": False}
    safetensors = pytest.importorskip("safetensors.numpy")
    st = safetensors.load_file(str(p))
    assert np.array_equal(st["blk.0.w.codes"], q.codes)
    assert st["blk.0.w.tensor_scale"].tolist() == [q.tensor_scale]


@pytest.mark.parametrize("fmt,dtype", [("mxfp4", np.float32), ("mxfp4+", BF16),
                                       ("nvfp4", np.float32), ("nvfp4+", np.float16),
                                       ("hif4", np.float32), ("mxfp6_e3m2++", np.float32),
                                       ("mxint8", BF16)])
def test_files_byte_identical_to_cli(tmp_path, fmt, dtype):
    exe = cli()
    x = heavy((6, 2, 96), dtype, seed=3)
    np.save(tmp_path / "x.npy", x)
    run(exe, "quantize", "-f", fmt, tmp_path / "x.npy", tmp_path / "cli.safetensors")
    bfp.save(bfp.quantize(x, fmt), tmp_path / "py.safetensors")
    assert (tmp_path / "py.safetensors").read_bytes() == (tmp_path / "cli.safetensors").read_bytes()


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp4++", "nvfp4", "nvfp4+", "hif4", "mxfp8_e5m2+"])
def test_cli_dequantizes_our_files_and_we_read_its(tmp_path, fmt):
    exe = cli()
    x = heavy((5, 130), seed=4)
    q = bfp.quantize(x, fmt, rounding="stochastic", seed=9)
    bfp.save(q, tmp_path / "q.safetensors", name="layer.w")
    run(exe, "dequantize", tmp_path / "q.safetensors", tmp_path / "y.npy")
    assert np.array_equal(np.load(tmp_path / "y.npy"), q.dequantize())
    run(exe, "dequantize", "-t", "bf16", tmp_path / "q.safetensors", tmp_path / "y16.npy")
    assert np.array_equal(np.load(tmp_path / "y16.npy").view(BF16), q.dequantize(BF16))
    # and the other way round
    np.save(tmp_path / "x.npy", x)
    run(exe, "quantize", "-f", fmt, "--rounding", "stochastic", "--seed", "9",
        tmp_path / "x.npy", tmp_path / "c.safetensors")
    r = bfp.load(tmp_path / "c.safetensors")
    same(q, r)
    assert r.options["rounding"] == "stochastic" and r.options["seed"] == "9"


def test_axis_survives_save(tmp_path):
    x = heavy((64, 3), seed=5)
    q = bfp.quantize(x, "mxfp4+", axis=0)
    bfp.save(q, tmp_path / "a.safetensors")
    r = bfp.load(tmp_path / "a.safetensors")
    assert r.shape == (64, 3) and r.axis == 0
    assert np.array_equal(r.dequantize(), q.dequantize())
    if os.environ.get("BFP_CLI"):
        # the CLI ignores bfp.axis and decodes the blocked layout (3, 64)
        run(cli(), "dequantize", tmp_path / "a.safetensors", tmp_path / "a.npy")
        assert np.array_equal(np.load(tmp_path / "a.npy"), q.dequantize().T)


def test_state_dict(tmp_path):
    torch_mod = None
    try:
        import torch as torch_mod  # noqa: F401
    except ImportError:
        pass
    sd = {
        "layers.0/attn.q.weight": bfp.quantize(heavy((32, 64), seed=6), "mxfp4+"),
        "layers.0.mlp.up.weight": bfp.quantize(heavy((16, 64), seed=7), "nvfp4"),
        "layers.0.norm.weight": np.ones(64, np.float32),
        "layers.0.bias": heavy((64,), BF16, seed=8),
        "embed": heavy((10, 8), np.float16, seed=9),
    }
    d = tmp_path / "sd"
    bfp.save(sd, d)
    files = sorted(os.listdir(d))
    assert "bfp_index.json" in files and "float.safetensors" in files
    r = bfp.load(d)
    assert list(r) == list(sd)
    for k, v in sd.items():
        if isinstance(v, bfp.QTensor):
            same(v, r[k])
        else:
            assert r[k].dtype == v.dtype and np.array_equal(r[k].view(np.uint8), v.view(np.uint8))
    with pytest.raises(FileExistsError, match="force=True"):
        bfp.save(sd, d)
    bfp.save(sd, d, force=True)
    # every quantized file is an ordinary container the CLI can read
    if os.environ.get("BFP_CLI"):
        idx = json.loads((d / "bfp_index.json").read_text())
        f = idx["quantized"]["layers.0/attn.q.weight"]
        run(cli(), "dequantize", "--name", "layers.0/attn.q.weight", d / f, tmp_path / "q.npy")
        assert np.array_equal(np.load(tmp_path / "q.npy"), sd["layers.0/attn.q.weight"].dequantize())
    if torch_mod is not None:
        bfp.save({"w": torch_mod.ones(3, dtype=torch_mod.bfloat16)}, tmp_path / "t")
        assert bfp.load(tmp_path / "t")["w"].dtype == BF16


def test_no_clobber_and_name(tmp_path):
    q = bfp.quantize(heavy((2, 32)), "mxfp4")
    p = tmp_path / "q.safetensors"
    bfp.save(q, p)
    before = p.read_bytes()
    with pytest.raises(FileExistsError, match="use force=True"):
        bfp.save(bfp.quantize(heavy((2, 32), seed=1), "mxfp4"), p)
    assert p.read_bytes() == before
    assert [f for f in os.listdir(tmp_path)] == ["q.safetensors"]  # no temporary left
    bfp.save(q, p, force=True)
    with pytest.raises(bfp.BfpError, match="holds tensor 'tensor', not 'w': invalid argument"):
        bfp.load(p, name="w")
    with pytest.raises(TypeError):
        bfp.save([q], tmp_path / "x")


def write_st(path, header: dict, data: bytes):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_malformed_files(tmp_path):
    q = bfp.quantize(heavy((2, 64)), "mxfp4+")
    good = tmp_path / "good.safetensors"
    bfp.save(q, good)
    raw = good.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    h = json.loads(raw[8:8 + n])
    data = raw[8 + n:]

    def variant(name, mutate, match):
        hh = json.loads(json.dumps(h))
        d = mutate(hh)
        d = d if isinstance(d, bytes) else None
        p = tmp_path / f"{name}.safetensors"
        write_st(p, hh, data if d is None else d)
        with pytest.raises(bfp.BfpError, match=match) as ei:
            bfp.load(p)
        return ei.value

    e = variant("layout", lambda hh: hh["__metadata__"].update({"bfp.layout": "planar-v2"}),
                "unsupported bfp.layout 'planar-v2'")
    assert e.status == 7
    variant("fmt", lambda hh: hh["__metadata__"].update({"bfp.format": "mxfp5"}),
            "unknown format 'mxfp5'")
    variant("shape", lambda hh: hh["__metadata__"].update({"bfp.shape": "[2, 0]"}),
            "bfp.shape")
    variant("shape2", lambda hh: hh["__metadata__"].update({"bfp.shape": "[2, 65]"}),
            r"tensor.codes is U8 \[64\], expected U8 \[66\]")
    variant("opts", lambda hh: hh["__metadata__"].update({"bfp.options": '{"rounding":"up"}'}),
            "bad rounding")
    variant("nometa", lambda hh: hh.pop("tensor.meta"), "tensor.meta is missing")
    variant("noname", lambda hh: hh["__metadata__"].pop("bfp.name"), "not a bfp quantized")
    variant("offs", lambda hh: hh["tensor.scales"].update({"data_offsets": [0, 999]}),
            "outside the")
    variant("trunc", lambda hh: data[:-3], "outside the")
    p = tmp_path / "short.safetensors"
    p.write_bytes(raw[:5])
    with pytest.raises(bfp.BfpError, match="too short"):
        bfp.load(p)
    p.write_bytes(struct.pack("<Q", 1 << 40) + raw[8:])
    with pytest.raises(bfp.BfpError, match="header length"):
        bfp.load(p)
    p.write_bytes(raw[:8] + b"[" + raw[9:])
    with pytest.raises(bfp.BfpError, match="bad safetensors header"):
        bfp.load(p)
    # and the C loader refuses the same files
    if os.environ.get("BFP_CLI"):
        r = subprocess.run([cli(), "dequantize", tmp_path / "layout.safetensors",
                            tmp_path / "o.npy"], capture_output=True, text=True)
        assert r.returncode != 0 and "planar-v1" in r.stderr
