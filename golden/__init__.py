"""Numpy golden models of the Systolica tile (numpy and ml_dtypes only).

- :mod:`systolica.golden.matmul`: bit-exact ``nc_matmul`` numerics (INT8 and BF16).
- :mod:`systolica.golden.bf16`: the BF16 x BF16 -> FP32 operations and bit-pattern helpers.
- :mod:`systolica.golden.command`: the tile's commands and the checks that reject them.
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
from .command import PSUM_BANKS, PSUM_ENTRIES, Command, command_error
from .matmul import nc_matmul, nc_matmul_batch, wrap_int32
from .timing import (
    CommandTiming,
    command_schedule,
    matmul_cycles,
    program_cycles,
    program_schedule,
    tile_latency,
)

__all__ = ["CANONICAL_NAN", "PSUM_BANKS", "PSUM_ENTRIES", "Command", "CommandTiming",
           "bf16_bits", "command_error", "command_schedule", "bf16_product", "flush_subnormals",
           "fp32_add", "fp32_bits", "from_bf16_bits", "from_fp32_bits", "matmul_cycles",
           "nc_matmul", "nc_matmul_batch", "program_cycles", "program_schedule",
           "tile_latency", "wrap_int32"]
