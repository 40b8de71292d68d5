"""The one runner of the bulk harness (``tb/harness.v``): what the run API
(:func:`systolica.sim.run_program`) and the fuzzer (:mod:`systolica.verif.fuzz`) both call
to run a :class:`~systolica.tb.bulk.BulkProgram`.

:func:`run_harness` writes the program's memory files, sets the harness's plusargs (seed,
idle and backpressure levels), its cycle budget and its timing file
(:data:`~systolica.tb.protocol.TIMING_FIELDS`, the one schema), starts the simulator
process on the cocotb module :data:`~systolica.tb.protocol.BULK_RUNNER`, reads the timing
file back, checks every captured result beat with the program's scoreboard and returns one
:class:`HarnessRun`. Nothing here raises for a failed or stuck run: the record's
:attr:`HarnessRun.errors` says what went wrong, one line each, and each caller decides (the
run API raises the first as a ``SimulationError``, the fuzzer reports them all).

The simulator build is the caller's (``systolica.sim.builder``, a layer above this one):
:func:`harness_depth_for` gives the depth to build the harness with, and the build object
starts the process (its ``run_tests`` method, see
:meth:`systolica.sim.builder.runner.Build.run_tests`).
"""

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import protocol

#: Cycles every harness run may take besides its per-beat share (reset, the dump, the
#: array's fill and drain of a one-command program).
BUDGET_BASE = 1000
#: Cycles allowed per beat and per command's fill and drain before a run counts as stuck;
#: divided by the chance that a cycle is neither idle nor backpressured.
BUDGET_PER_BEAT = 8


@dataclass(kw_only=True)
class HarnessRun:
    """What one run of the bulk harness measured and checked: the one result record of a
    harness run. :func:`run_harness` returns it; the fuzzer's
    :class:`~systolica.verif.fuzz.ProgramReport` extends it, and the run API's
    :class:`~systolica.sim.ProgramResult` takes its times, mismatch count and simulator run
    from it (after raising the first of its :attr:`errors`).

    Attributes
    ----------
    cycles : int
        Clock cycles the harness ran after reset until every command was taken and every
        result captured (the timing file's ``cycles``); 0 when the run failed before
        writing it.
    seconds, cpu_seconds : float
        Wall and CPU time of the clock loop in the simulator process, in seconds (no
        start-up).
    free_seconds, free_cpu_seconds : float or None
        With ``free_run``: wall and CPU time of the same build clocking as many cycles with
        no stimulus and no Python (``make bench``'s limit), in seconds; else None.
    status : tuple of (int, int) or None
        The tile's final ``status``: ``(rejected-command count (16 bits, wraps), latest
        ErrorCode value)``, checked against the golden model's prediction; None when the
        run failed before reporting it.
    expected_beats : int
        Result beats the program expects (``N`` per legal command).
    result_beats : int
        Result beats the scoreboard received and checked.
    missing_beats, unexpected_beats : int
        Result beats the scoreboard expected and never saw / saw and did not expect (both 0
        when every transaction is accounted for; all expected beats count as missing when
        the run failed).
    mismatches : int
        PSUM words that differed from the golden model, bit for bit (the scoreboard's count).
    words : int
        PSUM words the scoreboard checked: ``cols x N`` per legal command (every lane of
        every result beat, lanes ``>= M`` of a matmul included).
    run : systolica.sim.builder.runner.TestRun or None
        The simulator process's run: its log (``run.log``), waveform and wall time with
        start-up (``run.seconds``, in seconds).
    run_dir : pathlib.Path or None
        The run folder (memory files, captured results, timing file).
    checked : bool
        Whether the captured results were read and went through the scoreboard (False
        when the run failed, or its timing or results file was unreadable).
    errors : list of str
        What went wrong, one line each: a failed or stuck run (the harness's "tile stuck"
        message with its counters), an unreadable timing or results file, a status that
        differs from the model's, result beats lost or unexpected. Empty when the run is
        trustworthy (wrong words are counted in :attr:`mismatches`, not listed here).
    """

    cycles: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    free_seconds: float | None = None
    free_cpu_seconds: float | None = None
    status: tuple | None = None
    expected_beats: int = 0
    result_beats: int = 0
    missing_beats: int = 0
    unexpected_beats: int = 0
    mismatches: int = 0
    words: int = 0
    run: object = None
    run_dir: Path | None = None
    checked: bool = False
    errors: list = field(default_factory=list)

    @property
    def passed(self):
        """No error and no wrong word (bool)."""
        return not self.errors and not self.mismatches


