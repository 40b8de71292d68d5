"""Python API: run matmuls on the RTL tile and get PSUM results and cycle counts."""

import itertools
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import ml_dtypes
import numpy as np

from systolica.golden import (
    Command,
    CommandTiming,
    check_bool,
    check_fits,
    check_ftz,
    check_operands,
    check_positive,
    check_region,
    check_tile,
    check_tile_operands,
    check_transpose,
    command_error,
    format_of,
    nc_matmul,
    operand_formats,
    psum_accumulate,
    region_limit,
)
from systolica.golden.mx import MX_TYPES, check_mx_operands, command_types
from systolica.golden.timing import command_schedule
from systolica.hdl.config import TileConfig
from systolica.sim.builder.errors import SimulationError
from systolica.sim.builder.runner import Build, TestRun, build, run_tests
from systolica.sim.builder.toolchain import check_simulator_name
from systolica.tb import protocol

_counter = itertools.count()


@dataclass(frozen=True)
class Matmul:
    """One matmul of a program for :func:`run_program`.

    Attributes
    ----------
    stationary : numpy.ndarray, shape [K, M]
        int8, or a float type: ``ml_dtypes.bfloat16``, ``numpy.float16``,
        ``ml_dtypes.float8_e4m3`` / ``float8_e5m2`` / ``float8_e3m4`` / ``float8_e4m3fn``.
    moving : numpy.ndarray, shape [K, N]
        int8 with int8; any float type with a float stationary.
    accumulate : bool
        Add into the PSUM region (left by earlier matmuls of the program, zero after reset)
        instead of overwriting it.
    ftz : bool
        Flush subnormals to zero (float only).
    bank : int
        PSUM bank, 0..7.
    offset : int
        First PSUM entry of the region in the bank; ``offset + N <= 512``.
    perf_mode : None or "double_row"
        FP8 double-row (both operands e4m3/e5m2): K up to ``2 * rows``.
    is_transpose : bool
        Transpose mode (:func:`systolica.golden.nc_matmul`'s ``is_transpose``): ``moving``
        has one 1 per column, zeros elsewhere (the identity for a full transpose), and the
        result [M, N] is the selected stationary rows, bit for bit, in the type's PSUM
        element type (``OperandFormat.transpose_dtype``: the type itself for BF16/FP16,
        uint16 with the 8 bits in its low byte for INT8/FP8). No ``accumulate``, ``ftz``
        or ``perf_mode``; K <= rows, M <= cols.
    tile_position, tile_size : (int, int) or None
        Run in a row/column tile (:func:`systolica.golden.check_tile`: sizes the array's
        extent, half or quarter, a start a multiple of the size; K and M within the tile);
        both None (default) for the whole array. The result [M, N] is the tile's PSUM
        partitions ``col .. col + M - 1``; the others keep their words.
    """

    stationary: np.ndarray
    moving: np.ndarray
    accumulate: bool = False
    ftz: bool = False
    bank: int = 0
    offset: int = 0
    perf_mode: str | None = None
    is_transpose: bool = False
    tile_position: tuple | None = None
    tile_size: tuple | None = None


