"""The tile top: command queue, stationary double-buffering, skew, array, de-skew, PSUM."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import SystolicArray, load_lane_layout, operand_lane_layout
from .layouts import (
    BANK_WIDTH,
    OPERAND_WIDTH,
    PSUM_BANKS,
    PSUM_ENTRIES,
    PSUM_WIDTH,
    SIZE_WIDTH,
    DType,
    ErrorCode,
    Op,
    _check_positive,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
)
from .psum import Psum
from .skew import SkewBuffer

#: Commands the tile holds that have been accepted and not started (the command queue).
#: Three is the fewest that never holds back a stationary load in a back-to-back program.
COMMAND_QUEUE_DEPTH = 3


def token_layout(psum_depth):
    """What each beat in flight is, for the PSUM stage (StructLayout).

    ``valid``, ``last`` (final beat of its command), ``fp32`` (a float matmul: FP32 PSUM
    words), ``ftz``, ``accumulate``,
    ``read`` (a READ beat) and ``addr``, the flat PSUM address ``bank * entries + entry``
    (``range(psum_depth)``).
    """
    return data.StructLayout({"valid": 1, "last": 1, "fp32": 1, "ftz": 1, "accumulate": 1,
                              "read": 1, "addr": range(psum_depth)})


class Tile(wiring.Component):
    """A weight-stationary tensor-engine tile computing ``stationary.T @ moving`` into PSUM.

    Each matmul is INT8 x INT8 -> INT32 or any pair of float types (BF16, FP16, FP8 e4m3 /
    e5m2 / e3m4 / e4m3fn) -> FP32, chosen per command with each operand's type; the same
    hardware runs them all back to back. FP8 double-row matmuls (``double_row``, e4m3 /
    e5m2) take K up to ``2 * rows``: partition row r's lanes carry k = r in bits [7:0] and
    k = r + rows in bits [15:8], and ``min(K, rows)`` stationary beats.

    Four streams (``amaranth.lib.stream`` valid/ready; a beat transfers on a cycle where
    both are high) and a status output:

    * **command**: one beat per command (:func:`~.layouts.command_layout`). Each command is
      checked when it is accepted; an illegal one (bank >= ``psum_banks``; for a matmul
      K = 0 or K > ``rows`` (``2 * rows`` double-row), M = 0 or M > ``cols``; N = 0 or
      ``offset + N`` > ``psum_entries``) is dropped: it takes no stationary or moving
      beats, sends no results, and increments ``status.rejected`` with ``status.error`` set to its
      :class:`~.layouts.ErrorCode`. Legal commands wait in a queue of
      :data:`COMMAND_QUEUE_DEPTH` and execute in order; ``ready`` is low while it is full.
    * **stationary** (LoadStationary): ``K`` beats per matmul, beat ``k`` =
      ``stationary[k, :]``, lanes ``>= M`` ignored. Loads run in command order into two
      stationary buffers alternately, as soon as the matmul's command is queued and its
      buffer is free: a buffer is free once the matmul that used it has sent its last moving
      beat (the load is skewed by column like the moving data, so it only overwrites PEs
      that beat has passed). So the next stationary loads while the current matmul streams,
      and back-to-back matmuls run at ``max(K, N)`` cycles each.
    * **moving** (MultiplyMoving): ``N`` beats per matmul, beat ``n`` = ``moving[:, n]``
      unskewed. A matmul starts once its stationary is loaded and the previous command has
      sent all its beats into the array; then one beat per cycle.
    * **result**: one beat per moving beat, in order: PSUM entry ``offset + n`` of the
      command's bank after the matmul (``cols`` INT32 or FP32 lanes). ``accumulate`` adds the
      column into the stored entry, otherwise the entry is overwritten without being read.
      A READ command sends stored entries ``offset .. offset + N - 1`` of its bank, one per
      cycle, through the same pipeline (so it follows every earlier matmul's writes).
      ``last`` marks each command's final beat.
    * **status**: :func:`~.layouts.status_layout` (rejected-command count, last error).

    The pipeline, stationary loads included, stalls as a whole while a result is offered and
    not taken (commands go on being queued). Latency from the cycle a moving beat is
    accepted (or a READ beat issued) to the cycle its result is first offered is
    :attr:`latency` = ``rows + cols`` cycles when nothing stalls.

    Parameters
    ----------
    rows : int
        Partition (contraction, K) dimension, >= 1 (128 on the real engine).
    cols : int
        Stationary free size (M), >= 1 (128 on the real engine).
    psum_banks : int
        PSUM banks, 1..256 (default 8, as on the real engine).
    psum_entries : int
        PSUM entries per bank, the largest N of one matmul, 1..65535 (default 512).
    pe_module, block, block_module : optional
        Passed to :class:`SystolicArray`: how the PE grid is built (Amaranth submodules, or
        Verilog ``Instance`` s of a PE module or of ``block x block`` sub-array modules).

    Members
    -------
    command : In(stream.Signature(command_layout()))
    stationary : In(stream.Signature(stationary_layout(cols)))
    moving : In(stream.Signature(moving_layout(rows)))
    result : Out(stream.Signature(result_layout(cols)))
    status : Out(status_layout())

    Raises
    ------
    ValueError
        If a size is not a positive integer or is outside the ranges above.
    """

    def __init__(self, rows, cols, *, psum_banks=PSUM_BANKS, psum_entries=PSUM_ENTRIES,
                 pe_module=None, block=None, block_module=None):
        _check_positive("rows", rows)
        _check_positive("cols", cols)
        _check_positive("psum_banks", psum_banks)
        _check_positive("psum_entries", psum_entries)
        if psum_banks > 1 << BANK_WIDTH:
            raise ValueError(f"psum_banks must be at most {1 << BANK_WIDTH}, not {psum_banks}")
        if psum_entries >= 1 << SIZE_WIDTH:
            raise ValueError(f"psum_entries must be less than {1 << SIZE_WIDTH}, "
                             f"not {psum_entries}")
        self._rows = rows
        self._cols = cols
        self._psum_banks = psum_banks
        self._psum_entries = psum_entries
        # Built here so that a bad grid option is refused by the constructor.
        self._array = SystolicArray(rows, cols, pe_module=pe_module, block=block,
                                    block_module=block_module)
        super().__init__({
            "command": In(stream.Signature(command_layout())),
            "stationary": In(stream.Signature(stationary_layout(cols))),
            "moving": In(stream.Signature(moving_layout(rows))),
            "result": Out(stream.Signature(result_layout(cols))),
            "status": Out(status_layout()),
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
    def psum_banks(self):
        """PSUM banks (int, read-only)."""
        return self._psum_banks

    @property
    def psum_entries(self):
        """PSUM entries per bank (int, read-only)."""
        return self._psum_entries

    @property
    def latency(self):
        """Cycles from a moving beat's acceptance to its result being offered (int)."""
        return self._rows + self._cols

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        banks, entries = self._psum_banks, self._psum_entries
        depth = banks * entries

        m.submodules.array = array = self._array
        m.d.comb += array.chain_start.eq(1)     # psum_in stays 0: the tile's row 0 starts
        m.submodules.skew = skew = SkewBuffer(operand_lane_layout(), range(rows))
        m.submodules.load_skew = load_skew = SkewBuffer(load_lane_layout(rows), range(cols))
        m.submodules.deskew = deskew = SkewBuffer(PSUM_WIDTH, range(cols - 1, -1, -1))
        m.submodules.psum = psum = Psum(cols, depth)

        # Pipeline advance: everything moves unless a result is offered and not taken.
        advance = Signal()
        m.d.comb += advance.eq(~self.result.valid | self.result.ready)
        m.d.comb += [array.en.eq(advance), skew.en.eq(advance), deskew.en.eq(advance),
                     load_skew.en.eq(advance)]

        # ---- command check and queue ----------------------------------------------------
        command = self.command.payload
        is_read = command.op == Op.READ
        error = Signal(ErrorCode)
        k_limit = Signal(SIZE_WIDTH + 1)
        m.d.comb += k_limit.eq(Mux(command.double_row, 2 * rows, rows))
        with m.If(command.bank >= banks):
            m.d.comb += error.eq(ErrorCode.BANK_RANGE)
        with m.Elif(~is_read & ((command.k == 0) | (command.k > k_limit))):
            m.d.comb += error.eq(ErrorCode.K_RANGE)
        with m.Elif(~is_read & ((command.m == 0) | (command.m > cols))):
            m.d.comb += error.eq(ErrorCode.M_RANGE)
        with m.Elif((command.n == 0) | (command.offset + command.n > entries)):
            m.d.comb += error.eq(ErrorCode.N_RANGE)

        depth_q = COMMAND_QUEUE_DEPTH
        queue = [Signal(command_layout(), name=f"queue_{i}") for i in range(depth_q)]
        queued = Signal(depth_q)     # entry holds a command (entries fill from 0)
        loaded = Signal(depth_q)     # entry's stationary is loaded (always set for a READ)
        command_beat = Signal()
        accept = Signal()
        m.d.comb += [
            self.command.ready.eq(~queued[depth_q - 1]),
            command_beat.eq(self.command.valid & self.command.ready),
            accept.eq(command_beat & (error == ErrorCode.NONE)),
        ]
        with m.If(command_beat & (error != ErrorCode.NONE)):
            m.d.sync += [self.status.rejected.eq(self.status.rejected + 1),
                         self.status.error.eq(error)]

        # ---- stationary double buffer -------------------------------------------------
        load_buf = Signal()          # buffer the next LoadStationary writes
        load_row = Signal(range(rows))  # partition row the next stationary beat writes
        use_buf = Signal()           # buffer the next matmul uses
        full = Signal(2)             # buffer loaded for a matmul that has not started
        busy = Signal(2)             # buffer used by a matmul still sending moving beats

        # The load target is the oldest queued matmul whose stationary is not loaded.
        target = Signal(range(depth_q))
        target_k = Signal(SIZE_WIDTH)     # its stationary beats: K, or min(K, rows)
        target_m = Signal(SIZE_WIDTH)
        has_target = Signal()
        m.d.comb += has_target.eq((queued & ~loaded).any())
        for i in reversed(range(depth_q)):     # the lowest index wins
            with m.If(queued[i] & ~loaded[i]):
                m.d.comb += [target.eq(i), target_m.eq(queue[i].m),
                             target_k.eq(Mux(queue[i].double_row & (queue[i].k > rows), rows,
                                             queue[i].k))]
        m.d.comb += self.stationary.ready.eq(
            advance & has_target & ~full.bit_select(load_buf, 1) & ~busy.bit_select(load_buf, 1))
        load_beat = Signal()
        load_done = Signal()
        m.d.comb += [
            load_beat.eq(self.stationary.valid & self.stationary.ready),
            load_done.eq(load_beat & (load_row == target_k - 1)),
        ]
        with m.If(load_beat):
            m.d.sync += load_row.eq(load_row + 1)
        with m.If(load_done):
            m.d.sync += [load_row.eq(0), load_buf.eq(~load_buf),
                         full.bit_select(load_buf, 1).eq(1)]
        loaded_next = [Signal(name=f"loaded_next_{i}") for i in range(depth_q)]
        for i in range(depth_q):
            m.d.comb += loaded_next[i].eq(loaded[i] | (load_done & (target == i)))

        # The load enters a column-skewed lane per column, one register behind the stream
        # like the moving operands, and writes PE[row][c] as it passes column c.
        load_in = Signal(load_lane_layout(rows))
        load_values = Signal(data.ArrayLayout(OPERAND_WIDTH, cols))
        with m.If(advance):
            m.d.sync += load_in.valid.eq(load_beat)
        with m.If(load_beat):
            m.d.sync += [load_in.row.eq(load_row), load_in.buf.eq(load_buf)]
            for c in range(cols):
                m.d.sync += load_values[c].eq(
                    Mux(target_m > c, self.stationary.payload.data[c], 0))
        for c in range(cols):
            m.d.comb += [
                load_skew.i[c].valid.eq(load_in.valid),
                load_skew.i[c].row.eq(load_in.row),
                load_skew.i[c].buf.eq(load_in.buf),
                load_skew.i[c].value.eq(load_values[c]),
                array.load[c].eq(load_skew.o[c]),
            ]

        # ---- issue: moving beats of a matmul, or READ beats, in command order -------------
        head = queue[0]
        head_read = Signal()
        can_start = Signal()
        running = Signal()           # a command has issued beats and not its last one
        cur_read, cur_sel, cur_double, cur_ftz, cur_acc = (Signal(name=f"cur_{n}") for n in (
            "read", "sel", "double", "ftz", "accumulate"))
        cur_stype, cur_mtype = Signal(DType, name="cur_stype"), Signal(DType, name="cur_mtype")
        cur_addr = Signal(range(depth))
        cur_left = Signal(SIZE_WIDTH)   # beats left after the current one
        cur_k = Signal(SIZE_WIDTH)      # partition rows of the current matmul (0 for a READ)
        m.d.comb += [
            head_read.eq(head.op == Op.READ),
            can_start.eq(~running & queued[0] & loaded[0]),
            self.moving.ready.eq(advance & Mux(running, ~cur_read, can_start & ~head_read)),
        ]
        moving_beat = Signal()
        read_issue = Signal()
        issue = Signal()
        start = Signal()
        m.d.comb += [
            moving_beat.eq(self.moving.valid & self.moving.ready),
            read_issue.eq(advance & Mux(running, cur_read, can_start & head_read)),
            issue.eq(moving_beat | read_issue),
            start.eq(issue & ~running),
        ]
        beat = {name: Signal(name=f"beat_{name}") for name in (
            "read", "sel", "double", "ftz", "accumulate", "last")}
        beat["stype"], beat["mtype"] = Signal(DType, name="beat_stype"), Signal(
            DType, name="beat_mtype")
        beat_addr = Signal(range(depth))
        beat_left = Signal(SIZE_WIDTH)
        beat_k = Signal(SIZE_WIDTH)
        m.d.comb += [
            beat_k.eq(Mux(running, cur_k, Mux(head_read, 0, head.k))),
            beat["read"].eq(Mux(running, cur_read, head_read)),
            beat["sel"].eq(Mux(running, cur_sel, use_buf)),
            beat["stype"].eq(Mux(running, cur_stype, head.dtype)),
            beat["mtype"].eq(Mux(running, cur_mtype, head.moving_dtype)),
            beat["double"].eq(Mux(running, cur_double, head.double_row)),
            beat["ftz"].eq(Mux(running, cur_ftz, head.ftz)),
            beat["accumulate"].eq(Mux(running, cur_acc, head.accumulate)),
            beat_addr.eq(Mux(running, cur_addr, head.bank * entries + head.offset)),
            beat_left.eq(Mux(running, cur_left, head.n - 1)),
            beat["last"].eq(beat_left == 0),
        ]
        with m.If(issue):
            m.d.sync += [
                running.eq(~beat["last"]),
                cur_read.eq(beat["read"]), cur_sel.eq(beat["sel"]),
                cur_stype.eq(beat["stype"]), cur_mtype.eq(beat["mtype"]),
                cur_double.eq(beat["double"]), cur_ftz.eq(beat["ftz"]),
                cur_acc.eq(beat["accumulate"]),
                cur_addr.eq(beat_addr + 1), cur_left.eq(beat_left - 1), cur_k.eq(beat_k),
            ]
        with m.If(start & ~head_read):
            m.d.sync += [
                full.bit_select(use_buf, 1).eq(0),
                busy.bit_select(use_buf, 1).eq(1),
                use_buf.eq(~use_buf),
            ]
        # A buffer is free once its matmul has sent its last moving beat (after the set
        # above, so a one-beat matmul frees its buffer at once).
        with m.If(issue & beat["last"] & ~beat["read"]):
            m.d.sync += busy.bit_select(beat["sel"], 1).eq(0)

        # Queue update: the head leaves when it starts; an accepted command joins at the end.
        with m.If(start):
            for i in range(depth_q - 1):
                m.d.sync += [queue[i].eq(queue[i + 1]), queued[i].eq(queued[i + 1]),
                             loaded[i].eq(loaded_next[i + 1])]
            m.d.sync += [queued[depth_q - 1].eq(0), loaded[depth_q - 1].eq(0)]
        with m.Else():
            m.d.sync += [loaded[i].eq(loaded_next[i]) for i in range(depth_q)]
        with m.If(accept):
            slot = Signal(range(depth_q + 1))
            m.d.comb += slot.eq(sum(queued[i] for i in range(depth_q)) - start)
            for i in range(depth_q):
                with m.If(slot == i):
                    m.d.sync += [queue[i].eq(command), queued[i].eq(1), loaded[i].eq(is_read)]

        # ---- token pipeline: what each beat in flight is, for the PSUM stage ------------
        tokens = [Signal(token_layout(depth), name=f"token_{i}") for i in range(self.latency)]
        # The operand vector and its mode only change on a real beat, so bubbles do not
        # toggle the array (this also keeps event-driven simulators such as Icarus from
        # evaluating garbage).
        in_vector = Signal(data.ArrayLayout(OPERAND_WIDTH, rows))
        in_mode = Signal(data.StructLayout({"sel": 1, "stype": DType, "mtype": DType,
                                            "double": 1, "ftz": 1, "k": SIZE_WIDTH}))
        with m.If(moving_beat):
            m.d.sync += in_vector.eq(self.moving.payload.data)
        with m.If(issue):
            m.d.sync += [in_mode[name].eq(beat[name])
                         for name in ("sel", "stype", "mtype", "double", "ftz")]
            m.d.sync += in_mode.k.eq(beat_k)
        with m.If(advance):
            m.d.sync += [tokens[0].valid.eq(issue), tokens[0].addr.eq(beat_addr),
                         tokens[0].fp32.eq(beat["stype"] != DType.INT8)]
            m.d.sync += [tokens[0][name].eq(beat[name]) for name in (
                "last", "ftz", "accumulate", "read")]
            for i in range(1, self.latency):
                m.d.sync += tokens[i].eq(tokens[i - 1])

        for k in range(rows):
            m.d.comb += [
                skew.i[k].value.eq(in_vector[k]),
                skew.i[k].sel.eq(in_mode.sel),
                skew.i[k].active.eq(in_mode.k > k),
                skew.i[k].hi.eq(in_mode.double & (in_mode.k > k + rows)),
                skew.i[k].stype.eq(in_mode.stype),
                skew.i[k].mtype.eq(in_mode.mtype),
                skew.i[k].ftz.eq(in_mode.ftz),
                array.moving[k].eq(skew.o[k]),
            ]
        m.d.comb += deskew.i.eq(array.psum)

        # ---- PSUM and the result stream -------------------------------------------------
        out_token = tokens[-1]
        result_beat = Signal()
        m.d.comb += [
            result_beat.eq(self.result.valid & self.result.ready),
            psum.addr.eq(out_token.addr),
            psum.column.eq(deskew.o),
            psum.read.eq(out_token.read),
            psum.accumulate.eq(out_token.accumulate),
            psum.fp32.eq(out_token.fp32),
            psum.ftz.eq(out_token.ftz),
            psum.write.eq(result_beat & ~out_token.read),
            self.result.valid.eq(out_token.valid),
            self.result.payload.data.eq(psum.result),
            self.result.payload.last.eq(out_token.last),
        ]
        return m
