"""The ``systolica`` command: one entry point with a subcommand per tool, the same through
``python -m systolica``; its errors are one line with exit status 2; and the pictures of a
run (``--timeline`` PNG, ``--trace`` Perfetto / Chrome JSON)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from systolica.cli import main as systolica
from systolica.golden import CommandTiming
from systolica.sim.options import env_flag
from systolica.sim.waves import timeline

REPO = Path(__file__).resolve().parents[3]   # tests/<tier>/<area>/this file
SUBCOMMANDS = ("sim", "waves", "bench", "regress", "cells", "minilm-speedup", "fuzz",
               "exhaustive", "mutants", "coverage", "rtl-coverage", "estimate", "validate",
               "claims", "nki", "docs-table")


def _run(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "systolica", *args], capture_output=True,
                          text=True, cwd=kwargs.pop("cwd", REPO), timeout=600, **kwargs)


def test_help_lists_every_subcommand():
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: systolica ")
    for name in SUBCOMMANDS:
        assert f"\n    {name}" in done.stdout, name
    assert set(systolica.COMMANDS) == set(SUBCOMMANDS)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help_and_json(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        systolica.main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: systolica {name}")
    assert "--json" in out
    # Descriptions taken from reST docstrings read as plain text in a terminal.
    assert "``" not in out and not re.search(r":[a-z]+:`", out), name


@pytest.mark.parametrize("argv, message", [
    ([], "systolica: error: a command is needed, one of: sim, waves,"),
    (["simulate"], "systolica: error: argument COMMAND: invalid choice: 'simulate'"),
    (["sim", "--workload", "random", "--rows", "0"],
     "systolica sim: error: rows must be a positive integer, not 0"),
    (["regress", "--rows", "x"], "systolica regress: error: rows must be a positive integer, "
                                 "not 'x'"),
    (["sim", "--workload", "random", "--types", "fp64"],
     "systolica sim: error: unknown type set 'fp64'; allowed: int8, bf16, fp16, fp8, "
     "fp8-double-row, fp32, mx, all (joined with '+' or ',') (--types or TYPES)"),
    (["bench", "--n", "0"], "systolica bench: error: argument --n: must be a positive integer"),
    (["bench", "--sim", "questa", "--main-job", "no", "--throughput-tile", "none"],
     "systolica bench: error: unknown simulator 'questa' in --sims; choose from icarus, "
     "verilator"),
    (["estimate", "--hw", "trn1", "--gemm", "64,64,64", "--plot", "/no/such/folder/x.png"],
     "systolica estimate: error: argument --plot: folder '/no/such/folder' does not exist"),
    (["sim", "--workload", "random", "--trace", "/no/such/folder/t.json"],
     "systolica sim: error: argument --trace: folder '/no/such/folder' does not exist"),
    (["sim", "--timeline", "t.png"], "error: --timeline (TIMELINE, TRACE) apply to "
                                     "WORKLOAD=random"),
    # The verification tools: seeds >= 0, counts >= 1 (rtl-coverage: 0 programs is the
    # directed one alone), before anything is built.
    (["fuzz", "--seed", "-1"], "systolica fuzz: error: argument --seed: must be an integer >= 0"),
    (["fuzz", "--commands", "0"], "systolica fuzz: error: argument --commands: must be a "
                                  "positive integer"),
    (["mutants", "--jobs", "0"], "systolica mutants: error: argument --jobs: must be a positive"),
    (["coverage", "--seed", "x"], "systolica coverage: error: argument --seed: must be an "
                                  "integer >= 0, not 'x'"),
    (["rtl-coverage", "--programs", "-1"], "systolica rtl-coverage: error: argument "
                                           "--programs: must be an integer >= 0"),
    (["mutants", "--size", "3x3x3"], "systolica mutants: error: argument --size: must be one "
                                     "ROWSxCOLS size, like 3x3, not '3x3x3'"),
    (["mutants", "--size", "0x3"], "systolica mutants: error: rows must be a positive integer, "
                                   "not 0"),
    (["fuzz", "--sizes", "4x4,4"], "systolica fuzz: error: argument --sizes: must be ROWSxCOLS "
                                   "sizes separated by commas"),
    (["fuzz", "--sizes", "4x4,4x"], "systolica fuzz: error: cols must be a positive integer, "
                                    "not ''"),
    (["fuzz", "--types", "int8//all"], "systolica fuzz: error: types must be type sets "
                                       "separated by '/', none of them empty, not 'int8//all'"),
    (["fuzz", "--types", "int8/fp64"], "systolica fuzz: error: unknown type set 'fp64'"),
    (["exhaustive", "--adder-pairs", "0"], "systolica exhaustive: error: argument "
                                           "--adder-pairs: must be a positive integer"),
    # From the new-user trial: a score over 100 %, a missing dumps folder, a GEMM size
    # past int32 (it hung) or below 1 are refused before anything runs.
    (["mutants", "--target", "150"], "systolica mutants: error: argument --target: '150' is "
                                     "not a percentage from 0 to 100"),
    (["coverage", "--dumps", "/no/such/folder"], "systolica coverage: error: argument "
                                                 "--dumps: '/no/such/folder' is not an "
                                                 "existing folder"),
    (["estimate", "--hw", "trn1", "--gemm", "99999999999,128,128"],
     "M, K and N must be from 1 to 2,147,483,647"),
    (["estimate", "--hw", "trn1", "--gemm=-1,128,128"],
     "M, K and N must be from 1 to 2,147,483,647"),
    (["estimate", "--hw", "trn1", "--gemm", "-1,128,128"],
     "M, K and N must be from 1 to 2,147,483,647"),
    # An abbreviation is not an option: the real model has --dtypes, not --dtype.
    (["sim", "--workload", "minilm", "--dtype", "bf16"],
     "error: unrecognized arguments: --dtype bf16"),
    # The scaling commands name themselves, as every other command does (was "systolica:").
    (["validate", "--bogus"], "systolica validate: error: unrecognized arguments: --bogus"),
    (["claims", "--hw", "trn1"], "systolica claims: error: unrecognized arguments: --hw trn1"),
])
def test_bad_arguments_are_one_line_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("WORKLOAD", raising=False)
    try:
        status = systolica.main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1, err
    assert "usage:" not in err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        systolica.main(["--version"])
    assert exit_info.value.code == 0
    from importlib.metadata import version

    assert capsys.readouterr().out == f"systolica {version('systolica')}\n"


def test_python_m_systolica_is_the_command_and_old_entry_points_remain():
    new = _run("estimate", "--hw", "trn1", "--gemm", "128,128,128", "--json")
    old = subprocess.run([sys.executable, "-m", "systolica.scaling", "estimate", "--hw", "trn1",
                          "--gemm", "128,128,128", "--json"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    drop = lambda d: {k: v for k, v in d.items() if k != "wall_s"}  # noqa: E731
    assert drop(json.loads(new.stdout)) == drop(json.loads(old.stdout))
    script = Path(sys.executable).with_name("systolica")
    assert script.is_file()
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "minilm-speedup" in done.stdout


def test_closed_pipe_ends_quietly():
    # `systolica claims --json | head -c 10`: no traceback, no "[Errno 32] Broken pipe".
    done = subprocess.run(f"{sys.executable} -m systolica claims --json | head -c 10",
                          shell=True, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout == '{\n  "figur'
    assert done.stderr == ""


@pytest.mark.parametrize("text, value", [("", False), ("0", False), ("no", False),
                                         ("False", False), ("off", False), ("1", True),
                                         ("yes", True), ("TRUE", True), ("on", True)])
def test_yes_no_variables(text, value, monkeypatch):
    monkeypatch.setenv("WAVES", text)
    assert env_flag("WAVES") is value


@pytest.mark.parametrize("name, text", [("WAVES", "2"), ("FTZ", "maybe"), ("FTZ", "2")])
def test_bad_yes_no_variable_exits_2(name, text, monkeypatch, capsys):
    monkeypatch.setenv(name, text)
    monkeypatch.delenv("WORKLOAD", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        systolica.main(["sim", "--workload", "random"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (f"systolica: error: {name} must be 1 or 0 (or yes/no, "
                                       f"true/false, on/off), not {text!r}\n")


# ---- pictures ----------------------------------------------------------------------------

class _Result:
    """What the pictures read of a ProgramResult."""

    def __init__(self, stamps, predicted):
        self.stamps, self.predicted = stamps, predicted
        self.cycles = max(c for t in stamps for c in t.results) + 1

    def model_agrees(self):
        return self.stamps == self.predicted


class _Matmul:
    def __init__(self, k, m, n):
        import numpy as np

        self.stationary, self.moving = np.zeros((k, m)), np.zeros((k, n))


class _Read:
    n = 3


def check_chrome_trace(document):
    """Check ``document`` against the JSON Trace Event Format as Perfetto imports it: the
    fields each phase needs, numeric times, and complete events on one thread that nest or
    do not overlap. Returns the complete events (list of dict)."""
    assert isinstance(document, dict) and isinstance(document["traceEvents"], list)
    names = {}
    slices = {}
    for event in document["traceEvents"]:
        assert event["ph"] in ("X", "i", "M"), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        assert isinstance(event["name"], str) and event["name"], event
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index"), event
            key = "name" if event["name"].endswith("_name") else "sort_index"
            assert key in event["args"], event
            names[(event["name"], event["pid"], event["tid"])] = event["args"][key]
            continue
        assert isinstance(event["ts"], int) and event["ts"] >= 0, event
        assert isinstance(event.get("args", {}), dict)
        if event["ph"] == "i":
            assert event["s"] in ("g", "p", "t"), event
        else:
            assert isinstance(event["dur"], int) and event["dur"] > 0, event
            slices.setdefault((event["pid"], event["tid"]), []).append(event)
    for (pid, tid), events in slices.items():
        assert ("process_name", pid, 0) in names and ("thread_name", pid, tid) in names
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        for a, b in zip(events, events[1:], strict=False):   # disjoint: no nesting here
            assert a["ts"] + a["dur"] <= b["ts"], (a, b)
    return [e for events in slices.values() for e in events]


def _program():
    """Two matmuls and a READ; the measured run has a stall in the second matmul's moving
    beats and in the READ's results."""
    predicted = [
        CommandTiming(0, loads=(1, 2), issues=(3, 4, 5), results=(9, 10, 11)),
        CommandTiming(1, loads=(4, 5), issues=(6, 7), results=(12, 13)),
        CommandTiming(2, issues=(8, 9, 10), results=(14, 15, 16)),
    ]
    stamps = [
        CommandTiming(0, issues=(3, 4, 5), results=(9, 10, 11)),
        CommandTiming(1, issues=(6, 8), results=(12, 14)),
        CommandTiming(2, results=(15, 16, 19)),
    ]
    return _Result(stamps, predicted), [_Matmul(2, 4, 3), _Matmul(2, 4, 2), _Read()]


