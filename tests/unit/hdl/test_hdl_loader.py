"""Unit tier: the stationary loader (:class:`systolica.hdl.StationaryLoader`): its
parameters, and in amaranth.sim two loads into the two buffers (shadow weights), the third
held back while its buffer is full and then busy, and every skewed write lane cycle by
cycle against the hand-derived schedule (beat ``k`` reaches column ``c`` ``1 + c`` cycles
after it transfers, lanes ``>= M`` written as zeros)."""


from amaranth.hdl import Shape

from systolica.hdl import StationaryLoader, stationary_layout
from systolica.hdl.streams import simulate, stream_put

ROWS, COLS = 2, 3


def test_init():
    dut = StationaryLoader(ROWS, COLS)
    members = dut.signature.members
    assert Shape.cast(members["load_row"].shape).width == 1
    assert Shape.cast(members["full"].shape).width == 2 * 2      # two buffer cells
    lane = Shape.cast(members["load"].shape).width // COLS
    assert lane == 1 + 1 + 1 + 16                # valid, row, buf, value
    assert Shape.cast(StationaryLoader(1, 1).signature.members["load_row"].shape).width == 0


def test_sim_two_buffers_hold_back_the_third_load_and_skew_every_write():
    dut = StationaryLoader(ROWS, COLS)
    layout = stationary_layout(COLS)
    loads = [  # (M, beats: one partition row each, buf)
        (2, [[0x101, 0x102, 0x103], [0x111, 0x112, 0x113]], 0),
        (3, [[0x201, 0x202, 0x203], [0x211, 0x212, 0x213]], 1),
        (1, [[0x301, 0x302, 0x303], [0x311, 0x312, 0x313]], 0),
    ]
    transfers = []           # (cycle, row, buf, M, data)
    seen = {}                # cycle -> (lanes, done)
    log = {}

    async def recorder(ctx):
        cycle = 0
        while True:
            lanes = [(ctx.get(dut.load[c].valid), ctx.get(dut.load[c].row),
                      ctx.get(dut.load[c].buf), ctx.get(dut.load[c].value))
                     for c in range(COLS)]
            seen[cycle] = (lanes, ctx.get(dut.request.done))
            await ctx.tick()
            cycle += 1

    async def bench(ctx):
        cycle = 0

        async def load(m, beats, buf):
            nonlocal cycle
            ctx.set(dut.request.m, m)
            for row, data in enumerate(beats):
                cycle += await stream_put(ctx, dut.stationary, layout.const({"data": data}))
                transfers.append((cycle - 1, row, buf, m, data))

        async def step(**signals):
            nonlocal cycle
            for name, value in signals.items():
                ctx.set(getattr(dut.buffers, name), value)
            await ctx.tick()
            cycle += 1
            for name in signals:
                ctx.set(getattr(dut.buffers, name), 0)

        ctx.set(dut.en, 1)
        ctx.set(dut.request.valid, 1)
        ctx.set(dut.request.beats, ROWS)
        ctx.set(dut.request.trows, ROWS)          # the whole array: both buffer cells
        ctx.set(dut.request.tcols, COLS)
        await load(*loads[0])
        log["after first"] = (ctx.get(dut.full), ctx.get(dut.load_buf), ctx.get(dut.load_row))
        await load(*loads[1])
        log["after second"] = (ctx.get(dut.full), ctx.get(dut.load_buf))
        # Both buffers hold a matmul that has not started: the third load waits.
        ctx.set(dut.stationary.payload, layout.const({"data": loads[2][1][0]}))
        ctx.set(dut.stationary.valid, 1)
        log["both full"] = ctx.get(dut.stationary.ready)
        await step(start=1)                      # buffer 0's matmul starts: busy now
        log["started"] = (ctx.get(dut.full), ctx.get(dut.busy), ctx.get(dut.buffers.sel),
                          ctx.get(dut.stationary.ready))
        await step(release=1, release_sel=0,     # ... and sends its last moving beat
                   release_cells=0b11)
        log["released"] = (ctx.get(dut.busy), ctx.get(dut.stationary.ready))
        await load(*loads[2])
        for _ in range(COLS + 2):                # let the last write pass every column
            await ctx.tick()
            cycle += 1
        log["end"] = cycle
        ctx.set(dut.en, 0)
        ctx.set(dut.stationary.valid, 1)
        log["disabled"] = ctx.get(dut.stationary.ready)

    simulate(dut, bench, background=[recorder])
    # bit 2 i + b: buffer b of cell i (two cells, both in the whole array's loads)
    assert log["after first"] == (0b0101, 0, 0)
    assert log["after second"] == (0b1111, 1)
    assert log["both full"] == 0
    assert log["started"] == (0b1010, 0b0101, 1, 0)
    assert log["released"] == (0b0000, 1)
    assert log["disabled"] == 0
    assert [(row, buf) for _, row, buf, _, _ in transfers] == [(0, 0), (1, 0), (0, 1), (1, 1),
                                                                 (0, 0), (1, 0)]
    want = {}
    for t, row, buf, m, data in transfers:
        for c in range(COLS):
            want[t + 1 + c, c] = (1, row, buf, data[c] if c < m else 0)
    for cycle in range(log["end"]):
        lanes, done = seen[cycle]
        for c in range(COLS):
            if (cycle, c) in want:
                assert lanes[c] == want[cycle, c], (cycle, c)
            else:
                assert lanes[c][0] == 0, (cycle, c)
        last_beat = any(t == cycle and row == ROWS - 1 for t, row, _, _, _ in transfers)
        assert done == last_beat, cycle
