"""The tile's result path: the token pipeline, de-skew, PSUM and the result stream."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import PSUM_WIDTH, result_layout, token_layout
from .psum import Psum
from .skew import SkewBuffer


class ResultPath(wiring.Component):
    """Carries each issued beat's token to the PSUM stage and offers its result.

    The pipeline advances (``advance``, combinational) unless a result is offered and not
    taken: ``advance = ~result.valid | result.ready``; the tile's every stage (array, skews,
    loads, issue) moves with it. Each enabled cycle the issued ``token`` enters a shift
    register of ``latency`` stages (``token_0`` .. ``token_<latency - 1>``); the last stage
    (``out_token``) is the beat whose result is offered: ``result.valid`` is its ``valid``,
    ``result.payload.last`` its ``last``. The array's skewed column (``column``, column ``c``
    ``c`` cycles ahead of column ``cols - 1``) is de-skewed (column ``c`` delayed
    ``cols - 1 - c`` enabled cycles) into :class:`~.psum.Psum`, which offers entry
    ``out_token.addr`` (a READ's stored word, the new column, or stored + column, in the
    columns of the beat's column tile, ``out_token.span`` / ``part``); the word
    is written back at the edge of the cycle the result transfers (``write``), unless the
    beat is a READ. With the issue logic's one register and the array's skew, a beat issued
    in cycle ``t`` is offered in cycle ``t + latency`` when nothing stalls.

    Parameters
    ----------
    cols : int
        The tile's columns, >= 1.
    latency : int
        Token pipeline stages, >= 1 (the tile's ``rows + cols``).
    psum_depth : int
        Flat PSUM addresses (banks x entries), >= 1.

    Members
    -------
    advance : Out(1)
        The pipeline moves this cycle (combinational).
    token : In(token_layout(psum_depth))
        The beat the issue logic issues this cycle (``valid`` low when none).
    column : In(ArrayLayout(PSUM_WIDTH, cols))
        The array's bottom-row partial sums (skewed).
    result : Out(stream.Signature(result_layout(cols)))
        The tile's result stream.
    out_token : Out(token_layout(psum_depth))
        The token at the PSUM stage, ``token_<latency - 1>`` (registered; observation).
    write : Out(1)
        PSUM write strobe: the offered result transfers and is not a READ's
        (combinational; observation).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, cols, latency, *, psum_depth):
        self._cols, self._latency, self._depth = cols, latency, psum_depth
        super().__init__({
            "advance": Out(1),
            "token": In(token_layout(psum_depth)),
            "column": In(data.ArrayLayout(PSUM_WIDTH, cols)),
            "result": Out(stream.Signature(result_layout(cols))),
            "out_token": Out(token_layout(psum_depth)),
            "write": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cols, depth = self._cols, self._depth
        advance = self.advance
        m.d.comb += advance.eq(~self.result.valid | self.result.ready)
        m.submodules.deskew = deskew = SkewBuffer(PSUM_WIDTH, range(cols - 1, -1, -1))
        m.submodules.psum = psum = Psum(cols, depth)
        m.d.comb += [deskew.en.eq(advance), deskew.i.eq(self.column)]

        # What each beat in flight is, for the PSUM stage.
        tokens = [Signal(token_layout(depth), name=f"token_{i}")
                  for i in range(self._latency)]
        with m.If(advance):
            m.d.sync += tokens[0].eq(self.token)
            for i in range(1, self._latency):
                m.d.sync += tokens[i].eq(tokens[i - 1])

        out_token = tokens[-1]
        result_beat = Signal()
        m.d.comb += [
            self.out_token.eq(out_token),
            result_beat.eq(self.result.valid & self.result.ready),
            self.write.eq(result_beat & ~out_token.read),
            psum.addr.eq(out_token.addr),
            psum.column.eq(deskew.o),
            psum.read.eq(out_token.read),
            psum.accumulate.eq(out_token.accumulate),
            psum.fp32.eq(out_token.fp32),
            psum.ftz.eq(out_token.ftz),
            psum.span.eq(out_token.span),
            psum.part.eq(out_token.part),
            psum.write.eq(self.write),
            self.result.valid.eq(out_token.valid),
            self.result.payload.data.eq(psum.result),
            self.result.payload.last.eq(out_token.last),
        ]
        return m
