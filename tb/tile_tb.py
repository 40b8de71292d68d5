"""The tile's testbench class: clock, reset, drivers, monitor, golden model, scoreboard."""

import random
from dataclasses import dataclass, field

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from systolica.golden import nc_matmul
from systolica.hdl.layouts import OPERAND_WIDTH, moving_layout, result_layout, stationary_layout

from .scoreboard import Scoreboard
from .streams import StreamDriver, StreamMonitor

#: Clock period used by every test, in ns.
CLOCK_PERIOD_NS = 10


class SimulationStuck(AssertionError):
    """The tile stopped making progress before every expected result arrived."""


@dataclass
class MatmulRecord:
    """What the TB knows about one submitted matmul (shapes, golden result, timing)."""

    index: int
    k: int
    m: int
    n: int
    expected: np.ndarray
    results: list = field(default_factory=list)
    first_accept: int | None = None
    last_result: int | None = None


def tile_shape(dut):
    """Return ``(rows, cols)`` of the DUT, read from its stream payload widths."""
    rows = (len(dut.moving__payload) - 1) // OPERAND_WIDTH
    cols = (len(dut.stationary__payload) - 1) // OPERAND_WIDTH
    return rows, cols


class TileTB:
    """Drive matmuls through the tile and check every result against the golden model.

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
        self._result_queue = []
        self._result_cursor = (0, 0)
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
    def submit(self, stationary, moving, expected=None):
        """Queue one matmul: load ``stationary`` [K, M], stream ``moving`` [K, N] (int8).

        ``expected`` overrides the golden result [M, N] (error-injection tests only).
        Returns the :class:`MatmulRecord`.

        Raises
        ------
        ValueError
            If the shapes do not fit the tile (K > rows, M > cols, N < 1).
        """
        k, m = stationary.shape
        k2, n = moving.shape
        if k != k2 or not 1 <= k <= self.rows or not 1 <= m <= self.cols or n < 1:
            raise ValueError(f"matmul [K={k}, M={m}] x [K={k2}, N={n}] does not fit a "
                             f"{self.rows} x {self.cols} tile")
        golden = nc_matmul(stationary, moving) if expected is None else expected
        record = MatmulRecord(len(self.matmuls), k, m, n, np.asarray(golden))
        self.matmuls.append(record)
        pad_m = [0] * (self.cols - m)
        for r in range(k):
            self.stationary.send({"data": [int(v) for v in stationary[r]] + pad_m,
                                  "last": int(r == k - 1)})
        pad_k = [0] * (self.rows - k)
        for c in range(n):
            self.moving.send({"data": [int(v) for v in moving[:, c]] + pad_k,
                              "last": int(c == n - 1)})
            self.scoreboard.expect(record.index, c, record.expected[:, c], c == n - 1)
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
        """The PSUM the RTL produced for ``record``: int32 array [M, N]."""
        return np.array(record.results, dtype=np.int64).T.astype(np.int32)

    def check(self):
        """Raise ``AssertionError`` unless every result arrived and matched."""
        self.scoreboard.check_complete()
        self.log.info("scoreboard: %s", self.scoreboard.summary())


def random_int8(rng, shape):
    """Uniform random int8 array of ``shape`` from numpy Generator ``rng``."""
    return rng.integers(-128, 128, size=shape, dtype=np.int8)
