"""Cycle model of the tile (no stalls).

The tile accepts one moving beat per cycle. A beat's result is offered ``rows + cols``
cycles after the beat was accepted (one input register, ``rows`` PE rows with the input
skew folded in, ``cols - 1`` columns of travel plus the matching de-skew).
"""


def tile_latency(rows, cols):
    """Cycles from a moving beat's acceptance to its result being offered.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs (partition rows x stationary columns), each >= 1.

    Returns
    -------
    int
        ``rows + cols`` cycles.

    Raises
    ------
    ValueError
        If ``rows`` or ``cols`` is not a positive integer.
    """
    for name, value in (("rows", rows), ("cols", cols)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return rows + cols


def matmul_cycles(rows, cols, n):
    """Cycles for one isolated matmul of ``n`` moving beats, first beat to last result.

    Counts from the cycle the first moving beat is accepted to the cycle the last result is
    taken, with the stationary already loaded and neither stream stalling:
    ``n - 1 + rows + cols + 1`` = ``n + rows + cols`` cycles.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    n : int
        Moving free size N (number of moving beats), >= 1.

    Returns
    -------
    int
        Cycles, inclusive of the first and last cycle.

    Raises
    ------
    ValueError
        If an argument is not a positive integer.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, not {n!r}")
    return n + tile_latency(rows, cols)
