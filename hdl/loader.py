"""The tile's stationary loader: LoadStationary into one of each PE's two weight buffers
(shadow weights), tracked per finest tile."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import load_lane_layout
from .command_queue import COMMAND_QUEUE_DEPTH, load_request_signature
from .layouts import (
    MX_SCALE_BITS,
    OPERAND_WIDTH,
    SIZE_WIDTH,
    cell_grid,
    cell_mask,
    stationary_layout,
)
from .mx_quad import fp4_word
from .skew import SkewBuffer


def buffer_cells(rows, cols):
    """The cells in which a tile of ``rows x cols`` PEs tracks its weight buffers:
    ``(row cells, column cells)``, a cell being the finest tile
    (:func:`~.layouts.cell_grid`); cell ``(g, h)`` is bit ``g * column cells + h`` of a
    cell mask."""
    return cell_grid(rows)[0], cell_grid(cols)[0]


def buffer_control_signature(cells=1):
    """Use of the stationary buffers, as the issue logic drives it (wiring.Signature), on a
    tile of ``cells`` buffer cells (:func:`buffer_cells`).

    Members
    -------
    start : Out(1)
        A matmul starts this cycle (its first moving beat issues): it takes the oldest
        loaded matmul's buffer ``sel`` in ``cells``, which go from loaded to in use at the
        clock edge.
    release : Out(1)
        Matmuls issue their last moving beat this cycle (several, in tiles that share no
        PE): in each cell of ``release_cells``, buffer ``release_sel`` (that cell's bit)
        becomes free at the clock edge (after ``start``'s update, so a one-beat matmul
        frees its buffer at once).
    release_sel : Out(cells)
        Bit ``i``: the buffer the releasing matmul in cell ``i`` used.
    release_cells : Out(cells)
        The cells of the releasing matmuls' tiles (a cell mask).
    sel : In(1)
        The buffer the next matmul uses (registered).
    cells : In(cells)
        The cells of the next matmul's tile (registered).
    """
    return wiring.Signature({"start": Out(1), "release": Out(1), "release_sel": Out(cells),
                             "release_cells": Out(cells), "sel": In(1), "cells": In(cells)})


class StationaryLoader(wiring.Component):
    """Loads stationary rows into the PE grid's two weight buffers, one buffer per matmul.

    Loads run in command order (the queue's ``request``: the oldest queued matmul whose
    stationary is not loaded). The buffers are tracked per cell (:func:`buffer_cells`, the
    finest tile): in each, buffer ``b`` is loaded for a matmul that has not started
    (``full``), in use by one still sending moving beats (``busy``), or free, with the
    enabled cycles since its last matmul's last moving beat (up to ``rows``). A load writes
    one buffer in every PE of its tile (``docs/numerics.md``, tiles choice 11): buffer 0 if
    it is free in every cell of the tile and its last beat has had ``request.row`` cycles
    to reach the tile's first row, else buffer 1 if that holds for it; ``stationary.ready``
    is ``en & request.valid`` while one of them does (the choice is kept from the load's
    first beat, ``load_buf``). Beat ``k`` of a load writes partition row ``request.row +
    k``; the beat that completes ``request.beats`` raises ``request.done``
    (combinational) and, at the clock edge, marks the buffer full in the tile's cells,
    queues the buffer and the cells for the matmul's start (``buffers.sel``,
    ``buffers.cells``: the oldest loaded matmul's) and restarts the row count.

    Each beat is registered once (lanes outside ``request.col .. request.col + M - 1``
    zeroed, and bits [15:8] of every lane when ``request.narrow``: an 8-bit type outside
    double-row mode; with 32-bit lanes, bits [31:16] unless ``request.wide``; with
    ``request.fp4``, bits [15:0] converted to the x4 word of their e4m3fn values) and enters a
    column-skewed lane per column, written only in the tile's columns (``request.col ..
    request.col + request.tcols - 1``, so a load leaves the other tiles' weights alone):
    the write reaches column ``c`` of the array ``1 + c`` enabled cycles after its beat,
    like the moving data, so it only overwrites PEs that the previous matmul's last beat
    has passed. Everything but the buffer state and the row count (updated by beats only)
    advances with ``en``.

    Parameters
    ----------
    rows, cols : int
        The tile's partition rows and columns, >= 1.
    width : int
        Bits of an operand lane: 16, or 32 on a tile with TF32 / FP32 or MX.
    mx : bool
        The MX datapath: each stationary lane's E8M0 ``scale`` travels with its value.
    depth : int
        Loaded matmuls that have not started it keeps track of, >= 1 (the command queue's
        depth, default :data:`~.command_queue.COMMAND_QUEUE_DEPTH`).

    Members
    -------
    en : In(1)
        The tile's pipeline advance.
    stationary : In(stream.Signature(stationary_layout(cols, width)))
        LoadStationary beats from the tile's ``stationary`` stream.
    request : In(:func:`~.command_queue.load_request_signature`)
        The load the command queue waits for (and ``done`` back to it).
    buffers : In(:func:`buffer_control_signature`)
        Matmul starts and buffer releases from the issue logic (and ``sel``, ``cells`` back
        to it).
    load : Out(ArrayLayout(load_lane_layout(rows, width), cols))
        The array's skewed stationary write lanes.
    load_buf : Out(1)
        The buffer the load under way writes, from its first beat (registered;
        observation).
    load_row : Out(range(rows))
        The partition row the next stationary beat writes (registered; 0 bits when
        ``rows`` = 1; observation).
    full : Out(2 * cells)
        Bit ``2 * i + b``: buffer ``b`` of cell ``i`` is loaded for a matmul that has not
        started (registered; observation).
    busy : Out(2 * cells)
        Bit ``2 * i + b``: buffer ``b`` of cell ``i`` is used by a matmul still sending
        moving beats (registered; observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, rows, cols, width=OPERAND_WIDTH, depth=COMMAND_QUEUE_DEPTH, mx=False):
        self._rows, self._cols, self._width, self._depth = rows, cols, width, depth
        self._mx = bool(mx)
        row_cells, col_cells = buffer_cells(rows, cols)
        self._cells = row_cells * col_cells
        super().__init__({
            "en": In(1),
            "stationary": In(stream.Signature(stationary_layout(cols, width, self._mx))),
            "request": In(load_request_signature()),
            "buffers": In(buffer_control_signature(self._cells)),
            "load": Out(data.ArrayLayout(load_lane_layout(rows, width, self._mx), cols)),
            "load_buf": Out(1),
            "load_row": Out(range(rows)),
            "full": Out(2 * self._cells),
            "busy": Out(2 * self._cells),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, request = self._rows, self._cols, self.request
        row_cells, col_cells = buffer_cells(rows, cols)
        lane = load_lane_layout(rows, self._width, self._mx)
        m.submodules.load_skew = load_skew = SkewBuffer(lane, range(cols))
        m.d.comb += load_skew.en.eq(self.en)

        load_buf = self.load_buf         # buffer the load under way writes
        load_row = self.load_row         # partition row the next stationary beat writes
        # The request's tile as a cell mask.
        in_rows, in_cols = Signal(row_cells), Signal(col_cells)
        m.d.comb += [in_rows.eq(cell_mask(request.row, request.trows, rows)),
                     in_cols.eq(cell_mask(request.col, request.tcols, cols))]
        tile_cells = Signal(self._cells)
        m.d.comb += tile_cells.eq(Cat(in_rows[g] & in_cols[h] for g in range(row_cells)
                                      for h in range(col_cells)))
        # Per cell and buffer: loaded for a matmul not started, in use, and enabled cycles
        # since its last matmul's last moving beat, up to rows.
        full = [Signal(2, name=f"full_{i}") for i in range(self._cells)]
        busy = [Signal(2, name=f"busy_{i}") for i in range(self._cells)]
        since = [[Signal(range(rows + 1), init=rows, name=f"since_{i}_{b}") for b in range(2)]
                 for i in range(self._cells)]
        usable = [Signal(name=f"usable_{b}") for b in range(2)]
        for b in range(2):
            m.d.comb += usable[b].eq(Cat(
                ~tile_cells[i] | (~full[i][b] & ~busy[i][b] & (since[i][b] >= request.row))
                for i in range(self._cells)).all())
        choice = Signal()       # the buffer the next beat writes
        can = Signal()
        m.d.comb += [choice.eq(Mux(load_row == 0, ~usable[0], load_buf)),
                     can.eq((load_row != 0) | usable[0] | usable[1])]
        m.d.comb += self.stationary.ready.eq(self.en & request.valid & can)
        load_beat = Signal()
        load_done = request.done
        m.d.comb += [
            load_beat.eq(self.stationary.valid & self.stationary.ready),
            load_done.eq(load_beat & (load_row == request.beats - 1)),
        ]
        with m.If(load_beat):
            m.d.sync += [load_row.eq(load_row + 1), load_buf.eq(choice)]
        with m.If(load_done):
            m.d.sync += load_row.eq(0)

        # Loaded matmuls not started, oldest first (filled from 0): their buffer and cells.
        entry = data.StructLayout({"valid": 1, "sel": 1, "cells": self._cells})
        pending = [Signal(entry, name=f"pending_{i}") for i in range(self._depth)]
        kept = [Signal(entry, name=f"kept_{i}") for i in range(self._depth)]   # after a start
        start, release = self.buffers.start, self.buffers.release
        m.d.comb += [self.buffers.sel.eq(pending[0].sel),
                     self.buffers.cells.eq(pending[0].cells)]
        for i in range(self._depth):
            after = pending[i + 1] if i + 1 < self._depth else entry.const({})
            m.d.comb += kept[i].eq(Mux(start, after, pending[i]))
            first_free = ~kept[i].valid & (kept[i - 1].valid if i else 1)
            with m.If(load_done & first_free):
                m.d.sync += [pending[i].valid.eq(1), pending[i].sel.eq(choice),
                             pending[i].cells.eq(tile_cells)]
            with m.Else():
                m.d.sync += pending[i].eq(kept[i])
        for i in range(self._cells):
            for b in range(2):
                head = start & (self.buffers.sel == b) & self.buffers.cells[i]
                freed = (release & (self.buffers.release_sel[i] == b)
                         & self.buffers.release_cells[i])
                with m.If(load_done & (choice == b) & tile_cells[i]):
                    m.d.sync += full[i][b].eq(1)
                with m.Elif(head):
                    m.d.sync += full[i][b].eq(0)
                with m.If(freed):
                    m.d.sync += [busy[i][b].eq(0), since[i][b].eq(0)]
                with m.Elif(head):
                    m.d.sync += busy[i][b].eq(1)
                with m.If(~freed & self.en & (since[i][b] != rows)):
                    m.d.sync += since[i][b].eq(since[i][b] + 1)
        m.d.comb += [self.full.eq(Cat(full)), self.busy.eq(Cat(busy))]

        # The load enters a column-skewed lane per column, one register behind the stream
        # like the moving operands, and writes PE[row][c] as it passes column c.
        load_in = Signal(lane)
        load_values = Signal(data.ArrayLayout(self._width, cols))
        load_scales = Signal(data.ArrayLayout(MX_SCALE_BITS, cols)) if self._mx else None
        load_cols = Signal(cols)         # the columns of the load's tile
        with m.If(self.en):
            m.d.sync += load_in.valid.eq(load_beat)
        col_end = Signal(SIZE_WIDTH + 1)    # lanes col .. col_end - 1 are the stationary's
        tile_end = Signal(SIZE_WIDTH + 1)   # lanes col .. tile_end - 1 are the tile's
        m.d.comb += [col_end.eq(request.col + request.m),
                     tile_end.eq(request.col + request.tcols)]
        # An MXFP4 stationary's four e2m1 elements (bits [15:0]) become the x4 word of their
        # e4m3fn values (the default MXFP4 -> MXFP8 mapping, exact) before the lanes.
        words = [self.stationary.payload.data[c] for c in range(cols)]
        if self._mx:
            words = [Mux(request.fp4, fp4_word(m, word, f"fp4_{c}"), word)
                     for c, word in enumerate(words)]
        with m.If(load_beat):
            m.d.sync += load_in.row.eq(request.row + load_row)
            for c in range(cols):
                value = words[c]
                if self._mx:     # zero outside M too: a zero word with scale 0 adds +0
                    m.d.sync += load_scales[c].eq(Mux((col_end > c) & (request.col <= c),
                                                      self.stationary.payload.scale[c], 0))
                m.d.sync += [
                    load_values[c].eq(Mux(
                        (col_end > c) & (request.col <= c),
                        Mux(request.narrow, value[:8],
                            Mux(request.wide, value, value[:OPERAND_WIDTH])), 0)),
                    load_cols[c].eq((tile_end > c) & (request.col <= c)),
                ]
        for c in range(cols):
            m.d.comb += [
                load_skew.i[c].valid.eq(load_in.valid & load_cols[c]),
                load_skew.i[c].row.eq(load_in.row),
                load_skew.i[c].buf.eq(load_buf),     # set with load_in, on the beat
                load_skew.i[c].value.eq(load_values[c]),
                *([load_skew.i[c].scale.eq(load_scales[c])] if self._mx else []),
                self.load[c].eq(load_skew.o[c]),
            ]
        return m
