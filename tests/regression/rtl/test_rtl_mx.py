"""Regression tier: NeuronCore-v4 MX matmuls on the RTL tile through the run API (bulk
driver, and a part of the program on the per-cycle driver) on both simulators.

A 16 x 4 tile generated with ``int8+mx`` (32-bit lanes with E8M0 scales, MX PEs) runs MXFP8 x
MXFP8 of both element types and mixed, MXFP4 on either side and both, every E8M0 scale code
0..255 (the extremes 0 and 254 and the NaN code 0xFF included) on both operands, special
elements (NaN and Inf codes, -0, subnormals) in every lane, a row tile, accumulation into an
MX result, BF16 PSUM writes (round to nearest even, and stochastic from a seed; overwrite and
accumulate) and an INT8 matmul between MX ones: every word checked by the scoreboard against
the golden model, every stamp against the cycle model, and each overwriting result against
``golden.nc_matmul_mx`` directly.
"""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden.mx import nc_matmul_mx
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, MatmulMx, Read, run_program
from systolica.verif import mx_rate

CONFIG = TileConfig(16, 4, "int8+mx")
E4M3FN, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)


def _elements(rng, dtype, shape, specials=False):
    """MX elements [P, F, 4]: finite random codes, or with ``specials`` every code of the
    type (NaN and Inf included) spread over the lanes."""
    top = 16 if dtype == E2M1 else 256
    codes = rng.integers(0, top, shape).astype(np.uint8)
    if specials:
        flat = codes.reshape(-1)
        every = np.arange(top, dtype=np.uint8)
        flat[rng.permutation(len(flat))[:top]] = every[:min(top, len(flat))]
    else:
        codes[~np.isfinite(codes.view(dtype).astype(np.float32))] &= 0xBF
    return codes.view(dtype)


