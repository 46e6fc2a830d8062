"""torch.ops.bfp.* (bfp.torch_ops, issue #22): equal to the C library's
results, opcheck-clean, traceable by torch.compile, straight-through grad.

torch is required (requirements-interop.txt via requirements-test.txt): a
missing torch fails the import, never skips.
"""
import numpy as np
import pytest
import torch

import bfp
import bfp._core as core
import bfp.torch_ops  # noqa: F401 - registers torch.ops.bfp

FORMATS = ["mxfp4", "mxfp4+", "mxfp4++", "nvfp4", "nvfp4+", "hif4", "mxfp8_e4m3", "mxint8",
           "mxfp6_e2m3"]
MATMUL_FORMATS = ["mxfp4", "mxfp4+", "nvfp4", "nvfp4+", "hif4", "mxfp6_e3m2"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _x(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g))
    return x.to(dtype)


def _bits(t):
    t = t.contiguous()
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()]).numpy()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((6, 96), -1), ((3, 4, 64), 1), ((64, 5), 0)])
def test_quantize_dequantize_equal_library(fmt, dtype, shape, axis):
    x = _x(shape, dtype)
    codes, scales, meta, ts = torch.ops.bfp.quantize(x, fmt, axis)
    q = bfp.quantize(x, fmt, axis)
    assert codes.dtype == scales.dtype == meta.dtype == torch.uint8
    assert codes.shape[0] == q.rows and codes.numel() == q.codes.size
    np.testing.assert_array_equal(codes.flatten().numpy(), q.codes)
    np.testing.assert_array_equal(scales.flatten().numpy(), q.scales)
    if q.meta is None:
        assert meta.numel() == 0
    else:
        np.testing.assert_array_equal(meta.flatten().numpy(), q.meta)
    want_ts = np.float32(1.0 if q.tensor_scale is None else q.tensor_scale)
    assert ts.dtype == torch.float32 and ts.numpy().tobytes() == want_ts.tobytes()
    for out in DTYPES:
        y = torch.ops.bfp.dequantize(codes, scales, meta, ts, fmt, list(shape), axis, out)
        ref = q.dequantize({torch.float32: np.float32, torch.float16: np.float16,
                            torch.bfloat16: "bfloat16"}[out])
        assert y.dtype == out and tuple(y.shape) == shape
        np.testing.assert_array_equal(_bits(y), ref.view(_bits(y).dtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fake_quant_op_equals_library(fmt, dtype):
    x = _x((5, 128), dtype, seed=3)
    y = torch.ops.bfp.fake_quant(x, fmt, -1, "default", 0, "", False, False)
    ref = bfp.fake_quant(x.numpy() if dtype != torch.bfloat16 else x.float().numpy(), fmt)
    if dtype == torch.bfloat16:  # the library quantizes the bf16 input itself
        ref = bfp.fake_quant(x, fmt)
        assert isinstance(ref, torch.Tensor)
        ref = ref.view(torch.int16).numpy()
        np.testing.assert_array_equal(_bits(y), ref)
    else:
        np.testing.assert_array_equal(_bits(y), ref.view(_bits(y).dtype))
    # options reach the library: stochastic rounding with a seed
    s1 = torch.ops.bfp.fake_quant(x, fmt, -1, "stochastic", 7, "", False, False)
    s2 = bfp.fake_quant(x, fmt, rounding="stochastic", seed=7)
    np.testing.assert_array_equal(_bits(s1), _bits(s2))


def test_bad_options_raise_in_eager_and_fake():
    x = _x((4, 64), torch.float32)
    with pytest.raises(bfp.BfpError, match="scale_mode"):
        torch.ops.bfp.quantize(x, "nvfp4", -1, "default", 0, "ceil")
    with pytest.raises(bfp.BfpError, match="unknown format"):
        torch.ops.bfp.fake_quant(x, "fp5", -1, "default", 0, "", False, False)
    with pytest.raises(TypeError, match="float64"):
        torch.ops.bfp.quantize(x.double(), "mxfp4")
    with torch._subclasses.fake_tensor.FakeTensorMode():
        xf = torch.empty(4, 64)
        with pytest.raises(bfp.BfpError, match="scale_mode"):
            torch.ops.bfp.quantize(xf, "nvfp4", -1, "default", 0, "ceil")


def _planes(fmt, n, k, seed=1):
    w = _x((n, k), torch.float32, seed)
    return w, torch.ops.bfp.quantize(w, fmt)


def _matmul_bound(x, w, bias, y64):
    """|y - y64| bound of the CPU path: float32 dot products of length k plus
    the bias add ((k+1) roundings of 2^-24 on sum|x||w|+|b|), then one
    round-to-nearest to bfloat16 (8-bit significand: 2^-8 relative)."""
    k = x.shape[-1]
    mag = x.double().abs() @ w.double().abs().t()
    if bias is not None:
        mag = mag + bias.double().abs()
    e32 = (k + 1) * 2.0 ** -24 * mag
    return 2.0 ** -8 * (y64.abs() + e32) + e32


@pytest.mark.parametrize("fmt", MATMUL_FORMATS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_within_bound_of_float64_and_matmul_ref(fmt, with_bias):
    n, k = 48, 192
    _, (codes, scales, meta, ts) = _planes(fmt, n, k)
    x = _x((2, 3, k), torch.bfloat16, seed=5)
    bias = _x((n,), torch.bfloat16, seed=6) if with_bias else None
    y = torch.ops.bfp.matmul(x, codes, scales, meta, ts, bias, fmt, n, k, "bf16")
    assert y.dtype == torch.bfloat16 and tuple(y.shape) == (2, 3, n)
    wq = torch.ops.bfp.dequantize(codes, scales, meta, ts, fmt, [n, k], -1, torch.float32)
    y64 = x.double() @ wq.double().t()
    if bias is not None:
        y64 = y64 + bias.double()
    bound = _matmul_bound(x.reshape(-1, k), wq, bias, y64.reshape(-1, n))
    err = (y.double().reshape(-1, n) - y64.reshape(-1, n)).abs()
    assert bool((err <= bound).all()), float((err - bound).max())
    # the C reference (float64 sums rounded once to float32) against the same float64 product
    yref = np.empty(6 * n, dtype=np.float32)
    info = bfp.format_info(fmt)
    core.matmul_ref(info["id"], codes.numpy(), scales.numpy(),
                    meta.numpy() if info["meta_bytes"] else None,
                    ts.numpy() if info["has_tensor_scale"] else None, n, k,
                    x.reshape(-1, k).view(torch.int16).numpy(), 6,
                    None if bias is None else bias.view(torch.int16).numpy(), yref)
    ref = torch.from_numpy(yref).double().view(6, n)
    assert bool(((ref - y64.reshape(-1, n)).abs() <= 2.0 ** -24 * y64.reshape(-1, n).abs()
                 + 1e-300).all())
    assert bool(((y.double().reshape(-1, n) - ref).abs() <= bound + 2.0 ** -24 * ref.abs())
                .all())


# (W, x) pairs: those with a GPU kernel (bfp_cuda_matmul_xq_supported) and two
# without one (the decode path)
XQ_PAIRS = [("mxfp4", "mxfp8_e4m3"), ("mxfp4", "mxfp4"), ("mxfp4+", "mxfp4+"),
            ("mxfp4+", "mxfp8_e4m3"), ("nvfp4", "nvfp4"), ("nvfp4+", "nvfp4"),
            ("hif4", "mxfp8_e4m3"), ("mxfp6_e2m3", "nvfp4+")]


@pytest.mark.parametrize("fmt,xf", XQ_PAIRS)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("n,k", [(40, 160), (33, 100)])  # k = 100: a partial last block
def test_matmul_quantized_x_within_bound_of_matmul_ref_q(fmt, xf, with_bias, n, k):
    m = 7
    _, (codes, scales, meta, ts) = _planes(fmt, n, k)
    x = _x((m, k), torch.bfloat16, seed=8)
    x[2, 32:64] = 0.0                  # an all-zero block
    x[3, :32] *= 2.0 ** 60             # a block far above the others
    x[4, 64:96] *= 2.0 ** -60          # and one far below
    bias = _x((n,), torch.bfloat16, seed=9) if with_bias else None
    y = torch.ops.bfp.matmul(x, codes, scales, meta, ts, bias, fmt, n, k, xf)
    assert y.dtype == torch.bfloat16 and tuple(y.shape) == (m, n)
    # x's planes are bfp.quantize's (default options), bit for bit
    xc, xs, xm, xt = torch.ops.bfp.quantize(x, xf)
    q = bfp.quantize(x.float().numpy(), xf)
    assert np.array_equal(xc.numpy().ravel(), q.codes.ravel())
    assert np.array_equal(xs.numpy().ravel(), q.scales.ravel())
    # the C reference of both planes (float64 sums, one rounding to float32)
    winfo, xinfo = bfp.format_info(fmt), bfp.format_info(xf)
    yref = np.empty(m * n, dtype=np.float32)
    core.matmul_ref_q(winfo["id"], codes.numpy(), scales.numpy(),
                      meta.numpy() if winfo["meta_bytes"] else None,
                      ts.numpy() if winfo["has_tensor_scale"] else None, n, k,
                      xinfo["id"], xc.numpy(), xs.numpy(),
                      xm.numpy() if xinfo["meta_bytes"] else None,
                      xt.numpy() if xinfo["has_tensor_scale"] else None, m,
                      None if bias is None else bias.view(torch.int16).numpy(), yref)
    ref = torch.from_numpy(yref).double().view(m, n)
    xd = torch.ops.bfp.dequantize(xc, xs, xm, xt, xf, [m, k], -1, torch.float32)
    wd = torch.ops.bfp.dequantize(codes, scales, meta, ts, fmt, [n, k], -1, torch.float32)
    bound = _matmul_bound(xd, wd, bias, ref) + 2.0 ** -24 * ref.abs()
    err = (y.double() - ref).abs()
    assert bool((err <= bound).all()), float((err - bound).max())
    # the quantized x matters: the bf16-x product differs
    yb = torch.ops.bfp.matmul(x, codes, scales, meta, ts, bias, fmt, n, k, "bf16")
    assert not torch.equal(y, yb)


@pytest.mark.parametrize("fmt,xf", XQ_PAIRS[:5])
def test_matmul_quantized_x_nan_block_gives_nan_row(fmt, xf):
    n, k = 24, 96
    _, (codes, scales, meta, ts) = _planes(fmt, n, k)
    x = _x((4, k), torch.bfloat16, seed=3)
    x[1, 40] = float("nan")
    y = torch.ops.bfp.matmul(x, codes, scales, meta, ts, None, fmt, n, k, xf)
    assert bool(y[1].isnan().all()) and not bool(y[[0, 2, 3]].isnan().any())


def test_x_format_names_and_kernel_pairs():
    assert bfp.torch_ops.x_format_name(None) == "bf16"
    assert bfp.torch_ops.x_format_name("MXFP4+") == "mxfp4+"
    with pytest.raises(ValueError, match="x_format 'fp8' is neither bf16 nor"):
        bfp.torch_ops.x_format_name("fp8")
    # the kernel pairs are the C library's (no kernel in a build without CUDA)
    cuda_build = core.cuda_matmul_xq_supported(bfp.format_info("mxfp4")["id"],
                                               bfp.format_info("mxfp8_e4m3")["id"])
    for fmt, xf in XQ_PAIRS:
        want = cuda_build and (fmt, xf) not in (("hif4", "mxfp8_e4m3"),
                                                ("mxfp6_e2m3", "nvfp4+"))
        assert bfp.torch_ops.xq_kernel(fmt, xf) == want, (fmt, xf)
    assert not bfp.torch_ops.xq_kernel("mxfp4", "bf16")


def test_matmul_refuses_what_the_c_api_lacks():
    n, k = 16, 64
    _, (codes, scales, meta, ts) = _planes("mxfp4", n, k)
    x = _x((2, k), torch.bfloat16)
    with pytest.raises(ValueError, match="x_format 'mxfp8'.*bf16"):
        torch.ops.bfp.matmul(x, codes, scales, meta, ts, None, "mxfp4", n, k, "mxfp8")
    with pytest.raises(TypeError, match="bfloat16"):
        torch.ops.bfp.matmul(x.float(), codes, scales, meta, ts, None, "mxfp4", n, k, "bf16")
    with pytest.raises(ValueError, match="k=64"):
        torch.ops.bfp.matmul(x[:, :32], codes, scales, meta, ts, None, "mxfp4", n, k, "bf16")
    with pytest.raises(ValueError, match="codes plane"):
        torch.ops.bfp.matmul(x, codes[:8], scales, meta, ts, None, "mxfp4", n, k, "bf16")


def test_opcheck_every_op():
    x = _x((8, 64), torch.float32)
    for fmt in ("mxfp4+", "nvfp4", "hif4"):
        torch.library.opcheck(torch.ops.bfp.quantize.default, (x, fmt))
        codes, scales, meta, ts = torch.ops.bfp.quantize(x, fmt)
        torch.library.opcheck(torch.ops.bfp.dequantize.default,
                              (codes, scales, meta, ts, fmt, [8, 64], -1, torch.bfloat16))
        xg = x.clone().requires_grad_()
        torch.library.opcheck(torch.ops.bfp.fake_quant.default,
                              (xg, fmt, -1, "default", 0, "", False, False))
        xb = _x((3, 5, 64), torch.bfloat16).requires_grad_()
        _, (wc, ws, wm, wt) = _planes(fmt, 24, 64)
        bias = _x((24,), torch.bfloat16).requires_grad_()
        for b in (None, bias):
            torch.library.opcheck(torch.ops.bfp.matmul.default,
                                  (xb, wc, ws, wm, wt, b, fmt, 24, 64, "bf16"))
            torch.library.opcheck(torch.ops.bfp.matmul.default,
                                  (xb, wc, ws, wm, wt, b, fmt, 24, 64,
                                   "nvfp4" if fmt.startswith("nv") else "mxfp8_e4m3"))
    torch.library.opcheck(torch.ops.bfp.quantize.default, (x.bfloat16(), "mxfp4", 0))


def test_ops_compile_fullgraph_equal_eager():
    n, k = 32, 128
    _, (codes, scales, meta, ts) = _planes("nvfp4+", n, k)

    def f(x):
        c, s, m, t = torch.ops.bfp.quantize(x, "mxfp4+")
        xq = torch.ops.bfp.dequantize(c, s, m, t, "mxfp4+", [4, k], -1, torch.bfloat16)
        y = torch.ops.bfp.matmul(xq, codes, scales, meta, ts, None, "nvfp4+", n, k, "bf16")
        return bfp.fake_quant(y.float(), "mxfp8_e4m3")

    x = _x((4, k), torch.float32, seed=9)
    eager = f(x)
    compiled = torch.compile(f, fullgraph=True)(x)
    np.testing.assert_array_equal(_bits(compiled), _bits(eager))


def test_fake_quant_straight_through_gradient_and_a_training_step():
    g = torch.Generator().manual_seed(0)
    w_true = torch.randn(16, 64, generator=g)
    w = torch.nn.Parameter(w_true + 0.5 * torch.randn(16, 64, generator=g))
    x = torch.randn(32, 64, generator=g)
    target = x @ w_true.t()

    def loss_of(wq):
        return ((x @ wq.t() - target) ** 2).mean()

    loss = loss_of(bfp.fake_quant(w, "mxfp4"))
    loss.backward()
    # identity's gradient: the same loss with the quantized weight as the leaf
    wq = bfp.fake_quant(w.detach(), "mxfp4").clone().requires_grad_()
    loss_of(wq).backward()
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), wq.grad.numpy())
    assert float(w.grad.abs().sum()) > 0
    # a few fine-tuning steps through the format lower the quantized model's loss
    opt = torch.optim.SGD([w], lr=0.05)
    for _ in range(20):
        opt.step()
        opt.zero_grad()
        loss_of(bfp.fake_quant(w, "mxfp4")).backward()
    assert float(loss_of(bfp.fake_quant(w.detach(), "mxfp4"))) < 0.75 * float(loss.detach())
    # compiled, with the gradient
    w.grad = None
    torch.compile(lambda: loss_of(bfp.fake_quant(w, "mxfp4")), fullgraph=True)().backward()
    wq2 = bfp.fake_quant(w.detach(), "mxfp4").clone().requires_grad_()
    loss_of(wq2).backward()
    np.testing.assert_allclose(w.grad.numpy(), wq2.grad.numpy(), rtol=1e-6, atol=0)
