"""Transformer inference and training as Neuron runs them, with the terms measured runs pay.

Parallelism counts NeuronCores as Neuron's ``tp_degree`` does: a *rank* is one logical
NeuronCore (``chip.lnc`` physical cores: 2 on Trainium2, 1 before). ``tp x pp x dp`` ranks
occupy ``tp x pp x dp / logical cores per chip`` chips; tensor-parallel ranks are innermost,
then pipeline stages, then data-parallel replicas.

Per rank and per step the time is a sum, with no overlap assumed between its terms:

- **GEMMs**: folded onto the rank's tiles and timed with the tile's cycle model
  (:func:`~systolica.scaling.tilemodel.gemm_tile_cycles`), divided by the calibrated tensor-engine
  efficiency; each GEMM takes the larger of that and its HBM traffic over the rank's share of
  HBM bandwidth times the calibrated HBM efficiency (roofline per GEMM). Weights are read at
  their storage type (``--weights``; ``mxfp8`` also runs the linear layers at the tile's MXFP8
  rate); activations and the KV cache are 2 bytes. Attention is
  flash-style: the score matrix stays on chip, only Q, K, V and the output touch HBM.
- **Non-GEMM work** (norms, rotary embedding, softmax, activation functions, residual adds,
  sampling) in FP32 FLOP on the Vector and Scalar engines at their published rates
  (:data:`NONGEMM` lists the counts per element). On a NeuronCore preset inference, training
  and encoders instead cost the attention core (scores, softmax, context: the attention GEMMs
  included) and the elementwise operations with the NKI engine model (:func:`engine_layer`,
  issue 28): prompt and KV cache padded to their buckets, the context-encoding attention the
  flash kernel or the plain graph (:func:`context_attention`), training's backward and
  recomputation on top; sampling stays a FLOP count.
- **Collectives**: each AllReduce of ``S`` bytes over ``p`` ranks takes the faster of a ring,
  ``2 (p-1) a + 2 (p-1)/p S / B``, and a binary tree, ``2 ceil(log2 p) (a + S / B)``, where
  ``a`` is the calibrated latency of one algorithm step and ``B`` a rank's share of its link:
  NeuronLink (``chip.link_bandwidth / logical cores per chip``) inside an instance, EFA
  (``instance.network_bandwidth / ranks per instance``) across instances, device memory when
  the group sits on one chip. Groups that span instances reduce inside each instance first,
  then ring across instances with ``S / g`` bytes (``g`` members per instance).
- **A fixed overhead per layer and forward or backward pass** (calibrated; zero when the data
  do not need it).

Inference: TTFT is the prefill of ``input_len`` tokens (KV cache written, LM head on the last
token); TPOT is the mean over the ``output_len - 1`` decode steps with the KV cache growing from
``input_len + 1`` to ``input_len + output_len - 1`` tokens (sampled at up to
:data:`KV_SAMPLES` evenly spaced lengths). With ``pp`` stages a token passes every stage in turn.
Two AllReduces per layer (Megatron attention and MLP), one AllGather of the logits.

Training (1F1B pipeline): ``m = global_batch / (dp x micro_batch)`` micro-batches per replica;
step = ``(m + pp - 1) x`` (forward + backward of one micro-batch on the busiest stage, plus
its point-to-point activation and gradient transfers) + the data-parallel gradient exchange +
the optimizer step. Tensor parallelism is Megatron with sequence parallelism: per layer and
micro-batch the AllGathers and ReduceScatters move what four AllReduces of the layer's
activations move (two forward, two backward). The gradient exchange is an AllReduce of FP32
gradients, or with ZeRO-1 a ReduceScatter of FP32 gradients plus an AllGather of BF16 weights;
the AdamW update (:func:`optimizer_seconds`) reads and writes the FP32 state of each weight the
rank owns (the engine model's VectorE/ScalarE passes and HBM bytes where there is one). MFU counts
the model's FLOP (``3 x`` forward, no recomputation) against the ranks' BF16 peak.
"""

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from systolica.golden import check_positive

from .hardware import DTYPE_BYTES
from .tilemodel import gemm_tile_cycles, split_gemm
from .workloads import transformer_workload

#: Weight storage types and their bytes (activations and KV cache stay 2-byte BF16/FP16).
WEIGHT_BYTES = {"bf16": 2, "fp16": 2, "int8": 1, "fp8": 1, "mxfp8": DTYPE_BYTES["mxfp8"]}
#: Weight type whose linear layers also compute in it: MXFP8 weights and MXFP8 activations
#: (quantised on chip by the Vector engine's quantize_mx) at the tile's ``mxfp8`` rate.
MX_WEIGHTS = "mxfp8"
ACT_BYTES = 2
RECOMPUTE = ("none", "selective", "full")
KV_SAMPLES = 9

#: Non-GEMM FP32 FLOP per element (forward), by engine: RMS/LayerNorm square, sum, scale,
#: multiply (4, Vector); rotary multiply-add of Q and K (3, Vector); softmax max, subtract,
#: sum, divide (4, Vector) and exp (1, Scalar) per score; activation function (1, Scalar) and
#: gate multiply (1, Vector) per FFN element; residual add (1, Vector); sampling over the
#: logits (5, Vector). Backward costs twice the forward.
NONGEMM = {"norm": 4, "rotary": 3, "softmax_vector": 4, "softmax_scalar": 1, "act_scalar": 1,
           "gate_vector": 1, "residual": 1, "sampling": 5}


