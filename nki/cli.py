"""``systolica nki run KERNEL.py::NAME``: run an NKI kernel on the NeuronCore model.

The kernel file is imported after :func:`systolica.nki.install` (so it may ``import nki`` or
``from neuronxcc import nki``); its array arguments come from ``--arg NAME=SHAPE:DTYPE``
(seeded standard-normal values, ``--seed``) or an ``.npz`` file (``--inputs``), scalars from
``--arg NAME=VALUE``. It prints the engine profile (``systolica.nki.schedule``), the outputs,
the warnings and, with ``--reference module:function`` (called with the same inputs by name),
each output's max |error| and whether it is bit-exact. ``--tensor-engine rtl`` runs every
matmul again on the Verilator tile (``--rows``/``--cols``) and compares each PSUM word.

Exit status: 0 success, 1 a kernel error (one line naming the kernel line, the instruction
and the rule) or an RTL mismatch, 2 bad arguments.
"""

import argparse
import importlib
import importlib.util
import inspect
import json
import math
import os
import sys
import time

import ml_dtypes
import numpy as np

from systolica.hdl.config import TileConfig
from systolica.scaling.cli import image_file
from systolica.sim.options import plain_text, size_value

from . import NkiError, install, run, schedule
from ._core import TARGET_NAMES

