"""Waveforms for GTKWave: trace a run, generate a save file for it, open or print the command.

``systolica waves`` (``make waves``; ``python -m systolica.sim waves`` too) runs the random
workload of ``systolica sim`` with tracing on; ``--test NAME`` runs one cocotb test of
``systolica.tb.cases.tile`` instead, which is what a failing regression test tells you to run.
Either way the run writes a waveform (FST, or VCD with ``--format vcd``) and a GTKWave save
file generated for that run (tile size, simulator, data type), then opens
``gtkwave <dump> <save>`` when a display and GTKWave are there, or prints that command.

The save file's groups, in order (signals of the tile top ``systolica_tile``; both
simulators put it at the root of the dump; packed fields are picked out of their vectors at
the offsets of :mod:`systolica.hdl.layouts`). Internal signals are taken from the tile's
published probes, never from local names: :func:`systolica.hdl.tile.tile_probes` (a port of
one of the tile's components, by its instance: ``queue.queued``, ``result.out_token``, ...)
and :func:`systolica.hdl.tile.pe_probes`; the queue's depth is
:data:`systolica.hdl.tile.COMMAND_QUEUE_DEPTH`:

- **Clock and reset**: ``clk``, ``rst``.
- **Command stream**: valid, ready and each field of the beat: ``op`` (MATMUL/READ),
  ``dtype`` (INT8/BF16), ``ftz`` (IEEE/FTZ), ``accumulate`` (overwrite/accumulate), and
  ``bank``, ``offset``, ``k``, ``m``, ``n`` in decimal.
- **Status**: ``rejected`` (commands rejected since reset, decimal) and ``error`` (the
  :class:`~systolica.hdl.layouts.ErrorCode` of the latest rejection, by name).
- **LoadStationary stream**: valid, ready, the partition row the next beat writes and each
  lane ``m`` of the stationary row, decoded.
- **MultiplyMoving stream**: valid, ready and each lane ``k``, decoded.
- **PSUM result stream**: valid, ready, last and each lane ``m``, decoded.
- **PSUM**: the write strobe (probe ``psum_write``), and from the last stage of the token
  pipeline (probe ``psum_token``: the beat whose result is offered; meaningful while the
  result stream is valid) its ``op`` (READ for a read-out, which writes nothing), the bank
  and entry it addresses (the flat address ``bank * entries + entry`` where entries per
  bank is not a power of two) and the mode of the word (overwrite/accumulate, INT32/FP32,
  IEEE/FTZ).
- **Tile state**: the tile has no single state machine; its control state is the command
  queue, the two stationary buffers and the issue of beats (the probes' names below). The
  queue shows its occupancy (from ``queued``) and each entry as ``empty`` / ``waiting for
  stationary`` / ``ready`` (from its ``queued`` and ``loaded`` bits; a READ is ready at
  once); each stationary buffer of each buffer cell as ``free`` / ``loaded`` (for a matmul
  that has not started, ``full``) / ``in use`` (a started matmul is still sending moving
  beats, ``busy``); then whether a command is part-way through issuing its beats (``running``),
  the op of the command issuing (``issuing_read``, meaningful while running), which
  buffer the load under way writes (``load_buf``) and the next matmul uses (``use_buf``), and
  whether the pipeline advances or stalls (``advance``).
- **PE row k** (arrays up to 8 x 8, collapsed): per PE ``pe_k_c`` its weight (the
  stationary value the current operand multiplies), its operand (``moving_in``) and its
  partial sum out (``psum_out``) (:data:`systolica.hdl.tile.PE_PROBES`).

Lanes: INT8 operands show as signed decimal (their low byte), INT32 PSUM words as signed
decimal; BF16 operands and FP32 PSUM words as numbers, through the translate filter process
:mod:`systolica.sim.waves.gtkwave_filter` (launchers and filter files are written beside the save
file). A run of both data types shows each lane both ways.

MX (a tile with the ``mx`` type set): every lane of the two operand streams also shows its
E8M0 ``scale`` (``stationary m<i> scale``, ``moving k<i> scale``: ``2^e``, ``NaN``), each
PE its moving operand's (``pe_k_c scale``, :data:`systolica.hdl.tile.MX_PE_PROBES`), and the
PSUM group the token's BF16 write: ``dst`` (FP32/BF16 PSUM), ``rounding``, ``first`` and the
``seed`` (hex, as the command's). With an :class:`MxLanes` mode (a run of MX matmuls) the
operand lanes are x4 words shown as four elements, lane 0 first, of each side's type (an
MXFP4 side's lanes are e2m1 in bits [15:0] in the stream and e4m3fn in the array), or as
four hex bytes for a side of unknown type (``"mx"``), and the PSUM words as FP32 or BF16.
"""

