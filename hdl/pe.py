"""The processing element (PE) of the weight-stationary array: INT8 and float datapaths."""

from amaranth.hdl import Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_mul import DOUBLE_ROW_DTYPES, FLOAT_FIELDS, FloatMultiplier
from .fp32_add import Fp32Adder
from .fp32_mul import Fp32Multiplier
from .layouts import (
    FP32_PASSES,
    NARROW_DTYPES,
    OPERAND_WIDTH,
    PSUM_WIDTH,
    WIDE_WIDTH,
    DType,
    four_passes,
    is_wide,
    lane_dtype,
)
from .mx_quad import MX_SCALE_BITS, MxQuad

#: The mode bits that travel with a moving operand from PE to PE (``<name>_in`` ->
#: ``<name>_out``), in the order of the array's operand lane layout (16-bit lanes).
TRAVELLING = ("sel", "active", "hi", "stype", "mtype", "ftz", "transpose", "first",
              "cskip")
_SHAPES = {"sel": 1, "active": 1, "hi": 1, "ftz": 1, "transpose": 1, "first": 1, "step": 2,
           "mx": 1, "scale": MX_SCALE_BITS}
#: The mode bits an MX PE adds to :data:`TRAVELLING`: the operand is an x4 word (``mx``) and
#: its E8M0 block scale (``scale``).
MX_TRAVELLING = ("mx", "scale")


def travelling(width=OPERAND_WIDTH, mx=False):
    """The mode bits that travel with a moving operand of a ``width``-bit lane (tuple of str):
    :data:`TRAVELLING`, ``step`` with 32-bit lanes (which pass of its moving column), and
    :data:`MX_TRAVELLING` with ``mx``."""
    return (TRAVELLING + (("step",) if width == WIDE_WIDTH else ())
            + (MX_TRAVELLING if mx else ()))


def pe_signature(width=OPERAND_WIDTH, mx=False, col_cells=1):
    """Port signature of a :class:`ProcessingElement` with ``width``-bit operand lanes, the
    MX datapath's ports with ``mx``, and a ``col_cells``-bit column-cell mask (also the
    port list of its Verilog module; wiring.Signature)."""
    bits = travelling(width, mx)
    shapes = {**_SHAPES, "stype": lane_dtype(width), "mtype": lane_dtype(width),
              "cskip": col_cells}
    return wiring.Signature({
        "en": In(1), "load_en": In(1), "load_buf": In(1), "load_data": In(width),
        **({"load_scale": In(MX_SCALE_BITS)} if mx else {}),
        "chain_start": In(1), "moving_in": In(width),
        **{f"{name}_in": In(shapes[name]) for name in bits},
        "psum_in": In(PSUM_WIDTH), "moving_out": Out(width),
        **{f"{name}_out": Out(shapes[name]) for name in bits},
        "psum_out": Out(PSUM_WIDTH), "psum_next": Out(PSUM_WIDTH),
    })


#: Port signature of a :class:`ProcessingElement` with 16-bit lanes.
PE_SIGNATURE = pe_signature()


