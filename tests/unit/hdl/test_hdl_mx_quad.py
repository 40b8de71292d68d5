"""Unit tier: one PE's MX datapath (:mod:`systolica.hdl.mx_quad`) in Amaranth's simulator
against the golden model (``golden.mx_pe``) and ml_dtypes, bit for bit.

The MXFP4 -> e4m3fn conversion on every code; the scale stage on special and random FP32
sums, every shift into the subnormal range and a grid of scale pairs with the extremes and
NaN; the whole quad step on random and special x4 words of every element-type pair, MXFP4
included, with random and extreme scales.
"""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from systolica.golden import mx_pe
from systolica.hdl import DType, streams
from systolica.hdl.mx_quad import MxQuad, MxScale, fp4_to_e4m3fn

E4M3FN, E5M2, E2M1 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                      np.dtype(ml_dtypes.float4_e2m1fn))
#: Scales placed on both sides: the extremes (2^-127, 2^127), around 1 (127) and NaN.
SCALES = [0, 1, 2, 40, 100, 126, 127, 128, 150, 200, 252, 253, 254, 255]
#: FP8 codes of each type mixed into the random words: zeros, NaN / Inf, max finite, the
#: smallest subnormal, the largest subnormal, one.
SPECIAL_CODES = {E4M3FN: [0x00, 0x80, 0x7F, 0xFF, 0x7E, 0xFE, 0x01, 0x07, 0x38],
                 E5M2: [0x00, 0x80, 0x7C, 0xFC, 0x7D, 0x7F, 0x7B, 0xFB, 0x01, 0x03, 0x3C]}


def evaluate(dut, inputs, output):
    """``streams.evaluate``'s outputs as a uint32 array."""
    return np.array(streams.evaluate(dut, inputs, output), dtype=np.uint64).astype(np.uint32)


class _Fp4Words(wiring.Component):
    """x4 words of MXFP4 (16 bits, lane j in bits 4 j + 3 .. 4 j) converted lane by lane to
    e4m3fn by :func:`fp4_to_e4m3fn`, then :class:`MxQuad` (each side either converted or
    FP8 as given)."""

    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "a_fp4": In(1), "b_fp4": In(1),
                          "a_type": In(3), "b_type": In(3), "a_scale": In(8), "b_scale": In(8),
                          "product": Out(32), "converted": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.quad = quad = MxQuad()
        for side in ("a", "b"):
            word, fp4 = getattr(self, side), getattr(self, f"{side}_fp4")
            codes = Cat(*(fp4_to_e4m3fn(m, word[4 * j:4 * j + 4], f"{side}{j}")
                          for j in range(4)))
            m.d.comb += getattr(quad, side).eq(Mux(fp4, codes, word))
            m.d.comb += getattr(quad, f"{side}_type").eq(getattr(self, f"{side}_type"))
            m.d.comb += getattr(quad, f"{side}_scale").eq(getattr(self, f"{side}_scale"))
            if side == "a":
                m.d.comb += self.converted.eq(codes)
        m.d.comb += self.product.eq(quad.product)
        return m


def test_fp4_to_e4m3fn_is_exact_on_every_code():
    nibbles = np.arange(16, dtype=np.uint8)
    words = [int(sum(int(n) << (4 * j) for j, n in enumerate(nibbles[i:i + 4])))
             for i in range(0, 16, 4)]
    got = evaluate(_Fp4Words(), [{"a": w, "a_fp4": 1} for w in words], "converted")
    codes = [(int(g) >> (8 * j)) & 0xFF for g in got for j in range(4)]
    want = nibbles.view(E2M1).astype(np.float32).astype(E4M3FN).view(np.uint8)
    assert codes == [int(x) for x in want]
    assert codes[1] == 0x30 and codes[9] == 0xB0 and codes[7] == 0x4C   # 0.5, -0.5, 6


def _scaled(x_bits, sa, sb):
    """x * 2^(sa + sb - 254) rounded once to FP32 (numpy's RNE cast; exact in float64); NaN
    canonical, a 0xFF scale NaN."""
    x = np.array(x_bits, np.uint32).view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        y = (x * np.ldexp(1.0, np.array(sa, np.int64) + np.array(sb, np.int64) - 254)
             ).astype(np.float32)
    y = np.where((np.array(sa) == 255) | (np.array(sb) == 255), np.float32(np.nan), y)
    return np.where(np.isnan(y), np.uint32(0x7FC00000), y.view(np.uint32)).astype(np.uint32)


