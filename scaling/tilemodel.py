"""GEMMs folded onto the tile, timed with the validated cycle model (``golden.timing``).

Folding
-------
A GEMM ``out[M, N] = A[M, K] @ B[K, N]`` runs on a ``rows x cols`` tile as NKI code would write
it: the stationary operand is ``A.T`` (``[K, M]``), cut into K-slabs of ``rows`` partitions and
M-folds of ``cols`` columns; the moving operand ``B`` is cut into N-chunks of at most the PSUM
bank depth (512 on the real engine). For every M-fold and every N-chunk, the K-slabs run
back to back and accumulate into one PSUM bank. Each fold therefore issues the matmul shapes::

    for each N-chunk n_j:           # ceil(N / psum_depth) chunks, the last one the remainder
        for each K-slab k_i:        # ceil(K / rows) slabs, the last one the remainder
            (k_i, n_j)              # one nc_matmul: stationary [k_i, <=cols], moving [k_i, n_j]

and a tile that runs ``f`` folds runs that sequence ``f`` times, back to back. M does not change
the timing (it only decides how many folds there are).

Timing
------
:func:`systolica.golden.timing.program_cycles` gives the exact cycles of such a back-to-back
program, checked cycle for cycle against the RTL. Its recurrence is a max-plus linear system:
with ``e_j`` the cycle after load ``j`` completes, ``a_j`` the cycle after matmul ``j``'s last
moving beat and ``L = rows + cols`` the tile latency::

    e_j = max(e_{j-1}, a_{j-2}) + k_j            (shadow buffer j % 2 frees when j-2 has
                                                  sent its last moving beat)
    a_j = max(e_j, a_{j-1}) + n_j
    cycles = a_last + L,     with e_{-1} = 1 (the first command is taken in cycle 0)

so a whole program is a product of 3 x 3 max-plus matrices. Big workloads (GPT-3 on 100,000
chips) have programs of 10^8 matmuls; the product of a repeated block is computed by repeated
squaring, exactly, in O(log count) steps (:func:`periodic_program_cycles`). For a uniform
program (all matmuls ``(k, n)``) the longest path through that system has the closed form of
:func:`uniform_program_cycles`. Tests check both against ``program_cycles`` on many shapes.

SCALE-Sim compatibility
-----------------------
:func:`scalesim_ws_cycles` reproduces SCALE-Sim v3's weight-stationary compute cycles (no
stalls): each fold costs ``2R + C + T - 2`` cycles (weights fill ``R`` rows, ``T`` moving rows
stream, ``R - 1 + C - 1`` skew and drain, one output row), folds never overlap, and the report
counts from 0 (total minus one).
"""

import math
from functools import cache, lru_cache

from systolica.golden import check_positive, fold
from systolica.golden.timing import program_schedule, tile_latency

#: Cycles before the first load can begin: the first command is taken in cycle 0 and its
#: stationary load starts the cycle after (the recurrence below starts at e = 1).
COMMAND_CYCLES = 1

NEG = None  # max-plus "minus infinity"


def uniform_program_cycles(rows, cols, k, n, count):
    """Exact cycles of ``count`` back-to-back matmuls, each ``(k, n)``, in closed form.

    The first matmul takes one cycle to take its command, ``k`` to load and ``n`` to stream;
    every further one adds ``max(k, n)`` (its load hides behind the previous stream, or the
    stream waits for the load; a shadow buffer is free again as soon as the matmul two back
    has streamed, which never binds in a uniform program); the last results drain ``L``
    cycles later::

        L = rows + cols
        cycles = 1 + L + k + n + (count - 1) * max(k, n)

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    k : int
        Partitions of each stationary, ``1 <= k <= rows``.
    n : int
        Moving beats (columns) of each matmul, ``>= 1``.
    count : int
        Matmuls in the program, ``>= 1``.

    Returns
    -------
    int
        Cycles from cycle 0 to the last result, inclusive, equal to
        ``program_cycles(rows, cols, [(k, n)] * count)``.

    Raises
    ------
    ValueError
        If a size is not a positive integer or ``k > rows``.
    """
    latency = tile_latency(rows, cols)
    for name, value in (("k", k), ("n", n), ("count", count)):
        check_positive(name, value)
    if k > rows:
        raise ValueError(f"k is {k}, more than rows = {rows}")
    return COMMAND_CYCLES + latency + k + n + (count - 1) * max(k, n)


# ----- max-plus algebra on 3 x 3 matrices over (e_j, a_j, a_{j-1}) ------------------------------


