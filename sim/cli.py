"""Command line: ``python -m systolica.sim`` runs a workload on the RTL tile and reports.

Exit status: 0 when every result matched the golden model, 1 on mismatches or a failed
simulation, 2 on bad arguments or a missing tool.
"""

import argparse
import os
import sys
import time

import ml_dtypes
import numpy as np

from systolica.golden import FORMATS, PSUM_ENTRIES, program_cycles
from systolica.golden.formats import DOUBLE_ROW_TYPES

from .api import Matmul, run_program
from .errors import USER_FACING, report
from .options import WORKLOADS, add_tile_arguments, resolve_tile
from .options import env as _env
from .options import integer as _integer
from .toolchain import SIMULATORS

#: Operand types of the random workload (both operands the same).
DTYPES = tuple(FORMATS)


def parser():
    """The argument parser (argparse.ArgumentParser); defaults come from SIM, ROWS, COLS,
    SEED and WAVES in the environment, as ``make sim`` passes them."""
    p = argparse.ArgumentParser(
        prog="python -m systolica.sim",
        description="Run random INT8, BF16, FP16 or FP8 matmuls back to back through the RTL "
                    "tile on a "
                    "simulator, check every PSUM word against the golden model and report "
                    "cycles and throughput.")
    p.add_argument("--workload", choices=WORKLOADS, default="random",
                   help="random (this) or minilm, a real transformer's GEMMs "
                        "(default: $WORKLOAD or minilm; --workload minilm --help)")
    add_tile_arguments(p)
    p.add_argument("--dtype", choices=DTYPES, default=_env("DTYPE", "int8"),
                   help="data type of both operands: int8 (INT32 PSUM), or bf16, fp16, "
                        "e4m3, e5m2, e3m4, e4m3fn (FP32 PSUM) (default: $DTYPE or int8)")
    p.add_argument("--double-row", action="store_true",
                   help="FP8 double-row matmuls (e4m3 or e5m2): K = 2 x rows, 2 MACs per PE "
                        "per cycle")
    p.add_argument("--ftz", action="store_true",
                   default=os.environ.get("FTZ", "") not in ("", "0"),
                   help="flush subnormals to zero, float types only (default: on when $FTZ=1)")
    p.add_argument("--matmuls", type=_integer(1), default=8,
                   help="number of back-to-back matmuls, each with its own stationary "
                        "(default: 8)")
    p.add_argument("--n", type=_integer(1), default=128,
                   help="moving free size N of each matmul (default: 128)")
    p.add_argument("--seed", type=_integer(0, "SEED"), default=_env("SEED", "1"),
                   help="seed of the matrices and stall patterns (default: $SEED or 1)")
    p.add_argument("--idle", type=float, default=0.0,
                   help="probability per cycle that an input stream idles (default: 0)")
    p.add_argument("--backpressure", type=float, default=0.0,
                   help="probability per cycle that the result stream stalls (default: 0)")
    p.add_argument("--waves", action="store_true",
                   default=os.environ.get("WAVES", "") not in ("", "0"),
                   help="write an FST waveform (default: on when $WAVES=1)")
    p.add_argument("--build-dir", default=None,
                   help="build folder (default: $SYSTOLICA_BUILD_DIR or ./build)")
    return p


def _check_args(p, args):
    # argparse checks choices for given options only, not for defaults from the environment.
    if args.sim not in SIMULATORS:
        p.error(f"SIM must be one of {', '.join(SIMULATORS)}, not {args.sim!r}")
    if args.dtype not in DTYPES:
        p.error(f"DTYPE must be one of {', '.join(DTYPES)}, not {args.dtype!r}")
    if args.double_row and args.dtype not in DOUBLE_ROW_TYPES:
        p.error(f"--double-row needs DTYPE {' or '.join(DOUBLE_ROW_TYPES)}, not {args.dtype}")
    for name in ("idle", "backpressure"):
        if not 0.0 <= getattr(args, name) < 1.0:
            p.error(f"--{name} must be a probability in [0, 1), not {getattr(args, name)}")
    if args.n > PSUM_ENTRIES:
        p.error(f"--n must be at most the PSUM bank size {PSUM_ENTRIES}, not {args.n}")
    if args.ftz and args.dtype == "int8":
        p.error("--ftz (FTZ=1) applies to float types only")


def _workload(argv):
    """The workload asked for: ``--workload`` or ``$WORKLOAD``, default ``minilm``."""
    pre = argparse.ArgumentParser(add_help=False, prog="python -m systolica.sim")
    pre.add_argument("--workload", choices=WORKLOADS, default=_env("WORKLOAD", "minilm"))
    workload = pre.parse_known_args(argv)[0].workload
    if workload not in WORKLOADS:
        pre.error(f"WORKLOAD must be one of {', '.join(WORKLOADS)}, not {workload!r}")
    return workload


