"""Unit tier: the result path (:class:`systolica.hdl.ResultPath`): its parameters, and in
amaranth.sim random tokens per column cell and skewed columns under random result
backpressure: every result beat (READ, overwrite, INT32 and FP32 accumulate; cells sharing
a beat) against a shadow PSUM per cell whose
accumulates are the golden model's, the token ``latency`` advances late and column ``c`` de-skewed
by ``cols - 1 - c`` advances."""


import numpy as np
import pytest
from amaranth.hdl import Shape
from amaranth.lib import data
from test_hdl_psum import next_entry

from systolica.hdl import ResultPath, token_layout
from systolica.hdl.streams import simulate, stream_sink

COLS, LATENCY, DEPTH = 2, 3, 4


def test_init():
    dut = ResultPath(COLS, LATENCY, psum_depth=DEPTH)
    members = dut.signature.members
    # two columns are two column cells: lanes, then groups and last per cell
    assert Shape.cast(members["result"].signature.members["payload"].shape).width == (
        2 * 32 + 2 + 2)
    assert members["tokens"].shape == data.ArrayLayout(token_layout(DEPTH), COLS)
    assert Shape.cast(members["column"].shape).width == 2 * 32


@pytest.mark.parametrize("seed", [1, 2])
def test_sim_results_follow_tokens_through_backpressure(seed):
    """Each column cell (one column each here) has its own token stream and PSUM address:
    cells whose tokens are valid together share a result beat."""
    rng = np.random.default_rng(seed)
    steps = 40
    tokens = []     # per step, one token per cell
    for j in range(steps + LATENCY):
        tokens.append([{"valid": int(j < steps and rng.random() < 0.6),
                        "addr": int(rng.integers(0, DEPTH)), "last": int(rng.integers(0, 2)),
                        "read": int(rng.random() < 0.25), "accumulate": int(rng.integers(0, 2)),
                        "fp32": int(rng.integers(0, 2)), "ftz": int(rng.integers(0, 2))}
                       for _ in range(COLS)])
    columns = [[int(rng.integers(0, 2**32)) if rng.random() < 0.8 else
                int(rng.choice([0, 0x80000000, 0x7F800000, 0x00000001, 0x3F800000]))
                for _ in range(COLS)] for _ in range(steps + LATENCY)]
    # The shadow PSUM, in token order: step j's tokens are at the PSUM stage in advance step
    # j + LATENCY, with column c as it entered COLS - 1 - c steps before.
    shadow = [[[0] for _ in range(DEPTH)] for _ in range(COLS)]
    want = []
    for j, cells in enumerate(tokens):
        if not any(t["valid"] for t in cells):
            continue
        s = j + LATENCY
        beat = {}
        for c, token in enumerate(cells):
            if not token["valid"]:
                continue
            column = [columns[s - (COLS - 1 - c)][c]]
            words = next_entry(shadow[c][token["addr"]], column,
                               **{f: token[f] for f in ("read", "accumulate", "fp32", "ftz")})
            if not token["read"]:
                shadow[c][token["addr"]] = words
            beat[c] = (words[0], token["last"])
        want.append(beat)

    dut = ResultPath(COLS, LATENCY, psum_depth=DEPTH)
    layout = token_layout(DEPTH)
    ready = np.random.default_rng(seed + 100).random(2000) < 0.6
    beats = []

    async def source(ctx):
        step = 0
        while step < len(tokens):
            for c in range(COLS):
                ctx.set(dut.tokens[c], layout.const(tokens[step][c]))
                ctx.set(dut.column[c], columns[step][c])
            _, _, advance = await ctx.tick().sample(dut.advance)
            step += advance
        for c in range(COLS):
            ctx.set(dut.tokens[c].valid, 0)

    simulate(dut, stream_sink(dut.result, len(want), beats, ready=lambda c: ready[c]),
             background=[source])
    assert sum(len(w) == 2 for w in want) > 3      # beats that two cells share
    for i, (beat, w) in enumerate(zip(beats, want, strict=True)):
        assert int(beat.groups) == sum(1 << c for c in w), i
        got = {c: (int(beat.data[c]), int(beat.last) >> c & 1) for c in w}
        assert got == w, (i, got, w)