import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from amaranth.hdl import Shape
from vcd.gtkw import GTKWSave, make_translation_filter

from systolica.golden.command import DTYPES
from systolica.golden.mx import MX_TYPES, command_types
from systolica.hdl.layouts import (
    PSUM_WIDTH,
    DType,
    ErrorCode,
    Op,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
)
from systolica.hdl.tile import COMMAND_QUEUE_DEPTH, pe_probes, tile_probes
from systolica.sim.builder.errors import SystolicaError
from systolica.sim.builder.generate import TOPLEVEL
from systolica.sim.builder.runner import (
    default_build_root,
    waveform_name,
)
from systolica.sim.builder.toolchain import check_simulator_name
from systolica.sim.waves.gtkwave_filter import WIDTHS as FILTER_WIDTHS
from systolica.tb import protocol
from systolica.tb.bulk import HARNESS_TILE, HARNESS_TOPLEVEL

#: Scope of the tile top in each simulator's dump. Checked on real dumps: Icarus and
#: Verilator 5.048 (cocotb's runner) both put ``systolica_tile`` at the root (Verilator adds
#: a ``$rootio`` scope holding the ports a second time).
SCOPE = {"icarus": TOPLEVEL, "verilator": TOPLEVEL}
#: GTKWave zoom of the save files: about 60 pixels per 10 ns clock cycle.
ZOOM = -15.0
#: Largest rows and cols for which the save file has per-PE groups.
PE_GROUP_LIMIT = 8
#: Lane decodings: one data type, or both for runs that mix them, or ``"mx"`` (x4 words of
#: unknown types; :class:`MxLanes` names them).
LANE_MODES = ("int8", "bf16", "mixed", *(name for name in DTYPES if name not in ("int8", "bf16")),
              "mx")
#: MX element types by short name (``systolica.golden.mx.MX_TYPES``: e4m3fn, e5m2, e2m1).
MX_ELEMENTS = {name: dtype for dtype, (name, _, _) in MX_TYPES.items()}
#: Bits per PSUM word (from systolica.hdl.layouts; operand lanes are the tile's
#: ``TileConfig.operand_width``).
PSUM_BITS = PSUM_WIDTH
#: Kinds of the translate filter process (see ``gtkwave_filter.py``).
FILTER_KINDS = tuple(FILTER_WIDTHS)
#: The cocotb test module a regression failure is reproduced from.
TEST_MODULE = protocol.TILE_TESTS
_FILTER_SCRIPT = Path(__file__).resolve().parent / "gtkwave_filter.py"


class ViewerNotFoundError(SystolicaError):
    """GTKWave, or a display for it, is missing where opening it was asked for."""


@dataclass(frozen=True)
class MxLanes:
    """The lane mode of a run of MX matmuls (``nc_matmul_mx``) on a tile with the ``mx`` type
    set: what its x4 words hold (the save file decodes every lane one way; GTKWave lets a
    user pick another filter per trace).

    Attributes
    ----------
    stationary, moving : {"e4m3fn", "e5m2", "e2m1"} or None
        The element type of each side's x4 words (keys of :data:`MX_ELEMENTS`); None shows
        the word's four bytes in hex. In the streams an ``e2m1`` (MXFP4) side's lanes show
        their bits [15:0] as four e2m1 values; in the array (the PE traces) its words are
        e4m3fn, converted in front of it.
    psum : {"fp32", "bf16"}
        The PSUM words written: FP32, or BF16 (the FP32 word of a BF16 value: its bits
        [31:16] shown through the BF16 filter).
    """

    stationary: str | None = None
    moving: str | None = None
    psum: str = "fp32"

    def __post_init__(self):
        for side in ("stationary", "moving"):
            name = getattr(self, side)
            if name is not None and name not in MX_ELEMENTS:
                raise ValueError(f"MxLanes.{side} must be one of {', '.join(MX_ELEMENTS)} or "
                                 f"None, not {name!r}")
        if self.psum not in ("fp32", "bf16"):
            raise ValueError(f"MxLanes.psum must be 'fp32' or 'bf16', not {self.psum!r}")

    def stream_filter(self, side):
        """The filter kind of ``side``'s lanes in its stream (str)."""
        name = getattr(self, side)
        return "x4" if name is None else f"x4-{name}"

    def array_filter(self, side):
        """The filter kind of ``side``'s x4 words in the array, where an MXFP4 side is
        e4m3fn (:func:`systolica.golden.mx.command_types`) (str)."""
        name = getattr(self, side)
        if name is None:
            return "x4"
        empty = np.empty(0, MX_ELEMENTS[name])
        (edge, _), _ = command_types(empty, empty)
        return f"x4-{edge}"


