"""IEEE 754 binary32 adder with round-to-nearest-even (the PE's and PSUM's FP32 adder)."""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

#: Canonical quiet NaN produced for every NaN result.
CANONICAL_NAN = 0x7FC00000
#: Magnitude bits (exponent and fraction) of +Inf.
INF_MAGNITUDE = 0x7F800000


def rounded_magnitude(m, sig, exp, round_up, ftz):
    """Return the 31-bit magnitude (exponent and fraction) of a rounded FP32 result: the
    24-bit significand ``sig`` (its top bit the hidden one; 0 there for a subnormal) and
    biased exponent ``exp`` packed, plus ``round_up`` (so a carry out of the fraction moves
    into the exponent: subnormal -> normal, max finite -> Inf); +Inf from exponent 255 up;
    zero when ``ftz`` and the rounded result is subnormal (flush-to-zero tests the rounded
    value, ``docs/numerics.md``)."""
    packed = Signal(31)
    m.d.comb += packed.eq(Cat(sig[0:23], Mux(sig[23], exp[0:8], 0)) + round_up)
    magnitude = Signal(31)
    with m.If(exp >= 255):
        m.d.comb += magnitude.eq(INF_MAGNITUDE)
    with m.Elif(ftz & (packed[23:31] == 0)):
        m.d.comb += magnitude.eq(0)
    with m.Else():
        m.d.comb += magnitude.eq(packed)
    return magnitude


def leading_zeros(m, value, name):
    """Return a signal counting the leading zeros of ``value`` (``len(value)`` if zero).

    A logarithmic normaliser, not a priority chain: ``value`` is padded on the right with a
    one and zeros to the next power of two above its width, then each of log2 stages tests
    whether the top half of what is left is zero and, if so, shifts it out; the stage results
    are the count's bits. Five 32-bit steps instead of a 27- or 16-deep chain of muxes, which
    is most of the PE's evaluation cost in Verilator (the count is the same function).
    """
    width = len(value)
    span = 1 << width.bit_length()  # > width, so the marker one bounds the count by width
    current = Signal(span, name=f"{name}_in")
    m.d.comb += current.eq(Cat(C(1 << (span - width - 1), span - width), value))
    bits = []
    step = span // 2
    while step:
        zero = Signal(name=f"{name}_z{step}")
        shifted = Signal(span, name=f"{name}_s{step}")
        m.d.comb += [zero.eq(current[span - step:] == 0),
                     shifted.eq(Mux(zero, current << step, current))]
        bits.append(zero)
        current, step = shifted, step // 2
    count = Signal(range(width + 1), name=name)
    m.d.comb += count.eq(Cat(*reversed(bits)))
    return count


