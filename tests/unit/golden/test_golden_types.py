"""Unit tier: FP16 and the FP8 family in the golden model, against an independent reference.

The reference decodes bit patterns from their fields by hand (no ml_dtypes, no floating
point): every finite value is ``(-1)**s * sig * 2**exp`` with integer ``sig`` and ``exp``;
a product is the integer ``sig_a * sig_b`` at ``exp_a + exp_b``, rounded to FP32 with a
written-out round-to-nearest-even on integers (vectorised over numpy int64 arrays, so every
FP8 x FP8 pair of every type pair, 65,536 per pair, is checked in well under a second).
Chains (double-row order) use ``ref_add`` of ``test_golden_bf16``, exact Python integers.

``SYSTOLICA_EXHAUSTIVE=1`` (``make check-types``) widens the FP8 x BF16 check from a seeded
sample to all 16,777,216 pairs per FP8 type, both operand orders.
"""

import os

import ml_dtypes
import numpy as np
import pytest
from test_golden_bf16 import ref_add

from systolica.golden import (
    CANONICAL_NAN,
    FORMATS,
    double_row_order,
    format_of,
    nc_matmul,
    nc_matmul_batch,
)

FP8 = ("e4m3", "e5m2", "e3m4", "e4m3fn")
FLOATS = ("bf16", "fp16") + FP8
# Independent field layouts (exponent bits, fraction bits, bias, has Inf) written out here.
FIELDS = {"bf16": (8, 7, 127, True), "fp16": (5, 10, 15, True), "e4m3": (4, 3, 7, True),
          "e5m2": (5, 2, 15, True), "e3m4": (3, 4, 3, True), "e4m3fn": (4, 3, 7, False)}
DTYPES = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "e4m3": ml_dtypes.float8_e4m3,
          "e5m2": ml_dtypes.float8_e5m2, "e3m4": ml_dtypes.float8_e3m4,
          "e4m3fn": ml_dtypes.float8_e4m3fn}
_FINITE, _INF, _NAN = 0, 1, 2


def ref_decode(name, bits, ftz):
    """bits (int64 array) -> (kind, sign, sig, exp) arrays: value = (-1)**sign * sig * 2**exp."""
    ebits, mbits, bias, has_inf = FIELDS[name]
    width = 1 + ebits + mbits
    sign = (bits >> (width - 1)) & 1
    e = (bits >> mbits) & ((1 << ebits) - 1)
    frac = bits & ((1 << mbits) - 1)
    top = e == (1 << ebits) - 1
    if has_inf:
        kind = np.where(top, np.where(frac == 0, _INF, _NAN), _FINITE)
    else:                           # e4m3fn: only S.1111.111 is NaN; no Inf
        kind = np.where(top & (frac == (1 << mbits) - 1), _NAN, _FINITE)
    sig = np.where(e > 0, frac | (1 << mbits), frac)
    if ftz:
        sig = np.where(e == 0, 0, sig)
    exp = np.maximum(e, 1) - bias - mbits
    return kind, sign, sig, exp


def ref_round(sign, mag, scale):
    """FP32 bits of (-1)**sign * mag * 2**scale (int64 arrays, mag < 2**40), RNE, gradual
    underflow, overflow to +-Inf; zero keeps its sign."""
    length = np.zeros_like(mag)
    for i in range(41):
        length += (mag >> i) > 0
    top = length - 1 + scale
    quantum = np.maximum(top - 23, -149)
    shift = quantum - scale
    left = np.clip(-shift, 0, 40)
    right = np.clip(shift, 1, 62)
    q_right = mag >> right
    rem = mag & ((np.int64(1) << right) - 1)
    half = np.int64(1) << (right - 1)
    q_right = q_right + ((rem > half) | ((rem == half) & (q_right & 1 == 1)))
    q = np.where(shift <= 0, mag << left, q_right)
    carry = q == 1 << 24
    q = np.where(carry, 1 << 23, q)
    quantum = quantum + carry
    normal = ((quantum + 150) << 23) + q - (1 << 23)
    bits = np.where(q < 1 << 23, q, np.minimum(normal, 0x7F800000))
    return np.where(mag == 0, 0, bits) | (sign << 31)


def ref_product(name_a, a_bits, name_b, b_bits, ftz=False):
    """FP32 bits of the product of two operand bit-pattern arrays (broadcast)."""
    ka, sa, ma, ea = ref_decode(name_a, np.asarray(a_bits, np.int64), ftz)
    kb, sb, mb, eb = ref_decode(name_b, np.asarray(b_bits, np.int64), ftz)
    sign = sa ^ sb
    zero_a = (ka == _FINITE) & (ma == 0)
    zero_b = (kb == _FINITE) & (mb == 0)
    bits = ref_round(sign, ma * mb, ea + eb)
    if ftz:
        bits = np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits)
    bits = np.where((ka == _INF) | (kb == _INF), (sign << 31) | 0x7F800000, bits)
    nan = (ka == _NAN) | (kb == _NAN) | ((ka == _INF) & zero_b) | ((kb == _INF) & zero_a)
    return np.where(nan, CANONICAL_NAN, bits).astype(np.uint32)


