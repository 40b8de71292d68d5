"""PSUM: the partial-sum memory behind the array, overwritten or accumulated per matmul."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .fp32_add import CANONICAL_NAN, Fp32Adder
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
    With ``mx`` (a tile with the MX datapath) and ``bf16``, the word written (not a
    read-out) is rounded from FP32 to BF16, to nearest, ties to even (NaN: the canonical
    0x7FC0; overflow: +-Inf), and stored as the FP32 word of that BF16 value (its bits in
    [31:16], zeros below), so an accumulation reads it back exactly (``docs/numerics.md``,
    MX choice 8). The tile has one per column cell (:func:`~.layouts.cell_grid`), each with
    its own address, so matmuls in different column tiles write their own PSUM partitions at once
    (``docs/numerics.md``, tiles choices 8 and 9).

    Parameters
    ----------
    cols : int
        Words per entry (the columns of a column cell), >= 1.
    depth : int
        Entries over all banks, >= 1 (default 8 banks x 512, as on the real engine).
    mx : bool
        Build the BF16 write (input ``bf16``).

    Members
    -------
    addr : In(range(depth))
    column : In(ArrayLayout(32, cols))
        Result column from the array (INT32 or FP32 bits).
    read, accumulate, fp32, ftz, write : In(1)
    bf16 : In(1)
        With ``mx`` only: round the written word to BF16.
    result : Out(ArrayLayout(32, cols))
        The new PSUM entry.

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, cols, depth=PSUM_BANKS * PSUM_ENTRIES, mx=False):
        self._cols, self._depth, self._mx = cols, depth, bool(mx)
        words = data.ArrayLayout(PSUM_WIDTH, cols)
        super().__init__({
            **({"bf16": In(1)} if self._mx else {}),
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
            new = Signal(PSUM_WIDTH, name=f"new_{c}")
            m.d.comb += [
                adder.a.eq(read.data[c]),
                adder.b.eq(self.column[c]),
                adder.ftz.eq(self.ftz),
                int_sum.eq(read.data[c] + self.column[c]),
                new.eq(Mux(self.accumulate, Mux(self.fp32, adder.sum, int_sum),
                           self.column[c])),
            ]
            if self._mx:
                new = Mux(self.bf16, _bf16_rne(m, new, f"bf16_{c}"), new)
            m.d.comb += self.result[c].eq(Mux(self.read, read.data[c], new))
        return m


def _bf16_rne(m, word, name):
    """The FP32 word of ``word`` (FP32 bits) rounded to BF16, to nearest, ties to even: add
    0x7FFF plus the kept LSB and clear the low half (a carry into the exponent is the right
    result, up to +-Inf); NaN gives the canonical quiet NaN."""
    out = Signal(PSUM_WIDTH, name=name)
    rounded = Signal(PSUM_WIDTH + 1, name=f"{name}_sum")
    nan = (word[23:31] == 0xFF) & word[:23].any()
    m.d.comb += [rounded.eq(word + 0x7FFF + word[16]),
                 out.eq(Mux(nan, Const(CANONICAL_NAN, PSUM_WIDTH),
                            Cat(Const(0, 16), rounded[16:32])))]
    return out
