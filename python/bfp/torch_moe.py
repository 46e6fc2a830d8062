"""The grouped (MoE) matmul as a PyTorch custom op: ``torch.ops.bfp.grouped_matmul``
(registered when :mod:`bfp.torch_ops` is imported).

``y[t] = x[t] @ W_e.T (+ bias[e])`` for the rows ``offsets[e] <= t < offsets[e+1]``
of expert e: x bfloat16 ``[T, k]`` sorted by expert, the E experts' ``[n, k]``
weights as planes stacked along a leading expert axis (``codes``
``[E, n, code_row_bytes]``, ``scales`` ``[E, n, ...]``, ``meta`` ``[E, n, ...]`` or
0 columns, ``tensor_scale`` float32 ``[E]``), ``offsets`` int32 ``[E + 1]``
(``offsets[0] = 0``, nondecreasing, ``offsets[E] = T``) on x's device, bias
bfloat16 ``[E, n]`` or None. y is bfloat16 ``[T, n]``.

* CPU: each expert's W decoded by libbfp to float32 (exact), its rows
  multiplied in float32 by torch, rounded once to bfloat16. The offsets are
  checked.
* CUDA: ``bfp_cuda_grouped_matmul`` (one launch for all experts) for the
  formats the GPU matmul supports; the grouped weight is packed on the host
  once into a torch-owned buffer (outside CUDA-graph capture). The offsets
  are not checked on the device (that would synchronize): broken ones give
  an unspecified y, never an access outside x, y and the workspace.
* ``x_format`` a bfp format (W4A8, W4A4, as ``torch.ops.bfp.matmul``): x
  ``[T, k]`` is quantized as one tensor (``bfp.quantize``, default options),
  then each expert's rows multiply its W, both decoded. On CUDA, for an
  x format without a tensor scale (MX, MX+, MX++, HiF4: a code of at most 8
  significant bits times a power of two), x's decoded values are exact in
  bfloat16, so x is quantized, decoded to bfloat16 and run through the same
  grouped kernel as bf16 x (one launch, no host read, CUDA-graph safe; there
  is no grouped FP8 kernel). The one exception is a decoded magnitude below
  bfloat16's smallest subnormal (2^-133), which rounds. Otherwise (the CPU,
  NVFP4 x, whose float32 tensor scale makes its values unrepresentable in
  bfloat16) each expert's rows multiply its W in float32, the offsets read on
  the host (a synchronization, refused during CUDA-graph capture).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _base, _core
from ._torch_base import _cuda_ready, _dequant_2d, _stream, plane_shapes, x_format_name


def decodes_to_bf16(x_format: str) -> bool:
    """Whether every decoded value of ``x_format`` is a bfloat16 value (but
    below 2^-133): formats without a float32 tensor scale, whose values are a
    code of at most 8 significant bits times a power of two
    (tests/python/test_torch_moe.py checks it for every format)."""
    return not _base._info(x_format)["has_tensor_scale"]


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


__all__ = ["grouped_matmul", "clear_cuda_grouped_weights", "decodes_to_bf16"]

# (device, planes' pointers and versions, fmt, E, n, k) -> (buffer, view capsule)
_GWEIGHTS: Dict[Tuple[Any, ...], Tuple[torch.Tensor, Any]] = {}
_GWS: Dict[Tuple[int, int], torch.Tensor] = {}
_GRETIRED: List[torch.Tensor] = []


def clear_cuda_grouped_weights() -> None:
    """Free the grouped weights packed for the GPU and their workspaces (no
    CUDA graph that ran the op may be replayed afterwards)."""
    _GWEIGHTS.clear()
    _GWS.clear()
    _GRETIRED.clear()


def _check(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
           ts: torch.Tensor, offsets: torch.Tensor, bias: Optional[torch.Tensor], fmt: str,
           n: int, k: int, x_format: str = "bf16") -> int:
    x_format_name(x_format)
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.shape[1] != k:
        raise ValueError(f"x must be bfloat16 [T, {k}], not {x.dtype} {tuple(x.shape)}")
    if offsets.dtype != torch.int32 or offsets.dim() != 1 or offsets.numel() < 2:
        raise ValueError("offsets must be int32 [E + 1] with E >= 1")
    e_count = offsets.numel() - 1
    if offsets.device != x.device:
        raise ValueError(f"offsets are on {offsets.device}, x on {x.device}")
    shp = plane_shapes(fmt, n, k)
    for name, t in (("codes", codes), ("scales", scales), ("meta", meta)):
        if t.dtype != torch.uint8:
            raise TypeError(f"{name} plane must be uint8, not {t.dtype}")
        need = e_count * shp[name][0] * shp[name][1]
        if t.numel() != need:
            raise ValueError(f"{name} has {t.numel()} bytes; {e_count} experts of {fmt} "
                             f"{n}x{k} need {need}")
    if ts.dtype != torch.float32 or ts.numel() != e_count:
        raise TypeError(f"tensor_scale must be float32 [{e_count}]")
    if bias is not None and (bias.dtype != torch.bfloat16 or tuple(bias.shape) != (e_count, n)):
        raise ValueError(f"bias must be bfloat16 [{e_count}, {n}], not {bias.dtype} "
                         f"{tuple(bias.shape)}")
    return e_count


def _gweight(fmt: str, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
             ts: torch.Tensor, e_count: int, n: int, k: int, device: torch.device) -> Any:
    key = (device.index, codes.data_ptr(), codes._version, scales.data_ptr(), scales._version,
           meta.data_ptr(), ts.data_ptr(), fmt, e_count, n, k)
    hit = _GWEIGHTS.get(key)
    if hit is not None:
        return hit[1]
    if _capturing():
        raise RuntimeError("bfp.grouped_matmul: this weight is not packed for the GPU yet and "
                           "a CUDA graph is being captured; run the layer once before capturing")
    info = _base._info(fmt)
    host = [p.detach().cpu().contiguous().reshape(-1).numpy() for p in (codes, scales, meta, ts)]
    nbytes = _core.grouped_weight_packed_size(info["id"], e_count, n, k)
    img = torch.empty(nbytes, dtype=torch.uint8)
    _core.grouped_weight_pack_host(info["id"], host[0], host[1],
                                   host[2] if info["meta_bytes"] else None,
                                   host[3] if info["has_tensor_scale"] else None,
                                   e_count, n, k, img.numpy())
    buf = img.to(device)  # the caching allocator's blocks are 512-byte aligned
    torch.cuda.current_stream(device).synchronize()  # the view reads the headers
    cap = _core.cuda_grouped_weight_view(info["id"], e_count, n, k, buf.data_ptr(), nbytes)
    _GWEIGHTS[key] = (buf, cap)
    return cap


def _workspace(device: torch.device, stream: int, nbytes: int) -> Optional[torch.Tensor]:
    """The stream's workspace of at least nbytes (None when none is needed and none exists)."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ws = _GWS.get((idx, stream))
    if nbytes == 0:
        return ws  # the call reads none: nothing to grow, also while capturing
    if ws is None or ws.numel() < nbytes:
        if _capturing():
            # this call's own scratch from the graph's pool, zeroed by the
            # graph on every replay; not cached, as the stream may be a
            # capture's own
            return torch.zeros(nbytes, dtype=torch.uint8, device=device)
        if ws is not None:
            _GRETIRED.append(ws)  # a captured graph may still hold it
        # zeros before its first use; every call leaves it zero
        ws = torch.zeros(max(nbytes, 1), dtype=torch.uint8, device=device)
        _GWS[(idx, stream)] = ws
    return ws