class ProcessingElement(wiring.Component):
    """One multiply-accumulate cell with two stationary (weight) registers.

    The PE holds two stationary values, ``weight_0`` and ``weight_1`` (the active and the
    shadow weight): one can be loaded while moving data that selects the other streams
    through. Every moving operand carries its matmul's mode with it: the select bit ``sel``
    of the stationary buffer it is multiplied with, whether its partition row is inside K
    (``active``) and, in FP8 double-row mode, whether its second element (k = row + rows) is
    (``hi``), the stationary's and its own data type (``stype``, ``mtype``) and the FTZ mode
    (``ftz``). So a stationary switch travels through the array as a wavefront with the data,
    and a buffer can be reloaded right behind the last operand that uses it; and the same
    PE runs every type back to back.

    When ``en`` is high the PE registers, on the rising edge (``w = weight[sel_in]``,
    ``p0`` the product of bits [7:0] or [15:0] by type, ``p1`` of bits [15:8])::

        s          = p0 if chain_start or first_in else psum_in + p0
        psum_out   <- s + p1 if hi_in else s                 (active_in)
        psum_out   <- w, zero-extended                       (active_in and transpose_in)
        psum_out   <- psum_in          (row inactive, or column outside the tile: pass-through)
        psum_out   <- psum_in                  (wide: an FP32 product's steps 0-2, see below)
        moving_out and the mode bits <- the same inputs

    INT8 (``stype_in = INT8``): operands are bits [7:0], the product is exact and the sum
    wraps modulo 2**32. Float types: one shared :class:`FloatMultiplier` then
    :class:`Fp32Adder` (one RNE rounding per add, ``docs/numerics.md``); in double-row mode
    a second, FP8-only (e4m3 / e5m2) multiplier and a second adder add ``p1`` after ``p0``.
    The chain starts with the first product itself, so partition row 0 (``chain_start``)
    never adds a zero; ``first_in`` does the same for the first partition row of a row tile
    (the issue logic sets it on the tile's first row lane), whose ``psum_in`` is whatever
    the rows above pass down. In transpose mode (``transpose_in``) nothing is multiplied or added:
    the one active row of a column (the issue logic activates the row its moving column
    selects) puts its stationary bits on the chain, and every other row passes them down, so
    NaN payloads, Inf, -0 and subnormals arrive unchanged. TF32 / FP32 (``wide``): ``p0``
    is the :class:`~.fp32_mul.Fp32Multiplier`'s product, formed over the passes of one
    moving column and complete on its last. MX (``mx``, an operand with ``mx_in``): ``p0``
    is :class:`~.mx_quad.MxQuad`'s step on the x4 words ``w`` and ``moving_in`` (FP8 lanes
    of type ``stype_in`` / ``mtype_in``: ``E4M3FN`` or ``E5M2``) with the stationary's and
    the operand's E8M0 scales, added into the chain by the same FP32 adder without FTZ
    (``docs/numerics.md``, MX choices 1-4). When ``en`` is low the datapath
    registers hold; a load into stationary register ``load_buf`` happens whenever
    ``load_en`` is high.

    Parameters
    ----------
    float_dtypes : tuple of DType
        Float types the multiplier decodes (default: every one). ``()`` leaves an INT8-only
        PE with the same ports (the types are then ignored), ``(DType.BF16,)`` the BF16 +
        INT8 PE of earlier versions: both for area comparisons.
    double_row : bool
        Build the FP8 double-row datapath (default; needs e4m3 and e5m2 among
        ``float_dtypes``). ``False`` ignores ``hi_in``.
    int8 : bool
        Build the INT8 datapath (default). ``False`` leaves a float-only PE (an INT8
        operand then goes through the float datapath: the tile's command check keeps such
        matmuls out, :class:`~.command_queue.CommandQueue`).
    wide : bool
        Build the TF32 / FP32 datapath (default ``False``): 32-bit operand lanes and
        stationary registers, the ``step`` mode bits, and a :class:`~.fp32_mul.Fp32Multiplier`
        whose product of a matmul with an FP32 operand is complete at step 3 (four passes of
        the same moving column; steps 0-2 pass ``psum_in`` down unchanged), of TF32 x TF32
        at step 0. The 8/16-bit types then use bits [15:0] of each lane.
    col_cells : int
        Bits of ``cskip`` (default 1): the tile's column cells (:func:`~.layouts.cell_grid`).
    mx : bool
        Build the MX datapath (default ``False``; NeuronCore-v4's quad-row MXFP8 step, four
        FP8 products per PE per cycle): 32-bit operand lanes and stationary registers (one
        x4 word), an E8M0 scale register beside each stationary register, the ``mx`` and
        ``scale`` mode bits, and an :class:`~.mx_quad.MxQuad`. MXFP4 arrives as e4m3fn
        (the conversion sits in front of the array).

    Members
    -------
    en : In(1)
        Pipeline advance (clock enable of the datapath registers).
    load_en, load_buf, load_data : In(1), In(1), In(16) (In(32) with ``wide`` or ``mx``)
        Write ``load_data`` into stationary register ``load_buf``.
    load_scale : In(8)
        With ``mx`` only: the E8M0 scale written beside ``load_data``.
    chain_start : In(1)
        This PE is in partition row 0: its sum starts with its own product.
    moving_in, sel_in : In(16) (In(32) with ``wide`` or ``mx``), In(1)
        Moving operand from the left neighbour (or the skew buffer) and its buffer select.
    active_in, hi_in : In(1)
        The operand's partition row is inside K; its second (double-row) element is.
    stype_in, mtype_in : In(NarrowDType), or In(DType) with ``wide``
        Data types of the stationary and of the moving operand.
    ftz_in : In(1)
        The matmul flushes subnormals.
    first_in : In(1)
        The operand's partition row is its row tile's first: the sum starts with the product
        (as ``chain_start``).
    cskip_in : In(col_cells)
        The column cells outside the operand's matmul's tile, this PE's cell first (bit 0):
        the array shifts the mask down one bit where a column cell starts, so a PE outside
        its operand's column tile passes the chain down (a row carries one matmul; those
        columns are another matmul's, or nobody's).
    transpose_in : In(1)
        Transpose mode: an active row outputs ``w`` (bits unchanged, upper 16 bits zero;
        a PE without 16-bit types passes bits [7:0], the loader's zeroes above them; with
        ``wide`` all 32 bits, the loader zeroing those above an 8/16-bit type's).
    psum_in : In(32)
        Partial sum from the PE above (INT32 or FP32 bits).
    moving_out, sel_out, active_out, hi_out, stype_out, mtype_out, ftz_out, transpose_out,
    first_out, cskip_out, psum_out : Out
        Registered operand, its mode bits, and the partial sum.
    mx_in, scale_in, mx_out, scale_out : In(1), In(8), Out(1), Out(8)
        With ``mx`` only: the operand is an x4 word, and its E8M0 block scale.
    step_in, step_out : In(2), Out(2)
        With 32-bit lanes (``wide`` or ``mx``) only: the pass of the operand's moving
        column (0-3; the issue logic sends a column four times for a matmul with an FP32
        operand, twice for a 32-bit transpose).
    psum_next : Out(32)
        The value ``psum_out`` takes at the next advance (combinational from the inputs): a
        sub-array's bottom row hands it to the sub-array below, which keeps its own copy of
        ``psum_out`` (:class:`~.array.SystolicArray`, ``edge_registers``).

    Raises
    ------
    ValueError
        If ``float_dtypes`` holds a type that is not a float type, ``double_row`` is
        asked for without e4m3 and e5m2, or the PE would have no datapath.
    """

    def __init__(self, *, float_dtypes=tuple(FLOAT_FIELDS), double_row=True, int8=True,
                 wide=False, mx=False, col_cells=1):
        self._float_dtypes = tuple(float_dtypes)
        self._double_row = bool(double_row)
        self._int8 = bool(int8)
        self._wide = bool(wide)
        self._mx = bool(mx)
        if not (self._int8 or self._float_dtypes or self._wide or self._mx):
            raise ValueError("a PE needs int8, wide, mx or at least one float type")
        if any(t not in FLOAT_FIELDS for t in self._float_dtypes):
            raise ValueError(f"float_dtypes must be float DTypes, not {float_dtypes!r}")
        if self._double_row and not set(DOUBLE_ROW_DTYPES) <= set(self._float_dtypes):
            raise ValueError("double_row needs E4M3 and E5M2 among float_dtypes")
        self._width = WIDE_WIDTH if self._wide or self._mx else OPERAND_WIDTH
        self._col_cells = col_cells
        super().__init__(pe_signature(self._width, self._mx, col_cells))

    @property
    def float_dtypes(self):
        """Float types the PE multiplies (tuple of DType, read-only; empty: INT8 only)."""
        return self._float_dtypes

    @property
    def has_int8(self):
        """Whether the INT8 datapath is built (bool, read-only)."""
        return self._int8

    @property
    def has_wide(self):
        """Whether the TF32 / FP32 datapath (32-bit lanes) is built (bool, read-only)."""
        return self._wide

    @property
    def has_mx(self):
        """Whether the MX datapath (x4 words and block scales) is built (bool, read-only)."""
        return self._mx

    @property
    def has_double_row(self):
        """Whether the FP8 double-row datapath is built (bool, read-only)."""
        return self._double_row

    def elaborate(self, platform):
        m = Module()

        width = self._width
        weight_0 = Signal(width)
        weight_1 = Signal(width)
        with m.If(self.load_en):
            with m.If(self.load_buf):
                m.d.sync += weight_1.eq(self.load_data)
            with m.Else():
                m.d.sync += weight_0.eq(self.load_data)

        weight = Signal(width)     # a probe (tile.PE_PROBES): keep its name
        m.d.comb += weight.eq(Mux(self.sel_in, weight_1, weight_0))
        if self._mx:        # each stationary register's block scale, loaded with it
            scales = [Signal(MX_SCALE_BITS, name=f"scale_{i}") for i in range(2)]
            with m.If(self.load_en):
                with m.If(self.load_buf):
                    m.d.sync += scales[1].eq(self.load_scale)
                with m.Else():
                    m.d.sync += scales[0].eq(self.load_scale)

        # The operand types as codes (3 bits on 16-bit lanes, 4 with TF32 / FP32)
        stype, mtype = Value.cast(self.stype_in), Value.cast(self.mtype_in)
        products, totals = {}, {}     # by datapath: "int" and "float"
        if self._int8:
            int_product = Signal(signed(PSUM_WIDTH))
            int_sum = Signal(PSUM_WIDTH)
            m.d.comb += [
                int_product.eq(self.moving_in[0:8].as_signed() * weight[0:8].as_signed()),
                int_sum.eq(self.psum_in + int_product.as_unsigned()),
            ]
            products["int"], totals["int"] = int_product.as_unsigned(), int_sum
        if self._float_dtypes:
            m.submodules.multiplier = multiplier = FloatMultiplier(self._float_dtypes)
            m.d.comb += [
                multiplier.a.eq(self.moving_in[:OPERAND_WIDTH]),
                multiplier.a_type.eq(mtype[:3]),
                multiplier.b.eq(weight[:OPERAND_WIDTH]),
                multiplier.b_type.eq(stype[:3]),
                multiplier.ftz.eq(self.ftz_in),
            ]
        if self._float_dtypes or self._wide or self._mx:
            m.submodules.adder = adder = Fp32Adder()
            float_product = Signal(PSUM_WIDTH)
            m.d.comb += [adder.a.eq(self.psum_in), adder.b.eq(float_product),
                         adder.ftz.eq(self.ftz_in & ~self.mx_in if self._mx else self.ftz_in)]
            products["float"], totals["float"] = float_product, adder.sum
            # the 8/16-bit and 32-bit float products, before an MX PE's choice of its own
            other_product = Signal(PSUM_WIDTH) if self._mx else float_product
        if self._wide:
            m.submodules.multiplier_fp32 = wide_mul = Fp32Multiplier()
            m.d.comb += [
                wide_mul.en.eq(self.en),
                wide_mul.a.eq(self.moving_in),
                wide_mul.a_type.eq(mtype),
                wide_mul.b.eq(weight),
                wide_mul.b_type.eq(stype),
                wide_mul.ftz.eq(self.ftz_in),
                wide_mul.step.eq(self.step_in),
            ]
        if self._float_dtypes and self._wide:
            m.d.comb += other_product.eq(Mux(is_wide(stype), wide_mul.product,
                                             multiplier.product))
        elif self._float_dtypes:
            m.d.comb += other_product.eq(multiplier.product)
        elif self._wide:
            m.d.comb += other_product.eq(wide_mul.product)
        if self._mx:
            m.submodules.mx_quad = quad = MxQuad()
            m.d.comb += [
                quad.a.eq(weight), quad.a_type.eq(stype[:3]),
                quad.b.eq(self.moving_in), quad.b_type.eq(mtype[:3]),
                quad.a_scale.eq(Mux(self.sel_in, scales[1], scales[0])),
                quad.b_scale.eq(self.scale_in),
            ]
            if self._float_dtypes or self._wide:
                m.d.comb += float_product.eq(Mux(self.mx_in, quad.product, other_product))
            else:
                m.d.comb += float_product.eq(quad.product)
        product = Signal(PSUM_WIDTH)
        total = Signal(PSUM_WIDTH)
        if len(products) == 2:
            is_float = Signal()
            m.d.comb += [
                is_float.eq(stype != DType.INT8),
                product.eq(Mux(is_float, products["float"], products["int"])),
                total.eq(Mux(is_float, totals["float"], totals["int"])),
            ]
        else:
            (only,) = products
            m.d.comb += [product.eq(products[only]), total.eq(totals[only])]
        first = Signal(PSUM_WIDTH)
        m.d.comb += first.eq(Mux(self.chain_start | self.first_in, product, total))
        result = first
        if self._double_row:
            m.submodules.multiplier_hi = multiplier_hi = FloatMultiplier(DOUBLE_ROW_DTYPES)
            m.submodules.adder_hi = adder_hi = Fp32Adder()
            result = Signal(PSUM_WIDTH)
            m.d.comb += [
                multiplier_hi.a.eq(self.moving_in[8:16]),
                multiplier_hi.a_type.eq(mtype[:3]),
                multiplier_hi.b.eq(weight[8:16]),
                multiplier_hi.b_type.eq(stype[:3]),
                multiplier_hi.ftz.eq(self.ftz_in),
                adder_hi.a.eq(first),
                adder_hi.b.eq(multiplier_hi.product),
                adder_hi.ftz.eq(self.ftz_in),
                result.eq(Mux(self.hi_in, adder_hi.sum, first)),
            ]

        with m.If(self.en):
            m.d.sync += [self.moving_out.eq(self.moving_in)]
            m.d.sync += [getattr(self, f"{name}_out").eq(getattr(self, f"{name}_in"))
                         for name in travelling(width, self._mx)]
            m.d.sync += self.psum_out.eq(self.psum_next)
        # 8-bit types pass 8 bits
        narrow = width == OPERAND_WIDTH and set(self._float_dtypes) <= set(NARROW_DTYPES)
        waiting = 0     # a step of an FP32 product before its last: the chain passes
        if self._wide:
            waiting = Signal()
            m.d.comb += waiting.eq(four_passes(stype, mtype)
                                   & (self.step_in != FP32_PASSES - 1))
        with m.If(~self.active_in | self.cskip_in[0]):
            m.d.comb += self.psum_next.eq(self.psum_in)
        with m.Elif(self.transpose_in):
            m.d.comb += self.psum_next.eq(weight[:8] if narrow else weight)
        with m.Elif(waiting):
            m.d.comb += self.psum_next.eq(self.psum_in)
        with m.Else():
            m.d.comb += self.psum_next.eq(result)
        return m
