"""A progress display for runs of many tile programs (rich), on stderr.

On a terminal: a live line with programs done / total, matmuls, RTL cycles, elapsed time and
the estimate of what is left, and one printed line per finished GEMM above it. The estimate
(:class:`TimeLeft`) adds up what the programs still to run cost on a worker, from what the
finished programs cost (simulator start-up, host side per matmul, clock cycles per second;
the build apart), over the workers; before two programs have finished it uses the figures
remembered from the configuration's last run in the build folder (:class:`CostMemory`: its
build time too, when the tile is to be built again), and says "estimating" when there are
none. Elsewhere (a pipe, a CI log): one line per
finished tile program and the GEMM lines, each with the same counters, so a log shows progress
without control characters, plus a "still running" line with the counters whenever nothing
was printed for ``heartbeat`` seconds (one program of a large GEMM runs for minutes).
"""

import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path


def program_name(key):
    """A tile program's key as a progress line names it (str): ``"bf16/L0/up/1"`` (precision,
    layer, GEMM, program index, as the MiniLM workload makes them) becomes ``"bf16 layer 0
    up, program 1"``; any other key is kept as it is."""
    parts = key.split("/")
    if len(parts) == 4 and parts[1][:1] == "L" and parts[1][1:].isdigit():
        precision, layer, gemm, index = parts
        return f"{precision} layer {layer[1:]} {gemm}, program {index}"
    return f"program {key}"


@dataclass(frozen=True)
class ProgramCost:
    """What a tile program costs a worker, measured (all per worker, build apart).

    Attributes
    ----------
    startup_s : float
        Seconds of simulator start-up per program (simulator run less its clock loop).
    host_s_per_matmul : float
        Host-side seconds per matmul (stimulus, golden model, checking: the task less its
        build and simulator seconds).
    cycles_per_s : float
        RTL clock cycles per second of the clock loop.
    build_s : float
        Seconds the last build of the configuration took (0 if none was seen).
    """

    startup_s: float
    host_s_per_matmul: float
    cycles_per_s: float
    build_s: float = 0.0

    def seconds(self, programs, matmuls, cycles):
        """Worker seconds for ``programs`` programs of ``matmuls`` matmuls and ``cycles``
        clock cycles in all (float)."""
        return (programs * self.startup_s + matmuls * self.host_s_per_matmul
                + cycles / max(self.cycles_per_s, 1e-9))


