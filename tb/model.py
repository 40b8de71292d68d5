"""The testbench's model of the tile: golden results and a shadow of PSUM, per command.

:class:`TileModel` turns each submitted command into the stream beats that carry it (as
dicts for the Amaranth layouts) and into the golden PSUM entries the scoreboard expects,
keeping a shadow PSUM (cols bit patterns at each flat address bank x entries + entry) so
that accumulating matmuls and READ commands are predicted from it. Illegal commands are
predicted to be rejected (no beats, no results). It is shared by the per-cycle TB
(:mod:`systolica.tb.tile_tb`) and the bulk-stimulus harness (:mod:`systolica.tb.bulk`).
"""

from collections import defaultdict
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from systolica.golden import (
    PSUM_BANKS,
    PSUM_ENTRIES,
    Command,
    check_tile,
    command_error,
    format_of,
    nc_matmul,
    nc_matmul_batch,
    operand_formats,
    psum_accumulate,
)
from systolica.golden.command import DTYPES
from systolica.golden.mx import (
    check_mx_operands,
    command_types,
    mx_sums,
    pack_x4,
    round_to_bf16,
)
from systolica.golden.timing import command_tile, program_beats
from systolica.hdl.layouts import DType, ErrorCode, Op, cell_grid

from .scoreboard import TRANSPOSED


@dataclass
class CommandRecord:
    """What the TB knows about one submitted command (fields, golden result, timing).

    ``results`` holds the result beats received, each the ``M`` (matmul) or ``cols`` (READ)
    lanes kept: a list of rows from the per-cycle TB, a ``[beats, lanes]`` array from the
    bulk harness.
    """

    index: int
    command: Command
    error: str | None               # predicted rejection, or None
    expected: np.ndarray | None     # uint32 bit patterns [cols, N]
    results: list = field(default_factory=list)
    last_flags: list = field(default_factory=list)      # each result beat's ``last``
    accept: int | None = None        # cycle the command beat was taken
    issues: list = field(default_factory=list)          # moving-beat accept cycles
    result_cycles: list = field(default_factory=list)   # result-beat cycles
    psum_dtype: str = "int8"         # result words: "int8" (INT32), TRANSPOSED, else a float
                                     # type (FP32)

    op = property(lambda self: self.command.op)
    k = property(lambda self: self.command.k)
    m = property(lambda self: self.command.m)
    n = property(lambda self: self.command.n)
    bank = property(lambda self: self.command.bank)
    offset = property(lambda self: self.command.offset)
    dtype = property(lambda self: self.command.dtype)
    ftz = property(lambda self: self.command.ftz)
    accumulate = property(lambda self: self.command.accumulate)

    @property
    def first_accept(self):
        """Cycle the first moving beat was accepted (matmul), or None."""
        return self.issues[0] if len(self.issues) else None

    @property
    def last_result(self):
        """Cycle the last result beat was taken, or None."""
        return self.result_cycles[-1] if len(self.result_cycles) else None


def transposed_words(stationary, moving):
    """A transpose's PSUM words (uint32 ``[M, N]``): ``golden.nc_matmul(stationary, moving,
    is_transpose=True)``'s elements zero-extended, as the tile stores them."""
    k, m = stationary.shape
    out = nc_matmul(stationary, moving, rows=max(k, m), is_transpose=True)
    return out.view(f"u{out.dtype.itemsize}").astype(np.uint32)


def lane_width(dtypes, mx=False):
    """Bits of an operand lane of a tile generated for the operand types ``dtypes`` (golden
    short names) and with the MX datapath or not (``mx``; int): 32 when TF32 or FP32 is
    among them (the ``fp32`` type set) or with ``mx``, else 16
    (``systolica.hdl.config.TileConfig.operand_width``, the same rule)."""
    return 32 if {"tf32", "fp32"} & set(dtypes) or mx else 16


def operand_bits(array):
    """Raw lane values of an operand array: 16-bit types' bit patterns and 8-bit types'
    (INT8, FP8) in bits [7:0] (uint16 ndarray), TF32 / FP32 words (uint32 ndarray)."""
    if array.dtype.itemsize == 1:
        return array.view(np.uint8).astype(np.uint16)
    return array.view(f"u{array.dtype.itemsize}")


def lane_bits(array, rows, double_row):
    """Operand lanes of a [K, X] operand for a tile of ``rows`` partition rows (uint16
    ``[K, X]``, or ``[min(K, rows), X]`` in double-row mode: row r's element k = r in bits
    [7:0] and k = r + rows in bits [15:8])."""
    bits = operand_bits(array)
    if not double_row or len(bits) <= rows:
        return bits
    out = bits[:rows].copy()
    out[:len(bits) - rows] |= bits[rows:] << 8
    return out


