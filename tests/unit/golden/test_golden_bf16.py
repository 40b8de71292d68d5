"""Unit tier: the BF16 golden model against an independent exact-integer reference.

The reference below uses no floating-point arithmetic at all: every finite FP32 value is an
integer multiple of 2**-149 and every BF16 value one of 2**-133, so products and sums are exact
Python ints, and rounding to FP32 (RNE, gradual underflow, overflow to Inf), the NaN/Inf rules,
signed zeros and FTZ are written out by hand. Directed cases assert hand-derived bit patterns;
random cases compare golden and reference as uint32 bit patterns.
"""

import time

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import (
    CANONICAL_NAN,
    bf16_bits,
    bf16_product,
    flush_subnormals,
    fp32_add,
    fp32_bits,
    from_bf16_bits,
    from_fp32_bits,
    nc_matmul,
)
from systolica.golden import bf16 as bf16_module

# ---------------------------------------------------------------------------------------------
# Independent reference: exact scaled integers, bit patterns in and out

POS_INF, NEG_INF = 0x7F800000, 0xFF800000
_FINITE, _INF, _NAN = 0, 1, 2


def _decode32(bits):
    """FP32 bits -> (kind, sign, magnitude in units of 2**-149)."""
    sign, exp, frac = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if exp == 0xFF:
        return (_NAN if frac else _INF), sign, 0
    if exp == 0:
        return _FINITE, sign, frac
    return _FINITE, sign, (frac | 0x800000) << (exp - 1)


def _decode16(bits):
    """BF16 bits -> (kind, sign, magnitude in units of 2**-133)."""
    sign, exp, frac = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0xFF:
        return (_NAN if frac else _INF), sign, 0
    if exp == 0:
        return _FINITE, sign, frac
    return _FINITE, sign, (frac | 0x80) << (exp - 1)


def round_to_fp32(sign, mag, scale):
    """FP32 bits of (-1)**sign * mag * 2**scale, rounded to nearest, ties to even.

    Gradual underflow (quantum 2**-149 below 2**-126), overflow to +-Inf, zero keeps its sign.
    """
    if mag == 0:
        return sign << 31
    top = mag.bit_length() - 1 + scale          # exponent of the leading 1
    quantum = max(top - 23, -149)               # 24 significant bits, or the subnormal grid
    shift = quantum - scale
    if shift <= 0:
        q = mag << -shift
    else:
        q, rem = mag >> shift, mag & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    if q == 1 << 24:                            # rounding carried into the next binade
        q, quantum = 1 << 23, quantum + 1
    if q < 1 << 23:                             # subnormal (quantum is 2**-149)
        return (sign << 31) | q
    biased = quantum + 150
    if biased >= 0xFF:
        return (sign << 31) | 0x7F800000
    return (sign << 31) | (biased << 23) | (q - (1 << 23))


def _ftz16(bits):
    return bits & 0x8000 if bits & 0x7F80 == 0 else bits


def _ftz32(bits):
    return bits & 0x80000000 if bits & 0x7F800000 == 0 else bits


def ref_mul(a, b, ftz):
    """BF16 bits x BF16 bits -> FP32 bits."""
    if ftz:
        a, b = _ftz16(a), _ftz16(b)
    ka, sa, ma = _decode16(a)
    kb, sb, mb = _decode16(b)
    if ka == _NAN or kb == _NAN:
        return CANONICAL_NAN
    sign = sa ^ sb
    if ka == _INF or kb == _INF:
        if (ka == _FINITE and ma == 0) or (kb == _FINITE and mb == 0):
            return CANONICAL_NAN                # 0 x Inf
        return (sign << 31) | 0x7F800000
    result = round_to_fp32(sign, ma * mb, -266)
    return _ftz32(result) if ftz else result


def ref_add(x, y, ftz):
    """FP32 bits + FP32 bits -> FP32 bits."""
    if ftz:
        x, y = _ftz32(x), _ftz32(y)
    kx, sx, mx = _decode32(x)
    ky, sy, my = _decode32(y)
    if kx == _NAN or ky == _NAN:
        return CANONICAL_NAN
    if kx == _INF or ky == _INF:
        if kx == _INF and ky == _INF and sx != sy:
            return CANONICAL_NAN                # Inf - Inf
        return x if kx == _INF else y
    total = (-mx if sx else mx) + (-my if sy else my)
    if total == 0:                              # IEEE 754 6.3: +0 unless both operands are -0
        return (sx << 31) if sx == sy else 0
    result = round_to_fp32(int(total < 0), abs(total), -149)
    return _ftz32(result) if ftz else result


