"""Every matmul of all-MiniLM-L6-v2 on the RTL tile, as tile programs on an engine.

:func:`run_model` runs the FP32 reference (:func:`~systolica.workloads.minilm.encoder.encode`),
then one pass per precision in which the chosen layers' GEMMs run on the tile through
:class:`TileMatmuls`, and everything else (embeddings, LayerNorm, softmax, GELU, pooling,
biases, unchosen GEMMs) in numpy FP32 on the tile's outputs.

Roles on the tile (``nc_matmul(stationary[K, M], moving[K, N]) -> psum[M, N]``):

- **linear** ``q, k, v, o, up, down``: stationary = the weight ``W.T`` [K = in, M = out],
  moving = the activations ``x.T`` [K = in, N = tokens of all sentences]; the host transposes
  ``x`` and the result ``psum.T`` [tokens, out], then adds the bias.
- **scores** per sentence and head: stationary = ``K_h.T`` [K = 32, M = t keys], moving =
  ``Q_h.T`` [K = 32, N = t queries]; ``psum.T`` is ``Q_h K_h^T`` [queries, keys].
- **context** per sentence and head: stationary = ``V_h`` [K = t keys, M = 32], moving =
  ``P.T`` [K = t keys, N = t queries]; ``psum.T`` is ``P V_h`` [queries, 32].
- **transposes** (:data:`~systolica.workloads.minilm.weights.TRANSPOSES`): the attention
  operands' layouts ``Q_h.T``, ``K_h.T`` and ``P.T`` come from the tile in transpose mode
  (stationary = the BF16 data [K = t, M], moving = the [t, t] identity, ``psum`` = the data
  transposed, bit for bit), in their own programs before the GEMM they feed.

Precisions: **BF16** rounds both operands to BF16 (RNE), FP32 PSUM. **INT8** quantises the
linear GEMMs (:mod:`~systolica.workloads.minilm.quantize`: per-output-channel weight scales, per-
token or per-tensor activation scales, INT32 PSUM dequantised in FP32) and runs the attention
GEMMs in BF16 on the same tile (the data type is chosen per matmul), as deployed INT8 models
keep attention in a float type. **FP8** quantises the linear GEMMs to ``float8_e4m3``
(per-output-channel weight scales, per-token activation scales, saturating at +-240) and runs
them in FP8 double-row mode (K-slabs of ``2 * rows``, two MACs per PE per cycle); its
attention GEMMs run in BF16 as in the INT8 run. **MXFP8** (a tile with the ``mx`` type set)
quantises the linear GEMMs to OCP MXFP8 (``float8_e4m3fn`` x4 words, one E8M0 scale per 32
elements along K; :func:`~systolica.workloads.minilm.quantize.quantize_mx_operand`) and runs
them as NeuronCore-v4 MX matmuls (K-slabs of ``rows`` partition rows of four elements each,
four MACs per PE per cycle, FP32 PSUM, no dequantisation on the host); its attention GEMMs
run in BF16 as in the INT8 and FP8 runs.

Each GEMM becomes one or more :class:`~systolica.sim.api.engine.TileProgram` (a linear GEMM cut
into groups of M-folds; a layer's attention GEMMs for all sentences and heads grouped), sized
to about :data:`PROGRAM_CYCLES` cycles so that the simulator's start-up is a small part of a
program and a stage of the model has work for several workers. The same plan is used
whatever the engine, so results, cycles and counts do not depend on the number of workers.
"""

import functools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from systolica.golden import identity, max_k, program_cycles, tiled_program_cycles
from systolica.golden.command import MX_GROUP_ROWS
from systolica.golden.formats import format_of
from systolica.golden.mx import LANES
from systolica.sim.api.engine import SerialEngine, TileProgram, add_outcome
from systolica.sim.api.runs import tile_config
from systolica.sim.api.tiling import (
    concurrent_placement,
    golden_tiled_matmul,
    is_mx,
    plan,
    program_tile_ops,
    take_columns,
)
from systolica.workloads.minilm.encoder import Matmuls, encode
from systolica.workloads.minilm.quantize import (
    activation_scale,
    quantize_activation_fp8,
    quantize_activation_int8,
    quantize_mx_operand,
    quantize_weight_fp8,
    quantize_weight_int8,
    token_scales,
    token_scales_fp8,
)
from systolica.workloads.minilm.weights import (
    DEFAULT_SENTENCES,
    GEMMS,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    LAYERS,
    LINEAR_GEMMS,
    TRANSPOSE_OF,
    TRANSPOSES,
    load_tokenizer,
    load_weights,
    tokenize,
)

#: Accuracy targets: cosine similarity of each pooled embedding with the FP32 model's.
#: MXFP8's elements have FP8 e4m3's three mantissa bits (each operand element within 2^-4
#: of its value, as in the FP8 run) with a finer scale (per 32 elements rather than per
#: channel and token), so it gets the FP8 run's target.
TARGETS = {"bf16": 0.9999, "int8": 0.99, "fp8": 0.99, "mxfp8": 0.99}
#: The precision runs of ``make sim`` without ``--dtypes`` (plus ``"mxfp8"`` when the tile
#: is generated with the ``mx`` type set: :func:`default_precisions`).
DEFAULT_PRECISIONS = ("bf16", "int8", "fp8")
#: Precision runs whose linear GEMMs are MX matmuls (they need the tile's ``mx`` type set).
MX_PRECISIONS = ("mxfp8",)
#: Cycles a tile program aims at (the simulator starts in about 0.6 s; an 8 x 8 tile on
#: Verilator clocks about 40k-90k cycles/s).
PROGRAM_CYCLES = 200_000
BF16 = ml_dtypes.bfloat16


