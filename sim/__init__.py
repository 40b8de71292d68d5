"""Verilog generation, simulator runs and the command line of Systolica.

Public API:

- :func:`run_matmul`: one matmul on the RTL tile, returning PSUM and cycles.
- :func:`run_program`: a command sequence (:class:`Matmul` into PSUM bank/offset regions,
  :class:`Read` of PSUM regions) back to back, with per-command cycle stamps and the cycle
  model's prediction beside them.
- :func:`build`: generate and build a tile configuration for a simulator.
- Errors: :class:`SystolicaError` and its subclasses.
"""

from .api import Matmul, MatmulResult, ProgramResult, Read, run_matmul, run_program
from .errors import BuildError, SimulationError, SimulatorNotFoundError, SystolicaError
from .runner import build
from .toolchain import SIMULATORS

__all__ = [
    "SIMULATORS",
    "BuildError",
    "Matmul",
    "MatmulResult",
    "ProgramResult",
    "Read",
    "SimulationError",
    "SimulatorNotFoundError",
    "SystolicaError",
    "build",
    "run_matmul",
    "run_program",
]
