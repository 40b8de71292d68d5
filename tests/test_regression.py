"""Regression tier: the cocotb tests of systolica.tb.test_tile on the generated Verilog.

Parametrised over simulator x tile size; each configuration has its own build folder
(``build/<rows>x<cols>/<simulator>``), built once and shared between pytest-xdist workers.
"""

import ast
import json
from pathlib import Path

import pytest

from systolica.sim import SIMULATORS, build
from systolica.sim.runner import run_tests

SIZES = [(1, 1), (2, 3), (4, 4), (8, 8), (16, 16)]
#: BF16 MACs the bulk test checks on the largest tile: CI checks >= 100,000 per simulator.
BULK_MACS = {(16, 16): 100_000}
TB_MODULE = Path(__file__).resolve().parent.parent / "tb" / "test_tile.py"


def cocotb_test_names():
    """Names of the @cocotb.test functions in tb/test_tile.py, read from its source."""
    tree = ast.parse(TB_MODULE.read_text())
    return [node.name for node in tree.body if isinstance(node, ast.AsyncFunctionDef)
            and any("cocotb.test" in ast.unparse(d) for d in node.decorator_list)]


@pytest.mark.parametrize("rows,cols", SIZES, ids=[f"{r}x{c}" for r, c in SIZES])
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_tile_regression(simulator, rows, cols, seed, tmp_path):
    tile = build(rows, cols, simulator)
    stats = tmp_path / "stats.jsonl"
    run = run_tests(tile, "systolica.tb.test_tile", tmp_path, seed=seed,
                    extra_env={"SYSTOLICA_STATS": str(stats),
                               "SYSTOLICA_BULK_MACS": str(BULK_MACS.get((rows, cols), 0))})
    names = cocotb_test_names()
    assert len(names) >= 8
    log_tail = "\n".join(run.log.read_text().splitlines()[-40:])
    assert run.failed == 0, f"{run.failed} of {run.tests} cocotb tests failed:\n{log_tail}"
    assert run.tests == len(names), f"ran {run.tests} cocotb tests, expected {len(names)}"
    checked = [json.loads(line) for line in stats.read_text().splitlines()]
    bf16_macs = sum(entry["bf16"] for entry in checked)
    print(f"{simulator} {rows}x{cols}: {bf16_macs:,} BF16 and "
          f"{sum(entry['int8'] for entry in checked):,} INT8 MACs checked")
    assert bf16_macs >= BULK_MACS.get((rows, cols), 1)
