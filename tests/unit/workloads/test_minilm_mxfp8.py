"""Unit tier: the MiniLM workload's MXFP8 precision (``--dtypes mxfp8``) without a simulator:
its quantisation, the plan's MX accounting, the tile it needs and its refusals."""

import numpy as np
import pytest

from systolica.golden import program_cycles
from systolica.hdl.config import TileConfig
from systolica.sim.api.tiling import MxOperand, golden_tiled_matmul
from systolica.workloads import minilm
from systolica.workloads.minilm.quantize import mx_operand_values, quantize_mx_operand
from systolica.workloads.minilm.run import model_config, plan_programs

E4M3FN_HALF_ULP = 2.0**-4      # RNE to 3 mantissa bits: within half an ulp, 2^-4 relative
E4M3FN_SUBNORMAL_HALF = 2.0**-10   # half the subnormal spacing 2^-9, in units of the scale
BF16_HALF_ULP = 2.0**-8        # RNE to 7 mantissa bits


@pytest.fixture(scope="module")
def layer0():
    """Real operands of layer 0: the query and FFN-down weights [out, in] and their input
    activations [T, in] for the built-in sentences."""
    weights = minilm.load_weights()
    ids = minilm.tokenize(list(minilm.DEFAULT_SENTENCES), minilm.load_tokenizer())
    _, trace = minilm.encode(weights, ids)
    return {"q": (weights["encoder.layer.0.attention.self.query.weight"], trace[(0, "q")][0]),
            "down": (weights["encoder.layer.0.output.dense.weight"], trace[(0, "down")][0])}


