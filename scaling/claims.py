"""Published and claimed figures against first principles.

For every hardware preset, each published peak (core, chip, instance) is set beside the peak
computed from its configuration; a figure *agrees* when the computed value rounds to it at the
precision it was published with (``"92 TFLOPS"`` is a whole number of TFLOPS, so 91.75
agrees). For every figure that does not agree, and for every claim of the press-article preset
(``presets/claims.toml``), the report says what it would take: the clock, the square array
size, or the core count that reaches it with everything else unchanged.
"""

import math
from dataclasses import dataclass

from .hardware import load_hardware, preset_names
from .spec import SpecError, Table, load_packaged_toml
from .units import half_unit


@dataclass
class Row:
    """One line of the claims report (FLOP/s, bytes, bytes/s or W as ``kind`` says)."""

    preset: str
    subject: str
    what: str
    kind: str
    stated: float
    stated_text: str
    computed: float | None
    agrees: bool | None
    source: str
    would_take: str = ""

    @property
    def difference(self):
        """``computed - stated`` (None without a computed value)."""
        return None if self.computed is None else self.computed - self.stated


def _would_take(hw, level, dtype, target, macs=None, cores=None):
    """Clock, square array side or core count at which ``level``'s peak reaches ``target``."""
    tile = hw.tile
    rate = macs if macs is not None else tile.macs_per_pe_per_cycle[dtype]
    n_cores = 1 if level == "core" else (cores if cores is not None else hw.chip.cores)
    chips = hw.instance.chips if level == "instance" else 1
    per_clock = tile.rows * tile.cols * 2 * rate * hw.core.tiles * n_cores * chips
    clock = target / per_clock
    side = math.ceil(math.sqrt(target / (2 * rate * tile.clock_hz * hw.core.tiles * n_cores
                                        * chips)))
    core_peak = tile.rows * tile.cols * 2 * rate * tile.clock_hz * hw.core.tiles
    need_cores = math.ceil(target / (core_peak * chips))
    text = (f"clock {clock / 1e9:.3f} GHz (now {tile.clock_hz / 1e9:g}), or a "
            f"{side} x {side} array (now {tile.rows} x {tile.cols})")
    if level == "core":
        return text + f", or {math.ceil(target / core_peak * hw.core.tiles)} tiles per core " \
                      f"(now {hw.core.tiles})"
    return text + f", or {need_cores} cores per chip (now {n_cores})"


def _margin(hw, level, dtype, figure):
    """Rounding margin of a published figure, and how it is compared (str).

    A figure published as a multiple of a rounded figure carries that figure's rounding times
    the multiple: a rate that is n x the BF16 rate published as n x the rounded BF16 figure
    (NeuronCore-v3's 158 = 2 x 79), or an instance figure that is its chip count x the
    rounded chip figure (Trn3 UltraServers' 161,088 = 64 x 2,517).
    """
    if hw.tile is not None:
        rates = hw.tile.macs_per_pe_per_cycle
        base = "bf16" if "bf16" in rates else min(rates, key=rates.get)
        ratio = rates[dtype] / rates[base]
        own = {"core": hw.core.published_peak, "chip": hw.chip.published_peak,
               "instance": hw.instance.published_peak if hw.instance else {}}[level]
        if ratio > 1 and base in own and math.isclose(figure.value, ratio * own[base].value,
                                                      rel_tol=1e-12):
            return (figure.margin * ratio, f"published as {ratio:g} x the rounded {base} "
                    f"figure, so compared within {ratio:g} x its rounding")
    chip = hw.chip.published_peak.get(dtype)
    if level == "instance" and chip is not None and math.isclose(
            figure.value, hw.instance.chips * chip.value, rel_tol=1e-12):
        return (chip.margin * hw.instance.chips, f"published as {hw.instance.chips} x the "
                f"rounded chip figure, so compared within {hw.instance.chips} x its rounding")
    return figure.margin, "compared at the published precision"


