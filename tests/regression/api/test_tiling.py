"""The tiling helper: any-size GEMMs as K-slabs, M-folds and N-chunks on small RTL tiles."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import systolica.sim.api.tiling as tiling
from systolica.golden import identity, nc_matmul
from systolica.hdl.config import TileConfig
from systolica.sim.api.tiling import (
    Block,
    golden_tiled_matmul,
    golden_tiled_matmuls,
    plan,
    run_tiled,
    run_tiled_program,
    tiled_jobs,
)

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3
#: The 3 x 4 all-types tile the fuzzer's CI sample builds, shared by the FP8 double-row and
#: BF16 runs below (each built a tile of its own type set and size before).
TILE_3X4 = TileConfig(3, 4)


def int64_reference(stationary, moving):
    """Independent of the golden model: exact int64 sums, then a 32-bit wrap."""
    wide = np.einsum("km,kn->mn", stationary.astype(np.int64), moving.astype(np.int64))
    return ((wide + 2**31) % 2**32 - 2**31).astype(np.int32)


def bf16_slab_reference(stationary, moving, rows):
    """Independent scalar loop: per column, per K-slab, ``acc = p[k0]; acc += p[k]`` in
    float32 (each add one RNE rounding), then ``psum += acc``. Exact products (normal-range
    operands only)."""
    s = stationary.astype(np.float32)
    m = moving.astype(np.float32)
    k_total, mm = s.shape
    n = m.shape[1]
    out = np.zeros((mm, n), np.float32)
    for i in range(mm):
        for j in range(n):
            psum = None
            for k0 in range(0, k_total, rows):
                acc = np.float32(s[k0, i] * m[k0, j])
                for k in range(k0 + 1, min(k_total, k0 + rows)):
                    acc = np.float32(acc + np.float32(s[k, i] * m[k, j]))
                psum = acc if psum is None else np.float32(psum + acc)
            out[i, j] = psum
    return out


def test_plan_folds_chunks_and_slabs():
    blocks = plan(10, 7, 1030, rows=4, cols=3)
    slabs = ((0, 4), (4, 8), (8, 10))
    want = [Block(m0, m1, n0, n1, slabs)
            for m0, m1 in ((0, 3), (3, 6), (6, 7))
            for n0, n1 in ((0, 512), (512, 1024), (1024, 1030))]
    assert blocks == want
    assert tiling.matmul_count(10, 7, 1030, 4, 3) == 27


def test_tiled_jobs_accumulate_only_after_a_blocks_first_slab():
    s = np.arange(5 * 4, dtype=np.int8).reshape(5, 4)
    m = np.ones((5, 2), np.int8)
    jobs, blocks = tiled_jobs(s, m, rows=2, cols=3)
    assert [j.accumulate for j in jobs] == [False, True, True, False, True, True]
    assert [j.stationary.shape for j in jobs] == [(2, 3), (2, 3), (1, 3), (2, 1), (2, 1), (1, 1)]
    np.testing.assert_array_equal(jobs[4].stationary, s[2:4, 3:4])


def test_golden_tiled_int8_equals_exact_sums():
    rng = np.random.default_rng(5)
    s = rng.integers(-128, 128, (37, 9), dtype=np.int8)
    m = rng.integers(-128, 128, (37, 6), dtype=np.int8)
    np.testing.assert_array_equal(golden_tiled_matmul(s, m, rows=4), int64_reference(s, m))


def test_golden_tiled_bf16_rounds_once_per_slab():
    rng = np.random.default_rng(6)
    s = rng.standard_normal((13, 4)).astype(BF16)
    m = rng.standard_normal((13, 3)).astype(BF16)
    got = golden_tiled_matmul(s, m, rows=5)
    np.testing.assert_array_equal(got.view(np.uint32),
                                  bf16_slab_reference(s, m, 5).view(np.uint32))


def test_golden_tiled_bf16_depends_on_the_slab_length():
    # Products 2**-24, 0, 1, -1. One chain: 2**-24 + 0 + 1 rounds to 1 (a tie, to even),
    # and 1 - 1 leaves 0. Slabs of 2: (2**-24 + 0) and (1 - 1) = 0, so PSUM keeps 2**-24.
    s = np.array([[2.0**-24], [0.0], [1.0], [-1.0]], BF16)
    m = np.ones((4, 1), BF16)
    assert golden_tiled_matmul(s, m, rows=4)[0, 0] == 0.0
    assert golden_tiled_matmul(s, m, rows=2)[0, 0] == np.float32(2.0**-24)
    assert golden_tiled_matmul(s, m, rows=1)[0, 0] == 0.0


def slab_by_slab(stationary, moving, rows, ftz=False):
    """The tiling rule written out: one nc_matmul per K-slab, accumulating into PSUM."""
    mode = {"ftz": True} if ftz else {}
    psum = None
    for k0 in range(0, stationary.shape[0], rows):
        psum = nc_matmul(stationary[k0:k0 + rows], moving[k0:k0 + rows], psum=psum,
                         accumulate=psum is not None, **mode)
    return psum


@pytest.mark.parametrize("ftz", [False, True])
def test_golden_tiled_matmuls_equal_slab_by_slab_per_problem(ftz):
    rng = np.random.default_rng(8)
    shapes = [(13, 4, 3), (13, 4, 3), (8, 2, 5), (3, 1, 1), (13, 4, 3), (16, 3, 2)]
    problems = []
    for k, m, n in shapes:   # wide exponents: subnormal products, cancellation, overflow
        scale = 2.0 ** rng.integers(-70, 70, (k, 1))
        problems.append(((rng.standard_normal((k, m)) * scale).astype(BF16),
                         (rng.standard_normal((k, n)) * scale).astype(BF16)))
    if not ftz:
        problems += [(rng.integers(-128, 128, (k, m), dtype=np.int8),
                      rng.integers(-128, 128, (k, n), dtype=np.int8)) for k, m, n in shapes]
    got = golden_tiled_matmuls(problems, rows=4, ftz=ftz)
    assert len(got) == len(problems)
    for (s, m), out in zip(problems, got, strict=True):
        want = slab_by_slab(s, m, 4, ftz)
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


def test_double_row_slabs_are_twice_the_rows():
    blocks = plan(11, 3, 5, 4, 4, perf_mode="double_row")
    assert [b.slabs for b in blocks] == [((0, 8), (8, 11))]
    assert tiling.matmul_count(11, 3, 5, 4, 4, perf_mode="double_row") == 2
    jobs, _ = tiled_jobs(np.ones((11, 3), E4M3), np.ones((11, 5), E4M3), 4, 4,
                         perf_mode="double_row")
    assert [(j.stationary.shape[0], j.accumulate, j.perf_mode) for j in jobs] == [
        (8, False, "double_row"), (3, True, "double_row")]


def fp8(rng, shape):
    """Random e4m3 values of every class but NaN and Inf (subnormals included)."""
    bits = rng.integers(0, 256, shape).astype(np.uint8)
    bits[(bits & 0x7F) >= 0x78] &= 0x77          # no Inf / NaN (exponent 1111)
    return bits.view(E4M3)


@pytest.mark.parametrize("ftz", [False, True])
def test_golden_tiled_double_row_equals_slab_by_slab_nc_matmul(ftz):
    # Mixed pairs too: e4m3 x e5m2. Each slab is one double-row nc_matmul (the order k, k +
    # rows inside the slab), slabs added into PSUM one FP32 rounding each.
    rng = np.random.default_rng(3)
    rows = 4
    for k, m, n in [(8, 3, 5), (11, 2, 4), (19, 4, 3), (3, 1, 1)]:
        s = fp8(rng, (k, m))
        v = fp8(rng, (k, n)).astype(np.float32).astype(ml_dtypes.float8_e5m2)
        want = None
        for k0 in range(0, k, 2 * rows):
            want = nc_matmul(s[k0:k0 + 2 * rows], v[k0:k0 + 2 * rows], psum=want,
                             accumulate=want is not None, ftz=ftz, perf_mode="double_row",
                             rows=rows)
        got = golden_tiled_matmul(s, v, rows, ftz, perf_mode="double_row")
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_run_tiled_fp8_double_row_uneven_shape():
    rng = np.random.default_rng(5)
    s, m = fp8(rng, (13, 6)), fp8(rng, (13, 7))          # slabs 6 + 6 + 1, folds 4 + 2
    r = run_tiled(s, m, config=TILE_3X4, simulator="verilator", perf_mode="double_row")
    assert r.out.dtype == np.float32 and r.out.shape == (6, 7)
    np.testing.assert_array_equal(r.out.view(np.uint32), r.golden.view(np.uint32))
    assert (r.mismatches, r.differing, r.matmuls) == (0, 0, 6)
    assert 0 < r.macs_per_cycle <= 2 * 3 * 4


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_tiled_int8_uneven_shape(simulator):
    rng = np.random.default_rng(7)
    s = rng.integers(-128, 128, (11, 7), dtype=np.int8)    # 3 slabs of 4, folds 4 + 3
    m = rng.integers(-128, 128, (11, 9), dtype=np.int8)
    r = run_tiled(s, m, rows=4, cols=4, simulator=simulator)
    assert r.out.dtype == np.int32 and r.out.shape == (7, 9)
    np.testing.assert_array_equal(r.out, int64_reference(s, m))
    assert (r.mismatches, r.differing, r.matmuls, r.macs) == (0, 0, 6, 11 * 7 * 9)
    assert r.exact and r.cycles > 0
    assert 0 < r.macs_per_cycle <= 16


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_tiled_bf16_uneven_shape(simulator):
    rng = np.random.default_rng(8)
    s = rng.standard_normal((10, 8)).astype(BF16)         # slabs 3+3+3+1, folds 4 + 4
    m = rng.standard_normal((10, 6)).astype(BF16)
    r = run_tiled(s, m, config=TILE_3X4, simulator=simulator)
    assert r.out.dtype == np.float32 and r.out.shape == (8, 6)
    np.testing.assert_array_equal(r.out.view(np.uint32),
                                  bf16_slab_reference(s, m, 3).view(np.uint32))
    assert (r.mismatches, r.differing, r.matmuls) == (0, 0, 8)


def test_run_tiled_chunks_n_beyond_the_psum_depth():
    rng = np.random.default_rng(9)
    s = rng.integers(-128, 128, (3, 4), dtype=np.int8)     # 2 slabs, 2 folds, 2 chunks
    m = rng.integers(-128, 128, (3, 515), dtype=np.int8)
    r = run_tiled(s, m, rows=2, cols=3, simulator="verilator")
    np.testing.assert_array_equal(r.out, int64_reference(s, m))
    assert (r.mismatches, r.differing, r.matmuls) == (0, 0, 8)


def test_plan_transpose_pairs_each_slab_with_its_own_entries():
    # [13, 10] data on a 4 x 8 tile: K-slabs 4 + 4 + 4 + 1, M-folds 8 + 2; a block's
    # entries are its slab's partitions (the identity's non-zero block), no accumulation.
    blocks = plan(13, 10, 13, 4, 8, is_transpose=True)
    assert len(blocks) == 8
    assert all(b.slabs == ((b.n0, b.n1),) for b in blocks)
    assert {(b.m0, b.m1) for b in blocks} == {(0, 8), (8, 10)}
    assert sorted({b.slabs[0] for b in blocks}) == [(0, 4), (4, 8), (8, 12), (12, 13)]
    jobs, _ = tiled_jobs(np.ones((13, 10), BF16), identity(13, BF16), 4, 8, is_transpose=True)
    assert len(jobs) == 8 and all(j.is_transpose and not j.accumulate for j in jobs)


def test_run_tiled_transposes_bf16_specials_bit_for_bit():
    """Two transposes in one program on a 3 x 4 tile, every special BF16 value among random
    ones: the result is each data's transpose, bit for bit (numpy's .T, not the golden model),
    and counts no MACs."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((7, 6)).astype(BF16)
    specials = [0x7FC1, 0xFFBF, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x807F, 0x0080]
    a.view(np.uint16).flat[::5][:len(specials)] = specials
    b = rng.standard_normal((2, 5)).astype(BF16)
    out = run_tiled_program([(a, identity(7, BF16)), (b, identity(2, BF16))],
                            config=TILE_3X4, simulator="verilator", is_transpose=True)
    for got, data in zip(out.outs, (a, b), strict=True):
        assert got.dtype == BF16 and got.shape == data.shape[::-1]
        np.testing.assert_array_equal(got.view(np.uint16), data.T.view(np.uint16))
    # [7, 6]: slabs 3 + 3 + 1 x folds 4 + 2; [2, 5]: one slab x folds 4 + 1.
    assert (out.mismatches, out.differing, out.matmuls, out.macs) == (0, [0, 0], 8, 0)