@dataclass(frozen=True)
class MatmulMx:
    """One MX matmul (NeuronCore-v4's ``nc_matmul_mx``) of a program for
    :func:`run_program`, on a tile generated with the ``mx`` type set (either driver).

    Attributes
    ----------
    stationary : numpy.ndarray, shape [P, M, 4]
        MX elements (``ml_dtypes.float8_e4m3fn``, ``float8_e5m2`` or ``float4_e2m1fn``):
        ``[p, m, j]`` is lane j of the x4 word at partition p (a contraction of K = 4 P);
        P a multiple of 8, at most rows; M <= cols.
    moving : numpy.ndarray, shape [P, N, 4]
        MX elements of any of those types (legacy ``float8_e4m3`` does not mix).
    stationary_scale, moving_scale : numpy.ndarray, shapes [P // 8, M] and [P // 8, N]
        E8M0 block scales (uint8 bits or ``ml_dtypes.float8_e8m0fnu``): ``scale[g, f]``
        applies to partitions ``8 g .. 8 g + 7`` of column ``f`` (0xFF is NaN).
    accumulate : bool
        Add into the PSUM region with one FP32 add instead of overwriting it.
    bank, offset : int
        The PSUM region, as :class:`Matmul`.
    tile_position, tile_size : (int, int) or None
        A row tile (whole columns: MX takes no column tile), or None for the whole array.
    dst_dtype : numpy.float32 or ml_dtypes.bfloat16
        The PSUM element type: BF16 rounds the FP32 result before the write (after the add
        when accumulating).
    rounding : "rne" or "stochastic"
        The BF16 rounding (stochastic: BF16 only): to nearest even, or by the bits of one
        XORWOW generator per PSUM partition seeded from ``seed``
        (:func:`systolica.golden.xorwow_bits`).
    seed : int
        The stochastic rounding's seed, 0 .. 2^32 - 1.

    The result [M, N] is in ``dst_dtype``, :func:`systolica.golden.nc_matmul_mx`'s bit for
    bit.
    """

    stationary: np.ndarray
    moving: np.ndarray
    stationary_scale: np.ndarray
    moving_scale: np.ndarray
    accumulate: bool = False
    bank: int = 0
    offset: int = 0
    tile_position: tuple | None = None
    tile_size: tuple | None = None
    dst_dtype: object = np.float32
    rounding: str = "rne"
    seed: int = 0

    def command(self):
        """The golden :class:`~systolica.golden.Command` of this matmul (``mx=True``, the
        element types as ``dtype`` / ``moving_dtype``, an MXFP4 side as ``fp4`` with type
        e4m3fn, ``dst_dtype`` ``"fp32"`` or ``"bf16"``).

        Raises
        ------
        ValueError
            If ``dst_dtype`` is not float32 or bfloat16, or a field does not fit the
            command word.
        KeyError
            If an operand's type is not an MX element type (check the job first).
        """
        names, fp4 = command_types(self.stationary, self.moving)
        p, m = self.stationary.shape[:2]
        return Command("matmul", k=p, m=m, n=self.moving.shape[1], bank=int(self.bank),
                       offset=int(self.offset), dtype=names[0], moving_dtype=names[1],
                       mx=True, fp4=fp4, accumulate=bool(self.accumulate),
                       dst_dtype=_mx_dst(self), rounding=self.rounding, seed=int(self.seed),
                       **_tile(self))


@dataclass(frozen=True)
class Read:
    """A PSUM read-out command of a program for :func:`run_program`.

    Streams PSUM entries ``offset .. offset + n - 1`` of ``bank`` out of the tile, after
    every earlier command of the program has written them.

    Attributes
    ----------
    n : int
        Entries to read, 1..512 - offset.
    bank, offset : int
        PSUM bank (0..7) and first entry.
    """

    n: int
    bank: int = 0
    offset: int = 0


class _PsumAndCycles(NamedTuple):
    psum: np.ndarray
    cycles: int


class MatmulResult(_PsumAndCycles):
    """Result of :func:`run_matmul`: unpacks as ``psum, cycles``.

    Attributes
    ----------
    psum : numpy.ndarray, int32 (INT8) or float32 (BF16), shape [M, N]
        PSUM after the matmul.
    cycles : int
        Clock cycles from the cycle the first moving beat was accepted to the cycle the last
        result was taken, inclusive (``N + rows + cols`` when nothing stalls).
    waveform : pathlib.Path or None
        The FST waveform of the run (``waves=True``), else ``None``.
    """

    def __new__(cls, psum, cycles, waveform=None):
        result = super().__new__(cls, psum, cycles)
        result.waveform = waveform
        return result


@dataclass(frozen=True)
class ProgramResult:
    """Result of :func:`run_program`.

    Attributes
    ----------
    psums : list of numpy.ndarray (int32 or float32)
        Per command, in order: a matmul's PSUM region after it ([M, N]); a READ's entries
        ([cols, N], int32 or float32 by the data type of the matmul that wrote its first
        entry).
    stamps : list of systolica.golden.CommandTiming
        Per command, the measured cycle stamps: ``accept`` (command taken), ``issues`` (each
        moving beat taken; empty for a READ, whose beats do not cross a stream) and
        ``results`` (each result beat taken). Stationary beats are not stamped (``loads``
        is empty).
    predicted : list of systolica.golden.CommandTiming
        The cycle model's stamps for the same program with no stalls
        (:func:`systolica.golden.command_schedule`), with ``loads`` and a READ's ``issues``
        filled in; :meth:`model_agrees` compares it with ``stamps`` (True when ``idle`` and
        ``backpressure`` are 0).
    first_accept, last_result : list of int or None
        Per command, the cycle its first moving beat was accepted (None for a READ) and its
        last result taken.
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
    free_seconds : float or None
        With ``free_run=True`` (bulk driver only): wall time of the same build clocking the
        same number of cycles over the same stimulus with no Python at all, in seconds.
    cpu_seconds, free_cpu_seconds : float or None
        Bulk driver only: CPU time of the simulator process over the clock loop and over
        the free run, in seconds (steadier than wall time on a loaded machine).
    """

    psums: list
    stamps: list
    predicted: list
    first_accept: list
    last_result: list
    cycles: int
    seconds: float
    mismatches: int
    build: Build
    run: TestRun
    free_seconds: float | None = None
    cpu_seconds: float | None = None
    free_cpu_seconds: float | None = None

    def model_agrees(self):
        """Whether every measured stamp equals the cycle model's (:attr:`predicted`): each
        command's accept cycle and result cycles, and each matmul's moving-beat cycles
        (bool; expected True when the run had no idle and no backpressure)."""
        return all(
            (m.accept, m.results) == (p.accept, p.results)
            and (not p.loads or m.issues == p.issues)    # READs: no moving beats
            for m, p in zip(self.stamps, self.predicted, strict=True))


