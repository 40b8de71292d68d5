"""``python -m systolica.sim.bench`` (``make bench``): how fast the RTL tile simulates.

For each simulator, tile size and data type: Verilog generation time, simulator build time
and peak memory (a fresh build folder, so both are really measured; one build serves INT8
and BF16, whose type is chosen per matmul), then back-to-back matmuls with every result
checked, through the bulk-stimulus harness (Python wakes once per program) and through the
per-cycle driver (Python wakes every cycle), and the same harness build's free-running rate
over the same stimulus (clock only, no Python at all) as the limit. Prints a table and writes JSON
(``bench/results.json`` by default). Each configuration is measured in its own process so
that peak memory is its own.
"""

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from .api import Matmul, run_program
from .errors import SystolicaError
from .generate import write_configuration
from .runner import HIERARCHICAL_PES
from .toolchain import SIMULATORS

#: Largest tile Icarus is benchmarked on (it is an event-driven interpreter).
ICARUS_MAX_PES = 32 * 32


def _jobs(rows, cols, dtype, matmuls, n, seed=1):
    rng = np.random.default_rng(seed)

    def operand(shape):
        if dtype == "int8":
            return rng.integers(-128, 128, shape, dtype=np.int8)
        return rng.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)

    return [Matmul(operand((rows, cols)), operand((rows, n))) for _ in range(matmuls)]


def measure(simulator, rows, cols, matmuls, n, cycle_driver=True):
    """Measure one simulator and tile size (both dtypes); return a list of dicts."""
    out = []
    with tempfile.TemporaryDirectory(prefix="systolica-bench-") as root:
        started = time.perf_counter()
        write_configuration(rows, cols, Path(root) / f"{rows}x{cols}" / "verilog")
        generate_s = time.perf_counter() - started
        for dtype in ("int8", "bf16"):
            jobs = _jobs(rows, cols, dtype, matmuls, n)
            bulk = run_program(jobs, rows=rows, cols=cols, simulator=simulator,
                               build_root=root, driver="bulk", free_run=True)
            build_s = bulk.build.seconds or out[0]["build_s"]
            macs = matmuls * rows * cols * n
            row = {"simulator": simulator, "rows": rows, "cols": cols, "dtype": dtype,
                   "matmuls": matmuls, "n": n, "generate_s": round(generate_s, 2),
                   "build_s": round(build_s, 1),
                   "cycles": bulk.cycles, "mismatches": bulk.mismatches,
                   "bulk_cycles_per_s": round(bulk.cycles / bulk.seconds),
                   "bulk_macs_per_s": round(macs / bulk.seconds),
                   "bulk_wall_s": round(bulk.run.seconds, 2),
                   "free_cycles_per_s": round(bulk.cycles / bulk.free_seconds)}
            row["bulk_vs_free"] = round(row["bulk_cycles_per_s"] / row["free_cycles_per_s"], 3)
            if cycle_driver:
                cycle = run_program(jobs, rows=rows, cols=cols, simulator=simulator,
                                    build_root=root, driver="cycle")
                row["cycle_cycles_per_s"] = round(cycle.cycles / cycle.seconds)
                row["mismatches"] += cycle.mismatches
            out.append(row)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    for row in out:
        row["build_peak_mb"] = round(peak_kb / 1024)
    return out


def _one(argv):
    p = argparse.ArgumentParser()
    p.add_argument("simulator")
    p.add_argument("rows", type=int)
    p.add_argument("cols", type=int)
    p.add_argument("matmuls", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--no-cycle", action="store_true")
    a = p.parse_args(argv)
    print(json.dumps(measure(a.simulator, a.rows, a.cols, a.matmuls, a.n, not a.no_cycle)))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        return _one(argv[1:])
    p = argparse.ArgumentParser(prog="python -m systolica.sim.bench", description=__doc__)
    p.add_argument("--sizes", default="8x8,16x16,32x32",
                   help="comma-separated tile sizes ROWSxCOLS (default: 8x8,16x16,32x32; "
                        "add 128x128 for the full-size tile: a hierarchical Verilator build of "
                        "about 35 minutes and 4 GB here, and no per-cycle-driver run)")
    p.add_argument("--sims", default=",".join(SIMULATORS),
                   help="comma-separated simulators (default: icarus,verilator; Icarus only "
                        f"up to {ICARUS_MAX_PES} PEs)")
    p.add_argument("--matmuls", type=int, default=8, help="matmuls per run (default: 8)")
    p.add_argument("--n", type=int, default=512, help="moving free size N (default: 512)")
    p.add_argument("--output", default="bench/results.json", help="JSON output path")
    args = p.parse_args(argv)
    try:
        sizes = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizes.split(",")]
        if any(len(s) != 2 or min(s) < 1 for s in sizes):
            raise ValueError
    except ValueError:
        p.error(f"--sizes must look like 8x8,16x16, not {args.sizes!r}")
    sims = args.sims.split(",")
    for sim in sims:
        if sim not in SIMULATORS:
            p.error(f"unknown simulator {sim!r} in --sims; choose from {', '.join(SIMULATORS)}")
    header = (f"{'sim':<9} {'tile':>7} {'dtype':>5} {'gen s':>6} {'build s':>8} {'peak MB':>8} "
              f"{'cycles':>7} {'bulk c/s':>9} {'MACs/s':>12} {'cycle c/s':>9} "
              f"{'free c/s':>9} {'bulk/free':>9} {'mism':>4}")
    print(header)
    print("-" * len(header), flush=True)
    rows_out = []
    for sim in sims:
        for rows, cols in sizes:
            if sim == "icarus" and rows * cols > ICARUS_MAX_PES:
                continue
            small = sim == "icarus" and rows * cols > 8 * 8
            full_size = rows * cols >= HIERARCHICAL_PES   # one hierarchical build, ~35 min
            matmuls, n = (2, 64) if small else (2, args.n) if full_size else (args.matmuls,
                                                                              args.n)
            command = [sys.executable, "-m", "systolica.sim.bench", "--one", sim, str(rows),
                       str(cols), str(matmuls), str(n)]
            if small or full_size:
                command.append("--no-cycle")
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"error: {sim} {rows}x{cols}: {done.stderr.strip().splitlines()[-1:]}")
                return 2
            for r in json.loads(done.stdout.strip().splitlines()[-1]):
                rows_out.append(r)
                cycle = r.get("cycle_cycles_per_s")
                print(f"{sim:<9} {f'{rows}x{cols}':>7} {r['dtype']:>5} {r['generate_s']:>6.1f} "
                      f"{r['build_s']:>8.1f} {r['build_peak_mb']:>8} {r['cycles']:>7} "
                      f"{r['bulk_cycles_per_s']:>9,} {r['bulk_macs_per_s']:>12,} "
                      f"{cycle if cycle is not None else '-':>9} "
                      f"{r['free_cycles_per_s']:>9,} {r['bulk_vs_free']:>9.2f} "
                      f"{r['mismatches']:>4}", flush=True)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(), "results": rows_out,
    }, indent=2) + "\n")
    print(f"wrote {out}")
    return 1 if any(r["mismatches"] for r in rows_out) else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except SystolicaError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
