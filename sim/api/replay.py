"""Replay one tile program alone, in this process: the command a failed distributed run prints.

When a program fails on a Dask worker (it raised on every attempt, or killed every worker
that ran it), :class:`~systolica.sim.api.engine.DaskEngine` saves it
(:func:`~systolica.sim.api.engine.save_for_replay`) to
``<build root>/replay/<key>-<run>.pickle`` and the run's one-line error ends with
``python -m systolica.sim.api.replay FILE``. That runs the same program
(operands, tile size, simulator, FP8 mode) the way a worker does
(:func:`~systolica.sim.api.engine.execute`), here, without Dask: an exception shows with
its whole traceback (this is a debugging command), a result prints one line.

Exit status: 0 when every PSUM word matched the golden model, 1 on a mismatch or a failed
simulation, 2 on a file that is not a saved program, or a missing tool.

The file is a Python pickle (written by the engine): load only files you wrote.
"""

import argparse
import pickle
import sys
from pathlib import Path

from systolica.sim.builder.errors import USER_FACING, SimulationError, SystolicaError, report

from . import engine


def load(path):
    """The :class:`~systolica.sim.api.engine.TileProgram` saved in ``path`` by
    :func:`~systolica.sim.api.engine.save_for_replay`.

    Raises
    ------
    ValueError
        If the file cannot be read or holds no saved program.
    """
    try:
        data = pickle.loads(Path(path).read_bytes())
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    except Exception:  # noqa: BLE001 (any unpickling failure means "not our file")
        data = None
    if not isinstance(data, dict) or data.get("format") != engine.FORMAT:
        raise ValueError(f"{path} is not a tile program saved by systolica.sim.api.replay "
                         f"(format {engine.FORMAT[0]} version {engine.FORMAT[1]})")
    return data["program"]


class _Parser(argparse.ArgumentParser):
    """Bad arguments end in one line, ``error: ...``, exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (usage: {self.prog} FILE)\n")


def main(argv=None):
    """Replay the saved program named on the command line; return the exit status (int)."""
    parser = _Parser(
        prog="python -m systolica.sim.api.replay",
        description="Run one saved tile program alone in this process (the command a "
                    "failed Dask run prints).")
    parser.add_argument("file", help="the .pickle file the failed run named")
    args = parser.parse_args(argv)
    try:
        program = load(args.file)
    except USER_FACING as error:
        return report(error)
    try:
        outcome = engine.execute(program)
    except SystolicaError as error:      # the simulator's own failures: one line
        return report(error)             # anything else: its whole traceback, as promised
    bad = outcome.mismatches + sum(outcome.differing)
    print(f"replay: program {program.key} on a {program.rows} x {program.cols} "
          f"{program.simulator} tile: {outcome.matmuls:,} matmuls, {outcome.words:,} PSUM "
          f"words checked, {outcome.mismatches} mismatches, {sum(outcome.differing)} "
          f"differing words, {outcome.cycles:,} cycles: {'FAILED' if bad else 'ok'}")
    return report(SimulationError("the program's results differ from the golden "
                                  "model")) if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
