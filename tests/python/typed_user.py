"""A user's script over bfp's public API. test_package_api.py checks it with
`mypy --strict` (so the package's types serve its users) and runs it."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt

import bfp


def study(w: npt.NDArray[np.float32], out: Path) -> List[Dict[str, Any]]:
    q: bfp.QTensor = bfp.quantize(w, "mxfp4+", axis=0, rounding="stochastic", seed=7)
    w4: npt.NDArray[Any] = q.dequantize()
    y: npt.NDArray[Any] = bfp.fake_quant(w, "nvfp4")
    sqnr: float = bfp.error(w, "mxfp4")["sqnr_db"]
    assert w4.shape == y.shape == w.shape and sqnr > 0
    bfp.save(q, out / "w.safetensors")
    back = bfp.load(out / "w.safetensors").dequantize()  # the line of issue 18
    assert np.array_equal(back, w4)
    same: bool = bfp.load_qtensor(out / "w.safetensors") == q
    assert same and q.nbytes > 0 and q.format_info["block"] == 32
    res: bfp.VerifyResult = bfp.verify(w, "mxfp4+", q, axis=0, rounding="stochastic", seed=7)
    assert bool(res)
    names: List[str] = [f["name"] for f in bfp.formats()]
    rows = bfp.compare(w, names[:3])
    return rows


def main() -> int:
    w = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        for r in study(w, Path(d)):
            print(f"{r['format']:12s} {r['bits_per_value']:5.2f} {r['sqnr_db']:7.2f} dB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
