"""Unit tier: the GEMM cut (K-slabs, M-folds, N-chunks) and the PSUM accumulate rule, each
defined once in golden/ and used by the RTL programs and the scaling layer."""

import itertools

import numpy as np
import pytest

from systolica.golden import (
    fold,
    gemm_folds,
    gemm_matmul_count,
    nc_matmul,
    psum_accumulate,
)


@pytest.mark.parametrize("size,step", [(1, 1), (7, 3), (9, 3), (512, 512), (513, 512),
                                       (5, 8)])
def test_fold_covers_the_range_once_in_order(size, step):
    ranges = fold(size, step)
    covered = [i for start, stop in ranges for i in range(start, stop)]
    assert covered == list(range(size))
    assert all(0 < stop - start <= step for start, stop in ranges)
    assert len(ranges) == -(-size // step)


def test_matmul_count_is_the_product_of_the_cuts():
    for k, m, n, rows, cols, depth, mode in itertools.product(
            (1, 5, 16, 33), (1, 4, 9), (1, 7, 600), (4, 8), (3, 4), (512, 5),
            (None, "double_row")):
        slabs, folds, chunks = gemm_folds(k, m, n, rows, cols, depth, mode)
        assert all(stop - start <= (2 * rows if mode else rows) for start, stop in slabs)
        assert len(slabs) * len(folds) * len(chunks) == \
            gemm_matmul_count(k, m, n, rows, cols, depth, mode)


@pytest.mark.parametrize("args,message", [
    ((0, 1, 1, 4, 4), "K must be a positive integer, not 0"),
    ((1, 1, 1, 4, True), "cols must be a positive integer, not True"),
])
def test_cut_refuses_bad_sizes(args, message):
    with pytest.raises(ValueError, match=message):
        gemm_folds(*args)
    with pytest.raises(ValueError, match=message):
        gemm_matmul_count(*args)


def test_cut_refuses_an_unknown_perf_mode():
    with pytest.raises(ValueError, match="perf_mode"):
        gemm_folds(4, 4, 4, 4, 4, perf_mode="quad_row")


def test_psum_accumulate_is_what_nc_matmul_accumulate_computes():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (4, 3), dtype=np.int8)
    b = rng.integers(-128, 128, (4, 5), dtype=np.int8)
    psum = np.full((3, 5), 2**31 - 100, dtype=np.int32)       # wraps
    assert np.array_equal(psum_accumulate(psum, nc_matmul(a, b)),
                          nc_matmul(a, b, psum=psum, accumulate=True))
    wide = psum.astype(np.int64) + a.astype(np.int64).T @ b.astype(np.int64)
    assert np.array_equal(psum_accumulate(psum, nc_matmul(a, b)),
                          ((wide + 2**31) % 2**32 - 2**31).astype(np.int32))


def test_psum_accumulate_refuses_mixed_dtypes():
    with pytest.raises(TypeError, match=r"both be int32 \(INT8 matmuls\) or both float32"):
        psum_accumulate(np.zeros(2, np.int32), np.zeros(2, np.float32))
