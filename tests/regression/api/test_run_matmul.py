"""Regression tier: the run_matmul API against an independent int64 reference, and its errors."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import matmul_cycles
from systolica.golden.bf16 import fp32_bits
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, SimulatorNotFoundError, run_matmul, run_program
from systolica.sim.api.runs import _check_operands

BF16 = ml_dtypes.bfloat16
#: The 3 x 4 all-types tile the fuzzer's CI sample builds (tests/regression/verif/
#: test_verif_fuzz.py): the tests below that need a 3 x 4 tile share it instead of building
#: a BF16-only and an INT8-only one of their own.
TILE_3X4 = TileConfig(3, 4)


def int64_reference(stationary, moving):
    """Independent of the golden model: int64 einsum, then an explicit 32-bit wrap."""
    wide = np.einsum("km,kn->mn", stationary.astype(np.int64), moving.astype(np.int64))
    return ((wide + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_matmul_random_shapes_up_to_tile(simulator, seed):
    # The 4 x 4 all-types tile CI builds for the regression and the fuzzer (a 4 x 5 INT8
    # tile was a build of its own); K < rows and M < cols on the 3 x 4 tests below.
    config = TileConfig(4, 4)
    rows, cols = config.rows, config.cols
    rng = np.random.default_rng(seed)
    for k, m, n in [(4, 4, 9), (1, 1, 1), (3, 4, 2), (4, 2, 17)]:
        s = rng.integers(-128, 128, (k, m), dtype=np.int8)
        mv = rng.integers(-128, 128, (k, n), dtype=np.int8)
        psum, cycles = run_matmul(s, mv, config=config, simulator=simulator)
        assert psum.dtype == np.int32 and psum.shape == (m, n)
        np.testing.assert_array_equal(psum, int64_reference(s, mv))
        # Cycle-exact against the no-stall timing model.
        assert cycles == matmul_cycles(rows, cols, n)


def test_run_matmul_accumulates_into_psum_with_wrap():
    rng = np.random.default_rng(3)
    s = rng.integers(-128, 128, (2, 3), dtype=np.int8)
    mv = rng.integers(-128, 128, (2, 4), dtype=np.int8)
    psum = np.full((3, 4), 2**31 - 10, np.int32)
    out, _ = run_matmul(s, mv, rows=2, cols=3, simulator="icarus", psum=psum, accumulate=True)
    want = (int64_reference(s, mv).astype(np.int64) + psum + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(out, want.astype(np.int32))


def test_run_program_under_stalls_keeps_results_and_order():
    rng = np.random.default_rng(4)
    jobs = [(rng.integers(-128, 128, (3, 3), dtype=np.int8),
             rng.integers(-128, 128, (3, n), dtype=np.int8)) for n in (5, 1, 7)]
    result = run_program(jobs, rows=3, cols=3, simulator="icarus", idle=0.4,
                         backpressure=0.5, seed=11)
    assert result.mismatches == 0
    for (s, mv), psum in zip(jobs, result.psums, strict=True):
        np.testing.assert_array_equal(psum, int64_reference(s, mv))


GOOD = np.zeros((2, 2), np.int8)


@pytest.mark.parametrize("call,error,text", [
    (lambda: run_matmul(GOOD.astype(np.int32), GOOD, rows=2, cols=2), TypeError,
     "stationary has unsupported type int32; the tensor engine takes int8"),
    (lambda: run_matmul(GOOD, GOOD.astype(BF16), rows=2, cols=2), TypeError,
     "int8 pairs only with int8; got stationary int8 and moving bfloat16"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, ftz=True), ValueError,
     "ftz applies to float matmuls only"),
    (lambda: run_matmul(GOOD, np.zeros((2, 513), np.int8), rows=2, cols=2), ValueError,
     "must be between 1 and 512 \\(the PSUM entries one matmul may write\\), not 513"),
    (lambda: run_matmul(np.zeros((3, 2), np.int8), np.zeros((3, 1), np.int8), rows=2, cols=2),
     ValueError, "K must be in 1..2 on a tile of 2 partition rows, not 3"),
    (lambda: run_matmul(np.zeros((5, 2), ml_dtypes.float8_e4m3),
                        np.zeros((5, 1), ml_dtypes.float8_e5m2), rows=2, cols=2,
                        perf_mode="double_row"),
     ValueError, r"K must be in 1..4 on a tile of 2 partition rows in double_row mode"),
    (lambda: run_matmul(np.zeros((2, 2), ml_dtypes.float8_e4m3), GOOD.astype(np.float16),
                        rows=2, cols=2, perf_mode="double_row"),
     TypeError, "perf_mode='double_row' needs both operands float8_e4m3 or float8_e5m2"),
    (lambda: run_matmul(np.zeros((2, 3), np.int8), GOOD, rows=2, cols=2),
     ValueError, "M = 3 must be between 1 and cols = 2"),
    (lambda: run_matmul(GOOD, GOOD, rows=-2, cols=2), ValueError,
     "rows must be a positive integer, not -2"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, simulator="modelsim"), ValueError,
     "unknown simulator 'modelsim'; choose one of: icarus, verilator"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, accumulate=True), ValueError,
     "accumulate=True needs psum"),
    (lambda: run_matmul(GOOD, np.zeros((2, 0), np.int8), rows=2, cols=2), ValueError,
     "N \\(moving columns\\) must be between 1 and 512 \\(the PSUM entries one matmul "
     "may write\\), not 0"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, bank=8), ValueError,
     "bank must be between 0 and 7 \\(the tile has 8 PSUM banks\\), not 8"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, offset=511), ValueError,
     "the matmul writes PSUM entries 511..512, past the end of the 512-entry bank"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, bank=-1), ValueError,
     "bank must be a non-negative integer, not -1"),
    (lambda: run_program([Read(0)], rows=2, cols=2), ValueError,
     "Read.n must be a positive integer, not 0"),
    (lambda: run_program([Read(4, offset=510)], rows=2, cols=2), ValueError,
     "the READ reads PSUM entries 510..513"),
    (lambda: run_matmul(GOOD, GOOD, rows=2, cols=2, psum=np.zeros((2, 2), np.int32)),
     ValueError, "psum is only used with accumulate=True"),
    # A transpose given psum is told about psum (it was told "takes no accumulate=True").
    (lambda: run_matmul(GOOD, np.eye(2, dtype=np.int8), rows=2, cols=2, is_transpose=True,
                        psum=np.zeros((2, 2), np.int32)),
     ValueError, "psum is only used with accumulate=True"),
    (lambda: run_matmul(GOOD, np.eye(2, dtype=np.int8), rows=2, cols=2, is_transpose=True,
                        accumulate=True, psum=np.zeros((2, 2), np.int32)),
     ValueError, "is_transpose=True takes no accumulate=True"),
    (lambda: run_program([Matmul(GOOD, GOOD, accumulate="yes")], rows=2, cols=2), TypeError,
     "Matmul.accumulate must be a bool, not str"),
    (lambda: run_program(["x"], rows=2, cols=2), TypeError,
     "each job must be a Matmul, a MatmulMx, a Read or a \\(stationary, moving\\) pair, "
     "not str"),
])
def test_bad_input_gives_one_line_error(call, error, text):
    with pytest.raises(error, match=text) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("simulator,tool", [("icarus", "iverilog"), ("verilator", "make")])
def test_missing_simulator_binary_is_named(simulator, tool, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(SimulatorNotFoundError, match=tool) as info:
        run_matmul(GOOD, GOOD, rows=2, cols=2, simulator=simulator, waves=False)
    assert "apt-get install" in str(info.value)


def test_operand_check_accepts_tile_sized_input():
    from systolica.hdl.config import TileConfig

    _check_operands(np.zeros((4, 5), np.int8), np.zeros((4, 1), np.int8), TileConfig(4, 5))


def exact_bf16_reference(stationary, moving):
    """Independent of the golden model for BF16 inputs whose products and partial sums are
    exact in FP32: float64 sums of small-integer-valued BF16 numbers are exact, so they
    equal every RNE chain."""
    return np.einsum("km,kn->mn", stationary.astype(np.float64),
                     moving.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_matmul_bf16_exact_values(simulator, seed):
    rng = np.random.default_rng(seed)
    s = rng.integers(-64, 65, (3, 4)).astype(BF16)        # small integers: exact in BF16
    mv = rng.integers(-64, 65, (3, 6)).astype(BF16)
    psum, cycles = run_matmul(s, mv, config=TILE_3X4, simulator=simulator)
    assert psum.dtype == np.float32
    np.testing.assert_array_equal(fp32_bits(psum), fp32_bits(exact_bf16_reference(s, mv)))
    assert cycles == matmul_cycles(3, 4, 6)


def test_run_program_accumulates_in_the_rtl_psum():
    """Two K-slabs accumulate inside the tile's PSUM: the sum equals the whole-K result."""
    rng = np.random.default_rng(6)
    s = rng.integers(-8, 9, (4, 2)).astype(BF16)
    mv = rng.integers(-8, 9, (4, 5)).astype(BF16)
    jobs = [Matmul(s[:2], mv[:2]), Matmul(s[2:], mv[2:], accumulate=True)]
    result = run_program(jobs, rows=2, cols=2, simulator="icarus")
    np.testing.assert_array_equal(result.psums[1], exact_bf16_reference(s, mv))


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_matmul_into_a_bank_and_offset(simulator):
    """The region is written and read back with a READ command; its cycles are unchanged."""
    rng = np.random.default_rng(8)
    s = rng.integers(-128, 128, (3, 4), dtype=np.int8)
    mv = rng.integers(-128, 128, (3, 7), dtype=np.int8)
    psum, cycles = run_matmul(s, mv, config=TILE_3X4, simulator=simulator, bank=5, offset=505)
    np.testing.assert_array_equal(psum, int64_reference(s, mv))
    assert cycles == matmul_cycles(3, 4, 7)


def test_run_program_reads_regions_written_by_several_matmuls():
    rng = np.random.default_rng(9)
    a = [rng.integers(-128, 128, (2, 3), dtype=np.int8) for _ in range(3)]
    b = [rng.integers(-128, 128, (2, 4), dtype=np.int8) for _ in range(3)]
    jobs = [Matmul(a[0], b[0], bank=1, offset=0), Matmul(a[1], b[1], bank=1, offset=4),
            Matmul(a[2], b[2], bank=1, offset=2, accumulate=True), Read(8, bank=1),
            Read(2, bank=0, offset=0)]
    result = run_program(jobs, rows=2, cols=3, simulator="verilator")
    assert result.mismatches == 0
    want = np.zeros((3, 8), np.int64)
    want[:, 0:4] = int64_reference(a[0], b[0])
    want[:, 4:8] = int64_reference(a[1], b[1])
    want[:, 2:6] += int64_reference(a[2], b[2])
    np.testing.assert_array_equal(result.psums[3], want.astype(np.int32))
    np.testing.assert_array_equal(result.psums[4], np.zeros((3, 2), np.int32))  # untouched
    assert result.model_agrees()