def preset_rows(hw):
    """Rows for one preset's published peaks (core, chip, instance)."""
    rows = []
    levels = []
    if hw.core is not None:
        levels.append(("core", hw.core.name, hw.core.published_peak, hw.core_peak))
    levels.append(("chip", hw.chip.name, hw.chip.published_peak,
                   hw.chip_peak if hw.tile is not None else None))
    if hw.instance is not None:
        levels.append(("instance", hw.instance.name, hw.instance.published_peak,
                       hw.instance_peak))
    for level, subject, published, compute in levels:
        for dtype, figure in sorted(published.items()):
            computed = compute(dtype) if compute is not None else None
            margin, how = _margin(hw, level, dtype, figure)
            if hw.tile is not None and dtype in hw.tile.rate_notes:
                how += f"; {hw.tile.rate_notes[dtype]}"
            agrees = None if computed is None else abs(computed - figure.value) <= margin
            row = Row(hw.name, subject, f"{level} peak {dtype}", "flops", figure.value,
                      figure.text, computed, agrees, f"{hw.source_file}, published; {how}")
            if agrees is False:
                row.would_take = _would_take(hw, level, dtype, figure.value)
            if computed is None:
                row.would_take = "no tile data in the datasheet: peak taken as published"
            rows.append(row)
        if hw.tile is not None and not published:
            # Report the computed peaks with nothing published to compare against.
            for dtype in hw.dtypes():
                rows.append(Row(hw.name, subject, f"{level} peak {dtype}", "flops",
                                float("nan"), "not published", compute(dtype), None,
                                f"{hw.source_file}: no published {level} figure"))
    return rows


#: Trainium3 against Trainium2 as AWS compares them (AWS Neuron docs, "Trainium3
#: Architecture", section "Trainium3 performance improvements": improvement factors). Each entry:
#: figure, (Trainium2 dtype, Trainium3 dtype) for peaks or the chip attribute, AWS's factor.
GENERATION_FIGURES = (
    ("chip peak FP8 (Trainium3: MXFP8)", ("fp8", "mxfp8"), "2x"),
    ("chip peak BF16", ("bf16", "bf16"), "1x"),
    ("chip peak FP32", ("fp32", "fp32"), "1x"),
    ("HBM capacity", "hbm_bytes", "1.5x"),
    ("HBM bandwidth", "hbm_bandwidth", "1.7x"),
    ("chip-to-chip link", "link_bandwidth", "2x"),
)


@dataclass
class GenerationRow:
    """One figure of two chip generations: the model's value for each (from the presets'
    configuration: peaks from first principles) and the factor AWS publishes."""

    figure: str
    kind: str
    old: float | None
    new: float | None
    published_factor: str
    source: str

    @property
    def factor(self):
        """``new / old`` (None when either is missing)."""
        return None if self.old is None or self.new is None else self.new / self.old


def generation_rows(old="trn2", new="trn3"):
    """Rows setting preset ``new`` against ``old`` per chip (:data:`GENERATION_FIGURES`).

    A peak the older preset has no rate for (Trainium2's FP32) is None: the presets keep only
    the rates they have sources for.
    """
    a, b = load_hardware(old), load_hardware(new)
    rows = []
    for figure, what, factor in GENERATION_FIGURES:
        if isinstance(what, tuple):
            values = [hw.chip_peak(d) if d in hw.dtypes() else None
                      for hw, d in zip((a, b), what, strict=True)]
            kind = "flops"
        else:
            values = [getattr(hw.chip, what) for hw in (a, b)]
            kind = "bytes" if what == "hbm_bytes" else "bandwidth"
        rows.append(GenerationRow(figure, kind, values[0], values[1], factor,
                                  f"{a.source_file} and {b.source_file}; factor: AWS "
                                  "\"Trainium3 Architecture\", performance improvements"))
    return rows


def load_claims(path=None):
    """Parse the claims file (default: the packaged ``presets/claims.toml``).

    Returns
    -------
    (str, list of dict)
        The source line and one dict per claim with parsed figures.

    Raises
    ------
    SpecError
        On a missing or malformed field (file, field and allowed values in the message).
    """
    data, name = load_packaged_toml(path, "claims.toml")
    top = Table(name, data)
    source = top.str("source")
    claims = top._get("claim", True)
    top.finish()
    if not isinstance(claims, list):
        raise SpecError(name, "claim", "not an array of tables", "[[claim]] entries")
    out = []
    for i, entry in enumerate(claims):
        t = Table(name, entry, f"claim[{i}]")
        c = {"subject": t.str("subject"),
             "hw": t.str("hw", choices=preset_names()),
             "level": t.str("level", choices=("chip", "instance", "cluster")),
             "dtype": t.str("dtype", required=False),
             "peak": t.quantity("peak", "flops", required=False),
             "peak_text": t.data.get("peak"),
             "hbm_capacity": t.quantity("hbm_capacity", "bytes", required=False),
             "hbm_capacity_text": t.data.get("hbm_capacity"),
             "hbm_bandwidth": t.quantity("hbm_bandwidth", "bandwidth", required=False),
             "hbm_bandwidth_text": t.data.get("hbm_bandwidth"),
             "power": t.quantity("power", "power", required=False),
             "power_text": t.data.get("power"),
             "cores": t.int("cores", required=False),
             "chips": t.int("chips", required=False),
             "network_bandwidth": t.quantity("network_bandwidth", "bandwidth", required=False),
             "network_text": t.data.get("network_bandwidth"),
             "macs": t.int("assumed_macs_per_pe_per_cycle", required=False)}
        t.finish()
        out.append(c)
    return source, out