class TimeLeft:
    """The time-left estimate of a run of tile programs.

    Parameters
    ----------
    workers : int
        Programs that run at the same time.
    remembered : ProgramCost, optional
        The configuration's figures from an earlier run (:class:`CostMemory`); without
        them the estimate waits for two finished programs.
    build_pending : bool
        The tile is to be built before the first program can finish (its remembered
        ``build_s`` is added until a program has finished).
    clock : callable
        Seconds now (float; default ``time.perf_counter``; tests pass a fake one).
    """

    #: Finished programs before this run's own figures replace the remembered ones.
    OWN_AFTER = 2

    def __init__(self, workers=1, remembered=None, build_pending=False,
                 clock=time.perf_counter):
        self.workers = max(1, int(workers))
        self.remembered = remembered
        self.build_pending = build_pending
        self._clock = clock
        self.started = clock()
        self.total = (0, 0, 0)          # programs, matmuls, model cycles
        self.done = [0, 0, 0]
        # Sums over finished programs: start-up, host, clock-loop seconds, RTL cycles,
        # matmuls, build seconds seen.
        self._startup = self._host = self._clock_s = 0.0
        self._cycles = self._matmuls = 0
        self.build_s = 0.0

    def plan(self, programs, matmuls, model_cycles):
        """Set the run's totals (ints); the clock starts again."""
        self.total = (programs, matmuls, model_cycles)
        self.started = self._clock()

    def finished(self, matmuls, model_cycles, outcome):
        """Count one finished program: its matmuls and cycle-model cycles (ints) and its
        measured ``outcome`` (a ProgramOutcome: cycles, seconds, build / simulator /
        clock-loop seconds)."""
        for i, value in enumerate((1, matmuls, model_cycles)):
            self.done[i] += value
        build = getattr(outcome, "build_seconds", 0.0)
        sim = getattr(outcome, "sim_seconds", 0.0)
        clock = getattr(outcome, "clock_seconds", 0.0)
        self.build_s = max(self.build_s, build)
        self._startup += max(0.0, sim - clock)
        self._host += max(0.0, getattr(outcome, "seconds", 0.0) - build - sim)
        self._clock_s += clock
        self._cycles += getattr(outcome, "cycles", 0)
        self._matmuls += matmuls

    def cost(self):
        """The figures the estimate uses (ProgramCost), or None: this run's own after
        :data:`OWN_AFTER` finished programs, else the remembered ones."""
        n = self.done[0]
        if n >= self.OWN_AFTER and self._clock_s > 0 and self._cycles > 0:
            return ProgramCost(startup_s=self._startup / n,
                               host_s_per_matmul=self._host / max(self._matmuls, 1),
                               cycles_per_s=self._cycles / self._clock_s,
                               build_s=self._build_seconds())
        return self.remembered

    def _build_seconds(self):
        """The build time to remember (float): this run's when the tile was to be built
        (or nothing was remembered), else the remembered one (this run reused the build:
        what it saw were waits on the build lock)."""
        if self.build_pending or self.remembered is None:
            return self.build_s
        return self.remembered.build_s

    def seconds_left(self):
        """Estimated seconds until the last program finishes (float), or None."""
        cost = self.cost()
        if cost is None:
            return None
        left = [max(0, total - done) for total, done in zip(self.total, self.done,
                                                            strict=True)]
        seconds = cost.seconds(*left) / min(self.workers, max(left[0], 1))
        if self.build_pending and self.done[0] == 0:
            seconds += max(0.0, cost.build_s - (self._clock() - self.started))
        return seconds

    def text(self):
        """``"~N s left"``, or ``"estimating"`` (str), which says so while the tile is to be
        built and no program has finished (a first build takes minutes at full size)."""
        seconds = self.seconds_left()
        if seconds is not None:
            return f"~{seconds:.0f} s left"
        if self.build_pending and self.done[0] == 0:
            return "estimating after the tile's build"
        return "estimating"


class CostMemory:
    """Per-configuration :class:`ProgramCost` figures kept in ``<build root>/costs.json``,
    so that a run's first estimate comes from the configuration's last run.

    Parameters
    ----------
    build_root : path
        The build folder the run's workers build in (``make clean`` removes both).
    key : str
        The configuration (tile size, simulator).
    sources : str
        What the build is made from (the HDL fingerprint and build options): a different
        value means the tile will be built again.
    """

    NAME = "costs.json"

    def __init__(self, build_root, key, sources):
        self.path = Path(build_root) / self.NAME
        self.key, self.sources = key, sources

    def _all(self):
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def load(self):
        """``(cost, build_pending)``: the remembered ProgramCost (or None) and whether the
        tile is to be built again (no entry, or one made from other sources)."""
        entry = self._all().get(self.key)
        try:
            cost = ProgramCost(**{k: float(entry[k]) for k in (
                "startup_s", "host_s_per_matmul", "cycles_per_s", "build_s")})
        except (TypeError, KeyError, ValueError):
            return None, True
        return cost, entry.get("sources") != self.sources

    def save(self, cost):
        """Remember ``cost`` (ProgramCost) for the configuration; a folder that cannot be
        written is left alone (the figures are a convenience)."""
        data = self._all()
        data[self.key] = dict(asdict(cost), sources=self.sources)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.NAME}.{os.getpid()}")
            temporary.write_text(json.dumps(data, indent=1) + "\n")
            temporary.replace(self.path)
        except OSError:
            pass


