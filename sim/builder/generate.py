"""Generate the Verilog and port metadata of one tile configuration."""

import hashlib
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import wiring

from systolica import hdl as hdl_package
from systolica.hdl import Tile
from systolica.hdl.config import TileConfig
from systolica.hdl.tile import block_array, pe_for, tile_component, verilog_ports

#: Name of the tile's top-level Verilog module.
TOPLEVEL = "systolica_tile"
#: Name of the PE's Verilog module, emitted once and instanced rows x cols times.
PE_MODULE = "systolica_pe"
#: Name of the B x B sub-array module of blocked tiles (see :func:`grid_block`).
BLOCK_MODULE = "systolica_block"
#: Name of the result path's module (PSUM and the de-skew) in tiles of
#: :data:`FLAT_LIMIT_PES` PEs or more, which convert it in a second process beside the rest
#: of the top: at 128 x 128 it is about half of the top's generation time.
RESULT_MODULE = "systolica_result"
#: From this many PEs on, a tile is generated as a grid of B x B sub-array modules, which
#: Verilator compiles once as a hierarchical block: a flat build of 128 x 128 BF16 PEs
#: needs more memory than a 24 GB machine has, and from 16 x 16 on the blocked build is
#: the faster to build and to run (docs/benchmarks.md, "Block size").
BLOCKED_PES = 16 * 16
#: Side of the sub-arrays of blocked tiles, chosen by measurement (docs/benchmarks.md,
#: "Block size"): 8 x 8 blocks built and ran faster than 16 x 16 ones from 32 x 32 to
#: 128 x 128 (Verilator writes a block's code once per PE inside it; a smaller block's code
#: stays in the caches), and 8 x 8 tiles run faster flat than in 4 x 4 blocks.
BLOCK_SIDE = 8
#: Blocks of fewer PEs than this side's square are not worth a hierarchical block below
#: :data:`FLAT_LIMIT_PES` PEs: such a tile (say 17 x 16, whose sizes no power of two from
#: 2 up divides) is built flat.
MIN_BLOCK_SIDE = 4
#: From this many PEs on a tile is built in blocks whatever their size: a flat build of a
#: 64 x 64 tile of every type needs about 11 GB (four times the 2.8 GB of 32 x 32).
FLAT_LIMIT_PES = 64 * 64

#: The HDL sources (the ``systolica.hdl`` package's folder).
_HDL_DIR = Path(hdl_package.__file__).resolve().parent


def hdl_fingerprint():
    """Hash of the HDL sources and of this generator, so generated files are redone when
    either changes (str)."""
    digest = hashlib.sha256()
    sources = sorted(_HDL_DIR.glob("*.py"))
    if not any(path.name == "tile.py" for path in sources):
        raise RuntimeError(f"no HDL sources in {_HDL_DIR}: the Verilog could not follow them")
    for path in sources + [Path(__file__).resolve()]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


_MEMORY = re.compile(r"^  reg (\[\d+:0\] )?(\w+) \[(\d+):0\];\n", re.M)


@contextmanager
def _zero_init_as_loop():
    """Convert Verilog with every all-zero memory initialised by a loop.

    Amaranth writes a memory's initial contents into the netlist bit by bit (16.7 million
    bits for a 128-column PSUM: minutes of generation) and Yosys then writes one line per
    entry. Inside this context a memory whose initial contents are all zero gets no
    initialiser from Amaranth; :func:`_add_zero_init` then adds an ``initial`` loop to every
    memory declaration, the same contents for both simulators. (Every memory of the tile
    starts at zero: PSUM.)
    """
    from amaranth.back import rtlil

    emit = rtlil.ModuleEmitter.emit_memory

    def emit_nonzero(self, cell_idx, cell):
        if any(cell.init):
            raise AssertionError("a memory with non-zero initial contents: the generator "
                                 "initialises every memory to zero")
    rtlil.ModuleEmitter.emit_memory = emit_nonzero
    try:
        yield
    finally:
        rtlil.ModuleEmitter.emit_memory = emit


def _add_zero_init(text):
    """Add an all-zero ``initial`` loop after each memory declaration of ``text``."""
    def loop(match):
        name, depth = match.group(2), int(match.group(3)) + 1
        index = f"{name}__init_i"
        return (f"{match.group(0)}  integer {index};\n  initial begin\n    for ({index} = 0; "
                f"{index} < {depth}; {index} = {index} + 1) {name}[{index}] = 0;\n  end\n")
    return _MEMORY.sub(loop, text)