def test_scale_stage_rounds_once_with_gradual_underflow_and_nan_scales():
    rng = np.random.default_rng(4)
    sums = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
            0x3F800000, 0xBF800000, 0x2F800000, 0x50000000, 0x3FC00000, 0x3F800001, 0x3FFFFFFF]
    sums += list((rng.integers(87, 168, 40).astype(np.uint32) << np.uint32(23))
                 | rng.integers(0, 1 << 24, 40).astype(np.uint32) & np.uint32(0x807FFFFF))
    vectors = [(x, sa, sb) for x in sums for sa in SCALES for sb in SCALES[::3]]
    # Every shift into the subnormal range (1 .. 28) of significands that round up, tie to
    # even both ways and round down: x in [1, 2) with sa + sb = 128 - shift.
    for x in (0x3F800000, 0x3FC00000, 0x3F800001, 0x3FFFFFFF, 0x3FA00000, 0xBFE00000,
              0x3F7FFFFF):
        vectors += [(x, 0, 128 - shift) for shift in range(1, 29)]
    got = evaluate(MxScale(), [{"x": x, "a_scale": a, "b_scale": b} for x, a, b in vectors], "y")
    want = _scaled([v[0] for v in vectors], [v[1] for v in vectors], [v[2] for v in vectors])
    bad = [i for i in range(len(vectors)) if got[i] != want[i]]
    assert not bad, [f"x {vectors[i][0]:08x} scales {vectors[i][1:]}: want {want[i]:08x} "
                     f"got {got[i]:08x}" for i in bad[:5]]
    y = want.view(np.float32)
    assert (y[np.isfinite(y)] != 0).any() and ((want & 0x7F800000) == 0).sum() > 50  # subnormals
    assert (want == 0x00800000).any() and (want == 0x7F800000).any()   # carry to normal, Inf


def _words(rng, dtype, count):
    """``count`` x4 words of ``dtype`` as [count, 4] code arrays, 15 % of the lanes
    special codes (FP4: every code is drawn uniformly)."""
    bits = 4 if dtype == E2M1 else 8
    codes = rng.integers(0, 1 << bits, (count, 4))
    if dtype != E2M1:
        pick = rng.random((count, 4)) < 0.15
        codes[pick] = rng.choice(SPECIAL_CODES[dtype], int(pick.sum()))
    return codes.astype(np.uint8)


@pytest.mark.parametrize("a_dtype,b_dtype", [(E4M3FN, E4M3FN), (E4M3FN, E5M2), (E5M2, E4M3FN),
                                             (E5M2, E5M2), (E2M1, E5M2), (E4M3FN, E2M1),
                                             (E2M1, E2M1)],
                         ids=lambda d: d.name.removeprefix("float"))
def test_quad_step_matches_golden(a_dtype, b_dtype):
    rng = np.random.default_rng([5, a_dtype.num, b_dtype.num])
    count = 160
    a, b = _words(rng, a_dtype, count), _words(rng, b_dtype, count)
    scales = rng.integers(0, 256, (count, 2))
    scales[: len(SCALES)] = np.array([SCALES, SCALES[::-1]]).T
    scales[rng.random(count) < 0.4] = (127, 127)          # most values keep their size
    vectors = []
    for i in range(count):
        vector = {"a_scale": scales[i, 0], "b_scale": scales[i, 1]}
        for side, words, dtype in (("a", a, a_dtype), ("b", b, b_dtype)):
            width = 4 if dtype == E2M1 else 8
            vector[side] = sum(int(c) << (width * j) for j, c in enumerate(words[i]))
            vector[f"{side}_fp4"] = int(dtype == E2M1)
            vector[f"{side}_type"] = (DType.E5M2 if dtype == E5M2 else DType.E4M3FN).value
        vectors.append(vector)
    got = evaluate(_Fp4Words(), vectors, "product")
    want = mx_pe(a.view(a_dtype), b.view(b_dtype), scales[:, 0].astype(np.uint8),
                 scales[:, 1].astype(np.uint8)).view(np.uint32)
    bad = [i for i in range(count) if got[i] != want[i]]
    assert not bad, [f"a {a[i]} b {b[i]} scales {scales[i]}: want {want[i]:08x} got "
                     f"{got[i]:08x}" for i in bad[:5]]
    kinds = {"nan": 0, "inf": 0, "zero": 0, "finite": 0}
    for w in want:
        exponent, fraction = (int(w) >> 23) & 0xFF, int(w) & 0x7FFFFF
        kinds["nan" if exponent == 255 and fraction else "inf" if exponent == 255
              else "zero" if not int(w) & 0x7FFFFFFF else "finite"] += 1
    assert kinds["finite"] > count // 4 and kinds["zero"] and kinds["nan"]
