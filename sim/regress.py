"""``python -m systolica.sim.regress`` (``make regress-long``): the long seeded regression.

Runs every cocotb test of ``systolica.tb.test_tile`` on one tile, with the BF16 bulk test
sized to check at least ``--macs`` BF16 multiply-accumulates (half normal-range, half
wide-exponent, every fourth matmul in FTZ mode), and prints the MACs checked, mismatches
and wall time. Exit status 0 only when every test passed.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from .errors import SystolicaError
from .runner import build, run_tests
from .toolchain import SIMULATORS


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m systolica.sim.regress", description=__doc__)
    p.add_argument("--sim", choices=SIMULATORS, default="verilator", help="default: verilator")
    p.add_argument("--rows", type=int, default=16, help="default: 16")
    p.add_argument("--cols", type=int, default=16, help="default: 16")
    p.add_argument("--macs", type=int, default=10_000_000,
                   help="BF16 MACs the bulk test checks at least (default: 10,000,000)")
    p.add_argument("--seed", type=int, default=1, help="COCOTB_RANDOM_SEED (default: 1)")
    args = p.parse_args(argv)
    for name in ("rows", "cols", "macs"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be a positive integer, not {getattr(args, name)}")
    started = time.perf_counter()
    print(f"regress-long: {args.rows} x {args.cols} tile on {args.sim}, seed {args.seed}, "
          f">= {args.macs:,} BF16 MACs ...", flush=True)
    try:
        tile = build(args.rows, args.cols, args.sim)
        with tempfile.TemporaryDirectory(prefix="systolica-regress-") as folder:
            stats = Path(folder) / "stats.jsonl"
            run = run_tests(tile, "systolica.tb.test_tile", Path(folder) / "run", seed=args.seed,
                            extra_env={"SYSTOLICA_STATS": str(stats),
                                       "SYSTOLICA_BULK_MACS": str(args.macs)})
            checked = [json.loads(line) for line in stats.read_text().splitlines()] \
                if stats.is_file() else []
            log_tail = run.log.read_text().splitlines()[-30:]
    except SystolicaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    bf16 = sum(entry["bf16"] for entry in checked)
    int8 = sum(entry["int8"] for entry in checked)
    wall = time.perf_counter() - started
    print(f"  cocotb tests     {run.tests - run.failed} of {run.tests} passed")
    print(f"  MACs checked     {bf16:,} BF16, {int8:,} INT8, bit for bit")
    print(f"  wall time        {wall:.1f} s (build {tile.seconds:.1f} s, "
          f"simulation {run.seconds:.1f} s)")
    if run.failed or bf16 < args.macs:
        print("\n".join(log_tail), file=sys.stderr)
        print(f"FAIL: {run.failed} tests failed; {bf16:,} of {args.macs:,} BF16 MACs checked",
              file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