def tile_config(config, rows, cols, dtypes, double_row, mx=False):
    """The :class:`~systolica.hdl.config.TileConfig` a run uses: ``config`` if given (then
    ``rows`` and ``cols`` must be left out), else the smallest one of ``rows x cols`` whose
    type set holds ``dtypes`` (the operand types of the call, golden short names), FP8
    double-row if ``double_row`` and the MX datapath (type set ``mx``) if ``mx``.

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If both ``config`` and a size are given, or (from TileConfig) a size is bad.
    """
    if config is None:
        return TileConfig.for_dtypes(rows, cols, dtypes, double_row=double_row, mx=mx)
    if not isinstance(config, TileConfig):
        raise TypeError(f"config must be a TileConfig, not {type(config).__name__}")
    if rows is not None or cols is not None:
        raise ValueError("give either config or rows and cols, not both (the config holds "
                         "the size)")
    return config


def _entries(config):
    """PSUM entries one matmul may write on ``config``'s tile: a bank's, or on an MX
    (NeuronCore-v4) tile the whole PSUM's (:func:`~systolica.golden.region_limit`)."""
    return region_limit(0, banks=config.psum_banks, entries=config.psum_entries,
                        across=config.mx)


def _check_operands(stationary, moving, config, ftz=False, perf_mode=None):
    check_bool("ftz", ftz)
    check_ftz(ftz, check_operands(stationary, moving, perf_mode=perf_mode))
    (k, m), n = stationary.shape, moving.shape[1]
    check_fits(k, m, n, rows=config.rows, cols=config.cols, entries=_entries(config),
               perf_mode=perf_mode)


#: What each rule an MX matmul can break on an MX tile allows (one-line errors).
_MX_ALLOWED = {
    "K_RANGE": "P at most the tile's rows",
    "M_RANGE": "M at most the tile's columns",
    "N_RANGE": "offset + N within PSUM from the bank's start",
    "BANK_RANGE": "a bank below the tile's PSUM banks",
    "MX_TILE": "a row tile (tile_size's columns the tile's), or none",
    "TILE_SIZE": "a row tile of the tile's rows, its half or its quarter",
    "TILE_POSITION": "a row tile starting at a multiple of its size",
    "TILE_K_RANGE": "P at most the row tile's rows",
    "TILE_M_RANGE": "M at most the tile's columns",
    "DST_MODE": "rounding='stochastic' with dst_dtype=ml_dtypes.bfloat16 only",
}


def _check_built(command, config):
    """ValueError (one line) if the tile of ``config`` was not generated for ``command``'s
    operand types or mode (the tile would reject it: ``TYPE_NOT_BUILT``), or would reject
    an MX matmul for another reason."""
    error = command_error(command, rows=config.rows, cols=config.cols,
                          banks=config.psum_banks, entries=config.psum_entries,
                          dtypes=config.dtypes, double_row=config.double_row, mx=config.mx)
    if command.mx and error == "TYPE_NOT_BUILT":
        raise ValueError(f"the tile was generated for types {config.types_name}, not for MX "
                         f"matmuls; allowed: a TileConfig whose types include 'mx' (such as "
                         f"'int8+mx')")
    if command.mx and error is not None:
        allowed = _MX_ALLOWED.get(error, "see docs/rules.md, MX command fields")
        raise ValueError(f"the tile rejects this MX matmul ({error}: P = {command.k}, "
                         f"M = {command.m}, N = {command.n}, tile {command.tile_size or 'none'} "
                         f"on a {config.rows} x {config.cols} tile); allowed: {allowed}")
    if error == "TYPE_NOT_BUILT":
        mode = " double-row" if command.double_row else ""
        raise ValueError(f"the tile was generated for types {config.types_name}, not for a"
                         f"{mode} {command.dtype} x {command.mtype} matmul; allowed: a "
                         f"TileConfig whose types include it (types='all' has every 8/16-bit "
                         f"one, 'all+fp32' every one)")


