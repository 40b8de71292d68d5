"""MXFP8 matmul of this project for NeuronCore-v4 (trn3), NKI 0.6 style: BF16 operands are
quantised to MXFP8 (``float8_e4m3fn``, one E8M0 scale per 32 elements) on VectorE with
``nisa.quantize_mx`` and multiplied on TensorE with ``nisa.nc_matmul_mx``, K accumulated in
PSUM in blocks of 512 (128 partitions x 4 packed lanes).

Layout ("Trainium3 Architecture Guide for NKI", "Quad-MXFP8/MXFP4 Matmul Performance"): in a
K block of 512, lane j of partition p is row ``j * 128 + p``; each operand block is loaded as
four [128, F] row slabs and its lanes interleaved on VectorE before quantising.
"""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128          # partitions
LANES = 4        # MX elements per x4 word
KB = P * LANES   # contraction per nc_matmul_mx
FN = 512         # moving free size (one PSUM bank of FP32)


def _quantized(x, kb, f0, f, element):
    """Rows ``kb * 512 ..`` and columns ``f0 .. f0 + f`` of ``x`` [K, F] (HBM, BF16) as an x4
    SBUF tile [128, f] and its scale tile [128, f] (quadrant layout)."""
    stage = nl.ndarray((P, LANES, f), x.dtype, buffer=nl.sbuf)
    for j in nl.static_range(LANES):
        r0 = kb * KB + j * P
        nisa.dma_copy(dst=stage[:, j, :], src=x[r0:r0 + P, f0:f0 + f])
    lanes = nl.ndarray((P, f, LANES), x.dtype, buffer=nl.sbuf)
    for j in nl.static_range(LANES):
        nisa.tensor_copy(dst=lanes[:, :, j], src=stage[:, j, :])
    data = nl.ndarray((P, f), element, buffer=nl.sbuf)
    scale = nl.ndarray((P, f), nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.quantize_mx(dst=data, src=lanes.reshape((P, LANES * f)), dst_scale=scale)
    return data, scale


def matmul_mxfp8(lhsT, rhs):
    """``out[M, N] = lhsT[K, M].T @ rhs[K, N]`` with both operands quantised to MXFP8
    (e4m3fn) per 512-row K block; lhsT and rhs BF16 (or FP16), K a multiple of 512, M of 128,
    N of 512; out float32."""
    k, m = lhsT.shape
    n = rhs.shape[1]
    assert k % KB == 0 and m % P == 0 and n % FN == 0, \
        f"K must be a multiple of {KB}, M of {P} and N of {FN}; got K={k}, M={m}, N={n}"
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // P):
        for ni in nl.affine_range(n // FN):
            acc = nl.ndarray((P, FN), nl.float32, buffer=nl.psum)
            for kb in nl.affine_range(k // KB):
                a, a_scale = _quantized(lhsT, kb, mi * P, P, nl.float8_e4m3fn_x4)
                b, b_scale = _quantized(rhs, kb, ni * FN, FN, nl.float8_e4m3fn_x4)
                nisa.nc_matmul_mx(dst=acc, stationary=a, moving=b, stationary_scale=a_scale,
                                  moving_scale=b_scale)
            res = nl.ndarray((P, FN), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[mi * P:(mi + 1) * P, ni * FN:(ni + 1) * FN], src=res)
    return out
