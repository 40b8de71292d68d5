"""``tensor_engine="rtl"``: every ``nc_matmul`` of a kernel, and every TensorE transpose
(``nc_transpose``, ``nc_matmul(is_transpose=True)``), run again on the Verilator tile, each
PSUM word compared with the golden path.

The matmuls recorded by a run (their SBUF operands) become one tile program per
``perf_mode`` (:func:`systolica.sim.api.tiling.run_tiled_program`: one simulator start-up
for all of them); a tile smaller than 128 x 128 folds each matmul into K-slabs, M-folds and
N-chunks as ``systolica sim`` does, and its golden path is then the same slab-by-slab
accumulation (:func:`~systolica.sim.api.tiling.golden_tiled_matmul` at the tile's rows),
which on a 128-row tile is the kernel's own ``nc_matmul`` result. A PSUM word that differs is
an error naming the instruction, its kernel line and its PSUM region. Transposes run in the
tile's transpose mode as a second program (:func:`transpose_blocks`); a matmul's
``tile_position`` is not sent to the tile (its words do not depend on it). NeuronCore-v4's
``nc_matmul_mx`` instructions with a float32 dst run as a third program on a tile generated
with the ``mx`` type set, in K-slabs of the tile's rows (a multiple of 8) accumulating in
FP32 (:func:`_check_mx`); those with a bfloat16 dst stay on the golden model (a slab's BF16
rounding would differ from the instruction's one rounding) and a warning counts them.
"""

import time

import numpy as np

from systolica.golden import operand_formats
from systolica.sim.api.runs import tile_config
from systolica.sim.api.tiling import golden_tiled_matmuls, run_tiled_program

from ._core import NkiError


def _region(access):
    return (f"PSUM buffer {access.buffer}, partitions {access.partitions[0]}.."
            f"{access.partitions[1] - 1}, bytes {access.span[0]}..{access.span[1] - 1}")


def _tile_for(recorded, rows, cols):
    """The ``rows x cols`` tile generated for the operand types and modes of ``recorded``
    (``(matmul or transpose record, perf_mode)`` pairs)."""
    return tile_config(None, rows, cols, {
        f.name for r, perf_mode in recorded
        for f in operand_formats(r["stationary"].dtype, r["moving"].dtype,
                                 perf_mode=perf_mode)},
        any(perf_mode for _, perf_mode in recorded))


