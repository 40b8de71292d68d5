"""Scaling layer: the systolica command (estimate, claims), its outputs and its errors."""

import csv
import io
import json
import subprocess
import sys

import pytest

from systolica.scaling.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_estimate_table_prints_published_figure_for_a_measured_configuration(capsys):
    # --tp counts NeuronCores (Neuron's tp_degree): 24 cores = the 12 chips of inf2.48xlarge.
    code, out, _ = run(capsys, "estimate", "--hw", "inf2", "--model", "llama2-7b", "--tp", "24",
                       "--input-len", "128", "--output-len", "3968")
    assert code == 0
    assert "AWS published tpot" in out and "6.470 ms" in out and "calibration point" in out
    assert "TTFT (prefill)" in out and "TPOT (mean decode step)" in out
    assert "attn.qkv" in out and "12 chips" in out


def test_estimate_json_carries_the_inference_fields(capsys):
    # as the Inf2 row ran (transformers-neuronx 2.18: plain context encoding, SBH KV cache)
    code, out, _ = run(capsys, "estimate", "--hw", "inf2", "--model", "llama2-7b",
                       "--tp", "24", "--input-len", "128", "--output-len", "3968", "--json",
                       "--context-attention", "standard", "--kv-layout", "sbh")
    data = json.loads(out)
    assert code == 0 and data["chips"] == 12 and data["tp"] == 24
    assert data["tokens_per_s"] == pytest.approx(1 / data["tpot_s"])    # batch 1
    assert data["step_s"] == data["tpot_s"] and data["seq_per_s"] is None
    # The Inf2 table (Neuron 2.18.0) gives this configuration's TPOT and TTFT.
    pubs = {p["metric"]: p for p in data["published"]}
    assert sorted(pubs) == ["tpot", "ttft"]
    assert pubs["tpot"]["value"] == pytest.approx(6.47e-3)
    assert pubs["tpot"]["error"] == pytest.approx(data["tpot_s"] / 6.47e-3 - 1)
    assert pubs["ttft"]["value"] == pytest.approx(27.638e-3, rel=1e-4)
    assert pubs["ttft"]["error"] == pytest.approx(data["ttft_s"] / 27.638e-3 - 1, rel=1e-3)
    assert 0 < data["calibration"]["hbm_efficiency"] <= 1
    assert not any("another stack" in note for note in data["notes"])


def test_estimate_names_the_stack_a_published_row_ran_when_the_options_differ(capsys):
    _, out, _ = run(capsys, "estimate", "--hw", "inf2", "--model", "llama2-7b", "--tp", "24",
                    "--input-len", "128", "--output-len", "3968", "--json")
    notes = json.loads(out)["notes"]
    assert ("AWS's row ran another stack: its errors are of the estimate with "
            "--context-attention standard --kv-layout sbh, as systolica validate costs it"
            in notes)


def test_uncalibrated_decode_is_the_hbm_lower_limit(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "inf2", "--model", "llama2-7b", "--tp", "24",
                       "--input-len", "128", "--output-len", "2", "--uncalibrated", "--json")
    data = json.loads(out)
    # Every bf16 weight of the 32 blocks read once per token, shared by 24 NeuronCores at
    # 820 GiB/s / 2 each; the embedding table is not read by the GEMMs.
    d, ffn = 4096, 11008
    block = 4 * d * d + 3 * d * ffn
    per_core = (32 * block / 24 + 32000 * d / 24) * 2
    limit = per_core / (820 * 2**30 / 2)
    assert data["calibration"]["ideal"] is True
    # the weight GEMMs sit at the HBM limit; the engine model's non-GEMM work (attention core,
    # norms, residuals) comes on top
    gemm = data["terms"]["decode_step"]["gemm_s"]
    assert limit * 0.98 < gemm < limit * 1.25 and data["tpot_s"] > gemm


def test_estimate_training_json_and_scaling_plot(capsys, tmp_path):
    png = tmp_path / "out.png"
    code, out, _ = run(capsys, "estimate", "--hw", "trn1", "--model", "llama3.1-8b",
                       "--phase", "train", "--tp", "32", "--dp", "32", "--zero1",
                       "--global-batch", "1024", "--seq", "8192", "--json", "--scaling",
                       "--plot", str(png))
    data = json.loads(out)
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["chips"] == 512 and data["seq_per_s"] == pytest.approx(1024 / data["step_s"])
    assert 0 < data["mfu"] < 1 and data["ttft_s"] is None
    assert data["published"][0]["value"] == 47.95
    assert [p["dp"] for p in data["scaling"]][:3] == [1, 2, 4]
    assert data["scaling"][0]["efficiency"] == 1.0