# ---- save file ---------------------------------------------------------------------------

def _filters(directory):
    """Write the translate filter launchers and files into ``directory``; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for kind in FILTER_KINDS:
        launcher = directory / f"{kind}-filter"
        launcher.write_text("#!/bin/sh\n# GTKWave translate filter process: hex in, "
                            f"{kind.upper()} value out.\nexec "
                            f"{shlex.quote(sys.executable)} "
                            f"{shlex.quote(str(_FILTER_SCRIPT))} {kind}\n")
        launcher.chmod(0o755)
        paths[kind] = launcher
    names = {
        "op": _enum_names(Op),
        "dtype": _enum_names(DType),
        "dtype_hi": [(0, "code 0-7"), (1, "code + 8 (FP32)")],
        "error": _enum_names(ErrorCode),
        "psum_dtype": [(0, "INT32"), (1, "FP32")],
        "double_row": [(0, "single row"), (1, "double row")],
        "mode": [(0, "overwrite"), (1, "accumulate")],
        "ftz": [(0, "IEEE"), (1, "FTZ")],
        "transpose": [(0, "matmul"), (1, "transpose")],
        "tiled": [(0, "whole array"), (1, "tile")],
        "mx": [(0, "not MX"), (1, "MX (x4 words, E8M0 scales)")],
        "fp4": [(0, "MXFP8 x MXFP8"), (1, "MXFP4 stationary"), (2, "MXFP4 moving"),
                (3, "MXFP4 both")],
        "dst": [(0, "FP32 PSUM"), (1, "BF16 PSUM")],
        "rounding": [(0, "round to nearest even"), (1, "stochastic")],
        "first": [(0, "generators continue"), (1, "first column: generators from seed")],
        "buffer": [(0, "buffer 0"), (1, "buffer 1")],
        # {busy, full} of one stationary buffer.
        "buffer_state": [(0, "free"), (1, "loaded"), (2, "in use"),
                         (3, "loaded and in use (illegal)")],
        "running": [(0, "between commands"), (1, "mid-command")],
        "pipeline": [(0, "stalled"), (1, "advancing")],
        "queue": _queue_names(COMMAND_QUEUE_DEPTH),
        # {queued, loaded} of one queue entry; a READ is loaded when it is queued.
        "entry": [(0, "empty"), (1, "loaded, not queued (illegal)"),
                  (2, "waiting for stationary"), (3, "ready")],
    }
    for name, table in names.items():
        size = max(1, max(value for value, _ in table).bit_length())
        path = directory / f"{name}.txt"
        path.write_text(make_translation_filter(table, datafmt="hex", size=size))
        paths[name] = path
    return paths


def _queue_names(depth):
    """Names of the command queue's ``queued`` bits (``depth`` entries filling from 0):
    its occupancy, or a gap, which cannot happen."""
    full = {(1 << n) - 1: f"{n} command{'s' * (n != 1)}" for n in range(1, depth + 1)}
    full[0] = "empty"
    full[(1 << depth) - 1] += " (full)"
    return [(v, full.get(v, "gap (illegal)")) for v in range(1 << depth)]


def _enum_names(enum):
    """A translate filter table naming each member of an Amaranth enum by its name."""
    return [(member.value, member.name) for member in enum]


def _fields(layout):
    """``{name: (lsb, width)}`` of the fields of a StructLayout."""
    return {name: (field.offset, Shape.cast(field.shape).width) for name, field in layout}


@dataclass(frozen=True)
class _Writer:
    """Adds traces of one dump's signals to a GTKWSave.

    GTKWave names a vector of the dump with its range (``sig[8:0]``), a one-bit signal without
    one, and picks bits of a vector by their position from the MSB (``(0)sig[8:0]`` is bit 8),
    so every signal is given with its width.
    """

    save: GTKWSave
    scope: str
    filters: dict

    def name(self, signal, width):
        return f"{self.scope}.{signal}" + (f"[{width - 1}:0]" if width > 1 else "")

    def bits(self, alias, signal, width, msb, lsb):
        """The trace of bits ``msb..lsb`` of a ``width``-bit ``signal`` as a vector ``alias``."""
        name = self.name(signal, width)
        return f"#{{{alias}}} " + " ".join(f"({width - 1 - i}){name}"
                                           for i in range(msb, lsb - 1, -1))

    def wire(self, signal, alias, width=1, datafmt="bin", table=None, bit=None):
        """One signal (or one bit of it), optionally translated through a filter file."""
        filter_file = str(self.filters[table]) if table else None
        datafmt = "hex" if table else datafmt
        if width == 1 and (table or datafmt != "bin"):
            # GTKWave draws a one-bit signal as a line and ignores its filter and format; as
            # a one-bit vector it shows the filter's names or the value.
            self.save.trace(f"#{{{alias}}} {self.name(signal, width)}", datafmt=datafmt,
                            translate_filter_file=filter_file)
        elif bit is None:
            self.save.trace(self.name(signal, width), alias=alias, datafmt=datafmt,
                            translate_filter_file=filter_file)
        else:
            self.save.trace(self.bits(alias, signal, width, bit, bit), datafmt=datafmt,
                            translate_filter_file=filter_file)

    def field(self, alias, signal, width, lsb, bits, datafmt="dec", table=None):
        """Bits ``lsb + bits - 1 .. lsb`` of a ``width``-bit ``signal`` as one vector ``alias``,
        in ``datafmt`` or, with ``table``, named through that filter file."""
        if bits == width:
            self.wire(signal, alias, width, datafmt=datafmt, table=table)
            return
        self.save.trace(self.bits(alias, signal, width, lsb + bits - 1, lsb),
                        datafmt="hex" if table else datafmt,
                        translate_filter_file=str(self.filters[table]) if table else None)

    def state(self, alias, bits, table):
        """Single bits ``[(signal, width, bit), ...]`` (MSB first) as one named state."""
        names = " ".join(f"({width - 1 - bit}){self.name(signal, width)}"
                         for signal, width, bit in bits)
        self.save.trace(f"#{{{alias}}} {names}", datafmt="hex",
                        translate_filter_file=str(self.filters[table]))

    def decoded(self, alias, signal, width, msb, lsb, datafmt="hex", proc=None):
        """Bits ``msb..lsb`` of a ``width``-bit ``signal`` as one trace ``alias`` in
        ``datafmt``, through the filter process of kind ``proc`` (a key of
        :data:`FILTER_KINDS`) when given."""
        proc = str(self.filters[proc]) if proc else None
        if (msb, lsb) == (width - 1, 0):
            self.save.trace(self.name(signal, width), alias=alias, datafmt=datafmt,
                            translate_filter_proc=proc)
        else:
            self.save.trace(self.bits(alias, signal, width, msb, lsb), datafmt=datafmt,
                            translate_filter_proc=proc)

    def lane(self, alias, signal, width, lsb, lane_bits, mode, operand=True, side=None,
             array=False):
        """One operand lane (``operand``; 16 or 32 bits) or PSUM word (32 bits) at bit
        ``lsb`` of ``signal``, decoded as ``mode`` (one of :data:`LANE_MODES` but ``"mx"``,
        or an :class:`MxLanes`: an operand lane of ``side`` as x4 words, in the stream or,
        with ``array``, in the array)."""
        if isinstance(mode, MxLanes):
            if not operand:   # a PE's partial sums are FP32; PSUM words may be BF16
                if mode.psum == "bf16" and not array:   # the FP32 word of a BF16 value
                    self.decoded(alias, signal, width, lsb + lane_bits - 1,
                                 lsb + lane_bits - FILTER_WIDTHS["bf16"], proc="bf16")
                else:
                    self.decoded(alias, signal, width, lsb + lane_bits - 1, lsb, proc="fp32")
                return
            proc = mode.array_filter(side) if array else mode.stream_filter(side)
            self.decoded(alias, signal, width, lsb + FILTER_WIDTHS[proc] - 1, lsb, proc=proc)
            return
        kinds = ("int8", "bf16") if mode == "mixed" else (mode,)
        for kind in kinds:
            shown = kind if operand else "int32" if kind == "int8" else "fp32"
            label = alias if len(kinds) == 1 else f"{alias} {shown}"
            if kind == "int8":   # INT8 operands in the low byte, INT32 PSUM words whole
                self.decoded(label, signal, width, lsb + (7 if operand else lane_bits - 1),
                             lsb, datafmt="signed")
            else:   # float operands (FP8 in the low byte: k = r in double-row), FP32 PSUM
                proc = _operand_filter(kind) if operand else "fp32"
                msb = lsb + (FILTER_WIDTHS[proc] if operand else lane_bits) - 1
                self.decoded(label, signal, width, msb, lsb, proc=proc)


def _operand_filter(kind):
    """The filter kind of an operand lane of float type ``kind`` (TF32 is an FP32 word)."""
    return "fp32" if kind == "tf32" else kind


def write_save_file(save_path, dump_path, *, config, simulator, mode="int8", harness=False):
    """Write a GTKWave save file for ``dump_path`` of a run of the tile of ``config``.

    Translate filter launchers and filter files go into ``<save_path stem>-gtkwave/`` beside
    the save file; the save file names them by absolute path.

    Parameters
    ----------
    save_path, dump_path : path
        The ``.gtkw`` file to write and the FST or VCD dump it shows.
    config : systolica.hdl.config.TileConfig
        The tile (its size and PSUM geometry).
    simulator : {"icarus", "verilator"}
        The simulator that wrote the dump (it fixes the scope prefix).
    harness : bool
        The dump is of a bulk-driver run (the MX matmuls of ``systolica waves --mx``): the
        tile is instance ``tile`` of the harness top ``systolica_harness``.
    mode : {"int8", "bf16", "mixed", "fp16", "e4m3", "e5m2", "e3m4", "e4m3fn", "tf32", "fp32", \
"mx"} or MxLanes
        How operand and PSUM lanes are decoded: signed decimal (INT8 operands, INT32 PSUM),
        numbers through the filter process (float operands of that type, FP32 PSUM), or
        ``"mixed"``: both INT8 and BF16. FP8 lanes show bits [7:0] (in double-row mode the
        element k = r of partition row r), 8- and 16-bit types the low bits of a 32-bit
        lane (a tile with ``fp32`` or ``mx``), TF32 and FP32 the whole 32-bit word. An
        :class:`MxLanes` (on a tile with the ``mx`` type set; ``"mx"`` is ``MxLanes()``)
        shows operand lanes as x4 words, four elements each, and PSUM words as FP32 or
        BF16. On an ``mx`` tile every mode also shows each lane's E8M0 scale (``2^e``,
        ``NaN``), the moving scale at each PE, and the PSUM token's BF16 write fields.

    Returns
    -------
    pathlib.Path
        ``save_path``.

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If ``simulator`` or ``mode`` is unknown, or ``mode`` is MX and the tile has no
        ``mx`` type set.
    """
    probes = tile_probes(config)
    rows, cols = config.rows, config.cols
    check_simulator_name(simulator)
    if not isinstance(mode, MxLanes) and mode not in LANE_MODES:
        raise ValueError(f"unknown lane mode {mode!r}; choose one of: {', '.join(LANE_MODES)}")
    mode = MxLanes() if mode == "mx" else mode
    if isinstance(mode, MxLanes) and not config.mx:
        raise ValueError(f"MX lanes need a tile with the mx type set, not {config.types_name}; "
                         f"allowed: a TileConfig whose types include 'mx' (such as 'int8+mx')")
    save_path, dump_path = Path(save_path).resolve(), Path(dump_path).resolve()
    scope = f"{HARNESS_TOPLEVEL}.{HARNESS_TILE}" if harness else SCOPE[simulator]
    filters = _filters(save_path.parent / f"{save_path.stem}-gtkwave")
    with open(save_path, "w") as handle:
        save = GTKWSave(handle)
        shown = mode if isinstance(mode, str) else (
            f"MX x4 words ({mode.stationary or 'bytes'} x {mode.moving or 'bytes'} -> "
            f"{mode.psum.upper()})")
        save.comment(f"Systolica {rows} x {cols} tile on {simulator}, lanes as {shown}; "
                     f"generated by systolica.sim.waves.gtkwave")
        save.dumpfile(str(dump_path))
        save.savefile(str(save_path))
        save.size(1600, 1000)
        save.signals_width(320)
        save.sst_expanded(True)
        save.treeopen(f"{scope}.")
        save.zoom_markers(ZOOM)
        _groups(_Writer(save, scope, filters), config, mode, probes)
    return save_path


def _groups(w, config, mode, probes):
    save = w.save
    rows, cols, entries = config.rows, config.cols, config.psum_entries
    width, mx = config.operand_width, config.mx
    command = _fields(command_layout())
    command_bits = command_layout().size
    status = _fields(status_layout())
    status_bits = status_layout().size
    stationary = stationary_layout(cols, width, mx)
    stationary_bits, stationary_lsb = stationary.size, stationary["data"].offset
    moving = moving_layout(rows, width, mx)
    moving_bits, moving_lsb = moving.size, moving["data"].offset
    result_bits = result_layout(cols).size
    result_lsb = result_layout(cols)["data"].offset
    out_token = probes["psum_token"].name      # the beats now at the PSUM stage, per cell
    tokens = probes["psum_token"].shape         # ArrayLayout of token_layout, per cell
    token = _fields(tokens.elem_shape)
    token_size = Shape.cast(tokens.elem_shape).width
    token_bits = probes["psum_token"].width
    with save.group("Clock and reset"):
        w.wire("clk", "clk")
        w.wire("rst", "rst")
    with save.group("Command stream"):
        w.wire("command__valid", "valid")
        w.wire("command__ready", "ready")
        tables = {"op": "op", "dtype": "dtype", "moving_dtype": "dtype", "ftz": "ftz",
                  "accumulate": "mode", "double_row": "double_row", "transpose": "transpose",
                  "tiled": "tiled", "dtype_hi": "dtype_hi", "moving_dtype_hi": "dtype_hi",
                  "mx": "mx", "fp4": "fp4", "bf16_out": "dst", "stochastic": "rounding"}
        for name, (lsb, bits) in command.items():
            w.field(name, "command__payload", command_bits, lsb, bits, table=tables.get(name),
                    datafmt="hex" if name == "seed" else "dec")
    with save.group("Status"):
        w.field("rejected", "status", status_bits, *status["rejected"])
        w.field("error", "status", status_bits, *status["error"], table="error")
    with save.group("LoadStationary stream"):
        w.wire("stationary__valid", "valid")
        w.wire("stationary__ready", "ready")
        load_row = probes["load_row"]
        if load_row.width:   # a 1-row tile has no row counter
            w.wire(load_row.name, "partition row k", load_row.width, datafmt="dec")
        for m in range(cols):
            w.lane(f"stationary m{m}", "stationary__payload", stationary_bits,
                   stationary_lsb + m * width, width, mode, side="stationary")
        if mx:
            for m in range(cols):
                w.decoded(f"stationary m{m} scale", "stationary__payload", stationary_bits,
                          *_scale_bits(stationary, m), proc="e8m0")
    with save.group("MultiplyMoving stream"):
        w.wire("moving__valid", "valid")
        w.wire("moving__ready", "ready")
        w.field("row cells", "moving__payload", moving_bits,
                *_fields(moving)["groups"], datafmt="bin")
        for k in range(rows):
            w.lane(f"moving k{k}", "moving__payload", moving_bits,
                   moving_lsb + k * width, width, mode, side="moving")
        if mx:
            for k in range(rows):
                w.decoded(f"moving k{k} scale", "moving__payload", moving_bits,
                          *_scale_bits(moving, k), proc="e8m0")
    with save.group("PSUM result stream"):
        w.wire("result__valid", "valid")
        w.wire("result__ready", "ready")
        results = _fields(result_layout(cols))
        w.field("column cells", "result__payload", result_bits, *results["groups"],
                datafmt="bin")
        w.field("last", "result__payload", result_bits, *results["last"], datafmt="bin")
        for m in range(cols):
            w.lane(f"psum m{m}", "result__payload", result_bits,
                   result_lsb + m * PSUM_BITS, PSUM_BITS, mode, operand=False)
    with save.group("PSUM"):
        w.wire(probes["psum_write"].name, "write")
        for h in range(tokens.length):
            def field(name, lsb, bits, h=h, **kwargs):
                label = f"cell {h} {name}" if tokens.length > 1 else name
                w.field(label, out_token, token_bits, h * token_size + lsb, bits, **kwargs)

            field("op", *token["read"], table="op")
            addr_lsb, addr_bits = token["addr"]
            entry_bits = (entries - 1).bit_length()
            if entries == 1 << entry_bits:   # bank and entry are bit fields of the address
                if addr_bits > entry_bits:
                    field("bank", addr_lsb + entry_bits, addr_bits - entry_bits)
                if entry_bits:
                    field("entry", addr_lsb, entry_bits)
            elif addr_bits:
                field(f"address (bank * {entries} + entry)", addr_lsb, addr_bits)
            field("mode", *token["accumulate"], table="mode")
            field("dtype", *token["fp32"], table="psum_dtype")
            field("ftz", *token["ftz"], table="ftz")
            if mx:   # the BF16 write of an MX tile (layouts.MX_TOKEN)
                field("dst", *token["bf16"], table="dst")
                field("rounding", *token["stochastic"], table="rounding")
                field("first", *token["first"], table="first")
                field("seed", *token["seed"], datafmt="hex")
    with save.group("Tile state"):
        queued, loaded = probes["queued"], probes["loaded"]
        w.wire(queued.name, "command queue", queued.width, table="queue")
        for i in range(COMMAND_QUEUE_DEPTH):
            w.state(f"queue entry {i}", [(queued.name, queued.width, i),
                                         (loaded.name, loaded.width, i)], "entry")
        busy, full = probes["busy"], probes["full"]
        cells = full.width // 2
        for bit in range(full.width):
            cell, b = divmod(bit, 2)
            name = f"stationary buffer {b}" if cells == 1 else f"cell {cell} buffer {b}"
            w.state(name, [(busy.name, busy.width, bit), (full.name, full.width, bit)],
                    "buffer_state")
        for key, alias, table in (("running", "issue", "running"),
                                  ("issuing_read", "issuing op", "op"),
                                  ("load_buf", "load into", "buffer"),
                                  ("use_buf", "next matmul uses", "buffer"),
                                  ("advance", "pipeline", "pipeline")):
            w.wire(probes[key].name, alias, probes[key].width, table=table)
    if rows > PE_GROUP_LIMIT or cols > PE_GROUP_LIMIT:
        return
    for k in range(rows):
        with save.group(f"PE row {k}", closed=True):
            for c in range(cols):
                for what, probe in pe_probes(k, c, width, mx).items():
                    label = f"pe_{k}_{c} {what}"
                    if what == "scale":
                        w.decoded(label, probe.name, probe.width, probe.width - 1, 0,
                                  proc="e8m0")
                        continue
                    w.lane(label, probe.name, probe.width, 0, probe.width, mode,
                           operand=what != "psum", array=True,
                           side="stationary" if what == "weight" else "moving")


def _scale_bits(layout, lane):
    """``(msb, lsb)`` of lane ``lane``'s E8M0 scale in a stream payload ``layout``."""
    lsb = layout["scale"].offset + lane * Shape.cast(layout["scale"].shape.elem_shape).width
    return lsb + Shape.cast(layout["scale"].shape.elem_shape).width - 1, lsb