@dataclass(frozen=True)
class Calibration:
    """Calibrated efficiencies and latencies (see :mod:`systolica.scaling.calibration`).

    Attributes
    ----------
    hbm_efficiency : float
        Fraction of the published HBM bandwidth a rank sustains, in (0, 1].
    tensor_efficiency : float
        Fraction of the tile cycle model's GEMM rate sustained, in (0, 1].
    collective_latency_s : float
        Seconds per algorithm step of a collective (NeuronLink and EFA alike).
    link_efficiency : float
        Fraction of the chip's published NeuronLink bandwidth that one rank's share sustains
        in a collective, in (0, 1] (EFA is taken at its published figure).
    layer_overhead_s : float
        Seconds per layer per forward or backward pass (0 when not fitted).
    fitted_on : tuple of str
        The published figures the values were fitted on.
    """

    hbm_efficiency: float = 1.0
    tensor_efficiency: float = 1.0
    collective_latency_s: float = 0.0
    layer_overhead_s: float = 0.0
    link_efficiency: float = 1.0
    fitted_on: tuple = ()

    @property
    def ideal(self):
        """True for the uncalibrated lower limit (efficiencies 1, no latencies)."""
        return (self.hbm_efficiency, self.tensor_efficiency, self.collective_latency_s,
                self.layer_overhead_s, self.link_efficiency) == (1.0, 1.0, 0.0, 0.0, 1.0)


IDEAL = Calibration()


