"""The tile's testbench class: clock, reset, drivers, monitor, golden model, scoreboard."""

import json
import os
import random
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from systolica.golden import nc_matmul
from systolica.hdl.layouts import (
    OPERAND_WIDTH,
    PSUM_DEPTH,
    DType,
    moving_layout,
    result_layout,
    stationary_layout,
)

from .scoreboard import Scoreboard
from .streams import StreamDriver, StreamMonitor

#: Clock period used by every test, in ns.
CLOCK_PERIOD_NS = 10
#: The two operand dtypes and their names in reports.
DTYPES = {np.dtype(np.int8): "int8", np.dtype(ml_dtypes.bfloat16): "bf16"}


class SimulationStuck(AssertionError):
    """The tile stopped making progress before every expected result arrived."""


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


def tile_shape(dut):
    """Return ``(rows, cols)`` of the DUT, read from its stream payload widths."""
    rows = (len(dut.moving__payload) - 4) // OPERAND_WIDTH
    cols = (len(dut.stationary__payload) - 1) // OPERAND_WIDTH
    return rows, cols


def operand_bits(array):
    """Raw 16-bit lane values of an int8 or bfloat16 array (uint16 ndarray)."""
    if array.dtype == np.int8:
        return array.view(np.uint8).astype(np.uint16)
    return array.view(np.uint16)


def _hex_list(values, limit=8):
    text = " ".join(f"{int(v):04x}" for v in values[:limit])
    return text + (" ..." if len(values) > limit else "")


