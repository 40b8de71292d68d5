"""``python -m systolica.sim.bench`` (``make bench``): simulation speed of the RTL tile.

For each simulator and tile size: Verilog generation plus simulator build time (a fresh
build folder, so it is really measured), then a back-to-back INT8 workload with every result
checked, reporting simulated cycles per second and MACs per second of the testbench's clock
loop (simulator start-up excluded). Prints a table and writes ``bench/results.json``.
"""

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from .api import run_program
from .errors import SystolicaError
from .toolchain import SIMULATORS


def measure(simulator, rows, cols, matmuls, n, seed=1):
    """Build and run one configuration in a fresh build folder; return a dict of figures."""
    rng = np.random.default_rng(seed)
    jobs = [(rng.integers(-128, 128, (rows, cols), dtype=np.int8),
             rng.integers(-128, 128, (rows, n), dtype=np.int8)) for _ in range(matmuls)]
    with tempfile.TemporaryDirectory(prefix="systolica-bench-") as root:
        started = time.perf_counter()
        result = run_program(jobs, rows=rows, cols=cols, simulator=simulator, seed=seed,
                             build_root=root)
        total = time.perf_counter() - started
    macs = matmuls * rows * cols * n
    return {
        "simulator": simulator, "rows": rows, "cols": cols, "matmuls": matmuls, "n": n,
        "build_s": round(result.build.seconds, 2),
        "cycles": result.cycles, "clock_loop_s": round(result.seconds, 3),
        "cycles_per_s": round(result.cycles / result.seconds),
        "macs_per_s": round(macs / result.seconds),
        "macs_per_cycle": round(macs / result.cycles, 2), "peak_macs_per_cycle": rows * cols,
        "mismatches": result.mismatches, "total_s": round(total, 2),
    }


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m systolica.sim.bench", description=__doc__)
    p.add_argument("--sizes", default="8x8,16x16",
                   help="comma-separated tile sizes ROWSxCOLS (default: 8x8,16x16)")
    p.add_argument("--sims", default=",".join(SIMULATORS),
                   help="comma-separated simulators (default: icarus,verilator)")
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
    rows_out = []
    header = (f"{'simulator':<10} {'tile':>7} {'build s':>8} {'cycles':>8} {'cycles/s':>10} "
              f"{'MACs/s':>12} {'MACs/cycle':>11} {'mismatches':>10}")
    print(header)
    print("-" * len(header))
    for sim in sims:
        for rows, cols in sizes:
            try:
                r = measure(sim, rows, cols, args.matmuls, args.n)
            except SystolicaError as error:
                print(f"error: {error}")
                return 2
            rows_out.append(r)
            print(f"{sim:<10} {f'{rows}x{cols}':>7} {r['build_s']:>8.1f} {r['cycles']:>8} "
                  f"{r['cycles_per_s']:>10,} {r['macs_per_s']:>12,} "
                  f"{r['macs_per_cycle']:>6.1f}/{r['peak_macs_per_cycle']:<4} "
                  f"{r['mismatches']:>10}", flush=True)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(), "results": rows_out,
    }, indent=2) + "\n")
    print(f"wrote {out}")
    return 1 if any(r["mismatches"] for r in rows_out) else 0


if __name__ == "__main__":
    raise SystemExit(main())
