"""Regression tier: ``python -m systolica.sim`` end to end, and its argument errors."""

import os
import re
import subprocess
import sys

import pytest


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "systolica.sim", "--workload", "random", *args],
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_cli_reports_zero_mismatches(simulator):
    done = run_cli("--sim", simulator, "--rows", "2", "--cols", "3", "--matmuls", "3",
                   "--n", "5", "--backpressure", "0.3", "--idle", "0.2")
    assert done.returncode == 0, done.stderr
    assert re.search(r"mismatches\s+0 \(45 PSUM words checked", done.stdout), done.stdout
    assert re.search(r"MACs per cycle\s+[\d.]+ of peak 6", done.stdout)
    assert "PASS" in done.stdout


def test_cli_bf16_ftz_run():
    done = run_cli("--sim", "icarus", "--rows", "2", "--cols", "2", "--matmuls", "2", "--n", "4",
                   "--dtype", "bf16", "--ftz")
    assert done.returncode == 0, done.stderr
    assert "BF16 x BF16 -> FP32, FTZ" in done.stdout
    assert re.search(r"mismatches\s+0 \(16 PSUM words checked", done.stdout), done.stdout


def test_cli_fp8_double_row_run():
    done = run_cli("--sim", "icarus", "--rows", "2", "--cols", "2", "--matmuls", "2", "--n", "4",
                   "--dtype", "e4m3", "--double-row")
    assert done.returncode == 0, done.stderr
    assert "E4M3 x E4M3 -> FP32, double-row" in done.stdout
    assert "[K=4, M=2] x [K=4, N=4]" in done.stdout and "of peak 8 " in done.stdout
    assert re.search(r"mismatches\s+0 \(16 PSUM words checked", done.stdout), done.stdout


def test_cli_fp32_run_reports_its_four_passes():
    done = run_cli("--sim", "icarus", "--rows", "2", "--cols", "2", "--matmuls", "2", "--n", "4",
                   "--dtype", "fp32")
    assert done.returncode == 0, done.stderr
    assert "types fp32, FP32 x FP32 -> FP32" in done.stdout
    # 2 x 2 PEs at a quarter of the rate: four cycles a moving column
    assert re.search(r"of peak 1 \([\d.]+%\); FP32 takes 4 cycles a moving column",
                     done.stdout), done.stdout
    assert "(equal, every stamp)" in done.stdout
    assert re.search(r"mismatches\s+0 \(16 PSUM words checked", done.stdout), done.stdout


@pytest.mark.parametrize("args,text", [
    (["--ftz"], "--ftz (FTZ=1) applies to float types only"),
    (["--dtype", "fp16", "--double-row"], "--double-row needs DTYPE e4m3 or e5m2, not fp16"),
    (["--n", "600"], "--n must be at most the PSUM bank size 512, not 600"),
    (["--rows", "0"], "systolica sim: error: rows must be a positive integer, not 0"),
    (["--types", "int8+e4m3"], "unknown type set 'e4m3'; allowed: int8, bf16, fp16, fp8, "
                               "fp8-double-row, fp32, mx, all (joined with '+' or ',') "
                               "(--types or TYPES)"),
    (["--seed", "-1"], "argument --seed: must be an integer >= 0"),
    (["--sim", "xsim"], "invalid choice: 'xsim'"),
    (["--idle", "1.5"], "--idle must be a probability in [0, 1), not 1.5"),
])
def test_cli_bad_arguments(args, text):
    done = run_cli(*args)
    assert done.returncode == 2
    assert text in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_bad_environment_value():
    done = subprocess.run([sys.executable, "-m", "systolica.sim"], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "ROWS": "abc", "WORKLOAD": "random"})
    assert done.returncode == 2
    assert "rows must be a positive integer, not 'abc'" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_help():
    done = run_cli("--help")
    assert done.returncode == 0 and "--sim" in done.stdout and "--rows" in done.stdout


def test_waves_with_the_real_model_is_refused_with_the_fix():
    done = subprocess.run([sys.executable, "-m", "systolica.sim"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "WAVES": "1",
                                                      "WORKLOAD": "minilm"})
    assert done.returncode == 2
    assert "WAVES=1 applies to WORKLOAD=random" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("env,args,text", [
    ({"DTYPE": "bf16"}, [], "DTYPE and FTZ apply to WORKLOAD=random"),
    ({"FTZ": "1"}, [], "DTYPE and FTZ apply to WORKLOAD=random"),
    ({"WORKLOAD": "minilm"}, ["waves"], "waves trace the random workload only"),
])
def test_options_of_the_random_workload_are_refused_with_the_real_model(env, args, text):
    done = subprocess.run([sys.executable, "-m", "systolica.sim", *args], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "WORKLOAD": "minilm", **env})
    assert done.returncode == 2
    assert text in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("workload", ["minilm", "random"])
@pytest.mark.parametrize("name", ["MX", "MX_PSUM"])
def test_the_waves_mx_variables_are_refused_by_sim(workload, name):
    done = subprocess.run([sys.executable, "-m", "systolica.sim"], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "WORKLOAD": workload, name: "bf16"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "MX and MX_PSUM apply to 'make waves'" in done.stderr
    assert "TYPES=all+mx" in done.stderr
