"""Generate the Verilog and port metadata of one tile configuration."""

import hashlib
import json
import re
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import wiring

from systolica.hdl import ProcessingElement, Tile
from systolica.hdl.layouts import _check_positive

#: Name of the tile's top-level Verilog module.
TOPLEVEL = "systolica_tile"
#: Name of the PE's Verilog module, emitted once and instanced rows x cols times.
PE_MODULE = "systolica_pe"

_HDL_DIR = Path(__file__).resolve().parent.parent / "hdl"


def hdl_fingerprint():
    """Hash of the HDL sources and of this generator, so generated files are redone when
    either changes (str)."""
    digest = hashlib.sha256()
    for path in sorted(_HDL_DIR.glob("*.py")) + [Path(__file__).resolve()]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


_ZERO_INIT = re.compile(
    r"  initial begin\n((?:    (\w+)\[\d+\] = \d+'h0+;\n)+)  end\n")


def _compact_zero_init(text):
    """Replace a memory's all-zero ``initial`` block (one line per entry, as Yosys writes
    it: 4,096 lines of 4,096-bit constants for a 128-column PSUM) with an equivalent loop, so
    that the Verilog and the simulators' builds do not grow with the PSUM size."""
    def loop(match):
        lines = match.group(1).splitlines()
        name = match.group(2)
        indices = [int(line.split("[", 1)[1].split("]", 1)[0]) for line in lines]
        if indices != list(range(len(indices))) or any(
                not line.strip().startswith(f"{name}[") for line in lines):
            return match.group(0)
        index = f"{name}__init_i"
        return (f"  integer {index};\n  initial begin\n    for ({index} = 0; {index} < "
                f"{len(indices)}; {index} = {index} + 1) {name}[{index}] = 0;\n  end\n")
    return _ZERO_INIT.sub(loop, text)


def generate_verilog(rows, cols):
    """Return ``(verilog_text, metadata)`` of a ``rows x cols`` tile.

    The Verilog holds the PE module once and the top that instances it. ``metadata`` is a
    JSON-ready dict: ``toplevel``, ``rows``, ``cols``, ``latency`` (cycles), ``hdl`` (source
    hash) and ``ports`` (direction and width in bits of each top-level port).

    Raises
    ------
    ValueError
        If ``rows`` or ``cols`` is not a positive integer.
    """
    from amaranth.back import verilog

    _check_positive("rows", rows)
    _check_positive("cols", cols)
    pe = verilog.convert(ProcessingElement(), name=PE_MODULE, emit_src=False)
    tile = Tile(rows, cols, pe_module=PE_MODULE)
    ports = {"clk": {"direction": "in", "width": 1}, "rst": {"direction": "in", "width": 1}}
    for path, member, _ in tile.signature.flatten(tile):
        ports["__".join(str(part) for part in path)] = {
            "direction": "in" if member.flow == wiring.In else "out",
            "width": Shape.cast(member.shape).width,
        }
    meta = {"toplevel": TOPLEVEL, "rows": rows, "cols": cols, "latency": tile.latency,
            "hdl": hdl_fingerprint(), "ports": ports}
    top = _compact_zero_init(verilog.convert(tile, name=TOPLEVEL, emit_src=False))
    return pe + "\n" + top, meta


def write_configuration(rows, cols, directory):
    """Write ``tile.v`` and ``ports.json`` for one configuration into ``directory``.

    Files are rewritten only when the HDL sources changed since they were made.

    Returns
    -------
    tuple of pathlib.Path
        ``(verilog_path, ports_path)``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    verilog_path, ports_path = directory / "tile.v", directory / "ports.json"
    if ports_path.is_file() and verilog_path.is_file():
        try:
            meta = json.loads(ports_path.read_text())
            if (meta.get("rows"), meta.get("cols"), meta.get("hdl")) == (
                    rows, cols, hdl_fingerprint()):
                return verilog_path, ports_path
        except json.JSONDecodeError:
            pass
    text, meta = generate_verilog(rows, cols)
    verilog_path.write_text(text)
    ports_path.write_text(json.dumps(meta, indent=2) + "\n")
    return verilog_path, ports_path
