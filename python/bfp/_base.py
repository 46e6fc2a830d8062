"""What the numpy / PyTorch face of libbfp (bfp._api) and its CUDA and torch
back ends (bfp._cuda, bfp.torch_ops and the modules beside it) share: the
format table, option and dtype handling, the input layout, the QTensor type,
and the host paths of quantize and fake_quant. The front dispatches to the
back ends; both build on this module, which imports neither.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core
from ._core import BfpError

ArrayLike = Any  # numpy.ndarray, torch.Tensor, or anything with __dlpack__

_ROUNDING = {
    None: 0, "default": 0,
    "nearest_even": 1, "rne": 1,
    "nearest_away": 2, "away": 2,
    "toward_zero": 3, "zero": 3,
    "stochastic": 4,
}
_ROUNDING_NAMES = ["default", "nearest_even", "nearest_away", "toward_zero", "stochastic"]
_SCALE_MODE = {None: 0, "floor": 4, "ceil": 1, "even": 2, "rceil": 3}
_SCALE_MODE_NAMES = ["floor", "ceil", "even", "rceil", "floor"]  # 0: the default rule

_F32, _BF16, _F16 = _core.DTYPE_F32, _core.DTYPE_BF16, _core.DTYPE_F16
_DTYPE_NAMES = {_F32: "float32", _BF16: "bfloat16", _F16: "float16"}


# --------------------------------------------------------------------------
# format table

_FORMATS: Optional[List[Dict[str, Any]]] = None


def formats() -> List[Dict[str, Any]]:
    """The library's format table, one dict per format in table order.

    Keys: ``id``, ``name`` (as the CLI spells it), ``family`` (``mx``,
    ``mx+``, ``mx++``, ``nvfp4``, ``nvfp4+``, ``hif4``), ``block``,
    ``elem_bits``, ``elem``, ``scale``, ``scale_bytes``, ``meta_bytes``,
    ``has_tensor_scale``, ``bits_per_value``, ``max_value``, ``description``,
    ``default_rounding`` (the bfp_rounding code DEFAULT means), ``options``
    (the quantize keywords it accepts: ``rounding``, ``scale_mode``,
    ``nvfp4_no_tensor_scale``, ``nvfp4_2d``), ``matmul`` and ``cuda``
    (whether the GPU matmul and the GPU quantizer take it).
    """
    global _FORMATS
    if _FORMATS is None:
        _FORMATS = _core.formats()
    return [dict(f) for f in _FORMATS]


def _table() -> List[Dict[str, Any]]:
    """The library's table, read once (not copied)."""
    return formats() if _FORMATS is None else _FORMATS


def _info(fmt: Union[str, int]) -> Dict[str, Any]:
    table = _table()
    if isinstance(fmt, str):
        fid = _core.format_id(fmt)  # BfpError listing the names if unknown
    elif isinstance(fmt, (int, np.integer)) and not isinstance(fmt, bool):
        fid = int(fmt)
    else:
        raise TypeError(f"format must be a name such as 'mxfp4+' or an id, not {type(fmt).__name__}")
    for f in table:
        if f["id"] == fid:
            return f
    raise BfpError(f"format id {fid} is unknown: {_core.status_str(_core.ERR_FORMAT)}")


def format_info(fmt: Union[str, int]) -> Dict[str, Any]:
    """The table row of one format, by name (case-insensitive) or id."""
    return dict(_info(fmt))


def cuda_available() -> bool:
    """True if libbfp was built with CUDA and a GPU is usable."""
    return bool(_core.cuda_available())


def isa() -> str:
    """The CPU kernel set in use: ``generic``, ``avx2`` or ``avx512``."""
    return _core.isa()


def library_version() -> str:
    """Version of the linked libbfp (``MAJOR.MINOR.PATCH``)."""
    return _core.version()


# --------------------------------------------------------------------------
# options