def grid_block(rows, cols):
    """Side of the sub-array blocks a ``rows x cols`` tile is generated from, or ``None``
    for a flat grid of PEs (int or None).

    ``$SYSTOLICA_BLOCK`` forces it (``0``: flat; ``B``: blocks of ``B x B``, a power of two
    dividing both sizes). Otherwise tiles of :data:`BLOCKED_PES` PEs or more use the largest
    power of two up to :data:`BLOCK_SIDE` that divides both sizes, unless that is smaller
    than :data:`MIN_BLOCK_SIDE` and the tile has fewer than :data:`FLAT_LIMIT_PES` PEs
    (flat then).

    Raises
    ------
    ValueError
        If ``$SYSTOLICA_BLOCK`` is not ``0`` or such a power of two.
    """
    forced = os.environ.get("SYSTOLICA_BLOCK", "")
    if forced:
        try:
            block = int(forced)
        except ValueError:
            block = -1
        if block == 0:
            return None
        if block < 1 or block & (block - 1) or rows % block or cols % block:
            raise ValueError(f"SYSTOLICA_BLOCK must be 0 (flat) or a power of two dividing "
                             f"rows = {rows} and cols = {cols}, not {forced!r}")
        return block
    if rows * cols < BLOCKED_PES:
        return None
    block = BLOCK_SIDE
    while rows % block or cols % block:
        block //= 2
    if block < MIN_BLOCK_SIDE and rows * cols < FLAT_LIMIT_PES:
        return None
    return block


#: Yosys passes between Amaranth's netlist and the Verilog, as ``amaranth.back.verilog``
#: runs them: processes become ``always @*`` next-state blocks.
AMARANTH_PASSES = ("proc -nomux -norom", "memory_collect")
#: The same plus ``opt_dff``, which folds each register's enable and synchronous reset into
#: the flip-flop (``if (rst) .. else if (en) ..``): the same logic without a next-state copy
#: of every register. Used for everything but the PE: it cut the 128 x 128 tile's top-level
#: C++ from Verilator from 26.9 MB to 17.7 MB and its build from minutes to about one, while
#: the PE built this way simulated about 10% slower at 16 x 16 (measured, alternated).
DFF_PASSES = ("proc -norom", "memory_collect", "opt_clean", "opt_dff", "opt_clean")


def _to_verilog(elaboratable, name, passes=DFF_PASSES):
    """Verilog of an Amaranth component (str), through the Yosys ``passes``."""
    from amaranth._toolchain.yosys import find_yosys
    from amaranth.back import rtlil

    text = rtlil.convert(elaboratable, name=name, emit_src=False)
    yosys = find_yosys(lambda version: version >= (0, 40))
    script = [f"read_rtlil <<rtlil\n{text}\nrtlil", *passes, "write_verilog -norename"]
    return yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)


def _check_config(config):
    if not isinstance(config, TileConfig):
        raise TypeError(f"config must be a TileConfig, not {type(config).__name__}")
    return config


def generate_verilog(config, block=None):
    """Return ``(verilog_text, metadata)`` of the tile of ``config`` (a
    :class:`~systolica.hdl.config.TileConfig`).

    The Verilog holds the PE module generated for the config's type set once and the top
    that instances it; with ``block``, also the ``block x block`` sub-array module
    (:data:`BLOCK_MODULE`, built of PE instances), which the top instances
    ``(rows / block) x (cols / block)`` times. ``metadata`` is a JSON-ready dict:
    ``toplevel``, ``rows``, ``cols``, ``types``, ``block``, ``latency`` (cycles), ``hdl``
    (source hash) and ``ports`` (direction and width in bits of each top-level port).

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If ``block`` is not a power of two dividing both sizes.
    """
    rows, cols = _check_config(config).rows, config.cols
    split = rows * cols >= FLAT_LIMIT_PES
    child = _start_result_module(config) if split else None
    parts = [_to_verilog(pe_for(config), PE_MODULE, AMARANTH_PASSES)]
    if block is not None:
        parts.append(_to_verilog(block_array(config, block, PE_MODULE), BLOCK_MODULE))
    tile = Tile(config, pe_module=PE_MODULE, block=block,
                block_module=None if block is None else BLOCK_MODULE,
                component_modules={"result": RESULT_MODULE} if split else None)
    ports = {"clk": {"direction": "in", "width": 1}, "rst": {"direction": "in", "width": 1}}
    for name, member, _ in verilog_ports(tile):
        ports[name] = {
            "direction": "in" if member.flow == wiring.In else "out",
            "width": Shape.cast(member.shape).width,
        }
    meta = {"toplevel": TOPLEVEL, "rows": rows, "cols": cols, "types": config.types_name,
            "psum_banks": config.psum_banks, "psum_entries": config.psum_entries,
            "queue_depth": config.queue_depth, "block": block,
            "latency": tile.latency, "hdl": hdl_fingerprint(), "ports": ports}
    try:
        parts.append(_top_verilog(tile, TOPLEVEL))
    except BaseException:
        if child is not None:        # the top failed or was interrupted: stop the child too
            child.kill()
            child.communicate()
        raise
    if child is not None:
        parts.append(_finish_result_module(child))
    return "\n".join(parts), meta


