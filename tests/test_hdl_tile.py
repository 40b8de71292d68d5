"""Unit tier: the tile in Amaranth's own simulator against the golden model."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from systolica.golden import nc_matmul, tile_latency
from systolica.hdl import Tile, moving_layout, stationary_layout


def run_tile(rows, cols, jobs, *, result_ready=lambda cycle: True, max_cycles=5000):
    """Run ``jobs`` (list of (stationary [K,M], moving [K,N])) through a Tile in amaranth.sim.

    Returns (results, accept_cycles, offer_cycles): the result rows per job as int arrays
    [M, N], the cycle each moving beat was accepted and each result first offered.
    """
    dut = Tile(rows, cols)
    s_layout, m_layout = stationary_layout(cols), moving_layout(rows)
    results = [[] for _ in jobs]
    accepted, offered = [], []

    async def load_and_stream(ctx):
        for stationary, _moving in jobs:
            k, m = stationary.shape
            for r in range(k):
                row = [int(v) & 0xFF for v in stationary[r]] + [0] * (cols - m)
                ctx.set(dut.stationary.payload,
                        s_layout.const({"data": row, "last": int(r == k - 1)}))
                ctx.set(dut.stationary.valid, 1)
                await ctx.tick().until(dut.stationary.ready)
            ctx.set(dut.stationary.valid, 0)
            await ctx.tick()

    async def moving_driver(ctx):
        cycle = 0
        for _stationary, moving in jobs:
            k, n = moving.shape
            for c in range(n):
                vec = [int(v) & 0xFF for v in moving[:, c]] + [0] * (rows - k)
                ctx.set(dut.moving.payload, m_layout.const({"data": vec, "last": int(c == n - 1)}))
                ctx.set(dut.moving.valid, 1)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.moving.ready)
                    cycle += 1
                    if ready:
                        accepted.append(cycle - 1)
                        break
            ctx.set(dut.moving.valid, 0)

    async def result_monitor(ctx):
        job, cycle, total = 0, 0, sum(mv.shape[1] for _, mv in jobs)
        seen_valid = False
        while sum(len(r) for r in results) < total:
            ready = result_ready(cycle)
            ctx.set(dut.result.ready, int(ready))
            _, _, valid, payload = await ctx.tick().sample(dut.result.valid, dut.result.payload)
            if valid and not seen_valid:
                offered.append(cycle)
            seen_valid = bool(valid) and not ready
            if valid and ready:
                results[job].append([int(v) for v in payload.data])
                if payload.last:
                    job += 1
            cycle += 1
            assert cycle < max_cycles, "tile stopped producing results"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(load_and_stream, background=True)
    sim.add_testbench(moving_driver, background=True)
    sim.add_testbench(result_monitor)
    sim.run()
    arrays = [np.array(r, dtype=np.uint32).view(np.int32).T[: st.shape[1]]
              for r, (st, _) in zip(results, jobs, strict=True)]
    return arrays, accepted, offered


def random_job(rng, k, m, n):
    return (rng.integers(-128, 128, size=(k, m), dtype=np.int8),
            rng.integers(-128, 128, size=(k, n), dtype=np.int8))


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 2), (4, 4)])
def test_tile_matches_golden(rows, cols):
    rng = np.random.default_rng(rows * 10 + cols)
    jobs = [random_job(rng, rows, cols, 5), random_job(rng, max(1, rows - 1), cols, 3),
            random_job(rng, rows, max(1, cols - 1), 1)]
    got, _, _ = run_tile(rows, cols, jobs)
    for (st, mv), result in zip(jobs, got, strict=True):
        np.testing.assert_array_equal(result, nc_matmul(st, mv))


def test_tile_latency_matches_timing_model():
    rows, cols = 3, 4
    rng = np.random.default_rng(7)
    _, accepted, offered = run_tile(rows, cols, [random_job(rng, rows, cols, 1)])
    assert offered[0] - accepted[0] == tile_latency(rows, cols)


def test_tile_backpressure_keeps_every_result():
    rows, cols = 3, 3
    rng = np.random.default_rng(3)
    jobs = [random_job(rng, rows, cols, 6), random_job(rng, 2, 2, 4)]
    got, _, _ = run_tile(rows, cols, jobs, result_ready=lambda cycle: cycle % 3 == 0)
    for (st, mv), result in zip(jobs, got, strict=True):
        np.testing.assert_array_equal(result, nc_matmul(st, mv))
