"""Hardware descriptions: tile -> NeuronCore -> chip -> instance -> cluster, loaded from TOML.

A description is one TOML file (presets live in ``presets/hw/``). Figures keep the unit their
source prints (``"2.8 GHz"``, ``"820 GiB/s"``, ``"800 Gbps"``) and each carries its source in a
comment. Peaks are computed from first principles::

    core peak  = rows * cols * 2 FLOP * MACs per PE per cycle (dtype) * clock * tiles
    chip peak  = core peak * cores
    instance   = chip peak * chips

and reported beside the published figures (``published_peak`` tables), never replaced by them.

Two kinds of description exist: ``kind = "systolic"`` (a tile that the timing model of
``systolica.golden.timing`` describes) and ``kind = "gpu"`` (a datasheet chip: published peak,
HBM and power only, used for roofline comparisons).
"""

from dataclasses import dataclass, field
from importlib import resources

from .spec import SpecError, Table, load_preset_or_file, preset_names_in
from .tilemodel import double_row_macs_per_pe_per_cycle
from .units import half_unit

#: Bytes per element of each data type the model knows.
#: A ``macs_per_pe_per_cycle`` value that takes the rate from the FP8 double-row cycle model.
DOUBLE_ROW_RATE = "double_row"

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1,
               # OCP MX (NeuronCore-v4): an 8- or 4-bit element plus one 8-bit E8M0 scale per
               # 32 elements (OCP MX v1.0; AWS "Trainium3 Architecture Guide for NKI").
               "mxfp8": 1 + 1 / 32, "mxfp4": 0.5 + 1 / 32}

TOPOLOGIES = ("ring", "hierarchical")


@dataclass(frozen=True)
class Tile:
    """The systolic tensor-engine tile.

    Attributes
    ----------
    rows, cols : int
        PEs in the partition (contraction, K) dimension and in the stationary free dimension (M).
    clock_hz : float
        Clock in Hz.
    macs_per_pe_per_cycle : dict of str -> int or float
        Multiply-accumulates one PE completes per cycle, per data type (a fraction when a
        MAC takes several cycles, as FP32's 1/4 on NeuronCore-v4). A preset may give
        ``"double_row"`` instead of a number: the rate of back-to-back FP8 double-row matmuls
        from the cycle model (:func:`~.tilemodel.double_row_macs_per_pe_per_cycle`), which
        equals the RTL's measured stamps.
    psum_bank_depth : int
        Moving columns one matmul may write into a PSUM bank (512 on the real engine): the
        largest N of one matmul.
    rate_notes : dict of str -> str
        Where a rate came from, for the rates not given as numbers (reports quote it).
    """

    rows: int
    cols: int
    clock_hz: float
    macs_per_pe_per_cycle: dict
    psum_bank_depth: int
    rate_notes: dict = field(default_factory=dict)

    def peak_flops(self, dtype):
        """Peak of one tile in FLOP/s: rows * cols * 2 * MACs per PE per cycle * clock.

        Raises
        ------
        KeyError
            If the tile has no rate for ``dtype`` (see :meth:`Hardware.check_dtype`).
        """
        return self.rows * self.cols * 2 * self.macs_per_pe_per_cycle[dtype] * self.clock_hz


@dataclass(frozen=True)
class Engines:
    """A NeuronCore's engine figures for the NKI engine model (``[core.engines]``).

    Attributes
    ----------
    clocks_hz : dict of str -> float
        Clock of each compute engine in Hz, keyed ``tensor``, ``vector``, ``scalar``,
        ``gpsimd`` (the names of ``nki.isa``'s engine enumeration).
    lanes : int
        Partitions an ACT/DVE/POOL instruction processes per cycle (elements per cycle).
    dma_engines : int
        DMA engines (queues) per core.
    dma_engine_bandwidth : float
        Peak bytes/s of one DMA engine.
    sbuf_partition_bytes, psum_partition_bytes : float
        SBUF and PSUM bytes per partition.
    """

    clocks_hz: dict
    lanes: int
    dma_engines: int
    dma_engine_bandwidth: float
    sbuf_partition_bytes: float
    psum_partition_bytes: float


#: The compute engines ``[core.engines]`` gives a clock for.
ENGINE_CLOCKS = ("tensor", "vector", "scalar", "gpsimd")


def _engines(core_table):
    e = core_table.table("engines", required=False)
    if e is None:
        return None
    engines = Engines(
        clocks_hz={name: e.quantity(f"{name}_clock", "frequency") for name in ENGINE_CLOCKS},
        lanes=e.int("lanes"), dma_engines=e.int("dma_engines"),
        dma_engine_bandwidth=e.quantity("dma_engine_bandwidth", "bandwidth"),
        sbuf_partition_bytes=e.quantity("sbuf_partition", "bytes"),
        psum_partition_bytes=e.quantity("psum_partition", "bytes"))
    e.finish()
    return engines


