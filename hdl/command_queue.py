"""The tile's command check and command queue."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .layouts import (
    MX_GROUP_ROWS,
    SIZE_WIDTH,
    DType,
    ErrorCode,
    Op,
    command_layout,
    is_narrow,
    is_wide,
    mx_type,
    operand_types,
    status_layout,
    tile_sizes,
)

#: Operand types of a legal double-row matmul (golden: ``formats.DOUBLE_ROW_TYPES``).
DOUBLE_ROW_DTYPES = (DType.E4M3, DType.E5M2)

#: Commands the tile holds that have been accepted and not started (the command queue).
#: Three is the fewest that never holds back a stationary load in a back-to-back program.
COMMAND_QUEUE_DEPTH = 3


def load_request_signature():
    """The queue's request for a stationary load, as the queue drives it (wiring.Signature).

    Members
    -------
    valid : Out(1)
        A queued matmul's stationary is not loaded yet (the oldest such is the target).
    beats : Out(SIZE_WIDTH)
        Its LoadStationary beats: ``K``, or ``min(K, rows)`` for a double-row matmul.
    m : Out(SIZE_WIDTH)
        Its ``M`` (lanes ``>= M`` of each beat are loaded as zeros).
    narrow : Out(1)
        Its stationary type is 8 bits wide and it is not double-row: bits [15:8] of each
        lane are ignored, and loaded as zeros (so a transpose passes only bits [7:0] on).
    wide : Out(1)
        Its stationary type is TF32 or FP32, or it is an MX matmul: the whole 32-bit lane is
        loaded (else, on a tile with 32-bit lanes, bits [31:16] are ignored and loaded as
        zeros).
    fp4 : Out(1)
        It is an MX matmul with an MXFP4 stationary: each lane's bits [15:0] are four e2m1
        elements, loaded as the x4 word of their e4m3fn values.
    row, col : Out(SIZE_WIDTH)
        Its tile's first PE row and column (0, 0 for the whole array): beat ``j`` writes PE
        row ``row + j``, and lanes ``col .. col + M - 1`` are its columns.
    trows, tcols : Out(SIZE_WIDTH)
        Its tile's PE rows and columns (the array's without a tile).
    done : In(1)
        The target's last stationary beat transfers this cycle; the target's entry is marked
        loaded at the clock edge.
    """
    return wiring.Signature({"valid": Out(1), "beats": Out(SIZE_WIDTH), "m": Out(SIZE_WIDTH),
                             "narrow": Out(1), "wide": Out(1), "fp4": Out(1),
                             "row": Out(SIZE_WIDTH),
                             "col": Out(SIZE_WIDTH), "trows": Out(SIZE_WIDTH),
                             "tcols": Out(SIZE_WIDTH), "done": In(1)})


def _allowed(size, extent):
    return Cat(size == s for s in tile_sizes(extent)).any()


def _placed(start, size, extent):
    """The start is a multiple of the (allowed) size with the tile inside the extent: one of
    that size's few starts, compared as constants (no divider)."""
    return Cat((size == s) & Cat(start == p for p in range(0, extent, s)).any()
               for s in tile_sizes(extent)).any()


