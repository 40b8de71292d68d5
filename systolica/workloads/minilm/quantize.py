"""Post-training INT8 and FP8 quantisation of the linear GEMMs (symmetric, round half to
even).

INT8 weights: per output channel, ``scale_w[o] = max|W[o, :]| / 127``. Activations: one scale
per GEMM input tensor calibrated on the FP32 model's activations for the batch
(:func:`activation_scale`), or one per token computed at run time (:func:`token_scales`).
Values are clipped to [-127, 127]; the INT32 PSUM dequantises as
``psum * scale_x * scale_w[o]`` in FP32.

FP8 (``float8_e4m3``, the NeuronCore-v2/v3 e4m3 whose largest finite value is 240): the same
scheme with 240 in place of 127 (per-output-channel weight scales, per-token activation
scales) and the values rounded to e4m3 (RNE) after clipping to [-240, 240]. The clip is
explicit because ``ml_dtypes`` casts do not saturate (a value past the largest finite one
rounds to Inf). The FP32 PSUM dequantises the same way.

MXFP8 (OCP MX, NeuronCore-v4's ``nc_matmul_mx``): ``float8_e4m3fn`` elements (largest finite
value 448) in x4 words, one E8M0 (power-of-two) scale per 32 elements along K, weights and
activations alike (:func:`quantize_mx_operand`). The scales are the matmul's: the FP32 PSUM
needs no dequantisation.
"""

import ml_dtypes
import numpy as np

from systolica.golden.command import MX_GROUP_ROWS
from systolica.golden.mx import (
    ENGINE_ROWS,
    LANES,
    deinterleave,
    dequantize_mx,
    interleave,
    quantize_mx,
)
from systolica.sim.api.tiling import MxOperand

#: Largest finite ``float8_e4m3`` value (IEEE-style e4m3: exponent 1111 is Inf/NaN).
E4M3_MAX = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3).max)


def row_scales(x, limit):
    """Symmetric per-row scales ``max|x[r, :]| / limit`` (float32 [R, 1]; 1 for a zero row):
    weights' per-output-channel scales and activations' per-token scales, for INT8
    (``limit`` 127) and FP8 e4m3 (240)."""
    peak = np.abs(x).max(axis=1, keepdims=True)
    return np.where(peak > 0, peak / limit, 1.0).astype(np.float32)


def quantize_weight_int8(weight):
    """Per-output-channel symmetric INT8 weights.

    Parameters
    ----------
    weight : numpy.ndarray, float32, shape [out, in]

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        int8 [out, in] values in [-127, 127] (round half to even) and float32 [out] scales
        with ``weight ~= q * scale[:, None]`` (a zero row gets scale 1).
    """
    scale = row_scales(weight, 127.0)
    return np.clip(np.rint(weight / scale), -127, 127).astype(np.int8), scale[:, 0]


def quantize_activation_int8(x, scale):
    """Symmetric INT8 activations: ``clip(rint(x / scale), -127, 127)`` (int8, shape of x).

    ``scale`` is a float32 scalar (per tensor) or [T, 1] (per token)."""
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8)


def token_scales(x):
    """Per-token symmetric scales ``max|x[t, :]| / 127`` (float32 [T, 1]; 1 for a zero row).

    Dynamic (from the activations themselves); they scale the moving tensor's columns, so
    the INT32 PSUM column ``t`` dequantises with ``scale[t]``.
    """
    return row_scales(x, 127.0)


def activation_scale(x):
    """Per-tensor symmetric scale ``max|x| / 127`` (float32; 1 for an all-zero tensor)."""
    peak = float(np.abs(x).max())
    return np.float32(peak / 127.0 if peak > 0 else 1.0)


def saturate_e4m3(x):
    """``x`` (float32) clipped to [-240, 240] and rounded to ``float8_e4m3`` (RNE; NaN stays
    NaN), so that nothing overflows to Inf."""
    return np.clip(x, -E4M3_MAX, E4M3_MAX).astype(ml_dtypes.float8_e4m3)