def test_estimate_csv_from_scalesim_topology(capsys, tmp_path):
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\nfc1, 64, 48, 80,\nfc2, 9, 200, 30,\n")
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--workload", str(topo), "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["name"] for r in rows] == ["fc1", "fc2"]
    # fc1 on 128 x 128: one fold, 2 * 128 + 128 + 64 - 2 = 446 cycles, minus one.
    assert rows[0]["scalesim_ws_cycles"] == "445"


def test_single_gemm(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--gemm", "256,256,1024", "--json")
    data = json.loads(out)
    assert code == 0 and data["gemms"][0]["flop"] == 2 * 256 * 256 * 1024


def test_claims(capsys):
    code, out, _ = run(capsys, "claims", "--json")

    def no_nan(literal):                  # JSON has no NaN; json.dumps writes one unasked
        raise AssertionError(f"{literal} in --json output")

    rows = json.loads(out, parse_constant=no_nan)["figures"]
    assert code == 0
    inf2_chip = next(r for r in rows if r["preset"] == "inf2" and r["what"] == "chip peak bf16")
    assert inf2_chip["stated"] == "not published" and inf2_chip["stated_value"] is None
    chip = next(r for r in rows if r["preset"] == "trn2" and r["what"] == "chip peak bf16")
    assert chip["stated"] == "667 TFLOPS" and chip["agrees"] is False
    assert chip["difference"] == pytest.approx(8 * 128 * 128 * 2 * 2.4e9 - 667e12)
    code, out, _ = run(capsys, "claims")
    assert code == 0 and "what it would take" in out and "NO" in out


@pytest.mark.parametrize("argv, needle", [
    (["estimate", "--hw", "trn9", "--gemm", "1,1,1"], "trn9: no such hardware preset"),
    # an existing file of another kind was told "no such ... preset or .toml file"
    (["estimate", "--hw", __file__, "--gemm", "1,1,1"], "a .py file, not a .toml hardware file"),
    (["estimate", "--hw", "inf2", "--gemm", "1,1,1", "--dtype", "fp8"],
     "error: --dtype fp8: hardware 'inf2' has no fp8 rate; allowed: bf16"),
    (["estimate", "--hw", "inf2", "--model", "llama3"],
     "allowed: bert-base, bert-base-cased, bert-base-cased-finetuned-mrpc, bert-large, "
     "bert-large-cased, camembert-base, codellama-13b, distilbert-base-cased"),
    (["estimate", "--hw", "inf2", "--model", "llama2-70b", "--tp", "48"],
     "48 NeuronCores is more than inf2 describes; allowed: 1 to 24"),
    (["estimate", "--hw", "trn1", "--model", "llama2-7b", "--tp", "64"],
     "tp 64 is more than llama2-7b's 32 attention heads; allowed: 1 to 32"),
    (["estimate", "--hw", "trn1", "--model", "llama2-7b", "--phase", "train", "--dp", "3",
      "--global-batch", "100"], "global batch 100 is not a multiple of dp x micro-batch = 3"),
    (["estimate", "--hw", "trn1", "--model", "bert-base", "--phase", "decode"],
     "bert-base is an encoder"),
    (["estimate", "--hw", "h100", "--model", "llama2-7b"], "allowed: a NeuronCore preset"),
    (["validate", "--write", "x.toml"], "--write needs --refit"),
    (["estimate", "--hw", "trn2", "--gemm", "1,1,1", "--link-bandwidth", "9 furlongs"],
     "--link-bandwidth: '9 furlongs' is not a bandwidth figure; allowed: '<number> <unit>'"),
])
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_hardware_file_through_cli(capsys, tmp_path):
    bad = tmp_path / "hw.toml"
    bad.write_text('name = "x"\ntitle = "x"\nkind = "systolic"\n[tile]\nrows = 0\n')
    code, _, err = run(capsys, "estimate", "--hw", str(bad), "--gemm", "1,1,1")
    assert code == 2
    assert err == "error: hw.toml: field tile.rows: 0 is not allowed; allowed: an integer >= 1\n"


def test_console_script_and_module_help():
    for cmd in (["-m", "systolica.scaling", "--help"],
                ["-m", "systolica.scaling", "estimate", "--help"],
                ["-m", "systolica.scaling", "claims", "--help"],
                ["-m", "systolica.scaling", "validate", "--help"]):
        result = subprocess.run([sys.executable, *cmd], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0 and "usage:" in result.stdout


def test_gemm_list_memory_is_reported_as_not_modelled(capsys):
    assert main(["estimate", "--hw", "trn2", "--gemm", "256,256,256", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory_bytes_per_chip"] is None and out["fits_in_hbm"] is None


def test_model_from_a_config_file_and_its_errors(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 2048,
                               "intermediate_size": 5632, "num_hidden_layers": 22,
                               "num_attention_heads": 32, "num_key_value_heads": 4,
                               "vocab_size": 32000, "max_position_embeddings": 2048}))
    code, out, _ = run(capsys, "estimate", "--hw", "trn2", "--model", str(cfg), "--tp", "4",
                       "--json")
    data = json.loads(out)
    # trn2: LNC=2, so 4 logical NeuronCores are one chip of 8 physical cores.
    assert code == 0 and data["chips"] == 1 and data["ttft_s"] > 0
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 2048,
                               "intermediate_size": 5632, "num_hidden_layers": 22,
                               "num_attention_heads": 32, "num_key_value_heads": 5,
                               "vocab_size": 32000, "max_position_embeddings": 2048}))
    code, _, err = run(capsys, "estimate", "--hw", "trn2", "--model", str(cfg))
    assert code == 2 and err == ("error: config.json: field num_key_value_heads: 5 does not "
                                 "divide num_attention_heads = 32; allowed: a divisor of 32\n")


