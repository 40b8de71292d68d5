"""``systolica.nki``: run NKI kernels (the Neuron Kernel Interface) on a NeuronCore model.

Kernels written against AWS's NKI run unchanged: :func:`install` registers the module names
``nki``, ``nki.language``, ``nki.isa`` and the older ``neuronxcc.nki`` ones. Every
instruction is executed eagerly in numpy (the tensor engine through
:func:`systolica.golden.nc_matmul`, bit-exact; the other engines in float32 with RNE outputs)
and recorded as an :class:`~systolica.nki.instructions.Instruction` for the engine timing
model.

- :func:`jit`, :func:`baremetal`, :func:`benchmark`: decorators; calling the kernel
  simulates it (``benchmark`` also prints the profile); ``kernel[grid](...)`` launches SPMD
  programs (``nl.program_id`` / ``nl.num_programs``).
- :func:`simulate` (NKI 0.6: ``nki.simulate(kernel)(*arrays)``) and :func:`simulate_kernel`
  (the older call): the outputs as numpy arrays.
- :func:`profile`: ``(outputs, profile)`` with the engine timing model's profile.
- :func:`run`: the outputs, the instruction list, warnings (what ``systolica nki run``
  uses).

See ``docs/nki.md`` for the supported names, the numerics and the checks.
"""

import functools
import inspect
import itertools
import os
import sys
import time
import traceback
import types
from dataclasses import dataclass, field

import numpy as np

from systolica.hdl.config import TileConfig

from . import _core
from . import isa as isa
from . import language as language
from ._core import NkiError, NkiWarning
from .instructions import ENGINES, Access, Instruction

__all__ = ["Access", "baremetal", "benchmark", "ENGINES", "install", "Instruction", "isa",
           "jit", "Kernel", "language", "NkiError", "NkiWarning", "profile", "run", "RunResult",
           "schedule", "simulate", "simulate_kernel"]


def schedule(instructions, target="trn2", **kwargs):
    """The engine timing model's profile of ``instructions`` (``systolica.nki.engines``;
    until it is merged, the instruction-counting stub)."""
    try:
        from .engines import schedule as engine_schedule
    except ImportError:
        from ._schedule_stub import schedule as engine_schedule
    return engine_schedule(instructions, target, **kwargs)


@dataclass
class RunResult:
    """One kernel run.

    Attributes
    ----------
    outputs : numpy.ndarray, tuple of them, or None
        The kernel's returned HBM tensors as numpy arrays.
    instructions : list of Instruction
        In program order.
    warnings : list of str
    rtl : dict or None
        ``tensor_engine="rtl"``: the RTL check's summary (matmuls, PSUM words compared,
        mismatches, wall seconds).
    written : list of str
        Names of the array arguments the kernel wrote (outputs passed in, older style).
    seconds : float
        Wall time of the kernel run (tracing and numerics), in seconds.
    golden_seconds : float
        The part of ``seconds`` spent in the golden tensor-engine model.
    cpu_seconds, golden_cpu_seconds : float
        The same as CPU time of this process (on a loaded machine wall time is longer).
    """

    outputs: object
    instructions: list
    warnings: list
    rtl: dict | None = None
    written: list = field(default_factory=list)
    seconds: float = 0.0
    golden_seconds: float = 0.0
    cpu_seconds: float = 0.0
    golden_cpu_seconds: float = 0.0


def _kernel_frame(error):
    """``file.py:LINE`` of the innermost traceback frame in kernel code."""
    prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})
    best = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.realpath(frame.filename)
        if _core._internal(frame.filename) or path.startswith(prefixes) or \
                frame.filename.startswith("<"):
            continue
        best = frame
    if best is None:
        return "<unknown>:0"
    return f"{os.path.basename(best.filename)}:{best.lineno}"


