"""Regression tier: TF32 and FP32 matmuls on the RTL tile through the run API, both
testbenches (bulk and per-cycle) on both simulators.

A 4 x 4 tile generated with ``int8+bf16+fp32`` (32-bit operand lanes) runs FP32 x FP32,
TF32 x FP32 and TF32 x TF32 matmuls on random words and specials (NaN payloads TF32 does
not read, Inf, -0, subnormals, the tie that rounds to 2^-126) with and without FTZ, an
accumulation, BF16 and INT8 matmuls between them, transposes of 32-bit special patterns in
every position, and a READ: every word checked by the scoreboard against the golden model,
every stamp against the cycle model (four cycles per moving column with an FP32 operand),
and each result against golden ``nc_matmul`` directly.
"""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import TFLOAT32, identity, nc_matmul
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, run_matmul, run_program
from systolica.tb.stimulus import fp32_words, special_grids

CONFIG = TileConfig(4, 4, "int8+bf16+fp32")


def _program(rng):
    jobs = []
    for i, (stype, mtype, ftz) in enumerate([("fp32", "fp32", False), ("fp32", "fp32", True),
                                             ("tf32", "fp32", False), ("fp32", "tf32", True),
                                             ("tf32", "tf32", False), ("tf32", "tf32", True)]):
        k, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        jobs.append(Matmul(fp32_words(rng, (k, m), stype), fp32_words(rng, (k, 7), mtype),
                           ftz=ftz, bank=i % 4, offset=8 * (i // 4)))
        jobs.append(Matmul(rng.standard_normal((4, 4)).astype(np.float32).astype(
            ml_dtypes.bfloat16), rng.standard_normal((4, 3)).astype(np.float32).astype(
            ml_dtypes.bfloat16), bank=5))
    # K = 8 as two FP32 matmuls accumulating, the second in the lower row tile
    s, mv = fp32_words(rng, (8, 4), "fp32", 0), fp32_words(rng, (8, 5), "fp32", 0)
    jobs += [Matmul(s[:4], mv[:4], bank=6), Matmul(s[4:6], mv[4:6], bank=6, accumulate=True,
                                                   tile_position=(2, 0), tile_size=(2, 4))]
    jobs.append(Matmul(rng.integers(-128, 128, (4, 4), dtype=np.int8),
                       rng.integers(-128, 128, (4, 2), dtype=np.int8), bank=5, offset=16))
    for dtype in (np.float32, TFLOAT32):
        for bits in special_grids(32, 4, 4)[:4]:
            data = np.asarray(bits, np.uint32).view(dtype)
            jobs.append(Matmul(data, identity(4, dtype), is_transpose=True, bank=7,
                               offset=4 * (len(jobs) % 8)))
    jobs.append(Read(5, bank=6))
    return jobs


@pytest.mark.parametrize(("driver", "stalls"), [("bulk", 0.0), ("cycle", 0.2)])
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_fp32_and_tf32_programs_are_bit_exact_and_on_time(simulator, driver, stalls):
    rng = np.random.default_rng(32)
    jobs = _program(rng)
    result = run_program(jobs, config=CONFIG, simulator=simulator, driver=driver,
                         idle=stalls, backpressure=stalls)
    # stamps equal the cycle model's recurrence when nothing stalls
    assert result.mismatches == 0 and (stalls or result.model_agrees())
    for job, psum in zip(jobs[:-1], result.psums, strict=False):
        if job.accumulate:
            continue
        want = nc_matmul(job.stationary, job.moving, rows=4, ftz=job.ftz,
                         is_transpose=job.is_transpose, tile_position=job.tile_position,
                         tile_size=job.tile_size)
        np.testing.assert_array_equal(psum.view(np.uint32 if psum.itemsize == 4 else
                                                np.uint16),
                                      want.view(np.uint32 if want.itemsize == 4 else
                                                np.uint16))


def test_run_matmul_takes_fp32_and_a_narrow_tile_refuses_it():
    rng = np.random.default_rng(5)
    s, mv = fp32_words(rng, (3, 2), "fp32"), fp32_words(rng, (3, 4), "tf32")
    out, cycles = run_matmul(s, mv, config=CONFIG)
    np.testing.assert_array_equal(out.view(np.uint32), nc_matmul(s, mv, rows=4).view(np.uint32))
    assert cycles == 4 * 4 + CONFIG.rows + CONFIG.cols     # four passes per moving column
    with pytest.raises(ValueError, match="^the tile was generated for types all, not for a "
                       r"fp32 x tf32 matmul; allowed: .*'all\+fp32' every one"):
        run_matmul(s, mv, config=TileConfig(4, 4))
    # without a config the run API picks the smallest set that takes the pair
    assert run_matmul(s[:, :1], mv[:, :1], rows=4, cols=4)[0].dtype == np.float32