@dataclass(frozen=True)
class Layout:
    """Parallel degrees in logical NeuronCores (ranks) and the training options.

    Attributes
    ----------
    tp, pp, dp : int
        Tensor-parallel ranks, pipeline stages, data-parallel replicas (each >= 1).
    micro_batch : int
        Sequences per micro-batch (training).
    zero1 : bool
        Optimizer state sharded over the data-parallel replicas (ZeRO-1).
    recompute : str
        Activation recomputation in training: ``none``, ``selective`` (attention core) or
        ``full`` (every forward GEMM again).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    zero1: bool = False
    recompute: str = "selective"

    @property
    def ranks(self):
        return self.tp * self.pp * self.dp


@dataclass
class Breakdown:
    """Seconds of one pass on the busiest rank, by term."""

    gemm_s: float = 0.0
    gemm_compute_s: float = 0.0
    gemm_memory_s: float = 0.0
    nongemm_s: float = 0.0
    tp_comm_s: float = 0.0
    pp_comm_s: float = 0.0
    overhead_s: float = 0.0
    flop: float = 0.0
    hbm_bytes: float = 0.0
    gemms: list = field(default_factory=list)   # (Gemm, time, compute, memory, bytes)
    engine_s: dict = field(default_factory=dict)  # engine -> s of the engine-model operations
    gemm_tensor_s: float = 0.0                    # GEMM time of the compute-bound GEMMs

    def by_engine(self):
        """Seconds of the pass by where they go (what ``systolica estimate --terms`` prints):
        ``tensor`` (compute-bound GEMMs and the attention core's TensorE-bound share),
        ``scalar``, ``vector`` (the engine model's operations charged to those engines, and
        sampling), ``dma_hbm`` (HBM-bound GEMMs, DMA/HBM-bound operations),
        ``collectives`` (tensor- and pipeline-parallel transfers), ``overhead``."""
        eng = self.engine_s
        rest = self.nongemm_s - sum(eng.values())        # FLOP-rate work (sampling, training)
        return {"tensor": self.gemm_tensor_s + eng.get("tensor", 0.0),
                "scalar": eng.get("scalar", 0.0),
                "vector": eng.get("vector", 0.0) + eng.get("gpsimd", 0.0) + rest,
                "dma_hbm": self.gemm_s - self.gemm_tensor_s + eng.get("dma", 0.0)
                + eng.get("hbm", 0.0),
                "collectives": self.tp_comm_s + self.pp_comm_s,
                "overhead": self.overhead_s}

    @property
    def total_s(self):
        return self.gemm_s + self.nongemm_s + self.tp_comm_s + self.pp_comm_s + self.overhead_s

    def add(self, other, times=1.0):
        for name in ("gemm_s", "gemm_compute_s", "gemm_memory_s", "nongemm_s", "tp_comm_s",
                     "pp_comm_s", "overhead_s", "flop", "hbm_bytes", "gemm_tensor_s"):
            setattr(self, name, getattr(self, name) + times * getattr(other, name))
        for engine, value in other.engine_s.items():
            self.engine_s[engine] = self.engine_s.get(engine, 0.0) + times * value
        return self

    def as_dict(self):
        return {"gemm_s": self.gemm_s, "gemm_compute_s": self.gemm_compute_s,
                "gemm_memory_s": self.gemm_memory_s, "nongemm_s": self.nongemm_s,
                "tp_comm_s": self.tp_comm_s, "pp_comm_s": self.pp_comm_s,
                "overhead_s": self.overhead_s, "total_s": self.total_s,
                "by_engine": self.by_engine()}


@dataclass
class LLMEstimate:
    """Result of :func:`inference` or :func:`training`. Seconds, bytes, FLOP/s.

    Inference fills ``ttft_s``, ``tpot_s``, ``tokens_per_s``; training ``step_s``,
    ``seq_per_s``, ``mfu``; the others stay None.
    """

    hardware: object
    model: object
    layout: Layout
    phase: str
    calibration: Calibration
    chips: float
    memory_bytes: float
    memory_capacity: float | None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    step_s: float | None = None
    seq_per_s: float | None = None
    mfu: float | None = None
    terms: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    gemms: list = field(default_factory=list)   # per-GEMM rows of one pass (see Breakdown)

    @property
    def fits(self):
        return None if self.memory_capacity is None else self.memory_bytes <= self.memory_capacity


# ----- the machine as ranks see it --------------------------------


def rank_view(hw):
    """Per-rank (logical NeuronCore) figures: dict of tiles, hbm_bw (bytes/s), hbm_bytes,
    vector and scalar (FLOP/s), peak_bf16 (FLOP/s), ranks_per_chip, ranks_per_instance."""
    lnc = hw.chip.lnc
    per_chip = hw.chip.logical_cores
    return {
        "tiles": lnc * hw.core.tiles,
        "hbm_bw": hw.chip.hbm_bandwidth / per_chip,
        "hbm_bytes": None if hw.chip.hbm_bytes is None else hw.chip.hbm_bytes / per_chip,
        "vector": None if hw.core.vector_flops is None else hw.core.vector_flops * lnc,
        "scalar": None if hw.core.scalar_flops is None else hw.core.scalar_flops * lnc,
        "peak": hw.core_peak("bf16") * lnc,
        "ranks_per_chip": per_chip,
        "ranks_per_instance": per_chip * hw.instance.chips,
    }


def check_layout(hw, layout, model=None):
    """Chips the layout occupies; ValueError naming the degree and the allowed range."""
    if hw.tile is None or hw.instance is None:
        raise ValueError(f"{hw.name} is a datasheet GPU preset; allowed: a NeuronCore preset "
                         "(inf2, trn1, trn1n, trn2, trn2-ultraserver) for --model estimates")
    for name in ("tp", "pp", "dp", "micro_batch"):
        check_positive(name, getattr(layout, name))
    if layout.recompute not in RECOMPUTE:
        raise ValueError(f"recompute {layout.recompute!r} is not allowed; allowed: "
                         + ", ".join(RECOMPUTE))
    if model is not None and layout.tp > model.heads:
        raise ValueError(f"tp {layout.tp} is more than {model.name}'s {model.heads} attention "
                         f"heads; allowed: 1 to {model.heads}")
    if model is not None and layout.pp > model.layers:
        raise ValueError(f"pp {layout.pp} is more than {model.name}'s {model.layers} layers; "
                         f"allowed: 1 to {model.layers}")
    per_chip = hw.chip.logical_cores
    most = per_chip * hw.max_chips
    if layout.ranks > most:
        raise ValueError(f"tp x pp x dp = {layout.ranks} NeuronCores is more than {hw.name} "
                         f"describes; allowed: 1 to {most:,} ({per_chip} logical NeuronCores "
                         f"per chip x {hw.max_chips:,} chips)")
    return layout.ranks / per_chip


# ----- collectives ------------------------------------------------


def allreduce_s(nbytes, members, bandwidth, latency):
    """Seconds of one AllReduce of ``nbytes`` over ``members`` ranks, each with ``bandwidth``
    bytes/s: the faster of a ring and a binary tree (see the module docstring)."""
    if members <= 1 or nbytes <= 0:
        return 0.0
    ring = 2 * (members - 1) * latency + 2 * (members - 1) / members * nbytes / bandwidth
    tree = 2 * math.ceil(math.log2(members)) * (latency + nbytes / bandwidth)
    return min(ring, tree)


def group_allreduce_s(hw, nbytes, members, stride, cal):
    """AllReduce over a group of ``members`` ranks placed ``stride`` ranks apart.

    Ranks in one chip exchange through device memory (HBM bandwidth per rank); ranks on
    several chips of an instance share the chip's NeuronLink; a group spanning instances
    reduces inside each instance and then rings across them over the rank's share of EFA.

    Raises
    ------
    ValueError
        If the group needs a link or network figure the preset does not have.
    """
    if members <= 1:
        return 0.0
    view = rank_view(hw)
    per_instance = view["ranks_per_instance"]
    local = max(1, min(members, per_instance // stride))   # members per instance
    spans = math.ceil(members / local)
    if local * stride <= view["ranks_per_chip"]:
        inside_bw = view["hbm_bw"]
    else:
        if hw.chip.link_bandwidth is None:
            raise ValueError(f"{hw.source_file}: field chip.link_bandwidth: missing, so a "
                             "collective across chips cannot be timed; allowed: a figure such "
                             "as '384 GB/s'")
        inside_bw = hw.chip.link_bandwidth * cal.link_efficiency / view["ranks_per_chip"]
    latency = cal.collective_latency_s
    if spans == 1:
        return allreduce_s(nbytes, members, inside_bw, latency)
    if hw.instance.network_bandwidth is None:
        raise ValueError(f"{hw.source_file}: field instance.network_bandwidth: missing, so a "
                         "collective cannot span instances; allowed: groups within "
                         f"{per_instance} NeuronCores")
    across_bw = hw.instance.network_bandwidth / per_instance
    return allreduce_s(nbytes, local, inside_bw, latency) + \
        allreduce_s(nbytes / local, spans, across_bw, latency)


def p2p_s(hw, nbytes, stride, cal):
    """One point-to-point send of ``nbytes`` to the rank ``stride`` ranks on (pipeline)."""
    view = rank_view(hw)
    if stride >= view["ranks_per_instance"]:
        bandwidth = hw.instance.network_bandwidth / view["ranks_per_instance"]
    elif stride >= view["ranks_per_chip"]:
        bandwidth = hw.chip.link_bandwidth * cal.link_efficiency / view["ranks_per_chip"]
    else:
        bandwidth = view["hbm_bw"]
    return cal.collective_latency_s + nbytes / bandwidth


# ----- one pass over a stage --------------------------------------


def gemm_s(hw, gemm, wbytes, cal, mx=False):
    """(time, compute, memory, HBM bytes) of one :class:`Gemm` on one rank, in s and bytes;
    ``mx``: a weight GEMM runs at the tile's ``mxfp8`` rate (MXFP8 weights and activations)."""
    tile = hw.tile
    view = rank_view(hw)
    folds, n = split_gemm(gemm.m, gemm.k, gemm.n, gemm.count, tile.cols, view["tiles"])
    rate = tile.macs_per_pe_per_cycle[MX_WEIGHTS if mx and gemm.weight else "bf16"]
    cycles = gemm_tile_cycles(tile.rows, tile.cols, tile.psum_bank_depth, gemm.k,
                              math.ceil(n / rate), folds)
    compute = cycles * gemm.repeat / tile.clock_hz / cal.tensor_efficiency
    if gemm.weight:
        nbytes = gemm.m * gemm.k * wbytes + gemm.count * (gemm.k + gemm.m) * gemm.n * ACT_BYTES
    elif gemm.name.startswith("attn.scores"):       # K cache + queries; scores stay on chip
        nbytes = gemm.count * (gemm.m * gemm.k + gemm.k * gemm.n) * ACT_BYTES
    else:                                          # V cache + context out
        nbytes = gemm.count * (gemm.m * gemm.k + gemm.m * gemm.n) * ACT_BYTES
    nbytes *= gemm.repeat
    memory = nbytes / (view["hbm_bw"] * cal.hbm_efficiency)
    return max(compute, memory), compute, memory, nbytes


def nongemm_flop(model, tp, tokens, score_elems, sampled, sequence_parallel):
    """(Vector, Scalar) FP32 FLOP of one forward pass of one layer on one rank (see
    :data:`NONGEMM`); ``score_elems`` attention scores per rank, ``sampled`` sequences sampled
    (their logits counted once, outside the layers: pass ``tokens=0`` for that part)."""
    heads = math.ceil(model.heads / tp)
    kv = math.ceil(model.kv_heads / tp)
    ffn = math.ceil(model.ffn / tp)
    width = model.d_model / tp if sequence_parallel else model.d_model
    vec = tokens * (2 * NONGEMM["norm"] * width + 2 * NONGEMM["residual"] * width
                    + (0 if model.learned_positions else
                       NONGEMM["rotary"] * (heads + kv) * model.d_head)
                    + (NONGEMM["gate_vector"] * ffn if model.ffn_kind == "gated" else 0))
    vec += NONGEMM["softmax_vector"] * score_elems
    vec += sampled * NONGEMM["sampling"] * math.ceil(model.vocab / tp)
    sca = NONGEMM["softmax_scalar"] * score_elems + tokens * NONGEMM["act_scalar"] * ffn
    return vec, sca


def _nongemm_s(hw, vec, sca, notes):
    view = rank_view(hw)
    if view["vector"] is None or view["scalar"] is None:
        notes.add("non-GEMM work is not timed (no core.vector_fp32 / core.scalar_fp32 in the "
                  "preset)")
        return 0.0
    return vec / view["vector"] + sca / view["scalar"]


#: GEMMs the engine model times as part of the attention core (with its softmax).
ATTENTION_GEMMS = ("attn.scores", "attn.context")
#: Operations of :func:`systolica.nki.layer_costs.decoder_layer_costs` timed by
#: :func:`gemm_s` instead (the calibrated tile model with its HBM roofline).
LINEAR_OPS = ("qkv_proj", "o_proj", "up_proj", "down_proj")
#: Smallest bucket of the compiled graphs (NxD Inference feature guide, "Bucketing": powers
#: of two from 128; docs/scaling.md, "What the Neuron stack does to a request").
SMALLEST_BUCKET = 128


def bucket(length, largest):
    """The bucket a ``length``-token prompt or KV cache is padded to: the smallest power of
    two >= ``length`` from :data:`SMALLEST_BUCKET`, capped at ``largest`` (the graph's maximum
    length) but never below ``length``."""
    size = SMALLEST_BUCKET
    while size < length:
        size *= 2
    return max(length, min(size, largest))


@lru_cache(maxsize=64)
def _engine_target(name, core):
    from systolica.nki.costs import load_target, target_names

    for candidate in [name] + target_names():
        if candidate in target_names() and load_target(candidate).core == core:
            return candidate
    return None


def engine_target(hw):
    """The NKI engine-model target for ``hw``: the preset itself when it has ``[core.engines]``,
    else a preset with the same NeuronCore generation (inf2 and trn1n run trn1's
    NeuronCore-v2), else None (the FLOP-rate model is used)."""
    return None if hw.core is None else _engine_target(hw.name, hw.core.name)


#: How context encoding computes attention: ``flash`` (the fused kernel, causal blocks
#: skipped) or ``standard`` (the plain graph over the whole score matrix; see
#: :func:`context_attention`).
CONTEXT_ATTENTION = ("flash", "standard")
#: transformers-neuronx uses its flash-attention kernel in context encoding from Neuron 2.19
#: (Neuron 2.19.0 release notes, "Flash Attention kernel support in the Transformers NeuronX
#: library"; transformers-neuronx 0.11.351.0 release notes, "compiler optimized flash
#: attention kernel"), and only for prompts of at least this many tokens
#: (transformers-neuronx ``layers/attention.py``, ``flash_attention``: "kernel gives minimal
#: benefit for smaller sequence lengths").
TNX_FLASH_FROM = ((2, 19), 4096)


#: How a decode step reads the KV cache: ``kernel`` (the flash kernel's block loads, one
#: sequence and KV head at a time, as a cache laid out per sequence and head is read) or
#: ``sbh`` (Transformers NeuronX's ``(n_positions, n_seqs, n_heads, d_head)`` cache, read as
#: one stream; :func:`systolica.nki.layer_costs.kv_stream_costs`).
KV_LAYOUTS = ("kernel", "sbh")


def context_attention(sdk, prompt):
    """``"flash"`` or ``"standard"``: how transformers-neuronx of Neuron SDK ``sdk`` (a
    ``(major, minor)`` tuple) encodes a ``prompt``-token context (:data:`TNX_FLASH_FROM`)."""
    version, least = TNX_FLASH_FROM
    return "flash" if tuple(sdk) >= version and prompt >= least else "standard"


def engine_layer(hw, model, layout, phase, batch, seq, attention="flash", kv_layout="kernel"):
    """(seconds, engine -> seconds) of one layer's non-linear operations on one rank
    (attention core with its softmax, norms, rotary, activation, residual adds, KV append) from
    the NKI engine model (:mod:`systolica.nki.layer_costs`), or None when the hardware has no
    engine model. A logical core of ``lnc`` physical cores splits the work over them (its
    heads and rows), so the time is divided by ``lnc``.

    ``prefill`` pays its prompt's context-encoding bucket, ``decode`` its KV cache's
    token-generation bucket (:func:`bucket`; decoders only: an encoder's graph is compiled
    for its sequence length). ``train`` costs one micro-batch's forward and backward
    (:func:`systolica.nki.layer_costs.training_layer_costs`: backward twice the forward,
    the attention core once more when the layout recomputes it) at the exact sequence
    length, norms and residual adds split over the tensor-parallel ranks (sequence
    parallelism, as the module docstring's training model has it). An encoder (BERT) layer
    is non-causal, LayerNorm, learned positions. ``attention`` (prefill only): one of
    :data:`CONTEXT_ATTENTION`; ``kv_layout`` (decode only): one of :data:`KV_LAYOUTS`."""
    from systolica.nki.layer_costs import decoder_layer_costs, layer_seconds, training_layer_costs

    target = engine_target(hw)
    if target is None:
        return None
    tp = layout.tp
    split = max(1, math.ceil(model.d_head / 128))
    train = phase == "train"
    if train or not model.decoder:
        queries = keys = seq
    else:
        queries = 1 if phase == "decode" else bucket(seq, model.context)
        keys = bucket(seq, model.context) if phase == "decode" else queries
    ops = decoder_layer_costs(target, batch=batch, queries=queries, keys=keys,
                              d_model=model.d_model, heads=math.ceil(model.heads / tp) * split,
                              kv_heads=math.ceil(model.kv_heads / tp) * split,
                              d_head=math.ceil(model.d_head / split),
                              ffn=math.ceil(model.ffn / tp), gated=model.ffn_kind == "gated",
                              causal=model.decoder, rope=not model.learned_positions,
                              # the families read (MODEL_TYPES): Llama/Mistral RMSNorm with
                              # rotary positions, GPT-2/BERT LayerNorm with learned ones
                              norm="layer" if model.learned_positions else "rms",
                              kv_cache=model.decoder and not train,
                              row_split=tp if train else 1,
                              flash=attention == "flash" or phase != "prefill",
                              kv_layout="sbh" if kv_layout == "sbh" and phase == "decode"
                              else None)
    ops = {k: v for k, v in ops.items() if k not in LINEAR_OPS}
    if train:
        ops = training_layer_costs(ops, recompute_attention=layout.recompute != "none")
    seconds, charged = layer_seconds(ops)
    lnc = hw.chip.lnc
    return seconds / lnc, {e: v / lnc for e, v in charged.items()}


def _stage_model(model, layout, seq):
    """The busiest pipeline stage as a model: ceil(layers / pp) layers, context >= seq."""
    return replace(model, layers=math.ceil(model.layers / layout.pp),
                   context=max(model.context, seq))


def forward_pass(hw, model, layout, cal, phase, batch, seq, wbytes, notes, mx=False,
                 attention="flash", kv_layout="kernel"):
    """Breakdown of one pass on the busiest stage (prefill, decode, or train forward+backward).

    ``phase`` ``prefill``: ``batch`` prompts of ``seq`` tokens; ``decode``: one token per
    sequence with ``seq`` tokens of KV cache; ``train``: forward and backward of ``batch``
    sequences of ``seq`` tokens (one micro-batch), with the layout's recomputation. The
    attention GEMMs compute whole score blocks (no causal skipping); the softmax counts the
    causal half.
    """
    stage = _stage_model(model, layout, seq)
    L, tp = stage.layers, layout.tp
    out = Breakdown()
    work = transformer_workload(stage, phase, batch, seq, tp=tp, dtype_bytes=ACT_BYTES)
    gemms = list(work.gemms)
    if phase == "train" and layout.recompute != "none":
        # Forward GEMMs run again in the backward pass: the attention core (selective) or
        # every block GEMM (full); backward GEMMs end in .dX / .dW, the LM head is kept.
        forward = [g for g in gemms if g.name.count(".") == 1]
        again = forward if layout.recompute == "full" else [
            g for g in forward if g.name in ("attn.scores", "attn.context")]
        gemms += [replace(g, name=g.name + ".recompute") for g in again]
    engine = engine_layer(hw, model, layout, phase, batch, seq, attention, kv_layout)
    for g in gemms:
        if engine is not None and g.name.startswith(ATTENTION_GEMMS):
            if not g.name.endswith(".recompute"):
                out.flop += g.flop      # timed with the attention core below
            continue
        t, c, m, nbytes = gemm_s(hw, g, wbytes if g.weight else ACT_BYTES, cal, mx)
        out.gemms.append((g, t, c, m, nbytes))
        if c >= m:
            out.gemm_tensor_s += t
        out.gemm_s += t
        out.gemm_compute_s += c
        out.gemm_memory_s += m
        out.hbm_bytes += nbytes
        if not g.name.endswith(".recompute"):
            out.flop += g.flop
    tokens = batch * (1 if phase == "decode" else seq)
    heads = math.ceil(model.heads / tp)
    if phase == "decode":
        scores = batch * heads * seq
    else:
        scores = batch * heads * seq * (seq + 1) / 2           # causal
    passes = 3 if phase == "train" else 1                       # backward = 2 x forward
    if phase == "train" and layout.recompute != "none":
        passes_attn = passes + 1
    else:
        passes_attn = passes
    vec, sca = nongemm_flop(model, tp, tokens, 0, 0, phase == "train")
    svec, ssca = nongemm_flop(model, tp, 0, scores, 0, False)
    if model.decoder:
        sampled = batch if phase != "train" else 0
        hvec, hsca = nongemm_flop(model, tp, 0, 0, sampled, False)
    else:
        hvec = hsca = 0
    if engine is not None:
        seconds, charged = engine
        out.engine_s = {e: L * v for e, v in charged.items()}
        out.nongemm_s = L * seconds + _nongemm_s(hw, hvec, hsca, notes)
    else:
        out.nongemm_s = _nongemm_s(hw, L * (passes * vec + passes_attn * svec) + hvec,
                                   L * (passes * sca + passes_attn * ssca) + hsca, notes)
    # Tensor parallelism: 2 AllReduces per layer forward (4 with backward, 6 with full
    # recomputation), each of the layer's activations; logits gathered for sampling.
    act = tokens * model.d_model * ACT_BYTES
    per_layer = {"train": 4 + (2 if layout.recompute == "full" else 0)}.get(phase, 2)
    out.tp_comm_s = L * per_layer * group_allreduce_s(hw, act, tp, 1, cal)
    if model.decoder and phase != "train":
        logits = batch * model.vocab * 4
        out.tp_comm_s += group_allreduce_s(hw, logits, tp, 1, cal) / 2   # AllGather: half
    out.overhead_s = L * (3 if phase == "train" else 1) * cal.layer_overhead_s
    return out


# ----- inference --------------------------------------------------


def _inference_memory(model, layout, batch, total_len, wbytes):
    stage = math.ceil(model.layers / layout.pp)
    params = stage * model.block_params + model.embedding_params
    kv = 2 * stage * math.ceil(model.kv_heads / layout.tp) * model.d_head * total_len * batch \
        * ACT_BYTES
    return params / layout.tp * wbytes + kv


def head_split_notes(model, layout):
    """The estimate's notes (set of str) on how ``layout.tp`` splits ``model``'s attention
    heads: empty when tp divides the query and KV heads, else one note stating the split.

    A tp that does not divide the heads is estimated, not refused: NxD Inference asks for
    "the number of attention heads [to] be divisible by the tensor-parallelism degree" (NxD
    Inference features guide, "Tensor-parallelism support"), but transformers-neuronx, which
    ran AWS's published Inf2 decoder figures at tp 24 (32-head Llama-2-7B among them), pads
    the heads up to a multiple of tp (its ``decoder.py``, ``round_up_to_divisor``). The
    model gives each NeuronCore ceil(heads / tp) heads, which is what padding costs."""
    notes = set()
    kinds = (("attention", model.heads),) + (
        (("KV", model.kv_heads),) if model.kv_heads != model.heads else ())
    for kind, heads in kinds:
        if heads % layout.tp and not (kind == "KV" and layout.tp % heads == 0):
            per_core = math.ceil(heads / layout.tp)
            notes.add(f"tp {layout.tp} does not divide {model.name}'s {heads} {kind} heads: "
                      f"estimated as transformers-neuronx runs it, padded to "
                      f"{per_core * layout.tp} heads, {per_core} per NeuronCore "
                      f"({per_core * layout.tp - heads} padding); NxD Inference refuses "
                      f"such a tp (its heads must divide by tp)")
    return notes


def inference(hw, model, layout, batch, input_len, output_len, weights="bf16", cal=IDEAL,
              attention="flash", kv_layout="kernel"):
    """TTFT, TPOT and tokens/s of ``batch`` requests of ``input_len`` prompt tokens and
    ``output_len`` generated tokens (see the module docstring).

    Returns
    -------
    LLMEstimate
        ``ttft_s`` (s), ``tpot_s`` (s, mean per output token), ``tokens_per_s``
        (``batch / tpot_s``, generated tokens per second), memory per rank (bytes).

    ``attention``: how context encoding computes attention, one of
    :data:`CONTEXT_ATTENTION` (:func:`context_attention` gives what a transformers-neuronx
    release does). ``kv_layout``: how a decode step reads the KV cache, one of
    :data:`KV_LAYOUTS` (``sbh``: as transformers-neuronx lays it out).

    Raises
    ------
    ValueError
        On a bad degree, a layout larger than the hardware, a model that does not decode, a
        size below 1 or an unknown ``attention``; the message names the argument and the
        allowed values.
    """
    chips = check_layout(hw, layout, model)
    if attention not in CONTEXT_ATTENTION:
        raise ValueError(f"attention {attention!r} is not allowed; allowed: "
                         + ", ".join(CONTEXT_ATTENTION))
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout {kv_layout!r} is not allowed; allowed: "
                         + ", ".join(KV_LAYOUTS))
    for name, value in (("batch", batch), ("input_len", input_len), ("output_len", output_len)):
        check_positive(name, value)
    if weights not in WEIGHT_BYTES:
        raise ValueError(f"weights {weights!r} is not allowed; allowed: "
                         + ", ".join(WEIGHT_BYTES))
    if not model.decoder and output_len > 1:
        raise ValueError(f"{model.name} is an encoder (no LM head): it does not decode; "
                         "allowed: --phase prefill or train")
    wbytes = WEIGHT_BYTES[weights]
    mx = weights == MX_WEIGHTS
    if mx and MX_WEIGHTS not in hw.dtypes():
        raise ValueError(f"weights 'mxfp8' computes the linear layers in MXFP8, but {hw.name} "
                         f"has no mxfp8 rate (it has {', '.join(hw.dtypes())}); allowed: a "
                         "NeuronCore-v4 preset (trn3, trn3-gen2) or another weight type")
    notes = head_split_notes(model, layout)
    if mx:
        notes.add("MXFP8 weights and activations: the linear layers run at the mxfp8 rate, "
                  "activations quantised on chip (stored and moved as BF16); attention, the KV "
                  "cache stay BF16")
    total = input_len + output_len
    if total > model.context:
        parts = (f"input {input_len} + the first generated token" if output_len == 1 else
                 f"input {input_len} + output {output_len}")
        notes.add(f"{parts} = {total} tokens is more than {model.name}'s "
                  f"max_position_embeddings ({model.context}); estimated as if it allowed them")
    # The graphs are compiled for the whole sequence (transformers-neuronx's n_positions, its
    # largest token-generation bucket; NxD Inference's seq_len): a cache beyond the model's
    # max_position_embeddings still pads to the next bucket.
    graph = replace(model, context=max(model.context, total))
    if batch % layout.dp:
        notes.add(f"batch {batch} is not a multiple of dp {layout.dp}: the busiest replica "
                  "takes the larger share")
    per_replica = math.ceil(batch / layout.dp)
    stride = layout.tp

    def pipeline(b):
        if layout.pp == 1:
            return b.total_s
        return layout.pp * b.total_s + (layout.pp - 1) * p2p_s(
            hw, per_replica * model.d_model * ACT_BYTES, stride, cal)

    prefill = forward_pass(hw, graph, layout, cal, "prefill", per_replica, input_len,
                           wbytes, notes, mx, attention)
    ttft = pipeline(prefill)
    if output_len > 1:
        lengths = sorted({round(x) for x in _linspace(input_len + 1, total - 1,
                                                      min(KV_SAMPLES, output_len - 1))})
        steps = [forward_pass(hw, graph, layout, cal, "decode", per_replica, s, wbytes, notes,
                              mx, kv_layout=kv_layout) for s in lengths]
        mean = Breakdown()
        for b in steps:
            mean.add(b, 1 / len(steps))
        tpot = sum(pipeline(b) for b in steps) / len(steps)
    else:
        mean, tpot = Breakdown(), None
    view = rank_view(hw)
    if cal.ideal:
        notes.add("uncalibrated: HBM and tensor engine at 100% of their figures, collectives "
                  "without latency: a lower limit")
    est = LLMEstimate(hardware=hw, model=model, layout=layout,
                      phase="decode" if output_len > 1 else "prefill", calibration=cal,
                      chips=chips,
                      memory_bytes=_inference_memory(model, layout, per_replica, total, wbytes),
                      memory_capacity=view["hbm_bytes"], ttft_s=ttft, tpot_s=tpot,
                      tokens_per_s=batch / tpot if tpot else None,
                      terms={"prefill": prefill.as_dict(), "decode_step": mean.as_dict()},
                      notes=sorted(notes), gemms=(steps[-1] if output_len > 1 else
                                                  prefill).gemms)
    _memory_note(est)
    return est