@functools.lru_cache(maxsize=4096)
def _model_cycles(rows, cols, shapes, perf_mode=None, mx=False):
    """The cycle model's cycles of back-to-back matmuls of ``shapes`` ((K, N) tuple; an MX
    matmul's K in partition rows)."""
    return program_cycles(rows, cols, list(shapes), perf_mode=perf_mode, mx=mx)


def check_precision(dtype):
    """Raise ``ValueError`` unless ``dtype`` names a precision run (:data:`TARGETS`)."""
    if dtype not in TARGETS:
        raise ValueError(f"precision must be one of {', '.join(TARGETS)}, not {dtype!r}")


#: The operand types each precision run issues on the tile (golden short names): the INT8,
#: FP8 and MXFP8 runs keep attention in BF16; the FP8 run's linear GEMMs are e4m3 in
#: double-row mode, the MXFP8 run's e4m3fn x4 words on the MX datapath (:data:`MX_PRECISIONS`).
PRECISION_TYPES = {"bf16": ("bf16",), "int8": ("int8", "bf16"), "fp8": ("e4m3", "bf16"),
                   "mxfp8": ("e4m3fn", "bf16")}


def default_precisions(mx):
    """The precision runs without ``--dtypes`` (tuple of str): :data:`DEFAULT_PRECISIONS`,
    and ``"mxfp8"`` too when the tile has the MX datapath (``mx``, bool: whoever generates
    the tile with ``mx`` wants to see it used)."""
    return DEFAULT_PRECISIONS + (MX_PRECISIONS if mx else ())


def mx_missing(precisions, config):
    """The one-line complaint when ``precisions`` hold an MX run and ``config`` (a
    TileConfig) has no MX datapath, else None."""
    wanted = [p for p in precisions if p in MX_PRECISIONS]
    if not wanted or config.mx:
        return None
    return (f"{', '.join(wanted)} runs MX matmuls, which the {config.types_name} tile has no "
            f"datapath for; generate it with the mx type set, e.g. --types all+mx (TYPES=all+mx)")


def model_config(precisions, rows=None, cols=None, config=None):
    """The :class:`~systolica.hdl.config.TileConfig` a run of the ``precisions`` uses:
    ``config`` if given, else the ``rows x cols`` tile generated for what they issue
    (:data:`PRECISION_TYPES`, FP8 double-row with ``"fp8"``, the MX datapath with
    ``"mxfp8"``): the three default precisions need ``int8+bf16+fp8-double-row``.

    Raises
    ------
    ValueError
        On an unknown precision or a bad size (from TileConfig), ``config`` with a size, an
        MX precision with a ``config`` lacking ``mx`` or a tile whose rows are not a
        multiple of 8 (its K-slabs must be whole scale groups).
    """
    for precision in precisions:
        check_precision(precision)
    dtypes = {t for precision in precisions for t in PRECISION_TYPES[precision]}
    mx = any(p in MX_PRECISIONS for p in precisions)
    config = tile_config(config, rows, cols, dtypes, "fp8" in precisions, mx)
    if missing := mx_missing(precisions, config):
        raise ValueError(missing)
    if mx and config.rows % MX_GROUP_ROWS:
        raise ValueError(f"mxfp8 runs K-slabs of whole {MX_GROUP_ROWS}-partition scale "
                         f"groups: rows must be a multiple of {MX_GROUP_ROWS}, not "
                         f"{config.rows}")
    return config


def tile_perf_mode(dtype, gemm):
    """The tile's ``perf_mode`` for ``gemm`` in the ``dtype`` precision run: ``"double_row"``
    for the FP8 run's linear GEMMs, else None (attention GEMMs and transposes run in BF16)."""
    return "double_row" if dtype == "fp8" and gemm in LINEAR_GEMMS else None


def tile_mx(dtype, gemm):
    """Whether ``gemm`` runs as MX matmuls in the ``dtype`` precision run (bool): the MXFP8
    run's linear GEMMs; their K is then counted in partition rows (4 elements each)."""
    return dtype in MX_PRECISIONS and gemm in LINEAR_GEMMS


def step_priority(layer, gemm):
    """The Dask priority of a GEMM's programs (int; higher runs first): the model's steps in
    order (layer, then q/k/v, scores, context, o, up, down), earliest highest. The
    precision passes run side by side on the workers; when one falls behind, its waiting
    programs go first, so the passes stay in step and the last steps of the run have the
    programs of both to spread over the workers. A transpose has its GEMM's priority."""
    return -(layer * len(GEMMS) + GEMMS.index(TRANSPOSE_OF.get(gemm, gemm)))


