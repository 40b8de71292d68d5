"""RTL code coverage: a Verilator ``--coverage-line --coverage-toggle`` build of the bulk
harness, driven by fuzz programs, reported per ``hdl/`` module.

``python -m systolica.sim.verif.rtlcov`` (part of ``make coverage``) builds a 4 x 4 tile
with coverage, runs ``--programs`` fuzzed programs on it (all command kinds, every stall
level), merges the runs' ``coverage.dat`` and prints line and toggle coverage per ``hdl/``
module (each Verilog module maps to the Amaranth file it came from; points of every
instance of a module are merged), the modules below the targets (95 % line, 90 % toggle:
reported, not a failure) and with ``--list`` every uncovered point. The coverage files
stay in ``<build>/rtlcov/``; ``verilator_coverage --annotate`` can annotate the generated
Verilog from them.
"""

import argparse
import os
import re
import shutil
import sys
from collections import defaultdict
from pathlib import Path

from . import fuzz

#: Verilog module (as the generator names them) -> the hdl file it comes from.
MODULE_FILES = (
    (re.compile(r"\.multiplier(_hi)?$"), "float_mul.py"),
    (re.compile(r"\.adder(_\d+)?$"), "fp32_add.py"),
    (re.compile(r"^systolica_pe$"), "pe.py"),
    (re.compile(r"\.array$"), "array.py"),
    (re.compile(r"skew$"), "skew.py"),
    (re.compile(r"\.psum\$\d+$"), "psum.py"),
    (re.compile(r"^systolica_tile$"), "tile.py"),
)
#: Tile of the coverage build.
ROWS = COLS = 4
TARGETS = {"line": 95.0, "toggle": 90.0}


def hdl_file(module):
    """The hdl file a Verilog module comes from (str), or None (the harness)."""
    module = module.lstrip("\\").strip()
    for pattern, name in MODULE_FILES:
        if pattern.search(module):
            return name
    return None


def build(rows, cols, build_root=None):
    """Build the coverage-instrumented bulk harness (cached); return its Build."""
    import hashlib

    from systolica.sim.generate import write_configuration
    from systolica.sim.runner import Build, _run_build
    from systolica.sim.toolchain import prepare_environment
    from systolica.tb.bulk import HARNESS

    prepare_environment("verilator")
    root = Path(build_root or os.environ.get("SYSTOLICA_BUILD_DIR") or "build").resolve()
    config = root / "rtlcov" / f"{rows}x{cols}"
    verilog, ports = write_configuration(rows, cols, config / "verilog")
    depth = 1 << 16
    directory = config / f"verilator-bulk{depth}"
    want = hashlib.sha256(verilog.read_bytes() + HARNESS.read_bytes()).hexdigest()
    stamp = directory / "systolica.stamp"
    if not (stamp.is_file() and stamp.read_text() == want):
        _run_build("verilator", verilog, directory, False, False, depth, None,
                   extra_args=("--coverage-line", "--coverage-toggle"))
        stamp.write_text(want)
    return Build(rows, cols, "verilator", False, verilog, ports, directory, 0.0, "fst", depth)


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


def per_file(points):
    """``{hdl file: {kind: (covered, total, [uncovered points])}}``."""
    table = defaultdict(lambda: {"line": [0, 0, []], "toggle": [0, 0, []]})
    for (kind, module, _file, line, name), count in points.items():
        target = hdl_file(module)
        if target is None:
            continue
        entry = table[target][kind]
        entry[1] += 1
        if count:
            entry[0] += 1
        else:
            entry[2].append(f"{module} line {line} {name}")
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m systolica.sim.verif.rtlcov",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--programs", type=int, default=4)
    parser.add_argument("--commands", type=int, default=400, help="per program")
    parser.add_argument("--list", action="store_true", help="list the uncovered points")
    args = parser.parse_args(argv)
    tile = build(ROWS, COLS)
    shutil.rmtree(tile.directory / "runs", ignore_errors=True)
    for index in range(args.programs):
        report = fuzz.run_program_index(args.seed, index, chunk=args.commands,
                                        sizes=((ROWS, COLS),), tile=tile, keep=True)
        if not report.passed:
            print(f"program {index} failed: {report.errors[:3]}")
            return 1
    dats = sorted(tile.directory.glob("runs/fuzz*/**/coverage.dat"))
    if not dats:
        print("error: the runs wrote no coverage.dat")
        return 1
    table = per_file(read_points(dats))
    print(f"{'hdl module':<14}{'line':>16}{'toggle':>20}   ({len(dats)} runs, {ROWS}x{COLS})")
    below = []
    for name in sorted(table):
        cells = []
        for kind in ("line", "toggle"):
            covered, total, _ = table[name][kind]
            pct = 100.0 * covered / total if total else 100.0
            if pct < TARGETS[kind]:
                below.append(f"{name} {kind} {pct:.1f} % < {TARGETS[kind]:.0f} %")
            cells.append(f"{covered}/{total} {pct:5.1f} %")
        print(f"{name:<14}{cells[0]:>16}{cells[1]:>20}")
    if args.list:
        for name in sorted(table):
            for kind in ("line", "toggle"):
                for point in table[name][kind][2]:
                    print(f"uncovered {kind} {name}: {point}")
    for line in below:
        print(f"below target: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
