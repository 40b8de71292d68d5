"""Scaling layer: the transformer model (llm.py): ranks, collectives, decode, training."""

import math
from dataclasses import replace

import pytest

from systolica.scaling.hardware import load_hardware
from systolica.scaling.llm import (
    IDEAL,
    Calibration,
    Layout,
    allreduce_s,
    group_allreduce_s,
    inference,
    training,
    training_scaling,
)
from systolica.scaling.workloads import load_transformer

TRN1_RANK_HBM = 820 * 2**30 / 2          # bytes/s per NeuronCore-v2 (two per chip)


def test_allreduce_ring_and_tree_by_hand():
    # Small message: the tree, 2 * ceil(log2 32) = 10 steps of (latency + S / B).
    assert allreduce_s(8192, 32, 100e9, 5e-6) == pytest.approx(10 * (5e-6 + 8192 / 100e9))
    # Large message: the ring, 62 latencies + 2 * 31/32 * S / B.
    big = 64e6
    assert allreduce_s(big, 32, 100e9, 5e-6) == pytest.approx(62 * 5e-6 + 2 * 31 / 32 * big
                                                               / 100e9)
    assert allreduce_s(big, 1, 100e9, 5e-6) == 0


def test_group_allreduce_uses_neuronlink_share_and_efa_across_instances():
    hw = load_hardware("trn1")
    cal = Calibration(collective_latency_s=0.0, link_efficiency=0.5)
    # 32 ranks = one trn1.32xlarge: each rank gets 384 GB/s * 0.5 / 2 of the chip's link.
    ring = 2 * 31 / 32 * 1e9 / (384e9 * 0.5 / 2)
    assert group_allreduce_s(hw, 1e9, 32, 1, cal) == pytest.approx(ring)
    # 4 members 32 ranks apart (data parallel over 4 instances): one per instance, ring over
    # EFA at 800 Gbps / 32 ranks per instance.
    efa = 800e9 / 8 / 32
    assert group_allreduce_s(hw, 1e9, 4, 32, cal) == pytest.approx(2 * 3 / 4 * 1e9 / efa)


def test_ranks_are_logical_neuroncores():
    model = load_transformer("llama2-7b")
    trn2 = load_hardware("trn2")          # 8 physical cores, LNC=2: 4 ranks per chip
    assert inference(trn2, model, Layout(tp=4), 1, 16, 2).chips == 1
    assert inference(trn2, model, Layout(tp=32), 1, 16, 2).chips == 8
    trn1 = load_hardware("trn1")          # 2 ranks per chip
    assert inference(trn1, model, Layout(tp=32), 1, 16, 2).chips == 16


def test_ideal_decode_of_llama2_7b_on_one_core_is_its_bytes_over_hbm():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-7b")
    est = inference(hw, model, Layout(tp=1), 1, 1000, 2, "bf16", IDEAL)
    # One decode step at a 1001-token KV cache: all GEMM weights (32 blocks + LM head) once,
    # 2 bytes each, through the weight GEMMs; the K and V caches (2 * 32 layers * 4096 * 1024
    # tokens of the token-generation bucket) through the engine model's attention core, which
    # cannot beat HBM either.
    block = 4 * 4096 * 4096 + 3 * 4096 * 11008
    weights = (32 * block + 32000 * 4096) * 2
    kv = 2 * 32 * 4096 * 1024 * 2
    step = est.terms["decode_step"]
    assert step["gemm_memory_s"] == pytest.approx(weights / TRN1_RANK_HBM, rel=0.002)
    assert est.tpot_s >= (weights + kv) / TRN1_RANK_HBM
    assert step["tp_comm_s"] == 0          # one rank: no collectives


def test_int8_weights_halve_the_weight_traffic():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-13b")
    bf16 = inference(hw, model, Layout(tp=8), 1, 16, 2, "bf16", IDEAL)
    int8 = inference(hw, model, Layout(tp=8), 1, 16, 2, "int8", IDEAL)
    ratio = int8.terms["decode_step"]["gemm_memory_s"] / bf16.terms["decode_step"][
        "gemm_memory_s"]
    assert 0.5 < ratio < 0.52                # the small KV cache and activations stay 2 bytes
    assert int8.memory_bytes < 0.51 * bf16.memory_bytes + 2**20


