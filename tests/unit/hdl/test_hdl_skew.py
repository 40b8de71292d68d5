"""Unit tier: the skew delay lines (:class:`systolica.hdl.SkewBuffer`): their parameters, and
each lane delayed by its own number of enabled cycles."""

import re

import numpy as np
import pytest
from amaranth.hdl import Shape

from systolica.hdl import SkewBuffer
from systolica.hdl.streams import simulate


def test_init():
    dut = SkewBuffer(8, range(3))
    assert dut.delays == (0, 1, 2)
    assert Shape.cast(dut.signature.members["o"].shape).width == 3 * 8


@pytest.mark.parametrize("delays,message", [
    ([], "delays must name at least one lane, not an empty sequence"),
    ([0, -1], "every delay must be a non-negative integer, not -1"),
    ([1.0], "every delay must be a non-negative integer, not 1.0"),
])
def test_init_wrong_delays(delays, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        SkewBuffer(8, delays)


@pytest.mark.parametrize("delays", [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 1, 2, 0], [1]])
def test_each_lane_is_delayed_by_its_enabled_cycles(delays):
    rng = np.random.default_rng(len(delays))
    steps = 24
    inputs = rng.integers(0, 256, (steps, len(delays)))
    enables = rng.random(steps) < 0.7
    dut = SkewBuffer(8, delays)
    seen = []

    async def bench(ctx):
        for t in range(steps):
            for lane, value in enumerate(inputs[t]):
                ctx.set(dut.i[lane], int(value))
            ctx.set(dut.en, int(enables[t]))
            seen.append([ctx.get(dut.o[lane]) for lane in range(len(delays))])
            await ctx.tick()

    simulate(dut, bench)
    # Reference: lane l at step t shows the input of the step that was delays[l] enabled
    # steps back (counting enabled steps before t), or 0 before any.
    for t in range(steps):
        for lane, delay in enumerate(delays):
            if delay == 0:
                want = inputs[t][lane]
            else:
                earlier = [s for s in range(t) if enables[s]]
                want = inputs[earlier[-delay]][lane] if len(earlier) >= delay else 0
            assert seen[t][lane] == want, (t, lane)


@pytest.mark.parametrize("delays", [[0, 1, 2, 3], [2, 0, 1, 2, 0], [1]])
def test_o_next_is_what_o_holds_after_an_advance(delays):
    rng = np.random.default_rng(10 + len(delays))
    steps = 24
    inputs = rng.integers(0, 256, (steps + 1, len(delays)))
    enables = rng.random(steps) < 0.7
    dut = SkewBuffer(8, delays)
    seen, ahead = [], []

    async def bench(ctx):
        for t in range(steps):
            for lane in range(len(delays)):     # i_next: what i holds at the next step
                ctx.set(dut.i[lane], int(inputs[t][lane]))
                ctx.set(dut.i_next[lane], int(inputs[t + 1][lane]))
            ctx.set(dut.en, int(enables[t]))
            seen.append([ctx.get(dut.o[lane]) for lane in range(len(delays))])
            ahead.append([ctx.get(dut.o_next[lane]) for lane in range(len(delays))])
            await ctx.tick()

    simulate(dut, bench)
    advances = [t for t in range(steps - 1) if enables[t]]
    assert advances
    for t in advances:
        assert ahead[t] == seen[t + 1], t
