"""Save and load quantized tensors in the planar-v1 container (docs/container.md).

Every file is read and written by libbfp's io layer (``bfp_qtensor_save`` /
``bfp_qtensor_load``, the code ``bfp quantize`` and ``bfp dequantize`` use and
the fuzzers test), through :mod:`bfp._core`. This module adds only the state
dict: a directory of containers plus ``bfp_index.json``.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, Union

import numpy as np

from . import _core
from ._base import (QTensor, _DTYPE_NAMES, _ROUNDING, _SCALE_MODE, _info, _is_bf16, _is_torch,
                   _options_dict, _to_numpy)

__all__ = ["save", "load", "INDEX_NAME", "FLOAT_FILE"]

LAYOUT = "planar-v1"
INDEX_NAME = "bfp_index.json"
FLOAT_FILE = "float.safetensors"

PathLike = Union[str, "os.PathLike[str]"]

_DTYPE_CODES = {name: code for code, name in _DTYPE_NAMES.items()}


def _no_file(path: str) -> None:
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no such file")


def _refuse_existing(path: str, force: bool) -> None:
    if os.path.lexists(path) and not force:
        raise FileExistsError(f"{path} exists (use force=True to overwrite)")


def _opts_tuple(q: QTensor) -> Tuple[int, int, int, int, int, int]:
    """q.options (as bfp.options records them) as the library's options."""
    o = dict(q.options) if q.options else {}
    try:
        rounding = _ROUNDING[str(o.get("rounding", "default"))]
        scale_mode = _SCALE_MODE[str(o.get("scale_mode", "floor"))]
        seed = int(o.get("seed", 0))
    except (KeyError, ValueError):
        raise ValueError(f"QTensor.options {o!r} are not what bfp.quantize records") from None
    return (rounding, seed, scale_mode, int(bool(o.get("nvfp4_no_tensor_scale", False))),
            int(bool(o.get("nvfp4_2d", False))), 0)


def _save_qtensor(q: QTensor, path: str, name: str, force: bool) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("the tensor name must be a non-empty string")
    _refuse_existing(path, force)
    info, codes, scales, meta, _ = q._planes()
    nd = len(q.shape)
    axis = q.axis % nd if nd else -1
    recorded_axis = axis if nd and axis != nd - 1 else -1
    if q.source_dtype is not None and q.source_dtype not in _DTYPE_CODES:
        raise ValueError(f"QTensor.source_dtype {q.source_dtype!r} is not one of "
                         + ", ".join(_DTYPE_CODES))
    _core.qtensor_save(path, name, info["id"], q.blocked_shape, _opts_tuple(q), codes, scales,
                       meta, q.tensor_scale, recorded_axis, dict(q.stats) if q.stats else None,
                       -1 if q.source_dtype is None else _DTYPE_CODES[q.source_dtype],
                       force)


def _load_qtensor(path: str, name: Optional[str]) -> QTensor:
    _no_file(path)
    d = _core.qtensor_load(path, name)
    info = _info(d["format"])
    shape = tuple(d["shape"])
    ax = d["axis"]
    if shape and ax is not None and ax != len(shape) - 1:
        s = list(shape)
        s.insert(ax, s.pop())
        shape = tuple(s)
    else:
        ax = len(shape) - 1 if shape else -1
    meta = d["meta"]
    sdt = d["source_dtype"]
    o = d["options"]
    return QTensor(format=info["name"], shape=shape,
                   codes=np.frombuffer(d["codes"], dtype=np.uint8),
                   scales=np.frombuffer(d["scales"], dtype=np.uint8),
                   meta=None if meta is None else np.frombuffer(meta, dtype=np.uint8),
                   tensor_scale=d["tensor_scale"], axis=ax,
                   options=_options_dict((o[0], o[1], o[2], o[3], o[4], 0)),
                   stats=dict(d["stats"]) if d["stats"] is not None else {},
                   source_dtype=None if sdt is None else _DTYPE_NAMES[sdt])