def claim_rows(path=None):
    """Rows checking each claim against the preset it names."""
    source, claims = load_claims(path)
    rows = []
    for c in claims:
        hw = load_hardware(c["hw"])
        subject = c["subject"]
        if c["peak"] is not None:
            dtype = c["dtype"]
            macs = c["macs"]
            if macs is None:
                hw.check_dtype(dtype)
                macs = hw.tile.macs_per_pe_per_cycle[dtype]
            cores = c["cores"] or hw.chip.cores
            computed = (hw.tile.rows * hw.tile.cols * 2 * macs * hw.tile.clock_hz
                        * hw.core.tiles * cores)
            note = f"{cores} cores of {hw.tile.rows} x {hw.tile.cols} at " \
                   f"{hw.tile.clock_hz / 1e9:g} GHz"
            if c["macs"] is not None:
                note += f", {macs} {dtype} MAC/PE/cycle assumed"
            margin = half_unit(c["peak_text"], "flops")
            row = Row(hw.name, subject, f"chip peak {dtype} ({note})", "flops", c["peak"],
                      c["peak_text"], computed, abs(computed - c["peak"]) <= margin, source)
            if not row.agrees:
                row.would_take = _would_take(hw, "chip", dtype, c["peak"], macs, cores)
            rows.append(row)
            if c["power"] is not None:
                for gpu in ("h100", "a100"):
                    g = load_hardware(gpu)
                    eff = g.chip_peak("bf16") / g.chip.power_w
                    # computed: this chip's first-principles peak over the same power; the
                    # GPU's datasheet figure is what the claim is compared with, in the note.
                    rows.append(Row(hw.name, subject, f"peak per watt vs {g.chip.name} "
                                    f"({eff / 1e12:.2f} TFLOPS/W, datasheet)", "flops/W",
                                    c["peak"] / c["power"],
                                    f"{c['peak_text']} / {c['power_text']}",
                                    computed / c["power"], row.agrees, source,
                                    f"claimed efficiency is {c['peak'] / c['power'] / eff:.1f}x "
                                    f"the {g.chip.name}'s {eff / 1e12:.2f} TFLOPS/W"))
        if c["cores"] is not None:
            rows.append(Row(hw.name, subject, "cores per chip", "count", c["cores"],
                            str(c["cores"]), hw.chip.cores, c["cores"] == hw.chip.cores,
                            source, f"the {hw.chip.name} preset has {hw.chip.cores}"))
        if c["hbm_capacity"] is not None:
            ok = abs(hw.chip.hbm_bytes - c["hbm_capacity"]) <= half_unit(
                c["hbm_capacity_text"], "bytes")
            rows.append(Row(hw.name, subject, "HBM capacity", "bytes", c["hbm_capacity"],
                            c["hbm_capacity_text"], hw.chip.hbm_bytes, ok, source,
                            "" if ok else f"{c['hbm_capacity'] / hw.chip.hbm_bytes:.2f}x the "
                            "preset's HBM"))
        if c["hbm_bandwidth"] is not None:
            ok = abs(hw.chip.hbm_bandwidth - c["hbm_bandwidth"]) <= half_unit(
                c["hbm_bandwidth_text"], "bandwidth")
            rows.append(Row(hw.name, subject, "HBM bandwidth", "bandwidth", c["hbm_bandwidth"],
                            c["hbm_bandwidth_text"], hw.chip.hbm_bandwidth, ok, source,
                            "" if ok else "differs from the preset beyond the claim's rounding"))
        if c["chips"] is not None:
            per = hw.instance.chips
            rows.append(Row(hw.name, subject, "chips in a cluster", "count", c["chips"],
                            f"{c['chips']:,}", hw.max_chips, hw.max_chips >= c["chips"], source,
                            f"takes {math.ceil(c['chips'] / per):,} {hw.instance.name} "
                            f"instances of {per} chips"))
        if c["network_bandwidth"] is not None:
            have = hw.instance.network_bandwidth
            ok = abs(have - c["network_bandwidth"]) <= half_unit(c["network_text"], "bandwidth")
            rows.append(Row(hw.name, subject, "instance network", "bits",
                            c["network_bandwidth"], c["network_text"], have, ok, source,
                            "" if ok else f"the {hw.instance.name} preset has "
                            f"{have / c['network_bandwidth']:.0f}x the claimed bandwidth"))
    return rows


