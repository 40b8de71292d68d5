"""Unit tier: the FP32 / TF32 multiplier (:class:`systolica.hdl.fp32_mul.Fp32Multiplier`) in
Amaranth's simulator vs the golden model.

Each product holds its operands and steps through its passes (0-3 with an FP32 operand, 0
alone for TF32 x TF32) with ``en`` high; ``product`` is read at the last pass and compared,
bit for bit, with ``nc_matmul`` of a [1, 1] stationary and a [1, N] moving matrix.
"""

import numpy as np
import pytest
from amaranth.lib import wiring

from systolica.golden import TFLOAT32, nc_matmul
from systolica.hdl import DType, streams
from systolica.hdl.fp32_mul import Fp32Multiplier

#: Operand words placed in every position of every type pair.
SPECIALS = [
    0x00000000, 0x80000000,                 # +-0
    0x7F800000, 0xFF800000,                 # +-Inf
    0x7FC00000, 0xFFC00001, 0x7FA00000,     # NaNs with payload in the upper fraction bits
    0x7F800001, 0xFF801FFF,                 # signalling NaNs, payload in the low 13 bits
    0x7F7FFFFF, 0xFF7FFFFF,                 # max finite
    0x00800000, 0x80800000,                 # min normal
    0x00000001, 0x80000001, 0x00002000,     # smallest subnormals (FP32, TF32)
    0x007FFFFF, 0x807FE000,                 # largest subnormals (FP32, TF32)
    0x3F800000, 0x3F000000, 0x3F000001, 0x40000000, 0x3F800001,
    0x207FFFFF, 0x1F800000,                 # their product: just below 2**-126
    0x3F800800, 0x3F801800,                 # their products: round-to-even ties
    0x5F800000, 0x9F800000,                 # +-2**64, -2**-64
]

#: Pairs with a known FP32 x FP32 result, to check that the vectors above hit their case:
#: (a, b, ftz, golden product).
EDGE_PAIRS = [
    (0x207FFFFF, 0x1F800000, True, 0x00800000),    # tie rounding up to 2**-126: kept by FTZ
    (0x207FFFFF, 0x1F800000, False, 0x00800000),
    (0x3F800800, 0x3F800800, False, 0x3F801000),   # tie, rounds down to even
    (0x3F800800, 0x3F801800, False, 0x3F802002),   # tie, rounds up to even
    (0x00000001, 0x3F000000, False, 0x00000000),   # 2**-150: tie, underflows to +0
    (0x80000001, 0x3F000001, False, 0x80000001),   # just above the tie: -2**-149
    (0x7F7FFFFF, 0x3F800001, False, 0x7F800000),   # overflows to +Inf
    (0x7F7FFFFF, 0x3F800000, False, 0x7F7FFFFF),
    (0x00000001, 0x00000001, True, 0x00000000),
    (0x7F800000, 0x00000001, True, 0x7FC00000),    # FTZ: Inf x subnormal is Inf x 0
]

PAIRS = [(DType.FP32, DType.FP32), (DType.TF32, DType.FP32), (DType.FP32, DType.TF32),
         (DType.TF32, DType.TF32)]
NUMPY_TYPES = {DType.FP32: np.float32, DType.TF32: TFLOAT32}


def steps(a_type, b_type):
    """The passes of one product of these operand types."""
    return [0] if (a_type, b_type) == (DType.TF32, DType.TF32) else [0, 1, 2, 3]


def golden(a_type, a, b_type, b, ftz):
    """Golden product bits of the stationary word ``a`` with each moving word of ``b``."""
    stationary = np.array([[a]], np.uint32).view(NUMPY_TYPES[a_type])
    moving = np.array([b], np.uint32).reshape(1, -1).view(NUMPY_TYPES[b_type])
    return [int(x) for x in nc_matmul(stationary, moving, ftz=ftz).view(np.uint32)[0]]


def run(bench):
    dut = Fp32Multiplier()

    async def testbench(ctx):
        await bench(ctx, dut)

    streams.simulate(dut, testbench)


async def multiply(ctx, dut, a_type, a, b_type, b, ftz, passes=None):
    """Hold the operands, step through ``passes`` (default: all of the pair's) with ``en``
    high, and return ``product`` at the last one."""
    passes = steps(a_type, b_type) if passes is None else passes
    for name, value in (("a", a), ("b", b), ("a_type", a_type), ("b_type", b_type),
                        ("ftz", ftz), ("en", 1)):
        ctx.set(getattr(dut, name), value)
    product = None
    for step in passes:
        ctx.set(dut.step, step)
        product = ctx.get(dut.product)
        await ctx.tick()
    return product


