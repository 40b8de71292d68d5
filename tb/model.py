"""The testbench's model of the tile: golden results and a shadow of PSUM, per command.

:class:`TileModel` turns each submitted command into the stream beats that carry it (as
dicts for the Amaranth layouts) and into the golden PSUM entries the scoreboard expects,
keeping a shadow PSUM (banks x entries x cols bit patterns) so that accumulating matmuls and
READ commands are predicted from it. Illegal commands are predicted to be rejected (no
beats, no results). It is shared by the per-cycle TB (:mod:`systolica.tb.tile_tb`) and the
bulk-stimulus harness (:mod:`systolica.tb.bulk`).
"""

import os
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from systolica.golden import PSUM_BANKS, PSUM_ENTRIES, Command, command_error, nc_matmul
from systolica.hdl.layouts import DType, ErrorCode, Op

#: The two operand dtypes and their names in reports.
DTYPES = {np.dtype(np.int8): "int8", np.dtype(ml_dtypes.bfloat16): "bf16"}


@dataclass
class CommandRecord:
    """What the TB knows about one submitted command (fields, golden result, timing)."""

    index: int
    command: Command
    error: str | None               # predicted rejection, or None
    expected: np.ndarray | None     # uint32 bit patterns [cols, N]
    results: list = field(default_factory=list)
    accept: int | None = None        # cycle the command beat was taken
    issues: list = field(default_factory=list)          # moving-beat accept cycles
    result_cycles: list = field(default_factory=list)   # result-beat cycles
    psum_dtype: str = "int8"         # how the result words read: "int8" (INT32) or "bf16"

    def __getattr__(self, name):
        if name in ("op", "k", "m", "n", "bank", "offset", "dtype", "ftz", "accumulate"):
            return getattr(self.command, name)
        raise AttributeError(name)

    @property
    def first_accept(self):
        """Cycle the first moving beat was accepted (matmul), or None."""
        return self.issues[0] if self.issues else None

    @property
    def last_result(self):
        """Cycle the last result beat was taken, or None."""
        return self.result_cycles[-1] if self.result_cycles else None


def operand_bits(array):
    """Raw 16-bit lane values of an int8 or bfloat16 array (uint16 ndarray)."""
    if array.dtype == np.int8:
        return array.view(np.uint8).astype(np.uint16)
    return array.view(np.uint16)


def command_beat(command):
    """The command stream beat (dict for ``command_layout()``) of a :class:`Command`."""
    return {"op": Op.READ if command.op == "read" else Op.MATMUL,
            "dtype": DType.BF16 if command.dtype == "bf16" else DType.INT8,
            "ftz": int(command.ftz), "accumulate": int(command.accumulate),
            "bank": command.bank, "offset": command.offset,
            "k": command.k, "m": command.m, "n": command.n}


