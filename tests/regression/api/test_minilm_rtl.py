"""Regression tier: real all-MiniLM-L6-v2 weights and activations through small RTL tiles on
both simulators, bit for bit against the golden model, and the minilm workload end to end."""

import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from systolica.hdl.config import TileConfig
from systolica.sim.api.tiling import run_tiled
from systolica.workloads import minilm
from systolica.workloads.minilm.quantize import mx_operand_values, quantize_mx_operand

BF16 = ml_dtypes.bfloat16


@pytest.fixture(scope="module")
def layer0_query():
    """Real operands: layer 0's query weight [out, in] and its input activations [T, in]
    (the embedding LayerNorm's output for a real sentence)."""
    weights = minilm.load_weights()
    ids = minilm.tokenize(["The cat sleeps on the warm mat."], minilm.load_tokenizer())
    _, trace = minilm.encode(weights, ids)
    x, _ = trace[(0, "q")]
    return weights["encoder.layer.0.attention.self.query.weight"], x


def slice_operands(weight, x):
    # A slice that fits no tile evenly: K = 19 input features, M = 6 outputs, all tokens.
    return weight[:6, :19], x[:, :19]


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_real_weight_slice_bf16(simulator, layer0_query):
    w, x = slice_operands(*layer0_query)
    stationary, moving = w.T.astype(BF16), x.T.astype(BF16)
    r = run_tiled(stationary, moving, rows=4, cols=4, simulator=simulator)
    assert (r.mismatches, r.differing) == (0, 0)
    assert r.matmuls == 5 * 2                       # ceil(19/4) slabs x ceil(6/4) folds
    # Independent check: float64 product of the same BF16 values, FP32 accumulation error only.
    exact = stationary.astype(np.float64).T @ moving.astype(np.float64)
    np.testing.assert_allclose(r.out, exact, rtol=1e-5, atol=1e-6)
    # And BF16 rounding of the operands costs well under 1% against the FP32 GEMM.
    fp32 = w @ x.T
    assert np.linalg.norm(r.out - fp32) / np.linalg.norm(fp32) < 1e-2


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_real_weight_slice_int8(simulator, layer0_query):
    w, x = slice_operands(*layer0_query)
    wq, w_scale = minilm.quantize_weight_int8(w)
    x_scale = minilm.activation_scale(x)
    xq = minilm.quantize_activation_int8(x, x_scale)
    r = run_tiled(np.ascontiguousarray(wq.T), np.ascontiguousarray(xq.T), rows=4, cols=4,
                  simulator=simulator)
    assert (r.mismatches, r.differing) == (0, 0)
    np.testing.assert_array_equal(r.out, wq.astype(np.int64) @ xq.astype(np.int64).T)
    deq = r.out * w_scale[:, None] * x_scale
    fp32 = w @ x.T
    assert np.linalg.norm(deq - fp32) / np.linalg.norm(fp32) < 5e-2


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "systolica.sim", "--workload", "minilm", *args],
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("simulator,gemms,dtypes", [("icarus", "q", ["int8", "fp8"]),
                                                    ("verilator", "q,down", None)])
def test_minilm_workload_end_to_end_on_rtl(simulator, gemms, dtypes):
    done = run_cli("--sim", simulator, "--rows", "4", "--cols", "4", "--rtl-folds", "1",
                   "--gemms", gemms, "--workers", "1",
                   *(["--dtypes", ",".join(dtypes)] if dtypes else []))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    dtypes = dtypes or list(minilm.DEFAULT_PRECISIONS)   # the default (no mx in the types)
    assert "RTL share: the first 1 M-fold(s) (4 output rows)" in out
    # Layer 0's query GEMM, 36 tokens: one program, one fold of 4 outputs, 384 / 4 = 96
    # K-slabs (FP8 double-row: 384 / 8 = 48), 0 mismatches.
    for slabs, count in ((96, len(set(dtypes) & {"bf16", "int8"})), (48, "fp8" in dtypes)):
        rows = re.findall(rf"L0 q\s+\[384, 384\] x \[384, 36\]\s+1\s+{slabs}\s+[\d,]+\s+"
                          r"[\d,]+\s+[\d.]+\s+0\s", out)
        assert len(rows) == count, out              # one row per precision
    if "down" in gemms:
        assert len(re.findall(r"L0 down\s+\[384, 1536\] x \[1536, 36\]\s+1\s+384\s",
                              out)) == 2
        assert len(re.findall(r"L0 down\s+\[384, 1536\] x \[1536, 36\]\s+1\s+192\s",
                              out)) == 1
    programs = len(dtypes) * len(gemms.split(","))  # one per GEMM and precision
    assert f"Accounting: {programs} of {programs} planned programs" in out
    assert "COMPLETE" in out
    assert "PASS" in out