def ref_matmul(stationary, moving, psum, accumulate, ftz):
    """Reference nc_matmul on bit patterns (nested lists of ints); returns [M][N] FP32 bits."""
    k_dim, m_dim, n_dim = len(stationary), len(stationary[0]), len(moving[0])
    out = []
    for i in range(m_dim):
        row = []
        for j in range(n_dim):
            acc = ref_mul(stationary[0][i], moving[0][j], ftz)
            for k in range(1, k_dim):
                acc = ref_add(acc, ref_mul(stationary[k][i], moving[k][j], ftz), ftz)
            if accumulate:
                acc = ref_add(psum[i][j], acc, ftz)
            row.append(acc)
        out.append(row)
    return out


def test_reference_rounding_by_hand():
    # The reference itself, on values whose encodings are known by heart.
    assert round_to_fp32(0, 1, 0) == 0x3F800000
    assert round_to_fp32(1, 3, -1) == 0xBFC00000                       # -1.5
    assert round_to_fp32(0, (1 << 24) + 1, -24) == 0x3F800000          # 1 + 2**-24: tie, down
    assert round_to_fp32(0, (1 << 24) + 3, -24) == 0x3F800002          # tie, up to even
    assert round_to_fp32(0, 1, -150) == 0                              # half min subnormal
    assert round_to_fp32(0, 3, -150) == 2                              # 1.5 ulp: tie, up
    assert round_to_fp32(0, (1 << 24) - 1, 104) == 0x7F7FFFFF          # max finite
    assert round_to_fp32(0, (1 << 25) - 1, 103) == POS_INF             # tie above max finite
    assert round_to_fp32(1, 1, 128) == NEG_INF
    assert round_to_fp32(0, (1 << 23) - 1, -149) == 0x007FFFFF         # max subnormal
    assert round_to_fp32(0, (1 << 24) - 1, -150) == 0x00800000         # rounds up to normal


# ---------------------------------------------------------------------------------------------
# Helpers for directed cases

ONE, TWO, MAX_BF16, MIN_SUB_BF16 = 0x3F80, 0x4000, 0x7F7F, 0x0001


def bf(*patterns):
    return from_bf16_bits(np.array(patterns, np.uint16))


def f32(*patterns):
    return from_fp32_bits(np.array(patterns, np.uint32))


def pow2_bf16(e):
    """BF16 bits of 2**e for a normal e."""
    return (e + 127) << 7


def column(stationary, moving=None, *, psum=None, ftz=False):
    """One [K,1] x [K,1] matmul; moving defaults to ones. Returns the result's FP32 bits."""
    moving = [ONE] * len(stationary) if moving is None else moving
    s = bf(*stationary).reshape(-1, 1)
    m = bf(*moving).reshape(-1, 1)
    kwargs = {"ftz": ftz}
    if psum is not None:
        kwargs.update(psum=f32(psum).reshape(1, 1), accumulate=True)
    got = int(fp32_bits(nc_matmul(s, m, **kwargs))[0, 0])
    ref = ref_matmul([[v] for v in stationary], [[v] for v in moving],
                     [[psum]], psum is not None, ftz)[0][0]
    assert got == ref, f"golden {got:#010x} != reference {ref:#010x}"
    return got


# ---------------------------------------------------------------------------------------------
# Directed cases: each asserts a bit pattern derived by hand


