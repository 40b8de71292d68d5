"""The shared float multiplier: any pair of the tile's float operand types -> FP32.

One datapath for every type: each operand is decoded by its type's fields to a sign, an
exponent and an 11-bit significand (NaN / Inf / zero flags beside), one significand
multiplier sized for the widest type (FP16's 11 bits) forms the exact product, and one
normalise-and-round stage turns it into FP32.
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fp32_add import CANONICAL_NAN, INF_MAGNITUDE, leading_zeros
from .layouts import DType, NarrowDType

#: Floating-point fields of each float operand type: (exponent bits, fraction bits, bias,
#: has Inf). The golden model's ``systolica.golden.formats.FORMATS`` holds the same (a unit
#: test compares them); hdl may not import golden.
FLOAT_FIELDS = {
    DType.BF16: (8, 7, 127, True),
    DType.FP16: (5, 10, 15, True),
    DType.E4M3: (4, 3, 7, True),
    DType.E5M2: (5, 2, 15, True),
    DType.E3M4: (3, 4, 3, True),
    DType.E4M3FN: (4, 3, 7, False),
}
#: Types of the second multiplier of a double-row PE.
DOUBLE_ROW_DTYPES = (DType.E4M3, DType.E5M2)


class FloatMultiplier(wiring.Component):
    """Combinational float x float -> FP32 multiplier for a set of operand types.

    The exact product of two decoded operands has at most ``2 * significand`` bits (22 for
    FP16), so it is exact in FP32 unless it leaves the normal range: then it is rounded to
    nearest, ties to even, with gradual underflow, and overflows to +-Inf. NaN operands
    (by each type's rule: e4m3fn's only NaN is S.1111.111) and 0 x Inf give the canonical
    quiet NaN ``0x7FC00000``; zero results carry the XOR of the operand signs. With ``ftz``
    high an operand subnormal in its own type is read as zero and a subnormal product is
    flushed to zero of its sign (``docs/numerics.md``).

    Parameters
    ----------
    dtypes : tuple of DType
        Float types this multiplier decodes (default: all of them). Operand type codes
        outside the set decode as zero.

    Members
    -------
    a, b : In(16)
        Operands (bit patterns; 8-bit types in bits [7:0]).
    a_type, b_type : In(NarrowDType)
        Each operand's type (the 3-bit codes of the 8/16-bit types).
    ftz : In(1)
        Flush-to-zero mode.
    product : Out(32)
        FP32 product (bit pattern).

    Raises
    ------
    ValueError
        If ``dtypes`` is empty or names a type that is not a float type.
    """

    def __init__(self, dtypes=tuple(FLOAT_FIELDS)):
        dtypes = tuple(dtypes)
        if not dtypes or any(t not in FLOAT_FIELDS for t in dtypes):
            names = ", ".join(t.name for t in FLOAT_FIELDS)
            raise ValueError(f"dtypes must be float DTypes ({names}), not {dtypes!r}")
        self._dtypes = dtypes
        super().__init__({"a": In(16), "a_type": In(NarrowDType), "b": In(16),
                          "b_type": In(NarrowDType),
                          "ftz": In(1), "product": Out(32)})

    @property
    def dtypes(self):
        """Float types this multiplier decodes (tuple of DType, read-only)."""
        return self._dtypes

    def elaborate(self, platform):
        m = Module()
        sig_bits = 1 + max(FLOAT_FIELDS[t][1] for t in self._dtypes)

        def decode(x, kind, prefix):
            """Sign, unbiased exponent (value = sig * 2**(exp - sig_bits + 1)), significand and
            the NaN / Inf / zero flags of operand ``x`` of type ``kind``."""
            nan, inf, zero = (Signal(name=f"{prefix}_{n}") for n in ("nan", "inf", "zero"))
            sign = Signal(name=f"{prefix}_sign")
            sig = Signal(sig_bits, name=f"{prefix}_sig")
            exp = Signal(signed(10), name=f"{prefix}_exp")
            m.d.comb += zero.eq(1)
            with m.Switch(kind):
                for dtype in self._dtypes:
                    ebits, mbits, bias, has_inf = FLOAT_FIELDS[dtype]
                    width = 1 + ebits + mbits
                    e, f = x[mbits:mbits + ebits], x[0:mbits]
                    top = (1 << ebits) - 1
                    with m.Case(dtype):
                        m.d.comb += [
                            sign.eq(x[width - 1]),
                            zero.eq((e == 0) & ((f == 0) | self.ftz)),
                            sig.eq(Cat(C(0, sig_bits - 1 - mbits), f, e != 0)),
                            exp.eq(Mux(e == 0, 1, e) - bias),
                        ]
                        if has_inf:
                            m.d.comb += [nan.eq((e == top) & (f != 0)),
                                         inf.eq((e == top) & (f == 0))]
                        else:
                            m.d.comb += nan.eq((e == top) & (f == (1 << mbits) - 1))
            return sign, exp, sig, nan, inf, zero

        a_sign, a_exp, a_sig, a_nan, a_inf, a_zero = decode(self.a, Value.cast(self.a_type), "a")
        b_sign, b_exp, b_sig, b_nan, b_inf, b_zero = decode(self.b, Value.cast(self.b_type), "b")
        sign = Signal()
        m.d.comb += sign.eq(a_sign ^ b_sign)

        # Exact significand product, normalised to a 24-bit FP32 significand.
        width = 2 * sig_bits
        prod = Signal(width)
        m.d.comb += prod.eq(a_sig * b_sig)
        lz = leading_zeros(m, prod, "lz")
        sig = Signal(24)
        m.d.comb += sig.eq(Cat(C(0, 24 - width), (prod << lz)[0:width]))
        # Biased FP32 exponent of the normalised product: its leading one is at
        # 2**(ea + eb + 1 - lz), with both significands read as 1.f.
        exp = Signal(signed(12))
        m.d.comb += exp.eq(a_exp + b_exp + 128 - lz)

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

        product_specials(m, self.product, sign, magnitude, (a_nan, a_inf, a_zero),
                         (b_nan, b_inf, b_zero))
        return m


def product_specials(m, product, sign, magnitude, a_flags, b_flags):
    """Drive ``product`` (FP32 bits) of a multiplier: the canonical NaN for a NaN operand
    or 0 x Inf, +-Inf for an Inf operand, a zero of the product's ``sign`` for a zero one,
    else ``sign`` and ``magnitude``; ``a_flags``, ``b_flags`` are each operand's (NaN, Inf,
    zero)."""
    (a_nan, a_inf, a_zero), (b_nan, b_inf, b_zero) = a_flags, b_flags
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)):
        m.d.comb += product.eq(CANONICAL_NAN)
    with m.Elif(a_inf | b_inf):
        m.d.comb += product.eq(Cat(C(INF_MAGNITUDE, 31), sign))
    with m.Elif(a_zero | b_zero):
        m.d.comb += product.eq(Cat(C(0, 31), sign))
    with m.Else():
        m.d.comb += product.eq(Cat(magnitude, sign))