class Fp32Adder(wiring.Component):
    """Combinational FP32 adder: ``sum = round_RNE(a + b)``.

    Semantics (``docs/numerics.md``): round-to-nearest-even, gradual underflow (subnormal
    results), overflow to +-Inf; any NaN result is the canonical quiet NaN ``0x7FC00000``;
    Inf - Inf is NaN; an exact zero sum of operands of opposite signs is +0, of two zeros of
    the same sign that zero (IEEE 754-2019 section 6.3). With ``ftz`` high, subnormal operands
    are read as zero of their sign and a subnormal result is flushed to zero of its sign.

    Members
    -------
    a, b : In(32)
        FP32 operands (bit patterns).
    ftz : In(1)
        Flush-to-zero mode.
    sum : Out(32)
        FP32 result (bit pattern).
    """

    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "ftz": In(1), "sum": Out(32)})

    def elaborate(self, platform):
        m = Module()

        def classify(x, prefix):
            exp, frac = x[23:31], x[0:23]
            nan = Signal(name=f"{prefix}_nan")
            inf = Signal(name=f"{prefix}_inf")
            mag = Signal(31, name=f"{prefix}_mag")
            m.d.comb += [
                nan.eq((exp == 0xFF) & (frac != 0)),
                inf.eq((exp == 0xFF) & (frac == 0)),
                mag.eq(Mux(self.ftz & (exp == 0), 0, x[0:31])),
            ]
            return nan, inf, mag

        a_nan, a_inf, a_mag = classify(self.a, "a")
        b_nan, b_inf, b_mag = classify(self.b, "b")

        # Order the operands by magnitude: L(arge) and S(mall).
        swap = Signal()
        m.d.comb += swap.eq(b_mag > a_mag)
        l_sign, s_sign = Signal(), Signal()
        l_mag, s_mag = Signal(31), Signal(31)
        m.d.comb += [
            l_sign.eq(Mux(swap, self.b[31], self.a[31])),
            s_sign.eq(Mux(swap, self.a[31], self.b[31])),
            l_mag.eq(Mux(swap, b_mag, a_mag)),
            s_mag.eq(Mux(swap, a_mag, b_mag)),
        ]
        l_exp = Signal(9)
        s_exp = Signal(9)
        l_sig = Signal(24)
        s_sig = Signal(24)
        m.d.comb += [
            l_exp.eq(Mux(l_mag[23:31] == 0, 1, l_mag[23:31])),
            s_exp.eq(Mux(s_mag[23:31] == 0, 1, s_mag[23:31])),
            l_sig.eq(Cat(l_mag[0:23], l_mag[23:31] != 0)),
            s_sig.eq(Cat(s_mag[0:23], s_mag[23:31] != 0)),
        ]

        # Align S to L with guard, round and sticky bits (27 bits: sig << 3).
        diff = Signal(9)
        shift = Signal(5)
        m.d.comb += [diff.eq(l_exp - s_exp), shift.eq(Mux(diff > 31, 31, diff))]
        wide = Signal(54)
        m.d.comb += wide.eq(Cat(C(0, 30), s_sig) >> shift)
        aligned = Signal(27)
        m.d.comb += aligned.eq(Cat(wide[27] | (wide[0:27] != 0), wide[28:54]))

        subtract = Signal()
        raw = Signal(28)
        m.d.comb += [
            subtract.eq(l_sign ^ s_sign),
            raw.eq(Mux(subtract, Cat(C(0, 3), l_sig) - aligned, Cat(C(0, 3), l_sig) + aligned)),
        ]

        # Normalise: one right shift on carry-out, else left by the leading zeros, but never
        # below exponent 1 (which leaves a subnormal).
        lz = leading_zeros(m, raw[0:27], "lz")
        left = Signal(5)
        m.d.comb += left.eq(Mux(lz > l_exp - 1, l_exp - 1, lz))
        norm = Signal(27)
        exp = Signal(10)
        with m.If(raw[27]):
            m.d.comb += [norm.eq(Cat(raw[1] | raw[0], raw[2:28])), exp.eq(l_exp + 1)]
        with m.Else():
            m.d.comb += [norm.eq((raw[0:27] << left)[0:27]), exp.eq(l_exp - left)]

        # Round to nearest, ties to even, on the packed encoding so that a carry out of the
        # fraction moves into the exponent (subnormal -> normal, max finite -> Inf).
        sig = norm[3:27]
        round_up = Signal()
        m.d.comb += round_up.eq(norm[2] & (norm[1] | norm[0] | sig[0]))
        magnitude = rounded_magnitude(m, sig, exp, round_up, self.ftz)
        sign = Signal()
        m.d.comb += sign.eq(Mux(subtract & (raw == 0), 0, l_sign))

        with m.If(a_nan | b_nan | (a_inf & b_inf & (self.a[31] != self.b[31]))):
            m.d.comb += self.sum.eq(CANONICAL_NAN)
        with m.Elif(a_inf):
            m.d.comb += self.sum.eq(self.a)
        with m.Elif(b_inf):
            m.d.comb += self.sum.eq(self.b)
        with m.Else():
            m.d.comb += self.sum.eq(Cat(magnitude, sign))
        return m
