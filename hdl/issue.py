"""The tile's issue logic: a matmul's moving beats, or a READ's beats, in command order."""

from amaranth.hdl import C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import operand_lane_layout
from .layouts import (
    FP32_PASSES,
    OPERAND_WIDTH,
    SIZE_WIDTH,
    WIDE_TRANSPOSE_PASSES,
    WIDE_WIDTH,
    DType,
    NarrowDType,
    Op,
    command_layout,
    four_passes,
    is_narrow,
    is_wide,
    moving_layout,
    operand_types,
    tile_sizes,
    token_layout,
)
from .loader import buffer_cells, buffer_control_signature
from .skew import SkewBuffer

#: The mode of the moving vector being issued (register ``in_mode``): what each row's lane
#: takes into the skew, K, and the row tile's first row and rows (which rows take part).
#: verif.mutant_rules reads K's bit position from it (K stays before the tile fields).
MODE_LAYOUT = data.StructLayout({"sel": 1, "stype": NarrowDType, "mtype": NarrowDType,
                                 "double": 1, "ftz": 1, "transpose": 1, "k": SIZE_WIDTH,
                                 "row0": SIZE_WIDTH, "trows": SIZE_WIDTH})
#: :data:`MODE_LAYOUT` of 32-bit lanes: 4-bit type codes and the pass of the moving column.
WIDE_MODE_LAYOUT = data.StructLayout({**dict(MODE_LAYOUT.members), "stype": DType,
                                      "mtype": DType, "step": 2})


