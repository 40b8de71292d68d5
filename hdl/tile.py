"""The tile top: the command queue, stationary loader, issue logic, array and result path
connected, and the probes that name its internal signals for waveforms."""

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Shape, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .command_queue import COMMAND_QUEUE_DEPTH, CommandQueue
from .config import TileConfig
from .float_mul import FLOAT_FIELDS
from .issue import IssueLogic
from .layouts import (
    OPERAND_WIDTH,
    DType,
    cell_grid,
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
    status_layout,
    token_layout,
)
from .loader import StationaryLoader
from .pe import ProcessingElement, pe_signature
from .result import ResultPath

__all__ = ["COMMAND_QUEUE_DEPTH", "MX_PE_PROBES", "PE_PROBES", "PROBES", "Probe", "Tile",
           "pe_probes", "tile_component", "tile_probes", "token_layout", "verilog_ports"]


#: The tile's internal signals that waveforms show, each a port of one of its components:
#: ``{key: (instance, member path, meaning)}``. ``instance`` is the component's submodule
#: name in :meth:`Tile.elaborate` (its Verilog instance, so its scope in a dump, below the
#: tile's); the member path names the port in that component's signature. This table is
#: the one place outside ``hdl/`` code may learn internal names from: use
#: :func:`tile_probes` (or :attr:`Tile.probes`) for a size's shapes and dump names.
PROBES = {
    "queued": ("queue", ("queued",), "bit i: command-queue entry i holds a command "
                                     "(entries fill from 0)"),
    "loaded": ("queue", ("loaded",), "bit i: entry i's stationary is loaded (a READ's at "
                                     "once)"),
    "load_row": ("loader", ("load_row",), "partition row the next stationary beat writes "
                                          "(0 bits on a 1-row tile)"),
    "load_buf": ("loader", ("load_buf",), "stationary buffer the load under way writes"),
    "use_buf": ("loader", ("buffers", "sel"), "stationary buffer the next matmul uses"),
    "full": ("loader", ("full",), "bit 2 i + b: buffer b of buffer cell i is loaded for a "
                                  "matmul that has not started"),
    "busy": ("loader", ("busy",), "bit 2 i + b: buffer b of buffer cell i is used by a "
                                  "matmul still sending moving beats"),
    "running": ("issue", ("running",), "a command has issued beats and not its last one"),
    "issuing_read": ("issue", ("read",), "the command issuing is a READ (while running)"),
    "advance": ("result", ("advance",), "the pipeline advances (low: a result is offered "
                                        "and not taken)"),
    "psum_token": ("result", ("out_token",), "token_layout per column cell of the beat at "
                                             "the PSUM stage, "
                                             "whose result is offered"),
    "psum_write": ("result", ("write",), "PSUM write strobe"),
}


@dataclass(frozen=True)
class Probe:
    """One internal signal of a tile: a port of one of its components.

    Attributes
    ----------
    key : str
        Its key in :data:`PROBES`.
    instance : str
        The component's submodule name in the tile (its scope in the generated Verilog).
    port : tuple of str
        The member path of the port in the component's signature.
    shape : shape-castable
        The port's shape on this tile (a width or a data layout such as
        :func:`~.layouts.token_layout`).
    doc : str
        What it shows.
    """

    key: str
    instance: str
    port: tuple
    shape: object
    doc: str

    @property
    def name(self):
        """Its hierarchical name below the tile's scope in the generated Verilog and in a
        dump (str): ``instance.port``, nested members joined by ``__`` as Amaranth names
        interface ports (``loader.buffers__sel``)."""
        return f"{self.instance}.{'__'.join(self.port)}"

    @property
    def width(self):
        """Bits (int; 0 for a signal the tile does not have at this size)."""
        return Shape.cast(self.shape).width


#: Per-PE signals waveforms show, for arrays built of Amaranth PEs or of PE instances
#: (:class:`~.array.SystolicArray` names PE ``(k, c)`` ``pe_<k>_<c>``):
#: ``{key: (signal in the PE, meaning)}``. ``weight`` is the PE's named internal signal
#: (``weight[sel_in]``); the others are ports of :func:`~.pe.pe_signature`.
PE_PROBES = {
    "weight": ("weight", "the stationary value the current operand multiplies"),
    "operand": ("moving_in", "the moving operand"),
    "psum": ("psum_out", "the partial sum out"),
}


