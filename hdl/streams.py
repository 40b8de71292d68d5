"""``amaranth.sim`` helpers for the components' valid/ready streams (Amaranth 0.5 async
testbenches).

Every stream of the tile is an ``amaranth.lib.stream.Signature``: a beat transfers at the
clock edge where ``valid`` and ``ready`` are both high. These helpers are the one driver
and monitor of such streams in Amaranth's simulator, used by every unit test of
``hdl/`` (the cocotb testbench has its own in :mod:`systolica.tb.streams`). They live beside
the components, as Glasgow keeps ``stream_put`` / ``stream_get`` beside its stream gateware,
so a tool or a user simulating one component needs no copy of a driver. Importing
:mod:`systolica.hdl` does not import this module (nor the simulator).

Cycles are counted from the start of the simulation: cycle ``c`` is the clock period that
ends with the ``c + 1``-th rising edge, so a beat offered from time 0 and taken at once
transfers in cycle 0. Each helper process counts its own edges, so processes started at
time 0 that only wait on clock edges agree on cycle numbers.
"""

from amaranth.sim import Simulator

__all__ = ["evaluate", "simulate", "stream_get", "stream_put", "stream_sink", "stream_source"]

#: Cycles a helper waits for a transfer before it fails (a stuck DUT fails, never hangs).
MAX_CYCLES = 10_000
#: Clock period of :func:`simulate` (s): 100 MHz, the value only sets the time axis of a dump.
CLOCK_PERIOD = 1e-8


async def stream_put(ctx, stream, payload, *, max_cycles=MAX_CYCLES):
    """Offer ``payload`` on ``stream`` (a producer's view: drives ``valid`` and ``payload``)
    until it transfers; ``valid`` is low again afterwards.

    Returns the number of clock edges waited (int, 1 when taken at once). Fails with an
    ``AssertionError`` if the beat is not taken within ``max_cycles`` cycles.
    """
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    edges = 0
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        edges += 1
        if ready:
            break
        assert edges < max_cycles, f"a beat offered for {max_cycles} cycles was not taken"
    ctx.set(stream.valid, 0)
    return edges


async def stream_get(ctx, stream, *, max_cycles=MAX_CYCLES):
    """Take one beat from ``stream`` (a consumer's view: drives ``ready``); ``ready`` is low
    again afterwards.

    Returns ``(payload, edges)``: the beat's payload (a ``data.Const`` view for a layout
    payload, else int) and the clock edges waited (int, 1 when a beat was offered at once).
    Fails with an ``AssertionError`` if no beat comes within ``max_cycles`` cycles.
    """
    ctx.set(stream.ready, 1)
    edges = 0
    while True:
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        edges += 1
        if valid:
            break
        assert edges < max_cycles, f"no beat came in {max_cycles} cycles"
    ctx.set(stream.ready, 0)
    return payload, edges


def stream_source(stream, payloads, *, cycles=None, max_cycles=MAX_CYCLES):
    """A testbench process that puts each of ``payloads`` on ``stream`` in order, each offered
    as soon as the previous one transferred (no idle cycles).

    ``cycles``, a list, receives the cycle of each transfer. Returns the ``async`` function
    for ``Simulator.add_testbench`` (typically with ``background=True``).
    """
    async def source(ctx):
        cycle = 0
        for payload in payloads:
            cycle += await stream_put(ctx, stream, payload, max_cycles=max_cycles)
            if cycles is not None:
                cycles.append(cycle - 1)
    return source


def stream_sink(stream, count, beats, *, cycles=None, ready=lambda cycle: True,
                max_cycles=MAX_CYCLES):
    """A testbench process that takes ``count`` beats from ``stream`` into the list ``beats``,
    with ``ready`` in cycle ``c`` set to ``ready(c)`` (a backpressure pattern).

    ``cycles``, a list, receives the cycle of each transfer. The process fails with an
    ``AssertionError`` naming the stream if ``count`` beats have not come after
    ``max_cycles`` cycles. Returns the ``async`` function for ``Simulator.add_testbench``.
    """
    async def sink(ctx):
        cycle = 0
        while len(beats) < count:
            taking = bool(ready(cycle))
            ctx.set(stream.ready, int(taking))
            _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
            if valid and taking:
                beats.append(payload)
                if cycles is not None:
                    cycles.append(cycle)
            cycle += 1
            assert cycle < max_cycles, (
                f"{len(beats)} of {count} beats came in {max_cycles} cycles")
        ctx.set(stream.ready, 0)
    return sink


def simulate(dut, *testbenches, background=(), vcd=None):
    """Simulate ``dut`` with a clock of :data:`CLOCK_PERIOD` until every testbench in
    ``testbenches`` has returned (those in ``background`` run alongside and are dropped
    then). ``vcd``: an optional path to dump the waveform into."""
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD)
    for bench in background:
        sim.add_testbench(bench, background=True)
    for bench in testbenches:
        sim.add_testbench(bench)
    if vcd is None:
        sim.run()
    else:
        with sim.write_vcd(vcd):
            sim.run()


def evaluate(dut, inputs, output):
    """Drive each dict of ``inputs`` (member name -> int) into the combinational ``dut`` in
    turn and return the values of its ``output`` member after each (list of int); no clock
    (a helper of the datapath components' unit tests: multipliers, adders, the MX step)."""
    got = []

    async def bench(ctx):
        for vector in inputs:
            for name, value in vector.items():
                ctx.set(getattr(dut, name), int(value))
            got.append(ctx.get(getattr(dut, output)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got
