"""Build a tile configuration for a simulator and run cocotb test modules on it.

Build folders: ``<build_root>/verilog/<label>-<hash>`` holds a configuration's ``tile.v``
and ``ports.json`` (:func:`verilog_folder`); ``<build_root>/<label>-<simulator...>-<hash>``
the simulator build, named by the :class:`~systolica.hdl.config.TileConfig` from a hash of
the generated Verilog and every build option (``TileConfig.folder_name``). Each
configuration is built once and reused: an edit of ``hdl/`` that leaves the Verilog as it was
(a docstring) regenerates but does not rebuild, and two configurations never share a folder.
Nothing parses a folder's name back. A file lock makes that safe when several processes
(``pytest -n auto``) ask for the same configuration.
"""

import fcntl
import hashlib
import json
import logging
import os
import shlex
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from systolica.hdl.config import TileConfig
from systolica.hdl.layouts import (
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
)
from systolica.sim.builder.errors import (
    BuildFolderError,
    SimulationError,
    build_failure,
)
from systolica.sim.builder.generate import BLOCK_MODULE, TOPLEVEL, grid_block, write_configuration
from systolica.sim.builder.toolchain import (
    FOLDER_ALLOWED,
    check_simulator_name,
    check_wave_support,
    cxx_compiler,
    folder_problem,
    prepare_environment,
)
from systolica.tb import protocol
from systolica.tb.bulk import HARNESS, HARNESS_TOPLEVEL

#: Timescale passed to every build (Amaranth emits none).
TIMESCALE = ("1ns", "1ps")
#: Verilator options: Amaranth's Verilog trips width and style lint warnings that are benign.
#: What the testbench may see through VPI is set by :func:`public_control`, not by options.
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style")
#: Environment variable with more Verilator options for every build (split like a shell
#: command line), for measuring simulator options (docs/benchmarks.md); part of the build
#: folder's name, so each set of options builds its own folder.
EXTRA_ARGS_ENV = "SYSTOLICA_VERILATOR_ARGS"


def verilator_args():
    """The Verilator options of a build (tuple of str): :data:`VERILATOR_ARGS`, then those
    of ``$SYSTOLICA_VERILATOR_ARGS``.

    Raises
    ------
    ValueError
        If ``$SYSTOLICA_VERILATOR_ARGS`` does not split (an unclosed quote).
    """
    text = os.environ.get(EXTRA_ARGS_ENV, "")
    try:
        return VERILATOR_ARGS + tuple(shlex.split(text))
    except ValueError as error:
        raise ValueError(f"{EXTRA_ARGS_ENV} must split like a shell command line "
                         f"({error}), not {text!r}") from None
#: Waveform formats a waves build can write.
WAVE_FORMATS = ("fst", "vcd")


def waveform_name(wave_format="fst"):
    """The file name every run's waveform gets, whichever simulator wrote it (str):
    ``waves.fst`` or ``waves.vcd``."""
    return f"waves.{wave_format}"


def default_build_root():
    """Where builds go unless told (pathlib.Path, absolute): ``$SYSTOLICA_BUILD_DIR``; else
    the ``build/`` folder of the source checkout this package runs from (an editable
    install, as ``make venv`` makes: the same folder whatever the current directory); else
    (an installed wheel) ``$XDG_CACHE_HOME/systolica/build``, by default
    ``~/.cache/systolica/build``."""
    if os.environ.get("SYSTOLICA_BUILD_DIR"):
        return Path(os.environ["SYSTOLICA_BUILD_DIR"]).resolve()
    checkout = Path(__file__).resolve().parents[2]   # sim/builder/runner.py
    if (checkout / "pyproject.toml").is_file() and (checkout / "hdl").is_dir():
        return checkout / "build"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return (Path(cache) / "systolica" / "build").resolve()


