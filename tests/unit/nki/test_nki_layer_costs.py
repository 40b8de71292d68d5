"""Issue 28's per-operation engine costs (systolica.nki.layer_costs) against the kernels."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

from systolica import nki
from systolica.nki.costs import ENGINE_TERMS, engine_seconds, load_target
from systolica.nki.kernels import attention
from systolica.nki.layer_costs import (
    ADAMW,
    attention_costs,
    attention_row_tiles,
    decoder_layer_costs,
    kv_stream_costs,
    layer_seconds,
    optimizer_costs,
    training_layer_costs,
)


@pytest.mark.parametrize(("target", "d", "sq", "sk"),
                         [("trn1", 128, 512, 1536), ("trn2", 64, 1024, 2048),
                          ("trn1", 128, 128, 2048)])
def test_attention_closed_form_matches_kernel_trace(target, d, sq, sk):
    """fixed + blocks x block, from traces at 1 and 2 blocks, equals the engine work of the
    flash kernel traced directly at a third size (non-causal: the kernel computes every
    block)."""
    q, k, v = np.zeros((d, sq), bfloat16), np.zeros((d, sk), bfloat16), \
        np.zeros((sk, d), bfloat16)
    trace = nki.run(attention.attention_fwd, q, k, v, target=target,
                    row_tiles=attention_row_tiles(target, d), tensor_engine="none").instructions
    direct = engine_seconds(trace, target)
    closed, _ = attention_costs(target, heads=1, d_head=d, queries=sq, keys=sk, causal=False)
    for engine in ENGINE_TERMS:
        assert closed[engine] == pytest.approx(direct[engine], rel=1e-9, abs=1e-15), engine


@pytest.mark.parametrize(("target", "d_head", "tiles"), [
    ("trn1", 128, 1), ("trn1", 96, 1), ("trn1", 64, 2), ("trn1", 32, 2),
    ("trn2", 128, 1), ("trn2", 64, 2), ("trn2", 33, 2), ("trn2", 32, 4)])
def test_attention_scores_use_the_row_tiles_the_head_dimension_and_target_allow(target, d_head,
                                                                                tiles):
    """NKI API reference, nki.isa.nc_matmul, "Tiling mode": 2 x 64 row tiles on
    NeuronCore-v2 (trn1), 4 x 32 from NeuronCore-v3 (trn2); a head's K = d_head rows must fit
    the tile."""
    assert attention_row_tiles(target, d_head) == tiles


def test_row_tiled_attention_costs_the_same_tensore_time_and_more_dma():
    """Two [64, 64] diagonal tiles together cover the 128 PE columns one 128-query matmul
    covers, and each streams the 512 keys: the scores' TensorE time is that of the untiled
    kernel (docs/numerics.md choice 9), while every row tile needs its own copy of the K
    block (one more K load per block)."""
    d, sq, sk = 64, 512, 1024
    q, k, v = np.zeros((d, sq), bfloat16), np.zeros((d, sk), bfloat16), \
        np.zeros((sk, d), bfloat16)
    work = [engine_seconds(nki.run(attention.attention_fwd, q, k, v, target="trn1",
                                   row_tiles=r, tensor_engine="none").instructions, "trn1")
            for r in (1, 2)]
    assert work[1]["tensor"] == pytest.approx(work[0]["tensor"])
    assert work[1]["hbm"] - work[0]["hbm"] == pytest.approx(
        2 * d * 512 * 2 / load_target("trn1").hbm_bandwidth)        # 2 blocks of K [64, 512]


def test_causal_attention_skips_blocks_above_the_diagonal():
    """An 8,192-token causal prefill reads 16 x 17 / 2 = 136 of the 256 blocks (4 query
    tiles per group, 512 keys per block): the per-block terms scale by 136 / 256."""
    full, block = attention_costs("trn1", heads=1, d_head=128, queries=8192, keys=8192,
                                  causal=False)
    causal, _ = attention_costs("trn1", heads=1, d_head=128, queries=8192, keys=8192,
                                causal=True)
    groups = 8192 // 512
    fixed = full["scalar"] - 256 * block["scalar"]
    assert causal["scalar"] == pytest.approx(fixed + 136 * block["scalar"])
    assert groups * (groups + 1) // 2 == 136


def test_layer_costs_reject_bad_sizes():
    with pytest.raises(ValueError, match="queries must be a positive integer"):
        decoder_layer_costs("trn1", batch=1, queries=0, keys=1, d_model=64, heads=1,
                            kv_heads=1, d_head=64, ffn=64, gated=True)
    with pytest.raises(ValueError, match="d_head must be 1..128"):
        decoder_layer_costs("trn1", batch=1, queries=1, keys=1, d_model=64, heads=1,
                            kv_heads=1, d_head=256, ffn=64, gated=True)


def test_long_prompt_attention_is_bound_by_vector_and_scalar_engines():
    """At an 8,192-token prompt the softmax's VectorE and ScalarE work each exceed the
    attention core's TensorE work, so the layer time exceeds what TensorE alone gives."""
    ops = decoder_layer_costs("trn1", batch=1, queries=8192, keys=8192, d_model=5120,
                              heads=2, kv_heads=2, d_head=128, ffn=432, gated=True)
    att = ops["attention"]
    assert att["vector"] > att["tensor"] and att["scalar"] > att["tensor"]
    seconds, charged = layer_seconds(ops)
    assert seconds == pytest.approx(sum(charged.values()))
    assert seconds > sum(op["tensor"] for op in ops.values())


