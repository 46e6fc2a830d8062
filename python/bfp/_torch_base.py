"""What bfp's torch op modules share (torch_ops, torch_packed, torch_moe):
plane shapes, dtype codes, the activation format's name, argument checks,
the current stream, and the planes decoded to a 2-D tensor. The op modules
build on this one; none of it registers an op."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from . import _base, _core

_TORCH_DTYPES = {torch.float32: _core.DTYPE_F32, torch.bfloat16: _core.DTYPE_BF16,
                 torch.float16: _core.DTYPE_F16}


def plane_shapes(fmt: str, rows: Any, cols: Any) -> Dict[str, Tuple[Any, Any]]:
    """Shapes of the planes of a ``rows x cols`` tensor (ints or SymInts)."""
    f = _base._info(fmt)
    bpr = (cols + f["block"] - 1) // f["block"]
    return {"codes": (rows, (cols * f["elem_bits"] + 7) // 8),
            "scales": (rows, bpr * f["scale_bytes"]),
            "meta": (rows, bpr * f["meta_bytes"])}


def _check_float(x: torch.Tensor, what: str) -> None:
    if x.dtype not in _TORCH_DTYPES:
        raise TypeError(f"{what} has dtype {x.dtype}: bfp takes float32, float16 or bfloat16")


def _cuda_ready(t: torch.Tensor) -> None:
    if not _base.cuda_available():
        raise _base._no_cuda(t)


def _stream(t: torch.Tensor) -> int:
    return int(torch.cuda.current_stream(t.device).cuda_stream)


def _np(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a contiguous CPU tensor (bfloat16 as uint16 bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _out_dtype(dtype: torch.dtype) -> int:
    if dtype not in _TORCH_DTYPES:
        raise TypeError(f"output dtype {dtype}: bfp writes float32, float16 or bfloat16")
    return _TORCH_DTYPES[dtype]


def _dequant_2d(fmt: str, codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
                tensor_scale: torch.Tensor, rows: int, cols: int,
                dtype: torch.dtype) -> torch.Tensor:
    """The planes decoded to a [rows, cols] tensor on their device."""
    info = _base._info(fmt)
    code = _out_dtype(dtype)
    out = torch.empty((rows, cols), dtype=dtype, device=codes.device)
    has_meta, has_ts = bool(info["meta_bytes"]), bool(info["has_tensor_scale"])
    if codes.device.type == "cuda":
        _cuda_ready(codes)
        c, s, m, t = (p.contiguous() for p in (codes, scales, meta,
                                               tensor_scale.to(codes.device)))
        with torch.cuda.device(codes.device):
            _core.cuda_dequantize(info["id"], c.data_ptr(), s.data_ptr(),
                                  m.data_ptr() if has_meta else 0,
                                  t.data_ptr() if has_ts else 0, rows, cols, code,
                                  out.data_ptr(), _stream(codes))
        return out
    c, s, m, t = (p.detach().contiguous() for p in (codes, scales, meta, tensor_scale))
    _core.dequantize(info["id"], c.numpy(), s.numpy(), m.numpy() if has_meta else None,
                     t.numpy() if has_ts else None, rows, cols, code, _np(out))
    return out


def x_format_name(x_format: Optional[str]) -> str:
    """The activation format of the matmul: ``"bf16"`` (also for None: x as
    it is) or the canonical name of the bfp format x is quantized to, along
    k, before the product. ``ValueError`` for anything else."""
    if x_format is None or x_format == "bf16":
        return "bf16"
    try:
        return str(_base._info(x_format)["name"])
    except (_core.BfpError, TypeError):
        raise ValueError(f"x_format {x_format!r} is neither bf16 nor a bfp format name "
                         "(bfp.formats() lists them)") from None


def _check_matmul(x: torch.Tensor, bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
                  x_format: str) -> None:
    x_format_name(x_format)
    if x.dtype != torch.bfloat16:
        raise TypeError(f"x has dtype {x.dtype}: the bfp matmul takes bfloat16 activations "
                        "(cast with .to(torch.bfloat16))")
    if x.dim() < 1 or x.shape[-1] != k:
        raise ValueError(f"x has shape {tuple(x.shape)}; its last dimension must be k={k}")
    if bias is not None and (bias.dtype != torch.bfloat16 or tuple(bias.shape) != (n,)):
        raise ValueError(f"bias must be bfloat16 of shape ({n},), not {bias.dtype} "
                         f"{tuple(bias.shape)}")
