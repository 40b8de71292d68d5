"""The processing element (PE) of the weight-stationary array."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import OPERAND_WIDTH, PSUM_WIDTH

#: Port signature of :class:`ProcessingElement` (also the port list of its Verilog module).
PE_SIGNATURE = wiring.Signature({
    "en": In(1),
    "load_en": In(1),
    "load_buf": In(1),
    "load_data": In(signed(OPERAND_WIDTH)),
    "row_active": In(2),
    "moving_in": In(signed(OPERAND_WIDTH)),
    "sel_in": In(1),
    "psum_in": In(signed(PSUM_WIDTH)),
    "moving_out": Out(signed(OPERAND_WIDTH)),
    "sel_out": Out(1),
    "psum_out": Out(signed(PSUM_WIDTH)),
})


class ProcessingElement(wiring.Component):
    """One INT8 x INT8 -> INT32 multiply-accumulate cell with two stationary (weight) registers.

    The PE holds two stationary values, ``weight_0`` and ``weight_1`` (the active and the
    shadow weight): one can be loaded while moving data that selects the other streams
    through. Every moving operand carries the select bit of the stationary buffer it is
    multiplied with, so a stationary switch travels through the array as a wavefront together
    with the data.

    When ``en`` is high the PE registers, on the rising edge::

        psum_out   <- psum_in + weight[sel_in] * moving_in   (if row_active[sel_in])
        psum_out   <- psum_in                                  (otherwise: pass-through)
        moving_out <- moving_in,  sel_out <- sel_in

    The sum wraps modulo 2**32 (two's complement). When ``en`` is low, all registers hold.
    A write into the stationary register ``load_buf`` happens whenever ``load_en`` is high,
    independently of ``en``.

    Members
    -------
    en : In(1)
        Pipeline advance (clock enable of the datapath registers).
    load_en : In(1)
        Write ``load_data`` into stationary register ``load_buf``.
    load_buf : In(1)
        Which stationary register a load writes.
    load_data : In(signed(8))
        Stationary value to load.
    row_active : In(2)
        Bit ``b``: this PE's partition row is inside ``K`` for stationary buffer ``b``.
    moving_in : In(signed(8))
        Moving operand from the left neighbour (or the skew buffer).
    sel_in : In(1)
        Stationary buffer that ``moving_in`` is multiplied with.
    psum_in : In(signed(32))
        Partial sum from the PE above (zero for partition row 0).
    moving_out, sel_out : Out
        Registered ``moving_in`` and ``sel_in``, to the right neighbour.
    psum_out : Out(signed(32))
        Registered partial sum, to the PE below.
    """

    def __init__(self):
        super().__init__(PE_SIGNATURE)

    def elaborate(self, platform):
        m = Module()

        weight_0 = Signal(signed(OPERAND_WIDTH))
        weight_1 = Signal(signed(OPERAND_WIDTH))
        with m.If(self.load_en):
            with m.If(self.load_buf):
                m.d.sync += weight_1.eq(self.load_data)
            with m.Else():
                m.d.sync += weight_0.eq(self.load_data)

        weight = Signal(signed(OPERAND_WIDTH))
        active = Signal()
        product = Signal(signed(2 * OPERAND_WIDTH))
        m.d.comb += [
            weight.eq(Mux(self.sel_in, weight_1, weight_0)),
            active.eq(self.row_active.bit_select(self.sel_in, 1)),
            product.eq(self.moving_in * weight),
        ]

        with m.If(self.en):
            m.d.sync += [
                self.moving_out.eq(self.moving_in),
                self.sel_out.eq(self.sel_in),
                self.psum_out.eq(Mux(active, self.psum_in + product, self.psum_in)),
            ]
        return m
