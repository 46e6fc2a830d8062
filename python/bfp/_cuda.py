"""CUDA tensors through libbfp's GPU kernels (bfp_cuda_quantize/dequantize).

Used only when :func:`bfp.cuda_available` is True, i.e. the package was built
with ``--config-settings=cmake.define.BFP_CUDA=ON`` against a libbfp that has the kernels
and a GPU is visible. Plane buffers are torch tensors on the input's device;
the library gets their device pointers and the current stream, and never
synchronizes or allocates.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Optional, Tuple

from . import _core
from ._base import _DTYPE_NAMES, QTensor, _options_dict

_Opts = Tuple[int, int, int, int, int, int]
_Planes = Tuple[Any, Any, Optional[Any], Optional[Any]]


def _torch() -> Any:
    """torch, untyped: bfp type-checks without torch installed."""
    return importlib.import_module("torch")


def _layout(x: Any, axis: int) -> Tuple[Any, int, Tuple[int, ...], int, int, int]:
    torch = _torch()

    codes = {torch.float32: _core.DTYPE_F32, torch.float16: _core.DTYPE_F16,
             torch.bfloat16: _core.DTYPE_BF16}
    if x.dtype not in codes:
        raise TypeError(f"CUDA tensor of dtype {x.dtype}: bfp takes float32, float16 or bfloat16")
    t = x.detach()
    shape = tuple(int(s) for s in t.shape)
    if t.dim() == 0:
        return t.reshape(1, 1).contiguous(), codes[x.dtype], shape, -1, 1, 1
    if not -t.dim() <= axis < t.dim():
        raise ValueError(f"axis {axis} is out of range for a {t.dim()}-d input")
    ax = axis % t.dim()
    t = t.movedim(ax, -1).contiguous()
    cols = shape[ax]
    rows = t.numel() // cols if cols else 0
    return t, codes[x.dtype], shape, ax, rows, cols


def _planes(info: Dict[str, Any], rows: int, cols: int, device: Any) -> _Planes:
    torch = _torch()

    sz = _core.plane_sizes(info["id"], rows, cols)
    codes = torch.empty(sz["codes"], dtype=torch.uint8, device=device)
    scales = torch.empty(sz["scales"], dtype=torch.uint8, device=device)
    meta = torch.empty(sz["meta"], dtype=torch.uint8, device=device) if sz["meta"] else None
    ts = torch.ones(1, dtype=torch.float32, device=device) if info["has_tensor_scale"] else None
    return codes, scales, meta, ts


def _ptr(t: Any) -> int:
    return 0 if t is None else int(t.data_ptr())


def _run_quantize(x: Any, info: Dict[str, Any], axis: int, opts: _Opts
                  ) -> Tuple[Any, int, Tuple[int, ...], int, int, int, _Planes]:
    torch = _torch()

    t, dtype, shape, ax, rows, cols = _layout(x, axis)
    codes, scales, meta, ts = _planes(info, rows, cols, t.device)
    with torch.cuda.device(t.device):
        stream = torch.cuda.current_stream(t.device).cuda_stream
        _core.cuda_quantize(info["id"], dtype, _ptr(t), rows, cols, opts, _ptr(codes),
                            _ptr(scales), _ptr(meta), _ptr(ts), int(stream))
    return t, dtype, shape, ax, rows, cols, (codes, scales, meta, ts)


def quantize(x: Any, info: Dict[str, Any], axis: int, opts: _Opts) -> QTensor:
    """Quantize on the GPU; the planes come back to host numpy arrays."""
    _, dtype, shape, ax, _, _, planes = _run_quantize(x, info, axis, opts)
    codes, scales, meta, ts = planes
    return QTensor(
        format=info["name"], shape=shape, codes=codes.cpu().numpy(),
        scales=scales.cpu().numpy(), meta=None if meta is None else meta.cpu().numpy(),
        tensor_scale=None if ts is None else float(ts.cpu().numpy()[0]),
        axis=ax if shape else -1, options=_options_dict(opts), stats={},
        source_dtype=_DTYPE_NAMES[dtype])


def fake_quant(x: Any, info: Dict[str, Any], axis: int, opts: _Opts) -> Any:
    """Quantize and dequantize on the GPU; returns a CUDA tensor like x."""
    torch = _torch()

    t, dtype, shape, ax, rows, cols, planes = _run_quantize(x, info, axis, opts)
    codes, scales, meta, ts = planes
    out = torch.empty_like(t)
    with torch.cuda.device(t.device):
        stream = torch.cuda.current_stream(t.device).cuda_stream
        _core.cuda_dequantize(info["id"], _ptr(codes), _ptr(scales), _ptr(meta), _ptr(ts),
                              rows, cols, dtype, _ptr(out), int(stream))
    if not shape:
        return out.reshape(())
    if ax != len(shape) - 1:
        out = out.movedim(-1, ax).contiguous()
    return out

