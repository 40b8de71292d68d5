"""``systolica sim`` (``make sim``; ``python -m systolica.sim`` too) runs a workload on the RTL
tile and reports.

Exit status: 0 when every result matched the golden model, 1 on mismatches or a failed
simulation, 2 on bad arguments or a missing tool.
"""

import json
import os
import shutil
import sys
import time
from dataclasses import replace

import ml_dtypes
import numpy as np

from systolica.golden import (
    PSUM_ENTRIES,
    as_tfloat32,
    check_transpose,
    format_of,
    identity,
    matmul_passes,
)
from systolica.golden.command import DTYPES
from systolica.golden.formats import DOUBLE_ROW_TYPES
from systolica.scaling.cli import image_file, output_file
from systolica.sim.api.runs import Matmul, run_program
from systolica.sim.builder.errors import USER_FACING, report
from systolica.sim.builder.toolchain import SIMULATORS
from systolica.sim.options import (
    WORKLOADS,
    OneLineParser,
    add_tile_arguments,
    env_flag,
    folder,
    resolve_config,
    resolve_tile,
)
from systolica.sim.options import env as _env
from systolica.sim.options import integer as _integer

#: Operand types of the random workload (both operands the same).


def parser():
    """The argument parser (argparse.ArgumentParser); defaults come from SIM, ROWS, COLS,
    SEED and WAVES in the environment, as ``make sim`` passes them."""
    p = OneLineParser(
        prog="systolica sim",
        description="Run random INT8, BF16, FP16 or FP8 matmuls back to back through the RTL "
                    "tile on a "
                    "simulator, check every PSUM word against the golden model and report "
                    "cycles and throughput.")
    p.add_argument("--workload", choices=WORKLOADS, default="random",
                   help="random (this) or minilm, a real transformer's GEMMs "
                        "(default: $WORKLOAD or minilm; --workload minilm --help)")
    add_tile_arguments(p, types_help="the --dtype's set, with fp8-double-row for "
                                     "--double-row")
    p.add_argument("--dtype", choices=DTYPES, default=_env("DTYPE", "int8"),
                   help="data type of both operands: int8 (INT32 PSUM), or bf16, fp16, "
                        "e4m3, e5m2, e3m4, e4m3fn, tf32, fp32 (FP32 PSUM; fp32 takes four "
                        "passes a moving column) (default: $DTYPE or int8)")
    p.add_argument("--double-row", action="store_true",
                   help="FP8 double-row matmuls (e4m3 or e5m2): K = 2 x rows, 2 MACs per PE "
                        "per cycle")
    p.add_argument("--ftz", action="store_true",
                   default=env_flag("FTZ"),
                   help="flush subnormals to zero, float types only (default: on when $FTZ=1)")
    p.add_argument("--transpose", action="store_true",
                   help="transpose mode (Matmul is_transpose=True): each moving column is a "
                        "selector (one 1, the rest +0) and PSUM gets the bits of the "
                        "stationary row it selects, unchanged (docs/tile.md); not with "
                        "--double-row or --ftz")
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
                   default=env_flag("WAVES"),
                   help="write an FST waveform (default: on when $WAVES=1)")
    p.add_argument("--build-dir", type=folder, default=None,
                   help="build folder (default: $SYSTOLICA_BUILD_DIR or the checkout's "
                        "build/)")
    p.add_argument("--timeline", metavar="PNG", type=image_file, default=None,
                   help="draw the program's schedule per command (command accepted, "
                        "stationary load, moving beats, results; measured over the cycle "
                        "model's) as a PNG")
    p.add_argument("--trace", metavar="JSON", type=output_file, default=None,
                   help="write the same as a Perfetto / Chrome JSON trace (open it in "
                        "ui.perfetto.dev; 1 us in the trace = 1 clock cycle)")
    p.add_argument("--json", action="store_true",
                   help="print the report as one JSON document on stdout (progress and "
                        "messages go to stderr)")
    return p