def _hex_list(values, limit=8):
    text = " ".join(f"{int(v):04x}" for v in values[:limit])
    return text + (" ..." if len(values) > limit else "")


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
    psum_zeroed : bool
        PSUM holds zeros at the start (true right after the simulator starts: the memory's
        initial value). False when earlier tests of the same simulation may have written
        it; then accumulating into, or reading, an entry this model has not seen written
        is refused with ``ValueError`` (its content is unknown).
    """

    def __init__(self, rows, cols, scoreboard, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                 psum_zeroed=True):
        self.rows, self.cols = rows, cols
        self.banks, self.entries = banks, entries
        self.scoreboard = scoreboard
        self.psum = np.zeros((banks, entries, cols), np.uint32)
        self._known = np.full((banks, entries), bool(psum_zeroed))
        self._psum_dtype = np.full((banks, entries), "int8", dtype=object)
        #: Submitted commands, in order (rejected ones included).
        self.records = []
        #: Record index of every expected result beat, in order.
        self.result_owner = []

    @property
    def matmuls(self):
        """Records of the accepted matmuls, in order (list of :class:`CommandRecord`)."""
        return [r for r in self.records if r.op == "matmul" and r.error is None]

    def error_of(self, command):
        """Why the tile would reject ``command`` (str), or None."""
        return command_error(command, rows=self.rows, cols=self.cols, banks=self.banks,
                             entries=self.entries)

    def submit(self, stationary, moving, *, accumulate=False, ftz=False, bank=0, offset=0,
               expected=None):
        """Model one matmul; return ``(record, command_beat, stationary_beats, moving_beats)``.

        Operands are both int8 or both ``ml_dtypes.bfloat16``; ``accumulate`` adds into PSUM
        entries ``offset .. offset + N - 1`` of ``bank``; ``ftz`` flushes subnormals (BF16
        only). ``expected`` overrides the golden PSUM [M, N] (error-injection tests only).
        With ``SYSTOLICA_CORRUPT_GOLDEN=1`` in the environment, the first matmul expects one
        wrong word (bit 4 of PSUM [0, 0] flipped), so every test fails on purpose: the
        regression's reproduce-with-waves path is tested with it.

        Raises
        ------
        TypeError
            If the dtypes differ or are not int8/bfloat16.
        ValueError
            If the matmul would be rejected by the tile (K, M, N, bank or offset out of
            range; use :meth:`submit_command` to send an illegal command on purpose) or
            ``ftz`` is asked of an INT8 matmul.
        """
        if stationary.dtype != moving.dtype or stationary.dtype not in DTYPES:
            raise TypeError(f"operands must both be int8 or both bfloat16, not "
                            f"{stationary.dtype} and {moving.dtype}")
        dtype = DTYPES[stationary.dtype]
        k, m = stationary.shape
        k2, n = moving.shape
        if ftz and dtype != "bf16":
            raise ValueError("ftz applies to bfloat16 matmuls only")
        command = Command("matmul", k=k, m=m, n=n, bank=bank, offset=offset, dtype=dtype,
                          ftz=bool(ftz), accumulate=bool(accumulate))
        error = self.error_of(command)
        if k != k2 or error:
            raise ValueError(f"matmul [K={k}, M={m}] x [K={k2}, N={n}] into bank {bank} "
                             f"offset {offset} does not fit a {self.rows} x {self.cols} tile "
                             f"with {self.banks} x {self.entries} PSUM ({error or 'K differs'})")

        padded = np.zeros((k, self.cols), stationary.dtype)
        padded[:, :m] = stationary
        region = (bank, slice(offset, offset + n))
        if accumulate:
            self._require_known(region, "accumulate into")
        self._known[region] = True
        view = np.int32 if dtype == "int8" else np.float32
        old = np.ascontiguousarray(self.psum[region].T).view(view)
        kwargs = {"ftz": True} if ftz else {}
        golden = nc_matmul(padded, moving, psum=old, accumulate=bool(accumulate), **kwargs)
        golden = np.ascontiguousarray(golden).view(np.uint32)
        if expected is not None:
            golden = golden.copy()
            golden[:m] = np.ascontiguousarray(expected).view(np.uint32)
        self.psum[region] = golden.T
        self._psum_dtype[region] = dtype
        if not self.matmuls and os.environ.get("SYSTOLICA_CORRUPT_GOLDEN") == "1":
            golden = golden.copy()
            golden[0, 0] ^= 1 << 4
        record = self._record(command, None, golden)
        record.psum_dtype = dtype

        s_bits, m_bits = operand_bits(padded), operand_bits(moving)
        stationary_beats = [{"data": [int(v) for v in s_bits[r]]} for r in range(k)]
        pad_k = [0] * (self.rows - k)
        moving_beats = []
        for c in range(n):
            moving_beats.append({"data": [int(v) for v in m_bits[:, c]] + pad_k})

            def describe(lane, c=c, s_bits=s_bits, m_bits=m_bits):
                return (f"stationary[:, {lane}] = {_hex_list(s_bits[:, lane])}; "
                        f"moving[:, {c}] = {_hex_list(m_bits[:, c])}")

            self.scoreboard.expect(record.index, c, golden[:, c], c == n - 1, dtype=dtype,
                                   macs=k * m, describe=describe)
            self.result_owner.append(record.index)
        return record, command_beat(command), stationary_beats, moving_beats

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
        region = (command.bank, slice(command.offset, command.offset + command.n))
        self._require_known(region, "read")
        words = np.ascontiguousarray(self.psum[region].T)
        record = self._record(command, None, words)
        dtypes = self._psum_dtype[region]
        record.psum_dtype = dtypes[0]
        for c in range(command.n):
            entry = command.offset + c

            def describe(lane, entry=entry, bank=command.bank):
                return f"READ of bank {bank} entry {entry}"

            self.scoreboard.expect(record.index, c, words[:, c], c == command.n - 1,
                                   dtype=dtypes[c], describe=describe)
            self.result_owner.append(record.index)
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

    def _require_known(self, region, what):
        unknown = np.flatnonzero(~self._known[region]) + region[1].start
        if unknown.size:
            raise ValueError(f"cannot {what} PSUM bank {region[0]} entries "
                             f"{unknown.tolist()}: not written since this test began (earlier "
                             f"tests of the simulation may have left anything there)")

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
        """PSUM lanes a record keeps: M for a matmul, every column for a READ."""
        return record.m if record.op == "matmul" else self.cols

    def on_result(self, position, lanes, cycle):
        """Record result beat number ``position`` (0-based) for its command."""
        if position < len(self.result_owner):
            record = self.records[self.result_owner[position]]
            record.results.append(list(lanes[: self._lanes(record)]))
            record.result_cycles.append(cycle)

    def stamp(self, command_cycles, moving_cycles):
        """Set each record's command accept cycle and its matmul's moving accept cycles."""
        for record, cycle in zip(self.records, command_cycles, strict=False):
            record.accept = cycle
        position = 0
        for record in self.matmuls:
            record.issues = list(moving_cycles[position:position + record.n])
            position += record.n

    def results(self, record):
        """The PSUM the RTL produced for ``record``: [M, N] (matmul) or [cols, N] (READ),
        int32 (INT8) or float32 (BF16; a READ uses the dtype of its first entry's writer)."""
        bits = np.array(record.results, dtype=np.uint32).reshape(-1, self._lanes(record)).T
        return bits.view(np.int32 if record.psum_dtype == "int8" else np.float32)
