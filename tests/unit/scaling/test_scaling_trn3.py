"""Trainium3 (NeuronCore-v4) in the scaling layer: presets, published figures from the tile's
rates, Trainium3 against Trainium2, MXFP8 estimates."""

import json

import pytest

from systolica.scaling.claims import all_rows, generation_rows
from systolica.scaling.cli import main
from systolica.scaling.hardware import DTYPE_BYTES, load_hardware, preset_dir
from systolica.scaling.llm import IDEAL, Layout, inference
from systolica.scaling.model import step_estimate
from systolica.scaling.spec import SpecError
from systolica.scaling.workloads import Gemm, Workload, load_transformer

PE_CYCLE = 128 * 128 * 2 * 2.4e9          # FLOP/s of one MAC per PE per cycle, 128 x 128, 2.4 GHz


@pytest.mark.parametrize("name", ["trn3", "trn3-gen2"])
@pytest.mark.parametrize("dtype, macs, published", [
    ("mxfp8", 4, 315), ("mxfp4", 4, 315), ("bf16", 1, 79), ("fp32", 0.25, 20)])
def test_core_peaks_from_the_tile_rates(name, dtype, macs, published):
    hw = load_hardware(name)
    assert hw.core_peak(dtype) == pytest.approx(macs * PE_CYCLE, rel=1e-12)
    # AWS "NeuronCore-v4 Architecture": 315 / 79 / 20 TFLOPS. MX and BF16 within 1 %; FP32's
    # two-digit 20 is 19.66 rounded (1.7 %), equal at the published precision.
    error = abs(hw.core_peak(dtype) / (published * 1e12) - 1)
    assert error < (0.01 if dtype != "fp32" else 0.02)
    assert round(hw.core_peak(dtype) / 1e12) == published


def test_claims_rows_for_trainium3():
    rows = {(r.preset, r.what): r for r in all_rows()}
    for dtype in ("mxfp8", "mxfp4", "bf16", "fp32"):
        assert rows[("trn3", f"core peak {dtype}")].agrees is True
    assert rows[("trn3", "chip peak mxfp8")].agrees is True          # 2,517 = 8 x 314.57
    chip = rows[("trn3", "chip peak bf16")]                           # 671 is not 8 x 78.64
    assert chip.agrees is False and "clock 2.560 GHz" in chip.would_take
    # 161,088 = 64 x the rounded 2,517: compared within 64 x its rounding.
    gen1 = rows[("trn3", "instance peak mxfp8")]
    assert gen1.agrees is True and abs(gen1.difference) > 0.5e12
    assert "64 x the rounded chip figure" in gen1.source
    assert rows[("trn3-gen2", "instance peak mxfp8")].stated == 362_448e12


def test_trainium3_against_trainium2():
    rows = {r.figure: r for r in generation_rows()}
    assert rows["chip peak FP8 (Trainium3: MXFP8)"].factor == pytest.approx(2.0)
    assert rows["chip peak BF16"].factor == pytest.approx(1.0)
    assert rows["chip peak FP32"].old is None                          # trn2 has no FP32 rate
    assert rows["HBM capacity"].factor == pytest.approx(1.5)
    assert rows["HBM bandwidth"].factor == pytest.approx(4.9 / 2.9)
    assert rows["chip-to-chip link"].factor == pytest.approx(2.0)
    assert [r.published_factor for r in rows.values()] == ["2x", "1x", "1x", "1.5x", "1.7x", "2x"]


def test_ultraserver_presets():
    gen1, gen2 = load_hardware("trn3"), load_hardware("trn3-gen2")
    assert (gen1.instance.chips, gen2.instance.chips) == (64, 144)
    assert gen1.instance.fabric == gen2.instance.fabric == "switched"
    assert gen1.chip.hbm_bytes == 144 * 2**30 and gen1.core.sbuf_bytes == 32 * 2**20
    assert gen2.instance.network_bandwidth == 28_800e9 / 8


def _preset(tmp_path, edit):
    src = preset_dir().joinpath("trn3.toml").read_text()
    path = tmp_path / "t3.toml"
    path.write_text(edit(src))
    return path


@pytest.mark.parametrize("old, new, field, allowed", [
    ('fabric = "switched"', 'fabric = "mesh"', "instance.fabric", "'switched'"),
    ("fp32 = 0.25", "fp32 = 0", "tile.macs_per_pe_per_cycle.fp32", "a number > 0"),
])
def test_bad_trn3_fields(tmp_path, old, new, field, allowed):
    path = _preset(tmp_path, lambda s: s.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_hardware(path)
    assert f"field {field}:" in str(info.value) and allowed in str(info.value)


def test_mxfp8_gemm_estimate_runs_at_four_times_bf16():
    hw = load_hardware("trn3")
    work = Workload("g", [Gemm("g", 4096, 4096, 8192)])
    bf16, mx = step_estimate(hw, work, "bf16"), step_estimate(hw, work, "mxfp8")
    assert DTYPE_BYTES["mxfp8"] == 1 + 1 / 32
    assert bf16.gemms[0].compute_s / mx.gemms[0].compute_s == pytest.approx(4, rel=0.02)
    assert mx.gemms[0].bytes / bf16.gemms[0].bytes == pytest.approx((1 + 1 / 32) / 2)


def test_mxfp8_weights_and_activations_in_a_model_estimate():
    hw, model = load_hardware("trn3"), load_transformer("llama3-8b")
    args = (hw, model, Layout(tp=8), 8, 2048, 1)
    bf16 = inference(*args, "bf16", IDEAL)
    mx = inference(*args, "mxfp8", IDEAL)
    assert mx.ttft_s < bf16.ttft_s / 2                 # prefill is compute-bound
    assert mx.memory_bytes < bf16.memory_bytes
    assert any("MXFP8" in n for n in mx.notes)
    with pytest.raises(ValueError, match="trn2 has no mxfp8 rate"):
        inference(load_hardware("trn2"), model, Layout(tp=8), 8, 128, 1, "mxfp8", IDEAL)


def test_claims_json_lists_the_generations(capsys):
    assert main(["claims", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    figures = {g["figure"]: g for g in out["generations"]}
    assert figures["chip peak FP8 (Trainium3: MXFP8)"]["factor"] == pytest.approx(2.0)
