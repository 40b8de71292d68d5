"""Post-training INT8 quantisation of the linear GEMMs (symmetric, round half to even).

Weights: per output channel, ``scale_w[o] = max|W[o, :]| / 127``. Activations: one scale per
GEMM input tensor calibrated on the FP32 model's activations for the batch
(:func:`activation_scale`), or one per token computed at run time (:func:`token_scales`).
Values are clipped to [-127, 127]; the INT32 PSUM dequantises as
``psum * scale_x * scale_w[o]`` in FP32.
"""

import numpy as np


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
    peak = np.abs(weight).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def quantize_activation_int8(x, scale):
    """Symmetric INT8 activations: ``clip(rint(x / scale), -127, 127)`` (int8, shape of x).

    ``scale`` is a float32 scalar (per tensor) or [T, 1] (per token)."""
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8)


def token_scales(x):
    """Per-token symmetric scales ``max|x[t, :]| / 127`` (float32 [T, 1]; 1 for a zero row).

    Dynamic (from the activations themselves); they scale the moving tensor's columns, so
    the INT32 PSUM column ``t`` dequantises with ``scale[t]``.
    """
    peak = np.abs(x).max(axis=1, keepdims=True)
    return np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)


def activation_scale(x):
    """Per-tensor symmetric scale ``max|x| / 127`` (float32; 1 for an all-zero tensor)."""
    peak = float(np.abs(x).max())
    return np.float32(peak / 127.0 if peak > 0 else 1.0)
