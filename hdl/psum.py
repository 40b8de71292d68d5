"""PSUM: the partial-sum memory behind the array, overwritten or accumulated per matmul."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .fp32_add import Fp32Adder
from .layouts import PSUM_BANKS, PSUM_ENTRIES, PSUM_WIDTH


class Psum(wiring.Component):
    """``depth`` entries of ``cols`` 32-bit words (all banks, bank ``b`` entry ``e`` at address
    ``b * entries + e``); one entry per moving column ``n`` of a matmul.

    Each cycle it offers ``result`` for entry ``addr``: with ``read``, the stored entry
    itself (a read-out; ``write`` must then be low); otherwise the incoming ``column``
    (overwrite: the stored entry is not read) or, with ``accumulate``, the stored entry plus
    ``column`` (INT32 wrapping add, or FP32 add with round-to-nearest-even when ``fp32``, with
    flush-to-zero when ``ftz``; ``stored + column`` in that order). ``write`` stores ``result``
    into entry ``addr`` at the clock edge. The memory starts as all zeros (INT32 0, FP32 +0).
    The tile has one per column cell (:func:`~.layouts.cell_grid`), each with its own
    address, so matmuls in different column tiles write their own PSUM partitions at once
    (``docs/numerics.md``, tiles choices 8 and 9).

    Parameters
    ----------
    cols : int
        Words per entry (the columns of a column cell), >= 1.
    depth : int
        Entries over all banks, >= 1 (default 8 banks x 512, as on the real engine).

    Members
    -------
    addr : In(range(depth))
    column : In(ArrayLayout(32, cols))
        Result column from the array (INT32 or FP32 bits).
    read, accumulate, fp32, ftz, write : In(1)
    result : Out(ArrayLayout(32, cols))
        The new PSUM entry.

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, cols, depth=PSUM_BANKS * PSUM_ENTRIES):
        self._cols, self._depth = cols, depth
        words = data.ArrayLayout(PSUM_WIDTH, cols)
        super().__init__({
            "addr": In(range(depth)),
            "column": In(words),
            "read": In(1),
            "accumulate": In(1),
            "fp32": In(1),
            "ftz": In(1),
            "write": In(1),
            "result": Out(words),
        })

    @property
    def depth(self):
        """Entries per column (int, read-only)."""
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = memory = Memory(
            shape=data.ArrayLayout(PSUM_WIDTH, self._cols), depth=self._depth, init=[])
        read = memory.read_port(domain="comb")
        write = memory.write_port()
        m.d.comb += [read.addr.eq(self.addr), write.addr.eq(self.addr),
                     write.en.eq(self.write), write.data.eq(self.result)]
        for c in range(self._cols):
            adder = m.submodules[f"adder_{c}"] = Fp32Adder()
            int_sum = Signal(PSUM_WIDTH, name=f"int_sum_{c}")
            m.d.comb += [
                adder.a.eq(read.data[c]),
                adder.b.eq(self.column[c]),
                adder.ftz.eq(self.ftz),
                int_sum.eq(read.data[c] + self.column[c]),
                self.result[c].eq(Mux(self.read, read.data[c],
                                      Mux(self.accumulate, Mux(self.fp32, adder.sum, int_sum),
                                          self.column[c]))),
            ]
        return m
