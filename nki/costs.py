"""Per-instruction costs of the NeuronCore engine model, from AWS's published figures.

Every figure here is either published (the constant names the document and section; the table
in ``docs/nki.md``, "Costs", lists them all) or a named assumption in :data:`ASSUMED` with its
value and the reason for it. Per-core figures (engine clocks, lanes, DMA engines and their
bandwidth, SBUF/PSUM sizes, HBM bandwidth) come from the scaling layer's hardware presets
(``scaling/presets/hw/<target>.toml``, tables ``[core.engines]`` and ``[chip]``): a target is a
preset, not a second copy of figures.

Units: compute-engine costs are in cycles of that engine's clock; DMA costs in seconds.
"""

from dataclasses import dataclass, field
from functools import cache, lru_cache
from math import ceil

from systolica.golden.timing import matmul_passes, program_schedule, tile_latency
from systolica.scaling.hardware import load_hardware, preset_names
from systolica.scaling.spec import SpecError

from .instructions import Instruction

#: ``MIN_II``: minimum initiation interval of a VectorE/ScalarE/GpSimd instruction, "roughly
#: 64 engine cycles" (AWS NKI docs, ``nki.isa`` reference, "Estimated instruction cost" of
#: ``activation``, ``tensor_scalar``, ``tensor_tensor``, ``tensor_copy``, ...).
MIN_II = 64
#: ``GPSIMD_START``: instruction start-up overhead on GpSimd, "roughly 150 engine cycles"
#: (``nki.isa.affine_select`` / ``iota`` / ``local_gather``, "Estimated instruction cost").
GPSIMD_START = 150
#: Static overhead added to a VectorE (and, by the same guide, ScalarE) instruction that
#: depends on the output of the instruction just before it on the same engine: "100 engine
#: cycles" (Trainium/Inferentia2 Architecture Guide for NKI, Vector Engine, Performance
#: Consideration, Cost Model).
DEPENDENT_OVERHEAD = 100
#: ``tensor_copy_dynamic_src`` / ``_dst``: ``MIN_II_DYNAMIC`` "roughly 600 engine cycles".
MIN_II_DYNAMIC = 600
#: ``MM_INIT_LATENCY``: the least initiation interval of back-to-back MultiplyMoving, "64
#: TensorE cycles on NeuronCore-v2" (architecture guide, Tensor Engine, Performance
#: Consideration); also the ``min(64, N_stationary)`` of ``nki.isa.nc_matmul``'s cost table.
MM_INIT_LATENCY = 64
#: FP32 matmul inputs cost "4x" the BF16/FP16/TF32/cFP8 interval (``nki.isa.nc_matmul``,
#: "Estimated instruction cost"; architecture guide, Tensor Engine); the onezero hints halve it
#: ("could lead to 2x better performance if ... float32", same docstring).
FP32_MATMUL_FACTOR = 4
FP32_ONEZERO_FACTOR = 2

#: Per-transfer DMA start latency: "descriptor setup, synchronization, and semaphore-to-start
#: latency (~1300 ns cross-engine)" (AWS NKI docs, "Guideline to Avoid Under-Utilizing DMA
#: Bandwidth", "Why Large Contiguous DMA Payloads Are Still Required"), in seconds. The
#: schedule starts moving a transfer's bytes this long after it could be issued; the queues
#: keep serving earlier transfers meanwhile.
DMA_START_LATENCY = 1.3e-6

#: Shared on-chip RAM ports of NeuronCore-v2: VectorE and GpSimd cannot access SBUF in
#: parallel; VectorE and ScalarE cannot access PSUM in parallel (Trainium/Inferentia2
#: Architecture Guide for NKI, Data Movement). Keyed by the preset's core name; the
#: Trainium2 guide publishes no such rule, so NeuronCore-v3 has none here.
SHARED_PORTS = {
    "NeuronCore-v2": (("sbuf", frozenset({"vector", "gpsimd"})),
                      ("psum", frozenset({"vector", "scalar"}))),
}


@dataclass(frozen=True)
class Assumption:
    """A figure AWS does not publish: its value, unit and why it was chosen."""

    value: float
    unit: str
    reason: str