def _all(name):
    return np.arange(1 << (1 + FIELDS[name][0] + FIELDS[name][1]), dtype=np.int64)


def _as(name, bits):
    return np.asarray(bits).astype(f"u{format_of(name).width // 8}").view(DTYPES[name])


def _golden_products(sname, s_bits, mname, m_bits, ftz):
    """Golden FP32 bits of every stationary x moving pair, as K = 1 matmuls [S, M]."""
    out = nc_matmul(_as(sname, s_bits)[None, :], _as(mname, m_bits)[None, :], ftz=ftz)
    return out.view(np.uint32)


# ---------------------------------------------------------------------------------------------
# The reference itself, by hand


def test_reference_decodes_known_values():
    cases = {("e4m3", 0x77): 240, ("e4m3fn", 0x7E): 448, ("e5m2", 0x7B): 57344,
             ("e3m4", 0x6F): 15.5, ("fp16", 0x7BFF): 65504, ("e4m3", 0x01): 2.0**-9,
             ("e5m2", 0x01): 2.0**-16, ("e3m4", 0x01): 2.0**-6, ("fp16", 0x0001): 2.0**-24}
    for (name, bits), value in cases.items():
        kind, sign, sig, exp = ref_decode(name, np.int64(bits), False)
        assert kind == _FINITE and sign == 0 and sig * 2.0**exp == value, (name, bits)
    assert ref_decode("e4m3", np.int64(0x78), False)[0] == _INF
    assert ref_decode("e4m3fn", np.int64(0x78), False)[0] == _FINITE      # 256
    assert ref_decode("e4m3fn", np.int64(0xFF), False)[0] == _NAN
    # 240 x 240 = 57600 = 0x4761_0000; 2**-9 x 2**-16 = 2**-25 (normal FP32).
    assert ref_product("e4m3", 0x77, "e4m3", 0x77) == 0x47610000
    assert ref_product("e4m3", 0x01, "e5m2", 0x01) == (127 - 25) << 23


# ---------------------------------------------------------------------------------------------
# Exhaustive FP8 x FP8: every pair of bit patterns of every ordered type pair


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("sname", FP8)
def test_every_fp8_pair_matches_reference(sname, ftz):
    for mname in FP8:
        s, m = _all(sname), _all(mname)
        got = _golden_products(sname, s, mname, m, ftz)
        want = ref_product(sname, s[:, None], mname, m[None, :], ftz)
        bad = np.argwhere(got != want)
        assert not bad.size, (f"{sname} x {mname}: {len(bad)} mismatches, first "
                              f"{s[bad[0][0]]:#04x} x {m[bad[0][1]]:#04x}: golden "
                              f"{got[tuple(bad[0])]:#010x}, reference {want[tuple(bad[0])]:#010x}")


def _fp8_bf16_check(fp8, bf16_bits, ftz):
    a = _all(fp8)
    got = _golden_products(fp8, a, "bf16", bf16_bits, ftz)
    want = ref_product(fp8, a[:, None], "bf16", bf16_bits[None, :], ftz)
    assert np.array_equal(got, want), f"{fp8} x bf16 mismatch"
    got = _golden_products("bf16", bf16_bits, fp8, a, ftz)
    assert np.array_equal(got, want.T), f"bf16 x {fp8} mismatch"


@pytest.mark.parametrize("fp8", FP8)
def test_fp8_with_bf16_matches_reference(fp8, seed):
    """Seeded sample of 4,096 BF16 patterns (1M pairs per type); every pattern (16.7M pairs
    per type and order) with SYSTOLICA_EXHAUSTIVE=1."""
    if os.environ.get("SYSTOLICA_EXHAUSTIVE") == "1":
        for start in range(0, 1 << 16, 4096):
            for ftz in (False, True):
                _fp8_bf16_check(fp8, np.arange(start, start + 4096, dtype=np.int64), ftz)
        return
    rng = np.random.default_rng([seed, FP8.index(fp8)])
    bf16 = rng.integers(0, 1 << 16, 4096, dtype=np.int64)
    for ftz in (False, True):
        _fp8_bf16_check(fp8, bf16, ftz)


@pytest.mark.parametrize("pair", [("fp16", "fp16"), ("fp16", "bf16"), ("bf16", "fp16"),
                                  ("fp16", "e4m3fn"), ("e3m4", "fp16")])
