"""Numpy golden models of the Systolica tile (numpy and ml_dtypes only).

- :mod:`systolica.golden.matmul`: bit-exact ``nc_matmul`` numerics (INT8 and BF16).
- :mod:`systolica.golden.bf16`: the BF16 x BF16 -> FP32 operations and bit-pattern helpers.
- :mod:`systolica.golden.timing`: the tile's cycle model.
"""

from .bf16 import (
    CANONICAL_NAN,
    bf16_bits,
    bf16_product,
    flush_subnormals,
    fp32_add,
    fp32_bits,
    from_bf16_bits,
    from_fp32_bits,
)
from .matmul import nc_matmul, wrap_int32
from .timing import MatmulTiming, matmul_cycles, program_cycles, program_schedule, tile_latency

__all__ = ["CANONICAL_NAN", "MatmulTiming", "bf16_bits", "bf16_product", "flush_subnormals",
           "fp32_add", "fp32_bits", "from_bf16_bits", "from_fp32_bits", "matmul_cycles",
           "nc_matmul", "program_cycles", "program_schedule", "tile_latency", "wrap_int32"]
