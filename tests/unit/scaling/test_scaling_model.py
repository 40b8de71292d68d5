"""Scaling layer: roofline, collectives, step time, scaling, and the headline estimates."""

import pytest

from systolica.scaling.hardware import load_hardware
from systolica.scaling.model import allreduce_s, step_estimate
from systolica.scaling.workloads import single_gemm


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


def test_gpu_preset_uses_datasheet_roof():
    hw = load_hardware("h100")
    est = step_estimate(hw, single_gemm(8192, 8192, 8192), "bf16")
    (g,) = est.gemms
    assert g.compute_s == pytest.approx(2 * 8192**3 / 989e12)
    assert g.tile_cycles is None
