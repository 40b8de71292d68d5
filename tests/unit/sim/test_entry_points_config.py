"""Unit tier: every entry point (the run API's functions and the CLI commands) takes one
:class:`~systolica.hdl.config.TileConfig`, and a bad tile size fails in TileConfig, with its
one-line message, before anything is built: the size is validated in exactly one place."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from systolica import nki
from systolica.cli import main as systolica
from systolica.hdl.config import TileConfig
from systolica.nki.kernels import matmul
from systolica.sim import run_matmul, run_program
from systolica.sim.api.tiling import run_tiled, run_tiled_program
from systolica.verif import fuzz
from systolica.workloads.minilm.run import run_model

#: The NKI kernels shipped with the package (``systolica nki run`` loads them by path).
KERNELS = Path(matmul.__file__).parent

S = np.ones((2, 2), np.int8)
B = np.ones((2, 2), ml_dtypes.bfloat16)
#: A kernel operand (128 partitions).
A = np.ones((128, 2), ml_dtypes.bfloat16)

#: Each API entry point called with ``rows`` (and the size's other parameters fine).
API = {
    "run_matmul": lambda rows: run_matmul(S, S, rows=rows, cols=2),
    "run_matmul bf16": lambda rows: run_matmul(B, B, rows=rows, cols=2),
    "run_program": lambda rows: run_program([(S, S)], rows=rows, cols=2),
    "run_tiled": lambda rows: run_tiled(S, S, rows=rows, cols=2),
    "run_tiled_program": lambda rows: run_tiled_program([(S, S)], rows=rows, cols=2),
    "run_model": lambda rows: run_model(rows=rows, cols=8, rtl_folds=0),
    "nki.run rtl": lambda rows: nki.run(matmul.matmul_single_tile, A, A,
                                        tensor_engine="rtl", rows=rows, cols=2),
    "fuzz": lambda rows: fuzz.fuzz(1, 1, sizes=((rows, 4),)),
}

#: Each CLI command (``systolica ...``) given a bad size.
CLI = {
    "sim random": lambda size: ["sim", "--workload", "random", "--rows", size],
    "sim minilm": lambda size: ["sim", "--workload", "minilm", "--rows", size],
    "waves": lambda size: ["waves", "--rows", size, "--no-open"],
    "waves --test": lambda size: ["waves", "--rows", size, "--test", "test_identity",
                                  "--no-open"],
    "bench": lambda size: ["bench", f"--sizes={size}x8", "--main-job", "no", "--nki", "no"],
    "fuzz": lambda size: ["fuzz", f"--sizes={size}x4", "--commands", "1"],
    "regress": lambda size: ["regress", "--rows", size],
    "nki run": lambda size: ["nki", "run", f"{KERNELS}/matmul.py::matmul_single_tile",
                             "--arg", "lhsT=128x2:bfloat16", "--arg", "rhs=128x2:bfloat16",
                             "--tensor-engine", "rtl", "--rows", size],
}


def _tile_config_message(rows):
    with pytest.raises(ValueError) as error:
        TileConfig(rows, 8)
    return str(error.value)


@pytest.mark.parametrize("rows", [0, -3, 2.5])
@pytest.mark.parametrize("name", API)
def test_a_bad_size_fails_in_tile_config_at_every_api_entry_point(name, rows):
    with pytest.raises(ValueError) as error:
        API[name](rows)
    assert str(error.value) == _tile_config_message(rows)
    assert error.traceback[-1].path.name == "config.py"     # raised there, nowhere else


@pytest.mark.parametrize("size,rows", [("0", 0), ("-3", -3), ("q", "q")])
@pytest.mark.parametrize("name", CLI)
def test_a_bad_size_fails_in_tile_config_at_every_cli_entry_point(name, size, rows,
                                                                   capsys, monkeypatch):
    for variable in ("ROWS", "COLS", "TYPES", "SIM", "WORKLOAD", "DTYPE", "FTZ", "WAVES"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        systolica.main(CLI[name](size))
    assert exit_info.value.code == 2
    assert _tile_config_message(rows) in capsys.readouterr().err


def test_the_api_takes_a_config_or_a_size_not_both():
    with pytest.raises(ValueError, match="^give either config or rows and cols, not both"):
        run_matmul(S, S, config=TileConfig(2, 2), rows=2, cols=2)
    with pytest.raises(TypeError, match="^config must be a TileConfig, not tuple$"):
        run_program([(S, S)], config=(2, 2))


def test_a_matmul_of_a_type_the_config_lacks_is_refused_before_building():
    with pytest.raises(ValueError, match=r"^the tile was generated for types int8, not for a "
                                         r"bf16 x bf16 matmul; allowed: "):
        run_matmul(B, B, config=TileConfig(2, 2, "int8"))
    with pytest.raises(ValueError, match=r"^the tile was generated for types fp8, not for a "
                                         r"double-row e4m3 x e4m3 matmul"):
        e4m3 = np.ones((4, 2), ml_dtypes.float8_e4m3)
        run_matmul(e4m3, e4m3, config=TileConfig(2, 2, "fp8"), perf_mode="double_row")