#: Every unpublished figure the model uses, in one table (docs/nki.md, "Costs", copies it).
#: None is fitted on a figure that docs/nki.md reports as a check.
ASSUMED = {
    "dma_descriptor_overhead": Assumption(
        16e-9, "s",
        "time a DMA engine spends per contiguous chunk (descriptor) besides moving its bytes. "
        "AWS's DMA bandwidth guide gives only the shape of the curve (under 256 B per partition "
        "'severely overhead-bound', 256 B - 2 KiB 'improving', 2 KiB 'approaches peak', 4 KiB "
        "'fully amortizes'); 16 ns at trn1's 17 B/ns per engine gives 48 % at 256 B, 88 % at "
        "2 KiB and 94 % at 4 KiB"),
    "hbm_sharing_cores": Assumption(
        0, "cores",
        "a core gets the chip's HBM bandwidth divided by the chip's core count (0 means 'all "
        "cores of the chip'): kernels run SPMD on every core of a chip, and AWS publishes HBM "
        "bandwidth per chip only"),
    "gpsimd_elementwise": Assumption(
        1, "cycles per element",
        "GpSimd instructions without a published cost (tensor_tensor, tensor_scalar, "
        "tensor_copy on GpSimd) take GPSIMD_START + N cycles like iota and affine_select: "
        "8 processors x 16 FP32 lanes = 128 lanes (architecture guide, GpSimd Engine)"),
}


@dataclass(frozen=True)
class Target:
    """A NeuronCore's figures for the engine model (built from a hardware preset).

    Attributes
    ----------
    name : str
        Preset name (``"trn1"``, ``"trn2"``).
    core : str
        NeuronCore generation (``"NeuronCore-v2"``...).
    clocks_hz : dict of str -> float
        Clock of ``tensor``, ``vector``, ``scalar``, ``gpsimd`` in Hz.
    lanes : int
        Partitions processed per cycle by VectorE/ScalarE/GpSimd.
    rows, cols : int
        TensorE PE array (partition rows x stationary columns).
    dma_engines : int
        DMA queues per core.
    dma_engine_bandwidth : float
        Bytes/s of one DMA engine.
    hbm_bandwidth : float
        Bytes/s of HBM available to this core (chip bandwidth / sharing cores).
    sbuf_partition_bytes, psum_partition_bytes : float
        Bytes per partition.
    shared_ports : tuple of (str, frozenset)
        (memory, engines) pairs that cannot access that memory at the same time.
    """

    name: str
    core: str
    clocks_hz: dict
    lanes: int
    rows: int
    cols: int
    dma_engines: int
    dma_engine_bandwidth: float
    hbm_bandwidth: float
    sbuf_partition_bytes: float
    psum_partition_bytes: float
    shared_ports: tuple = field(default=())

    @property
    def peak_macs_per_second(self):
        """TensorE peak MACs/s at one MAC per PE per cycle (BF16/FP16/TF32/FP8 without
        double-row): ``rows * cols * tensor clock``."""
        return self.rows * self.cols * self.clocks_hz["tensor"]


def target_names():
    """Hardware presets that carry ``[core.engines]`` (sorted list of str)."""
    return [name for name in preset_names() if _engines_of(name) is not None]


def _engines_of(name):
    hw = load_hardware(name)
    return hw.core.engines if hw.core is not None else None


@cache
def load_target(name):
    """The :class:`Target` of hardware preset ``name`` (``"trn1"``, ``"trn2"``).

    Raises
    ------
    ValueError
        If ``name`` is no hardware preset with NeuronCore engine figures.
    """
    try:
        hw = load_hardware(name)
    except (SpecError, TypeError, OSError):
        hw = None
    engines = hw.core.engines if hw is not None and hw.core is not None else None
    if engines is None:
        raise ValueError(f"target must be one of {', '.join(target_names())} (hardware presets "
                         f"with [core.engines]), not {name!r}")
    sharing = ASSUMED["hbm_sharing_cores"].value or hw.chip.cores
    return Target(name=hw.name, core=hw.core.name, clocks_hz=dict(engines.clocks_hz),
                  lanes=engines.lanes, rows=hw.tile.rows, cols=hw.tile.cols,
                  dma_engines=engines.dma_engines,
                  dma_engine_bandwidth=engines.dma_engine_bandwidth,
                  hbm_bandwidth=hw.chip.hbm_bandwidth / sharing,
                  sbuf_partition_bytes=engines.sbuf_partition_bytes,
                  psum_partition_bytes=engines.psum_partition_bytes,
                  shared_ports=SHARED_PORTS.get(hw.core.name, ()))