def test_a_wrong_rtl_result_is_reported(monkeypatch):
    real = tiling.run_program

    def corrupt(jobs, **kwargs):
        result = real(jobs, **kwargs)
        psums = [p.copy() for p in result.psums]
        psums[-1].view(np.uint32)[0, 1] ^= 1 << 4      # one bit of one final word
        return dataclasses.replace(result, psums=psums)

    monkeypatch.setattr(tiling, "run_program", corrupt)
    rng = np.random.default_rng(10)
    s = rng.standard_normal((5, 3)).astype(BF16)
    m = rng.standard_normal((5, 2)).astype(BF16)
    r = run_tiled(s, m, config=TILE_3X4, simulator="verilator")
    assert r.differing == 1 and not r.exact
    assert r.out[0, 1] != r.golden[0, 1]


def test_scoreboard_mismatches_are_passed_on(monkeypatch):
    real = tiling.run_program
    monkeypatch.setattr(tiling, "run_program",
                        lambda jobs, **kw: dataclasses.replace(real(jobs, **kw), mismatches=3))
    s = np.ones((3, 2), np.int8)
    r = run_tiled(s, s, rows=2, cols=2, simulator="verilator")
    assert r.mismatches == 3 and r.differing == 0 and not r.exact


@pytest.mark.parametrize("call,error,text", [
    (lambda: plan(0, 1, 1, 2, 2), ValueError, "K must be a positive integer, not 0"),
    (lambda: tiled_jobs(np.ones((2, 2), np.int8), np.ones((3, 2), np.int8), 2, 2),
     ValueError, "must share K"),
    (lambda: tiled_jobs(np.ones((2, 2), np.int8), np.ones((2, 2), BF16), 2, 2),
     TypeError, "int8 pairs only with int8"),
    (lambda: golden_tiled_matmul(np.ones((2, 2), np.float64), np.ones((2, 2), np.float64), 2),
     TypeError, "float64"),
    (lambda: tiled_jobs(np.ones((2, 2), BF16), np.ones((2, 2), E4M3), 2, 2,
                        perf_mode="double_row"), TypeError, "double_row"),
    (lambda: golden_tiled_matmuls([(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8))], 2,
                                  ftz=True), ValueError, "ftz applies to float"),
    (lambda: plan(3, 2, 4, 2, 2, is_transpose=True), ValueError, "N must be K"),
    (lambda: tiled_jobs(np.ones((3, 2), BF16), np.ones((3, 3), BF16), 2, 2,
                        is_transpose=True), ValueError, "must be the \\[3, 3\\] identity"),
    (lambda: golden_tiled_matmuls([(np.ones((2, 2), BF16), identity(2, BF16))], 2,
                                  ftz=True, is_transpose=True), ValueError, "no ftz"),
])
def test_bad_problems_are_refused(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_concurrent_placement_puts_small_problems_in_the_finest_tiles_in_turn():
    """One-matmul problems that fit a quarter tile take the diagonal quarters in turn;
    others (K or M too large, or more than one matmul) keep the whole array; the cycle
    model's ops carry the same tiles."""
    from systolica.golden import finest_tile

    small = (np.ones((2, 2), np.int8), np.ones((2, 5), np.int8))
    tall = (np.ones((3, 2), np.int8), np.ones((3, 5), np.int8))      # K = 3 > 2
    places = tiling.concurrent_placement([small, tall, small, small], 8, 8)
    assert places == [finest_tile(8, 8, 0), None, finest_tile(8, 8, 1), finest_tile(8, 8, 2)]
    ops = tiling.program_tile_ops([small, tall], 8, 8, concurrent=True)
    assert [(op.tile_position, op.k, op.n) for op in ops] == [((0, 0), 2, 5), (None, 3, 5)]
    assert tiling.concurrent_placement([small], 8, 8, perf_mode="double_row") == [None]


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_tiled_program_runs_small_problems_at_once(simulator, seed):
    """concurrent=True: the same numbers as one at a time (the golden model's, bit for
    bit), on the cycle model's stamps, in fewer cycles when N is long against K."""
    rng = np.random.default_rng(seed)
    problems = [(rng.standard_normal((2, 2)).astype(BF16),
                 rng.standard_normal((2, 24)).astype(BF16)) for _ in range(8)]
    problems.insert(3, (rng.standard_normal((6, 7)).astype(BF16),        # the whole array
                        rng.standard_normal((6, 9)).astype(BF16)))
    config = TileConfig(8, 8, "bf16")
    alone = run_tiled_program(problems, config=config, simulator=simulator)
    together = run_tiled_program(problems, config=config, simulator=simulator,
                                 concurrent=True)
    assert alone.mismatches == together.mismatches == 0
    assert all(d == 0 for d in alone.differing + together.differing)
    for a, b in zip(alone.outs, together.outs, strict=True):
        assert (a.view(np.uint32) == b.view(np.uint32)).all()
    from systolica.golden import tiled_program_cycles
    ops = tiling.program_tile_ops(problems, 8, 8, concurrent=True)
    assert together.cycles == tiled_program_cycles(8, 8, ops)
    assert together.cycles < 0.6 * alone.cycles, (together.cycles, alone.cycles)
