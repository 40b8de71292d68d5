"""RTL code coverage: a Verilator ``--coverage-line --coverage-toggle`` build of the bulk
harness, driven by fuzz programs, reported per ``hdl/`` module.

``systolica rtl-coverage`` (part of ``make coverage``) builds a 4 x 4 tile
with coverage, runs ``--programs`` fuzzed programs on it (all command kinds, every stall
level), merges the runs' ``coverage.dat`` and prints line and toggle coverage per ``hdl/``
module (each Verilog module maps to the Amaranth file it came from; points of every
instance of a module are merged), the modules below the targets (95 % line, 90 % toggle:
reported, not a failure) and with ``--list`` every uncovered point. The coverage files
stay in ``<build>/rtlcov/``; ``verilator_coverage --annotate`` can annotate the generated
Verilog from them.

Besides the fuzzed programs, one directed program sends :data:`WRAP` illegal commands, so
the 16-bit ``status.rejected`` count wraps and every bit of it toggles both ways.

**Exclusions.** A toggle point whose bit did not move both ways is a candidate (one way
only is what a constant 1 shows). :func:`prove_constant` excludes it when the netlist
ties it, else when Yosys's SAT solver proves it constant on its own module of the same
Verilog in one cycle (every input and every register state free, undriven wires at 0 as
Verilator holds them), else when it holds in every reachable state of its module by
induction over the clock cycles, jointly with the module's other candidates
(:func:`prove_invariant`: values bounded by what the tile accepts, such as a queued
command's bank below 8, which each queue entry takes from the next). It cannot toggle by
construction. Before trusting a run of the prover, bits that did toggle in the runs are
put to it too; if it calls one of them constant, nothing is excluded
(:class:`ProverDisagrees`). What none of the three shows stays in the denominator.
"""

import re
import shutil
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from systolica.sim.options import OneLineParser, add_json_argument, integer, report_as_json

from . import fuzz

#: Verilog module (as the generator names them) -> the hdl file it comes from.
MODULE_FILES = (
    (re.compile(r"\.multiplier(_hi)?$"), "float_mul.py"),
    (re.compile(r"\.adder(_\d+)?$"), "fp32_add.py"),
    (re.compile(r"^systolica_pe$"), "pe.py"),
    (re.compile(r"\.array$"), "array.py"),
    (re.compile(r"skew$"), "skew.py"),
    (re.compile(r"\.psum(\$\d+)?$"), "psum.py"),
    (re.compile(r"^systolica_tile\.queue$"), "command_queue.py"),
    (re.compile(r"^systolica_tile\.loader$"), "loader.py"),
    (re.compile(r"^systolica_tile\.issue$"), "issue.py"),
    (re.compile(r"^systolica_tile\.result$"), "result.py"),
    (re.compile(r"^systolica_tile$"), "tile.py"),
)
#: Tile of the coverage build.
ROWS = COLS = 4
TARGETS = {"line": 95.0, "toggle": 90.0}
#: Harness memory depth of the coverage build (the wrap program's commands fit).
DEPTH = 1 << 17
#: Illegal commands of the directed counter-wrap program (the count wraps at 2^16).
WRAP = 1 << 16
#: Bits that toggled, per module, that the prover must not call constant (its check).
CONTROLS = 12
#: Seconds one proof may take; a bit not proved by then stays in the denominator (the
#: shared float multiplier's proofs can take minutes each).
SAT_TIMEOUT = 5


def hdl_file(module):
    """The hdl file a Verilog module comes from (str), or None (the harness)."""
    module = module.lstrip("\\").strip()
    for pattern, name in MODULE_FILES:
        if pattern.search(module):
            return name
    return None


def coverage_folder(rows, cols, build_root=None):
    """The folder of a coverage build (Path): ``<build root>/rtlcov/<rows>x<cols>``, the
    build root ``build_root``, else the default one
    (:func:`~systolica.sim.builder.runner.build_folder`, which raises ValueError when it is
    unusable)."""
    from systolica.sim.builder.runner import build_folder

    root = build_folder(build_root)
    return root / "rtlcov" / f"{rows}x{cols}"


