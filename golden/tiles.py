"""Row and column tiles of the PE array: the ``tile_position`` / ``tile_size`` rules of
``nki.isa.nc_matmul``, defined here once (``docs/numerics.md``, "The tensor-engine
instruction").

Published (NKI API reference, ``nki.isa.nc_matmul``, "Tiling mode"): the 128 PE rows split
into 2 x 64 row tiles (NeuronCore-v2 and later) or 4 x 32 (NeuronCore-v3 and later), the
columns the same way; row and column sizes are set independently; a start row (column) is a
multiple of the row (column) size; the stationary tile must fit the tile; both arguments
must be given to enable tiling, and leaving both out means the whole array; FP8 double-row
mode does not combine with column tiling.

On an array of ``rows x cols`` PEs the model scales this: the allowed sizes of a dimension
of extent E are E, E / 2 and (where the target has them) E / 4, each only when it divides E.

Chosen here (nothing is published): a column tile's results go to the PSUM partitions of its
own PE columns (:meth:`Tile.partitions`), and two matmuls can be in flight together only if
their tiles share neither a PE row (the moving data of a row is one lane) nor a PE column
(the results of a column are one lane): :meth:`Tile.shares_lanes`.
"""

from dataclasses import dataclass

import numpy as np

from .formats import DOUBLE_ROW, max_k

__all__ = ["TILE_ERRORS", "TILE_SPLITS", "Tile", "check_tile", "check_tile_operands",
           "finest_tile", "tile_error",
           "tile_sizes"]

#: Most tiles a dimension splits into, per target (NKI API reference, ``nki.isa.nc_matmul``,
#: "Tiling mode"): 2 on NeuronCore-v2 (trn1, inf2), 4 from NeuronCore-v3 (trn2, trn3).
TILE_SPLITS = {"trn1": 2, "inf2": 2, "trn2": 4, "trn3": 4}


@dataclass(frozen=True)
class Tile:
    """A rectangle of the PE array that one matmul occupies.

    Attributes
    ----------
    row, col : int
        First PE row (partition) and first PE column.
    rows, cols : int
        Its size in PE rows and columns.
    """

    row: int
    col: int
    rows: int
    cols: int

    @property
    def row_range(self):
        """The PE rows it covers (range)."""
        return range(self.row, self.row + self.rows)

    @property
    def col_range(self):
        """The PE columns it covers (range)."""
        return range(self.col, self.col + self.cols)

    def overlaps(self, other):
        """Whether the two tiles share a PE (bool)."""
        return _meet(self.row_range, other.row_range) and _meet(self.col_range, other.col_range)

    def shares_lanes(self, other):
        """Whether the two tiles share a PE row or a PE column, so that matmuls in them take
        turns rather than run together (bool)."""
        return _meet(self.row_range, other.row_range) or _meet(self.col_range, other.col_range)

    def partitions(self, m):
        """PSUM partitions a matmul of stationary free size ``m`` in this tile writes:
        ``col .. col + m - 1`` (range). ``nc_matmul`` returns its [M, N] result; these are
        the PSUM rows it lands in."""
        if not 1 <= m <= self.cols:
            raise ValueError(f"M = {m} must be between 1 and the tile's {self.cols} columns")
        return range(self.col, self.col + m)


def _meet(a, b):
    return a.start < b.stop and b.start < a.stop


def tile_sizes(extent, splits=4):
    """Allowed tile sizes along one dimension of ``extent`` PEs (tuple of int, largest
    first): ``extent // s`` for s in 1, 2, 4 up to ``splits``, where s divides ``extent``."""
    return tuple(extent // s for s in (1, 2, 4) if s <= splits and extent % s == 0)


def finest_tile(rows, cols, slot, splits=4):
    """``(tile_position, tile_size)`` of matmul number ``slot`` (from 0) of a run of matmuls
    in the finest tiles of a ``rows x cols`` array (the smallest of :func:`tile_sizes` each
    way): row tile ``slot mod row tiles``, column tile ``slot mod column tiles`` (the
    diagonal of a square array), so that each shares no PE row or column with the
    ``min(row tiles, column tiles) - 1`` matmuls before it and as many run at once
    (``docs/numerics.md``, tiles choice 9)."""
    tile_rows, tile_cols = min(tile_sizes(rows, splits)), min(tile_sizes(cols, splits))
    r, c = slot % (rows // tile_rows), slot % (cols // tile_cols)
    return (r * tile_rows, c * tile_cols), (tile_rows, tile_cols)


def _pair(name, value):
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in value)):
        raise ValueError(f"{name} must be a pair of integers (row, column), not {value!r}")
    return int(value[0]), int(value[1])