@pytest.mark.parametrize("a,b,expected", [
    (ONE, 0x4040, 0x40400000),                                   # 1 x 3 = 3
    (MAX_BF16, ONE, 0x7F7F0000),                                 # max finite BF16 is exact
    (MAX_BF16, 0xBF80, 0xFF7F0000),
    (MAX_BF16, TWO, POS_INF),                                    # product overflow
    (0xFF7F, TWO, NEG_INF),
    (MAX_BF16, MAX_BF16, POS_INF),
    (pow2_bf16(-100), pow2_bf16(-40), 0x00000200),               # 2**-140: exact subnormal
    (pow2_bf16(-100), pow2_bf16(-60), 0x00000000),               # 2**-160: underflows to +0
    (pow2_bf16(-100) | 0x8000, pow2_bf16(-60), 0x80000000),      # ... to -0
    (pow2_bf16(-75), pow2_bf16(-75), 0x00000000),                # 2**-150: tie, to even 0
    (pow2_bf16(-75) | 0x8000, pow2_bf16(-75), 0x80000000),
    (0x1A40, pow2_bf16(-75), 0x00000001),                        # 1.5*2**-150: up to 2**-149
    (0x1A40, pow2_bf16(-74), 0x00000002),                        # 1.5*2**-149: tie, up to 2
    (0x1A20, pow2_bf16(-73), 0x00000002),                        # 2.5*2**-149: tie, down to 2
    (pow2_bf16(-63), pow2_bf16(-63), 0x00800000),                # exactly min normal
    (pow2_bf16(-63), pow2_bf16(-64), 0x00400000),                # 2**-127
    (MIN_SUB_BF16, ONE, 0x00010000),                             # min subnormal BF16 2**-133
    (MIN_SUB_BF16, pow2_bf16(-16), 0x00000001),                  # 2**-149
    (MIN_SUB_BF16, pow2_bf16(-17), 0x00000000),                  # 2**-150: tie to even 0
    (MIN_SUB_BF16, 0x3740, 0x00000001),                          # 1.5*2**-150
    (MIN_SUB_BF16, MIN_SUB_BF16, 0x00000000),
    (0x007F, pow2_bf16(126), 0x3F7E0000),                        # max subnormal BF16 x 2**126
    (0x8000, 0x4040, 0x80000000),                                # -0 x 3
    (0x8000, 0x8000, 0x00000000),                                # -0 x -0
    (0x0000, 0x7F80, CANONICAL_NAN),                             # 0 x Inf
    (0x8000, 0xFF80, CANONICAL_NAN),                             # -0 x -Inf
    (0x7F80, 0xBF80, NEG_INF),
    (0x7F80, MIN_SUB_BF16, POS_INF),                             # Inf x subnormal (IEEE)
    (0x7FC1, ONE, CANONICAL_NAN),                                # qNaN with payload
    (0xFFC1, ONE, CANONICAL_NAN),                                # negative qNaN
    (0x7F81, ONE, CANONICAL_NAN),                                # sNaN
    (0xFF81, 0x7F80, CANONICAL_NAN),
    (0xFFFF, 0x0000, CANONICAL_NAN),
])
def test_product(a, b, expected):
    got = int(fp32_bits(bf16_product(bf(a), bf(b)))[0])
    assert got == expected, f"{a:#06x} x {b:#06x}: {got:#010x} != {expected:#010x}"
    assert int(fp32_bits(bf16_product(bf(b), bf(a)))[0]) == expected    # commutes
    assert ref_mul(a, b, False) == expected
    assert column([a], [b]) == expected


@pytest.mark.parametrize("a,b,expected", [
    (0x3F800000, 0x33800000, 0x3F800000),      # 1 + 2**-24: tie, to even (down)
    (0x3F800001, 0x33800000, 0x3F800002),      # (1 + 2**-23) + 2**-24: tie, to even (up)
    (0xBF800001, 0xB3800000, 0xBF800002),      # negative tie, up in magnitude
    (0x3F800000, 0xB3800000, 0x3F7FFFFF),      # 1 - 2**-24: exact (24 bits in the binade below)
    (0x3FC00000, 0xBFC00000, 0x00000000),      # x + (-x) = +0
    (0xBFC00000, 0x3FC00000, 0x00000000),
    (0x80000000, 0x80000000, 0x80000000),      # (-0) + (-0) = -0
    (0x00000000, 0x80000000, 0x00000000),      # (+0) + (-0) = +0
    (0x80000000, 0x00000000, 0x00000000),
    (0x80000000, 0x3F800000, 0x3F800000),
    (0x00000001, 0x80000001, 0x00000000),      # subnormal cancellation: +0
    (0x00000001, 0x00000001, 0x00000002),      # subnormal sums are exact
    (0x00800000, 0x80000001, 0x007FFFFF),      # normal - subnormal -> max subnormal
    (0x7F7FFFFF, 0x73000000, POS_INF),         # max finite + half ulp: tie, up to Inf
    (0x7F7FFFFF, 0x72800000, 0x7F7FFFFF),      # + quarter ulp: stays
    (0x7F7FFFFF, 0x7F7FFFFF, POS_INF),
    (0xFF7FFFFF, 0xFF7FFFFF, NEG_INF),
    (POS_INF, NEG_INF, CANONICAL_NAN),         # Inf - Inf
    (NEG_INF, POS_INF, CANONICAL_NAN),
    (POS_INF, 0xFF7FFFFF, POS_INF),
    (NEG_INF, NEG_INF, NEG_INF),
    (0xFFC12345, 0x3F800000, CANONICAL_NAN),   # negative NaN with payload
    (0x7F800001, POS_INF, CANONICAL_NAN),      # sNaN
    (0x7FC00000, 0x7FC00000, CANONICAL_NAN),
])
def test_add(a, b, expected):
    got = int(fp32_bits(fp32_add(f32(a), f32(b)))[0])
    assert got == expected, f"{a:#010x} + {b:#010x}: {got:#010x} != {expected:#010x}"
    assert int(fp32_bits(fp32_add(f32(b), f32(a)))[0]) == expected       # commutes
    assert ref_add(a, b, False) == expected


