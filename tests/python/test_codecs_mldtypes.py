"""Cross-check libbfp's scalar element codecs against ml_dtypes and numpy.

The C tool tests/tools/codec_dump.c writes libbfp's answers into files (see
its header for the list); these tests compare them with ml_dtypes (FP4/FP6/
FP8 element types, E8M0, bfloat16) and numpy (float16), exhaustively over all
65536 bfloat16 inputs for the element encoders and over every code for the
decoders (SPEC section 1).

Where libbfp and ml_dtypes differ by design (outside the finite range, and for
non-finite inputs) the tests do not compare with ml_dtypes; they assert
libbfp's own rule (SPEC section 0 "Saturation", include/bfp.h
bfp_elem_encode) and, separately, pin down what ml_dtypes 0.6.0 does so that
the documented difference stays true:

  type  beyond max (finite)                 +-Inf      NaN (sign s)
  ----  ----------------------------------  ---------  ---------------------
  e2m1  ml_dtypes: saturates to +-max       +-max      zero with sign NOT s
        (0x7/0xF)                                      (+NaN -> 0x8, -NaN -> 0x0)
  e2m3  ml_dtypes: saturates (0x1F/0x3F)    +-max      same (0x20 / 0x00)
  e3m2  ml_dtypes: saturates (0x1F/0x3F)    +-max      same (0x20 / 0x00)
  e4m3  ml_dtypes: RNE, |x| <= 464 -> 448   NaN 0x7F   0x7F | s
        (0x7E), |x| > 464 -> NaN (0x7F|s)   |s
  e5m2  ml_dtypes: RNE, |x| < 61440 ->      Inf 0x7C   0x7E | s
        57344 (0x7B), >= 61440 -> Inf       |s
  libbfp (all types): finite or infinite |x| > max -> largest finite code with
        x's sign; NaN -> 0x7F|s for e4m3 and e5m2, else largest code with sign s.

So within the finite range every code must agree bit for bit, and wherever
ml_dtypes' answer is a finite code (including inputs that round down to max),
libbfp must agree too.
"""
import math

import ml_dtypes
import numpy as np
import pytest

N_BF16 = 1 << 16

# name -> (ml_dtypes type or None, code bits)
FLOAT_TYPES = {
    "e2m1": (ml_dtypes.float4_e2m1fn, 4),
    "e2m3": (ml_dtypes.float6_e2m3fn, 6),
    "e3m2": (ml_dtypes.float6_e3m2fn, 6),
    "e4m3": (ml_dtypes.float8_e4m3fn, 8),
    "e5m2": (ml_dtypes.float8_e5m2, 8),
}
ALL_TYPES = {"e2m1": 4, "e1m2": 4, "e2m3": 6, "e3m2": 6, "e4m3": 8, "e5m2": 8,
             "int8": 8, "int4": 4}
# SPEC section 1: largest finite magnitude and the code that stores it
MAX = {"e2m1": (6.0, 0x7), "e1m2": (1.75, 0x7), "e2m3": (7.5, 0x1F),
       "e3m2": (28.0, 0x1F), "e4m3": (448.0, 0x7E), "e5m2": (57344.0, 0x7B),
       "int8": (127 / 64, 0x7F), "int4": (7 / 4, 0x7)}
INT_TYPES = {"int8": (64, 127, 0xFF), "int4": (4, 7, 0xF)}  # scale, kmax, mask


# ---------------------------------------------------------------- helpers

def _read(dump, name, dtype, count=None):
    a = np.fromfile(dump / name, dtype=np.dtype(dtype).newbyteorder("<"))
    if count is not None:
        assert a.size == count, f"{name}: {a.size} values, expected {count}"
    return a.astype(np.dtype(dtype).newbyteorder("="))


def _bf16_inputs():
    """All 65536 bfloat16 patterns, widened exactly to float32."""
    return (np.arange(N_BF16, dtype=np.uint32) << 16).view(np.float32)


