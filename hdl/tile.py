"""The tile top: streams, stationary double-buffering, skew, array, de-skew, PSUM."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .layouts import (
    OPERAND_WIDTH,
    PSUM_DEPTH,
    PSUM_WIDTH,
    DType,
    _check_positive,
    moving_layout,
    result_layout,
    stationary_layout,
)
from .psum import Psum
from .skew import SkewBuffer


class Tile(wiring.Component):
    """A weight-stationary tensor-engine tile computing ``stationary.T @ moving`` into PSUM.

    Each matmul is INT8 x INT8 -> INT32 or BF16 x BF16 -> FP32, chosen per matmul; the same
    hardware runs both back to back. Protocol (all three streams are
    ``amaranth.lib.stream`` valid/ready streams; a beat transfers on a cycle where both
    ``valid`` and ``ready`` are high):

    * **LoadStationary** (``stationary``): ``K`` beats, beat ``k`` = ``stationary[k, :]`` in
      the data type of the matmul that will use it, ``last`` on beat ``K - 1``. A load
      completes on ``last`` or on beat ``rows - 1``, whichever comes first; partition rows
      ``>= K`` are then inactive (they pass partial sums through). Loads fill two stationary
      buffers alternately; a load waits (``ready`` low) while its buffer still holds a
      stationary that no matmul has used yet, or one that the array is still computing with.
    * **MultiplyMoving** (``moving``): ``N`` beats, beat ``n`` = ``moving[:, n]`` unskewed,
      ``last`` on beat ``N - 1``; the first beat's ``dtype``, ``ftz`` and ``accumulate``
      apply to the whole matmul. A matmul uses the oldest loaded stationary; its first beat
      waits until one is loaded. The next stationary can load in the background meanwhile.
    * **Result** (``result``): one beat per moving beat, in order: PSUM entry ``n`` after
      the matmul (``cols`` INT32 or FP32 lanes), ``last`` copied from the moving beat.
      Beat ``n`` of a matmul writes PSUM entry ``n mod psum_depth``; ``accumulate`` adds the
      column into the stored entry, otherwise the entry is overwritten without being read.

    The pipeline stalls as a whole while a result is offered and not taken. Latency from the
    cycle a moving beat is accepted to the cycle its result is first offered is
    :attr:`latency` = ``rows + cols`` cycles when nothing stalls.

    Parameters
    ----------
    rows : int
        Partition (contraction, K) dimension, >= 1 (128 on the real engine).
    cols : int
        Stationary free size (M), >= 1 (128 on the real engine).
    psum_depth : int
        PSUM entries (the largest N that accumulates without wrapping), default 512.
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
        If ``rows``, ``cols`` or ``psum_depth`` is not a positive integer.
    """

    def __init__(self, rows, cols, *, psum_depth=PSUM_DEPTH, pe_module=None):
        _check_positive("rows", rows)
        _check_positive("cols", cols)
        _check_positive("psum_depth", psum_depth)
        self._rows = rows
        self._cols = cols
        self._psum_depth = psum_depth
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
    def psum_depth(self):
        """PSUM entries (int, read-only)."""
        return self._psum_depth

    @property
    def latency(self):
        """Cycles from a moving beat's acceptance to its result being offered (int)."""
        return self._rows + self._cols

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols

        m.submodules.array = array = SystolicArray(rows, cols, pe_module=self._pe_module)
        lane = data.StructLayout({"value": OPERAND_WIDTH, "sel": 1})
        m.submodules.skew = skew = SkewBuffer(lane, range(rows))
        m.submodules.deskew = deskew = SkewBuffer(PSUM_WIDTH, range(cols - 1, -1, -1))
        m.submodules.psum = psum = Psum(cols, self._psum_depth)

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
        buf_bf16 = Signal(2)         # per buffer: its matmul is BF16
        buf_ftz = Signal(2)          # per buffer: its matmul flushes subnormals

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
            array.bf16.eq(buf_bf16),
            array.ftz.eq(buf_ftz),
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

        # ---- moving stream: per-matmul mode, taken from the first beat ---------------------
        moving = self.moving.payload
        cur_bf16, cur_ftz, cur_acc = Signal(), Signal(), Signal()
        beat_bf16, beat_ftz, beat_acc = Signal(), Signal(), Signal()
        m.d.comb += [
            beat_bf16.eq(Mux(running, cur_bf16, moving.dtype == DType.BF16)),
            beat_ftz.eq(Mux(running, cur_ftz, moving.ftz)),
            beat_acc.eq(Mux(running, cur_acc, moving.accumulate)),
        ]
        m.d.comb += self.moving.ready.eq(advance & (running | full.bit_select(use_buf, 1)))
        moving_beat = Signal()
        m.d.comb += moving_beat.eq(self.moving.valid & self.moving.ready)
        with m.If(moving_beat):
            with m.If(~running):
                m.d.sync += [
                    running.eq(1),
                    full.bit_select(use_buf, 1).eq(0),
                    busy.bit_select(use_buf, 1).eq(1),
                    buf_bf16.bit_select(use_buf, 1).eq(beat_bf16),
                    buf_ftz.bit_select(use_buf, 1).eq(beat_ftz),
                    cur_bf16.eq(beat_bf16),
                    cur_ftz.eq(beat_ftz),
                    cur_acc.eq(beat_acc),
                ]
            with m.If(moving.last):
                m.d.sync += [running.eq(0), use_buf.eq(~use_buf)]

        # ---- token pipeline: what each beat in flight is, for the PSUM stage ------------
        token = data.StructLayout({"valid": 1, "last": 1, "sel": 1, "bf16": 1, "ftz": 1,
                                   "accumulate": 1})
        tokens = [Signal(token, name=f"token_{i}") for i in range(self.latency)]
        # The operand vector only changes on a real beat, so bubbles do not toggle the array
        # (this also keeps event-driven simulators such as Icarus from evaluating garbage).
        in_vector = Signal(data.ArrayLayout(OPERAND_WIDTH, rows))
        with m.If(moving_beat):
            m.d.sync += in_vector.eq(moving.data)
        with m.If(advance):
            m.d.sync += [
                tokens[0].valid.eq(moving_beat),
                tokens[0].last.eq(moving.last),
                tokens[0].sel.eq(use_buf),
                tokens[0].bf16.eq(beat_bf16),
                tokens[0].ftz.eq(beat_ftz),
                tokens[0].accumulate.eq(beat_acc),
            ]
            for i in range(1, self.latency):
                m.d.sync += tokens[i].eq(tokens[i - 1])

        for k in range(rows):
            m.d.comb += [
                skew.i[k].value.eq(in_vector[k]),
                skew.i[k].sel.eq(tokens[0].sel),
                array.moving[k].eq(skew.o[k].value),
                array.sel[k].eq(skew.o[k].sel),
            ]
        m.d.comb += deskew.i.eq(array.psum)

        # ---- PSUM and the result stream -------------------------------------------------
        out_token = tokens[-1]
        psum_addr = Signal(range(self._psum_depth))
        result_beat = Signal()
        m.d.comb += [
            result_beat.eq(self.result.valid & self.result.ready),
            psum.addr.eq(psum_addr),
            psum.column.eq(deskew.o),
            psum.accumulate.eq(out_token.accumulate),
            psum.bf16.eq(out_token.bf16),
            psum.ftz.eq(out_token.ftz),
            psum.write.eq(result_beat),
            self.result.valid.eq(out_token.valid),
            self.result.payload.data.eq(psum.result),
            self.result.payload.last.eq(out_token.last),
        ]
        with m.If(result_beat):
            if self._psum_depth > 1:
                m.d.sync += psum_addr.eq(Mux(psum_addr == self._psum_depth - 1, 0,
                                             psum_addr + 1))
            with m.If(out_token.last):
                m.d.sync += psum_addr.eq(0)
                # The buffer is free once the matmul's last result leaves the tile.
                m.d.sync += busy.bit_select(out_token.sel, 1).eq(0)
        return m
