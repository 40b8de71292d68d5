"""Calibration against AWS's published Neuron measurements, and validation.

``presets/published.toml`` holds every published figure the project carries, each with its
configuration, value, source and whether it is a *calibration* point (the five configurations
issue 17 names: eight figures) or *held out* (used only to check). A point the model cannot
predict yet (a model without a preset, a metric the page does not define, FP32 training)
carries ``not_predicted = "<why>"``: it is loaded and listed, never predicted, never fitted.
A held-out point whose published row contradicts itself or its neighbours (its columns imply
different request times, or its configuration is not the one the page states) carries
``ambiguous = "<why>"``: it is predicted and counted with every other held-out point, and the
summary also gives the held-out figures without the flagged rows.
:func:`fit` chooses the calibrated parameters of :class:`~systolica.scaling.llm.Calibration`
that minimise the sum of squared log errors over the calibration points only, by Nelder-Mead
on transformed parameters that keep them physical: efficiencies in (0, 1], latencies >= 0 and
at most 100 us per collective step and 1 ms per layer. ``presets/calibration.toml`` stores the
fitted values (the model reads them from there; ``systolica validate --refit`` fits afresh and
compares).
"""

import math
import re
from dataclasses import dataclass

import numpy as np

from .hardware import load_hardware
from .llm import Calibration, Layout, context_attention, inference, training
from .spec import SpecError, Table, load_packaged_toml
from .workloads import load_transformer

#: metric -> (what it is, unit of the figure in published.toml).
METRICS = {"tpot": ("mean time per output token after the first", "ms"),
           "ttft": ("time to first token (prefill and the first sampled token)", "ms"),
           "e2e_per_token": ("end-to-end time of a request divided by its input + output "
                             "tokens (Neuron 2.16/2.17 'Latency per Token')", "ms"),
           "latency_p50": ("median time of one forward pass of a batch (encoder tables)",
                           "ms"),
           "inf_per_s": ("inferences per second of a data-parallel run", "inf/s"),
           "seq_per_s": ("training sequences per second", "seq/s")}
#: phase -> the kinds of run a point can describe.
PHASES = ("decode", "encode", "train")
#: phase -> the metrics the model predicts for it.
PREDICTED = {"decode": ("ttft", "tpot", "e2e_per_token"), "encode": ("latency_p50",),
             "train": ("seq_per_s",)}
#: name -> (lower, upper) bound of each calibrated parameter (SI units).
BOUNDS = {"hbm_efficiency": (0.0, 1.0), "tensor_efficiency": (0.0, 1.0),
          "collective_latency_s": (0.0, 100e-6), "layer_overhead_s": (0.0, 1e-3),
          "link_efficiency": (0.0, 1.0)}
_SDK = re.compile(r"Neuron (\d+)\.(\d+)")
_VALUE = re.compile(r"^\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|seq/s|inf/s)\s*$")


