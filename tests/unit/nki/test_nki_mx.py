"""Unit tier: NeuronCore-v4 (trn3) in the front end: ``nisa.quantize_mx`` and
``nisa.nc_matmul_mx`` through ``golden/mx.py``, the x4 packed types, the project's MXFP8
matmul kernel against the golden model, ``--target trn3``, and the target figures read from
the scaling presets."""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from systolica import golden, nki
from systolica.nki import NkiError, _core, costs
from systolica.nki import isa as nisa
from systolica.nki import language as nl
from systolica.nki.cli import main
from systolica.nki.kernels import matmul_mx
from systolica.scaling.hardware import load_hardware

BF16 = ml_dtypes.bfloat16
E4M3FN = ml_dtypes.float8_e4m3fn
KERNELS = Path(__file__).resolve().parents[3] / "nki" / "kernels"


def _operands(k, m, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((k, m)).astype(BF16), rng.standard_normal((k, n)).astype(BF16))


def test_the_mxfp8_kernel_equals_the_golden_mx_model_bit_for_bit():
    a, b = _operands(1024, 128, 512)
    out, profile = nki.profile(matmul_mx.matmul_mxfp8, target="trn3")(a, b)
    expected = None
    for k0 in (0, 512):                      # two K blocks accumulated in FP32 PSUM
        sa, xa = golden.quantize_mx(golden.interleave(a[k0:k0 + 512]), E4M3FN)
        sb, xb = golden.quantize_mx(golden.interleave(b[k0:k0 + 512]), E4M3FN)
        expected = golden.nc_matmul_mx(sa, sb, xa, xb, psum=expected,
                                       accumulate=expected is not None)
    assert np.array_equal(out.view(np.uint32), expected.view(np.uint32))
    # MXFP8 (3 fraction bits, RNE) keeps each operand within 2^-4 relative: the product
    # of the dequantised operands is within 0.13 * sum |a b| of the exact one.
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert (np.abs(out - a64.T @ b64) <= 0.13 * (np.abs(a64).T @ np.abs(b64))).all()
    engines = {p.opcode: p.engine for p in profile.instructions}
    assert engines["quantize_mx"] == "vector" and engines["nc_matmul_mx"] == "tensor"


def _one_mx_matmul(a, b):
    qa = nl.ndarray((128, 128), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((128, 512), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sa = nl.ndarray((128, 128), nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=qa, src=nl.load(a), dst_scale=sa)      # quantize
    nisa.quantize_mx(dst=qb, src=nl.load(b), dst_scale=sb)
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    return nl.copy(acc)


def test_an_mx_matmul_of_k_512_costs_the_interval_of_a_bf16_k_128_one():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 512)).astype(BF16)
    b = rng.standard_normal((128, 2048)).astype(BF16)
    _out, profile = nki.profile(_one_mx_matmul, target="trn3")(a, b)
    assert profile.busy_cycles["tensor"] == pytest.approx(512)        # max(K beats, N)
    quantize = [p for p in profile.instructions if p.opcode == "quantize_mx"]
    clock = profile.target.clocks_hz["vector"]
    assert (quantize[1].end - quantize[1].start) * clock == pytest.approx(2048 / 4)  # 4/cycle


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_mx_instructions_need_neuroncore_v4(target):
    a, b = np.ones((128, 512), BF16), np.ones((128, 2048), BF16)
    with pytest.raises(NkiError, match="quantize_mx: MX instructions need NeuronCore-v4"):
        nki.run(_one_mx_matmul, a, b, target=target)


def test_x4_tiles_take_packed_words_not_values():
    def kernel(x):
        t = nl.ndarray((128, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        return t
    with pytest.raises(NkiError, match="float8_e4m3fn_x4 tiles take packed uint32 words"):
        nki.run(kernel, np.ones((128, 4), np.float32), target="trn3")
    nki.run(kernel, np.ones((128, 4), np.uint32), target="trn3")


@pytest.mark.parametrize("name", _core.TARGET_NAMES)
def test_target_memory_figures_are_the_presets(name):
    hw = load_hardware(name)
    t = _core.target(name)
    assert t.sbuf_bytes == hw.core.engines.sbuf_partition_bytes
    assert t.psum_bytes == hw.core.engines.psum_partition_bytes
    assert t.psum_bank_bytes == 4 * hw.tile.psum_bank_depth
    assert costs.load_target(name).sbuf_partition_bytes == t.sbuf_bytes


def test_trn3_sbuf_holds_what_trn2_cannot():
    def kernel():
        return nl.ndarray((128, 120 * 1024), nl.bfloat16, buffer=nl.sbuf)   # 240 KiB
    nki.run(kernel, target="trn3")                      # 256 KiB per partition
    with pytest.raises(NkiError, match="SBUF capacity exceeded on trn2"):
        nki.run(kernel, target="trn2")                  # 224 KiB


def test_the_cli_runs_the_mxfp8_kernel_on_trn3(capsys):
    status = main(["run", f"{KERNELS}/matmul_mx.py::matmul_mxfp8", "--arg",
                   "lhsT=512x128:bfloat16", "--arg", "rhs=512x512:bfloat16", "--target", "trn3",
                   "--reference", "systolica.nki.reference:matmul_mxfp8", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["profile"]["core"] == "NeuronCore-v4"
    assert report["reference"][0]["bit_exact"] is True


def test_trn3_engine_figures_are_the_published_ones():
    """Trainium3 Architecture Guide for NKI, "Compute Engine Specifications": TensorE 2.4,
    VectorE, ScalarE, GpSimd 1.2 GHz; NKI DMA bandwidth guide: TRN3 16 engines x 33 B/ns."""
    t = costs.load_target("trn3")
    assert t.clocks_hz == {"tensor": 2.4e9, "vector": 1.2e9, "scalar": 1.2e9, "gpsimd": 1.2e9}
    assert (t.dma_engines, t.dma_engine_bandwidth) == (16, 33e9)
    assert t.core == "NeuronCore-v4" and t.sbuf_partition_bytes == 256 * 1024


def _one_bf16_mx_matmul(a, b):
    qa = nl.ndarray((32, 8), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((32, 16), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sa = nl.ndarray((32, 8), nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((32, 16), nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=qa, src=nl.load(a), dst_scale=sa)
    nisa.quantize_mx(dst=qb, src=nl.load(b), dst_scale=sb)
    acc = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    return nl.copy(acc)


def test_an_rtl_check_says_its_bf16_mx_matmuls_ran_on_the_golden_model_only():
    """``tensor_engine="rtl"`` runs nc_matmul_mx with a float32 dst on the tile (regression
    tier: tests/regression/nki/test_nki_rtl.py); one with a bfloat16 dst stays on the golden
    model (a K-slab's BF16 rounding is not the instruction's), and a warning counts it."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 32)).astype(BF16)
    b = rng.standard_normal((32, 64)).astype(BF16)
    result = nki.run(_one_bf16_mx_matmul, a, b, target="trn3", tensor_engine="rtl",
                     rows=8, cols=4)
    assert result.rtl["mx_golden_only"] == 1 and result.rtl["mx_matmuls"] == 0
    assert any(w.startswith("1 nc_matmul_mx instructions with a bfloat16 dst ran on the "
                            "golden model only") for w in result.warnings), result.warnings