def test_runs_merge_consecutive_cycles():
    assert timeline.runs((3, 4, 5, 9)) == [(3, 3), (9, 1)]
    assert timeline.runs(()) == []


def test_trace_holds_every_beat_in_perfetto_format(tmp_path):
    result, jobs = _program()
    path = timeline.write_trace(tmp_path / "t.json", result, jobs)
    slices = check_chrome_trace(json.loads(path.read_text()))
    beats = {(e["pid"], e["cat"]): 0 for e in slices}
    for e in slices:
        beats[(e["pid"], e["cat"])] += e["dur"]
    # pid 1 measured, pid 2 the cycle model: every beat of every command, once.
    assert beats == {(1, "issue"): 5, (1, "result"): 8, (2, "load"): 4, (2, "issue"): 8,
                     (2, "result"): 8}
    stalled = [e for e in slices if e["pid"] == 1 and e["cat"] == "issue" and
               e["args"]["command"] == 1]
    assert [(e["ts"], e["dur"]) for e in stalled] == [(6, 1), (8, 1)]   # the gap is a stall
    assert [e["name"] for e in slices if e["pid"] == 2 and e["cat"] == "load"] == \
        ["matmul 0 [K=2, M=4, N=3]", "matmul 1 [K=2, M=4, N=2]"]