def split_programs(shapes, rows, cols, target=PROGRAM_CYCLES, perf_mode=None,
                   is_transpose=False):
    """How a GEMM's problems are grouped into tile programs.

    Parameters
    ----------
    shapes : list of (int, int, int)
        ``(k, m, n)`` per problem (stationary [k, m], moving [k, n]; an MX problem's k in
        partition rows); ``m`` may be 0 (nothing on the tile).
    rows, cols : int
        Tile size in PEs.
    target : int
        Cycles a program aims at.
    perf_mode : None or "double_row"
        The matmuls' mode (double-row K-slabs are ``2 * rows`` long).
    is_transpose : bool
        The problems are transposes (``n == k``; :func:`~systolica.sim.api.tiling.plan`).

    Returns
    -------
    list of list of (int, int, int)
        Per program, its units ``(problem, m0, m1)``: a single problem is cut into groups of
        whole M-folds, several problems are grouped whole, in order. Each program's matmuls
        stay within the PSUM depth per matmul and the groups are of about equal cycles.
    """
    units = []
    for i, (k, m, n) in enumerate(shapes):
        if m == 0:
            continue
        if len(shapes) == 1:
            units += [(i, b.m0, b.m1) for b in plan(k, m, n, rows, cols,
                                                    is_transpose=is_transpose) if b.n0 == 0]
        else:
            units.append((i, 0, m))
    slab = max_k(rows, perf_mode)

    def cost(unit):
        i, m0, m1 = unit
        k, _, n = shapes[i]
        if is_transpose:    # one matmul of a K-slab's entries per slab and M-fold
            return math.ceil(k / rows) * math.ceil((m1 - m0) / cols) * min(k, rows)
        return math.ceil(k / slab) * math.ceil((m1 - m0) / cols) * max(min(k, rows), n)

    costs = [cost(u) for u in units]
    total = sum(costs)
    if not units:
        return []
    count = min(len(units), max(1, round(total / target)))
    groups, current, done = [], [], 0
    for unit, c in zip(units, costs, strict=True):
        current.append(unit)
        done += c
        if done >= total * (len(groups) + 1) / count and len(groups) < count - 1:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def placement(problems, rows, cols, perf_mode=None, is_transpose=False):
    """Whether a program runs its small problems in the array's finest tiles, several at
    once (:func:`~systolica.sim.api.tiling.concurrent_placement`), and the cycle model's
    figure for it: ``(concurrent, cycles)``. It does when some problem fits a finest tile
    and the cycle model (:func:`~systolica.golden.tiled_program_cycles`) says the program
    takes no longer so: a kernel writer's choice, made by the model that the RTL follows
    cycle for cycle."""
    whole = _model_cycles(rows, cols, program_matmul_shapes(problems, rows, cols, perf_mode,
                                                            is_transpose), perf_mode,
                          any(is_mx(p) for p in problems))
    if not any(concurrent_placement(problems, rows, cols, perf_mode, is_transpose)):
        return False, whole
    tiled = tiled_program_cycles(rows, cols, program_tile_ops(problems, rows, cols, perf_mode,
                                                              is_transpose, True))
    return (True, tiled) if tiled <= whole else (False, whole)


def program_matmul_shapes(problems, rows, cols, perf_mode=None, is_transpose=False):
    """The ``(K, N)`` of every matmul of a program, in order (tuple), for the cycle model
    (an MX matmul's K in partition rows, as its command counts it)."""
    out = []
    for s, m in problems:
        k, mm = s.shape
        n = m.shape[1]
        for b in plan(k, mm, n, rows, cols, perf_mode=perf_mode, is_transpose=is_transpose):
            out += [(k1 - k0, b.n1 - b.n0) for k0, k1 in b.slabs]
    return tuple(out)


@dataclass
class GemmReport:
    """One GEMM of one layer in one precision run (all its programs together).

    Attributes
    ----------
    layer : int
    gemm : str
        One of :data:`~systolica.workloads.minilm.weights.GEMMS`, or a transpose's name
        (:data:`~systolica.workloads.minilm.weights.TRANSPOSES`: ``q.T``, ``k.T``, ``p.T``;
        no MACs).
    dtype : str
        The precision run, ``"bf16"``, ``"int8"``, ``"fp8"`` or ``"mxfp8"``.
    tile_dtype : str
        The operands' type on the tile (``"bf16"`` for attention in the INT8, FP8 and MXFP8
        runs, ``"e4m3"`` for the FP8 run's linear GEMMs, which run double-row, ``"e4m3fn"``
        for the MXFP8 run's, which run as MX matmuls).
    m, k, n : int
        Linear GEMMs: output features, input features (contraction), tokens. Attention: the
        first problem's (the others differ in the sentence length t).
    count : int
        Problems: 1 for a linear GEMM, sentences x heads for attention.
    shapes : list of (int, int, int)
        ``(m, k, n)`` of every problem (for the NeuronCore estimate).
    m_rtl : int
        Output rows computed on the RTL per problem (the rest by the golden model,
        bit-identical by construction; ``m_rtl == m`` unless ``rtl_folds`` limits it).
    programs, matmuls, cycles, model_cycles, macs : int
        Tile programs, matmuls, summed RTL clock cycles of the programs, the cycle model's
        figure for all the GEMM's matmuls as one program, and multiply-accumulates (an MX
        matmul's 4 per PE and moving column).
    mismatches, differing : int
        Scoreboard mismatches and host-side differing words (both must be 0).
    max_abs, rel_fro, cosine : float
        The GEMM's output (bias added, dequantised for INT8 and FP8; all problems flattened) against
        the FP32 reference model's: max absolute error, ``||y - ref||_F / ||ref||_F`` and
        cosine similarity.
    own_rel_fro : float
        Relative Frobenius error against an FP32 GEMM of this run's own inputs.
    seconds : float
        Worker-side task time summed over the GEMM's programs, in seconds.
    build_seconds, sim_seconds, clock_seconds : float
        Of ``seconds``: building the tile (0 when reused), the simulator processes (start-up
        included), and their clock loops alone, in seconds.
    concurrent : bool
        Its programs ran their small problems in the quarter tiles, up to four at once
        (:func:`placement`).
    """

    layer: int
    gemm: str
    dtype: str
    tile_dtype: str
    m: int
    k: int
    n: int
    count: int
    shapes: list
    m_rtl: int
    programs: int
    matmuls: int
    cycles: int
    model_cycles: int
    macs: int
    mismatches: int
    differing: int
    max_abs: float = 0.0
    rel_fro: float = 0.0
    cosine: float = 0.0
    own_rel_fro: float = 0.0
    seconds: float = 0.0
    build_seconds: float = 0.0
    sim_seconds: float = 0.0
    clock_seconds: float = 0.0
    concurrent: bool = False

    @property
    def shape_text(self):
        """``[M, K] x [K, N]``, for attention ``72 x [t, 32] x [32, t]``, for a transpose
        ``72 x [t,32].T`` (its data [P, F], str)."""
        if self.gemm in TRANSPOSE_OF:
            data = "[t,t]" if self.gemm == "p.T" else f"[t,{HEAD_DIM}]"
            return f"{self.count} x {data}.T"
        if self.gemm == "scores":
            return f"{self.count} x [t,{HEAD_DIM}]x[{HEAD_DIM},t]"
        if self.gemm == "context":
            return f"{self.count} x [t,t]x[t,{HEAD_DIM}]"
        return f"[{self.m}, {self.k}] x [{self.k}, {self.n}]"


