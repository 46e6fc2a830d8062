"""The Python API's rough edges of issue 18: option types, bfp.compare and its
plot, docstrings, and static types (mypy). The comparison with `bfp compare`
needs BFP_CLI (skipped without it).
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import ml_dtypes
import numpy as np
import pytest

import bfp

from test_package import cli, heavy, run  # noqa: E402  (same directory)

ROOT = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16


# ---------------------------------------------------------------- option types

@pytest.mark.parametrize("bad", [1.5, "7", True, False, None, 2.0, [1]])
def test_seed_must_be_an_int(bad):
    x = heavy((2, 64))
    for fn in (bfp.quantize, bfp.fake_quant, bfp.error):
        with pytest.raises(TypeError, match="seed must be an int"):
            fn(x, "mxfp4", rounding="stochastic", seed=bad)
    with pytest.raises(TypeError, match="seed must be an int"):
        bfp.compare(x, ["mxfp4"], rounding="stochastic", seed=bad)


def test_seed_and_threads_accept_ints():
    x = heavy((4, 64), seed=1)
    a = bfp.quantize(x, "mxfp4", rounding="stochastic", seed=np.uint64(2**64 - 1))
    b = bfp.quantize(x, "mxfp4", rounding="stochastic", seed=2**64 - 1, threads=np.int32(2))
    assert a == b
    with pytest.raises(TypeError, match="threads must be an int"):
        bfp.quantize(x, "mxfp4", threads=1.5)
    with pytest.raises(ValueError, match="seed must be in"):
        bfp.quantize(x, "mxfp4", seed=-1)


# ---------------------------------------------------------------- bfp.compare

FMTS = ["mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+", "hif4", "mxfp8_e4m3", "mxint8"]


def test_compare_rows():
    x = heavy((16, 128), seed=2)
    rows = bfp.compare(x, FMTS)
    assert [r["format"] for r in rows] == FMTS
    for r in rows:
        e = bfp.error(x, r["format"])
        assert r == e  # the same numbers, bfp.error's keys
        assert list(r)[:7] == ["format", "bits_per_value", "rmse", "sqnr_db", "max_rel_err",
                               "mean_rel_err", "bm_share"]
        assert all(isinstance(v, (str, int, float)) for v in r.values())  # flat: a DataFrame row
    assert [r["format"] for r in bfp.compare(x)] == [f["name"] for f in bfp.formats()]
    assert bfp.compare(x, "mxfp4, nvfp4") == bfp.compare(x, ["mxfp4", "nvfp4"])
    assert bfp.compare(x, 8)[0]["format"] == "nvfp4"
    for bad in ("mxfp4,", "mxfp4,,nvfp4", [], ""):
        with pytest.raises(ValueError, match="empty"):
            bfp.compare(x, bad)
    with pytest.raises(bfp.BfpError, match="unknown format"):
        bfp.compare(x, ["mxfp4", "mxfp5"])


def test_compare_applies_options_per_format():
    """scale_mode reaches the MX formats only, the nvfp4 flags nvfp4(+) only,
    as in `bfp compare`; the rows are those of bfp.error with each format's options."""
    x = heavy((32, 64), seed=3)
    rows = {r["format"]: r for r in bfp.compare(x, ["mxfp4", "mxfp4+", "nvfp4", "hif4"],
                                                  scale_mode="ceil", nvfp4_no_tensor_scale=True)}
    assert rows["mxfp4"] == bfp.error(x, "mxfp4", scale_mode="ceil")
    assert rows["mxfp4"] != bfp.error(x, "mxfp4")
    assert rows["mxfp4+"] == bfp.error(x, "mxfp4+")
    assert rows["nvfp4"] == bfp.error(x, "nvfp4", nvfp4_no_tensor_scale=True)
    assert rows["hif4"] == bfp.error(x, "hif4")


def _numbers_match(row: dict, cli_row: dict) -> None:
    common = [k for k in row if k in cli_row and k != "format"]
    assert {"bits_per_value", "rmse", "sqnr_db", "max_rel_err", "mean_rel_err",
            "bm_share", "blocks"} <= set(common)
    for k in common:
        if isinstance(cli_row[k], float) or isinstance(row[k], float):
            assert row[k] == pytest.approx(cli_row[k], rel=1e-12, nan_ok=True), (row["format"], k)
        else:
            assert row[k] == cli_row[k], (row["format"], k)


