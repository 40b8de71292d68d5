"""Regression tier: a failing cocotb test's reproduce command, run as printed, writes waves.

``SYSTOLICA_CORRUPT_GOLDEN=1`` makes the testbench expect one wrong PSUM word, so the test
fails the way a real mismatch would; the report the regression prints for it is run in a
shell, exactly as printed.
"""

import subprocess
from pathlib import Path

import pywellen

from systolica.hdl.config import TileConfig
from systolica.sim import build
from systolica.sim.builder.runner import run_tests
from systolica.sim.waves.gtkwave import reproduce_report, save_file_signals
from systolica.tb import protocol

REPO = Path(__file__).resolve().parents[3]   # tests/<tier>/<area>/this file
CORRUPT = {protocol.CORRUPT_GOLDEN: "1"}


def test_a_failing_test_prints_a_command_that_writes_its_waveform(tmp_path):
    seed = 314159
    config = TileConfig(2, 2)
    run = run_tests(build(config, "icarus"), protocol.TILE_TESTS, tmp_path, seed=seed,
                    testcase="test_identity", extra_env=CORRUPT)
    assert (run.tests, run.failed) == (1, 1), run.log.read_text()[-2000:]
    report = reproduce_report(config, "icarus", seed, run.results_xml, env=CORRUPT)
    print(report)
    first, second = report.splitlines()
    prefix = "re-run test_identity with waves: "
    assert first.startswith(prefix)
    command = first[len(prefix):]
    assert "SYSTOLICA_CORRUPT_GOLDEN=1" in command and f"--seed {seed}" in command
    wave = Path(second.removeprefix("  waveform will be at: "))
    if wave.exists():
        wave.unlink()

    result = subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    # The reproduction fails the same way (exit 1) and leaves the waveform where promised.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "test_identity FAILED" in result.stdout
    assert f"waveform        {wave}" in result.stdout
    assert wave.is_file() and wave.read_bytes()[:1] == b"\x00"   # an FST header block
    log = (wave.parent / "sim.log").read_text()
    assert "1 wrong words" in log and "psum[m=0, n=0]" in log, log[-2000:]
    # Same seed, same stimulus: the waveform holds the moving beats of the failing matmul.
    save = wave.with_suffix(".gtkw")
    names = {var.full_name for var in pywellen.Waveform(str(wave)).all_vars()}
    assert {name for name, _, _ in save_file_signals(save)} <= names
