"""Regression tier: ``tensor_engine="rtl"`` runs a kernel's matmuls on a 4 x 4 Verilator
tile and compares every PSUM word with the golden path (the RTL check of ``systolica nki
run --tensor-engine rtl``), and a difference is reported as an error naming the kernel
line."""

import ml_dtypes
import numpy as np
import pytest

from systolica import nki
from systolica.nki import rtl
from systolica.nki.kernels import matmul

BF16 = ml_dtypes.bfloat16


def _operands():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((128, 8)).astype(BF16),
            rng.standard_normal((128, 16)).astype(BF16))


def test_a_kernel_matmul_on_a_4x4_rtl_tile_matches_every_psum_word():
    a, b = _operands()
    result = nki.run(matmul.matmul_single_tile, a, b, tensor_engine="rtl", rows=4, cols=4)
    assert result.rtl["matmuls"] == 1 and result.rtl["mismatches"] == 0
    assert result.rtl["tile_matmuls"] == (128 // 4) * (8 // 4)      # K-slabs x M-folds
    assert result.rtl["words"] > 0


def test_a_psum_difference_names_the_instruction_and_its_line(monkeypatch):
    a, b = _operands()
    real = rtl.run_tiled_program

    def corrupted(problems, **kwargs):
        result = real(problems, **kwargs)
        result.outs[0][1, 2] += 1.0              # one PSUM word the tile got wrong
        return result
    monkeypatch.setattr(rtl, "run_tiled_program", corrupted)
    with pytest.raises(nki.NkiError, match=r"^matmul\.py:\d+: nc_matmul \(instruction 2\): "
                                           r"the RTL tile \(4 x 4\) differs .* 1 PSUM words, "
                                           r"first at \[1, 2\]"):
        nki.run(matmul.matmul_single_tile, a, b, tensor_engine="rtl", rows=4, cols=4)


def test_an_fp32_matmul_is_refused_by_the_rtl_check_in_one_line():
    a = np.ones((128, 8), np.float32)
    with pytest.raises(nki.NkiError, match=r"^matmul\.py:\d+: nc_matmul \(instruction 2\): the "
                                           r"RTL tile takes 8/16-bit operands only"):
        nki.run(matmul.matmul_single_tile, a, a, tensor_engine="rtl", rows=4, cols=4)
