"""Published NKI timings against the engine model's predictions: the table of ``docs/nki.md``,
"Published vs predicted".

Run ``python -m systolica.nki._published`` (about 30 s of CPU: the matmul tutorial's four
kernels at the published size are 39,000-99,000 instructions each) or ``--quick`` (skip
them). Each row: what AWS published (document and section), the model's prediction,
and the error ``predicted / published - 1``.
"""

import argparse
import sys

from . import _synthetic as syn
from .costs import golden_matmul_interval, load_target
from .engines import schedule

#: The tutorial's table measures ``[4096, 8192] @ [8192, 8192]`` BF16 on trn1.32xlarge.
TUTORIAL = "NKI 'Matrix multiplication' tutorial, 'Testing Correctness and Benchmarking'"
#: (step, latency ms, HFU %) as that table prints them.
TUTORIAL_TABLE = (("tiled", 51.80, 10.98), ("hoisted", 42.96, 13.24),
                  ("blocked_free", 22.07, 26.51), ("blocked_all", 6.97, 85.24))
MATMUL_DOC = "nki.isa.nc_matmul, 'Estimated instruction cost'"
TRANSPOSE_DOC = "nki.isa.nc_transpose, 'Estimated instruction cost' (TensorE)"


def _row(what, source, published, predicted, unit):
    return {"what": what, "source": source, "published": published, "predicted": predicted,
            "unit": unit, "error": predicted / published - 1}


def instruction_rows():
    """TensorE issue intervals: AWS's formula against the tile's cycle model."""
    rows = []
    for k, m, n in ((128, 128, 512), (128, 128, 128), (128, 128, 64), (128, 32, 16)):
        published = max(min(64, m), n)
        rows.append(_row(f"nc_matmul K={k} M={m} N={n} BF16, back to back", MATMUL_DOC,
                         published, golden_matmul_interval(128, 128, k, n), "TensorE cycles"))
    for p, f in ((128, 128), (32, 128)):
        # TensorE transpose: data [P, F] stationary (K = P, M = F), identity [P, P] moving.
        rows.append(_row(f"nc_transpose [{p}, {f}] on TensorE, back to back", TRANSPOSE_DOC,
                         max(p, min(64, f)), golden_matmul_interval(128, 128, p, p),
                         "TensorE cycles"))
    return rows


def peak_rows():
    """Peaks and the roofline threshold, from the schedule of a long matmul stream."""
    rows = []
    for name, published, doc in (
            ("trn1", 92e12, "Trainium/Inferentia2 Architecture Guide for NKI, Tensor Engine: "
                            "92 TFLOPS BF16"),
            ("trn2", 79e12, "NeuronCore-v3 Architecture, Tensor Engine: 79 BF16 TFLOPS")):
        p = schedule(syn.matmul_stream([(128, 128, 512)] * 1000), name)
        flops = 1000 * 128 * 128 * 512 * 2 / p.seconds
        rows.append(_row(f"{name}: 1,000 back-to-back 128x128x512 BF16 matmuls", doc,
                         published / 1e12, flops / 1e12, "TFLOPS"))
    p = schedule(syn.matmul_stream([(256, 128, 512)] * 1000, "float8_e4m3", "double_row"),
                 "trn2")
    flops = 1000 * 256 * 128 * 512 * 2 / p.seconds
    rows.append(_row("trn2: 1,000 back-to-back FP8 double-row 256x128x512 matmuls",
                     "NeuronCore-v3 Architecture, Tensor Engine: 158 cFP8 TFLOPS", 158,
                     flops / 1e12, "TFLOPS"))
    t = load_target("trn1")
    threshold = 2 * t.peak_macs_per_second / t.hbm_bandwidth
    rows.append(_row("trn1: arithmetic intensity that saturates TensorE (peak / HBM per core)",
                     "matmul tutorial, 'Optimization 1': 222 Flops/Byte for bfloat16 on "
                     "NeuronCore-v2", 222, threshold, "FLOP/byte"))
    return rows


def tutorial_rows():
    """The matmul tutorial's four kernels on trn1 at the published size."""
    rows = []
    for step, ms, hfu in TUTORIAL_TABLE:
        trace = syn.tutorial_matmul(step, 4096, 8192, 8192)
        modes = ("barrier", "dependencies") if step == "blocked_all" else ("barrier",)
        for mode in modes:
            p = schedule(trace, "trn1", sequential=mode)
            label = f"matmul tutorial, {step}" + (f" (sequential={mode})" if len(modes) > 1
                                                   else "")
            rows.append(_row(label + ": latency", TUTORIAL, ms, p.seconds * 1e3, "ms"))
            rows.append(_row(label + ": HFU", TUTORIAL, hfu, p.mfu * 100, "%"))
    return rows


def markdown(rows):
    """The rows as a Markdown table."""
    lines = ["| kernel or instruction | published | predicted | error | source |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['what']} | {r['published']:.4g} {r['unit']} | "
                     f"{r['predicted']:.4g} {r['unit']} | {r['error']:+.1%} | {r['source']} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m systolica.nki._published",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="leave out the matmul tutorial's kernels (the slow part)")
    args = parser.parse_args(argv)
    rows = instruction_rows() + peak_rows() + ([] if args.quick else tutorial_rows())
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
