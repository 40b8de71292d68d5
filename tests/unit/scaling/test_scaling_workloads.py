"""Scaling layer: GEMM lists, SCALE-Sim topologies, transformer presets and their GEMMs."""

import pytest

from systolica.scaling.spec import SpecError
from systolica.scaling.workloads import (
    load_gemm_csv,
    load_scalesim_topology,
    load_transformer,
    parse_hf_config,
    single_gemm,
    transformer_workload,
)


@pytest.mark.parametrize("name, published, layers, d, ffn_mats, ffn, kv, heads, vocab, tied, pos", [
    # By hand: attention 2 d^2 + 2 d * kv * 128 (GQA), FFN matrices * d * ffn, embeddings
    # (plus the LM head unless tied, plus learned positions for GPT-3).
    ("llama2-7b", 7e9, 32, 4096, 3, 11008, 32, 32, 32000, False, 0),
    ("llama2-13b", 13e9, 40, 5120, 3, 13824, 40, 40, 32000, False, 0),
    ("llama2-70b", 70e9, 80, 8192, 3, 28672, 8, 64, 32000, False, 0),
    ("llama3.1-8b", 8e9, 32, 4096, 3, 14336, 8, 32, 128256, False, 0),
    ("gpt3-175b", 175e9, 96, 12288, 2, 49152, 96, 96, 50257, True, 2048),
])
def test_transformer_parameter_counts_match_papers(name, published, layers, d, ffn_mats, ffn,
                                                   kv, heads, vocab, tied, pos):
    model = load_transformer(name)
    by_hand = layers * (2 * d * d + 2 * d * kv * 128 + ffn_mats * d * ffn) \
        + (1 if tied else 2) * vocab * d + pos * d
    assert model.params == by_hand
    assert abs(by_hand - published) / published < 0.04   # papers round (6.74B -> "7B")


def test_decode_gemms_of_llama2_7b():
    model = load_transformer("llama2-7b")
    w = transformer_workload(model, "decode", batch=1, seq=100, tp=1)
    g = {x.name: x for x in w.gemms}
    assert (g["attn.qkv"].m, g["attn.qkv"].k, g["attn.qkv"].n) == (3 * 4096, 4096, 1)
    assert (g["ffn.gate_up"].m, g["ffn.down"].k) == (2 * 11008, 11008)
    assert g["attn.scores"].count == 32 and g["attn.scores"].m == 100
    assert g["lm_head"].repeat == 1 and g["attn.out"].repeat == 32
    # Weights + KV cache (2 * layers * d * seq) in bf16.
    assert w.memory_bytes == int(model.params * 2 + 2 * 32 * 4096 * 100 * 2)


def test_training_adds_two_backward_gemms_per_forward_and_triples_flop():
    model = load_transformer("gpt3-175b")
    fwd = transformer_workload(model, "prefill", batch=2, seq=2048)
    train = transformer_workload(model, "train", batch=2, seq=2048)
    assert len(train.gemms) == 3 * len(fwd.gemms)
    body = [g for g in fwd.gemms if g.name != "lm_head"]
    flop_fwd = sum(g.flop for g in body)
    flop_train = sum(g.flop for g in train.gemms if not g.name.startswith("lm_head"))
    assert flop_train == 3 * flop_fwd
    # 2 * params * tokens is the classic forward estimate (attention adds a few percent).
    assert 1.0 < flop_fwd / (2 * model.params * 2 * 2048) < 1.2


