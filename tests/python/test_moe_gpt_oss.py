"""gpt-oss's MXFP4 expert layout against bfp (python/bfp/moe.py): on
synthetic blocks and scales in that layout, transformers' own dequantization
(integrations/mxfp4.py, convert_moe_packed_tensors) equals bfp's dequantize
of the converted planes bit for bit, in float32 and bfloat16, transposed
([E, k, n] there, [E, n, k] here); scale 255 is where they differ (NaN here)."""
import numpy as np
import pytest
import torch  # requirements-interop.txt: a missing one fails, never skips
import transformers.integrations.mxfp4 as mxfp4

import bfp
from bfp.moe import from_gpt_oss, to_gpt_oss


def synthetic(e, n, k, seed, smin=0, smax=254):
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(e, n, k // 32, 16), dtype=np.uint8)
    scales = rng.integers(smin, smax + 1, size=(e, n, k // 32), dtype=np.uint8)
    return blocks, scales


@pytest.mark.parametrize("shape", [(4, 24, 64), (3, 10, 96), (2, 64, 2880)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transformers_dequant_equals_bfp(shape, dtype):
    e, n, k = shape
    blocks, scales = synthetic(e, n, k, seed=e * n + k)
    tdt = getattr(torch, dtype)
    theirs = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                              dtype=tdt)
    assert tuple(theirs.shape) == (e, k, n)
    q = from_gpt_oss(blocks, scales)
    assert q.shape == (e, n, k)
    ours = torch.from_numpy(q.dequantize(np.float32 if dtype == "float32" else "bfloat16")
                            .view(np.float32 if dtype == "float32" else np.uint16))
    ours = ours.view(tdt) if dtype == "bfloat16" else ours
    theirs_t = theirs.transpose(1, 2).contiguous()
    # bit for bit (the views as integers compare NaN, -0 and inf exactly too)
    ib = torch.int32 if dtype == "float32" else torch.int16
    assert torch.equal(theirs_t.view(ib), ours.view(ib))


def test_extreme_scales_and_every_code():
    # every code byte in every position, scales 0 (2^-127, subnormal) to 254
    e, n, k = 2, 16, 64
    blocks = np.arange(e * n * 2 * 16, dtype=np.uint32).astype(np.uint8).reshape(e, n, 2, 16)
    scales = np.linspace(0, 254, e * n * 2).astype(np.uint8).reshape(e, n, 2)
    scales.flat[:4] = [0, 1, 253, 254]
    theirs = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                              dtype=torch.float32)
    ours = from_gpt_oss(blocks, scales).dequantize()
    assert np.array_equal(theirs.transpose(1, 2).numpy().view(np.int32), ours.view(np.int32))


def test_scale_255_is_nan_here():
    blocks, scales = synthetic(1, 2, 32, seed=1)
    scales[0, 0, 0] = 255
    ours = from_gpt_oss(blocks, scales).dequantize()
    assert np.isnan(ours[0, 0]).all() and np.isfinite(ours[0, 1]).all()


def test_round_trip_and_checks():
    blocks, scales = synthetic(3, 8, 64, seed=2)
    q = from_gpt_oss(blocks, scales)
    b2, s2 = to_gpt_oss(q)
    assert np.array_equal(b2, blocks) and np.array_equal(s2, scales)
    # bfp's own quantizer writes the layout gpt-oss reads
    w = np.random.default_rng(3).standard_normal((3, 8, 64)).astype(np.float32)
    qw = bfp.quantize(w, "mxfp4")
    bw, sw = to_gpt_oss(qw)
    theirs = mxfp4.convert_moe_packed_tensors(torch.from_numpy(bw), torch.from_numpy(sw),
                                              dtype=torch.float32)
    assert np.array_equal(theirs.transpose(1, 2).numpy(), qw.dequantize())
    with pytest.raises(ValueError):
        from_gpt_oss(blocks[..., :8], scales)
    with pytest.raises(ValueError):
        from_gpt_oss(blocks, scales[..., :1])
    with pytest.raises(TypeError):
        from_gpt_oss(blocks.astype(np.int16), scales)
    with pytest.raises(ValueError):
        to_gpt_oss(bfp.quantize(w, "nvfp4"))
