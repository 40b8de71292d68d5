"""A progress display for runs of many tile programs (rich), on stderr.

On a terminal: a live line with programs done / total, matmuls, RTL cycles, elapsed time and
the estimate of what is left, and one printed line per finished GEMM above it. The estimate is
the cycle model's cycles still to do over the rate measured since the first program finished
(so neither the build nor the workers' start-up counts), and says "estimating" until two
programs have finished. Elsewhere (a pipe, a CI log): one line per
finished tile program and the GEMM lines, each with the same counters, so a log shows progress
without control characters, plus a "still running" line with the counters whenever nothing
was printed for ``heartbeat`` seconds (one program of a large GEMM runs for minutes).
"""

import sys
import threading
import time


def program_name(key):
    """A tile program's key as a progress line names it (str): ``"bf16/L0/up/1"`` (precision,
    layer, GEMM, program index, as the MiniLM workload makes them) becomes ``"bf16 layer 0
    up, program 1"``; any other key is kept as it is."""
    parts = key.split("/")
    if len(parts) == 4 and parts[1][:1] == "L" and parts[1][1:].isdigit():
        precision, layer, gemm, index = parts
        return f"{precision} layer {layer[1:]} {gemm}, program {index}"
    return f"program {key}"


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
    """

    def __init__(self, stream=None, enabled=True, heartbeat=30.0):
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
        #: (time, model cycles done) when the first program finished: the rate's origin.
        self._first = None

    def plan(self, programs, matmuls, model_cycles):
        """Set the totals (ints) and start the live display on a terminal."""
        self.total_programs, self.total_matmuls = programs, matmuls
        self.total_model_cycles = max(1, model_cycles)
        self._started = time.perf_counter()
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

    def left(self, now=None):
        """The time-left estimate (str): ``"~N s left"`` from the rate of the cycle model's
        cycles measured since the first program finished, or ``"estimating"`` until a second
        program has finished (the first one's time includes the build and the workers'
        start-up, which are not a rate)."""
        if self._first is None or self.programs < 2:
            return "estimating"
        since, cycles_then = self._first
        rate = (self.model_cycles - cycles_then) / max((now or time.perf_counter()) - since,
                                                       1e-9)
        if rate <= 0:
            return "estimating"
        return f"~{(self.total_model_cycles - self.model_cycles) / rate:.0f} s left"

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
            if self._first is None:
                self._first = (time.perf_counter(), self.model_cycles)
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
