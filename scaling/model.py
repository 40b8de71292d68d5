"""GEMM workloads on one chip (and the chip-level collectives of a GEMM step).

Transformers with Neuron-style tp/pp/dp, calibrated, live in :mod:`.llm`; this module times
GEMM lists (single GEMMs, CSVs, SCALE-Sim topologies) and keeps the chip-level step model.

Per GEMM (one chip): the folds are dealt over the chip's tiles (:func:`tilemodel.split_gemm`),
the busiest tile's cycles come from the validated timing model
(:func:`tilemodel.gemm_tile_cycles`) and become seconds at the tile clock. The roofline takes
the larger of that and the GEMM's HBM traffic over the chip's HBM bandwidth (bytes per data
type). GPUs (no tile data) use their datasheet peak as the compute roof.

Per step (cluster): compute time plus tensor-parallel AllReduces (Megatron: 2 per block
forward, 2 backward) plus, in training, the data-parallel gradient AllReduce; no overlap of
communication with compute is assumed. A ring AllReduce of ``S`` bytes over ``p`` members moves
``2 (p - 1) / p * S`` bytes through each member's slowest link. Inside an instance that is the
chip-to-chip link (not among the presets' figures: without ``link_bandwidth`` the intra-instance
part is left out and the estimate says so); across instances every chip gets its share of the
instance network, ``network_bandwidth / chips``. ``hierarchical`` clusters reduce inside the
instance first and ring across instances with ``S / g`` bytes per member (``g`` members per
instance).
"""

import math
from dataclasses import dataclass, field

from .hardware import DTYPE_BYTES
from .tilemodel import gemm_tile_cycles, scalesim_ws_cycles, split_gemm


@dataclass(frozen=True)
class GemmEstimate:
    """One GEMM on one chip (all figures for all ``repeat`` repetitions unless noted).

    Attributes
    ----------
    gemm : Gemm
    tile_cycles : int or None
        Cycles of the busiest tile for one repetition (None on a GPU).
    compute_s, memory_s, time_s : float
        Seconds: tile time, HBM time (bytes / bandwidth), and their maximum (the roofline).
    flop, bytes : float
        FLOP and HBM bytes.
    bound : str
        ``"compute"`` or ``"memory"``.
    intensity : float
        FLOP per byte.
    single_tile_cycles, scalesim_cycles : int or None
        One repetition of one copy on a single tile: our native cycles and SCALE-Sim v3's
        weight-stationary cycles for the same array (compatibility mode).
    """

    gemm: object
    tile_cycles: int | None
    compute_s: float
    memory_s: float
    time_s: float
    flop: float
    bytes: float
    bound: str
    intensity: float
    single_tile_cycles: int | None
    scalesim_cycles: int | None


@dataclass
class Estimate:
    """Result of :func:`estimate`. Times in seconds, rates in FLOP/s, sizes in bytes."""

    hardware: object
    workload: object
    dtype: str
    tp: int
    dp: int
    gemms: list
    compute_s: float
    tp_comm_s: float
    dp_comm_s: float
    step_s: float
    chip_peak: float
    achieved_flops: float
    mfu: float
    memory_bytes: float
    fits: bool | None
    notes: list = field(default_factory=list)
    scaling: list = field(default_factory=list)

    @property
    def chips(self):
        return self.tp * self.dp


def gemm_estimate(hw, gemm, dtype):
    """Roofline estimate of one :class:`~systolica.scaling.workloads.Gemm` on one chip."""
    nbytes = gemm.bytes_moved(DTYPE_BYTES[dtype]) * gemm.repeat
    memory_s = nbytes / hw.chip.hbm_bandwidth
    tile = hw.tile
    if tile is None:
        cycles = single = compat = None
        compute_s = gemm.flop / hw.chip_peak(dtype)
    else:
        folds, n = split_gemm(gemm.m, gemm.k, gemm.n, gemm.count, tile.cols, hw.compute_units)
        rate = tile.macs_per_pe_per_cycle[dtype]
        # A PE that does r MACs per cycle of a data type is modelled as r side-by-side
        # accumulation lanes: the moving stream needs 1/r of the beats.
        cycles = gemm_tile_cycles(tile.rows, tile.cols, tile.psum_bank_depth, gemm.k,
                                  math.ceil(n / rate), folds)
        compute_s = cycles * gemm.repeat / tile.clock_hz
        single = gemm_tile_cycles(tile.rows, tile.cols, tile.psum_bank_depth, gemm.k, gemm.n,
                                  math.ceil(gemm.m / tile.cols))
        compat = scalesim_ws_cycles(tile.rows, tile.cols, gemm.m, gemm.k, gemm.n)
    time_s = max(compute_s, memory_s)
    return GemmEstimate(gemm=gemm, tile_cycles=cycles, compute_s=compute_s, memory_s=memory_s,
                        time_s=time_s, flop=gemm.flop, bytes=nbytes,
                        bound="compute" if compute_s >= memory_s else "memory",
                        intensity=gemm.flop / nbytes, single_tile_cycles=single,
                        scalesim_cycles=compat)


