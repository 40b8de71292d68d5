"""Scaling layer: hardware presets, peaks from first principles, validation errors, claims."""

import pytest

from systolica.scaling.claims import all_rows, claim_rows, workload_rows
from systolica.scaling.hardware import load_hardware, preset_names
from systolica.scaling.spec import SpecError
from systolica.scaling.units import half_unit, parse_quantity


def test_presets_all_load():
    assert {"inf2", "trn1", "trn2", "trn2-ultraserver", "a100", "h100"} <= set(preset_names())
    for name in preset_names():
        assert load_hardware(name).name == name


@pytest.mark.parametrize("name, dtype, expected, published", [
    ("inf2", "bf16", 128 * 128 * 2 * 1 * 2.8e9, 92),
    ("trn1", "bf16", 128 * 128 * 2 * 1 * 2.8e9, 92),
    ("trn2", "bf16", 128 * 128 * 2 * 1 * 2.4e9, 79),
    ("trn2", "fp8", 128 * 128 * 2 * 2 * 2.4e9, 158),
])
def test_core_peaks_from_first_principles_match_published(name, dtype, expected, published):
    hw = load_hardware(name)
    assert hw.core_peak(dtype) == pytest.approx(expected, rel=1e-12)
    # Published per-core figures are whole TFLOPS; FP8 is published as 2 x the rounded BF16.
    per_bf16 = expected / hw.tile.macs_per_pe_per_cycle[dtype]
    assert round(per_bf16 / 1e12) * hw.tile.macs_per_pe_per_cycle[dtype] == published
    assert hw.core.published_peak[dtype].value == published * 1e12


def test_chip_and_instance_peaks_multiply_out():
    hw = load_hardware("trn2")
    assert hw.chip_peak("bf16") == pytest.approx(8 * 128 * 128 * 2 * 2.4e9)
    assert hw.instance_peak("bf16") == pytest.approx(16 * 8 * 128 * 128 * 2 * 2.4e9)
    assert hw.max_chips == 100_000
    inf2 = load_hardware("inf2")
    assert inf2.chip.hbm_bandwidth == 820 * 2**30
    assert inf2.instance.chips == 12


def test_claims_report_differences_and_what_it_would_take():
    rows = {(r.preset, r.what): r for r in all_rows()}
    core = rows[("trn2", "core peak fp8")]
    assert core.agrees is True and core.computed == pytest.approx(157.286e12, rel=1e-4)
    chip = rows[("trn2", "chip peak bf16")]
    assert chip.agrees is False
    assert chip.difference == pytest.approx(8 * 128 * 128 * 2 * 2.4e9 - 667e12)
    # 667 TFLOPS / (8 * 128 * 128 * 2) = 2.544 GHz
    assert "clock 2.544 GHz" in chip.would_take
    claims = {r.subject + "/" + r.what.split(" (")[0]: r for r in claim_rows()}
    trn2 = claims["Trainium2 chip/chip peak bf16"]
    assert trn2.agrees is False
    assert "clock 15.259 GHz" in trn2.would_take        # 4e15 / (8 * 128 * 128 * 2)
    assert "51 cores" in trn2.would_take                 # ceil(4e15 / 78.64e12)
    assert "323 x 323" in trn2.would_take               # ceil(sqrt(4e15 / (8 * 2 * 2.4e9)))
    assert claims["EFA per node/instance network"].agrees is False
    assert claims["UltraCluster/chips in a cluster"].agrees is True


def test_units():
    assert parse_quantity("800 Gbps", "bandwidth") == 100e9
    assert parse_quantity("2.9 TB/s", "bandwidth") == pytest.approx(2.9e12)
    assert parse_quantity("96 GiB", "bytes") == 96 * 2**30
    assert half_unit("92 TFLOPS", "flops") == 0.5e12
    assert half_unit("2.9 TB/s", "bandwidth") == pytest.approx(0.05e12)
    with pytest.raises(ValueError, match="GHz"):
        parse_quantity("2.8 Ghz", "frequency")


GOOD = """
name = "t"
title = "test"
kind = "systolic"
[tile]
rows = 4
cols = 4
clock = "1 GHz"
psum_bank_depth = 512
[tile.macs_per_pe_per_cycle]
bf16 = 1
[core]
name = "c"
tiles = 1
[chip]
name = "x"
cores = 2
hbm_capacity = "1 GiB"
hbm_bandwidth = "1 GB/s"
[instance]
name = "i"
chips = 2
"""


def _write(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


def test_good_file_loads(tmp_path):
    hw = load_hardware(_write(tmp_path, GOOD))
    assert hw.chip_peak("bf16") == 2 * 4 * 4 * 2 * 1e9


@pytest.mark.parametrize("old, new, field, allowed", [
    ("rows = 4", "rows = -4", "tile.rows", "an integer >= 1"),
    ('clock = "1 GHz"', 'clock = "1 Gz"', "tile.clock", "GHz"),
    ('hbm_bandwidth = "1 GB/s"', 'hbm_bandwidth = "1 GB"', "chip.hbm_bandwidth", "Gbps"),
    ('kind = "systolic"', 'kind = "tpu"', "kind", "'systolic', 'gpu'"),
    ("bf16 = 1", "bf17 = 1", "tile.macs_per_pe_per_cycle.bf17", "bf16"),
    ("cores = 2", "cores = 2\ncorez = 3", "chip.corez", "cores"),
    ("chips = 2", "", "instance.chips", "a value must be given"),
])
def test_bad_files_name_file_field_and_allowed(tmp_path, old, new, field, allowed):
    assert old in GOOD
    with pytest.raises(SpecError) as info:
        load_hardware(_write(tmp_path, GOOD.replace(old, new)))
    message = str(info.value)
    assert message.startswith("bad.toml: field ")
    assert f"field {field}:" in message
    assert "allowed:" in message and allowed in message
    assert "\n" not in message


def test_unknown_preset_lists_presets():
    with pytest.raises(SpecError, match="allowed: a100, h100, inf2"):
        load_hardware("trn9")


def test_dtype_without_rate_is_refused():
    with pytest.raises(SpecError, match="field dtype: 'fp8'.*allowed: bf16"):
        load_hardware("inf2").core_peak("fp8")


def test_workload_claims_rows():
    rows = {r.subject: r for r in workload_rows()}
    gpt3 = rows["Trainium2 UltraCluster"]
    v = gpt3.values
    # 300e9 tokens at seq_per_s x 2,048 tokens per second, in days; at most 100,000 chips.
    assert v["days"] == pytest.approx(300e9 / (v["seq_per_s"] * 2048) / 86400)
    assert 90_000 < v["chips"] <= 100_000 and gpt3.adds_up == (v["days"] < 30)
    peak = rows["Trainium2 vs Trainium1"].values["peak_ratio"]
    assert peak == pytest.approx((8 * 2.4) / (2 * 2.8))        # same 128 x 128 array per core
    assert rows["Trainium2 vs Trainium1"].adds_up is False       # 3.43x < 4x
    lat = rows["Inferentia2 instance"]
    assert lat.adds_up == (lat.values["tpot_s"] < 10e-3 and lat.values["ttft_s"] < 10e-3)
    inf = rows["Inferentia2 chip"].values
    assert inf["batch"] >= 1 and inf["tokens_per_s_per_chip"] == pytest.approx(
        inf["batch"] / inf["tpot_s"])                          # one chip, batch / TPOT
