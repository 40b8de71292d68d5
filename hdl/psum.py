"""PSUM: the partial-sum memory behind the array, overwritten or accumulated per matmul."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .fp32_add import CANONICAL_NAN, Fp32Adder
from .layouts import PSUM_BANKS, PSUM_ENTRIES, PSUM_WIDTH, SEED_WIDTH

#: XORWOW's Weyl counter: its start for lane 0 and its step (Marsaglia 2003; golden:
#: ``golden.mx.xorwow_bits``).
XORWOW_D0, XORWOW_STEP = 6615241, 362437


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
    0x7FC0; overflow: +-Inf), or with ``stochastic`` by adding the upper 16 bits of the
    column's next XORWOW output to its magnitude and truncating (Inf kept, NaN canonical),
    and stored as the FP32 word of that BF16 value (its bits in [31:16], zeros below), so
    an accumulation reads it back exactly (``docs/numerics.md``, MX choices 5 and 8). Each
    column holds one XORWOW generator (``golden.xorwow_bits``, lane = the column's PSUM
    partition ``col0 + i``); a stochastic write with ``first`` starts it from ``seed``
    (each state word ``seed`` XOR the lane's constant, ``golden.xorwow_constants``), and
    every stochastic write advances it once. The tile has one per column cell
    (:func:`~.layouts.cell_grid`), each with its own address, so matmuls in different column
    tiles write their own PSUM partitions at once (``docs/numerics.md``, tiles choices 8
    and 9).

    Parameters
    ----------
    cols : int
        Words per entry (the columns of a column cell), >= 1.
    depth : int
        Entries over all banks, >= 1 (default 8 banks x 512, as on the real engine).
    mx : bool
        Build the BF16 write (inputs ``bf16``, ``stochastic``, ``first``, ``seed``).
    col0 : int
        The PSUM partition of the first column (the generators' lanes).

    Members
    -------
    addr : In(range(depth))
    column : In(ArrayLayout(32, cols))
        Result column from the array (INT32 or FP32 bits).
    read, accumulate, fp32, ftz, write : In(1)
    bf16, stochastic, first : In(1)
        With ``mx`` only: round the written word to BF16; stochastically; this is the
        command's first column (the generators start from ``seed``).
    seed : In(SEED_WIDTH)
        With ``mx`` only: the stochastic rounding's seed.
    result : Out(ArrayLayout(32, cols))
        The new PSUM entry.

    Sizes come from a validated :class:`~.config.TileConfig` (the tile builds this
    component); they are not checked again here.
    """

    def __init__(self, cols, depth=PSUM_BANKS * PSUM_ENTRIES, mx=False, col0=0):
        self._cols, self._depth, self._mx, self._col0 = cols, depth, bool(mx), col0
        words = data.ArrayLayout(PSUM_WIDTH, cols)
        super().__init__({
            **({"bf16": In(1), "stochastic": In(1), "first": In(1), "seed": In(SEED_WIDTH)}
               if self._mx else {}),
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
                noise = _xorwow(m, self, self._col0 + c, f"xorwow_{c}")
                new = Mux(self.bf16, Mux(self.stochastic,
                                         _bf16_stochastic(m, new, noise, f"sr_{c}"),
                                         _bf16_rne(m, new, f"bf16_{c}")), new)
            m.d.comb += self.result[c].eq(Mux(self.read, read.data[c], new))
        return m


def xorwow_constants(lane):
    """The five 32-bit words lane ``lane``'s XORWOW state starts from before the seed is
    XORed in: ``fmix32((5 lane + i + 1) * 0x9E3779B9 mod 2^32)`` for i = 0..4
    (MurmurHash3's finaliser), computed when the tile is generated (golden:
    ``golden.mx.xorwow_constants``; ``tests/unit/test_hdl_golden_constants.py`` checks
    they are equal)."""
    out = []
    for i in range(5):
        h = ((5 * lane + i + 1) * 0x9E3779B9) & 0xFFFFFFFF
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        out.append(h ^ (h >> 16))
    return out


def _xorwow(m, psum, lane, name):
    """Column ``lane``'s XORWOW generator (Marsaglia 2003, section 3.1): returns the upper
    16 bits of the output a stochastic write uses this cycle; the state advances at the
    edge of each such write (from ``seed`` on a ``first`` one)."""
    constants = xorwow_constants(lane)
    state = [Signal(32, name=f"{name}_{w}") for w in ("x", "y", "z", "w", "v", "d")]
    start = [Signal(32, name=f"{name}_seed_{i}") for i in range(5)]
    m.d.comb += [s.eq(psum.seed ^ int(k)) for s, k in zip(start, constants, strict=True)]
    zero = Cat(s == 0 for s in start).all()
    cur = [Signal(32, name=f"{name}_cur_{i}") for i in range(6)]
    m.d.comb += [cur[0].eq(Mux(psum.first, Mux(zero, 1, start[0]), state[0]))]
    m.d.comb += [cur[i].eq(Mux(psum.first, start[i], state[i])) for i in range(1, 5)]
    m.d.comb += cur[5].eq(Mux(psum.first, XORWOW_D0 + lane, state[5]))
    t = Signal(32, name=f"{name}_t")
    v = Signal(32, name=f"{name}_next_v")
    d = Signal(32, name=f"{name}_next_d")
    out = Signal(32, name=f"{name}_out")
    m.d.comb += [
        t.eq(cur[0] ^ (cur[0] >> 2)),
        v.eq(cur[4] ^ (cur[4] << 4)[:32] ^ t ^ (t << 1)[:32]),
        d.eq(cur[5] + XORWOW_STEP),
        out.eq(v + d),
    ]
    with m.If(psum.write & psum.bf16 & psum.stochastic):
        m.d.sync += [state[0].eq(cur[1]), state[1].eq(cur[2]), state[2].eq(cur[3]),
                     state[3].eq(cur[4]), state[4].eq(v), state[5].eq(d)]
    return out[16:32]


def _bf16_stochastic(m, word, noise, name):
    """The FP32 word of ``word`` (FP32 bits) rounded to BF16 stochastically: a finite
    value's magnitude plus ``noise`` (16 bits) in its low half, truncated (a carry may
    reach Inf); Inf kept; NaN gives the canonical quiet NaN."""
    out = Signal(PSUM_WIDTH, name=name)
    added = Signal(PSUM_WIDTH, name=f"{name}_sum")
    special = word[23:31] == 0xFF
    m.d.comb += [added.eq(Mux(special, word, word + noise)),
                 out.eq(Mux(special & word[:23].any(), Const(CANONICAL_NAN, PSUM_WIDTH),
                            Cat(Const(0, 16), added[16:32])))]
    return out


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
