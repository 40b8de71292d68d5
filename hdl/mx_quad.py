"""The MX datapath of one PE (NeuronCore-v4's quad-row MXFP8/MXFP4 matmul): four FP8 lane
products of an x4 word pair, their FP32 sum and the block scales.

Declared arithmetic (``docs/numerics.md``, "MX formats (NeuronCore-v4)", choices 1-3; the
golden model is ``systolica.golden.mx_pe``): each lane product is exact in FP32, the four are
added as ``(p0 + p1) + (p2 + p3)`` with the PE's FP32 RNE adder, and the sum is multiplied by
``2^(s_stationary + s_moving - 254)`` with one rounding (an exponent add in the normal range;
RNE with gradual underflow below it, +-Inf above it); a 0xFF scale gives NaN. MXFP4 (e2m1)
elements are converted to e4m3fn before this datapath (:func:`fp4_to_e4m3fn`: the default
mapping, exact). The PE instantiates it on a tile generated with the ``mx`` type set
(``ProcessingElement(mx=True)``).
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_mul import FloatMultiplier
from .fp32_add import CANONICAL_NAN, INF_MAGNITUDE, Fp32Adder, rounded_magnitude
from .layouts import MX_DTYPES, MX_SCALE_BITS, NarrowDType

#: Packed elements of an x4 word, and the bits of an FP8 lane.
MX_LANES, MX_LANE_BITS = 4, 8
#: The E8M0 scale code that means NaN (OCP MX v1.0, E8M0), and twice the E8M0 bias.
SCALE_NAN, SCALE_BIAS2 = 0xFF, 254


def fp4_to_e4m3fn(m, nibble, name="fp4"):
    """Return an 8-bit e4m3fn signal holding the e2m1 value ``nibble`` (4 bits: sign, two
    exponent bits with bias 1, one fraction bit), exactly: 0 and 0.5 (exponent field 0) map to
    0 and 2^-1; 1 .. 6 keep their fraction bit as e4m3fn's top fraction bit with the exponent
    rebiased by 6 (7 - 1). The default MXFP4 -> MXFP8 mapping (every e2m1 value is an e4m3fn
    value; ``docs/numerics.md`` MX choice 1)."""
    out = Signal(8, name=name)
    sign, exponent, fraction = nibble[3], nibble[1:3], nibble[0]
    magnitude = Mux(exponent == 0,
                    Mux(fraction, C(6 << 3, 7), C(0, 7)),
                    Cat(C(0, 2), fraction, exponent + 6))
    m.d.comb += out.eq(Cat(magnitude, sign))
    return out


def fp4_word(m, word, name="fp4"):
    """The x4 word (32 bits) of the e4m3fn values of the four e2m1 elements in ``word``'s
    bits [15:0] (element j in bits 4j+3..4j, as ``golden.pack_x4`` lays MXFP4): what an
    MXFP4 side becomes in front of the array (:func:`fp4_to_e4m3fn` per element)."""
    return Cat(fp4_to_e4m3fn(m, word[4 * j:4 * j + 4], f"{name}_{j}") for j in range(MX_LANES))


class MxScale(wiring.Component):
    """Combinational block-scale stage: ``y = round_RNE(x * 2^(a_scale + b_scale - 254))``.

    ``x`` is an FP32 sum of exact FP8 lane products, so it is zero, normal, Inf or NaN, never
    subnormal (every lane product is a multiple of 2^-32, far above FP32's 2^-126): an
    exponent field of 0 is read as a zero. A normal ``x`` moves its exponent (exact) unless the
    result leaves the normal range: above it +-Inf, below it the 24-bit significand shifts
    right (at most 26 places; further is zero either way) and rounds to nearest, ties to even,
    to a subnormal (a carry reaches the smallest normal). Zero and Inf keep their sign; NaN, or
    a scale of 0xFF, gives the canonical quiet NaN ``0x7FC00000``.

    Members
    -------
    x : In(32)
        FP32 input (bit pattern).
    a_scale, b_scale : In(8)
        E8M0 scales (value 2^(s - 127)).
    y : Out(32)
        FP32 result (bit pattern).
    """

    def __init__(self):
        super().__init__({"x": In(32), "a_scale": In(MX_SCALE_BITS),
                          "b_scale": In(MX_SCALE_BITS), "y": Out(32)})

    def elaborate(self, platform):
        m = Module()
        x = self.x
        sign, exponent, fraction = x[31], x[23:31], x[0:23]
        shift_max = 26
        scale_nan = Signal()
        biased = Signal(signed(11))     # x's biased exponent after the scale: -253 .. 508
        m.d.comb += [
            scale_nan.eq((self.a_scale == SCALE_NAN) | (self.b_scale == SCALE_NAN)),
            biased.eq(exponent + self.a_scale + self.b_scale - SCALE_BIAS2),
        ]
        significand = Cat(fraction, C(1, 1))                    # 24 bits, hidden one set
        shift = Signal(range(shift_max + 1))                    # right shift to a subnormal
        m.d.comb += shift.eq(Mux(biased < 1 - shift_max, shift_max, 1 - biased))
        # 26 zero bits below the significand: no bit is lost by the shift, so the guard bit
        # and the sticky OR come from the shifted value itself.
        shifted = Signal(24 + shift_max)
        m.d.comb += shifted.eq(Cat(C(0, shift_max), significand) >> shift)
        normal = Signal()
        subnormal_sig = shifted[shift_max:]
        guard, sticky = shifted[shift_max - 1], shifted[:shift_max - 1].any()
        round_up = Signal()
        m.d.comb += [
            normal.eq(biased >= 1),
            round_up.eq(~normal & guard & (sticky | subnormal_sig[0])),
        ]
        exp_out = Signal(9)
        m.d.comb += exp_out.eq(Mux(normal, Mux(biased > 255, 255, biased[0:9]), 0))
        magnitude = rounded_magnitude(m, Mux(normal, significand, subnormal_sig), exp_out,
                                      round_up, C(0, 1))
        with m.If(scale_nan | ((exponent == 0xFF) & (fraction != 0))):
            m.d.comb += self.y.eq(CANONICAL_NAN)
        with m.Elif(exponent == 0xFF):
            m.d.comb += self.y.eq(Cat(C(INF_MAGNITUDE, 31), sign))
        with m.Elif(exponent == 0):
            m.d.comb += self.y.eq(Cat(C(0, 31), sign))
        with m.Else():
            m.d.comb += self.y.eq(Cat(magnitude, sign))
        return m


class MxQuad(wiring.Component):
    """Combinational MX step of one PE: four FP8 lane products, their FP32 tree sum and the
    block scales (``systolica.golden.mx_pe``).

    Members
    -------
    a, b : In(32)
        x4 words of the stationary and moving operands: lane j in bits ``8 j + 7 .. 8 j``
        (first element lowest), FP8 codes (MXFP4 converted by :func:`fp4_to_e4m3fn`).
    a_type, b_type : In(NarrowDType)
        Each word's element type, ``E4M3FN`` or ``E5M2`` (another code decodes as zero, as
        the shared multiplier does).
    a_scale, b_scale : In(8)
        The words' E8M0 block scales.
    product : Out(32)
        ``round((p0 + p1) + (p2 + p3)) * 2^(a_scale + b_scale - 254)``, FP32 (bit pattern),
        which the PE adds into its column's chain.
    """

    def __init__(self):
        super().__init__({"a": In(32), "a_type": In(NarrowDType), "b": In(32),
                          "b_type": In(NarrowDType), "a_scale": In(MX_SCALE_BITS),
                          "b_scale": In(MX_SCALE_BITS),
                          "product": Out(32)})

    def elaborate(self, platform):
        m = Module()
        lanes = []
        for j in range(MX_LANES):
            mul = FloatMultiplier(MX_DTYPES)
            m.submodules[f"lane{j}"] = mul
            bits = slice(MX_LANE_BITS * j, MX_LANE_BITS * (j + 1))
            m.d.comb += [mul.a.eq(self.a[bits]), mul.b.eq(self.b[bits]),
                         mul.a_type.eq(self.a_type), mul.b_type.eq(self.b_type),
                         mul.ftz.eq(0)]
            lanes.append(mul.product)
        sums = []
        for name, (left, right) in (("sum01", lanes[0:2]), ("sum23", lanes[2:4])):
            adder = m.submodules[name] = Fp32Adder()
            m.d.comb += [adder.a.eq(left), adder.b.eq(right), adder.ftz.eq(0)]
            sums.append(adder.sum)
        m.submodules.sum = top = Fp32Adder()
        m.d.comb += [top.a.eq(sums[0]), top.b.eq(sums[1]), top.ftz.eq(0)]
        m.submodules.scale = scale = MxScale()
        m.d.comb += [scale.x.eq(top.sum), scale.a_scale.eq(self.a_scale),
                     scale.b_scale.eq(self.b_scale), self.product.eq(scale.y)]
        return m
