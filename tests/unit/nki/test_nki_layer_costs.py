"""Issue 28's per-operation engine costs (systolica.nki.layer_costs) against the kernels."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

from systolica import nki
from systolica.nki.costs import ENGINE_TERMS, engine_seconds
from systolica.nki.kernels import attention
from systolica.nki.layer_costs import attention_costs, decoder_layer_costs, layer_seconds


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
                    tensor_engine="none").instructions
    direct = engine_seconds(trace, target)
    closed, _ = attention_costs(target, heads=1, d_head=d, queries=sq, keys=sk, causal=False)
    for engine in ENGINE_TERMS:
        assert closed[engine] == pytest.approx(direct[engine], rel=1e-9, abs=1e-15), engine


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