def _job_list(jobs):
    """``jobs`` if it is an iterable of commands; TypeError naming the fix for one command
    given alone (``run_program(Matmul(...))``) or anything else that is not a list."""
    if isinstance(jobs, (Matmul, MatmulMx, Read)):
        kind = type(jobs).__name__
        raise TypeError(f"jobs must be a list of commands, not a single {kind}; allowed: "
                        f"run_program([{kind}(...)], ...) or a list of several")
    if isinstance(jobs, (str, bytes, np.ndarray)) or not hasattr(jobs, "__iter__"):
        raise TypeError(f"jobs must be a list of Matmul, MatmulMx, Read or (stationary, "
                        f"moving) commands, not {type(jobs).__name__}")
    return jobs


def _as_job(job):
    if isinstance(job, (Matmul, MatmulMx, Read)):
        return job
    if isinstance(job, tuple) and len(job) == 2:
        return Matmul(*job)
    raise TypeError(f"each job must be a Matmul, a MatmulMx, a Read or a (stationary, "
                    f"moving) pair, not {type(job).__name__}")


def _check_job(job, config):
    region = {"banks": config.psum_banks, "entries": config.psum_entries, "across": config.mx}
    if isinstance(job, Read):
        n = check_positive("Read.n", job.n)
        check_region("the READ reads", job.bank, job.offset, n, **region)
        return
    if isinstance(job, MatmulMx):
        check_bool("MatmulMx.accumulate", job.accumulate)
        dst = ml_dtypes.bfloat16 if _mx_dst(job) == "bf16" else np.float32
        check_mx_operands(job.stationary, job.moving, job.stationary_scale,
                          job.moving_scale, dst_dtype=dst, rows=config.rows)
        if job.tile_position is not None or job.tile_size is not None:
            check_tile(job.tile_position, job.tile_size, rows=config.rows, cols=config.cols)
        check_region("the matmul writes", job.bank, job.offset, job.moving.shape[1], **region)
        return
    check_bool("Matmul.accumulate", job.accumulate)
    check_transpose(job.is_transpose, perf_mode=job.perf_mode, accumulate=job.accumulate,
                    ftz=job.ftz)
    _check_operands(job.stationary, job.moving, config, job.ftz, job.perf_mode)
    if job.tile_position is not None or job.tile_size is not None:
        tile = check_tile(job.tile_position, job.tile_size, rows=config.rows, cols=config.cols)
        check_tile_operands(tile, *job.stationary.shape, cols=config.cols,
                            perf_mode=job.perf_mode)
    check_region("the matmul writes", job.bank, job.offset, job.moving.shape[1], **region)


def _mx_dst(job):
    """The Command ``dst_dtype`` of a MatmulMx (``"fp32"`` or ``"bf16"``); ValueError (one
    line) for another type."""
    try:
        dtype = np.dtype(job.dst_dtype)
    except TypeError:
        dtype = None
    if dtype == np.dtype(np.float32):
        return "fp32"
    if dtype == np.dtype(ml_dtypes.bfloat16):
        return "bf16"
    raise ValueError(f"MatmulMx.dst_dtype must be numpy.float32 or ml_dtypes.bfloat16, not "
                     f"{job.dst_dtype!r}")


def _command(job):
    """The golden Command of a job (for the cycle model)."""
    if isinstance(job, Read):
        return Command("read", n=int(job.n), bank=int(job.bank), offset=int(job.offset))
    if isinstance(job, MatmulMx):
        return job.command()
    (k, m), n = job.stationary.shape, job.moving.shape[1]
    stype, mtype = operand_formats(job.stationary.dtype, job.moving.dtype,
                                   perf_mode=job.perf_mode)
    return Command("matmul", k=k, m=m, n=n, bank=int(job.bank), offset=int(job.offset),
                   dtype=stype.name, moving_dtype=mtype.name, perf_mode=job.perf_mode,
                   ftz=bool(job.ftz), accumulate=bool(job.accumulate),
                   is_transpose=bool(job.is_transpose), **_tile(job))


