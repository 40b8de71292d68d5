"""Tile programs as units of work, run in this process or on a Dask distributed cluster.

A :class:`TileProgram` is what one simulator run does: one or more GEMM problems cut into
K-slab matmuls and run back to back on one RTL tile (:func:`systolica.sim.api.tiling.
run_tiled_program`), every PSUM word checked against the golden model by the testbench's
scoreboard. Programs are independent, so an engine runs a batch of them wherever it likes
and hands the results back in the order asked; the results do not depend on where or in
which order programs ran (each is a pure function of its operands), so a run is bit for bit
the same with one worker or many.

- :class:`SerialEngine` (``--workers 1``): one after the other, in this process, no Dask.
- :class:`DaskEngine`: an embedded ``LocalCluster`` (one single-threaded worker process per
  core, listening on 127.0.0.1 only, dashboard off unless asked for), or an existing
  scheduler (``tcp://HOST:PORT`` or ``tls://HOST:PORT``, with Dask's TLS security). A program
  whose worker dies is run again elsewhere (Dask reschedules it, and the ledger counts it);
  an unexpected exception inside it (one that may pass: an OSError, a RuntimeError) is
  retried :data:`RETRIES` times.

Both engines end a run on a failed program the same way: a failed simulation, or an
unexpected exception once its retries are spent, stops the run with one line
(:class:`~systolica.sim.builder.errors.SimulationError`, exit status 1) ending with a command
that replays the program alone (:mod:`.replay`); a missing or failing tool and bad input
(:data:`_AS_RAISED`) stop it with their own error (exit status 2). Those two kinds are
deterministic, so the Dask engine does not retry them.

Every finished program goes through a :class:`Ledger`, which accepts each program exactly
once and adds up the matmuls the scoreboards checked, so a report can prove that every
matmul of the run was checked once, whichever workers ran it, and how many programs were
rescheduled because a worker was lost.
"""

import os
import pickle
import re
import sys
import threading
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from systolica.hdl.config import TileConfig
from systolica.sim.builder.errors import (
    BuildError,
    SimulationError,
    SimulatorNotFoundError,
    SystolicaError,
)
from systolica.sim.builder.runner import default_build_root

#: Retries of a program whose task raised (a worker that dies is handled by Dask's own
#: rescheduling, up to ``distributed.scheduler.allowed-failures`` times).
RETRIES = 2
#: Seconds to wait for a scheduler to answer (default), and for it to have a worker.
CONNECT_TIMEOUT = 10.0
WORKER_TIMEOUT = 30.0
#: Dask settings of the embedded cluster (measured on the 2-core machine, 8 x 8 tile, six
#: BF16 programs of 2,304 matmuls on one worker against the same in one process):
#:
#: - Dask starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc hand freed
#:   memory back at once and turns off its adaptive mmap threshold, so every large numpy
#:   temporary of a program (stimulus, hex text, golden sums) is mapped and faulted in
#:   anew: the programs' host side took 4.0-4.9 CPU-s with it against 2.9-3.1 without it
#:   (2.7-3.7 in-process). Workers here live for one run, so the thread limits stay and the
#:   trim setting goes.
#: - An idle worker's event loop took 2.1 % of a core, 0.25 % with its 20 ms health tick and
#:   100 ms memory check at 1 s.
#: - Dask's statistical profiler walks every thread's stack every 10 ms under the GIL;
#:   only the dashboard reads it.
WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                            "OPENBLAS_NUM_THREADS": 1},
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.worker.profile.enabled": False,
}
#: Failures of a program's tooling (no simulator, a failed build) and bad input: reported as
#: they are, since replaying the program would not help.
_AS_RAISED = (SimulatorNotFoundError, BuildError, ValueError, TypeError)
#: Exceptions a program raises the same way every time it runs: not retried on a worker.
_DETERMINISTIC = (SystolicaError, ValueError, TypeError)
_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


class SchedulerError(SystolicaError):
    """A Dask scheduler address is malformed, unreachable or has no workers, or the TLS
    settings for it are unusable."""