def _mp_mul(x, y):
    """Max-plus product x (x) y of 3 x 3 matrices (tuples of tuples, NEG = -inf)."""
    out = []
    for i in range(3):
        row = []
        for j in range(3):
            best = NEG
            for m in range(3):
                a, b = x[i][m], y[m][j]
                if a is not NEG and b is not NEG and (best is NEG or a + b > best):
                    best = a + b
            row.append(best)
        out.append(tuple(row))
    return tuple(out)


_IDENTITY = ((0, NEG, NEG), (NEG, 0, NEG), (NEG, NEG, 0))


def _mp_pow(x, count):
    result = _IDENTITY
    while count:
        if count & 1:
            result = _mp_mul(x, result)
        x = _mp_mul(x, x)
        count >>= 1
    return result


def _step(k, n):
    """Matrix of one matmul (k, n): new (e, a, a_prev) from old (e, a, a_prev)."""
    return ((k, NEG, k),
            (k + n, n, k + n),
            (NEG, 0, NEG))


def _block(latency, runs):
    """Matrix of a sequence of runs ``(k, n, times)`` executed in order."""
    total = _IDENTITY
    for k, n, times in runs:
        if times:
            total = _mp_mul(_mp_pow(_step(k, n), times), total)
    return total


def _finish(latency, matrix):
    # Start state before matmul 0: e = COMMAND_CYCLES (the first load starts the cycle after
    # its command is taken in cycle 0), no earlier matmul (a = a_prev = -inf).
    a_last = matrix[1][0]
    return COMMAND_CYCLES + a_last + latency


def periodic_program_cycles(rows, cols, period, repeats=1):
    """Exact cycles of a program that repeats a block of runs ``repeats`` times.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    period : sequence of (int, int, int)
        Runs ``(k, n, times)``: ``times`` consecutive matmuls of shape ``(k, n)``, in order;
        ``1 <= k <= rows``, ``n >= 1``, ``times >= 0`` (at least one run with ``times >= 1``).
    repeats : int
        How often the whole block runs back to back, ``>= 1``.

    Returns
    -------
    int
        Cycles from cycle 0 to the last result inclusive; equal to ``program_cycles`` on the
        expanded list of shapes, computed in O(log(times) + log(repeats)) matrix products.

    Raises
    ------
    ValueError
        On a size that is not a positive integer, ``k > rows``, or an empty program.
    """
    latency = tile_latency(rows, cols)
    check_positive("repeats", repeats)
    if not any(times for _, _, times in period):
        raise ValueError("period must hold at least one matmul")
    for k, n, times in period:
        check_positive("k", k)
        check_positive("n", n)
        if not isinstance(times, int) or times < 0:
            raise ValueError(f"times must be a non-negative integer, not {times!r}")
        if k > rows:
            raise ValueError(f"k is {k}, more than rows = {rows}")
    return _finish(latency, _mp_pow(_block(latency, period), repeats))


def gemm_program(rows, psum_depth, k, n, folds=1):
    """The explicit list of ``(K, N)`` matmul shapes of ``folds`` folds (for tests, small cases).

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    for name, value in (("rows", rows), ("psum_depth", psum_depth), ("k", k), ("n", n),
                        ("folds", folds)):
        check_positive(name, value)
    one = [(k1 - k0, n1 - n0) for n0, n1 in fold(n, psum_depth) for k0, k1 in fold(k, rows)]
    return one * folds


@lru_cache(maxsize=65536)
def gemm_tile_cycles(rows, cols, psum_depth, k, n, folds=1):
    """Exact cycles for one tile to run ``folds`` folds of a GEMM with contraction ``k`` and
    ``n`` moving columns, back to back (equal to ``program_cycles`` on :func:`gemm_program`).

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    psum_depth : int
        Largest N of one matmul (PSUM bank depth, 512 on the real engine).
    k, n : int
        GEMM contraction length and moving free size (``>= 1``; any size, folded as described).
    folds : int
        Number of (M-fold) repetitions the tile runs.

    Returns
    -------
    int
        Cycles (tile clock).

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    for name, value in (("rows", rows), ("cols", cols), ("psum_depth", psum_depth), ("k", k),
                        ("n", n), ("folds", folds)):
        check_positive(name, value)
    latency = tile_latency(rows, cols)
    k_full, k_rem = divmod(k, rows)
    n_full, n_rem = divmod(n, psum_depth)
    slabs = [(rows, k_full), (k_rem, 1 if k_rem else 0)]

    def chunk(width):
        return _block(latency, [(kk, width, t) for kk, t in slabs if t])

    fold = _IDENTITY
    if n_full:
        fold = _mp_pow(chunk(psum_depth), n_full)
    if n_rem:
        fold = _mp_mul(chunk(n_rem), fold)
    # A uniform program (one K-slab size, one chunk width) has a closed form; use it as is.
    if (k_rem == 0 or k_full == 0) and (n_rem == 0 or n_full == 0):
        kk = rows if k_rem == 0 else k_rem
        nn = psum_depth if n_rem == 0 else n_rem
        count = max(k_full, 1 if k_rem else 0) * max(n_full, 1 if n_rem else 0) * folds
        return uniform_program_cycles(rows, cols, kk, nn, count)
    return _finish(latency, _mp_pow(fold, folds))


