"""The report of a MiniLM run: text for the terminal and a JSON document.

Per precision: one row per GEMM and layer (matmuls, summed RTL cycles beside the cycle
model's one-program figure, MACs per cycle, mismatches, error against FP32), a total per
layer, the time split, the embeddings' cosine with the FP32 model's, the pairwise
similarity matrix's max difference and the nearest neighbours; then the accounting across
workers, and the scaling layer's NeuronCore estimates for the same GEMMs.
"""

from systolica.workloads.minilm.run import TARGETS
from systolica.workloads.minilm.weights import (
    ATTENTION_GEMMS,
    GEMMS,
    PACKAGE,
    TRANSPOSE_OF,
    TRANSPOSES,
)


def article(number):
    """"a" or "an" before a number said in English ("an 8", "an 11", "an 18", "a 64")."""
    text = str(number)
    return "an" if text[0] == "8" or len(text) in (2, 5) and text[:2] in ("11", "18") else "a"


def neuroncore_estimates(gemm_shapes):
    """What the scaling layer estimates the GEMMs take on one NeuronCore-v2 and -v3.

    Uses :func:`systolica.scaling.step_estimate` on the ``inf2`` (NeuronCore-v2) and ``trn2``
    (NeuronCore-v3) presets at their BF16 rate (neither preset has an INT8 rate), and takes
    each problem's ``single_tile_cycles``: one copy on one tensor engine, compute only; a
    GEMM of several problems (attention: sentences x heads) adds them up.

    Parameters
    ----------
    gemm_shapes : sequence of (str, list of (int, int, int))
        Per GEMM its name and the ``(m, k, n)`` of each problem.

    Returns
    -------
    list of dict or None
        Per preset: ``core`` (name), ``preset``, ``clock_hz``, ``cycles`` (list of int per
        GEMM) and ``seconds`` (list of float); None when the scaling layer is not installed.
    """
    try:
        from systolica.scaling import Gemm, Workload, load_hardware, step_estimate
    except ImportError:
        return None
    distinct = sorted({shape for _name, shapes in gemm_shapes for shape in shapes})
    if not distinct:
        return []
    workload = Workload(name="minilm", gemms=tuple(Gemm(f"g{i}", m, k, n)
                                                   for i, (m, k, n) in enumerate(distinct)))
    out = []
    for preset in ("inf2", "trn2"):
        hw = load_hardware(preset)
        per_shape = dict(zip(distinct, (g.single_tile_cycles for g in
                                        step_estimate(hw, workload, "bf16").gemms),
                             strict=True))
        cycles = [sum(per_shape[s] for s in shapes) for _name, shapes in gemm_shapes]
        out.append({"core": hw.core.name, "preset": preset, "clock_hz": hw.tile.clock_hz,
                    "cycles": cycles, "seconds": [c / hw.tile.clock_hz for c in cycles]})
    return out


def _in_bf16(gemm, dtype):
    """True when a GEMM of the ``dtype`` precision run ran in BF16 on the tile instead
    (attention in the INT8, FP8 and MXFP8 runs)."""
    return dtype != "bf16" and gemm.tile_dtype == "bf16"


def _totals(gemms):
    keys = ("programs", "matmuls", "cycles", "model_cycles", "macs", "mismatches",
            "differing")
    return {k: sum(getattr(g, k) for g in gemms) for k in keys}


def _rate(macs, cycles):
    return macs / cycles if cycles else 0.0