def test_timeline_png_is_written(tmp_path):
    result, jobs = _program()
    path = timeline.draw_timeline(tmp_path / "t.png", result, jobs, title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 1000 and height > 300


def test_random_workload_draws_its_program(tmp_path):
    """``systolica sim --workload random --timeline --trace --json`` on a 2 x 2 Icarus tile:
    the trace holds every moving and result beat of the run, at the reported cycles."""
    png, trace = tmp_path / "run.png", tmp_path / "run.json"
    done = _run("sim", "--workload", "random", "--sim", "icarus", "--rows", "2", "--cols", "2",
                "--matmuls", "3", "--n", "5", "--timeline", str(png), "--trace", str(trace),
                "--json", "--build-dir", str(tmp_path / "build"),
                env={**_clean_env(), "SYSTOLICA_BUILD_DIR": str(tmp_path / "build")})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] and report["model_agrees"] and report["mismatches"] == 0
    assert report["timeline"] == str(png) and report["trace"] == str(trace)
    assert png.read_bytes()[:4] == b"\x89PNG"
    slices = check_chrome_trace(json.loads(trace.read_text()))
    measured = [e for e in slices if e["pid"] == 1]
    assert sum(e["dur"] for e in measured if e["cat"] == "issue") == 3 * 5
    assert sum(e["dur"] for e in measured if e["cat"] == "result") == 3 * 5
    assert max(e["ts"] + e["dur"] for e in measured) == report["cycles"]
    assert "systolica: building the 2 x 2 tile, types int8 for icarus" in done.stderr
    again = _run("sim", "--workload", "random", "--sim", "icarus", "--rows", "2", "--cols", "2",
                 "--matmuls", "1", "--n", "5", "--build-dir", str(tmp_path / "build"),
                 env=_clean_env())
    assert again.returncode == 0, again.stderr
    assert "building" not in again.stdout + again.stderr      # a reused build is silent
    assert "  build            reused" in again.stdout


