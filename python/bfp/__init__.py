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

See docs/python.md in the repository.
"""
from ._api import (BfpError, QTensor, cuda_available, error, fake_quant, format_info,
                   formats, isa, library_version, quantize)
from ._compare import compare, plot_compare
from ._files import load, load_qtensor, save
from ._verify import VerifyResult, verify

__version__ = "0.1.0"

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
    "__version__",
]