@dataclass(frozen=True)
class Point:
    """One published measurement and the configuration it was measured on.

    ``published`` is in SI units (s for times, sequences/s or inferences/s for throughputs);
    ``text`` is the figure as written in the file; ``metric`` is one of :data:`METRICS`;
    ``phase`` one of :data:`PHASES` (``encode``: one forward pass of an encoder over ``batch``
    sequences of ``input_len`` tokens); ``not_predicted`` is empty, or why the model does not
    predict the point; ``ambiguous`` is empty, or why the published figure may not measure
    the configuration the row states (held-out points only).
    """

    key: str
    hw: str
    model: str
    phase: str
    metric: str
    published: float
    text: str
    source: str
    calibration: bool
    layout: Layout
    batch: int = 1
    input_len: int = 0
    output_len: int = 0
    weights: str = "bf16"
    global_batch: int = 0
    seq: int = 0
    not_predicted: str = ""
    ambiguous: str = ""

    @property
    def sdk(self):
        """The Neuron SDK version of the row, ``(major, minor)``, from the source's "Neuron
        2.x" (None when the source names none)."""
        match = _SDK.search(self.source)
        return None if match is None else (int(match.group(1)), int(match.group(2)))

    def describe(self):
        """Configuration in one line, e.g. ``trn1 llama2-7b TP 32, 128/8064, bf16``."""
        lay = self.layout
        par = f"TP {lay.tp}" + (f" PP {lay.pp}" if lay.pp > 1 else "") + \
            (f" DP {lay.dp}" if lay.dp > 1 else "")
        if self.phase == "train":
            return (f"{self.hw} {self.model} train {par}{' ZeRO-1' if lay.zero1 else ''}, "
                    f"GBS {self.global_batch}" + (f", seq {self.seq}" if self.seq else ""))
        if self.phase == "encode":
            return f"{self.hw} {self.model} encoder {par}, batch {self.batch}, seq {self.input_len}"
        if not self.input_len:
            return f"{self.hw} {self.model} {par}, batch {self.batch}, {self.weights}"
        return (f"{self.hw} {self.model} {par}, batch {self.batch}, "
                f"{self.input_len}/{self.output_len}, {self.weights}")


def _parse_value(table, key):
    text = table.str(key)
    match = _VALUE.match(text)
    if not match:
        raise table.error(key, f"{text!r} is not a figure", "'<number> ms', '<number> s', "
                          "'<number> seq/s' or '<number> inf/s'")
    value = float(match.group(1))
    return value / 1e3 if match.group(2) == "ms" else value, text


def load_points(path=None):
    """Published points (default: the packaged ``presets/published.toml``).

    Raises
    ------
    SpecError
        On a missing or malformed field, naming the file and the field.
    """
    data, name = load_packaged_toml(path, "published.toml")
    entries = data.get("point")
    if not isinstance(entries, list):
        raise SpecError(name, "point", "missing or not an array of tables", "[[point]] entries")
    points, seen = [], set()
    for i, entry in enumerate(entries):
        t = Table(name, entry, f"point[{i}]")
        phase = t.str("phase", choices=PHASES)
        reason = t.str("not_predicted", required=False) or ""
        common = {"key": t.str("key"), "hw": t.str("hw"), "model": t.str("model"),
                  "phase": phase, "metric": t.str("metric", choices=tuple(METRICS)),
                  "source": t.str("source"), "calibration": t._get("calibration", True),
                  "not_predicted": reason,
                  "ambiguous": t.str("ambiguous", required=False) or ""}
        common["published"], common["text"] = _parse_value(t, "published")
        if not isinstance(common["calibration"], bool):
            raise t.error("calibration", f"{common['calibration']!r} is not allowed",
                          "true or false")
        if not reason and common["metric"] not in PREDICTED[phase]:
            raise t.error("metric", f"{common['metric']!r} is not predicted for phase "
                          f"{phase!r}", ", ".join(PREDICTED[phase]) + ", or give "
                          "not_predicted = \"<why>\"")
        if common["calibration"] and reason:
            raise t.error("not_predicted", "set on a calibration point",
                          "calibration = false for a point the model does not predict")
        if common["calibration"] and common["ambiguous"]:
            raise t.error("ambiguous", "set on a calibration point",
                          "calibration = false for a row that may not measure what it states")
        if phase == "decode":
            # A table that gives no prompt/output split is kept only as a not-predicted point.
            point = Point(**common, layout=Layout(tp=t.int("tp")), batch=t.int("batch"),
                          input_len=t.int("input_len", required=not reason) or 0,
                          output_len=t.int("output_len", required=not reason) or 0,
                          weights=t.str("weights"))
        elif phase == "encode":
            point = Point(**common, layout=Layout(tp=t.int("tp")), batch=t.int("batch"),
                          input_len=t.int("input_len"), output_len=1)
        else:
            zero1 = t._get("zero1", True)
            point = Point(**common, layout=Layout(tp=t.int("tp"), pp=t.int("pp"),
                                                  dp=t.int("dp"),
                                                  micro_batch=t.int("micro_batch"),
                                                  zero1=bool(zero1)),
                          global_batch=t.int("global_batch"),
                          seq=t.int("seq", required=not reason) or 0)
        t.finish()
        if point.key in seen:
            raise t.error("key", f"{point.key!r} is used twice", "a key no other point has")
        seen.add(point.key)
        points.append(point)
    return points