def command_beat(command):
    """The command stream beat (dict for ``command_layout()``) of a :class:`Command`."""
    stype, mtype = DType[command.dtype.upper()].value, DType[command.mtype.upper()].value
    return {"op": Op.READ if command.op == "read" else Op.MATMUL,
            "dtype": stype & 7, "dtype_hi": stype >> 3,
            "moving_dtype": mtype & 7, "moving_dtype_hi": mtype >> 3,
            "double_row": int(command.double_row),
            "ftz": int(command.ftz), "accumulate": int(command.accumulate),
            "transpose": int(command.is_transpose),
            "bank": command.bank, "offset": command.offset,
            "k": command.k, "m": command.m, "n": command.n, **tile_fields(command),
            "mx": int(command.mx), "fp4": int(command.fp4[0]) | int(command.fp4[1]) << 1,
            "bf16_out": int(command.dst_dtype == "bf16"),
            "stochastic": int(command.rounding == "stochastic"), "seed": command.seed}


def tile_fields(command):
    """The command word's tile fields of a :class:`Command` (dict): ``tiled`` and the tile's
    start and size, all zero for the whole array."""
    if command.tile_position is None:
        return {"tiled": 0, "tile_row": 0, "tile_col": 0, "tile_rows": 0, "tile_cols": 0}
    (row, col), (rows, cols) = command.tile_position, command.tile_size
    return {"tiled": 1, "tile_row": row, "tile_col": col, "tile_rows": rows, "tile_cols": cols}


def _hex_list(values, limit=8):
    text = " ".join(f"{int(v):04x}" for v in values[:limit])
    return text + (" ..." if len(values) > limit else "")


def _psum_add(dtype, ftz, old, new):
    """:func:`~systolica.golden.psum_accumulate` of ``old`` (uint32 PSUM words, read as INT32
    for INT8 and FP32 for float types) and ``new`` (the column sums, int32 or float32)."""
    return psum_accumulate(old.view(np.int32 if dtype == "int8" else np.float32), new, ftz=ftz)


