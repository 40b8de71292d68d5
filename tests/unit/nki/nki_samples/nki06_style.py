"""A kernel written against NKI 0.6's published API only (``import nki``, ``nki.isa``,
``nki.language``): out = gelu_tanh(x_block @ w + bias) per SPMD program, bias added on
VectorE, the activation on ScalarE. Used unedited by tests/unit/nki/test_nki_api.py."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def dense_gelu(xT, w, bias):
    """xT [K, M_total] (M split over the programs of a 1-D grid), w [K, N], bias [1, N]."""
    k, m_total = xT.shape
    n = w.shape[1]
    m = m_total // nl.num_programs(0)
    m0 = nl.program_id(0) * m
    out = nl.ndarray((m_total, n), dtype=nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.ndarray((nl.tile_size.pmax, k // nl.tile_size.pmax, n), dtype=w.dtype,
                      buffer=nl.sbuf)
    for kt in nl.affine_range(k // nl.tile_size.pmax):
        nisa.dma_copy(dst=w_sb[:, kt, :], src=w[kt * 128:(kt + 1) * 128, :])
    b_sb = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.mgrid[0:m, 0:n]
    nisa.dma_copy(dst=b_sb, src=bias[i_p * 0, i_f])
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for kt in nl.affine_range(k // nl.tile_size.pmax):
        x_sb = nl.ndarray((128, m), dtype=xT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb, src=xT[kt * 128:(kt + 1) * 128, m0:m0 + m])
        nisa.nc_matmul(dst=acc, stationary=x_sb, moving=w_sb[:, kt, :])
    h = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=h, data1=acc, data2=b_sb, op=nl.add)
    y = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.gelu_apprx_tanh, data=h)
    nisa.dma_copy(dst=out[m0:m0 + m, :], src=y)
    return out