def test_fp16_pairs_match_reference(pair, seed):
    rng = np.random.default_rng([seed, FLOATS.index(pair[0]), FLOATS.index(pair[1])])
    width = [1 << (1 + FIELDS[n][0] + FIELDS[n][1]) for n in pair]
    a = rng.integers(0, width[0], 1024, dtype=np.int64)
    b = rng.integers(0, width[1], 1024, dtype=np.int64)
    for ftz in (False, True):
        got = _golden_products(pair[0], a, pair[1], b, ftz)
        assert np.array_equal(got, ref_product(pair[0], a[:, None], pair[1], b[None, :], ftz))


# ---------------------------------------------------------------------------------------------
# Directed special values of each type


SPECIALS = {
    # name: (max finite, min subnormal, NaN patterns, Inf pattern or None)
    "fp16": (0x7BFF, 0x0001, (0x7C01, 0x7E00, 0xFFFF), 0x7C00),
    "e4m3": (0x77, 0x01, (0x79, 0x7F, 0xFF), 0x78),
    "e5m2": (0x7B, 0x01, (0x7D, 0x7E, 0xFF), 0x7C),
    "e3m4": (0x6F, 0x01, (0x71, 0x7F, 0xFF), 0x70),
    "e4m3fn": (0x7E, 0x01, (0x7F, 0xFF), None),
}


@pytest.mark.parametrize("name", SPECIALS)
def test_special_values(name):
    top, tiny, nans, inf = SPECIALS[name]
    sign = 0x8000 if name == "fp16" else 0x80
    one = {"fp16": 0x3C00, "e4m3": 0x38, "e5m2": 0x3C, "e3m4": 0x30, "e4m3fn": 0x38}[name]
    fp32 = lambda bits: np.uint32(bits)  # noqa: E731
    value = float(_as(name, [top])[0])
    assert _golden_products(name, [top], name, [one], False)[0, 0] == \
        np.float32(value).view(np.uint32)
    assert float(_as(name, [tiny])[0]) == {"fp16": 2.0**-24, "e4m3": 2.0**-9,
                                           "e5m2": 2.0**-16, "e3m4": 2.0**-6,
                                           "e4m3fn": 2.0**-9}[name]
    # Min subnormal x 1 is exact (a normal FP32); FTZ reads it as +-0.
    assert _golden_products(name, [tiny | sign], name, [one], False)[0, 0] == \
        np.float32(-float(_as(name, [tiny])[0])).view(np.uint32)
    assert _golden_products(name, [tiny | sign], name, [one], True)[0, 0] == fp32(0x80000000)
    for nan in nans:
        assert _golden_products(name, [nan], name, [one], False)[0, 0] == CANONICAL_NAN
    zero, neg_zero = 0, sign
    assert _golden_products(name, [neg_zero], name, [one], False)[0, 0] == fp32(0x80000000)
    assert _golden_products(name, [neg_zero], name, [neg_zero], False)[0, 0] == 0
    if inf is not None:
        assert _golden_products(name, [inf | sign], name, [one], False)[0, 0] == 0xFF800000
        assert _golden_products(name, [inf], name, [zero], False)[0, 0] == CANONICAL_NAN
    else:                               # e4m3fn: 0x78 and 0xF8 are +-256, not Inf
        assert float(_as(name, [0x78])[0]) == 256.0 and float(_as(name, [0xF8])[0]) == -256.0


def test_fp16_products_leave_the_normal_range():
    # 65504**2 fits FP32; 2**-24 x 2**-24 = 2**-48 is normal; fp16 x bf16 overflows to Inf.
    assert _golden_products("fp16", [0x7BFF], "fp16", [0x7BFF], False)[0, 0] == \
        np.float32(65504.0**2).view(np.uint32)
    assert _golden_products("fp16", [0x0001], "fp16", [0x0001], False)[0, 0] == \
        (127 - 48) << 23
    assert _golden_products("fp16", [0x7BFF], "bf16", [0x7F7F], False)[0, 0] == 0x7F800000
    # bf16 2**-126 x e4m3 2**-9 = 2**-135: a subnormal FP32 result; FTZ flushes it.
    assert _golden_products("bf16", [0x0080], "e4m3", [0x01], False)[0, 0] == 1 << 14
    assert _golden_products("bf16", [0x0080], "e4m3", [0x01], True)[0, 0] == 0


# ---------------------------------------------------------------------------------------------
# Mixed chains and double-row order


def ref_chain(sname, s_bits, mname, m_bits, order, ftz=False):
    """FP32 bits of one column: products in ``order``, added one at a time (exact ints)."""
    products = [int(ref_product(sname, s_bits[k], mname, m_bits[k], ftz)) for k in order]
    acc = products[0]
    for p in products[1:]:
        acc = ref_add(acc, p, ftz)
    return acc


def _random_bits(rng, name, shape):
    return rng.integers(0, 1 << (1 + FIELDS[name][0] + FIELDS[name][1]), shape, dtype=np.int64)