def save_file_signals(save_path):
    """The dump signals a GTKWave save file names.

    Returns
    -------
    set of (str, int, int or None)
        ``(name, width, bit)``: the signal's full name without its range, its width in bits
        (from the ``[msb:0]`` GTKWave appends to vectors; 1 without one) and ``None`` for the
        whole signal or the bit number picked from it (``#{alias} (position)name[msb:0]``,
        positions counted from the MSB).
    """
    def split(ref):
        name, _, bits = ref.partition("[")
        return name, (int(bits.split(":")[0]) + 1 if bits else 1)

    signals = set()
    for line in Path(save_path).read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "[*@^-!":
            continue
        if line.startswith("#{"):
            for ref in line[line.index("}") + 1:].split():
                if ref.startswith("("):
                    position, _, ref = ref[1:].partition(")")
                    name, width = split(ref)
                    signals.add((name, width, width - 1 - int(position)))
                else:
                    signals.add((*split(ref), None))
        else:
            if line.startswith("+{"):
                line = line[line.index("}") + 1:].strip()
            signals.add((*split(line), None))
    return signals


# ---- the viewer --------------------------------------------------------------------------

def gtkwave_command(dump_path, save_path):
    """The command that opens ``dump_path`` with ``save_path`` in GTKWave (list of str)."""
    return ["gtkwave", str(dump_path), str(save_path)]


