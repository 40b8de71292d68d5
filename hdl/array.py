"""The ``rows x cols`` weight-stationary grid of processing elements."""

import re
from types import SimpleNamespace

from amaranth.hdl import ClockSignal, Const, Instance, Module, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import OPERAND_WIDTH, PSUM_WIDTH, DType
from .pe import PE_SIGNATURE, TRAVELLING, ProcessingElement


def operand_lane_layout():
    """One partition row's moving operand with its matmul's mode (StructLayout): ``value``,
    ``sel``, ``active``, ``hi`` (double-row second element inside K), ``stype``, ``mtype``
    (stationary and moving :class:`~.layouts.DType`), ``ftz``, ``transpose`` (transpose
    mode: an active row passes its stationary bits down instead of adding a product),
    ``first`` (the row is its row tile's first: its sum starts with its product)."""
    return data.StructLayout({"value": OPERAND_WIDTH, "sel": 1, "active": 1, "hi": 1,
                              "stype": DType, "mtype": DType, "ftz": 1, "transpose": 1,
                              "first": 1})


def load_lane_layout(rows):
    """One column's stationary write: ``valid``, ``row``, ``buf``, ``value`` (StructLayout)."""
    return data.StructLayout({"valid": 1, "row": range(rows), "buf": 1,
                              "value": OPERAND_WIDTH})


def _identifier(name, value):
    if value is not None and not (isinstance(value, str)
                                  and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value)):
        raise ValueError(f"{name} must be None or a Verilog identifier, not {value!r}")