def test_fewer_keys_than_a_block_cost_one_block_of_the_keys():
    """128 keys are traced as one 128-key block of the kernel (its block argument), not a
    512-key block: each compute engine's work matches the direct trace at block=128 and is
    less than at 512 keys."""
    q, k, v = np.zeros((64, 128), bfloat16), np.zeros((64, 128), bfloat16), \
        np.zeros((128, 64), bfloat16)
    trace = nki.run(attention.attention_fwd, q, k, v, block=128, target="trn1",
                    tensor_engine="none").instructions
    direct = engine_seconds(trace, "trn1")
    short, _ = attention_costs("trn1", heads=1, d_head=64, queries=128, keys=128, causal=False)
    full, _ = attention_costs("trn1", heads=1, d_head=64, queries=128, keys=512, causal=False)
    for engine in ("tensor", "vector", "scalar"):
        assert short[engine] == pytest.approx(direct[engine], rel=1e-9)
        assert short[engine] < full[engine]


_LAYER = {"batch": 1, "queries": 2048, "keys": 2048, "d_model": 4096, "heads": 4,
          "kv_heads": 1, "d_head": 128, "ffn": 1792, "gated": True}


def test_plain_attention_graph_computes_every_block_and_masks_every_score():
    """flash=False: the causal half is computed too (2048 / 128 = 16 query tiles, 4 groups,
    each reading all 4 blocks instead of 1..4), and one VectorE pass masks the 4 x 2048 x
    2048 scores."""
    flash = decoder_layer_costs("trn1", **_LAYER)
    plain = decoder_layer_costs("trn1", **_LAYER, flash=False)
    full, _ = attention_costs("trn1", heads=4, d_head=128, queries=2048, keys=2048,
                              causal=False)
    for engine in ENGINE_TERMS:
        assert plain["attention"][engine] == pytest.approx(full[engine])
    assert plain["attention"]["tensor"] > flash["attention"]["tensor"]
    assert "attention_mask" not in flash and plain["attention_mask"]["vector"] > 0


def test_encoder_layer_has_no_rope_or_kv_append_and_a_layernorm():
    ops = decoder_layer_costs("trn1", **{**_LAYER, "gated": False}, causal=False, rope=False,
                              norm="layer", kv_cache=False)
    rms = decoder_layer_costs("trn1", **{**_LAYER, "gated": False}, causal=False, rope=False)
    assert "rope" not in ops and "kv_append" not in ops and "kv_append" in rms
    assert ops["input_norm"]["vector"] > rms["input_norm"]["vector"]    # 4 passes, not 1
    with pytest.raises(ValueError, match="norm must be one of rms, layer"):
        decoder_layer_costs("trn1", **_LAYER, norm="batch")


