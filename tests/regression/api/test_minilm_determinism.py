"""Regression tier: the MiniLM report does not depend on the BLAS thread count.

The slice of the last CI failure (two layers, three GEMMs on a 4 x 4 Verilator tile, the first
M-fold on the RTL, BF16 and INT8) runs as ``systolica sim`` twice, with one and with two
OpenBLAS threads (the variable must be set before numpy loads, hence separate processes).
Every figure of the two JSON reports must be equal, bit for bit, except the measured times
and where the programs ran. Before the reference model stopped using BLAS, Dask workers (one
thread) and the main process (two) gave embedding cosines that differed in the 11th digit.
"""

import json
import os
import subprocess
import sys

from systolica.sim.builder.runner import default_build_root

SLICE = ["--layers", "0,1", "--gemms", "q,scores,context", "--rows", "4", "--cols", "4",
         "--rtl-folds", "1", "--sim", "verilator", "--text", "The cat sleeps on the mat.",
         "--dtypes", "bf16,int8", "--workers", "1", "--json"]
#: Keys whose values are measurements of this run (times, the processes that ran it).
VARIABLE = {"seconds", "worker_seconds", "worker_cpu_seconds", "wall_seconds", "workers",
            "worker_busy_fraction", "engine"}


def _figures(report):
    if isinstance(report, dict):
        return {k: _figures(v) for k, v in report.items() if k not in VARIABLE}
    if isinstance(report, list):
        return [_figures(v) for v in report]
    return report


def _report(threads):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-m", "systolica", "sim", *SLICE, "--build-dir",
                           str(default_build_root())], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_report_is_identical_with_one_and_two_blas_threads():
    one, two = _report(1), _report(2)
    assert one["exact"] and one["accounting"]["complete"]
    assert one["precisions"]["bf16"]["embedding_cosines"]     # the figure that differed
    assert _figures(one) == _figures(two)
