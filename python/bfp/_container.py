"""Save and load quantized tensors in the planar-v1 container (docs/container.md).

One :class:`~bfp.QTensor` is one safetensors file, written byte for byte as
the C library's ``bfp_qtensor_save()`` (and so ``bfp quantize``) writes it:
compact JSON header with ``__metadata__`` first, padded with spaces to a
multiple of 8, tensors ordered by element size then name, data contiguous.
``bfp dequantize`` reads these files and :func:`load` reads the CLI's.

A state dict (a mapping of names to QTensors and plain float tensors) is a
directory: one container per quantized tensor, the float tensors together in
``float.safetensors``, and ``bfp_index.json`` mapping names to files.
"""
from __future__ import annotations

import json
import os
import re
import struct
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core
from ._api import (BfpError, QTensor, _info, _is_bf16, _is_torch, _ROUNDING_NAMES,
                   _SCALE_MODE_NAMES, _to_numpy)

__all__ = ["save", "load", "INDEX_NAME", "FLOAT_FILE"]

LAYOUT = "planar-v1"
INDEX_NAME = "bfp_index.json"
FLOAT_FILE = "float.safetensors"
_MAX_HEADER = 100_000_000
_ELEM_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
              "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_PLANES = ("codes", "scales", "meta", "tensor_scale")

PathLike = Union[str, "os.PathLike[str]"]


def _fail(status: int, msg: str) -> BfpError:
    exc = BfpError(f"{msg}: {_core.status_str(status)}")
    exc.status = status
    exc.status_str = _core.status_str(status)
    return exc


def _json(obj: Any) -> str:
    """Compact JSON as cJSON_PrintUnformatted writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------
# raw safetensors

def _st_bytes(tensors: List[Tuple[str, str, Tuple[int, ...], bytes]],
              metadata: Optional[List[Tuple[str, str]]]) -> List[bytes]:
    """The parts of a safetensors file, in the reference writer's order."""
    order = sorted(tensors, key=lambda t: (-_ELEM_SIZE[t[1]], t[0].encode("utf-8")))
    parts = []
    if metadata:
        parts.append('"__metadata__":{' + ",".join(
            f"{_json(k)}:{_json(v)}" for k, v in metadata) + "}")
    off = 0
    for name, dtype, shape, data in order:
        end = off + len(data)
        parts.append(f'{_json(name)}:{{"dtype":"{dtype}","shape":[{",".join(map(str, shape))}],'
                     f'"data_offsets":[{off},{end}]}}')
        off = end
    text = ("{" + ",".join(parts) + "}").encode("utf-8")
    text += b" " * (-len(text) % 8)
    return [struct.pack("<Q", len(text)), text] + [t[3] for t in order]


def _write_atomic(path: str, parts: List[bytes], force: bool) -> None:
    if os.path.lexists(path) and not force:
        raise FileExistsError(f"{path} exists (use force=True to overwrite)")
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _no_dupes(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"name {k!r} appears twice")
        d[k] = v
    return d