def format_report(run):
    """The report of a :class:`~systolica.workloads.minilm.run.ModelRun` as text lines (list of
    str)."""
    peak = run.rows * run.cols
    lines = [f"all-MiniLM-L6-v2 (real weights, {PACKAGE}) on {article(run.rows)} {run.rows} x "
             f"{run.cols} tile, "
             f"{run.simulator}; programs ran on: {run.engine}",
             f"  sentences: {len(run.sentences)}, {sum(run.tokens)} tokens "
             f"({', '.join(map(str, run.tokens))}); linear GEMMs take all tokens as N, "
             f"attention runs per sentence and head"]
    for i, s in enumerate(run.sentences):
        lines.append(f"    {i}: \"{s if len(s) <= 90 else s[:87] + '...'}\"")
    layers = sorted({layer for layer, _ in run.selected})
    names = [g for g in GEMMS if any(g == s for _, s in run.selected)]
    moved = [t for g in names for t in TRANSPOSES.get(g, ())]
    lines.append(f"  on the tile: layer{'s' if len(layers) > 1 else ''} "
                 f"{', '.join(map(str, layers))}: {', '.join(names)}"
                 + (f" (and the transposes {', '.join(moved)})" if moved else "")
                 + "; in numpy FP32: "
                 "embeddings, LayerNorm, softmax, GELU, pooling, biases"
                 + (", the other GEMMs" if len(run.selected) < len(GEMMS) * 6 else ""))
    if run.rtl_folds == 0:
        lines.append("  RTL share: none (--rtl-folds 0): every GEMM from the golden model")
    elif run.rtl_folds is not None:
        lines.append(f"  RTL share: the first {run.rtl_folds} M-fold(s) "
                     f"({run.rtl_folds * run.cols} output rows) of each problem on the "
                     f"RTL, the rest from the golden model (--rtl-folds)")
    attention = any(g in ATTENTION_GEMMS for g in names)
    titles = {"bf16": "BF16: weights and activations rounded to BF16 (RNE), FP32 PSUM",
              "int8": "INT8: linear GEMMs with per-output-channel weight scales, " + (
                  "per-tensor activation scales calibrated on the batch"
                  if run.int8_activations == "tensor" else "per-token activation scales")
              + ", INT32 PSUM dequantised to FP32"
              + ("; attention GEMMs (scores, context) and their transposes in BF16 on the "
                 "same tile" if attention else ""),
              "fp8": "FP8: linear GEMMs in float8_e4m3 (per-output-channel weight scales, "
                     "per-token activation scales, saturating at +-240), FP8 double-row "
                     "(2 MACs per PE per cycle), FP32 PSUM dequantised"
              + ("; attention GEMMs (scores, context) and their transposes in BF16 on the "
                 "same tile" if attention else ""),
              "mxfp8": "MXFP8: linear GEMMs in OCP MXFP8 (float8_e4m3fn x4 words, one E8M0 "
                       "scale per 32 elements along K, weights and activations by "
                       "nki.isa.quantize_mx's rule from BF16), MX matmuls (4 MACs per PE per "
                       "cycle), FP32 PSUM"
              + ("; attention GEMMs (scores, context) and their transposes in BF16 on the "
                 "same tile" if attention else "")}
    speed = {"fp8": ", 2x that double-row", "mxfp8": ", 4x that MX"}
    header = (f"    {'GEMM':<12}{'shape':<25}{'progs':>6}{'matmuls':>9}{'cycles':>11}"
              f"{'1-prog model':>13}{'MAC/cyc':>8}{'mism.':>6}{'max|err|':>10}"
              f"{'rel.Frob':>10}{'cosine':>10}")
    targets = run.meets_targets()
    for dtype, prec in run.runs.items():
        lines += ["", titles[dtype], header]
        for layer in layers:
            rows = [g for g in prec.gemms if g.layer == layer]
            for g in rows:
                name = (f"L{layer} {g.gemm}" + ("*" if _in_bf16(g, dtype) else "")
                        + ("+" if g.concurrent else ""))
                lines.append(
                    f"    {name:<12}{g.shape_text:<25}{g.programs:>6}{g.matmuls:>9,}"
                    f"{g.cycles:>11,}{g.model_cycles:>13,}{_rate(g.macs, g.cycles):>8.1f}"
                    f"{g.mismatches + g.differing:>6}{g.max_abs:>10.2e}{g.rel_fro:>10.2e}"
                    f"{g.cosine:>10.6f}")
            if len(layers) > 1 and rows:
                t = _totals(rows)
                lines.append(f"    {f'L{layer} all':<37}{t['programs']:>6}{t['matmuls']:>9,}"
                             f"{t['cycles']:>11,}{t['model_cycles']:>13,}"
                             f"{_rate(t['macs'], t['cycles']):>8.1f}"
                             f"{t['mismatches'] + t['differing']:>6}")
        t = _totals(prec.gemms)
        lines.append(f"    {'total':<37}{t['programs']:>6}{t['matmuls']:>9,}{t['cycles']:>11,}"
                     f"{t['model_cycles']:>13,}{_rate(t['macs'], t['cycles']):>8.1f}"
                     f"{t['mismatches'] + t['differing']:>6}   (peak {peak} MACs/cycle"
                     f"{speed.get(dtype, '')}; "
                     f"{t['macs']:,} MACs on the RTL)")
        if any(_in_bf16(g, dtype) for g in prec.gemms):
            lines.append("    * ran in BF16 on the tile (attention stays in a float type)")
        if any(g.concurrent for g in prec.gemms):
            lines.append("    + ran in the quarter tiles of the diagonal, up to 4 matmuls at "
                         "once (the cycle model's choice: no slower than the whole array; "
                         "loads of K beats through the one stationary port set the pace)")
        workers = on_workers(run)
        build, sim, clock, host = prec.time_split(workers)
        lines.append(f"  time: {prec.seconds:.1f} s wall"
                     + (f" (the {len(run.runs)} precisions ran concurrently on the same "
                        f"workers, so their wall times overlap; the whole run took "
                        f"{run.seconds:.1f} s)" if concurrent(run) else "") + "; "
                     + ("summed over the workers: " if workers else "")
                     + f"build {build:.1f} s + simulator {sim:.1f} s (clock loop {clock:.1f} "
                     f"s, start-up {sim - clock:.1f} s) + host {host:.1f} s (stimulus, golden "
                     f"model, checking" + ("" if workers else ", the FP32 rest of the model")
                     + ")")
        cos = ", ".join(f"{c:.6f}" for c in prec.cosines)
        lines.append(f"  embeddings vs FP32 model: cosine min {prec.cosines.min():.6f} "
                     f"(per sentence {cos}); target >= {TARGETS[dtype]}")
        lines.append(f"  similarity matrix vs FP32 model's: max |difference| "
                     f"{prec.similarity_max_diff:.2e}; nearest neighbours "
                     f"{_neighbours(prec.neighbours)} "
                     + ("unchanged" if prec.neighbours_unchanged else
                        f"CHANGED (FP32: {_neighbours(run.reference_neighbours)})")
                     + f"; {'met' if targets[dtype] else 'MISSED'}")
        if dtype == "int8" and not targets[dtype] and run.int8_activations == "tensor":
            lines.append("  (per-tensor activation scales lose resolution to the outliers of "
                         "LayerNorm and GELU outputs; --int8-activations token fixes it)")
    lines += ["", "  progs: tile programs; cycles: RTL cycles summed over the programs; "
                  "1-prog model: the cycle model's cycles for all the GEMM's matmuls as one "
                  "program; mism.: PSUM words that differ from the golden model (scoreboard, "
                  "every slab) plus reassembled words that differ; max|err|, rel.Frob, "
                  "cosine: against the FP32 model's output of the same GEMM; q.T, k.T, "
                  "p.T: the attention operands' transposes, on the tile in transpose mode "
                  "(no MACs; their errors are those of the operand they move: a transpose "
                  "adds none); shapes 'n x [t,32]...': n problems, one per sentence and head, "
                  "t the sentence's tokens"]
    lines += ["", "FP32 model's similarity matrix (cosine of sentence embeddings):"]
    lines += _matrix(run.reference_similarity)
    lines += ["", _accounting(run)]
    lines += _estimates(run)
    return lines


