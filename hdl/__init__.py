"""Amaranth description of the Systolica tensor-engine tile.

Blocks, one module each:

- :mod:`systolica.hdl.layouts`: stream payload layouts shared with the testbench.
- :mod:`systolica.hdl.float_mul`: the shared float x float -> FP32 multiplier (every type).
- :mod:`systolica.hdl.fp32_add`: FP32 adder, round-to-nearest-even.
- :mod:`systolica.hdl.pe`: the processing element (PE), INT8 and every float type.
- :mod:`systolica.hdl.skew`: triangular delay lines that skew and de-skew vectors.
- :mod:`systolica.hdl.array`: the ``rows x cols`` weight-stationary PE grid.
- :mod:`systolica.hdl.psum`: the PSUM memory with its accumulate adders.
- :mod:`systolica.hdl.tile`: the tile top with its stream interfaces.
"""

from .array import SystolicArray
from .float_mul import FLOAT_FIELDS, FloatMultiplier
from .fp32_add import Fp32Adder
from .layouts import (
    DType,
    ErrorCode,
    Op,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
)
from .pe import ProcessingElement
from .psum import Psum
from .skew import SkewBuffer
from .tile import Tile

__all__ = [
    "FLOAT_FIELDS",
    "DType",
    "ErrorCode",
    "FloatMultiplier",
    "Fp32Adder",
    "Op",
    "ProcessingElement",
    "Psum",
    "SkewBuffer",
    "SystolicArray",
    "Tile",
    "command_layout",
    "moving_layout",
    "result_layout",
    "stationary_layout",
    "status_layout",
]
