"""Numpy references of the project's kernels for ``systolica nki run --reference``
(``systolica.nki.reference:matmul`` ...). Tensor-engine ones are the golden model's, bit for
bit; the others are float64 formulas."""

import numpy as np

from systolica.golden import nc_matmul
from systolica.sim.api.tiling import golden_tiled_matmul


def matmul(lhsT, rhs, **_options):
    """``lhsT.T @ rhs`` as the tutorial matmul kernels accumulate it (128-row K-slabs in
    PSUM), float32."""
    return golden_tiled_matmul(lhsT, rhs, 128)


def matmul_blocked(lhsT, rhs, block_m=16, block_n=2, block_k=8):
    """The fully blocked kernel's order: per K block of ``block_k`` 128-row slabs, the slabs
    accumulated in PSUM (``golden_tiled_matmul``), then the K blocks' sums added in FP32 in
    ascending K (VectorE's RNE add, ``golden.psum_accumulate``), float32."""
    from systolica.golden import psum_accumulate

    step = 128 * min(block_k, lhsT.shape[0] // 128)
    out = None
    for k0 in range(0, lhsT.shape[0], step):
        part = golden_tiled_matmul(lhsT[k0:k0 + step], rhs[k0:k0 + step], 128)
        out = part if out is None else psum_accumulate(out, part)
    return out


def matmul_fp8_double_row(lhsT, rhs):
    """One double-row ``nc_matmul`` (K = 256), float32."""
    return nc_matmul(lhsT, rhs, perf_mode="double_row")


def transpose_2d(x):
    """``x.T``, bits unchanged."""
    return np.ascontiguousarray(x.T)


def softmax(x):
    """Row softmax (float64)."""
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def rmsnorm(x, gamma, eps=1e-6):
    """RMSNorm over the last axis (float64)."""
    x = x.astype(np.float64)
    return x / np.sqrt((x ** 2).mean(1, keepdims=True) + eps) * gamma


def layernorm(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis (float64)."""
    x = x.astype(np.float64)
    mu = x.mean(1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps) * gamma + beta


def attention_fwd(q, k, v, scale=None):
    """``softmax(q.T @ k * scale) @ v`` (float64)."""
    scale = q.shape[0] ** -0.5 if scale is None else scale
    s = q.astype(np.float64).T @ k.astype(np.float64) * scale
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)


def matmul_mxfp8(lhsT, rhs):
    """The MXFP8 kernel's result from the golden model: per (128, 512) output tile, each
    512-row K block of both operands interleaved (``golden.interleave``), quantised
    (``golden.quantize_mx``, e4m3fn) and multiplied by ``golden.nc_matmul_mx``, accumulated
    in FP32 PSUM in ascending K; float32."""
    import ml_dtypes

    from systolica import golden

    k, m = lhsT.shape
    n = rhs.shape[1]
    e4m3fn = ml_dtypes.float8_e4m3fn
    out = np.zeros((m, n), np.float32)
    for m0 in range(0, m, 128):
        for n0 in range(0, n, 512):
            acc = None
            for k0 in range(0, k, 512):
                a = golden.quantize_mx(golden.interleave(lhsT[k0:k0 + 512, m0:m0 + 128]), e4m3fn)
                b = golden.quantize_mx(golden.interleave(rhs[k0:k0 + 512, n0:n0 + 512]), e4m3fn)
                acc = golden.nc_matmul_mx(a[0], b[0], a[1], b[1], psum=acc,
                                          accumulate=acc is not None)
            out[m0:m0 + 128, n0:n0 + 512] = acc
    return out
