"""Per-operation engine costs of one decoder layer on one NeuronCore (issue 28, point 1).

Every cost comes from the engine model's per-instruction table (:mod:`systolica.nki.costs`);
nothing here restates a constant. Each operation is a dict of seconds per engine,
``{"tensor", "vector", "scalar", "gpsimd", "dma", "hbm"}`` (what
:func:`systolica.nki.costs.engine_seconds` returns: work per engine, not scheduled):

- **Attention core** (QK^T, softmax exp/max/sum/reciprocal, probability transposes,
  PSUM-to-SBUF copies, PV, K/V streaming): the project's flash kernel
  (:mod:`systolica.nki.kernels.attention`) traced shapes-only (``tensor_engine="none"``) at
  one and two 512-key blocks for one group of query tiles; the difference is the cost of one
  block, the rest the group's fixed cost. The kernel's instruction stream is linear in the
  block count, so ``fixed + blocks x block`` is exact for any length (the unit test checks
  it against a direct trace). Where the head dimension fits a row tile
  (:func:`attention_row_tiles`: d_head <= 64 with two row tiles on NeuronCore-v2, <= 32
  with four from NeuronCore-v3), the kernel is traced with its scores in row tiles
  (``row_tiles``). Causal prefill skips the blocks above the diagonal, as the
  Neuron flash kernels do: query group ``i`` (512 queries) reads ``i + 1`` blocks.
- **Linear layers** (QKV, output projection, MLP): :func:`~systolica.nki.costs.matmul_seconds`
  on TensorE; their weights cross HBM once per pass.
- **Elementwise work** (RMS norms, rotary embedding, activation, gate multiply, residual adds):
  :func:`~systolica.nki.costs.elementwise_seconds` with the opcode the kernels use
  (:mod:`systolica.nki.kernels.norms` for the norm).
- **KV-cache appends**: HBM bytes written.
- **KV-cache reads in decode** (``kv_layout="sbh"``): the cache read as Transformers NeuronX
  lays it out, ``(n_positions, n_seqs, n_heads, d_head)`` per core
  (:func:`kv_stream_costs`): the K and V of every sequence and head of the core stream
  together, in contiguous chunks of one position's ``n_seqs x n_heads x d_head`` values,
  instead of the flash kernel's per-head block loads.

How the engines overlap (:func:`layer_seconds`): inside the flash loop TensorE, VectorE,
ScalarE and the DMA queues work on different query tiles at once (issue 24's profile of the
kernel: 56 % of the time two or more compute engines busy, 84 % of the DMA under compute),
so the attention core takes its busiest engine's total plus one block's remaining engines
(the pipeline's fill and drain, which no other tile hides). The other operations depend on
their predecessor's whole output (a norm needs the full row sum, a projection the norm's
output), so they run one after another, each at its own busiest engine (HBM weight reads are
double-buffered under TensorE).
"""

from functools import lru_cache
from math import ceil

from systolica.golden import TILE_SPLITS

from .costs import (
    ENGINE_TERMS,
    dma_efficiency,
    elementwise_seconds,
    engine_seconds,
    load_target,
    matmul_seconds,
)

KEY_BLOCK = 512     # keys per block of the flash kernel (its KB)
QUERY_TILE = 128    # queries per tile (its P)


BF16 = "bfloat16"
#: KV-cache layouts :func:`decoder_layer_costs` reads in decode: ``None`` (the flash kernel's
#: own per-head K/V block loads) or ``"sbh"`` (:func:`kv_stream_costs`).
KV_LAYOUTS = (None, "sbh")
#: Norm kinds of :func:`decoder_layer_costs` and their VectorE passes per element.
NORM_VECTOR_PASSES = {"rms": 1, "layer": 4}
NORMS = tuple(NORM_VECTOR_PASSES)
#: Passes of a backward per forward pass (the usual count: the gradients of the input and
#: of the weights each cost what the forward did).
BACKWARD_PASSES = 2
#: The ALU operation of the elementwise instructions a layer issues (adds and multiplies).
_ALU = {"tensor_tensor": {"op": "add"}, "tensor_scalar": {"op0": "multiply"}}


