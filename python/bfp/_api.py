"""Quantize, dequantize and measure: the numpy / PyTorch face of libbfp.

Everything here is a thin layer over the C library (bfp._core): inputs are
checked and laid out (the blocked axis moved last, C order), then one
library call does the work with the GIL released.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Union, overload

import numpy as np

from . import _core
from ._base import (_F16, _F32, ArrayLike, QTensor, _cuda_input, _fake_quant_host, _info,
                    _is_torch, _no_cuda, _options, _prepare, _quantize_host, _torch,
                    cuda_available, format_info, formats, isa, library_version)
from ._core import BfpError

__all__ = [
    "BfpError",
    "QTensor",
    "quantize",
    "fake_quant",
    "error",
    "formats",
    "format_info",
    "cuda_available",
    "isa",
    "library_version",
]

# --------------------------------------------------------------------------
# public entry points

def quantize(x: ArrayLike, fmt: Union[str, int], axis: int = -1, rounding: Optional[str] = None,
             seed: int = 0, scale_mode: Optional[str] = None,
             nvfp4_no_tensor_scale: bool = False, nvfp4_2d: bool = False, *,
             threads: int = 0, allow_copy: bool = True) -> QTensor:
    """Quantize ``x`` to ``fmt`` with blocks along ``axis``.

    Parameters
    ----------
    x:
        numpy array (float32, float16, or ``ml_dtypes.bfloat16``) or a torch
        tensor of those dtypes (CPU; CUDA when :func:`bfp.cuda_available`).
        Read in place when it is C-contiguous and ``axis`` is its last axis;
        otherwise copied (if ``allow_copy``).
    fmt:
        format name as ``bfp formats`` lists it (``"mxfp4+"``, ``"nvfp4"``,
        ...), case-insensitive, or a format id.
    axis:
        the axis the blocks run along (the reduction axis K of a matmul).
    rounding:
        ``None``/``"default"`` (the format's own rule: RNE, HiF4 away from
        zero), ``"nearest_even"``, ``"nearest_away"``, ``"toward_zero"`` or
        ``"stochastic"`` (reproducible from ``seed``).
    seed:
        the stochastic-rounding seed, an int in ``[0, 2**64)`` (a float, a
        string or a bool is a TypeError); the same seed gives the same planes.
    scale_mode:
        MX shared-exponent rule: ``"floor"`` (default), ``"ceil"``,
        ``"even"``, ``"rceil"`` (MX family only).
    nvfp4_no_tensor_scale, nvfp4_2d:
        NVFP4/NVFP4+ only: tensor scale 1; 16x16 tiles share a block scale.
    threads:
        CPU threads for large tensors, an int (0 = automatic); the result
        does not depend on it.
    allow_copy:
        False raises ValueError instead of copying an input that is not
        C-contiguous along ``axis`` (strided, another axis, byte-swapped).

    Returns
    -------
    A :class:`QTensor`: the planes, the shape, ``axis`` (normalized, so
    ``axis=-1`` on a 2-D input gives 1), the options as recorded in files,
    ``stats`` (``blocks``, ``nonfinite_blocks``, ``flushed_blocks``) and
    ``source_dtype``.

    Raises
    ------
    TypeError for an unsupported dtype or a non-int seed / threads;
    ValueError (:class:`bfp.BfpError` for what the library rejects, with
    its status string) for an unknown format, an option the format does not
    define or a bad shape; NotImplementedError for a CUDA tensor when the
    library has no CUDA.
    """
    info = _info(fmt)
    opts = _options(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads)
    if _cuda_input(x):
        from . import _cuda  # noqa: PLC0415
        if not cuda_available():
            raise _no_cuda(x)
        return _cuda.quantize(x, info, axis, opts)
    return _quantize_host(x, info, axis, opts, allow_copy)


@overload
def fake_quant(x: np.ndarray, fmt: Union[str, int], axis: int = -1,
               rounding: Optional[str] = None, seed: int = 0, scale_mode: Optional[str] = None,
               nvfp4_no_tensor_scale: bool = False, nvfp4_2d: bool = False, *,
               threads: int = 0, allow_copy: bool = True) -> np.ndarray: ...


@overload
def fake_quant(x: ArrayLike, fmt: Union[str, int], axis: int = -1,
               rounding: Optional[str] = None, seed: int = 0, scale_mode: Optional[str] = None,
               nvfp4_no_tensor_scale: bool = False, nvfp4_2d: bool = False, *,
               threads: int = 0, allow_copy: bool = True) -> Any: ...


def fake_quant(x: ArrayLike, fmt: Union[str, int], axis: int = -1,
               rounding: Optional[str] = None, seed: int = 0, scale_mode: Optional[str] = None,
               nvfp4_no_tensor_scale: bool = False, nvfp4_2d: bool = False, *,
               threads: int = 0, allow_copy: bool = True) -> Any:
    """Quantize and dequantize in one call: the values ``fmt`` can represent.

    Parameters
    ----------
    x, fmt, axis, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads, allow_copy:
        as in :func:`quantize`.

    Returns
    -------
    The same kind of object as ``x`` (numpy array, or a torch tensor on the
    same device), with the same shape and dtype, C-contiguous. For the MX
    formats it is idempotent: ``fake_quant(fake_quant(x, f), f)`` equals
    ``fake_quant(x, f)``. A torch tensor that requires grad (or any torch
    tensor inside ``torch.compile``) goes through ``torch.ops.bfp.fake_quant``,
    whose gradient is the straight-through estimator (identity).

    Raises
    ------
    As :func:`quantize`.
    """
    if _is_torch(x) and (x.requires_grad or _torch().compiler.is_compiling()):
        # the torch op: straight-through gradient, traceable by torch.compile
        from . import torch_ops  # noqa: PLC0415
        return torch_ops.fake_quant(x, fmt if isinstance(fmt, str) else _info(fmt)["name"],
                                    axis, rounding or "default", seed, scale_mode or "",
                                    nvfp4_no_tensor_scale, nvfp4_2d)
    info = _info(fmt)
    opts = _options(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads)
    if _cuda_input(x):
        from . import _cuda  # noqa: PLC0415
        if not cuda_available():
            raise _no_cuda(x)
        return _cuda.fake_quant(x, info, axis, opts)
    return _fake_quant_host(x, info, axis, opts, allow_copy)


def error(x: ArrayLike, fmt: Union[str, int], axis: int = -1, rounding: Optional[str] = None,
          seed: int = 0, scale_mode: Optional[str] = None, nvfp4_no_tensor_scale: bool = False,
          nvfp4_2d: bool = False, *, threads: int = 0, allow_copy: bool = True) -> Dict[str, Any]:
    """Quantization error of ``x`` in ``fmt``: the statistics of ``bfp compare``.

    ``x`` is quantized in its own dtype and decoded to float32; the
    reference is ``x`` as float32. :func:`bfp.compare` runs this for many
    formats at once.

    Parameters
    ----------
    x, fmt, axis, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads, allow_copy:
        as in :func:`quantize` (a CUDA tensor is copied to the CPU).

    Returns
    -------
    A dict with ``format``, ``bits_per_value``, ``rmse``, ``sqnr_db`` (10
    log10 of signal over error energy; ``inf`` if exact), ``max_rel_err``
    and ``mean_rel_err`` (over nonzero inputs; NaN if none),
    ``max_abs_err``, ``bm_share`` (the fraction of the squared error on
    each block's largest-magnitude element, ties to the lowest index),
    ``count`` and ``nonzero`` (values compared), ``skipped_input``
    (non-finite inputs, not compared), ``skipped_output`` (finite inputs in
    blocks that decode to NaN, not compared), ``saturated`` (compared values
    beyond what their block can hold, clipped by the quantizer:
    docs/formats.md), ``blocks``, ``nonfinite_blocks`` and
    ``flushed_blocks``. With nothing compared every error measure is NaN.

    Raises
    ------
    As :func:`quantize`.
    """
    info = _info(fmt)
    opts = _options(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d, threads)
    if _cuda_input(x):
        x = x.cpu()
    inp = _prepare(x, axis, allow_copy)
    y = np.empty(inp.rows * inp.cols, dtype=np.float32)
    sz = _core.plane_sizes(info["id"], inp.rows, inp.cols)
    planes = (np.empty(sz["codes"], dtype=np.uint8), np.empty(sz["scales"], dtype=np.uint8),
              np.empty(sz["meta"], dtype=np.uint8) if sz["meta"] else None,
              np.ones(1, dtype=np.float32) if info["has_tensor_scale"] else None)
    blocks, nonfinite, flushed = _core.quantize(info["id"], inp.dtype, inp.data, inp.rows,
                                                inp.cols, opts, *planes)
    _core.dequantize(info["id"], *planes, inp.rows, inp.cols, _F32, y)
    if inp.dtype == _F32:
        ref = inp.data
    elif inp.dtype == _F16:
        ref = inp.data.view(np.float16).astype(np.float32)
    else:  # bfloat16 bits -> float32 exactly
        ref = (inp.data.astype(np.uint32) << 16).view(np.float32)
    st = _core.error_stats(np.ascontiguousarray(ref, dtype=np.float32).reshape(-1), y,
                           inp.rows, inp.cols, info["block"], info["id"], *planes)
    out: Dict[str, Any] = {"format": info["name"], "bits_per_value": info["bits_per_value"]}
    out.update(st)
    out.update(blocks=blocks, nonfinite_blocks=nonfinite, flushed_blocks=flushed)
    return out
