"""BF16 x BF16 multiplier with an FP32 result (exact unless it leaves the normal range)."""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fp32_add import CANONICAL_NAN, INF_MAGNITUDE, leading_zeros


class Bf16Multiplier(wiring.Component):
    """Combinational BF16 x BF16 -> FP32 multiplier.

    The exact product of two BF16 values has at most 16 significant bits, so it is exact in
    FP32 unless it leaves the normal range: then it is rounded to nearest, ties to even,
    with gradual underflow (subnormal FP32 results), and overflows to +-Inf. NaN operands,
    and 0 x Inf, give the canonical quiet NaN ``0x7FC00000``; zero results carry the XOR of
    the operand signs. With ``ftz`` high, subnormal BF16 operands are read as zero and a
    subnormal product is flushed to zero of its sign (``docs/numerics.md``).

    Members
    -------
    a, b : In(16)
        BF16 operands (bit patterns).
    ftz : In(1)
        Flush-to-zero mode.
    product : Out(32)
        FP32 product (bit pattern).
    """

    def __init__(self):
        super().__init__({"a": In(16), "b": In(16), "ftz": In(1), "product": Out(32)})

    def elaborate(self, platform):
        m = Module()

        def classify(x, prefix):
            exp, frac = x[7:15], x[0:7]
            nan, inf, zero = (Signal(name=f"{prefix}_{n}") for n in ("nan", "inf", "zero"))
            m.d.comb += [
                nan.eq((exp == 0xFF) & (frac != 0)),
                inf.eq((exp == 0xFF) & (frac == 0)),
                zero.eq((exp == 0) & ((frac == 0) | self.ftz)),
            ]
            sig = Signal(8, name=f"{prefix}_sig")
            bexp = Signal(8, name=f"{prefix}_exp")
            m.d.comb += [sig.eq(Cat(frac, exp != 0)), bexp.eq(Mux(exp == 0, 1, exp))]
            return nan, inf, zero, sig, bexp

        a_nan, a_inf, a_zero, a_sig, a_exp = classify(self.a, "a")
        b_nan, b_inf, b_zero, b_sig, b_exp = classify(self.b, "b")
        sign = Signal()
        m.d.comb += sign.eq(self.a[15] ^ self.b[15])

        # Exact 16-bit significand product, normalised to a 24-bit FP32 significand.
        prod = Signal(16)
        m.d.comb += prod.eq(a_sig * b_sig)
        lz = leading_zeros(m, prod, "lz")
        sig = Signal(24)
        m.d.comb += sig.eq(Cat(C(0, 8), (prod << lz)[0:16]))
        # Biased FP32 exponent of the normalised product: ea + eb - lz - 126.
        exp = Signal(signed(12))
        a_wide, b_wide = Signal(signed(12)), Signal(signed(12))
        m.d.comb += [a_wide.eq(a_exp), b_wide.eq(b_exp), exp.eq(a_wide + b_wide - lz - 126)]

        # Below the normal range: shift right to exponent 1 and round to nearest even.
        right = Signal(5)
        m.d.comb += right.eq(Mux(exp < -24, 26, 1 - exp))
        wide = Signal(50)
        m.d.comb += wide.eq(Cat(C(0, 26), sig) >> right)
        round_up = Signal()
        m.d.comb += round_up.eq(wide[25] & ((wide[0:25] != 0) | wide[26]))
        tiny = Signal(31)
        m.d.comb += tiny.eq(wide[26:49] + round_up)

        magnitude = Signal(31)
        with m.If(exp >= 255):
            m.d.comb += magnitude.eq(INF_MAGNITUDE)
        with m.Elif(exp >= 1):
            m.d.comb += magnitude.eq(Cat(sig[0:23], exp[0:8]))
        with m.Elif(self.ftz & (tiny[23:31] == 0)):
            m.d.comb += magnitude.eq(0)
        with m.Else():
            m.d.comb += magnitude.eq(tiny)

        with m.If(a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)):
            m.d.comb += self.product.eq(CANONICAL_NAN)
        with m.Elif(a_inf | b_inf):
            m.d.comb += self.product.eq(Cat(C(INF_MAGNITUDE, 31), sign))
        with m.Elif(a_zero | b_zero):
            m.d.comb += self.product.eq(Cat(C(0, 31), sign))
        with m.Else():
            m.d.comb += self.product.eq(Cat(magnitude, sign))
        return m