def check_args(p, args):
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
    try:
        check_transpose(args.transpose, perf_mode="double_row" if args.double_row else None,
                        ftz=args.ftz)
    except ValueError as error:
        p.error(f"--transpose: {error}")
    resolve_config(p, args, (args.dtype,), args.double_row)
    args.rows, args.cols = args.config.rows, args.config.cols


def _workload(argv):
    """The workload asked for: ``--workload`` or ``$WORKLOAD``, default ``minilm``."""
    pre = OneLineParser(add_help=False, prog="systolica sim")
    pre.add_argument("--workload", choices=WORKLOADS, default=_env("WORKLOAD", "minilm"))
    workload = pre.parse_known_args(argv)[0].workload
    if workload not in WORKLOADS:
        pre.error(f"WORKLOAD must be one of {', '.join(WORKLOADS)}, not {workload!r}")
    return workload


def workload(args):
    """The matmuls of a run (list of Matmul): ``args.matmuls`` random ``args.dtype`` pairs of
    a full stationary [K, cols] and a moving [K, n] (K = rows, or 2 x rows double-row),
    seeded by ``args.seed``. Float values are standard normal, clipped to the type's range
    before the cast (``ml_dtypes`` casts do not saturate). With ``args.transpose`` the
    moving operand's columns are random columns of ``golden.identity(K, dtype)`` (each
    selects one stationary row) and the matmuls are transposes."""
    rng = np.random.default_rng(args.seed)
    dtype = format_of(args.dtype).dtype

    def operand(shape):
        if args.dtype == "int8":
            return rng.integers(-128, 128, shape, dtype=np.int8)
        if args.dtype in ("fp32", "tf32"):      # TF32: FP32 values rounded to TF32
            values = rng.standard_normal(shape).astype(np.float32)
            return as_tfloat32(values) if args.dtype == "tf32" else values
        top = float(ml_dtypes.finfo(dtype).max)
        return np.clip(rng.standard_normal(shape), -top, top).astype(dtype)

    def selectors(k, n):
        return identity(k, args.dtype)[:, rng.integers(0, k, n)]

    k = 2 * args.rows if args.double_row else args.rows
    moving = selectors if args.transpose else lambda k, n: operand((k, n))
    return [Matmul(operand((k, args.cols)), moving(k, args.n), ftz=args.ftz,
                   perf_mode="double_row" if args.double_row else None,
                   is_transpose=args.transpose)
            for _ in range(args.matmuls)]


