"""The tile's stationary loader: LoadStationary into two buffers alternately (shadow weights)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import load_lane_layout
from .command_queue import load_request_signature
from .layouts import OPERAND_WIDTH, SIZE_WIDTH, stationary_layout
from .skew import SkewBuffer


def buffer_control_signature():
    """Use of the two stationary buffers, as the issue logic drives it (wiring.Signature).

    Members
    -------
    start : Out(1)
        A matmul starts this cycle (its first moving beat issues): buffer ``sel`` goes from
        loaded to in use, and ``sel`` toggles, at the clock edge.
    release : Out(1)
        A matmul issues its last moving beat this cycle: buffer ``release_sel`` becomes free
        at the clock edge (after ``start``'s update, so a one-beat matmul frees its buffer
        at once).
    release_sel : Out(1)
        The buffer the releasing matmul used.
    sel : In(1)
        The buffer the next matmul uses (registered).
    """
    return wiring.Signature({"start": Out(1), "release": Out(1), "release_sel": Out(1),
                             "sel": In(1)})


class StationaryLoader(wiring.Component):
    """Loads stationary rows into the PE grid's two weight buffers, one buffer per matmul.

    Loads run in command order (the queue's ``request``: the oldest queued matmul whose
    stationary is not loaded) into the two buffers alternately. ``stationary.ready`` is
    ``en & request.valid`` while the buffer the next load writes (``load_buf``) is neither
    loaded for a matmul that has not started (``full``) nor in use by one still sending
    moving beats (``busy``). Beat ``k`` of a load writes partition row ``request.row + k``
    (the tile's first row; 0 for the whole array); the beat that
    completes ``request.beats`` raises ``request.done`` (combinational) and, at the clock
    edge, marks ``load_buf`` full, toggles it and restarts the row count.

    Each beat is registered once (lanes outside ``request.col .. request.col + M - 1``
    zeroed, and bits [15:8] of every
    lane when ``request.narrow``: an 8-bit type outside double-row mode; with 32-bit lanes,
    bits [31:16] unless ``request.wide``) and enters a
    column-skewed lane per column: the write reaches column ``c`` of the array ``1 + c``
    enabled cycles after its beat, like the moving data, so it only overwrites PEs that the
    previous matmul's last beat has passed. Everything but the buffer state and the row count
    (updated by beats only) advances with ``en``.

    Parameters
    ----------
    rows, cols : int
        The tile's partition rows and columns, >= 1.
    width : int
        Bits of an operand lane: 16, or 32 on a tile with TF32 / FP32.

    Members
    -------
    en : In(1)
        The tile's pipeline advance.
    stationary : In(stream.Signature(stationary_layout(cols, width)))
        LoadStationary beats from the tile's ``stationary`` stream.
    request : In(:func:`~.command_queue.load_request_signature`)
        The load the command queue waits for (and ``done`` back to it).
    buffers : In(:func:`buffer_control_signature`)
        Matmul starts and buffer releases from the issue logic (and ``sel`` back to it).
    load : Out(ArrayLayout(load_lane_layout(rows, width), cols))
        The array's skewed stationary write lanes.
    load_buf : Out(1)
        The buffer the next load writes (registered; observation).
    load_row : Out(range(rows))
        The partition row the next stationary beat writes (registered; 0 bits when
        ``rows`` = 1; observation).
    full : Out(2)
        Bit ``b``: buffer ``b`` is loaded for a matmul that has not started (registered;
        observation).
    busy : Out(2)
        Bit ``b``: buffer ``b`` is used by a matmul still sending moving beats (registered;
        observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, rows, cols, width=OPERAND_WIDTH):
        self._rows, self._cols, self._width = rows, cols, width
        super().__init__({
            "en": In(1),
            "stationary": In(stream.Signature(stationary_layout(cols, width))),
            "request": In(load_request_signature()),
            "buffers": In(buffer_control_signature()),
            "load": Out(data.ArrayLayout(load_lane_layout(rows, width), cols)),
            "load_buf": Out(1),
            "load_row": Out(range(rows)),
            "full": Out(2),
            "busy": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        lane = load_lane_layout(rows, self._width)
        m.submodules.load_skew = load_skew = SkewBuffer(lane, range(cols))
        m.d.comb += load_skew.en.eq(self.en)

        load_buf = self.load_buf         # buffer the next LoadStationary writes
        load_row = self.load_row         # partition row the next stationary beat writes
        use_buf = self.buffers.sel       # buffer the next matmul uses
        full, busy = self.full, self.busy
        # Enabled cycles since each buffer's last moving beat, up to rows: a load into a row
        # tile starting at row r waits r of them, until that beat's operands (skewed by row)
        # have passed the tile's rows.
        since = [Signal(range(rows + 1), init=rows, name=f"since_{b}") for b in range(2)]
        passed = Signal()
        m.d.comb += passed.eq(Mux(load_buf, since[1], since[0]) >= self.request.row)
        for b in range(2):
            with m.If(self.buffers.release & (self.buffers.release_sel == b)):
                m.d.sync += since[b].eq(0)
            with m.Elif(self.en & (since[b] != rows)):
                m.d.sync += since[b].eq(since[b] + 1)
        m.d.comb += self.stationary.ready.eq(
            self.en & self.request.valid & ~full.bit_select(load_buf, 1)
            & ~busy.bit_select(load_buf, 1) & passed)
        load_beat = Signal()
        load_done = self.request.done
        m.d.comb += [
            load_beat.eq(self.stationary.valid & self.stationary.ready),
            load_done.eq(load_beat & (load_row == self.request.beats - 1)),
        ]
        with m.If(load_beat):
            m.d.sync += load_row.eq(load_row + 1)
        with m.If(load_done):
            m.d.sync += [load_row.eq(0), load_buf.eq(~load_buf),
                         full.bit_select(load_buf, 1).eq(1)]
        with m.If(self.buffers.start):
            m.d.sync += [
                full.bit_select(use_buf, 1).eq(0),
                busy.bit_select(use_buf, 1).eq(1),
                use_buf.eq(~use_buf),
            ]
        with m.If(self.buffers.release):
            m.d.sync += busy.bit_select(self.buffers.release_sel, 1).eq(0)

        # The load enters a column-skewed lane per column, one register behind the stream
        # like the moving operands, and writes PE[row][c] as it passes column c.
        load_in = Signal(lane)
        load_values = Signal(data.ArrayLayout(self._width, cols))
        with m.If(self.en):
            m.d.sync += load_in.valid.eq(load_beat)
        col_end = Signal(SIZE_WIDTH + 1)    # lanes col .. col_end - 1 are the stationary's
        m.d.comb += col_end.eq(self.request.col + self.request.m)
        with m.If(load_beat):
            m.d.sync += [load_in.row.eq(self.request.row + load_row), load_in.buf.eq(load_buf)]
            for c in range(cols):
                value = self.stationary.payload.data[c]
                m.d.sync += load_values[c].eq(Mux(
                    (col_end > c) & (self.request.col <= c),
                    Mux(self.request.narrow, value[:8],
                        Mux(self.request.wide, value, value[:OPERAND_WIDTH])), 0))
        for c in range(cols):
            m.d.comb += [
                load_skew.i[c].valid.eq(load_in.valid),
                load_skew.i[c].row.eq(load_in.row),
                load_skew.i[c].buf.eq(load_in.buf),
                load_skew.i[c].value.eq(load_values[c]),
                self.load[c].eq(load_skew.o[c]),
            ]
        return m
