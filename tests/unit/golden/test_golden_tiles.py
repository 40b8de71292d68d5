"""Row and column tiles: the argument rules (each error), tiled results equal to slicing the
whole-array result, PSUM partitions of column tiles, and accumulation across row tiles."""

import ml_dtypes
import numpy as np
import pytest
from test_golden_bf16 import ref_matmul

from systolica.golden import (
    TILE_ERRORS,
    Command,
    Tile,
    check_tile,
    check_tile_operands,
    command_error,
    nc_matmul,
    psum_accumulate,
    tile_error,
    tile_sizes,
)

BF16 = ml_dtypes.bfloat16


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


def _bits(x):
    return np.asarray(x).view(np.uint32 if x.dtype == np.float32 else np.uint16)


def test_allowed_sizes():
    assert tile_sizes(128) == (128, 64, 32)
    assert tile_sizes(128, 2) == (128, 64)
    assert tile_sizes(16) == (16, 8, 4)
    assert tile_sizes(6) == (6, 3)
    assert tile_sizes(3) == (3,)


def test_default_is_the_whole_array():
    assert check_tile(None, None, rows=128, cols=64) == Tile(0, 0, 128, 64)
    assert check_tile((64, 32), (64, 32), rows=128, cols=128) == Tile(64, 32, 64, 32)
    assert check_tile([0, 96], [128, 32], rows=128, cols=128, target="trn2") == Tile(
        0, 96, 128, 32)


