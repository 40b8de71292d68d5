"""Scaling layer: the tile's validated cycle model turned into core, chip, instance and cluster
estimates, with cited hardware presets and a check of published claims.

- :mod:`.hardware`: TOML hardware descriptions (``presets/hw``), peaks from first principles.
- :mod:`.tilemodel`: GEMM folding onto the tile, exact fast cycle counts, SCALE-Sim WS mode.
- :mod:`.workloads`: single GEMM, GEMM-list CSV, SCALE-Sim topologies, Hugging Face
  ``config.json`` transformers (presets in ``presets/models``) and their GEMMs.
- :mod:`.model`: roofline per GEMM and chip time of GEMM workloads.
- :mod:`.llm`: transformer decode (TTFT, TPOT) and training (step, sequences/s, MFU) with
  tp/pp/dp counted in NeuronCores, collectives, non-GEMM work and the calibrated efficiencies.
- :mod:`.calibration`: published measurements (``presets/published.toml``), the fit of the
  calibrated parameters (``presets/calibration.toml``) and validation.
- :mod:`.claims`: published and claimed peaks and workload claims.
- :mod:`.report`: tables, JSON and plots of transformer estimates and of the validation.
- :mod:`.cli`: ``systolica estimate``, ``systolica validate`` and ``systolica claims``.

May import only ``systolica.golden``, numpy, the standard library, rich and matplotlib.
"""

from .calibration import fit, load_calibration, load_points, validate
from .hardware import Hardware, load_hardware, preset_names
from .llm import Calibration, Layout, inference, training, training_scaling
from .model import Estimate, step_estimate
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
    parse_hf_config,
    single_gemm,
    transformer_workload,
)

__all__ = ["Calibration", "Estimate", "Gemm", "Hardware", "Layout", "SpecError", "Workload",
           "fit", "gemm_program", "gemm_tile_cycles", "inference", "load_calibration",
           "load_gemm_csv", "load_hardware", "load_points", "load_scalesim_topology",
           "load_transformer", "parse_hf_config", "periodic_program_cycles", "preset_names",
           "scalesim_ws_cycles", "single_gemm", "step_estimate", "training", "training_scaling",
           "transformer_workload", "uniform_program_cycles", "validate"]
