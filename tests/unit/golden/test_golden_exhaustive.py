"""Unit tier: exhaustive slices of the golden numerics against the exact-integer references
of tests/unit/golden/test_golden_bf16.py, sized to stay a few seconds: every BF16 value times every
edge value (both modes), and the FP32 add over every pair of exponent fields. (The RTL
against the golden model over all 2^32 multiplier pairs is ``make exhaustive``.)"""

import numpy as np
import pytest
from test_golden_bf16 import ref_add, ref_mul

from systolica.golden import bf16_product, fp32_add, from_bf16_bits, from_fp32_bits

#: Multiplier edge operands: zeros, smallest and largest subnormals, smallest normal, one,
#: the largest finite value, Inf, NaNs, and values whose products straddle both ends.
EDGES = (0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x3F80, 0xBF81, 0x7F7F, 0xFF80, 0x7FC0,
         0xFF81, 0x1F80, 0x5F80, 0x0D80, 0x7100)


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
def test_every_bf16_value_times_every_edge_value(ftz):
    a = np.arange(1 << 16, dtype=np.uint16)
    a_list = a.tolist()
    for b in EDGES:
        got = bf16_product(from_bf16_bits(a), from_bf16_bits(np.full_like(a, b)),
                           ftz=ftz).view(np.uint32).tolist()
        want = [ref_mul(x, b, ftz) for x in a_list]
        bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
        assert not bad, f"b={b:#06x} ftz={ftz}: first a={bad[0]:#06x}"


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
def test_add_over_every_pair_of_exponent_fields(ftz):
    rng = np.random.default_rng(16)
    ea, eb = np.meshgrid(np.arange(256, dtype=np.uint32), np.arange(256, dtype=np.uint32))
    n = ea.size
    for signs in range(4):
        a = (ea.ravel() << 23) | rng.integers(0, 1 << 23, n, dtype=np.uint32)
        b = (eb.ravel() << 23) | rng.integers(0, 1 << 23, n, dtype=np.uint32)
        a |= np.uint32((signs & 1) << 31)
        b |= np.uint32((signs >> 1) << 31)
        got = fp32_add(from_fp32_bits(a), from_fp32_bits(b), ftz=ftz).view(np.uint32).tolist()
        want = [ref_add(x, y, ftz) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
        assert got == want, f"signs={signs} ftz={ftz}"