@dataclass
class PrecisionRun:
    """A whole pass of the model in one precision.

    Attributes
    ----------
    dtype : str
    embeddings : numpy.ndarray, float32, shape [sentences, 384]
    cosines : numpy.ndarray, float64, shape [sentences]
        Cosine similarity of each sentence's embedding with the FP32 model's.
    similarity : numpy.ndarray, float64, shape [sentences, sentences]
        Pairwise cosine similarity of the embeddings.
    similarity_max_diff : float
        Max absolute difference of ``similarity`` from the FP32 model's matrix.
    neighbours : list of int
        Each sentence's nearest neighbour (index of the most similar other sentence).
    neighbours_unchanged : bool
        Whether every nearest neighbour equals the FP32 model's.
    gemms : list of GemmReport
    seconds : float
        Wall time of the pass, in seconds.
    """

    dtype: str
    embeddings: np.ndarray
    cosines: np.ndarray
    similarity: np.ndarray
    similarity_max_diff: float
    neighbours: list
    neighbours_unchanged: bool
    gemms: list = field(default_factory=list)
    seconds: float = 0.0

    def time_split(self, on_workers=False):
        """``(build, simulator, clock loop, host)`` seconds: building the tile (waiting for
        another worker's build of it included), the simulator processes (start-up included)
        and their clock loops alone, summed over the programs, and the host side.

        ``on_workers`` (bool): the programs ran on worker processes; host is then the
        workers' task time less build and simulator (stimulus, golden model, checking).
        Otherwise (one process, serial) it is the pass's wall time less build and
        simulator, the FP32 rest of the model included. (The wall time of a pass that
        shares the workers with other passes holds their programs too: not host time.)"""
        build = sum(g.build_seconds for g in self.gemms)
        sim = sum(g.sim_seconds for g in self.gemms)
        clock = sum(g.clock_seconds for g in self.gemms)
        tasks = sum(g.seconds for g in self.gemms)
        host = max(0.0, (tasks if on_workers else max(tasks, self.seconds)) - build - sim)
        return build, sim, clock, host

    @property
    def exact(self):
        """True when every RTL GEMM matched the golden model bit for bit."""
        return all(g.mismatches == 0 and g.differing == 0 for g in self.gemms)


def _dot(a, b):
    """Exactly rounded float64 dot product of two flattened arrays (math.fsum: the same bits
    on every machine and thread count, unlike BLAS's ``a @ b``)."""
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return math.fsum((a * b).tolist())


def _cosine(a, b):
    return float(_dot(a, b) / max(math.sqrt(_dot(a, a)) * math.sqrt(_dot(b, b)), 1e-300))


def _rel_fro(y, ref):
    d = np.asarray(y, np.float64) - np.asarray(ref, np.float64)
    return float(math.sqrt(_dot(d, d)) / max(math.sqrt(_dot(ref, ref)), 1e-300))


def similarity_matrix(embeddings):
    """Pairwise cosine similarity of sentence embeddings (float64 [S, S])."""
    e = np.asarray(embeddings, np.float64)
    return np.array([[_cosine(x, y) for y in e] for x in e]).reshape(len(e), len(e))


def nearest_neighbours(similarity):
    """Each row's most similar other row (list of int; -1 for a lone sentence)."""
    s = similarity.copy()
    np.fill_diagonal(s, -np.inf)
    if s.shape[0] < 2:
        return [-1] * s.shape[0]
    return [int(i) for i in s.argmax(axis=1)]


def _contraction(stationary):
    """A problem's K in elements (int): an MX operand's 4 per partition row."""
    return stationary.shape[0] * (LANES if is_mx((stationary, None)) else 1)


def _flat(arrays):
    return np.concatenate([np.asarray(a, np.float32).ravel() for a in arrays])


