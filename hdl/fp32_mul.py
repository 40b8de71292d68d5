"""The FP32 / TF32 multiplier: a 32-bit float x 32-bit float -> FP32 product over passes.

One 12 x 12-bit significand multiplier and a 48-bit accumulator form the exact 48-bit product
of two 24-bit significands as four partial products (one per pass), and one normalise-and-
round stage turns the running sum into FP32 (``docs/numerics.md``, "The tensor-engine
instruction", FP32 and TF32 choices 1-5).
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_mul import product_specials
from .fp32_add import leading_zeros, rounded_magnitude
from .layouts import DType

#: Fraction bits of a TF32 operand that count: the upper 10 of the word's 23 (the lower 13
#: are ignored).
TF32_FRACTION_MASK = 0x7FE000


class Fp32Multiplier(wiring.Component):
    """FP32 / TF32 x FP32 / TF32 -> FP32 multiplier, one 12 x 12-bit partial product a pass.

    Computes the exact product of the two decoded operands rounded once to FP32: round to
    nearest, ties to even, with gradual underflow and overflow to +-Inf. A ``DType.FP32``
    operand is read as its whole word; a ``DType.TF32`` operand as its sign, exponent and
    upper 10 fraction bits, the lower 13 bits of the word ignored (so an FP32 NaN whose
    payload lies only there reads as Inf). NaN operands and 0 x Inf give the canonical quiet
    NaN ``0x7FC00000``; zero results carry the XOR of the operand signs. With ``ftz`` high an
    operand whose exponent field is 0 is read as zero of its sign, and a product whose
    *rounded* result is subnormal is flushed to zero of its sign (so one whose gradual-
    underflow rounding reaches 2^-126 is kept; ``docs/numerics.md``, choice 4).

    Passes. Each operand's 24-bit significand (1.f, or 0.f with the exponent read as 1 for a
    subnormal) is split into ``hi = sig[12:24]`` and ``lo = sig[0:12]``. Step ``s`` multiplies
    (a half, b half): s = 0 (hi, hi) << 24, s = 1 (hi, lo) << 12, s = 2 (lo, hi) << 12,
    s = 3 (lo, lo). A 48-bit accumulator, written on the clock edge while ``en`` is high,
    holds the sum of the partial products so far: step 0 restarts it with its partial
    product, steps 1-3 add theirs. ``product`` is combinational: the rounding of (0 at
    step 0, else the accumulator) + this step's partial product, with sign, exponent and
    specials decoded from the current ``a`` and ``b``, which must stay constant over the
    steps of one product. A product with a ``DType.FP32`` operand takes steps 0, 1, 2, 3
    and is read at step 3; TF32 x TF32 takes step 0 alone (the ``lo`` halves are zero, so
    hi x hi is the exact product) and is read there. Other operand type codes give
    unspecified results (the tile's command check keeps them out).

    Why: four passes of one 12 x 12 multiplier are the four partial products of the split
    significands, summed exactly before the one rounding; this matches AWS's cost model
    (``nc_matmul`` costs 4x for FP32, 1x for TF32) and the "one-zero" hint that FP32 speeds
    up 2x when an operand holds only ones and zeros, without a 24 x 24 multiplier per PE.
    TF32's 11-bit significands fit the ``hi`` halves, so TF32 x TF32 runs at one pass.

    Members
    -------
    en : In(1)
        Accumulator write enable (the accumulator updates on the ``sync`` clock edge).
    a, b : In(32)
        Operands (FP32 or TF32 bit patterns).
    a_type, b_type : In(DType)
        Each operand's type: ``DType.TF32`` or ``DType.FP32``.
    ftz : In(1)
        Flush-to-zero mode.
    step : In(2)
        Pass of the current product, 0 to 3 (0 only for TF32 x TF32).
    product : Out(32)
        FP32 product (bit pattern), meaningful at the product's last step.
    """

    def __init__(self):
        super().__init__({"en": In(1), "a": In(32), "a_type": In(DType), "b": In(32),
                          "b_type": In(DType), "ftz": In(1), "step": In(2),
                          "product": Out(32)})

    def elaborate(self, platform):
        m = Module()

        def decode(x, kind, prefix):
            """Sign, biased exponent (1 for a subnormal), 24-bit significand and the NaN /
            Inf / zero flags of the 32-bit operand ``x`` of type ``kind``."""
            frac = Signal(23, name=f"{prefix}_frac")
            exp = Signal(8, name=f"{prefix}_exp")
            sig = Signal(24, name=f"{prefix}_sig")
            nan, inf, zero = (Signal(name=f"{prefix}_{n}") for n in ("nan", "inf", "zero"))
            e = x[23:31]
            m.d.comb += [
                frac.eq(Mux(kind == DType.TF32, x[0:23] & TF32_FRACTION_MASK, x[0:23])),
                exp.eq(Mux(e == 0, 1, e)),
                sig.eq(Cat(frac, e != 0)),
                nan.eq((e == 0xFF) & (frac != 0)),
                inf.eq((e == 0xFF) & (frac == 0)),
                zero.eq((e == 0) & ((frac == 0) | self.ftz)),
            ]
            return x[31], exp, sig, nan, inf, zero

        a_sign, a_exp, a_sig, a_nan, a_inf, a_zero = decode(self.a, self.a_type, "a")
        b_sign, b_exp, b_sig, b_nan, b_inf, b_zero = decode(self.b, self.b_type, "b")
        sign = Signal()
        m.d.comb += sign.eq(a_sign ^ b_sign)

        # This step's partial product: step[1] picks a's half, step[0] b's (0 = hi, 1 = lo).
        a_half, b_half = Signal(12), Signal(12)
        m.d.comb += [a_half.eq(Mux(self.step[1], a_sig[0:12], a_sig[12:24])),
                     b_half.eq(Mux(self.step[0], b_sig[0:12], b_sig[12:24]))]
        half_product = Signal(24)
        m.d.comb += half_product.eq(a_half * b_half)
        partial = Signal(48)
        with m.Switch(self.step):
            with m.Case(0):
                m.d.comb += partial.eq(half_product << 24)
            with m.Case(1, 2):
                m.d.comb += partial.eq(half_product << 12)
            with m.Default():     # 3 (a Case(3) would leave Yosys an x default, which
                m.d.comb += partial.eq(half_product)    # the equivalence prover refuses)

        # Running sum: restarts at step 0. The full sum a_sig * b_sig < 2**48 never carries out.
        acc = Signal(48)
        total = Signal(48)
        m.d.comb += total.eq(Mux(self.step == 0, 0, acc) + partial)
        with m.If(self.en):
            m.d.sync += acc.eq(total)

        # Normalise: leading one to bit 47. The exact value is total * 2**(ea + eb - 300)
        # (biased exponents, 46 fraction bits), so the leading one's biased FP32 exponent is
        # ea + eb - 126 - lz.
        lz = leading_zeros(m, total, "lz")
        norm = Signal(48)
        m.d.comb += norm.eq(total << lz)
        exp = Signal(signed(12))
        m.d.comb += exp.eq(a_exp + b_exp - 126 - lz)

        # Below the normal range shift right to exponent 1 (26 or more leaves only sticky
        # bits); then round to nearest even on the packed encoding, so that a carry out of
        # the fraction moves into the exponent (subnormal -> 2**-126, max finite -> Inf).
        right = Signal(5)
        m.d.comb += right.eq(Mux(exp >= 1, 0, Mux(exp < -24, 26, 1 - exp)))
        wide = Signal(74)
        m.d.comb += wide.eq(Cat(C(0, 26), norm) >> right)
        sig = wide[50:74]
        round_up = Signal()
        m.d.comb += round_up.eq(wide[49] & ((wide[0:49] != 0) | sig[0]))
        magnitude = rounded_magnitude(m, sig, exp, round_up, self.ftz)
        product_specials(m, self.product, sign, magnitude, (a_nan, a_inf, a_zero),
                         (b_nan, b_inf, b_zero))
        return m
