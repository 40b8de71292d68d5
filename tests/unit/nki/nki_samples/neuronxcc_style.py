"""A kernel in the older ``neuronxcc.nki`` style (``nl.load`` / ``nl.store``, ``nl.arange``
index expressions, ``nl.*`` functions, ``nl.matmul``, results returned by the calls): a
row-softmax of ``q.T @ k`` times v for one 128-row tile. Used unedited by
tests/unit/nki/test_nki_api.py."""

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def tile_attention(q, k, v, out):
    """q [d, 128], k [d, 128], v [128, d], out [128, d] (written in place)."""
    d = q.shape[0]
    i_d = nl.arange(d)[:, None]
    i_s = nl.arange(128)[None, :]
    q_t = nl.load(q[i_d, i_s])
    k_t = nl.load(k[i_d, i_s])
    scores = nl.matmul(q_t, k_t, transpose_x=True)          # [128 q, 128 keys] in PSUM
    s = nl.multiply(scores, 1.0 / d ** 0.5)
    row_max = nl.max(s, axis=1, keepdims=True)
    e = nl.exp(nl.subtract(s, row_max))
    denom = nl.sum(e, axis=1, keepdims=True)
    p = nl.divide(e, denom, dtype=nl.bfloat16)
    p_t = nl.ndarray((128, 128), dtype=nl.bfloat16)
    p_t[...] = nl.transpose(p)
    v_t = nl.load(v)
    res = nl.zeros((128, d), nl.float32, buffer=nl.psum)
    res += nisa.nc_matmul(p_t, v_t)
    nl.store(out, value=nl.copy(res, dtype=out.dtype))