def quantize_weight_fp8(weight):
    """Per-output-channel FP8 (e4m3) weights.

    Parameters
    ----------
    weight : numpy.ndarray, float32, shape [out, in]

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``float8_e4m3`` [out, in] values in [-240, 240] and float32 [out] scales
        ``max|W[o, :]| / 240`` with ``weight ~= q * scale[:, None]`` (a zero row gets scale 1).
    """
    scale = row_scales(weight, E4M3_MAX)
    return saturate_e4m3(weight / scale), scale[:, 0]


def token_scales_fp8(x):
    """Per-token FP8 scales ``max|x[t, :]| / 240`` (float32 [T, 1]; 1 for a zero row)."""
    return row_scales(x, E4M3_MAX)


def quantize_activation_fp8(x, scale):
    """FP8 (e4m3) activations ``saturate_e4m3(x / scale)`` (shape of x); ``scale`` [T, 1]."""
    return saturate_e4m3(x / scale)


#: Elements along K per E8M0 scale (8 partition rows x 4 lanes), and per SBUF tile of one
#: ``quantize_mx`` / ``nc_matmul_mx`` (128 partitions x 4 lanes).
MX_BLOCK, MX_TILE_K = MX_GROUP_ROWS * LANES, ENGINE_ROWS * LANES


def quantize_mx_operand(matrix):
    """An MXFP8 operand of a matmul, quantised as NeuronCore-v4's Vector engine does it.

    K is cut into SBUF tiles of 512 (the last one shorter: K = 384 is one tile of 96
    partitions, K = 1536 three of 128), each laid out as NKI lays an MX operand out
    (:func:`~systolica.golden.mx.interleave`: lane j of partition p holds row
    ``j * K_tile / 4 + p``), rounded to BF16 (RNE) and quantised by
    :func:`~systolica.golden.mx.quantize_mx` with ``rule="aws"`` (``nki.isa.quantize_mx``:
    scale ``2^(floor(log2 amax) - 7)`` per group of 8 partitions x 4 lanes, so nothing
    saturates); the tiles' partitions are then stacked. The same rule for weights
    (offline) and activations (at run time, on the Vector engine): the OCP rule
    (``rule="ocp"``, scale ``2^(floor(log2 amax) - 8)``) would clip a group's largest
    element past 448 to 448, up to 1/8 of its value, which costs more on MiniLM's outlier
    activations (the FFN down GEMM's GELU outputs) than its extra binade gains. The cut
    does not depend on the tile: a tile of ``rows`` (a multiple of 8) takes K-slabs of
    ``rows`` partitions from it.

    Parameters
    ----------
    matrix : numpy.ndarray, float32, shape [K, F]
        The stationary ``W.T`` [in, out] or moving ``x.T`` [in, tokens]; K a multiple of 32.

    Returns
    -------
    systolica.sim.api.tiling.MxOperand
        ``data`` [K / 4, F, 4] ``float8_e4m3fn``, ``scale`` [K / 32, F] E8M0 bits;
        :func:`mx_operand_values` gives back the [K, F] values it stands for.

    Raises
    ------
    ValueError
        If ``matrix`` is not 2-D or K is not a positive multiple of 32 (one line).
    """
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[0] % MX_BLOCK:
        raise ValueError(f"an MXFP8 operand needs K a positive multiple of {MX_BLOCK} (whole "
                         f"E8M0 scale groups), not a matrix of shape {matrix.shape}")
    data, scales = [], []
    for k0 in range(0, matrix.shape[0], MX_TILE_K):
        tile = interleave(matrix[k0:k0 + MX_TILE_K].astype(ml_dtypes.bfloat16))
        d, sc = quantize_mx(np.ascontiguousarray(tile), ml_dtypes.float8_e4m3fn, rule="aws")
        data.append(d)
        scales.append(sc)
    return MxOperand(np.concatenate(data), np.concatenate(scales))


def mx_operand_values(operand):
    """The [K, F] float64 values an operand of :func:`quantize_mx_operand` stands for (each
    element times its scale, exact; the inverse of its layout)."""
    parts = MX_TILE_K // LANES
    return np.concatenate([
        deinterleave(dequantize_mx(operand.data[p0:p0 + parts], operand.scale[
            p0 // MX_GROUP_ROWS:(p0 + parts) // MX_GROUP_ROWS]))
        for p0 in range(0, operand.shape[0], parts)])