def test_tensor_parallel_splits_heads_and_ffn():
    model = load_transformer("llama2-70b")
    w = transformer_workload(model, "decode", batch=1, seq=10, tp=8)
    g = {x.name: x for x in w.gemms}
    assert g["attn.qkv"].m == (64 // 8 + 2 * 8 // 8) * 128
    assert g["ffn.down"].k == 28672 // 8
    assert w.tp_allreduces == 2 * 80 and w.tp_allreduce_bytes == 1 * 8192 * 2


def test_bad_phase_and_seq():
    model = load_transformer("llama2-7b")
    with pytest.raises(ValueError, match="allowed: prefill, decode, train"):
        transformer_workload(model, "infer", 1, 1)
    with pytest.raises(ValueError, match="allowed: 1 to 4096"):
        transformer_workload(model, "decode", 1, 5000)


def test_gemm_csv(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("name,M,K,N,count\na,64,32,16,2\nb,8,8,8,1\n")
    w = load_gemm_csv(path)
    assert [(g.name, g.m, g.k, g.n, g.count) for g in w.gemms] == [
        ("a", 64, 32, 16, 2), ("b", 8, 8, 8, 1)]
    path.write_text("name,M,K,N\na,64,x,16\n")
    with pytest.raises(SpecError, match=r"g.csv, line 2, column 'K': 'x' is not allowed; "
                                        r"allowed: an integer >= 1"):
        load_gemm_csv(path)
    path.write_text("name,M,N\n")
    with pytest.raises(SpecError, match="field header.*allowed: 'name,M,K,N'"):
        load_gemm_csv(path)


def test_scalesim_conv_topology_as_scalesim_reads_it(tmp_path):
    path = tmp_path / "net.csv"
    path.write_text(
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,\n"
        "Conv1, 224, 224, 7, 7, 3, 64, 2,\n"
        "\n"
        "DP_conv, 10, 10, 3, 3, 4, 1, 1,\n")
    w = load_scalesim_topology(path)
    conv, dp = w.gemms
    # ofmap = ceil((224 - 7 + 2) / 2) = 110 per side; window 7 * 7 * 3.
    assert (conv.m, conv.k, conv.n) == (64, 147, 110 * 110)
    # Depthwise: once per channel with one channel.
    assert (dp.m, dp.k, dp.n, dp.repeat) == (1, 9, 64, 4)


def test_scalesim_gemm_topology_maps_filter_to_stationary(tmp_path):
    path = tmp_path / "mnk.csv"
    path.write_text("Layer, M, N, K,\nfc, 20, 13, 17,\n")
    (g,) = load_scalesim_topology(path).gemms
    assert (g.m, g.k, g.n) == (13, 17, 20)


@pytest.mark.parametrize("row, field, allowed", [
    ("fc, 20, 13, 17", "line 2", "rows ending with ','"),
    ("fc, 20, 13,", "line 2", "4 fields"),
    ("fc, 20, 0, 17,", "line 2, column 'N'", "an integer >= 1"),
])
def test_bad_scalesim_rows(tmp_path, row, field, allowed):
    path = tmp_path / "bad.csv"
    path.write_text(f"Layer, M, N, K,\n{row}\n")
    with pytest.raises(SpecError) as info:
        load_scalesim_topology(path)
    assert str(info.value).startswith(f"bad.csv, {field}:")
    assert allowed in str(info.value)


def test_single_gemm():
    (g,) = single_gemm(4, 5, 6).gemms
    assert g.flop == 2 * 4 * 5 * 6
    assert g.bytes_moved(2) == (4 * 5 + 5 * 6 + 4 * 6) * 2
    with pytest.raises(ValueError):
        single_gemm(0, 1, 1)


def test_bad_model_file(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, '
                    '"num_attention_heads": 4}')
    with pytest.raises(SpecError, match="m.json: field intermediate_size: missing; allowed: "):
        load_transformer(path)


LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 131072}


def test_hf_config_fields_of_each_family():
    m = parse_hf_config(LLAMA, "config.json", "x")
    assert (m.kv_heads, m.d_head, m.ffn_kind, m.tied, m.decoder) == (8, 128, "gated", False,
                                                                       True)
    gpt2 = parse_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                            "vocab_size": 50257, "n_positions": 1024}, "gpt2.json")
    # GPT-2 small by hand: 12 x (4 d^2 + 8 d^2) + 50257 d (tied) + 1024 d positions = 124.0M
    # (the released 124M also counts biases and norms, which the model leaves out).
    assert gpt2.ffn == 4 * 768 and gpt2.tied and gpt2.params == 12 * 12 * 768**2 + \
        (50257 + 1024) * 768
    bert = load_transformer("bert-base")
    assert not bert.decoder and bert.ffn_kind == "mlp"
    assert abs(bert.params - 110e6) / 110e6 < 0.03


@pytest.mark.parametrize("name, params", [
    # the model cards' counts: RoBERTa 125M / 355M, BERT (cased) 110M / 340M
    ("roberta-base", 125e6), ("roberta-large", 355e6),
    ("bert-base-cased", 110e6), ("bert-large-cased", 340e6),
])
def test_bert_architecture_encoders_are_read_as_encoders(name, params):
    m = load_transformer(name)
    assert not m.decoder and m.learned_positions and m.ffn_kind == "mlp"
    assert m.kv_heads == m.heads                      # no grouped-query attention
    assert abs(m.params - params) / params < 0.03


