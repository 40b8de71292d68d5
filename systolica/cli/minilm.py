"""``python -m systolica.sim --workload minilm`` (``make sim``'s default): the command line.

Exit status: 0 when every RTL result matched the golden model, every matmul was accounted
for and the accuracy targets were met; 1 on a mismatch, a failed simulation or a missed
target; 2 on bad arguments, a missing model package or tool, corrupt model files, text
longer than 512 positions, or a Dask scheduler that is malformed, unreachable or has no
workers.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from systolica.cli.progress import CostMemory, ProgramProgress, TimeLeft
from systolica.hdl.config import MX, parse_types
from systolica.scaling.cli import output_file
from systolica.sim.api.engine import (
    CONNECT_TIMEOUT,
    SchedulerError,
    check_scheduler_address,
    make_engine,
    security_from_files,
)
from systolica.sim.api.interrupt import quiet_interrupt, quiet_local_workers
from systolica.sim.builder.errors import USER_FACING, report
from systolica.sim.builder.toolchain import SIMULATORS
from systolica.sim.options import (
    WORKLOADS,
    OneLineParser,
    add_tile_arguments,
    env,
    folder,
    integer,
    resolve_config,
    resolve_tile,
)
from systolica.workloads.minilm.report import (
    article,
    format_report,
    plot_utilisation,
    report_json,
)
from systolica.workloads.minilm.run import (
    DEFAULT_PRECISIONS,
    MX_PRECISIONS,
    PRECISION_TYPES,
    TARGETS,
    default_precisions,
    model_config,
    parse_layers,
    run_model,
)
from systolica.workloads.minilm.weights import DEFAULT_SENTENCES, GEMMS


def default_workers():
    """Worker processes of the embedded cluster by default: one per core this process may
    use (int)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:         # not on Linux
        return os.cpu_count() or 1


#: Default tile side per simulator: on Verilator the real 128 x 128, whose first ``make
#: sim`` on a fresh clone (set-up and build included) takes at most 6 minutes and a repeat
#: at most 2 on the project's 2-core machine (issue 27; the figures: docs/benchmarks.md,
#: "`make sim`'s default tile"); Icarus, about 100x slower, stays at 8 x 8.
TILE_SIZES = {"icarus": 8, "verilator": 128}


