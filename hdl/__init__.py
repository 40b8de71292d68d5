"""Amaranth description of the Systolica tensor-engine tile.

Blocks, one module each:

- :mod:`systolica.hdl.layouts`: stream payload layouts shared with the testbench.
- :mod:`systolica.hdl.pe`: the processing element (PE).
- :mod:`systolica.hdl.skew`: triangular delay lines that skew and de-skew vectors.
- :mod:`systolica.hdl.array`: the ``rows x cols`` weight-stationary PE grid.
- :mod:`systolica.hdl.tile`: the tile top with its stream interfaces.
"""

from .array import SystolicArray
from .layouts import moving_layout, result_layout, stationary_layout
from .pe import ProcessingElement
from .skew import SkewBuffer
from .tile import Tile

__all__ = [
    "ProcessingElement",
    "SkewBuffer",
    "SystolicArray",
    "Tile",
    "moving_layout",
    "result_layout",
    "stationary_layout",
]