def _read_header(path: str) -> Tuple[Dict[str, Any], Dict[str, str], int]:
    """(tensor entries, metadata, data start) of a safetensors file, checked
    as docs/container.md says bfp checks any safetensors file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _fail(_core.ERR_DATA, f"{path}: {size} bytes, too short for safetensors")
        (n,) = struct.unpack("<Q", head)
        if n < 2 or n > _MAX_HEADER or n > size - 8:
            raise _fail(_core.ERR_DATA, f"{path}: header length {n} does not fit a "
                                        f"{size}-byte file")
        raw = f.read(n)
    try:
        text = raw.decode("utf-8")
        hdr = json.JSONDecoder(object_pairs_hook=_no_dupes).raw_decode(text.lstrip())
        obj, end = hdr
        if text.lstrip()[end:].strip(" \t\r\n"):
            raise ValueError("text after the JSON object")
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(_core.ERR_DATA, f"{path}: bad safetensors header ({exc})") from None
    if not isinstance(obj, dict):
        raise _fail(_core.ERR_DATA, f"{path}: the header is not a JSON object")
    data_len = size - 8 - n
    meta = obj.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _fail(_core.ERR_DATA, f"{path}: __metadata__ must map strings to strings")
    entries: Dict[str, Any] = {}
    for name, e in obj.items():
        ok = (isinstance(e, dict) and isinstance(e.get("dtype"), str)
              and isinstance(e.get("shape"), list) and isinstance(e.get("data_offsets"), list)
              and len(e["data_offsets"]) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 53
                      for v in e["shape"] + e["data_offsets"]))
        if not ok:
            raise _fail(_core.ERR_DATA, f"{path}: tensor {name!r} has a malformed entry")
        b, en = e["data_offsets"]
        if not b <= en <= data_len:
            raise _fail(_core.ERR_DATA, f"{path}: tensor {name!r} offsets [{b}, {en}] are "
                                        f"outside the {data_len}-byte data")
        es = _ELEM_SIZE.get(e["dtype"])
        if es is not None and int(np.prod(e["shape"], dtype=np.int64)) * es != en - b:
            raise _fail(_core.ERR_DATA, f"{path}: tensor {name!r} has {en - b} bytes, its "
                                        f"{e['dtype']} shape {e['shape']} needs "
                                        f"{int(np.prod(e['shape'], dtype=np.int64)) * es}")
        entries[name] = e
    return entries, meta, 8 + n


def _read_tensor(path: str, start: int, e: Dict[str, Any], dtype: Any) -> np.ndarray:
    b, en = e["data_offsets"]
    dt = np.dtype(dtype)
    with open(path, "rb") as f:
        f.seek(start + b)
        raw = f.read(en - b)
    a = np.frombuffer(raw, dtype=dt.newbyteorder("<") if dt.itemsize > 1 else dt).copy()
    return a.astype(dt, copy=False).reshape(e["shape"])


# --------------------------------------------------------------------------
# one quantized tensor

def _shape_text(shape: Tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def _save_qtensor(q: QTensor, path: str, name: str, force: bool) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("the tensor name must be a non-empty string")
    info, codes, scales, meta, ts = q._planes()
    shape = q.blocked_shape
    sz = _core.plane_sizes(info["id"], q.rows, q.cols)
    for pname, arr in (("codes", codes), ("scales", scales), ("meta", meta)):
        want = sz[pname]
        have = 0 if arr is None else arr.size
        if have != want:
            raise _fail(_core.ERR_ARG, f"{path}: {pname} plane has {have} bytes, "
                                       f"{info['name']} {list(shape)} needs {want}")
    opts = dict(q.options) if q.options else {}
    full = {"rounding": "default", "seed": "0", "scale_mode": "floor",
            "nvfp4_no_tensor_scale": False, "nvfp4_2d": False}
    full.update({k: opts[k] for k in full if k in opts})
    full["seed"] = str(full["seed"])
    full["nvfp4_no_tensor_scale"] = bool(full["nvfp4_no_tensor_scale"])
    full["nvfp4_2d"] = bool(full["nvfp4_2d"])
    tensors = [(f"{name}.codes", "U8", (codes.size,), codes.tobytes()),
               (f"{name}.scales", "U8", (scales.size,), scales.tobytes())]
    if meta is not None:
        tensors.append((f"{name}.meta", "U8", (meta.size,), meta.tobytes()))
    if ts is not None:
        tensors.append((f"{name}.tensor_scale", "F32", (1,), ts.astype("<f4").tobytes()))
    md = [("bfp.format", info["name"]), ("bfp.shape", _shape_text(shape)), ("bfp.name", name),
          ("bfp.version", _core.version()), ("bfp.options", _json(full)),
          ("bfp.layout", LAYOUT)]
    if q.shape and q.axis % len(q.shape) != len(q.shape) - 1:
        # Not part of planar-v1: the CLI ignores it and decodes the blocked
        # layout; bfp.load() moves the axis back.
        md.append(("bfp.axis", str(q.axis % len(q.shape))))
    _write_atomic(path, _st_bytes(tensors, md), force)


def _parse_options(path: str, text: Optional[str]) -> Dict[str, Any]:
    out = {"rounding": "default", "seed": "0", "scale_mode": "floor",
           "nvfp4_no_tensor_scale": False, "nvfp4_2d": False}
    if text is None:
        return out
    try:
        o = json.loads(text)
    except ValueError:
        o = None
    if not isinstance(o, dict):
        raise _fail(_core.ERR_DATA, f"{path}: bfp.options is not a JSON object")
    checks = {
        "rounding": lambda v: v in _ROUNDING_NAMES,
        "seed": lambda v: isinstance(v, str) and v.isdigit() and int(v) < 1 << 64,
        "scale_mode": lambda v: v in _SCALE_MODE_NAMES,
        "nvfp4_no_tensor_scale": lambda v: isinstance(v, bool),
        "nvfp4_2d": lambda v: isinstance(v, bool),
    }
    for k, ok in checks.items():
        if k in o:
            if not ok(o[k]):
                raise _fail(_core.ERR_DATA, f"{path}: bfp.options has a bad {k} {o[k]!r}")
            out[k] = o[k]
    return out


def _load_qtensor(path: str, name: Optional[str]) -> QTensor:
    entries, meta, start = _read_header(path)
    fmt, stored = meta.get("bfp.format"), meta.get("bfp.name")
    if fmt is None or stored is None:
        raise _fail(_core.ERR_DATA, f"{path}: not a bfp quantized container (no bfp.format "
                                    "or bfp.name metadata)")
    layout = meta.get("bfp.layout")
    if layout != LAYOUT:
        raise _fail(_core.ERR_DATA, f"{path}: unsupported bfp.layout {layout!r} "
                                    f"(expected {LAYOUT})")
    if name is not None and name != stored:
        raise _fail(_core.ERR_ARG, f"{path}: holds tensor {stored!r}, not {name!r}")
    try:
        info = _info(fmt)
    except BfpError:
        raise _fail(_core.ERR_FORMAT, f"{path}: unknown format {fmt!r}") from None
    try:
        shape = json.loads(meta.get("bfp.shape", ""))
        ok = (isinstance(shape, list) and len(shape) <= 8
              and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape))
    except ValueError:
        ok = False
    if not ok:
        raise _fail(_core.ERR_DATA, f"{path}: bfp.shape is missing or not a list of up to 8 "
                                    "positive integers")
    shape = tuple(shape)
    opts = _parse_options(path, meta.get("bfp.options"))
    cols = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    sz = _core.plane_sizes(info["id"], rows, cols)
    need = {"codes": sz["codes"], "scales": sz["scales"], "meta": sz["meta"],
            "tensor_scale": 1 if info["has_tensor_scale"] else 0}
    used = {"codes": True, "scales": True, "meta": info["meta_bytes"] > 0,
            "tensor_scale": bool(info["has_tensor_scale"])}
    planes: Dict[str, Optional[np.ndarray]] = {}
    for p in _PLANES:
        key = f"{stored}.{p}"
        e = entries.get(key)
        if not used[p]:
            if e is not None:
                raise _fail(_core.ERR_DATA, f"{path}: {key} is present but {info['name']} "
                                            f"has no {p} plane")
            planes[p] = None
            continue
        if e is None:
            raise _fail(_core.ERR_DATA, f"{path}: {key} is missing ({info['name']} needs it)")
        dtype = "F32" if p == "tensor_scale" else "U8"
        if e["dtype"] != dtype or len(e["shape"]) != 1 or e["shape"][0] != need[p]:
            raise _fail(_core.ERR_DATA, f"{path}: {key} is {e['dtype']} {e['shape']}, "
                                        f"expected {dtype} [{need[p]}] for {info['name']} "
                                        f"{_shape_text(shape)}")
        planes[p] = _read_tensor(path, start, e, np.float32 if p == "tensor_scale" else np.uint8)
    axis = -1
    if "bfp.axis" in meta and shape:
        try:
            ax = int(meta["bfp.axis"])
        except ValueError:
            ax = -1
        if not 0 <= ax < len(shape):
            raise _fail(_core.ERR_DATA, f"{path}: bad bfp.axis {meta['bfp.axis']!r}")
        if ax != len(shape) - 1:
            s = list(shape)
            last = s.pop()
            s.insert(ax, last)
            shape, axis = tuple(s), ax
    ts = planes["tensor_scale"]
    return QTensor(format=info["name"], shape=shape, codes=planes["codes"],
                   scales=planes["scales"], meta=planes["meta"],
                   tensor_scale=None if ts is None else float(ts[0]),
                   axis=axis, options=opts, stats={}, source_dtype=None)


# --------------------------------------------------------------------------
# float tensors (for state dicts)

def _float_entry(name: str, x: Any) -> Tuple[str, str, Tuple[int, ...], bytes]:
    arr, kind, tdt = _to_numpy(x)
    if kind == "torch" and str(tdt) == "torch.bfloat16":
        dtype = "BF16"
    elif _is_bf16(arr.dtype):
        dtype, arr = "BF16", arr.view(np.uint16)
    elif arr.dtype == np.float32:
        dtype = "F32"
    elif arr.dtype == np.float16:
        dtype = "F16"
    else:
        raise TypeError(f"state dict entry {name!r} has dtype {arr.dtype}: unquantized "
                        "tensors must be float32, float16 or bfloat16")
    arr = np.ascontiguousarray(arr)
    le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return name, dtype, tuple(int(s) for s in arr.shape), le.tobytes()


def _load_floats(path: str) -> Dict[str, np.ndarray]:
    entries, _, start = _read_header(path)
    out = {}
    for name, e in sorted(entries.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if e["dtype"] == "F32":
            out[name] = _read_tensor(path, start, e, np.float32)
        elif e["dtype"] == "F16":
            out[name] = _read_tensor(path, start, e, np.float16)
        elif e["dtype"] == "BF16":
            import ml_dtypes  # noqa: PLC0415
            out[name] = _read_tensor(path, start, e, np.uint16).view(ml_dtypes.bfloat16)
        else:
            raise _fail(_core.ERR_DATA, f"{path}: {name!r} is {e['dtype']}, not a float tensor")
    return out


def _file_name(name: str, taken: set) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "tensor"
    base = base[:200]
    cand, i = base + ".safetensors", 1
    while cand in taken or cand in (INDEX_NAME, FLOAT_FILE):
        cand, i = f"{base}.{i}.safetensors", i + 1
    taken.add(cand)
    return cand


# --------------------------------------------------------------------------
# public

def save(obj: Union[QTensor, Mapping[str, Any]], path: PathLike, *, name: Optional[str] = None,
         force: bool = False) -> None:
    """Save a :class:`QTensor` to a container file, or a state dict to a directory.

    ``obj`` a QTensor: ``path`` is one safetensors file in the planar-v1
    layout, its planes named ``NAME.codes`` etc. (``name`` defaults to
    ``"tensor"``, as the CLI's). ``bfp dequantize path out.npy`` reads it.

    ``obj`` a mapping of names to QTensors and/or float tensors (numpy or
    torch; float32/float16/bfloat16): ``path`` is a directory holding one
    container per QTensor (``bfp.name`` = its key), the float tensors in
    ``float.safetensors``, and ``bfp_index.json``.

    Files are written to a temporary name and renamed into place; an existing
    file is replaced only with ``force=True`` (else FileExistsError).
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
    taken: set = set()
    files: Dict[str, str] = {}
    floats = []
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
        _write_atomic(os.path.join(path, FLOAT_FILE), _st_bytes(floats, None), force)
    index = {"bfp.layout": LAYOUT, "kind": "state_dict", "version": _core.version(),
             "order": list(obj.keys()), "quantized": files,
             "float_file": FLOAT_FILE if floats else None}
    _write_atomic(index_path, [json.dumps(index, indent=1).encode("utf-8") + b"\n"], True)


def load(path: PathLike, name: Optional[str] = None) -> Union[QTensor, Dict[str, Any]]:
    """Load what :func:`save` (or ``bfp quantize``) wrote.

    A file gives a :class:`QTensor` (``name``, if given, must be the stored
    ``bfp.name``); a directory saved from a state dict gives a dict with the
    keys in their saved order (QTensors and float numpy arrays). Malformed
    files raise :class:`bfp.BfpError` naming the problem.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        index_path = os.path.join(path, INDEX_NAME)
        try:
            with open(index_path, encoding="utf-8") as f:
                index = json.load(f)
        except FileNotFoundError:
            raise _fail(_core.ERR_DATA, f"{path}: a directory without {INDEX_NAME}") from None
        if not isinstance(index, dict) or index.get("kind") != "state_dict":
            raise _fail(_core.ERR_DATA, f"{index_path}: not a bfp state dict index")
        floats = _load_floats(os.path.join(path, index["float_file"])) \
            if index.get("float_file") else {}
        out: Dict[str, Any] = {}
        for key in index.get("order", []):
            if key in index["quantized"]:
                out[key] = _load_qtensor(os.path.join(path, index["quantized"][key]), key)
            elif key in floats:
                out[key] = floats[key]
            else:
                raise _fail(_core.ERR_DATA, f"{index_path}: {key!r} is listed but not stored")
        return out
    return _load_qtensor(path, name)
