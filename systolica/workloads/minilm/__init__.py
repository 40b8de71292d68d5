"""A real transformer through the RTL tile: every matmul of all-MiniLM-L6-v2 in BF16, INT8,
FP8 and (on a tile with the ``mx`` type set) MXFP8, as tile programs run serially or on Dask
workers (``make sim``'s default workload).

Modules, by role:

- :mod:`.weights`: the model package, its weights and tokenizer, the built-in sentences;
- :mod:`.encoder`: the FP32 numpy encoder, every matmul behind :class:`Matmuls`;
- :mod:`.quantize`: INT8, FP8 (e4m3) and MXFP8 post-training quantisation;
- :mod:`.run`: the matmuls on the tile (:class:`TileMatmuls`), the tile-program plan, the
  precision passes and :func:`run_model`;
- :mod:`.report`: text and JSON reports, NeuronCore estimates;
- :mod:`.cli`: ``python -m systolica.sim --workload minilm``.

The distributed engine the programs run on is :mod:`systolica.sim.api.engine`.
"""

from systolica.workloads.minilm.encoder import Matmuls, encode, gelu, ordered_matmul, softmax
from systolica.workloads.minilm.quantize import (
    activation_scale,
    quantize_activation_fp8,
    quantize_activation_int8,
    quantize_mx_operand,
    quantize_weight_fp8,
    quantize_weight_int8,
    saturate_e4m3,
    token_scales,
    token_scales_fp8,
)
from systolica.workloads.minilm.report import format_report, neuroncore_estimates, report_json
from systolica.workloads.minilm.run import (
    DEFAULT_PRECISIONS,
    MX_PRECISIONS,
    TARGETS,
    GemmReport,
    ModelRun,
    PrecisionRun,
    TileMatmuls,
    nearest_neighbours,
    parse_layers,
    plan_programs,
    run_model,
    run_precision,
    similarity_matrix,
    split_programs,
    step_priority,
)
from systolica.workloads.minilm.weights import (
    ATTENTION_GEMMS,
    DEFAULT_SENTENCES,
    GEMMS,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    INSTALL_COMMAND,
    LAYERS,
    LINEAR_GEMMS,
    PACKAGE,
    TRANSPOSES,
    ModelFileError,
    ModelNotFoundError,
    TextTooLongError,
    load_tokenizer,
    load_weights,
    model_dir,
    tokenize,
)

__all__ = [
    "ATTENTION_GEMMS", "DEFAULT_SENTENCES", "GEMMS", "HEAD_DIM", "HEADS", "HIDDEN",
    "DEFAULT_PRECISIONS", "INSTALL_COMMAND", "LAYERS", "LINEAR_GEMMS", "MX_PRECISIONS",
    "PACKAGE", "TARGETS", "TRANSPOSES",
    "GemmReport",
    "Matmuls", "ModelFileError", "ModelNotFoundError", "ModelRun", "PrecisionRun",
    "TextTooLongError", "TileMatmuls", "activation_scale", "encode", "format_report", "gelu",
    "load_tokenizer", "load_weights", "model_dir", "nearest_neighbours",
    "neuroncore_estimates", "ordered_matmul", "parse_layers", "plan_programs",
    "quantize_activation_fp8",
    "quantize_activation_int8", "quantize_mx_operand", "quantize_weight_fp8",
    "quantize_weight_int8", "report_json",
    "run_model", "run_precision", "saturate_e4m3", "similarity_matrix", "softmax",
    "split_programs", "step_priority", "token_scales", "token_scales_fp8", "tokenize",
]
