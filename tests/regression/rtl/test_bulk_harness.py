"""Regression tier: the bulk-stimulus harness agrees with the per-cycle testbench, catches
wrong results, and gives up on a stuck tile with a message."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import program_schedule
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, SimulationError, build, run_matmul, run_program
from systolica.tb import bulk
from systolica.tb.bulk import BulkProgram
from systolica.tb.fault_injection import CorruptFirstMatmul
from systolica.tb.harness import run_harness

#: The tests that run both INT8 and BF16 use the 4 x 4 all-types tile: CI builds it anyway
#: for both simulators, bare (the cocotb regression) and in the bulk harness (the fuzzer's
#: sample, the transpose tests). A 3 x 4 and a 4 x 4 INT8 + BF16 tile were four builds of
#: their own.
TILE_4X4 = TileConfig(4, 4)


def mixed_program(rng, rows, cols):
    jobs = []
    for i in range(6):
        k = int(rng.integers(1, rows + 1))
        n = int(rng.integers(1, 2 * (rows + cols)))
        if i % 2:
            s = rng.integers(-128, 128, (k, cols), dtype=np.int8)
            m = rng.integers(-128, 128, (k, n), dtype=np.int8)
        else:
            s = rng.standard_normal((k, cols)).astype(ml_dtypes.bfloat16)
            m = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
        jobs.append(Matmul(s, m, accumulate=i == 3 and jobs[-1].moving.shape[1] >= n))
    return jobs


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_bulk_and_cycle_drivers_agree(simulator, seed):
    rows, cols = TILE_4X4.rows, TILE_4X4.cols
    jobs = mixed_program(np.random.default_rng(seed), rows, cols)
    bulk = run_program(jobs, config=TILE_4X4, simulator=simulator, driver="bulk")
    cycle = run_program(jobs, config=TILE_4X4, simulator=simulator, driver="cycle")
    assert bulk.mismatches == cycle.mismatches == 0
    for a, b in zip(bulk.psums, cycle.psums, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    schedule = program_schedule(rows, cols, [(j.moving.shape[0], j.moving.shape[1])
                                             for j in jobs])
    assert bulk.first_accept == cycle.first_accept == [t.first_issue for t in schedule]
    assert bulk.last_result == cycle.last_result == [t.last_result for t in schedule]


def test_bulk_under_idle_and_backpressure(seed):
    jobs = mixed_program(np.random.default_rng(seed + 1), 4, 4)
    result = run_program(jobs, config=TILE_4X4, simulator="verilator", idle=0.3,
                         backpressure=0.4, seed=seed)
    assert result.mismatches == 0
    no_stall = program_schedule(4, 4, [j.moving.shape for j in jobs])[-1].last_result + 1
    assert result.cycles > no_stall   # the stalls really happened


def test_bulk_catches_a_corrupted_golden_word(monkeypatch):
    monkeypatch.setattr(bulk, "TileModel", CorruptFirstMatmul)
    ones = np.ones((2, 2), np.int8)
    result = run_program([(ones, ones)], rows=2, cols=2, simulator="icarus")
    assert result.mismatches == 1
    with pytest.raises(SimulationError, match="differs from the golden model in 1 PSUM words"):
        run_matmul(ones, ones, rows=2, cols=2, simulator="icarus")


def test_bulk_stuck_tile_times_out_with_message(tmp_path):
    config = TileConfig(2, 2, "int8")
    program = BulkProgram(config)
    ones = np.ones((2, 2), np.int8)
    program.submit(ones, ones)
    program.drop_stationary()              # the matmul's stationary never comes
    tile = build(config, "icarus", harness_depth=program.depth)
    run = run_harness(program, tile, tmp_path, max_cycles=100)
    assert run.run.failed == 1 and not run.checked
    assert run.missing_beats == run.expected_beats == 2      # nothing counts as checked
    assert run.errors[0].startswith("tile stuck: harness not done after 100 cycles")
    assert "moving beats sent 0" in run.errors[0]
    assert run.errors[0].endswith(f"; see {run.run.log}")


def test_blocked_hierarchical_verilator_build_gives_the_same_results(monkeypatch, tmp_path):
    """Large tiles are verilated as a grid of sub-array blocks, each a Verilator
    hierarchical block; prove the flow on a small tile (forced with SYSTOLICA_BLOCK=2)."""
    monkeypatch.setenv("SYSTOLICA_BLOCK", "2")
    jobs = mixed_program(np.random.default_rng(7), 4, 4)
    result = run_program(jobs, rows=4, cols=4, simulator="verilator", build_root=tmp_path)
    assert result.mismatches == 0
    assert (result.build.directory / "Vsystolica_block").is_dir()   # the block was built
    # Verilated once: under a parallel make, Verilator's hierarchical makefile ran the
    # block's verilation twice at once (hierarchical_makeflags), and a CI build failed.
    log = (result.build.directory / "build.log").read_text()
    assert log.count("Vsystolica_block__hierMkArgs.f") == 1
    assert result.model_agrees()
    schedule = program_schedule(4, 4, [j.moving.shape for j in jobs])
    assert result.last_result == [t.last_result for t in schedule]


def test_progress_reports_arrive_while_the_simulator_runs(seed):
    rng = np.random.default_rng([seed, 9])
    jobs = [Matmul(rng.integers(-128, 128, (4, 4), dtype=np.int8),
                   rng.integers(-128, 128, (4, 300), dtype=np.int8)) for _ in range(8)]
    reports = []
    result = run_program(jobs, rows=4, cols=4, simulator="icarus",
                         progress=lambda *report: reports.append(report))
    assert result.mismatches == 0
    total = 8 * 300
    assert reports, "no progress report during a run of several seconds"
    assert all(t == total and 0 <= done <= total and 0 < cycle <= result.cycles + 8
               for done, t, cycle in reports)
    assert [r[0] for r in reports] == sorted(r[0] for r in reports)
