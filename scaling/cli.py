"""``systolica estimate`` and ``systolica claims``: the scaling layer's command line.

Exit status: 0 on success, 2 on a bad argument or a bad hardware/workload file (one line
``error: ...`` on stderr that names the file, the field and the allowed values).
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from .claims import all_rows, format_value
from .hardware import DTYPE_BYTES, load_hardware, preset_names
from .model import chip_counts, scaling_curve, step_estimate
from .spec import SpecError
from .units import parse_quantity
from .workloads import (
    PHASES,
    load_gemm_csv,
    load_scalesim_topology,
    load_transformer,
    model_names,
    single_gemm,
    transformer_workload,
)

#: Measured figures printed beside matching estimates: (hw, model, phase, batch) -> (s, source).
REFERENCES = {
    ("inf2", "llama2-7b", "decode", 1): (
        6.47e-3,
        "AWS Neuron docs, inference performance page for Inf2: Llama-2-7b on inf2.48xlarge, "
        "6.47 ms per output token"),
}

REFERENCE_NOTE = (
    "The estimate is close to the memory-bound lower limit: at batch 1 every weight is read "
    "from HBM once per token, so no implementation can beat bytes / bandwidth. A measured "
    "per-token latency also pays for what this model leaves out: the tensor-parallel "
    "AllReduces (2 per layer, each a latency-bound collective across chips), non-GEMM work "
    "(norms, rotary embedding, softmax, sampling), HBM efficiency below 100%, and "
    "synchronisation and host overheads. The ratio measured / estimate is how far the "
    "measured run is from the lower limit.")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; allowed: an integer >= 1")
    return value


def _gemm_shape(text):
    try:
        m, k, n = (int(x) for x in text.lower().replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not M,K,N (three integers)") from None
    return m, k, n


def build_parser():
    parser = argparse.ArgumentParser(
        prog="systolica",
        description="Scaling estimates from the Systolica tile's validated timing model: "
                    "tile -> NeuronCore -> chip -> instance -> cluster.")
    sub = parser.add_subparsers(dest="command", required=True)
    est = sub.add_parser(
        "estimate", help="estimate a workload on a hardware preset",
        description="Estimate a workload: per-GEMM tile cycles (native and SCALE-Sim WS "
                    "compatibility), roofline against HBM, chip time and MFU, collectives, "
                    "step time and scaling efficiency.",
        epilog="examples:\n"
               "  systolica estimate --hw inf2 --workload llama2-7b --phase decode --batch 1 "
               "--tp 12\n"
               "  systolica estimate --hw trn2 --workload gpt3-175b --phase train --batch 1536"
               " --tp 8 --dp 12500 --scaling\n"
               "  systolica estimate --hw trn2 --gemm 4096,4096,2048 --json\n"
               "  systolica estimate --hw trn2 --workload topology.csv --csv",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    est.add_argument("--hw", required=True,
                     help=f"hardware preset ({', '.join(preset_names())}) or a .toml file")
    src = est.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload",
                     help=f"transformer preset ({', '.join(model_names())}), a model .toml, "
                          "a GEMM-list CSV (header name,M,K,N[,count]) or a SCALE-Sim "
                          "topology CSV (conv or GEMM format)")
    src.add_argument("--gemm", type=_gemm_shape, metavar="M,K,N",
                     help="a single GEMM [M, K] x [K, N] (M stationary, N moving)")
    est.add_argument("--topology-format", choices=("conv", "gemm"),
                     help="SCALE-Sim topology format (default: from the header)")
    est.add_argument("--phase", choices=PHASES, default="decode",
                     help="transformer step (default: decode)")
    est.add_argument("--batch", type=_positive_int, default=1,
                     help="sequences (global batch for train; default 1)")
    est.add_argument("--seq", type=_positive_int,
                     help="tokens per sequence / KV-cache length (default: model context)")
    est.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel chips")
    est.add_argument("--dp", type=_positive_int, default=1, help="data-parallel replicas")
    est.add_argument("--dtype", default="bf16", choices=sorted(DTYPE_BYTES),
                     help="data type (default bf16)")
    est.add_argument("--link-bandwidth", metavar="FIGURE",
                     help="chip-to-chip bandwidth per chip, e.g. '1.28 TB/s' (not in presets)")
    est.add_argument("--scaling", action="store_true",
                     help="also print step time and scaling efficiency from 1 chip up to the "
                          "cluster (transformer presets)")
    est.add_argument("--max-chips", type=_positive_int,
                     help="largest chip count of the scaling sweep (default: the cluster)")
    out = est.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of tables")
    out.add_argument("--csv", action="store_true", help="print the per-GEMM rows as CSV")
    est.add_argument("--plot", metavar="PNG", help="write a roofline and scaling plot")
    cl = sub.add_parser(
        "claims", help="published and claimed peaks vs first principles",
        description="For each preset, published or claimed peak vs what its configuration "
                    "computes from first principles; for each figure that does not add up, the "
                    "clock, array size or core count it would take.")
    cl.add_argument("--claims", metavar="TOML", help="claims file (default: packaged claims)")
    cl.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def _load_workload(args, hw):
    """(workload, make(tp, dp) or None, model or None)."""
    if args.gemm:
        return single_gemm(*args.gemm), None, None
    text = args.workload
    path = Path(text)
    if text.endswith(".csv"):
        if not path.exists():
            raise SpecError(text, "", "file not found", "an existing CSV file")
        header = path.read_text().splitlines()[:1]
        if header and header[0].replace(" ", "").lower().startswith("name,m,k,n"):
            return load_gemm_csv(path), None, None
        return load_scalesim_topology(path, args.topology_format), None, None
    model = load_transformer(text)
    seq = args.seq or model.context
    dbytes = DTYPE_BYTES[args.dtype]

    def make(tp, dp):
        return transformer_workload(model, args.phase, args.batch, seq, tp, dp, dbytes)

    return make(args.tp, args.dp), make, model


def run_estimate(args):
    start = time.perf_counter()
    hw = load_hardware(args.hw)
    hw.check_dtype(args.dtype)
    link = None
    if args.link_bandwidth:
        try:
            link = parse_quantity(args.link_bandwidth, "bandwidth")
        except ValueError as e:
            raise ValueError(f"--link-bandwidth: {e}") from None
    workload, make, model = _load_workload(args, hw)
    if make is None and (args.tp, args.dp) != (1, 1):
        raise ValueError("--tp and --dp apply to transformer presets; allowed: 1 for GEMM "
                         "workloads")
    est = step_estimate(hw, workload, args.dtype, args.tp, args.dp, link)
    if make is not None and (args.scaling or args.plot):
        top = args.max_chips or hw.max_chips
        est.scaling = scaling_curve(hw, make, args.dtype, args.tp,
                                    chip_counts(top, args.tp * args.dp if args.tp * args.dp
                                                <= top else None), link)
    reference = None
    if model is not None:
        reference = REFERENCES.get((hw.name, model.name, args.phase, args.batch))
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps(to_json(est, reference, elapsed), indent=2))
    elif args.csv:
        write_csv(est, sys.stdout)
    else:
        print_tables(est, reference, elapsed)
    if args.plot:
        plot(est, args.plot)
        if not (args.json or args.csv):
            print(f"plot written to {args.plot}")
    return 0


def hbm_limit_s(est):
    """Seconds to move every GEMM's bytes once at the chip's HBM bandwidth (lower limit)."""
    return sum(g.bytes for g in est.gemms) / est.hardware.chip.hbm_bandwidth


def to_json(est, reference=None, elapsed=None):
    hw = est.hardware
    out = {
        "hardware": hw.name, "workload": est.workload.name, "dtype": est.dtype,
        "chips": est.chips, "tp": est.tp, "dp": est.dp,
        "step_s": est.step_s, "compute_s": est.compute_s, "tp_comm_s": est.tp_comm_s,
        "dp_comm_s": est.dp_comm_s, "hbm_limit_s": hbm_limit_s(est),
        "chip_peak_flops": est.chip_peak, "achieved_flops_per_chip": est.achieved_flops,
        "mfu": est.mfu, "memory_bytes_per_chip": est.memory_bytes, "fits_in_hbm": est.fits,
        "notes": est.notes, "scaling": est.scaling, "wall_s": elapsed,
        "gemms": [gemm_row(g) for g in est.gemms],
    }
    if reference:
        out["reference"] = {"measured_s": reference[0], "source": reference[1],
                            "ratio_measured_to_estimate": reference[0] / est.step_s,
                            "note": REFERENCE_NOTE}
    return out


GEMM_COLUMNS = ("name", "M", "K", "N", "count", "repeat", "flop", "bytes", "flop_per_byte",
                "tile_cycles", "single_tile_cycles", "scalesim_ws_cycles", "compute_s",
                "memory_s", "time_s", "bound")


def gemm_row(g):
    x = g.gemm
    return dict(zip(GEMM_COLUMNS, (
        x.name, x.m, x.k, x.n, x.count, x.repeat, g.flop, g.bytes, g.intensity, g.tile_cycles,
        g.single_tile_cycles, g.scalesim_cycles, g.compute_s, g.memory_s, g.time_s, g.bound),
        strict=True))


def write_csv(est, stream):
    writer = csv.DictWriter(stream, fieldnames=GEMM_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for g in est.gemms:
        writer.writerow(gemm_row(g))


def _t(seconds):
    if seconds >= 1:
        return f"{seconds:,.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.3f} ms"
    return f"{seconds * 1e6:,.2f} µs"


def _c(value):
    return "-" if value is None else f"{value:,}"


def print_tables(est, reference=None, elapsed=None):
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console = Console(width=max(console.width, 150))
    hw = est.hardware
    table = Table(title=f"{est.workload.name} on {hw.title} ({est.dtype}), per chip",
                  title_justify="left")
    for col, just in (("GEMM", "left"), ("M x K x N", "right"), ("copies", "right"),
                      ("GFLOP", "right"), ("FLOP/B", "right"), ("tile cycles", "right"),
                      ("1-tile native", "right"), ("1-tile SCALE-Sim", "right"),
                      ("compute", "right"), ("HBM", "right"), ("bound", "left")):
        table.add_column(col, justify=just)
    for g in est.gemms:
        x = g.gemm
        copies = f"{x.count}" + (f" x{x.repeat}" if x.repeat > 1 else "")
        table.add_row(x.name, f"{x.m} x {x.k} x {x.n}", copies, f"{g.flop / 1e9:,.2f}",
                      f"{g.intensity:,.1f}", _c(g.tile_cycles), _c(g.single_tile_cycles),
                      _c(g.scalesim_cycles), _t(g.compute_s), _t(g.memory_s), g.bound)
    console.print(table)
    summary = Table(title="Step", title_justify="left", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("")
    rows = [
        ("chips", f"{est.chips:,} (tp {est.tp} x dp {est.dp})"),
        ("step time", _t(est.step_s)),
        ("  GEMMs (roofline)", _t(est.compute_s)),
        ("  tensor-parallel AllReduce", _t(est.tp_comm_s)),
        ("  data-parallel AllReduce", _t(est.dp_comm_s)),
        ("HBM lower limit", f"{_t(hbm_limit_s(est))} (all bytes once at "
                            f"{hw.chip.hbm_bandwidth / 1e9:,.0f} GB/s)"),
        ("achieved per chip", f"{est.achieved_flops / 1e12:,.2f} TFLOPS of "
                              f"{est.chip_peak / 1e12:,.2f} peak"),
        ("MFU", f"{est.mfu:.1%}"),
        ("HBM needed per chip", "not modelled for GEMM lists (see the bytes per GEMM)"
         if est.memory_bytes is None else f"{est.memory_bytes / 2**30:,.2f} GiB"
         + ("" if hw.chip.hbm_bytes is None else
            f" of {hw.chip.hbm_bytes / 2**30:,.0f} GiB ({'fits' if est.fits else 'does not fit'})"
            )),
    ]
    if reference:
        rows += [("AWS measured", f"{_t(reference[0])} ({reference[1]})"),
                 ("measured / estimate", f"{reference[0] / est.step_s:.2f}x")]
    if elapsed is not None:
        rows.append(("computed in", f"{elapsed:.3f} s"))
    for r in rows:
        summary.add_row(*r)
    console.print(summary)
    if est.scaling:
        sc = Table(title="Scaling (global batch fixed)", title_justify="left")
        for col in ("chips", "tp", "dp", "step time", "efficiency", "MFU"):
            sc.add_column(col, justify="right")
        for p in est.scaling:
            sc.add_row(f"{p['chips']:,}", str(p["tp"]), f"{p['dp']:,}", _t(p["step_s"]),
                       f"{p['efficiency']:.1%}", f"{p['mfu']:.1%}")
        console.print(sc)
    for note in est.notes:
        console.print(f"note: {note}", highlight=False)
    if reference:
        console.print(f"note: {REFERENCE_NOTE}", highlight=False)


def plot(est, path):
    """Write a PNG: roofline with one point per GEMM, and scaling efficiency vs chips."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    hw = est.hardware
    panels = 2 if est.scaling else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    xs = np.array([g.intensity for g in est.gemms])
    lo, hi = max(xs.min() / 4, 1e-2), xs.max() * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    roof = np.minimum(est.chip_peak, hw.chip.hbm_bandwidth * grid) / 1e12
    ax.loglog(grid, roof, "k-", label="roofline (peak, HBM)")
    for g in est.gemms:
        ax.loglog(g.intensity, g.flop / g.time_s / 1e12, "o", label=g.gemm.name)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOPS per chip")
    ax.set_title(f"Roofline: {hw.chip.name}, {est.dtype}")
    ax.legend(fontsize=7)
    if est.scaling:
        ax2 = axes[0][1]
        chips = [p["chips"] for p in est.scaling]
        ax2.semilogx(chips, [100 * p["efficiency"] for p in est.scaling], "o-")
        ax2.set_xlabel("chips")
        ax2.set_ylabel("scaling efficiency (%)")
        ax2.set_ylim(0, 105)
        ax2.set_title("Scaling efficiency (global batch fixed)")
        ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_claims(args):
    rows = all_rows(args.claims)
    if args.json:
        print(json.dumps([{"preset": r.preset, "subject": r.subject, "what": r.what,
                           "stated": r.stated_text, "stated_value": r.stated,
                           "computed_value": r.computed, "difference": r.difference,
                           "agrees": r.agrees, "would_take": r.would_take,
                           "source": r.source} for r in rows], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Published and claimed figures vs first principles "
                        "(peak = rows x cols x 2 FLOP x MACs/PE/cycle x clock x cores)",
                  title_justify="left")
    for col in ("preset", "subject", "figure", "stated", "computed", "difference",
                "adds up", "what it would take / note"):
        table.add_column(col)
    for r in rows:
        diff = r.difference
        diff_text = "-" if diff is None or diff != diff else (
            f"{format_value(r.kind, diff)} ({diff / r.stated:+.1%})" if r.kind != "count"
            else f"{diff:+,.0f}")
        agrees = {True: "yes", False: "NO", None: "-"}[r.agrees]
        table.add_row(r.preset, r.subject, r.what, r.stated_text,
                      format_value(r.kind, r.computed), diff_text, agrees, r.would_take)
    Console(width=220).print(table)
    return 0


def main(argv=None):
    """Entry point of the ``systolica`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "estimate":
            return run_estimate(args)
        return run_claims(args)
    except (SpecError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
