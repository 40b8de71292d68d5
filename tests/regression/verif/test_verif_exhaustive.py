"""The RTL arithmetic units against the golden model through the Verilator bulk harness
(``make exhaustive`` runs every pairing of both multipliers fully and 10^9 adder pairs per
mode; here a seeded sample of each pairing), and the adder's directed rounding grid."""

import numpy as np
import pytest

from systolica.verif import exhaustive as ex


@pytest.fixture(scope="module")
def harnesses():
    return {spec.name: ex.build_harness(spec) for spec in (ex.MULTIPLIER, ex.MULTIPLIER_HI)}


@pytest.fixture(scope="module")
def adder():
    return ex.build_harness(ex.ADDER)


def test_every_pairing_of_both_multipliers_on_the_ci_sample(harnesses, seed):
    """CI's sample (``systolica exhaustive --sample``): every FP8 x FP8 pairing of both
    multipliers fully, the others on 3 special and 3 random ``a`` values x every ``b``."""
    plan = [(p, ex.outer_rows(p, full_limit=1 << 16, sample_rows=3, seed=seed,
                              special_rows=3)) for p in ex.pairings()]
    results = ex.check_multipliers(harnesses, plan, jobs=1, out=lambda line: None)
    assert len(results) == 6 * 6 + 2 * 2
    for p, rows in plan:
        inner = 1 << p.widths()[1]
        for mode in ("IEEE", "FTZ"):
            pairs, bad, examples = results[p.label][mode]
            assert (pairs, bad) == (len(rows) * inner, 0), (p.label, mode, examples)
    assert results["float_mul e4m3 x e5m2"]["FTZ"][0] == 1 << 16


def test_the_harness_sees_a_wrong_result(harnesses):
    """Comparing the FTZ unit with the IEEE golden model must fail on subnormals."""
    bf16 = 1
    out = ex._run_list(harnesses["float_mul"], [bf16, bf16, 1],
                       np.array([0x0001, 0x3F80], np.uint32),
                       np.array([0x3F80, 0x0001], np.uint32))
    golden = ex.golden_products(np.array([1, 0x3F80]), np.array([0x3F80, 1]), "bf16", "bf16",
                                False)
    assert out.tolist() == [0, 0] and golden.tolist() == [0x10000, 0x10000]


def test_the_types_reach_the_harness(harnesses):
    """The same bits read as FP16 and as BF16 give different products (1.0 in FP16 is
    0x3C00; in BF16 0x3C00 is 2^-7), so the type ports are driven."""
    one_fp16, fp16, bf16 = 0x3C00, 2, 1
    a, b = np.array([one_fp16], np.uint32), np.array([one_fp16], np.uint32)
    as_fp16 = ex._run_list(harnesses["float_mul"], [fp16, fp16, 0], a, b)
    as_bf16 = ex._run_list(harnesses["float_mul"], [bf16, bf16, 0], a, b)
    assert as_fp16.tolist() == [0x3F800000] and as_bf16.tolist() == [0x38800000]


def test_adder_sample_and_rounding_grid(adder, seed):
    results, cells = ex.check_adder(adder, pairs=1 << 21, seed=seed, jobs=1,
                                    out=lambda line: None)
    for part in ("random", "grid"):
        for mode in ("IEEE", "FTZ"):
            assert results[part][mode][1] == 0, results[part][mode][2]
    assert results["random"]["IEEE"][0] == 1 << 21
    assert {tuple(c) for c in np.argwhere(cells == 0)} == UNREACHABLE


def _cells(text):
    out = set()
    for item in text.split(";"):
        ds, op, classes = item.split(":")
        lo, _, hi = ds.partition("-")
        for d in range(int(lo), int(hi or lo) + 1):
            for c in classes.split(","):
                out.add((d, int(op == "sub"), int(c)))
    return out


#: (exponent difference, sub, rounding class) cells no pair can reach, classes numbered as
#: in ex.ROUNDING (0 exact, 1 below half, 2 tie down, 3 tie up, 4 above half). Why:
#: d=0 add: both significands have the hidden bit, the sum carries, one bit is shifted out
#: (exact or a tie); d=0 sub: exact (Sterbenz); d=1 sub: one guard bit and no sticky (exact
#: or a tie); d=24 add: the smaller operand is at least half an ulp (never exact or below);
#: d>=25 add: the smaller operand is below half an ulp (always "below half"); d>=25 sub: the
#: result rounds back to the larger operand ("above half") or, when that is a power of two,
#: to its odd predecessor ("below half" at d=25 only) or a tie that rounds up to the even
#: power of two (d=25 only).
UNREACHABLE = _cells("0:add:1,4;0:sub:1,2,3,4;1:sub:1,4;24:add:0,1;25:add:0,2,3,4;"
                     "25:sub:0,2;26-29:add:0,2,3,4;26-29:sub:0,1,2,3")