def all_rows(claims_path=None):
    """Published rows of every preset, then the claim rows."""
    rows = []
    for name in preset_names():
        rows.extend(preset_rows(load_hardware(name)))
    rows.extend(claim_rows(claims_path))
    return rows


def format_value(kind, value):
    """A figure in the unit people read it in (TFLOPS, GiB, GB/s, TFLOPS/W, plain count)."""
    if value is None or value != value:
        return "-"
    if kind == "flops":
        return f"{value / 1e12:,.2f} TFLOPS"
    if kind == "flops/W":
        return f"{value / 1e12:,.2f} TFLOPS/W"
    if kind == "bytes":
        return f"{value / 2**30:,.1f} GiB"
    if kind == "bits":
        return f"{value * 8 / 1e9:,.0f} Gbps"
    if kind == "bandwidth":
        return f"{value / 1e9:,.1f} GB/s"
    return f"{value:,.0f}"



# ----- workload claims, checked with the calibrated transformer model ----------------------

#: GPT-3's training tokens: Brown et al. 2020 (arXiv:2005.14165), section 2.2 and Table 2.2:
#: 300 billion tokens.
GPT3_TOKENS = 300e9
#: GPT-3 175B's batch: 3.2M tokens (Table 2.1) = 1,536 sequences of 2,048 tokens.
GPT3_BATCH_SEQS = 1536
MONTH_S = 30 * 86400


@dataclass
class WorkloadRow:
    """One workload claim: what is claimed, the assumptions, what the model gives."""

    subject: str
    claim: str
    assumptions: str
    computed: str
    adds_up: bool | None
    would_take: str
    source: str = "a press article (presets/claims.toml lists its peak claims)"
    values: dict = None