def test_a_roberta_config_reads_like_bert_but_for_its_vocabulary():
    # RoBERTa-base's config.json fields (BERT-base's shape, 50,265-token BPE vocabulary)
    roberta = parse_hf_config({"model_type": "roberta", "hidden_size": 768,
                               "num_hidden_layers": 12, "num_attention_heads": 12,
                               "intermediate_size": 3072, "vocab_size": 50265,
                               "max_position_embeddings": 514}, "roberta.json")
    bert = load_transformer("bert-base")
    same = ("layers", "d_model", "heads", "kv_heads", "d_head", "ffn", "ffn_kind", "decoder",
            "learned_positions")
    assert [getattr(roberta, f) for f in same] == [getattr(bert, f) for f in same]
    # embeddings: (50265 - 30522) more rows of 768
    assert roberta.params - bert.params == pytest.approx((50265 - 30522 + 514 - 512) * 768,
                                                         abs=768 * 3)


@pytest.mark.parametrize("change, field, allowed", [
    ({"model_type": "falcon"}, "model_type", "'llama', 'mistral', 'gpt2', 'bert', 'roberta'"),
    ({"hidden_size": None}, "hidden_size", "a value must be given"),
    ({"num_hidden_layers": 0}, "num_hidden_layers", "an integer >= 1"),
    ({"num_attention_heads": 24}, "num_attention_heads", "a divisor of 4096"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings", "true or false"),
])
def test_hf_config_errors_name_the_field(change, field, allowed):
    data = {**LLAMA, **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(SpecError) as info:
        parse_hf_config(data, "config.json")
    assert str(info.value).startswith(f"config.json: field {field}:")
    assert allowed in str(info.value) and "\n" not in str(info.value)


def test_an_encoder_trains_with_the_masked_lm_head_on_every_position():
    bert = load_transformer("bert-large")
    train = transformer_workload(bert, "train", 16, 128)
    infer = transformer_workload(bert, "prefill", 16, 128)
    heads = {g.name: g for g in train.gemms if g.name.startswith("mlm.")}
    # BertForPreTraining's prediction head: a 1,024 x 1,024 transform and a decoder onto the
    # 30,522-token vocabulary, each on all 16 x 128 tokens, forward and two backward GEMMs
    assert set(heads) == {"mlm.transform", "mlm.decoder", "mlm.transform.dX",
                          "mlm.transform.dW", "mlm.decoder.dX", "mlm.decoder.dW"}
    forward = heads["mlm.transform"].flop + heads["mlm.decoder"].flop
    assert forward == 2 * 2048 * 1024 * (1024 + 30522)
    assert sum(g.flop for g in heads.values()) == 3 * forward
    # inference ("Raw Output (AutoModel)") has no head, and a decoder keeps its LM head only
    assert not any(g.name.startswith(("mlm.", "lm_head")) for g in infer.gemms)
    llama = transformer_workload(load_transformer("llama2-7b"), "train", 1, 128)
    assert not any(g.name.startswith("mlm.") for g in llama.gemms)


def test_a_distilbert_config_is_read_with_its_own_field_names():
    data = {"model_type": "distilbert", "dim": 768, "n_layers": 6, "n_heads": 12,
            "hidden_dim": 3072, "vocab_size": 30522, "max_position_embeddings": 512}
    distil = parse_hf_config(data, "distil.json")
    bert = load_transformer("bert-base")
    # BERT-Base's layer, half the layers (Sanh et al. 2019)
    assert (distil.layers, distil.d_model, distil.heads, distil.ffn) == (6, 768, 12, 3072)
    assert not distil.decoder and distil.learned_positions and distil.ffn_kind == "mlp"
    assert distil.block_params == bert.block_params
    with pytest.raises(SpecError, match=r"^distil.json: field dim: missing"):
        parse_hf_config({k: v for k, v in data.items() if k != "dim"}, "distil.json")


@pytest.mark.parametrize("name, like", [("camembert-base", "roberta-base"),
                                        ("electra-base-discriminator", "bert-base")])
def test_camembert_and_electra_have_the_bert_base_layer(name, like):
    m, ref = load_transformer(name), load_transformer(like)
    assert not m.decoder and (m.layers, m.d_model, m.heads, m.ffn) == (12, 768, 12, 3072)
    assert m.block_params == ref.block_params