def _to_ml_codes(x, ml_type, bits):
    """ml_dtypes encoding of float32 x, as code integers in [0, 2^bits)."""
    with np.errstate(invalid="ignore", over="ignore"):
        codes = np.asarray(x, np.float32).astype(ml_type).view(np.uint8)
    # ml_dtypes stores sub-byte types one per byte, in the low `bits` bits
    # (sign at bit bits-1); check that rather than masking silently.
    assert int(codes.max(initial=0)) < (1 << bits)
    return codes


def _ml_decode(ml_type, bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    return codes.view(ml_type).astype(np.float64)


def _sign_code(bits, negative, mag_code):
    return mag_code | (1 << (bits - 1)) if negative else mag_code


def _fmt_mismatch(name, idx, x, ours, theirs, limit=8):
    rows = [f"  bf16 0x{i:04X} ({float(x[i])!r}): ours 0x{int(ours[i]):02X}, "
            f"ml_dtypes 0x{int(theirs[i]):02X}" for i in idx[:limit]]
    return f"{name}: {len(idx)} mismatches\n" + "\n".join(rows)


def _same_floats(a, b):
    """Element-wise: equal bits, or both NaN (payload and sign not compared)."""
    a = np.asarray(a)
    b = np.asarray(b)
    ua = a.view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)
    ub = b.view(np.uint64 if b.dtype.itemsize == 8 else np.uint32)
    return (ua == ub) | (np.isnan(a) & np.isnan(b))


# ------------------------------------------------- ml_dtypes layout sanity

def test_mldtypes_layout_known_values():
    """How ml_dtypes lays out sub-byte types in a uint8 view: one code per
    byte, low bits, sign at bit (bits-1). Known values from SPEC section 1."""
    cases = [
        (ml_dtypes.float4_e2m1fn, 4, [(6.0, 0x7), (-6.0, 0xF), (0.5, 0x1), (-0.0, 0x8),
                                       (1.5, 0x3), (-4.0, 0xE)]),
        (ml_dtypes.float6_e2m3fn, 6, [(7.5, 0x1F), (-7.5, 0x3F), (0.125, 0x01),
                                       (1.0, 0x08), (-0.0, 0x20)]),
        (ml_dtypes.float6_e3m2fn, 6, [(28.0, 0x1F), (-28.0, 0x3F), (0.0625, 0x01),
                                       (1.0, 0x0C), (-0.0, 0x20)]),
        (ml_dtypes.float8_e4m3fn, 8, [(448.0, 0x7E), (2.0 ** -9, 0x01), (1.0, 0x38),
                                       (-0.0, 0x80)]),
        (ml_dtypes.float8_e5m2, 8, [(57344.0, 0x7B), (2.0 ** -16, 0x01), (1.0, 0x3C),
                                     (math.inf, 0x7C)]),
    ]
    for ml_type, bits, pairs in cases:
        vals = np.array([v for v, _ in pairs], np.float32)
        want = [c for _, c in pairs]
        got = _to_ml_codes(vals, ml_type, bits).tolist()
        assert got == want, (ml_type, got, want)
        back = np.array(want, np.uint8).view(ml_type).astype(np.float64)
        assert _same_floats(back, vals.astype(np.float64)).all(), (ml_type, back)


def test_dump_files_complete(codec_dump_dir):
    for name, bits in ALL_TYPES.items():
        assert (codec_dump_dir / f"encode_{name}.u8").stat().st_size == N_BF16
        assert (codec_dump_dir / f"decode_{name}.f64").stat().st_size == 8 << bits
    assert (codec_dump_dir / "decode_e8m0.f64").stat().st_size == 8 * 256
    for name in ("f16_to_f32.f32", "bf16_to_f32.f32"):
        assert (codec_dump_dir / name).stat().st_size == 4 * N_BF16
    n = (codec_dump_dir / "f32_inputs.f32").stat().st_size
    assert n % 4 == 0 and n // 4 > 4 * N_BF16
    for name in ("f32_to_bf16.u16", "f32_to_f16.u16"):
        assert (codec_dump_dir / name).stat().st_size == n // 2


