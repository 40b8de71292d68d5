"""Regression tier: the cocotb tests of systolica.tb.cases.tile on the generated Verilog.

Parametrised over simulator x tile size; each configuration has its own build folder
(``build/<rows>x<cols>/<simulator>``), built once and shared between pytest-xdist workers.
"""

import json
import subprocess
import sys

import pytest

from systolica.sim import SIMULATORS, build
from systolica.sim.build.runner import run_tests
from systolica.sim.waves.gtkwave import reproduce_report, tile_test_names

SIZES = [(1, 1), (2, 3), (4, 4), (8, 8), (16, 16)]
#: BF16 MACs the bulk test checks on the largest tile: CI checks >= 100,000 per simulator.
BULK_MACS = {(16, 16): 100_000}
#: Names of the @cocotb.test functions in tb/cases/tile.py, read from its source.
cocotb_test_names = tile_test_names


@pytest.mark.parametrize("rows,cols", SIZES, ids=[f"{r}x{c}" for r, c in SIZES])
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_tile_regression(simulator, rows, cols, seed, tmp_path):
    tile = build(rows, cols, simulator)
    stats = tmp_path / "stats.jsonl"
    dumps = tmp_path / "coverage"
    bulk = {"SYSTOLICA_BULK_MACS": str(BULK_MACS[rows, cols])} if (rows, cols) in BULK_MACS else {}
    run = run_tests(tile, "systolica.tb.cases.tile", tmp_path, seed=seed,
                    extra_env={"SYSTOLICA_STATS": str(stats),
                               "SYSTOLICA_COVERAGE": str(dumps), **bulk})
    names = cocotb_test_names()
    assert len(names) >= 8
    log_tail = "\n".join(run.log.read_text().splitlines()[-40:])
    assert run.failed == 0, (f"{run.failed} of {run.tests} cocotb tests failed:\n{log_tail}\n"
                             + reproduce_report(rows, cols, simulator, seed, run.results_xml,
                                                env=bulk))
    assert run.tests == len(names), f"ran {run.tests} cocotb tests, expected {len(names)}"
    checked = [json.loads(line) for line in stats.read_text().splitlines()]
    bf16_macs = sum(entry["bf16"] for entry in checked)
    print(f"{simulator} {rows}x{cols}: {bf16_macs:,} BF16 and "
          f"{sum(entry['int8'] for entry in checked):,} INT8 MACs checked")
    assert bf16_macs >= BULK_MACS.get((rows, cols), 1)
    # Functional coverage of the regression: every checked test's commands and operands,
    # sampled in a process of its own (one database per configuration, no other test's
    # samples in it) into <build>/coverage, which make coverage merges with the fuzzer's.
    sampled = subprocess.run(
        [sys.executable, "-m", "systolica.sim.apps.verif.coverage", "--dumps", str(dumps),
         "--tag", f"regression-{simulator}-{rows}x{cols}-seed{seed}"],
        capture_output=True, text=True)
    assert sampled.returncode == 0, sampled.stdout + sampled.stderr
    # Every test but the error injection and the stuck tile ends in a passing check().
    assert len(list(dumps.glob("*.pkl"))) >= run.tests - 2, "a checked test wrote no dump"