def harness_depth_for(program, simulator):
    """Memory depth to build the harness with for ``program`` (a BulkProgram) on
    ``simulator`` (int): the program's own for Icarus; for Verilator at least
    :func:`~systolica.tb.bulk.resident_depth`, so that one build per tile serves every
    program that fits (a Verilator build costs seconds to minutes, an Icarus one almost
    nothing, and Icarus memories cost more)."""
    from systolica.hdl.layouts import command_layout

    from .bulk import resident_depth

    depth = program.depth
    if simulator == "verilator":
        depth = max(depth, resident_depth(program.rows, program.cols, command_layout().size,
                                          program.width, program.mx))
    return depth


def level(probability):
    """The harness's 8-bit level of a probability in [0, 1) (``+idle``, ``+bp``: int)."""
    return int(round(probability * 256))


def cycle_budget(program, idle=0.0, backpressure=0.0):
    """Clock cycles after which a run of ``program`` counts as stuck (int): every beat and
    every command's fill and drain of the array (``rows + cols``) gets
    :data:`BUDGET_PER_BEAT` cycles, scaled by the stalls ``idle`` and ``backpressure``
    (probabilities) make likely, plus :data:`BUDGET_BASE`."""
    slow = (1.0 - idle) * (1.0 - backpressure)
    beats = (program.command_count + program.stationary_count + program.result_count
             + (program.rows + program.cols) * (program.command_count + 1))
    return int(BUDGET_BASE + BUDGET_PER_BEAT * beats / slow)


