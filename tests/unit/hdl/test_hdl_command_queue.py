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


def queue(rows=ROWS, cols=COLS, **kwargs):
    return CommandQueue(rows, cols, psum_banks=BANKS, psum_entries=ENTRIES, **kwargs)


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


def random_tile(rng, rows, cols):
    """``tile_position`` and ``tile_size`` drawn around the tiling rule (None, None for two
    fifths): sizes among the allowed ones, 0 and 3; starts anywhere up to the extent."""
    if rng.random() < 0.4:
        return {}
    size = tuple(int(rng.choice([e // s for s in (1, 2, 4) if e % s == 0])) if rng.random()
                 < 0.85 else int(rng.choice([0, 3, e + 1])) for e in (rows, cols))
    position = tuple(int(rng.choice([0, s, 2 * s, 1])) if rng.random() < 0.8 else
                     int(rng.integers(0, e + 1)) for s, e in zip(size, (rows, cols), strict=True))
    return {"tile_position": position, "tile_size": size}


def random_command(rng, rows=ROWS, cols=COLS):
    """A command with each field drawn around its limits, so about half are illegal."""
    if rng.random() < 0.2:
        return Command("read", bank=int(rng.integers(0, BANKS + 1)),
                       offset=int(rng.integers(0, ENTRIES)),
                       n=int(rng.integers(0, 2 * ENTRIES + 2)))
    double = rng.random() < 0.3
    dtype = str(rng.choice(TYPES))
    moving_dtype = "int8" if dtype == "int8" else str(rng.choice(TYPES[1:]))
    mx = rng.random() < 0.3
    if mx and rng.random() < 0.8:     # mostly OCP FP8 pairs, the rest what MX_TYPE refuses
        dtype, moving_dtype = (str(rng.choice(["e4m3fn", "e5m2"])) for _ in range(2))
    bf16 = rng.random() < (0.6 if mx else 0.1)
    new = {"mx": mx, "fp4": tuple(bool(rng.random() < (0.3 if mx else 0.03)) for _ in range(2)),
           "dst_dtype": "bf16" if bf16 else "fp32",
           "rounding": "stochastic" if rng.random() < (0.4 if bf16 else 0.05) else "rne",
           "seed": int(rng.integers(0, 1 << 32))}
    if mx:                  # modes and sizes mostly legal, so that the later MX rules show
        double = double and rng.random() < 0.2
    k = (int(rng.choice([8, 16, rows])) if mx and rng.random() < 0.7
         else int(rng.integers(0, 2 * rows + 2)))
    return Command("matmul", k=k,
                   m=int(rng.integers(0, cols + 2)), n=int(rng.integers(0, 2 * ENTRIES + 2)),
                   bank=int(rng.integers(0, BANKS + 1)), offset=int(rng.integers(0, ENTRIES)),
                   dtype=dtype, moving_dtype=moving_dtype,
                   perf_mode="double_row" if double else None,
                   is_transpose=bool(rng.random() < (0.1 if mx else 0.4)),
                   ftz=bool(rng.random() < (0.1 if mx else 0.3)),
                   accumulate=bool(rng.random() < 0.3), **random_tile(rng, rows, cols), **new)


@pytest.mark.parametrize("seed,rows,cols,dtypes,double_row,mx", [
    (1, ROWS, COLS, tuple(DType), True, False),
    # A queue of a tile generated for INT8 and two FP8 types only, without double-row.
    (3, ROWS, COLS, (DType.INT8, DType.E4M3, DType.E5M2), False, False),
    # Column tiles (3 columns have none), so double-row in one is refused.
    (5, 4, 4, tuple(DType), True, False),
    # The MX datapath: 8 rows for whole scale groups, column tiles for MX_TILE.
    (7, 8, 4, tuple(DType), True, True)])
def test_sim_check_and_queue_follow_the_golden_rules(seed, rows, cols, dtypes, double_row, mx):
    """Random commands one at a time: a rejected one counts in ``status`` with the golden
    error; a legal one asks for its stationary load (``K`` beats, ``min(K, rows)`` in
    double-row), and only once ``load.done`` is given is it offered at the head, unchanged."""
    rng = np.random.default_rng(seed)
    commands = [random_command(rng, rows, cols) for _ in range(250 if mx else 150)]
    # Transposes that only their mode makes illegal (rare in the draw), and a legal one.
    for mode in ({"perf_mode": "double_row", "ftz": True}, {"accumulate": True, "ftz": True},
                 {"ftz": True}, {}):
        commands.insert(int(rng.integers(len(commands) + 1)), Command(
            "matmul", k=rows, m=cols, n=ENTRIES, dtype="e5m2", is_transpose=True, **mode))
    # Matmuls that only their tile makes illegal, one per tile error, and legal tiled ones.
    half_rows, half_cols = rows // 2, cols // 2 or cols
    for tile, extra in ((((0, 0), (3, cols)), {}),
                        (((rows, 0), (half_rows, cols)), {}),
                        (((0, 0), (half_rows, cols)), {"k": half_rows + 1}),
                        (((0, half_cols), (rows, half_cols)), {"m": half_cols + 1}),
                        (((0, 0), (rows, half_cols)), {"perf_mode": "double_row", "k": rows}),
                        (((half_rows, 0), (half_rows, half_cols)), {"k": half_rows}),
                        (((half_rows, 0), (half_rows, cols)), {"k": 2 * half_rows,
                                                               "perf_mode": "double_row"})):
        commands.insert(int(rng.integers(len(commands) + 1)), Command(**{
            "op": "matmul", "k": 1, "m": 1, "n": 1, "dtype": "e4m3", "tile_position": tile[0],
            "tile_size": tile[1], **extra}))
    # Matmuls that only an MX or destination rule makes illegal, and a legal MX one.
    mx_k = 8 if rows >= 8 else rows
    for extra in ({"fp4": (True, False)}, {"dst_dtype": "bf16"}, {"rounding": "stochastic"},
                  {"mx": True, "moving_dtype": "e4m3"}, {"mx": True, "fp4": (False, True),
                                                         "moving_dtype": "e5m2"},
                  {"mx": True, "k": 3}, {"mx": True, "ftz": True},
                  {"mx": True, "tile_position": (0, 0), "tile_size": (mx_k, cols // 2 or cols)},
                  {"mx": True, "rounding": "stochastic"},
                  {"mx": True, "dst_dtype": "bf16", "rounding": "stochastic", "seed": 5}):
        commands.insert(int(rng.integers(len(commands) + 1)), Command(**{
            "op": "matmul", "k": mx_k, "m": 1, "n": 1, "dtype": "e5m2", **extra}))
    names = tuple(t.name.lower() for t in dtypes)
    errors = [command_error(c, rows=rows, cols=cols, banks=BANKS, entries=ENTRIES,
                            dtypes=names, double_row=double_row, mx=mx) for c in commands]
    unreachable = set()
    if not double_row:      # a double-row command is TYPE_NOT_BUILT (checked first)
        unreachable |= {"TRANSPOSE_DOUBLE_ROW", "TILE_DOUBLE_ROW"}
    elif len(dtypes) == len(DType) and mx:
        unreachable.add("TYPE_NOT_BUILT")
    if not mx:              # an MX matmul is TYPE_NOT_BUILT; fp4 and bf16_out still judged
        unreachable |= {"MX_K", "MX_MODE", "MX_TILE"}
    if cols % 2:            # no column tiles
        unreachable |= {"TILE_DOUBLE_ROW", "TILE_M_RANGE"}
    assert set(errors) == {None, *[e.name for e in ErrorCode if e.name != "NONE"]} - unreachable
    # Legal regions that run into the next bank: on an MX (NeuronCore-v4) tile only.
    assert any(e is None and c.offset + c.n > ENTRIES
               for c, e in zip(commands, errors, strict=True)) == mx
    dut = queue(rows, cols, dtypes=dtypes, double_row=double_row, mx=mx)
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
            beats = command.load_beats(rows)
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


@pytest.mark.parametrize("dtypes", [tuple(DType), (DType.INT8, DType.BF16)])
def test_sim_raw_words_with_a_type_no_tile_takes_are_rejected(dtypes):
    """Words ``golden.Command`` cannot express: an operand type code that is no DType (7)
    and INT8 paired with a float type (golden: "int8 pairs only with int8"). Before, a tile
    generated for every type checked no operand type at all and ran them on the array."""
    layout = command_layout()
    fields = {name: (f.offset, Shape.cast(f.shape).width) for name, f in layout}

    def word(command, **raw):
        value = layout.const(command_beat(command)).as_value().value
        for name, code in raw.items():
            offset, width = fields[name]
            value = (value & ~(((1 << width) - 1) << offset)) | (code << offset)
        return value

    bf16 = Command("matmul", k=1, m=1, n=1, dtype="bf16")
    int8 = Command("matmul", k=1, m=1, n=1, dtype="int8")
    transpose = Command("matmul", k=1, m=1, n=1, dtype="int8", is_transpose=True)
    cases = [(word(bf16, dtype=7), True), (word(bf16, moving_dtype=7), True),
             (word(bf16, dtype=0), True), (word(bf16, moving_dtype=0), True),
             (word(transpose, moving_dtype=1), True), (word(int8), False), (word(bf16), False)]
    dut = queue(dtypes=dtypes, double_row=False)
    seen = []

    async def bench(ctx):
        for value, _ in cases:
            ctx.set(dut.command.payload.as_value(), value)
            ctx.set(dut.command.valid, 1)
            await ctx.tick()
            ctx.set(dut.command.valid, 0)
            seen.append((ctx.get(dut.status.rejected), ctx.get(dut.status.error),
                         ctx.get(dut.queued)))
            ctx.set(dut.load.done, 1)
            await ctx.tick()
            ctx.set(dut.load.done, 0)
            ctx.set(dut.head.ready, 1)
            await ctx.tick()
            ctx.set(dut.head.ready, 0)

    simulate(dut, bench)
    rejected = 0
    for (value, refused), (count, error, queued) in zip(cases, seen, strict=True):
        rejected += refused
        assert count == rejected, (hex(value), count)
        if refused:
            assert error == ErrorCode.TYPE_NOT_BUILT and queued == 0, (hex(value), error)
        else:
            assert queued != 0, hex(value)