def _top_verilog(elaboratable, name):
    """Verilog of a component holding the PSUM memory, initialised by a loop."""
    with _zero_init_as_loop():
        return _add_zero_init(_to_verilog(elaboratable, name))


def result_module_verilog(config):
    """Verilog (str) of the result path of the tile of ``config`` (a
    :class:`~systolica.hdl.config.TileConfig`) as module :data:`RESULT_MODULE`, which
    large tiles instance (:func:`generate_verilog`)."""
    return _top_verilog(tile_component(_check_config(config), "result"), RESULT_MODULE)


def _start_result_module(config):
    """Start :func:`result_module_verilog` for ``config`` in a child process
    (``python -m systolica.sim.builder.result_child``; a subprocess, so that it also works
    inside a Dask worker); returns it."""
    import subprocess

    return subprocess.Popen(
        [sys.executable, "-m", "systolica.sim.builder.result_child", str(config.rows),
         str(config.cols), config.types_name, str(config.psum_banks),
         str(config.psum_entries), str(config.queue_depth)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


#: Seconds the result path's child may take (128 x 128: about a minute).
RESULT_TIMEOUT_S = 1800


def _finish_result_module(child, timeout=RESULT_TIMEOUT_S):
    """The Verilog the child of :func:`_start_result_module` wrote (str).

    Raises
    ------
    RuntimeError
        If the child failed (its last lines of stderr in the message) or took longer than
        ``timeout`` seconds (it is then stopped).
    """
    import subprocess

    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise RuntimeError(f"generating the result path's Verilog took more than {timeout} s; "
                           f"stopped it") from None
    if child.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:])
        raise RuntimeError(f"generating the result path's Verilog failed "
                           f"(status {child.returncode}): {tail}")
    return out


def bench_netlist():
    """First 16 hex digits (str) of the SHA-256 of the Verilog of a 4 x 4 tile of every
    type in 2 x 2 blocks: the PE, the sub-array and the tile around them as ``hdl/``
    generates them today, with which ``make bench`` records what its figures were measured
    on (a docstring edit leaves it unchanged)."""
    text, _ = generate_verilog(TileConfig(4, 4, "all"), block=2)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_configuration(config, directory, block=None):
    """Write ``tile.v`` and ``ports.json`` for one configuration (a
    :class:`~systolica.hdl.config.TileConfig`) into ``directory``.

    Files are rewritten only when the HDL sources, the configuration or ``block`` changed
    since they were made; ``tile.v`` keeps its modification time when the new text is the
    same.

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
            if (meta.get("config"), meta.get("block"), meta.get("hdl")) == (
                    repr(config), block, hdl_fingerprint()):
                return verilog_path, ports_path
        except json.JSONDecodeError:
            pass
    # Seconds at 8 x 8, about a minute at 128 x 128: say so instead of a silence.
    print(f"systolica: generating the Verilog of the {config.describe()} in {directory} "
          f"(first use, or hdl/ changed) ...", file=sys.stderr, flush=True)
    text, meta = generate_verilog(config, block)
    meta["config"] = repr(config)
    if not verilog_path.is_file() or verilog_path.read_text() != text:
        verilog_path.write_text(text)
    ports_path.write_text(json.dumps(meta, indent=2) + "\n")
    return verilog_path, ports_path