def test_all_layers_seeded_sample(seed):
    """A seeded sample of ``make sim LAYERS=all``: one layer and one of its GEMMs (attention
    included), chosen by the regression seed, on an 8 x 8 Verilator tile (the first two
    M-folds of each problem), every precision, checked and accounted for."""
    import random

    from systolica.sim.api.engine import SerialEngine

    rng = random.Random(seed)
    layer, gemm = rng.randrange(minilm.LAYERS), rng.choice(minilm.GEMMS)
    run = minilm.run_model(layers=[layer], gemms=[gemm], rows=8, cols=8, rtl_folds=2,
                           engine=SerialEngine(), dtypes=list(minilm.DEFAULT_PRECISIONS))
    assert run.exact and run.ledger.complete, (layer, gemm)
    assert run.ledger.matmuls == run.ledger.planned_matmuls > 0
    for dtype, prec in run.runs.items():
        # An attention GEMM's operand transposes ran on the tile before it.
        assert [r.gemm for r in prec.gemms] == [*minilm.TRANSPOSES.get(gemm, ()), gemm]
        assert all((r.layer, r.mismatches, r.differing) == (layer, 0, 0) for r in prec.gemms)
        g = prec.gemms[-1]
        on_tile = {"bf16": "bf16", "int8": "int8", "fp8": "e4m3"}[dtype]
        assert g.tile_dtype == ("bf16" if gemm in minilm.ATTENTION_GEMMS else on_tile)
        assert g.cosine > 0.99, (layer, gemm, dtype, g.cosine)
        assert prec.neighbours_unchanged


#: The MX tile of tests/regression/rtl/test_rtl_mx.py (one build serves both).
MX_CONFIG = TileConfig(16, 4, "int8+mx")


def test_real_weights_in_mxfp8_on_an_mx_tile_are_bit_exact(layer0_query):
    """Layer 0's query weight (4 outputs, all K = 384) and a real sentence's activations,
    quantised to MXFP8 as the mxfp8 run does, as MX matmuls on the RTL (K-slabs of 16
    partition rows x 4 lanes = 64 elements)."""
    w, x = layer0_query
    stationary, moving = quantize_mx_operand(w[:4].T), quantize_mx_operand(x.T)
    r = run_tiled(stationary, moving, config=MX_CONFIG, simulator="verilator")
    assert (r.mismatches, r.differing) == (0, 0)
    assert r.matmuls == 384 // 64 and r.macs == 384 * 4 * x.shape[0]
    # Independent of the golden model: the exact product of the values the MX operands
    # stand for, within FP32 accumulation error (16 + 1 roundings a slab, 6 slabs).
    a, b = mx_operand_values(stationary), mx_operand_values(moving)
    exact, magnitude = a.T @ b, np.abs(a).T @ np.abs(b)
    assert np.all(np.abs(r.out - exact) <= 30 * 2.0**-24 * magnitude + 2.0**-140)
    fp32 = w[:4].astype(np.float64) @ x.astype(np.float64).T
    assert np.linalg.norm(r.out - fp32) / np.linalg.norm(fp32) < 5e-2


def test_minilm_mxfp8_query_gemm_on_an_mx_tile():
    """The mxfp8 precision end to end for one GEMM of one layer: layer 0's q, its first
    M-fold (4 outputs) on the RTL, checked word for word and accounted for."""
    from systolica.sim.api.engine import SerialEngine

    run = minilm.run_model(layers=[0], gemms=["q"], config=MX_CONFIG, rtl_folds=1,
                           dtypes=["mxfp8"], engine=SerialEngine())
    assert run.exact and run.ledger.complete
    assert run.ledger.matmuls == run.ledger.planned_matmuls == 384 // 64
    (g,) = run.runs["mxfp8"].gemms
    assert (g.gemm, g.tile_dtype, g.k, g.m_rtl, g.mismatches, g.differing) == \
        ("q", "e4m3fn", 384, 4, 0, 0)
    assert g.macs == 384 * 4 * sum(run.tokens)
    assert g.cosine > 0.99 and run.meets_targets() == {"mxfp8": True}