def _options(fmt_info: Mapping[str, Any], rounding: Optional[str], seed: int,
             scale_mode: Optional[str], nvfp4_no_tensor_scale: bool, nvfp4_2d: bool,
             threads: int) -> Tuple[int, int, int, int, int, int]:
    if rounding is not None and not isinstance(rounding, str):
        raise TypeError(f"rounding must be a string or None, not {type(rounding).__name__}")
    key = rounding.lower() if isinstance(rounding, str) else None
    if key not in _ROUNDING:
        raise ValueError(f"rounding {rounding!r} is not one of "
                         + ", ".join(k for k in _ROUNDING if k))
    if scale_mode is not None and not isinstance(scale_mode, str):
        raise TypeError(f"scale_mode must be a string or None, not {type(scale_mode).__name__}")
    skey = scale_mode.lower() if isinstance(scale_mode, str) else None
    if skey not in _SCALE_MODE:
        raise ValueError(f"scale_mode {scale_mode!r} is not one of floor, ceil, even, rceil")
    # int() would take 1.5 or "7": a seed that is not the one asked for
    for what, val in (("seed", seed), ("threads", threads)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
            raise TypeError(f"{what} must be an int, not {type(val).__name__} ({val!r})")
    seed = int(seed)
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    threads = int(threads)
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    opts = (_ROUNDING[key], seed, _SCALE_MODE[skey], int(bool(nvfp4_no_tensor_scale)),
            int(bool(nvfp4_2d)), threads)
    # The library holds the rules (bfp_options_check); name the option it refuses.
    status, bad, why = _core.options_check(fmt_info["id"], opts)
    if status != _core.OK:
        given = {1: f"rounding={rounding!r}", 2: f"scale_mode={scale_mode!r}",
                 4: "nvfp4_no_tensor_scale=True", 8: "nvfp4_2d=True"}.get(bad, "options")
        raise _unsupported(f"{given} {why}, not {fmt_info['name']}")
    return opts


_DEFAULT_OPTIONS: Dict[str, Any] = {"rounding": "default", "seed": "0", "scale_mode": "floor",
                                    "nvfp4_no_tensor_scale": False, "nvfp4_2d": False}


def _unsupported(msg: str) -> BfpError:
    exc = BfpError(f"{msg}: {_core.status_str(_core.ERR_UNSUPPORTED)}")
    exc.status = _core.ERR_UNSUPPORTED
    exc.status_str = _core.status_str(_core.ERR_UNSUPPORTED)
    return exc


def _options_dict(opts: Tuple[int, int, int, int, int, int]) -> Dict[str, Any]:
    """The options as docs/container.md's bfp.options records them."""
    return {
        "rounding": _ROUNDING_NAMES[opts[0]],
        "seed": str(opts[1]),
        "scale_mode": _SCALE_MODE_NAMES[opts[2]],
        "nvfp4_no_tensor_scale": bool(opts[3]),
        "nvfp4_2d": bool(opts[4]),
    }


# --------------------------------------------------------------------------
# inputs

@dataclass
class _Input:
    """A source tensor laid out for the library."""
    data: np.ndarray          # C-contiguous, blocked axis last; bf16 as uint16
    dtype: int                # _F32, _BF16, _F16
    shape: Tuple[int, ...]    # original shape
    axis: int                 # normalized blocked axis (-1 for 0-d)
    rows: int
    cols: int
    kind: str                 # "numpy" or "torch"
    torch_dtype: Any = None


def _torch() -> Any:
    """torch if the program imported it (bfp never imports it itself)."""
    return sys.modules.get("torch")


def _is_torch(x: Any) -> bool:
    t = _torch()
    return t is not None and bool(isinstance(x, t.Tensor))


def _is_bf16(dt: np.dtype) -> bool:
    return bool(dt.name == "bfloat16")


def _to_numpy(x: ArrayLike) -> Tuple[np.ndarray, str, Any]:
    """A numpy view of x (no copy) and where it came from."""
    if isinstance(x, np.ndarray):
        return x, "numpy", None
    if _is_torch(x):
        torch = _torch()
        if x.device.type != "cpu":
            raise NotImplementedError(
                f"{x.device.type} tensors: this path needs a CPU tensor (call .cpu())")
        t = x.detach()
        if t.dtype == torch.bfloat16:
            # numpy has no bfloat16: view the bits, zero-copy, any strides
            return t.view(torch.int16).numpy().view(np.uint16), "torch", t.dtype
        if t.dtype in (torch.float32, torch.float16):
            return t.numpy(), "torch", t.dtype
        raise TypeError(f"torch tensor of dtype {t.dtype}: bfp takes float32, float16 "
                        "or bfloat16 (convert with .float())")
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x), "numpy", None
        except Exception as exc:  # noqa: BLE001 - report any exporter's failure the same way
            raise TypeError(f"{type(x).__name__}: DLPack export to numpy failed ({exc}); "
                            "pass a numpy array or a CPU torch tensor") from exc
    if isinstance(x, (list, tuple, float, int)):
        raise TypeError(f"{type(x).__name__} input: pass a numpy array of float32, float16 "
                        "or bfloat16, e.g. np.asarray(x, dtype=np.float32)")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(f"cannot read a tensor from {type(x).__name__}") from exc
    return arr, "numpy", None