@pytest.mark.parametrize("dtype,args,kw", [
    (np.float32, [], {}),
    (BF16, ["--rounding", "stochastic", "--seed", "77", "--scale-mode", "even"],
     {"rounding": "stochastic", "seed": 77, "scale_mode": "even"}),
    (np.float16, ["--no-tensor-scale"], {"nvfp4_no_tensor_scale": True}),
])
def test_compare_matches_cli(tmp_path, dtype, args, kw):
    exe = cli()
    x = heavy((24, 192), dtype, seed=4)
    x.reshape(-1)[9] = np.inf
    np.save(tmp_path / "x.npy", x)
    out = json.loads(run(exe, "compare", "--json", "-f", ",".join(FMTS), *args,
                         tmp_path / "x.npy"))
    cli_rows = {r["format"]: r for r in out[0]["results"]}  # in format-table order
    rows = bfp.compare(x, FMTS, **kw)  # in the order asked for
    assert [r["format"] for r in rows] == FMTS and set(cli_rows) == set(FMTS)
    for row in rows:
        _numbers_match(row, cli_rows[row["format"]])


class _Axes:
    """Records what plot_compare draws (a stand-in for a matplotlib Axes)."""

    def __init__(self) -> None:
        self.points: List[Tuple[float, float]] = []
        self.labels: List[str] = []
        self.xlabel = self.ylabel = ""

    def scatter(self, xs: List[float], ys: List[float]) -> None:
        self.points += list(zip(xs, ys))

    def annotate(self, text: str, xy: Tuple[float, float], **kw: Any) -> None:
        self.labels.append(text)

    def set_xlabel(self, s: str) -> None:
        self.xlabel = s

    def set_ylabel(self, s: str) -> None:
        self.ylabel = s

    def grid(self, *a: Any, **kw: Any) -> None:
        pass


def test_plot_compare_on_given_axes():
    rows = bfp.compare(heavy((8, 128), seed=5), ["mxfp4", "nvfp4", "mxfp8_e4m3"])
    ax = bfp.plot_compare(rows, ax=_Axes())
    assert ax.labels == ["mxfp4", "nvfp4", "mxfp8_e4m3"]
    assert ax.points == [(r["bits_per_value"], r["sqnr_db"]) for r in rows]
    assert ax.xlabel == "bits per value" and ax.ylabel == "SQNR (dB)"
    ax = bfp.plot_compare(rows, ax=_Axes(), y="bm_share")
    assert ax.points[1] == (4.5, rows[1]["bm_share"])
    with pytest.raises(KeyError, match="no 'nope'"):
        bfp.plot_compare(rows, ax=_Axes(), y="nope")


def test_plot_compare_without_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    rows = bfp.compare(heavy((2, 64)), ["mxfp4"])
    with pytest.raises(ImportError, match="plot_compare needs matplotlib.*pip install matplotlib"):
        bfp.plot_compare(rows)


def test_plot_compare_with_matplotlib():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    rows = bfp.compare(heavy((2, 64)), ["mxfp4", "nvfp4"])
    ax = bfp.plot_compare(rows)
    assert [t.get_text() for t in ax.texts] == ["mxfp4", "nvfp4"]


# ---------------------------------------------------------------- documentation

@pytest.mark.parametrize("fn", [bfp.quantize, bfp.fake_quant, bfp.error, bfp.compare,
                                bfp.plot_compare, bfp.save, bfp.load, bfp.load_qtensor,
                                bfp.verify])
def test_public_functions_document_every_parameter(fn):
    doc = inspect.getdoc(fn) or ""
    for name in inspect.signature(fn).parameters:
        assert name in doc, f"{fn.__name__}'s docstring does not mention {name!r}"
    assert "Returns" in doc and "Raises" in doc, fn.__name__


# ---------------------------------------------------------------- static types

def _mypy(*args: str, cwd: Path) -> None:
    if not _has_mypy():
        pytest.fail(f"mypy is not installed for {sys.executable}: "
                    "pip install -r requirements-test.txt")
    env = dict(os.environ, MYPYPATH=str(ROOT / "python"))
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                        "--cache-dir", os.devnull, *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"mypy {' '.join(args)}:\n{r.stdout}{r.stderr}"


def _has_mypy() -> bool:
    import importlib.util
    return importlib.util.find_spec("mypy") is not None


def test_mypy_package_is_clean():
    """mypy -p bfp with the package's own settings (python/pyproject.toml: strict)."""
    _mypy("-p", "bfp", cwd=ROOT / "python")


def test_mypy_strict_user_script():
    """A user's script that uses the public API passes mypy --strict."""
    _mypy("--strict", "--config-file", os.devnull, str(Path(__file__).with_name("typed_user.py")),
          cwd=ROOT)


def test_typed_user_script_runs():
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("typed_user.py"))],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == bfp.formats()[0]["name"]
