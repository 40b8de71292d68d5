"""Regression tests of the tile: run by ``tests/regression/rtl/test_regression.py`` on each
simulator.

Every test derives its matrices and its idle/backpressure pattern from ``cocotb.RANDOM_SEED``
(printed by cocotb at start-up; replay with ``COCOTB_RANDOM_SEED=<seed>``), so a failure is
reproducible.

Most tests share one body, written once in :func:`_checked_test`: start a TB with the case's
salt, idle and backpressure, let the case's stimulus program submit its commands, run, check
every result against the golden model, then run the program's own extra check if it returned
one. The cases are rows of :data:`TESTS` (a factory in the manner of cocotb's
``TestFactory``, which keeps each test's own name so that ``systolica waves --test NAME``
and the catalogue :data:`~systolica.tb.protocol.TILE_TEST_LANES` still find it); the
full-tile random ones are one :class:`FullTile` sweep with other operand makers, sizes and
FTZ patterns. The error injection and the stuck tile, which must not pass ``check()``, keep
bodies of their own.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass

import cocotb
import numpy as np

from systolica.golden import FORMATS, Command, command_schedule, identity, nc_matmul

from .. import fault_injection, protocol, stimulus
from ..stimulus import bf16, random_int8
from ..tile_tb import SimulationStuck, TileTB


def _rng(salt):
    return np.random.default_rng([cocotb.RANDOM_SEED, salt])


async def _started(dut, salt, idle=0.0, backpressure=0.0):
    tb = TileTB(dut, seed=cocotb.RANDOM_SEED * 1000 + salt, idle=idle, backpressure=backpressure,
                model_class=fault_injection.model_class())
    dut._log.info("tile %d x %d, COCOTB_RANDOM_SEED=%s (test seed %d), idle %.2f, "
                  "backpressure %.2f", tb.rows, tb.cols, os.environ.get("COCOTB_RANDOM_SEED"),
                  cocotb.RANDOM_SEED, idle, backpressure)
    await tb.start()
    return tb


@dataclass(frozen=True)
class Case:
    """One regression test of the common shape: start, submit, run, check.

    Attributes
    ----------
    doc : str
        What the test checks (its docstring in cocotb's listing).
    salt : int
        Seeds the test's matrices (:func:`_rng`) and the TB's idle/backpressure pattern.
    program : callable
        ``program(tb, rng)`` submits the test's commands; it may return ``after(tb)``, run
        after ``tb.check()`` passed.
    idle, backpressure : float
        Probabilities of an idle input cycle and of a held-back result cycle.
    """

    doc: str
    salt: int
    program: Callable
    idle: float = 0.0
    backpressure: float = 0.0


@dataclass(frozen=True)
class FullTile:
    """A stimulus program of ``count(tb)`` matmuls using the whole tile (K = rows, M = cols).

    Matmul ``i`` has ``n(tb, rng, i)`` moving vectors (drawn before its operands), its
    stationary and moving operands from ``makers[i % len(makers)]`` (a pair of
    ``maker(rng, shape)``), and FTZ ``ftz(i)``. ``after``, if given, runs after the check.
    """

    count: Callable
    n: Callable
    makers: tuple
    ftz: Callable = lambda i: False
    after: Callable | None = None

    def __call__(self, tb, rng):
        for i in range(self.count(tb)):
            n = self.n(tb, rng, i)
            make_s, make_m = self.makers[i % len(self.makers)]
            tb.submit(make_s(rng, (tb.rows, tb.cols)), make_m(rng, (tb.rows, n)),
                      ftz=self.ftz(i))
        return self.after


def _checked_test(name, case):
    """The cocotb test ``name`` running ``case`` (a :class:`Case`)."""
    async def run(dut):
        tb = await _started(dut, case.salt, case.idle, case.backpressure)
        after = case.program(tb, _rng(case.salt))
        await tb.run()
        tb.check()
        if after is not None:
            after(tb)
    run.__name__ = run.__qualname__ = name
    run.__doc__ = case.doc
    return run


def _bulk_count(tb):
    """Matmuls of N = 512 covering ``SYSTOLICA_BULK_MACS`` BF16 MACs (at least one)."""
    target = int(os.environ.get(protocol.BULK_MACS, "0"))
    return max(1, -(-target // (tb.rows * tb.cols * 512)))


def _bulk_n(tb, rng, i):
    return 512 if int(os.environ.get(protocol.BULK_MACS, "0")) else 8


def _log_bulk(tb):
    tb.log.info("bulk: %d BF16 MACs checked", tb.scoreboard.macs_checked["bf16"])


INT8 = (random_int8, random_int8)
BF16_NORMAL = (stimulus.bf16_normal, stimulus.bf16_normal)
BF16_WIDE = (stimulus.bf16_wide, stimulus.bf16_wide)


def _extremes(tb, rng):
    k, m = tb.rows, tb.cols
    for s_value, m_value in ((-128, -128), (127, 127), (-128, 127), (127, -128), (0, 0)):
        tb.submit(np.full((k, m), s_value, np.int8), np.full((k, 3), m_value, np.int8))


def _identity(tb, rng):
    d = min(tb.rows, tb.cols)
    moving = random_int8(rng, (d, 5))
    record = tb.submit(np.eye(d, dtype=np.int8), moving)
    return lambda tb: np.testing.assert_array_equal(tb.results(record),
                                                    moving.astype(np.int32))


def _one_hot_rows(tb, rng):
    k, m = tb.rows, tb.cols
    stationary = ((np.arange(k * m).reshape(k, m) % 120) + 1).astype(np.int8)
    moving = np.zeros((k, k), np.int8)
    moving[np.arange(k), np.arange(k)] = 1
    record = tb.submit(stationary, moving)
    # Column n of the result is partition row n of the stationary matrix.
    return lambda tb: np.testing.assert_array_equal(tb.results(record),
                                                    stationary.T.astype(np.int32))


def _partial_k_and_m(tb, rng):
    for k in sorted({1, max(1, tb.rows // 2), tb.rows}):
        for m in sorted({1, max(1, tb.cols - 1)}):
            tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 4)))


def _random_shapes(tb, rng):
    for _ in range(6):
        k = int(rng.integers(1, tb.rows + 1))
        m = int(rng.integers(1, tb.cols + 1))
        n = int(rng.integers(1, 12))
        tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, n)))


async def _error_injection_is_caught(dut):
    """Corrupt one golden word on purpose: the scoreboard must flag exactly that word."""
    tb = await _started(dut, 8)
    rng = _rng(8)
    stationary = random_int8(rng, (tb.rows, tb.cols))
    moving = random_int8(rng, (tb.rows, 3))
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


def _bf16_specials_mixed(tb, rng):
    for ftz in (False, True):
        s = stimulus.with_specials(rng, stimulus.bf16_wide(rng, (tb.rows, tb.cols)), 0.15)
        m = stimulus.with_specials(rng, stimulus.bf16_normal(rng, (tb.rows, 9)), 0.15)
        tb.submit(s, m, ftz=ftz)


#: Directed cases: (name, stationary column, moving column, ftz), one rule each.
MAX = 3.3895313892515355e38   # BF16 max finite
DIRECTED = [
    ("product overflows to +Inf", [MAX], [2.0], False),
    ("product overflows to -Inf", [-MAX], [2.0], False),
    ("running sum overflows to Inf", [MAX, MAX], [1.0, 1.0], False),
    ("product underflows to a subnormal", [2.0**-100], [2.0**-30], False),
    ("product underflows to zero", [2.0**-100], [2.0**-60], False),
    ("subnormal product tie rounds to even", [1.5 * 2.0**-74], [2.0**-75], False),
    ("sum tie rounds to even (down)", [2.0**12, 1.0], [2.0**12, 1.0], False),
    ("sum tie rounds to even (up)", [2.0**12, 1.0, 1.0], [2.0**12, 2.0, 1.0], False),
    ("x + (-x) is +0", [3.0, 3.0], [1.5, -1.5], False),
    ("all -0 products stay -0", [-0.0, -0.0, -0.0], [1.0, 2.0, 4.0], False),
    ("lone -0 product stays -0", [-0.0], [5.0], False),
    ("Inf - Inf is NaN", [float("inf"), float("inf")], [1.0, -1.0], False),
    ("0 x Inf is NaN", [0.0], [float("inf")], False),
    ("NaN payload becomes canonical", [float("nan")], [1.0], False),
    ("FTZ flushes a subnormal input", [2.0**-130], [2.0**100], True),
    ("FTZ flushes a subnormal product", [-(2.0**-100)], [2.0**-30], True),
    ("FTZ flushes a subnormal sum", [1.5 * 2.0**-63, -(2.0**-63)], [2.0**-63, 2.0**-63], True),
]


def _bf16_directed_rules(tb, rng):
    for name, s_col, m_col, ftz in DIRECTED:
        s = bf16(np.array(s_col).reshape(-1, 1))
        m = bf16(np.array(m_col).reshape(-1, 1))
        for given, exact in ((s_col, s), (m_col, m)):   # every directed value is BF16-exact
            assert np.array_equal(exact.astype(np.float64).ravel(), given, equal_nan=True), name
        tb.log.info("directed: %s", name)
        tb.submit_slabs(s, m, ftz=ftz)


def _psum_keeps_nan_inf_and_flushes_under_ftz(tb, rng):
    tiny = 2.0**-65                  # tiny * tiny = 2**-130, a subnormal FP32 in PSUM
    cases = [  # (first stationary, first moving, then accumulated stationary, moving, ftz)
        (float("nan"), 1.0, 2.0, 1.0, False),
        (float("inf"), 1.0, -5.0, 1.0, False),
        (tiny, tiny, 0.0, 1.0, True),
    ]
    for s1, m1, s2, m2, ftz in cases:
        tb.submit(bf16([[s1]]), bf16([[m1]]))
        tb.submit(bf16([[s2]]), bf16([[m2]]), accumulate=True, ftz=ftz)
    tb.submit(bf16([[7.0]]), bf16([[1.0]]))   # overwrite after NaN/Inf: a plain 7


def _multi_slab_accumulation(tb, rng):
    k = 2 * tb.rows + 1
    tb.submit_slabs(random_int8(rng, (k, tb.cols)), random_int8(rng, (k, 6)))
    tb.submit_slabs(stimulus.bf16_normal(rng, (k, tb.cols)), stimulus.bf16_normal(rng, (k, 6)))


async def _stuck_tile_times_out_with_message(dut):
    """A matmul whose stationary never comes: the tile waits, the TB gives up with a message."""
    tb = await _started(dut, 9)
    tb.moving.send({"data": [1] * tb.rows})   # and no command, so it is never taken
    tb.scoreboard.expect(0, 0, [0] * tb.cols, last=True)
    try:
        await tb.run(max_cycles=40)
    except SimulationStuck as error:
        dut._log.info("stuck run reported as intended: %s", error)
        assert "moving beats sent 0 (1 pending)" in str(error), str(error)
        assert "1 missing" in str(error), str(error)
    else:
        raise AssertionError("the tile ran a matmul without a stationary, or the TB never gave up")


def _psum_banks_offsets_and_read_out(tb, rng):
    k, m = tb.rows, tb.cols
    tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 6)), bank=3, offset=500)
    tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 6)), bank=3, offset=500,
              accumulate=True)
    tb.submit(stimulus.bf16_normal(rng, (k, m)), stimulus.bf16_normal(rng, (k, 6)), bank=7,
              offset=0)
    tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 3)), bank=0, offset=9)
    tb.read(bank=3, offset=500, n=6)            # the sums of the first two
    tb.submit(stimulus.bf16_normal(rng, (k, m)), stimulus.bf16_normal(rng, (k, 4)), bank=7,
              offset=2, accumulate=True)
    tb.read(bank=7, offset=0, n=6)
    tb.read(bank=0, offset=9, n=3)


def _illegal_commands_are_rejected_with_status(tb, rng):
    k, m = tb.rows, tb.cols
    illegal = [Command("matmul", k=k + 1, m=1, n=1), Command("matmul", k=1, m=m + 1, n=1),
               Command("matmul", k=1, m=1, n=0), Command("matmul", k=1, m=1, n=8, offset=510),
               Command("read", n=1, bank=8), Command("read", n=513),
               Command("matmul", k=1, m=1, n=1, dtype="bf16", perf_mode="double_row"),
               Command("matmul", k=1, m=1, n=1, dtype="e4m3", perf_mode="double_row",
                       is_transpose=True),
               Command("matmul", k=1, m=1, n=1, dtype="bf16", accumulate=True, ftz=True,
                       is_transpose=True),
               Command("matmul", k=1, m=1, n=1, dtype="fp16", ftz=True, is_transpose=True),
               Command("matmul", k=1, m=1, n=1, tile_position=(0, 0), tile_size=(k + 1, m)),
               Command("matmul", k=1, m=1, n=1, tile_position=(k, 0), tile_size=(k, m))]
    for i, command in enumerate(illegal):
        tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 3)), accumulate=i > 0)
        record = tb.submit_command(command)
        assert record.error is not None, command
    tb.submit(random_int8(rng, (k, m)), random_int8(rng, (k, 3)), accumulate=True)
    tb.submit_command(Command("matmul", k=0, m=1, n=1, bank=9))   # bank is checked first

    def after(tb):
        assert [r.error for r in tb.records if r.error] == [
            "K_RANGE", "M_RANGE", "N_RANGE", "N_RANGE", "BANK_RANGE", "N_RANGE",
            "DOUBLE_ROW_TYPE", "TRANSPOSE_DOUBLE_ROW", "TRANSPOSE_ACCUMULATE", "TRANSPOSE_FTZ",
            "TILE_SIZE", "TILE_POSITION", "BANK_RANGE"]
    return after


def _timing_model_follows_random_backpressure(tb, rng):
    commands = []
    for i in range(10):
        k = int(rng.integers(1, tb.rows + 1))
        n = int(rng.integers(1, 2 * (tb.rows + tb.cols)))
        record = tb.submit(random_int8(rng, (k, tb.cols)), random_int8(rng, (k, n)),
                           bank=i % 8)
        commands.append(record.command)
        if i % 4 == 3:
            commands.append(tb.read(bank=i % 8, n=n).command)

    def after(tb):
        ready = tb.result.ready_cycles
        schedule = command_schedule(tb.rows, tb.cols, commands,
                                    result_ready=lambda cycle: ready[cycle])
        for record, predicted in zip(tb.records, schedule, strict=True):
            measured = (record.accept, tuple(record.issues), tuple(record.result_cycles))
            want = (predicted.accept, predicted.issues if record.op == "matmul" else (),
                    predicted.results)
            assert measured == want, (record.index, measured, want)
    return after


# ---- FP16, FP8, mixed pairs, FP8 double-row ----------------------------------------------

def _random_float(rng, name, shape, mask=None):
    """Random bit patterns of the float type ``name`` (an ml_dtypes / numpy array)."""
    fmt = FORMATS[name]
    bits = rng.integers(0, 1 << fmt.width, shape)
    if mask is not None:
        bits &= mask
    return bits.astype(f"u{fmt.width // 8}").view(fmt.dtype)


def _fp16_fp8_mixed_pairs(tb, rng):
    floats = [name for name, fmt in FORMATS.items() if fmt.is_float]
    for sname in floats:
        for mname in floats:
            k = int(rng.integers(1, tb.rows + 1))
            m = int(rng.integers(1, tb.cols + 1))
            n = int(rng.integers(1, 6))
            tb.submit(_random_float(rng, sname, (k, m)), _random_float(rng, mname, (k, n)),
                      ftz=bool(rng.integers(0, 2)))


def _fp8_double_row(tb, rng):
    rows = tb.rows
    written = False             # bank 3 entries 0..4 hold a known value (PSUM may not be 0)
    for k in sorted({2 * rows, 2 * rows - 1, rows + 1, rows, 1}, reverse=True):
        for sname, mname in (("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e4m3", "e4m3")):
            # Mostly finite values (exponent MSB cleared), so rounding decides the sums.
            tb.submit(_random_float(rng, sname, (k, tb.cols), 0xBF),
                      _random_float(rng, mname, (k, 5), 0xBF), perf_mode="double_row",
                      accumulate=written and bool(rng.integers(0, 2)), bank=3)
            written = True
        tb.submit(_random_float(rng, "e5m2", (min(k, rows), tb.cols)),
                  _random_float(rng, "e5m2", (min(k, rows), 3)))
        tb.submit(random_int8(rng, (rows, tb.cols)), random_int8(rng, (rows, 2)))


def _selector(rng, name, k, n):
    """A transpose's moving [K, N] of type ``name``: one 1 per column, in a random row."""
    ones = np.zeros((k, n), np.float32)
    ones[rng.integers(0, k, size=n), np.arange(n)] = 1.0
    return ones.astype(FORMATS[name].dtype)


def _transpose_specials(tb, rng):
    """Every operand type's special patterns at every stationary position (identity
    selectors: full transposes), then random selectors of another moving type with K < rows
    and M < cols, a matmul accumulating onto transposed words and a READ of them."""
    records = []
    for name in tb.model.dtypes:
        fmt = FORMATS[name]
        for bits in stimulus.special_grids(fmt.width, tb.rows, tb.cols):
            data = np.asarray(bits, f"u{fmt.width // 8}").view(fmt.dtype)
            records.append((bits, tb.submit(data, identity(tb.rows, fmt.dtype),
                                            is_transpose=True, bank=1)))
    floats = [name for name in tb.model.dtypes if FORMATS[name].is_float]
    for sname in floats:
        mname = floats[int(rng.integers(0, len(floats)))]
        k, m = int(rng.integers(1, tb.rows + 1)), int(rng.integers(1, tb.cols + 1))
        tb.submit(_random_float(rng, sname, (k, m)), _selector(rng, mname, k, 2 * tb.rows),
                  is_transpose=True, bank=2)
    # Onto the transposed words (entries 0 .. rows - 1 of bank 1, the only ones written).
    tb.submit(_random_float(rng, "bf16", (1, tb.cols)),
              _random_float(rng, "bf16", (1, min(3, tb.rows))), accumulate=True, bank=1)
    tb.read(bank=1, n=tb.rows)

    def after(tb):   # the words written out element by element: data[k, m] at (m, k)
        for bits, record in records:
            got = tb.results(record).view(np.uint16).astype(int)
            assert got.T.tolist() == bits, record.index
    return after


#: Every test of the module, in the catalogue's order: a :class:`Case` (the common body) or
#: a test function of its own. Salts are the tests' historical seeds (two pairs share one).
TESTS = {
    "test_random_full_size": Case(
        "Random int8 matrices using the whole tile (K = rows, M = cols).", 1,
        FullTile(lambda tb: 3, lambda tb, rng, i: (1, 7, 2 * tb.rows + 3)[i], (INT8,))),
    "test_extremes": Case(
        "-128 and 127 everywhere (largest products of each sign), and all zeros.", 2,
        _extremes),
    "test_identity": Case(
        "An identity stationary passes the moving vectors through (PSUM = moving).", 3,
        _identity),
    "test_one_hot_rows": Case(
        "One-hot moving vectors select one partition row each, so a skew error names its "
        "row.", 4, _one_hot_rows),
    "test_partial_k_and_m": Case(
        "K < rows and M < cols: unused partition rows and columns stay out of the result.", 5,
        _partial_k_and_m),
    "test_back_to_back_stationaries": Case(
        "Several matmuls in a row, each with its own stationary, including single-beat "
        "ones.", 6, FullTile(lambda tb: 8, lambda tb, rng, i: int(
            rng.integers(1, 2 * tb.rows + 2)) if i % 2 else 1, (INT8,))),
    "test_random_idle_and_backpressure": Case(
        "Random shapes under random input idles and result backpressure.", 7,
        _random_shapes, idle=0.3, backpressure=0.4),
    "test_error_injection_is_caught": _error_injection_is_caught,
    "test_bf16_random_normal": Case(
        "Normal-range random BF16 matrices using the whole tile.", 10,
        FullTile(lambda tb: 2, lambda tb, rng, i: (1, 2 * tb.rows + 3)[i], (BF16_NORMAL,))),
    "test_bf16_wide_exponent": Case(
        "Random BF16 over the whole exponent range: subnormals, overflow, cancellation.", 11,
        FullTile(lambda tb: 3, lambda tb, rng, i: 2 * tb.cols + 1, (BF16_WIDE,),
                 ftz=lambda i: i == 1)),
    "test_bf16_specials_mixed": Case(
        "+-0, +-Inf, NaNs with payloads, max finite and subnormals mixed into random "
        "matrices.", 12, _bf16_specials_mixed),
    "test_bf16_directed_rules": Case(
        "One matmul per numerics rule (K beyond the tile's rows runs as accumulating "
        "slabs).", 13, _bf16_directed_rules),
    "test_psum_keeps_nan_inf_and_flushes_under_ftz": Case(
        "NaN and Inf in PSUM stay through accumulation; an FTZ accumulate flushes a stored "
        "subnormal; overwrite never reads the old value.", 14,
        _psum_keeps_nan_inf_and_flushes_under_ftz),
    "test_multi_slab_accumulation": Case(
        "K = 2 * rows + 1 as three matmuls accumulating into one PSUM region, INT8 and "
        "BF16.", 15, _multi_slab_accumulation),
    "test_int8_and_bf16_interleaved": Case(
        "INT8 and BF16 matmuls back to back on one tile, each with its own stationary.", 16,
        FullTile(lambda tb: 6, lambda tb, rng, i: int(rng.integers(1, tb.rows + 4)),
                 ((stimulus.bf16_wide, stimulus.bf16_normal), INT8)),
        idle=0.2, backpressure=0.2),
    "test_bf16_bulk_random": Case(
        "Bulk BF16 MACs (``SYSTOLICA_BULK_MACS``, default one small matmul), half "
        "wide-range.", 17,
        FullTile(_bulk_count, _bulk_n, (BF16_NORMAL, BF16_WIDE), ftz=lambda i: i % 4 == 3,
                 after=_log_bulk)),
    "test_stuck_tile_times_out_with_message": _stuck_tile_times_out_with_message,
    "test_psum_banks_offsets_and_read_out": Case(
        "Matmuls into several banks and offsets, accumulating and overwriting, then READ "
        "commands stream regions out (spanning several matmuls' writes); the TB's shadow "
        "PSUM predicts every word.", 20, _psum_banks_offsets_and_read_out),
    "test_illegal_commands_are_rejected_with_status": Case(
        "Each kind of illegal command, between legal ones: the tile drops it (no beats "
        "taken, no results), counts it in ``status.rejected`` and names it in "
        "``status.error``; the legal matmuls around it run as if it had not been sent.", 21,
        _illegal_commands_are_rejected_with_status),
    "test_timing_model_follows_random_backpressure": Case(
        "Under random result backpressure (inputs never idle), the stepped cycle model, "
        "given the ready pattern the TB drove, predicts every command, moving and result "
        "stamp.", 22, _timing_model_follows_random_backpressure, backpressure=0.35),
    "test_fp16_fp8_mixed_pairs": Case(
        "Every ordered pair of float types (BF16, FP16, the four FP8 types), random bit "
        "patterns, K and M, IEEE and FTZ, back to back under idles and backpressure.", 20,
        _fp16_fp8_mixed_pairs, idle=0.2, backpressure=0.2),
    "test_fp8_double_row": Case(
        "FP8 double-row matmuls (e4m3 / e5m2, mixed): K = 2 x rows, odd K above and below "
        "rows, accumulating into PSUM, between single-row FP8 and INT8 matmuls.", 21,
        _fp8_double_row, idle=0.1, backpressure=0.1),
    "test_transpose_specials_in_every_position": Case(
        "Transpose mode on every operand type: each special pattern (NaN payloads, Inf, -0, "
        "subnormals, extremes) at every stationary position comes out at the transposed "
        "position bit for bit (16-bit PSUM elements, 8-bit types in the low byte); random "
        "selectors of other moving types, K < rows, M < cols; accumulating onto and reading "
        "transposed words.", 23, _transpose_specials, idle=0.1, backpressure=0.1),
}

# Registered in order, each under its own name (cocotb finds them among the module's names).
for _name, _test in TESTS.items():
    globals()[_name] = cocotb.test(name=_name)(
        _checked_test(_name, _test) if isinstance(_test, Case) else _test)
del _name, _test
