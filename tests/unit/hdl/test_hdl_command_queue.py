"""Unit tier: the command queue (:class:`systolica.hdl.CommandQueue`): its parameters, and in
amaranth.sim the command check (every error code, in the golden ``command_error``'s order)
and the queue (order, the load request, the head held until loaded, full means not ready)."""


import numpy as np
import pytest
from amaranth.hdl import Shape

from systolica.golden import Command, command_error
from systolica.hdl import COMMAND_QUEUE_DEPTH, CommandQueue, DType, ErrorCode, command_layout
from systolica.hdl.streams import simulate, stream_get, stream_put
from systolica.tb.model import command_beat

ROWS, COLS, BANKS, ENTRIES = 2, 3, 2, 4
TYPES = ["int8", "bf16", "e4m3", "e5m2", "e4m3fn"]


def queue(**kwargs):
    return CommandQueue(ROWS, COLS, psum_banks=BANKS, psum_entries=ENTRIES, **kwargs)


def beat(command):
    return command_layout().const(command_beat(command))


def test_init():
    dut = queue()
    assert dut.depth == COMMAND_QUEUE_DEPTH == 3
    members = dut.signature.members
    assert Shape.cast(members["queued"].shape).width == 3
    assert Shape.cast(members["head"].signature.members["payload"].shape).width == (
        Shape.cast(command_layout()).width)
    assert queue(depth=5).depth == 5


def random_command(rng):
    """A command with each field drawn around its limits, so about half are illegal."""
    if rng.random() < 0.2:
        return Command("read", bank=int(rng.integers(0, BANKS + 1)),
                       offset=int(rng.integers(0, ENTRIES)), n=int(rng.integers(0, ENTRIES + 1)))
    double = rng.random() < 0.3
    dtype = str(rng.choice(TYPES))
    moving_dtype = "int8" if dtype == "int8" else str(rng.choice(TYPES[1:]))
    return Command("matmul", k=int(rng.integers(0, 2 * ROWS + 2)),
                   m=int(rng.integers(0, COLS + 2)), n=int(rng.integers(0, ENTRIES + 1)),
                   bank=int(rng.integers(0, BANKS + 1)), offset=int(rng.integers(0, ENTRIES)),
                   dtype=dtype, moving_dtype=moving_dtype,
                   perf_mode="double_row" if double else None,
                   is_transpose=bool(rng.random() < 0.4), ftz=bool(rng.random() < 0.3),
                   accumulate=bool(rng.random() < 0.3))


@pytest.mark.parametrize("seed,dtypes,double_row", [
    (1, tuple(DType), True),
    # A queue of a tile generated for INT8 and two FP8 types only, without double-row.
    (3, (DType.INT8, DType.E4M3, DType.E5M2), False)])