def test_running_sum_overflows_to_inf():
    assert column([MAX_BF16, MAX_BF16]) == POS_INF
    assert column([0xFF7F, 0xFF7F, MAX_BF16]) == NEG_INF       # and stays Inf
    assert column([MAX_BF16, MAX_BF16, 0xFF7F, 0xFF7F]) == POS_INF  # Inf - finite stays Inf
    # Inf from the running sum, then a product that overflows to -Inf: Inf - Inf.
    assert column([MAX_BF16, MAX_BF16, 0xFF7F], [ONE, ONE, TWO]) == CANONICAL_NAN


def test_k_order_is_ascending():
    e24, e23 = pow2_bf16(-24), pow2_bf16(-23)
    assert column([ONE, e24, e24]) == 0x3F800000               # (1 + e) + e: two ties down
    assert column([e24, e24, ONE]) == 0x3F800001               # (e + e) + 1: exact
    assert column([ONE, e23, e24]) == 0x3F800002               # tie in the chain, up to even


def test_cancellation_gives_positive_zero():
    assert column([0x3FC0, 0xBFC0]) == 0x00000000
    assert column([0xBFC0, 0x3FC0]) == 0x00000000
    assert column([0x3FC0, 0xBFC0], psum=0x80000000) == 0x00000000      # +0 + -0
    assert column([0x4000], psum=0xC0000000) == 0x00000000               # psum -2 + 2


def test_negative_zero_columns_stay_negative():
    assert column([0x8000]) == 0x80000000                      # lone -0 product
    assert column([0x3F80], [0x8000]) == 0x80000000            # +1 x -0
    assert column([0x8000, 0x0000], [0x3F80, 0xBF80]) == 0x80000000  # -0 and -0 products
    assert column([0x8000] * 4, [0x3F80, 0x4000, 0x4040, 0x7F7F]) == 0x80000000
    assert column([0x8000, 0x8000], psum=0x80000000) == 0x80000000   # -0 + -0 into PSUM
    assert column([0x8000, 0x8000], psum=0x00000000) == 0x00000000   # +0 + -0
    assert column([0x8000, 0x0000]) == 0x00000000              # -0 + +0 in the chain


@pytest.mark.parametrize("nan", [0x7FC1, 0xFFC1, 0x7F81, 0xFF81, 0x7FFF, 0xFFC0])
def test_nan_enters_and_stays(nan):
    assert column([nan]) == CANONICAL_NAN
    assert column([ONE, nan, 0x7F80]) == CANONICAL_NAN
    assert column([nan, ONE], psum=0x3F800000) == CANONICAL_NAN
    # NaN in PSUM stays NaN whatever is added.
    psum_nan = (nan & 0x8000) << 16 | 0x7F800000 | (nan & 0x7F) << 16 | 0x1234
    assert column([ONE], psum=psum_nan) == CANONICAL_NAN
    assert column([0x7F80], psum=psum_nan) == CANONICAL_NAN


