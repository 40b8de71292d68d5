"""Workloads: single GEMMs, GEMM-list CSVs, SCALE-Sim topologies, transformer presets.

Every workload becomes a list of :class:`Gemm` operations. Names follow the tile: ``m`` is the
stationary free size (output features, filters), ``k`` the contraction (partition) length and
``n`` the moving free size (tokens, output pixels) of ``out[M, N] = A[M, K] @ B[K, N]``.
"""

import csv
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from .spec import SpecError, Table, load_preset_or_file, preset_names_in

PHASES = ("prefill", "decode", "train")


@dataclass(frozen=True)
class Gemm:
    """One GEMM operation of a workload.

    Attributes
    ----------
    name : str
        Label, e.g. ``"attn.qkv"`` or a SCALE-Sim layer name.
    m, k, n : int
        Stationary free size, contraction length, moving free size (elements, each >= 1).
    count : int
        Independent copies that may run in parallel (e.g. batch x heads of attention).
    repeat : int
        Sequential repetitions (e.g. one per transformer block).
    """

    name: str
    m: int
    k: int
    n: int
    count: int = 1
    repeat: int = 1

    @property
    def flop(self):
        """FLOP of all copies and repetitions: ``2 * m * k * n * count * repeat``."""
        return 2 * self.m * self.k * self.n * self.count * self.repeat

    def bytes_moved(self, dtype_bytes):
        """HBM bytes of one repetition: each copy reads A and B and writes out once.

        ``count * (m*k + k*n + m*n) * dtype_bytes`` (no reuse across copies, outputs written
        in the input data type).
        """
        return self.count * (self.m * self.k + self.k * self.n + self.m * self.n) * dtype_bytes


@dataclass(frozen=True)
class Workload:
    """A named list of GEMMs plus what the cluster model needs of a transformer step.

    Attributes
    ----------
    name : str
    gemms : tuple of Gemm
        Per replica (one tensor-parallel group), per chip of that group.
    phase : str or None
        ``prefill``, ``decode`` or ``train`` for transformer presets; None otherwise.
    tp_allreduce_bytes : int
        Bytes of each tensor-parallel AllReduce (activations), 0 without tensor parallelism.
    tp_allreduces : int
        Number of those AllReduces per step.
    dp_allreduce_bytes : int
        Gradient bytes per chip AllReduced across data-parallel replicas (training), else 0.
    memory_bytes : int or None
        HBM a chip needs to hold (weights, KV cache or gradients and optimizer state); None
        for GEMM lists, whose residency is not modelled.
    notes : tuple of str
    """

    name: str
    gemms: tuple
    phase: str | None = None
    tp_allreduce_bytes: int = 0
    tp_allreduces: int = 0
    dp_allreduce_bytes: int = 0
    memory_bytes: int | None = None
    notes: tuple = ()


