"""2-D transpose of an HBM tensor through TensorE (``nc_transpose``), 128 x 128 tiles.
NKI 0.6 style."""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128


def transpose_2d(x):
    """``out[C, R] = x[R, C].T`` for R, C multiples of 128 (any dtype TensorE moves: the
    bits are copied unchanged)."""
    r, c = x.shape
    assert r % P == 0 and c % P == 0, f"R and C must be multiples of {P}; got {x.shape}"
    out = nl.ndarray((c, r), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(r // P):
        for j in nl.affine_range(c // P):
            tile = nl.ndarray((P, P), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[i * P:(i + 1) * P, j * P:(j + 1) * P])
            flipped = nl.ndarray((P, P), x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=tile)
            back = nl.ndarray((P, P), x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=back, src=flipped)
            nisa.dma_copy(dst=out[j * P:(j + 1) * P, i * P:(i + 1) * P], src=back)
    return out
