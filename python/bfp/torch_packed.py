"""Packed matmul weights in torch-owned buffers: ``torch.ops.bfp.unpack`` and
``torch.ops.bfp.matmul_packed`` (issue #22).

A packed weight is libbfp's packed GPU weight image (``bfp_cuda_weight_pack_host``,
docs/gemm.md "Packed weights"): one ``uint8`` tensor of
:func:`packed_bytes` bytes, a header and the prepacked arrays, no pointers. It
is made on the host (:func:`pack`, no GPU needed) and is plain bytes to torch:
``.to(device)``, ``state_dict()``, ``torch.save`` / ``torch.load`` carry it.

On CUDA the matmul needs a view of the buffer (a host descriptor: pointers,
TMA tensor maps, read from the header with a synchronous 256-byte copy).
Views are cached by (device, address): a buffer that moved, or whose bytes
were rewritten (``load_state_dict`` bumps its version), gets a new view, made
outside CUDA-graph capture (run the model once first; bfp.nn.Linear makes it
when it is moved to the GPU or loaded).

The matmul's workspace is an argument: device memory of at least
:func:`workspace_bytes` that holds zeros before its first use and that only
bfp matmuls on one stream use (bfp.nn.Linear shares one per device,
:func:`shared_workspace`). The op declares it mutated; it is created outside
the op, so CUDA graphs (``torch.compile(mode="reduce-overhead")``,
``torch.cuda.graph``) capture a fixed address.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Dict, Optional, Tuple

import torch

from . import _base, _core
from ._torch_base import _check_matmul, _cuda_ready, _out_dtype, _stream, x_format_name

__all__ = ["pack", "packed_bytes", "workspace_bytes", "shared_workspace", "clear_views"]

_PATH_AUTO = 0
_ALIGN = 256  # the view's alignment of a device buffer (BFP_WIMG_ALIGN)


def _fmt_id(fmt: str) -> int:
    info = _base._info(fmt)
    if not _core.matmul_format_supported(info["id"]):
        raise ValueError(f"{info['name']}: libbfp's packed matmul weights take mxfp4, mxfp4+, "
                         "nvfp4, nvfp4+ and hif4 only")
    return int(info["id"])


def packed_bytes(fmt: str, n: int, k: int) -> int:
    """Bytes of the packed ``n x k`` weight of a matmul format."""
    return int(_core.cuda_weight_packed_size(_fmt_id(fmt), int(n), int(k)))


def pack(codes: torch.Tensor, scales: torch.Tensor, meta: torch.Tensor,
         tensor_scale: torch.Tensor, fmt: str, n: int, k: int) -> torch.Tensor:
    """The packed weight of planes (as ``torch.ops.bfp.quantize`` returns
    them for an ``n x k`` weight blocked along k): ``uint8 [packed_bytes]``
    on the planes' device, packed on the host (an offline step: CUDA planes
    are copied to the host)."""
    info = _base._info(fmt)
    out = torch.empty(packed_bytes(fmt, n, k), dtype=torch.uint8)
    host = [p.detach().cpu().contiguous().numpy() for p in (codes, scales, meta, tensor_scale)]
    _core.cuda_weight_pack_host(int(info["id"]), host[0], host[1],
                                host[2] if info["meta_bytes"] else None,
                                host[3] if info["has_tensor_scale"] else None, int(n), int(k),
                                out.numpy())
    return out.to(codes.device)


# --------------------------------------------------------------------------
# views of device buffers

class _View:
    __slots__ = ("ref", "version", "shape", "cap", "ws_max")

    def __init__(self, ref: Any, version: int, shape: Tuple[str, int, int, int], cap: Any,
                 ws_max: int) -> None:
        self.ref, self.version, self.shape, self.cap, self.ws_max = ref, version, shape, cap, ws_max


_VIEWS: Dict[Tuple[int, int], _View] = {}


def clear_views() -> None:
    """Drop every cached view (they are remade on the next eager call)."""
    _VIEWS.clear()


def _forget(key: Tuple[int, int], ref: Any) -> None:
    v = _VIEWS.get(key)
    if v is not None and v.ref is ref:
        del _VIEWS[key]


def _version(t: torch.Tensor) -> int:
    """t's version counter; inference tensors have none (and cannot be
    rewritten in place outside inference mode): -1"""
    try:
        return int(t._version)
    except RuntimeError:
        return -1


def _view(packed: torch.Tensor, fmt: str, n: int, k: int) -> _View:
    """The cached view of a CUDA buffer, made when missing or stale."""
    dev = packed.device.index if packed.device.index is not None else torch.cuda.current_device()
    key = (dev, packed.data_ptr())
    shape = (fmt, n, k, packed.numel())
    v = _VIEWS.get(key)
    if v is not None:
        owner = v.ref()
        # the tensor viewed is alive, still at this address, unchanged since
        # (a tensor sharing its storage shares its version counter)
        if owner is not None and owner.data_ptr() == key[1] and \
                _version(owner) == v.version == _version(packed) and v.shape == shape:
            return v
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("bfp.matmul_packed: this weight buffer has no view yet (new, moved or "
                           "rewritten) and a CUDA graph is being captured; run the model once "
                           "before capturing (bfp.nn.Linear views its buffer when moved or loaded)")
    if packed.data_ptr() % _ALIGN:
        raise ValueError(f"bfp.matmul_packed: the packed buffer's address is not {_ALIGN}-byte "
                         "aligned (a slice of a larger tensor?); pass a tensor of its own")
    with torch.cuda.device(packed.device):
        # the bytes may have been written on this stream, which the header's
        # synchronous copy (legacy stream) does not wait for when it is a
        # non-blocking one; this also lets matmul_packed's pdl rely on it
        torch.cuda.current_stream(packed.device).synchronize()
        cap = _core.cuda_weight_view(_fmt_id(fmt), n, k, packed.data_ptr(), packed.numel())
        ws_max = int(_core.cuda_matmul_workspace_size_max(cap))
    def gone(r: Any) -> None:
        _forget(key, r)

    v = _View(weakref.ref(packed, gone), _version(packed), shape, cap, ws_max)
    _VIEWS[key] = v
    return v


def workspace_bytes(packed: torch.Tensor, fmt: str, n: int, k: int) -> int:
    """Workspace bytes that serve ``matmul_packed`` with this CUDA weight at
    every number of rows (``bfp_cuda_matmul_workspace_size_max``); 0 on the CPU."""
    if packed.device.type != "cuda":
        return 0
    _cuda_ready(packed)
    return _view(packed, fmt, n, k).ws_max


# One zeroed workspace per device, shared by the bfp.nn.Linear modules there
# (calls on one stream run one after another, bfp_cuda_matmul's contract).
_WORKSPACES: Dict[int, torch.Tensor] = {}
_USERS: Dict[int, "weakref.WeakSet[Any]"] = {}


def shared_workspace(device: torch.device, nbytes: int, user: Any = None) -> torch.Tensor:
    """The device's shared matmul workspace, at least ``nbytes`` (zeros when
    made). When it must grow, a new one replaces it and every registered
    ``user`` (an object with a ``_workspace`` attribute) gets the new one;
    grow it (move or load the modules) before capturing CUDA graphs."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ws = _WORKSPACES.get(idx)
    users = _USERS.setdefault(idx, weakref.WeakSet())
    if user is not None:
        users.add(user)
    if ws is None or ws.numel() < nbytes:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("bfp: the matmul workspace must grow during CUDA-graph capture; "
                               "move the modules to the GPU before capturing")
        ws = torch.zeros(max(int(nbytes), 1), dtype=torch.uint8, device=torch.device("cuda", idx))
        torch._dynamo.mark_static_address(ws)  # cudagraphs: a fixed address, not copied
        _WORKSPACES[idx] = ws
        for u in list(users):
            u._workspace = ws
    return ws