def single_gemm(m, k, n, name="gemm"):
    """A workload of one GEMM ``[M, K] x [K, N]``; ValueError on a size below 1."""
    for label, value in (("M", m), ("K", k), ("N", n)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, not {value!r}")
    return Workload(name=f"{name} [{m}, {k}] x [{k}, {n}]", gemms=(Gemm(name, m, k, n),))


def _int_field(path, line, column, text):
    try:
        value = int(str(text).strip())
    except ValueError:
        value = None
    if value is None or value < 1:
        raise SpecError(path.name, f"line {line}, column {column!r}",
                        f"{str(text).strip()!r} is not allowed", "an integer >= 1")
    return value


def load_gemm_csv(path):
    """Read a GEMM list: header ``name,M,K,N`` (optional ``count``), one GEMM per row.

    Raises
    ------
    SpecError
        Naming the file, the line and column, and the allowed values.
    """
    path = Path(path)
    if not path.exists():
        raise SpecError(path.name, "", "file not found", "an existing CSV file")
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise SpecError(path.name, "header", "empty file", "a header name,M,K,N[,count]")
    header = [h.strip() for h in rows[0]]
    if header[:4] != ["name", "M", "K", "N"] or header[4:] not in ([], ["count"]):
        raise SpecError(path.name, "header", f"{','.join(header)!r} is not allowed",
                        "'name,M,K,N' or 'name,M,K,N,count'")
    gemms = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise SpecError(path.name, f"line {line}", f"{len(row)} fields",
                            f"{len(header)} fields as in the header")
        m, k, n = (_int_field(path, line, c, row[i]) for i, c in ((1, "M"), (2, "K"), (3, "N")))
        count = _int_field(path, line, "count", row[4]) if len(row) > 4 else 1
        gemms.append(Gemm(row[0].strip(), m, k, n, count))
    if not gemms:
        raise SpecError(path.name, "rows", "no GEMM rows", "at least one row name,M,K,N")
    return Workload(name=path.stem, gemms=tuple(gemms))


CONV_COLUMNS = ("Layer name", "IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width",
                "Channels", "Num Filter", "Strides")
GEMM_COLUMNS = ("Layer", "M", "N", "K")


def topology_format(path):
    """``"conv"`` or ``"gemm"``, from a SCALE-Sim topology header (``IFMAP`` means conv)."""
    with Path(path).open() as f:
        header = f.readline()
    return "conv" if "ifmap" in header.lower() else "gemm"


def load_scalesim_topology(path, fmt=None):
    """Read a SCALE-Sim topology CSV the way SCALE-Sim v3 reads it.

    SCALE-Sim skips the first line and blank lines, splits each row on commas and drops the
    last field (every row ends with a comma). Conv rows are ``name, ifmap h, ifmap w, filter
    h, filter w, channels, filters, stride,``; a layer whose name contains ``DP`` is depthwise
    and runs once per channel with one channel. GEMM rows are ``name, M, N, K,`` in SCALE-Sim's
    naming (input ``[M, K]``, filter ``[K, N]``). Both become our :class:`Gemm` with the filter
    stationary: ``m`` = filters (SCALE-Sim ``N``), ``k`` = window (``K``), ``n`` = output pixels
    (SCALE-Sim ``M``). An optional sparsity column is accepted and ignored (dense only).

    Parameters
    ----------
    path : str or Path
    fmt : {"conv", "gemm"} or None
        None reads the header to decide (:func:`topology_format`).

    Raises
    ------
    SpecError
        On a missing trailing comma, a wrong field count, a non-integer or a filter larger
        than its input, naming the file, the line, the column and the allowed values.
    """
    path = Path(path)
    if not path.exists():
        raise SpecError(path.name, "", "file not found", "an existing SCALE-Sim topology CSV")
    fmt = fmt or topology_format(path)
    if fmt not in ("conv", "gemm"):
        raise SpecError(path.name, "format", f"{fmt!r} is not allowed", "'conv', 'gemm'")
    columns = CONV_COLUMNS if fmt == "conv" else GEMM_COLUMNS
    gemms = []
    with path.open() as f:
        lines = f.read().splitlines()
    for number, raw in enumerate(lines[1:], start=2):
        row = raw.strip()
        if not row:
            continue
        fields = row.split(",")
        if fields[-1].strip():
            raise SpecError(path.name, f"line {number}", "no trailing comma (SCALE-Sim drops "
                            "the last field of every row)", "rows ending with ','")
        fields = [x.strip() for x in fields[:-1]]
        if len(fields) not in (len(columns), len(columns) + 1):
            raise SpecError(path.name, f"line {number}", f"{len(fields)} fields",
                            f"{len(columns)} fields ({', '.join(columns)}), plus an optional "
                            "sparsity ratio, each followed by ','")
        name = fields[0]
        vals = [_int_field(path, number, c, v) for c, v in zip(columns[1:], fields[1:],
                                                                 strict=False)]
        if fmt == "gemm":
            m_ss, n_ss, k_ss = vals
            gemms.append(Gemm(name, m=n_ss, k=k_ss, n=m_ss))
            continue
        ih, iw, fh, fw, ch, nf, stride = vals
        if fh > ih or fw > iw:
            raise SpecError(path.name, f"line {number}, column 'Filter Height'",
                            f"filter {fh} x {fw} larger than input {ih} x {iw}",
                            "a filter no larger than the IFMAP")
        oh = math.ceil((ih - fh + stride) / stride)
        ow = math.ceil((iw - fw + stride) / stride)
        if "DP" in name:
            gemms.append(Gemm(name, m=nf, k=fh * fw, n=oh * ow, repeat=ch))
        else:
            gemms.append(Gemm(name, m=nf, k=fh * fw * ch, n=oh * ow))
    if not gemms:
        raise SpecError(path.name, "rows", "no layers", "at least one layer row after the header")
    return Workload(name=path.stem, gemms=tuple(gemms))


# ----- transformer presets ----------------------------------------------------------------------


@dataclass(frozen=True)
class Transformer:
    """Architecture hyper-parameters of a decoder-only transformer (from its paper)."""

    name: str
    title: str
    published_params: float
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    d_head: int
    ffn: int
    ffn_kind: str
    vocab: int
    context: int
    source_file: str

    @property
    def params(self):
        """Weight count from the hyper-parameters (attention, FFN, embedding and LM head)."""
        attn = self.d_model * (self.heads + 2 * self.kv_heads) * self.d_head \
            + self.heads * self.d_head * self.d_model
        ffn = (3 if self.ffn_kind == "gated" else 2) * self.d_model * self.ffn
        return self.layers * (attn + ffn) + 2 * self.vocab * self.d_model


def model_dir():
    return resources.files("systolica.scaling").joinpath("presets", "models")


def model_names():
    """Names of the packaged transformer presets, sorted."""
    return preset_names_in(model_dir())


def parse_transformer(data, source):
    """Build a :class:`Transformer` from a parsed TOML dict; :class:`SpecError` when invalid."""
    t = Table(source, data)
    model = Transformer(
        name=t.str("name"), title=t.str("title"), published_params=t.number("published_params"),
        layers=t.int("layers"), d_model=t.int("d_model"), heads=t.int("heads"),
        kv_heads=t.int("kv_heads"), d_head=t.int("d_head"), ffn=t.int("ffn"),
        ffn_kind=t.str("ffn_kind", choices=("gated", "mlp")), vocab=t.int("vocab"),
        context=t.int("context"), source_file=str(source))
    t.finish()
    if model.heads % model.kv_heads:
        raise SpecError(source, "kv_heads", f"{model.kv_heads} does not divide heads = "
                        f"{model.heads}", f"a divisor of {model.heads}")
    return model


def load_transformer(name_or_path):
    """Load a transformer preset by name (``"llama2-7b"``) or a TOML file by path."""
    return load_preset_or_file(name_or_path, model_dir(), "model", parse_transformer)


def _backward(g):
    """The two backward GEMMs of a forward GEMM: dX = A^T dY and dA = dY X^T."""
    return (replace(g, name=g.name + ".dX", m=g.k, k=g.m),
            replace(g, name=g.name + ".dW", k=g.n, n=g.k))


def transformer_workload(model, phase, batch, seq, tp=1, dp=1, dtype_bytes=2):
    """The GEMMs one chip runs for one step of ``model``, and the step's communication.

    Parameters
    ----------
    model : Transformer
    phase : {"prefill", "decode", "train"}
        ``prefill``: ``batch`` prompts of ``seq`` tokens; ``decode``: one new token for each of
        ``batch`` sequences that hold ``seq`` tokens of KV cache; ``train``: forward and
        backward over ``batch`` sequences of ``seq`` tokens (global batch, shared by the
        ``dp`` replicas).
    batch, seq : int
        Sequences and tokens per sequence, each >= 1 (``seq`` <= the model's context).
    tp, dp : int
        Tensor-parallel chips per replica (heads, FFN width and vocabulary split over them,
        the busiest chip takes the ceiling) and data-parallel replicas.
    dtype_bytes : int
        Bytes per element of weights, activations and gradients.

    Returns
    -------
    Workload

    Raises
    ------
    ValueError
        If an argument is out of range; the message names it and the allowed values.
    """
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not allowed; allowed: {', '.join(PHASES)}")
    for label, value in (("batch", batch), ("seq", seq), ("tp", tp), ("dp", dp)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, not {value!r}")
    if seq > model.context:
        raise ValueError(f"seq {seq} is more than {model.name}'s context of {model.context}; "
                         f"allowed: 1 to {model.context}")
    notes = []
    if phase == "train":
        tokens = math.ceil(batch * seq / dp)     # tokens per replica (strong scaling)
        if tokens < seq:
            notes.append(f"{tokens} tokens per replica is less than one sequence: the "
                         "attention of a split sequence (context parallelism) is modelled "
                         "without its K/V exchange")
        seqs, s_q, s_kv = math.ceil(tokens / seq), min(seq, tokens), seq
    else:
        seqs = math.ceil(batch / dp)
        if batch < dp:
            notes.append(f"batch {batch} < dp {dp}: {dp - batch} replicas idle")
        s_q, s_kv = (seq, seq) if phase == "prefill" else (1, seq)
        tokens = seqs * s_q
    d, dh, L = model.d_model, model.d_head, model.layers
    heads = math.ceil(model.heads / tp)
    kv_heads = math.ceil(model.kv_heads / tp)
    group = model.heads // model.kv_heads          # query heads sharing one K/V head (GQA)
    ffn = math.ceil(model.ffn / tp)
    vocab = math.ceil(model.vocab / tp)
    if model.heads % tp or model.ffn % tp:
        notes.append(f"tp={tp} does not divide heads ({model.heads}) or FFN ({model.ffn}): "
                     "the busiest chip takes the larger share")
    block = [
        Gemm("attn.qkv", m=(heads + 2 * kv_heads) * dh, k=d, n=tokens, repeat=L),
        # Scores: stationary K cache [d_head, s_kv] per K/V head, the group's queries moving.
        Gemm("attn.scores", m=s_kv, k=dh, n=s_q * group, count=seqs * kv_heads, repeat=L),
        # Context: stationary V [s_kv, d_head], probabilities moving.
        Gemm("attn.context", m=dh, k=s_kv, n=s_q * group, count=seqs * kv_heads, repeat=L),
        Gemm("attn.out", m=d, k=heads * dh, n=tokens, repeat=L),
    ]
    if model.ffn_kind == "gated":
        block += [Gemm("ffn.gate_up", m=2 * ffn, k=d, n=tokens, repeat=L),
                  Gemm("ffn.down", m=d, k=ffn, n=tokens, repeat=L)]
    else:
        block += [Gemm("ffn.up", m=ffn, k=d, n=tokens, repeat=L),
                  Gemm("ffn.down", m=d, k=ffn, n=tokens, repeat=L)]
    head_n = tokens if phase == "train" else seqs     # logits of the last token only
    block.append(Gemm("lm_head", m=vocab, k=d, n=head_n))
    gemms = list(block)
    if phase == "train":
        for g in block:
            gemms.extend(_backward(g))
    weights = model.params / tp * dtype_bytes
    kv_cache = 2 * L * kv_heads * dh * s_kv * seqs * dtype_bytes
    if phase == "train":
        # Mixed precision with Adam: weights and gradients in dtype, FP32 master copy and two
        # FP32 moments (12 bytes per weight); no ZeRO sharding, no activation memory counted.
        memory = model.params / tp * (2 * dtype_bytes + 12)
        notes.append("memory: weights, gradients and FP32 Adam state per chip (no ZeRO, no "
                     "pipeline parallelism, activations not counted)")
    else:
        memory = weights + kv_cache
    per_step = 4 if phase == "train" else 2        # Megatron: 2 AllReduces forward, 2 backward
    return Workload(
        name=f"{model.title} {phase}, batch {batch}, seq {seq}, tp {tp}, dp {dp}",
        gemms=tuple(gemms), phase=phase,
        tp_allreduce_bytes=tokens * d * dtype_bytes if tp > 1 else 0,
        tp_allreduces=per_step * L if tp > 1 else 0,
        dp_allreduce_bytes=int(weights) if phase == "train" and dp > 1 else 0,
        memory_bytes=int(memory), notes=tuple(notes))