def test_inf_enters_psum_and_stays():
    assert column([0x7F80], psum=0x3F800000) == POS_INF
    assert column([ONE], psum=NEG_INF) == NEG_INF
    assert column([MAX_BF16, MAX_BF16], psum=0xFF7FFFFF) == POS_INF      # overflow then add
    assert column([0xFF80], psum=POS_INF) == CANONICAL_NAN               # Inf - Inf in PSUM
    assert column([0x0000], [0x7F80], psum=0x3F800000) == CANONICAL_NAN  # 0 x Inf


def test_psum_add_rounds_once_more():
    e24 = pow2_bf16(-24)
    assert column([e24], psum=0x3F800000) == 0x3F800000        # tie down
    assert column([e24], psum=0x3F800001) == 0x3F800002        # tie up
    assert column([0x7300], psum=0x7F7FFFFF) == POS_INF        # max finite + 2**103: Inf
    assert column([0x7280], psum=0x7F7FFFFF) == 0x7F7FFFFF


def test_max_finite_and_min_subnormal_sums():
    assert column([MAX_BF16, 0xFF7F]) == 0x00000000
    assert column([MIN_SUB_BF16, MIN_SUB_BF16]) == 0x00020000             # 2 * 2**-133
    assert column([MIN_SUB_BF16], [pow2_bf16(-16)], psum=0x80000001) == 0x00000000


# --- FTZ: each of input, product, sum and PSUM, and what IEEE mode gives instead


def test_ftz_flushes_subnormal_inputs():
    big = pow2_bf16(100)
    assert column([MIN_SUB_BF16], [big]) == 0x2F000000                    # 2**-33
    assert column([MIN_SUB_BF16], [big], ftz=True) == 0x00000000
    assert column([0x8001], [big], ftz=True) == 0x80000000                # sign kept
    assert column([0x007F], [pow2_bf16(126)]) == 0x3F7E0000
    assert column([0x007F], [pow2_bf16(126)], ftz=True) == 0x00000000
    assert column([0x7F80], [MIN_SUB_BF16], ftz=True) == CANONICAL_NAN   # Inf x (flushed) 0
    assert column([0x0080], [ONE], ftz=True) == 0x00800000                # min normal kept


def test_ftz_flushes_subnormal_products():
    a, b = pow2_bf16(-100), pow2_bf16(-40)
    assert column([a], [b]) == 0x00000200
    assert column([a], [b], ftz=True) == 0x00000000
    assert column([a | 0x8000], [b], ftz=True) == 0x80000000
    assert column([pow2_bf16(-63)], [pow2_bf16(-63)], ftz=True) == 0x00800000  # normal kept
    assert column([a, ONE], [b, ONE], ftz=True) == 0x3F800000


def test_ftz_flushes_subnormal_sums():
    p15, m1, p1 = 0x2040, 0xA000, 0x2000       # 1.5 * 2**-63, -(2**-63), 2**-63
    # 1.5 * 2**-126 - 2**-126 = 2**-127: subnormal sum of two normal products.
    assert column([p15, m1], [p1, p1]) == 0x00400000
    assert column([p15, m1], [p1, p1], ftz=True) == 0x00000000
    assert column([p15 | 0x8000, p1], [p1, p1]) == 0x80400000
    assert column([p15 | 0x8000, p1], [p1, p1], ftz=True) == 0x80000000
    # The flushed sum continues the chain as zero.
    assert column([p15, m1, p1], [p1, p1, p1], ftz=True) == 0x00800000
    assert column([p15, m1, p1], [p1, p1, p1]) == 0x00C00000


def test_ftz_flushes_stored_psum():
    acc = 0x2080                                # 2**-62 x 2**-63 = 2**-125
    assert column([acc], [0x2000], psum=0x807FFFFF) == 0x00800001
    assert column([acc], [0x2000], psum=0x807FFFFF, ftz=True) == 0x01000000
    assert column([0x8000], psum=0x80000005) == 0x80000005
    assert column([0x8000], psum=0x80000005, ftz=True) == 0x80000000    # -0 + -0
    assert column([0x8000], psum=0x00000005, ftz=True) == 0x00000000    # +0 + -0
    # The PSUM add's own subnormal result is flushed too.
    assert column([pow2_bf16(-63)], [pow2_bf16(-63)], psum=0x80C00000) == 0x80400000
    assert column([pow2_bf16(-63)], [pow2_bf16(-63)], psum=0x80C00000, ftz=True) == 0x80000000


