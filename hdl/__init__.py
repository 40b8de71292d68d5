"""Amaranth description of the Systolica tensor-engine tile.

Blocks, one module each:

- :mod:`systolica.hdl.layouts`: stream payload layouts shared with the testbench.
- :mod:`systolica.hdl.float_mul`: the shared float x float -> FP32 multiplier (every type).
- :mod:`systolica.hdl.fp32_add`: FP32 adder, round-to-nearest-even.
- :mod:`systolica.hdl.fp32_mul`: the TF32 / FP32 multiplier (four 12-bit partial products
  over four passes, rounded once), built into PEs of a tile with the ``fp32`` type set.
- :mod:`systolica.hdl.mx_quad`: one PE's MX step (NeuronCore-v4): four FP8 lane products,
  their FP32 tree sum and the E8M0 block scales, and the MXFP4 -> e4m3fn conversion; a
  component checked against the golden model, not yet built into a tile.
- :mod:`systolica.hdl.pe`: the processing element (PE), INT8 and every float type.
- :mod:`systolica.hdl.skew`: triangular delay lines that skew and de-skew vectors.
- :mod:`systolica.hdl.array`: the ``rows x cols`` weight-stationary PE grid.
- :mod:`systolica.hdl.psum`: the PSUM memory with its accumulate adders.
- :mod:`systolica.hdl.command_queue`: the tile's command check and command queue.
- :mod:`systolica.hdl.loader`: the tile's stationary loader (two buffers per PE, shadow
  weights, tracked per finest tile).
- :mod:`systolica.hdl.issue`: the tile's issue logic (moving or READ beats, in order).
- :mod:`systolica.hdl.result`: the tile's token pipeline, de-skew, PSUM and result stream.
- :mod:`systolica.hdl.tile`: the tile top connecting them, with its stream interfaces and
  the probes (:data:`~systolica.hdl.tile.PROBES`) that name its internal signals.

Beside them, :mod:`systolica.hdl.streams` holds the ``amaranth.sim`` helpers that drive and
watch their streams (``stream_put``, ``stream_get``, ...); it is not imported here, so
generating Verilog does not load the simulator.
"""

from .array import SystolicArray
from .command_queue import COMMAND_QUEUE_DEPTH, CommandQueue
from .float_mul import FLOAT_FIELDS, FloatMultiplier
from .fp32_add import Fp32Adder
from .fp32_mul import Fp32Multiplier
from .issue import IssueLogic
from .layouts import (
    DType,
    ErrorCode,
    Op,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
    token_layout,
)
from .loader import StationaryLoader
from .mx_quad import MxQuad, MxScale
from .pe import ProcessingElement
from .psum import Psum
from .result import ResultPath
from .skew import SkewBuffer
from .tile import PROBES, Probe, Tile, tile_probes

__all__ = [
    "COMMAND_QUEUE_DEPTH",
    "FLOAT_FIELDS",
    "PROBES",
    "CommandQueue",
    "DType",
    "ErrorCode",
    "FloatMultiplier",
    "Fp32Adder",
    "Fp32Multiplier",
    "IssueLogic",
    "MxQuad",
    "MxScale",
    "Op",
    "ProcessingElement",
    "Probe",
    "Psum",
    "ResultPath",
    "SkewBuffer",
    "StationaryLoader",
    "SystolicArray",
    "Tile",
    "command_layout",
    "moving_layout",
    "result_layout",
    "stationary_layout",
    "status_layout",
    "tile_probes",
    "token_layout",
]