class TileTB:
    """Drive matmuls through the tile and check every result against the golden model.

    The TB keeps a shadow of the tile's PSUM (bit patterns, ``psum_depth x cols``) so that
    accumulating matmuls are checked against ``nc_matmul(..., psum=shadow, accumulate=True)``.
    Every result lane is compared, including lanes ``>= M`` (the tile computes them with the
    zero-padded stationary, and the golden model does the same).

    Parameters
    ----------
    dut : cocotb handle
        Top level of the generated tile.
    seed : int
        Seed of the idle and backpressure patterns (and of nothing else).
    idle : float
        Probability that a stream driver holds ``valid`` low in a cycle (see StreamDriver).
    backpressure : float
        Probability that the result monitor holds ``ready`` low in a cycle.
    """

    def __init__(self, dut, seed, idle=0.0, backpressure=0.0):
        self.dut = dut
        self.rows, self.cols = tile_shape(dut)
        self.log = dut._log
        rng = random.Random(seed)
        self.scoreboard = Scoreboard(log=self.log)
        self.stationary = StreamDriver(dut, "stationary", stationary_layout(self.cols),
                                       random.Random(rng.random()), idle)
        self.moving = StreamDriver(dut, "moving", moving_layout(self.rows),
                                   random.Random(rng.random()), idle)
        self.result = StreamMonitor(dut, "result", result_layout(self.cols),
                                    random.Random(rng.random()), backpressure, self._on_result)
        self.matmuls = []
        self.psum = np.zeros((PSUM_DEPTH, self.cols), np.uint32)
        self._result_queue = []
        self._idle, self._backpressure = idle, backpressure
        #: Clock cycles stepped so far, and the cycle after the last expected result.
        self.cycle = 0
        self.finished = 0

    # ---- set-up ---------------------------------------------------------------------------
    async def start(self, reset_cycles=3):
        """Start the clock and hold reset for ``reset_cycles`` cycles."""
        Clock(self.dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        self.dut.rst.value = 1
        for port in ("stationary__valid", "moving__valid", "result__ready"):
            getattr(self.dut, port).value = 0
        for _ in range(reset_cycles):
            await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0

    # ---- stimulus -------------------------------------------------------------------------
    def submit(self, stationary, moving, *, accumulate=False, ftz=False, expected=None):
        """Queue one matmul: load ``stationary`` [K, M], stream ``moving`` [K, N].

        Operands are both int8 or both ``ml_dtypes.bfloat16``. ``accumulate`` adds into PSUM
        entries ``0..N-1``; ``ftz`` flushes subnormals (BF16 only). ``expected`` overrides
        the golden PSUM [M, N] (error-injection tests only). With ``SYSTOLICA_CORRUPT_GOLDEN=1``
        in the environment, the first matmul of each test expects one wrong word (bit 4 of
        PSUM [0, 0] flipped), so every test fails on purpose: the failure path of the
        regression (its reproduce-with-waves command) is tested with it. Returns the
        :class:`MatmulRecord`.

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
        for r in range(k):
            self.stationary.send({"data": [int(v) for v in s_bits[r]], "last": int(r == k - 1)})
        pad_k = [0] * (self.rows - k)
        mode = {"dtype": DType.BF16 if dtype == "bf16" else DType.INT8, "ftz": int(ftz),
                "accumulate": int(bool(accumulate))}
        for c in range(n):
            self.moving.send({"data": [int(v) for v in m_bits[:, c]] + pad_k,
                              "last": int(c == n - 1), **mode})

            def describe(lane, c=c, s_bits=s_bits, m_bits=m_bits):
                return (f"stationary[:, {lane}] = {_hex_list(s_bits[:, lane])}; "
                        f"moving[:, {c}] = {_hex_list(m_bits[:, c])}")

            self.scoreboard.expect(record.index, c, golden[:, c], c == n - 1, dtype=dtype,
                                   macs=k * m, describe=describe)
            self._result_queue.append(record.index)
        return record

    def _on_result(self, beat, cycle):
        lanes = list(beat.data)
        self.scoreboard.observe(lanes, bool(beat.last))
        received = self.result.received - 1
        if received < len(self._result_queue):
            record = self.matmuls[self._result_queue[received]]
            record.results.append(lanes[: record.m])
            record.last_result = cycle

    # ---- clock loop -----------------------------------------------------------------------
    def cycle_budget(self):
        """Cycles the queued work may take before the TB declares the tile stuck (int)."""
        beats = sum(r.k + r.n for r in self.matmuls)
        latency = self.rows + self.cols
        slow = (1.0 - self._idle) * (1.0 - self._backpressure)
        return int(200 + 8 * (beats + latency * (len(self.matmuls) + 1)) / slow)

    async def _step(self):
        parts = (self.stationary, self.moving, self.result)
        await FallingEdge(self.dut.clk)
        for part in parts:
            part.drive(self.cycle)
        await ReadOnly()
        for part in parts:
            part.sample(self.cycle)
        self.cycle += 1

    async def run(self, max_cycles=None):
        """Clock until every expected result arrived (or raise :class:`SimulationStuck`).

        Afterwards the TB keeps clocking for ``rows + cols + 2`` cycles so that a spurious
        extra result beat would still reach the scoreboard (as "unexpected").
        :attr:`finished` is the cycle after the last expected result.
        """
        budget = self.cycle_budget() if max_cycles is None else max_cycles
        start = self.cycle
        while self.scoreboard.outstanding:
            if self.cycle - start > budget:
                raise SimulationStuck(
                    f"tile stuck: no completion within {budget} cycles; "
                    f"stationary beats sent {self.stationary.sent} "
                    f"({self.stationary.pending} pending), moving beats sent "
                    f"{self.moving.sent} ({self.moving.pending} pending), "
                    f"{self.scoreboard.summary()}")
            await self._step()
        self.finished = self.cycle
        for _ in range(self.rows + self.cols + 2):
            await self._step()
        self._stamp_accepts()

    def _stamp_accepts(self):
        cycles = self.moving.transfer_cycles
        position = 0
        for record in self.matmuls:
            if record.first_accept is None and position < len(cycles):
                record.first_accept = cycles[position]
            position += record.n

    def results(self, record):
        """The PSUM the RTL produced for ``record``: [M, N], int32 (INT8) or float32 (BF16)."""
        bits = np.array(record.results, dtype=np.uint32).T
        return bits.view(np.int32 if record.dtype == "int8" else np.float32)

    def check(self):
        """Raise ``AssertionError`` unless every result arrived and matched.

        With ``SYSTOLICA_STATS`` set, appends one JSON line with the MACs checked to that
        file (the regression sums them).
        """
        self.scoreboard.check_complete()
        self.log.info("scoreboard: %s", self.scoreboard.summary())
        stats = os.environ.get("SYSTOLICA_STATS")
        if stats:
            with open(stats, "a") as handle:
                handle.write(json.dumps(self.scoreboard.macs_checked) + "\n")

    def submit_slabs(self, stationary, moving, *, ftz=False):
        """Queue ``stationary.T @ moving`` with any K: K-slabs of ``rows`` accumulating in PSUM.

        Returns the record of the last slab (whose results are the full sums).
        """
        record = None
        for i, start in enumerate(range(0, stationary.shape[0], self.rows)):
            part = slice(start, start + self.rows)
            record = self.submit(stationary[part], moving[part], accumulate=i > 0, ftz=ftz)
        return record
