"""Scaling layer: roofline, collectives, step time, scaling, and the headline estimates."""

import time

import pytest

from systolica.scaling.hardware import load_hardware
from systolica.scaling.model import allreduce_s, chip_counts, scaling_curve, step_estimate
from systolica.scaling.workloads import load_transformer, single_gemm, transformer_workload


def test_single_gemm_on_one_trn2_chip_by_hand():
    hw = load_hardware("trn2")
    # 1024 x 1024 x 4096: 8 M-folds over 8 cores -> one fold each, 8 K-slabs x 8 N-chunks of
    # 512: uniform program of 64 matmuls (128, 512): one command cycle, the first load, the
    # moving beats and the drain: 1 + 128 + 64 * 512 + 256 cycles at 2.4 GHz.
    est = step_estimate(hw, single_gemm(1024, 1024, 4096), "bf16")
    (g,) = est.gemms
    assert g.tile_cycles == 1 + 128 + 64 * 512 + 256
    assert g.compute_s == pytest.approx((1 + 128 + 64 * 512 + 256) / 2.4e9)
    nbytes = (1024 * 1024 + 1024 * 4096 + 1024 * 4096) * 2
    assert g.memory_s == pytest.approx(nbytes / 2.9e12)
    assert g.bound == "compute"
    assert est.mfu == pytest.approx(2 * 1024 * 1024 * 4096 / g.compute_s / (8 * 78.6432e12))
    assert 0.95 < est.mfu < 1


def test_llama2_7b_decode_on_inf2_is_at_least_the_hbm_limit():
    hw = load_hardware("inf2")
    model = load_transformer("llama2-7b")
    est = step_estimate(hw, transformer_workload(model, "decode", 1, 256, tp=12), "bf16", 12)
    # Every weight is read once per token; 12 chips share them: params * 2 B / 12 / 820 GiB/s.
    weights_limit = model.params * 2 / 12 / (820 * 2**30)
    assert est.step_s >= weights_limit
    assert est.step_s < 2 * weights_limit
    assert 6.47e-3 / est.step_s > 3     # the measured figure is several times the limit
    assert any("lower limit" in note for note in est.notes)


def test_ring_allreduce_by_hand():
    hw = load_hardware("trn2")
    notes = set()
    # 16 instances, one member each: 2 * 15/16 * S over a chip's share of 3.2 Tbps / 16.
    share = 3.2e12 / 8 / 16
    t = allreduce_s(hw, 1e9, members=16, per_instance=1, link_bandwidth=None, notes=notes)
    assert t == pytest.approx(2 * 15 / 16 * 1e9 / share)
    # Inside one instance with a given link: 2 * (p - 1) / p * S / link.
    t = allreduce_s(hw, 1e9, members=4, per_instance=16, link_bandwidth=1e11, notes=notes)
    assert t == pytest.approx(2 * 3 / 4 * 1e9 / 1e11)
    # Without a link figure the intra-instance part is not timed, and a note says so.
    assert allreduce_s(hw, 1e9, 4, 16, None, notes) == 0
    assert any("lower limit" in n for n in notes)


def test_collective_across_instances_needs_network_figure():
    hw = load_hardware("inf2")
    with pytest.raises(ValueError, match="network_bandwidth"):
        allreduce_s(hw, 1e6, members=2, per_instance=1, link_bandwidth=None, notes=set())


def test_too_many_chips_is_refused():
    hw = load_hardware("inf2")
    model = load_transformer("llama2-7b")
    with pytest.raises(ValueError, match="allowed: 1 to 12"):
        step_estimate(hw, transformer_workload(model, "decode", 1, 8, tp=13), "bf16", 13)


def test_gpt3_training_on_100k_chips_in_under_a_second():
    hw = load_hardware("trn2")
    model = load_transformer("gpt3-175b")

    def make(tp, dp):
        return transformer_workload(model, "train", 1536, 2048, tp, dp)

    start = time.perf_counter()
    est = step_estimate(hw, make(8, 12500), "bf16", 8, 12500)
    curve = scaling_curve(hw, make, "bf16", 8, chip_counts(100_000))
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0
    assert est.chips == 100_000
    # Gradient AllReduce by hand: 2 members per instance (16 chips / tp 8) reduce inside it,
    # then 6,250 instances ring S/2 over each chip's 3.2 Tbps / 16 share.
    grads = model.params / 8 * 2
    expected = 2 * 6249 / 6250 * (grads / 2) / (3.2e12 / 8 / 16)
    assert est.dp_comm_s == pytest.approx(expected)
    assert curve[0]["chips"] == 1 and curve[0]["efficiency"] == 1.0
    assert curve[-1]["chips"] == 100_000
    assert all(0 < p["efficiency"] <= 1.0 + 1e-9 for p in curve)
    assert est.fits is False       # 175B with Adam state does not fit 8 chips' HBM


def test_gpu_preset_uses_datasheet_roof():
    hw = load_hardware("h100")
    est = step_estimate(hw, single_gemm(8192, 8192, 8192), "bf16")
    (g,) = est.gemms
    assert g.compute_s == pytest.approx(2 * 8192**3 / 989e12)
    assert g.tile_cycles is None