def _neighbours(neighbours):
    return "[" + " ".join(map(str, neighbours)) + "]"


def _matrix(s):
    head = "      " + "".join(f"{j:>7}" for j in range(s.shape[0]))
    return [head] + [f"    {i:>2}" + "".join(f"{v:>7.3f}" for v in row)
                     for i, row in enumerate(s)]


def _accounting(run):
    led = run.ledger
    worker_list = ", ".join(f"{n}" for n in sorted(led.workers.values(), reverse=True))
    return (f"Accounting: {led.programs:,} of {led.planned_programs:,} planned programs, "
            f"{led.matmuls:,} of {led.planned_matmuls:,} matmuls checked by the scoreboard "
            f"({led.words:,} PSUM words), each program accepted once "
            f"({led.duplicates} duplicates refused, {len(led.missing)} missing, "
            f"{sum(led.rescheduled.values())} rescheduled from a lost worker); "
            f"{len(led.workers)} worker process{'es' if len(led.workers) != 1 else ''} "
            f"ran {worker_list or 'no'} programs"
            + (f", busy {100 * busy_fraction(run):.0f}% of the wall time" if led.workers
               else "") + "; " + ("COMPLETE" if led.complete else "INCOMPLETE"))


def on_workers(run):
    """Whether the run's programs ran on more than one worker process (bool): its time split
    is then their task times added up (:meth:`PrecisionRun.time_split`)."""
    return len(run.ledger.workers) > 1