class ProgramProgress:
    """Counts finished tile programs against a plan and shows them.

    Parameters
    ----------
    stream : file, optional
        Where to draw (default: stderr).
    enabled : bool
        False shows nothing (``--json`` keeps stdout clean; stderr still gets nothing).
    heartbeat : float
        Not a terminal: seconds of silence after which a "still running" line is printed
        (default 30).
    time_left : TimeLeft, optional
        The estimate (default: one worker, nothing remembered).
    """

    def __init__(self, stream=None, enabled=True, heartbeat=30.0, time_left=None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr, highlight=False)
        self.enabled = enabled
        self.programs = self.matmuls = self.cycles = self.model_cycles = 0
        self.total_programs = self.total_matmuls = self.total_model_cycles = 0
        self._started = time.perf_counter()
        self._progress = None
        self._task = None
        self._lock = threading.Lock()
        self._heartbeat = heartbeat
        self._last_line = time.perf_counter()
        self._stopped = threading.Event()
        self.time_left = time_left or TimeLeft()

    def plan(self, programs, matmuls, model_cycles):
        """Set the totals (ints) and start the live display on a terminal."""
        self.total_programs, self.total_matmuls = programs, matmuls
        self.total_model_cycles = max(1, model_cycles)
        self._started = time.perf_counter()
        self.time_left.plan(programs, matmuls, model_cycles)
        if self.enabled and self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]programs {task.fields[programs]}"), BarColumn(),
                TextColumn("{task.fields[matmuls]} matmuls, {task.fields[cycles]} cycles"),
                TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("{task.fields[left]}"),
                console=self.console, transient=True)
            self._task = self._progress.add_task("run", total=self.total_model_cycles,
                                                 **self._fields())
            self._progress.start()
        elif self.enabled:
            self._last_line = time.perf_counter()
            threading.Thread(target=self._beat, daemon=True, name="progress").start()

    def _beat(self):
        """Not a terminal: print the counters after each ``heartbeat`` seconds of silence."""
        while not self._stopped.wait(min(self._heartbeat, 1.0)):
            with self._lock:
                if time.perf_counter() - self._last_line >= self._heartbeat:
                    self._print(f"  still running  [{self.status()}]")

    def _print(self, line):
        self.console.print(line, markup=False, soft_wrap=True)
        self._last_line = time.perf_counter()

    def _fields(self):
        return {"programs": f"{self.programs:,}/{self.total_programs:,}",
                "matmuls": f"{self.matmuls:,}/{self.total_matmuls:,}",
                "cycles": f"{self.cycles:,}", "left": self.left()}

    def left(self):
        """The time-left estimate (str): ``"~N s left"`` or ``"estimating"`` (see
        :class:`TimeLeft`)."""
        return self.time_left.text()

    def status(self):
        """The counters as one line (str): programs, matmuls, cycles, elapsed, estimate."""
        elapsed = time.perf_counter() - self._started
        f = self._fields()
        return (f"programs {f['programs']}, matmuls {f['matmuls']}, cycles {f['cycles']}, "
                f"{elapsed:.0f} s elapsed, {f['left']}")

    def program_done(self, program, outcome):
        """Count one finished program (a TileProgram and its ProgramOutcome)."""
        with self._lock:
            self.programs += 1
            self.matmuls += outcome.matmuls
            self.cycles += outcome.cycles
            self.model_cycles += program.model_cycles
            self.time_left.finished(outcome.matmuls, program.model_cycles, outcome)
            if self._progress is not None:
                self._progress.update(self._task, completed=self.model_cycles,
                                      **self._fields())
            elif self.enabled:
                self._print(f"  {program_name(program.key)} done: {outcome.matmuls:,} "
                            f"matmuls, {outcome.cycles:,} cycles  [{self.status()}]")

    def note(self, text):
        """Print one line (a finished GEMM) with the counters."""
        if not self.enabled:
            return
        with self._lock:
            self._print(f"  {text}  [{self.status()}]")

    def stop(self):
        """End the live display (or the heartbeat)."""
        self._stopped.set()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
