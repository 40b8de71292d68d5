"""Errors raised by the simulation layer; each carries a one-line, actionable message."""


class SystolicaError(Exception):
    """Base class of the errors the simulation layer raises on purpose."""


class SimulatorNotFoundError(SystolicaError):
    """A simulator (or a tool it needs) is not installed."""


class BuildError(SystolicaError):
    """Verilog generation or the simulator build failed."""


class SimulationError(SystolicaError):
    """The simulation ran but failed: a mismatch, a stuck tile or a crashed simulator."""
