"""torch modules with bfp weights: :class:`Linear`, :class:`Embedding` and
:func:`quantize_model`.

A :class:`Linear` holds its weight in buffers torch allocated, plus the
format in ``_extra_state``, so ``state_dict()`` / ``load_state_dict()``,
``.to(device)`` and ``torch.save`` / ``torch.load`` carry it:

* the matmul formats (mxfp4, mxfp4+, nvfp4, nvfp4+, hif4) with bf16
  activations, or with an ``x_format`` whose decoded values bf16 holds
  exactly (MX, MX+, MX++, HiF4: x is quantized and decoded to bf16 first, so
  W4A8 and W4A4 run the bf16-x kernels; bfp.torch_moe.decodes_to_bf16): ``packed``, the packed weight (``uint8``, libbfp's image:
  header and prepacked arrays, bfp.torch_packed), the same bytes on any device. The forward pass is
  ``torch.ops.bfp.matmul_packed``: ``bfp_cuda_matmul`` on CUDA with the
  device's shared workspace (made when the module is moved or loaded, never
  during a CUDA-graph capture), W decoded + torch's matmul on the CPU;
* other formats, and NVFP4 activations (whose float32 tensor scale bf16
  cannot hold): the planes (``codes``, ``scales``, ``meta``: uint8;
  ``tensor_scale``: float32 [1]) and ``torch.ops.bfp.matmul``, which runs
  ``bfp_cuda_matmul_xq`` on CUDA for the pairs with a kernel.

Activations enter as bfloat16 (quantized to ``x_format`` by the matmul when
it is not bf16); the result is cast back to the input's dtype.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

import torch

from . import _base, _core, torch_packed
from .torch_moe import decodes_to_bf16
from .torch_ops import plane_shapes, x_format_name, xq_kernel

__all__ = ["Linear", "Embedding", "quantize_model", "DEFAULT_EXCLUDE"]

# Module names quantize_model leaves alone unless told otherwise: output heads
# (often tied to the embedding) and classifiers. Embeddings are swapped only
# when asked (quantize_model's embeddings=True); norms never.
DEFAULT_EXCLUDE = (r"(^|\.)(lm_head|head|classifier|score)$",)


_PLANES = ("codes", "scales", "meta", "tensor_scale")
_NO_INIT_WEIGHT = [False]  # from_float fills the buffers itself


def _packs(fmt: str, xf: str) -> bool:
    """Whether a Linear of fmt with activations xf holds a packed weight: the
    bf16-x GPU matmul serves it (x decoded to bf16 first when xf is not bf16)."""
    return bool(_core.matmul_format_supported(_base._info(fmt)["id"])) and \
        (xf == "bf16" or decodes_to_bf16(xf))


def _pack(planes: List[torch.Tensor], fmt: str, n: int, k: int) -> torch.Tensor:
    return torch_packed.pack(planes[0], planes[1], planes[2], planes[3], fmt, n, k)


@contextlib.contextmanager
def _no_init_weight() -> Iterator[None]:
    _NO_INIT_WEIGHT[0] = True
    try:
        yield
    finally:
        _NO_INIT_WEIGHT[0] = False


class Linear(torch.nn.Module):
    """``y = x @ W.T + bias`` with W quantized to a bfp format (blocks along
    ``in_features``, the reduction axis).

    Build one with :meth:`from_float`; the constructor makes a module of the
    right buffer shapes (an all-zero weight) for ``load_state_dict``.

    ``pdl`` (an attribute, default False; not saved in the state dict): on
    Hopper, up to 16 rows of x, the GEMV kernel with programmatic dependent
    launch, which starts reading W while the previous kernel still runs
    (``torch.ops.bfp.matmul_packed``'s ``pdl``). Safe when nothing writes the
    weight's bytes behind torch's back (through ``.data`` or a raw pointer)
    right before the forward pass; packed weights only.
    """

    packed: Optional[torch.Tensor]
    codes: Optional[torch.Tensor]
    scales: Optional[torch.Tensor]
    meta: Optional[torch.Tensor]
    tensor_scale: Optional[torch.Tensor]

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 fmt: str = "mxfp4", x_format: Optional[str] = None,
                 device: Any = None, dtype: Optional[torch.dtype] = None,
                 pdl: bool = False) -> None:
        super().__init__()
        info = _base._info(fmt)
        self.pdl = bool(pdl)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.fmt = str(info["name"])
        self._set_x_format(x_format_name(x_format))
        n, k = self.out_features, self.in_features
        shp = plane_shapes(self.fmt, n, k)
        planes = [torch.zeros(shp[p], dtype=torch.uint8) for p in ("codes", "scales", "meta")]
        planes.append(torch.ones(1, dtype=torch.float32))
        self._workspace = torch.empty(0, dtype=torch.uint8)  # set by _prepare on CUDA
        self._ts_host = torch.ones(1, dtype=torch.float32)  # tensor_scale's host copy
        if _packs(self.fmt, self.x_format):
            pk = (torch.empty(torch_packed.packed_bytes(self.fmt, n, k), dtype=torch.uint8)
                  if _NO_INIT_WEIGHT[0] else _pack(planes, self.fmt, n, k))
            self.register_buffer("packed", pk.to(device))
            for name in _PLANES:
                self.register_buffer(name, None)
        else:
            self.register_buffer("packed", None)
            for name, t in zip(_PLANES, planes):
                self.register_buffer(name, t.to(device))
        self.bias: Optional[torch.nn.Parameter]
        if bias:
            self.bias = torch.nn.Parameter(torch.zeros(out_features, device=device,
                                                       dtype=dtype or torch.float32))
        else:
            self.register_parameter("bias", None)
        if not _NO_INIT_WEIGHT[0]:
            self._prepare()

    def _set_x_format(self, xf: str) -> None:
        self.x_format = xf
        # decided here, not in forward, so torch.compile sees a constant: on
        # CUDA the quantized-x kernel takes W's NVFP4 tensor scale on the host
        self._ts_from_host = bool(_base._info(self.fmt)["has_tensor_scale"]) and \
            xq_kernel(self.fmt, xf)

    def _prepare(self) -> None:
        """On CUDA: view the packed buffer and take the device's shared
        workspace, sized for every m (outside any CUDA-graph capture). With
        planes: a host copy of the tensor scale, which the quantized-x kernel
        takes on the host."""
        if self.tensor_scale is not None:
            self._ts_host = self.tensor_scale.detach().to("cpu", torch.float32, copy=True)
        p = self.packed
        if p is None or p.device.type != "cuda":
            self._workspace = torch.empty(0, dtype=torch.uint8)
            return
        need = torch_packed.workspace_bytes(p, self.fmt, self.out_features, self.in_features)
        self._workspace = torch_packed.shared_workspace(p.device, need, self)

    @classmethod
    def from_float(cls, linear: torch.nn.Linear, fmt: str,
                   x_format: Optional[str] = None, pdl: bool = False) -> "Linear":
        """The bfp twin of ``linear``.

        Parameters
        ----------
        linear:
            a ``torch.nn.Linear``; its weight is quantized on its device
            (blocks along ``in_features``), its bias copied as is.
        fmt:
            the weight format.
        x_format:
            the activation format: ``None`` or ``"bf16"`` (x as it is), or a
            bfp format that x is quantized to before the product
            (``"mxfp8_e4m3"``: W4A8, ``"mxfp4"``: W4A4, ...).
        pdl:
            the module's ``pdl`` attribute (see the class).

        Returns
        -------
        A :class:`bfp.nn.Linear`.

        Raises
        ------
        TypeError if ``linear`` is not an ``nn.Linear``; :class:`bfp.BfpError`
        for an unknown format; ``ValueError`` for an ``x_format`` that is
        neither bf16 nor a bfp format.
        """
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"from_float takes a torch.nn.Linear, not {type(linear).__name__}")
        w = linear.weight.detach()
        with _no_init_weight():
            mod = cls(linear.in_features, linear.out_features, linear.bias is not None, fmt,
                      x_format, device=w.device, dtype=w.dtype, pdl=pdl)
        planes = torch.ops.bfp.quantize(w, mod.fmt)
        with torch.no_grad():
            if mod.packed is not None:
                mod.packed = _pack(list(planes), mod.fmt, mod.out_features, mod.in_features)
            else:
                for name, t in zip(_PLANES, planes):
                    getattr(mod, name).copy_(t)
            if linear.bias is not None:
                assert mod.bias is not None
                mod.bias.copy_(linear.bias.detach())
        mod._prepare()
        return mod

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight's values, ``[out_features, in_features]``."""
        out: torch.Tensor
        if self.packed is not None:
            out = torch.ops.bfp.unpack(self.packed, self.fmt, self.out_features,
                                       self.in_features, dtype)
            return out
        out = torch.ops.bfp.dequantize(
            self.codes, self.scales, self.meta, self.tensor_scale, self.fmt,
            [self.out_features, self.in_features], -1, dtype)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.bias.to(torch.bfloat16) if self.bias is not None else None
        xb = x.to(torch.bfloat16)
        y: torch.Tensor
        if self.packed is not None:
            # bf16 in and out (exact: its values are bf16 values); a .float() first
            # would be dropped by inductor, which elides bf16 -> float32 round trips
            if self.x_format != "bf16":
                xb = torch.ops.bfp.fake_quant(xb, self.x_format)
            y = torch_packed.linear(xb, self.packed, self._workspace, b, self.fmt,
                                    self.out_features, self.in_features, "bf16", self.pdl)
        else:
            ts = self.tensor_scale
            # the quantized-x kernel takes W's tensor scale on the host: no sync
            if self._ts_from_host and x.device.type == "cuda":
                ts = self._ts_host
            y = torch.ops.bfp.matmul(xb, self.codes, self.scales, self.meta, ts,
                                     b, self.fmt, self.out_features, self.in_features,
                                     self.x_format)
        return y.to(x.dtype)

    # The format travels in the state dict and is checked on load.
    def get_extra_state(self) -> Dict[str, Any]:
        return {"format": self.fmt, "x_format": self.x_format,
                "in_features": self.in_features, "out_features": self.out_features}

    def set_extra_state(self, state: Any) -> None:
        mine = self.get_extra_state()
        if not isinstance(state, dict) or _base._info(state.get("format", ""))["name"] != \
                self.fmt or any(state.get(k) != mine[k] for k in ("in_features", "out_features")):
            raise ValueError(f"bfp.nn.Linear: the state dict holds {state!r}, this module is "
                             f"{mine!r}; build the module with the same format and shape")
        xf = x_format_name(state.get("x_format"))
        if _packs(self.fmt, xf) != (self.packed is not None):
            held = ("packed", "as planes") if self.packed is not None else ("as planes", "packed")
            raise ValueError(f"bfp.nn.Linear: the state dict's x_format {xf!r} needs the "
                             f"weight {held[1]}, this module (x_format {self.x_format!r}) "
                             f"holds it {held[0]}; build it with that x_format")
        self._set_x_format(xf)

    def _load_from_state_dict(self, state_dict: Dict[str, Any], prefix: str,
                              *args: Any, **kwargs: Any) -> None:
        # a state dict of planes (as saved before weights were packed) loads
        # into a packed module: its planes are packed here
        if self.packed is not None and prefix + "packed" not in state_dict and \
                all(prefix + p in state_dict for p in _PLANES):
            planes = [state_dict.pop(prefix + p) for p in _PLANES]
            state_dict[prefix + "packed"] = _pack(planes, self.fmt, self.out_features,
                                                  self.in_features)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._prepare()  # new bytes: a new view

    def _apply(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "Linear":
        if self.tensor_scale is None:
            super()._apply(fn, *args, **kwargs)  # type: ignore[no-untyped-call]
            self._prepare()  # moved: view the buffer where it is now
            return self
        _apply_keeping_tensor_scale(self, super()._apply, fn, *args, **kwargs)
        return self

    # the shared workspace is the device's, not the module's: not pickled
    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_workspace"] = torch.empty(0, dtype=torch.uint8)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("pdl", False)  # pickled before pdl existed
        if self.packed is not None and self.packed.device.type == "cuda":
            self._prepare()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, fmt={self.fmt!r}, x_format={self.x_format!r}"
                + (", pdl=True" if self.pdl else ""))


def _apply_keeping_tensor_scale(mod: Any, apply: Callable[..., Any],
                                fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Module._apply for a module with a float32 ``tensor_scale`` buffer:
    model.half() / .to(bfloat16) cast floating buffers, but the tensor scale
    must keep its bits, so it travels as int32 meanwhile."""
    mod.tensor_scale = mod.tensor_scale.view(torch.int32)
    try:
        apply(fn, *args, **kwargs)
    finally:
        mod.tensor_scale = mod.tensor_scale.view(torch.float32)


class Embedding(torch.nn.Module):
    """``torch.nn.Embedding`` with its table held in a bfp format (blocks along
    ``embedding_dim``). The forward pass gathers the looked-up rows' planes
    and decodes them (``torch.ops.bfp.dequantize``): bit for bit those rows of
    the decoded table, at the cost of the rows looked up, not of the table.

    Build one with :meth:`from_float`; the constructor makes a module of the
    right buffer shapes (an all-zero table) for ``load_state_dict``.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    meta: torch.Tensor
    tensor_scale: torch.Tensor

    def __init__(self, num_embeddings: int, embedding_dim: int, fmt: str = "mxfp4",
                 device: Any = None, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.fmt = str(_base._info(fmt)["name"])
        self.dtype = dtype  # of the looked-up rows, as the float table's
        shp = plane_shapes(self.fmt, self.num_embeddings, self.embedding_dim)
        for p in ("codes", "scales", "meta"):
            self.register_buffer(p, torch.zeros(shp[p], dtype=torch.uint8, device=device))
        self.register_buffer("tensor_scale", torch.ones(1, dtype=torch.float32, device=device))

    @classmethod
    def from_float(cls, embedding: torch.nn.Embedding, fmt: str) -> "Embedding":
        """The bfp twin of ``embedding``.

        Parameters
        ----------
        embedding:
            a ``torch.nn.Embedding`` without ``max_norm`` (which rewrites the
            table during lookups); its table is quantized on its device,
            blocks along ``embedding_dim``.
        fmt:
            the table's format (any bfp format).

        Returns
        -------
        A :class:`bfp.nn.Embedding` whose rows come out in the table's dtype.

        Raises
        ------
        TypeError if ``embedding`` is not an ``nn.Embedding``; ``ValueError``
        if it has ``max_norm``; :class:`bfp.BfpError` for an unknown format.
        """
        if not isinstance(embedding, torch.nn.Embedding):
            raise TypeError("Embedding.from_float takes a torch.nn.Embedding, not "
                            f"{type(embedding).__name__}")
        if embedding.max_norm is not None:
            raise ValueError("bfp.nn.Embedding: max_norm rewrites the table on lookup; "
                             "a quantized table cannot follow it")
        w = embedding.weight.detach()
        mod = cls(embedding.num_embeddings, embedding.embedding_dim, fmt, device=w.device,
                  dtype=w.dtype)
        with torch.no_grad():
            for name, t in zip(_PLANES, torch.ops.bfp.quantize(w, mod.fmt)):
                getattr(mod, name).copy_(t)
        return mod

    def dequantize(self, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The table's values, ``[num_embeddings, embedding_dim]``."""
        out: torch.Tensor = torch.ops.bfp.dequantize(
            self.codes, self.scales, self.meta, self.tensor_scale, self.fmt,
            [self.num_embeddings, self.embedding_dim], -1, dtype or self.dtype)
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        codes, scales = (p.index_select(0, flat) for p in (self.codes, self.scales))
        # formats without meta hold a [V, 0] plane: no gather of zero-width rows
        meta = (self.meta.index_select(0, flat) if self.meta.shape[1]
                else self.meta.new_empty((flat.shape[0], 0)))
        out: torch.Tensor = torch.ops.bfp.dequantize(
            codes, scales, meta, self.tensor_scale, self.fmt,
            [flat.shape[0], self.embedding_dim], -1, self.dtype)
        return out.view(*ids.shape, self.embedding_dim)

    def get_extra_state(self) -> Dict[str, Any]:
        return {"format": self.fmt, "num_embeddings": self.num_embeddings,
                "embedding_dim": self.embedding_dim, "dtype": str(self.dtype)}

    def set_extra_state(self, state: Any) -> None:
        mine = self.get_extra_state()
        if not isinstance(state, dict) or _base._info(state.get("format", ""))["name"] != \
                self.fmt or any(state.get(k) != mine[k]
                                for k in ("num_embeddings", "embedding_dim")):
            raise ValueError(f"bfp.nn.Embedding: the state dict holds {state!r}, this module "
                             f"is {mine!r}; build the module with the same format and shape")
        self.dtype = getattr(torch, str(state.get("dtype", "")).removeprefix("torch."),
                             self.dtype)

    def _apply(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "Embedding":
        _apply_keeping_tensor_scale(self, super()._apply, fn, *args, **kwargs)
        return self

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, fmt={self.fmt!r}, "
                f"dtype={self.dtype}")


def _matches(name: str, patterns: Optional[Iterable[str]]) -> bool:
    return any(re.search(p, name) for p in (patterns or ()))


def quantize_model(model: torch.nn.Module, fmt: str, x_format: Optional[str] = None,
                   include: Union[None, str, Iterable[str]] = None,
                   exclude: Union[None, str, Iterable[str]] = DEFAULT_EXCLUDE,
                   embeddings: bool = False, pdl: bool = False) -> torch.nn.Module:
    """Swap ``model``'s ``torch.nn.Linear`` layers for :class:`bfp.nn.Linear`, in place.

    Parameters
    ----------
    model:
        any ``torch.nn.Module``; its ``nn.Linear`` submodules (exactly that
        class, not subclasses) are candidates, by dotted name.
    fmt:
        the weight format (``"mxfp4"``, ``"nvfp4"``, ``"mxfp4+"``, ...).
    x_format:
        the matmul's activation format: ``None`` or ``"bf16"``, or a bfp
        format x is quantized to (``"mxfp8_e4m3"``: W4A8, ``"mxfp4"``: W4A4).
    include:
        regexes (``re.search`` on the name; one string is one regex); when
        given, only matching layers are swapped.
    exclude:
        regexes of layers left alone; by default :data:`DEFAULT_EXCLUDE`
        (``lm_head``, ``head``, ``classifier``, ``score``). A given value
        replaces the default; ``exclude=()`` swaps the heads too.
        Norms stay as they are.
    embeddings:
        also swap ``torch.nn.Embedding`` layers (those that ``include`` and
        ``exclude`` let through) for :class:`bfp.nn.Embedding` in ``fmt``;
        off by default, as most recipes keep the embedding in 16 bits.
    pdl:
        each :class:`Linear`'s ``pdl`` (programmatic dependent launch of the
        GEMV kernel on Hopper; see the class).

    Returns
    -------
    ``model``, with the layers swapped.

    Raises
    ------
    :class:`bfp.BfpError` for an unknown format, ``ValueError`` for an
    ``x_format`` that is neither bf16 nor a bfp format, before any layer is
    changed.
    """
    inc = [include] if isinstance(include, str) else include
    exc = [exclude] if isinstance(exclude, str) else exclude
    _base._info(fmt)
    x_format_name(x_format)
    swaps: List[Any] = []
    kinds = (torch.nn.Linear, torch.nn.Embedding) if embeddings else (torch.nn.Linear,)
    for name, mod in model.named_modules():
        if type(mod) not in kinds or not name:
            continue
        if inc is not None and not _matches(name, inc):
            continue
        if _matches(name, exc):
            continue
        swaps.append((name, mod))
    for name, mod in swaps:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Linear.from_float(mod, fmt, x_format, pdl=pdl)
                if type(mod) is torch.nn.Linear else Embedding.from_float(mod, fmt))
    return model
