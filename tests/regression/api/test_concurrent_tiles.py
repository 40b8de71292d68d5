"""Regression tier: matmuls in tiles that share no PE row or column run at once on the RTL
(docs/numerics.md, tiles choices 9 and 16), through the Python API on Verilator and Icarus:
every PSUM word against the golden model, every stamp against the cycle model, with and
without stalls, and the issue's throughput check on a 16 x 16 tile."""

import numpy as np
import pytest

from systolica.golden import tiled_program_cycles
from systolica.golden.timing import TileOp
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, run_program


def _diagonal(rng, size, count, k, n, dtype=np.int8):
    """``count`` matmuls of K = ``k``, M = ``size``, N = ``n`` in the ``size x size`` tiles
    of the diagonal and its neighbours, each tile sharing no lane with the previous three."""
    jobs = []
    for j in range(count):
        r, c = j % 4, (j % 4 + j // 4) % 4
        s = rng.integers(-128, 128, (k, size)).astype(dtype)
        v = rng.integers(-128, 128, (k, n)).astype(dtype)
        jobs.append(Matmul(s, v, offset=(j * n) % 256, tile_position=(r * size, c * size),
                           tile_size=(size, size)))
    return jobs


def test_sixteen_quarter_tiles_reach_3_5x_the_untiled_rate():
    """16 x 16 tile, 16 back-to-back K = 4 matmuls in 4 x 4 tiles, N = 512 (issue 25):
    at least 3.5x the MACs per cycle of the same matmuls over the whole array, measured on
    the RTL (Verilator); both runs bit-exact and stamp-exact."""
    rng = np.random.default_rng(25)
    config = TileConfig(16, 16, "int8")
    tiled = _diagonal(rng, 4, 16, 4, 512)
    whole = [Matmul(j.stationary, j.moving, offset=j.offset) for j in tiled]
    runs = {}
    for name, jobs in (("tiled", tiled), ("whole", whole)):
        result = run_program(jobs, config=config, simulator="verilator")
        assert result.mismatches == 0 and result.model_agrees(), name
        runs[name] = result.cycles
    assert runs["whole"] / runs["tiled"] >= 3.5, runs
    ops = [TileOp(k=4, n=512, tile_position=j.tile_position, tile_size=j.tile_size)
           for j in tiled]
    # The measured program (from reset to the last result) against the model's program.
    assert runs["tiled"] == tiled_program_cycles(16, 16, ops), runs


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_concurrent_tiles_under_stalls_keep_every_word(simulator, seed):
    """BF16 and INT8 matmuls in every tile size, consecutive ones often lane-disjoint, then
    READs of their regions: every word, with random idle cycles and backpressure and
    without (then every stamp against the cycle model too)."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    jobs = []
    sizes = [(8, 8), (8, 4), (4, 8), (4, 4), (4, 2), (2, 4), (2, 2), (8, 2), (2, 8)]
    for j in range(24):
        rs, cs = sizes[rng.integers(len(sizes))] if j % 3 else (2, 2)
        position = (int(rng.integers(8 // rs)) * rs, int(rng.integers(8 // cs)) * cs)
        k, m, n = int(rng.integers(1, rs + 1)), int(rng.integers(1, cs + 1)), int(
            rng.integers(1, 9))
        if rng.random() < 0.5:
            s = rng.integers(-128, 128, (k, m)).astype(np.int8)
            v = rng.integers(-128, 128, (k, n)).astype(np.int8)
        else:
            s = rng.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
            v = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
        jobs.append(Matmul(s, v, bank=j % 8, offset=8 * (j // 8), tile_position=position,
                           tile_size=(rs, cs)))
    jobs += [Read(n=24, bank=b) for b in range(8)]
    result = run_program(jobs, config=TileConfig(8, 8, "int8+bf16"), simulator=simulator,
                         idle=0.3, backpressure=0.3, seed=seed)
    assert result.mismatches == 0
    calm = run_program(jobs, config=TileConfig(8, 8, "int8+bf16"), simulator=simulator)
    assert calm.mismatches == 0 and calm.model_agrees()
