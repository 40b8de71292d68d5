"""The ``rows x cols`` weight-stationary grid of processing elements."""

import re
from types import SimpleNamespace

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import OPERAND_WIDTH, PSUM_WIDTH, WIDE_WIDTH, lane_dtype
from .mx_quad import MX_SCALE_BITS
from .pe import ProcessingElement, pe_signature, travelling


def operand_lane_layout(width=OPERAND_WIDTH, mx=False, col_cells=1):
    """One partition row's moving operand with its matmul's mode (StructLayout): ``value``
    (``width`` bits), ``sel``, ``active``, ``hi`` (double-row second element inside K),
    ``stype``, ``mtype`` (stationary and moving type codes, :func:`~.layouts.lane_dtype`),
    ``ftz``,
    ``transpose`` (transpose mode: an active row passes its stationary bits down instead of
    adding a product), ``first`` (the row is its row tile's first: its sum starts with its
    product), with 32-bit lanes ``step`` (which pass of its moving column the operand
    is: :class:`~.fp32_mul.Fp32Multiplier`), and with ``mx`` the MX PE's ``mx`` (the value
    is an x4 word) and ``scale`` (its E8M0 block scale); ``cskip``, ``col_cells`` bits: the
    column cells outside the operand's matmul's tile (bit 0 the cell it enters next)."""
    fields = {"value": width, "sel": 1, "active": 1, "hi": 1, "stype": lane_dtype(width),
              "mtype": lane_dtype(width), "ftz": 1, "transpose": 1, "first": 1,
              "cskip": col_cells}
    if width == WIDE_WIDTH:
        fields["step"] = 2
    if mx:
        fields.update({"mx": 1, "scale": MX_SCALE_BITS})
    return data.StructLayout(fields)


