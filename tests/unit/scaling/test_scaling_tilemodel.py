"""Scaling layer: GEMM folding and the fast cycle counts against golden.timing.program_cycles."""

import itertools
import math
import random

import pytest

from systolica.golden import program_cycles
from systolica.scaling.tilemodel import (
    gemm_program,
    gemm_tile_cycles,
    periodic_program_cycles,
    scalesim_ws_cycles,
    split_gemm,
    uniform_program_cycles,
)


def test_uniform_closed_form_equals_program_cycles_on_a_grid():
    checked = 0
    for rows, cols, k, n, count in itertools.product(
            [1, 2, 3, 8], [1, 2, 5], [1, 2, 3, 8], [1, 2, 3, 9, 40], [1, 2, 3, 4, 7]):
        if k > rows:
            continue
        expected = program_cycles(rows, cols, [(k, n)] * count)
        assert uniform_program_cycles(rows, cols, k, n, count) == expected, (rows, cols, k, n,
                                                                             count)
        checked += 1
    assert checked > 500


def test_uniform_closed_form_short_matmuls_by_hand():
    # rows = cols = 4, k = 4, n = 1: L = 8. Command 0 is taken in cycle 0; load 0 takes
    # cycles 1-4, matmul 0's beat is cycle 5; loads 1 and 2 follow back to back (5-8, 9-12:
    # load 2 reuses matmul 0's buffer, free since cycle 6); matmul 2's beat at cycle 13,
    # its result at 21.
    assert program_cycles(4, 4, [(4, 1)] * 3) == 22
    assert uniform_program_cycles(4, 4, 4, 1, 3) == 22
    # 128 x 128 decode-like: N = 1 is limited by the loads, 128 cycles per matmul.
    count = 1000
    assert uniform_program_cycles(128, 128, 128, 1, count) == 1 + 256 + 128 + 1 + \
        (count - 1) * 128


def test_uniform_closed_form_long_matmuls_stream_back_to_back():
    # N = 512 >> L: one beat per cycle after the first load; the last result L cycles later.
    assert uniform_program_cycles(128, 128, 128, 512, 10) == 1 + 128 + 10 * 512 + 256


@pytest.mark.parametrize("seed", range(4))
def test_gemm_tile_cycles_equals_program_cycles_on_random_gemms(seed):
    rng = random.Random(seed)
    for _ in range(300):
        rows, cols, depth = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 16)
        k, n, folds = rng.randint(1, 50), rng.randint(1, 60), rng.randint(1, 4)
        shapes = gemm_program(rows, depth, k, n, folds)
        assert gemm_tile_cycles(rows, cols, depth, k, n, folds) == program_cycles(
            rows, cols, shapes), (rows, cols, depth, k, n, folds)


def test_gemm_program_folds_k_slabs_inside_n_chunks():
    # K = 10 on 4 rows: slabs 4, 4, 2; N = 7 with depth 5: chunks 5, 2.
    assert gemm_program(4, 5, 10, 7) == [(4, 5), (4, 5), (2, 5), (4, 2), (4, 2), (2, 2)]
    assert gemm_program(4, 5, 4, 3, folds=2) == [(4, 3), (4, 3)]


def test_periodic_program_equals_expanded_program():
    rng = random.Random(7)
    for _ in range(200):
        rows, cols = rng.randint(1, 6), rng.randint(1, 6)
        period = [(rng.randint(1, rows), rng.randint(1, 20), rng.randint(0, 3))
                  for _ in range(rng.randint(1, 4))]
        if not any(t for _, _, t in period):
            period.append((1, 1, 1))
        repeats = rng.randint(1, 5)
        shapes = [(k, n) for k, n, t in period for _ in range(t)] * repeats
        assert periodic_program_cycles(rows, cols, period, repeats) == program_cycles(
            rows, cols, shapes)


def test_huge_program_is_exact_and_fast():
    # 2^40 identical matmuls: periodic and closed form agree (program_cycles cannot run it).
    big = 1 << 40
    assert periodic_program_cycles(128, 128, [(128, 512, 1)], big) == \
        uniform_program_cycles(128, 128, 128, 512, big) == 1 + 128 + big * 512 + 256


def test_scalesim_ws_formula_by_hand():
    # 8 x 6 array, K = 17 -> 3 row folds, M = 13 -> 3 col folds, T = 20:
    # 9 folds of 2*8 + 6 + 20 - 2 = 40 cycles, minus one.
    assert scalesim_ws_cycles(8, 6, 13, 17, 20) == 9 * 40 - 1
    assert scalesim_ws_cycles(32, 32, 32, 32, 1) == 2 * 32 + 32 + 1 - 2 - 1


def test_native_overlaps_folds_that_scalesim_serialises():
    # Same array and layer: our tile hides the next stationary load behind the stream.
    native = gemm_tile_cycles(32, 32, 512, 256, 400, 4)
    compat = scalesim_ws_cycles(32, 32, 4 * 32, 256, 400)
    assert native < compat


def test_split_gemm_deals_folds_then_splits_n():
    assert split_gemm(m=1024, k=128, n=100, count=1, cols=128, units=8) == (1, 100)
    assert split_gemm(m=1024, k=128, n=100, count=3, cols=128, units=8) == (3, 100)
    # One fold over 8 tiles: N split in 8 parts of ceil(100 / 8) = 13.
    assert split_gemm(m=128, k=128, n=100, count=1, cols=128, units=8) == (1, 13)
    assert split_gemm(m=128, k=128, n=3, count=1, cols=128, units=8) == (1, 1)


@pytest.mark.parametrize("call", [
    lambda: uniform_program_cycles(4, 4, 5, 1, 1),
    lambda: uniform_program_cycles(4, 4, 1, 0, 1),
    lambda: periodic_program_cycles(4, 4, [(1, 1, 0)], 1),
    lambda: gemm_tile_cycles(4, 4, 512, 0, 1),
    lambda: scalesim_ws_cycles(4, 4, 1, 1, -1),
])
def test_bad_arguments_raise(call):
    with pytest.raises(ValueError):
        call()


def test_gpt3_sized_gemm_counts_are_consistent_with_flop():
    # A big GEMM at N = 512 chunks keeps the tile busy: cycles ~ MACs / (rows * cols).
    m, k, n = 49152, 12288, 262144
    folds = math.ceil(m / 128)
    cycles = gemm_tile_cycles(128, 128, 512, k, n, folds)
    ideal = m * k * n / (128 * 128)
    assert ideal <= cycles <= ideal * 1.001
