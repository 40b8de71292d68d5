"""``systolica waves`` (``make waves``): the random workload, or one cocotb regression test,
run with tracing on; writes the waveform and a GTKWave save file for it
(:mod:`systolica.sim.waves.gtkwave`) and opens GTKWave when a display is available.

Exit status: 0 when the run passed, 1 when it mismatched or the test failed (the waveform is
still written), 2 on bad arguments or a missing tool.
"""

import json
import os
import shutil
import sys

from systolica.hdl.config import MX, TileConfig
from systolica.hdl.layouts import MX_GROUP_ROWS
from systolica.sim.builder.errors import USER_FACING, SimulationError, report
from systolica.sim.builder.runner import WAVE_FORMATS, build, run_tests
from systolica.sim.options import resolve_config, resolve_tile
from systolica.sim.waves.gtkwave import (
    MX_ELEMENTS,
    TEST_MODULE,
    MxLanes,
    ViewerNotFoundError,
    gtkwave_command,
    lane_mode,
    open_or_print,
    reproduce_dir,
    tile_test_names,
    write_save_file,
)

from . import simulate

# ---- command line ------------------------------------------------------------------------

def parser():
    """The argument parser of ``systolica waves`` (argparse.ArgumentParser).

    It is ``systolica sim``'s (same workload options, same defaults from SIM, ROWS,
    COLS, DTYPE, FTZ and SEED) plus ``--format`` (default ``$FORMAT`` or ``fst``), ``--test``,
    ``--mx`` / ``--mx-psum`` (defaults ``$MX``, ``$MX_PSUM``) and ``--open``/``--no-open``;
    tracing is always on.
    """
    p = simulate.parser()
    p.prog = "systolica waves"
    for action in p._actions:          # waves trace the random workload only
        if action.dest == "workload":
            action.choices, action.default = ("random",), "random"
            action.help = "random (the only workload waves trace; default)"
    p.description = ("Run the random workload of 'systolica sim --workload random' "
                     "(or, with --test, one cocotb regression test) "
                     "with tracing on, write the waveform and a GTKWave save file for it, and "
                     "open GTKWave when a display is available (else print the command).")
    fmt = os.environ.get("FORMAT") or "fst"
    p.add_argument("--format", default=fmt,
                   help="waveform format: fst or vcd (default: $FORMAT or fst)")
    p.add_argument("--test", default=None,
                   help="run this one test of systolica.tb.cases.tile instead of the workload "
                        "(--seed is its COCOTB_RANDOM_SEED)")
    p.add_argument("--mx", metavar="STYPE[,MTYPE]", default=os.environ.get("MX") or None,
                   help="run MX matmuls (nc_matmul_mx) instead of --dtype ones, with x4 words "
                        f"of these element types ({', '.join(MX_ELEMENTS)}; one name: both "
                        "sides), random normal values quantised with E8M0 scales, K the "
                        f"largest multiple of {4 * MX_GROUP_ROWS} <= 4 x rows; the tile gets "
                        "the mx type set (default: $MX)")
    p.add_argument("--mx-psum", choices=MX_PSUM, default=os.environ.get("MX_PSUM") or "fp32",
                   help="PSUM words of the --mx matmuls: fp32, bf16 (round to nearest even) "
                        "or stochastic (BF16, stochastic rounding from a random seed) "
                        "(default: $MX_PSUM or fp32)")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--open", dest="open_viewer", action="store_true", default=None,
                      help="open GTKWave (an error when there is no display or no gtkwave)")
    view.add_argument("--no-open", dest="open_viewer", action="store_false",
                      help="only print the gtkwave command")
    return p


#: PSUM destinations of ``--mx-psum``.
MX_PSUM = ("fp32", "bf16", "stochastic")


