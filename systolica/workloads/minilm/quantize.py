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
"""

import ml_dtypes
import numpy as np

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