class TileMatmuls(Matmuls):
    """The model's matmuls on the RTL tile in one precision, through an engine.

    Parameters
    ----------
    dtype : {"bf16", "int8", "fp8", "mxfp8"}
    engine : systolica.sim.api.engine.Engine
    reference_trace : dict
        The FP32 run's trace (INT8 per-tensor scales are calibrated on it; errors are
        measured against it).
    selected : set of (int, str)
        ``(layer, gemm)`` pairs that run on the tile; the others run in FP32.
    config : systolica.hdl.config.TileConfig
    simulator : str
    build_root : str or None
    rtl_folds : int or None
        Only the first ``rtl_folds`` M-folds of each problem on the RTL, the rest from the
        golden model; None: everything; 0: nothing (no simulator).
    int8_activations : {"token", "tensor"}
    on_gemm : callable, optional
        Called with each finished :class:`GemmReport`.
    """

    def __init__(self, dtype, *, engine, reference_trace, selected, config, simulator,
                 build_root, rtl_folds, int8_activations, on_gemm=None):
        self.dtype, self.engine, self.trace = dtype, engine, reference_trace
        self.selected, self.config = set(selected), config
        self.rows, self.cols = config.rows, config.cols
        self.simulator, self.build_root, self.rtl_folds = simulator, build_root, rtl_folds
        self.int8_activations = int8_activations
        self.on_gemm = on_gemm
        self.reports = []

    # -- the three kinds of matmul --------------------------------------------------------

    def linear(self, layer, calls):
        fp32 = Matmuls.linear(self, layer, calls)
        jobs = []
        for (gemm, x, weight, bias), y32 in zip(calls, fp32, strict=True):
            if (layer, gemm) not in self.selected:
                continue
            if self.dtype == "bf16":
                stationary, moving, dequant = weight.T.astype(BF16), x.T.astype(BF16), None
            elif self.dtype == "fp8":
                wq, w_scale = quantize_weight_fp8(weight)
                x_scale = token_scales_fp8(x)
                stationary, moving = wq.T, quantize_activation_fp8(x, x_scale).T
                dequant = (w_scale[:, None] * x_scale.T).astype(np.float32)   # [out, T]
            elif self.dtype == "mxfp8":      # the scales are the matmul's: FP32 PSUM as is
                stationary, moving = quantize_mx_operand(weight.T), quantize_mx_operand(x.T)
                dequant = None
            else:
                wq, w_scale = quantize_weight_int8(weight)
                if self.int8_activations == "tensor":
                    x_scale = np.full((x.shape[0], 1), activation_scale(
                        self.trace[(layer, gemm)][0]), np.float32)
                else:
                    x_scale = token_scales(x)
                stationary = wq.T
                moving = quantize_activation_int8(x, x_scale).T
                dequant = (w_scale[:, None] * x_scale.T).astype(np.float32)   # [out, T]
            jobs.append((gemm, [(take_columns(stationary, 0, stationary.shape[1]),
                                 take_columns(moving, 0, moving.shape[1]))],
                         (dequant, bias, y32)))
        psums = self._run(layer, jobs)
        out = list(fp32)
        for (gemm, _problems, (dequant, bias, y32)), (psum,) in zip(jobs, psums, strict=True):
            psum = psum.astype(np.float32)
            if dequant is not None:
                psum = psum * dequant
            y = (psum.T + bias).astype(np.float32)
            self._errors(layer, gemm, [y], [self.trace[(layer, gemm)][1]], [y32])
            out[[c[0] for c in calls].index(gemm)] = y
        return out

    def scores(self, layer, queries, keys):
        # Q_h.T, K_h.T [32, t] from transposes on the tile; stationary K_h.T [32, t keys],
        # moving Q_h.T [32, t queries]: psum.T = Q_h K_h^T
        return self._attention(layer, "scores", queries, keys, lambda q_t, k_t: (k_t, q_t),
                               transposed=(True, True))

    def context(self, layer, probs, values):
        # P.T [t keys, t queries] from a transpose on the tile; stationary V_h [t keys, 32],
        # moving P.T: psum.T = P V_h
        return self._attention(layer, "context", probs, values, lambda p_t, v: (v, p_t),
                               transposed=(True, False))

    def _attention(self, layer, gemm, lefts, rights, roles, transposed):
        """One attention GEMM for every (sentence, head), in BF16 whatever the precision.
        The operands are rounded to BF16; those marked in ``transposed`` (left, right) are
        transposed on the tile first (:meth:`_transposes`); ``roles(left, right)`` then gives
        the (stationary, moving) of each problem."""
        fp32 = getattr(Matmuls, gemm)(self, layer, lefts, rights)
        if (layer, gemm) not in self.selected:
            return fp32
        sides = [[np.ascontiguousarray(x.astype(BF16)) for x in side]
                 for side in (lefts, rights)]
        todo = [(name, side, sides[side]) for name, side in zip(
            TRANSPOSES[gemm], [i for i in (0, 1) if transposed[i]], strict=True)]
        for (_name, side, _data), outs in zip(todo, self._transposes(layer, gemm, todo),
                                              strict=True):
            sides[side] = outs
        problems = [(np.ascontiguousarray(s), np.ascontiguousarray(m))
                    for s, m in (roles(a, b) for a, b in zip(*sides, strict=True))]
        (psums,) = self._run(layer, [(gemm, problems, None)])
        ys = [p.T.astype(np.float32) for p in psums]
        self._errors(layer, gemm, ys, self.trace[(layer, gemm)][1], fp32)
        return ys

    def _transposes(self, layer, gemm, jobs):
        """Transpose ``gemm``'s operands on the tile, all in one batch of programs.

        ``jobs`` lists ``(name, side, data)``: a transpose's name, the operand it is (0 left,
        1 right, as ``gemm``'s method takes them) and that operand's BF16 [P, F] arrays.
        Returns per job the [F, P] arrays (BF16, the data's bits); each job's report row
        compares them with the FP32 model's operand transposed."""
        outs = self._run(layer, [(name, [(x, identity(x.shape[0], x.dtype)) for x in data],
                                  None) for name, _side, data in jobs])
        refs = self.trace[(layer, gemm)][0]
        for (name, side, data), ys in zip(jobs, outs, strict=True):
            self._errors(layer, name, [y.astype(np.float32) for y in ys],
                         [r.T for r in refs[side]], [x.T.astype(np.float32) for x in data])
        return outs

    # -- programs ---------------------------------------------------------------------------

    def programs(self, layer, gemm, problems):
        """The tile programs of one GEMM's problems, and the units each one covers (see
        :func:`split_programs`); the part past ``rtl_folds`` is left to the golden model."""
        limit = None if self.rtl_folds is None else self.rtl_folds * self.cols
        shapes = [(s.shape[0], s.shape[1] if limit is None else min(s.shape[1], limit),
                   m.shape[1]) for s, m in problems]
        perf_mode = tile_perf_mode(self.dtype, gemm)
        transpose = gemm in TRANSPOSE_OF
        groups = split_programs(shapes, self.rows, self.cols, perf_mode=perf_mode,
                                is_transpose=transpose)
        out = []
        for j, units in enumerate(groups):
            parts = tuple((take_columns(problems[i][0], m0, m1), problems[i][1])
                          for i, m0, m1 in units)
            matmul_shapes = program_matmul_shapes(parts, self.rows, self.cols, perf_mode,
                                                  transpose)
            concurrent, cycles = placement(parts, self.rows, self.cols, perf_mode, transpose)
            out.append(TileProgram(
                key=f"{self.dtype}/L{layer}/{gemm}/{j}", problems=parts,
                config=self.config, simulator=self.simulator, build_root=self.build_root,
                matmuls=len(matmul_shapes), model_cycles=cycles, perf_mode=perf_mode,
                priority=step_priority(layer, gemm), is_transpose=transpose,
                concurrent=concurrent))
        return out, groups, shapes

    def _run(self, layer, jobs):
        """Run ``jobs`` (list of ``(gemm, problems, extra)``) as one batch of programs;
        return per job the list of [M, N] results (int32 or float32) per problem."""
        plans = [(gemm, problems, *self.programs(layer, gemm, problems))
                 for gemm, problems, _extra in jobs]
        batch = [p for _g, _pr, programs, _gr, _sh in plans for p in programs]
        outcomes = dict(zip([p.key for p in batch], self.engine.run(batch) if batch else [],
                            strict=True))
        results = []
        for gemm, problems, programs, groups, shapes in plans:
            perf_mode = tile_perf_mode(self.dtype, gemm)
            transpose = gemm in TRANSPOSE_OF
            outs = []
            for (s, m), (_k, m_rtl, n) in zip(problems, shapes, strict=True):
                full = s.shape[1]
                if m_rtl < full:
                    outs.append(golden_tiled_matmul(s, m, self.rows, perf_mode=perf_mode,
                                                    is_transpose=transpose))
                elif transpose:
                    outs.append(np.empty((full, n), format_of(s.dtype).transpose_dtype))
                else:
                    outs.append(np.empty((full, n), np.int32 if s.dtype == np.int8
                                         else np.float32))
            report = GemmReport(
                layer=layer, gemm=gemm, dtype=self.dtype,
                tile_dtype=format_of(problems[0][0].dtype).name,
                m=problems[0][0].shape[1], k=_contraction(problems[0][0]),
                n=problems[0][1].shape[1], count=len(problems),
                shapes=[(s.shape[1], _contraction(s), m.shape[1]) for s, m in problems],
                m_rtl=shapes[0][1], programs=len(programs), matmuls=0, cycles=0,
                model_cycles=tiled_program_cycles(self.rows, self.cols, [
                    op for p in programs for op in program_tile_ops(
                        p.problems, self.rows, self.cols, perf_mode, transpose,
                        p.concurrent)]) if programs else 0,
                macs=0, mismatches=0, differing=0,
                concurrent=any(p.concurrent for p in programs))
            for program, units in zip(programs, groups, strict=True):
                o = outcomes[program.key]
                for (i, m0, m1), out in zip(units, o.outs, strict=True):
                    outs[i][m0:m1] = out
                report.macs += o.macs
                add_outcome(report, o)
            self.reports.append(report)
            results.append(outs)
        return results

    def _errors(self, layer, gemm, ys, refs, own):
        report = next(r for r in reversed(self.reports) if (r.layer, r.gemm) == (layer, gemm))
        y, ref, own = _flat(ys), _flat(refs), _flat(own)
        report.max_abs = float(np.abs(y - ref).max())
        report.rel_fro = _rel_fro(y, ref)
        report.cosine = _cosine(y, ref)
        report.own_rel_fro = _rel_fro(y, own)
        if self.on_gemm:
            self.on_gemm(report)


