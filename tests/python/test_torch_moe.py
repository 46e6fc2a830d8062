"""torch.ops.bfp.grouped_matmul (python/bfp/torch_moe.py): the CPU path
against a float64 product of each expert's bfp-decoded weight (within the one
bf16 rounding and float32 sums), random / skewed / empty-expert routing, one
row, no rows, bias, every matmul format; argument errors; the fake
implementation (torch.library.opcheck); on a GPU with bfp's CUDA kernels, the
CUDA path against the CPU path (||dy|| / ||y|| < 5e-3)."""
import numpy as np
import pytest
import torch

import bfp
import bfp.torch_ops  # noqa: F401  (registers the ops)

FORMATS = ["mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4"]


def experts(fmt, e_count, n, k, seed):
    """planes of e_count experts quantized one by one (own tensor scales)"""
    rng = np.random.default_rng(seed)
    qs = [bfp.quantize((rng.standard_normal((n, k)) * (10.0 ** (e % 3 - 1))).astype(np.float32),
                       fmt) for e in range(e_count)]
    codes = torch.from_numpy(np.stack([q.codes for q in qs]))
    scales = torch.from_numpy(np.stack([q.scales for q in qs]))
    meta = (torch.from_numpy(np.stack([q.meta for q in qs])) if qs[0].meta is not None
            else torch.zeros((e_count, 0), dtype=torch.uint8))
    ts = torch.tensor([q.tensor_scale if q.tensor_scale is not None else 1.0 for q in qs],
                      dtype=torch.float32)
    w = torch.from_numpy(np.stack([q.dequantize() for q in qs])).double()
    return codes, scales, meta, ts, w


