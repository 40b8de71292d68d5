"""How a GEMM larger than the tile is cut, the rule the NKI tensor-engine code follows and
every layer of this project uses (defined here once).

A problem ``stationary[K, M] x moving[K, N] -> out[M, N]`` runs as matmuls of

- **K-slabs** of at most ``rows`` partition rows (``2 * rows`` in FP8 double-row mode,
  :func:`~systolica.golden.max_k`): the first slab of an output block overwrites PSUM, every
  later one accumulates into it;
- **M-folds** of at most ``cols`` stationary columns (the stationary free size);
- **N-chunks** of at most ``psum_depth`` moving columns (one PSUM entry per column; 512 on the
  tile, AWS Neuron documentation, "NeuronCore-v2 architecture", PSUM).

Users: :func:`systolica.sim.api.tiling.plan` (the RTL programs),
:func:`systolica.scaling.tilemodel.gemm_program` and the scaling layer's cycle counts.
"""

import math

from .command import PSUM_ENTRIES, check_positive
from .formats import check_perf_mode, max_k


def fold(size, step):
    """``[0, size)`` cut into consecutive ranges of at most ``step``: a tuple of
    ``(start, stop)`` pairs, ``ceil(size / step)`` of them.

    Raises
    ------
    ValueError
        If ``size`` or ``step`` is not a positive integer.
    """
    size, step = check_positive("size", size), check_positive("step", step)
    return tuple((start, min(size, start + step)) for start in range(0, size, step))


def gemm_folds(k, m, n, rows, cols, psum_depth=PSUM_ENTRIES, perf_mode=None):
    """The K-slabs, M-folds and N-chunks of a ``[K, M] x [K, N]`` problem on a
    ``rows x cols`` tile: a tuple ``(k_slabs, m_folds, n_chunks)`` of :func:`fold` ranges.

    The problem runs ``len(k_slabs) * len(m_folds) * len(n_chunks)`` matmuls.

    Raises
    ------
    ValueError
        If a size is not a positive integer, or ``perf_mode`` is not None or
        ``"double_row"``.
    """
    for name, value in (("K", k), ("M", m), ("N", n), ("rows", rows), ("cols", cols),
                        ("psum_depth", psum_depth)):
        check_positive(name, value)
    check_perf_mode(perf_mode)
    return (fold(k, max_k(rows, perf_mode)), fold(m, cols), fold(n, psum_depth))


def gemm_matmul_count(k, m, n, rows, cols, psum_depth=PSUM_ENTRIES, perf_mode=None):
    """Matmuls of :func:`gemm_folds`' cut (int); the same errors."""
    return math.prod(len(cut) for cut in gemm_folds(k, m, n, rows, cols, psum_depth,
                                                    perf_mode))