@pytest.mark.parametrize("sname,mname", [("bf16", "e4m3"), ("fp16", "e5m2"),
                                         ("e3m4", "e4m3fn"), ("e5m2", "bf16")])
def test_mixed_chains_match_reference(sname, mname, seed):
    rng = np.random.default_rng([seed, FLOATS.index(sname), FLOATS.index(mname)])
    k, m, n = 7, 3, 4
    s_bits, m_bits = _random_bits(rng, sname, (k, m)), _random_bits(rng, mname, (k, n))
    for ftz in (False, True):
        got = nc_matmul(_as(sname, s_bits), _as(mname, m_bits), ftz=ftz).view(np.uint32)
        for i in range(m):
            for j in range(n):
                assert got[i, j] == ref_chain(sname, s_bits[:, i], mname, m_bits[:, j],
                                              range(k), ftz), (i, j, ftz)


def test_double_row_order():
    assert double_row_order(8, 4) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert double_row_order(7, 4) == [0, 4, 1, 5, 2, 6, 3]
    assert double_row_order(5, 4) == [0, 4, 1, 2, 3]
    assert double_row_order(3, 4) == [0, 1, 2]


@pytest.mark.parametrize("k", [1, 5, 7, 8])
@pytest.mark.parametrize("sname,mname", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"),
                                         ("e5m2", "e5m2")])
def test_double_row_matches_reference(sname, mname, k, seed):
    rows = 4
    rng = np.random.default_rng([seed, k, FLOATS.index(sname), FLOATS.index(mname)])
    s_bits, m_bits = _random_bits(rng, sname, (k, 3)), _random_bits(rng, mname, (k, 5))
    # Keep a good share of finite values so that rounding, not NaN, decides most columns.
    s_bits &= ~0x40
    m_bits &= ~0x40
    got = nc_matmul(_as(sname, s_bits), _as(mname, m_bits), perf_mode="double_row",
                    rows=rows).view(np.uint32)
    batch = nc_matmul_batch(_as(sname, s_bits)[None], _as(mname, m_bits)[None],
                            perf_mode="double_row", rows=rows).view(np.uint32)
    assert np.array_equal(got, batch[0])
    for i in range(3):
        for j in range(5):
            assert got[i, j] == ref_chain(sname, s_bits[:, i], mname, m_bits[:, j],
                                          double_row_order(k, rows)), (i, j)


def test_double_row_order_differs_from_ascending():
    # rows = 2: ascending is ((big - big) + a) + a = 2a; double-row runs k = 0, 2, 1, 3:
    # ((big + a) - big) + a = a, because big + a rounds back to big.
    s = np.array([[2.0**15], [-(2.0**15)], [2.0**-12], [2.0**-12]]).astype(
        ml_dtypes.float8_e5m2)
    m = np.ones((4, 1), ml_dtypes.float8_e5m2)
    ascending = nc_matmul(s, m)
    double = nc_matmul(s, m, perf_mode="double_row", rows=2)
    assert float(ascending[0, 0]) == 2.0**-11 and float(double[0, 0]) == 2.0**-12


# ---------------------------------------------------------------------------------------------
# Errors before anything is built


@pytest.mark.parametrize("stationary,moving,kwargs,error,text", [
    (np.int8, ml_dtypes.bfloat16, {}, TypeError, "int8 pairs only with int8"),
    (ml_dtypes.float8_e4m3, np.int8, {}, TypeError, "int8 pairs only with int8"),
    (np.float64, np.float64, {}, TypeError, "stationary has unsupported type float64"),
    (ml_dtypes.float8_e4m3, np.float16, {"perf_mode": "double_row"}, TypeError,
     "needs both operands float8_e4m3 or float8_e5m2"),
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3, {"perf_mode": "double_row"}, TypeError,
     "needs both operands"),
    (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3, {"perf_mode": "double_row", "rows": 2},
     ValueError, "K must be in 1..4"),
    (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3, {"perf_mode": "quad"}, ValueError,
     "perf_mode must be None or 'double_row'"),
    (np.int8, np.int8, {"ftz": True}, ValueError, "ftz applies to float matmuls only"),
])
def test_bad_pairs_are_rejected(stationary, moving, kwargs, error, text):
    with pytest.raises(error, match=text) as info:
        nc_matmul(np.zeros((5, 2), stationary), np.zeros((5, 3), moving), **kwargs)
    assert "\n" not in str(info.value)


def test_formats_table():
    assert [f.code for f in FORMATS.values()] == list(range(len(FORMATS)))
    for name, (ebits, mbits, bias, has_inf) in FIELDS.items():
        fmt = FORMATS[name]
        assert (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.has_inf) == (ebits, mbits, bias,
                                                                       has_inf)
        assert fmt.dtype == np.dtype(DTYPES[name])
