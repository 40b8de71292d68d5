"""Scaling layer: published points, the calibration fit and the validation."""

from dataclasses import replace

import pytest

from systolica.scaling.calibration import (
    fit,
    format_calibration,
    load_calibration,
    load_points,
    validate,
)
from systolica.scaling.spec import SpecError

#: The calibration figures issue 17 names (value as the issue rounds it, in s or seq/s).
ISSUE_17 = {
    ("trn1", "llama2-7b", 128, 8064, "tpot"): 6.70e-3,
    ("trn1", "llama2-7b", 128, 8064, "ttft"): 13.3e-3,
    ("trn1", "llama2-70b", 128, 128, "tpot"): 25.18e-3,
    ("trn1", "llama2-70b", 128, 128, "ttft"): 53.9e-3,
    ("trn1", "llama2-70b", 128, 1024, "tpot"): 25.45e-3,
    ("trn1", "llama2-70b", 128, 1024, "ttft"): 57.8e-3,
    ("inf2", "llama2-7b", 128, 3968, "tpot"): 6.47e-3,
    ("trn1", "llama3.1-8b", 0, 0, "seq_per_s"): 47.95,
}
#: Issue 28 adds a long-prompt TTFT and a long-context TPOT (AWS's Neuron 2.18 decoder
#: tables). The long-context TPOT is the inf2 row of Llama-2-13b at 8,192 / 8,192 (13.50 ms):
#: the trn1 row of the same lengths (13.41 ms) contradicts its own throughput column and is
#: held out, flagged ambiguous.
ISSUE_28 = {
    ("trn1", "llama3-8b", 4096, 4096, "ttft"): 153.02e-3,
    ("inf2", "llama2-13b", 8192, 8192, "tpot"): 13.4976e-3,
}
CALIBRATION = ISSUE_17 | ISSUE_28


def _key(p):
    return (p.hw, p.model, p.input_len, p.output_len, p.metric)


def test_calibration_points_are_exactly_the_issue_17_and_28_figures():
    points = load_points()
    used = {_key(p): p for p in points if p.calibration}
    assert set(used) == set(CALIBRATION) and len(used) <= 10
    for key, value in CALIBRATION.items():
        assert used[key].published == pytest.approx(value, rel=0.005)
    train = used[("trn1", "llama3.1-8b", 0, 0, "seq_per_s")]
    assert (train.layout.tp, train.layout.pp, train.layout.dp, train.layout.zero1) == \
        (32, 1, 32, True)
    assert (train.global_batch, train.seq) == (1024, 8192)
    assert all(p.source.startswith("AWS Neuron docs") for p in points)
    assert sum(not p.calibration for p in points) >= 20


def test_stored_calibration_is_physically_plausible():
    cal = load_calibration()
    assert 0 < cal.hbm_efficiency <= 1
    assert 0 < cal.tensor_efficiency <= 1
    assert 0 < cal.link_efficiency <= 1
    assert 1e-7 < cal.collective_latency_s < 1e-4        # microseconds, not milliseconds
    assert cal.layer_overhead_s == 0                      # the data do not need one
    assert set(cal.fitted_on) == {p.key for p in load_points() if p.calibration}


def test_every_calibration_figure_within_15_percent():
    rows = validate()
    for row in rows:
        if row.point.calibration:
            assert abs(row.error) < 0.15, row.point.key


def test_refit_reproduces_the_stored_values_and_ignores_held_out_points():
    points = load_points()
    # Held-out figures made absurd: a fit that used them would move.
    spoiled = [p if p.calibration else replace(p, published=p.published * 10) for p in points]
    cal, rms = fit(spoiled)
    stored = load_calibration()
    for name in ("hbm_efficiency", "tensor_efficiency", "collective_latency_s",
                 "link_efficiency"):
        assert getattr(cal, name) == pytest.approx(getattr(stored, name), rel=0.02), name
    assert rms < 0.1
    assert "fitted_on = [" in format_calibration(cal, rms)