class SystolicArray(wiring.Component):
    """A ``rows x cols`` grid of :class:`ProcessingElement`, weight-stationary.

    ``PE[k][m]`` holds ``stationary[k, m]``. Moving operands enter partition row ``k`` at
    column 0 and move one column right per advance; partial sums move one row down per
    advance. Row 0 adds its product to ``psum_in``, or starts each column's sum with its own
    product when ``chain_start`` is high (so a lone -0 product stays -0 in BF16): the tile
    ties ``chain_start`` high, and a grid of arrays chains them. Column ``m`` of the bottom
    row therefore delivers ``sum_k stationary[k, m] * moving[k]`` when the inputs arrive
    skewed (row ``k`` delayed by ``k`` advances); the output of column ``m`` appears
    ``rows + m`` advances after row 0's operand entered.

    Stationary rows are loaded skewed the same way, by column: the load lane of column ``m``
    writes its value into ``PE[row][m]``'s stationary register ``buf`` in the advance it
    arrives, so a load entering column 0 in the same advance as the last moving operand that
    uses the buffer (or later) only ever overwrites PEs that operand has already passed. The
    tile uses this to reload a buffer right behind its last matmul.

    With ``block = B`` the grid is built from ``(rows / B) x (cols / B)`` sub-arrays of
    ``B x B`` PEs (themselves :class:`SystolicArray` s), chained through ``psum_in``,
    ``chain_start`` and ``moving_out``: the same cells, cycle for cycle, in a hierarchy a
    simulator can compile once per block (Verilator's hierarchical blocks) instead of once
    per PE or once for the whole grid.

    PEs are submodules named ``pe_<row>_<col>`` (inside ``block_<row>_<col>`` sub-arrays when
    blocked), so waveforms show ``pe_<row>_<col>.weight_0`` and friends.

    Parameters
    ----------
    rows : int
        Partition (contraction, K) dimension, >= 1.
    cols : int
        Stationary free size (M), >= 1.
    pe_module : str or None
        ``None`` (default) elaborates every PE as an Amaranth submodule (needed for
        ``amaranth.sim``). A Verilog module name instead instantiates each PE as an
        ``Instance`` of that module, which must then be emitted once beside the array
        (``verilog.convert(ProcessingElement(), name=pe_module)``): Verilog generation then
        grows with the wiring only, not with the PE's logic.
    block : int or None
        Side ``B`` of the square sub-arrays, or ``None`` (default) for a flat grid of PEs.
        ``B`` must be a power of two dividing both ``rows`` and ``cols``.
    block_module : str or None
        With ``block``: ``None`` elaborates the sub-arrays as Amaranth submodules; a Verilog
        module name instantiates each as an ``Instance`` of that module, which must be
        emitted once beside the array (``SystolicArray(B, B, pe_module=...)``).
    pe : callable
        Makes one Amaranth PE (default :class:`ProcessingElement`, every type): the tile
        passes the PE generated for its type set (``tile.pe_for``). Unused with
        ``pe_module``.

    Members
    -------
    en : In(1)
        Pipeline advance for every PE (loads happen only on an advance too).
    load : In(ArrayLayout(load_lane_layout(rows), cols))
        Per column, skewed: ``valid``, the partition ``row`` and stationary ``buf`` to write,
        and the ``value`` (operand bits).
    moving : In(ArrayLayout(operand_lane_layout(), rows))
        Skewed moving operands, one per partition row, entering column 0, each with its mode
        (:func:`operand_lane_layout`).
    psum_in : In(ArrayLayout(32, cols))
        Partial sums entering the top row (ignored where ``chain_start`` is high).
    chain_start : In(1)
        Row 0 starts each column's sum with its own product instead of adding ``psum_in``.
    psum : Out(ArrayLayout(32, cols))
        Partial sums leaving the bottom row (still skewed by column).
    moving_out : Out(ArrayLayout(operand_lane_layout(), rows))
        The moving operands leaving the last column (for an array to the right).

    Raises
    ------
    ValueError
        If a module name is not a Verilog identifier, or ``block`` is not a power of two
        dividing ``rows`` and ``cols``.
    """

    def __init__(self, rows, cols, *, pe_module=None, block=None, block_module=None,
                 pe=ProcessingElement):
        _identifier("pe_module", pe_module)
        _identifier("block_module", block_module)
        if block is not None:
            if not isinstance(block, int) or block < 1 or block & (block - 1) or (
                    rows % block or cols % block):
                raise ValueError(f"block must be a power of two dividing rows = {rows} and "
                                 f"cols = {cols}, not {block}")
        elif block_module is not None:
            raise ValueError("block_module needs block (the side of the sub-arrays)")
        self._rows = rows
        self._cols = cols
        self._pe_module = pe_module
        self._pe = pe
        self._block = block
        self._block_module = block_module
        super().__init__(array_signature(rows, cols))

    @property
    def rows(self):
        """Partition (K) dimension of the grid (int, read-only)."""
        return self._rows

    @property
    def cols(self):
        """Stationary free size (M) of the grid (int, read-only)."""
        return self._cols

    @property
    def pe_module(self):
        """Verilog module name PEs are instantiated as, or ``None`` (read-only)."""
        return self._pe_module

    @property
    def block(self):
        """Side of the sub-arrays, or ``None`` for a flat grid (read-only)."""
        return self._block

    def elaborate(self, platform):
        if self._block is not None:
            return self._elaborate_blocks()
        m = Module()
        rows, cols = self._rows, self._cols
        members = PE_SIGNATURE.members
        # Outputs of every PE, named so waveforms read pe_<row>_<col>_<port>.
        travelling = ("moving",) + TRAVELLING
        outs = [[{port: Signal(members[port].shape, name=f"pe_{k}_{c}_{port}")
                  for port in [f"{name}_out" for name in travelling] + ["psum_out"]}
                 for c in range(cols)] for k in range(rows)]
        lane_field = {"moving": "value", **{name: name for name in TRAVELLING}}
        for k in range(rows):
            for c in range(cols):
                load = self.load[c]
                inputs = {
                    "en": self.en,
                    "load_en": self.en & load.valid & (load.row == k),
                    "load_buf": load.buf,
                    "load_data": load.value,
                    "chain_start": self.chain_start if k == 0 else Const(0, 1),
                    "psum_in": self.psum_in[c] if k == 0 else outs[k - 1][c]["psum_out"],
                }
                for name in travelling:
                    inputs[f"{name}_in"] = (self.moving[k][lane_field[name]] if c == 0
                                            else outs[k][c - 1][f"{name}_out"])
                name = f"pe_{k}_{c}"
                if self._pe_module is None:
                    pe = m.submodules[name] = self._pe()
                    m.d.comb += [getattr(pe, port).eq(value) for port, value in inputs.items()]
                    m.d.comb += [sig.eq(getattr(pe, port)) for port, sig in outs[k][c].items()]
                else:
                    kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
                    kwargs.update({f"i_{port}": value for port, value in inputs.items()})
                    kwargs.update({f"o_{port}": sig for port, sig in outs[k][c].items()})
                    m.submodules[name] = Instance(self._pe_module, **kwargs)
        for c in range(cols):
            m.d.comb += self.psum[c].eq(outs[rows - 1][c]["psum_out"])
        for k in range(rows):
            out = self.moving_out[k]
            last = outs[k][cols - 1]
            m.d.comb += [out.value.eq(last["moving_out"])] + [
                getattr(out, name).eq(last[f"{name}_out"]) for name in travelling[1:]]
        return m

    def _sub_array(self, m, name):
        """One ``B x B`` sub-array: an Amaranth submodule, or an Instance of
        ``block_module`` behind signals shaped as its ports."""
        b = self._block
        if self._block_module is None:
            m.submodules[name] = sub = SystolicArray(b, b, pe_module=self._pe_module, pe=self._pe)
            return sub
        ports = {}
        kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for port, member in array_signature(b, b).members.items():
            ports[port] = Signal(member.shape, name=f"{name}_{port}")
            kwargs[f"{'i' if member.flow == In else 'o'}_{port}"] = ports[port]
        m.submodules[name] = Instance(self._block_module, **kwargs)
        return SimpleNamespace(**ports)

    def _elaborate_blocks(self):
        m = Module()
        b = self._block
        shift = b.bit_length() - 1
        grid = [[self._sub_array(m, f"block_{br}_{bc}") for bc in range(self._cols // b)]
                for br in range(self._rows // b)]
        for br, line in enumerate(grid):
            for bc, sub in enumerate(line):
                m.d.comb += [sub.en.eq(self.en),
                             sub.chain_start.eq(self.chain_start if br == 0 else 0)]
                for c in range(b):
                    load = self.load[bc * b + c]
                    m.d.comb += [
                        sub.load[c].valid.eq(load.valid & ((load.row >> shift) == br)),
                        sub.load[c].row.eq(load.row[:shift] if shift else 0),
                        sub.load[c].buf.eq(load.buf),
                        sub.load[c].value.eq(load.value),
                        sub.psum_in[c].eq(self.psum_in[bc * b + c] if br == 0
                                          else grid[br - 1][bc].psum[c]),
                    ]
                for k in range(b):
                    m.d.comb += sub.moving[k].eq(self.moving[br * b + k] if bc == 0
                                                 else line[bc - 1].moving_out[k])
                if br == len(grid) - 1:
                    m.d.comb += [self.psum[bc * b + c].eq(sub.psum[c]) for c in range(b)]
            m.d.comb += [self.moving_out[br * b + k].eq(line[-1].moving_out[k])
                         for k in range(b)]
        return m


def array_signature(rows, cols):
    """Port signature of a ``rows x cols`` :class:`SystolicArray` (wiring.Signature)."""
    lanes = data.ArrayLayout(operand_lane_layout(), rows)
    return wiring.Signature({
        "en": In(1),
        "load": In(data.ArrayLayout(load_lane_layout(rows), cols)),
        "moving": In(lanes),
        "psum_in": In(data.ArrayLayout(PSUM_WIDTH, cols)),
        "chain_start": In(1),
        "psum": Out(data.ArrayLayout(PSUM_WIDTH, cols)),
        "moving_out": Out(lanes),
    })
