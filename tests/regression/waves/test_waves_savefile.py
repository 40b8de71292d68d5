"""Regression tier: every signal a generated GTKWave save file names exists in its dump.

Runs ``python -m systolica.sim waves`` (in process) on Icarus and on Verilator, FST and VCD,
reads the dump with pywellen and checks each traced signal's name, width and picked bits.
"""

import pytest
import pywellen

from systolica.cli import waves as waves_cli
from systolica.sim.waves import gtkwave as waves


def dump_signals(dump):
    """{full name: width in bits} of every variable in an FST or VCD dump."""
    return {var.full_name: var.bitwidth for var in pywellen.Waveform(str(dump)).all_vars()}


def missing_signals(save, dump):
    """Signals the save file names that the dump lacks (or has with another width)."""
    present = dump_signals(dump)
    return sorted(f"{name} ({width} bits{'' if bit is None else f', bit {bit}'})"
                  for name, width, bit in waves.save_file_signals(save)
                  if present.get(name) != width or (bit is not None and not 0 <= bit < width))


def run_waves(capsys, *argv):
    status = waves_cli.main(["--no-open", *argv])
    out = capsys.readouterr().out
    fields = dict(line.strip().split(None, 1) for line in out.splitlines()
                  if line.startswith("  ") and not line.strip().startswith(("save", "view")))
    save = next(line.split(None, 2)[2] for line in out.splitlines()
                if line.strip().startswith("save file"))
    return status, out, waves.Path(fields["waveform"]), waves.Path(save)


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("rows,cols,wave_format,dtype", [
    (2, 3, "fst", "bf16"), (1, 1, "vcd", "int8")], ids=["2x3-fst-bf16", "1x1-vcd-int8"])
def test_every_saved_signal_is_in_the_dump(simulator, rows, cols, wave_format, dtype, capsys):
    status, out, dump, save = run_waves(
        capsys, "--sim", simulator, "--rows", str(rows), "--cols", str(cols), "--format",
        wave_format, "--dtype", dtype, "--matmuls", "2", "--n", "5")
    assert status == 0, out
    assert dump.suffix == f".{wave_format}" and dump.is_file()
    assert save == dump.with_suffix(".gtkw") and save.is_file()
    text = save.read_text()
    assert f'[dumpfile] "{dump}"' in text
    assert f"-PE row {rows - 1}" in text
    signals = waves.save_file_signals(save)
    assert len(signals) > 20
    assert missing_signals(save, dump) == []
    assert f"view with       gtkwave {dump} {save}" in out


def test_the_check_catches_a_signal_the_dump_lacks(tmp_path, capsys):
    status, out, dump, save = run_waves(capsys, "--sim", "icarus", "--rows", "2", "--cols",
                                        "2", "--matmuls", "1", "--n", "2")
    assert status == 0, out
    bad = tmp_path / "bad.gtkw"
    bad.write_text(save.read_text()
                   + "systolica_tile.no_such_signal\n"
                   + "systolica_tile.queue.queued[7:0]\n"            # wrong width
                   + "#{x} (40)systolica_tile.moving__payload[31:0]\n")  # wrong bit
    assert missing_signals(bad, dump) == [
        "systolica_tile.moving__payload (32 bits, bit -9)",
        "systolica_tile.no_such_signal (1 bits)",
        "systolica_tile.queue.queued (8 bits)",
    ]


def _first_value_while_valid(dump, valid, payload):
    """The value of ``payload`` (int) when ``valid`` (full names) first rises in ``dump``."""
    wave = pywellen.Waveform(str(dump))
    variables = {var.full_name: var for var in wave.all_vars()}

    def changes(name):
        seen = []
        wave.stream_changes(lambda time, _, value: seen.append((time, value)),
                            [variables[name]])
        return seen

    rise = next(time for time, value in changes(valid) if value == 1)
    return [value for time, value in changes(payload) if time <= rise][-1]


def test_an_mx_run_shows_its_x4_words_and_scales(capsys):
    """``--mx`` on Icarus (an 8 x 2 int8+mx tile in the bulk harness): every saved signal is
    in the dump, and the first moving beat's lane 0 and its scale, taken from the dump and
    put through the save file's filters, are the workload's elements and scale as
    ml_dtypes decodes them."""
    import argparse

    import numpy as np

    from systolica.sim.waves.gtkwave_filter import decode

    argv = ["--sim", "icarus", "--rows", "8", "--cols", "2", "--mx", "e4m3fn,e2m1",
            "--mx-psum", "stochastic", "--matmuls", "1", "--n", "3", "--seed", "7"]
    status, out, dump, save = run_waves(capsys, *argv)
    assert status == 0, out
    assert "1 MX e4m3fn x e2m1 -> stochastic matmuls" in out
    assert missing_signals(save, dump) == []
    text = save.read_text()
    for alias in ("moving k0", "stationary m1 scale", "cell 0 seed", "pe_7_1 scale"):
        assert "{" + alias + "}" in text, alias
    (job,) = waves_cli.mx_workload(argparse.Namespace(
        seed=7, rows=8, cols=2, n=3, matmuls=1, mx=("e4m3fn", "e2m1"), mx_psum="stochastic"))
    beat = _first_value_while_valid(dump, "systolica_harness.tile.moving__valid",
                                    "systolica_harness.tile.moving__payload")
    # Lane 0 (bits 31..0, an MXFP4 word in 15..0) of moving column n = 0, partition 0; its
    # scale at bits 267..260 (after 8 lanes of 32 bits and 4 row-cell bits).
    shown = decode(f"{beat & 0xFFFF:04X}", "x4-e2m1").split(" | ")
    assert [float(v) for v in shown] == job.moving[0, 0].astype(np.float64).tolist()
    scale = float(np.asarray(job.moving_scale)[0, 0].astype(np.float64))
    assert decode(f"{(beat >> 260) & 0xFF:02X}", "e8m0") == f"2^{int(np.log2(scale))}"
