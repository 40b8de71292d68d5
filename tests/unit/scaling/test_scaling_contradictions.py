"""Scaling layer: pairs of published runs that no model of the hardware can fit both."""

from dataclasses import replace

import pytest

from systolica.scaling.calibration import load_calibration, load_points
from systolica.scaling.contradictions import Pair, dominates, find
from systolica.scaling.hardware import load_hardware

#: The Neuron 2.18.0 long-prompt TTFT rows, batch 1, where AWS's trn1 TP 32 figure is 2.4-2.6x
#: its inf2 TP 24 figure (AWS Neuron docs, trn1 and inf2 latency_data_decoder tables).
SLOW_TRN1 = {("llama2-13b", 4096), ("llama2-13b", 8192), ("codellama-13b", 4096),
             ("codellama-13b", 8192), ("mistral-7b", 8192)}


@pytest.fixture(scope="module")
def points():
    return load_points()


@pytest.fixture(scope="module")
def pairs(points):
    return find(points)


def _point(points, key):
    return next(p for p in points if p.key == key)


def test_a_trn1_core_at_tp_32_is_paired_with_an_inf2_core_at_tp_24_and_not_back(points):
    trn1, inf2 = load_hardware("trn1"), load_hardware("inf2")
    a = _point(points, "llama2-13b.trn1.4096-4096.ttft")
    b = _point(points, "llama2-13b.inf2.4096-4096.ttft@2.18.0")
    assert dominates(trn1, a, inf2, b)
    assert not dominates(inf2, b, trn1, a)          # fewer ranks: more work per rank
    # Another NeuronCore generation is not paired, however many ranks it has.
    assert not dominates(load_hardware("trn2"), a, inf2, b)
    # Pipeline stages change what a rank holds: no pair.
    staged = replace(a, layout=replace(a.layout, pp=2))
    assert not dominates(trn1, staged, inf2, b)


def test_the_verdict_follows_the_published_ratio_and_the_tolerance(points):
    a = _point(points, "llama2-13b.trn1.4096-4096.ttft")
    b = _point(points, "llama2-13b.inf2.4096-4096.ttft@2.18.0")
    pair = Pair(replace(a, published=0.300), replace(b, published=0.200), 0.0, 0.1, 0.1)
    # Needed: 0.75 x 0.3 / (1.25 x 0.2) = 0.9 <= 1: a model can fit both within 25 %.
    assert pair.required_ratio() == pytest.approx(0.9)
    assert not pair.contradicts()
    # Within 10 % it cannot: 0.9 x 0.3 / (1.1 x 0.2) = 1.227 > 1.
    assert pair.contradicts(0.10)
    # An allowance of 0.1 s lets A be 1 + 0.1 / 0.22 = 1.45x B.
    assert not replace(pair, allowance_s=0.1).contradicts(0.10)


def test_the_contradicting_pairs_are_the_slow_trn1_long_prompt_rows(pairs):
    bad = {(p.a.model, p.a.input_len) for p in pairs if p.contradicts()}
    assert bad == SLOW_TRN1
    assert all(p.a.metric == "ttft" and p.a.hw == "trn1" and p.b.hw == "inf2"
               for p in pairs if p.contradicts())
    # Each of them is flagged ambiguous for its own reason (its columns disagree).
    assert all(p.a.ambiguous for p in pairs if p.contradicts())


def test_the_model_obeys_the_premise_on_every_pair(pairs):
    assert len(pairs) >= 20
    cal = load_calibration()
    for p in pairs:
        assert p.predicted_a / p.predicted_b <= p.allowed_ratio(), p.a.key
        assert p.allowance_s == pytest.approx(
            2 * (p.a.layout.tp - p.b.layout.tp) * cal.collective_latency_s
            * (2 * {"llama2-7b": 32, "llama2-13b": 40, "codellama-13b": 40,
                    "llama2-70b": 80, "mistral-7b": 32}[p.a.model] + 1))

