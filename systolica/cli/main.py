"""The ``systolica`` command (and ``python -m systolica``): one entry point, a subcommand per
tool.

``systolica sim`` runs a workload on the RTL tile (:mod:`systolica.cli.simulate`),
``waves`` traces it (:mod:`systolica.cli.waves`), ``bench``, ``regress``, ``cells`` and
``minilm-speedup`` measure the tile (:mod:`systolica.cli.bench`,
:mod:`systolica.cli.regress`, :mod:`systolica.cli.cells`,
:mod:`systolica.cli.minilm_speedup`), and ``estimate``, ``validate`` and ``claims`` are
the scaling layer's (:mod:`systolica.scaling.cli`). Each subcommand has ``--help`` and
``--json``. The older entry points (``python -m systolica.sim``, ``python -m
systolica.cli.bench``, ``python -m systolica.scaling``, ...) still work and run the same
code.

Exit status: the subcommand's (0 success, 1 a failed check, 2 bad arguments or a missing
tool); 2 for an unknown subcommand.
"""

import argparse
import importlib
import os
import sys

from systolica.sim.builder.errors import BuildFolderError
from systolica.sim.options import OneLineParser

#: Subcommand -> (module, function, one-line help, whether the function takes the
#: subcommand's own name first, as the scaling layer's parser does).
COMMANDS = {
    "sim": ("systolica.cli.simulate", "main",
            "run a workload on the RTL tile (the real model or random matmuls), check every "
            "result against the golden model and report; --timeline/--trace draw it", False),
    "waves": ("systolica.cli.waves", "main",
              "the random workload (or one regression test) traced: waveform + GTKWave save "
              "file", False),
    "bench": ("systolica.cli.bench", "main",
              "build and simulation speed from 8 x 8 to 128 x 128, the tile's throughput",
              False),
    "regress": ("systolica.cli.regress", "main",
                "the long seeded cocotb regression on one tile (>= 10,000,000 BF16 MACs)",
                False),
    "cells": ("systolica.cli.cells", "main",
              "the PE's cost in Yosys cells: INT8 only, + BF16, + every float type, + FP8 "
              "double-row, + TF32/FP32, + MX", False),
    "minilm-speedup": ("systolica.cli.minilm_speedup", "main",
                       "all MiniLM layers on the local Dask cluster and serially: wall times",
                       False),
    "fuzz": ("systolica.verif.fuzz", "main",
             "command-stream fuzzer: seeded random programs, every command accounted for",
             False),
    "exhaustive": ("systolica.verif.exhaustive", "main",
                   "exhaustive checks of both RTL multipliers (every type pairing) and "
                   "the FP32 adder", False),
    "mutants": ("systolica.verif.mutants", "main",
                "mutation score: Yosys mutants of the tile against the kill-set", False),
    "coverage": ("systolica.verif.coverage", "main",
                 "functional coverage: fuzz sample, merge the databases, report the bins",
                 False),
    "rtl-coverage": ("systolica.verif.rtlcov", "main",
                     "Verilator line and toggle coverage per hdl module", False),
    "nki": ("systolica.nki.cli", "main",
            "run an NKI kernel on the NeuronCore model: outputs, checks, engine profile",
            False),
    "docs-table": ("systolica.cli.docs_table", "main",
                   "write a generated table of docs/ between its hash markers", False),
    "estimate": ("systolica.scaling.cli", "main",
                 "scaling estimate of a model or GEMM workload on a hardware preset", True),
    "validate": ("systolica.scaling.cli", "main",
                 "the scaling model against every published measurement the project carries",
                 True),
    "claims": ("systolica.scaling.cli", "main",
               "published and claimed peaks and workload claims vs the model", True),
}


def parser():
    """The top-level parser (argparse.ArgumentParser): ``--help`` lists the subcommands."""
    p = OneLineParser(
        prog="systolica",
        description="Systolica: an RTL-level model of a NeuronCore-class tensor-engine tile "
                    "(INT8, BF16, FP16, FP8 and FP8 double-row; TF32/FP32 and MXFP8/MXFP4 "
                    "as generation options). 'systolica COMMAND --help' describes each "
                    "command.",
        epilog="examples:\n"
               "  systolica sim --workload random --rows 8 --cols 8 --timeline run.png "
               "--trace run.json\n"
               "  systolica sim --rows 8 --cols 8          # all-MiniLM-L6-v2 layer 0\n"
               "  systolica waves --sim icarus --rows 4 --cols 4\n"
               "  systolica estimate --hw trn1 --model llama2-70b --tp 32\n"
               "  systolica claims --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-V", "--version", action="version", version=f"systolica {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (_, _, text, _) in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return p


def _version():
    """The installed distribution's version (str), or "unknown" outside an install."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("systolica")
    except PackageNotFoundError:
        return "unknown"


def quiet_broken_pipe(run):
    """Call ``run()`` and return its exit status; when stdout's reader has gone away
    (``systolica claims --json | head``), end quietly with status 141 (as a shell reports a
    process ended by SIGPIPE) instead of a traceback or an "[Errno 32] Broken pipe" line; on
    Ctrl-C, print ``interrupted`` and return 130 (128 + SIGINT, as a shell reports it)."""
    try:
        status = run()
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        # Ctrl-C: one line, not the traceback of wherever the run was (the run folders of an
        # interrupted simulation are removed on the way out, see systolica.sim.api.runs).
        print("interrupted", file=sys.stderr)
        return 130
    except BuildFolderError as error:
        # $SYSTOLICA_BUILD_DIR (or the default folder) unusable, found wherever the command
        # first needs it; a --build-dir given on the command line is refused while parsing.
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that is silent too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _missing_library(command, error):
    """One line naming the pip command that installs an optional library ``command`` needs
    (``systolica coverage`` from a wheel installed without the ``verif`` extra); exit status
    2. A module that is not one of the optional libraries is a real fault: re-raised."""
    from systolica.sim.builder.errors import OPTIONAL_MODULES, pip_install

    top = (error.name or "").split(".")[0]
    if top not in OPTIONAL_MODULES:
        raise error
    print(f"error: systolica {command} needs the Python package {top!r}, which is not "
          f"installed; install it with '{pip_install(OPTIONAL_MODULES[top])}'",
          file=sys.stderr)
    return 2


def main(argv=None):
    """Entry point of ``systolica``; returns the exit status (int).

    ``argv`` (list of str, default ``sys.argv[1:]``): the subcommand's name, then its own
    arguments, which go to that subcommand's ``main`` unchanged.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        module, function, _, named = COMMANDS[argv[0]]
        try:
            run = getattr(importlib.import_module(module), function)
        except ModuleNotFoundError as error:
            return _missing_library(argv[0], error)
        return quiet_broken_pipe(lambda: run(argv if named else argv[1:]))
    p = parser()
    if not argv:
        p.error(f"a command is needed, one of: {', '.join(COMMANDS)}")
    p.parse_args(argv)      # --help, or a one-line error for an unknown command
    p.error(f"unknown command {argv[0]!r}; choose one of: {', '.join(COMMANDS)}")
    return 2    # not reached: error() exits


if __name__ == "__main__":
    sys.exit(main())
