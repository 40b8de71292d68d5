"""Unit tier: the no-stall cycle model's formulas and argument checks."""

import pytest

from systolica.golden import matmul_cycles, program_cycles, program_schedule, tile_latency


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


def test_schedule_hides_loads_behind_long_matmuls():
    # Loads of 4 rows hide behind 20-beat matmuls: after the first, one beat per cycle.
    schedule = program_schedule(4, 4, [(4, 20)] * 5)
    firsts = [t.first_accept for t in schedule]
    assert firsts == [4, 24, 44, 64, 84]
    assert program_cycles(4, 4, [(4, 20)] * 5) == 84 + 20 - 1 + 8 + 1


def test_schedule_waits_for_buffer_when_matmuls_are_short():
    # With N = 1 the third load must wait until matmul 0's result has left (buffer reuse).
    schedule = program_schedule(2, 2, [(2, 1)] * 3)
    assert schedule[2].load_start == schedule[0].last_result + 1


def test_schedule_rejects_k_above_rows():
    with pytest.raises(ValueError, match="K of matmul 1 is 5, more than rows = 4"):
        program_schedule(4, 4, [(4, 1), (5, 1)])
