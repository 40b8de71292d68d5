"""Scaling layer: the published benchmark tables (issue 28, point 4) and the points the model
does not predict yet."""

import json
import re

import pytest

from systolica.scaling.calibration import load_calibration, load_points, predict, validate
from systolica.scaling.cli import main
from systolica.scaling.hardware import load_hardware
from systolica.scaling.llm import IDEAL as IDEAL_CAL
from systolica.scaling.llm import Layout, inference
from systolica.scaling.spec import SpecError
from systolica.scaling.workloads import load_transformer

_HEAD = ('[[point]]\nkey = "{key}"\nhw = "trn1"\nmodel = "{model}"\nphase = "{phase}"\n'
         'tp = 32\nbatch = 1\ninput_len = 128\noutput_len = 1024\nweights = "bf16"\n'
         'metric = "{metric}"\npublished = "5 ms"\nsource = "s"\ncalibration = {cal}\n')


def _file(tmp_path, *points):
    path = tmp_path / "p.toml"
    path.write_text("\n".join(points))
    return path


def _point(key="a", model="llama2-13b", phase="decode", metric="tpot", cal="false", extra=""):
    return _HEAD.format(key=key, model=model, phase=phase, metric=metric, cal=cal) + extra


def test_a_not_predicted_point_is_listed_but_never_predicted(tmp_path):
    why = "no model preset: opt"
    path = _file(tmp_path, _point("a", model="opt-13b", extra=f'not_predicted = "{why}"\n'),
                 _point("b"))
    a, b = load_points(path)
    assert a.not_predicted == why and b.not_predicted == ""
    with pytest.raises(ValueError, match="a is not predicted: no model preset: opt"):
        predict(a, IDEAL_CAL)
    row_a, row_b = validate(IDEAL_CAL, [a, b])
    assert row_a.predicted is None and row_a.error is None
    assert row_b.predicted > 0 and row_b.error == pytest.approx(row_b.predicted / 5e-3 - 1)


@pytest.mark.parametrize("points, message", [
    ((_point(phase="train", metric="tpot"),),
     r"field point\[0\].metric: 'tpot' is not predicted for phase 'train'; allowed: "
     r"seq_per_s, or give not_predicted"),
    ((_point(metric="inf_per_s"),),
     r"'inf_per_s' is not predicted for phase 'decode'; allowed: ttft, tpot, e2e_per_token"),
    ((_point("a"), _point("a")),
     r"field point\[1\].key: 'a' is used twice; allowed: a key no other point has"),
    ((_point(cal="true", extra='not_predicted = "x"\n'),),
     r"not_predicted: set on a calibration point; allowed: calibration = false"),
])
def test_bad_points_are_refused_in_one_line(tmp_path, points, message):
    with pytest.raises(SpecError, match=message) as info:
        load_points(_file(tmp_path, *points))
    assert "\n" not in str(info.value)


def test_latency_per_token_is_the_request_time_over_all_its_tokens():
    (point,) = [p for p in load_points()
                if p.key == "llama2-13b.trn1.1024-1024.e2e_per_token@2.16.0"]
    hw, model = load_hardware("trn1"), load_transformer("llama2-13b")
    # a Neuron 2.16 row: transformers-neuronx prefilled with the plain attention graph and
    # decoded from its (positions, sequences, heads, d_head) KV cache
    est = inference(hw, model, Layout(tp=32), 1, 1024, 1024, "bf16", IDEAL_CAL, "standard",
                    "sbh")
    # 1,024 generated tokens: the first comes with the prefill (TTFT), 1,023 decode steps.
    assert predict(point, IDEAL_CAL) == pytest.approx(
        (est.ttft_s + 1023 * est.tpot_s) / 2048)


def test_an_encoder_latency_is_one_forward_pass_of_the_batch():
    (point,) = [p for p in load_points() if p.key == "bert-base.trn1.enc128.b16.latency_p50@2.27.0"]
    assert (point.phase, point.batch, point.input_len, point.layout.tp) == ("encode", 16, 128, 1)
    est = inference(load_hardware("trn1"), load_transformer("bert-base"), Layout(tp=1), 16, 128,
                    1, "bf16", IDEAL_CAL)
    assert predict(point, IDEAL_CAL) == est.ttft_s


def test_cased_bert_and_roberta_rows_are_predicted_like_bert():
    points = {p.key: p for p in load_points()}
    cal = load_calibration()
    uncased = predict(points["bert-base.trn1.enc128.b16.latency_p50@2.27.0"], cal)
    # An encoder's latency does not depend on its vocabulary (an embedding gather): the
    # cased checkpoint and RoBERTa-base cost what BERT-base costs at the same batch.
    for key in ("bert-base-cased.trn1.enc128.b16.latency_p50@2.16.0",
                "roberta-base.trn1.enc128.b16.latency_p50@2.27.0"):
        assert not points[key].not_predicted and not points[key].calibration
        assert predict(points[key], cal) == pytest.approx(uncased, rel=1e-9)
    # RoBERTa-large is BERT-large's shape, 24 layers of 1,024
    large = predict(points["roberta-large.trn1.enc128.b1.latency_p50@2.27.0"], cal)
    assert large > 2 * predict(points["roberta-base.trn1.enc128.b1.latency_p50@2.27.0"], cal)
    # their throughput rows stay unpredicted, as BERT's do
    assert "data-parallel throughput" in \
        points["roberta-base.trn1.enc128.b16.inf_per_s@2.27.0"].not_predicted


def test_the_tables_are_held_out_versioned_and_sourced():
    points = load_points()
    added = [p for p in points if "@" in p.key]
    assert len(added) >= 250
    # held out, but for the long-context TPOT issue 28 calibrates on (an inf2 2.18.0 row)
    assert [p.key for p in added if p.calibration] == ["llama2-13b.inf2.8192-8192.tpot@2.18.0"]
    for p in added:
        version = p.key.split("@")[1]
        assert f"Neuron {version}, row " in p.source, p.key
        assert re.search(r"table (general|about-neuron)/benchmarks/(trn1|inf2)/\w+\.csv "
                         r"\(aws-neuron-sdk commit [0-9a-f]{8}\)", p.source), p.key
    # Two versions of the training table disagree on Llama 3.1 8B: both figures are kept.
    llama31 = {p.key: p.published for p in points if p.model == "llama3.1-8b"}
    assert llama31["llama3.1-8b.trn1.train"] == pytest.approx(47.95)
    key_2_20 = "llama3.1-8b.trn1.train.tp32-pp1-dp32.mb1.gbs1024.bf16@2.20.0"
    assert llama31[key_2_20] == pytest.approx(49.47)
    # The first block's figures are not repeated under a versioned key.
    configs = [(p.hw, p.model, p.metric, p.layout, p.batch, p.input_len, p.output_len,
                round(p.published, 9)) for p in points]
    assert len(configs) == len(set(configs))


def test_a_prefill_estimate_shows_the_encoder_tables_latencies(capsys):
    code = main(["estimate", "--hw", "trn1", "--model", "bert-base", "--phase", "prefill",
                 "--batch", "16", "--input-len", "128", "--json"])
    data = json.loads(capsys.readouterr().out)
    # BERT-base, batch 16, 128 tokens on one trn1 NeuronCore: the Neuron 2.16 and 2.27 tables.
    values = sorted(p["value"] for p in data["published"])
    assert code == 0 and values == pytest.approx([9.34481621e-3, 10.0607872e-3])
    for p in data["published"]:
        assert p["metric"] == "latency_p50"
        assert p["error"] == pytest.approx(data["ttft_s"] / p["value"] - 1)
