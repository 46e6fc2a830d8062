"""Many formats on one tensor: tidy rows (one per format) and a plot of them.

:func:`compare` is ``bfp compare`` as a function: the same statistics from
the same library code (:func:`bfp.error` per format), options applied per
format as the CLI applies them. The rows are plain dicts, so
``pandas.DataFrame(bfp.compare(x, fmts))`` is the table; bfp itself does
not need pandas or matplotlib.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._api import error
from ._base import ArrayLike, _info, formats as _all_formats

__all__ = ["compare", "plot_compare"]

# The leading columns, in the order bfp compare prints them; any other key
# bfp.error returns follows.
_COLUMNS = ("format", "bits_per_value", "rmse", "sqnr_db", "max_rel_err", "mean_rel_err",
            "bm_share", "saturated", "max_abs_err", "count", "nonzero", "skipped_input",
            "skipped_output", "blocks", "nonfinite_blocks", "flushed_blocks")

_LABELS = {"bits_per_value": "bits per value", "sqnr_db": "SQNR (dB)", "rmse": "RMSE",
           "max_rel_err": "max relative error", "mean_rel_err": "mean relative error",
           "bm_share": "BM share (of squared error)", "max_abs_err": "max absolute error"}


def _format_list(fmts: Union[None, str, int, Sequence[Union[str, int]]]) -> List[Union[str, int]]:
    if fmts is None:
        return [f["name"] for f in _all_formats()]
    if isinstance(fmts, str):
        names: List[Union[str, int]] = [n.strip() for n in fmts.split(",")]
    elif isinstance(fmts, int):
        names = [fmts]
    else:
        names = list(fmts)
    if not names:
        raise ValueError("formats is empty: name at least one format (None means all)")
    for n in names:
        if isinstance(n, str) and not n:
            raise ValueError(f"formats {fmts!r} has an empty name")
    return names


def compare(x: ArrayLike, formats: Union[None, str, int, Sequence[Union[str, int]]] = None,
            axis: int = -1, rounding: Optional[str] = None, seed: int = 0,
            scale_mode: Optional[str] = None, nvfp4_no_tensor_scale: bool = False,
            nvfp4_2d: bool = False, *, threads: int = 0,
            allow_copy: bool = True) -> List[Dict[str, Any]]:
    """Quantize ``x`` with each format and measure the error: ``bfp compare``'s rows.

    Parameters
    ----------
    x:
        the tensor, as :func:`bfp.quantize` takes it (numpy float32,
        float16 or bfloat16, or a torch tensor).
    formats:
        format names or ids in the order the rows should have, or one
        comma-separated string (``"mxfp4,mxfp4+,nvfp4"``); None (default)
        is every format in table order, as ``bfp compare`` without ``-f``.
    axis:
        the axis the blocks run along.
    rounding, seed:
        as in :func:`bfp.quantize`, for every format.
    scale_mode:
        applied to the MX formats only; the others keep their own scale
        rule (as ``bfp compare --scale-mode``).
    nvfp4_no_tensor_scale, nvfp4_2d:
        applied to nvfp4 and nvfp4+ only (as ``--no-tensor-scale`` /
        ``--2d``).
    threads, allow_copy:
        as in :func:`bfp.quantize`.

    Returns
    -------
    A list of dicts, one per format: ``format``, ``bits_per_value``,
    ``rmse``, ``sqnr_db``, ``max_rel_err``, ``mean_rel_err``, ``bm_share``,
    then the other keys of :func:`bfp.error` (``max_abs_err``, ``count``,
    ``nonzero``, ``blocks``, ``nonfinite_blocks``, ``flushed_blocks``, and
    the saturation count where the library reports one). Ready for
    ``pandas.DataFrame(rows)``.

    Raises
    ------
    What :func:`bfp.error` raises, e.g. :class:`bfp.BfpError` for an
    unknown format; ValueError for an empty format list or name.
    """
    rows: List[Dict[str, Any]] = []
    for fmt in _format_list(formats):
        info = _info(fmt)
        mx = info["family"] == "mx"
        nv = bool(info["has_tensor_scale"])
        e = error(x, fmt, axis=axis, rounding=rounding, seed=seed,
                  scale_mode=scale_mode if mx else None,
                  nvfp4_no_tensor_scale=nvfp4_no_tensor_scale and nv,
                  nvfp4_2d=nvfp4_2d and nv, threads=threads, allow_copy=allow_copy)
        row = {k: e[k] for k in _COLUMNS if k in e}
        row.update((k, v) for k, v in e.items() if k not in row)
        rows.append(row)
    return rows


def plot_compare(rows: Union[Iterable[Mapping[str, Any]], Any], ax: Any = None,
                 x: str = "bits_per_value", y: str = "sqnr_db") -> Any:
    """Plot :func:`compare`'s rows: one labelled point per format.

    Parameters
    ----------
    rows:
        the list :func:`compare` returns (or a pandas DataFrame of it).
    ax:
        a matplotlib Axes to draw on; None makes a new figure (needs
        matplotlib).
    x, y:
        the columns on the axes: by default bits per value against SQNR,
        the storage / accuracy trade-off.

    Returns
    -------
    The matplotlib Axes.

    Raises
    ------
    ImportError naming the package when ``ax`` is None and matplotlib is
    not installed; KeyError for a column the rows lack.
    """
    if hasattr(rows, "to_dict"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    recs = [dict(r) for r in rows]
    if ax is None:
        try:  # optional dependency, untyped here: bfp type-checks without it
            plt: Any = importlib.import_module("matplotlib.pyplot")
        except ImportError as exc:
            raise ImportError("bfp.plot_compare needs matplotlib to make a figure: "
                              "pip install matplotlib (or pass ax=)") from exc
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    for r in recs:
        missing = [c for c in (x, y) if c not in r]
        if missing:
            raise KeyError(f"row {r.get('format', '?')!r} has no {missing[0]!r} column")
        ax.scatter([r[x]], [r[y]])
        ax.annotate(str(r.get("format", "")), (r[x], r[y]), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)
    ax.set_xlabel(_LABELS.get(x, x))
    ax.set_ylabel(_LABELS.get(y, y))
    ax.grid(True, alpha=0.3)
    return ax