def test_overwrite_never_reads_psum():
    s, m = bf(ONE, TWO).reshape(2, 1), bf(TWO, ONE).reshape(2, 1)
    for psum in (f32(0x7FC00000), f32(0xFF800000), f32(0x00000001)):
        for ftz in (False, True):
            got = nc_matmul(s, m, psum=psum.reshape(1, 1), accumulate=False, ftz=ftz)
            assert fp32_bits(got)[0, 0] == 0x40800000                        # 1*2 + 2*1


def test_matmul_indexing_and_dtype():
    s = bf(0x3F80, 0x4000, 0x4040, 0x4080).reshape(2, 2)    # [[1, 2], [3, 4]]: K=2, M=2
    m = bf(0x40A0, 0x3F80, 0x40C0, 0x0000).reshape(2, 2)    # [[5, 1], [6, 0]]: K=2, N=2
    got = nc_matmul(s, m)
    assert got.dtype == np.float32 and got.shape == (2, 2)
    # [m, n] = sum_k s[k, m] * moving[k, n]: [[1*5+3*6, 1*1+3*0], [2*5+4*6, 2*1+4*0]]
    np.testing.assert_array_equal(fp32_bits(got),
                                  [[0x41B80000, 0x3F800000], [0x42080000, 0x40000000]])


# --- Helpers


def test_bit_helpers_round_trip_exactly():
    patterns16 = np.array([0, 0x8000, 0x7FC1, 0xFF81, 0x7F80, 0x0001, 0x3F80], np.uint16)
    x = from_bf16_bits(patterns16)
    assert x.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bf16_bits(x), patterns16)                # payloads kept
    patterns32 = np.array([0, 0x80000000, 0x7FC12345, 0xFF800001, 1, 0x7F7FFFFF], np.uint32)
    y = from_fp32_bits(patterns32)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(fp32_bits(y), patterns32)
    assert from_fp32_bits([0x3F800000])[0] == 1.0                          # plain ints work
    assert from_bf16_bits(0x4000) == 2.0


def test_flush_subnormals():
    x = f32(0x00000001, 0x807FFFFF, 0x00800000, 0x80000000, 0x7FC12345, 0x3F800000)
    np.testing.assert_array_equal(
        fp32_bits(flush_subnormals(x)),
        [0, 0x80000000, 0x00800000, 0x80000000, 0x7FC12345, 0x3F800000])
    y = bf(0x0001, 0x807F, 0x0080, 0xFF81)
    out = flush_subnormals(y)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bf16_bits(out), [0, 0x8000, 0x0080, 0xFF81])


def test_helpers_broadcast_and_ftz():
    a = bf(ONE, TWO).reshape(2, 1)
    b = bf(0x4040, 0x8001, 0x4080)
    assert bf16_product(a, b).shape == (2, 3)
    assert fp32_bits(bf16_product(a, b, ftz=True))[1, 1] == 0x80000000
    assert fp32_bits(bf16_product(a, b))[1, 1] == 0x80020000     # 2 * -2**-133
    # FTZ reads the subnormal operand as -0: 2**-126 + -0.
    assert fp32_bits(fp32_add(f32(0x00800000), f32(0x80000001), ftz=True))[0] == 0x00800000
    assert fp32_bits(fp32_add(f32(0x00800000), f32(0x80000001)))[0] == 0x007FFFFF


# --- Errors