def _linspace(lo, hi, count):
    if count <= 1 or hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def _memory_note(est):
    if est.fits is False:
        est.notes.append(f"needs {est.memory_bytes / 2**30:,.1f} GiB per NeuronCore, more than "
                         f"its {est.memory_capacity / 2**30:,.1f} GiB share of HBM")


# ----- training ---------------------------------------------------


def optimizer_seconds(hw, weights, cal):
    """Seconds of one AdamW update of ``weights`` FP32 weights on one rank: the NKI engine
    model's busiest engine (:func:`systolica.nki.layer_costs.optimizer_costs`, HBM at the
    calibrated efficiency), or, without an engine model, 32 bytes per weight over the rank's
    HBM bandwidth."""
    target = engine_target(hw)
    if target is None:
        return weights * 2 * 16 / (rank_view(hw)["hbm_bw"] * cal.hbm_efficiency)
    from systolica.nki.layer_costs import optimizer_costs

    lnc = hw.chip.lnc
    cost = optimizer_costs(target, weights / lnc)
    cost["hbm"] /= cal.hbm_efficiency
    return max(cost.values())


def training(hw, model, layout, global_batch, seq, cal=IDEAL):
    """Step time, sequences/s and MFU of one optimizer step (see the module docstring).

    Returns
    -------
    LLMEstimate
        ``step_s`` (s), ``seq_per_s``, ``mfu`` (fraction of the ranks' BF16 peak), memory per
        rank (bytes: BF16 weights 2 and FP32 gradients 4 per weight; FP32 master weights and
        Adam moments 12 per weight, divided by dp under ZeRO-1; activations of the
        micro-batches in flight).

    Raises
    ------
    ValueError
        If ``global_batch`` is not a multiple of ``dp x micro_batch``, or as
        :func:`inference`.
    """
    chips = check_layout(hw, layout, model)
    for name, value in (("global_batch", global_batch), ("seq", seq)):
        check_positive(name, value)
    per_step = layout.dp * layout.micro_batch
    if global_batch % per_step:
        raise ValueError(f"global batch {global_batch} is not a multiple of dp x micro-batch "
                         f"= {per_step}; allowed: a multiple of {per_step}")
    notes = head_split_notes(model, layout)
    if seq > model.context:
        notes.add(f"sequence {seq} is more than {model.name}'s max_position_embeddings "
                  f"({model.context}); estimated as if it allowed it")
    micro = global_batch // per_step
    mb = forward_pass(hw, model, layout, cal, "train", layout.micro_batch, seq, 2, notes)
    boundary = layout.micro_batch * seq * model.d_model * ACT_BYTES / layout.tp
    if layout.pp > 1:
        mb.pp_comm_s = 2 * p2p_s(hw, boundary, layout.tp, cal)   # activations on, gradients back
    pipeline_s = (micro + layout.pp - 1) * mb.total_s
    stage_layers = math.ceil(model.layers / layout.pp)
    owned = (stage_layers * model.block_params + model.embedding_params) / layout.tp
    stride = layout.tp * layout.pp
    if layout.zero1:
        grads = group_allreduce_s(hw, owned * 4, layout.dp, stride, cal) / 2   # ReduceScatter
        weights = group_allreduce_s(hw, owned * 2, layout.dp, stride, cal) / 2  # AllGather
        dp_s = grads + weights
        updated = owned / layout.dp
    else:
        dp_s = group_allreduce_s(hw, owned * 4, layout.dp, stride, cal)
        updated = owned
    view = rank_view(hw)
    optimizer_s = optimizer_seconds(hw, updated, cal)
    step = pipeline_s + dp_s + optimizer_s
    full = transformer_workload(replace(model, context=max(model.context, seq)), "train", 1,
                                seq, tp=1, dtype_bytes=ACT_BYTES)
    model_flop = sum(g.flop for g in full.gemms) * global_batch
    mfu = model_flop / step / (layout.ranks * view["peak"])
    state = 2 + 4 + 12 / (layout.dp if layout.zero1 else 1)   # bytes per owned weight
    in_flight = min(layout.pp, micro)
    per_layer_act = {"none": 34 + 5 * model.heads * seq / model.d_model, "selective": 34,
                     "full": 2}[layout.recompute]
    activations = per_layer_act * layout.micro_batch * seq * model.d_model / layout.tp \
        * stage_layers * in_flight
    if cal.ideal:
        notes.add("uncalibrated: HBM and tensor engine at 100% of their figures, collectives "
                  "without latency: a lower limit")
    if layout.pp > 1 and micro < 4 * layout.pp:
        notes.add(f"{micro} micro-batches for {layout.pp} stages: the 1F1B bubble is "
                  f"{(layout.pp - 1) / (micro + layout.pp - 1):.0%} of the step")
    est = LLMEstimate(hardware=hw, model=model, layout=layout, phase="train", calibration=cal,
                      chips=chips, memory_bytes=owned * state + activations,
                      memory_capacity=view["hbm_bytes"], step_s=step,
                      seq_per_s=global_batch / step, mfu=mfu,
                      terms={"micro_batch": mb.as_dict(), "micro_batches": micro,
                             "pipeline_s": pipeline_s,
                             "bubble_s": (layout.pp - 1) * mb.total_s, "dp_comm_s": dp_s,
                             "optimizer_s": optimizer_s},
                      notes=sorted(notes), gemms=mb.gemms)
    _memory_note(est)
    return est