def test_decode_collectives_by_hand():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-7b")
    cal = Calibration(collective_latency_s=10e-6)
    est = inference(hw, model, Layout(tp=32), 1, 128, 2, "bf16", cal)
    # Two AllReduces of one token's activations (4096 x 2 bytes) per layer, as a tree over
    # 32 ranks on 384 GB/s / 2 per rank; plus one AllGather (half an AllReduce) of the
    # FP32 logits (32000 x 4 bytes), as a ring (62 steps beat the tree's 10 full copies).
    bw = 384e9 / 2
    act = 10 * (10e-6 + 8192 / bw)
    logits = min(62 * 10e-6 + 2 * 31 / 32 * 128000 / bw, 10 * (10e-6 + 128000 / bw)) / 2
    assert est.terms["decode_step"]["tp_comm_s"] == pytest.approx(64 * act + logits)


def test_tpot_grows_with_the_kv_cache():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-13b")
    short = inference(hw, model, Layout(tp=32), 1, 128, 128)
    long = inference(hw, model, Layout(tp=32), 1, 128, 8000)
    assert long.tpot_s > short.tpot_s
    assert long.ttft_s == pytest.approx(short.ttft_s)      # same prompt


def test_1f1b_bubble_and_micro_batches():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-70b")
    layout = Layout(tp=32, pp=8, dp=4, micro_batch=1)
    est = training(hw, model, layout, 1024, 4096)
    micro = 1024 // (4 * 1)
    mb = est.terms["micro_batch"]["total_s"]
    assert est.terms["micro_batches"] == micro
    assert est.terms["pipeline_s"] == pytest.approx((micro + 8 - 1) * mb)
    assert est.terms["bubble_s"] == pytest.approx(7 * mb)
    assert est.chips == 32 * 8 * 4 / 2 == 512              # 32 trn1.32xlarge nodes
    assert est.seq_per_s == pytest.approx(1024 / est.step_s)


def test_zero1_shards_the_optimizer_state():
    hw = load_hardware("trn1")
    model = load_transformer("llama3.1-8b")
    plain = training(hw, model, Layout(tp=32, dp=32), 1024, 8192)
    zero = training(hw, model, Layout(tp=32, dp=32, zero1=True), 1024, 8192)
    # Per rank it owns 1/32 of the weights (TP 32); their FP32 master copy and two Adam
    # moments (12 bytes each) are split 32 ways by ZeRO-1; BF16 weights and FP32 gradients
    # are not.
    owned = (32 * model.block_params + model.embedding_params) / 32
    assert plain.memory_bytes - zero.memory_bytes == pytest.approx(owned * 12 * (1 - 1 / 32))


def test_mfu_counts_model_flop_against_the_peak():
    hw = load_hardware("trn1")
    model = load_transformer("llama3.1-8b")
    est = training(hw, model, Layout(tp=32, dp=32), 1024, 8192)
    # 6 x params x tokens is the usual approximation; attention adds about 15 % at 8k.
    approx = 6 * model.params * 1024 * 8192
    peak = 1024 * 128 * 128 * 2 * 2.8e9
    assert est.mfu == pytest.approx(approx / est.step_s / peak, rel=0.25)


@pytest.mark.parametrize("hw_name, tp", [("inf2", 24), ("trn1", 32), ("trn2", 32)])
@pytest.mark.parametrize("model_name", ["llama2-7b", "llama2-13b", "llama2-70b", "llama3.1-8b"])
def test_models_run_for_decode_and_training_on_every_neuron_preset(hw_name, tp, model_name):
    hw = load_hardware(hw_name)
    model = load_transformer(model_name)
    dec = inference(hw, model, Layout(tp=tp), 4, 256, 256, "bf16")
    assert dec.ttft_s > dec.tpot_s > 0 and dec.tokens_per_s == pytest.approx(4 / dec.tpot_s)
    tr = training(hw, model, Layout(tp=tp), 64, 2048)
    assert tr.step_s > 0 and 0 < tr.mfu < 1