#: The per-PE signal an MX PE adds to :data:`PE_PROBES` (a port of
#: ``pe_signature(mx=True)``).
MX_PE_PROBES = {
    "scale": ("scale_in", "the moving operand's E8M0 block scale"),
}


def pe_probes(k, c, width=OPERAND_WIDTH, mx=False):
    """The :data:`PE_PROBES` of PE ``(k, c)`` of a tile's array with ``width``-bit operand
    lanes, and :data:`MX_PE_PROBES` with ``mx`` (dict of str to :class:`Probe`; instance
    ``array.pe_<k>_<c>``)."""
    members = pe_signature(width, mx).members
    shapes = {"weight": width, **{name: member.shape for name, member in members.items()}}
    table = {**PE_PROBES, **(MX_PE_PROBES if mx else {})}
    return {key: Probe(key, f"array.pe_{k}_{c}", (signal,), shapes[signal], doc)
            for key, (signal, doc) in table.items()}


def _check_config(config):
    if not isinstance(config, TileConfig):
        raise TypeError(f"config must be a TileConfig, not {type(config).__name__}")
    return config


def config_dtypes(config):
    """The operand types of ``config``'s type set as :class:`~.layouts.DType` s (tuple)."""
    return tuple(DType[name.upper()] for name in config.dtypes)


def pe_for(config):
    """The :class:`~.pe.ProcessingElement` generated for ``config``'s type set: the INT8
    datapath if ``int8`` is in it, a float multiplier for its float types, and the FP8
    double-row datapath with ``fp8-double-row``, the TF32 / FP32 datapath (32-bit lanes)
    with ``fp32``, the MX datapath (32-bit lanes, block scales) with ``mx``."""
    dtypes = config_dtypes(_check_config(config))
    return ProcessingElement(float_dtypes=tuple(t for t in dtypes if t in FLOAT_FIELDS),
                             double_row=config.double_row, int8=DType.INT8 in dtypes,
                             wide=config.wide, mx=config.mx,
                             col_cells=cell_grid(config.cols)[0])


def _array_options(config):
    """The :class:`~.array.SystolicArray` options every array of ``config``'s tile takes:
    lane width, the MX lanes, and the column-cell mask's bits and cell width."""
    col_cells, col_group = cell_grid(config.cols)
    return {"width": config.operand_width, "mx": config.mx, "col_cells": col_cells,
            "col_group": col_group}


def block_array(config, block, pe_module):
    """The ``block x block`` sub-array a tile of ``config`` is built of with ``block``
    (:class:`~.array.SystolicArray` of PE instances of ``pe_module``, ``edge_registers``),
    to convert on its own (Verilog generation emits it once beside the tile)."""
    options = _array_options(_check_config(config))
    options["col_group"] = min(options["col_group"], block)
    return SystolicArray(block, block, pe_module=pe_module, edge_registers=True, **options)


def _component_makers(config):
    """How to build each of the tile's control components, by submodule name (dict of
    name to a callable without arguments)."""
    rows, cols = config.rows, config.cols
    entries = config.psum_entries
    depth = config.psum_banks * entries
    return {
        "queue": lambda: CommandQueue(rows, cols, psum_banks=config.psum_banks,
                                      psum_entries=entries, depth=config.queue_depth,
                                      dtypes=config_dtypes(config),
                                      double_row=config.double_row, mx=config.mx),
        "loader": lambda: StationaryLoader(rows, cols, config.operand_width,
                                            depth=config.queue_depth, mx=config.mx),
        "issue": lambda: IssueLogic(rows, psum_entries=entries, psum_depth=depth, cols=cols,
                                    width=config.operand_width, mx=config.mx),
        "result": lambda: ResultPath(cols, rows + cols, psum_depth=depth, mx=config.mx),
    }


def _components(config):
    """The tile's control components, by submodule name (dict)."""
    return {name: make() for name, make in _component_makers(config).items()}