def parser():
    """The argument parser of the minilm workload (argparse.ArgumentParser); defaults of
    ``--sim``, ``--rows``, ``--cols`` and ``--layers`` come from SIM, ROWS, COLS and LAYERS
    as ``make sim`` passes them, ``--scheduler``'s from DASK_SCHEDULER_ADDRESS."""
    p = OneLineParser(
        prog="systolica sim --workload minilm",
        description="Run every matmul of a real transformer (all-MiniLM-L6-v2: q, k, v, "
                    "attention scores and context per sentence and head, o, FFN up and "
                    "down) through the RTL tile in BF16, INT8 and FP8 (and MXFP8 on a tile "
                    "with the mx type set), as tile programs "
                    "spread "
                    "over Dask workers; check every PSUM word against the golden model and "
                    "report accuracy against the FP32 model (per GEMM, embeddings, sentence "
                    "similarities), cycles and NeuronCore estimates.")
    p.add_argument("--workload", choices=WORKLOADS, default="minilm",
                   help="minilm (this) or random matrices (default: $WORKLOAD or minilm)")
    add_tile_arguments(p, TILE_SIZES, types_help="what the --dtypes runs issue: bf16 "
                                                 "(BF16 attention) with int8 for int8, "
                                                 "fp8-double-row for fp8 and mx for mxfp8; "
                                                 "the default three: "
                                                 "int8+bf16+fp8-double-row")
    p.add_argument("--layers", default=env("LAYERS", "0"),
                   help="encoder layers whose GEMMs run on the tile: 0..5, a list like 0,5, "
                        "or all (default: $LAYERS or 0)")
    p.add_argument("--gemms", default=",".join(GEMMS),
                   help=f"which GEMMs of each layer (default: {','.join(GEMMS)}); scores "
                        f"and context bring their operands' transposes onto the tile too "
                        f"(q.T, k.T; p.T)")
    p.add_argument("--dtypes", default=None,
                   help=f"precision runs, some of {', '.join(TARGETS)} (fp8: float8_e4m3 "
                        f"linear GEMMs in double-row mode; mxfp8: OCP MXFP8 linear GEMMs as "
                        f"MX matmuls, on a tile with the mx type set) (default: "
                        f"{','.join(DEFAULT_PRECISIONS)}, and mxfp8 too when --types (TYPES) "
                        f"includes mx)")
    p.add_argument("--text", action="append", default=None,
                   help="a sentence to encode (repeat for more); default: six built-in "
                        "sentences, three pairs of near-duplicates")
    p.add_argument("--text-file", default=None,
                   help="a UTF-8 file with one sentence per non-empty line")
    p.add_argument("--int8-activations", choices=("token", "tensor"), default="token",
                   help="INT8 activation scales: per token, from the activations at run time "
                        "(default), or per tensor, calibrated on the batch")
    p.add_argument("--rtl-folds", type=integer(0), default=None,
                   help="run only the first N M-folds of each problem on the RTL, the rest "
                        "on the golden model (default: all on Verilator, 1 on Icarus, whose "
                        "BF16 tile runs ~100x slower)")
    p.add_argument("--build-dir", type=folder, default=None,
                   help="build folder (default: $SYSTOLICA_BUILD_DIR or the checkout's "
                        "build/; workers of a --scheduler cluster use their own default "
                        "unless given)")
    g = p.add_argument_group("where the tile programs run (Dask distributed)")
    g.add_argument("--workers", type=integer(1, "WORKERS"), default=env("WORKERS", None),
                   help=f"worker processes of the embedded local cluster (default: $WORKERS "
                        f"or one per core, here {default_workers()}); 1 runs the programs one "
                        f"after the other in this process, without Dask")
    g.add_argument("--scheduler", default=env("DASK_SCHEDULER_ADDRESS", None),
                   help="run on an existing Dask cluster: its scheduler, tcp://HOST:PORT or "
                        "tls://HOST:PORT (default: $DASK_SCHEDULER_ADDRESS; unset: a local "
                        "cluster on 127.0.0.1)")
    g.add_argument("--security", default=None, metavar="CA,CERT,KEY",
                   help="TLS for a tls:// scheduler: CA certificate, client certificate and "
                        "key (PEM files), encryption required (default: Dask's "
                        "configuration, distributed.comm.tls.*)")
    g.add_argument("--connect-timeout", type=_seconds, default=CONNECT_TIMEOUT,
                   metavar="SECONDS",
                   help=f"how long to wait for --scheduler to answer (default: "
                        f"{CONNECT_TIMEOUT:g})")
    g.add_argument("--dashboard", action="store_true",
                   help="serve the local cluster's Dask dashboard on 127.0.0.1 (address "
                        "printed; default: off)")
    p.add_argument("--json", action="store_true",
                   help="print the whole report as one JSON document on stdout (progress "
                        "and messages go to stderr)")
    p.add_argument("--plot", metavar="PNG", type=output_file, default=None,
                   help="draw each GEMM's tile utilisation (RTL, per precision, beside the "
                        "cycle model's) as a PNG")
    return p


