"""The ``rows x cols`` weight-stationary grid of processing elements."""

import re

from amaranth.hdl import ClockSignal, Const, Instance, Module, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import OPERAND_WIDTH, PSUM_WIDTH, _check_positive
from .pe import PE_SIGNATURE, ProcessingElement


class SystolicArray(wiring.Component):
    """A ``rows x cols`` grid of :class:`ProcessingElement`, weight-stationary.

    ``PE[k][m]`` holds ``stationary[k, m]``. Moving operands enter partition row ``k`` at
    column 0 and move one column right per advance; partial sums move one row down per
    advance, and row 0 (``chain_start``) starts each column's sum with its own product, so a
    lone -0 product stays -0 in BF16. Column ``m`` of the bottom row therefore delivers
    ``sum_k stationary[k, m] * moving[k]`` when the inputs arrive skewed (row ``k`` delayed by
    ``k`` advances); the output of column ``m`` appears ``rows + m`` advances after row 0's
    operand entered.

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
        Pipeline advance for every PE.
    load_row_en : In(rows)
        Bit ``k`` writes ``load_data`` into partition row ``k``'s stationary register
        ``load_buf``.
    load_buf : In(1)
        Stationary buffer that loads write.
    load_data : In(ArrayLayout(16, cols))
        One partition row of stationary values (operand bits).
    row_active : In(ArrayLayout(2, rows))
        Per partition row, per stationary buffer: the row is inside ``K``.
    bf16, ftz : In(2)
        Per stationary buffer: BF16 data type / flush-to-zero mode.
    moving : In(ArrayLayout(16, rows))
        Skewed moving operands, one per partition row, entering column 0.
    sel : In(rows)
        Stationary buffer select travelling with each row's moving operand.
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
            "load_row_en": In(rows),
            "load_buf": In(1),
            "load_data": In(data.ArrayLayout(OPERAND_WIDTH, cols)),
            "row_active": In(data.ArrayLayout(2, rows)),
            "bf16": In(2),
            "ftz": In(2),
            "moving": In(data.ArrayLayout(OPERAND_WIDTH, rows)),
            "sel": In(rows),
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
        outs = [[{port: Signal(members[port].shape, name=f"pe_{k}_{c}_{port}")
                  for port in ("moving_out", "sel_out", "psum_out")}
                 for c in range(cols)] for k in range(rows)]
        for k in range(rows):
            for c in range(cols):
                inputs = {
                    "en": self.en,
                    "load_en": self.load_row_en[k],
                    "load_buf": self.load_buf,
                    "load_data": self.load_data[c],
                    "row_active": self.row_active[k],
                    "bf16": self.bf16,
                    "ftz": self.ftz,
                    "chain_start": Const(int(k == 0), 1),
                    "moving_in": self.moving[k] if c == 0 else outs[k][c - 1]["moving_out"],
                    "sel_in": self.sel[k] if c == 0 else outs[k][c - 1]["sel_out"],
                    "psum_in": (Const(0, PSUM_WIDTH) if k == 0
                                else outs[k - 1][c]["psum_out"]),
                }
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