def tile_component(config, name):
    """The control component ``name`` (``"queue"``, ``"loader"``, ``"issue"`` or
    ``"result"``) of the tile of ``config`` (a :class:`~.config.TileConfig`), as the tile
    builds it: to convert on its own for ``Tile(..., component_modules=...)``.

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If ``name`` is not a component.
    """
    makers = _component_makers(_check_config(config))
    if name not in makers:
        raise ValueError(f"no tile component {name!r}; the components are "
                         f"{', '.join(makers)}")
    return makers[name]()


def verilog_ports(component):
    """The Verilog ports Amaranth gives a component converted on its own: ``(name, member,
    value)`` per member of its flattened signature, ``name`` the path joined by ``__``
    (iterator). Also the tile's ``ports.json`` names."""
    for path, member, value in component.signature.flatten(component):
        yield "__".join(str(part) for part in path), member, value


def _probes(components):
    probes = {}
    for key, (instance, port, doc) in PROBES.items():
        signature = components[instance].signature
        for name in port[:-1]:
            signature = signature.members[name].signature
        probes[key] = Probe(key, instance, port, signature.members[port[-1]].shape, doc)
    return probes


def tile_probes(config):
    """The :data:`PROBES` of the tile of ``config`` (a :class:`~.config.TileConfig`), as
    :class:`Probe` s.

    Returns
    -------
    dict of str to Probe
        Keyed as :data:`PROBES`, in its order (the same as ``Tile(config).probes``).

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    """
    components = _components(_check_config(config))
    for component in components.values():
        # Built for their signatures only, never elaborated: tell Amaranth's unused-
        # elaboratable check (its MustUse reads this attribute), which otherwise warns
        # "created but never used" once per component when they are collected, e.g. in the
        # middle of a waves build that writes the GTKWave save file.
        component._MustUse__silence = True
    return _probes(components)