class TileModel:
    """Golden model of a ``rows x cols`` tile with its PSUM, feeding a scoreboard.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    scoreboard : systolica.tb.scoreboard.Scoreboard
        Receives one expectation per result beat.
    banks, entries : int
        PSUM geometry of the tile under test (default 8 x 512).
    dtypes : tuple of str
        Operand types the tile was generated for (default every one).
    double_row : bool
        Whether it has the FP8 double-row datapath (default True); a matmul outside these
        is predicted rejected with ``TYPE_NOT_BUILT``.
    mx : bool
        Whether it has the MX datapath (default False): 32-bit lanes with E8M0 scales, and
        :meth:`submit_mx`.
    psum_zeroed : bool
        PSUM holds zeros at the start (true right after the simulator starts: the memory's
        initial value). False when earlier tests of the same simulation may have written
        it; then accumulating into, or reading, an entry this model has not seen written
        is refused with ``ValueError`` (its content is unknown).
    """

    def __init__(self, rows, cols, scoreboard, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                 psum_zeroed=True, dtypes=DTYPES, double_row=True, mx=False):
        self.rows, self.cols = rows, cols
        self.dtypes, self.double_row, self.mx = tuple(dtypes), bool(double_row), bool(mx)
        self.banks, self.entries = banks, entries
        self.scoreboard = scoreboard
        #: The shadow PSUM, ``[banks x entries, cols]`` uint32 words at their flat addresses
        #: ``bank x entries + entry`` (on an MX tile a region may run into the next bank).
        self.psum = np.zeros((banks * entries, cols), np.uint32)
        self._known = np.full(banks * entries, bool(psum_zeroed))
        self._psum_dtype = np.full(banks * entries, "int8", dtype=object)
        #: Submitted commands, in order (rejected ones included).
        self.records = []
        #: Per expected result beat, in order: the indices of the records it carries results
        #: of (matmuls in flight together share beats; :meth:`plan`).
        self.events = []
        #: Per moving beat, in order: the indices of the records whose column it carries.
        self.moving_owners = []
        self._planned = 0           # records planned (their beats packed) so far
        self._fed = 0               # records handed to the scoreboard so far
        self._matmul_count = 0

    @property
    def lane_dtype(self):
        """numpy dtype of the operand lanes: uint32 on a tile with TF32 / FP32 or MX (32-bit
        lanes), else uint16."""
        return np.dtype(f"u{lane_width(self.dtypes, self.mx) // 8}")

    @property
    def matmuls(self):
        """Records of the accepted matmuls, in order (list of :class:`CommandRecord`)."""
        return [r for r in self.records if r.op == "matmul" and r.error is None]

    def expectation(self, golden, index):
        """The PSUM words (uint32 bit patterns, ``[cols, N]``) the scoreboard expects for
        accepted matmul number ``index`` (from 0), given the golden model's ``golden``:
        ``golden`` itself. Error-injection tests
        override it (:mod:`systolica.tb.fault_injection`); nothing else should."""
        return golden

    def error_of(self, command):
        """Why the tile would reject ``command`` (str), or None."""
        return command_error(command, rows=self.rows, cols=self.cols, banks=self.banks,
                             entries=self.entries, dtypes=self.dtypes,
                             double_row=self.double_row, mx=self.mx)

    def submit(self, stationary, moving, *, accumulate=False, ftz=False, bank=0, offset=0,
               expected=None, perf_mode=None, is_transpose=False, tile_position=None,
               tile_size=None):
        """Model one matmul; return ``(record, command_beat, stationary_bits, moving_bits)``.

        Operands are both int8 or any pair of float types
        (:func:`~systolica.golden.operand_formats`); ``accumulate`` adds into PSUM entries
        ``offset .. offset + N - 1`` of ``bank``; ``ftz`` flushes subnormals (float only);
        ``perf_mode="double_row"`` for FP8 double-row matmuls; ``is_transpose=True`` for a
        transpose (``moving`` selects one partition row per column; the PSUM words are the
        selected stationary bits, zero-extended, :data:`TRANSPOSED`). ``tile_position`` /
        ``tile_size`` put the matmul in a row/column tile (:func:`~systolica.golden.check_tile`):
        its stationary and moving lanes are the tile's PE columns and rows, and the PSUM
        partitions outside the tile's columns keep their words. ``expected`` overrides
        the golden PSUM [M, N] (error-injection tests only).

        ``command_beat`` is a dict for ``command_layout()``; ``stationary_bits`` (uint16
        ``[K, cols]``, lanes >= M zero) and ``moving_bits`` (uint16 ``[N, rows]``, lanes >= K
        zero) are the ``data`` lanes of the LoadStationary and MultiplyMoving beats (in
        double-row mode ``min(K, rows)`` stationary rows, two FP8 values per lane).

        Raises
        ------
        TypeError
            If the operand types do not pair.
        ValueError
            If the matmul would be rejected by the tile (K, M, N, bank or offset out of
            range; use :meth:`submit_command` to send an illegal command on purpose),
            ``ftz`` is asked of an INT8 matmul, or a transpose's ``moving`` does not select
            one row per column (:func:`~systolica.golden.nc_matmul`).
        """
        item = self._prepare(stationary, moving, accumulate, ftz, bank, offset, perf_mode,
                             is_transpose, tile_position, tile_size)
        record = self._commit(item, self._column_sums([item])[0], expected)
        return (record, *self.stimulus(item))

    def submit_mx(self, stationary, moving, stationary_scale, moving_scale, *,
                  accumulate=False, bank=0, offset=0, tile_position=None, tile_size=None,
                  dst_dtype="fp32", rounding="rne", seed=0):
        """Model one MX matmul on a tile generated with the MX datapath; return ``(record,
        command_beat, stationary_bits, moving_bits)`` as :meth:`submit` (the x4 words in
        the lanes, an MXFP4 side's in bits [15:0]); :meth:`scales` gives the beats' scales.

        ``stationary`` [P, M, 4] and ``moving`` [P, N, 4] are MX elements (float8_e4m3fn,
        float8_e5m2 or float4_e2m1fn), ``stationary_scale`` [P // 8, M] and
        ``moving_scale`` [P // 8, N] their E8M0 scale bits
        (:func:`~systolica.golden.mx.nc_matmul_mx`, which gives the expected PSUM; the
        stationary lanes past M hold zero words with scale 0, as the tile loads them).
        ``dst_dtype="bf16"``: the PSUM words are rounded to BF16 after the accumulation
        (``rounding``: ``"rne"``, or ``"stochastic"`` with ``seed``: one XORWOW generator
        per PSUM partition, :func:`~systolica.golden.xorwow_bits`) and stored as the FP32
        words of those values.

        Raises
        ------
        TypeError, ValueError
            As ``nc_matmul_mx`` for bad operands, or if the tile would reject the matmul.
        """
        item = self.prepare_mx(stationary, moving, stationary_scale, moving_scale,
                               accumulate, bank, offset, tile_position, tile_size, dst_dtype,
                               rounding, seed)
        return (self.commit_mx(item), *self.stimulus(item))

    def commit_mx(self, item):
        """Model a prepared MX matmul (:meth:`prepare_mx`) in program order; returns its
        :class:`CommandRecord`."""
        command, column = item["command"], item["column"]
        if command.dst_dtype == "fp32":
            return self._commit(item, column)
        if command.accumulate:      # upcast (the stored word is exact), add, round
            region = self._region(command)
            self._require_known(region, "accumulate into")
            column = _psum_add(command.dtype, False, np.ascontiguousarray(self.psum[region].T),
                               column)
        stochastic = command.rounding == "stochastic"
        rounded = round_to_bf16(np.ascontiguousarray(column, np.float32), command.rounding,
                                command.seed if stochastic else None)
        words = rounded.view(np.uint16).astype(np.uint32) << np.uint32(16)
        return self._commit(item, words.view(np.float32), accumulated=True)

    def prepare_mx(self, stationary, moving, stationary_scale, moving_scale, accumulate=False,
                   bank=0, offset=0, tile_position=None, tile_size=None, dst_dtype="fp32",
                   rounding="rne", seed=0):
        """Check one MX matmul (arguments as :meth:`submit_mx`), compute its golden column
        sums and build its command and lanes, without modelling it (no state): for
        :meth:`stimulus`, :meth:`scales` and then :meth:`commit_mx`."""
        dst = ml_dtypes.bfloat16 if dst_dtype == "bf16" else np.float32
        check_mx_operands(stationary, moving, stationary_scale, moving_scale, dst_dtype=dst,
                          rows=self.rows)
        p, m = stationary.shape[:2]
        n = moving.shape[1]
        names, fp4 = command_types(stationary, moving)
        command = Command("matmul", k=p, m=m, n=n, bank=bank, offset=offset, dtype=names[0],
                          moving_dtype=names[1], mx=True, accumulate=bool(accumulate),
                          dst_dtype=dst_dtype, rounding=rounding, seed=seed,
                          fp4=fp4,
                          tile_position=None if tile_position is None else tuple(tile_position),
                          tile_size=None if tile_size is None else tuple(tile_size))
        error = self.error_of(command)
        if error:
            raise ValueError(f"MX matmul [P={p}, M={m}] x [P={p}, N={n}] into bank {bank} "
                             f"offset {offset} does not fit a {self.rows} x {self.cols} "
                             f"tile with {self.banks} x {self.entries} PSUM ({error})")
        tile = check_tile(command.tile_position, command.tile_size, rows=self.rows,
                          cols=self.cols)
        padded = np.zeros((p, self.cols, 4), stationary.dtype)
        padded[:, :m] = stationary
        s_scale = np.zeros((p // 8, self.cols), np.uint8)
        s_scale[:, :m] = np.asarray(stationary_scale).view(np.uint8)
        m_scale = np.asarray(moving_scale).view(np.uint8)
        column = mx_sums(padded, moving, s_scale, m_scale)
        return {"command": command, "padded": pack_x4(padded).astype(np.uint32),
                "moving": pack_x4(moving).astype(np.uint32), "tile": tile, "column": column,
                "scales": (np.repeat(s_scale, 8, axis=0), np.repeat(m_scale, 8, axis=0))}

    def scales(self, item):
        """``(stationary_scales [beats, cols], moving_scales [N, rows])`` (uint32 E8M0 bits)
        of a prepared matmul's beats (its stationary beats, ``Command.load_beats``: K, or
        ``min(K, rows)`` for FP8 double-row): an MX matmul's group scales, row ``k`` taking
        group ``k // 8``'s, in its tile's rows; zeros for any other matmul."""
        command, tile = item["command"], item["tile"]
        s_scales = np.zeros((command.load_beats(self.rows), self.cols), self.lane_dtype)
        m_scales = np.zeros((command.n, self.rows), self.lane_dtype)
        if "scales" in item:
            s_scales[:] = item["scales"][0]
            m_scales[:, tile.row:tile.row + command.k] = item["scales"][1].T
        return s_scales, m_scales

    def submit_many(self, matmuls):
        """Model matmuls that follow each other in the program, as :meth:`submit` each.

        ``matmuls``: ``(stationary, moving, accumulate, ftz, bank, offset[, perf_mode[,
        is_transpose[, tile_position, tile_size]]])`` tuples. Every
        one is checked before any is modelled; the column sums of all matmuls of the same
        data type, mode and shape come from one batched golden call
        (:func:`~systolica.golden.nc_matmul_batch`), then each is accumulated into the
        shadow PSUM in program order. Returns the list of what :meth:`submit` returns.
        """
        prepared = self.prepare_many(matmuls)
        records = self.commit_many(prepared)
        return [(record, *self.stimulus(item))
                for record, item in zip(records, prepared, strict=True)]

    def prepare_many(self, matmuls):
        """Check matmuls (tuples as :meth:`submit_many` takes) and build their commands,
        without modelling them; returns the prepared items for :meth:`stimulus` and
        :meth:`commit_many`, which must then get all of them in this order.

        Raises
        ------
        TypeError, ValueError
            As :meth:`submit`, for the first bad matmul.
        """
        return [self._prepare(*matmul) for matmul in matmuls]

    def commit_many(self, prepared):
        """Model prepared matmuls in program order: golden column sums (one batched call per
        type, mode and shape), their adds into the shadow PSUM, records and scoreboard
        expectations. Returns their :class:`CommandRecord` objects (list)."""
        columns = self._column_sums(prepared)
        tiled = any(item["tile"].cols < self.cols for item in prepared)
        totals = None if tiled else self._accumulated(prepared, columns)
        if totals is None:   # regions that overlap in part, column tiles: one at a time
            return [self._commit(item, column)
                    for item, column in zip(prepared, columns, strict=True)]
        return [self._commit(item, total, accumulated=True)
                for item, total in zip(prepared, totals, strict=True)]

    def stimulus(self, item):
        """``(command_beat, stationary_bits, moving_bits)`` of a prepared matmul, as
        :meth:`submit` returns them (nothing is modelled)."""
        command, tile = item["command"], item["tile"]
        m_bits = np.zeros((command.n, self.rows), self.lane_dtype)
        moving_lanes = lane_bits(item["moving"], tile.rows, command.double_row)
        m_bits[:, tile.row:tile.row + len(moving_lanes)] = moving_lanes.T
        s_bits = lane_bits(item["padded"], tile.rows, command.double_row)
        return command_beat(command), s_bits.astype(self.lane_dtype), m_bits

    def _accumulated(self, prepared, columns):
        """What each prepared matmul leaves in its PSUM region (``[cols, N]`` per matmul,
        int32 or float32), with the adds of all matmuls that accumulate at the same depth of
        their chains done in one call per data type, mode and shape.

        An accumulating matmul reads either PSUM as it was before these matmuls (depth 1) or
        what one earlier matmul of the batch wrote to exactly its region (that one's depth
        + 1); the add is :func:`~systolica.golden.fp32_add` (float types) or the INT32 wrap (INT8),
        as :meth:`_commit` does one at a time. Returns None when some region overlaps an
        earlier one's in part (the caller then goes one matmul at a time).

        Raises
        ------
        ValueError
            If a matmul accumulates into PSUM entries not known to this model.
        """
        owner = np.full(self.banks * self.entries, -1)
        base, depth = {}, [0] * len(prepared)
        for i, item in enumerate(prepared):
            command = item["command"]
            region = self._region(command)
            if command.accumulate:
                writers = owner[region]
                j = int(writers[0])
                if (writers != j).any():
                    return None
                if j < 0:
                    self._require_known(region, "accumulate into")
                    base[i] = np.ascontiguousarray(self.psum[region].T)
                    depth[i] = 1
                else:
                    earlier = prepared[j]["command"]
                    if (earlier.bank, earlier.offset, earlier.n) != (command.bank,
                                                                     command.offset,
                                                                     command.n):
                        return None
                    base[i], depth[i] = j, depth[j] + 1
            owner[region] = i
        totals = list(columns)
        levels = {}
        for i, level in enumerate(depth):
            if level:
                command = prepared[i]["command"]
                key = (command.dtype, command.ftz, columns[i].shape)
                levels.setdefault(level, {}).setdefault(key, []).append(i)
        for level in sorted(levels):
            for (dtype, ftz, _shape), indices in levels[level].items():
                old = np.stack([np.ascontiguousarray(
                    totals[base[i]] if isinstance(base[i], int) else base[i]).view(np.uint32)
                    for i in indices])
                new = np.stack([columns[i] for i in indices])
                added = _psum_add(dtype, ftz, old, new)
                for j, i in enumerate(indices):
                    totals[i] = added[j]
        return totals

    def _column_sums(self, prepared):
        """Golden column sums (``[cols, N]``) of prepared matmuls, one batched call per data
        type, mode and shape."""
        groups = {}
        columns = [None] * len(prepared)
        for i, item in enumerate(prepared):
            command = item["command"]
            if command.is_transpose:
                columns[i] = item["transposed"]
                continue
            key = (command.dtype, command.mtype, command.perf_mode, command.ftz,
                   item["padded"].shape, item["moving"].shape, item["tile"].rows)
            groups.setdefault(key, []).append(i)
        for (_, _, perf_mode, ftz, _, _, rows), indices in groups.items():
            mode = {"ftz": True} if ftz else {}
            if perf_mode is not None:     # pairs k = r and r + the (row tile's) rows
                mode.update(perf_mode=perf_mode, rows=rows)
            out = nc_matmul_batch(np.stack([prepared[i]["padded"] for i in indices]),
                                  np.stack([prepared[i]["moving"] for i in indices]), **mode)
            for j, i in enumerate(indices):
                columns[i] = out[j]
        return columns

    def _prepare(self, stationary, moving, accumulate, ftz, bank, offset, perf_mode=None,
                 is_transpose=False, tile_position=None, tile_size=None):
        """Check one matmul and build its command and zero-padded stationary (its columns
        at the tile's PE columns; no state)."""
        stype, mtype = operand_formats(stationary.dtype, moving.dtype, perf_mode=perf_mode)
        k, m = stationary.shape
        k2, n = moving.shape
        if ftz and not stype.is_float:
            raise ValueError("ftz applies to float matmuls only")
        command = Command("matmul", k=k, m=m, n=n, bank=bank, offset=offset, dtype=stype.name,
                          moving_dtype=None if mtype == stype else mtype.name,
                          perf_mode=perf_mode, ftz=bool(ftz), accumulate=bool(accumulate),
                          is_transpose=bool(is_transpose),
                          tile_position=None if tile_position is None else tuple(tile_position),
                          tile_size=None if tile_size is None else tuple(tile_size))
        error = self.error_of(command)
        if k != k2 or error:
            raise ValueError(f"matmul [K={k}, M={m}] x [K={k2}, N={n}] into bank {bank} "
                             f"offset {offset} does not fit a {self.rows} x {self.cols} tile "
                             f"with {self.banks} x {self.entries} PSUM ({error or 'K differs'})")
        tile = check_tile(command.tile_position, command.tile_size, rows=self.rows,
                          cols=self.cols)
        padded = np.zeros((k, self.cols), stationary.dtype)
        padded[:, tile.col:tile.col + m] = stationary
        item = {"command": command, "padded": padded, "moving": moving, "tile": tile}
        if is_transpose:        # golden refuses a bad selector here, before anything runs
            item["transposed"] = transposed_words(padded, moving)
        return item

    def _commit(self, item, column, expected=None, accumulated=False):
        """Accumulate one prepared matmul's column sums (``[cols, N]``) into the shadow PSUM
        (``accumulated``: ``column`` already holds the sum), record it and tell the
        scoreboard what to expect."""
        command, padded, moving = item["command"], item["padded"], item["moving"]
        tile = item["tile"]
        k, m, dtype = command.k, command.m, command.dtype
        region = self._region(command)
        if command.accumulate and not accumulated:
            self._require_known(region, "accumulate into")
            column = _psum_add(dtype, command.ftz, np.ascontiguousarray(self.psum[region].T),
                               column)
        golden = np.ascontiguousarray(column).view(np.uint32)
        if tile.cols < self.cols:        # the other PSUM partitions keep their words
            self._require_known(region, "write a column tile beside")
            golden = self.psum[region].T.copy()
            golden[tile.col_range] = np.ascontiguousarray(column).view(np.uint32)[
                tile.col_range]
        self._known[region] = True
        if expected is not None:
            golden = golden.copy()
            golden[tile.col:tile.col + m] = np.ascontiguousarray(expected).view(np.uint32)
        self.psum[region] = golden.T
        psum_dtype = TRANSPOSED if command.is_transpose else dtype
        self._psum_dtype[region] = psum_dtype
        golden = self.expectation(golden, self._matmul_count)
        self._matmul_count += 1
        record = self._record(command, None, golden)
        record.psum_dtype = psum_dtype

        def describe(lane, c):   # the operands behind a wrong word, as the beats carry them
            double_row = command.double_row
            return (f"stationary[:, {lane}] = "
                    f"{_hex_list(lane_bits(padded, tile.rows, double_row)[:, lane])}; "
                    f"moving[:, {c}] = "
                    f"{_hex_list(lane_bits(moving, tile.rows, double_row)[:, c])}")

        lanes = self._lanes(record)
        self.scoreboard.expect_block(record.index, golden[lanes].T, dtype=psum_dtype,
                                     macs=0 if command.is_transpose else (
                                         4 if command.mx else 1) * k * m,
                                     describe=lambda lane, c: describe(lane + lanes.start, c))
        return record

    def submit_command(self, command):
        """Model a READ or an illegal command; return ``(record, command_beat)``.

        A legal READ expects the shadow PSUM region; an illegal command (any op) expects
        to be rejected with :attr:`CommandRecord.error` and no result beats (send no
        operand beats for it).

        Raises
        ------
        ValueError
            If ``command`` is a legal matmul (use :meth:`submit`, which needs operands).
        """
        error = self.error_of(command)
        if error is None and command.op == "matmul":
            raise ValueError("a legal matmul needs its operands: use submit()")
        if error is not None:
            return self._record(command, error, None), command_beat(command)
        region = self._region(command)
        self._require_known(region, "read")
        words = self.psum[region].T.copy()   # what PSUM holds now, not a view of it
        record = self._record(command, None, words)
        dtypes = self._psum_dtype[region]
        record.psum_dtype = dtypes[0]

        def describe(lane, c, start=region.start):
            return "READ of bank {} entry {}".format(*divmod(start + c, self.entries))

        self.scoreboard.expect_block(record.index, words.T, dtype=dtypes.astype(str),
                                     describe=describe)
        return record, command_beat(command)

    def read(self, *, n, bank=0, offset=0):
        """Model a READ of PSUM entries ``offset .. offset + n - 1`` of ``bank``; see
        :meth:`submit_command`. Raises ``ValueError`` if the tile would reject it."""
        command = Command("read", n=n, bank=bank, offset=offset)
        error = self.error_of(command)
        if error:
            raise ValueError(f"READ of bank {bank} entries {offset}..{offset + n - 1} does "
                             f"not fit {self.banks} x {self.entries} PSUM ({error})")
        return self.submit_command(command)

    def _region(self, command):
        """The flat PSUM addresses (a slice of :attr:`psum`) of ``command``'s region."""
        start = command.bank * self.entries + command.offset
        return slice(start, start + command.n)

    def _require_known(self, region, what):
        bank = region.start // self.entries
        unknown = np.flatnonzero(~self._known[region]) + region.start - bank * self.entries
        if unknown.size:
            beyond = (f" (from {self.entries}: the next banks)"
                      if unknown[-1] >= self.entries else "")
            raise ValueError(f"cannot {what} PSUM bank {bank} entries {unknown.tolist()}"
                             f"{beyond}: not written since this test began (earlier tests of "
                             f"the simulation may have left anything there)")

    def _record(self, command, error, expected):
        record = CommandRecord(len(self.records), command, error, expected)
        self.records.append(record)
        return record

    @property
    def rejected(self):
        """Records the tile should reject (list of :class:`CommandRecord`)."""
        return [r for r in self.records if r.error is not None]

    def expected_status(self):
        """The tile's ``status`` after these commands: ``(rejected count mod 2**16, error
        code)``, the code of the last rejection or ``ErrorCode.NONE`` (ints)."""
        rejected = self.rejected
        code = ErrorCode[rejected[-1].error] if rejected else ErrorCode.NONE
        return len(rejected) % 65536, code.value

    def _lanes(self, record):
        """PSUM lanes a record's result beats carry (slice): its tile's columns for a
        matmul (its M partitions first), every column for a READ."""
        if record.op != "matmul" or record.command.tile_position is None:
            return slice(0, self.cols)
        start, size = record.command.tile_position[1], record.command.tile_size[1]
        return slice(start, start + size)

    def program_beats(self, commands):
        """``(moving, results)`` of a program on this tile: per moving beat as the host
        packs them, the indices of the matmuls whose next column it carries, and per result
        beat, in order, the indices of the commands it carries results of
        (:func:`~systolica.golden.timing.program_beats`). Lists of tuples."""
        return program_beats(self.rows, self.cols, commands, banks=self.banks,
                             entries=self.entries, dtypes=self.dtypes,
                             double_row=self.double_row, mx=self.mx)

    def pack(self, commands, bits, beats):
        """The MultiplyMoving beats of a program: ``(data, groups)``, ``data`` ``[beats,
        rows]`` lanes (each matmul's in its tile's rows) and ``groups`` ``[beats]`` the
        row-cell masks, from ``beats`` (:meth:`program_beats`' first) and ``bits``:
        ``{command index: its [N, rows] moving lanes}`` (what :meth:`stimulus` returns,
        for every legal matmul of ``commands``)."""
        data = np.zeros((len(beats), self.rows), self.lane_dtype)
        groups = np.zeros(len(beats), np.int64)
        count, grain = cell_grid(self.rows)
        positions = defaultdict(list)       # matmul -> the beats of its columns, in order
        for i, names in enumerate(beats):
            for j in names:
                positions[j].append(i)
        for j, where in positions.items():
            rows = command_tile(commands[j], self.rows, self.cols).row_range
            lanes = slice(rows.start, rows.stop)
            data[where, lanes] = bits[j][:, lanes]
            groups[where] |= sum(1 << g for g in range(count) if g * grain in rows)
        return data, groups

    def plan(self, bits, scales=None):
        """Pack the records submitted since the last plan as a program of their own (it
        starts when everything before it is done): their moving beats join
        :attr:`moving_owners`, their expected result beats :attr:`events`; returns their
        moving beats as :meth:`pack` does, ``bits`` keyed by record index.

        ``scales`` (an MX tile): ``{record index: its [N, rows] moving E8M0 lanes}``
        (:meth:`scales`' second, for every legal matmul ``bits`` has); then a third item
        follows, the beats' ``scale`` lanes ``[beats, rows]``, packed on the same plan."""
        start, records = self._planned, self.records[self._planned:]
        self._planned = len(self.records)
        commands = [r.command for r in records]
        moving, results = self.program_beats(commands)
        self.events += [tuple(start + j for j in beat) for beat in results]
        self.moving_owners += [tuple(start + j for j in beat) for beat in moving]

        def packed(lanes):
            return self.pack(commands, {j - start: b for j, b in lanes.items() if j >= start},
                             moving)
        if scales is None:
            return packed(bits)
        return (*packed(bits), packed(scales)[0])

    @property
    def result_count(self):
        """Result beats the planned commands expect (int)."""
        return len(self.events)

    @property
    def result_owner(self):
        """Per expected result beat, the record indices it carries (list of tuples;
        :meth:`plan` first)."""
        return list(self.events)

    def on_result(self, position, lanes, cycle, last=0):
        """Record result beat number ``position`` (0-based; ``lanes`` its ``cols`` words,
        ``last`` its per-cell flags) for the commands it carries (per-cycle TB; beats
        arrive in order), and hand every command complete by then to the scoreboard, in
        command order."""
        if position >= len(self.events):
            self.scoreboard.observe(list(lanes), bool(last))     # unexpected: counted
            return
        for j in self.events[position]:
            record = self.records[j]
            record.results.append(list(lanes[self._lanes(record)]))
            record.result_cycles.append(cycle)
            record.last_flags.append(bool(last >> (self._lanes(record).start
                                                   // cell_grid(self.cols)[1]) & 1))
        self._feed()

    def on_results(self, lanes, cycles, last):
        """Hand every captured result beat to its commands at once (bulk harness, which
        sets :attr:`events` from :meth:`program_beats`): ``lanes`` ``[beats, cols]``
        uint32, ``cycles`` and ``last`` (per-cell flags) ``[beats]``; beats past the
        expected ones go to the scoreboard as unexpected."""
        cycles = np.asarray(cycles, np.int64).tolist()
        last = np.asarray(last, np.int64).tolist()
        grain = cell_grid(self.cols)[1]
        rows = defaultdict(list)
        for position, names in enumerate(self.events[:len(lanes)]):
            for j in names:
                rows[j].append(position)
        for j, positions in rows.items():
            record = self.records[j]
            cell = self._lanes(record).start // grain
            record.results = lanes[positions, self._lanes(record)]
            record.result_cycles = [cycles[p] for p in positions]
            record.last_flags = [bool(last[p] >> cell & 1) for p in positions]
        self._feed()
        extra = lanes[len(self.events):]
        if len(extra):
            self.scoreboard.observe_block(extra, np.asarray(last[len(self.events):]) != 0)

    def _feed(self):
        """Hand the records whose result beats have all arrived to the scoreboard, in
        command order (its expectations are in that order)."""
        while self._fed < len(self.records):
            record = self.records[self._fed]
            if record.error is None and len(record.results) < record.n:
                return
            if record.error is None:
                self.scoreboard.observe_block(np.asarray(record.results, np.uint64),
                                              record.last_flags)
            self._fed += 1

    def stamp(self, command_cycles, moving_cycles):
        """Set each record's command accept cycle and its matmul's moving accept cycles
        (``moving_cycles``: one per moving beat, whose records :attr:`moving_owners`
        names)."""
        for record, cycle in zip(self.records, command_cycles, strict=False):
            record.accept = int(cycle)
        for record in self.matmuls:
            record.issues = []
        for names, cycle in zip(self.moving_owners,
                                np.asarray(moving_cycles, np.int64).tolist(), strict=False):
            for j in names:
                self.records[j].issues.append(cycle)

    def results(self, record):
        """The PSUM the RTL produced for ``record``: [M, N] (matmul) or [cols, N] (READ),
        int32 (INT8) or float32 (a float type; a READ uses the dtype of its first entry's
        writer); a transpose's [M, N] in its PSUM element type
        (``OperandFormat.transpose_dtype``, the low 16 bits of each word, a 32-bit type's
        whole word), and a READ of
        transposed entries the uint32 words."""
        lanes = self._lanes(record)
        bits = np.asarray(record.results, dtype=np.uint32).reshape(
            -1, lanes.stop - lanes.start).T
        if record.op == "matmul":
            bits = bits[:record.m]
        if record.psum_dtype == TRANSPOSED:
            if record.op == "read":
                return bits
            element = format_of(record.dtype).transpose_dtype
            return bits.astype(f"u{element.itemsize}").view(element)
        return bits.view(np.int32 if record.psum_dtype == "int8" else np.float32)
