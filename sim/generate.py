"""Generate the Verilog and port metadata of one tile configuration."""

import hashlib
import json
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
    """Hash of the HDL sources, so generated files are redone when the RTL changes (str)."""
    digest = hashlib.sha256()
    for path in sorted(_HDL_DIR.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
    top = verilog.convert(tile, name=TOPLEVEL, emit_src=False)
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