def workload_rows(cal=None):
    """The press article's workload claims against the calibrated model (see docs/scaling.md).

    Parameters
    ----------
    cal : Calibration or None
        Default: the stored calibration (``presets/calibration.toml``).
    """
    from .calibration import load_calibration
    from .llm import Layout, inference, training
    from .workloads import load_transformer

    cal = cal or load_calibration()
    trn1, trn2, inf2 = (load_hardware(n) for n in ("trn1", "trn2", "inf2"))
    rows = []

    # 1. GPT-3 175B in less than a month on up to 100,000 Trainium2 chips.
    gpt3 = load_transformer("gpt3-175b")
    tp, pp = 32, 8
    dp = trn2.chip.logical_cores * trn2.max_chips // (tp * pp)
    batch = dp * pp                 # pp micro-batches per replica: a 1F1B bubble of (pp-1)/(2pp-1)
    est = training(trn2, gpt3, Layout(tp=tp, pp=pp, dp=dp, zero1=True), batch, 2048, cal)
    days = GPT3_TOKENS / (est.seq_per_s * 2048) / 86400
    rows.append(WorkloadRow(
        "Trainium2 UltraCluster", "GPT-3 175B trained in less than a month on up to 100,000 "
        "chips",
        f"{GPT3_TOKENS / 1e9:.0f}B tokens (GPT-3 paper, section 2.2), sequences of 2,048; TP "
        f"{tp} x PP {pp} x DP {dp:,} NeuronCores = {est.chips:,.0f} chips, ZeRO-1, "
        f"micro-batch 1, global batch {batch:,} sequences ({est.terms['micro_batches']} "
        f"micro-batches per replica; GPT-3 itself used {GPT3_BATCH_SEQS:,}, too few to give "
        "100,000 chips a micro-batch each); calibration fitted on NeuronCore-v2 data, applied "
        "to NeuronCore-v3",
        f"{days:,.1f} days ({est.seq_per_s:,.0f} sequences/s, MFU {est.mfu:.1%}; "
        f"{'fits' if est.fits else 'does not fit'} in HBM)",
        days < 30,
        f"{math.ceil(est.chips * days / 30):,} chips at this efficiency for exactly 30 days"
        if days < 30 else f"{days / 30:.1f}x the chips or the efficiency",
        values={"days": days, "chips": est.chips, "seq_per_s": est.seq_per_s,
                "mfu": est.mfu}))

    # 2. Up to 500 inferences per second per chip, 7B model, Inferentia2.
    llama7 = load_transformer("llama2-7b")
    best, best_batch, batch = None, 0, 1
    while batch <= 4096:
        e = inference(inf2, llama7, Layout(tp=inf2.chip.logical_cores), batch, 128, 128,
                      "bf16", cal)
        if not e.fits:
            break
        if best is None or e.tokens_per_s > best.tokens_per_s:
            best, best_batch = e, batch
        batch *= 2
    per_chip = best.tokens_per_s / best.chips
    rows.append(WorkloadRow(
        "Inferentia2 chip", "up to 500 inferences per second per chip for 7B-parameter models",
        "an inference = one generated token; Llama 2 7B, BF16 weights, one chip (TP 2), prompt "
        "128 / 128 generated tokens, the largest power-of-two batch whose weights and KV cache "
        "fit the chip's HBM",
        f"{per_chip:,.0f} tokens/s per chip at batch {best_batch} "
        f"(TPOT {best.tpot_s * 1e3:.1f} ms)",
        per_chip >= 500,
        "" if per_chip >= 500 else f"{500 / per_chip:.1f}x the throughput",
        values={"tokens_per_s_per_chip": per_chip, "batch": best_batch,
                "tpot_s": best.tpot_s}))

    # 3. Sub-10 ms language-model latency on Inferentia2.
    e = inference(inf2, llama7, Layout(tp=24), 1, 128, 128, "bf16", cal)
    rows.append(WorkloadRow(
        "Inferentia2 instance", "sub-10 ms latency for language models",
        "Llama 2 7B on inf2.48xlarge, TP 24, batch 1, prompt 128 / 128 generated tokens; "
        "both TPOT and TTFT must be under 10 ms",
        f"TPOT {e.tpot_s * 1e3:.2f} ms, TTFT {e.ttft_s * 1e3:.2f} ms",
        e.tpot_s < 10e-3 and e.ttft_s < 10e-3,
        "holds per output token (TPOT), not for the first token (TTFT)"
        if e.tpot_s < 10e-3 <= e.ttft_s else "",
        values={"tpot_s": e.tpot_s, "ttft_s": e.ttft_s}))

    # 4. Trainium2 up to four times Trainium1: per-chip peak and a measured-style step.
    llama8 = load_transformer("llama3.1-8b")
    peak = trn2.chip_peak("bf16") / trn1.chip_peak("bf16")
    chips = 512
    one = training(trn1, llama8, Layout(tp=32, dp=chips * trn1.chip.logical_cores // 32,
                                        zero1=True), 1024, 8192, cal)
    two = training(trn2, llama8, Layout(tp=32, dp=chips * trn2.chip.logical_cores // 32,
                                        zero1=True), 1024, 8192, cal)
    ratio = (two.seq_per_s / two.chips) / (one.seq_per_s / one.chips)
    rows.append(WorkloadRow(
        "Trainium2 vs Trainium1", "Trainium2 up to four times Trainium1",
        "per chip: BF16 peak from first principles; and Llama 3.1 8B pretraining as AWS "
        "measured it on trn1 (TP 32, ZeRO-1, global batch 1,024, sequence 8,192) on 512 chips "
        "of each (TP 32 NeuronCores on both; trn2's efficiencies are NeuronCore-v2's)",
        f"peak {peak:.2f}x ({trn2.chip_peak('bf16') / 1e12:.1f} vs "
        f"{trn1.chip_peak('bf16') / 1e12:.1f} TFLOPS); training {ratio:.2f}x "
        f"({two.seq_per_s:,.1f} vs {one.seq_per_s:,.1f} sequences/s)",
        peak >= 4 and ratio >= 4,
        "peak: " + _would_take(trn2, "chip", "bf16", 4 * trn1.chip_peak("bf16"))
        + (f"; the training step is {ratio:.1f}x" if ratio >= 4 else ""),
        values={"peak_ratio": peak, "training_ratio": ratio}))
    return rows
