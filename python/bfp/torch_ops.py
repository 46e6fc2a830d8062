"""bfp as PyTorch custom ops: ``torch.ops.bfp.{quantize, dequantize, fake_quant, matmul}``.

Importing this module (``import bfp.torch_ops``, done by ``bfp.nn`` and
``bfp.quantize_model``) registers the ops with ``torch.library``. Each has a
fake implementation, so they trace under ``torch.compile(fullgraph=True)``;
none synchronizes the device.

* CPU tensors go through libbfp's CPU code (the input read in place when it
  is contiguous and blocked along its last axis; the outputs are written by
  the library into torch-owned memory).
* CUDA tensors go through libbfp's GPU kernels on the current stream
  (``bfp.cuda_available()`` must be True). This module's matmul takes W as
  planes: with bf16 activations it decodes them (float32) for torch's
  matmul, the fast GPU matmul (``bfp_cuda_matmul``) taking W packed:
  ``torch.ops.bfp.matmul_packed`` (bfp.torch_packed, registered with these),
  which bfp.nn.Linear uses. With quantized activations (``x_format`` a bfp
  format: W4A8, W4A4) it runs ``bfp_cuda_matmul_xq`` on W's planes for the
  pairs that have a kernel (:func:`xq_kernel`).

The planes come as 2-D ``uint8`` tensors, one row per row of the tensor with
the blocked axis moved last: ``codes`` ``[rows, ceil(cols*elem_bits/8)]``,
``scales`` ``[rows, blocks_per_row*scale_bytes]``, ``meta``
``[rows, blocks_per_row*meta_bytes]`` (0 columns when the format has none)
and ``tensor_scale`` ``float32 [1]`` (1.0 when the format has none). Their
bytes are those of :func:`bfp.quantize`.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _base, _core
from ._torch_base import (_check_float, _check_matmul, _cuda_ready, _dequant_2d, _out_dtype,
                          _stream, plane_shapes, x_format_name)

__all__ = ["quantize", "dequantize", "fake_quant", "matmul", "plane_shapes", "x_format_name",
           "xq_kernel"]

def _opts(info: Dict[str, Any], rounding: str, seed: int, scale_mode: str,
          nvfp4_no_tensor_scale: bool, nvfp4_2d: bool) -> Tuple[int, int, int, int, int, int]:
    return _base._options(info, rounding, seed, scale_mode or None, nvfp4_no_tensor_scale,
                         nvfp4_2d, 0)


def _blocked(shape: List[Any], axis: int) -> Tuple[int, Any, Any]:
    """(normalized axis, rows, cols) of a tensor blocked along axis."""
    if not shape:
        if axis not in (-1, 0):
            raise ValueError(f"axis {axis} is out of range for a 0-d tensor")
        return -1, 1, 1
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for a {len(shape)}-d tensor")
    ax = axis % len(shape)
    return ax, math.prod(s for i, s in enumerate(shape) if i != ax), shape[ax]


# --------------------------------------------------------------------------
# quantize

@torch.library.custom_op("bfp::quantize", mutates_args=())
def quantize(x: torch.Tensor, fmt: str, axis: int = -1, rounding: str = "default",
             seed: int = 0, scale_mode: str = "", nvfp4_no_tensor_scale: bool = False,
             nvfp4_2d: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                               torch.Tensor]:
    """Quantize x along ``axis``: (codes, scales, meta, tensor_scale), the
    planes of :func:`bfp.quantize` as torch tensors on x's device
    (``scale_mode=""`` is the format's own rule)."""
    info = _base._info(fmt)
    opts = _opts(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d)
    _check_float(x, "x")
    _, rows, cols = _blocked(list(x.shape), axis)
    shp = plane_shapes(fmt, rows, cols)
    if x.device.type == "cuda":
        from . import _cuda  # noqa: PLC0415
        _cuda_ready(x)
        *_, planes = _cuda._run_quantize(x, info, axis, opts)
        codes, scales, meta, ts = planes
        meta = (torch.empty(shp["meta"], dtype=torch.uint8, device=x.device)
                if meta is None else meta.view(shp["meta"]))
        ts = torch.ones(1, dtype=torch.float32, device=x.device) if ts is None else ts
        return codes.view(shp["codes"]), scales.view(shp["scales"]), meta, ts
    q = _base._quantize_host(x.detach(), info, axis, opts, True)
    meta_t = (torch.empty(shp["meta"], dtype=torch.uint8) if q.meta is None
              else torch.from_numpy(q.meta).view(shp["meta"]))
    ts_t = torch.tensor([1.0 if q.tensor_scale is None else q.tensor_scale],
                        dtype=torch.float32)
    return (torch.from_numpy(q.codes).view(shp["codes"]),
            torch.from_numpy(q.scales).view(shp["scales"]), meta_t, ts_t)


@quantize.register_fake
def _(x: torch.Tensor, fmt: str, axis: int = -1, rounding: str = "default", seed: int = 0,
      scale_mode: str = "", nvfp4_no_tensor_scale: bool = False, nvfp4_2d: bool = False
      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _opts(_base._info(fmt), rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d)
    _check_float(x, "x")
    _, rows, cols = _blocked(list(x.shape), axis)
    shp = plane_shapes(fmt, rows, cols)
    return tuple(x.new_empty(shp[p], dtype=torch.uint8)  # type: ignore[return-value]
                 for p in ("codes", "scales", "meta")) + (
        x.new_empty((1,), dtype=torch.float32),)


# --------------------------------------------------------------------------
# dequantize

def _check_planes(fmt: str, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
                  tensor_scale: torch.Tensor, rows: Any, cols: Any) -> None:
    shp = plane_shapes(fmt, rows, cols)
    for name, t in (("codes", codes), ("scales", scales), ("meta", meta)):
        if t.dtype != torch.uint8:
            raise TypeError(f"{name} plane must be uint8, not {t.dtype}")
        if t.numel() != shp[name][0] * shp[name][1]:
            raise ValueError(f"{name} plane has {t.numel()} bytes; {fmt} {rows}x{cols} "
                             f"needs {shp[name][0] * shp[name][1]}")
        if t.device != codes.device:
            raise ValueError(f"{name} plane is on {t.device}, codes on {codes.device}")
    if tensor_scale.dtype != torch.float32 or tensor_scale.numel() != 1:
        raise TypeError("tensor_scale must be a float32 tensor of one element")


@torch.library.custom_op("bfp::dequantize", mutates_args=())
def dequantize(codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
               tensor_scale: torch.Tensor, fmt: str, shape: List[int], axis: int = -1,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Decode planes (as :func:`quantize` returns them) to a tensor of
    ``shape`` and ``dtype`` on their device; bit for bit
    ``bfp.QTensor.dequantize``."""
    ax, rows, cols = _blocked(list(shape), axis)
    _check_planes(fmt, codes, scales, meta, tensor_scale, rows, cols)
    out = _dequant_2d(fmt, codes, scales, meta, tensor_scale, rows, cols, dtype)
    if not shape:
        return out.reshape(())
    moved = [s for i, s in enumerate(shape) if i != ax] + [shape[ax]]
    out = out.view(moved)
    return out.movedim(-1, ax).contiguous() if ax != len(shape) - 1 else out


@dequantize.register_fake
def _(codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
      tensor_scale: torch.Tensor, fmt: str, shape: List[int], axis: int = -1,
      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    _, rows, cols = _blocked(list(shape), axis)
    _check_planes(fmt, codes, scales, meta, tensor_scale, rows, cols)
    _out_dtype(dtype)
    return codes.new_empty(list(shape), dtype=dtype)


# --------------------------------------------------------------------------
# fake_quant: quantize + decode, straight-through gradient

@torch.library.custom_op("bfp::fake_quant", mutates_args=())
def fake_quant(x: torch.Tensor, fmt: str, axis: int = -1, rounding: str = "default",
               seed: int = 0, scale_mode: str = "", nvfp4_no_tensor_scale: bool = False,
               nvfp4_2d: bool = False) -> torch.Tensor:
    """The values ``fmt`` represents, like x (``bfp.fake_quant``); its
    gradient is the straight-through estimator (identity)."""
    info = _base._info(fmt)
    opts = _opts(info, rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d)
    _check_float(x, "x")
    if x.device.type == "cuda":
        from . import _cuda  # noqa: PLC0415
        _cuda_ready(x)
        out: torch.Tensor = _cuda.fake_quant(x.detach(), info, axis, opts)
        return out
    return _base._fake_quant_host(x.detach(), info, axis, opts, True)  # type: ignore[no-any-return]


@fake_quant.register_fake
def _(x: torch.Tensor, fmt: str, axis: int = -1, rounding: str = "default", seed: int = 0,
      scale_mode: str = "", nvfp4_no_tensor_scale: bool = False,
      nvfp4_2d: bool = False) -> torch.Tensor:
    _opts(_base._info(fmt), rounding, seed, scale_mode, nvfp4_no_tensor_scale, nvfp4_2d)
    _check_float(x, "x")
    _blocked(list(x.shape), axis)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _fake_quant_backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
    return (grad,) + (None,) * 7


fake_quant.register_autograd(_fake_quant_backward)


# --------------------------------------------------------------------------
# matmul: y = x @ W^T (+ bias)

def xq_kernel(fmt: str, x_format: str) -> bool:
    """True when libbfp has a GPU kernel for W in ``fmt`` times x quantized
    to ``x_format`` (``bfp_cuda_matmul_xq_supported``; False in a build
    without CUDA). Other pairs run as quantize x, decode both, matmul."""
    xf = x_format_name(x_format)
    return xf != "bf16" and bool(_core.cuda_matmul_xq_supported(int(_base._info(fmt)["id"]),
                                                                int(_base._info(xf)["id"])))


@torch.library.custom_op("bfp::matmul", mutates_args=())
def matmul(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
           tensor_scale: torch.Tensor, bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
           x_format: str = "bf16") -> torch.Tensor:
    """``y = x @ W.T (+ bias)``: x bfloat16 ``[..., k]``, W the ``[n, k]``
    weight as planes (blocks along k), y bfloat16 ``[..., n]``.

    ``x_format="bf16"``: W decoded by libbfp to float32 (exact; on CUDA by
    the GPU kernel), the product and the bias in float32 by torch, rounded
    once to bfloat16. The bf16 GPU matmul kernels take packed weights:
    ``torch.ops.bfp.matmul_packed``.

    ``x_format`` a bfp format (``"mxfp8_e4m3"``: W4A8, ``"mxfp4"``: W4A4,
    ...): x is quantized along k as ``bfp.quantize`` does (default options)
    and both operands are multiplied as decoded (``bfp_matmul_ref_q``'s
    product). On CUDA a pair with a kernel (:func:`xq_kernel`) runs
    ``bfp_cuda_matmul_xq`` on W's planes, other pairs and the CPU decode
    both operands to float32 for torch's matmul. W's NVFP4 tensor scale is
    read on the host: keep ``tensor_scale`` on the CPU (bfp.nn.Linear does)
    or the call synchronizes (and is refused under CUDA-graph capture).
    """
    _check_matmul(x, bias, fmt, n, k, x_format)
    _check_planes(fmt, codes, scales, meta, tensor_scale, n, k)
    lead = x.shape[:-1]
    m = math.prod(lead)
    if m == 0:
        return x.new_empty(list(lead) + [n])
    x2 = x.reshape(m, k).contiguous()
    xf = x_format_name(x_format)
    if xf != "bf16" and x.device.type == "cuda" and xq_kernel(fmt, xf):
        y = _matmul_xq_cuda(x2, codes, scales, meta, tensor_scale, bias, fmt, n, k, xf)
        return y.view(list(lead) + [n])
    # quantized x: its decoded values (fake_quant: quantize + decode, float32)
    xd = x2.float() if xf == "bf16" else torch.ops.bfp.fake_quant(x2.float(), xf)
    wf = _dequant_2d(fmt, codes, scales, meta, tensor_scale, n, k, torch.float32)
    yf = xd @ wf.t()
    if bias is not None:
        yf = yf + bias.float()
    return yf.to(torch.bfloat16).view(list(lead) + [n])


def _host_tensor_scale(tensor_scale: torch.Tensor) -> float:
    if tensor_scale.device.type == "cpu":
        return float(tensor_scale.reshape(()))
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("bfp.matmul: W's tensor scale is on the GPU and a CUDA graph is "
                           "being captured; pass tensor_scale as a CPU tensor (bfp.nn.Linear "
                           "keeps a host copy)")
    return float(tensor_scale.reshape(()).item())  # synchronizes


def _matmul_xq_cuda(x2: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                    meta: torch.Tensor, tensor_scale: torch.Tensor,
                    bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
                    xf: str) -> torch.Tensor:
    """bfp_cuda_matmul_xq: x2 bf16 [m, k] on the GPU, W's planes there too."""
    _cuda_ready(x2)
    winfo, xinfo = _base._info(fmt), _base._info(xf)
    if codes.device != x2.device or (bias is not None and bias.device != x2.device):
        raise ValueError(f"x is on {x2.device}, W's planes on {codes.device}"
                         + ("" if bias is None else f", the bias on {bias.device}")
                         + ": they must share a device")
    ts = _host_tensor_scale(tensor_scale) if winfo["has_tensor_scale"] else 1.0
    m = x2.shape[0]
    c, s, mt = codes.contiguous(), scales.contiguous(), meta.contiguous()
    mp = mt.data_ptr() if winfo["meta_bytes"] else 0
    with torch.cuda.device(x2.device):
        need = int(_core.cuda_matmul_xq_workspace_size(winfo["id"], n, k, c.data_ptr(),
                                                       s.data_ptr(), mp, ts, xinfo["id"], m))
        if need == 0:
            raise ValueError(f"bfp.matmul: libbfp refused W ({fmt} {n}x{k}, tensor scale "
                             f"{ts}) times x in {xf}")
        ws = torch.empty(need, dtype=torch.uint8, device=x2.device)  # no zeroing needed
        y = torch.empty((m, n), dtype=torch.bfloat16, device=x2.device)
        b = bias.contiguous() if bias is not None else None
        _core.cuda_matmul_xq(winfo["id"], n, k, c.data_ptr(), s.data_ptr(), mp, ts,
                             xinfo["id"], x2.data_ptr(), m,
                             b.data_ptr() if b is not None else 0, y.data_ptr(),
                             ws.data_ptr(), need, _stream(x2))
    return y


@matmul.register_fake
def _(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
      tensor_scale: torch.Tensor, bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
      x_format: str = "bf16") -> torch.Tensor:
    _check_matmul(x, bias, fmt, n, k, x_format)
    _check_planes(fmt, codes, scales, meta, tensor_scale, n, k)
    return x.new_empty(list(x.shape[:-1]) + [n])


def _matmul_setup(ctx: Any, inputs: Tuple[Any, ...], output: torch.Tensor) -> None:
    x, codes, scales, meta, ts, bias, fmt, n, k, _ = inputs
    ctx.save_for_backward(codes, scales, meta, ts)
    ctx.fmt, ctx.n, ctx.k, ctx.has_bias = fmt, n, k, bias is not None


def _matmul_backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
    # W is constant (its planes have no gradient): dx = dy @ W, dbias = sum dy
    codes, scales, meta, ts = ctx.saved_tensors
    w = torch.ops.bfp.dequantize(codes, scales, meta, ts, ctx.fmt, [ctx.n, ctx.k], -1,
                                 torch.float32)
    g = grad.float()
    gx = (g @ w).to(torch.bfloat16)
    gb = g.reshape(-1, ctx.n).sum(0).to(torch.bfloat16) if ctx.has_bias else None
    return (gx, None, None, None, None, gb, None, None, None, None)


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


# the packed-weight ops (they share this module's helpers, bfp/_torch_base.py)
from . import torch_packed  # noqa: E402,F401
# the grouped (MoE) matmul, torch.ops.bfp.grouped_matmul (bfp/torch_moe.py)
from . import torch_moe as _torch_moe  # noqa: E402,F401  (registers the op)