def _tile(job):
    """A checked job's tile as Command fields (tuples of int, or nothing)."""
    if job.tile_position is None:
        return {}
    return {"tile_position": tuple(int(v) for v in job.tile_position),
            "tile_size": tuple(int(v) for v in job.tile_size)}


def run_program(jobs, *, config=None, rows=None, cols=None, simulator="verilator",
                waves=False, seed=1, idle=0.0, backpressure=0.0, build_root=None, keep=None,
                wave_format="fst", driver=None, free_run=False, progress=None):
    """Run a command sequence (matmuls and PSUM reads) back to back on one RTL tile.

    Two testbenches give the same results and cycle stamps: ``driver="bulk"`` hands the
    whole program to the simulation as memory files (the harness of :mod:`systolica.tb.bulk`;
    Python wakes once per program, so it runs near the simulator's free-running speed) and
    ``driver="cycle"`` drives the streams from Python every cycle (:mod:`systolica.tb.tile_tb`).
    The default is ``"bulk"``, and ``"cycle"`` with ``waves`` (waveform save files name the
    bare tile's hierarchy).

    Parameters
    ----------
    jobs : sequence of Matmul, MatmulMx, Read or (numpy.ndarray, numpy.ndarray)
        The commands in order. Per matmul, ``stationary`` [K, M] and ``moving`` [K, N], both
        int8 or any pair of float types (:class:`Matmul`), K <= rows (``2 * rows`` in
        double-row), M <= cols, 1 <= N, and a PSUM region
        (``bank`` < 8, ``offset + N`` <= 512); pairs run as overwriting matmuls into bank 0
        from entry 0. A :class:`MatmulMx` is an MX matmul (a tile with the ``mx`` type
        set). A :class:`Read` streams a PSUM region out.
    config : TileConfig, optional
        The tile (size, type set, PSUM, queue depth).
    rows, cols : int, optional
        Without ``config``: the tile size in PEs, for the smallest type set that runs the
        program's operand types (and FP8 double-row if a matmul asks for it):
        ``TileConfig.for_dtypes``, plus ``mx`` when a job is a :class:`MatmulMx`.
    simulator : {"verilator", "icarus"}
    waves : bool
        Trace the run into a waveform (``ProgramResult.run.waveform``).
    seed : int
        Seed of the idle and backpressure patterns (COCOTB_RANDOM_SEED).
    idle, backpressure : float
        Probability per cycle of an input stream idling / the result stream stalling, [0, 1).
    build_root : path, optional
        Where builds and runs go (default ``$SYSTOLICA_BUILD_DIR`` or ``./build``).
    keep : bool, optional
        Keep the run folder (log, results, waveform); default: keep only with ``waves``.
    wave_format : {"fst", "vcd"}
        Format of the waveform with ``waves``.
    driver : {"bulk", "cycle"}, optional
        Which testbench drives the tile (see above).
    free_run : bool
        Bulk driver only: also time the same build free-running over the same stimulus
        (``ProgramResult.free_seconds``), the limit for ``make bench``'s ratio.
    progress : callable, optional
        Bulk driver only: called as ``progress(results, total, cycle)`` about four times a
        second while the simulator runs (result beats received so far, result beats the
        program expects, the harness's cycle), for long runs on large tiles.

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
    if config is not None:
        config = tile_config(config, rows, cols, (), False)
    jobs = [_as_job(job) for job in _job_list(jobs)]
    if config is None:
        # The default type set: what the program's matmuls use (their types checked first).
        for job in jobs:
            if isinstance(job, Matmul):
                check_operands(job.stationary, job.moving, perf_mode=job.perf_mode)
        matmuls = [_command(job) for job in jobs if isinstance(job, Matmul)]
        config = tile_config(None, rows, cols,
                             {t for c in matmuls for t in (c.dtype, c.mtype)},
                             any(c.double_row for c in matmuls),
                             any(isinstance(job, MatmulMx) for job in jobs))
    rows, cols = config.rows, config.cols
    check_simulator_name(simulator)
    if not jobs:
        raise ValueError("jobs must hold at least one command")
    for job in jobs:
        _check_job(job, config)
    commands = [_command(job) for job in jobs]
    for command in commands:
        _check_built(command, config)

    def predicted():   # the cycle model's stamps (the bulk path computes them in a thread)
        return command_schedule(rows, cols, commands, mx=config.mx)
    for name, p in (("idle", idle), ("backpressure", backpressure)):
        if not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1), not {p!r}")
    if driver is None:
        driver = "cycle" if waves else "bulk"
    if driver not in ("bulk", "cycle"):
        raise ValueError(f"driver must be 'bulk' or 'cycle', not {driver!r}")
    if driver == "bulk":
        return _run_bulk(jobs, config, simulator=simulator, waves=waves, seed=seed,
                         idle=idle, backpressure=backpressure, build_root=build_root,
                         keep=keep, wave_format=wave_format, free_run=free_run,
                         predicted=predicted, progress=progress)
    tile = build(config, simulator, waves=waves, build_root=build_root,
                 wave_format=wave_format)
    runs = tile.directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = _new_run_dir(runs)
    program = []
    for job, command in zip(jobs, commands, strict=True):
        region = {"bank": job.bank, "offset": job.offset}
        if isinstance(job, Read):
            program.append({**region, "read": job.n})
            continue
        if isinstance(job, MatmulMx):
            program.append({**region, "mx": True, "stationary": job.stationary,
                            "moving": job.moving,
                            "stationary_type": MX_TYPES[job.stationary.dtype][0],
                            "moving_type": MX_TYPES[job.moving.dtype][0],
                            "stationary_scale": job.stationary_scale,
                            "moving_scale": job.moving_scale, "accumulate": job.accumulate,
                            "dst_dtype": command.dst_dtype, "rounding": command.rounding,
                            "seed": command.seed, **_tile(job)})
            continue
        program.append({**region, "stationary": job.stationary, "moving": job.moving,
                        "stationary_type": command.dtype, "moving_type": command.mtype,
                        "perf_mode": job.perf_mode, "accumulate": job.accumulate,
                        "ftz": job.ftz, "is_transpose": job.is_transpose, **_tile(job)})
    protocol.write_program(run_dir / "program.npz", program, idle=idle,
                           backpressure=backpressure)
    results_path = run_dir / "results.npz"
    with removed_if_interrupted(run_dir):
        run = run_tests(tile, protocol.PROGRAM_RUNNER, run_dir, seed=seed,
                        extra_env={protocol.PROGRAM: str(run_dir / "program.npz"),
                                   protocol.RESULTS: str(results_path)})
    if not results_path.is_file():
        raise SimulationError(f"the simulation wrote no results; see {run.log}")
    out = protocol.read_results(results_path, len(jobs))
    out["psums"] = [None if psum is None else _typed(job, psum)
                    for job, psum in zip(jobs, out["psums"], strict=True)]
    missing = [i for i, psum in enumerate(out["psums"]) if psum is None]
    if missing:
        raise SimulationError(
            f"matmuls {missing} did not complete ({out['observed_beats']} of "
            f"{out['expected_beats']} result beats arrived); see {run.log}")
    stamps = [CommandTiming(accept, issues=issues, results=results)
              for accept, issues, results in zip(out["accept"], out["issues"], out["results"],
                                                 strict=True)]
    result = _program_result(out["psums"], stamps, predicted(), cycles=out["cycles"],
                             seconds=out["seconds"], mismatches=out["mismatches"],
                             build=tile, run=run)
    if run.failed and not result.mismatches:
        raise SimulationError(f"the simulation failed; see {run.log}")
    if not (waves if keep is None else keep):
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def _typed(job, psum):
    """A job's PSUM as the testbench's model gives it (``TileModel.results``), in the
    job's result type (both drivers): a BF16-destination MX matmul's words are BF16 values
    (exact: their low halves are zero), a transpose's in its element type (the per-cycle
    driver's results file keeps ml_dtypes types as raw bytes)."""
    if isinstance(job, MatmulMx) and _mx_dst(job) == "bf16":
        return psum.astype(ml_dtypes.bfloat16)
    if isinstance(job, Matmul) and job.is_transpose:
        return psum.view(format_of(job.stationary.dtype).transpose_dtype)
    return psum