def test_default_build_root_is_the_checkouts(monkeypatch, tmp_path):
    from systolica.sim.builder.runner import default_build_root

    monkeypatch.delenv("SYSTOLICA_BUILD_DIR", raising=False)
    monkeypatch.chdir(tmp_path)           # not ./build of wherever the API runs
    assert default_build_root() == REPO / "build"
    monkeypatch.setenv("SYSTOLICA_BUILD_DIR", str(tmp_path / "b"))
    assert default_build_root() == tmp_path / "b"


def test_waves_runs_replace_one_folder(tmp_path):
    """Repeated waves runs of a tile leave one latest-run folder (waves.fst, its save file,
    the log), not another runs/run... folder each."""
    for _ in range(2):
        done = _run("waves", "--workload", "random", "--sim", "icarus", "--rows", "2",
                    "--cols", "2", "--matmuls", "1", "--n", "3", "--no-open", "--json",
                    "--build-dir", str(tmp_path), env=_clean_env())
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
    folders = [f for f in tmp_path.iterdir() if f.name.startswith("2x2-int8-icarus-waves-")]
    assert len(folders) == 1
    folder = folders[0]
    assert report["waveform"] == str(folder / "latest-run" / "waves.fst")
    assert report["save_file"] == str(folder / "latest-run" / "waves.gtkw")
    assert (folder / "latest-run" / "sim.log").is_file()
    assert list((folder / "runs").iterdir()) == []


def _clean_env():
    import os

    return {k: v for k, v in os.environ.items()
            if k not in ("SIM", "ROWS", "COLS", "TYPES", "DTYPE", "FTZ", "SEED", "WAVES",
                         "WORKLOAD")}


