"""Regenerate the fixtures of tests/test_io_fixtures.c (run from this folder).

Needs numpy, ml_dtypes and safetensors; the files are committed so the tests
do not. They check that files written by the real tools load exactly."""
import json

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

a = (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3)
np.save("np_f32.npy", a)
np.save("np_bf16.npy", a.astype(ml_dtypes.bfloat16))  # descr '<V2'
np.save("np_scalar.npy", np.float32(-2.5))
with open("np_f16_v2.npy", "wb") as f:
    np.lib.format.write_array(f, a.astype(np.float16), version=(2, 0))
save_file({"w32": a, "w16": a[0].astype(np.float16),
           "wbf": a[:, :2].astype(ml_dtypes.bfloat16),
           "ids": np.arange(4, dtype=np.uint8)},
          "st_ref.safetensors", metadata={"format": "pt"})

# An mxfp4 container as docs/container.md says to write one from Python:
# 1 x 40 values, two blocks (the second partial). Block 0 holds k/4 for
# k = 0..31 (scale 2^-2), block 1 holds 6, -6, 0.5, ... (scale 2^0).
e2m1 = {0: 0, 0.5: 1, 1: 2, 1.5: 3, 2: 4, 3: 5, 4: 6, 6: 7}
vals = [e2m1[v] for v in [0, 0.5, 1, 1.5, 2, 3, 4, 6] * 4]
vals += [7, 15, 1, 9, 0, 8, 3, 11]  # 6, -6, 0.5, -0.5, 0, -0, 1.5, -1.5
codes = np.array([vals[i] | (vals[i + 1] << 4) for i in range(0, 40, 2)], np.uint8)
scales = np.array([127 - 2, 127], np.uint8)
save_file({"x.codes": codes, "x.scales": scales}, "py_mxfp4.safetensors",
          metadata={"bfp.format": "mxfp4", "bfp.shape": json.dumps([1, 40]),
                    "bfp.name": "x", "bfp.version": "python",
                    "bfp.options": "{}", "bfp.layout": "planar-v1"})