@dataclass(frozen=True)
class Core:
    """A NeuronCore: ``tiles`` tensor-engine tiles plus its SBUF and PSUM (bytes, optional).

    ``vector_flops`` and ``scalar_flops`` are the published FP32 rates (FLOP/s) of the Vector
    and Scalar engines, which run the non-GEMM work (norms, softmax, activations); None when
    the preset has none (that work is then left out, and the estimate says so).
    """

    name: str
    tiles: int
    sbuf_bytes: float | None
    psum_bytes: float | None
    published_peak: dict = field(default_factory=dict)  # dtype -> Published
    vector_flops: float | None = None
    scalar_flops: float | None = None
    engines: Engines | None = None   # [core.engines]: the NKI engine model's figures


@dataclass(frozen=True)
class Chip:
    """A chip. Bandwidths in bytes/s, capacity in bytes, power in W (None when not given).

    ``link_bandwidth`` is the chip's NeuronLink bandwidth to the other chips of its instance;
    ``lnc`` the physical NeuronCores per logical NeuronCore that Neuron uses by default (its
    Logical NeuronCore Configuration: 2 on Trainium2, 1 before): parallel degrees count
    logical cores.
    """

    name: str
    cores: int
    hbm_bytes: float | None
    hbm_bandwidth: float
    link_bandwidth: float | None
    power_w: float | None
    published_peak: dict = field(default_factory=dict)  # dtype -> Published
    lnc: int = 1

    @property
    def logical_cores(self):
        """Logical NeuronCores per chip (``cores // lnc``)."""
        return self.cores // self.lnc


#: How the chips of an instance are joined: ``"switched"`` is an all-to-all switch fabric
#: (Trn3 UltraServers' NeuronSwitch-v1). A ring AllReduce runs at each chip's link bandwidth
#: on either, so the timing is the same; the field records the topology.
FABRICS = ("point-to-point", "switched")


@dataclass(frozen=True)
class Instance:
    """A server: ``chips`` chips, ``network_bandwidth`` bytes/s to other instances;
    ``fabric`` one of :data:`FABRICS` or None when the preset does not say."""

    name: str
    chips: int
    network_bandwidth: float | None
    published_peak: dict = field(default_factory=dict)
    fabric: str | None = None


@dataclass(frozen=True)
class Cluster:
    """Instances joined by the instance network; ``topology`` is how AllReduce runs on it."""

    name: str
    instances: int
    topology: str


@dataclass(frozen=True)
class Hardware:
    """A complete description; ``tile``, ``core``, ``instance``, ``cluster`` None for GPUs."""

    name: str
    title: str
    kind: str
    source_file: str
    tile: Tile | None
    core: Core | None
    chip: Chip
    instance: Instance | None
    cluster: Cluster | None

    # ----- peaks from first principles (FLOP/s) -----------------------------------------------
    def dtypes(self):
        """Data types this hardware has a rate for (sorted list of str)."""
        if self.tile is not None:
            return sorted(self.tile.macs_per_pe_per_cycle)
        return sorted(self.chip.published_peak)

    def check_dtype(self, dtype):
        """Raise :class:`SpecError` naming the allowed data types if ``dtype`` has no rate."""
        if dtype not in self.dtypes():
            raise SpecError(self.source_file, "dtype", f"{dtype!r} has no rate in this hardware",
                            ", ".join(self.dtypes()))

    def core_peak(self, dtype):
        """Per-core peak in FLOP/s from first principles (tile peak * tiles per core)."""
        self.check_dtype(dtype)
        return self.tile.peak_flops(dtype) * self.core.tiles

    def chip_peak(self, dtype):
        """Per-chip peak in FLOP/s: core peak * cores; a GPU's published peak (no tile data)."""
        self.check_dtype(dtype)
        if self.tile is None:
            return self.chip.published_peak[dtype].value
        return self.core_peak(dtype) * self.chip.cores

    def instance_peak(self, dtype):
        """Per-instance peak in FLOP/s: chip peak * chips."""
        return self.chip_peak(dtype) * self.instance.chips

    @property
    def compute_units(self):
        """Tiles per chip that run matmuls in parallel (cores * tiles per core)."""
        return self.chip.cores * self.core.tiles

    @property
    def max_chips(self):
        """Chips in the whole cluster (or instance, or 1 when neither is described)."""
        if self.instance is None:
            return 1
        if self.cluster is None:
            return self.instance.chips
        return self.instance.chips * self.cluster.instances


@dataclass(frozen=True)
class Published:
    """A published figure: ``value`` in FLOP/s, the ``text`` as the source prints it, and
    ``margin``, half a unit of its last digit (the rounding it was published with)."""

    value: float
    text: str
    margin: float

    def agrees(self, computed):
        """True when ``computed`` rounds to this figure at its published precision."""
        return abs(computed - self.value) <= self.margin


def _peaks(table, key):
    t = table.table(key, required=False)
    if t is None:
        return {}
    out = {}
    for dtype in list(t.data):
        if dtype not in DTYPE_BYTES:
            raise t.error(dtype, "unknown data type", ", ".join(DTYPE_BYTES))
        value = t.quantity(dtype, "flops")
        out[dtype] = Published(value, t.data[dtype], half_unit(t.data[dtype], "flops"))
    t.finish()
    return out


