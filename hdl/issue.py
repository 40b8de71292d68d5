"""The tile's issue logic: matmuls' moving beats, several at once in tiles that share no PE
row or column, or a READ's beats, started in command order."""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import operand_lane_layout
from .layouts import (
    FP32_PASSES,
    MX_SCALE_BITS,
    MX_TOKEN,
    OPERAND_WIDTH,
    SIZE_WIDTH,
    WIDE_TRANSPOSE_PASSES,
    WIDE_WIDTH,
    DType,
    NarrowDType,
    Op,
    cell_grid,
    cell_mask,
    command_layout,
    four_passes,
    is_narrow,
    is_wide,
    moving_layout,
    operand_types,
    token_layout,
)
from .loader import buffer_control_signature
from .mx_quad import fp4_word
from .skew import SkewBuffer

#: The mode of a row cell's moving lanes (registers ``mode_<g>``): what each lane of the
#: cell takes into the skew, K, and the row tile's first row and rows (which rows take
#: part). verif.mutant_rules reads K's bit position from it (K stays before the tile
#: fields).
MODE_LAYOUT = data.StructLayout({"sel": 1, "stype": NarrowDType, "mtype": NarrowDType,
                                 "double": 1, "ftz": 1, "transpose": 1, "k": SIZE_WIDTH,
                                 "row0": SIZE_WIDTH, "trows": SIZE_WIDTH})
#: :data:`MODE_LAYOUT` of 32-bit lanes: 4-bit type codes and the pass of the moving column.
WIDE_MODE_LAYOUT = data.StructLayout({**dict(MODE_LAYOUT.members), "stype": DType,
                                      "mtype": DType, "step": 2})


#: The mode bits of an MX matmul (a tile with the MX datapath): its operands are x4 words
#: (``mx``), and the moving side is MXFP4 (``fp4``: converted to e4m3fn in front of the skew).
MX_MODE = {"mx": 1, "fp4": 1}
#: What a matmul in flight also keeps on such a tile: its PSUM words are rounded to BF16,
#: stochastically from ``seed``, and whether its next column is its first (the tokens'
#: :data:`~.layouts.MX_TOKEN`).
MX_SLOT = {**MX_MODE, **MX_TOKEN}


def mode_layout(width, col_cells, mx=False):
    """The mode registers of a row cell (StructLayout): :data:`MODE_LAYOUT` (16-bit lanes)
    or :data:`WIDE_MODE_LAYOUT` (32-bit), then ``cskip``, the column cells outside the
    matmul's tile, and with ``mx`` :data:`MX_MODE`."""
    base = WIDE_MODE_LAYOUT if width == WIDE_WIDTH else MODE_LAYOUT
    return data.StructLayout({**dict(base.members), "cskip": col_cells,
                              **(MX_MODE if mx else {})})


def slot_layout(psum_depth, row_cells, col_cells, mx=False):
    """One matmul in flight (StructLayout): ``run`` (it has issued beats and not its last
    one), its mode, PSUM address and beats left after the current one, its tile's row and
    column cells (``rcells``, ``ccells``), the buffer cells it holds (``cells``) and the
    pass of its moving column (``step``), with ``mx`` :data:`MX_SLOT`."""
    return data.StructLayout({
        "run": 1, "sel": 1, "stype": DType, "mtype": DType, "double": 1, "ftz": 1,
        "accumulate": 1, "transpose": 1, "addr": range(psum_depth), "left": SIZE_WIDTH,
        "k": SIZE_WIDTH, "row0": SIZE_WIDTH, "trows": SIZE_WIDTH, "rcells": row_cells,
        "ccells": col_cells, "cells": row_cells * col_cells, "step": 2,
        **(MX_SLOT if mx else {})})