class CommandQueue(wiring.Component):
    """Checks each command as it is accepted and queues the legal ones, in order.

    Combinational check of the command beat, in this order (first failing wins):
    ``BANK_RANGE`` (bank >= ``psum_banks``); for a matmul ``K_RANGE`` (K = 0 or K > ``rows``,
    ``2 * rows`` with ``double_row``), ``M_RANGE`` (M = 0 or M > ``cols``); ``N_RANGE``
    (N = 0 or ``offset + N`` > ``psum_entries``; with ``mx``, ``bank * psum_entries + offset
    + N`` > ``psum_banks * psum_entries``: a NeuronCore-v4 region may cross banks); for a
    matmul ``DOUBLE_ROW_TYPE``
    (``double_row`` with an operand type other than E4M3 / E5M2); for a matmul
    ``TYPE_NOT_BUILT`` (an operand type not in ``dtypes``, or ``double_row`` on a queue
    built without it: the tile was not generated for it; also, on every tile, a type code
    that is no :class:`~.layouts.DType` or INT8 paired with a float type, which no tile
    takes and ``golden.Command`` cannot express); for a matmul with ``transpose``,
    ``TRANSPOSE_DOUBLE_ROW``, ``TRANSPOSE_ACCUMULATE`` and ``TRANSPOSE_FTZ`` (transpose mode
    with ``double_row``, ``accumulate`` or ``ftz``); for a ``tiled`` matmul the tiling rule
    (golden: ``tiles.tile_error``), ``TILE_SIZE``, ``TILE_POSITION``, ``TILE_K_RANGE``,
    ``TILE_M_RANGE``, ``TILE_DOUBLE_ROW``; then the MX rules (golden: ``command.mx_error``;
    an MX matmul on a queue built without ``mx`` is ``TYPE_NOT_BUILT``): ``MX_TYPE``,
    ``MX_K``, ``MX_MODE``, ``MX_TILE``, ``DST_MODE``. A rejected beat is
    taken and dropped: ``status.rejected`` counts up and ``status.error`` takes its
    :class:`~.layouts.ErrorCode` at the clock edge.

    A legal command joins the queue at the clock edge of its beat, so it can be the head one
    cycle later. Entries fill from 0; entry 0 is the head. The head leaves (the entries shift
    down) at the edge of the cycle its ``head`` beat transfers; a command accepted in that
    same cycle goes straight into the slot the shift frees. ``command.ready`` is low while
    all :data:`COMMAND_QUEUE_DEPTH` entries are full (it does not depend on ``valid``).

    Each entry carries a ``loaded`` bit: set when it joins for a READ, and for a matmul at
    the edge after the loader reports its last stationary beat (``load.done``). The load
    target is the lowest entry that is queued and not loaded (``load``, combinational from
    the registers). The head is offered (``head.valid``) once it is queued and loaded.

    Parameters
    ----------
    rows, cols : int
        The tile's partition rows and columns, >= 1 (the K and M limits).
    psum_banks, psum_entries : int
        The tile's PSUM banks (1..256) and entries per bank, >= 1 (the bank and region
        limits).
    depth : int
        Queue entries (default :data:`COMMAND_QUEUE_DEPTH`), >= 1.
    dtypes : tuple of DType
        Operand types the tile's datapath has (default: every one).
    double_row : bool
        Whether it has the FP8 double-row datapath (default True).
    mx : bool
        Whether it has NeuronCore-v4's MX datapath and BF16 PSUM writes (default False).

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.

    Members
    -------
    command : In(stream.Signature(command_layout()))
        Command beats from the tile's ``command`` stream.
    status : Out(status_layout())
        Rejected-command count (16 bits, wraps) and the latest rejection's error (registered).
    head : Out(stream.Signature(command_layout()))
        The oldest queued command, offered once its stationary is loaded (a READ at once).
    load : Out(:func:`load_request_signature`)
        The stationary load the queue waits for.
    queued : Out(depth)
        Bit ``i``: entry ``i`` holds a command (registered; observation).
    loaded : Out(depth)
        Bit ``i``: entry ``i``'s stationary is loaded, always set for a READ (registered;
        observation).
    """

    def __init__(self, rows, cols, *, psum_banks, psum_entries, depth=COMMAND_QUEUE_DEPTH,
                 dtypes=tuple(DType), double_row=True, mx=False):
        self._dtypes, self._double_row = tuple(dtypes), bool(double_row)
        self._mx = bool(mx)
        self._rows, self._cols = rows, cols
        self._banks, self._entries = psum_banks, psum_entries
        self._depth = depth
        super().__init__({
            "command": In(stream.Signature(command_layout())),
            "status": Out(status_layout()),
            "head": Out(stream.Signature(command_layout())),
            "load": Out(load_request_signature()),
            "queued": Out(depth),
            "loaded": Out(depth),
        })

    @property
    def depth(self):
        """Queue entries (int, read-only)."""
        return self._depth

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        banks, entries = self._banks, self._entries
        depth_q = self._depth

        # ---- the check -------------------------------------------------------------------
        command = self.command.payload
        is_read = command.op == Op.READ
        error = Signal(ErrorCode)
        k_limit = Signal(SIZE_WIDTH + 1)
        fp8_pair = Signal()
        stype, mtype = operand_types(command)
        m.d.comb += [
            k_limit.eq(Mux(command.double_row, 2 * rows, rows)),
            fp8_pair.eq(Cat(stype == t for t in DOUBLE_ROW_DTYPES).any()
                        & Cat(mtype == t for t in DOUBLE_ROW_DTYPES).any()),
        ]
        # The operand types and mode the datapath was generated for, and what no tile takes:
        # a type code that is no DType (the field has 16 codes, DType 9), INT8 paired with a
        # float type or a 32-bit type with an 8/16-bit one (golden: ``operand_formats``).
        built = Signal()
        m.d.comb += built.eq(
            Cat(stype == t for t in self._dtypes).any()
            & Cat(mtype == t for t in self._dtypes).any()
            & ((stype == DType.INT8) == (mtype == DType.INT8))
            & (is_wide(stype) == is_wide(mtype))
            & (1 if self._double_row else ~command.double_row)
            & (1 if self._mx else is_read | ~command.mx))
        # The tiling rule: sizes and starts are a few constants of the array's extents.
        tiled = ~is_read & command.tiled
        size_ok, start_ok = (Signal(name=f"tile_{n}_ok") for n in ("size", "start"))
        tile_k_limit = Signal(SIZE_WIDTH + 1)
        m.d.comb += [
            size_ok.eq(_allowed(command.tile_rows, rows) & _allowed(command.tile_cols, cols)),
            start_ok.eq(_placed(command.tile_row, command.tile_rows, rows)
                        & _placed(command.tile_col, command.tile_cols, cols)),
            tile_k_limit.eq(Mux(command.double_row, command.tile_rows << 1, command.tile_rows)),
        ]
        with m.If(command.bank >= banks):
            m.d.comb += error.eq(ErrorCode.BANK_RANGE)
        with m.Elif(~is_read & ((command.k == 0) | (command.k > k_limit))):
            m.d.comb += error.eq(ErrorCode.K_RANGE)
        with m.Elif(~is_read & ((command.m == 0) | (command.m > cols))):
            m.d.comb += error.eq(ErrorCode.M_RANGE)
        # A region stays in its bank; an MX (NeuronCore-v4) tile lets it run on to the end of
        # PSUM (golden ``region_limit``), the flat address bank x entries + offset + n.
        if self._mx:
            region_end = command.bank * entries + command.offset + command.n
            region_limit = banks * entries
        else:
            region_end, region_limit = command.offset + command.n, entries
        with m.Elif((command.n == 0) | (region_end > region_limit)):
            m.d.comb += error.eq(ErrorCode.N_RANGE)
        with m.Elif(~is_read & command.double_row & ~fp8_pair):
            m.d.comb += error.eq(ErrorCode.DOUBLE_ROW_TYPE)
        with m.Elif(~is_read & ~built):
            m.d.comb += error.eq(ErrorCode.TYPE_NOT_BUILT)
        transpose = ~is_read & command.transpose
        for code, mode in ((ErrorCode.TRANSPOSE_DOUBLE_ROW, command.double_row),
                           (ErrorCode.TRANSPOSE_ACCUMULATE, command.accumulate),
                           (ErrorCode.TRANSPOSE_FTZ, command.ftz)):
            with m.Elif(transpose & mode):
                m.d.comb += error.eq(code)
        with m.Elif(tiled & ~size_ok):
            m.d.comb += error.eq(ErrorCode.TILE_SIZE)
        with m.Elif(tiled & ~start_ok):
            m.d.comb += error.eq(ErrorCode.TILE_POSITION)
        with m.Elif(tiled & (command.k > tile_k_limit)):
            m.d.comb += error.eq(ErrorCode.TILE_K_RANGE)
        with m.Elif(tiled & (command.m > command.tile_cols)):
            m.d.comb += error.eq(ErrorCode.TILE_M_RANGE)
        with m.Elif(tiled & command.double_row & (command.tile_cols != cols)):
            m.d.comb += error.eq(ErrorCode.TILE_DOUBLE_ROW)
        # The MX rules (golden ``mx_error``): on a tile without MX, an MX matmul stopped at
        # TYPE_NOT_BUILT, so only its fp4 and destination bits are left to judge.
        mx = ~is_read & command.mx
        with m.Elif(~is_read & ((mx & ~(mx_type(stype) & mx_type(mtype)))
                                | (command.fp4[0] & (~mx | (stype != DType.E4M3FN)))
                                | (command.fp4[1] & (~mx | (mtype != DType.E4M3FN))))):
            m.d.comb += error.eq(ErrorCode.MX_TYPE)
        with m.Elif(mx & (command.k[:exact_log2(MX_GROUP_ROWS)] != 0)):   # K % 8
            m.d.comb += error.eq(ErrorCode.MX_K)
        with m.Elif(mx & (command.double_row | command.transpose | command.ftz)):
            m.d.comb += error.eq(ErrorCode.MX_MODE)
        with m.Elif(mx & tiled & (command.tile_cols != cols)):
            m.d.comb += error.eq(ErrorCode.MX_TILE)
        with m.Elif(~is_read & ((command.bf16_out & ~command.mx)
                                | (command.stochastic & ~command.bf16_out))):
            m.d.comb += error.eq(ErrorCode.DST_MODE)

        # ---- the queue -------------------------------------------------------------------
        queue = [Signal(command_layout(), name=f"queue_{i}") for i in range(depth_q)]
        queued = self.queued         # entry holds a command (entries fill from 0)
        loaded = self.loaded         # entry's stationary is loaded (always set for a READ)
        command_beat = Signal()
        accept = Signal()
        start = Signal()
        m.d.comb += [
            self.command.ready.eq(~queued[depth_q - 1]),
            command_beat.eq(self.command.valid & self.command.ready),
            accept.eq(command_beat & (error == ErrorCode.NONE)),
            self.head.payload.eq(queue[0]),
            self.head.valid.eq(queued[0] & loaded[0]),
            start.eq(self.head.valid & self.head.ready),
        ]
        with m.If(command_beat & (error != ErrorCode.NONE)):
            m.d.sync += [self.status.rejected.eq(self.status.rejected + 1),
                         self.status.error.eq(error)]

        # The load target is the oldest queued matmul whose stationary is not loaded.
        target = Signal(range(depth_q))
        m.d.comb += self.load.valid.eq((queued & ~loaded).any())
        for i in reversed(range(depth_q)):     # the lowest index wins
            with m.If(queued[i] & ~loaded[i]):
                entry = queue[i]
                tile_rows = Mux(entry.tiled, entry.tile_rows, rows)
                m.d.comb += [target.eq(i), self.load.m.eq(entry.m),
                             self.load.narrow.eq(~entry.double_row & ~entry.mx
                                                 & is_narrow(operand_types(entry)[0])),
                             self.load.wide.eq(is_wide(operand_types(entry)[0]) | entry.mx),
                             self.load.fp4.eq(entry.mx & entry.fp4[0]),
                             self.load.beats.eq(Mux(entry.double_row & (entry.k > tile_rows),
                                                    tile_rows, entry.k)),
                             self.load.row.eq(Mux(entry.tiled, entry.tile_row, 0)),
                             self.load.col.eq(Mux(entry.tiled, entry.tile_col, 0)),
                             self.load.trows.eq(tile_rows),
                             self.load.tcols.eq(Mux(entry.tiled, entry.tile_cols, cols))]
        loaded_next = [Signal(name=f"loaded_next_{i}") for i in range(depth_q)]
        for i in range(depth_q):
            m.d.comb += loaded_next[i].eq(loaded[i] | (self.load.done & (target == i)))

        # The head leaves when it starts; an accepted command joins at the end.
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
        return m
