"""``tensor_engine="rtl"``: every ``nc_matmul`` of a kernel run again on the Verilator tile,
each PSUM word compared with the golden path.

The matmuls recorded by a run (their SBUF operands) become one tile program per
``perf_mode`` (:func:`systolica.sim.api.tiling.run_tiled_program`: one simulator start-up
for all of them); a tile smaller than 128 x 128 folds each matmul into K-slabs, M-folds and
N-chunks as ``systolica sim`` does, and its golden path is then the same slab-by-slab
accumulation (:func:`~systolica.sim.api.tiling.golden_tiled_matmul` at the tile's rows),
which on a 128-row tile is the kernel's own ``nc_matmul`` result. A PSUM word that differs is
an error naming the instruction, its kernel line and its PSUM region.
"""

import time

import numpy as np

from systolica.sim.api.tiling import golden_tiled_matmuls, run_tiled_program

from ._core import NkiError


def _region(access):
    return (f"PSUM buffer {access.buffer}, partitions {access.partitions[0]}.."
            f"{access.partitions[1] - 1}, bytes {access.span[0]}..{access.span[1] - 1}")


def check_matmuls(run, *, rows=128, cols=128, simulator="verilator"):
    """Run ``run``'s matmuls on a ``rows x cols`` RTL tile and compare every PSUM word.

    Returns
    -------
    dict
        ``matmuls`` (instructions checked), ``tile_matmuls`` (tile commands run),
        ``words`` (PSUM words the scoreboard compared), ``mismatches`` (0), ``seconds``
        (wall time of the RTL runs including builds), ``build_seconds``.

    Raises
    ------
    NkiError
        On the first instruction whose RTL result differs from the golden path.
    """
    start = time.perf_counter()
    summary = {"matmuls": 0, "tile_matmuls": 0, "words": 0, "mismatches": 0,
               "build_seconds": 0.0, "rows": rows, "cols": cols}
    groups = {}
    for m in run.matmuls:
        groups.setdefault(m["perf_mode"], []).append(m)
    for perf_mode, matmuls in groups.items():
        problems = [(m["stationary"], m["moving"]) for m in matmuls]
        result = run_tiled_program(problems, rows=rows, cols=cols, simulator=simulator,
                                   perf_mode=perf_mode)
        goldens = golden_tiled_matmuls(problems, rows, perf_mode=perf_mode)
        for m, out, golden in zip(matmuls, result.outs, goldens, strict=True):
            expected = m["sums"] if rows == 128 else golden
            diff = out.view(np.uint32) != expected.view(np.uint32)
            if diff.any():
                ins = run.instructions[m["index"]]
                p, f = (int(v[0]) for v in np.nonzero(diff))
                raise NkiError(
                    f"{ins.source}: nc_matmul (instruction {ins.index}): the RTL tile "
                    f"({rows} x {cols}) differs from the golden model in "
                    f"{int(diff.sum())} PSUM words, first at [{p}, {f}] "
                    f"(RTL {out[p, f]!r}, golden {expected[p, f]!r}); {_region(m['region'])}")
        if result.mismatches:
            raise NkiError(f"nc_matmul: the RTL tile's scoreboard counted {result.mismatches} "
                           f"PSUM words different from the golden model")
        summary["matmuls"] += len(matmuls)
        summary["tile_matmuls"] += result.matmuls
        summary["words"] += result.words
        summary["build_seconds"] += result.build_seconds
    summary["seconds"] = time.perf_counter() - start
    return summary
