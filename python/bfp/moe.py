"""Mixture-of-experts weights: gpt-oss's MXFP4 expert layout and bfp's planes.

gpt-oss checkpoints store each expert projection as two uint8 tensors
(transformers ``integrations/mxfp4.py``, ``convert_moe_packed_tensors``):

* ``*_blocks`` ``[E, n, k/32, 16]``: 32 FP4 (E2M1) codes per block, byte j
  holding element 2j in its low nibble and 2j+1 in its high nibble, code
  values ``+0, .5, 1, 1.5, 2, 3, 4, 6`` then the same negated (bit 3 = sign);
* ``*_scales`` ``[E, n, k/32]``: one E8M0 byte per block, 2^(s - 127).

That is byte for byte bfp's ``mxfp4`` planar layout (docs/formats.md: codes
an LSB-first stream per row, even element low nibble; one E8M0 scale per 32
elements) of an ``[E, n, k]`` tensor blocked along k: the conversion is a
reshape, no byte changes. transformers' dequantization returns the weight
transposed, ``[E, k, n]`` (gpt-oss multiplies ``x @ W``); bfp's ``[E, n, k]``
is the ``[n, k]`` weight of ``y = x . W^T`` per expert. The one difference:
scale byte 255 is NaN in bfp (OCP MX) and 2^128 (inf) in transformers.
"""
from typing import Tuple

import numpy as np

from ._base import QTensor

__all__ = ["from_gpt_oss", "to_gpt_oss"]


def _u8(a: object, name: str) -> np.ndarray:
    if hasattr(a, "detach"):  # a torch tensor: its bytes, on the CPU
        a = a.detach().cpu().numpy()
    arr = np.asarray(a)
    if arr.dtype != np.uint8:
        raise TypeError(f"{name} must be uint8, not {arr.dtype}")
    return np.ascontiguousarray(arr)


def from_gpt_oss(blocks: object, scales: object) -> QTensor:
    """gpt-oss ``*_blocks`` ``[..., n, k/32, 16]`` and ``*_scales``
    ``[..., n, k/32]`` (numpy arrays or torch tensors, uint8) as an
    ``mxfp4`` QTensor of shape ``[..., n, k]`` blocked along k (the planes
    are the same bytes)."""
    b, s = _u8(blocks, "blocks"), _u8(scales, "scales")
    if b.ndim < 3 or b.shape[-1] != 16:
        raise ValueError(f"blocks has shape {b.shape}; gpt-oss blocks are [..., n, k/32, 16]")
    if b.shape[:-1] != s.shape:
        raise ValueError(f"scales has shape {s.shape}; blocks {b.shape} need {b.shape[:-1]}")
    shape = tuple(int(d) for d in b.shape[:-2]) + (int(b.shape[-2]) * 32,)
    return QTensor(format="mxfp4", shape=shape, codes=b.reshape(-1), scales=s.reshape(-1),
                   axis=-1)


def to_gpt_oss(q: QTensor) -> Tuple[np.ndarray, np.ndarray]:
    """The inverse: an ``mxfp4`` QTensor blocked along its last axis (k a
    multiple of 32) as gpt-oss ``(blocks, scales)``."""
    if q.format != "mxfp4":
        raise ValueError(f"gpt-oss experts are mxfp4, not {q.format}")
    if len(q.shape) < 2 or q.axis % len(q.shape) != len(q.shape) - 1 or q.shape[-1] % 32:
        raise ValueError(f"shape {q.shape}, axis {q.axis}: need [..., n, k] blocked along k, "
                         "k a multiple of 32")
    lead = tuple(q.shape[:-1])
    g = q.shape[-1] // 32
    return (np.asarray(q.codes, dtype=np.uint8).reshape(lead + (g, 16)),
            np.asarray(q.scales, dtype=np.uint8).reshape(lead + (g,)))
