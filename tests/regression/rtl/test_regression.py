"""Regression tier: the cocotb tests of systolica.tb.cases.tile on the generated Verilog.

Parametrised over simulator x tile size; each configuration has its own build folder
(``build/<rows>x<cols>/<simulator>``), built once and shared between pytest-xdist workers.
Both simulators run up to 8 x 8 here, the sizes the rest of CI builds anyway: a 16 x 16
per-cycle build of its own cost CI about three minutes of a worker. Larger tiles are run
through the bulk harness (the 16 x 16 fuzzer sample, timing and double-row tests, the
128 x 128 tile); ``systolica regress --rows 16 --cols 16`` runs this testbench there.
"""

import json
import subprocess
import sys

import pytest

from systolica.hdl.config import TileConfig
from systolica.sim import SIMULATORS, build
from systolica.sim.builder.runner import run_tests
from systolica.sim.waves.gtkwave import reproduce_report, tile_test_names
from systolica.tb import protocol

SIZES = [(1, 1), (2, 3), (4, 4), (8, 8)]
#: The largest tile each simulator runs here (it runs the bulk MAC test).
LARGEST = {"icarus": (8, 8), "verilator": (8, 8)}
#: BF16 MACs the bulk test checks on each simulator's largest tile: CI checks >= 100,000
#: per simulator.
BULK_MACS = 100_000
CONFIGS = [(simulator, rows, cols) for simulator in SIMULATORS for rows, cols in SIZES
           if rows * cols <= LARGEST[simulator][0] * LARGEST[simulator][1]]
#: Names of the @cocotb.test functions in tb/cases/tile.py, read from its source.
cocotb_test_names = tile_test_names


@pytest.mark.parametrize("simulator,rows,cols", CONFIGS,
                         ids=[f"{s}-{r}x{c}" for s, r, c in CONFIGS])
def test_tile_regression(simulator, rows, cols, seed, tmp_path):
    config = TileConfig(rows, cols)      # every type: the cocotb tests use them all
    tile = build(config, simulator)
    stats = tmp_path / "stats.jsonl"
    dumps = tmp_path / "coverage"
    largest = (rows, cols) == LARGEST[simulator]
    bulk = {protocol.BULK_MACS: str(BULK_MACS)} if largest else {}
    run = run_tests(tile, protocol.TILE_TESTS, tmp_path, seed=seed,
                    extra_env={protocol.STATS: str(stats), protocol.COVERAGE: str(dumps), **bulk})
    names = cocotb_test_names()
    assert len(names) >= 8
    log_tail = "\n".join(run.log.read_text().splitlines()[-40:])
    assert run.failed == 0, (f"{run.failed} of {run.tests} cocotb tests failed:\n{log_tail}\n"
                             + reproduce_report(config, simulator, seed, run.results_xml,
                                                env=bulk))
    assert run.tests == len(names), f"ran {run.tests} cocotb tests, expected {len(names)}"
    checked = [json.loads(line) for line in stats.read_text().splitlines()]
    bf16_macs = sum(entry["bf16"] for entry in checked)
    print(f"{simulator} {rows}x{cols}: {bf16_macs:,} BF16 and "
          f"{sum(entry['int8'] for entry in checked):,} INT8 MACs checked")
    assert bf16_macs >= (BULK_MACS if largest else 1)
    # Functional coverage of the regression: every checked test's commands and operands,
    # sampled in a process of its own (one database per configuration, no other test's
    # samples in it) into <build>/coverage, which make coverage merges with the fuzzer's.
    sampled = subprocess.run(
        [sys.executable, "-m", "systolica.verif.coverage", "--dumps", str(dumps),
         "--tag", f"regression-{simulator}-{rows}x{cols}-seed{seed}"],
        capture_output=True, text=True)
    assert sampled.returncode == 0, sampled.stdout + sampled.stderr
    # Every test but the error injection and the stuck tile ends in a passing check().
    assert len(list(dumps.glob("*.pkl"))) >= run.tests - 2, "a checked test wrote no dump"
