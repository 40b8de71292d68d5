"""Every MX element pair x a grid of E8M0 scale pairs through one PE of the RTL tile
(``make check-mx``; ``make test`` runs a seeded sample).

One PE of an ``8 x cols`` tile generated with ``int8+mx`` (partition row 7, lane 0) gets
every element code ``a`` of the stationary type in turn in its stationary column ``m`` and
every code ``b`` of the moving type in moving column ``n``; every other lane of every PE
multiplies -0 by +0. The lane tree and the column chain then add only -0s to the pair's
product, so each PSUM word is that one PE's MX step, ``round(a b 2^(s + t - 254))``, signed
zeros, NaN and Inf included, for the scale pair ``(s, t)`` of the matmul
(``docs/numerics.md``, MX choices 1-4). Each matmul is checked word for word by the run
API's scoreboard against ``golden.nc_matmul_mx`` and every stamp against the cycle model.

Element types: e4m3fn and e5m2 (256 codes each) and e2m1 (MXFP4, 16 codes, converted to
e4m3fn in front of the array), every ordered pair of them; scales: every pair of
:data:`SCALE_GRID` (the extremes 0 and 254, NaN 255, around 2^0 and between).
"""

import itertools
import time

import ml_dtypes
import numpy as np

from systolica.golden.mx import GROUP_PARTITIONS
from systolica.hdl.config import TileConfig
from systolica.sim import MatmulMx, run_program
from systolica.sim.builder.toolchain import SIMULATORS

#: The element types swept, by name.
TYPES = {"e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2),
         "e2m1": np.dtype(ml_dtypes.float4_e2m1fn)}
#: E8M0 codes of the scale grid (both sides): 2^-127, 2^-126, 2^-63, 2^-1 .. 2^1, 2^63,
#: 2^126, 2^127 and NaN.
SCALE_GRID = (0, 1, 64, 126, 127, 128, 190, 253, 254, 255)
#: The PE under test: the last partition row of the one scale group, lane 0.
ROW, LANE = GROUP_PARTITIONS - 1, 0
_NEG_ZERO = 0x80        # -0 in e4m3fn, e5m2 and (as 0x8) e2m1: the other lanes' stationary


def codes(dtype):
    """Every element code of an MX type (uint8 array)."""
    return np.arange(16 if dtype == TYPES["e2m1"] else 256, dtype=np.uint8)


def pair_jobs(stype, mtype, scales, cols, a_codes=None, b_codes=None):
    """The matmuls that put every ``(a, b)`` of ``a_codes`` x ``b_codes`` (default every code)
    through the PE under test for every ``(s, t)`` of ``scales`` (list of MatmulMx): per
    scale pair, ``cols`` stationary codes a matmul, every moving code in one (N up to
    256)."""
    a_codes = codes(stype) if a_codes is None else np.asarray(a_codes, np.uint8)
    b_codes = codes(mtype) if b_codes is None else np.asarray(b_codes, np.uint8)
    zero = {t: np.uint8(0x8 if t == TYPES["e2m1"] else _NEG_ZERO) for t in (stype, mtype)}
    jobs = []
    for s, t in scales:
        for start in range(0, len(a_codes), cols):
            a = a_codes[start:start + cols]
            stationary = np.full((GROUP_PARTITIONS, len(a), 4), zero[stype], np.uint8)
            stationary[ROW, :, LANE] = a
            moving = np.zeros((GROUP_PARTITIONS, len(b_codes), 4), np.uint8)
            moving[ROW, :, LANE] = b_codes
            jobs.append(MatmulMx(stationary.view(stype), moving.view(mtype),
                                 np.full((1, len(a)), s, np.uint8),
                                 np.full((1, len(b_codes)), t, np.uint8),
                                 bank=len(jobs) % 8))
    return jobs


def sweep(type_pairs=None, scale_grid=SCALE_GRID, *, rows=GROUP_PARTITIONS, cols=16,
          simulator="verilator", build_root=None, out=print, sample=None):
    """Run the sweep on a ``rows x cols`` ``int8+mx`` tile (rows >= 8: rows past the scale
    group take no part); return a dict: ``pairs`` (element pairs x scale pairs checked),
    ``matmuls``, ``words`` (PSUM words the scoreboard compared), ``mismatches``,
    ``cycles`` (summed over the type pairs' programs), ``seconds``.

    ``type_pairs``: (stationary, moving) names of :data:`TYPES` (default every ordered
    pair); ``sample``: ``(rng, count)`` to draw ``count`` codes of each side instead of all.

    Raises
    ------
    ValueError
        If a type name is unknown (one line).
    SimulationError
        If a run fails; a wrong word shows as ``mismatches`` > 0.
    """
    pairs = list(type_pairs or itertools.product(TYPES, TYPES))
    for name in {n for pair in pairs for n in pair}:
        if name not in TYPES:
            raise ValueError(f"unknown MX element type {name!r}; allowed: {', '.join(TYPES)}")
    config = TileConfig(rows, cols, "int8+mx")
    scales = list(itertools.product(scale_grid, scale_grid))
    total = {"pairs": 0, "matmuls": 0, "words": 0, "mismatches": 0, "cycles": 0,
             "seconds": 0.0}
    started = time.perf_counter()
    for sname, mname in pairs:
        stype, mtype = TYPES[sname], TYPES[mname]
        a, b = codes(stype), codes(mtype)
        if sample is not None:
            rng, count = sample
            a, b = (rng.choice(c, min(count, len(c)), replace=False) for c in (a, b))
        jobs = pair_jobs(stype, mtype, scales, cols, a, b)
        result = run_program(jobs, config=config, simulator=simulator, build_root=build_root)
        words = sum(p.size for p in result.psums)
        total["pairs"] += len(a) * len(b) * len(scales)
        total["matmuls"] += len(jobs)
        total["words"] += words
        total["mismatches"] += result.mismatches
        total["cycles"] += result.cycles
        out(f"{sname} x {mname}: {len(a)} x {len(b)} codes x {len(scales)} scale pairs, "
            f"{len(jobs)} matmuls, {words:,} words, {result.mismatches} mismatches "
            f"[{time.perf_counter() - started:.0f} s since the start]")
    total["seconds"] = round(time.perf_counter() - started, 1)
    return total


def main(argv=None):
    """``python -m systolica.verif.mx_sweep [--cols C] [--simulator S]``: the whole sweep;
    exit status 1 on any mismatch."""
    from systolica.sim.options import OneLineParser, integer

    parser = OneLineParser(prog="python -m systolica.verif.mx_sweep",
                           description="every MX element pair x a grid of E8M0 scale pairs "
                                       "through one PE of the RTL tile")
    parser.add_argument("--cols", type=integer(1), default=16,
                        help="tile columns: stationary codes per matmul (default %(default)s)")
    parser.add_argument("--simulator", choices=SIMULATORS, default="verilator")
    args = parser.parse_args(argv)
    total = sweep(cols=args.cols, simulator=args.simulator)
    print(f"pairs {total['pairs']:,} (element pairs x scale pairs) in {total['matmuls']:,} "
          f"matmuls, {total['words']:,} PSUM words, {total['mismatches']} mismatches, "
          f"{total['cycles']:,} cycles, {total['seconds']:.0f} s")
    return 1 if total["mismatches"] else 0


if __name__ == "__main__":
    from systolica.sim.options import exit_with

    exit_with(main)     # Ctrl-C: one line and 130, as the systolica command
