"""Unit tier: the FP32 adder and the shared float multiplier in Amaranth's simulator vs the
golden model.

Random bit patterns over the whole exponent range (with cancellation-prone pairs and
special values mixed in), IEEE and FTZ modes, compared as bit patterns.
"""

import re

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from systolica.golden import FORMATS, nc_matmul
from systolica.golden.bf16 import bf16_product, fp32_add, fp32_bits, from_bf16_bits, from_fp32_bits
from systolica.hdl import FLOAT_FIELDS, DType, FloatMultiplier, Fp32Adder, streams
from systolica.hdl.fp32_add import leading_zeros

SPECIALS32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
              0x7F800001, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF, 0x00800000,
              0x4B800000, 0x3F800000]


def evaluate(dut, inputs, output):
    """``streams.evaluate``'s outputs as a uint32 array."""
    return np.array(streams.evaluate(dut, inputs, output), dtype=np.uint64).astype(np.uint32)


def random_fp32(rng, n):
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    exponent = rng.integers(0, 256, n).astype(np.uint32)
    exponent = np.where(rng.random(n) < 0.3, rng.integers(0, 4, n).astype(np.uint32), exponent)
    bits = (bits & np.uint32(0x807FFFFF)) | (exponent << np.uint32(23))
    pick = rng.random(n) < 0.1
    bits[pick] = rng.choice(np.array(SPECIALS32, np.uint32), int(pick.sum()))
    return bits


@pytest.mark.parametrize("seed", [1, 2])
def test_fp32_adder_matches_golden(seed):
    rng = np.random.default_rng(seed)
    n = 2500
    a, b = random_fp32(rng, n), random_fp32(rng, n)
    near = rng.random(n) < 0.3   # b close to -a: cancellation, exact zeros, tiny results
    b[near] = (a[near] ^ np.uint32(0x80000000)) + rng.integers(-3, 4, int(near.sum())).astype(
        np.uint32)
    ftz = rng.random(n) < 0.5
    got = evaluate(Fp32Adder(), [{"a": x, "b": y, "ftz": f} for x, y, f in zip(a, b, ftz,
                                                                                strict=True)],
                   "sum")
    want = np.where(ftz, fp32_bits(fp32_add(from_fp32_bits(a), from_fp32_bits(b), ftz=True)),
                    fp32_bits(fp32_add(from_fp32_bits(a), from_fp32_bits(b), ftz=False)))
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [f"{a[i]:08x}+{b[i]:08x} ftz={ftz[i]}: want {want[i]:08x} "
                           f"got {got[i]:08x}" for i in bad[:5]]


@pytest.mark.parametrize("seed", [1, 2])
def test_bf16_multiplier_matches_golden(seed):
    rng = np.random.default_rng(seed)
    n = 2500
    a = rng.integers(0, 2**16, n).astype(np.uint16)
    b = rng.integers(0, 2**16, n).astype(np.uint16)
    small = rng.random(n) < 0.4   # exponents near zero: subnormal inputs and products
    a[small] = (a[small] & 0x807F) | (rng.integers(0, 12, int(small.sum())) << 7).astype(
        np.uint16)
    ftz = rng.random(n) < 0.5
    got = evaluate(FloatMultiplier(), [{"a": x, "b": y, "ftz": f, "a_type": 1, "b_type": 1}
                                       for x, y, f in zip(a, b, ftz, strict=True)], "product")
    fa, fb = from_bf16_bits(a), from_bf16_bits(b)
    want = np.where(ftz, fp32_bits(bf16_product(fa, fb, ftz=True)),
                    fp32_bits(bf16_product(fa, fb, ftz=False)))
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [f"{a[i]:04x}*{b[i]:04x} ftz={ftz[i]}: want {want[i]:08x} "
                           f"got {got[i]:08x}" for i in bad[:5]]


class _LeadingZeros(wiring.Component):
    def __init__(self, width):
        self._width = width
        super().__init__({"value": In(width), "count": Out(range(width + 1))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.count.eq(leading_zeros(m, self.value, "lz"))
        return m


@pytest.mark.parametrize("width", [1, 7, 8, 16, 27])
def test_leading_zeros_counts_from_the_top(width):
    rng = np.random.default_rng(width)
    values = [0, 2**width - 1] + [1 << i for i in range(width)]
    values += [int(v) for v in rng.integers(0, 2**width, 300)]
    values += [int(v) >> int(s) for v, s in zip(rng.integers(0, 2**width, 300),
                                                 rng.integers(0, width, 300), strict=True)]
    got = evaluate(_LeadingZeros(width), [{"value": v} for v in values], "count")
    want = [width - v.bit_length() for v in values]
    assert got.tolist() == want


def test_init():
    assert FloatMultiplier().dtypes == tuple(FLOAT_FIELDS)
    assert FloatMultiplier([DType.E4M3]).dtypes == (DType.E4M3,)


@pytest.mark.parametrize("dtypes,shown", [((), "()"), ([DType.INT8], "(<DType.INT8: 0>,)")])
def test_init_wrong_dtypes(dtypes, shown):
    names = "BF16, FP16, E4M3, E5M2, E3M4, E4M3FN"
    message = f"dtypes must be float DTypes ({names}), not {shown}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        FloatMultiplier(dtypes)


def test_dtype_codes_and_fields_match_the_golden_formats():
    for name, fmt in FORMATS.items():
        dtype = DType[name.upper()]
        assert dtype.value == fmt.code
        if fmt.is_float:
            assert FLOAT_FIELDS[dtype] == (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.has_inf)


def _golden_product_bits(a_name, a_bits, b_name, b_bits, ftz):
    a = np.array([[a_bits]]).astype(f"u{FORMATS[a_name].width // 8}").view(FORMATS[a_name].dtype)
    b = np.array([[b_bits]]).astype(f"u{FORMATS[b_name].width // 8}").view(FORMATS[b_name].dtype)
    return int(nc_matmul(a, b, ftz=ftz).view(np.uint32)[0, 0])


@pytest.mark.parametrize("seed", [1])
def test_float_multiplier_every_type_pair(seed):
    """Random operand bits of every ordered float type pair (the bulk RTL test covers every
    FP8 x FP8 pair exhaustively)."""
    rng = np.random.default_rng(seed)
    names = [name for name, fmt in FORMATS.items() if fmt.is_float]
    vectors, want = [], []
    for a_name in names:
        for b_name in names:
            for _ in range(40):
                a = int(rng.integers(0, 1 << FORMATS[a_name].width))
                b = int(rng.integers(0, 1 << FORMATS[b_name].width))
                ftz = bool(rng.integers(0, 2))
                vectors.append({"a": a, "b": b, "ftz": ftz, "a_type": FORMATS[a_name].code,
                                "b_type": FORMATS[b_name].code})
                want.append(_golden_product_bits(b_name, b, a_name, a, ftz))
    got = evaluate(FloatMultiplier(), vectors, "product")
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, [f"{vectors[i]}: want {want[i]:08x} got {got[i]:08x}" for i in bad[:5]]
