"""``systolica estimate`` and ``systolica claims``: the scaling layer's command line.

Exit status: 0 on success, 2 on a bad argument or a bad hardware/workload file (one line
``error: ...`` on stderr that names the file, the field and the allowed values).
"""

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from . import contradictions
from .calibration import (
    fit,
    format_calibration,
    load_calibration,
    load_points,
    published_stack,
    validate,
)
from .claims import all_rows, format_value, generation_rows, workload_rows
from .hardware import DTYPE_BYTES, load_hardware, preset_names
from .llm import (
    CONTEXT_ATTENTION,
    IDEAL,
    KV_LAYOUTS,
    RECOMPUTE,
    WEIGHT_BYTES,
    Layout,
    inference,
    training,
    training_scaling,
)
from .model import step_estimate
from .report import (
    llm_json,
    matching,
    plot_llm,
    plot_validation,
    print_llm,
    print_validation,
    seconds,
    validation_json,
)
from .spec import SpecError
from .units import parse_quantity
from .workloads import (
    CONV_COLUMNS,
    PHASES,
    load_gemm_csv,
    load_scalesim_topology,
    load_transformer,
    model_names,
    single_gemm,
)
from .workloads import GEMM_COLUMNS as TOPOLOGY_GEMM_COLUMNS


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; allowed: an integer >= 1")
    return value


#: Largest GEMM dimension ``--gemm`` takes (2^31 - 1: int32 sizes, as the Neuron compiler's).
MAX_GEMM_SIZE = (1 << 31) - 1


def _gemm_shape(text):
    try:
        m, k, n = (int(x) for x in text.lower().replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not M,K,N (three integers)") from None
    if not all(1 <= x <= MAX_GEMM_SIZE for x in (m, k, n)):
        raise argparse.ArgumentTypeError(f"{text!r}: M, K and N must be from 1 to "
                                         f"{MAX_GEMM_SIZE:,}")
    return m, k, n


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``prog: error: ...; see --help``), exit
    status 2, without the usage block; its subcommands' parsers are of the same class."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def output_file(text):
    """argparse type: a path a PNG (or other output) can be written to: its folder exists
    and is writable. Returns ``text`` (str); raises ``argparse.ArgumentTypeError`` otherwise,
    so a bad path is a one-line error before anything is computed."""
    folder = Path(text).expanduser().resolve().parent
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; allowed: a file path")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(folder)!r} does not exist; allowed: a "
                                         f"file in an existing folder")
    try:    # os.access says yes to root for read-only places such as /proc: try it
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"folder {str(folder)!r} is not writable ({error.strerror or error}); allowed: "
            f"a file in a writable folder") from None
    return text


