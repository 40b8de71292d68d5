"""The rough edges a new user hit (issue 30 point 5): each bad input is a one-line error with
exit status 2, found before anything is built or simulated; what Neuron would run but the user
may not expect is stated in a note. Every call here is in-process and stops at argument or
file checks, so no tile is built."""

import json

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
    with pytest.raises(ValueError, match=r"SYSTOLICA_BUILD_DIR .* is a file; allowed: a folder"):
        runner.build_folder()
    monkeypatch.setenv("SYSTOLICA_BUILD_DIR", str(tmp_path / "fine"))
    assert runner.build_folder() == tmp_path / "fine"


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