def random_words(rng, n):
    """Random words, with exponents biased towards products near 1, near the subnormal
    boundary and subnormal operands."""
    words = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    exponent = (words >> np.uint32(23)) & np.uint32(0xFF)
    kind = rng.integers(0, 4, n)
    exponent = np.where(kind == 1, rng.integers(107, 148, n), exponent)   # near 1.0
    exponent = np.where(kind == 2, rng.integers(40, 90, n), exponent)     # ea + eb near 128
    exponent = np.where(kind == 3, rng.integers(0, 3, n), exponent)       # subnormal / tiny
    return (words & np.uint32(0x807FFFFF)) | (exponent.astype(np.uint32) << np.uint32(23))


def test_signature():
    members = Fp32Multiplier().signature.members
    assert {name: (member.flow, member.shape) for name, member in members.items()} == {
        "en": (wiring.In, 1), "a": (wiring.In, 32), "a_type": (wiring.In, DType),
        "b": (wiring.In, 32), "b_type": (wiring.In, DType), "ftz": (wiring.In, 1),
        "step": (wiring.In, 2), "product": (wiring.Out, 32)}


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("a_type,b_type", PAIRS, ids=lambda t: t.name)
def test_matches_golden(a_type, b_type, ftz):
    rng = np.random.default_rng(PAIRS.index((a_type, b_type)) + 10 * ftz)
    vectors, want = [], []
    for a in SPECIALS:   # every special in both positions, against every other
        vectors += [(a, b) for b in SPECIALS]
        want += golden(a_type, a, b_type, SPECIALS, ftz)
    a_words, b_words = random_words(rng, 400), random_words(rng, 400)
    for a, b in zip(a_words.tolist(), b_words.tolist(), strict=True):
        vectors.append((a, b))
        want += golden(a_type, a, b_type, [b], ftz)
    got = []

    async def bench(ctx, dut):
        for a, b in vectors:
            got.append(await multiply(ctx, dut, a_type, a, b_type, b, ftz))

    run(bench)
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, [f"{vectors[i][0]:08x} x {vectors[i][1]:08x}: want {want[i]:08x} got "
                     f"{got[i]:08x}" for i in bad[:5]]


def test_edge_pairs():
    """The vectors meant to hit the subnormal boundary, ties, underflow and overflow do (by
    the golden model), and the RTL agrees in every type pair."""
    for a, b, ftz, expected in EDGE_PAIRS:
        assert golden(DType.FP32, a, DType.FP32, [b], ftz) == [expected], (hex(a), hex(b))
    got, want = [], []

    async def bench(ctx, dut):
        for a_type, b_type in PAIRS:
            for a, b, ftz, _ in EDGE_PAIRS:
                got.append(await multiply(ctx, dut, a_type, a, b_type, b, ftz))
                want.extend(golden(a_type, a, b_type, [b], ftz))

    run(bench)
    assert [f"{x:08x}" for x in got] == [f"{x:08x}" for x in want]


def test_step0_restarts_the_accumulator():
    """An abandoned product (steps 0, 1 only) and a finished one leave nothing behind: the
    next product starting at step 0 gives its own result."""
    pairs = [(0x3F801800, 0x3F800800), (0x4A9ABCDE, 0x3E123457), (0x00123457, 0x4C7FFFFF)]
    want = [golden(DType.FP32, a, DType.FP32, [b], False)[0] for a, b in pairs]
    got = []

    async def bench(ctx, dut):
        for (a, b), (c, d) in zip(pairs, pairs[1:] + pairs[:1], strict=True):
            await multiply(ctx, dut, DType.FP32, c, DType.FP32, d, False, passes=[0, 1])
            got.append(await multiply(ctx, dut, DType.FP32, a, DType.FP32, b, False))
            got.append(await multiply(ctx, dut, DType.FP32, a, DType.FP32, b, False))

    run(bench)
    assert got == [w for w in want for _ in range(2)]


def test_en_low_holds_the_accumulator():
    a, b = 0x3FABCDEF, 0x40FEDCBB
    want = golden(DType.FP32, a, DType.FP32, [b], False)[0]
    got = []

    async def bench(ctx, dut):
        await multiply(ctx, dut, DType.FP32, a, DType.FP32, b, False, passes=[0, 1])
        ctx.set(dut.en, 0)   # other operands and every step while held: no effect
        ctx.set(dut.a, 0x7F7FFFFF)
        ctx.set(dut.b, 0x3FFFFFFF)
        for step in (0, 3, 1, 2):
            ctx.set(dut.step, step)
            await ctx.tick()
        got.append(await multiply(ctx, dut, DType.FP32, a, DType.FP32, b, False,
                                  passes=[2, 3]))
        ctx.set(dut.en, 0)
        ctx.set(dut.step, 0)
        got.append(ctx.get(dut.product))   # step 0 ignores the accumulator: hi x hi alone

    run(bench)
    assert got[0] == want
    assert got[1] == golden(DType.FP32, a & 0xFFFFF000, DType.FP32, [b & 0xFFFFF000], False)[0]
