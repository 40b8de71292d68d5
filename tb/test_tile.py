"""Regression tests of the tile: run by ``tests/test_regression.py`` on each simulator.

Every test derives its matrices and its idle/backpressure pattern from ``cocotb.RANDOM_SEED``
(printed by cocotb at start-up; replay with ``COCOTB_RANDOM_SEED=<seed>``), so a failure is
reproducible.
"""

import os

import cocotb
import numpy as np

from .tile_tb import SimulationStuck, TileTB, random_int8


def _rng(salt):
    return np.random.default_rng([cocotb.RANDOM_SEED, salt])


async def _started(dut, salt, idle=0.0, backpressure=0.0):
    tb = TileTB(dut, seed=cocotb.RANDOM_SEED * 1000 + salt, idle=idle, backpressure=backpressure)
    dut._log.info("tile %d x %d, COCOTB_RANDOM_SEED=%s (test seed %d), idle %.2f, "
                  "backpressure %.2f", tb.rows, tb.cols, os.environ.get("COCOTB_RANDOM_SEED"),
                  cocotb.RANDOM_SEED, idle, backpressure)
    await tb.start()
    return tb


@cocotb.test()
async def test_random_full_size(dut):
    """Random int8 matrices using the whole tile (K = rows, M = cols)."""
    tb = await _started(dut, 1)
    rng = _rng(1)
    for n in (1, 7, 2 * tb.rows + 3):
        tb.submit(random_int8(rng, (tb.rows, tb.cols)), random_int8(rng, (tb.rows, n)))
    await tb.run()
    tb.check()


@cocotb.test()
async def test_extremes(dut):
    """-128 and 127 everywhere (largest products of each sign), and all zeros."""
    tb = await _started(dut, 2)
    k, m = tb.rows, tb.cols
    for s_value, m_value in ((-128, -128), (127, 127), (-128, 127), (127, -128), (0, 0)):
        tb.submit(np.full((k, m), s_value, np.int8), np.full((k, 3), m_value, np.int8))
    await tb.run()
    tb.check()


@cocotb.test()
async def test_identity(dut):
    """An identity stationary passes the moving vectors through (PSUM = moving)."""
    tb = await _started(dut, 3)
    d = min(tb.rows, tb.cols)
    moving = random_int8(_rng(3), (d, 5))
    record = tb.submit(np.eye(d, dtype=np.int8), moving)
    await tb.run()
    tb.check()
    np.testing.assert_array_equal(tb.results(record), moving.astype(np.int32))


@cocotb.test()
async def test_one_hot_rows(dut):
    """One-hot moving vectors select one partition row each, so a skew error names its row."""
    tb = await _started(dut, 4)
    k, m = tb.rows, tb.cols
    stationary = ((np.arange(k * m).reshape(k, m) % 120) + 1).astype(np.int8)
    moving = np.zeros((k, k), np.int8)
    moving[np.arange(k), np.arange(k)] = 1
    record = tb.submit(stationary, moving)
    await tb.run()
    tb.check()
    # Column n of the result is partition row n of the stationary matrix.
    np.testing.assert_array_equal(tb.results(record), stationary.T.astype(np.int32))


@cocotb.test()
async def test_partial_k_and_m(dut):
    """K < rows and M < cols: unused partition rows and columns stay out of the result."""
    tb = await _started(dut, 5)
    rng = _rng(5)
    for k in sorted({1, max(1, tb.rows // 2), tb.rows}):
        for m in sorted({1, max(1, tb.cols - 1)}):
            tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 4)))
    await tb.run()
    tb.check()


@cocotb.test()
async def test_back_to_back_stationaries(dut):
    """Several matmuls in a row, each with its own stationary, including single-beat ones."""
    tb = await _started(dut, 6)
    rng = _rng(6)
    for i in range(8):
        n = int(rng.integers(1, 2 * tb.rows + 2)) if i % 2 else 1
        tb.submit(random_int8(rng, (tb.rows, tb.cols)), random_int8(rng, (tb.rows, n)))
    await tb.run()
    tb.check()


@cocotb.test()
async def test_random_idle_and_backpressure(dut):
    """Random shapes under random input idles and result backpressure."""
    tb = await _started(dut, 7, idle=0.3, backpressure=0.4)
    rng = _rng(7)
    for _ in range(6):
        k = int(rng.integers(1, tb.rows + 1))
        m = int(rng.integers(1, tb.cols + 1))
        n = int(rng.integers(1, 12))
        tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, n)))
    await tb.run()
    tb.check()


@cocotb.test()
async def test_error_injection_is_caught(dut):
    """Corrupt one golden word on purpose: the scoreboard must flag exactly that word."""
    tb = await _started(dut, 8)
    rng = _rng(8)
    stationary = random_int8(rng, (tb.rows, tb.cols))
    moving = random_int8(rng, (tb.rows, 3))
    from systolica.golden import nc_matmul

    wrong = nc_matmul(stationary, moving).copy()
    bad_m, bad_n = tb.cols - 1, 1
    wrong[bad_m, bad_n] ^= 1 << 4
    tb.submit(stationary, moving, expected=wrong)
    await tb.run()
    assert len(tb.scoreboard.mismatches) == 1, tb.scoreboard.summary()
    caught = tb.scoreboard.mismatches[0]
    assert (caught.matmul, caught.m, caught.n) == (0, bad_m, bad_n), str(caught)
    try:
        tb.check()
    except AssertionError as error:
        dut._log.info("error injection caught as intended: %s", error)
    else:
        raise AssertionError("the scoreboard accepted a corrupted golden result")


@cocotb.test()
async def test_stuck_tile_times_out_with_message(dut):
    """A matmul whose stationary never comes: the tile waits, the TB gives up with a message."""
    tb = await _started(dut, 9)
    tb.moving.send({"data": [1] * tb.rows, "last": 1})
    tb.scoreboard.expect(0, 0, [0] * tb.cols, last=True)
    try:
        await tb.run(max_cycles=40)
    except SimulationStuck as error:
        dut._log.info("stuck run reported as intended: %s", error)
        assert "moving beats sent 0 (1 pending)" in str(error), str(error)
        assert "1 missing" in str(error), str(error)
    else:
        raise AssertionError("the tile ran a matmul without a stationary, or the TB never gave up")
