"""Unit tier: the issue logic (:class:`systolica.hdl.IssueLogic`): its parameters, and in
amaranth.sim a program of matmuls and a READ issued beat by beat: the tokens (flat PSUM
address, last, read, accumulate, FTZ, FP32), the buffer starts and releases, and the skewed
operand lanes (row ``k`` of a beat ``1 + k`` cycles after it, ``active`` for ``k < K``,
``hi`` for double-row ``k + rows < K``), all derived by hand from the commands."""


from amaranth.hdl import Shape

from systolica.golden import Command
from systolica.hdl import IssueLogic, command_layout, moving_layout
from systolica.hdl.layouts import NarrowDType
from systolica.hdl.streams import simulate, stream_source
from systolica.tb.model import command_beat

ROWS, ENTRIES, DEPTH = 2, 4, 8


def test_init():
    dut = IssueLogic(ROWS, psum_entries=ENTRIES, psum_depth=DEPTH)
    members = dut.signature.members
    # two lanes and the two row cells' bits
    assert Shape.cast(members["moving"].signature.members["payload"].shape).width == (
        ROWS * 16 + 2)
    # one column cell's token: flags + range(8)
    assert Shape.cast(members["tokens"].shape).width == 6 + 3
    assert list(members["buffers"].signature.members) == ["start", "release", "release_sel",
                                                           "release_cells", "sel", "cells"]


PROGRAM = [
    Command("matmul", k=2, m=1, n=3, bank=1, offset=1, accumulate=True),
    Command("read", bank=0, offset=2, n=2),
    Command("matmul", k=1, m=1, n=2, dtype="bf16", ftz=True),
    Command("matmul", k=3, m=1, n=1, dtype="e4m3", moving_dtype="e5m2",
            perf_mode="double_row"),
]
IDLE = 3      # cycles with en low at the start: nothing may issue


def expected_tokens():
    """Per issued beat, by hand: (command index, flat address, last, read, accumulate, ftz,
    fp32)."""
    out = []
    for i, c in enumerate(PROGRAM):
        for n in range(c.n):
            out.append((i, c.bank * ENTRIES + c.offset + n, int(n == c.n - 1),
                        int(c.op == "read"), int(c.accumulate), int(c.ftz),
                        int(c.op == "matmul" and c.dtype != "int8")))
    return out


def test_sim_issues_every_beat_in_order_with_its_token_and_lanes():
    dut = IssueLogic(ROWS, psum_entries=ENTRIES, psum_depth=DEPTH)
    moving = []        # (command index, beat data)
    for i, c in enumerate(PROGRAM):
        moving += [(i, [0x10 * (i + 1) + 2 * n + k for k in range(ROWS)])
                   for n in range(c.n if c.op == "matmul" else 0)]
    head_cycles, moving_cycles = [], []
    record = {}         # cycle -> (token fields, buffers, operand lanes)

    async def bench(ctx):
        sel = 0
        total = sum(c.n for c in PROGRAM)
        issued, cycle = 0, 0
        while issued < total or cycle < IDLE + total + ROWS + 2:
            ctx.set(dut.en, int(cycle >= IDLE))
            ctx.set(dut.buffers.sel, sel)
            ctx.set(dut.buffers.cells, 0b11)        # the whole array: both row cells
            token = tuple(ctx.get(getattr(dut.tokens[0], f)) for f in (
                "valid", "addr", "last", "read", "accumulate", "ftz", "fp32"))
            buffers = tuple(ctx.get(getattr(dut.buffers, f)) for f in (
                "start", "release", "release_sel"))
            lanes = [tuple(ctx.get(getattr(dut.operands[k], f)) for f in (
                "value", "sel", "active", "hi", "stype", "mtype", "ftz")) for k in range(ROWS)]
            record[cycle] = (token, buffers, lanes)
            issued += token[0]
            await ctx.tick()
            if buffers[0]:
                sel ^= 1        # the loader toggles the next matmul's buffer on a start
            cycle += 1
            assert cycle < 200, "the issue logic stopped issuing"

    heads = [command_layout().const(command_beat(c)) for c in PROGRAM]
    beats = [moving_layout(ROWS).const({"data": data, "groups": 0b11}) for _, data in moving]
    simulate(dut, bench, background=[stream_source(dut.head, heads, cycles=head_cycles),
                                     stream_source(dut.moving, beats, cycles=moving_cycles)])

    issue_cycles = [t for t in sorted(record) if record[t][0][0]]
    want = expected_tokens()
    # Back to back from the first enabled cycle: no bubble between or inside commands.
    assert issue_cycles == list(range(IDLE, IDLE + len(want)))
    assert [record[t][0][1:] for t in issue_cycles] == [w[1:] for w in want]
    firsts = [t for t, w in zip(issue_cycles, want, strict=True)
              if w == next(x for x in want if x[0] == w[0])]
    assert head_cycles == firsts
    matmul_cycles = [t for t, w in zip(issue_cycles, want, strict=True)
                     if PROGRAM[w[0]].op == "matmul"]
    assert moving_cycles == matmul_cycles
    # Buffers: a start on each matmul's first beat, a release on its last, of the buffer it
    # uses in both cells (0, 1, 0 for the three matmuls).
    starts = [t for t in record if record[t][1][0]]
    releases = [(t, record[t][1][2]) for t in record if record[t][1][1]]
    matmul_firsts = [t for t in firsts if PROGRAM[want[issue_cycles.index(t)][0]].op == "matmul"]
    assert starts == matmul_firsts
    lasts = [t for t, w in zip(issue_cycles, want, strict=True)
             if w[2] and PROGRAM[w[0]].op == "matmul"]
    assert releases == list(zip(lasts, [0, 0b11, 0], strict=True))
    # Operand lanes: row k of the beat issued in cycle t, in cycle t + 1 + k.
    sels = {0: 0, 2: 1, 3: 0}
    beat_data = iter(moving)
    for t, w in zip(issue_cycles, want, strict=True):
        c = PROGRAM[w[0]]
        if c.op == "read":
            for k in range(ROWS):
                assert record[t + 1 + k][2][k][2] == 0, (t, k)     # inactive
            continue
        _, data = next(beat_data)
        double = c.perf_mode == "double_row"
        for k in range(ROWS):
            lane = (data[k], sels[w[0]], int(c.k > k), int(double and c.k > k + ROWS),
                    NarrowDType[c.dtype.upper()].value, NarrowDType[c.mtype.upper()].value,
                    int(c.ftz))
            got = record[t + 1 + k][2][k]
            assert got == lane, (t, k, got, lane)
