"""Tests of bfp.verify (issue #7): bfp_verify() from Python.

Run as the other package tests (ctest pytest_package, or PYTHONPATH=build/python).
The broken-kernel cases follow docs/verify.md's worked example.
"""
from __future__ import annotations

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

FOUR = ["mxfp4", "nvfp4", "hif4", "mxfp4+"]


def heavy(shape, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    idx = r.choice(flat.size, size=max(1, flat.size // 50), replace=False)
    flat[idx] *= r.uniform(8, 60, size=idx.size).astype(np.float32)
    return x.astype(dtype)


def doc_input():
    """docs/verify.md's 2x64 input: rows of -2 .. 1.75 with an offset per 16."""
    return np.array([(i % 16 - 8) / 4 + (i // 16) / 64 for i in range(128)],
                    dtype=np.float32).reshape(2, 64)


def planes(q):
    d = {"codes": q.codes.copy(), "scales": q.scales.copy()}
    if q.meta is not None:
        d["meta"] = q.meta.copy()
    if q.tensor_scale is not None:
        d["tensor_scale"] = q.tensor_scale
    return d


@pytest.mark.parametrize("fmt", FOUR)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_reference_planes_identical(fmt, dtype):
    x = heavy((8, 256), dtype, seed=3)
    q = bfp.quantize(x, fmt)
    for dut in (q, planes(q)):
        r = bfp.verify(x, fmt, dut)
        assert r.identical and bool(r) is True, repr(r)
        assert r.mismatch_count == 0 and r.mismatches == [] and r.causes == {}
        assert r.codes_total == x.size and r.codes_differ == 0
        assert r.scales_total == r.blocks_total == x.size // q.format_info["block"]
        assert r.scales_differ == r.meta_differ == r.blocks_differ == 0
        assert not r.tensor_scale_differs
        assert r.ref_error == r.dut_error
        assert r.ref_error["count"] == x.size
        ref = bfp.error(x, fmt)
        assert r.ref_error["sqnr_db"] == pytest.approx(ref["sqnr_db"])
        assert "IDENTICAL" in repr(r)


def test_identical_other_axis_and_options():
    x = heavy((64, 32), seed=5)
    q = bfp.quantize(x, "mxfp4", axis=0, scale_mode="rceil")
    assert bfp.verify(x, "mxfp4", q, axis=0, scale_mode="rceil")
    # the DUT used another scale rule than the reference: a difference
    assert not bfp.verify(x, "mxfp4", planes(q), axis=0)


@pytest.mark.parametrize("fmt", FOUR)
def test_flipped_code_bit(fmt):
    x = heavy((4, 128), seed=7)
    q = bfp.quantize(x, fmt)
    info = bfp.format_info(fmt)
    row, col = 2, 37
    row_bytes = q.codes.size // 4
    d = planes(q)
    d["codes"][row * row_bytes + col // 2] ^= 1 << (4 * (col % 2) + 2)  # bit 2 of the code
    r = bfp.verify(x, fmt, d)
    assert not r and r.codes_differ == 1 and r.mismatch_count == 1, repr(r)
    assert r.scales_differ == 0 and r.blocks_differ == 1
    (m,) = r.mismatches
    assert m["plane"] == "codes"
    assert (m["row"], m["col"]) == (row, col)
    assert m["block"] == col // info["block"] and m["element"] == col % info["block"]
    assert m["input"] == pytest.approx(float(x[row, col]))
    assert m["expected_code"] ^ m["received_code"] == 4
    expect = q.dequantize()[row, col]
    assert m["expected_value"] == pytest.approx(float(expect))
    assert m["received_value"] != m["expected_value"]
    assert sum(r.causes.values()) == 1 and m["cause"] in r.causes and m["cause"] in r.hints
    assert "codes" in repr(r) and f"row {row}" in repr(r)


def test_scale_step():
    x = doc_input()
    d = planes(bfp.quantize(x, "mxfp4"))
    d["scales"][3] += 1                      # row 1, block 1 (docs/verify.md)
    r = bfp.verify(x, "mxfp4", d)
    assert not r and r.scales_differ == 1
    m = [m for m in r.mismatches if m["plane"] == "scales"]
    assert len(m) == 1
    m = m[0]
    assert (m["row"], m["block"], m["element"], m["col"], m["input"]) == (1, 1, None, None, None)
    assert m["received_code"] == m["expected_code"] + 1
    assert m["received_value"] == 2 * m["expected_value"]
    assert m["cause"] == "scale-step"
    assert r.causes.get("scale-step", 0) >= 1


def test_nibble_order():
    x = doc_input()
    d = planes(bfp.quantize(x, "mxfp4"))
    b = int(d["codes"][3])
    d["codes"][3] = (b >> 4) | ((b & 15) << 4)  # elements 6 and 7 of row 0
    r = bfp.verify(x, "mxfp4", d)
    assert not r and r.codes_differ == 2 and r.mismatch_count == 2
    assert [(m["row"], m["block"], m["element"], m["col"]) for m in r.mismatches] == \
        [(0, 0, 6, 6), (0, 0, 7, 7)]
    assert [m["cause"] for m in r.mismatches] == ["nibble-order"] * 2
    assert r.causes == {"nibble-order": 2}
    assert r.mismatches[0]["expected_code"] == 0xA and r.mismatches[0]["received_code"] == 0x9
    assert r.dut_error["sqnr_db"] < r.ref_error["sqnr_db"]
    assert "nibble-order" in repr(r)


def test_max_mismatches_counts_all():
    x = heavy((4, 128), seed=9)
    d = planes(bfp.quantize(x, "mxfp4"))
    d["codes"] ^= 0x88                      # every sign bit
    r = bfp.verify(x, "mxfp4", d, max_mismatches=5)
    assert len(r.mismatches) == 5 and r.mismatch_count > 5
    assert sum(r.causes.values()) == r.mismatch_count
    assert bfp.verify(x, "mxfp4", d, max_mismatches=0).mismatches == []


def test_errors():
    x = heavy((2, 64), seed=1)
    q = bfp.quantize(x, "mxfp4")
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        bfp.verify(x.astype(np.float64), "mxfp4", q)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        bfp.verify(x.astype(np.int32), "mxfp4", q)
    with pytest.raises(bfp.BfpError, match="not one of"):
        bfp.verify(x, "mxfp5", q)
    with pytest.raises(ValueError, match="DUT QTensor is mxfp4, but fmt is nvfp4"):
        bfp.verify(x, "nvfp4", q)
    with pytest.raises(ValueError, match="2x64"):
        bfp.verify(heavy((4, 64)), "mxfp4", q)
    with pytest.raises(TypeError, match="uint8"):
        bfp.verify(x, "mxfp4", {"codes": q.codes.astype(np.int16), "scales": q.scales})
    with pytest.raises(ValueError, match="codes plane: buffer has"):
        bfp.verify(x, "mxfp4", {"codes": q.codes[:-1], "scales": q.scales})
    with pytest.raises(ValueError, match="unknown keys"):
        bfp.verify(x, "mxfp4", {"codes": q.codes, "scales": q.scales, "scale": q.scales})
    with pytest.raises(ValueError, match="meta plane; the DUT gave none"):
        bfp.verify(x, "mxfp4+", {"codes": q.codes, "scales": q.scales})
    qn = bfp.quantize(x, "nvfp4")
    with pytest.raises(ValueError, match="tensor scale"):
        bfp.verify(x, "nvfp4", {"codes": qn.codes, "scales": qn.scales})
    with pytest.raises(TypeError, match="QTensor or a dict"):
        bfp.verify(x, "mxfp4", [q.codes, q.scales])
    with pytest.raises(ValueError, match="DUT codes plane: buffer has 64 bytes, expected 10"):
        bfp.verify(heavy((2, 10)), "mxfp4", {"codes": q.codes, "scales": q.scales})
    with pytest.raises(bfp.BfpError, match="unknown"):
        bfp.verify(x, 999, q)
    with pytest.raises(bfp.BfpError, match="applies only to the MX formats") as ei:
        bfp.verify(x, "nvfp4", bfp.quantize(x, "nvfp4"), scale_mode="ceil")
    assert ei.value.status == bfp._core.ERR_UNSUPPORTED
    with pytest.raises(ValueError, match="max_mismatches"):
        bfp.verify(x, "mxfp4", q, max_mismatches=-1)


def test_partial_last_block():
    x = heavy((3, 40), np.float16, seed=4)
    for fmt in FOUR:
        assert bfp.verify(x, fmt, bfp.quantize(x, fmt))


def test_tensor_scale_bytes_and_difference():
    x = heavy((4, 64), seed=2)
    q = bfp.quantize(x, "nvfp4")
    d = planes(q)
    d["tensor_scale"] = np.asarray([q.tensor_scale], dtype="<f4").view(np.uint8)
    assert bfp.verify(x, "nvfp4", d)
    d["tensor_scale"] = q.tensor_scale * 2
    r = bfp.verify(x, "nvfp4", d)
    assert not r and r.tensor_scale_differs
    assert r.mismatches[0]["plane"] == "tensor_scale"
