"""The ``rows x cols`` weight-stationary grid of processing elements."""

import re

from amaranth.hdl import ClockSignal, Const, Instance, Module, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import OPERAND_WIDTH, PSUM_WIDTH, _check_positive
from .pe import PE_SIGNATURE, ProcessingElement


def operand_lane_layout():
    """One partition row's moving operand with its matmul's mode (StructLayout)."""
    return data.StructLayout({"value": OPERAND_WIDTH, "sel": 1, "active": 1, "bf16": 1,
                              "ftz": 1})


def load_lane_layout(rows):
    """One column's stationary write: ``valid``, ``row``, ``buf``, ``value`` (StructLayout)."""
    return data.StructLayout({"valid": 1, "row": range(rows), "buf": 1,
                              "value": OPERAND_WIDTH})


class SystolicArray(wiring.Component):
    """A ``rows x cols`` grid of :class:`ProcessingElement`, weight-stationary.

    ``PE[k][m]`` holds ``stationary[k, m]``. Moving operands enter partition row ``k`` at
    column 0 and move one column right per advance; partial sums move one row down per
    advance, and row 0 (``chain_start``) starts each column's sum with its own product, so a
    lone -0 product stays -0 in BF16. Column ``m`` of the bottom row therefore delivers
    ``sum_k stationary[k, m] * moving[k]`` when the inputs arrive skewed (row ``k`` delayed by
    ``k`` advances); the output of column ``m`` appears ``rows + m`` advances after row 0's
    operand entered.

    Stationary rows are loaded skewed the same way, by column: the load lane of column ``m``
    writes its value into ``PE[row][m]``'s stationary register ``buf`` in the advance it
    arrives, so a load entering column 0 in the same advance as the last moving operand that
    uses the buffer (or later) only ever overwrites PEs that operand has already passed. The
    tile uses this to reload a buffer right behind its last matmul.

    PEs are submodules named ``pe_<row>_<col>``, so waveforms show
    ``pe_<row>_<col>.weight_0`` and friends.

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
        grows with the wiring only, not with the PE's logic (a 128 x 128 array stays quick).

    Members
    -------
    en : In(1)
        Pipeline advance for every PE (loads happen only on an advance too).
    load : In(ArrayLayout(load_lane_layout(rows), cols))
        Per column, skewed: ``valid``, the partition ``row`` and stationary ``buf`` to write,
        and the ``value`` (operand bits).
    moving : In(ArrayLayout(operand_lane_layout(), rows))
        Skewed moving operands, one per partition row, entering column 0, each with its mode:
        ``value``, ``sel`` (stationary buffer), ``active`` (row inside K), ``bf16``, ``ftz``.
    psum : Out(ArrayLayout(32, cols))
        Partial sums leaving the bottom row (still skewed by column).

    Raises
    ------
    ValueError
        If ``rows`` or ``cols`` is not a positive integer.
    """

    def __init__(self, rows, cols, *, pe_module=None):
        _check_positive("rows", rows)
        _check_positive("cols", cols)
        if pe_module is not None and not (isinstance(pe_module, str)
                                          and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", pe_module)):
            raise ValueError(f"pe_module must be None or a Verilog identifier, not {pe_module!r}")
        self._rows = rows
        self._cols = cols
        self._pe_module = pe_module
        super().__init__({
            "en": In(1),
            "load": In(data.ArrayLayout(load_lane_layout(rows), cols)),
            "moving": In(data.ArrayLayout(operand_lane_layout(), rows)),
            "psum": Out(data.ArrayLayout(PSUM_WIDTH, cols)),
        })

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

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        members = PE_SIGNATURE.members
        # Outputs of every PE, named so waveforms read pe_<row>_<col>_<port>.
        travelling = ("moving", "sel", "active", "bf16", "ftz")
        outs = [[{port: Signal(members[port].shape, name=f"pe_{k}_{c}_{port}")
                  for port in [f"{name}_out" for name in travelling] + ["psum_out"]}
                 for c in range(cols)] for k in range(rows)]
        lane_field = {"moving": "value", "sel": "sel", "active": "active", "bf16": "bf16",
                      "ftz": "ftz"}
        for k in range(rows):
            for c in range(cols):
                load = self.load[c]
                inputs = {
                    "en": self.en,
                    "load_en": self.en & load.valid & (load.row == k),
                    "load_buf": load.buf,
                    "load_data": load.value,
                    "chain_start": Const(int(k == 0), 1),
                    "psum_in": (Const(0, PSUM_WIDTH) if k == 0
                                else outs[k - 1][c]["psum_out"]),
                }
                for name in travelling:
                    inputs[f"{name}_in"] = (self.moving[k][lane_field[name]] if c == 0
                                            else outs[k][c - 1][f"{name}_out"])
                name = f"pe_{k}_{c}"
                if self._pe_module is None:
                    pe = m.submodules[name] = ProcessingElement()
                    m.d.comb += [getattr(pe, port).eq(value) for port, value in inputs.items()]
                    m.d.comb += [sig.eq(getattr(pe, port)) for port, sig in outs[k][c].items()]
                else:
                    kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
                    kwargs.update({f"i_{port}": value for port, value in inputs.items()})
                    kwargs.update({f"o_{port}": sig for port, sig in outs[k][c].items()})
                    m.submodules[name] = Instance(self._pe_module, **kwargs)
        for c in range(cols):
            m.d.comb += self.psum[c].eq(outs[rows - 1][c]["psum_out"])
        return m