def check_tile(tile_position, tile_size, *, rows, cols, target=None):
    """The tiling rule: check ``tile_position`` / ``tile_size`` on a ``rows x cols`` array and
    return the :class:`Tile` (the whole array when both are None).

    Parameters
    ----------
    tile_position : (int, int) or None
        ``(start_row, start_column)``: each a multiple of the tile's size along it, and the
        tile inside the array.
    tile_size : (int, int) or None
        ``(row_size, column_size)``: each one of :func:`tile_sizes` of that dimension.
    rows, cols : int
        The array's PE rows and columns (128, 128 on the NeuronCore).
    target : str or None
        A key of :data:`TILE_SPLITS` (``"trn1"`` allows halves only); None allows quarters
        (NeuronCore-v3 and later).

    Raises
    ------
    ValueError
        Naming the broken rule: only one argument given, not pairs of integers, a size not
        allowed on this target and array, a position that is not a multiple of the size or
        puts the tile outside the array, an unknown target.
    """
    if target is not None and target not in TILE_SPLITS:
        raise ValueError(f"target must be one of {', '.join(TILE_SPLITS)} or None, not "
                         f"{target!r}")
    splits = TILE_SPLITS.get(target, 4)
    if tile_position is None and tile_size is None:
        return Tile(0, 0, rows, cols)
    if tile_position is None or tile_size is None:
        raise ValueError("tile_position and tile_size must be given together (leave both "
                         "out for the whole array)")
    position, size = _pair("tile_position", tile_position), _pair("tile_size", tile_size)
    for axis, start, length, extent in (("row", position[0], size[0], rows),
                                        ("column", position[1], size[1], cols)):
        allowed = tile_sizes(extent, splits)
        if length not in allowed:
            where = f" on {target}" if target else ""
            raise ValueError(f"tile {axis} size must be one of {', '.join(map(str, allowed))} "
                             f"on an array of {extent} {axis}s{where}, not {length}")
        if not _start_ok(start, length, extent):
            raise ValueError(f"tile start {axis} must be a multiple of the {axis} size "
                             f"{length} with the tile inside the array's {extent} {axis}s, "
                             f"not {start}")
    return Tile(position[0], position[1], size[0], size[1])


def _start_ok(start, length, extent):
    """The position rule along one dimension: a multiple of the size, the tile inside."""
    return 0 <= start and start % length == 0 and start + length <= extent


def check_tile_operands(tile, k, m, *, cols, perf_mode=None):
    """The rule on a matmul's sizes in a tile: ``1 <= K <= tile.rows`` (``2 x tile.rows`` in
    double-row mode), ``1 <= M <= tile.cols``, and no double-row mode in a column tile
    (``tile.cols < cols``; NKI API reference, ``nki.isa.nc_matmul``, "Performance mode").

    Raises
    ------
    ValueError
        Naming the size or mode and what the tile allows.
    """
    limit = max_k(tile.rows, perf_mode)
    if not 1 <= k <= limit:
        raise ValueError(f"K = {k} must be between 1 and {limit}, the partition rows of the "
                         f"tile{' x 2 in double_row mode' if perf_mode == DOUBLE_ROW else ''}")
    if not 1 <= m <= tile.cols:
        raise ValueError(f"M = {m} (the stationary free size) must be between 1 and the "
                         f"tile's {tile.cols} columns")
    if perf_mode == DOUBLE_ROW and tile.cols < cols:
        raise ValueError("perf_mode='double_row' does not combine with column tiling "
                         f"(tile column size {tile.cols} < {cols})")


#: The tile command's rejection reasons, in the order :func:`tile_error` checks them (the
#: command word's ``ErrorCode`` names; :func:`~.command.command_error` checks them after
#: every other rule).
TILE_ERRORS = ("TILE_SIZE", "TILE_POSITION", "TILE_K_RANGE", "TILE_M_RANGE", "TILE_DOUBLE_ROW")


def tile_error(tile_position, tile_size, k, m, *, rows, cols, perf_mode=None):
    """The tiling rule as the tile's command check applies it to a matmul: which of
    :data:`TILE_ERRORS` a ``rows x cols`` array (quarters allowed, NeuronCore-v3) gives a
    matmul of ``k`` partition rows and free size ``m`` in the tile ``tile_position`` /
    ``tile_size`` (pairs of int, or both None for the whole array), or None.

    The same rule as :func:`check_tile` and :func:`check_tile_operands`, which raise a
    message instead: ``"TILE_SIZE"`` (a size not in :func:`tile_sizes`), ``"TILE_POSITION"``
    (a start not a multiple of its size, or the tile outside the array), ``"TILE_K_RANGE"``
    (K larger than the tile's rows, 2 x rows in double-row mode), ``"TILE_M_RANGE"`` (M
    larger than the tile's columns), ``"TILE_DOUBLE_ROW"`` (double-row in a column tile).
    K or M of 0, or larger than the array, is the command's ``K_RANGE`` / ``M_RANGE``,
    checked before. Only one of the pair None is ``"TILE_SIZE"`` (the command word cannot
    carry it: :class:`~.command.Command` refuses it).

    Returns
    -------
    str or None
    """
    if tile_position is None and tile_size is None:
        return None
    if tile_position is None or tile_size is None:
        return "TILE_SIZE"
    if any(length not in tile_sizes(extent)
           for length, extent in zip(tile_size, (rows, cols), strict=True)):
        return "TILE_SIZE"
    if not all(_start_ok(start, length, extent) for start, length, extent in zip(
            tile_position, tile_size, (rows, cols), strict=True)):
        return "TILE_POSITION"
    if k > max_k(tile_size[0], perf_mode):
        return "TILE_K_RANGE"
    if m > tile_size[1]:
        return "TILE_M_RANGE"
    if perf_mode == DOUBLE_ROW and tile_size[1] < cols:
        return "TILE_DOUBLE_ROW"
    return None