def concurrent(run):
    """Whether the run's precisions ran at the same time (bool): more than one precision on
    more than one worker process (a Dask engine runs the precision passes side by side)."""
    return len(run.runs) > 1 and on_workers(run)


def busy_fraction(run):
    """The workers' summed task time over (worker processes x wall time) (float, 0 to 1):
    how well the programs kept the workers busy."""
    workers = len(run.ledger.workers)
    return run.ledger.seconds / (workers * run.seconds) if workers and run.seconds else 0.0


def _estimates(run):
    first = next(iter(run.runs.values()), None)
    named = [(f"L{g.layer} {g.gemm}", g.shapes) for g in first.gemms] if first else []
    estimates = neuroncore_estimates(named) if named else None
    if not named:
        return []
    if estimates is None:
        return ["", "Scaling layer not installed: no NeuronCore estimates"]
    lines = ["", "Scaling layer: the same GEMMs and transposes on one NeuronCore (128 x 128 "
                 "tensor engine, BF16 rate, compute only; a transpose costs the matmul it is; "
                 "each problem alone, its fill and drain included, so the attention GEMMs' "
                 "small problems, one per sentence and head, cost a fill each where the tile "
                 "above runs them back to back)",
             f"    {'GEMM':<11}" + "".join(f"{e['core'] + ' (' + e['preset'] + ')':>26}"
                                        for e in estimates)]
    for i, (name, _shapes) in enumerate(named):
        lines.append(f"    {name:<11}" + "".join(
            f"{e['cycles'][i]:>12,} cyc {e['seconds'][i] * 1e6:>7.3f} us" for e in estimates))
    lines.append(f"    {'total':<11}" + "".join(
        f"{sum(e['cycles']):>12,} cyc {sum(e['seconds']) * 1e6:>7.3f} us" for e in estimates))
    return lines