class IssueLogic(wiring.Component):
    """Issues one beat per enabled cycle for the command at the queue's head, in order.

    The head starts (``head`` transfers; ``head.ready`` is ``en`` while no command is
    part-way through, and for a matmul a moving beat is offered) and then issues its ``N``
    beats on consecutive enabled cycles: a matmul's beats are ``moving`` transfers
    (``moving.ready`` is ``en`` while the running command is a matmul, or the head can start
    and is one), a READ's beats issue on their own. ``running`` is set from the edge after a
    command's first beat until the edge after its last.

    Each issued beat makes a :func:`~.layouts.token_layout` ``token`` in the same cycle
    (combinational; ``token.valid`` is the issue strobe) for the result path: its flat PSUM
    address (``bank * psum_entries + offset + n``), ``last``, ``read``, ``accumulate``,
    ``ftz`` and ``fp32`` (a float matmul). A matmul's start and last beat drive
    ``buffers`` (the stationary buffer it uses and its tile's cells: ``buffers.sel`` and
    ``buffers.cells`` at its start).

    The operands of a moving beat, with the matmul's mode (buffer, types, double-row, FTZ,
    K), are registered on the beat (so bubbles do not toggle the array) and skewed: partition
    row ``k`` of beat ``t`` reaches ``operands[k]`` ``1 + k`` enabled cycles after the beat.
    With the matmul's row tile (first row ``r0`` and ``R`` rows; 0 and ``rows`` for the whole
    array), row ``k`` is ``active`` when ``r0 <= k < r0 + min(K, R)`` (and, in transpose
    mode, its moving element is not +-0: bits [6:0] of an 8-bit type, [14:0] of a 16-bit
    one, [30:0] of a 32-bit one), ``first`` when ``k == r0``, and ``hi`` (its bits [15:8]
    are element ``k - r0 + R``) when double-row and ``K > k - r0 + R``; ``transpose``
    travels with the operand. The token also carries the column tile (``span``, ``part``).

    With 32-bit lanes (``width`` 32, a tile with TF32 / FP32) a moving beat is issued in
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
        The tile's columns, >= 1 (the column tiles the token's ``span`` / ``part`` name).
    psum_entries : int
        PSUM entries per bank, >= 1 (the flat address's bank stride).
    psum_depth : int
        Flat PSUM addresses (banks x entries), >= 1 (the token's address range).
    width : int
        Bits of an operand lane: 16, or 32 on a tile with TF32 / FP32.

    Members
    -------
    en : In(1)
        The tile's pipeline advance.
    head : In(stream.Signature(command_layout()))
        The oldest queued command, once its stationary is loaded.
    moving : In(stream.Signature(moving_layout(rows)))
        MultiplyMoving beats from the tile's ``moving`` stream.
    buffers : Out(:func:`~.loader.buffer_control_signature`)
        Matmul starts and buffer releases to the loader (``sel`` from it).
    operands : Out(ArrayLayout(operand_lane_layout(), rows))
        The array's skewed moving lanes.
    operands_next : Out(ArrayLayout(operand_lane_layout(), rows))
        The value ``operands`` holds after the next enabled cycle (a blocked array keeps a
        registered copy of its lanes: :class:`~.array.SystolicArray`).
    token : Out(token_layout(psum_depth))
        The beat issued this cycle (combinational; ``valid`` low when none).
    running : Out(1)
        A command has issued beats and not its last one (registered; observation).
    read : Out(1)
        The command issuing is a READ (registered; meaningful while ``running``;
        observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, rows, *, psum_entries, psum_depth, cols=1, width=OPERAND_WIDTH):
        self._rows, self._cols = rows, cols
        self._entries, self._depth = psum_entries, psum_depth
        self._width = width
        row_cells, col_cells, _, _ = buffer_cells(rows, cols)
        self._cells = row_cells * col_cells
        lanes = data.ArrayLayout(operand_lane_layout(width), rows)
        super().__init__({
            "en": In(1),
            "head": In(stream.Signature(command_layout())),
            "moving": In(stream.Signature(moving_layout(rows, width))),
            "buffers": Out(buffer_control_signature(self._cells)),
            "operands": Out(lanes),
            "operands_next": Out(lanes),
            "token": Out(token_layout(psum_depth)),
            "running": Out(1),
            "read": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rows, entries, depth, width = self._rows, self._entries, self._depth, self._width
        wide = width == WIDE_WIDTH
        mode_layout = WIDE_MODE_LAYOUT if wide else MODE_LAYOUT
        mode_bits = ("sel", "stype", "mtype", "double", "ftz", "transpose") + (
            ("step",) if wide else ())
        m.submodules.skew = skew = SkewBuffer(operand_lane_layout(width), range(rows))
        m.d.comb += skew.en.eq(self.en)

        head = self.head.payload
        head_read = Signal()
        can_start = Signal()
        running = self.running      # a command has issued beats and not its last one
        cur_read = self.read
        cur_sel, cur_double, cur_ftz, cur_acc, cur_transpose = (
            Signal(name=f"cur_{n}") for n in ("sel", "double", "ftz", "accumulate",
                                              "transpose"))
        cur_stype, cur_mtype = Signal(DType, name="cur_stype"), Signal(DType, name="cur_mtype")
        cur_addr = Signal(range(depth))
        cur_cells = Signal(self._cells)     # the cells of the matmul's tile
        cur_left = Signal(SIZE_WIDTH)   # beats left after the current one
        cur_k = Signal(SIZE_WIDTH)      # partition rows of the current matmul (0 for a READ)
        # With 32-bit lanes: the pass of the current moving column (0 between columns).
        step = Signal(2) if wide else C(0, 2)
        m.d.comb += [
            head_read.eq(head.op == Op.READ),
            can_start.eq(~running & self.head.valid),
            self.head.ready.eq(~running & self.en & (head_read | self.moving.valid)),
            self.moving.ready.eq(self.en & Mux(running, ~cur_read & (step == 0),
                                               can_start & ~head_read)),
        ]
        moving_beat = Signal()
        read_issue = Signal()
        pass_issue = Signal()       # a later pass of the moving beat held in in_vector
        issue = Signal()
        start = Signal()
        m.d.comb += [
            moving_beat.eq(self.moving.valid & self.moving.ready),
            read_issue.eq(self.en & Mux(running, cur_read, can_start & head_read)),
            pass_issue.eq(self.en & running & (step != 0)),
            issue.eq(moving_beat | read_issue | pass_issue),
            start.eq(issue & ~running),     # the head's transfer
        ]
        beat = {name: Signal(name=f"beat_{name}") for name in (
            "read", "sel", "double", "ftz", "accumulate", "transpose", "last")}
        beat["stype"], beat["mtype"] = Signal(DType, name="beat_stype"), Signal(
            DType, name="beat_mtype")
        beat_addr = Signal(range(depth))
        beat_cells = Signal(self._cells)
        beat_left = Signal(SIZE_WIDTH)
        beat_k = Signal(SIZE_WIDTH)
        # The matmul's tile: first row and rows (the whole array when not tiled), and the
        # PSUM partitions its column tile writes (span, part: see token_layout).
        head_tiled = Signal()
        cur_row0, cur_trows, beat_row0, beat_trows = (
            Signal(SIZE_WIDTH, name=n) for n in ("cur_row0", "cur_trows", "beat_row0",
                                                  "beat_trows"))
        cur_span, cur_part, head_span, head_part, beat_span, beat_part = (
            Signal(2, name=n) for n in ("cur_span", "cur_part", "head_span", "head_part",
                                        "beat_span", "beat_part"))
        spans = tile_sizes(self._cols)
        m.d.comb += [
            head_tiled.eq(~head_read & head.tiled),
            head_span.eq(sum(Mux(head.tile_cols == size, code, 0)
                             for code, size in enumerate(spans) if code)),
            head_part.eq(sum(Mux(head.tile_col >= p * size, 1, 0) & (head_span == code)
                             for code, size in enumerate(spans) for p in range(1, 1 << code))),
            beat_row0.eq(Mux(running, cur_row0, Mux(head_tiled, head.tile_row, 0))),
            beat_trows.eq(Mux(running, cur_trows, Mux(head_tiled, head.tile_rows, rows))),
            beat_span.eq(Mux(running, cur_span, Mux(head_tiled, head_span, 0))),
            beat_part.eq(Mux(running, cur_part, Mux(head_tiled, head_part, 0))),
        ]
        m.d.comb += [
            beat_k.eq(Mux(running, cur_k, Mux(head_read, 0, head.k))),
            beat["read"].eq(Mux(running, cur_read, head_read)),
            beat["sel"].eq(Mux(running, cur_sel, self.buffers.sel)),
            beat["stype"].eq(Mux(running, cur_stype, operand_types(head)[0])),
            beat["mtype"].eq(Mux(running, cur_mtype, operand_types(head)[1])),
            beat["double"].eq(Mux(running, cur_double, head.double_row)),
            beat["ftz"].eq(Mux(running, cur_ftz, head.ftz)),
            beat["accumulate"].eq(Mux(running, cur_acc, head.accumulate)),
            beat["transpose"].eq(Mux(running, cur_transpose, head.transpose)),
            beat_addr.eq(Mux(running, cur_addr, head.bank * entries + head.offset)),
            beat_cells.eq(Mux(running, cur_cells, self.buffers.cells)),
            beat_left.eq(Mux(running, cur_left, head.n - 1)),
            beat["last"].eq(beat_left == 0),
        ]
        # The column's last pass (every issue on 16-bit lanes): it moves to the next column.
        col_done = Signal()
        if wide:
            passes = Signal(3)
            m.d.comb += [
                passes.eq(Mux(beat["read"], 1, Mux(
                    beat["transpose"], Mux(is_wide(beat["stype"]), WIDE_TRANSPOSE_PASSES, 1),
                    Mux(four_passes(beat["stype"], beat["mtype"]), FP32_PASSES, 1)))),
                col_done.eq(step == passes - 1),
            ]
            with m.If(issue):
                m.d.sync += step.eq(Mux(col_done, 0, step + 1))
        else:
            m.d.comb += col_done.eq(1)
        with m.If(issue):
            m.d.sync += [
                running.eq(~(beat["last"] & col_done)),
                cur_read.eq(beat["read"]), cur_sel.eq(beat["sel"]),
                cur_stype.eq(beat["stype"]), cur_mtype.eq(beat["mtype"]),
                cur_double.eq(beat["double"]), cur_ftz.eq(beat["ftz"]),
                cur_acc.eq(beat["accumulate"]), cur_transpose.eq(beat["transpose"]),
                cur_addr.eq(beat_addr + col_done), cur_left.eq(beat_left - col_done),
                cur_cells.eq(beat_cells),
                cur_k.eq(beat_k),
                cur_row0.eq(beat_row0), cur_trows.eq(beat_trows),
                cur_span.eq(beat_span), cur_part.eq(beat_part),
            ]
        # A buffer is free once its matmul has sent its last moving beat.
        m.d.comb += [
            self.buffers.start.eq(start & ~head_read),
            self.buffers.release.eq(issue & beat["last"] & col_done & ~beat["read"]),
            self.buffers.release_sel.eq(beat["sel"]),
            self.buffers.release_cells.eq(beat_cells),
            self.token.valid.eq(issue & col_done),
            self.token.addr.eq(beat_addr),
            self.token.fp32.eq(beat["stype"] != DType.INT8),
            self.token.span.eq(beat_span),
            self.token.part.eq(beat_part),
        ]
        m.d.comb += [self.token[name].eq(beat[name]) for name in (
            "last", "ftz", "accumulate", "read")]

        # The operand vector and its mode only change on a real beat, so bubbles do not
        # toggle the array (this also keeps event-driven simulators such as Icarus from
        # evaluating garbage).
        in_vector = Signal(data.ArrayLayout(width, rows))
        in_mode = Signal(mode_layout)
        if wide:
            beat["step"] = step
        with m.If(moving_beat):
            m.d.sync += in_vector.eq(self.moving.payload.data)
        with m.If(issue):
            m.d.sync += [in_mode[name].eq(beat[name]) for name in mode_bits]
            m.d.sync += in_mode.k.eq(beat_k)
            m.d.sync += [in_mode.row0.eq(beat_row0), in_mode.trows.eq(beat_trows)]
        # The skew's lane 0 is a wire: its next value is the lane made from the registers'
        # next values (they load on a beat and an issue, both only when enabled).
        vector_next = Signal(data.ArrayLayout(width, 1))     # row 0 only
        mode_next = Signal(mode_layout)
        m.d.comb += [
            vector_next[0].eq(Mux(moving_beat, self.moving.payload.data[0], in_vector[0])),
            mode_next.k.eq(Mux(issue, beat_k, in_mode.k)),
            mode_next.row0.eq(Mux(issue, beat_row0, in_mode.row0)),
            mode_next.trows.eq(Mux(issue, beat_trows, in_mode.trows)),
        ]
        m.d.comb += [mode_next[name].eq(Mux(issue, beat[name], in_mode[name]))
                     for name in mode_bits]
        m.d.comb += _lane(skew.i_next[0], 0, vector_next, mode_next,
                          _narrow(m, mode_next, "next_"),
                          _rows_taking_part(m, mode_next, "next_"), "next_")
        narrow, ends = _narrow(m, in_mode), _rows_taking_part(m, in_mode)
        for k in range(rows):
            m.d.comb += _lane(skew.i[k], k, in_vector, in_mode, narrow, ends)
            m.d.comb += [self.operands[k].eq(skew.o[k]),
                         self.operands_next[k].eq(skew.o_next[k])]
        return m


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


def _lane(lane, k, vector, mode, narrow, ends, prefix=""):
    """The statements that make partition row ``k``'s skew input ``lane`` from the operand
    vector and mode registers (or their next values); ``ends`` from
    :func:`_rows_taking_part`."""
    act_end, hi_end = ends
    # Transpose mode: a row takes part only where its moving element is not +-0 (the
    # column's selector, a 1 there; golden refuses any other value).
    picked = Signal(name=f"{prefix}picked_{k}")
    inside = Signal(name=f"{prefix}inside_{k}")
    if len(vector[k]) > OPERAND_WIDTH:      # 32-bit lanes: TF32 / FP32 and the step
        nonzero = Mux(is_wide(mode.mtype), vector[k][:31].any(), vector[k][:15].any())
        extra = [lane.step.eq(mode.step)]
    else:
        nonzero, extra = vector[k][:15].any(), []
    return extra + [
        picked.eq(Mux(narrow, vector[k][:7].any(), nonzero)),
        inside.eq(mode.row0 <= k),
        lane.value.eq(vector[k]),
        lane.sel.eq(mode.sel),
        lane.active.eq(inside & (act_end > k) & (~mode.transpose | picked)),
        lane.transpose.eq(mode.transpose),
        lane.first.eq(mode.row0 == k),
        lane.hi.eq(inside & (hi_end > k)),
        lane.stype.eq(mode.stype),
        lane.mtype.eq(mode.mtype),
        lane.ftz.eq(mode.ftz),
    ]