def training_scaling(hw, model, layout, global_batch, seq, cal=IDEAL, max_ranks=None):
    """Training throughput from one replica up to the cluster, global batch fixed.

    ``dp`` takes the powers of two (and the layout's own ``dp``) for which ``tp x pp x dp``
    fits ``max_ranks`` (default: the whole hardware) and ``dp x micro_batch`` divides the
    global batch. Efficiency is sequences/s per rank relative to the smallest point.

    Returns
    -------
    list of dict
        ``chips``, ``tp``, ``pp``, ``dp``, ``step_s``, ``seq_per_s``, ``efficiency``, ``mfu``.
    """
    most = max_ranks or hw.chip.logical_cores * hw.max_chips
    per_replica = layout.tp * layout.pp
    options = {1 << i for i in range(64) if per_replica << i <= most} | {layout.dp}
    out = []
    base = None
    for dp in sorted(options):
        if per_replica * dp > most or global_batch % (dp * layout.micro_batch):
            continue
        est = training(hw, model, replace(layout, dp=dp), global_batch, seq, cal)
        per_rank = est.seq_per_s / (per_replica * dp)
        base = base or per_rank
        out.append({"chips": est.chips, "tp": layout.tp, "pp": layout.pp, "dp": dp,
                    "step_s": est.step_s, "seq_per_s": est.seq_per_s,
                    "efficiency": per_rank / base, "mfu": est.mfu})
    return out