def build_folder(build_root=None):
    """The build folder to use (pathlib.Path, absolute): ``build_root`` (str or Path), else
    :func:`default_build_root`.

    Raises BuildFolderError, a ValueError (one line naming where the path came from and
    why), when it cannot be a build folder
    (:func:`~systolica.sim.builder.toolchain.folder_problem`: a part of it is a file, or it
    is not writable or cannot be created): the build would otherwise fail deep inside
    ``mkdir``."""
    if build_root is not None:
        root, origin = Path(build_root).expanduser().resolve(), "the build folder"
    else:
        root = default_build_root()
        origin = ("SYSTOLICA_BUILD_DIR" if os.environ.get("SYSTOLICA_BUILD_DIR") else
                  "the default build folder")
    problem = folder_problem(root)
    if problem is not None:
        raise BuildFolderError(f"{origin} {str(root)!r} cannot be used: {problem}; "
                         f"allowed: {FOLDER_ALLOWED}")
    return root


@contextmanager
def _runner_environment(makeflags=""):
    """Hide WAVES and GUI from cocotb's runner while it runs; add ``makeflags`` (str) to
    ``MAKEFLAGS`` meanwhile.

    cocotb's runner lets those environment variables override the ``waves`` argument, so a
    ``WAVES=0`` exported by ``make`` would silently build or run without tracing (and a
    ``WAVES=1`` would trace into the plain build). This package decides from its own
    arguments.
    """
    saved = {name: os.environ.pop(name) for name in ("WAVES", "GUI") if name in os.environ}
    flags = os.environ.get("MAKEFLAGS")
    if makeflags:
        os.environ["MAKEFLAGS"] = f"{flags or ''} {makeflags}".strip()
    try:
        yield
    finally:
        os.environ.update(saved)
        if flags is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = flags


def hierarchical_makeflags(jobs=None):
    """``MAKEFLAGS`` text (str) for a Verilator build with hierarchical blocks: its own make
    runs serially (the build passes ``--build-jobs 1``) and the makes it starts, which
    compile the C++ of each block and of the top, run ``jobs`` (default: every CPU) compiles
    at once.

    Why: Verilator's hierarchical makefile (``Vtop_hier.mk``) verilates a block with one
    rule for two targets (the block's ``.sv`` wrapper and its ``.mk``); under ``make -j``
    GNU make runs such a rule once for each target, both at the same time (GNU make manual,
    "Multiple Targets in a Rule": independent targets), so two Verilator runs write the same
    files while the next steps read them. A 128 x 128 build failed in CI that way (its log
    shows the block verilated twice); a serial make verilates it once.
    """
    return rf"MAKE=make\ -j{jobs or os.cpu_count() or 1}"


