"""Verilog generation and simulator runs of Systolica, by role:

- :mod:`systolica.sim.builder`: generating the Verilog, finding the simulators, building and
  running a tile configuration (:mod:`~systolica.sim.builder.generate`,
  :mod:`~systolica.sim.builder.toolchain`, :mod:`~systolica.sim.builder.runner`) and the errors
  the simulation layer raises (:mod:`~systolica.sim.builder.errors`).
- :mod:`systolica.sim.api`: the run API: matmuls and command programs on the RTL tile
  (:mod:`~systolica.sim.api.runs`), any-size GEMMs cut into tile programs
  (:mod:`~systolica.sim.api.tiling`) and the engines that run programs serially or on Dask
  (:mod:`~systolica.sim.api.engine`).
- :mod:`systolica.sim.waves`: waveform tools: GTKWave save files
  (:mod:`~systolica.sim.waves.gtkwave`, :mod:`~systolica.sim.waves.gtkwave_filter`) and the
  timeline PNG / Perfetto trace (:mod:`~systolica.sim.waves.timeline`).
- :mod:`systolica.sim.options`: the command-line option rules every tool shares (tile
  sizes, simulators, counts, seeds, one-line errors).

The tools built on this layer live above it: :mod:`systolica.verif` (verification),
:mod:`systolica.workloads` and :mod:`systolica.cli` (the ``systolica`` command).

Public API (re-exported here):

- :class:`TileConfig` (from :mod:`systolica.hdl.config`): the one validated description of a
  tile (size, type set, PSUM, queue) every entry point takes.
- :func:`run_matmul`: one matmul on the RTL tile, returning PSUM and cycles.
- :func:`run_program`: a command sequence (:class:`Matmul` into PSUM bank/offset regions,
  :class:`MatmulMx` for NeuronCore-v4's MX matmuls on a tile with the ``mx`` type set,
  :class:`Read` of PSUM regions) back to back, with per-command cycle stamps and the cycle
  model's prediction beside them.
- :func:`build`: generate and build a tile configuration for a simulator.
- Errors: :class:`SystolicaError` and its subclasses.
"""

from .api.runs import (
    Matmul,
    MatmulMx,
    MatmulResult,
    ProgramResult,
    Read,
    TileConfig,
    run_matmul,
    run_program,
)
from .builder.errors import BuildError, SimulationError, SimulatorNotFoundError, SystolicaError
from .builder.runner import build
from .builder.toolchain import SIMULATORS

__all__ = [
    "SIMULATORS",
    "BuildError",
    "Matmul",
    "MatmulMx",
    "MatmulResult",
    "ProgramResult",
    "Read",
    "SimulationError",
    "SimulatorNotFoundError",
    "SystolicaError",
    "TileConfig",
    "build",
    "run_matmul",
    "run_program",
]