# --------------------------------------------------------------------------
# ops

def _bf16_only(x_format: str) -> None:
    if x_format_name(x_format) != "bf16":
        raise ValueError(f"x_format {x_format!r}: packed weights serve bf16 activations; "
                         "quantized activations take W's planes (torch.ops.bfp.matmul, "
                         "bfp.nn.Linear with x_format)")


def _check_packed(packed: torch.Tensor, fmt: str, n: int, k: int) -> None:
    want = packed_bytes(fmt, n, k)
    if packed.dtype != torch.uint8 or packed.dim() != 1 or packed.numel() != want:
        raise ValueError(f"packed weight must be uint8 [{want}] for {fmt} {n}x{k}, not "
                         f"{packed.dtype} {tuple(packed.shape)}")


def _unpack_f32(packed: torch.Tensor, fmt: str, n: int, k: int) -> torch.Tensor:
    out = torch.empty((n, k), dtype=torch.float32, device=packed.device)
    if packed.device.type == "cuda":
        _cuda_ready(packed)
        with torch.cuda.device(packed.device):
            v = _view(packed, fmt, n, k)
            _core.cuda_weight_unpack(v.cap, _out_dtype(torch.float32), out.data_ptr(),
                                     _stream(packed))
        return out
    _core.cuda_weight_unpack_host(_fmt_id(fmt), n, k, packed.detach().contiguous().numpy(),
                                  out.numpy())
    return out


