"""Regression tier: the cocotb tests of systolica.tb.test_tile on the generated Verilog.

Parametrised over simulator x tile size; each configuration has its own build folder
(``build/<rows>x<cols>/<simulator>``), built once and shared between pytest-xdist workers.
"""

import ast
from pathlib import Path

import pytest

from systolica.sim import SIMULATORS, build
from systolica.sim.runner import run_tests

SIZES = [(1, 1), (2, 3), (4, 4), (8, 8), (16, 16)]
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
    run = run_tests(tile, "systolica.tb.test_tile", tmp_path, seed=seed)
    names = cocotb_test_names()
    assert len(names) >= 8
    log_tail = "\n".join(run.log.read_text().splitlines()[-40:])
    assert run.failed == 0, f"{run.failed} of {run.tests} cocotb tests failed:\n{log_tail}"
    assert run.tests == len(names), f"ran {run.tests} cocotb tests, expected {len(names)}"
