"""Unit tier: PSUM (:class:`systolica.hdl.Psum`): its parameters, and in amaranth.sim a random
sequence of overwrites, INT32 and FP32 accumulates (IEEE and FTZ) and read-outs against a
shadow memory whose accumulates are the golden model's (``psum_accumulate``)."""


import numpy as np
import pytest
from amaranth.hdl import Shape

from systolica.golden import psum_accumulate
from systolica.hdl import Psum
from systolica.hdl.streams import simulate

SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
            0x80400000, 0x7F7FFFFF, 0x4B800000, 0x3F800000, 0x33800000]


def test_init():
    psum = Psum(3, 10)
    assert psum.depth == 10
    members = psum.signature.members
    assert Shape.cast(members["addr"].shape).width == 4            # range(10)
    assert Shape.cast(members["column"].shape).width == 3 * 32
    assert Shape.cast(members["result"].shape).width == 3 * 32
    assert Psum(1).depth == 8 * 512          # the NeuronCore's banks x entries by default


def next_entry(stored, column, *, read, accumulate, fp32, ftz):
    """The words PSUM offers for an entry holding ``stored`` given ``column`` (lists of
    uint32 bit patterns): the stored words for a READ, the column for an overwrite, else the
    golden model's PSUM accumulate (INT32 wrap or FP32 RNE add)."""
    if read:
        return list(stored)
    if not accumulate:
        return list(column)
    view = np.float32 if fp32 else np.int32
    total = psum_accumulate(np.array(stored, np.uint32).view(view),
                            np.array(column, np.uint32).view(view), ftz=bool(ftz))
    return [int(w) for w in total.view(np.uint32)]


def _random_word(rng):
    if rng.random() < 0.3:
        return int(rng.choice(SPECIALS))
    return int(rng.integers(0, 2**32))


@pytest.mark.parametrize("seed", [1, 2])
def test_sim_overwrite_accumulate_and_read(seed):
    rng = np.random.default_rng(seed)
    cols, depth, steps = 2, 4, 80
    shadow = [[0] * cols for _ in range(depth)]    # the memory starts as zeros
    vectors = []
    for _ in range(steps):
        addr = int(rng.integers(0, depth))
        read = rng.random() < 0.25
        step = {"addr": addr, "read": read, "accumulate": bool(rng.integers(0, 2)),
                "fp32": bool(rng.integers(0, 2)), "ftz": bool(rng.integers(0, 2)),
                "write": not read and rng.random() < 0.8,
                "column": [_random_word(rng) for _ in range(cols)]}
        want = next_entry(shadow[addr], step["column"], read=read,
                          **{f: step[f] for f in ("accumulate", "fp32", "ftz")})
        if step["write"]:
            shadow[addr] = want
        vectors.append((step, want))
    dut = Psum(cols, depth)
    got = []

    async def bench(ctx):
        for step, _ in vectors:
            for name in ("addr", "read", "accumulate", "fp32", "ftz", "write"):
                ctx.set(getattr(dut, name), int(step[name]))
            for c, word in enumerate(step["column"]):
                ctx.set(dut.column[c], word)
            got.append([int(v) for v in ctx.get(dut.result)])
            await ctx.tick()

    simulate(dut, bench)
    for i, ((step, want), seen) in enumerate(zip(vectors, got, strict=True)):
        assert seen == want, (i, step, [f"{w:08x}" for w in want], [f"{w:08x}" for w in seen])
