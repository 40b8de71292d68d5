"""Matmul kernels of this project, in the optimisation steps of AWS's NKI matmul tutorial
(single tile; tiled; loads hoisted; free dimensions blocked; all dimensions blocked), and an
FP8 double-row matmul. NKI 0.6 style (``nisa.dma_copy``, ``dst=`` arguments).

Every kernel computes ``out[M, N] = lhsT[K, M].T @ rhs[K, N]`` with K accumulated in PSUM in
ascending 128-row slabs, so the result equals
:func:`systolica.sim.api.tiling.golden_tiled_matmul` (rows 128) bit for bit; the outputs are
float32.
"""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128          # partitions: K per matmul, M per stationary tile
FN = 512         # moving free size: N per matmul (one PSUM bank of FP32)


def matmul_single_tile(lhsT, rhs):
    """One ``nc_matmul``: lhsT [K <= 128, M <= 128], rhs [K, N <= 512] -> out [M, N]."""
    k, m = lhsT.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((k, m), lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((k, n), rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def _shape(lhsT, rhs):
    k, m = lhsT.shape
    n = rhs.shape[1]
    assert k % P == 0 and m % P == 0 and n % FN == 0, \
        f"K, M must be multiples of {P} and N of {FN}; got K={k}, M={m}, N={n}"
    return k, m, n


def _drain(acc, out, m0, n0, m, n):
    """PSUM tile -> SBUF (VectorE) -> HBM (DMA)."""
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out[m0:m0 + m, n0:n0 + n], src=res)


def matmul_tiled(lhsT, rhs):
    """Step 2: every (M, N) tile loops over K, loading both operands' tiles each time."""
    k, m, n = _shape(lhsT, rhs)
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // P):
        for ni in nl.affine_range(n // FN):
            acc = nl.ndarray((P, FN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(k // P):
                a = nl.ndarray((P, P), lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((P, FN), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[ki * P:(ki + 1) * P, mi * P:(mi + 1) * P])
                nisa.dma_copy(dst=b, src=rhs[ki * P:(ki + 1) * P, ni * FN:(ni + 1) * FN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            _drain(acc, out, mi * P, ni * FN, P, FN)
    return out


def matmul_hoisted(lhsT, rhs):
    """Step 3: the stationary tiles of one M tile are loaded once, outside the N loop."""
    k, m, n = _shape(lhsT, rhs)
    kt = k // P
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // P):
        a = nl.ndarray((P, kt, P), lhsT.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            nisa.dma_copy(dst=a[:, ki, :], src=lhsT[ki * P:(ki + 1) * P, mi * P:(mi + 1) * P])
        for ni in nl.affine_range(n // FN):
            b = nl.ndarray((P, kt, FN), rhs.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                nisa.dma_copy(dst=b[:, ki, :],
                              src=rhs[ki * P:(ki + 1) * P, ni * FN:(ni + 1) * FN])
            acc = nl.ndarray((P, FN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(kt):
                nisa.nc_matmul(dst=acc, stationary=a[:, ki, :], moving=b[:, ki, :])
            _drain(acc, out, mi * P, ni * FN, P, FN)
    return out


def matmul_free_blocked(lhsT, rhs, block_m=2, block_n=2):
    """Step 4: blocks of ``block_m`` M tiles x ``block_n`` N tiles share their loads: each
    operand tile is loaded once per block and used by every matmul of the block."""
    k, m, n = _shape(lhsT, rhs)
    kt = k // P
    bm, bn = min(block_m, m // P), min(block_n, n // FN)
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    for mb in nl.affine_range(m // (P * bm)):
        a = nl.ndarray((P, kt, bm * P), lhsT.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            nisa.dma_copy(dst=a[:, ki, :],
                          src=lhsT[ki * P:(ki + 1) * P, mb * bm * P:(mb + 1) * bm * P])
        for nb in nl.affine_range(n // (FN * bn)):
            b = nl.ndarray((P, kt, bn * FN), rhs.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                nisa.dma_copy(dst=b[:, ki, :],
                              src=rhs[ki * P:(ki + 1) * P, nb * bn * FN:(nb + 1) * bn * FN])
            for mi in nl.affine_range(bm):
                for ni in nl.affine_range(bn):
                    acc = nl.ndarray((P, FN), nl.float32, buffer=nl.psum)
                    for ki in nl.affine_range(kt):
                        nisa.nc_matmul(dst=acc, stationary=a[:, ki, mi * P:(mi + 1) * P],
                                       moving=b[:, ki, ni * FN:(ni + 1) * FN])
                    _drain(acc, out, (mb * bm + mi) * P, (nb * bn + ni) * FN, P, FN)
    return out


def matmul_blocked(lhsT, rhs, block_m=16, block_n=2, block_k=8):
    """Step 5, the tutorial's final step: all dimensions blocked (``block_*`` in tiles, the
    tutorial's defaults; each at most the matrix). For each block of ``block_n`` N tiles, the
    N block's whole column of results [M, BLOCK_N] stays in SBUF as FP32 while K is walked in
    blocks of ``block_k`` tiles (``sequential_range``): a K block's rhs tiles [128, BLOCK_N]
    are loaded once and shared by every M block; each M block's lhsT tiles [128, BLOCK_M]
    are loaded once per (N block, K block); each output tile's K-block sum is formed in one
    PSUM bank and copied (first K block) or added (VectorE, FP32) into its SBUF result tile;
    after the last K block the column is stored, 128 rows per DMA. HBM traffic: rhs once,
    lhsT once per N block, the result once.

    Numerics: with one K block (K <= 128 * block_k) the result is
    ``golden_tiled_matmul(lhsT, rhs, 128)`` bit for bit; with several, each K block's PSUM
    sum is added to the running SBUF sum (:func:`systolica.nki.reference.matmul_blocked`)."""
    k, m, n = _shape(lhsT, rhs)
    kt = k // P
    bm, bn, bk = min(block_m, m // P), min(block_n, n // FN), min(block_k, kt)
    assert m % (bm * P) == 0 and n % (bn * FN) == 0 and kt % bk == 0, \
        f"M, N, K must be multiples of the blocks {bm * P}, {bn * FN}, {bk * P}"
    block_rows, block_cols = bm * P, bn * FN
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    for nb in nl.affine_range(n // block_cols):
        n0 = nb * block_cols
        res = nl.ndarray((P, m // P, block_cols), nl.float32, buffer=nl.sbuf)
        for kb in nl.sequential_range(kt // bk):
            b = nl.ndarray((P, bk, block_cols), rhs.dtype, buffer=nl.sbuf)
            for kk in nl.affine_range(bk):
                k0 = (kb * bk + kk) * P
                nisa.dma_copy(dst=b[:, kk, :], src=rhs[k0:k0 + P, n0:n0 + block_cols])
            for mb in nl.affine_range(m // block_rows):
                m0 = mb * block_rows
                a = nl.ndarray((P, bk, block_rows), lhsT.dtype, buffer=nl.sbuf)
                for kk in nl.affine_range(bk):
                    k0 = (kb * bk + kk) * P
                    nisa.dma_copy(dst=a[:, kk, :], src=lhsT[k0:k0 + P, m0:m0 + block_rows])
                for ni in nl.affine_range(bn):
                    for mi in nl.affine_range(bm):
                        acc = nl.ndarray((P, FN), nl.float32, buffer=nl.psum)
                        for kk in nl.affine_range(bk):
                            nisa.nc_matmul(dst=acc, stationary=a[:, kk, mi * P:(mi + 1) * P],
                                           moving=b[:, kk, ni * FN:(ni + 1) * FN])
                        tile = res[:, mb * bm + mi, ni * FN:(ni + 1) * FN]
                        if kb == 0:
                            nisa.tensor_copy(dst=tile, src=acc)
                        else:
                            nisa.tensor_tensor(dst=tile, data1=tile, data2=acc, op=nl.add)
        for r in nl.affine_range(m // P):
            nisa.dma_copy(dst=out[r * P:(r + 1) * P, n0:n0 + block_cols], src=res[:, r, :])
    return out


def matmul_fp8_double_row(lhsT, rhs):
    """FP8 double-row (trn2): lhsT [256, M <= 128] and rhs [256, N <= 512] float8_e4m3 /
    e5m2, one ``nc_matmul(perf_mode="double_row")``; partition p holds k = p and k = p + 128
    (tiles [128, 2, free])."""
    k, m = lhsT.shape
    n = rhs.shape[1]
    assert k == 2 * P, f"K must be {2 * P} (two rows per partition), not {k}"
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((P, 2, m), lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((P, 2, n), rhs.dtype, buffer=nl.sbuf)
    for j in nl.static_range(2):
        nisa.dma_copy(dst=a[:, j, :], src=lhsT[j * P:(j + 1) * P, :])
        nisa.dma_copy(dst=b[:, j, :], src=rhs[j * P:(j + 1) * P, :])
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b, perf_mode="double_row")
    _drain(acc, out, 0, 0, m, n)
    return out
