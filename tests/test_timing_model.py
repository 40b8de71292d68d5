"""Regression tier: the timing model predicts the RTL's cycle stamps exactly (no stalls)."""

import numpy as np
import pytest

from systolica.golden import program_cycles, program_schedule
from systolica.sim import run_program


@pytest.mark.parametrize("simulator,rows,cols", [("icarus", 3, 4), ("verilator", 4, 3),
                                                 ("verilator", 1, 1)])
def test_schedule_matches_rtl_stamps(simulator, rows, cols, seed):
    rng = np.random.default_rng([seed, rows, cols])
    shapes = [(int(rng.integers(1, rows + 1)), int(rng.integers(1, 3 * (rows + cols))))
              for _ in range(9)]
    jobs = [(rng.integers(-128, 128, (k, cols), dtype=np.int8),
             rng.integers(-128, 128, (k, n), dtype=np.int8)) for k, n in shapes]
    result = run_program(jobs, rows=rows, cols=cols, simulator=simulator)
    schedule = program_schedule(rows, cols, shapes)
    assert result.mismatches == 0
    assert result.first_accept == [t.first_accept for t in schedule], shapes
    assert result.last_result == [t.last_result for t in schedule], shapes
    assert result.cycles == program_cycles(rows, cols, shapes)