def test_sequence_parallel_rows_split_the_norms_and_residuals():
    whole = decoder_layer_costs("trn1", **_LAYER)
    split = decoder_layer_costs("trn1", **_LAYER, row_split=8)
    assert split["attn_residual"]["vector"] < whole["attn_residual"]["vector"]
    assert split["attention"] == whole["attention"]


def test_training_layer_is_forward_plus_twice_backward_plus_attention_recompute():
    forward = decoder_layer_costs("trn1", **_LAYER, kv_cache=False)
    train = training_layer_costs(forward)
    stored = training_layer_costs(forward, recompute_attention=False)
    for engine in ENGINE_TERMS:
        assert train["post_norm"][engine] == pytest.approx(3 * forward["post_norm"][engine])
        assert train["attention"][engine] == pytest.approx(4 * forward["attention"][engine])
        assert stored["attention"][engine] == pytest.approx(3 * forward["attention"][engine])


def test_adamw_update_reads_and_writes_thirty_bytes_per_weight():
    from systolica.nki.costs import load_target
    cost = optimizer_costs("trn1", 1e9)
    assert cost["hbm"] == pytest.approx(1e9 * ADAMW["hbm_bytes"]
                                        / load_target("trn1").hbm_bandwidth)
    assert cost["vector"] > 0 and cost["scalar"] > 0 and cost["tensor"] == 0
    with pytest.raises(ValueError, match="weights must be a positive number"):
        optimizer_costs("trn1", 0)


def test_kv_stream_moves_the_whole_cache_in_chunks_of_one_position():
    """The SBH cache of 8 sequences x 2 heads x 128 values at 8,192 positions is 2 x 8,192 x
    4 KiB (K and V) through HBM; per byte the DMA is faster with 4 KiB chunks (batch 8) than
    with 256-byte ones (batch 1, one head), and never beyond the core's 16 queues at their
    peak."""
    from systolica.nki.costs import load_target
    t = load_target("trn1")
    dma8, hbm8 = kv_stream_costs("trn1", batch=8, kv_heads=2, d_head=128, keys=8192)
    dma1, _ = kv_stream_costs("trn1", batch=1, kv_heads=1, d_head=128, keys=8192)
    assert hbm8 == pytest.approx(2 * 8192 * 8 * 2 * 128 * 2 / t.hbm_bandwidth)
    per_byte8, per_byte1 = dma8 / (2 * 8192 * 4096), dma1 / (2 * 8192 * 256)
    peak = 1 / (t.dma_engines * t.dma_engine_bandwidth)
    assert peak < per_byte8 < per_byte1
    with pytest.raises(ValueError, match="keys must be a positive integer"):
        kv_stream_costs("trn1", batch=1, kv_heads=1, d_head=128, keys=0)


def test_decode_with_the_sbh_cache_replaces_only_the_attention_kv_traffic():
    """kv_layout='sbh': the attention core's DMA and HBM terms are the stream's; its compute
    engines and the other operations stay the kernel's."""
    shape = dict(batch=8, queries=1, keys=8192, d_model=5120, heads=2, kv_heads=2, d_head=128,
                 ffn=432, gated=True)
    kernel = decoder_layer_costs("trn1", **shape)
    sbh = decoder_layer_costs("trn1", **shape, kv_layout="sbh")
    dma, hbm = kv_stream_costs("trn1", batch=8, kv_heads=2, d_head=128, keys=8192)
    assert sbh["attention"]["dma"] == dma and sbh["attention"]["hbm"] == hbm
    assert sbh["attention"]["dma"] < kernel["attention"]["dma"]
    for engine in ("tensor", "vector", "scalar"):
        assert sbh["attention"][engine] == kernel["attention"][engine]
    assert sbh["up_proj"] == kernel["up_proj"]
    with pytest.raises(ValueError, match="kv_layout must be None or 'sbh'"):
        decoder_layer_costs("trn1", **shape, kv_layout="bsh")
