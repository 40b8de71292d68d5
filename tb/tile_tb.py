"""The tile's testbench class: clock, reset, drivers, monitor, golden model, scoreboard."""

import json
import os
import pickle
import random
import tempfile

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from systolica.hdl.layouts import (
    ErrorCode,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
)

from . import protocol
from .model import TileModel, lane_width
from .packing import LayoutPacker
from .scoreboard import Scoreboard
from .streams import StreamDriver, StreamMonitor

#: Clock period used by every test, in ns.
CLOCK_PERIOD_NS = 10


def status_fields(raw):
    """``(rejected, error code)`` of a raw ``status`` value (ints; an invalid code stays an
    int so that it can be reported)."""
    layout = status_layout()
    rejected = layout["rejected"]
    error = layout["error"]
    return ((raw >> rejected.offset) & ((1 << rejected.width) - 1),
            (raw >> error.offset) & ((1 << error.width) - 1))


class SimulationStuck(AssertionError):
    """The tile stopped making progress before every expected result arrived."""


class TileTB:
    """Drive commands through the tile and check every result against the golden model.

    The TB keeps a shadow of the tile's PSUM (bit patterns, ``banks x entries x cols``) so
    that accumulating matmuls are checked against ``nc_matmul(..., psum=shadow,
    accumulate=True)`` and READ commands against the shadow region. Every result lane is
    compared, including lanes ``>= M`` (the tile computes them with the zero-padded
    stationary, and the golden model does the same). Commands the tile must reject are
    checked through its ``status`` output by :meth:`check`.

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
    psum_zeroed : bool
        Whether PSUM is known to hold zeros (the first run of a fresh simulation); see
        :class:`TileModel`. Tests that share a simulation leave it False.
    model_class : type
        The golden model's class: :class:`TileModel`, or an error-injection subclass
        (:mod:`systolica.tb.fault_injection`, tests only).
    """

    def __init__(self, dut, seed, idle=0.0, backpressure=0.0, psum_zeroed=False,
                 model_class=TileModel):
        self.dut = dut
        # The tile's size, type set and PSUM, as the host's run set them from its
        # TileConfig (every run starts through the builder's run_tests, which sets them).
        config = protocol.read_tile_config(os.environ)
        if config is None:
            raise RuntimeError(f"{protocol.TILE_CONFIG} is not set: start the simulation "
                               f"with systolica.sim.builder.runner.run_tests")
        self.rows, self.cols = config["rows"], config["cols"]
        self.log = dut._log
        rng = random.Random(seed)
        self.scoreboard = Scoreboard(log=self.log)
        self.command = StreamDriver(dut, "command", command_layout(),
                                    random.Random(rng.random()), idle)
        mx = self._mx = config.get("mx", False)
        width = lane_width(config["dtypes"], mx)
        self.stationary = StreamDriver(dut, "stationary",
                                       stationary_layout(self.cols, width, mx),
                                       random.Random(rng.random()), idle)
        self.moving = StreamDriver(dut, "moving", moving_layout(self.rows, width, mx),
                                   random.Random(rng.random()), idle)
        self.result = StreamMonitor(dut, "result", result_layout(self.cols),
                                    random.Random(rng.random()), backpressure, self._on_result)
        self.model = model_class(self.rows, self.cols, self.scoreboard,
                                 psum_zeroed=psum_zeroed,
                                 mx=mx, **{key: config[key] for key in (
                                     "banks", "entries", "dtypes", "double_row")})
        self._packers = {name: LayoutPacker(layout) for name, layout in (
            ("stationary", stationary_layout(self.cols, width, mx)),
            ("moving", moving_layout(self.rows, width, mx)),
            ("result", result_layout(self.cols)))}
        self._idle, self._backpressure = idle, backpressure
        #: Operands of each accepted matmul by record index, kept only for the coverage dump
        #: (``$SYSTOLICA_COVERAGE``, see :meth:`check`).
        self._coverage = os.environ.get(protocol.COVERAGE)
        self._operands = {}
        self._moving_bits = {}      # record index -> its moving lanes, until run() packs them
        self._moving_scales = {}    # the same for their E8M0 scale lanes (an MX tile)
        #: Clock cycles stepped so far, and the cycle after the last expected result.
        self.cycle = 0
        self.finished = 0

    # ---- set-up ---------------------------------------------------------------------------
    async def start(self, reset_cycles=3):
        """Start the clock and hold reset for ``reset_cycles`` cycles."""
        Clock(self.dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        self.dut.rst.value = 1
        for port in ("command__valid", "stationary__valid", "moving__valid", "result__ready"):
            getattr(self.dut, port).value = 0
        for _ in range(reset_cycles):
            await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0

    # ---- stimulus -------------------------------------------------------------------------
    def submit(self, stationary, moving, *, accumulate=False, ftz=False, bank=0, offset=0,
               expected=None, perf_mode=None, is_transpose=False, tile_position=None,
               tile_size=None):
        """Queue one matmul on the drivers; see :meth:`TileModel.submit` for the arguments
        and errors. Returns the :class:`CommandRecord`."""
        record, command, s_bits, m_bits = self.model.submit(
            stationary, moving, accumulate=accumulate, ftz=ftz, bank=bank, offset=offset,
            expected=expected, perf_mode=perf_mode, is_transpose=is_transpose,
            tile_position=tile_position, tile_size=tile_size)
        if self._coverage and record.error is None:
            self._operands[record.index] = (stationary, moving)
        # On an MX tile a matmul that is not MX sends scale 0 in every lane (as
        # TileModel.scales gives for it).
        self._send(record, command, s_bits, m_bits,
                   (np.zeros_like(s_bits), np.zeros_like(m_bits)) if self._mx else None)
        return record

    def submit_mx(self, stationary, moving, stationary_scale, moving_scale, *,
                  accumulate=False, bank=0, offset=0, tile_position=None, tile_size=None,
                  dst_dtype="fp32", rounding="rne", seed=0):
        """Queue one MX matmul on a tile generated with the ``mx`` type set; see
        :meth:`TileModel.submit_mx` for the arguments (elements ``[P, F, 4]``, E8M0 scales
        ``[P // 8, F]``, ``dst_dtype`` ``"fp32"`` or ``"bf16"``) and errors. Its stationary
        beats carry the x4 words in ``data`` and their scales in ``scale``; its moving
        scales are packed with its moving words at :meth:`run`. Returns the
        :class:`CommandRecord`."""
        item = self.model.prepare_mx(stationary, moving, stationary_scale, moving_scale,
                                     accumulate, bank, offset, tile_position, tile_size,
                                     dst_dtype, rounding, seed)
        record = self.model.commit_mx(item)
        if self._coverage:      # coverage samples an MX matmul's scales (verif.coverage)
            self._operands[record.index] = (stationary_scale, moving_scale)
        self._send(record, *self.model.stimulus(item), self.model.scales(item))
        return record

    def _send(self, record, command, s_bits, m_bits, scales):
        """Queue a matmul's command and stationary beats; keep its moving lanes (and, on an
        MX tile, ``scales``: its stationary and moving E8M0 lanes) for :meth:`run`."""
        self.command.send(command)
        fields = {"data": s_bits}
        if scales is not None:
            fields["scale"], self._moving_scales[record.index] = scales
        for beat in self._packers["stationary"].pack_ints(len(s_bits), **fields):
            self.stationary.send(beat)
        self._moving_bits[record.index] = m_bits    # packed with the rest at run()

    def submit_command(self, command):
        """Queue a READ or an illegal command (a :class:`systolica.golden.Command`); see
        :meth:`TileModel.submit_command`. Returns the :class:`CommandRecord`."""
        record, beat = self.model.submit_command(command)
        self.command.send(beat)
        return record

    def read(self, *, n, bank=0, offset=0):
        """Queue a READ of PSUM entries ``offset .. offset + n - 1`` of ``bank``."""
        record, beat = self.model.read(n=n, bank=bank, offset=offset)
        self.command.send(beat)
        return record

    @property
    def matmuls(self):
        """Submitted matmuls that the tile accepts (list of :class:`CommandRecord`)."""
        return self.model.matmuls

    @property
    def records(self):
        """Every submitted command (list of :class:`CommandRecord`)."""
        return self.model.records

    def _on_result(self, raw, cycle):
        beat = self._packers["result"].unpack_ints([raw])
        lanes = np.array([int(v) for v in beat["data"][0]], np.uint64)
        self.model.on_result(self.result.received - 1, lanes, cycle, int(beat["last"][0]))

    # ---- clock loop -----------------------------------------------------------------------
    def cycle_budget(self):
        """Cycles the queued work may take before the TB declares the tile stuck (int)."""
        beats = sum(r.k + r.n + 1 for r in self.records)
        latency = self.rows + self.cols
        slow = (1.0 - self._idle) * (1.0 - self._backpressure)
        return int(200 + 8 * (beats + latency * (len(self.records) + 1)) / slow)

    async def _step(self):
        parts = (self.command, self.stationary, self.moving, self.result)
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
        if self._mx:        # the moving scales on the same beat plan as the words
            data, groups, scales = self.model.plan(self._moving_bits, self._moving_scales)
            fields = {"scale": scales}
        else:
            (data, groups), fields = self.model.plan(self._moving_bits), {}
        self._moving_bits, self._moving_scales = {}, {}
        for beat in self._packers["moving"].pack_ints(len(data), data=data, groups=groups,
                                                      **fields):
            self.moving.send(beat)
        budget = self.cycle_budget() if max_cycles is None else max_cycles
        start = self.cycle
        while self.scoreboard.outstanding or self.command.pending:
            if self.cycle - start > budget:
                raise SimulationStuck(
                    f"tile stuck: no completion within {budget} cycles; "
                    f"commands sent {self.command.sent} ({self.command.pending} pending), "
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
        self.model.stamp(self.command.transfer_cycles, self.moving.transfer_cycles)

    def results(self, record):
        """The PSUM the RTL produced for ``record``: [M, N], int32 (INT8) or float32 (BF16)."""
        return self.model.results(record)

    def check(self):
        """Raise ``AssertionError`` unless every result arrived and matched and the tile's
        ``status`` counts exactly the rejections the model predicts (last error included).

        With ``SYSTOLICA_STATS`` set, appends one JSON line with the MACs checked to that
        file (the regression sums them). With ``SYSTOLICA_COVERAGE`` set to a folder, writes
        what functional coverage samples (tile size, idle and backpressure levels, the
        checked records with their stamps, each matmul's operands) into a pickle file there;
        the regression samples it (``python -m systolica.verif.coverage --dumps``).
        """
        self.scoreboard.check_complete()
        got = status_fields(self.dut.status.value.to_unsigned())
        want = self.model.expected_status()
        names = {e.value: e.name for e in ErrorCode}
        assert got == want, (f"status: {got[0]} commands rejected, last error "
                             f"{names.get(got[1], got[1])}; expected {want[0]}, "
                             f"{names[want[1]]}")
        self.log.info("scoreboard: %s", self.scoreboard.summary())
        stats = os.environ.get(protocol.STATS)
        if stats:
            with open(stats, "a") as handle:
                handle.write(json.dumps(self.scoreboard.macs_checked) + "\n")
        if self._coverage:
            os.makedirs(self._coverage, exist_ok=True)
            handle, path = tempfile.mkstemp(suffix=".pkl", dir=self._coverage)
            with os.fdopen(handle, "wb") as out:
                pickle.dump({"rows": self.rows, "cols": self.cols, "idle": self._idle,
                             "backpressure": self._backpressure, "records": self.records,
                             "operands": self._operands}, out)

    def submit_slabs(self, stationary, moving, *, ftz=False):
        """Queue ``stationary.T @ moving`` with any K: K-slabs of ``rows`` accumulating in PSUM.

        Returns the record of the last slab (whose results are the full sums).
        """
        record = None
        for i, start in enumerate(range(0, stationary.shape[0], self.rows)):
            part = slice(start, start + self.rows)
            record = self.submit(stationary[part], moving[part], accumulate=i > 0, ftz=ftz)
        return record
