"""Workloads: single GEMMs, GEMM-list CSVs, SCALE-Sim topologies, transformer presets.

Every workload becomes a list of :class:`Gemm` operations. Names follow the tile: ``m`` is the
stationary free size (output features, filters), ``k`` the contraction (partition) length and
``n`` the moving free size (tokens, output pixels) of ``out[M, N] = A[M, K] @ B[K, N]``.
"""

import csv
import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from systolica.golden import check_positive

from .spec import SpecError

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
    weight : bool
        The stationary operand is a model weight (read once per repetition whatever ``count``
        and ``n``; its bytes follow the weight storage type), not an activation or KV cache.
    """

    name: str
    m: int
    k: int
    n: int
    count: int = 1
    repeat: int = 1
    weight: bool = False

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
        check_positive(label, value)
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


# ----- transformer models (Hugging Face config.json) -------------------------------------------

#: model_type -> FFN kind: the config families that are read.
MODEL_TYPES = {"llama": "gated", "mistral": "gated", "gpt2": "mlp", "bert": "mlp",
               "roberta": "mlp", "camembert": "mlp", "electra": "mlp", "distilbert": "mlp"}
#: Encoder families, each BERT's layer (post-LayerNorm attention and GELU MLP, learned
#: positions): BERT; RoBERTa, which keeps BERT's architecture and changes its pre-training and
#: vocabulary (Liu et al. 2019, 'RoBERTa', arXiv:1907.11692: its analysis runs the BERT-Base
#: configuration, L = 12, H = 768, A = 12, and RoBERTa itself follows BERT-Large), and
#: CamemBERT, RoBERTa trained on French (Martin et al. 2020, arXiv:1911.03894); ELECTRA's
#: discriminator, a BERT encoder (Clark et al. 2020, arXiv:2003.10555; its config's
#: ``embedding_size`` equals ``hidden_size`` for the base model, so no projection is left
#: out); DistilBERT, BERT-Base with every other layer (Sanh et al. 2019, arXiv:1910.01108,
#: 6 layers). All but DistilBERT carry BERT's field names.
ENCODER_TYPES = ("bert", "roberta", "camembert", "electra", "distilbert")
#: model_type -> its config.json's names for (hidden size, layers, heads, FFN width, positions),
#: where they are not Llama's and BERT's (``hidden_size``, ``num_hidden_layers``,
#: ``num_attention_heads``, ``intermediate_size``, ``max_position_embeddings``).
FIELD_NAMES = {"gpt2": ("n_embd", "n_layer", "n_head", "n_inner", "n_positions"),
               "distilbert": ("dim", "n_layers", "n_heads", "hidden_dim",
                              "max_position_embeddings")}


@dataclass(frozen=True)
class Transformer:
    """Architecture hyper-parameters of a transformer, read from a Hugging Face ``config.json``.

    Attributes
    ----------
    name, title : str
        Preset or file stem, and a readable title.
    published_params : float or None
        Parameter count as its paper states it (from the ``_systolica`` block), for comparison.
    layers, d_model, heads, kv_heads, d_head, ffn, vocab, context : int
        Blocks, hidden size, query heads, key/value heads (grouped-query attention when fewer
        than ``heads``), head width, FFN width, vocabulary, maximum positions.
    ffn_kind : str
        ``"gated"`` (SwiGLU: gate, up and down matrices) or ``"mlp"`` (up and down).
    tied : bool
        Input embedding and LM head share one matrix.
    decoder : bool
        Causal LM with an LM head (Llama, Mistral, GPT-2/3); False for ``BertModel``.
    learned_positions : bool
        A learned position-embedding table (GPT-2/3, BERT) rather than rotary embeddings.
    source_file, source : str
        File the config came from, and the citation of its figures.
    """

    name: str
    title: str
    published_params: float | None
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    d_head: int
    ffn: int
    ffn_kind: str
    vocab: int
    context: int
    tied: bool
    decoder: bool
    learned_positions: bool
    source_file: str
    source: str = ""

    @property
    def params(self):
        """Weight count: attention, FFN, embeddings and LM head (norms and biases left out)."""
        return self.layers * self.block_params + self.embedding_params

    @property
    def block_params(self):
        """Weights of one block: Q, K, V, O projections and the FFN matrices."""
        attn = self.d_model * (self.heads + 2 * self.kv_heads) * self.d_head \
            + self.heads * self.d_head * self.d_model
        return attn + (3 if self.ffn_kind == "gated" else 2) * self.d_model * self.ffn

    @property
    def embedding_params(self):
        """Token embedding, LM head unless tied (decoders only), learned positions if any."""
        head = self.vocab * self.d_model if self.decoder and not self.tied else 0
        pos = self.context * self.d_model if self.learned_positions else 0
        return self.vocab * self.d_model + head + pos


def model_dir():
    return resources.files("systolica.scaling").joinpath("presets", "models")


def model_names():
    """Names of the packaged model configs (``presets/models/*.json``), sorted."""
    return sorted(p.name[:-5] for p in model_dir().iterdir() if p.name.endswith(".json"))


def _cfg_int(source, data, key, default=None, fallback=None):
    """A positive integer field of a config; ``fallback`` names the key's other spelling."""
    for name in (key, fallback):
        if name is not None and name in data and data[name] is not None:
            value = data[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(source, name, f"{value!r} is not allowed", "an integer >= 1")
            return value
    if default is not None:
        return default
    raise SpecError(source, key, "missing", "a value must be given (an integer >= 1)")


def parse_hf_config(data, source, name=None):
    """Build a :class:`Transformer` from a parsed Hugging Face ``config.json``.

    Reads the fields of ``LlamaForCausalLM`` / ``MistralForCausalLM`` (``hidden_size``,
    ``intermediate_size``, ``num_hidden_layers``, ``num_attention_heads``,
    ``num_key_value_heads``, ``head_dim``, ``vocab_size``, ``max_position_embeddings``,
    ``tie_word_embeddings``), GPT-2/GPT-3 (``n_embd``, ``n_layer``, ``n_head``, ``n_inner``,
    ``n_positions``) and ``BertModel`` / RoBERTa (as Llama's names, MLP FFN, no LM head). An
    optional ``_systolica`` block holds ``title``, ``published_params`` and ``source``.

    Raises
    ------
    SpecError
        On a missing field, a non-positive size, an unknown ``model_type``, heads that
        ``num_key_value_heads`` does not divide, or ``hidden_size`` not divisible by the heads
        without a ``head_dim``; the one-line message names the file and the field.
    """
    if not isinstance(data, dict):
        raise SpecError(source, "", "not a JSON object", "a Hugging Face config.json")
    model_type = data.get("model_type")
    if model_type not in MODEL_TYPES:
        raise SpecError(source, "model_type", f"{model_type!r} is not allowed",
                        ", ".join(repr(t) for t in MODEL_TYPES))
    gpt2 = model_type == "gpt2"
    hidden_key, layers_key, heads_key, ffn_key, positions_key = FIELD_NAMES.get(
        model_type, ("hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings"))
    d = _cfg_int(source, data, hidden_key)
    layers = _cfg_int(source, data, layers_key)
    heads = _cfg_int(source, data, heads_key)
    kv_heads = heads if gpt2 or model_type in ENCODER_TYPES else _cfg_int(
        source, data, "num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise SpecError(source, "num_key_value_heads", f"{kv_heads} does not divide "
                        f"num_attention_heads = {heads}", f"a divisor of {heads}")
    if "head_dim" in data and data["head_dim"] is not None:
        d_head = _cfg_int(source, data, "head_dim")
    elif d % heads:
        raise SpecError(source, heads_key,
                        f"{heads} does not divide the hidden size {d} (and no head_dim)",
                        f"a divisor of {d}, or a head_dim field")
    else:
        d_head = d // heads
    ffn = _cfg_int(source, data, ffn_key, default=4 * d if gpt2 else None)
    vocab = _cfg_int(source, data, "vocab_size")
    context = _cfg_int(source, data, positions_key)
    tied = data.get("tie_word_embeddings", gpt2)
    if not isinstance(tied, bool):
        raise SpecError(source, "tie_word_embeddings", f"{tied!r} is not allowed",
                        "true or false")
    meta = data.get("_systolica", {})
    if not isinstance(meta, dict):
        raise SpecError(source, "_systolica", f"{meta!r} is not allowed",
                        "an object with title, published_params, source")
    published = meta.get("published_params")
    if published is not None and (not isinstance(published, int | float) or published <= 0):
        raise SpecError(source, "_systolica.published_params", f"{published!r} is not allowed",
                        "a number > 0")
    stem = name or Path(str(source)).stem
    return Transformer(
        name=stem, title=str(meta.get("title", stem)), published_params=published,
        layers=layers, d_model=d, heads=heads, kv_heads=kv_heads, d_head=d_head, ffn=ffn,
        ffn_kind=MODEL_TYPES[model_type], vocab=vocab, context=context, tied=tied,
        decoder=model_type not in ENCODER_TYPES,
        learned_positions=model_type == "gpt2" or model_type in ENCODER_TYPES,
        source_file=str(source), source=str(meta.get("source", "")))


def load_transformer(name_or_path):
    """Load a packaged model config by name (``"llama2-7b"``) or a ``config.json`` by path.

    Raises
    ------
    SpecError
        If the text names neither a preset nor an existing ``.json`` file (the message lists
        the presets), if the file is not JSON, or as :func:`parse_hf_config`.
    """
    text = str(name_or_path)
    if text in model_names():
        with resources.as_file(model_dir().joinpath(text + ".json")) as path:
            return parse_hf_config(json.loads(path.read_text()), f"{text}.json", text)
    path = Path(text)
    if not path.is_file() or path.suffix != ".json":
        what = ("no such model preset or config.json file" if not path.exists() else
                "a folder, not a config.json file" if path.is_dir() else
                "not a .json file (a Hugging Face config.json is)")
        raise SpecError(text, "", what,
                        ", ".join(model_names()) + ", or a path to a Hugging Face config.json")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SpecError(path.name, "", f"not valid JSON ({e})", "a Hugging Face config.json") \
            from None
    return parse_hf_config(data, path.name, path.parent.name if path.name == "config.json"
                           else path.stem)


def _backward(g):
    """The two backward GEMMs of a forward GEMM: dX = A^T dY and dA = dY X^T."""
    return (replace(g, name=g.name + ".dX", m=g.k, k=g.m),
            replace(g, name=g.name + ".dW", k=g.n, n=g.k))


def transformer_workload(model, phase, batch, seq, tp=1, dp=1, dtype_bytes=2, lm_head=True):
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
    lm_head : bool
        Include the LM head (False for a pipeline stage that does not hold it).

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
        check_positive(label, value)
    if phase == "decode" and not model.decoder:
        raise ValueError(f"{model.name} is an encoder (no LM head): it does not decode; "
                         "allowed phases: prefill, train")
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
    group = math.ceil(heads / kv_heads)   # query heads per K/V head on one shard (GQA)
    ffn = math.ceil(model.ffn / tp)
    vocab = math.ceil(model.vocab / tp)
    if model.heads % tp or model.ffn % tp:
        notes.append(f"tp={tp} does not divide heads ({model.heads}) or FFN ({model.ffn}): "
                     "the busiest chip takes the larger share")
    block = [
        Gemm("attn.qkv", m=(heads + 2 * kv_heads) * dh, k=d, n=tokens, repeat=L, weight=True),
        # Scores: stationary K cache [d_head, s_kv] per K/V head, the group's queries moving.
        Gemm("attn.scores", m=s_kv, k=dh, n=s_q * group, count=seqs * kv_heads, repeat=L),
        # Context: stationary V [s_kv, d_head], probabilities moving.
        Gemm("attn.context", m=dh, k=s_kv, n=s_q * group, count=seqs * kv_heads, repeat=L),
        Gemm("attn.out", m=d, k=heads * dh, n=tokens, repeat=L, weight=True),
    ]
    if model.ffn_kind == "gated":
        block += [Gemm("ffn.gate_up", m=2 * ffn, k=d, n=tokens, repeat=L, weight=True),
                  Gemm("ffn.down", m=d, k=ffn, n=tokens, repeat=L, weight=True)]
    else:
        block += [Gemm("ffn.up", m=ffn, k=d, n=tokens, repeat=L, weight=True),
                  Gemm("ffn.down", m=d, k=ffn, n=tokens, repeat=L, weight=True)]
    if model.decoder and lm_head:
        head_n = tokens if phase == "train" else seqs     # logits of the last token only
        block.append(Gemm("lm_head", m=vocab, k=d, n=head_n, weight=True))
    elif phase == "train" and lm_head:
        # An encoder trains as BERT pre-training does (AWS's BERT rows: the Neuron "Hugging
        # Face BERT Pretraining Tutorial", model BertForPreTraining): the masked-LM prediction
        # head runs on every position, a d x d transform (GELU, LayerNorm) and a decoder onto
        # the vocabulary tied to the word embeddings; the next-sentence head (d x 2 on one
        # token per sequence) is left out. Inference ("Raw Output (AutoModel)") has no head.
        block += [Gemm("mlm.transform", m=d, k=d, n=tokens, weight=True),
                  Gemm("mlm.decoder", m=vocab, k=d, n=tokens, weight=True)]
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
