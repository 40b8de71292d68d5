"""The all-MiniLM-L6-v2 encoder in numpy, with every matmul behind one interface.

:func:`encode` runs the model as sentence-transformers does (embeddings, six BERT layers,
mean pooling, L2 normalisation). Its matmuls go through a :class:`Matmuls` object, so a run
can send them elsewhere (:mod:`systolica.workloads.minilm.run` sends them to the RTL tile):

- **linear**: per layer ``q``, ``k``, ``v`` (one call, they share their input), ``o``,
  ``up``, ``down``: ``x [T, in] @ W.T [in, out] + b``, with the tokens of all sentences
  concatenated (these GEMMs act on each token alone, so no padding is needed);
- **scores**: per sentence and head ``Q_h K_h^T`` ([t, 32] x [32, t], unscaled);
- **context**: per sentence and head ``P V_h`` ([t, t] x [t, 32]).

Everything else (embedding sums, LayerNorm, the ``1/sqrt(32)`` scale and softmax, GELU,
residual adds, pooling) is FP32 numpy here.

Determinism: the reference's matmuls do not use BLAS, whose sums are reordered by blocking,
SIMD kernel and thread count (the same slice gave embedding cosines differing in the 11th
digit with one and two OpenBLAS threads, and in a Dask worker). :func:`ordered_matmul` fixes
the order of every add, so the reference, and every figure measured against it, has the same
bits in every process and for every thread count, on one machine and build. The rest is
elementwise numpy and numpy's own reductions, whose order depends only on the array's
shape; across machines ``np.exp`` (its SIMD path is chosen by the CPU) and ``math.erf``
(the C library's) may still differ in the last bit.
"""

import math

import numpy as np

from systolica.workloads.minilm.weights import HEAD_DIM, HEADS, LAYER_NORM_EPS, LAYERS, weight_name


def _layer_norm(x, weight, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(LAYER_NORM_EPS)) * weight + bias).astype(
        np.float32)


def ordered_matmul(a, b):
    """``a @ b`` with every add in a fixed order: products formed in float64 (exact for
    float32 operands), summed over k ascending in float64, rounded once to float32.

    Parameters
    ----------
    a : numpy.ndarray, float32, shape [..., M, K]
    b : numpy.ndarray, float32, shape [..., K, N]
        Leading (batch) dimensions must match.

    Returns
    -------
    numpy.ndarray, float32, shape [..., M, N]
        The same bits whatever the BLAS library or its thread count, on any machine with
        IEEE float64 (unlike ``a @ b``).

    Raises
    ------
    ValueError
        If the contraction sizes differ.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul of [..., {a.shape[-2]}, {a.shape[-1]}] by "
                         f"[..., {b.shape[-2]}, {b.shape[-1]}]: contraction sizes differ")
    a64 = np.ascontiguousarray(np.moveaxis(a, -1, 0), np.float64)   # [K, ..., M]
    b64 = np.ascontiguousarray(np.moveaxis(b, -2, 0), np.float64)   # [K, ..., N]
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]))
    product = np.empty_like(acc)
    for ak, bk in zip(a64, b64, strict=True):
        np.multiply(ak[..., :, None], bk[..., None, :], out=product)
        acc += product
    return acc.astype(np.float32)


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    """BERT's exact GELU, ``x * (1 + erf(x / sqrt 2)) / 2`` (float32 in, float32 out)."""
    erf = _ERF(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64)
    return (0.5 * x.astype(np.float64) * (1.0 + erf)).astype(np.float32)


