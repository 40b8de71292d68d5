"""Fused attention forward with an online softmax (flash style), one head, NKI 0.6 style.

``out[Sq, d] = softmax(q.T @ k * scale) @ v`` with q [d, Sq], k [d, Sk] (head dimension on
the partitions: the contraction of ``q.T @ k``), v [Sk, d]; d <= 128, Sq a multiple of 128, Sk
a multiple of 512. Per 128-query tile, keys stream in blocks of 512: scores on TensorE into
PSUM, the running max and sum on VectorE/ScalarE, ``exp`` on ScalarE, the probabilities
transposed on TensorE (4 x [128, 128]) and multiplied with v into PSUM, the output rescaled
on VectorE; the row sums divide at the end.
"""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128
KB = 512         # keys per block: one PSUM bank of scores


def attention_fwd(q, k, v, scale=None):
    """Returns out [Sq, d] in q's type."""
    d, sq = q.shape
    sk = k.shape[1]
    assert d <= P and sq % P == 0 and sk % KB == 0, \
        f"need d <= {P}, Sq % {P} == 0 and Sk % {KB} == 0; got d={d}, Sq={sq}, Sk={sk}"
    scale = d ** -0.5 if scale is None else scale
    out = nl.ndarray((sq, d), q.dtype, buffer=nl.shared_hbm)
    k_sb = nl.ndarray((d, sk), k.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_sb, src=k)
    v_sb = nl.ndarray((P, sk // P, d), v.dtype, buffer=nl.sbuf)
    for c in nl.affine_range(sk // P):
        nisa.dma_copy(dst=v_sb[:, c, :], src=v[c * P:(c + 1) * P, :])
    for qi in nl.affine_range(sq // P):
        q_sb = nl.ndarray((d, P), q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_sb, src=q[:, qi * P:(qi + 1) * P])
        run_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_max, value=-3.0e38)
        run_sum = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_sum, value=0.0)
        acc = nl.ndarray((P, d), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for kb in nl.sequential_range(sk // KB):
            s_ps = nl.ndarray((P, KB), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps, stationary=q_sb, moving=k_sb[:, kb * KB:(kb + 1) * KB])
            blk_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=blk_max, op=nl.maximum, data=s_ps, axis=1)
            new_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=new_max, data=blk_max, op0=nl.multiply, operand0=scale,
                               op1=nl.maximum, operand1=run_max)
            neg_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_max, data=new_max, op0=nl.multiply, operand0=-1.0)
            # correction = exp(old max - new max)
            corr = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=corr, op=nl.exp, data=run_max, bias=neg_max)
            nisa.tensor_copy(dst=run_max, src=new_max)
            p_sb = nl.ndarray((P, KB), q.dtype, buffer=nl.sbuf)
            blk_sum = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=p_sb, op=nl.exp, data=s_ps, bias=neg_max, scale=scale,
                            reduce_op=nl.add, reduce_res=blk_sum)
            nisa.scalar_tensor_tensor(dst=run_sum, data=run_sum, op0=nl.multiply,
                                      operand0=corr, op1=nl.add, operand1=blk_sum)
            pv = nl.ndarray((P, d), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(KB // P):
                pt_ps = nl.ndarray((P, P), q.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=pt_ps, data=p_sb[:, c * P:(c + 1) * P])
                pt = nl.ndarray((P, P), q.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt, src=pt_ps)
                nisa.nc_matmul(dst=pv, stationary=pt, moving=v_sb[:, kb * (KB // P) + c, :])
            nisa.scalar_tensor_tensor(dst=acc, data=acc, op0=nl.multiply, operand0=corr,
                                      op1=nl.add, operand1=pv)
        inv = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=run_sum)
        o = nl.ndarray((P, d), q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[qi * P:(qi + 1) * P, :], src=o)
    return out