@dataclass(frozen=True)
class PlannedProgram:
    """A tile program as the plan knows it before anything runs.

    Attributes
    ----------
    key : str
        The key its :class:`~systolica.sim.api.engine.TileProgram` will have.
    matmuls, model_cycles : int
        Its matmuls and the cycle model's cycles for it.
    """

    key: str
    matmuls: int
    model_cycles: int


def plan_programs(tokens, selected, dtypes, rows, cols, rtl_folds=None):
    """Every tile program a run will ask for, from the shapes alone (for the progress
    display and the ledger, which then accepts exactly these programs).

    Parameters
    ----------
    tokens : list of int
        Token positions per sentence.
    selected : collection of (int, str)
        ``(layer, gemm)`` pairs on the tile.
    dtypes : sequence of str
    rows, cols : int
    rtl_folds : int or None

    Returns
    -------
    list of PlannedProgram
    """
    total_t = sum(tokens)
    shapes = {g: [(HIDDEN, HIDDEN, total_t)] for g in ("q", "k", "v", "o")}
    shapes["up"] = [(HIDDEN, INTERMEDIATE, total_t)]
    shapes["down"] = [(INTERMEDIATE, HIDDEN, total_t)]
    shapes["scores"] = [(HEAD_DIM, t, t) for t in tokens for _ in range(HEADS)]
    shapes["context"] = [(t, HEAD_DIM, t) for t in tokens for _ in range(HEADS)]
    shapes["q.T"] = shapes["k.T"] = [(t, HEAD_DIM, t) for t in tokens for _ in range(HEADS)]
    shapes["p.T"] = [(t, t, t) for t in tokens for _ in range(HEADS)]
    limit = None if rtl_folds is None else rtl_folds * cols
    out = []
    for dtype in dtypes:
        for layer, step in selected:
            for gemm in TRANSPOSES.get(step, ()) + (step,):
                perf_mode, mx = tile_perf_mode(dtype, gemm), tile_mx(dtype, gemm)
                transpose = gemm in TRANSPOSE_OF
                sh = [(k // LANES if mx else k, m if limit is None else min(m, limit), n)
                      for k, m, n in shapes[gemm]]
                for j, units in enumerate(split_programs(sh, rows, cols, perf_mode=perf_mode,
                                                         is_transpose=transpose)):
                    mm = []
                    for i, m0, m1 in units:
                        k, _, n = sh[i]
                        for b in plan(k, m1 - m0, n, rows, cols, perf_mode=perf_mode,
                                      is_transpose=transpose):
                            mm += [(k1 - k0, b.n1 - b.n0) for k0, k1 in b.slabs]
                    out.append(PlannedProgram(f"{dtype}/L{layer}/{gemm}/{j}", len(mm),
                                              _model_cycles(rows, cols, tuple(mm), perf_mode,
                                                            mx)))
    return out


@dataclass
class ModelRun:
    """Result of :func:`run_model`.

    Attributes
    ----------
    sentences : list of str
    tokens : list of int
        Token positions per sentence ([CLS] and [SEP] included).
    selected : list of (int, str)
        The ``(layer, gemm)`` pairs that ran on the tile.
    reference : numpy.ndarray, float32, shape [sentences, 384]
        The FP32 model's embeddings.
    reference_similarity : numpy.ndarray, float64, shape [sentences, sentences]
    reference_neighbours : list of int
    runs : dict of str to PrecisionRun
        By data type (``"bf16"``, ``"int8"``, ``"fp8"``, ``"mxfp8"``).
    rows, cols : int
    simulator : str
    rtl_folds : int or None
    int8_activations : str
    engine : str
        Where the programs ran (the engine's description).
    ledger : systolica.sim.api.engine.Ledger
        Accounting of every program and matmul across workers.
    seconds : float
        Wall time of the whole run, in seconds.
    """

    sentences: list
    tokens: list
    selected: list
    reference: np.ndarray
    reference_similarity: np.ndarray
    reference_neighbours: list
    runs: dict
    rows: int
    cols: int
    simulator: str
    rtl_folds: int | None
    int8_activations: str
    engine: str
    ledger: object
    seconds: float

    @property
    def exact(self):
        """True when every RTL GEMM of every run matched the golden model bit for bit and
        the ledger accounted for every planned matmul exactly once."""
        return all(run.exact for run in self.runs.values()) and self.ledger.complete

    def meets_targets(self):
        """Per data type, True when every sentence's cosine reaches :data:`TARGETS` (and,
        for BF16, every nearest neighbour is unchanged)."""
        return {dtype: bool(run.cosines.min() >= TARGETS[dtype]
                            and (dtype != "bf16" or run.neighbours_unchanged))
                for dtype, run in self.runs.items()}


def parse_layers(text):
    """``"0"``, ``"0,3"`` or ``"all"`` -> sorted list of layer indices (ValueError if bad)."""
    if text.strip().lower() == "all":
        return list(range(LAYERS))
    try:
        layers = sorted({int(part) for part in text.split(",")})
    except ValueError:
        layers = []
    if not layers or not all(0 <= i < LAYERS for i in layers):
        raise ValueError(f"layers must be 'all' or comma-separated indices 0 to {LAYERS - 1}, "
                         f"not {text!r}")
    return layers


def run_precision(weights, ids, dtype, *, reference_embeddings, reference_trace, selected,
                  rows=None, cols=None, config=None, simulator="verilator", rtl_folds=None,
                  int8_activations="token", build_root=None, engine=None, on_gemm=None):
    """One pass of the model with the ``selected`` GEMMs on the RTL tile in ``dtype``.

    Parameters
    ----------
    weights : dict
        From :func:`~systolica.workloads.minilm.weights.load_weights`.
    ids : list of numpy.ndarray of int64
        From :func:`~systolica.workloads.minilm.weights.tokenize`.
    dtype : {"bf16", "int8", "fp8", "mxfp8"}
    reference_embeddings : numpy.ndarray, float32, shape [sentences, 384]
    reference_trace : dict
        The FP32 run's trace from :func:`~systolica.workloads.minilm.encoder.encode`.
    selected : collection of (int, str)
        ``(layer, gemm)`` pairs to run on the tile; the others run in FP32.
    rows, cols, config
        The tile: a TileConfig, or its size with the type set ``dtype`` needs
        (:func:`model_config`).
    simulator : {"verilator", "icarus"}
    rtl_folds : int or None
        See :class:`TileMatmuls`.
    int8_activations : {"token", "tensor"}
        INT8 activation scales: one per token computed from the activations at run time
        (default; keeps INT8 within 0.99 cosine through all six layers), or one per GEMM
        input tensor calibrated on the FP32 reference's activations for this batch.
    build_root : str, optional
    engine : systolica.sim.api.engine.Engine, optional
        Where the programs run (default: a :class:`~systolica.sim.api.engine.SerialEngine`).
    on_gemm : callable, optional
        Called with each finished :class:`GemmReport`.

    Returns
    -------
    PrecisionRun

    Raises
    ------
    ValueError
        On an unknown ``dtype`` or ``int8_activations``.
    SimulatorNotFoundError, BuildError, SimulationError
        From the simulator runs.
    """
    config = model_config([dtype], rows, cols, config)
    if int8_activations not in ("tensor", "token"):
        raise ValueError(f"int8_activations must be 'tensor' or 'token', not "
                         f"{int8_activations!r}")
    started = time.perf_counter()
    matmuls = TileMatmuls(dtype, engine=engine or SerialEngine(), reference_trace=reference_trace,
                          selected=selected, config=config, simulator=simulator,
                          build_root=None if build_root is None else str(build_root),
                          rtl_folds=rtl_folds, int8_activations=int8_activations,
                          on_gemm=on_gemm)
    embeddings, _ = encode(weights, ids, matmuls)
    cosines = np.array([_cosine(e, r) for e, r in zip(embeddings, reference_embeddings,
                                                       strict=True)])
    sim = similarity_matrix(embeddings)
    ref_sim = similarity_matrix(reference_embeddings)
    neighbours = nearest_neighbours(sim)
    return PrecisionRun(dtype=dtype, embeddings=embeddings, cosines=cosines, similarity=sim,
                        similarity_max_diff=float(np.abs(sim - ref_sim).max()),
                        neighbours=neighbours,
                        neighbours_unchanged=neighbours == nearest_neighbours(ref_sim),
                        gemms=matmuls.reports, seconds=time.perf_counter() - started)


def run_model(sentences=DEFAULT_SENTENCES, *, dtypes=("bf16", "int8"), layers=(0,),
              gemms=GEMMS, rows=None, cols=None, config=None, simulator="verilator",
              rtl_folds=None, int8_activations="token", build_root=None, engine=None,
              on_plan=None, on_gemm=None):
    """Encode ``sentences`` in FP32, then once per data type with chosen GEMMs on the tile.

    With a parallel engine the precision passes run at the same time (one client thread
    each), so their programs share the workers.

    Parameters
    ----------
    sentences : sequence of str
    dtypes : sequence of {"bf16", "int8", "fp8", "mxfp8"}
    layers : sequence of int
        Encoder layers (0 to 5) whose GEMMs run on the tile.
    gemms : sequence of str
        Which of each layer's GEMMs (:data:`~systolica.workloads.minilm.weights.GEMMS`) run on
        the tile.
    config : TileConfig, optional
        The tile all precision runs share (one build). Default: the tile of ``rows x cols``
        (8 x 8 when both are left out) generated for what the ``dtypes`` issue
        (:func:`model_config`).
    rows, cols : int, optional
        Tile size in PEs without ``config``.
    simulator : {"verilator", "icarus"}
    rtl_folds, int8_activations, build_root
        As :func:`run_precision`.
    engine : systolica.sim.api.engine.Engine, optional
        Default: a :class:`~systolica.sim.api.engine.SerialEngine`.
    on_plan : callable, optional
        Called with ``(programs, matmuls, cycles)`` of the whole run before it starts.
    on_gemm : callable, optional
        Called with each finished :class:`GemmReport` (from the pass's thread).

    Returns
    -------
    ModelRun

    Raises
    ------
    ModelNotFoundError, ModelFileError
        The model package is missing, or its files are corrupt.
    TextTooLongError, ValueError
        A sentence is longer than 512 positions, there are none, or an argument is bad.
    SimulatorNotFoundError, BuildError, SimulationError
        From the simulator runs.
    """
    started = time.perf_counter()
    for gemm in gemms:
        if gemm not in GEMMS:
            raise ValueError(f"unknown GEMM {gemm!r}; choose from {', '.join(GEMMS)}")
    if config is None and rows is None and cols is None:
        rows = cols = 8
    config = model_config(dtypes, rows, cols, config)
    rows, cols = config.rows, config.cols
    engine = engine or SerialEngine()
    weights = load_weights()
    ids = tokenize(sentences, load_tokenizer())
    reference, trace = encode(weights, ids)
    selected = [(layer, gemm) for layer in sorted(layers) for gemm in GEMMS if gemm in gemms]
    tokens = [len(i) for i in ids]
    planned = plan_programs(tokens, selected, dtypes, rows, cols, rtl_folds)
    engine.ledger.plan(planned)
    if on_plan:
        on_plan(len(planned), sum(p.matmuls for p in planned),
                sum(p.model_cycles for p in planned))

    def one(dtype):
        return run_precision(weights, ids, dtype, reference_embeddings=reference,
                             reference_trace=trace, selected=selected, config=config,
                             simulator=simulator, rtl_folds=rtl_folds,
                             int8_activations=int8_activations, build_root=build_root,
                             engine=engine, on_gemm=on_gemm)

    if engine.parallel and len(dtypes) > 1:
        pool = ThreadPoolExecutor(len(dtypes), thread_name_prefix="precision")
        try:
            futures = [pool.submit(one, d) for d in dtypes]
            runs = dict(zip(dtypes, [f.result() for f in futures], strict=True))
        except BaseException:
            engine.close()       # the other pass's programs stop with it
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    else:
        runs = {dtype: one(dtype) for dtype in dtypes}
    ref_sim = similarity_matrix(reference)
    return ModelRun(sentences=list(sentences), tokens=tokens, selected=selected,
                    reference=reference, reference_similarity=ref_sim,
                    reference_neighbours=nearest_neighbours(ref_sim), runs=runs, rows=rows,
                    cols=cols, simulator=simulator, rtl_folds=rtl_folds,
                    int8_activations=int8_activations, engine=engine.description,
                    ledger=engine.ledger, seconds=time.perf_counter() - started)