def softmax(scores):
    """Row softmax of float32 scores [t, t] (float32, each row sums to 1)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


class Matmuls:
    """The FP32 reference matmuls; subclasses send some of them elsewhere.

    Every method may be called from one thread per run; shapes are in the method docs.
    """

    def linear(self, layer, calls):
        """Linear layers that share nothing but the call.

        Parameters
        ----------
        layer : int
        calls : list of (str, numpy.ndarray, numpy.ndarray, numpy.ndarray)
            ``(gemm, x [T, in], weight [out, in], bias [out])``, all float32.

        Returns
        -------
        list of numpy.ndarray, float32, shape [T, out]
            ``x @ weight.T + bias`` per call.
        """
        return [(ordered_matmul(x, weight.T) + bias).astype(np.float32)
                for _gemm, x, weight, bias in calls]

    def scores(self, layer, queries, keys):
        """Unscaled attention scores per (sentence, head).

        Parameters
        ----------
        layer : int
        queries, keys : list of numpy.ndarray, float32, shape [t, 32]
            One pair per sentence and head (sentence-major), ``t`` the sentence's tokens.

        Returns
        -------
        list of numpy.ndarray, float32, shape [t, t]
            ``Q_h @ K_h.T`` (query rows, key columns).
        """
        return [ordered_matmul(q, k.T) for q, k in zip(queries, keys, strict=True)]

    def context(self, layer, probs, values):
        """Attention context per (sentence, head).

        Parameters
        ----------
        layer : int
        probs : list of numpy.ndarray, float32, shape [t, t]
            Softmax of the scaled scores (query rows, key columns).
        values : list of numpy.ndarray, float32, shape [t, 32]

        Returns
        -------
        list of numpy.ndarray, float32, shape [t, 32]
            ``P @ V_h``.
        """
        return [ordered_matmul(p, v) for p, v in zip(probs, values, strict=True)]


def encode(weights, ids, matmuls=None, layers=LAYERS):
    """Sentence embeddings of all-MiniLM-L6-v2, as sentence-transformers computes them.

    Parameters
    ----------
    weights : dict
        From :func:`~systolica.workloads.minilm.weights.load_weights`.
    ids : list of numpy.ndarray of int64
        Token ids per sentence, from :func:`~systolica.workloads.minilm.weights.tokenize`.
    matmuls : Matmuls, optional
        Where the matmuls run (default: :class:`Matmuls`, FP32 numpy).
    layers : int
        Encoder layers to run (6, the model; fewer only for tests of the plumbing).

    Returns
    -------
    (numpy.ndarray, dict)
        float32 [sentences, 384] L2-normalised mean-pooled embeddings, and a trace:
        ``trace[(layer, gemm)] = (inputs, output)``. For a linear GEMM ``inputs`` is the
        float32 input [T, in] and ``output`` [T, out]; for ``scores`` and ``context``
        ``inputs`` is a tuple of the two operand lists and ``output`` the list of results
        per (sentence, head).
    """
    matmuls = matmuls or Matmuls()
    lengths = [len(s) for s in ids]
    offsets = np.cumsum([0] + lengths)
    spans = list(zip(offsets[:-1], offsets[1:], strict=True))
    flat = np.concatenate(ids)
    positions = np.concatenate([np.arange(n) for n in lengths])
    w = weights
    h = (w["embeddings.word_embeddings.weight"][flat]
         + w["embeddings.position_embeddings.weight"][positions]
         + w["embeddings.token_type_embeddings.weight"][0])
    h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    trace = {}

    def linear(i, gemms, x):
        calls = [(g, x, w[weight_name(i, g) + ".weight"], w[weight_name(i, g) + ".bias"])
                 for g in gemms]
        ys = matmuls.linear(i, calls)
        for g, y in zip(gemms, ys, strict=True):
            trace[(i, g)] = (x, y)
        return ys

    def heads(x):
        return [np.ascontiguousarray(x[a:b, hd * HEAD_DIM:(hd + 1) * HEAD_DIM])
                for a, b in spans for hd in range(HEADS)]

    scale = np.float32(1.0 / math.sqrt(HEAD_DIM))
    for i in range(layers):
        q, k, v = linear(i, ("q", "k", "v"), h)
        qh, kh, vh = heads(q), heads(k), heads(v)
        scores = matmuls.scores(i, qh, kh)
        trace[(i, "scores")] = ((qh, kh), scores)
        probs = [softmax((s * scale).astype(np.float32)) for s in scores]
        ctx = matmuls.context(i, probs, vh)
        trace[(i, "context")] = ((probs, vh), ctx)
        context = np.empty_like(q)
        for j, c in enumerate(ctx):
            (a, b), hd = spans[j // HEADS], j % HEADS
            context[a:b, hd * HEAD_DIM:(hd + 1) * HEAD_DIM] = c
        p = f"encoder.layer.{i}."
        (o,) = linear(i, ("o",), context)
        h = _layer_norm(o + h, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"])
        (up,) = linear(i, ("up",), h)
        (down,) = linear(i, ("down",), gelu(up))
        h = _layer_norm(down + h, w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"])
    pooled = np.stack([h[a:b].mean(axis=0) for a, b in spans])
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32), trace