def split_gemm(m, k, n, count, cols, units):
    """How a GEMM (``count`` independent copies of ``[M, K] x [K, N]``) spreads over ``units``
    tiles that work in parallel (the cores of a chip).

    The ``count * ceil(M / cols)`` folds are dealt out round-robin; the busiest tile gets
    ``ceil(folds / units)``. With fewer folds than tiles, each fold's N is split over
    ``units // folds`` tiles instead.

    Returns
    -------
    tuple of (int, int)
        ``(folds on the busiest tile, moving columns per fold there)``.
    """
    for name, value in (("m", m), ("k", k), ("n", n), ("count", count), ("cols", cols),
                        ("units", units)):
        check_positive(name, value)
    folds = count * len(fold(m, cols))
    if folds >= units:
        return math.ceil(folds / units), n
    parts = min(units // folds, n)
    return 1, math.ceil(n / parts)


def scalesim_ws_cycles(rows, cols, m, k, n):
    """SCALE-Sim v3 weight-stationary cycles ("Total Cycles" of COMPUTE_REPORT.csv, no stalls).

    In SCALE-Sim's terms the filter (stationary) is ``Sr x Sc = K x M`` and ``T = N`` input rows
    stream through each fold: ``ceil(K / R) * ceil(M / C)`` folds of ``2R + C + T - 2`` cycles,
    minus one (SCALE-Sim counts the last cycle's index).

    Parameters
    ----------
    rows, cols : int
        Array height R and width C.
    m, k, n : int
        Filters (SCALE-Sim ``N`` of a GEMM topology, our stationary free size), window size
        (contraction), output pixels (SCALE-Sim ``M``, our moving free size).

    Returns
    -------
    int
        Cycles.

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    for name, value in (("rows", rows), ("cols", cols), ("m", m), ("k", k), ("n", n)):
        check_positive(name, value)
    folds = len(fold(k, rows)) * len(fold(m, cols))
    return folds * scalesim_ws_fold_cycles(rows, cols, n) - 1


def scalesim_ws_fold_cycles(rows, cols, n):
    """Cycles of one fold in SCALE-Sim v3's weight-stationary model: ``2R + C + T - 2`` for an
    ``R x C`` array and ``T = n`` moving rows (folds do not overlap), int. The peer formula's
    one home; :func:`scalesim_ws_cycles` and ``systolica bench`` use it."""
    return 2 * rows + cols + n - 2


def nki_matmul_cycles(m, n):
    """Cycles of one ``nc_matmul`` by the NKI cost model once the pipeline runs:
    ``max(min(64, N_stationary), N_moving)`` with ``N_stationary = m`` and ``N_moving = n``
    (AWS Neuron documentation, ``nki.isa.nc_matmul``, "Estimated instruction cost"), int. The
    peer formula's one home (``systolica bench`` compares the RTL with it)."""
    return max(min(64, m), n)


@cache
def double_row_macs_per_pe_per_cycle(rows, cols, n):
    """Steady-state MACs per PE per cycle of back-to-back FP8 double-row matmuls.

    Timed by the cycle model (``golden.timing``, equal to the RTL's stamps in
    ``tests/regression/rtl/test_rtl_types.py``, where a 16 x 16 tile measured 505.95
    MACs/cycle over a
    whole program of 8, 512 in steady state): K = 2 x rows, M = cols, N = ``n`` (the PSUM
    bank depth), between the first moving beats of the second and the last of 4 matmuls.
    Returns 2 (int) for every tile, or a float if a tile ever falls short of it.
    """
    schedule = program_schedule(rows, cols, [(2 * rows, n)] * 4, perf_mode="double_row")
    cycles = (schedule[-1].first_issue - schedule[1].first_issue) / 2
    rate = 2 * rows * n / (rows * cycles) if cycles else 0.0
    return int(rate) if rate == int(rate) else rate