def _prepare(x: ArrayLike, axis: int, allow_copy: bool, what: str = "input") -> _Input:
    arr, kind, tdt = _to_numpy(x)
    dt = arr.dtype
    if kind == "torch" and tdt is not None and str(tdt) == "torch.bfloat16":
        code = _BF16
    elif _is_bf16(dt):
        code = _BF16
        arr = arr.view(np.uint16)
    elif dt == np.float32 or (dt.kind == "f" and dt.itemsize == 4):
        code = _F32
    elif dt == np.float16 or (dt.kind == "f" and dt.itemsize == 2):
        code = _F16
    else:
        raise TypeError(f"{what} has dtype {dt}: bfp takes float32, float16 or bfloat16 "
                        "(ml_dtypes.bfloat16); convert with .astype(np.float32)")
    if not dt.isnative:
        if not allow_copy:
            raise ValueError(f"{what} is {dt.str} (non-native byte order) and allow_copy=False")
        arr = arr.astype(arr.dtype.newbyteorder("="))
    shape = tuple(int(s) for s in arr.shape)
    if arr.ndim == 0:
        if axis not in (-1, 0):
            raise ValueError(f"axis {axis} is out of range for a 0-d {what}")
        data, ax, rows, cols = arr.reshape(1, 1), -1, 1, 1
    else:
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"axis must be an int, not {type(axis).__name__}")
        if not -arr.ndim <= axis < arr.ndim:
            raise ValueError(f"axis {axis} is out of range for a {arr.ndim}-d {what}")
        ax = int(axis) % arr.ndim
        data = np.moveaxis(arr, ax, -1) if ax != arr.ndim - 1 else arr
        cols = shape[ax]
        rows = int(np.prod([s for i, s in enumerate(shape) if i != ax], dtype=np.int64))
    if not data.flags.c_contiguous:
        if not allow_copy:
            why = (f"axis={axis} is not the last axis, so the blocks are strided"
                   if arr.ndim and ax != arr.ndim - 1 else "it is not C-contiguous")
            raise ValueError(f"{what} would need a copy ({why}) and allow_copy=False; "
                             "pass allow_copy=True or a C-contiguous array blocked "
                             "along its last axis")
        data = np.ascontiguousarray(data)
    return _Input(data, code, shape, ax, rows, cols, kind, tdt)


def _np_dtype(dtype: Any) -> Tuple[int, Any]:
    """(library dtype code, numpy dtype) for a requested output dtype."""
    if dtype is None:
        return _F32, np.dtype(np.float32)
    if isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
        import ml_dtypes  # noqa: PLC0415 - optional dependency
        return _BF16, np.dtype(ml_dtypes.bfloat16)
    t = _torch()
    if t is not None and isinstance(dtype, t.dtype):
        m = {t.float32: "float32", t.float16: "float16", t.bfloat16: "bfloat16"}
        if dtype not in m:
            raise TypeError(f"output dtype {dtype}: bfp writes float32, float16 or bfloat16")
        return _np_dtype(m[dtype])
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"output dtype {dtype!r} is not a dtype") from exc
    if _is_bf16(dt):
        return _BF16, dt
    if dt == np.float32:
        return _F32, dt
    if dt == np.float16:
        return _F16, dt
    raise TypeError(f"output dtype {dt}: bfp writes float32, float16 or bfloat16")


def _bf16_dtype() -> np.dtype:
    try:
        import ml_dtypes  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("bfloat16 results need the ml_dtypes package "
                          "(pip install ml_dtypes)") from exc
    dt: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dt


def _restore(out2d: np.ndarray, inp: _Input) -> np.ndarray:
    """Blocked layout (rows, cols) -> the input's shape, C order."""
    if not inp.shape:
        return out2d.reshape(())
    moved = list(inp.shape)
    moved.append(moved.pop(inp.axis))
    out = out2d.reshape(moved)
    if inp.axis != len(inp.shape) - 1:
        out = np.ascontiguousarray(np.moveaxis(out, -1, inp.axis))
    return out


def _cuda_input(x: Any) -> bool:
    return _is_torch(x) and x.device.type == "cuda"


