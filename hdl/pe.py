"""The processing element (PE) of the weight-stationary array: INT8 and BF16 datapaths."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bf16_mul import Bf16Multiplier
from .fp32_add import Fp32Adder
from .layouts import OPERAND_WIDTH, PSUM_WIDTH

#: Port signature of :class:`ProcessingElement` (also the port list of its Verilog module).
PE_SIGNATURE = wiring.Signature({
    "en": In(1),
    "load_en": In(1),
    "load_buf": In(1),
    "load_data": In(OPERAND_WIDTH),
    "chain_start": In(1),
    "moving_in": In(OPERAND_WIDTH),
    "sel_in": In(1),
    "active_in": In(1),
    "bf16_in": In(1),
    "ftz_in": In(1),
    "psum_in": In(PSUM_WIDTH),
    "moving_out": Out(OPERAND_WIDTH),
    "sel_out": Out(1),
    "active_out": Out(1),
    "bf16_out": Out(1),
    "ftz_out": Out(1),
    "psum_out": Out(PSUM_WIDTH),
})


class ProcessingElement(wiring.Component):
    """One multiply-accumulate cell with two stationary (weight) registers.

    The PE holds two stationary values, ``weight_0`` and ``weight_1`` (the active and the
    shadow weight): one can be loaded while moving data that selects the other streams
    through. Every moving operand carries its matmul's mode with it: the select bit ``sel``
    of the stationary buffer it is multiplied with, whether its partition row is inside K
    (``active``), the data type (``bf16``) and the FTZ mode (``ftz``). So a stationary
    switch travels through the array as a wavefront with the data, and a buffer can be
    reloaded right behind the last operand that uses it.

    When ``en`` is high the PE registers, on the rising edge (``w = weight[sel_in]``)::

        psum_out   <- product(moving_in, w)                 (active_in, chain_start)
        psum_out   <- psum_in + product(moving_in, w)       (active_in, otherwise)
        psum_out   <- psum_in                                (row inactive: pass-through)
        moving_out, sel_out, active_out, bf16_out, ftz_out <- the same inputs

    INT8 (``bf16_in = 0``): operands are bits [7:0], the product is exact and the sum wraps
    modulo 2**32. BF16: :class:`Bf16Multiplier` then :class:`Fp32Adder` (one RNE rounding per
    add, ``docs/numerics.md``). The chain starts with the first product itself, so partition
    row 0 (``chain_start``) never adds a zero. When ``en`` is low the datapath registers
    hold; a load into stationary register ``load_buf`` happens whenever ``load_en`` is high.

    Parameters
    ----------
    bf16 : bool
        Build the BF16 datapath (default). ``False`` leaves an INT8-only PE with the same
        ports (``bf16`` is then ignored), for area comparisons.

    Members
    -------
    en : In(1)
        Pipeline advance (clock enable of the datapath registers).
    load_en, load_buf, load_data : In(1), In(1), In(16)
        Write ``load_data`` into stationary register ``load_buf``.
    chain_start : In(1)
        This PE is in partition row 0: its sum starts with its own product.
    moving_in, sel_in : In(16), In(1)
        Moving operand from the left neighbour (or the skew buffer) and its buffer select.
    active_in, bf16_in, ftz_in : In(1)
        The operand's partition row is inside K; its matmul is BF16; it flushes subnormals.
    psum_in : In(32)
        Partial sum from the PE above (INT32 or FP32 bits).
    moving_out, sel_out, active_out, bf16_out, ftz_out, psum_out : Out
        Registered operand, its mode bits, and the partial sum.
    """

    def __init__(self, *, bf16=True):
        self._bf16 = bool(bf16)
        super().__init__(PE_SIGNATURE)

    @property
    def has_bf16(self):
        """Whether the BF16 datapath is built (bool, read-only)."""
        return self._bf16

    def elaborate(self, platform):
        m = Module()

        weight_0 = Signal(OPERAND_WIDTH)
        weight_1 = Signal(OPERAND_WIDTH)
        with m.If(self.load_en):
            with m.If(self.load_buf):
                m.d.sync += weight_1.eq(self.load_data)
            with m.Else():
                m.d.sync += weight_0.eq(self.load_data)

        weight = Signal(OPERAND_WIDTH)
        active = Signal()
        bf16 = Signal()
        ftz = Signal()
        m.d.comb += [
            weight.eq(Mux(self.sel_in, weight_1, weight_0)),
            active.eq(self.active_in),
            bf16.eq(self.bf16_in),
            ftz.eq(self.ftz_in),
        ]

        int_product = Signal(signed(PSUM_WIDTH))
        int_sum = Signal(PSUM_WIDTH)
        m.d.comb += [
            int_product.eq(self.moving_in[0:8].as_signed() * weight[0:8].as_signed()),
            int_sum.eq(self.psum_in + int_product.as_unsigned()),
        ]
        product = Signal(PSUM_WIDTH)
        total = Signal(PSUM_WIDTH)
        if self._bf16:
            m.submodules.multiplier = multiplier = Bf16Multiplier()
            m.submodules.adder = adder = Fp32Adder()
            m.d.comb += [
                multiplier.a.eq(self.moving_in),
                multiplier.b.eq(weight),
                multiplier.ftz.eq(ftz),
                adder.a.eq(self.psum_in),
                adder.b.eq(multiplier.product),
                adder.ftz.eq(ftz),
                product.eq(Mux(bf16, multiplier.product, int_product.as_unsigned())),
                total.eq(Mux(bf16, adder.sum, int_sum)),
            ]
        else:
            m.d.comb += [product.eq(int_product.as_unsigned()), total.eq(int_sum)]

        with m.If(self.en):
            m.d.sync += [
                self.moving_out.eq(self.moving_in),
                self.sel_out.eq(self.sel_in),
                self.active_out.eq(self.active_in),
                self.bf16_out.eq(self.bf16_in),
                self.ftz_out.eq(self.ftz_in),
            ]
            with m.If(~active):
                m.d.sync += self.psum_out.eq(self.psum_in)
            with m.Elif(self.chain_start):
                m.d.sync += self.psum_out.eq(product)
            with m.Else():
                m.d.sync += self.psum_out.eq(total)
        return m