def main(argv=None):
    """Entry point; returns the exit status (int). ``--workload minilm`` (the default, see
    :mod:`systolica.cli.minilm`) runs a real transformer's GEMMs; ``random`` is below."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get("MX") or os.environ.get("MX_PSUM"):
        print("error: MX and MX_PSUM apply to 'make waves' (MX matmuls in the traced random "
              "workload, systolica waves --mx); make sim runs MX through TYPES=all+mx "
              "(MiniLM in MXFP8)", file=sys.stderr)
        return 2
    if _workload(argv) == "minilm":
        if env_flag("WAVES") or "--waves" in argv:
            print("error: WAVES=1 applies to WORKLOAD=random (a waveform of the real model's "
                  "tens of thousands of matmuls would be huge); use 'make sim WORKLOAD=random "
                  "WAVES=1' or 'make waves'", file=sys.stderr)
            return 2
        if os.environ.get("DTYPE") or env_flag("FTZ"):
            print("error: DTYPE and FTZ apply to WORKLOAD=random; the real model runs BF16, "
                  "INT8 and FP8 (choose with --dtypes, e.g. --dtypes bf16,fp8)", file=sys.stderr)
            return 2
        drawn = [option for option in ("--timeline", "--trace")
                 if any(arg.split("=")[0] == option for arg in argv)]
        if drawn:
            print(f"error: {' and '.join(drawn)} (TIMELINE, TRACE) apply to WORKLOAD=random, "
                  f"one program on one tile; use 'make sim WORKLOAD=random TIMELINE=run.png' "
                  f"or 'systolica sim --workload random --timeline run.png'", file=sys.stderr)
            return 2
        if os.environ.get("SEED") and "--help" not in argv and "-h" not in argv:
            print(f"systolica: note: SEED={os.environ['SEED']} applies to WORKLOAD=random; the "
                  "real model's inputs (weights, sentences) hold nothing random",
                  file=sys.stderr)
        from systolica.cli.minilm import main as minilm_main

        return minilm_main(argv)
    if os.environ.get("LAYERS") or os.environ.get("WORKERS"):
        print("error: LAYERS and WORKERS apply to WORKLOAD=minilm (the real model); the "
              "random workload is one program on one simulator", file=sys.stderr)
        return 2
    p = parser()
    args = resolve_tile(p.parse_args(argv))
    check_args(p, args)
    jobs = workload(args)
    say = sys.stderr if args.json else sys.stdout
    plural = "s" if args.matmuls != 1 else ""
    print(f"systolica: {args.matmuls} {args.dtype} matmul{plural} on a "
          f"{args.config.describe()}, {args.sim} ...", file=say, flush=True)
    started = time.perf_counter()
    try:
        result = run_program(jobs, config=args.config, simulator=args.sim,
                             waves=args.waves, seed=args.seed, idle=args.idle,
                             backpressure=args.backpressure, build_root=args.build_dir)
    except USER_FACING as error:
        return report(error)
    wall = time.perf_counter() - started
    if result.run.waveform:
        result = latest_run(result)
    pictures = draw_pictures(args, result, jobs)
    if isinstance(pictures, int):
        return pictures
    facts = _facts(args, result, jobs, wall, pictures)
    if args.json:
        json.dump(facts, sys.stdout, indent=1)
        print()
    else:
        lines = _lines(args, facts)
        width = max(len(key) for key, _ in lines)
        for key, value in lines:
            print(f"  {key:<{width}}  {value}")
    if result.mismatches:
        print(f"FAIL: {result.mismatches} PSUM words differ from the golden model; "
              f"see {result.run.log}", file=sys.stderr)
        return 1
    print("PASS: every PSUM word matches the golden model", file=say)
    return 0


def latest_run(result):
    """Move a traced run's folder (waveform, log, results) to ``<tile build>/latest-run``,
    replacing the run before it, so repeated waves runs do not pile up folders; returns
    ``result`` (ProgramResult) with its ``run``'s paths pointing there."""
    run = result.run
    latest = result.build.directory / "latest-run"
    shutil.rmtree(latest, ignore_errors=True)
    run.waveform.parent.replace(latest)
    moved = {name: latest / getattr(run, name).name for name in ("waveform", "log",
                                                                 "results_xml")}
    return replace(result, run=replace(run, **moved))


def draw_pictures(args, result, jobs):
    """Write ``--timeline`` and ``--trace``; returns {kind: path} (dict of str), or exit
    status 2 after a one-line error when one cannot be written."""
    from systolica.sim.waves.timeline import draw_timeline, write_trace

    title = f"{args.rows} x {args.cols} {args.dtype} tile on {args.sim}, seed {args.seed}"
    written = {}
    try:
        if args.timeline:
            written["timeline"] = str(draw_timeline(args.timeline, result, jobs, title=title))
        if args.trace:
            written["trace"] = str(write_trace(args.trace, result, jobs, title=title))
    except OSError as error:
        print(f"error: cannot write {error.filename or 'the picture'}: {error.strerror}",
              file=sys.stderr)
        return 2
    return written