def test_known_codes_ours(codec_dump_dir):
    """Spot values through our own encoder (bf16 index = f32 bits >> 16)."""
    def enc(name, v):
        h = int(np.array(v, np.float32).view(np.uint32)) >> 16
        return int(_read(codec_dump_dir, f"encode_{name}.u8", np.uint8)[h])
    assert enc("e2m1", 6.0) == 0x7
    assert enc("e2m1", -6.0) == 0xF
    assert enc("e2m1", -0.0) == 0x8
    assert enc("e2m1", 5.0) == 0x6      # tie 4|6 -> even mantissa (4)
    assert enc("e2m1", 2.5) == 0x4      # tie 2|3 -> 2
    assert enc("e2m1", 0.25) == 0x0     # tie 0|0.5 -> 0
    assert enc("e2m1", -0.25) == 0x8    # ... keeping the sign
    assert enc("e4m3", 448.0) == 0x7E
    assert enc("e5m2", 57344.0) == 0x7B
    assert enc("e1m2", 1.75) == 0x7
    assert enc("int4", -1.75) == 0x9
    assert enc("int8", -1.0) == 0xC0


# ------------------------------------------------------ element encoders

@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_encode_in_range_matches_mldtypes(codec_dump_dir, name):
    """Every finite bf16 input with |x| <= max: same code as ml_dtypes."""
    ml_type, bits = FLOAT_TYPES[name]
    x = _bf16_inputs()
    ours = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    theirs = _to_ml_codes(x, ml_type, bits)
    mx = float(ml_dtypes.finfo(ml_type).max)
    assert mx == MAX[name][0]
    sel = np.isfinite(x) & (np.abs(x) <= mx)
    assert sel.sum() > 1000
    bad = np.nonzero(sel & (ours != theirs))[0]
    assert bad.size == 0, _fmt_mismatch(name, bad, x, ours, theirs)


@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_encode_agrees_wherever_mldtypes_is_finite(codec_dump_dir, name):
    """Inputs just above max that RNE rounds down to max (e4m3: up to 464,
    e5m2: below 61440) give max in both; any finite ml_dtypes code is ours."""
    ml_type, bits = FLOAT_TYPES[name]
    x = _bf16_inputs()
    ours = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    theirs = _to_ml_codes(x, ml_type, bits)
    with np.errstate(invalid="ignore"):
        ml_finite = np.isfinite(theirs.view(ml_type).astype(np.float32))
    sel = np.isfinite(x) & ml_finite
    bad = np.nonzero(sel & (ours != theirs))[0]
    assert bad.size == 0, _fmt_mismatch(name, bad, x, ours, theirs)


@pytest.mark.parametrize("name", sorted(ALL_TYPES))
def test_encode_beyond_range_saturates(codec_dump_dir, name):
    """Finite |x| > max and +-Inf: the largest finite code with x's sign."""
    bits = ALL_TYPES[name]
    mx, max_code = MAX[name]
    x = _bf16_inputs()
    ours = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    sel = ~np.isnan(x) & (np.abs(x) > mx)
    assert sel.sum() > 100
    if name in INT_TYPES:
        neg_code = (-INT_TYPES[name][1]) & INT_TYPES[name][2]
    else:
        neg_code = _sign_code(bits, True, max_code)
    want = np.where(np.signbit(x), neg_code, max_code)
    bad = np.nonzero(sel & (ours != want))[0]
    assert bad.size == 0, _fmt_mismatch(name, bad, x, ours, want)
    # the infinities explicitly (e5m2: Inf in, 0x7B out, not the Inf code 0x7C)
    assert ours[0x7F80] == max_code and ours[0xFF80] == neg_code