def workload(args):
    """The matmuls of a run (list of Matmul): ``args.matmuls`` random ``args.dtype`` pairs of
    a full stationary [K, cols] and a moving [K, n] (K = rows, or 2 x rows double-row),
    seeded by ``args.seed``. Float values are standard normal, clipped to the type's range
    before the cast (``ml_dtypes`` casts do not saturate)."""
    rng = np.random.default_rng(args.seed)
    dtype = FORMATS[args.dtype].dtype

    def operand(shape):
        if args.dtype == "int8":
            return rng.integers(-128, 128, shape, dtype=np.int8)
        top = float(ml_dtypes.finfo(dtype).max)
        return np.clip(rng.standard_normal(shape), -top, top).astype(dtype)

    k = 2 * args.rows if args.double_row else args.rows
    return [Matmul(operand((k, args.cols)), operand((k, args.n)), ftz=args.ftz,
                   perf_mode="double_row" if args.double_row else None)
            for _ in range(args.matmuls)]


def main(argv=None):
    """Entry point; returns the exit status (int). ``--workload minilm`` (the default, see
    :mod:`systolica.sim.minilm.cli`) runs a real transformer's GEMMs; ``random`` is below."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if _workload(argv) == "minilm":
        if os.environ.get("WAVES", "") not in ("", "0") or "--waves" in argv:
            print("error: WAVES=1 applies to WORKLOAD=random (a waveform of the real model's "
                  "tens of thousands of matmuls would be huge); use 'make sim WORKLOAD=random "
                  "WAVES=1' or 'make waves'", file=sys.stderr)
            return 2
        if os.environ.get("DTYPE") or os.environ.get("FTZ", "") not in ("", "0"):
            print("error: DTYPE and FTZ apply to WORKLOAD=random; the real model runs BF16 and "
                  "INT8 (choose with --dtypes bf16 or --dtypes int8)", file=sys.stderr)
            return 2
        from .minilm.cli import main as minilm_main

        return minilm_main(argv)
    if os.environ.get("LAYERS") or os.environ.get("WORKERS"):
        print("error: LAYERS and WORKERS apply to WORKLOAD=minilm (the real model); the "
              "random workload is one program on one simulator", file=sys.stderr)
        return 2
    p = parser()
    args = resolve_tile(p.parse_args(argv))
    _check_args(p, args)
    jobs = workload(args)
    print(f"systolica: {args.rows} x {args.cols} tile, {args.dtype}, on {args.sim}: building "
          f"(first use of a configuration can take a while) ...", flush=True)
    started = time.perf_counter()
    try:
        result = run_program(jobs, rows=args.rows, cols=args.cols, simulator=args.sim,
                             waves=args.waves, seed=args.seed, idle=args.idle,
                             backpressure=args.backpressure, build_root=args.build_dir)
    except USER_FACING as error:
        return report(error)
    wall = time.perf_counter() - started
    k = jobs[0].stationary.shape[0]
    macs = args.matmuls * k * args.cols * args.n
    peak = args.rows * args.cols * (2 if args.double_row else 1)
    cycles = result.cycles
    predicted = program_cycles(args.rows, args.cols, [(k, args.n)] * args.matmuls,
                               perf_mode=jobs[0].perf_mode)
    sim_s = result.seconds
    lines = [
        ("configuration", f"{args.rows} x {args.cols} PEs, " + (
            "INT8 x INT8 -> INT32" if args.dtype == "int8" else
            f"{args.dtype.upper()} x {args.dtype.upper()} -> FP32"
            + (", double-row" if args.double_row else "")
            + (", FTZ" if args.ftz else ", IEEE subnormals"))),
        ("simulator", args.sim),
        ("seed", str(args.seed)),
        ("matmuls", f"{args.matmuls} back to back, each [K={k}, M={args.cols}] x "
                    f"[K={k}, N={args.n}]"),
        ("MACs", f"{macs:,}"),
        ("cycles", f"{cycles:,} from reset to the last result; the timing model predicts "
                   f"{predicted:,}" + ("" if args.idle or args.backpressure
                                      else (" (equal, every stamp)"
                                            if predicted == cycles and result.model_agrees()
                                            else " (DIFFERS)"))
                   + (" without stalls" if args.idle or args.backpressure else "")),
        ("MACs per cycle", f"{macs / cycles:.2f} of peak {peak} "
                           f"({100 * macs / cycles / peak:.1f}%)"),
        ("mismatches", f"{result.mismatches} "
                       f"({args.matmuls * args.n * args.cols:,} PSUM words checked, bit for bit)"),
        ("build", f"{result.build.seconds:.1f} s" if result.build.seconds else "reused"),
        ("simulation", f"{sim_s:.2f} s in the clock loop: {cycles / sim_s:,.0f} cycles/s, "
                       f"{macs / sim_s:,.0f} MACs/s ({result.run.seconds:.1f} s with "
                       f"simulator start-up)"),
        ("total wall time", f"{wall:.1f} s"),
        ("waveform", str(result.run.waveform) if result.run.waveform
         else "none (WAVES=1 or --waves to write one)"),
    ]
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"  {key:<{width}}  {value}")
    if result.mismatches:
        print(f"FAIL: {result.mismatches} PSUM words differ from the golden model; "
              f"see {result.run.log}", file=sys.stderr)
        return 1
    print("PASS: every PSUM word matches the golden model")
    return 0
