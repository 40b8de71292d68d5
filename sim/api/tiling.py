"""Any-size GEMM on the RTL tile: K-slabs accumulating in PSUM, M-folds and N-chunks.

A problem ``stationary[K, M] x moving[K, N] -> out[M, N]`` (``out = stationary.T @ moving``)
is cut as NKI code cuts it for the tensor engine:

- **M-folds**: column blocks ``stationary[:, m0:m0+cols]`` (the stationary free size);
- **N-chunks**: ``moving[:, n0:n0+512]`` (at most the PSUM depth, one PSUM entry per column);
- **K-slabs**: ``[k0:k0+rows]`` of both operands (``2 * rows`` in FP8 double-row mode,
  ``perf_mode="double_row"``). The first slab of an output block overwrites PSUM entries
  ``0..n-1``; every further slab accumulates into them (``accumulate=True``: one more FP32 RNE
  rounding per slab for float types, INT32 wrap for INT8).

Every slab of one (M-fold, N-chunk) output block runs back to back before the next block's
first slab overwrites the same PSUM entries, and the block's result is the PSUM read out after
its last slab. All blocks of a problem run in one :func:`~systolica.sim.run_program` call;
:func:`run_tiled_program` runs several problems as one program (one simulator start-up).

A **transpose** (``is_transpose=True``: ``stationary`` the data [P, F], ``moving`` the [P, P]
identity, the result ``data.T`` [F, P] bit for bit) is cut into blocks of at most ``rows``
partitions by ``cols`` elements, each its own transpose-mode matmul with the matching
identity block (a transpose takes no accumulation, and golden refuses a moving column without
its 1), block ``(k0:k1, m0:m1)`` filling ``out[m0:m1, k0:k1]``.

An **MX problem** (NeuronCore-v4's ``nc_matmul_mx``) has :class:`MxOperand` operands: x4
words [P, F, 4] with one E8M0 scale per 8 partitions. Its K is counted in partition rows P
(a contraction of 4 P elements), as the MX command counts it, so the cut above applies with
K-slabs of ``rows`` partitions (``rows`` a multiple of 8: whole scale groups per slab); each
slab is a :class:`~systolica.sim.MatmulMx` with an FP32 destination, the later ones
accumulating.

The golden counterpart, :func:`golden_tiled_matmul`, is the same slab-by-slab accumulation
(:func:`systolica.golden.nc_matmul` per slab, then ``accumulate=True``); the RTL must equal it
bit for bit. :func:`golden_tiled_matmuls` computes many problems' at once.
"""

import os
import resource
import socket
import time
from dataclasses import dataclass, replace

import numpy as np

from systolica.golden import (
    PSUM_ENTRIES,
    check_operands,
    check_positive,
    finest_tile,
    fold,
    format_of,
    fp32_add,
    gemm_folds,
    gemm_matmul_count,
    identity,
    max_k,
    nc_matmul_batch,
    nc_transpose,
    operand_formats,
    wrap_int32,
)
from systolica.golden.command import MX_GROUP_ROWS
from systolica.golden.mx import LANES, check_mx_operand, nc_matmul_mx
from systolica.golden.timing import TileOp
from systolica.sim.api.runs import Matmul, MatmulMx, run_program, tile_config