def report_json(run):
    """The whole report of a :class:`~systolica.workloads.minilm.run.ModelRun` as a JSON-ready
    dict (numbers as int/float, matrices as nested lists)."""
    first = next(iter(run.runs.values()), None)
    named = [(f"L{g.layer} {g.gemm}", g.shapes) for g in first.gemms] if first else []
    targets = run.meets_targets()
    precisions = {}
    for dtype, prec in run.runs.items():
        build, sim, clock, host = prec.time_split(on_workers(run))
        layers = sorted({g.layer for g in prec.gemms})
        precisions[dtype] = {
            "gemms": [{"layer": g.layer, "gemm": g.gemm, "tile_dtype": g.tile_dtype,
                       "shape": g.shape_text, "m": g.m, "k": g.k, "n": g.n,
                       "problems": g.count, "m_rtl": g.m_rtl, "programs": g.programs,
                       "matmuls": g.matmuls, "cycles": g.cycles,
                       "model_cycles_one_program": g.model_cycles, "macs": g.macs,
                       "macs_per_cycle": _rate(g.macs, g.cycles),
                       "mismatches": g.mismatches, "differing": g.differing,
                       "max_abs_error": g.max_abs, "rel_frobenius_error": g.rel_fro,
                       "cosine": g.cosine, "own_rel_frobenius_error": g.own_rel_fro,
                       "worker_seconds": g.seconds, "concurrent_tiles": g.concurrent}
                      for g in prec.gemms],
            "layers": {str(layer): _totals([g for g in prec.gemms if g.layer == layer])
                       for layer in layers},
            "totals": _totals(prec.gemms),
            "embedding_cosines": [float(c) for c in prec.cosines],
            "embedding_cosine_min": float(prec.cosines.min()),
            "target": TARGETS[dtype], "target_met": targets[dtype],
            "similarity": prec.similarity.tolist(),
            "similarity_max_abs_difference": prec.similarity_max_diff,
            "nearest_neighbours": prec.neighbours,
            "nearest_neighbours_unchanged": prec.neighbours_unchanged,
            "seconds": {"wall": prec.seconds, "build": build, "simulator": sim,
                        "clock_loop": clock, "host": host},
        }
    estimates = neuroncore_estimates(named) if named else None
    return {
        "model": "all-MiniLM-L6-v2", "package": PACKAGE,
        "tile": {"rows": run.rows, "cols": run.cols, "simulator": run.simulator},
        "engine": run.engine, "sentences": run.sentences, "tokens": run.tokens,
        "on_tile": [f"L{layer} {gemm}" for layer, gemm in run.selected],
        "rtl_folds": run.rtl_folds, "int8_activations": run.int8_activations,
        "reference_similarity": run.reference_similarity.tolist(),
        "reference_nearest_neighbours": run.reference_neighbours,
        "precisions": precisions, "accounting": run.ledger.as_dict(),
        "worker_busy_fraction": busy_fraction(run),
        "precisions_concurrent": concurrent(run),
        "neuroncore_estimates": None if estimates is None else [
            {**e, "gemms": [n for n, _ in named]} for e in estimates],
        "exact": run.exact, "targets_met": all(targets.values()),
        "wall_seconds": run.seconds,
    }


def plot_utilisation(run, path):
    """Draw each GEMM's tile utilisation as a PNG at ``path``: per layer and GEMM, one bar per
    precision run, its MACs on the RTL over (summed RTL cycles x rows x cols), in percent,
    with the cycle model's figure for the GEMM as one program marked beside it. Returns the
    path (pathlib.Path); raises OSError if it cannot be written."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peak = run.rows * run.cols
    dtypes = list(run.runs)
    gemms = [(g.layer, g.gemm) for g in run.runs[dtypes[0]].gemms
             if g.gemm not in TRANSPOSE_OF]     # transposes do no MACs
    width = 0.8 / len(dtypes)
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(gemms) * len(dtypes) + 2), 4.2))
    top = 100.0          # FP8 double-row and MX matmuls exceed the single-row peak
    for d, dtype in enumerate(dtypes):
        by_key = {(g.layer, g.gemm): g for g in run.runs[dtype].gemms}
        xs = [i + (d - (len(dtypes) - 1) / 2) * width for i in range(len(gemms))]
        measured = [100 * _rate(by_key[k].macs, by_key[k].cycles) / peak for k in gemms]
        model = [100 * _rate(by_key[k].macs, by_key[k].model_cycles) / peak for k in gemms]
        top = max(top, *measured, *model)
        ax.bar(xs, measured, width, color=colours(d), label=f"{dtype}: RTL (its programs)")
        ax.plot(xs, model, linestyle="none", marker="_", markersize=12, color="black",
                label="cycle model, the GEMM as one program" if d == 0 else None)
    ax.set_xticks(range(len(gemms)))
    ax.set_xticklabels([f"L{layer} {gemm}" for layer, gemm in gemms], rotation=45,
                       ha="right", fontsize=8)
    ax.set_ylabel(f"utilisation, % of {peak} MACs/cycle")
    ax.set_ylim(0, 1.05 * top)
    ax.set_title(f"all-MiniLM-L6-v2 GEMMs on {article(run.rows)} {run.rows} x {run.cols} tile "
                 f"({run.simulator})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="y", linestyle=":", linewidth=0.5)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["format_report", "neuroncore_estimates", "plot_utilisation", "report_json"]