def _check_mx(p, args):
    """Parse ``--mx`` into ``args.mx`` ((stationary, moving) element names, or None) and give
    the tile the mx type set."""
    if args.mx is None:
        if args.mx_psum != "fp32":
            p.error("--mx-psum (MX_PSUM) applies to --mx (MX) matmuls; add --mx STYPE[,MTYPE]")
        return
    names = args.mx.split(",")
    if len(names) > 2 or any(name not in MX_ELEMENTS for name in names):
        p.error(f"--mx (MX) must be one or two of {', '.join(MX_ELEMENTS)} joined by ',', "
                f"not {args.mx!r}")
    if args.mx_psum not in MX_PSUM:
        p.error(f"MX_PSUM must be one of {', '.join(MX_PSUM)}, not {args.mx_psum!r}")
    if args.test is not None:
        p.error("--mx runs MX matmuls in the random workload; drop it with --test")
    for flag, given in (("--transpose", args.transpose), ("--double-row", args.double_row),
                        ("--ftz", args.ftz)):
        if given:
            p.error(f"--mx: MX matmuls take no {flag}")
    if args.timeline or args.trace:
        p.error("--mx: --timeline and --trace draw programs of nc_matmul operands only; drop "
                "them with --mx")
    if args.rows < MX_GROUP_ROWS:
        p.error(f"--mx needs at least {MX_GROUP_ROWS} rows (an MX matmul's K is a multiple of "
                f"{MX_GROUP_ROWS} partition rows), not {args.rows}")
    args.mx = (names[0], names[-1])
    config = args.config
    if not config.mx:
        if args.types is not None:
            p.error(f"--types {args.types} (TYPES) lacks mx, which --mx issues; allowed: a type "
                    f"set holding mx (such as int8+mx), or no --types")
        args.config = TileConfig(config.rows, config.cols, (*config.types, MX))


def _check_args(p, args):
    simulate.check_args(p, args)
    _check_mx(p, args)
    if args.test is not None and args.types is None:
        args.types = "all"      # the regression's tests use every type
        resolve_config(p, args)
    if args.format not in WAVE_FORMATS:
        p.error(f"FORMAT must be one of {', '.join(WAVE_FORMATS)}, not {args.format!r}")
    if args.test is not None and args.test not in tile_test_names():
        p.error(f"--test: no cocotb test {args.test!r} in {TEST_MODULE}; choose one of: "
                f"{', '.join(tile_test_names())}")
    if args.open_viewer and not os.environ.get("DISPLAY"):
        p.error("--open: no display ($DISPLAY is unset); drop --open to print the command")
    if args.open_viewer and shutil.which("gtkwave") is None:
        p.error("--open: gtkwave is not on PATH; install it with 'apt-get install gtkwave'")


def mx_workload(args):
    """The MX matmuls of ``--mx`` (list of MatmulMx): ``args.matmuls`` of a stationary
    [P, cols, 4] and a moving [P, n, 4] of the ``args.mx`` element types, P the largest
    multiple of 8 <= rows (K = 4 P), standard normal values quantised by
    ``golden.quantize_mx`` (OCP rule: E8M0 scales per 8 partitions x 4 lanes), seeded by
    ``args.seed``; PSUM FP32 or BF16 (``args.mx_psum``; stochastic with a random seed)."""
    import ml_dtypes
    import numpy as np

    from systolica.golden.mx import quantize_mx
    from systolica.sim.api.runs import MatmulMx

    rng = np.random.default_rng(args.seed)
    p = args.rows // MX_GROUP_ROWS * MX_GROUP_ROWS

    def operand(name, f):
        src = rng.standard_normal((p, f, 4)).astype(np.float32)
        return quantize_mx(src, MX_ELEMENTS[name], rule="ocp")

    jobs = []
    for _ in range(args.matmuls):
        (stationary, s_scale), (moving, m_scale) = (operand(args.mx[0], args.cols),
                                                    operand(args.mx[1], args.n))
        bf16 = args.mx_psum != "fp32"
        jobs.append(MatmulMx(stationary, moving, s_scale, m_scale,
                             dst_dtype=ml_dtypes.bfloat16 if bf16 else np.float32,
                             rounding="stochastic" if args.mx_psum == "stochastic" else "rne",
                             seed=int(rng.integers(1 << 32))))
    return jobs


