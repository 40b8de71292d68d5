"""Unit tier: the amaranth.sim stream helpers (:mod:`systolica.hdl.streams`) on Amaranth's
own FIFO: every beat through, in order, at the cycles a 1-cycle-latency buffer allows, under
backpressure; a stuck stream fails with a message instead of hanging."""

import re

import numpy as np
import pytest
from amaranth.lib.fifo import SyncFIFOBuffered

from systolica.hdl.streams import simulate, stream_get, stream_put, stream_sink, stream_source


def test_sim_source_and_sink_move_every_beat_in_order_under_backpressure():
    fifo = SyncFIFOBuffered(width=8, depth=2)
    payloads = list(range(3, 23))
    ready = np.random.default_rng(1).random(500) < 0.5
    put_cycles, got_cycles, beats = [], [], []
    simulate(fifo, stream_sink(fifo.r_stream, len(payloads), beats, cycles=got_cycles,
                               ready=lambda cycle: ready[cycle]),
             background=[stream_source(fifo.w_stream, payloads, cycles=put_cycles)])
    assert [int(b) for b in beats] == payloads
    assert got_cycles == sorted(got_cycles) and len(set(got_cycles)) == len(payloads)
    assert all(ready[c] for c in got_cycles)
    # A beat leaves after it entered, and at most depth beats wait inside.
    for i, cycle in enumerate(got_cycles):
        assert cycle > put_cycles[i]
        assert sum(1 for p in put_cycles if p < cycle) - i <= 2


def test_sim_put_and_get_count_the_edges_waited():
    fifo = SyncFIFOBuffered(width=8, depth=3)
    seen = {}

    async def bench(ctx):
        seen["put"] = [await stream_put(ctx, fifo.w_stream, v) for v in (7, 8, 9)]
        seen["get"] = [await stream_get(ctx, fifo.r_stream) for _ in range(3)]

    simulate(fifo, bench)
    assert seen["put"] == [1, 1, 1]           # room for all three: each taken at once
    # All three are inside by then: each is offered at once, in order.
    assert seen["get"] == [(7, 1), (8, 1), (9, 1)]


@pytest.mark.parametrize("helper,message", [
    ("put", "a beat offered for 5 cycles was not taken"),
    ("get", "no beat came in 5 cycles"),
])
def test_sim_stuck_stream_fails_with_a_message(helper, message):
    fifo = SyncFIFOBuffered(width=8, depth=1)

    async def bench(ctx):
        if helper == "put":   # full after one beat, and nobody reads
            await stream_put(ctx, fifo.w_stream, 1)
            await stream_put(ctx, fifo.w_stream, 2, max_cycles=5)
        else:                 # empty, and nobody writes
            await stream_get(ctx, fifo.r_stream, max_cycles=5)

    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        simulate(fifo, bench)
