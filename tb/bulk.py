"""Bulk stimulus: whole programs handed to the simulation as memory files.

The per-cycle TB (:mod:`systolica.tb.tile_tb`) wakes Python twice per clock cycle; here the
harness ``tb/harness.v`` holds the stimulus in memories loaded with ``$readmemh``, drives
the tile's streams itself (with seeded idle and backpressure), and captures every result
beat and cycle stamp, so Python wakes once per program. The host side of this module packs
the beats through the Amaranth layouts and checks every captured result with the same
model and scoreboard as the per-cycle TB; :func:`run_harness` is the cocotb side.

This module imports cocotb only inside :func:`run_harness`, so the host side works outside a
simulator.
"""

import math
from pathlib import Path

from systolica.hdl.layouts import (
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
)

from .model import TileModel
from .scoreboard import Scoreboard

#: Verilog source of the harness (top module ``systolica_harness``).
HARNESS = Path(__file__).resolve().parent / "harness.v"
#: Top module name of the harness.
HARNESS_TOPLEVEL = "systolica_harness"
#: Smallest harness memory depth (beats per stream); larger programs get the next power of 2.
MIN_DEPTH = 4096


def harness_depth(beats):
    """Memory depth a harness needs for ``beats`` beats per stream (int, power of two)."""
    return max(MIN_DEPTH, 1 << math.ceil(math.log2(max(1, beats))))


class BulkProgram:
    """A program for the harness: beats for its memories and the expectations to check.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    log : logging.Logger, optional
        Where the scoreboard reports mismatches.
    """

    def __init__(self, rows, cols, log=None):
        self.rows, self.cols = rows, cols
        self.scoreboard = Scoreboard(log=log)
        self.model = TileModel(rows, cols, self.scoreboard)
        self._layouts = (stationary_layout(cols), moving_layout(rows), result_layout(cols),
                         command_layout())
        self.command_beats, self.stationary_beats, self.moving_beats = [], [], []
        #: Status the harness reported: (rejected count, last error code), after check().
        self.status = None

    def submit(self, stationary, moving, *, accumulate=False, ftz=False, bank=0, offset=0):
        """Add one matmul (see :meth:`TileModel.submit`); returns its record."""
        record, command, s_beats, m_beats = self.model.submit(
            stationary, moving, accumulate=accumulate, ftz=ftz, bank=bank, offset=offset)
        s_layout, m_layout, _, c_layout = self._layouts
        self.command_beats.append(c_layout.const(command).as_bits())
        self.stationary_beats += [s_layout.const(b).as_bits() for b in s_beats]
        self.moving_beats += [m_layout.const(b).as_bits() for b in m_beats]
        return record

    def submit_command(self, command):
        """Add a READ or an illegal command (see :meth:`TileModel.submit_command`); returns
        its record."""
        record, beat = self.model.submit_command(command)
        self.command_beats.append(self._layouts[3].const(beat).as_bits())
        return record

    @property
    def result_count(self):
        """Result beats the program expects (int)."""
        return len(self.model.result_owner)

    @property
    def depth(self):
        """Harness memory depth this program needs (int)."""
        return harness_depth(max(len(self.command_beats), len(self.stationary_beats),
                                 len(self.moving_beats), self.result_count))

    def write(self, folder):
        """Write the memory files into ``folder``; return the harness plusargs (list of str)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        s_layout, m_layout, _, c_layout = self._layouts
        files = {}
        for name, beats, layout in (("commands", self.command_beats, c_layout),
                                    ("stationary", self.stationary_beats, s_layout),
                                    ("moving", self.moving_beats, m_layout)):
            digits = (layout.size + 3) // 4
            path = folder / f"{name}.hex"
            path.write_text("".join(f"{b:0{digits}x}\n" for b in beats) or "0\n")
            files[name] = path
        return [f"+commands={files['commands']}", f"+c_count={len(self.command_beats)}",
                f"+stationary={files['stationary']}", f"+s_count={len(self.stationary_beats)}",
                f"+moving={files['moving']}", f"+m_count={len(self.moving_beats)}",
                f"+r_count={self.result_count}",
                f"+results={folder / 'results.hex'}", f"+rstamps={folder / 'rstamps.hex'}",
                f"+mstamps={folder / 'mstamps.hex'}", f"+cstamps={folder / 'cstamps.hex'}"]

    def check(self, folder, status=None):
        """Read the harness's captured results and stamps from ``folder`` and check them.

        Every result beat goes through the scoreboard; cycle stamps are converted so that
        cycle 0 is the first cycle a beat can transfer (as in the per-cycle TB and
        ``golden.timing``). ``status`` is the harness's final ``(rejected, error)``; it
        must equal the model's prediction. Returns the number of result beats read (int).

        Raises
        ------
        FileNotFoundError
            If the harness wrote no results (the simulation did not finish).
        AssertionError
            If ``status`` differs from the rejections the model predicts.
        """
        folder = Path(folder)
        r_layout = self._layouts[2]

        def words(name):
            values = []
            path = folder / name
            if not path.is_file() and name != "results.hex":
                return values
            for line in path.read_text().splitlines():
                text = line.split("//", 1)[0].strip()   # $writememh adds address comments
                if text:
                    values += [int(x, 16) for x in text.split()]
            return values

        results = words("results.hex") if self.result_count else []
        rstamps, mstamps, cstamps = (words(n) for n in
                                     ("rstamps.hex", "mstamps.hex", "cstamps.hex"))
        for position, (raw, stamp) in enumerate(zip(results, rstamps, strict=False)):
            beat = r_layout.from_bits(raw)
            lanes = list(beat.data)
            self.scoreboard.observe(lanes, bool(beat.last))
            self.model.on_result(position, lanes, stamp - 1)
        self.model.stamp([s - 1 for s in cstamps], [s - 1 for s in mstamps])
        if status is not None:
            self.status = tuple(status)
            want = self.model.expected_status()
            assert self.status == want, (
                f"status: {self.status[0]} commands rejected (last error code "
                f"{self.status[1]}); the model expects {want[0]} (code {want[1]})")
        return len(results)


async def run_harness(dut, *, max_cycles, clock_period_ns=10, reset_cycles=3):
    """cocotb side: clock the harness (GPI clock, no Python per cycle) until it has dumped
    its results, or raise ``AssertionError`` naming its counters after ``max_cycles``.

    Returns the harness's final cycle count (int).
    """
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, First, RisingEdge, Timer

    Clock(dut.clk, clock_period_ns, unit="ns", impl="gpi").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    finished = RisingEdge(dut.dumped)
    timeout = Timer(max_cycles * clock_period_ns, unit="ns")
    if await First(finished, timeout) is timeout and not dut.dumped.value:
        raise AssertionError(
            f"tile stuck: harness not done after {max_cycles} cycles; commands sent "
            f"{int(dut.c_sent.value)}, stationary beats sent {int(dut.s_sent.value)}, "
            f"moving beats sent {int(dut.m_sent.value)}, results "
            f"received {int(dut.r_received.value)}")
    return int(dut.cycle.value)