def allreduce_s(hw, nbytes, members, per_instance, link_bandwidth, notes):
    """Seconds of one ring AllReduce of ``nbytes`` over ``members`` chips.

    ``per_instance`` members share an instance. Inside an instance the link is
    ``link_bandwidth`` (bytes/s, or None: that part is taken as free and a note is added);
    across instances each chip gets ``network_bandwidth / chips`` of its instance's network.

    Raises
    ------
    ValueError
        If the group spans instances and the hardware has no instance network figure.
    """
    if members <= 1 or nbytes == 0:
        return 0.0
    g = min(per_instance, members)
    spans = math.ceil(members / g)
    intra = 0.0
    if g > 1:
        if link_bandwidth is None:
            notes.add("chip-to-chip collectives inside an instance are not timed (no "
                      "link_bandwidth in the preset; pass --link-bandwidth): the step time "
                      "is a lower limit")
        else:
            intra = 2 * (g - 1) / g * nbytes / link_bandwidth
    if spans == 1:
        return intra
    network = hw.instance.network_bandwidth if hw.instance else None
    if network is None:
        raise ValueError(f"{hw.source_file}: field instance.network_bandwidth: missing, so a "
                         f"collective cannot span instances; allowed: groups of at most "
                         f"{hw.instance.chips if hw.instance else 1} chips")
    share = network / hw.instance.chips
    if hw.cluster is not None and hw.cluster.topology == "hierarchical":
        return intra + 2 * (spans - 1) / spans * (nbytes / g) / share
    slowest = share if link_bandwidth is None else min(share, link_bandwidth)
    return 2 * (members - 1) / members * nbytes / slowest


def step_estimate(hw, workload, dtype, tp=1, dp=1, link_bandwidth=None):
    """Step time of ``workload`` (per replica, per chip) on ``tp * dp`` chips.

    Parameters
    ----------
    hw : Hardware
    workload : Workload
    dtype : str
        A data type the hardware has a rate for (``hw.dtypes()``).
    tp, dp : int
        Tensor-parallel chips per replica and data-parallel replicas.
    link_bandwidth : float or None
        Chip-to-chip bandwidth in bytes/s; overrides the preset's ``chip.link_bandwidth``.

    Returns
    -------
    Estimate

    Raises
    ------
    SpecError
        If ``dtype`` has no rate in ``hw``.
    ValueError
        If ``tp * dp`` exceeds the chips the hardware describes, or a collective would cross
        instances without an instance network figure.
    """
    hw.check_dtype(dtype)
    chips = tp * dp
    if chips > hw.max_chips:
        raise ValueError(f"tp * dp = {chips} chips is more than {hw.name} describes; "
                         f"allowed: 1 to {hw.max_chips}")
    notes = set(workload.notes)
    link = link_bandwidth if link_bandwidth is not None else hw.chip.link_bandwidth
    per_instance = hw.instance.chips if hw.instance else 1
    gemms = [gemm_estimate(hw, g, dtype) for g in workload.gemms]
    compute_s = sum(e.time_s for e in gemms)
    tp_comm = workload.tp_allreduces * allreduce_s(
        hw, workload.tp_allreduce_bytes, tp, per_instance, link, notes)
    # DP groups: members are tp chips apart; per instance there are per_instance // tp.
    dp_comm = allreduce_s(hw, workload.dp_allreduce_bytes, dp, max(1, per_instance // tp),
                          link, notes)
    step = compute_s + tp_comm + dp_comm
    flop = sum(e.flop for e in gemms)
    peak = hw.chip_peak(dtype)
    achieved = flop / step
    fits = None if hw.chip.hbm_bytes is None or workload.memory_bytes is None \
        else workload.memory_bytes <= hw.chip.hbm_bytes
    if fits is False:
        notes.add(f"needs {workload.memory_bytes / 2**30:,.1f} GiB per chip, more than the "
                  f"{hw.chip.hbm_bytes / 2**30:,.0f} GiB of HBM")
    return Estimate(hardware=hw, workload=workload, dtype=dtype, tp=tp, dp=dp, gemms=gemms,
                    compute_s=compute_s, tp_comm_s=tp_comm, dp_comm_s=dp_comm, step_s=step,
                    chip_peak=peak, achieved_flops=achieved, mfu=achieved / peak,
                    memory_bytes=workload.memory_bytes, fits=fits, notes=sorted(notes))
