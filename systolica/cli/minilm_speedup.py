"""``systolica minilm-speedup`` (``make minilm-speedup``): the MiniLM workload on the local
Dask cluster and serially.

Builds the tile once, then runs the same workload (default: all six layers, BF16 and INT8,
every matmul on the tile) twice on that build: on the embedded local cluster (one worker per
core, or ``--workers``/$WORKERS) and with ``--workers 1`` (serial, in-process). Prints both
wall times (cluster start-up and shut-down included), their ratio, and whether the two runs
agree bit for bit (embeddings, and every GEMM's programs, matmuls, cycles and mismatches).

Beside the wall times it prints what bounds the ratio on the machine it ran on: the CPU
seconds each run used (this process and every process it started: workers, simulators),
the cores that makes on average, and the CPU the machine's other processes took meanwhile
(from ``/proc/stat``; Linux only). The cluster run cannot finish in less than its CPU
seconds over its cores (workers, at most the machine's), so the ratio cannot go below that
over the serial wall time, whatever the scheduling. On a machine of its own the serial run
keeps about one core busy, so the cluster run's CPU seconds over its cores, divided by the
serial run's CPU seconds, is about the ratio such a machine would give.

Exit status: 0 when both runs are exact, complete, meet the accuracy targets and agree;
1 otherwise; 2 on bad arguments or a missing tool.
"""

import json
import os
import sys
import time

from systolica.cli.minilm import default_workers
from systolica.sim.api.engine import SerialEngine, make_engine
from systolica.sim.builder.errors import USER_FACING, report
from systolica.sim.options import OneLineParser, add_tile_arguments, env, integer, resolve_tile
from systolica.workloads.minilm.run import TARGETS, parse_layers, run_model


def fingerprint(run):
    """What must not depend on where the programs ran (dict): per precision the embeddings'
    bytes and per GEMM ``(layer, gemm, programs, matmuls, cycles, mismatches, differing)``."""
    return {dtype: (prec.embeddings.tobytes(),
                    [(g.layer, g.gemm, g.programs, g.matmuls, g.cycles, g.mismatches,
                      g.differing) for g in prec.gemms])
            for dtype, prec in run.runs.items()}


def machine_busy_seconds():
    """CPU seconds every process of the machine has used since boot (float, from
    ``/proc/stat``: user, nice, system, irq, softirq, steal), or None where that file is
    not there."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds():
    """CPU seconds of this process and of its finished child processes (float)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(engine_factory, **kwargs):
    """Run the workload on a fresh engine; return ``(run, figures)`` with the wall time,
    the CPU seconds of this process and every process it started (the engine is closed,
    so its worker processes have ended and count), and the machine's other processes' CPU
    seconds over the same time (None without ``/proc/stat``)."""
    machine, cpu, started = machine_busy_seconds(), own_cpu_seconds(), time.perf_counter()
    engine = engine_factory()
    try:
        run = run_model(engine=engine, **kwargs)
    finally:
        engine.close()
    wall, cpu = time.perf_counter() - started, own_cpu_seconds() - cpu
    others = None if machine is None else max(0.0, machine_busy_seconds() - machine - cpu)
    return run, {"wall": wall, "cpu": cpu, "others": others}


def cpu_split(run, figures):
    """A run's CPU seconds split (dict): ``simulators`` (the simulator processes),
    ``host`` (the programs' host side where they ran: stimulus, golden model, checking) and
    ``rest`` (the FP32 model and the client; with Dask also the scheduler and the worker
    processes' own start-up and upkeep)."""
    sims, host = run.ledger.sim_cpu_seconds, run.ledger.host_cpu_seconds
    return {"simulators": sims, "host": host, "rest": max(0.0, figures["cpu"] - sims - host)}


