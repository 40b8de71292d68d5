"""Verilog generation, simulator runs and the applications of Systolica, by role:

- :mod:`systolica.sim.build`: generating the Verilog, finding the simulators, building and
  running a tile configuration (:mod:`~systolica.sim.build.generate`,
  :mod:`~systolica.sim.build.toolchain`, :mod:`~systolica.sim.build.runner`) and the errors
  the simulation layer raises (:mod:`~systolica.sim.build.errors`).
- :mod:`systolica.sim.api`: the run API: matmuls and command programs on the RTL tile
  (:mod:`~systolica.sim.api.runs`), any-size GEMMs cut into tile programs
  (:mod:`~systolica.sim.api.tiling`) and the engines that run programs serially or on Dask
  (:mod:`~systolica.sim.api.engine`).
- :mod:`systolica.sim.waves`: waveform tools: GTKWave save files
  (:mod:`~systolica.sim.waves.gtkwave`, :mod:`~systolica.sim.waves.gtkwave_filter`) and the
  timeline PNG / Perfetto trace (:mod:`~systolica.sim.waves.timeline`).
- :mod:`systolica.sim.apps`: the applications behind the ``systolica`` command (the random
  and MiniLM workloads, waves, bench, regress, cells, the verification tools). Only these
  may import :mod:`systolica.scaling`; nothing outside ``apps`` imports ``apps``.

Public API (re-exported here):

- :func:`run_matmul`: one matmul on the RTL tile, returning PSUM and cycles.
- :func:`run_program`: a command sequence (:class:`Matmul` into PSUM bank/offset regions,
  :class:`Read` of PSUM regions) back to back, with per-command cycle stamps and the cycle
  model's prediction beside them.
- :func:`build`: generate and build a tile configuration for a simulator.
- Errors: :class:`SystolicaError` and its subclasses.
"""

from .api.runs import Matmul, MatmulResult, ProgramResult, Read, run_matmul, run_program
from .build.errors import BuildError, SimulationError, SimulatorNotFoundError, SystolicaError
from .build.runner import build
from .build.toolchain import SIMULATORS

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
