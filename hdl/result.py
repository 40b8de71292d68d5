"""The tile's result path: the token pipeline, de-skew, PSUM and the result stream."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import MX_TOKEN, PSUM_WIDTH, cell_grid, result_layout, token_layout
from .psum import Psum
from .skew import SkewBuffer


class ResultPath(wiring.Component):
    """Carries each issued beat's tokens to the PSUM stage and offers its result.

    The pipeline advances (``advance``, combinational) unless a result is offered and not
    taken: ``advance = ~result.valid | result.ready``; the tile's every stage (array, skews,
    loads, issue) moves with it. Each enabled cycle the issued ``tokens`` (one per column
    cell, :func:`~.layouts.cell_grid`) enter a shift register of ``latency`` stages
    (``token_0`` .. ``token_<latency - 1>``); the last stage (``out_token``) holds the
    beats whose results are offered: ``result.valid`` is high when one of its cells'
    tokens is, ``result.payload.groups`` bit ``h`` is cell ``h``'s ``valid`` and
    ``result.payload.last`` bit ``h`` its ``last``. The array's skewed column
    (``column``, column ``c`` ``c`` cycles ahead of column ``cols - 1``) is de-skewed
    (column ``c`` delayed ``cols - 1 - c`` enabled cycles) into one
    :class:`~.psum.Psum` per column cell, which offers its entry ``out_token[h].addr`` (a
    READ's stored word, the new column, or stored + column); the word is written back at
    the edge of the cycle the result transfers (``write``) in each cell whose token is
    valid and not a READ's. With the issue logic's one register and the array's skew, a
    beat issued in cycle ``t`` is offered in cycle ``t + latency`` when nothing stalls.

    Parameters
    ----------
    cols : int
        The tile's columns, >= 1.
    latency : int
        Token pipeline stages, >= 1 (the tile's ``rows + cols``).
    psum_depth : int
        Flat PSUM addresses (banks x entries), >= 1.
    mx : bool
        The tokens carry ``bf16`` and PSUM has the BF16 write (the MX datapath).

    Members
    -------
    advance : Out(1)
        The pipeline moves this cycle (combinational).
    tokens : In(ArrayLayout(token_layout(psum_depth), column cells))
        The beats the issue logic issues this cycle, per column cell (``valid`` low where
        none).
    column : In(ArrayLayout(PSUM_WIDTH, cols))
        The array's bottom-row partial sums (skewed).
    result : Out(stream.Signature(result_layout(cols)))
        The tile's result stream.
    out_token : Out(ArrayLayout(token_layout(psum_depth), column cells))
        The tokens at the PSUM stage, ``token_<latency - 1>`` (registered; observation).
    write : Out(1)
        PSUM write strobe: the offered result transfers and a cell's token is not a
        READ's (combinational; observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, cols, latency, *, psum_depth, mx=False):
        self._cols, self._latency, self._depth = cols, latency, psum_depth
        self._mx = bool(mx)
        self._cells, self._grain = cell_grid(cols)
        tokens = data.ArrayLayout(token_layout(psum_depth, self._mx), self._cells)
        super().__init__({
            "advance": Out(1),
            "tokens": In(tokens),
            "column": In(data.ArrayLayout(PSUM_WIDTH, cols)),
            "result": Out(stream.Signature(result_layout(cols))),
            "out_token": Out(tokens),
            "write": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cols, depth, cells, grain = self._cols, self._depth, self._cells, self._grain
        advance = self.advance
        m.d.comb += advance.eq(~self.result.valid | self.result.ready)
        m.submodules.deskew = deskew = SkewBuffer(PSUM_WIDTH, range(cols - 1, -1, -1))
        m.d.comb += [deskew.en.eq(advance), deskew.i.eq(self.column)]

        # What each beat in flight is, per column cell, for the PSUM stage.
        layout = data.ArrayLayout(token_layout(depth, self._mx), cells)
        tokens = [Signal(layout, name=f"token_{i}") for i in range(self._latency)]
        with m.If(advance):
            m.d.sync += tokens[0].eq(self.tokens)
            for i in range(1, self._latency):
                m.d.sync += tokens[i].eq(tokens[i - 1])

        out_token = tokens[-1]
        result_beat = Signal()
        writes = []
        m.d.comb += [
            self.out_token.eq(out_token),
            result_beat.eq(self.result.valid & self.result.ready),
            self.result.valid.eq(Cat(out_token[h].valid for h in range(cells)).any()),
        ]
        for h in range(cells):
            token = out_token[h]
            psum = m.submodules[f"psum_{h}"] = Psum(grain, depth, self._mx, col0=h * grain)
            write = Signal(name=f"write_{h}")
            m.d.comb += [
                write.eq(result_beat & token.valid & ~token.read),
                psum.addr.eq(token.addr),
                psum.read.eq(token.read),
                psum.accumulate.eq(token.accumulate),
                psum.fp32.eq(token.fp32),
                psum.ftz.eq(token.ftz),
                psum.write.eq(write),
                *([getattr(psum, name).eq(token[name]) for name in MX_TOKEN] if self._mx
                  else []),
                self.result.payload.groups[h].eq(token.valid),
                self.result.payload.last[h].eq(token.last),
            ]
            for i in range(grain):
                m.d.comb += [psum.column[i].eq(deskew.o[h * grain + i]),
                             self.result.payload.data[h * grain + i].eq(psum.result[i])]
            writes.append(write)
        m.d.comb += self.write.eq(Cat(writes).any())
        return m
