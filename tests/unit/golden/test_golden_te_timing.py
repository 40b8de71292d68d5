"""The cycle model's tensor-engine additions: FP32 passes and the transpose's rate, AWS's
published cost formula, and concurrent matmuls in tiles (``tiled_schedule``)."""

import numpy as np
import pytest

from systolica.golden import Command, command_schedule, tile_sizes
from systolica.golden.timing import (
    TileOp,
    matmul_passes,
    moving_beats,
    nc_matmul_cost,
    tiled_program_cycles,
    tiled_schedule,
)


@pytest.mark.parametrize("stationary,moving,transpose,passes", [
    ("bf16", None, False, 1), ("e4m3", "e5m2", False, 1), ("int8", None, False, 1),
    ("tf32", None, False, 1), ("fp32", None, False, 4), ("tf32", "fp32", False, 4),
    ("fp32", "tf32", False, 4), ("fp32", None, True, 2), ("tf32", None, True, 2),
    ("bf16", None, True, 1), ("e4m3", None, True, 1),
])
def test_passes(stationary, moving, transpose, passes):
    assert matmul_passes(stationary, moving, is_transpose=transpose) == passes


@pytest.mark.parametrize("n_stationary,n_moving,dtype,transpose,cycles", [
    (128, 512, "bf16", False, 512),     # the ideal back-to-back case: N cycles
    (128, 512, "fp32", False, 2048),    # 4x for float32
    (128, 32, "bf16", False, 64),       # small N: the 64-cycle floor
    (16, 8, "e4m3", False, 16),         # small M lowers the floor
    (128, 128, "bf16", True, 128),      # nc_transpose [128, 128]: max(P, min(64, F))
    (128, 128, "fp32", True, 256),      # 2x faster than the 4-pass FP32 matmul (512)
    (32, 128, "fp16", True, 128),       # data [128, 32]: max(128, min(64, 32))
])
def test_aws_cost_formula(n_stationary, n_moving, dtype, transpose, cycles):
    assert nc_matmul_cost(n_stationary, n_moving, stationary_dtype=dtype,
                          is_transpose=transpose) == cycles


def _random_program(rng, rows, tile=None):
    """A legal program as Commands and the equal TileOps: READs and whole-array matmuls
    (M = 1, FP8 double-row among them), or with ``tile`` (``tile_position``, ``tile_size``)
    matmuls that all run in that tile, K and M up to its size."""
    tile = tile or {}
    k_max, m_max = tile.get("tile_size", (rows, 1))
    modes = [("int8", None), ("bf16", None), ("e4m3", None if tile else "double_row")]
    commands, ops = [], []
    for _ in range(rng.integers(1, 9)):
        n = int(rng.integers(1, 7))
        if rng.random() < 0.25:
            commands.append(Command("read", n=n))
            ops.append(TileOp("read", n=n))
            continue
        dtype, mode = modes[rng.integers(3)]
        k = int(rng.integers(1, (2 if mode else 1) * k_max + 1))
        m = int(rng.integers(1, m_max + 1))
        commands.append(Command("matmul", k=k, m=m, n=n, dtype=dtype, perf_mode=mode, **tile))
        ops.append(TileOp(k=k, n=n, dtype=dtype, perf_mode=mode, **tile))
    return commands, ops