@contextmanager
def exclusive(folder):
    """Hold ``folder``'s lock for the block (one coverage run per build folder: a second
    one would delete the first one's runs). Raises :class:`Busy` at once if it is held."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "rtlcov.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"another rtl-coverage run is using {folder}; wait for it, or give "
                       f"this one its own build folder (SYSTOLICA_BUILD_DIR=...)") from None
        yield


class Busy(RuntimeError):
    """Another coverage run holds the build folder."""


def build(rows, cols, build_root=None):
    """Build the coverage-instrumented bulk harness (cached); return its Build."""
    import hashlib

    from systolica.hdl.config import TileConfig
    from systolica.sim.builder.generate import write_configuration
    from systolica.sim.builder.runner import Build, _run_build
    from systolica.sim.builder.toolchain import prepare_environment
    from systolica.tb.bulk import HARNESS

    prepare_environment("verilator")
    tile = TileConfig(rows, cols)       # every type: the fuzzer draws them all
    config = coverage_folder(rows, cols, build_root)
    verilog, ports = write_configuration(tile, config / "verilog")
    depth = DEPTH
    directory = config / f"verilator-bulk{depth}"
    want = hashlib.sha256(verilog.read_bytes() + HARNESS.read_bytes()).hexdigest()
    stamp = directory / "systolica.stamp"
    if not (stamp.is_file() and stamp.read_text() == want):
        _progress(f"building the coverage harness in {directory} (Verilator --coverage; "
                  f"minutes)")
        _run_build("verilator", verilog, directory, False, False, depth, None,
                   extra_args=("--coverage-line", "--coverage-toggle"), config=tile)
        stamp.write_text(want)
    return Build(tile, "verilator", False, verilog, ports, directory, 0.0, "fst", depth)


def read_points(paths):
    """Coverage points of Verilator ``coverage.dat`` files, summed over the files:
    ``{(kind, module, file, line, name): count}`` (kind ``line`` or ``toggle``)."""
    points = defaultdict(int)
    for path in paths:
        for raw in Path(path).read_text(errors="replace").splitlines():
            if not raw.startswith("C '"):
                continue
            body, count = raw[3:].rsplit("' ", 1)
            fields = {}
            for item in body.split("\x01")[1:]:
                key, _, value = item.partition("\x02")
                fields[key] = value
            page = fields.get("page", "")
            kind = "line" if page.startswith("v_line") else "toggle" if page.startswith(
                "v_toggle") else None
            if kind is None:
                continue
            module = page.split("/", 1)[1] if "/" in page else ""
            key = (kind, module, fields.get("f", ""), int(fields.get("l", 0) or 0),
                   fields.get("o", ""))
            points[key] += int(count)
    return points


def _bit_key(module, name):
    """``(module, signal, bit)`` of a toggle point's name, or None."""
    match = _POINT.match(name)
    if match is None:
        return None
    signal = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), match["name"])
    return (module.lstrip("\\").strip(), signal,
            None if match["bit"] is None else int(match["bit"]))


def per_file(points, excluded=()):
    """``{hdl file: {kind: [covered, total, [uncovered points]], "excluded": n}}``; toggle
    points of a bit in ``excluded`` (``(module, signal, bit)`` keys, see
    :func:`prove_constant`) are left out of the totals and counted in ``excluded``."""
    table = defaultdict(lambda: {"line": [0, 0, []], "toggle": [0, 0, []], "excluded": 0})
    for (kind, module, _file, line, name), count in points.items():
        target = hdl_file(module)
        if target is None:
            continue
        if kind == "toggle" and excluded and _bit_key(module, name) in excluded:
            table[target]["excluded"] += 1
            continue
        entry = table[target][kind]
        entry[1] += 1
        if count:
            entry[0] += 1
        else:
            entry[2].append(f"{module} line {line} {name}")
    return table


_ESCAPE = re.compile(r"__0([0-9a-fA-F]{2})")
_POINT = re.compile(r"^(?P<name>.+?)(\[(?P<bit>\d+)\])?:(?P<edge>0->1|1->0)$")


