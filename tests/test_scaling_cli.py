"""Scaling layer: the systolica command (estimate, claims), its outputs and its errors."""

import csv
import io
import json
import subprocess
import sys

import pytest

from systolica.scaling.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_estimate_table_prints_reference_for_llama_decode(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "inf2", "--workload", "llama2-7b",
                       "--phase", "decode", "--batch", "1", "--tp", "12")
    assert code == 0
    assert "6.470 ms" in out and "measured / estimate" in out
    assert "memory-bound lower limit" in out
    assert "attn.qkv" in out and "HBM lower limit" in out


def test_estimate_json(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "inf2", "--workload", "llama2-7b",
                       "--phase", "decode", "--tp", "12", "--json")
    data = json.loads(out)
    assert code == 0 and data["chips"] == 12
    assert data["reference"]["measured_s"] == 6.47e-3
    assert data["reference"]["ratio_measured_to_estimate"] == pytest.approx(
        6.47e-3 / data["step_s"])
    assert data["step_s"] >= data["hbm_limit_s"]


def test_estimate_csv_from_scalesim_topology(capsys, tmp_path):
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\nfc1, 64, 48, 80,\nfc2, 9, 200, 30,\n")
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--workload", str(topo), "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["name"] for r in rows] == ["fc1", "fc2"]
    # fc1 on 128 x 128: one fold, 2 * 128 + 128 + 64 - 2 = 446 cycles, minus one.
    assert rows[0]["scalesim_ws_cycles"] == "445"


def test_estimate_plot_and_scaling(capsys, tmp_path):
    png = tmp_path / "out.png"
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--workload", "gpt3-175b",
                       "--phase", "train", "--batch", "1536", "--seq", "2048", "--tp", "8",
                       "--dp", "12500", "--scaling", "--plot", str(png))
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "100,000" in out and "efficiency" in out


def test_single_gemm(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--gemm", "256,256,1024", "--json")
    data = json.loads(out)
    assert code == 0 and data["gemms"][0]["flop"] == 2 * 256 * 256 * 1024


def test_claims(capsys):
    code, out, _ = run(capsys, "claims", "--json")
    rows = json.loads(out)
    assert code == 0
    chip = next(r for r in rows if r["preset"] == "trn2" and r["what"] == "chip peak bf16")
    assert chip["stated"] == "667 TFLOPS" and chip["agrees"] is False
    assert chip["difference"] == pytest.approx(8 * 128 * 128 * 2 * 2.4e9 - 667e12)
    code, out, _ = run(capsys, "claims")
    assert code == 0 and "what it would take" in out and "NO" in out


@pytest.mark.parametrize("argv, needle", [
    (["estimate", "--hw", "trn9", "--gemm", "1,1,1"], "trn9: no such hardware preset"),
    (["estimate", "--hw", "inf2", "--gemm", "1,1,1", "--dtype", "fp8"],
     "inf2.toml: field dtype: 'fp8' has no rate in this hardware; allowed: bf16"),
    (["estimate", "--hw", "inf2", "--workload", "llama3"], "allowed: gpt3-175b, llama2-70b"),
    (["estimate", "--hw", "inf2", "--workload", "llama2-7b", "--tp", "24"],
     "allowed: 1 to 12"),
    (["estimate", "--hw", "trn2", "--gemm", "1,1,1", "--link-bandwidth", "9 furlongs"],
     "--link-bandwidth: '9 furlongs' is not a bandwidth figure; allowed: '<number> <unit>'"),
])
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_hardware_file_through_cli(capsys, tmp_path):
    bad = tmp_path / "hw.toml"
    bad.write_text('name = "x"\ntitle = "x"\nkind = "systolic"\n[tile]\nrows = 0\n')
    code, _, err = run(capsys, "estimate", "--hw", str(bad), "--gemm", "1,1,1")
    assert code == 2
    assert err == "error: hw.toml: field tile.rows: 0 is not allowed; allowed: an integer >= 1\n"


def test_console_script_and_module_help():
    for cmd in (["-m", "systolica.scaling", "--help"],
                ["-m", "systolica.scaling", "estimate", "--help"],
                ["-m", "systolica.scaling", "claims", "--help"]):
        result = subprocess.run([sys.executable, *cmd], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0 and "usage:" in result.stdout


def test_gemm_list_memory_is_reported_as_not_modelled(capsys):
    assert main(["estimate", "--hw", "trn2", "--gemm", "256,256,256", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory_bytes_per_chip"] is None and out["fits_in_hbm"] is None