@pytest.mark.parametrize("name", sorted(ALL_TYPES))
def test_encode_nan(codec_dump_dir, name):
    """NaN: the NaN code 0x7F|sign for e4m3 and e5m2; types with no NaN give
    the largest magnitude with the NaN's sign (include/bfp.h)."""
    bits = ALL_TYPES[name]
    x = _bf16_inputs()
    ours = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    nan = np.isnan(x)
    assert nan.sum() == 2 * 127
    if name in ("e4m3", "e5m2"):
        pos, neg = 0x7F, 0xFF
    elif name in INT_TYPES:
        pos, neg = MAX[name][1], (-INT_TYPES[name][1]) & INT_TYPES[name][2]
    else:
        pos, neg = MAX[name][1], _sign_code(bits, True, MAX[name][1])
    want = np.where(np.signbit(x), neg, pos)
    bad = np.nonzero(nan & (ours != want))[0]
    assert bad.size == 0, _fmt_mismatch(name, bad, x, ours, want)


def test_mldtypes_documented_behaviour():
    """Pins ml_dtypes' behaviour outside the finite range, as documented in
    the module docstring (if this fails, ml_dtypes changed: update the doc)."""
    f = np.float32
    nan_pos = np.array([0x7FC00000], np.uint32).view(np.float32)
    nan_neg = np.array([0xFFC00000], np.uint32).view(np.float32)
    for ml_type, bits, max_code in ((ml_dtypes.float4_e2m1fn, 4, 0x7),
                                    (ml_dtypes.float6_e2m3fn, 6, 0x1F),
                                    (ml_dtypes.float6_e3m2fn, 6, 0x1F)):
        s = 1 << (bits - 1)
        assert _to_ml_codes([1e30, -1e30, np.inf, -np.inf], ml_type, bits).tolist() == \
            [max_code, max_code | s, max_code, max_code | s]
        assert _to_ml_codes(nan_pos, ml_type, bits).tolist() == [s]
        assert _to_ml_codes(nan_neg, ml_type, bits).tolist() == [0]
    e4 = ml_dtypes.float8_e4m3fn
    assert _to_ml_codes(np.array([464, 466, -464, -466, np.inf], f), e4, 8).tolist() == \
        [0x7E, 0x7F, 0xFE, 0xFF, 0x7F]
    e5 = ml_dtypes.float8_e5m2
    assert _to_ml_codes(np.array([61184, 61440, -61440, np.inf], f), e5, 8).tolist() == \
        [0x7B, 0x7C, 0xFC, 0x7C]
    assert _to_ml_codes(nan_pos, e5, 8).tolist() == [0x7E]
    assert _to_ml_codes(nan_neg, e5, 8).tolist() == [0xFE]


@pytest.mark.parametrize("name", ["e1m2", "int8", "int4"])
def test_encode_uniform_grids_reference(codec_dump_dir, name):
    """E1M2, INT8 and INT4 have no ml_dtypes type: compare with an independent
    numpy reference. All three are uniform grids k/scale with code magnitude
    k (E1M2: k/4, k = 0..7), so RNE is np.rint (ties to even k)."""
    bits = ALL_TYPES[name]
    x = _bf16_inputs()
    ours = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    scale, kmax, mask = INT_TYPES.get(name, (4, 7, 0xF))
    sel = np.isfinite(x)
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.minimum(np.rint(np.abs(x.astype(np.float64)) * scale), kmax)
    k = np.where(sel, k, 0).astype(np.int64)
    neg = np.signbit(x)
    if name in INT_TYPES:
        want = np.where(neg, (-k) & mask, k)
    else:
        want = np.where(neg, k | (1 << (bits - 1)), k)
    bad = np.nonzero(sel & (ours != want))[0]
    assert bad.size == 0, _fmt_mismatch(name, bad, x, ours, want)


# ------------------------------------------------------ element decoders

@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_decode_matches_mldtypes(codec_dump_dir, name):
    """Every code decodes as in ml_dtypes: same value and sign of zero, NaN
    where ml_dtypes gives NaN, e5m2 0x7C/0xFC = +-Inf."""
    ml_type, bits = FLOAT_TYPES[name]
    ours = _read(codec_dump_dir, f"decode_{name}.f64", np.float64, 1 << bits)
    theirs = _ml_decode(ml_type, bits)
    ok = _same_floats(ours, theirs)
    bad = np.nonzero(~ok)[0]
    assert bad.size == 0, f"{name}: " + ", ".join(
        f"0x{c:02X}: ours {ours[c]!r} ml_dtypes {theirs[c]!r}" for c in bad[:8])
    if name == "e5m2":
        assert ours[0x7C] == math.inf and ours[0xFC] == -math.inf
        assert np.isnan(ours[[0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]]).all()
    if name == "e4m3":
        assert np.isnan(ours[[0x7F, 0xFF]]).all() and np.isnan(ours).sum() == 2