def test_sim_check_and_queue_follow_the_golden_rules(seed, dtypes, double_row):
    """Random commands one at a time: a rejected one counts in ``status`` with the golden
    error; a legal one asks for its stationary load (``K`` beats, ``min(K, rows)`` in
    double-row), and only once ``load.done`` is given is it offered at the head, unchanged."""
    rng = np.random.default_rng(seed)
    commands = [random_command(rng) for _ in range(60)]
    # Transposes that only their mode makes illegal (rare in the draw), and a legal one.
    for mode in ({"perf_mode": "double_row", "ftz": True}, {"accumulate": True, "ftz": True},
                 {"ftz": True}, {}):
        commands.insert(int(rng.integers(len(commands) + 1)), Command(
            "matmul", k=ROWS, m=COLS, n=ENTRIES, dtype="e5m2", is_transpose=True, **mode))
    names = tuple(t.name.lower() for t in dtypes)
    errors = [command_error(c, rows=ROWS, cols=COLS, banks=BANKS, entries=ENTRIES,
                            dtypes=names, double_row=double_row) for c in commands]
    every = {None, *[e.name for e in ErrorCode if e.name != "NONE"]}
    # Without double-row, a double-row transpose is TYPE_NOT_BUILT (checked first).
    assert {e for e in errors} == (every - {"TRANSPOSE_DOUBLE_ROW"} if not double_row else
                                   every if len(dtypes) < len(DType) else
                                   every - {"TYPE_NOT_BUILT"})
    dut = queue(dtypes=dtypes, double_row=double_row)
    seen = []

    async def bench(ctx):
        rejected = 0
        for command, error in zip(commands, errors, strict=True):
            await stream_put(ctx, dut.command, beat(command))
            status = (ctx.get(dut.status.rejected), ctx.get(dut.status.error))
            if error is not None:
                rejected += 1
                seen.append((status, ctx.get(dut.queued), ctx.get(dut.load.valid)))
                continue
            if command.op == "matmul":
                assert ctx.get(dut.load.valid) and not ctx.get(dut.head.valid)
                load = (ctx.get(dut.load.beats), ctx.get(dut.load.m))
                await ctx.tick()                  # the head waits for its stationary
                assert not ctx.get(dut.head.valid)
                ctx.set(dut.load.done, 1)
                await ctx.tick()
                ctx.set(dut.load.done, 0)
            else:
                load = None
            head, _ = await stream_get(ctx, dut.head)
            seen.append((status, load, head.as_value().value))
            assert ctx.get(dut.queued) == 0

    simulate(dut, bench)
    rejected = 0
    last_error = ErrorCode.NONE
    for command, error, got in zip(commands, errors, seen, strict=True):
        if error is not None:
            rejected += 1
            last_error = ErrorCode[error]
            assert got == ((rejected, last_error), 0, 0), (command, error, got)
        else:
            beats = min(command.k, ROWS) if command.double_row else command.k
            want_load = (beats, command.m) if command.op == "matmul" else None
            assert got == ((rejected, last_error), want_load, beat(command).as_value().value), \
                (command, got)


def test_sim_queue_order_depth_and_load_target():
    """Three matmuls and a READ behind them: the queue takes three and then holds
    ``command.ready`` low until the head leaves; loads are requested oldest first; the heads
    leave in order and the READ (loaded at once) follows without a load."""
    a = Command("matmul", k=2, m=3, n=1)
    b = Command("matmul", k=1, m=2, n=2, bank=1)
    c = Command("matmul", k=4, m=1, n=4, dtype="e4m3", perf_mode="double_row")
    read = Command("read", bank=1, offset=1, n=3)
    dut = queue()
    log = {}

    async def bench(ctx):
        for command in (a, b, c):
            await stream_put(ctx, dut.command, beat(command))
        ctx.set(dut.command.payload, beat(read))
        ctx.set(dut.command.valid, 1)
        log["full"] = (ctx.get(dut.queued), ctx.get(dut.command.ready))
        loads = []
        for _ in range(3):
            loads.append((ctx.get(dut.load.beats), ctx.get(dut.load.m)))
            ctx.set(dut.load.done, 1)
            await ctx.tick()
        ctx.set(dut.load.done, 0)
        log["loads"] = loads
        log["loaded"] = (ctx.get(dut.loaded), ctx.get(dut.load.valid), ctx.get(dut.command.ready))
        heads = []
        for _ in range(3):
            head, _ = await stream_get(ctx, dut.head)
            heads.append(head.as_value().value)
            if len(heads) == 1:      # a left: a slot frees, and the waiting READ is taken
                log["freed"] = ctx.get(dut.command.ready)
                assert await stream_put(ctx, dut.command, beat(read)) == 1
        head, _ = await stream_get(ctx, dut.head)
        heads.append(head.as_value().value)
        log["heads"] = heads
        log["empty"] = (ctx.get(dut.queued), ctx.get(dut.head.valid))

    simulate(dut, bench)
    assert log["full"] == (0b111, 0)
    assert log["loads"] == [(2, 3), (1, 2), (2, 1)]       # double-row K = 4: 2 beats
    assert log["loaded"] == (0b111, 0, 0)
    assert log["freed"] == 1
    assert log["heads"] == [beat(x).as_value().value for x in (a, b, c, read)]
    assert log["empty"] == (0, 0)