class Tile(wiring.Component):
    """A weight-stationary tensor-engine tile computing ``stationary.T @ moving`` into PSUM.

    Each matmul is INT8 x INT8 -> INT32 or any pair of float types (BF16, FP16, FP8 e4m3 /
    e5m2 / e3m4 / e4m3fn) -> FP32, chosen per command; FP8 double-row matmuls (e4m3 / e5m2)
    take K up to ``2 * rows``. The datapath is generated for the type set of its
    :class:`~.config.TileConfig` only (:func:`pe_for`); a matmul of another type is
    rejected like any illegal command (``TYPE_NOT_BUILT``). Four valid/ready streams
    (command, stationary, moving, result) and a status output: a command is checked when it
    is accepted (an illegal one is dropped and counted in ``status``), waits in a queue of
    ``config.queue_depth`` (default :data:`COMMAND_QUEUE_DEPTH`), and runs in order; the

    ``rows + cols`` cycles after its moving beat was accepted when nothing stalls; the
    pipeline stalls as a whole while a result is offered and not taken. The tile top
    connects ``queue``, ``loader``, ``issue``, ``array`` and ``result`` (also the Verilog
    instance names); internal signals for waveforms are :attr:`probes` (see :data:`PROBES`).

    The full reference (the data-flow figure, every stream's beats and lanes, the command
    checks in order, PSUM, the grid of sub-arrays, timing, composition and cost) is
    ``docs/tile.md``.

    Parameters
    ----------
    config : TileConfig
        Size, type set, PSUM geometry and queue depth (validated by TileConfig).
    pe_module, block, block_module : optional
        Passed to :class:`SystolicArray`: how the PE grid is built (Amaranth submodules, or
        Verilog ``Instance`` s of a PE module or of ``block x block`` sub-array modules).
    component_modules : dict of str to str, optional
        Components (``"queue"``, ``"loader"``, ``"issue"``, ``"result"``) to instance as a
        Verilog module of that name instead of elaborating them here; the module must be
        generated beside the tile from :func:`tile_component` (Verilog generation does this to
        convert the largest parts in parallel). Same ports, same instance names.

    Members
    -------
    command : In(stream.Signature(command_layout()))
    stationary : In(stream.Signature(stationary_layout(cols, config.operand_width, config.mx)))
    moving : In(stream.Signature(moving_layout(rows, config.operand_width, config.mx)))
    result : Out(stream.Signature(result_layout(cols)))
    status : Out(status_layout())
        Driven by ``queue``: rejected-command count and the latest
        :class:`~.layouts.ErrorCode`.

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If a grid option is bad (:class:`SystolicArray`).
    """

    def __init__(self, config, *, pe_module=None, block=None, block_module=None,
                 component_modules=None):
        self._config = _check_config(config)
        rows, cols = config.rows, config.cols
        # Built here so that a bad grid option is refused by the constructor.
        self._array = SystolicArray(rows, cols, pe_module=pe_module, block=block,
                                    block_module=block_module, pe=lambda: pe_for(config),
                                    **_array_options(config))
        self._components = _components(config)
        self._component_modules = dict(component_modules or {})
        unknown = set(self._component_modules) - set(self._components)
        if unknown:
            raise ValueError(f"component_modules names {sorted(unknown)}; the components "
                             f"are {', '.join(self._components)}")
        super().__init__({
            "command": In(stream.Signature(command_layout())),
            "stationary": In(stream.Signature(stationary_layout(cols, config.operand_width,
                                                                config.mx))),
            "moving": In(stream.Signature(moving_layout(rows, config.operand_width,
                                                        config.mx))),
            "result": Out(stream.Signature(result_layout(cols))),
            "status": Out(status_layout()),
        })

    @property
    def config(self):
        """The configuration the tile is built from (:class:`~.config.TileConfig`)."""
        return self._config

    @property
    def rows(self):
        """Partition (K) dimension (int, read-only)."""
        return self._config.rows

    @property
    def cols(self):
        """Stationary free size (M) (int, read-only)."""
        return self._config.cols

    @property
    def psum_banks(self):
        """PSUM banks (int, read-only)."""
        return self._config.psum_banks

    @property
    def psum_entries(self):
        """PSUM entries per bank (int, read-only)."""
        return self._config.psum_entries

    @property
    def probes(self):
        """The internal signals waveforms show (dict of str to :class:`Probe`, keyed and
        ordered as :data:`PROBES`; the same as :func:`tile_probes` for this size)."""
        return _probes(self._components)

    @property
    def latency(self):
        """Cycles from a moving beat's acceptance to its result being offered (int)."""
        return self.rows + self.cols

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self._array
        for name, component in self._components.items():
            module = self._component_modules.get(name)
            m.submodules[name] = component if module is None else _instance(module, component)
        queue, loader, issue, result = (self._components[name] for name in (
            "queue", "loader", "issue", "result"))

        # The tile's streams go to the components that take them.
        wiring.connect(m, wiring.flipped(self.command), queue.command)
        wiring.connect(m, wiring.flipped(self.stationary), loader.stationary)
        wiring.connect(m, wiring.flipped(self.moving), issue.moving)
        wiring.connect(m, wiring.flipped(self.result), result.result)
        m.d.comb += self.status.eq(queue.status)
        # Queue -> loader (which load next, and when it is done), queue -> issue (the head),
        # issue <-> loader (which buffer a matmul uses, and when it is free).
        wiring.connect(m, queue.load, loader.request)
        wiring.connect(m, queue.head, issue.head)
        wiring.connect(m, issue.buffers, loader.buffers)
        # Datapath: loads and operands into the array, its column out to PSUM; every stage
        # moves unless a result is offered and not taken.
        m.d.comb += [
            array.chain_start.eq(1),     # psum_in stays 0: the tile's row 0 starts
            array.load.eq(loader.load),
            array.moving.eq(issue.operands),
            array.moving_next.eq(issue.operands_next),     # what a blocked array reads
            result.tokens.eq(issue.tokens),
            result.column.eq(array.psum),
            array.en.eq(result.advance),
            loader.en.eq(result.advance),
            issue.en.eq(result.advance),
        ]
        return m


def _instance(module, component):
    """An ``Instance`` of Verilog module ``module`` generated from a component like
    ``component``, wired to ``component``'s members (which the tile then uses as it would
    the component's own); ``component`` itself is not elaborated."""
    component._MustUse__silence = True
    ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
    for name, member, value in verilog_ports(component):
        ports[f"{'i' if member.flow == In else 'o'}_{name}"] = Value.cast(value)
    return Instance(module, **ports)