def routing(kind, e_count, t, rng):
    if kind == "random":
        ex = rng.integers(0, e_count, t)
    elif kind == "skewed":
        ex = np.where(rng.random(t) < 0.85, 1 % e_count, rng.integers(0, e_count, t))
    else:  # "odd": even experts empty
        ex = rng.integers(0, max(e_count // 2, 1), t) * 2 + (1 if e_count > 1 else 0)
    cnt = np.bincount(ex, minlength=e_count)
    return torch.tensor(np.concatenate([[0], np.cumsum(cnt)]), dtype=torch.int32)


def reference(x, w, off, bias):
    y = torch.empty(x.shape[0], w.shape[1], dtype=torch.float64)
    for e in range(w.shape[0]):
        a, b = int(off[e]), int(off[e + 1])
        y[a:b] = x[a:b].double() @ w[e].t() + (bias[e].double() if bias is not None else 0)
    return y


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["random", "skewed", "odd"])
def test_cpu_against_reference(fmt, kind):
    e_count, n, k, t = 6, 40, 96, 37
    rng = np.random.default_rng(len(fmt) * 7 + len(kind))
    codes, scales, meta, ts, w = experts(fmt, e_count, n, k, seed=3)
    off = routing(kind, e_count, t, rng)
    x = torch.randn(t, k).to(torch.bfloat16)
    bias = torch.randn(e_count, n).to(torch.bfloat16) if kind != "odd" else None
    y = torch.ops.bfp.grouped_matmul(x, codes, scales, meta, ts, off, bias, fmt, n, k)
    assert y.dtype == torch.bfloat16 and tuple(y.shape) == (t, n)
    ref = reference(x, w, off, bias)
    # one bf16 rounding (2^-9 relative) plus float32 sums
    tol = 2.0 ** -8 * ref.abs() + 1e-5 * (x.double().abs() @ w.abs().amax((0, 1))).unsqueeze(1)
    assert ((y.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize("fmt,xf", [("mxfp4", "mxfp8_e4m3"), ("mxfp4+", "mxfp4+"),
                                    ("nvfp4", "nvfp4"), ("hif4", "mxfp6_e2m3")])
def test_quantized_x_is_matmul_ref_q_per_expert(fmt, xf):
    """x quantized as one [T, k] tensor, each expert's rows against its W:
    bfp_matmul_ref_q of those rows' planes, within one bf16 rounding and
    float32 sums"""
    import bfp._core as core
    e_count, n, k, t = 5, 24, 100, 29  # k = 100: a partial last block
    rng = np.random.default_rng(12)
    codes, scales, meta, ts, _ = experts(fmt, e_count, n, k, seed=8)
    off = routing("odd", e_count, t, rng)  # empty experts too
    x = torch.randn(t, k).to(torch.bfloat16)
    bias = torch.randn(e_count, n).to(torch.bfloat16)
    y = torch.ops.bfp.grouped_matmul(x, codes, scales, meta, ts, off, bias, fmt, n, k, xf)
    xc, xs, xm, xt = torch.ops.bfp.quantize(x, xf)
    xd = torch.ops.bfp.dequantize(xc, xs, xm, xt, xf, [t, k], -1, torch.float32).double()
    wi, xi = bfp.format_info(fmt), bfp.format_info(xf)
    c3, s3, m3 = (p.reshape(e_count, n, -1) for p in (codes, scales, meta))
    for e in range(e_count):
        a, b = int(off[e]), int(off[e + 1])
        if a == b:
            continue
        ref = np.empty((b - a) * n, dtype=np.float32)
        core.matmul_ref_q(wi["id"], c3[e].numpy(), s3[e].numpy(),
                          m3[e].numpy() if wi["meta_bytes"] else None,
                          ts[e:e + 1].numpy() if wi["has_tensor_scale"] else None, n, k,
                          xi["id"], xc[a:b].numpy(), xs[a:b].numpy(),
                          xm[a:b].numpy() if xi["meta_bytes"] else None,
                          xt.numpy() if xi["has_tensor_scale"] else None, b - a,
                          bias[e].view(torch.int16).numpy(), ref)
        r = torch.from_numpy(ref).double().view(b - a, n)
        wd = torch.ops.bfp.dequantize(c3[e], s3[e], m3[e], ts[e:e + 1], fmt, [n, k], -1,
                                      torch.float32).double()
        mag = xd[a:b].abs() @ wd.abs().t() + bias[e].double().abs()
        tol = 2.0 ** -8 * r.abs() + (k + 2) * 2.0 ** -24 * mag * 2
        assert bool(((y[a:b].double() - r).abs() <= tol).all()), e


def test_one_row_and_no_rows():
    codes, scales, meta, ts, w = experts("mxfp4", 3, 16, 64, seed=4)
    x = torch.randn(1, 64).to(torch.bfloat16)
    off = torch.tensor([0, 0, 0, 1], dtype=torch.int32)
    y = torch.ops.bfp.grouped_matmul(x, codes, scales, meta, ts, off, None, "mxfp4", 16, 64)
    ref = x.double() @ w[2].t()
    assert torch.allclose(y.double(), ref, rtol=2 ** -8, atol=1e-4)
    y0 = torch.ops.bfp.grouped_matmul(x[:0], codes, scales, meta, ts,
                                      torch.zeros(4, dtype=torch.int32), None, "mxfp4", 16, 64)
    assert tuple(y0.shape) == (0, 16)


def test_errors():
    codes, scales, meta, ts, _ = experts("mxfp4", 3, 16, 64, seed=5)
    x = torch.randn(4, 64).to(torch.bfloat16)
    op = torch.ops.bfp.grouped_matmul
    with pytest.raises(ValueError, match="offsets"):
        op(x, codes, scales, meta, ts, torch.tensor([0, 3, 1, 4], dtype=torch.int32), None,
           "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="offsets"):
        op(x, codes, scales, meta, ts, torch.tensor([0, 1, 2, 3], dtype=torch.int32), None,
           "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="int32"):
        op(x, codes, scales, meta, ts, torch.tensor([0, 1, 2, 4]), None, "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="bfloat16"):
        op(x.float(), codes, scales, meta, ts, torch.tensor([0, 1, 2, 4], dtype=torch.int32),
           None, "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="codes"):
        op(x, codes[:2], scales, meta, ts, torch.tensor([0, 1, 2, 4], dtype=torch.int32), None,
           "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="bias"):
        op(x, codes, scales, meta, ts, torch.tensor([0, 1, 2, 4], dtype=torch.int32),
           torch.zeros(3, 15, dtype=torch.bfloat16), "mxfp4", 16, 64)
    with pytest.raises(ValueError, match="x_format 'fp8'"):
        op(x, codes, scales, meta, ts, torch.tensor([0, 1, 2, 4], dtype=torch.int32), None,
           "mxfp4", 16, 64, "fp8")


def test_fake_impl_opcheck():
    codes, scales, meta, ts, _ = experts("nvfp4", 3, 16, 64, seed=6)
    x = torch.randn(5, 64).to(torch.bfloat16)
    off = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    bias = torch.randn(3, 16).to(torch.bfloat16)
    for xf in ("bf16", "nvfp4"):
        torch.library.opcheck(torch.ops.bfp.grouped_matmul.default,
                              (x, codes, scales, meta, ts, off, bias, "nvfp4", 16, 64, xf),
                              test_utils=("test_schema", "test_faketensor"))


@pytest.mark.skipif(not (torch.cuda.is_available() and bfp.cuda_available()),
                    reason="skipped: no GPU (or libbfp without CUDA)")
@pytest.mark.parametrize("fmt", FORMATS)
def test_cuda_against_cpu(fmt):
    e_count, n, k, t = 8, 80, 200, 53
    rng = np.random.default_rng(11)
    codes, scales, meta, ts, _ = experts(fmt, e_count, n, k, seed=7)
    off = routing("skewed", e_count, t, rng)
    x = torch.randn(t, k).to(torch.bfloat16)
    bias = torch.randn(e_count, n).to(torch.bfloat16)
    y = torch.ops.bfp.grouped_matmul(x, codes, scales, meta, ts, off, bias, fmt, n, k)
    d = [p.cuda() for p in (x, codes, scales, meta, ts, off, bias)]
    yc = torch.ops.bfp.grouped_matmul(*d, fmt, n, k).cpu()
    for e in range(e_count):
        a, b = int(off[e]), int(off[e + 1])
        if a < b:
            num = (yc[a:b].double() - y[a:b].double()).norm()
            assert num <= 5e-3 * y[a:b].double().norm()


def test_decodes_to_bf16_holds_for_every_format():
    """the rule the CUDA quantized-x path rests on: every format it names has
    decoded values that bfloat16 holds exactly (here over 2^-90..2^90 block
    scales, outliers, zeros), and the formats it leaves out really do not"""
    from bfp.torch_moe import decodes_to_bf16
    g = torch.Generator().manual_seed(5)
    x = torch.randn(96, 256, generator=g) * torch.exp2(torch.randint(-90, 90, (96, 1),
                                                                      generator=g).float())
    x[1, 3] *= 1e4
    x[2, :64] = 0.0
    for info in bfp.formats():
        d = torch.ops.bfp.fake_quant(x, info["name"])
        exact = torch.equal(d.to(torch.bfloat16).float(), d)
        assert exact == decodes_to_bf16(info["name"]), info["name"]


@pytest.mark.skipif(not (torch.cuda.is_available() and bfp.cuda_available()),
                    reason="skipped: no GPU (or libbfp without CUDA)")
@pytest.mark.parametrize("fmt,xf", [("mxfp4", "mxfp8_e4m3"), ("mxfp4+", "mxfp4+"),
                                    ("hif4", "mxfp6_e2m3"), ("nvfp4", "mxfp4"),
                                    ("mxfp4", "nvfp4")])
def test_cuda_quantized_x_against_cpu(fmt, xf):
    """quantized x on the GPU (bf16-exact x formats: the grouped kernel; NVFP4
    x: the host path) against the CPU path, and captured in a CUDA graph"""
    from bfp.torch_moe import decodes_to_bf16
    e_count, n, k, t = 6, 72, 160, 41
    rng = np.random.default_rng(13)
    codes, scales, meta, ts, _ = experts(fmt, e_count, n, k, seed=9)
    off = routing("skewed", e_count, t, rng)
    x = torch.randn(t, k).to(torch.bfloat16)
    bias = torch.randn(e_count, n).to(torch.bfloat16)
    y = torch.ops.bfp.grouped_matmul(x, codes, scales, meta, ts, off, bias, fmt, n, k, xf)
    d = [p.cuda() for p in (x, codes, scales, meta, ts, off, bias)]
    yc = torch.ops.bfp.grouped_matmul(*d, fmt, n, k, xf).cpu()
    assert (yc.double() - y.double()).norm() <= 5e-3 * y.double().norm()
    if decodes_to_bf16(xf):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            yg = torch.ops.bfp.grouped_matmul(*d, fmt, n, k, xf)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(yg.cpu(), yc)