def _facts(args, result, jobs, wall, pictures):
    """The report of a random-workload run as a dict (what ``--json`` prints)."""
    k = jobs[0].stationary.shape[0]
    macs = args.matmuls * k * args.cols * args.n
    # the array's MACs per cycle for this type: an FP32 matmul spends four cycles (passes)
    # on each moving column (golden.matmul_passes)
    passes = 1 if args.transpose else matmul_passes(args.dtype)
    # the cycle model's stamps of these very commands (types, passes and modes included)
    predicted = max(t.results[-1] for t in result.predicted if t.results) + 1
    stalls = bool(args.idle or args.backpressure)
    return {
        "workload": "random", "rows": args.rows, "cols": args.cols,
        "types": args.config.types_name, "dtype": args.dtype,
        "double_row": args.double_row, "ftz": args.ftz, "transpose": args.transpose,
        "simulator": args.sim,
        "seed": args.seed, "matmuls": args.matmuls,
        "n": args.n, "idle": args.idle, "backpressure": args.backpressure, "macs": macs,
        "cycles": result.cycles, "predicted_cycles": predicted,
        "model_agrees": None if stalls else bool(predicted == result.cycles
                                                 and result.model_agrees()),
        "k": k, "macs_per_cycle": macs / result.cycles,
        "passes": passes,
        "peak_macs_per_cycle": args.rows * args.cols * (2 if args.double_row else 1) / passes,
        "mismatches": result.mismatches, "psum_words": args.matmuls * args.n * args.cols,
        "build_s": result.build.seconds, "clock_loop_s": result.seconds,
        "simulator_s": result.run.seconds, "wall_s": wall,
        "waveform": str(result.run.waveform) if result.run.waveform else None,
        "timeline": pictures.get("timeline"), "trace": pictures.get("trace"),
        "passed": result.mismatches == 0,
    }


def _lines(args, f):
    """The report's (key, text) lines, from :func:`_facts`'s dict ``f``."""
    agrees = {True: " (equal, every stamp)", False: " (DIFFERS)", None: " without stalls"}
    lines = [
        ("configuration", f"{args.rows} x {args.cols} PEs, types {f['types']}, " + (
            f"{args.dtype.upper()} transposes (stationary bits to PSUM)" if args.transpose
            else "INT8 x INT8 -> INT32" if args.dtype == "int8" else
            f"{args.dtype.upper()} x {args.dtype.upper()} -> FP32"
            + (", double-row" if args.double_row else "")
            + (", FTZ" if args.ftz else ", IEEE subnormals"))),
        ("simulator", args.sim),
        ("seed", str(args.seed)),
        ("matmuls", f"{args.matmuls} back to back, each [K={f['k']}, M={args.cols}] x "
                    f"[K={f['k']}, N={args.n}]"),
        ("MACs", f"{f['macs']:,}" + (" (beats of that many; a transpose multiplies "
                                      "nothing)" if args.transpose else "")),
        ("cycles", f"{f['cycles']:,} from reset to the last result; the timing model predicts "
                   f"{f['predicted_cycles']:,}" + agrees[f["model_agrees"]]),
        ("MACs per cycle", f"{f['macs_per_cycle']:.2f} of peak {f['peak_macs_per_cycle']:g} "
                           f"({100 * f['macs_per_cycle'] / f['peak_macs_per_cycle']:.1f}%)"
                           + (f"; {args.dtype.upper()} takes {f['passes']} cycles a moving "
                              "column" if f["passes"] > 1 else "")),
        ("mismatches", f"{f['mismatches']} ({f['psum_words']:,} PSUM words checked, "
                       f"bit for bit)"),
        ("build", f"{f['build_s']:.1f} s" if f["build_s"] else "reused"),
        ("simulation", f"{f['clock_loop_s']:.2f} s in the clock loop: "
                       f"{f['cycles'] / f['clock_loop_s']:,.0f} cycles/s, "
                       f"{f['macs'] / f['clock_loop_s']:,.0f} MACs/s "
                       f"({f['simulator_s']:.1f} s with simulator start-up)"),
        ("total wall time", f"{f['wall_s']:.1f} s"),
        ("waveform", f["waveform"] or "none (WAVES=1 or --waves to write one)"),
    ]
    lines += [(kind, f[kind]) for kind in ("timeline", "trace") if f[kind]]
    return lines
