"""bfp: block floating-point formats for numpy and PyTorch.

A CPython extension over libbfp, the bit-exact C reference for MXFP4/6/8,
MXINT8/4, NVFP4, HiF4, MX+/MX++ and NVFP4+ (docs/formats.md)::

    import numpy as np, bfp
    w = np.random.randn(4096, 4096).astype(np.float32)
    q = bfp.quantize(w, "mxfp4+")          # QTensor: .codes .scales .meta ...
    w4 = q.dequantize()                     # float32, same shape
    y = bfp.fake_quant(w, "nvfp4")          # same dtype and shape as w
    bfp.error(w, "mxfp4")["sqnr_db"]        # the statistics of `bfp compare`
    rows = bfp.compare(w, ["mxfp4", "nvfp4"])  # one dict per format (DataFrame-ready)
    bfp.save(q, "w.safetensors")            # `bfp dequantize` reads it
    bfp.verify(w, "mxfp4", kernel_planes)   # golden-model check (docs/verify.md)
    bfp.quantize_model(model, "mxfp4")      # torch: nn.Linear -> bfp.nn.Linear

bfp.nn, bfp.torch_ops and bfp.quantize_model import torch on first use.

See docs/python.md in the repository.
"""
import importlib
from typing import Any

from ._api import (BfpError, QTensor, cuda_available, error, fake_quant, format_info,
                   formats, isa, library_version, quantize)
from ._compare import compare, plot_compare
from ._files import load, load_qtensor, save
from ._verify import VerifyResult, verify

__version__ = "0.1.0"

_TORCH_PARTS = ("nn", "torch_ops", "torch_packed")


def __getattr__(name: str) -> Any:
    """bfp.nn, bfp.torch_ops, bfp.torch_packed and bfp.quantize_model, imported on first use
    (they need torch; bfp itself does not)."""
    if name in _TORCH_PARTS:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "quantize_model":
        return importlib.import_module(f"{__name__}.nn").quantize_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "BfpError",
    "QTensor",
    "quantize",
    "fake_quant",
    "error",
    "compare",
    "plot_compare",
    "verify",
    "VerifyResult",
    "formats",
    "format_info",
    "save",
    "load",
    "load_qtensor",
    "cuda_available",
    "isa",
    "library_version",
    "quantize_model",
    "__version__",
]
