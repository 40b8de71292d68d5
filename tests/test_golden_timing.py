"""Unit tier: the no-stall cycle model's formulas and argument checks."""

import pytest

from systolica.golden import matmul_cycles, tile_latency


def test_latency_is_rows_plus_cols():
    assert tile_latency(1, 1) == 2
    assert tile_latency(128, 128) == 256
    assert tile_latency(2, 3) == 5


def test_isolated_matmul_cycles():
    assert matmul_cycles(8, 8, 1) == 17
    assert matmul_cycles(4, 5, 100) == 109


@pytest.mark.parametrize("args", [(0, 1), (1, -2), (1.5, 2), (True, 1)])
def test_bad_sizes_rejected(args):
    with pytest.raises(ValueError, match="must be a positive integer"):
        tile_latency(*args)


def test_bad_n_rejected():
    with pytest.raises(ValueError, match="n must be a positive integer"):
        matmul_cycles(2, 2, 0)
