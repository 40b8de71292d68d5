"""Regression tier: row and column tiles on the RTL tile through the run API, on both
simulators.

A matmul in every tile of the 4 x 4 tile (each allowed size at each position; INT8 and BF16
alternating), then K = 4 accumulated over the two row tiles and a region filled by the four
quarter column tiles, read back: every word by the scoreboard against the golden model,
every stamp against the cycle model, and the tiled results against golden ``nc_matmul``
with the same tile. The tile is the all-types 4 x 4 one the fuzzer's CI sample builds.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import nc_matmul, tile_sizes
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, run_matmul, run_program

CONFIG = TileConfig(4, 4)


def _operands(rng, bf16, k, m, n):
    if bf16:
        return (rng.standard_normal((k, m)).astype(np.float32).astype(ml_dtypes.bfloat16),
                rng.standard_normal((k, n)).astype(np.float32).astype(ml_dtypes.bfloat16))
    return (rng.integers(-128, 128, (k, m)).astype(np.int8),
            rng.integers(-128, 128, (k, n)).astype(np.int8))


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_every_tile_and_accumulation_across_tiles(simulator):
    rng = np.random.default_rng(25)
    jobs = []
    tiles = [((r, c), (rs, cs)) for rs, cs in itertools.product(tile_sizes(4), tile_sizes(4))
             for r in range(0, 4, rs) for c in range(0, 4, cs)]
    for i, (position, size) in enumerate(tiles):
        k, m = int(rng.integers(1, size[0] + 1)), int(rng.integers(1, size[1] + 1))
        stationary, moving = _operands(rng, i % 2, k, m, 3)
        jobs.append(Matmul(stationary, moving, bank=i % 8, offset=3 * (i // 8),
                           tile_position=position, tile_size=size))
    stationary, moving = _operands(rng, True, 4, 4, 5)
    jobs += [Matmul(stationary[:2], moving[:2], bank=7, offset=100, tile_position=(0, 0),
                    tile_size=(2, 4)),
             Matmul(stationary[2:], moving[2:], bank=7, offset=100, accumulate=True,
                    tile_position=(2, 0), tile_size=(2, 4))]
    quarters = [_operands(rng, False, 4, 1, 6) for _ in range(4)]
    jobs += [Matmul(s, mv, bank=6, offset=200, tile_position=(0, q), tile_size=(4, 1))
             for q, (s, mv) in enumerate(quarters)]
    jobs += [Read(5, bank=7, offset=100), Read(6, bank=6, offset=200)]
    result = run_program(jobs, config=CONFIG, simulator=simulator)
    assert result.mismatches == 0 and result.model_agrees()
    for job, psum in zip(jobs[:len(tiles)], result.psums, strict=False):
        want = nc_matmul(job.stationary, job.moving, rows=4, tile_position=job.tile_position,
                         tile_size=job.tile_size)
        np.testing.assert_array_equal(psum, want)
    # The two row tiles' sum is the K = 4 product (nc_matmul's chain, PSUM add between).
    whole = nc_matmul(stationary[:2], moving[:2], rows=4)
    np.testing.assert_array_equal(result.psums[-2][:4], nc_matmul(
        stationary[2:], moving[2:], rows=4, psum=whole, accumulate=True))
    np.testing.assert_array_equal(result.psums[-1].T, np.concatenate(
        [nc_matmul(s, mv, rows=4) for s, mv in quarters]).T)


def test_run_matmul_takes_a_tile_and_refuses_a_bad_one():
    rng = np.random.default_rng(3)
    stationary, moving = _operands(rng, False, 2, 2, 4)
    out, cycles = run_matmul(stationary, moving, config=CONFIG, tile_position=(2, 2),
                             tile_size=(2, 2))
    np.testing.assert_array_equal(out, nc_matmul(stationary, moving, rows=4))
    assert cycles == 4 + CONFIG.rows + CONFIG.cols
    with pytest.raises(ValueError, match="^tile start row must be a multiple"):
        run_matmul(stationary, moving, config=CONFIG, tile_position=(1, 0), tile_size=(2, 2))
    with pytest.raises(ValueError, match="^K = 2 must be between 1 and 1"):
        run_matmul(stationary, moving, config=CONFIG, tile_position=(0, 0), tile_size=(1, 4))


def test_both_testbenches_load_lower_row_tiles_behind_their_buffer():
    """Loads into lower row tiles right behind the matmuls that used their buffer, on the
    bulk harness and on the per-cycle driver (tb.tile_tb): every word, and every stamp
    against the cycle model (run_program predicts unstalled runs; the fuzz sample,
    tests/regression/verif/test_verif_fuzz.py, checks tiles under idle and backpressure
    against the stepped model)."""
    rng = np.random.default_rng(11)
    jobs = []
    for i, (position, size) in enumerate([((0, 0), (4, 4)), ((0, 0), (4, 4)),
                                          ((3, 0), (1, 4)), ((2, 2), (2, 2)),
                                          ((3, 1), (1, 1)), ((0, 0), (2, 4))]):
        stationary, moving = _operands(rng, i % 2, size[0], size[1], 2 + i % 3)
        jobs.append(Matmul(stationary, moving, bank=i, tile_position=position,
                           tile_size=size))
    for driver in ("bulk", "cycle"):
        result = run_program(jobs, config=CONFIG, simulator="verilator", driver=driver)
        assert result.mismatches == 0 and result.model_agrees(), driver
    # The wait binds: the row-3 load starts 3 cycles after the cycle after job 0's last beat.
    assert result.predicted[2].loads[0] == result.predicted[0].last_issue + 1 + 3