def test_validate_json_lists_every_point(capsys, tmp_path):
    png = tmp_path / "v.png"
    code, out, _ = run(capsys, "validate", "--json", "--plot", str(png))
    data = json.loads(out)
    assert code == 0 and png.exists()
    used = [p for p in data["points"] if p["calibration"]]
    assert len(used) == 10 and len(data["points"]) > 10
    for p in data["points"]:
        if p["not_predicted"]:
            assert p["predicted"] is None and p["error"] is None and not p["calibration"]
        else:
            assert p["error"] == pytest.approx(p["predicted"] / p["published"] - 1)
        assert "AWS Neuron docs" in p["source"]
    skipped = sum(bool(p["not_predicted"]) for p in data["points"])
    assert 0 < skipped < len(data["points"]) - 10
    assert data["summary"]["not_predicted_points"] == skipped
    assert data["summary"]["calibration_max_abs_error"] < 0.15
    bad = [p for p in data["pairs"] if p["contradicts"]]
    assert data["summary"]["pairs_compared"] == len(data["pairs"]) > len(bad) > 0
    assert data["summary"]["contradicting_pairs"] == len(bad)
    assert all(p["required_ratio"] > p["allowed_ratio"] > p["predicted_ratio"] for p in bad)
    code, out, _ = run(capsys, "validate")
    assert code == 0 and "held out" in out and "collective_latency_s" in out
    assert f"; {len(bad)} of them no model of the hardware predicts both within 25 %" in out
    assert bad[0]["a"] in out and bad[0]["b"] in out
    assert "not predicted: no model preset" in out and f"not predicted: {skipped}" in out


def test_estimate_terms_prints_each_pass_by_engine(capsys):
    code, out, _ = run(capsys, "estimate", "--hw", "trn1", "--model", "llama2-13b", "--tp",
                       "32", "--input-len", "8192", "--output-len", "16", "--terms")
    assert code == 0 and "Where each pass's time goes" in out
    for column in ("TensorE", "ScalarE", "VectorE", "DMA/HBM", "collectives", "fixed overhead"):
        assert column in out
    assert "prefill (TTFT)" in out and "mean decode step (TPOT)" in out


def test_estimate_terms_needs_a_model(capsys):
    code, _, err = run(capsys, "estimate", "--hw", "trn1", "--gemm", "128,128,128", "--terms")
    assert code == 2 and "--terms applies to --model estimates" in err


def test_estimate_context_attention_standard_slows_the_prefill_only(capsys):
    args = ("estimate", "--hw", "trn1", "--model", "llama2-13b", "--tp", "32", "--input-len",
            "4096", "--output-len", "4", "--json")
    _, flash, _ = run(capsys, *args)
    _, plain, _ = run(capsys, *args, "--context-attention", "standard")
    flash, plain = json.loads(flash), json.loads(plain)
    assert plain["ttft_s"] > flash["ttft_s"] and plain["tpot_s"] == flash["tpot_s"]
    with pytest.raises(SystemExit):
        main(["estimate", "--hw", "trn1", "--model", "llama2-13b", "--context-attention",
              "paged"])
    assert "invalid choice: 'paged'" in capsys.readouterr().err