@pytest.mark.parametrize("call,error,text", [
    (lambda: nc_matmul(bf(ONE).reshape(1, 1), np.ones((1, 1), np.int8)), TypeError,
     "int8 pairs only with int8; got stationary bfloat16 and moving int8"),
    (lambda: nc_matmul(np.ones((1, 1), np.int8), bf(ONE).reshape(1, 1)), TypeError,
     "int8 pairs only with int8"),
    (lambda: nc_matmul(np.ones((1, 1), np.float64), np.ones((1, 1), np.float64)), TypeError,
     "stationary has unsupported type float64; the tensor engine takes int8"),
    (lambda: nc_matmul(np.ones((1, 1), np.int8), np.ones((1, 1), np.int8), ftz=True),
     ValueError, "ftz applies to float matmuls only"),
    (lambda: nc_matmul(bf(ONE).reshape(1, 1), bf(ONE).reshape(1, 1), ftz=1), TypeError,
     "ftz must be a bool"),
    (lambda: nc_matmul(bf(ONE).reshape(1, 1), bf(ONE).reshape(1, 1),
                       psum=np.zeros((1, 1), np.int32), accumulate=True), TypeError,
     "psum must have dtype float32"),
    (lambda: nc_matmul(bf(ONE).reshape(1, 1), bf(ONE).reshape(1, 1), accumulate=True),
     ValueError, "needs psum.*float32"),
    (lambda: nc_matmul(bf(ONE).reshape(1, 1), bf(ONE).reshape(1, 1),
                       psum=np.zeros((2, 1), np.float32)), ValueError, "psum must have shape"),
    (lambda: nc_matmul(bf().reshape(0, 1), bf().reshape(0, 1)), ValueError, "K >= 1"),
    (lambda: nc_matmul(bf(ONE, ONE).reshape(2, 1), bf(ONE).reshape(1, 1)), ValueError,
     "must share K"),
    (lambda: bf16_product(np.float32(1), bf(ONE)), TypeError, "a must be a bfloat16"),
    (lambda: bf16_product(bf(ONE), bf(ONE), ftz="yes"), TypeError, "ftz must be a bool"),
    (lambda: bf16_product(bf(ONE, ONE), bf(ONE, ONE, ONE)), ValueError, "broadcast"),
    (lambda: fp32_add(f32(0), 1.0), TypeError, "b must be a float32"),
    (lambda: flush_subnormals(np.ones(2)), TypeError, "float32 or bfloat16.*not float64"),
    (lambda: bf16_bits(np.ones(2, np.float32)), TypeError, "bfloat16"),
    (lambda: fp32_bits(bf(ONE)), TypeError, "float32"),
    (lambda: from_bf16_bits([0x10000]), ValueError, r"0\.\.0xffff"),
    (lambda: from_fp32_bits([-1]), ValueError, "bit patterns"),
    (lambda: from_fp32_bits([1.0]), TypeError, "integer bit patterns"),
])
def test_bad_input_is_rejected(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_ftz_daz_cpu_mode_is_detected(monkeypatch):
    assert bf16_module._environment_problem() is None        # this machine is IEEE
    monkeypatch.setattr(bf16_module, "_environment_problem",
                        lambda: "subnormal float32 results are flushed to zero (FTZ mode is on)")
    s = bf(ONE).reshape(1, 1)
    for call in (lambda: nc_matmul(s, s), lambda: bf16_product(s, s),
                 lambda: fp32_add(f32(0), f32(0))):
        with pytest.raises(RuntimeError, match="FTZ mode is on"):
            call()
    np.testing.assert_array_equal(nc_matmul(np.ones((1, 1), np.int8),
                                            np.ones((1, 1), np.int8)), [[1]])  # INT8 unaffected


# ---------------------------------------------------------------------------------------------
# Random small cases: golden vs reference, bit for bit

SPECIAL_BF16 = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7FC1, 0xFF81, 0x7F81,
                         0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x3F80,
                         0xBF80], np.uint16)
SPECIAL_FP32 = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                         0x7F800001, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x007FFFFF,
                         0x00800000, 0x3F800000], np.uint32)
MAX_DIM = 4
BATCH = 1600                    # cases per (K, M, N): 64 shapes x 1600 = 102,400 matmuls a mode


