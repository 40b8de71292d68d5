"""Regression tier: ``tensor_engine="rtl"`` runs a kernel's matmuls on a 4 x 4 Verilator
tile and compares every PSUM word with the golden path (the RTL check of ``systolica nki
run --tensor-engine rtl``), and a difference is reported as an error naming the kernel
line."""

from pathlib import Path

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


def test_an_fp32_kernel_matmul_runs_on_a_tile_generated_with_fp32():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 8)).astype(np.float32)
    b = rng.standard_normal((128, 16)).astype(np.float32)
    result = nki.run(matmul.matmul_single_tile, a, b, tensor_engine="rtl", rows=4, cols=4)
    assert result.rtl["matmuls"] == 1 and result.rtl["mismatches"] == 0
    assert result.rtl["tile_matmuls"] == (128 // 4) * (8 // 4) and result.rtl["words"] > 0


def test_a_kernel_transpose_runs_on_the_rtl_tile_bit_for_bit():
    """nc_transpose on TensorE goes to the tile in transpose mode: a 128 x 128 BF16 tile of
    random bit patterns (NaN payloads, -0, subnormals among them) in 4 x 4 blocks, every
    PSUM element compared, and the kernel's output the input's transpose bit for bit."""
    from systolica.nki.kernels import transpose

    bits = np.random.default_rng(5).integers(0, 1 << 16, (128, 128), dtype=np.uint16)
    x = bits.view(BF16)
    result = nki.run(transpose.transpose_2d, x, tensor_engine="rtl", rows=4, cols=4)
    assert result.rtl["transposes"] == 1 and result.rtl["mismatches"] == 0
    assert result.rtl["transpose_commands"] == (128 // 4) * (128 // 4)
    assert result.rtl["transpose_words"] == 128 * 128
    assert (result.outputs.view(np.uint16) == bits.T).all()


def test_a_transpose_difference_names_the_instruction(monkeypatch):
    from systolica.nki.kernels import transpose
    from systolica.sim.api import runs

    real = runs.run_program

    def corrupted(jobs, **kwargs):
        result = real(jobs, **kwargs)
        result.psums[3][0, 1] = result.psums[3][0, 1].view(np.uint16) ^ np.uint16(1)
        return result
    monkeypatch.setattr(runs, "run_program", corrupted)
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128).astype(BF16)
    with pytest.raises(nki.NkiError, match=r"^transpose\.py:\d+: nc_transpose \(instruction "
                                           r"\d+\): the RTL tile's transpose \(4 x 4\) differs "
                                           r".* in 1 PSUM elements"):
        nki.run(transpose.transpose_2d, x, tensor_engine="rtl", rows=4, cols=4)


def test_transpose_blocks_place_each_slab_on_the_columns_it_selects():
    """A transpose whose moving picks partitions out of order (K = 10 over 4-row slabs):
    each slab's command takes the columns whose 1 lies in it, and the placed words are the
    whole transpose's."""
    from systolica.golden import nc_matmul

    rng = np.random.default_rng(2)
    stationary = rng.standard_normal((10, 6)).astype(BF16)
    pick = rng.permutation(10)[:7]
    moving = np.zeros((10, 7), BF16)
    moving[pick, np.arange(7)] = 1
    want = nc_matmul(stationary, moving, is_transpose=True)
    got = np.zeros_like(want)
    blocks = rtl.transpose_blocks(stationary, moving, 4, 4)
    assert len(blocks) == 3 * 2            # slabs 0, 4, 8 (each picked from) x M-folds 0, 4
    for _k0, m0, columns, block in blocks:
        assert ((block.moving == 1).sum(axis=0) == 1).all()
        got[m0:m0 + block.stationary.shape[1], columns] = nc_matmul(
            block.stationary, block.moving, is_transpose=True, rows=4)
    assert (got.view(np.uint16) == want.view(np.uint16)).all()


def test_a_kernel_mx_matmul_runs_on_an_mx_tile_bit_for_bit(capsys):
    """nc_matmul_mx (float32 dst) goes to a tile generated with the mx type set: the
    project's MXFP8 kernel (K = 512, M = 128, N = 512: one instruction) through ``systolica
    nki run --tensor-engine rtl`` on the 16 x 4 int8+mx build of
    tests/regression/rtl/test_rtl_mx.py, in K-slabs of 16 partitions x M-folds of 4, every
    PSUM word equal to the slab-by-slab golden accumulation; the summary line counts it."""
    from systolica.nki.cli import main

    kernels = Path(__file__).resolve().parents[3] / "nki" / "kernels"
    status = main(["run", f"{kernels}/matmul_mx.py::matmul_mxfp8", "--target", "trn3",
                   "--arg", "lhsT=512x128:bfloat16", "--arg", "rhs=512x512:bfloat16",
                   "--tensor-engine", "rtl", "--rows", "16", "--cols", "4"])
    out = capsys.readouterr().out
    assert status == 0, out
    slabs, folds = 128 // 16, 128 // 4
    assert (f"; 1 nc_matmul_mx ({slabs * folds} tile commands), {slabs * 128 * 512} PSUM "
            f"words compared; 0 mismatches") in out, out
    assert "golden model only" not in out


def test_an_mx_check_on_a_tile_of_rows_not_whole_scale_groups_is_one_line(monkeypatch):
    from systolica.nki import rtl
    from systolica.nki.kernels import matmul_mx

    def never(*args, **kwargs):
        raise AssertionError("the RTL check ran: the error should come at the instruction")

    monkeypatch.setattr(rtl, "check_matmuls", never)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((512, 128)).astype(BF16)
    b = rng.standard_normal((512, 512)).astype(BF16)
    with pytest.raises(nki.NkiError, match=r"matmul_mx\.py:\d+: nc_matmul_mx: the RTL check runs "
                                           r"it on a tile generated with mx, whose rows must be "
                                           r"a multiple of 8 .*not 4; allowed: e\.g\. --rows 8"):
        nki.run(matmul_mx.matmul_mxfp8, a, b, target="trn3", tensor_engine="rtl", rows=4,
                cols=4)