# ----- TensorE ---------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def golden_matmul_interval(rows, cols, k, n, perf_mode=None):
    """Steady-state issue interval of back-to-back matmuls of one shape, from the tile's cycle
    model (:func:`systolica.golden.timing.program_schedule`): cycles between the last moving
    beats of two consecutive matmuls, ``max(load beats, n)`` (the next stationary loads one
    row per cycle in the background while the current moving tensor streams).

    Parameters
    ----------
    rows, cols : int
        PE array size.
    k : int
        Contraction size (partitions of stationary and moving), 1..rows (2 x rows with
        ``perf_mode="double_row"``).
    n : int
        Moving free size (columns streamed), >= 1.
    perf_mode : None or "double_row"

    Returns
    -------
    int
        TensorE cycles.
    """
    schedule = program_schedule(rows, cols, [(k, n)] * 3, perf_mode=perf_mode)
    return schedule[2].last_issue - schedule[1].last_issue


def published_matmul_cycles(instruction):
    """AWS's cost of one TensorE instruction among many of its shape back to back:
    ``nc_matmul`` ``max(min(64, N_stationary), N_moving)`` TensorE cycles, 4x for FP32
    inputs (``nki.isa.nc_matmul``, "Estimated instruction cost"); ``nc_transpose``
    ``max(P, min(64, F))`` (``nki.isa.nc_transpose``, same heading). Usable as
    ``tile_cycles``."""
    if instruction.opcode == "nc_transpose":
        return max(instruction.partitions, min(MM_INIT_LATENCY, instruction.elements))
    m, n = _mkn(instruction)[1:]
    return max(min(MM_INIT_LATENCY, m), n) * _fp32_factor(instruction)


def _mkn(instruction):
    """(K, M, N) of a TensorE instruction: ``params`` when given; an ``nc_transpose`` of
    ``[P, F]`` is data ``[P, F]`` stationary times a ``[P, P]`` identity moving."""
    p = instruction.params
    if instruction.opcode == "nc_transpose":
        defaults = (instruction.partitions, instruction.elements, instruction.partitions)
    else:
        defaults = (instruction.partitions, instruction.partitions, instruction.elements)
    return tuple(p.get(key) or default for key, default in zip("kmn", defaults, strict=True))


def _fp32_factor(instruction):
    """Passes over the moving data: :func:`systolica.golden.matmul_passes` (4 for a matmul
    with a float32 operand, 2 for a tfloat32/float32 transpose, else 1), halved to 2 for an
    FP32 matmul with a onezero hint."""
    p = instruction.params
    moving = p.get("dtype") or instruction.in_dtype
    stationary = p.get("stationary_dtype") or moving
    transpose = bool(p.get("is_transpose")) or instruction.opcode == "nc_transpose"
    try:
        passes = matmul_passes(stationary, moving, is_transpose=transpose)
    except (TypeError, ValueError):
        passes = 1      # a type the golden model does not know (synthetic traces): BF16 rate
    if passes == FP32_MATMUL_FACTOR and (p.get("is_stationary_onezero")
                                         or p.get("is_moving_onezero")):
        return FP32_ONEZERO_FACTOR
    return passes


