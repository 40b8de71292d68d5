"""Unit tier: the result path (:class:`systolica.hdl.ResultPath`): its parameters, and in
amaranth.sim random tokens and skewed columns under random result backpressure: every
result beat (READ, overwrite, INT32 and FP32 accumulate) against a shadow PSUM whose
accumulates are the golden model's, the token ``latency`` advances late and column ``c`` de-skewed
by ``cols - 1 - c`` advances."""


import numpy as np
import pytest
from amaranth.hdl import Shape
from test_hdl_psum import next_entry

from systolica.hdl import ResultPath, token_layout
from systolica.hdl.streams import simulate, stream_sink

COLS, LATENCY, DEPTH = 2, 3, 4


def test_init():
    dut = ResultPath(COLS, LATENCY, psum_depth=DEPTH)
    members = dut.signature.members
    assert Shape.cast(members["result"].signature.members["payload"].shape).width == 2 * 32 + 1
    assert members["token"].shape == token_layout(DEPTH)
    assert Shape.cast(members["column"].shape).width == 2 * 32


@pytest.mark.parametrize("seed", [1, 2])
def test_sim_results_follow_tokens_through_backpressure(seed):
    rng = np.random.default_rng(seed)
    steps = 40
    tokens = []
    for j in range(steps + LATENCY):
        valid = j < steps and rng.random() < 0.7
        tokens.append({"valid": int(valid), "addr": int(rng.integers(0, DEPTH)),
                       "last": int(rng.integers(0, 2)), "read": int(rng.random() < 0.25),
                       "accumulate": int(rng.integers(0, 2)), "fp32": int(rng.integers(0, 2)),
                       "ftz": int(rng.integers(0, 2))})
    columns = [[int(rng.integers(0, 2**32)) if rng.random() < 0.8 else
                int(rng.choice([0, 0x80000000, 0x7F800000, 0x00000001, 0x3F800000]))
                for _ in range(COLS)] for _ in range(steps + LATENCY)]
    # The shadow PSUM, in token order: token j is at the PSUM stage in advance step
    # j + LATENCY, with column c as it entered COLS - 1 - c steps before.
    shadow = [[0] * COLS for _ in range(DEPTH)]
    want = []
    for j, token in enumerate(tokens):
        if not token["valid"]:
            continue
        s = j + LATENCY
        column = [columns[s - (COLS - 1 - c)][c] for c in range(COLS)]
        words = next_entry(shadow[token["addr"]], column,
                           **{f: token[f] for f in ("read", "accumulate", "fp32", "ftz")})
        if not token["read"]:
            shadow[token["addr"]] = words
        want.append((words, token["last"]))

    dut = ResultPath(COLS, LATENCY, psum_depth=DEPTH)
    layout = token_layout(DEPTH)
    ready = np.random.default_rng(seed + 100).random(2000) < 0.6
    beats = []

    async def source(ctx):
        step = 0
        while step < len(tokens):
            ctx.set(dut.token, layout.const(tokens[step]))
            for c in range(COLS):
                ctx.set(dut.column[c], columns[step][c])
            _, _, advance = await ctx.tick().sample(dut.advance)
            step += advance
        ctx.set(dut.token.valid, 0)

    simulate(dut, stream_sink(dut.result, len(want), beats, ready=lambda c: ready[c]),
             background=[source])
    got = [([int(v) for v in beat.data], int(beat.last)) for beat in beats]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (i, g, w)
