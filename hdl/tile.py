"""The tile top: stream interfaces, stationary double-buffering, skew, array, de-skew."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .layouts import (
    OPERAND_WIDTH,
    PSUM_WIDTH,
    _check_positive,
    moving_layout,
    result_layout,
    stationary_layout,
)
from .skew import SkewBuffer


class Tile(wiring.Component):
    """A weight-stationary tensor-engine tile computing ``stationary.T @ moving`` in INT8.

    Protocol (all three streams are ``amaranth.lib.stream`` valid/ready streams; a beat
    transfers on a cycle where both ``valid`` and ``ready`` are high):

    * **LoadStationary** (``stationary``): ``K`` beats, beat ``k`` = ``stationary[k, :]``,
      ``last`` on beat ``K - 1``. A load completes on ``last`` or on beat ``rows - 1``,
      whichever comes first; partition rows ``>= K`` are then inactive (they pass partial
      sums through). Loads fill two stationary buffers alternately; a load waits
      (``ready`` low) while its buffer still holds a stationary that no matmul has used yet,
      or one that the array is still computing with.
    * **MultiplyMoving** (``moving``): ``N`` beats, beat ``n`` = ``moving[:, n]`` unskewed,
      ``last`` on beat ``N - 1``. A matmul uses the oldest loaded stationary; its first beat
      waits until one is loaded. The next stationary can load in the background meanwhile.
    * **Result** (``result``): one beat per moving beat, in order: ``psum[:, n]`` as ``cols``
      INT32 lanes (wrapping modulo 2**32), ``last`` copied from the moving beat.

    The pipeline stalls as a whole while a result is offered and not taken. Latency from the
    cycle a moving beat is accepted to the cycle its result is first offered is
    :attr:`latency` = ``rows + cols`` cycles when nothing stalls.

    Parameters
    ----------
    rows : int
        Partition (contraction, K) dimension, >= 1 (128 on the real engine).
    cols : int
        Stationary free size (M), >= 1 (128 on the real engine).
    pe_module : str or None
        Passed to :class:`SystolicArray`: ``None`` for Amaranth PE submodules, or the Verilog
        module name to instantiate each PE as.

    Members
    -------
    stationary : In(stream.Signature(stationary_layout(cols)))
    moving : In(stream.Signature(moving_layout(rows)))
    result : Out(stream.Signature(result_layout(cols)))

    Raises
    ------
    ValueError
        If ``rows`` or ``cols`` is not a positive integer.
    """

    def __init__(self, rows, cols, *, pe_module=None):
        _check_positive("rows", rows)
        _check_positive("cols", cols)
        self._rows = rows
        self._cols = cols
        self._pe_module = pe_module
        super().__init__({
            "stationary": In(stream.Signature(stationary_layout(cols))),
            "moving": In(stream.Signature(moving_layout(rows))),
            "result": Out(stream.Signature(result_layout(cols))),
        })

    @property
    def rows(self):
        """Partition (K) dimension (int, read-only)."""
        return self._rows

    @property
    def cols(self):
        """Stationary free size (M) (int, read-only)."""
        return self._cols

    @property
    def latency(self):
        """Cycles from a moving beat's acceptance to its result being offered (int)."""
        return self._rows + self._cols

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols

        m.submodules.array = array = SystolicArray(rows, cols, pe_module=self._pe_module)
        lane = data.StructLayout({"value": signed(OPERAND_WIDTH), "sel": 1})
        m.submodules.skew = skew = SkewBuffer(lane, range(rows))
        m.submodules.deskew = deskew = SkewBuffer(signed(PSUM_WIDTH),
                                                  range(cols - 1, -1, -1))

        # Pipeline advance: everything moves unless a result is offered and not taken.
        advance = Signal()
        m.d.comb += advance.eq(~self.result.valid | self.result.ready)
        m.d.comb += [array.en.eq(advance), skew.en.eq(advance), deskew.en.eq(advance)]

        # ---- stationary double buffer -------------------------------------------------
        load_buf = Signal()          # buffer the next LoadStationary writes
        load_row = Signal(range(rows))  # partition row the next stationary beat writes
        use_buf = Signal()           # buffer the next MultiplyMoving uses
        running = Signal()           # a matmul has started and not seen its last beat
        full = Signal(2)             # buffer loaded and not yet taken by a matmul
        busy = Signal(2)             # buffer taken by a matmul whose results are in flight
        row_active = Signal(data.ArrayLayout(2, rows))

        m.d.comb += self.stationary.ready.eq(
            ~full.bit_select(load_buf, 1) & ~busy.bit_select(load_buf, 1))
        load_beat = Signal()
        load_done = Signal()
        m.d.comb += [
            load_beat.eq(self.stationary.valid & self.stationary.ready),
            load_done.eq(load_beat & (self.stationary.payload.last | (load_row == rows - 1))),
            array.load_buf.eq(load_buf),
            array.load_data.eq(self.stationary.payload.data),
            array.row_active.eq(row_active),
        ]
        for k in range(rows):
            m.d.comb += array.load_row_en[k].eq(load_beat & (load_row == k))
            with m.If(load_beat):
                with m.If(load_row == k):
                    m.d.sync += row_active[k].bit_select(load_buf, 1).eq(1)
                with m.Elif(load_done & (load_row < k)):
                    m.d.sync += row_active[k].bit_select(load_buf, 1).eq(0)
        with m.If(load_beat):
            m.d.sync += load_row.eq(load_row + 1)
        with m.If(load_done):
            m.d.sync += [
                load_row.eq(0),
                full.bit_select(load_buf, 1).eq(1),
                load_buf.eq(~load_buf),
            ]

        # ---- moving stream and token pipeline ----------------------------------------
        token = data.StructLayout({"valid": 1, "last": 1, "sel": 1})
        tokens = [Signal(token, name=f"token_{i}") for i in range(self.latency)]

        m.d.comb += self.moving.ready.eq(advance & (running | full.bit_select(use_buf, 1)))
        moving_beat = Signal()
        m.d.comb += moving_beat.eq(self.moving.valid & self.moving.ready)
        with m.If(moving_beat):
            with m.If(~running):
                m.d.sync += [
                    running.eq(1),
                    full.bit_select(use_buf, 1).eq(0),
                    busy.bit_select(use_buf, 1).eq(1),
                ]
            with m.If(self.moving.payload.last):
                m.d.sync += [running.eq(0), use_buf.eq(~use_buf)]

        # Input register: the unskewed vector plus its token. The vector only changes on a
        # real beat, so bubbles do not toggle the array (this also keeps event-driven
        # simulators such as Icarus from evaluating garbage).
        in_vector = Signal(moving_layout(rows))
        with m.If(moving_beat):
            m.d.sync += in_vector.eq(self.moving.payload)
        with m.If(advance):
            m.d.sync += [
                tokens[0].valid.eq(moving_beat),
                tokens[0].last.eq(self.moving.payload.last),
                tokens[0].sel.eq(use_buf),
            ]
            for i in range(1, self.latency):
                m.d.sync += tokens[i].eq(tokens[i - 1])

        for k in range(rows):
            m.d.comb += [
                skew.i[k].value.eq(in_vector.data[k]),
                skew.i[k].sel.eq(tokens[0].sel),
                array.moving[k].eq(skew.o[k].value),
                array.sel[k].eq(skew.o[k].sel),
            ]
        m.d.comb += deskew.i.eq(array.psum)

        out_token = tokens[-1]
        m.d.comb += [
            self.result.valid.eq(out_token.valid),
            self.result.payload.data.eq(deskew.o),
            self.result.payload.last.eq(out_token.last),
        ]
        # The buffer is free once the matmul's last result leaves the tile.
        with m.If(self.result.valid & self.result.ready & out_token.last):
            m.d.sync += busy.bit_select(out_token.sel, 1).eq(0)
        return m
