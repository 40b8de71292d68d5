"""Unit tier: ``systolica nki run``: a project kernel with a reference (bit-exact), the JSON
document, an older-style kernel writing its output argument, and the one-line errors (bad
arguments: exit 2; a kernel breaking a rule: exit 1)."""

import json
from pathlib import Path

import numpy as np
import pytest

from systolica.nki.cli import main

REPO = Path(__file__).resolve().parents[3]
KERNELS = REPO / "nki" / "kernels"


def test_run_prints_the_profile_and_the_bit_exact_comparison(capsys):
    status = main(["run", f"{KERNELS}/matmul.py::matmul_tiled", "--arg",
                   "lhsT=256x128:bfloat16", "--arg", "rhs=256x512:bfloat16",
                   "--reference", "systolica.nki.reference:matmul", "--target", "trn1"])
    out = capsys.readouterr().out
    assert status == 0
    assert "nc_matmul" in out and "tensor" in out
    assert "out: max |error| 0, bit-exact" in out


def test_json_is_one_document_with_the_comparison(capsys):
    status = main(["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32",
                   "--reference", "systolica.nki.reference:softmax", "--json", "--seed", "5"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["target"] == "trn2"
    assert report["outputs"] == [{"name": "out", "shape": [128, 64], "dtype": "float32"}]
    row = report["reference"][0]
    assert row["max_abs_error"] < 1e-6 and row["bit_exact"] is False
    assert {"run", "schedule"} <= set(report["wall_seconds"])
    cpu = report["cpu_seconds"]
    assert 0 <= cpu["golden_matmul"] <= cpu["run"] and cpu["schedule"] >= 0
    assert report["instructions"] == 7          # load, max, x -1, exp, 1/x, x, store


def test_an_older_style_kernel_writing_its_output_argument(capsys):
    sample = REPO / "tests" / "unit" / "nki" / "nki_samples" / "neuronxcc_style.py"
    status = main(["run", f"{sample}::tile_attention", "--arg", "q=64x128:bfloat16",
                   "--arg", "k=64x128:bfloat16", "--arg", "v=128x64:bfloat16",
                   "--arg", "out=128x64:float32", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["outputs"] == [{"name": "out", "shape": [128, 64], "dtype": "float32"}]


@pytest.mark.parametrize("argv, message", [
    (["run", "nofile.py::k"], "kernel file 'nofile.py' does not exist"),
    (["run", f"{KERNELS}/norms.py"], "must be FILE.py::NAME"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float64"],
     "unknown dtype 'float64'"),
    (["run", f"{KERNELS}/norms.py::softmax"], "kernel softmax(x): missing --arg x"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x0:float32"],
     "must be positive sizes"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=100000x100000:float32"],
     "a random argument may have at most 268,435,456"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--timeline",
      "t.txt"], "'t.txt' has suffix .txt; allowed: an image file"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--grid", "0"],
     "--grid '0' must be positive program counts"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--seed", "-1"],
     "--seed must be a non-negative integer, not -1"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--arg",
      "x=128x32:float32"], "--arg x is given twice"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--rows", "4"],
     "--rows and --cols size the RTL tile: they go with --tensor-engine rtl"),
    (["run", f"{KERNELS}::softmax"], "is a folder; give FILE.py::NAME"),
    # 0 once fell back to the 128 x 128 default and started its build
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--tensor-engine",
      "rtl", "--rows", "0"], "rows must be a positive integer, not 0"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--tensor-engine",
      "rtl", "--rows", "8", "--cols", "0"], "cols must be a positive integer, not 0"),
    (["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32", "--workers", "-1"],
     "--workers must be at least 0, not -1"),
])
def test_bad_arguments_are_one_line_with_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert err.startswith("systolica nki: error: ") and message in err


def test_a_kernel_rule_is_one_line_with_status_1(capsys):
    status = main(["run", f"{KERNELS}/matmul.py::matmul_fp8_double_row", "--arg",
                   "lhsT=256x64:float8_e4m3", "--arg", "rhs=256x512:float8_e4m3",
                   "--target", "trn1"])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1
    assert err.startswith("systolica nki: error: matmul.py:")
    assert "nc_matmul: perf_mode='double_row' needs NeuronCore-v3" in err


def test_inputs_from_an_npz_file_and_an_spmd_grid(tmp_path, capsys):
    kernel = tmp_path / "add.py"
    kernel.write_text(
        "import nki\n"
        "import nki.language as nl\n"
        "import nki.isa as nisa\n\n\n"
        "@nki.jit\n"
        "def add(a, b, scale):\n"
        "    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)\n"
        "    rows = a.shape[0] // nl.num_programs(0)\n"
        "    r0 = nl.program_id(0) * rows\n"
        "    ta = nl.load(a[r0:r0 + rows, :])\n"
        "    tb = nl.load(b[r0:r0 + rows, :])\n"
        "    nl.store(out[r0:r0 + rows, :], value=nl.add(ta, nl.multiply(tb, scale)))\n"
        "    return out\n")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 8)).astype(np.float32), np.ones((256, 8), np.float32)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    status = main(["run", f"{kernel}::add", "--inputs", str(tmp_path / "in.npz"), "--arg",
                   "scale=3", "--grid", "2", "--json", "--trace", str(tmp_path / "t.json")])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["outputs"][0]["shape"] == [256, 8]
    assert report["instructions"] == 2 * 5     # per program: 2 loads, multiply, add, store
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"] is not None


def test_a_kernel_file_that_does_not_parse_names_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import nki\n\ndef k(x)\n    return x\n")
    with pytest.raises(SystemExit) as info:
        main(["run", f"{bad}::k", "--arg", "x=4x4:float32"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert f"{bad}:3: syntax error" in err


def test_a_failing_or_mismatched_reference_is_one_line_with_status_1(tmp_path, monkeypatch,
                                                                     capsys):
    """A reference beside the kernel is found without PYTHONPATH; one that raises, or whose
    output has another shape, fails the run in one line (a shape mismatch was exit 0)."""
    (tmp_path / "myref.py").write_text(
        "import numpy as np\n"
        "def boom(x):\n    raise RuntimeError('ref exploded')\n"
        "def small(x):\n    return np.zeros((3, 3), np.float32)\n")
    monkeypatch.chdir(tmp_path)
    base = ["run", f"{KERNELS}/norms.py::softmax", "--arg", "x=128x64:float32"]
    assert main([*base, "--reference", "myref:boom"]) == 1
    err = capsys.readouterr().err
    assert err == "systolica nki: error: the reference myref:boom raised RuntimeError: " \
                  "ref exploded\n"
    assert main([*base, "--reference", "myref:small"]) == 1
    captured = capsys.readouterr()
    assert "shape [128, 64] vs reference [3, 3]" in captured.out
    assert captured.err.count("\n") == 1 and "differs from the reference" in captured.err