def toggle_bits(points):
    """``{(module, signal, bit): (toggled 0->1, toggled 1->0)}`` from toggle points (the
    signal named as in the Verilog: Verilator's ``__0XX`` escapes decoded; ``bit`` None
    for a 1-bit signal); the instances of a module merged."""
    out = defaultdict(lambda: [False, False])
    for (kind, module, _file, _line, name), count in points.items():
        key = _bit_key(module, name) if kind == "toggle" else None
        if key is None or hdl_file(module) is None:
            continue
        out[key][name.endswith("1->0")] |= count > 0
    return {key: tuple(v) for key, v in out.items()}


class ProverDisagrees(RuntimeError):
    """The SAT check called a bit constant that the simulation saw toggle."""


#: Yosys reading the coverage build's Verilog: undriven wires at 0 (as Verilator holds
#: them) and no initial values, so that ``sat`` starts from any register state (with the
#: ``init`` attributes kept it starts from them and "proved" bits that toggled; the control
#: bits caught that). :data:`_READ_INIT` keeps them: the base case of an induction.
_READ = ("read_verilog {}\nhierarchy -top systolica_tile\nproc\nsetundef -undriven -zero\n"
         "setattr -unset init w:*\n")
_READ_INIT = _READ.rsplit("setattr", 1)[0]


def _alias(key, aliases, lines):
    """``key``'s bit as ``sat`` reads it: its wire renamed (by a line added to ``lines``,
    once per wire, ``aliases`` keeps the names) to a plain alias. ``sat`` reads "name[bit]"
    as a wire of that name if there is one (the skew's o and o[0]), and stops on some
    characters."""
    signal, bit = key[1], key[2]
    if signal not in aliases:
        aliases[signal] = f"\\cov_alias_{len(aliases)}"
        lines.append(f"rename \\{signal} {aliases[signal]}")
    return aliases[signal] + (f"[{bit}]" if bit is not None else "")


def _sat_script(read, jobs, assume=None, together=False):
    """A Yosys script proving each ``((module, signal, bit), value)`` of ``jobs``, each
    proof after a ``MARK <n>`` log line (``n`` its index in ``jobs``).

    Without ``assume``, one clock cycle (``sat -seq 1``; every input free and, with
    :data:`_READ`, every register state). With ``assume`` (``{module: {key: value}}``),
    the induction step: those bits of the job's module at their values in cycle 1, the
    bit proved in cycle 2 (``sat -seq 2 -prove-skip 1``). ``together``: one proof of all
    of a module's jobs at once (its ``MARK`` is the module's first job's index)."""
    lines = [read]
    by_module = defaultdict(list)
    for n, (key, value) in enumerate(jobs):
        by_module[key[0]].append((n, key, value))
    for module, items in by_module.items():
        lines.append(f"cd \\{module}")
        aliases = {}
        given = "-seq 1" if assume is None else "-seq 2 -prove-skip 1 " + " ".join(
            f"-set-at 1 {_alias(key, aliases, lines)} 1'{value}"
            for key, value in assume[module].items())
        proofs = [(n, f"-prove {_alias(key, aliases, lines)} 1'{value}")
                  for n, key, value in items]
        if together:
            proofs = [(items[0][0], " ".join(proof for _, proof in proofs))]
        for n, proof in proofs:
            lines += [f"log MARK {n}",
                      f"sat {given} -ignore_unknown_cells -timeout {SAT_TIMEOUT} {proof}"]
        lines.append("cd ..")
    return "\n".join(lines) + "\n"