def load_lane_layout(rows, width=OPERAND_WIDTH, mx=False):
    """One column's stationary write: ``valid``, ``row``, ``buf``, ``value``, and with ``mx``
    the value's E8M0 block ``scale`` (StructLayout)."""
    fields = {"valid": 1, "row": range(rows), "buf": 1, "value": width}
    if mx:
        fields["scale"] = MX_SCALE_BITS
    return data.StructLayout(fields)


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
    ``B x B`` PEs (themselves :class:`SystolicArray` s, with ``edge_registers``): the same
    cells, cycle for cycle, in a hierarchy a simulator can compile once per block
    (Verilator's hierarchical blocks) instead of once per PE or once for the whole grid.
    A sub-array's column 0 and row 0 do not read their neighbours' output registers but
    their own copies of them, loaded on each advance from the neighbour's ``moving_out_next``
    and ``psum_next`` (what those registers load), so no sub-array input reaches a
    multiplier or adder combinationally: Verilator evaluates whatever a hierarchical
    block's inputs reach on every ``eval()`` of the block, four times a clock cycle, and
    the rest once. The sub-arrays of the left column and top row take the grid's
    ``moving_next`` and ``psum_in_next``, which a blocked grid reads instead of ``moving``
    and ``psum_in``.

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
    edge_registers : bool
        The sub-array form (default ``False``; flat grids only): column 0's moving lanes and
        row 0's partial sums are registers loaded from ``moving_next`` and ``psum_in_next``
        on each advance, ``chain_start`` is registered every cycle (it must be constant: it
        settles on the first clock edge), and the ports ``moving`` and ``psum_in`` are left
        out.
    width : int
        Bits of an operand lane: 16, or 32 for PEs with TF32 / FP32 or MX.
    col_cells, col_group : int
        The moving lanes' column-cell mask has ``col_cells`` bits (default 1; ``pe`` must
        make PEs with as many), and a column cell is ``col_group`` columns (default: all of
        them): where one starts, the mask a PE receives is its left neighbour's shifted
        down one bit, so each PE reads its own cell's bit first.
    mx : bool
        The PEs have the MX option (default ``False``; ``pe`` must make such PEs): the load
        lanes carry each value's E8M0 ``scale`` and the moving lanes the ``mx`` bit and the
        operand's ``scale`` (:func:`operand_lane_layout`), wired like the other mode bits.

    Members
    -------
    en : In(1)
        Pipeline advance for every PE (loads happen only on an advance too).
    load : In(ArrayLayout(load_lane_layout(rows), cols))
        Per column, skewed: ``valid``, the partition ``row`` and stationary ``buf`` to write,
        and the ``value`` (operand bits).
    moving : In(ArrayLayout(operand_lane_layout(), rows))
        Skewed moving operands, one per partition row, entering column 0, each with its mode
        (:func:`operand_lane_layout`). Read by a flat grid.
    moving_next : In(ArrayLayout(operand_lane_layout(), rows))
        The value ``moving`` holds after the next advance. Read by a blocked grid and with
        ``edge_registers``.
    psum_in : In(ArrayLayout(32, cols))
        Partial sums entering the top row (ignored where ``chain_start`` is high). Read by a
        flat grid.
    psum_in_next : In(ArrayLayout(32, cols))
        The value ``psum_in`` holds after the next advance. Read by a blocked grid and
        with ``edge_registers``.
    chain_start : In(1)
        Row 0 starts each column's sum with its own product instead of adding ``psum_in``.
    psum : Out(ArrayLayout(32, cols))
        Partial sums leaving the bottom row (still skewed by column).
    psum_next : Out(ArrayLayout(32, cols))
        The value ``psum`` takes at the next advance (combinational).
    moving_out : Out(ArrayLayout(operand_lane_layout(), rows))
        The moving operands leaving the last column (for an array to the right).
    moving_out_next : Out(ArrayLayout(operand_lane_layout(), rows))
        The value ``moving_out`` takes at the next advance (the last column's inputs).

    Raises
    ------
    ValueError
        If a module name is not a Verilog identifier, ``block`` is not a power of two
        dividing ``rows`` and ``cols`` and dividing or divided by ``col_group``, or
        ``edge_registers`` is asked for with ``block``.
    """

    def __init__(self, rows, cols, *, pe_module=None, block=None, block_module=None,
                 pe=ProcessingElement, edge_registers=False, width=OPERAND_WIDTH, mx=False,
                 col_cells=1, col_group=None):
        _identifier("pe_module", pe_module)
        _identifier("block_module", block_module)
        if block is not None:
            if not isinstance(block, int) or block < 1 or block & (block - 1) or (
                    rows % block or cols % block):
                raise ValueError(f"block must be a power of two dividing rows = {rows} and "
                                 f"cols = {cols}, not {block}")
        elif block_module is not None:
            raise ValueError("block_module needs block (the side of the sub-arrays)")
        if edge_registers and block is not None:
            raise ValueError("edge_registers is for a flat grid (a sub-array), not with block")
        group = cols if col_group is None else col_group
        if block is not None and group % block and block % group:
            raise ValueError(f"block = {block} and the column cell of {group} columns must "
                             f"divide one another")
        self._rows = rows
        self._cols = cols
        self._pe_module = pe_module
        self._pe = pe
        self._block = block
        self._block_module = block_module
        self._edge_registers = bool(edge_registers)
        self._width = width
        self._mx = bool(mx)
        self._col_cells = col_cells
        self._col_group = cols if col_group is None else col_group
        super().__init__(array_signature(rows, cols, edge_registers=self._edge_registers,
                                         width=width, mx=self._mx, col_cells=col_cells))

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

    @property
    def edge_registers(self):
        """Whether column 0 and row 0 read registered copies of their inputs (bool)."""
        return self._edge_registers

    def elaborate(self, platform):
        if self._block is not None:
            return self._elaborate_blocks()
        m = Module()
        rows, cols = self._rows, self._cols
        members = pe_signature(self._width, self._mx, self._col_cells).members
        # Outputs of every PE, named so waveforms read pe_<row>_<col>_<port>.
        bits = travelling(self._width, self._mx)
        lanes = ("moving",) + bits
        outs = [[{port: Signal(members[port].shape, name=f"pe_{k}_{c}_{port}")
                  for port in [f"{name}_out" for name in lanes] + ["psum_out"]}
                 for c in range(cols)] for k in range(rows)]
        lane_field = {"moving": "value", **{name: name for name in bits}}
        moving, psum_in, chain_start = self._edge_inputs(m)
        for k in range(rows):
            for c in range(cols):
                load = self.load[c]
                inputs = {
                    "en": self.en,
                    "load_en": self.en & load.valid & (load.row == k),
                    "load_buf": load.buf,
                    "load_data": load.value,
                    **({"load_scale": load.scale} if self._mx else {}),
                    "chain_start": chain_start if k == 0 else Const(0, 1),
                    "psum_in": psum_in[c] if k == 0 else outs[k - 1][c]["psum_out"],
                }
                for name in lanes:
                    inputs[f"{name}_in"] = (moving[k][lane_field[name]] if c == 0
                                            else outs[k][c - 1][f"{name}_out"])
                if c and c % self._col_group == 0:      # a column cell starts here
                    inputs["cskip_in"] = _next_cell(outs[k][c - 1]["cskip_out"])
                if k == rows - 1:
                    outs[k][c]["psum_next"] = Signal(PSUM_WIDTH, name=f"pe_{k}_{c}_psum_next")
                if c == cols - 1:       # what the last column's outputs load next
                    out = self.moving_out_next[k]
                    m.d.comb += [getattr(out, lane_field[name]).eq(inputs[f"{name}_in"])
                                 for name in lanes]
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
            m.d.comb += [self.psum[c].eq(outs[rows - 1][c]["psum_out"]),
                         self.psum_next[c].eq(outs[rows - 1][c]["psum_next"])]
        for k in range(rows):
            out = self.moving_out[k]
            last = outs[k][cols - 1]
            m.d.comb += [out.value.eq(last["moving_out"])] + [
                getattr(out, name).eq(last[f"{name}_out"]) for name in bits]
        return m

    def _edge_inputs(self, m):
        """Column 0's moving lanes, row 0's partial sums and chain start: the inputs, or
        with ``edge_registers`` registers loaded from ``moving_next`` and ``psum_in_next``
        on each advance (so equal to what ``moving`` and ``psum_in`` would be) and
        ``chain_start`` registered every cycle (constant in a grid: it settles on the
        first clock edge, before any operand is active)."""
        if not self._edge_registers:
            return self.moving, self.psum_in, self.chain_start
        moving = Signal(data.ArrayLayout(operand_lane_layout(self._width, self._mx,
                                                             self._col_cells), self._rows),
                        name="moving_reg")
        psum_in = Signal(data.ArrayLayout(PSUM_WIDTH, self._cols), name="psum_in_reg")
        chain_start = Signal(name="chain_start_reg", reset_less=True)
        with m.If(self.en):
            m.d.sync += [moving.eq(self.moving_next), psum_in.eq(self.psum_in_next)]
        m.d.sync += chain_start.eq(self.chain_start)
        return moving, psum_in, chain_start

    def _sub_array(self, m, name):
        """One ``B x B`` sub-array: an Amaranth submodule, or an Instance of
        ``block_module`` behind signals shaped as its ports."""
        b = self._block
        if self._block_module is None:
            m.submodules[name] = sub = SystolicArray(
                b, b, pe_module=self._pe_module, pe=self._pe, edge_registers=True,
                width=self._width, mx=self._mx, col_cells=self._col_cells,
                col_group=min(self._col_group, b))
            return sub
        ports = {}
        kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for port, member in array_signature(b, b, edge_registers=True, width=self._width,
                                            mx=self._mx,
                                            col_cells=self._col_cells).members.items():
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
                        *([sub.load[c].scale.eq(load.scale)] if self._mx else []),
                        sub.psum_in_next[c].eq(self.psum_in_next[bc * b + c] if br == 0
                                               else grid[br - 1][bc].psum_next[c]),
                    ]
                for k in range(b):
                    if bc == 0:
                        m.d.comb += sub.moving_next[k].eq(self.moving_next[br * b + k])
                        continue
                    left = line[bc - 1].moving_out_next[k]
                    m.d.comb += sub.moving_next[k].eq(left)
                    if (bc * b) % self._col_group == 0:     # a column cell starts here
                        m.d.comb += sub.moving_next[k].cskip.eq(_next_cell(left.cskip))
                if br == len(grid) - 1:
                    m.d.comb += [self.psum[bc * b + c].eq(sub.psum[c]) for c in range(b)]
                    m.d.comb += [self.psum_next[bc * b + c].eq(sub.psum_next[c])
                                 for c in range(b)]
            m.d.comb += [self.moving_out[br * b + k].eq(line[-1].moving_out[k])
                         for k in range(b)]
            m.d.comb += [self.moving_out_next[br * b + k].eq(line[-1].moving_out_next[k])
                         for k in range(b)]
        return m


def _next_cell(cskip):
    """A column-cell mask as the next cell's PEs read it: shifted down one bit (the bits
    shifted in are never read: cell h reads bit 0 after h shifts)."""
    value = Value.cast(cskip)
    return Cat(value[1:], Const(0, 1))[:len(value)]


def array_signature(rows, cols, *, edge_registers=False, width=OPERAND_WIDTH, mx=False,
                    col_cells=1):
    """Port signature of a ``rows x cols`` :class:`SystolicArray` with ``width``-bit operand
    lanes, and the MX scales and mode bit with ``mx`` (wiring.Signature); with
    ``edge_registers`` (a sub-array) without ``moving`` and ``psum_in``, which such an array
    does not read."""
    lanes = data.ArrayLayout(operand_lane_layout(width, mx, col_cells), rows)
    sums = data.ArrayLayout(PSUM_WIDTH, cols)
    members = {
        "en": In(1),
        "load": In(data.ArrayLayout(load_lane_layout(rows, width, mx), cols)),
        "moving": In(lanes),
        "moving_next": In(lanes),
        "psum_in": In(sums),
        "psum_in_next": In(sums),
        "chain_start": In(1),
        "psum": Out(sums),
        "psum_next": Out(sums),
        "moving_out": Out(lanes),
        "moving_out_next": Out(lanes),
    }
    if edge_registers:
        del members["moving"], members["psum_in"]
    return wiring.Signature(members)
