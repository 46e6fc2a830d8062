"""bfp.verify: compare another kernel's planes with the golden model.

The Python face of ``bfp_verify()`` (include/bfp.h, docs/verify.md): the
input is quantized with the reference quantizer (``bfp_quantize_ref``) and
every entry of every plane is compared with what the device or kernel under
test (the DUT) wrote; each difference gets a likely cause.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core
from ._base import ArrayLike, QTensor, _info, _options, _prepare

__all__ = ["VerifyResult", "verify"]

_MISMATCH_KEYS = ("plane", "row", "block", "element", "col", "input", "expected_code",
                  "received_code", "expected_value", "received_value", "cause")
_DUT_KEYS = ("codes", "scales", "meta", "tensor_scale")


@dataclass
class VerifyResult:
    """What :func:`bfp.verify` found; true when the DUT is bit-exact.

    ``mismatches`` holds the first ``max_mismatches`` differing entries in
    row-major block order (tensor scale first; per block: scale, meta, then
    codes), each a dict with the keys ``plane`` (``codes``, ``scales``,
    ``meta``, ``tensor_scale``), ``row``, ``block``, ``element`` and ``col``
    (``None`` outside the codes plane), ``input`` (the input value; ``None``
    outside the codes plane), ``expected_code`` / ``received_code`` (the
    entry: code, scale byte, meta byte, HiF4 flags ``E1_8 | E1_16 << 8``, or
    the tensor scale's float32 bits), ``expected_value`` /
    ``received_value`` (decoded) and ``cause`` (a name of docs/verify.md:
    ``tie``, ``rounding``, ``scale-step``, ``nibble-order``, ...).
    ``causes`` counts every mismatch (recorded or not) by cause;
    ``hints`` says in one sentence what each of those causes means.
    ``ref_error`` / ``dut_error``: both reconstructions against the input
    (the keys of :func:`bfp.error` without ``bm_share``).
    """

    format: str
    rows: int
    cols: int
    identical: bool
    codes_total: int
    codes_differ: int
    scales_total: int
    scales_differ: int
    meta_total: int
    meta_differ: int
    tensor_scale_differs: bool
    blocks_total: int
    blocks_differ: int
    padding_rows_differ: int
    mismatch_count: int
    ref_nan_blocks: int
    dut_nan_blocks: int
    mismatches: List[Dict[str, Any]] = field(default_factory=list)
    causes: Dict[str, int] = field(default_factory=dict)
    hints: Dict[str, str] = field(default_factory=dict)
    ref_error: Optional[Dict[str, Any]] = None
    dut_error: Optional[Dict[str, Any]] = None

    def __bool__(self) -> bool:
        return self.identical

    def __repr__(self) -> str:
        head = (f"VerifyResult({self.format} {self.rows}x{self.cols}: "
                + ("IDENTICAL" if self.identical else
                   f"DIFFERENT, {self.mismatch_count} entries in {self.blocks_differ} "
                   f"of {self.blocks_total} blocks"))
        planes = [f"codes {self.codes_differ}/{self.codes_total}",
                  f"scales {self.scales_differ}/{self.scales_total}"]
        if self.meta_total:
            planes.append(f"meta {self.meta_differ}/{self.meta_total}")
        if self.tensor_scale_differs:
            planes.append("tensor_scale differs")
        lines = [head + "; differ: " + ", ".join(planes)]
        if self.causes:
            lines.append("  causes: " + ", ".join(f"{k} {v}" for k, v in self.causes.items()))
        for m in self.mismatches[:8]:
            where = f"row {m['row']} block {m['block']}"
            if m["element"] is not None:
                where += f" elem {m['element']} (col {m['col']}, input {m['input']:g})"
            lines.append(f"  {m['plane']:<12} {where}: expected {m['expected_code']:#x} "
                         f"({m['expected_value']:g}), received {m['received_code']:#x} "
                         f"({m['received_value']:g}) -> {m['cause']}")
        if self.mismatch_count > 8:
            lines.append(f"  ... {self.mismatch_count - 8} more")
        if self.ref_error and self.dut_error:
            lines.append(f"  SQNR dB: reference {self.ref_error['sqnr_db']:.2f}, "
                         f"DUT {self.dut_error['sqnr_db']:.2f}")
        return "\n".join(lines) + ")"


def _plane(name: str, p: Any) -> np.ndarray:
    a = np.asarray(p)
    if a.dtype != np.uint8:
        raise TypeError(f"DUT {name} plane must be a uint8 array (the bytes the kernel "
                        f"wrote), not {a.dtype}")
    return np.ascontiguousarray(a).reshape(-1)


def _tensor_scale(v: Any) -> np.ndarray:
    if isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, bool):
        return np.asarray([v], dtype="<f4")
    a = np.asarray(v)
    if a.dtype == np.uint8 and a.size == 4:  # the 4 bytes of a tensor_scale.bin
        return np.ascontiguousarray(a).reshape(-1).view("<f4").astype(np.float32)
    if a.dtype.kind == "f" and a.size == 1:
        return a.astype(np.float32).reshape(1)
    raise TypeError("DUT tensor_scale must be a float, a 1-element float array or its "
                    f"4 little-endian bytes (uint8), not {a.dtype} of {a.size} elements")


def _dut_planes(dut: Any, info: Mapping[str, Any], rows: int, cols: int
                ) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    name = info["name"]
    if isinstance(dut, QTensor):
        if dut.format.lower() != name.lower():
            raise ValueError(f"DUT QTensor is {dut.format}, but fmt is {name}")
        if (dut.rows, dut.cols) != (rows, cols):
            raise ValueError(f"DUT QTensor is {dut.rows}x{dut.cols} (blocked layout), but x "
                             f"is {rows}x{cols}")
        planes = {"codes": dut.codes, "scales": dut.scales, "meta": dut.meta,
                  "tensor_scale": dut.tensor_scale}
    elif isinstance(dut, Mapping):
        extra = set(dut) - set(_DUT_KEYS)
        if extra:
            raise ValueError(f"DUT dict has unknown keys {sorted(map(str, extra))}; "
                             f"it takes {', '.join(_DUT_KEYS)}")
        planes = {k: dut.get(k) for k in _DUT_KEYS}
    else:
        raise TypeError(f"dut must be a bfp.QTensor or a dict of planes, not "
                        f"{type(dut).__name__}")
    for k in ("codes", "scales"):
        if planes[k] is None:
            raise ValueError(f"DUT has no {k} plane")
    codes, scales = _plane("codes", planes["codes"]), _plane("scales", planes["scales"])
    meta = None
    if info["meta_bytes"]:
        if planes["meta"] is None:
            raise ValueError(f"{name} has a meta plane; the DUT gave none")
        meta = _plane("meta", planes["meta"])
    elif planes["meta"] is not None:
        raise ValueError(f"{name} has no meta plane; the DUT gave one")
    ts = None
    if info["has_tensor_scale"]:
        if planes["tensor_scale"] is None:
            raise ValueError(f"{name} has a tensor scale; the DUT gave none (1.0 when the "
                             "kernel uses none)")
        ts = _tensor_scale(planes["tensor_scale"])
    elif planes["tensor_scale"] is not None:
        raise ValueError(f"{name} has no tensor scale; the DUT gave one")
    return codes, scales, meta, ts


def verify(x: ArrayLike, fmt: Union[str, int], dut: Union[QTensor, Mapping[str, Any]],
           axis: int = -1, rounding: Optional[str] = None, seed: int = 0,
           scale_mode: Optional[str] = None, nvfp4_no_tensor_scale: bool = False,
           nvfp4_2d: bool = False, *, max_mismatches: int = 1000, threads: int = 0,
           allow_copy: bool = True) -> VerifyResult:
    """Compare the planes a kernel under test wrote for ``x`` with the reference.

    Parameters
    ----------
    x, fmt, axis, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads, allow_copy:
        as in :func:`bfp.quantize`; the reference quantizer
        (``bfp_quantize_ref``) runs with them.
    dut:
        a :class:`bfp.QTensor` or a dict of planar planes as docs/formats.md
        lays them out: ``codes``, ``scales`` and (where the format has it)
        ``meta`` as uint8 arrays, and ``tensor_scale`` (NVFP4/NVFP4+) as a
        float or its 4 bytes.
    max_mismatches:
        how many differences to list (all are counted).

    Returns
    -------
    A :class:`VerifyResult`, true when every entry is identical: counts per
    plane, the first mismatches with their likely causes, and both
    reconstructions' error against ``x``.

    Raises
    ------
    TypeError / ValueError (:class:`bfp.BfpError` for what the library
    rejects) for a bad dtype, format, shape or plane size.
    """
    info = _info(fmt)
    opts = _options(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads)
    if isinstance(max_mismatches, bool) or not isinstance(max_mismatches, (int, np.integer)):
        raise TypeError(f"max_mismatches must be an int, not {type(max_mismatches).__name__}")
    if max_mismatches < 0:
        raise ValueError(f"max_mismatches must be >= 0, got {max_mismatches}")
    if hasattr(x, "device") and getattr(x.device, "type", "cpu") != "cpu":
        x = x.cpu()
    inp = _prepare(x, axis, allow_copy)
    codes, scales, meta, ts = _dut_planes(dut, info, inp.rows, inp.cols)
    r = _core.verify(info["id"], inp.dtype, inp.data, inp.rows, inp.cols, opts, codes,
                     scales, meta, ts, int(max_mismatches))
    mismatches = [dict(zip(_MISMATCH_KEYS, t)) for t in r["mismatches"]]
    causes = {k: v[0] for k, v in r["causes"].items()}
    hints = {k: v[1] for k, v in r["causes"].items()}
    return VerifyResult(
        format=info["name"], rows=inp.rows, cols=inp.cols, identical=r["identical"],
        codes_total=r["codes_total"], codes_differ=r["codes_differ"],
        scales_total=r["scales_total"], scales_differ=r["scales_differ"],
        meta_total=r["meta_total"], meta_differ=r["meta_differ"],
        tensor_scale_differs=r["tensor_scale_differs"], blocks_total=r["blocks_total"],
        blocks_differ=r["blocks_differ"], padding_rows_differ=r["padding_rows_differ"],
        mismatch_count=r["mismatch_count"], ref_nan_blocks=r["ref_nan_blocks"],
        dut_nan_blocks=r["dut_nan_blocks"], mismatches=mismatches, causes=causes,
        hints=hints, ref_error=r["ref_error"], dut_error=r["dut_error"])