@dataclass(frozen=True)
class TileProgram:
    """One unit of work: GEMM problems run back to back as one tile program.

    Attributes
    ----------
    key : str
        Unique within a run, e.g. ``"bf16/L0/up/1"``.
    problems : tuple of (numpy.ndarray, numpy.ndarray)
        ``(stationary [K, M], moving [K, N])`` pairs, int8 or float operand types
        (:func:`systolica.sim.api.tiling.tiled_jobs`).
    config : systolica.hdl.config.TileConfig
        The tile (size, type set, PSUM, queue).
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    build_root : str or None
        Build folder on the worker (None: the worker's ``$SYSTOLICA_BUILD_DIR`` or
        ``./build``).
    matmuls : int
        Matmuls the program runs (from the tiling plan).
    model_cycles : int
        The cycle model's figure for the program run alone with no stalls.
    perf_mode : None or "double_row"
        FP8 double-row matmuls for every problem (K-slabs of ``2 * rows``).
    is_transpose : bool
        Every problem a transpose on the tile (``stationary`` the data [P, F], ``moving``
        the [P, P] identity; :func:`systolica.sim.api.tiling.tiled_jobs`).
    concurrent : bool
        Problems that are one matmul fitting the array's finest tile run in such tiles in
        turn, up to four at once (:func:`systolica.sim.api.tiling.concurrent_placement`).
    priority : int
        Among programs waiting for a worker, higher runs first (Dask's task priority). A
        model run gives earlier steps of the model higher priorities, so that of two
        independent passes the one behind catches up and neither is left alone at the
        end with fewer programs than workers.
    """

    key: str
    problems: tuple
    config: TileConfig
    simulator: str
    build_root: str | None
    matmuls: int
    model_cycles: int
    perf_mode: str | None = None
    priority: int = 0
    is_transpose: bool = False
    concurrent: bool = False

    @property
    def rows(self):
        """Partition rows of the tile (int)."""
        return self.config.rows

    @property
    def cols(self):
        """Columns of the tile (int)."""
        return self.config.cols


def execute(program):
    """Run one :class:`TileProgram` (in whichever process calls it); return its
    :class:`~systolica.sim.api.tiling.ProgramOutcome`.

    Raises
    ------
    SimulatorNotFoundError, BuildError, SimulationError, ValueError, TypeError
        As :func:`systolica.sim.api.tiling.run_tiled_program`.
    """
    from systolica.sim.api.tiling import run_tiled_program

    outcome = run_tiled_program(program.problems, config=program.config,
                                simulator=program.simulator, build_root=program.build_root,
                                perf_mode=program.perf_mode,
                                is_transpose=program.is_transpose,
                                concurrent=program.concurrent)
    return replace(outcome, key=program.key)


@dataclass(frozen=True)
class _Raised:
    """What :func:`_execute_on_worker` returns for a deterministic exception, so that Dask
    does not retry it."""

    error: BaseException


def _execute_on_worker(program):
    """:func:`execute` on a Dask worker: a deterministic exception (:data:`_DETERMINISTIC`)
    comes back as a :class:`_Raised` value, any other is raised (and retried)."""
    try:
        return execute(program)
    except _DETERMINISTIC as error:
        return _Raised(error)


#: Marks a file as a saved tile program (and its layout's version).
FORMAT = ("systolica-tile-program", 1)


def save_for_replay(program, tag=""):
    """Write ``program`` (a :class:`~systolica.sim.api.engine.TileProgram`) for a replay;
    return the file (pathlib.Path). The folder is ``replay/`` under the program's build root
    (else :func:`~systolica.sim.builder.runner.default_build_root`); ``tag`` (str) is added
    to the name, so the programs of different runs do not overwrite each other."""
    folder = Path(program.build_root or default_build_root()) / "replay"
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", program.key) + (f"-{tag}" if tag else "")
    path = folder / f"{name}.pickle"
    path.write_bytes(pickle.dumps({"format": FORMAT, "program": program}))
    return path.resolve()


def replay_command(path):
    """The shell command that replays the program saved in ``path`` (str)."""
    return f"{sys.executable} -m systolica.sim.api.replay {path}"


