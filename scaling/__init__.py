"""Scaling layer: the tile's validated cycle model turned into core, chip, instance and cluster
estimates, with cited hardware presets and a check of published claims.

- :mod:`.hardware`: TOML hardware descriptions (``presets/hw``), peaks from first principles.
- :mod:`.tilemodel`: GEMM folding onto the tile, exact fast cycle counts, SCALE-Sim WS mode.
- :mod:`.workloads`: single GEMM, GEMM-list CSV, SCALE-Sim topologies, transformer presets.
- :mod:`.model`: roofline per GEMM, chip time, collectives, step time, scaling efficiency.
- :mod:`.claims`: published and claimed peaks against first principles.
- :mod:`.cli`: ``systolica estimate`` and ``systolica claims``.

May import only ``systolica.golden``, numpy, the standard library, rich and matplotlib.
"""

from .hardware import Hardware, load_hardware, preset_names
from .model import Estimate, scaling_curve, step_estimate
from .spec import SpecError
from .tilemodel import (
    gemm_program,
    gemm_tile_cycles,
    periodic_program_cycles,
    scalesim_ws_cycles,
    uniform_program_cycles,
)
from .workloads import (
    Gemm,
    Workload,
    load_gemm_csv,
    load_scalesim_topology,
    load_transformer,
    single_gemm,
    transformer_workload,
)

__all__ = ["Estimate", "Gemm", "Hardware", "SpecError", "Workload", "gemm_program",
           "gemm_tile_cycles", "load_gemm_csv", "load_hardware", "load_scalesim_topology",
           "load_transformer", "periodic_program_cycles", "preset_names", "scaling_curve",
           "scalesim_ws_cycles", "single_gemm", "step_estimate", "transformer_workload",
           "uniform_program_cycles"]
