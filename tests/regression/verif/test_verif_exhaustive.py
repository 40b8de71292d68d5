"""The RTL arithmetic units against the golden model through the Verilator bulk harness
(``make exhaustive`` runs all 2^32 multiplier pairs and 10^9 adder pairs; here a seeded
sample), and the adder's directed rounding grid."""

import numpy as np
import pytest

from systolica.verif import exhaustive as ex


@pytest.fixture(scope="module")
def multiplier():
    return ex.build_harness(ex.MULTIPLIER)


@pytest.fixture(scope="module")
def adder():
    return ex.build_harness(ex.ADDER)


def test_multiplier_sample_rows_times_every_operand(multiplier, seed):
    results = ex.check_multiplier(multiplier, rows=ex.sample_rows(seed), jobs=1,
                                  out=lambda line: None)
    rows = len(set(ex.sample_rows(seed)))
    assert results["IEEE"][:2] == (rows << 16, 0), results["IEEE"][2]
    assert results["FTZ"][:2] == (rows << 16, 0), results["FTZ"][2]


def test_the_harness_sees_a_wrong_result(multiplier):
    """Comparing the FTZ unit with the IEEE golden model must fail on subnormals."""
    out = ex._run_list(multiplier, True, np.array([0x0001, 0x3F80], np.uint32),
                       np.array([0x3F80, 0x0001], np.uint32))
    golden = ex.golden_products(np.array([1, 0x3F80], np.uint16),
                                np.array([0x3F80, 1], np.uint16), False)
    assert out.tolist() == [0, 0] and golden.tolist() == [0x10000, 0x10000]


def test_adder_sample_and_rounding_grid(adder, seed):
    results, cells = ex.check_adder(adder, pairs=1 << 21, seed=seed, jobs=1,
                                    out=lambda line: None)
    for mode in ("IEEE", "FTZ"):
        assert results[mode][1] == 0, results[mode][2]
        assert results[mode][0] > 1 << 21
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