def test_a_32_node_trn1_run_with_pp_8_and_the_scaling_sweep():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-70b")
    layout = Layout(tp=32, pp=8, dp=4)
    est = training(hw, model, layout, 1024, 4096)
    assert est.chips / hw.instance.chips == 32
    curve = training_scaling(hw, model, layout, 1024, 4096)
    assert [p["dp"] for p in curve][:4] == [1, 2, 4, 8]
    assert curve[0]["efficiency"] == 1.0 and all(0 < p["efficiency"] <= 1.0 + 1e-9
                                                 for p in curve)
    # 1,024-sequence batches: dp stops where dp x micro-batch no longer divides it.
    assert curve[-1]["dp"] <= 1024


def test_layout_errors_name_the_degree():
    hw = load_hardware("inf2")
    model = load_transformer("llama2-70b")
    with pytest.raises(ValueError, match="allowed: 1 to 24"):
        inference(hw, model, Layout(tp=32), 1, 8, 8)
    with pytest.raises(ValueError, match="pp 100 is more than llama2-70b's 80 layers"):
        training(load_hardware("trn1"), model, Layout(tp=8, pp=100), 8, 128)
    with pytest.raises(ValueError, match="weights 'int4' is not allowed"):
        inference(hw, model, Layout(tp=8), 1, 8, 8, "int4")


def test_calibrated_terms_slow_the_ideal_estimate():
    hw = load_hardware("trn1")
    model = load_transformer("llama2-7b")
    ideal = inference(hw, model, Layout(tp=32), 1, 128, 128, cal=IDEAL)
    slow = inference(hw, model, Layout(tp=32), 1, 128, 128,
                     cal=replace(IDEAL, hbm_efficiency=0.5))
    assert slow.terms["decode_step"]["gemm_memory_s"] == pytest.approx(
        2 * ideal.terms["decode_step"]["gemm_memory_s"])
    assert math.isclose(slow.terms["decode_step"]["tp_comm_s"],
                        ideal.terms["decode_step"]["tp_comm_s"])


def test_prompts_and_kv_caches_are_padded_to_power_of_two_buckets():
    from systolica.scaling.llm import bucket
    assert bucket(1000, 4096) == 1024 and bucket(100, 8192) == 128
    assert bucket(3000, 2048) == 3000          # longer than the largest bucket: as it is
    assert bucket(5000, 6000) == 6000          # capped at the graph's maximum length


def test_engine_model_layer_is_split_over_the_logical_cores_physical_cores():
    """trn2 runs LNC = 2: one rank's engine-model work is the single-core figure halved."""
    from systolica.nki.layer_costs import decoder_layer_costs, layer_seconds
    from systolica.scaling.llm import LINEAR_OPS, engine_layer
    hw = load_hardware("trn2")
    model = load_transformer("llama3-8b")
    seconds, _ = engine_layer(hw, model, Layout(tp=8), "prefill", 1, 2048)
    ops = decoder_layer_costs("trn2", batch=1, queries=2048, keys=2048, d_model=4096, heads=4,
                              kv_heads=1, d_head=128, ffn=1792, gated=True)
    single, _ = layer_seconds({k: v for k, v in ops.items() if k not in LINEAR_OPS})
    assert hw.chip.lnc == 2 and seconds == pytest.approx(single / 2)


def test_terms_by_engine_add_up_to_the_pass():
    est = inference(load_hardware("trn1"), load_transformer("llama2-13b"), Layout(tp=32), 1,
                    8192, 64, "bf16")
    for part in ("prefill", "decode_step"):
        terms = est.terms[part]
        assert sum(terms["by_engine"].values()) == pytest.approx(terms["total_s"])
        assert terms["by_engine"]["vector"] > 0 and terms["by_engine"]["collectives"] > 0