# --------------------------------------------------------------------------
# float tensors (for state dicts)

def _float_entry(name: str, x: Any) -> Tuple[str, int, Tuple[int, ...], np.ndarray]:
    arr, kind, tdt = _to_numpy(x)
    if kind == "torch" and str(tdt) == "torch.bfloat16":
        code = _core.DTYPE_BF16
    elif _is_bf16(arr.dtype):
        code, arr = _core.DTYPE_BF16, arr.view(np.uint16)
    elif arr.dtype == np.float32:
        code = _core.DTYPE_F32
    elif arr.dtype == np.float16:
        code = _core.DTYPE_F16
    else:
        raise TypeError(f"state dict entry {name!r} has dtype {arr.dtype}: unquantized "
                        "tensors must be float32, float16 or bfloat16")
    le = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False)
    return name, code, tuple(int(s) for s in arr.shape), le


def _load_floats(path: str) -> Dict[str, np.ndarray]:
    _no_file(path)
    out: Dict[str, np.ndarray] = {}
    for name, code, shape, data in _core.safetensors_load_set(path):
        if code == _core.DTYPE_BF16:
            import ml_dtypes  # noqa: PLC0415 - bfloat16 arrays need it
            out[name] = np.frombuffer(data, dtype="<u2").reshape(shape).view(ml_dtypes.bfloat16)
        else:
            dt = np.dtype("<f4" if code == _core.DTYPE_F32 else "<f2")
            out[name] = np.frombuffer(data, dtype=dt).reshape(shape)
    return out


def _file_name(name: str, taken: Set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "tensor"
    base = base[:200]
    cand, i = base + ".safetensors", 1
    while cand in taken or cand in (INDEX_NAME, FLOAT_FILE):
        cand, i = f"{base}.{i}.safetensors", i + 1
    taken.add(cand)
    return cand


def _write_index(path: str, index: Dict[str, Any]) -> None:
    text = json.dumps(index, indent=1) + "\n"
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------
# public

def save(obj: Union[QTensor, Mapping[str, Any]], path: PathLike, *, name: Optional[str] = None,
         force: bool = False) -> None:
    """Save a :class:`QTensor` to a container file, or a state dict to a directory.

    Parameters
    ----------
    obj:
        a QTensor: ``path`` becomes one safetensors file in the planar-v1
        layout (docs/container.md), its planes named ``NAME.codes`` etc.,
        with the tensor's axis, stats and source dtype in its metadata;
        ``bfp dequantize path out.npy`` reads it. Or a mapping of names to
        QTensors and float tensors (numpy or torch; float32, float16,
        bfloat16): ``path`` becomes a directory with one container per
        QTensor (``bfp.name`` = its key), the float tensors together in
        ``float.safetensors``, and ``bfp_index.json``.
    path:
        the file or directory to write.
    name:
        the tensor name of a single QTensor (default ``"tensor"``, as the
        CLI's); not allowed with a mapping, whose keys are the names.
    force:
        replace existing files; without it an existing file raises
        FileExistsError.

    Returns
    -------
    None. Files are written to a temporary name and renamed into place.

    Raises
    ------
    FileExistsError without ``force``; TypeError for an object that is not
    a QTensor or a mapping of QTensors and float tensors; ValueError
    (:class:`bfp.BfpError` where the library refuses, with its message) for
    planes that do not match the shape or a bad name.
    """
    path = os.fspath(path)
    if isinstance(obj, QTensor):
        _save_qtensor(obj, path, "tensor" if name is None else name, force)
        return
    if not isinstance(obj, Mapping):
        raise TypeError(f"save() takes a QTensor or a mapping of them, not {type(obj).__name__}")
    if name is not None:
        raise ValueError("name= is for a single QTensor; a state dict uses its keys")
    index_path = os.path.join(path, INDEX_NAME)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory")
    if os.path.lexists(index_path) and not force:
        raise FileExistsError(f"{path} already holds a saved state dict "
                              "(use force=True to overwrite)")
    os.makedirs(path, exist_ok=True)
    taken: Set[str] = set()
    files: Dict[str, str] = {}
    floats: List[Tuple[str, int, Tuple[int, ...], np.ndarray]] = []
    for key, val in obj.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"state dict keys must be non-empty strings, not {key!r}")
        if isinstance(val, QTensor):
            files[key] = _file_name(key, taken)
        elif isinstance(val, np.ndarray) or _is_torch(val):
            floats.append(_float_entry(key, val))
        else:
            raise TypeError(f"state dict entry {key!r} is a {type(val).__name__}: "
                            "expected a QTensor or a float tensor")
    for key, fname in files.items():
        _save_qtensor(obj[key], os.path.join(path, fname), key, force)
    if floats:
        fpath = os.path.join(path, FLOAT_FILE)
        _refuse_existing(fpath, force)
        _core.safetensors_save_set(fpath, floats, force)
    index = {"bfp.layout": LAYOUT, "kind": "state_dict", "version": _core.version(),
             "order": list(obj.keys()), "quantized": files,
             "float_file": FLOAT_FILE if floats else None}
    _write_index(index_path, index)


