"""Numpy golden models of the Systolica tile (numpy and ml_dtypes only).

- :mod:`systolica.golden.matmul`: bit-exact ``nc_matmul`` numerics (INT8 and every float type,
  TF32/FP32 included) and the bit-accurate transpose (``nc_transpose``).
- :mod:`systolica.golden.formats`: the operand types, their decode into FP32, and the rules
  on operand pairs, ``perf_mode``, transpose mode and K.
- :mod:`systolica.golden.tiles`: the row/column tile rules (``tile_position``, ``tile_size``).
- :mod:`systolica.golden.bf16`: the BF16 x BF16 -> FP32 operations and bit-pattern helpers.
- :mod:`systolica.golden.command`: the tile's commands and the checks that reject them.
- :mod:`systolica.golden.timing`: the tile's cycle model.
- :mod:`systolica.golden.mx`: NeuronCore-v4's MX matmul (``nc_matmul_mx``) and ``quantize_mx``.
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
from .command import (
    PSUM_BANKS,
    PSUM_ENTRIES,
    Command,
    check_bool,
    check_fits,
    check_positive,
    check_region,
    command_error,
    region_limit,
)
from .folding import fold, gemm_folds, gemm_matmul_count
from .formats import (
    DOUBLE_ROW,
    FORMATS,
    TFLOAT32,
    WIDE_FORMATS,
    OperandFormat,
    as_tfloat32,
    check_k,
    check_transpose,
    decode,
    double_row_order,
    format_of,
    identity,
    max_k,
    operand_formats,
)
from .matmul import (
    check_ftz,
    check_operands,
    nc_matmul,
    nc_matmul_batch,
    nc_transpose,
    psum_accumulate,
    wrap_int32,
)
from .mx import (
    MX_TYPES,
    dequantize_mx,
    interleave,
    mx_error_bound,
    mx_pe,
    nc_matmul_mx,
    quantize_mx,
    round_to_bf16,
    xorwow_bits,
)
from .tiles import (
    TILE_ERRORS,
    TILE_SPLITS,
    Tile,
    check_tile,
    check_tile_operands,
    finest_tile,
    tile_error,
    tile_sizes,
)
from .timing import (
    CommandTiming,
    TileOp,
    command_schedule,
    matmul_cycles,
    matmul_passes,
    nc_matmul_cost,
    program_cycles,
    program_schedule,
    tile_latency,
    tiled_program_cycles,
    tiled_schedule,
)

__all__ = ["bf16_bits", "bf16_product", "CANONICAL_NAN", "check_bool", "check_fits", "check_ftz",
           "check_k", "check_operands", "check_positive", "check_region", "Command",
           "command_error", "command_schedule", "CommandTiming", "decode", "DOUBLE_ROW",
           "double_row_order", "flush_subnormals", "fold", "format_of", "FORMATS", "fp32_add",
           "fp32_bits", "from_bf16_bits", "from_fp32_bits", "gemm_folds", "gemm_matmul_count",
           "matmul_cycles", "max_k", "nc_matmul", "nc_matmul_batch", "operand_formats",
           "OperandFormat", "program_cycles", "program_schedule", "psum_accumulate", "PSUM_BANKS",
           "PSUM_ENTRIES", "region_limit", "tile_latency", "wrap_int32",
           # tensor-engine instruction: tiles, transpose, TF32/FP32
           "as_tfloat32", "check_tile", "check_tile_operands", "check_transpose", "finest_tile",
           "identity",
           "matmul_passes", "nc_matmul_cost", "nc_transpose", "Tile", "TileOp", "TFLOAT32",
           "TILE_ERRORS", "TILE_SPLITS", "tile_error", "tile_sizes", "tiled_program_cycles",
           "tiled_schedule", "WIDE_FORMATS"]
# NeuronCore-v4 MX formats (golden/mx.py)
__all__ += ["dequantize_mx", "interleave", "mx_error_bound", "mx_pe", "MX_TYPES", "nc_matmul_mx",
            "quantize_mx", "round_to_bf16", "xorwow_bits"]