def parse_hardware(data, source):
    """Build a :class:`Hardware` from a parsed TOML dict.

    Parameters
    ----------
    data : dict
        The parsed file.
    source : str
        File name used in error messages.

    Raises
    ------
    SpecError
        On a missing, unknown or out-of-range field; the message names the file, the field and
        the allowed values.
    """
    top = Table(source, data)
    name = top.str("name")
    title = top.str("title")
    kind = top.str("kind", choices=("systolic", "gpu"))
    tile = core = instance = cluster = None
    if kind == "systolic":
        t = top.table("tile")
        rows, cols = t.int("rows"), t.int("cols")
        clock = t.quantity("clock", "frequency")
        depth = t.int("psum_bank_depth")
        macs = t.table("macs_per_pe_per_cycle")
        rates, notes = {}, {}
        for dtype in list(macs.data):
            if dtype not in DTYPE_BYTES:
                raise macs.error(dtype, "unknown data type", ", ".join(DTYPE_BYTES))
            if isinstance(macs.data[dtype], str):
                # "double_row": the rate of FP8 double-row matmuls from the cycle model, which
                # equals the RTL's measured stamps.
                macs.str(dtype, choices=(DOUBLE_ROW_RATE,))
                rates[dtype] = double_row_macs_per_pe_per_cycle(rows, cols, depth)
                notes[dtype] = (f"{rates[dtype]} MACs per PE per cycle: FP8 double-row "
                                f"matmuls timed by the cycle model, equal to the RTL's stamps")
            else:
                rates[dtype] = macs.number(dtype)
        if not rates:
            raise t.error("macs_per_pe_per_cycle", "empty", "at least one of "
                          + ", ".join(DTYPE_BYTES))
        macs.finish()
        tile = Tile(rows=rows, cols=cols, clock_hz=clock, macs_per_pe_per_cycle=rates,
                    psum_bank_depth=depth, rate_notes=notes)
        t.finish()
        c = top.table("core")
        core = Core(name=c.str("name"), tiles=c.int("tiles"),
                    sbuf_bytes=c.quantity("sbuf", "bytes", required=False),
                    psum_bytes=c.quantity("psum", "bytes", required=False),
                    published_peak=_peaks(c, "published_peak"),
                    vector_flops=c.quantity("vector_fp32", "flops", required=False),
                    scalar_flops=c.quantity("scalar_fp32", "flops", required=False),
                    engines=_engines(c))
        c.finish()
    ch = top.table("chip")
    chip = Chip(name=ch.str("name"), cores=ch.int("cores"),
                hbm_bytes=ch.quantity("hbm_capacity", "bytes", required=False),
                hbm_bandwidth=ch.quantity("hbm_bandwidth", "bandwidth"),
                link_bandwidth=ch.quantity("link_bandwidth", "bandwidth", required=False),
                power_w=ch.quantity("power", "power", required=False),
                published_peak=_peaks(ch, "published_peak"),
                lnc=ch.int("lnc", required=False) or 1)
    ch.finish()
    if chip.cores % chip.lnc:
        raise SpecError(source, "chip.lnc", f"{chip.lnc} does not divide chip.cores = "
                        f"{chip.cores}", f"a divisor of {chip.cores}")
    if kind == "gpu" and not chip.published_peak:
        raise SpecError(source, "chip.published_peak", "missing (a GPU has no tile to compute "
                        "its peak from)", "a table of dtype = '<number> TFLOPS'")
    i = top.table("instance", required=kind == "systolic")
    if i is not None:
        instance = Instance(name=i.str("name"), chips=i.int("chips"),
                            network_bandwidth=i.quantity("network_bandwidth", "bandwidth",
                                                         required=False),
                            published_peak=_peaks(i, "published_peak"),
                            fabric=i.str("fabric", required=False, choices=FABRICS))
        i.finish()
        cl = top.table("cluster", required=False)
        if cl is not None:
            cluster = Cluster(name=cl.str("name"), instances=cl.int("instances"),
                              topology=cl.str("topology", choices=TOPOLOGIES))
            cl.finish()
    top.finish()
    return Hardware(name=name, title=title, kind=kind, source_file=str(source), tile=tile,
                    core=core, chip=chip, instance=instance, cluster=cluster)


def preset_dir():
    """Folder of the packaged hardware presets (a ``Traversable``)."""
    return resources.files("systolica.scaling").joinpath("presets", "hw")


def preset_names():
    """Names of the packaged hardware presets (file stems), sorted."""
    return preset_names_in(preset_dir())


def load_hardware(name_or_path):
    """Load a preset by name (``"trn2"``) or a TOML file by path.

    Raises
    ------
    SpecError
        If the name is no preset and no such file exists, or the file is invalid.
    """
    return load_preset_or_file(name_or_path, preset_dir(), "hardware", parse_hardware)