def test_decode_uniform_grids_reference(codec_dump_dir):
    """E1M2 = +-k/4 (sign-magnitude); INT8 = k/64 and INT4 = k/4 (two's
    complement; the unused code -2^(n-1) decodes as -2, see the report)."""
    e1m2 = _read(codec_dump_dir, "decode_e1m2.f64", np.float64, 16)
    want = [k / 4 for k in range(8)] + [-(k / 4) for k in range(8)]
    assert _same_floats(e1m2, np.array(want)).all(), e1m2
    for name, (scale, _, mask) in INT_TYPES.items():
        bits = ALL_TYPES[name]
        got = _read(codec_dump_dir, f"decode_{name}.f64", np.float64, 1 << bits)
        c = np.arange(1 << bits)
        k = np.where(c >= (1 << (bits - 1)), c - (1 << bits), c)
        assert np.array_equal(got, k / scale), (name, got)


def test_decode_e8m0_matches_mldtypes(codec_dump_dir):
    ours = _read(codec_dump_dir, "decode_e8m0.f64", np.float64, 256)
    theirs = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    bad = np.nonzero(~_same_floats(ours, theirs))[0]
    assert bad.size == 0, ", ".join(
        f"0x{c:02X}: ours {ours[c]!r} ml_dtypes {theirs[c]!r}" for c in bad[:8])
    assert np.isnan(ours[0xFF]) and np.isnan(ours).sum() == 1
    assert ours[0] == 2.0 ** -127 and ours[127] == 1.0 and ours[254] == 2.0 ** 127


@pytest.mark.parametrize("name", sorted(ALL_TYPES))
def test_roundtrip_every_code(codec_dump_dir, name):
    """encode(decode(c)) == c for every finite code (negative zero keeps its
    code 0x80.. / sign bit). Every element value is exact in bfloat16, so the
    exhaustive bf16 encode table is indexed by the decoded value's bits.
    Skipped codes: NaN codes; e5m2 +-Inf (encode saturates them, tested
    above); INT8 0x80 and INT4 0x8 (k = -2^(n-1) is outside SPEC's range)."""
    bits = ALL_TYPES[name]
    dec = _read(codec_dump_dir, f"decode_{name}.f64", np.float64, 1 << bits)
    enc = _read(codec_dump_dir, f"encode_{name}.u8", np.uint8, N_BF16)
    codes = np.arange(1 << bits)
    keep = np.isfinite(dec)
    if name in INT_TYPES:
        keep &= codes != (1 << (bits - 1))
    f32 = dec.astype(np.float32)
    assert np.array_equal(f32[keep].astype(np.float64), dec[keep])
    fb = f32.view(np.uint32)
    assert not (fb[keep] & 0xFFFF).any(), "an element value is not exact in bf16"
    back = enc[(fb >> 16).astype(np.int64)]
    bad = np.nonzero(keep & (back != codes))[0]
    assert bad.size == 0, f"{name}: " + ", ".join(
        f"0x{c:02X} -> {dec[c]!r} -> 0x{int(back[c]):02X}" for c in bad[:8])
    # the number of codes checked: all but NaN/Inf/unused
    assert keep.sum() == {"e4m3": 254, "e5m2": 248, "int8": 255, "int4": 15}.get(
        name, 1 << bits)


# ------------------------------------------------ half-precision conversions

def test_f16_to_f32_matches_numpy(codec_dump_dir):
    ours = _read(codec_dump_dir, "f16_to_f32.f32", np.float32, N_BF16)
    theirs = np.arange(N_BF16, dtype=np.uint16).view(np.float16).astype(np.float32)
    bad = np.nonzero(~_same_floats(ours, theirs))[0]
    assert bad.size == 0, ", ".join(
        f"f16 0x{h:04X}: ours 0x{int(ours.view(np.uint32)[h]):08X} "
        f"numpy 0x{int(theirs.view(np.uint32)[h]):08X}" for h in bad[:8])
    assert np.isnan(ours).sum() == 2 * 1023