def image_file(text):
    """argparse type: :func:`output_file` whose suffix is an image format matplotlib writes
    (``.png``, ``.svg``, ``.pdf``, ...), so ``--plot run.txt`` is refused before anything is
    computed rather than after. Returns ``text`` (str)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = Path(text).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise argparse.ArgumentTypeError(
            f"{text!r} has {'no suffix' if not suffix else f'suffix .{suffix}'}; allowed: an "
            f"image file ending in one of {', '.join('.' + f for f in formats)}")
    return output_file(text)


def examples_folder():
    """The folder of the sample workload CSVs (pathlib.Path): ``systolica/examples`` in an
    installed wheel, ``docs/examples`` in the checkout (an editable install), where the docs
    link them."""
    root = Path(__file__).resolve().parents[1]
    installed = root / "examples"
    return installed if installed.is_dir() else root / "docs" / "examples"


def example_names():
    """The sample workload CSVs shipped with the package (sorted list of file names):
    ``--workload gemms.csv`` reads the packaged copy when no such file is in the current
    folder."""
    return sorted(p.name for p in examples_folder().glob("*.csv"))


def build_parser():
    parser = _Parser(
        prog="systolica",
        description="Scaling estimates from the Systolica tile's validated timing model: "
                    "tile -> NeuronCore -> chip -> instance -> cluster.")
    sub = parser.add_subparsers(dest="command", required=True)
    est = sub.add_parser(
        "estimate", help="estimate a model or a GEMM workload on a hardware preset",
        description="Estimate a transformer (a Hugging Face config.json or a model preset) for "
                    "decode (TTFT, TPOT), prefill or training (step time, sequences/s, MFU) "
                    "with the calibrated model, or a GEMM workload (per-GEMM tile cycles, "
                    "roofline against HBM). --tp, --pp and --dp count NeuronCores as Neuron's "
                    "tp_degree does (logical NeuronCores on trn2). An option marked below for "
                    "other phases (train; decode, prefill; --workload) or for the other kind "
                    "of estimate is refused, not ignored.",
        epilog="examples:\n"
               "  systolica estimate --hw trn1 --model llama2-7b --tp 32 --input-len 128 "
               "--output-len 8064\n"
               "  systolica estimate --hw inf2 --model path/to/config.json --tp 24 --weights "
               "int8\n"
               "  systolica estimate --hw trn1 --model llama3.1-70b --phase train --tp 32 "
               "--pp 8 --dp 4 --global-batch 1024 --seq 8192\n"
               "  systolica estimate --hw trn2 --gemm 4096,4096,2048 --json\n"
               "  systolica estimate --hw trn2 --workload topology.csv --csv\n"
               "  (config.json: any Hugging Face config, e.g. "
               "scaling/presets/models/llama2-7b.json; gemms.csv and topology.csv are "
               "samples shipped with the package, docs/examples/ in the checkout, read when "
               "the current folder has no file of that name)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    est.add_argument("--hw", required=True,
                     help=f"hardware preset ({', '.join(preset_names())}) or a .toml file")
    src = est.add_mutually_exclusive_group(required=True)
    src.add_argument("--model",
                     help=f"a Hugging Face config.json, or a model preset "
                          f"({', '.join(model_names())})")
    src.add_argument("--workload",
                     help="a GEMM-list CSV (header name,M,K,N[,count]) or a SCALE-Sim "
                          "topology CSV (conv or GEMM format); a model preset name is taken "
                          "as --model")
    src.add_argument("--gemm", type=_gemm_shape, metavar="M,K,N",
                     help="a single GEMM [M, K] x [K, N] (M stationary, N moving)")
    est.add_argument("--topology-format", choices=("conv", "gemm"),
                     help="SCALE-Sim topology format (--workload; default: from the header)")
    est.add_argument("--phase", choices=PHASES, default=None,
                     help="decode: TTFT and TPOT; prefill: TTFT only; train: one optimizer "
                          "step (default: decode)")
    est.add_argument("--batch", type=_positive_int, default=None,
                     help="requests decoded together (decode, prefill; default 1)")
    est.add_argument("--input-len", type=_positive_int, default=None,
                     help="prompt tokens (decode, prefill; default 128)")
    est.add_argument("--output-len", type=_positive_int, default=None,
                     help="generated tokens; the KV cache grows from input to input + output "
                          "(decode; default 128)")
    est.add_argument("--weights", choices=tuple(WEIGHT_BYTES), default=None,
                     help="weight storage type (decode, prefill; default bf16; compute "
                          "stays BF16)")
    est.add_argument("--global-batch", type=_positive_int, default=None,
                     help="sequences per optimizer step (train; default 1024)")
    est.add_argument("--seq", type=_positive_int, default=None,
                     help="tokens per training sequence (train; default: the model's "
                          "max_position_embeddings, at most 8192)")
    est.add_argument("--micro-batch", type=_positive_int, default=None,
                     help="sequences per micro-batch (train; default 1)")
    est.add_argument("--zero1", action="store_true", default=None,
                     help="shard the optimizer state over the dp replicas (ZeRO-1; train)")
    est.add_argument("--recompute", choices=RECOMPUTE, default=None,
                     help="activation recomputation (train; default selective: the "
                          "attention core)")
    est.add_argument("--context-attention", choices=CONTEXT_ATTENTION, default=None,
                     help="how context encoding computes attention (prefill, and decode's "
                          "TTFT; default flash: the fused kernel, "
                          "causal blocks skipped; standard: the plain graph over the whole "
                          "score matrix, as transformers-neuronx before Neuron 2.19 and for "
                          "prompts under 4,096 tokens)")
    est.add_argument("--kv-layout", choices=KV_LAYOUTS, default=None,
                     help="how a decode step reads the KV cache (decode; default kernel: the "
                          "flash kernel's block loads per sequence and KV head; sbh: "
                          "transformers-neuronx's (positions, sequences, heads, d_head) cache "
                          "read as one stream, as the published decoder tables ran)")
    est.add_argument("--tp", type=_positive_int, default=1,
                     help="tensor-parallel degree in NeuronCores (Neuron's tp_degree)")
    est.add_argument("--pp", type=_positive_int, default=1,
                     help="pipeline stages (each tp NeuronCores)")
    est.add_argument("--dp", type=_positive_int, default=1, help="data-parallel replicas")
    est.add_argument("--terms", action="store_true",
                     help="--model: also print each pass's time by engine (TensorE, ScalarE, "
                          "VectorE, DMA/HBM, collectives, fixed overhead)")
    est.add_argument("--uncalibrated", action="store_true", default=None,
                     help="the lower limit: HBM and tensor engine at 100%%, collectives "
                          "without latency (--model estimates; a GEMM workload is always "
                          "the tile model's cycles, uncalibrated)")
    est.add_argument("--calibration", metavar="TOML",
                     help="calibration file (--model estimates; default: the packaged "
                          "presets/calibration.toml)")
    est.add_argument("--dtype", default=None, choices=sorted(DTYPE_BYTES),
                     help="data type of GEMM workloads (--workload, --gemm; default bf16)")
    est.add_argument("--link-bandwidth", metavar="FIGURE",
                     help="override the preset's NeuronLink bandwidth per chip, e.g. "
                          "'1.28 TB/s' (--model estimates: a GEMM workload runs on one chip)")
    est.add_argument("--scaling", action="store_true",
                     help="training: also print throughput and scaling efficiency from one "
                          "replica up to the cluster")
    est.add_argument("--max-chips", type=_positive_int,
                     help="largest chip count of the scaling sweep (train; default: the "
                          "cluster)")
    out = est.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of tables")
    out.add_argument("--csv", action="store_true", help="print the per-GEMM rows as CSV")
    est.add_argument("--plot", metavar="PNG", type=image_file,
                     help="write a plot (roofline and scaling for GEMMs; time terms for "
                          "models)")
    val = sub.add_parser(
        "validate", help="the model against every published measurement the project carries",
        description="For every published AWS figure in presets/published.toml: the "
                    "configuration, the published value and its source, the prediction, the "
                    "error and whether the point was used for calibration (points the model "
                    "does not predict yet are listed as 'not predicted' with the reason); then "
                    "the calibrated parameters.")
    val.add_argument("--refit", action="store_true",
                     help="fit the calibrated parameters afresh on the calibration points "
                          "(a few seconds) instead of reading presets/calibration.toml")
    val.add_argument("--write", metavar="TOML", type=output_file,
                     help="with --refit: write the fitted calibration to this file")
    val.add_argument("--calibration", metavar="TOML", help="calibration file to validate")
    val.add_argument("--points", metavar="TOML", help="published points file (default: "
                                                      "presets/published.toml)")
    val.add_argument("--plot", metavar="PNG", type=image_file,
                     help="write predicted against published")
    val.add_argument("--json", action="store_true", help="print JSON instead of tables")
    cl = sub.add_parser(
        "claims", help="published and claimed peaks and workload claims vs the model",
        description="For each preset, published or claimed peak vs what its configuration "
                    "computes from first principles; for each figure that does not add up, the "
                    "clock, array size or core count it would take. Then the press article's "
                    "workload claims checked with the calibrated model.")
    cl.add_argument("--claims", metavar="TOML", help="claims file (default: packaged claims)")
    cl.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


#: What ``--workload`` accepts, for the error messages.
WORKLOAD_FILES = ("a GEMM-list CSV (header name,M,K,N[,count]), a SCALE-Sim topology CSV "
                  "(header 'Layer name, IFMAP Height, ...' or 'Layer, M, N, K'), a sample ("
                  "{examples}) or a model preset ({models})")


def _workload_path(text):
    """The CSV file ``--workload`` names (pathlib.Path): the path itself, or the packaged
    sample of that name when the path does not exist; SpecError otherwise."""
    allowed = WORKLOAD_FILES.format(examples=", ".join(example_names()),
                                    models=", ".join(model_names()))
    path = Path(text)
    if path.is_dir():
        raise SpecError(text, "", "a folder, not a file", allowed)
    if not path.exists() and path.name == text and text in example_names():
        return examples_folder() / text
    if not text.lower().endswith(".csv"):
        raise SpecError(text, "", "not a CSV file nor a model preset", allowed)
    if not path.exists():
        raise SpecError(text, "", "file not found", allowed)
    return path


def _load_gemm_workload(args):
    if args.gemm:
        return single_gemm(*args.gemm)
    path = _workload_path(args.workload)
    try:
        header = path.read_text().splitlines()[:1]
    except UnicodeDecodeError:
        raise SpecError(args.workload, "", "not a text file", "a CSV file") from None
    squeezed = header[0].replace(" ", "").lower() if header else ""
    if squeezed.startswith("name,m,k,n"):
        return load_gemm_csv(path)
    if args.topology_format or any(squeezed.startswith(",".join(c.replace(" ", "").lower()
                                                              for c in columns[:2]))
                                   for columns in (CONV_COLUMNS, TOPOLOGY_GEMM_COLUMNS)):
        return load_scalesim_topology(path, args.topology_format)
    raise SpecError(args.workload, "header", f"{header[0] if header else ''!r} is not a "
                    f"workload header", "'name,M,K,N[,count]' (a GEMM list), "
                    "'Layer name, IFMAP Height, ...' (SCALE-Sim conv) or 'Layer, M, N, K' "
                    "(SCALE-Sim GEMM); or --topology-format to read it as SCALE-Sim anyway")


def _with_link(hw, args):
    if not args.link_bandwidth:
        return hw
    try:
        link = parse_quantity(args.link_bandwidth, "bandwidth")
    except ValueError as e:
        raise ValueError(f"--link-bandwidth: {e}") from None
    if link <= 0:
        raise ValueError(f"--link-bandwidth {args.link_bandwidth!r} is not allowed; allowed: "
                         f"a bandwidth above zero, e.g. '1.28 TB/s'")
    return replace(hw, chip=replace(hw.chip, link_bandwidth=link))


#: The estimate options that apply to some estimates only: option -> (default, the estimates
#: it applies to: ``gemm`` (--workload, --gemm) or a --phase of a --model estimate). Given to
#: another estimate, one is refused (:func:`check_scoped_options`) rather than ignored.
SCOPED_OPTIONS = {
    "phase": ("decode", ("decode", "prefill", "train")),
    "batch": (1, ("decode", "prefill")),
    "input_len": (128, ("decode", "prefill")),
    "output_len": (128, ("decode",)),
    "weights": ("bf16", ("decode", "prefill")),
    "context_attention": ("flash", ("decode", "prefill")),
    "kv_layout": ("kernel", ("decode",)),
    "global_batch": (1024, ("train",)),
    "seq": (None, ("train",)),
    "micro_batch": (1, ("train",)),
    "zero1": (False, ("train",)),
    "recompute": ("selective", ("train",)),
    "max_chips": (None, ("train",)),
    # A GEMM workload is the tile model's cycles on one chip: no calibration, no NeuronLink.
    "uncalibrated": (False, ("decode", "prefill", "train")),
    "calibration": (None, ("decode", "prefill", "train")),
    "link_bandwidth": (None, ("decode", "prefill", "train")),
    "dtype": ("bf16", ("gemm",)),
    "topology_format": (None, ("gemm",)),
}


def _scope_text(scopes):
    phases = [s for s in scopes if s != "gemm"]
    parts = ["GEMM workloads (--workload CSV, --gemm)"] if "gemm" in scopes else []
    if len(phases) == len(PHASES):
        parts.append("--model estimates")
    elif phases:
        parts.append(f"--model with --phase {' or '.join(phases)}")
    return " and ".join(parts)


def check_scoped_options(args):
    """Refuse an option of :data:`SCOPED_OPTIONS` given to an estimate it does not apply to
    (ValueError, one line naming the option, the estimate and where it applies), then fill
    in the defaults of those not given. ``args``: the estimate's argparse Namespace, with
    ``model`` set for a model estimate."""
    kind = (args.phase or SCOPED_OPTIONS["phase"][0]) if args.model else "gemm"
    for name, (default, scopes) in SCOPED_OPTIONS.items():
        value = getattr(args, name)
        if value is not None and kind not in scopes:
            flag = "--" + name.replace("_", "-")
            given = ("a GEMM workload" if not args.model else f"--phase {kind}"
                     if set(scopes) & set(PHASES) else "a --model estimate")
            raise ValueError(f"{flag} does not apply to {given}; it applies to "
                             f"{_scope_text(scopes)}; allowed: leave it out")
        if value is None:
            setattr(args, name, default)


def run_estimate(args):
    start = time.perf_counter()
    hw = _with_link(load_hardware(args.hw), args)
    if args.workload and (args.workload in model_names() or args.workload.endswith(".json")):
        args.model, args.workload = args.workload, None
    check_scoped_options(args)
    if args.model:
        return run_model(args, hw, start)
    if args.dtype not in hw.dtypes():     # the flag, not the preset file, is what is wrong
        raise ValueError(f"--dtype {args.dtype}: hardware {args.hw!r} has no {args.dtype} "
                         f"rate; allowed: {', '.join(hw.dtypes())}")
    if args.terms:
        raise ValueError("--terms applies to --model estimates; allowed: --model NAME --terms")
    workload = _load_gemm_workload(args)
    if (args.tp, args.pp, args.dp) != (1, 1, 1):
        raise ValueError("--tp, --pp and --dp apply to --model estimates; allowed: 1 for "
                         "GEMM workloads")
    est = step_estimate(hw, workload, args.dtype)
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps(to_json(est, elapsed), indent=2))
    elif args.csv:
        write_csv(est, sys.stdout)
    else:
        print_tables(est, elapsed)
    if args.plot:
        plot(est, args.plot)
        if not (args.json or args.csv):
            print(f"plot written to {args.plot}")
    return 0


def run_model(args, hw, start):
    model = load_transformer(args.model)
    if args.csv:
        raise ValueError("--csv applies to GEMM workloads; allowed for --model: --json or "
                         "the tables")
    if args.scaling and args.phase != "train":
        raise ValueError("--scaling applies to --phase train; allowed: --phase train "
                         "--scaling")
    cal = IDEAL if args.uncalibrated else load_calibration(args.calibration)
    layout = Layout(tp=args.tp, pp=args.pp, dp=args.dp, micro_batch=args.micro_batch,
                    zero1=args.zero1, recompute=args.recompute)
    if args.phase == "train":
        seq = args.seq or min(model.context, 8192)
        est = training(hw, model, layout, args.global_batch, seq, cal)
        config = {"global_batch": args.global_batch, "seq": seq}
        if args.scaling or args.plot:
            most = None if args.max_chips is None else args.max_chips * hw.chip.logical_cores
            est.scaling = training_scaling(hw, model, layout, args.global_batch, seq, cal,
                                           most)
    else:
        output_len = 1 if args.phase == "prefill" else args.output_len
        est = inference(hw, model, layout, args.batch, args.input_len, output_len,
                        args.weights, cal, args.context_attention, args.kv_layout)
        config = {"batch": args.batch, "input_len": args.input_len,
                  "output_len": args.output_len, "weights": args.weights}
    measured = []
    if not args.uncalibrated and args.calibration is None and not args.link_bandwidth:
        points = matching(load_points(), hw.name, model.name, layout, args.phase, **config)
        if points:
            measured = [r for r in validate(cal, points)
                        if args.phase != "prefill" or r.point.metric in ("ttft", "latency_p50")]
        for attention, kv_layout in sorted({published_stack(r.point, model) for r in measured}):
            if args.phase != "train" and (attention, kv_layout) != (args.context_attention,
                                                                     args.kv_layout):
                est.notes.append(f"AWS's row ran another stack: its errors are of the estimate "
                                 f"with --context-attention {attention} --kv-layout "
                                 f"{kv_layout}, as systolica validate costs it")
    elapsed = time.perf_counter() - start
    return _emit(args, lambda: llm_json(est, measured, elapsed),
                 lambda: print_llm(est, measured, elapsed, terms=args.terms),
                 lambda: plot_llm(est, args.plot))


def _emit(args, as_json, as_tables, draw):
    """Print JSON or tables, then write the plot if asked; exit status 0."""
    if args.json:
        print(json.dumps(as_json(), indent=2))
    else:
        as_tables()
    if args.plot:
        draw()
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


def run_validate(args):
    points = load_points(args.points)
    rms = None
    if args.write and not args.refit:
        raise ValueError("--write needs --refit; allowed: --refit --write FILE")
    if args.refit:
        cal, rms = fit(points)
        if args.write:
            Path(args.write).write_text(format_calibration(cal, rms))
    else:
        cal = load_calibration(args.calibration)
    rows = validate(cal, points)
    pairs = contradictions.find(points, cal, {r.point.key: r.predicted for r in rows})
    return _emit(args, lambda: validation_json(rows, cal, rms, pairs),
                 lambda: print_validation(rows, cal, rms, pairs),
                 lambda: plot_validation(rows, args.plot))


def hbm_limit_s(est):
    """Seconds to move every GEMM's bytes once at the chip's HBM bandwidth (lower limit)."""
    return sum(g.bytes for g in est.gemms) / est.hardware.chip.hbm_bandwidth


def to_json(est, elapsed=None):
    hw = est.hardware
    out = {
        "hardware": hw.name, "workload": est.workload.name, "dtype": est.dtype,
        "chips": est.chips, "tp": est.tp, "dp": est.dp,
        "step_s": est.step_s, "compute_s": est.compute_s, "tp_comm_s": est.tp_comm_s,
        "dp_comm_s": est.dp_comm_s, "hbm_limit_s": hbm_limit_s(est),
        "chip_peak_flops": est.chip_peak, "achieved_flops_per_chip": est.achieved_flops,
        "mfu": est.mfu, "memory_bytes_per_chip": est.memory_bytes, "fits_in_hbm": est.fits,
        "notes": est.notes, "wall_s": elapsed,
        "gemms": [gemm_row(g) for g in est.gemms],
    }
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


def _c(value):
    return "-" if value is None else f"{value:,}"


def print_tables(est, elapsed=None):
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
        # Only the GEMM's name may wrap: a shape or a figure split over lines misreads.
        table.add_column(col, justify=just, no_wrap=col != "GEMM")
    for g in est.gemms:
        x = g.gemm
        copies = f"{x.count}" + (f" x{x.repeat}" if x.repeat > 1 else "")
        table.add_row(x.name, f"{x.m} x {x.k} x {x.n}", copies, f"{g.flop / 1e9:,.2f}",
                      f"{g.intensity:,.1f}", _c(g.tile_cycles), _c(g.single_tile_cycles),
                      _c(g.scalesim_cycles), seconds(g.compute_s), seconds(g.memory_s), g.bound)
    console.print(table)
    summary = Table(title="Step", title_justify="left", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("")
    rows = [
        ("chips", f"{est.chips:,} (tp {est.tp} x dp {est.dp})"),
        ("step time", seconds(est.step_s)),
        ("  GEMMs (roofline)", seconds(est.compute_s)),
        ("  tensor-parallel AllReduce", seconds(est.tp_comm_s)),
        ("  data-parallel AllReduce", seconds(est.dp_comm_s)),
        ("HBM lower limit", f"{seconds(hbm_limit_s(est))} (all bytes once at "
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
    if elapsed is not None:
        rows.append(("computed in", f"{elapsed:.3f} s"))
    for r in rows:
        summary.add_row(*r)
    console.print(summary)
    for note in est.notes:
        console.print(f"note: {note}", highlight=False)

def plot(est, path):
    """Write a PNG: roofline with one point per GEMM."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    hw = est.hardware
    count = len(est.gemms)
    # One colour and marker pair per GEMM (tab20 x 4 markers: 80 distinct); the legend sits
    # beside the axes, in columns, so it never covers the roofline or a point.
    columns = 1 + (count - 1) // 24
    fig, axes = plt.subplots(1, 1, figsize=(6 + 2.4 * columns, 4.5), squeeze=False)
    ax = axes[0][0]
    colours = plt.get_cmap("tab10" if count <= 10 else "tab20")
    markers = "osD^"
    xs = np.array([g.intensity for g in est.gemms])
    lo, hi = max(xs.min() / 4, 1e-2), xs.max() * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    roof = np.minimum(est.chip_peak, hw.chip.hbm_bandwidth * grid) / 1e12
    ax.loglog(grid, roof, "k-", label="roofline (peak, HBM)")
    for i, g in enumerate(est.gemms):
        ax.loglog(g.intensity, g.flop / g.time_s / 1e12, linestyle="none",
                  marker=markers[(i // colours.N) % len(markers)],
                  color=colours(i % colours.N), label=g.gemm.name)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOPS per chip")
    ax.set_title(f"Roofline: {hw.chip.name}, {est.dtype}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              ncols=columns)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _json_number(value):
    """``value`` for JSON: None where it is NaN (a figure not published), which JSON has no
    literal for (``json.dumps`` would write the non-standard ``NaN``)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def run_claims(args):
    rows = all_rows(args.claims)
    work = workload_rows()
    generations = generation_rows()
    if args.json:
        print(json.dumps({
            "figures": [{"preset": r.preset, "subject": r.subject, "what": r.what,
                         "stated": r.stated_text, "stated_value": _json_number(r.stated),
                         "computed_value": _json_number(r.computed),
                         "difference": _json_number(r.difference),
                         "agrees": r.agrees, "would_take": r.would_take,
                         "source": r.source} for r in rows],
            "workloads": [{"subject": w.subject, "claim": w.claim,
                           "assumptions": w.assumptions, "computed": w.computed,
                           "adds_up": w.adds_up, "would_take": w.would_take,
                           "source": w.source, "values": w.values} for w in work],
            "generations": [{"figure": g.figure, "trainium2": g.old, "trainium3": g.new,
                             "factor": g.factor, "published_factor": g.published_factor,
                             "source": g.source} for g in generations]},
            indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Published and claimed figures vs first principles "
                        "(peak = rows x cols x 2 FLOP x MACs/PE/cycle x clock x cores)",
                  title_justify="left")
    # Computed figures never wrap; the prose columns wrap at a width each, so the table fits
    # in 160 columns.
    for col, width in (("preset", None), ("subject", 16), ("figure", 30), ("stated", 18),
                       ("computed", None), ("difference", None), ("adds up", None),
                       ("what it would take / note", 34)):
        table.add_column(col, no_wrap=width is None, max_width=width)
    for r in rows:
        diff = r.difference
        diff_text = "-" if diff is None or diff != diff else (
            f"{format_value(r.kind, diff)} ({diff / r.stated:+.1%})" if r.kind != "count"
            else f"{diff:+,.0f}")
        agrees = {True: "yes", False: "NO", None: "-"}[r.agrees]
        table.add_row(r.preset, r.subject, r.what, r.stated_text,
                      format_value(r.kind, r.computed), diff_text, agrees, r.would_take)
    console = Console()             # a terminal: its width; a file or pipe: 160 columns
    console = console if console.is_terminal else Console(width=160)
    console.print(table)
    wt = Table(title="Workload claims of the press article, with the calibrated model",
               title_justify="left")
    for col in ("subject", "claim", "assumptions", "model gives", "adds up",
                "what it would take / note"):
        wt.add_column(col, no_wrap=col == "adds up")
    for w in work:
        wt.add_row(w.subject, w.claim, w.assumptions, w.computed,
                   "yes" if w.adds_up else "NO", w.would_take)
    console.print(wt)
    gt = Table(title="Trainium3 against Trainium2 per chip (the presets' configurations; "
                     "AWS's published factor beside)", title_justify="left")
    for col in ("figure", "Trainium2", "Trainium3", "factor", "AWS's factor"):
        gt.add_column(col, no_wrap=True)
    for g in generations:
        gt.add_row(g.figure, format_value(g.kind, g.old), format_value(g.kind, g.new),
                   "-" if g.factor is None else f"{g.factor:.2f}x", g.published_factor)
    console.print(gt)
    return 0


def main(argv=None):
    """Entry point of the ``systolica`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse reads "--gemm -1,128,128" as an option followed by another option and says
    # only "expected one argument": give the value to --gemm so its own check explains it.
    for i in range(len(argv) - 1):
        if argv[i] == "--gemm" and argv[i + 1][:1] == "-" and argv[i + 1][1:2].isdigit():
            argv[i:i + 2] = [f"--gemm={argv[i + 1]}", ""]
    parser = build_parser()
    args, extra = parser.parse_known_args([a for a in argv if a != ""])
    if extra:       # named by the subcommand ("systolica validate: error: ..."), not "systolica"
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "estimate":
            status = run_estimate(args)
        elif args.command == "validate":
            status = run_validate(args)
        else:
            status = run_claims(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # stdout's reader went away (`systolica claims --json | head`): end quietly, as a
        # process ended by SIGPIPE; Python's flush at exit then writes to /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (SpecError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