def attention_row_tiles(target, d_head):
    """Row tiles the flash kernel's scores use on ``target`` for heads of ``d_head`` (int):
    the most of 4 and 2 that the target allows (:data:`systolica.golden.TILE_SPLITS`:
    2 on NeuronCore-v2, 4 from NeuronCore-v3; NKI API reference, ``nki.isa.nc_matmul``,
    "Tiling mode") with ``d_head <= 128 / tiles``, else 1 (the whole array)."""
    splits = TILE_SPLITS.get(load_target(target).name, 1)
    return next((r for r in (4, 2) if r <= splits and d_head <= QUERY_TILE // r), 1)


def _zero():
    return dict.fromkeys(ENGINE_TERMS, 0.0)


@lru_cache(maxsize=64)
def flash_block_costs(target, d_head, group, block=KEY_BLOCK):
    """(fixed, per_block) engine seconds of the flash kernel for one group of ``group``
    128-query tiles: ``fixed`` the group's Q loads, memsets, reciprocal and stores,
    ``per_block`` one block of ``block`` keys (512, or 128/256 when the keys are fewer; dicts
    as :func:`systolica.nki.costs.engine_seconds`), with the scores in
    :func:`attention_row_tiles` row tiles.

    Raises
    ------
    ValueError
        If ``d_head`` is not 1..128, ``group`` not 1..4 or ``block`` not 128, 256, 384, 512.
    """
    # traced lazily: only the first call per shape runs the kernel
    import numpy as np
    from ml_dtypes import bfloat16

    from . import run
    from .kernels import attention

    if not 1 <= d_head <= QUERY_TILE:
        raise ValueError(f"d_head must be 1..{QUERY_TILE}, not {d_head!r}")
    if not 1 <= group <= attention.GROUP:
        raise ValueError(f"group must be 1..{attention.GROUP}, not {group!r}")
    if block not in range(QUERY_TILE, KEY_BLOCK + 1, QUERY_TILE):
        raise ValueError(f"block must be a multiple of {QUERY_TILE} up to {KEY_BLOCK}, "
                         f"not {block!r}")
    totals = []
    for blocks in (1, 2):
        sk = blocks * block
        q = np.zeros((d_head, group * QUERY_TILE), bfloat16)
        k, v = np.zeros((d_head, sk), bfloat16), np.zeros((sk, d_head), bfloat16)
        trace = run(attention.attention_fwd, q, k, v, block=block, target=target,
                    row_tiles=attention_row_tiles(target, d_head),
                    tensor_engine="none").instructions
        totals.append(engine_seconds(trace, target))
    one, two = totals
    block = {e: two[e] - one[e] for e in ENGINE_TERMS}
    fixed = {e: one[e] - block[e] for e in ENGINE_TERMS}
    return fixed, block


def attention_costs(target, *, heads, d_head, queries, keys, causal):
    """Engine seconds of the attention core of ``heads`` heads on one core, plus the
    busiest-engine total and one block's fill (see :func:`layer_seconds`).

    ``queries`` query rows per head (prompt tokens, or batch x query heads per KV head in
    decode), ``keys`` cached keys; ``causal`` skips blocks above the diagonal.

    Returns
    -------
    (dict, dict)
        (totals per engine, one block per engine), seconds.
    """
    tiles = ceil(queries / QUERY_TILE)
    group = min(4, tiles)
    groups = ceil(tiles / group)
    # fewer keys than a block: one block of the keys rounded up to 128 (a 128-key encoder
    # sequence or KV bucket does not pay for 512)
    size = min(KEY_BLOCK, ceil(keys / QUERY_TILE) * QUERY_TILE)
    nblocks = ceil(keys / size)
    if causal:
        per_group = [min(nblocks, ceil((i + 1) * group * QUERY_TILE / size))
                     for i in range(groups)]
        blocks = sum(per_group)
    else:
        blocks = groups * nblocks
    fixed, block = flash_block_costs(target, d_head, group, size)
    total = {e: heads * (groups * fixed[e] + blocks * block[e]) for e in ENGINE_TERMS}
    return total, block


def kv_stream_costs(target, *, batch, kv_heads, d_head, keys, value_bytes=2):
    """(dma, hbm) seconds of reading one layer's K and V caches on one core when the cache is
    laid out ``(n_positions, n_seqs, n_heads, d_head)``, the layout Transformers NeuronX
    gives its KV cache (``transformers_neuronx/layers/attention.py``: ``context_combined``
    unpacks the values as ``n_positions, n_seqs, n_heads_tp, d_head``; later versions name it
    "SBH cache layout" beside a BSH option, ``NeuronConfig.cache_layout``).

    One position holds ``batch x kv_heads x d_head`` contiguous values of the core's shard,
    so a decode step that reads ``keys`` positions of K and of V moves ``2 x keys`` chunks of
    that size. The chunks are dealt over all the core's DMA queues at the efficiency a chunk
    of that size reaches (:func:`systolica.nki.costs.dma_efficiency`): batch 1 with one head
    per core moves 256-byte chunks (about half of a queue's peak), batch 8 with two heads
    4 KiB ones (over 90 %).

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    """
    for name, value in (("batch", batch), ("kv_heads", kv_heads), ("d_head", d_head),
                        ("keys", keys), ("value_bytes", value_bytes)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    t = load_target(target)
    chunk = batch * kv_heads * d_head * value_bytes
    nbytes = 2 * keys * chunk
    dma = nbytes / (t.dma_engines * t.dma_engine_bandwidth * dma_efficiency(chunk, t))
    return dma, nbytes / t.hbm_bandwidth


@lru_cache(maxsize=4096)
def decoder_layer_costs(target, *, batch, queries, keys, d_model, heads, kv_heads, d_head, ffn,
                        gated, weight_bytes=2, causal=True, rope=True, norm="rms",
                        kv_cache=True, row_split=1, flash=True, kv_layout=None):
    """Per-operation engine seconds of one decoder layer on one core (see the module
    docstring): ``batch`` sequences of ``queries`` new tokens each (the prompt in prefill,
    1 in decode) attending to ``keys`` tokens (prefill: causal over the prompt, ``keys ==
    queries``; decode: the whole KV cache). ``heads``, ``kv_heads``, ``ffn`` are per core
    (already divided by the tensor-parallel degree); ``weight_bytes`` per weight.

    An encoder layer (BERT) is ``causal=False`` (every query sees every key), ``rope=False``
    (learned positions, added once before the first layer), ``norm="layer"`` (LayerNorm as
    :func:`systolica.nki.kernels.norms.layernorm` issues it: a ScalarE square-and-sum and
    four VectorE passes: mean, subtract, scale, and the gamma/beta pair counted as one more),
    ``kv_cache=False`` (no cache append; training passes it too). ``row_split``: the tokens
    of the norms and residual adds are split over that many cores (Megatron sequence
    parallelism, the tensor-parallel degree; 1 without it).

    ``flash=False``: the attention is the plain graph (scores, mask, softmax, context as
    separate operations over the whole score matrix, as transformers-neuronx builds context
    encoding without its flash kernel): every key block is computed, the causal half too,
    and a VectorE pass applies the mask to every score (``"attention_mask"``). The engine
    work per score block is the flash kernel's (the same matmuls, max, exp, sum, transposes
    and copies); the score rows of a 128-query tile fit SBUF up to 48 k FP32 keys per
    partition (192 KiB), so no HBM round trip of the matrix is charged.

    ``kv_layout`` (decode, ``queries == 1``): ``None`` streams K and V as the flash kernel
    loads them, block by block for each sequence and KV head; ``"sbh"`` reads the cache as
    one stream in Transformers NeuronX's layout (:func:`kv_stream_costs`): the attention
    core's DMA and HBM terms (and its block's, in proportion) are those of that stream.

    Returns
    -------
    dict of str -> dict of str -> float
        Operation name -> engine -> seconds; the ``attention`` entry also carries
        ``"_block"`` (one block's engine seconds) for :func:`layer_seconds`.

    Raises
    ------
    ValueError
        On a size that is not a positive integer, or ``d_head`` over 128.
    """
    for name, value in (("batch", batch), ("queries", queries), ("keys", keys),
                        ("d_model", d_model), ("heads", heads), ("kv_heads", kv_heads),
                        ("d_head", d_head), ("ffn", ffn), ("row_split", row_split)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be None or 'sbh', not {kv_layout!r}")
    t = load_target(target)
    tokens = batch * queries
    ops = {}

    def linear(name, fan_in, fan_out):
        cost = _zero()
        cost["tensor"] = matmul_seconds(tokens, fan_in, fan_out, t)
        cost["hbm"] = (fan_in * fan_out * weight_bytes
                       + tokens * (fan_in + fan_out) * 2) / t.hbm_bandwidth
        ops[name] = cost

    def elementwise(name, engine, elements, opcode, passes=1, also=None, rows=tokens):
        # BF16 activations; the rows x elements values spread over all partitions (an
        # elementwise operation has no row structure, so a single decode token's row is laid
        # out as [lanes, elements / lanes], not on one partition)
        per_lane = ceil(rows * elements / t.lanes)
        kwargs = {"partitions": t.lanes, "in_dtype": BF16, "out_dtype": BF16}
        cost = _zero()
        cost[engine] = passes * elementwise_seconds(engine, per_lane, t, opcode=opcode,
                                                    params=_ALU.get(opcode), **kwargs)
        if also:       # a second engine's instruction on the same values
            cost[also[0]] += elementwise_seconds(also[0], per_lane, t, opcode=also[1],
                                                 params=_ALU.get(also[1]), **kwargs)
        ops[name] = cost

    rows = ceil(tokens / row_split)     # rows of the norms and residuals on this core

    def normalise(name):
        # RMS norm as nki/kernels/norms.py issues it: square-and-sum on ScalarE (activation
        # with reduce), the scale multiply on VectorE; LayerNorm: the same ScalarE pass and
        # NORM_VECTOR_PASSES["layer"] VectorE passes.
        if norm == "rms":
            elementwise(name, "scalar", d_model, "activation", also=("vector", "tensor_scalar"),
                        rows=rows)
        else:
            elementwise(name, "vector", d_model, "tensor_scalar",
                        passes=NORM_VECTOR_PASSES[norm], also=("scalar", "activation"),
                        rows=rows)

    normalise("input_norm")
    linear("qkv_proj", d_model, (heads + 2 * kv_heads) * d_head)
    if rope:
        # rotary: x * cos, rotate_half(x) * sin, their sum, over Q and K
        elementwise("rope", "vector", (heads + kv_heads) * d_head, "tensor_tensor", passes=3)
    if kv_cache:
        kv = _zero()
        kv["hbm"] = tokens * 2 * kv_heads * d_head * 2 / t.hbm_bandwidth
        ops["kv_append"] = kv
    if queries == 1:      # decode: a KV head's query heads share its K/V stream
        total, block = attention_costs(target, heads=batch * kv_heads, d_head=d_head,
                                       queries=ceil(heads / kv_heads), keys=keys, causal=False)
        if kv_layout == "sbh":
            dma, hbm = kv_stream_costs(target, batch=batch, kv_heads=kv_heads,
                                       d_head=d_head, keys=keys)
            for engine, seconds in (("dma", dma), ("hbm", hbm)):
                ratio = seconds / total[engine] if total[engine] else 0.0
                total = {**total, engine: seconds}
                block = {**block, engine: block[engine] * ratio}
    else:
        total, block = attention_costs(target, heads=batch * heads, d_head=d_head,
                                       queries=queries, keys=keys, causal=causal and flash)
    ops["attention"] = {**total, "_block": block}
    if not flash:
        elementwise("attention_mask", "vector", keys, "tensor_tensor",
                    rows=batch * heads * queries)
    linear("o_proj", heads * d_head, d_model)
    elementwise("attn_residual", "vector", d_model, "tensor_tensor", rows=rows)
    normalise("post_norm")
    linear("up_proj", d_model, (2 if gated else 1) * ffn)
    elementwise("activation", "scalar", ffn, "activation",
                also=("vector", "tensor_tensor") if gated else None)
    linear("down_proj", ffn, d_model)
    elementwise("mlp_residual", "vector", d_model, "tensor_tensor", rows=rows)
    return ops


def training_layer_costs(forward, *, recompute_attention=True):
    """Engine seconds of one layer's forward and backward pass in training, from its forward
    costs (:func:`decoder_layer_costs` with ``kv_cache=False``).

    Each elementwise operation's backward runs the same instructions on the gradient and
    one more product with the saved input (the chain rule), so it costs twice its forward,
    the same count the scaling layer uses for backward GEMMs (:data:`BACKWARD_PASSES`). The
    flash-attention backward (FlashAttention-2, Dao 2023, Algorithm 2) recomputes the scores
    and their ``exp`` from the saved row statistics instead of storing them, which is one
    more forward pass of the attention core when ``recompute_attention`` (the scaling layer's
    ``selective`` and ``full`` recomputation; ``none`` stores the probabilities).

    Returns
    -------
    dict
        As :func:`decoder_layer_costs`, every engine term (and the attention core's
        ``"_block"`` fill) multiplied by its number of passes.
    """
    out = {}
    for name, cost in forward.items():
        passes = 1 + BACKWARD_PASSES + (1 if name == "attention" and recompute_attention
                                        else 0)
        out[name] = {e: passes * cost[e] for e in ENGINE_TERMS}
        if "_block" in cost:
            out[name]["_block"] = {e: passes * v for e, v in cost["_block"].items()}
    return out


#: AdamW per FP32 weight, as an NKI optimizer kernel issues it: VectorE ``m = b1 m + (1 -
#: b1) g`` (2 passes), ``v = b2 v + (1 - b2) g^2`` (3), ``m / (sqrt(v) + eps)`` (1), the
#: decayed update and its subtraction (2); ScalarE the ``sqrt`` with its ``+ eps`` bias (1);
#: HBM reads weight, gradient and the two moments and writes weight and moments back (FP32
#: each: 28 bytes) plus the BF16 copy of the weight (2 bytes) the next forward reads.
ADAMW = {"vector": 8, "scalar": 1, "hbm_bytes": 30}


def optimizer_costs(target, weights):
    """Engine seconds of one AdamW update of ``weights`` FP32 weights on one core (see
    :data:`ADAMW`); the update's time is the busiest engine's (the passes stream weight
    tiles through SBUF with the DMA double-buffered).

    Raises
    ------
    ValueError
        If ``weights`` is not a positive number.
    """
    if not isinstance(weights, int | float) or isinstance(weights, bool) or weights <= 0:
        raise ValueError(f"weights must be a positive number, not {weights!r}")
    t = load_target(target)
    per_lane = ceil(weights / t.lanes)
    cost = _zero()
    fp32 = {"partitions": t.lanes, "in_dtype": "float32", "out_dtype": "float32"}
    cost["vector"] = ADAMW["vector"] * elementwise_seconds(
        "vector", per_lane, t, opcode="tensor_tensor", params=_ALU["tensor_tensor"], **fp32)
    cost["scalar"] = ADAMW["scalar"] * elementwise_seconds("scalar", per_lane, t,
                                                           opcode="activation", **fp32)
    cost["hbm"] = weights * ADAMW["hbm_bytes"] / t.hbm_bandwidth
    return cost


def layer_seconds(ops):
    """Time of one layer from :func:`decoder_layer_costs` and its engine terms.

    Returns
    -------
    (float, dict)
        (seconds, engine -> seconds charged to that engine: each operation's time goes to
        its busiest engine; the attention core's fill goes to the engine of its block's
        second-largest term).
    """
    charged = _zero()
    seconds = 0.0
    for name, cost in ops.items():
        terms = {e: cost[e] for e in ENGINE_TERMS}
        busiest = max(terms, key=terms.get)
        charged[busiest] += terms[busiest]
        seconds += terms[busiest]
        if name == "attention":
            block = cost["_block"]
            fill = sum(block.values()) - max(block.values())
            second = sorted(block, key=block.get)[-2]
            charged[second] += fill
            seconds += fill
    return seconds, charged


__all__ = ["ADAMW", "BACKWARD_PASSES", "KV_LAYOUTS", "NORMS", "attention_costs",
           "attention_row_tiles", "decoder_layer_costs", "flash_block_costs", "kv_stream_costs",
           "layer_seconds", "optimizer_costs", "training_layer_costs"]
