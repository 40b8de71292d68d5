"""Python API: run matmuls on the RTL tile and get PSUM results and cycle counts."""

import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from systolica.golden import nc_matmul, wrap_int32

from .errors import SimulationError
from .runner import Build, TestRun, build, run_tests
from .toolchain import check_simulator_name

_counter = itertools.count()


class MatmulResult(NamedTuple):
    """Result of :func:`run_matmul`.

    Attributes
    ----------
    psum : numpy.ndarray, int32, shape [M, N]
        PSUM after the matmul.
    cycles : int
        Clock cycles from the cycle the first moving beat was accepted to the cycle the last
        result was taken, inclusive (``N + rows + cols`` when nothing stalls).
    """

    psum: np.ndarray
    cycles: int


@dataclass(frozen=True)
class ProgramResult:
    """Result of :func:`run_program`.

    Attributes
    ----------
    psums : list of numpy.ndarray (int32, [M, N])
        The RTL's PSUM for every matmul, in order.
    first_accept, last_result : list of int
        Per matmul, the cycle its first moving beat was accepted and its last result taken.
    cycles : int
        Cycles from the end of reset until the last result was taken.
    seconds : float
        Wall time of the simulation's clock loop alone (no start-up), in seconds.
    mismatches : int
        PSUM words that differed from the golden model (the scoreboard's count).
    build : Build
        The simulator build used.
    run : TestRun
        The simulator run (log, waveform, wall time).
    """

    psums: list
    first_accept: list
    last_result: list
    cycles: int
    seconds: float
    mismatches: int
    build: Build
    run: TestRun


def _check_positive_int(name, value):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def _check_operands(stationary, moving, rows, cols):
    for name, array in (("stationary", stationary), ("moving", moving)):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy int8 array, not {type(array).__name__}")
        if array.dtype != np.int8:
            raise TypeError(f"{name} must have dtype int8, not {array.dtype} "
                            f"(convert with .astype(np.int8) after checking the range)")
        if array.ndim != 2:
            raise ValueError(f"{name} must be 2-D, not {array.ndim}-D with shape {array.shape}")
    (k, m), (k2, n) = stationary.shape, moving.shape
    if k != k2:
        raise ValueError(f"stationary [K, M] and moving [K, N] must share K; got stationary "
                         f"{stationary.shape} and moving {moving.shape}")
    if not 1 <= k <= rows:
        raise ValueError(f"K = {k} must be between 1 and rows = {rows} (split larger K into "
                         f"several accumulating matmuls)")
    if not 1 <= m <= cols:
        raise ValueError(f"M = {m} must be between 1 and cols = {cols}")
    if n < 1:
        raise ValueError("N (moving columns) must be at least 1, not 0")