def display_available():
    """True when ``$DISPLAY`` is set and ``gtkwave`` is on ``PATH``."""
    return bool(os.environ.get("DISPLAY")) and shutil.which("gtkwave") is not None


def open_or_print(dump_path, save_path, *, open_viewer=None, out=None):
    """Start GTKWave on the dump and save file, or print the command that would.

    Parameters
    ----------
    open_viewer : bool or None
        ``None``: open when :func:`display_available`, else print. ``True``: open or raise.
        ``False``: print only.
    out : file, optional
        Where the messages go (default ``sys.stdout``).

    Returns
    -------
    bool
        Whether GTKWave was started (it runs on in its own session; its output goes to
        ``<save file>.log``).

    Raises
    ------
    ViewerNotFoundError
        With ``open_viewer=True`` when ``gtkwave`` is not on PATH or ``$DISPLAY`` is unset.
    """
    out = sys.stdout if out is None else out
    command = gtkwave_command(dump_path, save_path)
    if open_viewer:
        if shutil.which("gtkwave") is None:
            raise ViewerNotFoundError("gtkwave is not on PATH; install it with 'apt-get install "
                                      "gtkwave', or drop --open to print the command")
        if not os.environ.get("DISPLAY"):
            raise ViewerNotFoundError("no display ($DISPLAY is unset) to open GTKWave on; drop "
                                      "--open to print the command")
    if open_viewer is False or not display_available():
        print(f"  view with       {shlex.join(command)}", file=out)
        return False
    log = Path(save_path).with_suffix(".log")
    with open(log, "w") as handle:
        subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    print(f"  opened GTKWave  {shlex.join(command)}", file=out)
    return True


