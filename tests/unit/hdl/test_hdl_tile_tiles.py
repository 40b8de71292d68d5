"""Unit tier: row and column tiles in the tile (amaranth.sim) against the golden model and the
cycle model: a matmul in each allowed tile of a 4 x 4 tile (every size, every position), with
the stimulus, expected words and PSUM shadow of the testbench's :class:`TileModel`.

Matmuls in tiles that share no PE row or column run at once, sharing moving and result
beats; the stamps are :func:`~systolica.golden.command_schedule`'s.
"""

import itertools

import numpy as np
import pytest

from systolica.golden import command_schedule, tile_sizes
from systolica.hdl import Tile, command_layout, moving_layout, stationary_layout
from systolica.hdl.config import TileConfig
from systolica.hdl.streams import simulate, stream_sink, stream_source
from systolica.tb.model import TileModel
from systolica.tb.scoreboard import Scoreboard

BANKS, ENTRIES = 2, 16


def every_tile(rows, cols):
    """Every (tile_position, tile_size) of a ``rows x cols`` array (NeuronCore-v3 rule)."""
    for rs, cs in itertools.product(tile_sizes(rows), tile_sizes(cols)):
        for r, c in itertools.product(range(0, rows, rs), range(0, cols, cs)):
            yield (r, c), (rs, cs)


def run(rows, cols, matmuls, reads=(), types="all"):
    """Model ``matmuls`` (dicts of :meth:`TileModel.submit` arguments) and then ``reads``
    (dicts of :meth:`TileModel.read` arguments) on a TileModel, run their beats (the moving
    ones packed as the host packs them: matmuls in flight together share beats) through a
    Tile of the type set ``types`` in amaranth.sim, and check every result word (the
    scoreboard) and every stamp against the cycle model."""
    config = TileConfig(rows, cols, types, psum_banks=BANKS, psum_entries=ENTRIES)
    width = config.operand_width
    scoreboard = Scoreboard()
    model = TileModel(rows, cols, scoreboard, banks=BANKS, entries=ENTRIES,
                      dtypes=config.dtypes, double_row=config.double_row)
    commands, s_beats, bits = [], [], {}
    for args in matmuls:
        record, beat, s_bits, m_bits = model.submit(**args)
        commands.append(beat)
        s_beats += [{"data": [int(v) for v in row]} for row in s_bits]
        bits[record.index] = m_bits
    for args in reads:
        commands.append(model.read(**args)[1])
    data, groups = model.plan(bits)
    m_beats = [{"data": [int(v) for v in row], "groups": int(g)}
               for row, g in zip(data, groups, strict=True)]
    dut = Tile(config)
    stamps = {"command": [], "stationary": [], "moving": [], "result": []}
    beats = []
    sources = [
        stream_source(dut.command, [command_layout().const(c) for c in commands],
                      cycles=stamps["command"]),
        stream_source(dut.stationary, [stationary_layout(cols, width).const(b) for b in s_beats],
                      cycles=stamps["stationary"]),
        stream_source(dut.moving, [moving_layout(rows, width).const(b) for b in m_beats],
                      cycles=stamps["moving"])]
    simulate(dut, stream_sink(dut.result, model.result_count, beats, cycles=stamps["result"],
                              max_cycles=20_000), background=sources)
    for position, (beat, cycle) in enumerate(zip(beats, stamps["result"], strict=True)):
        model.on_result(position, np.array([int(v) for v in beat.data], np.uint64), cycle,
                        int(beat.last))
    scoreboard.check_complete()
    schedule = command_schedule(rows, cols, [r.command for r in model.records], banks=BANKS,
                                entries=ENTRIES, dtypes=config.dtypes,
                                double_row=config.double_row)
    assert stamps["command"] == [t.accept for t in schedule]
    assert stamps["stationary"] == [c for t in schedule for c in t.loads]
    assert stamps["moving"] == sorted({c for t in schedule if t.loads for c in t.issues})
    assert stamps["result"] == sorted({c for t in schedule for c in t.results})
    return model