def _to_numpy(value):
    if isinstance(value, _core.Tensor):
        return value.read()
    if isinstance(value, tuple | list):
        return type(value)(_to_numpy(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    return value


def _execute(func, args, kwargs, *, grid=(), target="trn2", tensor_engine="golden",
             rows=128, cols=128, workers=1, scheduler=None):
    if tensor_engine == "rtl":
        TileConfig(rows, cols)      # the RTL tile's size: refused before the kernel runs
    start, cpu = time.perf_counter(), time.process_time()
    run_ = _core.Run(target, tensor_engine)
    run_.rtl_rows = rows
    previous = _core.set_run(run_)
    names = list(inspect.signature(func).parameters)
    try:
        inputs = []
        converted = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                t = _core.hbm_tensor(a, names[i] if i < len(names) else f"arg{i}")
                inputs.append((a, t))
                converted.append(t)
            else:
                converted.append(a)
        kw = {}
        for key, a in kwargs.items():
            if isinstance(a, np.ndarray):
                t = _core.hbm_tensor(a, key)
                inputs.append((a, t))
                kw[key] = t
            else:
                kw[key] = a
        run_.grid = tuple(int(g) for g in grid)
        result = None
        for ids in itertools.product(*(range(g) for g in run_.grid)):
            run_.program_ids = ids
            result = func(*converted, **kw)
        outputs = _to_numpy(result)
        written = []
        for array, t in inputs:
            if t.buffer.written and array.flags.writeable:
                array[...] = t.buffer.data
                written.append(t.buffer.name)
    except NkiError:
        raise
    except Exception as error:
        raise NkiError(f"{_kernel_frame(error)}: in kernel {func.__name__}: "
                       f"{type(error).__name__}: {error}") from None
    finally:
        _core.set_run(previous)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    rtl = None
    if tensor_engine == "rtl":
        from .rtl import check_matmuls
        try:
            rtl = check_matmuls(run_, rows=rows, cols=cols, workers=workers,
                                scheduler=scheduler)
        except NkiError:
            raise
        except Exception as error:      # the simulator missing, a build or run failing
            raise NkiError(f"RTL check ({rows} x {cols} tile): {type(error).__name__}: "
                           f"{str(error).splitlines()[0] if str(error) else ''}") from None
    return RunResult(outputs, run_.instructions, run_.warnings, rtl, written, seconds,
                     run_.golden_seconds, cpu, run_.golden_cpu_seconds)


def run(kernel, *args, grid=(), target="trn2", tensor_engine="golden", rows=128, cols=128,
        workers=1, scheduler=None, **kwargs):
    """Run ``kernel`` on numpy ``args`` and return a :class:`RunResult`.

    Parameters
    ----------
    kernel : a function or a :class:`Kernel`
    grid : tuple of int
        SPMD launch grid (``()``: one program).
    target : "trn1", "trn2" or "trn3"
    tensor_engine : "golden", "rtl" or "none"
        ``"rtl"``: every ``nc_matmul`` is also run on the Verilator tile of ``rows x cols``
        PEs and each PSUM word compared with the golden path (:mod:`systolica.nki.rtl`).
        ``"none"``: shapes only for TensorE: ``nc_matmul`` / ``nc_matmul_mx`` write zeros
        (no numerics; every check still runs and the trace is the same), for costing large
        kernels whose control flow does not depend on matmul values.
    workers, scheduler
        RTL only: spread the tile programs over a Dask cluster (``workers`` local processes,
        None for one per core, or the cluster at ``scheduler``); 1 runs them here.
    """
    func = kernel.func if isinstance(kernel, Kernel) else kernel
    grid = grid or getattr(kernel, "grid", ())
    return _execute(func, args, kwargs, grid=grid, target=target,
                    tensor_engine=tensor_engine, rows=rows, cols=cols, workers=workers,
                    scheduler=scheduler)


class Kernel:
    """A decorated NKI kernel: calling it simulates it and returns numpy outputs;
    ``kernel[grid]`` is an SPMD launch of it."""

    def __init__(self, func, grid=(), show_profile=False, **options):
        self.func = func
        self.grid = tuple(grid)
        self.show_profile = show_profile
        self.options = options
        self.benchmark_result = None
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        if _core.active() is not None:      # a kernel calling a kernel
            return self.func(*args, **kwargs)
        if not self.show_profile:
            return run(self, *args, **kwargs).outputs
        outputs, prof = profile(self)(*args, **kwargs)
        print(prof)
        self.benchmark_result = _BenchmarkResult(prof)
        return outputs

    def __getitem__(self, grid):
        grid = grid if isinstance(grid, tuple) else (grid,)
        return Kernel(self.func, grid, self.show_profile, **self.options)


class _Latency:
    def __init__(self, seconds):
        self.seconds = seconds

    def get_latency_percentile(self, _percentile):
        """The modelled latency in microseconds (every percentile: the model is
        deterministic)."""
        return self.seconds * 1e6


class _BenchmarkResult:
    """``kernel.benchmark_result`` after a :func:`benchmark` call."""

    def __init__(self, prof):
        self.profile = prof
        self.nc_latency = _Latency(prof.seconds)


def jit(func=None, **options):
    """``@nki.jit``: a :class:`Kernel` (the options, e.g. ``mode``, are accepted and
    ignored)."""
    if func is None:
        return lambda f: Kernel(f, **options)
    return Kernel(func, **options)


baremetal = jit


def benchmark(func=None, **options):
    """``@nki.benchmark(warmup=..., iters=...)``: a :class:`Kernel` that prints its profile
    when called and keeps it in ``kernel.benchmark_result``."""
    if func is None:
        return lambda f: Kernel(f, show_profile=True, **options)
    return Kernel(func, show_profile=True, **options)


def simulate(kernel, **options):
    """NKI 0.6's ``nki.simulate(kernel)``: a function of the kernel's numpy arguments that
    returns its outputs as numpy arrays. ``options``: ``target``, ``tensor_engine``, ``rows``,
    ``cols`` as :func:`run`."""
    return lambda *args, **kwargs: run(kernel, *args, **options, **kwargs).outputs


def simulate_kernel(kernel, *args, **kwargs):
    """The older ``nki.simulate_kernel(kernel, *arrays)``: the outputs (numpy arrays given as
    outputs are also written in place)."""
    return run(kernel, *args, **kwargs).outputs


def profile(kernel, target="trn2", tensor_engine="golden", rows=128, cols=128):
    """``profile(kernel, target)(*arrays) -> (outputs, profile)``: the outputs and the
    engine timing model's profile (:func:`schedule`)."""
    def call(*args, **kwargs):
        result = run(kernel, *args, target=target, tensor_engine=tensor_engine, rows=rows,
                     cols=cols, **kwargs)
        return result.outputs, schedule(result.instructions, target)
    return call


def _module(name, doc, **attrs):
    m = types.ModuleType(name, doc)
    m.__dict__.update(attrs)
    return m


def install():
    """Register ``nki``, ``nki.language``, ``nki.isa``, ``neuronxcc``, ``neuronxcc.nki``,
    ``neuronxcc.nki.language``, ``neuronxcc.nki.isa`` and ``neuronxcc.nki.typing`` in
    ``sys.modules`` so that kernel files written for AWS's toolchain import this model
    (replacing an installed ``nki``/``neuronxcc`` for this process). Returns the ``nki``
    module."""
    typing = _module("neuronxcc.nki.typing", "NKI type annotations",
                     tensor=_core.Tensor, NkiTensor=_core.Tensor)
    common = {k: globals()[k] for k in ("jit", "baremetal", "benchmark", "simulate",
                                        "simulate_kernel", "profile")}
    front = _module("nki", __doc__, language=language, isa=isa, typing=typing,
                    tensor=_core.Tensor, __path__=[], **common)
    old = _module("neuronxcc.nki", __doc__, language=language, isa=isa, typing=typing,
                  tensor=_core.Tensor, __path__=[], **common)
    sys.modules.update({
        "nki": front, "nki.language": language, "nki.isa": isa, "nki.typing": typing,
        "neuronxcc": _module("neuronxcc", "systolica's stand-in", nki=old, __path__=[]),
        "neuronxcc.nki": old, "neuronxcc.nki.language": language,
        "neuronxcc.nki.isa": isa, "neuronxcc.nki.typing": typing})
    return front