@contextmanager
def locked(path):
    """Hold an exclusive file lock on ``path`` (created if missing) for the ``with`` block,
    so that processes sharing a build folder build one thing once. Yields the seconds spent
    waiting for another holder (float; 0.0 when the lock was free)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        waited = 0.0
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            started = time.perf_counter()
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = time.perf_counter() - started
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Build:
    """A built tile configuration.

    Attributes
    ----------
    config : systolica.hdl.config.TileConfig
        The tile (size, type set, PSUM, queue).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    waves : bool
        Whether the build can trace.
    verilog : pathlib.Path
        Generated Verilog.
    ports : pathlib.Path
        Port metadata JSON.
    directory : pathlib.Path
        Simulator build folder (named by :meth:`~systolica.hdl.config.TileConfig.folder_name`).
    seconds : float
        Wall time this call spent generating and building, or waiting while another process
        generated or built it (0 when the build was there), in seconds.
    wave_format : str
        ``"fst"`` or ``"vcd"``: what a waves build writes.
    harness_depth : int or None
        ``None`` for the bare tile (top ``systolica_tile``, driven cycle by cycle from Python);
        else the memory depth of the bulk-stimulus harness around it (top
        ``systolica_harness``, :mod:`systolica.tb.bulk`).
    """

    config: TileConfig
    simulator: str
    waves: bool
    verilog: Path
    ports: Path
    directory: Path
    seconds: float
    wave_format: str = "fst"
    harness_depth: int | None = None

    @property
    def rows(self):
        """Partition rows of the tile (int)."""
        return self.config.rows

    @property
    def cols(self):
        """Columns of the tile (int)."""
        return self.config.cols

    @property
    def toplevel(self):
        """Top module of this build (str)."""
        return TOPLEVEL if self.harness_depth is None else HARNESS_TOPLEVEL

    def run_tests(self, test_module, test_dir, **options):
        """Start the simulator on this build: :func:`run_tests` (how the bulk harness's
        runner, :func:`systolica.tb.harness.run_harness`, starts it without importing this
        layer)."""
        return run_tests(self, test_module, test_dir, **options)


def verilog_folder(config, root, block):
    """Where the Verilog of ``config`` (with grid ``block``) is generated (pathlib.Path):
    ``<root>/verilog/<label>-<hash of the configuration and block>``."""
    key = hashlib.sha256(repr((config, block)).encode()).hexdigest()[:12]
    return root / "verilog" / f"{config.label}-{key}"


def build(config, simulator="verilator", *, waves=False, build_root=None,
          wave_format="fst", harness_depth=None):
    """Generate and build the tile of ``config`` for ``simulator`` (cached).

    The Verilog goes to :func:`verilog_folder`; the simulator build to
    ``<build_root>/<config.folder_name(...)>``: the configuration's label (``8x8-int8+bf16``),
    the simulator and options, and a hash of the Verilog and every build option. With
    ``waves``, ``wave_format`` (``"fst"`` or ``"vcd"``) is what the runs write. With
    ``harness_depth``, the tile is built inside the bulk-stimulus harness with memories of
    that many beats.

    Parameters
    ----------
    config : systolica.hdl.config.TileConfig
        The tile (validated when it was made).

    Returns
    -------
    Build

    Raises
    ------
    TypeError
        If ``config`` is not a TileConfig.
    ValueError
        If the simulator name or ``wave_format`` is unknown.
    SimulatorNotFoundError
        If the simulator or its build tools are missing.
    BuildError
        If Verilog generation or the simulator build fails (the message names the log).
    """
    if not isinstance(config, TileConfig):
        raise TypeError(f"config must be a TileConfig, not {type(config).__name__}")
    check_simulator_name(simulator)
    if wave_format not in WAVE_FORMATS:
        raise ValueError(f"unknown waveform format {wave_format!r}; choose one of: "
                         f"{', '.join(WAVE_FORMATS)}")
    prepare_environment(simulator)
    if waves and wave_format == "fst":
        check_wave_support(simulator)
    root = build_folder(build_root)
    tag = simulator + (("-waves" + ("" if wave_format == "fst" else f"-{wave_format}"))
                       if waves else "")
    if harness_depth is not None:
        tag += f"-bulk{harness_depth}"
    started = time.perf_counter()
    block = grid_block(config.rows, config.cols)
    generated = verilog_folder(config, root, block)
    with locked(generated / ".lock") as generation_waited:
        verilog, ports = write_configuration(config, generated, block)
    public = hashlib.sha256(_public_control_for(verilog, harness_depth).encode())
    options = {"simulator": simulator, "waves": waves, "wave_format": wave_format,
               "cxx": cxx_compiler() if simulator == "verilator" else None,
               "args": " ".join(verilator_args()), "public": public.hexdigest()[:16],
               "block": block, "harness_depth": harness_depth}
    if harness_depth is not None:
        options["harness"] = hashlib.sha256(HARNESS.read_bytes()).hexdigest()[:16]
    directory = root / config.folder_name(verilog.read_bytes(), options, tag)
    result = Build(config, simulator, waves, verilog, ports, directory, 0.0, wave_format,
                   harness_depth)
    with locked(directory / ".lock") as waited:
        # The folder's name holds every option; the stamp says the build in it finished.
        stamp = directory / "systolica.stamp"
        if stamp.is_file():
            # Another process's generation and build of it (a worker beside this one), waited
            # for on the two locks, is build time here too (it was counted as host time, and
            # made the first time-left estimate of a fresh `make sim` six times too long).
            waited = generation_waited or waited
            return replace(result, seconds=time.perf_counter() - started if waited else 0.0)
        # A build takes seconds at 8 x 8 and minutes at full size: say so instead of a silence.
        print(f"systolica: building the {config.describe()} for {simulator} in {directory} "
              f"(first use of this configuration; later runs reuse it) ...", file=sys.stderr,
              flush=True)
        _run_build(simulator, verilog, directory, waves and wave_format == "fst", waves,
                   harness_depth, block, config=config)
        stamp.write_text(json.dumps({"config": repr(config), **options}) + "\n")
    return replace(result, seconds=time.perf_counter() - started)


def _runner(simulator, wave_format="fst"):
    """A cocotb runner for ``simulator``; Verilator's drops ``--public-flat-rw``.

    Icarus's runner always asks ``vvp`` for FST; with ``wave_format="vcd"`` it asks for VCD.

    cocotb's Verilator runner makes every signal VPI-visible and writable, which made the
    C++ build of a 16 x 16 tile about 4x slower here and its simulation slower still; the
    testbench only touches top-level signals, so :func:`public_control` makes just those
    visible. Waveform tracing does not depend on it.
    """
    from cocotb_tools.runner import Verilator, get_runner

    if simulator == "icarus" and wave_format == "vcd":
        from cocotb_tools.runner import Icarus

        class VcdIcarus(Icarus):
            def _test_command(self):
                commands = super()._test_command()
                commands[0] = ["-vcd" if arg == "-fst" else arg for arg in commands[0]]
                return commands

        return VcdIcarus()
    if simulator != "verilator":
        return get_runner(simulator)

    class PortsOnlyVerilator(Verilator):
        def _build_command(self):
            commands = super()._build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

    return PortsOnlyVerilator()


def public_control(toplevel, writable):
    """Text of the Verilator control file that sets what VPI sees of ``toplevel``.

    Every signal of the top-level module is readable (``public_flat_rd``); only the
    ``writable`` ones (the inputs the testbench drives: str names) are ``public_flat_rw``.
    Verilator re-evaluates all logic that depends on a writable public signal in its
    input-combinational region on every ``eval()`` (twice a clock cycle): with the whole top
    level writable (``--public-depth 1``), every PE's datapath was evaluated three times a
    cycle instead of once, and a 16 x 16 BF16 tile ran at about 60 % of the speed it runs at
    now. Nothing below the top level is visible.
    """
    lines = ["`verilator_config", f'public_flat_rd -module "{toplevel}" -var "*"']
    lines += [f'public_flat_rw -module "{toplevel}" -var "{name}"' for name in writable]
    return "\n".join(lines) + "\n"


def _public_control_for(verilog, harness_depth):
    """:func:`public_control` text for a build of ``verilog`` (with the bulk harness when
    ``harness_depth`` is set: it drives the tile itself, so only its clock and reset)."""
    if harness_depth is not None:
        return public_control(HARNESS_TOPLEVEL, ("clk", "rst"))
    ports = json.loads((Path(verilog).parent / "ports.json").read_text())["ports"]
    return public_control(TOPLEVEL, [name for name, port in ports.items()
                                     if port["direction"] == "in"])


def _run_build(simulator, verilog, directory, fst, waves, harness_depth=None, block=None,
               extra_args=(), config=None):
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "build.log"
    sources = [verilog]
    toplevel, parameters = TOPLEVEL, {}
    if harness_depth is not None:
        sources.append(HARNESS)
        toplevel = HARNESS_TOPLEVEL
        parameters = {"ROWS": config.rows, "COLS": config.cols, "DEPTH": harness_depth,
                      "CW": command_layout().size, "LW": config.operand_width,
                      "SW": stationary_layout(config.cols, config.operand_width,
                                              config.mx).size,
                      "MW": moving_layout(config.rows, config.operand_width, config.mx).size,
                      "RW": result_layout(config.cols).size}
    args = (list(verilator_args()) + list(extra_args)) if simulator == "verilator" else []
    if simulator == "verilator":
        from cocotb_tools.runner import VerilatorControlFile

        public = directory / "public.vlt"
        public.write_text(_public_control_for(verilog, harness_depth))
        sources.insert(0, VerilatorControlFile(public))
    if simulator == "verilator" and fst:
        args.append("--trace-fst")
    if simulator == "verilator" and block is not None:
        # Verilate the B x B sub-array once as a hierarchical block: a flat 128 x 128 BF16
        # tile needed more than 13 GB and kept growing. Verilator then builds the block
        # itself (--build, its own make serial: hierarchical_makeflags); cocotb's make step
        # finds it built.
        control = directory / "hier_blocks.vlt"
        control.write_text(f'`verilator_config\nhier_block -module "{BLOCK_MODULE}"\n')
        sources.insert(0, VerilatorControlFile(control))
        args += ["--hierarchical", "--build", "--build-jobs", "1"]
    runner = _runner(simulator)
    logging.getLogger("cocotb").setLevel(logging.WARNING)
    hierarchical = simulator == "verilator" and block is not None
    try:
        with _runner_environment(hierarchical_makeflags() if hierarchical else ""):
            runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=directory,
                         build_args=args, timescale=TIMESCALE, waves=waves, always=True,
                         log_file=log, parameters=parameters)
    except (RuntimeError, SystemExit) as error:
        raise build_failure(simulator, verilog, log, error) from None
    # Verilator's precompiled headers (two of about 68 MB each per build, 95 % of an 8 x 8
    # build folder) only speed up recompiling; runs need the executable alone, and a rebuild
    # makes them again.
    for header in directory.rglob("*.gch"):
        header.unlink()


@dataclass(frozen=True)
class TestRun:
    """Outcome of one simulator run of a cocotb test module.

    Attributes
    ----------
    tests, failed : int
        Tests run and failed, from the results XML.
    results_xml, log, waveform : pathlib.Path or None
        Where the run left its results, its log and (with waves) its FST or VCD dump.
    seconds : float
        Wall time of the run, in seconds.
    """

    tests: int
    failed: int
    results_xml: Path
    log: Path
    waveform: Path | None
    seconds: float


def run_tests(tile_build, test_module, test_dir, *, seed=1, testcase=None, extra_env=None,
              plusargs=()):
    """Run cocotb ``test_module`` on ``tile_build``; return a :class:`TestRun`.

    The run's environment carries the build's configuration
    (:data:`~systolica.tb.protocol.TILE_CONFIG`) besides ``extra_env``.

    ``plusargs`` go to the simulator's command line (the harness reads its files from them).

    Raises
    ------
    SimulationError
        If the simulator crashed before writing results (the message names the log).
    """
    from cocotb_tools.check_results import get_results

    prepare_environment(tile_build.simulator)
    test_dir = Path(test_dir).resolve()
    test_dir.mkdir(parents=True, exist_ok=True)
    results_xml, log = test_dir / "results.xml", test_dir / "sim.log"
    runner = _runner(tile_build.simulator, tile_build.wave_format)
    logging.getLogger("cocotb").setLevel(logging.WARNING)
    plusargs = list(plusargs)
    # Verilator's cocotb main writes dump.<format> into the test folder; Icarus is told where.
    dump_name = (("dump." if tile_build.simulator == "verilator"
                  else f"{tile_build.toplevel}.")
                 + tile_build.wave_format)
    if tile_build.waves and tile_build.simulator == "icarus":
        # Icarus would otherwise dump into the shared build folder.
        plusargs.append(f"+dumpfile_path={test_dir / dump_name}")
    started = time.perf_counter()
    try:
        with _runner_environment():
            runner.test(test_module=test_module, hdl_toplevel=tile_build.toplevel,
                        hdl_toplevel_lang="verilog", build_dir=tile_build.directory,
                        test_dir=test_dir, seed=seed, testcase=testcase,
                        waves=tile_build.waves,
                        extra_env={protocol.TILE_CONFIG: protocol.tile_config_env(
                            tile_build.config), **(extra_env or {})},
                        results_xml=str(results_xml), timescale=TIMESCALE, log_file=log,
                        plusargs=plusargs)
    except SystemExit:
        pass  # the runner exits on failed tests under pytest; the results file says which
    except RuntimeError as error:
        raise SimulationError(f"{tile_build.simulator} run failed ({error}); see {log}") from None
    seconds = time.perf_counter() - started
    try:
        tests, failed = get_results(results_xml)
    except (RuntimeError, OSError):
        raise SimulationError(
            f"{tile_build.simulator} wrote no test results; see {log}") from None
    waveform = None
    if tile_build.waves and (test_dir / dump_name).is_file():
        # One name whatever the simulator wrote (dump.fst, systolica_tile.fst).
        waveform = (test_dir / dump_name).replace(test_dir / waveform_name(
            tile_build.wave_format))
    return TestRun(tests, failed, results_xml, log, waveform, seconds)