@pytest.mark.parametrize("text, field, allowed", [
    ("hbm_efficiency = 1.2", "hbm_efficiency", "(0, 1]"),
    ("collective_latency_s = 0.01", "collective_latency_s", "[0, 0.0001]"),
])
def test_implausible_calibration_files_are_refused(tmp_path, text, field, allowed):
    good = format_calibration(load_calibration())
    name = text.split(" =")[0]
    bad = "\n".join(text if line.startswith(name + " =") else line
                    for line in good.splitlines())
    path = tmp_path / "cal.toml"
    path.write_text(bad)
    with pytest.raises(SpecError) as info:
        load_calibration(path)
    assert f"field {field}:" in str(info.value) and allowed in str(info.value)


def test_bad_points_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[point]]\nkey = "x"\nhw = "trn1"\nmodel = "llama2-7b"\nphase = "decode"\n'
                    'metric = "tpot"\npublished = "6.7 furlongs"\nsource = "s"\n'
                    'calibration = true\n')
    with pytest.raises(SpecError, match=r"field point\[0\].published: '6.7 furlongs' is not a "
                                        r"figure; allowed: '<number> ms'"):
        load_points(path)


def test_an_ambiguous_calibration_point_is_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[point]]\nkey = "x"\nhw = "trn1"\nmodel = "llama2-7b"\nphase = "decode"\n'
                    'tp = 32\nbatch = 1\ninput_len = 128\noutput_len = 128\nweights = "bf16"\n'
                    'metric = "tpot"\npublished = "6.7 ms"\nsource = "s"\n'
                    'ambiguous = "its columns disagree"\ncalibration = true\n')
    with pytest.raises(SpecError, match=r"field point\[0\].ambiguous: set on a calibration "
                                        r"point; allowed: calibration = false"):
        load_points(path)


def test_ambiguous_rows_are_held_out_and_say_why():
    points = load_points()
    flagged = [p for p in points if p.ambiguous]
    assert flagged and not any(p.calibration or p.not_predicted for p in flagged)
    by_key = {p.key: p for p in points}
    # the trn1 Llama-2-13b 8,192 / 8,192 row: 31.40 tokens/s x 8,192 tokens is 260.9 s,
    # against 2.368 s + 8,191 x 13.408 ms = 112.2 s from its TTFT and TPOT columns
    row = by_key["llama2-13b.trn1.8192-8192.tpot"]
    assert 8192 / 31.3990051 / (2.367928505 + 8191 * row.published) == pytest.approx(2.33,
                                                                                     abs=0.01)
    assert "2.33x" in row.ambiguous and "31.40 tokens/s" in row.ambiguous
    # the same model and lengths on inf2, whose columns agree, calibrates instead
    inf2 = by_key["llama2-13b.inf2.8192-8192.tpot@2.18.0"]
    assert inf2.calibration and not inf2.ambiguous
    assert 8192 / 73.16747525 / (0.9941797257 + 8191 * inf2.published) == pytest.approx(
        1.0, abs=0.01)


def test_points_know_their_sdk_version_from_the_source():
    points = {p.key: p for p in load_points()}
    assert points["llama2-13b.trn1.8192-8192.ttft"].sdk == (2, 18)
    assert points["llama3.1-8b.trn1.train"].sdk == (2, 24)


def test_the_summary_counts_every_held_out_point_and_again_without_flagged_ones():
    from systolica.scaling.calibration import Row
    from systolica.scaling.report import validation_summary

    base = next(p for p in load_points() if not p.calibration and not p.not_predicted)
    cal = next(p for p in load_points() if p.calibration)

    def row(error, ambiguous="", calibration=False):
        point = replace(cal if calibration else base, ambiguous=ambiguous, published=1.0)
        return Row(point, 1.0 + error)

    rows = [row(0.05, calibration=True), row(0.02), row(-0.08), row(0.20), row(-0.50, "why"),
            row(0.30, "why")]
    s = validation_summary(rows)
    assert s["calibration_points"] == 1 and s["calibration_max_abs_error"] == pytest.approx(0.05)
    assert (s["held_out_points"], s["held_out_within_10pct"], s["held_out_within_25pct"]) == \
        (5, 2, 3)
    assert s["held_out_max_abs_error"] == pytest.approx(0.50)
    assert s["held_out_median_abs_error"] == pytest.approx(0.20)
    assert s["ambiguous_points"] == 2
    assert (s["held_out_unflagged_points"], s["held_out_unflagged_within_25pct"]) == (3, 3)
    assert s["held_out_unflagged_max_abs_error"] == pytest.approx(0.20)
