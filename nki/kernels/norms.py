"""Softmax, RMSNorm and LayerNorm over the last dimension of [R, D] tensors, rows on the
partitions (128 rows per tile). Written in the older ``neuronxcc.nki`` style (``nl.load``,
``nl.store``, ``nl.*`` functions, ``nl.arange`` index expressions)."""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128


def softmax(x):
    """``softmax(x, axis=-1)`` of x [R, D] (R a multiple of 128): VectorE max, ScalarE
    exp(x - max) with a summing reduce, VectorE reciprocal and scale. Output in x's type."""
    r, d = x.shape
    out = nl.ndarray((r, d), x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:P, 0:d]
    for t in nl.affine_range(r // P):
        tile = nl.load(x[t * P + i_p, i_f])
        neg_max = nl.max(tile, axis=1, keepdims=True, dtype=nl.float32)
        neg_max = nl.multiply(neg_max, -1.0)
        sums = nl.ndarray((P, 1), nl.float32)
        e = nisa.activation(op=nl.exp, data=tile, bias=neg_max, reduce_op=nl.add,
                            reduce_res=sums, dtype=nl.float32)
        inv = nl.reciprocal(sums)
        nl.store(out[t * P + i_p, i_f], value=nl.multiply(e, inv, dtype=x.dtype))
    return out


def _broadcast_row(v, d):
    """Load a [1, D] HBM row into every partition of a [128, D] tile (one DMA)."""
    i_p, i_f = nl.mgrid[0:P, 0:d]
    return nl.load(v[i_p * 0, i_f])


def rmsnorm(x, gamma, eps=1e-6):
    """``x / sqrt(mean(x^2) + eps) * gamma`` for x [R, D], gamma [1, D]: ScalarE square
    with a summing reduce, ScalarE rsqrt(sum / D + eps), VectorE scaling."""
    r, d = x.shape
    out = nl.ndarray((r, d), x.dtype, buffer=nl.shared_hbm)
    g = _broadcast_row(gamma, d)
    for t in nl.affine_range(r // P):
        tile = nl.load(x[t * P:(t + 1) * P, :])
        ss = nl.ndarray((P, 1), nl.float32)
        nisa.activation(op=nl.square, data=tile, reduce_op=nl.add, reduce_res=ss,
                        dtype=nl.float32)
        rstd = nisa.activation(op=nl.rsqrt, data=ss, scale=1.0 / d, bias=eps,
                               dtype=nl.float32)
        y = nl.multiply(tile, rstd, dtype=nl.float32)
        nl.store(out[t * P:(t + 1) * P, :], value=nl.multiply(y, g, dtype=x.dtype))
    return out


def layernorm(x, gamma, beta, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis of x [R, D]
    (gamma, beta [1, D]); the variance is the mean of squared deviations."""
    r, d = x.shape
    out = nl.ndarray((r, d), x.dtype, buffer=nl.shared_hbm)
    g = _broadcast_row(gamma, d)
    b = _broadcast_row(beta, d)
    for t in nl.affine_range(r // P):
        tile = nl.load(x[t * P:(t + 1) * P, :])
        mean = nl.mean(tile, axis=1, keepdims=True, dtype=nl.float32)
        centred = nl.subtract(tile, mean, dtype=nl.float32)
        ss = nl.ndarray((P, 1), nl.float32)
        nisa.activation(op=nl.square, data=centred, reduce_op=nl.add, reduce_res=ss,
                        dtype=nl.float32)
        rstd = nisa.activation(op=nl.rsqrt, data=ss, scale=1.0 / d, bias=eps,
                               dtype=nl.float32)
        y = nl.multiply(centred, rstd, dtype=nl.float32)
        y = nl.multiply(y, g, dtype=nl.float32)
        nl.store(out[t * P:(t + 1) * P, :], value=nl.add(y, b, dtype=x.dtype))
    return out