def add_outcome(totals, outcome):
    """Add a :class:`~systolica.sim.api.tiling.ProgramOutcome`'s counters (matmuls,
    cycles, mismatches, differing words, build / simulator / clock-loop / task seconds) to
    the same-named attributes of ``totals`` (a :class:`Ledger`, a per-GEMM report)."""
    totals.matmuls += outcome.matmuls
    totals.cycles += outcome.cycles
    totals.mismatches += outcome.mismatches
    totals.differing += sum(outcome.differing)
    totals.build_seconds += outcome.build_seconds
    totals.sim_seconds += outcome.sim_seconds
    totals.clock_seconds += outcome.clock_seconds
    totals.seconds += outcome.seconds


@dataclass
class Ledger:
    """Accounting across workers: every planned program accepted once, every matmul counted.

    Attributes
    ----------
    planned_programs, planned_matmuls : int
        What the run's plan holds (set with :meth:`plan`).
    programs, matmuls, words, cycles, mismatches, differing : int
        Summed over accepted outcomes.
    duplicates : int
        Outcomes offered for a program already accepted (refused, not counted).
    rescheduled : dict of str to int
        Per program key, how many times the program was taken from a worker that was lost
        while it held the program (Dask's ``remove-worker`` events: running or waiting
        there) and handed to another; only programs that then ran to completion.
    unknown : int
        Outcomes for a program that was never planned (refused, not counted).
    build_seconds, sim_seconds, clock_seconds, seconds : float
        Summed worker-side times (build, simulator, clock loop, whole tasks), in seconds.
    host_cpu_seconds, sim_cpu_seconds : float
        Summed CPU time of the tasks in the processes that ran them and in their simulator
        processes, in seconds.
    workers : dict of str to int
        Programs per worker (``host:pid``).
    """

    planned_programs: int = 0
    planned_matmuls: int = 0
    programs: int = 0
    matmuls: int = 0
    words: int = 0
    cycles: int = 0
    mismatches: int = 0
    differing: int = 0
    duplicates: int = 0
    unknown: int = 0
    rescheduled: dict = field(default_factory=dict)
    build_seconds: float = 0.0
    sim_seconds: float = 0.0
    clock_seconds: float = 0.0
    seconds: float = 0.0
    host_cpu_seconds: float = 0.0
    sim_cpu_seconds: float = 0.0
    workers: dict = field(default_factory=dict)
    _expected: dict = field(default_factory=dict, repr=False)
    _accepted: set = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def plan(self, programs):
        """Register planned programs (an iterable of objects with ``key`` and ``matmuls``,
        such as :class:`TileProgram`)."""
        with self._lock:
            for p in programs:
                if p.key in self._expected:
                    raise ValueError(f"program key {p.key!r} planned twice")
                self._expected[p.key] = p.matmuls
                self.planned_programs += 1
                self.planned_matmuls += p.matmuls

    def accept(self, outcome):
        """Count ``outcome`` (a :class:`~systolica.sim.api.tiling.ProgramOutcome`) once;
        return False (and count it as a duplicate or unknown) when its program was accepted
        before or never planned, or its matmul count is not the planned one."""
        with self._lock:
            if outcome.key not in self._expected:
                self.unknown += 1
                return False
            if outcome.key in self._accepted:
                self.duplicates += 1
                return False
            if outcome.matmuls != self._expected[outcome.key]:
                raise SimulationError(f"program {outcome.key} checked {outcome.matmuls} "
                                      f"matmuls, planned {self._expected[outcome.key]}")
            self._accepted.add(outcome.key)
            self.programs += 1
            self.words += outcome.words
            self.host_cpu_seconds += outcome.host_cpu_seconds
            self.sim_cpu_seconds += outcome.sim_cpu_seconds
            add_outcome(self, outcome)
            self.workers[outcome.worker] = self.workers.get(outcome.worker, 0) + 1
            return True

    def reschedule(self, key, times):
        """Record that program ``key`` (str) was rescheduled ``times`` (int > 0) times."""
        with self._lock:
            self.rescheduled[key] = self.rescheduled.get(key, 0) + times

    @property
    def missing(self):
        """Planned programs not accepted (list of str keys)."""
        with self._lock:
            return [k for k in self._expected if k not in self._accepted]

    @property
    def complete(self):
        """True when every planned program and matmul was accepted exactly once."""
        return (self.programs == self.planned_programs and not self.unknown
                and self.matmuls == self.planned_matmuls and not self.missing)

    def as_dict(self):
        """The figures as a JSON-ready dict."""
        return {"planned_programs": self.planned_programs,
                "planned_matmuls": self.planned_matmuls, "programs": self.programs,
                "matmuls_checked": self.matmuls, "psum_words_checked": self.words,
                "cycles": self.cycles, "mismatches": self.mismatches,
                "differing": self.differing, "duplicates_refused": self.duplicates,
                "unknown_refused": self.unknown, "missing": self.missing,
                "rescheduled": sum(self.rescheduled.values()),
                "rescheduled_programs": dict(self.rescheduled),
                "complete": self.complete, "workers": dict(self.workers),
                "worker_seconds": {"build": self.build_seconds, "simulator": self.sim_seconds,
                                   "clock_loop": self.clock_seconds,
                                   "tasks": self.seconds},
                "worker_cpu_seconds": {"host": self.host_cpu_seconds,
                                       "simulator": self.sim_cpu_seconds}}