def _program_result(psums, stamps, predicted, **kwargs):
    return ProgramResult(
        psums=psums, stamps=stamps, predicted=predicted,
        first_accept=[t.first_issue for t in stamps], last_result=[t.last_result for t in stamps],
        **kwargs)


def _run_bulk(jobs, config, *, simulator, waves, seed, idle, backpressure, build_root,
              keep, wave_format, free_run, predicted, progress):
    """:func:`run_program` through the bulk-stimulus harness (its one runner,
    :func:`systolica.tb.harness.run_harness`)."""
    from systolica.tb.bulk import BulkProgram
    from systolica.tb.harness import harness_depth_for, run_harness

    program = BulkProgram(config)
    matmuls_only = all(isinstance(job, Matmul) for job in jobs)
    for kind, run in itertools.groupby(jobs, key=type):
        if kind is Read:
            for job in run:
                program.submit_command(_command(job))
        elif kind is MatmulMx:
            for j in run:
                command = j.command()
                program.submit_mx(j.stationary, j.moving, j.stationary_scale, j.moving_scale,
                                  accumulate=j.accumulate, bank=j.bank, offset=j.offset,
                                  dst_dtype=command.dst_dtype, rounding=command.rounding,
                                  seed=command.seed, **_tile(j))
        else:   # a run of matmuls: one batched golden computation per shape
            run = [(j.stationary, j.moving, j.accumulate, j.ftz, j.bank, j.offset,
                    j.perf_mode, j.is_transpose, *_tile(j).values()) for j in run]
            if matmuls_only:   # the golden model runs beside the simulator (the runner)
                program.stage_many(run)
            else:
                program.submit_many(run)
    tile = build(config, simulator, waves=waves, build_root=build_root,
                 wave_format=wave_format, harness_depth=harness_depth_for(program, simulator))
    runs = tile.directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = _new_run_dir(runs)
    # The cycle model's stamps are computed in a thread while the simulator runs.
    with ThreadPoolExecutor(max_workers=1) as pool, removed_if_interrupted(run_dir):
        schedule = pool.submit(predicted)
        harness = run_harness(program, tile, run_dir, seed=seed, idle=idle,
                              backpressure=backpressure, progress=progress, free_run=free_run)
        predicted = schedule.result()
    if harness.errors:
        raise SimulationError(harness.errors[0])
    records = program.model.records
    stamps = [CommandTiming(r.accept, issues=tuple(r.issues), results=tuple(r.result_cycles))
              for r in records]
    psums = [_typed(job, program.model.results(r))
             for job, r in zip(jobs, records, strict=True)]
    result = _program_result(
        psums, stamps, predicted,
        cycles=max(r.last_result for r in records) + 1, seconds=harness.seconds,
        mismatches=harness.mismatches, build=tile, run=harness.run,
        free_seconds=harness.free_seconds, cpu_seconds=harness.cpu_seconds,
        free_cpu_seconds=harness.free_cpu_seconds)
    if not (waves if keep is None else keep):
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


