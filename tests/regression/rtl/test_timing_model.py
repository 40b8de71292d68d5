"""Regression tier: the cycle model predicts the RTL's cycle stamps exactly (no stalls), and
back-to-back matmuls reach the throughput the model promises."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import program_cycles, program_schedule
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, run_program


#: 3 x 4 and 4 x 3 are the all-types tiles of the fuzzer's CI sample (and of the run_matmul
#: tests), not INT8-only builds of their own; 1 x 1 has no all-types bulk build in CI.
@pytest.mark.parametrize("simulator,rows,cols,types", [("icarus", 3, 4, "all"),
                                                       ("verilator", 4, 3, "all"),
                                                       ("verilator", 1, 1, "int8")])
def test_schedule_matches_rtl_stamps(simulator, rows, cols, types, seed):
    config = TileConfig(rows, cols, types)
    rng = np.random.default_rng([seed, rows, cols])
    shapes = [(int(rng.integers(1, rows + 1)), int(rng.integers(1, 3 * (rows + cols))))
              for _ in range(9)]
    jobs = [(rng.integers(-128, 128, (k, cols), dtype=np.int8),
             rng.integers(-128, 128, (k, n), dtype=np.int8)) for k, n in shapes]
    result = run_program(jobs, config=config, simulator=simulator)
    schedule = program_schedule(rows, cols, shapes)
    assert result.mismatches == 0
    assert result.first_accept == [t.first_issue for t in schedule], shapes
    assert result.last_result == [t.last_result for t in schedule], shapes
    assert result.cycles == program_cycles(rows, cols, shapes)
    assert [t.accept for t in result.stamps] == [t.accept for t in schedule]


@pytest.mark.parametrize("driver", ["bulk", "cycle"])
def test_command_stamps_with_reads_and_banks_match_the_model(driver, seed):
    rng = np.random.default_rng([seed, 4])
    jobs = []
    for i in range(8):
        k, n = int(rng.integers(1, 5)), int(rng.integers(1, 20))
        jobs.append(Matmul(rng.integers(-128, 128, (k, 3), dtype=np.int8),
                           rng.integers(-128, 128, (k, n), dtype=np.int8),
                           bank=i % 3, offset=int(rng.integers(0, 400))))
        if i % 3 == 2:
            jobs.append(Read(n, bank=jobs[-1].bank, offset=jobs[-1].offset))
    # M = 3 on the 4 x 4 all-types tile CI builds bare and in the bulk harness anyway (a
    # 4 x 3 INT8 tile was two builds of its own).
    result = run_program(jobs, config=TileConfig(4, 4), simulator="verilator", driver=driver)
    assert result.mismatches == 0
    assert [t.accept for t in result.stamps] == [t.accept for t in result.predicted]
    assert [t.results for t in result.stamps] == [t.results for t in result.predicted]
    assert [t.issues for t in result.stamps if t.issues] == \
        [t.issues for t, j in zip(result.predicted, jobs, strict=True) if isinstance(j, Matmul)]


def test_back_to_back_bf16_n512_on_16x16_reaches_97_percent_of_peak():
    rng = np.random.default_rng(512)
    jobs = [Matmul(rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16),
                   rng.standard_normal((16, 512)).astype(ml_dtypes.bfloat16))
            for _ in range(8)]
    # The all-types 16 x 16 tile the fuzzer sample and the double-row test build too.
    result = run_program(jobs, config=TileConfig(16, 16), simulator="verilator")
    assert result.mismatches == 0
    assert result.model_agrees()                        # the model predicts it exactly
    utilization = 8 * 512 / result.cycles              # MACs/cycle over rows * cols
    assert result.cycles == program_cycles(16, 16, [(16, 512)] * 8)
    assert utilization >= 0.97, f"{utilization:.2%} of peak"