def _no_cuda(x: Any) -> NotImplementedError:
    return NotImplementedError(
        f"x is a CUDA tensor ({x.device}), but this libbfp has no usable CUDA "
        "(bfp.cuda_available() is False: the package was built without the CUDA "
        "kernels, or no GPU is visible). Use x.cpu(), or rebuild with "
        "pip install ./python --config-settings=cmake.define.BFP_CUDA=ON")


# --------------------------------------------------------------------------
# QTensor

@dataclass(eq=False)
class QTensor:
    """A quantized tensor: the planes of docs/formats.md plus its shape.

    The planes are flat ``uint8`` numpy arrays laid out exactly as the C
    library and the container file store them: ``codes`` (an LSB-first bit
    stream per row), ``scales`` (one entry per block; HiF4 a 32-bit LE word),
    ``meta`` (one byte per block, MX+/MX++/NVFP4+ only, else ``None``) and
    ``tensor_scale`` (the NVFP4/NVFP4+ float32 encode scale, else ``None``).
    Rows and blocks are those of the tensor with ``axis`` moved last.

    ``q1 == q2`` when both hold the same format, shape, blocked axis,
    options, plane bytes, tensor scale (as float32 bits), stats and source
    dtype: what :func:`bfp.save` records, so a saved and loaded QTensor
    equals the original. QTensors are mutable and so not hashable.
    """

    format: str
    shape: Tuple[int, ...]
    codes: np.ndarray
    scales: np.ndarray
    meta: Optional[np.ndarray] = None
    tensor_scale: Optional[float] = None
    axis: int = -1
    options: Dict[str, Any] = field(default_factory=dict)
    stats: Dict[str, int] = field(default_factory=dict)
    source_dtype: Optional[str] = None

    # -- geometry ---------------------------------------------------------
    @property
    def format_info(self) -> Dict[str, Any]:
        """The format's table row (see :func:`bfp.formats`)."""
        return format_info(self.format)

    @property
    def blocked_shape(self) -> Tuple[int, ...]:
        """The shape with the blocked axis last (the layout of the planes)."""
        if not self.shape:
            return ()
        s = list(self.shape)
        ax = self.axis % len(s)
        s.append(s.pop(ax))
        return tuple(s)

    @property
    def rows(self) -> int:
        s = self.blocked_shape
        return int(np.prod(s[:-1], dtype=np.int64)) if len(s) > 1 else 1

    @property
    def cols(self) -> int:
        s = self.blocked_shape
        return int(s[-1]) if s else 1

    @property
    def nbytes(self) -> int:
        """Bytes of all planes together."""
        n = self.codes.nbytes + self.scales.nbytes
        n += self.meta.nbytes if self.meta is not None else 0
        return n + (4 if self.tensor_scale is not None else 0)

    def _planes(self) -> Tuple[Dict[str, Any], np.ndarray, np.ndarray, Optional[np.ndarray],
                               Optional[np.ndarray]]:
        """(format row, codes, scales, meta, tensor scale) checked for the library."""
        info = _info(self.format)
        ts = (np.asarray([self.tensor_scale], dtype="<f4")
              if info["has_tensor_scale"] else None)
        if info["has_tensor_scale"] and self.tensor_scale is None:
            raise ValueError(f"{self.format} needs a tensor_scale")
        meta = self.meta if info["meta_bytes"] else None
        if info["meta_bytes"] and meta is None:
            raise ValueError(f"{self.format} needs a meta plane")
        planes: List[Optional[np.ndarray]] = []
        for name, p in (("codes", self.codes), ("scales", self.scales), ("meta", meta)):
            if p is None:
                planes.append(None)
                continue
            a = np.asarray(p)
            if a.dtype != np.uint8:
                raise TypeError(f"{name} plane must be uint8, not {a.dtype}")
            planes.append(np.ascontiguousarray(a))
        codes, scales = planes[0], planes[1]
        assert codes is not None and scales is not None
        return info, codes, scales, planes[2], ts

    # -- decoding ---------------------------------------------------------
    def dequantize(self, dtype: Any = np.float32) -> np.ndarray:
        """Decode to a numpy array of the original shape.

        ``dtype``: ``np.float32`` (default), ``np.float16``, or bfloat16
        (``ml_dtypes.bfloat16`` or the string ``"bfloat16"``). NaN blocks
        decode to NaN.
        """
        code, npdt = _np_dtype(dtype)
        info, codes, scales, meta, ts = self._planes()
        rows, cols = self.rows, self.cols
        buf = np.empty(rows * cols, dtype=np.uint16 if code == _BF16 else npdt)
        _core.dequantize(info["id"], codes, scales, meta, ts, rows, cols, code, buf)
        if code == _BF16:
            buf = buf.view(npdt)
        if not self.shape:
            return buf.reshape(())
        out = buf.reshape(self.blocked_shape)
        ax = self.axis % len(self.shape)
        if ax != len(self.shape) - 1:
            out = np.ascontiguousarray(np.moveaxis(out, -1, ax))
        return out

    def validate(self) -> Tuple[int, int]:
        """(number of blocks with bytes the format never produces, index of
        the first such block or -1) -- for planes that came from elsewhere."""
        info, codes, scales, meta, ts = self._planes()
        return _core.validate(info["id"], codes, scales, meta, ts, self.rows, self.cols)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QTensor):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def _key(self) -> Tuple[Any, ...]:
        """What equality compares, in comparable (hashable-free) form."""
        def raw(p: Optional[np.ndarray]) -> Optional[Tuple[str, bytes]]:
            if p is None:
                return None
            a = np.ascontiguousarray(p)
            return a.dtype.str, a.tobytes()

        nd = len(self.shape)
        opts = dict(_DEFAULT_OPTIONS)
        opts.update(self.options or {})
        opts["seed"] = str(opts["seed"])
        ts = None if self.tensor_scale is None else np.float32(self.tensor_scale).tobytes()
        return (self.format, tuple(int(s) for s in self.shape),
                self.axis % nd if nd else -1, sorted(opts.items()), raw(self.codes),
                raw(self.scales), raw(self.meta), ts, sorted((self.stats or {}).items()),
                self.source_dtype)

    def __repr__(self) -> str:
        ts = f", tensor_scale={self.tensor_scale!r}" if self.tensor_scale is not None else ""
        return (f"QTensor(format={self.format!r}, shape={self.shape}, axis={self.axis}, "
                f"{self.nbytes} bytes{ts})")