#: Run folders whose simulation is running in this process (a worker's SIGINT handler
#: removes them, see :func:`remove_live_runs`).
_LIVE_RUNS = set()


def _new_run_dir(runs):
    """A new run folder in ``runs`` (pathlib.Path), live from the start: a worker's Ctrl-C
    while the stimulus is being written removes it too (see :func:`remove_live_runs`)."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"run{os.getpid()}_{next(_counter)}_", dir=runs))
    _LIVE_RUNS.add(run_dir)
    return run_dir


@contextmanager
def removed_if_interrupted(run_dir):
    """While the block (a simulation) runs, ``run_dir`` is live; Ctrl-C in it
    (KeyboardInterrupt) removes the folder before the interrupt goes on: an interrupted run
    leaves nothing behind. A failed run keeps its folder (its log is the evidence)."""
    _LIVE_RUNS.add(run_dir)
    try:
        yield
    except KeyboardInterrupt:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        _LIVE_RUNS.discard(run_dir)


def remove_live_runs():
    """Remove the folders of the simulations running in this process (for a process about
    to end on Ctrl-C whose simulations run in other threads, such as a Dask worker)."""
    for run_dir in list(_LIVE_RUNS):
        shutil.rmtree(run_dir, ignore_errors=True)


def run_matmul(stationary, moving, *, config=None, rows=None, cols=None,
               simulator="verilator", psum=None, accumulate=False, waves=False, ftz=False,
               bank=0, offset=0, perf_mode=None, is_transpose=False, tile_position=None,
               tile_size=None):
    """Run one ``nc_matmul`` on the RTL tile; return its PSUM and cycle count.

    Parameters
    ----------
    stationary : numpy.ndarray, shape [K, M]
        int8 or a float type (see :class:`Matmul`); K <= rows (2 * rows double-row),
        M <= cols.
    moving : numpy.ndarray, shape [K, N]
        int8 with int8, any float type with a float stationary; 1 <= N <= 512.
    config : TileConfig, optional
        The tile (size, type set, PSUM, queue depth).
    rows, cols : int, optional
        Without ``config``: the tile size in PEs; the type set is then the smallest that
        holds the call's operand types (FP8 double-row with ``perf_mode``):
        ``TileConfig.for_dtypes(rows, cols, (stationary type, moving type))``.
    simulator : {"verilator", "icarus"}
    psum : numpy.ndarray, int32 (INT8) or float32 (BF16), shape [M, N], optional
        PSUM before the matmul; required with ``accumulate=True``.
    accumulate : bool
        Add the matmul into ``psum`` (INT32 wrapping, or FP32 with one more RNE rounding)
        instead of overwriting it. The tile's PSUM starts from zero and has no write port, so
        a given ``psum`` is added on the host with the golden model's add; accumulation
        inside the RTL is exercised through :func:`run_program` (``Matmul.accumulate``).
    waves : bool
        Keep an FST waveform of the run; its path is ``MatmulResult.waveform``.
    ftz : bool
        Flush subnormal inputs, products and sums to signed zero (float only).
    perf_mode : None or "double_row"
        FP8 double-row (both operands e4m3/e5m2, K up to ``2 * rows``).
    bank, offset : int
        PSUM region the tile writes: entries ``offset .. offset + N - 1`` of bank ``bank``
        (0..7; ``offset + N <= 512``). The result is read back from there with a READ
        command after the matmul.
    is_transpose : bool
        Transpose mode (see :class:`Matmul`): ``moving`` selects one stationary row per
        column (``golden.identity(K, dtype)`` for ``stationary.T``); no ``psum``,
        ``accumulate``, ``ftz`` or ``perf_mode``.
    tile_position, tile_size : (int, int) or None
        Run in a row/column tile (see :class:`Matmul`); both None for the whole array.

    Returns
    -------
    MatmulResult
        ``(psum, cycles)``: [M, N] int32 or float32 (a transpose: its PSUM element type,
        bit for bit), and clock cycles.

    Raises
    ------
    TypeError, ValueError
        Bad operands (unsupported dtype, int8 with a float, double-row with another type
        than e4m3/e5m2, not 2-D, K mismatch, K > rows (2 * rows double-row),
        M > cols, N > 512), bad sizes, a bank or offset outside PSUM, an unknown simulator,
        ``ftz`` with INT8, a bad ``psum``, or a transpose with a mode it does not take or a
        ``moving`` that does not select one row per column.
    SimulatorNotFoundError
        The simulator binary (or a build tool) is missing.
    BuildError, SimulationError
        The build or the simulation failed; a wrong RTL result raises SimulationError.
    """
    types = () if config is not None else [
        f.name for f in check_operands(stationary, moving, perf_mode=perf_mode)]
    config = tile_config(config, rows, cols, types, perf_mode is not None)
    rows, cols = config.rows, config.cols
    check_simulator_name(simulator)
    if psum is not None and not accumulate:
        raise ValueError("psum is only used with accumulate=True (an overwriting matmul "
                         "ignores it); pass accumulate=True or leave psum out")
    check_transpose(is_transpose, perf_mode=perf_mode, accumulate=accumulate, ftz=ftz)
    job = Matmul(stationary, moving, ftz=ftz, bank=bank, offset=offset, perf_mode=perf_mode,
                 is_transpose=is_transpose, tile_position=tile_position, tile_size=tile_size)
    _check_job(job, config)
    n = moving.shape[1]
    mode = {"ftz": True} if ftz else {}
    if accumulate or psum is not None or is_transpose:
        # The golden model validates psum (dtype, shape), accumulate and a transpose's
        # selector before any build.
        nc_matmul(stationary, moving, psum=psum, accumulate=accumulate, perf_mode=perf_mode,
                  rows=max(rows, cols), is_transpose=is_transpose, **mode)
    result = run_program([job, Read(n, bank=bank, offset=offset)], config=config,
                         simulator=simulator, waves=waves)
    if result.mismatches:
        raise SimulationError(f"the RTL result differs from the golden model in "
                              f"{result.mismatches} PSUM words; see {result.run.log}")
    col = tile_position[1] if tile_position is not None else 0
    out = result.psums[1][col:col + stationary.shape[1]]
    if is_transpose:    # the READ gives the words; the matmul's own result is typed
        out = result.psums[0]
    if accumulate:
        out = psum_accumulate(psum, out, ftz=ftz)
    return MatmulResult(out, result.last_result[0] - result.first_accept[0] + 1,
                        result.run.waveform)