class Engine:
    """Runs batches of tile programs; subclasses say where.

    Attributes
    ----------
    ledger : Ledger
    parallel : bool
        Whether batches from several threads run at the same time (False: the caller
        should submit one batch at a time).
    description : str
        For the report, e.g. ``"Dask LocalCluster, 2 worker processes on 127.0.0.1"``.
    """

    parallel = False
    description = ""

    #: Where programs run, for a failure's message ("" in this process).
    where = ""

    def __init__(self, on_done=None):
        self.ledger = Ledger()
        self._on_done = on_done
        self._lock = threading.Lock()
        self._run = uuid.uuid4().hex[:8]

    def _failed(self, program, error, attempts=1):
        """The :class:`~systolica.sim.builder.errors.SimulationError` that stops the run when
        ``program`` failed with ``error`` (after ``attempts`` runs): one line, ending with the
        command that replays the program alone (:mod:`.replay`)."""
        from distributed.scheduler import KilledWorker

        first = (str(error).splitlines() or [""])[0]
        if isinstance(error, KilledWorker):
            what = f"killed every worker that ran it ({first})"
        elif isinstance(error, SimulationError):
            what = f"failed{self.where}: {first}"
        else:
            what = (f"raised {type(error).__name__}: {first}{self.where}"
                    + (f", {attempts} attempts" if attempts > 1 else "") + (
                        " (is this project, the same version, installed there?)"
                        if self.where and isinstance(error, (ImportError, AttributeError))
                        else ""))
        try:
            how = f"replay it alone: {replay_command(save_for_replay(program, self._run))}"
        except OSError as saving:
            how = f"it could not be saved for a replay ({saving.strerror})"
        return SimulationError(f"program {program.key} {what}; {how}")

    def _finish(self, program, outcome):
        self.ledger.accept(outcome)
        if self._on_done:
            with self._lock:
                self._on_done(program, outcome)

    def run(self, programs):
        """Run ``programs`` (list of :class:`TileProgram`); return their outcomes in the same
        order (list of :class:`~systolica.sim.api.tiling.ProgramOutcome`)."""
        raise NotImplementedError

    def close(self):
        """Release what the engine started."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SerialEngine(Engine):
    """One program after the other, in this process (no Dask)."""

    description = "serial, in this process (--workers 1)"

    def run(self, programs):
        out = []
        for program in programs:
            try:
                outcome = execute(program)
            except _AS_RAISED:
                raise
            except Exception as error:  # noqa: BLE001 (a program's failure, one line)
                raise self._failed(program, error) from None
            self._finish(program, outcome)
            out.append(outcome)
        return out


def check_scheduler_address(address):
    """Return ``address`` if it is ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` with a port of
    1 to 65535, else raise :class:`SchedulerError` saying what is allowed."""
    m = _ADDRESS.match(address or "")
    if not m or not 1 <= int(m.group(3)) <= 65535:
        raise SchedulerError(f"the scheduler address must be tcp://HOST:PORT or "
                             f"tls://HOST:PORT (port 1-65535), not {address!r}")
    return address


def security_from_files(spec):
    """A ``distributed.Security`` from ``"CA,CERT,KEY"`` (three PEM file paths), TLS
    required.

    Raises
    ------
    SchedulerError
        If ``spec`` is not three comma-separated paths or a file does not exist.
    """
    from distributed import Security

    parts = [p.strip() for p in (spec or "").split(",")]
    if len(parts) != 3 or not all(parts):
        raise SchedulerError(f"--security must be CA_FILE,CERT_FILE,KEY_FILE (three PEM "
                             f"files), not {spec!r}")
    for what, path in zip(("CA", "certificate", "key"), parts, strict=True):
        if not os.path.isfile(path):
            raise SchedulerError(f"--security: the TLS {what} file {path} does not exist")
    return Security(tls_ca_file=parts[0], tls_client_cert=parts[1], tls_client_key=parts[2],
                    require_encryption=True)


class DaskEngine(Engine):
    """Programs as Dask tasks: on an embedded local cluster, or on an existing scheduler.

    Parameters
    ----------
    workers : int, optional
        Worker processes of the embedded cluster (default: one per core). Ignored with
        ``scheduler``.
    scheduler : str, optional
        Address of an existing scheduler, ``tcp://HOST:PORT`` or ``tls://HOST:PORT``.
    security : distributed.Security, optional
        TLS settings for ``scheduler`` (default: Dask's configuration,
        ``distributed.comm.tls.*``).
    dashboard : bool
        Serve the embedded cluster's dashboard on 127.0.0.1 (a free port; the address is in
        :attr:`description`).
    on_done : callable, optional
        ``on_done(program, outcome)`` after each accepted program (called under a lock).
    timeout : float
        Seconds to wait for ``scheduler`` to answer (default :data:`CONNECT_TIMEOUT`).

    Raises
    ------
    SchedulerError
        A malformed or unreachable scheduler, one without workers within
        :data:`WORKER_TIMEOUT` seconds, or bad TLS settings.
    """

    where = " on a Dask worker"
    parallel = True

    def __init__(self, workers=None, *, scheduler=None, security=None, dashboard=False,
                 on_done=None, timeout=CONNECT_TIMEOUT):
        super().__init__(on_done)
        import logging

        import dask
        from distributed import Client, LocalCluster

        self._cluster = None
        self._warm = []
        if scheduler:
            check_scheduler_address(scheduler)
            try:
                _probe(scheduler, security, timeout)
                self.client = Client(scheduler, timeout=timeout, security=security,
                                     set_as_default=False)
            except Exception as error:  # noqa: BLE001 (any failure to connect is one line)
                first = str(error).splitlines()[0] if str(error) else type(error).__name__
                raise SchedulerError(
                    f"cannot reach the Dask scheduler at {scheduler} within "
                    f"{timeout:g} s ({first}); check --scheduler or "
                    f"DASK_SCHEDULER_ADDRESS (and --security for tls://), or leave both "
                    f"unset to start a local cluster") from None
            try:
                self.client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
            except (TimeoutError, OSError):
                self.client.close()
                raise SchedulerError(
                    f"the Dask scheduler at {scheduler} has no worker (waited "
                    f"{WORKER_TIMEOUT:.0f} s); start one with 'dask worker {scheduler}'"
                    ) from None
            n = len(self.client.scheduler_info(n_workers=-1)["workers"])
            self.description = f"Dask scheduler {scheduler}, {n} workers"
        else:
            workers = workers or os.cpu_count() or 1
            # The scheduler and each worker serve HTTP (health, metrics, dashboard); bind it
            # to 127.0.0.1 on a free port, and without --dashboard keep only /health.
            routes = {} if dashboard else {
                "distributed.scheduler.http.routes": ["distributed.http.health"],
                "distributed.worker.http.routes": ["distributed.http.health"]}
            # Dask's own logs stay quiet (a failed task's traceback, a lost worker): the run
            # reports a failed program in one line with its replay command, a lost worker
            # in the ledger.
            with dask.config.set({**routes, **WORKER_CONFIG}):
                self._cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    host="127.0.0.1", protocol="tcp", dashboard_address="127.0.0.1:0",
                    scheduler_kwargs={"dashboard": bool(dashboard)},
                    silence_logs=logging.CRITICAL)
            self.client = Client(self._cluster, set_as_default=False)
            # A fresh worker imports the tiling, testbench and runner modules on its first
            # program (about 1.5 s); start that now, while the caller prepares the run.
            self._warm = [self.client.submit(_warm_up, key=f"systolica-{self._run}-warm-{i}",
                                             workers=[address], pure=False)
                          for i, address in enumerate(self.client.scheduler_info(
                              n_workers=-1)["workers"])]
            self.description = (f"Dask LocalCluster, {workers} worker processes on 127.0.0.1"
                                + (f", dashboard {self.client.dashboard_link}" if dashboard
                                   else ""))

    def run(self, programs):
        from distributed import as_completed

        futures = {self.client.submit(_execute_on_worker, p, key=self._task(p),
                                      retries=RETRIES, pure=False, priority=p.priority): p
                   for p in programs}
        out = {}
        try:
            for future in as_completed(list(futures), loop=self.client.loop):
                program = futures[future]
                try:
                    outcome = future.result()
                except Exception as error:  # noqa: BLE001 (a program's failure, one line)
                    raise self._failed(program, error, RETRIES + 1) from None
                if isinstance(outcome, _Raised):
                    if isinstance(outcome.error, _AS_RAISED):
                        raise outcome.error
                    raise self._failed(program, outcome.error)
                # Its result is here: a worker lost from now on must not recompute it.
                future.release()
                self._finish(program, outcome)
                out[program.key] = outcome
            self._count_reschedules(programs)
        finally:
            for future in futures:
                future.release()
        return [out[p.key] for p in programs]

    def _task(self, program):
        """The Dask task key of ``program`` in this run (str)."""
        return f"systolica-{self._run}-{program.key}"

    def _count_reschedules(self, programs):
        """Put in the ledger how often each of ``programs`` was taken from a lost worker,
        from the scheduler's ``remove-worker`` events (the programs it held, waiting or
        running, and those whose result was lost with it)."""
        tasks = {self._task(p): p.key for p in programs}
        for _when, event in self.client.get_events("all"):
            if not isinstance(event, dict) or event.get("action") != "remove-worker":
                continue
            for task in {*event.get("processing-tasks", ()),
                         *event.get("lost-computed-tasks", ())}:
                if task in tasks:
                    self.ledger.reschedule(tasks[task], 1)

    def close(self):
        for future in self._warm:
            future.release()
        self._warm = []
        client, cluster, self.client, self._cluster = self.client, self._cluster, None, None
        try:
            if client is not None:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()


def _warm_up():
    """Import what :func:`execute` needs (in a worker, before its first program)."""
    import cocotb_tools.runner  # noqa: F401

    import systolica.tb.bulk  # noqa: F401

    from . import tiling  # noqa: F401


def _probe(address, security, timeout):
    """Ask the scheduler at ``address`` who it is, within ``timeout`` seconds overall.

    ``distributed.Client`` bounds the TCP connection by its timeout but not the exchange
    after it, so a listener that accepts and never answers would hang it; this asks one
    ``identity`` question under :func:`asyncio.wait_for` first.

    Raises
    ------
    TimeoutError, OSError, distributed.comm.CommClosedError
        If no scheduler answers in time.
    """
    import asyncio

    from distributed.core import rpc

    async def ask():
        r = rpc(address, timeout=timeout, connection_args=(
            security.get_connection_args("client") if security is not None else {}))
        try:
            return await r.identity()
        finally:
            await r.close_rpc()

    async def bounded():
        try:
            return await asyncio.wait_for(ask(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no answer from {address} after {timeout:g} s") from None

    asyncio.run(bounded())


def make_engine(workers=None, *, scheduler=None, security=None, dashboard=False,
                on_done=None, timeout=CONNECT_TIMEOUT):
    """The engine a command line asks for: :class:`SerialEngine` for ``workers == 1``
    without a scheduler, else a :class:`DaskEngine` (see there)."""
    if scheduler is None and workers == 1:
        return SerialEngine(on_done)
    return DaskEngine(workers, scheduler=scheduler, security=security, dashboard=dashboard,
                      on_done=on_done, timeout=timeout)


def same_bits(a, b):
    """True when two arrays have the same dtype, shape and bit patterns (bool)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.array_equal(a.view(np.uint8), b.view(np.uint8)))
