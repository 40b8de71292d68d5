"""``systolica minilm-speedup`` (``make minilm-speedup``): the MiniLM workload on the local
Dask cluster and serially.

Builds the tile once, then runs the same workload (default: all six layers, BF16 and INT8,
every matmul on the tile) twice on that build: on the embedded local cluster (one worker per
core, or ``--workers``/$WORKERS) and with ``--workers 1`` (serial, in-process). Prints both
wall times (cluster start-up and shut-down included), their ratio, and whether the two runs
agree bit for bit (embeddings, and every GEMM's programs, matmuls, cycles and mismatches).

Exit status: 0 when both runs are exact, complete, meet the accuracy targets and agree;
1 otherwise; 2 on bad arguments or a missing tool.
"""

import json
import sys
import time

from ..engine import SerialEngine, make_engine
from ..errors import USER_FACING, report
from ..options import OneLineParser, add_tile_arguments, env, integer, resolve_tile
from .cli import default_workers
from .run import parse_layers, run_model


def fingerprint(run):
    """What must not depend on where the programs ran (dict): per precision the embeddings'
    bytes and per GEMM ``(layer, gemm, programs, matmuls, cycles, mismatches, differing)``."""
    return {dtype: (prec.embeddings.tobytes(),
                    [(g.layer, g.gemm, g.programs, g.matmuls, g.cycles, g.mismatches,
                      g.differing) for g in prec.gemms])
            for dtype, prec in run.runs.items()}


def _timed(engine_factory, **kwargs):
    started = time.perf_counter()
    engine = engine_factory()
    try:
        run = run_model(engine=engine, **kwargs)
    finally:
        engine.close()
    return run, time.perf_counter() - started


def main(argv=None):
    """Entry point; returns the exit status (int, see the module)."""
    p = OneLineParser(prog="systolica minilm-speedup",
                      description="Time the MiniLM workload on the local Dask cluster and "
                                  "serially on the same build, and compare the results.")
    add_tile_arguments(p)
    p.add_argument("--layers", default=env("LAYERS", "all"),
                   help="encoder layers on the tile (default: $LAYERS or all)")
    p.add_argument("--workers", type=integer(2, "WORKERS"), default=env("WORKERS", None),
                   help=f"worker processes of the local cluster (default: $WORKERS or one "
                        f"per core, here {default_workers()})")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = resolve_tile(p.parse_args(argv))
    try:
        layers = parse_layers(args.layers)
    except ValueError as error:
        p.error(str(error))
    workers = args.workers or default_workers()
    if workers < 2:
        p.error(f"this machine offers {workers} core; give --workers 2 or more")
    common = {"layers": layers, "rows": args.rows, "cols": args.cols, "simulator": args.sim}
    try:
        print(f"building (or reusing) the {args.rows} x {args.cols} tile, then layers "
              f"{args.layers} on {workers} workers ...", file=sys.stderr, flush=True)
        run_model(gemms=["q"], rtl_folds=1, engine=SerialEngine(),
                  **{**common, "layers": [0]})
        parallel, parallel_s = _timed(lambda: make_engine(workers), **common)
        print(f"local cluster: {parallel_s:.1f} s; now serially ...", file=sys.stderr,
              flush=True)
        serial, serial_s = _timed(SerialEngine, **common)
    except USER_FACING as error:
        return report(error)
    same = fingerprint(parallel) == fingerprint(serial)
    good = all(r.exact and all(r.meets_targets().values()) for r in (parallel, serial))
    figures = {"layers": layers, "tile": f"{args.rows}x{args.cols}", "simulator": args.sim,
               "workers": workers, "parallel_seconds": parallel_s, "serial_seconds": serial_s,
               "ratio": parallel_s / serial_s, "bit_identical": same, "exact_and_on_target":
               good, "programs": serial.ledger.programs, "matmuls": serial.ledger.matmuls,
               "cosine_min": {d: float(r.cosines.min()) for d, r in serial.runs.items()}}
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(f"  local cluster, {workers} workers  {parallel_s:8.1f} s\n"
              f"  serial (--workers 1)     {serial_s:8.1f} s\n"
              f"  ratio                    {parallel_s / serial_s:8.2f}\n"
              f"  programs, matmuls        {serial.ledger.programs:,}, "
              f"{serial.ledger.matmuls:,} (each checked once in both runs)\n"
              f"  bit for bit the same     {'yes' if same else 'NO'}\n"
              f"  exact, targets met       {'yes' if good else 'NO'}")
    return 0 if same and good else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