@pytest.mark.parametrize("extra, needle", [
    (["--phase", "train", "--batch", "4"], "--batch does not apply to --phase train; it "
     "applies to --model with --phase decode or prefill; allowed: leave it out"),
    (["--phase", "train", "--weights", "int8"], "--weights does not apply to --phase train"),
    (["--phase", "train", "--context-attention", "standard"],
     "--context-attention does not apply to --phase train"),
    (["--phase", "prefill", "--kv-layout", "sbh"],
     "--kv-layout does not apply to --phase prefill; it applies to --model with --phase "
     "decode"),
    (["--phase", "prefill", "--output-len", "8"], "--output-len does not apply to --phase "
     "prefill; it applies to --model with --phase decode"),
    (["--phase", "decode", "--global-batch", "8"], "--global-batch does not apply to "
     "--phase decode; it applies to --model with --phase train"),
    (["--seq", "512"], "--seq does not apply to --phase decode"),
    (["--phase", "prefill", "--zero1"], "--zero1 does not apply to --phase prefill"),
    (["--recompute", "full"], "--recompute does not apply to --phase decode"),
    (["--micro-batch", "2"], "--micro-batch does not apply to --phase decode"),
    (["--max-chips", "64"], "--max-chips does not apply to --phase decode"),
    (["--dtype", "fp8"], "--dtype does not apply to a --model estimate; it applies to GEMM "
     "workloads (--workload CSV, --gemm)"),
])
def test_estimate_refuses_options_of_another_phase(capsys, extra, needle):
    # Before: each was accepted and silently ignored (the estimate was the same without it).
    code, out, err = run(capsys, "estimate", "--hw", "trn1", "--model", "llama2-7b", *extra)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert needle in err


@pytest.mark.parametrize("extra", [["--phase", "train"], ["--batch", "2"], ["--seq", "64"],
                                   ["--weights", "int8"], ["--context-attention", "standard"],
                                   # a GEMM list is the tile model's cycles on one chip: these
                                   # three changed nothing (same figures with and without)
                                   ["--uncalibrated"], ["--calibration", "cal.toml"],
                                   ["--link-bandwidth", "1 TB/s"]])
def test_estimate_refuses_model_options_for_a_gemm(capsys, extra):
    code, _, err = run(capsys, "estimate", "--hw", "trn2", "--gemm", "128,128,128", *extra)
    assert code == 2 and err.count("\n") == 1
    assert f"{extra[0]} does not apply to a GEMM workload; it applies to --model" in err


def test_estimate_options_of_the_phase_are_taken(capsys):
    # Given explicitly at their defaults, the phase's own options change nothing.
    base = ("estimate", "--hw", "trn1", "--model", "llama2-7b", "--tp", "8", "--json")
    for extra in ([], ["--batch", "1", "--input-len", "128", "--output-len", "128",
                       "--weights", "bf16", "--context-attention", "flash"]):
        code, out, _ = run(capsys, *base, *extra)
        assert code == 0
        figures = json.loads(out)
        assert figures["ttft_s"] > 0
        if not extra:
            first = (figures["ttft_s"], figures["tpot_s"])
    assert (figures["ttft_s"], figures["tpot_s"]) == first
    code, out, _ = run(capsys, "estimate", "--hw", "trn1", "--model", "llama2-7b", "--phase",
                       "train", "--tp", "8", "--dp", "4", "--global-batch", "64", "--seq",
                       "512", "--micro-batch", "2", "--zero1", "--recompute", "full", "--json")
    assert code == 0 and json.loads(out)


def test_a_prompt_past_the_models_context_is_noted_with_what_was_costed(capsys):
    # llama2-13b's max_position_embeddings is 4,096 (its Hugging Face config.json): a prefill
    # of 8,192 tokens is costed with its first generated token, a request with its output.
    code, out, _ = run(capsys, "estimate", "--hw", "trn1", "--model", "llama2-13b", "--tp",
                       "32", "--input-len", "8192", "--phase", "prefill")
    assert code == 0
    assert "input 8192 + the first generated token = 8193 tokens is more than" in out
    code, out, _ = run(capsys, "estimate", "--hw", "trn1", "--model", "llama2-13b", "--tp",
                       "32", "--input-len", "4000", "--output-len", "200")
    assert code == 0 and "input 4000 + output 200 = 4200 tokens is more than" in out


@pytest.mark.parametrize("kind, message", [
    ("missing", "no such model preset or config.json file"),
    ("folder", "a folder, not a config.json file"),
    ("text", "not a .json file (a Hugging Face config.json is)")])
def test_a_model_path_that_is_not_a_config_says_what_it_is(capsys, tmp_path, kind, message):
    path = {"missing": tmp_path / "nope.json", "folder": tmp_path,
            "text": tmp_path / "passwd"}[kind]
    if kind == "text":
        path.write_text("root:x:0:0\n")
    code, _, err = run(capsys, "estimate", "--hw", "trn1", "--model", str(path))
    assert code == 2 and err.startswith(f"error: {path}: {message}; allowed: bert-base, ")
    assert err.count("\n") == 1