def run_program(jobs, *, rows, cols, simulator="verilator", waves=False, seed=1, idle=0.0,
                backpressure=0.0, build_root=None, keep=None):
    """Run a sequence of matmuls back to back on one RTL tile.

    Parameters
    ----------
    jobs : sequence of (numpy.ndarray, numpy.ndarray)
        ``(stationary [K, M] int8, moving [K, N] int8)`` per matmul, K <= rows, M <= cols.
    rows, cols : int
        Tile size in PEs.
    simulator : {"verilator", "icarus"}
    waves : bool
        Trace the run into an FST waveform (``ProgramResult.run.waveform``).
    seed : int
        Seed of the idle and backpressure patterns (COCOTB_RANDOM_SEED).
    idle, backpressure : float
        Probability per cycle of an input stream idling / the result stream stalling, [0, 1).
    build_root : path, optional
        Where builds and runs go (default ``$SYSTOLICA_BUILD_DIR`` or ``./build``).
    keep : bool, optional
        Keep the run folder (log, results, waveform); default: keep only with ``waves``.

    Returns
    -------
    ProgramResult

    Raises
    ------
    TypeError, ValueError
        On bad operands or arguments (before anything is built).
    SimulatorNotFoundError, BuildError, SimulationError
        When a tool is missing, the build fails, or the simulation fails or gets stuck.
    """
    rows = _check_positive_int("rows", rows)
    cols = _check_positive_int("cols", cols)
    check_simulator_name(simulator)
    jobs = list(jobs)
    if not jobs:
        raise ValueError("jobs must hold at least one (stationary, moving) pair")
    for stationary, moving in jobs:
        _check_operands(stationary, moving, rows, cols)
    for name, p in (("idle", idle), ("backpressure", backpressure)):
        if not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1), not {p!r}")
    tile = build(rows, cols, simulator, waves=waves, build_root=build_root)
    runs = tile.directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"run{os.getpid()}_{next(_counter)}_", dir=runs))
    program = {"count": np.int64(len(jobs)), "idle": np.float64(idle),
               "backpressure": np.float64(backpressure)}
    for i, (stationary, moving) in enumerate(jobs):
        program[f"stationary_{i}"], program[f"moving_{i}"] = stationary, moving
    np.savez(run_dir / "program.npz", **program)
    results_path = run_dir / "results.npz"
    run = run_tests(tile, "systolica.tb.test_program", run_dir, seed=seed,
                    extra_env={"SYSTOLICA_PROGRAM": str(run_dir / "program.npz"),
                               "SYSTOLICA_RESULTS": str(results_path)})
    if not results_path.is_file():
        raise SimulationError(f"the simulation wrote no results; see {run.log}")
    with np.load(results_path) as out:
        missing = [i for i in range(len(jobs)) if f"psum_{i}" not in out]
        if missing:
            raise SimulationError(
                f"matmuls {missing} did not complete ({int(out['observed_beats'])} of "
                f"{int(out['expected_beats'])} result beats arrived); see {run.log}")
        result = ProgramResult(
            psums=[out[f"psum_{i}"] for i in range(len(jobs))],
            first_accept=[int(v) for v in out["first_accept"]],
            last_result=[int(v) for v in out["last_result"]],
            cycles=int(out["cycles"]), seconds=float(out["seconds"]),
            mismatches=int(out["mismatches"]), build=tile, run=run)
    if run.failed and not result.mismatches:
        raise SimulationError(f"the simulation failed; see {run.log}")
    if not (waves if keep is None else keep):
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def run_matmul(stationary, moving, *, rows, cols, simulator="verilator", psum=None,
               accumulate=False, waves=False):
    """Run one ``nc_matmul`` on the RTL tile; return its PSUM and cycle count.

    Parameters
    ----------
    stationary : numpy.ndarray, int8, shape [K, M]
        K <= rows, M <= cols.
    moving : numpy.ndarray, int8, shape [K, N]
        N >= 1.
    rows, cols : int
        Tile size in PEs.
    simulator : {"verilator", "icarus"}
    psum : numpy.ndarray, int32, shape [M, N], optional
        PSUM before the matmul; required with ``accumulate=True``.
    accumulate : bool
        Add the matmul into ``psum`` (INT32, wrapping) instead of overwriting it. The tile
        has no PSUM memory yet, so this add is applied on the host, with the same
        wrapping rule as the golden model.
    waves : bool
        Keep an FST waveform of the run (its path is logged and kept under the build folder).

    Returns
    -------
    MatmulResult
        ``(psum, cycles)``: int32 [M, N] and clock cycles (see :class:`MatmulResult`).

    Raises
    ------
    TypeError, ValueError
        Bad operands (not int8, not 2-D, K mismatch, K > rows, M > cols), bad sizes, an
        unknown simulator, or a bad ``psum``.
    SimulatorNotFoundError
        The simulator binary (or a build tool) is missing.
    BuildError, SimulationError
        The build or the simulation failed; a wrong RTL result raises SimulationError.
    """
    rows = _check_positive_int("rows", rows)
    cols = _check_positive_int("cols", cols)
    check_simulator_name(simulator)
    _check_operands(stationary, moving, rows, cols)
    if accumulate or psum is not None:
        # The golden model validates psum (dtype, shape) and accumulate before any build.
        nc_matmul(stationary, moving, psum=psum, accumulate=accumulate)
    result = run_program([(stationary, moving)], rows=rows, cols=cols, simulator=simulator,
                         waves=waves)
    if result.mismatches:
        raise SimulationError(f"the RTL result differs from the golden model in "
                              f"{result.mismatches} PSUM words; see {result.run.log}")
    out = result.psums[0]
    if accumulate:
        out = wrap_int32(out.astype(np.int64) + psum.astype(np.int64))
    return MatmulResult(out, result.last_result[0] - result.first_accept[0] + 1)