def _seconds(text):
    """argparse type: a number of seconds > 0 and at most an hour."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 3600], not "
                                         f"{text!r}")
    return value


def _sentences(p, args):
    sentences = list(args.text or [])
    if any(not s.strip() for s in sentences):
        p.error("--text needs a non-empty sentence")
    if args.text_file:
        try:
            text = Path(args.text_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            p.error(f"cannot read --text-file {args.text_file}: {error}")
        sentences += [line.strip() for line in text.splitlines() if line.strip()]
        if not sentences:
            p.error(f"--text-file {args.text_file} holds no sentence (one per non-empty line)")
    return sentences or list(DEFAULT_SENTENCES)


def _check(p, args):
    """Validate what argparse cannot; return (layers, gemms, dtypes, sentences)."""
    if args.sim not in SIMULATORS:
        p.error(f"SIM must be one of {', '.join(SIMULATORS)}, not {args.sim!r}")
    try:
        layers = parse_layers(args.layers)
    except ValueError as error:
        p.error(f"{error} (--layers or LAYERS=...)")
    gemms = [g.strip() for g in args.gemms.split(",") if g.strip()]
    if args.dtypes is None:
        dtypes = list(default_precisions(_types_have_mx(args.types)))
    else:
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not gemms or any(g not in GEMMS for g in gemms):
        p.error(f"--gemms must list some of {', '.join(GEMMS)}, not {args.gemms!r}")
    if not dtypes or any(d not in TARGETS for d in dtypes):
        p.error(f"--dtypes must list some of {', '.join(TARGETS)}, not {args.dtypes!r}")
    if args.scheduler is not None:
        if args.workers is not None:
            p.error("--workers sizes the local cluster; with --scheduler (or "
                    "DASK_SCHEDULER_ADDRESS) the cluster's own workers run the programs")
        if args.dashboard:
            p.error("--dashboard applies to the local cluster; a --scheduler cluster serves "
                    "its own dashboard")
        try:
            check_scheduler_address(args.scheduler)
        except SchedulerError as error:
            p.error(f"{error} (--scheduler or DASK_SCHEDULER_ADDRESS)")
    elif args.security is not None:
        p.error("--security applies to a remote scheduler (--scheduler tls://HOST:PORT)")
    if args.dashboard and args.workers == 1:
        p.error("--dashboard needs the local cluster; --workers 1 runs without Dask")
    return layers, gemms, dtypes, _sentences(p, args)


def _types_have_mx(types):
    """Whether a ``--types`` value names the MX datapath (bool; a bad value is False here and
    reported by :func:`~systolica.sim.options.resolve_config`)."""
    try:
        return types is not None and MX in parse_types(types)
    except ValueError:
        return False


def main(argv=None):
    """Entry point of the minilm workload; returns the exit status (int, see the module)."""
    p = parser()
    args = resolve_tile(p.parse_args(argv))
    layers, gemms, dtypes, sentences = _check(p, args)
    resolve_config(p, args, {t for d in dtypes for t in PRECISION_TYPES[d]}, "fp8" in dtypes,
                   any(d in MX_PRECISIONS for d in dtypes))
    try:
        model_config(dtypes, config=args.config)     # what the tile must hold beyond types
    except ValueError as error:
        p.error(str(error))
    args.rows, args.cols = args.config.rows, args.config.cols
    rtl_folds = args.rtl_folds
    say = sys.stderr if args.json else sys.stdout
    if rtl_folds is None and args.sim == "icarus":
        rtl_folds = 1
        print("systolica: Icarus runs the BF16/INT8 tile at about 130 cycles/s, so only the "
              "first M-fold of each problem runs on the RTL (--rtl-folds N for more; all of "
              "layer 0 would take hours)", file=say, flush=True)
    workers = args.workers or default_workers()
    if rtl_folds == 0 and args.scheduler is None:
        workers = 1                 # nothing runs on the tile: no cluster to start
    print(f"systolica: all-MiniLM-L6-v2 on {article(args.rows)} {args.config.describe()}, "
          f"{args.sim}: "
          f"{', '.join(dtypes)}, layer{'s' if len(layers) > 1 else ''} "
          f"{','.join(map(str, layers))}; "
          + (f"Dask scheduler {args.scheduler}" if args.scheduler else
             "serial, in this process" if workers == 1 else
             f"local Dask cluster of {workers} workers")
          + " (first use of a configuration builds it) ...", file=say, flush=True)
    memory = _cost_memory(args)
    remembered, build_pending = memory.load() if memory else (None, True)
    progress = ProgramProgress(enabled=True, time_left=TimeLeft(
        workers, remembered=remembered, build_pending=build_pending))
    engine = None
    with quiet_interrupt():
        try:
            security = security_from_files(args.security) if args.security else None
            engine = make_engine(None if args.scheduler else workers, scheduler=args.scheduler,
                                 security=security, dashboard=args.dashboard,
                                 on_done=progress.program_done, timeout=args.connect_timeout)
            quiet_local_workers(engine)
            if args.dashboard:
                print(f"systolica: {engine.description}", file=say, flush=True)
            run = run_model(sentences, dtypes=dtypes, layers=layers, gemms=gemms,
                            config=args.config, simulator=args.sim,
                            rtl_folds=rtl_folds, int8_activations=args.int8_activations,
                            build_root=args.build_dir, engine=engine, on_plan=progress.plan,
                            on_gemm=_layer_notes(progress, gemms))
        except USER_FACING as error:
            progress.stop()
            return report(error)
        except KeyboardInterrupt:
            progress.stop()
            print("interrupted", file=sys.stderr)
            return 130
        finally:
            progress.stop()
            if engine is not None:
                engine.close()
    cost = progress.time_left.cost()
    if memory and cost is not None and cost is not remembered:
        memory.save(cost)
    if args.json:
        json.dump(report_json(run), sys.stdout, indent=1)
        print()
    else:
        print()
        for line in format_report(run):
            print(line)
        print(f"\n  total wall time {run.seconds:.1f} s")
    if args.plot:
        try:
            print(f"  utilisation plot {plot_utilisation(run, args.plot)}", file=say)
        except OSError as error:
            print(f"error: cannot write {args.plot}: {error.strerror}", file=sys.stderr)
            return 2
    return _verdict(run, say)


def _cost_memory(args):
    """Where this configuration's measured costs are remembered (CostMemory), or None for
    workers of a --scheduler cluster (they build in their own folders). Raises
    BuildFolderError when the local build folder cannot be used (the local workers share it),
    before any worker starts."""
    if args.scheduler is not None:
        return None
    from systolica.sim.builder.generate import hdl_fingerprint
    from systolica.sim.builder.runner import build_folder, verilator_args

    root = build_folder(args.build_dir)   # BuildFolderError: one line, before any worker starts
    return CostMemory(root, f"{args.config.label} {args.sim}",
                      f"{hdl_fingerprint()} {' '.join(verilator_args())}")


def _layer_notes(progress, gemms):
    """An ``on_gemm`` callback that prints one progress line per finished layer and
    precision (its GEMMs' programs, matmuls, cycles and mismatches added up)."""
    last = [g for g in GEMMS if g in gemms][-1]
    sums = {}

    def on_gemm(g):
        s = sums.setdefault((g.dtype, g.layer), [0, 0, 0, 0])
        for i, v in enumerate((g.programs, g.matmuls, g.cycles, g.mismatches + g.differing)):
            s[i] += v
        if g.gemm == last:
            progress.note(f"{g.dtype} layer {g.layer} done: {s[0]} program"
                          f"{'s' if s[0] != 1 else ''}, {s[1]:,} matmuls, {s[2]:,} cycles, "
                          f"{s[3]} mismatches")
    return on_gemm


def _verdict(run, say):
    targets = run.meets_targets()
    if not run.exact:
        print("FAIL: RTL results differ from the golden model, or matmuls are unaccounted "
              "for", file=sys.stderr)
        return 1
    if not all(targets.values()):
        missed = ", ".join(d for d, ok in targets.items() if not ok)
        print(f"FAIL: accuracy target missed ({missed})", file=sys.stderr)
        return 1
    if run.rtl_folds == 0:
        print("PASS: accuracy targets met (no GEMM ran on the RTL: --rtl-folds 0)", file=say)
    else:
        print("PASS: every PSUM word matches the golden model, every matmul accounted for; "
              "accuracy targets met", file=say)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
