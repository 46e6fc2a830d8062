"""Shared fixtures for the Python cross-checks of libbfp.

The tests need numpy and ml_dtypes (pinned in requirements-test.txt). A
missing module is an error, not a skip: the ctest entry must fail loudly.
"""
import os
import subprocess

import pytest

INSTALL_HINT = "make test (it installs requirements-test.txt into .venv/)"

try:
    import numpy  # noqa: F401
    import ml_dtypes  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise pytest.UsageError(
        f"tests/python needs numpy and ml_dtypes ({exc}); run: {INSTALL_HINT}"
    ) from exc


@pytest.fixture(scope="session")
def codec_dump_dir(tmp_path_factory):
    """Run the codec_dump tool once and return the directory of its files."""
    exe = os.environ.get("BFP_CODEC_DUMP")
    if not exe:
        pytest.skip(
            "BFP_CODEC_DUMP is not set: it must name the codec_dump executable "
            "(ctest sets it; by hand: BFP_CODEC_DUMP=build/codec_dump "
            "python -m pytest tests/python)"
        )
    if not os.path.isfile(exe):
        pytest.fail(f"BFP_CODEC_DUMP={exe!r} does not exist (build the codec_dump target)")
    out = tmp_path_factory.mktemp("codec_dump")
    proc = subprocess.run([exe, str(out)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(
            f"{exe} {out} exited with {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return out