def _run_proofs(folder, scripts):
    """Run Yosys ``scripts`` side by side; per script, the set of ``MARK`` indices whose
    proof succeeded."""
    import subprocess

    from systolica.verif.netlist import yosys

    running = []
    for n, script in enumerate(scripts):
        (folder / f"prove{n}.ys").write_text(script)
        running.append(subprocess.Popen(
            [yosys(), "-q", "-l", f"prove{n}.log", f"prove{n}.ys"], cwd=folder,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    out = []
    for n, process in enumerate(running):
        _, error = process.communicate()
        text = (folder / f"prove{n}.log").read_text(errors="replace")
        if process.returncode:
            raise RuntimeError(f"yosys failed: {(error or text)[-1500:]}")
        proved, current = set(), None
        for line in text.splitlines():
            if line.startswith("MARK "):
                current = int(line.split()[1])
            elif "no model found: SUCCESS!" in line and current is not None:
                proved.add(current)
                current = None
        out.append(proved)
    return out


def _prove_all(folder, read, jobs, assume=None, together=True):
    """The indices of ``jobs`` (``[(key, value)]``) proved (see :func:`_sat_script`):
    first (if ``together``) all of a module's jobs in one proof, then, for the modules
    where that fails, each job on its own; two Yosys processes side by side (modules split
    between them)."""
    def run(indices, at_once):
        modules = sorted({jobs[n][0][0] for n in indices})
        halves = [[n for n in indices if modules.index(jobs[n][0][0]) % 2 == side]
                  for side in (0, 1)]
        halves = [half for half in halves if half]
        found = _run_proofs(folder, [_sat_script(read, [jobs[n] for n in half], assume,
                                                 at_once) for half in halves])
        return {half[i] for half, marks in zip(halves, found, strict=True) for i in marks}

    proved = set()
    if together:
        done = {jobs[n][0][0] for n in run(range(len(jobs)), True)}
        proved = {n for n, (key, _) in enumerate(jobs) if key[0] in done}
    rest = [n for n in range(len(jobs)) if n not in proved]
    return proved | (run(rest, False) if rest else set())


def _netlist(verilog, folder):
    """``({(module, signal): [bit, ...]}, {module with registers})`` of the Verilog as
    Yosys reads it (undriven wires at 0): each bit a net number, or ``"0"``/``"1"`` where
    the netlist ties it."""
    import json

    from systolica.verif.netlist import run_yosys

    run_yosys(_READ.format(verilog.name) + "write_json netlist.json\n", folder)
    design = json.loads((folder / "netlist.json").read_text())
    nets = {(module.lstrip("\\"), name): net["bits"]
            for module, body in design["modules"].items()
            for name, net in body.get("netnames", {}).items()}
    stateful = {module.lstrip("\\") for module, body in design["modules"].items()
                if any("dff" in cell["type"] for cell in body.get("cells", {}).values())}
    return nets, stateful


def prove_invariant(verilog, candidates, folder, controls=()):
    """The ``candidates`` (``{(module, signal, bit): value}``, bits of modules with
    registers) that hold in every reachable state, by induction on the clock cycles.

    Base case: each bit has its value in the initial state (the registers' ``init``
    values, every input free). Induction step (Houdini): with all remaining candidates of
    the module at their values in one cycle, each is proved at its value in the next;
    those not proved are dropped and the step is repeated until none is (the remaining set
    is then inductive as a whole: a bit bounded only jointly with others, such as a queue
    entry that takes the next entry's word, is shown constant). ``controls``: bits that
    toggled in the simulation; proved under the final set, one raises
    :class:`ProverDisagrees`. Returns the set of proved keys."""
    def assumed(held):
        assume = defaultdict(dict)
        for key, value in held:
            assume[key[0]][key] = value
        return assume

    folder = Path(folder)
    jobs = sorted(candidates.items(), key=str)
    held = [jobs[n] for n in sorted(_prove_all(folder, _READ_INIT.format(verilog.name),
                                               jobs))]
    read = _READ.format(verilog.name)
    while held:
        proved = _prove_all(folder, read, held, assumed(held))
        if len(proved) == len(held):
            break
        held = [held[n] for n in sorted(proved)]
    modules = {key[0] for key, _ in held}
    checks = [(key, value) for key in controls if key[0] in modules for value in (0, 1)]
    wrong = {checks[n][0] for n in _prove_all(folder, read, checks, assumed(held),
                                              together=False)}
    if wrong:
        raise ProverDisagrees(f"induction calls bits that toggled constant: "
                              f"{sorted(wrong, key=str)[:5]}")
    return {key for key, _ in held}


def prove_constant(verilog, bits, folder, controls=CONTROLS):
    """Which never-toggled bits are constant by construction.

    ``bits``: :func:`toggle_bits`' table. A bit that did not move both ways (one way only
    is what a constant 1 shows: Verilator counts its rise from 0 as the simulation starts)
    is constant when the netlist (Yosys reading the same Verilog, undriven wires at 0) ties
    it to 0 or 1 (``"tied"``), else when Yosys's SAT solver proves it 0, or 1, in its
    module with every input and register state free, so whatever the rest of the tile does
    (``"proved"``), else, in a module with registers, when it holds in every reachable
    state of its module by induction (:func:`prove_invariant`, ``"induction"``: the value
    it had in the runs, 1 if it only rose, else 0). ``controls`` bits per such module that
    did toggle both ways go to the solver too and must not be proved (else
    :class:`ProverDisagrees`). Returns ``{(module, signal, bit): (value, how)}``.
    """
    import random
    import shutil as _shutil

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _shutil.copy(verilog, folder / Path(verilog).name)
    verilog = folder / Path(verilog).name
    nets, stateful = _netlist(verilog, folder)

    def net_bit(key):
        module, signal, bit = key
        # Yosys's JSON keeps the backslash of a public name that starts with "$" ("\\$19")
        found = nets.get((module, signal), nets.get((module, "\\" + signal)))
        if found is None or (bit is None) != (len(found) == 1) or (bit or 0) >= len(found):
            return None         # not this wire (a bracketed name read ambiguously): skip
        return found[bit or 0]

    out, quiet = {}, []
    for key, (up, down) in sorted(bits.items(), key=str):
        if up and down:
            continue
        value = net_bit(key)
        if value in ("0", "1"):
            out[key] = (int(value), "tied")
        elif value is not None:
            quiet.append(key)
    modules = {key[0] for key in quiet}
    moved = defaultdict(list)
    for key, (up, down) in sorted(bits.items(), key=str):
        if up and down and key[0] in modules and isinstance(net_bit(key), int):
            moved[key[0]].append(key)
    picker = random.Random(1)
    checks = [key for module in sorted(moved) for key in
              picker.sample(moved[module], min(controls, len(moved[module])))]
    jobs = [(key, value) for key in quiet + checks for value in (0, 1)]
    proved = [jobs[n] for n in _prove_all(folder, _READ.format(verilog.name), jobs,
                                          together=False)]
    wrong = [key for key, _ in proved if key in set(checks)]
    if wrong:
        raise ProverDisagrees(f"SAT calls bits that toggled constant: {wrong[:5]}")
    values = defaultdict(set)
    for key, value in proved:
        values[key].add(value)
    both = [key for key, found in values.items() if len(found) > 1]
    if both:
        raise ProverDisagrees(f"SAT proves bits both 0 and 1: {sorted(both, key=str)[:5]}")
    out.update({key: (found.pop(), "proved") for key, found in values.items()})
    candidates = {key: int(bits[key][0]) for key in quiet
                  if key not in out and key[0] in stateful and not bits[key][1]}
    held = prove_invariant(verilog, candidates, folder, checks)
    out.update({key: (candidates[key], "induction") for key in held})
    return out


def wrap_program(tile, seed):
    """The directed program: :data:`WRAP` illegal commands after a few legal ones, every
    result and the wrapped ``status`` checked (a :class:`~.fuzz.ProgramReport`)."""
    return fuzz.run_program_index(seed, 0, chunk=64, sizes=((tile.rows, tile.cols),),
                                  tile=tile, keep=True, burst=WRAP)


def _progress(text):
    print(f"rtl-coverage: {text}", file=sys.stderr, flush=True)


def _table_lines(table, raw, title):
    """The coverage table's lines and the modules below :data:`TARGETS` (two lists of
    str): per hdl module line coverage, toggle coverage with every point counted (``raw``,
    :func:`per_file` without exclusions) beside toggle coverage with the proved-constant
    bits left out (``table``; the targets apply to it), and the excluded points."""
    lines = [f"{'hdl module':<14}{'line':>16}{'toggle raw':>20}{'toggle':>20}"
             f"{'excluded':>10}   ({title})"]
    below = []
    for name in sorted(table):
        cells = []
        for kind, entry in (("line", table[name]["line"]), ("raw", raw[name]["toggle"]),
                            ("toggle", table[name]["toggle"])):
            covered, total, _ = entry
            if not total:
                cells.append("no points")
                continue
            pct = 100.0 * covered / total
            if kind in TARGETS and pct < TARGETS[kind]:
                below.append(f"{name} {kind} {pct:.1f} % < {TARGETS[kind]:.0f} %")
            cells.append(f"{covered}/{total} {pct:5.1f} %")
        lines.append(f"{name:<14}{cells[0]:>16}{cells[1]:>20}{cells[2]:>20}"
                     f"{table[name]['excluded']:>10}")
    return lines, below


def main(argv=None):
    parser = OneLineParser(prog="systolica rtl-coverage",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=integer(0), default=1,
                        help="seed of the programs (default %(default)s)")
    parser.add_argument("--programs", type=integer(0), default=4,
                        help="fuzzed programs (0: only the directed counter-wrap one; "
                             "default %(default)s)")
    parser.add_argument("--commands", type=integer(1), default=400,
                        help="commands per program (default %(default)s)")
    parser.add_argument("--list", action="store_true",
                        help="list the uncovered points and the excluded bits")
    add_json_argument(parser, "line and toggle coverage per hdl module")
    args = parser.parse_args(argv)
    return report_as_json(args, lambda: _run(args))


def _run(args):
    try:
        with exclusive(coverage_folder(ROWS, COLS)):
            return _measure(args)
    except Busy as error:
        print(f"error: {error}")
        return 2, {"error": str(error)}


def _measure(args):
    started = time.perf_counter()
    tile = build(ROWS, COLS)
    shutil.rmtree(tile.directory / "runs", ignore_errors=True)
    _progress(f"running {args.programs} fuzzed programs of {args.commands} commands and the "
              f"counter-wrap program ({WRAP:,} illegal commands) on the {ROWS}x{COLS} build")
    reports = [fuzz.run_program_index(args.seed, index, chunk=args.commands,
                                      sizes=((ROWS, COLS),), tile=tile, keep=True)
               for index in range(args.programs)]
    reports.append(wrap_program(tile, args.seed))
    for report in reports:
        if not report.passed:
            print(f"program {report.index} failed: {report.errors[:3]}")
            return 1, {"error": f"program {report.index} failed: {report.errors[:3]}"}
    dats = sorted(tile.directory.glob("runs/fuzz*/**/coverage.dat"))
    if not dats:
        print("error: the runs wrote no coverage.dat")
        return 1, {"error": "the runs wrote no coverage.dat"}
    points = read_points(dats)
    ran = time.perf_counter() - started
    bits = toggle_bits(points)
    _progress(f"proving constant the {sum(not (up and down) for up, down in bits.values()):,} "
              f"bits that did not toggle both ways (tied, one cycle, induction; minutes)")
    constant = prove_constant(tile.verilog, bits, tile.directory / "prove")
    table = per_file(points, set(constant))
    if args.list:
        for (module, signal, bit), (value, how) in sorted(constant.items(), key=str):
            print(f"excluded {hdl_file(module)}: {module} {signal}"
                  + (f"[{bit}]" if bit is not None else "") + f" = {value} ({how})")
        for name in sorted(table):
            for kind in ("line", "toggle"):
                for point in table[name][kind][2]:
                    print(f"uncovered {kind} {name}: {point}")
    runs = f"{len(dats)} runs incl. the counter wrap, {ROWS}x{COLS}"
    raw = per_file(points)
    lines, below = _table_lines(table, raw, f"{runs}; toggle: bits proved constant "
                                            f"excluded; toggle raw: every point")
    print("\n".join(lines))
    hows = defaultdict(int)
    for _, how in constant.values():
        hows[how] += 1
    print("excluded bits: " + ", ".join(f"{n:,} {how}" for how, n in sorted(hows.items())))
    for line in below:
        print(f"below target: {line}")
    if not below:
        print(f"every hdl module meets the targets ({TARGETS['line']:.0f} % line, "
              f"{TARGETS['toggle']:.0f} % toggle)")
    print(f"time {time.perf_counter() - started:.0f} s (build and runs {ran:.0f} s, proofs "
          f"{time.perf_counter() - started - ran:.0f} s)")
    return 0, {"modules": table, "modules_raw": raw, "below_target": below,
               "excluded_bits": len(constant), "excluded_by": dict(hows),
               "seconds": round(time.perf_counter() - started, 1)}

if __name__ == "__main__":
    sys.exit(main())
