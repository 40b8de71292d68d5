"""``systolica regress`` (``make regress-long``; ``python -m systolica.cli.regress`` too): the
long seeded regression.

Runs every cocotb test of ``systolica.tb.cases.tile`` on one tile, with the BF16 bulk test
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

from systolica.hdl.config import TileConfig
from systolica.sim.builder.errors import SystolicaError
from systolica.sim.builder.runner import build, run_tests
from systolica.sim.builder.toolchain import SIMULATORS
from systolica.sim.options import OneLineParser, integer, size_value
from systolica.sim.options import folder as folder_path
from systolica.tb import protocol


def main(argv=None):
    p = OneLineParser(prog="systolica regress", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim", choices=SIMULATORS, default="verilator", help="default: verilator")
    p.add_argument("--rows", type=size_value, default=16,
                   help="partition rows K of the tile (default: 16)")
    p.add_argument("--cols", type=size_value, default=16,
                   help="stationary columns M of the tile (default: 16)")
    p.add_argument("--types", default="all",
                   help="type set the tile is generated for (default: all, which the "
                        "regression's tests of every type need; a smaller set makes its "
                        "other types' tests fail as rejected commands)")
    p.add_argument("--macs", type=integer(1), default=10_000_000,
                   help="BF16 MACs the bulk test checks at least (default: 10,000,000)")
    p.add_argument("--seed", type=integer(0), default=1,
                   help="COCOTB_RANDOM_SEED (default: 1)")
    p.add_argument("--build-dir", type=folder_path, default=None,
                   help="build folder (default: $SYSTOLICA_BUILD_DIR or the checkout's "
                        "build/)")
    p.add_argument("--json", action="store_true",
                   help="print the figures as one JSON document on stdout (progress goes to "
                        "stderr)")
    args = p.parse_args(argv)
    try:
        config = TileConfig(args.rows, args.cols, args.types)
    except ValueError as error:
        p.error(str(error))
    say = sys.stderr if args.json else sys.stdout
    started = time.perf_counter()
    print(f"regress-long: {config.describe()} on {args.sim}, seed {args.seed}, "
          f">= {args.macs:,} BF16 MACs ...", file=say, flush=True)
    try:
        tile = build(config, args.sim, build_root=args.build_dir)
        with tempfile.TemporaryDirectory(prefix="systolica-regress-") as folder:
            stats = Path(folder) / "stats.jsonl"
            run = run_tests(tile, protocol.TILE_TESTS, Path(folder) / "run", seed=args.seed,
                            extra_env={protocol.STATS: str(stats),
                                       protocol.BULK_MACS: str(args.macs)})
            checked = [json.loads(line) for line in stats.read_text().splitlines()] \
                if stats.is_file() else []
            log_tail = run.log.read_text().splitlines()[-30:]
    except SystolicaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    bf16 = sum(entry["bf16"] for entry in checked)
    int8 = sum(entry["int8"] for entry in checked)
    wall = time.perf_counter() - started
    passed = not run.failed and bf16 >= args.macs
    if args.json:
        print(json.dumps({"simulator": args.sim, "rows": config.rows, "cols": config.cols,
                          "types": config.types_name,
                          "seed": args.seed, "tests": run.tests, "failed": run.failed,
                          "bf16_macs": bf16, "int8_macs": int8, "macs_wanted": args.macs,
                          "wall_s": wall, "build_s": tile.seconds,
                          "simulation_s": run.seconds, "passed": passed}, indent=1))
    else:
        print(f"  cocotb tests     {run.tests - run.failed} of {run.tests} passed")
        print(f"  MACs checked     {bf16:,} BF16, {int8:,} INT8, bit for bit")
        print(f"  wall time        {wall:.1f} s (build {tile.seconds:.1f} s, "
              f"simulation {run.seconds:.1f} s)")
    if not passed:
        print("\n".join(log_tail), file=sys.stderr)
        print(f"FAIL: {run.failed} tests failed; {bf16:,} of {args.macs:,} BF16 MACs checked",
              file=sys.stderr)
        return 1
    print("PASS", file=say)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