def _run_programs(groups, rows, cols, simulator, workers, scheduler):
    """Per ``perf_mode`` group, ``(outs, mismatches, tile matmuls, words, build seconds)``:
    serially in this process (``workers == 1`` and no scheduler: one tile program per
    group), else as several tile programs on a Dask cluster (``make sim``'s engine)."""
    if workers == 1 and scheduler is None:
        for perf_mode, matmuls in groups.items():
            problems = [(m["stationary"], m["moving"]) for m in matmuls]
            r = run_tiled_program(problems, rows=rows, cols=cols, simulator=simulator,
                                  perf_mode=perf_mode)
            yield perf_mode, (r.outs, r.mismatches, r.matmuls, r.words, r.build_seconds)
        return
    from systolica.sim.api.engine import TileProgram, make_engine
    from systolica.sim.api.tiling import matmul_count

    # One tile for every group: generated for the types and modes the kernel's matmuls use.
    config = _tile_for([(m, perf_mode) for perf_mode, matmuls in groups.items()
                        for m in matmuls], rows, cols)
    with make_engine(workers, scheduler=scheduler) as engine:
        for perf_mode, matmuls in groups.items():
            parts = max(1, min(len(matmuls), 2 * (workers or 2)))
            size = -(-len(matmuls) // parts)
            programs = []
            for j in range(0, len(matmuls), size):
                problems = tuple((m["stationary"], m["moving"]) for m in matmuls[j:j + size])
                programs.append(TileProgram(
                    key=f"nki/{perf_mode}/{j}", problems=problems, config=config,
                    simulator=simulator, build_root=None,
                    matmuls=sum(matmul_count(s.shape[0], s.shape[1], v.shape[1], rows, cols,
                                             perf_mode=perf_mode) for s, v in problems),
                    model_cycles=0, perf_mode=perf_mode))
            outcomes = engine.run(programs)
            yield perf_mode, ([o for oc in outcomes for o in oc.outs],
                              sum(o.mismatches for o in outcomes),
                              sum(o.matmuls for o in outcomes), sum(o.words for o in outcomes),
                              sum(o.build_seconds for o in outcomes))


def check_matmuls(run, *, rows=128, cols=128, simulator="verilator", workers=1,
                  scheduler=None):
    """Run ``run``'s matmuls on a ``rows x cols`` RTL tile and compare every PSUM word.

    ``workers`` (None: one per core) and ``scheduler`` (a Dask scheduler address) spread the
    tile programs over a Dask cluster as ``make sim`` does; ``workers=1`` without a
    scheduler runs them in this process.

    Returns
    -------
    dict
        ``matmuls`` (instructions checked), ``tile_matmuls`` (tile commands run),
        ``transposes`` (TensorE transposes checked, in this process whatever ``workers``),
        ``transpose_commands``, ``transpose_words`` (PSUM elements compared),
        ``words`` (PSUM words the scoreboard compared), ``mismatches`` (0), ``seconds``
        (wall time of the RTL runs including builds), ``build_seconds``, ``mx_matmuls``
        (``nc_matmul_mx`` instructions with a float32 dst checked, on a tile generated with
        ``mx``: ``rows`` a multiple of 8), ``mx_tile_matmuls``, ``mx_words``,
        ``mx_golden_only`` (``nc_matmul_mx`` with a bfloat16 dst, not run on the tile: a
        warning says so).

    Raises
    ------
    NkiError
        On the first instruction whose RTL result differs from the golden path.
    """
    start = time.perf_counter()
    mx = [r for r in run.mx_records if r["dst_dtype"] == np.float32]
    golden_only = len(run.mx_records) - len(mx)
    summary = {"matmuls": 0, "tile_matmuls": 0, "words": 0, "mismatches": 0,
               "transposes": 0, "transpose_commands": 0, "transpose_words": 0,
               "mx_matmuls": 0, "mx_tile_matmuls": 0, "mx_words": 0,
               "build_seconds": 0.0, "rows": rows, "cols": cols,
               "mx_golden_only": golden_only}
    if golden_only:
        run.warnings.append(f"{golden_only} nc_matmul_mx instructions with a bfloat16 dst ran "
                            f"on the golden model only: the RTL check runs MX matmuls with a "
                            f"float32 dst (whose K-slabs a smaller tile accumulates in FP32)")
    groups = {}
    for m in run.matmuls:
        groups.setdefault(m["perf_mode"], []).append(m)
    for perf_mode, (outs, mismatches, tile_matmuls, words, build) in _run_programs(
            groups, rows, cols, simulator, workers, scheduler):
        matmuls = groups[perf_mode]
        problems = [(m["stationary"], m["moving"]) for m in matmuls]
        goldens = golden_tiled_matmuls(problems, rows, perf_mode=perf_mode)
        for m, out, golden in zip(matmuls, outs, goldens, strict=True):
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
        if mismatches:
            raise NkiError(f"nc_matmul: the RTL tile's scoreboard counted {mismatches} "
                           f"PSUM words different from the golden model")
        summary["matmuls"] += len(matmuls)
        summary["tile_matmuls"] += tile_matmuls
        summary["words"] += words
        summary["build_seconds"] += build
    if run.transposes:
        summary.update(_check_transposes(run, rows, cols, simulator))
    if mx:
        summary.update(_check_mx(run, mx, rows, cols, simulator))
    summary["seconds"] = time.perf_counter() - start
    return summary


def _check_mx(run, records, rows, cols, simulator):
    """Run the ``nc_matmul_mx`` instructions ``records`` (float32 dst) on an RTL tile
    generated with the ``mx`` type set (``rows`` a multiple of 8): one tile program of K-slabs
    of ``rows`` partitions (:class:`~systolica.sim.api.tiling.MxOperand` problems), each
    result compared word for word with the instruction's (a tile of at least P rows: one
    slab) or with the same slab-by-slab accumulation
    (:func:`~systolica.sim.api.tiling.golden_tiled_matmuls`). Returns the summary's
    ``mx_matmuls``, ``mx_tile_matmuls``, ``mx_words``; NkiError on the first instruction
    whose words differ."""
    from systolica.sim.api.tiling import MxOperand

    problems = [(MxOperand(r["stationary"], r["stationary_scale"]),
                 MxOperand(r["moving"], r["moving_scale"])) for r in records]
    try:
        result = run_tiled_program(problems, rows=rows, cols=cols, simulator=simulator)
    except ValueError as error:
        raise NkiError(f"nc_matmul_mx: the RTL check cannot run on a {rows} x {cols} tile: "
                       f"{error}") from None
    goldens = golden_tiled_matmuls(problems, rows)
    for r, out, golden in zip(records, result.outs, goldens, strict=True):
        expected = r["sums"] if rows >= r["stationary"].shape[0] else golden
        diff = out.view(np.uint32) != expected.view(np.uint32)
        if diff.any() or result.mismatches:
            ins = run.instructions[r["index"]]
            p, f = (int(v[0]) for v in np.nonzero(diff)) if diff.any() else (0, 0)
            raise NkiError(
                f"{ins.source}: nc_matmul_mx (instruction {ins.index}): the RTL tile ({rows} x "
                f"{cols}) differs from the golden model in {int(diff.sum())} PSUM words "
                f"({result.mismatches} by its scoreboard), first at [{p}, {f}]; "
                f"{_region(r['region'])}")
    return {"mx_matmuls": len(records), "mx_tile_matmuls": result.matmuls,
            "mx_words": result.words}


def transpose_blocks(stationary, moving, rows, cols):
    """The tile commands of one transpose on a ``rows x cols`` tile: ``(slab, fold, columns,
    Matmul)`` per K-slab of ``rows`` partitions and M-fold of ``cols`` elements that the
    moving selects from. A transpose cannot accumulate across slabs, so each slab runs on
    the moving columns whose 1 lies in it (each a legal transpose: one 1 per column) and the
    host places its words: a selection, no arithmetic, so the result is bit for bit the
    whole transpose's."""
    from systolica.sim.api.runs import Matmul

    k, m = stationary.shape
    selected = np.argmax(moving.astype(np.float32) != 0, axis=0)    # the 1 of each column
    out = []
    for k0 in range(0, k, rows):
        columns = np.flatnonzero((selected >= k0) & (selected < k0 + rows))
        if not columns.size:
            continue
        for m0 in range(0, m, cols):
            out.append((k0, m0, columns, Matmul(
                np.ascontiguousarray(stationary[k0:k0 + rows, m0:m0 + cols]),
                np.ascontiguousarray(moving[k0:k0 + rows][:, columns]), is_transpose=True)))
    return out


def _check_transposes(run, rows, cols, simulator):
    """Run every TensorE transpose of ``run`` on the RTL tile in transpose mode (one program)
    and compare each PSUM element's bits with the golden words; the summary's
    ``transposes``, ``transpose_commands`` and ``transpose_words``. NkiError on the first
    instruction whose words differ."""
    from systolica.sim.api.runs import run_program

    plans = [transpose_blocks(t["stationary"], t["moving"], rows, cols)
             for t in run.transposes]
    config = _tile_for([(t, None) for t in run.transposes], rows, cols)
    result = run_program([block[3] for plan in plans for block in plan], config=config,
                         simulator=simulator)
    psums = iter(result.psums)
    words = 0
    for t, plan in zip(run.transposes, plans, strict=True):
        got = np.zeros_like(t["words"])
        for _k0, m0, columns, matmul in plan:
            got[m0:m0 + matmul.stationary.shape[1], columns] = next(psums)
        want, have = (np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
                      for a in (t["words"], got))
        if (want != have).any():
            ins = run.instructions[t["index"]]
            p, f = (int(v[0]) for v in np.nonzero(want != have))
            raise NkiError(f"{ins.source}: {ins.opcode} (instruction {ins.index}): the RTL "
                           f"tile's transpose ({rows} x {cols}) differs from the golden model "
                           f"in {int((want != have).sum())} PSUM elements, first at [{p}, {f}] "
                           f"(RTL 0x{int(have[p, f]):x}, golden 0x{int(want[p, f]):x}); "
                           f"{_region(t['region'])}")
        words += want.size
    return {"transposes": len(run.transposes),
            "transpose_commands": sum(len(plan) for plan in plans), "transpose_words": words}