@torch.library.custom_op("bfp::unpack", mutates_args=())
def unpack(packed: torch.Tensor, fmt: str, n: int, k: int,
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``[n, k]`` weight a packed buffer holds, in ``dtype``: the float32
    values of ``bfp.QTensor.dequantize`` of the planes packed, bit for bit,
    then cast (CPU: ``bfp_cuda_weight_unpack_host``; CUDA:
    ``bfp_cuda_weight_unpack``)."""
    _check_packed(packed, fmt, n, k)
    _out_dtype(dtype)
    return _unpack_f32(packed, fmt, n, k).to(dtype)


@unpack.register_fake
def _(packed: torch.Tensor, fmt: str, n: int, k: int,
      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    _check_packed(packed, fmt, n, k)
    _out_dtype(dtype)
    return packed.new_empty((n, k), dtype=dtype)


@torch.library.custom_op("bfp::matmul_packed", mutates_args=("workspace",))
def matmul_packed(x: torch.Tensor, packed: torch.Tensor, workspace: torch.Tensor,
                  bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
                  x_format: str = "bf16", pdl: bool = False) -> torch.Tensor:
    """``y = x @ W.T (+ bias)``: x bfloat16 ``[..., k]``, W a packed ``[n, k]``
    weight (:func:`pack`), y bfloat16 ``[..., n]``.

    CUDA: ``bfp_cuda_matmul`` (AUTO path, fp32 accumulation) on the current
    stream with ``workspace`` (``uint8``, on x's device, at least
    :func:`workspace_bytes`, zeros before its first use; scratch the call
    writes). CPU: W decoded to float32 (exact), the product and bias in
    float32 by torch, rounded once to bfloat16; the workspace is not used.

    ``pdl``: the tuning ``gemv_pdl = 1`` (Hopper, up to 16 rows of x: the GEMV
    kernel with programmatic dependent launch, which starts reading W while
    the previous kernel in the stream still runs). Pass it only when that
    kernel cannot be writing W; a write torch tracks (``copy_``,
    ``load_state_dict``) makes a new view first, which waits for it.
    """
    _check_matmul(x, bias, fmt, n, k, x_format)
    _bf16_only(x_format)
    _check_packed(packed, fmt, n, k)
    lead = x.shape[:-1]
    m = math.prod(lead)
    if m == 0:
        return x.new_empty(list(lead) + [n])
    x2 = x.reshape(m, k).contiguous()
    if x.device.type == "cuda":
        _cuda_ready(x)
        if packed.device != x.device or workspace.device != x.device:
            raise ValueError(f"x is on {x.device}, the packed weight on {packed.device}, the "
                             f"workspace on {workspace.device}: they must share a device")
        with torch.cuda.device(x.device):
            v = _view(packed, fmt, n, k)
            need = int(_core.cuda_matmul_workspace_size(v.cap, m, _PATH_AUTO, int(pdl)))
            if workspace.dtype != torch.uint8 or workspace.numel() < need:
                raise ValueError(f"bfp.matmul_packed: the workspace has {workspace.numel()} "
                                 f"bytes, m={m} needs {need} (bfp.torch_packed.workspace_bytes "
                                 f"says {v.ws_max} for every m)")
            y = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
            b = bias.contiguous() if bias is not None else None
            _core.cuda_matmul(v.cap, x2.data_ptr(), m, b.data_ptr() if b is not None else 0,
                              y.data_ptr(), workspace.data_ptr(), workspace.numel(), _PATH_AUTO,
                              _stream(x), int(pdl))
        return y.view(list(lead) + [n])
    wf = _unpack_f32(packed, fmt, n, k)
    yf = x2.float() @ wf.t()
    if bias is not None:
        yf = yf + bias.float()
    return yf.to(torch.bfloat16).view(list(lead) + [n])


@matmul_packed.register_fake
def _(x: torch.Tensor, packed: torch.Tensor, workspace: torch.Tensor,
      bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
      x_format: str = "bf16", pdl: bool = False) -> torch.Tensor:
    _check_matmul(x, bias, fmt, n, k, x_format)
    _bf16_only(x_format)
    _check_packed(packed, fmt, n, k)
    return x.new_empty(list(x.shape[:-1]) + [n])


class _MatmulPackedFn(torch.autograd.Function):
    """matmul_packed with a gradient for x and the bias (W is constant: dx =
    dy @ W). A custom op that mutates an argument cannot take an autograd
    formula itself, hence this wrapper, used when a gradient is needed."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, packed: torch.Tensor, workspace: torch.Tensor,
                bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
                x_format: str, pdl: bool) -> torch.Tensor:
        ctx.save_for_backward(packed)
        ctx.fmt, ctx.n, ctx.k, ctx.has_bias = fmt, n, k, bias is not None
        y: torch.Tensor = torch.ops.bfp.matmul_packed(x, packed, workspace, bias, fmt, n, k,
                                                      x_format, pdl)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        (packed,) = ctx.saved_tensors
        w = torch.ops.bfp.unpack(packed, ctx.fmt, ctx.n, ctx.k, torch.float32)
        g = grad.float()
        gx = (g @ w).to(torch.bfloat16)
        gb = g.reshape(-1, ctx.n).sum(0).to(torch.bfloat16) if ctx.has_bias else None
        return (gx, None, None, gb, None, None, None, None, None)


def linear(x: torch.Tensor, packed: torch.Tensor, workspace: torch.Tensor,
           bias: Optional[torch.Tensor], fmt: str, n: int, k: int,
           x_format: str = "bf16", pdl: bool = False) -> torch.Tensor:
    """``torch.ops.bfp.matmul_packed``, differentiable in x and bias when a
    gradient is needed."""
    if torch.is_grad_enabled() and (x.requires_grad or
                                    (bias is not None and bias.requires_grad)):
        out: torch.Tensor = _MatmulPackedFn.apply(x, packed, workspace, bias, fmt, n, k,
                                                  x_format, pdl)
        return out
    y: torch.Tensor = torch.ops.bfp.matmul_packed(x, packed, workspace, bias, fmt, n, k,
                                                  x_format, pdl)
    return y

