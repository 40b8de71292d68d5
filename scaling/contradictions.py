"""Pairs of published figures that no model of the hardware can fit both within a tolerance.

Two published runs of the same model, SDK version, batch, prompt and output lengths and
weight type on two instances of the same NeuronCore (same core name, whose
engines the NKI engine model costs alike, and the same tile) are a *pair*
when instance A gives each rank no more work and no less of every resource than instance B:

* A's tensor-parallel degree is at least B's (``pp = dp = 1`` on both), so each rank holds no
  more of the weight GEMMs and no more attention heads or KV heads (``ceil(heads / tp)``,
  heads padded to a multiple of the degree, never grows with it);
* A's HBM bandwidth per NeuronCore is at least B's;
* A's NeuronLink share per rank, divided by the ring's bytes factor ``2 (p - 1) / p``, is at
  least B's, so a tensor-parallel AllReduce of the same activations moves no slower.

The one term that can grow from B to A is the latency of the collectives' algorithm steps
(a ring over more ranks has more of them): at most ``2 (tp_A - tp_B)`` more steps per
AllReduce, two AllReduces per layer and an AllGather of the logits, at the calibrated
latency per step. So any model of the hardware predicts ``time_A <= time_B + allowance``
(the *premise*). If the published figures make ``(1 - tol) x published_A`` larger than
``(1 + tol) x published_B + allowance``, no such model predicts both within ``tol``: at
least one of the two is off by more. :func:`find` lists every pair and says which ones
contradict the premise at a tolerance.

The premise is stated in the shape of AWS's trn1.32xlarge (TP 32) and inf2.48xlarge (TP 24)
rows: both are NeuronCore-v2 (AWS Neuron docs, "Trainium/Inferentia2 Architecture Guide for
NKI"), 820 GB/s of HBM per chip of two cores, NeuronLink 384 against 192 GB/s per chip
("AWS Trn1/Trn1n Architecture", "AWS Inf2 Architecture"); the presets carry those figures and
the pair test reads them, nothing here is specific to the two instances.
"""

import math
from dataclasses import dataclass

from .calibration import load_calibration, load_points, predict
from .hardware import load_hardware
from .workloads import load_transformer

#: Metrics a pair is formed for: one prefill or one decode step, each a single pass.
METRICS = ("ttft", "tpot")
#: The tolerance of issue 28's held-out target.
TOLERANCE = 0.25


@dataclass(frozen=True)
class Pair:
    """Two published points, ``a`` on the instance that gives each rank no more work and no
    less of every resource, ``b`` on the other, and what the premise allows.

    ``allowance_s`` is how much slower than ``b`` the premise lets ``a`` be (seconds: the
    collective steps ``a``'s ring has in addition); ``predicted_a`` / ``predicted_b`` are
    the model's values (seconds) under the calibration :func:`find` was given.
    """

    a: object
    b: object
    allowance_s: float
    predicted_a: float
    predicted_b: float

    @property
    def published_ratio(self):
        """``published_a / published_b`` (the premise says at most about 1)."""
        return self.a.published / self.b.published

    def required_ratio(self, tolerance=TOLERANCE):
        """The smallest ``time_a / time_b`` of a model that predicts both within
        ``tolerance``: ``(1 - tol) published_a / ((1 + tol) published_b)``."""
        return (1 - tolerance) * self.a.published / ((1 + tolerance) * self.b.published)

    def allowed_ratio(self, tolerance=TOLERANCE):
        """The largest ``time_a / time_b`` the premise allows at ``time_b = (1 + tol)
        published_b``: ``1 + allowance / ((1 + tol) published_b)``."""
        return 1 + self.allowance_s / ((1 + tolerance) * self.b.published)

    def contradicts(self, tolerance=TOLERANCE):
        """True when no model obeying the premise predicts both points within
        ``tolerance`` (the required ratio is above the allowed one)."""
        return self.required_ratio(tolerance) > self.allowed_ratio(tolerance)


def _same_run(a, b):
    return (a.model, a.metric, a.batch, a.input_len, a.output_len, a.weights, a.sdk) == \
        (b.model, b.metric, b.batch, b.input_len, b.output_len, b.weights, b.sdk)


def _ring_share(hw, tp):
    """A rank's NeuronLink bytes per second over the ring's bytes factor ``2 (p - 1) / p``
    (infinite for tp 1: no collective)."""
    if tp == 1:
        return math.inf
    return (hw.chip.link_bandwidth or 0.0) / hw.chip.cores / (2 * (tp - 1) / tp)


def dominates(hw_a, a, hw_b, b):
    """True when ``a``'s run gives each rank no more work and no less of every resource than
    ``b``'s (the module's three conditions; same NeuronCore, ``pp = dp = 1`` on both)."""
    la, lb = a.layout, b.layout
    if (la.pp, la.dp, lb.pp, lb.dp) != (1, 1, 1, 1) or hw_a.name == hw_b.name:
        return False
    if hw_a.core is None or hw_b.core is None or hw_a.tile != hw_b.tile or \
            hw_a.core.name != hw_b.core.name:
        return False
    return (la.tp >= lb.tp
            and hw_a.chip.hbm_bandwidth / hw_a.chip.cores >=
            hw_b.chip.hbm_bandwidth / hw_b.chip.cores
            and _ring_share(hw_a, la.tp) >= _ring_share(hw_b, lb.tp))


def find(points=None, cal=None, predicted=None):
    """Every pair of published inference points the premise applies to (list of
    :class:`Pair`, in the order of ``points``), with the model's predictions under ``cal``
    (default: the stored calibration): taken from ``predicted`` (dict, point key -> seconds,
    e.g. from :func:`~systolica.scaling.calibration.validate`'s rows) where it has them.
    Points marked ``not_predicted`` take no part."""
    cal = cal if cal is not None else load_calibration()
    points = [p for p in (points if points is not None else load_points())
              if p.phase == "decode" and p.metric in METRICS and not p.not_predicted]
    predicted = dict(predicted or {})
    hardware, models, pairs = {}, {}, []

    def value(p):
        if p.key not in predicted:
            predicted[p.key] = predict(p, cal, cache)
        return predicted[p.key]

    cache = {}
    for a in points:
        for b in points:
            if a is b or not _same_run(a, b):
                continue
            for name in (a.hw, b.hw):
                if name not in hardware:
                    hardware[name] = load_hardware(name)
            if not dominates(hardware[a.hw], a, hardware[b.hw], b):
                continue
            if a.model not in models:
                models[a.model] = load_transformer(a.model)
            model = models[a.model]
            steps = 2 * (a.layout.tp - b.layout.tp) * (2 * model.layers + 1)
            pairs.append(Pair(a, b, steps * cal.collective_latency_s, value(a), value(b)))
    return pairs


def pair_dict(pair, tolerance=TOLERANCE):
    """One pair as JSON-ready values (the keys of both points, the ratios, the verdict)."""
    return {"a": pair.a.key, "b": pair.b.key, "metric": pair.a.metric,
            "published_a": pair.a.published, "published_b": pair.b.published,
            "published_ratio": pair.published_ratio,
            "required_ratio": pair.required_ratio(tolerance),
            "allowed_ratio": pair.allowed_ratio(tolerance),
            "predicted_ratio": pair.predicted_a / pair.predicted_b,
            "contradicts": pair.contradicts(tolerance)}
