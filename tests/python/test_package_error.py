"""bfp.error: values not compared are counted by reason, nothing compared is
NaN (not exact), and clipped values are counted as saturated."""
import math

import numpy as np

import bfp


def test_all_nonfinite_is_not_exact():
    x = np.full((2, 64), np.nan, np.float32)
    x[1] = np.inf
    e = bfp.error(x, "mxfp4")
    assert e["count"] == 0 and e["skipped_input"] == 128 and e["skipped_output"] == 0
    assert math.isnan(e["sqnr_db"]) and math.isnan(e["rmse"]) and math.isnan(e["max_abs_err"])


def test_nan_blocks_are_counted():
    x = np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64)
    x[0, 5] = np.nan
    x[1, 40] = -np.inf
    e = bfp.error(x, "nvfp4")  # blocks of 16: two NaN blocks, 15 finite values each
    assert (e["count"], e["skipped_input"], e["skipped_output"]) == (96, 2, 30)
    assert e["count"] + e["skipped_input"] + e["skipped_output"] == x.size
    assert math.isfinite(e["sqnr_db"])


def test_saturated():
    x = np.ones((1, 64), np.float32)
    x[0, 0] = 3e38
    e = bfp.error(x, "hif4")
    assert bfp.fake_quant(x, "hif4")[0, 0] == 344064.0
    assert e["saturated"] == 1
    x = np.ones((1, 32), np.float32)
    x[0, 0] = 7.0  # shared exponent 0: mxfp4 holds 6, mxfp4+'s block max 7.5
    assert bfp.error(x, "mxfp4")["saturated"] == 1
    assert bfp.error(x, "mxfp4+")["saturated"] == 0
    assert bfp.error(x, "mxfp4", scale_mode="ceil")["saturated"] == 0