def _operands(rng, dtype, k, m, n):
    if dtype == "int8":
        return (rng.integers(-128, 128, (k, m)).astype(np.int8),
                rng.integers(-128, 128, (k, n)).astype(np.int8))
    import ml_dtypes
    t = ml_dtypes.bfloat16
    return (rng.standard_normal((k, m)).astype(np.float32).astype(t),
            rng.standard_normal((k, n)).astype(np.float32).astype(t))


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_a_matmul_in_every_tile_of_a_4_x_4_tile(dtype):
    """One matmul (K and M filling the tile, then smaller ones) in each of the 4 x 4 tile's
    tiles, each size at each position, into its own PSUM region: every word (the tile's
    PSUM partitions the golden result, the others untouched) and every stamp."""
    rng = np.random.default_rng(4)
    matmuls = []
    for i, (position, size) in enumerate(every_tile(4, 4)):
        k = size[0] if i % 2 == 0 else int(rng.integers(1, size[0] + 1))
        m = size[1] if i % 3 else int(rng.integers(1, size[1] + 1))
        stationary, moving = _operands(rng, dtype, k, m, 3)
        matmuls.append({"stationary": stationary, "moving": moving, "bank": i % BANKS,
                        "offset": 3 * (i // BANKS) % 15, "tile_position": position,
                        "tile_size": size})
    assert len(matmuls) == 49        # (1 + 2 + 4) ** 2 tiles
    run(4, 4, matmuls[:25])
    run(4, 4, matmuls[25:])


def test_row_tiles_accumulate_and_column_tiles_fill_one_region():
    """A K = 4 BF16 product as two K = 2 matmuls in the two row tiles, accumulating into one
    region; then the four column quarters of another region written by four matmuls in
    quarter column tiles, and READs of both (the PSUM shadow's words)."""
    rng = np.random.default_rng(9)
    stationary, moving = _operands(rng, "bf16", 4, 4, 5)
    matmuls = [{"stationary": stationary[:2], "moving": moving[:2],
                "tile_position": (0, 0), "tile_size": (2, 4)},
               {"stationary": stationary[2:], "moving": moving[2:], "accumulate": True,
                "tile_position": (2, 0), "tile_size": (2, 4)}]
    for q in range(4):
        s, mv = _operands(rng, "int8", 1 + q % 4, 1, 4)
        matmuls.append({"stationary": s, "moving": mv, "bank": 1, "offset": 2,
                        "tile_position": (0, q), "tile_size": (4, 1)})
    model = run(4, 4, matmuls, reads=[{"n": 5}, {"bank": 1, "offset": 2, "n": 4}])
    assert model.records[0].command.tile_size == (2, 4)


def test_double_row_and_transpose_in_a_row_tile():
    """FP8 double-row (K = 4 in a 2-row tile: rows r and r + 2 pair up) and a transpose in
    the lower row tile, on an 8 x 8 tile's halves and quarters."""
    import ml_dtypes
    rng = np.random.default_rng(2)
    e4m3 = ml_dtypes.float8_e4m3
    s = rng.standard_normal((4, 8)).astype(np.float32).astype(e4m3)
    mv = rng.standard_normal((4, 3)).astype(np.float32).astype(e4m3)
    t = rng.integers(-128, 128, (2, 2)).astype(np.int8)
    sel = np.zeros((2, 3), np.int8)
    sel[[1, 0, 1], [0, 1, 2]] = 1
    run(8, 8, [{"stationary": s, "moving": mv, "perf_mode": "double_row",
                "tile_position": (6, 0), "tile_size": (2, 8)},
               {"stationary": t, "moving": sel, "is_transpose": True, "bank": 1,
                "tile_position": (4, 6), "tile_size": (2, 2)}])


def test_loads_into_other_cells_overlap_a_running_matmul():
    """Per-cell weight buffers: a long matmul in the top-left quarter of a 4 x 4 tile, then
    short ones in the other quarters (and one more top-left), all loaded while the long one
    streams. The loads write only their tile's columns (the top-right quarter shares PE rows
    with the long one and takes buffer 0 there too), so every word is the golden one, and
    the load stamps are the cycle model's (they come before the long matmul's last beat)."""
    rng = np.random.default_rng(11)
    matmuls = []
    for i, (position, n) in enumerate([((0, 0), 12), ((2, 2), 2), ((0, 2), 2), ((2, 0), 2),
                                       ((0, 0), 3)]):
        stationary, moving = _operands(rng, "bf16", 2, 2, n)
        matmuls.append({"stationary": stationary, "moving": moving, "offset": 12 * i % 16,
                        "bank": i % BANKS, "tile_position": position, "tile_size": (2, 2)})
    model = run(4, 4, matmuls)
    schedule = command_schedule(4, 4, [r.command for r in model.records], banks=BANKS,
                                entries=ENTRIES)
    assert schedule[2].load_end < schedule[0].last_issue


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_four_quarter_tiles_run_at_once(dtype):
    """Concurrent tiles: four matmuls in the diagonal quarter tiles of an 8 x 8 tile (no PE
    row or column shared) stream together, each moving beat carrying a column of all four
    and each result beat all four results; then a whole-array matmul accumulates over
    their PSUM region. Every word and every stamp against the cycle model, and the four
    together take about a quarter of the cycles one after the other would."""
    rng = np.random.default_rng(5)
    matmuls = []
    for q in range(4):
        stationary, moving = _operands(rng, dtype, 2, 2, 12)
        matmuls.append({"stationary": stationary, "moving": moving, "offset": 0,
                        "tile_position": (2 * q, 2 * q), "tile_size": (2, 2)})
    stationary, moving = _operands(rng, dtype, 8, 8, 12)
    matmuls.append({"stationary": stationary, "moving": moving, "accumulate": True})
    model = run(8, 8, matmuls)
    assert max(len(owners) for owners in model.moving_owners) == 4
    assert max(len(owners) for owners in model.events) == 4
    schedule = command_schedule(8, 8, [r.command for r in model.records], banks=BANKS,
                                entries=ENTRIES)        # the RTL's stamps (run checks them)
    assert schedule[3].first_issue - schedule[0].first_issue == 3 * 2   # one load port
    assert schedule[3].last_issue < schedule[0].last_issue + 12         # all four overlap
