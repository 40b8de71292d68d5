"""The tile's testbench class: clock, reset, drivers, monitor, golden model, scoreboard."""

import json
import os
import random

from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from systolica.hdl.layouts import OPERAND_WIDTH, moving_layout, result_layout, stationary_layout

from .model import TileModel
from .scoreboard import Scoreboard
from .streams import StreamDriver, StreamMonitor

#: Clock period used by every test, in ns.
CLOCK_PERIOD_NS = 10


class SimulationStuck(AssertionError):
    """The tile stopped making progress before every expected result arrived."""


def tile_shape(dut):
    """Return ``(rows, cols)`` of the DUT, read from its stream payload widths."""
    rows = (len(dut.moving__payload) - 4) // OPERAND_WIDTH
    cols = (len(dut.stationary__payload) - 1) // OPERAND_WIDTH
    return rows, cols


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
        self.model = TileModel(self.rows, self.cols, self.scoreboard)
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
        """Queue one matmul on the drivers; see :meth:`TileModel.submit` for the arguments
        and errors. Returns the :class:`MatmulRecord`."""
        record, stationary_beats, moving_beats = self.model.submit(
            stationary, moving, accumulate=accumulate, ftz=ftz, expected=expected)
        for beat in stationary_beats:
            self.stationary.send(beat)
        for beat in moving_beats:
            self.moving.send(beat)
        return record

    @property
    def matmuls(self):
        """Submitted matmuls (list of :class:`MatmulRecord`)."""
        return self.model.matmuls

    def _on_result(self, beat, cycle):
        lanes = list(beat.data)
        self.scoreboard.observe(lanes, bool(beat.last))
        self.model.on_result(self.result.received - 1, lanes, cycle)

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
        self.model.stamp_accepts(self.moving.transfer_cycles)

    def results(self, record):
        """The PSUM the RTL produced for ``record``: [M, N], int32 (INT8) or float32 (BF16)."""
        return self.model.results(record)

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