def test_minilm_utilisation_plot(tmp_path):
    """``systolica sim --plot``: the MiniLM report's per-GEMM utilisation picture."""
    from types import SimpleNamespace

    from systolica.workloads.minilm.report import plot_utilisation

    def gemm(layer, name, macs, cycles, model_cycles):
        return SimpleNamespace(layer=layer, gemm=name, macs=macs, cycles=cycles,
                               model_cycles=model_cycles)

    names = ("q", "k", "v", "scores", "context", "o", "up", "down")
    runs = {dtype: SimpleNamespace(gemms=[gemm(0, g, 64 * 900, 1000 + 10 * i, 950)
                                          for i, g in enumerate(names)])
            for dtype in ("bf16", "int8")}
    run = SimpleNamespace(rows=8, cols=8, simulator="verilator", runs=runs)
    path = plot_utilisation(run, tmp_path / "u.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(OSError):
        plot_utilisation(run, tmp_path / "missing" / "u.png")
    done = subprocess.run([sys.executable, "-m", "systolica", "sim", "--plot",
                           "/no/such/folder/u.png"], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env=_clean_env())
    assert done.returncode == 2
    assert "argument --plot: folder '/no/such/folder' does not exist" in done.stderr


def test_cells_json(monkeypatch, capsys):
    """``systolica cells --json``: the counts as one JSON document (Yosys stubbed here;
    tests/regression/tools/test_sim_cells.py runs the real one)."""
    from systolica.cli import cells

    def fake(types):
        total = 10 + 20 * len(types)
        return total, {"$_AND_": total}

    monkeypatch.setattr(cells, "cell_stats", fake)
    monkeypatch.setattr(cells, "synth_cells", lambda component: (5, {"$_OR_": 5}))
    assert systolica.main(["cells", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    totals = {types: fake(types)[0] for types in cells.VARIANTS}
    assert data == {"pes": {title: {"total": total, "cells": {"$_AND_": total},
                                    "over_int8": total / totals["int8"]}
                            for title, total in totals.items()},
                    "components": {name: {"total": 5, "cells": {"$_OR_": 5},
                                          "over_int8": 5 / totals["int8"]}
                                   for name in cells.COMPONENTS}}
    assert data["pes"]["int8"]["over_int8"] == 1


def test_regress_json_keeps_stdout_for_the_document(monkeypatch, capsys, tmp_path):
    """``systolica regress --json``: progress on stderr, the figures as JSON on stdout, and
    a failed regression still exits 1 (simulator stubbed; make regress-long runs it)."""
    from types import SimpleNamespace

    from systolica.cli import regress

    def run_tests(tile, module, folder, seed, extra_env):
        Path(extra_env["SYSTOLICA_STATS"]).write_text('{"bf16": 600, "int8": 40}\n'
                                                      '{"bf16": 500, "int8": 0}\n')
        log = tmp_path / "sim.log"
        log.write_text("log\n")
        return SimpleNamespace(tests=5, failed=failed, seconds=1.5, log=log)

    monkeypatch.setattr(regress, "build", lambda *a, **k: SimpleNamespace(seconds=2.0))
    monkeypatch.delenv("TYPES", raising=False)
    monkeypatch.setattr(regress, "run_tests", run_tests)
    for failed, status in ((0, 0), (1, 1)):
        assert systolica.main(["regress", "--macs", "1000", "--json"]) == status
        out, err = capsys.readouterr()
        data = json.loads(out)
        assert (data["tests"], data["failed"], data["bf16_macs"], data["int8_macs"]) == \
            (5, failed, 1100, 40)
        assert data["passed"] is (status == 0)
        assert err.startswith("regress-long: 16 x 16 tile, types all on verilator, seed 1")


def test_cells_table_fits_100_columns_and_keeps_every_count(monkeypatch, capsys):
    """``systolica cells``: the table is printed in blocks of columns no wider than 100
    characters (it was 302 wide), each block with the cell names, every PE's every count
    and total once (Yosys stubbed)."""
    from systolica.cli import cells

    def fake(types):
        total = 100_000 + len(types)
        return total, {"$_AND_": total - 7, "$_DFF_P_": 7}

    monkeypatch.setattr(cells, "cell_stats", fake)
    monkeypatch.setattr(cells, "synth_cells", lambda component: (5, {"$_OR_": 5}))
    assert systolica.main(["cells"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= 100
    headers = [line.split()[1:] for line in out if line.startswith("cell ")]
    assert len(headers) > 1
    assert [name for block in headers for name in block] == [*cells.VARIANTS,
                                                              *cells.COMPONENTS]
    totals = [int(v) for line in out if line.startswith("total ") for v in line.split()[1:]]
    assert totals == [fake(t)[0] for t in cells.VARIANTS] + [5]