def test_whole_array_programs_keep_the_existing_stamps(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        rows, cols = (int(x) for x in rng.integers(1, 9, 2))
        commands, ops = _random_program(rng, rows)
        assert tiled_schedule(rows, cols, ops) == command_schedule(rows, cols, commands)


def test_programs_in_one_tile_keep_the_rtl_stamps(seed):
    """Matmuls that all run in one tile cannot overlap, so the concurrent model must give
    the stamps of the one-at-a-time model the RTL follows, the row tile's load wait
    (r cycles for a tile starting at PE row r) included."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        rows, cols = (int(x) for x in rng.choice([4, 8, 16], 2))
        sizes = [(r, c) for r in tile_sizes(rows) for c in tile_sizes(cols)]
        trows, tcols = sizes[rng.integers(len(sizes))]
        tile = {"tile_position": (int(rng.integers(rows // trows)) * trows,
                                  int(rng.integers(cols // tcols)) * tcols),
                "tile_size": (trows, tcols)}
        commands, ops = _random_program(rng, rows, tile)
        assert tiled_schedule(rows, cols, ops) == command_schedule(rows, cols, commands), tile


def test_programs_of_lane_sharing_tiles_keep_the_rtl_stamps(seed):
    """Matmuls in tiles anywhere, each sharing a PE row or column with the one before, run
    one after the other in the concurrent model too; loads into other cells do not wait for
    a buffer there (the per-cell weight buffers the RTL has), so both models agree."""
    from systolica.golden.tiles import Tile
    rng = np.random.default_rng(seed)
    for _ in range(300):
        rows, cols = (int(x) for x in rng.choice([4, 8], 2))
        tiles = [((r, c), (rs, cs)) for rs in tile_sizes(rows) for cs in tile_sizes(cols)
                 for r in range(0, rows, rs) for c in range(0, cols, cs)]
        commands, ops, previous = [], [], None
        for _ in range(rng.integers(1, 9)):
            n = int(rng.integers(1, 7))
            if rng.random() < 0.2:
                commands.append(Command("read", n=n))
                ops.append(TileOp("read", n=n))
                previous = None
                continue
            choices = [t for t in tiles if previous is None
                       or Tile(*t[0], *t[1]).shares_lanes(Tile(*previous[0], *previous[1]))]
            previous = position, size = choices[rng.integers(len(choices))]
            k, m = int(rng.integers(1, size[0] + 1)), int(rng.integers(1, size[1] + 1))
            dtype = ("int8", "bf16", "e4m3")[rng.integers(3)]
            tile = {"tile_position": position, "tile_size": size}
            commands.append(Command("matmul", k=k, m=m, n=n, dtype=dtype, **tile))
            ops.append(TileOp(k=k, n=n, dtype=dtype, **tile))
        assert tiled_schedule(rows, cols, ops) == command_schedule(rows, cols, commands)


def _random_tiled_program(rng, rows, cols):
    """Commands in random tiles (any size, any position), BF16 / INT8 / FP32 matmuls, FP8
    transposes and READs: the concurrent model has several in flight."""
    tiles = [((r, c), (rs, cs)) for rs in tile_sizes(rows) for cs in tile_sizes(cols)
             for r in range(0, rows, rs) for c in range(0, cols, cs)]
    commands = []
    for _ in range(rng.integers(1, 12)):
        n = int(rng.integers(1, 7))
        if rng.random() < 0.1:
            commands.append(Command("read", n=n))
            continue
        position, size = tiles[rng.integers(len(tiles))]
        k, m = int(rng.integers(1, size[0] + 1)), int(rng.integers(1, size[1] + 1))
        kind = rng.integers(5)
        extra = ({"dtype": "e4m3", "is_transpose": True} if kind == 4 else
                 {"dtype": ("int8", "bf16", "fp32", "bf16")[kind]})
        commands.append(Command("matmul", k=k, m=m, n=n, tile_position=position,
                                tile_size=size, **extra))
    return commands


def test_stepped_model_equals_the_concurrent_recurrence(seed):
    """Without idle cycles or backpressure the stepped model (which takes the moving beats
    as the host packs them, several matmuls per beat) gives the closed recurrence's
    stamps, on programs whose matmuls overlap."""
    rng = np.random.default_rng(seed)
    overlapping = 0
    for _ in range(200):
        rows, cols = (int(x) for x in rng.choice([4, 8], 2))
        commands = _random_tiled_program(rng, rows, cols)
        closed = command_schedule(rows, cols, commands)
        assert command_schedule(rows, cols, commands, offer=lambda s, c: True) == closed
        overlapping += any(len(beat) > 1 for beat in moving_beats(rows, cols, commands))
    assert overlapping > 20


def test_tiled_schedule_is_command_schedule_for_commands(seed):
    """The two recurrences are one: tiled_schedule's per-cycle issues are command_schedule's
    per-column ones with every pass."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        commands = _random_tiled_program(rng, 8, 8)
        ops = [TileOp("read", n=c.n) if c.op == "read" else TileOp(
            k=c.k, n=c.n, tile_position=c.tile_position, tile_size=c.tile_size,
            dtype=c.dtype, is_transpose=c.is_transpose) for c in commands]
        for mine, theirs in zip(command_schedule(8, 8, commands), tiled_schedule(8, 8, ops),
                                strict=True):
            assert (mine.accept, mine.loads, mine.results) == (
                theirs.accept, theirs.loads, theirs.results)
            assert mine.issues == theirs.issues[::len(theirs.issues) // len(mine.issues)]


def test_packed_beats_by_hand():
    # 4 x 4 array, L = 8: two quarter tiles on the diagonal; the second loads after the
    # first (cycles 3-4, one stationary port) and streams beside it; a FP32 matmul (four
    # passes per column) runs alone after both.
    commands = [Command("matmul", k=2, m=2, n=3, tile_position=(0, 0), tile_size=(2, 2)),
                Command("matmul", k=2, m=2, n=2, tile_position=(2, 2), tile_size=(2, 2)),
                Command("matmul", k=2, m=2, n=2, dtype="fp32", tile_position=(2, 0),
                        tile_size=(2, 2))]
    assert moving_beats(4, 4, commands) == [(0,), (0,), (0, 1), (1,), (2,), (2,)]
    first, second, third = command_schedule(4, 4, commands)
    assert (first.issues, second.issues) == ((3, 4, 5), (5, 6))
    assert third.issues == (7, 11)        # after both: it shares every lane


def test_a_load_into_other_cells_does_not_wait_for_their_buffers():
    # A long matmul in the top-left quarter, then short ones in each other quarter: each
    # cell has two buffers of its own, so the third short one loads while the long one
    # still streams (one buffer pair for the whole array would hold it back until the first
    # short one's last beat, after the long one's).
    commands = [Command("matmul", k=2, m=2, n=40, tile_position=(0, 0), tile_size=(2, 2))] + [
        Command("matmul", k=2, m=2, n=1, tile_position=position, tile_size=(2, 2))
        for position in ((2, 2), (2, 0), (0, 2))]
    long, _, _, third = command_schedule(4, 4, commands)
    assert third.load_end < long.last_issue
    stepped = command_schedule(4, 4, commands, result_ready=lambda cycle: True)
    assert stepped[3].loads == third.loads


def test_stamps_of_three_small_tiles_by_hand():
    # 4 x 4 array, L = 8. Op 0 in the top-left 2 x 2 tile; op 1 bottom-right (shares no
    # lane with op 0, so it streams at once); op 2 top-right shares rows with op 0 and
    # columns with op 1, so it waits for op 1's last beat (7).
    ops = [TileOp(k=2, n=3, tile_position=(0, 0), tile_size=(2, 2)),
           TileOp(k=2, n=3, tile_position=(2, 2), tile_size=(2, 2)),
           TileOp(k=2, n=3, tile_position=(0, 2), tile_size=(2, 2))]
    got = [(t.accept, t.loads, t.issues, t.results) for t in tiled_schedule(4, 4, ops)]
    assert got == [(0, (1, 2), (3, 4, 5), (11, 12, 13)),
                   (1, (3, 4), (5, 6, 7), (13, 14, 15)),
                   (2, (5, 6), (8, 9, 10), (16, 17, 18))]


def test_load_waits_for_a_free_weight_buffer_in_its_tile():
    # Three matmuls in one quarter tile: the third load needs the first's buffer, free the
    # cycle after the first's last beat; a matmul in another tile loads without waiting.
    quarter = {"tile_position": (0, 0), "tile_size": (2, 2)}
    ops = [TileOp(k=1, n=10, **quarter), TileOp(k=1, n=10, **quarter),
           TileOp(k=1, n=10, **quarter)]
    first, _, third = tiled_schedule(4, 4, ops)
    assert third.loads == (first.last_issue + 1,)
    other = tiled_schedule(4, 4, ops[:2] + [TileOp(k=1, n=10, tile_position=(2, 2),
                                                   tile_size=(2, 2))])[2]
    assert other.loads == (3,)


def test_fp32_takes_four_times_the_moving_beats():
    bf16, fp32 = tiled_schedule(8, 8, [TileOp(k=8, n=5)])[0], tiled_schedule(
        8, 8, [TileOp(k=8, n=5, dtype="fp32")])[0]
    assert len(fp32.issues) == 4 * len(bf16.issues) == 20
    # Each column's result leaves L = 16 cycles after its fourth pass.
    assert fp32.results == tuple(fp32.first_issue + 4 * c + 3 + 16 for c in range(5))
    transpose = tiled_schedule(8, 8, [TileOp(k=8, n=8, dtype="tf32", is_transpose=True)])[0]
    assert len(transpose.issues) == 16


def test_sixteen_quarter_tiles_beat_the_whole_array():
    # 16 x 16 array, K = 4 matmuls in 4 x 4 tiles, N = 512, issued so that consecutive
    # matmuls share no lane: at least 3.5x the MACs per cycle of the same matmuls untiled.
    tiled = [TileOp(k=4, n=512, tile_position=(4 * r, 4 * ((r + rnd) % 4)), tile_size=(4, 4))
             for rnd in range(4) for r in range(4)]
    whole = [TileOp(k=4, n=512)] * 16
    speedup = tiled_program_cycles(16, 16, whole) / tiled_program_cycles(16, 16, tiled)
    assert 3.5 <= speedup <= 4.0
    # Row tiles alone (whole columns) share the result lanes: no gain.
    rows_only = [TileOp(k=4, n=512, tile_position=(4 * (j % 4), 0), tile_size=(4, 16))
                 for j in range(16)]
    assert tiled_program_cycles(16, 16, rows_only) == tiled_program_cycles(16, 16, whole)


@pytest.mark.parametrize("kwargs,error,text", [
    ({"op": "load"}, ValueError, "op must be 'matmul' or 'read'"),
    ({"k": 0}, ValueError, "k must be a positive integer, not 0"),
    ({"dtype": "fp32", "moving_dtype": "bf16"}, TypeError, "tfloat32 and float32 pair only"),
    ({"dtype": "e4m3", "perf_mode": "double_row", "is_transpose": True}, ValueError,
     "is_transpose=True takes no perf_mode"),
    ({"dtype": "fp64"}, TypeError, "unsupported type"),
])
def test_bad_ops(kwargs, error, text):
    with pytest.raises(error, match=text):
        TileOp(**kwargs)


@pytest.mark.parametrize("op,kwargs,text", [
    (TileOp(k=5, tile_position=(0, 0), tile_size=(4, 8)), {}, "K = 5 must be between 1 and 4"),
    (TileOp(tile_position=(0, 0), tile_size=(2, 8)), {"target": "trn1"},
     "tile row size must be one of 8, 4 on an array of 8 rows on trn1"),
    (TileOp(dtype="e4m3", perf_mode="double_row", tile_position=(0, 4), tile_size=(8, 4)), {},
     "does not combine with column tiling"),
    (TileOp(), {"target": "v9"}, "target must be one of"),
])
def test_bad_programs(op, kwargs, text):
    with pytest.raises(ValueError, match=text):
        tiled_schedule(8, 8, [op], **kwargs)


def test_bad_program_containers():
    with pytest.raises(TypeError, match="op 0 must be a systolica.golden.timing.TileOp"):
        tiled_schedule(8, 8, [Command()])
    with pytest.raises(ValueError, match="ops must hold at least one TileOp"):
        tiled_program_cycles(8, 8, [])