class IssueLogic(wiring.Component):
    """Issues the beats of the matmuls in flight and of a READ, starting commands in order.

    Matmuls in tiles that share no PE row and no PE column run at once (``docs/numerics.md``,
    tiles choices 9-11): each in a slot of its own (slot ``g`` holds the matmul whose tile
    starts in row cell ``g``, :func:`~.layouts.cell_grid`). The head (the oldest queued
    command, once its stationary is loaded) starts when it shares no row or column cell
    with a matmul in flight: a READ when nothing is in flight (it shares every lane); a
    matmul with a moving beat whose ``groups`` name its row cells; a matmul with a float32
    operand or a 32-bit transpose (several passes per moving column) only when nothing is
    in flight, and nothing starts beside it.

    A ``moving`` beat is taken (``moving.ready``) when ``en`` and its ``groups`` are made of
    whole row-cell sets of matmuls in flight on the first pass of a column, plus at most
    the row cells of the head, which then starts; any other mask waits. Each matmul named
    issues its next moving column; a matmul in flight that the beat does not name idles
    that cycle (or issues its next pass, which needs no beat). A READ issues its ``N``
    beats on consecutive enabled cycles. ``running`` is set while a command has issued
    beats and not its last one.

    Each issued column makes a :func:`~.layouts.token_layout` token in every column cell of
    its matmul's tile, in the same cycle (``tokens[h]``, combinational; ``valid`` is the
    issue strobe): its flat PSUM address (``bank * psum_entries + offset + n``), ``last``,
    ``accumulate``, ``ftz`` and ``fp32`` (a float matmul); a READ's beat makes one in every
    cell. A matmul's start and last beat drive ``buffers`` (the buffer and cells the loader
    gives the oldest loaded matmul at its start; at its last beat, several matmuls' at
    once).

    Each row cell keeps the operands of its lanes from the last beat that named it and the
    mode of the matmul that issued there last (registered, so bubbles do not toggle the
    array), and whether one issued in the last enabled cycle: a lane is active only then.
    Lanes are skewed: partition row ``k`` of beat ``t`` reaches ``operands[k]`` ``1 + k``
    enabled cycles after the beat. With the matmul's row tile (first row ``r0`` and ``R``
    rows), row ``k`` is ``active`` when ``r0 <= k < r0 + min(K, R)`` (and, in transpose
    mode, its moving element is not +-0: bits [6:0] of an 8-bit type, [14:0] of a 16-bit
    one, [30:0] of a 32-bit one), ``first`` when ``k == r0``, and ``hi`` (its bits [15:8]
    are element ``k - r0 + R``) when double-row and ``K > k - r0 + R``; ``transpose`` and
    the column cells outside its tile (``cskip``) travel with the operand.

    With 32-bit lanes (``width`` 32, a tile with TF32 / FP32) a moving column is issued in
    several passes on consecutive enabled cycles (``step`` 0, 1, ... travels with it): four
    for a matmul with an FP32 operand (``FP32_PASSES``, one per 12-bit partial product of
    :class:`~.fp32_mul.Fp32Multiplier`), two for a transpose of TF32 / FP32 elements, one
    otherwise. ``moving`` transfers on the first pass only; the token, the address, the
    beat count and the buffer release follow the last pass.

    Parameters
    ----------
    rows : int
        The tile's partition rows, >= 1.
    cols : int
        The tile's columns, >= 1.
    psum_entries : int
        PSUM entries per bank, >= 1 (the flat address's bank stride).
    psum_depth : int
        Flat PSUM addresses (banks x entries), >= 1 (the token's address range).
    width : int
        Bits of an operand lane: 16, or 32 on a tile with TF32 / FP32 or MX.
    mx : bool
        The MX datapath: each moving lane's E8M0 ``scale`` and the matmul's ``mx`` bit
        travel with the operand; an MXFP4 moving side's e2m1 elements (bits [15:0] of a
        lane) are converted to the x4 word of their e4m3fn values in front of the skew.

    Members
    -------
    en : In(1)
        The tile's pipeline advance.
    head : In(stream.Signature(command_layout()))
        The oldest queued command, once its stationary is loaded.
    moving : In(stream.Signature(moving_layout(rows)))
        MultiplyMoving beats from the tile's ``moving`` stream.
    buffers : Out(:func:`~.loader.buffer_control_signature`)
        Matmul starts and buffer releases to the loader (``sel``, ``cells`` from it).
    operands : Out(ArrayLayout(operand_lane_layout(), rows))
        The array's skewed moving lanes.
    operands_next : Out(ArrayLayout(operand_lane_layout(), rows))
        The value ``operands`` holds after the next enabled cycle (a blocked array keeps a
        registered copy of its lanes: :class:`~.array.SystolicArray`).
    tokens : Out(ArrayLayout(token_layout(psum_depth), column cells))
        The beats issued this cycle, per column cell (combinational; ``valid`` low where
        none).
    running : Out(1)
        A command has issued beats and not its last one (from registers; observation).
    read : Out(1)
        A READ is issuing (registered; observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, rows, *, psum_entries, psum_depth, cols=1, width=OPERAND_WIDTH,
                 mx=False):
        self._rows, self._cols = rows, cols
        self._entries, self._depth = psum_entries, psum_depth
        self._width, self._mx = width, bool(mx)
        self._row_cells, self._grain_r = cell_grid(rows)
        self._col_cells = cell_grid(cols)[0]
        lanes = data.ArrayLayout(operand_lane_layout(width, self._mx, self._col_cells), rows)
        super().__init__({
            "en": In(1),
            "head": In(stream.Signature(command_layout())),
            "moving": In(stream.Signature(moving_layout(rows, width, self._mx))),
            "buffers": Out(buffer_control_signature(self._row_cells * self._col_cells)),
            "operands": Out(lanes),
            "operands_next": Out(lanes),
            "tokens": Out(data.ArrayLayout(token_layout(psum_depth, self._mx),
                                           self._col_cells)),
            "running": Out(1),
            "read": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, entries, depth = self._rows, self._cols, self._entries, self._depth
        width = self._width
        wide = width == WIDE_WIDTH
        row_cells, grain_r = self._row_cells, self._grain_r
        col_cells = self._col_cells
        mx = self._mx
        m.submodules.skew = skew = SkewBuffer(
            operand_lane_layout(width, mx, col_cells), range(rows))
        m.d.comb += skew.en.eq(self.en)
        en, head, mask = self.en, self.head.payload, self.moving.payload.groups

        # ---- the head: its tile as row and column cells --------------------------------
        head_read = Signal()
        head_tiled = Signal()
        head_row0, head_trows, head_col0, head_tcols = (
            Signal(SIZE_WIDTH, name=n) for n in ("head_row0", "head_trows", "head_col0",
                                                 "head_tcols"))
        head_rcells, head_ccells = Signal(row_cells), Signal(col_cells)
        head_slot = Signal(row_cells)       # one-hot: the row cell its tile starts in
        head_stype, head_mtype = operand_types(head)
        head_alone = Signal()               # several passes per column: runs alone
        m.d.comb += [
            head_read.eq(head.op == Op.READ),
            head_tiled.eq(~head_read & head.tiled),
            head_row0.eq(Mux(head_tiled, head.tile_row, 0)),
            head_trows.eq(Mux(head_tiled, head.tile_rows, rows)),
            head_col0.eq(Mux(head_tiled, head.tile_col, 0)),
            head_tcols.eq(Mux(head_tiled, head.tile_cols, cols)),
            head_rcells.eq(cell_mask(head_row0, head_trows, rows)),
            head_ccells.eq(cell_mask(head_col0, head_tcols, cols)),
            head_slot.eq(Cat(head_rcells[g] & (head_row0 < (g + 1) * grain_r)
                             for g in range(row_cells))),
            head_alone.eq(_passes(head_read, head.transpose, head_stype, head_mtype) != 1
                          if wide else 0),
        ]

        # ---- the slots and the READ in flight -------------------------------------------
        layout = slot_layout(depth, row_cells, col_cells, mx)
        slots = [Signal(layout, name=f"slot_{s}") for s in range(row_cells)]
        read_run = self.read
        read_addr = Signal(range(depth))
        read_left = Signal(SIZE_WIDTH)
        busy_rows, busy_cols = Signal(row_cells), Signal(col_cells)
        alone = Signal()        # a matmul in flight runs alone
        any_run = Signal()
        m.d.comb += [
            busy_rows.eq(_any(Mux(s.run, s.rcells, 0) for s in slots)),
            busy_cols.eq(_any(Mux(s.run, s.ccells, 0) for s in slots)),
            alone.eq(_any(s.run & _slot_alone(s, wide) for s in slots)),
            any_run.eq(_any(s.run for s in slots) | read_run),
            self.running.eq(any_run),
        ]
        head_clear = Signal()   # the head shares no lane with what is in flight
        m.d.comb += head_clear.eq(~read_run & ~alone & ((head_rcells & busy_rows) == 0)
                                  & ((head_ccells & busy_cols) == 0)
                                  & (~head_alone | ~any_run))

        # ---- which moving beat is taken ------------------------------------------------
        named = [Signal(name=f"named_{s}") for s in range(row_cells)]   # the beat names it
        fits = [Signal(name=f"fits_{s}") for s in range(row_cells)]
        covered, rest = Signal(row_cells), Signal(row_cells)
        for s, slot in enumerate(slots):
            m.d.comb += [
                named[s].eq(slot.run & (slot.rcells & mask).any()),
                fits[s].eq(~named[s] | (((slot.rcells & ~mask) == 0) & (slot.step == 0))),
            ]
        starts = Signal()       # the beat starts the head
        consistent = Signal()
        m.d.comb += [
            covered.eq(_any(Mux(named[s], slot.rcells, 0) for s, slot in enumerate(slots))),
            rest.eq(mask & ~covered),
            starts.eq((rest != 0) & (rest == head_rcells) & self.head.valid & ~head_read
                      & head_clear),
            consistent.eq(Cat(fits).all() & ((rest == 0) | starts) & (mask != 0)),
            self.moving.ready.eq(en & consistent),
        ]
        beat = Signal()
        start_matmul, start_read = Signal(), Signal()
        m.d.comb += [
            beat.eq(self.moving.valid & self.moving.ready),
            start_matmul.eq(beat & starts),
            start_read.eq(en & self.head.valid & head_read & ~any_run),
            self.head.ready.eq(start_matmul | start_read),
        ]

        # ---- each slot's issue: the column (or pass) it sends this cycle ----------------
        head_values = {
            "run": 1, "sel": self.buffers.sel, "stype": head_stype, "mtype": head_mtype,
            "double": head.double_row, "ftz": head.ftz, "accumulate": head.accumulate,
            "transpose": head.transpose, "addr": head.bank * entries + head.offset,
            "left": head.n - 1, "k": head.k, "row0": head_row0, "trows": head_trows,
            "rcells": head_rcells, "ccells": head_ccells, "cells": self.buffers.cells,
            "step": 0, **({"mx": head.mx, "fp4": head.fp4[1], "bf16": head.bf16_out,
                           "stochastic": head.stochastic, "first": 1, "seed": head.seed}
                          if mx else {}),
        }
        issues, now, col_done, releases = [], [], [], []
        for s, slot in enumerate(slots):
            start = Signal(name=f"start_{s}")
            issue = Signal(name=f"issue_{s}")
            cur = Signal(layout, name=f"now_{s}")     # the slot as this cycle issues it
            done = Signal(name=f"col_done_{s}")       # the column's last pass
            release = Signal(name=f"release_{s}")
            m.d.comb += [
                start.eq(start_matmul & head_slot[s]),
                issue.eq(start | (beat & named[s]) | (en & slot.run & (slot.step != 0))),
                cur.eq(slot),
            ]
            with m.If(start):
                m.d.comb += [cur[name].eq(value) for name, value in head_values.items()]
            if wide:
                m.d.comb += done.eq(cur.step == _passes(0, cur.transpose, cur.stype,
                                                        cur.mtype) - 1)
            else:
                m.d.comb += done.eq(1)
            m.d.comb += release.eq(issue & done & (cur.left == 0))
            with m.If(issue):
                m.d.sync += [slot.eq(cur), slot.run.eq(~release),
                             slot.step.eq(Mux(done, 0, cur.step + 1)),
                             slot.addr.eq(cur.addr + done), slot.left.eq(cur.left - done)]
                if mx:
                    m.d.sync += slot.first.eq(cur.first & ~done)
            issues.append(issue)
            now.append(cur)
            col_done.append(done)
            releases.append(release)

        # ---- the READ ---------------------------------------------------------------
        read_issue = Signal()
        read_beat_addr = Signal(range(depth))
        read_beat_left = Signal(SIZE_WIDTH)
        m.d.comb += [
            read_issue.eq(start_read | (en & read_run)),
            read_beat_addr.eq(Mux(read_run, read_addr, head.bank * entries + head.offset)),
            read_beat_left.eq(Mux(read_run, read_left, head.n - 1)),
        ]
        with m.If(read_issue):
            m.d.sync += [read_run.eq(read_beat_left != 0), read_addr.eq(read_beat_addr + 1),
                         read_left.eq(read_beat_left - 1)]

        # ---- tokens, per column cell ---------------------------------------------------
        for h in range(col_cells):
            token = self.tokens[h]
            with m.If(read_issue):
                m.d.comb += [token.valid.eq(1), token.read.eq(1), token.addr.eq(read_beat_addr),
                             token.last.eq(read_beat_left == 0)]
            for s, cur in enumerate(now):
                with m.Elif(issues[s] & col_done[s] & cur.ccells[h]):
                    m.d.comb += [token.valid.eq(1), token.addr.eq(cur.addr),
                                 token.last.eq(cur.left == 0),
                                 token.fp32.eq(cur.stype != DType.INT8), token.ftz.eq(cur.ftz),
                                 token.accumulate.eq(cur.accumulate)]
                    if mx:
                        m.d.comb += [token[name].eq(cur[name]) for name in MX_TOKEN]

        # ---- the loader's buffers ------------------------------------------------------
        m.d.comb += [
            self.buffers.start.eq(start_matmul),
            self.buffers.release.eq(Cat(releases).any()),
            self.buffers.release_cells.eq(_any(Mux(r, cur.cells, 0)
                                               for r, cur in zip(releases, now, strict=True))),
            self.buffers.release_sel.eq(_any(Mux(r & cur.sel, cur.cells, 0)
                                             for r, cur in zip(releases, now, strict=True))),
        ]

        # ---- each row cell's lanes -----------------------------------------------------
        # The operands and mode only change on a beat or an issue there, so bubbles do not
        # toggle the array (this also keeps event-driven simulators such as Icarus from
        # evaluating garbage); ``live`` says a matmul issued there in the last enabled cycle.
        mode_shape = mode_layout(width, col_cells, mx)
        mode_bits = ["sel", "stype", "mtype", "double", "ftz", "transpose", "k", "row0",
                     "trows"] + (["step"] if wide else []) + (list(MX_MODE) if mx else [])
        data_in = self.moving.payload.data
        for g in range(row_cells):
            lanes = range(g * grain_r, (g + 1) * grain_r)
            vector = Signal(data.ArrayLayout(width, grain_r), name=f"vector_{g}")
            scales = (Signal(data.ArrayLayout(MX_SCALE_BITS, grain_r), name=f"scales_{g}")
                      if mx else None)
            mode = Signal(mode_shape, name=f"mode_{g}")
            live = Signal(name=f"live_{g}")
            issuing = Signal(name=f"issuing_{g}")     # a matmul issues in this cell
            owner = Signal(mode_shape, name=f"owner_{g}")   # its mode
            m.d.comb += issuing.eq(Cat(issue & cur.rcells[g]
                                       for issue, cur in zip(issues, now, strict=True)).any())
            for issue, cur in zip(issues, now, strict=True):
                with m.If(issue & cur.rcells[g]):
                    m.d.comb += [owner[name].eq(cur[name]) for name in mode_bits]
                    m.d.comb += owner.cskip.eq(~cur.ccells)
            taken = beat & mask[g]
            with m.If(taken):
                m.d.sync += vector.eq(Cat(data_in[k] for k in lanes))
                if mx:
                    m.d.sync += scales.eq(Cat(self.moving.payload.scale[k] for k in lanes))
            with m.If(issuing):
                m.d.sync += mode.eq(owner)
            with m.If(en):
                m.d.sync += live.eq(issuing)
            narrow, ends = _narrow(m, mode, f"c{g}_"), _rows_taking_part(m, mode, f"c{g}_")
            for i, k in enumerate(lanes):
                m.d.comb += _lane(skew.i[k], k, vector[i], mode, live, narrow, ends,
                                  scale=scales[i] if mx else None, m=m)
                m.d.comb += [self.operands[k].eq(skew.o[k]),
                             self.operands_next[k].eq(skew.o_next[k])]
            if g == 0:
                # The skew's lane 0 is a wire: its next value is the lane made from the
                # registers' next values (they load on a beat and an issue, both only when
                # enabled).
                vector_next = Signal(width, name="vector_next")
                scale_next = Signal(MX_SCALE_BITS, name="scale_next") if mx else None
                mode_next = Signal(mode_shape, name="mode_next")
                live_next = Signal(name="live_next")
                m.d.comb += [
                    vector_next.eq(Mux(taken, data_in[0], vector[0])),
                    mode_next.eq(Mux(issuing, owner, mode)),
                    live_next.eq(Mux(en, issuing, live)),
                ]
                if mx:
                    m.d.comb += scale_next.eq(Mux(taken, self.moving.payload.scale[0],
                                                  scales[0]))
                m.d.comb += _lane(skew.i_next[0], 0, vector_next, mode_next, live_next,
                                  _narrow(m, mode_next, "next_"),
                                  _rows_taking_part(m, mode_next, "next_"), "next_",
                                  scale=scale_next, m=m)
        return m


def _any(values):
    """The OR of ``values`` (an iterable of Amaranth values; 0 when empty)."""
    values = list(values)
    total = values[0] if values else C(0, 1)
    for value in values[1:]:
        total = total | value
    return total


def _passes(read, transpose, stype, mtype):
    """Cycles a command spends on each moving column (an Amaranth value: 1, 2 or 4)."""
    return Mux(read, 1, Mux(transpose, Mux(is_wide(stype), WIDE_TRANSPOSE_PASSES, 1),
                            Mux(four_passes(stype, mtype), FP32_PASSES, 1)))


def _slot_alone(slot, wide):
    """Whether the matmul in ``slot`` takes several passes per column (it runs alone)."""
    if not wide:
        return C(0, 1)
    return _passes(0, slot.transpose, slot.stype, slot.mtype) != 1


def _narrow(m, mode, prefix=""):
    """A signal, high when ``mode``'s moving type is an 8-bit one."""
    narrow = Signal(name=f"{prefix}narrow")
    m.d.comb += narrow.eq(is_narrow(mode.mtype))
    return narrow


