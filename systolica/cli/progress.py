"""A progress display for runs of many tile programs (rich), on stderr.

On a terminal: a live line with programs done / total, matmuls, RTL cycles, elapsed time and
the estimate of what is left (from the cycle model's cycles of the programs done and to do),
and one printed line per finished GEMM above it. Elsewhere (a pipe, a CI log): one line per
finished tile program and the GEMM lines, each with the same counters, so a log shows progress
without control characters, plus a "still running" line with the counters whenever nothing
was printed for ``heartbeat`` seconds (one program of a large GEMM runs for minutes).
"""

import sys
import threading
import time


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
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]programs {task.fields[programs]}"), BarColumn(),
                TextColumn("{task.fields[matmuls]} matmuls, {task.fields[cycles]} cycles"),
                TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("left ~"),
                TimeRemainingColumn(), console=self.console, transient=True)
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
                "cycles": f"{self.cycles:,}"}

    def status(self):
        """The counters as one line (str): programs, matmuls, cycles, elapsed, estimate."""
        elapsed = time.perf_counter() - self._started
        done = self.model_cycles / self.total_model_cycles if self.total_model_cycles else 0
        left = f"~{elapsed * (1 - done) / done:.0f} s left" if done > 0 else "estimating"
        f = self._fields()
        return (f"programs {f['programs']}, matmuls {f['matmuls']}, cycles {f['cycles']}, "
                f"{elapsed:.0f} s elapsed, {left}")

    def program_done(self, program, outcome):
        """Count one finished program (a TileProgram and its ProgramOutcome)."""
        with self._lock:
            self.programs += 1
            self.matmuls += outcome.matmuls
            self.cycles += outcome.cycles
            self.model_cycles += program.model_cycles
            if self._progress is not None:
                self._progress.update(self._task, completed=self.model_cycles,
                                      **self._fields())
            elif self.enabled:
                self._print(f"  program done: {outcome.matmuls:,} matmuls, "
                            f"{outcome.cycles:,} cycles  [{self.status()}]")

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