def tensor_cycles(instruction, target, tile_cycles=None):
    """TensorE occupancy of a matmul-class instruction (``nc_matmul``, ``nc_transpose`` on
    TensorE) and the drain latency until its PSUM results are readable.

    The occupancy is ``tile_cycles(instruction)`` when given, else the tile's own steady-state
    interval (:func:`golden_matmul_interval`) times 4 for FP32 inputs (2 with a onezero
    hint). PE tiling (``tile_size``) does not shorten it: a matmul in a tile streams its N
    moving columns as one over the whole array does; tiles gain by running at the same time
    (:func:`systolica.nki.engines.schedule` overlaps instructions whose tiles share no PE row
    and no PE column, the rule of :func:`systolica.golden.timing.tiled_schedule`;
    :func:`tile_share` is that overlap for unscheduled sums). The latency is the
    tile's pipeline depth ``rows + cols`` (:func:`systolica.golden.timing.tile_latency`).

    Returns
    -------
    (float, int)
        (occupancy, latency) in TensorE cycles.
    """
    k, m, n = _mkn(instruction)
    p = instruction.params
    if instruction.opcode == "nc_matmul_mx":
        # Four MX MACs per PE per cycle: K = 4 P streams like a BF16 matmul of K = P
        # ("Trainium3 Architecture Guide for NKI", "Quad-MXFP8/MXFP4 Matmul Performance").
        k = instruction.partitions
    if tile_cycles is not None:
        cycles = tile_cycles(instruction)
    else:
        perf_mode = p.get("perf_mode") if p.get("perf_mode") == "double_row" else None
        k_max = target.rows * (2 if perf_mode == "double_row" else 1)
        cycles = golden_matmul_interval(target.rows, target.cols, min(max(k, 1), k_max),
                                        max(n, 1), perf_mode) * _fp32_factor(instruction)
    return cycles, tile_latency(target.rows, target.cols)