# ---- reproducing one regression test with waves ------------------------------------------

def tile_test_names():
    """Names of the regression's cocotb tests (:data:`systolica.tb.protocol.TILE_TESTS`), in
    order (list of str)."""
    return list(protocol.TILE_TEST_LANES)


def lane_mode(test):
    """How a cocotb test's lanes are best decoded: one of :data:`LANE_MODES` (from
    :data:`systolica.tb.protocol.TILE_TEST_LANES`).

    Raises
    ------
    KeyError
        If ``test`` is not a test of the regression.
    """
    return protocol.TILE_TEST_LANES[test]


def failed_tests(results_xml):
    """Names of the failed test cases in a cocotb results XML file (list of str)."""
    root = ET.parse(results_xml).getroot()
    return [case.get("name") for case in root.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


def reproduce_dir(config, simulator, test, seed, *, wave_format="fst", build_root=None):
    """The folder ``--test`` writes one test's run into (pathlib.Path):
    ``<build root>/repro/<config label>-<simulator>[-vcd]/<test>-seed<seed>``."""
    root = Path(build_root) if build_root is not None else default_build_root()
    suffix = "" if wave_format == "fst" else f"-{wave_format}"
    return root.resolve() / "repro" / f"{config.label}-{simulator}{suffix}" / \
        f"{test}-seed{seed}"


def waveform_path(config, simulator, test, seed, *, wave_format="fst", build_root=None):
    """Where ``--test`` leaves the waveform of one test (pathlib.Path)."""
    return reproduce_dir(config, simulator, test, seed, wave_format=wave_format,
                         build_root=build_root) / waveform_name(wave_format)


def reproduce_command(config, simulator, test, seed, *, env=None, build_root=None):
    """The shell command that re-runs one cocotb test with waves, and where its FST lands.

    ``env`` holds environment variables the original run gave the test (they go in front of
    the command). Returns ``(command, waveform_path)``: a str and a pathlib.Path.
    """
    root = Path(build_root) if build_root is not None else default_build_root()
    words = [f"{key}={shlex.quote(str(value))}" for key, value in sorted((env or {}).items())]
    words += [shlex.quote(sys.executable), "-m", "systolica", "waves", "--sim", simulator,
              "--rows", str(config.rows), "--cols", str(config.cols), "--types",
              config.types_name, "--test", test, "--seed", str(seed),
              "--build-dir", shlex.quote(str(root.resolve()))]
    return " ".join(words), waveform_path(config, simulator, test, seed, build_root=root)


def reproduce_report(config, simulator, seed, results_xml, *, env=None, build_root=None):
    """For each failed test in ``results_xml``, the command that re-runs it with waves.

    Returns one block of text (str): per failed test one line with the command and one with
    the path its waveform will land at; empty when nothing failed.
    """
    lines = []
    for test in failed_tests(results_xml):
        command, wave = reproduce_command(config, simulator, test, seed, env=env,
                                          build_root=build_root)
        lines += [f"re-run {test} with waves: {command}", f"  waveform will be at: {wave}"]
    return "\n".join(lines)