def _random_batch(rng, shape):
    """bf16/fp32 bit patterns for BATCH cases of one shape, each case with its own regime.

    Per case: a target product exponent (subnormal range, the normal/subnormal boundary, 1.0,
    the overflow boundary, or anywhere), an exponent spread (0 gives many exact ties and
    cancellations; 127 covers everything), a mantissa mask (few bits: more exact
    cancellation), a rate of special values, and whether row 1 cancels row 0 exactly.
    """
    k, m, n = shape
    b = BATCH
    target = rng.choice([-140, -126, 0, 127, 200], b) + rng.integers(-6, 7, b)
    spread = rng.choice([0, 1, 3, 8, 127], b)
    split = rng.integers(-60, 61, b)
    centre_s = np.clip(127 + target // 2 + split, 0, 254)
    centre_m = np.clip(254 + target - centre_s, 0, 254)
    fmask = rng.choice([0x7F, 0x7F, 0x70, 0x40], b)
    special_rate = rng.choice([0.0, 0.03, 0.2], b)

    def bf16_values(centre, dims):
        cshape = (b,) + (1,) * len(dims)
        size = (b,) + dims
        exp = centre.reshape(cshape) + rng.integers(-128, 129, size) % (
            2 * spread.reshape(cshape) + 1) - spread.reshape(cshape)
        bits = (rng.integers(0, 2, size) << 15 | np.clip(exp, 0, 254) << 7
                | rng.integers(0, 128, size) & fmask.reshape(cshape))
        special = rng.random(size) < special_rate.reshape(cshape)
        bits = np.where(special, rng.choice(SPECIAL_BF16, size), bits)
        return bits.astype(np.uint16)

    s = bf16_values(centre_s, (k, m))
    mv = bf16_values(centre_m, (k, n))
    if k >= 2:
        mirror = rng.random(b) < 0.25
        s[mirror, 1] = s[mirror, 0] ^ 0x8000
        mv[mirror, 1] = mv[mirror, 0]
    pexp = np.clip(127 + target + rng.integers(-3, 4, b), 0, 254).reshape(b, 1, 1)
    psum = (rng.integers(0, 2, (b, m, n)) << 31 | pexp << 23
            | rng.integers(0, 1 << 23, (b, m, n)))
    psum = np.where(rng.random((b, m, n)) < 0.1, rng.choice(SPECIAL_FP32, (b, m, n)), psum)
    accumulate = rng.random(b) < 0.5
    return s, mv, psum.astype(np.uint32), accumulate


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
def test_random_small_cases_match_reference(ftz, seed):
    rng = np.random.default_rng([seed, int(ftz)])
    cases = elements = 0
    seen = set()
    start = time.perf_counter()
    for k in range(1, MAX_DIM + 1):
        for m in range(1, MAX_DIM + 1):
            for n in range(1, MAX_DIM + 1):
                s_all, mv_all, psum_all, acc_all = _random_batch(rng, (k, m, n))
                s_vals = from_bf16_bits(s_all)
                mv_vals = from_bf16_bits(mv_all)
                psum_vals = from_fp32_bits(psum_all)
                s_list, mv_list, psum_list = s_all.tolist(), mv_all.tolist(), psum_all.tolist()
                for c in range(BATCH):
                    accumulate = bool(acc_all[c])
                    got = fp32_bits(nc_matmul(s_vals[c], mv_vals[c], psum=psum_vals[c],
                                              accumulate=accumulate, ftz=ftz)).tolist()
                    want = ref_matmul(s_list[c], mv_list[c], psum_list[c], accumulate, ftz)
                    if got != want:
                        pytest.fail(
                            f"case K={k} M={m} N={n} #{c} ftz={ftz} accumulate={accumulate}\n"
                            f"stationary {[[hex(v) for v in r] for r in s_list[c]]}\n"
                            f"moving {[[hex(v) for v in r] for r in mv_list[c]]}\n"
                            f"psum {[[hex(v) for v in r] for r in psum_list[c]]}\n"
                            f"golden {[[hex(v) for v in r] for r in got]}\n"
                            f"reference {[[hex(v) for v in r] for r in want]}")
                    cases += 1
                    elements += m * n
                    for row in want:
                        seen.update(_classify(v) for v in row)
    elapsed = time.perf_counter() - start
    print(f"{cases} matmuls, {elements} results, {elapsed:.1f} s")
    assert cases >= 100_000 and elements >= 100_000
    # The stimulus reaches every class of result, so the comparison covers every rule; FTZ
    # mode never produces a subnormal.
    classes = {"nan", "inf", "zero", "-zero", "normal", "max"}
    assert seen == (classes if ftz else classes | {"subnormal"}), seen


def _classify(bits):
    if bits == CANONICAL_NAN:
        return "nan"
    if bits & 0x7FFFFFFF == 0x7F800000:
        return "inf"
    if bits & 0x7FFFFFFF == 0x7F7FFFFF:
        return "max"
    if bits == 0:
        return "zero"
    if bits == 0x80000000:
        return "-zero"
    return "subnormal" if bits & 0x7F800000 == 0 else "normal"
