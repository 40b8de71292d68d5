"""Regression tier: MX element pairs x E8M0 scale pairs through one PE of the RTL tile
(:mod:`systolica.verif.mx_sweep`). ``make test`` runs a seeded sample on the 16 x 4
``int8+mx`` tile the other MX tests build (every ordered type pair, 12 codes a side, the
extreme, NaN and unit scales); ``make check-mx`` runs every code against every code for
every pair of the scale grid."""

import numpy as np
import pytest

from systolica.verif import mx_sweep


def test_sampled_element_and_scale_pairs_through_one_pe_are_bit_exact(seed):
    lines = []
    total = mx_sweep.sweep(scale_grid=(0, 127, 254, 255), rows=16, cols=4, out=lines.append,
                           sample=(np.random.default_rng(seed), 12))
    assert total["mismatches"] == 0, "\n".join(lines)
    # 9 ordered type pairs (e2m1 has 16 codes: 12 drawn) x 12 x 12 codes x 16 scale pairs
    assert total["pairs"] == 9 * 12 * 12 * 16 == total["words"]


def test_the_pe_under_test_alone_decides_each_word():
    """Row 7 lane 0 holds the pair; every other lane multiplies -0 by +0, so a +0 x +0 pair
    gives +0 and -0 x +0 gives -0 (a +0 elsewhere would turn the latter into +0)."""
    (job,) = mx_sweep.pair_jobs(mx_sweep.TYPES["e4m3fn"], mx_sweep.TYPES["e5m2"], [(127, 127)],
                                cols=2, a_codes=[0x00, 0x80], b_codes=[0x00])
    from systolica.golden.mx import nc_matmul_mx

    out = nc_matmul_mx(job.stationary, job.moving, job.stationary_scale, job.moving_scale)
    assert out.view(np.uint32).ravel().tolist() == [0x00000000, 0x80000000]
    with pytest.raises(ValueError, match="^unknown MX element type 'e4m3'; allowed: e4m3fn, "
                                         "e5m2, e2m1$"):
        mx_sweep.sweep([("e4m3", "e5m2")])