def _rows_taking_part(m, mode, prefix=""):
    """``(act_end, hi_end)``: rows ``row0 .. act_end - 1`` take part (K of them, the tile's
    rows in double-row mode), and rows ``row0 .. hi_end - 1`` also carry element
    ``k + trows`` (double-row, K > trows)."""
    act_end = Signal(SIZE_WIDTH + 1, name=f"{prefix}act_end")
    hi_end = Signal(SIZE_WIDTH + 1, name=f"{prefix}hi_end")
    over = Signal(name=f"{prefix}over")
    m.d.comb += [
        over.eq(mode.k > mode.trows),
        act_end.eq(mode.row0 + Mux(over, mode.trows, mode.k)),
        hi_end.eq(Mux(mode.double & over, mode.row0 + mode.k - mode.trows, 0)),
    ]
    return act_end, hi_end


def _lane(lane, k, value, mode, live, narrow, ends, prefix="", *, scale=None, m=None):
    """The statements that make partition row ``k``'s skew input ``lane`` from its operand
    ``value``, its row cell's mode and ``live`` registers (or their next values); ``ends``
    from :func:`_rows_taking_part`. With the MX datapath, ``scale`` is the operand's E8M0
    scale and ``m`` the module (an MXFP4 operand's e2m1 elements are converted here)."""
    act_end, hi_end = ends
    extra_mx = []
    if scale is not None:
        value = Mux(mode.fp4, fp4_word(m, value, f"{prefix}fp4_{k}"), value)
        extra_mx = [lane.mx.eq(mode.mx), lane.scale.eq(scale)]
    # Transpose mode: a row takes part only where its moving element is not +-0 (the
    # column's selector, a 1 there; golden refuses any other value).
    picked = Signal(name=f"{prefix}picked_{k}")
    inside = Signal(name=f"{prefix}inside_{k}")
    if len(value) > OPERAND_WIDTH:      # 32-bit lanes: TF32 / FP32 and the step
        nonzero = Mux(is_wide(mode.mtype), value[:31].any(), value[:15].any())
        extra = [lane.step.eq(mode.step)]
    else:
        nonzero, extra = value[:15].any(), []
    return extra + extra_mx + [
        picked.eq(Mux(narrow, value[:7].any(), nonzero)),
        inside.eq(mode.row0 <= k),
        lane.value.eq(value),
        lane.sel.eq(mode.sel),
        lane.active.eq(live & inside & (act_end > k) & (~mode.transpose | picked)),
        lane.transpose.eq(mode.transpose),
        lane.first.eq(mode.row0 == k),
        lane.hi.eq(inside & (hi_end > k)),
        lane.stype.eq(mode.stype),
        lane.mtype.eq(mode.mtype),
        lane.ftz.eq(mode.ftz),
        lane.cskip.eq(mode.cskip),
    ]
