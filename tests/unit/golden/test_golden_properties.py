"""Property-based tests (hypothesis): the golden models against the independent references.

The BF16/FP32 references are the exact-integer ones of tests/unit/golden/test_golden_bf16.py (no
floating point at all); INT8 uses Python ints wrapped by hand. Operand strategies reach
every float class (zero of both signs, subnormal, normal, max finite, Inf, NaN with any
payload) and every INT8 extreme; shapes run from 1 x 1 x 1 up; accumulate chains go
through PSUM several times. Derandomized, so CI replays the same examples.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_bf16 import ref_add, ref_matmul, ref_mul

from systolica.golden import bf16_product, fp32_add, from_bf16_bits, from_fp32_bits, nc_matmul

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _bits(sign_shift, exp_bits, frac_bits):
    """Strategy of float bit patterns of every class for a format of the given fields."""
    exp_max, frac_max = (1 << exp_bits) - 1, (1 << frac_bits) - 1

    def build(sign, exp, frac):
        return (sign << sign_shift) | (exp << frac_bits) | frac

    sign = st.integers(0, 1)
    fraction = st.integers(0, frac_max)
    return st.one_of(
        st.builds(build, sign, st.just(0), st.just(0)),                           # zero
        st.builds(build, sign, st.just(0), st.integers(1, frac_max)),             # subnormal
        st.builds(build, sign, st.integers(1, exp_max - 1), fraction),            # normal
        st.builds(build, sign, st.just(exp_max - 1), st.just(frac_max)),          # max finite
        st.builds(build, sign, st.just(exp_max), st.just(0)),                     # Inf
        st.builds(build, sign, st.just(exp_max), st.integers(1, frac_max)),       # NaN
        st.builds(build, sign, st.integers(exp_max // 2 - 4, exp_max // 2 + 4), fraction),
    )


BF16 = _bits(15, 8, 7)
FP32 = _bits(31, 8, 23)
INT8 = st.one_of(st.sampled_from([-128, -127, -1, 0, 1, 126, 127]), st.integers(-128, 127))


@SETTINGS
@given(a=BF16, b=BF16, ftz=st.booleans())
def test_product_matches_reference(a, b, ftz):
    got = int(bf16_product(from_bf16_bits(a), from_bf16_bits(b), ftz=ftz).view(np.uint32))
    assert got == ref_mul(a, b, ftz), (hex(a), hex(b), ftz)


@SETTINGS
@given(a=FP32, b=FP32, ftz=st.booleans())
def test_add_matches_reference_and_commutes(a, b, ftz):
    x, y = from_fp32_bits(a), from_fp32_bits(b)
    got = int(fp32_add(x, y, ftz=ftz).view(np.uint32))
    assert got == ref_add(a, b, ftz) == int(fp32_add(y, x, ftz=ftz).view(np.uint32))


@st.composite
def bf16_program(draw):
    """A chain of BF16 matmuls accumulating into one PSUM region."""
    k, m, n = (draw(st.integers(1, 5)) for _ in range(3))
    steps = draw(st.integers(1, 3))
    ftz = draw(st.booleans())
    mats = [(draw(st.lists(st.lists(BF16, min_size=m, max_size=m), min_size=k, max_size=k)),
             draw(st.lists(st.lists(BF16, min_size=n, max_size=n), min_size=k, max_size=k)))
            for _ in range(steps)]
    psum = draw(st.lists(st.lists(FP32, min_size=n, max_size=n), min_size=m, max_size=m))
    first_accumulates = draw(st.booleans())
    return mats, psum, ftz, first_accumulates


@SETTINGS
@given(bf16_program())
def test_bf16_accumulate_chain_matches_reference(program):
    mats, psum, ftz, first_accumulates = program
    golden = from_fp32_bits(np.array(psum, np.uint32))
    reference = psum
    for i, (s, v) in enumerate(mats):
        accumulate = first_accumulates or i > 0
        golden = nc_matmul(from_bf16_bits(np.array(s, np.uint16)),
                           from_bf16_bits(np.array(v, np.uint16)), psum=golden,
                           accumulate=accumulate, ftz=ftz)
        reference = ref_matmul(s, v, reference, accumulate, ftz)
        assert golden.view(np.uint32).tolist() == reference, (i, ftz)


@SETTINGS
@given(data=st.data(), k=st.integers(1, 6), m=st.integers(1, 6), n=st.integers(1, 6),
       steps=st.integers(1, 3))
def test_int8_accumulate_chain_wraps_like_python_ints(data, k, m, n, steps):
    psum = data.draw(st.lists(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n,
                                       max_size=n), min_size=m, max_size=m))
    golden, reference = np.array(psum, np.int32), psum
    for _ in range(steps):
        s = data.draw(st.lists(st.lists(INT8, min_size=m, max_size=m), min_size=k, max_size=k))
        v = data.draw(st.lists(st.lists(INT8, min_size=n, max_size=n), min_size=k, max_size=k))
        golden = nc_matmul(np.array(s, np.int8), np.array(v, np.int8), psum=golden,
                           accumulate=True)
        reference = [[(reference[i][j] + sum(s[x][i] * v[x][j] for x in range(k)) + 2**31)
                      % 2**32 - 2**31 for j in range(n)] for i in range(m)]
        assert golden.tolist() == reference