def test_bf16_to_f32_matches_mldtypes(codec_dump_dir):
    ours = _read(codec_dump_dir, "bf16_to_f32.f32", np.float32, N_BF16)
    theirs = np.arange(N_BF16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    bad = np.nonzero(~_same_floats(ours, theirs))[0]
    assert bad.size == 0, [f"0x{h:04X}" for h in bad[:8]]


def _conversion_inputs(dump):
    x = _read(dump, "f32_inputs.f32", np.float32)
    bits = x.view(np.uint32)
    # the set must hold the cases the test is about
    must = [0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x7FC00000, 0x7F800001,
            0x00800000, 0x00000001, 0x3F808000, 0x3F818000,  # bf16 ties, even/odd
            0x477FE000, 0x477FF000, 0x477FEFFF,               # 65504, 65520, below
            0x33000000, 0x33C00000]                           # 2^-25, 1.5*2^-24
    missing = [hex(b) for b in must if not (bits == b).any()]
    assert not missing, f"f32_inputs lacks {missing}"
    return x


def _fmt_conv(x, ours, theirs, bad, what):
    xb = x.view(np.uint32)
    return f"{what}: {bad.size} mismatches\n" + "\n".join(
        f"  f32 0x{int(xb[i]):08X} ({float(x[i])!r}): ours 0x{int(ours[i]):04X}, "
        f"reference 0x{int(theirs[i]):04X}" for i in bad[:8])


def test_f32_to_f16_matches_numpy(codec_dump_dir):
    x = _conversion_inputs(codec_dump_dir)
    ours = _read(codec_dump_dir, "f32_to_f16.u16", np.uint16, x.size)
    with np.errstate(over="ignore", invalid="ignore"):
        theirs = x.astype(np.float16).view(np.uint16)
    nan_ours = np.isnan(ours.view(np.float16))
    nan_theirs = np.isnan(theirs.view(np.float16))
    ok = np.where(nan_theirs, nan_ours, ours == theirs)
    bad = np.nonzero(~ok)[0]
    assert bad.size == 0, _fmt_conv(x, ours, theirs, bad, "f32->f16")
    # the boundary cases by name
    def one(v):
        return int(ours[np.nonzero(x.view(np.uint32) ==
                                   np.array(v, np.float32).view(np.uint32))[0][0]])
    assert one(65504.0) == 0x7BFF
    assert one(np.nextafter(np.float32(65520), np.float32(0))) == 0x7BFF
    assert one(65520.0) == 0x7C00 and one(-65520.0) == 0xFC00
    assert one(2.0 ** -25) == 0x0000 and one(1.5 * 2.0 ** -24) == 0x0002


def test_f32_to_bf16_matches_mldtypes(codec_dump_dir):
    x = _conversion_inputs(codec_dump_dir)
    ours = _read(codec_dump_dir, "f32_to_bf16.u16", np.uint16, x.size)
    with np.errstate(over="ignore", invalid="ignore"):
        theirs = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan_ours = np.isnan(ours.view(ml_dtypes.bfloat16).astype(np.float32))
    nan_theirs = np.isnan(theirs.view(ml_dtypes.bfloat16).astype(np.float32))
    ok = np.where(nan_theirs, nan_ours, ours == theirs)
    bad = np.nonzero(~ok)[0]
    assert bad.size == 0, _fmt_conv(x, ours, theirs, bad, "f32->bf16")
    # the ties by name: 1 + 2^-8 (bit 16 even) stays 0x3F80, 1 + 3*2^-8 (odd) goes up
    xb = x.view(np.uint32)
    assert int(ours[np.nonzero(xb == 0x3F808000)[0][0]]) == 0x3F80
    assert int(ours[np.nonzero(xb == 0x3F818000)[0][0]]) == 0x3F82