def load(path: PathLike, name: Optional[str] = None) -> Any:
    """Load what :func:`save` (or ``bfp quantize``) wrote.

    Parameters
    ----------
    path:
        a container file, or a directory written by :func:`save` from a
        state dict.
    name:
        for a file: the tensor name it must hold (its ``bfp.name``); None
        takes whatever it holds.

    Returns
    -------
    For a file, a :class:`QTensor` equal to the one saved (format, shape,
    axis, options, planes, stats and source dtype; a file from ``bfp
    quantize`` has no axis key, so its axis is the last). For a directory,
    a dict in the saved key order of QTensors and float numpy arrays.
    Static type checkers see ``Any``: use :func:`load_qtensor` for a typed
    QTensor.

    Raises
    ------
    FileNotFoundError for a missing path; :class:`bfp.BfpError` (a
    ValueError; ``.status`` ``ERR_DATA`` for malformed files) with the
    library's one-line message for anything else, e.g. ``x.npy: not a
    safetensors file (...)``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        index_path = os.path.join(path, INDEX_NAME)
        try:
            with open(index_path, encoding="utf-8") as f:
                index = json.load(f)
        except FileNotFoundError:
            raise _data_error(f"{path}: a directory without {INDEX_NAME}") from None
        except ValueError as exc:
            raise _data_error(f"{index_path}: not JSON ({exc})") from None
        if not isinstance(index, dict) or index.get("kind") != "state_dict":
            raise _data_error(f"{index_path}: not a bfp state dict index")
        floats = _load_floats(os.path.join(path, index["float_file"])) \
            if index.get("float_file") else {}
        out: Dict[str, Any] = {}
        for key in index.get("order", []):
            if key in index["quantized"]:
                out[key] = _load_qtensor(os.path.join(path, index["quantized"][key]), key)
            elif key in floats:
                out[key] = floats[key]
            else:
                raise _data_error(f"{index_path}: {key!r} is listed but not stored")
        return out
    return _load_qtensor(path, name)


def load_qtensor(path: PathLike, name: Optional[str] = None) -> QTensor:
    """:func:`load` of one container file, for code that wants the static type.

    Parameters
    ----------
    path, name:
        as in :func:`load`; ``path`` must be a file.

    Returns
    -------
    The :class:`QTensor` the file holds.

    Raises
    ------
    IsADirectoryError for a directory (a state dict: use :func:`load`);
    otherwise as :func:`load`.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory (a state dict): use bfp.load")
    return _load_qtensor(path, name)


def _data_error(msg: str) -> _core.BfpError:
    exc = _core.BfpError(f"{msg}: {_core.status_str(_core.ERR_DATA)}")
    exc.status = _core.ERR_DATA
    exc.status_str = _core.status_str(_core.ERR_DATA)
    return exc
