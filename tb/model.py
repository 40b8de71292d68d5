"""The testbench's model of the tile: golden results and a shadow of PSUM, per matmul.

:class:`TileModel` turns each submitted matmul into the stream beats that carry it (packed by
the caller through the Amaranth layouts) and into the golden PSUM columns the scoreboard
expects, keeping a shadow PSUM so that accumulating matmuls are predicted by
``nc_matmul(..., psum=shadow, accumulate=True)``. It is shared by the per-cycle TB
(:mod:`systolica.tb.tile_tb`) and the bulk-stimulus harness (:mod:`systolica.tb.bulk`).
"""

import os
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from systolica.golden import nc_matmul
from systolica.hdl.layouts import PSUM_DEPTH, DType

#: The two operand dtypes and their names in reports.
DTYPES = {np.dtype(np.int8): "int8", np.dtype(ml_dtypes.bfloat16): "bf16"}


@dataclass
class MatmulRecord:
    """What the TB knows about one submitted matmul (shapes, mode, golden result, timing)."""

    index: int
    k: int
    m: int
    n: int
    dtype: str
    accumulate: bool
    ftz: bool
    expected: np.ndarray           # uint32 bit patterns [cols, N]
    results: list = field(default_factory=list)
    first_accept: int | None = None
    last_result: int | None = None


def operand_bits(array):
    """Raw 16-bit lane values of an int8 or bfloat16 array (uint16 ndarray)."""
    if array.dtype == np.int8:
        return array.view(np.uint8).astype(np.uint16)
    return array.view(np.uint16)


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
        Receives one expectation per moving beat.
    """

    def __init__(self, rows, cols, scoreboard):
        self.rows, self.cols = rows, cols
        self.scoreboard = scoreboard
        self.psum = np.zeros((PSUM_DEPTH, cols), np.uint32)
        #: Submitted matmuls, in order.
        self.matmuls = []
        #: Matmul index of every expected result beat, in order.
        self.result_owner = []

    def submit(self, stationary, moving, *, accumulate=False, ftz=False, expected=None):
        """Model one matmul; return ``(record, stationary_beats, moving_beats)``.

        Beats are dicts for the stream layouts. Operands are both int8 or both
        ``ml_dtypes.bfloat16``; ``accumulate`` adds into PSUM entries ``0..N-1``; ``ftz``
        flushes subnormals (BF16 only). ``expected`` overrides the golden PSUM [M, N]
        (error-injection tests only). With ``SYSTOLICA_CORRUPT_GOLDEN=1`` in the environment,
        the first matmul expects one wrong word (bit 4 of PSUM [0, 0] flipped), so every test
        fails on purpose: the regression's reproduce-with-waves path is tested with it.

        Raises
        ------
        TypeError
            If the dtypes differ or are not int8/bfloat16.
        ValueError
            If the shapes do not fit the tile (K > rows, M > cols, N outside 1..PSUM depth)
            or ``ftz`` is asked of an INT8 matmul.
        """
        if stationary.dtype != moving.dtype or stationary.dtype not in DTYPES:
            raise TypeError(f"operands must both be int8 or both bfloat16, not "
                            f"{stationary.dtype} and {moving.dtype}")
        dtype = DTYPES[stationary.dtype]
        k, m = stationary.shape
        k2, n = moving.shape
        if k != k2 or not 1 <= k <= self.rows or not 1 <= m <= self.cols \
                or not 1 <= n <= PSUM_DEPTH:
            raise ValueError(f"matmul [K={k}, M={m}] x [K={k2}, N={n}] does not fit a "
                             f"{self.rows} x {self.cols} tile with {PSUM_DEPTH} PSUM entries")
        if ftz and dtype != "bf16":
            raise ValueError("ftz applies to bfloat16 matmuls only")

        padded = np.zeros((k, self.cols), stationary.dtype)
        padded[:, :m] = stationary
        view = np.int32 if dtype == "int8" else np.float32
        old = np.ascontiguousarray(self.psum[:n].T).view(view)
        kwargs = {"ftz": True} if ftz else {}
        golden = nc_matmul(padded, moving, psum=old, accumulate=bool(accumulate), **kwargs)
        golden = np.ascontiguousarray(golden).view(np.uint32)
        if expected is not None:
            golden = golden.copy()
            golden[:m] = np.ascontiguousarray(expected).view(np.uint32)
        self.psum[:n] = golden.T
        if not self.matmuls and os.environ.get("SYSTOLICA_CORRUPT_GOLDEN") == "1":
            golden = golden.copy()
            golden[0, 0] ^= 1 << 4
        record = MatmulRecord(len(self.matmuls), k, m, n, dtype, bool(accumulate), bool(ftz),
                              golden)
        self.matmuls.append(record)

        s_bits, m_bits = operand_bits(padded), operand_bits(moving)
        stationary_beats = [{"data": [int(v) for v in s_bits[r]], "last": int(r == k - 1)}
                            for r in range(k)]
        pad_k = [0] * (self.rows - k)
        mode = {"dtype": DType.BF16 if dtype == "bf16" else DType.INT8, "ftz": int(ftz),
                "accumulate": int(bool(accumulate))}
        moving_beats = []
        for c in range(n):
            moving_beats.append({"data": [int(v) for v in m_bits[:, c]] + pad_k,
                                 "last": int(c == n - 1), **mode})

            def describe(lane, c=c, s_bits=s_bits, m_bits=m_bits):
                return (f"stationary[:, {lane}] = {_hex_list(s_bits[:, lane])}; "
                        f"moving[:, {c}] = {_hex_list(m_bits[:, c])}")

            self.scoreboard.expect(record.index, c, golden[:, c], c == n - 1, dtype=dtype,
                                   macs=k * m, describe=describe)
            self.result_owner.append(record.index)
        return record, stationary_beats, moving_beats

    def on_result(self, position, lanes, cycle):
        """Record result beat number ``position`` (0-based) for its matmul."""
        if position < len(self.result_owner):
            record = self.matmuls[self.result_owner[position]]
            record.results.append(list(lanes[: record.m]))
            record.last_result = cycle

    def stamp_accepts(self, accept_cycles):
        """Set each matmul's ``first_accept`` from the cycles moving beats were taken."""
        position = 0
        for record in self.matmuls:
            if record.first_accept is None and position < len(accept_cycles):
                record.first_accept = accept_cycles[position]
            position += record.n

    @staticmethod
    def results(record):
        """The PSUM the RTL produced for ``record``: [M, N], int32 (INT8) or float32 (BF16)."""
        bits = np.array(record.results, dtype=np.uint32).reshape(-1, record.m).T
        return bits.view(np.int32 if record.dtype == "int8" else np.float32)
