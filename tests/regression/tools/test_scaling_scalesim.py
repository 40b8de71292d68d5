"""Scaling layer: the SCALE-Sim compatibility mode against SCALE-Sim v3 itself.

SCALE-Sim 3.0.0 comes from PyPI into its own environment, ``build/scalesim-venv`` (it needs
``numpy<2``), created on first use under a file lock so that pytest-xdist workers do not race.
No skip: if the install fails, the test fails and says why.
"""

import csv
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from systolica.scaling.tilemodel import gemm_tile_cycles, scalesim_ws_cycles
from systolica.scaling.workloads import load_scalesim_topology

ROOT = Path(__file__).resolve().parents[3]   # tests/<tier>/<area>/this file
VENV = ROOT / "build" / "scalesim-venv"
READY = VENV / ".installed"

CONFIG = """[general]
run_name = {name}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   1024
FilterSramSzkB:  1024
OfmapSramSzkB:   1024
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : ws
MemoryBanks:   1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""


def scalesim_python():
    """Path of the SCALE-Sim environment's python, installing it once (file-locked)."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "scalesim-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python = VENV / "bin" / "python"
        if not READY.exists():
            steps = [[sys.executable, "-m", "venv", "--clear", str(VENV)],
                     [str(python), "-m", "pip", "install", "--quiet", "scalesim==3.0.0",
                      "numpy<2"],
                     [str(python), "-c", "import scalesim.scale_sim"]]
            for step in steps:
                result = subprocess.run(step, capture_output=True, text=True, check=False,
                                        timeout=1200)
                if result.returncode != 0:
                    pytest.fail(f"could not set up SCALE-Sim in {VENV}: {' '.join(step)} "
                                f"exited {result.returncode}:\n{result.stderr[-2000:]}")
            READY.write_text("scalesim==3.0.0, numpy<2\n")
        return python


def run_scalesim(tmp_path, name, rows, cols, topology_text, gemm):
    python = scalesim_python()
    work = tmp_path / name
    work.mkdir()
    (work / "config.cfg").write_text(CONFIG.format(name=name, rows=rows, cols=cols))
    (work / "topo.csv").write_text(topology_text)
    # Its CLI wants a layout file even with custom layouts off; a header line suffices.
    (work / "layout.csv").write_text("Layer,\n")
    cmd = [str(python), "-m", "scalesim.scale", "-c", "config.cfg", "-t", "topo.csv",
           "-l", "layout.csv", "-p", "out", "-i", "gemm" if gemm else "conv", "-s", "N"]
    result = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False,
                            timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (report,) = (work / "out").rglob("COMPUTE_REPORT.csv")
    with report.open() as f:
        rows_out = [{k.strip(): v.strip() for k, v in r.items() if k and k.strip()}
                    for r in csv.DictReader(f)]
    return work / "topo.csv", rows_out


GEMM_TOPOLOGY = ("Layer, M, N, K,\n"
                 "g_small, 5, 6, 8,\n"            # one fold
                 "g_ragged, 20, 13, 17,\n"        # partial folds both ways
                 "g_tall, 64, 30, 40,\n"          # 5 x 5 folds
                 "g_single_row, 1, 7, 3,\n")      # T = 1
CONV_TOPOLOGY = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
                 "Num Filter, Strides,\n"
                 "c1, 10, 10, 3, 3, 4, 7, 1,\n"
                 "c2_stride2, 12, 9, 3, 2, 2, 5, 2,\n"
                 "c3_1x1, 6, 6, 1, 1, 16, 40, 1,\n")


@pytest.mark.parametrize("rows, cols, text, gemm", [
    (8, 6, GEMM_TOPOLOGY, True),       # non-square
    (5, 12, CONV_TOPOLOGY, False),     # non-square, conv format
    (16, 16, GEMM_TOPOLOGY, True),
])
def test_compat_mode_equals_scalesim_total_cycles(tmp_path, rows, cols, text, gemm):
    topo, report = run_scalesim(tmp_path, f"r{rows}c{cols}", rows, cols, text, gemm)
    workload = load_scalesim_topology(topo)
    assert len(report) == len(workload.gemms) >= 3
    for g, row in zip(workload.gemms, report, strict=True):
        assert int(row["Stall Cycles"]) == 0
        ours = scalesim_ws_cycles(rows, cols, g.m, g.k, g.n)
        assert ours == int(row["Total Cycles"]), (g, row)
        # Side by side: the native tile's pipeline is 2 cycles longer per matmul, but it
        # loads the next stationary behind the stream, so with several folds it is faster.
        folds = -(-g.k // rows) * -(-g.m // cols)
        native = gemm_tile_cycles(rows, cols, 512, g.k, g.n, -(-g.m // cols))
        if folds >= 4:
            assert native < ours, (g, native, ours)