def _scale_of_each_element(operand, k):
    """The E8M0 scale value each row k of a [K, F] matrix gets, from NKI's layout spelled out
    independently: SBUF tiles of 512 rows; in a tile of Kt rows, row r sits at partition
    r % (Kt / 4) (lane r // (Kt / 4)); a scale covers 8 partitions."""
    rows = []
    for r in range(k):
        tile, local = divmod(r, 512)
        kt = min(512, k - 512 * tile)
        partition = 128 * tile + local % (kt // 4)
        rows.append(partition // 8)
    bits = operand.scale.view(np.uint8).astype(np.int64)[rows]          # [K, F]
    return np.ldexp(1.0, bits - 127)


@pytest.mark.parametrize("gemm", ["q", "down"])
@pytest.mark.parametrize("side", ["weight", "activation"])
def test_mx_operands_dequantise_within_e4m3fn_rounding_of_the_bf16_values(layer0, gemm, side):
    weight, x = layer0[gemm]
    matrix = (weight if side == "weight" else x).T.astype(np.float32)       # [K, F]
    operand = quantize_mx_operand(matrix)
    k, f = matrix.shape
    assert operand.data.shape == (k // 4, f, 4) and operand.scale.shape == (k // 32, f)
    values = mx_operand_values(operand)
    assert values.shape == (k, f)
    scale = _scale_of_each_element(operand, k)
    m = matrix.astype(np.float64)
    bound = ((E4M3FN_HALF_ULP + BF16_HALF_ULP) * np.abs(m) * (1 + E4M3FN_HALF_ULP)
             + E4M3FN_SUBNORMAL_HALF * scale)
    assert np.all(np.abs(values - m) <= bound)
    # nki.isa.quantize_mx's scale: each group's largest |value| / scale lands in [128, 256)
    # (nothing saturates at 448), so the group's elements keep their 3 mantissa bits.
    per_group = np.abs(m) / scale
    groups = np.zeros((k // 32, f))
    for r in range(k):   # the group of row r: its scale's row (as above)
        tile, local = divmod(r, 512)
        kt = min(512, k - 512 * tile)
        g = (128 * tile + local % (kt // 4)) // 8
        groups[g] = np.maximum(groups[g], per_group[r])
    assert np.all((groups >= 127.5) & (groups < 256))


def test_an_mxfp8_gemm_is_within_a_few_percent_of_fp32(layer0):
    weight, x = layer0["down"]
    stationary, moving = quantize_mx_operand(weight.T), quantize_mx_operand(x.T)
    out = golden_tiled_matmul(stationary, moving, 8)                    # [384, T], on 8 rows
    fp32 = weight.astype(np.float64) @ x.astype(np.float64).T
    assert np.linalg.norm(out - fp32) / np.linalg.norm(fp32) < 0.05
    exact = mx_operand_values(stationary).T @ mx_operand_values(moving)
    assert np.allclose(out, exact, rtol=1e-4, atol=1e-4 * np.abs(exact).max())


def test_mx_operand_needs_whole_scale_groups_along_k():
    with pytest.raises(ValueError, match=r"^an MXFP8 operand needs K a positive multiple of 32 "
                                         r"\(whole E8M0 scale groups\), not a matrix of shape "
                                         r"\(48, 3\)$"):
        quantize_mx_operand(np.ones((48, 3), np.float32))


def test_mx_operand_is_cut_at_scale_groups_only():
    operand = quantize_mx_operand(np.ones((64, 3), np.float32))
    assert operand[8:16, 1:3].shape == (8, 2)
    with pytest.raises(ValueError, match="whole scale groups of 8 partitions, not \\[4:16\\]"):
        operand[4:16, :]
    with pytest.raises(TypeError, match="not an MX element type"):
        MxOperand(np.zeros((8, 2, 4), np.float32), np.zeros((1, 2), np.uint8))


def test_mxfp8_on_a_tile_without_mx_is_one_line_naming_the_types():
    with pytest.raises(ValueError) as error:
        model_config(["bf16", "mxfp8"], config=TileConfig(8, 8, "all"))
    text = str(error.value)
    assert "\n" not in text and "mx type set" in text and "TYPES=all+mx" in text
    with pytest.raises(ValueError, match="rows must be a multiple of 8, not 12"):
        model_config(["mxfp8"], rows=12, cols=8)
    assert model_config(["mxfp8"], rows=8, cols=8).mx


@pytest.mark.parametrize("types,default", [("all+mx", ("bf16", "int8", "fp8", "mxfp8")),
                                           ("all", ("bf16", "int8", "fp8")),
                                           (None, ("bf16", "int8", "fp8"))])
def test_cli_default_precisions_add_mxfp8_only_with_mx_types(types, default, monkeypatch):
    from systolica.cli import minilm as minilm_cli
    from systolica.sim.options import resolve_tile

    monkeypatch.delenv("TYPES", raising=False)
    p = minilm_cli.parser()
    args = resolve_tile(p.parse_args([] if types is None else ["--types", types]))
    assert tuple(minilm_cli._check(p, args)[2]) == default


def test_cli_mxfp8_without_mx_types_is_one_line_naming_them(capsys, monkeypatch):
    from systolica.cli.simulate import main

    monkeypatch.delenv("TYPES", raising=False)
    with pytest.raises(SystemExit) as stop:
        main(["--workload", "minilm", "--rtl-folds", "0", "--workers", "1", "--types", "all",
              "--dtypes", "bf16,mxfp8"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert len(err.strip().splitlines()) == 1 and "lacks mx" in err and "all+mx" in err


def test_plan_counts_mx_matmuls_in_partition_rows(layer0):
    tokens = [6, 7, 5, 6, 6, 6]
    selected = [(0, "q"), (0, "down")]
    mx = {p.key: p for p in plan_programs(tokens, selected, ["mxfp8"], 8, 8)}
    bf16 = {p.key: p for p in plan_programs(tokens, selected, ["bf16"], 8, 8)}
    for gemm, k, m in (("q", 384, 384), ("down", 1536, 384)):
        mine = [p for key, p in mx.items() if f"/{gemm}/" in key]
        theirs = [p for key, p in bf16.items() if f"/{gemm}/" in key]
        # K-slabs of 8 partition rows of 4 elements: a quarter of BF16's matmuls.
        assert sum(p.matmuls for p in mine) == (k // 32) * (m // 8) \
            == sum(p.matmuls for p in theirs) // 4
        # Back to back, max(K beats = 8, N = 36) = 36 cycles a matmul, plus one fill and
        # drain per program.
        for p in mine:
            assert 36 * p.matmuls < p.model_cycles <= 36 * p.matmuls + 8 + 8 + 2 * 8 + 2
    with pytest.raises(ValueError, match="K of MX matmul 0 is 4 partition rows"):
        program_cycles(8, 8, [(4, 36)], mx=True)