def _run_workload(args):
    from systolica.sim.api.runs import run_program

    jobs = mx_workload(args) if args.mx else simulate.workload(args)
    # MX waves come from the bulk driver (its harness holds the tile as ``tile``; the MX
    # save file names that scope).
    result = run_program(jobs, config=args.config, simulator=args.sim, waves=True,
                         seed=args.seed, idle=args.idle, backpressure=args.backpressure,
                         build_root=args.build_dir, wave_format=args.format,
                         driver="bulk" if args.mx else None)
    what = "transposes" if args.transpose else "matmuls"
    dtype = f"MX {' x '.join(args.mx)} -> {args.mx_psum}" if args.mx else args.dtype
    summary = (f"{args.matmuls} {dtype} {what}, {result.cycles:,} cycles, "
               f"{result.mismatches} PSUM mismatches")
    mode = (MxLanes(*args.mx, psum="fp32" if args.mx_psum == "fp32" else "bf16") if args.mx
            else args.dtype)
    if result.run.waveform:
        result = simulate.latest_run(result)
    pictures = simulate.draw_pictures(args, result, jobs)
    if isinstance(pictures, int):
        return result.run.waveform, mode, summary, pictures
    summary += "".join(f"; {kind} {path}" for kind, path in pictures.items())
    return result.run.waveform, mode, summary, 1 if result.mismatches else 0


def _run_test(args):
    directory = reproduce_dir(args.config, args.sim, args.test, args.seed,
                              wave_format=args.format, build_root=args.build_dir)
    shutil.rmtree(directory, ignore_errors=True)
    tile = build(args.config, args.sim, waves=True, build_root=args.build_dir,
                 wave_format=args.format)
    run = run_tests(tile, TEST_MODULE, directory, seed=args.seed, testcase=args.test)
    if run.tests != 1:
        raise SimulationError(f"expected to run 1 test, ran {run.tests}; see {run.log}")
    verdict = "FAILED" if run.failed else "passed"
    return run.waveform, lane_mode(args.test), f"{args.test} {verdict}; log {run.log}", \
        1 if run.failed else 0


def main(argv=None):
    """Entry point of ``systolica waves``; returns the exit status (int).

    0: the run passed and the waveform was written; 1: the workload mismatched or the test
    failed (the waveform is still written: that is the point); 2: bad arguments or a missing
    tool.
    """
    p = parser()
    args = resolve_tile(p.parse_args(argv))
    if args.workload != "random" or os.environ.get("WORKLOAD") not in (None, "", "random"):
        p.error("waves trace the random workload only (the real model's tens of thousands of "
                "matmuls would make a huge waveform); drop --workload/WORKLOAD, or pick one "
                "regression test with --test")
    _check_args(p, args)
    if args.test and (args.timeline or args.trace):
        p.error("--timeline and --trace draw the random workload's program; drop them with "
                "--test")
    say = sys.stderr if args.json else sys.stdout
    what = f"test {args.test}" if args.test else "the random workload"
    print(f"systolica waves: {what} on a {args.config.describe()}, {args.sim}, "
          f"{args.format.upper()} ...", file=say, flush=True)
    try:
        waveform, mode, summary, status = (_run_test if args.test else _run_workload)(args)
    except USER_FACING as error:
        return report(error)
    if waveform is None:
        print("error: the simulator wrote no waveform", file=sys.stderr)
        return 1
    save = write_save_file(waveform.with_suffix(".gtkw"), waveform, config=args.config,
                           simulator=args.sim, mode=mode,
                           harness=bool(getattr(args, "mx", None)))
    print(f"  run             {summary}", file=say)
    print(f"  waveform        {waveform}", file=say)
    print(f"  save file       {save}", file=say)
    try:
        opened = open_or_print(waveform, save, open_viewer=args.open_viewer, out=say)
    except ViewerNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"run": summary, "waveform": str(waveform), "save_file": str(save),
                          "gtkwave": gtkwave_command(waveform, save), "opened": opened,
                          "passed": status == 0}, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