@torch.library.custom_op("bfp::grouped_matmul", mutates_args=())
def grouped_matmul(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                   meta: torch.Tensor, tensor_scale: torch.Tensor, offsets: torch.Tensor,
                   bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
                   x_format: str = "bf16") -> torch.Tensor:
    """Grouped (MoE) ``y = x @ W_e.T (+ bias[e])`` per expert; see the module."""
    e_count = _check(x, codes, scales, meta, tensor_scale, offsets, bias, fmt, n, k, x_format)
    t_rows = x.shape[0]
    y = torch.empty((t_rows, n), dtype=torch.bfloat16, device=x.device)
    if t_rows == 0:
        return y
    info = _base._info(fmt)
    xf = x_format_name(x_format)
    xd: Optional[torch.Tensor] = None  # x as the product sees it, quantized x decoded
    gpu = x.device.type == "cuda" and _core.matmul_format_supported(info["id"])
    if xf != "bf16" and gpu and decodes_to_bf16(xf):
        x = torch.ops.bfp.fake_quant(x, xf)  # bf16 in and out, exact: see the module
    elif xf != "bf16":
        if _capturing():
            raise RuntimeError(f"bfp.grouped_matmul: x in {xf} reads the offsets on the host; "
                               "it cannot run inside a CUDA-graph capture")
        xd = torch.ops.bfp.fake_quant(x.float(), xf)
    if xd is None and gpu:
        _cuda_ready(x)
        with torch.cuda.device(x.device):
            w = _gweight(fmt, codes, scales, meta, tensor_scale, e_count, n, k, x.device)
            stream = _stream(x)
            ws = _workspace(x.device, stream, _core.cuda_grouped_matmul_workspace_size(w, t_rows))
            xc, oc = x.contiguous(), offsets.contiguous()
            b = bias.contiguous() if bias is not None else None
            _core.cuda_grouped_matmul(w, xc.data_ptr(), t_rows, oc.data_ptr(),
                                      b.data_ptr() if b is not None else 0, y.data_ptr(),
                                      ws.data_ptr() if ws is not None else 0,
                                      ws.numel() if ws is not None else 0, stream)
        return y
    off = offsets.tolist()  # CPU (or a format without a GPU matmul): the host reads them
    if off[0] != 0 or off[-1] != t_rows or any(b < a for a, b in zip(off, off[1:])):
        raise ValueError(f"offsets must start at 0, not decrease and end at T={t_rows}: {off}")
    c3, s3, m3 = (p.reshape(e_count, -1) for p in (codes, scales, meta))
    for e in range(e_count):
        a, b = off[e], off[e + 1]
        if a == b:
            continue
        dt = torch.float32 if x.device.type == "cpu" or xd is not None else torch.bfloat16
        wd = _dequant_2d(fmt, c3[e], s3[e], m3[e], tensor_scale[e:e + 1].contiguous(), n, k, dt)
        yf = (x[a:b].to(dt) if xd is None else xd[a:b]) @ wd.t()
        if bias is not None:
            yf = yf + bias[e].to(dt)
        y[a:b] = yf.to(torch.bfloat16)
    return y


@grouped_matmul.register_fake
def _(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
      tensor_scale: torch.Tensor, offsets: torch.Tensor, bias: Optional[torch.Tensor], fmt: str,
      n: int, k: int, x_format: str = "bf16") -> torch.Tensor:
    _check(x, codes, scales, meta, tensor_scale, offsets, bias, fmt, n, k, x_format)
    return x.new_empty((x.shape[0], n))
