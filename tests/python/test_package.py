"""Tests of the Python package `bfp` (python/): the numpy/torch API.

The package must be importable: `pip install ./python`, or the in-tree build
that ctest uses (PYTHONPATH=build/python). A missing package FAILS with the
install command, never skips. Tests that compare with the C CLI need BFP_CLI
(the path of build/bfp; ctest sets it) and skip without it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

try:
    import bfp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise pytest.UsageError(
        f"the bfp package is not importable ({exc}) by {sys.executable}; run "
        f"{sys.executable} -m pip install ./python (or build the in-tree "
        "extension and set PYTHONPATH=build/python)") from exc

BF16 = ml_dtypes.bfloat16
ALL = [f["name"] for f in bfp.formats()]
MX = ["mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "mxint4"]
# one of each family and element/scale kind
SOME = ["mxfp4", "mxfp6_e3m2", "mxfp8_e4m3", "mxint8", "nvfp4", "hif4", "mxfp4+",
        "mxfp8_e5m2+", "mxint4+", "mxfp4++", "mxfp6_e2m3++", "nvfp4+"]
RNG = np.random.default_rng(20260512)


def heavy(shape, dtype=np.float32, seed=0):
    """Gaussian values with a few large outliers (the case MX+ is about)."""
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    idx = r.choice(flat.size, size=max(1, flat.size // 50), replace=False)
    flat[idx] *= r.uniform(8, 60, size=idx.size).astype(np.float32)
    return x.astype(dtype)


def cli():
    exe = os.environ.get("BFP_CLI")
    if not exe:
        pytest.skip("BFP_CLI is not set (ctest sets it; by hand: BFP_CLI=build/bfp)")
    if not os.path.isfile(exe):
        pytest.fail(f"BFP_CLI={exe!r} does not exist")
    return exe


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


# ---------------------------------------------------------------- the table

def test_formats_table():
    fs = bfp.formats()
    assert len(fs) == 22
    names = [f["name"] for f in fs]
    assert len(set(names)) == len(names)
    by = {f["name"]: f for f in fs}
    assert by["mxfp4"]["block"] == 32 and by["mxfp4"]["bits_per_value"] == 4.25
    assert by["nvfp4"]["has_tensor_scale"] and by["nvfp4"]["block"] == 16
    assert by["hif4"]["scale_bytes"] == 4 and by["hif4"]["block"] == 64
    assert by["mxfp4+"]["meta_bytes"] == 1 and by["mxfp4+"]["family"] == "mx+"
    assert by["mxfp4++"]["family"] == "mx++" and by["nvfp4+"]["family"] == "nvfp4+"
    for f in fs:
        assert set(f) >= {"id", "name", "family", "block", "elem_bits", "elem", "scale",
                          "scale_bytes", "meta_bytes", "has_tensor_scale", "bits_per_value",
                          "max_value", "description"}
    # a copy: callers may not corrupt the cache
    fs[0]["name"] = "x"
    assert bfp.formats()[0]["name"] == "mxfp4"
    assert bfp.format_info("MXFP4+")["id"] == 10 and bfp.format_info(10)["name"] == "mxfp4+"


def test_format_rules_from_the_library():
    # SPEC: scale modes for MX alone; the tensor scale opt-out for NVFP4(+);
    # 2-D for NVFP4, not NVFP4+ (section 5); HiF4 rounds half away by default
    by = {f["name"]: f for f in bfp.formats()}
    for name, f in by.items():
        assert ("scale_mode" in f["options"]) == (name in MX), name
        assert ("nvfp4_no_tensor_scale" in f["options"]) == (name in ("nvfp4", "nvfp4+")), name
        assert ("nvfp4_2d" in f["options"]) == (name == "nvfp4"), name
        assert "rounding" in f["options"]
        assert f["default_rounding"] == (2 if name == "hif4" else 1), name
        assert f["matmul"] == (name in ("mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4")), name
    with pytest.raises(bfp.BfpError, match="nvfp4_2d=True applies only to nvfp4 \\(nvfp4\\+ has no 2-D variant\\), not nvfp4\\+") as ei:
        bfp.quantize(np.ones((16, 16), np.float32), "nvfp4+", nvfp4_2d=True)
    assert ei.value.status == 4


@pytest.mark.parametrize("env,ok", [({"BFP_ISA": "generic"}, "generic"),
                                    ({"BFP_ISA": "avx3"}, "BFP_ISA='avx3' is not one of"),
                                    ({"BFP_THREADS": "2"}, None),
                                    ({"BFP_THREADS": "two"}, "BFP_THREADS='two' is not a thread"),
                                    ({"BFP_THREADS": "-1"}, "BFP_THREADS='-1' is not a thread")])
def test_environment_at_import(env, ok):
    # the module passes BFP_ISA / BFP_THREADS to the library; a bad one fails the import
    p = subprocess.run([sys.executable, "-c", "import bfp; print(bfp.isa())"],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    if ok is None or ok == "generic":
        assert p.returncode == 0, p.stderr
        if ok:
            assert p.stdout.strip() == ok
    else:
        assert p.returncode != 0 and ok in p.stderr and "BfpError" in p.stderr, p.stderr


def test_formats_match_cli():
    out = run(cli(), "formats")
    rows = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert rows == ALL


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("fmt", ALL)
def test_quantize_dequantize_matches_fake_quant(fmt):
    x = heavy((7, 100), seed=1)  # partial last block in every block size
    q = bfp.quantize(x, fmt)
    info = bfp.format_info(fmt)
    assert q.format == fmt and q.shape == (7, 100)
    assert q.codes.dtype == np.uint8 and q.scales.dtype == np.uint8
    assert (q.meta is not None) == (info["meta_bytes"] > 0)
    assert (q.tensor_scale is not None) == info["has_tensor_scale"]
    bpr = -(-100 // info["block"])
    assert q.scales.size == 7 * bpr * info["scale_bytes"]
    assert q.codes.size == 7 * -(-100 * info["elem_bits"] // 8)
    assert q.stats["blocks"] == 7 * bpr and q.stats["nonfinite_blocks"] == 0
    y = q.dequantize()
    assert y.dtype == np.float32 and y.shape == x.shape
    assert np.array_equal(y, bfp.fake_quant(x, fmt))
    assert np.all(np.isfinite(y))
    # the error is small next to the signal (4-bit formats: > 10 dB)
    assert bfp.error(x, fmt)["sqnr_db"] > 10


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxfp4+", "hif4"])
def test_dtypes_in_and_out(fmt):
    x32 = heavy((4, 64), seed=2)
    for dt in (np.float16, BF16):
        x = x32.astype(dt)
        y = bfp.fake_quant(x, fmt)
        assert y.dtype == x.dtype and y.shape == x.shape
        q = bfp.quantize(x, fmt)
        assert q.source_dtype == ("float16" if dt is np.float16 else "bfloat16")
        # decoding to the input dtype is fake_quant
        assert np.array_equal(q.dequantize(dt).view(np.uint16), y.view(np.uint16))
        # quantizing bf16/f16 equals quantizing its exact float32 value
        q32 = bfp.quantize(x.astype(np.float32), fmt)
        assert np.array_equal(q.codes, q32.codes) and np.array_equal(q.scales, q32.scales)
    q = bfp.quantize(x32, fmt)
    assert q.dequantize("bfloat16").dtype == BF16
    assert np.array_equal(q.dequantize(BF16).astype(np.float32),
                          q.dequantize().astype(BF16).astype(np.float32))


def test_axis_moves_blocks():
    x = heavy((64, 5, 48), seed=3)
    for axis in (0, 1, -2):
        q = bfp.quantize(x, "mxfp4+", axis=axis)
        ref = bfp.quantize(np.ascontiguousarray(np.moveaxis(x, axis, -1)), "mxfp4+")
        assert np.array_equal(q.codes, ref.codes) and np.array_equal(q.scales, ref.scales)
        assert np.array_equal(q.meta, ref.meta)
        assert q.shape == x.shape and q.axis == axis % 3
        y = q.dequantize()
        assert y.shape == x.shape and y.flags.c_contiguous
        assert np.array_equal(y, np.moveaxis(ref.dequantize(), -1, axis % 3))
        f = bfp.fake_quant(x, "mxfp4+", axis=axis)
        assert f.shape == x.shape and np.array_equal(f, y)


def test_shapes_1d_0d_and_views():
    x = heavy((70,), seed=4)
    q = bfp.quantize(x, "nvfp4")
    assert q.shape == (70,) and q.rows == 1 and q.cols == 70
    assert np.array_equal(q.dequantize(), bfp.fake_quant(x.reshape(1, 70), "nvfp4")[0])
    s = np.float32(3.3)
    y = bfp.fake_quant(np.asarray(s), "mxfp4")
    assert y.shape == () and float(y) == 3.0
    # a strided view is copied by default and refused without copies
    base = heavy((8, 64), seed=5)
    view = base[:, ::2]
    assert np.array_equal(bfp.fake_quant(view, "mxfp4"),
                          bfp.fake_quant(np.ascontiguousarray(view), "mxfp4"))
    with pytest.raises(ValueError, match="allow_copy=False"):
        bfp.quantize(view, "mxfp4", allow_copy=False)
    with pytest.raises(ValueError, match="allow_copy=False"):
        bfp.quantize(base, "mxfp4", axis=0, allow_copy=False)
    # contiguous, last axis: read in place
    bfp.quantize(base, "mxfp4", allow_copy=False)
    bfp.quantize(base[2:5], "mxfp4", allow_copy=False)
    # big-endian input is converted only if allowed
    be = base.astype(">f4")
    assert np.array_equal(bfp.fake_quant(be, "mxfp4"), bfp.fake_quant(base, "mxfp4"))
    with pytest.raises(ValueError, match="byte order"):
        bfp.quantize(be, "mxfp4", allow_copy=False)


def test_threads_do_not_change_results():
    x = heavy((512, 256), seed=6)
    a = bfp.quantize(x, "mxfp4++", threads=1)
    b = bfp.quantize(x, "mxfp4++", threads=0)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.meta, b.meta)


@pytest.mark.parametrize("fmt", MX)
def test_fake_quant_is_idempotent_for_mx(fmt):
    # An MX block's values are code * 2^e with the same max exponent, so
    # quantizing them again reproduces them exactly.
    for seed in range(3):
        y = bfp.fake_quant(heavy((16, 96), seed=seed), fmt)
        assert np.array_equal(bfp.fake_quant(y, fmt), y)


def test_nonfinite_blocks():
    x = heavy((2, 64), seed=7)
    x[0, 3] = np.nan
    x[1, 40] = np.inf
    q = bfp.quantize(x, "mxfp4")
    assert q.stats["nonfinite_blocks"] == 2
    y = q.dequantize()
    assert np.isnan(y[0, :32]).all() and np.isfinite(y[0, 32:]).all()
    assert np.isnan(y[1, 32:]).all() and np.isfinite(y[1, :32]).all()
    e = bfp.error(x, "mxfp4")
    assert e["count"] == 128 - 2 - 62  # non-finite inputs and NaN outputs are left out
    assert e["nonfinite_blocks"] == 2


def test_validate_flags_impossible_bytes():
    q = bfp.quantize(heavy((2, 64), seed=8), "mxfp4+")
    assert q.validate() == (0, -1)
    q.meta[3] = 0xFF  # BM index 31 with an MX++ delta: impossible for MX+
    bad, first = q.validate()
    assert bad >= 1 and first == 3


def test_stochastic_rounding_is_reproducible():
    x = heavy((4, 128), seed=9)
    a = bfp.fake_quant(x, "mxfp4", rounding="stochastic", seed=5)
    b = bfp.fake_quant(x, "mxfp4", rounding="stochastic", seed=5)
    c = bfp.fake_quant(x, "mxfp4", rounding="stochastic", seed=6)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    q = bfp.quantize(x, "mxfp4", rounding="stochastic", seed=2**64 - 1)
    assert q.options["seed"] == str(2**64 - 1) and q.options["rounding"] == "stochastic"


# ---------------------------------------------------------------- errors

def test_error_messages():
    x = heavy((4, 64))
    with pytest.raises(bfp.BfpError, match=r"'mxfp5' is not one of mxfp4, .*nvfp4\+: unknown format") as ei:
        bfp.quantize(x, "mxfp5")
    assert ei.value.status == 2 and ei.value.status_str == "unknown format"
    assert isinstance(ei.value, ValueError)
    with pytest.raises(TypeError, match="float64.*float32, float16 or bfloat16"):
        bfp.quantize(x.astype(np.float64), "mxfp4")
    with pytest.raises(TypeError, match="int32"):
        bfp.fake_quant(np.ones((2, 32), np.int32), "mxfp4")
    with pytest.raises(TypeError, match="list input"):
        bfp.quantize([1.0, 2.0], "mxfp4")
    with pytest.raises(TypeError, match="format must be"):
        bfp.quantize(x, 3.5)
    with pytest.raises(bfp.BfpError, match="invalid shape") as ei:
        bfp.quantize(np.zeros((0, 32), np.float32), "mxfp4")
    assert ei.value.status == 3
    with pytest.raises(bfp.BfpError, match="only to the MX formats.*option not supported") as ei:
        bfp.quantize(x, "mxfp4+", scale_mode="ceil")
    assert ei.value.status == 4
    with pytest.raises(bfp.BfpError, match="nvfp4_2d=True applies only to nvfp4.*not supported"):
        bfp.quantize(x, "mxfp4", nvfp4_2d=True)
    # NVFP4+ has no 2-D variant; formats without a choice of scale rule refuse even 'floor'
    with pytest.raises(bfp.BfpError, match="nvfp4_2d=True applies only to nvfp4 .*not nvfp4\\+"):
        bfp.quantize(x, "nvfp4+", nvfp4_2d=True)
    for fmt in ("nvfp4", "hif4", "mxfp4+", "mxfp4++"):
        with pytest.raises(bfp.BfpError,
                           match=f"scale_mode='floor' applies only to the MX formats, not {fmt}"):
            bfp.quantize(x, fmt, scale_mode="floor")
    qa, qb = bfp.quantize(x, "mxfp4", scale_mode="floor"), bfp.quantize(x, "mxfp4")
    assert np.array_equal(qa.codes, qb.codes) and np.array_equal(qa.scales, qb.scales)
    with pytest.raises(ValueError, match="rounding 'up' is not one of"):
        bfp.quantize(x, "mxfp4", rounding="up")
    with pytest.raises(ValueError, match="scale_mode 'x'"):
        bfp.quantize(x, "mxfp4", scale_mode="x")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        bfp.quantize(x, "mxfp4", axis=2)
    with pytest.raises(ValueError, match="seed"):
        bfp.quantize(x, "mxfp4", seed=-1)
    with pytest.raises(TypeError, match="output dtype"):
        bfp.quantize(x, "mxfp4").dequantize(np.int8)


def test_low_level_buffer_checks():
    from bfp import _core
    x = heavy((2, 64))
    with pytest.raises(ValueError, match="codes plane: buffer has 1 bytes, expected 64"):
        _core.quantize(1, _core.DTYPE_F32, x, 2, 64, (0, 0, 0, 0, 0, 0), bytearray(1),
                       bytearray(4), None, None)
    with pytest.raises(TypeError, match="writable"):
        _core.quantize(1, _core.DTYPE_F32, x, 2, 64, (0, 0, 0, 0, 0, 0), bytes(64),
                       bytearray(4), None, None)
    with pytest.raises(bfp.BfpError, match="format id 99"):
        _core.plane_sizes(99, 1, 1)


# ---------------------------------------------------------------- vs the C CLI

GOLDEN_CASES = [
    # (format, dtype, rows, cols, python options, CLI options)
    ("mxfp4", np.float32, 5, 96, {}, []),
    ("mxfp4", BF16, 3, 70, {}, []),
    ("mxfp6_e2m3", np.float16, 4, 64, {}, []),
    ("mxfp8_e4m3", np.float32, 3, 33, {"scale_mode": "rceil"}, ["--scale-mode", "rceil"]),
    ("mxint8", np.float32, 2, 64, {"rounding": "toward_zero"}, ["--rounding", "zero"]),
    ("nvfp4", np.float32, 32, 48, {}, []),
    ("nvfp4", BF16, 32, 40, {"nvfp4_2d": True}, ["--2d"]),
    ("nvfp4+", np.float32, 6, 50, {"nvfp4_no_tensor_scale": True}, ["--no-tensor-scale"]),
    ("hif4", np.float32, 3, 130, {}, []),
    ("hif4", np.float32, 2, 64, {"rounding": "nearest_even"}, ["--rounding", "rne"]),
    ("mxfp4+", np.float32, 4, 100, {}, []),
    ("mxfp4++", BF16, 4, 64, {}, []),
    ("mxfp6_e2m3+", np.float32, 3, 64, {}, []),
    ("mxint4+", np.float32, 3, 64, {"rounding": "stochastic", "seed": 77},
     ["--rounding", "stochastic", "--seed", "77"]),
]


@pytest.mark.parametrize("fmt,dtype,rows,cols,opts,cli_opts", GOLDEN_CASES,
                         ids=[f"{c[0]}-{np.dtype(c[1]).name}-{c[2]}x{c[3]}" for c in GOLDEN_CASES])
def test_bytes_equal_cli_golden(tmp_path, fmt, dtype, rows, cols, opts, cli_opts):
    exe = cli()
    x = heavy((rows, cols), dtype, seed=rows * cols)
    x.reshape(-1)[5] = 0
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    t = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(BF16): "bf16"}
    run(exe, "golden", "-f", fmt, "-s", f"{rows}x{cols}", "-t", t[np.dtype(dtype)], *cli_opts,
        tmp_path / "in.bin", tmp_path / "out")
    out = tmp_path / "out"
    q = bfp.quantize(x, fmt, **opts)
    assert q.codes.tobytes() == (out / "codes.bin").read_bytes()
    assert q.scales.tobytes() == (out / "scales.bin").read_bytes()
    if q.meta is not None:
        assert q.meta.tobytes() == (out / "meta.bin").read_bytes()
    else:
        assert not (out / "meta.bin").exists()
    if q.tensor_scale is not None:
        assert np.float32(q.tensor_scale).tobytes() == (out / "tensor_scale.bin").read_bytes()
    assert q.dequantize().tobytes() == (out / "dequant.f32.bin").read_bytes()
    report = json.loads((out / "report.json").read_text())
    assert report["blocks"] == q.stats["blocks"]
    e = bfp.error(x, fmt, **opts)
    assert e["sqnr_db"] == pytest.approx(report["sqnr_db"], rel=1e-12)
    assert e["rmse"] == pytest.approx(report["rmse"], rel=1e-12)


def test_error_equals_cli_compare(tmp_path):
    exe = cli()
    x = heavy((48, 160), seed=11)
    np.save(tmp_path / "x.npy", x)
    fmts = ["mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+", "hif4", "mxfp8_e4m3"]
    res = json.loads(run(exe, "compare", "--json", "-f", ",".join(fmts), tmp_path / "x.npy"))
    rows = {r["format"]: r for r in res[0]["results"]}
    for fmt in fmts:
        e = bfp.error(x, fmt)
        for k in ("rmse", "sqnr_db", "max_rel_err", "mean_rel_err", "max_abs_err", "bm_share"):
            assert e[k] == pytest.approx(rows[fmt][k], rel=1e-12), (fmt, k)
        assert e["blocks"] == rows[fmt]["blocks"]


# ---------------------------------------------------------------- torch

def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    x = heavy((8, 64), seed=12)
    for tdt, ndt in ((torch.float32, np.float32), (torch.float16, np.float16),
                     (torch.bfloat16, BF16)):
        t = torch.from_numpy(x).to(tdt)
        y = bfp.fake_quant(t, "mxfp4+")
        assert isinstance(y, torch.Tensor) and y.dtype == tdt and tuple(y.shape) == (8, 64)
        ref = bfp.fake_quant(x.astype(ndt), "mxfp4+")
        assert np.array_equal(y.float().numpy(), ref.astype(np.float32))
        q = bfp.quantize(t, "nvfp4", axis=0)
        assert np.array_equal(q.dequantize(), bfp.quantize(x.astype(ndt), "nvfp4", axis=0).dequantize())
    tt = torch.from_numpy(x).requires_grad_(True)
    assert bfp.error(tt, "mxfp4")["sqnr_db"] == bfp.error(x, "mxfp4")["sqnr_db"]
    with pytest.raises(ValueError, match="allow_copy=False"):
        bfp.quantize(torch.from_numpy(x).t(), "mxfp4", allow_copy=False)
    with pytest.raises(TypeError, match="torch.float64"):
        bfp.quantize(torch.zeros(2, 32, dtype=torch.float64), "mxfp4")


def test_torch_cuda_needs_a_cuda_build():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.randn(4, 64, device="cuda")
    if not bfp.cuda_available():
        with pytest.raises(NotImplementedError, match="cuda_available"):
            bfp.fake_quant(x, "mxfp4")
        return
    # the GPU kernels give the CPU reference's planes and values, bit for bit
    for fmt in ALL:
        for tdt, ndt in ((torch.float32, np.float32), (torch.bfloat16, BF16)):
            xc = heavy((48, 96), ndt, seed=len(fmt))
            t = torch.from_numpy(xc.view(np.uint16) if ndt is BF16 else xc)
            t = (t.view(torch.bfloat16) if ndt is BF16 else t).cuda()
            y = bfp.fake_quant(t, fmt)
            assert y.is_cuda and y.dtype == tdt
            ref = bfp.fake_quant(xc, fmt)
            got = y.cpu().view(torch.int16).numpy().view(BF16) if ndt is BF16 else y.cpu().numpy()
            assert np.array_equal(got.view(np.uint8), ref.view(np.uint8)), (fmt, tdt)
            q, qc = bfp.quantize(t, fmt, axis=0), bfp.quantize(xc, fmt, axis=0)
            assert np.array_equal(q.codes, qc.codes) and np.array_equal(q.scales, qc.scales)
            assert q.tensor_scale == qc.tensor_scale


def test_dlpack_objects():
    x = heavy((4, 64), seed=13)

    class Exporter:  # something that is not numpy but speaks DLPack
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    assert np.array_equal(bfp.fake_quant(Exporter(x), "mxfp4"), bfp.fake_quant(x, "mxfp4"))