def published_stack(point, model):
    """``(attention, kv_layout)`` of :func:`systolica.scaling.llm.inference` for an inference
    ``point`` of ``model``: the decoder tables ran transformers-neuronx, so a decoder row
    with an SDK version gets that release's context encoding
    (:func:`~systolica.scaling.llm.context_attention`) and its ``sbh`` KV cache; anything else
    the defaults (``flash``, ``kernel``)."""
    if point.sdk is None or not model.decoder:
        return "flash", "kernel"
    return context_attention(point.sdk, point.input_len), "sbh"


def predict(point, cal, cache=None):
    """The model's value for ``point`` under calibration ``cal`` (SI units).

    Raises
    ------
    ValueError
        For a point marked ``not_predicted`` (the message gives the reason).
    """
    if point.not_predicted:
        raise ValueError(f"{point.key} is not predicted: {point.not_predicted}")
    cache = {} if cache is None else cache
    if point.hw not in cache:
        cache[point.hw] = load_hardware(point.hw)
    if point.model not in cache:
        cache[point.model] = load_transformer(point.model)
    hw, model = cache[point.hw], cache[point.model]
    if point.phase == "train":
        return training(hw, model, point.layout, point.global_batch, point.seq, cal).seq_per_s
    attention, kv_layout = published_stack(point, model)
    est = inference(hw, model, point.layout, point.batch, point.input_len, point.output_len,
                    point.weights, cal, attention, kv_layout)
    if point.metric == "e2e_per_token":
        total_s = est.ttft_s + (point.output_len - 1) * (est.tpot_s or 0.0)
        return total_s / (point.input_len + point.output_len)
    # An encoder's forward pass over the batch is the prefill the estimate costs.
    return est.tpot_s if point.metric == "tpot" else est.ttft_s


# ----- the fit ----------------------------------------------------

FITTED = ("hbm_efficiency", "tensor_efficiency", "collective_latency_s", "link_efficiency")
_SCALE = {"hbm_efficiency": 1.0, "tensor_efficiency": 1.0, "collective_latency_s": 1e-6,
          "layer_overhead_s": 1e-6}


def _to_params(x, names):
    """Unconstrained vector -> parameters inside :data:`BOUNDS` (logistic per bound)."""
    out = {}
    for value, name in zip(x, names, strict=True):
        lo, hi = BOUNDS[name]
        out[name] = lo + (hi - lo) / (1 + math.exp(-value))
    return out