def _program(rng):
    jobs = []
    pairs = [(E4M3FN, E4M3FN), (E5M2, E5M2), (E4M3FN, E5M2), (E5M2, E4M3FN), (E2M1, E4M3FN),
             (E5M2, E2M1), (E2M1, E2M1)]
    for i, (stype, mtype) in enumerate(pairs):
        p = 16 if i % 2 else 8
        jobs.append(MatmulMx(_elements(rng, stype, (p, 4, 4)), _elements(rng, mtype, (p, 6, 4)),
                             rng.integers(100, 150, (p // 8, 4)).astype(np.uint8),
                             rng.integers(100, 150, (p // 8, 6)).astype(np.uint8),
                             bank=i % 4, offset=8 * (i // 4)))
    # Every E8M0 code on each side: 256 codes over [2, 4] stationary x [2, 32] moving scales.
    codes = rng.permutation(256).astype(np.uint8)
    for s_codes, m_codes in ((codes[:8], codes[8:72]), (codes[72:80], codes[80:144]),
                             (codes[144:152], codes[152:216]), (codes[216:224], codes[224:256])):
        n = len(m_codes) // 2
        jobs.append(MatmulMx(_elements(rng, E4M3FN, (16, 4, 4)), _elements(rng, E5M2, (16, n, 4)),
                             s_codes.reshape(2, 4), m_codes.reshape(2, n), bank=4))
    # Special elements (every code, NaN and Inf among them) in every lane.
    for stype, mtype in ((E4M3FN, E5M2), (E5M2, E4M3FN), (E2M1, E5M2)):
        jobs.append(MatmulMx(_elements(rng, stype, (16, 4, 4), True),
                             _elements(rng, mtype, (16, 8, 4), True),
                             np.full((2, 4), 127, np.uint8), np.full((2, 8), 127, np.uint8),
                             bank=5))
    # A row tile, an INT8 matmul between, then an MX accumulation into the tile's region.
    jobs.append(MatmulMx(_elements(rng, E4M3FN, (8, 4, 4)), _elements(rng, E2M1, (8, 5, 4)),
                         np.uint8([[120, 125, 130, 135]]), np.uint8([[127, 126, 128, 129, 131]]),
                         bank=6,
                         tile_position=(8, 0), tile_size=(8, 4)))
    jobs.append(Matmul(rng.integers(-128, 128, (16, 4), dtype=np.int8),
                       rng.integers(-128, 128, (16, 3), dtype=np.int8), bank=7))
    jobs.append(MatmulMx(_elements(rng, E5M2, (16, 4, 4)), _elements(rng, E5M2, (16, 5, 4)),
                         rng.integers(110, 140, (2, 4)).astype(np.uint8),
                         rng.integers(110, 140, (2, 5)).astype(np.uint8), bank=6,
                         accumulate=True))
    jobs.append(Read(5, bank=6))
    # BF16 destinations, stochastic (seeded) then RNE: an overwrite and an accumulation into
    # it (upcast, add, round) each.
    for rounding, offset in (("stochastic", 32), ("rne", 16)):
        for accumulate in (False, True):
            jobs.append(MatmulMx(
                _elements(rng, E4M3FN, (16, 4, 4)), _elements(rng, E5M2, (16, 7, 4)),
                rng.integers(90, 170, (2, 4)).astype(np.uint8),
                rng.integers(90, 170, (2, 7)).astype(np.uint8), bank=3, offset=offset,
                accumulate=accumulate, dst_dtype=ml_dtypes.bfloat16, rounding=rounding,
                seed=int(rng.integers(1 << 32))))
    return jobs


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_mx_programs_are_bit_exact_and_on_time(simulator):
    rng = np.random.default_rng(26)
    jobs = _program(rng)
    result = run_program(jobs, config=CONFIG, simulator=simulator)
    assert result.mismatches == 0 and result.model_agrees()
    checked = 0
    for job, psum in zip(jobs, result.psums, strict=True):
        if isinstance(job, MatmulMx) and not job.accumulate:
            want = nc_matmul_mx(job.stationary, job.moving, job.stationary_scale,
                                job.moving_scale, rows=CONFIG.rows, dst_dtype=job.dst_dtype,
                                rounding=job.rounding,
                                seed=job.seed if job.rounding == "stochastic" else None)
            assert psum.dtype == want.dtype
            np.testing.assert_array_equal(psum.view(f"u{psum.itemsize}"),
                                          want.view(f"u{want.itemsize}"))
            checked += 1
    assert checked == 17
    for at in (-3, -1):             # the accumulations: stored BF16 + FP32 sums, rounded
        job = jobs[at]
        want = nc_matmul_mx(job.stationary, job.moving, job.stationary_scale,
                            job.moving_scale, psum=result.psums[at - 1], accumulate=True,
                            rows=CONFIG.rows, dst_dtype=ml_dtypes.bfloat16,
                            rounding=job.rounding,
                            seed=job.seed if job.rounding == "stochastic" else None)
        np.testing.assert_array_equal(result.psums[at].view(np.uint16), want.view(np.uint16))
    words = np.concatenate([p.view(np.uint32).reshape(-1) for p in result.psums[7:11]])
    assert (words == 0x7FC00000).any() and (words & 0x7FFFFFFF == 0x7F800000).any()


#: The part of :func:`_program` the per-cycle driver runs (it is slow: Icarus clocks the
#: 16 x 4 MX tile at about 20 cycles/s with Python in every cycle): MXFP4 on either side
#: with random scales, special elements, the row tile, the INT8 matmul (scale 0 lanes),
#: the MX accumulation, the READ and a stochastic BF16 overwrite and accumulation; the
#: accumulations keep the matmuls they add into.
CYCLE_PART = (4, 5, 11, 14, 15, 16, 17, 18, 19)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_the_cycle_driver_runs_mx_as_the_bulk_driver_does(simulator, seed):
    """``driver="cycle"`` (Python drives the x4 words and their E8M0 scales every cycle):
    without stalls every PSUM word and every stamp equal the bulk driver's run of the same
    jobs (and the cycle model's); under random idle and backpressure every word still
    does, and the run takes longer."""
    program = _program(np.random.default_rng(26))
    jobs = [program[i] for i in CYCLE_PART]
    assert {type(job) for job in jobs} == {MatmulMx, Matmul, Read}
    bulk = run_program(jobs, config=CONFIG, simulator=simulator, driver="bulk")
    no_stall = run_program(jobs, config=CONFIG, simulator=simulator, driver="cycle")
    stalled = run_program(jobs, config=CONFIG, simulator=simulator, driver="cycle",
                          idle=0.3, backpressure=0.3, seed=seed)
    assert bulk.mismatches == no_stall.mismatches == stalled.mismatches == 0
    assert bulk.model_agrees() and no_stall.model_agrees()
    assert no_stall.stamps == bulk.stamps and no_stall.cycles == bulk.cycles
    assert stalled.cycles > bulk.cycles
    for run in (no_stall, stalled):
        for want, got in zip(bulk.psums, run.psums, strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                          want.view(f"u{want.itemsize}"))
    assert stalled.psums[-1].dtype == ml_dtypes.bfloat16


def test_mx_on_a_tile_without_it_and_in_a_column_tile_is_refused():
    rng = np.random.default_rng(3)
    job = MatmulMx(_elements(rng, E4M3FN, (8, 2, 4)), _elements(rng, E5M2, (8, 3, 4)),
                   np.uint8([[127, 127]]), np.uint8([[127, 127, 127]]))
    for driver in ("bulk", "cycle"):
        with pytest.raises(ValueError, match=r"^the tile was generated for types all, not for "
                           r"MX matmuls; allowed: a TileConfig whose types include 'mx'"):
            run_program([job], config=TileConfig(8, 4), driver=driver)
    with pytest.raises(ValueError, match=r"^the tile rejects this MX matmul \(MX_TILE: P = 8, "
                       r"M = 2, N = 3, tile \(16, 2\) on a 16 x 4 tile\); allowed: a row tile "
                       r"\(tile_size's columns the tile's\), or none$"):
        run_program([MatmulMx(job.stationary, job.moving, job.stationary_scale,
                               job.moving_scale, tile_position=(0, 0), tile_size=(16, 2))],
                    config=CONFIG)


def test_stochastic_rounding_needs_a_bf16_destination():
    rng = np.random.default_rng(4)
    job = MatmulMx(_elements(rng, E4M3FN, (8, 2, 4)), _elements(rng, E5M2, (8, 3, 4)),
                   np.uint8([[127, 127]]), np.uint8([[127, 127, 127]]), rounding="stochastic")
    with pytest.raises(ValueError, match=r"^the tile rejects this MX matmul \(DST_MODE: .*; "
                       r"allowed: rounding='stochastic' with dst_dtype=ml_dtypes.bfloat16 "
                       r"only$"):
        run_program([job], config=CONFIG)


def test_back_to_back_mx_matmuls_reach_four_times_the_bf16_peak():
    """``make check-mx``'s rate check on the 16 x 4 tile: eight full-array MX matmuls of K =
    64 (16 partitions x 4), M = 4, N = 512 back to back, accumulating into one region (a
    K = 512 contraction): at least 97 % of four MACs per PE per cycle (the BF16 peak x 4,
    NeuronCore-v4's MX rate), every word the golden model's, every stamp the cycle
    model's."""
    out = mx_rate.rate(16, 4)
    assert out["mismatches"] == 0 and out["model_agrees"]
    assert out["peak"] == 4 * CONFIG.rows * CONFIG.cols
    assert out["fraction"] >= 0.97, out


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_regions_cross_banks_on_an_mx_tile(simulator):
    """NeuronCore-v4's longer moving stream: on an MX tile a matmul's region runs from its
    bank into the next ones (an MX matmul with a BF16 destination: on Verilator of N =
    1,024, [MM]'s largest, from the middle of bank 5 into bank 7; on Icarus, slower, of
    N = 64 over the end of bank 6; an INT8 matmul over the end of bank 0), and a READ across
    the boundary returns both banks' words."""
    rng = np.random.default_rng(28)
    n, bank, offset = (1024, 5, 256) if simulator == "verilator" else (64, 6, 480)
    mx = MatmulMx(_elements(rng, E4M3FN, (16, 4, 4)), _elements(rng, E5M2, (16, n, 4)),
                  rng.integers(120, 135, (2, 4)).astype(np.uint8),
                  rng.integers(120, 135, (2, n)).astype(np.uint8), bank=bank, offset=offset,
                  dst_dtype=ml_dtypes.bfloat16)
    a = rng.integers(-128, 128, (16, 4), dtype=np.int8)
    b = rng.integers(-128, 128, (16, 20), dtype=np.int8)
    jobs = [mx, Matmul(a, b, bank=0, offset=500), Read(30, bank=0, offset=495)]
    result = run_program(jobs, config=CONFIG, simulator=simulator)
    assert result.mismatches == 0 and result.model_agrees()
    want = nc_matmul_mx(mx.stationary, mx.moving, mx.stationary_scale, mx.moving_scale,
                        rows=CONFIG.rows, dst_dtype=ml_dtypes.bfloat16)
    np.testing.assert_array_equal(result.psums[0].view(np.uint16), want.view(np.uint16))
    product = a.astype(np.int64).T @ b.astype(np.int64)
    np.testing.assert_array_equal(result.psums[1], product)
    np.testing.assert_array_equal(result.psums[2][:, 5:25], product)     # 512.. in bank 1
    assert not result.psums[2][:, :5].any() and not result.psums[2][:, 25:].any()


def test_a_region_past_its_bank_is_refused_without_mx():
    a = np.ones((8, 4), np.int8)
    with pytest.raises(ValueError, match=r"^the matmul writes PSUM entries 500\.\.519, past the "
                       r"end of the 512-entry bank"):
        run_program([Matmul(a, np.ones((8, 20), np.int8), bank=0, offset=500)],
                    config=TileConfig(8, 4))
    with pytest.raises(ValueError, match=r"^the matmul writes PSUM entries 500\.\.531 from the "
                       r"start of bank 7, past the end of PSUM"):
        run_program([Matmul(np.ones((16, 4), np.int8), np.ones((16, 32), np.int8), bank=7,
                            offset=500)], config=CONFIG)