def accuracy_lines(run):
    """The accuracy of a run per precision, as text lines (list of str)."""
    targets = run.meets_targets()
    lines = [f"  {'precision':<10}{'cosine min':>12}{'target':>9}{'sim. max|diff|':>16}"
             f"{'neighbours':>22}{'exact':>7}{'met':>5}"]
    for dtype, prec in run.runs.items():
        neighbours = (f"[{' '.join(map(str, prec.neighbours))}] "
                      + ("same" if prec.neighbours_unchanged else "CHANGED"))
        lines.append(f"  {dtype:<10}{prec.cosines.min():>12.6f}{TARGETS[dtype]:>9}"
                     f"{prec.similarity_max_diff:>16.2e}{neighbours:>22}"
                     f"{'yes' if prec.exact else 'NO':>7}{'yes' if targets[dtype] else 'NO':>5}")
    return lines


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
        parallel, par = _timed(lambda: make_engine(workers), **common)
        print(f"local cluster: {par['wall']:.1f} s; now serially ...", file=sys.stderr,
              flush=True)
        serial, ser = _timed(SerialEngine, **common)
    except USER_FACING as error:
        return report(error)
    same = fingerprint(parallel) == fingerprint(serial)
    good = all(r.exact and all(r.meets_targets().values()) for r in (parallel, serial))
    parallel_s, serial_s = par["wall"], ser["wall"]
    cores = os.cpu_count() or 1
    # The cluster run cannot end sooner than its CPU seconds over the cores it can use.
    usable = min(cores, workers)
    bound = par["cpu"] / usable / serial_s
    # On a machine of its own the serial run keeps about one core busy (its wall time is
    # about its CPU-s) and the cluster run at best all of its cores.
    free = par["cpu"] / usable / ser["cpu"]
    figures = {"layers": layers, "tile": f"{args.rows}x{args.cols}", "simulator": args.sim,
               "workers": workers, "parallel_seconds": parallel_s, "serial_seconds": serial_s,
               "ratio": parallel_s / serial_s, "bit_identical": same, "exact_and_on_target":
               good, "programs": serial.ledger.programs, "matmuls": serial.ledger.matmuls,
               "cosine_min": {d: float(r.cosines.min()) for d, r in serial.runs.items()},
               "cpu_seconds": {"parallel": par["cpu"], "serial": ser["cpu"]},
               "cpu_split": {"parallel": cpu_split(parallel, par),
                             "serial": cpu_split(serial, ser)},
               "other_processes_cpu_seconds": {"parallel": par["others"],
                                               "serial": ser["others"]},
               "cores": cores, "ratio_bound": bound, "ratio_on_a_free_machine": free}
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        def cpu(fig):
            text = (f"{fig['cpu']:7.1f} CPU-s, {fig['cpu'] / fig['wall']:.2f} cores busy on "
                    f"average")
            if fig["others"] is not None:
                text += (f"; other processes {fig['others'] / fig['wall']:.2f} of the "
                         f"{cores} cores")
            return text

        split = {name: cpu_split(r, fig) for name, r, fig in (("parallel", parallel, par),
                                                               ("serial", serial, ser))}
        print(f"  local cluster, {workers} workers  {parallel_s:8.1f} s   {cpu(par)}\n"
              f"  serial (--workers 1)     {serial_s:8.1f} s   {cpu(ser)}\n"
              f"  ratio                    {parallel_s / serial_s:8.2f}   (at best "
              f"{bound:.2f}: the cluster run's CPU-s over {usable} cores, / serial wall)\n"
              f"  on a free machine about  {free:8.2f}   (the cluster run's CPU-s over "
              f"{usable} cores, / the serial run's CPU-s)\n"
              f"  CPU-s: simulators, program host side, rest (FP32 model, client, "
              f"Dask)\n"
              + "".join(f"    {name:<22}{v['simulators']:8.1f}{v['host']:8.1f}"
                        f"{v['rest']:8.1f}\n" for name, v in split.items())
              + f"  programs, matmuls        {serial.ledger.programs:,}, "
              f"{serial.ledger.matmuls:,} (each checked once in both runs)\n"
              f"  bit for bit the same     {'yes' if same else 'NO'}\n"
              f"  exact, targets met       {'yes' if good else 'NO'}\n"
              f"Accuracy against the FP32 model (serial run; the cluster run's is the same "
              f"bit for bit when the line above says so):")
        print("\n".join(accuracy_lines(serial)))
    return 0 if same and good else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
