"""Unit tier: PSUM (:class:`systolica.hdl.Psum`): its parameters, and in amaranth.sim a random
sequence of overwrites, INT32 and FP32 accumulates (IEEE and FTZ) and read-outs against a
shadow memory whose FP32 adds are the golden model's."""

import re

import numpy as np
import pytest
from amaranth.hdl import Shape

from systolica.golden.bf16 import fp32_add, fp32_bits, from_fp32_bits
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


@pytest.mark.parametrize("args,message", [
    ((0, 4), "cols must be a positive integer, not 0"),
    ((2, 0), "psum_depth must be a positive integer, not 0"),
    ((2, 2.0), "psum_depth must be a positive integer, not 2.0"),
    ((True, 4), "cols must be a positive integer, not True"),
])
def test_init_wrong_size(args, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Psum(*args)


def _golden_add(stored, column, ftz):
    return int(fp32_bits(fp32_add(from_fp32_bits(np.array([stored], np.uint32)),
                                  from_fp32_bits(np.array([column], np.uint32)), ftz=ftz))[0])


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
        stored = shadow[addr]
        if read:
            want = list(stored)
        elif not step["accumulate"]:
            want = list(step["column"])
        elif step["fp32"]:
            want = [_golden_add(s, c, step["ftz"]) for s, c in zip(stored, step["column"],
                                                                   strict=True)]
        else:
            want = [(s + c) & 0xFFFFFFFF for s, c in zip(stored, step["column"], strict=True)]
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