@dataclass(frozen=True, eq=False)
class MxOperand:
    """One operand of an MX problem: x4-packed MX elements along K with their E8M0 block
    scales (the layout of :func:`systolica.golden.nc_matmul_mx`'s operands, any size).

    Attributes
    ----------
    data : numpy.ndarray, [P, F, 4], ``ml_dtypes.float8_e4m3fn``, ``float8_e5m2`` or \
``float4_e2m1fn``
        Lane j of partition p at ``[p, f, j]``; the contraction runs over P and the lanes
        (K = 4 P elements). P a multiple of 8.
    scale : numpy.ndarray, [P // 8, F], uint8
        E8M0 bits (``ml_dtypes.float8_e8m0fnu`` is taken and kept as its bits):
        ``scale[g, f]`` applies to partitions ``8 g .. 8 g + 7`` of column f.

    ``shape`` is ``(P, F)`` and ``dtype`` the elements' type, so the tiling plan treats an
    MX operand as a [K, F] one whose K counts partition rows; ``operand[p0:p1, f0:f1]``
    (``p0``, ``p1`` multiples of 8) is the sub-operand, contiguous.

    Raises
    ------
    TypeError, ValueError
        As :func:`systolica.golden.mx.check_mx_operand` (one line).
    """

    data: np.ndarray
    scale: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "scale", check_mx_operand("data", self.data, self.scale))

    @property
    def shape(self):
        """``(P, F)``: partition rows (x4 words) and free size (tuple of int)."""
        return self.data.shape[:2]

    @property
    def dtype(self):
        """The elements' type (numpy.dtype)."""
        return self.data.dtype

    def __getitem__(self, index):
        rows, cols = index
        p0, p1, _ = rows.indices(self.shape[0])
        if p0 % MX_GROUP_ROWS or p1 % MX_GROUP_ROWS:
            raise ValueError(f"an MX operand is cut at whole scale groups of {MX_GROUP_ROWS} "
                             f"partitions, not [{p0}:{p1}]")
        groups = slice(p0 // MX_GROUP_ROWS, p1 // MX_GROUP_ROWS)
        return MxOperand(np.ascontiguousarray(self.data[rows, cols]),
                         np.ascontiguousarray(self.scale[groups, cols]))


def is_mx(problem):
    """Whether a ``(stationary, moving)`` problem is an MX one (:class:`MxOperand` operands)."""
    return isinstance(problem[0], MxOperand)


def take_columns(operand, f0, f1):
    """Columns ``f0:f1`` of a problem's operand (a contiguous numpy array, or an
    :class:`MxOperand`'s columns with their scales)."""
    if isinstance(operand, MxOperand):
        return operand[:, f0:f1]
    return np.ascontiguousarray(operand[:, f0:f1])


def problem_macs(stationary, moving):
    """Multiply-accumulates of one problem (int): ``K * M * N``, K in elements (an MX
    problem's 4 per partition row)."""
    (k, m), n = stationary.shape, moving.shape[1]
    return (LANES if isinstance(stationary, MxOperand) else 1) * k * m * n


@dataclass(frozen=True)
class Block:
    """One output block of a tiled problem: PSUM rows ``m0:m1`` x entries ``n0:n1``.

    Attributes
    ----------
    m0, m1, n0, n1 : int
        Element ranges of ``out[M, N]`` this block fills (``m1 - m0 <= cols``,
        ``n1 - n0 <= 512``).
    slabs : tuple of (int, int)
        The K ranges ``(k0, k1)`` accumulated into the block, in order (``k1 - k0 <= rows``).
    """

    m0: int
    m1: int
    n0: int
    n1: int
    slabs: tuple


@dataclass(frozen=True)
class TiledResult:
    """Result of :func:`run_tiled`.

    Attributes
    ----------
    out : numpy.ndarray, int32 (INT8) or float32 (BF16), shape [M, N]
        The RTL's result, reassembled from the last slab's PSUM of every block.
    golden : numpy.ndarray, same dtype and shape
        :func:`golden_tiled_matmul` of the same operands.
    mismatches : int
        PSUM words the testbench's scoreboard found different from the golden model, over
        every matmul of the program (each slab's partial sums included).
    differing : int
        Words of ``out`` whose bit pattern differs from ``golden`` (a second check, on the
        host, of the reassembled result).
    matmuls : int
        Matmuls the problem ran as.
    macs : int
        ``K * M * N`` multiply-accumulates of the problem.
    cycles : int
        Clock cycles of the program, end of reset to the last result taken.
    seconds : float
        Wall time of the simulation's clock loop, in seconds.
    run_seconds : float
        Wall time of the simulator run including its start-up, in seconds.
    build_seconds : float
        Wall time spent generating and building the tile for this call (0 when reused).
    rows, cols : int
        The tile the problem ran on.
    """

    out: np.ndarray
    golden: np.ndarray
    mismatches: int
    differing: int
    matmuls: int
    macs: int
    cycles: int
    seconds: float
    run_seconds: float
    build_seconds: float
    rows: int
    cols: int

    @property
    def exact(self):
        """True when the scoreboard saw no mismatch and ``out`` equals ``golden`` bit for bit."""
        return self.mismatches == 0 and self.differing == 0

    @property
    def macs_per_cycle(self):
        """Achieved MACs per clock cycle (float); the peak is ``rows * cols``."""
        return self.macs / self.cycles if self.cycles else 0.0


def _check_problem(stationary, moving, perf_mode=None, is_transpose=False):
    """Check one problem's operands (:func:`~systolica.golden.check_operands`), non-empty;
    a transpose's ``moving`` must be the [P, P] identity of the data's type; an MX problem
    two :class:`MxOperand` of the same P, no ``perf_mode`` or transpose."""
    if isinstance(stationary, MxOperand) or isinstance(moving, MxOperand):
        if not (isinstance(stationary, MxOperand) and isinstance(moving, MxOperand)):
            raise TypeError("an MX problem takes MxOperand for both stationary and moving")
        if perf_mode is not None or is_transpose:
            raise ValueError("an MX problem takes no perf_mode or is_transpose")
        if stationary.shape[0] != moving.shape[0]:
            raise ValueError(f"stationary and moving must share P; got {stationary.shape} and "
                             f"{moving.shape}")
        return
    check_operands(stationary, moving, perf_mode=perf_mode)
    for name, array in (("stationary", stationary), ("moving", moving)):
        if 0 in array.shape:
            raise ValueError(f"{name} must be a non-empty 2-D array, not shape {array.shape}")
    if is_transpose:
        if perf_mode is not None:
            raise ValueError(f"a transpose takes no perf_mode (got {perf_mode!r})")
        p = stationary.shape[0]
        want = identity(p, stationary.dtype)
        if moving.dtype != stationary.dtype or moving.shape != (p, p) or not np.array_equal(
                _bits(moving), _bits(want)):
            raise ValueError(f"a tiled transpose's moving must be the [{p}, {p}] identity in "
                             f"the data's type {stationary.dtype} (a full transpose of "
                             f"stationary [P, F]), not a {moving.dtype} array of shape "
                             f"{moving.shape} with other values")


def _bits(array):
    """``array``'s bit patterns as unsigned integers of its element width."""
    return array.view(f"u{array.dtype.itemsize}")


def plan(k, m, n, rows, cols, psum_depth=PSUM_ENTRIES, perf_mode=None, is_transpose=False):
    """The output blocks of a ``[K, M] x [K, N]`` problem on a ``rows x cols`` tile.

    Parameters
    ----------
    k, m, n : int
        Contraction length, stationary free size, moving free size (each >= 1).
    rows, cols : int
        Tile size in PEs.
    psum_depth : int
        Largest N of one matmul (PSUM entries), 512 on the tile.
    perf_mode : None or "double_row"
        Double-row K-slabs are ``2 * rows`` long.
    is_transpose : bool
        A transpose (``N == K``, the identity as moving): one block per K-slab and M-fold,
        its entries the slab's range, ``Block(m0, m1, k0, k1, ((k0, k1),))``.

    Returns
    -------
    list of Block
        M-folds outermost, then N-chunks (a transpose: K-slabs); each block lists its
        K-slabs in ascending order. The program runs ``sum(len(b.slabs) for b in blocks)``
        matmuls: ``ceil(K/slab) * ceil(M/cols) * ceil(N/psum_depth)`` with ``slab = rows``
        (``2 * rows`` double-row); a transpose ``ceil(K/rows) * ceil(M/cols)``.

    Raises
    ------
    ValueError
        If a size is not a positive integer, or a transpose's N is not its K.
    """
    if is_transpose:
        if n != k:
            raise ValueError(f"a transpose's moving is the [K, K] identity, so N must be K; "
                             f"got K = {k}, N = {n}")
        slabs, m_folds, _ = gemm_folds(k, m, n, rows, cols, psum_depth)
        return [Block(m0, m1, k0, k1, ((k0, k1),)) for m0, m1 in m_folds for k0, k1 in slabs]
    slabs, m_folds, n_chunks = gemm_folds(k, m, n, rows, cols, psum_depth, perf_mode)
    return [Block(m0, m1, n0, n1, slabs) for m0, m1 in m_folds for n0, n1 in n_chunks]


def tiled_jobs(stationary, moving, rows, cols, ftz=False, perf_mode=None, is_transpose=False):
    """The :class:`~systolica.sim.Matmul` program of a tiled problem, and its blocks.

    Parameters
    ----------
    stationary : numpy.ndarray, shape [K, M]
        int8 or a float operand type (:class:`~systolica.sim.Matmul`).
    moving : numpy.ndarray, shape [K, N]
        int8 with int8, any float type with a float stationary.
    rows, cols : int
        Tile size in PEs.
    ftz : bool
        Flush subnormals to zero (float only).
    perf_mode : None or "double_row"
        FP8 double-row matmuls (both operands e4m3/e5m2), K-slabs of ``2 * rows``.
    is_transpose : bool
        Transpose-mode matmuls: ``stationary`` the data [P, F], ``moving`` the [P, P]
        identity of its type; the result is ``data.T`` [F, P] in the type's PSUM element
        type (no ``ftz`` or ``perf_mode``).

    Returns
    -------
    (list of Matmul, list of Block)
        Jobs in program order (per block: its slabs, the first overwriting, the rest
        accumulating), and the blocks from :func:`plan`.

    Raises
    ------
    TypeError, ValueError
        On operands that are not non-empty 2-D arrays of a type pair the tile takes sharing
        K, bad sizes, or a transpose whose moving is not the identity.
    """
    _check_problem(stationary, moving, perf_mode, is_transpose)
    (k, m), n = stationary.shape, moving.shape[1]
    mx = isinstance(stationary, MxOperand)
    if mx:
        _check_mx_rows(rows)
    blocks = plan(k, m, n, rows, cols, perf_mode=perf_mode, is_transpose=is_transpose)
    jobs = []
    for b in blocks:
        for i, (k0, k1) in enumerate(b.slabs):
            if mx:
                s, v = stationary[k0:k1, b.m0:b.m1], moving[k0:k1, b.n0:b.n1]
                jobs.append(MatmulMx(s.data, v.data, s.scale, v.scale, accumulate=i > 0))
                continue
            jobs.append(Matmul(np.ascontiguousarray(stationary[k0:k1, b.m0:b.m1]),
                               np.ascontiguousarray(moving[k0:k1, b.n0:b.n1]),
                               accumulate=i > 0, ftz=ftz, perf_mode=perf_mode,
                               is_transpose=is_transpose))
    return jobs, blocks


def _check_mx_rows(rows):
    """An MX problem's K-slabs of ``rows`` partitions must be whole scale groups."""
    rows = check_positive("rows", rows)
    if rows % MX_GROUP_ROWS:
        raise ValueError(f"MX problems run in K-slabs of whole {MX_GROUP_ROWS}-partition scale "
                         f"groups: the tile's rows must be a multiple of {MX_GROUP_ROWS}, "
                         f"not {rows}")
    return rows


def golden_tiled_mx(stationary, moving, rows):
    """What the tile computes for an MX problem (two :class:`MxOperand`), bit for bit: per
    output block of at most 128 x 512, K-slabs of ``rows`` partitions in order, the first
    :func:`~systolica.golden.nc_matmul_mx` overwriting, the rest accumulating (FP32; M-folds
    and N-chunks do not change the result). Returns float32 [M, N]."""
    _check_problem(stationary, moving)
    rows = _check_mx_rows(rows)
    (k, m), n = stationary.shape, moving.shape[1]
    out = np.empty((m, n), np.float32)
    for b in plan(k, m, n, rows, min(m, 128)):
        psum = None
        for k0, k1 in b.slabs:
            s, v = stationary[k0:k1, b.m0:b.m1], moving[k0:k1, b.n0:b.n1]
            psum = nc_matmul_mx(s.data, v.data, s.scale, v.scale, psum=psum,
                                accumulate=psum is not None, rows=rows)
        out[b.m0:b.m1, b.n0:b.n1] = psum
    return out


def golden_tiled_matmul(stationary, moving, rows, ftz=False, perf_mode=None,
                        is_transpose=False):
    """What the tile must produce for a tiled problem, bit for bit.

    K-slabs of ``rows`` (``2 * rows`` double-row) accumulate in order: ``psum =
    nc_matmul(s[slab 0], m[slab 0])``, then ``psum = nc_matmul(s[slab j], m[slab j],
    psum=psum, accumulate=True)``. M-folds and N-chunks do not change the result (columns and
    PSUM entries are independent), so only ``rows`` matters.

    Parameters
    ----------
    stationary : numpy.ndarray, shape [K, M]
    moving : numpy.ndarray, shape [K, N]
        A type pair as :func:`tiled_jobs` takes.
    rows : int
        Partition rows of the tile.
    ftz : bool
        Flush subnormals to zero (float only).
    perf_mode : None or "double_row"
        As :func:`tiled_jobs`.
    is_transpose : bool
        As :func:`tiled_jobs`.

    Returns
    -------
    numpy.ndarray, shape [M, N]
        int32 for int8 operands (wrapping modulo 2**32), float32 for float types; a
        transpose: ``stationary.T`` in the type's PSUM element type.

    Raises
    ------
    TypeError, ValueError
        As :func:`tiled_jobs`, and ``ftz`` with int8.
    """
    return golden_tiled_matmuls([(stationary, moving)], rows, ftz, perf_mode,
                                is_transpose)[0]


def golden_tiled_transpose(data, rows):
    """``data.T`` as the tile's transposes give it, bit for bit: :func:`systolica.golden.
    nc_transpose` of every block of at most ``rows`` partitions by ``rows`` elements (a
    transpose computes nothing, so the cut does not change the result).

    Parameters
    ----------
    data : numpy.ndarray, an operand type, shape [P, F]
    rows : int
        Partition rows of the tile.

    Returns
    -------
    numpy.ndarray, shape [F, P], the type's PSUM element type
    """
    out = np.empty(data.shape[::-1], format_of(data.dtype).transpose_dtype)
    for k0, k1 in fold(data.shape[0], rows):
        for m0, m1 in fold(data.shape[1], rows):
            out[m0:m1, k0:k1] = nc_transpose(np.ascontiguousarray(data[k0:k1, m0:m1]),
                                             rows=rows)
    return out


def golden_tiled_matmuls(problems, rows, ftz=False, perf_mode=None, is_transpose=False):
    """:func:`golden_tiled_matmul` of every problem, bit for bit the same, computed per
    shape at once: the problems of one data type and shape are stacked and every K-slab of
    all of them is one :func:`~systolica.golden.nc_matmul_batch` call; the slabs' results are
    then added into PSUM in slab order (one :func:`~systolica.golden.fp32_add` per slab for
    float types, which is what ``accumulate=True`` does; INT8 sums wrap modulo 2**32 in any
    order).

    Parameters
    ----------
    problems : sequence of (numpy.ndarray, numpy.ndarray)
        ``(stationary [K, M], moving [K, N])`` pairs as :func:`golden_tiled_matmul` takes.
    rows : int
    ftz : bool
    perf_mode : None or "double_row"
    is_transpose : bool
        Every problem a transpose (:func:`golden_tiled_transpose` of its stationary).

    Returns
    -------
    list of numpy.ndarray, int32 or float32, shape [M, N] each, in the order of ``problems``
    (transposes: the PSUM element type)

    Raises
    ------
    TypeError, ValueError
        As :func:`golden_tiled_matmul`, for the first bad problem.
    """
    problems = list(problems)
    for stationary, moving in problems:
        _check_problem(stationary, moving, perf_mode, is_transpose)
    rows = check_positive("rows", rows)
    if any(is_mx(p) for p in problems):
        if ftz:
            raise ValueError("an MX problem takes no ftz")
        return [golden_tiled_mx(s, m, rows) if is_mx((s, m)) else
                golden_tiled_matmuls([(s, m)], rows, ftz, perf_mode, is_transpose)[0]
                for s, m in problems]
    if is_transpose:
        if ftz:
            raise ValueError("a transpose takes no ftz (nothing is computed)")
        return [golden_tiled_transpose(s, rows) for s, _m in problems]
    if ftz and any(s.dtype == np.int8 for s, _m in problems):
        raise ValueError("ftz applies to float matmuls only; int8 matmuls are exact "
                         "(use ftz=False)")
    groups = {}
    for i, (stationary, moving) in enumerate(problems):
        key = (stationary.dtype, moving.dtype, stationary.shape, moving.shape)
        groups.setdefault(key, []).append(i)
    outs = [None] * len(problems)
    for (dtype, _m_dtype, _s_shape, _m_shape), indices in groups.items():
        s = np.stack([problems[i][0] for i in indices])
        v = np.stack([problems[i][1] for i in indices])
        if dtype == np.int8:
            wide = np.einsum("pkm,pkn->pmn", s.astype(np.int64), v.astype(np.int64))
            result = wrap_int32(wide)
        else:
            result = _float_slabs(s, v, rows, ftz, perf_mode)
        for j, i in enumerate(indices):
            outs[i] = result[j]
    return outs


def _float_slabs(stationary, moving, rows, ftz, perf_mode):
    """Float [P, K, M] x [P, K, N] -> float32 [P, M, N], K-slab by K-slab into PSUM."""
    count, k, m = stationary.shape
    n = moving.shape[2]
    slab = max_k(rows, perf_mode)
    full = k // slab
    mode = {"ftz": True} if ftz else {}
    chain = dict(mode, perf_mode=perf_mode, rows=rows) if perf_mode else mode
    slabs = []
    if full:
        s = stationary[:, :full * slab].reshape(count * full, slab, m)
        v = moving[:, :full * slab].reshape(count * full, slab, n)
        slabs += list(np.moveaxis(nc_matmul_batch(s, v, **chain).reshape(count, full, m, n),
                                  1, 0))
    if k % slab:
        slabs.append(nc_matmul_batch(np.ascontiguousarray(stationary[:, full * slab:]),
                                     np.ascontiguousarray(moving[:, full * slab:]), **chain))
    psum = slabs[0]
    for part in slabs[1:]:
        psum = fp32_add(psum, part, **mode)
    return psum


@dataclass(frozen=True)
class ProgramOutcome:
    """Result of :func:`run_tiled_program`: several GEMM problems run as one tile program.
    The engine's workers send it back for each :class:`~systolica.sim.api.engine.TileProgram`
    (with its ``key``), and its ledger adds them up.

    Attributes
    ----------
    key : str
        The program's key in a run (``"bf16/L0/up/1"``; ``""`` from
        :func:`run_tiled_program` called directly).
    outs : list of numpy.ndarray, int32 (INT8) or float32 (float types), shape [M, N] each
        The RTL's result per problem, reassembled from the last slab's PSUM of every block.
    differing : list of int
        Per problem, words of ``outs[i]`` whose bit pattern differs from
        :func:`golden_tiled_matmul` of the same operands (the host's second check).
    mismatches : int
        PSUM words the testbench's scoreboard found different from the golden model, over
        every matmul of the program (each slab's partial sums included).
    matmuls : int
        Matmuls the program ran; every one's PSUM was checked by the scoreboard.
    words : int
        PSUM words the scoreboard checked (``sum(M * N)`` over the results read).
    macs : int
        ``K * M * N`` multiply-accumulates summed over the problems.
    cycles : int
        Clock cycles of the program, end of reset to the last result taken.
    build_seconds, sim_seconds, clock_seconds, seconds : float
        Wall time of generating and building the tile for this call (0 when reused), of
        the simulator run with its start-up, of its clock loop alone, and of the whole call
        (host side included), in seconds.
    worker : str
        ``host:pid`` of the process that ran it.
    host_cpu_seconds, sim_cpu_seconds : float
        CPU time of the call in the process that ran it (all its threads: stimulus, the
        golden model beside the simulator, checking) and in the simulator process it
        started, in seconds.
    rows, cols : int
        The tile the program ran on (0 where not recorded).
    """

    key: str
    outs: list
    differing: list
    mismatches: int
    matmuls: int
    words: int
    macs: int
    cycles: int
    build_seconds: float
    sim_seconds: float
    clock_seconds: float
    seconds: float
    worker: str
    host_cpu_seconds: float = 0.0
    sim_cpu_seconds: float = 0.0
    rows: int = 0
    cols: int = 0


def _children_cpu():
    """CPU seconds of this process's finished child processes (float)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def concurrent_placement(problems, rows, cols, perf_mode=None, is_transpose=False):
    """Where each problem of a program runs when small ones run at once: per problem, the
    ``(tile_position, tile_size)`` of its one matmul in the array's finest tiles in turn
    (:func:`systolica.golden.finest_tile`: consecutive ones share no PE row or column, so
    up to four are in flight), or None for a problem that takes more than one matmul or
    does not fit a finest tile (it runs on the whole array). FP8 double-row matmuls keep
    the whole array (their tiles must be full width), and so do MX ones (they take row
    tiles only)."""
    out, slot = [], 0
    for stationary, moving in problems:
        position, size = finest_tile(rows, cols, slot)
        (k, m), n = stationary.shape, moving.shape[1]
        fits = (perf_mode is None and not isinstance(stationary, MxOperand)
                and k <= size[0] and m <= size[1]
                and len(plan(k, m, n, rows, cols, is_transpose=is_transpose)) == 1
                and n <= PSUM_ENTRIES)
        out.append((position, size) if fits else None)
        slot += fits
    return out


def program_tile_ops(problems, rows, cols, perf_mode=None, is_transpose=False,
                     concurrent=False):
    """The :class:`~systolica.golden.timing.TileOp` of every matmul of a program of
    ``problems`` (as :func:`run_tiled_program` runs them), for
    :func:`systolica.golden.tiled_program_cycles`."""
    places = (concurrent_placement(problems, rows, cols, perf_mode, is_transpose)
              if concurrent else [None] * len(problems))
    ops = []
    for (stationary, moving), place in zip(problems, places, strict=True):
        (k, m), n = stationary.shape, moving.shape[1]
        tile = dict(zip(("tile_position", "tile_size"), place or (None, None), strict=True))
        for b in plan(k, m, n, rows, cols, perf_mode=perf_mode, is_transpose=is_transpose):
            ops += [TileOp(k=k1 - k0, n=b.n1 - b.n0, dtype=format_of(stationary.dtype).name,
                           moving_dtype=format_of(moving.dtype).name, perf_mode=perf_mode,
                           is_transpose=is_transpose, **tile) for k0, k1 in b.slabs]
    return ops


def run_tiled_program(problems, *, config=None, rows=None, cols=None, simulator="verilator",
                      ftz=False, build_root=None, waves=False, progress=None,
                      perf_mode=None, is_transpose=False, concurrent=False):
    """Run several ``stationary.T @ moving`` problems back to back as one tile program.

    Each problem is cut as :func:`plan` says; the problems' matmuls follow each other in one
    :func:`~systolica.sim.run_program` call (one simulator start-up for all of them). Every
    block's slabs run back to back and its result is the PSUM after its last slab, so the
    problems do not disturb each other.

    Parameters
    ----------
    problems : sequence of (numpy.ndarray, numpy.ndarray)
        ``(stationary [K, M], moving [K, N])`` pairs, each a type pair as :func:`tiled_jobs`
        takes (the data types may change from problem to problem).
    config, rows, cols, simulator, ftz, build_root, waves, progress, perf_mode
        As :func:`run_tiled`.
    is_transpose : bool
        Every problem a transpose (``stationary`` the data [P, F], ``moving`` the [P, P]
        identity; :func:`tiled_jobs`): its out is ``data.T`` in the type's PSUM element type
        and it counts no MACs.
    concurrent : bool
        Run each problem that is one matmul fitting the array's finest tile in such a tile,
        the tiles in turn (:func:`concurrent_placement`), so that up to four run at once
        (default False: every matmul on the whole array). The numbers do not change.

    Returns
    -------
    ProgramOutcome

    Raises
    ------
    TypeError, ValueError
        On bad operands or sizes, or no problems, before anything is built.
    SimulatorNotFoundError, BuildError, SimulationError
        As :func:`~systolica.sim.run_program`.
    """
    started, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    problems = list(problems)
    if not problems:
        raise ValueError("problems must hold at least one (stationary, moving) pair")
    if config is None:
        for stationary, moving in problems:
            _check_problem(stationary, moving, perf_mode, is_transpose)
    config = tile_config(config, rows, cols, {
        f.name for s, m in problems if config is None and not isinstance(s, MxOperand)
        for f in operand_formats(s.dtype, m.dtype, perf_mode=perf_mode)},
        perf_mode is not None, any(is_mx(p) for p in problems))
    rows, cols = config.rows, config.cols
    jobs, plans = [], []
    places = (concurrent_placement(problems, rows, cols, perf_mode, is_transpose)
              if concurrent else [None] * len(problems))
    for (stationary, moving), place in zip(problems, places, strict=True):
        more, blocks = tiled_jobs(stationary, moving, rows, cols, ftz, perf_mode, is_transpose)
        if place is not None:
            more = [replace(job, tile_position=place[0], tile_size=place[1]) for job in more]
        jobs += more
        plans.append(blocks)
    result = run_program(jobs, config=config, simulator=simulator, waves=waves,
                         build_root=build_root, progress=progress)
    outs, differing, index = [], [], 0
    goldens = golden_tiled_matmuls(problems, rows, ftz, perf_mode, is_transpose)
    for blocks, golden in zip(plans, goldens, strict=True):
        out = np.empty_like(golden)
        for b in blocks:
            index += len(b.slabs)
            psum = result.psums[index - 1]
            if psum.shape != (b.m1 - b.m0, b.n1 - b.n0):
                raise ValueError(f"the program returned a PSUM of shape {psum.shape} for "
                                 f"block [{b.m0}:{b.m1}, {b.n0}:{b.n1}]")
            out[b.m0:b.m1, b.n0:b.n1] = psum
        outs.append(out)
        differing.append(int(np.count_nonzero(_bits(out) != _bits(golden))))
    return ProgramOutcome(
        key="", outs=outs, differing=differing, mismatches=int(result.mismatches),
        matmuls=len(jobs), words=int(sum(p.size for p in result.psums)),
        macs=0 if is_transpose else sum(problem_macs(s, m) for s, m in problems),
        cycles=int(result.cycles), build_seconds=float(result.build.seconds),
        sim_seconds=float(result.run.seconds), clock_seconds=float(result.seconds),
        seconds=time.perf_counter() - started, worker=f"{socket.gethostname()}:{os.getpid()}",
        host_cpu_seconds=time.process_time() - cpu, sim_cpu_seconds=_children_cpu() - children,
        rows=int(rows), cols=int(cols))


def run_tiled(stationary, moving, *, config=None, rows=None, cols=None,
              simulator="verilator", ftz=False, build_root=None, waves=False, progress=None,
              perf_mode=None):
    """Run ``stationary.T @ moving`` of any size on the RTL tile and reassemble the result.

    Parameters
    ----------
    stationary : numpy.ndarray, shape [K, M]
        Any K, M >= 1 (weights: K input features, M output features); int8 or a float
        operand type (:class:`~systolica.sim.Matmul`).
    moving : numpy.ndarray, shape [K, N]
        Any N >= 1 (activations: one column per token); int8 with int8, any float type with
        a float stationary.
    config : TileConfig, optional
        The tile (size, type set, PSUM, queue).
    rows, cols : int, optional
        Without ``config``: the tile size in PEs, with the smallest type set holding the
        operands' types (as :func:`~systolica.sim.run_matmul`).
    simulator : {"verilator", "icarus"}
    ftz : bool
        Flush subnormals to zero (float only).
    perf_mode : None or "double_row"
        FP8 double-row (both operands e4m3/e5m2): K-slabs of ``2 * rows``.
    build_root : path, optional
        Build folder (default ``$SYSTOLICA_BUILD_DIR`` or ``./build``).
    waves : bool
        Write an FST waveform of the whole program.
    progress : callable, optional
        Passed to :func:`~systolica.sim.run_program`: ``progress(results, total, cycle)``
        while the simulator runs.

    Returns
    -------
    TiledResult
        The reassembled [M, N] result (int32 or float32), the golden result, the scoreboard's
        mismatch count and the host's count of differing words, matmuls, MACs, cycles and
        wall times. A wrong RTL result shows as ``mismatches > 0`` or ``differing > 0``.

    Raises
    ------
    TypeError, ValueError
        On bad operands or sizes, before anything is built.
    SimulatorNotFoundError, BuildError, SimulationError
        As :func:`~systolica.sim.run_program`.
    """
    result = run_tiled_program([(stationary, moving)], config=config, rows=rows, cols=cols,
                               simulator=simulator, ftz=ftz, build_root=build_root,
                               waves=waves, progress=progress, perf_mode=perf_mode)
    return TiledResult(out=result.outs[0], golden=golden_tiled_matmul(
                           stationary, moving, result.rows, ftz, perf_mode),
                       mismatches=result.mismatches, differing=result.differing[0],
                       matmuls=result.matmuls, macs=result.macs, cycles=result.cycles,
                       seconds=result.clock_seconds, run_seconds=result.sim_seconds,
                       build_seconds=result.build_seconds, rows=result.rows, cols=result.cols)


def matmul_count(k, m, n, rows, cols, psum_depth=PSUM_ENTRIES, perf_mode=None):
    """Matmuls a ``[K, M] x [K, N]`` problem runs as on a ``rows x cols`` tile (int; K-slabs
    of ``2 * rows`` with ``perf_mode="double_row"``); the rule is
    :func:`systolica.golden.gemm_matmul_count`'s."""
    return gemm_matmul_count(k, m, n, rows, cols, psum_depth, perf_mode)