def run_harness(program, tile, run_dir, *, seed=1, idle=0.0, backpressure=0.0, plusargs=(),
                max_cycles=None, progress=None, free_run=False):
    """Run ``program`` (a :class:`~systolica.tb.bulk.BulkProgram`) on the harness build
    ``tile`` in ``run_dir`` and check every result; return a :class:`HarnessRun`.

    Matmuls the program staged (:meth:`~systolica.tb.bulk.BulkProgram.stage_many`) get
    their golden model in a thread while the simulator process runs.

    Parameters
    ----------
    tile : systolica.sim.builder.runner.Build
        A harness build (``harness_depth`` at least the program's) of the program's tile.
    run_dir : path
        The run folder (made if missing).
    seed : int
        Seed of the harness's idle and backpressure generators (``+seed``) and of cocotb.
    idle, backpressure : float
        Probability per cycle that an input stream idles / the result stream stalls, [0, 1).
    plusargs : sequence of str
        More simulator arguments (a mutant build's).
    max_cycles : int, optional
        Cycle budget (default :func:`cycle_budget`); past it the run is stuck.
    progress : callable, optional
        ``progress(results, total, cycle)`` about four times a second while the simulator
        runs (result beats so far, beats expected, the harness's cycle).
    free_run : bool
        Also time the same build free-running as many cycles (``HarnessRun.free_seconds``).

    Raises
    ------
    ValueError
        If the build's harness is shallower than the program needs.
    SimulationError
        (From the build's ``run_tests``) if the simulator wrote no test results at all.
    """
    if program.depth > tile.harness_depth:
        raise ValueError(f"the program needs a harness depth of {program.depth}, more than "
                         f"the build's {tile.harness_depth}")
    run_dir = Path(run_dir)
    timing, progress_file = run_dir / "timing.txt", run_dir / "progress.txt"
    plusargs = program.write(run_dir) + [f"+seed={seed}", f"+idle={level(idle)}",
                                         f"+bp={level(backpressure)}", *plusargs]
    budget = cycle_budget(program, idle, backpressure) if max_cycles is None else max_cycles
    # The harness's cocotb side has no assertions for pytest to rewrite (that hook costs the
    # simulator process a good part of its start-up).
    env = {protocol.MAX_CYCLES: str(budget), protocol.BULK_TIMING: str(timing),
           "COCOTB_REWRITE_ASSERTION_FILES": ""}
    if progress is not None:
        # Wake Python about every millisecond of simulation: Icarus runs ~100x slower.
        pe_cycles = 65536 if tile.simulator == "verilator" else 655
        env.update({protocol.PROGRESS: str(progress_file), protocol.PROGRESS_CYCLES:
                    str(max(16, pe_cycles // (program.rows * program.cols)))})
    total = program.result_count
    # Simulating needs nothing of the golden model: staged matmuls are modelled in a thread
    # while the simulator process runs (on another core where there is one).
    with ThreadPoolExecutor(max_workers=1) as pool:
        staged = pool.submit(program.commit_staged)
        with _polling(progress_file, progress, total):
            run = tile.run_tests(protocol.BULK_RUNNER, run_dir, seed=seed, plusargs=plusargs,
                                 testcase="run_bulk", extra_env=env)
        staged.result()
    out = HarnessRun(expected_beats=total, run=run, run_dir=run_dir)
    _check(program, run, timing, out)
    if free_run and not out.errors:
        cycles = max(r.last_result for r in program.model.records) + 1
        free_timing = run_dir / "free.txt"
        tile.run_tests(protocol.BULK_RUNNER, run_dir / "free", seed=seed, plusargs=plusargs,
                       testcase="free_run",
                       extra_env={protocol.FREE_RUN_CYCLES: str(cycles),
                                  protocol.BULK_TIMING: str(free_timing)})
        try:
            free = protocol.read_timing(free_timing)
            out.free_seconds, out.free_cpu_seconds = free["seconds"], free["cpu_seconds"]
        except (OSError, ValueError) as error:
            out.errors.append(f"the free run's timing: {error}; see {run_dir / 'free'}")
    return out


def _check(program, run, timing, out):
    """Fill ``out`` (a HarnessRun) from the run's timing file and captured results."""
    see = f"; see {run.log}"
    # The harness writes no results file for a program that expects no result beat.
    captured = (out.run_dir / "results.hex").is_file() or not out.expected_beats
    if run.failed or not timing.is_file() or not captured:
        # The cocotb side's own message (with the harness's counters), under its
        # traceback and above cocotb's summary table.
        lines = run.log.read_text(errors="replace").splitlines() if run.log.is_file() else []
        stuck = [line[line.index(protocol.STUCK):].strip() for line in lines
                 if protocol.STUCK in line]
        out.errors.append((stuck[-1] if stuck else "the harness run failed") + see)
        out.missing_beats = out.expected_beats          # none of them was checked
        return
    try:
        measured = protocol.read_timing(timing)
    except ValueError as error:
        out.errors.append(f"{error}{see}")
        out.missing_beats = out.expected_beats
        return
    out.cycles, out.seconds = measured["cycles"], measured["seconds"]
    out.cpu_seconds = measured["cpu_seconds"]
    out.status = (measured["rejected"], measured["error"])
    try:
        received = program.check(out.run_dir, status=out.status)
    except AssertionError as error:                     # the status differs from the model's
        out.errors.append(str(error))
        received = None
    except (FileNotFoundError, ValueError) as error:    # x/z bits, a malformed line
        out.errors.append(f"the harness's captured results are unreadable ({error}); see "
                          f"{out.run_dir}")
        out.missing_beats = out.expected_beats
        return
    out.checked = True
    board = program.scoreboard
    out.result_beats, out.mismatches = board.observed_count, len(board.mismatches)
    out.missing_beats, out.unexpected_beats = board.outstanding, board.unexpected
    out.words = sum(int(np.size(r.expected)) for r in program.model.records
                    if r.expected is not None)
    if received is not None and received != out.expected_beats:
        out.errors.append(f"{received} of {out.expected_beats} result beats arrived{see}")
    if board.outstanding or board.unexpected:
        out.errors.append(f"scoreboard: {board.outstanding} beats missing, "
                          f"{board.unexpected} unexpected{see}")


@contextmanager
def _polling(path, progress, total):
    """While the block runs, hand ``progress`` the harness's reports from ``path`` (a
    thread polls the file four times a second)."""
    if progress is None:
        yield
        return
    stop = threading.Event()

    def poll():
        seen = None
        while not stop.wait(0.25):
            try:
                fields = protocol.read_progress(path)
            except (OSError, ValueError):    # not written yet
                continue
            if fields != seen:
                seen = fields
                progress(fields["results"], total, fields["cycle"])

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
