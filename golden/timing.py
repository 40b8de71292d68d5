"""Cycle model of the tile, exact for back-to-back matmuls when no stream stalls.

The model follows the RTL's rules (``systolica.hdl.tile``):

- a moving beat accepted in cycle ``t`` has its result offered in cycle ``t + rows + cols``
  (one input register, ``rows`` PE rows with the input skew folded in, ``cols - 1`` columns of
  travel plus the matching de-skew, one result register);
- stationary loads alternate between two buffers; load ``j`` sends ``K_j`` beats, one per
  cycle, into buffer ``j % 2`` once that buffer is free, i.e. once the last result of matmul
  ``j - 2`` (the previous user of the buffer) has been taken;
- matmul ``j``'s first moving beat is accepted once its load has completed (the cycle after
  the last stationary beat) and once matmul ``j - 1``'s beats are all in; then one beat per
  cycle.

Cycle 0 is the first cycle in which the streams may transfer after reset. All figures are in
clock cycles.
"""

from dataclasses import dataclass


def _check_positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


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
    _check_positive("rows", rows)
    _check_positive("cols", cols)
    return rows + cols


def matmul_cycles(rows, cols, n):
    """Cycles for one isolated matmul of ``n`` moving beats, first beat to last result.

    Counts from the cycle the first moving beat is accepted to the cycle the last result is
    taken, inclusive, with the stationary already loaded and no stall: ``n + rows + cols``.

    Raises
    ------
    ValueError
        If an argument is not a positive integer.
    """
    _check_positive("n", n)
    return n + tile_latency(rows, cols)


@dataclass(frozen=True)
class MatmulTiming:
    """Predicted cycle stamps of one matmul in a program (all in cycles from cycle 0).

    Attributes
    ----------
    load_start : int
        Cycle the first stationary beat is accepted.
    load_end : int
        Cycle the last stationary beat is accepted.
    first_accept : int
        Cycle the first moving beat is accepted.
    last_accept : int
        Cycle the last moving beat is accepted.
    last_result : int
        Cycle the last result is taken.
    """

    load_start: int
    load_end: int
    first_accept: int
    last_accept: int
    last_result: int


def program_schedule(rows, cols, shapes):
    """Predict every matmul's cycle stamps for a back-to-back program without stalls.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    shapes : sequence of (int, int)
        ``(K, N)`` of each matmul in order: stationary partition rows (1 <= K <= rows) and
        moving beats (N >= 1). M does not affect timing.

    Returns
    -------
    list of MatmulTiming

    Raises
    ------
    ValueError
        If a size is not a positive integer or K exceeds ``rows``.
    """
    latency = tile_latency(rows, cols)
    out = []
    for j, (k, n) in enumerate(shapes):
        _check_positive(f"K of matmul {j}", k)
        _check_positive(f"N of matmul {j}", n)
        if k > rows:
            raise ValueError(f"K of matmul {j} is {k}, more than rows = {rows}")
        load_start = 0 if j == 0 else out[j - 1].load_end + 1
        if j >= 2:
            load_start = max(load_start, out[j - 2].last_result + 1)
        load_end = load_start + k - 1
        first = load_end + 1 if j == 0 else max(load_end + 1, out[j - 1].last_accept + 1)
        last = first + n - 1
        out.append(MatmulTiming(load_start, load_end, first, last, last + latency))
    return out


def program_cycles(rows, cols, shapes):
    """Cycles a back-to-back program takes, from cycle 0 to its last result inclusive (int).

    See :func:`program_schedule` for the arguments and errors.
    """
    schedule = program_schedule(rows, cols, shapes)
    if not schedule:
        raise ValueError("shapes must hold at least one (K, N) pair")
    return schedule[-1].last_result + 1