def tile_share(instruction, target):
    """Fraction of TensorE time a matmul-class instruction holds when the kernel keeps its
    tiles busy (float, 0 < share <= 1): ``1 / min(rows / row_size, cols / column_size)`` of
    its ``tile_size``, 1 without tiling. At most that many tiles of its size share no PE
    row and no PE column, the condition for matmuls to run at the same time
    (:meth:`systolica.golden.Tile.shares_lanes`, ``docs/numerics.md`` choice 9): two
    [64, 64] tiles on a 128 x 128 array, but a [64, 128] row tile runs alone.
    """
    size = instruction.params.get("tile_size")
    if not size:
        return 1.0
    return 1.0 / min(target.rows // size[0], target.cols // size[1])


# ----- VectorE, ScalarE, GpSimd ----------------------------------------------------------------

_BF16 = "bfloat16"
_HALF = ("bfloat16", "float16")


def _reads_memories(instruction):
    return [a.memory for a in instruction.reads]


def _vector_cycles(instruction):
    """Cycles before ``max(MIN_II, .)`` from the nki.isa docstrings' cost tables."""
    op = instruction.opcode
    n = instruction.elements
    p = instruction.params
    alu = p.get("op")
    bf16_io = instruction.in_dtype == _BF16 and instruction.out_dtype == _BF16
    if op == "tensor_tensor":
        memories = _reads_memories(instruction)
        if "psum" in memories and "sbuf" in memories:
            return n
        if bf16_io and alu in ("add", "multiply", "subtract"):
            return n
        return 2 * n
    if op == "tensor_reduce":
        return n / 2 if bf16_io and alu in ("add", "max", "maximum") else n
    if op == "memset":
        zero = p.get("value", None) == 0
        return n / 2 if zero and instruction.out_dtype in _HALF else n
    if op == "reciprocal":
        return 8 * n
    if op == "quantize_mx":
        # "four input elements per partition, per cycle" (Trainium3 Architecture Guide for
        # NKI, "MX data-type Quantization")
        return n / 4
    if op in ("tensor_tensor_scan",):
        return 2 * n
    if op == "scalar_tensor_tensor":
        fast = bf16_io and p.get("op0") == "subtract" and p.get("op1") == "multiply"
        return n if fast and n % 2 == 0 else 2 * n
    if op == "bn_aggr":
        return 13 * (n / 3)
    if op == "tensor_scalar_reduce":
        return max(MIN_II, n) + MIN_II
    if op == "tensor_copy_predicated":
        both_sbuf = all(m == "sbuf" for m in _reads_memories(instruction))
        return 2 * n if both_sbuf else n
    if op in ("tensor_copy_dynamic_src", "tensor_copy_dynamic_dst"):
        return max(MIN_II_DYNAMIC, n)
    # tensor_scalar, tensor_copy, nc_transpose (VectorE), bn_stats, select, range_select,
    # dropout, max8, nc_find_index8, nc_stream_shuffle, iota-free copies: N cycles
    # ("one input tile: roughly N cycles", architecture guide, Vector Engine, Cost Model).
    return n


def engine_cycles(instruction, target):
    """Occupancy of a VectorE/ScalarE/GpSimd instruction in that engine's cycles.

    The published formulas (``nki.isa`` docstrings, "Estimated instruction cost"):
    ``max(MIN_II, cost)`` with ``cost`` ``N``, ``2N``, ``N/2``, ``8N``... by opcode and data
    types (see :func:`_vector_cycles`); ScalarE ``activation`` ``max(MIN_II, N)`` plus
    ``MIN_II`` when it also reduces; GpSimd ``GPSIMD_START + N``. ``N`` is
    ``instruction.elements`` (elements per partition of the largest input); the partition count
    does not change the cost (128 lanes run in parallel).
    """
    n = instruction.elements
    engine = instruction.engine
    if engine == "gpsimd":
        return GPSIMD_START + n * ASSUMED["gpsimd_elementwise"].value
    if engine == "scalar":
        reduces = instruction.params.get("reduce_op") or instruction.params.get("reduce_res")
        if instruction.opcode in ("activation", "activation_reduce"):
            return max(MIN_II, n) + (MIN_II if reduces else 0)
        return max(MIN_II, n)
    return max(MIN_II, _vector_cycles(instruction))


# ----- DMA -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DmaPlan:
    """How a DMA transfer spreads over the queues.

    Attributes
    ----------
    queues : int
        DMA engines it uses (``min(dma_engines, descriptors)``).
    queue_seconds : float
        Time each of them is busy: its share of bytes at the engine bandwidth plus
        ``dma_descriptor_overhead`` per descriptor.
    hbm_bytes : int
        Bytes read from plus bytes written to HBM.
    """

    queues: int
    queue_seconds: float
    hbm_bytes: int


def _dma_memories(instruction):
    p = instruction.params
    src = p.get("src") or (instruction.reads[0].memory if instruction.reads else None)
    dst = p.get("dst") or (instruction.writes[0].memory if instruction.writes else None)
    return src, dst


def dma_plan(instruction, target):
    """Cost of a DMA instruction (``dma_copy``, ``load``/``store`` lowered to it).

    A transfer's ``descriptors`` contiguous chunks of ``chunk_bytes`` (``params``; by default
    one chunk per partition) are dealt over up to ``dma_engines`` queues (a transfer is spread
    over up to 16 DMA engines by default: AWS NKI docs, "Introduction to Direct Memory Access
    (DMA) with NKI"); the busiest queue gets ``ceil(descriptors / queues)``.
    """
    p = instruction.params
    nbytes = max(int(instruction.nbytes), 0)
    descriptors = int(p.get("descriptors") or max(instruction.partitions, 1))
    chunk = float(p.get("chunk_bytes") or (nbytes / descriptors))
    queues = max(1, min(target.dma_engines, descriptors))
    per_queue = ceil(descriptors / queues)
    seconds = per_queue * (chunk / target.dma_engine_bandwidth
                           + ASSUMED["dma_descriptor_overhead"].value)
    src, dst = _dma_memories(instruction)
    hbm = nbytes * ((src == "hbm") + (dst == "hbm"))
    return DmaPlan(queues, seconds, hbm)


def dma_efficiency(chunk_bytes, target):
    """Fraction of a DMA engine's peak that chunks of ``chunk_bytes`` reach (float 0..1)."""
    move = chunk_bytes / target.dma_engine_bandwidth
    return move / (move + ASSUMED["dma_descriptor_overhead"].value)


# ----- closed forms (shapes only) --------------------------------------------------------------

def matmul_seconds(m, k, n, target, *, dtype="bfloat16", perf_mode=None):
    """TensorE time of an ``[M, K] x [K, N]`` matmul tiled into 128 x 128 x 512 ``nc_matmul``
    instructions that run back to back (no DMA or other engine in the way), in seconds.

    A closed form of :func:`tensor_cycles` for issue 28's per-operation costs: the tiles are
    ``ceil(M / cols) * ceil(K / k_tile) * ceil(N / 512)`` instructions, each at the tile's
    interval for its (k, n), plus one drain.
    """
    for name, value in (("m", m), ("k", k), ("n", n)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    t = load_target(target) if isinstance(target, str) else target
    k_tile = t.rows * (2 if perf_mode == "double_row" else 1)
    n_tile = 512
    cycles = 0
    factor = FP32_MATMUL_FACTOR if dtype == "float32" else 1
    for kk in _tiles(k, k_tile):
        for nn in _tiles(n, n_tile):
            cycles += golden_matmul_interval(t.rows, t.cols, kk, nn, perf_mode) * factor
    cycles *= ceil(m / t.cols)
    cycles += tile_latency(t.rows, t.cols)
    return cycles / t.clocks_hz["tensor"]


def _tiles(size, tile):
    full, rest = divmod(size, tile)
    return [tile] * full + ([rest] if rest else [])


def elementwise_seconds(engine, elements, target, *, opcode="tensor_scalar", partitions=128,
                        in_dtype="float32", out_dtype="float32", params=None):
    """Time of one VectorE/ScalarE/GpSimd instruction over ``partitions x elements`` (seconds),
    from :func:`engine_cycles`; more than ``lanes`` partitions are that many instructions."""
    if engine not in ("vector", "scalar", "gpsimd"):
        raise ValueError(f"engine must be one of vector, scalar, gpsimd, not {engine!r}")
    t = load_target(target) if isinstance(target, str) else target
    ins = Instruction(0, engine, opcode, (), (), min(partitions, t.lanes), elements, in_dtype,
                      out_dtype, 0, dict(params or {}))
    return engine_cycles(ins, t) * ceil(partitions / t.lanes) / t.clocks_hz[engine]


#: The terms of :func:`engine_seconds`, in its order.
ENGINE_TERMS = ("tensor", "vector", "scalar", "gpsimd", "dma", "hbm")


def engine_seconds(instructions, target, *, tile_cycles=None):
    """Work per engine of an instruction list, without scheduling it (seconds).

    ``{"tensor", "vector", "scalar", "gpsimd"}``: sum of occupancies (the dependent-instruction
    overhead left out; a tiled TensorE instruction's times its :func:`tile_share`);
    ``"dma"``: queue time spread over all queues; ``"hbm"``: HBM bytes at the core's HBM
    bandwidth. The largest is a lower bound of the kernel's time (what
    :func:`systolica.nki.engines.schedule` returns when nothing stalls); issue 28's per-operation
    terms can be summed from it.
    """
    t = load_target(target) if isinstance(target, str) else target
    out = dict.fromkeys(ENGINE_TERMS, 0.0)
    for ins in instructions:
        if ins.engine == "dma":
            plan = dma_plan(ins, t)
            out["dma"] += plan.queue_seconds * plan.queues / t.dma_engines
            out["hbm"] += plan.hbm_bytes / t.hbm_bandwidth
        elif ins.engine == "tensor":
            out["tensor"] += (tensor_cycles(ins, t, tile_cycles)[0] * tile_share(ins, t)
                              / t.clocks_hz["tensor"])
        else:
            out[ins.engine] += engine_cycles(ins, t) / t.clocks_hz[ins.engine]
    return out


__all__ = ["ASSUMED", "Assumption", "DmaPlan", "ENGINE_TERMS", "Target", "dma_efficiency",
           "dma_plan",
           "elementwise_seconds", "engine_cycles", "engine_seconds", "golden_matmul_interval",
           "load_target", "matmul_seconds", "published_matmul_cycles", "target_names",
           "tensor_cycles", "tile_share"]
