"""Numpy golden models of the Systolica tile (numpy and ml_dtypes only).

- :mod:`systolica.golden.matmul`: bit-exact ``nc_matmul`` numerics.
- :mod:`systolica.golden.timing`: the tile's cycle model.
"""

from .matmul import nc_matmul, wrap_int32
from .timing import MatmulTiming, matmul_cycles, program_cycles, program_schedule, tile_latency

__all__ = ["MatmulTiming", "matmul_cycles", "nc_matmul", "program_cycles", "program_schedule",
           "tile_latency", "wrap_int32"]