#: ``--arg`` data type names -> numpy dtypes.
DTYPES = {name: np.dtype(t) for name, t in (
    ("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16), ("float32", np.float32),
    ("float8_e4m3", ml_dtypes.float8_e4m3), ("float8_e5m2", ml_dtypes.float8_e5m2),
    ("float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("int8", np.int8), ("int16", np.int16),
    ("int32", np.int32), ("uint8", np.uint8), ("uint16", np.uint16), ("uint32", np.uint32))}


class _Parser(argparse.ArgumentParser):
    """Errors as one line ``systolica nki: error: ...`` with exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser():
    """The ``systolica nki`` parser (argparse.ArgumentParser)."""
    p = _Parser(prog="systolica nki", description=plain_text(__doc__.split("\n\n")[0]),
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="example:\n  systolica nki run nki/kernels/matmul.py::matmul_blocked "
                       "--arg lhsT=1024x1024:bfloat16 --arg rhs=1024x2048:bfloat16 "
                       "--reference systolica.nki.reference:matmul")
    p.add_argument("action", choices=["run"], help="what to do (run)")
    p.add_argument("kernel", metavar="KERNEL.py::NAME",
                   help="the kernel file and the kernel function's name in it")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=SPEC",
                   help="an argument: NAME=SHAPE:DTYPE (e.g. lhsT=1024x1024:bfloat16; seeded "
                        f"random values; dtypes: {', '.join(DTYPES)}) or NAME=VALUE (a number)")
    p.add_argument("--inputs", metavar="FILE.npz", help="arrays by argument name")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--grid", default="", help="SPMD launch grid, e.g. 2 or 2x2 (default: one "
                                              "program)")
    p.add_argument("--target", choices=list(TARGET_NAMES), default="trn2",
                   help="NeuronCore target (a hardware preset): trn1 (v2), trn2 (v3, default) "
                        "or trn3 (v4: nc_matmul_mx, quantize_mx)")
    p.add_argument("--tensor-engine", choices=["golden", "rtl", "none"], default="golden",
                   help="golden (default); rtl: also run every matmul on the Verilator tile "
                        "and compare each PSUM word; none: shapes only (matmuls write zeros: "
                        "the profile without TensorE numerics)")
    p.add_argument("--rows", type=size_value, default=None,
                   help="RTL tile rows (default 128; --tensor-engine rtl only)")
    p.add_argument("--cols", type=size_value, default=None,
                   help="RTL tile columns (default 128; --tensor-engine rtl only)")
    p.add_argument("--workers", type=int, default=1,
                   help="RTL: Dask worker processes for the tile programs (default 1: in this "
                        "process; 0: one per core)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="RTL: run the tile programs on this Dask cluster")
    p.add_argument("--reference", metavar="MODULE:FUNCTION",
                   help="a function of the same inputs (by name) returning the expected "
                        "output(s)")
    p.add_argument("--trace", metavar="T.json", help="write the Perfetto / Chrome trace")
    p.add_argument("--timeline", metavar="T.png", type=image_file,
                   help="write the timeline picture (an image file: .png, .svg, .pdf, ...)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _shape(text):
    try:
        dims = tuple(int(d) for d in text.split("x"))
    except ValueError:
        dims = ()
    if not dims or min(dims) < 1:
        raise ValueError(f"shape {text!r} must be positive sizes joined by 'x', like 128x512")
    return dims


#: Elements of one random argument at most (2^28: 512 MiB of float16, a 16k x 16k matrix).
MAX_ELEMENTS = 1 << 28


def _random(shape, dtype, rng):
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"shape {'x'.join(map(str, shape))} has {math.prod(shape):,} elements; "
                         f"a random argument may have at most {MAX_ELEMENTS:,} (pass larger "
                         f"arrays with --inputs FILE.npz)")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -8), min(info.max, 8), size=shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def parse_args_specs(specs, inputs, seed):
    """``{name: value}`` from ``--arg`` specs and an ``.npz`` file's arrays."""
    values = dict(inputs)
    rng = np.random.default_rng(seed)
    given = set()
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--arg {spec!r} must be NAME=SHAPE:DTYPE or NAME=VALUE")
        if name in given:
            raise ValueError(f"--arg {name} is given twice; give each argument once")
        given.add(name)
        if ":" in text:
            shape, dtype = text.rsplit(":", 1)
            if dtype not in DTYPES:
                raise ValueError(f"--arg {name}: unknown dtype {dtype!r}; use one of "
                                 f"{', '.join(DTYPES)}")
            values[name] = _random(_shape(shape), DTYPES[dtype], rng)
        else:
            try:
                values[name] = int(text)
            except ValueError:
                try:
                    values[name] = float(text)
                except ValueError:
                    raise ValueError(f"--arg {name}={text!r}: give SHAPE:DTYPE or a "
                                     f"number") from None
    return values


def load_kernel(spec):
    """The kernel named by ``FILE.py::NAME`` (after :func:`install`)."""
    path, sep, name = spec.partition("::")
    if not sep or not name:
        raise ValueError(f"kernel {spec!r} must be FILE.py::NAME")
    if os.path.isdir(path):
        raise ValueError(f"kernel file {path!r} is a folder; give FILE.py::NAME")
    if not os.path.isfile(path):
        raise ValueError(f"kernel file {path!r} does not exist")
    install()
    module_name = "nki_kernel_" + os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None:
        raise ValueError(f"kernel file {path!r} is not a Python file (FILE.py)")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as error:
        raise ValueError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    except Exception as error:     # the kernel file's own code, run at import
        raise ValueError(f"{path}: importing it raised {type(error).__name__}: "
                         f"{error}") from None
    if not hasattr(module, name):
        raise ValueError(f"{path} has no kernel {name!r}")
    return getattr(module, name)


def _reference(spec, extra_paths=()):
    module, sep, name = spec.partition(":")
    if not sep:
        raise ValueError(f"--reference {spec!r} must be MODULE:FUNCTION")
    for folder in (os.getcwd(), *extra_paths):    # a reference beside the kernel or here
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"--reference {spec!r}: {error}") from None


def _call_reference(spec, reference, arguments):
    """The reference's outputs; a reference that raises is one line (ValueError)."""
    try:
        return reference(**arguments)
    except Exception as error:      # the user's reference function
        raise ValueError(f"the reference {spec} raised {type(error).__name__}: "
                         f"{error}") from None


def _inputs(path):
    """{name: array} of an ``.npz`` archive (numpy.savez); ValueError in one line otherwise."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise ValueError
            return dict(archive)
    except FileNotFoundError:
        raise ValueError(f"--inputs {path!r} does not exist") from None
    except (ValueError, OSError, EOFError, TypeError):
        raise ValueError(f"--inputs {path!r} is not an .npz archive of arrays by argument "
                         f"name (numpy.savez)") from None


def _named_outputs(outputs, written, values):
    if outputs is None:
        return {name: values[name] for name in written}
    if isinstance(outputs, tuple | list):
        return {f"out{i}": np.asarray(o) for i, o in enumerate(outputs)}
    return {"out": np.asarray(outputs)}


def _compare(outputs, expected):
    expected = expected if isinstance(expected, tuple | list) else (expected,)
    if len(expected) != len(outputs):
        raise ValueError(f"the reference returned {len(expected)} outputs, the kernel "
                         f"{len(outputs)}")
    rows = []
    for (name, out), ref in zip(outputs.items(), expected, strict=True):
        ref = np.asarray(ref)
        if ref.shape != out.shape:
            rows.append({"output": name, "error": f"shape {list(out.shape)} vs reference "
                                                  f"{list(ref.shape)}", "bit_exact": False})
            continue
        err = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        same = np.array_equal(ref.astype(out.dtype).view(np.uint8), out.view(np.uint8))
        rows.append({"output": name, "max_abs_error": float(np.nanmax(err)) if err.size
                     else 0.0, "bit_exact": bool(same)})
    return rows


def main(argv=None):
    """Entry point of ``systolica nki``; returns the exit status (int)."""
    p = parser()
    args = p.parse_args(argv)
    try:
        if args.tensor_engine != "rtl" and (args.rows is not None or args.cols is not None):
            raise ValueError("--rows and --cols size the RTL tile: they go with "
                             "--tensor-engine rtl")
        args.rows = 128 if args.rows is None else args.rows     # --rows 0 is refused, not 128
        args.cols = 128 if args.cols is None else args.cols
        if args.tensor_engine == "rtl":
            TileConfig(args.rows, args.cols)    # the tile's size, checked in its one place
        if args.workers < 0:
            raise ValueError(f"--workers must be at least 0, not {args.workers}")
        if args.seed < 0:
            raise ValueError(f"--seed must be a non-negative integer, not {args.seed}")
        try:
            grid = _shape(args.grid) if args.grid else ()
        except ValueError:
            raise ValueError(f"--grid {args.grid!r} must be positive program counts joined "
                             f"by 'x', like 2 or 2x2") from None
        for path in (args.trace, args.timeline):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"folder of {path!r} does not exist")
        inputs = _inputs(args.inputs) if args.inputs else {}
        values = parse_args_specs(args.arg, inputs, args.seed)
        kernel = load_kernel(args.kernel)
        func = getattr(kernel, "func", kernel)
        params = list(inspect.signature(func).parameters.values())
        missing = [q.name for q in params if q.name not in values and
                   q.default is inspect.Parameter.empty]
        unknown = sorted(set(values) - {q.name for q in params})
        if missing or unknown:
            raise ValueError(f"kernel {func.__name__}({', '.join(q.name for q in params)}): "
                             + (f"missing --arg {', '.join(missing)}" if missing else
                                f"no parameter {', '.join(unknown)}"))
        kernel_folder = os.path.dirname(os.path.abspath(args.kernel.partition("::")[0]))
        reference = _reference(args.reference, (kernel_folder,)) if args.reference else None
    except (ValueError, OSError) as error:
        p.error(str(error))
    call = {q.name: values[q.name] for q in params if q.name in values}
    originals = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in call.items()}
    try:
        result = run(kernel, grid=grid, target=args.target, tensor_engine=args.tensor_engine,
                     rows=args.rows, cols=args.cols, workers=args.workers or None,
                     scheduler=args.scheduler, **call)
        start, cpu = time.perf_counter(), time.process_time()
        prof = schedule(result.instructions, args.target)
        schedule_seconds = time.perf_counter() - start
        schedule_cpu = time.process_time() - cpu
        outputs = _named_outputs(result.outputs, result.written, call)
        comparison = _compare(outputs, _call_reference(args.reference, reference, originals)) \
            if reference else []
    except NkiError as error:
        print(f"systolica nki: error: {error}", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"systolica nki: error: {error}", file=sys.stderr)
        return 1
    try:
        if args.trace:
            prof.write_trace(args.trace)
        if args.timeline:
            prof.plot(args.timeline)
    except (OSError, NotImplementedError) as error:
        print(f"systolica nki: error: {error}", file=sys.stderr)
        return 1
    wall = {"run": result.seconds, "golden_matmul": result.golden_seconds,
            "tracing_and_other_engines": result.seconds - result.golden_seconds,
            "schedule": schedule_seconds}
    cpu_split = {"run": result.cpu_seconds, "golden_matmul": result.golden_cpu_seconds,
                 "tracing_and_other_engines": result.cpu_seconds - result.golden_cpu_seconds,
                 "schedule": schedule_cpu}
    report = {"kernel": args.kernel, "target": args.target,
              "tensor_engine": args.tensor_engine, "instructions": len(result.instructions),
              "outputs": [{"name": n, "shape": list(o.shape), "dtype": o.dtype.name}
                          for n, o in outputs.items()],
              "reference": comparison, "warnings": result.warnings, "rtl": result.rtl,
              "wall_seconds": wall, "cpu_seconds": cpu_split, "profile": prof.to_json()}
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(f"{args.kernel} on {args.target}: {len(result.instructions)} instructions")
        print(prof)
        for o in report["outputs"]:
            print(f"output {o['name']}: {o['shape']} {o['dtype']}")
        for row in comparison:
            if "error" in row:
                print(f"  {row['output']}: {row['error']}")
            else:
                print(f"  {row['output']}: max |error| {row['max_abs_error']:.3g}, "
                      f"{'bit-exact' if row['bit_exact'] else 'not bit-exact'}")
        for w in result.warnings:
            print(f"warning: {w}")
        if result.rtl:
            r = result.rtl
            print(f"RTL tile {r['rows']} x {r['cols']}: {r['matmuls']} matmuls "
                  f"({r['tile_matmuls']} tile commands), {r['words']} PSUM words compared"
                  + (f"; {r['transposes']} transposes ({r['transpose_commands']} tile "
                     f"commands), {r['transpose_words']} PSUM elements compared"
                     if r.get("transposes") else "")
                  + (f"; {r['mx_matmuls']} nc_matmul_mx ({r['mx_tile_matmuls']} tile "
                     f"commands), {r['mx_words']} PSUM words compared"
                     if r.get("mx_matmuls") else "")
                  + f"; 0 mismatches, {r['seconds']:.1f} s")
        print("wall: " + ", ".join(f"{k} {v:.2f} s" for k, v in wall.items()))
        print("cpu:  " + ", ".join(f"{k} {v:.2f} s" for k, v in cpu_split.items()))
    if any("error" in row for row in comparison):
        print("systolica nki: error: an output's shape differs from the reference's",
              file=sys.stderr)
        return 1
    return 0