def test_transformers_neuronx_uses_flash_attention_from_2_19_and_4096_tokens():
    from systolica.scaling.llm import context_attention
    assert context_attention((2, 18), 8192) == "standard"
    assert context_attention((2, 19), 8192) == "flash"
    assert context_attention((2, 21), 2048) == "standard"
    assert context_attention((2, 19), 4096) == "flash"


def test_plain_context_attention_slows_a_long_prompt_only():
    hw, model = load_hardware("trn1"), load_transformer("llama2-13b")
    flash = inference(hw, model, Layout(tp=32), 1, 4096, 2, "bf16")
    plain = inference(hw, model, Layout(tp=32), 1, 4096, 2, "bf16", attention="standard")
    assert plain.ttft_s > flash.ttft_s and plain.tpot_s == pytest.approx(flash.tpot_s)
    with pytest.raises(ValueError, match="attention 'paged' is not allowed; allowed: flash"):
        inference(hw, model, Layout(tp=32), 1, 128, 2, "bf16", attention="paged")


def test_sbh_kv_layout_speeds_up_a_batched_long_context_decode_only():
    """transformers-neuronx's cache layout streams 8 sequences' K and V in 4 KiB chunks: the
    batch-8 decode step is faster than with the kernel's per-sequence block loads, the
    prefill is unchanged."""
    hw, model = load_hardware("trn1"), load_transformer("llama2-13b")
    kernel = inference(hw, model, Layout(tp=32), 8, 4096, 64, "bf16")
    sbh = inference(hw, model, Layout(tp=32), 8, 4096, 64, "bf16", kv_layout="sbh")
    assert sbh.tpot_s < kernel.tpot_s and sbh.ttft_s == kernel.ttft_s
    with pytest.raises(ValueError, match="kv_layout 'bsh' is not allowed; allowed: kernel"):
        inference(hw, model, Layout(tp=32), 1, 128, 2, "bf16", kv_layout="bsh")


def test_kv_buckets_beyond_max_positions_pad_to_the_compiled_sequence():
    """Llama-2-13B allows 4,096 positions; a run compiled for 16,384 (8,200 + 8,184 or
    16,000 + 384) pads every decode step past 8,192 tokens to the 16,384-token bucket, so
    both mean steps cost the same."""
    hw, model = load_hardware("trn1"), load_transformer("llama2-13b")
    early = inference(hw, model, Layout(tp=32), 1, 8200, 8184, "bf16")
    late = inference(hw, model, Layout(tp=32), 1, 16000, 384, "bf16")
    assert model.context == 4096 and early.tpot_s == pytest.approx(late.tpot_s)


def test_training_and_encoders_cost_their_non_linear_work_with_the_engine_model():
    """Training charges the engine model's forward and backward (at tp 1, no sequence
    parallelism: at least three times the forward) and an encoder (BERT) goes through the
    same layer costs."""
    from systolica.scaling.llm import engine_layer
    hw = load_hardware("trn1")
    llama, bert = load_transformer("llama3.1-8b"), load_transformer("bert-large")
    forward, _ = engine_layer(hw, llama, Layout(), "prefill", 1, 4096)
    train, charged = engine_layer(hw, llama, Layout(), "train", 1, 4096)
    assert train > 2.9 * forward and sum(charged.values()) == pytest.approx(train)
    assert engine_layer(hw, bert, Layout(), "prefill", 8, 128) is not None
    est = training(hw, llama, Layout(tp=32, dp=32, zero1=True), 1024, 8192)
    assert est.terms["micro_batch"]["by_engine"]["scalar"] > 0


def test_optimizer_step_is_the_engine_models_busiest_engine():
    from systolica.nki.layer_costs import optimizer_costs
    from systolica.scaling.llm import optimizer_seconds
    hw = load_hardware("trn1")
    cal = replace(IDEAL, hbm_efficiency=0.5)
    cost = optimizer_costs("trn1", 1e9)
    assert optimizer_seconds(hw, 1e9, cal) == pytest.approx(
        max(cost["vector"], cost["scalar"], cost["hbm"] / 0.5))