# --------------------------------------------------------------------------
# the host paths

def _quantize_host(x: ArrayLike, info: Dict[str, Any], axis: int,
                   opts: Tuple[int, int, int, int, int, int], allow_copy: bool) -> QTensor:
    """quantize of a host array or CPU tensor (options checked)."""
    inp = _prepare(x, axis, allow_copy)
    sz = _core.plane_sizes(info["id"], inp.rows, inp.cols)
    codes = np.empty(sz["codes"], dtype=np.uint8)
    scales = np.empty(sz["scales"], dtype=np.uint8)
    meta = np.empty(sz["meta"], dtype=np.uint8) if sz["meta"] else None
    ts = np.ones(1, dtype=np.float32) if info["has_tensor_scale"] else None
    blocks, nonfinite, flushed = _core.quantize(info["id"], inp.dtype, inp.data, inp.rows,
                                                inp.cols, opts, codes, scales, meta, ts)
    return QTensor(
        format=info["name"], shape=inp.shape, codes=codes, scales=scales, meta=meta,
        tensor_scale=float(ts[0]) if ts is not None else None,
        axis=inp.axis if inp.shape else -1, options=_options_dict(opts),
        stats={"blocks": blocks, "nonfinite_blocks": nonfinite, "flushed_blocks": flushed},
        source_dtype=_DTYPE_NAMES[inp.dtype])


def _fake_quant_host(x: ArrayLike, info: Dict[str, Any], axis: int,
                     opts: Tuple[int, int, int, int, int, int], allow_copy: bool) -> Any:
    """fake_quant of a host array or CPU tensor (options checked)."""
    inp = _prepare(x, axis, allow_copy)
    out = np.empty(inp.rows * inp.cols, dtype=np.uint16 if inp.dtype != _F32 else np.float32)
    _core.fake_quant(info["id"], inp.dtype, inp.data, inp.rows, inp.cols, opts, inp.dtype, out)
    out = _restore(out.reshape(inp.rows, inp.cols), inp)
    if inp.kind == "torch":
        torch = _torch()
        if inp.dtype == _BF16:
            return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)
        if inp.dtype == _F16:
            return torch.from_numpy(out.view(np.float16))
        return torch.from_numpy(out)
    if inp.dtype == _F16:
        return out.view(np.float16)
    if inp.dtype == _BF16:
        return out.view(x.dtype if isinstance(x, np.ndarray) else _bf16_dtype())
    return out