def _nelder_mead(f, x0, steps=600, tol=1e-10):
    x0 = np.asarray(x0, float)
    simplex = [x0] + [x0 + np.eye(len(x0))[i] * 0.5 for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(steps):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < tol:
            break
        centre = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflect = centre + (centre - worst)
        fr = f(reflect)
        if fr < values[0]:
            expand = centre + 2 * (centre - worst)
            fe = f(expand)
            simplex[-1], values[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflect, fr
        else:
            contract = centre + 0.5 * (worst - centre)
            fc = f(contract)
            if fc < values[-1]:
                simplex[-1], values[-1] = contract, fc
            else:
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (s - best) for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    i = int(np.argmin(values))
    return simplex[i], values[i]


def fit(points=None, names=FITTED):
    """Fit the calibrated parameters on the calibration points only.

    Parameters
    ----------
    points : list of Point or None
        Default: :func:`load_points`; points with ``calibration = false`` are ignored.
    names : tuple of str
        Parameters to fit (the others stay at their ideal values).

    Returns
    -------
    (Calibration, float)
        The fitted calibration and the RMS log error over the points it was fitted on.
    """
    points = [p for p in (points if points is not None else load_points())
              if p.calibration and not p.not_predicted]
    cache = {}

    def loss(x):
        cal = Calibration(**_to_params(x, names))
        return sum(math.log(predict(p, cal, cache) / p.published) ** 2 for p in points)

    # Start from mid-range values: efficiencies 0.5, latencies a few microseconds.
    start = {"hbm_efficiency": 0.0, "tensor_efficiency": 0.0, "link_efficiency": 0.0,
             "collective_latency_s": -3.0, "layer_overhead_s": -5.0}
    best_x, best = None, math.inf
    for shift in (0.0, 1.5):
        x, value = _nelder_mead(loss, [start[n] + shift for n in names])
        if value < best:
            best_x, best = x, value
    params = _to_params(best_x, names)
    cal = Calibration(**params, fitted_on=tuple(p.key for p in points))
    return cal, math.sqrt(best / len(points))


def load_calibration(path=None):
    """The stored calibration (``presets/calibration.toml`` unless ``path`` is given).

    Raises
    ------
    SpecError
        On a missing field or a value outside its physical bounds (:data:`BOUNDS`).
    """
    data, name = load_packaged_toml(path, "calibration.toml")
    t = Table(name, data)
    values = {}
    for key in (*FITTED, "layer_overhead_s"):
        value = t._get(key, True)
        lo, hi = BOUNDS[key]
        if not isinstance(value, int | float) or isinstance(value, bool) or \
                not lo <= value <= hi or (key.endswith("efficiency") and value == 0):
            raise t.error(key, f"{value!r} is not allowed",
                          f"a number in {'(' if key.endswith('efficiency') else '['}{lo:g}, "
                          f"{hi:g}]")
        values[key] = float(value)
    fitted_on = t._get("fitted_on", True)
    t._get("note", False)
    t.finish()
    return Calibration(**values, fitted_on=tuple(fitted_on))


#: What each parameter is, for the stored file and the printed table.
MEANING = {
    "hbm_efficiency": "fraction of the published HBM bandwidth sustained",
    "tensor_efficiency": "fraction of the tile cycle model's GEMM rate sustained",
    "collective_latency_s": "seconds per collective algorithm step (NeuronLink and EFA)",
    "link_efficiency": "fraction of the published NeuronLink bandwidth one rank's share sustains",
    "layer_overhead_s": "seconds per layer per pass (not fitted: the data do not need it)",
}


def format_calibration(cal, rms=None):
    """The TOML text of a calibration (what ``presets/calibration.toml`` holds)."""
    lines = ["# Calibrated parameters of the scaling layer's transformer model "
             "(systolica.scaling.llm).",
             "# Written by `systolica validate --refit --write`: fitted on the calibration "
             "points of",
             "# published.toml only (fitted_on); every other published figure is held out.",
             f'note = "RMS log error over the fitted points: {rms:.4f}"' if rms is not None
             else 'note = ""']
    for key in (*FITTED, "layer_overhead_s"):
        lines.append(f"{key} = {getattr(cal, key):.4g}  # {MEANING[key]}")
    lines.append("fitted_on = [")
    lines += [f'    "{k}",' for k in cal.fitted_on]
    lines.append("]")
    return "\n".join(lines) + "\n"


# ----- validation -------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One validation row: the point, the prediction (SI units; None when the point is not
    predicted) and the relative error."""

    point: Point
    predicted: float | None

    @property
    def error(self):
        """``predicted / published - 1``; None for a point that is not predicted."""
        if self.predicted is None:
            return None
        return self.predicted / self.point.published - 1


def validate(cal=None, points=None):
    """Predict every published point under ``cal`` (default: the stored calibration); points
    marked ``not_predicted`` get a row with ``predicted = None``."""
    cal = cal if cal is not None else load_calibration()
    points = points if points is not None else load_points()
    cache = {}
    return [Row(p, None if p.not_predicted else predict(p, cal, cache)) for p in points]