@pytest.mark.parametrize("position,size,kwargs,text", [
    ((0, 0), None, {}, "tile_position and tile_size must be given together"),
    (None, (64, 64), {}, "tile_position and tile_size must be given together"),
    ((0,), (64, 64), {}, r"tile_position must be a pair of integers \(row, column\), not"),
    ((0, 0), (64.0, 64), {}, "tile_size must be a pair of integers"),
    ((0, True), (64, 64), {}, "tile_position must be a pair of integers"),
    ((0, 0), (48, 128), {}, "tile row size must be one of 128, 64, 32 on an array of 128 rows"),
    ((0, 0), (128, 16), {}, "tile column size must be one of 128, 64, 32"),
    ((0, 0), (32, 128), {"target": "trn1"}, "tile row size must be one of 128, 64 .* on trn1"),
    ((0, 0), (128, 32), {"target": "inf2"}, "tile column size must be one of 128, 64"),
    ((32, 0), (64, 128), {}, "tile start row must be a multiple of the row size 64"),
    ((0, 128), (128, 32), {}, "tile start column must be a multiple of the column size 32 with "
                              "the tile inside the array's 128 columns, not 128"),
    ((-32, 0), (32, 128), {}, "tile start row must be a multiple"),
    ((0, 0), (64, 64), {"target": "trn9"}, "target must be one of trn1, inf2, trn2, trn3"),
])
def test_bad_tiles(position, size, kwargs, text):
    with pytest.raises(ValueError, match=text) as info:
        check_tile(position, size, rows=128, cols=128, **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("k,m,kwargs,text", [
    (65, 8, {"tile_size": (64, 128)}, "K = 65 must be between 1 and 64, the partition rows"),
    (8, 33, {"tile_size": (128, 32)}, r"M = 33 \(the stationary free size\) must be between 1 "
                                      "and the tile's 32 columns"),
    (65, 8, {"tile_size": (32, 128), "perf_mode": "double_row"},
     "K = 65 must be between 1 and 64, the partition rows of the tile x 2 in double_row"),
    (8, 8, {"tile_size": (128, 64), "perf_mode": "double_row"},
     "perf_mode='double_row' does not combine with column tiling"),
])
def test_sizes_must_fit_the_tile(k, m, kwargs, text):
    dtype = ml_dtypes.float8_e4m3 if "perf_mode" in kwargs else BF16
    with pytest.raises(ValueError, match=text):
        nc_matmul(np.zeros((k, m), dtype), np.zeros((k, 3), dtype), tile_position=(0, 0),
                  **kwargs)


def test_every_tile_gives_the_whole_array_result(seed):
    rng = np.random.default_rng(seed)
    for size in tile_sizes(128):
        s, m = _bf16(rng, (size, min(size, 5))), _bf16(rng, (size, 7))
        whole = _bits(nc_matmul(s, m))
        for row in range(0, 128, size):
            for col in range(0, 128, size):
                tiled = nc_matmul(s, m, tile_position=(row, col), tile_size=(size, size))
                assert np.array_equal(_bits(tiled), whole)


def test_column_tiles_fill_psum_like_slices_of_one_matmul(seed):
    rng = np.random.default_rng(seed)
    s, m = _bf16(rng, (20, 128)), _bf16(rng, (20, 9))
    whole = nc_matmul(s, m)
    for size in (64, 32):
        psum = np.full((128, 9), np.nan, np.float32)
        for col in range(0, 128, size):
            tile = check_tile((0, col), (128, size), rows=128, cols=128)
            part = nc_matmul(s[:, col:col + size], m, tile_position=(0, col),
                             tile_size=(128, size))
            psum[tile.partitions(size)] = part
        assert np.array_equal(_bits(psum), _bits(whole))


def test_partitions_of_a_tile():
    tile = Tile(64, 96, 64, 32)
    assert tile.partitions(5) == range(96, 101)
    with pytest.raises(ValueError, match="M = 33 must be between 1 and the tile's 32 columns"):
        tile.partitions(33)


def test_lanes_and_overlap():
    a, b, c = Tile(0, 0, 64, 64), Tile(64, 64, 64, 64), Tile(0, 64, 64, 64)
    assert not a.shares_lanes(b) and not a.overlaps(b)
    assert a.shares_lanes(c) and not a.overlaps(c)          # same rows, other columns
    assert Tile(0, 0, 128, 128).overlaps(b)


def test_row_tiles_accumulate_into_psum(seed):
    # K = 8 split over four 2-row tiles of an 8-row array; each tile's result is added to
    # PSUM with one more rounding: psum = ((t0 + t1) + t2) + t3, t_i its own k-ordered chain.
    rng = np.random.default_rng(seed)
    s, m = _bf16(rng, (8, 3)), _bf16(rng, (8, 4))
    s[1, 0] = m[5, 2] = np.inf
    psum = expected = None
    for tile_row in range(0, 8, 2):
        part = slice(tile_row, tile_row + 2)
        kwargs = {"tile_position": (tile_row, 0), "tile_size": (2, 8), "rows": 8}
        if psum is None:
            psum = nc_matmul(s[part], m[part], **kwargs)
        else:
            psum = nc_matmul(s[part], m[part], psum=psum, accumulate=True, **kwargs)
        expected = ref_matmul(_bits(s[part]).tolist(), _bits(m[part]).tolist(), expected,
                              expected is not None, False)
    assert _bits(psum).tolist() == expected
    first = nc_matmul(s[:2], m[:2])
    assert np.array_equal(_bits(psum_accumulate(first, nc_matmul(s[2:4], m[2:4]))),
                          _bits(nc_matmul(s[2:4], m[2:4], psum=first, accumulate=True,
                                          tile_position=(2, 0), tile_size=(2, 8), rows=8)))


def test_double_row_pairs_within_the_row_tile():
    rng = np.random.default_rng(3)
    fp8 = ml_dtypes.float8_e4m3
    s = np.clip(rng.standard_normal((64, 4)) * 8, -240, 240).astype(fp8)
    m = np.clip(rng.standard_normal((64, 5)) * 8, -240, 240).astype(fp8)
    tiled = nc_matmul(s, m, perf_mode="double_row", tile_position=(96, 0), tile_size=(32, 128))
    assert np.array_equal(_bits(tiled), _bits(nc_matmul(s, m, perf_mode="double_row", rows=32)))


def _raises(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("rows,cols", [(4, 4), (8, 6), (16, 16)])
def test_tile_error_is_the_rule_check_tile_raises(rows, cols):
    """Every start and size up to one past the array, K and M around the tile, with and
    without double-row: ``tile_error`` (the command word's codes) is None exactly where
    ``check_tile`` and ``check_tile_operands`` (the API's messages) accept, and each code
    names the first of them that refuses."""
    seen = set()
    for rs in range(rows + 2):
        for cs in range(cols + 2):
            for r in range(rows + 1):
                for c in range(cols + 1):
                    for k, m, mode in ((1, 1, None), (rs + 1, 1, None), (1, cs + 1, None),
                                       (2 * rs, 1, "double_row"), (2 * rs + 1, 1, "double_row")):
                        if not (1 <= k <= 2 * rows and 1 <= m <= cols):
                            continue    # K_RANGE / M_RANGE, checked before the tile
                        code = tile_error((r, c), (rs, cs), k, m, rows=rows, cols=cols,
                                          perf_mode=mode)
                        seen.add(code)
                        bad_tile = _raises(check_tile, (r, c), (rs, cs), rows=rows, cols=cols)
                        assert bad_tile == (code in ("TILE_SIZE", "TILE_POSITION")), (
                            r, c, rs, cs)
                        if not bad_tile:
                            bad = _raises(check_tile_operands, Tile(r, c, rs, cs), k, m,
                                          cols=cols, perf_mode=mode)
                            assert bad == (code is not None), (r, c, rs, cs, k, m, mode)
    assert seen == {None, *TILE_ERRORS}


def test_command_error_checks_the_tile_after_every_other_rule():
    """A tiled matmul's other errors come first (a bank out of range wins over a bad tile);
    a READ ignores the tile fields; a whole-array command has no tile error."""
    bad = {"tile_position": (1, 0), "tile_size": (2, 4)}
    args = {"rows": 4, "cols": 4}
    assert command_error(Command(k=1, m=1, **bad), **args) == "TILE_POSITION"
    assert command_error(Command(k=1, m=1, bank=9, **bad), **args) == "BANK_RANGE"
    assert command_error(Command(k=1, m=1, dtype="bf16", is_transpose=True, ftz=True, **bad),
                         **args) == "TRANSPOSE_FTZ"
    assert command_error(Command("read", **bad), **args) is None
    assert command_error(Command(k=2, m=4, tile_position=(2, 0), tile_size=(2, 4)),
                         **args) is None
    with pytest.raises(ValueError, match="given together"):
        Command(k=1, m=1, tile_position=(0, 0))
    with pytest.raises(ValueError, match="tile_size must be None or a pair"):
        Command(k=1, m=1, tile_position=(0, 0), tile_size=(4, -1))


@pytest.mark.parametrize("rows,cols", [(128, 128), (16, 16), (8, 4), (6, 8), (1, 1)])
def test_finest_tiles_in_turn_share_no_lane_with_those_just_before(rows, cols):
    """finest_tile: the smallest allowed tile, every position the rule accepts, and each
    slot shares no PE row or column with the min(row tiles, column tiles) - 1 before it."""
    from systolica.golden import finest_tile

    size = (min(tile_sizes(rows)), min(tile_sizes(cols)))
    ways = min(rows // size[0], cols // size[1])
    tiles = []
    for slot in range(40):
        position, got = finest_tile(rows, cols, slot)
        assert got == size
        tiles.append(check_tile(position, got, rows=rows, cols=cols))
        for before in tiles[max(0, slot - ways + 1):slot]:
            assert not tiles[-1].shares_lanes(before), (slot, tiles[-1], before)
    # every row tile and every column tile is used
    assert {t.row for t in tiles} == set(range(0, rows, size[0]))
    assert {t.col for t in tiles} == set(range(0, cols, size[1]))
